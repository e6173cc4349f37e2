"""torch2onnx.optimize and torch2onnx.quantize: the ONNX -> ONNX tools of the C++ libraries."""
import os
import warnings as _warnings

from . import _torch2onnx as _native
from ._errors import MismatchError, UnsupportedError


def optimize(model, output, *, level=2, passes=None, verify=True):
    """Optimizes an .onnx file into `output` with torch2onnx's optimizer (src/passes): folding,
    elimination and fusion into standard ops, each pass proven on the runtime when verify is on.
    Returns the optimizer's report as a dict."""
    if not _native.has_optimizer:
        raise UnsupportedError("this build of torch2onnx has no ONNX optimizer",
                               "rebuild torch2onnx from a version whose src/passes provides passes/passes.h")
    return _native.optimize_file(os.fspath(model), os.fspath(output), level, list(passes or []), verify)


def quantize(model, output, *, mode="dynamic", per_channel=False, calibrate=None, method="minmax", percentile=99.99,
             format="qdq", exclude=None, eval=None, input_sizes=None, samples=8, eval_samples=8, runs=5, threads=0,
             fp16_io=False, max_drop=None, warn=None):
    """Quantizes the .onnx file `model` into `output` (int8 "dynamic" or "static", or "fp16"): what
    `torch2onnx quantize` does, with the same options (docs/quantize.md). calibrate / eval: input
    sets as paths (.npy/.pb files or folders, one path or a list); input_sizes: {input: dims} for
    generated sets. Returns the report as a dict (accuracy per output against the float model on
    the eval sets, sizes, latency in torch2onnx's runtime); warnings go to `warn` (default:
    warnings.warn). With max_drop, an accuracy drop beyond it raises MismatchError (exit code 1)
    after the model is written, as the command exits 1."""
    if not _native.has_quantizer:
        raise UnsupportedError("this build of torch2onnx has no quantizer",
                               "quantization comes with src/quant; use a version of torch2onnx that has it")

    def paths(p):
        if p is None:
            return []
        return [os.fspath(x) for x in p] if isinstance(p, (list, tuple)) else [os.fspath(p)]

    o = _native.QuantizeOptions()
    o.mode, o.method, o.format, o.percentile = mode, method, format, float(percentile)
    o.per_channel, o.fp16_io = bool(per_channel), bool(fp16_io)
    o.exclude = [exclude] if isinstance(exclude, str) else list(exclude or [])
    o.calibrate, o.eval = paths(calibrate), paths(eval)
    o.input_sizes = {k: [int(d) for d in v] for k, v in (input_sizes or {}).items()}
    o.samples, o.eval_samples, o.runs, o.threads = int(samples), int(eval_samples), int(runs), int(threads)
    report = _native.quantize_file(os.fspath(model), os.fspath(output), o,
                                   warn if warn is not None else (lambda w: _warnings.warn(w, stacklevel=3)))
    if max_drop is not None:
        report["max_drop"] = max_drop
        report["passed"] = report["accuracy"]["drop"] <= max_drop
        if not report["passed"]:
            raise MismatchError(f"accuracy drop {report['accuracy']['drop']:.4g} exceeds max_drop {max_drop:.4g} "
                                f"(written anyway: {os.fspath(output)})",
                                "exclude sensitive nodes, try per_channel=True, or calibrate on more representative data")
    return report
