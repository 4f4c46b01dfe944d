"""The training pieces of API.md §5: ``gt.losses``, ``gt.Module`` (tf.Module's tracking and order),
``gt.layers`` (Keras' Dense: names, built on first call, variable order, activations,
initializers), and ``gt.optimizers`` (Keras 3's update formulas, checked by hand for one or two
steps; None gradients; iterations; slots; no tape traffic)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import gradtape as gt


def c64(a):
    return gt.constant(np.asarray(a, dtype=np.float64))


@pytest.fixture
def fresh_names():
    gt.layers.reset_names()
    yield
    gt.layers.reset_names()


# ---------------------------------------------------------------------------------------- losses
YT = np.array([[1.0, 0.0, 2.0], [0.5, -1.0, 0.0]])
YP = np.array([[0.5, 0.5, 1.0], [0.0, 1.0, 0.0]])


def test_mean_squared_error_is_per_example(backend):
    loss = gt.losses.mean_squared_error(c64(YT), c64(YP))
    assert loss.shape == (2,)
    np.testing.assert_allclose(loss.numpy(), ((YT - YP) ** 2).mean(-1), rtol=1e-12)
    assert gt.losses.mse is gt.losses.mean_squared_error
    yp = c64(YP)
    with gt.GradientTape() as t:
        t.watch(yp)
        loss = gt.losses.mean_squared_error(YT, yp)
    np.testing.assert_allclose(t.gradient(loss, yp).numpy(), 2 * (YP - YT) / 3, rtol=1e-12)


def test_mean_squared_error_class_reductions(backend):
    per = ((YT - YP) ** 2).mean(-1)
    np.testing.assert_allclose(float(gt.losses.MeanSquaredError()(c64(YT), c64(YP))), per.mean(), rtol=1e-12)
    np.testing.assert_allclose(float(gt.losses.MeanSquaredError(reduction="sum")(c64(YT), c64(YP))), per.sum())
    np.testing.assert_allclose(gt.losses.MeanSquaredError(reduction="none")(c64(YT), c64(YP)).numpy(), per)
    w = np.array([2.0, 0.0])
    np.testing.assert_allclose(
        float(gt.losses.MeanSquaredError()(c64(YT), c64(YP), sample_weight=c64(w))), (per * w).mean(), rtol=1e-12
    )
    with pytest.raises(ValueError):
        gt.losses.MeanSquaredError(reduction="bogus")


def test_mean_absolute_error(backend):
    np.testing.assert_allclose(gt.losses.mean_absolute_error(c64(YT), c64(YP)).numpy(), np.abs(YT - YP).mean(-1))


P = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.4, 0.3]])
LABELS = np.array([0, 2, 1])


def test_sparse_categorical_crossentropy(backend):
    want = -np.log(P[np.arange(3), LABELS])
    got = gt.losses.sparse_categorical_crossentropy(gt.constant(LABELS), c64(P))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-7)
    logits = np.log(P) + 1.5
    got = gt.losses.sparse_categorical_crossentropy(gt.constant(LABELS), c64(logits), from_logits=True)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)
    got = gt.losses.sparse_categorical_crossentropy(gt.constant(LABELS[:, None]), c64(P))  # (n, 1) labels
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-7)
    cls = gt.losses.SparseCategoricalCrossentropy(from_logits=True)
    np.testing.assert_allclose(float(cls(gt.constant(LABELS), c64(logits))), want.mean(), rtol=1e-10)
    ignored = gt.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=2)
    np.testing.assert_allclose(float(ignored(gt.constant(LABELS), c64(logits))), want[[0, 2]].mean(), rtol=1e-10)


def test_categorical_and_binary_crossentropy(backend):
    onehot = np.eye(3)[LABELS]
    want = -np.log(P[np.arange(3), LABELS])
    np.testing.assert_allclose(gt.losses.categorical_crossentropy(c64(onehot), c64(P)).numpy(), want, rtol=1e-7)
    np.testing.assert_allclose(
        gt.losses.categorical_crossentropy(c64(onehot), c64(np.log(P)), from_logits=True).numpy(), want, rtol=1e-10
    )
    np.testing.assert_allclose(float(gt.losses.CategoricalCrossentropy()(c64(onehot), c64(P))), want.mean(), rtol=1e-7)
    z = np.array([[1.0, 0.0], [0.0, 1.0]])
    p = np.array([[0.9, 0.2], [0.3, 0.6]])
    bce = -(z * np.log(p) + (1 - z) * np.log(1 - p)).mean(-1)
    np.testing.assert_allclose(gt.losses.binary_crossentropy(c64(z), c64(p)).numpy(), bce, rtol=1e-7)
    logits = np.log(p / (1 - p))
    np.testing.assert_allclose(
        gt.losses.binary_crossentropy(c64(z), c64(logits), from_logits=True).numpy(), bce, rtol=1e-9
    )
    assert gt.losses.get("mse") is gt.losses.mean_squared_error


# ---------------------------------------------------------------------------------------- Module
class MyModel(gt.Module):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.zeta = gt.Variable(1.0, name="zeta")
        self.alpha = gt.Variable(2.0, name="alpha", trainable=False)
        self.layers_ = [
            gt.Variable(3.0, name="l0"),
            {"b": gt.Variable(5.0, name="db"), "a": gt.Variable(4.0, name="da")},
        ]
        self.child = Child()
        self.beta = (gt.Variable(6.0, name="beta"),)
        self.not_tracked = 7.0


class Child(gt.Module):
    def __init__(self):
        super().__init__()
        self.w = gt.Variable(8.0, name="w")
        self.grandchild = GrandChild()


class GrandChild(gt.Module):
    def __init__(self):
        super().__init__()
        self.v = gt.Variable(9.0, name="v")


def _names(vs):
    return [v.name.split(":")[0] for v in vs]


def test_module_names():
    assert gt.Module().name == "module"
    assert MyModel().name == "my_model"
    assert MyModel(name="custom").name == "custom"

    class HTTPServerModel(gt.Module):
        pass

    assert HTTPServerModel().name == "http_server_model"
    with pytest.raises(ValueError, match="valid module name"):
        gt.Module(name="not valid!")


def test_module_variables_in_tf_order(backend):
    m = MyModel()
    # own attributes sorted by name (alpha, beta, layers_ [list order, dict by key], zeta), each leaf
    # once; then the submodules' leaves, depth first
    assert _names(m.variables) == ["alpha", "beta", "l0", "da", "db", "zeta", "w", "v"]
    assert _names(m.trainable_variables) == ["beta", "l0", "da", "db", "zeta", "w", "v"]
    assert _names(m.non_trainable_variables) == ["alpha"]
    assert [s.name for s in m.submodules] == ["child", "grand_child"]
    assert isinstance(m.variables, tuple)


def test_module_shared_variables_and_cycles(backend):
    m = gt.Module()
    v = gt.Variable(1.0, name="shared")
    m.a, m.b = v, [v, v]
    m.me = m  # a cycle must not loop forever
    other = gt.Module(name="other")
    other.parent = m
    m.other = other
    assert _names(m.variables) == ["shared"]
    assert [s.name for s in m.submodules] == ["other"]


def test_module_gradients_through_trainable_variables(backend):
    m = MyModel()
    with gt.GradientTape() as tape:
        y = sum(v * v for v in m.variables)
    grads = tape.gradient(y, m.trainable_variables)
    assert [float(g) for g in grads] == [2 * float(v) for v in m.trainable_variables]


def test_with_name_scope():
    class M(gt.Module):
        @gt.Module.with_name_scope
        def __call__(self, x):
            return x + 1

    assert M()(1) == 2
    with M(name="scoped").name_scope as scope:
        assert scope == "scoped/"


# ---------------------------------------------------------------------------------------- layers
def test_seed_example_prints_keras_names(backend, fresh_names, capsys):
    """The seed document's Dense example prints exactly these lines."""
    layer = gt.layers.Dense(2, activation="relu")
    x = gt.constant([[1.0, 2.0, 3.0]])
    with gt.GradientTape() as tape:
        y = layer(x)
        loss = gt.reduce_mean(y**2)
    grad = tape.gradient(loss, layer.trainable_variables)
    for var, g in zip(layer.trainable_variables, grad):
        print(f"{var.name}, shape: {g.shape}")
    assert capsys.readouterr().out == "dense/kernel:0, shape: (3, 2)\ndense/bias:0, shape: (2,)\n"


