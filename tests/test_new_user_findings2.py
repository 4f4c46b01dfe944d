"""What a second newcomer from TensorFlow/Keras, PyTorch or JAX met (the ``newuser2`` brief): each test
fails on the code before its fix, and runs on every backend."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gradtape as gt

# labels of shape (n,) beside a model's predictions of shape (n, 1): the most common Keras call
Y_TRUE = [1.0, 0.0, 1.0, 0.0]
Y_PRED = [[0.9], [0.2], [0.7], [0.4]]


def _np_bce(t, p):
    return -(t * np.log(p) + (1 - t) * np.log(1 - p))


@pytest.mark.parametrize(
    "loss, want",
    [
        (gt.losses.MeanSquaredError(), lambda t, p: np.mean((p - t) ** 2)),
        (gt.losses.MeanAbsoluteError(), lambda t, p: np.mean(np.abs(p - t))),
        (gt.losses.BinaryCrossentropy(), lambda t, p: np.mean(_np_bce(t, p))),
        (gt.losses.mean_squared_error, lambda t, p: (p - t) ** 2),
        (gt.losses.binary_crossentropy, _np_bce),
    ],
    ids=["MeanSquaredError", "MeanAbsoluteError", "BinaryCrossentropy", "mse", "binary_crossentropy"],
)
@pytest.mark.parametrize("swap", [False, True], ids=["labels_rank1", "preds_rank1"])
def test_a_loss_pairs_labels_of_rank_one_with_predictions_of_shape_n_by_1(backend, loss, want, swap):
    """Keras brings y_true and y_pred to one rank (``squeeze_or_expand_to_same_rank``): y_true (4,)
    against y_pred (4, 1) is four examples. gradtape broadcast them to (4, 4) and averaged sixteen
    pairs: MSE 0.325 for 0.075, binary cross-entropy 0.904 for 0.299, with no error or warning."""
    t = np.array(Y_TRUE)
    p = np.array(Y_PRED)[:, 0]
    y_true, y_pred = gt.constant(Y_TRUE, dtype=gt.float64), gt.Variable(Y_PRED, dtype=gt.float64)
    if swap:  # labels (4, 1), predictions (4,)
        y_true, y_pred = gt.constant([[v] for v in Y_TRUE], dtype=gt.float64), gt.Variable(p, dtype=gt.float64)
    with gt.GradientTape() as tape:
        got = loss(y_true, y_pred)
        total = gt.sum(got)
    np.testing.assert_allclose(np.asarray(got.numpy()), want(t, p), rtol=1e-12)
    assert tuple(tape.gradient(total, y_pred).shape) == tuple(y_pred.shape)


@pytest.mark.parametrize(
    "loss, who",
    [
        (gt.losses.CategoricalCrossentropy(), "categorical_crossentropy"),
        (gt.losses.categorical_crossentropy, "categorical_crossentropy"),
        (gt.losses.BinaryCrossentropy(), "binary_crossentropy"),
    ],
)
def test_a_cross_entropy_refuses_labels_of_another_shape(backend, loss, who):
    """Integer labels (3,) given to CategoricalCrossentropy with probabilities (3, 3) broadcast to a
    number (Keras raises: target and output must have the same shape)."""
    probs = gt.constant([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]])
    with pytest.raises(ValueError, match=rf"{who}: y_true has shape \(3,\) and y_pred \(3, 3\)"):
        loss(gt.constant([0.0, 1.0, 2.0]), probs)


@pytest.mark.parametrize(
    "read, where",
    [
        ("x[5]", "index 5 is out of bounds for axis 0 with size 2"),
        ("x[-3]", "index -3 is out of bounds for axis 0 with size 2"),
        ("x[[0, 7]]", "index 7 is out of bounds for axis 0 with size 2"),
        ("x[np.array([3])]", "index 3 is out of bounds for axis 0 with size 2"),
        ("m[1, 7]", "index 7 is out of bounds for axis 1 with size 3"),
        ("m[..., -4]", "index -4 is out of bounds for axis 1 with size 3"),
        ("m[:, None, 3]", "index 3 is out of bounds for axis 1 with size 3"),
    ],
)
def test_an_index_out_of_bounds_is_an_error_on_every_backend(backend, read, where):
    """NumPy, PyTorch and Dask raise; JAX clamped the read (``x[5]`` of a 2-vector gave x[1]) and its
    gradient went nowhere (``d(3 * x[5])/dx`` was [0, 0], beside a value read from x[1]), and
    dropped the write (``v[5] = 9.0`` did nothing): all silent. Integers and lists or NumPy arrays
    of indices are checked against the shape, which costs no read of the data."""
    x, m = gt.Variable([1.0, 2.0]), gt.ones((2, 3))
    with gt.GradientTape() as tape:
        with pytest.raises(IndexError, match=rf"^{re.escape(where)} \(in op 'getitem'\)$"):
            eval(read, {"x": x, "m": m, "np": np})
        y = 3.0 * x[-2] + x[[1, 1]][0]  # in bounds: unchanged
    assert tape.gradient(y, x).numpy().tolist() == [3.0, 1.0]
    for target in (x, gt.constant([1.0, 2.0])):
        with pytest.raises(IndexError, match=r"^index 5 is out of bounds for axis 0 with size 2 \(in op 'setitem'\)$"):
            target[5] = 9.0
        assert target.numpy().tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    "read, op",
    [
        ("x[gt.constant([0, 5])]", "getitem"),
        ("x[gt.constant([-4])]", "getitem"),
        ("m[gt.constant([1]), gt.constant([3])]", "getitem"),
        ("gt.take(x, gt.constant([0, 5]))", "take"),
        ("gt.take_along_axis(x, gt.constant([5]), axis=0)", "getitem"),
        ("x.__setitem__(gt.constant([5]), 0.0)", "setitem"),
    ],
)
def test_an_index_tensor_out_of_bounds_is_an_error_on_every_backend(backend, read, op):
    """An index *tensor* out of bounds: JAX clamped the read (``x[[0, 5]]`` gave [x0, x2]), filled NaN
    in ``take`` and dropped the write, and Dask read past the end (``[1., 1.]``), silently, where the
    other libraries raise; JAX now checks the values eagerly (the index array read back:
    inside ``jax.jit``/``jax.vmap`` they cannot be read, docs/backends.md), Dask when it computes them."""
    x, m = gt.constant([1.0, 2.0, 3.0]), gt.ones((2, 3))
    bad = rf"(out of bounds for (axis|dimension) \d with size \d|index out of range in self) \(in op '{op}'"
    with pytest.raises(IndexError, match=bad):
        out = eval(read, {"x": x, "m": m, "gt": gt})
        (x if out is None else out).numpy()  # (Dask's lazy index: found when computed)
    if backend != "dask":  # (a lazy write stays in x's graph, to raise whenever x is computed)
        assert x.numpy().tolist() == [1.0, 2.0, 3.0]
    fresh = gt.constant([1.0, 2.0, 3.0])
    assert fresh[gt.constant([2, -3])].numpy().tolist() == [3.0, 1.0]  # in bounds: unchanged


@pytest.mark.parametrize("join", ["concat", "stack"])
def test_joining_tensors_of_two_dtypes_gives_one_dtype_on_every_backend(backend, join):
    """``gt.concat([float32, int32])`` was float64 on NumPy, float32 on PyTorch and JAX and a
    TypeError on array_api_strict (each library's own promotion); gradtape's result type decides,
    as for ``+``: float32, and the gradient reaches the floating input."""
    v = gt.Variable([1.0])
    with gt.GradientTape() as tape:
        joined = getattr(gt, join)([v, gt.constant([4], dtype=gt.int32)], axis=0)
        loss = gt.sum(joined**2)
    assert joined.dtype == gt.float32 and joined.numpy().ravel().tolist() == [1.0, 4.0]
    assert tape.gradient(loss, v).numpy().tolist() == [2.0]
    assert getattr(gt, join)([gt.constant([1.0]), gt.constant([2.0], dtype=gt.float64)], axis=0).dtype == gt.float64
    assert getattr(gt, join)([gt.constant([1], dtype=gt.int32), gt.constant([2])], axis=0).dtype == gt.int64


@pytest.mark.parametrize(
    "call, dask_says",
    [
        ("gt.ones((3,)) @ gt.ones((2, 2))", r"matmul: shapes \(3,\) and \(2, 2\) do not match: the last axis"),
        ("gt.ones((2, 3)) @ gt.ones((2,))", r"matmul: shapes \(2, 3\) and \(2,\) do not match: the last axis"),
        (
            "gt.concat([gt.ones((2, 2)), gt.ones((3, 3))], axis=0)",
            r"concat: the tensors' shapes \[\(2, 2\), \(3, 3\)\]",
        ),
    ],
)
def test_a_shape_mismatch_says_which_shapes(backend, call, dask_says):
    """Every backend names the op, the backend and the sizes that differ; Dask said "Chunks do not
    add up to shape. Got chunks=((3,), (2,)), shape=(2, 2)" for a matmul and "('Shapes do not align:
    %s', [(2, 2), (3, 3)])" for a concat."""
    op = call.split("(")[0].removeprefix("gt.") if "concat" in call else "matmul"
    with pytest.raises(ValueError, match=rf"\(in op '{op}' on backend '{backend}'\)$") as info:
        eval(call, {"gt": gt})
    assert "Chunks" not in str(info.value) and "%s" not in str(info.value)
    if backend == "dask":  # the other libraries' own words differ, each naming both sizes
        assert re.match(dask_says, str(info.value))


@pytest.mark.parametrize("make", ["zeros", "ones", "empty", "full"])
def test_a_shape_of_unknown_size_says_which_function_and_what_to_do(backend, make):
    """scikit-learn's LinearDiscriminantAnalysis on Dask sizes ``xp.zeros`` by ``unique_values(y)``,
    whose length Dask leaves unknown (NaN): the error was Python's "cannot convert float NaN to
    integer", naming neither the function nor the cause."""
    labels = gt.unique_values(gt.constant([1, 2, 2, 3]))
    size = labels.shape[0] if backend == "dask" else float("nan")  # (the other backends know it: 3)
    args = ((size, 2), 0.0) if make == "full" else ((size, 2),)
    with pytest.raises(ValueError, match=rf"^{make}: the shape \(nan, 2\) has an axis of unknown size .*t\.numpy\(\)"):
        getattr(gt, make)(*args)
    assert getattr(gt, make)(*(((3, 2), 0.0) if make == "full" else ((3, 2),))).shape == (3, 2)


def test_keras_metrics_and_tf_image_say_what_to_write(backend):
    """A Keras training loop reaches for ``tf.keras.metrics`` and the TensorFlow guide's example for
    ``tf.image.adjust_contrast``: the AttributeError says what to write, and that code runs."""
    for name in ("metrics", "image"):
        with pytest.raises(AttributeError, match=rf"^module 'gradtape' has no attribute '{name}': gradtape has no"):
            getattr(gt, name)
    logits, labels = gt.constant([[0.1, 2.0], [3.0, 0.2], [0.3, 0.1]]), gt.constant([1, 0, 1])
    assert float(gt.mean(gt.astype(gt.argmax(logits, axis=-1) == labels, gt.float32))) == pytest.approx(2 / 3)
    x = gt.Variable([[[0.5, 0.0, 0.0]], [[0.1, 0.2, 0.3]]])  # (height 2, width 1, channels 3)
    with gt.GradientTape() as tape:
        m = gt.mean(x, axis=(-3, -2), keepdims=True)
        y = gt.sum((x - m) * 2.0 + m)
    np.testing.assert_allclose(np.asarray(tape.gradient(y, x).numpy()), np.ones((2, 1, 3)), rtol=1e-6)


@pytest.mark.parametrize("call", ["jacobian", "batch_jacobian"])
def test_a_jacobian_of_a_list_of_targets_is_an_error(backend, call):
    """``tape.jacobian([y1, y2], x)`` converted the list to one tensor of its values, a constant: the
    jacobian was None, silently (TensorFlow's needs one Tensor and raises). Stacked inside the tape,
    the same targets give the jacobian."""
    x = gt.constant([[1.0, 2.0]])
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y1, y2 = x * x, x * 3.0
        stacked = gt.concat([y1, y2], axis=1)
    with pytest.raises(ValueError, match=rf"GradientTape.{call}: `target` is a list of tensors; .*gt.stack"):
        getattr(tape, call)([y1, y2], x)
    want = [[[2.0, 0.0], [0.0, 4.0], [3.0, 0.0], [0.0, 3.0]]]
    got = getattr(tape, call)(stacked, x)
    assert np.asarray(got.numpy()).reshape(1, 4, 2).tolist() == want


def test_a_gradient_from_another_backend_says_how_to_move_it(backend):
    """``apply_gradients`` with a gradient computed on another backend said where each lives, not
    what to do; the call it now suggests works."""
    other = "array_api_strict" if backend == "numpy" else "numpy"
    v, opt = gt.Variable([1.0, 2.0]), gt.optimizers.SGD(0.5)
    grad = gt.asarray([1.0, 1.0], backend=other)
    with pytest.raises(ValueError, match=rf"^apply_gradients: .* lives on backend '{other}' .*backend='{backend}'\)$"):
        opt.apply_gradients([(grad, v)])
    opt.apply_gradients([(gt.asarray(grad, backend=backend), v)])
    assert v.numpy().tolist() == [0.5, 1.5]


def test_a_list_of_recorded_tensors_is_stacked_by_a_recorded_op(backend):
    """TensorFlow's ``convert_to_tensor`` packs a list holding tensors with a recorded ``stack``: the
    gradient of ``sum([2x, 3x])`` is 5.  gradtape converted the list to a new array: None, silently,
    in ``convert_to_tensor``, ``asarray`` and an operator's list operand (``x + [a, b]``).  Python
    values beside the tensors take the tensors' dtype (TensorFlow's too)."""
    x = gt.constant(1.5, dtype=gt.float64)
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        packed = gt.convert_to_tensor([x * 2.0, x * 3.0])
        nested = gt.asarray([[x, 1.0], [2.0, x * x]])
        operand = gt.zeros(2, dtype=gt.float64) + [x * 2.0, x * 3.0]
        cast = gt.convert_to_tensor([x, 2], dtype=gt.float32)
        sums = [gt.reduce_sum(t) for t in (packed, nested, operand, cast)]
    assert packed.dtype == nested.dtype == operand.dtype == gt.float64 and cast.dtype == gt.float32
    np.testing.assert_allclose(np.asarray(nested), [[1.5, 1.0], [2.0, 2.25]])
    got = [float(tape.gradient(s, x)) for s in sums]
    np.testing.assert_allclose(got, [5.0, 1.0 + 2 * 1.5, 5.0, 1.0])


def test_a_constant_of_a_recorded_tensor_warns_that_its_gradient_is_lost(backend):
    """``gt.constant`` makes a new tensor, connected to nothing (as ``tf.constant``); made of a tensor
    that a recording tape connects to a watched source, its gradient was None without a word."""
    x = gt.constant(1.5, dtype=gt.float64)
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        with pytest.warns(gt.GradientLeakWarning, match=r"gt.constant .*convert_to_tensor keeps the gradient"):
            one = gt.constant(x * 2.0)
        with pytest.warns(gt.GradientLeakWarning, match="gt.constant"):
            both = gt.constant([x * 2.0, x * 3.0], dtype=gt.float32)
    assert tape.gradient(one, x) is None and tape.gradient(both, x) is None
    assert both.dtype == gt.float32


def test_a_dtype_equals_what_names_it_as_in_tensorflow(backend):
    """``x.dtype == np.float32`` was False, silently (a ported ``if x.dtype == np.float32:`` took the
    other branch); TensorFlow's ``DType`` equals its name, NumPy's type and dtype, as NumPy's and
    JAX's dtypes do."""
    t = gt.constant(1.0)
    assert t.dtype == np.float32 and t.dtype == "float32" and t.dtype == np.dtype("float32")
    assert not (t.dtype != np.float32) and t.dtype != np.float64 and t.dtype != "int32"
    assert t.dtype != "no such dtype" and t.dtype != None  # noqa: E711  (not an error: unequal)
    assert {gt.float32: 1}[t.dtype] == 1 and gt.as_dtype("float64") == gt.float64
