"""torch2onnx.export and torch2onnx.verify: torch.onnx.export's arguments, torch2onnx's converter."""
import io
import os
import tempfile
import time
import warnings

import numpy as np

from . import _torch2onnx as _native
from ._args import has_numbers, prepare, split_args
from ._errors import ConversionWarning, MismatchError, UnsupportedError, UsageError

# torch.onnx.export options that have one meaning here: accepted at the value torch2onnx always
# uses, refused otherwise (so swapping the import never silently changes what is exported).
_TORCH_ONNX_FIXED = {
    "export_params": True,
    "do_constant_folding": (True, False),  # False: the optimizer does not run (optimize=False)
    "keep_initializers_as_inputs": (None, False, True),  # True: weights are graph inputs too
    "operator_export_type": (None, "ONNX", "OperatorExportTypes.ONNX"),
    "custom_opsets": None,
    "export_modules_as_functions": (None, False),
}


class VerifyResult:
    """The outcome of comparing the ONNX model with PyTorch (`torch2onnx verify`'s report)."""

    def __init__(self, d, names=None):
        text = d["text"]
        for temp, shown in (names or {}).items():
            text = text.replace(temp, shown)
        self.ok = d["ok"]
        self.text = text             # the table the CLI prints
        self.json = d["json"]        # the CLI's --json report (of the first run when there were two)
        self.outputs = d["outputs"]  # per sample and output: name, ok, max_abs, max_rel, mismatches, verdict

    def _extend(self, other):
        offset = 1 + max((o["sample"] for o in self.outputs), default=-1)
        self.ok = self.ok and other.ok
        self.text += "\n" + other.text
        self.outputs += [dict(o, sample=o["sample"] + offset) for o in other.outputs]

    def __bool__(self):
        return bool(self.ok)

    def __repr__(self):
        worst = max((o["max_abs"] for o in self.outputs), default=0.0)
        return f"VerifyResult(ok={self.ok}, outputs={len(self.outputs)}, max_abs={worst:.3g})"


class ExportResult:
    """What export wrote and what it found."""

    def __init__(self):
        self.path = None            # the .onnx path (None when f was a file object)
        self.warnings = []          # training mode, baked training behaviour, stand-in kernels, ...
        self.notes = []             # changes that keep the results (spectral norm folded, widened types, ...)
        self.input_names = []
        self.output_names = []
        self.opset = None
        self.verification = None    # VerifyResult when verify=True
        self.optimization = None    # the optimizer's report when it ran, else None
        self.triton = None          # paths of the Triton bundle when triton_repo was given
        self.report = None          # the HTML report's path when report was given

    def __repr__(self):
        v = "" if self.verification is None else f", verified={self.verification.ok}"
        return (f"ExportResult(path={self.path!r}, inputs={self.input_names}, outputs={self.output_names}, "
                f"warnings={len(self.warnings)}{v})")


def _training_export(training, model):
    """torch.onnx's training argument: True for TrainingMode.TRAINING (and PRESERVE of a module in
    train mode), False for EVAL / None."""
    name = str(getattr(training, "name", training))
    if training is None or name in ("EVAL", "TrainingMode.EVAL", "False"):
        return False
    if name in ("TRAINING", "TrainingMode.TRAINING", "True"):
        return True
    if name in ("PRESERVE", "TrainingMode.PRESERVE"):
        return bool(getattr(model, "training", False))
    raise UsageError(f"training={training!r} is not a torch.onnx.TrainingMode", "use torch.onnx.TrainingMode.EVAL, "
                     "TRAINING or PRESERVE")


def _check_torch_onnx_options(options):
    for key, value in options.items():
        if key not in _TORCH_ONNX_FIXED and key != "verbose":
            raise TypeError(f"export() got an unexpected keyword argument '{key}'")
        allowed = _TORCH_ONNX_FIXED.get(key)
        if key == "verbose" or value == allowed or (isinstance(allowed, tuple) and
                                                    (value in allowed or str(value) in allowed)):
            continue
        raise UsageError(f"torch.onnx option {key}={value!r} is not supported by torch2onnx",
                         f"leave {key} out: torch2onnx always exports " +
                         ("with parameters as initializers, folded constants, in eval mode, as standard ONNX"))


