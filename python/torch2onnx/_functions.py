"""autograd.Function subclasses with a ``symbolic(g, ...)`` export as the node their symbolic emits.

TorchScript cannot hold a Python Function (``torch.jit.trace(...).save()`` fails with "Could not
export Python function call"). While a model is traced or scripted for export, each Function with
a symbolic is routed through a torch custom op ``t2o_fn::NAME`` whose CPU kernel runs the
Function's own forward, so the saved module loads and the converter learns shapes from the real
computation. What the symbolic emits is learned by calling it with a recording ``g``: the op name
and domain, which forward arguments are its inputs, its attributes (from ``g.op``'s ``*_i``,
``*_f``, ``*_s``, ``*_is``, ``*_fs`` keywords) and its number of outputs. The custom op's schema
spells that out (inputs in the node's order, attributes as arguments with the attribute's name
and value as default), so the converter's ``--custom-op SCHEMA=DOMAIN::OP`` path emits the node.

Traced (the default), the symbolic sees the call's real non-tensor arguments, so attributes may
be computed from them. Under ``torch.jit.script`` the symbolic runs once per Function with
stand-ins for the arguments: attributes must then be arguments passed through unchanged (or
constants), and the node's inputs must keep the forward's order.
"""
import contextlib
import inspect
import itertools
import os

import torch

from ._errors import UnsupportedError

_NAMESPACE = "t2o_fn"
_lib = None
_ops = {}  # key -> _Op, for the life of the process (torch.library cannot forget a definition)
_counter = itertools.count()
_SUFFIX = {"i": "int", "f": "float", "s": "str", "is": "int[]", "fs": "float[]"}


class _Ctx:
    """The ctx a Function's forward gets when its kernel runs: what forward may call on it."""

    needs_input_grad = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *args):
        pass

    def mark_dirty(self, *args):
        pass

    def set_materialize_grads(self, value):
        pass


class _Arg:
    """A forward argument as the recording symbolic sees it (tensors always; all args when scripting)."""

    def __init__(self, index, name):
        self.index = index
        self.name = name

    def __repr__(self):
        return f"<argument {self.name}>"


class _Out:
    def __init__(self, node, k):
        self.node = node
        self.k = k


class _Node:
    def __init__(self, name, inputs, attrs, outputs):
        self.name, self.inputs, self.attrs, self.outputs = name, inputs, attrs, outputs


class _Recorder:
    """The ``g`` handed to a symbolic: records ``g.op`` calls instead of building a graph."""

    def __init__(self):
        self.nodes = []

    def op(self, name, *inputs, outputs=1, **attrs):
        node = _Node(name, inputs, attrs, outputs)
        self.nodes.append(node)
        outs = tuple(_Out(node, k) for k in range(outputs))
        return outs[0] if outputs == 1 else outs

    def __getattr__(self, item):
        raise AttributeError(f"g.{item}: torch2onnx maps a Function to the single node of g.op(...)")


class _Op:
    def __init__(self, qualname, schema, target, kernel, order=None):
        self.qualname, self.schema, self.target, self.kernel = qualname, schema, target, kernel
        self.order = order  # traced: the forward argument index of each node input

    @property
    def spec(self):
        return f"{self.schema}={self.target}"

    @property
    def callable(self):
        return getattr(getattr(torch.ops, _NAMESPACE), self.qualname.split("::")[1])


def where_defined(cls):
    try:
        return f"{os.path.basename(inspect.getsourcefile(cls))}:{inspect.getsourcelines(cls)[1]}"
    except (OSError, TypeError):
        return cls.__module__


def _param_names(cls, count=None):
    params = list(inspect.signature(cls.forward).parameters.values())[1:]  # after ctx
    names = []
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            if count is None:
                raise _unsupported(cls, "its forward takes *args, which a scripted call cannot map",
                                   "export it traced (the default), or name forward's arguments")
            names += [f"{p.name}{k}" for k in range(count - len(names))]
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    return names


