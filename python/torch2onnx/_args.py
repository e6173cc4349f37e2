"""Example arguments as torch.onnx takes them, and the module that turns them into a TorchScript file.

``args`` is a tensor or a tuple of positional arguments (tensors, nested tuples/lists of tensors,
or Python values); a trailing dict in the tuple holds keyword arguments, as in torch.onnx. Graph
inputs are the tensors, flattened depth-first and named like the converter names them (``x``,
``state.0``, ``state.1``). Python numbers (int, float, bool) are graph inputs too, 0-d int64 /
double / bool tensors, as torch.onnx makes them; where the model cannot take them so (tracing or
converting fails), they are baked in as constants like every other Python value: traced, because
tracing does that; scripted, through a small scripted wrapper that passes them as literals.
"""
import inspect
import linecache
import os
import warnings

import torch

from ._errors import UsageError, UnsupportedError
from ._functions import Routing, where_defined


def split_args(args, kwargs):
    """(positional tuple, keyword dict) from torch.onnx's args convention."""
    if isinstance(args, torch.Tensor) or not isinstance(args, tuple):
        args = (args,)
    kw = {}
    if args and isinstance(args[-1], dict):
        kw.update(args[-1])
        args = args[:-1]
    kw.update(kwargs or {})
    return tuple(args), kw


def is_number(v):
    return isinstance(v, (bool, int, float))


def number_tensor(v):
    """A Python number as the 0-d tensor torch.onnx makes of it (bool, int64, float64)."""
    if isinstance(v, bool):
        return torch.tensor(v)
    if isinstance(v, int):
        return torch.tensor(v, dtype=torch.int64)
    return torch.tensor(v, dtype=torch.float64)


def _numbers_as_tensors(v):
    """v with the numbers in it (also inside tuples and lists) as 0-d tensors; others unchanged."""
    if is_number(v):
        return number_tensor(v)
    if isinstance(v, (tuple, list)) and v:
        items = [_numbers_as_tensors(e) for e in v]
        return tuple(items) if isinstance(v, tuple) else items
    return v


def has_numbers(args, kwargs):
    def walk(v):
        return is_number(v) or (isinstance(v, (tuple, list)) and any(walk(e) for e in v))
    return any(walk(a) for a in args) or any(walk(v) for v in kwargs.values())


def is_tensor_tree(v):
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, (tuple, list)) and v:
        return all(is_tensor_tree(e) for e in v)
    return False


def is_input_tree(v):
    """Tuples, lists and dicts whose leaves are tensors or None, with at least one tensor, a dict or
    None among them (plain tensor trees are handled as they are): torch.onnx takes such an argument
    as its tensors, in order, as inputs (None leaves are no input)."""
    def leaves_ok(e):
        if e is None or isinstance(e, torch.Tensor):
            return True
        if isinstance(e, (tuple, list)) and e:
            return all(leaves_ok(x) for x in e)
        if isinstance(e, dict) and e:
            return all(leaves_ok(x) for x in e.values())
        return False

    def count(e, what):
        if what(e):
            return 1
        if isinstance(e, dict):
            return sum(count(x, what) for x in e.values())
        if isinstance(e, (tuple, list)):
            return sum(count(x, what) for x in e)
        return 0

    return (isinstance(v, (tuple, list, dict)) and leaves_ok(v) and count(v, lambda e: isinstance(e, torch.Tensor)) > 0
            and count(v, lambda e: e is None or isinstance(e, dict)) > 0)


def tree_leaves(name, value, out):
    """Appends (input name, tensor) for each tensor of a tree of tuples, lists and dicts, depth-first
    (a dict's values in order, each after its key when that is a tensor; None is no input; string
    keys name their part; names are identifiers, since they become the traced forward's
    parameters)."""
    if isinstance(value, torch.Tensor):
        out.append((name, value))
    elif value is None:
        pass
    elif isinstance(value, dict):
        for i, (k, e) in enumerate(value.items()):
            if isinstance(k, torch.Tensor):  # a tensor key is an input too, before its value (torch.onnx)
                out.append((f"{name}_key{i}", k))
            tree_leaves(f"{name}_{k}" if isinstance(k, str) and k.isidentifier() else f"{name}_{i}", e, out)
    else:
        for i, e in enumerate(value):
            tree_leaves(f"{name}_{i}", e, out)
    return out


