"""Sorting functions (Array API standard, chapter "Sorting Functions").

``sort`` is differentiable: each element of the sorted output is one element of the input, so its
gradient goes back through the permutation (the inverse of ``argsort``, a ``take_along_axis``).
Between equal elements the permutation is the one a stable sort picks.  ``argsort`` returns
indices and is not differentiable.
"""

from __future__ import annotations

from gradtape.core.domains import REAL, Case
from gradtape.ops import apply1, batch_as, defop, public
from gradtape.core.tensor import Tensor, convert_to_tensor

__all__ = ["argsort", "sort"]


def _prep(name, x, axis):
    """``x`` as a Tensor and ``axis`` as a non-negative int, checked."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    if x.ndim == 0:
        raise ValueError(
            f"{name} needs a tensor of at least one dimension, got a 0-d tensor; reshape it first (gt.reshape(x, (1,)))"
        )
    if isinstance(axis, bool) or not isinstance(axis, int):
        try:
            axis = axis.__index__()
        except AttributeError:
            raise TypeError(f"{name}: axis must be an int, not {type(axis).__name__}") from None
    if not -x.ndim <= axis < x.ndim:
        raise IndexError(
            f"{name}: axis {axis} is out of bounds for array of dimension {x.ndim}; "
            f"use an axis in [-{x.ndim}, {x.ndim})"
        )
    return x, axis % x.ndim


def _attrs(axis, descending, stable):
    return {"axis": axis, "descending": bool(descending), "stable": bool(stable)}


# Samples without ties (continuous draws): there the permutation, hence the gradient, is unique.
_SORT_DOMAIN = [Case(REAL[5]), Case(REAL[2, 3], axis=0, descending=True), Case(REAL[2, 3, 2], axis=1, stable=False)]


def _sort_forward(xp, x, *, axis, descending, stable):
    return xp.sort(x, axis=axis, descending=descending, stable=stable)


_sort = defop(
    "sort",
    _sort_forward,
    chapter="sorting",
    domain=_SORT_DOMAIN,
    saves="inputs",
    batched=True,
    convention="ties: the gradient follows the stable permutation (each tied element gets "
    "the gradient of the output slot it was sorted to)",
)


@_sort.gradient
def _sort_grad(xp, op, grad):
    """y = x[p] along ``axis`` (p = argsort(x)), so dx = dy[p^-1]: gather the gradient with the
    inverse permutation, ``argsort(p)`` (a batch of cotangents gathers with it broadcast over the
    leading axes; the axis is counted from the end)."""
    a = op.attrs
    x = op.inputs[0]
    axis = a["axis"] - x.ndim
    perm = xp.argsort(x, axis=axis, descending=a["descending"], stable=a["stable"])
    inverse = xp.argsort(perm, axis=axis)
    if grad.ndim != x.ndim:
        inverse = xp.broadcast_to(inverse, tuple(grad.shape))
    return xp.take_along_axis(grad, inverse, axis=axis)


@public(_sort)
def sort(x, /, *, axis=-1, descending=False, stable=True):
    """A sorted copy of ``x`` along ``axis`` (differentiable: the gradient follows the permutation)."""
    x, axis = _prep("sort", x, axis)
    return apply1(_sort, x, _attrs(axis, descending, stable))


def _argsort_forward(xp, x, *, axis, descending, stable):
    out = xp.argsort(x, axis=axis, descending=descending, stable=stable)
    return out if out.dtype == xp.int64 else xp.astype(out, xp.int64)


_argsort = defop(
    "argsort",
    _argsort_forward,
    chapter="sorting",
    differentiable=False,
    domain=[Case(REAL[5]), Case(REAL[2, 3], axis=0, descending=True), Case(REAL[2, 3], stable=False)],
)


@public(_argsort)
def argsort(x, /, *, axis=-1, descending=False, stable=True):
    """Indices that sort ``x`` along ``axis`` (int64; not differentiable).  With ``stable=True``
    equal elements keep their order, in descending sorts too."""
    x, axis = _prep("argsort", x, axis)
    return apply1(_argsort, x, _attrs(axis, descending, stable))


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("axis", _sort, _argsort)
