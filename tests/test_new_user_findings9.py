"""What a ninth newcomer, coming from JAX and torch.func, found using gradtape's function transforms as
theirs (the ``jaxuser9`` brief), on every backend, against ``jax`` and ``torch.func`` in float64."""

from __future__ import annotations

import numpy as np
import optree
import pytest

import gradtape as gt

jax = pytest.importorskip("jax", reason="the reference results are JAX's")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

RNG = np.random.default_rng(9)
X = RNG.standard_normal(3)
Z = X + 1j * (X + 0.5)


def close(got, want, rtol=1e-10, atol=1e-12):
    """Two structures of arrays equal leaf by leaf (gradtape's leaves are Tensors; None leaves kept)."""
    g_leaves, g_spec = optree.tree_flatten(got, none_is_leaf=True)
    w_leaves, w_spec = optree.tree_flatten(want, none_is_leaf=True)
    assert g_spec == w_spec, (g_spec, w_spec)
    for g, w in zip(g_leaves, w_leaves):
        if w is None:
            assert g is None
            continue
        assert isinstance(g, gt.Tensor), type(g)
        assert tuple(g.shape) == tuple(np.shape(w)), (g.shape, np.shape(w))
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=rtol, atol=atol)


# ------------------------------------------------------------------- Jacobians of complex functions
def test_jacfwd_of_a_real_to_complex_function_is_jaxs(backend):
    """The case both directions agree on (a real input): jacfwd gives the whole complex Jacobian."""
    got = gt.jacfwd(lambda x: gt.exp(1j * gt.cast(x, gt.complex128)))(gt.constant(X, dtype=gt.float64))
    close(got, jax.jacfwd(lambda x: jnp.exp(1j * x))(X))


def test_jacrev_refuses_a_complex_output_it_would_cut_to_its_real_part(backend):
    """gt.jacrev of exp(i x) returned the real matrix -sin(x) (the gradient of the real part alone: the
    imaginary part cos(x) dropped, silently) where gt.jacfwd returned the complex Jacobian; jax.jacrev
    and torch.func.jacrev refuse a complex output, and so does gt.jacrev now, saying what to use."""
    x = gt.constant(X, dtype=gt.float64)
    with pytest.raises(TypeError, match=r"gt\.jacrev requires real outputs.*gt\.jacfwd"):
        gt.jacrev(lambda x: gt.exp(1j * gt.cast(x, gt.complex128)))(x)
    with pytest.raises(TypeError, match="requires real-valued outputs"):
        jax.jacrev(lambda x: jnp.exp(1j * x))(X)


def test_jacfwd_refuses_a_complex_input_it_would_differentiate_along_its_real_part_only(backend):
    """gt.jacfwd of |z|^2 returned the real diagonal 2 Re(z) (the derivative along the real axis alone)
    where gt.jacrev returned 2z (TensorFlow's convention), and for z^2 it returned 2z where gt.jacrev
    returned 2 conj(z): two answers, neither said.  jax.jacfwd (without holomorphic=True) and
    torch.func.jacfwd refuse a complex input; gt.jacfwd and gt.hessian do now, naming the argument."""
    z = gt.constant(Z, dtype=gt.complex128)
    for f in (lambda z: gt.abs(z) ** 2, lambda z: z**2):
        with pytest.raises(TypeError, match=r"gt\.jacfwd requires real inputs.*argument 0 has dtype complex128"):
            gt.jacfwd(f)(z)
    with pytest.raises(TypeError, match=r"gt\.hessian requires real inputs.*argument 0"):
        gt.hessian(lambda z: gt.sum(gt.abs(z) ** 2))(z)
    with pytest.raises(TypeError, match="requires real-valued inputs"):
        jax.jacfwd(lambda z: jnp.abs(z) ** 2)(Z)


