"""The backward walk holds no gradient it has finished with while the next rule runs: where two
gradients reach one input and are summed, the two addends are freed at once (the walk's frame
keeps no reference to a rule's results once they are added), so a backward's peak memory is
what the rules need, not one node's dead gradients more (the recompute_grad benchmark's peak was
2 MiB higher through them)."""

from __future__ import annotations

import itertools
import weakref

import numpy as np
import pytest

import gradtape as gt

_names = (f"walk_memory_op_{i}" for i in itertools.count())


def _ops(addends):
    """``pair(a, b) = a * b`` whose rule returns fresh arrays (kept as weak references in
    ``addends``), and ``probe(x) = x`` whose rule records whether those arrays are still alive."""
    alive_at_probe = []

    def pair_rule(xp, op, g):
        a, b = op.inputs
        ga, gb = g * b, g * a
        try:
            addends.extend([weakref.ref(ga), weakref.ref(gb)])
        except TypeError:
            pytest.skip("this backend's arrays take no weak reference: the check cannot see them")
        return ga, gb

    def probe_rule(xp, op, g):
        alive_at_probe.append([r() is not None for r in addends])
        return g

    pair = gt.register_op(next(_names), lambda xp, a, b: a * b, pair_rule)
    probe = gt.register_op(next(_names), lambda xp, x: x + 0.0, probe_rule)
    return pair, probe, alive_at_probe


@pytest.mark.parametrize("persistent", [False, True])
def test_summed_gradients_are_freed_before_the_next_rule(backend, persistent):
    addends = []
    pair, probe, alive_at_probe = _ops(addends)
    x = gt.constant(np.linspace(0.5, 1.5, 4096), dtype=gt.float64)
    with gt.GradientTape(persistent=persistent) as tape:
        tape.watch(x)
        h = probe(x)
        y = gt.reduce_sum(pair(h, h))  # two gradients reach h: summed, then probe's rule runs
    g = tape.gradient(y, x)
    np.testing.assert_allclose(np.asarray(g.numpy()), 2 * np.linspace(0.5, 1.5, 4096))
    assert len(addends) == 2 and alive_at_probe == [[False, False]]


def test_summed_gradients_are_freed_in_a_recorded_walk(backend):
    """The same while an outer tape records the walk (second order)."""
    addends = []
    pair, probe, alive_at_probe = _ops(addends)
    x = gt.constant(np.linspace(0.5, 1.5, 4096), dtype=gt.float64)
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.GradientTape() as inner:
            inner.watch(x)
            h = probe(x)
            y = gt.reduce_sum(pair(h, h))
        g = inner.gradient(y, x)
        s = gt.reduce_sum(g)
    np.testing.assert_allclose(np.asarray(g.numpy()), 2 * np.linspace(0.5, 1.5, 4096))
    assert len(addends) == 2 and alive_at_probe == [[False, False]]
    assert outer.gradient(s, x) is not None


# ------------------------------------------------------------------ what a reduction keeps (issue 23)
@pytest.mark.parametrize("reduce", ["reduce_sum", "reduce_mean"])
def test_a_sum_keeps_its_input_shape_not_its_values(backend, reduce):
    """``sum``'s and ``mean``'s rules read their input's shape only: the tape keeps no reference to
    the reduced array (``h`` here, which nothing else saves), and the gradient is still right."""
    red = getattr(gt, reduce)
    x = gt.constant(np.linspace(0.5, 1.5, 4096).reshape(64, 64), dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x)
        h = x + 1.0  # (add saves nothing)
        y = gt.reduce_sum(red(h, axis=1))
    try:
        ref = weakref.ref(h.native)
    except TypeError:
        pytest.skip("this backend's arrays take no weak reference: the check cannot see them")
    del h
    assert ref() is None
    want = np.ones((64, 64)) / (64 if reduce == "reduce_mean" else 1)
    np.testing.assert_array_equal(np.asarray(tape.gradient(y, x).numpy()), want)


@pytest.mark.parametrize("reduce", ["reduce_sum", "reduce_mean"])
@pytest.mark.parametrize("axis", [1, (0, 1), ()])
def test_a_sum_in_a_recorded_walk_reads_the_kept_shape(backend, axis, reduce):
    """Second order through ``sum`` and ``mean`` (their rules on Tensors read the unsaved input's
    shape), also where nothing is reduced (the input kept as the output's shape)."""
    red = getattr(gt, reduce)
    scale = {1: 4, (0, 1): 12, (): 1}[axis] if reduce == "reduce_mean" else 1
    v = np.linspace(0.5, 1.5, 12).reshape(3, 4)
    x = gt.constant(v, dtype=gt.float64)
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.GradientTape() as inner:
            inner.watch(x)
            y = gt.reduce_sum(red(x * x * x, axis=axis))
        g = inner.gradient(y, x)
        s = gt.reduce_sum(g)
    np.testing.assert_allclose(np.asarray(g.numpy()), 3 * v**2 / scale, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(outer.gradient(s, x).numpy()), 6 * v / scale, rtol=1e-13)


# ----------------------------------------------- the walk's sums: in place only where nothing else sees
def test_a_cotangent_the_caller_holds_is_not_summed_into(backend):
    """``x + x`` with ``output_gradients=u``: the rule returns ``u`` for both inputs; the walk's sum
    ``u + u`` (large enough for NumPy to reuse a temporary's memory) must leave ``u`` as it was."""
    n = 100_000
    x = gt.constant(np.linspace(0.5, 1.5, n), dtype=gt.float64)
    u = gt.constant(np.full(n, 0.25), dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = x + x
    g = tape.gradient(y, x, output_gradients=u)
    np.testing.assert_array_equal(np.asarray(u.numpy()), np.full(n, 0.25))
    np.testing.assert_array_equal(np.asarray(g.numpy()), np.full(n, 0.5))


def test_sums_of_large_gradients_are_right(backend):
    """Several large gradients reaching one input (the walk sums each into the previous sum, in
    place on NumPy), and one of them also a source's gradient: every result as computed by hand."""
    n = 100_000
    v = np.linspace(0.5, 1.5, n)
    x = gt.constant(v, dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x)
        h = x * 3.0
        y = gt.reduce_sum(h * h) + gt.reduce_sum(gt.sin(h)) + gt.reduce_sum(h * x)
    gx, gh = tape.gradient(y, [x, h])
    want_h = 2 * (3 * v) + np.cos(3 * v) + v
    np.testing.assert_allclose(np.asarray(gh.numpy()), want_h, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(gx.numpy()), 3 * want_h + 3 * v, rtol=1e-14)


def test_the_gradient_of_a_square_is_the_two_products_summed(backend):
    """``x * x``'s rule doubles one product (``g * x * 2``): the same bits as the two gradients
    ``g * x + g * x``; and its second derivative 2."""
    v = np.array([0.1, -2.5, 3.0e-300, 7.0, -0.0, 1.0e300])
    x = gt.constant(v, dtype=gt.float64)
    gv = np.array([1.5, 0.3, 2.0, -1.0, 4.0, 1.0])
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.GradientTape() as inner:
            inner.watch(x)
            y = x * x
        g = inner.gradient(y, x, output_gradients=gt.constant(gv, dtype=gt.float64))
        s = gt.reduce_sum(g)
    np.testing.assert_array_equal(np.asarray(g.numpy()), gv * v + gv * v)
    np.testing.assert_array_equal(np.asarray(outer.gradient(s, x).numpy()), 2 * gv)
