"""Gradients across frameworks (issue 25, items 1-5): ``gt.interop.to_torch`` / ``to_jax`` / ``to_tf``
and ``from_torch`` / ``from_jax``.

Every function of :data:`FUNCTIONS` (element-wise compositions, reductions, linear algebra, softmax and
logsumexp, SciPy's and scikit-learn's array-API functions, unmodified) is run from torch and from JAX
on the gradtape backend under test, in float64, and checked by the other library's own tools:
``torch.autograd.gradcheck`` and ``gradgradcheck`` (the double backward crosses back into gradtape), and
``jax.test_util.check_grads(order=2)`` (also under ``jax.jit`` and ``jax.vmap``).  The reverse crossings
are compared with torch's and JAX's own gradients, to second order, and pass ``gradtape check``.
"""

from __future__ import annotations

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # read once, when SciPy is first imported

import dataclasses
import gc
import json
import subprocess
import sys
import weakref
import textwrap
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optree
import pytest
import scipy.special
import scipy.stats
import sklearn
import sklearn.metrics.pairwise as skpair
import sklearn.preprocessing
import sklearn.utils.extmath
import torch
from jax.test_util import check_grads

import gradtape as gt
from gradtape.cli import main

jax.config.update("jax_enable_x64", True)


@dataclasses.dataclass
class Fn:
    fn: Callable
    shapes: list
    lo: float = -1.0
    hi: float = 1.0
    sklearn: bool = False  # runs with sklearn's array_api_dispatch

    def __call__(self, *xs):
        if self.sklearn:
            with sklearn.config_context(array_api_dispatch=True):
                return self.fn(*xs)
        return self.fn(*xs)

    def inputs(self, seed=0):
        rng = np.random.default_rng(seed)
        return [rng.uniform(self.lo, self.hi, s) for s in self.shapes]


def _spd(a):
    return a @ a.mT + 3.0 * gt.eye(a.shape[-1], dtype=a.dtype)


#: name -> function of gradtape tensors (written for gradtape / the Array API only)
FUNCTIONS = {
    # element-wise compositions
    "sin*exp": Fn(lambda x: gt.sin(x) * gt.exp(x), [(3,)]),
    "tanh(x*y)+x/y": Fn(lambda x, y: gt.tanh(x * y) + x / y, [(2, 3), (2, 3)], lo=0.5, hi=2.0),
    "log1p(x^2)*cos": Fn(lambda x: gt.log1p(x**2) * gt.cos(x), [(4,)]),
    "sqrt(x^2+y^2)": Fn(lambda x, y: gt.sqrt(x * x + y * y), [(3,), (3,)], lo=0.3, hi=1.5),
    "broadcast x*y": Fn(lambda x, y: gt.sigmoid(x[:, None] * y[None, :]), [(2,), (3,)]),
    # reductions
    "sum of squares": Fn(lambda x: gt.sum(x**2, axis=1), [(2, 3)]),
    "mean and max": Fn(lambda x: (gt.mean(x), gt.max(x, axis=0)), [(3, 2)]),
    "prod": Fn(lambda x: gt.prod(x, axis=0), [(3, 2)], lo=0.5, hi=1.5),
    "cumulative_sum": Fn(lambda x: gt.cumulative_sum(x, axis=0), [(4,)]),
    # linear algebra
    "matmul": Fn(lambda a, b: a @ b, [(2, 3), (3, 2)]),
    "solve": Fn(lambda a, b: gt.linalg.solve(_spd(a), b), [(3, 3), (3, 2)]),
    "det": Fn(lambda a: gt.linalg.det(_spd(a)), [(3, 3)]),
    "inv": Fn(lambda a: gt.linalg.inv(_spd(a)), [(2, 2)]),
    "cholesky": Fn(lambda a: gt.linalg.cholesky(_spd(a)), [(3, 3)]),
    "vector_norm": Fn(lambda x: gt.linalg.vector_norm(x, axis=-1), [(2, 3)], lo=0.2),
    # softmax / logsumexp
    "softmax": Fn(lambda x: gt.nn.softmax(x, axis=-1), [(2, 3)]),
    "logsumexp": Fn(lambda x: gt.math.reduce_logsumexp(x, axis=0), [(3, 2)]),
    # SciPy, unmodified (SCIPY_ARRAY_API=1)
    "scipy.special.logsumexp": Fn(lambda x: scipy.special.logsumexp(x, axis=1), [(2, 3)]),
    "scipy.special.softmax": Fn(lambda x: scipy.special.softmax(x, axis=0), [(3, 2)]),
    "scipy.special.xlogy": Fn(lambda x, y: scipy.special.xlogy(x, y), [(3,), (3,)], lo=0.2, hi=2.0),
    "scipy.special.expit": Fn(lambda x: scipy.special.expit(x), [(4,)]),
    "scipy.special.entr": Fn(lambda x: scipy.special.entr(x), [(4,)], lo=0.1, hi=2.0),
    "scipy.stats.zscore": Fn(lambda x: scipy.stats.zscore(x, axis=0), [(4, 2)]),
    "scipy.stats.skew": Fn(lambda x: scipy.stats.skew(x, axis=1), [(2, 5)]),
    # scikit-learn, unmodified (array_api_dispatch=True)
    "sklearn rbf_kernel": Fn(lambda x: skpair.rbf_kernel(x, gamma=0.3), [(3, 2)], sklearn=True),
    "sklearn euclidean_distances": Fn(
        lambda x, y: skpair.euclidean_distances(x, y), [(2, 3), (2, 3)], sklearn=True, lo=-2.0, hi=2.0
    ),
    "sklearn MinMaxScaler": Fn(lambda x: sklearn.preprocessing.MinMaxScaler().fit_transform(x), [(4, 2)], sklearn=True),
    "sklearn extmath.softmax": Fn(lambda x: sklearn.utils.extmath.softmax(x), [(2, 3)], sklearn=True),
}


