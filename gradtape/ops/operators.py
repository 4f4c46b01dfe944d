"""Binds every Python operator of the Array API standard on Tensor to its op, and the methods that
compute (``.T``, ``.mT``, ``to_device``, ``copy``, ``t[k] = v``, ``Variable.value``).

Forward operators are the public functions themselves (``Tensor.__add__ is gt.add``), so an
operator costs exactly one op call.  Reflected operators swap the arguments; in-place operators
are functional updates: the tensor takes the new value and a new identity on the tape.  This module
sits above the op chapters and below the tape: ``gradtape.core.tensor`` imports no op.

Views (NumPy's semantics, on every backend): ``t[key]`` with a basic key (ints, slices, ``...``,
``None``; not ints alone on every axis, which NumPy answers with a scalar copy) returns a Tensor that
shares its values with ``t``: ``t[key] = v`` (or ``t += v``) on either one, or on any other view of
the same base, views of views included, updates all of them.  gradtape does it itself, with recorded
ops (a write is a ``setitem`` into each ancestor, then a ``getitem`` refreshes every other live
view), so gradients through the base and the views stay right and no library's memory sharing is
relied on.  The functions whose NumPy result is a view make views the same way (``reshape`` where
NumPy's is one, ``permute_dims`` / ``.T`` / ``.mT`` / ``moveaxis``, ``squeeze``, ``expand_dims``,
``flip``, ``unstack``: :func:`_linked`, hooked into ``gradtape.ops.manipulation``); a link holds the
op that reads the view from its base, and :func:`_write_back` writes a new value back with its
inverse.  The bookkeeping lives here, off the Tensor: a view's link (:class:`_Link`, keyed by the
view's ``id``) and its base's family of live views (:class:`_Family`, keyed by the base's ``id``),
dropped with the last view; a tensor that has no views pays nothing.  A Variable's slice is a copy, as in
TensorFlow (:class:`_VariableSlice`: its ``assign`` is TensorFlow's sliced assignment).  See
docs/conventions.md, "Views".
"""

from __future__ import annotations

import itertools
import weakref

import numpy as np

from gradtape.core import tensor as _tensor
from gradtape.core.recording_state import active_context, connected_tapes
from gradtape.core.tensor import user_site
from gradtape.ops import apply, apply1
from gradtape.ops import elementwise as E
from gradtape.ops.creation import to_device as _to_device
from gradtape.ops.indexing import (
    _getitem,
    _getitem_op,
    _native_key,
    _setitem,
    _setitem_op,
    _without_newaxes,
    beside_key,
)
from gradtape.ops.linear_algebra_functions import matmul, matrix_transpose
from gradtape.ops import manipulation as _manipulation
from gradtape.ops.manipulation import broadcast_to, permute_dims, reshape, squeeze, stack
from gradtape.core.tensor import Tensor, Variable, new_tensor, convert_to_tensor

_BINARY = {
    "add": E.add,
    "sub": E.subtract,
    "mul": E.multiply,
    "truediv": E.divide,
    "floordiv": E.floor_divide,
    "mod": E.remainder,
    "pow": E.pow,
    "matmul": matmul,
    "and": E.bitwise_and,
    "or": E.bitwise_or,
    "xor": E.bitwise_xor,
    "lshift": E.bitwise_left_shift,
    "rshift": E.bitwise_right_shift,
}


def _reflected(fn):
    def r(self, other):
        return fn(other, self)

    r.__name__ = f"r{fn.__name__}"
    return r


#: per recording (weakly held): the identities that in-place updates gave tensors the tape connects
#: to a watched source -> what the update was and where; read by GradientTape.gradient
REPLACED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _renew(t, new, what):
    """``t`` takes ``new``'s value and identity (an in-place update is a recorded functional one).
    Where a recording tape connects ``t`` to a watched source, the tape is told, so that a gradient
    with respect to ``t`` that comes out None says it is ``t``'s new value's (:data:`REPLACED`)."""
    if new._b.stand_ins and not t._b.stand_ins:
        _outside_write(t, what)
    old = t._id
    t._become(new)
    tapes = connected_tapes(old)
    if tapes:
        site = user_site()
        for rec in tapes:
            REPLACED.setdefault(rec, {})[t._id] = (what, site)
    return t


