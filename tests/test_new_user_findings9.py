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
