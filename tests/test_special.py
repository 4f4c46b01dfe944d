"""``gt.special`` and the nan-reductions: values against SciPy/NumPy, the zero-cotangent convention at
the edges, forward mode, SciPy's array-API dispatch (``SCIPY_ARRAY_API=1``, in a subprocess) and
xarray's ``skipna`` reductions on gradtape tensors.  Gradients against finite differences, to second
order, come from the ops' domains (tests/test_gradients.py); here only what those do not sample."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.special as sc

import gradtape as gt

S = gt.special
_X = np.array([-1.7, -0.4, 0.3, 1.1, 2.6])  # one shape for everything (JAX compiles per shape)
_P = np.array([0.05, 0.3, 0.5, 0.8, 0.97])
_POS = np.array([0.2, 0.7, 1.5, 2.5, 4.0])
_NEG = np.array([-2.5, -1.5, -0.5, 0.5, 3.5])  # off the poles of gamma

UNARY = {
    "erf": _X,
    "erfc": _X,
    "erfinv": 2 * _P - 1,
    "erfcinv": 2 * _P,
    "expit": _X,
    "logit": _P,
    "ndtr": _X,
    "ndtri": _P,
    "log_ndtr": np.array([-40.0, -5.0, 0.3, 1.1, 8.0]),
    "entr": _P,
    "gammaln": _NEG,
    "psi": _NEG,
    "digamma": _NEG,
    "gamma": _NEG,
    "i0": _X,
    "i0e": _X,
    "i1": _X,
    "i1e": _X,
    "sinc": np.array([-1.5, -0.4, 0.0, 1.1, 2.6]),
    "exp2": _X,
    "exp10": _X,
    "cosm1": _X,
}
BINARY = {
    "xlogy": (np.array([0.0, -0.4, 0.3, 1.1, 2.0]), _POS),
    "xlog1py": (_X, _P - 0.5),
    "rel_entr": (np.array([0.0, 0.2, 0.3, 1.1, 2.0]), _POS),
    "betaln": (_POS, _POS[::-1]),
}


def _t(a):
    return gt.asarray(np.asarray(a, dtype=np.float64))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_match_scipy(backend, name):
    x = UNARY[name]
    want = np.sinc(x) if name == "sinc" else getattr(sc, name)(x)
    got = getattr(S, name)(_t(x))
    assert got.dtype == gt.float64 and got.backend == backend.split(":")[0]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-14)
    got32 = getattr(S, name)(gt.asarray(x.astype(np.float32)))
    assert got32.dtype == gt.float32


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_values_match_scipy(backend, name):
    a, b = BINARY[name]
    np.testing.assert_allclose(getattr(S, name)(_t(a), _t(b)).numpy(), getattr(sc, name)(a, b), rtol=1e-12, atol=1e-14)


def test_polygamma_softmax_logsumexp_match_scipy(backend):
    x = _t(_POS)
    for n in (0, 1, 3):
        np.testing.assert_allclose(S.polygamma(n, x).numpy(), sc.polygamma(n, _POS), rtol=1e-8)  # torch: ~5e-10
    n = np.array([0, 1, 2, 1, 0])
    np.testing.assert_allclose(S.polygamma(n, x).numpy(), sc.polygamma(n, _POS), rtol=1e-8)  # torch: ~5e-10
    m = np.arange(6.0).reshape(2, 3) / 3
    for axis in (None, 0, 1, (0, 1)):
        np.testing.assert_allclose(S.softmax(_t(m), axis=axis).numpy(), sc.softmax(m, axis=axis), rtol=1e-12)
        np.testing.assert_allclose(S.log_softmax(_t(m), axis=axis).numpy(), sc.log_softmax(m, axis=axis), rtol=1e-12)
        np.testing.assert_allclose(S.logsumexp(_t(m), axis=axis).numpy(), sc.logsumexp(m, axis=axis), rtol=1e-12)
    b = np.array([[1.0, -0.5, 2.0], [0.0, 1.0, -3.0]])
    got, sgn = S.logsumexp(_t(m), axis=1, b=_t(b), return_sign=True, keepdims=True)
    want, wsgn = sc.logsumexp(m, axis=1, b=b, return_sign=True, keepdims=True)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    np.testing.assert_array_equal(sgn.numpy(), wsgn)


def _grad(f, *xs, cotangent=None):
    xs = [_t(x) for x in xs]
    with gt.GradientTape() as tape:
        tape.watch(xs)
        y = f(*xs)
    w = None if cotangent is None else gt.asarray(np.broadcast_to(cotangent, y.shape).astype(np.float64))
    return [g.numpy() for g in tape.gradient(y, xs, output_gradients=w)]


# (function, arguments at the points where a derivative is infinite or undefined)
EDGES = {
    "logit": (S.logit, [np.array([0.0, 1.0])]),
    "ndtri": (S.ndtri, [np.array([0.0, 1.0])]),
    "erfinv": (S.erfinv, [np.array([-1.0, 1.0])]),
    "erfcinv": (S.erfcinv, [np.array([0.0, 2.0])]),
    "entr": (S.entr, [np.array([0.0, 0.0])]),
    "log_ndtr": (S.log_ndtr, [np.array([-np.inf, -1e200])]),
    "gammaln": (S.gammaln, [np.array([0.0, -2.0])]),
    "psi": (S.psi, [np.array([0.0, -1.0])]),
    "gamma": (S.gamma, [np.array([0.0, -1.0])]),
    "polygamma": (lambda x: S.polygamma(1, x), [np.array([0.0, -1.0])]),
    "xlogy": (S.xlogy, [np.array([1.0, 0.0]), np.array([0.0, 0.0])]),
    "xlog1py": (S.xlog1py, [np.array([1.0, 0.0]), np.array([-1.0, -1.0])]),
    "rel_entr": (S.rel_entr, [np.array([0.0, 1.0]), np.array([1.0, 0.0])]),
    "betaln": (S.betaln, [np.array([0.0, 1.0]), np.array([1.0, 0.0])]),
    "nanvar": (lambda x: gt.nanvar(x, ddof=2), [np.array([1.0, np.nan])]),
}


@pytest.mark.parametrize("name", sorted(EDGES))
def test_zero_cotangent_gives_zero_gradient_at_the_edges(backend, name):
    f, args = EDGES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for g in _grad(f, *args, cotangent=0.0):
            np.testing.assert_array_equal(g, 0.0)


def test_higher_order_and_forward_mode_through_multiply_no_nan(backend):
    """The rules' multiply_no_nan keeps d/d(cotangent): second derivatives and jvps are right."""
    p = _t([0.3, 0.6])
    with gt.ForwardAccumulator(primals=p, tangents=_t([1.0, 2.0])) as acc:
        y = S.logit(p)
    np.testing.assert_allclose(acc.jvp(y).numpy(), [1 / 0.21, 2 / 0.24], rtol=1e-12)
    x = _t([0.7, 2.5])
    with gt.GradientTape() as t2:
        t2.watch(x)
        with gt.GradientTape() as t1:
            t1.watch(x)
            y = S.gammaln(x)
        d = t1.gradient(y, x)
    np.testing.assert_allclose(d.numpy(), sc.psi([0.7, 2.5]), rtol=1e-12)
    np.testing.assert_allclose(t2.gradient(d, x).numpy(), sc.polygamma(1, [0.7, 2.5]), rtol=1e-8)
    x = _t([0.0, 0.8])
    with gt.ForwardAccumulator(primals=x, tangents=_t([1.0, 1.0])) as acc:
        y = S.xlogy(x, _t([0.5, 3.0]))
    np.testing.assert_allclose(acc.jvp(y).numpy(), np.log([0.5, 3.0]), rtol=1e-12)


