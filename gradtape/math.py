"""``gt.math``: TensorFlow's ``tf.math`` names for gradtape's ops.

Element-wise functions are the ops themselves (``gt.math.sin is gt.sin``).  Reductions take TF's
signature ``reduce_sum(input_tensor, axis=None, keepdims=False)`` (``axis`` may be positional or a
list) and call the standard's functions; a few TF conveniences (``rsqrt``, ``squared_difference``,
``cumsum`` with ``exclusive``/``reverse``, ``add_n``, ...) are compositions of ops, so they need no
gradient rules of their own.  ``multiply_no_nan``, ``divide_no_nan`` and ``xdivy`` are ops (TF's):
gradient rules use them so that a zero cotangent gives a zero gradient (docs/conventions.md).
"""

from __future__ import annotations

from gradtape.ops import elementwise as _E
from gradtape.ops import nn as _nn
from gradtape.ops import statistical as _S
from gradtape.ops.searching import argmax as _argmax
from gradtape.ops.searching import argmin as _argmin
from gradtape.ops.searching import count_nonzero as _count_nonzero
from gradtape.tensor import Tensor, convert_to_tensor
from gradtape.ops.indexing import _getitem
from gradtape.ops.manipulation import flip
from gradtape.ops.creation import zeros_like

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
    "ceil",
    "conj",
    "cos",
    "cosh",
    "count_nonzero",
    "cumprod",
    "cumsum",
    "divide",
    "divide_no_nan",
    "equal",
    "erf",
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
    "negative",
    "not_equal",
    "pow",
    "real",
    "reciprocal",
    "reduce_euclidean_norm",
    "reduce_logsumexp",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_std",
    "reduce_sum",
    "reduce_variance",
    "round",
    "rsqrt",
    "scalar_mul",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "softmax",
    "softplus",
    "sqrt",
    "square",
    "squared_difference",
    "subtract",
    "tan",
    "strong_zero_multiply",
    "tanh",
    "truediv",
    "xdivy",
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
log_sigmoid, l2_normalize = _nn.log_sigmoid, _nn.l2_normalize


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
    """Maximum over ``axis``; ties share the gradient evenly (as TF)."""
    return _S.max(_t(input_tensor), axis=_ax(axis), keepdims=keepdims)


def reduce_min(input_tensor, axis=None, keepdims=False, name=None):
    """Minimum over ``axis``; ties share the gradient evenly (as TF)."""
    return _S.min(_t(input_tensor), axis=_ax(axis), keepdims=keepdims)


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
