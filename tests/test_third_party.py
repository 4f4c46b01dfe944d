"""Unmodified third-party libraries differentiated on gradtape (issue 10, parts 4 and 8).

array-api-extra, scikit-learn (``array_api_dispatch=True``), SciPy (``SCIPY_ARRAY_API=1``), einops
and xarray find their namespace from a gradtape tensor (``x.__array_namespace__()`` is ``gradtape``;
einops through the backend of ``gradtape/interop/einops.py``) and nothing in them knows about gradtape.
Each function is differentiated on every backend, in float64, and its gradient compared with
central finite differences of the library running on NumPy and, where the library accepts torch or
jax arrays, with the library's own run on them differentiated by ``torch.autograd`` / ``jax.grad``.
Functions that leave the tape (through NumPy, or returning a Python float) must warn
``gt.GradientLeakWarning`` and raise ``gt.GradientLeakError`` when set to.

Every gradient a test obtains goes through :func:`_record`; the autouse fixture
``_meta_every_gradient_is_finite`` fails any test that obtained none, or a ``None`` or non-finite one.
"""

from __future__ import annotations

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # read once, when SciPy is first imported

import dataclasses
import importlib.util
import subprocess
import json
import sys
import warnings

import array_api_extra as xpx  # (the libraries are in the [test] extra)
import einops
import numpy as np
import pytest
import scipy.cluster.vq
import scipy.fft
import scipy.integrate
import scipy.linalg
import scipy.signal
import scipy.special
import scipy.stats
import sklearn
import sklearn.decomposition
import sklearn.metrics
import sklearn.metrics.pairwise as skpair
import sklearn.preprocessing
import sklearn.utils.extmath
import xarray as xr
from array_api_compat import array_namespace

import gradtape as gt
from gradtape.backends import DataDependentShapeError
from gradtape.testing import numeric_gradient

#: tolerances: against finite differences, and against another autodiff of the same function
FD_TOL = dict(rtol=1e-5, atol=1e-6)
AD_TOL = dict(rtol=1e-8, atol=1e-10)
LEAK, REFUSED = "leak asserted", "error asserted"  # what a test that checks no gradient records


# ------------------------------------------------------------------------------ the meta-check
_LOG = []  # (what, gradient: a NumPy array, None, LEAK or REFUSED) for every gradient a test obtained


def _record(what, g):
    _LOG.append((what, g if g is None or isinstance(g, str) else np.asarray(g)))


def _meta_problem(entries):
    """What is wrong with the gradients a passing test recorded (None if nothing)."""
    if not entries:
        return "the test checked no gradient"
    bad = [what for what, g in entries if g is None or (not isinstance(g, str) and not np.all(np.isfinite(g)))]
    return f"the test passed with None or non-finite gradients: {bad}" if bad else None


@pytest.fixture(autouse=True)
def _meta_every_gradient_is_finite(request):
    """A test here that passes has checked a gradient (or asserted a leak), and every gradient it
    obtained was neither None nor non-finite, whatever the test asserted itself."""
    start, failed = len(_LOG), request.session.testsfailed
    yield
    entries = _LOG[start:]
    del _LOG[start:]
    if request.session.testsfailed == failed:  # (a failure is reported already)
        problem = _meta_problem(entries)
        assert problem is None, problem


# ------------------------------------------------------------------------------ the check
@dataclasses.dataclass(eq=False)
class Case:
    """``fn`` of float64 arrays drawn uniformly in ``[lo, hi)`` with ``shapes``; ``native``: the
    libraries (``"torch"``, ``"jax"``) whose arrays the library accepts and differentiates."""

    fn: object
    shapes: list
    lo: float = -2.0
    hi: float = 2.0
    native: tuple = ()

    def arrays(self):
        rng = np.random.default_rng(0)
        return [rng.uniform(self.lo, self.hi, s) for s in self.shapes]