def test_jacrev_of_a_real_function_of_a_complex_input_is_the_gradients_convention(backend):
    """What gt.jacrev still takes: a complex input, real outputs -- each row TensorFlow's gradient, the
    conjugate of what jax.grad gives for that row (as gt.grad, docs/transforms.md)."""
    got = gt.jacrev(lambda z: gt.abs(z) ** 2)(gt.constant(Z, dtype=gt.complex128))
    want = np.stack([np.conj(np.asarray(jax.grad(lambda z, i=i: jnp.abs(z[i]) ** 2)(Z))) for i in range(3)])
    close(got, want)


# ------------------------------------------------------------------- vmap's out_axes=None
W = RNG.standard_normal((3, 2))
XS = RNG.standard_normal((4, 3))


def test_vmap_out_axes_none_returns_an_unmapped_result_once_as_jax(backend):
    """out_axes=None for a result that is the same for every example (a function of an in_axes=None
    argument, or of no argument) was a ValueError, whatever the result; jax.vmap returns it once."""
    w, xs = gt.constant(W, dtype=gt.float64), gt.constant(XS, dtype=gt.float64)

    def f(x, w, ns):
        return x * 2, ns.sin(w), ns.ones((2,), dtype=ns.float64)

    got = gt.vmap(lambda x, w: f(x, w, gt), in_axes=(0, None), out_axes=(0, None, None))(xs, w)
    want = jax.vmap(lambda x, w: f(x, w, jnp), in_axes=(0, None), out_axes=(0, None, None))(XS, W)
    close(got, want)
    # and a tape outside differentiates through it (once, not once per example)
    grad = gt.grad(lambda w: gt.sum(gt.vmap(lambda x, w: f(x, w, gt)[1] ** 2, in_axes=(0, None), out_axes=None)(xs, w)))
    jgrad = jax.grad(
        lambda w: jnp.sum(jax.vmap(lambda x, w: f(x, w, jnp)[1] ** 2, in_axes=(0, None), out_axes=None)(XS, w))
    )
    close(grad(w), jgrad(W))


def test_vmap_out_axes_none_for_a_result_that_differs_per_example_is_jaxs_error(backend):
    xs = gt.constant(XS, dtype=gt.float64)
    with pytest.raises(ValueError, match="out_axes=None for a result .* differs from example to example"):
        gt.vmap(lambda x: x, out_axes=None)(xs)
    with pytest.raises(ValueError, match="axis spec None but output was batched"):
        jax.vmap(lambda x: x, out_axes=None)(XS)


def _branchy(x, w):
    """Python control flow on an example's value: the map runs it as a loop over the examples."""
    return (x * 2.0 if float(gt.sum(x)) > 0 else -x), w * 2.0, None


def test_vmap_loop_fallback_takes_out_axes_none_and_none_results(backend):
    """The loop over the examples (control flow on values) failed on out_axes=None (int(None)); it gives
    the one value where every example's is the same, JAX's error where they differ."""
    w, xs = gt.constant(W, dtype=gt.float64), gt.constant(XS, dtype=gt.float64)
    got = gt.vmap(_branchy, in_axes=(0, None), out_axes=(0, None, None), warn=False)(xs, w)
    close(got, (np.stack([x * 2 if x.sum() > 0 else -x for x in XS]), W * 2, None))
    with pytest.raises(ValueError, match="differs from example to example"):
        gt.vmap(lambda x, w: (_branchy(x, w)[0], x[0] * w), in_axes=(0, None), out_axes=(0, None), warn=False)(xs, w)


def test_vmap_over_no_examples_says_why_where_it_cannot_give_jaxs_result(backend):
    """An empty batch maps as JAX's, batched; where the function must loop (control flow on values) or a
    result leaves with out_axes=None, there is no example to take the result from: an IndexError before
    (the loop), now a ValueError that says so."""
    w, xs = gt.constant(W, dtype=gt.float64), gt.constant(XS[:0], dtype=gt.float64)
    close(gt.vmap(lambda x: gt.sum(x**2))(xs), jax.vmap(lambda x: jnp.sum(x**2))(XS[:0]))
    with pytest.raises(ValueError, match="0 examples"):
        gt.vmap(_branchy, in_axes=(0, None), warn=False)(xs, w)
    with pytest.raises(ValueError, match="0 examples"):
        gt.vmap(lambda x, w: (x, w * 2.0), in_axes=(0, None), out_axes=(0, None))(xs, w)


