"""What a seventh newcomer differentiating SciPy's and scikit-learn's array-API functions checked (the
``newuser7`` brief).  tests/test_third_party.py checks their reverse-mode gradients; a user who takes a
Jacobian-vector product (``ForwardAccumulator``) or a Hessian-vector product (nested tapes) through the
same library code had no test.  Each is compared here with central finite differences of the library
run on NumPy (the jvp) and of the tape's own gradient (the Hessian-vector product), float64, on every
backend."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt

scipy_special = pytest.importorskip("scipy.special", reason="SciPy is not installed (the [test] extra has it)")
scipy_stats = pytest.importorskip("scipy.stats", reason="SciPy is not installed (the [test] extra has it)")
sklearn = pytest.importorskip("sklearn", reason="scikit-learn is not installed (the [test] extra has it)")
skpair = pytest.importorskip("sklearn.metrics.pairwise", reason="scikit-learn is not installed")
skpre = pytest.importorskip("sklearn.preprocessing", reason="scikit-learn is not installed")
skdec = pytest.importorskip("sklearn.decomposition", reason="scikit-learn is not installed")

#: library functions of a (3, 4) float64 array in [0.2, 1.5), each through several gradtape ops
FUNCTIONS = {
    "scipy.special.logsumexp": lambda x: scipy_special.logsumexp(x, axis=1),
    "scipy.special.log_softmax": lambda x: scipy_special.log_softmax(x, axis=1),
    "scipy.special.xlogy": lambda x: scipy_special.xlogy(x, x + 3.0),
    "scipy.special.ndtr": lambda x: scipy_special.ndtr(x),
    "scipy.special.gammaln": lambda x: scipy_special.gammaln(x * x + 0.5),
    "scipy.stats.skew": lambda x: scipy_stats.skew(x, axis=1),
    "scipy.stats.entropy": lambda x: scipy_stats.entropy(x, axis=1),
    "sklearn.rbf_kernel": lambda x: skpair.rbf_kernel(x, x + 0.5),
    "sklearn.normalize": lambda x: skpre.normalize(x),
    "sklearn.PCA.fit_transform": lambda x: skdec.PCA(n_components=2, svd_solver="full").fit_transform(x),
}


@pytest.fixture(autouse=True)
def _array_api_dispatch():
    from scipy._lib._array_api import SCIPY_ARRAY_API

    assert SCIPY_ARRAY_API, "SciPy was imported before tests/conftest.py set SCIPY_ARRAY_API=1"
    with sklearn.config_context(array_api_dispatch=True):
        yield


def _inputs():
    rng = np.random.default_rng(0)
    return rng.uniform(0.2, 1.5, (3, 4)), rng.standard_normal((3, 4))


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_a_jvp_through_library_code_is_its_finite_difference(backend, name):
    f = FUNCTIONS[name]
    x0, v = _inputs()
    eps = 1e-6
    want = (np.asarray(f(x0 + eps * v)) - np.asarray(f(x0 - eps * v))) / (2 * eps)
    x = gt.asarray(x0)
    with gt.autodiff.ForwardAccumulator(x, gt.asarray(v)) as acc:
        y = f(x)
    jv = acc.jvp(y)
    assert jv is not None, f"{name}: no tangent"
    assert jv.dtype == gt.float64
    np.testing.assert_allclose(jv.numpy(), want, rtol=1e-5, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_a_hessian_vector_product_through_library_code_is_its_finite_difference(backend, name):
    f = FUNCTIONS[name]
    x0, v = _inputs()
    w = gt.asarray(np.random.default_rng(1).standard_normal(np.shape(f(x0))))

    def gradient(xx):
        with gt.GradientTape() as tape:
            tape.watch(xx)
            loss = gt.sum(f(xx) * w)
        return tape.gradient(loss, xx)

    x = gt.asarray(x0)
    with gt.GradientTape() as outer:
        outer.watch(x)
        gv = gt.sum(gradient(x) * gt.asarray(v))
    hv = outer.gradient(gv, x)
    assert hv is not None, f"{name}: no second derivative"
    eps = 1e-5
    want = (gradient(gt.asarray(x0 + eps * v)).numpy() - gradient(gt.asarray(x0 - eps * v)).numpy()) / (2 * eps)
    assert np.all(np.isfinite(want))
    np.testing.assert_allclose(hv.numpy(), want, rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("module", ["sklearn.utils.extmath", "sklearn.metrics.pairwise"])
def test_the_audit_drives_row_norms_with_a_matrix(backend, module):
    """``gradtape audit sklearn.metrics.pairwise`` left ``row_norms`` "not driven" (it fed a vector
    to its ``einsum("ij,ij->i")``): the audit's overrides give it a matrix, and it is correct."""
    import importlib

    from gradtape.testing.audit import audit_function

    fn = importlib.import_module(module).row_norms
    outcome = audit_function(fn, f"{module}.row_norms", [backend], native=False).outcomes[backend]
    assert outcome.verdict == "correct", outcome