def _numpy_value(case, arrays):
    """The function on the numpy backend: what every crossing must return."""
    with gt.use_backend("numpy"):
        out = case(*[gt.asarray(a) for a in arrays])
    return [np.asarray(o.numpy()) for o in (out if isinstance(out, tuple) else (out,))]


def _assert_values(case, arrays, got):
    want = _numpy_value(case, arrays)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------- to_torch
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_to_torch_gradcheck_and_gradgradcheck(backend, name):
    case = FUNCTIONS[name]
    arrays = case.inputs()
    f = gt.interop.to_torch(case, backend=backend)
    xs = tuple(torch.tensor(a, requires_grad=True) for a in arrays)
    _assert_values(case, arrays, tuple(o.detach() for o in _tuple(f(*xs))))
    assert torch.autograd.gradcheck(f, xs)
    assert torch.autograd.gradgradcheck(f, xs)


def _tuple(y):
    return y if isinstance(y, tuple) else (y,)


def test_to_torch_gradient_equals_torch_func_and_third_order(backend):
    """The gradient and the Hessian of a crossing equal torch.func's of the same function in torch;
    a third derivative crosses a third time."""
    f = gt.interop.to_torch(lambda x: gt.sum(gt.sin(x) * gt.exp(x)), backend=backend)
    x = torch.tensor([0.3, -0.8, 1.2], dtype=torch.float64)
    native = lambda x: torch.sum(torch.sin(x) * torch.exp(x))
    torch.testing.assert_close(torch.func.grad(f)(x), torch.func.grad(native)(x))
    torch.testing.assert_close(torch.autograd.functional.hessian(f, x), torch.func.hessian(native)(x))
    xr = x.clone().requires_grad_()
    (g,) = torch.autograd.grad(f(xr), xr, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), xr, create_graph=True)
    (t,) = torch.autograd.grad(h.sum(), xr)
    xn = x.clone().requires_grad_()
    (gn,) = torch.autograd.grad(native(xn), xn, create_graph=True)
    (hn,) = torch.autograd.grad(gn.sum(), xn, create_graph=True)
    (tn,) = torch.autograd.grad(hn.sum(), xn)
    torch.testing.assert_close(t, tn)


def test_to_torch_under_torch_func_vmap_jacrev_and_grad_of_vmap(backend):
    """torch.func.vmap over a crossing (one crossing per element, the vmap rule): vmap(grad(f)),
    jacrev, jacrev of jacrev (jacrev vmaps the backward, which crosses again) and grad of vmap equal
    torch.func's of the same function in torch; an integer output is stacked as it is."""
    f = gt.interop.to_torch(lambda x, y: gt.sum(gt.sin(x) * y), backend=backend)
    native = lambda x, y: torch.sum(torch.sin(x) * y)
    x = torch.linspace(-1.0, 1.0, 12, dtype=torch.float64).reshape(4, 3)
    y = torch.tensor([1.0, 2.0, -3.0], dtype=torch.float64)
    fn = torch.func
    for tr in (lambda h: fn.vmap(fn.grad(h), in_dims=(0, None)), lambda h: fn.vmap(h, in_dims=(0, None))):
        torch.testing.assert_close(tr(f)(x, y), tr(native)(x, y))
    torch.testing.assert_close(fn.jacrev(f, argnums=(0, 1))(x[1], y), fn.jacrev(native, argnums=(0, 1))(x[1], y))
    torch.testing.assert_close(fn.jacrev(fn.jacrev(f))(x[1], y), fn.hessian(native)(x[1], y))
    grad_of_vmap = fn.grad(lambda x: fn.vmap(f, in_dims=(0, None))(x, y).sum())(x)
    torch.testing.assert_close(grad_of_vmap, torch.cos(x) * y)
    g = gt.interop.to_torch(lambda x: (gt.sin(x), gt.astype(x > 0.0, gt.int64)), backend=backend)
    s, m = fn.vmap(g)(x)
    torch.testing.assert_close(s.cpu(), torch.sin(x))
    assert m.dtype == torch.int64 and m.cpu().tolist() == (x > 0.0).long().tolist()


def test_to_torch_an_in_place_change_of_its_output_or_input_is_torchs_error_not_a_wrong_gradient(backend):
    """exp's rule reads its output, sin's its input: changed in place, the gradient would be wrong.
    The crossing's outputs are views made inside a custom Function, which torch refuses to change in
    place; its inputs are saved for backward, whose versions torch checks."""
    f = gt.interop.to_torch(gt.exp, backend=backend)
    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    y = f(x)
    with pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
        y.add_(1.0)
    # an input changed in place after the forward (sin's rule reads it): torch's version check
    y = gt.interop.to_torch(gt.sin, backend=backend)(x)
    with torch.no_grad():
        x.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def _updates_its_input_in_place(x, y):
    x *= x  # (gradtape's in-place update: a recorded functional one, x becomes a new tensor)
    x[0] = x[0] * y[0]
    return gt.sin(x) * y


