"""Per-example gradients (issue 24, item 3): gt.vmap of a function with a GradientTape inside, beside
its anchors, in one process.

The model: a 2-layer MLP (``d_in -> hidden -> d_out``, tanh), the loss of one example the mean
squared error.  Per-example gradients of both weight matrices, for a batch of ``--batch`` examples:

* gradtape on torch   vs ``torch.func.vmap(torch.func.grad(loss))``   (target: <= 1.5x)
* gradtape on numpy   vs the batched gradient written by hand in NumPy (target: <= 2x)
* the same map inside ``gt.function`` (traced once, then one program per call: ``jax.jit(jax.vmap(...))``'s
  place), on numpy and torch
* (for reference) gradtape on numpy by a Python loop of one tape per example.

    python benchmarks/per_example.py                 # batch 64 and 256, ~1 min
    python benchmarks/per_example.py --batch 128 --repeat 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # CPU figures: a CUDA build of jaxlib stays off the GPU

import gradtape as gt


def _time(fn, repeat):
    fn()
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        ts.append(time.process_time() - t0)
    return statistics.median(ts)


def gradtape_per_example(backend, w1, w2, xs, ys, compiled=False):
    """``gt.vmap`` of the one-example gradient (``compiled``: inside ``gt.function``)."""
    with gt.use_backend(backend):
        params = (gt.constant(w1), gt.constant(w2))
        x = gt.constant(xs)
        y = gt.constant(ys)

    def per_example(p, xi, yi):
        with gt.GradientTape() as tape:
            tape.watch(p)
            h = gt.tanh(gt.matmul(xi, p[0]))
            loss = gt.reduce_mean((gt.matmul(h, p[1]) - yi) ** 2)
        return tape.gradient(loss, p)

    mapped = gt.vmap(per_example, in_axes=(None, 0, 0))
    if compiled:
        mapped = gt.function(mapped)
    return lambda: mapped(params, x, y)


def gradtape_loop(w1, w2, xs, ys):
    with gt.use_backend("numpy"):
        params = (gt.constant(w1), gt.constant(w2))
        x = gt.constant(xs)
        y = gt.constant(ys)

    def run():
        out = []
        for i in range(xs.shape[0]):
            with gt.GradientTape() as tape:
                tape.watch(params)
                h = gt.tanh(gt.matmul(x[i], params[0]))
                loss = gt.reduce_mean((gt.matmul(h, params[1]) - y[i]) ** 2)
            out.append(tape.gradient(loss, params))
        return [gt.stack([o[k] for o in out]) for k in range(2)]

    return run


def numpy_by_hand(w1, w2, xs, ys):
    d_out = ys.shape[1]

    def run():
        h = np.tanh(xs @ w1)  # (B, H)
        r = h @ w2 - ys  # (B, O)
        gr = (2.0 / d_out) * r
        g2 = h[:, :, None] * gr[:, None, :]  # (B, H, O)
        gh = (gr @ w2.T) * (1 - h * h)  # (B, H)
        g1 = xs[:, :, None] * gh[:, None, :]  # (B, I, H)
        return g1, g2

    return run


def torch_func(w1, w2, xs, ys):
    import torch
    from torch.func import grad, vmap

    torch.set_num_threads(1)
    p = (torch.tensor(w1), torch.tensor(w2))
    x = torch.tensor(xs)
    y = torch.tensor(ys)

    def loss(params, xi, yi):
        h = torch.tanh(xi @ params[0])
        return torch.mean((h @ params[1] - yi) ** 2)

    f = vmap(grad(loss), in_dims=(None, 0, 0))
    return lambda: f(p, x, y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, nargs="*", default=[64, 256])
    ap.add_argument("--sizes", type=int, nargs=3, default=[32, 64, 10], metavar=("D_IN", "HIDDEN", "D_OUT"))
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    d_in, hidden, d_out = args.sizes
    rng = np.random.default_rng(0)
    w1 = (rng.normal(size=(d_in, hidden)) / np.sqrt(d_in)).astype(np.float32)
    w2 = (rng.normal(size=(hidden, d_out)) / np.sqrt(hidden)).astype(np.float32)
    print(f"MLP {d_in}-{hidden}-{d_out}, float32, CPU time, median of {args.repeat} runs, OMP_NUM_THREADS=1\n")
    print("| batch | what | time (ms) | ratio |")
    print("|---:|---|---:|---:|")
    for b in args.batch:
        xs = rng.normal(size=(b, d_in)).astype(np.float32)
        ys = rng.normal(size=(b, d_out)).astype(np.float32)
        # the same numbers from every implementation first
        ref = numpy_by_hand(w1, w2, xs, ys)()
        for got in (
            gradtape_per_example("numpy", w1, w2, xs, ys)(),
            gradtape_per_example("numpy", w1, w2, xs, ys, compiled=True)(),
            gradtape_loop(w1, w2, xs, ys)(),
        ):
            for g, r in zip(got, ref):
                np.testing.assert_allclose(g.numpy(), r, rtol=1e-4, atol=1e-5)
        t_hand = _time(numpy_by_hand(w1, w2, xs, ys), args.repeat)
        t_np = _time(gradtape_per_example("numpy", w1, w2, xs, ys), args.repeat)
        t_np_fn = _time(gradtape_per_example("numpy", w1, w2, xs, ys, compiled=True), args.repeat)
        t_loop = _time(gradtape_loop(w1, w2, xs, ys), max(3, args.repeat // 10))
        print(f"| {b} | NumPy by hand (anchor) | {t_hand * 1e3:.3f} | 1.00 |")
        print(f"| {b} | gt.vmap + tape, numpy | {t_np * 1e3:.3f} | {t_np / t_hand:.2f} |")
        print(f"| {b} | gt.function(gt.vmap + tape), numpy | {t_np_fn * 1e3:.3f} | {t_np_fn / t_hand:.2f} |")
        print(f"| {b} | a tape per example (loop), numpy | {t_loop * 1e3:.3f} | {t_loop / t_hand:.2f} |")
        try:
            tf = torch_func(w1, w2, xs, ys)
        except ImportError:
            print(f"| {b} | torch.func: not installed | | |")
            continue
        for compiled in (False, True):
            got = gradtape_per_example("torch", w1, w2, xs, ys, compiled=compiled)()
            for g, r in zip(got, tf()):
                np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-4, atol=1e-5)
        t_tf = _time(tf, args.repeat)
        t_gt = _time(gradtape_per_example("torch", w1, w2, xs, ys), args.repeat)
        t_gt_fn = _time(gradtape_per_example("torch", w1, w2, xs, ys, compiled=True), args.repeat)
        print(f"| {b} | torch.func.vmap(grad) (anchor) | {t_tf * 1e3:.3f} | 1.00 |")
        print(f"| {b} | gt.vmap + tape, torch | {t_gt * 1e3:.3f} | {t_gt / t_tf:.2f} |")
        print(f"| {b} | gt.function(gt.vmap + tape), torch | {t_gt_fn * 1e3:.3f} | {t_gt_fn / t_tf:.2f} |")


if __name__ == "__main__":
    main()
