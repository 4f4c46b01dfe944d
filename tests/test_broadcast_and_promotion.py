"""Undoing broadcasting and dtype promotion on the gradient path (issue 11, item 3).

* Every differentiable binary op of the registry, on its domain's cases at
  ``domains.BROADCAST_SHAPES`` (``(2, 1, 3)`` with ``(4, 1)`` and the mirror: broadcasting that both
  adds a leading axis and stretches size-1 axes), on every backend:

  - first order on the native path (nothing else records): ``tests/test_gradients.py``, and again
    inside the second-order check here;
  - first order on the recorded path (an outer tape watching the inputs records the backward walk,
    so the Tensor rules run and broadcasting is undone on gradtape tensors) against finite
    differences;
  - second order (``testing.check_case(order=2)``: nested tapes, the inner walk recorded and the
    outer one native) against finite differences of the first-order gradient.

* Promotion: element-wise binary ops cast mixed inputs to the promoted dtype with a recorded
  ``astype``, so each source's gradient has the source's own dtype and shape.  float32 with float64
  tensors (each broadcast against the other, each in either dtype), a float32 ``Variable`` beside a
  float64 tensor, NumPy float64 arrays, int64 tensors and Python scalars (float and complex) beside
  float32 tensors; gradient values and dtypes at first order (native and recorded) and second order,
  against closed forms in float64 NumPy (broadcasting undone by an index loop, independent of
  gradtape's axis arithmetic).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import gradtape as gt
from gradtape import testing
from gradtape.core import domains
from gradtape.core import registry


def _rng(*parts):
    """A generator seeded by the test's identity: the same numbers on every run and backend."""
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


# ---------------------------------------------------------------------------------------- registry
def _broadcast_params():
    out = []
    for op in registry.ops():
        if op.chapter == "user" or not op.differentiable or op.grad is None:
            continue
        for i, case in enumerate(domains.op_cases(op)):
            if case.kwargs or not all(isinstance(a, domains.Arg) for a in case.args):
                continue
            if tuple(a.shape for a in case.args) in domains.BROADCAST_SHAPES:
                out.append(pytest.param(op.name, i, id=f"{op.name}-{i}-{case!r}"))
    return out


BROADCAST_CASES = _broadcast_params()


def _case(name, i):
    op = registry.get_op(name)
    return op, domains.op_cases(op)[i]


def test_binary_domains_include_the_broadcast_shapes():
    """Every op sampled from a pair of samplers (those pairs give the ((2, 1), (1, 3)) case) is also
    sampled at both ``BROADCAST_SHAPES`` pairs, each argument from its own sampler, so the op's value
    constraints (NONZERO, POSITIVE ...) hold there too."""
    pairs = 0
    for op in registry.ops():
        shapes = {}
        for c in domains.op_cases(op):
            if len(c.args) == 2 and not c.kwargs and all(isinstance(a, domains.Arg) for a in c.args):
                key = tuple(repr(a.sampler) for a in c.args)
                shapes.setdefault(key, set()).add(tuple(a.shape for a in c.args))
        for key, got in shapes.items():
            if ((2, 1), (1, 3)) in got:
                pairs += 1
                for pair in domains.BROADCAST_SHAPES:
                    assert pair in got, (op.name, key, pair)
    assert pairs >= 40
    divide = [
        c
        for c in domains.op_cases(registry.get_op("divide"))
        if tuple(a.shape for a in c.args) in domains.BROADCAST_SHAPES
    ]
    assert sorted(repr(c.args[1].sampler) for c in divide) == [
        "NONZERO",
        "NONZERO",
        "NONZERO_complex",
        "NONZERO_complex",
    ]


@pytest.mark.parametrize("name,i", BROADCAST_CASES)
def test_broadcast_case_first_order_on_the_recorded_path(backend, name, i):
    """The gradient computed while an outer tape records the walk matches finite differences
    (shape, dtype and values)."""
    op, case = _case(name, i)
    rng = _rng(name, i, "recorded")
    values, kwargs = case.draw(rng)
    leaves, flags, rebuild = testing.case_leaves(case, values)
    leaves = [
        a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) if a.dtype.kind in "fc" else a for a in leaves
    ]
    diff = [k for k, (f, a) in enumerate(zip(flags, leaves)) if f and a.dtype.kind in "fc"]

    def outputs(arrays):
        ts = [gt.asarray(a, backend=backend) for a in arrays]
        return ts, testing.flat_outputs(testing.case_outputs(case, op.public(*rebuild(ts), **kwargs)))

    _, ys = outputs(leaves)
    fouts = [k for k, y in enumerate(ys) if y.dtype.differentiable]
    ws = []
    for k in fouts:
        w = rng.standard_normal(ys[k].shape)
        ws.append(w + 1j * rng.standard_normal(ys[k].shape) if ys[k].dtype.is_complex else w)

    def loss(*arrays):
        _, ys_ = outputs(arrays)
        return sum(float(np.real(np.sum(np.conj(w) * ys_[k].numpy()))) for k, w in zip(fouts, ws))

    ts = [gt.asarray(a, backend=backend) for a in leaves]
    xs = [ts[k] for k in diff]
    with gt.GradientTape() as outer:
        outer.watch(xs)
        with gt.GradientTape() as tape:
            tape.watch(xs)
            ys = testing.flat_outputs(testing.case_outputs(case, op.public(*rebuild(ts), **kwargs)))
        targets = [ys[k] for k in fouts]
        wts = [gt.astype(gt.asarray(w, backend=backend), y.dtype) for w, y in zip(ws, targets)]
        gs = tape.gradient(targets, xs, output_gradients=wts)
    num = testing.numeric_gradient(loss, leaves, wrt=diff)
    for k, x, g in zip(diff, xs, gs):
        assert g is not None, f"argument {k}: no gradient"
        assert g.shape == x.shape and g.dtype == x.dtype, (k, g.shape, x.shape, g.dtype, x.dtype)
        np.testing.assert_allclose(g.numpy(), num[k], rtol=1e-6, atol=1e-7, err_msg=f"argument {k}")


