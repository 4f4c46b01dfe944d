"""Unmodified third-party code written against the Array API standard, differentiated on gradtape.

``array_api_extra`` (the Array API ecosystem's library of functions built on the standard, used by
SciPy and scikit-learn) finds its namespace with ``array_api_compat.array_namespace(x)``, which for a
gradtape tensor is ``gradtape`` itself; nothing in it knows about gradtape.  Each function is
differentiated on every backend with gradtape's tape and checked against float64 central finite
differences and, where installed, the backend library's own autodiff running the same function on
its native arrays (``gt.check_gradients``).
"""
from __future__ import annotations

import array_api_extra as xpx  # in the [test] extra
import numpy as np
import pytest

import gradtape as gt


def _loss(f):
    """sum(f(x) * w) for a fixed random w: every output element reaches the gradient."""
    def loss(*xs):
        from array_api_compat import array_namespace
        xp = array_namespace(*xs)
        y = f(*xs)
        w = xp.asarray(np.random.default_rng(1).standard_normal(tuple(y.shape)), dtype=y.dtype,
                       device=getattr(y, "device", None))
        return xp.sum(y * w)
    return loss

CASES = {
    "cov": (lambda x: xpx.cov(x), [(3, 5)]),
    "sinc": (lambda x: xpx.sinc(x), [(2, 3)]),
    "kron": (lambda a, b: xpx.kron(a, b), [(2, 3), (3, 2)]),
    "pad": (lambda x: xpx.pad(x, 2), [(2, 3)]),
    "atleast_nd": (lambda x: xpx.atleast_nd(x, ndim=3), [(2, 3)]),
    "create_diagonal": (lambda x: xpx.create_diagonal(x), [(4,)]),
    "apply_where": (lambda x: xpx.apply_where(x > 0, x, lambda t: t ** 1.5, fill_value=0.0), [(2, 5)]),
}

@pytest.mark.parametrize("name", sorted(CASES))
def test_array_api_extra_function_is_differentiated(backend, name):
    f, shapes = CASES[name]
    rng = np.random.default_rng(0)
    args = [rng.uniform(-2, 2, s) for s in shapes]
    name = backend.split(":")[0]
    report = gt.check_gradients(_loss(f), *args, backends=[name])
    compared = {m for p in report.pairs for m in (p.a, p.b)}
    assert {f"gradtape:{name}", "finite differences"} <= compared, report
    report.raise_if_failed()

def test_array_api_extra_sees_gradtape_as_the_namespace(backend):
    from array_api_compat import array_namespace
    x = gt.asarray([1.0, 2.0])
    assert array_namespace(x) is gt
    # a tape records through the third-party function: the gradient of sum(sinc(x)) is sinc'(x)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sum(xpx.sinc(x))
    g = tape.gradient(y, x).numpy()
    xs = np.array([1.0, 2.0])
    want = (np.cos(np.pi * xs) * np.pi * xs - np.sin(np.pi * xs)) / (np.pi * xs ** 2)
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
