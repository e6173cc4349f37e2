#!/usr/bin/python3
"""Operator and module coverage against PyTorch's own test databases (ctest coverage.opinfo).

For every OpInfo (torch.testing._internal.common_methods_invocations.op_db) and ModuleInfo
(common_modules.module_db) of the installed torch 1.13 with CPU samples, the first few samples of
float32 (and of int64 and bool where the op supports them) are wrapped as one nn.Module whose forward
takes the samples' tensors (everything else is baked in as constants) and returns every output.
That module is traced, saved and converted with `torch2onnx convert --data` (the real sample values)
at opsets 13 and 17, run in ONNX Runtime (onnxruntime-node) and in our runtime (t2o_rt_server: `torch2onnx run`'s Session in one
process for all models),
and compared with eager PyTorch. torch.onnx 1.13 exports the same module at the same opsets and runs
in ONNX Runtime, so both counts come from one run. The samples of one dtype form one model: when it
fails as a whole (trace, convert, export, load) every sample of it counts as failing, for torch2onnx
and torch.onnx alike (--split retries them one by one, to see which sample is the cause).

Tolerances (one table for every op and backend, never loosened per op):
  float32 rtol 1e-4 atol 1e-5 | float64 rtol 1e-7 atol 1e-7 | float16 rtol 1e-3 atol 1e-3 |
  integer and bool outputs exact. Output count, shape and dtype must match PyTorch's exactly.
Samples whose eager outputs differ between two runs (random ops) are not measured.

A result key is ENTRY|DTYPE|opsetN|BACKEND (BACKEND ort or runtime); it passes when every measured
sample passes. expected_pass.txt lists the keys that pass: the test fails when one of them stops
passing, and lists keys that newly pass. known_failures.txt gives a reason for every entry that has
a failing key; a failing entry without a reason also fails the test. --update rewrites both lists
(keeping written reasons; new ones get the first error line measured)."""
import argparse
import itertools
import json
import multiprocessing
import multiprocessing.connection
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib
import traceback
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "expected_pass.txt")
KNOWN = os.path.join(HERE, "known_failures.txt")
OPSETS = (13, 17)
BACKENDS = ("ort", "runtime")

try:
    import expecttest  # noqa: F401