def test_layer_names_are_unique_and_resettable(fresh_names):
    assert [gt.layers.Dense(1).name for _ in range(3)] == ["dense", "dense_1", "dense_2"]
    assert gt.layers.Dense(1, name="head").name == "head"
    assert gt.layers.Flatten().name == "flatten"
    gt.layers.reset_names()
    assert gt.layers.Dense(1).name == "dense"
    gt.layers.clear_session()
    assert gt.layers.Dense(1).name == "dense"
    with pytest.raises(ValueError):
        gt.layers.Dense(1, name="a/b")


def test_dense_is_built_on_first_call(backend, fresh_names):
    layer = gt.layers.Dense(4)
    assert not layer.built and layer.trainable_variables == [] and layer.variables == []
    y = layer(gt.ones((5, 3)))
    assert layer.built and y.shape == (5, 4) and y.dtype == gt.float32
    assert layer.kernel.shape == (3, 4) and layer.bias.shape == (4,)
    assert layer.kernel.backend == backend.split(":")[0]
    assert [v.name for v in layer.trainable_variables] == ["dense/kernel:0", "dense/bias:0"]
    np.testing.assert_array_equal(layer.bias.numpy(), np.zeros(4))  # bias_initializer="zeros"
    limit = math.sqrt(6 / (3 + 4))  # glorot_uniform
    k = layer.kernel.numpy()
    assert np.all(np.abs(k) <= limit) and np.std(k) > 0
    kernel = layer.kernel
    layer(gt.ones((2, 3)))
    assert layer.kernel is kernel  # built once
    with pytest.raises(ValueError, match="incompatible"):
        layer(gt.ones((2, 5)))


