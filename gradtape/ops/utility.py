"""Utility functions (Array API standard, chapter "Utility Functions").

``all`` and ``any`` are logical reductions (not differentiable).  ``diff`` is linear: the adjoint of
one forward difference ``y_i = z_{i+1} - z_i`` is ``-diff`` of the gradient padded with a zero on
each side, so the rule of ``diff(n)`` is ``(-1)^n diff(grad, n)`` with ``n`` zeros prepended and
appended, split back into the ``prepend``, ``x`` and ``append`` parts.
"""

from __future__ import annotations

import builtins

import numpy as np

from array_api_compat import device as _device

from gradtape.core.domains import BOOL, COMPLEX, INT, REAL, Case
from gradtape.ops import apply, apply1, batch_as, defop, public
from gradtape.ops.manipulation import _broadcast
from gradtape.ops.statistical import _axes
from gradtape.core.tensor import Tensor, convert_to_tensor

__all__ = ["all", "any", "diff"]


# --------------------------------------------------------------------------- all, any
def _truth(xp, x):
    # complex: true where either part is non-zero (JAX's any/all look at the real part only)
    return x != 0 if x.dtype in (xp.complex64, xp.complex128) else x


def _all_forward(xp, x, *, axis, keepdims):
    return xp.all(_truth(xp, x), axis=axis, keepdims=keepdims)


def _any_forward(xp, x, *, axis, keepdims):
    return xp.any(_truth(xp, x), axis=axis, keepdims=keepdims)


_LOGICAL_DOMAIN = [
    Case(BOOL[2, 3]),
    Case(BOOL[3, 4], axis=1),
    Case(INT[2, 3], axis=(0, 1), keepdims=True),
    Case(REAL[3], axis=-1),
]

_all = defop("all", _all_forward, chapter="utility", differentiable=False, domain=_LOGICAL_DOMAIN)
_any = defop("any", _any_forward, chapter="utility", differentiable=False, domain=_LOGICAL_DOMAIN)


def _logical_attrs(x, axis, keepdims):
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    return x, {"axis": None if axis is None else _axes(axis, x.ndim), "keepdims": bool(keepdims)}


@public(_all)
def all(x, /, *, axis=None, keepdims=False):
    """Whether every element along ``axis`` (all axes by default) is true (non-zero; NaN is true)."""
    x, attrs = _logical_attrs(x, axis, keepdims)
    return apply1(_all, x, attrs)


@public(_any)
def any(x, /, *, axis=None, keepdims=False):
    """Whether some element along ``axis`` (all axes by default) is true (non-zero; NaN is true)."""
    x, attrs = _logical_attrs(x, axis, keepdims)
    return apply1(_any, x, attrs)


# --------------------------------------------------------------------------- diff
def _diff_forward(xp, x, *extra, axis, n, parts):
    """``parts`` names the inputs in order: "x", or "px", "xa", "pxa" with prepend / append."""
    arrays = list(extra)
    if parts != "x":
        ordered = []
        for p in parts:
            ordered.append(x if p == "x" else arrays.pop(0))
        z = xp.concat(ordered, axis=axis)
    else:
        z = x
    try:
        return _differences(z, axis, n)
    except (NotImplementedError, RuntimeError):
        if z.dtype not in (xp.uint16, xp.uint32, xp.uint64):
            raise
        # torch has no arithmetic on its wider unsigned types: int64 wraps the same way
        return xp.astype(_differences(xp.astype(z, xp.int64), axis, n), z.dtype)


def _differences(z, axis, n):
    head = (slice(None),) * axis
    for _ in range(n):
        if z.shape[axis] == 0:  # more differences than elements: empty along axis
            break
        z = z[head + (slice(1, None), ...)] - z[head + (slice(None, -1), ...)]
    return z


_diff = defop(
    "diff",
    _diff_forward,
    chapter="utility",
    promote=True,
    batched=True,
    domain=[
        Case(REAL[5]),
        Case(REAL[3, 4], axis=0, n=2),
        Case(COMPLEX[2, 4], n=3),
        Case(REAL[2, 3], n=2, prepend=np.array([[0.5], [-1.0]]), append=np.array([[1.0, 2.0], [0.0, 3.0]])),
    ],
)


@_diff.gradient
def _diff_grad(xp, op, grad):
    """dz = (-1)^n diff(grad, n) with n zeros on each side along ``axis`` (the adjoint of n forward
    differences; real coefficients, so no conjugate); then the prepend, x and append slices of dz.
    The axis is counted from the end (grad may carry leading batch axes)."""
    a = op.attrs
    n, parts = a["n"], a["parts"]
    x = op.inputs[0]
    axis = a["axis"] - x.ndim
    tail = (slice(None),) * (-axis - 1)  # the axes after ``axis``
    if n:
        shape = list(grad.shape)
        shape[axis] = n
        pad = xp.zeros(tuple(shape), dtype=grad.dtype, device=_device(grad))
        dz = xp.concat([pad, grad, pad], axis=axis)
        for _ in range(n):
            dz = dz[(Ellipsis, slice(1, None)) + tail] - dz[(Ellipsis, slice(None, -1)) + tail]
        if n % 2:
            dz = -dz
    else:
        dz = grad
    if parts == "x":
        return dz
    # dz is laid out as prepend, x, append; the inputs are (x, prepend?, append?)
    nin = len(op.in_ids)
    out = [None] * nin
    start = 0
    for p in parts:
        k = {"x": 0, "p": 1, "a": nin - 1}[p]
        size = op.inputs[k].shape[axis]
        if op.needs_grad(k):
            out[k] = dz[(Ellipsis, slice(start, start + size)) + tail]
        start += size
    return tuple(out)


def _side(name, v, x, axis):
    """``prepend`` / ``append`` as a tensor beside ``x`` with ``x``'s shape off ``axis`` (a 0-d one
    is broadcast to one slice)."""
    if not isinstance(v, Tensor):
        v = convert_to_tensor(v, dtype=x.dtype, like=x)  # values beside x take its dtype
    if v.ndim == 0:
        shape = list(x.shape)
        shape[axis] = 1
        v = _broadcast(v, tuple(shape))
    if v.ndim != x.ndim or builtins.any(s != t for i, (s, t) in enumerate(zip(v.shape, x.shape)) if i != axis):
        raise ValueError(f"diff: {name} must have the shape of x {x.shape} except along axis {axis}, got {v.shape}")
    return v


@public(_diff)
def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """The ``n``-th forward difference along ``axis``, after joining ``prepend`` and ``append``
    to ``x`` (differentiable in all three)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    if x.ndim == 0:
        raise ValueError("diff needs a tensor of at least one dimension, got a 0-d tensor")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"diff: n must be a non-negative int, got {n!r}")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"diff: axis must be an int, not {type(axis).__name__}")
    if not -x.ndim <= axis < x.ndim:
        raise IndexError(
            f"diff: axis {axis} is out of bounds for array of dimension {x.ndim}; use an axis in [-{x.ndim}, {x.ndim})"
        )
    axis = int(axis) % x.ndim
    args, parts = [x], "x"
    if prepend is not None:
        args.append(_side("prepend", prepend, x, axis))
        parts = "p" + parts
    if append is not None:
        args.append(_side("append", append, x, axis))
        parts = parts + "a"
    return apply(_diff, tuple(args), {"axis": axis, "n": int(n), "parts": parts})


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("reduction", _all, _any)
batch_as("axis", _diff)
