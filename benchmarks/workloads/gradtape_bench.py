"""gradtape, on each of its backends, through its public API only: eager, and the same step in
``gt.function``.

``gradtape-<backend>``: the backend is made the process default with ``gt.set_backend`` before any
tensor is created.  Chains (W1/W2/W6) watch their input, as ``tf.GradientTape`` users do; the MLP
(W3/W7) and the deep net (W4) keep their parameters in ``gt.Variable``s, which the tape watches on
read, and W3/W7 update them with ``gt.optimizers.SGD`` (what TensorFlow's guides write,
``apply_gradients``; the ``torch.autograd`` row runs ``torch.optim.SGD``'s update, the ``tensorflow``
row Keras' SGD).

``gradtape.function-<backend>`` (``-torch-compile``: ``jit_compile=True``): the same step function,
wrapped in ``gt.function``; its first call (trace + compile) is the worker's ``first_call_s``,
outside the timed repeats.  Every row's step takes its input tensors (and W3 its labels) as
arguments: a tensor captured from the closure is a constant of a traced program, and a chain of
constants would fold to its result.  No W6 (a 100,000-op chain unrolls into a program no compiler
finishes) nor W7 (memory of the tape).
"""

from __future__ import annotations

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
    record_first_call_warnings,
    sizes,
    torch_compile_problem,
)

FRAMEWORKS = (
    "gradtape-numpy",
    "gradtape-torch",
    "gradtape-jax",
    "gradtape-array_api_strict",
    "gradtape-cupy",
    "gradtape.function-numpy",
    "gradtape.function-torch",
    "gradtape.function-torch-compile",
    "gradtape.function-jax",
    "gradtape.function-jax-loop",
    "gradtape.function-array_api_strict",
)

#: gt.function rows: backend, jit_compile, the executor the step should end up with
TRACED = {
    "gradtape.function-numpy": ("numpy", None, "replay"),
    "gradtape.function-torch": ("torch", None, "replay"),
    "gradtape.function-torch-compile": ("torch", True, "torch compiler"),
    "gradtape.function-jax": ("jax", None, "jax compiler"),
    "gradtape.function-jax-loop": ("jax", None, "jax compiler"),
    "gradtape.function-array_api_strict": ("array_api_strict", None, "replay"),
}

_l1 = l1

#: the backend spec of each backend's first GPU (--device gpu)
GPU_SPEC = {"torch": "torch:cuda", "jax": "jax:gpu", "cupy": "cupy"}


