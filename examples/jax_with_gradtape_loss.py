"""A JAX model trained with a loss that gradtape differentiates: ``gt.interop.to_jax``.

The classifier of ``torch_with_gradtape_loss.py`` written in JAX (2-32-32-3, tanh, parameters in a
dict), trained by plain gradient descent with momentum under ``jax.jit(jax.value_and_grad(...))``.  The
loss is a gradtape function (softmax cross-entropy with ``gt.nn.log_softmax`` plus a weight penalty),
wrapped by ``gt.interop.to_jax``: on the jax backend gradtape's ops run on JAX's tracers and the whole
step compiles to one program; on another backend the loss and its gradient run on the host through
``jax.pure_callback``.  (Not SciPy's ``logsumexp`` as in the torch example: under ``jax.jit`` on the jax
backend it assigns through a boolean mask, which JAX cannot trace.)

    python examples/jax_with_gradtape_loss.py [--backend jax] [--seed 0] [--steps 300]

prints the test accuracy and exits with status 1 unless it is at least 0.9 (about 0.99 with the
defaults).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import os
import pathlib
import sys
import time

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # SciPy reads it once, when first imported

import jax
import jax.numpy as jnp
import numpy as np

import gradtape as gt

jax.config.update("jax_enable_x64", True)

TARGET_ACCURACY = 0.9


def _sibling(name):
    """The example ``name`` beside this file (its data and its loss are shared)."""
    key = f"gradtape_example_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, pathlib.Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


make_data = _sibling("torch_with_gradtape_loss").make_data


def cross_entropy(logits, onehot, weights, decay):
    """Mean softmax cross-entropy plus ``decay`` times the squared norm of ``weights``, written for
    gradtape: it knows nothing of JAX."""
    penalty = sum(gt.sum(w * w) for w in weights)
    return -gt.mean(gt.sum(onehot * gt.nn.log_softmax(logits, axis=1), axis=1)) + decay * penalty


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


def init(seed, sizes=(2, 32, 32, 3)):
    keys = jax.random.split(jax.random.PRNGKey(seed), len(sizes) - 1)
    return [
        {"w": jax.random.normal(k, (m, n)) / np.sqrt(m), "b": jnp.zeros(n)}
        for k, m, n in zip(keys, sizes[:-1], sizes[1:])
    ]


def forward(params, x):
    for layer in params[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def train(x, labels, steps=300, seed=0, decay=1e-4, backend=None, lr=0.1, momentum=0.9):
    loss_fn = gt.interop.to_jax(cross_entropy, backend=backend)
    onehot = jax.nn.one_hot(labels, 3, dtype=jnp.float64)

    def objective(params):
        return loss_fn(forward(params, x), onehot, [layer["w"] for layer in params], decay)

    @jax.jit
    def step(params, velocity):
        loss, grads = jax.value_and_grad(objective)(params)
        velocity = jax.tree.map(lambda v, g: momentum * v - lr * g, velocity, grads)
        return jax.tree.map(jnp.add, params, velocity), velocity, loss

    params = init(seed)
    velocity = jax.tree.map(jnp.zeros_like, params)
    loss = None
    for _ in range(steps):
        params, velocity, loss = step(params, velocity)
    return params, float(loss)


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
        params, loss = train(jnp.asarray(x[:split]), jnp.asarray(labels[:split]), steps=args.steps, seed=args.seed)
        backend = gt.get_backend().name
    predicted = np.asarray(jnp.argmax(forward(params, jnp.asarray(x[split:])), axis=1))
    result = Result(float(np.mean(predicted == labels[split:])), loss, time.perf_counter() - t0, backend)
    print(f"test accuracy {result.test_accuracy:.3f}")
    print(
        f"loss on gradtape:{result.backend}: {result.loss:.4f} after {args.steps} steps in {result.seconds:.2f} s; "
        f"target accuracy >= {TARGET_ACCURACY}: {'reached' if result.ok else 'MISSED'}"
    )
    return result


if __name__ == "__main__":
    sys.exit(0 if main().ok else 1)
