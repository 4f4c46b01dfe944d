"""The TensorFlow names a TF user still missed (session 16): ``gt.split``, ``gt.pad``, one-argument
``gt.where``, ``gt.gather_nd``, ``gt.tensor_scatter_nd_update`` / ``_add``, ``gt.math.segment_*`` and
``unsorted_segment_*``, ``x.shape.as_list()`` / ``.rank`` / ``.num_elements()``, ``reduce_max`` of an
empty tensor, ``Variable(constraint=...)`` and ``Variable.scatter_update`` / ``_add`` / ``_sub``.

Values, dtypes, errors and gradients against TensorFlow 2.21's (recorded below as literals: the tests
never import TensorFlow), and gradients against central finite differences in float64, on every
backend.  Every gradient here is of ``sum(out * w)`` with ``w = 1, 2, 3, ...`` in the output's shape
(TF's numbers were computed with the same weights)."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt
from gradtape.testing import numeric_gradient


def c64(a):
    return gt.constant(np.asarray(a, dtype=np.float64))


def value(t):
    return None if t is None else np.asarray(t.numpy())


def _loss(out):
    outs = out if isinstance(out, (list, tuple)) else [out]
    total = 0.0
    for o in outs:
        n = int(np.prod(o.shape))
        w = c64(np.arange(1, n + 1, dtype=np.float64).reshape(o.shape))
        total = total + gt.sum(o * w)
    return total


def grads(f, *arrays):
    """``f(*tensors)`` and the tape's gradient of ``sum(out * w)`` for each float64 input."""
    xs = [c64(a) for a in arrays]
    with gt.GradientTape() as tape:
        for x in xs:
            tape.watch(x)
        out = f(*xs)
        loss = _loss(out)
    return out, tape.gradient(loss, xs)


def check(f, arrays, want_out, want_grads):
    """The output and the gradients equal TF's, and the gradients central finite differences."""
    out, got = grads(f, *arrays)
    outs = out if isinstance(out, (list, tuple)) else [out]
    wants = want_out if isinstance(out, (list, tuple)) else [want_out]
    assert len(outs) == len(wants)
    for o, w in zip(outs, wants):
        np.testing.assert_array_equal(value(o), np.asarray(w, dtype=np.float64).reshape(o.shape))
    for g, w in zip(got, want_grads):
        np.testing.assert_allclose(value(g), w, rtol=1e-12, atol=1e-12)
    numeric = numeric_gradient(lambda *a: float(_loss(f(*[c64(x) for x in a]))), [np.asarray(a) for a in arrays])
    for g, n in zip(got, numeric):
        np.testing.assert_allclose(value(g), n, rtol=1e-6, atol=1e-7)


X34 = np.arange(12.0).reshape(3, 4)
X23 = np.arange(1.0, 7.0).reshape(2, 3)


# --------------------------------------------------------------------------- split
def test_split_values_and_gradient(backend):
    # (TensorFlow 2.21)
    check(
        lambda x: gt.split(x, 2, axis=1),
        [X34],
        [[[0.0, 1.0], [4.0, 5.0], [8.0, 9.0]], [[2.0, 3.0], [6.0, 7.0], [10.0, 11.0]]],
        [[[1.0, 2.0, 1.0, 2.0], [3.0, 4.0, 3.0, 4.0], [5.0, 6.0, 5.0, 6.0]]],
    )
    check(
        lambda x: gt.split(x, [1, -1, 1], axis=1),
        [X34],
        [[[0.0], [4.0], [8.0]], [[1.0, 2.0], [5.0, 6.0], [9.0, 10.0]], [[3.0], [7.0], [11.0]]],
        [[[1.0, 1.0, 2.0, 1.0], [2.0, 3.0, 4.0, 2.0], [3.0, 5.0, 6.0, 3.0]]],
    )
    pieces = gt.split(c64(X34), [0, 3])
    assert isinstance(pieces, list) and [p.shape for p in pieces] == [(0, 4), (3, 4)]
    assert [p.shape for p in gt.split(c64(X34), 4, axis=-1)] == [(3, 1)] * 4
    assert [p.shape for p in gt.split(c64(X34), 3, num=3)] == [(1, 4)] * 3


