"""The cost of a Hessian-vector product (issue 24, item 5): ``gt.hvp`` against a gradient, on the
W3 model (784-512-512-10 tanh MLP, batch 128, mean sparse softmax cross-entropy, float32), beside
the anchors ``jax.jvp(jax.grad)`` and ``torch.func.jvp(torch.func.grad)``.

    python benchmarks/hvp.py                 # every installed row, ~1.5 min on the 2-core machine
    python benchmarks/hvp.py --quick         # fewer repeats
    python benchmarks/hvp.py --frameworks gradtape-numpy --profile 25   # + cProfile of one HVP
    python benchmarks/hvp.py --tiny --json raw.json                      # the harness (tests/test_benchmarks_smoke.py)

Each row times, in one process, interleaved repeat by repeat, the gradient of the loss with respect
to the six parameters and the HVP along a fixed random direction (forward over reverse for every
row: ``gt.hvp``; ``jax.jvp`` of ``jax.grad``, eager and under ``jax.jit``; ``torch.func.jvp`` of
``torch.func.grad``).  The figure is the median of the process CPU time per call (``--clock wall``
for wall time); the ratio HVP / gradient is the row's own.  The target is gt.hvp <= 3x a gradient.
Every row's HVP is compared with the first row's (max relative difference; above 1e-3 in float32
the run exits 1).  A second table times ``gt.hessian`` (``jacrev(jacrev)``) beside ``jacfwd(jacrev)``
(JAX's composition) on the gradtape rows (``--hessian 30,100``: the parameter counts).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import sys
import time

for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_k, "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # CPU figures: a CUDA build of jaxlib stays off the GPU

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads.common import SIZES, mlp_data  # noqa: E402

FRAMEWORKS = ("gradtape-numpy", "gradtape-torch", "torch.func", "jax", "jax.jit")
TOLERANCE = 1e-3


def _direction(params, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.shape).astype(np.float32) / 10 for p in params]


def _gradtape(backend, xs, labels, ps, vs):
    import gradtape as gt

    gt.set_backend(backend)
    x, lab = gt.constant(xs), gt.constant(labels)
    params = [gt.constant(p) for p in ps]
    v = [gt.constant(a) for a in vs]
    xent = gt.nn.sparse_softmax_cross_entropy_with_logits

    def loss(params):
        w1, b1, w2, b2, w3, b3 = params
        h = gt.tanh(x @ w1 + b1)
        h = gt.tanh(h @ w2 + b2)
        return gt.mean(xent(labels=lab, logits=h @ w3 + b3))

    grad = gt.grad(loss)
    return (
        lambda: grad(params),
        lambda: gt.hvp(loss, (params,), (v,))[0],
        lambda r: [t.numpy() for t in r],
    )


def _torch_func(xs, labels, ps, vs):
    import torch

    torch.set_num_threads(1)
    x, lab = torch.tensor(xs), torch.tensor(labels)
    params = [torch.tensor(p) for p in ps]
    v = [torch.tensor(a) for a in vs]

    def loss(params):
        w1, b1, w2, b2, w3, b3 = params
        h = torch.tanh(x @ w1 + b1)
        h = torch.tanh(h @ w2 + b2)
        return torch.nn.functional.cross_entropy(h @ w3 + b3, lab)

    grad = torch.func.grad(loss)
    return (
        lambda: grad(params),
        lambda: torch.func.jvp(grad, (params,), (v,))[1],
        lambda r: [t.detach().numpy() for t in r],
    )


def _jax(xs, labels, ps, vs, jit):
    import jax
    import jax.numpy as jnp

    x, lab = jnp.asarray(xs), jnp.asarray(labels)
    params = [jnp.asarray(p) for p in ps]
    v = [jnp.asarray(a) for a in vs]

    def loss(params):
        w1, b1, w2, b2, w3, b3 = params
        h = jnp.tanh(x @ w1 + b1)
        h = jnp.tanh(h @ w2 + b2)
        logp = jax.nn.log_softmax(h @ w3 + b3)
        return -jnp.mean(jnp.take_along_axis(logp, lab[:, None], axis=1))

    grad = jax.grad(loss)

    def hvp(params, v):
        return jax.jvp(grad, (params,), (v,))[1]

    if jit:
        grad, hvp = jax.jit(grad), jax.jit(hvp)

    def ready(r):
        return jax.block_until_ready(r)

    return (
        lambda: ready(grad(params)),
        lambda: ready(hvp(params, v)),
        lambda r: [np.asarray(t) for t in r],
    )


def _hessians(backend, n, repeats, clock):
    """Median times of ``gt.hessian`` (``jacrev(jacrev)``) and of ``jacfwd(jacrev)``, the composition
    JAX's ``hessian`` uses, for a tanh layer's loss in ``n`` float64 parameters; and their largest
    difference."""
    import gradtape as gt

    gt.set_backend(backend)
    rng = np.random.default_rng(4)
    a = gt.constant(rng.standard_normal((n, n)) / n, dtype=gt.float64)
    x = gt.constant(rng.standard_normal((16, n)), dtype=gt.float64)
    w = gt.constant(rng.standard_normal(n), dtype=gt.float64)

    def f(w):
        return gt.mean(gt.tanh(x @ (a * w[:, None])) ** 2) + gt.sum(gt.sin(w))

    ways = {"jacrev(jacrev) = gt.hessian": gt.hessian(f), "jacfwd(jacrev)": gt.jacfwd(gt.jacrev(f))}
    res = {k: h(w).numpy() for k, h in ways.items()}
    times = {k: [] for k in ways}
    for _ in range(repeats):
        for k, h in ways.items():
            t0 = clock()
            h(w)
            times[k].append(clock() - t0)
    diff = float(np.max(np.abs(res["jacfwd(jacrev)"] - res["jacrev(jacrev) = gt.hessian"])))
    return {k: statistics.median(v) for k, v in times.items()}, diff


def available(framework):
    """None, or why the row cannot run here."""
    import importlib.util

    need = {"gradtape-torch": "torch", "torch.func": "torch", "jax": "jax", "jax.jit": "jax"}.get(framework)
    if need and importlib.util.find_spec(need) is None:
        return f"{need} is not installed"
    return None


def setup(framework, data):
    if framework.startswith("gradtape-"):
        return _gradtape(framework.split("-", 1)[1], *data)
    if framework == "torch.func":
        return _torch_func(*data)
    return _jax(*data, jit=framework == "jax.jit")


def _clock(kind):
    return time.process_time if kind == "cpu" else time.perf_counter


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS), help="rows, comma-separated")
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--tiny", action="store_true", help="W3's tiny sizes: tests the harness (numbers meaningless)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats per row and kind")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--profile", type=int, default=0, help="print cProfile's top N of one HVP per gradtape row")
    ap.add_argument(
        "--hessian",
        default="30,100",
        help="parameter counts for the Hessian compositions' table (gradtape rows; '' for none)",
    )
    ap.add_argument("--json", help="write every repeat here")
    ap.add_argument("--out", help="write the report here too")
    args = ap.parse_args(argv)

    size = SIZES["tiny" if args.tiny else "full"]["W3"]
    xs, labels, ps = mlp_data(size["batch"], size["dims"])
    data = (xs, labels, ps, _direction(ps))
    repeats = args.repeats or (3 if args.tiny else 7 if args.quick else 21)
    clock = _clock(args.clock)

    rows, skipped = {}, {}
    for fw in [f.strip() for f in args.frameworks.split(",") if f.strip()]:
        if fw not in FRAMEWORKS:
            ap.error(f"unknown framework {fw!r}; choose from {', '.join(FRAMEWORKS)}")
        why = available(fw)
        if why:
            skipped[fw] = why
            continue
        grad, hvp, to_np = setup(fw, data)
        for _ in range(2):  # warm-up (and JAX's compilation)
            grad()
            answer = hvp()
        rows[fw] = {"grad": grad, "hvp": hvp, "answer": [a.astype(np.float64) for a in to_np(answer)]}

    times = {fw: {"grad": [], "hvp": []} for fw in rows}
    for _ in range(repeats):
        for fw, r in rows.items():
            for kind in ("grad", "hvp"):
                t0 = clock()
                r[kind]()
                times[fw][kind].append(clock() - t0)

    first = next(iter(rows), None)
    lines = [
        f"W3 HVP cost: {size['dims']} tanh MLP, batch {size['batch']}, float32; median {args.clock} time of "
        f"{repeats} repeats; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "",
        f"| framework | gradient (ms) | HVP (ms) | HVP / gradient | max rel. diff. vs `{first}` |",
        "|---|---|---|---|---|",
    ]
    record = {"size": size, "repeats": repeats, "clock": args.clock, "rows": {}, "skipped": skipped}
    bad = False
    for fw, r in rows.items():
        g, h = statistics.median(times[fw]["grad"]), statistics.median(times[fw]["hvp"])
        ref = rows[first]["answer"]
        diff = max(float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) + 1e-30)) for a, b in zip(r["answer"], ref))
        bad |= diff > TOLERANCE
        lines.append(f"| `{fw}` | {g * 1e3:.2f} | {h * 1e3:.2f} | {h / g:.2f}× | {diff:.1e} |")
        record["rows"][fw] = {"grad_s": times[fw]["grad"], "hvp_s": times[fw]["hvp"], "max_rel_diff": diff}
    for fw, why in skipped.items():
        lines.append(f"| `{fw}` | — | — | — | not run: {why} |")
    sizes = [int(k) for k in args.hessian.split(",") if k.strip()] if args.hessian else []
    if args.tiny:
        sizes = [min(k, 8) for k in sizes[:1]]
    hess_rows = [fw for fw in rows if fw.startswith("gradtape-")]
    if sizes and hess_rows:
        lines += [
            "",
            "Hessian of a tanh layer's loss in n float64 parameters (median ms; max abs difference):",
            "",
            "| framework | n | `gt.hessian` = jacrev(jacrev) | jacfwd(jacrev) | difference |",
            "|---|---|---|---|---|",
        ]
        record["hessian"] = {}
        for fw in hess_rows:
            for n in sizes:
                t, diff = _hessians(fw.split("-", 1)[1], n, max(3, repeats // 3), clock)
                bad |= diff > 1e-9
                rev, fwd = t["jacrev(jacrev) = gt.hessian"], t["jacfwd(jacrev)"]
                lines.append(f"| `{fw}` | {n} | {rev * 1e3:.1f} | {fwd * 1e3:.1f} | {diff:.1e} |")
                record["hessian"][f"{fw} n={n}"] = {
                    "jacrev_jacrev_s": rev,
                    "jacfwd_jacrev_s": fwd,
                    "max_abs_diff": diff,
                }
    report = "\n".join(lines)
    print(report)

    if args.profile:
        for fw, r in rows.items():
            if fw.startswith("gradtape-"):
                pr = cProfile.Profile()
                pr.enable()
                r["hvp"]()
                pr.disable()
                s = io.StringIO()
                pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(args.profile)
                print(f"\ncProfile of one HVP, {fw}:\n{s.getvalue()}")
    if args.out:
        with open(args.out, "w") as f:
            f.write(report + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    if bad:
        print(f"\nan HVP differs from `{first}`'s by more than {TOLERANCE} (relative): wrong numbers", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
