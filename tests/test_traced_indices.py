"""Index tensors inside ``gt.function`` (session 18).

``x[i]`` with an index tensor ``i`` out of bounds raised ``IndexError`` eagerly on every backend, but a
step compiled on JAX (``jit_compile=True``) clamped it silently (the last row read instead; ``gt.take``
filled NaN) and a step compiled by ``torch.compile`` failed in a kernel with a RuntimeError; and
TensorFlow's ``gt.gather_nd``, ``gt.tensor_scatter_nd_update`` / ``_add`` refused an index tensor inside
``gt.function`` (they read it on the host to check it), where ``tf.gather_nd`` runs inside
``tf.function``.  Now an index tensor's bounds are checked with the step: every call raises
``IndexError`` where one is out of bounds, before any variable is written back, and the ``*_nd``
functions run traced, with TF's refusal of negative positions."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt

JIT = [False, True]


def _table():
    return gt.constant(np.arange(12.0).reshape(4, 3))


@pytest.mark.parametrize("jit", JIT)
def test_an_index_tensor_out_of_bounds_raises_in_every_compiled_call(backend, jit):
    x = _table()
    f = gt.function(lambda x, i: x[i], jit_compile=jit)
    np.testing.assert_array_equal(f(x, gt.constant([0, -1])).numpy(), [[0, 1, 2], [9, 10, 11]])  # NumPy's -1
    for bad in ([0, 4], [-5, 1]):
        with pytest.raises(IndexError, match=r"out of bounds for axis 0 with size 4 \(in op 'getitem'\)"):
            f(x, gt.constant(bad))
    g = gt.function(lambda x, i: x[..., i], jit_compile=jit)
    np.testing.assert_array_equal(g(x, gt.constant([2, 0])).numpy(), x.numpy()[:, [2, 0]])
    with pytest.raises(IndexError, match=r"axis 1 with size 3"):
        g(x, gt.constant([0, 3]))
    np.testing.assert_array_equal(f(x, gt.constant([3, 1])).numpy(), [[9, 10, 11], [3, 4, 5]])  # (still right)
    # gt.take: a compiled JAX take filled NaN for the bad row
    t = gt.function(lambda x, i: gt.take(x, i, axis=0), jit_compile=jit)
    np.testing.assert_array_equal(t(x, gt.constant([0, -1])).numpy(), [[0, 1, 2], [9, 10, 11]])
    with pytest.raises(IndexError, match=r"axis 0 with size 4 \(in op 'take'\)"):
        t(x, gt.constant([0, 7]))


@pytest.mark.parametrize("jit", JIT)
def test_a_failed_index_check_writes_no_variable_back(backend, jit):
    v = gt.Variable(np.zeros(3))
    x = _table()

    @gt.function(jit_compile=jit)
    def step(i):
        v.assign_add(gt.ones(3, dtype=gt.float64))
        return x[i]

    step(gt.constant([1]))
    with pytest.raises(IndexError):
        step(gt.constant([9]))
    np.testing.assert_array_equal(v.numpy(), [1.0, 1.0, 1.0])


@pytest.mark.parametrize("jit", JIT)
def test_gather_nd_runs_inside_gt_function_as_eagerly(backend, jit):
    params = gt.Variable(np.arange(24.0).reshape(2, 3, 4))

    def loss_and_grad(idx, batch_dims=0):
        with gt.GradientTape() as tape:
            out = gt.gather_nd(params, idx, batch_dims=batch_dims)
            loss = gt.reduce_sum(out * out)
        return out, tape.gradient(loss, params)

    traced = gt.function(loss_and_grad, jit_compile=jit)
    for idx, bd in (([[0, 1], [1, 2], [0, 1]], 0), ([[1], [0]], 0), ([[[1, 2]], [[0, 3]]], 1)):
        want = loss_and_grad(gt.constant(idx), bd)
        got = traced(gt.constant(idx), bd)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    for bad in ([[0, 3]], [[2, 0]], [[0, -1]]):  # (TF refuses a negative position too)
        with pytest.raises(IndexError, match=r"gather_nd: an index does not index into shape \[2, 3, 4\]"):
            traced(gt.constant(bad))


@pytest.mark.parametrize("jit", JIT)
def test_tensor_scatter_nd_runs_inside_gt_function_as_eagerly(backend, jit):
    x = gt.constant(np.arange(12.0).reshape(4, 3))
    u = gt.constant(np.full((2, 3), 10.0))

    def both(x, idx, u):
        with gt.GradientTape(persistent=True) as tape:
            tape.watch([x, u])
            a = gt.tensor_scatter_nd_update(x, idx, u)
            b = gt.tensor_scatter_nd_add(x, idx, u)
            loss = gt.reduce_sum(a * b)
        return a, b, *tape.gradient(loss, [x, u])

    traced = gt.function(both, jit_compile=jit)
    for idx in ([[0], [2]], [[3], [1]]):
        want = both(x, gt.constant(idx), u)
        got = traced(x, gt.constant(idx), u)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    with pytest.raises(IndexError, match=r"tensor_scatter_nd_add: an index does not index into shape \[4, 3\]"):
        gt.function(lambda x, i, u: gt.tensor_scatter_nd_add(x, i, u), jit_compile=jit)(x, gt.constant([[0], [4]]), u)