except ImportError:  # not packaged in Debian; torch.testing._internal only needs its TestCase
    sys.path.insert(0, os.path.join(HERE, "stubs"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from ort_bridge import OrtBridge, RuntimeServer  # noqa: E402

TOL = {np.dtype("float32"): (1e-4, 1e-5), np.dtype("float64"): (1e-7, 1e-7), np.dtype("float16"): (1e-3, 1e-3)}
NPY_DTYPES = (torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.int16, torch.int8,
              torch.uint8, torch.bool)
DTYPE_NAMES = {torch.float32: "float32", torch.int64: "int64", torch.bool: "bool"}

ARGS = None
BRIDGE = None
RUNTIME = None


# ------------------------------------------------------------------ databases

def databases():
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_modules import module_db
    return op_db, module_db


def entry_names():
    op_db, module_db = databases()
    names = []
    for k, op in enumerate(op_db):
        names.append(("op", k, "op:" + op.name + (("." + op.variant_test_name) if op.variant_test_name else "")))
    for k, m in enumerate(module_db):
        names.append(("module", k, "module:" + m.name))
    return names


class Hole:
    """Stands for the k-th tensor of a sample inside its (input, args, kwargs) structure."""

    def __init__(self, k):
        self.k = k


def punch(obj, leaves):
    if isinstance(obj, torch.Tensor):
        leaves.append(obj.detach().clone())
        return Hole(len(leaves) - 1)
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(punch(v, leaves) for v in obj)
    if isinstance(obj, dict):
        return {k: punch(v, leaves) for k, v in obj.items()}
    return obj


def fill(obj, ts):
    if isinstance(obj, Hole):
        return ts[obj.k]
    if isinstance(obj, (list, tuple)):
        return type(obj)(fill(v, ts) for v in obj)
    if isinstance(obj, dict):
        return {k: fill(v, ts) for k, v in obj.items()}
    return obj


def flat_outputs(o, out):
    if isinstance(o, torch.Tensor):
        # ONNX has no complex type: a complex result is compared as its (real, imaginary) pairs, which
        # is what a model that returns one has to give (torch.view_as_real).
        out.append(torch.view_as_real(o.resolve_conj()) if o.is_complex() else o)
    elif isinstance(o, (list, tuple)):
        for v in o:
            flat_outputs(v, out)
    else:
        raise TypeError(f"a {type(o).__name__} output")
    return out


class Sample:
    def __init__(self, entry, dtype, idx, fn, template, leaves, module=None):
        self.entry, self.dtype, self.idx = entry, dtype, idx
        self.fn, self.template, self.leaves, self.module = fn, template, leaves, module
        self.want = None
        self.skip = None

    def call(self, ts):
        args, kwargs = fill(self.template, ts)
        return self.fn(*args, **kwargs)

    def key(self):
        return f"{self.dtype}#{self.idx}"


def make_samples(kind, index):
    op_db, module_db = databases()
    samples = []
    if kind == "op":
        op = op_db[index]
        name = "op:" + op.name + (("." + op.variant_test_name) if op.variant_test_name else "")
        supported = op.supported_dtypes("cpu")
        for dtype, n in ((torch.float32, ARGS.samples), (torch.int64, ARGS.int_samples), (torch.bool, ARGS.int_samples)):
            if dtype not in supported or n <= 0:
                continue
            try:
                # OpInfo draws its samples from the global generator: seeded per entry and dtype, the
                # samples do not depend on which entries a worker ran before.
                torch.manual_seed(zlib.crc32(f"{name}|{dtype}".encode()))
                got = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=False), n))
            except Exception as e:
                samples.append(_unmeasurable(name, dtype, 0, f"sample generation failed: {e}"))
                continue
            for i, si in enumerate(got):
                leaves = []
                template = punch(((si.input,) + tuple(si.args), dict(si.kwargs)), leaves)
                samples.append(Sample(name, DTYPE_NAMES[dtype], i, op.op, template, leaves))
    else:
        info = module_db[index]
        name = "module:" + info.name
        dtype = torch.float32
        if dtype not in info.dtypes:
            return samples
        try:
            torch.manual_seed(zlib.crc32(name.encode()))
            inputs = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=False, training=False)
        except Exception as e:
            return [_unmeasurable(name, dtype, 0, f"sample generation failed: {e}")]
        for i, mi in enumerate(inputs[: ARGS.samples]):
            try:
                torch.manual_seed(i)
                m = info.module_cls(*mi.constructor_input.args, **mi.constructor_input.kwargs).to(dtype).eval()
            except Exception as e:
                samples.append(_unmeasurable(name, dtype, i, f"module construction failed: {e}"))
                continue
            leaves = []
            template = punch((tuple(mi.forward_input.args), dict(mi.forward_input.kwargs)), leaves)
            samples.append(Sample(name, "float32", i, m, template, leaves, module=m))
    return samples


def _unmeasurable(name, dtype, i, why):
    s = Sample(name, DTYPE_NAMES.get(dtype, str(dtype)), i, None, None, [])
    s.skip = why[:300]
    return s


def prepare(s):
    """Eager reference outputs; marks samples that cannot be measured."""
    if s.skip:
        return
    bad = [t.dtype for t in s.leaves if t.dtype not in NPY_DTYPES]
    if bad:
        s.skip = f"input dtype {bad[0]}"
        return
    try:
        with torch.no_grad():
            torch.manual_seed(0)
            a = flat_outputs(s.call([t.clone() for t in s.leaves]), [])
            torch.manual_seed(0)
            b = flat_outputs(s.call([t.clone() for t in s.leaves]), [])
    except Exception as e:
        s.skip = f"eager: {str(e).splitlines()[0] if str(e) else type(e).__name__}"[:300]
        return
    if not a:
        s.skip = "no tensor output"
        return
    if any(t.dtype not in NPY_DTYPES for t in a):
        s.skip = f"output dtype {next(t.dtype for t in a if t.dtype not in NPY_DTYPES)}"
        return
    if any(x.shape != y.shape or not torch.equal(torch.nan_to_num(x), torch.nan_to_num(y)) for x, y in zip(a, b)):
        s.skip = "nondeterministic (random) output"
        return
    s.want = [t.detach().numpy().copy() for t in a]


