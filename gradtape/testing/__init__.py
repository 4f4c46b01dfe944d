"""Checking gradients against central finite differences, in float64.

* :func:`finite_differences` differentiates a real scalar function of NumPy arrays numerically
  (central and one-sided differences; :func:`gt.check_gradients <gradtape.testing.crosscheck.check_gradients>`
  uses it too), :func:`numeric_gradient` returns just the central ones.
* :func:`check_case` checks one op on one sample call (a :class:`~gradtape.core.domains.Case` of its
  domain) on one backend: the tape's gradient of ``L = Re(sum(conj(w) * y))`` for random output
  cotangents ``w`` against finite differences of ``L``, for every differentiable argument; with
  ``order=2`` also the gradient of that gradient (nested tapes) against finite differences of it.

Complex arguments follow TensorFlow's convention: the gradient of a real ``L`` with respect to
``z`` is ``dL/dRe(z) + 1j * dL/dIm(z)`` (``2 dL/d conj(z)``), so ``L = |z|^2`` gives ``2z``.

The conformance suite (``gradtape.conformance``) and ``tests/test_gradients.py`` run
:func:`check_case` over every op of the registry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gradtape import backends as _backends
from gradtape.ops.creation import asarray
from gradtape.ops.elementwise import astype, conj, real
from gradtape.ops.statistical import sum as _sum
from gradtape.autodiff.tape import GradientTape
from gradtape.core.domains import Arg, Case, Pack
from gradtape.core.registry import OpDef
from gradtape.core.tensor import Nested, Tensor

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_EPS",
    "DEFAULT_RTOL",
    "CaseCheck",
    "case_leaves",
    "check_case",
    "finite_differences",
    "flat_outputs",
    "numeric_gradient",
    "snapshot",
    "assert_structures_close",
]

DEFAULT_RTOL = 1e-6
DEFAULT_ATOL = 1e-7
DEFAULT_EPS = 1e-6
# ops whose outputs are single precision even for float64 inputs
LOWP_EPS, LOWP_RTOL, LOWP_ATOL = 1e-2, 1e-3, 1e-4


# ---------------------------------------------------------------------------------------- numeric
def _is_diff_array(a):
    return isinstance(a, np.ndarray) and a.dtype.kind in "fc"


def _as64(a):
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return a.astype(np.float64)
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    return a


def finite_differences(
    f: Callable[..., Any], args: Sequence[Any], wrt: Sequence[int] | None = None, eps: float = DEFAULT_EPS
) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Central, forward and backward differences of a real scalar function ``f(*args)``.

    ``args`` are NumPy arrays (or values passed through unchanged); ``wrt`` the indices of the
    arguments to differentiate (default: every float or complex array).  The arrays are promoted
    to float64 / complex128 (the step then suits every input dtype) and each element is perturbed
    by ``+-h``, ``h = eps * max(1, |x|)``; complex elements in their real and imaginary parts
    separately, giving ``dL/dRe + 1j dL/dIm`` (TensorFlow's convention).  Returns
    ``{k: (central, forward, backward)}``, arrays of the argument's shape; where the one-sided
    differences disagree, ``f`` has a kink there.
    """
    args = [_as64(a) if isinstance(a, (np.ndarray, np.generic)) else a for a in args]
    if wrt is None:
        wrt = [k for k, a in enumerate(args) if _is_diff_array(a)]

    def value(k=None, i=None, delta=None):
        call = list(args)
        if k is not None:
            pert = args[k].copy()
            pert.reshape(-1)[i] += delta
            call[k] = pert
        v = complex(f(*call))
        if abs(v.imag) > 1e-12 * max(1.0, abs(v.real)):
            raise ValueError(f"finite differences: f returned a complex value {v}; it must be real")
        return v.real

    out = {}
    f0 = value() if wrt else None
    for k in wrt:
        a = args[k]
        if not _is_diff_array(a):
            raise TypeError(f"finite differences: argument {k} is not a float or complex array")
        diffs = np.zeros((3, a.size), dtype=a.dtype)  # central, forward, backward
        flat_a = a.reshape(-1)
        for i in range(flat_a.size):
            h = eps * max(1.0, abs(flat_a[i]))
            for unit in (1.0, 1j) if a.dtype.kind == "c" else (1.0,):
                plus, minus = value(k, i, unit * h), value(k, i, -unit * h)
                diffs[:, i] += unit * np.array([(plus - minus) / (2 * h), (plus - f0) / h, (f0 - minus) / h])
        out[k] = tuple(d.reshape(a.shape) for d in diffs)
    return out