def _dynamic_specs(dynamic_axes, input_names):
    """Splits torch.onnx's dynamic_axes into {input: {axis: label}} and {other name: (labels,
    given)}; list forms get torch.onnx's labels (NAME_dynamic_axes_K), which for outputs only
    name axes the conversion left static (its symbolic dims already say which follow an input)."""
    ins, outs = {}, {}
    for name, axes in (dynamic_axes or {}).items():
        if isinstance(axes, dict):
            labels = {int(a): str(l) for a, l in axes.items()}
            given = True
        elif isinstance(axes, (list, tuple)):
            labels = {int(a): f"{name}_dynamic_axes_{k + 1}" for k, a in enumerate(axes)}
            given = False
        else:
            raise UsageError(f"dynamic_axes['{name}'] must be a list of axes or a dict axis -> label",
                             "e.g. dynamic_axes={'x': {0: 'batch'}} or {'x': [0]}")
        if name in input_names:
            ins[name] = labels
        else:
            outs[name] = (labels, given)
    return ins, outs


def _numpy(t):
    t = t.detach().cpu()
    if not t.is_contiguous():
        t = t.contiguous()
    return t.numpy()


_DTYPE_NAMES = {"torch.float32": "f32", "torch.float64": "f64", "torch.float16": "f16", "torch.int64": "i64",
                "torch.int32": "i32", "torch.int16": "i16", "torch.int8": "i8", "torch.uint8": "u8", "torch.bool": "bool"}


def _describe(model, script):
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    import torch
    how = "scripted" if script or isinstance(model, torch.jit.ScriptModule) else "traced"
    return f"{type(model).__name__} ({how})"


def _run_verify(prep, onnx_file, shown_onnx, model, script, work, dynamic, samples=1, page=None, **options):
    """verify_model on the example args; further samples use generated inputs of their sizes
    (resized along the symbolic dims), since given values would repeat in every sample. The first
    sample's comparison goes onto the HTML report `page` when given."""
    if any(getattr(t, "is_quantized", False) for _, t in prep.inputs):
        raise UnsupportedError("verify does not take quantized inputs",
                               "compare the exported model's outputs with the module's yourself (its quantized "
                               "outputs are the integers, scale and zero point)")
    names = {prep.pt_path: _describe(model, script), onnx_file: shown_onnx}
    first = VerifyResult(_native.verify(prep.pt_path, onnx_file, data_files=_write_npy(work, prep.inputs),
                                        dynamic=dynamic, samples=1, warn=lambda w: None, page=page,
                                        **options), names)
    if samples > 1:
        specs = [(n, list(t.shape), _DTYPE_NAMES.get(str(t.dtype), str(t.dtype))) for n, t in prep.inputs]
        first._extend(VerifyResult(_native.verify(prep.pt_path, onnx_file, inputs=specs, dynamic=dynamic,
                                                  samples=samples - 1, warn=lambda w: None, **options), names))
    return first


def _example_values(inputs):
    """The converter's example values: name -> array, with a quantized tensor given as its integers
    (and name -> (scale, zero point) in the second dict); the third maps every ONNX input, the scale
    and zero point of quantized ones included, to its value (for the optimizer's proof)."""
    import torch
    data, quantized, onnx_values = {}, {}, {}
    for name, t in inputs:
        if getattr(t, "is_quantized", False):
            if t.qscheme() not in (torch.per_tensor_affine, torch.per_tensor_symmetric):
                raise UnsupportedError(f"input '{name}' is quantized per channel",
                                       "give per-tensor quantized inputs (torch.quantize_per_tensor)")
            data[name] = t.int_repr().contiguous().numpy()
            quantized[name] = (float(t.q_scale()), int(t.q_zero_point()))
            onnx_values.update({name: data[name], f"{name}_scale": np.array(float(t.q_scale())),
                                f"{name}_zero_point": np.array(int(t.q_zero_point()), dtype=np.int64)})
        elif isinstance(t, torch.Tensor) and t.is_complex():
            raise UnsupportedError(f"input '{name}' is a {str(t.dtype).replace('torch.', '')} tensor, which ONNX has "
                                   "no type for", "pass torch.view_as_real(x) and view it back as complex inside "
                                   "the model (torch.view_as_complex)")
        else:
            data[name] = onnx_values[name] = _numpy(t)
    return data, quantized, onnx_values


