"""``gt.math``: TensorFlow's ``tf.math`` names for gradtape's ops.

Element-wise functions are the ops themselves (``gt.math.sin is gt.sin``).  Reductions take TF's
signature ``reduce_sum(input_tensor, axis=None, keepdims=False)`` (``axis`` may be positional or a
list) and call the standard's functions; a few TF conveniences (``rsqrt``, ``squared_difference``,
``cumsum`` with ``exclusive``/``reverse``, ``add_n``, ...) are compositions of ops, so they need no
gradient rules of their own.  ``multiply_no_nan``, ``divide_no_nan`` and ``xdivy`` are ops (TF's):
gradient rules use them so that a zero cotangent gives a zero gradient (docs/conventions.md).

The names a training step uses from TF's top level live here too (exported as ``gt.<name>``):
``clip_by_value``, ``clip_by_norm``, ``clip_by_global_norm``, ``global_norm`` (TF's
``tf.linalg.global_norm``), ``identity`` and ``one_hot``; they compose ops, as TF's Python does, so
gradients follow.  One deliberate difference: TF's ``global_norm`` and ``clip_by_global_norm`` give
NaN gradients when every tensor is zero (``d sqrt(s)/ds`` at 0); here that gradient is 0 for the
norm (a subgradient) and the clipping scale (1 when ``clip_norm > 0``) for the clipped tensors, as
TF's own ``clip_by_norm`` gives at zero.
"""

from __future__ import annotations

import collections.abc as _abc
from collections import namedtuple as _namedtuple
import math as _math

import numpy as _np

from gradtape.core import dtypes as _dt
from gradtape.ops import elementwise as _E
from gradtape.ops import nn as _nn
from gradtape.ops import special as _sp
from gradtape.ops import statistical as _S
from gradtape.ops.statistical import (  # (TensorFlow's segment reductions)
    segment_max,
    segment_mean,
    segment_min,
    segment_sum,
    unsorted_segment_max,
    unsorted_segment_mean,
    unsorted_segment_min,
    unsorted_segment_sum,
)
from gradtape.ops import utility as _U
from gradtape.ops.searching import where as _where
from gradtape.ops.sorting import argsort as _argsort
from gradtape.ops.indexing import take_along_axis as _take_along_axis
from gradtape.ops.searching import argmax as _argmax
from gradtape.ops.searching import argmin as _argmin
from gradtape.ops.searching import count_nonzero as _count_nonzero
from gradtape.core.tensor import Tensor, Variable, convert_to_tensor
from gradtape.ops.indexing import _getitem
from gradtape.ops.manipulation import flip
from gradtape.ops.creation import full_like, zeros_like

__all__ = [
    "abs",
    "accumulate_n",
    "acos",
    "acosh",
    "add",
    "add_n",
    "angle",
    "argmax",
    "argmin",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bessel_i0",
    "bessel_i0e",
    "bessel_i1",
    "bessel_i1e",
    "ceil",
    "conj",
    "cos",
    "cosh",
    "count_nonzero",
    "cumprod",
    "cumsum",
    "digamma",
    "divide",
    "divide_no_nan",
    "equal",
    "erf",
    "erfc",
    "erfcinv",
    "erfinv",
    "exp",
    "expm1",
    "floor",
    "floordiv",
    "floormod",
    "greater",
    "greater_equal",
    "imag",
    "is_finite",
    "is_inf",
    "is_nan",
    "l2_normalize",
    "less",
    "less_equal",
    "lgamma",
    "log",
    "log1p",
    "log_sigmoid",
    "log_softmax",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "mod",
    "multiply",
    "multiply_no_nan",
    "ndtri",
    "negative",
    "nextafter",
    "not_equal",
    "pow",
    "real",
    "reciprocal",
    "reciprocal_no_nan",
    "reduce_all",
    "reduce_any",
    "reduce_euclidean_norm",
    "reduce_logsumexp",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_std",
    "reduce_sum",
    "reduce_variance",
    "rint",
    "round",
    "rsqrt",
    "scalar_mul",
    "segment_max",
    "segment_mean",
    "segment_min",
    "segment_sum",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "softmax",
    "softplus",
    "softsign",
    "sqrt",
    "square",
    "squared_difference",
    "subtract",
    "tan",
    "strong_zero_multiply",
    "tanh",
    "top_k",
    "truediv",
    "unsorted_segment_max",
    "unsorted_segment_mean",
    "unsorted_segment_min",
    "unsorted_segment_sum",
    "xdivy",
    "xlog1py",
    "xlogy",
    "zero_fraction",
]

