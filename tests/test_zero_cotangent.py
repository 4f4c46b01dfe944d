"""A zero cotangent gives a zero gradient (docs/conventions.md), on every backend.

* Registry-wide: every differentiable op, over each Case of its domain, with its float inputs moved
  onto their samplers' ``edges`` (all of them, then a mix of edges and ordinary samples), gets zero
  output gradients; every input gradient must be exactly zero, never NaN -- through the Tensor
  rules on gradtape's namespace (an outer tape records the walk) and on the native namespace.  An op that fails is named
  with the case, the inputs and the gradients.
* The masked-branch form ``where(mask, f(x), 0)`` for the element-wise ops: masked elements at their
  edges get 0, the rest a finite gradient.
* The masks are ops with exact rules: ForwardAccumulator (which differentiates a vjp at a zero
  cotangent) and second derivatives where an inner cotangent is exactly 0 match analytic values.
"""

from __future__ import annotations

import math
import warnings
import zlib

import numpy as np
import pytest

import gradtape as gt
from gradtape import testing
from gradtape.core import domains
from gradtape.core import registry

_OPS = [op for op in registry.differentiable_ops() if op.chapter != "user"]


def _rng(*parts):
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def _leaf_args(case):
    """The Args of ``case`` in the order of ``testing.case_leaves``."""
    out = []
    for a in case.args:
        if isinstance(a, domains.Pack):
            out.extend(e for e in a.args if isinstance(e, domains.Arg))
        elif isinstance(a, domains.Arg):
            out.append(a)
    return out


def _on_edges(arg, value, rng, mix):
    """``value`` moved onto ``arg``'s sampler's edges: every element (``mix=False``) or about half of
    them; complex values in their real and imaginary parts.  Other kinds stay as drawn."""
    s = arg.sampler
    if s.kind not in "fc" or not s.edges:
        return value
    edges = np.asarray(s.edges, dtype=np.float64)

    def part(p):
        e = rng.choice(edges, size=p.shape)
        return np.where(rng.random(p.shape) < 0.5, e, p) if mix else e

    if s.kind == "c":
        return (part(value.real) + 1j * part(value.imag)).astype(value.dtype)
    return part(value).astype(value.dtype)


def _variants(op, case, seed):
    """(label, leaves, flags, rebuild, kwargs) for the case at its edges, all and mixed."""
    values, kwargs = case.draw(_rng(op.name, seed))
    leaves, flags, rebuild = testing.case_leaves(case, values)
    args = _leaf_args(case)
    out = []
    for label, mix in (("edges", False), ("mixed", True)):
        rng = _rng(op.name, seed, label)
        moved = [_on_edges(a, v, rng, mix) for a, v in zip(args, leaves)]
        out.append((label, moved, flags, rebuild, kwargs))
    return out


