"""The functional transforms (issue 24, item 2): ``gt.grad``, ``value_and_grad``, ``vjp``, ``jvp``,
``jacrev``, ``jacfwd``, ``hessian``, ``hvp``, on every backend, against ``jax`` (float64, computed on
NumPy copies of the inputs) and ``torch.func`` where it has the transform."""

from __future__ import annotations

import numpy as np
import optree
import pytest

import gradtape as gt

jax = pytest.importorskip("jax", reason="the reference results are JAX's")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

RTOL = 1e-10
ATOL = 1e-12
RNG = np.random.default_rng(24)


def c64(a):
    return gt.constant(np.asarray(a, dtype=np.float64), dtype=gt.float64)


def close(got, want, rtol=RTOL, atol=ATOL):
    """Two structures of arrays equal leaf by leaf (gradtape's leaves are Tensors)."""
    g_leaves, g_spec = optree.tree_flatten(got)
    w_leaves, w_spec = optree.tree_flatten(want)
    assert g_spec == w_spec, (g_spec, w_spec)
    for g, w in zip(g_leaves, w_leaves):
        assert isinstance(g, gt.Tensor), type(g)
        assert tuple(g.shape) == tuple(np.shape(w)), (g.shape, np.shape(w))
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=rtol, atol=atol)


def both(fn):
    """``fn(ns)`` written once for gradtape (``ns = gt``) and for JAX (``ns = jax.numpy``)."""
    return (lambda *a: fn(gt, *a)), (lambda *a: fn(jnp, *a))


def np_tree(tree):
    return optree.tree_map(lambda t: t.numpy() if isinstance(t, gt.Tensor) else np.asarray(t), tree)


def gt_tree(tree):
    return optree.tree_map(c64, tree)


# ---------------------------------------------------------------------------------------- a model
def _mlp(ns, params, x):
    """A small tanh MLP's mean squared output (what the Hessian tests differentiate)."""
    h = ns.tanh(x @ params["w1"] + params["b1"])
    y = h @ params["w2"] + params["b2"]
    return ns.mean(y**2)


MLP_PARAMS = {
    "w1": RNG.standard_normal((3, 4)) / 2,
    "b1": RNG.standard_normal(4) / 10,
    "w2": RNG.standard_normal((4, 2)) / 2,
    "b2": RNG.standard_normal(2) / 10,
}
MLP_X = RNG.standard_normal((5, 3))


def _poly(ns, x, y):
    return ns.sum(ns.sin(x) * y**2) + ns.sum(x * x) * ns.sum(y)


X3 = np.array([0.3, -1.2, 2.0])
Y3 = np.array([0.7, 0.1, -0.4])


# ---------------------------------------------------------------------------------------- grad
def test_grad_matches_jax(backend):
    f, jf = both(lambda ns, x: ns.sum(ns.sin(x) * x**2) / (1.0 + ns.sum(ns.exp(-x))))
    close(gt.grad(f)(c64(X3)), jax.grad(jf)(X3))


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0), -1])
def test_grad_argnums_match_jax(backend, argnums):
    f, jf = both(_poly)
    close(gt.grad(f, argnums=argnums)(c64(X3), c64(Y3)), jax.grad(jf, argnums=argnums)(X3, Y3))


def test_value_and_grad_with_aux_matches_jax(backend):
    def fn(ns, x, y):
        loss = _poly(ns, x, y)
        return loss, {"norm": ns.sum(x * x), "y": y}

    f, jf = both(fn)
    (v, aux), g = gt.value_and_grad(f, argnums=(0, 1), has_aux=True)(c64(X3), c64(Y3))
    (jv, jaux), jg = jax.value_and_grad(jf, argnums=(0, 1), has_aux=True)(X3, Y3)
    close(v, jv)
    close(aux, jaux)
    close(g, jg)
    g2, aux2 = gt.grad(f, has_aux=True)(c64(X3), c64(Y3))
    close(g2, jax.grad(jf, has_aux=True)(X3, Y3)[0])
    close(aux2, jaux)