def test_dense_computes_activation_of_affine_map(backend, fresh_names):
    x = np.array([[1.0, -2.0, 0.5], [0.0, 1.0, 3.0]])
    layer = gt.layers.Dense(
        2, activation="relu", dtype="float64", kernel_initializer="ones", bias_initializer=gt.layers.Constant(-2.0)
    )
    y = layer(x)
    assert y.dtype == gt.float64
    np.testing.assert_allclose(y.numpy(), np.maximum(x @ np.ones((3, 2)) - 2.0, 0))
    nob = gt.layers.Dense(2, use_bias=False, dtype="float64")
    nob(x)
    assert nob.bias is None and len(nob.trainable_variables) == 1


def test_dense_gradients_are_analytic(backend, fresh_names):
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
    layer = gt.layers.Dense(2, dtype="float64")
    with gt.GradientTape() as tape:
        y = layer(c64(x))
        loss = gt.reduce_sum(y**2) / 2
    gk, gb = tape.gradient(loss, layer.trainable_variables)
    yv = x @ layer.kernel.numpy() + layer.bias.numpy()
    np.testing.assert_allclose(gk.numpy(), x.T @ yv, rtol=1e-12)
    np.testing.assert_allclose(gb.numpy(), yv.sum(0), rtol=1e-12)


@pytest.mark.parametrize(
    "activation,check",
    [
        ("relu", lambda z, y: np.maximum(z, 0)),
        ("sigmoid", lambda z, y: 1 / (1 + np.exp(-z))),
        ("tanh", lambda z, y: np.tanh(z)),
        ("softmax", lambda z, y: np.exp(z) / np.exp(z).sum(-1, keepdims=True)),
        ("linear", lambda z, y: z),
        (None, lambda z, y: z),
        (lambda t: t * 3.0, lambda z, y: 3 * z),
    ],
)
def test_dense_activations(backend, fresh_names, activation, check):
    layer = gt.layers.Dense(3, activation=activation, dtype="float64")
    x = np.array([[0.3, -1.2], [2.0, 0.1]])
    y = layer(x).numpy()
    z = x @ layer.kernel.numpy()
    np.testing.assert_allclose(y, check(z, y), rtol=1e-12, atol=1e-15)


def test_string_activations_and_errors():
    assert gt.layers.get_activation("gelu") is gt.nn.gelu
    assert gt.layers.get_activation("relu") is gt.nn.relu
    with pytest.raises(ValueError, match="activation"):
        gt.layers.Dense(2, activation="bogus")
    with pytest.raises(ValueError):
        gt.layers.Dense(0)