class Batch(torch.nn.Module):
    """forward(i0, i1, ...) runs each sample on its own slice of the inputs and returns every output."""

    def __init__(self, samples):
        super().__init__()
        self.samples = samples
        self.mods = torch.nn.ModuleList([s.module for s in samples if s.module is not None])
        self.slices = []
        k = 0
        for s in samples:
            self.slices.append((k, k + len(s.leaves)))
            k += len(s.leaves)
        self.names = [f"i{j}" for j in range(k)]
        params = ", ".join(["self"] + self.names)
        ns = {}
        exec(f"def forward({params}):\n    return self.run_all([{', '.join(self.names)}])\n", ns)
        self.forward = ns["forward"].__get__(self)
        self.eval()  # the samples are eval-mode computations; a train-mode root only draws a warning

    def run_all(self, ts):
        outs = []
        for s, (a, b) in zip(self.samples, self.slices):
            flat_outputs(s.call(ts[a:b]), outs)
        return tuple(outs)

    def inputs(self):
        return [t for s in self.samples for t in s.leaves]


def compare(got, want):
    if len(got) != len(want):
        return f"{len(got)} outputs, PyTorch gives {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != w.shape:
            return f"output {k}: shape {list(g.shape)}, PyTorch {list(w.shape)}"
        if g.dtype != w.dtype:
            return f"output {k}: dtype {g.dtype}, PyTorch {w.dtype}"
        if w.dtype in TOL:
            rtol, atol = TOL[w.dtype]
            if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
                with np.errstate(invalid="ignore"):
                    d = np.abs(g.astype(np.float64) - w.astype(np.float64))
                d = np.nanmax(np.where(np.isnan(g) != np.isnan(w), np.inf, d)) if d.size else 0
                return f"output {k}: max abs diff {d:.3g} (rtol {rtol}, atol {atol})"
        elif not np.array_equal(g, w):
            return f"output {k}: values differ ({int(np.sum(g != w))} of {w.size} elements)"
    return None


def split_outputs(samples, outs):
    res, k = [], 0
    for s in samples:
        n = len(s.want)
        res.append(outs[k:k + n])
        k += n
    return res


def first_error_line(text):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    main = next((l for l in lines if not l.lower().startswith("warning")), lines[0] if lines else "")
    # "  aten::chunk along a dynamic dimension x1 at model.py:12": the op, what about it, its use count
    ops = re.findall(r"^\s*((?:aten|prim|quantized|torchvision)::[^\s(]+.*?) x\d+(?: at |$)", text, re.M)
    if ops:
        main = "no converter for " + ", ".join(ops[:3])
    return main[:300]


class WholeModelError(Exception):
    pass


def run_t2o(samples, workdir, opset):
    """{backend: [error or None per sample]} for one batched model at one opset; raises WholeModelError."""
    batch = Batch(samples)
    ins = batch.inputs()
    pt = os.path.join(workdir, "model.pt")
    try:
        with torch.no_grad():
            traced = torch.jit.trace(batch, tuple(ins), check_trace=False, strict=False)
        traced.save(pt)
    except Exception as e:
        raise WholeModelError("trace: " + (str(e).splitlines() or [type(e).__name__])[0][:250])
    feeds = {}
    data = []
    for name, t in zip(batch.names, ins):
        f = os.path.join(workdir, f"{name}.npy")
        np.save(f, np.array(t.numpy(), order="C"))  # ascontiguousarray makes 0-d arrays 1-d
        feeds[name] = t.numpy()
        data += ["--data", f"{name}={f}"]
    onnx_path = os.path.join(workdir, f"t2o_{opset}.onnx")
    try:
        p = subprocess.run([ARGS.t2o, "convert", pt, "-o", onnx_path, "--opset", str(opset), "--quiet"] + data,
                           capture_output=True, text=True, timeout=ARGS.timeout)
    except subprocess.TimeoutExpired:
        raise WholeModelError(f"convert: timeout ({ARGS.timeout} s)")
    if p.returncode != 0:
        raise WholeModelError(f"convert (exit {p.returncode}): " + first_error_line(p.stderr))
    per = {}
    try:
        got = BRIDGE.run(onnx_path, feeds, workdir)
        per["ort"] = [compare(g, s.want) for g, s in zip(split_outputs(samples, got), samples)]
    except Exception as e:
        per["ort"] = ["ORT: " + str(e)[:250]] * len(samples)
    try:
        n = sum(len(s.want) for s in samples)
        files = {name: os.path.join(workdir, name + ".npy") for name in batch.names}
        got = RUNTIME.run(onnx_path, files, os.path.join(workdir, f"rt_{opset}"), n)
        per["runtime"] = [compare(g, s.want) for g, s in zip(split_outputs(samples, got), samples)]
    except Exception as e:
        per["runtime"] = ["runtime: " + str(e)[:250]] * len(samples)
    return per


