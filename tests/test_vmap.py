"""gt.vmap / gt.vectorized_map (issue 24, items 1 and 3), on every backend: the batched result against
a Python loop over the examples, per-example gradients against jax.vmap(jax.grad), tapes inside and
outside the map, nesting, gt.function, the warned loop fallback, and one native call per op."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import gradtape as gt

_names = (f"test_vmap_op_{i}" for i in itertools.count())
RNG = np.random.default_rng(0)


def _t(a):
    return gt.constant(np.asarray(a), dtype=gt.float64)


def _loop(fn, *xs):
    """fn applied to each example (axis 0 of every argument), stacked: the reference."""
    return np.stack([np.asarray(fn(*(x[i] for x in xs)).numpy()) for i in range(xs[0].shape[0])])


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a.numpy() if hasattr(a, "numpy") else a), b, rtol=1e-10, atol=1e-12)


X = RNG.normal(size=(4, 3, 5))
W = RNG.normal(size=(5, 2))


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda x: gt.sin(x) * 2.0 + gt.exp(-x), id="elementwise"),
        pytest.param(lambda x: gt.maximum(x, gt.constant(np.zeros(5), dtype=gt.float64)), id="broadcast"),
        pytest.param(lambda x: x * x[0] - x[:, :1], id="broadcast_batched_ranks"),
        pytest.param(lambda x: 2.0 - gt.reduce_sum(x) * x, id="batched_scalar"),
        pytest.param(lambda x: gt.where(x > 0, x, -x), id="where"),
        pytest.param(lambda x: gt.clip(x, -0.5, 0.5), id="clip"),
        pytest.param(lambda x: gt.reduce_sum(x), id="sum_all"),
        pytest.param(lambda x: gt.reduce_mean(x, axis=-1, keepdims=True), id="mean_axis"),
        pytest.param(lambda x: gt.reduce_max(x, axis=0), id="max_axis0"),
        pytest.param(lambda x: gt.math.reduce_std(x, axis=1), id="std"),
        pytest.param(lambda x: gt.argmax(x), id="argmax_flat"),
        pytest.param(lambda x: gt.nn.softmax(x, axis=0), id="softmax"),
        pytest.param(lambda x: gt.cumsum(x, axis=1), id="cumsum"),
        pytest.param(lambda x: gt.matmul(x, _t(W)), id="matmul"),
        pytest.param(lambda x: gt.matmul(gt.transpose(_t(W)), gt.transpose(x)), id="matmul_left"),
        pytest.param(lambda x: gt.matmul(x[0], _t(W)), id="matmul_vector"),
        pytest.param(lambda x: gt.matmul(x, x[0]), id="matmul_both"),
        pytest.param(lambda x: gt.reshape(x, (5, 3)), id="reshape"),
        pytest.param(lambda x: gt.transpose(x), id="transpose"),
        pytest.param(lambda x: gt.expand_dims(x, axis=-1), id="expand_dims"),
        pytest.param(lambda x: gt.concat([x, x * 2.0], axis=-1), id="concat"),
        pytest.param(lambda x: gt.stack([x, _t(X[0])], axis=1), id="stack_unbatched"),
        pytest.param(lambda x: gt.squeeze(x[:1], axis=0), id="squeeze"),
        pytest.param(lambda x: gt.broadcast_to(x[0], (2, 5)), id="broadcast_to"),
        pytest.param(lambda x: gt.tile(x, (2, 1)), id="tile"),
        pytest.param(lambda x: x[1:, ::2], id="getitem_slices"),
        pytest.param(lambda x: x[..., 2], id="getitem_int"),
        pytest.param(lambda x: x[:, [0, 4, 4]], id="getitem_array"),
        pytest.param(lambda x: gt.linalg.det(gt.matmul(x, gt.transpose(x))), id="det"),
    ],
)
def test_vmap_matches_a_loop(backend, fn):
    x = _t(X)
    _close(gt.vmap(fn)(x), _loop(fn, x))


_M35 = RNG.normal(size=(3, 5))
_V5 = RNG.normal(size=(5,))
_LABELS = np.array([0, 4, 2])
_NEWLY_BATCHED = {
    "einsum_first": lambda x: gt.einsum("ij,jk->ik", x, _t(W)),
    "einsum_second": lambda x: gt.einsum("ki,ij->kj", _t(_M35.T), x),
    "einsum_both": lambda x: gt.einsum("ij,kj->ik", x, x * 2.0),
    "einsum_ellipsis": lambda x: gt.einsum("...j,j->...", x, _t(_V5)),
    "einsum_diag_implicit": lambda x: gt.einsum("ii", gt.matmul(x, gt.transpose(x))),
    "einsum_three": lambda x: gt.einsum("ij,jk,k->i", x, _t(W), x[0, :2]),
    "tensordot_first": lambda x: gt.tensordot(x, _t(W), axes=1),
    "tensordot_second": lambda x: gt.tensordot(_t(_M35), x, axes=[[0], [0]]),
    "tensordot_both": lambda x: gt.tensordot(x, x * x, axes=[[1], [1]]),
    "tensordot_both_all": lambda x: gt.tensordot(x, x + 1.0, axes=2),
    "tensordot_outer": lambda x: gt.tensordot(x[0], _t(_V5), axes=0),
    "outer_first": lambda x: gt.linalg.outer(x[0], _t(_V5)),
    "outer_second": lambda x: gt.linalg.outer(_t(_V5), x[1]),
    "outer_both": lambda x: gt.linalg.outer(x[0], x[2]),
    "l2_loss": lambda x: gt.nn.l2_loss(x),
    "l2_loss_vector": lambda x: gt.nn.l2_loss(x[0]),
    "sparse_xent": lambda x: gt.nn.sparse_softmax_cross_entropy_with_logits(gt.constant(_LABELS), x),
    "fftn": lambda x: gt.math.real(gt.fft.fftn(gt.cast(x, gt.complex128))),
    "fftn_s": lambda x: gt.math.imag(gt.fft.fftn(gt.cast(x, gt.complex128), s=(4,), axes=(-1,))),
    "meshgrid_xy": lambda x: gt.stack(gt.meshgrid(x[0, :3], x[1, :3])),
    "meshgrid_ij": lambda x: gt.meshgrid(_t(_V5[:2]), x[0], indexing="ij")[1],
}


@pytest.mark.parametrize("name", sorted(_NEWLY_BATCHED))
def test_einsum_tensordot_outer_losses_fftn_meshgrid_batch_without_a_loop(backend, name):
    """Ops that had no batching rule (issue 24 item 3): batched, no fallback warning, the loop's
    numbers; and their per-example gradients likewise."""
    fn = _NEWLY_BATCHED[name]
    x = _t(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        got = gt.vmap(fn)(x)
    _close(got, _loop(fn, x))

    def per_example(e):
        with gt.GradientTape() as tape:
            tape.watch(e)
            y = gt.reduce_sum(fn(e) ** 2)
        return tape.gradient(y, e)

    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        got = gt.vmap(per_example)(x)
    _close(got, _loop(per_example, x))


def test_meshgrid_from_a_rule_batches(backend):
    """A rule that calls ``xp.meshgrid`` on the map's namespace: a batch of grids (row 0 of the "xy"
    grid of ``(g, g)`` is ``g``), as the loop."""

    def rule(xp, op, g):
        return g * xp.meshgrid(g, g)[0][0, ...] + xp.meshgrid(g, g[:2], indexing="ij")[1][:, 1]

    f = gt.register_op(next(_names), lambda xp, x: x * 3.0, rule)
    f.op.batching = "elementwise"

    def per_example(e):
        with gt.GradientTape() as tape:
            tape.watch(e)
            y = gt.reduce_sum(f(e) * e)
        return tape.gradient(y, e)

    x = _t(X[:, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        got = gt.vmap(per_example)(x)
    _close(got, _loop(per_example, x))
    _close(got, X[:, 0] ** 2 + X[:, 0, 1:2] + 3 * X[:, 0])


def test_sparse_xent_with_per_example_labels(backend):
    logits = _t(X)
    labels = gt.constant(RNG.integers(0, 5, size=(4, 3)))
    f = gt.nn.sparse_softmax_cross_entropy_with_logits
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        got = gt.vmap(f)(labels, logits)
    _close(got, f(labels, logits).numpy())
    bad = gt.constant(np.array([[0, 1, 2]] * 3 + [[0, 5, 1]]))
    with pytest.raises(ValueError, match="label value of 5"):
        gt.vmap(f)(bad, logits)


def test_fftn_without_axes_from_a_rule_batches(backend):
    """A rule that calls ``xp.fft.fftn(g)`` (axes=None) on the map's namespace: the example's axes."""
    calls = []

    def rule(xp, op, g):
        calls.append(1)
        return xp.real(xp.fft.fftn(xp.astype(g, xp.complex128)))

    f = gt.register_op(next(_names), lambda xp, x: x * 3.0, rule)
    f.op.batching = "elementwise"

    def per_example(e):
        with gt.GradientTape() as tape:
            tape.watch(e)
            y = gt.reduce_sum(f(e) * e)
        return tape.gradient(y, e)

    x = _t(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        got = gt.vmap(per_example)(x)
    _close(got, _loop(per_example, x))


def test_gradient_of_each_kind_through_the_map_matches_the_loop(backend):
    """A tape outside the map: the gradient of a loss over the batch equals the loop's."""
    w = _t(W)

    def f(x):
        h = gt.tanh(gt.matmul(x, w))
        return gt.reduce_sum(gt.nn.softmax(h[:, 1:] * 2.0, axis=0)) + gt.reduce_mean(gt.concat([h, x[:, :2]], axis=-1))

    x = _t(X)
    with gt.GradientTape(persistent=True) as tape:
        tape.watch([x, w])
        y = gt.reduce_sum(gt.vmap(f)(x) ** 2)
        z = gt.reduce_sum(gt.stack([f(x[i]) for i in range(4)]) ** 2)
    for a, b in zip(tape.gradient(y, [x, w]), tape.gradient(z, [x, w])):
        _close(a, b.numpy())


