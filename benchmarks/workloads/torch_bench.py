"""PyTorch's own autodiff: ``torch.autograd`` (eager) and ``torch.func.jacrev`` (W5)."""

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

FRAMEWORKS = ("torch.autograd", "torch.func")


def _l1(result):
    return l1(result, lambda t: t.detach().numpy())


def setup(framework, workload, cfg):
    import torch

    torch.set_num_threads(1)
    s = sizes(cfg, workload)

    if framework == "torch.func":
        if workload != "W5":
            raise NotApplicable(workload)
        from torch.func import jacrev

        wn, xn = jac_data(s["n"])
        w, x = torch.from_numpy(wn), torch.from_numpy(xn)
        f = jacrev(lambda x: torch.tanh(w @ x))
        return Case(lambda: f(x), checksum=_l1)

    if workload in ("W1", "W2", "W6"):
        n = s["ops"]
        x = torch.from_numpy(chain_start(s["shape"])).requires_grad_()
        sin = torch.sin

        def step():
            y = x
            for _ in range(n):
                y = sin(y) * CHAIN_SCALE + CHAIN_SHIFT
            (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
            return g

        return Case(step, ops=n, checksum=_l1)

    if workload in ("W3", "W7"):
        import torch.nn.functional as F

        xs, labels, ps = mlp_data(s["batch"], s["dims"])
        x, lab = torch.from_numpy(xs), torch.from_numpy(labels)
        params = [torch.from_numpy(p.copy()).requires_grad_() for p in ps]
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

        return Case(step, checksum=lambda r: _l1(r[0]), keep=lambda r: r[1])

    if workload == "W4":
        xs, ws = deep_data(s["layers"], s["width"], s["batch"])
        x = torch.from_numpy(xs)
        params = [torch.from_numpy(w).requires_grad_() for w in ws]

        def step():
            h = x
            for w in params:
                h = torch.tanh(h @ w)
            return torch.autograd.grad(h.sum(), params)

        return Case(step, checksum=_l1)

    if workload == "W5":
        from torch.autograd.functional import jacobian

        wn, xn = jac_data(s["n"])
        w, x = torch.from_numpy(wn), torch.from_numpy(xn)
        return Case(lambda: jacobian(lambda x: torch.tanh(w @ x), x), checksum=_l1)

    raise NotApplicable(workload)
