"""Python scalars beside arrays (issue 21, item 2): every scalar kind x every array dtype, under both
default floating dtypes, on every backend.

The standard's rule: a Python scalar whose kind fits the array's dtype takes that dtype (a ``float``
beside float32 stays float32); across kinds the result keeps the array's precision (a ``complex``
beside float64 is complex128, never rounded through complex64; beside float32 complex64).  Where the
standard leaves it open (a ``float`` or ``complex`` beside an integer or bool array, an ``int``
beside a bool array) gradtape gives the default dtype of the scalar's kind: ``gt.config.floatx()``,
its complex, int64.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt

_D = gt.dtypes
_SCALARS = {"bool": True, "int": 1, "float": 0.1, "complex": 0.1 + 0.2j}


def _expected(kind, d, fx):
    """The table, written out (not computed by gradtape's own helper)."""
    cx = {"float32": _D.complex64, "float64": _D.complex128}
    if kind == "bool":
        return d
    if kind == "int":
        return _D.int64 if d.kind == "b" else d
    if kind == "float":
        return d if d.kind in "fc" else _D.as_dtype(fx)
    # complex
    if d.kind == "c":
        return d
    return cx[d.name] if d.kind == "f" else cx[fx]


@pytest.fixture(params=["float32", "float64"])
def fx(request):
    before = gt.config.floatx()
    gt.config.set_floatx(request.param)
    yield request.param
    gt.config.set_floatx(before)


_CASES = [
    (kind, d)
    for d in _D.ALL_DTYPES
    for kind in _SCALARS
    if not (kind == "bool" and d.kind == "b")  # bool + bool: no arithmetic in the standard (below)
]


@pytest.mark.parametrize(("kind", "dtype"), _CASES, ids=[f"{k}-{d}" for k, d in _CASES])
def test_python_scalar_promotion_table(backend, fx, kind, dtype):
    if backend.startswith("torch") and dtype.name in ("uint16", "uint32", "uint64"):
        pytest.skip("torch has no add/subtract kernels for uint16/32/64 (a torch limitation, not promotion)")
    s = _SCALARS[kind]
    ref = np.array([1, 0, 1]).astype(dtype.name)
    x = gt.asarray(ref)
    want = _expected(kind, dtype, fx)
    for how, y in (("x + s", x + s), ("s + x", s + x), ("add(x, s)", gt.add(x, s)), ("x - s", x - s)):
        assert y.dtype is want, f"{how}: {y.dtype}, want {want}"
    assert gt.result_type(x, s) is want
    # the value in the result's precision: the scalar is not rounded through a narrower dtype
    expected = ref.astype(want.name) + np.asarray(s).astype(want.name)
    np.testing.assert_array_equal((x + s).numpy(), expected)
    np.testing.assert_array_equal((s + x).numpy(), expected)
    np.testing.assert_array_equal((x - s).numpy(), ref.astype(want.name) - np.asarray(s).astype(want.name))


def test_bool_scalar_beside_bool_array(backend):
    x = gt.asarray([True, False])
    for y in (x & True, True | x, gt.logical_and(x, True), x == False):  # noqa: E712
        assert y.dtype is _D.bool


def test_complex_scalar_keeps_float64_precision(backend):
    """The issue's repro: 0.1 + 0.2j beside a float64 tensor was rounded to complex64."""
    got = complex((gt.asarray([0.0], dtype=gt.float64) + (0.1 + 0.2j))[0])
    assert got == 0.1 + 0.2j
    x = gt.asarray([0.5], dtype=gt.float64)
    for y in (x * 0.1j, 0.1j * x, x / (1 + 0.1j), (1 + 0.1j) - x):
        assert y.dtype is _D.complex128
    np.testing.assert_array_equal((x * 0.1j).numpy(), np.array([0.5]) * 0.1j)


def test_complex_scalar_gradient_in_float64(backend):
    """The rule sees the scalar in the dtype the forward used (complex128 beside float64)."""
    x = gt.Variable([0.3, 0.7], dtype=gt.float64)
    c = 0.1 + 0.3j
    with gt.GradientTape() as tape:
        y = gt.sum(gt.real(x * c * gt.conj(x * c)))  # |c x|^2 = |c|^2 x^2
    g = tape.gradient(y, x)
    assert g.dtype is _D.float64
    np.testing.assert_allclose(g.numpy(), 2 * abs(c) ** 2 * np.array([0.3, 0.7]), rtol=1e-14)