def test_keras3_hard_activations(backend):
    """Keras 3's ``hard_sigmoid`` (``relu6(x + 3) / 6``) and ``hard_silu`` / ``hard_swish``, with their
    gradients (0 at the kinks, as relu6's)."""
    x0 = np.array([-4.0, -3.0, -1.5, 0.0, 2.0, 3.0, 5.0])
    x = gt.constant(x0)
    hs = gt.layers.get_activation("hard_sigmoid")
    assert gt.layers.get_activation("hard_swish") is gt.layers.get_activation("hard_silu")
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = hs(x)
        z = gt.layers.get_activation("hard_silu")(x)
    want = np.clip(x0 / 6.0 + 0.5, 0.0, 1.0)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.where(np.abs(x0) < 3.0, 1.0 / 6.0, 0.0), rtol=1e-12)
    np.testing.assert_allclose(z.numpy(), x0 * want, rtol=1e-12)
    dz = np.where(np.abs(x0) < 3.0, x0 / 3.0 + 0.5, want)
    np.testing.assert_allclose(tape.gradient(z, x).numpy(), dz, rtol=1e-12)


def test_initializers_are_seeded_and_backend_independent(backend, fresh_names):
    gt.random.set_seed(3)
    a = gt.layers.Dense(5)
    a(gt.ones((1, 4)))
    with gt.use_backend("numpy"):
        gt.random.set_seed(3)
        b = gt.layers.Dense(5)
        b(gt.ones((1, 4)))
    np.testing.assert_array_equal(a.kernel.numpy(), b.kernel.numpy())
    gt.random.set_seed(None)
    he = gt.layers.get_initializer("he_normal")((400, 300))
    assert abs(he.numpy().std() - math.sqrt(2 / 400)) < 0.1 * math.sqrt(2 / 400)
    assert gt.layers.get_initializer("GlorotUniform").mode == "fan_avg"
    with pytest.raises(ValueError):
        gt.layers.get_initializer("bogus")


def test_inputs_are_cast_to_the_layer_dtype(backend, fresh_names):
    layer = gt.layers.Dense(2)
    y = layer(np.ones((1, 3)))  # float64 NumPy input -> float32 layer
    assert y.dtype == gt.float32
    x = c64(np.ones((1, 3)))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
    assert tape.gradient(y, x).dtype == gt.float64


def test_sequential_and_flatten(backend, fresh_names):
    model = gt.layers.Sequential([gt.layers.Flatten(), gt.layers.Dense(4, activation="relu"), gt.layers.Dense(2)])
    y = model(gt.ones((3, 2, 3)))
    assert y.shape == (3, 2)
    assert [v.name for v in model.trainable_variables] == [
        "dense/kernel:0",
        "dense/bias:0",
        "dense_1/kernel:0",
        "dense_1/bias:0",
    ]
    assert model.name == "sequential" and len(model.layers) == 3
    assert [s.name for s in model.submodules] == ["flatten", "dense", "dense_1"]
    with gt.GradientTape() as tape:
        loss = gt.reduce_sum(model(gt.ones((3, 6))))
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None and g.shape == v.shape for g, v in zip(grads, model.trainable_variables))
    assert gt.layers.Flatten()(gt.ones((4,))).shape == (4, 1)


def test_custom_layer_tracks_add_weight_and_sublayers_in_keras_order(backend, fresh_names):
    class Block(gt.layers.Layer):
        def __init__(self):
            super().__init__()
            self.inner = gt.layers.Dense(2, name="inner")

        def build(self, input_shape):
            self.scale = self.add_weight("scale", (input_shape[-1],), initializer="ones")
            self.offset = self.add_weight("offset", (), initializer="zeros", trainable=False)

        def call(self, x):
            return self.inner(x * self.scale + self.offset)

    block = Block()
    assert block.name == "block"
    block(gt.ones((1, 3)))
    assert [v.name for v in block.trainable_variables] == ["block/scale:0", "inner/kernel:0", "inner/bias:0"]
    assert [v.name for v in block.variables] == ["block/scale:0", "block/offset:0", "inner/kernel:0", "inner/bias:0"]
    assert [v.name for v in block.non_trainable_variables] == ["block/offset:0"]
    block.trainable = False
    assert block.trainable_variables == [] and len(block.non_trainable_variables) == 4
    weights = block.get_weights()
    block.set_weights([w + 1 for w in weights])
    np.testing.assert_allclose(block.scale.numpy(), weights[0] + 1)
    assert block.count_params() == 3 + 1 + 6 + 2


