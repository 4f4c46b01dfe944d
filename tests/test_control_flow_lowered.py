"""``gt.cond`` and ``gt.while_loop`` inside ``gt.function`` as one structured step each (issue 12
item 3), on every backend: one trace for every branch and trip count, gradients through the step
(a cond of the branches' VJPs, a reverse loop over the saved carries), the fallbacks to guards
where a branch cannot be one step, errors, NaN safety in the branch not taken.

Expected values are derived by hand, and checked against TensorFlow 2.21's ``tf.function`` where
the compiled semantics differ from eager ones (a variable read only in the branch not taken gets a
zero gradient, as in a ``tf.cond`` graph, where eager code gives None)."""

from __future__ import annotations

import math
import re
import sys
import warnings

import numpy as np
import pytest

import gradtape as gt
from gradtape.core.recording_state import per_thread, recording_context
from gradtape.testing import assert_structures_close
from gradtape.testing import snapshot as snap

FUNCTION_MODULE = sys.modules[
    "gradtape.compile.function"
]  # (``gradtape.compile.function`` the attribute is gt.function)

# a program that disagrees with eager code warns and runs eagerly from then on: an error here (the
# note that a compiler compiles a program per path is not: the fallbacks below take paths on purpose)
pytestmark = [
    pytest.mark.filterwarnings("error:gt.function:UserWarning"),
    pytest.mark.filterwarnings("ignore:gt.function .* compiles a program for each path:UserWarning"),
]

TOL = 1e-12


def c64(a):
    return gt.constant(np.asarray(a, dtype=np.float64))


def _arrays(x):
    """NumPy scalars as 0-d arrays (compared to ``tol``; a ``np.float64`` is a Python float, which
    :func:`assert_structures_close` compares exactly)."""
    if isinstance(x, np.generic):
        return np.asarray(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_arrays(v) for v in x)
    return x


def same(got, want, where="result", tol=TOL):
    """Snapshots ``got`` equal to ``want`` to ``tol`` (dtypes and shapes equal, None where None)."""
    assert_structures_close(got, _arrays(want), tol, tol, where)


@pytest.fixture(autouse=True)
def _clean_state():
    yield
    gt.random.set_seed(None)
    assert recording_context[0] is None
    assert list(per_thread.tapes) == []


@pytest.fixture(params=[None, False], ids=["jit-default", "jit-off"])
def jit(request, backend):
    """``jit_compile``: None (jax.jit on JAX, replayed elsewhere) or False (replayed everywhere)."""
    return request.param


def programs(f):
    """Every program (``_Concrete``) ``f`` traced."""
    return [c for paths in f._cache.values() for c in paths]


def sources(f):
    """The generated source of every program ``f`` traced."""
    return [c.source for c in programs(f)]


def assert_lowered(f, conds=0, loops=0):
    """Every program of ``f`` has ``conds`` gt.cond steps and ``loops`` gt.while_loop steps, and
    no guard."""
    progs = programs(f)
    assert progs
    for c in progs:
        s = c.source
        assert not c.guards and "GuardFailed" not in s, s
        assert len(re.findall(r"# gt\.cond$", s, re.M)) == conds, s
        assert len(re.findall(r"# gt\.while_loop$", s, re.M)) == loops, s


def assert_guarded(f):
    """Every program of ``f`` is specialised to a path: it has guards and no structured step."""
    for c in programs(f):
        s = c.source
        assert c.guards, s  # (checked in the program, or returned by a compiled one and checked after)
        assert not re.search(r"# gt\.(cond|while_loop)$", s, re.M), s


def eager_and_compiled(make_step, calls, **options):
    """``make_step()``'s step run eagerly, then a fresh one under ``gt.function(**options)``, over
    ``calls``; returns (the gt.function, eager snapshots, compiled snapshots)."""
    step = make_step()
    eager = [snap(step(*args)) for args in calls]
    f = gt.function(make_step(), **options)
    compiled = [snap(f(*args)) for args in calls]
    return f, eager, compiled


