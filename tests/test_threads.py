"""Variable updates from many threads lose nothing (issue 22, item 1): ``assign``, ``assign_add``,
``assign_sub``, ``v[k] = x`` and an optimizer's ``apply_gradients`` are each atomic with respect to
other threads, eagerly and inside ``gt.function`` (replayed, or compiled by jax.jit /
torch.compile), on every backend.

The interpreter is told to switch threads as often as it can (``sys.setswitchinterval``) so that a
read-modify-write that is not atomic loses updates on every run (each of these tests failed before
the variables took a lock)."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import dispatch

THREADS, CALLS = 8, 150
TOTAL = THREADS * CALLS


@pytest.fixture(autouse=True)
def busy_switching():
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def hammer(work, threads=THREADS):
    """Run ``work(k)`` on ``threads`` threads at once, each on the caller's active backend (the
    active backend is per thread); re-raise the first error of any."""
    start = threading.Barrier(threads)
    errors = []
    backend = gt.get_backend().name

    def run(k):
        try:
            start.wait()
            with gt.use_backend(backend):
                work(k)
        except BaseException as e:  # (re-raised below)
            errors.append(e)

    ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def test_eager_assign_add_and_assign_sub_lose_nothing(backend):
    v = gt.Variable(np.zeros(3), dtype=gt.float64)
    w = gt.Variable(np.zeros(3), dtype=gt.float64)
    one = gt.constant(np.ones(3), dtype=gt.float64)

    def work(k):
        for _ in range(CALLS):
            v.assign_add(one)
            w.assign_sub(np.ones(3))

    hammer(work)
    np.testing.assert_array_equal(v.numpy(), np.full(3, TOTAL))
    np.testing.assert_array_equal(w.numpy(), np.full(3, -TOTAL))


def test_setitem_loses_nothing(backend):
    """Each thread writes its own elements: every write is there at the end (a backend whose
    ``setitem`` makes a new array, JAX's or array_api_strict's, lost the others' writes)."""
    v = gt.Variable(np.zeros(TOTAL), dtype=gt.float64)

    def work(k):
        for j in range(CALLS):
            v[k * CALLS + j] = 1.0

    hammer(work)
    assert float(np.sum(v.numpy())) == TOTAL


def test_assign_is_never_torn(backend):
    """A reader never sees half of one assignment and half of another, and the last write wins whole."""
    n = 64
    v = gt.Variable(np.zeros(n), dtype=gt.float64)
    seen = []

    def work(k):
        value = np.full(n, float(k))
        for _ in range(CALLS):
            if k % 2:
                v.assign(value)
            else:
                a = v.numpy()
                seen.append(bool(np.all(a == a[0])))

    hammer(work)
    a = v.numpy()
    assert all(seen) and np.all(a == a[0]) and a[0] in (1.0, 3.0, 5.0, 7.0)


@pytest.mark.parametrize("jit_compile", [None, False])
def test_compiled_assign_add_loses_nothing(backend, jit_compile):
    """The issue's program: 8 threads x 150 calls of a traced step that adds one end at 1,200
    (``None``: the backend's default executor, jax.jit on JAX; ``False``: replayed)."""
    v = gt.Variable(0.0, dtype=gt.float64)
    one = gt.constant(1.0, dtype=gt.float64)
    step = gt.function(lambda x: (v.assign_add(one), gt.sum(x) + v)[1], jit_compile=jit_compile)
    x = gt.constant(np.ones(3))
    step(x)
    v.assign(0.0)

    def work(k):
        for _ in range(CALLS):
            step(x)

    hammer(work)
    assert step.experimental_get_tracing_count() == 1
    assert float(v.numpy()) == TOTAL


def test_torch_compiled_assign_add_loses_nothing():
    if "torch" not in gt.available_backends():
        pytest.skip("torch is not installed")
    with gt.use_backend("torch"):
        v = gt.Variable(0.0, dtype=gt.float64)
        w = gt.Variable(0.0, dtype=gt.float64)
        step = gt.function(lambda x: (v.assign_add(gt.sum(x)), w.assign_sub(1.0), v + w)[-1], jit_compile=True)
        x = gt.constant(np.ones(1))
        step(x)
        v.assign(0.0)
        w.assign(0.0)
        hammer(lambda k: [step(x) for _ in range(CALLS)])
        assert (float(v.numpy()), float(w.numpy())) == (TOTAL, -TOTAL)


def test_compiled_steps_and_eager_updates_of_one_variable_lose_nothing(backend):
    v = gt.Variable(0.0, dtype=gt.float64)
    step = gt.function(lambda: v.assign_add(2.0).read_value())
    step()
    v.assign(0.0)

    def work(k):
        for _ in range(CALLS):
            if k % 2:
                step()
            else:
                v.assign_sub(1.0)

    hammer(work)
    assert float(v.numpy()) == TOTAL // 2


@pytest.mark.parametrize("name", ["SGD", "Adam"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "gt.function"])
def test_apply_gradients_loses_nothing(backend, name, compiled):
    """One optimizer applied from 8 threads: every step counted, every update in the variable.
    SGD with learning rate 1 and gradient -1 adds exactly 1 per step; Adam's first moment after n
    steps of the gradient 1 is 1 - beta_1**n only if no step read a moment another overwrote."""
    opt = gt.optimizers.SGD(1.0) if name == "SGD" else gt.optimizers.Adam(0.001, beta_1=0.999)
    var = gt.Variable(np.zeros(2), dtype=gt.float64)
    grad = gt.constant(np.full(2, -1.0 if name == "SGD" else 1.0), dtype=gt.float64)

    def apply(g):
        opt.apply_gradients([(g, var)])

    step = gt.function(apply) if compiled else apply
    hammer(lambda k: [step(grad) for _ in range(CALLS)])  # (the first calls: all at once)
    n = TOTAL
    if compiled:
        assert step.experimental_get_tracing_count() == 1  # traced by one thread; the others waited
    assert int(opt.iterations) == n
    if name == "SGD":
        np.testing.assert_array_equal(var.numpy(), np.full(2, n))
    else:
        m = opt._slot(var, "momentum").numpy()
        expect = 0.0
        for _ in range(n):  # the same float64 recurrence, one step at a time
            expect = expect + (1.0 - expect) * (1 - 0.999)
        # (a lost step would leave it 1e-3 * 0.999**n ~ 3e-4 short)
        np.testing.assert_allclose(m, np.full(2, expect), rtol=0, atol=1e-12)


def test_traces_while_other_threads_update_lose_nothing(backend):
    """A trace swaps every variable's value for a stand-in while it runs: other threads' updates
    wait for it (and it for theirs)."""
    v = gt.Variable(0.0, dtype=gt.float64)
    traces = 5

    def work(k):
        if k == 0:
            for _ in range(traces):  # a new function each time: each call traces
                gt.function(lambda: v.assign_add(1.0).read_value())()
        else:
            for _ in range(CALLS):
                v.assign_add(1.0)

    hammer(work)
    assert float(v.numpy()) == traces + (THREADS - 1) * CALLS


FIRST_CALL_OPS = (gt.sin, gt.cos, gt.exp, gt.tanh, gt.log1p, gt.sqrt, gt.square, gt.abs, gt.sinh, gt.cosh, gt.expm1)


def test_first_calls_of_ops_from_many_threads(backend):
    """Each op's generated path is made by one thread at a time (CPython's syntax-tree conversions keep
    one recursion counter per interpreter, which concurrent ones corrupt: ``SystemError: AST constructor
    recursion depth mismatch`` in 4 of 5 runs of eight threads before), and every thread gets its values."""
    x0 = np.array([0.5, 1.0])
    want = [np.asarray(f(gt.constant(x0)).numpy()) for f in FIRST_CALL_OPS]

    def work(_):
        x = gt.constant(x0)
        for f, w in zip(FIRST_CALL_OPS, want):
            np.testing.assert_allclose(f(x).numpy(), w, rtol=1e-6)
        np.testing.assert_allclose(gt.sum(x * x + x - x / 2.0).numpy(), np.sum(x0 * x0 + x0 / 2.0), rtol=1e-6)

    for _ in range(10):
        for f in FIRST_CALL_OPS:  # every op back to its stub: its next call generates its path again
            op = next(op for op, (g, _) in dispatch._FAST_FUNCS.items() if g is f)
            op.on_change()
        hammer(work)