def rebuild_tree(template, values):
    """`template` with its tensors replaced, in tree_leaves order, by the next of iterator `values`."""
    if template is None:
        return None
    if isinstance(template, torch.Tensor):
        return next(values)
    if isinstance(template, dict):
        return type(template)((next(values) if isinstance(k, torch.Tensor) else k, rebuild_tree(e, values))
                              for k, e in template.items())
    return type(template)(rebuild_tree(e, values) for e in template)


def flatten(name, value, out):
    """Appends (converter input name, tensor) for every tensor of value, depth-first."""
    if isinstance(value, torch.Tensor):
        out.append((name, value))
    else:
        for i, e in enumerate(value):
            flatten(f"{name}.{i}", e, out)
    return out


def _bind(sig, args, kwargs, what):
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise UsageError(f"the example args do not fit {what}: {e}",
                         "give args as torch.onnx.export takes them: a tensor, or a tuple of forward()'s arguments "
                         "(a trailing dict holds keyword arguments)") from None
    return bound


class _Bound(torch.nn.Module):
    """Calls a module with some arguments fixed to Python values. Shares the module's parameters,
    buffers and submodules (not a submodule itself), so traced names stay those of the model."""

    def __init__(self, model, call):
        super().__init__()
        self._modules = model._modules
        self._parameters = model._parameters
        self._buffers = model._buffers
        self.training = model.training
        object.__setattr__(self, "_t2o_model", model)
        object.__setattr__(self, "_t2o_call", call)


def _bound_module(model, sig, inputs, constants, trees=None):
    """A _Bound whose forward takes `inputs` (names, in order) and passes `constants` too; `trees`
    maps an argument to (its example value, the input names of its tensors): the argument is
    rebuilt from those inputs (dicts of tensors)."""
    names = [n for n, _ in inputs]
    params = sig.parameters
    trees = trees or {}

    def call(*values):
        given = dict(constants)
        given.update(zip(names, values))
        for arg, (template, parts) in trees.items():
            given[arg] = rebuild_tree(template, iter([given.pop(n) for n in parts]))
        pos = [given.pop(n) for n, p in params.items() if p.kind == p.POSITIONAL_ONLY and n in given]
        return model(*pos, **given)

    def forward(self, *values):
        return self._t2o_call(*values)

    forward.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] +
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    cls = type("_Bound", (_Bound,), {"forward": forward})
    return cls(model, call)


def flat_outputs(out):
    """The tensors of a model's output, depth-first; None dropped and numbers as 0-d tensors (int64,
    float64, bool, as NumPy holds them), as torch.onnx flattens traced outputs."""
    flat = []

    def walk(v):
        if v is None:
            return
        if isinstance(v, torch.Tensor):
            flat.append(v)
        elif is_number(v):
            flat.append(number_tensor(v))
        elif isinstance(v, (list, tuple)):
            for e in v:
                walk(e)
        elif isinstance(v, dict):
            for e in v.values():
                walk(e)
        else:
            raise UnsupportedError(f"the model returns a {type(v).__name__}, which has no ONNX form",
                                   "return tensors, numbers, and tuples, lists or dicts of them")
    walk(out)
    return tuple(flat)


def _flat_output_module(model, module, names):
    """`module` (the model, or its bound wrapper) with its outputs flattened (flat_outputs)."""
    def forward(self, *values):
        return flat_outputs(self._t2o_call(*values))

    forward.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] +
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    cls = type("_Flat", (_Bound,), {"forward": forward})
    return cls(model, module)


def _literal(v):
    if v is None or isinstance(v, (bool, int, str)):
        return repr(v)
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return f"float('{v}')"
        return repr(v)
    if isinstance(v, (list, tuple)):
        items = ", ".join(_literal(e) for e in v)
        return f"[{items}]" if isinstance(v, list) else f"({items}{',' if len(v) == 1 else ''})"
    raise UnsupportedError(f"a {type(v).__name__} argument cannot be baked into a scripted model",
                           "pass tensors, or Python numbers, bools, strings, None and lists/tuples of them")


_wrapper_count = 0


