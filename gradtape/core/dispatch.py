"""``apply(op, args, attrs)``: the one path every op call takes.

Unwrap the inputs, check they share one backend, run the forward on the backend's namespace, wrap
the outputs, and only if a tape is active hand the call to ``engine.record``.  The common call --
Tensors of one backend and one dtype, and Python floats / ints the library takes as they are -- is
one loop over the arguments, one dict lookup for the native function and the call itself; anything
else (a Variable while a tape records, mixed backends, conversions, promotion, a bool or integer
input of a floating function) is brought to that form first by :func:`_prepare`.
"""

from __future__ import annotations

import ast
import copy
import inspect
import textwrap

from gradtape.core import config as _config
from gradtape.core import dtypes as _dt
from gradtape.core.engine import (
    GENERATING,
    fold_constants,
    inline_calls,
    make_node,
    native_dtypes,
    record,
    single_assignments,
    without_docstring,
)
from gradtape.core.recording_state import ACTIVE_TAPES, per_thread, recording_context
from gradtape.core.registry import get_op
from gradtape.core.tensor import Tensor, Variable, new_tensor, next_id, wrap, convert_to_tensor, holds_tensor, lift

__all__ = ["apply", "apply1", "apply2", "fast_path", "run_native"]

_SCALARS = (bool, int, float, complex)

#: backend -> its native floating and complex dtypes (as arrays carry them and as the library names them)
FLOATS = {}


def floats(b):
    s = FLOATS[b] = native_dtypes(b, "fc")
    return s


#: backend -> the native dtypes (of arrays) that a Python float or int joins without changing them,
#: where the backend takes Python scalars as is (its floating and complex dtypes); else {None}
_FC = {}


def _fc(b):
    s = _FC[b] = ((FLOATS.get(b) or floats(b)) if b.python_scalars else frozenset()) or frozenset({None})
    return s


def _to_float(v, b):
    """A bool / integer native array cast to the default float dtype (``gt.config.floatx()``), for the functions
    declared ``floating``: the same dtype on every backend (NumPy alone would pick float16 for bool
    and float64 for int64).  Not recorded: a bool or integer tensor carries no gradient."""
    if v.__class__ in _SCALARS or v.dtype in (FLOATS.get(b) or floats(b)):
        return v
    return b.xp.astype(v, b.dtype_to_native(_dt.floatx()))


