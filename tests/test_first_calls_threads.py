"""Ops called for the first time from several threads at once: each op's generated path is made by
one thread at a time (CPython's syntax-tree conversions keep one recursion counter per interpreter,
which concurrent ones corrupt: ``SystemError: AST constructor recursion depth mismatch`` in 4 of 5 runs
of eight threads before), and every thread gets its values."""

from __future__ import annotations

import sys
import threading

import numpy as np

import gradtape as gt
from gradtape.core import dispatch

OPS = (gt.sin, gt.cos, gt.exp, gt.tanh, gt.log1p, gt.sqrt, gt.square, gt.abs, gt.sinh, gt.cosh, gt.expm1)


def test_first_calls_from_many_threads(backend):
    x0 = np.array([0.5, 1.0])
    want = [np.asarray(f(gt.constant(x0)).numpy()) for f in OPS]
    errors = []

    def work():
        try:
            x = gt.constant(x0)
            for f, w in zip(OPS, want):
                np.testing.assert_allclose(f(x).numpy(), w, rtol=1e-6)
            np.testing.assert_allclose(gt.sum(x * x + x - x / 2.0).numpy(), np.sum(x0 * x0 + x0 / 2.0), rtol=1e-6)
        except BaseException as e:  # (reported by the test, not lost in the thread)
            errors.append(e)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # (threads switch often: the race, if there is one, shows)
    try:
        for _ in range(10):
            for f in OPS:  # every op back to its stub: its next call generates its path again
                op = next(op for op, (g, _) in dispatch._FAST_FUNCS.items() if g is f)
                op.on_change()
            threads = [threading.Thread(target=work) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[:3]
