"""The fused gradient ops (issue 23, W3): ``tanh_grad``, ``sigmoid_grad`` and
``sparse_softmax_cross_entropy_with_logits_grad``, ops of their own (TensorFlow's ``TanhGrad``,
``SigmoidGrad``) that the rules of ``tanh``, ``gt.nn.sigmoid`` and the sparse cross-entropy call.

Every backend: the first-order gradients against the formulas in NumPy float64, the Hessians against
``torch.func`` and JAX (the fused ops' own rules), Jacobians (a batch of cotangents), per-example
gradients under ``gt.vmap``, NaN and infinite logits, and a replayed step (``gt.function``) giving the
eager step's values bit for bit.  On PyTorch: the eager walk, a recorded (higher-order) walk and the
replayed program run torch's fused kernels (``tanh_backward``, ``sigmoid_backward``,
``nll_loss_backward`` + ``_log_softmax_backward_data``), and the adapter's forms fall back to the
op's own forward where the kernels do not apply, with the same values.
"""

from __future__ import annotations

import functools
import importlib.util

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import registry
from gradtape.core.backend import Backend

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_JAX = importlib.util.find_spec("jax") is not None
FUSED = ("tanh_grad", "sigmoid_grad", "sparse_softmax_cross_entropy_with_logits_grad")
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _np_softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _np_xent_grad(labels, logits, g):
    onehot = np.arange(logits.shape[-1]) == labels[..., None]
    return g[..., None] * (_np_softmax(logits) - onehot)


# ------------------------------------------------------------------------------------- the ops
def test_the_fused_ops_are_registered_internal_ops_with_rules():
    for name in FUSED:
        op = registry.get_op(name)
        assert op.grad is not None and op.differentiable and op.xp_callable, name
        assert op.public is not None and not hasattr(gt, name) and not hasattr(gt.nn, name), name
        assert op.convention.startswith("internal"), name


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_first_order_gradients_match_the_formulas(backend, dtype):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 5)).astype(dtype)
    c = rng.normal(size=(6, 5)).astype(dtype)
    with gt.GradientTape(persistent=True) as tape:
        xt = gt.constant(x)
        tape.watch(xt)
        t = gt.tanh(xt)
        s = gt.nn.sigmoid(xt)
        lt = gt.reduce_sum(t * c)
        ls = gt.reduce_sum(s * c)
    want_t = c.astype(np.float64) * (1 - np.tanh(x.astype(np.float64)) ** 2)
    sig = 1 / (1 + np.exp(-x.astype(np.float64)))
    want_s = c.astype(np.float64) * sig * (1 - sig)
    gt_t, gt_s = tape.gradient(lt, xt), tape.gradient(ls, xt)
    assert gt_t.dtype.name == np.dtype(dtype).name and gt_s.dtype.name == np.dtype(dtype).name
    np.testing.assert_allclose(gt_t.numpy(), want_t, **TOL[dtype])
    np.testing.assert_allclose(gt_s.numpy(), want_s, **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 5), (2, 3, 4), (5,)])
@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
def test_sparse_cross_entropy_gradient_matches_the_formula(backend, dtype, shape, label_dtype):
    rng = np.random.default_rng(1)
    logits = (3 * rng.normal(size=shape)).astype(dtype)
    labels = rng.integers(0, shape[-1], size=shape[:-1]).astype(label_dtype)
    c = rng.normal(size=shape[:-1]).astype(dtype)
    z = gt.constant(logits)
    with gt.GradientTape() as tape:
        tape.watch(z)
        loss = gt.reduce_sum(gt.nn.sparse_softmax_cross_entropy_with_logits(labels=gt.constant(labels), logits=z) * c)
    g = tape.gradient(loss, z)
    assert g.dtype.name == np.dtype(dtype).name and g.shape == shape
    want = _np_xent_grad(labels, logits.astype(np.float64), c.astype(np.float64))
    np.testing.assert_allclose(g.numpy(), want, **TOL[dtype])


