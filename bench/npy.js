// Minimal .npy reading and writing for onnxruntime-node tensors (little-endian, C order).
'use strict';
const fs = require('fs');

const CODES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array], '|b1': ['bool', Uint8Array], '|u1': ['uint8', Uint8Array],
  '|i1': ['int8', Int8Array], '<f2': ['float16', Uint16Array], '<i2': ['int16', Int16Array],
};

function readNpy(ort, file) {
  const buf = fs.readFileSync(file);
  if (buf.slice(0, 6).toString('latin1') !== '\x93NUMPY') throw new Error(file + ': not a .npy file');
  const major = buf[6];
  const start = major === 1 ? 10 : 12;
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const header = buf.slice(start, start + hlen).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(file + ': Fortran order is not supported');
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(Boolean).map(Number);
  if (!CODES[descr]) throw new Error(file + ': unsupported dtype ' + descr);
  const [type, Arr] = CODES[descr];
  const body = buf.slice(start + hlen);
  const ab = body.buffer.slice(body.byteOffset, body.byteOffset + body.length);
  const data = type === 'bool' ? Array.from(new Uint8Array(ab), v => !!v) : new Arr(ab);
  return new ort.Tensor(type, data, shape);
}

function writeNpy(file, t) {
  const descr = Object.keys(CODES).find(k => CODES[k][0] === t.type);
  if (!descr) throw new Error('cannot write ' + t.type + ' as .npy');
  const shape = t.dims.length === 1 ? `(${t.dims[0]},)` : `(${t.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre.writeUInt16LE(header.length, 8);
  const data = t.type === 'bool' ? Uint8Array.from(t.data, v => (v ? 1 : 0)) : t.data;
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'),
    Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

function loadOrt() {
  const path = require('path');
  const os = require('os');
  const cache = process.env.T2O_CACHE_DIR || path.join(os.homedir(), '.cache', 'torch2onnx');
  try { return require(path.join(cache, 'node_modules', 'onnxruntime-node')); } catch (e) {
    return require('onnxruntime-node');
  }
}

module.exports = { readNpy, writeNpy, loadOrt };
