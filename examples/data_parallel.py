"""Data-parallel training on JAX: each batch split over 8 devices, the weights replicated on all of
them, one compiled ``gt.function`` step -- and the same weights as the run on one device.

A small MLP (32 -> 64 tanh -> 64 tanh -> 1, float64) learns a smooth function of 32 inputs by
mean-squared error.  The step is the ordinary eager step (a GradientTape, ``tape.gradient``,
``optimizer.apply_gradients``) wrapped in ``gt.function`` (``jax.jit`` on this backend).  Nothing in
it mentions devices; the placement is said once, outside:

* the weights (and the optimizer's slots, and every constant the step makes) are created inside
  ``gt.use_backend("jax", device=NamedSharding(mesh, P()))``: replicated on every device of the mesh;
* each batch is ``gt.constant(x, device=NamedSharding(mesh, P("batch")))``: its rows split over the
  devices.

JAX (XLA) then runs the forward and the backward pass on each device's rows and sums the weights'
gradients across the devices (the all-reduce of data parallelism); the gradients come back
replicated, like the weights, and so do the updated weights.

On a machine without several accelerators, XLA can split the CPU into host "devices"
(``XLA_FLAGS=--xla_force_host_platform_device_count=N``); this script sets that flag itself before
JAX starts, to twice the devices it uses: XLA's CPU runtime runs each device's part of an
all-reduce on a thread of one pool, as large as the number of host devices (or of cores, if more),
and with no spare thread two computations in flight at once can wait for each other for ever (JAX
aborts the process after 40 s: "Termination timeout for all reduce").  The host devices share the
machine's cores: this shows the placement and checks the numbers, it does not make the step 8 times
faster (see benchmarks/sharding.py for the timings).

    python examples/data_parallel.py [--devices 8] [--steps 5] [--batch 512] [--optimizer adam]
                                     [--seed 0] [--eager]

prints each step's loss on the mesh, then trains again on one device from the same seed and
compares: the exit status is 1 unless every final weight agrees to 1e-12 (float64; the sums across
devices are added in another order, so the last bits may differ).  ``--backend`` is accepted for
the examples' common interface, but only ``jax`` shards.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import gradtape as gt

FEATURES = 32
HIDDEN = 64
TOLERANCE = 1e-12
_FLAG = "--xla_force_host_platform_device_count"


@dataclasses.dataclass
class Result:
    losses: list  # each step's loss, on the mesh
    single_losses: list  # the same steps on one device
    max_weight_difference: float  # largest |w_mesh - w_single| over every weight
    devices: int
    weights_device: str  # Tensor.device of the first weight after training (the mesh, replicated)
    batch_device: str  # Tensor.device of the last batch (the mesh, split by rows)
    seconds: float
    single_seconds: float
    backend: str = "jax"
    tolerance: float = TOLERANCE

    @property
    def ok(self):
        """Whether the mesh's weights equal the single device's to ``tolerance`` (and the loss is finite)."""
        return self.max_weight_difference <= self.tolerance and bool(np.all(np.isfinite(self.losses)))


def host_devices(n, platform="cpu"):
    """``n`` devices of ``platform``.  On the CPU, asks XLA for ``2 n`` host devices first (spare
    threads for its collectives, see above), which works only before JAX starts its CPU backend:
    this runs before anything else touches JAX."""
    if platform == "cpu" and _FLAG not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}={2 * n}".strip()
    devices = jax.devices(platform)
    if len(devices) < n:
        raise SystemExit(
            f"this example needs {n} {platform} devices; JAX has {len(devices)}. JAX fixes the number of "
            f"host devices when it starts: run the script in a fresh process (it sets XLA_FLAGS="
            f"{_FLAG}={2 * n} itself), or set that flag before anything imports JAX, or pass --devices "
            f"{len(devices)}"
        )
    return devices[:n]


def make_data(samples, seed=0):
    """``samples`` inputs in [-1, 1]^32 and targets ``sin(x @ a) + 0.1 cos(3 x @ b)`` (float64)."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(2, FEATURES, 1)) / np.sqrt(FEATURES)
    x = rng.uniform(-1.0, 1.0, size=(samples, FEATURES))
    return x, np.sin(x @ a) + 0.1 * np.cos(3.0 * x @ b)


