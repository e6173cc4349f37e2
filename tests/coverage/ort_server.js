// Persistent ONNX Runtime (onnxruntime-node) process for the coverage harness: one JSON request per
// stdin line, one JSON reply per stdout line, so thousands of small models do not each pay for
// starting node and loading the runtime.
//   {"op":"load","model":PATH,"opt":"all"|"disabled"}          -> {"ok":true,"id":N,"inputs":[..],"outputs":[..]}
//   {"op":"run","id":N,"feeds":{NAME:NPY},"out_dir":DIR}       -> {"ok":true,"outputs":[{"name":..,"file":..}]}
//   {"op":"free","id":N}                                        -> {"ok":true}   errors: {"ok":false,"error":MSG}
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');
const readline = require('readline');

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
  '<u2': ['uint16', Uint16Array], '<u4': ['uint32', Uint32Array], '<u8': ['uint64', BigUint64Array],
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
  const entry = NPY[descr];
  if (!entry) throw new Error(file + ': npy dtype ' + descr + ' has no ONNX Runtime tensor type here');
  const [type, Arr] = entry;
  const body = Buffer.from(buf.slice(start + hlen));  // copy: typed arrays need aligned offsets
  const ab = body.buffer.slice(body.byteOffset, body.byteOffset + body.length);
  const data = new Arr(ab);
  return new ort.Tensor(type, type === 'bool' ? Array.from(data, v => !!v) : data, shape);
}

function writeNpy(file, t) {
  const inv = {};
  for (const [k, v] of Object.entries(NPY)) inv[v[0]] = k;
  const descr = inv[t.type];
  if (!descr) throw new Error('output type ' + t.type + ' cannot be written as npy');
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

const sessions = new Map();
let nextId = 1;

async function handle(req) {
  if (req.op === 'load') {
    const opt = req.opt || 'all';
    const s = await ort.InferenceSession.create(req.model, { graphOptimizationLevel: opt, logSeverityLevel: 3 });
    const id = nextId++;
    sessions.set(id, s);
    return { ok: true, id, inputs: s.inputNames, outputs: s.outputNames };
  }
  if (req.op === 'run') {
    const s = sessions.get(req.id);
    if (!s) throw new Error('no session ' + req.id);
    const feeds = {};
    for (const [name, file] of Object.entries(req.feeds)) feeds[name] = readNpy(file);
    const results = await s.run(feeds);
    fs.mkdirSync(req.out_dir, { recursive: true });
    const outs = [];
    s.outputNames.forEach((name, k) => {
      const file = path.join(req.out_dir, `output_${k}.npy`);
      writeNpy(file, results[name]);
      outs.push({ name, file });
    });
    return { ok: true, outputs: outs };
  }
  if (req.op === 'free') {
    const s = sessions.get(req.id);
    if (s && s.release) await s.release();
    sessions.delete(req.id);
    return { ok: true };
  }
  throw new Error('unknown op ' + req.op);
}

const rl = readline.createInterface({ input: process.stdin });
let chain = Promise.resolve();
rl.on('line', line => {
  chain = chain.then(async () => {
    let reply;
    try { reply = await handle(JSON.parse(line)); } catch (e) {
      reply = { ok: false, error: String(e && e.message || e).split('\n').filter(s => s.trim())[0] || 'error',
                detail: String(e && e.message || e).slice(0, 2000) };
    }
    process.stdout.write(JSON.stringify(reply) + '\n');
  });
});
rl.on('close', () => { chain.then(() => process.exit(0)); });
