"""What a fifth newcomer porting NumPy / TensorFlow code met (the ``newuser5`` brief): numbers that were
silently wrong or backend-dependent.  Each test fails on the code before its fix, and runs on every backend."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradtape as gt


@pytest.mark.parametrize(
    "draw, error, says",
    [
        # int() truncated the bounds: uniform(2.5, 7.9, int32) drew from [2, 7), silently
        (lambda: gt.random.uniform((4,), 2.5, 7.9, dtype=gt.int32, seed=1), TypeError, r"minval must be an integer"),
        # a bound beyond the dtype wrapped around: uint8 draws below 300 were any of 0..255
        (lambda: gt.random.uniform((4,), 0, 300, dtype=gt.uint8, seed=1), ValueError, r"300\) do not fit dtype uint8"),
        (lambda: gt.random.uniform((4,), 0, 2**40, dtype=gt.int32, seed=1), ValueError, r"do not fit dtype int32"),
        (lambda: gt.random.Generator.from_seed(1).uniform((4,), -1, 5, dtype=gt.uint8), ValueError, r"do not fit"),
        # a seed with a fractional part was truncated: seed=1.5 gave seed=1's numbers
        (lambda: gt.random.uniform((2,), seed=1.5), TypeError, r"seed must be an integer, got 1\.5"),
        (lambda: gt.random.Generator.from_seed(2.5), TypeError, r"^Generator\.from_seed: seed must be an integer"),
        (lambda: gt.random.categorical([[0.0, 0.0]], 2.5, seed=1), TypeError, r"^categorical: num_samples"),
        # tf.random.categorical's dtype is an integer one; float32 class indices were returned
        (lambda: gt.random.categorical([[0.0, 0.0]], 3, dtype=gt.float32, seed=1), ValueError, r"integer dtype"),
        # NaN logits drew class 0 every time; a row of -inf drew class 0 (a class of probability 0)
        (lambda: gt.random.categorical([[0.0, 1.0], [np.nan, 0.0]], 5, seed=1), ValueError, r"row 1 of logits"),
        (lambda: gt.random.categorical([[-np.inf, -np.inf]], 5, seed=1), ValueError, r"row 0 of logits"),
    ],
)
def test_a_random_draw_refuses_what_it_would_change_silently(backend, draw, error, says):
    with pytest.raises(error, match=says):
        draw()


def test_a_random_draw_within_its_bounds_is_unchanged(backend):
    """The fixed calls still draw: integral bounds of any type, the full range of a dtype (``maxval``
    is exclusive), integral seeds written as floats, TF's categorical with a row holding -inf."""
    u = gt.random.uniform((1000,), 0, 256.0, dtype=gt.uint8, seed=3)
    assert u.dtype == gt.uint8
    v = np.asarray(u.numpy())
    assert v.min() >= 0 and v.max() <= 255 and v.max() > 200
    i = np.asarray(gt.random.uniform((1000,), np.int64(-3), 4, dtype=gt.int32, seed=3).numpy())
    assert set(np.unique(i)) == set(range(-3, 4))
    np.testing.assert_array_equal(
        np.asarray(gt.random.normal((3,), seed=2.0).numpy()), np.asarray(gt.random.normal((3,), seed=2).numpy())
    )
    c = np.asarray(gt.random.categorical([[-np.inf, 0.0, -np.inf]], 50, dtype=gt.int32, seed=1).numpy())
    assert c.dtype == np.int32
    np.testing.assert_array_equal(c, np.ones((1, 50)))