def _onnx_input_names(inputs):
    """Names of the ONNX inputs made from the flattened args (three per quantized tensor)."""
    names = []
    for name, t in inputs:
        names += [name, f"{name}_scale", f"{name}_zero_point"] if getattr(t, "is_quantized", False) else [name]
    return names


def _write_npy(work, inputs):
    files = {}
    for k, (name, t) in enumerate(inputs):
        path = os.path.join(work, f"input_{k}.npy")
        np.save(path, _numpy(t))
        files[name] = path
    return files


def export(model, args, f, *, input_names=None, output_names=None, dynamic_axes=None, opset_version=17,
           kwargs=None, verify=False, optimize=True, custom_ops=None, report=None, script=False, plugins=None,
           weights=None, rtol=1e-3, atol=1e-4, triton_repo=None, max_batch=None, **torch_onnx_options):
    """Exports a PyTorch model to ONNX through torch2onnx's converter, with torch.onnx.export's
    arguments (so ``import torch2onnx as onnx_export`` can stand in for ``torch.onnx``).

    model: an nn.Module (traced on `args`, as torch.onnx does; scripted with ``script=True``), a
      torch.jit.ScriptModule (used as it is) or the path of a TorchScript .pt file.
    args: a tensor or a tuple of forward()'s arguments: tensors, nested tuples/lists of tensors and
      Python values (baked in as constants); a trailing dict holds keyword arguments. These real
      values are what the converter runs the model on to learn shapes.
    f: the .onnx path, or a binary file object (e.g. io.BytesIO) that receives the bytes.
    input_names / output_names: names for the flattened inputs / outputs, in order.
    dynamic_axes: {name: [axes]} or {name: {axis: label}} for inputs and outputs.
    verify: compare with PyTorch (the `torch2onnx verify` code path); a mismatch raises
      MismatchError after the model is written. optimize: run the ONNX optimizer when this build
      has one (a no-op otherwise). custom_ops: 'SCHEMA=DOMAIN::OP' strings for torch custom ops
      (as --custom-op). plugins: runtime plugin .so files with kernels for custom ONNX ops.
    report: also write the HTML page `torch2onnx convert --report` writes (also when export fails).
    triton_repo: also write a Triton model repository entry and a KServe manifest (max_batch as
      convert --max-batch). Returns an ExportResult.
    """
    training = _training_export(torch_onnx_options.pop("training", None), model)
    _check_torch_onnx_options(torch_onnx_options)
    if torch_onnx_options.get("do_constant_folding") is False:
        optimize = False
    weights_as_inputs = bool(torch_onnx_options.get("keep_initializers_as_inputs"))
    if training and verify:
        raise UsageError("verify compares with PyTorch in eval mode; a training-mode export is random",
                         "leave verify out, or export with training=torch.onnx.TrainingMode.EVAL")
    if not isinstance(opset_version, int) or not 9 <= opset_version <= 17:
        raise UsageError(f"opset {opset_version} is not supported", "choose an opset_version from 9 to 17")
    to_file = isinstance(f, (str, os.PathLike))
    if not to_file and not (isinstance(f, io.IOBase) or hasattr(f, "write")):
        raise UsageError(f"f must be a path or a binary file object, not {type(f).__name__}")
    for p in plugins or []:
        _native.load_plugin(os.fspath(p))
    result = ExportResult()
    page = None
    if report is not None:
        if not isinstance(report, (str, os.PathLike)):
            raise UsageError(f"report must be the path of an .html file, not {type(report).__name__}")
        page = _native.Report(f"torch2onnx.export {_describe(model, script)}")
    try:
        _export_into(result, page, model, args, f, to_file, training, script, kwargs, input_names, output_names,
                     dynamic_axes, opset_version, optimize, verify, custom_ops, plugins, weights, rtol, atol,
                     triton_repo, max_batch, weights_as_inputs)
    except Exception as e:
        if page is not None:
            # A failed export's page says why, after the warnings that came before the failure.
            page.fact("result", "export failed: nothing was written")
            for w in result.warnings:
                page.note("warning", w)
            page.note("error", f"{e.message} (hint: {e.hint})" if getattr(e, "hint", None) else str(e))
            page.write(os.fspath(report))
        raise
    if page is not None:
        page.fact("output", result.path or "a file object")
        for w in result.warnings:
            page.note("warning", w)
        for n in result.notes:
            page.note("repair", n)
        page.write(os.fspath(report))
        result.report = os.fspath(report)
    if result.verification is not None and not result.verification.ok:
        where = result.path or "the file object"
        err = MismatchError(f"the exported model does not match PyTorch ({where} was still written)",
                            "see the table in .result.verification.text; "
                            "torch2onnx.verify(..., locate=True) names the first diverging node")
        err.result = result
        raise err
    return result


