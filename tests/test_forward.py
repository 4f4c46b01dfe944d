"""gt.ForwardAccumulator (forward mode), on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt


def close(t, expected, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(t.numpy()), np.asarray(expected), rtol=rtol, atol=atol)


def test_jvp_matches_jacobian_times_tangent(backend):
    xv = np.array([0.3, -1.2, 2.0])
    vv = np.array([1.0, 0.5, -2.0])
    x = gt.constant(xv, dtype=gt.float64)
    with gt.ForwardAccumulator(x, gt.constant(vv, dtype=gt.float64)) as acc:
        y = gt.tanh(x) * gt.sum(x**2)
    j = (np.diag(1 - np.tanh(xv) ** 2) * np.sum(xv**2)) + np.outer(np.tanh(xv), 2 * xv)
    close(acc.jvp(y), j @ vv)


def test_jvp_structures_variables_and_unconnected(backend):
    w = gt.Variable(np.array([[1.0, 2.0], [3.0, 4.0]]), dtype=gt.float64)
    b = gt.Variable(np.array([0.5, 0.5]), dtype=gt.float64)
    tangents = [gt.ones((2, 2), dtype=gt.float64), gt.constant([1.0, -1.0], dtype=gt.float64)]
    with gt.ForwardAccumulator([w, b], tangents) as acc:
        y = w @ gt.constant([1.0, 1.0], dtype=gt.float64) + b
        z = gt.constant(3.0)
    out = acc.jvp({"y": y, "z": z})
    close(out["y"], [3.0, 1.0])
    assert out["z"] is None
    close(acc.jvp(z, unconnected_gradients="zero"), 0.0)


def test_forward_over_reverse_hessian_vector_product(backend):
    x = gt.constant([1.0, 2.0], dtype=gt.float64)
    v = gt.constant([1.0, 0.0], dtype=gt.float64)
    with gt.ForwardAccumulator(x, v) as acc:
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.sum(x**3) + x[0] * x[1]
        g = tape.gradient(y, x)
    close(acc.jvp(g), [6.0, 1.0])  # H @ v, H = [[6x0, 1], [1, 6x1]]


def test_mismatched_tangent_is_error(backend):
    x = gt.constant([1.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        gt.ForwardAccumulator(x, gt.constant([1.0]))
    with pytest.raises(ValueError, match="structure"):
        gt.ForwardAccumulator([x], (gt.constant([1.0, 2.0]),) * 2)
