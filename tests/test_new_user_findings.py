"""What a newcomer from PyTorch, JAX or Keras met on a first try (the ``newuser`` brief): each test
fails on the code before its fix, and runs on every backend."""

from __future__ import annotations

import re
import threading
import time

import numpy as np
import pytest

import gradtape as gt
from gradtape import habits

PROBS = [[0.5, 0.5], [0.2, 0.8]]


@pytest.mark.parametrize("bad", [5, -1])
@pytest.mark.parametrize("from_logits", [False, True])
def test_sparse_categorical_crossentropy_refuses_a_label_out_of_range(backend, bad, from_logits):
    """A label outside [0, classes) is an error naming the loss, with probabilities as with logits
    (Keras and torch raise; the probabilities' path gave a silent loss of -0.0 and no gradient)."""
    y_pred = gt.constant(PROBS)
    who = "sparse_softmax_cross_entropy_with_logits" if from_logits else "sparse_categorical_crossentropy"
    with pytest.raises(ValueError, match=rf"{who}: received a label value of {bad} .*\[0, 2\)"):
        gt.losses.sparse_categorical_crossentropy(gt.constant([0, bad]), y_pred, from_logits=from_logits).numpy()
    with pytest.raises(ValueError, match=rf"{who}: received a label value"):
        gt.losses.SparseCategoricalCrossentropy(from_logits=from_logits)([0, bad], y_pred).numpy()


def test_sparse_categorical_crossentropy_in_range_is_unchanged(backend):
    """Labels in range (and an ignored class outside it) still give torch's cross-entropy."""
    probs = np.array(PROBS)
    want = -np.log(probs[[0, 1], [1, 0]])
    got = gt.losses.sparse_categorical_crossentropy(gt.constant([1, 0]), gt.constant(probs, dtype=gt.float64))
    np.testing.assert_allclose(np.asarray(got.numpy()), want, rtol=1e-12)
    ignored = gt.losses.sparse_categorical_crossentropy(
        gt.constant([1, -1]), gt.constant(probs, dtype=gt.float64), ignore_class=-1
    )
    np.testing.assert_allclose(np.asarray(ignored.numpy()), [want[0], 0.0], rtol=1e-12)


def test_the_copy_hints_say_what_setitem_does(backend):
    """``x[i] = v`` and ``x += 1`` update a tensor in place (every name bound to it sees it, as in
    PyTorch) and ``gt.identity`` copies: so the hints for ``.clone()``, ``.copy()`` and JAX's ``.at``
    must not call tensors immutable (they said "t itself is safe to keep", which is false)."""
    x = gt.constant([1.0, 2.0])
    kept, copied = x, gt.identity(x)
    x[0] = 5.0
    x += 1
    assert kept.numpy().tolist() == [6.0, 3.0] and copied.numpy().tolist() == [1.0, 2.0]
    for key in ("clone()", "copy()", "at"):
        hint = habits.TENSOR_HINTS[key]
        assert "immutable" not in hint and "gt.identity" in hint, (key, hint)
    # what the .at hint says to write gives a new tensor and leaves x alone
    y = gt.identity(x)
    y[1] = 0.0
    assert x.numpy().tolist() == [6.0, 3.0] and y.numpy().tolist() == [6.0, 0.0]


@pytest.mark.parametrize(
    "tf_call, gt_call",
    [
        ("gt.gather(x, [1, 0], axis=0)", "gt.take(x, gt.constant([1, 0]), axis=0)"),
        ("gt.range(0, 3, 1)", "gt.arange(0, 3, 1)"),
        ("gt.norm(x)", "gt.linalg.vector_norm(x)"),
        ("gt.fill((2,), 3.0)", "gt.full((2,), 3.0)"),
        ("gt.reverse(x, [0])", "gt.flip(x, axis=0)"),
        ("gt.boolean_mask(x, x > 2.0)", "x[x > 2.0]"),
    ],
)
def test_a_tensorflow_name_the_standard_spells_otherwise_gives_its_spelling(backend, tf_call, gt_call):
    """A ported TensorFlow program (docs/coming_from.md: "ports by renaming tf to gt") meets tf.gather,
    tf.range, tf.norm, ...: the AttributeError gives the gradtape call, and that call runs here."""
    x = gt.constant([[1.0, 2.0], [3.0, 4.0]])
    name = tf_call.split("(")[0].removeprefix("gt.")
    hint = "x[mask]" if gt_call.startswith("x[") else gt_call.split("(")[0]
    with pytest.raises(AttributeError, match=rf"^module 'gradtape' has no attribute '{name}': .*{re.escape(hint)}"):
        eval(tf_call, {"gt": gt, "x": x})
    assert eval(gt_call, {"gt": gt, "x": x}).numpy() is not None


