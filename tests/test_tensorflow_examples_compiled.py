"""The seed examples of ``tests/test_tensorflow_examples.py`` under ``gt.function`` (issue 12, item 4),
on every backend.

Each example that TensorFlow could wrap in ``tf.function`` runs as one traced step -- tapes,
gradient / jacobian / batch_jacobian and Variable updates inside, the values read outside -- called
at least twice (the later calls with other values of the same shapes, variables assigned between
calls), so that the replayed (NumPy, array_api_strict, PyTorch) or ``jax.jit``-compiled program runs,
not only the trace.  Every call is checked against the same step run eagerly from scratch on the same
inputs (:func:`twins`), and the first against the values the documents print.  Examples run in float64
(to 1e-12; 1e-9 on JAX, whose program XLA compiles) and in the documents' float32 (to 1e-6).

Python's ``if`` on a tensor becomes ``gt.cond``; Python side effects (a ``pytest.raises`` around an
argument check, a warning) run when the step is traced, as in ``tf.function``.  Not ported:

* ``test_000_001_stop_recording_when_not_recording_is_runtime_error``: it computes nothing (an error
  of the tape object, raised by Python before any op);
* the ``experimental_use_pfor=False`` RuntimeError of ``test_001_batch_jacobian_errors`` and of
  ``test_001_jacobian_of_nested_sources_and_non_persistent_while_loop``: TF raises it "with eager
  execution enabled" only -- inside ``tf.function`` the while_loop fallback runs (the ValueError of
  the first is checked in ``test_001_batch_jacobian``);
* ``test_004_calculations_outside_gradtape``: ``np.mean`` of a traced tensor cannot be captured (in
  TF: "Cannot convert a symbolic tf.Tensor to a numpy array"); the test below asserts gradtape's
  ``OperatorNotAllowedInGraphError`` instead.

Errors that TF raises while tracing (a gradient of None, a second gradient of a non-persistent tape,
an op with no registered gradient) are checked as errors of the first call, which traces nothing.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradtape as gt
from gradtape.testing import assert_structures_close as assert_same
from gradtape.testing import snapshot as snap
from test_tensorflow_examples import _adjust_contrast  # (the eager port's op: registered once)
from gradtape.core.recording_state import per_thread, recording_context

# a traced program that disagrees with eager, or a compiler that fails, warns and runs eagerly: an error here
pytestmark = pytest.mark.filterwarnings("error:gt.function:UserWarning")

SEED = 1234


@pytest.fixture(params=[gt.float64, gt.float32], ids=["float64", "float32"])
def dtype(request):
    """The floating dtype the example runs in (float64: equality with eager to 1e-12)."""
    return request.param


@pytest.fixture(autouse=True)
def _clean_state():
    yield
    gt.random.set_seed(None)
    assert recording_context[0] is None
    assert list(per_thread.tapes) == []


def close(t, expected, rtol=1e-5, atol=1e-6):
    """Comparison of a result with the documented value (float32 precision)."""
    assert t is not None, "expected a gradient, got None"
    np.testing.assert_allclose(np.asarray(t), np.asarray(expected), rtol=rtol, atol=atol)


def is_scalar(t, backend, dtype):
    assert isinstance(t, gt.Tensor) and not isinstance(t, gt.Variable)
    assert t.shape == () and t.dtype == dtype
    assert t.backend == backend.split(":")[0]
    return True


def complex_of(dtype):
    return gt.complex128 if dtype == gt.float64 else gt.complex64


# ------------------------------------------------------------------------------- the eager twin
class Call:
    """One call of a step: its arguments, and new values for the named variables, set before it."""

    def __init__(self, *args, **assign):
        self.args = args
        self.assign = assign


class Run:
    """The ``gt.function`` run of :func:`twins`: per call the returned value (``raw``), its snapshot
    (``outs``) and the variables' snapshot (``state``); ``f`` the function, ``vars`` its variables."""

    def __init__(self, f, variables, raw, outs, state):
        self.f, self.vars, self.raw, self.outs, self.state = f, variables, raw, outs, state


def tolerance(backend, dtype):
    """float64: 1e-12 on the replay path, rtol 1e-9 where XLA compiles (JAX); float32: 1e-6."""
    if dtype in (gt.float32, gt.complex64):
        return 1e-6, 1e-7
    if backend.split(":")[0] == "jax":
        return 1e-9, 1e-12
    return 1e-12, 1e-12


def _zeros_for_none(want, got):
    """``want`` (eager) with a None replaced by ``got`` where ``got`` is all zeros: the gradient of a
    variable read only in the branch not taken is zero in one gt.cond step (as under tf.function)
    where eager code, which records one branch, returns None."""
    if want is None and isinstance(got, (np.ndarray, np.generic)) and not np.any(got):
        return got
    if isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)) and len(want) == len(got):
        return type(want)(_zeros_for_none(w, g) for w, g in zip(want, got))
    if isinstance(want, dict) and isinstance(got, dict):
        return {k: _zeros_for_none(w, got.get(k)) for k, w in want.items()}
    return want


def twins(build, calls, backend, dtype, traces=1, untaken_zeros=False):
    """Run ``build()``'s step eagerly over ``calls``, then a fresh ``build()``'s step under
    ``gt.function`` over the same calls (the global seed set before each build); assert that every
    call's results and variables agree and that the function traced ``traces`` times
    (``untaken_zeros``: a None of eager code may be a zero gradient, see :func:`_zeros_for_none`).

    ``build()`` returns ``(step, variables)``: ``variables`` a dict of the variables that calls
    assign and that are compared (or a callable returning one, or a list), or None."""
    runs = []
    for compiled in (False, True):
        gt.random.set_seed(SEED)
        step, variables = build()
        state = variables if callable(variables) else (lambda v=variables: {} if v is None else v)
        f = gt.function(step) if compiled else step
        raw, outs, states = [], [], []
        for call in calls:
            live = state()
            for name, value in call.assign.items():
                live[name].assign(gt.constant(value, dtype=live[name].dtype))
            out = f(*call.args)
            raw.append(out)
            outs.append(snap(out))
            states.append(snap(state()))
        runs.append(Run(f, state(), raw, outs, states))
    eager, run = runs
    rtol, atol = tolerance(backend, dtype)
    for k in range(len(calls)):
        want = _zeros_for_none(eager.outs[k], run.outs[k]) if untaken_zeros else eager.outs[k]
        assert_same(run.outs[k], want, rtol, atol, f"call {k} result")
        assert_same(run.state[k], eager.state[k], rtol, atol, f"call {k} variables")
    assert run.f.experimental_get_tracing_count() == traces
    return run


def assert_trace_raises(fn, exc, *args, match=None):
    """``gt.function(fn)(*args)`` raises ``exc`` while tracing (as TF raises while tracing) and
    keeps no program."""
    f = gt.function(fn)
    with pytest.raises(exc, match=match):
        f(*args)
    assert f.experimental_get_tracing_count() == 0


# ================================================================================ seed 000 (TF 1.x)
def test_000_gradient_of_x_squared_needs_watch_in_tf2(backend, dtype):
    def build():
        def step(x):
            with gt.GradientTape() as g:
                y = x * x
            return y, g.gradient(y, x)

        return step, None

    r = twins(build, [Call(gt.constant(3.0, dtype)), Call(gt.constant(-1.5, dtype))], backend, dtype)
    close(r.outs[0][0], 9.0)
    close(r.outs[1][0], 2.25)
    assert r.outs[0][1] is None and r.outs[1][1] is None


def test_000_nested_tapes_without_watch(backend, dtype):
    def build():
        def step(x):
            with gt.GradientTape():
                with gt.GradientTape() as gg:
                    y = x * x
                dy_dx = gg.gradient(y, x)
            return y, dy_dx

        return step, None

    r = twins(build, [Call(gt.constant(3.0, dtype)), Call(gt.constant(0.5, dtype))], backend, dtype)
    assert r.outs[0][1] is None and r.outs[1][1] is None
    close(r.outs[1][0], 0.25)

    def differentiate_none(x):
        with gt.GradientTape() as g:
            with gt.GradientTape() as gg:
                y = x * x
            dy_dx = gg.gradient(y, x)
        return g.gradient(dy_dx, x)

    assert_trace_raises(differentiate_none, TypeError, gt.constant(3.0, dtype))