def _unsupported(cls, why, hint):
    return UnsupportedError(f"autograd.Function {cls.__name__} ({where_defined(cls)}): {why}", hint)


def _literal(value, kind, cls, attr):
    if kind == "int":
        return str(int(value))
    if kind == "float":
        if value != value or value in (float("inf"), float("-inf")):
            raise _unsupported(cls, f"attribute {attr} is {value}, which a schema default cannot hold", "")
        return repr(float(value))
    if kind == "str":
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    inner = "int" if kind == "int[]" else "float"
    return "[" + ", ".join(_literal(v, inner, cls, attr) for v in value) + "]"


def _record(cls, args):
    """Calls cls.symbolic with a recording g; returns the single node and what was returned."""
    g = _Recorder()
    try:
        returned = cls.symbolic(g, *args)
    except Exception as e:  # noqa: BLE001 - any failure of user code is reported with the Function
        raise _unsupported(cls, f"its symbolic() failed while torch2onnx recorded it: {type(e).__name__}: {e}",
                           "the symbolic must build its node with g.op(...) from its arguments") from e
    nodes = [n for n in g.nodes if n.name not in ("Constant", "onnx::Constant")]
    if len(nodes) != 1 or len(g.nodes) != 1:
        raise _unsupported(cls, f"its symbolic() emits {len(g.nodes)} nodes; torch2onnx maps a Function to one",
                           "emit a single g.op(...) (a custom op), or compute the Function with plain torch ops")
    node = nodes[0]
    outs = returned if isinstance(returned, tuple) else (returned,)
    if not all(isinstance(o, _Out) and o.node is node for o in outs) or len(outs) != node.outputs:
        raise _unsupported(cls, "its symbolic() must return the outputs of its g.op(...) node", "")
    return node


def _target(cls, node):
    name = node.name
    if "::" in name:
        domain, op = name.split("::", 1)
    else:
        domain, op = "", name
    if domain in ("", "onnx"):
        domain = "ai.onnx"  # the default ONNX domain, spelled so the converter accepts it
    if not domain or not op or "::" in op:
        raise _unsupported(cls, f"g.op('{name}') is not an op name", "write g.op('domain::Op', ...)")
    return f"{domain}::{op}"


def _attributes(cls, node):
    """[(attribute name, schema type, value)] from the g.op keywords."""
    attrs = []
    for key, value in node.attrs.items():
        base, _, suffix = key.rpartition("_")
        if not base or suffix not in _SUFFIX:
            raise _unsupported(cls, f"g.op keyword '{key}' is not an attribute torch2onnx can emit",
                               "use NAME_i, NAME_f, NAME_s, NAME_is or NAME_fs")
        attrs.append((base, _SUFFIX[suffix], value))
    return attrs


def _library():
    global _lib
    if _lib is None:
        _lib = torch.library.Library(_NAMESPACE, "DEF")
    return _lib


def _define(cls, schema_args, n_out, target, kernel, order=None):
    qual = f"{_NAMESPACE}::{cls.__name__}_{next(_counter)}"
    rets = "Tensor" if n_out == 1 else "(" + ", ".join(["Tensor"] * n_out) + ")"
    schema = f"{qual}({', '.join(schema_args)}) -> {rets}"
    _library().define(schema.split("::", 1)[1])
    _library().impl(qual.split("::", 1)[1], kernel, "CPU")
    return _Op(qual, schema, target, kernel, order)


