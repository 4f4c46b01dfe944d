"""Element-wise functions (Array API standard, chapter "Element-wise Functions"), with ``astype``.

Each op is declared with its domain and followed by its rule.  Rules follow TensorFlow's complex
convention (``grad * conj(f'(x))``) and leave broadcasting to the engine.  Functions with branch cuts
(``sqrt``, ``log*``, ``pow``, the inverse trigonometric and hyperbolic functions) take their complex
samples ``OFF_AXES``, away from the axes where the principal branches are cut.
"""

from __future__ import annotations

import math

import numpy as _np

from gradtape.core.domains import (
    BOOL,
    COMPLEX,
    GT_MINUS_ONE,
    GT_ONE,
    INT,
    NONZERO,
    OFF_AXES,
    POSITIVE,
    REAL,
    UNIT,
    Case,
    Sampler,
)
from gradtape.core.dtypes import as_dtype
from gradtape.ops import apply, apply1, batch_as, binary, defop, public, unary
from gradtape.core.tensor import Tensor, convert_to_tensor

# --------------------------------------------------------------------------- helpers for rules


_COMPLEX = {}


def _complex_kind(d):
    """Whether native or gradtape dtype ``d`` is complex, cached in ``_COMPLEX[type][dtype]`` (one
    table per class of dtype: no comparison across libraries)."""
    kind = getattr(d, "kind", None)
    r = kind == "c" if isinstance(kind, str) else bool(getattr(d, "is_complex", False)) or "complex" in str(d)
    _COMPLEX.setdefault(d.__class__, {})[d] = r
    return r


#: (the dtype last asked about, whether it is complex): one identity test for a run of one dtype
#: (rebound as a whole, so threads never see a dtype paired with another's answer)
_LAST = (None, False)


def _dtype_is_complex(d):
    global _LAST
    last = _LAST
    if d is last[0]:
        return last[1]
    r = _COMPLEX.get(d.__class__)
    r = None if r is None else r.get(d)
    if r is None:
        r = _complex_kind(d)
    _LAST = (d, r)
    return r


def is_complex(x):
    """Whether ``x`` (a Tensor, a native array or a Python scalar) is complex; cached per dtype, so
    rules on either namespace stay cheap on real values."""
    d = getattr(x, "dtype", None)
    if d is None:
        return x.__class__ is complex
    return _dtype_is_complex(d)


def conj_(xp, x):
    """``conj(x)`` for complex values; real arrays and Python reals as they are (no copy, no op)."""
    d = x._v.dtype if x.__class__ is Tensor else getattr(x, "dtype", None)  # (a Tensor: its native dtype)
    if d is None:
        return x.conjugate() if x.__class__ is complex else x
    last = _LAST
    if d is last[0]:
        return xp.conj(x) if last[1] else x
    return xp.conj(x) if _dtype_is_complex(d) else x


def ones_where_zero(xp, y):
    """``y`` with 1 where it is 0: the divisor of a norm's rule (``std``, ``vector_norm``,
    ``matrix_norm``).  At a norm's minimum (every element 0) the rule then gives the subgradient of
    least norm, 0 (PyTorch's convention too), not 0 / 0, and a higher order meets no infinity."""
    return xp.where(y == 0, 1, y)


def scalar_as_array(xp, v, like):
    """``v``, or where it is a Python scalar (a native walk passes an op's scalar input as it is) an
    array of it shaped and typed like the array ``like``: the Array API's functions take arrays."""
    return v if hasattr(v, "shape") else xp.full_like(like, v)


def _ordered(name, fn=None):
    """The forward of ``name`` (the library's, or ``fn(xp, x1, x2)``), a function the standard
    defines on real values only (it needs an order): complex input is a TypeError naming the op on
    every backend (NumPy orders complex numbers lexicographically, array_api_strict refuses them,
    PyTorch fails in its kernel)."""

    def forward(xp, x1, x2):
        if is_complex(x1) or is_complex(x2):
            raise TypeError(
                f"{name}: complex input; the Array API standard defines {name} for real-valued inputs only "
                "(complex numbers have no order), and gradtape refuses complex ones on every backend "
                "(use gt.real(x) or gt.abs(x))"
            )
        return getattr(xp, name)(x1, x2) if fn is None else fn(xp, x1, x2)

    forward.__name__ = f"_{name}_forward"
    return forward


# --------------------------------------------------------------------------- non-differentiable
# Outputs are integers or booleans, or piecewise constant (TensorFlow registers these as
# NotDifferentiable too).
_INT_OR_BOOL = (INT, INT)
_SHIFTS = [Case(INT[3], _np.array([0, 1, 2])), Case(INT[2, 3], _np.array([1, 2, 3]))]
bitwise_and = binary("bitwise_and", _INT_OR_BOOL, differentiable=False)
bitwise_left_shift = binary("bitwise_left_shift", _SHIFTS, differentiable=False)
bitwise_invert = unary("bitwise_invert", INT, differentiable=False)
bitwise_or = binary("bitwise_or", _INT_OR_BOOL, differentiable=False)
bitwise_right_shift = binary("bitwise_right_shift", _SHIFTS, differentiable=False)
bitwise_xor = binary("bitwise_xor", _INT_OR_BOOL, differentiable=False)
ceil = unary("ceil", REAL, differentiable=False)
equal = binary("equal", (REAL, REAL), differentiable=False, complex=True)
floor = unary("floor", REAL, differentiable=False)