def _typed_inputs(p, name, t, v, out):
    """Appends (input name, tensor) for every part of value `v` of scripted argument type `t` that
    becomes a graph input: tensors, and numbers when p.numbers_as_inputs (0-d, as torch.onnx
    makes them), inside tuples too. False, appending nothing, when some part must be baked in."""
    kind = t.kind()
    if kind == "OptionalType" and v is not None:
        return _typed_inputs(p, name, t.getElementType(), v, out)
    if kind == "TensorType" and isinstance(v, torch.Tensor):
        out.append((name, v))
        return True
    if kind in ("IntType", "FloatType", "BoolType") and is_number(v) and p.numbers_as_inputs:
        out.append((name, number_tensor(v)))
        return True
    if kind == "ListType" and is_tensor_tree(v) and isinstance(v, list):
        flatten(name, v, out)
        return True
    if kind == "TupleType" and isinstance(v, tuple) and len(v) == len(t.elements()):
        parts = []
        if all(_typed_inputs(p, f"{name}.{i}", et, e, parts) for i, (et, e) in enumerate(zip(t.elements(), v))):
            out.extend(parts)
            return True
    return False


def _number_input(p, a, v):
    """Whether scripted argument `a` given value `v` is graph input(s) (else it is baked in)."""
    return _typed_inputs(p, a.name, a.type, v, [])


_PLAIN_KINDS = {"TensorType", "IntType", "FloatType", "BoolType", "NumberType", "StringType", "NoneType"}


def _plain_type(t):
    """A type a graph input can take: tensors, numbers, strings, None and Optional/List/Tuple of them."""
    k = t.kind()
    if k in _PLAIN_KINDS:
        return True
    if k == "TupleType" and not t.annotation_str.startswith("Tuple["):
        return False  # named tuples (PackedSequence)
    return k in ("OptionalType", "ListType", "TupleType") and all(_plain_type(c) for c in t.containedTypes())


def _forward_method(sm):
    """The method the converter reads as forward (the C++ front end's choice): `forward`, or of an
    overloaded forward (a scripted nn.LSTM) the first overload whose arguments are all plain."""
    names = sm._c._method_names()
    if "forward" in names:
        return "forward"
    k = 0
    while f"forward__{k}" in names:
        if all(_plain_type(a.type) for a in getattr(sm, f"forward__{k}").schema.arguments[1:]):
            return f"forward__{k}"
        k += 1
    raise UsageError("the scripted module has no forward() method", "script a module that defines forward()")


def _scripted_with_constants(p, sm, schema_args, given, method="forward"):
    """A scripted wrapper calling `sm` with the non-tensor arguments as literals (numbers that are
    graph inputs stay arguments)."""
    global _wrapper_count
    _wrapper_count += 1
    params, call = [], []
    for a in schema_args:
        if a.name not in given:
            continue
        v = given[a.name]
        if is_tensor_tree(v) or _number_input(p, a, v):
            params.append(f"{a.name}: {a.type.annotation_str}")
            call.append(a.name)
        else:
            call.append(_literal(v))
    source = (f"class T2oBound{_wrapper_count}(torch.nn.Module):\n"
              f"    def __init__(self, inner):\n"
              f"        super().__init__()\n"
              f"        self.inner = inner\n\n"
              f"    def forward(self, {', '.join(params)}):\n"
              f"        return self.inner{'' if method == 'forward' else '.' + method}({', '.join(call)})\n")
    # TorchScript reads a class's source through linecache: register it under a file name of ours.
    filename = f"<torch2onnx constants {_wrapper_count}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = {"torch": torch}
    exec(compile("from typing import Any, Dict, List, Optional, Tuple\nfrom torch import Tensor\n", filename, "exec"),
         scope)
    exec(compile(source, filename, "exec"), scope)  # noqa: S102 - our generated wrapper, literals only
    return torch.jit.script(scope[f"T2oBound{_wrapper_count}"](sm))


class Prepared:
    """The TorchScript file for a model and args, and the flattened example inputs."""

    def __init__(self):
        self.pt_path = None
        self.inputs = []       # [(converter name, tensor)] in graph-input order
        self.routing = Routing()
        self.warnings = []
        self.notes = []
        self.numbers_as_inputs = False  # numbers of args became graph inputs
        self.training = False           # a training-mode export


def _mode_dependent(m):
    """Whether train() changes what the module computes (as far as can be told)."""
    nn = torch.nn
    if isinstance(m, torch.jit.ScriptModule):
        try:
            return "training" in m.code  # scripted forward code reads self.training
        except (RuntimeError, AttributeError):
            return True
    if isinstance(m, (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._NormBase)):
        return True
    if isinstance(m, nn.RNNBase) and m.dropout > 0:
        return True
    if any(type(h).__name__ == "SpectralNorm" for h in m._forward_pre_hooks.values()):
        return True
    if type(m).__module__.startswith("torch."):
        return False
    try:
        return "training" in inspect.getsource(type(m).forward)
    except (OSError, TypeError):
        return True


