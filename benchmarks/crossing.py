"""The cost of crossing between gradtape and torch / JAX (issue 25, item 5), per call, each way.

    python benchmarks/crossing.py                  # a markdown table, ~1 min
    python benchmarks/crossing.py --quick --json out.json

Each row times one forward and one backward on 8 float64 elements of a one-op function (``x * 2``,
``sin``), so the figures are the fixed cost of a call, and puts beside it what the same work costs
without the crossing; the crossing's own cost is the difference:

* ``to_torch`` (torch backend): ``y = f(x); y.backward(g)`` with ``f = to_torch(gradtape fn)``, beside
  the same gradtape function under a ``GradientTape`` (forward and ``tape.gradient``) and beside plain
  torch autograd of the torch function;
* ``to_jax`` (jax backend): ``jax.vjp`` of the crossing and its pullback, eager, beside ``jax.vjp``
  of the native JAX function; and the two under ``jax.jit`` (one compiled program each);
* ``from_torch`` / ``from_jax``: a gradtape program calling a torch / JAX ``sin`` (on the torch / jax
  backend) under a tape, forward and gradient, beside the same program with ``gt.sin`` and beside the
  library's own ``sin`` and its VJP;
* the floor: a ``torch.autograd.Function`` that computes ``x * 2`` in torch, beside plain autograd.

The crossing's own cost is the time through it less the two libraries' own work (the native
library's differentiation of the op and gradtape's).

Each cell is the best of ``--repeat`` timings of ``--number`` calls (microseconds per call, process
CPU time; ``--clock wall`` for elapsed time).  Nothing is copied on the same device: the script checks
that the arrays the gradtape function sees are the caller's (same data pointer) before timing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import timeit

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # CPU figures: a CUDA build of jaxlib stays off the GPU

import jax
import jax.numpy as jnp
import torch

import gradtape as gt

jax.config.update("jax_enable_x64", True)
torch.set_num_threads(1)


def best_us(fn, number, repeat, timer):
    fn()  # warm
    return min(timeit.repeat(fn, number=number, repeat=repeat, timer=timer)) / number * 1e6


def check_no_copy():
    """The arrays a crossing hands on are the caller's own on the same device."""
    seen = {}

    def keep(x):
        seen["x"] = x.native
        return x * 2.0

    x = torch.ones(8, dtype=torch.float64)
    gt.interop.to_torch(keep, backend="torch")(x)
    assert seen["x"] is x, "to_torch copied a torch tensor on the torch backend"
    gt.interop.to_torch(keep, backend="numpy")(x)
    assert seen["x"].__array_interface__["data"][0] == x.data_ptr(), "to_torch copied into NumPy"
    xs = {}
    with gt.use_backend("torch"):
        xt = gt.asarray(torch.ones(8, dtype=torch.float64))
    gt.interop.from_torch(lambda t: xs.setdefault("t", t) * 2.0)(xt)
    assert xs["t"].data_ptr() == xt.native.data_ptr(), "from_torch copied a tensor of the torch backend"


