"""NaN-ignoring reductions with NumPy's signatures: what xarray looks up on a namespace.

xarray (``core/nputils.py``, ``computation/nanops.py``) calls ``xp.nanmean(values, axis=axis,
dtype=dtype)``, ``xp.nanvar``/``xp.nanstd(..., dtype=dtype, ddof=ddof)``, ``xp.nanmin``/``nanmax``/
``nanargmin``/``nanargmax(values, axis=axis)``, ``xp.nanprod``/``nancumsum``/``nancumprod(values,
axis=axis, dtype=dtype)`` on any namespace that has them (``axis`` an int, a tuple or None); its
``skipna`` sum is a ``sum`` of ``where(isnull, 0, x)``.  Each function here is a registered op
(chapter ``nan_functions``) with a rule and a domain of inputs with NaN entries (:class:`NanSampler`).

* NaN entries get a zero gradient; the gradient elsewhere is that of the reduction over the other
  entries (``nanmax``/``nanmin``: ties split evenly, as ``gt.max``).
* All-NaN slices behave as NumPy's: ``nansum`` 0, ``nanprod`` 1, ``nanmean``/``nanvar``/``nanstd``/
  ``nanmax``/``nanmin`` NaN (on the NumPy backend with NumPy's ``RuntimeWarning``), ``nanargmax``/
  ``nanargmin`` raise ``ValueError``; their gradient is 0.
* Forwards: composed of the Array API namespace's functions; an adapter may compute them its own way
  (the NumPy backend's ``overrides`` call ``np.nan*``, whose all-NaN warnings are NumPy's).
* Rules: ``rule(xp, op, grad)`` on the namespace the engine passes; ``nanprod``, ``nanmax``/``nanmin``
  and ``nancumprod`` reuse the rules of ``prod``, ``max``/``min`` and ``cumulative_prod``
  (:mod:`gradtape.ops.statistical`) on ``x`` with its NaN entries filled.
"""

from __future__ import annotations

import math
import types

import numpy as np

from gradtape.core import dtypes as _dt
from gradtape.core.domains import Case, Sampler
from gradtape.ops import apply1, batch_as, defop, public
from gradtape.ops.elementwise import astype
from gradtape.ops.manipulation import reshape
from gradtape.ops.statistical import (
    _axes,
    _cumprod_forward,
    _cumprod_grad,
    _keep_shape,
    _minmax_grad,
    _prod_grad,
    _rev_cumsum,
    _unreduce,
)
from gradtape.core.tensor import Tensor, convert_to_tensor

__all__ = [
    "nanargmax",
    "nanargmin",
    "nancumprod",
    "nancumsum",
    "nanmax",
    "nanmean",
    "nanmin",
    "nanprod",
    "nanstd",
    "nansum",
    "nanvar",
]


class NanSampler(Sampler):
    """Uniform samples with NaN at every entry whose indices sum to 1 modulo 3: never a whole slice
    of two or more entries along any axis, so every reduction of those has a finite value.  Finite
    differences at a NaN entry are 0 (NaN + h is NaN), the gradient the rules give there."""

    def sample(self, rng, shape, dtype="float64"):
        x = super().sample(rng, shape, dtype)
        if x.ndim:
            x[np.indices(x.shape).sum(axis=0) % 3 == 1] = np.nan
        return x


WITH_NAN = NanSampler("WITH_NAN", -2.0, 2.0)
NONZERO_WITH_NAN = NanSampler("NONZERO_WITH_NAN", -2.0, 2.0, avoid=(0.0,), gap=0.2)

_RED_CASES = [
    Case(WITH_NAN[4]),
    Case(WITH_NAN[2, 3], axis=1),
    Case(WITH_NAN[2, 3], axis=0, keepdims=True),
    Case(WITH_NAN[2, 3, 2], axis=(0, 2)),
    Case(WITH_NAN[()]),
]


def _prep(a, axis, dtype=None, out=None):
    if out is not None:
        raise TypeError("gradtape's nan-functions take no out=: use the result (y = gt.nansum(x, ...))")
    a = a if isinstance(a, Tensor) else convert_to_tensor(a)
    if dtype is not None and _dt.as_dtype(dtype) is not a.dtype:
        a = astype(a, dtype)
    return a, _axes(axis, a.ndim)