def test_split_errors(backend):
    x = c64(X34)
    # TensorFlow 2.21: InvalidArgumentError "Number of ways to split should evenly divide the split dimension"
    with pytest.raises(ValueError, match=r"split: 3 pieces do not evenly divide axis 1 of size 4"):
        gt.split(x, 3, axis=1)
    # TensorFlow 2.21: InvalidArgumentError "Determined shape must either match input shape along split_dim"
    with pytest.raises(ValueError, match=r"split: sizes \[1, 1\] do not add up to axis 1's size 4"):
        gt.split(x, [1, 1], axis=1)
    # TensorFlow 2.21: InvalidArgumentError "There can only be one -1 in the input."
    with pytest.raises(ValueError, match=r"only one -1"):
        gt.split(x, [-1, -1, 2], axis=1)
    # TensorFlow 2.21: InvalidArgumentError "-input rank(-2) <= split_dim < input rank (2), but got 2"
    with pytest.raises(ValueError, match=r"split: axis 2 is out of range"):
        gt.split(x, 2, axis=2)


# --------------------------------------------------------------------------- pad
# (TensorFlow 2.21: tf.pad(x, [[1, 1], [2, 2]], mode=...) of X23 and its gradient)
PADDED = {
    "CONSTANT": (
        [[0, 0, 0, 0, 0, 0, 0], [0, 0, 1, 2, 3, 0, 0], [0, 0, 4, 5, 6, 0, 0], [0, 0, 0, 0, 0, 0, 0]],
        [[10.0, 11.0, 12.0], [17.0, 18.0, 19.0]],
    ),
    "REFLECT": (
        [[6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1], [6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1]],
        [[76.0, 108.0, 68.0], [48.0, 66.0, 40.0]],
    ),
    "SYMMETRIC": (
        [[2, 1, 1, 2, 3, 3, 2], [2, 1, 1, 2, 3, 3, 2], [5, 4, 4, 5, 6, 6, 5], [5, 4, 4, 5, 6, 6, 5]],
        [[24.0, 45.0, 36.0], [80.0, 129.0, 92.0]],
    ),
}


@pytest.mark.parametrize("mode", sorted(PADDED))
def test_pad_values_and_gradient(backend, mode):
    out, grad = PADDED[mode]
    check(lambda x: gt.pad(x, [[1, 1], [2, 2]], mode=mode), [X23], out, [grad])
    check(lambda x: gt.pad(x, [[1, 1], [2, 2]], mode=mode.lower()), [X23], out, [grad])  # (TF: any case)


def test_pad_constant_values_and_dtype(backend):
    # (TensorFlow 2.21)
    y = gt.pad(c64(X23), [[0, 1], [1, 0]], constant_values=9)
    np.testing.assert_array_equal(value(y), [[9.0, 1.0, 2.0, 3.0], [9.0, 4.0, 5.0, 6.0], [9.0, 9.0, 9.0, 9.0]])
    assert y.dtype == gt.float64
    y = gt.pad(gt.constant([1, 2], dtype=gt.int32), [[1, 2]])
    assert y.dtype == gt.int32 and value(y).tolist() == [0, 1, 2, 0, 0]
    x = c64(X23)
    assert gt.pad(x, [[0, 0], [0, 0]]) is x
    assert gt.pad(x, gt.constant([[1, 0], [0, 0]])).shape == (3, 3)


def test_pad_errors(backend):
    x = c64(X23)
    # TensorFlow 2.21: InvalidArgumentError "paddings must be less than the dimension size: 2, 2 not less than 2"
    with pytest.raises(ValueError, match=r"pad: REFLECT paddings \[2, 2\] of axis 0 must be less than its size 2"):
        gt.pad(x, [[2, 2], [0, 0]], mode="REFLECT")
    # TensorFlow 2.21: InvalidArgumentError "paddings must be no greater than the dimension size: 3, 0 greater than 2"
    with pytest.raises(ValueError, match=r"pad: SYMMETRIC paddings \[3, 0\] of axis 0 must be at most its size 2"):
        gt.pad(x, [[3, 0], [0, 0]], mode="SYMMETRIC")
    assert gt.pad(x, [[2, 0], [0, 0]], mode="SYMMETRIC").shape == (4, 3)
    # TensorFlow 2.21: InvalidArgumentError "The first dimension of paddings must be the rank of inputs"
    with pytest.raises(ValueError, match=r"pad: paddings must have shape \[rank, 2\] = \[2, 2\]"):
        gt.pad(x, [[1, 1]])
    # TensorFlow 2.21: ValueError 'Value of argument `mode` expected to be one of "CONSTANT", ...'
    with pytest.raises(ValueError, match=r'pad: mode must be one of "CONSTANT", "REFLECT", or "SYMMETRIC"'):
        gt.pad(x, [[1, 1], [1, 1]], mode="WRAP")
    # TensorFlow 2.21: InvalidArgumentError "Paddings must be non-negative: -1 1"
    with pytest.raises(ValueError, match=r"pad: paddings must be non-negative, got \[-1, 1\] for axis 0"):
        gt.pad(x, [[-1, 1], [1, 1]])


