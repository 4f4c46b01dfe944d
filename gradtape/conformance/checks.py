"""The checks run on every (op, case): what ``gradtape conformance`` does for one sample call.

For a differentiable op, one case of its domain is drawn once (a seeded generator per op and case,
so every run and every backend sees the same numbers), a random cotangent ``w`` is drawn for each
floating output, and :func:`gradtape.check_gradients` is run on ``L = Re(sum(conj(w) * op(...)))``:
gradtape on each backend, each library's own autodiff of the same forward, finite differences in
float64, every pair compared (kinks reported, not failed).  Ops whose rule is itself made of
differentiable ops are also checked at second order (:func:`gradtape.testing.check_case`).
Non-differentiable ops get a forward check: the same values on every backend.  Arguments go through
their ``Arg.via`` maps and results through the case's ``map_outputs`` (see :mod:`gradtape.core.domains`)
in every check, so each method sees the same function.

With ``compiled=True`` (``gradtape conformance --compiled``) every case is also run through
``gt.function`` on every backend (:func:`check_compiled`): a function of the case's input tensors
that returns the tape's gradient of the same ``L`` (and, at order 2, the gradient of
``M = Re(sum(conj(v) * dL/dx))`` through nested tapes; a forward-only op returns its outputs) is
called on three draws of the case (same shapes, other values: the first call traces, the others run
the replayed or compiled program) and compared with the same Python function run eagerly on each,
relative to ``max(|eager|, 1)`` (float64): to ``1e-12`` where the program is replayed, ``1e-9``
where a compiler ran it.  A function that reads a traced value into Python
(``OperatorNotAllowedInGraphError``), draws random numbers, or whose eager value is not
reproducible is reported as ``not traceable``, with the reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import traceback
import warnings
from pathlib import Path

import numpy as np

import gradtape as gt
from gradtape.core import registry
from gradtape.testing.crosscheck import TOLERANCES, native_method_name
from gradtape.testing import case_leaves, case_outputs, check_case, flat_outputs

__all__ = ["COMPILED_RTOL", "CaseResult", "check_case_everywhere", "check_compiled", "known_failures", "rng_for"]

_KNOWN_DIR = Path(__file__).with_name("known_failures")
#: relative tolerance of gt.function against eager gradtape: (replayed program, compiled program)
COMPILED_RTOL = {"float64": (1e-12, 1e-9), "float32": (1e-5, 1e-4)}
#: calls of each gt.function: the first traces, the others run its program (other values each)
COMPILED_CALLS = 3


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
    compiled: dict = dataclasses.field(default_factory=dict)  # backend -> check_compiled's result
    pairs: list = dataclasses.field(default_factory=list)  # every comparison made, see _pair


#: what the second-order pair of a backend compares (:func:`gradtape.testing.check_case` at order 2)
ORDER2_NOTE = "first order (rtol 1e-6) and second order (nested tapes, rtol 1e-5) against finite differences"


def _pair(kind, a, b, *, backends, blamed=(), passed, max_abs_err=0.0, max_rel_err=0.0, rtol=None, atol=None, note=""):
    """One comparison of a case, for the report: ``kind`` ("grad", "order2" or "forward"), the two
    methods, the backends whose methods took part, those a failure is blamed on, the errors and the
    tolerance it was held to."""
    return {
        "kind": kind,
        "a": a,
        "b": b,
        "backends": list(backends),
        "blamed": list(blamed) if not passed else [],
        "passed": bool(passed),
        "max_abs_err": float(max_abs_err),
        "max_rel_err": float(max_rel_err),
        "rtol": rtol,
        "atol": atol,
        "note": note,
    }


def _forward_err(ref, got):
    """The largest absolute difference of ``got``'s outputs from ``ref``'s (0 where equal, inf where
    shapes differ or non-floating values differ)."""
    worst = 0.0
    for r, g in zip(ref, got):
        if r.shape != g.shape:
            return np.inf
        if r.dtype.kind in "fc" and g.dtype.kind in "fc":
            fin = np.isfinite(r) & np.isfinite(g)
            if fin.any():
                worst = max(worst, float(np.max(np.abs(r[fin] - g[fin]))))
        elif not np.array_equal(r, g):
            return np.inf
    return worst


def _draw(case, rng, dtype):
    values, kwargs = case.draw(rng, dtype="float64")
    leaves, flags, rebuild = case_leaves(case, values)
    leaves = [np.asarray(a) for a in leaves]
    if dtype == "float32":
        leaves = [
            a.astype(np.complex64 if a.dtype.kind == "c" else np.float32) if a.dtype.kind in "fc" else a for a in leaves
        ]
    return leaves, flags, rebuild, kwargs


def _differentiable(opdef, outs, flags, leaves):
    """Whether a case is checked by gradient (else by forward): a differentiable op, a floating
    output and a floating differentiable argument."""
    return (
        opdef in registry.differentiable_ops()
        and any(o.dtype.differentiable for o in outs)
        and any(f and a.dtype.kind in "fc" for f, a in zip(flags, leaves))
    )


def _cotangents(rng, like):
    """A random array per entry of ``like`` (its shape; complex where it is complex)."""
    ws = []
    for y in like:
        w = rng.standard_normal(tuple(y.shape))
        if y.dtype.is_complex if isinstance(y, gt.Tensor) else y.dtype.kind == "c":
            w = w + 1j * rng.standard_normal(tuple(y.shape))
        ws.append(w)
    return ws


def _weighted(ys, ws, backend):
    """``sum_k Re(sum(conj(w_k) * y_k))`` in gradtape ops (``None`` entries of ``ys`` skipped)."""
    total = None
    for y, w in zip(ys, ws):
        if y is None:
            continue
        wt = gt.astype(gt.asarray(w, backend=backend), y.dtype)
        term = gt.sum(gt.conj(wt) * y) if y.dtype.is_complex else gt.sum(wt * y)
        term = gt.real(term) if term.dtype.is_complex else term
        total = term if total is None else total + term
    return total


def check_case_everywhere(
    opdef, case, index, backends, *, native=True, order2=True, dtype="float64", seed=0, compiled=False
):
    """Run the checks of one case of ``opdef`` on every backend in ``backends`` (and, with
    ``compiled``, :func:`check_compiled` on each: ``CaseResult.compiled``)."""
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
        why = f"forward failed on numpy: {type(e).__name__}: {e}"
        return CaseResult(
            opdef.name,
            repr(case),
            {b: False for b in backends},
            {b: np.inf for b in backends},
            [why],
            ("forward",),
            pairs=[
                _pair(
                    "forward",
                    f"gradtape:{b}",
                    "numpy (reference)",
                    backends=[b],
                    blamed=[b],
                    passed=False,
                    max_abs_err=np.inf,
                    max_rel_err=np.inf,
                    note=why,
                )
                for b in backends
            ],
        )
    if not _differentiable(opdef, outs, flags, leaves):
        ref = [o.numpy() for o in outs]
        pairs = []
        for b in backends:
            err, note = np.inf, ""
            try:
                got = [o.numpy() for o in on(b, leaves)]
                err = _forward_err(ref, got)
                for r, g in zip(ref, got):
                    if r.shape != g.shape or not np.allclose(r, g, rtol=1e-6, atol=1e-9, equal_nan=True):
                        raise AssertionError(f"forward differs from numpy: {g.reshape(-1)[:6]} vs {r.reshape(-1)[:6]}")
            except Exception as e:
                passed[b] = False
                note = f"{type(e).__name__}: {e}"
                problems.append(f"{b}: {note}")
            pairs.append(
                _pair(
                    "forward",
                    f"gradtape:{b}",
                    "numpy (reference)",
                    backends=[b],
                    blamed=[b],
                    passed=passed[b],
                    max_abs_err=err,
                    rtol=1e-6,
                    atol=1e-9,
                    note=note,
                )
            )
        res = CaseResult(opdef.name, repr(case), passed, max_err, problems, ("forward",), pairs=pairs)
        if compiled:
            res.compiled = {b: check_compiled(opdef, case, index, b, dtype=dtype, seed=seed) for b in backends}
        return res

    fouts = [k for k, o in enumerate(outs) if o.dtype.differentiable]
    ws = _cotangents(rng, [outs[k] for k in fouts])
    diff_idx = [k for k, (f, a) in enumerate(zip(flags, leaves)) if f and a.dtype.kind in "fc"]
    fixed = {k: a for k, a in enumerate(leaves) if k not in diff_idx}

    def loss_fn(*xs):
        like = xs[0]
        arrays = []
        it = iter(xs)
        for k in range(len(leaves)):
            arrays.append(next(it) if k in diff_idx else gt.asarray(fixed[k], backend=like.backend))
        ys = flat_outputs(case_outputs(case, opdef.public(*rebuild(arrays), **kwargs)))
        return _weighted([ys[k] for k in fouts], ws, like.backend)

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
    pairs = []
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
        pairs.append(
            _pair(
                "grad",
                p.a,
                p.b,
                backends=[owners[m] for m in (p.a, p.b) if m in owners],
                blamed=[owners[m] for m in blamed if m in owners],
                passed=p.passed,
                max_abs_err=p.max_abs_err,
                max_rel_err=err,
                rtol=p.rtol,
                atol=p.atol,
                note=f"argument {diff_idx[p.arg]}" + (f" ({p.note})" if p.note else ""),
            )
        )
    for name, why in report.skipped.items():
        if name.startswith("gradtape:"):
            b = name.split(":", 1)[1]
            passed[b] = False
            problems.append(f"{name} could not run: {why}")
            pairs.append(
                _pair(
                    "grad",
                    name,
                    "(did not run)",
                    backends=[b],
                    blamed=[b],
                    passed=False,
                    max_abs_err=np.inf,
                    max_rel_err=np.inf,
                    note=why,
                )
            )
    kinds = ("grad", "native") if native else ("grad",)
    if order2 and dtype == "float64":
        kinds = kinds + ("order2",)
        for b in backends:
            order2_pair = dict(kind="order2", a=f"gradtape:{b}", b="finite differences", backends=[b], blamed=[b])
            try:
                # (a lazy backend's finite differences on NumPy's forward, which its own was checked against)
                ref = "numpy" if getattr(gt.backends.get(b), "lazy", False) else None
                r2 = check_case(opdef, case, b, rng_for(opdef.name, index, seed + 1), order=2, reference=ref)
            except Exception as e:
                passed[b] = False
                problems.append(f"{b} second order: {type(e).__name__}: {e}")
                pairs.append(
                    _pair(
                        **order2_pair,
                        passed=False,
                        max_abs_err=np.inf,
                        max_rel_err=np.inf,
                        note=f"{type(e).__name__}: {e}",
                    )
                )
                continue
            if not r2.passed:
                passed[b] = False
                problems.append(f"{b} second order: " + "; ".join(r2.problems))
            max_err[b] = max(max_err[b], r2.max_rel_err)
            pairs.append(
                _pair(
                    **order2_pair,
                    passed=r2.passed,
                    max_abs_err=r2.max_abs_err,
                    max_rel_err=r2.max_rel_err,
                    note="; ".join([ORDER2_NOTE] + r2.problems + r2.notes),
                )
            )
    res = CaseResult(opdef.name, repr(case), passed, max_err, problems, kinds, pairs=pairs)
    if compiled:
        res.compiled = {
            b: check_compiled(opdef, case, index, b, order2=order2, dtype=dtype, seed=seed) for b in backends
        }
    return res


# ---------------------------------------------------------------------------------------- gt.function
def _forward(opdef, case, rebuild, kwargs, ts):
    return flat_outputs(case_outputs(case, opdef.public(*rebuild(list(ts)), **kwargs)))


def _as_numpy(result):
    """The arrays of a (nested) result as NumPy arrays, ``None`` and Python values kept, in order."""
    if isinstance(result, (list, tuple)):
        return [x for r in result for x in _as_numpy(r)]
    return [result.numpy() if isinstance(result, gt.Tensor) else result]


def _compiled_err(got, want):
    """``(largest error, what differs)`` of ``got`` against ``want`` (lists from :func:`_as_numpy`):
    per array, the largest difference over ``max(|want|)``, at least 1 (the inputs are O(1): an exact
    zero that comes out as round-off, 1e-17 here and 3e-17 there, is no error); ``inf`` where shapes,
    dtypes, ``None``s, NaNs, infinities or non-floating values differ."""
    if len(got) != len(want):
        return np.inf, f"{len(got)} results, eager {len(want)}"
    worst, where = 0.0, ""
    for k, (g, w) in enumerate(zip(got, want)):
        if g is None or w is None or not isinstance(w, np.ndarray):
            if not (g is None and w is None) and not (isinstance(g, type(w)) and np.array_equal(g, w)):
                return np.inf, f"result {k} is {type(g).__name__}, eager {type(w).__name__}"
            continue
        if not isinstance(g, np.ndarray) or g.shape != w.shape or g.dtype != w.dtype:
            got = f"shape {np.shape(g)} and dtype {getattr(g, 'dtype', None)}"
            return np.inf, f"result {k} has {got}, eager {w.shape} {w.dtype}"
        if w.dtype.kind not in "fc":
            if not np.array_equal(g, w):
                return np.inf, f"result {k}: {g.reshape(-1)[:6]} vs eager {w.reshape(-1)[:6]}"
            continue
        fin = np.isfinite(w)
        if not np.array_equal(np.isfinite(g), fin) or not np.array_equal(g[~fin], w[~fin], equal_nan=True):
            return np.inf, f"result {k}: non-finite values differ: {g.reshape(-1)[:6]} vs eager {w.reshape(-1)[:6]}"
        if not fin.any():
            continue
        d = float(np.max(np.abs(g[fin] - w[fin])))
        err = d / max(float(np.max(np.abs(w[fin]))), 1.0)
        if err > worst:
            worst = err
            where = f"result {k}: {g.reshape(-1)[:4]} vs eager {w.reshape(-1)[:4]} (max abs err {d:.3g})"
    return worst, where


_ROOT = str(Path(gt.__file__).resolve().parent.parent) + "/"
#: gradtape's own frames between a value read and the line that asked for it
_PLUMBING = (
    "gradtape/backends/tracing.py",
    "gradtape/compile/function.py",
    "gradtape/core/tensor.py",
    "gradtape/ops/operators.py",
)


def _not_traceable_reason(e):
    """Why ``e`` (an ``OperatorNotAllowedInGraphError``) was raised: what was read, and where (the
    innermost frame outside the tracer's plumbing, relative to the project)."""
    m = re.search(r"as a Python (.+?) is not allowed", str(e))
    what = f"a traced tensor read as a Python {m.group(1) if m else 'value'}"
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.endswith(_PLUMBING)]
    if not frames:
        return what
    f = frames[-1]
    path = f.filename[len(_ROOT) :] if f.filename.startswith(_ROOT) else f.filename
    return f"{what} at {path}:{f.lineno} ({f.name})"


