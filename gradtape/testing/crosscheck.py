"""``gt.check_gradients``: one function's gradient by every method at hand, side by side.

For ``fn`` written against the Array API (``xp = x.__array_namespace__()``) and sample inputs, the
gradient of ``L = Re(sum(fn(*args)))`` is computed

* by gradtape on each requested backend (``gradtape:numpy``, ``gradtape:torch``, ...),
* by each library's own autodiff of the same forward (``torch.autograd``, ``jax.grad``), through
  ``Backend.native_grad``: gradtape's ops run on the library's arrays and the library records them,
* by TensorFlow's ``GradientTape`` when ``tensorflow`` is installed (``fn`` then runs on
  ``tf.experimental.numpy``),
* by central finite differences in float64 (:func:`gradtape.testing.finite_differences`, also
  importable from here),

and every pair is compared.  Elements where the left and right finite differences disagree are
kinks (``abs`` at 0, ``max`` over ties, ...): frameworks legitimately pick different subgradients
there, so those elements are reported, not compared.  Complex gradients follow TensorFlow's
convention (``dL/dRe + 1j dL/dIm``); JAX's are conjugated by its adapter before comparing.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from tqdm import tqdm

from gradtape import backends as _backends
from gradtape.core.config import available_backends, use_backend
from gradtape.ops.creation import asarray
from gradtape.ops.elementwise import real
from gradtape.ops.statistical import sum as _sum
from gradtape.autodiff.tape import GradientTape
from gradtape.core.tensor import Tensor, wrap
from gradtape.testing import finite_differences

__all__ = ["TOLERANCES", "GradientReport", "PairResult", "check_gradients", "finite_differences", "native_method_name"]

#: default tolerances: (against finite differences, between two analytic gradients), per precision
TOLERANCES = {
    "float64": ((1e-5, 1e-6), (1e-9, 1e-11)),
    "float32": ((2e-3, 2e-4), (1e-4, 1e-5)),
}


# ---------------------------------------------------------------------------------------- report
@dataclasses.dataclass
class PairResult:
    """Two methods compared on one argument."""

    a: str
    b: str
    arg: int
    max_abs_err: float
    max_rel_err: float
    passed: bool
    rtol: float
    atol: float
    note: str = ""


@dataclasses.dataclass
class GradientReport:
    """What :func:`check_gradients` found: the gradient of each method (NumPy arrays, per argument),
    each pair's errors and verdict, skipped methods and why, and the kinks left out."""

    methods: dict[str, dict[int, np.ndarray]]
    pairs: list[PairResult]
    skipped: dict[str, str]
    kinks: dict[int, list[Any]]

    @property
    def compared(self) -> bool:
        """Whether a gradtape gradient was compared at all (False when every gradtape backend was
        skipped: a report that checked nothing does not pass)."""
        return any(m.startswith("gradtape:") for p in self.pairs for m in (p.a, p.b))

    @property
    def passed(self) -> bool:
        return self.compared and all(p.passed for p in self.pairs)

    @property
    def failures(self) -> list[PairResult]:
        return [p for p in self.pairs if not p.passed]

    def raise_if_failed(self) -> GradientReport:
        """Raise an ``AssertionError`` naming the pairs that disagree (returns self otherwise)."""
        if not self.compared:
            raise AssertionError(
                "no gradtape gradient was compared: " + "; ".join(f"{k}: {v}" for k, v in self.skipped.items())
            )
        if not self.passed:
            lines = [
                f"{p.a} vs {p.b} on argument {p.arg}: max abs err {p.max_abs_err:.3g}, "
                f"max rel err {p.max_rel_err:.3g} (rtol {p.rtol:g}, atol {p.atol:g})"
                for p in self.failures
            ]
            raise AssertionError("gradients disagree:\n  " + "\n  ".join(lines))
        return self

    def table(self) -> str:
        """The pairwise comparison as a Markdown table."""
        rows = ["| method A | method B | arg | max abs err | max rel err | result |", "|---|---|---|---|---|---|"]
        for p in self.pairs:
            verdict = "pass" if p.passed else "**FAIL**"
            rows.append(
                f"| {p.a} | {p.b} | {p.arg} | {p.max_abs_err:.2e} | {p.max_rel_err:.2e} | "
                f"{verdict}{' (' + p.note + ')' if p.note else ''} |"
            )
        for name, why in self.skipped.items():
            rows.append(f"| {name} | — | — | — | — | skipped: {why} |")
        for arg, idx in self.kinks.items():
            rows.append(
                f"| kinks | — | {arg} | — | — | not compared at {len(idx)} element(s) where the "
                f"one-sided differences disagree: {idx[:6]} |"
            )
        return "\n".join(rows)

    def __str__(self) -> str:
        if not self.compared:
            head = "check_gradients: nothing compared (every gradtape backend was skipped)"
        else:
            verdict = "all pairs agree" if self.passed else f"{len(self.failures)} pair(s) disagree"
            head = f"check_gradients: {verdict} ({len(self.pairs)} compared"
            if self.skipped:  # (a skipped method is no agreement: the headline says how many)
                head += f"; {len(self.skipped)} skipped: {', '.join(self.skipped)}"
            head += ")"
        return head + "\n" + self.table() + "\n" + head  # (the verdict last too: the table scrolls)

    __repr__ = __str__


