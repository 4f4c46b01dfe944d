"""Batching as a stand-in backend: the engine of ``gt.vmap`` / ``gt.vectorized_map``.

Inside a mapped function every tensor lives on a :class:`BatchingBackend`, which wraps the real
adapter (``real``) as ``gt.function``'s ``TracingBackend`` does.  Its native arrays are
:class:`BatchArray` s: a native array of the real adapter and whether it carries the batch, always
as axis 0 (``bat``).  Shapes, ``ndim`` and the shapes of ``Meta`` records are the *logical* ones,
those of one example; so dispatch, the tape, the rules and the engine's undoing of broadcasting work
unchanged on them.  Unbatched values (a weight read from outside, a constant, a random draw) stay
unbatched: an op on them alone runs once, as it would outside.

Each op declares how it batches (``OpDef.batching``: a kind of :data:`KINDS` or a callable
``rule(bk, impl, args, attrs)``), in the file of its chapter; the backend's ``op_impl`` applies it
and calls the real adapter's native forward **once** per op call, with the batch axis moved where
that forward takes it (element-wise: ranks aligned after the batch axis; reductions: axes shifted,
``None`` = every axis but the batch; matmul and linalg: the batch as a leading stack axis;
manipulation: shapes and axes shifted; indexing: the batch axis kept by a leading full slice).
Gradient rules run through the same ops (the native namespace of this backend resolves a
registered op to its batched form, and :class:`BatchNamespace` gives the Array API functions
rules call by the same kinds), so a tape inside the mapped function works unchanged, at any order.

An op without a batching rule (or inputs its rule does not take, such as a per-example index
array) runs as a Python loop over the examples, with one warning naming it
(:class:`VmapFallbackWarning`; TensorFlow's ``fallback_to_while_loop``), or raises where the map
was asked not to fall back.  A Python value read from a batched array (``bool``, ``float``, a
NumPy conversion: control flow on a per-example value) raises :class:`BatchedValueError`, which
``gt.vmap`` answers by looping over the whole function (warned) or re-raising.

This module knows native arrays, backends and the registry only: ``gradtape/autodiff/vmap.py``
holds the front end.
"""

from __future__ import annotations

import operator
import threading
import warnings

import numpy as np

from gradtape.backends import Backend
from gradtape.core.engine import record
from gradtape.core.recording_state import ACTIVE_TAPES, per_thread
from gradtape.core.registry import OpDef, get_op
from gradtape.core.tensor import Tensor, lift, new_tensor, wrap

__all__ = [
    "BatchArray",
    "BatchingBackend",
    "BatchedValueError",
    "VmapFallbackWarning",
    "KINDS",
    "batching_backend",
    "fallback_policy",
    "kind_of",
    "enter",
    "exit_",
    "capture",
    "running_map",
    "innermost_map",
    "draw_layout",
    "batched_random",
    "shared_draw",
    "MapCall",
    "NoBatchingRule",
    "per_example_sources",
]


class VmapFallbackWarning(UserWarning):
    """An op inside ``gt.vmap`` / ``gt.vectorized_map`` ran as a loop over the examples (it has no
    batching rule for its inputs): correct, but not vectorized."""


class BatchedValueError(TypeError):
    """A Python value (``bool``, ``int``, ``float``, a NumPy array) was read from a value that differs
    from example to example inside ``gt.vmap``: control flow on a per-example value."""


class NoBatchingRule(Exception):
    """Raised by a batching rule (a kind, or an op's own ``rule(bk, impl, args, attrs)``) that does
    not take these inputs: the call runs as a warned loop over the examples."""


_Loop = NoBatchingRule


# ------------------------------------------------------------------------------- the fallback policy
_STATE = threading.local()


def _calls():
    c = getattr(_STATE, "calls", None)
    if c is None:
        c = _STATE.calls = []
    return c


class fallback_policy:
    """Context of one ``gt.vmap`` call: whether an op without a batching rule may loop
    (``allow``), the ops already warned of (one warning per op per call), and the call's name for
    the messages."""

    def __init__(self, allow, warn, where):
        self.allow = allow
        self.warn = warn
        self.where = where
        self.warned = set()

    def __enter__(self):
        _calls().append(self)
        return self

    def __exit__(self, *exc):
        _calls().pop()


def _fallback(name, size):
    calls = _calls()
    pol = calls[-1] if calls else None
    where = "gt.vmap" if pol is None else pol.where
    if pol is not None and not pol.allow:
        raise ValueError(
            f"{where}: op {name!r} has no batching rule for these inputs, and fallback_to_while_loop=False; "
            f"pass fallback_to_while_loop=True to run it as a loop over the {size} examples, or declare how it "
            "batches (OpDef.batching, docs/vmap.md)"
        )
    if pol is None or (pol.warn and name not in pol.warned):
        if pol is not None:
            pol.warned.add(name)
        warnings.warn(
            f"{where}: op {name!r} has no batching rule for these inputs; it runs as a Python loop over the "
            f"{size} examples (TensorFlow's fallback_to_while_loop). Declare how it batches (OpDef.batching, "
            "docs/vmap.md) to vectorize it, or pass fallback_to_while_loop=False to make this an error",
            VmapFallbackWarning,
            stacklevel=4,
        )


# ------------------------------------------------------------------------------------ batched arrays
_BINARY = {
    "__add__": ("add", operator.add),
    "__sub__": ("subtract", operator.sub),
    "__mul__": ("multiply", operator.mul),
    "__truediv__": ("divide", operator.truediv),
    "__floordiv__": ("floor_divide", operator.floordiv),
    "__mod__": ("remainder", operator.mod),
    "__pow__": ("pow", operator.pow),
    "__matmul__": ("matmul", operator.matmul),
    "__and__": ("bitwise_and", operator.and_),
    "__or__": ("bitwise_or", operator.or_),
    "__xor__": ("bitwise_xor", operator.xor),
    "__lshift__": ("bitwise_left_shift", operator.lshift),
    "__rshift__": ("bitwise_right_shift", operator.rshift),
    "__lt__": ("less", operator.lt),
    "__le__": ("less_equal", operator.le),
    "__gt__": ("greater", operator.gt),
    "__ge__": ("greater_equal", operator.ge),
    "__eq__": ("equal", operator.eq),
    "__ne__": ("not_equal", operator.ne),
}
_UNARY = {
    "__neg__": ("negative", operator.neg),
    "__pos__": ("positive", operator.pos),
    "__invert__": ("bitwise_invert", operator.invert),
    "__abs__": ("abs", operator.abs),
}


