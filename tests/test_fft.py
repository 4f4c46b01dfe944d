"""gt.fft, the fft extension of the Array API standard (2024.12), on every backend.

The generated tests (tests/test_gradients.py) check each op's forward against NumPy and its
gradient against finite differences on the cases of its domain.  Here: the signatures, the dtype
rules and errors, round trips, padding and trimming, ``fftfreq``/``rfftfreq`` (creation functions,
not ops), and higher-order derivatives through compositions (the generated second-order checks see
only zero second derivatives, as every transform is linear).
"""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import numpy as np
import pytest

import gradtape as gt
from gradtape import testing

STUBS = Path(__file__).resolve().parent / "data" / "array_api_stubs"
_ONE_D = "(x, /, *, n=None, axis=-1, norm='backward')"
_N_D = "(x, /, *, s=None, axes=None, norm='backward')"
_FREQ = "(n, /, *, d=1.0, dtype=None, device=None)"
_SHIFT = "(x, /, *, axes=None)"
SIGNATURES = {
    "fft": _ONE_D,
    "ifft": _ONE_D,
    "fftn": _N_D,
    "ifftn": _N_D,
    "rfft": _ONE_D,
    "irfft": _ONE_D,
    "rfftn": _N_D,
    "irfftn": _N_D,
    "hfft": _ONE_D,
    "ihfft": _ONE_D,
    "fftfreq": _FREQ,
    "rfftfreq": _FREQ,
    "fftshift": _SHIFT,
    "ifftshift": _SHIFT,
}
COMPLEX_IN = ["fft", "ifft", "fftn", "ifftn", "irfft", "irfftn", "hfft"]
REAL_IN = ["rfft", "rfftn", "ihfft"]
OPS = COMPLEX_IN + REAL_IN
NORMS = ["backward", "ortho", "forward"]


def _rng(seed=0):
    return np.random.default_rng(seed)


def _c(shape, seed=0):
    r = _rng(seed)
    return r.standard_normal(shape) + 1j * r.standard_normal(shape)


def _r(shape, seed=0):
    return _rng(seed).standard_normal(shape)