_KIND_IS = {}


def _kind_is(xp, native_dtype, kind):
    """``xp.isdtype(native_dtype, kind)``, cached: forwards that fix special cases of one kind of
    input stay cheap on the others."""
    key = (native_dtype.__class__, native_dtype, kind)  # the class first: no cross-library ==
    r = _KIND_IS.get(key)
    if r is None:
        r = _KIND_IS[key] = bool(xp.isdtype(native_dtype, kind))
    return r


def _unsigned_via_int64(xp, x1, x2):
    """``(x1, x2, q)``: int64 copies of two unsigned operands (a Python int takes the other's shape) and
    their floor quotient, for libraries without floor_divide/remainder kernels for uint16/32/64 (torch).
    uint16/uint32 values fit int64; uint64's are the same bits (from 2**63 up: negative int64s), and
    the quotient is taken on them modulo 2**64: q = 2 (h // b) + (r >= b) with h = x1 >> 1 (logical)
    and r = x1 - 2 (h // b) b < 2 b, and q = (x1 >= x2) for divisors from 2**63 up."""
    x1 = scalar_as_array(xp, x1, x2)
    x2 = scalar_as_array(xp, x2, x1)
    a, b = xp.astype(x1, xp.int64), xp.astype(x2, xp.int64)
    if xp.uint64 not in (x1.dtype, x2.dtype):
        return a, b, xp.floor_divide(a, b)
    sign = xp.full_like(a, -(2**63))

    def unsigned_ge(u, v):  # u >= v as uint64: flipping the sign bit keeps the order in int64
        return xp.astype(xp.bitwise_xor(u, sign) >= xp.bitwise_xor(v, sign), xp.int64)

    one = xp.ones_like(a)
    big = b < 0  # a divisor from 2**63 up: the quotient is 0 or 1
    b_small = xp.where(big, one, b)
    h = xp.bitwise_and(xp.bitwise_right_shift(a, one), xp.full_like(a, 2**63 - 1))
    q = xp.bitwise_left_shift(xp.floor_divide(h, b_small), one)
    q = q + unsigned_ge(a - q * b_small, b_small)
    return a, b, xp.where(big, unsigned_ge(a, b), q)


def _without_unsigned_kernel(xp, x1, x2, error, result):
    """Where the library has no floor_divide / remainder kernel for uint16/32/64 (torch): ``result(a, b,
    q)`` of :func:`_unsigned_via_int64`, in the operands' dtype; any other ``error`` is raised again."""
    unsigned = (xp.uint16, xp.uint32, xp.uint64)
    if getattr(x1, "dtype", None) not in unsigned and getattr(x2, "dtype", None) not in unsigned:
        raise error
    dtype = x1.dtype if hasattr(x1, "dtype") else x2.dtype
    return xp.astype(result(*_unsigned_via_int64(xp, x1, x2)), dtype)


def _floor_divide_forward(xp, x1, x2):
    """The library's floor_divide, with the standard's special cases where exactly one operand is
    infinite (NumPy and others give NaN and -1 there): floor(x1 / x2), e.g. inf // 2 = inf and
    1 // -inf = -0."""
    try:
        q = xp.floor_divide(x1, x2)
    except NotImplementedError as e:  # torch: no kernel for uint16/32/64
        return _without_unsigned_kernel(xp, x1, x2, e, lambda a, b, q: q)
    if not _kind_is(xp, q.dtype, "real floating"):
        return q
    a, b = scalar_as_array(xp, x1, q), scalar_as_array(xp, x2, q)
    return xp.where(xp.logical_xor(xp.isinf(a), xp.isinf(b)), xp.floor(a / b), q)


floor_divide = binary(
    "floor_divide", (REAL, NONZERO), forward=_ordered("floor_divide", _floor_divide_forward), differentiable=False
)
greater = binary("greater", (REAL, REAL), forward=_ordered("greater"), differentiable=False)
greater_equal = binary("greater_equal", (REAL, REAL), forward=_ordered("greater_equal"), differentiable=False)
isfinite = unary("isfinite", REAL, differentiable=False, complex=True)
isinf = unary("isinf", REAL, differentiable=False, complex=True)
isnan = unary("isnan", REAL, differentiable=False, complex=True)
less = binary("less", (REAL, REAL), forward=_ordered("less"), differentiable=False)
less_equal = binary("less_equal", (REAL, REAL), forward=_ordered("less_equal"), differentiable=False)
logical_and = binary("logical_and", (BOOL, BOOL), differentiable=False)
logical_not = unary("logical_not", BOOL, differentiable=False)
logical_or = binary("logical_or", (BOOL, BOOL), differentiable=False)
logical_xor = binary("logical_xor", (BOOL, BOOL), differentiable=False)
nextafter = binary("nextafter", (REAL, REAL), differentiable=False)
not_equal = binary("not_equal", (REAL, REAL), differentiable=False, complex=True)
round = unary("round", REAL, differentiable=False)
signbit = unary("signbit", REAL, differentiable=False)
trunc = unary("trunc", REAL, differentiable=False)