# ============================================================================ one trace for all paths
def test_cond_traces_once_for_both_branches(backend, jit):
    @gt.function(jit_compile=jit)
    def f(x):
        return gt.cond(gt.reduce_sum(x) > 0, lambda: x * 2.0, lambda: gt.exp(x) - 1.0)

    for v in [[1.0, 2.0], [-1.0, -2.0], [3.0, -1.0], [-0.5, 0.25], [1.0, 2.0]]:
        want = np.array(v) * 2.0 if sum(v) > 0 else np.expm1(np.array(v))
        same(snap(f(c64(v))), want)
    assert f.experimental_get_tracing_count() == 1
    assert_lowered(f, conds=1)


def test_while_loop_traces_once_for_every_trip_count(backend, jit):
    @gt.function(jit_compile=jit)
    def f(x):
        return gt.while_loop(lambda i, y: y < 100.0, lambda i, y: (i + 1, y * 2.0), (0, x))

    for start, trips in [(3.0, 6), (30.0, 2), (300.0, 0), (1.0, 7), (60.0, 1), (3.0, 6)]:
        i, y = f(c64(start))
        assert isinstance(i, gt.Tensor) and i.dtype.is_integer  # a Python int loop variable comes back a tensor
        assert int(i) == trips
        same(snap(y), np.float64(start * 2**trips))
    assert f.experimental_get_tracing_count() == 1
    assert_lowered(f, loops=1)