def test_log_ndtr_gradient_is_accurate_far_left(backend):
    x = np.array([-1e6, -1e3, -120.0, -30.0, -2.0])
    (g,) = _grad(S.log_ndtr, x)
    # phi(x) / ndtr(x) = -x / (1 - 1/x^2 + 3/x^4 - ...), and at moderate x directly
    r = 1 / x**2
    want = -x / (1 - r + 3 * r**2 - 15 * r**3 + 105 * r**4)
    want[-1] = np.exp(-2.0 - sc.log_ndtr(-2.0)) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(g, want, rtol=1e-9)


def test_scipy_special_dispatches_to_gt_special():
    """With SCIPY_ARRAY_API=1 (read when SciPy is imported, hence a subprocess) scipy.special.<f> on
    a gradtape tensor calls gt.special.<f>: a tensor on the same backend whose gradient is right."""
    script = textwrap.dedent("""
        import numpy as np, scipy.special as sc, gradtape as gt
        one = {"erf": 0.3, "erfc": 0.3, "erfinv": 0.3, "expit": 0.3, "logit": 0.3,
               "entr": 0.3, "gammaln": 1.3, "digamma": 1.3, "psi": 1.3, "gamma": 1.3, "log_ndtr": -3.0,
               "ndtr": 0.3, "ndtri": 0.3, "i0": 0.3, "i0e": 0.3, "i1": 0.3, "i1e": 0.3, "sinc": 0.3,
               "exp2": 0.3, "exp10": 0.3, "cosm1": 0.3}
        two = {"xlogy": (0.5, 1.5), "xlog1py": (0.5, 1.5), "rel_entr": (0.5, 1.5), "betaln": (0.5, 1.5)}
        # computed by SciPy from the namespace's functions (not looked up in xp.special)
        comp = {"softmax": 0.3, "log_softmax": 0.3, "logsumexp": 0.3}
        for b in gt.available_backends():
            with gt.use_backend(b):
                cases = [(n, (v,)) for n, v in {**one, **comp}.items()] + list(two.items())
                for name, vals in cases:
                    xs = [gt.asarray(np.array([v, v + 0.1])) for v in vals]
                    with gt.GradientTape() as t:
                        t.watch(xs)
                        y = getattr(sc, name)(*xs)
                        z = getattr(gt.special, name)(*xs)
                    assert isinstance(y, gt.Tensor) and y.backend == b, (b, name, type(y))
                    gy = t.gradient(y, xs)
                    with gt.GradientTape() as t:
                        t.watch(xs)
                        z = getattr(gt.special, name)(*xs)
                    gz = t.gradient(z, xs)
                    for u, v in zip(gy, gz):
                        assert u is not None, (b, name)
                        np.testing.assert_allclose(u.numpy(), v.numpy(), rtol=1e-14, atol=1e-15)
                x = gt.asarray(np.array([0.5, 1.5]))
                with gt.GradientTape() as t:
                    t.watch(x)
                    y = sc.polygamma(1, x)
                np.testing.assert_allclose(t.gradient(y, x).numpy(), sc.polygamma(2, [0.5, 1.5]))
                try:                # a bare ufunc in SciPy 1.17, never dispatched: loud, not silent
                    sc.erfcinv(x)
                    raise AssertionError("scipy.special.erfcinv took a gradtape tensor")
                except TypeError:
                    pass
        print("ok")
    """)
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