def test_000_persistent_tape_without_watch(backend, dtype):
    def build():
        def step(x):
            with gt.GradientTape(persistent=True) as g:
                y = x * x
                z = y * y
            dz_dx = g.gradient(z, x)
            dy_dx = g.gradient(y, x)
            del g
            return z, dz_dx, dy_dx

        return step, None

    r = twins(build, [Call(gt.constant(3.0, dtype)), Call(gt.constant(-2.0, dtype))], backend, dtype)
    close(r.outs[0][0], 81.0)
    close(r.outs[1][0], 16.0)
    assert r.outs[0][1:] == (None, None) and r.outs[1][1:] == (None, None)


def test_000_persistent_tape_with_variable_gives_documented_values(backend, dtype):
    def build():
        x = gt.Variable(3.0, dtype=dtype)

        def step():
            with gt.GradientTape(persistent=True) as g:
                y = x * x
                z = y * y
            dz_dx, dy_dx = g.gradient(z, x), g.gradient(y, x)
            del g
            return dz_dx, dy_dx

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=-1.25)], backend, dtype)
    close(r.outs[0][0], 108.0)  # 4*x^3 at x = 3
    close(r.outs[0][1], 6.0)
    close(r.outs[1][0], 4 * (-1.25) ** 3)
    close(r.outs[1][1], -2.5)


def test_000_001_reset_two_tapes_equal_one_tape_with_reset(backend, dtype):
    def build():
        x = gt.Variable(2.0, dtype=dtype)
        loss_fn, other_loss_fn = (lambda: x * x), (lambda: 3.0 * x)

        def step():
            with gt.GradientTape() as t:
                loss = loss_fn()
            with gt.GradientTape() as t:
                loss += other_loss_fn()
            g1 = t.gradient(loss, x)
            # The following is equivalent to the above
            with gt.GradientTape() as t:
                loss = loss_fn()
                t.reset()
                loss += other_loss_fn()
            g2 = t.gradient(loss, x)
            return g1, g2, loss

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=-0.5)], backend, dtype)
    for out in r.outs:
        close(out[0], 3.0)  # d(3x)/dx, not d(x^2 + 3x)/dx
        close(out[1], 3.0)
    close(r.outs[0][2], 4.0 + 6.0)
    close(r.outs[1][2], 0.25 - 1.5)


def test_000_001_reset_inside_control_flow(backend, dtype):
    # `if loss > k: t.reset()` is gt.cond: the program is specialised to the branch taken when traced
    # and checks the predicate on each call; the other branch traces a second program.
    def build():
        x = gt.Variable(2.0, dtype=dtype)
        k = 1.0

        def step():
            with gt.GradientTape() as t:
                loss = x * x
                gt.cond(loss > k, t.reset, lambda: None)
                loss = loss + 5.0 * x
            return loss, t.gradient(loss, x)

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=0.5), Call(x=3.0), Call(x=-0.25)], backend, dtype, traces=2)
    close(r.outs[0][1], 5.0)  # reset: only 5x is differentiated
    close(r.outs[1][1], 2 * 0.5 + 5.0)  # loss = 0.25 <= k: no reset
    close(r.outs[2][1], 5.0)
    close(r.outs[3][1], 2 * -0.25 + 5.0)


class _Model:
    """The seeds' ``model``: something with ``.variables`` (a Dense layer, built on its first call)."""

    def __init__(self, dtype):
        self.layer = gt.layers.Dense(2, dtype=dtype)

    @property
    def variables(self):
        return self.layer.variables


def test_000_001_stop_recording(backend, dtype):
    def build():
        model = _Model(dtype)

        def step(inputs):
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no "gradient inside a persistent tape's context" warning
                with gt.GradientTape(persistent=True) as t:
                    loss = gt.reduce_mean(model.layer(inputs) ** 2)
                    with t.stop_recording():
                        # The gradient computation below is not traced, saving memory.
                        grads = t.gradient(loss, model.variables)
            # nothing of the backward pass was recorded: the gradients are not connected to the variables
            return loss, grads, t.gradient(grads[0], model.variables)

        return step, lambda: list(model.variables)

    inputs = [gt.constant([[1.0, 2.0, 3.0]], dtype), gt.constant([[-0.5, 0.25, 2.0]], dtype)]
    r = twins(build, [Call(x) for x in inputs], backend, dtype)
    for out in r.outs:
        _, grads, again = out
        assert isinstance(grads, list) and [g.shape for g in grads] == [(3, 2), (2,)]
        assert again == [None, None]
    layer_name = r.vars[0].name.split("/")[0]
    assert [v.name for v in r.vars] == [f"{layer_name}/kernel:0", f"{layer_name}/bias:0"]
    kernel, bias = r.state[0]
    y = np.asarray([[-0.5, 0.25, 2.0]]) @ kernel + bias  # loss = mean(y^2) over 2 entries: dl/dy = y
    close(r.outs[1][1][0], np.asarray([[-0.5], [0.25], [2.0]]) @ y, rtol=1e-4)
    close(r.outs[1][1][1], y[0], rtol=1e-4)


def test_000_001_watch_a_tensor_or_list_and_reject_others(backend, dtype):
    def build():
        def step(a, b):
            with gt.GradientTape() as t:
                t.watch([a, b])
                y = a * b
                with pytest.raises(ValueError):  # runs while tracing only
                    t.watch("not a tensor")
            return t.gradient(y, [a, b])

        return step, None

    calls = [
        Call(gt.constant(1.0, dtype), gt.constant(2.0, dtype)),
        Call(gt.constant(-3.0, dtype), gt.constant(0.5, dtype)),
    ]
    r = twins(build, calls, backend, dtype)
    close(r.outs[0][0], 2.0)
    close(r.outs[0][1], 1.0)
    close(r.outs[1][0], 0.5)
    close(r.outs[1][1], -3.0)


def test_000_001_watched_variables_in_order_of_construction(backend, dtype):
    def build():
        v1 = gt.Variable(1.0, name="v1", dtype=dtype)
        v2 = gt.Variable(2.0, name="v2", dtype=dtype)
        v3 = gt.Variable(3.0, name="v3", dtype=dtype)

        def step():
            with gt.GradientTape() as t:
                y = v3 * v1 + v2
            return y, [v.name for v in t.watched_variables()]  # names: Python values of the trace

        return step, {"v1": v1, "v2": v2, "v3": v3}

    r = twins(build, [Call(), Call(v1=-1.0, v2=0.5, v3=4.0)], backend, dtype)
    close(r.outs[0][0], 5.0)
    close(r.outs[1][0], -3.5)
    assert r.outs[1][1] == ["v1:0", "v2:0", "v3:0"]


def test_000_001_only_real_or_complex_dtypes_are_differentiable(backend, dtype):
    cdtype = complex_of(dtype)

    def build():
        def step(i, z):
            with gt.GradientTape() as t:
                with pytest.warns(UserWarning):  # while tracing (eagerly: every call)
                    t.watch(i)
                t.watch(z)
                y = gt.sum(gt.real(z * gt.conj(z)))
            return y, t.gradient(y, z)

        return step, None

    zs = [np.array([1 + 1j, 2 - 1j]), np.array([0.5j, -3.0 + 0.25j])]
    calls = [Call(gt.constant([1, 2]), gt.constant(z, cdtype)) for z in zs]
    r = twins(build, calls, backend, cdtype)
    for z, (y, gz) in zip(zs, r.outs):
        close(gz, 2 * z)  # |z|^2 -> 2z (API.md §4)
        close(y, np.sum(np.abs(z) ** 2))
    assert r.raw[1][1].dtype == cdtype


def test_000_001_gradient_twice_on_non_persistent_tape_is_runtime_error(backend, dtype):
    def build():
        def step(x):
            with gt.GradientTape() as g:
                g.watch(x)
                y = x * x
                dy_dx = g.gradient(y, x)  # inside the context: fine
            return dy_dx

        return step, None

    r = twins(build, [Call(gt.constant(3.0, dtype)), Call(gt.constant(0.25, dtype))], backend, dtype)
    close(r.outs[0], 6.0)
    close(r.outs[1], 0.5)

    def twice(x):
        with gt.GradientTape() as g:
            g.watch(x)
            y = x * x
        g.gradient(y, x)
        return g.gradient(y, x)

    assert_trace_raises(twice, RuntimeError, gt.constant(3.0, dtype))


