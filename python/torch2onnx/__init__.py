"""torch2onnx: PyTorch models to checked, verified ONNX, and a fast CPU runtime for ONNX.

    import torch2onnx
    r = torch2onnx.export(model, (x,), "model.onnx", input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    sess = torch2onnx.InferenceSession("model.onnx")
    (y,) = sess.run(None, {"x": x.numpy()})

export() takes torch.onnx.export's arguments; conversion runs in this process in C++ (the same
converter as the `torch2onnx` command line). See docs/python.md.
"""
import torch  # noqa: F401  (PyTorch loads libtorch its way before the native module links to it)

from . import _torch2onnx as _native  # noqa: F401  (the native module: the C++ libraries)
from ._errors import (ConversionWarning, Error, InputError, MismatchError, ModelRunError, UnsupportedError,  # noqa: F401
                      UsageError)
from ._export import ExportResult, VerifyResult, export, verify  # noqa: F401
from ._runtime import ExecutionMode, GraphOptimizationLevel, InferenceSession, SessionOptions  # noqa: F401
from ._tools import optimize, quantize  # noqa: F401

__version__ = _native.__version__
load_plugin = _native.load_plugin

__all__ = ["export", "verify", "optimize", "quantize", "InferenceSession", "SessionOptions", "GraphOptimizationLevel",
           "ExecutionMode", "load_plugin", "Error",
           "MismatchError", "UsageError", "ModelRunError", "UnsupportedError", "InputError", "ConversionWarning",
           "ExportResult", "VerifyResult", "__version__"]
