"""``gt.function``, ``gt.cond`` and ``gt.while_loop`` (issue 12), on every backend: tracing and
retracing, variables as state, random draws, control flow with guards, errors, outer tapes.

Most tests run a step twice from scratch -- eagerly, then under ``gt.function`` -- over the same
calls, and compare every call's results and variable values (float64, to 1e-12)."""

from __future__ import annotations

import gc
import math
import sys
import warnings
import weakref

import numpy as np
import pytest

import gradtape as gt
from gradtape.testing import assert_structures_close
from gradtape.testing import snapshot as snap
from gradtape.core.recording_state import per_thread, recording_context
from gradtape.compile.function import Function

FUNCTION_MODULE = sys.modules[
    "gradtape.compile.function"
]  # (``gradtape.compile.function`` the attribute is gt.function)

# a traced program that disagrees with eager (or a compiler that fails) warns and falls back: an error here
pytestmark = [
    pytest.mark.filterwarnings("error:gt.function:UserWarning"),
    # (torch.compile compiles each path of a gt.cond: said once, tested in test_compiler_paths_are_told)
    pytest.mark.filterwarnings("ignore:gt.function .* compiles a program for each path:UserWarning"),
]

RTOL = 1e-12
ATOL = 1e-12


def c64(a):
    return gt.constant(np.asarray(a, dtype=np.float64))


def assert_same(got, want, rtol=RTOL, atol=ATOL, where="result"):
    """Structures of arrays equal to ``rtol``/``atol`` (None where None, dtypes equal)."""
    assert_structures_close(got, want, rtol, atol, where)


def run_twins(build, calls, *, seed=None, rtol=RTOL, atol=ATOL, **options):
    """Run ``build()``'s step eagerly over ``calls`` (argument tuples), then a fresh ``build()``'s
    step under ``gt.function(**options)``; assert every call's results and variables agree.

    ``build()`` returns ``(step, variables)``, ``variables`` a callable listing the state to compare
    (it may grow on the first call).  ``seed``: the global random seed set before each run.
    Returns the ``gt.function`` and its per-call snapshots."""
    runs = []
    for compiled in (False, True):
        if seed is not None:
            gt.random.set_seed(seed)
        step, variables = build()
        f = gt.function(step, **options) if compiled else step
        seq = []
        for args in calls:
            out = f(*args)
            seq.append((snap(out), [snap(v) for v in variables()]))
        runs.append(seq)
    for k, ((got, gvars), (want, wvars)) in enumerate(zip(runs[1], runs[0])):
        assert_same(got, want, rtol, atol, f"call {k} result")
        assert len(gvars) == len(wvars), f"call {k}: {len(gvars)} variables vs {len(wvars)}"
        for j, (g, w) in enumerate(zip(gvars, wvars)):
            assert_same(g, w, rtol, atol, f"call {k} variable {j}")
    return f, runs[1]


def assert_clean():
    """No trace running, no tape left on the stack."""
    assert recording_context[0] is None
    assert list(per_thread.tapes) == []


def other_backend(backend):
    others = [b for b in gt.available_backends() if b != backend]
    if not others:
        pytest.skip("needs a second backend")
    return others[0]


@pytest.fixture(autouse=True)
def _clean_random_state():
    yield
    gt.random.set_seed(None)
    assert_clean()


@pytest.fixture(params=[None, False, True], ids=["jit-default", "jit-off", "jit-on"])
def jit(request, backend):
    """The ``jit_compile`` option (None: compiled on JAX, replayed elsewhere; True: torch.compile too)."""
    if request.param is True and getattr(gt.get_backend(), "compiles", None) != "opt-in":
        pytest.skip(f"jit_compile=True is jit_compile=None on {backend}")
    return request.param


@pytest.fixture(params=["lowered", "guards"])
def control_flow(request, monkeypatch):
    """gt.cond / gt.while_loop as one structured step each (the default), or as guards (one program
    per path: the fallback where a branch cannot be one step)."""
    monkeypatch.setattr(FUNCTION_MODULE, "LOWER_CONTROL_FLOW", request.param == "lowered")
    return request.param


def traces(control_flow, jit, paths):
    """The tracing count of a function whose predicates take ``paths`` paths: 1 where they are
    structured steps (not under torch.compile, whose programs keep guards), else ``paths``."""
    return 1 if control_flow == "lowered" and jit is not True else paths


RNG = np.random.default_rng(0)
XS = [RNG.normal(size=3) for _ in range(4)]


# ============================================================================================ tracing
def test_traces_once_per_signature_and_matches_eager(backend):
    def build():
        return (lambda x: gt.sin(x) * x + 1.0), list

    f, _ = run_twins(build, [(c64(x),) for x in XS])
    assert f.experimental_get_tracing_count() == 1


def test_retraces_on_new_shape_not_on_new_values(backend):
    def build():
        return (lambda x: gt.reduce_sum(x * x, axis=-1)), list

    shapes = [(3,), (3,), (4,), (2, 3), (3,), (4,), (2, 3)]
    f, _ = run_twins(build, [(c64(RNG.normal(size=s)),) for s in shapes])
    assert f.experimental_get_tracing_count() == 3


def test_retraces_on_new_dtype(backend):
    f = gt.function(lambda x: x * 2 + 1)
    for dt in ["float64", "float32", "float64", "float32", "int32"]:
        x = gt.constant(np.array([1, 2, 3]).astype(dt))
        y = f(x)
        assert y.dtype == x.dtype
        assert_same(snap(y), np.array([3, 5, 7]).astype(dt))
    assert f.experimental_get_tracing_count() == 3


def test_retraces_on_python_argument_value(backend):
    def build():
        return (lambda x, n, scale=1.0: x**n * scale), list

    calls = [(c64(XS[0]), 2), (c64(XS[1]), 2), (c64(XS[0]), 3), (c64(XS[2]), 2), (c64(XS[3]), 3, 0.5)]
    f, _ = run_twins(build, calls)
    assert f.experimental_get_tracing_count() == 3


def test_keyword_arguments_and_nested_structures(backend):
    def build():
        def step(pair, *, extra=None, mode="sum"):
            a, b = pair
            out = {"prod": a * b, "sum": a + b}
            if extra is not None:
                out["extra"] = extra["w"] * 2.0
            return out, (out[mode], None, 7)

        return step, list

    x, y = c64(XS[0]), c64(XS[1])
    calls = [((x, y),), ((y, x),), ((x, y),)]
    f, _ = run_twins(build, calls)
    assert f.experimental_get_tracing_count() == 1
    out, (picked, none, seven) = f((x, y), extra={"w": c64(XS[2])}, mode="prod")
    assert none is None and seven == 7
    assert_same(snap(picked), XS[0] * XS[1])
    assert_same(snap(out["extra"]), XS[2] * 2.0)
    assert f.experimental_get_tracing_count() == 2


def test_numpy_array_arguments(backend):
    f = gt.function(lambda x, y: x * y)
    for k in range(3):
        got = f(c64(XS[k]), XS[k + 1])
        assert isinstance(got, gt.Tensor)
        assert_same(snap(got), XS[k] * XS[k + 1])
    assert f.experimental_get_tracing_count() == 1


def test_python_side_effects_run_at_trace_time_only(backend, capsys):
    log = []

    @gt.function
    def f(x):
        print("tracing f")
        log.append(x.shape)
        return x + 1

    for x in XS:
        f(c64(x))
    f(c64([1.0, 2.0]))
    f(c64([3.0, 4.0]))
    assert log == [(3,), (2,)]
    assert capsys.readouterr().out == "tracing f\ntracing f\n"