# ---------------------------------------------------------------------------------------- user code
#: methods that array libraries have and the standard's array object does not, whose namespace
#: function has another name (the others are ``xp.<same name>(x)``: ``x.sum()`` -> ``xp.sum(x)``)
_METHOD_FIXES = {
    "transpose": "xp.permute_dims(x, axes) (or x.T / x.mT)",
    "permute": "xp.permute_dims(x, axes)",
    "swapaxes": "xp.permute_dims(x, axes)",
    "flatten": "xp.reshape(x, (-1,))",
    "ravel": "xp.reshape(x, (-1,))",
    "view": "xp.reshape(x, shape)",
    "dot": "xp.matmul(x, y) or xp.vecdot(x, y)",
    "cumsum": "xp.cumulative_sum(x)",
    "cumprod": "xp.cumulative_prod(x)",
    "copy": "xp.asarray(x, copy=True)",
    "clone": "xp.asarray(x, copy=True)",
    "item": "float(x) (or int(x))",
    "norm": "xp.linalg.vector_norm(x)",
    "numel": "x.size (an attribute)",
    "detach": "gt.stop_gradient(x)",
    "cpu": 'x.to_device("cpu")',
    "unsqueeze": "xp.expand_dims(x, axis=...)",
}


def _method_hint(e):
    """For ``AttributeError: 'Tensor' object has no attribute 'sum'`` raised by a user's function:
    which Array API namespace function to call instead (None for any other error)."""
    if not isinstance(e, AttributeError):
        return None
    name, obj = getattr(e, "name", None), getattr(e, "obj", None)
    if name is None or obj is None:  # raised by hand, without name/obj: read the message
        m = re.match(r"'Tensor' object has no attribute '(\w+)'", str(e))
        if m is None:
            return None
        name = m.group(1)
    elif not isinstance(obj, Tensor):
        return None
    if name.startswith("_"):
        return None
    fix = _METHOD_FIXES.get(name)
    if fix is None:
        ns = sys.modules["gradtape"]  # the namespace Tensor.__array_namespace__ returns
        if not callable(getattr(ns, name, None)):
            return None
        fix = f"xp.{name}(x)"
    return (
        f"the Array API standard's arrays have no .{name}() method; call the namespace function "
        f"instead: {fix}, with xp = x.__array_namespace__()"
    )


def _call(fn, xs):
    """``fn(*xs)``; an ``AttributeError`` for an array method the standard does not have says which
    namespace function to use instead."""
    try:
        return fn(*xs)
    except AttributeError as e:
        hint = _method_hint(e)
        if hint is None:
            raise
        raise AttributeError(f"{e}: {hint}") from e


def _why(e):
    return f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------------------------------- methods
def _as_input(a):
    """Floating arrays keep single precision if given it (float64 otherwise); others unchanged."""
    a = np.asarray(a)
    if a.dtype.kind not in "fc":
        return a
    if a.dtype in (np.float32, np.float16):
        return a.astype(np.float32)
    if a.dtype == np.complex64:
        return a
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def _loss(y):
    s = _sum(y)
    return real(s) if s.dtype.is_complex else s