def close(t, expected, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(t.numpy()), np.asarray(expected), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------- the API
def test_namespace_and_signatures_match_the_standard():
    assert sorted(gt.fft.__all__) == sorted(SIGNATURES)
    for name, sig in SIGNATURES.items():
        assert str(inspect.signature(getattr(gt.fft, name))) == sig, name


def test_signatures_match_the_spec_stubs():
    """Against the standard's own stubs (tests/data/array_api_stubs/, vendored with their license)."""
    stub = STUBS / "_2024_12" / "fft.py.txt"
    src = stub.read_text(encoding="utf-8").replace(
        "from ._types import", "from typing import Any as array, Any as dtype, Any as device\nfrom typing import"
    )
    src = src.replace(", array, Optional, Literal, dtype, device", ", Optional, Literal")
    spec = importlib.util.spec_from_loader("_fft_stub", loader=None)
    mod = importlib.util.module_from_spec(spec)
    exec(compile(src, str(stub), "exec"), mod.__dict__)
    assert sorted(mod.__all__) == sorted(gt.fft.__all__)
    for name in mod.__all__:
        want = inspect.signature(getattr(mod, name))
        got = inspect.signature(getattr(gt.fft, name))
        assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == [
            (p.name, p.kind, p.default) for p in want.parameters.values()
        ], name


def test_the_ops_are_registered_with_rules():
    from gradtape.core import registry

    for name in OPS + ["fftshift", "ifftshift"]:
        op = registry.get_op(f"fft.{name}")
        assert op.chapter == "fft" and op.grad is not None and op.public is getattr(gt.fft, name)


def test_array_api_code_reaches_gt_fft(backend):
    x = gt.asarray(_c(4))
    xp = x.__array_namespace__()
    close(xp.fft.fft(x), np.fft.fft(_c(4)))


# ---------------------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("name", COMPLEX_IN)
def test_real_or_integer_input_to_a_complex_transform_is_a_type_error(backend, name):
    f = getattr(gt.fft, name)
    for x in (gt.ones((2, 4)), gt.ones((2, 4), dtype=gt.int64)):
        with pytest.raises(TypeError, match=rf"fft\.{name} needs a complex floating-point input"):
            f(x)


@pytest.mark.parametrize("name", REAL_IN)
def test_complex_input_to_a_real_transform_is_a_type_error(backend, name):
    f = getattr(gt.fft, name)
    for x in (gt.asarray(_c((2, 4))), gt.ones((2, 4), dtype=gt.int32)):
        with pytest.raises(TypeError, match=rf"fft\.{name} needs a real floating-point input"):
            f(x)


_OUT_KIND = {
    "fft": "c",
    "ifft": "c",
    "fftn": "c",
    "ifftn": "c",
    "irfft": "f",
    "irfftn": "f",
    "hfft": "f",
    "rfft": "c",
    "rfftn": "c",
    "ihfft": "c",
}


def test_output_dtypes_keep_the_precision(backend):
    """complex64 <-> float32 (the generated forward tests check the float64 pairs and NumPy's)."""
    for name in OPS:
        x = gt.asarray(_c((2, 4)).astype(np.complex64) if name in COMPLEX_IN else _r((2, 4)).astype(np.float32))
        y = getattr(gt.fft, name)(x)
        assert y.dtype == (gt.complex64 if _OUT_KIND[name] == "c" else gt.float32), (name, y.dtype)
    for name in ("fftshift", "ifftshift"):
        for x in (gt.ones(4, dtype=gt.float32), gt.ones(4, dtype=gt.complex128)):
            assert getattr(gt.fft, name)(x).dtype == x.dtype


@pytest.mark.parametrize("name", OPS)
def test_bad_norm_is_a_value_error_naming_the_op(backend, name):
    x = gt.asarray(_c((2, 4)) if name in COMPLEX_IN else _r((2, 4)))
    with pytest.raises(ValueError, match=rf"fft\.{name}: norm must be 'backward', 'ortho' or 'forward', not 'Ortho'"):
        getattr(gt.fft, name)(x, norm="Ortho")


def test_bad_sizes_and_axes(backend):
    z = gt.asarray(_c((2, 4)))
    with pytest.raises(ValueError, match=r"fft\.fft: invalid number of data points n=0"):
        gt.fft.fft(z, n=0)
    with pytest.raises(TypeError, match=r"fft\.ifft: n must be an integer"):
        gt.fft.ifft(z, n=2.5)
    with pytest.raises(IndexError, match=r"fft\.fft: axis 2 is out of bounds"):
        gt.fft.fft(z, axis=2)
    with pytest.raises(IndexError, match="0-d"):
        gt.fft.fft(gt.asarray(np.complex128(1.0)))
    with pytest.raises(ValueError, match=r"fft\.irfft: axis 1 of size 1 gives an empty transform"):
        gt.fft.irfft(gt.asarray(_c((2, 1))))
    with pytest.raises(ValueError, match=r"fft\.fftn: s= needs axes="):
        gt.fft.fftn(z, s=(2, 4))
    with pytest.raises(ValueError, match=r"fft\.rfftn: s and axes must have the same length"):
        gt.fft.rfftn(gt.asarray(_r((2, 4))), s=(2, 4), axes=(0,))
    with pytest.raises(ValueError, match=r"fft\.ifftn: repeated axis"):
        gt.fft.ifftn(z, axes=(1, -1))
    with pytest.raises(TypeError, match=r"fft\.fftn: axes must be a sequence"):
        gt.fft.fftn(z, axes=0)
    with pytest.raises(TypeError, match=r"fft\.fftfreq: dtype must be a real floating-point dtype"):
        gt.fft.fftfreq(4, dtype=gt.int64)
    with pytest.raises(ValueError, match=r"fft\.rfftfreq: invalid number of data points n=0"):
        gt.fft.rfftfreq(0)


# ---------------------------------------------------------------------------------------- forward
def test_round_trips(backend):
    """Each transform and its inverse, with the same arguments, give the input back (one norm per
    pair: the generated forward tests cover each norm against NumPy; on JAX each call with a new
    shape or size is a compilation)."""
    z = _c((3, 4))
    x5, x4 = _r((2, 5)), _r((3, 4))
    close(gt.fft.ifft(gt.fft.fft(gt.asarray(z), norm="ortho"), norm="ortho"), z)
    close(gt.fft.ifftn(gt.fft.fftn(gt.asarray(z), norm="forward"), norm="forward"), z)
    for x in (x5, x4):  # odd and even lengths: n tells irfft which
        close(gt.fft.irfft(gt.fft.rfft(gt.asarray(x)), n=x.shape[-1]), x)
        close(gt.fft.ifftshift(gt.fft.fftshift(gt.asarray(x))), x)
    close(gt.fft.irfftn(gt.fft.rfftn(gt.asarray(x5), norm="ortho"), s=x5.shape, axes=(0, 1), norm="ortho"), x5)
    close(gt.fft.hfft(gt.fft.ihfft(gt.asarray(x4), norm="forward"), n=4, norm="forward"), x4)
    close(gt.fft.fftshift(gt.fft.ifftshift(gt.asarray(x5), axes=1), axes=1), x5)


def test_padding_and_trimming(backend):
    z = _c((2, 5))
    close(gt.fft.fft(gt.asarray(z), n=8), np.fft.fft(np.concatenate([z, np.zeros((2, 3))], axis=1)))
    close(gt.fft.ifft(gt.asarray(z), n=3, axis=0), np.fft.ifft(np.concatenate([z, np.zeros((1, 5))]), axis=0))
    close(gt.fft.rfft(gt.asarray(z.real), n=3), np.fft.rfft(z.real[:, :3]))
    h = _c((2, 3))
    for n in (3, 7):  # 3 bins trimmed to 2, padded to 4
        close(gt.fft.irfft(gt.asarray(h), n=n), np.fft.irfft(h, n=n))
    close(gt.fft.irfftn(gt.asarray(h), s=(3, 5), axes=(0, 1)), np.fft.irfftn(h, s=(3, 5), axes=(0, 1)))
    close(
        gt.fft.fftn(gt.asarray(_c((2, 3, 4))), s=(-1, 2), axes=(2, 0)),  # -1: the input's size
        np.fft.fftn(_c((2, 3, 4)), s=(4, 2), axes=(2, 0)),
    )


def test_irfft_ignores_the_imaginary_parts_of_dc_and_nyquist(backend):
    h = _c(3)
    h2 = h + 1j * np.array([5.0, 0.0, 7.0])
    close(gt.fft.irfft(gt.asarray(h2)), gt.fft.irfft(gt.asarray(h)).numpy())  # n = 4: bin 2 is Nyquist
    odd = gt.fft.irfft(gt.asarray(h2), n=5).numpy() - gt.fft.irfft(gt.asarray(h), n=5).numpy()
    assert np.abs(odd).max() > 0.1  # n = 5: bin 2 is not


def test_shifts(backend):
    x = np.arange(10.0).reshape(2, 5)
    close(gt.fft.fftshift(gt.asarray(x)), np.fft.fftshift(x))
    close(gt.fft.ifftshift(gt.asarray(x), axes=-1), np.fft.ifftshift(x, axes=-1))
    close(gt.fft.fftshift(gt.asarray(x), axes=(0,)), np.fft.fftshift(x, axes=(0,)))
    i = gt.asarray(np.arange(5))  # integers too (a roll), though the standard asks for floats
    assert gt.fft.fftshift(i).dtype == gt.int64
    np.testing.assert_array_equal(gt.fft.fftshift(i).numpy(), np.fft.fftshift(np.arange(5)))
    np.testing.assert_array_equal(gt.fft.ifftshift(i).numpy(), np.fft.ifftshift(np.arange(5)))


@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
def test_frequencies_match_numpy(backend, name):
    f, ref = getattr(gt.fft, name), getattr(np.fft, name)
    bname = backend.split(":")[0]
    y = f(5)
    assert y.dtype == gt.float32 and y.backend == bname and y.shape == ref(5).shape
    close(y, ref(5), rtol=1e-6, atol=1e-7)
    where = gt.zeros(1).device if bname == "cupy" else "cpu"  # (CuPy has no CPU device)
    y = f(8, d=0.25, dtype=gt.float64, device=where)
    assert y.dtype == gt.float64 and y.backend == bname and y.device == where
    close(y, ref(8, d=0.25))
    assert f(5).device == gt.zeros(1).device
    with gt.use_backend("numpy"):
        assert f(4).backend == "numpy"


# ---------------------------------------------------------------------------------------- gradients
def test_irfft_gradient_is_real_at_dc_and_nyquist(backend):
    z = gt.asarray(_c(3))
    w = gt.asarray(_r(4))
    with gt.GradientTape() as tape:
        tape.watch(z)
        y = gt.sum(gt.fft.irfft(z) * w)
    g = tape.gradient(y, z).numpy()
    assert g[0].imag == 0 and g[2].imag == 0
    close(gt.asarray(g), np.fft.rfft(_r(4)) / 4 * np.array([1, 2, 1]))


def test_forward_mode(backend):
    x, v = gt.asarray(_r(5)), gt.asarray(_r(5, 1))
    with gt.ForwardAccumulator(x, v) as acc:
        y = gt.fft.rfft(x, n=6, norm="ortho")
    close(acc.jvp(y), np.fft.rfft(_r(5, 1), n=6, norm="ortho"))


def _as(x):
    return gt.asarray(x)


def _cube(y):
    return gt.sum(gt.real(y * y * y))


def _c2c(z):
    a = gt.fft.fft(z, n=4, axis=1, norm="ortho")  # (2, 4)
    b = gt.fft.fftn(a * a, s=(3, 4), axes=(0, 1))  # padded to (3, 4)
    return _cube(gt.fft.ifftshift(gt.fft.ifft(b, n=2, axis=0), axes=0) * gt.fft.ifftn(a, norm="forward"))


def _r2c(x):
    h = gt.fft.rfftn(x, s=(2, 5), axes=(1, 0), norm="ortho")  # (3, 2)
    y = gt.fft.irfftn(h * h, s=(4, 2), axes=(0, 1))  # (4, 2)
    r = gt.fft.rfft(y, n=5, axis=0)  # (3, 2)
    return _cube(gt.fft.irfft(r * r, n=4, axis=0, norm="forward"))


def _herm(x):
    return _cube(gt.fft.hfft(gt.fft.ihfft(x, n=6) ** 2, n=4, norm="ortho"))


# real functions, nonlinear, so that second derivatives go through every rule (and its rule)
COMPOSITES = {
    "fft-ifft-fftn-ifftn-ifftshift": (_c2c, _c((2, 3))),
    "rfftn-irfftn-rfft-irfft": (_r2c, _r((2, 3))),
    "hfft-ihfft": (_herm, _r(4)),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_second_order_through_the_rules(backend, name):
    """d/dx <v, grad f(x)> (a Hessian-vector product through nested tapes) against finite
    differences of the tape's first-order gradient, which is itself checked against finite
    differences of f."""
    f, x0 = COMPOSITES[name]
    v = _c(x0.shape, 7) if x0.dtype.kind == "c" else _r(x0.shape, 7)

    def grad(x):
        t = _as(x)
        with gt.GradientTape() as tape:
            tape.watch(t)
            y = f(t)
        return tape.gradient(y, t)

    def f_np(a):
        return float(f(_as(a)).numpy())

    def hv(x):
        t = _as(x)
        with gt.GradientTape() as outer:
            outer.watch(t)
            with gt.GradientTape() as inner:
                inner.watch(t)
                y = f(t)
            g = inner.gradient(y, t)
            m = gt.sum(gt.real(gt.conj(_as(v)) * g)) if g.dtype.is_complex else gt.sum(_as(v) * g)
        return outer.gradient(m, t)

    (g_num,) = testing.numeric_gradient(f_np, [x0])
    close(grad(x0), g_num, rtol=1e-6, atol=1e-6)

    def m_np(a):
        return float(np.real(np.sum(np.conj(v) * grad(a).numpy())))

    (h_num,) = testing.numeric_gradient(m_np, [x0])
    close(hv(x0), h_num, rtol=1e-5, atol=1e-5)


def test_third_order(backend):
    """Three nested tapes through rfft, irfft and their rules: along x = t v,
    f = sum(irfft(rfft(x)^2) * x) = c t^3, so the derivatives are 3 c t^2, 6 c t and 6 c."""
    v = _r(4, 3)
    t = gt.asarray(np.float64(0.7))
    with gt.GradientTape() as t3:
        t3.watch(t)
        with gt.GradientTape() as t2:
            t2.watch(t)
            with gt.GradientTape() as t1:
                t1.watch(t)
                x = t * _as(v)
                y = gt.sum(gt.fft.irfft(gt.fft.rfft(x) ** 2, n=4) * x)  # cubic: c t^3
            d1 = t1.gradient(y, t)
        d2 = t2.gradient(d1, t)
    d3 = t3.gradient(d2, t)
    c = np.sum(np.fft.irfft(np.fft.rfft(v) ** 2, n=4) * v)
    close(d1, 3 * c * 0.7**2)
    close(d2, 6 * c * 0.7)
    close(d3, 6 * c)