def test_in_axes_none_tuples_and_pytrees(backend):
    x = _t(X)
    w = _t(W)
    xt = _t(np.moveaxis(X, 0, 2))  # the examples along axis 2
    out = gt.vmap(lambda a, b: gt.matmul(a, b), in_axes=(2, None))(xt, w)
    _close(out, np.einsum("ijb,jk->bik", xt.numpy(), W))
    tree = {"a": x, "b": [w, xt]}
    out = gt.vmap(
        lambda d: gt.matmul(d["a"], d["b"][0]) + gt.reduce_sum(d["b"][1]), in_axes=({"a": 0, "b": [None, 2]},)
    )(tree)
    _close(out, np.einsum("bij,jk->bik", X, W) + np.sum(xt.numpy(), axis=(0, 1))[:, None, None])
    # out_axes
    out = gt.vmap(lambda a: (a, gt.reduce_sum(a, axis=-1)), out_axes=(1, 0))(x)
    _close(out[0], np.moveaxis(X, 0, 1))
    _close(out[1], X.sum(-1))


def test_bad_axes_and_sizes_raise(backend):
    x = _t(X)
    with pytest.raises(ValueError, match="different sizes"):
        gt.vmap(lambda a, b: a + b)(x, _t(X[:2]))
    with pytest.raises(ValueError, match="nothing to map"):
        gt.vmap(lambda a: a, in_axes=None)(x)
    with pytest.raises(ValueError, match="2 arguments"):
        gt.vmap(lambda a, b: a, in_axes=(0,))(x, x)