def _run(op, case, leaves, flags, rebuild, kwargs, backend, native):
    """Gradients of the op's differentiable outputs for zero output gradients (None if the op
    rejects these inputs, as it may at its edges: a singular matrix)."""
    ts = [gt.asarray(v, backend=backend) for v in leaves]
    xs = [t for t, f in zip(ts, flags) if f and t.dtype.differentiable]
    if not xs:
        return [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gt.GradientTape(persistent=True) as tape:
            tape.watch(xs)
            try:
                ys = testing.flat_outputs(op.public(*rebuild(ts), **kwargs))
            except ValueError:
                return None, None
        ys = [y for y in ys if y.dtype.differentiable]
        if not ys:
            return xs, []
        zeros = [gt.zeros_like(y) for y in ys]
        if native:
            gs = tape.gradient(ys, xs, output_gradients=zeros)
        else:
            with gt.GradientTape():  # an outer tape records the walk: the Tensor rules run
                gs = tape.gradient(ys, xs, output_gradients=zeros)
    return xs, gs


def _report(op, case, label, path, xs, gs):
    bad = []
    for k, (x, g) in enumerate(zip(xs, gs)):
        if g is not None and not np.all(g.numpy() == 0):
            bad.append(f"  input {k} = {x.numpy()!r}\n  gradient = {g.numpy()!r}")
    if bad:
        return f"{op.name} {case!r} at its {label} ({path}):\n" + "\n".join(bad)
    return None


@pytest.mark.parametrize("name", [op.name for op in _OPS])
def test_zero_cotangent_gives_zero_gradient(backend, name):
    """Every rule of the registry, on both namespaces, at the edges of the op's domain."""
    op = registry.get_op(name)
    failures, evaluated = [], 0
    for i, case in enumerate(domains.op_cases(op)):
        for label, leaves, flags, rebuild, kwargs in _variants(op, case, i):
            paths = ("gradtape namespace", "native namespace") if op.xp_rule else ("gradtape namespace",)
            for path in paths:
                xs, gs = _run(op, case, leaves, flags, rebuild, kwargs, backend, path == "native namespace")
                if xs is None:
                    continue
                evaluated += 1
                msg = _report(op, case, label, path, xs, gs)
                if msg:
                    failures.append(msg)
    assert not failures, (
        f"a zero cotangent gave a non-zero (NaN) gradient in {len(failures)} call(s) of {name}:\n" + "\n".join(failures)
    )
    assert evaluated, f"{name}: every case was rejected at its edges; nothing was checked"


# ---------------------------------------------------------------------------------------- masked branch
def _elementwise_cases(op):
    """The op's cases that are plain calls on float arrays (unary and binary element-wise ops)."""
    if not op.float_out:
        return []
    return [
        c
        for c in domains.op_cases(op)
        if not c.kwargs
        and c.out_map is None
        and all(isinstance(a, domains.Arg) and a.map is None and a.sampler.kind in "fc" for a in c.args)
    ]


_ELEMENTWISE = [op.name for op in _OPS if _elementwise_cases(op)]


def _at_edge(arg, value):
    s = arg.sampler
    if s.kind == "c":
        return np.isin(value.real, s.edges) | np.isin(value.imag, s.edges)
    return np.isin(value, s.edges)


@pytest.mark.parametrize("name", _ELEMENTWISE)
def test_masked_branch_gives_zero_gradient(backend, name):
    """``where(mask, f(x), 0)``, masking the outputs that read an input at an edge: those inputs get
    0, every other input a finite gradient."""
    op = registry.get_op(name)
    failures = []
    for i, case in enumerate(_elementwise_cases(op)):
        label, leaves, _, _, _ = _variants(op, case, i)[1]
        edge = [_at_edge(a, v) for a, v in zip(case.args, leaves)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            xs = [gt.asarray(v, backend=backend) for v in leaves]
            with gt.GradientTape() as tape:
                tape.watch(xs)
                y = op.public(*xs)
                shape = np.broadcast_shapes(*(v.shape for v in leaves))
                hit = np.zeros(shape, dtype=bool)
                for e in edge:
                    hit = hit | np.broadcast_to(e, shape)
                out = gt.where(gt.asarray(~hit, backend=backend), y, 0.0)
            gs = tape.gradient(out, xs)
        for k, (g, e) in enumerate(zip(gs, edge)):
            g = g.numpy()
            if not (np.all(np.isfinite(g)) and np.all(g[np.broadcast_to(e, g.shape)] == 0)):
                failures.append(f"{case!r}: input {k} = {leaves[k]!r}, gradient {g!r}")
    assert not failures, f"{name}, masked at its edges:\n" + "\n".join(failures)


# ---------------------------------------------------------------------------------------- exact masks
_f64 = gt.float64


def _c(v):
    return gt.constant(v, dtype=_f64)


# the rules that mask (or are the masking ops), differentiated forward at ordinary points
_JVP_OPS = [
    "sqrt",
    "log",
    "log1p",
    "log2",
    "log10",
    "pow",
    "divide",
    "reciprocal",
    "exp",
    "expm1",
    "sinh",
    "cosh",
    "asin",
    "acos",
    "atan",
    "asinh",
    "acosh",
    "atanh",
    "atan2",
    "remainder",
    "std",
    "multiply_no_nan",
    "divide_no_nan",
    "xdivy",
]


@pytest.mark.parametrize("name", _JVP_OPS)
def test_forward_mode_sees_the_true_derivative(backend, name):
    """ForwardAccumulator differentiates the vjp at a zero cotangent: its jvp must be the
    derivative (a mask written as ``where(grad == 0, 0, ...)`` would give 0), checked against
    central differences along a random tangent."""
    op = registry.get_op(name)
    case = domains.op_cases(op)[1 if op.float_out else 0]
    values, kwargs = case.draw(_rng(name, "jvp"))
    leaves, flags, rebuild = testing.case_leaves(case, values)
    rng = _rng(name, "tangent")
    tangents = [rng.uniform(-1, 1, np.shape(v)) for v in leaves]
    xs = [_c(v) for v in leaves]
    with gt.ForwardAccumulator(xs, [_c(t) for t in tangents]) as acc:
        y = op.public(*rebuild(xs), **kwargs)
    jvp = acc.jvp(y).numpy()
    h = 1e-6

    def at(s):
        return op.public(*rebuild([_c(v + s * t) for v, t in zip(leaves, tangents)]), **kwargs).numpy()

    np.testing.assert_allclose(jvp, (at(h) - at(-h)) / (2 * h), rtol=1e-6, atol=1e-8)


_HESSIANS = {
    # f, the point where the cotangent reaching the singular op is exactly 0, f'' there
    "sqrt": (lambda x: gt.sqrt(x) * (x - 1), 1.0, 1.0),
    "pow": (lambda x: x**0.5 * (x - 1), 1.0, 1.0),
    "log": (lambda x: gt.log(x) * (x - 1), 1.0, 2.0),
    "reciprocal": (lambda x: gt.reciprocal(x) * (x - 1), 1.0, -2.0),
    "divide": (lambda x: (1.0 / x) * (x - 2), 2.0, -0.5),
    "asin": (lambda x: gt.asin(x) * (x - 0.5), 0.5, 2 / math.sqrt(0.75)),
    "atanh": (lambda x: gt.atanh(x) * (x - 0.5), 0.5, 2 / 0.75),
    "exp": (lambda x: gt.exp(x) * (x - 1), 1.0, 2 * math.e),
    "std": (lambda x: gt.std(x * gt.constant([1.0, 2.0], dtype=_f64)) * (x - 1), 1.0, 1.0),
}


@pytest.mark.parametrize("name", sorted(_HESSIANS))
def test_second_derivative_where_an_inner_cotangent_is_zero(backend, name):
    """``f(x) = g(x) (x - 1)``: at x = 1 the cotangent reaching g is exactly 0, and the second
    derivative still needs g's derivative there (nested tapes)."""
    f, x0, expected = _HESSIANS[name]
    x = _c(x0)
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.GradientTape() as inner:
            inner.watch(x)
            y = gt.sum(f(x))
        g = inner.gradient(y, x)
    np.testing.assert_allclose(outer.gradient(g, x).numpy(), expected, rtol=1e-12)


def test_masked_singular_branch_gives_zero_not_nan(backend):
    """The docs' examples: a masked sqrt/log/pow/reciprocal/asin branch at its singular point, and
    a scale overwritten where it is 0 (scikit-learn's StandardScaler)."""
    x = _c([0.0, 4.0])
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        branches = [gt.where(x > 0, f(x), 0.0) for f in (gt.sqrt, gt.log, lambda t: t**0.5, gt.reciprocal)]
        branches.append(gt.where(x > 0, gt.asin(x / 4 - 1), 0.0))  # asin'(-1) = inf at x = 0
    expected = [[0.0, 0.25], [0.0, 0.25], [0.0, 0.25], [0.0, -1 / 16], [0.0, 0.25]]
    for y, e in zip(branches, expected):
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), e, rtol=1e-12)
    X = _c([[1.0, 5.0], [2.0, 5.0], [4.0, 5.0]])
    with gt.GradientTape() as tape:
        tape.watch(X)
        scale = gt.sqrt(gt.var(X, axis=0))
        scale[scale == 0] = 1.0  # a constant column: 0 / 0, overwritten
        z = (X - gt.mean(X, axis=0)) / scale
        loss = gt.sum(z * _c([[1.0, 2.0]]))
    g = tape.gradient(loss, X).numpy()
    assert np.all(np.isfinite(g)) and np.all(g[:, 1] == 0)


