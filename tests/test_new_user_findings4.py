"""What a fourth newcomer, from Keras and PyTorch, met in gradtape's training pieces (the ``newuser4``
brief): each test fails on the code before its fix, and runs on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt

O = gt.optimizers


@pytest.mark.parametrize("make", [lambda: O.SGD(0.5), lambda: O.SGD(0.5, momentum=0.9), lambda: O.Adam(0.5)])
def test_an_optimizer_refuses_an_integer_variable_naming_it(backend, make):
    """SGD(0.5) on an int64 variable computed ``lr * g`` in int64 (0) and left the variable as it was,
    silently; Adam failed on one of its own slots.  Now both name the variable and what to do (TF and
    PyTorch refuse integer variables too), and leave it untouched."""
    v = gt.Variable(gt.constant([1, 2, 3]), name="counts")
    with pytest.raises(ValueError, match=r"'counts:0' is int64; optimizers update floating-point .*gt\.cast"):
        make().apply_gradients([(gt.constant([1, 1, 1]), v)])
    np.testing.assert_array_equal(np.asarray(v.numpy()), [1, 2, 3])


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda: O.Adam(beta_1=1.0), r"Adam: `beta_1` must be in \[0.0, 1.0\)"),  # was a NaN step
        (lambda: O.AdamW(beta_2=1.0), r"AdamW: `beta_2` must be in \[0.0, 1.0\)"),  # was no step at all
        (lambda: O.RMSprop(rho=2.0), r"RMSprop: `rho` must be in \[0.0, 1.0\]"),  # a negative mean square
        (lambda: O.RMSprop(momentum=-0.5), r"RMSprop: `momentum` must be >= 0.0"),  # was dropped
        (lambda: O.SGD(clipnorm=-1.0), r"SGD: `clipnorm` must be >= 0.0"),  # turned the gradient around
        (lambda: O.SGD(clipvalue=-1.0), r"SGD: `clipvalue` must be >= 0.0"),
        (lambda: O.Adam(global_clipnorm=-1.0), r"Adam: `global_clipnorm` must be >= 0.0"),
        (lambda: O.SGD(weight_decay=-0.1), r"SGD: `weight_decay` must be >= 0.0"),  # grew the weights
        (lambda: O.Adagrad(initial_accumulator_value=-1.0), r"`initial_accumulator_value` must be >= 0.0"),
        (lambda: O.Adam(epsilon=float("nan")), r"`epsilon` must be >= 0.0"),
    ],
)
def test_an_optimizer_refuses_hyperparameters_that_give_nan_or_wrong_steps(backend, make, says):
    """PyTorch's optimizers refuse these (``Invalid beta parameter at index 0: 1.0``); gradtape took
    them and stepped to NaN (Adam ``beta_1=1``), not at all (``beta_2=1``), or the wrong way (a
    negative ``clipnorm``: ``g * c / max(|g|, c)`` is ``-g / |g|``)."""
    with pytest.raises(ValueError, match=says):
        make()


def test_the_accepted_hyperparameters_still_step_as_torch(backend):
    """The bounds' ends that are valid (``beta = 0``, ``rho = 1``, ``epsilon = 0``, NumPy scalars)
    still construct, and Adam's step is torch.optim.Adam's (epsilon 0: the two place it differently)."""
    torch = pytest.importorskip("torch", reason="torch.optim gives the reference step")
    O.Adam(beta_1=0.0, beta_2=np.float32(0.5), epsilon=0.0)
    O.RMSprop(rho=1.0, momentum=np.float64(0.5))
    x0 = np.array([0.5, -1.0, 2.0])
    w = gt.Variable(gt.constant(x0, dtype=gt.float64))
    opt = O.Adam(0.1, beta_1=0.5, beta_2=0.75, epsilon=0.0)
    tw = torch.tensor(x0, requires_grad=True)
    topt = torch.optim.Adam([tw], lr=0.1, betas=(0.5, 0.75), eps=0.0)
    for _ in range(4):
        with gt.GradientTape() as tape:
            loss = gt.sum(w**4)
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        topt.zero_grad()
        (tw**4).sum().backward()
        topt.step()
    np.testing.assert_allclose(np.asarray(w.numpy()), tw.detach().numpy(), rtol=1e-12)


def _np(t):
    return np.asarray(t.numpy())


def test_sparse_crossentropy_with_ignore_class_weights_each_example_once(backend):
    """Sample weights of shape ``(n, 1)`` (as Keras' ``fit`` gives them) broadcast against the ``n``
    losses to ``(n, n)`` in ``SparseCategoricalCrossentropy(ignore_class=...)`` (the other losses
    squeezed them): a wrong number, silently.  Compared with torch's ``ignore_index``."""
    torch = pytest.importorskip("torch", reason="torch.nn.functional.cross_entropy gives the reference")
    rng = np.random.default_rng(1)
    logits, labels, sw = rng.normal(size=(5, 4)) * 3, np.array([0, 3, -1, 2, -1]), rng.uniform(size=5)
    per = torch.nn.functional.cross_entropy(
        torch.tensor(logits), torch.tensor(labels), ignore_index=-1, reduction="none"
    ).numpy()
    loss = gt.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)
    got = loss(gt.constant(labels), gt.constant(logits, dtype=gt.float64), sample_weight=gt.constant(sw[:, None]))
    np.testing.assert_allclose(_np(got), (per * sw).sum() / 3, rtol=1e-12)