def _updates_its_input_in_place_native(xp, x, y):
    x = x * x
    x = xp.concatenate([x[:1] * y[:1], x[1:]])
    return xp.sin(x) * y


def test_crossings_differentiate_a_function_that_updates_its_input_in_place(backend):
    """``x *= x`` inside the function gives the gradtape Tensor a new identity: the gradient torch and
    JAX ask for is with respect to the value they passed, not the updated one (it was the updated
    value's, silently: 1 where 2x was right); to second order, equal to the native functions'."""
    xs = (np.array([0.3, -0.7, 1.1]), np.array([1.5, 0.2, -0.4]))
    f = gt.interop.to_torch(_updates_its_input_in_place, backend=backend)
    tx = tuple(torch.tensor(a, requires_grad=True) for a in xs)
    native = lambda x, y: _updates_its_input_in_place_native(torch, x, y)
    torch.testing.assert_close(
        torch.func.jacrev(f, argnums=(0, 1))(*tx), torch.func.jacrev(native, argnums=(0, 1))(*tx), check_device=False
    )
    assert torch.autograd.gradcheck(f, tx) and torch.autograd.gradgradcheck(f, tx)
    j = gt.interop.to_jax(_updates_its_input_in_place, backend=backend)
    jx = tuple(jnp.asarray(a) for a in xs)
    jn = lambda x, y: _updates_its_input_in_place_native(jnp, x, y)
    np.testing.assert_allclose(jax.jacrev(j, argnums=(0, 1))(*jx), jax.jacrev(jn, argnums=(0, 1))(*jx), rtol=1e-12)
    check_grads(j, jx, order=2, modes=["rev"])


def test_to_torch_an_output_nothing_uses_is_not_walked_back(backend):
    """torch gives None, not zeros, for an output of several that nothing downstream uses
    (``set_materialize_grads(False)``): the backward walks only the used outputs' part of the
    function; the double backward (the VJP crossing) takes zeros for it and equals torch's own."""
    walked = []

    @gt.custom_gradient
    def exp_counted(x):
        y = gt.exp(x)

        def grad(dy):
            walked.append(1)
            return dy * y

        return y, grad

    f = gt.interop.to_torch(lambda x: (gt.sin(x), exp_counted(x)), backend=backend)
    x = torch.tensor([0.3, -0.5], dtype=torch.float64, requires_grad=True)
    s, e = f(x)
    s.sum().backward(retain_graph=True)
    torch.testing.assert_close(x.grad, torch.cos(x.detach()), check_device=False)
    assert walked == []
    e.sum().backward()
    assert walked == [1]
    s, _ = f(x)
    (g,) = torch.autograd.grad(s.sum(), x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x)
    torch.testing.assert_close(h, -torch.sin(x.detach()), check_device=False)
    assert torch.autograd.gradgradcheck(lambda x: f(x)[0], (x,))


def test_to_torch_pytrees_integers_and_non_array_arguments(backend):
    def fn(params, x, *, scale, index):
        out = {"y": gt.sum(params["w"] * x + params["b"]) * scale, "n": gt.argmax(x)}
        return out, x[index]

    f = gt.interop.to_torch(fn, backend=backend)
    w = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    x = torch.tensor([0.1, 0.7, 0.2], dtype=torch.float64)
    out, x1 = f({"w": w, "b": b}, x, scale=2.0, index=torch.tensor(1))
    assert out["n"].item() == 1 and not out["n"].requires_grad and float(x1.detach()) == pytest.approx(0.7)
    out["y"].backward()
    torch.testing.assert_close(w.grad, 2.0 * x)
    torch.testing.assert_close(b.grad, torch.tensor(6.0, dtype=torch.float64))


def test_to_torch_shares_memory_on_the_torch_and_numpy_backends(backend):
    seen = {}

    def fn(x):
        seen["native"] = x.native
        return x * 2.0

    x = torch.arange(4.0, dtype=torch.float64)
    gt.interop.to_torch(fn, backend=backend)(x)
    native = seen["native"]
    if backend == "torch":
        assert native is x
    elif backend in ("numpy", "array_api_strict"):
        host = native if backend == "numpy" else np.from_dlpack(native)
        assert host.__array_interface__["data"][0] == x.data_ptr()
    elif backend == "jax":  # JAX shares an aligned CPU buffer; a copy would not see the write below
        x[0] = 7.0
        assert float(native[0]) in (0.0, 7.0)


def test_to_torch_double_backward_beside_an_integer_input(backend):
    """create_graph=True through a function with an integer input: the backward crosses again (its
    VJP), which has no gradient for the integer input and must not hand torch a None output (it was
    a TypeError); the second derivative equals torch's own."""
    f = gt.interop.to_torch(lambda x, i: gt.sin(x) * gt.astype(i, x.dtype), backend=backend)
    x = torch.tensor([0.3, 0.4], dtype=torch.float64, requires_grad=True)
    i = torch.tensor([1, 2])
    (g,) = torch.autograd.grad(f(x, i).sum(), x, create_graph=True)
    torch.testing.assert_close(g, torch.cos(x) * i, check_device=False)
    (h,) = torch.autograd.grad(g.sum(), x)
    torch.testing.assert_close(h, -torch.sin(x.detach()) * i, check_device=False)
    torch.autograd.gradgradcheck(lambda x: f(x, i), (x,))