# ------------------------------------------------------------------- (co)tangents and outputs of the wrong kind
def test_a_complex_tangent_or_cotangent_for_a_real_value_is_refused_not_cut(backend):
    """gt.jvp cast a complex tangent of a real primal to the primal's dtype, dropping its imaginary part
    (jvp of 2x along [1j, 1, 1] gave [0, 2, 2]), and gt.vjp a complex cotangent of a real output; JAX
    refuses both (the tangent type must match), and so do gt.jvp, gt.vjp and gt.ForwardAccumulator now."""
    x = gt.constant([0.3, -0.2, 0.5], dtype=gt.float64)
    v = gt.constant([1j, 1.0, 1.0], dtype=gt.complex128)
    with pytest.raises(TypeError, match=r"gt\.jvp: a tangent of dtype complex128 for a real primal"):
        gt.jvp(lambda x: x * 2.0, (x,), (v,))
    with pytest.raises(TypeError, match="ForwardAccumulator: a tangent of dtype complex128"):
        gt.autodiff.ForwardAccumulator(x, v)
    _, pullback = gt.vjp(lambda x: x * 2.0, x)
    with pytest.raises(TypeError, match=r"gt\.vjp: a cotangent of dtype complex128 for a real output"):
        pullback(v)
    with pytest.raises(TypeError):
        jax.jvp(lambda x: x * 2.0, (x.numpy(),), (np.array([1j, 1.0, 1.0]),))
    # a real tangent of another dtype or kind still takes the primal's dtype (docs/transforms.md)
    out, t = gt.jvp(lambda x: x * 2.0, (x,), (np.array([1, 2, 3]),))
    assert t.dtype == gt.float64
    close(t, np.array([2.0, 4.0, 6.0]))
    close(pullback(gt.constant([1.0, 1.0, 1.0], dtype=gt.float32)), (np.array([2.0, 2.0, 2.0]),))


def test_a_complex_output_gradient_for_a_real_target_is_refused_not_cut(backend):
    """GradientTape.gradient took a complex ``output_gradients`` tensor for a real target and kept its real
    part at the first real input (2x with [1j, 1] gave [0, 2]); TensorFlow's ops refuse the mixed dtypes, and
    so does the tape now, as gt.vjp above."""
    x = gt.constant([1.0, 2.0], dtype=gt.float64)
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = 2.0 * x
    with pytest.raises(TypeError, match=r"output_gradients\[0\] is complex128 but its target is float64"):
        tape.gradient(y, x, output_gradients=gt.constant([1j, 1.0], dtype=gt.complex128))
    close(tape.gradient(y, x, output_gradients=gt.constant([3.0, 1.0], dtype=gt.float64)), np.array([6.0, 2.0]))


def test_jacrev_refuses_an_integer_output_as_grad_and_jax_do(backend):
    """gt.jacrev of argmax returned float zeros, without the warning gt.vjp gives and unlike gt.grad and
    jax.jacrev, which refuse a non-floating output; it refuses it now, pointing at has_aux."""
    x = gt.constant([0.3, -0.2, 0.5], dtype=gt.float64)
    for f in (lambda x: gt.argmax(x), lambda x: x > 0):
        with pytest.raises(TypeError, match=r"gt\.jacrev requires floating outputs.*has_aux=True"):
            gt.jacrev(f)(x)
    with pytest.raises(TypeError, match="requires real-valued outputs"):
        jax.jacrev(lambda x: jnp.argmax(x))(x.numpy())
    # as auxiliary data it comes back beside the Jacobian
    jac, arg = gt.jacrev(lambda x: (x * 2.0, gt.argmax(x)), has_aux=True)(x)
    close(jac, 2.0 * np.eye(3))
    assert int(arg) == 2