def _is_float(xp, x):
    return xp.isdtype(x.dtype, ("real floating", "complex floating"))


def _filled(xp, x, value):
    """``x`` with NaN entries replaced by ``value``."""
    if not _is_float(xp, x):
        return x
    return xp.where(xp.isnan(x), xp.full_like(x, value), x)


def _valid(xp, x, axis, keepdims):
    """The number of non-NaN entries over ``axis``, in ``x``'s dtype."""
    ok = xp.astype(xp.logical_not(xp.isnan(x)), x.dtype)
    return xp.sum(ok, axis=axis, keepdims=keepdims)


# --------------------------------------------------------------------------- nansum, nanprod
def _nansum_forward(xp, x, *, axis, keepdims):
    return xp.sum(_filled(xp, x, 0), axis=axis, keepdims=keepdims)


_nansum = defop(
    "nansum",
    _nansum_forward,
    chapter="nan_functions",
    domain=_RED_CASES,
    convention="NaN entries get a zero gradient",
    saves="inputs",
    batched=True,
)


@public(_nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False):
    """Sum over ``axis``, NaN entries counted as 0 (``np.nansum``)."""
    a, axes = _prep(a, axis, dtype, out)
    return apply1(_nansum, a, {"axis": axes, "keepdims": bool(keepdims)})


# (the rules below meet floating inputs only: an integer input gives an integer output, which
# carries no gradient)
def _masked(xp, x, g):
    """``g`` where ``x`` is not NaN, 0 where it is."""
    return xp.where(xp.isnan(x), 0.0, g)


@_nansum.gradient
def _nansum_grad(xp, op, grad):
    """sum's gradient (grad broadcast back over the reduced axes), 0 at the NaN entries."""
    return _masked(xp, op.inputs[0], _unreduce(xp, grad, op))


def _nanprod_forward(xp, x, *, axis, keepdims):
    return xp.prod(_filled(xp, x, 1), axis=axis, keepdims=keepdims)


_nanprod = defop(
    "nanprod",
    _nanprod_forward,
    chapter="nan_functions",
    domain=_RED_CASES,
    convention="NaN entries get a zero gradient; exact with zeros, as prod",
    saves="inputs",
    batched=True,
)


@public(_nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False):
    """Product over ``axis``, NaN entries counted as 1 (``np.nanprod``)."""
    a, axes = _prep(a, axis, dtype, out)
    return apply1(_nanprod, a, {"axis": axes, "keepdims": bool(keepdims)})


def _as_op(op, x, y=None, **attrs):
    """The recorded call ``op`` with its input replaced by ``x`` (its output by ``y``; its attributes
    updated by ``attrs``), to reuse a rule of statistical on either namespace."""
    return types.SimpleNamespace(
        inputs=(x,),
        outputs=() if y is None else (y,),
        attrs=dict(op.attrs, **attrs) if attrs else op.attrs,
        needs_grad=op.needs_grad,
        backend=op.backend,
    )


@_nanprod.gradient
def _nanprod_grad(xp, op, grad):
    """prod's rule on x with NaN entries replaced by 1; 0 at those entries."""
    x = op.inputs[0]
    nan = xp.isnan(x)
    return xp.where(nan, 0.0, _prod_grad(xp, _as_op(op, xp.where(nan, 1.0, x)), grad))


# --------------------------------------------------------------------------- nanmean, nanvar, nanstd
def _nanmean_forward(xp, x, *, axis, keepdims):
    return xp.sum(_filled(xp, x, 0), axis=axis, keepdims=keepdims) / _valid(xp, x, axis, keepdims)


_nanmean = defop(
    "nanmean",
    _nanmean_forward,
    chapter="nan_functions",
    floating=True,
    domain=_RED_CASES,
    convention="NaN entries get a zero gradient; all-NaN slices: NaN value, zero gradient",
    saves="inputs",
    batched=True,
)


