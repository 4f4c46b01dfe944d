"""TensorFlow names a training step uses (``gt.reduce_any``, ``gt.clip_by_*``, ``gt.identity``,
``gt.one_hot``, ``gt.math.top_k``, ``gt.math.xlogy``, ...): values, dtypes, errors and gradients
against TensorFlow 2.21's (recorded below as constants: the tests never import TensorFlow), against
central finite differences in float64, on every installed backend, and under ``gt.function``.

The one documented difference: TF's ``global_norm`` / ``clip_by_global_norm`` give NaN gradients
when every tensor is zero; gradtape gives finite ones (0 for the norm, the clipping scale for the
clipped tensors, as TF's own ``clip_by_norm`` gives at zero)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradtape as gt
from gradtape.testing import numeric_gradient

pytestmark = [
    # a traced step that disagrees with eager warns and falls back: an error here
    pytest.mark.filterwarnings("error:gt.function:UserWarning"),
    # NumPy warns where TF's values are inf/NaN by definition (log(0) in xlogy, the mean of an empty
    # tensor in zero_fraction): these tests check those values
    pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:Mean of empty:RuntimeWarning"),
]


def c64(a):
    return gt.constant(np.asarray(a, dtype=np.float64))


def value(t):
    return None if t is None else np.asarray(t.numpy())


def tape_grads(f, arrays, weights=None):
    """``f(*tensors)`` and the gradient of ``sum(out * w)`` (summed over ``f``'s outputs) for each
    float64 input in ``arrays``."""
    xs = [c64(a) for a in arrays]
    with gt.GradientTape() as tape:
        for x in xs:
            tape.watch(x)
        out = f(*xs)
        loss = _loss(out, weights)
    return out, tape.gradient(loss, xs)


def _loss(out, weights):
    outs = [o for o in (out if isinstance(out, (list, tuple)) else [out]) if o is not None]
    ws = list(weights) if isinstance(weights, tuple) else [weights] * len(outs)  # a tuple: one per output
    total = 0.0
    for o, w in zip(outs, ws):
        total = total + gt.sum(o if w is None else o * c64(np.reshape(w, o.shape)))
    return total


def fd(f, arrays, weights=None):
    """Central finite differences of the same loss as :func:`tape_grads`, in float64."""
    return numeric_gradient(lambda *a: float(_loss(f(*[c64(x) for x in a]), weights)), [np.asarray(a) for a in arrays])


def assert_grads(f, arrays, want, weights=None, rtol=1e-12, atol=1e-12, fd_check=True):
    """Tape gradients equal TensorFlow's ``want`` and (``fd_check``) central finite differences."""
    _, got = tape_grads(f, arrays, weights)
    for g, w in zip(got, want):
        np.testing.assert_allclose(value(g), w, rtol=rtol, atol=atol)
    if fd_check:
        assert_fd(f, arrays, weights)


def assert_fd(f, arrays, weights=None):
    """Tape gradients equal central finite differences (float64) at a point where ``f`` is smooth."""
    _, got = tape_grads(f, arrays, weights)
    for g, n in zip(got, fd(f, arrays, weights)):
        np.testing.assert_allclose(value(g), n, rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- reduce_any / reduce_all
B = [[True, False, False], [True, True, True]]


def test_reduce_any_all_values(backend):
    b = gt.constant(B)
    # (TensorFlow 2.21)
    cases = [
        (gt.reduce_any(b), (), True),
        (gt.reduce_any(b, axis=0), (3,), [True, True, True]),
        (gt.reduce_all(b, axis=1, keepdims=True), (2, 1), [[False], [True]]),
        (gt.reduce_all(b, axis=[0, 1]), (), False),
        (gt.reduce_any(b, 1), (2,), [True, True]),
        (gt.math.reduce_all(b, axis=-1), (2,), [False, True]),
        (gt.reduce_any([True, False]), (), True),
        (gt.reduce_all(gt.zeros([0], dtype=gt.bool)), (), True),
        (gt.reduce_any(gt.zeros([0], dtype=gt.bool)), (), False),
    ]
    for got, shape, want in cases:
        assert got.dtype == gt.bool and got.shape == shape and got.backend == backend
        np.testing.assert_array_equal(value(got), want)
    assert gt.reduce_any is gt.math.reduce_any and gt.reduce_all is gt.math.reduce_all


@pytest.mark.parametrize("fn", ["reduce_any", "reduce_all"])
def test_reduce_any_all_need_bool(backend, fn):
    # TensorFlow 2.21: InvalidArgumentError "... was expected to be a bool tensor but is a int32 tensor"
    for x in (gt.constant([1, 0]), gt.constant([1.0, 0.0])):
        with pytest.raises(TypeError, match=rf"{fn}: input_tensor must be bool.*{backend}.*x != 0"):
            getattr(gt, fn)(x)


# --------------------------------------------------------------------------- clip_by_value
X6 = [-2.0, -1.0, 0.0, 0.5, 1.0, 3.0]
W6 = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_clip_by_value_values(backend):
    x = c64(X6)
    # (TensorFlow 2.21)
    np.testing.assert_array_equal(value(gt.clip_by_value(x, -1.0, 1.0)), [-1.0, -1.0, 0.0, 0.5, 1.0, 1.0])
    np.testing.assert_array_equal(value(gt.clip_by_value(x, 1.0, -1.0)), [1.0] * 6)  # min > max: min wins
    y = gt.clip_by_value(gt.constant([1, 5, 9], dtype=gt.int32), 2, 6)
    assert y.dtype == gt.int32 and value(y).tolist() == [2, 5, 6]
    f32 = gt.constant([1.0, 5.0, 9.0])
    y = gt.clip_by_value(f32, gt.constant([2.0, 2.0, 2.0]), gt.constant([6.0, 4.0, 10.0]))
    assert y.dtype == gt.float32 and value(y).tolist() == [2.0, 4.0, 9.0]
    assert gt.clip_by_value(f32, 2.0, 6.0).dtype == gt.float32  # Python bounds take t's dtype
    y = gt.clip_by_value(gt.constant([[1.0, 5.0], [7.0, 0.0]]), gt.constant([[2.0], [3.0]]), 6.0)
    assert value(y).tolist() == [[2.0, 5.0], [6.0, 3.0]]


def test_clip_by_value_errors(backend):
    # TensorFlow 2.21: TypeError "Cannot convert 6.5 to EagerTensor of dtype int32"
    with pytest.raises(TypeError, match=r"clip_by_value: cannot convert clip_value_max=6.5 to t's dtype int32"):
        gt.clip_by_value(gt.constant([1, 5, 9], dtype=gt.int32), 2.5, 6.5)
    # TensorFlow 2.21: InvalidArgumentError "cannot compute Maximum as input #1 was expected to be a float tensor"
    with pytest.raises(TypeError, match=r"clip_by_value: clip_value_min has dtype float64 .* float32.*gt.cast"):
        gt.clip_by_value(gt.constant([1.0, 5.0]), gt.constant(2.0, dtype=gt.float64), 6.0)
    # TensorFlow 2.21: ValueError "Shapes (2,) and (2, 2) are incompatible"
    with pytest.raises(ValueError, match=r"clip_by_value: .* do not broadcast to t's shape \(2,\)"):
        gt.clip_by_value(gt.constant([1.0, 5.0]), gt.constant([[2.0], [3.0]]), 6.0)


def test_clip_by_value_gradients(backend):
    # (TensorFlow 2.21) d/dt, d/dmin, d/dmax of sum(clip * W6): the bounds themselves pass to t
    want = [[0.0, 2.0, 3.0, 4.0, 5.0, 0.0], 1.0, 6.0]
    f = lambda t, lo, hi: gt.clip_by_value(t, lo, hi)
    assert_grads(f, [X6, -1.0, 1.0], want, W6, atol=0, fd_check=False)  # (X6 holds the bounds: kinks)
    assert_fd(f, [[-2.0, -0.7, 0.0, 0.5, 0.9, 3.0], -1.0, 1.0], W6)
    assert_fd(f, [[1.0, 5.0, 9.0], [2.0, 2.0, 2.5], [6.0, 4.0, 10.0]], [1.0, 2.0, 3.0])  # tensor bounds


# --------------------------------------------------------------------------- clip_by_norm
V = [[3.0, 4.0], [1.0, 2.0]]
W4 = [[1.0, 2.0], [3.0, 4.0]]


def test_clip_by_norm_values(backend):
    v = c64(V)
    # (TensorFlow 2.21)
    cases = [
        (gt.clip_by_norm(v, 2.0), [[1.0954451150103321, 1.4605934866804429], [0.3651483716701107, 0.7302967433402214]]),
        (gt.clip_by_norm(v, 2.0, axes=[1]), [[1.2, 1.6], [0.8944271909999159, 1.7888543819998317]]),
        (gt.clip_by_norm(v, 2.0, axes=1), [[1.2, 1.6], [0.8944271909999159, 1.7888543819998317]]),
        (gt.clip_by_norm(v, 100.0), V),
        (gt.clip_by_norm(gt.zeros([3], dtype=gt.float64), 1.0), [0.0, 0.0, 0.0]),
    ]
    for got, want in cases:
        assert got.dtype == gt.float64 and got.shape == np.shape(want)
        np.testing.assert_allclose(value(got), want, rtol=1e-15)
    f = gt.constant([3.0, 4.0])
    for clip, want in [
        (2.0, [1.2000000476837158, 1.600000023841858]),
        (gt.constant(2.0, dtype=gt.float64), [1.2000000476837158, 1.600000023841858]),  # cast to t's dtype
        (-1.0, [0.0, 0.0]),  # a negative clip_norm counts as 0
        (0.0, [0.0, 0.0]),
        (gt.constant([1.0, 2.0]), [0.6000000238418579, 1.600000023841858]),
    ]:
        got = gt.clip_by_norm(f, clip)
        assert got.dtype == gt.float32
        np.testing.assert_allclose(value(got), want, rtol=1e-6)


def test_clip_by_norm_errors(backend):
    # TensorFlow 2.21: InvalidArgumentError "Value for attr 'T' of int32 is not in the list ... [Op:Sqrt]"
    with pytest.raises(TypeError, match=rf"clip_by_norm: t must be floating-point, got int64 on backend {backend}"):
        gt.clip_by_norm(gt.constant([3, 4]), 2)
    with pytest.raises(ValueError, match=r"clip_by_norm: .* do not broadcast to t's shape \(2,\)"):
        gt.clip_by_norm(gt.constant([3.0, 4.0]), gt.constant([[1.0], [2.0]]))


@pytest.mark.parametrize(
    "t, clip, axes, want",
    [
        # (TensorFlow 2.21) d/dt and d/dclip_norm of sum(clip_by_norm(t) * W)
        (
            V,
            2.0,
            None,
            [[[-0.4381780460041329, -0.3408051468921034], [0.8276696424522509, 0.9250425415642805]], 4.016632088371217],
        ),
        (V, 2.0, [1], [[[-0.128, 0.09600000000000009], [0.715541752799933, -0.35777087639996585]], 7.119349550499537]),
        (V, 100.0, None, [W4, 0.0]),
        # all zero: the two-where trick gives the identity, not NaN
        ([[0.0, 0.0], [0.0, 0.0]], 1.0, None, [W4, 0.0]),
    ],
    ids=["all-axes", "axis-1", "no-clip", "zero"],
)
def test_clip_by_norm_gradients(backend, t, clip, axes, want):
    f = lambda t, c: gt.clip_by_norm(t, c, axes=axes)
    if np.any(t):
        assert_grads(f, [t, clip], want, W4)
    else:  # (the norm has a kink at 0: finite differences do not apply there)
        _, got = tape_grads(f, [t, clip], W4)
        np.testing.assert_array_equal(value(got[0]), want[0])
        assert float(got[1]) == want[1]


def test_clip_by_norm_gradient_at_the_kink(backend):
    # (TensorFlow 2.21) norm == clip_norm: maximum's tie sends the gradient to the norm, as TF
    _, got = tape_grads(lambda t, c: gt.clip_by_norm(t, c), [[3.0, 4.0], 5.0], [1.0, 2.0])
    np.testing.assert_allclose(value(got[0]), [-0.3200000000000003, 0.23999999999999977], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(float(got[1]), 2.2, rtol=1e-12)


# --------------------------------------------------------------------------- global_norm / clip_by_global_norm
A = [[3.0, 4.0], [1.0, 2.0]]
B3 = [2.0, -1.0, 0.5]
WA, WB = [[1.0, 2.0], [3.0, 4.0]], [5.0, 6.0, 7.0]
NORM = 5.937171043518958  # (TensorFlow 2.21) global_norm([A, B3])


def test_global_norm_values(backend):
    a, b = c64(A), c64(B3)
    for lst in ([a, b], [a, None, b], (a, b)):
        n = gt.math.global_norm(lst)
        assert n.dtype == gt.float64 and n.shape == ()
        np.testing.assert_allclose(float(n), NORM, rtol=1e-15)
    for lst in ([None], []):  # (TensorFlow 2.21) a float32 0
        n = gt.math.global_norm(lst)
        assert n.dtype == gt.float32 and float(n) == 0.0
    n = gt.math.global_norm([gt.constant([3.0, 4.0])])
    assert n.dtype == gt.float32 and float(n) == 5.0


def test_global_norm_errors(backend):
    # (TensorFlow 2.21) TypeError "`t_list` should be a sequence of tensors. Received <class '...EagerTensor'>."
    for fn in (gt.math.global_norm, lambda t: gt.clip_by_global_norm(t, 1.0)):
        with pytest.raises(TypeError, match=r"`t_list` should be a sequence of tensors. Received .*Tensor"):
            fn(c64(A))
    # TensorFlow 2.21: InvalidArgumentError from Pack / L2Loss
    with pytest.raises(
        TypeError, match=r"global_norm: the tensors must share one floating-point dtype.*float32, float64"
    ):
        gt.math.global_norm([c64(A), gt.constant([1.0])])
    with pytest.raises(TypeError, match=rf"global_norm: .* got int64 \(backend {backend}\)"):
        gt.math.global_norm([gt.constant([3, 4])])
    # TensorFlow 2.21: TypeError "`x` and `y` must have the same dtype, got tf.float32 != tf.float64."
    with pytest.raises(TypeError, match=r"clip_by_global_norm: clip_norm has dtype float64 .* float32"):
        gt.clip_by_global_norm([gt.constant([3.0, 4.0])], gt.constant(2.0, dtype=gt.float64))


def test_clip_by_global_norm_values(backend):
    a, b = c64(A), c64(B3)
    out, n = gt.clip_by_global_norm([a, None, b], 2.0)
    # (TensorFlow 2.21)
    assert out[1] is None and len(out) == 3 and out[0].dtype == gt.float64
    np.testing.assert_allclose(float(n), NORM, rtol=1e-15)
    np.testing.assert_allclose(
        value(out[0]), [[1.0105823052798228, 1.3474430737064305], [0.3368607684266076, 0.6737215368532152]], rtol=1e-14
    )
    np.testing.assert_allclose(value(out[2]), [0.6737215368532152, -0.3368607684266076, 0.1684303842133038], rtol=1e-14)
    out, n = gt.clip_by_global_norm((a, b), 100.0)
    np.testing.assert_allclose(value(out[0]), A, rtol=1e-15)
    np.testing.assert_allclose(value(out[1]), B3, rtol=1e-15)
    out, n = gt.clip_by_global_norm([a, b], 2.0, use_norm=c64(4.0))
    assert float(n) == 4.0
    np.testing.assert_allclose(value(out[0]), [[1.5, 2.0], [0.5, 1.0]], rtol=1e-15)
    np.testing.assert_allclose(value(out[1]), [1.0, -0.5, 0.25], rtol=1e-15)
    for bad, norm in [([math.inf, 1.0], math.inf), ([math.nan, 1.0], math.nan)]:
        out, n = gt.clip_by_global_norm([c64(bad)], 2.0)
        assert np.all(np.isnan(value(out[0]))) and (math.isnan(float(n)) if math.isnan(norm) else float(n) == norm)
    out, n = gt.clip_by_global_norm([gt.zeros([2], dtype=gt.float64)], 2.0)
    assert value(out[0]).tolist() == [0.0, 0.0] and float(n) == 0.0
    f = gt.constant([3.0, 4.0])
    for clip, want in [(2.0, [1.2000000476837158, 1.600000023841858]), (0.0, [0.0, 0.0]), (-1.0, [3.0, 4.0])]:
        out, n = gt.clip_by_global_norm([f], clip)
        assert out[0].dtype == gt.float32 and n.dtype == gt.float32 and float(n) == 5.0
        np.testing.assert_allclose(value(out[0]), want, rtol=1e-6)
    out, n = gt.clip_by_global_norm([None], 2.0)
    assert out == [None] and n.dtype == gt.float32 and float(n) == 0.0


@pytest.mark.parametrize(
    "clip, want",
    [
        # (TensorFlow 2.21) d/dA, d/dB3, d/dclip_norm of sum(A' * WA) + sum(B3' * WB)
        (
            2.0,
            [
                [[-0.5088747778359393, -0.45392585816351394], [0.7286704565256406, 0.7836193761980659]],
                [1.1204801446246735, 2.3030764593138278, 2.2170694546091623],
                4.968696334292463,
            ],
        ),
        (100.0, [WA, WB, -5.551115123125783e-17]),  # (TF's 0 up to rounding)
    ],
    ids=["clipped", "not-clipped"],
)
def test_clip_by_global_norm_gradients(backend, clip, want):
    f = lambda a, b, c: gt.clip_by_global_norm([a, b], c)[0]
    assert_grads(f, [A, B3, clip], want, (WA, WB), atol=1e-15)


def test_global_norm_gradient(backend):
    # (TensorFlow 2.21) the same for the norm that clip_by_global_norm returns
    want = [
        [[0.5052911526399114, 0.6737215368532152], [0.1684303842133038, 0.3368607684266076]],
        [0.3368607684266076, -0.1684303842133038, 0.0842151921066519],
    ]
    assert_grads(lambda a, b: gt.math.global_norm([a, None, b]), [A, B3], want, atol=1e-15)
    assert_grads(lambda a, b: gt.clip_by_global_norm([a, b], 2.0)[1], [A, B3], want, atol=1e-15)


def test_clip_by_global_norm_zero_has_finite_gradient(backend):
    """TF 2.21 gives NaN for every one of these gradients (sqrt's at 0); gradtape gives the
    clipping scale (1) for the clipped tensors, 0 for the norm and 0 for clip_norm."""
    zeros = [np.zeros((2, 2)), np.zeros(3)]
    _, got = tape_grads(lambda a, b, c: gt.clip_by_global_norm([a, b], c)[0], [*zeros, 2.0], (WA, WB))
    np.testing.assert_array_equal(value(got[0]), WA)
    np.testing.assert_array_equal(value(got[1]), WB)
    assert float(got[2]) == 0.0
    _, got = tape_grads(lambda a, b: gt.math.global_norm([a, b]), zeros)
    assert all(np.all(value(g) == 0.0) for g in got)
    _, got = tape_grads(lambda a, b: gt.clip_by_global_norm([a, b], 2.0)[1], zeros)
    assert all(np.all(value(g) == 0.0) for g in got)


# --------------------------------------------------------------------------- identity / one_hot / top-level aliases
def test_identity(backend):
    v = gt.Variable(c64([1.0, 2.0]))
    y = gt.identity(v)
    # (TensorFlow 2.21) an EagerTensor (not a Variable) with the value; the gradient reaches the variable
    assert isinstance(y, gt.Tensor) and not isinstance(y, gt.Variable) and value(y).tolist() == [1.0, 2.0]
    with gt.GradientTape() as tape:
        loss = gt.sum(gt.identity(v) * c64([3.0, 4.0]))
    assert value(tape.gradient(loss, v)).tolist() == [3.0, 4.0]
    assert_grads(lambda x: gt.identity(x), [[0.5, -2.0]], [[3.0, 4.0]], [3.0, 4.0])
    t = c64([1.0])
    assert gt.identity(t) is not t
    b = gt.identity(gt.constant([True, False]))
    assert b.dtype == gt.bool and value(b).tolist() == [True, False]
    assert gt.identity(2.5).dtype == gt.float32 and float(gt.identity(2.5)) == 2.5
    assert value(gt.identity([1, 2])).tolist() == [1, 2]  # (TF: int32; gradtape's Python int is int64)


def test_one_hot_and_aliases(backend):
    assert gt.one_hot is gt.nn.one_hot
    # (TensorFlow 2.21)
    y = gt.one_hot(gt.constant([0, 2, -1, 3]), 3)
    assert y.dtype == gt.float32 and value(y).tolist() == [[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]]
    y = gt.one_hot(gt.constant([[0, 2], [1, 1]]), 3, on_value=5, off_value=-1, axis=1)
    assert y.shape == (2, 3, 2)
    assert value(y).tolist() == [[[5, -1], [-1, -1], [-1, 5]], [[-1, -1], [5, 5], [-1, -1]]]
    np.testing.assert_allclose(value(gt.sigmoid(c64([0.0, 2.0]))), [0.5, 0.8807970779778824], rtol=1e-15)
    y = gt.truediv(gt.constant([1, 2]), gt.constant([2, 4]))
    assert y.dtype.is_floating and value(y).tolist() == [0.5, 0.5]
    assert value(gt.scalar_mul(2.0, gt.constant([1.0, 2.0]))).tolist() == [2.0, 4.0]
    assert value(gt.cumsum(gt.constant([1.0, 2.0, 3.0]), exclusive=True, reverse=True)).tolist() == [5.0, 3.0, 0.0]


# --------------------------------------------------------------------------- tf.math additions
X5, Y5 = [0.0, 0.0, 2.0, 1.5, -1.0], [0.0, 3.0, 0.0, 0.5, 2.0]


@pytest.mark.parametrize(
    "name, y, want_value, want_gx, want_gy",
    [
        # (TensorFlow 2.21): both gradients are 0 where x is 0
        (
            "xlogy",
            Y5,
            [0.0, 0.0, -np.inf, -1.0397207708399179, -0.6931471805599453],
            [0.0, 0.0, -np.inf, -0.6931471805599453, 0.6931471805599453],
            [0.0, 0.0, np.inf, 3.0, -0.5],
        ),
        (
            "xlog1py",
            [0.0, 3.0, -1.0, 0.5, 2.0],
            [0.0, 0.0, -np.inf, 0.6081976621622466, -1.0986122886681096],
            [0.0, 0.0, -np.inf, 0.4054651081081644, 1.0986122886681096],
            [0.0, 0.0, np.inf, 1.0, -0.3333333333333333],
        ),
    ],
)
def test_xlogy_xlog1py(backend, name, y, want_value, want_gx, want_gy):
    fn = getattr(gt.math, name)
    out, (gx, gy) = tape_grads(fn, [X5, y])
    np.testing.assert_allclose(value(out), want_value, rtol=1e-15)
    np.testing.assert_allclose(value(gx), want_gx, rtol=1e-15)
    np.testing.assert_allclose(value(gy), want_gy, rtol=1e-15)
    finite = [3, 4]  # finite differences where the function is smooth and x is not 0
    num = fd(lambda a, b: fn(a, b), [np.asarray(X5)[finite], np.asarray(y)[finite]])
    np.testing.assert_allclose(value(gx)[finite], num[0], rtol=1e-6)
    np.testing.assert_allclose(value(gy)[finite], num[1], rtol=1e-6)
    assert getattr(gt.math, name)(gt.constant([0.0]), gt.constant([np.nan])).numpy().tolist() == [0.0]


# (TensorFlow 2.21) values and d/dx of sum(f(x))
UNARY = {
    "softsign": (
        [-3.0, -0.5, 0.0, 0.25, 4.0],
        [-0.75, -0.3333333333333333, 0.0, 0.2, 0.8],
        [0.0625, 0.4444444444444444, 1.0, 0.64, 0.04],
    ),
    "reciprocal_no_nan": ([-2.0, 0.0, 0.5, 4.0], [-0.5, 0.0, 2.0, 0.25], [-0.25, 0.0, -4.0, -0.0625]),
    "lgamma": (
        [0.5, 1.5, 3.0, 7.25],
        [0.5723649429247001, -0.12078223763524522, 0.6931471805599453, 7.0521854507385395],
        [-1.9635100260214227, 0.03648997397857645, 0.9227843350984675, 1.9104535268837362],
    ),
    "digamma": (
        [0.5, 1.5, 3.0, 7.25],
        [-1.9635100260214227, 0.03648997397857645, 0.9227843350984675, 1.9104535268837362],
        [4.93480220054468, 0.9348022005446793, 0.39493406684822646, 0.1478792331589322],
    ),
    "erfc": (
        [-1.0, 0.0, 0.5, 2.0],
        [1.8427007929497148, 1.0, 0.47950012218695337, 0.004677734981047266],
        [-0.41510749742059466, -1.1283791670955126, -0.8787825789354448, -0.020666985354092057],
    ),
    "erfinv": (
        [-0.9, 0.0, 0.3, 0.75],
        [-1.1630871536766743, 0.0, 0.27246271472675443, 0.8134198475976184],
        [3.4280428114518418, 0.8862269254527579, 0.9545203588405493, 1.7174997693674519],
    ),
    "ndtri": (
        [0.05, 0.3, 0.5, 0.9],
        [-1.6448536269514729, -0.5244005127080409, 0.0, 1.2815515655446004],
        [9.695969272701577, 2.876103659264292, 2.5066282746310002, 5.698059856117003],
    ),
    "erfcinv": (
        [0.1, 0.7, 1.0, 1.6],
        [1.1630871536766743, 0.27246271472675443, -0.0, -0.595116081449995],
        [-3.428042811451841, -0.9545203588405493, -0.8862269254527579, -1.2628624281411842],
    ),
    "bessel_i0": (
        [-1.5, 0.0, 0.5, 2.0],
        [1.6467231897728907, 1.0, 1.0634833707413238, 2.279585302336067],
        [-0.9816664285779079, 0.0, 0.2578943053908962, 1.5906368546373295],
    ),
    "bessel_i0e": (
        [-1.5, 0.0, 0.5, 2.0],
        [0.36743360905415834, 1.0, 0.6450352704491502, 0.308508322553671],
        [0.1483942216332326, 0.0, -0.4886144672642786, -0.0932390333047333],
    ),
    "bessel_i1": (
        [-1.5, 0.0, 0.5, 2.0],
        [-0.9816664285779079, 0.0, 0.2578943053908962, 1.5906368546373295],
        # (TF 2.21 gives 1.0 at 0, where i1'(0) = i0(0) / 2 = 0.5: its _BesselI1Grad special-cases
        # x == 0 wrongly; gradtape gives the derivative, which the finite differences below confirm)
        [0.9922789040542854, 0.5, 0.5476947599595314, 1.484266875017402],
    ),
    "bessel_i1e": (
        [-1.5, 0.0, 0.5, 2.0],
        [-0.21903938742092574, 0.0, 0.15642080318487162, 0.2152692892489377],
        [0.0023679633526154653, 0.5, 0.17577286089453537, -0.014395611319735546],
    ),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_tf_math(backend, name):
    x, want_value, want_grad = UNARY[name]
    fn = getattr(gt.math, name)
    out, (g,) = tape_grads(fn, [x])
    np.testing.assert_allclose(value(out), want_value, rtol=1e-13, atol=1e-15)
    rtol = 1e-9 if name == "digamma" else 1e-12  # (torch's polygamma(1, x) is good to ~5e-10)
    np.testing.assert_allclose(value(g), want_grad, rtol=rtol, atol=1e-15)
    # finite differences away from the kinks (0 for reciprocal_no_nan and the scaled Bessel i0e)
    smooth = [k for k, v in enumerate(x) if not (v == 0.0 and name in ("reciprocal_no_nan", "bessel_i0e"))]
    (num,) = fd(fn, [np.asarray(x)[smooth]])
    np.testing.assert_allclose(value(g)[smooth], num, rtol=1e-6, atol=1e-7)


def test_rint_zero_fraction_nextafter(backend):
    # (TensorFlow 2.21)
    got = value(gt.math.rint(c64([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.7])))
    assert got.tolist() == [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 3.0] and np.signbit(got[2])
    for x, want in [
        (c64([[0.0, 1.0], [0.0, 0.0]]), 0.75),
        (gt.constant([0, 1, 2]), 0.3333333432674408),
        (gt.constant([True, False]), 0.5),
    ]:
        z = gt.math.zero_fraction(x)
        assert z.dtype == gt.float32 and z.shape == () and float(z) == want
    assert math.isnan(float(gt.math.zero_fraction(gt.zeros([0]))))
    assert float(gt.math.nextafter(c64([1.0]), c64([2.0]))[0]) == 1.0000000000000002


T25 = [[1.0, 3.0, 3.0, -2.0, 5.0], [0.5, 0.5, 0.5, 0.25, 9.0]]


def test_top_k(backend):
    # (TensorFlow 2.21): ties keep the lower index first; indices int32 unless index_type
    v, i = gt.math.top_k(c64(T25), k=3)
    assert v.dtype == gt.float64 and i.dtype == gt.int32 and v.shape == i.shape == (2, 3)
    assert value(v).tolist() == [[5.0, 3.0, 3.0], [9.0, 0.5, 0.5]] and value(i).tolist() == [[4, 1, 2], [4, 0, 1]]
    v, i = gt.math.top_k(gt.constant([1.0, 4.0, 2.0]))
    assert v.dtype == gt.float32 and value(v).tolist() == [4.0] and value(i).tolist() == [1]
    v, i = gt.math.top_k(gt.constant([1, 4, 2], dtype=gt.int32), k=2)
    assert v.dtype == gt.int32 and value(v).tolist() == [4, 2] and value(i).tolist() == [1, 2]
    _, i = gt.math.top_k(gt.constant([1.0, 4.0, 2.0]), k=2, index_type=gt.int64)
    assert i.dtype == gt.int64
    v, i = gt.math.top_k(gt.constant([1.0, 4.0, 2.0, 9.0]), k=2, sorted=False)  # (TF: order unspecified)
    assert sorted(value(v).tolist()) == [4.0, 9.0] and sorted(value(i).tolist()) == [1, 3]
    # TensorFlow 2.21: InvalidArgumentError "input must have at least k columns", "Need k >= 0", ">= 1-D"
    for x, k, msg in [
        ([1.0, 4.0, 2.0], 4, r"k must be in \[0, 3\]"),
        ([1.0], -1, "k must be"),
        (1.0, 1, "input must be at least 1-D"),
    ]:
        with pytest.raises(ValueError, match=rf"top_k: {msg}.*"):
            gt.math.top_k(gt.constant(x), k=k)
    # (TensorFlow 2.21) the gradient of sum(values * [1, 2, 3]) reaches the selected entries
    want = [[[0.0, 2.0, 3.0, 0.0, 1.0], [2.0, 3.0, 0.0, 0.0, 1.0]]]
    _, got = tape_grads(lambda x: gt.math.top_k(x, k=3)[0], [T25], [[1.0, 2.0, 3.0]] * 2)
    np.testing.assert_array_equal(value(got[0]), want[0])
    distinct = [[1.0, 3.5, 3.0, -2.0, 5.0], [0.5, 0.7, 0.6, 0.25, 9.0]]  # no ties: finite differences apply
    want = [[[0.0, 2.0, 3.0, 0.0, 1.0], [0.0, 2.0, 3.0, 0.0, 1.0]]]
    assert_grads(lambda x: gt.math.top_k(x, k=3)[0], [distinct], want, [[1.0, 2.0, 3.0]] * 2)


# --------------------------------------------------------------------------- under gt.function
def test_training_step_under_function(backend):
    """A step that clips gradients as TF code does: one traced call equals the eager one."""
    rng = np.random.default_rng(0)
    w0, b0, x = rng.normal(size=(3, 2)), rng.normal(size=2), rng.normal(size=(4, 3))
    labels = np.array([0, 1, 1, 0])

    def run(compiled):
        w, b = gt.Variable(c64(w0)), gt.Variable(c64(b0))

        def step(x, labels):
            with gt.GradientTape() as tape:
                logits = gt.clip_by_value(gt.identity(x) @ w + b, -3.0, 3.0)
                target = gt.one_hot(labels, 2, dtype=gt.float64)
                loss = gt.reduce_mean(gt.math.xlogy(target, gt.nn.softmax(logits)) * -1.0)
            grads = tape.gradient(loss, [w, b])
            clipped, norm = gt.clip_by_global_norm(grads, 0.1)
            clipped = [gt.clip_by_norm(g, 0.05, axes=[0]) for g in clipped]
            for v, g in zip([w, b], clipped):
                v.assign_sub(g)
            return loss, norm, gt.reduce_any(gt.math.is_nan(norm)), gt.math.top_k(logits[0], k=1)[1]

        f = gt.function(step) if compiled else step
        outs = [f(c64(x), gt.constant(labels)) for _ in range(2)]
        return [[value(o) for o in out] for out in outs], value(w), value(b)

    eager, traced = run(False), run(True)
    for e, t in zip(eager[0], traced[0]):
        for a, b in zip(e, t):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(traced[1], eager[1], rtol=1e-12)
    np.testing.assert_allclose(traced[2], eager[2], rtol=1e-12)
    assert not np.allclose(eager[1], w0)  # the step did update


def test_linalg_global_norm_is_tfs_name_for_it():
    assert gt.linalg.global_norm is gt.math.global_norm
