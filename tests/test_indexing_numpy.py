"""Every backend indexes as NumPy does (issue 21, item 6): ``x[key]``, ``x[key] = v`` and the gradient
of ``x[key]`` give NumPy's shape and values, over random keys (hypothesis) that mix what the standard
allows and what NumPy allows beside it: ints, slices with negative steps, ``...``, ``None``, integer
arrays (broadcasting against each other), boolean masks of one or more axes, Python bools.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import gradtape as gt

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)

# integer arrays' shapes: any two of them broadcast
_INT_SHAPES = [(), (1,), (3,), (2, 1), (2, 3)]


@st.composite
def shapes(draw):
    return tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))


@st.composite
def _entries(draw, shape, lo, hi, state):
    """Entries that index the axes ``lo`` to ``hi`` of ``shape``, one after the other."""
    entries = []
    axis = lo
    while axis < hi:
        s = shape[axis]
        kinds = ["int", "slice", "slice", "intarr"]
        if not state["mask"] and not state["arrays"]:
            kinds.append("mask")
        kind = draw(st.sampled_from(kinds))
        if kind == "int":
            entries.append(draw(st.integers(-s, s - 1)))
            axis += 1
        elif kind == "slice":
            step = draw(st.sampled_from([None, 1, 2, -1, -2, 3]))
            start = draw(st.one_of(st.none(), st.integers(-s - 1, s + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-s - 1, s + 1)))
            entries.append(slice(start, stop, step))
            axis += 1
        elif kind == "intarr":  # (beside a mask, only shapes that broadcast with any length)
            ishape = draw(st.sampled_from([(), (1,)] if state["mask"] else _INT_SHAPES))
            n = int(np.prod(ishape))
            values = draw(st.lists(st.integers(-s, s - 1), min_size=n, max_size=n))
            entries.append(np.array(values, dtype=np.int64).reshape(ishape))
            state["arrays"] = True
            axis += 1
        else:  # a mask over one or two axes
            k = draw(st.integers(1, min(2, hi - axis)))
            mshape = shape[axis : axis + k]
            n = int(np.prod(mshape))
            entries.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool).reshape(mshape))
            state["mask"] = True
            axis += k
    return entries


@st.composite
def keys(draw, shape):
    """A key for an array of ``shape``: entries for its first axes, then (sometimes) an Ellipsis for
    some axes and entries for the axes after them, or fewer axes than the shape has; ``None``
    entries anywhere."""
    nd = len(shape)
    state = {"mask": False, "arrays": False}
    head = draw(st.integers(0, nd))
    entries = draw(_entries(shape, 0, head, state))
    if draw(st.booleans()):  # an Ellipsis for the axes head..tail (maybe none)
        tail = draw(st.integers(head, nd))
        entries += [Ellipsis] + draw(_entries(shape, tail, nd, state))
    for _ in range(draw(st.integers(0, 2))):  # None, or (NumPy's 0-d mask) a Python bool
        entries.insert(draw(st.integers(0, len(entries))), draw(st.sampled_from([None, None, True, False])))
    return tuple(entries)


def _as_gt_key(key, lazy, as_tensors):
    """The key with its NumPy arrays as gradtape tensors (some of the time; never a mask on a lazy
    backend, whose result shape would depend on the data)."""
    if not as_tensors:
        return key
    return tuple(gt.asarray(k) if isinstance(k, np.ndarray) and not (lazy and k.dtype == bool) else k for k in key)


def _case(data):
    shape = data.draw(shapes(), label="shape")
    key = data.draw(keys(shape), label="key")
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) - 3.0
    try:
        a[key]
    except IndexError:  # integer arrays that do not broadcast beside a mask's length
        assume(False)
    return a, key, data.draw(st.booleans(), label="tensor indices")


def _positions(a, key):
    """For each element ``a[key]`` selects, its flat position in ``a``."""
    return np.arange(a.size).reshape(a.shape)[key]


@SETTINGS
@given(data=st.data())
def test_getitem_is_numpy(backend, data):
    a, key, as_tensors = _case(data)
    want = np.asarray(a[key])
    x = gt.asarray(a)
    got = x[_as_gt_key(key, gt.get_backend().lazy, as_tensors)]
    assert got.shape == want.shape, (key, got.shape, want.shape)
    np.testing.assert_array_equal(got.numpy(), want)


@SETTINGS
@given(data=st.data())
def test_setitem_is_numpy(backend, data):
    a, key, as_tensors = _case(data)
    pos = _positions(a, key)
    if np.unique(pos).size != pos.size:  # repeated positions: a scalar (the order of writes is open)
        value = np.float64(100.0)
    else:
        value = 100.0 + np.arange(pos.size, dtype=np.float64).reshape(pos.shape)
    want = a.copy()
    want[key] = value
    x = gt.asarray(a)
    x[_as_gt_key(key, gt.get_backend().lazy, as_tensors)] = value if value.ndim == 0 else gt.asarray(value)
    np.testing.assert_array_equal(x.numpy(), want)


@SETTINGS
@given(data=st.data())
def test_getitem_gradient_is_numpy(backend, data):
    a, key, as_tensors = _case(data)
    pos = _positions(a, key)
    w = np.linspace(-1.0, 2.0, pos.size).reshape(pos.shape)
    want = np.zeros(a.size)
    np.add.at(want, pos.reshape(-1), w.reshape(-1))  # repeated positions add up
    x = gt.asarray(a)
    with gt.GradientTape() as tape:
        tape.watch(x)
        loss = gt.sum(x[_as_gt_key(key, gt.get_backend().lazy, as_tensors)] * gt.asarray(w))
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), want.reshape(a.shape), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "key",
    [
        (3, slice(2, None), [1, 3, 4]),  # the issue's: ints are advanced indices beside an array
        (0, slice(None), np.array([True, False, True, True, False, True, False])),
        (slice(None), [1, 2], Ellipsis, [0, 3]),  # an Ellipsis of no axes still separates them
        (slice(None), 0, None, [1, 2]),
        (np.array([[0], [4]]), slice(None, None, -2), [6, 0, 1]),
    ],
)
def test_advanced_indices_apart_come_first(backend, key):
    """NumPy places the dimensions of advanced indices (integers included, once an array is in the
    key) first where something stands between them; torch and dask applied the integers first."""
    a = np.arange(210.0).reshape(5, 6, 7)
    want = a[key]
    got = gt.asarray(a)[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
    x = gt.asarray(a)
    x[key] = -1.0
    b = a.copy()
    b[key] = -1.0
    np.testing.assert_array_equal(x.numpy(), b)
