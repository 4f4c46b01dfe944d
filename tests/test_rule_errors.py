"""An error raised inside a gradient rule names the op whose gradient it is and the backend (the user
called ``linalg.det``, not the ``inv`` its rule calls), in first-order and recorded walks, on every
backend; its class is kept."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt

SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])


def _det_gradient(x, recorded):
    """The gradient of ``det`` at ``x``: a first-order walk, or (``recorded``) one an outer tape records."""
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.GradientTape() as inner:
            inner.watch(x)
            y = gt.linalg.det(x)
        if recorded:
            return inner.gradient(y, x)
    return inner.gradient(y, x)


@pytest.mark.parametrize("recorded", [False, True], ids=["first-order", "recorded"])
def test_det_at_a_singular_matrix_names_det(backend, recorded):
    if backend.startswith("dask"):
        pytest.skip("dask computes lazily: the singular inverse is inf / nan, not an error, until computed")
    with pytest.raises(ValueError, match=r"in the gradient of op 'linalg.det' on backend"):
        _det_gradient(gt.constant(SINGULAR), recorded)


def test_a_rules_own_error_class_and_message_are_kept(backend):
    @gt.custom_gradient
    def f(x):
        def grad(g):
            raise ArithmeticError("the user's rule failed")

        return x * 2.0, grad

    x = gt.constant(np.array([1.0, 2.0]))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    with pytest.raises(ArithmeticError, match="the user's rule failed .in the gradient of op"):
        tape.gradient(y, x)