# --------------------------------------------------------------------------- arithmetic
add = binary("add", (REAL, REAL), complex=True, saves=())


@add.gradient
def _add_grad(xp, op, grad):
    """d(x1 + x2) = dx1 + dx2."""
    return grad, grad


subtract = binary("subtract", (REAL, REAL), complex=True, saves=())


@subtract.gradient
def _subtract_grad(xp, op, grad):
    """d(x1 - x2) = dx1 - dx2: where x2 was broadcast along axes of length 1, the cotangent is summed
    over them first and negated after (the engine sums what is left: added leading axes)."""
    if not op.needs_grad(1):
        return grad, None
    x2 = op.inputs[1]  # (not kept: None where shaped like the output, else its shape)
    if x2 is not None:
        shape = tuple(x2.shape)
        gshape = tuple(grad.shape)
        lead = len(gshape) - len(shape)
        axes = tuple(lead + k for k, d in enumerate(shape) if d == 1 and gshape[lead + k] != 1)
        if axes:
            return grad, -xp.sum(grad, axis=axes, keepdims=True)
    return grad, -grad


multiply = binary("multiply", (REAL, REAL), complex=True, saves="inputs")


@multiply.gradient
def _multiply_grad(xp, op, grad):
    """d(x1 x2) = x2 dx1 + x1 dx2, so (grad * conj(x2), grad * conj(x1))."""
    x1, x2 = op.inputs
    i1, i2 = op.in_ids  # (0: a Python scalar operand, the common scale: no gradient, no conj_)
    if i1 == i2 and i1 and op.needs_grad(0):
        # x * x: one product, doubled (the same bits as the two gradients' sum, which the walk would
        # add: one library call and one array fewer)
        return grad * conj_(xp, x2) * 2, None
    # (a Python float through xp.multiply: the backend's own scalar handling, e.g. torch's cached 0-d
    # tensor, which an operator on a native array would bypass)
    return (
        (xp.multiply(grad, x2) if x2.__class__ is float else grad * conj_(xp, x2)) if i1 and op.needs_grad(0) else None,
        (xp.multiply(grad, x1) if x1.__class__ is float else grad * conj_(xp, x1)) if i2 and op.needs_grad(1) else None,
    )


divide = binary("divide", (REAL, NONZERO), complex=True)


@divide.gradient
def _divide_grad(xp, op, grad):
    """d(x1 / x2) = dx1 / x2 - x1 / x2^2 dx2 (0 for a zero grad, also at second order where x1 = 0)."""
    g1 = xp.xdivy(grad, conj_(xp, op.inputs[1]))
    return g1, (xp.strong_zero_multiply(-conj_(xp, op.outputs[0]), g1) if op.needs_grad(1) else None)


# --------------------------------------------------------------------------- NaN-safe products
# A zero cotangent gives a zero gradient (docs/conventions.md): rules multiply a derivative that may be
# infinite or NaN by the cotangent with ``multiply_no_nan(derivative, grad)``, or divide the cotangent
# by a denominator that may be zero with ``xdivy(grad, denominator)``.  Both are ops with exact rules
# of their own, so higher orders (and ForwardAccumulator, which differentiates a vjp at a zero
# cotangent) see the true derivative, never a mask.
def _multiply_no_nan_forward(xp, x1, x2):
    """x1 * x2, and 0 where x2 == 0 (x1 is masked first: no invalid-value warning for inf * 0)."""
    if not hasattr(x1, "shape"):
        if math.isfinite(x1.real) and math.isfinite(x1.imag):
            return x1 * x2
        x1 = xp.full_like(x2, x1)
    if not hasattr(x2, "shape"):
        return x1 * x2 if x2 != 0 else xp.zeros_like(x1)
    return xp.where(x2 == 0, 0, x1) * x2


multiply_no_nan = binary(
    "multiply_no_nan",
    (REAL, REAL),
    forward=_multiply_no_nan_forward,
    complex=True,
    chapter="math",
    doc="``x1 * x2``, and 0 where ``x2 == 0`` even if ``x1`` is infinite or NaN (TensorFlow's ``multiply_no_nan``).",
)


@multiply_no_nan.gradient
def _multiply_no_nan_grad(xp, op, grad):
    """TF's _MulNoNanGrad: (mul_no_nan(grad, conj(x2)), mul_no_nan(conj(x1), grad)); exact away from
    infinite inputs (the product is x1 x2 wherever x1 is finite)."""
    x1, x2 = op.inputs
    return (
        xp.multiply_no_nan(grad, conj_(xp, x2)) if op.needs_grad(0) else None,
        xp.multiply_no_nan(conj_(xp, x1), grad) if op.needs_grad(1) else None,
    )


