"""The default floating dtype (issue 21, item 1): ``gt.config.set_floatx`` / ``gt.config.floatx()`` and
``GRADTAPE_FLOATX``; everything that picks a floating dtype by itself follows it, on every backend.
Also ``numpy.dtype(gt.float64)`` and ``devices() + [None]`` (item 5), and the accuracy of SciPy's
filter design on gradtape (item 3)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.signal

import gradtape as gt


@pytest.fixture
def floatx():
    """A function that sets the default floating dtype; the test's setting never leaks out."""
    before = gt.config.floatx()
    yield gt.config.set_floatx
    gt.config.set_floatx(before)


def _defaults(x_int, x_bool):
    """What picks a floating dtype by itself: name -> the tensor it makes."""
    layer = gt.layers.Dense(2)
    layer.build((None, 3))
    return {
        "constant(0.1)": gt.constant(0.1),
        "constant([0.1, 2.0])": gt.constant([0.1, 2.0]),
        "constant([[1, 2.5]])": gt.constant([[1, 2.5]]),
        "asarray(0.1)": gt.asarray(0.1),
        "Variable(0.1)": gt.Variable(0.1),
        "zeros": gt.zeros((2,)),
        "ones": gt.ones(2),
        "empty": gt.empty(2),
        "eye": gt.eye(2),
        "full(1.5)": gt.full((2,), 1.5),
        "arange(0.5, 3)": gt.arange(0.5, 3),
        "arange(3.0)": gt.arange(3.0),
        "linspace": gt.linspace(0, 1, 3),
        "fft.fftfreq": gt.fft.fftfreq(4),
        "fft.rfftfreq": gt.fft.rfftfreq(4),
        "sin(int)": gt.sin(x_int),
        "exp(bool)": gt.exp(x_bool),
        "sqrt(int)": gt.sqrt(x_int),
        "int / int": x_int / x_int,
        "divide(int, 2)": gt.divide(x_int, 2),
        "int * 0.5": x_int * 0.5,
        "0.5 + int": 0.5 + x_int,
        "mean(int)": gt.mean(x_int),
        "var(int)": gt.var(x_int),
        "random.normal": gt.random.normal((2,), seed=1),
        "random.uniform": gt.random.uniform((2,), seed=1),
        "random.truncated_normal": gt.random.truncated_normal((2,), seed=1),
        "Generator.normal": gt.random.Generator.from_seed(1).normal((2,)),
        "GlorotUniform": gt.layers.GlorotUniform(seed=1)((2, 2)),
        "Zeros": gt.layers.Zeros()((2,)),
        "Constant": gt.layers.Constant(0.1)((2,)),
        "Dense.kernel": layer.kernel,
        "Dense(x)": layer(gt.ones((1, 3))),
    }


def test_default_is_float32_as_tensorflow(backend, floatx):
    assert gt.config.floatx() == "float32"
    got = _defaults(gt.constant([1, 2, 3]), gt.constant([True, False]))
    assert {k: v.dtype for k, v in got.items()} == dict.fromkeys(got, gt.float32)
    assert gt.constant(0.1 + 1j).dtype == gt.full((1,), 1j).dtype == gt.complex64
    info = gt.__array_namespace_info__().default_dtypes()
    assert info["real floating"] is gt.float32 and info["complex floating"] is gt.complex64