def test_a_function_first_called_from_two_threads_takes_numpy_arguments(backend):
    """Two threads call a new gt.function with NumPy arguments at once: the second waits for the
    first one's trace and then runs it (it crashed with "'numpy.ndarray' object has no attribute
    '_v'": its NumPy arguments were passed to the program unconverted)."""
    tracing = threading.Event()

    def step(x):
        if not tracing.is_set():  # the first trace holds the lock a while, so the other call waits on it
            tracing.set()
            time.sleep(0.5)
        return gt.sum(x * 2.0)

    f = gt.function(step)
    x = np.arange(3, dtype=np.float32)
    results, errors = [], []

    def call():
        try:
            results.append(float(f(x)))
        except Exception as e:  # reported below
            errors.append(repr(e))

    def call_on_this_backend():  # (a thread starts on the process's backend)
        with gt.use_backend(backend):
            call()

    first = threading.Thread(target=call_on_this_backend)
    first.start()
    assert tracing.wait(30)
    call()  # while the first thread traces
    first.join()
    assert not errors, errors
    assert results == [6.0, 6.0] and f.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("make", ["Dense", "Sequential"])
def test_a_layer_first_called_from_several_threads_is_built_once(backend, make):
    """Threads that call a new layer at once (a data-parallel step) share one kernel and one bias (it
    was built once per thread that got there first: 4 to 8 variables, the model's list holding
    duplicates that a training step and a checkpoint then disagree on)."""
    for _ in range(3):
        if make == "Dense":
            layer = gt.layers.Dense(4)
        else:
            layer = gt.layers.Sequential([gt.layers.Dense(4, activation="relu"), gt.layers.Dense(1)])
        x = np.ones((2, 3), np.float32)
        start = threading.Barrier(4)
        outs, errors = [], []

        def call(layer=layer, start=start, outs=outs, errors=errors):
            try:
                with gt.use_backend(backend):
                    start.wait()
                    outs.append(layer(x).numpy())
            except Exception as e:  # reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=call) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert len(layer.trainable_variables) == (2 if make == "Dense" else 4), [
            v.name for v in layer.trainable_variables
        ]
        for o in outs[1:]:
            np.testing.assert_array_equal(o, outs[0])


def _sorted_weighted(x):
    """A function that makes a tensor of its own (gt.arange), as most user functions do."""
    return gt.sum(gt.sort(x) * gt.arange(x.shape[0], dtype=x.dtype))


def test_check_gradients_runs_the_function_on_each_backend_it_checks(backend):
    """gt.check_gradients (and `gradtape check`) ran the user's function on each backend's tensors
    without making that backend active: a tensor the function makes landed on the process's backend
    and every other backend was skipped ("op 'multiply' got tensors of two backends"), while the
    verdict still said "all pairs agree"."""
    native = backend in ("torch", "jax")
    with gt.use_backend("numpy"):  # the process's backend differs from the one checked
        report = gt.check_gradients(_sorted_weighted, [0.3, -1.2, 2.0, 0.7], backends=[backend], native=native)
    assert f"gradtape:{backend}" in report.methods, report.skipped
    assert not [m for m in report.skipped if m != "tensorflow"], report.skipped
    np.testing.assert_allclose(report.methods[f"gradtape:{backend}"][0], [1.0, 0.0, 3.0, 2.0], rtol=1e-12)
    assert report.passed, str(report)
