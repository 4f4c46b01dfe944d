"""gradtape on a dask.distributed cluster: a gradient larger than memory, and what the tape costs on a lazy backend.

    python benchmarks/dask_scaling.py                          # 1x, 4x, 16x a worker's memory; tape cost
    python benchmarks/dask_scaling.py --sizes 1,4 --persist    # also from data persisted (spilled) on the cluster
    python benchmarks/dask_scaling.py --out figures.md --json raw.json

Part 1 (issue 14): a ``LocalCluster`` of ``--workers`` processes, one thread and ``--limit-mib`` each,
differentiates a logistic loss ``sum(logaddexp(0, X @ w + b) - t * (X @ w + b)) / N`` over a float64
``X`` of ``size x`` one worker's memory limit, in row chunks of ``--chunk-mib``, generated on the workers
from per-chunk seeds (never on the driver).  ``gt.compute(loss, grad_w, grad_b)`` computes it in one
pass.  A fresh cluster per size, so each worker's peak RSS (VmHWM) belongs to that size.  The
same gradient written in dask by hand runs beside it (same data, same cluster kind): the tape's cost on
the cluster.  ``--persist``: the data is first persisted on the cluster (it does not fit: dask spills it
to disk) and the gradient reads it back.

Part 2: the tape's own cost per op on the lazy backend, on the driver (no cluster): a chain of
``--ops`` steps ``y = sin(y) * 1.0001 + 1e-6`` (three element-wise ops) on a dask array of ``--chunks`` chunks,
timed as dask alone (building the same graph without gradtape), gradtape without a tape, gradtape
recording, and ``tape.gradient`` (building the backward graph); and the number of tasks of the
forward and gradient graphs.  Part 3: the scheduler's cost per task on the cluster (a graph of many
tiny tasks), the figure that decides where the driver becomes the bottleneck.

Benchmark figures only: no test asserts a time (tests/test_dask_cluster.py checks the same gradient's
correctness and memory bounds).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import numpy as np

import gradtape as gt

try:
    import dask
    import dask.array as da
    import distributed
    import psutil
except ImportError as e:  # pragma: no cover - a message, not a stub
    sys.exit(f"benchmarks/dask_scaling.py needs dask[array], distributed and psutil ({e}): pip install gradtape[dask]")

MiB = 2**20
D = 32  # features
SEED = 14


# ---------------------------------------------------------------------------------------------- data
def x_chunk(i, rows):
    """Chunk ``i`` of X: multiples of 1/128 uniform on [-1, 1), from its own seed."""
    return np.random.default_rng([SEED, i, 0]).integers(-128, 128, size=(rows, D), dtype=np.int8) / 128.0


def t_chunk(i, rows):
    """Chunk ``i`` of the 0/1 labels, from its own seed."""
    return (np.random.default_rng([SEED, i, 1]).random(rows) < 0.5).astype(np.float64)


def _x_block(block_id=None, block_info=None):
    return x_chunk(block_id[0], block_info[None]["chunk-shape"][0])


def _t_block(block_id=None, block_info=None):
    return t_chunk(block_id[0], block_info[None]["chunk-shape"][0])


def lazy_data(chunks, chunk_rows, tag):
    X = da.map_blocks(_x_block, chunks=((chunk_rows,) * chunks, (D,)), dtype=np.float64, name=f"gen-x-{tag}")
    t = da.map_blocks(_t_block, chunks=((chunk_rows,) * chunks,), dtype=np.float64, name=f"gen-t-{tag}")
    return X, t


def taped(X, t, rows):
    """Loss and gradient in (w, b) through gradtape's dask backend: three dask arrays, nothing computed."""
    with gt.use_backend("dask"):
        w = gt.Variable(np.linspace(-1.0, 1.0, D), dtype=gt.float64)
        b = gt.Variable(0.1, dtype=gt.float64)
        with gt.GradientTape() as tape:
            z = gt.constant(X, dtype=gt.float64) @ w + b
            loss = gt.sum(gt.logaddexp(0.0, z) - gt.constant(t, dtype=gt.float64) * z) / rows
        gw, gb = tape.gradient(loss, [w, b])
    return [loss, gw, gb]