# ================================================================================ seed 001 (TF 2 API)
def _watched_square(x):
    with gt.GradientTape() as g:
        g.watch(x)
        y = x * x
    return g.gradient(y, x)


def test_001_gradient_with_watch(backend, dtype):
    r = twins(
        lambda: (_watched_square, None),
        [Call(gt.constant(3.0, dtype)), Call(gt.constant(-0.75, dtype))],
        backend,
        dtype,
    )
    close(r.outs[0], 6.0)  # Will compute to 6.0
    close(r.outs[1], -1.5)
    assert is_scalar(r.raw[1], backend, dtype)


def test_001_nested_tapes_second_derivative(backend, dtype):
    def step(x):
        with gt.GradientTape() as g:
            g.watch(x)
            with gt.GradientTape() as gg:
                gg.watch(x)
                y = x * x
            dy_dx = gg.gradient(y, x)  # Will compute to 6.0
        d2y_dx2 = g.gradient(dy_dx, x)  # Will compute to 2.0
        return dy_dx, d2y_dx2

    r = twins(lambda: (step, None), [Call(gt.constant(3.0, dtype)), Call(gt.constant(-2.0, dtype))], backend, dtype)
    close(r.outs[0][0], 6.0)
    close(r.outs[0][1], 2.0)
    close(r.outs[1][0], -4.0)
    close(r.outs[1][1], 2.0)


def test_001_persistent_tape(backend, dtype):
    def step(x):
        with gt.GradientTape(persistent=True) as g:
            g.watch(x)
            y = x * x
            z = y * y
        dz_dx = g.gradient(z, x)  # 108.0 (4*x^3 at x = 3)
        dy_dx = g.gradient(y, x)  # 6.0
        del g  # Drop the reference to the tape
        return dz_dx, dy_dx

    r = twins(lambda: (step, None), [Call(gt.constant(3.0, dtype)), Call(gt.constant(0.5, dtype))], backend, dtype)
    close(r.outs[0][0], 108.0)
    close(r.outs[0][1], 6.0)
    close(r.outs[1][0], 0.5)
    close(r.outs[1][1], 1.0)


def test_001_watch_accessed_variables_false(backend, dtype):
    def build():
        variable_a = gt.Variable(2.0, dtype=dtype)
        variable_b = gt.Variable(3.0, dtype=dtype)

        def step():
            with gt.GradientTape(watch_accessed_variables=False) as tape:
                tape.watch(variable_a)
                y = variable_a**2  # Gradients will be available for `variable_a`.
                z = variable_b**3  # No gradients will be available since `variable_b` is
                # not being watched.
            ga, gb = tape.gradient([y, z], [variable_a, variable_b])
            return ga, gb, tape.watched_variables()

        return step, {"a": variable_a, "b": variable_b}

    r = twins(build, [Call(), Call(a=-1.5, b=0.5)], backend, dtype)
    close(r.outs[0][0], 4.0)
    close(r.outs[1][0], -3.0)
    assert r.outs[0][1] is None and r.outs[1][1] is None
    watched = r.raw[1][2]
    assert isinstance(watched, tuple) and len(watched) == 1 and watched[0] is r.vars["a"]


def test_001_unbuilt_layers_have_no_variables_to_watch(backend, dtype):
    # Not through twins: the traced program is the first call's, whose tape watched nothing (`a` had
    # no variables yet), so later calls replay it and still give [None, None] -- as tf.function does
    # -- where eager code, `a` now built, would give gradients.
    def build():
        a = gt.layers.Dense(32, dtype=dtype)
        b = gt.layers.Dense(32, dtype=dtype)

        def step(inputs):
            with gt.GradientTape(watch_accessed_variables=False) as tape:
                tape.watch(a.variables)  # Since `a.build` has not been called at this point
                # `a.variables` will return an empty list and the
                # tape will not be watching anything.
                unbuilt = list(a.variables) == []
                result = b(a(inputs))
                grads = tape.gradient(result, a.variables)  # a list of `None`s
            return result, grads, unbuilt

        return step, a, b

    inputs = [gt.constant([[1.0, 2.0, 3.0]], dtype), gt.constant([[0.5, -1.0, 4.0]], dtype)]
    gt.random.set_seed(SEED)
    step, a, b = build()
    eager = snap(step(inputs[0]))
    gt.random.set_seed(SEED)
    step, a, b = build()
    f = gt.function(step)
    rtol, atol = tolerance(backend, dtype)
    assert_same(snap(f(inputs[0])), eager, rtol, atol, "first call")
    result, grads, unbuilt = f(inputs[1])
    assert result.shape == (1, 32) and result.dtype == dtype
    assert len(a.variables) == 2
    assert list(grads) == [None, None] and unbuilt is True
    want = snap(b(a(inputs[1])))  # the forward, eagerly, with the same variables
    assert_same(snap(result), want, rtol, atol, "second call")
    assert f.experimental_get_tracing_count() == 1


def test_001_batch_jacobian(backend, dtype):
    def step(x):
        with gt.GradientTape() as g:
            g.watch(x)
            y = x * x
        return g.batch_jacobian(y, x)

    xs = [[[1.0, 2.0], [3.0, 4.0]], [[-0.5, 2.5], [1.5, 0.25]]]
    r = twins(lambda: (step, None), [Call(gt.constant(x, dtype)) for x in xs], backend, dtype)
    # batch_jacobian is [[[2,  0], [0,  4]], [[6,  0], [0,  8]]]
    close(r.outs[0], [[[2, 0], [0, 4]], [[6, 0], [0, 8]]])
    close(r.outs[1], [np.diag(2 * np.array(row)) for row in xs[1]])
    assert r.raw[1].shape == (2, 2, 2) and r.raw[1].dtype == dtype

    def first_dimensions_differ(x):  # "ValueError ... if first dimension of target and source do not match"
        with gt.GradientTape() as g:
            g.watch(x)
            y = gt.reshape(x, (1, 4))
        return g.batch_jacobian(y, x)

    assert_trace_raises(first_dimensions_differ, ValueError, gt.constant(xs[0], dtype))


def test_001_batch_jacobian_is_the_stack_of_per_example_jacobians(backend, dtype):
    def step(x):
        with gt.GradientTape(persistent=True) as g:
            g.watch(x)
            y = gt.stack([x[0] ** 3, gt.sin(x[1])])
        return g.batch_jacobian(y, x)

    xs = [np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[-1.5, 0.5], [0.25, -2.0]])]
    r = twins(lambda: (step, None), [Call(gt.constant(x, dtype)) for x in xs], backend, dtype)
    for x, out in zip(xs, r.outs):
        close(out, np.stack([np.diag(3 * x[0] ** 2), np.diag(np.cos(x[1]))]))


def test_001_jacobian(backend, dtype):
    def step(x):
        with gt.GradientTape() as g:
            g.watch(x)
            y = x * x
        return g.jacobian(y, x)

    r = twins(
        lambda: (step, None),
        [Call(gt.constant([1.0, 2.0], dtype)), Call(gt.constant([-3.0, 0.5], dtype))],
        backend,
        dtype,
    )
    # jacobian value is [[2., 0.], [0., 4.]]
    close(r.outs[0], [[2.0, 0.0], [0.0, 4.0]])
    close(r.outs[1], [[-6.0, 0.0], [0.0, 1.0]])
    assert r.raw[1].shape == (2, 2) and r.raw[1].dtype == dtype


def test_001_jacobian_of_nested_sources(backend, dtype):
    # (the experimental_use_pfor=False RuntimeError of the eager test is eager-only in TF)
    def step(x, s):
        with gt.GradientTape() as g:
            g.watch([x, s])
            y = x * s
        return g.jacobian(y, {"x": x, "s": s})

    calls = [
        Call(gt.constant([1.0, 2.0], dtype), gt.constant(3.0, dtype)),
        Call(gt.constant([-0.5, 4.0], dtype), gt.constant(-2.0, dtype)),
    ]
    r = twins(lambda: (step, None), calls, backend, dtype)
    close(r.outs[0]["x"], [[3.0, 0.0], [0.0, 3.0]])
    close(r.outs[0]["s"], [1.0, 2.0])
    close(r.outs[1]["x"], [[-2.0, 0.0], [0.0, -2.0]])
    close(r.outs[1]["s"], [-0.5, 4.0])


