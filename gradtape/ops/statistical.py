"""Statistical functions (Array API standard, chapter "Statistical Functions").

Reductions share one helper, ``_unreduce``, that brings a reduced gradient back to the input's
shape (re-inserting the reduced axes, then broadcasting; leading batch axes of the gradient stay).
"""

from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from gradtape.core import dtypes as _dt
from gradtape.core.domains import NONZERO, POSITIVE, REAL, Case, with_complex
from gradtape.ops import apply1, batch_as, composite, defop, public
from gradtape.ops.elementwise import astype, conj_, divide, ones_where_zero
from gradtape.ops.indexing import _getitem, _host_indices, _index_add
from gradtape.ops.manipulation import reshape as _reshape
from gradtape.ops.searching import where
from gradtape.core.tensor import Tensor, convert_to_tensor

__all__ = ["cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var"]


def _axes(axis, ndim):
    """A tuple of non-negative axes (all axes for None)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    out = []
    for a in axis:
        a = int(a)
        if not -ndim <= a < builtins.max(ndim, 1):
            raise IndexError(f"axis {a} is out of bounds for a tensor of {ndim} dimensions")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis}")
    return tuple(sorted(out))


def _keep_shape(shape, axes):
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _unreduce(xp, grad, op):
    """The gradient of a reduction over ``op.attrs['axis']``, broadcast back to the input's shape;
    leading batch axes of ``grad`` stay (two library calls at most: one where the reduced axes lead,
    as in a full reduction, whose gradient broadcasts as it is; none where nothing was reduced)."""
    x = op.inputs[0]
    if x is None:  # (an unsaved input shaped like the output, in a native walk: nothing was reduced)
        return grad
    shape = tuple(x.shape)
    axes = op.attrs["axis"]
    keepdims = op.attrs.get("keepdims", False)
    nd = len(axes)
    lead = tuple(grad.shape[: grad.ndim - (len(shape) if keepdims else len(shape) - nd)])
    if not keepdims and (lead or axes != tuple(range(nd))):
        grad = xp.reshape(grad, lead + _keep_shape(shape, axes))
    if tuple(grad.shape) == lead + shape:
        return grad
    return xp.broadcast_to(grad, lead + shape)


def _count(shape, axes):
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _prep(x, axis):
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    return x, _axes(axis, x.ndim)


def _in_result_dtype(x, dtype):
    """``x`` cast to the result dtype of a sum or product: ``dtype`` if given, else the default
    (unsigned) integer for integer and bool inputs, else ``x``'s own dtype."""
    if dtype is not None:
        dtype = _dt.as_dtype(dtype)
    elif x.dtype.kind in "biu":
        dtype = _dt.uint64 if x.dtype.kind == "u" else _dt.int64
    return x if dtype is None or dtype is x.dtype else astype(x, dtype)


def _same_dtype(xp, out, x):
    """``out`` in ``x``'s dtype: the public functions cast ``x`` to the result dtype first, and a
    library may accumulate small integers wider (NumPy: uint8 -> uint64; torch has no uint64 sum).
    Sums and products modulo 2**bits do not depend on the width they were accumulated in."""
    return out if out.dtype == x.dtype else xp.astype(out, x.dtype)


_RED_DOMAIN = [
    Case(REAL[3]),
    Case(REAL[2, 3], axis=1),
    Case(REAL[2, 3], axis=0, keepdims=True),
    Case(REAL[2, 3, 2], axis=(0, 2)),
    Case(REAL[()]),
]


def _sum_forward(xp, x, *, axis, keepdims=False):
    return _same_dtype(xp, xp.sum(x, axis=axis, keepdims=keepdims), x)


# (saves nothing: the rule reads the input's shape only, which the node keeps without the values)
_sum = defop("sum", _sum_forward, chapter="statistical", domain=with_complex(_RED_DOMAIN), saves=(), batched=True)


@_sum.gradient
def _sum_grad(xp, op, grad):
    """The gradient broadcast back over the summed axes (the input is read for its shape only)."""
    return _unreduce(xp, grad, op)


@public(_sum)
def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    """Sum over ``axis`` (all axes by default)."""
    x, axes = _prep(x, axis)
    x = _in_result_dtype(x, dtype)
    return apply1(_sum, x, {"axis": axes, "keepdims": bool(keepdims)})


def _prod_forward(xp, x, *, axis, keepdims=False):
    return _same_dtype(xp, xp.prod(x, axis=axis, keepdims=keepdims), x)