def test_nested_vmap(backend):
    x = _t(X)
    w = _t(W)
    f = gt.vmap(gt.vmap(lambda row: gt.tanh(gt.matmul(row, w))))
    _close(f(x), np.tanh(X @ W))
    # the inner map over a different argument: an outer product
    a = _t(RNG.normal(size=(3,)))
    b = _t(RNG.normal(size=(4,)))
    _close(gt.vmap(lambda ai: gt.vmap(lambda bj: ai * bj)(b))(a), np.outer(a.numpy(), b.numpy()))


def test_per_example_gradients_match_jax(backend):
    """A tape inside the mapped function: per-example gradients, as jax.vmap(jax.grad(loss))."""
    jax = pytest.importorskip("jax", reason="the reference per-example gradients are jax.vmap(jax.grad)")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    w1 = RNG.normal(size=(5, 8))
    w2 = RNG.normal(size=(8, 3))
    xs = RNG.normal(size=(6, 5))
    ys = RNG.normal(size=(6, 3))

    def loss_jax(params, x, y):
        h = jnp.tanh(x @ params[0])
        return jnp.mean((h @ params[1] - y) ** 2)

    ref = jax.vmap(jax.grad(loss_jax), in_axes=(None, 0, 0))((w1, w2), xs, ys)

    def per_example(params, x, y):
        with gt.GradientTape() as tape:
            tape.watch(params)
            h = gt.tanh(gt.matmul(x, params[0]))
            loss = gt.reduce_mean((gt.matmul(h, params[1]) - y) ** 2)
        return tape.gradient(loss, params)

    got = gt.vmap(per_example, in_axes=(None, 0, 0))((_t(w1), _t(w2)), _t(xs), _t(ys))
    for g, r in zip(got, ref):
        assert tuple(g.shape) == r.shape
        _close(g, np.asarray(r))