def apply(op, args, attrs=None):
    """Run ``op`` on ``args`` (its array inputs) with keyword attributes ``attrs``; record the call
    on the tapes that watch one of its inputs.  Returns the output Tensor (a tuple of them for an
    op of ``nout`` outputs)."""
    # the common inputs, read without a loop for one or two arguments: Tensors (Variables too while
    # nothing records) of one backend and one dtype, or a Python float / int beside a floating
    # tensor where the op and library take it as is (``fast``: which of these); fast stays 0 for
    # anything else, which _prepare brings to that form
    fast = 0
    n = len(args)
    if n == 1:
        x = args[0]
        c = x.__class__
        if c is Tensor or (c is Variable and not ACTIVE_TAPES[0]):
            b = x._b
            natives = (x._v,)
            dt = x._v.dtype
            fast = 1
    elif n == 2:
        x1, x2 = args
        c1 = x1.__class__
        c2 = x2.__class__
        if c1 is Variable and not ACTIVE_TAPES[0]:
            c1 = Tensor
        if c2 is Variable and not ACTIVE_TAPES[0]:
            c2 = Tensor
        if c1 is Tensor:
            b = x1._b
            dt = x1._v.dtype
            if c2 is Tensor:
                if x2._b is b and x2._v.dtype is dt:
                    natives = (x1._v, x2._v)
                    fast = 2
            elif (c2 is float or c2 is int) and op.scalars and dt in (_FC.get(b) or _fc(b)):
                natives = (x1._v, x2)
                fast = 3
        elif c2 is Tensor and (c1 is float or c1 is int) and op.scalars:
            b = x2._b
            dt = x2._v.dtype
            if dt in (_FC.get(b) or _fc(b)):
                natives = (x1, x2._v)
                fast = 4
    if not fast:
        args, b, natives = _prepare(op, args)
    elif op.floating and dt not in (FLOATS.get(b) or floats(b)):
        natives = tuple([_to_float(v, b) for v in natives])
    impl = op.impls.get(b) or op.resolve(b)
    try:
        out = impl(*natives, **attrs) if attrs else impl(*natives)
    except Exception as e:
        reraise(op, b, args, natives, e)
    if op.nout is None:
        if out.__class__ is not b.array_type:
            out = b.fix_output(out)
        y = new_tensor(Tensor)
        y._v = out
        y._b = b
        y._id = yid = next_id()
        if ACTIVE_TAPES[0] and op.differentiable:
            tapes = per_thread.tapes
            if tapes:
                if fast and (op.float_out or b.dtype_of(out).kind in "fc"):
                    # inputs without Variables, one floating output: record's common case, on
                    # each tape that watches an input (nested tapes too), the node made once (the
                    # watched test by ``in``, the identities' tuple made only for the node)
                    node = None
                    for rec in tapes:
                        w = rec.watched
                        if (
                            x._id in w
                            if fast == 1
                            else (x1._id in w or x2._id in w)
                            if fast == 2
                            else x1._id in w
                            if fast == 3
                            else x2._id in w
                        ):
                            if node is None:
                                ids = (
                                    (x._id,)
                                    if fast == 1
                                    else (x1._id, x2._id)
                                    if fast == 2
                                    else (x1._id, 0)
                                    if fast == 3
                                    else (0, x2._id)
                                )
                                node = make_node(op, ids, natives, attrs, (yid,), (out,), b)
                            rec.nodes.append(node)
                            w.add(yid)
                else:
                    record(op, args, natives, attrs, (y,), tapes)
        return y
    at = b.array_type
    outs = tuple([wrap(o if o.__class__ is at else b.fix_output(o), b) for o in out])
    if ACTIVE_TAPES[0] and op.differentiable:
        tapes = per_thread.tapes
        if tapes:
            record(op, args, natives, attrs, outs, tapes)
    return outs


def run_native(op, b, natives, attrs=None):
    """``op``'s native forward on backend ``b``'s arrays ``natives`` (a sequence), as :func:`apply`
    runs it: no Tensor made, nothing recorded (the forward walk's tangents of linear ops when
    nothing records).  The arrays are the forward's own kind (native, one dtype: what ``apply``'s
    common case passes on)."""
    impl = op.impls.get(b) or op.resolve(b)
    return impl(*natives, **attrs) if attrs else impl(*natives)


def apply1(op, x, attrs=None):
    """``apply(op, (x,), attrs)``: one input."""
    return apply(op, (x,), attrs)


def apply2(op, x1, x2, attrs=None):
    """``apply(op, (x1, x2), attrs)``: two inputs."""
    return apply(op, (x1, x2), attrs)


def fast_path(op, arity):
    """The public function of an element-wise op of ``arity`` (1 or 2) positional arguments:
    :func:`apply` itself, generated from its source for that arity (``f(x, /)`` /
    ``f(x1, x2, /)``: no call into ``apply``, no length test, no attributes) with the node
    builder ``engine.make_node`` inlined from its source where ``apply`` calls it, and the op's
    flags (:data:`FOLDED`: its ``scalars``, ``floating``, ``nout``, ``differentiable``,
    ``float_out`` and what it ``saves``) folded in as constants, the branches they decide gone.
    So an element-wise call costs what a hand-written function of that op would, and there is
    still one path and one node builder to read and change.  When the op's parts change
    (``op.computes``, ``op.rule``, ``op.saves``, ``op.differentiable``), the function's code is
    generated again for the new flags (``OpDef.on_change``): the same function object.

    The code is generated on the function's first call (until then it runs a stub that does that
    and calls it), so importing gradtape generates none, and a change of the op (its rule set
    after its declaration, say) only puts the stub back."""
    f = _stub(arity)(op)
    _FAST_FUNCS[op] = (f, arity)
    stub = f.__code__
    op.on_change = lambda: setattr(f, "__code__", stub)
    return f