_prod = defop(
    "prod",
    _prod_forward,
    chapter="statistical",
    domain=with_complex(_RED_DOMAIN),
    convention="exact with zeros in the input (products of the other elements)",
    saves="inputs",
    batched=True,
)


@_prod.gradient
def _prod_grad(xp, op, grad):
    """d prod(x) / dx_i = the product of the other elements, computed with exclusive cumulative
    products from both sides so that zeros in ``x`` are handled exactly."""
    x = op.inputs[0]
    axes = op.attrs["axis"]
    g = _unreduce(xp, grad, op)
    if not axes:
        return g
    nd = x.ndim
    moved = tuple(range(nd - len(axes), nd))
    xt = xp.moveaxis(x, axes, moved)  # the reduced axes last, flattened into one
    moved_shape = tuple(xt.shape)
    flat = xp.reshape(xt, moved_shape[: nd - len(axes)] + (_count(x.shape, axes),))
    left = _exclusive_cumprod(xp, flat)
    right = xp.flip(_exclusive_cumprod(xp, xp.flip(flat, axis=-1)), axis=-1)
    others = xp.moveaxis(xp.reshape(left * right, moved_shape), moved, axes)
    return g * conj_(xp, others)


def _exclusive_cumprod(xp, x):
    """[1, x0, x0 x1, ...] along the last axis (differentiable)."""
    return xp.cumulative_prod(x, axis=-1, include_initial=True)[..., :-1]


@public(_prod)
def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    """Product over ``axis`` (all axes by default)."""
    x, axes = _prep(x, axis)
    x = _in_result_dtype(x, dtype)
    return apply1(_prod, x, {"axis": axes, "keepdims": bool(keepdims)})


def _mean_forward(xp, x, *, axis, keepdims=False):
    return xp.mean(x, axis=axis, keepdims=keepdims)


_mean = defop(
    "mean",
    _mean_forward,
    chapter="statistical",
    floating=True,
    domain=with_complex(_RED_DOMAIN),
    saves=(),  # (as sum: the input's shape only)
    batched=True,
)


@_mean.gradient
def _mean_grad(xp, op, grad):
    """The gradient of the sum, divided by the number of elements reduced (the input is read for
    its shape only)."""
    x = op.inputs[0]  # (None: shaped like the output, nothing reduced but axes of length 1)
    n = 1 if x is None else _count(x.shape, op.attrs["axis"])
    return _unreduce(xp, grad / builtins.max(n, 1), op)


@public(_mean)
def mean(x, /, *, axis=None, keepdims=False):
    """Arithmetic mean over ``axis`` (all axes by default)."""
    x, axes = _prep(x, axis)
    return apply1(_mean, x, {"axis": axes, "keepdims": bool(keepdims)})


def _var_over_no_axes(xp, x, correction):
    """The variance over no axes (a 0-d input, or ``axis=()``): each element alone, N = 1, so
    ``(x - x)^2 / (1 - correction)``: NaN for a NaN or infinite element, and for ``correction >= 1``,
    as NumPy (``array_api_compat.torch`` reads ``axis=()`` as "no reduction" and gives 0)."""
    c = x - x
    return c * c * (1.0 / (1.0 - correction) if correction < 1 else math.nan)


def _no_degrees_left(shape, axes, correction):
    """Whether ``N - correction <= 0`` for the ``N`` elements reduced: the variance is NaN there (the
    Array API's special case; NumPy and torch gave inf, JAX and dask NaN, dask's std inf or NaN)."""
    n = _count(shape, axes)
    return n == n and n - correction <= 0  # (an unknown dask size is NaN: the library's own then)


def _var_forward(xp, x, *, axis, correction=0.0, keepdims=False):
    if axis == ():
        return _var_over_no_axes(xp, x, correction)
    if _no_degrees_left(x.shape, axis, correction):
        return xp.var(x, axis=axis, keepdims=keepdims) * math.nan
    return xp.var(x, axis=axis, correction=correction, keepdims=keepdims)


_VAR_DOMAIN = _RED_DOMAIN[:-1] + [Case(REAL[4, 3], axis=0, correction=1)]
_var = defop(
    "var", _var_forward, chapter="statistical", floating=True, domain=_VAR_DOMAIN, saves="inputs", batched=True
)


