"""A backend's fused gradient rules (``Backend.rule_overrides``: PyTorch's ``tanh_backward`` and
``F.cross_entropy``'s backward kernels) give the op's own rule's numbers, on every backend: checked
against the formulas in NumPy float64, against the op's own rule (a recorded walk runs it), with NaN /
inf logits, zero cotangents and batches of cotangents, under ``gt.function``, second order, and a rule
set with ``RegisterGradient`` wins over them."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import backend_registry as _backends
from gradtape.core import registry

XENT = "sparse_softmax_cross_entropy_with_logits"


def val(t):
    return np.asarray(t.numpy())


def _tol(dtype):
    return {"rtol": 1e-14, "atol": 1e-15} if dtype == "float64" else {"rtol": 2e-6, "atol": 1e-6}


def _xent_grad_ref(logits, labels, g):
    """g * (softmax(logits) - one_hot(labels)) in float64 NumPy (labels along the last axis)."""
    z = logits.astype(np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    p -= np.arange(z.shape[-1]) == labels[..., None]
    return np.asarray(g, np.float64)[..., None] * p


def _first_and_own_rule(f, x, *args):
    """The gradient of ``sum(f(x) * args)`` by a first-order walk (where a backend's fused rule runs)
    and by a walk an outer tape records (the op's own rule, on Tensors)."""
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    first = tape.gradient(y, x, output_gradients=args[0] if args else None)
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        own = tape.gradient(y, x, output_gradients=args[0] if args else None)
    return first, own


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tanh_gradient_is_the_rules(backend, dtype):
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 33)) * 3
    xs[0, :4] = [0.0, -0.0, 30.0, -30.0]
    gs = rng.normal(size=(64, 33))
    x = gt.constant(xs, dtype=dtype)
    g = gt.constant(gs, dtype=dtype)
    first, own = _first_and_own_rule(gt.tanh, x, g)
    y = val(gt.tanh(x))  # (the backend's tanh: 1 - y * y amplifies its last bit near |y| = 1)
    np.testing.assert_allclose(val(first), val(g) * (1 - y * y), **_tol(dtype))
    np.testing.assert_allclose(val(first), val(own), **_tol(dtype))
    assert val(first).dtype == np.dtype(dtype)


def test_tanh_nan_inf_and_zero_cotangent(backend):
    x = gt.constant([np.nan, np.inf, -np.inf, 0.5, 2.0], dtype="float64")
    g = gt.constant([1.0, 1.0, 1.0, 0.0, -2.0], dtype="float64")
    first, own = _first_and_own_rule(gt.tanh, x, g)
    t = np.tanh(0.5)
    expected = [np.nan, 0.0, 0.0, 0.0 * (1 - t * t), -2.0 * (1 - np.tanh(2.0) ** 2)]
    np.testing.assert_allclose(val(first), expected, rtol=1e-13)
    np.testing.assert_allclose(val(own), expected, rtol=1e-13)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(128, 10), (7, 1), (3, 4, 5)])
def test_sparse_xent_gradient_is_the_rules(backend, dtype, shape):
    rng = np.random.default_rng(1)
    zs = rng.normal(size=shape) * 4
    labels = rng.integers(0, shape[-1], size=shape[:-1])
    gs = rng.normal(size=shape[:-1])
    z = gt.constant(zs, dtype=dtype)
    lab = gt.constant(labels)
    g = gt.constant(gs, dtype=dtype)

    def f(t):
        return gt.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=t)

    first, own = _first_and_own_rule(f, z, g)
    ref = _xent_grad_ref(val(z), labels, gs.astype(dtype))
    np.testing.assert_allclose(val(first), ref, **_tol(dtype))
    np.testing.assert_allclose(val(first), val(own), **_tol(dtype))
    assert val(first).dtype == np.dtype(dtype)


@pytest.mark.parametrize("labels_dtype", ["int32", "int64"])
def test_sparse_xent_mean_as_in_a_training_step(backend, labels_dtype):
    rng = np.random.default_rng(2)
    zs = rng.normal(size=(16, 5))
    labels = rng.integers(0, 5, size=16)
    z = gt.Variable(zs, dtype="float64")
    lab = gt.constant(labels, dtype=labels_dtype)
    with gt.GradientTape() as tape:
        loss = gt.reduce_mean(gt.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=z))
    (g,) = tape.gradient(loss, [z])
    np.testing.assert_allclose(val(g), _xent_grad_ref(zs, labels, np.full(16, 1 / 16)), rtol=1e-13, atol=1e-16)


def test_sparse_xent_nan_inf_logits_and_zero_cotangents(backend):
    zs = np.array([[np.nan, 0.0, 1.0], [np.inf, 0.0, 1.0], [-np.inf, 0.0, 1.0], [1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    labels = np.array([1, 0, 2, 1, 0])
    gs = np.array([1.0, 1.0, 1.0, 0.0, 2.0])
    z = gt.constant(zs, dtype="float64")
    lab = gt.constant(labels)

    def f(t):
        return gt.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=t)

    first, own = _first_and_own_rule(f, z, gt.constant(gs, dtype="float64"))
    a, b = val(first), val(own)
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.isnan(a[:2]), True)  # a NaN or +inf logit: NaN, as the rule
    np.testing.assert_allclose(a[2:], b[2:], rtol=1e-15, atol=1e-16)
    np.testing.assert_array_equal(a[3], 0.0)  # a zero cotangent: a zero gradient
    np.testing.assert_allclose(a[2:], _xent_grad_ref(zs[2:], labels[2:], gs[2:]), rtol=1e-15, atol=1e-16)


def test_batched_cotangents_jacobian(backend):
    """A batch of cotangents (``tape.jacobian``: a vmap or one walk with a batch axis) reaches the
    fused rules with the batch; the Jacobians match the formulas."""
    rng = np.random.default_rng(3)
    zs = rng.normal(size=(4, 3))
    labels = np.array([2, 0, 1, 1])
    z = gt.constant(zs, dtype="float64")
    lab = gt.constant(labels)
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(z)
        loss = gt.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=z)
        h = gt.tanh(z)
    jl = val(tape.jacobian(loss, z))
    jh = val(tape.jacobian(h, z))
    expected = np.zeros((4, 4, 3))
    for i in range(4):
        expected[i, i] = _xent_grad_ref(zs[i : i + 1], labels[i : i + 1], np.ones(1))[0]
    np.testing.assert_allclose(jl, expected, rtol=1e-14, atol=1e-16)
    eh = np.zeros((4, 3, 4, 3))
    for i in range(4):
        for j in range(3):
            eh[i, j, i, j] = 1 - np.tanh(zs[i, j]) ** 2
    np.testing.assert_allclose(jh, eh, rtol=1e-13, atol=1e-16)


