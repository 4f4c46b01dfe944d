"""Issue 10, parts 6 and 7: never a silent wrong gradient.  TensorFlow's parity in
``batch_jacobian``; bad input gives TensorFlow's exception class and a message naming the call and
what to do, and leaves the tape stack as it was (no tape left recording)."""

from __future__ import annotations

import gc
import itertools
import re
import threading
import tracemalloc

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import recording_state
from gradtape.core import registry
from gradtape.ops import FLOATING_FUNCTIONS

_names = (f"bad_input_op_{i}" for i in itertools.count())


def close(t, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(t.numpy()), np.asarray(expected), rtol=rtol, atol=atol)


def clean():
    """Nothing records after bad input (this thread's stack is empty, no tape counted active)."""
    assert recording_state.per_thread.tapes == []
    assert recording_state.ACTIVE_TAPES[0] == 0


# ---------------------------------------------------------------------------------- part 6
@pytest.mark.parametrize("shapes", [((2,), (2, 3)), ((2, 3), (2,)), ((), (1, 1)), ((2, 2), ())])
def test_batch_jacobian_needs_rank_2(backend, shapes):
    tshape, sshape = shapes
    x = gt.ones(sshape)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.ones(tshape) * gt.sum(x)
    bad = "target" if len(tshape) < 2 else "source"
    with pytest.raises(ValueError, match=rf"batch_jacobian: the {bad} has shape .*rank at least 2"):
        tape.batch_jacobian(y, x)
    clean()


def test_batch_jacobian_rank_check_leaves_the_tape_usable(backend):
    x = gt.constant([[1.0, 2.0]])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    with pytest.raises(ValueError):
        tape.batch_jacobian(y, x[0])  # refused before the (non-persistent) tape is used
    close(tape.batch_jacobian(y, x), [[[2.0, 0.0], [0.0, 4.0]]])


@pytest.mark.parametrize("unconnected", ["none", "zero"])
@pytest.mark.parametrize("pfor", [True, False])
def test_batch_jacobian_unconnected_is_zeros(backend, unconnected, pfor):
    """TF returns zeros, never None, whatever unconnected_gradients says."""
    x = gt.constant([[1.0, 2.0], [3.0, 4.0]])
    z = gt.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = z * z
    j = tape.batch_jacobian(y, x, unconnected_gradients=unconnected, experimental_use_pfor=pfor)
    assert j is not None and j.shape == (2, 3, 2) and j.dtype == x.dtype
    assert j.device == x.device and j.backend == x.backend
    close(j, np.zeros((2, 3, 2)))
    with pytest.raises(ValueError, match="unconnected_gradients"):
        tape.batch_jacobian(y, x, unconnected_gradients="zeros")
    clean()


def test_batch_jacobian_connected_unchanged(backend):
    x = gt.constant([[1.0, 2.0], [3.0, 4.0]])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    close(tape.batch_jacobian(y, x), [[[2.0, 0.0], [0.0, 4.0]], [[6.0, 0.0], [0.0, 8.0]]])


# ---------------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "int32", "int64", "uint8"])
def test_floating_functions_of_bool_and_int_inputs_are_float32(backend, dtype):
    """sin(bool) was float16 on NumPy (a tensor that broke on use), float32 on torch, an error on
    array_api_strict: every floating function now computes bool / int inputs in float32."""
    values = np.array([1, 0, 1]).astype(dtype)
    x = gt.constant(values)
    unary = sorted(n for n in FLOATING_FUNCTIONS if registry.get_op(n).public.__code__.co_argcount == 1)
    assert {"sin", "cos", "exp", "log", "sqrt", "tanh", "reciprocal"} <= set(unary)
    with np.errstate(all="ignore"):
        for name in unary:
            y = getattr(gt, name)(x)
            assert y.dtype == gt.float32, (name, dtype, y.dtype)
            want = getattr(
                np,
                {
                    "acos": "arccos",
                    "asin": "arcsin",
                    "atan": "arctan",
                    "acosh": "arccosh",
                    "asinh": "arcsinh",
                    "atanh": "arctanh",
                }.get(name, name),
            )(values.astype(np.float32))
            np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, equal_nan=True, err_msg=name)
            gt.sum(y + 1.0)  # usable: the float16 result broke here (KeyError)
            v = getattr(gt, name)(gt.Variable(values, trainable=False))
            assert v.dtype == gt.float32, name
        for name in sorted(FLOATING_FUNCTIONS - set(unary)):
            y = getattr(gt, name)(x, x)
            assert y.dtype == gt.float32, (name, dtype, y.dtype)