def test_torch_jit_compile_keeps_guards(backend):
    # torch.compile gets no structured step: the program keeps guards, one trace per branch (kept
    # to two paths: each trace is an inductor compilation)
    if getattr(gt.get_backend(), "compiles", None) != "opt-in":
        pytest.skip(f"{backend} has no opt-in compiler (jit_compile=True is jit_compile=None there)")

    def step(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.cond(x > 0, lambda: x**3, lambda: gt.sin(x) * 2.0)
        return y, tape.gradient(y, x)

    calls = [(c64(v),) for v in [0.5, -0.5, 1.5, -2.0]]
    f, eager, compiled = eager_and_compiled(lambda: step, calls, jit_compile=True)
    for (x,), got in zip(calls, compiled):
        v = float(x)
        same(got, (np.float64(v**3 if v > 0 else 2 * math.sin(v)), np.float64(3 * v**2 if v > 0 else 2 * math.cos(v))))
    assert f.experimental_get_tracing_count() == 2
    assert_guarded(f)


def test_a_size_one_predicate(backend, jit):
    # a predicate of shape (1,) is accepted (as eagerly, and as tf.cond under tf.function)

    @gt.function(jit_compile=jit)
    def f(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.cond(gt.reshape(x, (1,)) > 0, lambda: x * x, lambda: x * 3.0)
            z = gt.while_loop(lambda z: gt.reshape(gt.abs(z), (1,)) < 10.0, lambda z: z * 2.0, y, maximum_iterations=10)
        return z, tape.gradient(z, x)

    for v, trips in [(1.5, 3), (-1.0, 2), (2.5, 1)]:
        y, dy = (v * v, 2 * v) if v > 0 else (3 * v, 3.0)
        same(snap(f(c64(v))), (np.float64(y * 2**trips), np.float64(dy * 2**trips)))
    assert f.experimental_get_tracing_count() == 1
    assert_lowered(f, conds=1, loops=1)


# ============================================================================ gradients through cond
def test_cond_gradients_of_captures_variables_and_passthrough(backend, jit):
    # TensorFlow 2.21, the same step under tf.function: at x = 2 ([1.5, None, 2.0, 0.0], [1.0, None]),
    # at x = -1 ([0.0, None, 0.0, 3.0], [0.0, None]): a variable or watched tensor read only in the
    # branch not taken gets 0.0 (eagerly: None); y is not watched (None)
    v = gt.Variable(1.5, dtype=gt.float64)
    w = gt.Variable(-2.0, dtype=gt.float64)

    @gt.function(jit_compile=jit)
    def f(x, y):
        with gt.GradientTape(persistent=True) as tape:
            tape.watch(x)
            out, k = gt.cond(x > 0, lambda: (x * v + y, gt.constant(1)), lambda: (y * w, gt.constant(2)))
            z = gt.cond(x > 1, lambda: x, lambda: y)  # outputs passed through
            both = gt.cond(x > 0, lambda: v * x * x, lambda: v * gt.sin(x))  # v read in both
        return (
            out,
            k,
            tape.gradient(out, [x, v, w]),
            tape.gradient(z, x),
            tape.gradient(both, [x, v]),
            tape.gradient(out, w, unconnected_gradients="zero"),
        )

    for xv, yv in [(2.0, 3.0), (-1.0, 3.0), (0.5, 1.0), (-0.25, -4.0)]:
        out, k, d_out, d_z, d_both, d_w = f(c64(xv), c64(yv))
        pos = xv > 0
        same(snap(out), np.float64(xv * 1.5 + yv if pos else yv * -2.0))
        assert k.dtype == gt.int32 or k.dtype == gt.int64
        assert int(k) == (1 if pos else 2)
        same(
            snap(d_out),
            [np.float64(1.5 if pos else 0.0), np.float64(xv if pos else 0.0), np.float64(0.0 if pos else yv)],
        )
        same(snap(d_z), np.float64(1.0 if xv > 1 else 0.0))
        same(
            snap(d_both),
            [np.float64(3.0 * xv if pos else 1.5 * math.cos(xv)), np.float64(xv * xv if pos else math.sin(xv))],
        )
        same(snap(d_w), np.float64(0.0 if pos else yv))
    assert f.experimental_get_tracing_count() == 1
    assert_lowered(f, conds=3)


def test_cond_gradient_when_only_the_predicate_reads_the_source(backend, jit):
    # the gradient of a watched tensor the branches do not read is None, as in TensorFlow
    @gt.function(jit_compile=jit)
    def f(x, y):
        with gt.GradientTape() as tape:
            tape.watch([x, y])
            out = gt.cond(x > 0, lambda: y * 2.0, lambda: y * y)
        return tape.gradient(out, [x, y])

    for xv in [1.0, -1.0]:
        dx, dy = f(c64(xv), c64(3.0))
        assert dx is None
        same(snap(dy), np.float64(2.0 if xv > 0 else 6.0))
    assert f.experimental_get_tracing_count() == 1


def test_nested_cond_gradient(backend, jit):
    def step(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            s = gt.reduce_sum(x)
            y = gt.cond(s > 0, lambda: gt.cond(s > 10, lambda: x**2 / 10.0, lambda: gt.sin(x) * x), lambda: -x * 3.0)
            loss = gt.reduce_sum(y)
        return loss, tape.gradient(loss, x)

    vals = [[1.0, 2.0], [20.0, 1.0], [-1.0, -2.0], [0.5, 0.25], [12.0, 3.0], [-5.0, 1.0]]
    f = gt.function(step, jit_compile=jit)
    for v in vals:
        a = np.array(v)
        s = a.sum()
        if s > 10:
            want = (np.sum(a**2 / 10.0), a / 5.0)
        elif s > 0:
            want = (np.sum(np.sin(a) * a), np.cos(a) * a + np.sin(a))
        else:
            want = (np.sum(-3.0 * a), np.full(2, -3.0))
        same(snap(f(c64(v))), want)
        same(snap(step(c64(v))), want)  # eager agrees
    assert f.experimental_get_tracing_count() == 1
    srcs = sources(f)
    assert len(srcs) == 1 and "GuardFailed" not in srcs[0]


def test_persistent_tape_and_jacobian_through_cond(backend, jit):
    @gt.function(jit_compile=jit)
    def f(x):
        with gt.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = gt.cond(gt.reduce_sum(x) > 0, lambda: x * x, lambda: gt.exp(x))
            loss = gt.reduce_sum(y)
        return tape.gradient(loss, x), tape.gradient(y, x), tape.jacobian(y, x)

    for v in [[1.0, 2.0, -0.5], [-1.0, -2.0, 0.5]]:
        a = np.array(v)
        d = 2 * a if a.sum() > 0 else np.exp(a)
        same(snap(f(c64(v))), (d, d, np.diag(d)))
    assert f.experimental_get_tracing_count() == 1


def test_cond_inside_a_while_body_gradient(backend, jit):
    # y -> y * 1.5 while y < 1, y -> y + x * v after; d/dx and d/dv by hand over the trips
    v = gt.Variable(0.5, dtype=gt.float64)

    @gt.function(jit_compile=jit)
    def f(x, y0):
        with gt.GradientTape() as tape:
            tape.watch(x)
            _, y = gt.while_loop(
                lambda i, y: i < 4,
                lambda i, y: (i + 1, gt.cond(y < 1.0, lambda: y * 1.5, lambda: y + x * v)),
                (gt.constant(0), y0),
                maximum_iterations=4,
            )
        return y, tape.gradient(y, [x, v])

    for xv, y0 in [(2.0, 0.5), (-1.0, 0.9), (3.0, 2.0), (0.5, 0.1)]:
        y, dx, dv = y0, 0.0, 0.0
        for _ in range(4):
            if y < 1.0:
                y, dx, dv = y * 1.5, dx * 1.5, dv * 1.5
            else:
                y, dx, dv = y + xv * 0.5, dx + 0.5, dv + xv
        same(snap(f(c64(xv), c64(y0))), (np.float64(y), [np.float64(dx), np.float64(dv)]))
    assert f.experimental_get_tracing_count() == 1
    assert_lowered(f, loops=1)


# ============================================================================ gradients through loops
def _power_step(max_iter):
    def step(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.while_loop(lambda y: y < 10.0, lambda y: y * x, x, maximum_iterations=max_iter)
        return y, tape.gradient(y, x)

    return step


def _powers(v, max_iter):
    k = 1
    while v**k < 10.0 and (max_iter is None or k - 1 < max_iter):
        k += 1
    return np.float64(v**k), np.float64(k * v ** (k - 1))


def test_while_loop_gradient_with_maximum_iterations_is_one_trace(backend, jit):
    f = gt.function(_power_step(20), jit_compile=jit)
    for v in [1.5, 2.5, 4.0, 11.0, 1.2, 3.0]:  # x**k, k = 6, 3, 2, 1, 13, 3
        same(snap(f(c64(v))), _powers(v, 20))
    assert f.experimental_get_tracing_count() == 1
    assert_lowered(f, loops=1)
    # the cap binds: 3 trips at most
    g = gt.function(_power_step(3), jit_compile=jit)
    for v in [1.5, 2.5, 11.0]:
        same(snap(g(c64(v))), _powers(v, 3))
    assert g.experimental_get_tracing_count() == 1


def test_while_loop_gradient_without_maximum_iterations(backend, jit):
    # a loop whose gradient needs a count known only when it runs: one step where the loop steps
    # are Python loops, guards on JAX (lax.scan needs a static length)
    f = gt.function(_power_step(None), jit_compile=jit)
    xs = [1.5, 2.5, 1.5, 4.0, 11.0, 2.5]  # k = 6, 3, 6, 2, 1, 3
    for v in xs:
        same(snap(f(c64(v))), _powers(v, None))
    if backend == "jax":  # (its loop steps are lax.scan, jitted or not)
        assert f.experimental_get_tracing_count() == 4  # one per trip count
        assert_guarded(f)
    else:
        assert f.experimental_get_tracing_count() == 1
        assert_lowered(f, loops=1)


def test_while_loop_nested_loop_vars_and_int_counters(backend, jit):
    # loop_vars a nested structure: (counter, (a, b)); a Fibonacci-like recurrence whose trip
    # count depends on the values; gradients of both initial values by hand
    @gt.function(jit_compile=jit)
    def f(a0, b0):
        with gt.GradientTape() as tape:
            tape.watch([a0, b0])
            n, (a, b) = gt.while_loop(
                lambda n, ab: ab[1] < 50.0,
                lambda n, ab: (n + 1, (ab[1], ab[0] + ab[1])),
                (0, (a0, b0)),
                maximum_iterations=30,
            )
        return n, a, b, tape.gradient(b, [a0, b0])

    for a0, b0 in [(1.0, 1.0), (2.0, 3.0), (10.0, 60.0), (0.5, 0.25)]:
        # (a, b) = M^n (a0, b0), M = [[0, 1], [1, 1]]: d b / d(a0, b0) is the second row of M^n
        n, a, b, m = 0, a0, b0, np.eye(2)
        while b < 50.0:
            n, a, b, m = n + 1, b, a + b, np.array([[0.0, 1.0], [1.0, 1.0]]) @ m
        got = f(c64(a0), c64(b0))
        assert isinstance(got[0], gt.Tensor) and int(got[0]) == n
        same(snap(got[1:]), (np.float64(a), np.float64(b), [np.float64(m[1, 0]), np.float64(m[1, 1])]))
    assert f.experimental_get_tracing_count() == 1
    assert_lowered(f, loops=1)


def test_while_loop_accumulates_a_captured_variables_gradient(backend, jit):
    # y_{k+1} = y_k * v + 1 for n trips: dy/dv sums over the iterations; n = 0: dy/dv = 0.0 and
    # dy/dy0 = 1.0 (TensorFlow 2.21 under tf.function: 0.0 for the variable, not None)
    v = gt.Variable(0.5, dtype=gt.float64)

    @gt.function(jit_compile=jit)
    def f(y0, n):
        with gt.GradientTape() as tape:
            tape.watch(y0)
            _, y = gt.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, y * v + 1.0), (0, y0), maximum_iterations=8)
        return y, tape.gradient(y, [y0, v])

    for y0, n, vv in [(2.0, 3, 0.5), (2.0, 0, 0.5), (-1.0, 5, 1.5), (0.3, 1, -2.0), (2.0, 3, 0.5)]:
        v.assign(vv)
        y, dy0, dv = y0, 1.0, 0.0
        for _ in range(n):
            y, dy0, dv = y * vv + 1.0, dy0 * vv, dv * vv + y
        same(snap(f(c64(y0), gt.constant(n))), (np.float64(y), [np.float64(dy0), np.float64(dv)]), f"n={n}")
    assert f.experimental_get_tracing_count() == 1
    assert_lowered(f, loops=1)


def test_while_loop_body_changing_shape_falls_back(backend, jit):
    # a loop variable that grows: no structured step; a trace per trip count, eager's numbers
    def step(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.while_loop(
                lambda y: gt.reduce_sum(y) < 10.0, lambda y: gt.concat([y, y * x], axis=0), gt.reshape(x, (1,))
            )
            s = gt.reduce_sum(y)
        return y, tape.gradient(s, x)

    calls = [(c64(v),) for v in [3.0, 1.5, 3.0, 12.0]]
    f, eager, compiled = eager_and_compiled(lambda: step, calls, jit_compile=jit)
    for k, (g, e) in enumerate(zip(compiled, eager)):
        same(g, e, f"call {k}")
    same(compiled[0][0], np.array([3.0, 9.0]))  # [3] -> [3, 9]: sum 12
    assert f.experimental_get_tracing_count() == 3
    assert_guarded(f)


# ============================================================================ fallbacks to guards
def _assert_twins(eager, compiled):
    for k, (g, e) in enumerate(zip(compiled, eager)):
        same(g, e, f"call {k}")


def test_branch_assigning_a_variable_falls_back(backend, jit):
    def make():
        v = gt.Variable(1.0, dtype=gt.float64)

        def step(x):
            y = gt.cond(x > 0, lambda: v.assign_add(x) * 2.0, lambda: v * x)
            return y, v.read_value()

        return step

    calls = [(c64(a),) for a in [1.0, -1.0, 2.0, -3.0, 0.5]]
    f, eager, compiled = eager_and_compiled(make, calls, jit_compile=jit)
    _assert_twins(eager, compiled)
    same(compiled[-1], (np.float64(9.0), np.float64(4.5)))
    assert f.experimental_get_tracing_count() == 2
    assert_guarded(f)


def test_branch_drawing_random_numbers_falls_back(backend, jit):
    def make():
        def step(x):
            return gt.cond(gt.reduce_sum(x) > 0, lambda: x + gt.random.normal((2,), dtype=gt.float64), lambda: x * 2.0)

        return step

    calls = [(c64(a),) for a in [[1.0, 2.0], [-1.0, -2.0], [1.0, 2.0], [3.0, -1.0]]]
    gt.random.set_seed(7)
    step = make()
    eager = [snap(step(*a)) for a in calls]
    gt.random.set_seed(7)
    f = gt.function(make(), jit_compile=jit)
    compiled = [snap(f(*a)) for a in calls]
    same(compiled[0], eager[0])  # the first call draws eager's numbers
    same(compiled[1], eager[1])
    assert not np.array_equal(compiled[2], compiled[0])  # new numbers on every call
    assert f.experimental_get_tracing_count() == 2
    assert_guarded(f)


def test_value_check_inside_a_branch_falls_back(backend, jit):
    def make():
        def step(logits, labels, use_ce):
            return gt.cond(
                use_ce,
                lambda: gt.reduce_sum(gt.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)),
                lambda: gt.reduce_sum(logits * logits),
            )

        return step

    logits = c64([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]])
    good = gt.constant(np.array([2, 0], dtype=np.int64))
    bad = gt.constant(np.array([2, 7], dtype=np.int64))
    yes, no = gt.constant(True), gt.constant(False)
    calls = [(logits, good, yes), (logits, bad, no), (logits, good, no), (logits, good, yes)]
    f, eager, compiled = eager_and_compiled(make, calls, jit_compile=jit)
    _assert_twins(eager, compiled)
    with pytest.raises(ValueError, match="label value of 7") as eager_error:
        make()(logits, bad, yes)
    # (the program's check names the range, not the value: it is checked on every call)
    with pytest.raises(type(eager_error.value), match=r"sparse_softmax.*outside the valid range of \[0, 3\)"):
        f(logits, bad, yes)
    assert f.experimental_get_tracing_count() == 2
    assert_guarded(f)


def test_branches_of_different_dtypes_or_shapes_fall_back(backend, jit):
    def make():
        def step(x):
            a = gt.cond(x > 0, lambda: gt.cast(x * 2.0, gt.float32), lambda: x * 3.0)
            b = gt.cond(x > 0, lambda: gt.stack([x, x]), lambda: x)
            return a, b

        return step

    calls = [(c64(a),) for a in [1.0, -1.0, 2.0, -2.0]]
    f, eager, compiled = eager_and_compiled(make, calls, jit_compile=jit)
    _assert_twins(eager, compiled)
    assert compiled[0][0].dtype == np.float32 and compiled[1][0].dtype == np.float64
    assert f.experimental_get_tracing_count() == 2
    assert_guarded(f)


def test_higher_order_gradient_through_cond_falls_back(backend, jit):
    def step(x):
        with gt.GradientTape() as outer:
            outer.watch(x)
            with gt.GradientTape() as inner:
                inner.watch(x)
                y = gt.cond(x > 0, lambda: x**3, lambda: gt.sin(x))
            dy = inner.gradient(y, x)
        return y, dy, outer.gradient(dy, x)

    f = gt.function(step, jit_compile=jit)
    for v in [0.5, -0.5, 2.0, -2.0]:
        want = (v**3, 3 * v**2, 6 * v) if v > 0 else (math.sin(v), math.cos(v), -math.sin(v))
        same(snap(f(c64(v))), tuple(np.float64(w) for w in want))
    assert f.experimental_get_tracing_count() == 2
    assert_guarded(f)


# ============================================================================ errors
def test_an_error_in_the_taken_branch_is_eagers(backend, jit):
    def step(x):
        return gt.cond(gt.reduce_sum(x) > 0, lambda: gt.reshape(x, (5,)), lambda: x * 2.0)

    f = gt.function(step, jit_compile=jit)
    same(snap(f(c64([-1.0, -2.0, 0.5]))), np.array([-2.0, -4.0, 1.0]))  # the broken branch not taken
    with pytest.raises(Exception) as eager_error:
        step(c64([1.0, 2.0, 0.5]))
    with pytest.raises(type(eager_error.value)) as compiled_error:
        f(c64([1.0, 2.0, 0.5]))
    assert str(compiled_error.value) == str(eager_error.value)


def test_a_tensor_leaked_out_of_a_branch_is_an_error(backend, jit):
    leaked = []

    def branch(x):
        y = x * 2.0
        leaked.append(y)
        return y

    @gt.function(jit_compile=jit)
    def f(x):
        out = gt.cond(x > 0, lambda: branch(x), lambda: x)
        return out + leaked[-1]

    with pytest.raises(ValueError, match=r"gt.function 'f' uses a tensor of another trace \('f/gt.cond true_fn'\)"):
        f(c64(1.0))

    @gt.function(jit_compile=jit)
    def g(x):
        return gt.cond(x > 0, lambda: branch(x), lambda: x)

    leaked.clear()
    same(snap(g(c64(1.5))), np.float64(3.0))
    with pytest.raises(ValueError, match="used after the trace ended"):
        leaked[-1] + 1.0


# ============================================================================ NaN safety
def _nan_safe(jit):
    @gt.function(jit_compile=jit)
    def f(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.cond(x > 0, lambda: gt.sqrt(x), lambda: gt.zeros_like(x))
            z = gt.cond(x > 0, lambda: gt.where(x > 0, gt.log(x), x), lambda: x * 0.0)
            total = y + z
        return y, z, tape.gradient(total, x)

    return f


def _check_nan_safe(f):
    for v in [-1.0, 4.0, -1.0, 0.0]:
        y, z, d = snap(f(c64(v)))
        if v > 0:
            same((y, z, d), (np.float64(2.0), np.float64(math.log(4.0)), np.float64(0.25 + 0.25)))
        else:
            same((y, z, d), (np.float64(0.0), np.float64(0.0), np.float64(0.0)))
    assert f.experimental_get_tracing_count() == 1
    assert_lowered(f, conds=2)


def test_the_branch_not_taken_makes_no_nan(backend, jit):
    # sqrt(-1) / log(-1) in the branch not taken: value 0, gradient 0, no NaN
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _check_nan_safe(_nan_safe(jit))


def test_the_branch_not_taken_warns_nothing(backend, jit):
    # ... and no RuntimeWarning (NumPy, array_api_strict) while tracing either branch
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _check_nan_safe(_nan_safe(jit))


# ============================================================================ a training loop
def test_training_loop_with_a_cond_matches_eager(backend, jit):
    def make():
        gt.random.set_seed(3)
        model = gt.layers.Dense(1, dtype="float64")
        opt = gt.optimizers.SGD(learning_rate=0.05)

        def step(x, y, huber):
            with gt.GradientTape() as tape:
                err = model(x) - y
                loss = gt.cond(
                    huber,
                    lambda: gt.reduce_mean(gt.where(gt.abs(err) < 1.0, 0.5 * err * err, gt.abs(err) - 0.5)),
                    lambda: gt.reduce_mean(err * err),
                )
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss, [gt.identity(v) for v in model.trainable_variables]

        return step

    rng = np.random.default_rng(0)
    xs = c64(rng.normal(size=(8, 3)))
    ys = c64(rng.normal(size=(8, 1)) * 3.0)
    calls = [(xs, ys, gt.constant(k % 3 == 0)) for k in range(6)]
    f, eager, compiled = eager_and_compiled(make, calls, jit_compile=jit)
    for k, (g, e) in enumerate(zip(compiled, eager)):
        same(g, e, f"step {k}", tol=1e-12)
    assert f.experimental_get_tracing_count() == 1
    assert_lowered(f, conds=1)


def test_guards_give_the_lowered_steps_numbers(backend, jit, monkeypatch):
    # the same step with LOWER_CONTROL_FLOW off (one program per path) and on (one program):
    # the same values and gradients where both agree with eager code (every branch reads x)
    def step(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.cond(gt.reduce_sum(x) > 0, lambda: gt.tanh(x) * x, lambda: gt.exp(x))
            n, z = gt.while_loop(
                lambda n, z: gt.reduce_sum(z) < 20.0, lambda n, z: (n + 1, z * 1.5 + 1.0), (0, y), maximum_iterations=50
            )
            loss = gt.reduce_sum(z * z)
        return n, loss, tape.gradient(loss, x)

    calls = [(c64(v),) for v in [[1.0, 0.5], [-1.0, -0.5], [3.0, 2.0], [0.1, -0.05]]]
    results = {}
    for lower in (True, False):
        monkeypatch.setattr(FUNCTION_MODULE, "LOWER_CONTROL_FLOW", lower)
        f, eager, results[lower] = eager_and_compiled(lambda: step, calls, jit_compile=jit)
        _assert_twins(eager, results[lower])
        paths = len({(float(gt.reduce_sum(x)) > 0, int(e[0])) for (x,), e in zip(calls, eager)})
        assert paths > 1
        assert f.experimental_get_tracing_count() == (1 if lower else paths)
        if lower:
            assert_lowered(f, conds=1, loops=1)
        else:
            assert_guarded(f)
    _assert_twins(results[False], results[True])


def test_one_cond_falling_back_leaves_the_others_one_step(backend, jit):
    # a cond that assigns a variable becomes a guard; the loop beside it stays one loop step
    def make():
        v = gt.Variable(1.0, dtype=gt.float64)

        def step(x, n):
            y = gt.cond(x > 0, lambda: v.assign_add(x) * 1.0, lambda: v * x)
            _, z = gt.while_loop(lambda i, z: i < n, lambda i, z: (i + 1, z * 1.5), (gt.constant(0), y))
            return z, v.read_value()

        return step

    calls = [(c64(a), gt.constant(n)) for a, n in [(1.0, 2), (1.0, 4), (-1.0, 0), (2.0, 3), (-0.5, 5)]]
    f, eager, compiled = eager_and_compiled(make, calls, jit_compile=jit)
    _assert_twins(eager, compiled)
    assert f.experimental_get_tracing_count() == 2  # one per branch of the cond, not per trip count
    for c in programs(f):
        assert c.guards and len(re.findall(r"# gt\.while_loop$", c.source, re.M)) == 1, c.source


def test_a_branch_that_resets_the_tape_is_not_one_step(backend, jit):
    # tape.reset() inside a branch acts when the branch is traced, taken or not: the function is traced
    # again with guards, so only the branch taken resets (the seeds' `if loss > k: t.reset()`)
    def make():
        x = gt.Variable(2.0, dtype=gt.float64)

        def step(k):
            with gt.GradientTape() as t:
                loss = x * x
                loss = gt.cond(loss > k, lambda: (t.reset(), loss * 1.0)[1], lambda: loss * 1.0)
                loss = loss + 5.0 * x
            return loss, t.gradient(loss, x)

        return step

    calls = [(c64(k),) for k in [1.0, 10.0, 1.0, 10.0]]
    f, eager, compiled = eager_and_compiled(make, calls, jit_compile=jit)
    _assert_twins(eager, compiled)
    same(compiled[0][1], np.float64(5.0))  # reset: only 5x is differentiated
    same(compiled[1][1], np.float64(9.0))  # 2x + 5
    assert_guarded(f)