# --------------------------------------------------------------------------- where(condition)
def test_where_one_argument(backend):
    # (TensorFlow 2.21: int64 indices of the true elements, shape [n, rank], row-major)
    r = gt.where(gt.constant([[True, False, True], [False, False, True]]))
    assert r.dtype == gt.int64 and r.backend == backend
    assert value(r).tolist() == [[0, 0], [0, 2], [1, 2]]
    assert value(gt.where(gt.constant([0.0, 1.0, 2.0]))).tolist() == [[1], [2]]  # non-zero numbers are true
    assert value(gt.where(gt.zeros([2, 0]) > 0)).shape == (0, 2)
    r = value(gt.where(gt.ones([2, 2, 3]) > 0))
    assert r.shape == (12, 3) and r[-1].tolist() == [1, 1, 2] and r[5].tolist() == [0, 1, 2]
    # the three-argument where is unchanged
    assert value(gt.where(gt.constant([True, False]), 1.0, 2.0)).tolist() == [1.0, 2.0]


def test_where_one_argument_errors(backend):
    # TensorFlow 2.21: InvalidArgumentError "WhereOp : Unhandled input dimensions: 0"
    with pytest.raises(ValueError, match=r"where: .*0-d condition"):
        gt.where(gt.constant(True))
    # TensorFlow 2.21: ValueError "x and y must both be non-None or both be None."
    with pytest.raises(ValueError, match=r"where: x1 and x2 must both be given .* or both be omitted"):
        gt.where(gt.constant([True]), gt.constant([1.0]))


# --------------------------------------------------------------------------- gather_nd
P234 = np.arange(24.0).reshape(2, 3, 4)
# (TensorFlow 2.21: tf.gather_nd(P234, indices, batch_dims), its shape, values and gradient)
GATHER_ND = [
    (
        [[0, 1], [1, 2], [0, 1]],
        0,
        [[4, 5, 6, 7], [20, 21, 22, 23], [4, 5, 6, 7]],
        [[[0, 0, 0, 0], [10, 12, 14, 16], [0, 0, 0, 0]], [[0, 0, 0, 0], [0, 0, 0, 0], [5, 6, 7, 8]]],
    ),
    ([[0, 1, 2]], 0, [6.0], [[[0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]], [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]]),
    (
        [[[0, 1]], [[1, 0]]],
        0,
        [[[4, 5, 6, 7]], [[12, 13, 14, 15]]],
        [[[0, 0, 0, 0], [1, 2, 3, 4], [0, 0, 0, 0]], [[5, 6, 7, 8], [0, 0, 0, 0], [0, 0, 0, 0]]],
    ),
    (
        [[1], [2]],
        1,
        [[4, 5, 6, 7], [20, 21, 22, 23]],
        [[[0, 0, 0, 0], [1, 2, 3, 4], [0, 0, 0, 0]], [[0, 0, 0, 0], [0, 0, 0, 0], [5, 6, 7, 8]]],
    ),
    (
        [[[1, 2]], [[0, 3]]],
        1,
        [[6.0], [15.0]],
        [[[0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]], [[0, 0, 0, 2], [0, 0, 0, 0], [0, 0, 0, 0]]],
    ),
]


@pytest.mark.parametrize("case", range(len(GATHER_ND)))
def test_gather_nd_values_and_gradient(backend, case):
    indices, batch_dims, out, grad = GATHER_ND[case]
    check(lambda p: gt.gather_nd(p, indices, batch_dims=batch_dims), [P234], out, [grad])
    # the same with the indices a tensor (int32 or int64) of the backend
    for dt in (gt.int32, gt.int64):
        y = gt.gather_nd(c64(P234), gt.constant(indices, dtype=dt), batch_dims)
        np.testing.assert_array_equal(value(y), np.asarray(out, dtype=np.float64).reshape(y.shape))
    # (TensorFlow 2.21: rows as the whole of params' first axis: a slice each)
    y = gt.gather_nd(c64(P234), [[1], [0]])
    assert y.shape == (2, 3, 4) and value(y)[0, 0].tolist() == [12.0, 13.0, 14.0, 15.0]