def _outputs(y):
    """The arrays of a result (an array, or a tuple or list of them)."""
    return [e for v in y for e in _outputs(v)] if isinstance(y, (tuple, list)) else [y]


def _weights(refs):
    rng = np.random.default_rng(1)
    return [
        rng.standard_normal(np.shape(r)) + (1j * rng.standard_normal(np.shape(r)) if np.iscomplexobj(r) else 0)
        for r in refs
    ]


def _loss(ys, ws):
    """``sum_k Re(sum(conj(w_k) * y_k))`` in the namespace of the outputs."""
    total = 0.0
    for y, w in zip(ys, ws):
        xp = array_namespace(y)
        w = xp.asarray(w, device=getattr(y, "device", None))
        total = total + xp.sum(xp.real(y * xp.conj(w)) if xp.isdtype(y.dtype, "complex floating") else y * w)
    return total


def _native_gradients(lib, fn, arrays, ws):
    """The library run on ``lib``'s arrays, differentiated by ``lib``'s own autodiff."""
    if lib == "torch":
        import torch

        leaves = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
        loss = _loss(_outputs(fn(*[t.clone() for t in leaves])), ws)  # clones: in-place writes allowed
        return [g.numpy() for g in torch.autograd.grad(loss, leaves)]
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    xs = [jnp.asarray(a, dtype=jnp.float64) for a in arrays]
    grad = jax.grad(lambda *xs: _loss(_outputs(fn(*xs)), ws), argnums=tuple(range(len(xs))))
    try:
        gs = jax.jit(grad)(*xs)  # one compilation instead of one per primitive
    except jax.errors.ConcretizationTypeError:  # the library branches on values: run eagerly
        gs = grad(*xs)
    return [np.asarray(g) for g in gs]


_REFERENCES = {}


def _references(case):
    """Inputs, weights, the library's NumPy outputs, finite differences and native gradients
    (computed once per case, shared by the backends)."""
    if case not in _REFERENCES:
        arrays = case.arrays()
        refs = [np.asarray(r) for r in _outputs(case.fn(*arrays))]
        ws = _weights(refs)
        fd = numeric_gradient(
            lambda *a: float(
                np.real(sum(np.sum(np.conj(w) * np.asarray(y)) for y, w in zip(_outputs(case.fn(*a)), ws)))
            ),
            arrays,
        )
        native = {
            lib: _native_gradients(lib, case.fn, arrays, ws)
            for lib in case.native
            if importlib.util.find_spec(lib) is not None
        }
        _REFERENCES[case] = arrays, ws, refs, fd, native
    return _REFERENCES[case]


def _close(what, got, want, tol):
    np.testing.assert_allclose(got, want, err_msg=what, **tol)


def _lazy_limits(run):
    """``run()``; on a lazy backend (dask), code that sizes an array by its data (``x[mask]`` on a lazy
    mask) gets DataDependentShapeError, which names the dask limitation: the test skips, saying so."""
    try:
        return run()
    except DataDependentShapeError as e:
        _record("a lazy backend's refusal", REFUSED)
        pytest.skip(f"{gt.get_backend().name} cannot run this library code: {e}")


def check(case, what):
    """The tape's gradient of ``sum(conj(w) * fn(*x))`` on the active backend, against finite
    differences and the native autodiffs of ``case``; a leak out of the tape is an error here."""
    arrays, ws, refs, fd, native = _references(case)
    ts = [gt.asarray(a) for a in arrays]
    assert all(t.dtype == gt.float64 for t in ts)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.GradientLeakWarning)
        with gt.GradientTape() as tape:
            tape.watch(ts)
            ys = _lazy_limits(lambda: _outputs(case.fn(*ts)))
            left = [type(y).__name__ for y in ys if not isinstance(y, gt.Tensor)]
            assert not left, f"{what} returned {left}, not gradtape tensors: it left the tape"
            loss = _loss(ys, ws)
        gs = tape.gradient(loss, ts)
    for k, (y, r) in enumerate(zip(ys, refs)):
        _close(f"{what}: value of output {k}", y.numpy(), r, AD_TOL)
    for k, g in enumerate(gs):
        _record(f"{what}, argument {k}", None if g is None else g.numpy())
        assert g is not None, f"{what}: no gradient for argument {k}"
        assert g.shape == ts[k].shape and g.dtype == gt.float64, (g.shape, g.dtype)
        _close(f"{what}: argument {k}, tape vs finite differences", g.numpy(), fd[k], FD_TOL)
        for lib, ng in native.items():
            _close(f"{what}: argument {k}, tape vs {lib}'s autodiff", g.numpy(), ng[k], AD_TOL)