def test_001_gradient_arguments(backend, dtype):
    def build():
        v = gt.Variable(2.0, dtype=dtype)
        u = gt.Variable(5.0, dtype=dtype)

        def step():
            with gt.GradientTape(persistent=True) as g:
                y1 = v * v
                y2 = 3.0 * v
            with pytest.raises(ValueError):  # runs while tracing only
                g.gradient(y1, u, unconnected_gradients="nonsense")
            return (
                g.gradient([y1, y2], v, output_gradients=[gt.constant(1.0, dtype), gt.constant(10.0, dtype)]),
                g.gradient(v, v),
                g.gradient(y1, u),
                g.gradient(y1, u, unconnected_gradients="zero"),
                g.gradient(y1, u, unconnected_gradients=gt.UnconnectedGradients.ZERO),
            )

        return step, {"v": v, "u": u}

    r = twins(build, [Call(), Call(v=-1.5, u=0.5)], backend, dtype)
    for v, out in zip([2.0, -1.5], r.outs):
        close(out[0], 2 * v + 30.0)
        close(out[1], 1.0)
        assert out[2] is None
        close(out[3], 0.0)
        close(out[4], 0.0)


# ================================================================================ seed 002 (apxml)
def test_002_variable_squared(backend, dtype):
    def build():
        x = gt.Variable(3.0, dtype=dtype)

        def step():
            with gt.GradientTape() as tape:
                y = x * x  # or tf.square(x)
            dy_dx = tape.gradient(y, x)
            with gt.GradientTape() as tape:
                y = gt.square(x)
            return dy_dx, tape.gradient(y, x)

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=-0.5)], backend, dtype)
    close(r.outs[0][0], 6.0)  # tf.Tensor(6.0, shape=(), dtype=float32)
    close(r.outs[0][1], 6.0)
    close(r.outs[1][0], -1.0)
    close(r.outs[1][1], -1.0)
    assert is_scalar(r.raw[1][0], backend, dtype)
    assert "-1.0" in repr(r.raw[1][0]) and dtype.name in repr(r.raw[1][0]) and "shape=()" in repr(r.raw[1][0])


def test_002_watch_a_constant(backend, dtype):
    r = twins(
        lambda: (_watched_square, None), [Call(gt.constant(3.0, dtype)), Call(gt.constant(1.25, dtype))], backend, dtype
    )
    close(r.outs[0], 6.0)
    close(r.outs[1], 2.5)
    assert is_scalar(r.raw[1], backend, dtype)


def test_002_linear_model_gradients(backend, dtype):
    # the whole step: gradients, the SGD update by hand, the loss after it and the tuple of sources
    def build():
        W = gt.Variable(gt.random.normal((3, 1), dtype=dtype), name="weight")
        b = gt.Variable(gt.zeros(1, dtype=dtype), name="bias")

        def step(x_input, y_true):
            with gt.GradientTape() as tape:
                # Forward pass: Compute prediction
                y_pred = gt.matmul(x_input, W) + b
                # Compute loss (e.g., Mean Squared Error)
                loss = gt.reduce_mean(gt.square(y_pred - y_true))
            # Sources can be a list or tuple of variables
            gradients = tape.gradient(loss, [W, b])
            W.assign_sub(0.01 * gradients[0])
            b.assign_sub(0.01 * gradients[1])
            with gt.GradientTape() as tape:
                new_loss = gt.reduce_mean(gt.square(gt.matmul(x_input, W) + b - y_true))
            return y_pred, loss, gradients, new_loss, tape.gradient(new_loss, (W, b))

        return step, {"W": W, "b": b}

    x1, y1 = gt.constant([[1.0, 2.0, 3.0]], dtype), gt.constant([[10.0]], dtype)
    x2, y2 = gt.constant([[-1.0, 0.5, 2.0]], dtype), gt.constant([[-3.0]], dtype)
    r = twins(build, [Call(x1, y1), Call(x1, y1), Call(x2, y2)], backend, dtype)
    assert (r.vars["W"].name, r.vars["b"].name) == ("weight:0", "bias:0")
    for (x, y), (y_pred, loss, gradients, new_loss, as_tuple) in zip([(x1, y1), (x1, y1), (x2, y2)], r.outs):
        assert isinstance(gradients, list) and len(gradients) == 2
        assert gradients[0].shape == (3, 1) and gradients[1].shape == (1,)
        assert np.ndim(loss) == 0
        residual = float(y_pred.reshape(())) - float(y.numpy().reshape(()))
        close(loss, residual**2)
        close(gradients[0], 2 * residual * x.numpy().reshape(3, 1), rtol=1e-4)
        close(gradients[1], [2 * residual], rtol=1e-4)
        assert new_loss < loss  # the gradients point downhill
        assert isinstance(as_tuple, tuple)  # "a list or tuple"
    assert r.outs[1][1] == r.outs[0][3]  # the second call starts from the first's update


def test_002_persistent_tape(backend, dtype):
    def build():
        x = gt.Variable(2.0, dtype=dtype)

        def step():
            with gt.GradientTape(persistent=True) as tape:
                y = x * x  # y = x^2
                z = y * y  # z = y^2 = (x^2)^2 = x^4
            dz_dx = tape.gradient(z, x)
            dy_dx = tape.gradient(y, x)
            del tape
            return dz_dx, dy_dx

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=-0.5)], backend, dtype)
    close(r.outs[0][0], 32.0)  # tf.Tensor(32.0, shape=(), dtype=float32)
    close(r.outs[0][1], 4.0)  # tf.Tensor(4.0, shape=(), dtype=float32)
    close(r.outs[1][0], -0.5)
    close(r.outs[1][1], -1.0)
    assert is_scalar(r.raw[1][0], backend, dtype) and is_scalar(r.raw[1][1], backend, dtype)


def test_002_nested_tapes(backend, dtype):
    def build():
        x = gt.Variable(3.0, dtype=dtype)

        def step():
            with gt.GradientTape() as tape2:
                with gt.GradientTape() as tape1:
                    y = x * x * x  # y = x^3
                # First derivative: dy/dx = 3x^2
                dy_dx = tape1.gradient(y, x)
            # Second derivative: d/dx(dy/dx) = d/dx(3x^2) = 6x = 6*3 = 18
            return y, dy_dx, tape2.gradient(dy_dx, x)

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=-2.0)], backend, dtype)
    close(r.outs[0], (27.0, 27.0, 18.0))
    close(r.outs[1], (-8.0, 12.0, -12.0))


def test_002_control_flow(backend, dtype):
    # `if x > 1.0:` on a variable is gt.cond: one step of both branches (x = 0.5 takes the other)
    def build():
        x = gt.Variable(2.0, dtype=dtype)
        y = gt.Variable(5.0, dtype=dtype)

        def step():
            with gt.GradientTape() as tape:
                result = gt.cond(x > 1.0, lambda: x * y, lambda: x + y)
            # Gradients will be computed based on the path taken (x * y)
            return result, tape.gradient(result, {"x": x, "y": y})

        return step, {"x": x, "y": y}

    r = twins(build, [Call(), Call(x=0.5), Call(x=3.0, y=-1.0), Call(x=-2.0)], backend, dtype, traces=1)
    result, grads = r.outs[0]
    assert isinstance(grads, dict) and set(grads) == {"x", "y"}
    close(grads["x"], 5.0)  # tf.Tensor(5.0, shape=(), dtype=float32)
    close(grads["y"], 2.0)  # tf.Tensor(2.0, shape=(), dtype=float32)
    close(result, 10.0)
    close(r.outs[1][0], 5.5)
    close([r.outs[1][1]["x"], r.outs[1][1]["y"]], [1.0, 1.0])
    close(r.outs[2][0], -3.0)
    close(r.outs[2][1]["x"], -1.0)
    close(r.outs[2][1]["y"], 3.0)
    close(r.outs[3][0], -3.0)
    close(r.outs[3][1]["x"], 1.0)