def _outside_write(t, what):
    """``t``, a tensor made outside the running ``gt.function`` trace, was to take a traced value:
    a program cannot update a tensor it does not own (it would hold a stand-in after the trace, and
    the program would not repeat the write on later calls).  TensorFlow's tensors are immutable;
    its state lives in variables, which gradtape's programs update on every call."""
    ctx = active_context()
    name = ctx.name if ctx is not None else "?"
    raise TypeError(
        f"gt.function {name!r} writes into a tensor made outside it ({what}, at {user_site()}): a traced "
        f"program cannot update a {t._b.name} tensor it does not own. Keep the state in a gt.Variable "
        "(v[key].assign(value), v.assign_add(...): written on every call), pass the tensor as an argument "
        "(an argument updated in place is written back after each call), or return the new value"
    )


def _inplace(fn):
    def i(self, other):
        new = fn(self, other)
        fam = _family_of(self) if _LINKS else None
        if fam is None:
            return _renew(self, new, f"an in-place {fn.__name__}")
        # a view, or a base with views: the new value goes where they share it, so it keeps their
        # shape and dtype (NumPy refuses the same in-place updates)
        if new.shape != self.shape:
            raise ValueError(
                f"in-place {fn.__name__}: the result has shape {new.shape} but the tensor (shape "
                f"{self.shape}) shares its values with views (NumPy's basic indexing), which cannot "
                "change shape; write x = x <op> y for a new tensor"
            )
        if new.dtype != self.dtype:
            raise TypeError(
                f"in-place {fn.__name__}: the result is {new.dtype} but the tensor ({self.dtype}) shares "
                "its values with views (NumPy's basic indexing), which keep their dtype; cast the other "
                "operand first, or write x = x <op> y for a new tensor"
            )
        _store(self, new, fam)
        return self

    i.__name__ = f"i{fn.__name__}"
    return i


def __eq__(self, other):
    """Element-wise ``equal``; ``t == None`` is False (as TensorFlow), not an error."""
    if other is None:
        return False
    return E.equal(self, other)


def __ne__(self, other):
    if other is None:
        return True
    return E.not_equal(self, other)


Tensor.__eq__ = __eq__
Tensor.__ne__ = __ne__
Tensor.__lt__ = E.less
Tensor.__le__ = E.less_equal
Tensor.__gt__ = E.greater
Tensor.__ge__ = E.greater_equal
Tensor.__neg__ = E.negative
Tensor.__pos__ = E.positive
Tensor.__abs__ = E.abs
Tensor.__invert__ = E.bitwise_invert
Tensor.__hash__ = object.__hash__
Variable.__hash__ = object.__hash__


# --------------------------------------------------------------------------- methods that compute
def _T(self):
    """The transpose of a 2-D tensor (``gt.matrix_transpose`` for stacks of matrices); recorded."""
    if self.ndim != 2:
        raise ValueError(f"Tensor.T is for 2-D tensors (got {self.ndim}-D); use gt.matrix_transpose or gt.permute_dims")
    return permute_dims(self, (1, 0))


def _mT(self):
    """The transpose of the last two axes (``gt.matrix_transpose``), a view as NumPy's; recorded."""
    return _linked(matrix_transpose(self), self, matrix_transpose.op, {})


def to_device(self, device, /, *, stream=None):
    """A copy on ``device`` (a backend-neutral string or a native device), recorded so gradients flow back."""
    return _to_device(self, device)


def __copy__(self):
    """``copy.copy(t)``: a recorded copy (the tape connects it to ``t``, as ``asarray(copy=True)``)."""
    return E.astype(self, self.dtype, copy=True)


def __deepcopy__(self, memo):
    return self.__copy__()


def __setitem__(self, key, value):
    """``t[key] = value``: a recorded functional update; a view's base and the other views of that
    base see it (NumPy's semantics)."""
    fam = _family_of(self) if _LINKS else None
    if fam is None:
        _renew(self, _setitem(self, key, value), "an item assignment (x[key] = value)")
    else:
        _check_writable(fam)
        _store(self, _setitem(self, key, value), fam)


def value(self):
    """The current value as a Tensor (a recorded read: gradients flow to the variable)."""
    return E._identity(self)


def _variable_setitem(self, key, value):
    """A state update, not recorded (assignment is not differentiable)."""
    with self._lock:  # read, write the elements, write back: atomic with respect to other threads
        v = convert_to_tensor(value, dtype=self.dtype, like=self)
        cur = self._v
        nkey = _native_key(key, self._b, self.ndim, self._b.device_of(cur), shape=self.shape, op="setitem")
        self._v = self._b.setitem(cur, nkey, v._v)


# --------------------------------------------------------------------------- views
class _Family:
    """A base tensor (the root: no view itself) and its live views, in the order they were made
    (a view is made after its own base, so that order refreshes a base before its views)."""

    __slots__ = ("root", "views")

    def __init__(self, root):
        self.root = root
        self.views = {}  # sequence number -> the view's link (a weak reference to it)