def numeric_gradient(
    f: Callable[..., Any], args: Sequence[Any], *, wrt: Sequence[int] | None = None, eps: float = DEFAULT_EPS
) -> list[np.ndarray | None]:
    """The central differences of :func:`finite_differences`: one array per argument (the
    argument's shape, float64 or complex128), ``None`` for the arguments not differentiated."""
    diffs = finite_differences(f, args, wrt, eps)
    return [diffs[k][0] if k in diffs else None for k in range(len(args))]


# ---------------------------------------------------------------------------------------- cases
def apply_map(fn, value):
    """``value`` (a gradtape Tensor, or a NumPy array: mapped on the numpy backend and returned as
    NumPy) passed through an :meth:`~gradtape.core.domains.Arg.via` map ``fn``; unchanged without one."""
    if fn is None:
        return value
    if isinstance(value, Tensor):
        return fn(value)
    return fn(asarray(np.asarray(value), backend="numpy")).numpy()


def case_outputs(case, result):
    """The op's ``result`` (Tensors, or NumPy arrays: mapped on the numpy backend and returned as
    NumPy) through the case's :meth:`~gradtape.core.domains.Case.map_outputs` function; unchanged
    without one."""
    fn = case.out_map
    if fn is None:
        return result
    flat = list(result) if isinstance(result, (tuple, list)) else [result]
    if all(isinstance(r, Tensor) for r in flat):
        return fn(result)
    ts = [asarray(np.asarray(r), backend="numpy") for r in flat]
    out = fn(tuple(ts) if isinstance(result, (tuple, list)) else ts[0])
    if isinstance(out, (tuple, list)):
        return tuple(o.numpy() for o in out)
    return out.numpy()


def case_leaves(
    case: Case, values: Sequence[Any]
) -> tuple[list[Any], list[bool], Callable[[Sequence[Any]], list[Any]]]:
    """The drawn arrays of ``case`` (``values, kwargs = case.draw(rng)``) as a flat list, in order,
    with a flag per array (drawn from a differentiable sampler?) and a function that rebuilds the
    positional arguments from replacement arrays: ``leaves, flags, rebuild = case_leaves(case, values)``.
    Literal arguments (not Args) are kept as they are and are not leaves.  ``rebuild`` passes each
    leaf through its Arg's map (:meth:`~gradtape.core.domains.Arg.via`), so the leaves are what checks
    perturb and differentiate and the op sees the mapped values."""
    leaves: list[Any] = []
    flags: list[bool] = []
    spec: list[tuple[str, Any, Any]] = []  # (kind, its Arg or Args, the literal or packed values)
    for a, v in zip(case.args, values):
        if isinstance(a, Pack):
            spec.append(("pack", [e if isinstance(e, Arg) else None for e in a.args], v))
            for e, ev in zip(a.args, v):
                if isinstance(e, Arg):
                    leaves.append(ev)
                    flags.append(e.differentiable)
        elif isinstance(a, Arg):
            spec.append(("leaf", a, None))
            leaves.append(v)
            flags.append(a.differentiable)
        else:
            spec.append(("literal", None, v))

    def rebuild(new_leaves):
        it = iter(new_leaves)
        out = []
        for kind, arg, v in spec:
            if kind == "pack":
                out.append([apply_map(e.map, next(it)) if e is not None else ev for e, ev in zip(arg, v)])
            elif kind == "leaf":
                out.append(apply_map(arg.map, next(it)))
            else:
                out.append(v)
        return out

    return leaves, flags, rebuild


def flat_outputs(y: Nested) -> list[Tensor]:
    """The Tensors of an op's result (a Tensor, or a tuple or list of them, nested), in order."""
    if isinstance(y, Tensor):
        return [y]
    if isinstance(y, (tuple, list)):
        out: list[Tensor] = []
        for e in y:
            out.extend(flat_outputs(e))
        return out
    return []


def _random_like(rng, shape, kind):
    w = rng.standard_normal(shape)
    if kind == "c":
        w = w + 1j * rng.standard_normal(shape)
    return np.asarray(w)


def _loss_np(ys, ws):
    """``sum_k Re(sum(conj(w_k) * y_k))`` in NumPy float64."""
    total = 0.0
    for y, w in zip(ys, ws):
        total += float(np.real(np.sum(np.conj(w) * _as64(np.asarray(y)))))
    return total