def _gradtape_grad(fn, arrays, wrt, backend):
    ts = [asarray(a, backend=backend) for a in arrays]
    xs = [ts[k] for k in wrt]
    # fn runs with its backend active, as the finite differences' run has NumPy: the tensors it
    # makes (gt.arange, gt.zeros, constants) are on the backend of its arguments
    with use_backend(backend), GradientTape() as tape:
        tape.watch(xs)
        loss = _loss(_call(fn, ts))
    if not loss.dtype.differentiable:
        name = getattr(fn, "__name__", "the function")
        raise TypeError(
            f"check_gradients: {name} returns {loss.dtype} values, and gradients need a floating output "
            "(a comparison or a count has no gradient): check a function that returns floats"
        )
    gs = tape.gradient(loss, xs, unconnected_gradients="zero")
    return [g.numpy() for g in gs]


def _native_grad(fn, arrays, wrt, backend):
    """The library's own autodiff of gradtape's forward: gradtape's ops run on the library's arrays
    (no gradtape tape), the library records them."""
    b = _backends.get(backend)
    natives = [asarray(a, backend=backend).native for a in arrays]

    def f(*xs):
        with use_backend(backend):
            return _loss(_call(fn, [wrap(x, b) for x in xs])).native

    gs = b.native_grad(f, *natives)
    return [b.to_numpy(gs[k]) for k in wrt]


