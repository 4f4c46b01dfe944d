"""The hot path: rules on the native namespace, per-op saves, the walk, in-place variable updates.

Each rule runs on the backend's native namespace when nothing records the backward walk, and on
gradtape's namespace (Tensors) when an outer tape does; tests/test_rules.py checks that both give
the same gradients for every op.  No test here times anything.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import registry
from gradtape.core.engine import _Meta


def _args(case, rng):
    arrays, kwargs = case.draw(rng, "float64")
    return [gt.constant(a) if isinstance(a, np.ndarray) else a for a in arrays], kwargs


def _grads(op, args, kwargs, outer):
    """Gradients of sum(f(*args) * weights) w.r.t. every float Tensor argument; with ``outer``, an
    outer tape records the walk (so the Tensor rules run)."""
    fn = op.public
    srcs = [a for a in args if isinstance(a, gt.Tensor) and a.dtype.is_floating]
    with gt.GradientTape(persistent=True) as out_tape:
        with gt.GradientTape() as tape:
            for s in srcs:
                tape.watch(s)
            y = fn(*args, **kwargs)
            w = gt.constant(np.linspace(0.5, 1.5, max(y.size, 1)).reshape(y.shape))
            loss = gt.sum(y * w)
        if outer:
            gs = tape.gradient(loss, srcs)
        else:
            with out_tape.stop_recording():
                gs = tape.gradient(loss, srcs)
    return gs


def test_matmul_native_rule_every_rank_combination(backend):
    rng = np.random.default_rng(1)
    shapes = [
        ((3,), (3,)),
        ((2, 3), (3,)),
        ((3,), (3, 4)),
        ((2, 3), (3, 4)),
        ((5, 2, 3), (3,)),
        ((3,), (5, 3, 4)),
        ((5, 2, 3), (3, 4)),
        ((1, 2, 3), (5, 3, 4)),
    ]
    for sa, sb in shapes:
        a = gt.constant(rng.standard_normal(sa))
        b = gt.constant(rng.standard_normal(sb))
        native = _grads(registry.get_op("matmul"), [a, b], {}, False)
        tensor = _grads(registry.get_op("matmul"), [a, b], {}, True)
        for gn, gr in zip(native, tensor):
            assert gn.shape == gr.shape
            np.testing.assert_allclose(gn.numpy(), gr.numpy(), rtol=1e-10, atol=1e-12)


def test_complex_gradients_take_the_rules(backend):
    z = gt.constant(np.array([1 + 2j, -0.5 + 0.3j]))
    with gt.GradientTape() as tape:
        tape.watch(z)
        y = gt.sum(gt.real(gt.sin(z) * gt.conj(z)))
    g = tape.gradient(y, z)
    zn = z.numpy()
    # d/dz* of Re(sin(z) conj(z)) * 2 = conj(cos z) z ... checked against finite differences
    eps = 1e-7
    f = lambda v: np.sum(np.real(np.sin(v) * np.conj(v)))
    want = np.array(
        [
            (f(zn + eps * np.eye(2)[k]) - f(zn - eps * np.eye(2)[k])) / (2 * eps)
            + 1j * (f(zn + 1j * eps * np.eye(2)[k]) - f(zn - 1j * eps * np.eye(2)[k])) / (2 * eps)
            for k in range(2)
        ]
    )
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)


def test_an_overridden_rule_replaces_the_native_one(backend):
    """A TensorFlow-style rule set at run time runs (on Tensors) instead of the op's own."""
    op = registry.get_op("sinh")
    old, saves = op.grad, op.saves
    op.grad = lambda o, g: g * 3.0
    assert not op.xp_rule
    try:
        x = gt.constant(np.array([0.1, 0.2]))
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.sum(gt.sinh(x))
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), [3.0, 3.0])
    finally:
        op.grad = old
        op.saves = saves
    assert op.xp_rule
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sum(gt.sinh(x))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.cosh([0.1, 0.2]))


def test_saves_drop_what_the_rule_does_not_read(backend):
    x = gt.constant(np.ones((4, 3)))
    b = gt.constant(np.ones(3))
    with gt.GradientTape() as tape:
        tape.watch(x)
        tape.watch(b)
        z = x + b  # add keeps nothing: x is shaped like z, b only its shape
        y = gt.tanh(z)  # tanh keeps its output only
    nodes = tape._rec.nodes
    add, tanh = nodes[0], nodes[1]
    assert add.inputs[0] is None and isinstance(add.inputs[1], _Meta) and add.outputs == (None,)
    assert tanh.inputs == (None,) and tanh.outputs[0] is y.native
    with gt.GradientTape(persistent=True) as outer:
        with gt.GradientTape() as t2:
            t2.watch(x)
            t2.watch(b)
            y2 = gt.tanh(x + b)
        gx, gb = t2.gradient(y2, [x, b])  # Tensor rules: they read only what was saved
    want = 1 - np.tanh(2.0) ** 2
    np.testing.assert_allclose(gx.numpy(), np.full((4, 3), want))
    np.testing.assert_allclose(gb.numpy(), np.full(3, 4 * want))
    del outer


_TWICE = gt.register_op("hot_path_twice", lambda xp, x: 2 * x, lambda o, g: g * 0 + o.inputs[0] * 0 + 2 * g)
_TWICE.op.saves = ("outputs",)


def test_a_rule_reading_what_its_op_does_not_save_is_a_clear_error(backend):
    op = _TWICE
    x = gt.constant(np.ones(2))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = op(x)
    with pytest.raises(RuntimeError, match="hot_path_twice.*op.inputs.*saves"):
        tape.gradient(y, x)