def test_floating_functions_of_python_ints_and_inside_a_tape(backend):
    assert gt.sin(1).dtype == gt.float32
    assert gt.divide(gt.constant([1, 2]), 2).dtype == gt.float32
    close(gt.divide(gt.constant([1, 2]), 2), [0.5, 1.0])
    x = gt.constant([1.0, 2.0])
    n = gt.constant([True, False])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sum(x * gt.exp(n))  # exp of a bool: float32, no gradient to n
    close(tape.gradient(y, x), [np.e, 1.0])
    assert gt.sin(x).dtype == gt.float32 and gt.sin(gt.astype(x, gt.float64)).dtype == gt.float64


# ---------------------------------------------------------------------------------- indexing
_NEGATIVE_STEPS = [
    slice(None, None, -1),
    slice(None, None, -2),
    slice(None, None, -3),
    slice(1, None, -1),
    slice(-1, -3, -1),
    slice(5, 0, -2),
    slice(0, 0, -1),
    slice(3, None, -2),
    slice(None, -10, -1),
]


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_negative_steps_index_get_and_set_with_gradients(backend, n):
    """``gt.constant([1.0])[::-1]`` and ``x[::-2]`` on a length-2 axis raised about negative
    strides on torch; valid keys work on every backend, in __getitem__ and __setitem__."""
    a = np.arange(1, n + 1, dtype=np.float32)
    for key in _NEGATIVE_STEPS:
        want = a[key]
        x = gt.constant(a)
        v = gt.constant(np.full(want.shape, 7.0, np.float32))
        with gt.GradientTape(persistent=True) as tape:
            tape.watch([x, v])
            y = x[key]
            z = x * 1.0
            z[key] = v * 2.0
            s = gt.sum(y * y) + gt.sum(z * z)
        assert y.shape == want.shape, key
        close(y, want)
        z_want = a.copy()
        z_want[key] = 14.0
        close(z, z_want)
        gx, gv = tape.gradient(s, [x, v])
        gx_want = 2 * a
        gx_want[key] = 0.0
        np.add.at(gx_want, key, 2 * a[key])
        close(gx, gx_want)
        close(gv, np.full(want.shape, 56.0))


def test_negative_steps_in_2d_keys_and_jacobians(backend):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for key in [
        (slice(None, None, -1), slice(None, None, -2)),
        (Ellipsis, slice(None, None, -3)),
        (1, slice(None, None, -4)),
        (slice(None, None, -2), None, 0),
        (np.array([2, 0]), slice(None, None, -1)),
    ]:
        x = gt.constant(a)
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = x[key]
        close(y, a[key])
        j = tape.jacobian(y, x)
        want = np.zeros(a[key].shape + a.shape, np.float32)
        idx = np.arange(12).reshape(3, 4)[key]
        for out, flat in np.ndenumerate(idx):
            want[out + np.unravel_index(flat, a.shape)] = 1.0
        close(j, want)


# ---------------------------------------------------------------------------------- register_op
def test_register_op_forward_returning_no_array(backend):
    for bad, what in [(lambda xp, x: None, "NoneType"), (lambda xp, x: "abc", "str"), (lambda xp, x: [x, x], "list")]:
        name = next(_names)
        f = gt.register_op(name, bad)
        x = gt.constant([1.0, 2.0])
        with gt.GradientTape() as tape:
            tape.watch(x)
            with pytest.raises(
                TypeError,
                match=rf"(?s)register_op\('{name}'\): forward returned {what}.*"
                rf"backend '{backend.split(':')[0]}'.*must compute on",
            ):
                f(x)
        clean()


def test_register_op_nout_mismatch(backend):
    name = next(_names)
    f = gt.register_op(name, lambda xp, x: x * 2, nout=2)
    with pytest.raises(
        TypeError,
        match=rf"register_op\('{name}'\): declared with nout=2, forward must "
        "return a tuple of 2 arrays",
    ):
        f(gt.constant([1.0, 2.0, 3.0]))  # silently gave 3 outputs (the array's rows)
    g = gt.register_op(next(_names), lambda xp, x: (x, x, x), nout=2)
    with pytest.raises(TypeError, match="nout=2"):
        g(gt.constant([1.0]))
    h = gt.register_op(next(_names), lambda xp, x: (x * 2, None), nout=2)
    with pytest.raises(TypeError, match="output 1 of forward returned NoneType"):
        h(gt.constant([1.0]))
    ok = gt.register_op(next(_names), lambda xp, x: (x * 2, x * 3), lambda op, g1, g2: 2 * g1 + 3 * g2, nout=2)
    x = gt.constant([1.0, 2.0])
    with gt.GradientTape() as tape:
        tape.watch(x)
        a, b = ok(x)
        s = gt.sum(a + b)
    close(tape.gradient(s, x), [5.0, 5.0])
    clean()


