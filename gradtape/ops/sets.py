"""Set functions (Array API standard, chapter "Set Functions").

The four ``unique_*`` functions return namedtuples with the standard's field names.  Their output
shapes depend on the data, so they run eagerly on every backend (JAX included: on concrete arrays).
Unique values come sorted; each NaN is distinct (NaN != NaN), signed zeros are one value;
``inverse_indices`` has the shape of ``x``; every index and count is int64, the default index dtype.
They are not differentiable (TensorFlow's ``Unique`` has no gradient either), and neither is
``isin`` (2025.12), membership by value equality (NaN is in nothing; -0.0 is 0.0).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gradtape.core.domains import INT, REAL, Case
from gradtape.ops import apply, defop, public
from gradtape.core.tensor import Tensor, convert_to_tensor

__all__ = ["isin", "unique_all", "unique_counts", "unique_inverse", "unique_values"]


class UniqueAllResult(NamedTuple):
    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCountsResult(NamedTuple):
    values: Tensor
    counts: Tensor


class UniqueInverseResult(NamedTuple):
    values: Tensor
    inverse_indices: Tensor


def _index(xp, a):
    return a if a.dtype == xp.int64 else xp.astype(a, xp.int64)


def _sort_order(xp, flat):
    """A stable sorting permutation of a 1-D array; complex numbers by real part, then imaginary
    part, those with a NaN part last (as NumPy; the standard does not order complex numbers)."""
    if flat.dtype in (xp.complex64, xp.complex128):
        perm = _index(xp, xp.argsort(xp.imag(flat), stable=True))
        perm = xp.take(perm, _index(xp, xp.argsort(xp.take(xp.real(flat), perm), stable=True)))
        nan = xp.astype(xp.isnan(xp.take(flat, perm)), xp.int8)  # values with a NaN part last
        return xp.take(perm, _index(xp, xp.argsort(nan, stable=True)))
    return _index(xp, xp.argsort(flat, stable=True))


def _unique_all_sorted(xp, x):
    """``unique_all`` from the standard's sort and search functions, for namespaces without one
    (array_api_compat's torch, or torch on complex numbers): a stable sort, then a new group wherever
    an element differs from the one before it (NaN != NaN, so each NaN is its own group; -0.0 == 0.0)."""
    unsigned = x.dtype in (xp.uint8, xp.uint16, xp.uint32, xp.uint64)
    if unsigned:  # (torch cannot index its wider unsigned types) int64 is a bijective stand-in
        values, indices, inverse, counts = _unique_all_sorted(xp, xp.astype(x, xp.int64))
        return xp.astype(values, x.dtype), indices, inverse, counts
    flat = xp.reshape(x, (-1,))
    n = flat.shape[0]
    perm = _sort_order(xp, flat)
    s = xp.take(flat, perm)
    dev = getattr(x, "device", None)
    if n == 0:
        empty = xp.zeros((0,), dtype=xp.int64, device=dev)
        return s, empty, xp.reshape(empty, x.shape), empty
    first = xp.ones((1,), dtype=xp.bool, device=dev)
    new = xp.concat([first, s[1:] != s[:-1]]) if n > 1 else first
    group = xp.cumulative_sum(xp.astype(new, xp.int64)) - 1
    starts = _index(xp, xp.nonzero(new)[0])
    ends = xp.concat([starts[1:], xp.asarray([n], dtype=xp.int64, device=dev)])
    inverse = xp.take(group, _index(xp, xp.argsort(perm)))
    return xp.take(s, starts), xp.take(perm, starts), xp.reshape(inverse, x.shape), ends - starts


_FALLBACK = (NotImplementedError, AttributeError, TypeError, RuntimeError)


def _unique_all_forward(xp, x):
    try:
        r = xp.unique_all(x)
    except _FALLBACK:
        return _unique_all_sorted(xp, x)
    return r[0], _index(xp, r[1]), _index(xp, r[2]), _index(xp, r[3])


def _unique_counts_forward(xp, x):
    try:
        r = xp.unique_counts(x)
    except _FALLBACK:
        r = _unique_all_sorted(xp, x)
        return r[0], r[3]
    return r[0], _index(xp, r[1])


def _unique_inverse_forward(xp, x):
    try:
        r = xp.unique_inverse(x)
    except _FALLBACK:
        r = _unique_all_sorted(xp, x)
        return r[0], r[2]
    return r[0], _index(xp, r[1])


def _unique_values_forward(xp, x):
    try:
        return xp.unique_values(x)
    except _FALLBACK:
        return _unique_all_sorted(xp, x)[0]


# integers drawn from [-3, 3] repeat (counts > 1, first occurrences matter); floats do not.  Two
# shapes only: JAX compiles its unique for each new shape, which takes seconds
_DOMAIN = [Case(INT[2, 5]), Case(REAL[4])]

_unique_all = defop("unique_all", _unique_all_forward, chapter="sets", differentiable=False, nout=4, domain=_DOMAIN)
_unique_counts = defop(
    "unique_counts", _unique_counts_forward, chapter="sets", differentiable=False, nout=2, domain=_DOMAIN
)
_unique_inverse = defop(
    "unique_inverse", _unique_inverse_forward, chapter="sets", differentiable=False, nout=2, domain=_DOMAIN
)
_unique_values = defop("unique_values", _unique_values_forward, chapter="sets", differentiable=False, domain=_DOMAIN)


def _tensor(x):
    return x if isinstance(x, Tensor) else convert_to_tensor(x)


@public(_unique_all)
def unique_all(x, /):
    """The unique elements of ``x`` (flattened, sorted), the index of each one's first occurrence,
    the indices that rebuild ``x`` from them (shaped like ``x``), and their counts."""
    return UniqueAllResult(*apply(_unique_all, (_tensor(x),)))


@public(_unique_counts)
def unique_counts(x, /):
    """The unique elements of ``x`` (flattened, sorted) and how often each occurs."""
    return UniqueCountsResult(*apply(_unique_counts, (_tensor(x),)))


@public(_unique_inverse)
def unique_inverse(x, /):
    """The unique elements of ``x`` (flattened, sorted) and the indices, shaped like ``x``, that
    rebuild ``x`` from them."""
    return UniqueInverseResult(*apply(_unique_inverse, (_tensor(x),)))


@public(_unique_values)
def unique_values(x, /):
    """The unique elements of ``x`` (flattened, sorted; each NaN distinct)."""
    return apply(_unique_values, (_tensor(x),))


# ---------------------------------------------------------------------------------------- isin
def _isin_sorted(xp, x1, x2, invert):
    """``isin`` from the standard's sort and search (namespaces without one: array_api_strict at
    2024.12): each element of ``x1`` is looked up in the sorted ``x2`` and compared with what it
    lands on; complex numbers, which have no order, are compared with every element of ``x2``."""
    if x1.dtype in (xp.uint8, xp.uint16, xp.uint32, xp.uint64):
        # (torch cannot sort or search its wider unsigned types) int64 is a bijective stand-in
        x1, x2 = xp.astype(x1, xp.int64), xp.astype(x2, xp.int64)
    flat = xp.reshape(x1, (-1,))
    pool = xp.reshape(x2, (-1,))
    n = pool.shape[0]
    if n == 0 or flat.shape[0] == 0:
        hit = xp.zeros(flat.shape, dtype=xp.bool, device=getattr(x1, "device", None))
    elif xp.isdtype(pool.dtype, "complex floating"):
        hit = xp.any(flat[:, None] == pool[None, :], axis=1)
    else:
        pool = xp.sort(pool)
        at = xp.clip(_index(xp, xp.searchsorted(pool, flat)), max=n - 1)
        hit = xp.take(pool, at) == flat
    hit = xp.reshape(hit, x1.shape)
    return xp.logical_not(hit) if invert else hit


def _isin_forward(xp, x1, x2, *, invert=False):
    try:
        # invert applied here: array_api_strict 2.6's isin ignores its invert argument
        hit = xp.isin(x1, x2)
    except _FALLBACK:
        return _isin_sorted(xp, x1, x2, invert)
    return xp.logical_not(hit) if invert else hit


_isin = defop(
    "isin",
    _isin_forward,
    chapter="sets",
    differentiable=False,
    promote=True,
    domain=[
        Case(INT[2, 5], INT[4]),
        Case(INT[3], INT[2, 2], invert=True),
        Case(INT[4], 1),
        Case(np.array([0.5, 1.0, -2.0, 0.0]), np.array([1.0, -0.0, 3.0])),
        Case(2, INT[3]),
    ],
)


@public(_isin)
def isin(x1, x2, /, *, invert=False):
    """Whether each element of ``x1`` equals some element of ``x2`` (``invert=True``: equals none);
    either may be a Python int (2025.12; a scalar ``x1`` gives a 0-d result; not differentiable)."""
    return apply(_isin, (x1, x2), {"invert": bool(invert)})