def test_dropout_layer(backend, fresh_names):
    layer = gt.layers.Dropout(0.5, seed=1)
    x = gt.ones((100, 10))
    assert layer(x) is x
    y = layer(x, training=True).numpy()
    assert 0.4 < (y != 0).mean() < 0.6 and set(np.unique(y).tolist()) <= {0.0, 2.0}
    model = gt.layers.Sequential([gt.layers.Dropout(0.5, seed=1)])
    assert model(x, training=False) is not None


def test_layer_regularization_losses(backend, fresh_names):
    layer = gt.layers.Dense(2, kernel_regularizer="l2", kernel_initializer="ones")
    layer(gt.ones((1, 3)))
    (loss,) = layer.losses
    np.testing.assert_allclose(float(loss), 0.01 * 6, rtol=1e-6)


def test_layer_builds_on_the_inputs_backend(fresh_names):
    backends = gt.available_backends()
    other = next((b for b in backends if b != "numpy"), None)
    if other is None:
        pytest.skip("needs a second backend")
    with gt.use_backend(other):
        x = gt.ones((1, 3))
    layer = gt.layers.Dense(2)
    layer(x)  # numpy is active, the input is not
    assert layer.kernel.backend == other


# ---------------------------------------------------------------------------------------- optimizers
def _quadratic_grads(ws, target=(3.0, -1.0)):
    with gt.GradientTape() as t:
        loss = gt.sum(gt.square(ws - gt.constant(np.asarray(target), dtype=ws.dtype)))
    return t.gradient(loss, ws)


G1 = np.array([0.5, -2.0])
G2 = np.array([1.0, 0.25])
W0 = np.array([1.0, 2.0])


def _two_steps(opt):
    w = gt.Variable(c64(W0), name="w")
    opt.apply_gradients([(c64(G1), w)])
    w1 = w.numpy()
    opt.apply_gradients(zip([c64(G2)], [w]))
    return w1, w.numpy()


def test_sgd_defaults_and_plain_step(backend):
    opt = gt.optimizers.SGD()
    assert opt.learning_rate == 0.01 and opt.momentum == 0.0 and opt.nesterov is False
    w1, w2 = _two_steps(gt.optimizers.SGD(0.1))
    np.testing.assert_allclose(w1, W0 - 0.1 * G1, rtol=1e-15)
    np.testing.assert_allclose(w2, W0 - 0.1 * G1 - 0.1 * G2, rtol=1e-15)


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_momentum(backend, nesterov):
    lr, mu = 0.1, 0.9
    w1, w2 = _two_steps(gt.optimizers.SGD(lr, momentum=mu, nesterov=nesterov))
    m1 = -lr * G1
    m2 = mu * m1 - lr * G2
    if nesterov:
        e1 = W0 + mu * m1 - lr * G1
        e2 = e1 + mu * m2 - lr * G2
    else:
        e1 = W0 + m1
        e2 = e1 + m2
    np.testing.assert_allclose(w1, e1, rtol=1e-14)
    np.testing.assert_allclose(w2, e2, rtol=1e-14)


@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_keras_formula(backend, amsgrad):
    opt = gt.optimizers.Adam(0.01, amsgrad=amsgrad)
    assert (opt.beta_1, opt.beta_2, opt.epsilon) == (0.9, 0.999, 1e-7)
    w1, w2 = _two_steps(opt)
    b1, b2, eps, lr = 0.9, 0.999, 1e-7, 0.01
    w, m, v, vh = W0.copy(), 0.0, 0.0, 0.0
    want = []
    for t, g in enumerate([G1, G2], start=1):
        alpha = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
        m = m + (g - m) * (1 - b1)
        v = v + (g * g - v) * (1 - b2)
        vh = np.maximum(vh, v)
        w = w - m * alpha / (np.sqrt(vh if amsgrad else v) + eps)
        want.append(w)
    np.testing.assert_allclose(w1, want[0], rtol=1e-13)
    np.testing.assert_allclose(w2, want[1], rtol=1e-13)
    assert int(opt.iterations) == 2