def test_gather_nd_errors(backend):
    p = c64(P234)
    # TensorFlow 2.21: InvalidArgumentError "indices[0] = [2, 0] does not index into param shape [2,3,4]"
    with pytest.raises(IndexError, match=r"gather_nd: indices\[0\] = \[2, 0\] does not index into shape \[2, 3, 4\]"):
        gt.gather_nd(p, [[2, 0]])
    with pytest.raises(IndexError, match=r"does not index"):  # (TF: negative positions too, not from the end)
        gt.gather_nd(p, [[-1, 0]])
    # TensorFlow 2.21: "Value for attr 'Tindices' of float is not in the list of allowed values"
    with pytest.raises(TypeError, match=r"gather_nd: indices must be integers, not float64"):
        gt.gather_nd(p, [[0.5, 0.0]])
    with pytest.raises(ValueError, match=r"gather_nd: indices' last axis has 4 positions"):
        gt.gather_nd(p, [[0, 0, 0, 0]])
    with pytest.raises(ValueError, match=r"gather_nd: batch_dims=1 needs params and indices to share"):
        gt.gather_nd(p, [[0], [1], [0]], batch_dims=1)


# --------------------------------------------------------------------------- tensor_scatter_nd_*
T8 = np.arange(8.0)
U4 = np.array([9.0, 10.0, 11.0, 12.0])


def test_tensor_scatter_nd_update_values_and_gradient(backend):
    # (TensorFlow 2.21)
    check(
        lambda t, u: gt.tensor_scatter_nd_update(t, [[4], [3], [1], [7]], u),
        [T8, U4],
        [0.0, 11.0, 2.0, 10.0, 9.0, 5.0, 6.0, 12.0],
        [[1.0, 0.0, 3.0, 0.0, 0.0, 6.0, 7.0, 0.0], [5.0, 4.0, 2.0, 8.0]],
    )
    check(
        lambda t, u: gt.tensor_scatter_nd_update(t, [[0], [2]], u),
        [np.zeros((4, 3)), np.arange(6.0).reshape(2, 3)],
        [[0.0, 1.0, 2.0], [0.0, 0.0, 0.0], [3.0, 4.0, 5.0], [0.0, 0.0, 0.0]],
        [[[0, 0, 0], [4, 5, 6], [0, 0, 0], [10, 11, 12]], [[1, 2, 3], [7, 8, 9]]],
    )
    t = c64(T8)
    y = gt.tensor_scatter_nd_update(t, [[0]], [5.0])
    assert value(t)[0] == 0.0 and value(y)[0] == 5.0  # a new tensor: the input is unchanged


def test_tensor_scatter_nd_add_values_and_gradient(backend):
    # (TensorFlow 2.21: repeated positions accumulate)
    check(
        lambda t, u: gt.tensor_scatter_nd_add(t, [[4], [3], [4], [7]], u),
        [T8, U4],
        [0.0, 1.0, 2.0, 13.0, 24.0, 5.0, 6.0, 19.0],
        [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [5.0, 4.0, 5.0, 8.0]],
    )
    check(
        lambda t, u: gt.tensor_scatter_nd_add(t, [[0, 1], [2, 2]], u),
        [np.zeros((4, 3)), np.array([5.0, 6.0])],
        [[0.0, 5.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 6.0], [0.0, 0.0, 0.0]],
        [[[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]], [2.0, 9.0]],
    )
    y = gt.tensor_scatter_nd_add(gt.constant([1, 2, 3], dtype=gt.int32), gt.constant([[0], [0]]), [5, 5])
    assert y.dtype == gt.int32 and value(y).tolist() == [11, 2, 3]