def check_leak(fn, shape, what):
    """``fn`` converts a watched tensor out of gradtape: it warns, and raises when set to."""
    x = gt.asarray(np.random.default_rng(0).uniform(0.5, 2.0, shape))
    old = gt.config.gradient_leak
    try:
        gt.config.gradient_leak = "warn"
        with pytest.warns(gt.GradientLeakWarning), gt.GradientTape() as tape:
            tape.watch(x)
            _lazy_limits(lambda: fn(x))
        gt.config.gradient_leak = "raise"
        with pytest.raises(gt.GradientLeakError), gt.GradientTape() as tape:
            tape.watch(x)
            fn(x)
    finally:
        gt.config.gradient_leak = old
    _record(what, LEAK)


# ------------------------------------------------------------------------------ array-api-extra
# shapes are mostly (3, 4): jax compiles each primitive once per shape, and that is most of the time
EXTRA = {
    "cov": Case(lambda x: xpx.cov(x), [(3, 4)], native=("torch",)),
    "sinc": Case(lambda x: xpx.sinc(x), [(3, 4)], native=("torch",)),
    "kron": Case(lambda a, b: xpx.kron(a, b), [(3, 4), (2, 2)], native=("torch",)),
    "pad": Case(lambda x: xpx.pad(x, 2), [(3, 4)], native=("torch",)),
    "create_diagonal": Case(lambda x: xpx.create_diagonal(x), [(4,)], native=("torch",)),
    # jax.grad of apply_where on jax arrays is NaN where the condition is False (jnp.where evaluates
    # t ** 1.5 at negative t): not a reference
    "apply_where": Case(
        lambda x: xpx.apply_where(x > 0, x, lambda t: t**1.5, fill_value=0.0), [(3, 4)], native=("torch",)
    ),
    "at.set": Case(lambda x, v: xpx.at(x, (slice(None), 1)).set(v * 2.0, copy=True), [(3, 4), (3,)], native=("torch",)),
    "at.add": Case(lambda x, v: xpx.at(x, x > 0).add(v[0] ** 2, copy=True), [(3, 4), (1,)], native=("torch",)),
    "at.multiply": Case(
        lambda x: xpx.at(x, (0, slice(1, 3))).multiply(x[1, :2], copy=True), [(3, 4)], native=("torch",)
    ),
    "expand_dims": Case(lambda x: xpx.expand_dims(x, axis=(0, 2)), [(3, 4)], native=("torch",)),
    # NaN where x < 0: those entries get a zero gradient
    "nan_to_num": Case(
        lambda x: xpx.nan_to_num(array_namespace(x).log(x), fill_value=0.5), [(3, 4)], lo=-1.0, native=("torch",)
    ),
    "nanmean": Case(lambda x: xpx.nanmean(array_namespace(x).log(x), axis=0), [(3, 4)], lo=-0.5, native=("torch",)),
}


@pytest.mark.parametrize("name", list(EXTRA))
def test_array_api_extra(backend, name):
    check(EXTRA[name], f"xpx.{name}")


