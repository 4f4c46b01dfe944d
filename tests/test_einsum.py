"""``gt.einsum``: values against ``numpy.einsum``, gradients (float64) against finite differences and
``jax.grad`` of ``jnp.einsum``, second order, dtype promotion and errors, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import registry
from gradtape.core.domains import op_cases
from gradtape.ops.einsum import einsum_composite, parse_subscripts

#: (subscripts, operand shapes): matmul, batch matmul, trace, diagonal, outer, ellipsis, sum-out,
#: three operands, implicit notation, broadcast size-1 axes, a repeated label beside others
PATTERNS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("ii->", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("ii->i", [(3, 3)]),
    ("i,j->ij", [(2,), (3,)]),
    ("...ij,jk->...ik", [(2, 3, 2, 3), (3, 4)]),
    ("...i,...i->...", [(1, 3), (2, 3)]),
    ("i...,i...->...", [(3, 1), (3, 5)]),
    ("ij->j", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("iij,jk->ik", [(2, 2, 3), (3, 4)]),
    ("ij,kl->", [(2, 3), (4, 5)]),
    ("ba,ab", [(2, 3), (3, 2)]),
    ("ij,jk->ik", [(2, 1), (3, 4)]),
    ("i,i", [(3,), (3,)]),
    ("...", [(2, 3)]),
    ("ij->ji", [(2, 3)]),
]


def _operands(shapes, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _val(t):
    return np.asarray(t.numpy())


@pytest.mark.parametrize("subscripts, shapes", PATTERNS)
def test_values_match_numpy(backend, subscripts, shapes):
    arrays = _operands(shapes)
    y = gt.einsum(subscripts, *[gt.constant(a, dtype=gt.float64) for a in arrays])
    expected = np.einsum(subscripts, *arrays)
    assert y.shape == expected.shape
    np.testing.assert_allclose(_val(y), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("subscripts, shapes", PATTERNS)
def test_composite_forward_matches_numpy(subscripts, shapes):
    """The forward of a library without einsum (array_api_strict's), checked on NumPy arrays here."""
    import array_api_compat.numpy as xp

    arrays = _operands(shapes)
    explicit = parse_subscripts(subscripts, shapes)[2]
    np.testing.assert_allclose(
        np.asarray(einsum_composite(xp, *arrays, subscripts=explicit)), np.einsum(subscripts, *arrays), rtol=1e-12
    )


def _weights(shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


def _numeric_grads(subscripts, arrays, w, eps=1e-6):
    grads = []
    for k, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            hi = [x.copy() for x in arrays]
            lo = [x.copy() for x in arrays]
            hi[k][idx] += eps
            lo[k][idx] -= eps
            g[idx] = (np.sum(w * np.einsum(subscripts, *hi)) - np.sum(w * np.einsum(subscripts, *lo))) / (2 * eps)
        grads.append(g)
    return grads


def _tape_grads(subscripts, arrays, w):
    ts = [gt.constant(a, dtype=gt.float64) for a in arrays]
    with gt.GradientTape() as tape:
        tape.watch(ts)
        y = gt.reduce_sum(gt.constant(w, dtype=gt.float64) * gt.einsum(subscripts, *ts))
    return tape.gradient(y, ts)


@pytest.mark.parametrize("subscripts, shapes", PATTERNS)
def test_gradients_match_finite_differences(backend, subscripts, shapes):
    arrays = _operands(shapes)
    w = _weights(np.einsum(subscripts, *arrays).shape)
    got = _tape_grads(subscripts, arrays, w)
    for g, a, fd in zip(got, arrays, _numeric_grads(subscripts, arrays, w)):
        assert g.shape == a.shape
        np.testing.assert_allclose(_val(g), fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("subscripts, shapes", PATTERNS)
def test_gradients_match_jax(backend, subscripts, shapes):
    jax = pytest.importorskip("jax", reason="jax is the reference for einsum's gradient")
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    arrays = _operands(shapes)
    w = _weights(np.einsum(subscripts, *arrays).shape)
    ref = jax.grad(lambda *xs: jnp.sum(w * jnp.einsum(subscripts, *xs)), argnums=tuple(range(len(arrays))))(
        *[jnp.asarray(a) for a in arrays]
    )
    for g, r in zip(_tape_grads(subscripts, arrays, w), ref):
        np.testing.assert_allclose(_val(g), np.asarray(r), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "subscripts, shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]), ("...i,...i->...", [(1, 3), (2, 3)])]
)
def test_second_order_matches_jax(backend, subscripts, shapes):
    """The gradient of sum(sin(einsum)) differentiated again (the rule's einsums recorded by the
    outer tape), against jax.grad of jax.grad."""
    jax = pytest.importorskip("jax", reason="jax is the reference for einsum's second derivative")
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    arrays = _operands(shapes)
    ts = [gt.constant(a, dtype=gt.float64) for a in arrays]
    with gt.GradientTape() as outer:
        outer.watch(ts)
        with gt.GradientTape() as inner:
            inner.watch(ts)
            y = gt.reduce_sum(gt.sin(gt.einsum(subscripts, *ts)))
        g0 = inner.gradient(y, ts[0])
        z = gt.reduce_sum(g0 * g0)
    got = outer.gradient(z, ts)

    def first(*xs):
        return jax.grad(lambda *v: jnp.sum(jnp.sin(jnp.einsum(subscripts, *v))))(*xs)

    ref = jax.grad(lambda *xs: jnp.sum(first(*xs) ** 2), argnums=tuple(range(len(arrays))))(
        *[jnp.asarray(a) for a in arrays]
    )
    for g, r in zip(got, ref):
        np.testing.assert_allclose(_val(g), np.asarray(r), rtol=1e-9, atol=1e-11)


def test_complex_gradient_matches_jax(backend):
    """Complex operands: TensorFlow's convention (the gradient of a real loss is 2 dL/d conj(z)),
    which is conj of jax.grad's."""
    jax = pytest.importorskip("jax", reason="jax is the reference for the complex gradient")
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    b = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))
    ta, tb = gt.constant(a, dtype=gt.complex128), gt.constant(b, dtype=gt.complex128)
    with gt.GradientTape() as tape:
        tape.watch([ta, tb])
        y = gt.reduce_sum(gt.abs(gt.einsum("ij,jk->ik", ta, tb)) ** 2)
    got = tape.gradient(y, [ta, tb])
    ref = jax.grad(lambda x, z: jnp.sum(jnp.abs(jnp.einsum("ij,jk->ik", x, z)) ** 2), argnums=(0, 1))(a, b)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(_val(g), np.conj(np.asarray(r)), rtol=1e-10)


def test_dtype_promotion(backend):
    a = gt.constant(np.ones((2, 3)), dtype=gt.float32)
    b = gt.constant(np.ones((3, 2)), dtype=gt.float64)
    assert gt.einsum("ij,jk->ik", a, b).dtype == gt.float64
    assert gt.einsum("ij,jk->ik", a, a.T if hasattr(a, "T") else gt.transpose(a)).dtype == gt.float32
    i = gt.constant(np.arange(6).reshape(2, 3), dtype=gt.int32)
    y = gt.einsum("ij->j", i)
    assert y.dtype == gt.int32
    np.testing.assert_array_equal(_val(y), np.arange(6).reshape(2, 3).sum(0))


def test_tf_names_and_keyword_form(backend):
    a = gt.constant(_operands([(2, 3)])[0], dtype=gt.float64)
    assert gt.linalg.einsum is gt.einsum
    np.testing.assert_allclose(_val(gt.einsum(a, a, subscripts="ij,ij->i")), _val(gt.einsum("ij,ij->i", a, a)))
    assert gt.einsum("ij->ji", np.ones((2, 3))).shape == (3, 2)  # array-likes are converted


@pytest.mark.parametrize(
    "subscripts, shapes, match",
    [
        ("ij,jk->ik", [(2, 3)], "name 2 operand"),
        ("ijk->i", [(2, 3)], "dimension"),
        ("ij->ii", [(2, 2)], "repeat"),
        ("ij->k", [(2, 2)], "in no operand"),
        ("i1->i", [(2, 2)], "characters"),
        ("ij,jk->ik", [(2, 3), (4, 5)], "size"),
        ("...i->i", [(2, 3)], r"\.\.\."),
        ("i->j->i", [(2,)], "->"),
        ("i.j->i", [(2, 2)], "ellipsis"),
    ],
)
def test_bad_subscripts_raise_value_error_naming_einsum(backend, subscripts, shapes, match):
    ts = [gt.constant(a, dtype=gt.float64) for a in _operands(shapes)]
    with pytest.raises(ValueError, match="einsum") as e:
        gt.einsum(subscripts, *ts)
    assert e.match(match)


def test_subscripts_must_come_first(backend):
    with pytest.raises(TypeError, match="einsum"):
        gt.einsum(gt.constant([1.0]), gt.constant([1.0]))


def test_records_one_node(backend):
    """einsum is one op: the tape records one node for it, its rule einsum again."""
    a, b = (gt.constant(x, dtype=gt.float64) for x in _operands([(2, 3), (3, 4)]))
    with gt.GradientTape() as tape:
        tape.watch([a, b])
        gt.einsum("ij,jk->ik", a, b)
    assert [n.opdef.name for n in tape._rec.nodes] == ["einsum"]


def test_conformance_covers_einsum():
    """The conformance suite derives its cases from the registry: einsum has its own."""
    op = registry.get_op("einsum")
    cases = op_cases(op)
    assert len(cases) >= 10
    assert any("ii->" in repr(c) for c in cases)


def test_einops_uses_the_op(backend):
    einops = pytest.importorskip("einops", reason="einops is optional")
    a, b = (gt.constant(x, dtype=gt.float64) for x in _operands([(2, 3), (3, 4)]))
    with gt.GradientTape() as tape:
        tape.watch([a, b])
        y = einops.einsum(a, b, "i j, j k -> i k")
    assert [n.opdef.name for n in tape._rec.nodes] == ["einsum"]
    np.testing.assert_allclose(_val(y), _val(a) @ _val(b), rtol=1e-12)