def _strong_zero_multiply_forward(xp, x1, x2):
    """x1 * x2, and 0 where either is 0 (both masked first: no invalid-value warning for inf * 0)."""
    a = scalar_as_array(xp, x1, x2)
    b = scalar_as_array(xp, x2, a)
    zero = (a == 0) | (b == 0)
    # (+0 times +0 where either is zero: the +0 that masking the product would give, one call fewer)
    return xp.where(zero, 0, a) * xp.where(zero, 0, b)


strong_zero_multiply = binary(
    "strong_zero_multiply",
    (REAL, REAL),
    forward=_strong_zero_multiply_forward,
    complex=True,
    chapter="math",
    doc="``x1 * x2``, and 0 where either is 0 even if the other is infinite or NaN (a strong zero).",
)


@strong_zero_multiply.gradient
def _strong_zero_multiply_grad(xp, op, grad):
    """(grad * conj(x2), conj(x1) * grad), each a strong-zero product: exact wherever both factors
    are finite, and 0 for a zero grad."""
    x1, x2 = op.inputs
    return (
        xp.strong_zero_multiply(grad, conj_(xp, x2)) if op.needs_grad(0) else None,
        xp.strong_zero_multiply(conj_(xp, x1), grad) if op.needs_grad(1) else None,
    )


#: the Python scalars ``xdivy`` divides by without its mask (float and int compare equal: 2.0 in it)
_POWERS_OF_TWO = frozenset(2.0**k for k in range(-8, 9))


def _xdivy_forward(xp, x1, x2):
    """x1 / x2, and 0 where x1 == 0 (the divisor is masked first: no warning for 0 / 0)."""
    if not hasattr(x1, "shape"):
        return x1 / x2 if x1 != 0 else xp.zeros_like(x1 * x2)
    if x2.__class__ is int or x2.__class__ is float:
        if x2 in _POWERS_OF_TWO:
            # (``y / 2``) a power of two, exact in every floating dtype and its reciprocal too (a
            # library may multiply by it: JAX): x1 / x2 is x1 / 1 = x1 where x1 is ±0, the bits
            # the mask gives.  (Another integer: NumPy and PyTorch would give the same bits, JAX not.)
            return x1 / x2
        x2 = xp.full_like(x1, x2)
    return x1 / xp.where(x1 == 0, 1, x2)


xdivy = binary(
    "xdivy",
    (REAL, NONZERO),
    forward=_xdivy_forward,
    complex=True,
    chapter="math",
    doc="``x1 / x2``, and 0 where ``x1 == 0`` even if ``x2`` is 0 (TensorFlow's ``xdivy``).",
    convention="d/dx1 = 1 / x2 also at x1 = 0 (TF's XdivyGrad gives 0 there)",
)


@xdivy.gradient
def _xdivy_grad(xp, op, grad):
    """x1 / x2 wherever x2 != 0: (xdivy(grad, conj(x2)), -g1 conj(y)), both 0 for a zero grad; the
    second also 0 where x1 == 0 (y is 0 for every x2 there), even where g1 is infinite or NaN, so a
    masked singular branch stays NaN-free at second order."""
    g1 = xp.xdivy(grad, conj_(xp, op.inputs[1]))
    return g1, (xp.strong_zero_multiply(-conj_(xp, op.outputs[0]), g1) if op.needs_grad(1) else None)


def _divide_no_nan_forward(xp, x1, x2):
    """x1 / x2, and 0 where x2 == 0."""
    if not hasattr(x2, "shape"):
        return x1 / x2 if x2 != 0 else xp.zeros_like(x1 * 1.0)
    zero = x2 == 0
    return xp.where(zero, 0, x1 / xp.where(zero, 1, x2))


divide_no_nan = binary(
    "divide_no_nan",
    (REAL, NONZERO),
    forward=_divide_no_nan_forward,
    complex=True,
    chapter="math",
    doc="``x1 / x2``, and 0 where ``x2 == 0`` (TensorFlow's ``divide_no_nan``).",
    convention="0 where x2 == 0, gradients too, as TF",
)


@divide_no_nan.gradient
def _divide_no_nan_grad(xp, op, grad):
    """TF's _DivNoNanGrad: (div_no_nan(grad, conj(x2)), -g1 conj(y)); both 0 where x2 == 0."""
    g1 = xp.divide_no_nan(grad, conj_(xp, op.inputs[1]))
    return g1, (xp.multiply_no_nan(-conj_(xp, op.outputs[0]), g1) if op.needs_grad(1) else None)


negative = unary("negative", REAL, complex=True, saves=())
negative.gradient(lambda xp, op, grad: -grad)
positive = unary("positive", REAL, complex=True, saves=())
positive.gradient(lambda xp, op, grad: grad)


def _remainder_forward(xp, x1, x2):
    try:
        return xp.remainder(x1, x2)
    except NotImplementedError as e:  # torch: no kernel for uint16/32/64
        return _without_unsigned_kernel(xp, x1, x2, e, lambda a, b, q: a - q * b)  # modulo 2**64