def test_vmap_of_grad_matches_jax(backend):
    """The functional form of per-example gradients, gt.vmap(gt.grad(loss)), as jax.vmap(jax.grad):
    the transforms compose (and with jax.hessian's per-example counterpart, vmap of hessian)."""
    jax = pytest.importorskip("jax", reason="the reference per-example gradients are jax.vmap(jax.grad)")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    w1 = RNG.normal(size=(5, 4))
    xs = RNG.normal(size=(6, 5))
    ys = RNG.normal(size=(6, 4))

    def loss_jax(w, x, y):
        return jnp.mean((jnp.tanh(x @ w) - y) ** 2)

    def loss(w, x, y):
        return gt.reduce_mean((gt.tanh(gt.matmul(x, w)) - y) ** 2)

    ref = jax.vmap(jax.grad(loss_jax), in_axes=(None, 0, 0))(w1, xs, ys)
    got = gt.vmap(gt.grad(loss), in_axes=(None, 0, 0))(_t(w1), _t(xs), _t(ys))
    assert tuple(got.shape) == ref.shape
    _close(got, np.asarray(ref))
    ref_h = jax.vmap(jax.hessian(loss_jax, argnums=1), in_axes=(None, 0, 0))(w1, xs, ys)
    got_h = gt.vmap(gt.hessian(loss, argnums=1), in_axes=(None, 0, 0))(_t(w1), _t(xs), _t(ys))
    _close(got_h, np.asarray(ref_h))


def test_vectorized_map_of_a_tape_inside_with_nested_elems(backend):
    w = _t(W)

    def fn(e):
        x, (s,) = e["x"], e["scale"]
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.reduce_sum(gt.sin(gt.matmul(x, w)) * s)
        return {"g": tape.gradient(y, x), "y": y}

    xs = _t(X[:, 0])
    ss = _t(RNG.normal(size=(4,)))
    out = gt.vectorized_map(fn, {"x": xs, "scale": (ss,)})
    expect_g = (np.cos(X[:, 0] @ W) * ss.numpy()[:, None]) @ W.T
    _close(out["g"], expect_g)
    _close(out["y"], np.sum(np.sin(X[:, 0] @ W), axis=-1) * ss.numpy())


def test_second_order_inside_the_map(backend):
    """Nested tapes inside the map: per-example second derivatives."""

    def d2(x):
        with gt.GradientTape() as outer:
            outer.watch(x)
            with gt.GradientTape() as inner:
                inner.watch(x)
                y = gt.reduce_sum(x**3)
            g = inner.gradient(y, x)
            s = gt.reduce_sum(g)
        return outer.gradient(s, x)

    x = _t(X[:, 0, :2])
    _close(gt.vmap(d2)(x), 6 * X[:, 0, :2])


def _model():
    """A small model whose parameters the mapped function reads from outside (variables)."""
    w1 = gt.Variable(RNG.normal(size=(5, 8)), dtype=gt.float64, name="w1")
    w2 = gt.Variable(RNG.normal(size=(8, 3)), dtype=gt.float64, name="w2")
    b = gt.Variable(RNG.normal(size=(3,)), dtype=gt.float64, name="b")
    return [w1, w2, b]


def _forward(params, x):
    w1, w2, b = params
    return gt.matmul(gt.tanh(gt.matmul(x, w1)), w2) + b


def _per_example_grads(params):
    """TensorFlow's per-example pattern: a tape inside, the gradient of the variables read from outside."""

    def per_example(x, y):
        with gt.GradientTape() as tape:
            loss = gt.reduce_mean((_forward(params, x[None]) - y[None]) ** 2)
        return tape.gradient(loss, params)

    return per_example


