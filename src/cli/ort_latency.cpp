#include "cli/ort_latency.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "onnx/tensor_io.h"

namespace fs = std::filesystem;

namespace t2o::cli {

namespace {

// argv: DIR RUNS THREADS MODEL...; DIR holds NAME.npy per input and names.json (the input names).
// Prints one JSON line: {"version", "median_ms": [...]}; exits 3 with the reason on stderr.
constexpr const char* kScript = R"JS('use strict';
const fs = require('fs'), path = require('path'), os = require('os');
function loadOrt() {
  const cache = process.env.T2O_CACHE_DIR || path.join(os.homedir(), '.cache', 'torch2onnx');
  try { return require(path.join(cache, 'node_modules', 'onnxruntime-node')); } catch (e) { return require('onnxruntime-node'); }
}
const CODES = { '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array], '|b1': ['bool', Uint8Array], '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array],
  '<f2': ['float16', Uint16Array], '<i2': ['int16', Int16Array] };
function readNpy(ort, file) {
  const buf = fs.readFileSync(file);
  const start = buf[6] === 1 ? 10 : 12;
  const hlen = buf[6] === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const header = buf.slice(start, start + hlen).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(Boolean).map(Number);
  if (!CODES[descr]) throw new Error('unsupported input dtype ' + descr);
  const [type, Arr] = CODES[descr];
  const body = buf.slice(start + hlen);
  const ab = body.buffer.slice(body.byteOffset, body.byteOffset + body.length);
  return new ort.Tensor(type, type === 'bool' ? Array.from(new Uint8Array(ab), v => !!v) : new Arr(ab), shape);
}
async function main() {
  const [dir, runs, threads, ...models] = process.argv.slice(2);
  const ort = loadOrt();
  const names = JSON.parse(fs.readFileSync(path.join(dir, 'names.json'), 'utf8'));
  const feeds = {};
  names.forEach((n, k) => { feeds[n] = readNpy(ort, path.join(dir, 'input_' + k + '.npy')); });
  const out = [];
  for (const m of models) {
    const opts = { graphOptimizationLevel: 'all', executionMode: 'sequential', interOpNumThreads: 1 };
    if (Number(threads) > 0) opts.intraOpNumThreads = Number(threads);
    const s = await ort.InferenceSession.create(m, opts);
    await s.run(feeds);
    const ms = [];
    for (let i = 0; i < Number(runs); ++i) {
      const a = process.hrtime.bigint();
      await s.run(feeds);
      ms.push(Number(process.hrtime.bigint() - a) / 1e6);
    }
    ms.sort((a, b) => a - b);
    out.push(ms[ms.length >> 1]);
  }
  let version = '';
  try { version = require(path.join(path.dirname(require.resolve('onnxruntime-common')), '..', 'package.json')).version; } catch (e) {}
  if (!version && ort.env && ort.env.versions) version = ort.env.versions.common || '';
  console.log(JSON.stringify({ version, median_ms: out }));
}
main().catch(e => { console.error((e && e.message || String(e)).split('\n')[0]); process.exit(3); });
)JS";

std::string quoted(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

}  // namespace

OrtLatency ort_latency(const std::vector<std::string>& models, const InputSet& inputs, int runs, int threads) {
  OrtLatency r;
  std::error_code ec;
  fs::path dir = fs::temp_directory_path() / ("t2o_ort_latency_" + std::to_string(::getpid()));
  fs::create_directories(dir, ec);
  if (ec) {
    r.error = "cannot create " + dir.string() + ": " + ec.message();
    return r;
  }
  try {
    nlohmann::json names = nlohmann::json::array();
    int k = 0;
    for (const auto& [name, t] : inputs) {
      names.push_back(name);
      write_npy((dir / ("input_" + std::to_string(k++) + ".npy")).string(), t);
    }
    std::ofstream(dir / "names.json") << names.dump();
    std::ofstream(dir / "time.js") << kScript;
    std::string cmd = "node " + quoted((dir / "time.js").string()) + " " + quoted(dir.string()) + " " +
                      std::to_string(runs) + " " + std::to_string(threads);
    for (const std::string& m : models) cmd += " " + quoted(fs::absolute(m).string());
    cmd += " 2>" + quoted((dir / "err.txt").string());
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      int status = ::pclose(p);
      if (status != 0) {
        std::ifstream e(dir / "err.txt");
        std::string line;
        std::getline(e, line);
        r.error = line.empty() ? "node exited with status " + std::to_string(status) : line;
        if (r.error.find("Cannot find module") != std::string::npos || r.error.find("not found") != std::string::npos)
          r.error = "ONNX Runtime is not available (needs node and onnxruntime-node: scripts/setup.sh installs them)";
      } else {
        nlohmann::json j = nlohmann::json::parse(out);
        r.version = j.value("version", "");
        for (const auto& v : j.at("median_ms")) r.median_ms.push_back(v.get<double>());
      }
    } else {
      r.error = "cannot start node";
    }
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  fs::remove_all(dir, ec);
  if (r.error.empty() && r.median_ms.size() != models.size()) r.error = "ONNX Runtime gave no figures";
  return r;
}

}  // namespace t2o::cli