@dataclasses.dataclass
class CaseCheck:
    """The result of :func:`check_case`: the largest absolute and relative errors of the tape's
    gradient against finite differences, whether it passed, a line per problem and notes."""

    op: str
    case: str
    backend: str
    order: int
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    checked: int = 0  # number of gradient elements compared
    passed: bool = True
    problems: list[str] = dataclasses.field(default_factory=list)  # one line per failed comparison
    notes: list[str] = dataclasses.field(default_factory=list)  # how the check was run, if unusual

    def __str__(self) -> str:
        head = (
            f"{self.op} {self.case} on {self.backend}, order {self.order}: "
            f"{'ok' if self.passed else 'FAILED'} (max abs err {self.max_abs_err:.3g}, "
            f"max rel err {self.max_rel_err:.3g}, {self.checked} elements)"
        )
        return "\n  ".join([head] + list(self.problems) + [f"({n})" for n in self.notes])

    @property
    def skipped(self) -> bool:
        """True when nothing was compared (no differentiable argument or output)."""
        return self.checked == 0

    def raise_if_failed(self) -> CaseCheck:
        if not self.passed:
            raise AssertionError(str(self))
        return self

    def _compare(self, what, got, want, rtol, atol):
        want = np.asarray(want)
        got = np.zeros_like(want) if got is None else np.asarray(got)
        if got.shape != want.shape:
            self.passed = False
            self.problems.append(f"{what}: gradient has shape {got.shape}, expected {want.shape}")
            return
        err = np.abs(got - want)
        self.checked += err.size
        if err.size == 0:
            return
        if not np.all(np.isfinite(got)):
            self.passed = False
            self.problems.append(f"{what}: gradient has non-finite values: {got}")
            return
        mabs = float(err.max())
        scale = np.abs(want)
        big = scale > atol
        mrel = float((err[big] / scale[big]).max()) if big.any() else 0.0
        self.max_abs_err = max(self.max_abs_err, mabs)
        self.max_rel_err = max(self.max_rel_err, mrel)
        bad = err > atol + rtol * scale
        if bad.any():
            self.passed = False
            self.problems.append(
                f"{what}: tape {got.reshape(-1)[:8]} vs numeric {want.reshape(-1)[:8]} (max abs err {mabs:.3g})"
            )


def _to_tensor(a, backend):
    return asarray(_as64(a), backend=backend)