def test_per_example_gradients_of_captured_variables_tf_pattern(backend):
    """A tape inside ``vectorized_map`` asks for the gradient of the model's variables (read from
    outside): per-example gradients, as jax.vmap(jax.grad) with the parameters closed over, and as a
    Python loop of tapes."""
    jax = pytest.importorskip("jax", reason="the reference per-example gradients are jax.vmap(jax.grad)")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    params = _model()
    xs, ys = RNG.normal(size=(6, 5)), RNG.normal(size=(6, 3))
    per_example = _per_example_grads(params)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        got = gt.vectorized_map(lambda e: per_example(*e), (_t(xs), _t(ys)))

    pj = [jnp.asarray(p.numpy()) for p in params]

    def loss_jax(ps, x, y):
        return jnp.mean((jnp.tanh(x[None] @ ps[0]) @ ps[1] + ps[2] - y[None]) ** 2)

    ref = jax.vmap(lambda x, y: jax.grad(loss_jax)(pj, x, y))(jnp.asarray(xs), jnp.asarray(ys))  # pj closed over
    loop = [per_example(_t(xs[i]), _t(ys[i])) for i in range(6)]
    for k, (g, r) in enumerate(zip(got, ref)):
        assert tuple(g.shape) == (6,) + tuple(params[k].shape)
        _close(g, np.asarray(r))
        _close(g, np.stack([step[k].numpy() for step in loop]))