def _stub(arity):
    """A maker ``maker(op) -> f`` of the stub a fast path starts with: ``f(x1, x2, /)`` generates
    its code for ``op`` (:func:`_respecialize`) and calls it."""
    maker = _STUBS.get(arity)
    if maker is None:
        params = ", ".join(["x"] if arity == 1 else [f"x{k + 1}" for k in range(arity)])
        src = f"def maker(op):\n    def f({params}, /):\n        return _first_call(op, ({params},))\n    return f\n"
        ns = {}
        exec(compile(src, _where(arity), "exec"), _generated_globals(), ns)
        maker = _STUBS[arity] = ns["maker"]
    return maker


def _first_call(op, args):
    f, arity = _FAST_FUNCS[op]
    _respecialize(f, op, arity)
    return f(*args)


def _generated_globals():
    """The globals of the generated code (the stub's too: its function keeps them when its code is
    replaced): this module's and the inlined node builder's."""
    g = _GLOBALS[0]
    if g is None:
        g = _GLOBALS[0] = {**make_node.__globals__, **globals()}
    return g


_GLOBALS: list = [None]


def _where(arity):
    return f"<gradtape.core.dispatch.apply for {arity} argument{'s' if arity > 1 else ''}>"


#: the op attributes a fast path folds in as constants (read again when the op changes)
FOLDED = ("scalars", "floating", "nout", "differentiable", "float_out", "_saves")


def _folded(op):
    """The values of ``op``'s :data:`FOLDED` flags as its fast path reads them (the key of its code)."""
    s = op._saves
    flags = tuple(bool(getattr(op, a)) if a != "nout" else op.nout for a in FOLDED[:-1])
    return flags + (None if s is None else (s.inputs, s.outputs),)


def _maker(arity, op):
    key = (arity, _folded(op))
    maker = _FAST_MAKERS.get(key)
    if maker is None:
        maker = _FAST_MAKERS[key] = _generate(arity, op)
    return maker


def _respecialize(f, op, arity):
    """``f`` (an op's fast path) with its code generated again for the op's flags as they are now (one
    thread at a time: :data:`engine.GENERATING`)."""
    with GENERATING:
        code = _maker(arity, op)(op).__code__
    if code.co_freevars != f.__code__.co_freevars:  # (never: both read the op alone from outside)
        raise AssertionError(f"{op.name}: a regenerated fast path reads other free variables")
    f.__code__ = code


_FAST_MAKERS: dict = {}
_FAST_TREES: dict = {}
_STUBS: dict = {}
#: op -> (its fast path, its arity)
_FAST_FUNCS: dict = {}


#: the values of apply's ``fast`` for one and for two arguments (0: _prepare's general case)
_FAST_CASES = {1: (0, 1), 2: (0, 2, 3, 4)}


