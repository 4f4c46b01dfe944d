"""Nested differentiation (issue 23, item 6): the *saddle* and *particle* problems of Siskind and
Pearlmutter in their four variants, and a Gaussian mixture's log-likelihood gradient.

    python benchmarks/nested_ad.py --quick              # ~2 min on the 2-core machine
    python benchmarks/nested_ad.py                      # more repeats
    python benchmarks/nested_ad.py --only saddle --frameworks gradtape-numpy --variants rr --profile 25
    python benchmarks/nested_ad.py --saddle-outer 64 --saddle-inner 64 --particle-outer 10   # scaled up
    python benchmarks/nested_ad.py --json raw.json --out report.md

*saddle*: ``min_x max_y f(x, y)``, ``f(x, y) = sum(x*x) - sum(y*y) + 0.5 * sum(sin(x) * y)`` (the
classic ``|x|^2 - |y|^2`` with a coupling term, so that the inner solution depends on ``x`` and the
derivative through the inner solve is not zero), x and y in R^2, both solved by gradient descent
with fixed step counts from one starting point; the outer gradient is taken through the inner
solve.  *particle*: a charged particle fired at (0, 8) with velocity (0.75, 0) under the
repulsion of charges at (10, 10 - w) and (10, 0), integrated by naive Euler (dt 0.1, the force the
gradient of the potential: the inner derivative) until it crosses the x axis; ``w`` is optimised by
gradient descent on ``x_0(t_f)^2`` (the outer derivative, through the whole trajectory).

Variants (outer mode, inner mode): ``rr`` reverse over reverse (nested ``gt.GradientTape``), ``ff``
forward over forward, ``rf`` reverse over forward, ``fr`` forward over reverse.  Forward mode is
each framework's forward-mode Jacobian, as its users write it: ``gt.jacfwd`` (the function recorded
once under a ``gt.ForwardAccumulator``, then walked forward along every basis vector) and
``torch.func.jacfwd`` (``vmap`` over ``jvp``), as ``jax.jacfwd`` would be; ``--per-component`` adds
the rows of the older form, one ``gt.ForwardAccumulator`` (one ``torch.func.jvp``) per input
component, each running the function again.  Rows: gradtape on NumPy and on PyTorch (eager),
``torch.autograd`` (reverse over reverse, ``create_graph=True``: the anchor of every variant) and
``torch.func`` (``grad`` / ``jacfwd`` nestings), all in float64 with the same step counts and
starting points.  *gmm*: the gradient of the ADBench Gaussian mixture objective (log-likelihood with full
lower-triangular inverse covariance factors and the Wishart prior; d = 20, k = 25, n = 1,000) with
respect to its three parameters, on gradtape-numpy / gradtape-torch against ``torch.autograd``
(``jax.grad`` eager as information).

Figures are medians of the process CPU time of whole solves (``--clock wall`` for wall time),
interleaved framework by framework in one process; ratios are to the anchor measured in the same
run.  Every row's answer is compared with the anchor's (max abs difference printed); a
disagreement above the tolerance makes the run exit with status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import math
import os
import platform
import pstats
import statistics
import sys
import time
import warnings

for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_k, "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # CPU figures: a CUDA build of jaxlib stays off the GPU

import numpy as np  # noqa: E402

PROBLEMS = ("saddle", "particle", "gmm", "walk")
VARIANTS = ("rr", "ff", "rf", "fr")
#: the walk cost: a first-order backward walk, and the same walk recorded by an outer tape
WALKS = ("first-order", "recorded")
FRAMEWORKS = ("gradtape-numpy", "gradtape-torch", "torch.autograd", "torch.func", "jax.grad")
#: (--before) gradtape with ForwardAccumulator.jvp by the double transposition of the tape alone, as
#: before the forward walk of issue 23: the "before" rows of the forward-mode variants
BEFORE = ("gradtape-numpy-transposed", "gradtape-torch-transposed")
#: (--per-component) forward mode as one accumulator (one ``torch.func.jvp``) per input component,
#: the function run again for each, instead of the framework's ``jacfwd``
PER_COMPONENT = ("gradtape-numpy-per-component", "gradtape-torch-per-component", "torch.func-per-component")
ANCHOR = "torch.autograd"
#: the problems each framework runs, and its variants there
SUPPORTS = {
    "gradtape-numpy": {"saddle": VARIANTS, "particle": VARIANTS, "gmm": ("r",), "walk": WALKS},
    "gradtape-torch": {"saddle": VARIANTS, "particle": VARIANTS, "gmm": ("r",), "walk": WALKS},
    "torch.autograd": {"saddle": ("rr",), "particle": ("rr",), "gmm": ("r",), "walk": WALKS},
    "torch.func": {"saddle": VARIANTS, "particle": VARIANTS},
    "jax.grad": {"gmm": ("r",)},
    "gradtape-numpy-transposed": {"saddle": ("ff", "rf", "fr"), "particle": ("ff", "rf", "fr")},
    "gradtape-torch-transposed": {"saddle": ("ff", "rf", "fr"), "particle": ("ff", "rf", "fr")},
    **{f: {"saddle": ("ff", "rf", "fr"), "particle": ("ff", "rf", "fr")} for f in PER_COMPONENT},
}

#: problem sizes: full (the default), --quick (the same sizes, fewer repeats) and --tiny (tests)
SIZES = {
    "full": {
        "saddle_outer": 16,
        "saddle_inner": 16,
        "particle_outer": 3,
        "particle_dt": 0.1,
        "gmm": (20, 25, 1000),
        "walk": 2000,
    },
    # (Euler steps of 1.0: a trajectory of 31 steps instead of 352)
    "tiny": {
        "saddle_outer": 2,
        "saddle_inner": 2,
        "particle_outer": 1,
        "particle_dt": 1.0,
        "gmm": (3, 4, 10),
        "walk": 100,
    },
}
SADDLE_START = (1.0, 0.5)
SADDLE_ETA_OUTER = 0.1
SADDLE_ETA_INNER = 0.2
PARTICLE_W0 = 0.0
PARTICLE_ETA = 0.01
PARTICLE_DT = 0.1
#: the largest max abs difference of an answer from the anchor's that counts as agreement
TOLERANCE = {"saddle": 1e-9, "particle": 1e-7, "gmm": 1e-7, "walk": 1e-9}


# ------------------------------------------------------------------------------------ the problems
def saddle(F, grad0, grad1, n_outer, n_inner):
    """Returns (x, y) concatenated: x by ``n_outer`` descent steps on ``max_y f(x, y)`` (the max by
    ``n_inner`` ascent steps, differentiated through), then y the argmax at that x."""

    def f(x, y):
        return F.sum(x * x) - F.sum(y * y) + 0.5 * F.sum(F.sin(x) * y)

    def argmax(grad, x):
        y = F.const(SADDLE_START)  # a tensor of its own: on a tape, the outer start would be x itself
        for _ in range(n_inner):
            y = y + SADDLE_ETA_INNER * grad(lambda y: f(x, y), y)
        return y

    def cost(x):
        return f(x, argmax(grad1, x))

    x = F.const(SADDLE_START)
    for _ in range(n_outer):
        x = x - SADDLE_ETA_OUTER * grad0(cost, x)
    return F.concat([x, argmax(grad0, x)])


def particle(F, grad0, grad1, n_outer, dt=PARTICLE_DT):
    """Returns w after ``n_outer`` descent steps on the squared miss distance of the trajectory."""
    c1 = F.const((10.0, 10.0))
    c2 = F.const((10.0, 0.0))
    e1 = F.const((0.0, 1.0))
    x0 = F.const((0.0, 8.0))
    xdot0 = F.const((0.75, 0.0))

    def miss(w):
        c1w = c1 - w * e1

        def potential(x):
            d1 = x - c1w
            d2 = x - c2
            return 1.0 / F.sqrt(F.sum(d1 * d1)) + 1.0 / F.sqrt(F.sum(d2 * d2))

        x, xdot = x0, xdot0
        for _ in range(100_000):
            xddot = -grad1(potential, x)
            x_new = x + dt * xdot
            if not F.positive(x_new[1]):
                break
            x, xdot = x_new, xdot + dt * xddot
        else:
            raise RuntimeError("particle: the trajectory did not cross the x axis in 100,000 Euler steps")
        dt_f = -x[1] / xdot[1]
        x_f = x + dt_f * xdot
        return x_f[0] * x_f[0]

    w = F.const((PARTICLE_W0,))
    for _ in range(n_outer):
        w = w - PARTICLE_ETA * grad0(miss, w)
    return w


def gmm_data(d, k, n, seed=0):
    """ADBench-style GMM inputs (float64): alphas (k,), means (k, d), icf (k, d + d(d-1)/2), x (n, d),
    and the index that lays out each component's Q = diag(exp(q)) + L from [exp(q), L, 0]."""
    rng = np.random.default_rng(seed)
    alphas = rng.standard_normal(k)
    means = rng.random((k, d))
    icf = rng.standard_normal((k, d + d * (d - 1) // 2)) * 0.1
    x = rng.random((n, d))
    idx = np.empty((d, d), dtype=np.int64)
    zero = d + d * (d - 1) // 2
    pos = d
    for j in range(d):
        for i in range(d):
            if i == j:
                idx[i, j] = i
            elif i > j:
                idx[i, j] = pos
                pos += 1
            else:
                idx[i, j] = zero
    idx = np.array([idx[i, j] for i in range(d) for j in range(d)], dtype=np.int64)
    return alphas, means, icf, x, idx


def gmm_objective(G, alphas, means, icf, x, idx):
    """The ADBench GMM objective (log-likelihood with the Wishart prior, gamma 1, m 0)."""
    n, d = x.shape
    k = alphas.shape[0]
    q = icf[:, :d]
    lower = icf[:, d:]
    packed = G.concat([G.exp(q), lower, G.zeros((k, 1))], axis=1)
    Q = G.reshape(G.take(packed, idx, axis=1), (k, d, d))
    xc = G.expand_dims(x, 0) - G.expand_dims(means, 1)  # (k, n, d)
    Qxc = G.matmul(xc, G.matrix_transpose(Q))  # (k, n, d): Q @ (x_i - mu_k)
    main = G.expand_dims(alphas + G.sum(q, axis=1), 1) - 0.5 * G.sum(Qxc * Qxc, axis=2)  # (k, n)
    const = -n * d * 0.5 * math.log(2 * math.pi)
    slse = G.sum(G.logsumexp(main, axis=0))
    prior = 0.5 * (G.sum(G.exp(q) * G.exp(q)) + G.sum(lower * lower))
    return const + slse - n * G.logsumexp(alphas, axis=0) + prior


# ------------------------------------------------------------------------------------ the frameworks
class GradtapeF:
    """gradtape on one backend: reverse mode by ``GradientTape``, forward mode by ``gt.jacfwd``
    (``per_component``: one ``ForwardAccumulator`` per input component; ``transposed``: that, with
    the jvp by the double transposition of the tape)."""

    def __init__(self, backend, transposed=False, per_component=False):
        import gradtape as gt

        self.transposed = transposed
        self.per_component = per_component or transposed
        if backend == "torch":
            import torch

            torch.set_num_threads(1)
        self.gt = gt
        self.backend = backend
        gt.set_backend(backend)
        self.sum, self.sin, self.sqrt = gt.sum, gt.sin, gt.sqrt

    def activate(self):
        self.gt.set_backend(self.backend)

    def const(self, v):
        return self.gt.constant(np.asarray(v, dtype=np.float64), dtype=self.gt.float64)

    def concat(self, ts):
        return self.gt.concat(ts, axis=0)

    def positive(self, t):
        return bool(t > 0)

    def to_numpy(self, t):
        return np.asarray(t.numpy(), dtype=np.float64)

    def grad_r(self, f, x):
        gt = self.gt
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        return tape.gradient(y, x, unconnected_gradients="zero")

    def grad_f(self, f, x):
        gt = self.gt
        if not self.per_component:
            return gt.jacfwd(f)(x)
        n = x.shape[0]
        basis = np.eye(n)
        parts = []
        for i in range(n):
            with gt.ForwardAccumulator(x, self.const(basis[i])) as acc:
                y = f(x)
            if self.transposed:
                parts.append(acc._transposed([y], "zero")[0])
            else:
                parts.append(acc.jvp(y, unconnected_gradients="zero"))
        return gt.stack(parts)

    def walk_setup(self, n, recorded):
        """W1's chain (``y = sin(y) * 1.0001 + 1e-6``, float64 (1,)); the time of its backward walk
        alone, first-order or inside an outer tape that watches the input (recorded)."""
        gt = self.gt

        def step():
            x = self.const((0.5,))
            with gt.GradientTape() as outer:
                outer.watch(x)
                with gt.GradientTape() as tape:
                    tape.watch(x)
                    y = _chain(x, n, gt.sin)
                if not recorded:
                    outer._pop()  # (the walk is not recorded: a first-order one)
                t0 = time.process_time()
                g = tape.gradient(y, x)
                return g, time.process_time() - t0

        return step

    # the GMM
    def gmm_setup(self, data):
        gt = self.gt
        alphas, means, icf, x, idx = data
        params = [self.const(alphas), self.const(means), self.const(icf)]
        xs = self.const(x)
        ix = gt.constant(idx)
        G = _gt_gmm_namespace()

        def step():
            with gt.GradientTape() as tape:
                tape.watch(params)
                loss = gmm_objective(G, *params, xs, ix)
            return tape.gradient(loss, params)

        return step


def _gt_gmm_namespace():
    import gradtape as gt

    class G:
        concat = staticmethod(gt.concat)
        exp = staticmethod(gt.exp)
        reshape = staticmethod(gt.reshape)
        take = staticmethod(gt.take)
        expand_dims = staticmethod(gt.expand_dims)
        matmul = staticmethod(gt.matmul)
        matrix_transpose = staticmethod(gt.linalg.matrix_transpose)
        sum = staticmethod(gt.sum)

        @staticmethod
        def zeros(shape):
            return gt.zeros(shape, dtype=gt.float64)

        @staticmethod
        def logsumexp(t, axis):
            return gt.reduce_logsumexp(t, axis=axis)

    return G


class TorchAutogradF:
    """torch.autograd: reverse over reverse, ``create_graph=True`` where an outer derivative needs it."""

    def __init__(self):
        import torch

        torch.set_num_threads(1)
        self.torch = torch
        self.sum, self.sin, self.sqrt = torch.sum, torch.sin, torch.sqrt
        self.depth = 0

    def activate(self):
        pass

    def const(self, v):
        return self.torch.tensor(v, dtype=self.torch.float64)

    def concat(self, ts):
        return self.torch.cat(ts)

    def positive(self, t):
        return bool(t > 0)

    def to_numpy(self, t):
        return t.detach().numpy().astype(np.float64)

    def grad_r(self, f, x):
        torch = self.torch
        if not x.requires_grad:
            x = x.detach().requires_grad_(True)
        self.depth += 1
        try:
            y = f(x)
            (g,) = torch.autograd.grad(y, x, create_graph=self.depth > 1, allow_unused=True)
        finally:
            self.depth -= 1
        return torch.zeros_like(x) if g is None else g

    def grad_f(self, f, x):
        raise NotImplementedError("torch.autograd runs reverse over reverse only")

    def gmm_setup(self, data):
        torch = self.torch
        alphas, means, icf, x, idx = data
        params = [self.const(v) for v in (alphas, means, icf)]
        xs = self.const(x)
        ix = torch.tensor(idx)

        def step():
            ps = [p.detach().requires_grad_(True) for p in params]
            loss = gmm_objective(_torch_gmm_namespace(), *ps, xs, ix)
            return torch.autograd.grad(loss, ps)

        return step

    def walk_setup(self, n, recorded):
        torch = self.torch

        def step():
            x = self.const((0.5,)).requires_grad_(True)
            y = _chain(x, n, torch.sin)
            t0 = time.process_time()
            (g,) = torch.autograd.grad(y, x, create_graph=recorded)
            return g, time.process_time() - t0

        return step


def _torch_gmm_namespace():
    import torch

    class G:
        exp = staticmethod(torch.exp)
        reshape = staticmethod(torch.reshape)
        matmul = staticmethod(torch.matmul)

        @staticmethod
        def concat(ts, axis):
            return torch.cat(ts, dim=axis)

        @staticmethod
        def take(t, idx, axis):
            return torch.index_select(t, axis, idx)

        @staticmethod
        def expand_dims(t, axis):
            return torch.unsqueeze(t, axis)

        @staticmethod
        def matrix_transpose(t):
            return t.mT

        @staticmethod
        def sum(t, axis=None):
            return torch.sum(t) if axis is None else torch.sum(t, dim=axis)

        @staticmethod
        def zeros(shape):
            return torch.zeros(shape, dtype=torch.float64)

        @staticmethod
        def logsumexp(t, axis):
            return torch.logsumexp(t, dim=axis)

    return G


def _chain(x, n, sin):
    y = x
    for _ in range(n):
        y = sin(y) * 1.0001 + 1e-6
    return y


class TorchFuncF(TorchAutogradF):
    """torch.func: ``grad`` for reverse mode, ``jacfwd`` for forward mode (``per_component``: one
    ``jvp`` per input component)."""

    def __init__(self, per_component=False):
        super().__init__()
        self.per_component = per_component

    def grad_r(self, f, x):
        return self.torch.func.grad(f)(x)

    def grad_f(self, f, x):
        torch = self.torch
        if not self.per_component:
            return torch.func.jacfwd(f)(x)
        n = x.shape[0]
        eye = torch.eye(n, dtype=torch.float64)
        return torch.stack([torch.func.jvp(f, (x,), (eye[i],))[1] for i in range(n)])


class JaxF:
    """``jax.grad``, eager (not jitted), for the GMM only."""

    def __init__(self):
        import jax

        jax.config.update("jax_enable_x64", True)
        self.jax = jax

    def activate(self):
        pass

    def to_numpy(self, t):
        return np.asarray(t, dtype=np.float64)

    def gmm_setup(self, data):
        jax = self.jax
        import jax.numpy as jnp
        from jax.scipy.special import logsumexp

        class G:
            exp = staticmethod(jnp.exp)
            reshape = staticmethod(jnp.reshape)
            matmul = staticmethod(jnp.matmul)
            concat = staticmethod(lambda ts, axis: jnp.concatenate(ts, axis=axis))
            take = staticmethod(lambda t, idx, axis: jnp.take(t, idx, axis=axis))
            expand_dims = staticmethod(jnp.expand_dims)
            matrix_transpose = staticmethod(jnp.matrix_transpose)
            sum = staticmethod(lambda t, axis=None: jnp.sum(t, axis=axis))
            zeros = staticmethod(lambda shape: jnp.zeros(shape, dtype=jnp.float64))
            logsumexp = staticmethod(lambda t, axis: logsumexp(t, axis=axis))

        alphas, means, icf, x, idx = data
        params = [jnp.asarray(v, dtype=jnp.float64) for v in (alphas, means, icf)]
        xs = jnp.asarray(x, dtype=jnp.float64)
        ix = jnp.asarray(idx)
        g = jax.grad(lambda a, m, i: gmm_objective(G, a, m, i, xs, ix), argnums=(0, 1, 2))

        def step():
            out = g(*params)
            for o in out:
                o.block_until_ready()
            return out

        return step


def make(framework):
    if framework.startswith("gradtape-"):
        return GradtapeF(
            framework.split("-")[1],
            transposed=framework.endswith("-transposed"),
            per_component=framework.endswith("-per-component"),
        )
    if framework == "torch.autograd":
        return TorchAutogradF()
    if framework in ("torch.func", "torch.func-per-component"):
        return TorchFuncF(per_component=framework.endswith("-per-component"))
    if framework == "jax.grad":
        return JaxF()
    raise ValueError(framework)


def available(framework):
    """None, or why the framework cannot run here."""
    import importlib.util

    need = {"gradtape-torch": "torch", "gradtape-torch-transposed": "torch", "torch.autograd": "torch"}
    need.update({"torch.func": "torch", "jax.grad": "jax"})
    need.update({"gradtape-torch-per-component": "torch", "torch.func-per-component": "torch"})
    mod = need.get(framework)
    if mod and importlib.util.find_spec(mod) is None:
        return f"{mod} is not installed"
    return None


def solver(F, problem, variant, size):
    """A function running one whole solve, returning its answer as a NumPy array."""
    if problem == "walk":
        step = F.walk_setup(size["walk"], variant == "recorded")

        def timed():
            g, seconds = step()
            return F.to_numpy(g), seconds

        timed.self_timed = True  # type: ignore[attr-defined]
        return timed
    if problem == "gmm":
        step = F.gmm_setup(gmm_data(*size["gmm"]))
        return lambda: np.concatenate([F.to_numpy(g).ravel() for g in step()])
    grads = {"r": F.grad_r, "f": F.grad_f}
    g0, g1 = grads[variant[0]], grads[variant[1]]
    if problem == "saddle":
        return lambda: F.to_numpy(saddle(F, g0, g1, size["saddle_outer"], size["saddle_inner"]))
    return lambda: F.to_numpy(particle(F, g0, g1, size["particle_outer"], size["particle_dt"]))


# ------------------------------------------------------------------------------------ timing
def _clock(kind):
    return time.process_time if kind == "cpu" else time.perf_counter


def time_cell(run, clock, budget, max_reps):
    """(answer, times): the first call is timed too; more calls until ``budget`` seconds are spent
    (at most ``max_reps``); with three or more, the first (warm-up) is dropped from the figure."""
    tick = _clock(clock)
    times = []
    answer = None
    while True:
        t0 = tick()
        answer = run()
        times.append(tick() - t0)
        if getattr(run, "self_timed", False):  # (the walk alone: the run times it)
            answer, times[-1] = answer
        if len(times) >= max_reps or sum(times) >= budget:
            break
    return answer, times


def median_of(times):
    return statistics.median(times[1:] if len(times) >= 3 else times)


def fmt(v):
    if v is None:
        return "—"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (~2 min in all)")
    ap.add_argument("--tiny", action="store_true", help="tiny problems: tests the harness; figures meaningless")
    ap.add_argument("--only", default=",".join(PROBLEMS), help="problems: saddle,particle,gmm")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument(
        "--before", action="store_true", help="add the rows of gradtape's jvp by double transposition alone (before)"
    )
    ap.add_argument(
        "--per-component",
        action="store_true",
        help="add the rows of forward mode as one accumulator (torch.func.jvp) per input component",
    )
    ap.add_argument("--saddle-outer", type=int, help="outer descent steps of saddle")
    ap.add_argument("--saddle-inner", type=int, help="inner ascent steps of saddle")
    ap.add_argument("--particle-outer", type=int, help="outer descent steps of particle")
    ap.add_argument("--gmm", help="d,k,n of the GMM (default 20,25,1000)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--budget", type=float, help="seconds of repeats per cell (default 2, --quick 0.5)")
    ap.add_argument("--max-reps", type=int, help="repeats per cell at most (default 7, --quick 3)")
    ap.add_argument("--out", help="also write the report (markdown) there")
    ap.add_argument("--json", help="write every figure there")
    ap.add_argument("--perturb", default="", help=argparse.SUPPRESS)  # (tests: shift these variants' answers)
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile one more solve per cell: top N")
    a = ap.parse_args(argv)

    size = dict(SIZES["tiny" if a.tiny else "full"])
    for key in ("saddle_outer", "saddle_inner", "particle_outer"):
        if getattr(a, key) is not None:
            size[key] = getattr(a, key)
    if a.gmm:
        size["gmm"] = tuple(int(v) for v in a.gmm.split(","))
    budget = a.budget if a.budget is not None else (0.5 if a.quick or a.tiny else 2.0)
    max_reps = a.max_reps if a.max_reps is not None else (1 if a.tiny else 3 if a.quick else 7)
    problems = [p for p in a.only.split(",") if p]
    frameworks = [f for f in a.frameworks.split(",") if f]
    if a.before:
        frameworks += [f for f in BEFORE if f.replace("-transposed", "") in frameworks]
    if a.per_component:
        frameworks += [f for f in PER_COMPONENT if f.replace("-per-component", "") in frameworks]
    variants = [v for v in a.variants.split(",") if v]
    for p in problems:
        if p not in PROBLEMS:
            ap.error(f"unknown problem {p!r}; known: {', '.join(PROBLEMS)}")
    for f in frameworks:
        if f not in FRAMEWORKS + BEFORE + PER_COMPONENT:
            ap.error(f"unknown framework {f!r}; known: {', '.join(FRAMEWORKS)}")
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r}; known: {', '.join(VARIANTS)}")

    warnings.simplefilter("ignore")  # gradtape's persistent-tape note; torch's scalar conversion
    started = time.time()
    unavailable = {f: why for f in frameworks if (why := available(f))}
    made = {f: make(f) for f in frameworks if f not in unavailable}
    results = []
    profiles = []
    for problem in problems:
        for f in frameworks:
            if f in unavailable:
                continue
            for v in SUPPORTS[f].get(problem, ()):
                if v in VARIANTS and v not in variants:
                    continue
                F = made[f]
                F.activate()
                if problem == "gmm" and not a.tiny:
                    solver(F, problem, v, size)()  # warm-up (jax.grad compiles each op for these shapes)
                elif not a.tiny:
                    solver(F, problem, v, SIZES["tiny"])()  # warm-up (lazy imports, first-call set-up)
                run = solver(F, problem, v, size)
                print(f"{problem} {f} {v} ...", file=sys.stderr, flush=True)
                answer, times = time_cell(run, a.clock, budget, max_reps)
                rec = {"problem": problem, "framework": f, "variant": v, "times_s": times}
                rec["median_s"] = median_of(times)
                if v in a.perturb.split(","):
                    answer = answer + 1e-3
                rec["answer"] = answer.tolist()
                results.append(rec)
                print(f"  {rec['median_s']:.4g} s ({len(times)} runs)", file=sys.stderr, flush=True)
                if a.profile:
                    pr = cProfile.Profile()
                    pr.enable()
                    run()
                    pr.disable()
                    s = io.StringIO()
                    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(a.profile)
                    profiles.append((f"{problem} {f} {v}", s.getvalue()))

    # the answers against the anchor's (or, without it, against the first row of the problem)
    failed = []
    for problem in problems:
        recs = [r for r in results if r["problem"] == problem]
        if not recs:
            continue
        ref = next((r for r in recs if r["framework"] == ANCHOR), recs[0])
        for r in recs:
            diff = float(np.max(np.abs(np.asarray(r["answer"]) - np.asarray(ref["answer"]))))
            if problem == "gmm":
                diff /= max(1.0, float(np.max(np.abs(ref["answer"]))))
            r["max_abs_diff"] = diff
            r["reference"] = f"{ref['framework']} {ref['variant']}"
            if not diff <= TOLERANCE[problem]:
                failed.append(r)
        for r in recs:
            r["ratio"] = r["median_s"] / ref["median_s"] if ref["framework"] == ANCHOR else None

    report = _report(a, size, problems, frameworks, variants, results, unavailable, started)
    print(report)
    for name, text in profiles:
        print(f"\n### cProfile: {name}\n\n```text\n{text.strip()}\n```")
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(report + "\n")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"size": size, "clock": a.clock, "results": results, "machine": _machine()}, fh, indent=1)
    if failed:
        for r in failed:
            print(
                f"ANSWERS DISAGREE: {r['problem']} {r['framework']} {r['variant']}: max abs difference "
                f"{r['max_abs_diff']:.3g} from {r['reference']} (tolerance {TOLERANCE[r['problem']]:g})",
                file=sys.stderr,
            )
        return 1
    return 0