def test_float64_everywhere_then_back(backend, floatx):
    floatx("float64")
    assert gt.config.floatx() == "float64"
    x_int, x_bool = gt.constant([1, 2, 3]), gt.constant([True, False])
    got = _defaults(x_int, x_bool)
    assert {k: v.dtype for k, v in got.items()} == dict.fromkeys(got, gt.float64)
    # float64 values, not float32 ones widened
    assert float(got["constant(0.1)"]) == 0.1
    assert float(got["constant([0.1, 2.0])"][0]) == 0.1
    assert float(got["Constant"][0]) == 0.1
    np.testing.assert_array_equal(got["sin(int)"].numpy(), np.sin(np.array([1.0, 2.0, 3.0])))
    np.testing.assert_array_equal(got["int * 0.5"].numpy(), np.array([0.5, 1.0, 1.5]))
    assert float(got["mean(int)"]) == 2.0
    assert float(got["linspace"][1]) == 0.5
    # complex defaults follow
    assert gt.constant(0.1 + 0.2j).dtype == gt.complex128 and complex(gt.constant(0.1 + 0.2j)) == 0.1 + 0.2j
    assert gt.constant([1j, 2]).dtype == gt.complex128
    assert gt.full((2,), 0.1j).dtype == gt.complex128 and complex(gt.full((2,), 0.1j)[0]) == 0.1j
    assert (x_int * 1j).dtype == gt.complex128
    info = gt.__array_namespace_info__().default_dtypes()
    assert info == {
        "real floating": gt.float64,
        "complex floating": gt.complex128,
        "integral": gt.int64,
        "indexing": gt.int64,
    }
    # explicit dtypes win; TF's names keep their meaning
    assert gt.zeros(2, dtype=gt.float32).dtype == gt.float32
    assert gt.constant(0.5, dtype="float").dtype == gt.float32
    assert gt.random.normal((2,), dtype=gt.float32, seed=1).dtype == gt.float32
    assert gt.sin(gt.constant([1.0], dtype=gt.float32)).dtype == gt.float32
    assert (gt.constant([1.0], dtype=gt.float32) * 0.1).dtype == gt.float32
    # a gradient in the default float64
    x = gt.Variable([0.3, 0.7])
    with gt.GradientTape() as tape:
        y = gt.sum(gt.sin(x) * 2.0)
    g = tape.gradient(y, x)
    assert g.dtype == gt.float64
    np.testing.assert_allclose(g.numpy(), 2 * np.cos([0.3, 0.7]), rtol=1e-15)
    # back: every default is float32 again
    floatx("float32")
    got = _defaults(gt.constant([1, 2, 3]), gt.constant([True, False]))
    assert {k: v.dtype for k, v in got.items()} == dict.fromkeys(got, gt.float32)
    assert gt.constant(1j).dtype == gt.complex64
    assert gt.__array_namespace_info__().default_dtypes()["real floating"] is gt.float32


def test_set_floatx_takes_names_and_dtypes_and_refuses_the_rest(floatx):
    for value, name in ((gt.float64, "float64"), (np.float64, "float64"), ("float32", "float32")):
        floatx(value)
        assert gt.config.floatx() == name
    for bad in ("float16", "int32", gt.complex128, "nonsense"):
        with pytest.raises(ValueError, match=r"floatx must be one of \('float32', 'float64'\)"):
            gt.config.set_floatx(bad)
    assert gt.config.floatx() == "float32"  # a refused value changes nothing
    assert "floatx='float32'" in repr(gt.config)


