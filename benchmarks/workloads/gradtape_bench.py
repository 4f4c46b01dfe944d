"""gradtape, on each of its backends, through its public API only.

``gradtape-<backend>``: the backend is made the process default with ``gt.set_backend`` before any
tensor is created.  Chains (W1/W2/W6) watch a constant, as ``tf.GradientTape`` users do; the MLP
(W3/W7) and the deep net (W4) keep their parameters in ``gt.Variable``s, which the tape watches on
read, and W3/W7 update them with ``Variable.assign_sub`` (the primitive the optimizers use).
"""

from __future__ import annotations


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

FRAMEWORKS = ("gradtape-numpy", "gradtape-torch", "gradtape-jax", "gradtape-array_api_strict")


_l1 = l1


def setup(framework, workload, cfg):
    import gradtape as gt

    backend = framework.split("-", 1)[1]
    if backend == "torch":
        import torch

        torch.set_num_threads(1)
    gt.set_backend(backend)
    sync = _sync_for(backend)
    s = sizes(cfg, workload)

    if workload in ("W1", "W2", "W6"):
        n = s["ops"]
        x = gt.constant(chain_start(s["shape"]))
        sin = gt.sin

        def step():
            with gt.GradientTape() as tape:
                tape.watch(x)
                y = x
                for _ in range(n):
                    y = sin(y) * CHAIN_SCALE + CHAIN_SHIFT
            return tape.gradient(y, x)

        return Case(step, ops=n, sync=sync, checksum=_l1)

    if workload in ("W3", "W7"):
        xs, labels, ps = mlp_data(s["batch"], s["dims"])
        x = gt.constant(xs)
        lab = gt.constant(labels)
        params = [gt.Variable(p) for p in ps]
        w1, b1, w2, b2, w3, b3 = params
        xent = gt.nn.sparse_softmax_cross_entropy_with_logits

        def step():
            with gt.GradientTape() as tape:
                h = gt.tanh(x @ w1 + b1)
                h = gt.tanh(h @ w2 + b2)
                logits = h @ w3 + b3
                loss = gt.mean(xent(labels=lab, logits=logits))
            grads = tape.gradient(loss, params)
            for p, g in zip(params, grads):
                p.assign_sub(LEARNING_RATE * g)
            return grads, tape

        return Case(step, sync=lambda r: sync(r[0]), checksum=lambda r: _l1(r[0]), keep=lambda r: r[1])

    if workload == "W4":
        xs, ws = deep_data(s["layers"], s["width"], s["batch"])
        x = gt.constant(xs)
        params = [gt.Variable(w) for w in ws]

        def step():
            with gt.GradientTape() as tape:
                h = x
                for w in params:
                    h = gt.tanh(h @ w)
                loss = gt.sum(h)
            return tape.gradient(loss, params)

        return Case(step, sync=sync, checksum=_l1)

    if workload == "W5":
        wn, xn = jac_data(s["n"])
        w = gt.constant(wn)
        x = gt.constant(xn)

        def step():
            with gt.GradientTape() as tape:
                tape.watch(x)
                y = gt.tanh(w @ x)
            return tape.jacobian(y, x)

        return Case(step, sync=sync, checksum=_l1)

    raise NotApplicable(workload)


def _sync_for(backend):
    if backend != "jax":
        return lambda r: None

    def sync(r):
        if isinstance(r, (list, tuple)):
            for t in r:
                sync(t)
        elif r is not None:
            r.native.block_until_ready()

    return sync