def by_hand(X, t, rows):
    """The same loss and gradient written in dask: sigmoid(z) - t is dloss/dz."""
    z = X @ np.linspace(-1.0, 1.0, D) + 0.1
    r = (1.0 / (1.0 + da.exp(-z)) - t) / rows
    return [da.sum(da.logaddexp(0.0, z) - t * z) / rows, X.T @ r, da.sum(r)]


def n_tasks(arrays):
    return len(dict(dask.highlevelgraph.HighLevelGraph.merge(*(a.dask for a in arrays))))


# ------------------------------------------------------------------------------------- worker probes
def peak_rss():
    """The worker's peak RSS: /proc's VmHWM (ru_maxrss would include the forked copy of this driver,
    which Linux carries over the worker's exec)."""
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmHWM:")).split()[1]) * 1024


def worker_stats(dask_worker):
    """Peak RSS of the worker process, bytes it wrote to disk (spill), CPU seconds it used."""
    c = psutil.Process().cpu_times()
    return {
        "peak": peak_rss(),
        "spilled": sum(v for k, v in dask_worker.digests_total.items() if k[-2:] == ("disk-write", "bytes")),
        "cpu": c.user + c.system,
        "pid": psutil.Process().pid,
    }


def cluster(args, tmp):
    with dask.config.set({"distributed.worker.memory.target": args.target}):
        return distributed.LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=args.limit_mib * MiB,
            dashboard_address=":0",
            local_directory=tmp,
        )


def run_gradient(args, size, how, tmp):
    """One gradient at ``size`` x a worker's memory on a fresh cluster; ``how``: taped / by hand /
    taped from persisted data."""
    chunk_rows = args.chunk_mib * MiB // (8 * D)
    chunks = max(1, round(size * args.limit_mib / args.chunk_mib))
    rows = chunks * chunk_rows
    with cluster(args, tmp) as cl, distributed.Client(cl) as client:
        client.run(lambda: None)
        X, t = lazy_data(chunks, chunk_rows, how.replace(" ", "-"))
        persist_s = None
        if how == "taped, persisted":
            t0 = time.perf_counter()
            X = client.persist(X)
            distributed.wait(X)
            persist_s = time.perf_counter() - t0
        before = client.run(worker_stats)
        t0 = time.perf_counter()
        arrays = taped(X, t, rows) if how.startswith("taped") else by_hand(X, t, rows)
        build_s = time.perf_counter() - t0
        natives = [a.native for a in arrays] if how.startswith("taped") else arrays
        tasks = n_tasks(natives)
        fwd_tasks = n_tasks(natives[:1])
        t0 = time.perf_counter()
        with distributed.get_task_stream(client) as ts:
            values = gt.compute(*arrays) if how.startswith("taped") else dask.compute(*arrays)
        wall = time.perf_counter() - t0
        after = client.run(worker_stats)
        restarted = sorted(m["pid"] for m in after.values()) != sorted(m["pid"] for m in before.values())
        biggest = max((s.get("nbytes", 0) for s in ts.data), default=0)
    return {
        "size": size,
        "how": how,
        "x_bytes": rows * D * 8,
        "chunks": chunks,
        "tasks": tasks,
        "forward_tasks": fwd_tasks,
        "tasks_run": len(ts.data),
        "build_s": build_s,
        "persist_s": persist_s,
        "compute_s": wall,
        "peak_rss": max(m["peak"] for m in after.values()),
        "spilled": sum(after[a]["spilled"] for a in after),  # from cluster start (persist included)
        "worker_cpu_s": sum(after[a]["cpu"] - before[a]["cpu"] for a in after if a in before),
        "biggest_task": biggest,
        "restarted": restarted,
        "loss": float(values[0]),
        "grad_b": float(values[2]),
    }


# ---------------------------------------------------------------------------------- tape cost per op
def chain(y, n, lib):
    """``y = sin(y) * 1.0001 + 1e-6``, ``n`` times, in function form (dask's operators go through a
    slower path, ``inspect.signature`` per call, than the functions gradtape's adapter calls)."""
    for _ in range(n):
        y = lib.add(lib.multiply(lib.sin(y), 1.0001), 1e-6)
    return y