def rows(number, repeat, timer):
    out = []
    g_t = torch.ones(8, dtype=torch.float64)

    # ---- to_torch
    def gt_double(x):
        return x * 2.0

    crossing = gt.interop.to_torch(gt_double, backend="torch")
    xr = torch.ones(8, dtype=torch.float64, requires_grad=True)

    def torch_plain():
        (xr * 2.0).backward(g_t)

    def torch_crossing():
        crossing(xr).backward(g_t)

    with gt.use_backend("torch"):
        xg = gt.asarray(torch.ones(8, dtype=torch.float64))
        gg = gt.asarray(g_t)

        def gradtape_alone():
            with gt.GradientTape() as tape:
                tape.watch(xg)
                y = gt_double(xg)
            tape.gradient(y, xg, output_gradients=gg)

        out.append(
            (
                "to_torch (torch backend), x * 2",
                best_us(torch_plain, number, repeat, timer),
                best_us(gradtape_alone, number, repeat, timer),
                best_us(torch_crossing, number, repeat, timer),
            )
        )

    # ---- to_jax
    xj = jnp.ones(8)
    gj = jnp.ones(8)
    jcross = gt.interop.to_jax(gt_double, backend="jax")

    def jnative(x):
        return x * 2.0

    def jax_plain():
        _, pull = jax.vjp(jnative, xj)
        pull(gj)[0].block_until_ready()

    def jax_crossing():
        _, pull = jax.vjp(jcross, xj)
        pull(gj)[0].block_until_ready()

    with gt.use_backend("jax"):
        xgj, ggj = gt.asarray(xj), gt.asarray(gj)

        def gradtape_alone_jax():
            with gt.GradientTape() as tape:
                tape.watch(xgj)
                y = gt_double(xgj)
            tape.gradient(y, xgj, output_gradients=ggj).native.block_until_ready()

        out.append(
            (
                "to_jax (jax backend, eager), x * 2",
                best_us(jax_plain, max(1, number // 10), repeat, timer),
                best_us(gradtape_alone_jax, number, repeat, timer),
                best_us(jax_crossing, max(1, number // 10), repeat, timer),
            )
        )
    jit_plain = jax.jit(lambda x, g: jax.vjp(jnative, x)[1](g))
    jit_cross = jax.jit(lambda x, g: jax.vjp(jcross, x)[1](g))
    out.append(
        (
            "to_jax (jax backend, jax.jit), x * 2",
            best_us(lambda: jit_plain(xj, gj)[0].block_until_ready(), number, repeat, timer),
            None,
            best_us(lambda: jit_cross(xj, gj)[0].block_until_ready(), number, repeat, timer),
        )
    )

    # ---- from_torch / from_jax
    xt0 = torch.full((8,), 0.5, dtype=torch.float64, requires_grad=True)
    xj0 = jnp.full((8,), 0.5)

    def torch_sin():
        torch.autograd.grad(torch.sin(xt0), xt0, g_t)

    def jax_sin():
        _, pull = jax.vjp(jnp.sin, xj0)
        pull(gj)[0].block_until_ready()

    for name, native, backend, x0, plain in (
        ("from_torch (torch backend), sin", torch.sin, "torch", xt0.detach(), torch_sin),
        ("from_jax (jax backend), sin", jnp.sin, "jax", xj0, jax_sin),
    ):
        wrapped = gt.interop.from_torch(native) if backend == "torch" else gt.interop.from_jax(native)
        with gt.use_backend(backend):
            x = gt.asarray(x0)
            g = gt.ones_like(x)

            def program(fn, x=x, g=g):
                def run():
                    with gt.GradientTape() as tape:
                        tape.watch(x)
                        y = fn(x)
                    tape.gradient(y, x, output_gradients=g)

                return run

            slow = backend == "jax"  # eager jax.vjp costs about a millisecond
            n = max(1, number // 10) if slow else number
            out.append(
                (
                    name,
                    best_us(plain, n, repeat, timer),
                    best_us(program(gt.sin), number, repeat, timer),
                    best_us(program(wrapped), n, repeat, timer),
                )
            )

    # ---- the floor of any torch crossing: an autograd.Function that does nothing else
    class Empty(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, gy):
            return gy * 2.0

    out.append(
        (
            "(floor) a torch.autograd.Function computing x * 2 in torch",
            best_us(torch_plain, number, repeat, timer),
            None,
            best_us(lambda: Empty.apply(xr).backward(g_t), number, repeat, timer),
        )
    )
    return out


def table(results):
    """The crossing's own cost: the time through it less the native library's own differentiation
    of the op and less gradtape's (the work each library does anyway)."""
    lines = [
        "| crossing, forward + backward | native library | gradtape alone | through the crossing "
        "| crossing's own cost |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, native, alone, crossed in results:
        cells = [f"{v:.1f} µs" if v is not None else "—" for v in (native, alone, crossed)]
        own = crossed - (native or 0.0) - (alone or 0.0)
        lines.append(f"| {name} | {' | '.join(cells)} | {own:+.1f} µs |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--number", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="--number 200 --repeat 3")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args(argv)
    if args.quick:
        args.number, args.repeat = 200, 3
    timer = time.process_time if args.clock == "cpu" else time.perf_counter
    check_no_copy()
    results = rows(args.number, args.repeat, timer)
    print(table(results))
    print(
        f"\n{platform.python_implementation()} {platform.python_version()}, torch {torch.__version__}, "
        f"jax {jax.__version__}, best of {args.repeat} x {args.number} calls, {args.clock} clock"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dict(zip(("row", "native_us", "gradtape_us", "crossing_us"), r)) for r in results], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