class _Link(weakref.ref):
    """A view's link: a weak reference to the view that also holds the tensor it was made from
    (``base``, kept alive, as NumPy's ``.base``), how to read the view from the base (``op``, a
    registered op, with ``attrs``: ``getitem``, ``permute_dims``, ``matrix_transpose``, ``reshape``,
    ``squeeze``, ``expand_dims``, ``flip``), its family, its place in the family (``seq``), the view's
    ``id``, and its strides within the root (``proxy``: a stride-only NumPy array, made when asked);
    it drops itself from the registry when the view goes.  How a new view value is written back into
    the base follows from ``op`` (:func:`_write_back`)."""

    __slots__ = ("base", "op", "attrs", "family", "seq", "vid", "proxy", "read_only")


_LINKS: dict[int, _Link] = {}  # id(view) -> its link, while the view lives
_FAMILIES: dict[int, _Family] = {}  # id(root) -> its family, while a view of it lives
_seq = itertools.count()
_BYTE = np.zeros(1, dtype=np.int8)  # the one byte every stride-only proxy points at (never read)


def _basic_kind(key):
    """For a native key: 0 when it is not basic (an array, a bool), 1 when it is ints alone on every
    axis (NumPy answers a scalar, a copy), 2 for the other basic keys (ints, slices, ``...``,
    ``None``: a view)."""
    kind = 1
    for k in key:
        c = k.__class__
        if c is slice or k is None or k is Ellipsis:
            kind = 2
        elif c is not int:
            return 0
    return kind


def _family_of(t):
    """The family ``t`` belongs to (as a view, or as the root of live views), else None."""
    tid = id(t)
    link = _LINKS.get(tid)
    if link is not None and link() is t:
        return link.family
    fam = _FAMILIES.get(tid)
    if fam is not None and fam.root is t:
        return fam
    return None


def _link(view, base, op, attrs, proxy=None, read_only=False):
    """Make ``view`` (just computed as ``op(base, **attrs)``) a view of ``base`` (``read_only``: one
    that sees its base's writes but refuses its own, NumPy's ``broadcast_to`` and ``diagonal``)."""
    fam = _family_of(base)
    if fam is None:
        fam = _FAMILIES[id(base)] = _Family(base)
    link = _Link(view, _gone)
    link.base = base
    link.op = op
    link.attrs = attrs
    link.family = fam
    link.seq = seq = next(_seq)
    link.vid = vid = id(view)
    link.proxy = proxy
    link.read_only = read_only or _read_only(base)
    fam.views[seq] = link
    _LINKS[vid] = link


def _proxy(t):
    """A stride-only NumPy array with ``t``'s shape and its strides within its root (a root is
    C-contiguous, itemsize 1): what NumPy would hold for ``t``, without its data."""
    link = _LINKS.get(id(t))
    if link is None or link() is not t:
        shape = tuple(t.shape)
        strides = []
        step = 1
        for n in reversed(shape):
            strides.append(step)
            step *= max(n, 1)
        return np.lib.stride_tricks.as_strided(_BYTE, shape, tuple(reversed(strides)), writeable=False)
    if link.proxy is None:
        link.proxy = _proxy_step(_proxy(link.base), link.op.name, link.attrs)
    return link.proxy


def _proxy_step(p, name, attrs):
    """The proxy of ``op(base)`` from the base's proxy ``p`` (NumPy's own view functions)."""
    if name == "broadcast_to":
        return np.broadcast_to(p, attrs["shape"])
    if name == "linalg.diagonal":
        return np.diagonal(p, offset=attrs["offset"], axis1=-2, axis2=-1)
    if name == "getitem":
        return p[attrs["key"]]
    if name == "permute_dims":
        return p.transpose(attrs["axes"])
    if name == "matrix_transpose":
        return np.swapaxes(p, -1, -2)
    if name == "reshape":
        return p.reshape(attrs["shape"], copy=False)
    if name == "squeeze":
        return np.squeeze(p, axis=attrs["axis"])
    if name == "expand_dims":
        for a in attrs["axis"]:
            p = np.expand_dims(p, a)
        return p
    return np.flip(p, axis=attrs["axis"])  # flip


def _read_only(t):
    """Whether ``t`` is a read-only view (or a view of one): NumPy refuses writes into it."""
    link = _LINKS.get(id(t))
    return link is not None and link() is t and link.read_only


