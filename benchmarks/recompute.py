"""``gt.recompute_grad`` (issue 24, item 4): peak memory and time of a 16-layer MLP's training step,
plain and with each layer recomputed in the backward, on NumPy and PyTorch (CPU).

    python benchmarks/recompute.py                 # numpy and torch, ~2 min on the 2-core machine
    python benchmarks/recompute.py --backends numpy --repeats 3 --batch 64
    python benchmarks/recompute.py --tiny          # the harness only (a few seconds)

The model: 16 residual MLP layers ``h + gelu(h @ W1 + b1) @ W2 + b2`` (a transformer's MLP block:
width 64, hidden 256), float32, batch 4096 (activations, not weights, fill the memory: the case
recomputation is for), loss ``mean(h**2)``; the step is the loss and its
gradient with respect to the 64 variables.  ``recompute`` wraps each layer in ``gt.recompute_grad``
(the variables are read inside, as a Keras layer's are); ``matmul`` adds
``policy=gt.checkpoint_policies.save_matmul_outputs``.  Every row's gradients are compared with the
plain step's (max abs difference printed).

Peak memory is measured for one step in a fresh process per row (so nothing of another row's run is
in it), after a warm-up step: the rise of the process's peak resident set (``VmHWM``, reset to the
current RSS through ``/proc/self/clear_refs`` before the step; Linux) over that RSS, with glibc's
mmap threshold fixed at 64 KiB
(``MALLOC_MMAP_THRESHOLD_``) so that every large array is mapped and unmapped on its own, and
PyTorch's and NumPy's allocations alike are seen; on NumPy also ``tracemalloc``'s peak (NumPy reports
its array allocations to it), a second measure of the same thing.  Time: the median of ``--repeats``
steps' process CPU time (``--clock wall`` for wall time), rows interleaved, in one process per
backend, after a warm-up step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_k, "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # CPU figures: a CUDA build of jaxlib stays off the GPU

import numpy as np  # noqa: E402

MODES = ("plain", "recompute", "matmul")


def build(backend, depth, width, hidden, batch, mode, approximate=False, seed=0):
    """The data, the variables and the training step of ``mode`` on ``backend``."""
    import gradtape as gt

    gt.set_backend(backend)
    rng = np.random.default_rng(seed)
    params = []
    for _ in range(depth):
        # (scaled first, then cast: a float32 array divided by np.sqrt's float64 scalar is float64 in NumPy 2)
        w1 = (rng.standard_normal((width, hidden)) / np.sqrt(width)).astype(np.float32)
        w2 = (rng.standard_normal((hidden, width)) / np.sqrt(hidden) / depth).astype(np.float32)
        params.append(
            (
                gt.Variable(w1),
                gt.Variable(np.zeros(hidden, np.float32)),
                gt.Variable(w2),
                gt.Variable(np.zeros(width, np.float32)),
            )
        )
    x = gt.constant(rng.standard_normal((batch, width)).astype(np.float32))

    def layer(k):
        w1, b1, w2, b2 = params[k]

        def f(h):
            return h + gt.matmul(gt.nn.gelu(gt.matmul(h, w1) + b1, approximate=approximate), w2) + b2

        f.__name__ = f.__qualname__ = f"layer{k}"
        return f

    layers = [layer(k) for k in range(depth)]
    if mode == "recompute":
        layers = [gt.recompute_grad(f) for f in layers]
    elif mode == "matmul":
        layers = [gt.recompute_grad(f, policy=gt.checkpoint_policies.save_matmul_outputs) for f in layers]
    variables = [v for p in params for v in p]
    assert all(v.dtype == gt.float32 for v in variables), "the model is float32 throughout"

    def step():
        with gt.GradientTape() as tape:
            h = x
            for f in layers:
                h = f(h)
            loss = gt.reduce_mean(h * h)
        return loss, tape.gradient(loss, variables)

    return step


def _status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak():
    """Reset the process's peak RSS to its current RSS (Linux: ``/proc/self/clear_refs``); returns it."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return _status("VmRSS")


