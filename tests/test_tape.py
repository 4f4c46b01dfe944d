"""Behaviour of the tape (API.md §3), on every backend."""

from __future__ import annotations

import gc
import sys
import warnings
import weakref
from collections import namedtuple

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import recording_state


def val(t):
    return None if t is None else np.asarray(t.numpy())


def close(t, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(val(t), np.asarray(expected), rtol=rtol, atol=atol)


# --------------------------------------------------------------------------- recording and watching
def test_records_only_watched_inputs(backend):
    x = gt.constant(3.0)
    with gt.GradientTape() as tape:
        y = x * x
    assert tape.gradient(y, x) is None
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    close(tape.gradient(y, x), 6.0)


def test_nothing_recorded_without_watched_input(backend):
    x = gt.constant([1.0, 2.0])
    with gt.GradientTape() as tape:
        y = gt.sin(x) * 2.0
    assert tape._rec.nodes == []
    del y


def test_trainable_variables_watched_automatically(backend):
    v = gt.Variable(2.0)
    frozen = gt.Variable(2.0, trainable=False)
    with gt.GradientTape() as tape:
        y = v * v + frozen * frozen
    gv, gf = tape.gradient(y, [v, frozen])
    close(gv, 4.0)
    assert gf is None
    assert [w.name for w in tape.watched_variables()] == [v.name]


def test_watch_accessed_variables_false(backend):
    a = gt.Variable(2.0, name="a")
    b = gt.Variable(3.0, name="b")
    with gt.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(a)
        y = a**2
        z = b**3
    ga, gb = tape.gradient([y, z], [a, b])
    close(ga, 4.0)
    assert gb is None
    assert tape.watched_variables() == (a,)


def test_manual_watch_of_untrainable_variable(backend):
    v = gt.Variable(2.0, trainable=False)
    with gt.GradientTape() as tape:
        tape.watch(v)
        y = v**3
    close(tape.gradient(y, v), 12.0)


def test_watch_nested_structures(backend):
    a = gt.constant(1.0)
    b = gt.constant(2.0)
    c = gt.constant(3.0)
    with gt.GradientTape() as tape:
        tape.watch({"a": a, "rest": [b, (c,)]})
        y = a * b * c
    g = tape.gradient(y, {"a": a, "rest": [b, (c,)]})
    close(g["a"], 6.0)
    close(g["rest"][0], 3.0)
    close(g["rest"][1][0], 2.0)


@pytest.mark.parametrize("bad", [3.0, "x", None, [gt.constant(1.0), 2.0]])
def test_watch_rejects_non_tensors(bad):
    with gt.GradientTape() as tape:
        with pytest.raises(ValueError):
            tape.watch(bad)
    assert recording_state.per_thread.tapes == []


def test_watch_integer_tensor_warns_and_gives_none(backend):
    x = gt.constant([1, 2])
    with gt.GradientTape() as tape:
        with pytest.warns(UserWarning, match="floating"):
            tape.watch(x)
        y = x * 2
    with pytest.warns(UserWarning):
        assert tape.gradient(y, x) is None


def test_watched_variables_in_creation_order(backend):
    v1 = gt.Variable(1.0, name="first")
    v2 = gt.Variable(2.0, name="second")
    v3 = gt.Variable(3.0, name="third")
    with gt.GradientTape() as tape:
        y = v3 * v1 + v2
    assert [v.name for v in tape.watched_variables()] == ["first:0", "second:0", "third:0"]
    del y


# --------------------------------------------------------------------------- gradient()
def test_gradient_structure_follows_sources(backend):
    Pair = namedtuple("Pair", "a b")
    a = gt.Variable(1.0)
    b = gt.Variable(2.0)
    with gt.GradientTape(persistent=True) as tape:
        y = a * b
    g = tape.gradient(y, Pair(a, b))
    assert isinstance(g, Pair)
    close(g.a, 2.0)
    close(g.b, 1.0)
    g = tape.gradient(y, {"x": [a, (b,)]})
    close(g["x"][1][0], 1.0)
    g = tape.gradient(y, (a,))
    assert isinstance(g, tuple) and len(g) == 1


def test_gradient_has_source_shape_dtype_device(backend):
    w = gt.Variable(gt.ones((3, 2)))
    b = gt.Variable(gt.zeros(2, dtype=gt.float64))
    x = gt.constant([[1.0, 2.0, 3.0]])
    with gt.GradientTape() as tape:
        y = x @ w + gt.astype(b, gt.float32)
        loss = gt.reduce_mean(y**2)
    gw, gb = tape.gradient(loss, [w, b])
    assert gw.shape == (3, 2) and gw.dtype == gt.float32 and gw.device == w.device
    assert gb.shape == (2,) and gb.dtype == gt.float64 and gb.device == b.device
    assert gw.backend == backend.split(":")[0]


def test_multiple_targets_are_summed(backend):
    x = gt.Variable(2.0)
    with gt.GradientTape() as tape:
        y0 = x**2
        y1 = 1 / x
    close(tape.gradient({"y0": y0, "y1": y1}, x), 3.75)


def test_non_scalar_target_is_summed(backend):
    x = gt.Variable(2.0)
    with gt.GradientTape() as tape:
        y = x * [3.0, 4.0]
    close(tape.gradient(y, x), 7.0)


def test_output_gradients(backend):
    x = gt.constant([1.0, 2.0, 3.0])
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = gt.sum(x)
    close(tape.gradient(y, x, output_gradients=gt.constant([1.0, 0.0, 2.0])), [2.0, 0.0, 12.0])
    close(tape.gradient([y, z], x, output_gradients=[gt.constant([1.0, 1.0, 1.0]), gt.constant(2.0)]), [4.0, 6.0, 8.0])
    with pytest.raises(ValueError, match="shape"):
        tape.gradient(y, x, output_gradients=gt.constant([1.0, 2.0]))
    with pytest.raises(ValueError, match="entries"):
        tape.gradient([y, z], x, output_gradients=[gt.constant([1.0, 1.0, 1.0])])


@pytest.mark.parametrize("mode", [gt.UnconnectedGradients.ZERO, "zero"])
def test_unconnected_gradients_zero(backend, mode):
    x = gt.Variable([2.0, 2.0])
    y = gt.Variable(3.0)
    with gt.GradientTape() as tape:
        z = y**2
    g = tape.gradient(z, x, unconnected_gradients=mode)
    close(g, [0.0, 0.0])
    assert g.shape == (2,) and g.dtype == gt.float32


def test_unconnected_gradients_none_and_bad_value(backend):
    x = gt.Variable(2.0)
    y = gt.Variable(3.0)
    with gt.GradientTape(persistent=True) as tape:
        z = y * y
    assert tape.gradient(z, x, unconnected_gradients="none") is None
    with pytest.raises(ValueError, match="unconnected_gradients"):
        tape.gradient(z, x, unconnected_gradients="nothing")


def test_gradient_with_respect_to_intermediate(backend):
    x = gt.constant(3.0)
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    close(tape.gradient(z, y), 18.0)
    close(tape.gradient(z, x), 108.0)
    close(tape.gradient(z, [y, x])[1], 108.0)


def test_gradient_of_source_with_respect_to_itself(backend):
    x = gt.constant([1.0, 2.0])
    with gt.GradientTape() as tape:
        tape.watch(x)
    close(tape.gradient(x, x), [1.0, 1.0])


def test_target_none_is_type_error():
    with gt.GradientTape() as tape:
        pass
    with pytest.raises(TypeError, match="None"):
        tape.gradient(None, gt.constant(1.0))


def test_second_call_on_non_persistent_tape_is_runtime_error(backend):
    x = gt.Variable(3.0)
    with gt.GradientTape() as tape:
        y = x * x
    tape.gradient(y, x)
    with pytest.raises(RuntimeError, match="non-persistent"):
        tape.gradient(y, x)


def test_persistent_tape_allows_many_calls(backend):
    x = gt.constant(3.0)
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    close(tape.gradient(z, x), 108.0)
    close(tape.gradient(y, x), 6.0)
    close(tape.gradient(z, x), 108.0)


def test_non_persistent_gradient_inside_context_stops_recording(backend):
    x = gt.Variable(3.0)
    with gt.GradientTape() as tape:
        y = x * x
        g = tape.gradient(y, x)
        assert recording_state.per_thread.tapes == []  # it stopped recording
        z = x * 5.0
    close(g, 6.0)
    del z
    assert recording_state.per_thread.tapes == []


def test_persistent_gradient_inside_context_warns_once_and_records(backend):
    x = gt.Variable(3.0)
    with gt.GradientTape(persistent=True) as tape:
        y = x * x * x
        with pytest.warns(UserWarning, match="persistent"):
            dy = tape.gradient(y, x)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tape.gradient(y, x)  # no second warning
    close(dy, 27.0)
    close(tape.gradient(dy, x), 18.0)  # it recorded the backward pass


def test_control_flow_takes_the_path_run(backend):
    x = gt.constant(1.0)
    v0 = gt.Variable(2.0)
    v1 = gt.Variable(2.0)
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        if x > 0.0:
            result = v0
        else:
            result = v1**2
    dv0, dv1 = tape.gradient(result, [v0, v1])
    close(dv0, 1.0)
    assert dv1 is None
    assert tape.gradient(result, x) is None


def test_fan_out_accumulates(backend):
    x = gt.constant(2.0)
    with gt.GradientTape() as tape:
        tape.watch(x)
        a = x * 3.0
        y = a * a + a + x
    close(tape.gradient(y, x), 2 * 6.0 * 3.0 + 3.0 + 1.0)


# --------------------------------------------------------------------------- higher order
def test_nested_tapes_second_derivative(backend):
    x = gt.constant(3.0)
    with gt.GradientTape() as g:
        g.watch(x)
        with gt.GradientTape() as gg:
            gg.watch(x)
            y = x * x
        dy_dx = gg.gradient(y, x)
    close(dy_dx, 6.0)
    close(g.gradient(dy_dx, x), 2.0)


def test_third_and_fourth_derivatives(backend):
    x = gt.constant(0.7, dtype=gt.float64)
    with gt.GradientTape() as t4:
        t4.watch(x)
        with gt.GradientTape() as t3:
            t3.watch(x)
            with gt.GradientTape() as t2:
                t2.watch(x)
                with gt.GradientTape() as t1:
                    t1.watch(x)
                    y = gt.sin(x) * x**4
                d1 = t1.gradient(y, x)
            d2 = t2.gradient(d1, x)
        d3 = t3.gradient(d2, x)
    d4 = t4.gradient(d3, x)
    s, c, v = np.sin(0.7), np.cos(0.7), 0.7
    # y = x^4 sin x
    ref3 = 24 * v * s + 36 * v**2 * c - 12 * v**3 * s - v**4 * c
    ref4 = 24 * s + 96 * v * c - 72 * v**2 * s - 16 * v**3 * c + v**4 * s
    close(d3, ref3, rtol=1e-10)
    close(d4, ref4, rtol=1e-10)


def test_hessian_with_persistent_outer(backend):
    x = gt.Variable([1.0, 2.0], dtype=gt.float64)
    with gt.GradientTape() as outer:
        with gt.GradientTape() as inner:
            y = gt.sum(x**3) + x[0] * x[1]
        g = inner.gradient(y, x)
    h = outer.jacobian(g, x)
    close(h, [[6.0, 1.0], [1.0, 12.0]])


# --------------------------------------------------------------------------- jacobians
def test_jacobian(backend):
    with gt.GradientTape() as g:
        x = gt.constant([1.0, 2.0])
        g.watch(x)
        y = x * x
    close(g.jacobian(y, x), [[2.0, 0.0], [0.0, 4.0]])


def test_jacobian_structure_and_shapes(backend):
    a = gt.Variable(gt.ones((2, 3)))
    b = gt.Variable(2.0)
    with gt.GradientTape() as g:
        y = gt.sum(a, axis=1) * b
    ja = g.jacobian(y, {"a": a, "b": b})
    assert ja["a"].shape == (2, 2, 3)
    assert ja["b"].shape == (2,)
    close(ja["b"], [3.0, 3.0])
    close(ja["a"][0, 0], [2.0, 2.0, 2.0])
    close(ja["a"][0, 1], [0.0, 0.0, 0.0])


def test_jacobian_unconnected(backend):
    x = gt.Variable([1.0, 2.0])
    z = gt.Variable(3.0)
    with gt.GradientTape(persistent=True) as g:
        y = x * 2.0
    assert g.jacobian(y, z) is None
    jz = g.jacobian(y, z, unconnected_gradients="zero")
    assert jz.shape == (2,)
    close(jz, [0.0, 0.0])


def test_batch_jacobian(backend):
    with gt.GradientTape() as g:
        x = gt.constant([[1.0, 2.0], [3.0, 4.0]], dtype=gt.float32)
        g.watch(x)
        y = x * x
    close(g.batch_jacobian(y, x), [[[2, 0], [0, 4]], [[6, 0], [0, 8]]])


def test_batch_jacobian_matches_stacked_jacobians(backend):
    w = gt.constant(np.arange(12.0).reshape(4, 3) / 10, dtype=gt.float64)
    x = gt.constant(np.arange(15.0).reshape(5, 3) / 7, dtype=gt.float64)
    with gt.GradientTape(persistent=True) as g:
        g.watch(x)
        y = gt.tanh(x @ gt.matrix_transpose(w))  # [5, 4]
    bj = g.batch_jacobian(y, x)
    assert bj.shape == (5, 4, 3)
    full = g.jacobian(y, x)  # [5, 4, 5, 3]
    for i in range(5):
        close(bj[i], full[i, :, i, :], rtol=1e-12)


def test_batch_jacobian_first_dimensions_must_match(backend):
    x = gt.constant([[1.0, 2.0]])
    with gt.GradientTape() as g:
        g.watch(x)
        y = gt.reshape(gt.concat([x, x], axis=0), (2, 2))
    with pytest.raises(ValueError, match="first dimension"):
        g.batch_jacobian(y, x)


def test_experimental_use_pfor_false_needs_persistent(backend):
    x = gt.constant([1.0])
    with gt.GradientTape() as g:
        g.watch(x)
        y = x * 2.0
    with pytest.raises(RuntimeError, match="persistent"):
        g.jacobian(y, x, experimental_use_pfor=False)
    with gt.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * 2.0
    close(g.jacobian(y, x, experimental_use_pfor=False), [[2.0]])


# --------------------------------------------------------------------------- reset, stop_recording
def test_reset(backend):
    x = gt.Variable(2.0)
    with gt.GradientTape() as t:
        loss = x * x
        t.reset()
        loss = loss + x * 3.0
    close(t.gradient(loss, x), 3.0)


def test_stop_recording(backend):
    x = gt.Variable(2.0)
    with gt.GradientTape(persistent=True) as t:
        y = x * x
        with t.stop_recording():
            z = y * x  # not recorded
        w = y * x
    assert t.gradient(z, x) is None
    close(t.gradient(w, x), 12.0)


def test_stop_recording_outside_context_is_runtime_error():
    t = gt.GradientTape()
    with pytest.raises(RuntimeError, match="not recording"):
        with t.stop_recording():
            pass


def test_reentering_active_tape_is_error():
    t = gt.GradientTape()
    with t:
        with pytest.raises(ValueError):
            t.__enter__()
    assert recording_state.per_thread.tapes == []


# --------------------------------------------------------------------------- stack hygiene
def test_exception_inside_context_pops_the_tape(backend):
    with pytest.raises(ZeroDivisionError):
        with gt.GradientTape():
            raise ZeroDivisionError("inside the context")
    assert recording_state.per_thread.tapes == []


def test_bad_input_inside_context_leaves_stack_clean(backend):
    x = gt.Variable([1.0, 2.0])
    with gt.GradientTape() as t:
        with pytest.raises(ValueError, match="reshape"):
            gt.reshape(x, (3, 5))
        y = x * 2.0
    close(t.gradient(y, x), [2.0, 2.0])
    assert recording_state.per_thread.tapes == []


# --------------------------------------------------------------------------- releasing
def _saved_natives_are_freed(persistent):
    x = gt.Variable(np.ones(100, dtype=np.float32))
    with gt.GradientTape(persistent=persistent) as tape:
        h = gt.sin(x) * 3.0
        y = gt.sum(h * h)
    ref = weakref.ref(h._v)
    tape_ref = weakref.ref(tape._rec)
    del h
    return x, y, tape, ref, tape_ref


def test_non_persistent_gradient_frees_saved_tensors(backend):
    x, y, tape, ref, tape_ref = _saved_natives_are_freed(False)
    gc.collect()
    tape.gradient(y, x)
    assert tape_ref() is None
    assert ref() is None, "a saved intermediate outlived a non-persistent gradient()"


def test_persistent_tape_frees_on_del(backend):
    x, y, tape, ref, tape_ref = _saved_natives_are_freed(True)
    tape.gradient(y, x)
    assert ref() is not None
    del tape
    assert tape_ref() is None, "the persistent tape's recording was not freed with the tape (cycle?)"
    assert ref() is None


def test_tensor_holds_no_tape_reference(backend):
    x = gt.Variable(1.0)
    with gt.GradientTape() as t:
        y = x * 2.0
    r = weakref.ref(t._rec)
    del t
    assert r() is None
    del y


# --------------------------------------------------------------------------- long chains
def _stack_depth():
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def test_100k_op_chain_differentiates(backend):
    """A chain longer than the recursion limit differentiates (the walk does not recurse).

    On a lazy backend the size is not the point, being past the recursion limit is: a dask graph 3n
    tasks deep takes dask ~2-8 ms per task to build, order and run, so the limit is lowered for the
    test to 300 frames above the current depth (from 1000) and the chain is 500 ops past it (CPU time
    of the dask case: 13.5 s -> 4.7 s)."""
    limit = sys.getrecursionlimit()
    if gt.get_backend().lazy:
        # the walk is the same code; past the recursion limit is what this checks
        limit = min(limit, _stack_depth() + 300)
        n = limit + 500
    elif backend.split(":")[0] not in ("numpy",):
        n = 5_000  # the walk is the same code; keep slow backends' runtime small
    else:
        n = 100_000
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        x = gt.constant(0.5, dtype=gt.float64)
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = x
            for _ in range(n):
                y = y * 1.0000001 + 0.0
        g = tape.gradient(y, x)
        close(g, 1.0000001**n, rtol=1e-3)
        assert sys.getrecursionlimit() < n
    finally:
        sys.setrecursionlimit(old)


def test_threads_have_separate_tape_stacks(backend):
    import threading

    x = gt.Variable(3.0)
    seen = {}

    def worker():
        seen["stack"] = list(recording_state.per_thread.tapes)
        with gt.GradientTape() as t2:
            y2 = x * x
        seen["grad"] = t2.gradient(y2, x)

    with gt.GradientTape() as t:
        y = x * 2.0
        th = threading.Thread(target=worker)
        th.start()
        th.join()
    assert seen["stack"] == []
    close(seen["grad"], 6.0)
    close(t.gradient(y, x), 2.0)


def test_a_source_the_tape_does_not_watch_gets_none(backend):
    # as TensorFlow 2.21 (checked beside the project): the gradient flows to watched tensors only; a
    # non-trainable variable the tape never watched is None, not the partial derivative; a source
    # that is itself a target is its own gradient, 1, watched or not
    x = gt.Variable(3.0)
    frozen = gt.Variable(5.0, trainable=False)
    c = gt.constant(2.0)
    with gt.GradientTape(persistent=True) as tape:
        y = x * frozen
        z = c * frozen
    dx, dfrozen = tape.gradient(y, [x, frozen])
    close(dx, 5.0)  # TF: 5.0
    assert dfrozen is None  # TF: None
    assert tape.gradient(z, c) is None
    assert_zeros = tape.gradient(y, frozen, unconnected_gradients=gt.UnconnectedGradients.ZERO)
    close(assert_zeros, 0.0)
    with gt.GradientTape() as tape:
        tape.watch(frozen)
        y = x * frozen
    close(tape.gradient(y, frozen), 3.0)  # watched: d/dfrozen = x
    for target in (c, x, frozen):
        with gt.GradientTape() as tape:
            pass
        close(tape.gradient(target, target), 1.0)  # TF: 1.0 for a constant, a variable, a frozen one
    with gt.GradientTape(watch_accessed_variables=False) as tape:
        y = x * 2.0
    assert tape.gradient(y, x) is None  # TF: None