def run_torch_onnx(samples, workdir, opset):
    """[error or None per sample] for torch.onnx's export of the same batched model."""
    batch = Batch(samples)
    ins = batch.inputs()
    feeds = {name: t.numpy() for name, t in zip(batch.names, ins)}
    path = os.path.join(workdir, f"torch_onnx_{opset}.onnx")
    try:
        with torch.no_grad():
            torch.onnx.export(batch, tuple(ins), path, opset_version=opset, input_names=batch.names)
    except Exception as e:
        raise WholeModelError("export: " + (str(e).strip().splitlines() or [type(e).__name__])[0][:250])
    try:
        got = BRIDGE.run(path, feeds, workdir)
    except Exception as e:
        raise WholeModelError("ORT: " + str(e)[:250])
    return [compare(g, s.want) for g, s in zip(split_outputs(samples, got), samples)]


def measure(samples, fn, root):
    """fn over the batch of samples (one model). A whole-model error (trace, convert, export, load)
    counts for every sample of it; with --split the samples are then retried one at a time."""
    workdir = tempfile.mkdtemp(dir=root)
    try:
        return [(samples, fn(samples, workdir))]
    except WholeModelError as e:
        if len(samples) == 1 or not ARGS.split:
            return [(samples, str(e))]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out = []
    for s in samples:
        out.extend(measure([s], fn, root))
    return out


def _timeout(signum, frame):
    raise TimeoutError("entry timeout")


def run_entry(task):
    kind, index, name = task
    t0 = time.time()
    signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(ARGS.entry_timeout)
    rec = {"entry": name, "samples": []}
    try:
        if kind == "op":
            rec["aten"] = "aten::" + databases()[0][index].aten_name
        samples = make_samples(kind, index)
        for s in samples:
            prepare(s)
        live = [s for s in samples if not s.skip]
        per = {s.key(): {"dtype": s.dtype, "ours": {}, "torch_onnx": {}} for s in live}
        groups = defaultdict(list)  # one model per dtype: dtypes tend to fail for reasons of their own
        for s in live:
            groups[s.dtype].append(s)
        root = tempfile.mkdtemp(dir=ARGS.work_tmp)
        try:
            for opset in OPSETS:
                for group in groups.values():
                    for ss, r in measure(group, lambda ss, d: run_t2o(ss, d, opset), root):
                        for j, s in enumerate(ss):
                            for b in BACKENDS:
                                per[s.key()]["ours"][f"opset{opset}|{b}"] = r if isinstance(r, str) else r[b][j]
                    if ARGS.no_torch_onnx:
                        continue
                    for ss, r in measure(group, lambda ss, d: run_torch_onnx(ss, d, opset), root):
                        for j, s in enumerate(ss):
                            per[s.key()]["torch_onnx"][f"opset{opset}"] = r if isinstance(r, str) else r[j]
        finally:
            shutil.rmtree(root, ignore_errors=True)
        for s in samples:
            d = {"sample": s.key(), "dtype": s.dtype}
            if s.skip:
                d["skip"] = s.skip
            else:
                d.update(per[s.key()])
            rec["samples"].append(d)
    except TimeoutError:
        rec["error"] = f"entry timeout ({ARGS.entry_timeout} s)"
    except Exception as e:
        rec["error"] = "harness: " + traceback.format_exc().strip().splitlines()[-1][:300]
    finally:
        signal.alarm(0)
    rec["secs"] = round(time.time() - t0, 2)
    return rec


def init_worker(args):
    global ARGS, BRIDGE, RUNTIME
    ARGS = args
    BRIDGE = OrtBridge(timeout=args.timeout)
    RUNTIME = RuntimeServer(args.rt_server, timeout=args.timeout)
    torch.set_num_threads(1)
    import warnings
    warnings.filterwarnings("ignore")