@pytest.mark.parametrize("fn", ["tensor_scatter_nd_update", "tensor_scatter_nd_add"])
def test_tensor_scatter_nd_errors(backend, fn):
    t = c64(T8)
    # TensorFlow 2.21: InvalidArgumentError "indices[0] = [8] does not index into shape [8]"
    with pytest.raises(IndexError, match=rf"{fn}: indices\[0\] = \[8\] does not index into shape \[8\]"):
        getattr(gt, fn)(t, [[8]], [1.0])
    # TensorFlow 2.21: InvalidArgumentError "Outer dimensions of indices and update must match"
    with pytest.raises(ValueError, match=rf"{fn}: updates must have shape .* = \(1,\)"):
        getattr(gt, fn)(t, [[1]], [1.0, 2.0])


# --------------------------------------------------------------------------- segment reductions
D52 = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]])
LOWEST = -1.7976931348623157e308
# (TensorFlow 2.21: values and gradients of tf.math.segment_*(D52, [0, 0, 1, 3, 3]) and
# tf.math.unsorted_segment_*(D52, [2, 0, 2, -1, 0], 4): a negative id drops its row)
SEGMENTS = {
    "segment_sum": (
        [[4, 6], [5, 6], [0, 0], [16, 18]],
        [[1, 2], [1, 2], [3, 4], [7, 8], [7, 8]],
    ),
    "segment_mean": (
        [[2, 3], [5, 6], [0, 0], [8, 9]],
        [[0.5, 1], [0.5, 1], [3, 4], [3.5, 4], [3.5, 4]],
    ),
    "segment_max": (
        [[3, 4], [5, 6], [0, 0], [9, 10]],
        [[0, 0], [1, 2], [3, 4], [0, 0], [7, 8]],
    ),
    "segment_min": (
        [[1, 2], [5, 6], [0, 0], [7, 8]],
        [[1, 2], [0, 0], [3, 4], [7, 8], [0, 0]],
    ),
    "unsorted_segment_sum": (
        [[12, 14], [0, 0], [6, 8], [0, 0]],
        [[5, 6], [1, 2], [5, 6], [0, 0], [1, 2]],
    ),
    "unsorted_segment_mean": (
        [[6, 7], [0, 0], [3, 4], [0, 0]],
        [[2.5, 3], [0.5, 1], [2.5, 3], [0, 0], [0.5, 1]],
    ),
    "unsorted_segment_max": (
        [[9, 10], [LOWEST, LOWEST], [5, 6], [LOWEST, LOWEST]],
        [[0, 0], [0, 0], [5, 6], [0, 0], [1, 2]],
    ),
    "unsorted_segment_min": (
        [[3, 4], [-LOWEST, -LOWEST], [1, 2], [-LOWEST, -LOWEST]],
        [[5, 6], [1, 2], [0, 0], [0, 0], [0, 0]],
    ),
}


# (the loss weighs an empty segment's finfo.max: it overflows to inf, the gradient stays finite)
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(SEGMENTS))
def test_segment_reductions(backend, name):
    out, grad = SEGMENTS[name]
    fn = getattr(gt.math, name)
    args = ([0, 0, 1, 3, 3],) if name.startswith("segment") else ([2, 0, 2, -1, 0], 4)
    got, (g,) = grads(lambda d: fn(d, *args), D52)
    np.testing.assert_array_equal(value(got), out)
    np.testing.assert_array_equal(value(g), grad)
    # finite differences where every segment has rows (an empty one's max is finfo.max: no difference)
    args = ([0, 0, 1, 2, 2],) if name.startswith("segment") else ([2, 0, 2, -1, 1], 3)
    _, (g,) = grads(lambda d: fn(d, *args), D52 * np.array([1.0, -1.3]))
    (n,) = numeric_gradient(lambda d: float(_loss(fn(c64(d), *args))), [D52 * np.array([1.0, -1.3])])
    np.testing.assert_allclose(value(g), n, rtol=1e-6, atol=1e-7)
    # ids as a tensor of the backend
    if name.startswith("unsorted"):
        np.testing.assert_array_equal(value(fn(c64(D52), gt.constant([2, 0, 2, -1, 0]), gt.constant(4))), out)
    else:
        np.testing.assert_array_equal(value(fn(c64(D52), gt.constant([0, 0, 1, 3, 3], dtype=gt.int32))), out)


def test_segment_ties_share_the_gradient(backend):
    # (TensorFlow 2.21: ties share the gradient evenly)
    x = [3.0, 3.0, 1.0, 2.0, 2.0]
    for got in (
        grads(lambda d: gt.math.segment_max(d, [0, 0, 0, 1, 1]), x),
        grads(lambda d: gt.math.unsorted_segment_max(d, [0, 0, 0, 1, 1], 2), x),
    ):
        out, (g,) = got
        assert value(out).tolist() == [3.0, 2.0]
        assert value(g).tolist() == [0.5, 0.5, 0.0, 1.0, 1.0]