@pytest.mark.parametrize("centered,momentum", [(False, 0.0), (True, 0.0), (False, 0.5), (True, 0.5)])
def test_rmsprop_keras_formula(backend, centered, momentum):
    opt = gt.optimizers.RMSprop(0.01, momentum=momentum, centered=centered)
    w1, w2 = _two_steps(opt)
    rho, eps, lr = 0.9, 1e-7, 0.01
    w, s, a, mom = W0.copy(), 0.0, 0.0, 0.0
    want = []
    for g in (G1, G2):
        s = rho * s + (1 - rho) * g * g
        if centered:
            a = rho * a + (1 - rho) * g
            den = s - a * a + eps
        else:
            den = s + eps
        inc = lr * g / np.sqrt(den)
        if momentum > 0:
            mom = momentum * mom + inc
            w = w - mom
        else:
            w = w - inc
        want.append(w)
    np.testing.assert_allclose(w1, want[0], rtol=1e-13)
    np.testing.assert_allclose(w2, want[1], rtol=1e-13)


def test_adagrad_and_adamw(backend):
    w1, _ = _two_steps(gt.optimizers.Adagrad(0.1))
    np.testing.assert_allclose(w1, W0 - 0.1 * G1 / np.sqrt(0.1 + G1 * G1 + 1e-7), rtol=1e-13)
    opt = gt.optimizers.AdamW(0.01, weight_decay=0.1)
    w1, _ = _two_steps(opt)
    decayed = W0 - W0 * 0.1 * 0.01
    alpha = 0.01 * math.sqrt(1 - 0.999) / (1 - 0.9)
    m, v = G1 * 0.1, G1 * G1 * 0.001
    np.testing.assert_allclose(w1, decayed - m * alpha / (np.sqrt(v) + 1e-7), rtol=1e-13)


def test_defaults_follow_keras():
    adam, rms = gt.optimizers.Adam(), gt.optimizers.RMSprop()
    assert adam.learning_rate == 0.001 and adam.amsgrad is False
    assert (rms.learning_rate, rms.rho, rms.momentum, rms.epsilon, rms.centered) == (0.001, 0.9, 0.0, 1e-7, False)
    with pytest.raises(ValueError, match="momentum"):
        gt.optimizers.SGD(momentum=1.5)


def test_none_gradients_are_skipped_with_a_warning(backend):
    a, b = gt.Variable(c64([1.0]), name="a"), gt.Variable(c64([2.0]), name="b")
    opt = gt.optimizers.SGD(0.5)
    with pytest.warns(UserWarning, match=r"Gradients do not exist for variables \['b:0'\]"):
        opt.apply_gradients(zip([c64([1.0]), None], [a, b]))
    assert a.numpy().tolist() == [0.5] and b.numpy().tolist() == [2.0]
    assert int(opt.iterations) == 1
    with pytest.raises(ValueError, match="No gradients"):
        opt.apply_gradients([(None, a)])


def test_slot_variables_are_per_variable(backend):
    opt = gt.optimizers.Adam()
    w = gt.Variable([1.0, 2.0], name="dense/kernel")
    b = gt.Variable(0.0, name="dense/bias")
    opt.apply_gradients(zip([gt.constant([1.0, 1.0]), gt.constant(1.0)], [w, b]))
    opt.apply_gradients(zip([gt.constant([1.0, 1.0]), gt.constant(1.0)], [w, b]))
    names = [v.name for v in opt.variables]
    assert names == [
        "adam/iteration:0",
        "adam/dense_kernel_momentum:0",
        "adam/dense_kernel_velocity:0",
        "adam/dense_bias_momentum:0",
        "adam/dense_bias_velocity:0",
    ]
    assert all(not v.trainable for v in opt.variables)
    assert opt.variables[1].shape == (2,) and opt.iterations.dtype == gt.int64


def test_updates_are_not_recorded_on_tapes(backend):
    w = gt.Variable([1.0, 2.0], name="w")
    opt = gt.optimizers.Adam(0.1)
    with gt.GradientTape() as tape:
        opt.apply_gradients([(gt.constant([1.0, 1.0]), w)])
    assert tape.watched_variables() == ()  # nothing was read through an op