def test_decorator_forms(backend):
    @gt.function
    def plain(x):
        """Doc of plain."""
        return x * 3

    @gt.function()
    def empty(x):
        return x * 3

    @gt.function(jit_compile=False, reduce_retracing=True)
    def options(x):
        return x * 3

    def raw(x):
        return x * 3

    called = gt.function(raw)
    assert plain.__name__ == "plain" and plain.__doc__ == "Doc of plain."
    assert called.python_function is raw
    for f in (plain, empty, options, called):
        assert isinstance(f, Function)
        for x in XS[:2]:
            assert_same(snap(f(c64(x))), x * 3)
        assert f.experimental_get_tracing_count() == 1
    with pytest.raises(TypeError):
        gt.function(3)


def test_method_one_function_per_instance(backend):
    class Scaler:
        def __init__(self, k):
            self.k = k
            self.total = gt.Variable(np.zeros(3))

        @gt.function
        def step(self, x):
            self.total.assign_add(self.k * x)
            return self.total * 2.0

    a, b = Scaler(2.0), Scaler(3.0)
    want_a = np.zeros(3)
    want_b = np.zeros(3)
    for x in XS:
        want_a = want_a + 2.0 * x
        want_b = want_b + 3.0 * x
        assert_same(snap(a.step(c64(x))), want_a * 2.0)
        assert_same(snap(b.step(c64(x))), want_b * 2.0)
    assert_same(snap(a.total), want_a)
    assert_same(snap(b.total), want_b)
    assert a.step.experimental_get_tracing_count() == 1
    assert b.step.experimental_get_tracing_count() == 1
    del b
    assert_same(snap(a.step(c64(XS[0]))), (want_a + 2.0 * XS[0]) * 2.0)


def test_nested_function_is_inlined(backend):
    inner = gt.function(lambda x: gt.exp(x) * 2.0)

    def build():
        return (lambda x: inner(x) + inner(x * 2.0)), list

    f, _ = run_twins(build, [(c64(x),) for x in XS])
    assert f.experimental_get_tracing_count() == 1
    assert inner.experimental_get_tracing_count() == 1  # by the eager run; inlined in f's trace


def test_float32_compiled_to_round_off(backend, jit):
    def build():
        w = gt.Variable(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3))

        def step(x):
            with gt.GradientTape() as tape:
                loss = gt.reduce_mean(gt.tanh(gt.matmul(x, w)) ** 2)
            w.assign_sub(0.1 * tape.gradient(loss, w))
            return loss

        return step, lambda: [w]

    calls = [(gt.constant(RNG.normal(size=(5, 4)).astype(np.float32)),) for _ in range(4)]
    f, _ = run_twins(build, calls, rtol=1e-6, atol=1e-7, jit_compile=jit)
    assert f.experimental_get_tracing_count() == 1


def test_outputs_that_are_inputs_constants_or_repeated(backend, jit):
    @gt.function(jit_compile=jit)
    def f(x, y):
        doubled = x * 2.0
        return x, doubled, doubled, gt.constant(3.0, dtype=gt.float64), gt.ones((2,), dtype=gt.float64), x * 2.0 + y

    for k in range(3):
        x = c64(XS[k])
        same = f(x, x)  # one tensor passed twice
        other = f(x, c64(XS[k + 1]))
        for got, y in ((same, XS[k]), (other, XS[k + 1])):
            assert_same(snap(got), (XS[k], XS[k] * 2.0, XS[k] * 2.0, np.float64(3.0), np.ones(2), XS[k] * 2.0 + y))
    assert f.experimental_get_tracing_count() == 1


def test_tensors_of_each_backend_trace_apart(backend):
    other = other_backend(backend)
    f = gt.function(lambda x: gt.exp(x) * 2.0)
    for _ in range(2):
        mine = f(c64(XS[0]))
        theirs = f(gt.asarray(XS[0], backend=other))
        assert gt.asarray(mine, backend=backend) is not None
        assert_same(snap(mine), np.exp(XS[0]) * 2.0)
        assert_same(snap(theirs), np.exp(XS[0]) * 2.0)
        assert type(theirs.numpy()) is np.ndarray
    assert f.experimental_get_tracing_count() == 2


def test_custom_gradient_inside(backend, jit):
    @gt.custom_gradient
    def clipped_identity(x):
        def grad(dy):
            return gt.minimum(gt.maximum(dy, -0.5), 0.5)

        return x * 1.0, grad

    def build():
        def step(x):
            with gt.GradientTape() as tape:
                tape.watch(x)
                y = gt.reduce_sum(clipped_identity(x) * x)
            return y, tape.gradient(y, x)

        return step, list

    run_twins(build, [(c64(x),) for x in XS], jit_compile=jit)


def test_value_checks_run_on_every_call(backend, jit):
    # an op's check of its input values (a label out of range) is part of the program
    @gt.function(jit_compile=jit)
    def loss(labels, logits):
        return gt.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)

    logits = c64(RNG.normal(size=(2, 3)))
    want = gt.nn.sparse_softmax_cross_entropy_with_logits(labels=gt.constant([0, 2]), logits=logits)
    assert_same(snap(loss(gt.constant([0, 2]), logits)), snap(want))
    with pytest.raises(ValueError, match="label value"):
        gt.nn.sparse_softmax_cross_entropy_with_logits(labels=gt.constant([0, 5]), logits=logits)
    with pytest.raises(ValueError, match="label value"):
        loss(gt.constant([0, 5]), logits)
    assert_clean()
    want = gt.nn.sparse_softmax_cross_entropy_with_logits(labels=gt.constant([1, 1]), logits=logits)
    assert_same(snap(loss(gt.constant([1, 1]), logits)), snap(want))
    assert loss.experimental_get_tracing_count() == 1


# ============================================================================================== state
def _linear_model():
    w = gt.Variable(np.array([[0.5], [-0.3], [0.2]]), name="w")
    b = gt.Variable(np.array([0.1]), name="b")
    return w, b


DATA_NP = [(RNG.normal(size=(6, 3)), RNG.normal(size=(6, 1))) for _ in range(5)]


def data():
    """Five batches ``(x, y)`` on the active backend."""
    return [(c64(x), c64(y)) for x, y in DATA_NP]


def test_sgd_by_hand(backend, jit):
    def build():
        w, b = _linear_model()

        def step(x, y, lr):
            with gt.GradientTape() as tape:
                loss = gt.reduce_mean((gt.matmul(x, w) + b - y) ** 2)
            gw, gb = tape.gradient(loss, [w, b])
            w.assign_sub(lr * gw)
            b.assign_sub(lr * gb)
            return loss

        return step, lambda: [w, b]

    batches = data()
    calls = [(x, y, 0.1) for x, y in [batches[0]] * 3 + batches]
    f, runs = run_twins(build, calls, jit_compile=jit)
    assert f.experimental_get_tracing_count() == 1
    assert runs[3][0] < runs[0][0]  # it trains
    assert not np.allclose(runs[0][1][0], runs[-1][1][0])


def test_variables_assigned_outside_between_calls_are_read(backend, jit):
    v = gt.Variable(np.array([1.0, 2.0]))
    f = gt.function(lambda x: v * x, jit_compile=jit)
    assert_same(snap(f(c64([1.0, 1.0]))), np.array([1.0, 2.0]))
    v.assign(np.array([5.0, 7.0]))
    assert_same(snap(f(c64([2.0, 3.0]))), np.array([10.0, 21.0]))
    v.assign_add(np.array([1.0, 1.0]))
    assert_same(snap(f(c64([1.0, 1.0]))), np.array([6.0, 8.0]))
    assert f.experimental_get_tracing_count() == 1


def test_read_after_assign_in_the_same_step(backend, jit):
    def build():
        v = gt.Variable(np.array([1.0, -2.0, 0.5]))
        u = gt.Variable(np.array([0.25, 0.5, 1.0]))

        def step(x):
            before = v.read_value()
            v.assign(v * 2.0 + x)
            mid = v + 1.0
            v.assign_add(mid * u)
            u.assign(u * v)
            return before, mid, v.read_value(), u * 1.0

        return step, lambda: [v, u]

    f, _ = run_twins(build, [(c64(x * 0.1),) for x in XS], jit_compile=jit)
    assert f.experimental_get_tracing_count() == 1