def test_segment_dtypes_and_shapes(backend):
    # (TensorFlow 2.21)
    y = gt.math.unsorted_segment_sum(gt.constant([1, 2, 3], dtype=gt.int32), [0, 1, 0], 2)
    assert y.dtype == gt.int32 and value(y).tolist() == [4, 2]
    y = gt.math.unsorted_segment_sum(c64(np.arange(6.0).reshape(2, 3)), [[0, 1, 1], [2, 0, 2]], 3)
    assert value(y).tolist() == [4.0, 3.0, 8.0]
    assert value(gt.math.segment_sum(c64(D52), [0, 0, 2, 2, 2])).tolist() == [[4, 6], [0, 0], [21, 24]]
    y = gt.math.segment_max(gt.constant([[1, 5], [3, 2]], dtype=gt.int32), [0, 0])
    assert y.dtype == gt.int32 and value(y).tolist() == [[3, 5]]
    assert gt.math.segment_sum(gt.constant([1.0, 2.0]), [0, 1]).dtype == gt.float32


def test_segment_errors(backend):
    d = c64(D52)
    # TensorFlow 2.21: InvalidArgumentError "segment ids are not increasing"
    with pytest.raises(ValueError, match=r"segment_sum: segment ids must be non-negative and increasing"):
        gt.math.segment_sum(d, [1, 0, 0, 1, 1])
    # TensorFlow 2.21: InvalidArgumentError "segment_ids[3] = 3 is out of range [0, 2)"
    with pytest.raises(
        ValueError, match=r"unsorted_segment_sum: segment_ids\[3\] \(flat\) = 3 is out of range \[0, 2\)"
    ):
        gt.math.unsorted_segment_sum(d, [0, 0, 1, 3, 3], 2)
    # TensorFlow 2.21: InvalidArgumentError "segment_ids should be the same size as dimension 0 of input."
    with pytest.raises(ValueError, match=r"segment_mean: segment_ids \(shape \(3,\)\) must be a vector as long"):
        gt.math.segment_mean(d, [0, 0, 1])
    with pytest.raises(TypeError, match=r"segment_max: segment_ids must be integers"):
        gt.math.segment_max(d, [0.0, 0, 1, 1, 1])


# --------------------------------------------------------------------------- x.shape
def test_shape_is_a_tuple_with_tensorshape_methods(backend):
    # (TensorFlow 2.21: x.shape.as_list() == [3, 4], .rank == 2, .num_elements() == 12; of a scalar
    # [], 0 and 1)
    x = gt.zeros([3, 4])
    s = x.shape
    assert isinstance(s, tuple) and isinstance(s, gt.TensorShape)  # the standard's tuple
    assert s == (3, 4) and tuple(s) == (3, 4) and hash(s) == hash((3, 4)) and s[0] == 3 and len(s) == 2
    assert s.as_list() == [3, 4] and type(s.as_list()[0]) is int
    assert s.rank == 2 and s.ndims == 2 and s.num_elements() == 12 and s.is_fully_defined()
    scalar = gt.constant(1.0).shape
    assert scalar.as_list() == [] and scalar.rank == 0 and scalar.num_elements() == 1
    assert gt.zeros([2, 0]).shape.num_elements() == 0
    assert gt.Variable(gt.zeros([2, 5])).shape.as_list() == [2, 5]
    rows, cols = s
    assert (rows, cols) == (3, 4) and repr(s) == "(3, 4)"


def test_shape_of_unknown_length(backend):
    # a length that depends on the data: dask's is NaN until computed, TF's None
    w = gt.where(gt.constant([True, False, True]))
    if backend == "dask":
        assert w.shape.as_list() == [None, 1] and w.shape.num_elements() is None
        assert not w.shape.is_fully_defined()
    else:
        assert w.shape.as_list() == [2, 1] and w.shape.num_elements() == 2