def test_to_torch_a_non_tensor_output_is_an_error_naming_it(backend):
    f = gt.interop.to_torch(lambda x: (x * 2.0, "label"), backend=backend)
    with pytest.raises(TypeError, match=r"to_torch: output 1 of the function is str 'label'.*gt.asarray"):
        f(torch.ones(2, dtype=torch.float64))


def test_to_torch_inputs_that_need_no_gradient_record_nothing(backend):
    f = gt.interop.to_torch(lambda x: gt.exp(x), backend=backend)
    y = f(torch.ones(2, dtype=torch.float64))
    assert not y.requires_grad and y.grad_fn is None
    torch.testing.assert_close(y, torch.exp(torch.ones(2, dtype=torch.float64)))


# ------------------------------------------------------------------------------------------------ to_jax
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_to_jax_check_grads_order_2(backend, name):
    case = FUNCTIONS[name]
    arrays = case.inputs()
    f = gt.interop.to_jax(case, backend=backend)
    xs = tuple(jnp.asarray(a) for a in arrays)
    _assert_values(case, arrays, _tuple(f(*xs)))
    check_grads(f, xs, order=2, modes=["rev"])


def test_to_jax_eager_runs_the_forward_once_and_keeps_its_tape_for_the_backward(backend):
    """Eagerly (concrete values) jax.vjp of a crossing runs the function once: the backward walks the
    forward's tape (no second forward), as often as the pullback is called; the tape lives as long as
    the pullback and is freed with it, without the garbage collector."""
    calls, made = [], []

    def fn(x, y):
        calls.append(1)
        out = gt.sin(x) * y
        made.append(weakref.ref(out))
        return out

    f = gt.interop.to_jax(fn, backend=backend)
    x, y, g = jnp.array([0.3, -0.7, 1.1]), jnp.array([1.5, 0.2, -0.4]), jnp.array([1.0, 2.0, 3.0])
    gc.disable()
    try:
        out, pull = jax.vjp(f, x, y)
        assert len(calls) == 1 and made[0]() is not None  # (the tape keeps the forward's tensors)
        for scale in (1.0, 2.0):  # a pullback may be called again
            gx, gy = pull(g * scale)
            np.testing.assert_allclose(gx, jnp.cos(x) * y * g * scale, rtol=1e-12)
            np.testing.assert_allclose(gy, jnp.sin(x) * g * scale, rtol=1e-12)
        assert len(calls) == 1
        del out, pull
        assert made[0]() is None
    finally:
        gc.enable()


def test_to_jax_eager_pullback_transformed_later_equals_jaxs(backend):
    """A pullback made eagerly (its tape kept) and then transformed: jax.jit of it, and jax.grad
    through it (a traced cotangent: the VJP crosses again, as gradtape's recorded VJP, here run
    eagerly in its turn, with an integer input that gets no gradient)."""
    f = gt.interop.to_jax(lambda x, n: gt.sin(x) * gt.exp(x) * gt.astype(n, x.dtype), backend=backend)
    native = lambda x: jnp.sin(x) * jnp.exp(x) * 2.0
    x, g = jnp.array([0.3, -0.7]), jnp.array([1.0, -2.0])
    pull, pull_native = jax.vjp(lambda x: f(x, jnp.array(2)), x)[1], jax.vjp(native, x)[1]
    np.testing.assert_allclose(jax.jit(pull)(g)[0], pull_native(g)[0], rtol=1e-12)
    loss = lambda p: lambda g: jnp.sum(p(g)[0] ** 3)
    np.testing.assert_allclose(jax.grad(loss(pull))(g), jax.grad(loss(pull_native))(g), rtol=1e-12)


def _scalar_case(x, y):
    return gt.sum(gt.tanh(x) * y**2) + gt.math.reduce_logsumexp(x * y)


def test_to_jax_under_jit_grad_hessian_and_vmap(backend):
    f = gt.interop.to_jax(_scalar_case, backend=backend)
    native = lambda x, y: jnp.sum(jnp.tanh(x) * y**2) + jax.scipy.special.logsumexp(x * y)
    x, y = jnp.array([0.3, -0.7, 1.1]), jnp.array([1.5, 0.2, -0.4])
    np.testing.assert_allclose(jax.jit(f)(x, y), native(x, y), rtol=1e-12)
    check_grads(jax.jit(f), (x, y), order=2, modes=["rev"])
    np.testing.assert_allclose(jax.jit(jax.grad(f))(x, y), jax.grad(native)(x, y), rtol=1e-12)
    hessian = jax.jacrev(jax.jacrev(f))(x, y)  # reverse over reverse: jax.hessian is forward over reverse
    np.testing.assert_allclose(hessian, jax.hessian(native)(x, y), rtol=1e-10, atol=1e-12)
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):  # JAX's own word on custom_vjp
        jax.jvp(f, (x, y), (x, y))
    xb = jnp.stack([x, x + 0.5, x - 0.25])
    want = jax.vmap(jax.grad(native), in_axes=(0, None))(xb, y)
    np.testing.assert_allclose(jax.vmap(jax.grad(f), in_axes=(0, None))(xb, y), want, rtol=1e-12)
    np.testing.assert_allclose(jax.jit(jax.vmap(f, in_axes=(0, None)))(xb, y), jax.vmap(native, (0, None))(xb, y))