# --------------------------------------------------------------------------- nan-reductions
_M = np.array([[1.0, np.nan, 3.0, 3.0], [np.nan, np.nan, np.nan, np.nan], [-2.0, 0.5, np.nan, 4.0]])


@pytest.mark.parametrize(
    "name,kw",
    [
        ("nansum", {}),
        ("nanprod", {}),
        ("nanmean", {}),
        ("nanvar", {}),
        ("nanstd", {"ddof": 1}),
        ("nanmax", {}),
        ("nanmin", {}),
        ("nancumsum", {}),
        ("nancumprod", {}),
    ],
)
def test_nan_functions_match_numpy_with_all_nan_slices(backend, name, kw):
    x = _t(_M)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for axis in (None, 1):
            want = getattr(np, name)(_M, axis=axis, **kw)
            got = getattr(gt, name)(x, axis=axis, **kw)
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, equal_nan=True)
            w = np.array([1.0, 0.0, 1.0])[:, None]  # a zero cotangent for the all-NaN row
            (g,) = _grad(
                lambda t, axis=axis: getattr(gt, name)(t, axis=axis, **kw),
                _M,
                cotangent=1.0 if axis is None else w if name.startswith("nancum") else w[:, 0],
            )
            assert np.isfinite(g).all(), g
            np.testing.assert_array_equal(g[np.isnan(_M)], 0.0)