def test_002_round_is_not_differentiable(backend, dtype):
    def build():
        x = gt.Variable(2.7, dtype=dtype)

        def step():
            with gt.GradientTape() as tape:
                # tf.round is not differentiable
                y = gt.round(x)
            return y, tape.gradient(y, x)

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=-1.2)], backend, dtype)
    assert r.outs[0][1] is None and r.outs[1][1] is None  # Output: None
    close(r.outs[0][0], 3.0)
    close(r.outs[1][0], -1.0)


def test_002_cast_to_integer_and_argmax_are_not_differentiable(backend, dtype):
    def build():
        x = gt.Variable([2.7, 0.5], dtype=dtype)

        def step():
            with gt.GradientTape(persistent=True) as tape:
                c = gt.cast(gt.cast(x, gt.int32), dtype) * 2.0
                a = gt.cast(gt.argmax(x), dtype) + 1.0
            return c, a, tape.gradient(c, x), tape.gradient(a, x)

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=[0.25, -3.5])], backend, dtype)
    close(r.outs[0][0], [4.0, 0.0])
    close(r.outs[1][0], [0.0, -6.0])
    close([r.outs[0][1], r.outs[1][1]], [1.0, 1.0])
    for out in r.outs:
        assert out[2:] == (None, None)


@gt.custom_gradient
def clipped_identity(x):
    def grad(dy):
        return gt.clip(dy, min=-1.0, max=1.0)

    return x * 1.0, grad


def test_002_custom_gradient_mentioned(backend, dtype):
    def build():
        x = gt.Variable(2.0, dtype=dtype)

        def step(scale):
            with gt.GradientTape() as tape:
                y = clipped_identity(x) * scale
            return y, tape.gradient(y, x)

        return step, {"x": x}

    calls = [Call(gt.constant(5.0, dtype)), Call(gt.constant(0.25, dtype), x=-3.0)]
    r = twins(build, calls, backend, dtype)
    close(r.outs[0], (10.0, 1.0))  # the gradient 5.0 clipped to 1.0
    close(r.outs[1], (-0.75, 0.25))  # within the clip


# ================================================================================ seed 003 (Medium)
def test_003_1_0_watch_a_constant_and_cube_it(backend, dtype):
    def step(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = x**3
        return tape.gradient(y, x)

    r = twins(lambda: (step, None), [Call(gt.constant(3.0, dtype)), Call(gt.constant(-0.5, dtype))], backend, dtype)
    grad = r.raw[1]
    assert type(grad).__name__ == "Tensor"  # TF: EagerTensor
    assert isinstance(grad.numpy(), np.ndarray)
    close(r.outs[0], 27.0)
    close(grad.numpy(), 0.75)


def test_003_1_0_several_variables_as_a_list_or_tuple(backend, dtype):
    def build():
        x = gt.Variable(3.0, dtype=dtype)
        y = gt.Variable(2.0, dtype=dtype)

        def step():
            with gt.GradientTape(persistent=True) as tape:
                z = x**2 * y
            return tape.gradient(z, [x, y]), tape.gradient(z, (x, y))

        return step, {"x": x, "y": y}

    r = twins(build, [Call(), Call(x=-1.0, y=4.0)], backend, dtype)
    for (x, y), (as_list, as_tuple) in zip([(3.0, 2.0), (-1.0, 4.0)], r.outs):
        assert isinstance(as_list, list) and isinstance(as_tuple, tuple)
        for g in (as_list, as_tuple):
            close(g[0], 2 * x * y)
            close(g[1], x**2)


def test_003_1_1_variables_are_watched_automatically(backend, dtype):
    def build():
        x = gt.Variable(3.0, dtype=dtype)

        def step():
            with gt.GradientTape() as tape:
                y = x**3
            return tape.gradient(y, x)

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=2.0)], backend, dtype)
    close(r.outs[0], 27.0)
    close(r.outs[1], 12.0)


def test_003_1_1_non_trainable_variable_is_not_watched(backend, dtype):
    def build():
        x = gt.Variable(3.0, trainable=False, dtype=dtype)

        def step():
            with gt.GradientTape() as tape:
                y = x**3
            return y, tape.gradient(y, x)

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=-2.0)], backend, dtype)
    close(r.outs[1][0], -8.0)
    grad = r.raw[1][1]
    assert grad is None
    with pytest.raises(AttributeError):
        grad.numpy()


def test_003_1_2_watch_accessed_variables_false(backend, dtype):
    def build():
        x = gt.Variable(3.0, dtype=dtype)
        y = gt.Variable(2.0, dtype=dtype)

        def step():
            with gt.GradientTape(watch_accessed_variables=False) as tape:
                tape.watch(x)
                z = x**3 + y**2
            gx, gy = tape.gradient(z, [x, y])
            return gx, gy, [v.name for v in tape.watched_variables()]

        return step, {"x": x, "y": y}

    r = twins(build, [Call(), Call(x=0.5, y=-1.0)], backend, dtype)
    close(r.outs[0][0], 27.0)
    close(r.outs[1][0], 0.75)
    assert r.outs[0][1] is None and r.outs[1][1] is None
    assert r.outs[1][2] == [r.vars["x"].name]


def test_003_1_3_higher_order_with_nested_tapes(backend, dtype):
    def step(x):
        with gt.GradientTape() as t2:
            t2.watch(x)
            with gt.GradientTape() as t1:
                t1.watch(x)
                y = x**3
            dy_dx = t1.gradient(y, x)
        return dy_dx, t2.gradient(dy_dx, x)

    r = twins(lambda: (step, None), [Call(gt.constant(3.0, dtype)), Call(gt.constant(-1.5, dtype))], backend, dtype)
    close(r.outs[0], (27.0, 18.0))
    close(r.outs[1], (6.75, -9.0))


def test_003_1_4_second_gradient_needs_persistent(backend, dtype):
    def step(x):
        with gt.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = x**3
            z = x**2
        return tape.gradient(y, x), tape.gradient(z, x)  # "Just as expected!"

    r = twins(lambda: (step, None), [Call(gt.constant(3.0, dtype)), Call(gt.constant(0.5, dtype))], backend, dtype)
    close(r.outs[0], (27.0, 6.0))
    close(r.outs[1], (0.75, 1.0))

    def not_persistent(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = x**3
            z = x**2
        return tape.gradient(y, x), tape.gradient(z, x)  # "will raise an error"

    assert_trace_raises(not_persistent, RuntimeError, gt.constant(3.0, dtype))


def test_003_1_5_stop_recording_blocks_in_the_middle_of_a_function(backend, dtype):
    def build():
        x = gt.Variable(3.0, dtype=dtype)

        def step():
            with gt.GradientTape(persistent=True) as tape:
                y = x**2
                with tape.stop_recording():
                    dy_dx = tape.gradient(y, x)
                z = y * x
                with tape.stop_recording():
                    dz_dx = tape.gradient(z, x)
            return dy_dx, dz_dx, tape.gradient(dy_dx, x)  # the gradients were not recorded: None

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=-2.0)], backend, dtype)
    close(r.outs[0][:2], (6.0, 27.0))
    close(r.outs[1][:2], (-4.0, 12.0))
    assert r.outs[0][2] is None and r.outs[1][2] is None


def test_003_1_6_other_methods(backend, dtype):
    # .jacobian, .batch_jacobian, .reset, .watched_variables
    def build():
        x = gt.Variable([[1.0, 2.0], [3.0, 4.0]], dtype=dtype)

        def step():
            with gt.GradientTape(persistent=True) as tape:
                y = x**2
            jac, batch_jac, watched = tape.jacobian(y, x), tape.batch_jacobian(y, x), tape.watched_variables()
            with gt.GradientTape() as tape:
                y = x**2
                tape.reset()
                z = 3.0 * x
            return jac, batch_jac, watched, tape.gradient([y, z], x)  # y is no longer on the tape

        return step, {"x": x}

    x2 = np.array([[-0.5, 1.5], [2.0, -3.0]])
    r = twins(build, [Call(), Call(x=x2)], backend, dtype)
    for x, out in zip([np.array([[1.0, 2.0], [3.0, 4.0]]), x2], r.outs):
        close(out[0], np.einsum("ij,ik,jl->ijkl", 2 * x, np.eye(2), np.eye(2)))
        close(out[1], [np.diag(2 * x[0]), np.diag(2 * x[1])])
        close(out[3], [[3.0, 3.0], [3.0, 3.0]])
    watched = r.raw[1][2]
    assert len(watched) == 1 and watched[0] is r.vars["x"]