def test_a_batch_of_ignored_labels_or_no_examples_has_loss_zero_not_nan(backend):
    """Keras divides with ``divide_no_nan``: a batch whose labels are all ``ignore_class`` (padding),
    or an empty batch, has loss 0; gradtape gave NaN (0 / 0), and a NaN step after it."""
    x = gt.Variable(gt.ones((2, 3), dtype=gt.float64))
    with gt.GradientTape() as tape:
        loss = gt.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)(gt.constant([-1, -1]), x)
    assert float(loss) == 0.0
    np.testing.assert_array_equal(_np(tape.gradient(loss, x)), np.zeros((2, 3)))
    empty = gt.zeros((0, 3), dtype=gt.float64)
    assert float(gt.losses.MeanSquaredError()(empty, empty)) == 0.0


def test_a_loss_computes_in_the_dtype_it_was_given(backend):
    """``MeanSquaredError(dtype="float64")`` kept the ``dtype`` and ignored it (a float32 loss of
    float32 inputs); Keras computes the loss in it."""
    rng = np.random.default_rng(2)
    yt, yp = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    got = gt.losses.MeanSquaredError(dtype="float64")(
        gt.constant(yt, dtype=gt.float32), gt.constant(yp, dtype=gt.float32)
    )
    assert got.dtype == gt.float64
    want = ((yt.astype(np.float32).astype(np.float64) - yp.astype(np.float32).astype(np.float64)) ** 2).mean()
    np.testing.assert_allclose(float(got), want, rtol=1e-14)
    labels = gt.constant([0, 2, 1, 1])  # integer labels stay labels
    got = gt.losses.SparseCategoricalCrossentropy(from_logits=True, dtype="float64")(
        labels, gt.constant(yp, dtype=gt.float32)
    )
    assert got.dtype == gt.float64


def test_dropout_of_rate_one_and_noise_shape_with_none_as_keras(backend):
    """``Dropout(1.0)`` (which the constructor accepts) raised ZeroDivisionError when training; it
    zeroes everything, as PyTorch's.  ``noise_shape=(None, 1, 5)`` (Keras' way to share a mask
    along an axis) failed in the random draw; a None is the input's size there."""
    x = gt.ones((4, 3, 5), dtype=gt.float64)
    np.testing.assert_array_equal(_np(gt.layers.Dropout(1.0)(x, training=True)), np.zeros((4, 3, 5)))
    got = _np(gt.layers.Dropout(0.5, noise_shape=(None, 1, 5), seed=3)(x, training=True))
    assert set(np.unique(got)) <= {0.0, 2.0} and 0 < (got == 0).sum() < got.size
    np.testing.assert_array_equal(got, np.broadcast_to(got[:, :1, :], got.shape))  # one mask along axis 1
    with pytest.raises(ValueError, match=r"noise_shape \(4, 1\) has 2 axes, the input 3"):
        gt.layers.Dropout(0.5, noise_shape=(4, 1))(x, training=True)