def test_untouched_and_read_only_variables_keep_their_values(backend):
    read = gt.Variable(np.array([2.0, 3.0]))
    untouched = gt.Variable(np.array([9.0]))
    frozen = gt.Variable(np.array([4.0]), trainable=False)
    f = gt.function(lambda x: read * x + frozen)
    for x in ([1.0, 2.0], [3.0, 4.0]):
        assert_same(snap(f(c64(x))), np.array(x) * [2.0, 3.0] + 4.0)
    assert_same(snap(read), np.array([2.0, 3.0]))
    assert_same(snap(untouched), np.array([9.0]))
    assert_same(snap(frozen), np.array([4.0]))
    assert not isinstance(read.numpy(), gt.Tensor) and "traced" not in repr(read)


def test_persistent_tape_on_variables_inside(backend, jit):
    def build():
        w = gt.Variable(np.array([1.0, 2.0]), name="w")
        frozen = gt.Variable(np.array([0.5, 0.5]), trainable=False)

        def step(x):
            with gt.GradientTape(persistent=True) as tape:
                y = gt.reduce_sum(w * x * frozen)
                z = gt.reduce_sum(w * w)
            watched = [v.name for v in tape.watched_variables()]
            gy, gz = tape.gradient(y, w), tape.gradient(z, w)
            w.assign_sub(0.1 * (gy + gz))
            return gy, gz, tape.gradient(y, frozen), watched

        return step, lambda: [w, frozen]

    _, runs = run_twins(build, [(c64(x[:2]),) for x in XS], jit_compile=jit)
    assert runs[0][0][3] == ["w:0"]  # the non-trainable variable is not watched


def test_values_read_before_a_call_stay_valid(backend, jit):
    # a program's updates never clobber (or donate) an array the caller still holds
    v = gt.Variable(np.array([1.0, 2.0]))
    f = gt.function(lambda x: v.assign_add(x) * 1.0, jit_compile=jit)
    held = v.read_value()
    converted = gt.convert_to_tensor(v)
    assert_same(snap(f(c64([1.0, 1.0]))), np.array([2.0, 3.0]))
    after = v.read_value()
    assert_same(snap(f(v.read_value())), np.array([4.0, 6.0]))  # its own value as the argument
    assert_same(snap(f(v)), np.array([8.0, 12.0]))  # the variable itself
    assert_same(
        snap([held, converted, after, v]),
        [np.array([1.0, 2.0]), np.array([1.0, 2.0]), np.array([2.0, 3.0]), np.array([8.0, 12.0])],
    )


def test_variables_as_arguments(backend, jit):
    a = gt.Variable(np.array([1.0, 2.0]))
    b = gt.Variable(np.array([10.0, 20.0]))

    @gt.function(jit_compile=jit)
    def add_to(v, x):
        v.assign_add(x)
        return v * 1.0

    assert_same(snap(add_to(a, c64([1.0, 1.0]))), np.array([2.0, 3.0]))
    assert_same(snap(add_to(b, c64([1.0, 1.0]))), np.array([11.0, 21.0]))
    assert_same(snap(add_to(a, c64([0.5, 0.5]))), np.array([2.5, 3.5]))
    assert_same(snap(add_to(b, c64([2.0, 2.0]))), np.array([13.0, 23.0]))
    assert_same(snap(a), np.array([2.5, 3.5]))
    assert_same(snap(b), np.array([13.0, 23.0]))
    assert add_to.experimental_get_tracing_count() == 2  # one per variable


def test_returning_a_variable(backend, jit):
    v = gt.Variable(np.array([1.0, 2.0]))

    @gt.function(jit_compile=jit)
    def bump(x):
        v.assign_add(x)
        return v

    for k in range(3):
        out = bump(c64([1.0, 10.0]))
        want = np.array([1.0, 2.0]) + (k + 1) * np.array([1.0, 10.0])
        assert_same(snap(out), want)
        assert_same(snap(v), want)
    assert bump.experimental_get_tracing_count() == 1


def test_second_derivative_inside(backend, jit):
    def build():
        def step(x):
            with gt.GradientTape() as t2:
                t2.watch(x)
                with gt.GradientTape() as t1:
                    t1.watch(x)
                    y = x**3 * gt.sin(x)
                dy = t1.gradient(y, x)
            return y, dy, t2.gradient(dy, x)

        return step, list

    f, runs = run_twins(build, [(c64(x),) for x in XS], jit_compile=jit)
    x = XS[-1]
    _, dy, d2y = runs[-1][0]
    assert_same(dy, 3 * x**2 * np.sin(x) + x**3 * np.cos(x), rtol=1e-10)
    assert_same(d2y, 6 * x * np.sin(x) + 6 * x**2 * np.cos(x) - x**3 * np.sin(x), rtol=1e-10)
    assert f.experimental_get_tracing_count() == 1


def test_jacobian_inside(backend, jit):
    def build():
        def step(x):
            with gt.GradientTape(persistent=True) as tape:
                tape.watch(x)
                y = gt.tanh(x[:, None] * x[None, :])
                s = gt.reduce_sum(y)
            return tape.jacobian(y, x), tape.gradient(s, x)

        return step, list

    f, runs = run_twins(build, [(c64(x),) for x in XS], jit_compile=jit)
    x = XS[-1]
    sech2 = 1 - np.tanh(np.outer(x, x)) ** 2
    want = np.zeros((3, 3, 3))
    for i in range(3):
        for j in range(3):
            want[i, j, i] += sech2[i, j] * x[j]
            want[i, j, j] += sech2[i, j] * x[i]
    assert_same(runs[-1][0][0], want, rtol=1e-10)
    assert f.experimental_get_tracing_count() == 1


class MLP(gt.Module):
    def __init__(self):
        super().__init__()
        self.hidden = gt.layers.Dense(4, activation="tanh", dtype="float64")
        self.out = gt.layers.Dense(1, dtype="float64")

    def __call__(self, x):
        return self.out(self.hidden(x))


