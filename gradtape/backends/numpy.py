"""The NumPy backend, gradtape's embedded default.  NumPy 2 follows the Array API standard
closely; ``array_api_compat.numpy`` fills the remaining gaps."""

from __future__ import annotations

import operator

import numpy as np

from gradtape.backends._masks import counted, unmasked_where_no_zero
from gradtape.backends._values import check_new_int, eager, itself, with_conventions
from gradtape.core.backend import Backend


def _reciprocal(x, /):
    """``1 / x``: NumPy's reciprocal of integers is integer division (1 // x); the standard's
    is floating, so an integer input is computed in float32, as gradtape's other backends do."""
    if x.dtype.kind in "biu":
        x = x.astype(np.float32)
    return np.reciprocal(x)


def _nan_function(name, *, same_dtype=True):
    """The op ``name`` (gt.nansum & co., chapter nan_functions) computed by NumPy's own ``np.<name>``,
    called as the op's forward is (``x``, then the attributes ``axis``, ``keepdims``, ``ddof`` by
    their NumPy names): an array, in ``x``'s dtype unless ``same_dtype`` is False (the arg-functions'
    indices).  NumPy warns for all-NaN slices, as it does."""
    fn = getattr(np, name)

    def forward(x, /, **attrs):
        out = fn(x, **attrs)
        return np.asarray(out, dtype=x.dtype) if same_dtype else np.asarray(out)

    forward.__name__ = forward.__qualname__ = name
    return forward


def _einsum(*arrays, subscripts):
    """The op ``einsum`` by NumPy's own (a contraction of several operands along its BLAS path)."""
    return np.einsum(subscripts, *arrays, optimize=len(arrays) > 1)


#: SciPy's special functions by name, as :meth:`NumpyBackend.special_function` hands them out
_SPECIAL: dict = {}


def _polygamma(sc):
    """``scipy.special.polygamma(n, x)`` in ``x``'s floating dtype (SciPy gives float64 for float32)."""

    def polygamma(n, x, /):
        out = np.asarray(sc.polygamma(n, x))
        return out.astype(x.dtype, copy=False) if x.dtype.kind == "f" else out

    return polygamma


def _sum(x, /, *, axis, keepdims=False):
    """``gt.sum``'s forward as ``np.add.reduce`` (the chapter's forward goes through
    array_api_compat's ``sum`` and ``np.sum``, two Python wrappers around the same reduction: a
    third of a small sum's time), in ``x``'s dtype as the chapter's forward gives it."""
    out = np.add.reduce(x, axis=axis, keepdims=keepdims)
    return out if out.dtype == x.dtype else out.astype(x.dtype)


#: the largest result (in elements) that ``broadcast_to`` fills rather than views
_BROADCAST_COPY_MAX = 4096


def _broadcast_to(x, /, shape):
    """``gt.broadcast_to``'s forward (and rules' ``xp.broadcast_to``: the gradient of every reduction)
    as a filled new array where the result is small: ``np.broadcast_to`` is a Python function of
    ~7 µs (an iterator built to check the shapes) where filling a small array costs ~1 µs.  The same
    values; a larger result stays NumPy's read-only view (no memory for the broadcast axes).  The
    view relations gradtape promises (docs/conventions.md, "Views") are its own, not NumPy's memory."""
    n = 1
    for d in shape:
        n *= d
    if (
        n > _BROADCAST_COPY_MAX
        or (x.__class__ is not np.ndarray and not isinstance(x, np.generic))  # (a reduction's 0-d: a scalar)
        or x.ndim > len(shape)
    ):
        return np.broadcast_to(x, shape)
    out = np.empty(shape, x.dtype)
    out[...] = x  # (the broadcasting rules of assignment: NumPy's ValueError where they fail)
    return out


#: ops computed by NumPy's own functions rather than by the chapter's Array API forward
_OVERRIDES = {
    "reciprocal": _reciprocal,
    "sum": _sum,
    "broadcast_to": _broadcast_to,
    **{
        name: _nan_function(name)
        for name in ("nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin", "nancumsum", "nancumprod")
    },
    "nanargmax": _nan_function("nanargmax", same_dtype=False),
    "nanargmin": _nan_function("nanargmin", same_dtype=False),
    "einsum": _einsum,
}


_size = operator.attrgetter("size")
#: the masks' zero test of a NumPy array (:func:`unmasked_where_no_zero`)
_ZEROS = counted(np.count_nonzero, _size)


