"""Stand-in for PyTorch's test/onnx/onnx_test_common.py: `run_test` exports with the exporter named by
EXPORTER (t2o: torch2onnx.export, torch: torch.onnx.export), runs the file in ONNX Runtime 1.30 (the
Node package, through tests/coverage/ort_bridge.py) and compares with eager PyTorch the way
torch.onnx's own verification does: inputs flattened and fed by position (Python numbers too,
quantized tensors as integers, scale and zero point), keyword inputs by name, every output's shape,
dtype and values (rtol/atol of the test, NaN equal), then the same for additional_test_inputs.
An export error propagates unchanged, so tests that expect torch.onnx's errors see ours."""
import copy
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
_ORT = OrtBridge(timeout=120)


def parameterize_class_name(cls, idx, input_dicts):
    return f"{cls.__name__}_" + "_".join(f"{k}_{v}" for k, v in input_dicts.items())


class Stage(Exception):
    """A failure outside the comparison, its message led by [stage] (ort, outputs)."""

    def __init__(self, stage, msg):
        super().__init__(f"[{stage}] {msg}")


_QV = {torch.quint8: torch.uint8, torch.qint8: torch.int8, torch.qint32: torch.int32}


def _leaves(v, out, inputs=True):
    """The arrays torch.onnx's verification flattens v into: tensors, Python numbers, a quantized tensor
    as its integers, scale and zero point (typed as inputs or as outputs), nested tuples/lists/dicts."""
    if isinstance(v, torch.Tensor) and v.is_quantized:
        scale = torch.tensor(v.q_scale(), dtype=torch.double if inputs else torch.float32)
        zp = torch.tensor(v.q_zero_point(), dtype=torch.int64 if inputs else _QV[v.dtype])
        q = (v.dequantize() / scale + zp).to(_QV[v.dtype])
        out.extend([q.numpy(), scale.numpy(), zp.numpy()])
    elif isinstance(v, torch.Tensor):
        out.append(v.detach().cpu().numpy() if v.dtype != torch.bfloat16 else v.float().numpy())
    elif isinstance(v, (bool, int, float)):
        out.append(np.array(v))
    elif isinstance(v, (list, tuple, dict)):
        for e in (v.values() if isinstance(v, dict) else v):
            _leaves(e, out, inputs)
    return out


def _export(model, args, kwargs, path, opset, **kw):
    full = tuple(args) + ((kwargs,) if kwargs or (args and isinstance(args[-1], dict)) else ())
    if EXPORTER == "t2o":
        import torch2onnx
        torch2onnx.export(model, full, path, opset_version=opset, **kw)
    else:
        torch.onnx.export(model, full, path, opset_version=opset, **kw)


def _clone(model):
    """A deep copy of the model where it can be copied (torch.onnx's verification falls back the same way)."""
    try:
        return copy.deepcopy(model)
    except Exception:  # noqa: BLE001
        return model


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
                      additional_test_inputs, input_names, output_names, training, s_idx)
        if not is_model_script and not self.is_script:
            self._run(model, input_args, input_kwargs, rtol, atol, do_constant_folding, dynamic_axes,
                      additional_test_inputs, input_names, output_names, training, t_idx)

    def _run(self, model, input_args, input_kwargs, rtol, atol, do_constant_folding, dynamic_axes,
             additional_test_inputs, input_names, output_names, training, remained):
        self.run_test_calls += 1
        input_kwargs = input_kwargs or {}
        if isinstance(input_args, torch.Tensor):
            input_args = (input_args,)
        input_args = tuple(input_args)
        if training is not None and training == torch.onnx.TrainingMode.TRAINING:
            model.train()
        elif training is None or training == torch.onnx.TrainingMode.EVAL:
            model.eval()
        kw = dict(do_constant_folding=do_constant_folding, dynamic_axes=dynamic_axes, input_names=input_names,
                  output_names=output_names, keep_initializers_as_inputs=self.keep_initializers_as_inputs)
        if training is not None:
            kw["training"] = training
        sets = [(input_args, input_kwargs)]
        sets += [((e,) if isinstance(e, torch.Tensor) else tuple(e), {}) for e in additional_test_inputs or []]
        with torch.no_grad(), tempfile.TemporaryDirectory(prefix="t2o_suite_") as work:
            # As torch.onnx's verification: the model is cloned before the export and every PyTorch
            # reference run uses a fresh clone, so models that change their own state in forward()
            # are compared from the state they were exported in.
            pristine = _clone(model)
            path = os.path.join(work, "m.onnx")
            try:
                _export(model, copy.deepcopy(input_args), copy.deepcopy(input_kwargs), path, self.opset_version, **kw)
            except Exception as e:  # noqa: BLE001
                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                e.args = (f"[export] {type(e).__name__}: {first}",) + tuple(e.args[1:])
                raise
            g = onnx.load(path).graph
            inits = {i.name for i in g.initializer}
            names = [i.name for i in g.input if i.name not in inits]
            for args, kwargs in sets:
                want = _clone(pristine)(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                got = self._ort_outputs(path, names, args, kwargs, remained, work)
                self._compare(got, _leaves(want if isinstance(want, (tuple, list, dict)) else (want,), [], inputs=False),
                              rtol, atol)

    @staticmethod
    def _ort_outputs(path, names, args, kwargs, remained, work):
        """ORT's outputs, fed as torch.onnx's verification feeds: keywords by name, the rest by position."""
        leaves = _leaves(args, [])
        if remained is not None:
            leaves = [leaves[i] for i in remained]
        feeds = {k: _leaves(v, [])[0] for k, v in kwargs.items() if isinstance(v, (torch.Tensor, int, float))}
        pos = [n for n in names if n not in feeds]
        if len(leaves) > len(pos):  # torch.onnx's own words, which some tests expect
            raise ValueError(f"[inputs] got too many positional inputs: {len(leaves)} given, the model takes "
                             f"{len(pos)} ({names})")
        feeds.update(zip(pos, leaves))
        try:
            return _ORT.run(path, feeds, work)
        except Exception as e:  # noqa: BLE001
            raise Stage("ort", str(e).strip().splitlines()[0][:300]) from None

    def _compare(self, got, want, rtol, atol):
        if len(got) != len(want):
            raise Stage("outputs", f"{len(got)} outputs, PyTorch has {len(want)}")
        for k, (g, w) in enumerate(zip(got, want)):
            if not self.check_shape and g.shape != w.shape:
                try:
                    g = np.broadcast_to(g, w.shape)
                except ValueError:
                    pass
            if g.shape != w.shape:
                raise AssertionError(f"[mismatch] output {k}: shape {g.shape} vs {w.shape}")
            if self.check_dtype and g.dtype != w.dtype:
                raise AssertionError(f"[dtype] output {k}: {g.dtype} vs {w.dtype}")
            w = torch.from_numpy(np.array(w))
            try:
                torch.testing.assert_close(torch.from_numpy(np.array(g)).to(w.dtype), w, rtol=rtol, atol=atol,
                                           equal_nan=True, check_dtype=False)
            except AssertionError as e:  # torch's text ("Tensor-likes are not close!"), which some tests expect
                raise AssertionError(f"[mismatch] output {k}: " + " ".join(str(e).split())[:300]) from None