def test_nan_function_gradients(backend):
    (g,) = _grad(lambda t: gt.nanmax(t, axis=1), _M)  # ties split evenly, as gt.max
    np.testing.assert_array_equal(g, [[0, 0, 0.5, 0.5], [0, 0, 0, 0], [0, 0, 0, 1]])
    (g,) = _grad(lambda t: gt.nanmean(t, axis=1), _M)
    np.testing.assert_allclose(g, [[1 / 3, 0, 1 / 3, 1 / 3], [0, 0, 0, 0], [1 / 3, 1 / 3, 0, 1 / 3]])
    (g,) = _grad(lambda t: gt.nanprod(t, axis=1), _M)
    np.testing.assert_allclose(g, [[9, 0, 3, 3], [0, 0, 0, 0], [2, -8, 0, -1]])
    (g,) = _grad(lambda t: gt.nanvar(t, axis=1, ddof=1), _M)
    c = np.array([1.0, 3.0, 3.0]) - 7 / 3
    np.testing.assert_allclose(g[0], [c[0], 0, c[1], c[2]], rtol=1e-12)  # 2 c / (n - 1), n = 3
    (g,) = _grad(lambda t: gt.nancumsum(t), _M)  # axis=None: flattened
    np.testing.assert_array_equal(g, np.where(np.isnan(_M), 0, np.arange(12, 0, -1).reshape(3, 4)))


def test_all_nan_slices_as_numpy(backend):
    x = _t(_M)
    if backend == "numpy":
        with pytest.warns(RuntimeWarning):
            gt.nanmean(x, axis=1)
    for f in (gt.nanargmax, gt.nanargmin):
        with pytest.raises(ValueError, match="All-NaN"):
            f(x, axis=1)
        np.testing.assert_array_equal(f(x, axis=0).numpy(), getattr(np, f.__name__)(_M, axis=0))
        np.testing.assert_array_equal(f(_t(_M[0])).numpy(), getattr(np, f.__name__)(_M[0]))
    with pytest.raises(TypeError, match="out="):
        gt.nansum(x, out=x)
    assert gt.nansum(x, dtype=gt.float32).dtype == gt.float32


def test_xarray_skipna_reductions_are_differentiable(backend):
    xr = pytest.importorskip("xarray")
    x = _t(_M)
    with gt.GradientTape() as tape:
        tape.watch(x)
        da = xr.DataArray(x, dims=("a", "b"))
        m = da.mean("b", skipna=True)
        s = da.std("b", skipna=True, ddof=1)
        hi = da.max(skipna=True)
        loss = gt.nansum(m.data) + gt.nansum(s.data) + hi.data
    assert isinstance(m.data, gt.Tensor) and m.data.backend == backend.split(":")[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_allclose(m.data.numpy(), np.nanmean(_M, axis=1), equal_nan=True)
        np.testing.assert_allclose(s.data.numpy(), np.nanstd(_M, axis=1, ddof=1), equal_nan=True)
    g = tape.gradient(loss, x).numpy()
    assert np.isfinite(g).all()
    np.testing.assert_array_equal(g[np.isnan(_M)], 0.0)
    assert g[2, 3] > 1.0  # the maximum's gradient reaches it


def test_betaln_at_the_poles_matches_scipy(backend):
    # SciPy's test_support_alternative_backends[betaln-intp] on torch: lgamma(a) + lgamma(b) - lgamma(a + b)
    # is inf - inf (NaN) at non-positive integers; SciPy gives inf, or a finite limit when a + b is a pole too
    a = np.array([-12.0, -8.0, -7.0, -3.0, -16.0, -14.0, 0.0, -2.0, 2.5, 8.0])
    b = np.array([17.0, 16.0, -9.0, 9.0, 8.0, -14.0, 3.0, 1.0, -1.0, 4.0])
    got = gt.special.betaln(gt.asarray(a, dtype=gt.float64), gt.asarray(b, dtype=gt.float64))
    np.testing.assert_allclose(np.asarray(got), sc.betaln(a, b), rtol=1e-12)
    # beyond 32-bit ints SciPy (cephes) gives inf at every pole
    a = np.array([-(2.0**40), -(2.0**31) + 1.0, -(2.0**31) + 2.0, -(2.0**33), -(2.0**31) + 2.0])
    b = np.array([2.0**35, 3.0, 3.0, 2.0**31, 2.0**31 - 3.0])
    got = gt.special.betaln(gt.asarray(a, dtype=gt.float64), gt.asarray(b, dtype=gt.float64))
    # (torch and JAX compose lgammas of about 4e10 there: float64 round-off, not SciPy's asymptotic series)
    np.testing.assert_allclose(np.asarray(got), sc.betaln(a, b), rtol=1e-6)