@pytest.mark.parametrize(
    "args, exc, match",
    [
        ((None, lambda xp, x: x), TypeError, "name must be a non-empty str, got NoneType"),
        (("", lambda xp, x: x), TypeError, "non-empty str"),
        ((3, lambda xp, x: x), TypeError, "got int 3"),
        (("NAME", None), TypeError, r"register_op\('NAME'\): forward must be callable"),
        (("NAME", lambda xp, x: x, "not a rule"), TypeError, "gradient must be None or a rule"),
    ],
)
def test_register_op_bad_arguments_leave_the_registry_clean(args, exc, match):
    before = [op.name for op in registry.ops()]
    with pytest.raises(exc, match=match):
        gt.register_op(*args)
    assert [op.name for op in registry.ops()] == before
    with pytest.raises(ValueError, match="nout must be None"):
        gt.register_op("NAME", lambda xp, x: x, nout=0)
    assert [op.name for op in registry.ops()] == before


# ---------------------------------------------------------------------------------- wrong rules
def test_registered_rule_with_a_wrong_shape_is_named(backend):
    name = next(_names)
    f = gt.register_op(name, lambda xp, x: x * 2, lambda op, g: gt.ones((5,)))
    x = gt.constant([1.0, 2.0])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    with pytest.raises(
        ValueError,
        match=rf"gradient rule of op '{name}' \(.*test_bad_input.py:\d+\) "
        r"returned a gradient of shape \(5,\) for input 0 of shape \(2,\)",
    ):
        tape.gradient(y, x)
    clean()


@pytest.mark.parametrize("shape", [(5,), (2, 3), (), (2, 1)])
def test_custom_gradient_with_a_wrong_shape_is_named(backend, shape):
    @gt.custom_gradient
    def twice(x):
        return x * 2, lambda dy: gt.ones(shape)

    x = gt.constant([1.0, 2.0])
    for persistent in (False, True):
        with gt.GradientTape(persistent=persistent) as tape:
            tape.watch(x)
            y = twice(x)
        with pytest.raises(
            ValueError,
            match=r"gradient rule of op 'custom_gradient' \('.*twice.*' at "
            rf".*test_bad_input.py:\d+\).*shape {re.escape(str(shape))}",
        ):
            tape.gradient(y, x)
    clean()


def test_rules_returning_a_broadcast_shape_still_work(backend):
    """The check refuses only shapes no broadcasting of the input gives."""

    @gt.custom_gradient
    def f(x):
        return x * 2, lambda dy: gt.ones((3, 2)) * 2.0

    x = gt.constant([1.0, 2.0])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    close(tape.gradient(y, x), [6.0, 6.0])


def test_overridden_rule_of_a_builtin_with_a_wrong_shape(backend):
    """A rule registered over a built-in op whose inputs are not saved (their shape is the
    output's) is checked against that shape."""
    name = next(_names)
    f = gt.register_op(name, lambda xp, x, y: x + y)
    f.op.saves = ()

    @gt.RegisterGradient(name)
    def _wrong(op, g):
        return gt.ones((4,)), g

    x = gt.constant([1.0, 2.0])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x, x)
    with pytest.raises(ValueError, match=rf"'{name}'.*_wrong.*shape \(4,\) for input 0 of shape \(2,\)"):
        tape.gradient(y, x)


# ---------------------------------------------------------------------------------- jacobian args
def test_jacobian_sources_must_be_tensors(backend):
    x = gt.constant([1.0, 2.0])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    with pytest.raises(
        ValueError,
        match=r"GradientTape.jacobian: sources \(leaf 1\) is float 2.0, not a "
        "gt.Tensor or gt.Variable",
    ):
        tape.jacobian(y, [x, 2.0])
    with pytest.raises(TypeError, match="GradientTape.jacobian: `target` is None"):
        tape.jacobian(None, x)
    with pytest.raises(ValueError, match="GradientTape.batch_jacobian: source is list"):
        tape.batch_jacobian(y, [[1.0]])
    with pytest.raises(ValueError, match="GradientTape.gradient: sources must be Tensors or Variables, got str"):
        tape.gradient(y, [x, "a"])
    clean()
    close(tape.jacobian(y, [x])[0], [[2.0, 0.0], [0.0, 4.0]])  # refused before the tape was used