@_var.gradient
def _var_grad(xp, op, grad):
    """d var = 2 (x - mean(x)) / (N - correction) dx."""
    x = op.inputs[0]
    axes = op.attrs["axis"]
    n = _count(x.shape, axes)
    centred = x - xp.mean(x, axis=axes, keepdims=True)
    if n - op.attrs["correction"] <= 0:  # (a NaN variance: its gradient too, not 2e300 (x - mean))
        return _unreduce(xp, grad, op) * centred * math.nan
    return _unreduce(xp, grad, op) * centred * (2.0 / (n - op.attrs["correction"]))


@public(_var)
def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance over ``axis`` with ``correction`` degrees of freedom removed."""
    x, axes = _prep(x, axis)
    return apply1(_var, x, {"axis": axes, "correction": correction, "keepdims": bool(keepdims)})


def _std_forward(xp, x, *, axis, correction=0.0, keepdims=False):
    if axis == () or _no_degrees_left(x.shape, axis, correction) or correction != int(correction):
        # (torch's std takes no fractional correction: a NotImplementedError; its var does)
        return xp.sqrt(_var_forward(xp, x, axis=axis, correction=correction, keepdims=keepdims))
    return xp.std(x, axis=axis, correction=correction, keepdims=keepdims)


_std = defop(
    "std",
    _std_forward,
    chapter="statistical",
    floating=True,
    domain=_VAR_DOMAIN,
    convention="0 where the values are constant (std = 0): the subgradient of least norm; TF, "
    "PyTorch and JAX give NaN there",
    batched=True,
)


@_std.gradient
def _std_grad(xp, op, grad):
    """d std = (x - mean(x)) / ((N - correction) std) dx."""
    x = op.inputs[0]
    axes = op.attrs["axis"]
    n = _count(x.shape, axes)
    y = op.outputs[0]
    if not op.attrs["keepdims"]:
        y = xp.reshape(y, _keep_shape(x.shape, axes))
    centred = x - xp.mean(x, axis=axes, keepdims=True)
    # 0 for a zero grad; where std = 0 (constant values) the centred values are 0 and so is the
    # gradient: the subgradient of least norm (std is a norm of the centred values), as nanstd's
    # (one element's std is 0 for every x, and its second derivative 0, not inf - inf)
    if n - op.attrs["correction"] <= 0:  # (a NaN deviation: its gradient too)
        return _unreduce(xp, grad, op) * centred * math.nan
    safe = ones_where_zero(xp, y)
    return xp.multiply_no_nan(xp.xdivy(_unreduce(xp, grad, op), safe * (n - op.attrs["correction"])), centred)


@public(_std)
def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Standard deviation over ``axis`` with ``correction`` degrees of freedom removed."""
    x, axes = _prep(x, axis)
    return apply1(_std, x, {"axis": axes, "correction": correction, "keepdims": bool(keepdims)})


def _minmax_grad(xp, op, grad, *, empty_gets_zero=False):
    """The gradient goes to the elements equal to the extremum, split evenly over ties (TF's
    _MinOrMaxGrad).  ``empty_gets_zero``: a slice where no element equals it (an all-NaN slice of
    nanmax) gets 0, not 0 / 0."""
    x = op.inputs[0]
    axes = op.attrs["axis"]
    y = op.outputs[0]
    if not op.attrs["keepdims"]:
        y = xp.reshape(y, _keep_shape(x.shape, axes))
    hit = xp.astype(xp.equal(x, y), x.dtype)
    count = xp.sum(hit, axis=axes, keepdims=True)
    if empty_gets_zero:
        count = xp.maximum(count, 1.0)
    return _unreduce(xp, grad, op) * hit / count


def _max_forward(xp, x, *, axis, keepdims=False):
    return xp.max(x, axis=axis, keepdims=keepdims)


def _min_forward(xp, x, *, axis, keepdims=False):
    return xp.min(x, axis=axis, keepdims=keepdims)


_max = defop(
    "max",
    _max_forward,
    chapter="statistical",
    domain=_RED_DOMAIN,
    convention="ties split the gradient evenly, as TF",
    batched=True,
)
_max.gradient(_minmax_grad)
_min = defop(
    "min",
    _min_forward,
    chapter="statistical",
    domain=_RED_DOMAIN,
    convention="ties split the gradient evenly, as TF",
    batched=True,
)
_min.gradient(_minmax_grad)


def _real_only(name, x):
    if x.dtype.kind == "c":
        raise TypeError(
            f"{name}: complex input ({x.dtype}) has no order; the Array API standard defines {name} for "
            f"real-valued inputs only, and gradtape refuses complex ones on every backend (take {name} of "
            "gt.real(x) or gt.abs(x))"
        )


