"""HIPS ``autograd`` (``pip install autograd``): NumPy wrapped in tracing boxes."""

from __future__ import annotations

import numpy as np

from .common import (
    CHAIN_SCALE,
    CHAIN_SHIFT,
    LEARNING_RATE,
    Case,
    NotApplicable,
    chain_start,
    deep_data,
    jac_data,
    l1,
    mlp_data,
    sizes,
)

FRAMEWORKS = ("autograd",)


_l1 = l1


def setup(framework, workload, cfg):
    import autograd
    import autograd.numpy as anp
    from autograd.scipy.special import logsumexp

    s = sizes(cfg, workload)

    if workload in ("W1", "W2", "W6"):
        n = s["ops"]
        x = chain_start(s["shape"])

        def f(x):
            y = x
            for _ in range(n):
                y = anp.sin(y) * CHAIN_SCALE + CHAIN_SHIFT
            return anp.sum(y)

        g = autograd.grad(f)
        return Case(lambda: g(x), ops=n, checksum=_l1)

    if workload in ("W3", "W7"):
        xs, labels, params = mlp_data(s["batch"], s["dims"])
        rows = np.arange(xs.shape[0])

        def loss(params):
            w1, b1, w2, b2, w3, b3 = params
            h = anp.tanh(anp.dot(xs, w1) + b1)
            h = anp.tanh(anp.dot(h, w2) + b2)
            logits = anp.dot(h, w3) + b3
            logp = logits - logsumexp(logits, axis=1, keepdims=True)
            return -anp.mean(logp[rows, labels])

        g = autograd.grad(loss)

        def step():
            grads = g(params)
            for p, gr in zip(params, grads):
                p -= LEARNING_RATE * gr
            return grads

        return Case(step, checksum=_l1)

    if workload == "W4":
        xs, ws = deep_data(s["layers"], s["width"], s["batch"])

        def loss(ws):
            h = xs
            for w in ws:
                h = anp.tanh(anp.dot(h, w))
            return anp.sum(h)

        g = autograd.grad(loss)
        return Case(lambda: g(ws), checksum=_l1)

    if workload == "W5":
        w, x = jac_data(s["n"])
        jac = autograd.jacobian(lambda x: anp.tanh(anp.dot(w, x)))
        return Case(lambda: jac(x), checksum=_l1)

    raise NotApplicable(workload)
