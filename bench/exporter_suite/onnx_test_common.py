"""Stand-in for PyTorch's test/onnx/onnx_test_common.py: `run_test` exports with the exporter named by
EXPORTER (t2o: torch2onnx.export, torch: torch.onnx.export), runs the file in ONNX Runtime 1.30 (the
Node package, through tests/coverage/ort_bridge.py) and compares with eager PyTorch the way
torch.onnx's own verification does: inputs flattened and fed by position (Python numbers too,
quantized tensors as integers, scale and zero point), keyword inputs by name, every output's shape,
dtype and values (rtol/atol of the test, NaN equal), then the same for additional_test_inputs.
An export error propagates unchanged, so tests that expect torch.onnx's errors see ours."""
import copy
import json
import os
import sys
import tempfile
import unittest

import numpy as np
import onnx
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "coverage"))
from ort_bridge import OrtBridge  # noqa: E402

MIN_ONNX_OPSET_VERSION = 9
MAX_ONNX_OPSET_VERSION = 17
EXPORTER = os.environ.get("EXPORTER", "t2o")
RESULTS = os.environ.get("RESULTS")
_ORT = OrtBridge(timeout=120)


def parameterize_class_name(cls, idx, input_dicts):
    return f"{cls.__name__}_" + "_".join(f"{k}_{v}" for k, v in input_dicts.items())


class Stage(Exception):
    def __init__(self, stage, msg):
        super().__init__(f"[{stage}] {msg}")
        self.stage = stage


_QV = {torch.quint8: torch.uint8, torch.qint8: torch.int8, torch.qint32: torch.int32}


def _leaves(v, out, numbers, inputs=True):
    if isinstance(v, torch.Tensor) and v.is_quantized:
        scale = torch.tensor(v.q_scale(), dtype=torch.double if inputs else torch.float32)
        zp = torch.tensor(v.q_zero_point(), dtype=torch.int64 if inputs else _QV[v.dtype])
        q = (v.dequantize() / scale + zp).to(_QV[v.dtype])
        out.extend([q.numpy(), scale.numpy(), zp.numpy()])
    elif isinstance(v, torch.Tensor):
        out.append(v.detach().cpu().numpy() if v.dtype != torch.bfloat16 else v.float().numpy())
    elif isinstance(v, bool) and numbers:
        out.append(np.array(v))
    elif isinstance(v, (int, float)) and numbers:
        out.append(np.array(v))
    elif isinstance(v, (list, tuple)):
        for e in v:
            _leaves(e, out, numbers)
    elif isinstance(v, dict):
        for e in v.values():
            _leaves(e, out, numbers)
    return out


def _export(model, args, kwargs, path, opset, **kw):
    full = tuple(args) + ((kwargs,) if kwargs or (args and isinstance(args[-1], dict)) else ())
    if EXPORTER == "t2o":
        import torch2onnx
        torch2onnx.export(model, full, path, opset_version=opset, **kw)
    else:
        torch.onnx.export(model, full, path, opset_version=opset, **kw)