def test_non_zero_cotangent_keeps_inf_and_nan(backend):
    """Where the cotangent is not 0 the singular derivative is the answer: inf (or NaN) as before."""
    x = _c([0.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for f, e in ((gt.sqrt, [np.inf, 0.5]), (gt.log, [np.inf, 1.0]), (lambda t: gt.asin(t), [1.0, np.inf])):
            with gt.GradientTape() as tape:
                tape.watch(x)
                y = f(x)
            np.testing.assert_array_equal(tape.gradient(y, x).numpy(), e)


def test_std_of_constant_values_has_the_least_norm_subgradient(backend):
    """std is a norm of the centred values: at constant values (std = 0) its gradient is 0, as
    nanstd's and hypot's at (0, 0); elsewhere (x - mean) / ((N - correction) std)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for std in (gt.std, gt.nanstd):
            x = _c([2.0, 2.0, 2.0])
            with gt.GradientTape() as tape:
                tape.watch(x)
                y = std(x)
            np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [0.0, 0.0, 0.0])
    z = _c([1.0, 2.0, 4.0])
    with gt.GradientTape() as tape:
        tape.watch(z)
        y = gt.std(z, correction=1)
    zn = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(tape.gradient(y, z).numpy(), (zn - zn.mean()) / (2 * zn.std(ddof=1)), rtol=1e-12)


def test_no_nan_ops(backend):
    """gt.math.multiply_no_nan, divide_no_nan and xdivy: TF's values; their gradients at the masked
    points."""
    a, b = _c([np.inf, 2.0, 0.0]), _c([0.0, 3.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(gt.math.multiply_no_nan(a, b).numpy(), [0.0, 6.0, 0.0])
        np.testing.assert_array_equal(gt.math.divide_no_nan(b, b).numpy(), [0.0, 1.0, 0.0])
        np.testing.assert_array_equal(gt.math.xdivy(b, b).numpy(), [0.0, 1.0, 0.0])
        np.testing.assert_array_equal(gt.math.xdivy(a, b).numpy(), [np.inf, 2 / 3, 0.0])
    x, y = _c([0.0, 2.0]), _c([0.0, 4.0])
    with gt.GradientTape(persistent=True) as tape:
        tape.watch([x, y])
        outs = [gt.math.multiply_no_nan(x, y), gt.math.divide_no_nan(x, y), gt.math.xdivy(x, y + 1.0)]
    want = [([0.0, 4.0], [0.0, 2.0]), ([0.0, 0.25], [0.0, -0.125]), ([1.0, 0.2], [0.0, -0.08])]
    for o, (wx, wy) in zip(outs, want):
        gx, gy = tape.gradient(o, [x, y])
        np.testing.assert_allclose(gx.numpy(), wx, rtol=1e-12)
        np.testing.assert_allclose(gy.numpy(), wy, rtol=1e-12)


_MASKED_SECOND_ORDER = {
    # f, points (the untaken branch's singular point and a point off the domain), a taken point
    "sqrt": (lambda x: gt.where(x > 0, gt.sqrt(x), 0.0), [-1.0, 0.0], 4.0),
    "x ** 0.5": (lambda x: gt.where(x > 0, x**0.5, 0.0), [-1.0, 0.0], 4.0),
    "log": (lambda x: gt.where(x > 0, gt.log(x), 0.0), [-1.0, 0.0], 4.0),
    "1 / x": (lambda x: gt.where(x != 0, 1 / x, 0.0), [0.0], 4.0),
    "reciprocal": (lambda x: gt.where(x != 0, gt.reciprocal(x), 0.0), [0.0], 4.0),
    "asin": (lambda x: gt.where(x < 1, gt.asin(x), 0.0), [1.0, 2.0], 0.5),
    "sqrt ** 2": (lambda x: gt.where(x > 0, gt.sqrt(x) ** 2, 0.0), [-1.0, 0.0], 4.0),
}


@pytest.mark.parametrize("name", list(_MASKED_SECOND_ORDER))
def test_masked_singular_branch_is_nan_free_at_second_order(backend, name):
    """The second derivative through an untaken singular branch is 0 (not NaN), by nested tapes and
    by forward-over-reverse; at a taken point it is the true one (against central differences of the
    first derivative)."""
    f, masked, taken = _MASKED_SECOND_ORDER[name]
    x = _c(masked + [taken])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gt.GradientTape() as outer:
            outer.watch(x)
            with gt.GradientTape() as inner:
                inner.watch(x)
                y = f(x)
            g = inner.gradient(y, x)
        h = outer.gradient(g, x).numpy()
        with gt.ForwardAccumulator(x, gt.ones_like(x)) as acc:
            with gt.GradientTape() as inner:
                inner.watch(x)
                y = f(x)
            g2 = inner.gradient(y, x)
        hf = acc.jvp(g2).numpy()
    eps = 1e-5

    def first(v):
        t = _c([v])
        with gt.GradientTape() as tape:
            tape.watch(t)
            z = f(t)
        return tape.gradient(z, t).numpy()[0]

    want = (first(taken + eps) - first(taken - eps)) / (2 * eps)
    np.testing.assert_array_equal(h[:-1], 0.0)
    np.testing.assert_array_equal(hf[:-1], 0.0)
    np.testing.assert_allclose([h[-1], hf[-1]], want, rtol=1e-6)


def test_strong_zero_multiply(backend):
    """0 where either factor is 0, even if the other is infinite or NaN; its gradient likewise."""
    a, b = _c([np.inf, 0.0, 2.0, np.nan]), _c([0.0, np.nan, 3.0, 0.0])
    np.testing.assert_array_equal(gt.math.strong_zero_multiply(a, b).numpy(), [0.0, 0.0, 6.0, 0.0])
    x, y = _c([0.0, 2.0]), _c([np.inf, 4.0])
    with gt.GradientTape() as tape:
        tape.watch([x, y])
        z = gt.math.strong_zero_multiply(x, y)
    gx, gy = tape.gradient(z, [x, y])
    np.testing.assert_array_equal(gx.numpy(), [np.inf, 4.0])  # the true d/dx1 = x2
    np.testing.assert_array_equal(gy.numpy(), [0.0, 2.0])