class _Specialize(ast.NodeTransformer):
    """``apply``'s body for ``arity`` positional arguments: ``n`` and ``attrs`` known, the other
    arities' branches gone."""

    def __init__(self, arity):
        self.arity = arity

    def visit_If(self, node):
        t = node.test
        if (
            isinstance(t, ast.Compare)
            and isinstance(t.left, ast.Name)
            and t.left.id == "n"
            and isinstance(t.ops[0], ast.Eq)
            and isinstance(t.comparators[0], ast.Constant)
        ):
            kept = node.body if t.comparators[0].value == self.arity else node.orelse
            out = []
            for s in kept:
                r = self.visit(s)
                if r is not None:
                    out.extend(r if isinstance(r, list) else [r])
            return out or [ast.Pass()]
        return self.generic_visit(node)

    def visit_IfExp(self, node):
        if isinstance(node.test, ast.Name) and node.test.id == "attrs":  # no attributes
            return self.visit(node.orelse)
        node = self.generic_visit(node)
        if isinstance(node.test, ast.Constant):  # a case folded away above
            return node.body if node.test.value else node.orelse
        return node

    def visit_Name(self, node):
        if node.id == "attrs" and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant(None), node)
        if node.id == "args" and isinstance(node.ctx, ast.Load):
            # (no tuple packed up front: the arguments while ``fast``, else what _prepare made)
            return ast.IfExp(ast.Name("fast", ast.Load()), self.params(), ast.Name("args", ast.Load()))
        return node

    def visit_Assign(self, node):
        t = node.targets[0]
        v = node.value
        if isinstance(t, ast.Name) and t.id == "n":  # n = len(args)
            return None
        if isinstance(v, ast.Name) and v.id == "args" and isinstance(t, ast.Tuple):  # x1, x2 = args
            return None
        if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name) and v.value.id == "args":
            return None  # x = args[0]
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "_prepare":
            v.args[1] = self.params()  # args, b, natives = _prepare(op, args): fast is 0 there
            return node
        return self.generic_visit(node)

    def params(self):
        names = ["x"] if self.arity == 1 else [f"x{k + 1}" for k in range(self.arity)]
        return ast.Tuple([ast.Name(p, ast.Load()) for p in names], ast.Load())

    def visit_Compare(self, node):
        node = self.generic_visit(node)
        if (  # fast == k: never true where k is one of the other arity's cases
            isinstance(node.left, ast.Name)
            and node.left.id == "fast"
            and isinstance(node.ops[0], ast.Eq)
            and isinstance(node.comparators[0], ast.Constant)
        ):
            k = node.comparators[0].value
            if k not in _FAST_CASES[self.arity]:
                return ast.Constant(False)
            if k and _FAST_CASES[self.arity] == (0, k):  # the arity's one fast case: fast == k is fast's truth
                return ast.copy_location(ast.Name("fast", ast.Load()), node)
        return node


def _is_len_of(node, name):
    return (
        isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == name
    )


def _tree(arity):
    """:func:`apply`'s body for ``arity`` arguments with ``make_node`` inlined (not yet folded for
    an op); None where the source cannot be read."""
    if arity not in _FAST_TREES:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(apply)))
            fn = tree.body[0]
            body = [s for b in without_docstring(fn.body) for s in _as_list(_Specialize(arity).visit(b))]
            body = inline_calls(body, make_node)  # the node builder's body where apply calls it
            arity_fold = _Arity(arity, _tuple_lengths(body))
            _FAST_TREES[arity] = [arity_fold.visit(s) for s in body]
        except (OSError, TypeError):  # no source (a frozen or compiled install)
            _FAST_TREES[arity] = None
    return _FAST_TREES[arity]


class _Arity(ast.NodeTransformer):
    """``len(natives)``: the arity (one native per argument), in ``make_node``'s body too; and the
    length of a name bound once to a tuple display (``lengths``: the node builder's ``outs``)."""

    def __init__(self, arity, lengths):
        self.arity = arity
        self.lengths = lengths

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if _is_len_of(node, "natives"):
            return ast.copy_location(ast.Constant(self.arity), node)
        for name, k in self.lengths.items():
            if _is_len_of(node, name):
                return ast.copy_location(ast.Constant(k), node)
        return node


def _tuple_length(node):
    """The length of a tuple display without a starred item (None for anything else)."""
    if isinstance(node, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in node.elts):
        return len(node.elts)
    return None


def _tuple_lengths(body):
    """The names that ``body`` binds once, to a tuple display without a starred item: their lengths."""
    return single_assignments(body, _tuple_length)