def test_learning_rate_schedules_and_clipping(backend):
    sched = gt.optimizers.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    opt = gt.optimizers.SGD(sched)
    w = gt.Variable(c64([0.0]), name="w")
    opt.apply_gradients([(c64([1.0]), w)])
    opt.apply_gradients([(c64([1.0]), w)])
    np.testing.assert_allclose(w.numpy(), [-0.1 - 0.05])
    assert opt.learning_rate == 0.025
    w = gt.Variable(c64([0.0, 0.0]), name="w")
    gt.optimizers.SGD(1.0, clipnorm=1.0).apply_gradients([(c64([3.0, 4.0]), w)])
    np.testing.assert_allclose(w.numpy(), [-0.6, -0.8])
    w = gt.Variable(c64([0.0, 0.0]), name="w")
    gt.optimizers.SGD(1.0, clipvalue=0.5).apply_gradients([(c64([3.0, -0.25]), w)])
    np.testing.assert_allclose(w.numpy(), [-0.5, 0.25])
    w, v = gt.Variable(c64([0.0]), name="w"), gt.Variable(c64([0.0]), name="v")
    gt.optimizers.SGD(1.0, global_clipnorm=1.0).apply_gradients([(c64([3.0]), w), (c64([4.0]), v)])
    np.testing.assert_allclose([float(w), float(v)], [-0.6, -0.8])


def test_minimize_with_a_callable_loss(backend):
    w = gt.Variable([0.0, 0.0], name="w")
    opt = gt.optimizers.SGD(0.25)
    for _ in range(20):
        opt.minimize(lambda: gt.sum(gt.square(w - gt.constant([1.0, -2.0]))), [w])
    np.testing.assert_allclose(w.numpy(), [1.0, -2.0], atol=1e-4)
    with pytest.raises(ValueError, match="tape"):
        opt.minimize(gt.constant(1.0), [w])


@pytest.mark.parametrize("name", ["sgd", "adam", "rmsprop", "adagrad", "adamw"])
def test_optimizers_minimise_a_quadratic(backend, name):
    lr = {"sgd": 0.2, "adam": 0.2, "rmsprop": 0.05, "adagrad": 1.0, "adamw": 0.2}[name]
    opt = gt.optimizers.get(name)
    opt.learning_rate = lr
    w = gt.Variable([0.0, 0.0], name="w")
    lazy = gt.get_backend().lazy
    for _ in range(150):
        opt.apply_gradients([(_quadratic_grads(w), w)])
        if lazy:  # (dask: each step persisted, or the variables' graphs grow too deep: docs/scaling.md)
            state = [w, *opt.variables]
            for v, now in zip(state, gt.persist(*state)):
                v.assign(now)
    np.testing.assert_allclose(w.numpy(), [3.0, -1.0], atol=0.1)
    assert w.dtype == gt.float32 and w.backend == backend.split(":")[0]


def test_training_a_dense_model_end_to_end(backend, fresh_names):
    """A Dense layer fitted to a linear map with Adam: the loss falls by orders of magnitude."""
    gt.random.set_seed(0)
    x = gt.random.normal((64, 3))
    y = x @ gt.constant([[1.0], [-2.0], [0.5]]) + 0.3
    layer = gt.layers.Dense(1)
    opt = gt.optimizers.Adam(0.1)
    losses = []
    for _ in range(150):
        with gt.GradientTape() as tape:
            loss = gt.reduce_mean(gt.losses.mean_squared_error(y, layer(x)))
        grads = tape.gradient(loss, layer.trainable_variables)
        opt.apply_gradients(zip(grads, layer.trainable_variables))
        losses.append(float(loss))
    gt.random.set_seed(None)
    assert losses[-1] < 1e-3 * losses[0]
    np.testing.assert_allclose(layer.kernel.numpy().ravel(), [1.0, -2.0, 0.5], atol=0.05)
    np.testing.assert_allclose(layer.bias.numpy(), [0.3], atol=0.05)


def test_apply_gradients_checks_its_inputs(backend):
    w = gt.Variable([1.0], name="w")
    opt = gt.optimizers.SGD()
    with pytest.raises(TypeError, match="Variable"):
        opt.apply_gradients([(gt.constant([1.0]), gt.constant([1.0]))])
    with pytest.raises(ValueError, match="shape"):
        opt.apply_gradients([(gt.constant([1.0, 2.0]), w)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.apply_gradients([(np.array([1.0]), w)])  # a NumPy gradient is converted
    np.testing.assert_allclose(w.numpy(), [0.99], rtol=1e-6)