def test_environment_variable_sets_the_default():
    """``GRADTAPE_FLOATX`` is read on first use (a fresh process); a bad value is a ValueError naming it."""
    code = textwrap.dedent(
        """
        import gradtape as gt
        print(gt.config.floatx(), gt.constant(0.1).dtype, gt.linspace(0, 1, 3).dtype, gt.constant(1j).dtype)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "GRADTAPE_BACKEND"}
    out = subprocess.run(
        [sys.executable, "-c", code], env={**env, "GRADTAPE_FLOATX": "float64"}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["float64", "float64", "float64", "complex128"]
    bad = subprocess.run(
        [sys.executable, "-c", code], env={**env, "GRADTAPE_FLOATX": "half"}, capture_output=True, text=True
    )
    assert bad.returncode != 0
    assert "ValueError: GRADTAPE_FLOATX='half': floatx must be one of ('float32', 'float64')" in bad.stderr


# ------------------------------------------------------------------------------------ NumPy's dtype
@pytest.mark.parametrize("dtype", gt.dtypes.ALL_DTYPES, ids=str)
def test_numpy_dtype_of_a_gradtape_dtype(dtype):
    """scikit-learn reads ``.kind`` and then hands the dtype to NumPy."""
    nd = np.dtype(dtype)
    assert nd == np.dtype(dtype.name) and nd.kind == dtype.kind and nd.itemsize == dtype.itemsize
    assert np.zeros(2, dtype=dtype).dtype == nd
    assert np.asarray([1, 0], dtype=dtype).dtype == nd


# ---------------------------------------------------------------------------------------- devices()
def test_devices_is_a_tuple_that_a_list_also_joins(backend):
    devices = gt.__array_namespace_info__().devices()
    native = gt.get_backend().devices()
    assert isinstance(devices, tuple) and devices == tuple(native)
    assert devices + [None] == [*native, None]  # SciPy 1.17 (the list of api_version < 2025.12)
    assert [None] + devices == [None, *native]
    assert devices + (None,) == (*native, None) and (None,) + devices == (None, *native)
    with pytest.raises(TypeError):
        devices + 1


# ------------------------------------------------------------------- SciPy's filter design, item 3
def test_scipy_filter_design_in_float64(backend, floatx):
    """``scipy.signal.lp2bs_zpk`` places zeros with ``xp.full(n, 1j * wo)``: a Python complex fill gets
    the default complex dtype, complex64 under float32 (rounding the float64 filter's zeros to 7
    digits), complex128 under float64 -- the setting SciPy's own suite needs, as it does for torch."""
    wn = [210.0, 310.0]
    ref_b, ref_a = scipy.signal.cheby1(5, 0.9, np.asarray(wn), "stop", analog=True)
    assert gt.full((1,), 1j * 255.0).dtype == gt.complex64  # the root cause, under float32
    floatx("float64")
    b, a = scipy.signal.cheby1(5, 0.9, gt.asarray(wn, dtype=gt.float64), "stop", analog=True)
    assert b.dtype == a.dtype == gt.float64
    np.testing.assert_allclose(b.numpy(), ref_b, rtol=1e-13)
    np.testing.assert_allclose(a.numpy(), ref_a, rtol=1e-13)
    assert float(b[2]) == pytest.approx(325500.0, rel=1e-14)
    cb, ca = scipy.signal.iircomb(50 / 22050, 50.0, xp=gt)
    rb, ra = scipy.signal.iircomb(50 / 22050, 50.0)
    assert cb.dtype == ca.dtype == gt.float64
    np.testing.assert_allclose(cb.numpy(), rb, rtol=1e-13)
    np.testing.assert_allclose(ca.numpy(), ra, rtol=1e-13)


@pytest.mark.parametrize("mode", ["float32", "float64"])
def test_mixed_integer_and_float_tensors_promote_by_the_mode_on_every_backend(backend, floatx, mode):
    """float32 beside an int of 4 or 8 bytes: float32 under TF's default (as torch and JAX), float64 under
    floatx float64 (NumPy's, what SciPy's special functions expect); small ints keep float32 either way;
    the same in operators, the special functions and gt.where (whose libraries promote their own ways)."""
    floatx(mode)
    wide = gt.float64 if mode == "float64" else gt.float32
    f = gt.asarray(np.array([0.5, 2.0], dtype=np.float32))
    for idt, want in (
        (gt.int64, wide),
        (gt.int32, wide),
        (gt.uint32, wide),
        (gt.int8, gt.float32),
        (gt.uint16, gt.float32),
    ):
        i = gt.asarray(np.array([1, 3]), dtype=idt)
        assert gt.result_type(i, f) == want, (idt, mode)
        assert (i + f).dtype == want and (f * i).dtype == want, (idt, mode)
        assert gt.where(gt.asarray([False, True]), i, f).dtype == want, (idt, mode)
        got = gt.special.xlogy(i, f)
        assert got.dtype == want, (idt, mode)
        np.testing.assert_allclose(got.numpy(), np.array([1, 3]) * np.log(np.array([0.5, 2.0])), rtol=1e-6)
    c = gt.asarray(np.array([1j], dtype=np.complex64))
    want_c = gt.complex128 if mode == "float64" else gt.complex64
    assert (c * gt.asarray(np.array([2]), dtype=gt.int64)).dtype == want_c
    np.testing.assert_array_equal(gt.where(gt.asarray([True, False]), gt.asarray([1, 2]), f).numpy(), [1.0, 2.0])


@pytest.mark.parametrize("mode", ["float32", "float64"])
def test_polygamma_of_an_integer_array_order_promotes_with_x(backend, floatx, mode):
    """``polygamma(n, x)`` with ``n`` an int64 array and ``x`` float32: float64 under floatx float64 (NumPy's,
    as scipy.special gives), float32 under TF's default; a Python int ``n`` keeps x's dtype."""
    floatx(mode)
    x = gt.asarray(np.array([0.5, 1.5], dtype=np.float32))
    got = gt.special.polygamma(gt.asarray(np.array([1, 2])), x)
    assert got.dtype == (gt.float64 if mode == "float64" else gt.float32)
    assert gt.special.polygamma(1, x).dtype == gt.float32
    scipy_special = pytest.importorskip("scipy.special")
    np.testing.assert_allclose(got.numpy(), scipy_special.polygamma([1, 2], [0.5, 1.5]), rtol=1e-5)