def _linked(view, base, op, attrs, copy=None, read_only=False):
    """``view`` (just computed as ``op(base, **attrs)``) made a view of ``base`` where NumPy's result
    is one: always, except a Variable's (a copy, as TensorFlow's) and a reshape that NumPy copies
    (a non-contiguous layout; with ``copy=False`` that raises NumPy's ``ValueError``)."""
    if view is base or not isinstance(base, Tensor) or base._is_var:
        return view
    proxy = None
    if op.name == "reshape":
        link = _LINKS.get(id(base))
        if link is not None and link() is base:  # a view: its layout may not allow it
            try:
                proxy = _proxy(base).reshape(attrs["shape"], copy=False)
            except ValueError:
                if copy is False:
                    raise ValueError(
                        f"reshape(copy=False): a view of shape {tuple(base.shape)} cannot be reshaped to "
                        f"{attrs['shape']} without a copy (its values are not contiguous in its base, as "
                        "after a transpose or a strided slice; NumPy refuses the same); use copy=None"
                    ) from None
                return view  # NumPy copies: the result shares nothing
    _link(view, base, op, attrs, proxy, read_only)
    return view


def _write_back(link, base, child):
    """The base's new value once its view ``child`` (read through ``link``) took a new value:
    recorded ops, the inverse of the read."""
    op = link.op
    name = op.name
    attrs = link.attrs
    if name == "getitem":
        key = attrs["key"]
        if any(k is None for k in key):  # the standard's setitem takes no None: drop the new axes
            key, new_axes = _without_newaxes(key, base.ndim)
            child = squeeze(child, axis=new_axes)
        return apply(_setitem_op, (base, child), {"key": key})
    if name == "permute_dims":
        axes = attrs["axes"]
        inv = [0] * len(axes)
        for i, a in enumerate(axes):
            inv[a] = i
        return apply1(op, child, {"axes": tuple(inv)})
    if name in ("matrix_transpose", "flip"):  # their own inverses
        return apply1(op, child, attrs)
    return apply1(reshape.op, child, {"shape": tuple(base.shape)})  # reshape, squeeze, expand_dims


def _gone(link):
    """A view went: drop its link, and its family with its last view."""
    if _LINKS.get(link.vid) is link:
        del _LINKS[link.vid]
    fam = link.family
    fam.views.pop(link.seq, None)
    if not fam.views and _FAMILIES.get(id(fam.root)) is fam:
        del _FAMILIES[id(fam.root)]


def _check_writable(fam, t=None):
    if fam.root.__class__ is _VariableSlice:
        raise TypeError(_SLICE_WRITE)
    if t is not None and _read_only(t):
        link = _LINKS[id(t)]
        raise ValueError(
            f"assignment destination is read-only: this tensor (shape {tuple(t.shape)}) is a read-only "
            f"view of a tensor of shape {tuple(link.family.root.shape)} ({_READ_ONLY_MAKERS}), as NumPy's; "
            "write into a copy (gt.asarray(x, copy=True)) or into the base"
        )


_READ_ONLY_MAKERS = "made by broadcast_to or linalg.diagonal, or a view of one"


def _store(t, new, fam):
    """``t`` (a view, or a root with views) takes the value ``new``; each of its bases in turn takes
    it at the view's key, then every other live view of the family reads its base again (recorded
    ops: the tape sees the writes as the functional updates they are)."""
    _check_writable(fam, t)
    _renew(t, new, "an in-place update")
    done = {id(t)}
    link = _LINKS.get(id(t))
    child = t
    while link is not None and link() is child:
        base = link.base
        _renew(base, _write_back(link, base, child), "an in-place update of a view of it")
        done.add(id(base))
        child = base
        link = _LINKS.get(id(base))
    for link in list(fam.views.values()):
        v = link()
        if v is not None and id(v) not in done:
            _renew(v, apply1(link.op, link.base, link.attrs), "an in-place update of its base or a view of it")


def _propagate(t):
    """After ``t`` took a new value other than through ``t[k] = v`` or an in-place operator (a
    ``gt.function`` writing an argument back), its bases and views take it too."""
    fam = _family_of(t) if _LINKS else None
    if fam is not None:
        _store(t, t, fam)


_SLICE_WRITE = (
    "a slice of a gt.Variable is a copy of the values read, as in TensorFlow: writing into it would "
    "leave the variable unchanged. Write into the variable with v[key] = value, or "
    "v[key].assign(value) (TensorFlow's sliced assignment)"
)