def setup(framework, workload, cfg):
    import gradtape as gt

    traced = TRACED.get(framework)
    backend = traced[0] if traced else framework.split("-", 1)[1]
    if backend == "torch":
        import torch

        torch.set_num_threads(1)
        if traced and traced[1]:
            why = torch_compile_problem()
            if why:
                raise Unavailable(why)
    if traced and workload in ("W6", "W7"):
        raise NotApplicable(workload)
    on_gpu = cfg.get("device") == "gpu"
    if on_gpu and backend not in GPU_SPEC:
        raise NotApplicable(f"the {backend} backend computes on the CPU only")
    if not on_gpu and backend == "cupy":
        raise NotApplicable("the cupy backend computes on a GPU only (--device gpu)")
    gt.set_backend(GPU_SPEC[backend] if on_gpu else backend)
    sync = _sync_for(backend, on_gpu)
    s = sizes(cfg, workload)

    def case(fn, *args, **kw):
        """The Case of ``fn(*args)``: eager, or through gt.function for a traced row."""
        if not traced:
            return Case(lambda: fn(*args), sync=sync, **kw)
        f = gt.function(fn, jit_compile=traced[1])
        c = Case(lambda: f(*args), sync=sync, **kw)
        c.info = lambda: _traced_info(f, traced[2])
        return record_first_call_warnings(c)

    if workload in ("W1", "W2", "W6"):
        n = s["ops"]
        x = gt.constant(chain_start(s["shape"]))
        sin = gt.sin

        def chain(x):
            with gt.GradientTape() as tape:
                tape.watch(x)
                y = x
                for _ in range(n):
                    y = sin(y) * CHAIN_SCALE + CHAIN_SHIFT
            return tape.gradient(y, x)

        if framework.endswith("-loop"):  # the chain as one loop step (the anchor's lax.fori_loop)

            def chain(x):
                with gt.GradientTape() as tape:
                    tape.watch(x)
                    _, y = gt.while_loop(
                        lambda i, y: i < n,
                        lambda i, y: (i + 1, sin(y) * CHAIN_SCALE + CHAIN_SHIFT),
                        (gt.constant(0), x),
                        maximum_iterations=n,
                    )
                return tape.gradient(y, x)

        return case(chain, x, ops=n, checksum=_l1)

    if workload in ("W3", "W7"):
        xs, labels, ps = mlp_data(s["batch"], s["dims"])
        x = gt.constant(xs)
        lab = gt.constant(labels)
        params = [gt.Variable(p) for p in ps]
        w1, b1, w2, b2, w3, b3 = params
        xent = gt.nn.sparse_softmax_cross_entropy_with_logits
        opt = gt.optimizers.SGD(LEARNING_RATE)

        def mlp_step(x, lab):
            with gt.GradientTape() as tape:
                h = gt.tanh(x @ w1 + b1)
                h = gt.tanh(h @ w2 + b2)
                logits = h @ w3 + b3
                loss = gt.mean(xent(labels=lab, logits=logits))
            grads = tape.gradient(loss, params)
            opt.apply_gradients(zip(grads, params))
            return grads, tape

        if traced:  # a compiled step returns its gradients; it keeps no tape

            def mlp_step_traced(x, lab):
                return mlp_step(x, lab)[0]

            return case(mlp_step_traced, x, lab, checksum=_l1)
        return Case(
            lambda: mlp_step(x, lab), sync=lambda r: sync(r[0]), checksum=lambda r: _l1(r[0]), keep=lambda r: r[1]
        )

    if workload == "W4":
        xs, ws = deep_data(s["layers"], s["width"], s["batch"])
        x = gt.constant(xs)
        params = [gt.Variable(w) for w in ws]

        def deep(x):
            with gt.GradientTape() as tape:
                h = x
                for w in params:
                    h = gt.tanh(h @ w)
                loss = gt.sum(h)
            return tape.gradient(loss, params)

        return case(deep, x, checksum=_l1)

    if workload == "W5":
        wn, xn = jac_data(s["n"])
        w = gt.constant(wn)
        x = gt.constant(xn)

        def jac(x):
            with gt.GradientTape() as tape:
                tape.watch(x)
                y = gt.tanh(w @ x)
            return tape.jacobian(y, x)

        return case(jac, x, checksum=_l1)

    raise NotApplicable(workload)


def _traced_info(f, expected):
    """How a gt.function step ran: its tracing count and executor (a private, diagnostic read of
    its cache: a compiler that failed replays, a program that disagreed with eager runs eagerly)."""
    how = set()
    for paths in getattr(f, "_cache", {}).values():
        how.update(getattr(c, "compiled_by", "?") for c in paths)
    if getattr(f, "_eager", False):
        how = {"eager"}
    executor = ", ".join(sorted(how)) or "?"
    return {
        "tracing_count": f.experimental_get_tracing_count(),
        "executor": executor,
        "executor_expected": expected,
    }


def _sync_for(backend, on_gpu=False):
    """What waits for a step's result: JAX's asynchronous dispatch (on any device) and a GPU's queue."""
    if on_gpu and backend == "torch":
        import torch

        return lambda r: torch.cuda.synchronize()
    if backend == "cupy":
        import cupy

        return lambda r: cupy.cuda.get_current_stream().synchronize()
    if backend != "jax":
        return lambda r: None

    def sync(r):
        if isinstance(r, (list, tuple)):
            for t in r:
                sync(t)
        elif r is not None:
            r.native.block_until_ready()

    return sync
