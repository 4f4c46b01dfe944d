"""Linear regression with a GradientTape: fit ``y = a x + b`` to noisy samples of ``y = 10 x + 5``.

The "hello world" of the GradientTape seed article, on any backend: the data are drawn with
``gt.random`` (the same numbers on every backend for one seed), the loss is the mean squared
error, and each step moves ``a`` and ``b`` against their gradients, scaled by the learning rate,
with ``Variable.assign_sub``.  (The article multiplies by 0.001 for 100,000 steps; inputs in
[-1, 1] and a learning rate of 0.1 get there in a few hundred.)

    python examples/linear_regression.py [--backend torch] [--seed 0] [--steps 400]

prints ``y ≈ {a}x + {b}`` and exits with status 1 unless both ``|a - 10|`` and ``|b - 5|`` are
below 0.25 (with the defaults it lands within about 0.05, in well under a second on NumPy).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time

import gradtape as gt

TRUE_A, TRUE_B = 10.0, 5.0
TOLERANCE = 0.25


@dataclasses.dataclass
class Result:
    a: float
    b: float
    loss: float
    seconds: float
    backend: str

    @property
    def ok(self):
        """Whether the fit reached the stated target."""
        return abs(self.a - TRUE_A) < TOLERANCE and abs(self.b - TRUE_B) < TOLERANCE


def make_data(n=1000, noise=0.5, seed=0):
    """``x`` uniform in [-1, 1) and ``y = 10 x + 5 + noise``, float32, on the active backend."""
    x = gt.random.uniform((n,), -1.0, 1.0, seed=seed)
    y = TRUE_A * x + TRUE_B + gt.random.normal((n,), stddev=noise, seed=seed + 1)
    return x, y


def fit(x, y, steps=400, learning_rate=0.1):
    """Gradient descent on the mean squared error; returns the variables and the last loss."""
    a = gt.Variable(0.0, name="a")
    b = gt.Variable(0.0, name="b")
    loss = None
    for _ in range(steps):
        with gt.GradientTape() as tape:
            y_pred = a * x + b
            loss = gt.reduce_mean(gt.square(y - y_pred))
        da, db = tape.gradient(loss, [a, b])
        a.assign_sub(learning_rate * da)
        b.assign_sub(learning_rate * db)
    return a, b, loss


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default=None, help="gradtape backend (default: the configured one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--learning-rate", type=float, default=0.1)
    return p.parse_args(argv)


def main(argv=None):
    """Run the example; returns a :class:`Result` (``.ok`` says whether the target was reached)."""
    args = parse_args(argv)
    scope = gt.use_backend(args.backend) if args.backend else contextlib.nullcontext()
    with scope:
        t0 = time.perf_counter()
        x, y = make_data(seed=args.seed)
        a, b, loss = fit(x, y, steps=args.steps, learning_rate=args.learning_rate)
        result = Result(float(a), float(b), float(loss), time.perf_counter() - t0, gt.get_backend().name)
    print(f"y ≈ {result.a}x + {result.b}")
    print(
        f"backend {result.backend}: loss {result.loss:.4f} after {args.steps} steps in {result.seconds:.2f} s; "
        f"target |a - 10|, |b - 5| < {TOLERANCE}: {'reached' if result.ok else 'MISSED'}"
    )
    return result


if __name__ == "__main__":
    sys.exit(0 if main().ok else 1)