def _run_forward(cls, args, n_out):
    with torch.no_grad():
        out = cls.forward(_Ctx(), *args)
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != n_out or not all(isinstance(t, torch.Tensor) for t in outs):
        raise _unsupported(cls, f"its forward returns {len(outs)} value(s) but its symbolic declares {n_out} "
                           "tensor output(s)", "make g.op(..., outputs=N) match what forward returns")
    # An op's outputs must not alias its inputs (forward may return an input or a view of one).
    storages = {a.storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
    outs = tuple(t.clone() if t.storage().data_ptr() in storages else t for t in outs)
    return outs[0] if n_out == 1 else outs


def _unique(names):
    seen, out = set(), []
    for n in names:
        k, m = n, 1
        while k in seen:
            k, m = f"{n}_{m}", m + 1
        seen.add(k)
        out.append(k)
    return out


def traced_op(cls, args):
    """The op standing in for one call cls.apply(*args) while tracing (one op per distinct
    non-tensor arguments, since attributes may be computed from them)."""
    names = _param_names(cls, len(args))
    is_tensor = [isinstance(a, torch.Tensor) for a in args]
    key = ("trace", cls, tuple(is_tensor),
           tuple(repr(a) for a, t in zip(args, is_tensor) if not t))
    if key in _ops:
        return _ops[key]
    stand_ins = [_Arg(i, names[i] if i < len(names) else f"arg{i}") if t else a
                 for i, (a, t) in enumerate(zip(args, is_tensor))]
    node = _record(cls, stand_ins)
    order = []  # forward argument index of each node input
    for inp in node.inputs:
        if not isinstance(inp, _Arg):
            raise _unsupported(cls, "an input of its g.op(...) is not a tensor argument of the Function",
                               "pass the Function's tensor arguments to g.op directly")
        order.append(inp.index)
    missing = [stand_ins[i].name for i, t in enumerate(is_tensor) if t and i not in order]
    if missing:
        raise _unsupported(cls, f"its symbolic() does not pass tensor argument(s) {', '.join(missing)} to its node",
                           "every tensor the forward reads must be an input of the node")
    attrs = _attributes(cls, node)
    for name, _, value in attrs:
        if isinstance(value, _Arg):
            raise _unsupported(cls, f"attribute {name} is a tensor argument", "attributes are Python values")
    attr_names = {a[0] for a in attrs}
    in_names = _unique([f"{stand_ins[i].name}_in" if stand_ins[i].name in attr_names else stand_ins[i].name
                        for i in order])
    schema_args = [f"Tensor {n}" for n in in_names]
    schema_args += [f"{kind} {name}={_literal(value, kind, cls, name)}" for name, kind, value in attrs]
    fixed = list(args)  # the call's non-tensor arguments stay those of this op
    n_out = node.outputs

    def kernel(*values):  # the node's inputs, then its attributes (already in `fixed`)
        call = list(fixed)
        for pos, index in enumerate(order):
            call[index] = values[pos]
        return _run_forward(cls, call, n_out)

    op = _define(cls, schema_args, n_out, _target(cls, node), kernel, order)
    _ops[key] = op
    return op


def scripted_op(cls):
    """The op that cls.apply becomes while the model is scripted: the forward's arguments in
    order, tensors as inputs and the others as the attributes the symbolic makes of them."""
    key = ("script", cls)
    if key in _ops:
        return _ops[key]
    names = _param_names(cls)
    stand_ins = [_Arg(i, n) for i, n in enumerate(names)]
    node = _record(cls, stand_ins)
    kinds = [None] * len(names)  # schema type per forward argument
    attr_of = [None] * len(names)
    for pos, inp in enumerate(node.inputs):
        if not isinstance(inp, _Arg):
            raise _unsupported(cls, "an input of its g.op(...) is not an argument of the Function", "")
        if kinds[inp.index] or (pos and node.inputs[pos - 1].index > inp.index):
            raise _unsupported(cls, "its symbolic() reorders or repeats the Function's tensor arguments, which a "
                               "scripted call cannot express", "export it traced (the default)")
        kinds[inp.index] = "Tensor"
    fixed_attrs = []
    for name, kind, value in _attributes(cls, node):
        if isinstance(value, _Arg):
            if kinds[value.index]:
                raise _unsupported(cls, f"argument {value.name} is used twice by its symbolic()", "")
            kinds[value.index], attr_of[value.index] = kind, name
        elif isinstance(value, (list, tuple)) and any(isinstance(v, _Arg) for v in value):
            raise _unsupported(cls, f"attribute {name} is computed from the Function's arguments, which only a "
                               "traced export can evaluate", "export it traced (the default)")
        else:
            fixed_attrs.append((name, kind, value))
    unused = [names[i] for i, k in enumerate(kinds) if k is None]
    if unused:
        raise _unsupported(cls, f"its symbolic() does not use argument(s) {', '.join(unused)}, so their type is "
                           "unknown when scripting", "export it traced (the default)")
    schema_args = [f"Tensor {n}" if k == "Tensor" else f"{k} {attr_of[i]}" for i, (n, k) in enumerate(zip(names, kinds))]
    schema_args += [f"{kind} {name}={_literal(value, kind, cls, name)}" for name, kind, value in fixed_attrs]
    n_args, n_out = len(names), node.outputs

    def kernel(*values):
        return _run_forward(cls, list(values[:n_args]), n_out)

    op = _define(cls, schema_args, n_out, _target(cls, node), kernel)
    _ops[key] = op
    return op


def _user_functions():
    """Subclasses of autograd.Function defined outside torch."""
    seen, todo = [], list(torch.autograd.Function.__subclasses__())
    while todo:
        c = todo.pop()
        if c in seen:
            continue
        seen.append(c)
        todo += c.__subclasses__()
    return [c for c in seen if not c.__module__.startswith("torch.")]


def _has_symbolic(cls):
    return callable(getattr(cls, "symbolic", None))


class Routing:
    """While active, Function.apply routes to custom ops; `specs` are the converter's
    --custom-op strings for the ops used."""

    def __init__(self):
        self.used = []
        self.refused = {}  # Function -> why it cannot be scripted (raised if the model calls it)
        self.inlined = []  # Functions without symbolic() whose forward was traced, in first-call order

    @property
    def specs(self):
        seen = []
        for op in self.used:
            if op.spec not in seen:
                seen.append(op.spec)
        return seen

    @contextlib.contextmanager
    def tracing(self):
        base = torch.autograd.Function
        had = "apply" in base.__dict__
        old = base.__dict__.get("apply")
        routing = self

        def apply(cls, *args, **kwargs):
            if kwargs:
                raise _unsupported(cls, "apply() was called with keyword arguments", "pass them positionally")
            if _has_symbolic(cls):
                op = traced_op(cls, args)
                routing.used.append(op)
                return op.callable(*[args[i] for i in op.order])
            # No symbolic: the ops of its forward are traced in its place (inlined), as torch.onnx
            # does; PyTorch's own Functions silently, the model's with a note.
            if not cls.__module__.startswith("torch.") and cls not in routing.inlined:
                routing.inlined.append(cls)
            return cls.forward(_Ctx(), *args)

        base.apply = classmethod(apply)
        try:
            yield
        finally:
            if had:
                base.apply = old
            else:
                del base.apply

    @contextlib.contextmanager
    def scripting(self):
        patched = []
        try:
            for cls in _user_functions():
                if not _has_symbolic(cls):
                    continue
                try:
                    op = scripted_op(cls)
                except UnsupportedError as e:
                    self.refused[cls] = e  # only an error if the model calls it
                    continue
                self.used.append(op)
                patched.append((cls, "apply" in cls.__dict__, cls.__dict__.get("apply")))
                cls.apply = op.callable
            yield
        finally:
            for cls, had, old in patched:
                if had:
                    cls.apply = old
                else:
                    del cls.apply

    def explain_script_failure(self, error):
        """Our error for a scripting failure caused by a Function we could not route, else None."""
        text = str(error)
        if "apply" not in text:
            return None
        for cls, why in self.refused.items():
            if f"{cls.__name__}.apply" in text:
                return why
        for cls in _user_functions():
            if not _has_symbolic(cls) and f"{cls.__name__}.apply" in text:
                return UnsupportedError(
                    f"autograd.Function {cls.__name__} ({where_defined(cls)}) has no symbolic(), so torch.jit.script "
                    "cannot compile the call to it and it has no ONNX form",
                    f"add `@staticmethod def symbolic(g, ...): return g.op('mydomain::Op', ...)` to {cls.__name__}, "
                    "or compute it with torch ops instead of through the Function")
        return None