def test_grad_pytree_arguments_match_jax(backend):
    """A dict of parameters and a tuple argument: the gradients come back in their structures."""

    def fn(ns, params, pair, scale):
        a, b = pair
        return _mlp(ns, params, a) * scale + ns.sum(b**3)

    f, jf = both(fn)
    pair = (MLP_X, X3)
    got = gt.grad(f, argnums=(0, 1))(gt_tree(MLP_PARAMS), gt_tree(pair), 0.5)
    want = jax.grad(jf, argnums=(0, 1))(MLP_PARAMS, pair, 0.5)
    assert isinstance(got, tuple) and isinstance(got[0], dict) and isinstance(got[1], tuple)
    close(got, want)


def test_grad_of_grad_of_grad_of_sin(backend):
    x = c64(0.5)
    d3 = gt.grad(gt.grad(gt.grad(gt.sin)))
    close(d3(x), jax.grad(jax.grad(jax.grad(jnp.sin)))(0.5))
    close(d3(x), -np.cos(0.5))
    d4 = gt.grad(d3)
    close(d4(x), np.sin(0.5))


def test_grad_is_with_respect_to_the_argument_only(backend):
    """As JAX: the same tensor passed twice, or closed over, is not the differentiated argument."""
    x = c64(X3)
    close(gt.grad(lambda a, b: gt.sum(a * b))(x, x), X3)  # d/da only: b
    close(gt.grad(lambda a: gt.sum(a * x))(x), X3)  # the closure's x is a constant
    close(gt.grad(lambda a: gt.sum(a * a))(x), 2 * X3)


def test_an_argument_without_leaves(backend):
    """An empty structure among the differentiated arguments: its gradient is the empty structure."""
    got = gt.grad(lambda p, x: gt.sum(x**2) + 1.0, argnums=(0, 1))({}, c64(X3))
    assert got[0] == {}
    close(got[1], 2 * X3)
    assert gt.jacrev(lambda p: 2.0)({}) == {}


def test_unconnected_argument_has_zero_gradient(backend):
    g = gt.grad(lambda a, b: gt.sum(b * 2.0), argnums=(0, 1))(c64(X3), c64(Y3))
    close(g, (np.zeros(3), np.full(3, 2.0)))
    close(gt.grad(lambda a: 3.0)(c64(X3)), np.zeros(3))


def test_arguments_of_every_kind(backend):
    """A Variable, a native array of the backend, a NumPy array and a Python float are arguments like
    gt.Tensors; the gradients are gt.Tensors."""
    f, jf = both(lambda ns, a, b, c, d: ns.sum(ns.sin(a) * b) + ns.sum(c**2) * d**3)
    v = gt.Variable(X3, dtype=gt.float64)
    native = c64(Y3).native
    got = gt.grad(f, argnums=(0, 1, 2, 3))(v, native, np.array([1.0, 2.0]), 1.5)
    want = jax.grad(jf, argnums=(0, 1, 2, 3))(X3, Y3, np.array([1.0, 2.0]), 1.5)
    close(got[:3], want[:3])
    assert got[3].dtype == gt.float32  # a Python float converts to TF's default float32
    np.testing.assert_allclose(got[3].numpy(), want[3], rtol=1e-6)
    assert isinstance(v, gt.Variable) and np.array_equal(v.numpy(), X3)  # the variable is only read


def test_float32_inputs_give_float32_gradients(backend):
    x = gt.constant(X3.astype(np.float32))
    assert x.dtype == gt.float32
    for g in (gt.grad(lambda a: gt.sum(gt.tanh(a)))(x), gt.hvp(lambda a: gt.sum(a**3), (x,), (x,))[0]):
        assert g.dtype == gt.float32
    # (1 - tanh² cancels: a GPU's float32 tanh one ulp off is 2e-6 relative here)
    np.testing.assert_allclose(gt.grad(lambda a: gt.sum(gt.tanh(a)))(x).numpy(), 1 - np.tanh(X3) ** 2, rtol=1e-5)
    g = gt.grad(lambda a: a * a)(3.0)
    assert g.dtype == gt.float32 and float(g) == 6.0


