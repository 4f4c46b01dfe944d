"""Per-op cost of gradtape against the same op called natively, on every installed backend.

    python benchmarks/dispatch_cost.py                 # every installed backend, a table
    python benchmarks/dispatch_cost.py --backends numpy,torch --json out.json

Small arrays (8 elements, 4x4 matrices), so the figures are the fixed cost per call: what gradtape's
dispatch adds on top of the library's own call.  Each cell is the best of ``--repeat`` timings of
``--number`` calls, on this process's CPU clock (``--clock wall``: elapsed time).
Columns: the native call, the same op through gradtape outside any tape, the
ratio, the difference in microseconds, and the op through gradtape while a tape records it.

``--compat`` adds a row group for torch through plain ``array_api_compat.torch`` (without the direct
torch calls the adapter uses), to show what those save.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import timeit

import numpy as np

import gradtape as gt
from gradtape import backends as _backends


def native_cases(name, xp_native):
    """(op label, native callable, gradtape callable) for one backend; both take (a, b, m)."""
    if name == "numpy":
        lib = np
        nat = {
            "add": lambda a, b, m: np.add(a, b),
            "mul scalar": lambda a, b, m: a * 2.0,
            "sin": lambda a, b, m: np.sin(a),
            "sum": lambda a, b, m: np.sum(a),
            "mean axis": lambda a, b, m: np.mean(m, axis=0),
            "matmul": lambda a, b, m: m @ m,
            "reshape": lambda a, b, m: np.reshape(m, (16,)),
            "getitem": lambda a, b, m: m[1:3],
            "maximum": lambda a, b, m: np.maximum(a, b),
            "where": lambda a, b, m: np.where(a > b, a, b),
        }
    elif name == "torch":
        import torch as lib

        nat = {
            "add": lambda a, b, m: lib.add(a, b),
            "mul scalar": lambda a, b, m: lib.mul(a, 2.0),
            "sin": lambda a, b, m: lib.sin(a),
            "sum": lambda a, b, m: lib.sum(a),
            "mean axis": lambda a, b, m: lib.mean(m, dim=0),
            "matmul": lambda a, b, m: lib.matmul(m, m),
            "reshape": lambda a, b, m: lib.reshape(m, (16,)),
            "getitem": lambda a, b, m: m[1:3],
            "maximum": lambda a, b, m: lib.maximum(a, b),
            "where": lambda a, b, m: lib.where(a > b, a, b),
        }
    elif name == "jax":
        import jax.numpy as lib

        nat = {
            "add": lambda a, b, m: lib.add(a, b),
            "mul scalar": lambda a, b, m: lib.multiply(a, 2.0),
            "sin": lambda a, b, m: lib.sin(a),
            "sum": lambda a, b, m: lib.sum(a),
            "mean axis": lambda a, b, m: lib.mean(m, axis=0),
            "matmul": lambda a, b, m: lib.matmul(m, m),
            "reshape": lambda a, b, m: lib.reshape(m, (16,)),
            "getitem": lambda a, b, m: m[1:3],
            "maximum": lambda a, b, m: lib.maximum(a, b),
            "where": lambda a, b, m: lib.where(a > b, a, b),
        }
    else:  # array_api_strict or a plugin: its own namespace
        lib = xp_native
        nat = {
            "add": lambda a, b, m: lib.add(a, b),
            "mul scalar": lambda a, b, m: lib.multiply(a, 2.0),
            "sin": lambda a, b, m: lib.sin(a),
            "sum": lambda a, b, m: lib.sum(a),
            "mean axis": lambda a, b, m: lib.mean(m, axis=0),
            "matmul": lambda a, b, m: lib.matmul(m, m),
            "reshape": lambda a, b, m: lib.reshape(m, (16,)),
            "getitem": lambda a, b, m: m[1:3, ...],
            "maximum": lambda a, b, m: lib.maximum(a, b),
            "where": lambda a, b, m: lib.where(a > b, a, b),
        }
    ours = {
        "add": lambda a, b, m: gt.add(a, b),
        "mul scalar": lambda a, b, m: a * 2.0,
        "sin": lambda a, b, m: gt.sin(a),
        "sum": lambda a, b, m: gt.sum(a),
        "mean axis": lambda a, b, m: gt.mean(m, axis=0),
        "matmul": lambda a, b, m: gt.matmul(m, m),
        "reshape": lambda a, b, m: gt.reshape(m, (16,)),
        "getitem": lambda a, b, m: m[1:3],
        "maximum": lambda a, b, m: gt.maximum(a, b),
        "where": lambda a, b, m: gt.where(a > b, a, b),
    }
    return [(k, nat[k], ours[k]) for k in nat]


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
CLOCK = CLOCKS["cpu"]


def best(fns, number, repeat):
    """Best time per call (µs) of each ``(fn, args)``; the timings alternate between them, so a busy
    machine slows all of them alike."""
    for fn, args in fns:
        fn(*args)  # warm up (JAX compiles on first call)
    out = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, (fn, args) in enumerate(fns):
            t = timeit.Timer(lambda f=fn, a=args: f(*a), timer=CLOCK).timeit(number=number)
            out[i] = min(out[i], t)
    return [t / number * 1e6 for t in out]


def measure(name, number, repeat, backend=None):
    b = backend or _backends.get(name)
    rng = np.random.default_rng(0)
    a0, b0 = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    m0 = rng.standard_normal((4, 4)).astype(np.float32)
    with gt.use_backend(b):
        ta, tb, tm = gt.constant(a0), gt.constant(b0), gt.constant(m0)
        wa = gt.Variable(a0)
    na, nb, nm = ta.native, tb.native, tm.native
    rows = []
    with gt.use_backend(b):
        for label, nat, ours in native_cases(name, b.xp):
            t_nat, t_gt = best([(nat, (na, nb, nm)), (ours, (ta, tb, tm))], number, repeat)
            with gt.GradientTape(persistent=True) as tape:
                tape.watch([ta, tb, tm])
                (t_rec,) = best([(ours, (ta, tb, tm))], max(number // 4, 1), repeat)
            del tape
            rows.append(
                {
                    "backend": b.name,
                    "op": label,
                    "native_us": t_nat,
                    "gradtape_us": t_gt,
                    "ratio": t_gt / t_nat,
                    "overhead_us": t_gt - t_nat,
                    "recording_us": t_rec,
                }
            )
    del wa
    return rows


def _compat_torch():
    """A torch adapter on plain array_api_compat.torch (no direct calls), for comparison."""
    from gradtape.backends.torch import TorchBackend

    class CompatTorch(TorchBackend):
        name = "torch (plain compat)"

        def load(self):
            super().load()
            import array_api_compat.torch as compat

            return compat

    return CompatTorch()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backends", default="all", help="comma-separated names, or 'all' (installed ones)")
    p.add_argument("--number", type=int, default=2000, help="calls per timing")
    p.add_argument("--repeat", type=int, default=5, help="timings per cell (the best is kept)")
    p.add_argument("--compat", action="store_true", help="also time torch through plain array_api_compat")
    p.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="cpu",
        help="cpu: this process's CPU time (steady on a busy machine; the default); wall: elapsed",
    )
    p.add_argument("--json", help="write the rows to this file")
    args = p.parse_args(argv)
    global CLOCK
    CLOCK = CLOCKS[args.clock]
    names = gt.available_backends() if args.backends == "all" else args.backends.split(",")
    rows = []
    for n in names:
        rows += measure(n, args.number, args.repeat)
        if n == "torch" and args.compat:
            rows += measure("torch", args.number, args.repeat, backend=_compat_torch())
    print(
        f"# gradtape per-op cost vs native, {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}; 8-element vectors, 4x4 matrices, float32, best of {args.repeat}x{args.number}, "
        f"{args.clock} clock"
    )
    print(f"| {'backend':22s} | {'op':10s} | native µs | gradtape µs | ratio | +µs   | recording µs |")
    print(f"|{'-' * 24}|{'-' * 12}|----------:|------------:|------:|------:|-------------:|")
    for r in rows:
        print(
            f"| {r['backend']:22s} | {r['op']:10s} | {r['native_us']:9.2f} | {r['gradtape_us']:11.2f} | "
            f"{r['ratio']:5.2f} | {r['overhead_us']:5.2f} | {r['recording_us']:12.2f} |"
        )
    print()
    print("| backend                | median ratio | median +µs |")
    print("|------------------------|-------------:|-----------:|")
    for n in dict.fromkeys(r["backend"] for r in rows):
        mine = [r for r in rows if r["backend"] == n]
        print(
            f"| {n:22s} | {np.median([r['ratio'] for r in mine]):12.2f} | "
            f"{np.median([r['overhead_us'] for r in mine]):10.2f} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": sys.version, "rows": rows}, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