_COS_OF_INPUT = gt.register_op(
    "hot_path_sin", lambda xp, x: xp.sin(x), lambda xp, op, g: g * xp.cos(op.inputs[0]), saves=("outputs",)
)


def test_a_native_rule_reading_what_its_op_does_not_save_is_a_clear_error(backend):
    """On native arrays the rule gets None for what was not kept; its failure names the op, its rule
    and the saves to fix."""
    x = gt.constant(np.ones(2))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = _COS_OF_INPUT(x)
    with pytest.raises(RuntimeError, match=r"hot_path_sin.*test_hot_path\.py.*op\.inputs\[0\].*saves"):
        tape.gradient(y, x)


def test_intermediates_are_freed_during_the_forward(backend):
    if backend != "numpy":
        pytest.skip("weak references to NumPy arrays")
    x = gt.constant(np.ones((64, 32)))
    b = gt.constant(np.ones(32))
    with gt.GradientTape() as tape:
        tape.watch(x)
        z = x + b
        ref = weakref.ref(z._v)  # the array itself (.native inside a tape warns)
        y = gt.sum(gt.tanh(z))
        del z
    gc.collect()
    assert ref() is None  # neither add nor tanh keeps the pre-activation
    assert tape.gradient(y, x).shape == (64, 32)


def test_a_non_persistent_gradient_consumes_the_nodes(backend):
    x = gt.constant(np.ones(3))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sin(x) * 2.0
    rec = tape._rec
    tape.gradient(y, x)
    assert rec.nodes == []


def test_gradients_for_a_subset_of_the_watched_sources(backend):
    x = gt.constant(np.array([0.3, 0.4]))
    w = gt.constant(np.array([2.0, 3.0]))
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        tape.watch(w)
        y = gt.sum(gt.sin(x) * w)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.cos([0.3, 0.4]) * [2.0, 3.0])
    np.testing.assert_allclose(tape.gradient(y, w).numpy(), np.sin([0.3, 0.4]))
    gx, gw = tape.gradient(y, [x, w])
    np.testing.assert_allclose(gw.numpy(), np.sin([0.3, 0.4]))


def test_batched_jacobian_walk_matches_the_loop(backend):
    rng = np.random.default_rng(3)
    w = gt.constant(rng.standard_normal((5, 4)))
    b = gt.constant(rng.standard_normal(5))
    x = gt.constant(rng.standard_normal(4))
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        tape.watch(b)
        y = gt.tanh(w @ x + b) * 2.0
    j_x, j_b = tape.jacobian(y, [x, b])
    loop = tape.jacobian(y, [x, b], experimental_use_pfor=False)
    yn = np.tanh(w.numpy() @ x.numpy() + b.numpy())
    want_x = (2 * (1 - yn**2))[:, None] * w.numpy()
    np.testing.assert_allclose(j_x.numpy(), want_x, rtol=1e-10)
    np.testing.assert_allclose(j_b.numpy(), np.diag(2 * (1 - yn**2)), rtol=1e-10)
    np.testing.assert_allclose(loop[0].numpy(), want_x, rtol=1e-10)


def test_batched_jacobian_through_an_op_whose_rule_is_not_batched(backend):
    x = gt.constant(np.array([0.2, 0.5, 0.9]))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.cumulative_sum(gt.sin(x))
    j = tape.jacobian(y, x)
    want = np.tril(np.ones((3, 3))) * np.cos(x.numpy())[None, :]
    np.testing.assert_allclose(j.numpy(), want, rtol=1e-10)


def test_jacobian_of_a_source_itself_and_an_unconnected_one(backend):
    x = gt.constant(np.array([1.0, 2.0]))
    u = gt.constant(np.array([3.0]))
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        tape.watch(u)
        y = x * 1.0
    jx, ju = tape.jacobian(y, [x, u])
    np.testing.assert_allclose(jx.numpy(), np.eye(2))
    assert ju is None
    jx, ju = tape.jacobian(y, [x, u], unconnected_gradients="zero")
    np.testing.assert_allclose(ju.numpy(), np.zeros((2, 1)))


def test_variable_updates_in_place_only_when_nobody_sees(backend):
    v = gt.Variable(np.array([1.0, 2.0]))
    user = np.array([5.0, 6.0])
    v2 = gt.Variable(user)
    v2.assign_sub(gt.constant(np.array([1.0, 1.0])))
    np.testing.assert_allclose(user, [5.0, 6.0])  # the caller's array is never written
    read = v.value()
    before = read.numpy()
    v.assign_sub(gt.constant(np.array([1.0, 1.0])))
    v.assign_add(gt.constant(np.array([0.5, 0.5])))
    np.testing.assert_allclose(read.numpy(), before)  # a Tensor read earlier keeps its value
    np.testing.assert_allclose(v.numpy(), [0.5, 1.5])
    with gt.GradientTape(persistent=True) as tape:
        y = gt.sum(v * v)
    v.assign_sub(gt.constant(np.array([0.5, 0.5])))
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), [1.0, 3.0])  # saved value untouched
    for _ in range(3):
        v.assign_add(gt.constant(np.array([1.0, 1.0])))
    np.testing.assert_allclose(v.numpy(), [3.0, 4.0])


def test_multi_output_custom_gradient_in_the_native_walk(backend):
    @gt.custom_gradient
    def f(a):
        def grad(da, db):
            return da * 2.0 + db * 3.0

        return (a * 1.0, a * 1.0), grad

    x = gt.constant(np.array([1.0, 2.0]))
    with gt.GradientTape() as tape:
        tape.watch(x)
        p, q = f(x)
        y = gt.sum(p) + gt.sum(q * 0.0)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [2.0, 2.0])
