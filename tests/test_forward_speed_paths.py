"""``gt.jacfwd``'s batched forward walk (issue 23, item 6): the basis vectors as a leading batch
axis of the tangents, one walk instead of one per input element, on native arrays (nothing
records) and on Tensors (an outer tape or accumulator records: ``jacfwd(jacfwd)``,
``jacrev(jacfwd)``).  Every case is checked against ``jax.jacfwd`` (float64, on NumPy copies) and
against the per-basis walk, and the tests check which walk ran, so that a path that silently stops
being taken fails here; nodes the batched walk does not take (a custom gradient, a complex value)
fall back to the per-basis walk, still right."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt
from gradtape.autodiff import forward

jax = pytest.importorskip("jax", reason="the reference results are JAX's")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

RNG = np.random.default_rng(23)
X = RNG.standard_normal(3)
W = RNG.standard_normal((3, 4))
V = RNG.standard_normal((2, 3))


def c64(a):
    return gt.constant(np.asarray(a, dtype=np.float64), dtype=gt.float64)


@pytest.fixture
def walks(monkeypatch):
    """The batch sizes of the forward walks run (0: a walk of one tangent), in order."""
    seen = []
    orig = forward._forward_walk

    def spy(nodes, primals, tangents, nb=0):
        seen.append(nb)
        return orig(nodes, primals, tangents, nb)

    monkeypatch.setattr(forward, "_forward_walk", spy)
    return seen


# each function written once for gradtape (ns = gt) and JAX (ns = jax.numpy): every kind of node the
# batched walk takes (element-wise with broadcasting and Python scalars, the linear ops through their
# batching kinds, matmul on either side), one per case
def _bcast(ns, x):  # element-wise: a tangent of lower rank than the output, a scalar output
    return ns.sin(x)[:, None] * ns.asarray(W) + 0.5 * ns.exp(x)[:, None] - x[:, None] / 3.0


def _reductions(ns, x):
    m = ns.reshape(x * x, (3, 1)) * ns.asarray(W)
    return ns.concat([ns.sum(m, axis=0), ns.mean(m, axis=1), ns.sum(m)[None]], axis=0)


def _manipulation(ns, x):
    m = ns.stack([x, 2.0 * x, ns.tanh(x)], axis=1)  # (3, 3)
    t = ns.permute_dims(ns.expand_dims(m, axis=0), (2, 1, 0))  # (3, 3, 1)
    return ns.squeeze(t, axis=2)[1:, ::-1] ** 2


def _products(ns, x):
    w = ns.asarray(W)
    v = ns.asarray(V)
    return (x @ w) * ns.sum(v @ x) + ns.matrix_transpose(w) @ ns.cos(x)


def _getitem(ns, x):
    return ns.sqrt(x[ns.asarray([2, 0, 2])] + 2.0) * x[0]


def _divide_where(ns, x):
    return ns.where(x > 0, x / (1.0 + x * x), ns.negative(x) ** 3)


CASES = {f.__name__: f for f in (_bcast, _reductions, _manipulation, _products, _getitem, _divide_where)}


def _ref(fn, x):
    return np.asarray(jax.jacfwd(lambda a: fn(jnp, a))(jnp.asarray(x)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_jacfwd_walks_once_with_the_batch(backend, case, walks):
    fn = CASES[case]
    got = gt.jacfwd(lambda a: fn(gt, a))(c64(X))
    np.testing.assert_allclose(got.numpy(), _ref(fn, X), rtol=1e-12, atol=1e-12)
    assert walks == [3], walks  # one walk, three basis vectors at once


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_batched_walk_agrees_with_the_per_basis_walk(backend, case, monkeypatch):
    fn = CASES[case]
    batched = gt.jacfwd(lambda a: fn(gt, a))(c64(X)).numpy()

    def refuse(*args, **kwargs):
        raise forward.NotBatched("(refused by the test)")

    monkeypatch.setattr(forward.ForwardAccumulator, "_jvps_batched", refuse)
    looped = gt.jacfwd(lambda a: fn(gt, a))(c64(X)).numpy()
    np.testing.assert_allclose(batched, looped, rtol=1e-13, atol=1e-14)


def _f2(ns, x):
    return ns.sum(ns.sin(x) * ns.exp(x[::-1])) + 0.5 * ns.sum(x * x) ** 2


def test_jacfwd_of_jacfwd_records_the_batched_walk(backend, walks):
    # the inner walk runs on Tensors (the outer accumulator records it), batched, and the outer walk
    # runs through what it recorded (the batched ops with their shifted axes), batched too
    got = gt.jacfwd(gt.jacfwd(lambda a: _f2(gt, a)))(c64(X))
    want = np.asarray(jax.jacfwd(jax.jacfwd(lambda a: _f2(jnp, a)))(jnp.asarray(X)))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    assert walks == [3, 3], walks


def _f3(ns, x):
    return ns.sum(ns.sin(x) * ns.exp(ns.mean(x))) + 0.5 * ns.sum((x @ ns.asarray(W)) ** 2) / (1.0 + ns.sum(x * x))


@pytest.mark.parametrize("fn", [_f2, _f3])
def test_jacrev_of_jacfwd_and_jacfwd_of_jacrev(backend, walks, fn):
    want = np.asarray(jax.hessian(lambda a: fn(jnp, a))(jnp.asarray(X)))
    rf = gt.jacrev(gt.jacfwd(lambda a: fn(gt, a)))(c64(X))
    np.testing.assert_allclose(rf.numpy(), want, rtol=1e-12, atol=1e-12)
    assert walks == [3], walks  # the inner (recorded) walk batched
    fr = gt.jacfwd(gt.jacrev(lambda a: fn(gt, a)))(c64(X))
    np.testing.assert_allclose(fr.numpy(), want, rtol=1e-12, atol=1e-12)
    if fn is _f3:
        assert walks == [3, 3], walks  # the outer walk through the recorded backward walk, batched
    else:
        # getitem's rule scatters into zeros it did not keep (a setitem node): the batched walk and the
        # walks per basis vector leave that node to the double transposition
        assert walks[:2] == [3, 3] and set(walks[2:]) == {0}, walks


def test_several_arguments_each_batched(backend, walks):
    def f(ns, x, w):
        return ns.tanh(x @ w) * ns.sum(w, axis=0)

    got = gt.jacfwd(lambda a, b: f(gt, a, b), argnums=(0, 1))(c64(X), c64(W))
    want = jax.jacfwd(lambda a, b: f(jnp, a, b), argnums=(0, 1))(jnp.asarray(X), jnp.asarray(W))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=1e-12, atol=1e-12)
    assert walks == [3, 12], walks  # one walk per argument, its basis batched (the other's zeros)


def test_a_node_the_batched_walk_does_not_take_falls_back(backend, walks):
    @gt.custom_gradient
    def cube(x):
        def grad(g):
            return g * 3.0 * x * x

        return x * x * x, grad

    got = gt.jacfwd(lambda a: gt.sin(cube(a)))(c64(X))
    want = np.asarray(jax.jacfwd(lambda a: jnp.sin(a**3))(jnp.asarray(X)))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    assert walks[0] == 3 and 0 in walks[1:], walks  # tried batched, then per basis vector (or vmap)


def test_a_complex_tangent_is_not_batched(backend, walks):
    z = gt.constant(np.array([1.0 + 2.0j, -0.5 + 0.25j]), dtype=gt.complex128)
    got = gt.jacfwd(lambda a: gt.exp(a) * a, holomorphic=True)(z)
    want = np.asarray(jax.jacfwd(lambda a: jnp.exp(a) * a, holomorphic=True)(jnp.asarray(z.numpy())))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    assert walks[0] == 2 and 0 in walks[1:], walks


def test_the_benchmark_runs_both_forms_of_forward_mode(tmp_path):
    # benchmarks/nested_ad.py: forward mode by gt.jacfwd, and with --per-component the rows of one
    # accumulator per input component; both agree with the reverse-over-reverse answer (a --tiny run)
    import json
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tmp_path / "n.json"
    cmd = [sys.executable, os.path.join(root, "benchmarks", "nested_ad.py"), "--tiny", "--only", "saddle"]
    cmd += ["--frameworks", "gradtape-numpy", "--per-component", "--json", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=root, check=False)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    cells = {(r["framework"], r["variant"]): r for r in json.loads(out.read_text())["results"]}
    for v in ("ff", "rf", "fr"):
        for f in ("gradtape-numpy", "gradtape-numpy-per-component"):
            assert cells[(f, v)]["max_abs_diff"] <= 1e-12, cells[(f, v)]
