"""The checks run on every (op, case): what ``gradtape conformance`` does for one sample call.

For a differentiable op, one case of its domain is drawn once (a seeded generator per op and case,
so every run and every backend sees the same numbers), a random cotangent ``w`` is drawn for each
floating output, and :func:`gradtape.check_gradients` is run on ``L = Re(sum(conj(w) * op(...)))``:
gradtape on each backend, each library's own autodiff of the same forward, finite differences in
float64, every pair compared (kinks reported, not failed).  Ops whose rule is itself made of
differentiable ops are also checked at second order (:func:`gradtape.testing.check_case`).
Non-differentiable ops get a forward check: the same values on every backend.  Arguments go through
their ``Arg.via`` maps and results through the case's ``map_outputs`` (see :mod:`gradtape.domains`)
in every check, so each method sees the same function.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np

import gradtape as gt
from gradtape import registry
from gradtape.crosscheck import TOLERANCES, native_method_name
from gradtape.testing import case_leaves, case_outputs, check_case, flat_outputs

__all__ = ["CaseResult", "check_case_everywhere", "known_failures", "rng_for"]

_KNOWN_DIR = Path(__file__).with_name("known_failures")


def rng_for(op_name, index, seed=0):
    """A generator seeded by the op's name and the case's index (stable across runs)."""
    h = int.from_bytes(hashlib.sha256(f"{op_name}:{index}:{seed}".encode()).digest()[:8], "little")
    return np.random.default_rng(h)


def known_failures(backend):
    """``{op_name: reason}`` from ``known_failures/<backend>.txt`` (``op: reason`` per line)."""
    path = _KNOWN_DIR / f"{backend}.txt"
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, reason = line.partition(":")
                out[name.strip()] = reason.strip() or "no reason given"
    return out


@dataclasses.dataclass
class CaseResult:
    """One case of one op: per backend, pass/fail and the largest error seen there."""

    op: str
    case: str
    passed: dict  # backend -> bool
    max_err: dict  # backend -> float (largest relative error involving that backend)
    problems: list
    kinds: tuple = ()  # which checks ran: "grad", "native", "order2", "forward"


def _draw(case, rng, dtype):
    values, kwargs = case.draw(rng, dtype="float64")
    leaves, flags, rebuild = case_leaves(case, values)
    leaves = [np.asarray(a) for a in leaves]
    if dtype == "float32":
        leaves = [
            a.astype(np.complex64 if a.dtype.kind == "c" else np.float32) if a.dtype.kind in "fc" else a for a in leaves
        ]
    return leaves, flags, rebuild, kwargs


def check_case_everywhere(opdef, case, index, backends, *, native=True, order2=True, dtype="float64", seed=0):
    """Run the checks of one case of ``opdef`` on every backend in ``backends``."""
    rng = rng_for(opdef.name, index, seed)
    leaves, flags, rebuild, kwargs = _draw(case, rng, dtype)
    passed = {b: True for b in backends}
    max_err = {b: 0.0 for b in backends}
    problems = []

    def on(backend, arrays):
        ts = [gt.asarray(a, backend=backend) for a in arrays]
        return flat_outputs(case_outputs(case, opdef.public(*rebuild(ts), **kwargs)))

    try:
        outs = on("numpy", leaves)
    except Exception as e:
        return CaseResult(
            opdef.name,
            repr(case),
            {b: False for b in backends},
            {b: np.inf for b in backends},
            [f"forward failed on numpy: {type(e).__name__}: {e}"],
            ("forward",),
        )
    differentiable = (
        opdef in registry.differentiable_ops()
        and any(o.dtype.differentiable for o in outs)
        and any(f and a.dtype.kind in "fc" for f, a in zip(flags, leaves))
    )
    if not differentiable:
        ref = [o.numpy() for o in outs]
        for b in backends:
            try:
                got = [o.numpy() for o in on(b, leaves)]
                for r, g in zip(ref, got):
                    if r.shape != g.shape or not np.allclose(r, g, rtol=1e-6, atol=1e-9, equal_nan=True):
                        raise AssertionError(f"forward differs from numpy: {g.reshape(-1)[:6]} vs {r.reshape(-1)[:6]}")
            except Exception as e:
                passed[b] = False
                problems.append(f"{b}: {type(e).__name__}: {e}")
        return CaseResult(opdef.name, repr(case), passed, max_err, problems, ("forward",))

    fouts = [k for k, o in enumerate(outs) if o.dtype.differentiable]
    ws = []
    for k in fouts:
        w = rng.standard_normal(outs[k].shape)
        if outs[k].dtype.is_complex:
            w = w + 1j * rng.standard_normal(outs[k].shape)
        ws.append(w)
    diff_idx = [k for k, (f, a) in enumerate(zip(flags, leaves)) if f and a.dtype.kind in "fc"]
    fixed = {k: a for k, a in enumerate(leaves) if k not in diff_idx}

    def loss_fn(*xs):
        like = xs[0]
        arrays = []
        it = iter(xs)
        for k in range(len(leaves)):
            arrays.append(next(it) if k in diff_idx else gt.asarray(fixed[k], backend=like.backend))
        ys = flat_outputs(case_outputs(case, opdef.public(*rebuild(arrays), **kwargs)))
        total = None
        for k, w in zip(fouts, ws):
            y = ys[k]
            wt = gt.astype(gt.asarray(w, backend=like.backend), y.dtype)
            term = gt.sum(gt.conj(wt) * y) if y.dtype.is_complex else gt.sum(wt * y)
            term = gt.real(term) if term.dtype.is_complex else term
            total = term if total is None else total + term
        return total

    tol = {}
    if dtype == "float64" and any(outs[k].dtype.name in ("float32", "complex64") for k in fouts):
        # the op computes in single precision (a cast to float32, say): finite differences need a
        # larger step and resolve its derivative only to about 1e-3
        (rt, at), _ = TOLERANCES["float32"]
        tol = {"rtol": rt, "atol": at, "eps": 1e-2}
    report = gt.check_gradients(loss_fn, *[leaves[k] for k in diff_idx], backends=backends, native=native, **tol)
    owners = {f"gradtape:{b}": b for b in backends}
    owners.update({native_method_name(b): b for b in backends})
    fd = "finite differences"
    # a method that disagrees with finite differences is the one to blame for its failed pairs;
    # where both (or neither) agree with them, both are
    off = {m for p in report.pairs if not p.passed and fd in (p.a, p.b) for m in (p.a, p.b) if m != fd}
    for p in report.pairs:
        err = p.max_rel_err if np.isfinite(p.max_rel_err) else np.inf
        blamed = [m for m in (p.a, p.b) if m in off] or [p.a, p.b]
        for m in (p.a, p.b):
            b = owners.get(m)
            if b is not None and (p.passed or m in blamed):
                max_err[b] = max(max_err[b], err)
                if not p.passed:
                    passed[b] = False
        if not p.passed:
            problems.append(
                f"{p.a} vs {p.b} on argument {diff_idx[p.arg]}: max abs err {p.max_abs_err:.3g}, "
                f"max rel err {p.max_rel_err:.3g}{' (' + p.note + ')' if p.note else ''}"
            )
    for name, why in report.skipped.items():
        if name.startswith("gradtape:"):
            b = name.split(":", 1)[1]
            passed[b] = False
            problems.append(f"{name} could not run: {why}")
    kinds = ("grad", "native") if native else ("grad",)
    if order2 and dtype == "float64":
        kinds = kinds + ("order2",)
        for b in backends:
            try:
                r2 = check_case(opdef, case, b, rng_for(opdef.name, index, seed + 1), order=2)
            except Exception as e:
                passed[b] = False
                problems.append(f"{b} second order: {type(e).__name__}: {e}")
                continue
            if not r2.passed:
                passed[b] = False
                problems.append(f"{b} second order: " + "; ".join(r2.problems))
            max_err[b] = max(max_err[b], r2.max_rel_err)
    return CaseResult(opdef.name, repr(case), passed, max_err, problems, kinds)