class _OpFlags(ast.NodeTransformer):
    """``op.<flag>`` read as the constant it is for one op (:data:`FOLDED`)."""

    def __init__(self, op):
        values = _folded(op)
        self.values = dict(zip(FOLDED, values))
        s = op._saves
        if s is not None:
            self.values["_saves"] = s  # (its .inputs / .outputs are read, and folded, in make_node's body)

    def visit_Attribute(self, node):
        node = self.generic_visit(node)
        if (
            isinstance(node.value, ast.Name)
            and node.value.id == "op"
            and node.attr in self.values
            and isinstance(node.ctx, ast.Load)
        ):
            return ast.copy_location(ast.Constant(self.values[node.attr]), node)
        return node


_LITERALS = (type(None), bool, int, float, complex, str, bytes, tuple, type(Ellipsis))


def _generate(arity, op):
    """A maker ``maker(op) -> f`` of :func:`apply` specialised for ``arity`` arguments and the
    flags of ``op`` (see :func:`fast_path`); a plain call of ``apply`` where its source cannot be
    read."""
    params = ["x"] if arity == 1 else [f"x{k + 1}" for k in range(arity)]
    body = _tree(arity)
    if body is None:
        return lambda op: lambda *xs: apply(op, xs)
    body = copy.deepcopy(body)
    body = fold_constants([_OpFlags(op).visit(s) for s in body])
    for s in body:
        for n in ast.walk(s):
            if isinstance(n, ast.Constant) and not isinstance(n.value, _LITERALS):
                raise AssertionError(f"{op.name}: the fast path keeps an unfolded op flag ({n.value!r})")
    fn = ast.FunctionDef(name="f", args=_arguments(posonly=params), body=body, decorator_list=[], returns=None)
    maker = ast.FunctionDef(
        name="maker",
        args=_arguments(plain=["op"]),
        body=[fn, ast.Return(ast.Name("f", ast.Load()))],
        decorator_list=[],
        returns=None,
    )
    mod = ast.fix_missing_locations(ast.Module(body=[maker], type_ignores=[]))
    ns = {}
    exec(compile(mod, _where(arity), "exec"), _generated_globals(), ns)
    return ns["maker"]


def _arguments(posonly=(), plain=()):
    return ast.arguments(
        posonlyargs=[ast.arg(p) for p in posonly],
        args=[ast.arg(p) for p in plain],
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=[],
    )


def _as_list(r):
    return [] if r is None else r if isinstance(r, list) else [r]


def _prepare(op, args):
    """The general case of :func:`apply`'s inputs: ``(args, backend, natives)`` with mixed backends
    lifted into a running trace (else the error), non-Tensors converted, dtypes promoted (a
    recorded ``astype``) where the op promotes, bool / int inputs of a floating function cast."""
    b = None
    like = None
    for a in args:
        if isinstance(a, Tensor):
            if b is None:
                b, like = a._b, a
            elif a._b is not b:
                return _prepare(op, _lifted(op, args, like, a))
        elif a.__class__ in (list, tuple) and holds_tensor(a):  # ``x + [a, b]``: stacked by a recorded op
            return _prepare(op, tuple(convert_to_tensor(e) if e is a else e for e in args))
    if b is None:
        b = _config.get_backend()
    natives = [a._v if isinstance(a, Tensor) else _convert(a, b, op, like) for a in args]
    if op.promote and len(natives) > 1:
        promoted = _promote(op, b, args, natives)
        if promoted is not None:
            return _prepare(op, promoted)
    if op.floating:
        natives = [_to_float(v, b) for v in natives]
    return args, b, tuple(natives)