def test_array_api_extra_sees_gradtape_as_the_namespace(backend):
    x = gt.asarray([1.0, 2.0], dtype=gt.float64)
    assert array_namespace(x) is gt
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sum(xpx.sinc(x))
    g = tape.gradient(y, x).numpy()
    _record("sinc", g)
    xs = np.array([1.0, 2.0])
    want = (np.cos(np.pi * xs) * np.pi * xs - np.sin(np.pi * xs)) / (np.pi * xs**2)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------ scikit-learn
@pytest.fixture
def scipy_array_api():
    """SciPy's (and so scikit-learn's) array-API dispatch, which SciPy reads when first imported."""
    from scipy._lib._array_api import SCIPY_ARRAY_API

    assert SCIPY_ARRAY_API, (
        "SciPy was imported before SCIPY_ARRAY_API=1 was set: tests/conftest.py must set it "
        "before any test module imports SciPy"
    )


@pytest.fixture
def array_api_dispatch(scipy_array_api):
    with sklearn.config_context(array_api_dispatch=True):
        yield


# native (): torch.autograd refuses sklearn's in-place writes on tensors it needs, jax arrays refuse them too
SKLEARN = {
    "StandardScaler.fit_transform": Case(
        lambda x: sklearn.preprocessing.StandardScaler().fit_transform(x), [(3, 4)], native=()
    ),
    "MinMaxScaler.fit_transform": Case(
        lambda x: sklearn.preprocessing.MinMaxScaler().fit_transform(x), [(3, 4)], native=("torch",)
    ),
    "normalize": Case(lambda x: sklearn.preprocessing.normalize(x), [(3, 4)], native=()),
    "PCA.fit_transform": Case(
        lambda x: sklearn.decomposition.PCA(n_components=2, svd_solver="full").fit_transform(x),
        [(3, 4)],
        native=("jax",),
    ),
    "euclidean_distances": Case(lambda x, y: skpair.euclidean_distances(x, y), [(3, 4), (2, 4)], native=("torch",)),
    "rbf_kernel": Case(lambda x: skpair.rbf_kernel(x, gamma=0.3), [(3, 4)], native=("torch",)),
    "cosine_similarity": Case(lambda x, y: skpair.cosine_similarity(x, y), [(3, 4), (2, 4)], native=()),
    "polynomial_kernel": Case(lambda x: skpair.polynomial_kernel(x, degree=3, coef0=0.5), [(3, 4)], native=("torch",)),
    "extmath.softmax": Case(lambda x: sklearn.utils.extmath.softmax(x), [(3, 4)], native=("jax",)),
}


@pytest.mark.parametrize("name", list(SKLEARN))
def test_scikit_learn(backend, array_api_dispatch, name):
    check(SKLEARN[name], name)


SKLEARN_LEAKS = {  # metrics return Python floats: float(tensor)
    "mean_squared_error": lambda x: sklearn.metrics.mean_squared_error(x[:, 0], x[:, 1]),
    "r2_score": lambda x: sklearn.metrics.r2_score(x[:, 0], x[:, 1]),
}


@pytest.mark.parametrize("name", list(SKLEARN_LEAKS))
def test_scikit_learn_metric_returning_a_float_warns(backend, array_api_dispatch, name):
    check_leak(SKLEARN_LEAKS[name], (3, 4), name)


