"""Whether ``custom_gradient``'s ``grad_fn`` takes ``variables=``: read once per code object where
``f`` uses variables (not per call), for every kind of callable a user may return."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import gradtape as gt


def _grads(make_grad_fn):
    """d(sum(x * w))/dx and /dw through a custom_gradient whose grad_fn ``make_grad_fn(x, w)`` gives."""
    w = gt.Variable([3.0, 4.0])

    @gt.custom_gradient
    def f(x):
        return gt.sum(x * w), make_grad_fn(x, w)

    x = gt.constant([1.0, 2.0])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    gx, gw = tape.gradient(y, [x, w])
    return np.asarray(gx.numpy()), np.asarray(gw.numpy())


def _rule(dy, x, w, variables=None):
    return dy * w, [dy * x]


class _Callable:
    def __init__(self, x, w):
        self.x, self.w = x, w

    def __call__(self, dy, **kwargs):
        return dy * self.w, [dy * self.x]


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda x, w: lambda dy, variables=None: (dy * w, [dy * x]), id="closure"),
        pytest.param(lambda x, w: lambda dy, **kw: (dy * w, [dy * x]), id="var-keyword"),
        pytest.param(lambda x, w: functools.partial(_rule, x=x, w=w), id="partial"),
        pytest.param(_Callable, id="callable-object"),
    ],
)
def test_grad_fn_taking_variables_gets_them(backend, make):
    for _ in range(2):  # the second call reads the cached answer
        gx, gw = _grads(make)
        np.testing.assert_allclose(gx, [3.0, 4.0])
        np.testing.assert_allclose(gw, [1.0, 2.0])


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda x, w: lambda dy: (dy * w, [dy * x]), id="closure"),
        pytest.param(lambda x, w: functools.partial(lambda dy, x, w: dy * w, x=x, w=w), id="partial"),
    ],
)
def test_grad_fn_without_variables_is_refused(backend, make):
    for _ in range(2):
        with pytest.raises(TypeError, match="grad_fn must accept a keyword argument 'variables'"):
            _grads(make)


def test_grad_fn_without_variables_needs_none_when_no_variable_is_used(backend):
    @gt.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 2.0

    x = gt.constant([1.0, 2.0])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    np.testing.assert_allclose(np.asarray(tape.gradient(y, x).numpy()), [2.0, 2.0])