class BatchArray:
    """A native array of a batching backend: ``v``, a native array of the real adapter, carrying
    the batch as axis 0 where ``bat`` (else the same value for every example); ``bk`` its backend.
    ``shape`` and ``ndim`` are one example's."""

    __slots__ = ("v", "bat", "bk", "__weakref__")
    __array_ufunc__ = None  # NumPy defers its operators to ours
    __array_priority__ = 2000

    def __init__(self, v, bat, bk):
        self.v = v
        self.bat = bat
        self.bk = bk

    @property
    def shape(self):
        s = tuple(self.v.shape)
        return s[1:] if self.bat else s

    @property
    def dtype(self):
        return self.v.dtype

    @property
    def ndim(self):
        return len(self.v.shape) - (1 if self.bat else 0)

    @property
    def device(self):
        return self.bk.real.device_of(self.v)  # (a dask array has no .device)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self):
        what = f"batch of {self.v.shape[0]}" if self.bat else "unbatched"
        return f"<batched array ({what}): shape {self.shape}, dtype {self.dtype}>"

    __hash__ = object.__hash__

    def __len__(self):
        return int(self.shape[0])

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, key):
        return self.bk.call("getitem", _getitem_native, (self,), {"key": key if isinstance(key, tuple) else (key,)})

    def __setitem__(self, key, value):
        raise TypeError("gt.vmap: arrays inside a mapped function are not assigned in place (use gt.setitem)")

    def __array_namespace__(self, api_version=None):
        return self.bk.xp

    def _value(self, kind):
        if self.bat:
            raise BatchedValueError(
                f"gt.vmap: a Python {kind} of a value that differs from example to example (control flow on "
                "a per-example value, or a conversion to NumPy inside the mapped function); use gt.where "
                "(both branches, selected per example) or compute it outside the mapped function"
            )
        return self.v

    def __bool__(self):
        return bool(self._value("bool"))

    def __int__(self):
        return int(self._value("int"))

    def __float__(self):
        return float(self._value("float"))

    def __complex__(self):
        return complex(self._value("complex"))

    def __index__(self):
        return operator.index(self._value("int"))

    def __array__(self, *args, **kwargs):
        return np.asarray(self.bk.real.to_numpy(self._value("NumPy array")), *args, **kwargs)

    @property
    def T(self):
        return self.bk.xp.permute_dims(self, tuple(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self):
        return self.bk.xp.matrix_transpose(self)

    def astype(self, dtype):
        return self.bk.xp.astype(self, dtype)

    def to_device(self, device, /, *, stream=None):
        return self.bk.xp.asarray(self, device=device)


def _getitem_native(x, *, key):
    return x[key]


def _binary_method(name, fn):
    # (a Python operator's kind is its own: element-wise, or matmul; no registry look-up per call)
    kind = "matmul" if name == "matmul" else "elementwise"

    def method(self, other):
        return self.bk.call(name, fn, (self, other), {}, kind)

    def reflected(self, other):
        return self.bk.call(name, fn, (other, self), {}, kind)

    return method, reflected


for _m_name, (_op_name, _fn) in _BINARY.items():
    _m, _r = _binary_method(_op_name, _fn)
    setattr(BatchArray, _m_name, _m)
    if _m_name not in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
        setattr(BatchArray, "__r" + _m_name[2:], _r)
for _m_name, (_op_name, _fn) in _UNARY.items():  # type: ignore[assignment]
    _m = (lambda n, f: lambda self: self.bk.call(n, f, (self,), {}, "elementwise"))(_op_name, _fn)
    setattr(BatchArray, _m_name, _m)
del _m_name, _op_name, _fn, _m, _r


# -------------------------------------------------------------------------------------------- helpers
def _is_b(a):
    return a.__class__ is BatchArray


def _batched(a):
    return a.__class__ is BatchArray and a.bat


def _any_batched(args, attrs):
    for a in args:
        if a.__class__ is BatchArray:
            if a.bat:
                return True
        elif a.__class__ in (list, tuple) and any(_batched(x) for x in a):
            return True
    for v in attrs.values():
        if v.__class__ is BatchArray:
            if v.bat:
                return True
        elif v.__class__ in (list, tuple) and any(_batched(x) for x in v):
            return True
    return False


def _plain(a):
    """``a`` with every (unbatched) BatchArray replaced by its native value."""
    c = a.__class__
    if c is BatchArray:
        return a.v
    if c is tuple or c is list:
        return c(_plain(x) for x in a)
    if c is dict:
        return {k: _plain(v) for k, v in a.items()}
    return a


def _size(args, attrs=None):
    for a in list(args) + list((attrs or {}).values()):
        if _batched(a):
            return a.v.shape[0]
        if a.__class__ in (list, tuple):
            for x in a:
                if _batched(x):
                    return x.v.shape[0]
    raise AssertionError("no batched input")


def _pad(xp, a, rank):
    """Batched ``a``'s native value with new axes after the batch axis up to logical ``rank``."""
    v = a.v
    r = len(v.shape) - 1
    if r >= rank:
        return v
    return xp.reshape(v, (v.shape[0],) + (1,) * (rank - r) + tuple(v.shape[1:]))


def _full(xp, a, size):
    """``a``'s native value with the batch axis, broadcast to ``size`` where ``a`` is unbatched."""
    if a.bat:
        return a.v
    v = a.v
    return xp.broadcast_to(xp.expand_dims(v, axis=0), (size, *tuple(v.shape)))


def _norm(axis, n):
    """A logical axis (or tuple) shifted past the batch axis (negatives read against rank ``n``)."""
    if isinstance(axis, (tuple, list)):
        return tuple(int(a) % n + 1 if n else int(a) + 1 for a in axis)
    return int(axis) % n + 1 if n else int(axis) + 1


# ------------------------------------------------------------------------------------- the kinds
_PY_SCALARS = (bool, int, float, complex)


def _elementwise(bk, impl, args, attrs):
    """Element-wise: batched inputs get new axes after the batch axis up to the highest logical
    rank, so every library's broadcasting (from the right) lines the examples' axes up."""
    if len(args) == 2 and not attrs:  # (the common case, without the loops)
        a, b = args
        if a.__class__ is BatchArray:
            va = a.v
            ra = len(va.shape) - a.bat
            if b.__class__ is BatchArray:
                vb = b.v
                rb = len(vb.shape) - b.bat
                if ra == rb or (ra > rb and not b.bat) or (rb > ra and not a.bat):
                    return impl(va, vb)
            elif b.__class__ in _PY_SCALARS:
                return impl(va, b)
        elif b.__class__ is BatchArray and a.__class__ in _PY_SCALARS:
            return impl(a, b.v)
    xp = bk.real.xp
    rank = max((a.ndim for a in args if _is_b(a)), default=0)
    nat = [(_pad(xp, a, rank) if a.bat else a.v) if _is_b(a) else a for a in args]
    return impl(*nat, **_plain(attrs))


def _reduction(bk, impl, args, attrs):
    """A reduction over ``axis`` (int, tuple; None: every axis of the example), ``keepdims`` kept."""
    x = args[0]
    if not x.bat or len(args) > 1:
        raise _Loop
    n = x.ndim
    attrs = dict(attrs)
    axis = attrs.get("axis")
    attrs["axis"] = tuple(range(1, n + 1)) if axis is None else _norm(axis, n)
    if attrs["axis"] == ():
        if n or (axis is not None and axis != ()):
            raise _Loop  # (a reduction over no axis: libraries read an empty tuple differently)
        # a scalar example: reduced over a unit axis (the same as over none, for every reduction)
        attrs["axis"] = 1
        attrs["keepdims"] = False
        return impl(bk.real.xp.reshape(x.v, (x.v.shape[0], 1)), **attrs)
    return impl(x.v, **attrs)


def _flat_reduction(bk, impl, args, attrs):
    """A reduction whose ``axis=None`` reads the flattened example (``argmax``)."""
    x = args[0]
    if len(args) > 1:
        raise _Loop
    attrs = dict(attrs)
    if attrs.get("axis") is None:
        xp = bk.real.xp
        size = x.v.shape[0]
        keep = attrs.get("keepdims", False)
        attrs["axis"] = 1
        attrs["keepdims"] = False
        out = impl(xp.reshape(x.v, (size, -1)), **attrs)
        return xp.reshape(out, (size,) + (1,) * x.ndim) if keep else out
    attrs["axis"] = _norm(attrs["axis"], x.ndim)
    return impl(x.v, **attrs)


def axis_kind(attr="axis", extra=0, none="all", stack=False, others=()):
    """A kind for ops that act along ``attrs[attr]`` (an int or tuple): the axis shifted past the batch
    axis, read against the example's rank plus ``extra`` (``stack``, ``expand_dims``: the result's
    rank).  ``none``: what ``None`` means (``"all"`` the example's axes; ``"keep"`` pass it on;
    ``"loop"`` no rule).  ``stack``: the array inputs are combined (``concat``, ``stack``,
    ``take_along_axis``): each gets the batch axis.  ``others``: further attributes that are axes."""

    def rule(bk, impl, args, attrs):
        xp = bk.real.xp
        arrays = [a for a in args if _is_b(a)]
        if stack:
            size = _size(args)
            nat = [_full(xp, a, size) if _is_b(a) else a for a in args]
        else:
            if any(a.bat for a in arrays[1:]) or not arrays[0].bat:
                raise _Loop
            nat = [a.v if _is_b(a) else a for a in args]
        n = arrays[0].ndim + extra
        attrs = dict(_plain(attrs))
        if attr in attrs or none == "all":
            axis = attrs.get(attr)
            if axis is None:
                if none == "loop":
                    raise _Loop
                if none == "all":
                    attrs[attr] = tuple(range(1, n + 1))
            else:
                attrs[attr] = _norm(axis, n)
        for o in others:
            if attrs.get(o) is not None:
                attrs[o] = _norm(attrs[o], n)
        return impl(*nat, **attrs)

    rule.kind_name = f"axis ({attr})"
    return rule


def _elementwise_axis(bk, impl, args, attrs):
    """Element-wise over broadcast inputs with one ``axis`` (``vecdot``, ``linalg.cross``, softmax
    cross entropy): inputs aligned as element-wise, the axis read from the right."""
    rank = max((a.ndim for a in args if _is_b(a)), default=0)
    attrs = dict(attrs)
    axis = attrs.get("axis", -1)
    if axis is not None and axis >= 0:
        attrs["axis"] = axis - rank
    return _elementwise(bk, impl, args, attrs)


def _leading(bk, impl, args, attrs):
    """An op of one array that takes any leading axes as a stack (linalg, ``tril``, casts)."""
    if len([a for a in args if _batched(a)]) != 1 or not _batched(args[0]):
        raise _Loop
    return impl(*[_plain(a) for a in args], **_plain(attrs))


def _stacked_matrices(bk, impl, args, attrs):
    """An op of several matrices (``linalg.solve``): each (of rank >= 2) gets the batch axis, the
    stack axes aligned."""
    xp = bk.real.xp
    arrays = [a for a in args if _is_b(a)]
    if any(a.ndim < 2 for a in arrays):
        raise _Loop
    rank = max(a.ndim for a in arrays)
    return impl(*[(_pad(xp, a, rank) if a.bat else a.v) if _is_b(a) else a for a in args], **_plain(attrs))


def _matmul(bk, impl, args, attrs):
    """``x1 @ x2`` with the standard's 1-D rules: a batched vector is a one-row (one-column) stack
    of matrices, the stack axes aligned; a batched stack times an unbatched matrix is one call."""
    a, b = args
    xp = bk.real.xp
    if not (_is_b(a) and _is_b(b)):
        raise _Loop
    if not b.bat and b.ndim == 2 and a.ndim >= 1:
        return impl(a.v, b.v)  # (B, ..., k) @ (k, n): the batch is a leading axis already
    if not a.bat and b.ndim >= 2 and a.ndim <= 2:
        return impl(a.v, _pad(xp, b, 2) if b.bat else b.v)
    va, vb = a.v, b.v
    if a.ndim == 1:
        va = xp.expand_dims(va, axis=-2)
    if b.ndim == 1:
        vb = xp.expand_dims(vb, axis=-1)
    rank = max(a.ndim, b.ndim, 2)
    if a.bat:
        va = _pad(xp, BatchArray(va, True, bk), rank)
    if b.bat:
        vb = _pad(xp, BatchArray(vb, True, bk), rank)
    out = impl(va, vb)
    if b.ndim == 1:
        out = xp.squeeze(out, axis=-1)
    if a.ndim == 1:
        out = xp.squeeze(out, axis=-2 if b.ndim > 1 else -1)
    return out


def _reshape(bk, impl, args, attrs):
    (x,) = args
    attrs = dict(attrs)
    attrs["shape"] = (x.v.shape[0], *tuple(attrs["shape"]))
    return impl(x.v, **attrs)


def _permute_dims(bk, impl, args, attrs):
    (x,) = args
    n = x.ndim
    return impl(x.v, axes=(0, *(int(a) % n + 1 for a in attrs["axes"])))


def _broadcast_to(bk, impl, args, attrs):
    x, *pos = args  # (the shape positional where a rule calls xp.broadcast_to(g, shape))
    shape = tuple(pos[0] if pos else attrs["shape"])
    return impl(_pad(bk.real.xp, x, len(shape)), shape=(x.v.shape[0], *shape))


def _moveaxis(bk, impl, args, attrs):
    x, *pos = args
    src, dst = pos or (attrs["source"], attrs["destination"])
    n = x.ndim
    return impl(x.v, _norm(src, n), _norm(dst, n))


def _tile(bk, impl, args, attrs):
    (x,) = args
    reps = tuple(attrs["repetitions"])
    n = max(x.ndim, len(reps))
    reps = (1,) * (n - len(reps)) + reps
    return impl(_pad(bk.real.xp, x, n), repetitions=(1, *reps))


def _broadcast_arrays(bk, impl, args, attrs):
    """Every output gets the batch axis: unbatched inputs a unit one."""
    xp = bk.real.xp
    rank = max(a.ndim for a in args)
    nat = []
    for a in args:
        if a.bat:
            nat.append(_pad(xp, a, rank))
        else:
            v = a.v
            nat.append(xp.reshape(v, (1,) * (rank + 1 - len(v.shape)) + tuple(v.shape)))
    return impl(*nat)


def _key_entries(bk, key):
    """The key of a batched getitem / setitem: a leading full slice, where that keeps the batch axis
    first (basic entries; or one index array and no integers, whose result axes stay in place)."""
    plain = []
    arrays = 0
    ints = 0
    for k in key:
        if k.__class__ is BatchArray:
            if k.bat:
                raise _Loop  # a per-example index
            k = k.v
        if isinstance(k, (list, np.ndarray)) or (hasattr(k, "shape") and hasattr(k, "dtype")):
            arrays += 1
        elif isinstance(k, int) and not isinstance(k, bool):
            ints += 1
        elif isinstance(k, bool):
            raise _Loop
        plain.append(k)
    if arrays > 1 or (arrays and ints):
        raise _Loop
    return (slice(None), *plain)


def _getitem(bk, impl, args, attrs):
    (x,) = args
    if not x.bat:
        raise _Loop
    return impl(x.v, key=_key_entries(bk, attrs["key"]))


def _region_rank(shape, key):
    """The rank of ``x[key]`` for ``x`` of ``shape`` (host dummies: nothing is computed)."""
    dummy = np.broadcast_to(np.zeros((), dtype=bool), tuple(shape))
    hk = []
    for k in key:
        if k.__class__ is BatchArray:
            k = k.v
        if hasattr(k, "shape") and hasattr(k, "dtype") and not isinstance(k, np.ndarray):
            kind = np.dtype(str(k.dtype).replace("torch.", "")).kind if "bool" not in str(k.dtype) else "b"
            k = np.ones(tuple(k.shape), dtype=bool) if kind == "b" else np.zeros(tuple(k.shape), dtype=np.int64)
        hk.append(k)
    return dummy[tuple(hk)].ndim


def _setitem(bk, impl, args, attrs):
    """``setitem(x, value, key=...)`` (the value positional or by keyword): the batch axis kept by
    the key's leading full slice; ``x`` and ``value`` given it where either has it."""
    xp = bk.real.xp
    attrs = dict(attrs)
    args = list(args)
    value = attrs.pop("value") if "value" in attrs else args.pop(1)
    (x,) = args
    key = attrs.pop("key")
    size = _size([x, value], {"key": key})
    nkey = _key_entries(bk, key)
    vx = _full(xp, x, size)
    if _is_b(value):
        if value.bat:
            vv = _pad(xp, value, _region_rank(x.shape, key))
        else:
            vv = value.v
    else:
        vv = value
    return impl(vx, vv, key=nkey)


def _index_add(bk, impl, args, attrs):
    """``index_add(values, key=..., shape=...)``: zeros with the batch axis, added at the key."""
    (values,) = args
    if not values.bat:
        raise _Loop
    nkey = _key_entries(bk, attrs["key"])
    return impl(values.v, key=nkey, shape=(values.v.shape[0], *tuple(attrs["shape"])))


def _leading_all(bk, impl, args, attrs):
    """An op of several arrays that takes the same leading stack axes on all of them (a loss of
    labels and logits): every array given the batch axis."""
    xp = bk.real.xp
    size = _size(args, attrs)
    return impl(*[_full(xp, a, size) if _is_b(a) else a for a in args], **_plain(attrs))


def _prod(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _tensordot(bk, impl, args, attrs):
    """``tensordot`` over ``axes`` (a pair of axis tuples): the axes of a batched operand shifted past
    the batch axis; both batched: the contracted axes lined up and one batched ``matmul``."""
    a, b = args
    if not (_is_b(a) and _is_b(b)):
        raise _Loop
    xp = bk.real.xp
    a1, a2 = attrs["axes"]
    if not b.bat:
        return impl(a.v, b.v, axes=(tuple(i + 1 for i in a1), tuple(a2)))
    nf1 = a.ndim - len(a1)
    if not a.bat:
        out = impl(a.v, b.v, axes=(tuple(a1), tuple(i + 1 for i in a2)))
        return out if nf1 == 0 else xp.moveaxis(out, nf1, 0)
    free1 = [i for i in range(a.ndim) if i not in a1]
    free2 = [i for i in range(b.ndim) if i not in a2]
    s1 = [a.shape[i] for i in free1]
    s2 = [b.shape[i] for i in free2]
    size, k = a.v.shape[0], _prod(a.shape[i] for i in a1)
    va = xp.permute_dims(a.v, (0, *[i + 1 for i in free1], *[i + 1 for i in a1]))
    vb = xp.permute_dims(b.v, (0, *[i + 1 for i in a2], *[i + 1 for i in free2]))
    out = xp.matmul(xp.reshape(va, (size, _prod(s1), k)), xp.reshape(vb, (size, k, _prod(s2))))
    return xp.reshape(out, (size, *s1, *s2))


def _outer(bk, impl, args, attrs):
    """``linalg.outer`` of two vectors: ``a[..., :, None] * b[..., None, :]``, the batch leading."""
    a, b = args
    if not (_is_b(a) and _is_b(b)):
        raise _Loop
    xp = bk.real.xp
    return xp.multiply(xp.expand_dims(a.v, axis=-1), xp.expand_dims(b.v, axis=-2))


def _meshgrid(bk, impl, args, attrs):
    """``meshgrid`` of 1-D arrays: each reshaped to its axis of the grid (``"xy"``: the first two
    swapped) after the batch axis, and broadcast to the batch of grids."""
    if not all(_is_b(a) and a.ndim == 1 for a in args):
        raise _Loop
    xp = bk.real.xp
    size = _size(args, attrs)
    n = len(args)
    xy = attrs.get("indexing", "xy") == "xy" and n >= 2
    pos = [(1 - i if xy and i < 2 else i) for i in range(n)]
    grid = [0] * n
    for a, p in zip(args, pos):
        grid[p] = a.shape[0]
    out = []
    for a, p in zip(args, pos):
        shape = [1] * n
        shape[p] = a.shape[0]
        v = xp.reshape(a.v, (a.v.shape[0] if a.bat else 1, *shape))
        out.append(xp.broadcast_to(v, (size, *grid)))
    return tuple(out)


def _unbatched(bk, impl, args, attrs):
    """An op that makes its output from its attributes alone (creation): never batched."""
    raise _Loop


#: the kinds an op's ``batching`` may name (``gradtape/ops/*.py`` declare them; docs/vmap.md lists them)
KINDS = {
    "elementwise": _elementwise,
    "elementwise_axis": _elementwise_axis,
    "reduction": _reduction,
    "flat_reduction": _flat_reduction,
    "axis": axis_kind(),
    "axis_or_loop": axis_kind(none="loop"),
    "concat": axis_kind(stack=True, none="loop"),
    "stack": axis_kind(stack=True, extra=1),
    "take_along_axis": axis_kind(stack=True),
    "expand_dims": None,  # (filled below: the axis is read against the result's rank)
    "leading": _leading,
    "stacked_matrices": _stacked_matrices,
    "matmul": _matmul,
    "reshape": _reshape,
    "permute_dims": _permute_dims,
    "broadcast_to": _broadcast_to,
    "broadcast_arrays": _broadcast_arrays,
    "moveaxis": _moveaxis,
    "tile": _tile,
    "getitem": _getitem,
    "setitem": _setitem,
    "index_add": _index_add,
    "unbatched": _unbatched,
    "leading_all": _leading_all,
    "tensordot": _tensordot,
    "outer": _outer,
    "meshgrid": _meshgrid,
}


def _expand_dims(bk, impl, args, attrs):
    (x,) = args
    axis = attrs["axis"]
    k = len(axis) if isinstance(axis, (tuple, list)) else 1
    return impl(x.v, axis=_norm(axis, x.ndim + k))


KINDS["expand_dims"] = _expand_dims


def kind_of(opdef):
    """The name of ``opdef``'s batching (a kind of :data:`KINDS`, ``"custom"``, or ``"loop"``)."""
    b = opdef.batching
    if b is None:
        return "loop"
    return b if isinstance(b, str) else "custom"


# --------------------------------------------------------------------------------------- the backend
class BatchingBackend(Backend):
    """A backend whose native arrays are :class:`BatchArray` s over the real adapter ``real``."""

    supports_vmap = False
    supports_native_grad = False
    array_type = BatchArray
    chunked = False
    lays_out = False
    lazy = False
    compiles = None

    def __init__(self, real):
        self.real = real
        self.name = real.name
        self.install_hint = real.install_hint
        self.python_scalars = real.python_scalars
        self.floating_ints_to_float32 = real.floating_ints_to_float32
        self.host_index_arrays = False
        self.stand_ins = real.stand_ins
        self.overrides = {}
        self._xp = None
        self._ns_cache = {}

    @property
    def xp(self):
        if self._xp is None:
            self._xp = BatchNamespace(self)
        return self._xp

    # ---------------------------------------------------------------- ops
    def op_impl(self, opdef):
        """The op's batched forward: its batching rule around the real adapter's native forward."""
        real_impl = opdef.impls.get(self.real) or opdef.resolve(self.real)
        name = opdef.name
        if opdef.batching == "elementwise":  # (the common kind, without the generic steps)
            wrap_out = self._wrap

            def elementwise(*args, **attrs):
                for a in args:
                    if a.__class__ is BatchArray and a.bat:
                        return BatchArray(_elementwise(self, real_impl, args, attrs), True, self)
                return wrap_out(real_impl(*[a.v if a.__class__ is BatchArray else a for a in args], **attrs), False)

            return elementwise

        def batched(*args, **attrs):
            return self.call(name, real_impl, args, attrs, opdef.batching)

        return batched

    def call(self, name, impl, args, attrs, kind=None):
        """``impl`` (a native function of the real adapter) applied to ``args`` / ``attrs`` holding
        BatchArrays, by ``kind`` (default: the kind the op named ``name`` declares)."""
        if kind is None:
            kind = _kind_named(name)
        if kind == "elementwise":
            for a in args:
                if a.__class__ is BatchArray and a.bat:
                    return BatchArray(_elementwise(self, impl, args, attrs), True, self)
        if not _any_batched(args, attrs):
            return self._wrap(impl(*[_plain(a) for a in args], **_plain(attrs)), False)
        rule = KINDS.get(kind) if isinstance(kind, str) else kind
        if rule is not None:
            try:
                return self._wrap(rule(self, impl, args, attrs), True)
            except _Loop:
                pass
        return self._loop(name, impl, args, attrs)

    def _wrap(self, out, bat):
        c = out.__class__
        if c is tuple or c is list:
            return tuple(self._wrap(o, bat) for o in out)
        if out is None or c in (bool, int, float, complex):
            return out
        real = self.real
        if c is not real.array_type:
            out = real.fix_output(out)  # (NumPy's scalars from 0-d inputs)
        return BatchArray(out, bat, self)

    def _loop(self, name, impl, args, attrs):
        size = _size(args, attrs)
        if self.real.stand_ins:
            # inside a gt.function trace: a loop of this op's calls, stacked, would be replayed on other
            # values, whose results may be ragged where the traced ones were not; the whole function
            # looped over the examples is traced as one program per example instead
            raise BatchedValueError("no batching rule for these inputs inside gt.function")
        _fallback(name, size)
        xp = self.real.xp

        def at(a, i):
            c = a.__class__
            if c is BatchArray:
                return a.v[i, ...] if a.bat else a.v
            if c is tuple or c is list:
                return c(at(x, i) for x in a)
            return a

        outs = [impl(*[at(a, i) for a in args], **{k: at(v, i) for k, v in attrs.items()}) for i in range(size)]
        if isinstance(outs[0], (tuple, list)):
            parts = [[xp.asarray(o[k]) for o in outs] for k in range(len(outs[0]))]
        else:
            parts = [[xp.asarray(o) for o in outs]]
        for part in parts:
            shapes = {tuple(o.shape) for o in part}
            if len(shapes) > 1:
                # (nonzero, unique_values, a boolean mask: each example's result has a shape of its own,
                # no batch of them is one array; gt.vmap then runs the whole function once per example)
                raise BatchedValueError(
                    f"the examples' results have different shapes ({', '.join(map(str, sorted(shapes)))})"
                )
        stacked = tuple(BatchArray(xp.stack(part), True, self) for part in parts)
        return stacked if isinstance(outs[0], (tuple, list)) else stacked[0]

    # ---------------------------------------------------------------- dtypes, devices: the real adapter's
    def dtype_to_native(self, dtype):
        return self.real.dtype_to_native(dtype)

    def dtype_from_native(self, nd):
        return self.real.dtype_from_native(nd)

    def dtype_of(self, x):
        return self.real.dtype_of(x.v if x.__class__ is BatchArray else x)

    @property
    def device(self):
        return self.real.device

    def default_device(self):
        return self.real.default_device()

    def unplaced_device(self):
        return self.real.unplaced_device()

    def device_beside(self, x):
        return self.real.device_beside(x.v if x.__class__ is BatchArray else x)

    def parse_device(self, device):
        return self.real.parse_device(device)

    def device_of(self, x):
        return self.real.device_of(x.v if x.__class__ is BatchArray else x)

    def device_str(self, device):
        return self.real.device_str(device)

    def devices(self):
        return self.real.devices()

    def has_gpu(self):
        return self.real.has_gpu()

    def weights_device(self, device):
        return self.real.weights_device(device)

    def is_native(self, obj):
        return obj.__class__ is BatchArray

    # ---------------------------------------------------------------- conversions
    def asarray(self, value, dtype=None, device=None):
        if value.__class__ is BatchArray:
            if dtype is None and device is None:
                return value
            return BatchArray(self.real.asarray(value.v, dtype=dtype, device=device), value.bat, self)
        return BatchArray(self.real.asarray(value, dtype=dtype, device=device), False, self)

    def fix_output(self, out):
        if out.__class__ is BatchArray:
            return out
        if out.__class__ is not self.real.array_type:
            out = self.real.fix_output(out)
        return BatchArray(out, False, self)

    def to_numpy(self, x):
        if x.__class__ is BatchArray:
            return self.real.to_numpy(x._value("NumPy array"))
        return self.real.to_numpy(x)

    def to_device(self, x, device):
        return BatchArray(self.real.to_device(x.v, device), x.bat, self)

    def from_dlpack(self, obj, device=None):
        if obj.__class__ is BatchArray:
            return obj if device is None else self.to_device(obj, device)
        return BatchArray(self.real.from_dlpack(obj, device=device), False, self)

    def random_from_numpy(self, arr, dtype, device=None):
        return BatchArray(self.real.random_from_numpy(arr, dtype, device), False, self)

    def update_inplace(self, name, x, delta):
        return False

    def match_layout(self, g, source, layout=None):
        return g

    def index_add(self, shape, dtype, key, values):
        return self.xp.index_add(values, key=key, shape=shape)

    def setitem(self, x, key, value):
        return self.xp.setitem(x, key=key, value=value)

    def erf(self, x):
        return self.call("erf", self.real.erf, (x,), {}, "elementwise")

    def special_function(self, name):
        f = self.real.special_function(name)
        if f is None:
            return None
        return lambda *a, **k: self.call(f"special.{name}", f, a, k, "elementwise")

    def vmap(self, fn, in_axes=0, out_axes=0):
        raise NotImplementedError("no native vmap inside gt.vmap (the batched walk is used)")

    def native_grad(self, fn, *args):
        raise NotImplementedError("no native autodiff inside gt.vmap")

    def __getattr__(self, name):
        # anything else of the real adapter (its own helpers, flags)
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.real, name)

    def __repr__(self):
        return f"<gradtape batching backend of {self.real!r}>"


def _kind_named(name):
    """The batching the op named ``name`` declares (None: no such op, or none declared)."""
    try:
        op = get_op(name)
    except LookupError:
        return None
    return op.batching


#: Array API functions a rule may call that are not ops of the same name, by their kind; and the
#: positional parameters after the arrays that the kinds read as attributes
_NS_KINDS = {
    "moveaxis": ("moveaxis", ("source", "destination")),
    "reshape": ("reshape", ("shape",)),
    "permute_dims": ("permute_dims", ("axes",)),
    "broadcast_to": ("broadcast_to", ("shape",)),
    "expand_dims": ("expand_dims", ()),
    "squeeze": ("axis", ("axis",)),
    "tile": ("tile", ("repetitions",)),
    "concat": ("concat", ()),
    "stack": ("stack", ()),
    "take": ("axis", ()),
    "flip": ("axis", ()),
    "roll": ("axis_or_loop", ("shift",)),
    "astype": ("leading", ("dtype",)),
    "matrix_transpose": ("leading", ()),
    "where": ("elementwise", ()),
    "clip": ("elementwise", ()),
    "sum": ("reduction", ()),
    "prod": ("reduction", ()),
    "mean": ("reduction", ()),
    "max": ("reduction", ()),
    "min": ("reduction", ()),
    "var": ("reduction", ()),
    "std": ("reduction", ()),
    "all": ("reduction", ()),
    "any": ("reduction", ()),
    "argmax": ("flat_reduction", ()),
    "argmin": ("flat_reduction", ()),
    "cumulative_sum": ("axis", ()),
    "cumulative_prod": ("axis", ()),
    "sort": ("axis", ()),
    "argsort": ("axis", ()),
    "vecdot": ("elementwise_axis", ()),
    "matmul": ("matmul", ()),
    "broadcast_arrays": ("broadcast_arrays", ()),
    "isin": (None, ()),
}
#: namespace functions that make arrays from shapes and values alone (unbatched), or read dtypes
_CREATION = frozenset({"zeros", "ones", "empty", "full", "arange", "linspace", "eye", "asarray", "from_dlpack"})
_LIKE = frozenset({"zeros_like", "ones_like", "empty_like", "full_like"})


class BatchNamespace:
    """The Array API namespace of a batching backend: each function applied by its kind (an op's
    declared batching, else :data:`_NS_KINDS`), calling the real namespace's function once; creation
    functions make unbatched arrays; dtypes and inspection pass through."""

    def __init__(self, bk, prefix=""):
        self._bk = bk
        self._prefix = prefix
        ns = bk.real.xp
        for part in prefix.split(".")[:-1]:
            ns = getattr(ns, part)
        self._ns = ns

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        bk = self._bk
        full = self._prefix + name
        if not self._prefix and name in ("linalg", "fft", "special"):
            value = BatchNamespace(bk, name + ".")
            setattr(self, name, value)
            return value
        real_fn = getattr(self._ns, name)
        if not callable(real_fn) or isinstance(real_fn, type):
            setattr(self, name, real_fn)
            return real_fn
        if full in _CREATION:

            def make(*args, **kwargs):
                if args and args[0].__class__ is BatchArray:
                    return bk.asarray(args[0], **kwargs)
                return BatchArray(real_fn(*_plain(args), **_plain(kwargs)), False, bk)

            value = make
        elif full in _LIKE:

            def like(x, *args, **kwargs):
                if x.__class__ is not BatchArray:
                    return BatchArray(real_fn(x, *args, **kwargs), False, bk)
                fn = getattr(bk.real.xp, full.replace("_like", ""))
                kwargs.setdefault("dtype", x.dtype)
                kwargs.setdefault("device", bk.real.device_of(x.v))
                return BatchArray(fn(x.shape, *args, **kwargs), False, bk)

            value = like
        else:
            kind, params = _NS_KINDS.get(full, (_kind_named(full), ()))
            if name in ("concat", "stack"):

                def impl(*xs, **kw):
                    return real_fn(list(xs), **kw)

            elif params:

                def impl(*xs, **kw):
                    pos = [kw.pop(p) for p in params if p in kw]
                    return real_fn(*xs, *pos, **kw)

            else:
                impl = real_fn

            def fn(*args, **kwargs):
                arrays = []
                rest = list(args)
                if name in ("concat", "stack"):
                    arrays = list(rest.pop(0))
                else:
                    while rest and (
                        rest[0].__class__ is BatchArray
                        or (isinstance(rest[0], (int, float, complex, bool)) and not params)
                    ):
                        arrays.append(rest.pop(0))
                for p, v in zip(params, rest):
                    kwargs[p] = v
                if len(rest) > len(params):
                    arrays.extend(rest[len(params) :])
                if not any(a.__class__ is BatchArray for a in arrays) and not any(
                    v.__class__ is BatchArray for v in kwargs.values()
                ):
                    out = real_fn(*args, **{k: v for k, v in kwargs.items() if k not in params})
                    return bk._wrap(out, False) if isinstance(out, bk.real.array_type) else out
                return bk.call(full, impl, tuple(arrays), kwargs, kind)

            value = fn
        setattr(self, name, value)
        return value

    def __repr__(self):
        return f"<batching namespace {self._prefix or ''}of {self._bk.real!r}>"


_BACKENDS = {}


def batching_backend(real):
    """The (one, cached) batching backend over ``real`` (a batching backend itself, for a nested map)."""
    bk = _BACKENDS.get(real)
    if bk is None:
        bk = _BACKENDS[real] = BatchingBackend(real)
    return bk


# ------------------------------------------------------------------------- crossing into and out of a map
# Three steps take a tensor across a map's boundary, each recorded on the tapes as one node with a
# rule, so gradients cross too (a tape outside the map differentiates through it; a tape inside
# differentiates what the map takes in): ``enter`` (an argument mapped over ``axis``: the batch
# axis moved first), ``capture`` (a tensor of the real backend read inside: unbatched; its gradient
# is summed over the examples) and ``exit`` (a result: the batch axis moved to ``out_axis``, an
# unbatched result broadcast).  Their rules call one another on a recorded walk (higher order).
class MapCall:
    """One running map: its batching backend, batch size and whether it is still running (a tape
    inside the mapped function that differentiates with respect to a captured tensor)."""

    __slots__ = ("bk", "size", "running", "where", "randomness")

    def __init__(self, bk, size, where, randomness="different"):
        self.bk = bk
        self.size = size
        self.running = True
        self.where = where
        self.randomness = randomness  # random draws inside: "different" per example, "same", or "error"


def _cross(op, t, out, b, attrs):
    """A new Tensor of backend ``b`` around native ``out``, recorded as ``op`` applied to ``t``."""
    y = wrap(out, b)
    if ACTIVE_TAPES[0] and per_thread.tapes:
        record(op, (t,), (t._v,), attrs, (y,))
    return y


def _exit_native(g, axis, size):
    """Batched ``g`` (a BatchArray) as a native array of the real backend, the batch at ``axis``."""
    xp = g.bk.real.xp
    v = _full(xp, g, size)
    return v if axis == 0 else xp.moveaxis(v, 0, axis)


def enter(t, axis, call):
    """Tensor ``t`` of the real backend, mapped over ``axis``, as a batched Tensor of the map."""
    xp = call.bk.real.xp
    v = t._v if axis == 0 else xp.moveaxis(t._v, axis, 0)
    return _cross(_ENTER, t, BatchArray(v, True, call.bk), call.bk, {"axis": axis, "call": call})


def exit_(t, axis, call):
    """Tensor ``t`` of the map as a Tensor of the real backend, the examples along ``axis``."""
    return _cross(_EXIT, t, _exit_native(t._v, axis, call.size), call.bk.real, {"axis": axis, "call": call})


def capture(t, call):
    """Tensor ``t`` of the real backend read inside the map: the same value for every example."""
    return _cross(_CAPTURE, t, BatchArray(t._v, False, call.bk), call.bk, {"call": call})


def _enter_grad(xp, op, g):
    axis, call = op.attrs["axis"], op.attrs["call"]
    if isinstance(g, Tensor):
        return exit_(g, axis, call)
    if g.__class__ is not BatchArray:
        g = BatchArray(g, False, call.bk)
    return _exit_native(g, axis, call.size)


def _exit_grad(xp, op, g):
    axis, call = op.attrs["axis"], op.attrs["call"]
    if isinstance(g, Tensor):
        return enter(g, axis, call)
    rx = call.bk.real.xp
    return BatchArray(g if axis == 0 else rx.moveaxis(g, axis, 0), True, call.bk)


def _capture_grad(xp, op, g):
    call = op.attrs["call"]
    if call.running:
        # a tape inside the mapped function, differentiating with respect to a tensor read from
        # outside (a closure, a variable): its gradient per example, as ``jax.vmap(jax.grad(f))``
        # with the value closed over (the tape asks for it on the map's backend: :func:`per_example_sources`)
        return g
    if isinstance(g, Tensor):
        return xp.sum(exit_(g, 0, call), axis=0)
    if g.__class__ is not BatchArray:
        return g
    if g.bat:
        return call.bk.real.xp.sum(g.v, axis=0)
    return g.v * call.size


def _crossing(name, rule):
    op = OpDef(f"vmap_{name}", lambda xp, x: x, grad=rule, rule_form="xp", saves=())
    op.docs = op.docs._replace(chapter=None, doc=f"gt.vmap's {name} step")
    return op


_ENTER = _crossing("enter", _enter_grad)
_EXIT = _crossing("exit", _exit_grad)
_CAPTURE = _crossing("capture", _capture_grad)
_CROSSINGS = (_ENTER, _EXIT, _CAPTURE)


def _capture_tensor(bk, t):
    """:meth:`BatchingBackend.capture_tensor`: a tensor of the real backend (or of a map this one is
    nested in), read inside the running map of ``bk``."""
    call = _running_call(bk)
    if call is None:
        return None
    if t._b is not bk.real:
        t = lift(t, bk.real)  # (a map nested in another, or a map inside gt.function: the outer one first)
        if t is None:
            return None
    return capture(t, call)


def per_example_sources(sources, nodes):
    """``sources`` of a tape's ``gradient`` called inside a running map, each tensor from outside
    the map (a closure, a variable: captured where the mapped function reads it) standing as a
    tensor of the map's backend with its identity, so that its gradient comes back per example
    (batched inside the map, stacked when it leaves), as ``jax.vmap(jax.grad(f))`` gives for a
    closed-over value.  Outside a map: ``sources`` themselves.

    Where the tape (its ``nodes``) also recorded ops computed inside the mapped function on outer
    tensors alone (``w ** 2`` before ``w`` meets an example: those ran outside the batch, and their
    rules cannot take a per-example gradient) raises :class:`BatchedValueError`: the map then runs
    the function as a loop over the examples (warned), or says why it cannot."""
    maps = getattr(_STATE, "maps", None)
    if not maps:
        return sources
    bk = maps[-1].bk
    layers = [bk]  # the map's backend, then the ones it stands in for, down to the real one
    while layers[-1].__class__ is BatchingBackend:
        layers.append(layers[-1].real)
    out = sources
    for k, s in enumerate(sources):
        if s._b is bk or not any(s._b is b for b in layers):
            continue
        if out is sources:
            out = list(sources)
            outer = layers[1:]
            for n in nodes:
                if n.opdef not in _CROSSINGS and any(n.backend is b for b in outer):
                    raise BatchedValueError(
                        f"{maps[-1].where}: a GradientTape inside the mapped function differentiates with respect "
                        f"to a tensor read from outside it through op {n.opdef.name!r}, computed on tensors from "
                        "outside alone (outside the batch), whose rule cannot take a per-example gradient; "
                        "compute it outside the tape, or pass the tensor as an argument with in_axes=None"
                    )
        v = s._v
        for b in reversed(layers[: layers.index(s._b)]):
            v = BatchArray(v, False, b)
        p = new_tensor(Tensor)
        p._v, p._b, p._id = v, bk, s._id
        out[k] = p
    return out


def innermost_map():
    """The batching backend of the innermost map running in this thread (None: none runs): a map
    started inside it maps over it (its arrays hold the outer map's arrays)."""
    maps = getattr(_STATE, "maps", None)
    return maps[-1].bk if maps else None


def draw_layout(shape, what, b):
    """A random draw (``what``: ``"normal"``...) of one example's ``shape`` made inside running maps:
    ``(the shape to draw, layout)``.  Each map drawing per example (``randomness="different"``,
    TensorFlow's ``vectorized_map`` and torch.func's rule) puts its batch size in front of the shape,
    outermost map first, and ``layout`` (one bool a map: batched or not) tells :func:`batched_random`
    how to hold the draw; ``randomness="same"`` draws once for every example of its map, ``"error"``
    refuses.  ``b``: the maps' real backend, or one of their batching backends (a draw shaped like a
    mapped tensor: ``gt.nn.dropout``'s mask).  Outside a map, or for a draw on another backend than the
    maps': ``(shape, None)``."""
    maps = getattr(_STATE, "maps", None)
    if not maps:
        return shape, None
    real, layers = _map_layers(maps)
    if real is not b and not any(layer is b for layer in layers):
        return shape, None
    shape = tuple(int(n) for n in np.atleast_1d(np.asarray(shape, dtype=np.int64)))
    layout = []
    for call in maps:
        if call.randomness == "error":
            raise ValueError(
                f"{call.where}: a random draw ({what}) inside the mapped function, which was made with "
                "randomness='error'; pass randomness='different' (independent draws per example) or 'same' "
                "(one draw shared by every example), or draw outside the map"
            )
        layout.append(call.randomness == "different")
    prefix = tuple(call.size for call, batched in zip(maps, layout) if batched)
    return prefix + shape, tuple(layout)


def _map_layers(maps):
    """(the real backend under the running ``maps``, their batching backends outermost first); the
    real backend is None where the maps are not one nest (a map over another's backend)."""
    chain = [maps[-1].bk]
    while chain[-1].__class__ is BatchingBackend:
        chain.append(chain[-1].real)
    layers = chain[-2::-1]
    if len(layers) != len(maps) or any(c.bk is not k for c, k in zip(maps, layers)):
        return None, layers
    return chain[-1], layers


def batched_random(arr, dtype, device, layout):
    """The host draw ``arr`` (made with :func:`draw_layout`'s shape and ``layout``) as a Tensor of
    the innermost running map: the real backend's array held by each map's layer, batched where the
    map draws per example."""
    real, layers = _map_layers(_STATE.maps)
    v = real.random_from_numpy(arr, dtype, device)
    for bk, batched in zip(layers, layout):
        v = BatchArray(v, batched, bk)
    return wrap(v, layers[-1])


def shared_draw():
    """A random draw made inside a running map (``gt.random``): drawn once with one example's shape
    and shared by every example (JAX's rule for one key; TensorFlow's ``vectorized_map`` draws per
    example), said once per map."""
    maps = getattr(_STATE, "maps", None)
    if not maps:
        return
    calls = _calls()
    pol = calls[-1] if calls else None
    if pol is not None and ("random draw" in pol.warned or not pol.warn):
        return
    if pol is not None:
        pol.warned.add("random draw")
    warnings.warn(
        f"{maps[-1].where}: a random draw inside the mapped function is drawn once, with one example's shape, "
        "and shared by every example (TensorFlow's vectorized_map draws per example); for independent draws, "
        "draw a batch outside the map and map over it",
        UserWarning,
        stacklevel=4,
    )


def _running_call(bk):
    for call in reversed(getattr(_STATE, "maps", ())):
        if call.bk is bk:
            return call
    return None


class running_map:
    """Context of one map's run (the innermost map of each backend takes tensors in)."""

    def __init__(self, call):
        self.call = call

    def __enter__(self):
        maps = getattr(_STATE, "maps", None)
        if maps is None:
            maps = _STATE.maps = []
        maps.append(self.call)
        return self.call

    def __exit__(self, *exc):
        _STATE.maps.pop()
        self.call.running = False


BatchingBackend.capture_tensor = _capture_tensor  # type: ignore[method-assign]