def _machine():
    import importlib.metadata as md

    libs = {}
    for name in ("numpy", "torch", "jax", "gradtape"):
        with contextlib.suppress(md.PackageNotFoundError):
            libs[name] = md.version(name)
    return {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(), **libs}


def _report(a, size, problems, frameworks, variants, results, unavailable, started):
    lines = []
    m = _machine()
    lines.append(
        f"- {m['platform']}, {m['cpus']} CPUs, Python {m['python']}; "
        + ", ".join(f"{k} {v}" for k, v in m.items() if k not in ("python", "platform", "cpus"))
    )
    lines.append(
        f"- saddle: {size['saddle_outer']} outer × {size['saddle_inner']} inner steps; particle: "
        f"{size['particle_outer']} outer step(s), each through a whole Euler trajectory "
        f"(dt {size['particle_dt']}); gmm: d, k, n = "
        f"{', '.join(map(str, size['gmm']))}; clock: {a.clock} (median of whole solves); run took "
        f"{time.time() - started:.0f} s; load average at end {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    lines.append("")
    nested = [p for p in problems if p in ("saddle", "particle")]
    if nested:
        lines.append("| framework | variant | " + " | ".join(f"{p} (s)" for p in nested) + " |")
        lines.append("|---|---|" + "---|" * len(nested))
        for f in frameworks:
            if f in unavailable:
                lines.append(f"| `{f}` | — | " + " | ".join(f"unavailable: {unavailable[f]}" for _ in nested) + " |")
                continue
            for v in VARIANTS:
                cells = []
                for p in nested:
                    r = next((r for r in results if (r["problem"], r["framework"], r["variant"]) == (p, f, v)), None)
                    cells.append(_cell(r))
                if any(c != "—" for c in cells):
                    lines.append(f"| `{f}` | {v} | " + " | ".join(cells) + " |")
        lines.append("")
        lines.append(
            "In parentheses: the ratio to `torch.autograd`'s reverse-over-reverse solve of the same problem "
            "in this run, and the max abs difference of the answer from it."
        )
        lines.append("")
    if "walk" in problems:
        n = size["walk"]
        lines.append("| framework | first-order walk (µs/op) | recorded walk (µs/op) | recorded / first-order |")
        lines.append("|---|---|---|---|")
        for f in frameworks:
            w = {r["variant"]: r for r in results if r["problem"] == "walk" and r["framework"] == f}
            if len(w) == 2:
                a1, a2 = (w[v]["median_s"] / (3 * n) * 1e6 for v in WALKS)
                lines.append(f"| `{f}` | {fmt(a1)} | {fmt(a2)} | {a2 / a1:.2f}× |")
        lines.append("")
        lines.append(
            f"The backward walk alone over W1's {n:,}-step chain (three ops a step, float64 (1,)), per op: "
            "first-order, and recorded by an outer tape that watches the input (gradtape: the rules run on "
            "Tensors; torch.autograd: `create_graph=True`)."
        )
        lines.append("")
    if "gmm" in problems:
        lines.append("| framework | gmm gradient (ms) |")
        lines.append("|---|---|")
        for r in results:
            if r["problem"] == "gmm":
                lines.append(f"| `{r['framework']}` | {_cell(r, 1e3)} |")
        lines.append("")
    return "\n".join(lines)


def _cell(r, scale=1.0):
    if r is None:
        return "—"
    ratio = "" if r.get("ratio") is None else f"{r['ratio']:.2f}×, "
    return f"{fmt(r['median_s'] * scale)} ({ratio}Δ {r.get('max_abs_diff', float('nan')):.1g})"


if __name__ == "__main__":
    sys.exit(main())