def test_to_jax_pytrees_and_integer_arguments(backend):
    def fn(params, x, n):
        return {"loss": gt.sum((params["w"] * x + params["b"]) ** 2) * gt.astype(n, x.dtype), "n": n + 1}

    f = gt.interop.to_jax(fn, backend=backend)
    params = {"w": jnp.array([1.0, 2.0]), "b": jnp.array(0.5)}
    x, n = jnp.array([0.3, -0.2]), jnp.array(3)
    out = f(params, x, n)
    assert int(out["n"]) == 4
    g = jax.grad(lambda p: f(p, x, n)["loss"])(params)
    ref = jax.grad(lambda p: jnp.sum((p["w"] * x + p["b"]) ** 2) * 3.0)(params)
    np.testing.assert_allclose(g["w"], ref["w"], rtol=1e-12)
    np.testing.assert_allclose(g["b"], ref["b"], rtol=1e-12)


def test_to_jax_on_the_jax_backend_is_traced_straight_through():
    """On the jax backend the jitted crossing is one XLA program: no callback in its jaxpr."""
    f = gt.interop.to_jax(_scalar_case, backend="jax")
    x = jnp.array([0.3, -0.7])
    jaxpr = str(jax.make_jaxpr(jax.grad(f))(x, x))
    assert "callback" not in jaxpr
    hosted = str(jax.make_jaxpr(jax.grad(gt.interop.to_jax(_scalar_case, backend="numpy")))(x, x))
    assert "pure_callback" in hosted


def test_to_jax_rejects_an_unknown_vmap_method():
    with pytest.raises(ValueError, match=r"to_jax: vmap_method must be one of"):
        gt.interop.to_jax(_scalar_case, vmap_method="loop")


def test_to_jax_a_non_tensor_output_is_an_error_naming_it(backend):
    f = gt.interop.to_jax(lambda x: (gt.sum(x), 3.0), backend=backend)
    with pytest.raises(TypeError, match=r"to_jax\(.*\): output 1 is float 3.0, not a gradtape Tensor"):
        f(jnp.ones(2))


# ------------------------------------------------------------------------------------- from_torch/jax
def _torch_fn(x, w):
    return torch.tanh(x @ w).sum(dim=0) * torch.exp(x[0, :1])


def _jax_fn(x, w):
    return jnp.tanh(x @ w).sum(axis=0) * jnp.exp(x[0, :1])


NATIVE = {"torch": _torch_fn, "jax": _jax_fn}


def _wrap(kind, fn):
    return gt.interop.from_torch(fn) if kind == "torch" else gt.interop.from_jax(fn)


def _native_derivatives(kind, x, w, v):
    """The gradient of sum(fn * v) and the gradient of the squared norm of that gradient (second order),
    by the native library."""
    if kind == "torch":
        xt, wt = (torch.tensor(a, requires_grad=True) for a in (x, w))
        y = (_torch_fn(xt, wt) * torch.tensor(v)).sum()
        gx, gw = torch.autograd.grad(y, (xt, wt), create_graph=True)
        hx, hw = torch.autograd.grad((gx**2).sum() + (gw**2).sum(), (xt, wt))
        return [a.detach().numpy() for a in (gx, gw, hx, hw)]

    def first(x, w):
        return jax.grad(lambda x, w: jnp.sum(_jax_fn(x, w) * v), argnums=(0, 1))(x, w)

    gx, gw = first(x, w)
    hx, hw = jax.grad(lambda x, w: sum(jnp.sum(g**2) for g in first(x, w)), argnums=(0, 1))(x, w)
    return [np.asarray(a) for a in (gx, gw, hx, hw)]


@pytest.mark.parametrize("kind", ["torch", "jax"])
def test_from_native_gradients_to_second_order_equal_the_native_ones(backend, kind):
    rng = np.random.default_rng(1)
    x, w, v = rng.normal(size=(3, 2)), rng.normal(size=(2, 4)), rng.normal(size=4)
    f = _wrap(kind, NATIVE[kind])
    X, W = gt.constant(x, dtype=gt.float64), gt.constant(w, dtype=gt.float64)
    with gt.GradientTape() as outer:
        outer.watch([X, W])
        with gt.GradientTape() as inner:
            inner.watch([X, W])
            y = f(X, W)
            loss = gt.sum(y * gt.asarray(v))
        gx, gw = inner.gradient(loss, [X, W])
        sq = gt.sum(gx**2) + gt.sum(gw**2)
    hx, hw = outer.gradient(sq, [X, W])
    assert y.backend == backend.split(":")[0] and isinstance(y, gt.Tensor)
    want = _native_derivatives(kind, x, w, v)
    for got, ref in zip((gx, gw, hx, hw), want):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["torch", "jax"])
