"""The cost of crossing between gradtape and torch / JAX (issue 25, item 5), per call, each way.

    python benchmarks/crossing.py                  # a markdown table, ~1 min
    python benchmarks/crossing.py --quick --json out.json
    python benchmarks/crossing.py --calls          # Python function calls per call instead (noise-free)

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
* the floors: a ``torch.autograd.Function`` that computes ``x * 2`` in torch, beside plain autograd,
  and a ``jax.custom_vjp`` that computes ``x * 2`` in JAX, beside ``jax.vjp`` of the plain function
  (eager): what any crossing through those mechanisms costs before doing anything;
* for each crossing row, its *side-by-side floor*: the row's two libraries' work (the native side
  and the gradtape program; for ``to_torch`` and eager ``to_jax`` the native side is the mechanism's
  floor above) run one after the other in one call, with no crossing between them: each library's
  work costs more when the two alternate than each measured alone, with the CPU's caches to itself,
  and a crossing alternates them by nature.

The crossing's own cost is the time through it less the two libraries' own work (the native
library's differentiation of the op and gradtape's), each timed alone; and, the second measure, the
time through it less its side-by-side floor.  Both are printed against issue 25's 10 µs, scaled.

Each cell is the best of ``--repeat`` timings of ``--number`` calls (microseconds per call, process
CPU time; ``--clock wall`` for elapsed time), taken in rounds: each round times every cell once, in
turn, so that a change of the machine's load weighs alike on the figures subtracted from one
another.  Nothing is copied on the same device: the script checks that the arrays the gradtape
function sees are the caller's (same data pointer) before timing.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import sys
import time
import timeit

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # CPU figures: a CUDA build of jaxlib stays off the GPU

import jax
import jax.numpy as jnp
import torch

import gradtape as gt
from run import ISSUE_FIGURES
from workloads import numpy_bench, torch_bench

jax.config.update("jax_enable_x64", True)
torch.set_num_threads(1)


FLOOR_TORCH = "(floor) a torch.autograd.Function computing x * 2 in torch"
FLOOR_JAX = "(floor) a jax.custom_vjp computing x * 2 in JAX, eager"

#: issue 25's target: a crossing's own cost per call (its forward and its backward together here)
TARGET_US = 10.0
#: the anchors whose figures issue 6 quotes from its machine (benchmarks/run.py: ISSUE_FIGURES), timed in
#: the same rounds as the crossings: their time here over the issue's says how much slower this machine,
#: at this moment, is than the one the target's figure belongs to (the harness's "scaled" targets)
ANCHORS = (("torch.autograd", torch_bench), ("minitape-numpy", numpy_bench))


class Cell:
    """One timing to take: ``fn`` run ``number`` times under the backend active where it was asked for."""

    __slots__ = ("fn", "number", "backend", "best")

    def __init__(self, fn, number):
        self.fn, self.number, self.backend, self.best = fn, number, gt.get_backend().name, None


def interleaved(results, repeat, timer):
    """The rows with each :class:`Cell` replaced by its best time (µs per call): ``repeat`` rounds, each
    timing every cell once in turn, so that the machine's load, which moves by tens of µs from one
    second to the next on a shared machine, weighs alike on the figures that are subtracted from one
    another (one function in several rows, plain torch say, is one cell: one figure)."""
    cells = list({id(c.fn): c for r in results for c in r[1:] if c is not None}.values())
    for c in cells:
        with gt.use_backend(c.backend):
            c.fn()  # warm
    for _ in range(repeat):
        for c in cells:
            with gt.use_backend(c.backend):
                t = timeit.timeit(c.fn, number=c.number, timer=timer) / c.number * 1e6
            c.best = t if c.best is None else min(c.best, t)
    best = {id(c.fn): c.best for c in cells}
    return [(name, *(None if c is None else best[id(c.fn)] for c in r)) for name, *r in results]


def calls_per_call(fn, number=50):
    """Python function calls (and calls of built-in functions) per call of ``fn``, counted by cProfile:
    a measure of the work done in Python that the machine's load does not move."""
    for _ in range(3):
        fn()  # warm (caches, first-call set-up)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(number):
        fn()
    prof.disable()
    return pstats.Stats(prof).total_calls / number


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