# --------------------------------------------------------------------------- reduce_max of nothing
def test_reduce_max_min_of_an_empty_axis(backend):
    # (TensorFlow 2.21: -inf / +inf, an integer dtype's lowest / highest value; gt.max stays the
    # standard's, NumPy's error)
    e = gt.zeros([0])
    assert value(gt.reduce_max(e)).item() == -np.inf and value(gt.reduce_min(e)).item() == np.inf
    assert gt.reduce_max(e).dtype == gt.float32
    assert value(gt.math.reduce_max(gt.zeros([2, 0]), axis=1)).tolist() == [-np.inf, -np.inf]
    assert value(gt.reduce_max(gt.zeros([2, 0]), axis=1, keepdims=True)).tolist() == [[-np.inf], [-np.inf]]
    assert value(gt.reduce_min(gt.zeros([0, 3]), axis=[0, 1])).item() == np.inf
    assert value(gt.reduce_max(gt.zeros([2, 0]), axis=0)).shape == (0,)
    i = gt.zeros([0], dtype=gt.int32)
    assert value(gt.reduce_max(i)).item() == -2147483648 and value(gt.reduce_min(i)).item() == 2147483647
    assert gt.reduce_max(i).dtype == gt.int32
    if backend != "dask":  # (dask's max is lazy: its error comes when computed)
        with pytest.raises(ValueError):
            gt.max(e)
    # (TensorFlow 2.21: the gradient is a tensor of zeros of the input's (empty) shape, not None)
    x = gt.Variable(np.zeros((2, 0)))
    with gt.GradientTape() as tape:
        y = gt.reduce_sum(gt.reduce_max(x, axis=1))
    g = tape.gradient(y, x)
    assert value(y).item() == -np.inf and g is not None and g.shape == (2, 0)


# --------------------------------------------------------------------------- Variable(constraint=)
def test_variable_constraint_applied_by_optimizers(backend):
    v = gt.Variable([1.0, -2.0, 3.0], constraint=lambda z: gt.clip_by_value(z, 0.0, 2.0))
    assert value(v).tolist() == [1.0, -2.0, 3.0] and v.constraint is not None  # (TF: not applied at creation)
    opt = gt.optimizers.SGD(0.5)
    with gt.GradientTape() as tape:
        loss = gt.reduce_sum(v * gt.constant([1.0, -1.0, 4.0]))
    opt.apply_gradients(zip(tape.gradient(loss, [v]), [v]))
    # (TensorFlow 2.21 / Keras: [0.5, 0.0, 1.0] after the step, then clipped)
    np.testing.assert_allclose(value(v), [0.5, 0.0, 1.0])
    v.assign([5.0, 5.0, 5.0])  # (TF: assign does not apply it)
    assert value(v).tolist() == [5.0, 5.0, 5.0]
    w = gt.Variable([1.0, -2.0, 3.0], constraint=lambda z: z * gt.cast(z >= 0, z.dtype))  # Keras' NonNeg
    opt = gt.optimizers.Adam(0.1)
    with gt.GradientTape() as tape:
        loss = gt.reduce_sum(w * gt.constant([1.0, -1.0, 4.0]))
    opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
    # (TensorFlow 2.21 / Keras Adam with constraints.NonNeg())
    np.testing.assert_allclose(value(w), [0.9000009894371033, 0.0, 2.900000810623169], rtol=1e-6)
    assert gt.Variable(1.0).constraint is None
    # TensorFlow 2.21: ValueError "Argument `constraint` must be None or a callable."
    with pytest.raises(ValueError, match=r"constraint must be None or a callable"):
        gt.Variable(1.0, constraint=3)


def test_dense_kernel_constraint(backend):
    # (TensorFlow 2.21 / Keras: Dense(2, kernel_constraint=clip to 0.1, kernel_initializer="ones"), one
    # SGD(0.5) step on sum(d(ones([1, 3]))): kernel all 0.1 (1 - 0.5 clipped), bias -0.5)
    d = gt.layers.Dense(2, kernel_constraint=lambda w: gt.clip_by_value(w, -0.1, 0.1), kernel_initializer="ones")
    d(gt.ones([1, 3]))
    assert value(d.kernel).tolist() == [[1.0, 1.0]] * 3
    opt = gt.optimizers.SGD(0.5)
    with gt.GradientTape() as tape:
        loss = gt.reduce_sum(d(gt.ones([1, 3])))
    opt.apply_gradients(zip(tape.gradient(loss, d.trainable_variables), d.trainable_variables))
    np.testing.assert_allclose(value(d.kernel), [[0.1, 0.1]] * 3, rtol=1e-6)
    np.testing.assert_allclose(value(d.bias), [-0.5, -0.5])


