"""Searching functions (Array API standard, chapter "Searching Functions").

``where`` routes the gradient by the condition; the rest return indices and are not differentiable.
"""

from __future__ import annotations

import builtins

import numpy as np

from gradtape.core.domains import BOOL, REAL, Case, with_complex
from gradtape.core.dtypes import float64, int64, result_type
from gradtape.ops import apply, apply1, batch_as, defop, public
from gradtape.ops.elementwise import astype, floor_divide, remainder
from gradtape.ops.manipulation import permute_dims, reshape
from gradtape.core.tensor import Tensor, convert_to_tensor

__all__ = ["argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where"]

_where = defop(
    "where",
    chapter="searching",
    saves="inputs",
    batched=True,
    domain=with_complex(
        [
            Case(BOOL[3], REAL[3], REAL[3]),
            Case(BOOL[2, 3], REAL[3], REAL[2, 1]),
            Case(BOOL[2, 3], REAL[2, 3], 0.0),
            Case(BOOL[3], 1.5, REAL[2, 1]),
        ]
    ),
)


@_where.gradient
def _where_grad(xp, op, grad):
    """The gradient goes to x1 where the condition holds and to x2 elsewhere (0 in the other
    places; the engine sums each back to its input's shape)."""
    c = op.inputs[0]
    return (
        None,
        xp.where(c, grad, 0) if op.needs_grad(1) else None,
        xp.where(c, 0, grad) if op.needs_grad(2) else None,
    )


@public(_where)
def where(condition, x1=None, x2=None, /):
    """Elements of ``x1`` where ``condition`` holds, else of ``x2``.  With ``condition`` alone,
    TensorFlow's ``tf.where(condition)``: the indices of its true (non-zero) elements, an int64
    tensor of shape ``[n, rank]`` in row-major order (not differentiable)."""
    if x1 is None and x2 is None:
        return _true_indices(condition)
    if x1 is None or x2 is None:
        raise ValueError(
            "where: x1 and x2 must both be given (the elements to choose from) or both be omitted "
            "(the indices of condition's true elements, as tf.where(condition))"
        )
    like = next((a for a in (x1, x2, condition) if isinstance(a, Tensor)), None)
    if not isinstance(condition, Tensor):
        condition = convert_to_tensor(condition, like=like)
    if not isinstance(x1, Tensor) and isinstance(x2, Tensor):
        x1 = convert_to_tensor(x1, dtype=x2.dtype if isinstance(x1, (int, float, complex)) else None, like=x2)
    if not isinstance(x2, Tensor) and isinstance(x1, Tensor):
        x2 = convert_to_tensor(x2, dtype=x1.dtype if isinstance(x2, (int, float, complex)) else None, like=x1)
    if isinstance(x1, Tensor) and isinstance(x2, Tensor) and x1.dtype != x2.dtype:
        # gradtape's promotion, the same on every backend (each library's own where promotes its way,
        # or refuses: array_api_strict); recorded casts, so the gradient goes back in each dtype
        rt = result_type(x1.dtype, x2.dtype)
        x1, x2 = (x if x.dtype == rt else astype(x, rt) for x in (x1, x2))
    return apply(_where, (condition, x1, x2))


def _true_indices(condition):
    """``tf.where(condition)``: the flat positions of the true elements (one ``nonzero``) unravelled
    by one broadcast division, so that a backend that cannot stack arrays of unknown length (dask's
    ``nonzero``) gives it too."""
    c = condition if isinstance(condition, Tensor) else convert_to_tensor(condition)
    if c.ndim == 0:
        raise ValueError("where: the indices of a 0-d condition's true elements are undefined (as tf.where's)")
    flat = astype(nonzero(reshape(c, (-1,)))[0], int64)
    # (the broadcast is [rank, 1] against [n], then transposed: dask cannot add an axis to an array
    # of unknown length, but broadcasts and transposes it)
    strides = [[builtins.max(int(np.prod(c.shape[d + 1 :])), 1)] for d in range(c.ndim)]
    steps = convert_to_tensor(np.asarray(strides, dtype=np.int64), like=c)
    sizes = convert_to_tensor(np.maximum(np.asarray(c.shape, dtype=np.int64), 1)[:, None], like=c)  # (empty: no row)
    return permute_dims(remainder(floor_divide(flat, steps), sizes), (1, 0))


_REDUCE_IDX = [Case(REAL[4]), Case(REAL[2, 3], axis=1), Case(REAL[2, 3], axis=0, keepdims=True)]

_argmax = defop(
    "argmax",
    lambda xp, x, *, axis=None, keepdims=False: xp.argmax(x, axis=axis, keepdims=keepdims),
    chapter="searching",
    differentiable=False,
    domain=_REDUCE_IDX,
)
_argmin = defop(
    "argmin",
    lambda xp, x, *, axis=None, keepdims=False: xp.argmin(x, axis=axis, keepdims=keepdims),
    chapter="searching",
    differentiable=False,
    domain=_REDUCE_IDX,
)


def _not_empty(x, axis, name):
    """NumPy's ValueError where ``name`` (``argmax``, ``argmin``) reduces an empty axis, on every
    backend (PyTorch raised an IndexError): a test of the shape, no value read."""
    if isinstance(x, Tensor):
        shape = x.shape
        if axis is None:
            empty = 0 in tuple(shape)
        else:
            empty = isinstance(axis, int) and -len(shape) <= axis < len(shape) and shape[axis] == 0
        if empty:
            raise ValueError(f"{name}: attempt to get {name} of an empty sequence")


@public(_argmax)
def argmax(x, /, *, axis=None, keepdims=False):
    """Index of the largest element (not differentiable)."""
    _not_empty(x, axis, "argmax")
    return apply1(_argmax, x, {"axis": axis, "keepdims": keepdims})