def _convert(a, b, op, like, passthrough=True):
    """A non-Tensor input: Python scalars take the dtype of the tensor beside them (or pass through
    untouched where the backend keeps the array's dtype), or across kinds the dtype of the array's
    precision (``_dt.scalar_dtype``: a complex beside float64 is complex128, never rounded to
    complex64); everything else is converted."""
    if isinstance(a, _SCALARS):
        if a.__class__ not in _SCALARS:  # NumPy's float64 / complex128: typed, as a 0-d array (NEP 50)
            return b.asarray(a, device=None if like is None else b.device_beside(like._v))
        if like is not None:
            d = like.dtype
            if a.__class__ is bool and d.kind != "b":
                a = int(a)  # True beside numbers is 1 (torch and array_api_strict refuse a bool there)
            elif a.__class__ is int and d.kind in "iu":
                # NumPy's OverflowError for an int the tensor beside it cannot hold (``x + 2**40``, x int32):
                # PyTorch and JAX wrapped it around, silently, in comparisons too (``x < 2**40`` False);
                # array_api_strict raises for comparisons as well: one behaviour on every backend
                _dt.check_python_int(
                    a, d.name, f"op {op.name!r}", "cast the tensor to a wider dtype first (gt.astype(x, gt.int64))"
                )
            if passthrough and op.scalars and b.python_scalars and _dt.scalar_fits(a, d):
                return a
            return b.asarray(a, dtype=_dt.scalar_dtype(a, d), device=b.device_beside(like._v))
        return convert_to_tensor(a, backend=b)._v
    if isinstance(a, (list, tuple)) or not b.is_native(a):
        if a is None:
            raise TypeError(f"op {op.name!r} got None where an array was expected")
        t = convert_to_tensor(a, like=like, backend=b if like is None else None)
        return t._v
    return a


def _promote(op, b, args, natives):
    """Inputs of different dtypes, cast (by a recorded ``astype``) to gradtape's result type, so
    every backend computes in the same dtype; None when they already agree."""
    dts = [None if v.__class__ in _SCALARS else b.dtype_of(v) for v in natives]
    present = [d for d in dts if d is not None]
    if len(set(present)) < 2:
        return None
    rt = _dt.result_type(*present)
    cast = get_op("astype")  # registered by the ops, above this module
    attrs = {"dtype": b.dtype_to_native(rt), "copy": True}
    return tuple(
        a if d is None or d is rt else apply(cast, (a if isinstance(a, Tensor) else wrap(v, b),), attrs)
        for a, v, d in zip(args, natives, dts)
    )


def _lifted(op, args, a, c):
    """``args`` with the Tensors of one backend taken in by the other (``Backend.capture``: a stand-in
    backend makes a value computed outside its recording context a constant of it); else the error."""
    for b in (a._b, c._b):
        out = tuple(lift(x, b) if isinstance(x, Tensor) and x._b is not b else x for x in args)
        if all(y is not None for x, y in zip(args, out) if isinstance(x, Tensor)):
            return out
    _mixed_backends(op, a, c)


def _mixed_backends(op, a, b):
    ctx = recording_context[0]
    if ctx is not None:  # the running recording context's own error, where a backend is its
        ctx.mixed_backends(a._b, b._b)
    raise ValueError(
        f"op {op.name!r} got tensors of two backends: {a._b.name!r} (device {a.device}) and "
        f"{b._b.name!r} (device {b.device}); move one with gt.asarray(x, backend=...) / .to_device, "
        "or convert through NumPy"
    )


def reraise(op, b, args, natives, e):
    devices = []
    for a, v in zip(args, natives):
        if isinstance(a, Tensor):
            d = b.device_str(b.device_of(v))
            if d not in devices:
                devices.append(d)
    if len(devices) > 1:
        raise ValueError(
            f"op {op.name!r} on backend {b.name!r} got tensors on two devices: "
            f"{devices[0]!r} and {devices[1]!r}; move them to one device with "
            ".to_device()"
        ) from e
    if isinstance(e, (TypeError, ValueError, IndexError, NotImplementedError, RuntimeError)):
        msg = f"{e} (in op {op.name!r} on backend {b.name!r})"
        cls = type(e)
        if issubclass(cls, RuntimeError) and not issubclass(cls, (NotImplementedError, RecursionError)):
            # PyTorch reports invalid arguments (shapes, dtypes, singular matrices: its LinAlgError)
            # as RuntimeError; gradtape raises the same class on every backend, ValueError, as
            # TensorFlow's InvalidArgumentError is one
            cls = ValueError
        try:
            new = cls(msg)
        except Exception:
            raise e from None
        raise new.with_traceback(e.__traceback__) from None
    raise e