remainder = binary(
    "remainder",
    (REAL, NONZERO),
    forward=_ordered("remainder", _remainder_forward),
    convention="as TF's FloorMod: d/dx1 = 1, d/dx2 = -floor(x1 / x2)",
)


@remainder.gradient
def _remainder_grad(xp, op, grad):
    """remainder(x1, x2) = x1 - floor(x1 / x2) x2, so (grad, -grad * floor(x1 / x2))."""
    x1, x2 = op.inputs
    return grad, (xp.multiply_no_nan(-xp.floor_divide(x1, x2), grad) if op.needs_grad(1) else None)


pow = binary(
    "pow",
    [(POSITIVE, REAL), (OFF_AXES, OFF_AXES)],
    convention="d/dx2 of x1**x2 is 0 where x1 <= 0 (real), as TF; d/dx1 is 0 where x2 == 0 (x1 = 0 too), as PyTorch",
)


@pow.gradient
def _pow_grad(xp, op, grad):
    """d(x1^x2) = x2 x1^(x2-1) dx1 + x1^x2 log(x1) dx2 (the log term is 0 where x1 <= 0, as TF).
    Where x2 == 0, x1^x2 is 1 for every x1: d/dx1 is 0, also at x1 = 0 (as JAX and PyTorch; x1^(x2-1)
    is not evaluated there, so higher orders see no infinity either)."""
    x1, x2 = op.inputs
    g1 = g2 = None
    if op.needs_grad(0):
        if not hasattr(x2, "shape") and x2 == 0:  # (as an array: the zero stays connected to x1, so a
            x2 = scalar_as_array(xp, x2, x1)  # higher order is 0 too, not unconnected)
        if hasattr(x2, "shape"):
            zero = x2 == 0
            d = xp.where(zero, 0, x2 * xp.pow(x1, xp.where(zero, 1, x2) - 1))
        else:
            d = x2 * xp.pow(x1, x2 - 1)
        g1 = xp.multiply_no_nan(conj_(xp, d), grad)
    if op.needs_grad(1):
        y = op.outputs[0]
        x1 = scalar_as_array(xp, x1, y)
        if is_complex(x1):
            zero = x1 == 0
            logx = xp.where(zero, 0, xp.log(xp.where(zero, 1, x1)))
        else:
            pos = x1 > 0
            logx = xp.where(pos, xp.log(xp.where(pos, x1, 1)), 0)
        g2 = xp.multiply_no_nan(conj_(xp, y * logx), grad)
    return g1, g2


square = unary("square", REAL, complex=True, saves="inputs")
square.gradient(lambda xp, op, grad: grad * (2 * conj_(xp, op.inputs[0])))

sqrt = unary("sqrt", [POSITIVE, OFF_AXES], saves="outputs")
sqrt.gradient(lambda xp, op, grad: xp.xdivy(grad, 2 * conj_(xp, op.outputs[0])))

reciprocal = unary("reciprocal", NONZERO, complex=True, saves="outputs")
# -y * (y * grad), each product masked on its second factor: 0 for a zero grad, also at second order
# (square(y) would be recorded with y = inf at x = 0, and square's rule gives 0 * inf there)
reciprocal.gradient(
    lambda xp, op, grad: (
        -xp.multiply_no_nan(conj_(xp, op.outputs[0]), xp.multiply_no_nan(conj_(xp, op.outputs[0]), grad))
    )
)

# --------------------------------------------------------------------------- exponentials and logs
exp = unary("exp", REAL, complex=True, saves="outputs")
exp.gradient(lambda xp, op, grad: xp.multiply_no_nan(conj_(xp, op.outputs[0]), grad))


def _expm1_forward(xp, x):
    """The library's expm1; complex zeros give +0 + 0j as the standard says (NumPy: -0 for -0 + 0j)."""
    y = xp.expm1(x)
    return y + 0.0 if _kind_is(xp, y.dtype, "complex floating") else y


expm1 = unary("expm1", REAL, forward=_expm1_forward, complex=True, saves="outputs")
expm1.gradient(lambda xp, op, grad: xp.multiply_no_nan(conj_(xp, op.outputs[0] + 1), grad))

log = unary("log", [POSITIVE, OFF_AXES], saves="inputs")
log.gradient(lambda xp, op, grad: xp.xdivy(grad, conj_(xp, op.inputs[0])))

log1p = unary("log1p", [GT_MINUS_ONE, OFF_AXES], saves="inputs")
log1p.gradient(lambda xp, op, grad: xp.xdivy(grad, conj_(xp, op.inputs[0] + 1)))

log2 = unary("log2", [POSITIVE, OFF_AXES])
log2.gradient(lambda xp, op, grad: xp.xdivy(grad, conj_(xp, op.inputs[0]) * math.log(2.0)))

log10 = unary("log10", [POSITIVE, OFF_AXES])
log10.gradient(lambda xp, op, grad: xp.xdivy(grad, conj_(xp, op.inputs[0]) * math.log(10.0)))

logaddexp = binary("logaddexp", (REAL, REAL))


