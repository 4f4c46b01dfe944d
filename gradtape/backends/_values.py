"""Value conventions the libraries disagree on, kept the same on every backend (docs/conventions.md,
"The same numbers on every backend").

* **A cast of floating values to an integer dtype saturates**: NaN becomes 0, values beyond the
  dtype's range (infinities included) its nearest bound, as JAX (XLA), ``tf.dtypes.saturate_cast``
  and Rust's ``as`` do, with a ``RuntimeWarning`` naming the op, the values and the dtype.  NumPy and
  PyTorch give C's undefined result (INT_MIN on x86, 255 for -1.0 as uint8).
* **Integer floor division and remainder by zero give 0**, with NumPy's ``RuntimeWarning`` ("divide
  by zero encountered in floor_divide"), as NumPy does; PyTorch raises, JAX gives -1 or garbage.
* **A Python int beyond an integer dtype is NumPy's ``OverflowError``** (PyTorch and JAX wrap it).
* **An integer to a negative integer power is NumPy's ``ValueError``** (PyTorch and JAX give 0).
* **Signed zeros as NumPy and the standard give them**: a zero ``remainder`` has the divisor's sign,
  a zero ``floor_divide`` the sign of ``x1 / x2`` (PyTorch and JAX gave ``-0.0 % 3.0 = -0.0``, JAX
  ``-0.0 // 3.0 = 0.0``).

Each is checked where the values can be read at no more than a reduction and a host read (an eager
array); where they cannot (a lazy Dask array, a tracer of ``jax.jit``, a program ``torch.compile``
traces) the values follow the convention without the warning.  :func:`astype_forward` and
:func:`int_division` make an adapter's forward from its library's own function, written once here.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from gradtape.core.dtypes import check_python_int, int_range
from gradtape.core.tensor import user_stacklevel

__all__ = [
    "astype_forward",
    "check_new_int",
    "eager",
    "int_division",
    "itself",
    "with_conventions",
]


def eager(x):
    """The ``read`` of an eager library: every array's values can be read."""
    return True


def itself(x):
    """The ``host`` of NumPy: its arrays are the values."""
    return x


def _read(read, f, *args):
    """``f(*args)`` (a host read of values) where ``read(args[0])`` says the values can be read here;
    None where they cannot (``read`` None, or false, or the read itself refuses: a tracer of a library's
    vmap or compiler that ``read`` did not recognise)."""
    if read is None or not read(args[0]):
        return None
    try:
        return f(*args)
    except Exception:  # (a value the library cannot give here: the unread path computes the same values)
        return None


_min = np.minimum.reduce
_max = np.maximum.reduce


def _in_range(x, xp, host, lo, hi):
    """Whether every value of ``x`` truncates to a value in ``[lo, hi]`` (not NaN): one pass of NumPy's
    reductions over ``host(x)`` where it gives the values (an array in host memory), else the
    namespace's ``min`` and ``max``, read."""
    h = None if host is None else host(x)
    if h is not None:
        small, big = float(_min(h, axis=None)), float(_max(h, axis=None))
    else:
        small, big = float(xp.min(x)), float(xp.max(x))
    return small > lo - 1 and big < hi + 1  # (exact: a Python float beside a Python int; NaN fails)


def _any_zero(x, xp, host):
    """Whether the integer array ``x`` holds a zero (as :func:`_in_range` reads it)."""
    h = None if host is None else host(x)
    if h is not None:
        return not h.all()
    return bool(xp.any(x == 0))


def check_new_int(backend, value, native_dtype):
    """:func:`check_python_int` for an array an adapter makes from ``value`` in ``native_dtype`` (None:
    the library's choice): where ``value`` is a Python int and the dtype an integer one."""
    if value.__class__ is int and native_dtype is not None:
        d = backend.dtype_from_native(native_dtype)
        if d.kind in "iu":
            check_python_int(value, d.name)


def _size(x):
    """The number of elements of a native array (torch's ``size`` is a method)."""
    n = x.size
    return x.numel() if callable(n) else n  # (torch's size() is the shape)


def _short(v):
    return "nan" if v != v else repr(float(v)) if abs(v) == float("inf") else f"{float(v):.6g}"


