"""Where a W1-style chain's time goes: gradtape against the minimal tape, phase by phase.

    python benchmarks/chain_breakdown.py                 # (1,) float32, 2,000 steps, NumPy
    python benchmarks/chain_breakdown.py --shape 64 --backend numpy --steps 2000 --repeats 25

One process, the frameworks interleaved call by call (so a busy machine slows both alike), medians
of process CPU time, in µs per chain step (``y = sin(y) * 1.0001 + 1e-6``: three ops):

- ``forward, no tape``: the ops alone (gradtape's not-recording path; NumPy itself for the anchors);
- ``forward, recorded``: inside a tape that watches the input;
- ``backward``: ``tape.gradient`` (gradtape) / the minimal tape's walk;
- on ``--backend torch``, also ``torch.autograd`` (the same chain on a tensor that requires grad,
  then ``torch.autograd.grad``): the anchor of issue 23's "gradtape-torch W1 <= torch.autograd";
- ``--profile``: a cProfile of one gradtape step, top functions by own time.

``--masked``: instead, what the NaN-safe (masked) rules cost: a 1,000-step chain
``y = sqrt(y) * 0.5 + log(y + 1) * (y / 3)`` (whose rules divide with ``xdivy`` and multiply with
``strong_zero_multiply`` / ``multiply_no_nan``: 0 for a zero gradient), forward + backward, in µs
per op, with the masks as they are and with the native namespace's masked helpers replaced by the
plain quotient / product (what the rules would cost unmasked), interleaved call by call.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import statistics
import sys
import time

for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_k, "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # CPU figures: a CUDA build of jaxlib stays off the GPU
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks.workloads.common import CHAIN_SCALE, CHAIN_SHIFT  # noqa: E402
from benchmarks.workloads.numpy_bench import MiniTape, _Var  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--shape", default="1", help="comma-separated; '' for a 0-d array (W6)")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    ap.add_argument("--masked", action="store_true", help="the masked rules' extra cost (see the docstring)")
    a = ap.parse_args(argv)

    import gradtape as gt

    if a.masked:
        return masked(gt, a)

    gt.set_backend(a.backend)
    shape = tuple(int(s) for s in a.shape.split(",") if s.strip())
    x0 = np.full(shape, 0.5, np.float32)
    x = gt.constant(x0)
    n = a.steps
    sin, npsin = gt.sin, np.sin
    times = {
        k: []
        for k in (
            "gradtape forward, no tape",
            "gradtape forward, recorded",
            "gradtape backward",
            "minitape forward, recorded",
            "minitape backward",
            "numpy forward",
        )
    }

    def clock():
        return time.process_time()

    def gt_plain():
        t0 = clock()
        y = x
        for _ in range(n):
            y = sin(y) * CHAIN_SCALE + CHAIN_SHIFT
        times["gradtape forward, no tape"].append(clock() - t0)

    def gt_taped():
        t0 = clock()
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = x
            for _ in range(n):
                y = sin(y) * CHAIN_SCALE + CHAIN_SHIFT
        t1 = clock()
        tape.gradient(y, x)
        t2 = clock()
        times["gradtape forward, recorded"].append(t1 - t0)
        times["gradtape backward"].append(t2 - t1)

    def mini():
        t0 = clock()
        tape = MiniTape()
        xv = _Var(x0)
        y = xv
        for _ in range(n):
            y = tape.add(tape.mul(tape.sin(y), CHAIN_SCALE), CHAIN_SHIFT)
        t1 = clock()
        tape.gradient(y, xv)
        t2 = clock()
        times["minitape forward, recorded"].append(t1 - t0)
        times["minitape backward"].append(t2 - t1)

    def np_plain():
        t0 = clock()
        y = x0
        for _ in range(n):
            y = npsin(y) * CHAIN_SCALE + CHAIN_SHIFT
        times["numpy forward"].append(clock() - t0)

    fns = (gt_plain, gt_taped, mini, np_plain)
    if a.backend == "torch":
        import torch

        tx = torch.from_numpy(x0.copy())
        times["torch.autograd forward"] = []
        times["torch.autograd backward"] = []

        def torch_autograd():
            t0 = clock()
            xr = tx.clone().requires_grad_()
            y = xr
            for _ in range(n):
                y = torch.sin(y) * CHAIN_SCALE + CHAIN_SHIFT
            t1 = clock()
            torch.autograd.grad(y, xr, torch.ones_like(y))
            t2 = clock()
            times["torch.autograd forward"].append(t1 - t0)
            times["torch.autograd backward"].append(t2 - t1)

        fns += (torch_autograd,)
    for _ in range(2):
        for f in fns:
            f()
    for _ in range(a.repeats):
        for f in fns:
            gc.collect()
            f()
    med = {k: statistics.median(v) / n * 1e6 for k, v in times.items()}
    print(f"{a.backend}, shape {shape}, {n} steps, median of {a.repeats} (process CPU time, µs per step)")
    for k, v in med.items():
        print(f"  {k:28s} {v:8.2f}")
    gt_total = med["gradtape forward, recorded"] + med["gradtape backward"]
    mini_total = med["minitape forward, recorded"] + med["minitape backward"]
    fwd = med["gradtape forward, recorded"] / med["minitape forward, recorded"]
    bwd = med["gradtape backward"] / med["minitape backward"]
    print(f"  gradtape / minitape: forward {fwd:.2f}x, backward {bwd:.2f}x, total {gt_total / mini_total:.2f}x")
    if "torch.autograd forward" in med:
        ta = med["torch.autograd forward"] + med["torch.autograd backward"]
        print(f"  gradtape / torch.autograd: total {gt_total / ta:.2f}x")
    if a.profile:
        pr = cProfile.Profile()
        pr.enable()
        gt_taped()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(a.profile)


def masked(gt, a):
    """The masked rules against the same rules unmasked (see the module docstring)."""
    from gradtape.core.rule_namespace import native_namespace

    gt.set_backend(a.backend)
    x = gt.constant(np.full(tuple(int(s) for s in a.shape.split(",") if s.strip()), 0.5, np.float32))
    ns = native_namespace(x._b)
    masks = {k: getattr(ns, k) for k in ("xdivy", "strong_zero_multiply", "multiply_no_nan")}
    plain = {
        "xdivy": lambda u, v: u / v,
        "strong_zero_multiply": lambda u, v: u * v,
        "multiply_no_nan": lambda u, v: u * v,
    }
    n = 1000
    ops = 7 * n  # sqrt, multiply, add, log, divide, multiply, add

    def step():
        t0 = time.process_time()
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = x
            for _ in range(n):
                y = gt.sqrt(y) * 0.5 + gt.log(y + 1.0) * (y / 3.0)
        tape.gradient(y, x)
        return time.process_time() - t0

    times = {"masked": [], "unmasked": []}
    for r in range(a.repeats + 2):
        for k, fns in (("masked", masks), ("unmasked", plain)):
            for name, fn in fns.items():
                setattr(ns, name, fn)
            gc.collect()
            t = step()
            if r >= 2:
                times[k].append(t)
    for name, fn in masks.items():
        setattr(ns, name, fn)
    med = {k: statistics.median(v) / ops * 1e6 for k, v in times.items()}
    print(
        f"{a.backend}, masked chain, {n} steps, median of {a.repeats} (process CPU time, µs per op, forward + backward)"
    )
    for k, v in med.items():
        print(f"  {k:10s} {v:8.2f}")
    print(f"  the masks cost {med['masked'] / med['unmasked'] - 1:+.0%}")


if __name__ == "__main__":
    main()