def best(fn, repeat):
    """The fastest of ``repeat`` calls after one untimed warm-up call (process CPU time: the driver's
    graph building is single-threaded, and CPU time is what other processes on the machine disturb
    least), and its result."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        times.append(time.process_time() - t0)
    return min(times), out


def tape_cost(args, chunks):
    """Seconds per op: dask alone, gradtape without a tape, recording, the backward graph; tasks."""
    x = da.ones((chunks * 1000,), chunks=1000, dtype=np.float64)
    n = args.ops
    dask_s, ref = best(lambda: chain(x, n, da), args.repeat)
    with gt.use_backend("dask"):
        xt = gt.constant(x, dtype=gt.float64)
        plain_s, _ = best(lambda: chain(xt, n, gt), args.repeat)

        def record():
            tape = gt.GradientTape()
            with tape:
                tape.watch(xt)
                y = gt.sum(chain(xt, n, gt))
            return tape, y

        rec_s, (tape, y) = best(record, args.repeat)

        def backward():
            tape, y = record()
            t0 = time.process_time()
            g = tape.gradient(y, xt)
            return time.process_time() - t0, g

        grads = [backward() for _ in range(args.repeat + 1)][1:]
        grad_s, g = min(grads, key=lambda p: p[0])
    ops = 3 * n  # sin, multiply, add per chain step
    return {
        "chunks": chunks,
        "ops": ops,
        "dask_us": dask_s / ops * 1e6,
        "gradtape_us": plain_s / ops * 1e6,
        "recording_us": rec_s / ops * 1e6,
        "gradient_us": grad_s / ops * 1e6,
        "fwd_tasks": n_tasks([ref]),
        "fwd_sum_tasks": n_tasks([y.native]),
        "grad_tasks": n_tasks([g.native]),
    }


def scheduler_cost(args, tmp):
    """Seconds per task the cluster spends on a graph of ``--tiny-tasks`` tasks that compute nothing
    (per task run: dask fuses the graph's tasks before they run)."""
    n = args.tiny_tasks
    with cluster(args, tmp) as cl, distributed.Client(cl) as client:
        client.run(lambda: None)
        times, ran = [], []
        for k in range(3):
            s = (da.ones((n,), chunks=1) + k).sum()  # n ones + n adds (fused), then a tree sum
            tasks = n_tasks([s])
            t0 = time.perf_counter()
            with distributed.get_task_stream(client) as ts:
                s.compute()
            times.append(time.perf_counter() - t0)
            ran.append(len(ts.data))
    wall, run = statistics.median(times), statistics.median(ran)
    return {"tasks": tasks, "ran": run, "s": wall, "ms_per_task": wall / run * 1e3}


# ------------------------------------------------------------------------------------------- report
def table(rows, cols):
    out = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(f(r) for _, f in cols) + " |")
    return "\n".join(out)


