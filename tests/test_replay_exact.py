"""What docs/function.md promises of a replayed step (``jit_compile=False``), backend by backend
(issue 22, item 5): the eager values bit for bit, except a ``gt.cond`` / ``gt.while_loop`` step on
JAX, which JAX runs as one compiled computation (XLA fuses its ops: round-off)."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt

UNARY = [
    gt.sin,
    gt.tanh,
    gt.exp,
    lambda t: t * 1.5,
    gt.square,
    lambda t: gt.log1p(gt.abs(t)),
    gt.nn.softmax,
    gt.nn.relu,
    lambda t: t + gt.reduce_mean(t, axis=0),
    lambda t: t / (1.0 + gt.reduce_sum(t * t, axis=1, keepdims=True)),
    lambda t: gt.where(t > 0, t, 0.1 * t),
]


def random_step(rng, dtype, control_flow):
    """A random training step: a layer, a chain of ops (through a ``gt.cond`` on a traced predicate
    if ``control_flow``), a loss, its gradient and an Adam update."""
    chain = [UNARY[int(k)] for k in rng.integers(len(UNARY), size=int(rng.integers(2, 6)))]
    w = gt.Variable(rng.normal(size=(4, 3)).astype(dtype))
    b = gt.Variable(rng.normal(size=(3,)).astype(dtype))
    opt = gt.optimizers.Adam(0.01)

    def step(x):
        with gt.GradientTape() as tape:
            y = gt.matmul(x, w) + b
            for op in chain:
                y = op(y)
            if control_flow:
                y = gt.cond(gt.reduce_sum(y) > 0, lambda: gt.tanh(y) * gt.exp(y), lambda: gt.cos(y) * y)
            loss = gt.reduce_mean(y * y)
        grads = tape.gradient(loss, [w, b])
        opt.apply_gradients(zip(grads, [w, b]))
        return loss, grads[0]

    return step, [w, b, opt.iterations]


def replayed_and_eager(backend, seed, dtype, control_flow):
    """The values of one call replayed and of the same call eager, from the same state."""
    rng = np.random.default_rng(seed)
    step, state = random_step(rng, dtype, control_flow)
    replayed = gt.function(step, jit_compile=False)
    replayed(gt.constant(rng.normal(size=(5, 4)).astype(dtype)))  # traced
    x = gt.constant(rng.normal(size=(5, 4)).astype(dtype))
    # the same starting state for both: the model, the step count, and (created by the first call)
    # the slots, taken from a second identical model
    rng2 = np.random.default_rng(seed)
    step2, state2 = random_step(rng2, dtype, control_flow)
    step2(gt.constant(rng2.normal(size=(5, 4)).astype(dtype)))
    for a, c in zip(state, state2):
        np.testing.assert_array_equal(a.numpy(), c.numpy())  # (the traced call is the eager one)
    got = [t.numpy() for t in replayed(x)] + [v.numpy() for v in state]
    want = [t.numpy() for t in step2(x)] + [v.numpy() for v in state2]
    return got, want


@pytest.mark.parametrize("seed", range(8))
def test_a_replayed_step_gives_the_eager_values_bit_for_bit(backend, seed):
    got, want = replayed_and_eager(backend, seed, [np.float32, np.float64][seed % 2], control_flow=False)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("seed", range(4))
def test_a_replayed_step_with_control_flow(backend, seed):
    """Bit for bit on every backend but JAX; on JAX, to float32 round-off (its gt.cond step is
    compiled whole: see docs/function.md)."""
    got, want = replayed_and_eager(backend, seed, np.float32, control_flow=True)
    for g, w in zip(got, want, strict=True):
        if backend.split(":")[0] == "jax":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(g, w)
