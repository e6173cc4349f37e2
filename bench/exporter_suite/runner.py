"""runner.py list IDS_FILE | runner.py run IDS_FILE OUT

list: writes the ids (JSON strings, one per line) of the tests at opset $OPSET (default 17), scripted
and traced, initializers not as inputs. run: runs them and appends one JSON line per test to OUT
(status pass / fail / skip / no_run_test, the stage that failed, the message, seconds)."""
import importlib.util
import json
import os
import re
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_test_common  # noqa: E402,F401  (ours, before the test module imports the name)


def _load_suite():
    """The upstream test module, with its opset range opened up to 17 (PyTorch 1.13's file stops at
    16 because its ONNX Runtime of the time did not run opset 17)."""
    spec = importlib.util.find_spec("test_pytorch_onnx_onnxruntime")
    if spec is None:
        sys.exit("test_pytorch_onnx_onnxruntime.py not found: see bench/exporter_suite/README.md")
    src = open(spec.origin, encoding="utf-8").read()
    src = re.sub(r"_constants\.ONNX_MAX_OPSET\s*-\s*1", "17", src)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    exec(compile(src, spec.origin, "exec"), mod.__dict__)
    return mod


T = _load_suite()

OPSET = int(os.environ.get("OPSET", "17"))


def classes():
    for s in (True, False):
        name = f"TestONNXRuntime_opset_version_{OPSET}_is_script_{s}_keep_initializers_as_inputs_False"
        yield name, getattr(T, name)


def cmd_list(out):
    with open(out, "w") as f:
        for name, cls in classes():
            for m in unittest.TestLoader().getTestCaseNames(cls):
                f.write(json.dumps(f"{name}.{m}") + "\n")


class Timeout(Exception):
    pass


def _alarm(*_):
    raise Timeout("timeout")


def cmd_run(ids_file, out):
    done = set()
    if os.path.exists(out):
        for line in open(out):
            try:
                done.add(json.loads(line)["id"])
            except Exception:
                pass
    ids = [json.loads(l) for l in open(ids_file) if l.strip()]
    ids = [i for i in dict.fromkeys(ids) if i not in done]
    signal.signal(signal.SIGALRM, _alarm)
    for tid in ids:
        with open(out + ".current", "w") as f:
            f.write(json.dumps(tid))
        cname, meth = tid.split(".", 1)
        test = getattr(T, cname)(meth)
        res = unittest.TestResult()
        t0 = time.time()
        signal.alarm(int(os.environ.get("TEST_TIMEOUT", "180")))
        try:
            test.run(res)
        except Timeout:
            res.errors.append((test, "Timeout: timeout"))
        finally:
            signal.alarm(0)
        rec = {"id": tid, "secs": round(time.time() - t0, 2), "calls": getattr(test, "run_test_calls", 0)}
        if res.skipped:
            rec["status"] = "skip"
        elif res.failures or res.errors:
            tb = (res.failures or res.errors)[0][1]
            last = [l for l in tb.strip().splitlines() if l.strip()][-1]
            rec["status"] = "fail"
            tagged = re.search(r"\[(export|inputs|ort|outputs|mismatch|dtype)\]", last)
            stage = tagged.group(1) if tagged else "timeout" if "Timeout" in last else "other"
            rec["stage"] = stage
            rec["msg"] = last[:400]
            # The exception's whole text (a converter's report spans lines; its last is the hint).
            lines = tb.strip().splitlines()
            start = max((i for i, l in enumerate(lines) if l.startswith("  File ")), default=-1) + 2
            rec["detail"] = "\n".join(lines[start:])[:1500]
        else:
            rec["status"] = "pass" if rec["calls"] else "no_run_test"
        with open(out, "a") as f:
            f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "list":
        cmd_list(sys.argv[2])
    else:
        cmd_run(sys.argv[2], sys.argv[3])
