// Times a model in ONNX Runtime:  node ort_bench.js MODEL.onnx INPUT.npy THREADS ITERS [OUT.npy]
// Graph optimizations on, sequential execution, intra-op threads = THREADS. Prints one JSON line
// (fields as t2o_bench's).
// ORT_NO_SPIN=1 turns off ORT's spinning thread pool (session.intra_op.allow_spinning=0), the
// counterpart of OMP_WAIT_POLICY=passive that t2o_bench uses; the default is ORT's own (spinning).
'use strict';
const { readNpy, writeNpy, loadOrt } = require('./npy.js');
const ort = loadOrt();

async function main() {
  const [model, input, threads, iters, out] = process.argv.slice(2);
  const rss0 = process.memoryUsage().rss / 1048576;  // peak growth over this: as rss_mb in t2o_bench.cpp
  const t0 = process.hrtime.bigint();
  const s = await ort.InferenceSession.create(model, {
    graphOptimizationLevel: 'all', executionMode: 'sequential',
    intraOpNumThreads: Number(threads), interOpNumThreads: 1,
    ...(process.env.ORT_NO_SPIN === '1' ? { extra: { session: { intra_op: { allow_spinning: '0' } } } } : {}),
  });
  const buildMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const feeds = { [s.inputNames[0]]: readNpy(ort, input) };
  let r;
  for (let i = 0; i < 3; ++i) r = await s.run(feeds);
  const cpu0 = process.cpuUsage();  // whole process, all threads: see cpu_ms in t2o_bench.cpp
  const ms = [];
  for (let i = 0; i < Number(iters); ++i) {
    const a = process.hrtime.bigint();
    r = await s.run(feeds);
    ms.push(Number(process.hrtime.bigint() - a) / 1e6);
  }
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1e3 / Number(iters);
  ms.sort((a, b) => a - b);
  if (out) writeNpy(out, r[s.outputNames[0]]);
  console.log(JSON.stringify({ median_ms: ms[ms.length >> 1], min_ms: ms[0], cpu_ms: cpuMs,
    rss_mb: process.resourceUsage().maxRSS / 1024 - rss0, build_ms: buildMs }));
}
main().catch(e => { console.error('error: ' + (e && e.message || e)); process.exit(3); });
