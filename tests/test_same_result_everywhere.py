"""The same program gives the same result on every backend (mission item 1), where the libraries
disagree at the edges: casts of NaN / infinite / out-of-range floats to integers, Python ints beyond
a dtype, integer division by zero, singular matrices on JAX.  NumPy's answer (or the convention
docs/conventions.md writes down, "The same numbers on every backend") is the reference; each test
failed on at least one backend before its fix."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import backend_registry as _backends


def _lazy(backend):
    return getattr(_backends.get(backend.split(":")[0]), "lazy", False)


def _values(t):
    return np.asarray(t.numpy())


def _edges(float_dtype, int_dtype):
    """Floats beyond ``int_dtype`` (and NaN, infinities, in-range values) and what their saturating
    cast gives: 0 for NaN, the nearest bound beyond the range, truncation toward zero inside it."""
    info = np.iinfo(int_dtype)
    x = [np.nan, np.inf, -np.inf, 2.0 * info.max + 2.0, 2.0 * info.min - 2.0, -2.7, 2.7, -0.0]
    want = [0, info.max, info.min, info.max, info.min, max(-2, info.min), 2, 0]
    if info.min < 0:
        x += [float(info.min), float(info.max) if float_dtype == "float64" and info.bits < 64 else 100.0]
        want += [info.min, info.max if float_dtype == "float64" and info.bits < 64 else 100]
    return np.asarray(x, dtype=float_dtype), np.asarray(want, dtype=int_dtype)


@pytest.mark.parametrize("float_dtype", ["float32", "float64"])
@pytest.mark.parametrize("int_dtype", ["int8", "int32", "int64", "uint8", "uint32"])
def test_a_float_to_int_cast_saturates_on_every_backend(backend, float_dtype, int_dtype):
    """``gt.astype`` and ``gt.cast``: NaN -> 0, beyond the range -> the nearest bound (infinities too), as JAX and
    tf.dtypes.saturate_cast; NumPy and PyTorch gave INT_MIN (or 255 for -1.0 as uint8), silently on
    PyTorch.  A RuntimeWarning names the op, the values and the dtype, at the user's line."""
    x, want = _edges(float_dtype, int_dtype)
    t = gt.constant(x)
    d = gt.as_dtype(int_dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [gt.astype(t, d), gt.cast(t, d), gt.astype(t * 1.0, d)]
        got = [_values(o) for o in outs]
    for g in got:
        assert g.dtype == np.dtype(int_dtype)
        np.testing.assert_array_equal(g, want)
    ours = [w for w in caught if "astype:" in str(w.message)]
    if _lazy(backend):
        assert not ours  # lazy values are not read (documented): the numbers follow the convention
    else:
        assert len(ours) == 3, [str(w.message) for w in caught]
        w = ours[0]
        assert w.category is RuntimeWarning
        assert f"outside the range of {int_dtype}" in str(w.message) and "nan" in str(w.message)
        assert w.filename == __file__, w.filename  # the user's line, not gradtape's
    assert not [w for w in caught if "invalid value encountered in cast" in str(w.message)]


def test_a_cast_in_range_is_unchanged_and_quiet(backend):
    x = gt.constant([-3.9, -0.5, 0.0, 0.5, 127.9, -128.9], dtype=gt.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = gt.astype(x, gt.int8)
        np.testing.assert_array_equal(_values(out), [-3, 0, 0, 0, 127, -128])
        np.testing.assert_array_equal(_values(gt.astype(gt.constant([0.0, 255.5]), gt.uint8)), [0, 255])
        assert gt.astype(gt.zeros((0,)), gt.int32).shape == (0,)


def test_a_saturating_cast_inside_gt_function(backend):
    """Compiled (jax.jit, torch.compile) or replayed: the same numbers."""
    if _lazy(backend):
        pytest.skip("gt.function on a lazy backend runs eagerly: covered by the eager test")
    f = gt.function(lambda x: gt.astype(x * 1.0, gt.int32))
    x, want = _edges("float32", "int32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for _ in range(2):
            np.testing.assert_array_equal(_values(f(gt.constant(x))), want)


def test_a_complex_cast_to_int_saturates_its_real_part(backend):
    z = gt.constant(np.asarray([complex(np.inf, 1.0), complex(3.5, -1.0), complex(np.nan, 0.0)]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_array_equal(_values(gt.astype(z, gt.int16)), [32767, 3, 0])


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda: gt.asarray(2**70), r"Python integer 1180591620717411303424 out of bounds for int64"),
        (lambda: gt.constant(-(2**63) - 1), r"out of bounds for int64"),
        (lambda: gt.constant(300, dtype=gt.uint8), r"Python integer 300 out of bounds for uint8"),
        (lambda: gt.constant(-1, dtype=gt.uint32), r"Python integer -1 out of bounds for uint32"),
        (lambda: gt.full((2,), 300, dtype=gt.uint8), r"^full: Python integer 300 out of bounds for uint8"),
        (lambda: gt.full((2,), 2**63), r"^full: Python integer 9223372036854775808 out of bounds for int64"),
        (
            lambda: gt.full_like(gt.constant([1, 2], dtype=gt.int8), 200),
            r"^full_like: Python integer 200 out of bounds for int8",
        ),
    ],
)
def test_a_python_int_beyond_the_dtype_is_an_overflow_error(backend, make, says):
    """NumPy's OverflowError, naming the value and the dtype; PyTorch and JAX wrapped the value
    around (full(300, uint8) was 44 on JAX) or raised another class with other words."""
    with pytest.raises(OverflowError, match=says):
        make()


def test_a_python_int_at_the_bounds_still_fits(backend):
    assert _values(gt.full((1,), 255, dtype=gt.uint8)).tolist() == [255]
    assert _values(gt.constant(-(2**63))).tolist() == -(2**63)
    assert _values(gt.constant([1], dtype=gt.int8) + 126).tolist() == [127]


@pytest.mark.parametrize("op", [lambda x: x + 2**40, lambda x: gt.multiply(x, -(2**31) - 1), lambda x: 2**33 - x])
def test_a_python_int_beyond_a_tensors_dtype_is_an_overflow_error(backend, op):
    """NumPy's OverflowError on every backend (PyTorch and JAX wrapped the Python int around)."""
    x = gt.constant([1, 2], dtype=gt.int32)
    with pytest.raises(OverflowError, match="out of bounds|within the bounds"):
        _values(op(x))


@pytest.mark.parametrize("name", ["floor_divide", "remainder"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_division_by_zero_is_numpys_zero_with_a_warning(backend, name, dtype):
    """NumPy: 0 and a RuntimeWarning; PyTorch raised, JAX gave -1 (floor_divide) or garbage."""
    fn = getattr(gt, name)
    x1 = gt.constant(np.asarray([7, 5, 0, 3], dtype=dtype))
    x2 = gt.constant(np.asarray([2, 0, 0, 3], dtype=dtype))
    ref = getattr(np, name)
    with np.errstate(divide="ignore"):
        want = ref(np.asarray([7, 5, 0, 3], dtype=dtype), np.asarray([2, 0, 0, 3], dtype=dtype))
        want_scalar = ref(np.asarray([7, 5, 0, 3], dtype=dtype), 0)
    for call, expected in [(lambda: fn(x1, x2), want), (lambda: fn(x1, 0), want_scalar)]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = _values(call())
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, expected)
        assert any(f"divide by zero encountered in {name}" in str(w.message) for w in caught), [
            str(w.message) for w in caught
        ]
    op = {"floor_divide": lambda a, b: a // b, "remainder": lambda a, b: a % b}[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_array_equal(_values(op(x1, x2)), want)


def test_integer_division_without_zero_and_float_division_are_unchanged(backend):
    x1 = gt.constant([-7, 7, -8], dtype=gt.int32)
    x2 = gt.constant([2, -2, 3], dtype=gt.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(_values(x1 // x2), [-4, -4, -3])
        np.testing.assert_array_equal(_values(x1 % x2), [1, -1, 1])
        np.testing.assert_array_equal(_values(7 // x2), [3, -4, 2])
    f = gt.constant([1.0, -1.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = _values(gt.floor_divide(f, gt.zeros_like(f)))
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(got, np.floor_divide([1.0, -1.0, 0.0], 0.0).astype(np.float32))


@pytest.mark.parametrize(
    "call, says",
    [
        (lambda a, b: gt.linalg.inv(a), r"(?i)singular"),
        (lambda a, b: gt.linalg.solve(a, b), r"(?i)singular"),
        (lambda a, b: gt.linalg.cholesky(a - 2.0 * gt.eye(2, dtype=gt.float64)), r"(?i)positive.definite"),
    ],
)
def test_a_singular_matrix_is_refused_on_every_backend(backend, call, says):
    """NumPy and PyTorch raise; JAX returned inf / NaN.  A ValueError (NumPy's LinAlgError is one)."""
    a = gt.constant([[1.0, 2.0], [2.0, 4.0]], dtype=gt.float64)
    b = gt.constant([[1.0], [1.0]], dtype=gt.float64)
    with pytest.raises(ValueError, match=says):
        _values(call(a, b))


def test_a_regular_matrix_is_not_refused(backend):
    a = gt.constant([[2.0, 1.0], [1.0, 3.0]], dtype=gt.float64)
    np.testing.assert_allclose(_values(gt.linalg.inv(a)), np.linalg.inv([[2.0, 1.0], [1.0, 3.0]]))
    np.testing.assert_allclose(_values(gt.linalg.cholesky(a)), np.linalg.cholesky([[2.0, 1.0], [1.0, 3.0]]))


def _same_bits(got, want):
    """Equal values with equal signs of zero (and NaN where NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_signed_zeros_of_remainder_floor_divide_and_sign_are_numpys(backend, dtype):
    """A zero remainder has the divisor's sign, a zero floor quotient that of x1 / x2 (NumPy, the
    standard): PyTorch and JAX gave -0.0 % 3.0 = -0.0, JAX -0.0 // 3.0 = 0.0; JAX's sign(-0.0) was -0.0."""
    a = np.asarray([-0.0, 0.0, -6.0, 6.0, 1.0, -1.0, -0.0], dtype=dtype)
    b = np.asarray([3.0, -3.0, 3.0, -3.0, 3.0, -3.0, np.inf], dtype=dtype)
    for name in ("remainder", "floor_divide"):
        _same_bits(_values(getattr(gt, name)(gt.constant(a), gt.constant(b))), getattr(np, name)(a, b))
        _same_bits(_values(getattr(gt, name)(gt.constant(a), 3.0)), getattr(np, name)(a, np.asarray(3.0, dtype)))
        _same_bits(_values(getattr(gt, name)(gt.constant(a), -3.0)), getattr(np, name)(a, np.asarray(-3.0, dtype)))
    _same_bits(_values(gt.sign(gt.constant(a))), np.sign(a))


def test_an_integer_to_a_negative_integer_power_is_numpys_value_error(backend):
    """PyTorch and JAX gave 0 (2 ** -1), NumPy refuses."""
    x = gt.constant([2, 3], dtype=gt.int32)
    for call in (lambda: x ** gt.constant([1, -1], dtype=gt.int32), lambda: gt.pow(x, -1)):
        with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
            _values(call())
    np.testing.assert_array_equal(_values(x**2), [4, 9])
    np.testing.assert_allclose(_values(gt.astype(x, gt.float32) ** -1), [0.5, 1 / 3], rtol=1e-6)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_of_an_empty_axis_is_numpys_value_error(backend, name):
    """PyTorch raised an IndexError."""
    with pytest.raises(ValueError, match=f"attempt to get {name} of an empty sequence"):
        getattr(gt, name)(gt.zeros((0,)))
    with pytest.raises(ValueError, match=f"attempt to get {name} of an empty sequence"):
        getattr(gt, name)(gt.zeros((2, 0)), axis=1)
    assert _values(getattr(gt, name)(gt.zeros((2, 0)), axis=0)).shape == (0,)


def test_each_nan_is_distinct_in_unique(backend):
    """The standard's (and NumPy's through array_api_compat) unique: Dask's merged the NaNs."""
    x = gt.constant([np.nan, 1.0, np.nan, 1.0])
    got = _values(gt.unique_values(x))
    np.testing.assert_array_equal(got, [1.0, np.nan, np.nan])
    counts = gt.unique_counts(x)
    np.testing.assert_array_equal(_values(counts.counts), [2, 1, 1])


@pytest.mark.parametrize("op", [lambda x: x < 2**40, lambda x: x == 2**32 + 1, lambda x: x != -(2**33)])
def test_a_comparison_with_a_python_int_beyond_the_dtype_is_an_overflow_error(backend, op):
    """PyTorch and JAX compared the wrapped-around int (``x == 2**32 + 1`` was True for x = 1); array_api_strict
    raised: the error on every backend."""
    x = gt.constant([1, 2], dtype=gt.int32)
    with pytest.raises(OverflowError, match="out of bounds"):
        _values(op(x))
