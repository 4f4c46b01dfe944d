"""What every workload module shares: the workload definitions (sizes), the data, the ``Case``.

A workload module (one per framework family) exposes ``FRAMEWORKS`` (the row names it serves),
``available(framework)`` (None, or why it cannot run here) and ``setup(framework, workload, cfg)``,
which builds the data and returns a :class:`Case` (or raises :class:`NotApplicable`).  The worker
(``benchmarks/_worker.py``) times ``case.step()`` in a fresh process; nothing here times anything.

Every framework gets the same float32 data from :func:`data` (NumPy's ``default_rng(0)``), so the
first step of every framework computes the same numbers and ``case.checksum`` can be compared.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: the workloads, their sizes, and the unit their time is reported in
SIZES = {
    "full": {
        "W1": {"ops": 2000, "shape": (1,)},
        "W2": {"ops": 2000, "shape": (64,)},
        "W3": {"batch": 128, "dims": (784, 512, 512, 10)},
        "W4": {"layers": 8, "width": 1024, "batch": 512},
        "W5": {"n": 256},
        "W6": {"ops": 100_000, "shape": ()},
        "W7": {"batch": 4096, "dims": (784, 512, 512, 10)},
    },
    # --tiny: the same programs, shrunk, to test the harness itself (numbers meaningless)
    "tiny": {
        "W1": {"ops": 100, "shape": (1,)},
        "W2": {"ops": 100, "shape": (64,)},
        "W3": {"batch": 16, "dims": (32, 16, 16, 10)},
        "W4": {"layers": 2, "width": 64, "batch": 16},
        "W5": {"n": 16},
        "W6": {"ops": 2000, "shape": ()},
        "W7": {"batch": 64, "dims": (32, 16, 16, 10)},
    },
}

WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "W6", "W7")

#: (column title, unit, factor from seconds per step) for the table
UNITS = {
    "W1": ("W1 chain (1,)", "µs/op", 1e6),
    "W2": ("W2 chain (64,)", "µs/op", 1e6),
    "W3": ("W3 MLP step", "ms/step", 1e3),
    "W4": ("W4 8×matmul+tanh", "ms", 1e3),
    "W5": ("W5 jacobian 256²", "ms", 1e3),
    "W6": ("W6 100k-op chain", "s", 1.0),
    "W7": ("W7 peak / held", "MiB", None),
}

LEARNING_RATE = 0.01
CHAIN_SCALE = 1.0001
CHAIN_SHIFT = 1e-6
CHAIN_START = 0.5


class NotApplicable(Exception):
    """This framework has no meaningful version of this workload (the table shows a dash)."""


class Unavailable(Exception):
    """This framework cannot run here (a compiler missing or failing): the table says why."""


@dataclass
class Case:
    """One prepared workload: ``step()`` runs it once (forward + backward [+ update]) and returns
    what ``sync`` needs to wait for and ``checksum`` sums; ``ops`` divides the time (W1/W2/W6: per
    chain step).  ``keep`` (W7) returns, from the step's result, the object the caller would still
    hold after ``gradient()`` returns (the tape, or the loss tensor that owns torch's graph).
    ``info`` (compiled steps): called after timing, extra fields for the record (how the step ran,
    how often it was traced); ``notes``: lines for the record (warnings of the first call)."""

    step: Callable[[], Any]
    ops: int = 1
    sync: Callable[[Any], None] = lambda r: None
    checksum: Callable[[Any], float] | None = None
    keep: Callable[[Any], Any] = lambda r: None
    notes: list = field(default_factory=list)
    info: Callable[[], dict] | None = None


def record_first_call_warnings(case):
    """``case`` with its first ``step()`` call recording the warnings it raises in ``case.notes``
    (a compiler that fails, a program that falls back to eager); later calls run ``step`` bare."""
    raw = case.step

    def first():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = raw()
        case.step = raw
        case.notes.extend(f"{w.category.__name__}: {str(w.message)[:400]}" for w in caught)
        return r

    case.step = first
    return case


_TORCH_COMPILE = []


def torch_compile_problem():
    """None when ``torch.compile`` (inductor) compiles and runs a tiny function here, else why not.
    Probed once per process, before any first call is timed (so no first call pays inductor's
    start-up)."""
    if not _TORCH_COMPILE:
        import torch

        try:
            f = torch.compile(lambda a: torch.sin(a) * 2.0 + 1.0, fullgraph=True, dynamic=False)
            f(torch.ones(3))
            _TORCH_COMPILE.append(None)
        except Exception as e:  # no C++ compiler, a broken inductor: the row says why
            first = (str(e).strip().splitlines() or [""])[0]
            _TORCH_COMPILE.append(f"torch.compile (inductor) fails here: {type(e).__name__}: {first}"[:400])
    return _TORCH_COMPILE[0]


def sizes(cfg, workload):
    """The sizes of ``workload`` under ``cfg`` (``--tiny`` shrinks them; ``override`` replaces)."""
    over = cfg.get("override") or {}
    if workload in over:
        return over[workload]
    return SIZES["tiny" if cfg.get("tiny") else "full"][workload]


# ---------------------------------------------------------------------------------------- data
def chain_start(shape):
    return np.full(shape, CHAIN_START, dtype=np.float32)


def mlp_data(batch, dims, seed=0):
    """Inputs, integer labels and the six parameters ``[W1, b1, W2, b2, W3, b3]`` of the MLP."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, dims[0]), dtype=np.float32)
    labels = rng.integers(0, dims[-1], size=batch).astype(np.int64)
    params = []
    for fan_in, fan_out in zip(dims[:-1], dims[1:]):
        params.append(rng.standard_normal((fan_in, fan_out), dtype=np.float32) / math.sqrt(fan_in))
        params.append(np.zeros((fan_out,), np.float32) + np.float32(0.01))
    return x, labels, params


def deep_data(layers, width, batch, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, width), dtype=np.float32)
    ws = [rng.standard_normal((width, width), dtype=np.float32) / math.sqrt(width) for _ in range(layers)]
    return x, ws


def jac_data(n, seed=2):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, n), dtype=np.float32) / math.sqrt(n)
    x = rng.standard_normal((n,), dtype=np.float32)
    return w, x


def l1(result, to_numpy=np.asarray):
    """A float64 L1 checksum of a result (or a nested list of them); ``to_numpy`` reads one array."""
    if isinstance(result, (list, tuple)):
        return float(sum(l1(r, to_numpy) for r in result))
    return np_sum(np.abs(np.asarray(to_numpy(result), dtype=np.float64)))


def np_sum(arrays):
    """A float64 checksum of anything array-like (or a list of them)."""
    if isinstance(arrays, (list, tuple)):
        return float(sum(np_sum(a) for a in arrays))
    return float(np.asarray(arrays, dtype=np.float64).sum())