# ------------------------------------------------------------------------------ SciPy
SCIPY = {
    "special.logsumexp": Case(
        lambda x, b: scipy.special.logsumexp(x, axis=0, b=b), [(3, 4), (3, 4)], lo=0.1, native=("jax",)
    ),
    "special.softmax": Case(lambda x: scipy.special.softmax(x, axis=0), [(3, 4)], native=("torch",)),
    "special.log_softmax": Case(lambda x: scipy.special.log_softmax(x, axis=1), [(3, 4)], native=("jax",)),
    "special.xlogy": Case(lambda x, y: scipy.special.xlogy(x, y), [(3, 4), (3, 4)], lo=0.1, native=("torch",)),
    "special.rel_entr": Case(lambda x, y: scipy.special.rel_entr(x, y), [(3, 4), (3, 4)], lo=0.1, native=("torch",)),
    "special.expit": Case(lambda x: scipy.special.expit(x), [(3, 4)], native=("torch",)),
    "special.logit": Case(lambda x: scipy.special.logit(x), [(3, 4)], lo=0.05, hi=0.95, native=("torch",)),
    "special.erf": Case(lambda x: scipy.special.erf(x), [(3, 4)], native=("torch",)),
    "special.gammaln": Case(lambda x: scipy.special.gammaln(x), [(3, 4)], lo=0.5, hi=4.0, native=("torch",)),
    "special.entr": Case(lambda x: scipy.special.entr(x), [(3, 4)], lo=0.1, native=("torch",)),
    "stats.zscore": Case(lambda x: scipy.stats.zscore(x, axis=0), [(3, 4)], native=("torch",)),
    "stats.moment": Case(lambda x: scipy.stats.moment(x, order=3, axis=0), [(3, 4)], native=("torch",)),
    "stats.skew": Case(lambda x: scipy.stats.skew(x, axis=1), [(3, 4)], native=("torch",)),
    "stats.kurtosis": Case(lambda x: scipy.stats.kurtosis(x, axis=1), [(3, 4)], native=("torch",)),
    "stats.gmean": Case(lambda x: scipy.stats.gmean(x, axis=1), [(3, 4)], lo=0.5, native=("torch",)),
    "stats.hmean": Case(lambda x: scipy.stats.hmean(x, axis=1), [(3, 4)], lo=0.5, native=("torch",)),
    "stats.entropy": Case(lambda x: scipy.stats.entropy(x, axis=1), [(3, 4)], lo=0.1, native=("torch",)),
    "integrate.trapezoid": Case(
        lambda y, x: scipy.integrate.trapezoid(y, x, axis=1), [(3, 4), (3, 4)], native=("torch",)
    ),
    "fft.rfft": Case(lambda x: scipy.fft.rfft(x, axis=1), [(3, 4)], native=("torch",)),
    "cluster.vq.whiten": Case(lambda x: scipy.cluster.vq.whiten(x), [(3, 4)], native=("jax",)),
}


@pytest.mark.parametrize("name", list(SCIPY))
def test_scipy(backend, scipy_array_api, name):
    check(SCIPY[name], f"scipy.{name}")


SCIPY_LEAKS = {  # SciPy computes these with NumPy whatever the input
    "stats.norm.logpdf": lambda x: scipy.stats.norm.logpdf(x),
    "linalg.expm": lambda x: scipy.linalg.expm(x[:, :3]),
    "signal.detrend": lambda x: scipy.signal.detrend(x, axis=1),
}


@pytest.mark.parametrize("name", list(SCIPY_LEAKS))
def test_scipy_function_computing_with_numpy_warns(backend, scipy_array_api, name):
    check_leak(SCIPY_LEAKS[name], (3, 4), f"scipy.{name}")


# ------------------------------------------------------------------------------ einops
def _callable_logsumexp(x, axes):
    xp = array_namespace(x)
    m = xp.max(x, axis=axes, keepdims=True)
    return xp.squeeze(m, axis=axes) + xp.log(xp.sum(xp.exp(x - m), axis=axes))