@logaddexp.gradient
def _logaddexp_grad(xp, op, grad):
    """d log(e^x1 + e^x2) = e^(x1 - y) dx1 + e^(x2 - y) dx2."""
    x1, x2 = op.inputs
    y = op.outputs[0]
    return (grad * xp.exp(x1 - y) if op.needs_grad(0) else None, grad * xp.exp(x2 - y) if op.needs_grad(1) else None)


# --------------------------------------------------------------------------- trigonometric
sin = unary("sin", REAL, complex=True, saves="inputs")
sin.gradient(lambda xp, op, grad: grad * conj_(xp, xp.cos(op.inputs[0])))

cos = unary("cos", REAL, complex=True, saves="inputs")
cos.gradient(lambda xp, op, grad: -grad * conj_(xp, xp.sin(op.inputs[0])))

tan = unary("tan", UNIT, complex=True)
tan.gradient(lambda xp, op, grad: grad * conj_(xp, 1 + xp.square(op.outputs[0])))

asin = unary("asin", [UNIT, OFF_AXES])
asin.gradient(lambda xp, op, grad: xp.xdivy(grad, conj_(xp, xp.sqrt(1 - xp.square(op.inputs[0])))))

acos = unary("acos", [UNIT, OFF_AXES])
acos.gradient(lambda xp, op, grad: xp.xdivy(-grad, conj_(xp, xp.sqrt(1 - xp.square(op.inputs[0])))))

atan = unary("atan", [REAL, OFF_AXES])
atan.gradient(lambda xp, op, grad: xp.xdivy(grad, conj_(xp, 1 + xp.square(op.inputs[0]))))

atan2 = binary("atan2", (NONZERO, NONZERO))


@atan2.gradient
def _atan2_grad(xp, op, grad):
    """atan2(x1, x2) = angle of (x2, x1): d = (x2 dx1 - x1 dx2) / (x1^2 + x2^2)."""
    x1, x2 = op.inputs
    x1, x2 = scalar_as_array(xp, x1, x2), scalar_as_array(xp, x2, x1)
    g = xp.xdivy(grad, xp.square(x1) + xp.square(x2))
    return (g * x2 if op.needs_grad(0) else None, -g * x1 if op.needs_grad(1) else None)


sinh = unary("sinh", REAL, complex=True, saves="inputs")
sinh.gradient(lambda xp, op, grad: xp.multiply_no_nan(conj_(xp, xp.cosh(op.inputs[0])), grad))

cosh = unary("cosh", REAL, complex=True, saves="inputs")
cosh.gradient(lambda xp, op, grad: xp.multiply_no_nan(conj_(xp, xp.sinh(op.inputs[0])), grad))


def _tanh_forward(xp, x):
    """The library's tanh; for complex ``a + bj`` with infinite ``a`` and finite ``b`` the imaginary
    zero takes ``b``'s sign, as the standard says (C's ctanh, and so NumPy, take sin(2b)'s)."""
    y = xp.tanh(x)
    if not _kind_is(xp, y.dtype, "complex floating"):
        return y
    b = xp.imag(x)
    flip = xp.isinf(xp.real(x)) & xp.isfinite(b) & (xp.signbit(xp.imag(y)) != xp.signbit(b))
    return xp.where(flip, xp.conj(y), y)


tanh = unary("tanh", REAL, forward=_tanh_forward, complex=True, saves="outputs")


@tanh.gradient
def _tanh_grad(xp, op, grad):
    """d tanh(x) = (1 - y^2) dx: ``tanh_grad(conj(y), grad)``, an op of its own (TensorFlow's
    ``TanhGrad``), so a backend may compute it with its fused kernel and a trace records it as one
    step."""
    return xp.tanh_grad(conj_(xp, op.outputs[0]), grad)


def _tanh_grad_forward(xp, y, dy):
    return dy * (1 - xp.square(y))


# (internal, not in gt's namespace: rules reach it as ``xp.tanh_grad``; the PyTorch adapter computes
# it with ``torch.ops.aten.tanh_backward``, what torch.autograd runs)
tanh_grad = binary(
    "tanh_grad",
    (UNIT, REAL),
    forward=_tanh_grad_forward,
    complex=True,
    chapter="math",
    scalars=False,
    saves="inputs",
    doc="``dy * (1 - y^2)``: the gradient of ``y = tanh(x)`` given ``dy`` (TensorFlow's ``TanhGrad``).",
    convention="internal: tanh's rule (TF's TanhGrad); PyTorch computes it with aten.tanh_backward, one "
    "kernel that may round the last bit otherwise than dy * (1 - y * y)",
)


@tanh_grad.gradient
def _tanh_grad_grad(xp, op, grad):
    """``dy * (1 - y^2)`` is holomorphic in both: ``(-2 grad conj(y dy), tanh_grad(conj(y), grad))``
    (TensorFlow's ``_TanhGradGrad``)."""
    y, dy = op.inputs
    gy = -2 * grad * conj_(xp, y * dy) if op.needs_grad(0) else None
    return gy, (xp.tanh_grad(conj_(xp, y), grad) if op.needs_grad(1) else None)


