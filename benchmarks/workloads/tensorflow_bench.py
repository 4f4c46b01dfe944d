"""TensorFlow 2 eager ``tf.GradientTape`` — the API gradtape reproduces.

TensorFlow is not installed on the reference machine (the harness marks it "not installed"); this
module is written against TF 2's public API and runs wherever ``import tensorflow`` works.
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

FRAMEWORKS = ("tensorflow",)


_l1 = l1


def setup(framework, workload, cfg):
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # already initialised
        pass
    s = sizes(cfg, workload)

    if workload in ("W1", "W2", "W6"):
        n = s["ops"]
        x = tf.constant(chain_start(s["shape"]))

        def step():
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = x
                for _ in range(n):
                    y = tf.sin(y) * CHAIN_SCALE + CHAIN_SHIFT
            return tape.gradient(y, x)

        return Case(step, ops=n, checksum=_l1)

    if workload in ("W3", "W7"):
        xs, labels, ps = mlp_data(s["batch"], s["dims"])
        x, lab = tf.constant(xs), tf.constant(labels)
        params = [tf.Variable(p) for p in ps]
        w1, b1, w2, b2, w3, b3 = params
        opt = tf.keras.optimizers.SGD(LEARNING_RATE)

        def step():
            with tf.GradientTape() as tape:
                h = tf.tanh(x @ w1 + b1)
                h = tf.tanh(h @ w2 + b2)
                logits = h @ w3 + b3
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=logits))
            grads = tape.gradient(loss, params)
            opt.apply_gradients(zip(grads, params))  # (gradtape's row: gt.optimizers.SGD)
            return grads, tape

        return Case(step, checksum=lambda r: _l1(r[0]), keep=lambda r: r[1])

    if workload == "W4":
        xs, ws = deep_data(s["layers"], s["width"], s["batch"])
        x = tf.constant(xs)
        params = [tf.Variable(w) for w in ws]

        def step():
            with tf.GradientTape() as tape:
                h = x
                for w in params:
                    h = tf.tanh(h @ w)
                loss = tf.reduce_sum(h)
            return tape.gradient(loss, params)

        return Case(step, checksum=_l1)

    if workload == "W5":
        wn, xn = jac_data(s["n"])
        w, x = tf.constant(wn), tf.constant(xn)

        def step():
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.tanh(tf.linalg.matvec(w, x))
            return tape.jacobian(y, x)

        return Case(step, checksum=_l1)

    raise NotApplicable(workload)