class _VariableSlice(Tensor):
    """``v[key]`` of a Variable with a basic key: a Tensor of the values read (a recorded read, a
    copy: later updates of the variable do not reach it, as a ``tf.Variable``'s slice), whose
    ``assign`` writes into the variable (TensorFlow's sliced assignment)."""

    __slots__ = ("_var", "_key")

    def assign(self, value, use_locking=False, name=None, read_value=True):
        """``v[key] = value`` on the variable this slice was read from (not recorded: an assignment
        is a state update); returns the variable, as ``tf.Variable``'s sliced ``assign``."""
        var = self._var
        key = self._key
        if any(k is None for k in key):
            key, new_axes = _without_newaxes(key, var.ndim)
            value = convert_to_tensor(value, dtype=var.dtype, like=var)
            value = squeeze(broadcast_to(value, self.shape), axis=new_axes)
        var[key] = value
        return var

    def __setitem__(self, key, value):
        raise TypeError(_SLICE_WRITE)


def __getitem__(self, key):
    """``t[key]`` (recorded): with a basic key a view of ``t`` (NumPy's semantics; a Variable's
    slice is a copy whose ``assign`` writes into the variable, as TensorFlow's), else a copy."""
    if isinstance(key, Tensor) or (key.__class__ is tuple and any(isinstance(k, Tensor) for k in key)):
        lifted = beside_key(self, key)
        if lifted is not self:  # (a captured tensor indexed by a traced one: a constant of the trace)
            return _getitem(lifted, key)
    b = self._b
    nkey = _native_key(key, b, self.ndim, b.device_of(self._v), shape=self.shape)
    out = apply1(_getitem_op, self, {"key": nkey})
    kind = _basic_kind(nkey)
    if kind and self._is_var:
        s = new_tensor(_VariableSlice)
        s._v, s._b, s._id = out._v, out._b, out._id
        s._var = self
        s._key = nkey
        return s
    if kind == 2:
        _link(out, self, _getitem_op, {"key": nkey})
    return out


Tensor.__getitem__ = __getitem__
Tensor.T = property(_T)
Tensor.mT = property(_mT)
Tensor.to_device = to_device
Tensor.__copy__ = __copy__
Tensor.__deepcopy__ = __deepcopy__
Tensor.__setitem__ = __setitem__
Variable.value = Variable.read_value = value
Variable.__setitem__ = _variable_setitem

#: each of _BINARY's operators as Python spells it
_SYMBOLS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "truediv": "/",
    "floordiv": "//",
    "mod": "%",
    "pow": "**",
    "matmul": "@",
    "and": "&",
    "or": "|",
    "xor": "^",
    "lshift": "<<",
    "rshift": ">>",
}


def _variable_inplace(name):
    """``v += x`` on a Variable: TensorFlow 2's RuntimeError (it rebound ``v`` to a tensor, so that
    PyTorch's ``p -= lr * g`` left the next tape nothing to watch: a gradient of None, silently)."""
    op = _SYMBOLS[name]
    update = {"add": "variable.assign_add(value)", "sub": "variable.assign_sub(value)"}.get(
        name, f"variable.assign(variable {op} value)"
    )

    def i(self, other):
        raise RuntimeError(
            f"`variable {op}= value` with a gt.Variable is not supported (TensorFlow 2 raises this too): "
            f"use `{update}` to update the variable in place, or `out = variable {op} value` for a new tensor"
        )

    i.__name__ = f"__i{name}__"
    return i


for _name, _fn in _BINARY.items():
    setattr(Tensor, f"__{_name}__", _fn)
    setattr(Tensor, f"__r{_name}__", _reflected(_fn))
    setattr(Tensor, f"__i{_name}__", _inplace(_fn))
    setattr(Variable, f"__i{_name}__", _variable_inplace(_name))
    # a Variable's slice is a TF Tensor: ``s += 1`` rebinds it to a new tensor
    setattr(_VariableSlice, f"__i{_name}__", _fn)


def __divmod__(self, other):
    """``divmod(t, y)``: ``(t // y, t % y)``, as NumPy's and PyTorch's (Python's rule: ``y * q + r == t``)."""
    return E.floor_divide(self, other), E.remainder(self, other)


def __rdivmod__(self, other):
    return E.floor_divide(other, self), E.remainder(other, self)


Tensor.__divmod__ = __divmod__
Tensor.__rdivmod__ = __rdivmod__

_manipulation._linked = _linked  # reshape, permute_dims, flip, ... make views (NumPy's)

# the ops that gradtape.core.tensor's conversions call
for _fn in (E.astype, stack, reshape):
    setattr(_tensor.ops, _fn.__name__, _fn)
_tensor.ops.broadcast_to = _manipulation._broadcast  # (a constant's fill: a new, writable tensor)
_tensor.ops.identity = E._identity