class _HalfEvery(O.LearningRateSchedule):
    def __init__(self, rate, every):
        self.rate, self.every = rate, every

    def __call__(self, step):
        return self.rate * 0.5 ** (step // self.every)

    def get_config(self):
        return {"rate": self.rate, "every": self.every}


@pytest.mark.parametrize(
    "schedule", [O.ExponentialDecay(0.1, 2, 0.5, staircase=True), _HalfEvery(0.2, 3)], ids=["exponential", "custom"]
)
def test_an_optimizer_with_a_schedule_is_rebuilt_from_its_config(backend, schedule):
    """``get_config``'s docstring promised ``type(opt)(**opt.get_config())`` a fresh optimizer with the
    same settings; with a schedule it gave the schedule's bare arguments, and the constructor refused
    them (``learning_rate should be float, or an instance of LearningRateSchedule``).  The config now
    holds Keras' ``{"class_name", "config"}`` form, which ``from_config`` and the constructor take."""
    opt = O.Adam(schedule, beta_1=0.8)
    config = opt.get_config()
    assert config["learning_rate"]["class_name"] == type(schedule).__name__
    for again in (O.Adam.from_config(config), O.Adam(**config)):
        assert type(again._learning_rate) is type(schedule) and again.beta_1 == 0.8
        for step in (0, 3, 7):
            assert again._lr_at(step) == schedule(step)
    with pytest.raises(ValueError, match="no subclass of gt.optimizers.LearningRateSchedule has that name"):
        O.SGD({"class_name": "NoSuchSchedule", "config": {}})


@pytest.mark.parametrize(
    "make", [lambda: O.Adam(0.01), lambda: O.AdamW(0.01), lambda: O.RMSprop(), lambda: O.Adagrad()]
)
def test_adaptive_optimizers_refuse_complex_variables(backend, make):
    """Adam, RMSprop and Adagrad squared a complex gradient as ``g * g`` (not a magnitude): steps unlike
    PyTorch's (which treats the parts as two reals) by 3e-2 after three steps, and NaN with AMSGrad.
    Refused now, naming the way out; SGD's rule (PyTorch's on complex parameters) still runs."""
    z = np.array([1 + 2j, -0.5 + 0.3j])
    w = gt.Variable(gt.constant(z, dtype=gt.complex128), name="z")
    opt = make()
    with pytest.raises(ValueError, match=r"'z:0' is complex128; \w+'s update rule is defined for real variables only"):
        opt.apply_gradients([(gt.constant(z, dtype=gt.complex128), w)])
    np.testing.assert_array_equal(_np(w), z)


@pytest.mark.parametrize("kind", ["clipnorm", "global_clipnorm"])
def test_clipping_a_complex_gradient_by_norm_uses_its_magnitude(backend, kind):
    """``clipnorm`` summed ``g * g`` for a complex ``g`` (a complex "norm": wrong steps, silently); the
    norm is ``sqrt(sum |g|^2)``, as torch.nn.utils.clip_grad_norm_.  ``clipvalue`` of a complex
    gradient (undefined; torch.clamp refuses it) zeroed the imaginary parts; it is refused."""
    z, g = np.array([1 + 2j, -0.5 + 0.3j]), np.array([3 + 4j, 0 - 12j])
    w = gt.Variable(gt.constant(z, dtype=gt.complex128))
    O.SGD(0.5, **{kind: 1.0}).apply_gradients([(gt.constant(g, dtype=gt.complex128), w)])
    np.testing.assert_allclose(_np(w), z - 0.5 * g / 13.0, rtol=1e-14)
    with pytest.raises(ValueError, match="clipvalue is defined for real variables only"):
        O.SGD(0.5, clipvalue=1.0).apply_gradients([(gt.constant(g, dtype=gt.complex128), w)])


def test_exponential_decay_refuses_a_negative_rate(backend):
    """``ExponentialDecay(0.1, 10, -0.5)``: ``(-0.5) ** (step / 10)`` is NaN in a step (the variables
    became NaN, silently) and complex in Python (``learning_rate`` raised float()'s TypeError)."""
    with pytest.raises(ValueError, match=r"ExponentialDecay: `decay_rate` must be >= 0.0. Received: decay_rate=-0.5"):
        O.ExponentialDecay(0.1, 10, -0.5)
    with pytest.raises(ValueError, match=r"`initial_learning_rate` must be >= 0.0"):
        O.ExponentialDecay(-0.1, 10, 0.5)
    v = gt.Variable(gt.constant([1.0, 2.0], dtype=gt.float64))
    opt = O.SGD(O.ExponentialDecay(0.1, 2, 0.5))  # a valid one still steps as its formula says
    for _ in range(3):
        opt.apply_gradients([(gt.constant([1.0, 1.0], dtype=gt.float64), v)])
    np.testing.assert_allclose(_np(v), np.array([1.0, 2.0]) - sum(0.1 * 0.5 ** (k / 2) for k in range(3)), rtol=1e-14)


def test_exclude_from_weight_decay_takes_keras_patterns(backend):
    """Keras matches ``var_names`` with ``re.search`` (``"bias$"``, ``"norm|bias"``); gradtape looked for
    the pattern as a plain substring, so such a pattern excluded nothing and the biases decayed, silently."""
    w = gt.Variable(gt.constant([1.0, 1.0], dtype=gt.float64), name="dense/kernel")
    b = gt.Variable(gt.constant([1.0, 1.0], dtype=gt.float64), name="dense/bias")
    opt = O.AdamW(0.1, weight_decay=0.5)
    opt.exclude_from_weight_decay(var_names=["bias:0$|norm"])
    zero = gt.zeros((2,), dtype=gt.float64)
    opt.apply_gradients([(zero, w), (zero, b)])  # a zero gradient: only the decay moves a variable
    np.testing.assert_allclose(_np(w), [0.95, 0.95], rtol=1e-14)
    np.testing.assert_array_equal(_np(b), [1.0, 1.0])