def rows(measure, number):
    """The rows, each ``(name, native, gradtape alone, through the crossing, side by side)``, each cell
    what ``measure(fn, number of calls)`` returns (None: no such cell).  *Side by side*: the two
    libraries' work of the row run one after the other in one call, with no crossing between them
    (for ``to_torch`` / eager ``to_jax`` the native side is the mechanism's floor, the empty
    ``autograd.Function`` / ``custom_vjp``): what the work costs when the two alternate, as a
    crossing makes them, rather than each timed alone with the CPU's caches to itself."""
    out = []
    g_t = torch.ones(8, dtype=torch.float64)

    # ---- the floor of any torch crossing: an autograd.Function that does nothing else
    class Empty(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, gy):
            return gy * 2.0

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

        def torch_side_by_side():
            Empty.apply(xr).backward(g_t)
            gradtape_alone()

        out.append(
            (
                "to_torch (torch backend), x * 2",
                measure(torch_plain, number),
                measure(gradtape_alone, number),
                measure(torch_crossing, number),
                measure(torch_side_by_side, number),
            )
        )

    # ---- to_jax
    xj = jnp.ones(8)
    gj = jnp.ones(8)
    jcross = gt.interop.to_jax(gt_double, backend="jax")

    def jnative(x):
        return x * 2.0

    # ---- the floor of any eager JAX crossing: a jax.custom_vjp that does nothing else
    @jax.custom_vjp
    def jempty(x):
        return x * 2.0

    jempty.defvjp(lambda x: (x * 2.0, None), lambda _, gy: (gy * 2.0,))

    def jax_empty():
        _, pull = jax.vjp(jempty, xj)
        pull(gj)[0].block_until_ready()

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

        def jax_side_by_side():
            jax_empty()
            gradtape_alone_jax()

        out.append(
            (
                "to_jax (jax backend, eager), x * 2",
                measure(jax_plain, max(1, number // 10)),
                measure(gradtape_alone_jax, number),
                measure(jax_crossing, max(1, number // 10)),
                measure(jax_side_by_side, max(1, number // 10)),
            )
        )
    jit_plain = jax.jit(lambda x, g: jax.vjp(jnative, x)[1](g))
    jit_cross = jax.jit(lambda x, g: jax.vjp(jcross, x)[1](g))
    out.append(
        (
            "to_jax (jax backend, jax.jit), x * 2",
            measure(lambda: jit_plain(xj, gj)[0].block_until_ready(), number),
            None,
            measure(lambda: jit_cross(xj, gj)[0].block_until_ready(), number),
            None,  # (one compiled program: nothing alternates)
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

            alone = program(gt.sin)

            def side_by_side(plain=plain, alone=alone):
                plain()
                alone()

            slow = backend == "jax"  # eager jax.vjp costs about a millisecond
            n = max(1, number // 10) if slow else number
            out.append(
                (
                    name,
                    measure(plain, n),
                    measure(alone, number),
                    measure(program(wrapped), n),
                    measure(side_by_side, n),
                )
            )

    out.append(
        (
            FLOOR_TORCH,
            measure(torch_plain, number),
            None,
            measure(lambda: Empty.apply(xr).backward(g_t), number),
            None,
        )
    )

    out.append(
        (
            FLOOR_JAX,
            measure(jax_plain, max(1, number // 10)),
            None,
            measure(jax_empty, max(1, number // 10)),
            None,
        )
    )
    return out


def anchor_rows(measure):
    """The anchors' W1 (a 2,000-step chain, forward + backward; µs per chain step once divided by its
    ops) as rows ``(name, cell)``, timed in the same rounds as the crossings."""
    out = []
    for name, module in ANCHORS:
        case = module.setup(name, "W1", {})
        out.append((name, case.ops, measure(case.step, 1)))
    return out


def own_costs(name, native, alone, crossed, beside):
    """A row's crossing's own cost, two ways: the time through it less each library's work timed
    alone, and the time through it less the two libraries' work run side by side (None: no such
    cell)."""
    own = crossed - (native or 0.0) - (alone or 0.0)
    return own, (None if beside is None else crossed - beside)


def scale_table(anchors, results):
    """The anchors against the issue's figures, and each crossing's own cost (both ways) against the
    target scaled by the more demanding of them (the smaller factor)."""
    lines = ["| anchor (W1) | issue's figure | measured here, same rounds | here / issue |", "|---|---:|---:|---:|"]
    factors = []
    for name, ops, t in anchors:
        per_op = t / ops
        k = per_op / ISSUE_FIGURES[(name, "W1")]
        factors.append(k)
        lines.append(f"| `{name}` | {ISSUE_FIGURES[(name, 'W1')]} µs/op | {per_op:.2f} µs/op | {k:.1f}× |")
    k = min(factors)
    target = TARGET_US * k
    lines += [
        "",
        f"The target, {TARGET_US:g} µs per call, scaled by the smaller factor ({k:.1f}×): {target:.0f} µs.",
        "",
        "| crossing | own cost (forward + backward) | met, scaled? | ÷ factor | over the side-by-side floor "
        "| met, scaled? | ÷ factor |",
        "|---|---:|---|---:|---:|---|---:|",
    ]
    for row in results:
        name = row[0]
        if name.startswith("(floor)"):
            continue
        cells = []
        for v in own_costs(*row):
            if v is None:
                cells += ["—", "—", "—"]
            else:
                cells += [f"{v:+.1f} µs", "met" if v <= target else "missed", f"{v / k:+.1f} µs"]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def table(results, unit="µs"):
    """The crossing's own cost: the time through it less the native library's own differentiation
    of the op and less gradtape's (the work each library does anyway); and that less the floor of
    its mechanism (the floor rows' own cost: ``torch.autograd.Function`` for ``to_torch``,
    ``jax.custom_vjp`` for eager ``to_jax``), what gradtape itself adds; and the time through it less
    the side-by-side floor (the row's two libraries' work run one after the other in one call, no
    crossing, the mechanism's floor included where there is one): the work measured as a crossing
    must do it, alternating, rather than each library alone with the CPU's caches to itself."""
    own = {row[0]: own_costs(*row)[0] for row in results}
    floors = {"torch": own.get(FLOOR_TORCH), "JAX": own.get(FLOOR_JAX)}
    lines = [
        "| crossing, forward + backward | native library | gradtape alone | through the crossing "
        "| side by side, no crossing | crossing's own cost | own cost over its floor | over the side-by-side floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results:
        name = row[0]
        cells = [f"{v:.1f} {unit}" if v is not None else "—" for v in row[1:]]
        first = name.split(" ")[0]
        lib = None  # (from_torch / from_jax use no such mechanism: their floor is the native column's)
        if first == "to_torch":
            lib = "torch"
        elif first == "to_jax" and "jit" not in name:
            lib = "JAX"
        floor = floors.get(lib) if lib else None
        over = f"{own[name] - floor:+.1f} {unit}" if floor is not None else "—"
        side = own_costs(*row)[1]
        side_cell = "—" if side is None else f"{side:+.1f} {unit}"
        lines.append(f"| {name} | {' | '.join(cells)} | {own[name]:+.1f} {unit} | {over} | {side_cell} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--number", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="--number 200 --repeat 3")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    p.add_argument(
        "--calls", action="store_true", help="count Python function calls per call instead of timing (noise-free)"
    )
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args(argv)
    if args.quick:
        args.number, args.repeat = 200, 3
    timer = time.process_time if args.clock == "cpu" else time.perf_counter
    check_no_copy()
    if args.calls:
        results = rows(lambda fn, n: calls_per_call(fn), args.number)
        print(table(results, unit="calls"))
        how = "Python function calls per call (cProfile)"
    else:
        crossings = rows(Cell, args.number)
        anchors = anchor_rows(Cell)
        timed = interleaved([*crossings, *[(name, cell) for name, _, cell in anchors]], args.repeat, timer)
        results = timed[: len(crossings)]
        anchored = [(name, ops, t) for (name, ops, _), (_, t) in zip(anchors, timed[len(crossings) :])]
        print(table(results))
        print()
        print(scale_table(anchored, results))
        how = f"best of {args.repeat} x {args.number} calls, {args.clock} clock"
    print(
        f"\n{platform.python_implementation()} {platform.python_version()}, torch {torch.__version__}, "
        f"jax {jax.__version__}, {how}"
    )
    if args.json:
        unit = "calls" if args.calls else "us"
        keys = ("row", f"native_{unit}", f"gradtape_{unit}", f"crossing_{unit}", f"side_by_side_{unit}")
        with open(args.json, "w") as f:
            json.dump([dict(zip(keys, r)) for r in results], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
