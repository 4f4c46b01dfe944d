"""The data-parallel training step on N JAX devices against the same step on one device.

    python benchmarks/sharding.py                        # 8 host CPU devices against 1: a markdown table
    python benchmarks/sharding.py --batch 16384 --steps 30 --json out.json
    python benchmarks/sharding.py --platform gpu --devices 4   # a machine with 4 GPUs

The step is examples/data_parallel.py's, larger: an MLP (``--features`` -> ``--hidden`` tanh ->
``--hidden`` tanh -> 1) on a mean-squared error, Adam, in ``gt.function`` (``jax.jit``), each batch
split over the devices by rows (``NamedSharding(mesh, P("batch"))``), the weights replicated.  Rows:

* ``gradtape gt.function``: that step, compiled (``jax.jit`` of the traced program);
* ``gradtape eager``: the same step without ``gt.function`` (one JAX dispatch per op);
* ``jax.jit (plain)``: the same model, loss and Adam written in JAX directly (``jax.value_and_grad``
  + ``optax``-style Adam by hand) and jitted with the same shardings: what XLA itself does with the
  split, so the ratio between rows separates gradtape's cost from the sharding's.

Each configuration runs in a fresh process: "8 of 16" (the mesh: 8 of the process's 16 host
devices), "1 of 16" (one device of such a process: the same XLA thread pool) and "1 of 1" (a plain
process).  The process asks XLA for twice the devices the mesh uses: its CPU runtime runs each
device's part of an all-reduce on a thread of one pool as large as the number of host devices (or
of cores), and with no spare thread two computations in flight can wait for each other for ever
(JAX aborts after 40 s; "8 of 8" at this batch size does, on a 2-core machine, in the eager trace of
the first call -- plain JAX eager code too).  A figure is the
median wall time of ``--steps`` steps after ``--warmup`` calls (the first compiles), each step
waited for (``block_until_ready`` on the loss and every weight).

On a CPU, XLA's host "devices" (``XLA_FLAGS=--xla_force_host_platform_device_count=8``) share the
machine's cores: 8 of them on a 2-core machine are not 8 times the compute, and the split adds the
all-reduce of the gradients.  These figures measure what the placement costs or saves there, not a
GPU cluster's scaling.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

FLAG = "--xla_force_host_platform_device_count"
ROWS = ("gradtape gt.function", "gradtape eager", "jax.jit (plain)")


def _mlp_shapes(features, hidden):
    return [(features, hidden), (hidden,), (hidden, hidden), (hidden,), (hidden, 1), (1,)]


def _init(features, hidden, seed):
    rng = np.random.default_rng(seed)
    out = []
    for shape in _mlp_shapes(features, hidden):
        out.append(rng.normal(size=shape) / np.sqrt(shape[0]) if len(shape) == 2 else np.zeros(shape))
    return out


def _data(batch, features, dtype, seed):
    rng = np.random.default_rng(seed + 1)
    x = rng.uniform(-1.0, 1.0, size=(batch, features)).astype(dtype)
    w = rng.normal(size=(features, 1)) / np.sqrt(features)
    return x, np.sin(x @ w).astype(dtype)


def _timed(step, sync, steps, warmup):
    for _ in range(warmup):
        sync(step())
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        sync(step())
        times.append(time.perf_counter() - t0)
    return times


def _gradtape_row(args, devices, compiled):
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import gradtape as gt

    mesh = Mesh(np.array(devices), ("batch",))
    rep, split = NamedSharding(mesh, PartitionSpec()), NamedSharding(mesh, PartitionSpec("batch"))
    dt = gt.as_dtype(args.dtype)
    with gt.use_backend("jax", device=rep):
        weights = [gt.Variable(w.astype(args.dtype)) for w in _init(args.features, args.hidden, args.seed)]
        opt = gt.optimizers.Adam(1e-3)
        x, y = _data(args.batch, args.features, args.dtype, args.seed)
        xb, yb = gt.constant(x, device=split), gt.constant(y, device=split)

        def step(xb, yb):
            w1, b1, w2, b2, w3, b3 = weights
            with gt.GradientTape() as tape:
                h = gt.tanh(xb @ w1 + b1)
                h = gt.tanh(h @ w2 + b2)
                loss = gt.reduce_mean((h @ w3 + b3 - yb) ** 2)
            grads = tape.gradient(loss, weights)
            opt.apply_gradients(zip(grads, weights))
            return loss

        run = gt.function(step) if compiled else step
        assert xb.native.dtype == gt.backends.get("jax").dtype_to_native(dt)

        def sync(loss):
            jax.block_until_ready([loss.native] + [w.native for w in weights])

        times = _timed(lambda: run(xb, yb), sync, args.steps if compiled else args.eager_steps, args.warmup)
        placed = (str(weights[0].device), str(xb.device))
    return times, placed


def _jax_row(args, devices):
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(devices), ("batch",))
    rep, split = NamedSharding(mesh, PartitionSpec()), NamedSharding(mesh, PartitionSpec("batch"))
    params = [jax.device_put(w.astype(args.dtype), rep) for w in _init(args.features, args.hidden, args.seed)]
    m = [jnp.zeros_like(p) for p in params]
    v = [jnp.zeros_like(p) for p in params]
    x, y = _data(args.batch, args.features, args.dtype, args.seed)
    xb, yb = jax.device_put(x, split), jax.device_put(y, split)

    def loss_fn(ps, xb, yb):
        w1, b1, w2, b2, w3, b3 = ps
        h = jnp.tanh(xb @ w1 + b1)
        h = jnp.tanh(h @ w2 + b2)
        return jnp.mean((h @ w3 + b3 - yb) ** 2)

    @jax.jit
    def step(ps, m, v, t, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(ps, xb, yb)
        t = t + 1
        lr = 1e-3 * jnp.sqrt(1 - 0.999**t) / (1 - 0.9**t)
        m = [0.9 * a + 0.1 * g for a, g in zip(m, grads)]
        v = [0.999 * a + 0.001 * g * g for a, g in zip(v, grads)]
        ps = [p - lr * a / (jnp.sqrt(b) + 1e-7) for p, a, b in zip(ps, m, v)]
        return loss, ps, m, v, t

    state = {"ps": params, "m": m, "v": v, "t": jax.device_put(jnp.asarray(0.0, dtype=args.dtype), rep)}

    def call():
        loss, state["ps"], state["m"], state["v"], state["t"] = step(
            state["ps"], state["m"], state["v"], state["t"], xb, yb
        )
        return loss

    def sync(loss):
        jax.block_until_ready([loss] + state["ps"])

    return _timed(call, sync, args.steps, args.warmup), (str(state["ps"][0].sharding.spec), str(xb.sharding.spec))


def child(args):
    """One configuration (this process's host devices are set by the parent): one JSON line."""
    import jax

    import gradtape as gt

    gt.set_backend("jax")
    devices = jax.devices(args.platform)[: args.use]
    out = {"use": len(devices), "host_devices": len(jax.devices(args.platform)), "rows": {}}
    for row in ROWS:
        if row == "gradtape gt.function":
            times, placed = _gradtape_row(args, devices, compiled=True)
        elif row == "gradtape eager":
            times, placed = _gradtape_row(args, devices, compiled=False)
        else:
            times, placed = _jax_row(args, devices)
        out["rows"][row] = {"times_s": times, "placement": placed}
    print(json.dumps(out), flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", type=int, default=8, help="devices of the mesh (host CPU devices on a CPU)")
    p.add_argument("--platform", default="cpu")
    p.add_argument("--batch", type=int, default=8192, help="rows per step, split over the devices")
    p.add_argument("--features", type=int, default=256)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--steps", type=int, default=20, help="timed steps (compiled rows)")
    p.add_argument("--eager-steps", type=int, default=5, help="timed steps (the eager row)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write every figure there")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--use", type=int, default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _run_config(args, host_devices, use):
    env = dict(os.environ)
    flags = " ".join(f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(FLAG))
    if args.platform == "cpu":
        env["XLA_FLAGS"] = f"{flags} {FLAG}={host_devices}".strip()
        env["JAX_PLATFORMS"] = "cpu"
    argv = [a for a in sys.argv[1:] if a != "--child"]
    cmd = [sys.executable, os.path.abspath(__file__), *argv, "--child", "--use", str(use)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        raise SystemExit(f"configuration {use} of {host_devices} failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(lines[-1])


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        return child(args)
    if args.batch % args.devices:
        raise SystemExit(f"--batch {args.batch} does not split over {args.devices} devices")
    n = args.devices
    configs = [(2 * n, n), (2 * n, 1), (1, 1)] if args.platform == "cpu" else [(n, n), (n, 1)]
    results = []
    for host, use in configs:
        print(f"running {use} of {host} devices ...", file=sys.stderr, flush=True)
        results.append(_run_config(args, host, use))
    base = {row: statistics.median(results[-1]["rows"][row]["times_s"]) for row in ROWS}
    # (on a GPU platform the last configuration is one device of the process that has them all)
    print(
        f"Data-parallel step: MLP {args.features}-{args.hidden}-{args.hidden}-1, batch {args.batch} "
        f"({args.dtype}), Adam; {args.platform}; median of {args.steps} steps ({args.eager_steps} eager) "
        f"after {args.warmup} warm-up calls; machine: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}\n"
    )
    print("| row | devices used (of host devices) | ms / step (median) | min ms | speed vs 1 of 1 |")
    print("|---|---|---:|---:|---:|")
    for row in ROWS:
        for r in results:
            t = r["rows"][row]["times_s"]
            med = statistics.median(t)
            print(
                f"| {row} | {r['use']} of {r['host_devices']} | {med * 1e3:.1f} | {min(t) * 1e3:.1f} | "
                f"{base[row] / med:.2f}x |"
            )
    print("\nplacements on the mesh (weights, batch):")
    for row in ROWS:
        print(f"- {row}: {results[0]['rows'][row]['placement']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)
    return results


if __name__ == "__main__":
    main()