def _trainer(make_optimizer, build_first):
    def build():
        model = MLP()
        opt = make_optimizer()
        if build_first:
            model(c64(DATA_NP[0][0]))

        def step(x, y):
            with gt.GradientTape() as tape:
                loss = gt.reduce_mean((model(x) - y) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return step, lambda: [*model.variables, *opt.variables]

    return build


OPTIMIZERS = {
    "sgd": lambda: gt.optimizers.SGD(learning_rate=0.1),
    "sgd-momentum": lambda: gt.optimizers.SGD(learning_rate=0.1, momentum=0.9),
    "adam": lambda: gt.optimizers.Adam(learning_rate=0.01),
    "rmsprop-clipnorm-decay": lambda: gt.optimizers.RMSprop(
        learning_rate=gt.optimizers.ExponentialDecay(0.01, 3, 0.5), clipnorm=0.1, momentum=0.5
    ),
    "adamw-global-clipnorm": lambda: gt.optimizers.AdamW(learning_rate=0.01, global_clipnorm=0.2, amsgrad=True),
}


@pytest.mark.parametrize("build_first", [True, False], ids=["built", "built-in-trace"])
@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_module_trained_with_optimizer(backend, opt, build_first, jit):
    build = _trainer(OPTIMIZERS[opt], build_first)
    f, runs = run_twins(build, data() * 2, seed=11, jit_compile=jit)
    assert f.experimental_get_tracing_count() == 1
    assert runs[len(DATA_NP)][0] < runs[0][0]  # it trains
    # the optimizer's step counter is state too
    iterations = [v for v in runs[-1][1] if v.dtype == np.int64]
    assert iterations and int(iterations[0]) == len(DATA_NP) * 2


def test_model_retraced_on_a_new_batch_size_creates_no_variables(backend):
    build = _trainer(OPTIMIZERS["sgd"], False)
    calls = [(x[:k], y[:k]) for (x, y), k in zip(data() * 2, [6, 6, 3, 3, 6, 2, 3, 6, 2, 6])]
    f, _ = run_twins(build, calls, seed=5)
    assert f.experimental_get_tracing_count() == 3


# ============================================================================================= random
def test_generator_draws_new_numbers_each_call_as_eager(backend, jit):
    def build():
        g = gt.random.Generator.from_seed(1)

        def step(x):
            return x + g.normal((3,), dtype=gt.float64), g.uniform((2,), dtype=gt.float64)

        return step, list

    f, runs = run_twins(build, [(c64(x),) for x in XS], jit_compile=jit)
    assert f.experimental_get_tracing_count() == 1
    draws = [r[0][1] for r in runs]
    assert all(not np.allclose(draws[0], d) for d in draws[1:])
    # and the eager generator's own sequence
    g = gt.random.Generator.from_seed(1)
    for x, (got, _) in zip(XS, runs):
        assert_same(got[0], x + g.normal((3,), dtype=gt.float64).numpy())
        assert_same(got[1], g.uniform((2,), dtype=gt.float64).numpy())


def test_global_seed_draws_as_eager(backend):
    def build():
        def step(x):
            return x * gt.random.normal((3,), dtype=gt.float64), gt.random.uniform((2,), seed=7, dtype=gt.float64)

        return step, list

    f, runs = run_twins(build, [(c64(x),) for x in XS], seed=3)
    stateless = [r[0][1] for r in runs]
    assert all((s == stateless[0]).all() for s in stateless)  # an op seed: the same each call
    assert not np.allclose(runs[0][0][0] / XS[0], runs[1][0][0] / XS[1])
    # the global generator is left where eager code leaves it
    gt.random.set_seed(3)
    for _ in XS:
        gt.random.normal((3,), dtype=gt.float64)
    want = gt.random.normal((2,), dtype=gt.float64).numpy()
    gt.random.set_seed(3)
    for x in XS:
        f(c64(x))
    assert_same(gt.random.normal((2,), dtype=gt.float64).numpy(), want)


def test_dropout_and_its_gradient(backend, jit):
    def build():
        w = gt.Variable(np.linspace(0.5, 2.0, 8))

        def step(x):
            with gt.GradientTape() as tape:
                y = gt.nn.dropout(x * w, 0.5)
                loss = gt.reduce_sum(y**2)
            g = tape.gradient(loss, w)
            w.assign_sub(0.01 * g)
            return y, g

        return step, lambda: [w]

    calls = [(c64(RNG.normal(size=8)),) for _ in range(5)]
    f, runs = run_twins(build, calls, seed=21, jit_compile=jit)
    masks = [r[0][0] == 0 for r in runs]
    assert any((m != masks[0]).any() for m in masks[1:])  # a new mask each call
    assert f.experimental_get_tracing_count() == 1


def test_initializer_draws_of_the_first_trace_are_not_redrawn(backend):
    # a layer built inside the first trace draws its initial kernel once, as eager code does;
    # later calls must not draw it again (the global generator would run ahead of eager)
    def build():
        layer = gt.layers.Dense(3, dtype="float64")

        def step(x):
            return gt.nn.dropout(layer(x), 0.5), gt.random.uniform((2,), dtype=gt.float64)

        return step, lambda: list(layer.variables)

    calls = [(c64(RNG.normal(size=(2, 4))),) for _ in range(4)]
    run_twins(build, calls, seed=8)


def test_cond_on_a_random_draw_keeps_the_eager_sequence(backend, jit, control_flow):
    # a guard failing on a replay retraces with the numbers already drawn for that call
    def build():
        g = gt.random.Generator.from_seed(4)

        def step(x):
            z = g.normal((3,), dtype=gt.float64)
            return gt.cond(gt.reduce_sum(z) > 0, lambda: x * z, lambda: x - z), g.uniform((2,), dtype=gt.float64)

        return step, list

    f, runs = run_twins(build, [(c64(XS[k % 4]),) for k in range(12)], jit_compile=jit)
    assert f.experimental_get_tracing_count() == traces(control_flow, jit, 2)


def test_scalar_draws(backend, jit, control_flow):
    # shape () draws are scalars, eagerly and traced
    assert gt.random.normal(()).shape == ()
    assert gt.random.Generator.from_seed(2).uniform((), dtype=gt.float64).shape == ()

    def build():
        g = gt.random.Generator.from_seed(4)

        def step(x):
            z = g.normal((), dtype=gt.float64)
            return gt.cond(z > 0, lambda: x * z, lambda: x - z), gt.random.uniform((), dtype=gt.float64)

        return step, list

    f, runs = run_twins(build, [(c64(XS[k % 4]),) for k in range(8)], seed=1, jit_compile=jit)
    assert all(r[0][1].shape == () for r in runs)
    assert f.experimental_get_tracing_count() == traces(control_flow, jit, 2)


# ======================================================================================= control flow
def test_cond_eager_and_its_gradient(backend):
    x = c64(0.7)
    for pred, want_y, want_g in [(True, 0.7**3, 3 * 0.7**2), (False, math.sin(0.7), math.cos(0.7))]:
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.cond(gt.constant(pred), lambda: x**3, lambda: gt.sin(x))
        assert_same(snap(y), np.float64(want_y))
        assert_same(snap(tape.gradient(y, x)), np.float64(want_g))
    assert gt.cond(x > 0, lambda: "yes", lambda: "no") == "yes"
    assert gt.cond(False, lambda: 1, lambda: 2) == 2
    with pytest.raises(TypeError):
        gt.cond(x > 0, 1.0, lambda: x)
    with pytest.raises(ValueError):
        gt.cond(c64([1.0, 2.0]) > 0, lambda: x, lambda: x)


def test_cond_takes_both_branches_across_calls(backend, jit, control_flow):
    def build():
        def step(x):
            return gt.cond(gt.reduce_sum(x) > 0, lambda: x * 2.0, lambda: gt.exp(x) - 1.0)

        return step, list

    pos, neg = c64([1.0, 2.0, 3.0]), c64([-1.0, -2.0, 0.5])
    calls = [(pos,), (neg,), (pos,), (neg,), (c64([0.5, 0.5, -0.1]),), (c64([-3.0, 1.0, 1.0]),)]
    f, _ = run_twins(build, calls, jit_compile=jit)
    assert f.experimental_get_tracing_count() == traces(control_flow, jit, 2)


def test_nested_cond_paths(backend, jit, control_flow):
    def build():
        def step(x):
            s = gt.reduce_sum(x)
            return gt.cond(
                s > 0,
                lambda: gt.cond(s > 10, lambda: x / 10.0, lambda: x * 2.0),
                lambda: -x,
            )

        return step, list

    vals = [[1.0, 2.0], [20.0, 1.0], [-1.0, -2.0], [1.0, 2.0], [20.0, 1.0], [-5.0, 1.0], [3.0, 30.0]]
    f, _ = run_twins(build, [(c64(v),) for v in vals], jit_compile=jit)
    assert f.experimental_get_tracing_count() == traces(control_flow, jit, 3)


def test_gradients_through_cond_inside(backend, jit, control_flow):
    def build():
        def step(x):
            with gt.GradientTape() as tape:
                tape.watch(x)
                y = gt.cond(x > 0, lambda: x**3, lambda: gt.sin(x) * 2.0)
            return y, tape.gradient(y, x)

        return step, list

    xs = [0.5, -0.5, 1.5, -2.0, 0.25]
    f, runs = run_twins(build, [(c64(v),) for v in xs], jit_compile=jit)
    for v, ((y, g), _) in zip(xs, runs):
        assert_same(y, np.float64(v**3 if v > 0 else 2 * math.sin(v)))
        assert_same(g, np.float64(3 * v**2 if v > 0 else 2 * math.cos(v)))
    assert f.experimental_get_tracing_count() == traces(control_flow, jit, 2)


def test_cond_branches_assign_different_variables(backend, jit):
    def build():
        up = gt.Variable(0.0, dtype=gt.float64)
        down = gt.Variable(10.0, dtype=gt.float64)

        def step(x):
            gt.cond(x > 0, lambda: up.assign_add(x), lambda: down.assign_sub(-x))
            return up + down

        return step, lambda: [up, down]

    xs = [1.0, -1.0, 2.0, -3.0, 1.0, 0.5, -0.5]
    f, runs = run_twins(build, [(c64(v),) for v in xs], jit_compile=jit)
    assert_same(runs[-1][1], [np.float64(4.5), np.float64(5.5)])
    assert f.experimental_get_tracing_count() == 2


def test_while_loop_body_assigns_a_variable(backend, jit):
    def build():
        v = gt.Variable(1.0, dtype=gt.float64)

        def body(i):
            v.assign(v * 1.5 + 1.0)
            return i + 1

        def step(n):
            return gt.while_loop(lambda i: i < n, body, gt.constant(0))

        return step, lambda: [v]

    counts = [3, 3, 1, 0, 3, 1]
    f, runs = run_twins(build, [(gt.constant(n),) for n in counts], jit_compile=jit)
    assert [int(out) for out, _ in runs] == counts
    assert f.experimental_get_tracing_count() == 3


def _doubling(x, **kw):
    return gt.while_loop(lambda i, y: y < 100.0, lambda i, y: (i + 1, y * 2.0), (gt.constant(0), x), **kw)


def test_while_loop_eager(backend):
    i, y = _doubling(c64(3.0))
    assert int(i) == 6 and float(y) == 192.0
    i, y = _doubling(c64(3.0), maximum_iterations=2)
    assert int(i) == 2 and float(y) == 12.0
    i, y = _doubling(c64(300.0))
    assert int(i) == 0 and float(y) == 300.0
    assert float(gt.while_loop(lambda y: y < 10.0, lambda y: y + 3.0, c64(0.0))) == 12.0
    assert gt.while_loop(lambda n: n < 5, lambda n: n + 2, [0]) == [6]
    with pytest.raises(ValueError):
        gt.while_loop(lambda a, b: a < 3, lambda a, b: (a + 1,), (c64(0.0), c64(1.0)))


def test_while_loop_with_a_data_dependent_trip_count(backend, jit, control_flow):
    def build():
        return _doubling, list

    starts = [3.0, 30.0, 3.5, 60.0, 1.0, 2.0, 3.0, 90.0]  # trip counts 6, 2, 5, 1, 7, 6, 6, 1
    f, runs = run_twins(build, [(c64(s),) for s in starts], jit_compile=jit)
    assert [int(r[0][0]) for r in runs] == [6, 2, 5, 1, 7, 6, 6, 1]
    assert f.experimental_get_tracing_count() == traces(control_flow, jit, 5)


def test_while_loop_maximum_iterations(backend, jit):
    def build():
        def step(x, n):
            return _doubling(x, maximum_iterations=n)

        return step, list

    calls = [(c64(1.0), 3), (c64(2.0), 3), (c64(90.0), 3), (c64(1.0), 10), (c64(2.0), 3)]
    f, runs = run_twins(build, calls, jit_compile=jit)
    assert [int(r[0][0]) for r in runs] == [3, 3, 1, 7, 3]


def test_while_loop_maximum_iterations_as_a_tensor(backend):
    def build():
        def step(x, n):
            return _doubling(x, maximum_iterations=n)

        return step, list

    calls = [(c64(1.0), gt.constant(3)), (c64(2.0), gt.constant(3)), (c64(1.0), gt.constant(5))]
    _, runs = run_twins(build, calls)
    assert [int(r[0][0]) for r in runs] == [3, 3, 5]


def test_gradient_through_while_loop_equals_unrolled_loop(backend, jit):
    def body(i, y, x):
        return i + 1, gt.sin(y) * x + y

    def build():
        def step(x, n):
            with gt.GradientTape() as tape:
                tape.watch(x)
                _, y = gt.while_loop(lambda i, y: i < n, lambda i, y: body(i, y, x), (gt.constant(0), x))
            return y, tape.gradient(y, x)

        return step, list

    calls = [(c64(0.3), 4), (c64(1.3), 4), (c64(0.3), 2), (c64(-0.7), 4)]
    f, runs = run_twins(build, calls, jit_compile=jit)
    for (x, n), ((y, g), _) in zip(calls, runs):
        with gt.GradientTape() as tape:
            tape.watch(x)
            yy = x
            for i in range(n):
                _, yy = body(i, yy, x)
        assert_same(y, snap(yy))
        assert_same(g, snap(tape.gradient(yy, x)))
    assert f.experimental_get_tracing_count() == 2  # one per trip count


def test_gradient_through_data_dependent_while_loop(backend, jit):
    def build():
        def step(x):
            with gt.GradientTape() as tape:
                tape.watch(x)
                y = gt.while_loop(lambda y: y < 10.0, lambda y: y * x, x)
            return y, tape.gradient(y, x)

        return step, list

    xs = [1.5, 2.5, 1.5, 4.0]  # x**k with k = 6, 3, 6, 2
    _, runs = run_twins(build, [(c64(v),) for v in xs], jit_compile=jit)
    for v, k, ((y, g), _) in zip(xs, [6, 3, 6, 2], runs):
        assert_same(y, np.float64(v**k), rtol=1e-12)
        assert_same(g, np.float64(k * v ** (k - 1)), rtol=1e-12)


def test_seed_control_flow_example_under_function(backend, jit, control_flow):
    # the guide's "Control flow" example: the gradient connects only to the variable used.  As one
    # structured step, the variable of the branch not taken gets a zero gradient, not None, as under
    # tf.function (TensorFlow 2.21: tf.cond in a tf.function gives dv1 = 0.0 for x > 0, dx None)
    lowered = traces(control_flow, jit, 2) == 1
    untaken = np.float32(0.0) if lowered else None
    v0 = gt.Variable(2.0)
    v1 = gt.Variable(2.0)

    @gt.function(jit_compile=jit)
    def f(x):
        with gt.GradientTape(persistent=True) as tape:
            tape.watch(x)
            result = gt.cond(x > 0.0, lambda: v0, lambda: v1**2)
        dv0, dv1 = tape.gradient(result, [v0, v1])
        return result, dv0, dv1, tape.gradient(result, x)

    for _ in range(2):
        result, dv0, dv1, dx = f(gt.constant(1.0))
        assert_same(snap(result), np.float32(2.0))
        assert_same(snap(dv0), np.float32(1.0))  # tf.Tensor(1.0, shape=(), dtype=float32)
        assert_same(snap(dv1), untaken)
        assert dx is None  # None ... None
        result, dv0, dv1, dx = f(gt.constant(-1.0))
        assert_same(snap(result), np.float32(4.0))
        assert_same(snap(dv0), untaken)
        assert dx is None
        assert_same(snap(dv1), np.float32(4.0))
    v1.assign(3.0)
    assert_same(snap(f(gt.constant(-2.0))[2]), np.float32(6.0))
    assert f.experimental_get_tracing_count() == traces(control_flow, jit, 2)


def test_seed_if_on_variables_as_cond(backend, jit, control_flow):
    # the ApX guide's example: the branch depends on a Variable's value
    x = gt.Variable(2.0)
    y = gt.Variable(5.0)

    @gt.function(jit_compile=jit)
    def f():
        with gt.GradientTape() as tape:
            result = gt.cond(x > 1.0, lambda: x * y, lambda: x + y)
        return result, tape.gradient(result, {"x": x, "y": y})

    result, grads = f()
    assert_same(snap(result), np.float32(10.0))
    assert_same(snap(grads), {"x": np.float32(5.0), "y": np.float32(2.0)})
    x.assign(0.5)
    result, grads = f()
    assert_same(snap(result), np.float32(5.5))
    assert_same(snap(grads), {"x": np.float32(1.0), "y": np.float32(1.0)})
    x.assign(3.0)
    assert_same(snap(f()), (np.float32(15.0), {"x": np.float32(5.0), "y": np.float32(3.0)}))
    assert f.experimental_get_tracing_count() == traces(control_flow, jit, 2)


def test_more_than_eight_paths_run_eagerly_with_a_warning(backend, monkeypatch):
    monkeypatch.setattr(FUNCTION_MODULE, "LOWER_CONTROL_FLOW", False)
    f = gt.function(_doubling)  # (guards: one program per trip count)
    starts = [100.0 / 2**k + 1e-3 for k in range(10)]  # trip counts 0, 1, ..., 9
    for k, s in enumerate(starts[:8]):
        i, y = f(c64(s))
        assert int(i) == k
    assert f.experimental_get_tracing_count() == 8
    for k, s in enumerate(starts[8:], start=8):
        with pytest.warns(UserWarning, match="runs eagerly"):
            i, y = f(c64(s))
        assert int(i) == k
        assert_same(snap(y), np.float64(s * 2**k))
    assert f.experimental_get_tracing_count() == 8
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        i, _ = f(c64(starts[3]))  # a known path still runs its program
    assert int(i) == 3


# ============================================================================================= errors
def test_bool_of_a_traced_tensor_points_to_cond(backend):
    @gt.function
    def branchy(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(gt.OperatorNotAllowedInGraphError, match="gt.cond") as e:
        branchy(c64(1.0))
    assert isinstance(e.value, TypeError)
    assert "branchy" in str(e.value) and "while_loop" in str(e.value)
    assert_clean()


@pytest.mark.parametrize("convert", [float, int, lambda t: t.numpy(), lambda t: np.asarray(t)])
def test_value_reads_of_a_traced_tensor_raise(backend, convert):
    @gt.function
    def reads(x):
        return convert(gt.reduce_sum(x))

    with pytest.raises(gt.OperatorNotAllowedInGraphError, match="reads"):
        reads(c64([1.0, 2.0]))
    assert_clean()


def test_a_branch_inside_an_installed_library_is_named_with_the_users_line(backend, tmp_path, monkeypatch):
    """A library's ``if`` on a traced tensor (scikit-learn's ``normalize`` checks its input is finite)
    named only the user's line, which has no ``if``: the message names the library's function and line
    too (a module under a ``site-packages`` folder is an installed library)."""
    import importlib

    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "branchy_lib.py").write_text("def check(x):\n    if x[0] > 0:\n        return x\n    return -x\n")
    monkeypatch.syspath_prepend(str(lib))
    monkeypatch.delitem(sys.modules, "branchy_lib", raising=False)  # (this folder's, not another test's)
    branchy_lib = importlib.import_module("branchy_lib")

    @gt.function
    def step(x):
        return branchy_lib.check(x)  # the user's line

    with pytest.raises(gt.OperatorNotAllowedInGraphError) as e:
        step(c64([1.0, 2.0]))
    line = step.python_function.__code__.co_firstlineno + 2
    assert f"{__file__}:{line}, inside branchy_lib.check at {lib / 'branchy_lib.py'}:2" in str(e.value)
    assert_clean()


def test_tensors_of_two_backends(backend):
    other = other_backend(backend)

    @gt.function
    def mixed(a, b):
        return a + b

    a = c64([1.0, 2.0])
    b = gt.asarray(np.array([1.0, 2.0]), backend=other)
    with pytest.raises(ValueError, match="mixed"):
        mixed(a, b)
    assert_clean()
    assert_same(snap(mixed(a, a)), np.array([2.0, 4.0]))


def test_tensor_of_another_backend_captured_inside(backend):
    other = gt.asarray(np.array([1.0, 2.0]), backend=other_backend(backend))

    @gt.function
    def captures(a):
        return a + gt.sin(other)

    with pytest.raises(ValueError, match="captures"):
        captures(c64([1.0, 2.0]))
    assert_clean()


def test_traced_tensor_kept_after_the_trace(backend):
    leaked = []

    @gt.function
    def leaky(x):
        y = x * 2.0
        leaked.append(y)
        return y

    assert_same(snap(leaky(c64([1.0, 2.0]))), np.array([2.0, 4.0]))
    with pytest.raises(ValueError, match="leaky"):
        gt.exp(leaked[0]) + 1.0
    with pytest.raises(ValueError, match="another trace|after the trace"):
        gt.function(lambda z: z + leaked[0])(c64([1.0, 2.0]))
    assert_clean()


def test_variable_created_on_a_later_trace(backend):
    made = []

    @gt.function
    def lazy(x, make):
        if make:
            made.append(gt.Variable(x * 2.0))
        return x + 1.0

    lazy(c64([1.0]), False)
    with pytest.raises(ValueError, match="lazy"):
        lazy(c64([1.0]), True)
    assert_clean()


def test_variable_created_on_every_trace(backend):
    # as tf.function: only the first trace may create variables
    @gt.function
    def maker(x):
        v = gt.Variable(gt.zeros_like(x))
        v.assign_add(x)
        return v * 2.0

    assert_same(snap(maker(c64([1.0]))), np.array([2.0]))
    with pytest.raises(ValueError, match="maker"):
        maker(c64([1.0, 2.0]))
    assert_clean()


def test_input_signature(backend):
    @gt.function(input_signature=[gt.TensorSpec(shape=[None, 2], dtype=gt.float64)])
    def sig(x):
        return gt.reduce_sum(x, axis=0)

    assert sig.input_signature == (gt.TensorSpec([None, 2], gt.float64),)
    assert_same(snap(sig(c64([[1.0, 2.0]]))), np.array([1.0, 2.0]))
    assert_same(snap(sig(c64([[1.0, 2.0], [3.0, 4.0]]))), np.array([4.0, 6.0]))
    for bad in (c64([1.0, 2.0]), c64([[1.0, 2.0, 3.0]]), gt.constant(np.ones((1, 2), np.float32))):
        with pytest.raises(TypeError, match="sig"):
            sig(bad)
    with pytest.raises(TypeError):
        sig(c64([[1.0, 2.0]]), c64([[1.0, 2.0]]))
    with pytest.raises(TypeError):
        sig(x=c64([[1.0, 2.0]]))
    with pytest.raises(TypeError):
        gt.function(lambda x: x, input_signature=[(None, 2)])
    assert_clean()


def test_state_is_clean_after_errors(backend):
    v = gt.Variable(np.array([1.0, 2.0]), name="kept")

    @gt.function
    def fails(x, how):
        v.assign(v * 10.0)
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = x * v
            if how == "bool":
                bool(gt.reduce_sum(y) > 0)
            elif how == "raise":
                raise RuntimeError("user error")
        return tape.gradient(y, x)

    for how, err in [("bool", gt.OperatorNotAllowedInGraphError), ("raise", RuntimeError)]:
        with pytest.raises(err):
            fails(c64([1.0, 1.0]), how)
        assert_clean()
        assert "kept" in repr(v) and "traced" not in repr(v)
        assert_same(v.numpy(), np.array([1.0, 2.0]))  # the failed trace's assign is undone
        assert fails.experimental_get_tracing_count() == 0
    # eager taping works again, and so does the function
    x = c64(3.0)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    assert_same(snap(tape.gradient(y, x)), np.float64(6.0))
    assert_same(snap(fails(c64([1.0, 1.0]), "ok")), np.array([10.0, 20.0]))
    assert_same(snap(fails(c64([1.0, 1.0]), "ok")), np.array([100.0, 200.0]))
    assert_same(v.numpy(), np.array([100.0, 200.0]))


def test_error_inside_a_replayed_path_retrace(backend):
    # a guard sends a later call to a path whose trace fails: the error surfaces, state stays clean
    v = gt.Variable(1.0)

    @gt.function
    def f(x):
        v.assign_add(1.0)
        return gt.cond(x > 0, lambda: x * 2.0, lambda: float(x))

    assert_same(snap(f(gt.constant(1.0))), np.float32(2.0))
    with pytest.raises(gt.OperatorNotAllowedInGraphError):
        f(gt.constant(-1.0))
    assert_clean()
    assert_same(v.numpy(), np.float32(2.0))
    assert_same(snap(f(gt.constant(3.0))), np.float32(6.0))
    assert_same(v.numpy(), np.float32(3.0))


# ========================================================================================= outer tape
def test_call_under_an_outer_tape_gives_the_eager_gradient(backend, jit):
    w = gt.Variable(np.array([0.5, -1.5]))

    @gt.function(jit_compile=jit)
    def f(x):
        return gt.reduce_sum(gt.sin(x * w) * x)

    x = c64([0.3, 0.7])
    xv, wv = np.array([0.3, 0.7]), np.array([0.5, -1.5])
    for _ in range(2):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        gx, gw = tape.gradient(y, [x, w])
        assert_same(snap(y), np.sum(np.sin(xv * wv) * xv))
        assert_same(snap(gx), np.cos(xv * wv) * wv * xv + np.sin(xv * wv))
        assert_same(snap(gw), np.cos(xv * wv) * xv * xv)
        assert f.experimental_get_tracing_count() == 0  # eager under the tape
    f(x)
    assert f.experimental_get_tracing_count() == 1
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    assert_same(snap(tape.gradient(y, x)), np.cos(xv * wv) * wv * xv + np.sin(xv * wv))


def test_outer_tape_sees_variable_updates_inside(backend):
    def build():
        v = gt.Variable(np.array([1.0, 2.0]))

        def step(x):
            v.assign_add(x)
            return gt.reduce_sum(v * v)

        return step, lambda: [v]

    for outer in (False, True):
        step, _ = build()
        f = gt.function(build()[0])
        for x in XS[:2]:
            xs = c64(x[:2])
            if outer:
                with gt.GradientTape() as t1:
                    t1.watch(xs)
                    want = step(xs)
                with gt.GradientTape() as t2:
                    t2.watch(xs)
                    got = f(xs)
                assert_same(snap(got), snap(want))
                assert_same(snap(t2.gradient(got, xs)), snap(t1.gradient(want, xs)))
            else:
                assert_same(snap(f(xs)), snap(step(xs)))


# ====================================================================== what a new user tried (review)
def test_setting_the_learning_rate_changes_a_compiled_step(backend, jit):
    # a float learning rate is a variable of the optimizer (as Keras): not baked into the program
    finals = []
    for compiled in (False, True):
        w = gt.Variable(c64([1.0, 2.0]))
        opt = gt.optimizers.SGD(learning_rate=0.1)

        def step():
            with gt.GradientTape() as tape:
                loss = gt.reduce_sum(w * w)
            opt.apply_gradients([(tape.gradient(loss, w), w)])
            return loss

        if compiled:
            step = gt.function(step, jit_compile=jit)
        step()
        step()
        opt.learning_rate = 0.0
        step()
        opt.learning_rate = 0.05
        step()
        finals.append(w.numpy())
    assert_same(finals[1], finals[0])
    assert_same(finals[0], np.array([0.64, 1.28]) * 0.9)


def test_a_compiled_method_does_not_keep_its_instance_alive(backend):
    class Model:
        def __init__(self):
            self.w = gt.Variable(c64([1.0, 2.0]))

        @gt.function
        def f(self, x):
            return gt.reduce_sum(x * self.w)

    m = Model()
    ref = weakref.ref(m)
    assert float(m.f(c64([1.0, 1.0]))) == 3.0
    assert float(m.f(c64([2.0, 1.0]))) == 4.0
    assert m.f.experimental_get_tracing_count() == 1
    del m
    gc.collect()
    assert ref() is None
    assert Model.f._bound == {}


def test_a_method_of_a_class_without_weak_references_traces_once(backend):
    class Slotted:
        __slots__ = ("w",)

        def __init__(self):
            self.w = gt.Variable(2.0)

        @gt.function
        def f(self, x):
            return x * self.w

    s = Slotted()
    assert [float(s.f(gt.constant(v))) for v in (1.0, 2.0, 3.0)] == [2.0, 4.0, 6.0]
    assert s.f.experimental_get_tracing_count() == 1


def test_a_kept_tensor_used_after_its_trace_names_the_trace(backend):
    kept = []

    @gt.function
    def leak(x):
        y = x * 2.0
        kept.append(y)
        return y

    n = gt.constant(2.0)
    leak(n)
    add = gt.function(lambda a, b: a + b)
    for use in (lambda: add(kept[0], n), lambda: float(kept[0]), lambda: kept[0].numpy(), lambda: kept[0] + 1.0):
        with pytest.raises(ValueError, match="traced inside gt.function 'leak' was used after the trace ended"):
            use()
    assert_clean()


def test_an_input_signature_that_is_not_a_list():
    with pytest.raises(TypeError, match="input_signature must be a list or tuple"):
        gt.function(lambda x: x, input_signature=gt.TensorSpec(()))


def test_paths_that_draw_differently_trace_once_each(backend, jit):
    @gt.function(jit_compile=jit)
    def forward(h, training):
        return gt.cond(training, lambda: gt.nn.dropout(h, 0.5), lambda: h)

    h = gt.ones((4, 4), dtype=gt.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # (torch.compile: the second path's program is compiled too, and says so; tested apart)
        warnings.filterwarnings("ignore", message=".*compiles a program for each path")
        for _ in range(6):
            out = forward(h, gt.constant(True))
            assert set(np.unique(out.numpy())) <= {0.0, 2.0}
            assert_same(forward(h, gt.constant(False)).numpy(), np.ones((4, 4)))
    assert forward.experimental_get_tracing_count() == 2


def test_retracing_on_every_call_warns_once(backend):
    w = gt.Variable(gt.ones((3,), dtype=gt.float64))

    @gt.function
    def step(x, lr):
        w.assign_sub(lr * x)
        return w

    with pytest.warns(UserWarning, match="traced again on each of its last 5 calls") as record:
        for i in range(12):
            step(gt.ones((3,), dtype=gt.float64), 0.01 / (1 + i))
    assert sum("traced again" in str(r.message) for r in record) == 1
    assert step.experimental_get_tracing_count() == 12


def test_an_argument_updated_in_place_is_updated_for_the_caller(backend, jit):
    def f(x, y):
        x += 1.0
        y[0] = 0.0
        return x * 2.0

    results = []
    for compiled in (False, True):
        g = gt.function(f, jit_compile=jit) if compiled else f
        got = []
        for v in ([1.0, 2.0], [5.0, 7.0], [1.0, 2.0]):
            x, y = c64(v), c64([3.0, 4.0])
            out = g(x, y)
            got.append((out.numpy(), x.numpy(), y.numpy()))
        results.append(got)
    assert_same(results[1], results[0])
    assert_same(results[0][0][1], np.array([2.0, 3.0]))
    assert_same(results[0][0][2], np.array([0.0, 4.0]))


def test_a_function_without_tensor_arguments_traces_per_active_backend(backend):
    other = other_backend(backend)

    @gt.function
    def const():
        return gt.ones((2,), dtype=gt.float64) * 3.0

    assert const().backend == backend.split(":")[0]
    with gt.use_backend(other):
        assert const().backend == other
    assert const.experimental_get_tracing_count() == 2


def test_a_new_path_may_create_variables(backend, jit, control_flow):
    opt = gt.optimizers.Adam(0.1)
    wa, wb = gt.Variable(c64(1.0)), gt.Variable(c64(2.0))

    @gt.function(jit_compile=jit)
    def step(pick_a):
        with gt.GradientTape() as t:
            loss = gt.cond(pick_a, lambda: wa * wa, lambda: wb * wb)
        g = t.gradient(loss, [wa, wb])
        opt.apply_gradients((gi, v) for gi, v in zip(g, [wa, wb]) if gi is not None)
        return loss

    losses = [float(step(gt.constant(p))) for p in (True, False, True, False)]
    assert step.experimental_get_tracing_count() == traces(control_flow, jit, 2)
    assert losses[:2] == [1.0, 4.0] and losses[2] < 1.0 and losses[3] < 4.0
    assert int(opt.iterations) == 4


def test_a_failed_first_trace_leaves_no_half_updated_optimizer(backend):
    w = gt.Variable(c64([1.0, 2.0]))
    opt = gt.optimizers.Adam(0.1)

    def body(x, mistake):
        with gt.GradientTape() as t:
            loss = gt.reduce_sum(w * x)
        opt.apply_gradients([(t.gradient(loss, w), w)])
        if mistake:
            float(loss)
        return loss

    with pytest.raises(gt.OperatorNotAllowedInGraphError):
        gt.function(lambda x: body(x, True))(c64([1.0, 1.0]))
    assert_clean()
    gt.function(lambda x: body(x, False))(c64([1.0, 1.0]))
    assert int(opt.iterations) == 1
    assert_same(w.numpy(), np.array([0.9, 1.9]), rtol=1e-6)
    assert_same([v.numpy() for v in opt.variables[1:]], [np.array([0.1, 0.1]), np.array([0.001, 0.001])], rtol=1e-9)


# ========================================================================== gt.print, run eagerly
def _printing_step(w, stream):
    def step(x, n):
        gt.print("call x =", x, output_stream=stream)
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.cond(x > 0, lambda: (gt.print("positive", x, output_stream=stream), x * w)[1], lambda: x - w)
            body = lambda i, z: (gt.print("iteration", i, output_stream=stream), (i + 1, z * w))[1]
            _, z = gt.while_loop(lambda i, z: i < n, body, (gt.constant(0), y), maximum_iterations=5)
        return z, tape.gradient(z, [x, w])

    return step


@pytest.mark.parametrize("lowered", [True, False], ids=["lowered", "guards"])
def test_print_runs_on_every_call_where_eager_code_prints(backend, jit, lowered, capsys, monkeypatch):
    # gt.print is a step of the program (in its branch / loop body): every call prints what the same
    # calls print eagerly, in the same order, and nothing is printed twice by tracing or checking
    monkeypatch.setattr(FUNCTION_MODULE, "LOWER_CONTROL_FLOW", lowered)
    w = gt.Variable(c64(1.5))
    calls = [(2.0, 2), (-1.0, 1), (3.0, 0), (2.0, 2), (0.5, 3)]
    outputs = []
    for eager in (True, False):
        gt.config.run_functions_eagerly(eager)
        try:
            f = gt.function(_printing_step(w, "stdout"), jit_compile=jit)
            capsys.readouterr()
            if jit is True and not eager:  # torch.compile would print only while compiling: replayed
                with pytest.warns(UserWarning, match="replayed call by call instead, and prints on every call"):
                    got = [snap(f(c64(v), gt.constant(n))) for v, n in calls]
            else:
                got = [snap(f(c64(v), gt.constant(n))) for v, n in calls]
            outputs.append((capsys.readouterr().out, got))
        finally:
            gt.config.run_functions_eagerly(False)
        assert f.experimental_get_tracing_count() == (0 if eager else f.experimental_get_tracing_count())
    (eager_out, eager_vals), (out, vals) = outputs
    assert "iteration 2" in eager_out and "positive 2." in eager_out
    assert out == eager_out
    assert_same(vals, eager_vals)
    if lowered and jit is not True:
        assert f.experimental_get_tracing_count() == 1


def test_print_formats_as_tf_print(backend, capsys):
    gt.print("x:", gt.constant(np.arange(10.0)), 3, output_stream="stdout")  # tf.print: first and last 3
    gt.print(gt.constant(np.arange(4)), output_stream="stdout", sep=",", end="!\n", summarize=-1)
    gt.print("to stderr", gt.constant(1.5))
    out, err = capsys.readouterr()
    assert out == "x: [0. 1. 2. ... 7. 8. 9.] 3\n[0 1 2 3]!\n"
    assert err == "to stderr 1.5\n"


def test_run_functions_eagerly(backend):
    seen = []

    @gt.function
    def f(x):
        seen.append(1)  # a Python side effect: once per trace, or once per call when run eagerly
        return x * 2.0

    assert not gt.config.functions_run_eagerly()
    gt.config.run_functions_eagerly(True)
    try:
        assert gt.config.functions_run_eagerly()
        for _ in range(3):
            assert_same(snap(f(c64(1.0))), np.float64(2.0))
        assert len(seen) == 3 and f.experimental_get_tracing_count() == 0
    finally:
        gt.config.run_functions_eagerly(False)
    for _ in range(3):
        f(c64(1.0))
    assert len(seen) == 4 and f.experimental_get_tracing_count() == 1


def test_another_thread_using_a_variable_during_a_trace_is_told(backend):
    # while a trace runs every variable holds a stand-in: another thread computing with one gets an
    # error naming the function, never a traced tensor or a step recorded into the other trace
    import threading

    v = gt.Variable(c64(2.0))
    tracing_now = threading.Event()
    done = threading.Event()
    seen = []

    @gt.function
    def slow(x):
        tracing_now.set()
        done.wait(10)
        return x * v

    def other():
        tracing_now.wait(10)
        try:
            seen.append(v * 3.0)
        except Exception as e:
            seen.append(e)
        finally:
            done.set()

    t = threading.Thread(target=other)
    t.start()
    out = slow(c64(1.0))
    t.join()
    assert_same(snap(out), np.float64(2.0))
    (err,) = seen
    assert isinstance(err, (ValueError, RuntimeError)), err
    assert "gt.function 'slow' is tracing in another thread" in str(err)
    assert "run_functions_eagerly" in str(err)
    assert_same(snap(v * 3.0), np.float64(6.0))  # after the trace, the variable is itself again
    assert_same(snap(slow(c64(2.0))), np.float64(4.0))


def test_compiler_paths_are_told(backend):
    # a compiler that takes one path at a time (torch.compile) compiles each path of a gt.cond: the
    # second path says so, once; replayed programs take both branches as one step, traced once
    if getattr(gt.get_backend(), "compiles", None) != "opt-in":
        pytest.skip(f"no opt-in compiler on {backend}")
    f = gt.function(lambda x: gt.cond(gt.sum(x) > 0, lambda: x * 2.0, lambda: -x), jit_compile=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(snap(f(c64([1.0, 2.0]))), np.array([2.0, 4.0]))
    with pytest.warns(UserWarning, match="compiles a program for each path"):
        assert_same(snap(f(c64([-1.0, -2.0]))), np.array([1.0, 2.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(c64([-3.0, 1.0]))  # (a known path, and said once)
    replayed = gt.function(lambda x: gt.cond(gt.sum(x) > 0, lambda: x * 2.0, lambda: -x), jit_compile=False)
    for v in ([1.0, 2.0], [-1.0, -2.0]):
        replayed(c64(v))
    assert replayed.experimental_get_tracing_count() == 1