# ---------------------------------------------------------------------------------- optimizers
def test_optimizer_bad_arguments(backend):
    for cls in (gt.optimizers.SGD, gt.optimizers.Adam, gt.optimizers.RMSprop):
        with pytest.raises(
            ValueError,
            match=r"Argument `learning_rate` should be float.*"
            "Received instead: learning_rate=None",
        ):
            cls(learning_rate=None)
        with pytest.raises(ValueError, match="learning_rate='fast'"):
            cls(learning_rate="fast")
    v = gt.Variable([1.0])
    opt = gt.optimizers.SGD(learning_rate=0.5)
    with pytest.raises(
        ValueError,
        match=r"SGD.apply_gradients: expects \(gradient, variable\) pairs, such "
        "as zip\\(grads, variables\\); item 0 is Variable",
    ):
        opt.apply_gradients([v])
    with pytest.raises(ValueError, match="item 0 is tuple"):
        opt.apply_gradients([(gt.constant([1.0]), v, 3)])
    with pytest.raises(TypeError, match=r"\(gradient, variable\) pairs, in that order"):
        opt.apply_gradients([(v, gt.constant([1.0]))])
    with pytest.raises(ValueError, match="pass the variables to update"):
        opt.apply([gt.constant([1.0])])
    assert int(opt.iterations) == 0
    opt.apply_gradients([(gt.constant([1.0]), v)])
    close(v, [0.5])
    assert gt.optimizers.SGD(learning_rate=np.float32(0.25)).learning_rate == 0.25
    clean()


# ---------------------------------------------------------------------------------- threads
def _on_thread(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # pragma: no cover - reported below
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out.get("value")


def test_tape_exited_on_another_thread_stops_recording(backend):
    x = gt.constant([1.0, 2.0])
    tape = gt.GradientTape(persistent=True)
    tape.__enter__()
    tape.watch(x)
    y = x * x
    _on_thread(lambda: tape.__exit__(None, None, None))
    clean()
    z = gt.sin(x)  # not recorded any more
    close(tape.gradient(y, x), [2.0, 4.0])
    assert tape.gradient(z, x) is None


def test_tape_used_on_another_thread_is_released(backend):
    x = gt.constant([1.0, 2.0])
    tape = gt.GradientTape()
    tape.__enter__()
    tape.watch(x)
    y = gt.sum(x * x)
    close(_on_thread(lambda: tape.gradient(y, x)), [2.0, 4.0])
    clean()  # stopped recording on this thread too
    assert tape._rec is None
    tape.__exit__(None, None, None)
    clean()


def test_stop_recording_and_reset_from_another_thread_keep_the_owner_stack(backend):
    x = gt.constant([1.0, 2.0])
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        stack = recording_state.per_thread.tapes
        _on_thread(tape.reset)
        assert len(stack) == 1 and recording_state.ACTIVE_TAPES[0] == 1  # back on this thread's stack
        tape.watch(x)
        y = x * 3.0

        def pause():
            with tape.stop_recording():
                assert stack == [] and recording_state.ACTIVE_TAPES[0] == 0
            assert len(stack) == 1

        _on_thread(pause)
        z = x * 5.0
    clean()
    close(tape.gradient(y, x), [3.0, 3.0])
    close(tape.gradient(z, x), [5.0, 5.0])


def test_tapes_on_many_threads_concurrently(backend):
    x = gt.constant([1.0, 2.0])
    errors = []

    def work(k):
        try:
            for _ in range(20):
                with gt.GradientTape() as tape:
                    tape.watch(x)
                    y = gt.sum(x * float(k))
                g = tape.gradient(y, x)
                np.testing.assert_allclose(g.numpy(), [k, k])
                assert recording_state.per_thread.tapes == []
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    clean()


def test_memory_of_tapes_used_across_threads_is_freed():
    """2,000 steps whose tape is exited, or whose gradient is computed, on another thread: every
    step's recording kept growing the opening thread's stack (+740 MiB, 2,000 stacked tapes
    before the fix)."""
    with gt.use_backend("numpy"):
        w = gt.Variable(gt.ones((64,)))
        x = gt.ones((64,))

        def step(k):
            tape = gt.GradientTape()
            tape.__enter__()
            loss = gt.sum(gt.tanh(x * w))
            if k % 2:
                _on_thread(lambda: tape.__exit__(None, None, None))
                g = tape.gradient(loss, w)
            else:
                g = _on_thread(lambda: tape.gradient(loss, w))
                tape.__exit__(None, None, None)
            w.assign_sub(0.01 * g)

        step(0)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for k in range(200):
                step(k)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    clean()
    assert grown < 256 * 1024, grown