@public(_max)
def max(x, /, *, axis=None, keepdims=False):
    """Maximum over ``axis``; ties share the gradient evenly.  Real inputs only: complex values
    have no order (the standard leaves them unspecified), a TypeError on every backend."""
    x, axes = _prep(x, axis)
    _real_only("max", x)
    return apply1(_max, x, {"axis": axes, "keepdims": bool(keepdims)})


@public(_min)
def min(x, /, *, axis=None, keepdims=False):
    """Minimum over ``axis``; ties share the gradient evenly.  Real inputs only: complex values
    have no order (the standard leaves them unspecified), a TypeError on every backend."""
    x, axes = _prep(x, axis)
    _real_only("min", x)
    return apply1(_min, x, {"axis": axes, "keepdims": bool(keepdims)})


def _cumsum_forward(xp, x, *, axis, include_initial=False):
    return _same_dtype(xp, xp.cumulative_sum(x, axis=axis, include_initial=include_initial), x)


_cumsum = defop(
    "cumulative_sum",
    _cumsum_forward,
    chapter="statistical",
    domain=with_complex(
        [Case(REAL[4], axis=0), Case(REAL[2, 3], axis=1), Case(REAL[3, 2], axis=0, include_initial=True)]
    ),
    saves=(),
)


@_cumsum.gradient
def _cumsum_grad(xp, op, grad):
    """The reversed cumulative sum of the gradient (dropping the initial slot if included)."""
    axis = op.attrs["axis"]
    if op.attrs["include_initial"]:
        grad = grad[(slice(None),) * axis + (slice(1, None), Ellipsis)]
    return _rev_cumsum(xp, grad, axis)


@public(_cumsum)
def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Cumulative sum along ``axis`` (required unless ``x`` is 1-D)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    if axis is None:
        if x.ndim != 1:
            raise ValueError("cumulative_sum needs axis= for tensors of more than one dimension")
        axis = 0
    x = _in_result_dtype(x, dtype)
    return apply1(_cumsum, x, {"axis": _axes(axis, x.ndim)[0], "include_initial": bool(include_initial)})


def _cumprod_forward(xp, x, *, axis, include_initial=False):
    f = getattr(xp, "cumulative_prod", None)
    if f is not None:
        return _same_dtype(xp, f(x, axis=axis, include_initial=include_initial), x)
    # namespaces before the 2024.12 standard: a running product, slice by slice
    pre = (slice(None),) * axis
    acc = xp.ones_like(x[pre + (slice(0, 1), ...)])
    parts = [acc] if include_initial else []
    for i in range(x.shape[axis]):
        acc = acc * x[pre + (slice(i, i + 1), ...)]
        parts.append(acc)
    return xp.concat(parts, axis=axis) if parts else x


_cumprod = defop(
    "cumulative_prod",
    _cumprod_forward,
    chapter="statistical",
    domain=with_complex(
        [Case(NONZERO[4], axis=0), Case(POSITIVE[2, 3], axis=1), Case(NONZERO[3, 2], axis=0, include_initial=True)]
    ),
    convention="exact with zeros in the input (no division by a zero element)",
)


def _rev_cumsum(xp, t, axis):
    """The cumulative sum of ``t`` along ``axis`` from the end."""
    return xp.flip(xp.cumulative_sum(xp.flip(t, axis=axis), axis=axis), axis=axis)


@_cumprod.gradient
def _cumprod_grad(xp, op, grad):
    """d y_j / d x_i = prod_{k <= j, k != i} x_k for j >= i, exactly, zeros included:

    * before the first zero of a slice, x_i != 0 and the sum is rev_cumsum(grad * conj(y)) / conj(x);
    * at the first zero z it is rev_cumsum(grad * conj(y')), y' the cumulative product of x with
      that zero replaced by 1 (so y'_j = prod_{k <= j, k != z} x_k for j >= z);
    * after it, every product contains x_z = 0: the gradient is 0.
    """
    axis = op.attrs["axis"]
    y = op.outputs[0]
    if op.attrs["include_initial"]:
        key = (slice(None),) * axis + (slice(1, None), Ellipsis)
        grad = grad[key]
        y = y[key]
    x = op.inputs[0]
    zero = xp.equal(x, 0)
    zeros_so_far = xp.cumulative_sum(xp.astype(zero, xp.int32), axis=axis)
    before = xp.equal(zeros_so_far, 0)  # no zero at or before i
    first = zero & xp.equal(zeros_so_far, 1)  # the first zero of the slice
    g_before = _rev_cumsum(xp, grad * conj_(xp, y), axis) / conj_(xp, xp.where(before, x, 1.0))
    y_first = xp.cumulative_prod(xp.where(first, 1.0, x), axis=axis)
    g_first = _rev_cumsum(xp, grad * conj_(xp, y_first), axis)
    return xp.where(before, g_before, xp.where(first, g_first, 0.0))


