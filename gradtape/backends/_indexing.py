"""NumPy's placement of advanced-index dimensions, for the libraries that place them otherwise.

NumPy counts every integer of a key as an advanced index once the key holds an array (or a Python
bool): ``x[3, 2:, [1, 3, 4]]`` has two advanced indices, separated by a slice, so the dimensions they
make come first (shape ``(3, 4)`` on a ``(5, 6, 7)`` array).  PyTorch and Dask apply the integers first,
as basic indices, and place the array's dimension where it was (``(4, 3)``); PyTorch also reads an
``Ellipsis`` that stands for no axis as no separator.  :func:`advanced_first` rewrites such a key into
one that means the same on every library: the axes the advanced indices consume are moved to the
front (``permute_dims``) and the advanced indices with them, where they are adjacent, so every
library places their dimensions first, as NumPy does.
"""

from __future__ import annotations

import builtins

__all__ = ["advanced_first", "check_in_bounds", "integer_arrays", "plain_slices"]


def check_in_bounds(host, size, axis, where=""):
    """NumPy's IndexError where the integer NumPy array ``host`` indexes outside an axis of ``size``
    (``where``: what the message adds after NumPy's words)."""
    bad = (host < -size) | (host >= size)
    if bad.any():
        raise IndexError(f"index {int(host[bad].ravel()[0])} is out of bounds for axis {axis} with size {size}{where}")


def integer_arrays(shape, key, is_array):
    """``(k, axis)`` for each integer index array ``k`` of a native key (a tuple of ints, slices,
    ``None``, ``Ellipsis``, Python bools and arrays) and the axis of ``shape`` it indexes, for the
    libraries that do not raise for an index out of bounds (CuPy wraps it around, JAX clamps it):
    their adapters check these.  ``is_array(k)``: whether the entry is one of the library's arrays."""
    arrays = [k for k in key if is_array(k)]
    if not any(k.dtype.kind != "b" for k in arrays):
        return []  # no integer array: the libraries check Python ints, slices need no check
    ndim = len(shape)
    used = builtins.sum(
        0
        if k is None or k is Ellipsis or k.__class__ is bool
        else (k.ndim if is_array(k) and k.dtype.kind == "b" else 1)
        for k in key
    )
    out = []
    axis = 0
    for k in key:
        if k is None or k.__class__ is bool:
            continue
        if k is Ellipsis:
            axis += max(ndim - used, 0)
            continue
        if is_array(k):
            if k.dtype.kind == "b":
                axis += k.ndim
                continue
            if axis < ndim and k.size:
                out.append((k, axis))
        axis += 1
    return out


def _axes_used(key, array_axes):
    """How many axes of the array each entry of ``key`` consumes (an ``Ellipsis``: 0 here, its share
    is what the others leave)."""
    used = []
    for k in key:
        c = k.__class__
        if k is None or c is bool or k is Ellipsis:
            used.append(0)
        elif c is int or c is slice:
            used.append(1)
        else:
            used.append(array_axes(k))
    return used


def advanced_first(key, ndim, is_array, array_axes):
    """``None`` where NumPy and a library that applies integers first agree on ``key`` (a tuple of
    a native key: ints, slices, ``None``, ``Ellipsis``, Python bools and arrays); else ``(perm, key2)``
    with ``x[key]`` (NumPy's meaning) equal to ``permute_dims(x, perm)[key2]`` on every library.

    ``is_array(k)``: whether the entry is an index array; ``array_axes(k)``: how many axes of ``x``
    an index array consumes (1 for integers, its rank for a mask)."""
    adv = []
    arrays = False
    for i, k in enumerate(key):
        c = k.__class__
        if c is int:
            adv.append(i)
        elif c is bool:
            adv.append(i)
            arrays = True
        elif c is not slice and k is not None and k is not Ellipsis and is_array(k):
            adv.append(i)
            arrays = True
    if not arrays or adv[-1] - adv[0] + 1 == len(adv):
        return None  # no advanced indexing, or its indices are adjacent: the libraries agree
    used = _axes_used(key, array_axes)
    rest = ndim - sum(used)
    axes = []
    start = 0
    for k, n in zip(key, used):
        if k is Ellipsis:
            n = rest
        axes.append(tuple(range(start, start + n)))
        start += n
    first = [a for i in adv for a in axes[i]]
    perm = tuple(first) + tuple(a for a in range(ndim) if a not in first)
    key2 = tuple(key[i] for i in adv) + tuple(k for i, k in enumerate(key) if i not in adv)
    return perm, key2


def plain_slices(key, shape, array_axes):
    """``key`` (a tuple) with each slice in its plain form for the axis it indexes: non-negative
    ``start`` and ``stop`` within the axis (``stop`` None where a negative step runs past the first
    element), so a library whose slicing of out-of-range or negative bounds differs from Python's
    (Dask with a negative step) reads it as NumPy does.  ``array_axes(k)``: how many axes an entry that
    is no int, slice, ``None``, ``Ellipsis`` or Python bool consumes."""
    used = _axes_used(key, array_axes)
    rest = len(shape) - sum(used)
    out = []
    axis = 0
    for k, n in zip(key, used):
        if k is Ellipsis:
            n = rest
        elif k.__class__ is slice:
            r = range(*k.indices(int(shape[axis])))
            if not len(r):
                k = slice(0, 0, 1)
            else:
                k = slice(r.start, r.stop if r.stop >= 0 else None, r.step)
        out.append(k)
        axis += n
    return tuple(out)