# ---------------------------------------------------------------------------------------- vjp / jvp
def test_vjp_matches_jax_and_is_reusable(backend):
    def fn(ns, x, y):
        return {"a": ns.sin(x) * y, "b": ns.sum(x * y)}

    f, jf = both(fn)
    out, vjp_fn = gt.vjp(f, c64(X3), c64(Y3))
    jout, jvjp = jax.vjp(jf, X3, Y3)
    close(out, jout)
    for ct in ({"a": np.ones(3), "b": np.array(2.0)}, {"a": np.array([1.0, -2.0, 0.5]), "b": np.array(0.0)}):
        close(vjp_fn(gt_tree(ct)), jvjp(ct))


def test_vjp_with_aux(backend):
    out, vjp_fn, aux = gt.vjp(lambda x: (gt.sin(x), gt.cos(x)), c64(X3), has_aux=True)
    close(aux, np.cos(X3))
    close(vjp_fn(c64(np.ones(3))), (np.cos(X3),))


def test_jvp_matches_jax(backend):
    f, jf = both(lambda ns, x, y: (ns.sin(x) * y, ns.sum(x**2 * y)))
    t = (np.array([1.0, 0.5, -2.0]), np.array([0.0, 1.0, 3.0]))
    out, tan = gt.jvp(f, (c64(X3), c64(Y3)), gt_tree(t))
    jout, jtan = jax.jvp(jf, (X3, Y3), t)
    close(out, jout)
    close(tan, jtan)


def test_jvp_with_aux_and_pytree_primals(backend):
    def fn(ns, p):
        return _mlp(ns, p, MLP_X), p["b1"] * 2

    f, jf = both(fn)
    tangent = optree.tree_map(lambda a: np.ones_like(a) / 3, MLP_PARAMS)
    out, tan, aux = gt.jvp(f, (gt_tree(MLP_PARAMS),), (gt_tree(tangent),), has_aux=True)
    jout, jtan, jaux = jax.jvp(jf, (MLP_PARAMS,), (tangent,), has_aux=True)
    close((out, tan, aux), (jout, jtan, jaux))


def test_jvp_is_a_column_of_jacfwd(backend):
    f = lambda x: gt.sin(x) * gt.sum(x**2)
    x = c64(X3)
    jac = gt.jacfwd(f)(x).numpy()
    for i in range(3):
        e = np.eye(3)[i]
        _, col = gt.jvp(f, (x,), (c64(e),))
        close(col, jac[:, i])


# ---------------------------------------------------------------------------------------- jacobians
@pytest.mark.parametrize("which", ["jacrev", "jacfwd"])
def test_jacobians_match_jax(backend, which):
    def fn(ns, x, y):
        return {"v": ns.sin(x)[:, None] * y, "s": ns.sum(x * y)}

    f, jf = both(fn)
    ours, theirs = getattr(gt, which), getattr(jax, which)
    close(ours(f)(c64(X3), c64(Y3)), theirs(jf)(X3, Y3))
    close(ours(f, argnums=(0, 1))(c64(X3), c64(Y3)), theirs(jf, argnums=(0, 1))(X3, Y3))
    p = gt_tree(MLP_PARAMS)
    close(ours(lambda p: gt.tanh(MLP_X @ p["w1"]))(p), theirs(lambda p: jnp.tanh(MLP_X @ p["w1"]))(MLP_PARAMS))


def test_jacobians_with_aux(backend):
    for ours in (gt.jacrev, gt.jacfwd):
        jac, aux = ours(lambda x: (gt.sin(x), gt.sum(x)), has_aux=True)(c64(X3))
        close(jac, np.diag(np.cos(X3)))
        close(aux, np.sum(X3))


