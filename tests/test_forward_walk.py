"""ForwardAccumulator's forward walk (issue 23, item 6): registry-wide, on every backend.

``jvp`` derives each node's tangent from the op's one rule (element-wise ops: the rule at the
tangent; linear ops: the op on the tangents; ``matmul``: the product rule) and transposes the tape
twice only for what the walk cannot do.  For every op with a rule, over its domain, the walk's
jvps equal the double transposition's, the walk is taken for every element-wise, linear and
multilinear op on real values, and nested accumulators give second derivatives.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradtape as gt
from gradtape import testing
from gradtape.autodiff import forward
from gradtape.core import registry
from gradtape.core.recording_state import per_thread
from test_rules import RULE_OPS, rule_cases  # (gradtape's own ops that have a rule: the one list)


def _walks(op):
    """Whether the forward walk must handle ``op`` itself (real values, one output)."""
    return op.nout is None and (
        op.name in forward._LINEAR
        or op.name in forward._MULTILINEAR
        or op.chapter == "elementwise"
        or op.name in forward._ELEMENTWISE
        or op.name in forward._ROWWISE
    )


@pytest.mark.parametrize("name", RULE_OPS)
def test_the_walk_equals_the_double_transposition(name, backend, monkeypatch):
    op = registry.get_op(name)
    rng = np.random.default_rng(11)
    walked = []
    real_walk = forward._forward_walk

    def spy(nodes, primals, tangents):
        out = real_walk(nodes, primals, tangents)
        walked.append(out is not None)
        return out

    monkeypatch.setattr(forward, "_forward_walk", spy)
    checked = 0
    for case in rule_cases(op, backend):
        values, kwargs = case.draw(rng, "float64")
        leaves, flags, rebuild = testing.case_leaves(case, values)
        ts = [gt.asarray(v) for v in leaves]
        srcs = [t for t, f in zip(ts, flags) if f and t.dtype.differentiable]
        if not srcs:
            continue
        tangents = [gt.asarray(np.asarray(rng.standard_normal(tuple(t.shape))), dtype=t.dtype) for t in srcs]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with gt.ForwardAccumulator(srcs, tangents) as acc:
                    outs = testing.flat_outputs(testing.case_outputs(case, op.public(*rebuild(ts), **kwargs)))
            except ValueError:  # inputs the op refuses on this backend (a singular matrix)
                continue
            outs = [o for o in outs if o.dtype.differentiable]
            if not outs:
                continue
            walked.clear()
            new = acc.jvp(outs)
            old = acc._transposed(outs, "none")
        checked += 1
        real = not any(t.dtype.is_complex for t in srcs + outs)
        if real and _walks(op):
            assert walked == [True], f"{name} {case!r}: the forward walk fell back to the double transposition"
        for a, b in zip(new, old):
            assert (a is None) == (b is None), case
            if a is not None:
                assert tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype, case
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12, err_msg=repr(case))
    if op.domain is not None and not checked:
        pytest.skip(f"{name}: no case with floating inputs that the op takes on this backend")


def test_forward_over_forward_is_a_second_derivative(backend):
    x = gt.constant([0.3, -1.1], dtype=gt.float64)
    e = gt.constant([1.0, 0.0], dtype=gt.float64)
    with gt.ForwardAccumulator(x, e) as outer:
        with gt.ForwardAccumulator(x, e) as inner:
            y = gt.sum(gt.sin(x) * x)
        dy = inner.jvp(y)  # d/dx0 (sin(x0) x0) = cos(x0) x0 + sin(x0)
    d2 = outer.jvp(dy)  # -sin(x0) x0 + 2 cos(x0)
    x0 = 0.3
    np.testing.assert_allclose(float(dy), np.cos(x0) * x0 + np.sin(x0), rtol=1e-12)
    np.testing.assert_allclose(float(d2), -np.sin(x0) * x0 + 2 * np.cos(x0), rtol=1e-12)


def test_reverse_over_forward_records_the_walk(backend):
    x = gt.constant([0.5, 2.0], dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x)
        with gt.ForwardAccumulator(x, gt.constant([1.0, 1.0], dtype=gt.float64)) as acc:
            y = gt.sum(gt.exp(x) / (1.0 + x))
        d = acc.jvp(y)  # sum_i exp(x_i) x_i / (1 + x_i)^2
    g = tape.gradient(d, x)  # d/dx_i: exp(x_i) (x_i^2 + 1) / (1 + x_i)^3
    xv = np.array([0.5, 2.0])
    np.testing.assert_allclose(float(d), np.sum(np.exp(xv) * xv / (1 + xv) ** 2), rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), np.exp(xv) * (xv**2 + 1) / (1 + xv) ** 3, rtol=1e-12)


def test_an_input_broadcast_against_an_unkept_one_falls_back(backend):
    # add keeps nothing: x (2,) + c (3, 2) with a tangent for x only; the walk cannot know the output
    # shape from what the node kept, and the double transposition gives the jvp
    x = gt.constant([1.0, 2.0], dtype=gt.float64)
    c = gt.constant(np.ones((3, 2)), dtype=gt.float64)
    with gt.ForwardAccumulator(x, gt.constant([1.0, -1.0], dtype=gt.float64)) as acc:
        y = gt.sin(x) + c
    np.testing.assert_allclose(acc.jvp(y).numpy(), np.broadcast_to(np.cos([1.0, 2.0]) * [1.0, -1.0], (3, 2)))


def test_a_replaced_rule_is_the_one_the_walk_uses(backend):
    # the walk's direct tangent of multiply stands for its registered rule only
    op = registry.get_op("multiply")
    original = op.grad

    def doubled(xp, node, grad):
        return tuple(None if g is None else 2.0 * g for g in original(xp, node, grad))

    op.set_rule(doubled, "xp")
    try:
        x = gt.constant([1.0, 2.0], dtype=gt.float64)
        c = gt.constant([3.0, -1.0], dtype=gt.float64)
        with gt.ForwardAccumulator(x, gt.constant([1.0, 1.0], dtype=gt.float64)) as acc:
            y = x * c
        np.testing.assert_allclose(acc.jvp(y).numpy(), [6.0, -2.0])
    finally:
        op.set_rule(original, "xp")


def test_the_native_walk_equals_the_walk_on_tensors(backend, monkeypatch):
    # nothing records: the tangents are native arrays (the node itself the rules' op), and a node off
    # the native forms (inputs of two dtypes, which the ops promote) is computed on Tensors; an outer
    # tape that records makes the walk run on Tensors throughout: the same jvps, dtypes and shapes
    calls = {"native": 0, "on_tensors": 0}
    real_tangent = forward._node_tangent

    def tangent(xp, op, n, ts, kind):
        if op is n:
            calls["native"] += 1
        elif not per_thread.tapes:
            calls["on_tensors"] += 1
        return real_tangent(xp, op, n, ts, kind)

    monkeypatch.setattr(forward, "_node_tangent", tangent)
    x = gt.constant([0.3, -1.2, 2.0], dtype=gt.float32)
    c64 = gt.constant([1.5, 0.5, -2.0], dtype=gt.float64)
    m = gt.constant(np.arange(6.0).reshape(3, 2) / 7, dtype=gt.float32)

    def program():
        a = gt.sin(x) * 2.0 - x * x
        b = gt.reshape(a, (1, 3)) @ m  # (1, 2)
        c = gt.concat([x, c64], axis=0)  # float32 with float64: promoted, on Tensors
        d = gt.sum(gt.exp(b)) + gt.sum(c * c) + gt.reduce_mean(gt.reshape(a, (3, 1)) + m)
        return [a, b, c, d]

    v = gt.constant([1.0, 0.5, -0.25], dtype=gt.float32)
    with gt.ForwardAccumulator(x, v) as acc:
        ys = program()
    native = acc.jvp(ys)
    assert calls["native"] >= 10 and calls["on_tensors"] == 1, calls
    n_native = calls["native"]
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.ForwardAccumulator(x, v) as acc2:
            ys2 = program()
        on_tensors = acc2.jvp(ys2)
    assert calls["native"] == n_native and calls["on_tensors"] == 1, calls
    for a, b in zip(native, on_tensors):
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    xv, vv = x.numpy().astype(np.float64), v.numpy().astype(np.float64)
    np.testing.assert_allclose(native[0].numpy(), (2 * np.cos(xv) - 2 * xv) * vv, rtol=1e-5)
