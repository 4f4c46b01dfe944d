"""Polynomial regression with a GradientTape and ``gt.optimizers.SGD``: fit
``y = a x^2 + b x + c`` to noisy samples of ``y = 6 x^2 + 7 x + 2``.

The seed article's second example: the same loop as linear regression with more variables, here
with an optimizer (SGD with momentum 0.9) applying the gradients through
``optimizer.apply_gradients(zip(grads, variables))``.

    python examples/polynomial_regression.py [--backend jax] [--seed 0] [--steps 300]

prints ``y ≈ {a}x^2 + {b}x + {c}`` and exits with status 1 unless every coefficient is within 0.3
of the truth (with the defaults it lands within about 0.1).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time

import gradtape as gt

TRUE = (6.0, 7.0, 2.0)
TOLERANCE = 0.3


@dataclasses.dataclass
class Result:
    coefficients: tuple
    loss: float
    seconds: float
    backend: str

    @property
    def ok(self):
        """Whether every coefficient is within the stated tolerance."""
        return all(abs(c - t) < TOLERANCE for c, t in zip(self.coefficients, TRUE))


def make_data(n=1000, noise=0.5, seed=0):
    a, b, c = TRUE
    x = gt.random.uniform((n,), -1.0, 1.0, seed=seed)
    y = a * x**2 + b * x + c + gt.random.normal((n,), stddev=noise, seed=seed + 1)
    return x, y


def fit(x, y, steps=300, learning_rate=0.1, momentum=0.9):
    a, b, c = (gt.Variable(0.0, name=n) for n in "abc")
    variables = [a, b, c]
    optimizer = gt.optimizers.SGD(learning_rate=learning_rate, momentum=momentum)
    loss = None
    for _ in range(steps):
        with gt.GradientTape() as tape:
            y_pred = a * x**2 + b * x + c
            loss = gt.losses.mean_squared_error(y, y_pred)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
    return variables, loss


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default=None, help="gradtape backend (default: the configured one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--learning-rate", type=float, default=0.1)
    return p.parse_args(argv)


def main(argv=None):
    """Run the example; returns a :class:`Result` (``.ok`` says whether the target was reached)."""
    args = parse_args(argv)
    scope = gt.use_backend(args.backend) if args.backend else contextlib.nullcontext()
    with scope:
        t0 = time.perf_counter()
        x, y = make_data(seed=args.seed)
        variables, loss = fit(x, y, steps=args.steps, learning_rate=args.learning_rate)
        result = Result(
            tuple(float(v) for v in variables), float(loss), time.perf_counter() - t0, gt.get_backend().name
        )
    a, b, c = result.coefficients
    print(f"y ≈ {a}x^2 + {b}x + {c}")
    print(
        f"backend {result.backend}: loss {result.loss:.4f} after {args.steps} steps in {result.seconds:.2f} s; "
        f"target: each coefficient within {TOLERANCE}: {'reached' if result.ok else 'MISSED'}"
    )
    return result


if __name__ == "__main__":
    sys.exit(0 if main().ok else 1)