def _tensorflow_grad(fn, arrays, wrt):
    """TensorFlow's tape on ``fn``: its tensors answer ``__array_namespace__()`` with
    ``tf.experimental.numpy`` for the duration of the call."""
    import tensorflow as tf
    import tensorflow.experimental.numpy as tnp

    had = "__array_namespace__" in vars(tf.Tensor)
    old = vars(tf.Tensor).get("__array_namespace__")
    tf.Tensor.__array_namespace__ = lambda self, api_version=None: tnp
    try:
        ts = [tf.constant(a) for a in arrays]
        with tf.GradientTape() as tape:
            for k in wrt:
                tape.watch(ts[k])
            y = fn(*ts)
            loss = tf.math.real(tf.reduce_sum(y)) if y.dtype.is_complex else tf.reduce_sum(y)
        gs = tape.gradient(loss, [ts[k] for k in wrt], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    finally:
        if had:
            tf.Tensor.__array_namespace__ = old
        else:
            del tf.Tensor.__array_namespace__
    return [np.asarray(g) for g in gs]


_NATIVE_NAMES = {"torch": "torch.autograd", "jax": "jax.grad"}


def native_method_name(backend: str) -> str:
    """The name :func:`check_gradients` gives ``backend``'s own autodiff in its report
    (``"torch.autograd"``, ``"jax.grad"``, else ``"<backend> autodiff"``)."""
    return _NATIVE_NAMES.get(backend, f"{backend} autodiff")


def _compare(a, b, ga, gb, k, mask, rtol, atol, note=""):
    ga, gb = np.asarray(ga), np.asarray(gb)
    if ga.shape != gb.shape:
        return PairResult(a, b, k, np.inf, np.inf, False, rtol, atol, f"shapes {ga.shape} vs {gb.shape}")
    keep = ~mask if mask is not None else np.ones(ga.shape, bool)
    err = np.abs(ga - gb)[keep]
    if err.size == 0:
        return PairResult(a, b, k, 0.0, 0.0, True, rtol, atol, note or "nothing to compare")
    scale = np.maximum(np.abs(ga), np.abs(gb))[keep]
    finite = np.isfinite(ga[keep]).all() and np.isfinite(gb[keep]).all()
    mabs = float(err.max()) if finite else np.inf
    big = scale > atol
    mrel = float((err[big] / scale[big]).max()) if big.any() and finite else (0.0 if finite else np.inf)
    ok = finite and bool(np.all(err <= atol + rtol * scale))
    return PairResult(a, b, k, mabs, mrel, ok, rtol, atol, note)


def check_gradients(
    fn: Callable[..., Any],
    *args: Any,
    backends: Iterable[str] | None = None,
    native: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    eps: float = 1e-6,
    progress: bool = False,
) -> GradientReport:
    """Cross-check the gradient of ``fn`` (written against the Array API) at ``args``.

    ``args`` are arrays, nested lists or scalars; floating ones are differentiated (in float64 /
    complex128), integer and bool ones passed as they are.  ``backends`` (default: every installed
    one) are the gradtape backends to run, each active while ``fn`` runs on it (so the tensors ``fn``
    makes, ``gt.arange(n)`` or a constant, are on it too); ``native`` adds each library's own autodiff and
    TensorFlow's tape when installed; finite differences are always computed.  ``rtol``/``atol``
    override the tolerances (defaults in float64: 1e-9/1e-11 between analytic gradients, 1e-5/1e-6
    against finite differences, which are always taken in float64; float32 inputs run in float32
    with looser defaults, see ``TOLERANCES``).  ``progress=True`` shows a bar on stderr, a step per
    backend (its gradtape and native gradients), TensorFlow and the finite differences.  Returns a
    :class:`GradientReport`; a method that cannot run ``fn`` is reported as skipped, with why; only
    the finite differences' run of ``fn`` on NumPy raises what ``fn`` raises (an ``AttributeError``
    for an array method the standard lacks, such as ``x.sum()``, names the function to use).
    Nothing else raises unless you call ``.raise_if_failed()``.
    """
    arrays = [_as_input(a) for a in args]
    wrt = [k for k, a in enumerate(arrays) if a.dtype.kind in "fc"]
    single = any(arrays[k].dtype in (np.float32, np.complex64) for k in wrt)
    (fd_rtol, fd_atol), (ex_rtol, ex_atol) = TOLERANCES["float32" if single else "float64"]
    if not wrt:
        raise ValueError("check_gradients needs at least one floating-point argument to differentiate")
    names = list(backends) if backends is not None else available_backends()
    has_tf = native and importlib.util.find_spec("tensorflow") is not None
    bar = tqdm(
        total=len(names) + has_tf + 1,
        desc="check_gradients",
        unit="step",
        file=sys.stderr,
        dynamic_ncols=True,
        disable=not progress,
        leave=False,
    )
    methods, skipped = {}, {}
    for name in names:
        bar.set_postfix_str(f"gradtape:{name}")
        try:
            methods[f"gradtape:{name}"] = _gradtape_grad(fn, arrays, wrt, name)
        except Exception as e:  # a backend that cannot run fn is reported, not fatal
            skipped[f"gradtape:{name}"] = _why(e)
        if native:
            try:
                b = _backends.get(name)
            except (ValueError, ImportError):  # already reported as gradtape:<name>'s skip
                b = None
            if getattr(b, "supports_native_grad", False):
                label = native_method_name(name)
                bar.set_postfix_str(label)
                try:
                    methods[label] = _native_grad(fn, arrays, wrt, name)
                except Exception as e:
                    skipped[label] = _why(e)
        bar.update()
    if native and not has_tf:
        skipped["tensorflow"] = "not installed (python3 -m pip install tensorflow)"
    elif has_tf:
        bar.set_postfix_str("tensorflow")
        try:
            methods["tensorflow"] = _tensorflow_grad(fn, arrays, wrt)
        except Exception as e:
            skipped["tensorflow"] = _why(e)
        bar.update()

    def value(*xs):
        with use_backend("numpy"):
            return float(_loss(_call(fn, [asarray(x) for x in xs])).numpy())

    bar.set_postfix_str("finite differences")
    try:
        diffs = finite_differences(value, arrays, wrt, eps=eps)  # in float64 / complex128
    finally:
        bar.update()
        bar.close()
    methods["finite differences"] = [diffs[k][0] for k in wrt]
    kinks, masks = {}, {}
    for j, k in enumerate(wrt):
        _, fw, bw = diffs[k]
        mask = np.abs(fw - bw) > 1e-3 * np.maximum(1.0, np.abs(fw) + np.abs(bw))
        masks[j] = mask
        if mask.any():
            kinks[k] = [tuple(int(i) for i in ix) for ix in np.argwhere(mask)]

    pairs = []
    for (ma, ga), (mb, gb) in itertools.combinations(methods.items(), 2):
        numeric = "finite differences" in (ma, mb)
        rt = rtol if rtol is not None else (fd_rtol if numeric else ex_rtol)
        at = atol if atol is not None else (fd_atol if numeric else ex_atol)
        for j, k in enumerate(wrt):
            pairs.append(_compare(ma, mb, ga[j], gb[j], k, masks[j], rt, at))
    return GradientReport(
        methods={m: dict(zip(wrt, g)) for m, g in methods.items()}, pairs=pairs, skipped=skipped, kinks=kinks
    )