def test_the_ops_called_directly_give_their_formulas(backend):
    """The internal public functions (what rules call on Tensors), on each backend's forward."""
    rng = np.random.default_rng(2)
    y, dy = rng.uniform(-0.9, 0.9, size=(4, 3)), rng.normal(size=(4, 3))
    tg = registry.get_op("tanh_grad").public
    sg = registry.get_op("sigmoid_grad").public
    xg = registry.get_op("sparse_softmax_cross_entropy_with_logits_grad").public
    np.testing.assert_allclose(tg(gt.constant(y), gt.constant(dy)).numpy(), dy * (1 - y * y), rtol=1e-13)
    np.testing.assert_allclose(sg(gt.constant(y), gt.constant(dy)).numpy(), dy * y * (1 - y), rtol=1e-13)
    labels = np.array([2, 0, 1, 2])
    logits = rng.normal(size=(4, 3))
    got = xg(gt.constant(labels[:, None]), gt.constant(logits)).numpy()
    np.testing.assert_allclose(got, _np_xent_grad(labels, logits, np.ones(4)), rtol=1e-12, atol=1e-14)


def test_complex_tanh_gradient_keeps_the_conjugate(backend):
    """``tanh``'s rule passes ``conj(y)`` to the holomorphic ``tanh_grad``: TF's convention,
    ``grad * conj(1 - y^2)``."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(5,)) + 1j * rng.normal(size=(5,))
    c = rng.normal(size=(5,)) + 1j * rng.normal(size=(5,))
    xt = gt.constant(x)
    with gt.GradientTape() as tape:
        tape.watch(xt)
        y = gt.tanh(xt)
    got = tape.gradient(y, xt, output_gradients=gt.constant(c)).numpy()
    np.testing.assert_allclose(got, c * np.conj(1 - np.tanh(x) ** 2), rtol=1e-12)


# ------------------------------------------------------------------------- Jacobians and vmap
def test_jacobians_take_a_batch_of_cotangents(backend):
    """``tape.jacobian``: the rules and the fused ops get cotangents with a leading batch axis (PyTorch:
    the adapter's forms fall back to the op's forward there)."""
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(3, 4))
    labels = np.array([1, 3, 0])
    x = rng.normal(size=(3,))
    with gt.GradientTape(persistent=True) as tape:
        z = gt.constant(logits)
        xt = gt.constant(x)
        tape.watch([z, xt])
        loss = gt.nn.sparse_softmax_cross_entropy_with_logits(labels=gt.constant(labels), logits=z)
        act = gt.tanh(xt) + gt.nn.sigmoid(xt)
    jac = tape.jacobian(loss, z).numpy()  # (3, 3, 4)
    want = np.zeros((3, 3, 4))
    for i in range(3):
        want[i, i] = _np_softmax(logits[i]) - (np.arange(4) == labels[i])
    np.testing.assert_allclose(jac, want, rtol=1e-12, atol=1e-14)
    sig = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(
        tape.jacobian(act, xt).numpy(), np.diag(1 - np.tanh(x) ** 2 + sig * (1 - sig)), rtol=1e-12, atol=1e-14
    )


def test_per_example_gradients_under_vmap(backend):
    rng = np.random.default_rng(5)
    xs = rng.normal(size=(4, 3))
    labels = np.array([0, 2, 1, 1])
    w = gt.constant(rng.normal(size=(3, 3)))

    def grad_one(x, label):
        with gt.GradientTape() as tape:
            tape.watch(w)
            logits = gt.tanh(gt.matmul(x[None, :], w)) + gt.nn.sigmoid(x[None, :])
            loss = gt.reduce_sum(gt.nn.sparse_softmax_cross_entropy_with_logits(labels=label[None], logits=logits))
        return tape.gradient(loss, w)

    got = gt.vmap(grad_one)(gt.constant(xs), gt.constant(labels)).numpy()
    wn = w.numpy()
    for i in range(4):
        x = xs[i : i + 1]
        t = np.tanh(x @ wn)
        sig = 1 / (1 + np.exp(-x))
        dlogits = _np_xent_grad(labels[i : i + 1], t + sig, np.ones(1))
        np.testing.assert_allclose(got[i], x.T @ (dlogits * (1 - t * t)), rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------- edge values
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_nan_and_infinite_logits_give_nan_where_the_formula_does(backend):
    logits = np.array([[np.inf, 1.0, 2.0], [-np.inf, 1.0, 2.0], [np.nan, 0.0, 1.0], [0.5, -0.5, 3.0]])
    labels = np.array([1, 0, 2, 2])
    z = gt.constant(logits)
    with gt.GradientTape() as tape:
        tape.watch(z)
        loss = gt.reduce_sum(gt.nn.sparse_softmax_cross_entropy_with_logits(labels=gt.constant(labels), logits=z))
    got = tape.gradient(loss, z).numpy()
    with np.errstate(invalid="ignore"):
        want = _np_xent_grad(labels, logits, np.ones(4))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=1e-12, atol=1e-14)


def test_a_zero_cotangent_gives_zeros(backend):
    rng = np.random.default_rng(6)
    z = gt.constant(rng.normal(size=(3, 4)))
    with gt.GradientTape() as tape:
        tape.watch(z)
        loss = gt.nn.sparse_softmax_cross_entropy_with_logits(labels=gt.constant(np.array([0, 1, 3])), logits=z)
        loss = loss + gt.reduce_sum(gt.tanh(z) + gt.nn.sigmoid(z), axis=1)
    g = tape.gradient(loss, z, output_gradients=gt.zeros((3,), dtype=gt.float64)).numpy()
    np.testing.assert_array_equal(g, np.zeros((3, 4)))


# ------------------------------------------------------------------------------ second order
def _mlp_loss_np(lib, w, x, labels, onehot):
    """The reference loss in ``lib`` (torch or jax.numpy): tanh, sigmoid, a mean sparse cross-entropy."""
    h = lib.tanh(x @ w)
    logits = 2 * h + 1 / (1 + lib.exp(-h))
    logp = logits - lib.log(lib.sum(lib.exp(logits), axis=-1, keepdims=True))
    return -lib.mean(lib.sum(onehot * logp, axis=-1))


def _mlp_data():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(5, 3))
    w = rng.normal(size=(3, 4))
    labels = np.array([0, 3, 1, 2, 3])
    return x, w, labels, (np.arange(4) == labels[:, None]).astype(np.float64)


@functools.cache
def _hessian_references():
    x, w, labels, onehot = _mlp_data()
    refs = {}
    if HAVE_TORCH:
        import torch
        from torch.func import hessian

        args = [torch.tensor(a, dtype=torch.float64) for a in (x, labels, onehot)]
        refs["torch.func"] = hessian(lambda w: _mlp_loss_np(torch, w, args[0], None, args[2]))(
            torch.tensor(w, dtype=torch.float64)
        ).numpy()
    if HAVE_JAX:
        import jax
        import jax.numpy as jnp

        gt.backends.get("jax").xp  # noqa: B018  (loading the backend turns on jax_enable_x64, as gradtape runs JAX)
        assert jax.config.read("jax_enable_x64")
        jloss = lambda w: _mlp_loss_np(jnp, w, jnp.asarray(x), None, jnp.asarray(onehot))
        refs["jax"] = np.asarray(jax.hessian(jloss)(jnp.asarray(w)))
    return refs


def test_hessians_match_torch_func_and_jax(backend):
    """Second order through tanh, sigmoid and the sparse cross-entropy: the fused ops' own rules."""
    refs = _hessian_references()
    if not refs:
        pytest.skip("neither torch nor jax is installed: no reference Hessian")
    x, w, labels, _ = _mlp_data()
    xt, lab = gt.constant(x), gt.constant(labels)

    def loss(w):
        h = gt.tanh(gt.matmul(xt, w))
        logits = 2 * h + gt.nn.sigmoid(h)
        return gt.reduce_mean(gt.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=logits))

    got = gt.hessian(loss)(gt.constant(w)).numpy()
    assert got.shape == (3, 4, 3, 4)
    for name, ref in refs.items():
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12, err_msg=name)