asinh = unary("asinh", [REAL, OFF_AXES])
asinh.gradient(lambda xp, op, grad: xp.xdivy(grad, conj_(xp, xp.sqrt(xp.square(op.inputs[0]) + 1))))

acosh = unary("acosh", [GT_ONE, OFF_AXES])


@acosh.gradient
def _acosh_grad(xp, op, grad):
    """d acosh(x) = dx / sinh(y) (TF's _AcoshGrad); 1 / sqrt(x^2 - 1) takes the other branch for
    complex x with a negative real part."""
    return xp.xdivy(grad, conj_(xp, xp.sinh(op.outputs[0])))


atanh = unary("atanh", [UNIT, OFF_AXES])
atanh.gradient(lambda xp, op, grad: xp.xdivy(grad, conj_(xp, 1 - xp.square(op.inputs[0]))))

hypot = binary("hypot", (NONZERO, NONZERO), convention="at (0, 0) the gradient is NaN-free 0")


@hypot.gradient
def _hypot_grad(xp, op, grad):
    """d sqrt(x1^2 + x2^2) = (x1 dx1 + x2 dx2) / y (0 where y == 0)."""
    x1, x2 = op.inputs
    y = op.outputs[0]
    zero = y == 0
    g = xp.where(zero, 0, grad / xp.where(zero, 1, y))
    return (g * x1 if op.needs_grad(0) else None, g * x2 if op.needs_grad(1) else None)


# --------------------------------------------------------------------------- sign, magnitude, kinks
def _abs_forward(xp, x):
    try:
        return xp.abs(x)
    except NotImplementedError:  # torch: no kernel for uint16/32/64, whose absolute value is themselves
        if x.dtype not in (xp.uint16, xp.uint32, xp.uint64):
            raise
        return x


abs = unary(
    "abs",
    NONZERO,
    forward=_abs_forward,
    complex=True,
    convention="abs'(0) = 0; complex: grad * z / |z| (0 at z = 0), as TF",
)


@abs.gradient
def _abs_grad(xp, op, grad):
    """Real: grad * sign(x) (0 at 0).  Complex: grad * z / |z| (0 at 0), as TF's ComplexAbs."""
    x = op.inputs[0]
    if is_complex(x):
        y = op.outputs[0]
        zero = y == 0
        return xp.where(zero, 0, grad * (x / xp.where(zero, 1, y)))
    return grad * xp.sign(x)


sign = unary(
    "sign",
    NONZERO,
    convention="zero gradient everywhere, as TF and JAX (complex inputs too, "
    "though z / |z| is not locally constant there)",
)
sign.gradient(lambda xp, op, grad: xp.zeros_like(grad))

copysign = binary(
    "copysign", (NONZERO, NONZERO), convention="d/dx1 = sign(x1) * sign(x2) (signed zeros count); d/dx2 = 0, as JAX"
)


@copysign.gradient
def _copysign_grad(xp, op, grad):
    """copysign(x1, x2) = |x1| sgn(x2): d/dx1 = +-1 (-1 where the sign bits differ), d/dx2 = 0."""
    x1, x2 = op.inputs
    x1, x2 = scalar_as_array(xp, x1, x2), scalar_as_array(xp, x2, x1)
    flip = xp.logical_xor(xp.signbit(x1), xp.signbit(x2))
    return (
        xp.where(flip, -grad, grad) if op.needs_grad(0) else None,
        xp.zeros_like(grad) if op.needs_grad(1) else None,
    )


maximum = binary(
    "maximum", (REAL, REAL), forward=_ordered("maximum"), convention="at x1 == x2 the gradient goes to x1, as TF"
)


@maximum.gradient
def _maximum_grad(xp, op, grad):
    """The gradient goes to the larger input; on ties to x1 (TF's _MaximumGrad)."""
    x1, x2 = op.inputs
    m = x1 >= x2
    return (xp.where(m, grad, 0) if op.needs_grad(0) else None, xp.where(m, 0, grad) if op.needs_grad(1) else None)


minimum = binary(
    "minimum", (REAL, REAL), forward=_ordered("minimum"), convention="at x1 == x2 the gradient goes to x1, as TF"
)


@minimum.gradient
def _minimum_grad(xp, op, grad):
    """The gradient goes to the smaller input; on ties to x1 (TF's _MinimumGrad)."""
    x1, x2 = op.inputs
    m = x1 <= x2
    return (xp.where(m, grad, 0) if op.needs_grad(0) else None, xp.where(m, 0, grad) if op.needs_grad(1) else None)


_CLIP_LO, _CLIP_HI = Sampler("CLIP_LO", -1.5, -0.5), Sampler("CLIP_HI", 0.5, 1.5)
_clip = defop(
    "clip",
    lambda xp, x, *bounds, has_min, has_max: xp.clip(
        x, bounds[0] if has_min else None, bounds[-1] if has_max else None
    ),
    chapter="elementwise",
    domain=[
        Case(REAL[3], min=-1.0, max=1.0),
        Case(REAL[2, 3], min=-0.5),
        Case(REAL[2, 3], max=0.5),
        Case(REAL[2, 3], _CLIP_LO[3], _CLIP_HI[2, 1]),
        Case(REAL[4], None, _CLIP_HI[()]),
    ],
    convention="the gradient passes at the bounds (min <= x <= max), as TF's clip_by_value",
    batched=True,  # (its rule is element-wise: masks of the inputs' shapes broadcast over batch axes)
)