def test_from_native_pytrees_and_a_torch_module(backend, kind):
    x = np.random.default_rng(2).normal(size=(4, 3))
    X = gt.constant(x, dtype=gt.float64)
    if kind == "torch":
        torch.manual_seed(0)
        # the module lives where the tensors cross to: a GPU backend's tensors reach torch on its GPU
        on_gpu = str(X.device).split(":")[0] in ("cuda", "gpu")
        layer = torch.nn.Linear(3, 2).double().to("cuda" if on_gpu else "cpu")
        f = gt.interop.from_torch(lambda d: {"out": layer(d["x"]).sum(), "x": d["x"]})
        ref = lambda x: layer(x).sum()
    else:
        wj = jnp.asarray(np.random.default_rng(0).normal(size=(3, 2)))
        f = gt.interop.from_jax(lambda d: {"out": jnp.sum(d["x"] @ wj), "x": d["x"]})
        ref = lambda x: jnp.sum(x @ wj)
    with gt.GradientTape() as tape:
        tape.watch(X)
        res = f({"x": X})
    g = tape.gradient(res["out"], X)
    np.testing.assert_allclose(res["x"].numpy(), x)
    if kind == "torch":
        xt = torch.tensor(x, requires_grad=True)
        want = torch.autograd.grad(ref(xt.to(layer.weight.device)), xt)[0].numpy()
    else:
        want = np.asarray(jax.grad(ref)(jnp.asarray(x)))
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)


CHECKED = textwrap.dedent(
    """
    import jax.numpy as jnp
    import torch

    import gradtape as gt

    torch_loss = gt.interop.from_torch(lambda x, y: torch.sin(x) * torch.log1p(y**2) + x * y)
    jax_loss = gt.interop.from_jax(lambda x, y: jnp.sin(x) * jnp.log1p(y**2) + x * y)
    """
)