def check_compiled(opdef, case, index, backend, *, order2=True, dtype="float64", seed=0, calls=COMPILED_CALLS):
    """One case of ``opdef`` through ``gt.function`` on ``backend``, against eager gradtape.

    The function takes the case's arrays as tensors; for a differentiable case it returns the tape's
    gradient of ``L`` with the eager check's cotangents (and at order 2, float64, the gradient of
    ``M = Re(sum(conj(v) * dL/dx))`` through nested tapes), else the op's outputs.  It is called on
    ``calls`` draws of the case (the first traces) and each result compared with the same Python
    function run eagerly on the same tensors (:data:`COMPILED_RTOL`).  Returns a dict: ``status``
    ("pass", "FAIL", "not traceable" or "n/a"), ``max_err``, ``reason``, ``how`` (the executor:
    "replay", "jax compiler", ...), ``checks``, ``notes``."""
    out = {"status": "pass", "max_err": 0.0, "reason": "", "how": "", "checks": [], "notes": []}

    def verdict(status, reason):
        out["status"], out["reason"] = status, reason
        if status != "pass":
            out["max_err"] = np.inf if status == "FAIL" else 0.0
        return out

    rng = rng_for(opdef.name, index, seed)
    leaves, flags, rebuild, kwargs = _draw(case, rng, dtype)
    try:
        outs = _forward(opdef, case, rebuild, kwargs, [gt.asarray(a, backend="numpy") for a in leaves])
    except Exception as e:
        return verdict("n/a", f"the eager forward fails on numpy: {type(e).__name__}: {e}")
    # literal arrays of the call (labels, shift counts) are arguments of the function too, as a
    # training step's batch is
    lits = [k for k, a in enumerate(case.args) if isinstance(a, np.ndarray)]
    n = len(leaves)

    def call_op(ts):
        args = rebuild(list(ts[:n]))
        for j, k in enumerate(lits):
            args[k] = ts[n + j]
        return flat_outputs(case_outputs(case, opdef.public(*args, **kwargs)))

    if _differentiable(opdef, outs, flags, leaves):
        fouts = [k for k, o in enumerate(outs) if o.dtype.differentiable]
        ws = _cotangents(rng, [outs[k] for k in fouts])  # the eager check's (same generator, same order)
        diff_idx = [k for k, (f, a) in enumerate(zip(flags, leaves)) if f and a.dtype.kind in "fc"]
        second = order2 and dtype == "float64"
        vs = _cotangents(rng_for(opdef.name, index, f"{seed}:compiled"), [leaves[k] for k in diff_idx])
        out["checks"] = ["grad", "order2"] if second else ["grad"]

        def body(*ts):
            xs = [ts[k] for k in diff_idx]
            with gt.GradientTape() as outer:
                outer.watch(xs)
                with gt.GradientTape() as tape:
                    tape.watch(xs)
                    ys = call_op(ts)
                    loss = _weighted([ys[k] for k in fouts], ws, backend)
                g1 = tape.gradient(loss, xs)
                m = _weighted(g1, vs, backend) if second else None
            g2 = outer.gradient(m, xs) if m is not None else []
            return list(g1), list(g2)

    else:
        out["checks"] = ["forward"]

        def body(*ts):
            return call_op(ts)

    body.__name__ = f"conformance_{opdef.name.replace('.', '_')}"
    step = gt.function(body)
    draws = [leaves] + [
        _draw(case, rng_for(opdef.name, index, f"{seed}:compiled:{k}"), dtype)[0] for k in range(1, calls)
    ]
    inputs = [[gt.asarray(a, backend=backend) for a in list(d) + [case.args[k] for k in lits]] for d in draws]
    try:
        wants = [_as_numpy(body(*ts)) for ts in inputs]
        again = _as_numpy(body(*inputs[0]))
    except Exception as e:
        return verdict("n/a", f"the eager call fails on {backend}: {type(e).__name__}: {str(e)[:200]}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gots = []
        for k, ts in enumerate(inputs):
            try:
                gots.append(_as_numpy(step(*ts)))
            except gt.OperatorNotAllowedInGraphError as e:
                if k == 0:
                    return verdict("not traceable", _not_traceable_reason(e))
                return verdict("FAIL", f"call {k + 1} (a new trace) failed: {_not_traceable_reason(e)}")
            except Exception as e:
                what = "tracing" if k == 0 else f"call {k + 1}"
                return verdict("FAIL", f"{what} failed: {type(e).__name__}: {str(e)[:300]}")
    programs = [c for paths in step._cache.values() for c in paths]
    out["how"] = ", ".join(sorted({c.compiled_by for c in programs}))
    msgs = [str(w.message) for w in caught if "gt.function" in str(w.message)]
    out["notes"] = [m[:300] for m in msgs]
    bad = [m for m in msgs if "does not reproduce the eager call" in m]
    if bad or step._eager:
        return verdict("FAIL", (bad[0] if bad else "the function fell back to eager execution")[:400])
    if any(c.draws for c in programs):
        return verdict("not traceable", "its forward draws random numbers (new ones on every call)")
    rtol = COMPILED_RTOL.get(dtype, COMPILED_RTOL["float64"])
    rtol = rtol[0] if out["how"] == "replay" else rtol[1]
    err, where = _compiled_err(again, wants[0])
    if err > rtol:
        return verdict("not traceable", f"its eager value is not deterministic (two eager runs differ: {where})")
    count = step.experimental_get_tracing_count()
    if count >= calls:
        return verdict("not traceable", f"traced again on every call ({count} traces: a guard changed each time)")
    if count > 1:
        out["notes"].append(f"traced {count} times in {calls} calls")
    for k, (g, w) in enumerate(zip(gots, wants)):
        err, where = _compiled_err(g, w)
        out["max_err"] = max(out["max_err"], err)
        if err > rtol:
            how = "the trace" if k == 0 else f"its program, {out['how']}"
            return verdict("FAIL", f"call {k + 1} ({how}) differs from eager by {err:.3g} > {rtol:g}: {where}")
    return out