# --------------------------------------------------------------------------- element-wise (aliases)
abs = _E.abs
acos, acosh, asin, asinh = _E.acos, _E.acosh, _E.asin, _E.asinh
atan, atan2, atanh = _E.atan, _E.atan2, _E.atanh
add, subtract, multiply, divide, truediv = _E.add, _E.subtract, _E.multiply, _E.divide, _E.divide
negative, reciprocal, square, sqrt = _E.negative, _E.reciprocal, _E.square, _E.sqrt
pow = _E.pow
multiply_no_nan, divide_no_nan, xdivy = _E.multiply_no_nan, _E.divide_no_nan, _E.xdivy
strong_zero_multiply = _E.strong_zero_multiply
exp, expm1, log, log1p = _E.exp, _E.expm1, _E.log, _E.log1p
sin, cos, tan, sinh, cosh, tanh = _E.sin, _E.cos, _E.tan, _E.sinh, _E.cosh, _E.tanh
ceil, floor, sign = _E.ceil, _E.floor, _E.sign
round = _E.round
rint = _E.round  # the array API's round is TF's rint: halves go to the even neighbour
nextafter = _E.nextafter
floordiv, floormod, mod = _E.floor_divide, _E.remainder, _E.remainder
maximum, minimum = _E.maximum, _E.minimum
equal, not_equal, greater, greater_equal, less, less_equal = (
    _E.equal,
    _E.not_equal,
    _E.greater,
    _E.greater_equal,
    _E.less,
    _E.less_equal,
)
logical_and, logical_or, logical_not, logical_xor = _E.logical_and, _E.logical_or, _E.logical_not, _E.logical_xor
is_finite, is_inf, is_nan = _E.isfinite, _E.isinf, _E.isnan
conj, real, imag = _E.conj, _E.real, _E.imag
sigmoid, softplus, erf, log_softmax, softmax = _nn.sigmoid, _nn.softplus, _nn.erf, _nn.log_softmax, _nn.softmax
log_sigmoid, l2_normalize, softsign = _nn.log_sigmoid, _nn.l2_normalize, _nn.softsign
one_hot = _nn.one_hot  # (TF's top-level tf.one_hot; exported as gt.one_hot)
# special functions under TF's tf.math names (SciPy's names are in gt.special)
lgamma, digamma, erfc, erfinv, erfcinv, ndtri = _sp.gammaln, _sp.digamma, _sp.erfc, _sp.erfinv, _sp.erfcinv, _sp.ndtri
bessel_i0, bessel_i0e, bessel_i1, bessel_i1e = _sp.i0, _sp.i0e, _sp.i1, _sp.i1e


def _t(x):
    return x if isinstance(x, Tensor) else convert_to_tensor(x)


def _ax(axis):
    return tuple(axis) if isinstance(axis, list) else axis


# --------------------------------------------------------------------------- reductions (TF signatures)
def reduce_sum(input_tensor, axis=None, keepdims=False, name=None):
    """Sum over ``axis`` (all axes by default)."""
    return _S.sum(_t(input_tensor), axis=_ax(axis), keepdims=keepdims)


def reduce_mean(input_tensor, axis=None, keepdims=False, name=None):
    """Mean over ``axis`` (all axes by default)."""
    return _S.mean(_t(input_tensor), axis=_ax(axis), keepdims=keepdims)


