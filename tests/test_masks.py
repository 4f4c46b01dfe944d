"""The NaN-safe products' shortcuts (``strong_zero_multiply``: one mask call fewer; ``xdivy`` by a
power of two: no mask) give the bits the full masks give, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import registry

_SZM = registry.get_op("strong_zero_multiply").public
_XDIVY = registry.get_op("xdivy").public

_VALUES = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e-300, 7.25, -1e-3, 3.0, -0.5])


def _bits(t):
    return np.asarray(t.numpy()).tobytes()


def _reference_strong_zero(a, b):
    zero = (a == 0) | (b == 0)
    return gt.where(zero, 0.0, gt.where(zero, 1.0, a) * gt.where(zero, 1.0, b))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_strong_zero_multiply_is_the_masked_product(backend, dtype):
    a_np, b_np = np.meshgrid(_VALUES, _VALUES)
    if dtype == "complex128":
        a_np = a_np * (1 - 0.5j)
    a = gt.constant(a_np.astype(dtype))
    b = gt.constant(b_np.astype(dtype))
    with np.errstate(invalid="ignore"):  # (NumPy: a complex infinity times a nonzero warns in both)
        got = _SZM(a, b)
        want = _reference_strong_zero(a, b)
    assert got.dtype == want.dtype and _bits(got) == _bits(want)
    assert not np.isnan(got.numpy()[(a_np == 0) | (b_np == 0)]).any()  # a zero wins over inf and NaN


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_xdivy_by_a_python_scalar_is_the_masked_quotient(backend, dtype):
    rng = np.random.default_rng(0)
    x_np = np.concatenate([_VALUES, rng.standard_normal(64) * 100])
    if dtype == "complex128":
        x_np = x_np * (1 + 1j)
    x = gt.constant(x_np.astype(dtype))
    for s in (2, 2.0, 1, 0.5, 0.25, 256, 4.0, 3, 7, 255.0, -2, -3, 1e-3, 0, 300, 512):
        with np.errstate(divide="ignore", invalid="ignore"):  # (NumPy warns for x / 0, complex inf / s)
            got = _XDIVY(x, s)
            want = x / gt.where(x == 0, 1.0, gt.full_like(x, s)) if s != 0 else None
        if want is not None:
            if dtype == "complex128":  # (the sign of a zero part of a complex quotient is the library's:
                got, want = got + 0.0, want + 0.0  # CUDA's differs from NumPy's; + 0.0 makes both +0)
            assert got.dtype == want.dtype and _bits(got) == _bits(want), s
        assert (got.numpy()[x_np == 0] == 0).all()  # 0 where x is 0, also for s = 0


def test_masked_rules_keep_a_zero_cotangent_zero(backend):
    """The chain ``y / 3`` whose rule takes the unmasked quotient: still 0 for a zero cotangent at
    second order, and the true derivative elsewhere."""
    x = gt.constant(np.array([0.0, 2.0, -1.5]))
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.GradientTape() as inner:
            inner.watch(x)
            y = gt.sum(gt.sqrt(x * x + 1.0) / 3)
        g = inner.gradient(y, x)
        gs = gt.sum(g)
    h = outer.gradient(gs, x)
    xn = x.numpy()
    np.testing.assert_allclose(g.numpy(), xn / np.sqrt(xn * xn + 1) / 3)
    np.testing.assert_allclose(h.numpy(), (xn * xn + 1) ** -1.5 / 3)


_NO_ZERO = np.array([1.5, -2.0, np.inf, -np.inf, np.nan, 1e-300, -5e-324, 7.25, -1e-3, 3.0, -0.5, 1e300])


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_masked_forms_without_a_zero_are_the_masked_bits(backend, dtype):
    """Operands without a zero element (NumPy, eagerly, skips the masks there: nothing to mask)
    give the bits of the full masks: infinities, NaN, subnormals, negative divisors (the sign of a
    zero quotient), broadcasting, a 0-d operand, a Python scalar beside an array; and one zero
    element still takes the mask."""
    a_np, b_np = np.meshgrid(_NO_ZERO, _NO_ZERO[::-1])
    if dtype == "complex128":
        a_np = a_np * (1 - 0.5j)
    cases = [
        (a_np, b_np),
        (a_np[:1], b_np),
        (a_np[0, 0], b_np[:3]),
        (np.where(np.eye(12, dtype=bool), 0, a_np), b_np),  # one zero per row: masked
        (np.where(a_np > 0, 0.0, -0.0), b_np),  # all zeros (a zero cotangent), both signs
        (b_np, np.where(a_np > 0, 0.0, -0.0)),
        (np.zeros((1, 12)), b_np),  # all zeros, broadcast: masked
    ]
    for x1, x2 in cases:
        a = gt.constant(np.asarray(x1).astype(dtype))
        b = gt.constant(np.asarray(x2).astype(dtype))
        with np.errstate(invalid="ignore", divide="ignore", over="ignore", under="ignore"):
            got = _SZM(a, b)
            want = _reference_strong_zero(a, b)
            assert got.dtype == want.dtype and _bits(got) == _bits(want)
            got = _XDIVY(a, b)
            want = a / gt.where(a == 0, gt.ones_like(b), b)
            if dtype == "complex128":  # (the sign of a zero part of a complex quotient: the library's)
                got, want = got + 0.0, want + 0.0
            assert got.dtype == want.dtype and _bits(got) == _bits(want)
            for s in (2.5, -3.0, 7, 2.0, 0.0, float("nan"), float("inf")):
                assert _bits(_SZM(a, s)) == _bits(_reference_strong_zero(a, gt.full_like(a, s)))
                assert _bits(_SZM(s, a)) == _bits(_reference_strong_zero(gt.full_like(a, s), a))
                got = _XDIVY(a, s)
                want = a / gt.where(a == 0, 1.0, gt.full_like(a, s))
                if dtype == "complex128":
                    got, want = got + 0.0, want + 0.0
                assert _bits(got) == _bits(want)


def test_masks_in_a_map_and_a_traced_step_match_jax(backend):
    """Per-example gradients through divide's masked rule (``xdivy``, ``strong_zero_multiply``) under
    ``gt.vmap``, eagerly and inside ``gt.function``, where some examples' cotangents are all zeros,
    some partly and some not at all: as ``jax.vmap(jax.grad)``.  (The NumPy and PyTorch adapters read
    an array's values for the masks' no-zero shortcut; PyTorch's only for a CPU tensor outside
    ``torch.func`` transforms and ``torch.compile``, whose batched or traced tensors take the masks.)"""
    jax = pytest.importorskip("jax", reason="the reference per-example gradients are jax.vmap(jax.grad)")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(4, 5))
    ys = rng.uniform(0.5, 2.0, size=(4, 5)) * np.sign(rng.normal(size=(4, 5)))
    ws = rng.normal(size=(4, 5))
    ws[0] = 0.0  # an all-zero cotangent
    ws[1, ::2] = 0.0  # zeros in part
    xs[2, 1] = 0.0  # a zero numerator

    def loss_jax(x, y, w):
        return jnp.sum(w * (x / y))

    ref = jax.vmap(jax.grad(loss_jax, argnums=(0, 1)))(xs, ys, ws)

    def per_example(x, y, w):
        with gt.GradientTape() as tape:
            tape.watch([x, y])
            loss = gt.reduce_sum(w * (x / y))
        return tape.gradient(loss, [x, y])

    args = [gt.constant(a, dtype=gt.float64) for a in (xs, ys, ws)]
    for fn in (gt.vmap(per_example), gt.function(gt.vmap(per_example))):
        got = fn(*args)
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g.numpy(), np.asarray(r), rtol=1e-12, atol=0)
    # and unbatched, eagerly (the adapter's shortcut itself), and each example's jacobian (on PyTorch
    # a walk under torch.func.vmap, whose batched cotangents the shortcut must not read)
    for k in range(4):
        x, y, w = (a[k] for a in args)
        got = per_example(x, y, w)
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g.numpy(), np.asarray(r)[k], rtol=1e-12, atol=0)
        with gt.GradientTape(persistent=True) as tape:
            tape.watch([x, y])
            z = w * (x / y)
        ref_j = jax.jacrev(lambda u, v, w=ws[k]: w * (u / v), argnums=(0, 1))(xs[k], ys[k])
        for g, r in zip(tape.jacobian(z, [x, y]), ref_j):
            np.testing.assert_allclose(g.numpy(), np.asarray(r), rtol=1e-12, atol=0)
