"""What a TensorFlow user moving code over met, checking gradtape against TensorFlow 2.21 run beside it
(the ``tfuser8`` brief).  TensorFlow is not installed in CI: its outputs are written here as literals,
each marked as TF 2.21's.  Each test fails on the code before its fix, and runs on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt


def _grad(f, x):
    """``f(x)`` and the gradient of ``sum(f(x))`` with respect to ``x``, as NumPy arrays."""
    x = gt.constant(x)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    return y.numpy(), tape.gradient(y, x).numpy()


def test_top_k_returns_tensorflows_named_tuple(backend):
    # TF 2.21: tf.math.top_k(x, k=2) is TopKV2(values=..., indices=...); `.values` is how TF code reads it
    # (gradtape returned a plain tuple: AttributeError: 'tuple' object has no attribute 'values')
    x = gt.constant([[1.0, 3.0, 2.0], [5.0, 5.0, 0.0]])
    with gt.GradientTape() as tape:
        tape.watch(x)
        result = gt.math.top_k(x, k=2)
        y = gt.reduce_sum(result.values * gt.constant([1.0, 10.0]))
    assert type(result).__name__ == "TopKV2" and result._fields == ("values", "indices")
    np.testing.assert_array_equal(result.values.numpy(), [[3.0, 2.0], [5.0, 5.0]])  # TF 2.21's
    np.testing.assert_array_equal(result.indices.numpy(), [[1, 2], [0, 1]])  # TF 2.21's
    assert result.indices.dtype == gt.int32  # TF 2.21's
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [[0.0, 1.0, 10.0], [1.0, 10.0, 0.0]])  # TF 2.21's
    values, indices = result  # still unpacks as a pair
    assert values is result.values and indices is result.indices


# TF 2.21: tf.nn.selu and tf.nn.softsign at [-1, 0, 1.5] and their gradients, float32 and float64
_ACTIVATIONS = {
    "selu": (
        [-1.1113307476043701, 0.0, 1.5760514736175537],
        [0.6467685699462891, 1.0507010221481323, 1.0507010221481323],
        [-1.1113307378125628, 0.0, 1.5760514810332207],
        [0.6467686030348141, 1.0507009873554805, 1.0507009873554805],
    ),
    "softsign": ([-0.5, 0.0, 0.6000000238418579], [0.25, 1.0, 0.1599999964237213], [-0.5, 0.0, 0.6], [0.25, 1.0, 0.16]),
}


@pytest.mark.parametrize("name", list(_ACTIVATIONS))
def test_nn_selu_and_softsign_are_tensorflows(backend, name):
    # gt.nn had neither (tf.nn.selu, tf.nn.softsign), nor Dense(activation="selu" / "softsign")
    y32, g32, y64, g64 = _ACTIVATIONS[name]
    f = getattr(gt.nn, name)
    y, g = _grad(f, np.array([-1.0, 0.0, 1.5], np.float32))
    assert y.dtype == np.float32 and g.dtype == np.float32
    np.testing.assert_allclose(y, y32, rtol=1e-6)
    np.testing.assert_allclose(g, g32, rtol=1e-6)  # selu'(0) = scale, as TF's SeluGrad
    y, g = _grad(f, np.array([-1.0, 0.0, 1.5]))
    np.testing.assert_allclose(y, y64, rtol=1e-14)
    np.testing.assert_allclose(g, g64, rtol=1e-14)
    # tf.keras.layers.Dense(2, activation=name, kernel_initializer="ones") of [[-1, 0.25]], TF 2.21's
    dense = gt.layers.Dense(2, activation=name, kernel_initializer="ones")
    want = {"selu": -0.9276319742202759, "softsign": -0.4285714328289032}[name]
    np.testing.assert_allclose(dense(gt.constant([[-1.0, 0.25]])).numpy(), [[want, want]], rtol=1e-6)


def test_softsign_is_one_function_in_math_and_nn(backend):
    assert gt.math.softsign is gt.nn.softsign


@pytest.mark.parametrize("what", ["gradient", "jacobian", "batch_jacobian"])
def test_a_tape_never_entered_is_an_error_not_none(backend, what):
    # TF 2.21 raises (a RuntimeError from tape.gradient); gradtape returned None, silently: the user had
    # forgotten the `with` and read "no gradient"
    x = gt.constant([[1.0, 2.0]])
    tape = gt.GradientTape()
    tape.watch(x)
    y = x * x
    with pytest.raises(RuntimeError, match=rf"GradientTape\.{what}: this tape was never entered"):
        getattr(tape, what)(y, x)


def test_a_tape_entered_then_reset_or_stopped_still_differentiates(backend):
    x = gt.constant(2.0)
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        with tape.stop_recording():
            unrecorded = x * x
        tape.reset()
        tape.watch(x)
        y = x * 5.0
    assert float(tape.gradient(y, x)) == 5.0  # TF 2.21's
    assert tape.gradient(unrecorded, x) is None  # TF 2.21's


def test_huber_and_kl_divergence_are_keras(backend):
    # tf.keras.losses.Huber / KLDivergence and keras.losses.huber / kl_divergence (TF 2.21, Keras 3.15's
    # values and gradients, float32); gt.losses had neither (an AttributeError)
    y_true = [[0.0, 1.0], [1.0, 1.0]]
    y_pred = gt.constant([[0.1, 3.7], [0.3, 2.0]])
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(y_pred)
        loss = gt.losses.Huber()(y_true, y_pred)
        summed = gt.losses.Huber(delta=0.5, reduction="sum")(y_true, y_pred)
    np.testing.assert_allclose(float(loss), 0.7375000715255737, rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(loss, y_pred).numpy(), [[0.025, 0.25], [-0.175, 0.25]], rtol=1e-6)
    np.testing.assert_allclose(float(summed), 0.9150000214576721, rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(summed, y_pred).numpy(), [[0.05, 0.25], [-0.25, 0.25]], rtol=1e-6)
    np.testing.assert_allclose(gt.losses.huber(y_true, y_pred, delta=2.0).numpy(), [1.7025001, 0.3725], rtol=1e-6)
    # at |error| == delta the quadratic side's gradient, as Keras: loss 0.5, gradient 1
    edge = gt.constant([[2.0]])
    with gt.GradientTape() as tape:
        tape.watch(edge)
        loss = gt.losses.get("huber")([[1.0]], edge)
    assert float(gt.reduce_mean(loss)) == 0.5 and tape.gradient(loss, edge).numpy().tolist() == [[1.0]]

    y_true = [[0.0, 1.0, 0.0], [0.5, 0.25, 0.25]]
    y_pred = gt.constant([[0.1, 0.7, 0.2], [0.3, 0.3, 0.4]])
    with gt.GradientTape() as tape:
        tape.watch(y_pred)
        loss = gt.losses.KLDivergence()(y_true, y_pred)
    np.testing.assert_allclose(float(loss), 0.2245018184185028, rtol=1e-6)
    want = [[-4.999999987376214e-07, -0.714285671710968, -2.499999993688107e-07], [-0.8333333, -0.4166667, -0.3125]]
    np.testing.assert_allclose(tape.gradient(loss, y_pred).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(
        gt.losses.kl_divergence(y_true, y_pred).numpy(), [0.35667213797569275, 0.09233149141073227], rtol=1e-6
    )
    assert gt.losses.get("KLDivergence") is gt.losses.kl_divergence


def test_argmax_without_axis_is_tensorflows_in_gt_math_and_the_standards_at_the_top(backend):
    # docs/conventions.md section 8: tf.argmax(x) is along axis 0 (TF 2.21: [1, 0] here); gt.argmax is
    # the Array API's (the flattened index); gt.math.argmax / argmin keep TensorFlow's signature
    x = gt.constant([[1.0, 3.0], [4.0, 2.0]])
    np.testing.assert_array_equal(gt.math.argmax(x).numpy(), [1, 0])  # TF 2.21's
    np.testing.assert_array_equal(gt.math.argmin(x).numpy(), [0, 1])  # TF 2.21's
    assert int(gt.argmax(x)) == 2 and int(gt.argmin(x)) == 0


# TF 2.21 / Keras 3.15: tf.keras.optimizers.schedules.* at steps 0, 1, ... and SGD(schedule) stepping a
# variable from 1.0 with gradient 1.0; gradtape had ExponentialDecay only (an AttributeError)
_SCHEDULES = {
    "cosine": (
        lambda S: S.CosineDecay(0.1, 4, alpha=0.1),
        [0, 1, 2, 3, 4, 6],
        [0.10000000149011612, 0.08681981265544891, 0.05499999597668648, 0.023180196061730385, 0.01, 0.01],
        [0.8999999761581421, 0.813180148601532, 0.7581801414489746, 0.73499995470047, 0.7249999642372131],
    ),
    "cosine_warmup": (
        lambda S: S.CosineDecay(0.0, 4, alpha=0.1, warmup_target=0.2, warmup_steps=2),
        [0, 1, 2, 3, 4, 5, 6, 7, 9],
        [0.0, 0.1, 0.2, 0.17363962531089783, 0.10999999195337296, 0.04636039212346077, 0.02, 0.02, 0.02],
        None,
    ),
    "piecewise": (
        lambda S: S.PiecewiseConstantDecay([2, 5], [0.1, 0.05, 0.01]),
        [0, 1, 2, 3, 5, 6, 10],
        [0.1, 0.1, 0.1, 0.05, 0.05, 0.01, 0.01],
        None,
    ),
    "piecewise_sgd": (
        lambda S: S.PiecewiseConstantDecay([1, 2], [1.0, 0.5, 0.25]),
        [0, 1, 2, 3],
        [1.0, 1.0, 0.5, 0.25],
        [0.0, -1.0, -1.5, -1.75],
    ),
}


@pytest.mark.parametrize("name", list(_SCHEDULES))
def test_cosine_and_piecewise_constant_decay_are_keras(backend, name):
    make, steps, rates, sgd = _SCHEDULES[name]
    schedule = make(gt.optimizers.schedules)
    np.testing.assert_allclose([schedule(s) for s in steps], rates, rtol=1e-6)
    # a step tensor (what apply passes, traced under gt.function) gives the same rates
    np.testing.assert_allclose([float(schedule(gt.constant(s))) for s in steps], rates, rtol=1e-6)
    again = type(schedule).from_config(schedule.get_config())
    assert [again(s) for s in steps] == [schedule(s) for s in steps]
    if sgd is None:
        return
    for compiled in (False, True):
        opt = gt.optimizers.SGD(make(gt.optimizers.schedules))
        v = gt.Variable([1.0])

        def step(opt=opt, v=v):
            opt.apply_gradients([(gt.constant([1.0]), v)])

        step = gt.function(step) if compiled else step
        got = []
        for _ in sgd:
            step()
            got.append(float(v.numpy()[0]))
        np.testing.assert_allclose(got, sgd, rtol=1e-6, atol=1e-7, err_msg=f"compiled={compiled}")


def test_piecewise_constant_decay_refuses_mismatched_lengths(backend):
    with pytest.raises(ValueError, match="length of boundaries should be 1 less than the length of values"):
        gt.optimizers.schedules.PiecewiseConstantDecay([2, 5], [0.1, 0.05])  # Keras' ValueError too


def test_reduce_logsumexp_gradient_is_the_softmax_at_large_inputs(backend):
    # TF 2.21's gradients (its reduce_logsumexp is a composite: the softmax of x shifted by its max);
    # gradtape's exp(x - y) carried y's float32 rounding: 0.4999854 for 0.5 at [1000, 1000], and an error
    # that grows with |x| (ulp(y))
    x = gt.constant([[1000.0, 1000.0, 999.0], [1e5, 1e5 + 1.0, -1e5]])
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = gt.reduce_logsumexp(x, axis=1)
        z = gt.reduce_logsumexp(x, axis=0, keepdims=True)
    np.testing.assert_allclose(y.numpy(), [1000.8619995117188, 100001.3125], rtol=1e-7)  # TF 2.21's
    want = [
        [0.42231881618499756, 0.42231881618499756, 0.15536241233348846],
        [0.2689414322376251, 0.7310585975646973, 0],
    ]
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), want, rtol=2e-7)  # TF 2.21's
    np.testing.assert_allclose(tape.gradient(z, x).numpy(), [[0, 0, 1], [1, 1, 0]], rtol=1e-7)  # TF 2.21's
    np.testing.assert_allclose(gt.reduce_logsumexp(gt.constant([1000.0, 1000.0])).numpy(), 1000.6931762695312)
    with gt.GradientTape() as tape:
        ones = gt.constant([1000.0, 1000.0])
        tape.watch(ones)
        lse = gt.reduce_logsumexp(ones)
    np.testing.assert_array_equal(tape.gradient(lse, ones).numpy(), [0.5, 0.5])  # TF 2.21's, exactly
    # the second derivative (nested tapes), TF 2.21's
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.GradientTape() as inner:
            inner.watch(x)
            y = gt.reduce_logsumexp(x[0] - 1000.0)
        g = inner.gradient(y, x)
    hv = outer.gradient(g, x, output_gradients=gt.constant([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]))
    want = [[-0.30957818031311035, 0.11274063587188721, 0.19683738052845], [0, 0, 0]]
    np.testing.assert_allclose(hv.numpy(), want, rtol=1e-6, atol=1e-7)


def test_grad_pass_through_is_tensorflows(backend):
    # TF 2.21: tf.grad_pass_through(tf.round)(x * 1.3) at x = 2 is 3.0 with gradient 1.3, and
    # tf.grad_pass_through(v.assign)(y) differentiates to 1 in y (tf.grad_pass_through's documented use);
    # gradtape had no grad_pass_through (an AttributeError)
    x = gt.constant(2.0)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.grad_pass_through(gt.round)(x * 1.3)
    assert float(y) == 3.0
    np.testing.assert_allclose(float(tape.gradient(y, x)), 1.2999999523162842)  # TF 2.21's
    v = gt.Variable(1.0)
    y = gt.constant([3.0])
    with gt.GradientTape() as tape:
        tape.watch(y)
        z = gt.grad_pass_through(v.assign)(gt.reshape(y, ()))
    assert float(v) == 3.0 and float(z) == 3.0
    np.testing.assert_array_equal(tape.gradient(z, y).numpy(), [1.0])  # TF 2.21's
    # several inputs: each gets the gradient of the output at its position
    a, b = gt.constant([1.4, 2.6]), gt.constant(0.5)
    with gt.GradientTape() as tape:
        tape.watch([a, b])
        ra, rb = gt.grad_pass_through(lambda p, q: (gt.round(p), gt.floor(q)))(a, b)
        loss = gt.reduce_sum(ra * gt.constant([2.0, 3.0])) + 5.0 * rb
    ga, gb = tape.gradient(loss, [a, b])
    np.testing.assert_array_equal(ga.numpy(), [2.0, 3.0])
    assert float(gb) == 5.0


def test_the_learning_rate_is_a_float_set_by_assignment_as_documented(backend):
    # docs/api.md: Keras 3's optimizer.learning_rate is a Variable (.assign); gradtape's is a float, set
    # by assignment, and the next step uses it (TF 2.21: SGD(0.1), lr set to 0.5, gradient 1: 1.0 -> 0.5)
    opt = gt.optimizers.SGD(0.1)
    v = gt.Variable([1.0])
    assert isinstance(opt.learning_rate, float)
    opt.learning_rate = 0.5
    opt.apply_gradients([(gt.constant([1.0]), v)])
    assert v.numpy().tolist() == [0.5] and opt.learning_rate == 0.5


def test_a_function_called_with_a_default_written_out_gives_the_same_result(backend):
    # docs/function.md: gt.function keys arguments as passed (tf.function binds defaults first): f(x) and
    # f(x, training=False) trace twice; the results are the same
    @gt.function
    def f(x, training=False):
        return x * 2.0 if training else x - 1.0

    x = gt.constant([1.0, 2.0])
    assert f(x).numpy().tolist() == f(x, training=False).numpy().tolist() == [0.0, 1.0]
    assert f(x, training=True).numpy().tolist() == [2.0, 4.0]
    assert f.experimental_get_tracing_count() == 3


def test_embedding_lookup_and_batch_normalization_are_tensorflows(backend):
    # TF 2.21's values and gradients (embedding_lookup's an IndexedSlices there, densified here: the same
    # numbers, the repeated row 2 accumulated); gt.nn had neither (an AttributeError)
    params = gt.Variable([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    with gt.GradientTape() as tape:
        rows = gt.nn.embedding_lookup(params, [[0, 2], [2, 2]])
        loss = gt.reduce_sum(rows * gt.constant([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]))
    np.testing.assert_array_equal(rows.numpy(), [[[1, 2], [5, 6]], [[5, 6], [5, 6]]])  # TF 2.21's
    np.testing.assert_array_equal(tape.gradient(loss, params).numpy(), [[1, 2], [0, 0], [15, 18]])  # TF 2.21's
    with pytest.raises(IndexError):  # TF: InvalidArgumentError (an IndexError's counterpart) for an id out of range
        gt.nn.embedding_lookup(params, [3]).numpy()  # (Dask's lazy index: found when computed)

    x, mean, var = gt.constant([[1.0, 2.0], [3.0, 5.0]]), gt.constant([2.0, 3.0]), gt.constant([1.0, 4.0])
    offset, scale = gt.constant([0.5, -0.5]), gt.constant([2.0, 3.0])
    with gt.GradientTape() as tape:
        tape.watch([x, mean, var, offset, scale])
        y = gt.nn.batch_normalization(x, mean, var, offset, scale, 1e-3)
        loss = gt.reduce_sum(y * gt.constant([[1.0, 2.0], [3.0, 4.0]]))
    want_y = [[-1.4990007877349854, -1.9998126029968262], [2.4990010261535645, 2.4996252059936523]]
    np.testing.assert_allclose(y.numpy(), want_y, rtol=1e-6)  # TF 2.21's
    want = [  # TF 2.21's gradients with respect to x, mean, variance, offset, scale
        [[1.9990007877349854, 2.9996252059936523], [5.997002601623535, 5.999250411987305]],
        [-7.996003150939941, -8.998875617980957],
        [-1.9970037937164307, -1.1245783567428589],
        [4.0, 6.0],
        [1.9990007877349854, 2.9996252059936523],
    ]
    for got, w in zip(tape.gradient(loss, [x, mean, var, offset, scale]), want):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-6)
    plain = gt.nn.batch_normalization(x, mean, var, None, None, 1e-3)
    want = [[-0.9995003938674927, -0.4999375343322754], [0.9995005130767822, 0.9998750686645508]]
    np.testing.assert_allclose(plain.numpy(), want, rtol=1e-6)  # TF 2.21's


def test_assign_with_read_value_false_returns_none_as_tensorflows_eager_variables(backend):
    """``v.assign(x, read_value=False)`` (and assign_add / assign_sub) return None in TensorFlow's eager
    mode ("If read_value is false, instead returns None in Eager mode"); gradtape returned the variable. The
    update happens either way; with read_value=True (the default) the variable comes back."""
    v = gt.Variable([1.0, 2.0])
    assert v.assign([3.0, 4.0], read_value=False) is None
    assert v.assign_add([1.0, 1.0], read_value=False) is None
    assert v.assign_sub([0.5, 0.5], read_value=False) is None
    np.testing.assert_allclose(v.numpy(), [3.5, 4.5])
    assert v.assign([0.0, 0.0]) is v and v.assign_add([1.0, 1.0]) is v and v.assign_sub([1.0, 1.0]) is v
