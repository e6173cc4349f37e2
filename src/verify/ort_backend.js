// verify's ONNX Runtime backend: node ort_backend.js MODEL.onnx DIR
// Reads DIR/inputs.json ({"name": "file.npy", ...}), runs the model with onnxruntime-node and
// writes DIR/out_K.npy plus DIR/outputs.json (the output names, in the model's order).
'use strict';
const fs = require('fs');
const path = require('path');

function loadNpyHelpers() {
  // Installed next to the binary (verify/npy.js) or run from the source tree (bench/npy.js).
  for (const p of [path.join(__dirname, 'npy.js'), path.join(__dirname, '..', '..', 'bench', 'npy.js')])
    if (fs.existsSync(p)) return require(p);
  throw new Error('npy.js not found next to ' + __filename);
}

async function main() {
  const [model, dir] = process.argv.slice(2);
  const { readNpy, writeNpy, loadOrt } = loadNpyHelpers();
  const ort = loadOrt();
  const files = JSON.parse(fs.readFileSync(path.join(dir, 'inputs.json'), 'utf8'));
  const session = await ort.InferenceSession.create(model, { graphOptimizationLevel: 'disabled' });
  const feeds = {};
  for (const name of session.inputNames) feeds[name] = readNpy(ort, path.join(dir, files[name]));
  const results = await session.run(feeds);
  session.outputNames.forEach((name, k) => writeNpy(path.join(dir, `out_${k}.npy`), results[name]));
  fs.writeFileSync(path.join(dir, 'outputs.json'), JSON.stringify(session.outputNames));
}

main().catch(e => { console.error(String(e && e.message || e)); process.exit(1); });
