"""PyTorch's own autodiff: ``torch.autograd`` (eager), ``torch.func.jacrev`` (W5), and the eager
step in ``torch.compile`` (W1-W4).

``torch.compile``: the ``torch.autograd`` step itself -- forward, ``torch.autograd.grad``, the SGD
update under ``no_grad`` -- in ``torch.compile(fullgraph=True)`` with dynamo's
``trace_autograd_ops`` on, so the whole step is one inductor graph (without it dynamo breaks the
graph at ``torch.autograd.grad``); W3 returns its loss detached, as a compiled graph must.  Its
first call (dynamo + AOTAutograd + inductor) is the worker's ``first_call_s``; the row says why
when inductor does not work here.
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

FRAMEWORKS = ("torch.autograd", "torch.func", "torch.compile")


def _l1(result):
    return l1(result, lambda t: t.detach().cpu().numpy())


def setup(framework, workload, cfg):
    import torch

    torch.set_num_threads(1)
    s = sizes(cfg, workload)
    device = "cpu"
    sync = Case.sync
    if cfg.get("device") == "gpu":
        if not torch.cuda.is_available():
            raise Unavailable(f"torch {torch.__version__} sees no CUDA GPU here")
        device = "cuda"

        def sync(r):
            torch.cuda.synchronize()

    def tensor(a):
        """``a`` (NumPy) on the benchmark's device."""
        return torch.from_numpy(a).to(device)

    if framework == "torch.func":
        if workload != "W5":
            raise NotApplicable(workload)
        from torch.func import jacrev

        wn, xn = jac_data(s["n"])
        w, x = tensor(wn), tensor(xn)
        f = jacrev(lambda x: torch.tanh(w @ x))
        return Case(lambda: f(x), sync=sync, checksum=_l1)

    if framework == "torch.compile":
        if workload not in ("W1", "W2", "W3", "W4"):
            raise NotApplicable(workload)
        why = torch_compile_problem()
        if why:
            raise Unavailable(why)
        import torch._dynamo

        if not hasattr(torch._dynamo.config, "trace_autograd_ops"):
            raise Unavailable(f"torch {torch.__version__}: dynamo has no trace_autograd_ops (graph breaks)")
        torch._dynamo.config.trace_autograd_ops = True
        eager = setup("torch.autograd", workload, cfg)
        step = eager.step
        if workload == "W3":
            raw = step

            def step():
                grads, loss = raw()
                return grads, loss.detach()

        compiled = torch.compile(step, fullgraph=True, dynamic=False)
        return record_first_call_warnings(Case(compiled, sync=sync, ops=eager.ops, checksum=eager.checksum))

    if workload in ("W1", "W2", "W6"):
        n = s["ops"]
        x = tensor(chain_start(s["shape"])).requires_grad_()
        sin = torch.sin

        def step():
            y = x
            for _ in range(n):
                y = sin(y) * CHAIN_SCALE + CHAIN_SHIFT
            (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
            return g

        return Case(step, sync=sync, ops=n, checksum=_l1)

    if workload in ("W3", "W7"):
        import torch.nn.functional as F

        xs, labels, ps = mlp_data(s["batch"], s["dims"])
        x, lab = tensor(xs), tensor(labels)
        params = [tensor(p.copy()).requires_grad_() for p in ps]
        w1, b1, w2, b2, w3, b3 = params

        def step():
            h = torch.tanh(x @ w1 + b1)
            h = torch.tanh(h @ w2 + b2)
            logits = h @ w3 + b3
            loss = F.cross_entropy(logits, lab)
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                for p, g in zip(params, grads):
                    p.sub_(g, alpha=LEARNING_RATE)  # what torch.optim.SGD does
            return grads, loss

        return Case(step, sync=sync, checksum=lambda r: _l1(r[0]), keep=lambda r: r[1])

    if workload == "W4":
        xs, ws = deep_data(s["layers"], s["width"], s["batch"])
        x = tensor(xs)
        params = [tensor(w).requires_grad_() for w in ws]

        def step():
            h = x
            for w in params:
                h = torch.tanh(h @ w)
            return torch.autograd.grad(h.sum(), params)

        return Case(step, sync=sync, checksum=_l1)

    if workload == "W5":
        from torch.autograd.functional import jacobian

        wn, xn = jac_data(s["n"])
        w, x = tensor(wn), tensor(xn)
        return Case(lambda: jacobian(lambda x: torch.tanh(w @ x), x), sync=sync, checksum=_l1)

    raise NotApplicable(workload)