@public(_clip)
def clip(x, /, min=None, max=None):
    """Clamp each element to ``[min, max]``; the gradient passes where ``min <= x <= max``.  An integer
    ``x`` takes integer bounds: a Python float bound with a fractional part is a TypeError (NumPy
    truncated it and kept the integers, torch and JAX returned floats), an integral one is an int."""
    if isinstance(x, Tensor) and x.dtype.kind in "iub":
        min, max = (_integer_bound(b, x.dtype, w) for b, w in ((min, "min"), (max, "max")))
    args = [x] + [b for b in (min, max) if b is not None]
    return apply(_clip, tuple(args), {"has_min": min is not None, "has_max": max is not None})


def _integer_bound(b, dtype, what):
    """A bound of ``clip`` of an integer tensor: a Python float as an int where it is integral."""
    if not isinstance(b, float):
        return b
    if b != b or b in (math.inf, -math.inf) or b != int(b):
        raise TypeError(
            f"clip: {what}={b!r} is no integer, and x is {dtype}: give an integer bound, or cast x to a "
            "floating dtype first (gt.astype(x, gt.float32)) to clip to fractional bounds"
        )
    return int(b)


@_clip.gradient
def _clip_grad(xp, op, grad):
    """x gets grad where min <= x <= max; min gets it where x < min, max where x > max."""
    x = op.inputs[0]
    bounds = list(op.inputs[1:])
    lo = bounds.pop(0) if op.attrs["has_min"] else None
    hi = bounds.pop(0) if op.attrs["has_max"] else None
    inside = None
    out = [None]
    if lo is not None:
        below = x < lo
        inside = xp.logical_not(below)
        out.append(xp.where(below, grad, 0))
    if hi is not None:
        above = x > hi
        inside = xp.logical_not(above) if inside is None else xp.logical_and(inside, xp.logical_not(above))
        out.append(xp.where(above, grad, 0))
    out[0] = grad if inside is None else xp.where(inside, grad, 0)
    return tuple(out)


# --------------------------------------------------------------------------- complex parts
conj = unary("conj", REAL, complex=True, saves=())
conj.gradient(lambda xp, op, grad: conj_(xp, grad))

real = unary("real", REAL, complex=True, saves=())
real.gradient(lambda xp, op, grad: grad)  # the engine casts the real gradient to the complex input


def _imag_forward(xp, x):
    if xp.isdtype(x.dtype, "complex floating"):
        return xp.imag(x)
    return xp.zeros_like(x)  # the standard's imag takes complex input only; TF's gives 0


imag = unary("imag", REAL, forward=_imag_forward, complex=True, convention="real inputs: imag(x) = 0, zero gradient")


@imag.gradient
def _imag_grad(xp, op, grad):
    """imag(z) = Im z: the gradient is 1j * grad (TF's _ImagGrad); real inputs get 0."""
    x = op.inputs[0]
    if not is_complex(x):
        return xp.zeros_like(grad)
    return xp.astype(grad, x.dtype) * 1j


# --------------------------------------------------------------------------- casts and identity
def _astype_forward(xp, x, *, dtype, copy=True):
    return xp.astype(x, dtype, copy=copy)


_astype = defop(
    "astype",
    _astype_forward,
    chapter="data_types",
    domain=[
        Case(REAL[3], "float32"),
        Case(REAL[2, 3], "complex128"),
        Case(REAL[2], "int64"),
        Case(COMPLEX[2, 2], "complex64"),
        Case(COMPLEX[3], "float64"),
    ],
    convention="casts to integer or bool carry no gradient; complex to real keeps the real part of the gradient",
    saves=(),
    batched=True,
)


@public(_astype)
def astype(x, dtype, /, *, copy=True, device=None):
    """Cast ``x`` to ``dtype`` (differentiable between floating and complex dtypes)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    d = as_dtype(dtype)
    if device is not None:
        x = x.to_device(device)
    if x.dtype.kind == "c" and d.kind != "c":
        x = real(x)  # as tf.cast: complex to real keeps the real part (the standard leaves it open)
    if x.dtype is d and not copy:
        return x
    b = x._b
    return apply1(_astype, x, {"dtype": b.dtype_to_native(d), "copy": copy})


_astype.gradient(lambda xp, op, grad: grad)  # the engine casts back to the input's dtype

cast = astype

_identity = unary(
    "identity",
    REAL,
    forward=lambda xp, x: x,
    complex=True,
    chapter="utility",
    doc="The value itself, recorded (reading a Variable).",
    saves=(),
)
_identity.gradient(lambda xp, op, grad: grad)


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("elementwise", _clip)
batch_as("leading", _astype)