# ---------------------------------------------------------------------------------------- Hessians
def test_mlp_hessian_matches_jax_and_torch_func(backend):
    f, jf = both(_mlp)
    got = gt.hessian(f)(gt_tree(MLP_PARAMS), c64(MLP_X))
    want = jax.hessian(jf)(MLP_PARAMS, MLP_X)
    close(got, want)
    torch = pytest.importorskip("torch", reason="torch.func is the second reference")
    tp = {k: torch.tensor(v) for k, v in MLP_PARAMS.items()}
    th = torch.func.hessian(lambda p: _mlp(torch, p, torch.tensor(MLP_X)))(tp)
    close(got, optree.tree_map(lambda t: t.numpy(), th))


def test_hessian_compositions_agree(backend):
    """hessian = jacfwd(jacrev) = jacrev(jacrev) = jacrev(jacfwd) = jacfwd(jacfwd), with tuple argnums."""
    f, jf = both(_poly)
    want = jax.hessian(jf, argnums=(0, 1))(X3, Y3)
    x, y = c64(X3), c64(Y3)
    close(gt.hessian(f, argnums=(0, 1))(x, y), want)
    for outer in (gt.jacrev, gt.jacfwd):
        for inner in (gt.jacrev, gt.jacfwd):
            close(outer(inner(f, argnums=(0, 1)), argnums=(0, 1))(x, y), want)


def test_hvp_matches_hessian_times_vector_and_jax(backend):
    f, jf = both(_mlp)
    x = c64(MLP_X)
    p = gt_tree(MLP_PARAMS)
    v = {k: RNG.standard_normal(a.shape) for k, a in MLP_PARAMS.items()}
    (hv,) = gt.hvp(lambda p: f(p, x), (p,), (gt_tree(v),))
    want = jax.jvp(jax.grad(lambda p: jf(p, MLP_X)), (MLP_PARAMS,), (v,))[1]
    close(hv, want)
    h = jax.hessian(lambda p: jf(p, MLP_X))(MLP_PARAMS)
    by_matrix = {
        k: sum(np.tensordot(np.asarray(h[k][j]), v[j], axes=v[j].ndim) for j in MLP_PARAMS) for k in MLP_PARAMS
    }
    close(hv, by_matrix)


def test_hvp_of_several_primals(backend):
    f, jf = both(_poly)
    t = (np.array([1.0, 0.0, -1.0]), np.array([0.5, 2.0, 0.0]))
    got = gt.hvp(f, (c64(X3), c64(Y3)), gt_tree(t))
    want = jax.jvp(jax.grad(jf, argnums=(0, 1)), (X3, Y3), t)[1]
    close(got, want)


# ---------------------------------------------------------------------------------------- composition
def test_inside_a_gradient_tape(backend):
    """A tape outside records the transform: its gradient of gt.grad's result is the Hessian's."""
    f, jf = both(lambda ns, x: ns.sum(ns.sin(x) * x**3))
    x = c64(X3)
    with gt.GradientTape() as tape:
        tape.watch(x)
        g = gt.grad(f)(x)
        (hv,) = gt.hvp(f, (x,), (c64(np.ones(3)),))
        loss = gt.sum(g * g) + gt.sum(hv)
    want = jax.grad(lambda x: jnp.sum(jax.grad(jf)(x) ** 2) + jnp.sum(jax.hessian(jf)(x) @ np.ones(3)))(X3)
    close(tape.gradient(loss, x), want)


def test_inside_a_forward_accumulator(backend):
    f, jf = both(lambda ns, x: ns.sum(ns.sin(x) * x**3))
    x, v = c64(X3), c64(Y3)
    with gt.ForwardAccumulator(x, v) as acc:
        g = gt.grad(f)(x)
    close(acc.jvp(g), jax.jvp(jax.grad(jf), (X3,), (Y3,))[1])


