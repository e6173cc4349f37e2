"""torch2onnx.optimize and torch2onnx.quantize: the ONNX -> ONNX tools of the C++ libraries."""
import os

from . import _torch2onnx as _native
from ._errors import UnsupportedError


def optimize(model, output, *, level=2, passes=None, verify=True):
    """Optimizes an .onnx file into `output` with torch2onnx's optimizer (src/passes): folding,
    elimination and fusion into standard ops, each pass proven on the runtime when verify is on.
    Returns the optimizer's report as a dict."""
    if not _native.has_optimizer:
        raise UnsupportedError("this build of torch2onnx has no ONNX optimizer",
                               "rebuild torch2onnx from a version whose src/passes provides passes/passes.h")
    return _native.optimize_file(os.fspath(model), os.fspath(output), level, list(passes or []), verify)


def quantize(model, output, *, mode="dynamic", **options):
    """Quantizes an .onnx file (int8 dynamic/static, fp16) with torch2onnx's quantizer."""
    if not _native.has_quantizer:
        raise UnsupportedError("this build of torch2onnx has no quantizer",
                               "quantization comes with src/quant; use a version of torch2onnx that has it")
    raise UnsupportedError("quantize is not bound yet")  # pragma: no cover - reached once src/quant exists
