"""gt.check_gradients (API.md §6): gradtape on each backend, each library's own autodiff and finite
differences, side by side."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt


def _mlp(x, w):
    xp = x.__array_namespace__()
    return xp.sum(xp.tanh(xp.matmul(w, x)) ** 2) + xp.mean(xp.exp(x) * x)


def test_agrees_on_an_array_api_function_on_every_backend():
    rng = np.random.default_rng(0)
    r = gt.check_gradients(_mlp, rng.normal(size=3), rng.normal(size=(2, 3)))
    r.raise_if_failed()
    assert r.passed
    names = set(r.methods)
    for b in gt.available_backends():
        assert f"gradtape:{b}" in names
    if "torch" in gt.available_backends():
        assert "torch.autograd" in names
    if "jax" in gt.available_backends():
        assert "jax.grad" in names
    assert "finite differences" in names
    assert "| gradtape:numpy | finite differences | 0 |" in r.table()


def test_complex_inputs_follow_tf_convention():
    def f(z):
        xp = z.__array_namespace__()
        return xp.real(z * xp.conj(z)) + xp.real(xp.exp(z))

    z = np.array([0.3 + 0.2j, -1.0 + 0.5j])
    r = gt.check_gradients(f, z)
    r.raise_if_failed()
    np.testing.assert_allclose(r.methods["gradtape:numpy"][0], 2 * z + np.conj(np.exp(z)), rtol=1e-12)


def test_kinks_are_reported_not_failed():
    def f(x):
        xp = x.__array_namespace__()
        return xp.abs(x) + xp.max(x)

    r = gt.check_gradients(f, np.array([0.0, 1.0, 1.0, -2.0]))
    assert r.passed, str(r)
    assert (0,) in r.kinks[0] and (1,) in r.kinks[0]


def test_a_wrong_rule_is_caught_and_named():
    wrong = gt.register_op("crosscheck_wrong_square", lambda xp, x: x * x, lambda op, g: g * op.inputs[0])

    def f(x):
        return wrong(x)

    r = gt.check_gradients(f, np.array([1.0, 2.0]), backends=["numpy"])
    assert not r.passed
    bad = {(p.a, p.b) for p in r.failures}
    assert ("gradtape:numpy", "finite differences") in bad
    with pytest.raises(AssertionError, match="gradtape:numpy vs finite differences"):
        r.raise_if_failed()


def test_tolerances_and_no_native():
    r = gt.check_gradients(lambda x: x * x, np.array([1.0, 2.0]), backends=["numpy"], native=False, rtol=0.0, atol=0.0)
    assert set(r.methods) == {"gradtape:numpy", "finite differences"}
    assert not r.passed  # finite differences are not exact
    r = gt.check_gradients(lambda x: x * x, np.array([1.0, 2.0]), backends=["numpy"], native=False)
    assert r.passed


def test_needs_a_float_argument():
    with pytest.raises(ValueError, match="floating"):
        gt.check_gradients(lambda x: x, np.array([1, 2]))


def test_a_report_that_compared_nothing_does_not_pass():
    def fn(x):  # runs on NumPy (where the finite differences are taken), not on another backend
        return gt.sum(x * gt.asarray([1.0, 2.0], dtype=gt.float64, backend="numpy"))

    other = [b for b in gt.available_backends() if b != "numpy"][0]
    report = gt.check_gradients(fn, np.array([1.0, 2.0]), backends=[other], native=False)
    assert not report.compared and not report.passed
    assert "nothing compared" in str(report)
    with pytest.raises(AssertionError, match="no gradtape gradient was compared"):
        report.raise_if_failed()


def test_one_finite_difference_implementation():
    """crosscheck.finite_differences is testing's; numeric_gradient is its central part."""
    from gradtape import testing
    from gradtape.testing import crosscheck

    assert crosscheck.finite_differences is testing.finite_differences
    f = lambda x, n: float(np.sum(np.abs(x)) * n)
    x = np.array([0.0, 1.0, -2.0], dtype=np.float32)
    central, fwd, bwd = crosscheck.finite_differences(f, [x, 3], [0])[0]
    assert central.dtype == np.float64
    np.testing.assert_allclose(central, [0.0, 3.0, -3.0], atol=1e-8)
    np.testing.assert_allclose(fwd, [3.0, 3.0, -3.0], rtol=1e-6)  # the kink at 0: one-sided
    np.testing.assert_allclose(bwd, [-3.0, 3.0, -3.0], rtol=1e-6)  # differences disagree there
    g, none = testing.numeric_gradient(f, [x, 3])
    np.testing.assert_array_equal(g, central)
    assert none is None
    assert crosscheck.native_method_name("torch") == "torch.autograd"


def test_an_integer_output_is_named_not_compared():
    # a count has no gradient: every backend says why, nothing passes, and the verdict is last too
    def count(x):
        xp = x.__array_namespace__()
        return xp.sum(xp.abs(x) > 0.5)

    report = gt.check_gradients(count, np.array([0.1, 0.7, -0.9]), native=False)
    assert not report.passed
    text = str(report)
    assert "count returns int64 values, and gradients need a floating output" in text
    assert (
        text.splitlines()[-1]
        == text.splitlines()[0]
        == ("check_gradients: nothing compared (every gradtape backend was skipped)")
    )
    ok = gt.check_gradients(lambda x: gt.sum(gt.sin(x)), np.array([0.1, 0.7]), native=False)
    # every pair counted; the backends that could not run are named in the headline, not only the table
    n = len(ok.pairs)
    assert str(ok).splitlines()[-1] == f"check_gradients: all pairs agree ({n} compared)"
    ok.skipped["gradtape:cupy"] = "not installed"
    assert str(ok).splitlines()[0] == f"check_gradients: all pairs agree ({n} compared; 1 skipped: gradtape:cupy)"
