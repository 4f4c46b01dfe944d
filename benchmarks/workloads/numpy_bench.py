"""The NumPy anchors: the hand-written forward + backward (+ SGD), the forward alone, and a
minimal Python tape — the floor that any tape on NumPy is measured against."""

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

FRAMEWORKS = ("numpy-hand", "minitape-numpy", "numpy-forward")


_l1 = l1


def setup(framework, workload, cfg):
    s = sizes(cfg, workload)
    if framework == "numpy-forward":
        if workload not in ("W1", "W2", "W6"):
            raise NotApplicable(workload)
        return _chain_forward(s)
    if framework == "minitape-numpy":
        if workload not in ("W1", "W2", "W6"):
            raise NotApplicable(workload)
        return _chain_minitape(s)
    if workload in ("W1", "W2", "W6"):
        return _chain_hand(s)
    if workload in ("W3", "W7"):
        return _mlp_hand(s)
    if workload == "W4":
        return _deep_hand(s)
    if workload == "W5":
        return _jac_hand(s)
    raise NotApplicable(workload)


# ---------------------------------------------------------------------------------------- chains
def _chain_forward(s):
    n = s["ops"]
    x = chain_start(s["shape"])
    sin = np.sin

    def step():
        y = x
        for _ in range(n):
            y = sin(y) * CHAIN_SCALE + CHAIN_SHIFT
        return y

    return Case(step, ops=n)


def _chain_hand(s):
    n = s["ops"]
    x = chain_start(s["shape"])
    sin, cos = np.sin, np.cos

    def step():
        saved = [None] * n
        y = x
        for i in range(n):
            saved[i] = y
            y = sin(y) * CHAIN_SCALE + CHAIN_SHIFT
        g = np.ones_like(y)
        for i in range(n - 1, -1, -1):
            g = g * CHAIN_SCALE * cos(saved[i])
        return g

    return Case(step, ops=n, checksum=_l1)


class _Var:
    """A value on the minimal tape."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class MiniTape:
    """The smallest useful reverse-mode tape: each op appends (output, input, vjp, saved)."""

    def __init__(self):
        self.nodes = []

    def sin(self, x):
        y = _Var(np.sin(x.value))
        self.nodes.append((y, x, _sin_vjp, x.value))
        return y

    def mul(self, x, c):
        y = _Var(x.value * c)
        self.nodes.append((y, x, _mul_vjp, c))
        return y

    def add(self, x, c):
        y = _Var(x.value + c)
        self.nodes.append((y, x, _add_vjp, None))
        return y

    def gradient(self, target, source):
        grads = {id(target): np.ones_like(target.value)}
        for out, inp, vjp, saved in reversed(self.nodes):
            g = grads.pop(id(out), None)
            if g is None:
                continue
            gi = vjp(g, saved)
            k = id(inp)
            prev = grads.get(k)
            grads[k] = gi if prev is None else prev + gi
        self.nodes = []
        return grads.get(id(source))


def _sin_vjp(g, x):
    return g * np.cos(x)


def _mul_vjp(g, c):
    return g * c


def _add_vjp(g, _):
    return g


def _chain_minitape(s):
    n = s["ops"]
    x0 = chain_start(s["shape"])

    def step():
        tape = MiniTape()
        x = _Var(x0)
        y = x
        for _ in range(n):
            y = tape.add(tape.mul(tape.sin(y), CHAIN_SCALE), CHAIN_SHIFT)
        return tape.gradient(y, x)

    return Case(step, ops=n, checksum=_l1)


# ---------------------------------------------------------------------------------------- networks
def _mlp_hand(s):
    x, labels, params = mlp_data(s["batch"], s["dims"])
    batch = x.shape[0]
    rows = np.arange(batch)

    def step():
        w1, b1, w2, b2, w3, b3 = params
        h1 = np.tanh(x @ w1 + b1)
        h2 = np.tanh(h1 @ w2 + b2)
        logits = h2 @ w3 + b3
        # softmax cross-entropy, mean over the batch
        m = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - m)
        se = e.sum(axis=1, keepdims=True)
        loss = np.mean(np.log(se[:, 0]) + m[:, 0] - logits[rows, labels])
        # backward
        d = e / se
        d[rows, labels] -= 1.0
        d /= batch
        gw3 = h2.T @ d
        gb3 = d.sum(axis=0)
        dz = (d @ w3.T) * (1.0 - h2 * h2)
        gw2 = h1.T @ dz
        gb2 = dz.sum(axis=0)
        dz = (dz @ w2.T) * (1.0 - h1 * h1)
        gw1 = x.T @ dz
        gb1 = dz.sum(axis=0)
        grads = [gw1, gb1, gw2, gb2, gw3, gb3]
        for p, g in zip(params, grads):
            p -= LEARNING_RATE * g
        del loss
        return grads

    return Case(step, checksum=_l1)


def _deep_hand(s):
    x, ws = deep_data(s["layers"], s["width"], s["batch"])

    def step():
        hs = [x]
        h = x
        for w in ws:
            h = np.tanh(h @ w)
            hs.append(h)
        g = np.ones_like(h)  # d sum(h) / dh
        grads = [None] * len(ws)
        for i in range(len(ws) - 1, -1, -1):
            h = hs[i + 1]
            dz = g * (1.0 - h * h)
            grads[i] = hs[i].T @ dz
            if i:
                g = dz @ ws[i].T
        return grads

    return Case(step, checksum=_l1)


def _jac_hand(s):
    w, x = jac_data(s["n"])

    def step():
        y = np.tanh(w @ x)
        return (1.0 - y * y)[:, None] * w

    return Case(step, checksum=_l1)