class _TestONNXRuntime(unittest.TestCase):
    opset_version = 17
    keep_initializers_as_inputs = False
    is_script = False

    def setUp(self):
        torch.manual_seed(0)
        np.random.seed(seed=0)
        self.is_script_test_enabled = True
        self.check_shape = True
        self.check_dtype = True
        self.run_test_calls = 0

    def run_test(self, model, input_args, input_kwargs=None, rtol=1e-3, atol=1e-7, do_constant_folding=True,
                 dynamic_axes=None, additional_test_inputs=None, input_names=None, output_names=None,
                 fixed_batch_size=False, training=None, remained_onnx_input_idx=None, verbose=False):
        if isinstance(remained_onnx_input_idx, dict):
            s_idx, t_idx = remained_onnx_input_idx["scripting"], remained_onnx_input_idx["tracing"]
        else:
            s_idx = t_idx = remained_onnx_input_idx
        is_model_script = isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction))
        if self.is_script_test_enabled and self.is_script:
            sm = model if is_model_script else torch.jit.script(model)
            self._run(sm, input_args, input_kwargs, rtol, atol, do_constant_folding, dynamic_axes,
                      additional_test_inputs, input_names, output_names, training, s_idx, True)
        if not is_model_script and not self.is_script:
            self._run(model, input_args, input_kwargs, rtol, atol, do_constant_folding, dynamic_axes,
                      additional_test_inputs, input_names, output_names, training, t_idx, False)

    def _run(self, model, input_args, input_kwargs, rtol, atol, do_constant_folding, dynamic_axes,
             additional_test_inputs, input_names, output_names, training, remained, scripted):
        self.run_test_calls += 1
        if input_kwargs is None:
            input_kwargs = {}
        if isinstance(input_args, torch.Tensor):
            input_args = (input_args,)
        if isinstance(input_args, list):
            input_args = tuple(input_args)
        if training is not None and training == torch.onnx.TrainingMode.TRAINING:
            model.train()
        elif training is None or training == torch.onnx.TrainingMode.EVAL:
            model.eval()
        work = tempfile.mkdtemp(prefix="exp_")
        path = os.path.join(work, "m.onnx")
        kw = dict(do_constant_folding=do_constant_folding, dynamic_axes=dynamic_axes, input_names=input_names,
                  output_names=output_names, keep_initializers_as_inputs=self.keep_initializers_as_inputs)
        if training is not None:
            kw["training"] = training
        with torch.no_grad():
            first_want = model(*copy.deepcopy(input_args), **copy.deepcopy(input_kwargs))
            try:
                _export(model, copy.deepcopy(input_args), copy.deepcopy(input_kwargs), path, self.opset_version, **kw)
            except Exception as e:  # noqa: BLE001
                e.args = (f"[export] {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}",) + tuple(e.args[1:])
                raise
            sets = [(input_args, input_kwargs)]
            for extra in additional_test_inputs or []:
                if isinstance(extra, torch.Tensor):
                    extra = (extra,)
                sets.append((tuple(extra), {}))
            m = onnx.load(path)
            inits = {i.name for i in m.graph.initializer}
            names = [i.name for i in m.graph.input if i.name not in inits]
            for k_set, (args, kwargs) in enumerate(sets):
                want = first_want if k_set == 0 else model(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                leaves = _leaves(args, [], numbers=True)
                if remained is not None:
                    leaves = [leaves[i] for i in remained]
                feeds = {k: _leaves(v, [], True)[0] for k, v in kwargs.items()
                         if isinstance(v, torch.Tensor) or isinstance(v, (int, float))}
                pos = [n for n in names if n not in feeds]
                if len(leaves) > len(pos):
                    raise ValueError(f"[inputs] got too many positional inputs: {len(leaves)} inputs given, the model takes {len(pos)} ({names})")
                for n, v in zip(pos, leaves):
                    feeds[n] = v
                try:
                    got = _ORT.run(path, feeds, work)
                except Exception as e:  # noqa: BLE001
                    raise Stage("ort", str(e).strip().splitlines()[0][:300])
                want = _leaves(want if isinstance(want, (tuple, list, dict)) else (want,), [], True, inputs=False)
                if len(got) != len(want):
                    raise Stage("outputs", f"{len(got)} outputs, PyTorch has {len(want)}")
                for k, (g, w) in enumerate(zip(got, want)):
                    if not self.check_shape:
                        try:
                            g = np.broadcast_to(g, w.shape) if g.shape != w.shape else g
                        except ValueError:
                            pass
                    if g.shape != w.shape:
                        raise Stage("mismatch", f"output {k}: shape {g.shape} vs {w.shape}")
                    if self.check_dtype and g.dtype != w.dtype:
                        raise Stage("dtype", f"output {k}: {g.dtype} vs {w.dtype}")
                    try:
                        torch.testing.assert_close(torch.from_numpy(np.array(g)).to(torch.from_numpy(np.array(w)).dtype),
                                                   torch.from_numpy(np.array(w)), rtol=rtol, atol=atol,
                                                   equal_nan=True, check_dtype=False)
                    except AssertionError as e:
                        raise Stage("mismatch", f"output {k}: " + " ".join(str(e).split())[:200])