_EDGES = np.array([0.0, -0.0, -1.0, -2.0, -2.5, 0.5, 3.0, 1e-300, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize(
    "name, call",
    [
        # torch's gamma(+-0) was NaN (SciPy's: +-inf)
        ("gamma", lambda sp, x: sp.gamma(x)),
        # torch's and JAX's gammaln(-inf) was inf (SciPy's: -inf)
        ("gammaln", lambda sp, x: sp.gammaln(x)),
        # JAX's digamma(+-0) was NaN (SciPy's: -+inf)
        ("psi", lambda sp, x: sp.psi(x)),
        ("polygamma0", lambda sp, x: sp.polygamma(0, x)),
        # torch's polygamma(1, -1) was 6.6e32 and polygamma(1, -inf) NaN; JAX's polygamma(1, inf) NaN
        ("polygamma1", lambda sp, x: sp.polygamma(1, x)),
        ("polygamma2", lambda sp, x: sp.polygamma(2, x)),
        ("polygamma3", lambda sp, x: sp.polygamma(3, x)),
        # JAX's rel_entr(x, nan), rel_entr(nan, y) were inf, rel_entr(inf, 1) NaN (SciPy's: nan, nan, inf)
        ("rel_entr", lambda sp, x: sp.rel_entr(x, (np if isinstance(x, np.ndarray) else gt).flip(x))),
        ("rel_entr_inf", lambda sp, x: sp.rel_entr(x, (np if isinstance(x, np.ndarray) else gt).ones_like(x))),
    ],
)
def test_a_special_function_at_its_edges_is_scipys_on_every_backend(backend, name, call):
    """gt.special documents SciPy's functions: at poles, infinities and NaN each backend's own function
    gave its library's number, not SciPy's."""
    sc = pytest.importorskip("scipy.special", reason="SciPy gives the reference values")
    got = np.asarray(call(gt.special, gt.constant(_EDGES, dtype=gt.float64)).numpy())
    with np.errstate(all="ignore"):
        want = call(sc, _EDGES)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=0)  # (torch.special.polygamma: 3e-10)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: gt.var(x, axis=-1, correction=2),  # NumPy / torch: inf; JAX / dask: NaN
        lambda x: gt.std(x, axis=-1, correction=3),  # dask: inf
        lambda x: gt.var(x, correction=4),
        lambda x: gt.nanvar(x, axis=-1, ddof=2),  # NumPy: NaN; the others: inf
        lambda x: gt.nanstd(x, ddof=5),
    ],
)
def test_a_variance_without_degrees_of_freedom_is_nan_on_every_backend(backend, call):
    """The Array API's special case (and NumPy's nanvar): ``N - correction <= 0`` gives NaN; each
    library gave its own of inf and NaN.  Its gradient is NaN, not ``2e300 (x - mean)``."""
    x = gt.constant([[1.0, 2.0], [3.0, 5.0]], dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = call(x)
    assert np.isnan(np.asarray(y.numpy())).all()
    assert np.isnan(np.asarray(tape.gradient(y, x).numpy())).all()


def test_a_fractional_correction_is_numpys_on_every_backend(backend):
    """torch's std took no fractional correction (a NotImplementedError); var, std and their
    gradients with ``correction=1.5`` are NumPy's and JAX's."""
    jax = pytest.importorskip("jax", reason="jax gives the reference gradient")
    jax.config.update("jax_enable_x64", True)  # (as gradtape's jax backend sets it)
    v = np.array([[1.0, 2.0, 4.0], [3.0, 5.0, 11.0]])
    x = gt.constant(v, dtype=gt.float64)
    for gt_f, np_f in ((gt.var, np.var), (gt.std, np.std)):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.sum(gt_f(x, axis=1, correction=1.5))
        np.testing.assert_allclose(np.asarray(y.numpy()), np_f(v, axis=1, ddof=1.5).sum(), rtol=1e-12)
        want = jax.grad(lambda a, f=np_f: getattr(jax.numpy, f.__name__)(a, axis=1, ddof=1.5).sum())(v)
        np.testing.assert_allclose(np.asarray(tape.gradient(y, x).numpy()), np.asarray(want), rtol=1e-12)


@pytest.mark.parametrize("ord", [math.inf, 2, 1, 0, -1, -0.5])
@pytest.mark.parametrize("shape, kw", [((0,), {}), ((2, 0), {"axis": 1}), ((2, 0), {"axis": 1, "keepdims": True})])
def test_a_vector_norm_of_no_elements_is_numpys_on_every_backend(backend, ord, shape, kw):
    """``vector_norm`` over an empty axis: 0 (``inf``, ``p >= 0``) or inf (``p < 0``), as NumPy's and
    JAX's; torch raised a ValueError for ``inf`` and every ``p < 0``."""
    got = gt.linalg.vector_norm(gt.zeros(shape, dtype=gt.float64), ord=ord, **kw)
    with np.errstate(divide="ignore"):
        want = np.linalg.vector_norm(np.zeros(shape), ord=ord, **kw)
    np.testing.assert_array_equal(np.asarray(got.numpy()), want)


def test_clip_of_integers_takes_integer_bounds_on_every_backend(backend):
    """``gt.clip(int tensor, 2.5, 7.5)`` was ``[2, 5, 7]`` int64 on NumPy, ``[2.5, 5, 7.5]`` float32 on
    torch and JAX, a TypeError on array_api_strict; integral float bounds gave floats on torch and JAX."""
    x = gt.constant([1, 5, 9])
    with pytest.raises(TypeError, match=r"^clip: min=2\.5 is no integer, and x is int64.*gt\.astype"):
        gt.clip(x, 2.5, 7.5)
    with pytest.raises(TypeError, match=r"^clip: max=inf"):
        gt.clip(x, None, math.inf)
    for lo, hi in ((2.0, 7.0), (2, 7), (np.float64(2.0), 7)):
        y = gt.clip(x, lo, hi)
        assert y.dtype == gt.int64
        np.testing.assert_array_equal(np.asarray(y.numpy()), [2, 5, 7])
    np.testing.assert_allclose(np.asarray(gt.clip(gt.astype(x, gt.float32), 2.5, 7.5).numpy()), [2.5, 5.0, 7.5])