@pytest.mark.parametrize("name,i", BROADCAST_CASES)
def test_broadcast_case_second_order_matches_finite_differences(backend, name, i):
    op, case = _case(name, i)
    report = testing.check_case(op, case, backend, _rng(name, i, 2), order=2)
    assert report.passed, str(report)


# ---------------------------------------------------------------------------------------- promotion
PATHS = ["native", "recorded", "second"]


def _sum_to(g, shape):
    """``g`` summed back to ``shape`` (the adjoint of broadcasting ``shape`` to ``g.shape``), by an
    index loop: independent of gradtape's axis arithmetic."""
    out = np.zeros(shape, dtype=g.dtype)
    lead = g.ndim - len(shape)
    for idx in np.ndindex(*g.shape):
        out[tuple(0 if n == 1 else j for j, n in zip(idx[lead:], shape))] += g[idx]
    return out


def _grid(rng, shape, lo=-2.0, hi=2.0):
    """Values in [lo, hi] on a grid of 1/8: exact in float32, so float32 and float64 inputs hold the
    same numbers."""
    return np.round(rng.uniform(lo, hi, size=shape) * 8) / 8


def _watchable(srcs):
    return [s for s in srcs if not isinstance(s, gt.Variable)]  # a trainable variable is watched when read


def _gradients(f, srcs, w, path, vs=None, out_dtype=None):
    """First-order gradients of ``sum(w * f(*srcs))`` (``path`` 'native': nothing else records;
    'recorded': an outer tape records the walk), or for ``path`` 'second' the gradients of
    ``M = sum_k sum(v_k * g_k)``, ``g_k`` those first-order gradients, through nested tapes."""

    def first():
        with gt.GradientTape() as tape:
            tape.watch(_watchable(srcs))
            y = f(*srcs)
        if out_dtype is not None:
            assert y.dtype == out_dtype, (y.dtype, out_dtype)
        return tape.gradient(y, srcs, output_gradients=gt.astype(gt.asarray(w), y.dtype))

    if path == "native":
        return first()
    with gt.GradientTape() as outer:
        outer.watch(_watchable(srcs))
        gs = first()
        if path == "recorded":
            return gs
        m = None
        for v, g in zip(vs, gs):
            term = gt.sum(gt.astype(gt.asarray(v), g.dtype) * g)
            m = term if m is None else m + term
    return outer.gradient(m, srcs)


def _check(gs, srcs, want, tol):
    assert len(gs) == len(srcs)
    for k, (s, g, e) in enumerate(zip(srcs, gs, want)):
        assert g is not None, f"source {k}: no gradient"
        assert g.dtype == s.dtype, f"source {k}: gradient dtype {g.dtype} != source dtype {s.dtype}"
        assert g.shape == s.shape, f"source {k}: gradient shape {g.shape} != source shape {s.shape}"
        assert g.backend == s.backend
        t = tol[s.dtype.name] if isinstance(tol, dict) else tol
        np.testing.assert_allclose(g.numpy(), e, rtol=t, atol=t, err_msg=f"source {k} ({s.dtype})")


def _xyy(x, y):
    return x * y * y


def _xyy_expected(X, Y, W, Vx, Vy):
    """Gradients of ``sum(W * X * Y**2)`` (broadcast) and of ``M = sum(Vx gx) + sum(Vy gy)``."""
    shape = np.broadcast_shapes(X.shape, Y.shape)
    Xb, Yb, Vxb, Vyb = (np.broadcast_to(a, shape) for a in (X, Y, Vx, Vy))
    g = [_sum_to(W * Yb * Yb, X.shape), _sum_to(2 * W * Xb * Yb, Y.shape)]
    h = [_sum_to(2 * W * Vyb * Yb, X.shape), _sum_to(2 * W * Vxb * Yb + 2 * W * Vyb * Xb, Y.shape)]
    return g, h