EINOPS = {
    "rearrange": Case(lambda x: einops.rearrange(x, "a (b c) -> (c a) b", c=2), [(3, 4)], native=("torch",)),
    "rearrange list": Case(
        lambda x, y: einops.rearrange([x, y], "n a b -> b (a n)"), [(3, 4), (3, 4)], native=("torch",)
    ),
    "reduce": Case(
        lambda x: [einops.reduce(x, "a (b c) -> c a", op, c=2) for op in ("sum", "mean", "max", "min", "prod")],
        [(3, 4)],
        native=("torch",),
    ),
    "reduce callable": Case(lambda x: einops.reduce(x, "a b -> b", _callable_logsumexp), [(3, 4)], native=("torch",)),
    "repeat": Case(lambda x: einops.repeat(x, "a b -> a k b (r c)", k=2, r=3, c=1), [(3, 4)], native=("torch",)),
    "einsum matmul": Case(lambda a, b: einops.einsum(a, b, "i j, k j -> k i"), [(3, 4), (2, 4)], native=("torch",)),
    "einsum trace": Case(lambda a: einops.einsum(a, "i i ->"), [(4, 4)], native=("torch",)),
    "einsum ellipsis": Case(
        lambda a, b: einops.einsum(a, b, "... i, b i -> b ..."), [(2, 3, 4), (2, 4)], native=("torch",)
    ),
    "einsum three": Case(
        lambda a, b, c: einops.einsum(a, b, c, "a b, c b, a d -> a d"), [(3, 4), (2, 4), (3, 4)], native=("torch",)
    ),
    "pack": Case(lambda a, b: einops.pack([a, b], "i *")[0], [(3, 4), (3,)], native=("torch",)),
    "unpack": Case(lambda x: einops.unpack(x, [(1,), (), (2,)], "i *"), [(3, 4)], native=("torch",)),
}


@pytest.mark.parametrize("name", list(EINOPS))
def test_einops(backend, name):
    check(EINOPS[name], f"einops.{name}")


def test_einops_picks_the_gradtape_backend(backend):
    x = gt.asarray(np.arange(6.0).reshape(2, 3))
    assert einops.parse_shape(x, "a b") == {"a": 2, "b": 3}
    assert type(einops.rearrange(x, "a b -> b a")) is gt.Tensor
    v = gt.Variable(np.arange(6.0).reshape(2, 3))  # a Variable, read under a tape, records too
    with gt.GradientTape() as tape:
        y = gt.sum(einops.reduce(v, "a b -> b", "sum") ** 2)
    g = tape.gradient(y, v).numpy()
    _record("einops on a Variable", g)
    np.testing.assert_allclose(g, [[6.0, 10.0, 14.0]] * 2, rtol=1e-14)  # (a GPU sums in its own order)
    check_leak(lambda x: einops.asnumpy(x), (3, 4), "einops.asnumpy")


def test_einops_einsum_refuses_inconsistent_patterns(backend):
    x = gt.ones((2, 3), dtype=gt.float64)
    with pytest.raises(ValueError, match="einsum: label .* size"):
        einops.einsum(x, "i i ->")
    with pytest.raises(ValueError, match="einsum: operand 0 .* 2 dimension"):
        einops.einsum(x, "i -> i")
    with pytest.raises(ValueError, match="einsum: .* name 3 operand"):
        einops.einsum(x, x, "i j, i j, i j -> i")
    with pytest.raises(NotImplementedError, match="non-floating"):
        einops.reduce(gt.ones((2, 3), dtype=gt.int64), "a b -> a", "mean")
    _record("inconsistent patterns", REFUSED)


_IMPORT_CHILD = """
import json, sys
{first}
import numpy as np
x = gt.asarray(np.arange(6.0).reshape(2, 3))
with gt.GradientTape() as tape:
    tape.watch(x)
    y = gt.sum(einops.reduce(einops.rearrange(x, "a b -> b a"), "b a -> b", "max") ** 2)
print(json.dumps(tape.gradient(y, x).numpy().tolist()))
"""


@pytest.mark.parametrize(
    "first",
    [
        "import gradtape as gt; assert 'einops' not in sys.modules; import einops",
        "import einops; import gradtape as gt",
    ],
)
def test_einops_works_whichever_is_imported_first(first):
    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_CHILD.format(first=first)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GRADTAPE_BACKEND": "numpy"},
    )
    assert out.returncode == 0, out.stderr
    g = np.array(json.loads(out.stdout.strip().splitlines()[-1]))
    _record(first, g)
    np.testing.assert_array_equal(g, [[0.0, 0.0, 0.0], [6.0, 8.0, 10.0]])