def _export_into(result, page, model, args, f, to_file, training, script, kwargs, input_names, output_names,
                 dynamic_axes, opset_version, optimize, verify, custom_ops, plugins, weights, rtol, atol,
                 triton_repo, max_batch, weights_as_inputs=False):
    """export()'s work: fills `result` (and the HTML report `page` when there is one) and writes `f`."""
    def warn(message):
        result.warnings.append(message)
        warnings.warn(message, ConversionWarning, stacklevel=4)

    def stage(name, since):
        if page is not None:
            page.stage(name, 1000.0 * (time.perf_counter() - since))

    with tempfile.TemporaryDirectory(prefix="torch2onnx-") as work:

        def attempt(numbers_as_inputs):
            """prepare + convert; warnings are kept until the attempt succeeds."""
            said = []
            prep = prepare(model, args, kwargs, work, script=script, numbers_as_inputs=numbers_as_inputs,
                           training=training)
            names = _onnx_input_names(prep.inputs)
            data, quantized, _ = _example_values(prep.inputs)
            final_inputs = list(input_names or [])
            if len(final_inputs) > len(names):
                raise UsageError(f"{len(final_inputs)} input_names for {len(names)} tensor inputs "
                                 f"({', '.join(names)})", "give one name per tensor in args, flattened depth-first")
            final_inputs += names[len(final_inputs):]
            by_final = dict(zip(final_inputs, names))
            ins_dyn, outs_dyn = _dynamic_specs(dynamic_axes, final_inputs)
            conv = _native.convert(
                prep.pt_path, opset=opset_version, data=data, quantized=quantized,
                dynamic={by_final[n]: axes for n, axes in ins_dyn.items()},
                output_names=list(output_names or []), custom_ops=prep.routing.specs + list(custom_ops or []),
                plugins=[os.fspath(p) for p in plugins or []], weights=os.fspath(weights) if weights else "",
                warn=said.append, training=training)
            return prep, final_inputs, by_final, ins_dyn, outs_dyn, conv, said

        t0 = time.perf_counter()
        try:
            prep, final_inputs, by_final, ins_dyn, outs_dyn, conv, said = attempt(True)
        except (UnsupportedError, UsageError) as first:
            if not has_numbers(*split_args(args, kwargs)):
                raise
            # The numbers cannot be inputs of this model (e.g. sizes a traced model needs as ints):
            # bake them in, as for every other Python value.
            prep, final_inputs, by_final, ins_dyn, outs_dyn, conv, said = attempt(False)
            said.insert(0, "the Python numbers among the example args are baked into the model as constants: with "
                           f"them as inputs, export failed ({first.message})")
        for w in prep.warnings:
            warn(w)
        for w in said:
            warn(w)
        result.notes += prep.notes
        for w in conv.warnings:
            if w not in result.warnings:
                result.warnings.append(w)
        result.notes += conv.notes
        stage("convert (trace or script, learn shapes, convert)", t0)
        if optimize and _native.has_optimizer and not training:  # dropout makes outputs random: no proof
            t0 = time.perf_counter()
            result.optimization = conv.optimize(_example_values(prep.inputs)[2], warn)
            stage("optimize (each pass proven on the runtime)", t0)
        if verify:
            t0 = time.perf_counter()
            onnx_tmp = os.path.join(work, "model.onnx")
            conv.save(onnx_tmp)
            shown = os.fspath(f) if to_file else "the exported model"
            result.verification = _run_verify(prep, onnx_tmp, shown, model, script, work,
                                              {by_final[n]: axes for n, axes in ins_dyn.items()}, rtol=rtol,
                                              atol=atol, page=page)
            stage("verify against PyTorch", t0)
        if input_names:
            conv.rename_inputs(final_inputs)
        if result.optimization is not None:
            # As torch.onnx does: inputs the optimized graph no longer reads are not model inputs.
            result.notes += [note for _, note in conv.remove_unused_inputs()]
        shapes = {o[0]: o[2] for o in conv.outputs}
        for name, (labels, given) in outs_dyn.items():
            if name not in shapes:
                # torch.onnx warns and goes on; so do we.
                warn(f"dynamic_axes names '{name}', which is neither an input nor an output of the model; ignored "
                     f"(inputs: {', '.join(final_inputs)}; outputs: {', '.join(shapes)})")
                continue
            current = shapes[name]
            # List form: the converter's symbolic dims already say which outputs follow which input.
            wanted = {a: l for a, l in labels.items()
                      if given or not -len(current) <= a < len(current) or isinstance(current[a], int)}
            for axis in conv.set_output_dims(name, wanted):
                result.notes.append(f"output '{name}' axis {axis} was static ({current[axis]}) in the conversion; "
                                    f"labelled '{wanted.get(axis, wanted.get(axis - len(current)))}' as "
                                    "dynamic_axes asks")
        if weights_as_inputs:
            conv.initializers_as_inputs()
        result.input_names = [i[0] for i in conv.inputs]
        result.output_names = [o[0] for o in conv.outputs]
        result.opset = conv.opset
        t0 = time.perf_counter()
        if to_file:
            result.path = os.fspath(f)
            conv.save(result.path)
        else:
            f.write(conv.to_bytes())
        stage("save", t0)
        if page is not None:
            page.describe(conv)
        if triton_repo is not None:
            name = _native.serving_name(result.path or "model.onnx")
            result.triton = conv.write_triton(os.fspath(triton_repo), name, -1 if max_batch is None else max_batch)