def _training_modules(model):
    return [name or "(root)" for name, m in model.named_modules() if m.training and _mode_dependent(m)]


def _spectral_layers(model):
    return [name or "(root)" for name, m in model.named_modules()
            if any(type(h).__name__ == "SpectralNorm" for h in m._forward_pre_hooks.values())]


def _warn_training(p, model):
    training = _training_modules(model)
    if training:
        listed = ", ".join(training[:8]) + (f", ... ({len(training)} in all)" if len(training) > 8 else "")
        p.warnings.append("model is in training mode; exporting in eval mode as torch.onnx does (dropout off, "
                          f"batchnorm uses running stats). Submodules in training mode: {listed}")
    return bool(training)


def prepare(model, args, kwargs, work_dir, script=False, numbers_as_inputs=True, training=False):
    """numbers_as_inputs: Python numbers in args become graph inputs (torch.onnx's way); when
    False they are baked in as constants. training: the model is traced / scripted in train mode
    (a training-mode export) instead of eval mode."""
    p = Prepared()
    p.training = training
    args, kwargs = split_args(args, kwargs)
    p.numbers_as_inputs = numbers_as_inputs and has_numbers(args, kwargs)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise UsageError(f"'{path}' is not a file", "pass an nn.Module, a ScriptModule or a TorchScript .pt path")
        try:
            model = torch.jit.load(path, map_location="cpu")
        except Exception as e:  # noqa: BLE001
            raise UsageError(f"cannot load TorchScript file '{path}': {str(e).splitlines()[0]}") from None
        p.pt_path = path
        return _prepare_scripted(p, model, args, kwargs, work_dir, keep_file=True)
    if isinstance(model, torch.jit.ScriptModule):
        return _prepare_scripted(p, model, args, kwargs, work_dir)
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"cannot export a {type(model).__name__}",
                         "pass an nn.Module, a torch.jit.ScriptModule or a TorchScript .pt path")
    if not training:
        _warn_training(p, model)
    spectral = _spectral_layers(model)
    if spectral:
        p.notes.append(f"spectral norm on {', '.join(spectral)}: each becomes one plain weight "
                       "(weight_orig / sigma from the stored u, v, as in eval mode)")
    modes = _training_modes(model)
    model.train(training)
    try:
        if script:
            with p.routing.scripting():
                try:
                    sm = torch.jit.script(model)
                except Exception as e:  # noqa: BLE001
                    ours = p.routing.explain_script_failure(e)
                    if ours:
                        raise ours from None
                    raise
            return _prepare_scripted(p, sm, args, kwargs, work_dir)
        return _prepare_traced(p, model, args, kwargs, work_dir)
    finally:
        _restore_training_modes(modes)


def _training_modes(model):
    """Each submodule's own training flag. model.train(x) sets them all, so restoring with
    model.train(was_training) would put a model in train() whose submodules were in eval() into
    training mode everywhere (dropout on in the user's next eager call)."""
    return [(m, m.training) for m in model.modules()]


def _restore_training_modes(modes):
    for m, t in modes:
        m.training = t