def test_003_2_0_linear_regression_step(backend, dtype):
    # the step of the training loop, compiled: gradients of the loss w.r.t. [a, b], "multiplying the
    # gradients by 0.001 acts as a learning rate"; 21 steps, each compared with eager
    def build():
        xs = gt.linspace(-1.0, 1.0, 16, dtype=dtype)
        ys = 10.0 * xs + 5.0
        a = gt.Variable(0.0, dtype=dtype)
        b = gt.Variable(0.0, dtype=dtype)

        def step():
            with gt.GradientTape() as tape:
                loss = gt.reduce_mean((a * xs + b - ys) ** 2)
            grads = tape.gradient(loss, [a, b])
            a.assign_sub(grads[0] * 0.001)
            b.assign_sub(grads[1] * 0.001)
            return loss, grads

        return step, {"a": a, "b": b}

    r = twins(build, [Call() for _ in range(21)], backend, dtype)
    loss0, grads = r.outs[0]
    assert isinstance(grads, list) and all(is_scalar(g, backend, dtype) for g in r.raw[1][1])
    close(grads[1], -10.0, rtol=1e-5)  # d/db mean((b - 10x - 5)^2) at 0
    close(grads[0], -20.0 * float(np.mean(np.linspace(-1.0, 1.0, 16) ** 2)), rtol=1e-5)
    losses = [out[0] for out in r.outs]
    assert all(b < a for a, b in zip(losses, losses[1:]))


def test_003_2_1_polynomial_regression_step(backend, dtype):
    def build():
        xs = gt.linspace(-1.0, 1.0, 16, dtype=dtype)
        ys = 6.0 * xs**2 + 7.5 * xs + 2.0
        a, b, c = gt.Variable(0.0, dtype=dtype), gt.Variable(0.0, dtype=dtype), gt.Variable(0.0, dtype=dtype)

        def step():
            with gt.GradientTape() as tape:
                loss = gt.reduce_mean((a * xs**2 + b * xs + c - ys) ** 2)
            return tape.gradient(loss, [a, b, c])

        return step, {"a": a, "b": b, "c": c}

    r = twins(build, [Call(), Call(a=6.0, b=7.0, c=2.5)], backend, dtype)
    x = np.linspace(-1.0, 1.0, 16)
    for (a, b, c), grads in zip([(0.0, 0.0, 0.0), (6.0, 7.0, 2.5)], r.outs):
        res = a * x**2 + b * x + c - (6.0 * x**2 + 7.5 * x + 2.0)
        close(grads[0], np.mean(2 * res * x**2), rtol=1e-4, atol=1e-5)
        close(grads[1], np.mean(2 * res * x), rtol=1e-4, atol=1e-5)
        close(grads[2], np.mean(2 * res), rtol=1e-4, atol=1e-5)


# ================================================================================ seed 004 (guide)
def test_004_gradient_tapes(backend, dtype):
    def build():
        x = gt.Variable(3.0, dtype=dtype)

        def step():
            with gt.GradientTape() as tape:
                y = x**2
            # dy = 2x * dx
            return tape.gradient(y, x)

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=-1.5)], backend, dtype)
    assert r.raw[0].numpy() == 6.0
    assert r.raw[1].numpy() == -3.0


def test_004_any_tensor_and_nested_sources(backend, dtype):
    # x is a tensor argument (the seed's Python list would be a Python value: one trace per value)
    def build():
        w = gt.Variable(gt.random.normal((3, 2), dtype=dtype), name="w")
        b = gt.Variable(gt.zeros(2, dtype=dtype), name="b")
        # the seed's new variables, not used by `loss`: their gradients are None
        my_vars = {
            "w": gt.Variable(gt.random.normal((3, 2), dtype=dtype), name="w"),
            "b": gt.Variable(gt.zeros(2, dtype=dtype), name="b"),
        }

        def step(x):
            with gt.GradientTape(persistent=True) as tape:
                y = x @ w + b
                loss = gt.reduce_mean(y**2)
            [dl_dw, dl_db] = tape.gradient(loss, [w, b])
            return y, dl_dw, dl_db, tape.gradient(loss, my_vars), tape.gradient(loss, {"w": w, "b": b})

        return step, {"w": w, "b": b, "my_w": my_vars["w"]}

    xs = [[[1.0, 2.0, 3.0]], [[-0.5, 2.0, 0.25]]]
    r = twins(build, [Call(gt.constant(x, dtype)) for x in xs], backend, dtype)
    for x, (y, dl_dw, dl_db, grad_my, grad) in zip(xs, r.outs):
        assert dl_dw.shape == (3, 2)
        # analytic: loss = mean of the 2 entries of y^2, so dl/dy = y, dl/db = y[0], dl/dw = x^T y
        close(dl_db, y[0], rtol=1e-4)
        close(dl_dw, np.array(x).T @ y, rtol=1e-4)
        assert isinstance(grad_my, dict) and grad_my == {"w": None, "b": None}
        close(grad["b"], dl_db)
        assert grad["b"].shape == (2,)


def test_004_gradients_with_respect_to_a_model(backend, dtype):
    def build():
        gt.layers.clear_session()  # a fresh process in TF: the first Dense is named "dense"
        layer = gt.layers.Dense(2, activation="relu", dtype=dtype)

        def step(x):
            with gt.GradientTape() as tape:
                # Forward pass
                y = layer(x)
                loss = gt.reduce_mean(y**2)
            # Calculate gradients with respect to every trainable variable
            return loss, tape.gradient(loss, layer.trainable_variables)

        return step, lambda: list(layer.trainable_variables)

    xs = [gt.constant([[1.0, 2.0, 3.0]], dtype), gt.constant([[0.5, -1.0, 2.0]], dtype)]
    r = twins(build, [Call(x) for x in xs], backend, dtype)
    for _, grad in r.outs:
        lines = [f"{var.name}, shape: {g.shape}" for var, g in zip(r.vars, grad)]
        assert lines == ["dense/kernel:0, shape: (3, 2)", "dense/bias:0, shape: (2,)"]


def test_004_controlling_what_the_tape_watches(backend, dtype):
    def build():
        # A trainable variable
        x0 = gt.Variable(3.0, name="x0", dtype=dtype)
        # Not trainable
        x1 = gt.Variable(3.0, name="x1", trainable=False, dtype=dtype)

        def step(x2, x3):
            with gt.GradientTape() as tape:
                y = (x0**2) + (x1**2) + (x2**2)
            grad = tape.gradient(y, [x0, x1, x2, x3])
            return y, grad, [var.name for var in tape.watched_variables()]

        return step, {"x0": x0, "x1": x1}

    # Not a Variable: A variable + tensor returns a tensor.
    x2 = gt.Variable(2.0, name="x2", dtype=dtype) + 1.0
    # Not a variable
    x3 = gt.constant(3.0, name="x3", dtype=dtype)
    assert type(x2).__name__ == "Tensor"
    calls = [Call(x2, x3), Call(gt.constant(-1.0, dtype), gt.constant(0.5, dtype), x0=-2.0, x1=0.25)]
    r = twins(build, calls, backend, dtype)
    # tf.Tensor(6.0, shape=(), dtype=float32) None None None
    close(r.outs[0][1][0], 6.0)
    close(r.outs[1][1][0], -4.0)
    close(r.outs[1][0], 4.0 + 0.0625 + 1.0)
    assert is_scalar(r.raw[1][1][0], backend, dtype)
    for out in r.outs:
        assert out[1][1:] == [None, None, None]
        assert out[2] == ["x0:0"]