#: elements per block of a scaled in-place update (64 KiB of float32: the product stays in cache)
_UPDATE_BLOCK = 1 << 14


class NumpyBackend(Backend):
    name = "numpy"
    install_hint = "pip install numpy"
    array_type = np.ndarray
    python_scalars = True

    def __init__(self):
        super().__init__()
        self.overrides = dict(_OVERRIDES)

    def op_impl(self, opdef):
        impl = with_conventions(self, opdef.name, super().op_impl(opdef), eager, division=False, host=itself)
        if opdef.name in self.overrides:
            return impl
        # the NaN-safe masks as the plain quotient / product where there is no zero to mask: a test of
        # the values, which NumPy's arrays answer at no cost
        unmasked = unmasked_where_no_zero(opdef.name, impl, np.ndarray, _ZEROS, np.zeros_like)
        return impl if unmasked is None else unmasked

    def load(self):
        import array_api_compat.numpy as xp

        return xp

    def _extra_dtype_aliases(self):
        for nd, d in list(self._from_native.items()):
            self._from_native[np.dtype(nd)] = d

    # ------------------------------------------------------------------ conversion
    def asarray(self, value, dtype=None, device=None):
        """Not the shared ``Backend.asarray``: the default backend's conversion is one type check
        (an ndarray of the asked dtype is returned as is) and ``np.asarray``, and Python scalars
        keep NumPy's default dtypes (gradtape's converters pass TensorFlow's explicitly)."""
        if device is not None:
            self.parse_device(device)
        nd = None if dtype is None else self.dtype_to_native(dtype)
        if type(value) is np.ndarray and (nd is None or value.dtype == nd):
            return value
        try:
            return np.asarray(value, dtype=nd)
        except OverflowError:
            check_new_int(self, value, nd)  # (NumPy's words for the int64 default lack the dtype)
            raise

    def update_inplace(self, name, x, delta, scale=None):
        # a view keeps its base alive (so the base's refcount shows it); x itself must own its data
        if (
            x.__class__ is np.ndarray
            and x.base is None
            and x.flags.writeable
            and delta.__class__ is np.ndarray
            and delta.dtype == x.dtype
        ):
            update = np.add if name == "add" else np.subtract
            if scale is None:
                update(x, delta, out=x)
                return True
            if scale.__class__ is not np.ndarray or scale.dtype != x.dtype or scale.ndim:
                return False
            if x.size <= _UPDATE_BLOCK or not (x.flags.c_contiguous and delta.flags.c_contiguous):
                update(x, np.multiply(delta, scale), out=x)
                return True
            # block by block through one small buffer (scaled_update's product and difference, the
            # same bits): no product of the variable's size, whose fresh pages cost more than the
            # arithmetic where the step's other arrays were just freed (glibc gives them back)
            flat, d = x.reshape(-1), delta.reshape(-1)
            buf = np.empty(_UPDATE_BLOCK, x.dtype)
            for i in range(0, flat.size, _UPDATE_BLOCK):
                part = flat[i : i + _UPDATE_BLOCK]
                t = buf[: part.size]
                np.multiply(d[i : i + _UPDATE_BLOCK], scale, out=t)
                update(part, t, out=part)
            return True
        return False

    def fix_output(self, out):
        # NumPy ufuncs return NumPy scalars for 0-d inputs; gradtape keeps 0-d arrays.
        return np.asarray(out)

    # ------------------------------------------------------------------ what the standard lacks
    def index_add(self, shape, dtype, key, values):
        out = np.zeros(shape, dtype=self.dtype_to_native(dtype))
        np.add.at(out, key, values)
        return out

    def setitem(self, x, key, value):
        out = x.copy()
        out[key] = value
        return out

    def special_function(self, name):
        """SciPy's ``scipy.special.<name>``, which computes on NumPy's arrays as they are (``polygamma``
        kept in its input's dtype, which SciPy computes float32 in float64); None where SciPy has no
        such function or is not installed (``gt.special`` then says what to install)."""
        try:
            return _SPECIAL[name]
        except KeyError:
            pass
        try:
            import scipy.special as sc  # (optional: imported on first use)
        except ImportError:
            return None
        f = _SPECIAL[name] = _polygamma(sc) if name == "polygamma" else getattr(sc, name, None)
        return f

    def erf(self, x):
        try:
            from scipy.special import erf
        except ImportError:  # pragma: no cover - scipy is optional
            return super().erf(x)
        return np.asarray(erf(x), dtype=x.dtype)