def _prepare_traced(p, model, args, kwargs, work_dir):
    if p.numbers_as_inputs:
        # As torch.onnx traces: the model gets 0-d tensors where args hold numbers.
        args = tuple(_numbers_as_tensors(a) for a in args)
        kwargs = {k: _numbers_as_tensors(v) for k, v in kwargs.items()}
    sig = inspect.signature(model.forward)
    bound = _bind(sig, args, kwargs, f"{type(model).__name__}.forward")
    # Tracing names inputs after forward's parameters only when all are plain positional ones; with
    # forward(x, *rest) the model is traced as it is too (the wrapper below cannot pass *rest).
    plain = all(q.kind == q.POSITIONAL_OR_KEYWORD for q in sig.parameters.values())
    var_positional = any(q.kind == q.VAR_POSITIONAL for q in sig.parameters.values())
    if (plain or var_positional) and not kwargs and all(is_tensor_tree(a) for a in args):
        module, example = model, args
        names = [n for n, q in sig.parameters.items() if q.kind == q.POSITIONAL_OR_KEYWORD][:len(args)]
        if len(names) < len(args):  # forward(x, *rest): parts of *rest are named after it
            rest = next((n for n, q in sig.parameters.items() if q.kind == q.VAR_POSITIONAL), "args")
            names += [f"{rest}_{i}" for i in range(len(args) - len(names))]
    else:
        # Python values (and keyword arguments) are passed by a wrapper, so tracing bakes them.
        inputs, constants, trees = [], {}, {}
        for name, value in bound.arguments.items():
            kind = sig.parameters[name].kind
            items = value.items() if kind == inspect.Parameter.VAR_KEYWORD else [(name, value)]
            if kind == inspect.Parameter.VAR_POSITIONAL:
                raise UnsupportedError("forward(*args) with Python values or keyword arguments among the example "
                                       "args cannot be traced", "pass tensors only, or name forward's arguments")
            for k, v in items:
                if is_tensor_tree(v):
                    inputs.append((k, v))
                elif is_input_tree(v):
                    parts = tree_leaves(k, v, [])
                    trees[k] = (v, [n for n, _ in parts])
                    inputs += parts
                else:
                    constants[k] = v
        module = _bound_module(model, sig, inputs, constants, trees)
        example = tuple(v for _, v in inputs)
        names = [n for n, _ in inputs]

    def trace(m):
        with p.routing.tracing(), torch.no_grad(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", torch.jit.TracerWarning)
            traced = torch.jit.trace(m, example, check_trace=False, strict=False)
        # Python values computed from tensors (int(x.shape[0] / k), a branch on a tensor) are
        # frozen into the trace: the exported model then holds the example's value at every size.
        seen = set()
        for w in caught:
            if not issubclass(w.category, torch.jit.TracerWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
                continue
            where = f"{os.path.basename(w.filename)}:{w.lineno}"
            if where in seen:
                continue
            seen.add(where)
            p.warnings.append(f"tracing froze a value computed from a tensor at {where} ({str(w.message).split('.')[0]}): "
                              "the model holds the example's value at every size; compute it with tensor ops, or "
                              "export with script=True")
        return traced

    try:
        try:
            traced = trace(module)
        except RuntimeError as e:
            if "output from traced functions" not in str(e) and "cannot infer type" not in str(e):
                raise
            # Outputs that tracing cannot return (numbers, None, namedtuples, nested containers):
            # returned flattened, as torch.onnx's tracer flattens them.
            traced = trace(_flat_output_module(model, module, names))
    except (UsageError, UnsupportedError):
        raise
    except Exception as e:  # noqa: BLE001
        raise UnsupportedError(f"tracing the model failed: {type(e).__name__}: {str(e).splitlines()[0]}",
                               "the model must run on the example args; try script=True for data-dependent "
                               "control flow") from e
    for cls in p.routing.inlined:
        p.notes.append(f"autograd.Function {cls.__name__} ({where_defined(cls)}) has no symbolic(): the ops of its "
                       "forward were exported in its place, as torch.onnx does (add a symbolic(g, ...) to export "
                       "it as one node)")
    # The converter names graph inputs after the traced forward's arguments.
    schema_names = [a.name for a in traced.forward.schema.arguments[1:]]
    for value, name in zip(example, schema_names):
        flatten(name, value, p.inputs)
    p.pt_path = os.path.join(work_dir, "model.pt")
    traced.save(p.pt_path)
    return p


def _prepare_scripted(p, sm, args, kwargs, work_dir, keep_file=False):
    if not p.training and _warn_training(p, sm):
        keep_file = False
    if p.training and not sm.training:
        keep_file = False
    modes = _training_modes(sm)
    sm.train(p.training)
    try:
        return _save_scripted(p, sm, args, kwargs, work_dir, keep_file)
    finally:
        _restore_training_modes(modes)


def _save_scripted(p, sm, args, kwargs, work_dir, keep_file):
    method = _forward_method(sm)
    schema_args = getattr(sm, method).schema.arguments[1:]
    sig = inspect.Signature([inspect.Parameter(a.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                               default=a.default_value if a.has_default_value() else
                                               inspect.Parameter.empty) for a in schema_args])
    bound = _bind(sig, args, kwargs, "the scripted forward")
    given = dict(bound.arguments)
    flat = []
    needs_wrapper = False
    for a in schema_args:
        if a.name not in given:
            continue
        v = given[a.name]
        if _typed_inputs(p, a.name, a.type, v, flat):
            pass
        elif is_tensor_tree(v):
            flatten(a.name, v, flat)
        elif not (a.has_default_value() and a.default_value == v):
            needs_wrapper = True
    if needs_wrapper:
        sm = _scripted_with_constants(p, sm, schema_args, given, method).eval()
        keep_file = False
    p.inputs = flat
    if not keep_file:
        p.pt_path = os.path.join(work_dir, "model.pt")
        sm.save(p.pt_path)
    return p