def test_vmap_takes_none_leaves_in_its_arguments_as_jax(backend):
    """A None in the arguments (an optional entry of a dict of parameters, an unused argument) with the
    default in_axes=0 was an error ('Attempt to convert None to a tensor'); JAX takes None as an empty
    subtree, whatever its axis, and so does gt.vmap now (and gt.vectorized_map)."""
    xs = gt.constant(XS, dtype=gt.float64)
    close(
        gt.vmap(lambda d: d["a"] * 2.0)({"a": xs, "b": None}),
        jax.vmap(lambda d: d["a"] * 2.0)({"a": XS, "b": None}),
    )
    close(gt.vmap(lambda x, m: x + 1.0)(xs, None), jax.vmap(lambda x, m: x + 1.0)(XS, None))
    close(gt.vectorized_map(lambda e: gt.sum(e[0] ** 2), (xs, None)), np.sum(XS**2, axis=1))


# ------------------------------------------------------------------- custom_gradient under a second derivative
@gt.custom_gradient
def _log1pexp(x):
    """TensorFlow's own example: the gradient reads ``e``, computed in the forward."""
    e = gt.exp(x)

    def grad(dy):
        return dy * (1 - 1 / (1 + e))

    return gt.math.log1p(e), grad


@gt.custom_gradient
def _log1pexp_from_inputs(x):
    def grad(dy):
        return dy * gt.sigmoid(x)

    return gt.math.log1p(gt.exp(x)), grad


