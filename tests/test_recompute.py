"""``gt.recompute_grad``: the gradients of the plain path, from one recorded node and a recomputation,
on every backend: first and second order, variables (a Dense layer, a gt.Module), random draws
replayed, checkpoint policies (what the recomputation skips), gt.function, and the errors."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import gradtape as gt


def _val(t):
    return None if t is None else np.asarray(t.numpy())


def _x(shape=(3, 4), seed=0):
    return gt.constant(np.random.default_rng(seed).standard_normal(shape), dtype=gt.float64)


def _w(shape=(4, 4), seed=1):
    return gt.Variable(np.random.default_rng(seed).standard_normal(shape) * 0.5, dtype=gt.float64)


def _both(f, x, sources, loss=lambda y: gt.reduce_sum(y * y)):
    """The gradients of ``loss(f(x))`` with respect to ``sources``, through recompute_grad(f) and plainly."""
    out = []
    for g in (gt.recompute_grad(f), f):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = loss(g(x))
        out.append([_val(t) for t in tape.gradient(y, sources)])
    return out


def test_gradients_match_the_plain_path(backend):
    w = _w()
    x = _x()

    def block(h):
        return gt.tanh(gt.matmul(h, w)) + gt.sin(h)

    got, want = _both(lambda h: block(block(h)), x, [x, w])
    for g, p in zip(got, want):
        np.testing.assert_allclose(g, p, rtol=1e-12, atol=1e-12)


def test_records_one_node_keeping_inputs_and_outputs(backend):
    """The tape holds one node for the call, not f's inner ops."""
    w = _w()
    x = _x()
    f = gt.recompute_grad(lambda h: gt.tanh(gt.matmul(h, w)) * 2.0 + 1.0)
    with gt.GradientTape() as tape:
        tape.watch(x)
        f(x)
    assert [n.opdef.name for n in tape._rec.nodes] == ["custom_gradient"]
    with gt.GradientTape() as tape:
        tape.watch(x)
        gt.tanh(gt.matmul(x, w)) * 2.0 + 1.0
    assert len(tape._rec.nodes) == 4  # (the plain path keeps every op)


