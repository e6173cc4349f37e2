// ONNX Runtime's time per op, the counterpart of `T2O_PROFILE=shapes t2o_bench`:
//   node ort_profile.js MODEL.onnx INPUT.npy THREADS ITERS [TOP]
// Runs the model ITERS times with ORT's profiler on (same session options as ort_bench.js, so
// ORT_NO_SPIN=1 works here too), then prints the kernel time of each op type and input shapes over
// all runs, largest first (TOP lines, default 40): total ms, share, calls, us per call. The
// profiler adds some time of its own to every op, so compare per-op figures, not the total, with a
// plain ort_bench.js run.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { readNpy, loadOrt } = require('./npy.js');
const ort = loadOrt();

async function main() {
  const [model, input, threads, iters, top] = process.argv.slice(2);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort_profile_'));
  const s = await ort.InferenceSession.create(model, {
    graphOptimizationLevel: 'all', executionMode: 'sequential',
    intraOpNumThreads: Number(threads), interOpNumThreads: 1,
    enableProfiling: true, profileFilePrefix: path.join(dir, 'profile'),
    ...(process.env.ORT_NO_SPIN === '1' ? { extra: { session: { intra_op: { allow_spinning: '0' } } } } : {}),
  });
  const feeds = { [s.inputNames[0]]: readNpy(ort, input) };
  for (let i = 0; i < Number(iters); ++i) await s.run(feeds);
  await s.release();  // writes the profile
  const file = fs.readdirSync(dir).find(f => f.endsWith('.json'));
  if (!file) throw new Error('ONNX Runtime wrote no profile');
  const events = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
  fs.rmSync(dir, { recursive: true, force: true });
  const shape = list => (list || []).map(t => Object.values(t)[0].join('x') || 'scalar').join(' ');
  const rows = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const key = `${e.args.op_name}  ${shape(e.args.input_type_shape)}`;
    const r = rows.get(key) || { us: 0, calls: 0 };
    r.us += e.dur;
    r.calls += 1;
    rows.set(key, r);
  }
  const total = [...rows.values()].reduce((a, r) => a + r.us, 0);
  console.log(`op profile (total ${(total / 1e3).toFixed(1)} ms over ${iters} runs):`);
  const sorted = [...rows.entries()].sort((a, b) => b[1].us - a[1].us).slice(0, Number(top || 40));
  for (const [key, r] of sorted)
    console.log(`  ${key.padEnd(60)} ${(r.us / 1e3).toFixed(2).padStart(10)} ms ${(100 * r.us / total).toFixed(1).padStart(5)}% ` +
                `${String(r.calls).padStart(6)} calls ${(r.us / r.calls).toFixed(1).padStart(9)} us`);
}
main().catch(e => { console.error('error: ' + (e && e.message || e)); process.exit(3); });