def worker_main(conn, args):
    init_worker(args)
    while True:
        task = conn.recv()
        if task is None:
            return
        conn.send(run_entry(task))


def run_workers(tasks):
    """Runs the entries in ARGS.jobs worker processes. A worker that dies (a crash in torch) or stops
    answering costs only its current entry, which is recorded as such; each record is also appended
    to WORK/coverage_results.jsonl as it arrives."""
    ctx = multiprocessing.get_context("fork")
    path = os.path.join(ARGS.work, "coverage_results.jsonl")
    records = []
    if ARGS.resume and os.path.exists(path):
        names = {t[2] for t in tasks}
        for line in open(path):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec["entry"] in names and "error" not in rec:
                records.append(rec)
    done = {r["entry"] for r in records}
    jsonl = open(path, "w")
    for rec in records:
        jsonl.write(json.dumps(rec) + "\n")
    queue = [t for t in tasks if t[2] not in done]
    workers = []
    deadline = ARGS.entry_timeout + 120

    def spawn():
        a, b = ctx.Pipe()
        p = ctx.Process(target=worker_main, args=(b, ARGS), daemon=True)
        p.start()
        return {"proc": p, "conn": a, "task": None, "since": 0.0}

    def finish(w, rec):
        records.append(rec)
        jsonl.write(json.dumps(rec) + "\n")
        jsonl.flush()
        w["task"] = None
        if sys.stderr.isatty():
            print(f"\r{len(records)}/{len(tasks)} {rec['entry'][:50]:50s}", end="", file=sys.stderr)

    workers = [spawn() for _ in range(ARGS.jobs)]
    while queue or any(w["task"] for w in workers):
        for w in workers:
            if w["task"] is None and queue:
                w["task"] = queue.pop(0)
                w["since"] = time.time()
                w["conn"].send(w["task"])
        busy = [w for w in workers if w["task"]]
        ready = multiprocessing.connection.wait([w["conn"] for w in busy] + [w["proc"].sentinel for w in busy], 5)
        for k, w in enumerate(workers):
            if not w["task"]:
                continue
            if w["conn"] in ready:
                try:
                    finish(w, w["conn"].recv())
                    continue
                except EOFError:
                    pass
            dead = not w["proc"].is_alive()
            if dead or time.time() - w["since"] > deadline:
                why = f"worker died (exit {w['proc'].exitcode})" if dead else f"no answer in {deadline} s"
                finish(w, {"entry": w["task"][2], "samples": [], "error": why})
                w["proc"].kill()
                workers[k] = spawn()
    for w in workers:
        w["conn"].send(None)
        w["proc"].join(10)
    jsonl.close()
    return records


# ------------------------------------------------------------------ results

def keyed(records):
    """{key: (status, first error)} with key ENTRY|DTYPE|opsetN|BACKEND, and the torch.onnx twin."""
    ours, ref = {}, {}
    for rec in records:
        groups = defaultdict(list)
        refg = defaultdict(list)
        for s in rec["samples"]:
            if "skip" in s:
                continue
            for k, err in s["ours"].items():
                opset, b = k.split("|")
                groups[f"{rec['entry']}|{s['dtype']}|{opset}|{b}"].append(err)
            for opset, err in s["torch_onnx"].items():
                refg[f"{rec['entry']}|{s['dtype']}|{opset}"].append(err)
        for k, errs in groups.items():
            bad = [e for e in errs if e]
            ours[k] = ("pass" if not bad else "fail", bad[0] if bad else None, len(errs) - len(bad), len(errs))
        for k, errs in refg.items():
            bad = [e for e in errs if e]
            ref[k] = ("pass" if not bad else "fail", bad[0] if bad else None, len(errs) - len(bad), len(errs))
    return ours, ref


def read_list(path):
    if not os.path.exists(path):
        return {}
    out = {}
    for line in open(path):
        line = line.rstrip("\n")
        if line.strip() and not line.startswith("#"):
            k, _, why = line.partition("  #")
            out[k.strip()] = why.strip()
    return out


