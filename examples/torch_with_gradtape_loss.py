"""A torch model trained with a loss that gradtape differentiates: ``gt.interop.to_torch``.

A small ``torch.nn`` classifier (2-32-32-3, tanh) learns three interleaved spirals-like blobs drawn
with NumPy for one seed.  The loss is written for gradtape, not for torch: softmax cross-entropy with
SciPy's ``scipy.special.logsumexp`` (unmodified, through its array-API dispatch) plus a small
weight penalty, wrapped by ``gt.interop.to_torch`` so that ``loss.backward()`` reaches the torch
parameters through gradtape's gradient.  ``torch.optim.Adam`` takes the steps.

    python examples/torch_with_gradtape_loss.py [--backend torch] [--seed 0] [--steps 300]

prints the test accuracy and exits with status 1 unless it is at least 0.9 (with the defaults it
reaches about 0.99; the loss runs on the gradtape backend given, ``torch`` sharing the tensors'
memory, the others by DLPack).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # SciPy reads it once, when first imported

import numpy as np
import scipy.special
import torch

import gradtape as gt

TARGET_ACCURACY = 0.9


@dataclasses.dataclass
class Result:
    test_accuracy: float
    loss: float
    seconds: float
    backend: str
    target: float = TARGET_ACCURACY

    @property
    def ok(self):
        """Whether the model reached the stated target."""
        return self.test_accuracy >= self.target


def make_data(n=600, seed=0):
    """Three classes of 2-d points around three centres on a circle, float64; (x, labels)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    angle = 2 * np.pi * labels / 3
    centres = np.stack([np.cos(angle), np.sin(angle)], axis=1) * 1.5
    return centres + rng.normal(scale=0.45, size=(n, 2)), labels


def cross_entropy(logits, onehot, weights, decay):
    """Mean softmax cross-entropy (SciPy's logsumexp on gradtape tensors) plus ``decay`` times the
    squared norm of ``weights``: written for gradtape and the Array API, knowing nothing of torch."""
    log_probs = logits - scipy.special.logsumexp(logits, axis=1, keepdims=True)
    penalty = sum(gt.sum(w * w) for w in weights)
    return -gt.mean(gt.sum(onehot * log_probs, axis=1)) + decay * penalty


def train(x, labels, steps=300, seed=0, decay=1e-4, backend=None):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(2, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3)
    ).double()
    loss_fn = gt.interop.to_torch(cross_entropy, backend=backend)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    xt = torch.as_tensor(x)
    onehot = torch.nn.functional.one_hot(torch.as_tensor(labels), 3).double()
    weights = [p for name, p in model.named_parameters() if name.endswith("weight")]
    loss = None
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(xt), onehot, weights, decay)
        loss.backward()
        optimizer.step()
    return model, float(loss)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default=None, help="gradtape backend of the loss (default: the configured one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=300)
    return p.parse_args(argv)


def main(argv=None):
    """Run the example; returns a :class:`Result` (``.ok`` says whether the target was reached)."""
    args = parse_args(argv)
    x, labels = make_data(seed=args.seed)
    split = len(x) * 2 // 3
    scope = gt.use_backend(args.backend) if args.backend else contextlib.nullcontext()
    with scope:
        t0 = time.perf_counter()
        model, loss = train(x[:split], labels[:split], steps=args.steps, seed=args.seed)
        backend = gt.get_backend().name
    with torch.no_grad():
        predicted = model(torch.as_tensor(x[split:])).argmax(dim=1).numpy()
    result = Result(float(np.mean(predicted == labels[split:])), loss, time.perf_counter() - t0, backend)
    print(f"test accuracy {result.test_accuracy:.3f}")
    print(
        f"loss on gradtape:{result.backend}: {result.loss:.4f} after {args.steps} steps in {result.seconds:.2f} s; "
        f"target accuracy >= {TARGET_ACCURACY}: {'reached' if result.ok else 'MISSED'}"
    )
    return result


if __name__ == "__main__":
    sys.exit(0 if main().ok else 1)