def check_case(
    opdef: OpDef,
    case: Case,
    backend: str,
    rng: np.random.Generator,
    order: int = 1,
    *,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    eps: float = DEFAULT_EPS,
    reference: str | None = None,
) -> CaseCheck:
    """Check the gradient rule of ``opdef`` on one ``case`` of its domain on ``backend``.

    Draws the case (``case.draw(rng)``), puts its arrays on ``backend`` as float64 / complex128
    tensors (integer and bool arrays keep their dtype), calls ``opdef.public(*args, **kwargs)``
    (arguments through their ``Arg.via`` maps, the result through the case's ``map_outputs``),
    picks random cotangents ``w`` for each float or complex output and compares the tape's
    gradient of ``L = Re(sum(conj(w) * y))`` (``tape.gradient(y, xs, output_gradients=w)``) with
    central finite differences of ``L`` for every differentiable argument (an ``Arg`` of a float,
    complex or SPD sampler).  With ``order=2`` it also compares the gradient (nested tapes) of
    ``M = sum_k Re(sum(conj(v_k) * g_k))``, ``g_k`` the first-order gradients and ``v_k`` random,
    with finite differences of ``M``.  ``reference``: the backend whose forward (and, for ``M``,
    first-order gradients) the finite differences evaluate, default ``backend`` itself; a lazy backend
    (dask) is checked against NumPy's so, where its own would build and compute a task graph for each of
    the many evaluations (the conformance suite checks its forward against NumPy's apart).  Returns a
    :class:`CaseCheck`.
    """
    b = _backends.get(backend)
    fb = b if reference is None else _backends.get(reference)
    values, kwargs = case.draw(rng)
    leaves, flags, rebuild = case_leaves(case, values)
    leaves = [_as64(a) for a in leaves]
    diff = [k for k, f in enumerate(flags) if f and leaves[k].dtype.kind in "fc"]
    report = CaseCheck(opdef.name, repr(case), b.name, order)

    def call(arrays, on=b):
        ts = [_to_tensor(a, on) for a in arrays]
        return ts, flat_outputs(case_outputs(case, opdef.public(*rebuild(ts), **kwargs)))

    _, outs = call(leaves)
    fouts = [k for k, o in enumerate(outs) if o.dtype.differentiable]
    if not diff or not fouts:
        return report
    if any(outs[k].dtype.name in ("float32", "complex64") for k in fouts):
        # the op computes in single precision (a cast to float32, say): finite differences can
        # only resolve its derivative to about 1e-4
        eps, rtol, atol = max(eps, LOWP_EPS), max(rtol, LOWP_RTOL), max(atol, LOWP_ATOL)
        report.notes.append(f"single-precision output: eps={eps}, rtol={rtol}, atol={atol}")
    ws = [_random_like(rng, outs[k].shape, outs[k].dtype.kind) for k in fouts]

    def first_order(arrays, on=b):
        """Tensors of ``arrays`` and the tape gradients of L with respect to the differentiable ones."""
        ts = [_to_tensor(a, on) for a in arrays]
        xs = [ts[k] for k in diff]
        with GradientTape() as tape:
            tape.watch(xs)
            ys = flat_outputs(case_outputs(case, opdef.public(*rebuild(ts), **kwargs)))
        targets = [ys[k] for k in fouts]
        wts = [
            asarray(w.astype(np.complex128 if ys[k].dtype.kind == "c" else np.float64), backend=on)
            for w, k in zip(ws, fouts)
        ]
        wts = [astype(w, t.dtype) if w.dtype != t.dtype else w for w, t in zip(wts, targets)]
        gs = tape.gradient(targets, xs, output_gradients=wts)
        return ts, xs, gs

    def loss(*arrays):
        _, ys = call(arrays, fb)
        return _loss_np([ys[k].numpy() for k in fouts], ws)

    _, xs, gs = first_order(leaves)
    for k, x, g in zip(diff, xs, gs):
        if g is not None:
            if tuple(g.shape) != tuple(x.shape):
                report.passed = False
                report.problems.append(f"argument {k}: gradient shape {g.shape} != argument shape {x.shape}")
                return report
            if g.dtype != x.dtype:
                report.passed = False
                report.problems.append(f"argument {k}: gradient dtype {g.dtype} != argument dtype {x.dtype}")
    num = numeric_gradient(loss, leaves, wrt=diff, eps=eps)
    for k, g in zip(diff, gs):
        report._compare(f"d/d arg {k}", None if g is None else g.numpy(), num[k], rtol, atol)
    if order < 2:
        return report

    # ---- second order: the gradient of M = sum_k Re(sum(conj(v_k) g_k)) through nested tapes
    vs = [_random_like(rng, leaves[k].shape, leaves[k].dtype.kind) for k in diff]

    def m_tensor(gs_, on=b):
        total = None
        for v, g in zip(vs, gs_):
            if g is None:
                continue
            vt = asarray(v.astype(np.complex128 if g.dtype.kind == "c" else np.float64), backend=on)
            if vt.dtype != g.dtype:
                vt = astype(vt, g.dtype)
            term = _sum(conj(vt) * g) if g.dtype.kind == "c" else _sum(vt * g)
            if term.dtype.kind == "c":
                term = real(term)
            total = term if total is None else total + term
        return total

    def m_value(*arrays):
        _, _, gs_ = first_order(arrays, fb)
        m = m_tensor(gs_, fb)
        return 0.0 if m is None else float(m.numpy())

    ts = [_to_tensor(a, b) for a in leaves]
    xs = [ts[k] for k in diff]
    with GradientTape() as outer:
        outer.watch(xs)
        with GradientTape() as inner:
            inner.watch(xs)
            ys = flat_outputs(case_outputs(case, opdef.public(*rebuild(ts), **kwargs)))
        targets = [ys[k] for k in fouts]
        wts = [
            asarray(w.astype(np.complex128 if ys[k].dtype.kind == "c" else np.float64), backend=b)
            for w, k in zip(ws, fouts)
        ]
        wts = [astype(w, t.dtype) if w.dtype != t.dtype else w for w, t in zip(wts, targets)]
        gs1 = inner.gradient(targets, xs, output_gradients=wts)
        m = m_tensor(gs1)
    hs = outer.gradient(m, xs) if m is not None else [None] * len(xs)
    num2 = numeric_gradient(m_value, leaves, wrt=diff, eps=eps)
    for k, h in zip(diff, hs):
        report._compare(f"d2/d arg {k}", None if h is None else h.numpy(), num2[k], rtol * 10, atol * 10)
    return report


# ------------------------------------------------------------------ comparing results (gt.function)
def snapshot(x: Nested) -> Any:
    """``x`` with every tensor as a NumPy copy (None, Python values and the structure kept): a result
    frozen before later calls update the variables it came from."""
    if isinstance(x, Tensor):
        return np.array(x.numpy(), copy=True)
    if isinstance(x, (list, tuple)):
        return type(x)(snapshot(v) for v in x)
    if isinstance(x, dict):
        return {k: snapshot(v) for k, v in x.items()}
    return x


def assert_structures_close(got: Any, want: Any, rtol: float, atol: float, where: str = "result") -> None:
    """Structures equal (as :func:`snapshot` makes them): arrays to ``rtol``/``atol`` with equal
    dtypes and shapes, None and Python values exactly (an eager result against a compiled one)."""
    if want is None or isinstance(want, (bool, int, float, str)) and not isinstance(want, np.generic):
        assert got == want, f"{where}: {got!r} != {want!r}"
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), f"{where}: {got!r} vs {want!r}"
        for k, (g, w) in enumerate(zip(got, want)):
            assert_structures_close(g, w, rtol, atol, f"{where}[{k}]")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{where}: keys {set(got)} vs {set(want)}"
        for k in want:
            assert_structures_close(got[k], want[k], rtol, atol, f"{where}[{k!r}]")
    else:
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)