def summarize(records, ours, ref):
    s = {}
    for opset in OPSETS:
        d = {}
        for b in BACKENDS:
            ks = [k for k in ours if k.endswith(f"|opset{opset}|{b}")]
            d[f"t2o_{b}_keys"] = [sum(ours[k][0] == "pass" for k in ks), len(ks)]
            d[f"t2o_{b}_samples"] = [sum(ours[k][2] for k in ks), sum(ours[k][3] for k in ks)]
        rk = [k for k in ref if k.endswith(f"|opset{opset}")]
        d["torch_onnx_keys"] = [sum(ref[k][0] == "pass" for k in rk), len(rk)]
        d["torch_onnx_samples"] = [sum(ref[k][2] for k in rk), sum(ref[k][3] for k in rk)]
        entries = sorted({k.split("|")[0] for k in rk})

        def entry_pass(table, suffix):
            return sum(all(table[k][0] == "pass" for k in table if k.startswith(e + "|") and k.endswith(suffix))
                       for e in entries)
        d["entries"] = len(entries)
        d["t2o_ort_entries"] = entry_pass(ours, f"|opset{opset}|ort")
        d["t2o_runtime_entries"] = entry_pass(ours, f"|opset{opset}|runtime")
        d["torch_onnx_entries"] = entry_pass(ref, f"|opset{opset}")
        s[f"opset{opset}"] = d
    s["entries_total"] = len(records)
    s["entries_unmeasured"] = sum(1 for r in records if not any("skip" not in x for x in r["samples"]))
    return s


def print_summary(s):
    print("coverage (OpInfo + ModuleInfo samples; an entry passes when all its measured samples pass):")
    print(f"  {s['entries_total']} entries, {s['entries_unmeasured']} without a measurable sample")
    for opset in OPSETS:
        d = s[f"opset{opset}"]
        print(f"  opset {opset}: samples passing  torch2onnx+ORT {d['t2o_ort_samples'][0]}/{d['t2o_ort_samples'][1]}"
              f"  torch2onnx runtime {d['t2o_runtime_samples'][0]}/{d['t2o_runtime_samples'][1]}"
              f"  torch.onnx+ORT {d['torch_onnx_samples'][0]}/{d['torch_onnx_samples'][1]}")
        print(f"  opset {opset}: entries passing  torch2onnx+ORT {d['t2o_ort_entries']}/{d['entries']}"
              f"  torch2onnx runtime {d['t2o_runtime_entries']}/{d['entries']}"
              f"  torch.onnx+ORT {d['torch_onnx_entries']}/{d['entries']}")