def measure_memory(args):
    """One step of one row, in this (fresh) process, after a warm-up step: the peak RSS rise over the
    RSS before it and, on NumPy, tracemalloc's peak."""
    import gc

    step = build(args.backend, args.depth, args.width, args.hidden, args.batch, args.mode, args.approximate)
    step()  # warm-up: imports, generated code, first-call caches
    gc.collect()
    traced = None
    base = _reset_peak()
    if args.backend == "numpy":
        import tracemalloc

        tracemalloc.start()
        step()
        traced = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    else:
        step()
    rss = _status("VmHWM") - base
    print(json.dumps({"rss": rss, "traced": traced}))


def memory_row(args, backend, mode):
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    cmd = [sys.executable, os.path.abspath(__file__), "--_memory", backend, mode]
    cmd += [
        "--depth",
        str(args.depth),
        "--width",
        str(args.width),
        "--hidden",
        str(args.hidden),
        "--batch",
        str(args.batch),
    ]
    cmd += ["--approximate"] if args.approximate else []
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if p.returncode:
        raise RuntimeError(f"memory run {backend}/{mode} failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def time_rows(args, backend):
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    steps = {m: build(backend, args.depth, args.width, args.hidden, args.batch, m, args.approximate) for m in MODES}
    ref = None
    diffs, times = {}, {m: [] for m in MODES}
    for m in MODES:  # warm-up, and the gradients compared with the plain step's
        loss, grads = steps[m]()
        g = [np.asarray(t.numpy()) for t in grads]
        if ref is None:
            ref = g
        diffs[m] = max(float(np.max(np.abs(a - b))) for a, b in zip(g, ref))
    for _ in range(args.repeats):
        for m in MODES:
            t0 = clock()
            steps[m]()
            times[m].append(clock() - t0)
    return {m: statistics.median(times[m]) for m in MODES}, diffs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default="numpy,torch")
    p.add_argument("--depth", type=int, default=16)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--approximate", action="store_true", help="gelu's tanh approximation (cheaper forward)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    p.add_argument("--tiny", action="store_true", help="a small model, one repeat: tests the harness")
    p.add_argument("--json", help="write the figures to this file")
    p.add_argument("--_memory", nargs=2, metavar=("BACKEND", "MODE"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args._memory:
        args.backend, args.mode = args._memory
        measure_memory(args)
        return 0
    if args.tiny:
        args.depth, args.width, args.hidden, args.batch, args.repeats = 4, 16, 32, 8, 1
    print(
        f"{args.depth}-layer residual MLP (width {args.width}, hidden {args.hidden}, "
        f"gelu{' (tanh approximation)' if args.approximate else ''}), float32, batch "
        f"{args.batch}; time: median of {args.repeats} steps' {args.clock} time; memory: one step in a fresh process\n"
    )
    print("| backend | step | peak memory (RSS rise) | tracemalloc peak | vs plain | time | vs plain | max abs diff |")
    print("|---|---|---|---|---|---|---|---|")
    report = {}
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        mem = {m: memory_row(args, backend, m) for m in MODES}
        times, diffs = time_rows(args, backend)
        report[backend] = {"memory": mem, "time": times, "diff": diffs}
        for m in MODES:
            rss, traced = mem[m]["rss"], mem[m]["traced"]
            tr = "" if traced is None else f"{traced / 2**20:.1f} MiB"
            base = mem["plain"]["traced"] if traced is not None else mem["plain"]["rss"]
            mine = traced if traced is not None else rss
            print(
                f"| {backend} | {m} | {rss / 2**20:.1f} MiB | {tr} | {mine / base:.2f} | "
                f"{times[m] * 1e3:.0f} ms | {times[m] / times['plain']:.2f} | {diffs[m]:.1e} |"
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