@public(_argmin)
def argmin(x, /, *, axis=None, keepdims=False):
    """Index of the smallest element (not differentiable)."""
    _not_empty(x, axis, "argmin")
    return apply1(_argmin, x, {"axis": axis, "keepdims": keepdims})


def _nonzero_forward(xp, x):
    return tuple(xp.nonzero(x))


_nonzero = defop(
    "nonzero",
    _nonzero_forward,
    chapter="searching",
    differentiable=False,
    nout=-1,
    domain=[Case(REAL[4]), Case(REAL[2, 3])],
)


@public(_nonzero)
def nonzero(x, /):
    """Indices of the non-zero elements, one tensor per axis (not differentiable)."""
    return apply(_nonzero, (x,))


_count_nonzero = defop(
    "count_nonzero",
    lambda xp, x, *, axis=None, keepdims=False: xp.count_nonzero(x, axis=axis, keepdims=keepdims),
    chapter="searching",
    differentiable=False,
    domain=_REDUCE_IDX[:2],
)


@public(_count_nonzero)
def count_nonzero(x, /, *, axis=None, keepdims=False):
    """Number of non-zero elements (not differentiable)."""
    return apply1(_count_nonzero, x, {"axis": axis, "keepdims": keepdims})


def _searchsorted_forward(xp, x1, x2, *, side="left", sorter=None):
    if xp.isdtype(x1.dtype, "real floating") and xp.isdtype(x2.dtype, "real floating"):
        return _searchsorted_nan_last(xp, x1, x2, side=side, sorter=sorter)
    try:
        out = xp.searchsorted(x1, x2, side=side, sorter=sorter)
    except (NotImplementedError, RuntimeError, TypeError):
        unsigned = (xp.uint8, xp.uint16, xp.uint32, xp.uint64)
        if x1.dtype not in unsigned[1:] or x2.dtype not in unsigned:
            raise
        # torch has no searchsorted for its wider unsigned types: int64 holds uint16/uint32 values in
        # order; uint64's from 2**63 up wrap to negative int64s, and flipping the sign bit of every key
        # (v - 2**63, modulo 2**64) puts all of them back in order (scikit-learn's label_binarize)
        if xp.uint64 in (x1.dtype, x2.dtype):

            def key(v):
                v = xp.astype(v, xp.int64)
                return xp.bitwise_xor(v, xp.full_like(v, -(2**63)))
        else:

            def key(v):
                return xp.astype(v, xp.int64)

        out = xp.searchsorted(key(x1), key(x2), side=side, sorter=sorter)
    return out if out.dtype == xp.int64 else xp.astype(out, xp.int64)  # JAX gives int32


def _searchsorted_nan_last(xp, x1, x2, *, side, sorter):
    """NumPy's answer on every backend where NaNs are involved: NaN sorts after +inf (torch's own
    searchsorted places a NaN of ``x2`` after the NaNs of ``x1``, and ``+inf`` on the right after them
    too; SciPy's quantile tests, issue 21).  The search runs with NaNs as +inf; then a NaN of ``x2``
    goes before the first NaN of ``x1`` (left) or after the last (right), and ``+inf`` on the right
    before the first NaN."""
    inf = xp.full_like(x1, float("inf"))
    out = xp.searchsorted(
        xp.where(xp.isnan(x1), inf, x1),
        xp.where(xp.isnan(x2), xp.full_like(x2, float("inf")), x2),
        side=side,
        sorter=sorter,
    )
    out = xp.astype(out, xp.int64)
    n = x1.shape[-1]
    n_valid = xp.astype(n - xp.count_nonzero(xp.isnan(x1)), xp.int64)  # NaNs sort last: they are x1's tail
    if side == "left":
        return xp.where(xp.isnan(x2), n_valid, out)
    return xp.where(xp.isnan(x2), xp.full_like(out, n), xp.where(x2 == float("inf"), n_valid, out))


_searchsorted = defop(
    "searchsorted",
    _searchsorted_forward,
    chapter="searching",
    differentiable=False,
    domain=[
        Case(np.array([0.0, 1.0, 2.0]), REAL[4]),
        Case(np.array([-1.0, 0.0, 0.0, 2.5]), REAL[2, 3], side="right"),
        Case(np.array([0.0, 1.0, 2.0]), 0.5),
        Case(np.array([-1, 0, 0, 2]), 0, side="right"),
    ],
)


@public(_searchsorted)
def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Insertion points of ``x2`` (an array, or since 2025.12 a Python int or float: a 0-d result)
    into sorted ``x1`` (not differentiable)."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', not {side!r}")
    if isinstance(x2, (int, float)) and not isinstance(x2, bool):
        # the standard's mixing of scalars and arrays: x1's dtype where the scalar's kind fits it
        # (an int beside floats, or an int beside ints); a float beside integers compares in float64
        x1 = convert_to_tensor(x1)
        if isinstance(x2, int) or x1.dtype.kind in "fc":
            x2 = convert_to_tensor(x2, dtype=x1.dtype, like=x1)
        else:
            x1 = astype(x1, float64)
            x2 = convert_to_tensor(x2, dtype=float64, like=x1)
    if sorter is not None:  # an attribute: the native array, on x1's backend and device
        like = x1 if isinstance(x1, Tensor) else x2 if isinstance(x2, Tensor) else None
        sorter = convert_to_tensor(sorter, like=like)._v
    return apply(_searchsorted, (x1, x2), {"side": side, "sorter": sorter})


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("elementwise", _where)
batch_as("flat_reduction", _argmax, _argmin)
batch_as("reduction", _count_nonzero)