def reduce_max(input_tensor, axis=None, keepdims=False, name=None):
    """Maximum over ``axis``; ties share the gradient evenly (as TF).  Over an empty axis it is TF's
    identity of the maximum, ``-inf`` (an integer dtype's lowest value), where ``gt.max`` (the
    standard's, NumPy's) raises."""
    x = _t(input_tensor)
    if _reduces_nothing(x, axis):
        return _of_nothing(x, axis, keepdims, True)
    return _S.max(x, axis=_ax(axis), keepdims=keepdims)


def reduce_min(input_tensor, axis=None, keepdims=False, name=None):
    """Minimum over ``axis``; ties share the gradient evenly (as TF).  Over an empty axis it is TF's
    ``+inf`` (an integer dtype's highest value), where ``gt.min`` raises."""
    x = _t(input_tensor)
    if _reduces_nothing(x, axis):
        return _of_nothing(x, axis, keepdims, False)
    return _S.min(x, axis=_ax(axis), keepdims=keepdims)


def _reduces_nothing(x, axis):
    """Whether a reduction of ``x`` over ``axis`` reduces an axis of length 0."""
    axes = range(x.ndim) if axis is None else _S._axes(_ax(axis), x.ndim)
    return any(x.shape[a] == 0 for a in axes)


def _of_nothing(x, axis, keepdims, is_max):
    """TF's max (min) over an empty axis: the identity, computed as ``0 * sum(x) + identity`` so that
    the result stays connected to ``x`` (a gradient of zeros, not None, as TF's)."""
    if x.dtype.kind == "f":
        identity = -_math.inf if is_max else _math.inf
    elif x.dtype.kind in "iu":
        info = _np.iinfo(x.dtype.name)
        identity = int(info.min if is_max else info.max)
    else:
        raise TypeError(f"reduce_{'max' if is_max else 'min'}: input must be real numbers, not {x.dtype}")
    total = _E.astype(_S.sum(x, axis=_ax(axis), keepdims=keepdims), x.dtype)
    return _E.add(_E.multiply(total, 0), _E.astype(full_like(total, identity), x.dtype))


def reduce_prod(input_tensor, axis=None, keepdims=False, name=None):
    """Product over ``axis``."""
    return _S.prod(_t(input_tensor), axis=_ax(axis), keepdims=keepdims)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """Population standard deviation over ``axis``."""
    return _S.std(_t(input_tensor), axis=_ax(axis), keepdims=keepdims)


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """Population variance over ``axis``."""
    return _S.var(_t(input_tensor), axis=_ax(axis), keepdims=keepdims)


def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """``log(sum(exp(x), axis))``, computed stably."""
    return _nn.logsumexp(input_tensor, axis=_ax(axis), keepdims=keepdims)


def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None):
    """``sqrt(sum(x ** 2, axis))``."""
    return _E.sqrt(_S.sum(_E.square(_t(input_tensor)), axis=_ax(axis), keepdims=keepdims))


def argmax(input, axis=None, output_type=None, name=None):
    """Index of the largest value along ``axis`` (TF's default: axis 0)."""
    out = _argmax(_t(input), axis=0 if axis is None else int(axis))
    return out if output_type is None else _E.astype(out, output_type)


def argmin(input, axis=None, output_type=None, name=None):
    """Index of the smallest value along ``axis`` (TF's default: axis 0)."""
    out = _argmin(_t(input), axis=0 if axis is None else int(axis))
    return out if output_type is None else _E.astype(out, output_type)


def count_nonzero(input, axis=None, keepdims=False, dtype=None, name=None):
    """Number of non-zero elements over ``axis`` (int64 unless ``dtype``)."""
    out = _count_nonzero(_t(input), axis=_ax(axis), keepdims=keepdims)
    return out if dtype is None else _E.astype(out, dtype)


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """Cumulative sum along ``axis`` (``exclusive``: starting from 0; ``reverse``: from the end)."""
    return _cumulative(_S.cumulative_sum, x, axis, exclusive, reverse)


def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    """Cumulative product along ``axis`` (``exclusive``: starting from 1; ``reverse``: from the end)."""
    return _cumulative(_S.cumulative_prod, x, axis, exclusive, reverse)