# promoted in float64: the float32 source's gradient is rounded once, when it is cast back
_TOL = {"float32": 1e-6, "float64": 1e-12}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float64", "float32")], ids="-".join)
@pytest.mark.parametrize("shapes", domains.BROADCAST_SHAPES, ids=str)
def test_mixed_float_tensors_broadcast(backend, shapes, dtypes, path):
    """``x * y * y`` for a float32 and a float64 tensor broadcast against each other: the result is
    float64, each gradient has its source's dtype and shape."""
    rng = _rng("mixed", shapes, dtypes, path)
    X, Y = _grid(rng, shapes[0]), _grid(rng, shapes[1])
    out = np.broadcast_shapes(X.shape, Y.shape)
    W, Vx, Vy = _grid(rng, out), _grid(rng, X.shape), _grid(rng, Y.shape)
    x, y = gt.constant(X, dtype=dtypes[0]), gt.constant(Y, dtype=dtypes[1])
    gs = _gradients(_xyy, [x, y], W, path, [Vx, Vy], out_dtype=gt.float64)
    g, h = _xyy_expected(X, Y, W, Vx, Vy)
    _check(gs, [x, y], h if path == "second" else g, _TOL)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("variable_first", [True, False], ids=["variable-x", "variable-y"])
def test_float32_variable_with_float64_tensor(backend, variable_first, path):
    """A float32 ``Variable`` (watched when read) times a float64 tensor, broadcast: the variable's
    gradient is float32 of its shape, the tensor's float64."""
    rng = _rng("variable", variable_first, path)
    shapes = ((4, 1), (2, 1, 3)) if variable_first else ((2, 1, 3), (4, 1))  # the variable is (4, 1)
    X, Y = _grid(rng, shapes[0]), _grid(rng, shapes[1])
    out = np.broadcast_shapes(X.shape, Y.shape)
    W, Vx, Vy = _grid(rng, out), _grid(rng, X.shape), _grid(rng, Y.shape)
    if variable_first:
        x, y = gt.Variable(X, dtype=gt.float32), gt.constant(Y, dtype=gt.float64)
    else:
        x, y = gt.constant(X, dtype=gt.float64), gt.Variable(Y, dtype=gt.float32)
    gs = _gradients(_xyy, [x, y], W, path, [Vx, Vy], out_dtype=gt.float64)
    g, h = _xyy_expected(X, Y, W, Vx, Vy)
    _check(gs, [x, y], h if path == "second" else g, _TOL)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("other", ["numpy-float64", "int64"])
def test_float32_tensor_with_other_constants_broadcast(backend, other, path):
    """``x * x * c`` for a float32 source ``x`` of shape (4, 1) and a constant ``c`` of shape
    (2, 1, 3): a float64 NumPy array (the result is float64) or an int64 tensor (float32)."""
    rng = _rng("constant", other, path)
    X, C = _grid(rng, (4, 1)), np.round(rng.uniform(-3, 3, size=(2, 1, 3)))
    out = np.broadcast_shapes(X.shape, C.shape)
    W, V = _grid(rng, out), _grid(rng, X.shape)
    x = gt.constant(X, dtype=gt.float32)
    if other == "int64":
        c, out_dtype, tol = gt.constant(C.astype(np.int64)), gt.float32, 1e-5
    else:
        c, out_dtype, tol = C, gt.float64, 1e-6
    gs = _gradients(lambda x_: x_ * x_ * c, [x], W, path, [V], out_dtype=out_dtype)
    Xb, Cb, Vb = (np.broadcast_to(a, out) for a in (X, C, V))
    want = _sum_to(2 * W * Vb * Cb, X.shape) if path == "second" else _sum_to(2 * W * Xb * Cb, X.shape)
    _check(gs, [x], [want], tol)


_SCALAR_FUNCTIONS = {
    # f(x), f'(x), f''(x): Python floats beside a float32 tensor keep it float32
    "float": (
        lambda x: 2.5 * x * x - x / 4.0 + 1.0 + 3.0 * x**2 + (0.5 - x) * 2,
        lambda X: 11.0 * X - 2.25,
        lambda X: np.full_like(X, 11.0),
    ),
    # a Python complex gives complex64; the real source's gradient stays real float32
    "complex": (
        lambda x: gt.real((x * (1 + 2j)) * gt.conj(x * (1 + 2j))) + 0.5 * x,
        lambda X: 10.0 * X + 0.5,
        lambda X: np.full_like(X, 10.0),
    ),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", sorted(_SCALAR_FUNCTIONS))
def test_python_scalars_with_float32_tensor(backend, kind, path):
    f, d1, d2 = _SCALAR_FUNCTIONS[kind]
    rng = _rng("scalar", kind, path)
    X, W, V = _grid(rng, (2, 3)), _grid(rng, (2, 3)), _grid(rng, (2, 3))
    x = gt.constant(X, dtype=gt.float32)
    gs = _gradients(f, [x], W, path, [V], out_dtype=gt.float32)
    want = W * V * d2(X) if path == "second" else W * d1(X)
    _check(gs, [x], [want], 2e-5)