def test_second_order_uses_the_ops_own_rule(backend):
    """The fused kernels are not recorded: a second derivative differentiates the op's own rule."""
    xs = np.array([-1.5, 0.3, 2.0])
    x = gt.constant(xs, dtype="float64")
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.GradientTape() as inner:
            inner.watch(x)
            y = gt.reduce_sum(gt.tanh(x))
        g = inner.gradient(y, x)
    gg = outer.gradient(g, x)
    t = np.tanh(xs)
    np.testing.assert_allclose(val(g), 1 - t * t, rtol=1e-13)
    np.testing.assert_allclose(val(gg), -2 * t * (1 - t * t), rtol=1e-13)

    zs = np.array([[0.2, -1.0, 0.7]])
    z = gt.constant(zs, dtype="float64")
    lab = gt.constant(np.array([1]))
    with gt.GradientTape() as outer:
        outer.watch(z)
        with gt.GradientTape() as inner:
            inner.watch(z)
            loss = gt.reduce_sum(gt.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=z))
        g = inner.gradient(loss, z)
        s = gt.reduce_sum(g * g)
    p = np.exp(zs) / np.exp(zs).sum()
    d = p - np.array([[0.0, 1.0, 0.0]])
    # d/dz sum(d^2) = 2 * J^T d, J = diag(p) - p p^T (the softmax's Jacobian, symmetric)
    jac = np.diag(p[0]) - np.outer(p[0], p[0])
    np.testing.assert_allclose(val(outer.gradient(s, z)), (2 * jac @ d[0])[None], rtol=1e-13)


def test_registered_gradient_wins_over_the_fused_rule(backend):
    op = registry.get_op("tanh")
    old, form, saves = op.grad, op.rule_form, op.saves  # (restored after: RegisterGradient replaces all three)

    @gt.RegisterGradient("tanh", rule_form="xp")
    def _seven(xp, op, grad):
        return grad * 7.0

    try:
        x = gt.constant([0.5, -1.0], dtype="float64")
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.tanh(x)
        np.testing.assert_array_equal(val(tape.gradient(y, x)), [7.0, 7.0])
    finally:
        op.set_rule(old, form, saves=saves)
    assert op.grad is op.builtin_rule
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.tanh(x)
    np.testing.assert_allclose(val(tape.gradient(y, x)), 1 - np.tanh([0.5, -1.0]) ** 2, rtol=1e-13)


def test_the_fused_rules_run_in_a_first_order_walk_only(backend, monkeypatch):
    """Where the backend declares fused rules, a first-order walk calls them and a recorded walk does
    not (it runs the op's own rule, which outer tapes record)."""
    b = _backends.get(backend.split(":")[0])
    if not b.rule_overrides:
        pytest.skip(f"backend {backend!r} declares no fused gradient rules (Backend.rule_overrides)")
    calls = []
    wrapped = {}
    for name, fn in b.rule_overrides.items():

        def counted(xp, op, grad, _fn=fn, _name=name):
            calls.append(_name)
            return _fn(xp, op, grad)

        wrapped[name] = counted
    monkeypatch.setattr(b, "rule_overrides", wrapped)
    z = gt.constant(np.random.default_rng(4).normal(size=(5, 3)))
    lab = gt.constant(np.array([0, 1, 2, 0, 1]))

    def f(t):
        return gt.reduce_mean(gt.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=gt.tanh(t)))

    with gt.GradientTape() as tape:
        tape.watch(z)
        y = f(z)
    tape.gradient(y, z)
    assert sorted(calls) == sorted(wrapped)
    calls.clear()
    with gt.GradientTape() as outer:
        outer.watch(z)
        with gt.GradientTape() as tape:
            tape.watch(z)
            y = f(z)
        tape.gradient(y, z)
    assert calls == []


def test_under_gt_function(backend):
    rng = np.random.default_rng(5)
    zs = rng.normal(size=(8, 4))
    z = gt.Variable(zs, dtype="float64")
    lab = gt.constant(rng.integers(0, 4, size=8))

    def step():
        with gt.GradientTape() as tape:
            loss = gt.reduce_mean(gt.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=gt.tanh(z)))
        return tape.gradient(loss, z)

    eager = val(step())
    np.testing.assert_allclose(val(gt.function(step)()), eager, rtol=1e-14, atol=1e-16)
    t = np.tanh(zs)
    ref = _xent_grad_ref(t, val(lab), np.full(8, 1 / 8)) * (1 - t * t)
    np.testing.assert_allclose(eager, ref, rtol=1e-13, atol=1e-16)