def update_lists(ours, ref):
    known = read_list(KNOWN)
    passing = sorted(k for k, v in ours.items() if v[0] == "pass")
    with open(EXPECTED, "w") as f:
        f.write("# ENTRY|DTYPE|opsetN|BACKEND keys that pass (tests/coverage/opinfo_coverage.py --update writes it)\n")
        f.write("\n".join(passing) + "\n")
    failing = defaultdict(list)
    for k, v in ours.items():
        if v[0] == "fail":
            failing[k.split("|")[0]].append((k, v[1]))
    lines = ["# Entries with a failing key, one line each with the reason. --update keeps written reasons and",
             "# gives new entries the first error measured; say more where the cause is known."]
    for e in sorted(failing):
        why = known.get(e)
        if not why:
            err = failing[e][0][1] or ""
            ref_ok = any(v[0] == "pass" for k, v in ref.items() if k.startswith(e + "|"))
            why = err if ref_ok else f"torch.onnx also fails; {err}"
        lines.append(f"{e}  # {why}")
    with open(KNOWN, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--t2o", required=True, help="torch2onnx executable")
    ap.add_argument("--rt-server", required=True, help="t2o_rt_server executable (our runtime, persistent)")
    ap.add_argument("--work", required=True, help="folder for results (coverage_results.json)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--samples", type=int, default=3, help="float32 samples per entry")
    ap.add_argument("--int-samples", type=int, default=2, help="int64 and bool samples per entry")
    ap.add_argument("-k", dest="pattern", help="regex on entry names (a partial run checks only those)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per convert / run")
    ap.add_argument("--entry-timeout", type=int, default=400)
    ap.add_argument("--split", action="store_true",
                    help="retry the samples of a model that fails as a whole one by one (slower; sample counts "
                         "then show which samples fail, key results are the same)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the entries already in WORK/coverage_results.jsonl (from an interrupted run)")
    ap.add_argument("--update", action="store_true", help="rewrite expected_pass.txt and known_failures.txt")
    ap.add_argument("--shard", metavar="I/N",
                    help="only the entries whose name hashes (crc32) to I modulo N: a partial run that checks "
                         "the expected keys of those entries (the default test label runs one shard)")
    ap.add_argument("--no-torch-onnx", action="store_true",
                    help="do not measure torch.onnx (the check needs only torch2onnx's results)")
    ARGS = ap.parse_args()
    ARGS.t2o = os.path.abspath(ARGS.t2o)
    ARGS.rt_server = os.path.abspath(ARGS.rt_server)
    os.makedirs(ARGS.work, exist_ok=True)
    ARGS.work_tmp = tempfile.mkdtemp(prefix="cov_", dir=ARGS.work)
    t0 = time.time()
    tasks = entry_names()
    if ARGS.pattern:
        tasks = [t for t in tasks if re.search(ARGS.pattern, t[2])]
    if ARGS.shard:
        m = re.fullmatch(r"(\d+)/(\d+)", ARGS.shard)
        if not m or not 0 <= int(m[1]) < int(m[2]):
            ap.error("--shard wants I/N with 0 <= I < N")
        i, n = int(m[1]), int(m[2])
        tasks = [t for t in tasks if zlib.crc32(t[2].encode()) % n == i]
        print(f"shard {i}/{n}: {len(tasks)} entries")
    partial = bool(ARGS.pattern or ARGS.shard)
    # slow entries first, so the two workers finish together
    tasks.sort(key=lambda t: (t[0] != "module", t[2]))
    records = run_workers(tasks)
    shutil.rmtree(ARGS.work_tmp, ignore_errors=True)
    records.sort(key=lambda r: r["entry"])
    ours, ref = keyed(records)
    s = summarize(records, ours, ref)
    s["seconds"] = round(time.time() - t0, 1)
    with open(os.path.join(ARGS.work, "coverage_results.json"), "w") as f:
        json.dump({"summary": s, "records": records,
                   "keys": {k: list(v) for k, v in ours.items()},
                   "torch_onnx_keys": {k: list(v) for k, v in ref.items()}}, f, indent=1)
    # An entry the harness could not measure because running a tool failed (the executable was being
    # rebuilt, a server died) says nothing about the converter; the lists are not rewritten from such a run, and the check fails.
    def harness_broke(r):
        err = str(r.get("error", ""))
        return err.startswith("harness:") and any(e in err for e in ("PermissionError", "FileNotFoundError",
                                                                      "BrokenPipeError", "ConnectionError"))
    broken = [r["entry"] for r in records if harness_broke(r)]
    if broken:
        print(f"FAIL: the harness failed on {len(broken)} entries (first: {broken[0]}: "
              f"{next(r['error'] for r in records if r['entry'] == broken[0])}); lists left as they are")
        return 1
    if ARGS.update and not partial:
        update_lists(ours, ref)

    expected = read_list(EXPECTED)
    known = read_list(KNOWN)
    ran = {k for k in ours}
    regressions = sorted(k for k in expected if k in ran and ours[k][0] != "pass")
    ran_entries = {r["entry"] for r in records}
    missing = sorted(k for k in expected if k not in ran and (not partial or k.split("|")[0] in ran_entries))
    new_pass = sorted(k for k, v in ours.items() if v[0] == "pass" and k not in expected)
    failing_entries = sorted({k.split("|")[0] for k, v in ours.items() if v[0] == "fail"})
    unexplained = [e for e in failing_entries if not known.get(e)]
    for k in regressions:
        print(f"REGRESSION {k}: {ours[k][1]}")
    for k in missing:
        print(f"REGRESSION {k}: no longer measured")
    for e in unexplained:
        print(f"UNEXPLAINED {e}: fails without a reason in known_failures.txt: "
              f"{next(v[1] for k, v in ours.items() if k.startswith(e + '|') and v[0] == 'fail')}")
    if new_pass:
        print(f"{len(new_pass)} keys pass that expected_pass.txt does not list (run with --update):")
        for k in new_pass[:50]:
            print(f"  NEW PASS {k}")
    print_summary(s)
    print(f"  ({s['seconds']:.0f} s, {ARGS.jobs} jobs; details in {os.path.join(ARGS.work, 'coverage_results.json')})")
    return 1 if regressions or missing or unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
