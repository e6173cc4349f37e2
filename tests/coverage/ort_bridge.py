"""Client of ort_server.js: one onnxruntime-node process per Python process, reused for every model."""
import json
import os
import select
import subprocess

import numpy as np

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_server.js")


class OrtError(RuntimeError):
    pass


class OrtBridge:
    def __init__(self, timeout=120):
        self.proc = None
        self.timeout = timeout

    def _start(self):
        env = dict(os.environ)
        env.setdefault("NODE_PATH", os.path.expanduser("~/.cache/torch2onnx/node_modules"))
        self.proc = subprocess.Popen(["node", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)

    def close(self):
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(10)
            except Exception:
                self.proc.kill()
            self.proc = None

    def _call(self, req):
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.proc.kill()
            self.proc = None
            raise OrtError("ONNX Runtime did not answer (timeout or crash)")
        rep = json.loads(line)
        if not rep.get("ok"):
            raise OrtError(rep.get("error", "error"))
        return rep

    def run(self, model, feeds, workdir):
        """Runs MODEL on the feeds (name -> array) that it takes; returns its outputs in graph order."""
        rep = self._call({"op": "load", "model": model})
        sid = rep["id"]
        try:
            files = {}
            for k, name in enumerate(rep["inputs"]):
                if name not in feeds:
                    raise OrtError(f"the model wants an input '{name}' that the sample does not have")
                files[name] = os.path.join(workdir, f"ort_in{k}.npy")
                np.save(files[name], np.array(feeds[name], order="C"))  # ascontiguousarray makes 0-d 1-d
            out = self._call({"op": "run", "id": sid, "feeds": files, "out_dir": os.path.join(workdir, "ort_out")})
            return [np.load(o["file"]) for o in out["outputs"]]
        finally:
            self._call({"op": "free", "id": sid})


class RuntimeServer:
    """Client of t2o_rt_server (our runtime, one process for every model)."""

    def __init__(self, exe, timeout=120):
        self.exe = exe
        self.timeout = timeout
        self.proc = None

    def close(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def run(self, model, feeds_files, out_dir, n_outputs):
        """feeds_files: name -> .npy path. Returns the outputs (graph order) or raises OrtError."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([self.exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True, bufsize=1)
        line = "\t".join([model, out_dir] + [f"{k}={v}" for k, v in feeds_files.items()])
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        rep = self.proc.stdout.readline().strip() if ready else ""
        if not rep:
            code = self.proc.poll()
            self.close()
            raise OrtError("our runtime " + ("crashed (exit %s)" % code if code is not None else "timed out"))
        if rep != "ok":
            raise OrtError(rep[len("error: "):] if rep.startswith("error: ") else rep)
        return [np.load(os.path.join(out_dir, f"output_{k}.npy")) for k in range(n_outputs)]