def test_third_order_through_tanh(backend):
    """d^3 tanh / dx^3 = -2 (1 - y^2) (1 - 3 y^2): tanh_grad's rule differentiated once more."""
    x = np.array([-1.3, -0.2, 0.0, 0.4, 1.7])
    xt = gt.constant(x)
    with gt.GradientTape() as t3:
        t3.watch(xt)
        with gt.GradientTape() as t2:
            t2.watch(xt)
            with gt.GradientTape() as t1:
                t1.watch(xt)
                y = gt.tanh(xt)
            d1 = t1.gradient(y, xt)
        d2 = t2.gradient(d1, xt)
    d3 = t3.gradient(d2, xt).numpy()
    yn = np.tanh(x)
    np.testing.assert_allclose(d3, -2 * (1 - yn**2) * (1 - 3 * yn**2), rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------ replay
def _mlp_step(rng, dtype):
    w1 = gt.Variable(rng.normal(size=(6, 8)).astype(dtype) / 2)
    b1 = gt.Variable(np.full((8,), 0.01, dtype))
    w2 = gt.Variable(rng.normal(size=(8, 5)).astype(dtype) / 2)
    params = [w1, b1, w2]

    def step(x, labels):
        with gt.GradientTape() as tape:
            h = gt.tanh(gt.matmul(x, w1) + b1)
            h = gt.nn.sigmoid(h) + h
            logits = gt.matmul(h, w2)
            loss = gt.reduce_mean(gt.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(0.1 * g)
        return loss, grads[0]

    return step, params


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_replayed_mlp_step_gives_the_eager_values_bit_for_bit(backend, dtype):
    """The W3 shape of step (tanh, sigmoid, sparse cross-entropy, an update), replayed by
    ``gt.function(jit_compile=False)``: the fused ops are recorded as themselves, so the replay runs
    what the eager walk ran (on PyTorch, torch's fused kernels both times)."""
    rng = np.random.default_rng(8)
    x0, x1 = (rng.normal(size=(7, 6)).astype(dtype) for _ in range(2))
    labels = rng.integers(0, 5, size=7)
    step, params = _mlp_step(np.random.default_rng(9), dtype)
    eager_step, eager_params = _mlp_step(np.random.default_rng(9), dtype)
    replayed = gt.function(step, jit_compile=False)
    lab = gt.constant(labels)
    replayed(gt.constant(x0), lab)  # traced (and run eagerly)
    eager_step(gt.constant(x0), lab)
    for _ in range(2):
        got = [t.numpy() for t in replayed(gt.constant(x1), lab)] + [p.numpy() for p in params]
        want = [t.numpy() for t in eager_step(gt.constant(x1), lab)] + [p.numpy() for p in eager_params]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


# ----------------------------------------------------------------------------- PyTorch's kernels
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
KERNELS = {"tanh_backward", "sigmoid_backward", "nll_loss_backward", "_log_softmax_backward_data"}


def _aten_ops_of(fn):
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with Count():
        out = fn()
    return seen, out


def _torch_step_parts():
    rng = np.random.default_rng(10)
    x = gt.constant(rng.normal(size=(6, 4)).astype(np.float32))
    w = gt.Variable(rng.normal(size=(4, 3)).astype(np.float32))
    lab = gt.constant(np.array([0, 2, 1, 1, 0, 2]))

    def loss():
        h = gt.tanh(gt.matmul(x, w))
        return gt.reduce_mean(gt.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=gt.nn.sigmoid(h)))

    return w, loss


@needs_torch
def test_torch_runs_its_fused_kernels_eager_recorded_and_replayed():
    with gt.use_backend("torch"):
        w, loss = _torch_step_parts()

        def first_order():
            with gt.GradientTape() as tape:
                val = loss()
            return tape.gradient(val, w)

        seen, _ = _aten_ops_of(first_order)
        assert KERNELS <= set(seen), seen
        # none of the ops' own forwards: no one-hot (eq), no 1 - y * y (rsub)
        assert "eq" not in seen and "rsub" not in seen, seen

        def second_order():  # a recorded walk: the rules' calls are the ops, computed by the same kernels
            with gt.GradientTape() as outer:
                with gt.GradientTape() as tape:
                    val = loss()
                g = tape.gradient(val, w)
                s = gt.reduce_sum(g * g)
            return outer.gradient(s, w)

        seen2, _ = _aten_ops_of(second_order)
        assert KERNELS <= set(seen2), seen2

        f = gt.function(first_order, jit_compile=False)
        f()  # traced
        seen3, got = _aten_ops_of(f)
        assert KERNELS <= set(seen3), seen3
        np.testing.assert_array_equal(got.numpy(), first_order().numpy())  # (w unchanged: the same step)


@needs_torch
def test_torch_fused_forms_fall_back_to_the_op_where_the_kernels_do_not_apply():
    """The adapter's callables against the op's own forward on torch (``Backend.op_impl``: the
    chapter's forward bound to the adapter): the kernels within rounding, the fallbacks exactly."""
    import torch

    b = gt.backends.get("torch")
    rng = np.random.default_rng(11)

    def pair(name):
        op = registry.get_op(name)
        return b.op_impl(op), Backend.op_impl(b, op)

    t = lambda a, dt=torch.float64: torch.tensor(a, dtype=dt)
    for name in ("tanh_grad", "sigmoid_grad"):
        fused, own = pair(name)
        y, dy = rng.uniform(-0.9, 0.9, size=(3, 4)), rng.normal(size=(3, 4))
        torch.testing.assert_close(fused(t(y), t(dy)), own(t(y), t(dy)), rtol=1e-14, atol=1e-15)
        # a batch of cotangents (broadcast), complex values (the kernel is given conj(y)), mixed dtypes
        db = rng.normal(size=(2, 3, 4))
        torch.testing.assert_close(fused(t(y), t(db)), own(t(y), t(db)), rtol=1e-14, atol=1e-15)
        yc, dc = y + 0.3j * dy, dy - 0.2j * y
        ct = lambda a: torch.tensor(a, dtype=torch.complex128)
        torch.testing.assert_close(fused(ct(yc), ct(dc)), own(ct(yc), ct(dc)), rtol=1e-14, atol=1e-15)
        mixed = fused(t(y, torch.float32), t(dy))
        assert torch.equal(mixed, own(t(y, torch.float32), t(dy)))
    fused, own = pair("sparse_softmax_cross_entropy_with_logits_grad")
    logits, labels = rng.normal(size=(2, 3, 5)), rng.integers(0, 5, size=(2, 3))
    for lab in (torch.tensor(labels), torch.tensor(labels, dtype=torch.int32), torch.tensor(labels[0])):
        z = t(logits) if lab.ndim == 2 else t(logits[0])
        lab = lab[..., None]  # (3-D logits: rows flattened; int32 labels)
        torch.testing.assert_close(fused(lab, z), own(lab, z), rtol=1e-13, atol=1e-15)
    for fallback in (
        (torch.tensor(labels[:1, :, None]), t(logits)),  # labels not of the logits' leading shape (broadcast)
        (torch.zeros((0, 1), dtype=torch.int64), t(np.zeros((0, 5)))),  # no elements
    ):
        assert torch.equal(fused(*fallback), own(*fallback))