def test_inside_gt_function(backend):
    f, jf = both(_poly)

    @gt.function
    def step(x, y):
        g = gt.grad(f, argnums=(0, 1))(x, y)
        h = gt.hessian(f)(x, y)
        (hv,) = gt.hvp(lambda a: f(a, y), (x,), (y,))
        return g, h, hv

    want = (jax.grad(jf, argnums=(0, 1))(X3, Y3), jax.hessian(jf)(X3, Y3), jax.hessian(jf)(X3, Y3) @ Y3)
    for _ in range(2):  # the trace, then the program
        close(step(c64(X3), c64(Y3)), want)
    xs = X3 + 0.25
    want = (jax.grad(jf, argnums=(0, 1))(xs, Y3), jax.hessian(jf)(xs, Y3), jax.hessian(jf)(xs, Y3) @ Y3)
    close(step(c64(xs), c64(Y3)), want)


def test_a_gradient_tape_inside_the_function(backend):
    def f(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.sum(gt.sin(x) ** 2)
        return gt.sum(tape.gradient(y, x) * x)

    close(gt.grad(f)(c64(X3)), jax.grad(lambda x: jnp.sum(jax.grad(lambda x: jnp.sum(jnp.sin(x) ** 2))(x) * x))(X3))


# ---------------------------------------------------------------------------------------- errors
def test_non_scalar_output_is_a_type_error(backend):
    with pytest.raises(TypeError, match=r"gt.grad is only defined for scalar-output functions.*shape \(3,\)"):
        gt.grad(gt.sin)(c64(X3))
    with pytest.raises(TypeError, match="gt.value_and_grad differentiates functions with one scalar output"):
        gt.value_and_grad(lambda x: (gt.sum(x), x))(c64(X3))
    with pytest.raises(TypeError, match="real floating output"):
        gt.grad(lambda x: gt.sum(gt.cast(x, gt.int32)))(c64(X3))


def test_integer_argument_is_a_type_error_naming_it(backend):
    with pytest.raises(TypeError, match="gt.grad requires floating .* argument 1 has dtype int"):
        gt.grad(lambda x, n: gt.sum(x) * n, argnums=(0, 1))(c64(X3), gt.constant(3))
    with pytest.raises(TypeError, match=r"argument 0\['b'\] has dtype int"):
        gt.jacrev(lambda p: p["a"])({"a": c64(X3), "b": 2})
    # left out of argnums, an integer argument is fine
    close(gt.grad(lambda x, n: gt.sum(x) * gt.cast(n, gt.float64))(c64(X3), gt.constant(3)), np.full(3, 3.0))


def test_bad_calls_are_errors(backend):
    x = c64(X3)
    with pytest.raises(ValueError, match="names argument 2, but the function was called with 1"):
        gt.grad(gt.sum, argnums=2)(x)
    with pytest.raises(TypeError, match=r"has_aux=True\) requires the function to return a pair"):
        gt.grad(gt.sum, has_aux=True)(x)
    with pytest.raises(TypeError, match="primals must be a tuple"):
        gt.jvp(gt.sin, x, x)
    with pytest.raises(ValueError, match="tangent of shape"):
        gt.jvp(gt.sin, (x,), (c64([1.0]),))
    with pytest.raises(TypeError, match="gt.jvp needs at least one primal"):
        gt.jvp(gt.sin, (), ())
    with pytest.raises(ValueError, match="1 primals but 2 tangents"):
        gt.hvp(gt.sum, (x,), (x, x))
    _, vjp_fn = gt.vjp(lambda a: (gt.sin(a), a), x)
    with pytest.raises(ValueError, match="cotangent's structure"):
        vjp_fn(x)


def test_complex_inputs_follow_tensorflow_and_torch(backend):
    """A complex argument's gradient is TensorFlow's and PyTorch's, the conjugate of JAX's (said in
    docs/transforms.md)."""
    z = np.array([3 + 4j, -1 + 0.5j])
    f, jf = both(lambda ns, z: ns.sum(ns.real(z * z)) + ns.sum(ns.abs(z) ** 2))
    got = gt.grad(f)(gt.constant(z, dtype=gt.complex128))
    np.testing.assert_allclose(got.numpy(), np.conj(np.asarray(jax.grad(jf)(z))), rtol=RTOL)
    np.testing.assert_allclose(got.numpy(), 2 * np.conj(z) + 2 * z, rtol=RTOL)


def test_hessian_with_aux_and_argnums(backend):
    f, jf = both(lambda ns, x, y: (_poly(ns, x, y), ns.sum(y)))
    h, aux = gt.hessian(f, argnums=1, has_aux=True)(c64(X3), c64(Y3))
    jh, jaux = jax.hessian(jf, argnums=1, has_aux=True)(X3, Y3)
    close((h, aux), (jh, jaux))


# ---------------------------------------------------------------------------------------- the forward walk
@pytest.mark.parametrize("op", ["softmax", "sparse_xent", "xent", "xent_axis0"])
def test_forward_walk_derives_softmax_and_cross_entropies(backend, op, monkeypatch):
    """softmax (a symmetric Jacobian) and the cross-entropies (one row of the input per output element)
    get their tangents from the forward walk, not from transposing the whole tape twice (what made
    W3's HVP 20x a gradient), and they agree with JAX's."""
    import jax.nn

    from gradtape.autodiff.forward import ForwardAccumulator

    def no_transposition(self, *a):
        raise AssertionError("the forward walk fell back to the double transposition")

    monkeypatch.setattr(ForwardAccumulator, "_transposed", no_transposition)
    logits = RNG.standard_normal((4, 3))
    labels = RNG.integers(0, 3, size=4)
    soft = np.abs(RNG.standard_normal((4, 3)))
    if op == "softmax":
        f, jf = gt.nn.softmax, jax.nn.softmax
    elif op == "sparse_xent":
        lab = gt.constant(labels)

        def f(z):
            return gt.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=z)

        def jf(z):
            return -jnp.take_along_axis(jax.nn.log_softmax(z), labels[:, None], axis=1)[:, 0]
    else:
        axis = 0 if op == "xent_axis0" else -1

        def f(z, y):
            return gt.nn.softmax_cross_entropy_with_logits(labels=y, logits=z, axis=axis)

        def jf(z, y):
            return -jnp.sum(y * jax.nn.log_softmax(z, axis=axis), axis=axis)

    primals = (logits,) if op in ("softmax", "sparse_xent") else (logits, soft)
    tangents = tuple(RNG.standard_normal(p.shape) for p in primals)
    out, tan = gt.jvp(f, gt_tree(primals), gt_tree(tangents))
    jout, jtan = jax.jvp(jf, primals, tangents)
    close((out, tan), (jout, jtan))
    # and its HVP: forward over the recorded backward walk of the same ops
    v = RNG.standard_normal(logits.shape)
    (hv,) = gt.hvp(lambda z: gt.sum(f(z, *map(c64, primals[1:])) ** 2), (c64(logits),), (c64(v),))
    want = jax.jvp(jax.grad(lambda z: jnp.sum(jf(z, *primals[1:]) ** 2)), (logits,), (v,))[1]
    close(hv, want)


def test_hvp_benchmark_harness_runs(tmp_path):
    """benchmarks/hvp.py --tiny (the harness, no figure asserted): every installed row runs and
    agrees with the first."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "hvp.json"
    frameworks = "gradtape-numpy,jax"
    p = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "hvp.py"), "--tiny", "--frameworks", frameworks, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
        check=False,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "| `gradtape-numpy` |" in p.stdout and "HVP / gradient" in p.stdout
    rows = json.loads(out.read_text())["rows"]
    assert set(rows) == {"gradtape-numpy", "jax"}
    assert rows["jax"]["max_rel_diff"] < 1e-3
