// Runs an ONNX model in ONNX Runtime (onnxruntime-node): node ort_run.js MODEL.onnx IN_DIR OUT_DIR
// Reads IN_DIR/input_K.npy in graph-input order, writes OUT_DIR/output_K.npy in graph-output order.
// node ort_run.js --serve: the same for each line "MODEL<TAB>IN_DIR<TAB>OUT_DIR" read from stdin,
// answering "ok" or "error MESSAGE" on a line of stdout (one process for many models).
// Set NODE_PATH to the node_modules holding onnxruntime-node (default ~/.cache/torch2onnx/node_modules).
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');

function loadOrt() {
  try { return require('onnxruntime-node'); } catch (e) {
    return require(path.join(os.homedir(), '.cache/torch2onnx/node_modules/onnxruntime-node'));
  }
}
const ort = loadOrt();

const NPY = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array], '|b1': ['bool', Uint8Array], '|u1': ['uint8', Uint8Array],
  '|i1': ['int8', Int8Array], '<f2': ['float16', Uint16Array], '<i2': ['int16', Int16Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.slice(start, start + hlen).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(file + ': fortran order not supported');
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const [type, Arr] = NPY[descr] || (() => { throw new Error(file + ': dtype ' + descr); })();
  const body = buf.slice(start + hlen);
  const ab = body.buffer.slice(body.byteOffset, body.byteOffset + body.length);
  let data = new Arr(ab);
  if (type === 'bool') data = new Uint8Array(ab);
  return new ort.Tensor(type, type === 'bool' ? Array.from(data, v => !!v) : data, shape);
}

function writeNpy(file, t) {
  const inv = {};
  for (const [k, v] of Object.entries(NPY)) inv[v[0]] = k;
  const descr = inv[t.type];
  if (!descr) throw new Error('output type ' + t.type);
  const shape = t.dims.length === 1 ? `(${t.dims[0]},)` : `(${t.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  let data = t.data;
  if (t.type === 'bool') data = Uint8Array.from(data, v => (v ? 1 : 0));
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

async function runModel(model, inDir, outDir) {
  const session = await ort.InferenceSession.create(model, { graphOptimizationLevel: 'disabled' });
  const feeds = {};
  session.inputNames.forEach((name, k) => { feeds[name] = readNpy(path.join(inDir, `input_${k}.npy`)); });
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  session.outputNames.forEach((name, k) => writeNpy(path.join(outDir, `output_${k}.npy`), results[name]));
}

async function serve() {
  const lines = require('readline').createInterface({ input: process.stdin, terminal: false });
  for await (const line of lines) {
    const [model, inDir, outDir] = line.split('\t');
    let answer = 'ok';
    try {
      if (!outDir) throw new Error('expected MODEL<TAB>IN_DIR<TAB>OUT_DIR, got: ' + line);
      await runModel(model, inDir, outDir);
    } catch (e) {
      answer = 'error ' + String(e && e.message || e).replace(/\s+/g, ' ');
    }
    process.stdout.write(answer + '\n');
  }
}

async function main() {
  if (process.argv[2] === '--serve') return serve();
  const [model, inDir, outDir] = process.argv.slice(2);
  await runModel(model, inDir, outDir);
}

main().catch(e => { console.error(String(e && e.message || e)); process.exit(1); });