def test_per_example_gradient_of_a_watched_closure(backend):
    """A constant read from outside and watched by the tape inside: per-example gradients (zeros
    where asked for an unconnected one)."""
    w = _t(W)
    v = _t(W[0])

    def fn(x):
        with gt.GradientTape(persistent=True) as tape:
            tape.watch([w, v])
            y = gt.reduce_sum(gt.sin(gt.matmul(x, w)))
        return tape.gradient(y, w), tape.gradient(y, v), tape.gradient(y, v, unconnected_gradients="zero")

    xs = X[:, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        g, none, zeros = gt.vmap(fn)(_t(xs))
    _close(g, np.einsum("bi,bk->bik", xs, np.cos(xs @ W)))
    assert none is None
    _close(zeros, np.zeros((4, 2)))


def test_per_example_gradients_of_captured_variables_from_a_tape_outside(backend):
    """Both directions at once: a tape outside the map differentiates the per-example gradients
    (second order, with respect to the same variables) and a plain loss through the capture (summed
    over the examples), as the loop of tapes does."""
    params = _model()
    xs, ys = _t(RNG.normal(size=(4, 5))), _t(RNG.normal(size=(4, 3)))
    per_example = _per_example_grads(params)
    with gt.GradientTape(persistent=True) as outer:
        batched = gt.vectorized_map(lambda e: per_example(*e), (xs, ys))
        s = gt.add_n([gt.reduce_sum(g**2) for g in batched])
        looped = [per_example(xs[i], ys[i]) for i in range(4)]
        s_loop = gt.add_n([gt.reduce_sum(g**2) for step in looped for g in step])
        y = gt.reduce_sum(gt.vmap(lambda x: _forward(params, x))(xs) ** 2)
        y_loop = gt.add_n([gt.reduce_sum(_forward(params, xs[i]) ** 2) for i in range(4)])
    _close(s, s_loop.numpy())
    for a, b in zip(outer.gradient(s, params), outer.gradient(s_loop, params)):
        _close(a, b.numpy())
    for a, b in zip(outer.gradient(y, params), outer.gradient(y_loop, params)):
        _close(a, b.numpy())


def test_per_example_gradients_of_a_closure_in_nested_maps(backend):
    """A tape inside the inner of two maps, on a tensor read from outside both: one gradient per pair."""
    w = _t(W[:, 0])
    a = _t(RNG.normal(size=(3, 5)))
    b = _t(RNG.normal(size=(2, 5)))

    def inner(ai, bj):
        with gt.GradientTape() as tape:
            tape.watch(w)
            y = gt.reduce_sum(ai * bj * w * w)
        return tape.gradient(y, w)

    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        got = gt.vmap(lambda ai: gt.vmap(lambda bj: inner(ai, bj))(b))(a)
    _close(got, 2 * a.numpy()[:, None, :] * b.numpy()[None, :, :] * W[:, 0])


def test_per_example_gradient_through_ops_on_the_closure_alone_loops_and_says_so(backend):
    """``w ** 2`` computed inside the mapped function on the outer tensor alone runs outside the batch;
    its rule cannot take a per-example gradient: the function runs as a loop (right numbers), warned."""
    w = _t(W[:, 0])

    def fn(x):
        with gt.GradientTape() as tape:
            tape.watch(w)
            y = gt.reduce_sum(x * w) + gt.reduce_sum(w**2)
        return tape.gradient(y, w)

    xs = X[:, 0]
    with pytest.warns(gt.VmapFallbackWarning, match="outside the batch"):
        got = gt.vmap(fn)(_t(xs))
    _close(got, xs + 2 * W[:, 0])
    with pytest.raises(TypeError, match="outside the batch"):
        gt.vmap(fn, fallback_to_while_loop=False)(_t(xs))


def test_inside_gt_function(backend):
    w = _t(W)

    @gt.function
    def step(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.reduce_sum(gt.vmap(lambda r: gt.tanh(gt.matmul(r, w)))(x))
        return y, tape.gradient(y, x)

    x = _t(X[:, 0])
    for _ in range(2):
        y, g = step(x)
        _close(y, np.tanh(X[:, 0] @ W).sum())
        _close(g, (1 - np.tanh(X[:, 0] @ W) ** 2) @ W.T)


def test_per_example_gradients_inside_gt_function_trace_once(backend):
    """gt.function of a map with a tape inside (jax.jit(jax.vmap(jax.grad))'s place): the per-example
    gradients of the eager map, from one trace reused for new values of the same shapes."""
    params = (_t(W), _t(RNG.normal(size=(2, 3))))

    def per_example(p, xi, yi):
        with gt.GradientTape() as tape:
            tape.watch(p)
            loss = gt.reduce_mean((gt.matmul(gt.tanh(gt.matmul(xi, p[0])), p[1]) - yi) ** 2)
        return tape.gradient(loss, p)

    mapped = gt.vmap(per_example, in_axes=(None, 0, 0))
    compiled = gt.function(mapped)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        xs, ys = _t(rng.normal(size=(6, 5))), _t(rng.normal(size=(6, 3)))
        for got, want in zip(compiled(params, xs, ys), mapped(params, xs, ys)):
            assert got.shape == want.shape
            _close(got, want.numpy())
    assert compiled.experimental_get_tracing_count() == 1


def _counting_op(calls, batching):
    def forward(xp, x):
        calls.append(tuple(x.shape))
        return x * 3.0

    f = gt.register_op(next(_names), forward, lambda xp, op, g: g * 3.0)
    f.op.batching = batching
    return f


def test_one_native_call_per_elementwise_op(backend):
    calls = []
    f = _counting_op(calls, "elementwise")
    x = _t(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        out = gt.vmap(lambda e: f(e) + 1.0)(x)
    _close(out, 3 * X + 1)
    assert calls == [X.shape]  # once, on the whole batch


def test_one_native_call_per_reduction_and_matmul(backend):
    calls = []

    def total(xp, x, *, axis=None, keepdims=False):
        calls.append(tuple(x.shape))
        return xp.sum(x, axis=axis, keepdims=keepdims)

    def product(xp, a, b):
        calls.append((tuple(a.shape), tuple(b.shape)))
        return xp.matmul(a, b)

    f = gt.register_op(next(_names), total, lambda xp, op, g: None)
    f.op.batching = "reduction"
    m = gt.register_op(next(_names), product, lambda xp, op, g: (None, None))
    m.op.batching = "matmul"
    x = _t(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        out = gt.vmap(lambda e: f(m(e, _t(W)), axis=None))(x)
    _close(out, (X @ W).sum(axis=(1, 2)))
    assert calls == [(X.shape, W.shape), (4, 3, 2)]  # one call each, on the whole batch


def test_op_without_batching_rule_loops_with_one_warning(backend):
    calls = []
    f = _counting_op(calls, None)
    x = _t(X)
    with pytest.warns(gt.VmapFallbackWarning, match=f.op.name) as rec:
        out = gt.vmap(lambda e: f(f(e)))(x)
    _close(out, 9 * X)
    assert len(calls) == 2 * X.shape[0]  # a loop over the examples, twice
    assert len([w for w in rec if issubclass(w.category, gt.VmapFallbackWarning)]) == 1
    with pytest.raises(ValueError, match=f.op.name):
        gt.vmap(lambda e: f(e), fallback_to_while_loop=False)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        gt.vmap(lambda e: f(e), warn=False)(x)


def test_gradient_through_a_fallback_op(backend):
    f = _counting_op([], None)
    x = _t(X)
    with gt.GradientTape() as tape:
        tape.watch(x)
        with pytest.warns(gt.VmapFallbackWarning):
            y = gt.reduce_sum(gt.vmap(lambda e: gt.sin(f(e)))(x))
    _close(tape.gradient(y, x), 3 * np.cos(3 * X))


def test_control_flow_on_a_batched_value_loops_the_function(backend):
    def fn(x):
        return gt.cond(gt.reduce_sum(x) > 0, lambda: x * 2.0, lambda: -x)

    x = _t(X[:, 0])
    with pytest.warns(gt.VmapFallbackWarning, match="per-example"):
        out = gt.vmap(fn)(x)
    expect = np.where(X[:, 0].sum(-1, keepdims=True) > 0, 2 * X[:, 0], -X[:, 0])
    _close(out, expect)
    with pytest.raises(TypeError, match="gt.where"):
        gt.vmap(fn, fallback_to_while_loop=False)(x)


def test_variables_are_read_unbatched(backend):
    v = gt.Variable(np.ones((5,)), dtype=gt.float64)
    x = _t(X[:, 0])
    with gt.GradientTape() as tape:
        y = gt.reduce_sum(gt.vmap(lambda r: r * v)(x))
    _close(tape.gradient(y, v), X[:, 0].sum(0))


def test_results_that_do_not_depend_on_the_examples_are_broadcast(backend):
    w = _t(W)
    out = gt.vmap(lambda x: (x, w))(_t(X[:, 0]))
    _close(out[1], np.broadcast_to(W, (4, 5, 2)))


def test_assigning_a_per_example_value_to_a_variable_raises(backend):
    v = gt.Variable(np.zeros(5), dtype=gt.float64)
    with pytest.raises(ValueError):
        gt.vmap(lambda r: v.assign(r * 2.0))(_t(X[:, 0]))
    np.testing.assert_array_equal(v.numpy(), np.zeros(5))


def test_random_draws_inside_are_independent_per_example_as_tf_vectorized_map(backend):
    """TensorFlow's vectorized_map and torch.func's ``randomness="different"``: each example its own
    draw -- the very numbers one batched draw from the same seed gives, in the same order."""
    x0 = X[:, 0]
    n = x0.shape[0]
    for mapper in (lambda f, x: gt.vmap(f)(x), lambda f, x: gt.vectorized_map(f, x)):
        g = gt.random.Generator.from_seed(3)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing to warn about
            out = mapper(lambda r: r + g.normal((5,), dtype=gt.float64) * g.uniform((5,), dtype=gt.float64), _t(x0))
        ref = gt.random.Generator.from_seed(3)
        want = x0 + ref.normal((n, 5), dtype=gt.float64).numpy() * ref.uniform((n, 5), dtype=gt.float64).numpy()
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)


def test_random_draws_same_or_error_on_request(backend):
    x0 = X[:, 0]
    g = gt.random.Generator.from_seed(5)
    out = gt.vmap(lambda r: r + g.normal((5,), dtype=gt.float64), randomness="same")(_t(x0)).numpy()
    np.testing.assert_allclose(
        out - x0,
        np.broadcast_to(gt.random.Generator.from_seed(5).normal((5,), dtype=gt.float64).numpy(), x0.shape),
        rtol=1e-12,
        atol=1e-12,
    )
    with pytest.raises(ValueError, match=r"random draw \(uniform\).*randomness='error'"):
        gt.vmap(lambda r: r * gt.random.uniform((5,)), randomness="error")(_t(x0))
    with pytest.raises(ValueError, match="randomness='sometimes'"):
        gt.vmap(lambda r: r, randomness="sometimes")


def test_per_example_noise_nested_and_differentiated(backend):
    """Nested maps draw one number per (outer, inner) example; a tape outside sees each draw."""
    g = gt.random.Generator.from_seed(7)
    x = _t(np.ones((2, 3)))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.vmap(gt.vmap(lambda a: a * g.normal((), dtype=gt.float64)))(x)
        loss = gt.reduce_sum(y)
    want = gt.random.Generator.from_seed(7).normal((2, 3), dtype=gt.float64).numpy()
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), want, rtol=1e-12)


_EYE3 = np.eye(3)
_RULE_CASES = {
    "getitem": lambda x: gt.reduce_sum(x[1:, ::2] ** 2),
    "getitem_array": lambda x: gt.reduce_sum(x[:, [0, 4, 4]] ** 2),
    "getitem_int": lambda x: gt.reduce_sum(x[..., 2] ** 2),
    "concat": lambda x: gt.reduce_sum(gt.concat([x, x * 2.0], axis=-1) ** 2),
    "reshape": lambda x: gt.reduce_sum(gt.reshape(x, (15,)) ** 3),
    "softmax": lambda x: gt.reduce_sum(gt.nn.softmax(x, axis=0)[0]),
    "max_keepdims": lambda x: gt.reduce_sum(gt.reduce_max(x, axis=1, keepdims=True) * 2.0),
    "std": lambda x: gt.math.reduce_std(x),
    "logsumexp": lambda x: gt.reduce_sum(gt.math.reduce_logsumexp(x, axis=-1)),
    "transpose_matmul": lambda x: gt.reduce_sum(gt.matmul(gt.transpose(x), x)),
    "det": lambda x: gt.linalg.det(gt.matmul(x, gt.transpose(x))),
    "solve": lambda x: gt.reduce_sum(gt.linalg.solve(gt.matmul(x, gt.transpose(x)) + _t(_EYE3), x)),
    "stack": lambda x: gt.reduce_sum(gt.stack([x, x**2], axis=1)),
    "tile": lambda x: gt.reduce_sum(gt.tile(x, (2, 1)) ** 2),
    "cumsum": lambda x: gt.reduce_sum(gt.cumsum(x, axis=1) ** 2),
    "expand_dims": lambda x: gt.reduce_sum(gt.expand_dims(x, 0) * x),
    "broadcast_to": lambda x: gt.reduce_sum(gt.broadcast_to(x[0], (2, 5)) ** 2),
    "clip": lambda x: gt.reduce_sum(gt.clip(x, -0.5, 0.5) ** 2),
    "vector_norm": lambda x: gt.linalg.vector_norm(x),
}


@pytest.mark.parametrize("name", sorted(_RULE_CASES))
def test_per_example_gradients_of_each_kind_batch_without_a_loop(backend, name):
    """The rules of each kind run batched too: no fallback warning, the loop's numbers."""
    f = _RULE_CASES[name]

    def per_example(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        return tape.gradient(y, x)

    x = _t(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        got = gt.vmap(per_example)(x)
    _close(got, _loop(per_example, x))


def test_a_gt_function_called_inside_the_map_runs_batched(backend):
    @gt.function
    def f(r):
        return gt.sin(r) * 2.0

    x = _t(X[:, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.VmapFallbackWarning)
        out = gt.vmap(f)(x)
    _close(out, 2 * np.sin(X[:, 0]))
    _close(f(x), 2 * np.sin(X[:, 0]))  # (outside a map it is traced as ever)


def test_second_order_through_the_map_from_outside(backend):
    """Nested tapes outside the map: the crossings' rules are recorded too (higher order)."""
    xs = _t(np.linspace(0.1, 1.0, 4))
    w = gt.constant(0.7, dtype=gt.float64)
    with gt.GradientTape(persistent=True) as t2:
        t2.watch([w, xs])
        with gt.GradientTape(persistent=True) as t1:
            t1.watch([w, xs])
            y = gt.reduce_sum(gt.vmap(lambda x: gt.sin(x * w) * x)(xs))
        gw = t1.gradient(y, w)
        gx = t1.gradient(y, xs)
    x = xs.numpy()
    _close(gw, np.sum(x * x * np.cos(x * 0.7)))
    _close(t2.gradient(gw, w), np.sum(-(x**3) * np.sin(x * 0.7)))
    _close(t2.gradient(gx, xs), 2 * 0.7 * np.cos(0.7 * x) - 0.49 * x * np.sin(0.7 * x))