@public(_cumprod)
def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Cumulative product along ``axis`` (required unless ``x`` is 1-D)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    if axis is None:
        if x.ndim != 1:
            raise ValueError("cumulative_prod needs axis= for tensors of more than one dimension")
        axis = 0
    x = _in_result_dtype(x, dtype)
    return apply1(_cumprod, x, {"axis": _axes(axis, x.ndim)[0], "include_initial": bool(include_initial)})


# --------------------------------------------------------------------------- TensorFlow's segment reductions
def _segments(data, segment_ids, num_segments, who):
    """``data`` as a Tensor with its segment axes flattened into one, the segment ids of its rows
    (host int64, ``-1`` for a row TF drops), the number of segments and the shape of a row; the ids
    checked as TF checks them (``num_segments is None``: the sorted ``segment_*``, where they must be
    non-negative and increasing along ``data``'s first axis)."""
    x = data if isinstance(data, Tensor) else convert_to_tensor(data)
    ids = _host_indices(segment_ids, who, "segment_ids")
    if num_segments is None:
        if ids.ndim != 1 or x.ndim == 0 or ids.shape[0] != x.shape[0]:
            raise ValueError(
                f"{who}: segment_ids (shape {tuple(ids.shape)}) must be a vector as long as data's first axis "
                f"(data of shape {x.shape})"
            )
        if ids.size and (ids.min() < 0 or np.any(np.diff(ids) < 0)):
            raise ValueError(f"{who}: segment ids must be non-negative and increasing, got {ids.tolist()}")
        n = int(ids[-1]) + 1 if ids.size else 0
    else:
        if tuple(ids.shape) != tuple(x.shape[: ids.ndim]):
            raise ValueError(f"{who}: segment_ids' shape {tuple(ids.shape)} must be a prefix of data's shape {x.shape}")
        n = int(num_segments.numpy()) if isinstance(num_segments, Tensor) else operator.index(num_segments)
        if ids.size and ids.max() >= n:
            at = int(np.argmax(ids.reshape(-1) >= n))
            raise ValueError(
                f"{who}: segment_ids[{at}] (flat) = {int(ids.reshape(-1)[at])} is out of range [0, {n}) "
                f"(num_segments={n}); a negative id drops its row, as TF's"
            )
    row = tuple(x.shape[ids.ndim :])
    flat = x if ids.ndim == 1 else _reshape(x, (-1,) + row)
    return flat, np.where(ids < 0, -1, ids).reshape(-1), n, row


def _segment_total(flat, ids, n, row):
    """The sum of the rows of each segment (rows of id -1 land in an extra slot, cut off)."""
    dropped = bool(np.any(ids < 0))
    slots = np.where(ids < 0, n, ids) if dropped else ids
    out = _index_add(flat, (slots,), (n + dropped,) + row)
    return _getitem(out, (slice(0, n),)) if dropped else out


def _counts(ids, n, row, like):
    """The number of rows of each segment, shaped to divide a result of ``(n,) + row``."""
    counts = np.bincount(ids[ids >= 0], minlength=n)[:n]
    return convert_to_tensor(counts.reshape((n,) + (1,) * len(row)), like=like)


def _segment_extreme(flat, ids, n, row, reduce, empty):
    """The max (``reduce``) of the rows of each segment: the rows of every segment side by side, the
    others' places filled with the reduction's identity (``n`` times the data: for few segments),
    reduced; ``empty`` where a segment has no row.  Ties share the gradient evenly, as TF's."""
    is_max = reduce is max
    if flat.dtype.kind == "f":
        identity = -math.inf if is_max else math.inf
    else:
        info = np.iinfo(flat.dtype.name) if flat.dtype.kind in "iu" else None
        if info is None:
            raise TypeError(f"segment {'max' if is_max else 'min'}: data must be real numbers, not {flat.dtype}")
        identity = int(info.min if is_max else info.max)
    mask = (ids[None, :] == np.arange(n)[:, None]).reshape((n, len(ids)) + (1,) * len(row))
    side_by_side = where(convert_to_tensor(mask, like=flat), _reshape(flat, (1,) + tuple(flat.shape)), identity)
    out = reduce(side_by_side, axis=1)
    if empty is None and flat.dtype.kind == "f":  # TF's lowest (highest) value of the dtype
        info = np.finfo(flat.dtype.name)
        empty = float(info.min if is_max else info.max)
    elif empty is None:
        empty = identity
    nonempty = _counts(ids, n, row, flat) > 0
    return where(nonempty, out, empty)