def astype_forward(backend, plain, read, host=None):
    """The op ``astype``'s forward on ``backend`` (``plain(x, dtype=..., copy=...)``: the library's own
    cast): floating values cast to an integer dtype saturate (the module's docstring).  ``read(x)``:
    whether ``x``'s values can be read here (else the saturation is computed without the check and
    the warning); None: never (a lazy library).  ``host(x)``: a NumPy array of ``x``'s values where the
    library gives one at no cost (its memory is the host's), else None (None: never)."""

    kinds = {}  # (native source dtype, native target dtype) -> the target's name where the cast saturates

    def target(x, dtype):
        key = (x.dtype, dtype)
        try:
            return kinds[key]
        except KeyError:
            pass
        src = backend.dtype_from_native(x.dtype)
        dst = backend.dtype_from_native(dtype)
        r = kinds[key] = dst.name if src.kind == "f" and dst.kind in "iu" else None
        return r

    def astype(x, /, dtype, *, copy=True):
        name = target(x, dtype)
        if name is None or not _size(x):
            return plain(x, dtype=dtype, copy=copy)
        lo, hi = int_range(name)
        xp = backend.xp
        fits = _read(read, _in_range, x, xp, host, lo, hi)
        if fits:
            return plain(x, dtype=dtype, copy=copy)
        eager = fits is not None
        over = x >= float(hi + 1)  # (a power of two: exact in every floating dtype)
        under = x <= float(lo - 1)  # (where lo - 1 rounds to lo, lo itself: its cast is lo anyway)
        nan = xp.isnan(x)
        bad = over | under | nan
        if eager:
            values = np.asarray(backend.to_numpy(x))[np.asarray(backend.to_numpy(bad))]
            shown = ", ".join(_short(v) for v in values[:3]) + (", ..." if values.size > 3 else "")
            warnings.warn(
                f"astype: {values.size} of {_size(x)} values of the {backend.dtype_from_native(x.dtype).name} "
                f"input are NaN, infinite or outside the range of {name} [{lo}, {hi}] ({shown}); they are "
                f"cast to 0 (NaN) and the nearest bound of {name}, on every backend (as JAX and "
                "tf.dtypes.saturate_cast do): clip them (gt.clip) or replace them (gt.where) first to choose",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        out = plain(xp.where(bad, xp.zeros_like(x), x), dtype=dtype, copy=False)
        out = xp.where(over, xp.full_like(out, hi), out)
        return xp.where(under, xp.full_like(out, lo), out)

    astype.__name__ = astype.__qualname__ = "astype"
    return astype


def _signed_zeros(backend, fn, name):
    """``fn``, the library's floating ``floor_divide`` or ``remainder``, with NumPy's signs of zero
    results: a remainder's is the divisor's, a floor quotient's that of ``x1 / x2``."""
    xp = backend.xp

    def zero_sign(x1, x2, out):
        if name == "remainder":
            s = x2
        else:
            s = x1 / x2
        if s.__class__ in (int, float):
            z = xp.zeros_like(out) if math.copysign(1.0, s) > 0 else -xp.zeros_like(out)
        else:
            z = xp.copysign(xp.zeros_like(out), s)
        return xp.where(out == 0, z, out)

    def forward(x1, x2, /):
        return zero_sign(x1, x2, fn(x1, x2))

    return forward


def int_division(backend, fn, name, read, host=None, signed_zeros=False):
    """The op ``name`` (``floor_divide`` or ``remainder``) on ``backend`` from the library's ``fn``:
    integer operands divided by zero give 0 with NumPy's ``RuntimeWarning`` (the module's docstring);
    floating ones are ``fn``'s, with NumPy's signs of zero results where ``signed_zeros``.  ``read(x)``,
    ``host(x)``: as :func:`astype_forward`'s."""
    floating = _signed_zeros(backend, fn, name) if signed_zeros else fn
    integer = {}  # native dtype -> whether it is an integer one

    def is_int(d):
        r = integer.get(d)
        if r is None:
            r = integer[d] = backend.dtype_from_native(d).kind in "iu"
        return r

    def forward(x1, x2, /):
        d = getattr(x2, "dtype", None)
        if d is None:  # a Python scalar divisor
            d = getattr(x1, "dtype", None)
            if d is None or not is_int(d):
                return floating(x1, x2)
            if x2 != 0:
                return fn(x1, x2)
            x2 = backend.xp.zeros_like(x1)
        elif not is_int(d):
            return floating(x1, x2)
        xp = backend.xp
        some = _read(read, _any_zero, x2, xp, host)
        if some is False:
            return fn(x1, x2)
        zero = x2 == 0
        if some:
            warnings.warn(
                f"divide by zero encountered in {name} (integers: the result is 0 there, on every backend, as NumPy's)",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        out = fn(x1, xp.where(zero, xp.ones_like(x2), x2))
        return xp.where(zero, xp.zeros_like(out), out)

    forward.__name__ = forward.__qualname__ = name
    return forward


def int_power(backend, fn, read, host=None):
    """The op ``pow`` on ``backend`` from the library's ``fn``: an integer to a negative integer power is
    NumPy's ``ValueError`` (PyTorch and JAX give 0); other operands are ``fn``'s.  ``read(x)``,
    ``host(x)``: as :func:`astype_forward`'s (an exponent that cannot be read is not checked)."""
    integer = {}

    def is_int(v):
        if v.__class__ is int:
            return True
        d = getattr(v, "dtype", None)
        if d is None:
            return False
        r = integer.get(d)
        if r is None:
            r = integer[d] = backend.dtype_from_native(d).kind in "iu"
        return r

    def negative(x2, xp, host):
        h = None if host is None else host(x2)
        return bool((h < 0).any()) if h is not None else bool(xp.any(x2 < 0))

    def pow(x1, x2, /):
        if is_int(x2) and is_int(x1):
            bad = x2 < 0 if x2.__class__ is int else _read(read, negative, x2, backend.xp, host)
            if bad:
                raise ValueError("Integers to negative integer powers are not allowed.")
        return fn(x1, x2)

    pow.__name__ = pow.__qualname__ = "pow"
    return pow


def with_conventions(backend, name, impl, read, *, division=True, power=None, host=None, signed_zeros=()):
    """``impl``, the native forward of op ``name`` on ``backend``, keeping this module's conventions:
    ``astype`` always; ``floor_divide`` and ``remainder`` where ``division`` (the library's own integer
    division by zero is not NumPy's), with NumPy's signs of zero for the ops named in ``signed_zeros``;
    ``pow`` where ``power`` (None: as ``division``).  ``read``, ``host``: as :func:`astype_forward`'s."""
    if power is None:
        power = division
    if name == "astype":
        return astype_forward(backend, impl, read, host)
    if division and name in ("floor_divide", "remainder"):
        return int_division(backend, impl, name, read, host, name in signed_zeros)
    if power and name == "pow":
        return int_power(backend, impl, read, host)
    return impl
