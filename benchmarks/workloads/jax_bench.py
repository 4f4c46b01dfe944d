"""JAX's own autodiff: ``jax.grad`` run eagerly (op by op), and ``jax.jit(jax.grad(f))``.

The jitted chains (W1/W2/W6) are written with ``lax.fori_loop``: an unrolled 2,000-op chain takes
minutes to compile on the reference machine, and a 100,000-op one would not finish.
``jax.jit(jax.grad)-unrolled`` (W1/W2) jits the Python loop unrolled, the program ``gt.function``
hands to ``jax.jit``: XLA compiles and runs it differently (W2's unrolled chain ran ~17× slower
than the loop).  Compile time is excluded from the jitted figures (it is the first, warm-up call;
the worker reports it as ``first_call_s`` in the JSON).
"""

from __future__ import annotations

import numpy as np

from .common import (
    CHAIN_SCALE,
    CHAIN_SHIFT,
    LEARNING_RATE,
    Case,
    NotApplicable,
    Unavailable,
    chain_start,
    deep_data,
    jac_data,
    l1,
    mlp_data,
    sizes,
)

FRAMEWORKS = ("jax.grad", "jax.jit(jax.grad)", "jax.jit(jax.grad)-unrolled")


_l1 = l1


def _sync(r):
    import jax

    jax.block_until_ready(r)


def setup(framework, workload, cfg):
    import jax
    import jax.numpy as jnp

    if cfg.get("device") == "gpu" and jax.default_backend() != "gpu":
        raise Unavailable(f"jax {jax.__version__} has no GPU here (default backend {jax.default_backend()!r})")
    jit = framework.startswith("jax.jit")
    wrap = jax.jit if jit else (lambda f: f)
    s = sizes(cfg, workload)

    if workload in ("W1", "W2", "W6"):
        n = s["ops"]
        x = jnp.asarray(chain_start(s["shape"]))

        if jit and not framework.endswith("-unrolled"):

            def f(x):
                y = jax.lax.fori_loop(0, n, lambda i, y: jnp.sin(y) * CHAIN_SCALE + CHAIN_SHIFT, x)
                return jnp.sum(y)
        else:

            def f(x):
                y = x
                for _ in range(n):
                    y = jnp.sin(y) * CHAIN_SCALE + CHAIN_SHIFT
                return jnp.sum(y)

        g = wrap(jax.grad(f))
        return Case(lambda: g(x), ops=n, sync=_sync, checksum=_l1)

    if workload in ("W3", "W7"):
        xs, labels, ps = mlp_data(s["batch"], s["dims"])
        x = jnp.asarray(xs)
        lab = jnp.asarray(labels.astype(np.int32))

        def loss(params, x, lab):
            w1, b1, w2, b2, w3, b3 = params
            h = jnp.tanh(x @ w1 + b1)
            h = jnp.tanh(h @ w2 + b2)
            logits = h @ w3 + b3
            logp = jax.nn.log_softmax(logits)
            return -jnp.mean(jnp.take_along_axis(logp, lab[:, None], axis=1))

        def update(params, x, lab):
            grads = jax.grad(loss)(params, x, lab)
            return [p - LEARNING_RATE * g for p, g in zip(params, grads)], grads

        update = wrap(update)
        state = [[jnp.asarray(p) for p in ps]]

        def step():
            state[0], grads = update(state[0], x, lab)
            return grads

        return Case(step, sync=_sync, checksum=_l1)

    if workload == "W4":
        xs, ws = deep_data(s["layers"], s["width"], s["batch"])
        x = jnp.asarray(xs)
        params = [jnp.asarray(w) for w in ws]

        def loss(params, x):
            h = x
            for w in params:
                h = jnp.tanh(h @ w)
            return jnp.sum(h)

        g = wrap(jax.grad(loss))
        return Case(lambda: g(params, x), sync=_sync, checksum=_l1)

    if workload == "W5":
        wn, xn = jac_data(s["n"])
        w, x = jnp.asarray(wn), jnp.asarray(xn)
        jac = wrap(jax.jacrev(lambda x: jnp.tanh(w @ x)))
        return Case(lambda: jac(x), sync=_sync, checksum=_l1)

    raise NotApplicable(workload)