@pytest.mark.parametrize("which", ["torch_loss", "jax_loss"])
def test_from_native_passes_gradtape_check(tmp_path, capsys, which):
    path = tmp_path / "crossed.py"
    path.write_text(CHECKED)
    rc = main(["check", f"{path}:{which}", "--shape", "3", "--shape", "3", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "all pairs agree" in out


def test_from_torch_higher_order_through_a_function_torch_cannot_differentiate_twice(backend):
    class Once(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x**2 * g

    f = gt.interop.from_torch(Once.apply)
    x = gt.constant([0.5, 2.0], dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sum(f(x))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [0.75, 12.0])  # first order works
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.GradientTape() as inner:
            inner.watch(x)
            y = gt.sum(f(x))
        g = inner.gradient(y, x)  # recorded: torch's graph of the gradient is kept (create_graph)
    np.testing.assert_allclose(g.numpy(), [0.75, 12.0])
    with pytest.raises(NotImplementedError, match=r"from_torch\(vjp of Once.apply\): torch cannot differentiate"):
        outer.gradient(g, x)


def test_from_native_mixed_backends_and_recorded_torch_tensors_are_errors():
    with gt.use_backend("numpy"):
        a = gt.constant([1.0])
    with gt.use_backend("jax"):
        b = gt.constant([2.0])
    with pytest.raises(
        ValueError, match=r"from_torch\(.*\): its gradtape tensors are of two backends, 'numpy' and 'jax'"
    ):
        gt.interop.from_torch(lambda x, y: x + y)(a, b)
    with gt.use_backend("torch"):  # a gradtape tensor whose torch array torch.autograd records
        x = gt.asarray(torch.ones(2, dtype=torch.float64, requires_grad=True))
        assert x.native.requires_grad
        with pytest.raises(TypeError, match=r"from_jax\(.*\): a torch tensor that torch.autograd records"):
            gt.interop.from_jax(lambda x: jnp.sin(x))(x)


def test_from_native_without_gradtape_tensors_is_the_function_itself():
    f = gt.interop.from_torch(torch.sin)
    x = torch.ones(2)
    torch.testing.assert_close(f(x), torch.sin(x))


# ------------------------------------------------------------------------------------------------- to_tf
def test_to_tf_gradient_and_second_order(backend):
    tf = pytest.importorskip("tensorflow", reason="TensorFlow is optional: to_tf is tested where it is installed")
    f = gt.interop.to_tf(lambda x: gt.sum(gt.sin(x) * gt.exp(x)), backend=backend)
    x = tf.constant([0.3, -0.8, 1.2], dtype=tf.float64)
    with tf.GradientTape() as t2:
        t2.watch(x)
        with tf.GradientTape() as t1:
            t1.watch(x)
            y = f(x)
        g = t1.gradient(y, x)
    h = t2.gradient(g, x)
    xs = x.numpy()
    np.testing.assert_allclose(g.numpy(), np.exp(xs) * (np.sin(xs) + np.cos(xs)), rtol=1e-12)
    np.testing.assert_allclose(h.numpy(), 2 * np.exp(xs) * np.cos(xs), rtol=1e-12)


def test_to_torch_leaves_no_reference_cycle(backend):
    """Once torch drops the graph, the crossing's tape and tensors are freed at once, without the
    garbage collector (torch hangs its graph on the returned tensors: they must not be the tape's)."""
    seen = []

    def fn(x):
        y = gt.exp(x)
        seen.append(weakref.ref(y))
        return y

    f = gt.interop.to_torch(fn, backend=backend)
    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    gc.disable()
    try:
        f(x).sum().backward()
        y = f(x)
        del y
        assert [r() for r in seen] == [None, None]
    finally:
        gc.enable()


# ------------------------------------------------------------------- the fast paths of a crossing's call
Pair = __import__("collections").namedtuple("Pair", "a b")


@pytest.mark.parametrize(
    "shape",
    [
        lambda y: y,
        lambda y: (y, y * 2.0),
        lambda y: [y, y * 2.0],
        lambda y: Pair(y, y * 2.0),
        lambda y: {"y": y},
        lambda y: (y, (y * 2.0,)),
        lambda y: (),
    ],
    ids=["one", "tuple", "list", "namedtuple", "dict", "nested", "empty"],
)
def test_crossings_return_the_structure_the_function_returned(backend, shape):
    """One array, a flat tuple (the calls that skip the pytree machinery) and every other structure
    come back as the function returned them, with their gradients, through to_torch and from_torch."""
    want = shape(3.0)
    one = isinstance(want, float)  # (a bare leaf)
    factor = sum(float(leaf) for leaf in optree.tree_leaves(want)) / 3.0
    # positional tensors only (to_torch's fast path), and beside a non-tensor argument (its pytree path)
    for call in (
        lambda x: gt.interop.to_torch(lambda t: shape(gt.sin(t)), backend=backend)(x),
        lambda x: gt.interop.to_torch(lambda t, k: shape(gt.sin(t) * k), backend=backend)(x, 1.0),
    ):
        x = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
        got = call(x)
        assert isinstance(got, torch.Tensor) if one else type(got) is type(want)
        assert optree.tree_structure(got) == optree.tree_structure(want)
        leaves = optree.tree_leaves(got)
        if leaves:
            sum(leaf.sum() for leaf in leaves).backward()
            torch.testing.assert_close(x.grad, factor * torch.cos(x.detach()))
    X = gt.constant([0.5, 1.5], dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(X)
        got = gt.interop.from_torch(lambda t: shape(torch.sin(t)))(X)
        leaves = optree.tree_leaves(got)
        total = sum(gt.sum(leaf) for leaf in leaves) if leaves else None
    assert isinstance(got, gt.Tensor) if one else type(got) is type(want)
    assert optree.tree_structure(got) == optree.tree_structure(want)
    if leaves:
        assert all(isinstance(leaf, gt.Tensor) and leaf.backend == backend.split(":")[0] for leaf in leaves)
        np.testing.assert_allclose(tape.gradient(total, X).numpy(), factor * np.cos([0.5, 1.5]), rtol=1e-12)


def test_to_torch_creates_its_new_tensors_on_its_backend_whichever_is_active(backend):
    """A crossing's function that creates tensors (gt.ones) makes them on the crossing's backend,
    beside its inputs, both where that backend is already the active one (no context entered) and
    where another is."""

    def fn(t):
        return t * gt.ones(t.shape, dtype=t.dtype) + gt.asarray(1.0, dtype=t.dtype)

    f = gt.interop.to_torch(fn, backend=backend)
    other = "torch" if backend.split(":")[0] != "torch" else "numpy"
    for active in (backend, other):
        with gt.use_backend(active):
            x = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
            y = f(x)
            y.sum().backward()
        torch.testing.assert_close(y.detach().cpu(), torch.tensor([1.5, 2.5], dtype=torch.float64))
        torch.testing.assert_close(x.grad, torch.ones(2, dtype=torch.float64))


@pytest.mark.parametrize("kind", ["torch", "jax"])
def test_from_native_a_gradtape_variable_read_inside_is_an_error_naming_it(backend, kind):
    """A native function that computes with a gradtape Variable (not one of its arguments) would lose
    that variable's gradient in the native library: an error naming the crossing and the variable."""
    v = gt.Variable([2.0, 3.0], dtype=gt.float64, name="scale")
    lib = torch.as_tensor if kind == "torch" else jnp.asarray
    to_native = lambda t: lib(np.asarray(t))
    f = _wrap(kind, lambda x: x * to_native(gt.stop_gradient(v * 1.0)))
    x = gt.constant([0.5, 1.5], dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x)
        with pytest.raises(ValueError, match=rf"from_{kind}\(.*\): the function reads the gradtape Variable 'scale"):
            f(x)


def test_the_crossing_benchmark_runs_and_counts_calls(tmp_path):
    """benchmarks/crossing.py (issue 25, item 5) runs: its no-copy check passes, and --calls gives
    every row, the two floors included, with a call count per column (no timing asserted)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tmp_path / "calls.json"
    p = subprocess.run(
        [sys.executable, os.path.join(root, "benchmarks", "crossing.py"), "--calls", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {r["row"]: r for r in json.loads(out.read_text())}
    assert {name.split(" ")[0] for name in rows} == {"to_torch", "to_jax", "from_torch", "from_jax", "(floor)"}
    assert sum(name.startswith("(floor)") for name in rows) == 2  # (the Function and custom_vjp)
    for r in rows.values():
        assert r["crossing_calls"] >= 1 and r["native_calls"] >= 1
    assert "| own cost over its floor | over the side-by-side floor |" in p.stdout
    # every crossing row but the compiled one has its side-by-side cell (the two libraries alternating)
    crossing_rows = [r for name, r in rows.items() if not name.startswith("(floor)") and "jit" not in name]
    assert len(crossing_rows) == 4 and all(r["side_by_side_calls"] for r in crossing_rows)


def test_the_crossing_benchmark_scales_its_target_by_anchors_timed_in_the_same_rounds():
    """benchmarks/crossing.py's timed run (one short round: the figures are not asserted) prints issue
    6's two anchors measured beside the crossings and each crossing against issue 25's target scaled by
    them, a verdict a row."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run(
        [sys.executable, os.path.join(root, "benchmarks", "crossing.py"), "--number", "2", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "| `torch.autograd` | 4.8 µs/op |" in p.stdout and "| `minitape-numpy` | 1.46 µs/op |" in p.stdout
    verdicts = [line for line in p.stdout.splitlines() if "| met |" in line or "| missed |" in line]
    assert {v.split(" ")[1] for v in verdicts} == {"to_torch", "to_jax", "from_torch", "from_jax"}, p.stdout
    # both measures of a crossing row with a side-by-side cell get their verdict
    assert sum(v.count("| met |") + v.count("| missed |") for v in verdicts) == 9, p.stdout


COMPLEX_CASES = {
    "holomorphic": (jnp.sin, torch.sin, gt.sin),
    "complex_to_real": (
        lambda z: jnp.real(z * jnp.conj(z)) * jnp.imag(z),
        lambda z: torch.real(z * torch.conj(z)) * torch.imag(z),
        lambda z: gt.real(z * gt.conj(z)) * gt.imag(z),
    ),
    "not_holomorphic": (
        lambda z: jnp.conj(z) * jnp.exp(z),
        lambda z: torch.conj(z) * torch.exp(z),
        lambda z: gt.conj(z) * gt.exp(z),
    ),
}


@pytest.mark.parametrize("case", list(COMPLEX_CASES))
@pytest.mark.parametrize("kind", ["torch", "jax"])
def test_from_native_complex_gradients_follow_gradtapes_convention(backend, kind, case):
    """Complex gradients through from_torch / from_jax, to second order, equal gradtape's own of the
    same function (TensorFlow's convention: JAX's VJP is its conjugate, so from_jax conjugates)."""
    jf, tf, gf = COMPLEX_CASES[case]
    res = []
    for f in (_wrap(kind, jf if kind == "jax" else tf), gf):
        z = gt.constant([0.1 + 0.2j, 0.3 - 0.1j], dtype=gt.complex128)
        with gt.GradientTape() as outer:
            outer.watch(z)
            with gt.GradientTape() as inner:
                inner.watch(z)
                y = f(z)
                w = gt.sum(gt.real(y * gt.conj(y)) + gt.imag(y))
            g = inner.gradient(w, z)
            s = gt.sum(gt.real(g * gt.conj(g)))
        res.append((g.numpy(), outer.gradient(s, z).numpy()))
    (g, h), (g_ref, h_ref) = res
    np.testing.assert_allclose(g, g_ref, rtol=1e-12)
    np.testing.assert_allclose(h, h_ref, rtol=1e-12)


@pytest.mark.parametrize("case", list(COMPLEX_CASES))
def test_to_jax_complex_gradients_equal_jaxs_to_second_order(backend, case):
    """A complex function through to_jax passes check_grads(order=2) (JAX's own convention), and the
    gradient of a real loss of it equals jax.grad of the same function in JAX."""
    jf, _, gf = COMPLEX_CASES[case]
    f = gt.interop.to_jax(gf, backend=backend)
    z = jnp.array([0.1 + 0.2j, 0.3 - 0.1j])
    check_grads(f, (z,), order=2, modes=["rev"])
    loss = lambda fn: lambda z: jnp.sum(jnp.real(fn(z) * jnp.conj(fn(z))) + jnp.imag(fn(z)))
    np.testing.assert_allclose(jax.grad(loss(f))(z), jax.grad(loss(jf))(z), rtol=1e-12)


@pytest.mark.parametrize("case", list(COMPLEX_CASES))
def test_to_torch_complex_gradients_equal_torchs_to_second_order(backend, case):
    """A complex function through to_torch passes gradcheck and gradgradcheck (torch's convention),
    and the gradient of a real loss of it equals torch.autograd's of the same function in torch (its
    cotangent carries torch's lazy conjugate bit, which DLPack cannot carry to another backend)."""
    _, tf, gf = COMPLEX_CASES[case]
    f = gt.interop.to_torch(gf, backend=backend)
    z = torch.tensor([0.1 + 0.2j, 0.3 - 0.1j], dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(f, (z,)) and torch.autograd.gradgradcheck(f, (z,))

    def loss(fn):
        y = fn(z)
        return torch.sum(torch.real(y * torch.conj(y))) + torch.sum(torch.imag(y) if y.is_complex() else y)

    (got,) = torch.autograd.grad(loss(f), z)
    (want,) = torch.autograd.grad(loss(tf), z)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_from_torch_and_from_jax_inside_gt_function_say_so(backend):
    """A ``from_*`` function cannot run inside ``gt.function`` (its programs record gradtape's ops):
    a NotImplementedError that names the function and what to do, not a conversion error blaming the
    user's code."""
    ft = gt.interop.from_torch(lambda a: torch.tanh(a) ** 2)
    fj = gt.interop.from_jax(lambda a: jnp.tanh(a) ** 2)
    x = gt.constant(np.array([0.1, 0.2]))
    for f, what in ((ft, "from_torch"), (fj, "from_jax")):
        np.testing.assert_allclose(gt.sum(f(x)).numpy(), np.sum(np.tanh([0.1, 0.2]) ** 2), rtol=1e-12)  # eagerly
        with pytest.raises(NotImplementedError, match=rf"{what}\(.*<lambda>\) is called inside gt.function.*eagerly"):
            gt.function(lambda x, f=f: gt.sum(f(x)))(x)
