"""Issue 21 (found by tests/downstream/run.py on the torch backend): creation functions take 0-d
tensors where the standard takes scalars, and the wide unsigned dtypes (uint16/32/64) give NumPy's
values on every backend for ``linspace``, ``floor_divide`` and ``remainder`` (torch has no kernels
for them; gradtape goes through int64 there)."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt


@pytest.mark.parametrize("fill", [2.5, 3, True])
def test_full_like_takes_a_zero_d_tensor(backend, fill):
    # SciPy's stats.continued_fraction / optimize chandrupatla: xp.full_like(x, zero_d_array)
    x = gt.asarray([1.0, 2.0, 3.0], dtype=gt.float64)
    got = gt.full_like(x, gt.asarray(fill))
    assert got.dtype == gt.float64 and got.shape == (3,)
    np.testing.assert_array_equal(np.asarray(got), np.full(3, float(fill)))
    got = gt.full_like(gt.asarray([1, 2]), gt.asarray(fill))
    assert got.dtype == gt.int64
    np.testing.assert_array_equal(np.asarray(got), np.full(2, int(fill)))
    with pytest.raises(TypeError, match="one element"):
        gt.full_like(x, gt.asarray([1.0, 2.0]))


def test_arange_takes_zero_d_tensors_as_numpy_does(backend):
    # SciPy's stats TestCvm: xp.arange(0, zero_d_array)
    got = gt.arange(0, gt.asarray(3))
    assert got.dtype == gt.int64  # an integer 0-d bound counts as an int (NumPy: int64 too)
    np.testing.assert_array_equal(np.asarray(got), np.arange(3))
    got = gt.arange(gt.asarray(0.5, dtype=gt.float64), gt.asarray(3.0), gt.asarray(1.25), dtype=gt.float64)
    np.testing.assert_array_equal(np.asarray(got), np.arange(0.5, 3.0, 1.25))
    assert gt.arange(0, gt.asarray(2.0)).dtype.name == gt.config.floatx()


WIDE_UNSIGNED = ["uint16", "uint32", "uint64"]


@pytest.mark.parametrize("dtype", WIDE_UNSIGNED)
def test_linspace_wide_unsigned_matches_numpy(backend, dtype):
    for start, stop, num, endpoint in [(0, 10, 3, True), (3, 100, 7, True), (0, 2**31, 5, False), (5, 5, 4, True)]:
        if stop > np.iinfo(dtype).max:
            continue
        got = gt.linspace(start, stop, num, dtype=getattr(gt, dtype), endpoint=endpoint)
        assert got.dtype == getattr(gt, dtype)
        np.testing.assert_array_equal(np.asarray(got), np.linspace(start, stop, num, dtype=dtype, endpoint=endpoint))


@pytest.mark.parametrize("dtype", WIDE_UNSIGNED)
def test_floor_divide_and_remainder_wide_unsigned_match_numpy(backend, dtype):
    # SciPy's tests call floor_divide on uint16/32/64; torch has no kernel for them
    rng = np.random.default_rng(0)
    top = np.iinfo(dtype).max
    a = rng.integers(0, top, 400, dtype=dtype, endpoint=True)
    b = rng.integers(1, top, 400, dtype=dtype, endpoint=True)
    b[:100] = rng.integers(1, 20, 100)  # small divisors: many-bit quotients
    b[100:120] = top  # the largest divisor (uint64: from 2**63 up, the quotient is 0 or 1)
    a[120:140] = top  # the largest dividend (uint64: negative as int64)
    a[140:160] = b[140:160]  # equal: quotient 1, remainder 0
    a[160:180] = b[160:180] - 1
    ga, gb = gt.asarray(a), gt.asarray(b)
    for got, want in [
        (ga // gb, a // b),
        (ga % gb, a % b),
        (gt.floor_divide(ga, 3), a // np.asarray(3, dtype=dtype)),
        (gt.remainder(ga, 7), a % np.asarray(7, dtype=dtype)),
        (1000 // gb, np.asarray(1000, dtype=dtype) // b),
    ]:
        assert got.dtype == getattr(gt, dtype)
        np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_linspace_integer_dtypes_floor_as_numpy(backend, dtype):
    # torch truncates towards zero (0, -3, -6, -10), NumPy floors (0, -4, -7, -10); JAX steps in float32
    for start, stop, num in [(0, -10, 4), (3, 100, 7), (-100, 100, 9), (0, 1, 5)]:
        if min(start, stop) < np.iinfo(dtype).min:
            continue
        got = gt.linspace(start, stop, num, dtype=getattr(gt, dtype))
        assert got.dtype == getattr(gt, dtype)
        np.testing.assert_array_equal(np.asarray(got), np.linspace(start, stop, num, dtype=dtype))


@pytest.mark.parametrize("np_dtype", ["int8", "int32", "uint16", "float32", "float64", "bool"])
def test_list_of_numpy_scalars_keeps_their_dtype(backend, np_dtype):
    # SciPy's differentiate tests: xp.asarray([np.int32(status), ...]) is int32 in NumPy and
    # array_api_strict; Python scalars alone keep gradtape's (TensorFlow's) defaults
    values = [np.asarray(v, dtype=np_dtype)[()] for v in (1, 0, 1)]
    got = gt.asarray(values)
    assert got.dtype == getattr(gt, np_dtype)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(values))
    nested = gt.asarray([[values[0]], np.asarray([1], dtype=np_dtype)])
    assert nested.dtype == getattr(gt, np_dtype) and nested.shape == (2, 1)
    assert gt.asarray([1, 2]).dtype == gt.int64
    assert gt.asarray([1.5, 2.0]).dtype.name == gt.config.floatx()


@pytest.mark.parametrize("dtype", WIDE_UNSIGNED)
def test_abs_wide_unsigned_is_the_identity(backend, dtype):
    # SciPy's signal TestCorrelateReal on uint16/32/64 calls xp.abs; torch has no kernel for them
    x = np.array([0, 1, np.iinfo(dtype).max], dtype=dtype)
    got = gt.abs(gt.asarray(x))
    assert got.dtype == getattr(gt, dtype)
    np.testing.assert_array_equal(np.asarray(got), x)