# ------------------------------------------------------------------------------ xarray
def _da(x):
    return xr.DataArray(x, dims=("a", "b"))


# torch tensors are not xarray duck arrays (it converts them with np.asarray): jax is the reference
XARRAY = {
    "arithmetic, broadcast by dims": Case(
        lambda x, v: (_da(x) * 2.0 - _da(x) ** 2 / xr.DataArray(v, dims=("b",))).transpose("b", "a").data,
        [(3, 4), (4,)],
        lo=0.5,
        native=("jax",),
    ),
    "sum": Case(lambda x: _da(x).sum("a").data, [(3, 4)], native=("jax",)),
    "mean": Case(lambda x: _da(x).mean("b").data, [(3, 4)], native=("jax",)),
    "std ddof=1": Case(lambda x: _da(x).std("a", ddof=1).data, [(3, 4)], native=("jax",)),
    "var": Case(lambda x: _da(x).var().data, [(3, 4)], native=("jax",)),
    "max": Case(lambda x: _da(x).max("a").data, [(3, 4)], native=("jax",)),
    "min skipna=False": Case(lambda x: _da(x).min("b", skipna=False).data, [(3, 4)], native=("jax",)),
    "prod": Case(lambda x: _da(x).prod("a").data, [(3, 4)], native=("jax",)),
    "cumsum": Case(lambda x: _da(x).cumsum("b").data, [(3, 4)], native=("jax",)),
    "where": Case(lambda x: _da(x).where(_da(x) > 0, -_da(x) * 0.5).data, [(3, 4)], native=("jax",)),
    "isel": Case(lambda x: _da(x).isel(a=[0, 2], b=slice(1, 3)).data, [(3, 4)], native=("jax",)),
    "dot": Case(lambda x, v: xr.dot(_da(x), xr.DataArray(v, dims=("b",))).data, [(3, 4), (4,)], native=("jax",)),
    "concat and diff": Case(
        lambda x: xr.concat([_da(x), _da(x) ** 2], dim="a").diff("b").data, [(3, 4)], native=("jax",)
    ),
    "Dataset": Case(lambda x: (xr.Dataset({"v": (("a", "b"), x)})["v"] ** 2).sum("b").data, [(3, 4)], native=("jax",)),
}


@pytest.mark.parametrize("name", list(XARRAY))
def test_xarray(backend, name):
    check(XARRAY[name], f"xarray {name}")


def test_xarray_values_warns(backend):
    check_leak(lambda x: _da(x).values, (3, 4), "DataArray.values")


# ------------------------------------------------------------------------------ the meta-test
def test_meta_a_none_or_nan_gradient_fails_the_check(backend):
    """``check`` fails on a gradient that is None (disconnected) or NaN, and the meta-check would fail
    a test that recorded one (or none) and passed; a correct function passes both."""
    start = len(_LOG)
    with pytest.raises(AssertionError, match="no gradient"):
        check(
            Case(lambda x: gt.ones_like(x) if isinstance(x, gt.Tensor) else np.ones_like(x), [(3, 4)]), "disconnected"
        )
    with np.errstate(divide="ignore", invalid="ignore"), pytest.raises(AssertionError, match="finite differences"):
        check(Case(lambda x: (x - x) ** 0.5, [(3, 4)]), "nan")
    bad = _LOG[start:]
    del _LOG[start:]
    assert [what for what, _ in bad] == ["disconnected, argument 0", "nan, argument 0"], bad
    assert "None or non-finite" in _meta_problem(bad[:1]) and "None or non-finite" in _meta_problem(bad[1:])
    assert "checked no gradient" in _meta_problem([])
    check(Case(lambda x: x**3, [(3, 4)], native=("torch", "jax")), "cube")
    assert _meta_problem(_LOG[start:]) is None