# --------------------------------------------------------------------------- Variable.scatter_*
class _Slices:
    """What TensorFlow's IndexedSlices carries (``values``, ``indices``): scatter_* read those."""

    def __init__(self, values, indices):
        self.values, self.indices = values, indices


def test_variable_scatter(backend):
    # (TensorFlow 2.21)
    v = gt.Variable([1.0, 2.0, 3.0])
    assert v.scatter_update(_Slices(gt.constant([10.0, 20.0]), gt.constant([0, 2]))) is v
    assert value(v).tolist() == [10.0, 2.0, 20.0]
    v.scatter_add(indices=[0, 0], values=[1.0, 1.0])  # repeated rows accumulate
    assert value(v).tolist() == [12.0, 2.0, 20.0]
    v.scatter_sub(indices=gt.constant([1]), values=gt.constant([5.0]))
    assert value(v).tolist() == [12.0, -3.0, 20.0]
    m = gt.Variable(np.zeros((3, 2)))
    m.scatter_update(indices=[1], values=[[1.0, 2.0]])
    assert value(m).tolist() == [[0.0, 0.0], [1.0, 2.0], [0.0, 0.0]] and m.dtype == gt.float64
    assert m.backend == backend


def test_variable_scatter_errors(backend):
    v = gt.Variable([1.0, 2.0, 3.0])
    # TensorFlow 2.21: InvalidArgumentError "indices[0] = 5 is not in [0, 3)"
    with pytest.raises(IndexError, match=r"Variable.scatter_update: indices\[0\] = 5 is not in \[0, 3\)"):
        v.scatter_update(indices=[5], values=[1.0])
    with pytest.raises(IndexError, match=r"is not in \[0, 3\)"):  # (TF: negative rows too)
        v.scatter_add(indices=[-1], values=[1.0])
    # TensorFlow 2.21: TypeError "Argument `sparse_delta` must be a `tf.IndexedSlices`."
    with pytest.raises(TypeError, match=r"Variable.scatter_update: sparse_delta must have .indices and .values"):
        v.scatter_update([1.0])
    with pytest.raises(ValueError, match=r"Variable.scatter_sub: values must have shape .* = \(1,\)"):
        v.scatter_sub(indices=[1], values=[1.0, 2.0])
    assert value(v).tolist() == [1.0, 2.0, 3.0]  # nothing written


# --------------------------------------------------------------------------- under gt.function
@pytest.mark.filterwarnings("error:gt.function:UserWarning")  # (a trace that disagrees with eager warns)
def test_the_names_in_a_compiled_step(backend):
    def step(p, d):
        with gt.GradientTape() as tape:
            tape.watch([p, d])
            parts = [
                gt.gather_nd(p, [[0, 1], [1, 2]]),
                gt.split(p, 2, axis=2)[0],
                gt.pad(d, [[1, 1], [0, 1]], mode="REFLECT"),
                gt.math.unsorted_segment_sum(d, [0, 1, 0], 2),
                gt.math.segment_max(d, [0, 0, 1]),
                gt.tensor_scatter_nd_add(d, [[0, 1]], [5.0]),
                gt.tensor_scatter_nd_update(d, [[2]], [[7.0, 8.0]]),
            ]
            loss = gt.add_n([gt.reduce_sum(t * t) for t in parts])
        return [loss] + tape.gradient(loss, [p, d])

    p, d = c64(P234), c64(np.arange(6.0).reshape(3, 2) * 0.5)
    eager = [value(t) for t in step(p, d)]
    compiled = gt.function(step)
    for _ in range(2):
        for got, want in zip(compiled(p, d), eager):
            np.testing.assert_allclose(value(got), want, rtol=1e-12)


def test_traced_segment_ids_are_refused_with_what_to_do(backend):
    # segment ids are read to the host (checked, and they size the result): inside gt.function a traced
    # ids tensor has no value yet, an error that says so (not a clamped read).  (gather_nd and
    # tensor_scatter_nd_* take traced indices: tests/test_traced_indices.py.)
    @gt.function
    def g(d, ids):
        return gt.math.unsorted_segment_sum(d, ids, 2)

    with pytest.raises(gt.OperatorNotAllowedInGraphError):
        g(c64(D52), gt.constant([0, 1, 0, 1, 1]))