def test_004_watch_a_tensor(backend, dtype):
    def step(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = x**2
        # dy = 2x * dx
        return tape.gradient(y, x)

    r = twins(lambda: (step, None), [Call(gt.constant(3.0, dtype)), Call(gt.constant(0.75, dtype))], backend, dtype)
    assert r.raw[0].numpy() == 6.0
    assert r.raw[1].numpy() == 1.5


def test_004_watch_accessed_variables_false(backend, dtype):
    def build():
        x0 = gt.Variable(0.0, dtype=dtype)
        x1 = gt.Variable(10.0, dtype=dtype)

        def step():
            with gt.GradientTape(watch_accessed_variables=False) as tape:
                tape.watch(x1)
                y0 = gt.math.sin(x0)
                y1 = gt.nn.softplus(x1)
                y = y0 + y1
                ys = gt.reduce_sum(y)
            return tape.gradient(ys, {"x0": x0, "x1": x1})

        return step, {"x0": x0, "x1": x1}

    r = twins(build, [Call(), Call(x0=0.5, x1=-2.0)], backend, dtype)
    # dy/dx0: None dy/dx1: 0.9999546
    assert r.outs[0]["x0"] is None and r.outs[1]["x0"] is None
    close(r.outs[0]["x1"], 0.9999546)
    assert f"{r.raw[0]['x1'].numpy():.7f}" == "0.9999546"
    close(r.outs[1]["x1"], 1 / (1 + np.exp(2.0)))  # softplus' = sigmoid


def test_004_intermediate_results(backend, dtype):
    def step(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = x * x
            z = y * y
        # Use the tape to compute the gradient of z with respect to the
        # intermediate value y.
        # dz_dx = 2 * y, where y = x ** 2
        return tape.gradient(z, y)

    r = twins(lambda: (step, None), [Call(gt.constant(3.0, dtype)), Call(gt.constant(-1.5, dtype))], backend, dtype)
    assert r.raw[0].numpy() == 18.0
    assert r.raw[1].numpy() == 4.5


def test_004_persistent_tape(backend, dtype):
    def step(x):
        with gt.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = x * x
            z = y * y
        dz_dx, dy_dx = tape.gradient(z, x), tape.gradient(y, x)
        del tape  # Drop the reference to the tape
        return dz_dx, dy_dx

    r = twins(
        lambda: (step, None),
        [Call(gt.constant([1, 3.0], dtype)), Call(gt.constant([-2.0, 0.5], dtype))],
        backend,
        dtype,
    )
    close(r.outs[0][0], [4.0, 108.0])  # 108.0 (4 * x**3 at x = 3)
    close(r.outs[0][1], [2.0, 6.0])  # 6.0 (2 * x)
    close(r.outs[1][0], [-32.0, 0.5])
    close(r.outs[1][1], [-4.0, 1.0])


def test_004_non_scalar_targets(backend, dtype):
    def build():
        xa, xb, xc = (gt.Variable(2.0, dtype=dtype) for _ in range(3))

        def step():
            x = xa
            with gt.GradientTape(persistent=True) as tape:
                y0 = x**2
                y1 = 1 / x
            g0, g1 = tape.gradient(y0, x), tape.gradient(y1, x)

            x = xb
            with gt.GradientTape() as tape:
                y0 = x**2
                y1 = 1 / x
            g_dict = tape.gradient({"y0": y0, "y1": y1}, x)

            x = xc
            with gt.GradientTape() as tape:
                y = x * [3.0, 4.0]
            return g0, g1, g_dict, tape.gradient(y, x)

        return step, {"xa": xa, "xb": xb, "xc": xc}

    r = twins(build, [Call(), Call(xa=-0.5, xb=-0.5, xc=-0.5)], backend, dtype)
    assert [float(g) for g in r.outs[0]] == [4.0, -0.25, 3.75, 7.0]
    assert [float(g) for g in r.outs[1]] == [-1.0, -4.0, -5.0, 7.0]


def test_004_elementwise_gradient_of_sigmoid(backend, dtype):
    def step(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.nn.sigmoid(x)
        return y, tape.gradient(y, x)

    grids = [np.linspace(-10.0, 10.0, 201), np.linspace(-4.0, 6.0, 201)]
    r = twins(lambda: (step, None), [Call(gt.linspace(g[0], g[-1], 201, dtype=dtype)) for g in grids], backend, dtype)
    # (the guide plots y and dy/dx; the plot shows the sigmoid and its bell-shaped derivative)
    for grid, (y, dy_dx) in zip(grids, r.outs):
        assert y.shape == dy_dx.shape == (201,)
        s = 1 / (1 + np.exp(-grid))
        close(y, s, atol=1e-6)
        close(dy_dx, s * (1 - s), atol=1e-6)
    assert r.raw[1][1].dtype == dtype
    assert int(np.argmax(r.outs[0][1])) == 100
    assert int(np.argmax(r.outs[1][1])) == 80  # x = 0 on the second grid


def test_004_control_flow(backend, dtype):
    # `if x > 0.0:` is gt.cond, one step of both branches: the variable of the branch not taken gets
    # a zero gradient where eager code gives None, as under tf.function (checked with TensorFlow 2.21:
    # dv1 = 0.0 for x > 0, dx None)
    def build():
        v0 = gt.Variable(2.0, dtype=dtype)
        v1 = gt.Variable(2.0, dtype=dtype)

        def step(x):
            with gt.GradientTape(persistent=True) as tape:
                tape.watch(x)
                result = gt.cond(x > 0.0, lambda: v0, lambda: v1**2)
            dv0, dv1 = tape.gradient(result, [v0, v1])
            return result, dv0, dv1, tape.gradient(result, x)

        return step, {"v0": v0, "v1": v1}

    calls = [
        Call(gt.constant(1.0, dtype)),
        Call(gt.constant(-1.0, dtype)),
        Call(gt.constant(2.5, dtype), v0=-0.5),
        Call(gt.constant(-3.0, dtype), v1=1.5),
    ]
    r = twins(build, calls, backend, dtype, traces=1, untaken_zeros=True)
    result, dv0, dv1, dx = r.outs[0]
    # tf.Tensor(1.0, shape=(), dtype=float32) None
    close(dv0, 1.0)
    assert is_scalar(r.raw[2][1], backend, dtype)
    close(dv1, 0.0)  # (eager: None)
    assert dx is None  # the control statements themselves are not differentiable
    close(result, 2.0)
    close(r.outs[1][0], 4.0)
    close(r.outs[1][1], 0.0)
    assert r.outs[1][3] is None
    close(r.outs[1][2], 4.0)
    close(r.outs[2][:2], (-0.5, 1.0))
    close(r.outs[3][0], 2.25)
    close(r.outs[3][2], 3.0)
    assert all(out[3] is None for out in r.outs)


def test_002_004_while_loop(backend, dtype):
    # The seeds show no loop on a tensor, but both say one is handled: "Python control flow (using ifs
    # and whiles for example) is naturally handled" (004); under tf.function AutoGraph makes it a
    # tf.while_loop and the tape differentiates through it (002).  `while y < 100: y = y * x` is
    # gt.while_loop: the program checks the trip count it was traced with; another count retraces.
    def build():
        x = gt.Variable(3.0, dtype=dtype)

        def step(cap):
            with gt.GradientTape(persistent=True) as tape:
                i, y = gt.while_loop(lambda i, y: y < 100.0, lambda i, y: (i + 1, y * x), [gt.constant(0), x])
                # with maximum_iterations (TF: reverse-differentiable): at most `cap` steps
                z = gt.while_loop(lambda z: z < 1e9, lambda z: z * x, [x], maximum_iterations=cap)[0]
            return i, y, tape.gradient(y, x), z, tape.gradient(z, x)

        return step, {"x": x}

    calls = [Call(3), Call(3, x=2.9), Call(3, x=4.0), Call(3, x=2.0), Call(3, x=3.0), Call(2, x=1.5)]
    # trip counts 4, 4, 3, 6, 4: one step each loop; a new Python cap is a new signature.  On JAX a
    # gradient through a loop without maximum_iterations is not one step (lax.scan needs a bound): the
    # program checks the trip count it was traced with (4, 4 replayed, 3, 6, 4 the first program again)
    r = twins(build, calls, backend, dtype, traces=4 if backend.split(":")[0] == "jax" else 2)
    for x, (i, y, dy_dx, z, dz_dx) in zip([3.0, 2.9, 4.0, 2.0, 3.0], r.outs):
        n = int(i) + 1  # y = x ** n
        assert x ** (n - 1) < 100.0 <= x**n
        close(y, x**n)
        close(dy_dx, n * x ** (n - 1))
        close(z, x**4)
        close(dz_dx, 4 * x**3)
    assert [int(out[0]) for out in r.outs[:5]] == [4, 4, 3, 6, 4]
    close(r.outs[5][3], 1.5**3)
    close(r.outs[5][4], 3 * 1.5**2)


def test_004_unconnected_gives_none(backend, dtype):
    def build():
        x = gt.Variable(2.0, dtype=dtype)
        y = gt.Variable(3.0, dtype=dtype)

        def step():
            with gt.GradientTape() as tape:
                z = y * y
            return z, tape.gradient(z, x)

        return step, {"x": x, "y": y}

    r = twins(build, [Call(), Call(x=1.0, y=-0.5)], backend, dtype)
    close(r.outs[1][0], 0.25)
    assert r.outs[0][1] is None and r.outs[1][1] is None


def test_004_replaced_a_variable_with_a_tensor(backend, dtype):
    # the seed's Python loop is unrolled when traced; the type names are Python values of the trace
    def build():
        v = gt.Variable(2.0, dtype=dtype)
        w = gt.Variable(2.0, dtype=dtype)

        def step():
            printed = []
            x = v
            for epoch in range(2):  # noqa: B007 - the seed's loop
                with gt.GradientTape() as tape:
                    y = x + 1
                printed.append((type(x).__name__, tape.gradient(y, x)))
                x = x + 1  # This should be `x.assign_add(1)`
            # and with assign_add, as the comment says, the variable stays a variable
            x = w
            grads = []
            for epoch in range(2):  # noqa: B007 - the seed's loop
                with gt.GradientTape() as tape:
                    y = x + 1
                grads.append(tape.gradient(y, x))
                x.assign_add(1)
            return printed, grads, type(x).__name__

        return step, {"v": v, "w": w}

    r = twins(build, [Call(), Call(v=-1.0), Call(w=0.5)], backend, dtype)
    for printed, grads, kind in r.outs:
        # ResourceVariable : tf.Tensor(1.0, shape=(), dtype=float32)
        # EagerTensor : None
        assert printed[0][0] == "Variable"
        close(printed[0][1], 1.0)
        assert printed[1] == ("Tensor", None)
        close(grads, [1.0, 1.0])
        assert kind == "Variable"
    assert is_scalar(r.raw[1][0][0][1], backend, dtype)
    assert [float(s["w"]) for s in r.state] == [4.0, 6.0, 2.5]


def test_004_calculations_outside_gradtape_cannot_be_traced(backend, dtype):
    # NumPy cannot compute on a traced tensor (TF: "Cannot convert a symbolic tf.Tensor to a numpy
    # array"): the example is not portable to gt.function; the trace fails with a clear error.
    x = gt.Variable([[1.0, 2.0], [3.0, 4.0]], dtype=dtype)

    def step():
        with gt.GradientTape() as tape:
            x2 = x**2
            # This step is calculated with NumPy
            y = np.mean(x2, axis=0)
            y = gt.reduce_mean(y, axis=0)
        return tape.gradient(y, x)

    with pytest.warns(gt.GradientLeakWarning):  # (as eagerly: the conversion leaves the tape)
        assert_trace_raises(step, gt.OperatorNotAllowedInGraphError, match="NumPy|numpy")


def test_004_gradients_through_an_integer(backend):
    # integer only: the example's dtype is the point (the results are exact)
    def build():
        # The x0 variable has an `int` dtype.
        x = gt.Variable([[2, 2], [2, 2]])

        def step():
            with gt.GradientTape() as tape:
                # The path to x1 is blocked by the `int` dtype here.
                y = gt.cast(x, gt.float32)
                y = gt.reduce_sum(x)
            with warnings.catch_warnings(record=True) as caught:  # warns while tracing only
                warnings.simplefilter("always")
                g = tape.gradient(y, x)
            messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
            return y, g, messages

        return step, {"x": x}

    r = twins(build, [Call(), Call(x=[[1, -3], [5, 0]])], backend, gt.int64)
    y, g, messages = r.outs[0]
    assert g is None and r.outs[1][1] is None
    assert len(messages) == 2
    assert messages[0].startswith(
        "The dtype of the target tensor must be floating (e.g. gt.float32) "
        "when calling GradientTape.gradient, got int64"
    )
    assert messages[1].startswith(
        "The dtype of the source tensor must be floating (e.g. gt.float32) "
        "when calling GradientTape.gradient, got int64"
    )
    assert int(y) == 8 and int(r.outs[1][0]) == 3
    assert r.raw[1][0].dtype == gt.int64


def test_004_state_stops_gradients(backend, dtype):
    def build():
        x0 = gt.Variable(3.0, dtype=dtype)
        x1 = gt.Variable(0.0, dtype=dtype)

        def step():
            with gt.GradientTape() as tape:
                # Update x1 = x1 + x0.
                x1.assign_add(x0)
                # The tape starts recording from x1.
                y = x1**2  # y = (x1 + x0)**2
            # This doesn't work.
            return y, tape.gradient(y, x0)  # dy/dx0 = 2*(x1 + x2)

        return step, {"x0": x0, "x1": x1}

    r = twins(build, [Call(), Call(), Call(x0=-1.0)], backend, dtype)
    assert all(out[1] is None for out in r.outs)
    close([out[0] for out in r.outs], [9.0, 36.0, 25.0])
    close([s["x1"] for s in r.state], [3.0, 6.0, 5.0])


def test_004_no_gradient_registered(backend, dtype):
    adjust_contrast = _adjust_contrast()

    def build():
        image = gt.Variable([[[0.5, 0.0, 0.0]]], dtype=dtype)
        delta = gt.Variable(0.1, dtype=dtype)

        def step():
            with gt.GradientTape():
                new_image = adjust_contrast(image, delta)
            return new_image

        return step, {"image": image, "delta": delta}

    r = twins(build, [Call(), Call(image=[[[0.25, -1.0, 2.0]]], delta=3.0)], backend, dtype)
    # the forward is TF's: a 1x1 image is its own per-channel mean, so the contrast change is nil
    close(r.outs[0], [[[0.5, 0.0, 0.0]]])
    close(r.outs[1], [[[0.25, -1.0, 2.0]]])
    assert r.raw[1].shape == (1, 1, 3) and r.raw[1].dtype == dtype

    image = gt.Variable([[[0.5, 0.0, 0.0]]], dtype=dtype)
    delta = gt.Variable(0.1, dtype=dtype)

    def with_gradient():
        with gt.GradientTape() as tape:
            new_image = adjust_contrast(image, delta)
        return tape.gradient(new_image, [image, delta])

    assert_trace_raises(with_gradient, LookupError, match="^gradient registry has no entry for: AdjustContrastv2$")


def test_004_adjust_contrast_forward(backend, dtype):
    adjust_contrast = _adjust_contrast()
    imgs = [np.arange(12.0).reshape(2, 2, 3) / 10, np.linspace(-1.0, 3.0, 12).reshape(2, 2, 3)]
    factors = [2.0, -0.5]
    calls = [Call(gt.constant(i, dtype), gt.constant(f, dtype)) for i, f in zip(imgs, factors)]
    r = twins(lambda: (adjust_contrast, None), calls, backend, dtype)
    for img, factor, out in zip(imgs, factors, r.outs):
        mean = img.mean(axis=(0, 1), keepdims=True)
        close(out, (img - mean) * factor + mean)


def test_004_zeros_instead_of_none(backend, dtype):
    def build():
        x = gt.Variable([2.0, 2.0], dtype=dtype)
        y = gt.Variable(3.0, dtype=dtype)

        def step():
            with gt.GradientTape() as tape:
                z = y**2
            return z, tape.gradient(z, x, unconnected_gradients=gt.UnconnectedGradients.ZERO)

        return step, {"x": x, "y": y}

    r = twins(build, [Call(), Call(x=[0.5, -1.5], y=-1.0)], backend, dtype)
    for _, g in r.outs:
        # tf.Tensor([0. 0.], shape=(2,), dtype=float32)
        assert g.shape == (2,)
        np.testing.assert_array_equal(g, [0.0, 0.0])
    assert r.raw[1][1].dtype == dtype
    close(r.outs[1][0], 1.0)