@public(_nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    """Mean over ``axis`` of the non-NaN entries (``np.nanmean``; NaN for an all-NaN slice)."""
    a, axes = _prep(a, axis, dtype, out)
    return apply1(_nanmean, a, {"axis": axes, "keepdims": bool(keepdims)})


def _valid_count(xp, nan, x, axes):
    """The number of non-NaN entries of ``x`` (``nan``: its NaN mask) over ``axes`` (kept as size-1
    axes), and that number made at least 1."""
    n = xp.sum(xp.astype(xp.logical_not(nan), x.dtype), axis=axes, keepdims=True)
    return n, xp.maximum(n, 1.0)


@_nanmean.gradient
def _nanmean_grad(xp, op, grad):
    """grad / (the number of non-NaN entries) at the non-NaN entries, 0 at NaN."""
    x = op.inputs[0]
    nan = xp.isnan(x)
    _, n = _valid_count(xp, nan, x, op.attrs["axis"])
    return xp.where(nan, 0.0, _unreduce(xp, grad, op) / n)


def _centred(xp, x, axis):
    m = xp.sum(_filled(xp, x, 0), axis=axis, keepdims=True) / _valid(xp, x, axis, True)
    return _filled(xp, x - m, 0)


def _nanvar_forward(xp, x, *, axis, ddof, keepdims):
    c = _centred(xp, x, axis)
    n = _valid(xp, x, axis, keepdims) - ddof
    # NaN where no degrees of freedom are left, as NumPy's nanvar (dividing by 0 gave inf elsewhere)
    ok = n > 0
    v = xp.sum(c * c, axis=axis, keepdims=keepdims) / xp.where(ok, n, xp.ones_like(n))
    return xp.where(ok, v, xp.full_like(v, math.nan))


def _nanstd_forward(xp, x, *, axis, ddof, keepdims):
    v = _nanvar_forward(xp, x, axis=axis, ddof=ddof, keepdims=keepdims)
    pos = v > 0  # sqrt through a where: a library's own autodiff gives 0, not NaN, at v = 0
    return xp.where(pos, xp.sqrt(xp.where(pos, v, xp.ones_like(v))), v)


_VAR_CASES = _RED_CASES[:-1] + [Case(WITH_NAN[4, 3], axis=0, ddof=1)]
_nanvar = defop(
    "nanvar",
    _nanvar_forward,
    chapter="nan_functions",
    domain=_VAR_CASES,
    convention="NaN entries get a zero gradient; a zero cotangent gives 0 where the degrees of freedom are <= 0",
    saves="inputs",
    batched=True,
)
_nanstd = defop(
    "nanstd",
    _nanstd_forward,
    chapter="nan_functions",
    domain=_VAR_CASES,
    convention="NaN entries get a zero gradient; 0 at an entry equal to the mean (a "
    "slice of equal values); a zero cotangent gives 0 where the degrees of "
    "freedom are <= 0",
    saves=("inputs", "outputs"),
    batched=True,
)


@public(_nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """Variance over ``axis`` of the non-NaN entries, ``ddof`` degrees of freedom removed (``np.nanvar``)."""
    a, axes = _prep(a, axis, dtype, out)
    return apply1(_nanvar, a, {"axis": axes, "ddof": ddof, "keepdims": bool(keepdims)})


@public(_nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """Standard deviation over ``axis`` of the non-NaN entries (``np.nanstd``)."""
    a, axes = _prep(a, axis, dtype, out)
    return apply1(_nanstd, a, {"axis": axes, "ddof": ddof, "keepdims": bool(keepdims)})


def _nan_centred(xp, x, axes):
    """``x - nanmean(x)`` over ``axes``, 0 at NaN entries, and the count of non-NaN entries."""
    nan = xp.isnan(x)
    n, n1 = _valid_count(xp, nan, x, axes)
    filled = xp.where(nan, 0.0, x)
    m = xp.sum(filled, axis=axes, keepdims=True) / n1
    return xp.where(nan, 0.0, filled - m), n


@_nanvar.gradient
def _nanvar_grad(xp, op, grad):
    """d nanvar = 2 (x - nanmean(x)) / (n - ddof) dx over the non-NaN entries."""
    x = op.inputs[0]
    c, n = _nan_centred(xp, x, op.attrs["axis"])
    dof = n - op.attrs["ddof"]
    ok = dof > 0  # (else the variance is NaN, and so is its gradient at the non-NaN entries, not +-inf)
    d = xp.where(ok, c * (2.0 / xp.where(ok, dof, 1.0)), xp.where(xp.isnan(x), 0.0, xp.full_like(x, math.nan)))
    return xp.multiply_no_nan(d, _unreduce(xp, grad, op))


@_nanstd.gradient
def _nanstd_grad(xp, op, grad):
    """d nanstd = (x - nanmean(x)) / ((n - ddof) nanstd) dx over the non-NaN entries (0 at an entry
    equal to the mean: the subgradient 0 where every entry of the slice is equal)."""
    x = op.inputs[0]
    axes = op.attrs["axis"]
    c, n = _nan_centred(xp, x, axes)
    y = op.outputs[0]
    if not op.attrs["keepdims"]:
        y = xp.reshape(y, _keep_shape(x.shape, axes))
    flat = c == 0.0  # a slice of equal values (or one value): subgradient 0
    d = xp.where(flat, 0.0, c / xp.where(flat, 1.0, (n - op.attrs["ddof"]) * y))
    return xp.multiply_no_nan(d, _unreduce(xp, grad, op))


# --------------------------------------------------------------------------- nanmax, nanmin
def _nanext_forward(name, fill):
    def forward(xp, x, *, axis, keepdims):
        r = getattr(xp, name)(_filled(xp, x, fill), axis=axis, keepdims=keepdims)
        if not _is_float(xp, x):
            return r
        allnan = xp.all(xp.isnan(x), axis=axis, keepdims=keepdims)
        return xp.where(allnan, xp.full_like(r, math.nan), r)

    return forward


_nanmax = defop(
    "nanmax",
    _nanext_forward("max", -math.inf),
    chapter="nan_functions",
    domain=_RED_CASES,
    convention="NaN entries get a zero gradient; ties split the gradient evenly, as max",
    saves=("inputs", "outputs"),
    batched=True,
)
_nanmin = defop(
    "nanmin",
    _nanext_forward("min", math.inf),
    chapter="nan_functions",
    domain=_RED_CASES,
    convention="NaN entries get a zero gradient; ties split the gradient evenly, as min",
    saves=("inputs", "outputs"),
    batched=True,
)


@public(_nanmax)
def nanmax(a, axis=None, out=None, keepdims=False):
    """Maximum over ``axis`` ignoring NaN (``np.nanmax``; NaN for an all-NaN slice)."""
    a, axes = _prep(a, axis, None, out)
    return apply1(_nanmax, a, {"axis": axes, "keepdims": bool(keepdims)})


@public(_nanmin)
def nanmin(a, axis=None, out=None, keepdims=False):
    """Minimum over ``axis`` ignoring NaN (``np.nanmin``; NaN for an all-NaN slice)."""
    a, axes = _prep(a, axis, None, out)
    return apply1(_nanmin, a, {"axis": axes, "keepdims": bool(keepdims)})


def _nanext_grad(xp, op, grad):
    """The gradient goes to the entries equal to the extremum (never NaN ones), split evenly; an
    all-NaN slice gets 0."""
    return _minmax_grad(xp, op, grad, empty_gets_zero=True)


_nanmax.gradient(_nanext_grad)
_nanmin.gradient(_nanext_grad)


# --------------------------------------------------------------------------- nancumsum, nancumprod
_CUM_CASES = [Case(WITH_NAN[4]), Case(WITH_NAN[2, 3], axis=1), Case(WITH_NAN[3, 2], axis=0)]


def _nancumsum_forward(xp, x, *, axis):
    return xp.cumulative_sum(_filled(xp, x, 0), axis=axis)


def _nancumprod_forward(xp, x, *, axis):
    return _cumprod_forward(xp, _filled(xp, x, 1), axis=axis)


_nancumsum = defop(
    "nancumsum",
    _nancumsum_forward,
    chapter="nan_functions",
    domain=_CUM_CASES,
    convention="NaN entries get a zero gradient",
    saves="inputs",
    batched=True,
)
_nancumprod = defop(
    "nancumprod",
    _nancumprod_forward,
    chapter="nan_functions",
    domain=[Case(NONZERO_WITH_NAN[4]), Case(NONZERO_WITH_NAN[2, 3], axis=1)],
    convention="NaN entries get a zero gradient; exact with zeros, as cumulative_prod",
    saves=("inputs", "outputs"),
)


def _cum_prep(a, axis, dtype, out):
    a, _ = _prep(a, None, dtype, out)
    if axis is None:
        a = reshape(a, (-1,))
        axis = 0
    return a, {"axis": _axes(axis, a.ndim)[0]}


@public(_nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    """Cumulative sum along ``axis`` (None: of the flattened array), NaN counted as 0 (``np.nancumsum``)."""
    a, attrs = _cum_prep(a, axis, dtype, out)
    return apply1(_nancumsum, a, attrs)


@public(_nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    """Cumulative product along ``axis`` (None: of the flattened array), NaN counted as 1 (``np.nancumprod``)."""
    a, attrs = _cum_prep(a, axis, dtype, out)
    return apply1(_nancumprod, a, attrs)


@_nancumsum.gradient
def _nancumsum_grad(xp, op, grad):
    """The reversed cumulative sum of the gradient (the axis counted from the end: leading batch
    axes stay), 0 at the NaN entries."""
    x = op.inputs[0]
    return _masked(xp, x, _rev_cumsum(xp, grad, op.attrs["axis"] - x.ndim))


@_nancumprod.gradient
def _nancumprod_grad(xp, op, grad):
    """cumulative_prod's rule on x with NaN entries replaced by 1 (whose cumulative product is this
    op's output); 0 at those entries."""
    x = op.inputs[0]
    nan = xp.isnan(x)
    fake = _as_op(op, xp.where(nan, 1.0, x), op.outputs[0], include_initial=False)
    return xp.where(nan, 0.0, _cumprod_grad(xp, fake, grad))


# --------------------------------------------------------------------------- nanargmax, nanargmin
def _nanarg_forward(name, fill):
    def forward(xp, x, *, axis, keepdims):
        if _is_float(xp, x):
            if bool(xp.any(xp.all(xp.isnan(x), axis=axis))):
                raise ValueError("All-NaN slice encountered")
            x = _filled(xp, x, fill)
        if axis is None:
            r = getattr(xp, name)(xp.reshape(x, (-1,)))
            return xp.reshape(r, (1,) * x.ndim) if keepdims else r
        return getattr(xp, name)(x, axis=axis, keepdims=keepdims)

    return forward


_nanargmax = defop(
    "nanargmax",
    _nanarg_forward("argmax", -math.inf),
    chapter="nan_functions",
    differentiable=False,
    domain=[Case(WITH_NAN[4]), Case(WITH_NAN[2, 3], axis=1), Case(WITH_NAN[2, 3], axis=0, keepdims=True)],
)
_nanargmin = defop(
    "nanargmin",
    _nanarg_forward("argmin", math.inf),
    chapter="nan_functions",
    differentiable=False,
    domain=[Case(WITH_NAN[4]), Case(WITH_NAN[2, 3], axis=1), Case(WITH_NAN[2, 3], axis=0, keepdims=True)],
)


def _arg_axis(a, axis, out):
    a = a if isinstance(a, Tensor) else convert_to_tensor(a)
    if out is not None:
        raise TypeError("gradtape's nan-functions take no out=: use the result (y = gt.nansum(x, ...))")
    return a, None if axis is None else _axes(axis, a.ndim)[0]


@public(_nanargmax)
def nanargmax(a, axis=None, out=None, *, keepdims=False):
    """Index of the maximum ignoring NaN (``np.nanargmax``; ``ValueError`` for an all-NaN slice)."""
    a, ax = _arg_axis(a, axis, out)
    return apply1(_nanargmax, a, {"axis": ax, "keepdims": bool(keepdims)})


@public(_nanargmin)
def nanargmin(a, axis=None, out=None, *, keepdims=False):
    """Index of the minimum ignoring NaN (``np.nanargmin``; ``ValueError`` for an all-NaN slice)."""
    a, ax = _arg_axis(a, axis, out)
    return apply1(_nanargmin, a, {"axis": ax, "keepdims": bool(keepdims)})


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("reduction", _nansum, _nanprod, _nanmean, _nanvar, _nanstd, _nanmax, _nanmin)
batch_as("axis", _nancumsum, _nancumprod)
batch_as("flat_reduction", _nanargmax, _nanargmin)