def verify(model, onnx_path, args, *, kwargs=None, script=False, samples=1, rtol=1e-3, atol=1e-4, locate=False,
           backend="t2o", dynamic_axes=None, seed=0, plugins=None):
    """Compares an ONNX model with the PyTorch model it came from, on `args` (torch.onnx's form)
    and, with samples > 1, on generated inputs resized along the ONNX model's symbolic dims.

    The model is prepared as export prepares it; backend is "t2o" (torch2onnx's runtime) or "ort"
    (ONNX Runtime through its Node package). Returns a VerifyResult (truthy when it matches).
    """
    for p in plugins or []:
        _native.load_plugin(os.fspath(p))
    with tempfile.TemporaryDirectory(prefix="torch2onnx-") as work:
        info = _native.load_model_info(os.fspath(onnx_path))
        onnx_inputs = [name for name, _ in info.all_inputs]  # with the inputs removed as unread
        prep = prepare(model, args, kwargs, work, script=script)
        if prep.numbers_as_inputs and len(prep.inputs) != len(onnx_inputs):
            # Exported with the numbers of args baked in (export's fallback).
            prep = prepare(model, args, kwargs, work, script=script, numbers_as_inputs=False)
        names = [n for n, _ in prep.inputs]
        if len(onnx_inputs) != len(names):
            raise UsageError(f"the ONNX model has {len(onnx_inputs)} inputs but args hold {len(names)} tensors",
                             "pass the args the model was exported with")
        target = os.fspath(onnx_path)
        if onnx_inputs != names:
            # Exported with input_names: verify a copy under the names the model's arguments have.
            info.rename_inputs(names)
            target = os.path.join(work, "model.onnx")
            info.save(target)
        by_onnx = dict(zip(onnx_inputs, names))
        dyn = {}
        for name, axes in (dynamic_axes or {}).items():
            if name in by_onnx:
                dyn[by_onnx[name]] = ({int(a): str(l) for a, l in axes.items()} if isinstance(axes, dict)
                                      else {int(a): f"{name}_dynamic_axes_{k + 1}" for k, a in enumerate(axes)})
        return _run_verify(prep, target, os.fspath(onnx_path), model, script, work, dyn, samples=samples, rtol=rtol,
                           atol=atol, locate=locate, backend=backend, seed=seed)