def build_model():
    """The MLP, its weights drawn from ``gt.random`` (the same numbers on every device count)."""
    model = gt.layers.Sequential(
        [
            gt.layers.Dense(HIDDEN, activation="tanh", dtype=gt.float64),
            gt.layers.Dense(HIDDEN, activation="tanh", dtype=gt.float64),
            gt.layers.Dense(1, dtype=gt.float64),
        ]
    )
    model(gt.zeros((1, FEATURES), dtype=gt.float64))  # built here: the weights go where the scope says
    return model


def make_optimizer(name, learning_rate):
    if name == "sgd":
        return gt.optimizers.SGD(learning_rate=learning_rate, momentum=0.9)
    return gt.optimizers.Adam(learning_rate=learning_rate)


def make_step(model, optimizer, compiled=True):
    """One training step on a batch: loss, gradients, update; compiled by ``gt.function``."""
    variables = model.trainable_variables

    def step(xb, yb):
        with gt.GradientTape() as tape:
            loss = gt.reduce_mean((model(xb) - yb) ** 2)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    return gt.function(step) if compiled else step


def placements(devices):
    """(replicated, split by rows) over a one-axis mesh of ``devices``."""
    mesh = Mesh(np.array(devices), ("batch",))
    return NamedSharding(mesh, PartitionSpec()), NamedSharding(mesh, PartitionSpec("batch"))


def train(x, y, devices, steps, batch, optimizer="adam", learning_rate=0.01, seed=0, compiled=True):
    """Train from ``seed`` on ``devices`` (batch split over them, weights replicated); returns (the
    model, each step's loss, the last batch)."""
    if batch % len(devices):
        raise ValueError(f"--batch {batch} does not split evenly over {len(devices)} devices")
    replicated, split = placements(devices)
    with gt.use_backend("jax", device=replicated):
        gt.random.set_seed(seed)
        model = build_model()
        step = make_step(model, make_optimizer(optimizer, learning_rate), compiled)
        losses = []
        xb = None
        for i in range(steps):
            rows = slice((i * batch) % len(x), (i * batch) % len(x) + batch)
            xb = gt.constant(x[rows], device=split)
            yb = gt.constant(y[rows], device=split)
            losses.append(float(step(xb, yb)))
    return model, losses, xb


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="jax", choices=["jax"], help="only jax shards arrays over devices")
    p.add_argument("--devices", type=int, default=8)
    p.add_argument("--platform", default="cpu", help="cpu (host devices), gpu or tpu")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=512, help="rows per step, split over the devices")
    p.add_argument("--optimizer", default="adam", choices=["adam", "sgd"])
    p.add_argument("--learning-rate", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eager", action="store_true", help="run the step eagerly, without gt.function")
    return p.parse_args(argv)


def main(argv=None):
    """Run the example; returns a :class:`Result` (``.ok``: the mesh's weights equal the single device's)."""
    args = parse_args(argv)
    devices = host_devices(args.devices, args.platform)
    x, y = make_data(4 * args.batch, seed=args.seed)
    kw = dict(
        steps=args.steps,
        batch=args.batch,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        seed=args.seed,
        compiled=not args.eager,
    )
    t0 = time.perf_counter()
    model, losses, xb = train(x, y, devices, **kw)
    seconds = time.perf_counter() - t0
    for i, loss in enumerate(losses):
        print(f"step {i}: loss {loss:.6f}")
    t0 = time.perf_counter()
    single, single_losses, _ = train(x, y, devices[:1], **kw)
    single_seconds = time.perf_counter() - t0
    weights = model.trainable_variables
    diff = max(float(np.max(np.abs(w.numpy() - v.numpy()))) for w, v in zip(weights, single.trainable_variables))
    result = Result(
        losses,
        single_losses,
        diff,
        len(devices),
        str(weights[0].device),
        str(xb.device),
        seconds,
        single_seconds,
    )
    print(f"weights on {result.weights_device}; batches on {result.batch_device}")
    print(
        f"{args.steps} steps of {args.batch} rows{' (eager)' if args.eager else ''}: {result.seconds:.2f} s on "
        f"{result.devices} devices, {result.single_seconds:.2f} s on one (first calls compile)"
    )
    print(
        f"largest difference from the single-device weights: {diff:.3g} (tolerance {TOLERANCE:g}): "
        f"{'reached' if result.ok else 'MISSED'}"
    )
    return result


if __name__ == "__main__":
    sys.exit(0 if main().ok else 1)