def report(args, grads, costs, sched):
    def mib(b):
        return f"{b / MiB:,.0f}"

    lines = [
        f"# gradtape on dask.distributed: `{' '.join(['python', 'benchmarks/dask_scaling.py'] + sys.argv[1:])}`",
        "",
        f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}, "
        f"{psutil.cpu_count()} cores (load average at start {', '.join(f'{v:.1f}' for v in psutil.getloadavg())}); "
        f"dask {dask.__version__}, distributed {distributed.__version__}, numpy {np.__version__}.",
        f"LocalCluster: {args.workers} worker processes x 1 thread, memory_limit {args.limit_mib} MiB each "
        f"(memory target {args.target}), float64 X with {D} columns in {args.chunk_mib} MiB row chunks.",
        "",
    ]
    if grads:
        lines += ["## The larger-than-memory gradient (logistic loss, `gt.compute(loss, grad_w, grad_b)`)", ""]
        lines.append(
            table(
                grads,
                [
                    ("X / worker memory", lambda r: f"{r['size']:g}x"),
                    ("X MiB", lambda r: mib(r["x_bytes"])),
                    ("how", lambda r: r["how"]),
                    ("chunks", lambda r: str(r["chunks"])),
                    ("forward tasks", lambda r: f"{r['forward_tasks']:,}"),
                    ("forward + gradient tasks", lambda r: f"{r['tasks']:,}"),
                    ("tasks / chunk", lambda r: f"{r['tasks'] / r['chunks']:.1f}"),
                    ("tasks run", lambda r: f"{r['tasks_run']:,}"),
                    ("build s", lambda r: f"{r['build_s']:.3f}"),
                    ("persist s", lambda r: "" if r["persist_s"] is None else f"{r['persist_s']:.1f}"),
                    ("compute s", lambda r: f"{r['compute_s']:.1f}"),
                    ("MiB/s", lambda r: f"{r['x_bytes'] / MiB / r['compute_s']:.0f}"),
                    ("worker CPU s", lambda r: f"{r['worker_cpu_s']:.1f}"),
                    ("peak RSS / worker MiB", lambda r: mib(r["peak_rss"])),
                    ("spilled MiB", lambda r: mib(r["spilled"])),
                    ("largest task MiB", lambda r: f"{r['biggest_task'] / MiB:.1f}"),
                    ("worker restarted", lambda r: "yes" if r["restarted"] else "no"),
                ],
            )
        )
        lines.append("")
    if costs:
        lines += [
            f"## The tape's cost per op on the lazy backend (chain of {args.ops} x (sin, multiply, add), "
            f"best of {args.repeat}, driver CPU time)",
            "",
            table(
                costs,
                [
                    ("chunks", lambda r: str(r["chunks"])),
                    ("ops", lambda r: str(r["ops"])),
                    ("dask alone µs/op", lambda r: f"{r['dask_us']:.0f}"),
                    ("gradtape, no tape µs/op", lambda r: f"{r['gradtape_us']:.0f}"),
                    ("gradtape recording µs/op", lambda r: f"{r['recording_us']:.0f}"),
                    ("tape.gradient µs/op", lambda r: f"{r['gradient_us']:.0f}"),
                    ("forward tasks", lambda r: f"{r['fwd_sum_tasks']:,}"),
                    ("gradient tasks", lambda r: f"{r['grad_tasks']:,}"),
                    ("gradient / forward", lambda r: f"{r['grad_tasks'] / r['fwd_sum_tasks']:.2f}"),
                ],
            ),
            "",
        ]
    if sched:
        lines += [
            "## The cluster's cost per task",
            "",
            f"A graph of {sched['tasks']:,} tasks that compute nothing (`(da.ones(n, chunks=1) + k).sum()`), "
            f"{sched['ran']:,.0f} run after fusion: {sched['s']:.2f} s, **{sched['ms_per_task']:.2f} ms per task run** "
            "(median of 3).",
            "",
        ]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1,4,16", help="sizes of X in units of one worker's memory limit")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--limit-mib", type=int, default=256, help="memory_limit of each worker")
    p.add_argument("--target", type=float, default=0.25, help="distributed.worker.memory.target (see the test)")
    p.add_argument("--chunk-mib", type=int, default=8, help="row-chunk size of X")
    p.add_argument("--persist", action="store_true", help="also run the gradient from data persisted on the cluster")
    p.add_argument("--no-hand", action="store_true", help="skip the hand-written dask gradient")
    p.add_argument("--ops", type=int, default=100, help="chain steps for the per-op cost (3 ops each)")
    p.add_argument("--op-chunks", default="1,16,256", help="chunk counts for the per-op cost")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tiny-tasks", type=int, default=2000, help="chunks of the scheduler-cost graph")
    p.add_argument("--skip", default="", help="parts to skip: gradient,ops,scheduler")
    p.add_argument("--tmp", default=None, help="workers' local (spill) directory")
    p.add_argument("--out", help="also write the markdown report here")
    p.add_argument("--json", help="write every figure here")
    args = p.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))

    grads = []
    if "gradient" not in skip:
        for size in [float(s) for s in args.sizes.split(",")]:
            hows = ["taped"] + ([] if args.no_hand else ["by hand"]) + (["taped, persisted"] if args.persist else [])
            for how in hows:
                print(f"gradient at {size:g}x, {how} ...", file=sys.stderr, flush=True)
                grads.append(run_gradient(args, size, how, args.tmp))
                print(f"  {grads[-1]['compute_s']:.1f} s", file=sys.stderr, flush=True)
    costs = []
    if "ops" not in skip:
        for chunks in [int(c) for c in args.op_chunks.split(",")]:
            print(f"tape cost, {chunks} chunks ...", file=sys.stderr, flush=True)
            costs.append(tape_cost(args, chunks))
    sched = None
    if "scheduler" not in skip:
        print("scheduler cost ...", file=sys.stderr, flush=True)
        sched = scheduler_cost(args, args.tmp)

    text = report(args, grads, costs, sched)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"argv": sys.argv, "gradient": grads, "tape_cost": costs, "scheduler": sched}, f, indent=1)


if __name__ == "__main__":
    main()