def test_dense_layers_inside_give_variable_gradients(backend):
    """As TF's recompute_grad: the variables f reads get their gradients, as on the plain path."""
    gt.random.set_seed(0)
    model = gt.layers.Sequential([gt.layers.Dense(5, activation="tanh"), gt.layers.Dense(3, activation="relu")])
    x = gt.cast(_x((2, 4)), gt.float32)
    model(x)  # built
    f = gt.recompute_grad(model)
    for g in (f, model):
        with gt.GradientTape() as tape:
            y = gt.reduce_sum(g(x) ** 2)
        grads = tape.gradient(y, model.trainable_variables)
        assert all(t is not None for t in grads)
        if g is f:
            got = [_val(t) for t in grads]
    for a, b in zip(got, [_val(t) for t in grads]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_module_built_inside_the_first_call(backend):
    """A gt.Module whose variables are created on its first call, inside the recomputed function."""

    class Block(gt.Module):
        def __init__(self):
            super().__init__()
            self.w = None

        def __call__(self, h):
            if self.w is None:
                self.w = gt.Variable(np.linspace(-1.0, 1.0, 16).reshape(4, 4), dtype=gt.float64)
            return gt.tanh(gt.matmul(h, self.w))

    block = Block()
    x = _x()
    f = gt.recompute_grad(block)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.reduce_sum(f(x) ** 2)
    gx, gw = tape.gradient(y, [x, block.w])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.reduce_sum(block(x) ** 2)
    px, pw = tape.gradient(y, [x, block.w])
    np.testing.assert_allclose(_val(gx), _val(px), rtol=1e-12)
    np.testing.assert_allclose(_val(gw), _val(pw), rtol=1e-12)


def test_second_order_matches_the_plain_path(backend):
    """The recomputation in the backward is recorded by the outer tape: second derivatives come out."""
    w = _w()
    x = _x()

    def f(h):
        return gt.sin(gt.matmul(h, w)) * h

    results = []
    for g in (gt.recompute_grad(f), f):
        with gt.GradientTape() as outer:
            outer.watch(x)
            with gt.GradientTape() as inner:
                inner.watch(x)
                y = gt.reduce_sum(g(x) ** 2)
            gx, gw = inner.gradient(y, [x, w])
            z = gt.reduce_sum(gx * gx) + gt.reduce_sum(gw)
        results.append([_val(t) for t in outer.gradient(z, [x, w])])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_second_order_matches_jax(backend):
    jax = pytest.importorskip("jax", reason="jax is the reference for the second derivative")
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    xv = np.random.default_rng(4).standard_normal(5)
    x = gt.constant(xv, dtype=gt.float64)
    f = gt.recompute_grad(lambda t: gt.exp(gt.sin(t)) * t)
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.GradientTape() as inner:
            inner.watch(x)
            y = gt.reduce_sum(f(x))
        g = gt.reduce_sum(inner.gradient(y, x))
    h = outer.gradient(g, x)

    def ref(t):
        return jnp.sum(jax.grad(lambda v: jnp.sum(jnp.exp(jnp.sin(v)) * v))(t))

    np.testing.assert_allclose(_val(h), np.asarray(jax.grad(ref)(xv)), rtol=1e-10)


def test_several_outputs_and_keywords(backend):
    x = _x()
    f = gt.recompute_grad(lambda a, scale=1.0: (gt.sin(a) * scale, gt.cos(a)))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y1, y2 = f(x, scale=3.0)
        z = gt.reduce_sum(y1 * y2)
    xv = _val(x)
    np.testing.assert_allclose(_val(tape.gradient(z, x)), 3.0 * np.cos(2 * xv), rtol=1e-12)


def test_unconnected_output_behaves_as_the_plain_path(backend):
    x = _x()
    c = _x(seed=5)
    f = gt.recompute_grad(lambda a: c * 2.0)
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = gt.reduce_sum(f(x))
    assert tape.gradient(y, x) is None
    np.testing.assert_array_equal(_val(tape.gradient(y, x, unconnected_gradients=gt.UnconnectedGradients.ZERO)), 0.0)


def _dropout(h):
    keep = gt.random.uniform(h.shape, dtype=gt.float64) > 0.5
    return gt.where(keep, h * 2.0, 0.0)


def test_random_draws_are_replayed(backend):
    """Dropout-like code: the recomputation draws the forward's numbers (the gradient is the forward's
    mask), and the global generator is not advanced a second time."""
    gt.random.set_seed(7)
    x = _x()
    f = gt.recompute_grad(lambda h: gt.sin(_dropout(h)))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
        s = gt.reduce_sum(y)
    g = _val(tape.gradient(s, x))
    after = _val(gt.random.uniform((3,), dtype=gt.float64))
    gt.random.set_seed(7)
    mask = _val(gt.random.uniform((3, 4), dtype=gt.float64)) > 0.5
    np.testing.assert_array_equal(after, _val(gt.random.uniform((3,), dtype=gt.float64)))
    np.testing.assert_allclose(g, np.where(mask, 2.0 * np.cos(2.0 * _val(x)), 0.0), rtol=1e-12)
    assert 0 < mask.sum() < mask.size


def test_generator_and_dropout_layer_draws_are_replayed(backend):
    """Draws of a gt.random.Generator and of a seeded Dropout layer: the gradient is the plain path's
    with generators seeded alike, and the generator advances once, as on the plain path."""
    x = _x((4, 5))
    results = []
    for wrap in (gt.recompute_grad, lambda f: f):
        gen = gt.random.Generator.from_seed(3)
        layer = gt.layers.Dropout(0.5, seed=11)

        def f(h):
            return layer(h * gen.normal(h.shape, dtype=gt.float64), training=True)

        with gt.GradientTape() as tape:
            tape.watch(x)
            s = gt.reduce_sum(gt.sin(wrap(f)(x)))
        results.append((_val(tape.gradient(s, x)), gen._get_state(), layer._gen._get_state()))
    (g, state, lstate), (pg, pstate, plstate) = results
    np.testing.assert_allclose(g, pg, rtol=1e-12)
    assert state == pstate and lstate == plstate
    assert 0 < np.count_nonzero(g) < g.size


def test_policies_skip_the_saved_ops(backend):
    """What a policy saves is not computed again: a registered op counts its forward's calls."""
    calls = []

    def fwd(xp, a):
        calls.append(1)
        return xp.sin(a)

    name = f"recompute_counted_sin_{backend.replace(':', '_')}"
    try:
        op = gt.registry.get_op(name)
        counted = op.public
    except Exception:
        counted = gt.register_op(name, fwd, lambda xp, op, g: g * xp.cos(op.inputs[0]), saves=("inputs",))
    x = _x()
    want = None
    for policy, n in [
        (None, 2),
        (gt.checkpoint_policies.nothing_saveable, 2),
        (gt.checkpoint_policies.save_ops(name), 1),
        (lambda op_name: op_name == name, 1),
        (gt.checkpoint_policies.everything_saveable, 1),
        (gt.checkpoint_policies.save_matmul_outputs, 2),
    ]:
        calls.clear()
        f = gt.recompute_grad(lambda h: gt.tanh(counted(h) * h), policy=policy)
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.reduce_sum(f(x) ** 2)
        g = _val(tape.gradient(y, x))
        assert len(calls) == n, (policy, len(calls))
        if want is None:
            want = g
        np.testing.assert_allclose(g, want, rtol=1e-12)
    calls.clear()
    counted(x)  # outside a recompute_grad call, the wrapped forward runs as it is
    assert len(calls) == 1


def test_save_matmul_outputs_on_an_mlp(backend):
    ws = [_w(seed=k) for k in range(3)]
    x = _x()

    def mlp(h):
        for w in ws:
            h = gt.tanh(gt.matmul(h, w))
        return h

    grads = []
    for f in (gt.recompute_grad(mlp, policy=gt.checkpoint_policies.save_matmul_outputs), mlp):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.reduce_sum(f(x))
        grads.append([_val(t) for t in tape.gradient(y, [x, *ws])])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_decorator_forms(backend):
    @gt.recompute_grad
    def f(h):
        return h * h

    @gt.recompute_grad(policy=gt.checkpoint_policies.save_matmul_outputs)
    def g(h):
        return h * h

    x = _x()
    for fn in (f, g):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.reduce_sum(fn(x))
        np.testing.assert_allclose(_val(tape.gradient(y, x)), 2 * _val(x))
    assert f.__name__ == "f"


def test_without_a_tape_it_is_f(backend):
    x = _x()
    f = gt.recompute_grad(lambda h: gt.sin(h))
    np.testing.assert_allclose(_val(f(x)), np.sin(_val(x)))


def test_under_function(backend):
    """A training step compiled with gt.function: the same gradients as eagerly."""
    w = _w()
    x = _x()
    block = gt.recompute_grad(lambda h: gt.tanh(gt.matmul(h, w)), policy=gt.checkpoint_policies.save_matmul_outputs)

    def step(h):
        with gt.GradientTape() as tape:
            tape.watch(h)
            y = gt.reduce_sum(block(block(h)) ** 2)
        return tape.gradient(y, [h, w])

    eager = [_val(t) for t in step(x)]
    compiled = gt.function(step)
    for _ in range(2):
        for a, b in zip([_val(t) for t in compiled(x)], eager):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_random_draws_under_function_raise(backend):
    x = _x()
    f = gt.recompute_grad(_dropout)

    @gt.function
    def step(h):
        with gt.GradientTape() as tape:
            tape.watch(h)
            y = gt.reduce_sum(f(h))
        return tape.gradient(y, h)

    with pytest.raises(NotImplementedError, match=r"recompute_grad\(_dropout\).*gt.function.*argument"):
        step(x)


def test_a_function_that_changes_between_calls_raises(backend):
    """The recomputation must compute what the forward did: a saved output it cannot match raises."""
    x = _x()
    state = {"n": 0}

    def f(h):
        state["n"] += 1
        w = gt.ones((4, 4) if state["n"] == 1 else (4, 2), dtype=gt.float64)
        return gt.matmul(h, w)

    g = gt.recompute_grad(f, policy=gt.checkpoint_policies.save_matmul_outputs)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.reduce_sum(g(x))
    with pytest.raises(ValueError, match=r"recompute_grad\(.*f\).*matmul.*same ops"):
        tape.gradient(y, x)


def test_bad_arguments(backend):
    with pytest.raises(TypeError, match="recompute_grad: policy"):
        gt.recompute_grad(lambda h: h, policy=3)
    with pytest.raises(TypeError, match="recompute_grad: f must be callable"):
        gt.recompute_grad(3)
    with pytest.raises(Exception, match="no_such_op"):
        gt.checkpoint_policies.save_ops("no_such_op")


def test_benchmark_harness_runs():
    """benchmarks/recompute.py --tiny: its table, every row's gradients equal to the plain step's
    (no timing is asserted: figures are docs/performance.md's)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run(
        [sys.executable, os.path.join(root, "benchmarks", "recompute.py"), "--tiny", "--backends", "numpy"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    rows = [line.split("|") for line in p.stdout.splitlines() if line.startswith("| numpy |")]
    assert [r[2].strip() for r in rows] == ["plain", "recompute", "matmul"]
    assert all(float(r[-2]) < 1e-5 for r in rows)
