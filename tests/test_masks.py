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