def segment_sum(data, segment_ids, name=None):
    """TensorFlow's ``tf.math.segment_sum``: the sum of the rows of ``data`` of each id, the ids
    sorted along its first axis (``ids[-1] + 1`` segments; a segment without rows is 0)."""
    return _segment_total(*_segments(data, segment_ids, None, "segment_sum"))


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """TensorFlow's ``tf.math.unsorted_segment_sum``: the sum of the elements (rows, after the axes
    of ``segment_ids``) of ``data`` of each id in ``[0, num_segments)``; a negative id drops its row."""
    return _segment_total(*_segments(data, segment_ids, num_segments, "unsorted_segment_sum"))


def _segment_mean(data, segment_ids, num_segments, who):
    flat, ids, n, row = _segments(data, segment_ids, num_segments, who)
    counts = _counts(ids, n, row, flat)
    return divide(_segment_total(flat, ids, n, row), where(counts > 0, astype(counts, flat.dtype), 1))


def segment_mean(data, segment_ids, name=None):
    """TensorFlow's ``tf.math.segment_mean``: :func:`segment_sum` divided by each segment's number of
    rows (0 for a segment without rows)."""
    return _segment_mean(data, segment_ids, None, "segment_mean")


def unsorted_segment_mean(data, segment_ids, num_segments, name=None):
    """TensorFlow's ``tf.math.unsorted_segment_mean``: :func:`unsorted_segment_sum` divided by each
    segment's number of rows (0 for a segment without rows)."""
    return _segment_mean(data, segment_ids, num_segments, "unsorted_segment_mean")


def segment_max(data, segment_ids, name=None):
    """TensorFlow's ``tf.math.segment_max``: the largest row of each segment (0 for a segment without
    rows); ties share the gradient evenly, as TF's."""
    return _segment_extreme(*_segments(data, segment_ids, None, "segment_max"), max, 0)


def segment_min(data, segment_ids, name=None):
    """TensorFlow's ``tf.math.segment_min``: the smallest row of each segment (0 for a segment
    without rows); ties share the gradient evenly, as TF's."""
    return _segment_extreme(*_segments(data, segment_ids, None, "segment_min"), min, 0)


def unsorted_segment_max(data, segment_ids, num_segments, name=None):
    """TensorFlow's ``tf.math.unsorted_segment_max``: the largest row of each segment (the dtype's
    lowest value for a segment without rows, as TF's); ties share the gradient evenly."""
    return _segment_extreme(*_segments(data, segment_ids, num_segments, "unsorted_segment_max"), max, None)


def unsorted_segment_min(data, segment_ids, num_segments, name=None):
    """TensorFlow's ``tf.math.unsorted_segment_min``: the smallest row of each segment (the dtype's
    highest value for a segment without rows, as TF's); ties share the gradient evenly."""
    return _segment_extreme(*_segments(data, segment_ids, num_segments, "unsorted_segment_min"), min, None)


_SORTED_IDS = [
    Case(REAL[5, 2], np.array([0, 0, 1, 3, 3])),
    Case(REAL[4], np.array([0, 1, 1, 1])),
]
_UNSORTED_IDS = [
    Case(REAL[5, 2], np.array([2, 0, 2, -1, 1]), 3),  # (no empty segment: the max of none is finfo.max)
    Case(REAL[2, 3], np.array([[0, 1, 1], [2, 0, 2]]), 3),
]
for _fn, _domain in (
    (segment_sum, _SORTED_IDS),
    (segment_mean, _SORTED_IDS),
    (segment_max, _SORTED_IDS),
    (segment_min, _SORTED_IDS),
    (unsorted_segment_sum, _UNSORTED_IDS),
    (unsorted_segment_mean, _UNSORTED_IDS),
    (unsorted_segment_max, _UNSORTED_IDS),
    (unsorted_segment_min, _UNSORTED_IDS),
):
    composite(_fn.__name__, _fn, chapter="math", domain=_domain, doc=f"TensorFlow's tf.math.{_fn.__name__}")


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("reduction", _sum, _prod, _mean, _var, _std, _max, _min)
batch_as("axis", _cumsum, _cumprod)