def test_a_second_derivative_through_a_custom_gradient_differentiates_the_values_its_gradient_reads(backend):
    """gt.hessian of TensorFlow's log1pexp example was silently 0, then warned: gt.custom_gradient ran the
    function where no tape saw it, so ``e`` (read by the gradient function) was a constant to the second
    derivative.  As TensorFlow's, the tapes recording the call now record the function too, so the Hessian
    is sigmoid'(x), jax.hessian's, quietly, by every route (nested tapes, gt.hessian, forward over
    reverse); first-order derivatives are as before.  A tape opened after the call did not see ``e``
    computed: differentiating the gradient there still warns, naming ``e`` and the way out."""
    import warnings

    x = gt.constant([0.3, -1.0], dtype=gt.float64)
    f = lambda x: jnp.sum(jnp.log1p(jnp.exp(x)))
    want = jax.hessian(f)(x.numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        close(gt.hessian(lambda x: gt.sum(_log1pexp(x)))(x), want)
        close(gt.hessian(lambda x: gt.sum(_log1pexp_from_inputs(x)))(x), want)
        close(gt.jacfwd(gt.grad(lambda x: gt.sum(_log1pexp(x))))(x), want)
        with gt.GradientTape() as outer:
            outer.watch(x)
            with gt.GradientTape() as inner:
                inner.watch(x)
                y = gt.sum(_log1pexp(x))
            g = inner.gradient(y, x)
        close(outer.gradient(g, x), np.diag(want))  # (the Hessian's row sums: diagonal here)
        close(gt.grad(lambda x: gt.sum(_log1pexp(x)))(x), jax.grad(f)(x.numpy()))
        close(gt.jacfwd(_log1pexp)(x), jax.jacfwd(lambda x: jnp.log1p(jnp.exp(x)))(x.numpy()))
        close(gt.vmap(gt.grad(_log1pexp))(x), jax.vmap(jax.grad(lambda x: jnp.log1p(jnp.exp(x))))(x.numpy()))
    # a tape opened after the call: it did not record e, so it cannot differentiate through it
    with gt.GradientTape(persistent=True) as inner:
        inner.watch(x)
        y = gt.sum(_log1pexp(x))
    with gt.GradientTape() as late:
        late.watch(x)
        with pytest.warns(gt.GradientLeakWarning, match=r"through _log1pexp treats e \(computed inside.*opened after"):
            g = inner.gradient(y, x)  # (the rule runs here, recorded by late)
    assert late.gradient(g, x) is None  # (g reaches x only through e, which late did not record)


def test_the_jacobians_take_holomorphic_as_jax(backend):
    """With the complex refusals, the way JAX users say a function is holomorphic: holomorphic=True,
    giving f'(z) (gt.jacrev conjugates TensorFlow's rows), and JAX's errors for real inputs or outputs."""
    z = np.array([1.0 + 2.0j, -0.5 + 0.25j, 0.3 - 0.1j])
    w = np.array([0.2 + 0.1j, 1.0 - 1.0j])
    gz, gw = gt.constant(z, dtype=gt.complex128), gt.constant(w, dtype=gt.complex128)

    def f(ns, a, b):
        return ns.exp(a[:2]) * b + a[0] * b**2

    for gt_t, jax_t in ((gt.jacfwd, jax.jacfwd), (gt.jacrev, jax.jacrev)):
        got = gt_t(lambda a, b: f(gt, a, b), argnums=(0, 1), holomorphic=True)(gz, gw)
        close(got, jax_t(lambda a, b: f(jnp, a, b), argnums=(0, 1), holomorphic=True)(z, w))
    close(
        gt.hessian(lambda a: gt.sum(a**3 * a[1]) + gt.sum(gt.sin(a)), holomorphic=True)(gz),
        jax.hessian(lambda a: jnp.sum(a**3 * a[1]) + jnp.sum(jnp.sin(a)), holomorphic=True)(z),
    )
    with pytest.raises(TypeError, match=r"holomorphic=True\) requires complex inputs"):
        gt.jacrev(lambda a: a * 2.0, holomorphic=True)(gt.constant([1.0, 2.0], dtype=gt.float64))
    with pytest.raises(TypeError, match=r"holomorphic=True\) requires complex outputs"):
        gt.jacrev(lambda a: gt.abs(a), holomorphic=True)(gz)


def test_a_mapped_index_into_an_unmapped_tensor_says_what_to_write(backend):
    """``gt.vmap(lambda i: W[i])(idx)`` said 'an index tensor on backend 'numpy' cannot index a tensor on
    'numpy'' (the same backend named twice, on every backend); it now says to write gt.take, which
    gives jax.vmap's gather."""
    w = np.arange(12.0).reshape(4, 3)
    idx = gt.constant([0, 2, 3])
    with pytest.raises(ValueError, match=r"getitem: an index tensor that gt\.vmap maps .* gt\.take\(x, index"):
        gt.vmap(lambda i: gt.constant(w)[i])(idx)
    with pytest.warns(gt.VmapFallbackWarning):
        got = gt.vmap(lambda i: gt.take(gt.constant(w), i, axis=0))(idx)
    close(got, jax.vmap(lambda i: jnp.asarray(w)[i])(np.array([0, 2, 3])))


def test_dropout_inside_vmap_follows_the_maps_randomness(backend):
    """gt.nn.dropout inside gt.vmap drew one mask for every example (a warning said so) even with
    randomness='different', and randomness='error' did not refuse it: its mask is drawn on the map's batching
    backend, which the draw did not count as inside the map. Now it follows the map, as jax.vmap's and
    torch.func.vmap's randomness do: per example, shared, or refused."""
    x = gt.ones((6, 8))
    rows = gt.vmap(lambda e: gt.nn.dropout(e, 0.5), randomness="different")(x).numpy()
    assert any(not np.array_equal(rows[0], r) for r in rows[1:])
    assert set(np.unique(rows)) <= {0.0, 2.0}
    rows = gt.vmap(lambda e: gt.nn.dropout(e, 0.5), randomness="same")(x).numpy()
    assert all(np.array_equal(rows[0], r) for r in rows[1:])
    with pytest.raises(ValueError, match="randomness='error'"):
        gt.vmap(lambda e: gt.nn.dropout(e, 0.5), randomness="error")(x)