def _cumulative(fn, x, axis, exclusive, reverse):
    x = _t(x)
    axis = int(axis) % x.ndim
    if reverse:
        x = flip(x, axis=axis)
    y = fn(x, axis=axis, include_initial=bool(exclusive))
    if exclusive:
        y = _getitem(y, (slice(None),) * axis + (slice(0, x.shape[axis]),))
    return flip(y, axis=axis) if reverse else y


# --------------------------------------------------------------------------- compositions
def rsqrt(x, name=None):
    """``1 / sqrt(x)``."""
    return _E.reciprocal(_E.sqrt(_t(x)))


def squared_difference(x, y, name=None):
    """``(x - y) ** 2``."""
    return _E.square(_E.subtract(x, y))


def scalar_mul(scalar, x, name=None):
    """``scalar * x``."""
    return _E.multiply(scalar, x)


def add_n(inputs, name=None):
    """The element-wise sum of a list of tensors of one shape."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("add_n needs at least one input")
    out = _t(inputs[0])
    for t in inputs[1:]:
        out = out + t
    return out


accumulate_n = add_n


def angle(input, name=None):
    """The argument of complex numbers (0 or pi for reals), as ``atan2(imag, real)``."""
    x = _t(input)
    if not x.dtype.is_complex:
        return _E.atan2(zeros_like(x), x)
    return _E.atan2(_E.imag(x), _E.real(x))


def reciprocal_no_nan(x, name=None):
    """``1 / x``, and 0 where ``x`` is 0 (its gradient there is 0 too)."""
    x = _t(x)
    return _E.divide_no_nan(full_like(x, 1), x)


def xlogy(x, y, name=None):
    """``x * log(y)``, and 0 where ``x`` is 0 whatever ``y`` is.  As TF, both gradients are 0
    where ``x`` is 0 (SciPy's ``gt.special.xlogy`` gives ``log(y)`` there)."""
    return _x_log(x, y, _E.log)


def xlog1py(x, y, name=None):
    """``x * log1p(y)``, and 0 where ``x`` is 0; both gradients are 0 there, as TF."""
    return _x_log(x, y, _E.log1p)


def _x_log(x, y, log):
    x = _t(x)
    y = _t_like(y, x)
    nonzero = _E.not_equal(x, 0)
    # the two-where trick: where x is 0 the product sees y = 1 (log) or 0 (log1p), whose log is
    # finite, so the gradient that where sends to the discarded branch (0) stays 0, not NaN
    safe_y = _where(nonzero, y, 1.0 if log is _E.log else 0.0)
    return _where(nonzero, _E.multiply(x, log(safe_y)), 0.0)


def zero_fraction(value, name=None):
    """The fraction of elements of ``value`` that are 0, as a float32 scalar (NaN when empty)."""
    v = _t(value)
    return _S.mean(_E.astype(_E.equal(v, zeros_like(v)), _dt.float32))


#: what ``top_k`` returns: TensorFlow's ``TopKV2`` named tuple (``result.values``, ``result.indices``)
TopKV2 = _namedtuple("TopKV2", ["values", "indices"])


def top_k(input, k=1, sorted=True, index_type=_dt.int32, name=None):
    """The ``k`` largest entries along the last axis and their indices (``index_type``, int32 by
    default), largest first, as TF's ``TopKV2(values, indices)`` named tuple; equal values keep their
    order (the lower index first), as TF.  The gradient flows to the selected entries."""
    x = _t(input)
    if x.ndim < 1:
        raise ValueError(f"top_k: input must be at least 1-D, got shape {x.shape} (backend {x.backend})")
    k = int(k)
    if k < 0 or k > x.shape[-1]:
        raise ValueError(
            f"top_k: k must be in [0, {x.shape[-1]}] for input of shape {x.shape} (backend {x.backend}), got {k}"
        )
    idx = _getitem(_argsort(x, axis=-1, descending=True, stable=True), (Ellipsis, slice(0, k)))
    return TopKV2(_take_along_axis(x, idx, axis=-1), _E.astype(idx, _dt.as_dtype(index_type)))


def reduce_any(input_tensor, axis=None, keepdims=False, name=None):
    """Logical or over ``axis`` (all axes by default) of a bool tensor."""
    x = _bool_input("reduce_any", input_tensor)
    return _U.any(x, axis=_ax(axis), keepdims=keepdims)


def reduce_all(input_tensor, axis=None, keepdims=False, name=None):
    """Logical and over ``axis`` (all axes by default) of a bool tensor."""
    x = _bool_input("reduce_all", input_tensor)
    return _U.all(x, axis=_ax(axis), keepdims=keepdims)


def _bool_input(op, value):
    x = _t(value)
    if not x.dtype.is_bool:
        raise TypeError(
            f"{op}: input_tensor must be bool, as TensorFlow's {op} requires, got {x.dtype} on backend "
            f"{x.backend}; compare first (x != 0) or cast with gt.cast(x, gt.bool)"
        )
    return x


# --------------------------------------------------------------------------- TF top-level names
def identity(input, name=None):
    """A tensor with ``input``'s value, recorded so gradients pass through (a Variable is read)."""
    if isinstance(input, Tensor) and not isinstance(input, Variable):
        return _E._identity(input)
    return convert_to_tensor(input)  # a Variable's read is recorded by the conversion itself


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """``t`` with each element clamped to ``[clip_value_min, clip_value_max]`` (TF's
    ``minimum`` then ``maximum``: when min > max every element becomes min).  The bounds take
    ``t``'s dtype and must not broadcast ``t`` to a larger shape.  The gradient passes to ``t`` at
    the bounds and to a bound where ``t`` lies beyond it, as TF."""
    t = _t(t)
    hi = _operand("clip_by_value", "clip_value_max", clip_value_max, t)
    lo = _operand("clip_by_value", "clip_value_min", clip_value_min, t)
    _same_shape("clip_by_value", t, lo.shape, hi.shape)
    return _E.maximum(_E.minimum(t, hi), lo)


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """``t * clip_norm / max(norm(t, axes), clip_norm)``: rescaled so that its L2 norm over
    ``axes`` (all by default) is at most ``clip_norm`` (a negative one counts as 0).  The norm is
    taken with TF's two-where trick, so an all-zero ``t`` has a finite gradient (the identity)."""
    t = _t(t)
    if not t.dtype.is_floating:
        raise TypeError(
            f"clip_by_norm: t must be floating-point, got {t.dtype} on backend {t.backend}; "
            f"cast with gt.cast(t, gt.float32)"
        )
    if isinstance(clip_norm, (int, float, _np.number)) and not isinstance(clip_norm, bool):
        c = _operand("clip_by_norm", "clip_norm", max(float(clip_norm), 0.0), t)
    else:
        c = _E.astype(_E.maximum(_t_like(clip_norm, t), 0), t.dtype)
    _same_shape("clip_by_norm", t, c.shape)
    l2sum = _S.sum(_E.multiply(t, t), axis=_ax(axes), keepdims=True)
    positive = _E.greater(l2sum, 0)
    l2norm = _where(positive, _E.sqrt(_where(positive, l2sum, 1.0)), l2sum)
    return _E.divide(_E.multiply(t, c), _E.maximum(l2norm, c))


def global_norm(t_list, name=None):
    """``sqrt(sum of the squares of every element of every tensor)``; ``None`` entries are
    skipped (no tensors: a float32 0).  TF's ``tf.linalg.global_norm``; its gradient at an all-zero
    list is 0 here (TF's is NaN)."""
    values = [_t(v) for v in _sequence("global_norm", t_list) if v is not None]
    if not values:
        return convert_to_tensor(0.0, dtype=_dt.float32)
    _one_float_dtype("global_norm", values)
    sumsq = add_n([_S.sum(_E.multiply(v, v)) for v in values])
    positive = _E.greater(sumsq, 0)
    return _where(positive, _E.sqrt(_where(positive, sumsq, 1.0)), sumsq)


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """Rescale every tensor of ``t_list`` by ``clip_norm / max(global_norm, clip_norm)``, so that
    their global norm is at most ``clip_norm``; returns ``(list_clipped, global_norm)``.  ``None``
    entries stay ``None``; ``use_norm`` replaces the computed norm; an infinite or NaN norm makes
    every clipped value NaN (as TF).  An all-zero list has a finite gradient (TF's is NaN)."""
    t_list = list(_sequence("clip_by_global_norm", t_list))
    if use_norm is None:
        use_norm = global_norm(t_list)
    else:
        like = next((v for v in t_list if isinstance(v, Tensor)), None)
        use_norm = use_norm if isinstance(use_norm, Tensor) else convert_to_tensor(use_norm, like=like)
    c = _operand("clip_by_global_norm", "clip_norm", clip_norm, use_norm)
    scale = _E.multiply(c, _E.minimum(_reciprocal_or_inf(use_norm), _reciprocal_or_inf(c)))
    # NaN when the norm is inf or NaN (TF adds ``use_norm - use_norm``: the same value and a zero gradient)
    scale = _E.add(scale, _where(_E.isfinite(use_norm), 0.0, _math.nan))
    clipped = []
    for v in t_list:
        if v is None:
            clipped.append(None)
            continue
        v = _t(v)
        clipped.append(_E.multiply(v, scale if scale.dtype == v.dtype else _E.astype(scale, v.dtype)))
    return clipped, use_norm


# --------------------------------------------------------------------------- helpers of the above
def _t_like(value, like):
    return value if isinstance(value, Tensor) else convert_to_tensor(value, like=like)


def _operand(op, argname, value, t):
    """``value`` as a tensor of ``t``'s dtype beside ``t``: Python numbers and lists are converted
    (an integer ``t`` refuses a fractional bound, as TF); a tensor must already have that dtype."""
    if isinstance(value, (bool, int, float, list, tuple)) or _np.isscalar(value):
        arr = _np.asarray(value)
        if t.dtype.is_integer and arr.dtype.kind == "f" and not _np.all(_np.mod(arr, 1) == 0):
            raise TypeError(f"{op}: cannot convert {argname}={value!r} to t's dtype {t.dtype} (backend {t.backend})")
        return convert_to_tensor(value, dtype=t.dtype, like=t)
    value = _t_like(value, t)
    if value.dtype != t.dtype:
        raise TypeError(
            f"{op}: {argname} has dtype {value.dtype} but the tensor it applies to has {t.dtype} (backend "
            f"{t.backend}); TensorFlow requires one dtype: cast with gt.cast({argname}, gt.{t.dtype})"
        )
    return value


def _same_shape(op, t, *shapes):
    """TF clips without broadcasting ``t``: the other operands must broadcast to ``t``'s shape."""
    try:
        out = _np.broadcast_shapes(tuple(t.shape), *(tuple(s) for s in shapes))
    except ValueError:
        out = None
    if out != tuple(t.shape):
        raise ValueError(
            f"{op}: operands of shapes {[tuple(s) for s in shapes]} do not broadcast to t's shape "
            f"{tuple(t.shape)} (backend {t.backend}); TensorFlow does not broadcast t: reshape the operands"
        )


def _sequence(op, t_list):
    if not isinstance(t_list, _abc.Sequence) or isinstance(t_list, str):
        raise TypeError(f"`t_list` should be a sequence of tensors. Received {type(t_list)}. ({op}: pass a list)")
    return t_list


def _one_float_dtype(op, values):
    dtypes = sorted({str(v.dtype) for v in values})
    if len(dtypes) > 1 or not values[0].dtype.is_floating:
        raise TypeError(
            f"{op}: the tensors must share one floating-point dtype, as in TensorFlow, got {', '.join(dtypes)} "
            f"(backend {values[0].backend}); cast them with gt.cast(t, gt.float32)"
        )


def _reciprocal_or_inf(x):
    """``1 / x`` with ``inf`` at 0, without a division by zero (so no warning, and a zero
    gradient at 0 rather than ``0 * inf``)."""
    nonzero = _E.not_equal(x, 0)
    return _where(nonzero, _E.reciprocal(_where(nonzero, x, 1.0)), _math.inf)
