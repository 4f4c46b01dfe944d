"""``gradtape audit MODULE``: which public functions of a library differentiate correctly on gradtape.

For every public callable of a module (``scipy.special``, ``sklearn.metrics``, ``einops``, ...) the
audit

1. derives inputs (:func:`plan_inputs`): an entry of :data:`OVERRIDES` (a small table, by qualified
   name), else the ufunc's type signatures (``scipy.special``'s ufuncs: which arguments are integer
   orders), else the signature's required positional parameters and the numpydoc ``Parameters``
   section (``of shape (n_samples, n_features)`` gives the shape, ``int`` an integer, a label-like
   name such as ``y_true`` integer class labels); floating arrays are float64, drawn in the first
   of :data:`RANGES` where the library's own NumPy run is finite and has finite differences;
2. takes the references from the library's NumPy run: its values, and central finite differences
   (float64) of ``L = sum_k sum(w_k * y_k)`` over its floating outputs ``y_k`` (``w_k`` fixed
   random weights, so that ``sum(softmax(x))`` does not hide the gradient);
3. on every backend, calls the function on gradtape tensors under a ``GradientTape`` (a time limit
   per call), and, where the backend's library has its own autodiff (``torch.autograd``,
   ``jax.grad``), runs the library on that library's arrays and differentiates it natively;
4. classifies each (function, backend) into one of :data:`VERDICTS`.

The result, :class:`AuditReport`, prints as a Markdown table per module, and is written as JSON or
(``gradtape.conformance.audit_html``) HTML.  Everything is deterministic: functions in name order,
inputs drawn from a seed derived from the function's name, no timings in the output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import json
import math
import os
import re
import signal
import sys
import threading
import traceback
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from gradtape import backends as _backends
from gradtape.autodiff.tape import GradientTape
from gradtape.core.config import available_backends, config, use_backend
from gradtape.core.tensor import GradientLeakWarning, Tensor
from gradtape.ops.creation import asarray
from gradtape.ops.statistical import sum as _sum
from gradtape.testing import finite_differences
from gradtape.testing.crosscheck import TOLERANCES, native_method_name

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "CLASS_METHODS",
    "DISTRIBUTION_METHODS",
    "OVERRIDES",
    "RANGES",
    "VERDICTS",
    "Arr",
    "AuditReport",
    "FunctionAudit",
    "Ints",
    "Labels",
    "Outcome",
    "Plan",
    "audit",
    "audit_function",
    "plan_inputs",
    "prepare",
    "public_callables",
]

#: the verdicts, best first: (key, label, what it means)
VERDICTS = (
    (
        "correct",
        "correct",
        "the gradient agrees with finite differences (and torch.autograd / jax.grad where they run)",
    ),
    ("lost", "gradient lost", "the value left the tape (converted to NumPy or a Python number) at the place given"),
    (
        "wrong",
        "wrong gradient",
        "the gradient (or value) differs from finite differences or the library's own autodiff",
    ),
    ("nan", "NaN", "the gradient is NaN or infinite where the value and finite differences are finite"),
    ("nondiff", "not differentiable", "integer or boolean output, or no floating input: nothing to differentiate"),
    ("error", "error", "calling it on gradtape tensors raised (the message), or it ran past the time limit"),
    ("notdriven", "not driven", "the audit could not derive inputs the library's own NumPy run accepts (why)"),
)
_VERDICT_KEYS = tuple(k for k, _, _ in VERDICTS)
LABELS = {k: label for k, label, _ in VERDICTS}

#: the ranges floating inputs are drawn from, tried in order until the library's NumPy run is finite
RANGES = ((0.1, 0.9), (1.1, 3.0), (-0.9, 0.9), (-3.0, -1.1))

#: tolerances (rtol, atol): against finite differences, and between two autodiffs of one function
FD_TOL = TOLERANCES["float64"][0]
AD_TOL = (1e-7, 1e-9)
VALUE_TOL = (1e-7, 1e-9)

DEFAULT_TIME_LIMIT = 60.0  # seconds per call of a function on one backend (JAX compiles each op eagerly)


# ---------------------------------------------------------------------------------------- inputs
@dataclasses.dataclass(frozen=True)
class Arr:
    """A float64 array input (differentiated): ``shape``, drawn uniformly in ``[lo, hi)`` (None: in
    the first of :data:`RANGES` where the library's NumPy run works)."""

    shape: tuple[int, ...] = (3,)
    lo: float | None = None
    hi: float | None = None


@dataclasses.dataclass(frozen=True)
class Labels:
    """An integer array of class labels (not differentiated): ``shape``, values cycling over
    ``range(classes)`` (every class present)."""

    shape: tuple[int, ...] = (6,)
    classes: int = 2


@dataclasses.dataclass(frozen=True)
class Ints:
    """An integer array of fixed values (an order, a count; not differentiated)."""

    values: tuple[int, ...] = (1, 2, 3)


@dataclasses.dataclass
class Plan:
    """How a function is called: positional ``args`` and ``kwargs`` (:class:`Arr`, :class:`Labels`,
    :class:`Ints` or plain Python values), the ``source`` of that choice, and ``call``, the callable
    (a method of an object, for a distribution); ``why`` is set when no inputs could be derived."""

    args: list[Any] = dataclasses.field(default_factory=list)
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    source: str = ""
    why: str = ""
    label_names: tuple[str, ...] = ()  # parameters that may hold labels instead of values
    call: Callable[..., Any] | None = None  # what is called instead of the object itself
    called: str = ""  # how ``call`` is shown ("norm.logpdf(x, *shapes)")


def _A(*shape, lo=None, hi=None):
    return Arr(tuple(shape), lo, hi)


#: inputs the signature and docstring cannot give, by qualified name: {"args": [...], "kwargs": {...}}
#: (:class:`Arr` / :class:`Labels` / :class:`Ints` for arrays, plain values otherwise), or
#: {"skip": why} for a callable the audit must not call
OVERRIDES: dict[str, dict[str, Any]] = {
    # einops: a tensor and a pattern
    "einops.rearrange": {"args": [_A(2, 3, 4), "a b c -> c (a b)"]},
    "einops.reduce": {"args": [_A(2, 3, 4), "a b c -> a c", "mean"]},
    "einops.repeat": {"args": [_A(2, 3), "a b -> a b r"], "kwargs": {"r": 2}},
    "einops.einsum": {"args": [_A(2, 3), _A(3, 4), "a b, b c -> a c"]},
    "einops.pack": {"args": [[_A(2, 3), _A(2, 4)], "a *"]},
    "einops.unpack": {"args": [_A(2, 7), [(3,), (4,)], "a *"]},
    "einops.parse_shape": {"args": [_A(2, 3), "a b"]},
    "einops.asnumpy": {"args": [_A(2, 3)]},
    # scipy.special: arguments the ufunc types do not tell
    "scipy.special.logsumexp": {"args": [_A(4)]},
    "scipy.special.softmax": {"args": [_A(4)]},
    "scipy.special.log_softmax": {"args": [_A(4)]},
    "scipy.special.comb": {"args": [_A(3, lo=4.0, hi=6.0), _A(3, lo=1.0, hi=3.0)]},
    "scipy.special.perm": {"args": [_A(3, lo=4.0, hi=6.0), _A(3, lo=1.0, hi=3.0)]},
    "scipy.special.polygamma": {"args": [Ints((1, 2, 3)), _A(3, lo=0.5, hi=2.0)]},
    "scipy.special.multigammaln": {"args": [_A(3, lo=2.0, hi=4.0), 2]},
    "scipy.special.zeta": {"args": [_A(3, lo=1.5, hi=3.0)]},
    "scipy.special.seterr": {"skip": "changes SciPy's error handling process-wide"},
    # scipy.stats: functions of samples
    "scipy.stats.pearsonr": {"args": [_A(6), _A(6)]},
    "scipy.stats.spearmanr": {"args": [_A(6), _A(6)]},
    "scipy.stats.linregress": {"args": [_A(6), _A(6)]},
    "scipy.stats.ttest_ind": {"args": [_A(6), _A(6)]},
    "scipy.stats.ttest_rel": {"args": [_A(6), _A(6)]},
    "scipy.stats.moment": {"args": [_A(6)], "kwargs": {"order": 3}},
    "scipy.stats.entropy": {"args": [_A(4)]},
    "scipy.stats.power_divergence": {"args": [_A(4, lo=1.0, hi=3.0)]},
    "scipy.stats.chisquare": {"args": [_A(4, lo=1.0, hi=3.0)]},
    "scipy.stats.sigmaclip": {"skip": "an iterative clip whose result's size depends on the data"},
    "scipy.stats.multiscale_graphcorr": {"skip": "a permutation test (1000 resamples a call): too slow to difference"},
    # sklearn.metrics: functions of two sample sets
    "sklearn.metrics.pairwise_distances": {"args": [_A(4, 3), _A(5, 3)]},
    "sklearn.metrics.pairwise_kernels": {"args": [_A(4, 3), _A(5, 3)]},
    "sklearn.metrics.pairwise_distances_chunked": {"skip": "a generator of chunks"},
    # row_norms takes a matrix (einsum "ij,ij->i"); the docstring gives no shape
    "sklearn.utils.extmath.row_norms": {"args": [_A(4, 3)]},
    "sklearn.metrics.pairwise.row_norms": {"args": [_A(4, 3)]},
}

#: the method audited on an instance of a class of this name (SciPy's distribution objects), called
#: as ``method(x, *shapes)`` with the distribution's ``numargs`` shape parameters
DISTRIBUTION_METHODS = {"rv_continuous": "logpdf", "rv_discrete": "logpmf"}

#: classes audited through one method of an instance: {"params": constructor keywords taken from
#: the first arguments, "method": the method called with the rest}
CLASS_METHODS: dict[str, dict[str, Any]] = {
    "scipy.stats.Normal": {
        "params": ["mu", "sigma"],
        "method": "logpdf",
        "args": [_A(3), _A(3, lo=0.5, hi=2.0), _A(3)],
    },
    "scipy.stats.Logistic": {"params": [], "method": "logpdf", "args": [_A(3)]},
    "scipy.stats.Uniform": {
        "params": ["a", "b"],
        "method": "cdf",
        "args": [_A(3, lo=-2.0, hi=-1.0), _A(3, lo=1.0, hi=2.0), _A(3)],
    },
}

#: a context the library computes in while it is audited, by top-level package
CONTEXTS: dict[str, Callable[[], Any]] = {
    "sklearn": lambda: importlib.import_module("sklearn").config_context(array_api_dispatch=True),
}

#: symbolic sizes of the docstrings' shapes (``of shape (n_samples, n_features)``); others: 3
SIZES = {
    "n_samples": 6,
    "n_features": 3,
    "n_classes": 3,
    "n_outputs": 2,
    "n_samples_x": 4,
    "n_samples_y": 5,
    "n_labels": 3,
    "n_components": 2,
}
_LABEL_NAME = re.compile(r"^(y|y_true|labels|labels_true|labels_pred|classes)$")
_INT_FIRST = "lqip"


def _doc_params(doc: str | None) -> dict[str, str]:
    """``{name: type text}`` from a numpydoc ``Parameters`` section."""
    if not doc:
        return {}
    lines = inspect.cleandoc(doc).splitlines()
    out: dict[str, str] = {}
    inside = False
    for i, line in enumerate(lines):
        if line.strip() == "Parameters" and i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}:
            inside = True
            continue
        if not inside:
            continue
        if i + 1 < len(lines) and lines[i + 1].strip() and set(lines[i + 1].strip()) == {"-"} and out:
            break  # the next section
        m = re.match(r"^(\w+)\s*:\s*(.*)$", line)
        if m and not line.startswith(" "):
            for name in m.group(1).split(","):
                out[name.strip()] = m.group(2).strip()
    return out


def _doc_shape(text: str) -> tuple[int, ...] | None:
    m = re.search(r"shape\s*(?:=\s*)?\(([^)]*)\)", text)
    if not m:
        return None
    dims = [d.strip() for d in m.group(1).split(",") if d.strip()]
    shape = []
    for d in dims:
        if d.isdigit():
            shape.append(int(d))
        elif re.fullmatch(r"\w+", d):
            d = d.lower()
            shape.append(SIZES.get(d, SIZES["n_samples"] if d.startswith("n_samples") else 3))
        else:
            return None
    return tuple(shape)


def _ufunc_of(fn):
    f = fn if isinstance(fn, np.ufunc) else getattr(fn, "__wrapped__", None)
    return f if isinstance(f, np.ufunc) else None


def _ufunc_plan(uf) -> Plan:
    """Arguments of a ufunc from its type signatures: among those with real float64 outputs, the
    one with the most integer inputs (the integer orders of ``eval_legendre``, ``yn``, ``bdtr``)."""
    best = None
    for sig in uf.types:
        ins, outs = sig.split("->")
        if set(outs) != {"d"} or not set(ins) <= set("d" + _INT_FIRST):
            continue
        score = sum(c in _INT_FIRST for c in ins)
        if best is None or score > best[0]:
            best = (score, ins)
    if best is None:
        return Plan(why=f"ufunc {uf.__name__} has no real float64 loop ({', '.join(uf.types[:4])}...)")
    args = [Ints() if c in _INT_FIRST else Arr() for c in best[1]]
    return Plan(args=args, source=f"ufunc loop {best[1]}->" + "d" * uf.nout)


def plan_inputs(qualname: str, fn: Callable[..., Any]) -> Plan:
    """How to call ``fn`` (named ``qualname``, e.g. ``"scipy.special.erf"``): :data:`OVERRIDES`,
    else the ufunc's loops, else the signature and docstring.  A :class:`Plan` whose ``why`` says
    why none could be derived."""
    if qualname in OVERRIDES:
        o = OVERRIDES[qualname]
        if "skip" in o:
            return Plan(why=o["skip"], source="override")
        return Plan(args=list(o.get("args", [])), kwargs=dict(o.get("kwargs", {})), source="override")
    if qualname in CLASS_METHODS:
        c = CLASS_METHODS[qualname]
        params, method = list(c["params"]), c["method"]

        def construct_and_call(*a, _cls=fn, _params=params, _method=method):
            obj = _cls(**dict(zip(_params, a)))
            return getattr(obj, _method)(*a[len(_params) :])

        called = f"{fn.__name__}({', '.join(params)}).{method}(x)"
        return Plan(args=list(c["args"]), source="override", call=construct_and_call, called=called)
    if inspect.isclass(fn):
        return Plan(why="a class: its methods are not audited")
    kinds = [c.__name__ for c in type(fn).__mro__]
    method = next((DISTRIBUTION_METHODS[k] for k in kinds if k in DISTRIBUTION_METHODS), None)
    if method is not None:
        shapes = int(getattr(fn, "numargs", 0))
        x: Any = Ints() if method == "logpmf" else Arr()
        names = (getattr(fn, "shapes", None) or "").replace(" ", "")
        return Plan(
            args=[x] + [Arr() for _ in range(shapes)],
            source="distribution",
            call=getattr(fn, method),
            called=f"{type(fn).__name__.removesuffix('_gen')}.{method}(x{', ' + names if names else ''})",
        )
    if not (inspect.isroutine(fn) or isinstance(fn, np.ufunc) or _ufunc_of(fn) is not None):
        what = f"an instance of {type(fn).__name__}, not a function"
        return Plan(why=f"{what} (its methods are not audited; OVERRIDES can give its inputs)")
    uf = _ufunc_of(fn)
    if uf is not None:
        return _ufunc_plan(uf)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return Plan(why="no signature to derive inputs from (add it to OVERRIDES)")
    doc = _doc_params(inspect.getdoc(fn))
    P = inspect.Parameter
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    labels = []
    for p in sig.parameters.values():
        if p.default is not P.empty or p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            continue
        text = doc.get(p.name, "").lower()
        shape = _doc_shape(text)
        arrayish = any(w in text for w in ("array", "ndarray", "tensor", "sequence", "list"))
        if re.match(r"^(callable|function)", text):
            return Plan(why=f"parameter {p.name!r} is a function ({text[:40]})")
        if re.match(r"^(str|string|\{['\"])", text) and not arrayish:
            return Plan(why=f"parameter {p.name!r} takes a string ({text[:40]}): add it to OVERRIDES")
        if re.match(r"^int\b", text) and not arrayish:
            value: Any = 2
        elif re.match(r"^bool\b", text):
            value = True
        elif re.match(r"^(float|scalar)\b", text) and not arrayish:
            value = 0.5  # a parameter (fbeta_score's beta), not a value to differentiate
        else:
            value = Arr(shape or (SIZES["n_samples"],))
            if _LABEL_NAME.match(p.name) or "label" in text:
                labels.append(p.name)
        if p.kind is P.KEYWORD_ONLY:
            kwargs[p.name] = value
        else:
            args.append(value)
    if not args and not kwargs:
        if any(p.kind is P.VAR_POSITIONAL for p in sig.parameters.values()):
            return Plan(why=f"its signature {sig} does not say what it takes: add it to OVERRIDES")
        return Plan(why="takes no required arguments: nothing to differentiate")
    return Plan(args=args, kwargs=kwargs, source="signature and docstring", label_names=tuple(labels))


# ---------------------------------------------------------------------------------------- results
@dataclasses.dataclass
class Outcome:
    """One function on one backend: its ``verdict`` (a key of :data:`VERDICTS`), a one-line
    ``detail`` (where the gradient was lost, the error, what differs), the largest relative error
    against finite differences, and notes (a native autodiff that did not run, kinks)."""

    verdict: str
    detail: str = ""
    max_rel_err: float | None = None
    notes: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class FunctionAudit:
    """One function: its module and name, the inputs used, and an :class:`Outcome` per backend."""

    module: str
    name: str
    inputs: str
    outcomes: dict[str, Outcome]

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def verdict(self) -> str:
        """The worst verdict over the backends (in :data:`VERDICTS`' order: lost before wrong ...)."""
        order = ("wrong", "nan", "lost", "error", "correct", "nondiff", "notdriven")
        return min((o.verdict for o in self.outcomes.values()), key=order.index, default="notdriven")


@dataclasses.dataclass
class AuditReport:
    """What :func:`audit` found: the modules, the backends, one :class:`FunctionAudit` per function
    (modules in the order given, functions in name order)."""

    modules: list[str]
    backends: list[str]
    functions: list[FunctionAudit]

    def counts(self, module: str | None = None) -> dict[str, int]:
        """``{verdict: number of (function, backend) outcomes}`` (of one module, or all)."""
        out = dict.fromkeys(_VERDICT_KEYS, 0)
        for f in self.functions:
            if module is None or f.module == module:
                for o in f.outcomes.values():
                    out[o.verdict] += 1
        return out

    @property
    def audited(self) -> int:
        """The number of functions the audit called (every one but those it could not drive)."""
        return sum(1 for f in self.functions if any(o.verdict != "notdriven" for o in f.outcomes.values()))

    def summary(self, module: str | None = None) -> str:
        fs = [f for f in self.functions if module is None or f.module == module]
        driven = sum(1 for f in fs if any(o.verdict != "notdriven" for o in f.outcomes.values()))
        counts = self.counts(module)
        parts = ", ".join(f"{LABELS[k]} {n}" for k, n in counts.items() if n)
        where = module or ", ".join(self.modules)
        return (
            f"audit of {where}: {len(fs)} public callables, {driven} driven, on {len(self.backends)} "
            f"backend(s) ({', '.join(self.backends)}); outcomes: {parts}"
        )

    def markdown(self, heading_level: int = 2) -> str:
        """A table per module (a row per function, a column per backend) and the summary lines."""
        h = "#" * heading_level
        out = []
        for mod in self.modules:
            fs = [f for f in self.functions if f.module == mod]
            out.append(f"{h} {mod}\n")
            out.append(self.summary(mod) + ".\n")
            out.append("| function | " + " | ".join(self.backends) + " | details |")
            out.append("|---|" + "---|" * len(self.backends) + "---|")
            for f in fs:
                cells = [_cell_text(f.outcomes.get(b)) for b in self.backends]
                out.append(f"| `{f.name}` | " + " | ".join(cells) + f" | {_md(_details(f))} |")
            out.append("")
        out.append(self.summary() + ".")
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        return {
            "modules": self.modules,
            "backends": self.backends,
            "counts": self.counts(),
            "audited": self.audited,
            "functions": [
                {
                    "module": f.module,
                    "name": f.name,
                    "inputs": f.inputs,
                    "verdict": f.verdict,
                    "outcomes": {b: dataclasses.asdict(o) for b, o in f.outcomes.items()},
                }
                for f in self.functions
            ],
        }

    def write_json(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.to_json(), fh, indent=1, allow_nan=True)
            fh.write("\n")

    def write_markdown(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(self.markdown() + "\n")

    def __str__(self) -> str:
        return self.markdown()


def _md(text):
    """Text for a Markdown table cell: no pipes, newlines, backticks or HTML tags (``<listcomp>``)."""
    text = str(text).replace("|", "\\|").replace("\n", " ").replace("`", "'")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cell_text(o: Outcome | None) -> str:
    if o is None:
        return "—"
    if o.verdict == "correct" and o.max_rel_err is not None:
        return f"correct ({_err(o.max_rel_err)})"
    return LABELS[o.verdict]


def _err(x: float) -> str:
    return "0" if x == 0 else f"{x:.0e}"


def _details(f: FunctionAudit) -> str:
    """The distinct details of a function's outcomes, each with the backends it holds for."""
    seen: dict[str, list[str]] = {}
    for b, o in f.outcomes.items():
        for d in [o.detail, *o.notes]:
            if d:
                seen.setdefault(d, []).append(b)
    n = len(f.outcomes)
    return "; ".join(d if len(bs) == n else f"{', '.join(bs)}: {d}" for d, bs in seen.items())


# ---------------------------------------------------------------------------------------- running
class AuditTimeout(BaseException):
    """A call ran past the audit's time limit (a BaseException, as KeyboardInterrupt: a library's
    ``except Exception`` fallback must not catch it and carry on with half a computation)."""


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`AuditTimeout` in the running code after ``seconds`` (SIGALRM: on the main
    thread of a Unix process; elsewhere the call runs without a limit)."""
    usable = (
        seconds is not None and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def expire(signum, frame):
        # raised again each second until the call has stopped: an exception raised where Python
        # ignores it (a garbage-collection callback, a __del__) must not end the limit
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        raise AuditTimeout(f"ran past the time limit of {seconds:g} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds or 0.0))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _one_line(e: BaseException, limit: int = 200, backend: str = "") -> str:
    """``Type: message`` on one line, at most ``limit`` characters, ``backend``'s name left out (so
    that one message on several backends reads once)."""
    text = " ".join(f"{type(e).__name__}: {e}".split())
    if backend:
        text = text.replace(f"backend {backend!r}", "backend …")
    return text if len(text) <= limit else text[: limit - 1] + "…"


_GRADTAPE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_THIS_FILE = os.path.abspath(__file__)


def _short_path(path: str) -> str:
    """A file's path without the machine's prefix: from the package folder for installed code,
    relative to the working directory for the user's."""
    path = os.path.abspath(path)
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in path:
            return path.split(marker, 1)[1]
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _leak_site(e: BaseException) -> str:
    """``file:line (function)`` of the innermost frame outside gradtape in the traceback of a
    ``GradientLeakWarning`` raised as an error: where the value left the tape."""
    where = ""
    for frame in traceback.extract_tb(e.__traceback__):
        path = os.path.abspath(frame.filename)
        if not path.startswith(_GRADTAPE_DIR):
            where = f"{_short_path(path)}:{frame.lineno} ({frame.name})"
    return where or "(place unknown)"


def _leaves(y: Any) -> list[Any]:
    """The arrays and numbers of a result: tuples, lists (scipy's result objects are tuples) and
    dicts (by key) are opened; strings and other objects are left out."""
    if isinstance(y, dict):
        return [e for k in sorted(y, key=str) for e in _leaves(y[k])]
    if isinstance(y, (tuple, list)):
        return [e for v in y for e in _leaves(v)]
    if isinstance(y, (Tensor, np.ndarray, np.generic, int, float, complex)) or (
        hasattr(y, "shape") and hasattr(y, "dtype")  # a library's array (torch.Tensor, jax.Array, ...)
    ):
        return [y]
    return []


def _np_kind(v: Any) -> str:
    return np.asarray(v).dtype.kind


def _seed(qualname: str) -> int:
    return zlib.crc32(qualname.encode())


def _draw(spec: Any, rng: np.random.Generator, rng_range: tuple[float, float], labelled: bool) -> Any:
    """A NumPy value for one input spec."""
    if isinstance(spec, Arr):
        if labelled:
            n = int(np.prod(spec.shape)) if spec.shape else 1
            return (np.arange(n) % 2).reshape(spec.shape).astype(np.int64)
        lo, hi = (spec.lo, spec.hi) if spec.lo is not None and spec.hi is not None else rng_range
        return rng.uniform(lo, hi, spec.shape)
    if isinstance(spec, Labels):
        n = int(np.prod(spec.shape))
        return (np.arange(n) % spec.classes).reshape(spec.shape).astype(np.int64)
    if isinstance(spec, Ints):
        return np.asarray(spec.values, dtype=np.int64)
    if isinstance(spec, list):
        return [_draw(s, rng, rng_range, labelled) for s in spec]
    return spec


def _describe(v: Any) -> str:
    if isinstance(v, np.ndarray):
        if v.dtype.kind == "f":
            lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 0.0)
            return f"float64{list(v.shape)} in [{lo:.2g}, {hi:.2g}]"
        return f"int{list(v.shape)} {v.ravel()[:6].tolist()}"
    if isinstance(v, list):
        return "[" + ", ".join(_describe(e) for e in v) + "]"
    return repr(v)


@dataclasses.dataclass
class _Reference:
    """The library's NumPy run at the chosen inputs."""

    args: list[Any]
    kwargs: dict[str, Any]
    wrt: list[tuple[int, ...]]  # paths of the float arrays: (position,) or (position, index in a list)
    values: list[np.ndarray]  # the floating outputs
    kinds: list[str]  # dtype kind of every output leaf
    weights: list[np.ndarray]
    fd: list[np.ndarray]  # per wrt: central differences
    kinks: list[np.ndarray]  # per wrt: where the one-sided differences disagree

    def describe(self) -> str:
        parts = [_describe(a) for a in self.args] + [f"{k}={_describe(v)}" for k, v in self.kwargs.items()]
        return ", ".join(parts)


def _get(args: list[Any], path: tuple[int, ...]) -> Any:
    v: Any = args
    for i in path:
        v = v[i]
    return v


def _replace(args: list[Any], path: tuple[int, ...], value: Any) -> list[Any]:
    out = list(args)
    if len(path) == 1:
        out[path[0]] = value
    else:
        inner = list(out[path[0]])
        inner[path[1]] = value
        out[path[0]] = inner
    return out


def _float_paths(args: list[Any]) -> list[tuple[int, ...]]:
    paths: list[tuple[int, ...]] = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            paths.append((i,))
        elif isinstance(a, list):
            paths += [(i, j) for j, e in enumerate(a) if isinstance(e, np.ndarray) and e.dtype.kind == "f"]
    return paths


def _map_arrays(args: list[Any], fn: Callable[[np.ndarray], Any]) -> list[Any]:
    return [
        fn(a)
        if isinstance(a, np.ndarray)
        else ([fn(e) if isinstance(e, np.ndarray) else e for e in a] if isinstance(a, list) else a)
        for a in args
    ]


def _reference(fn, plan: Plan, qualname: str, limit: float | None) -> _Reference | str:
    """The library's NumPy run at the first inputs it accepts with finite values and finite
    differences; a string saying why when none works."""
    # the ranges; then the label-like parameters as labels; then every array as labels
    attempts: list[tuple[tuple[float, float], str]] = [(r, "") for r in RANGES]
    if plan.label_names:
        attempts += [(RANGES[0], "named"), (RANGES[0], "all")]
    whys: list[str] = []  # why each attempt failed: the first is reported (the usual domain)
    for rng_range, as_labels in attempts:
        rng = np.random.default_rng(_seed(qualname))
        sig_names = _param_names(fn)
        args = []
        for i, spec in enumerate(plan.args):
            named = i < len(sig_names) and sig_names[i] in plan.label_names
            args.append(_draw(spec, rng, rng_range, as_labels == "all" or (as_labels == "named" and named)))
        kwargs = {
            k: _draw(v, rng, rng_range, as_labels == "all" or (as_labels == "named" and k in plan.label_names))
            for k, v in plan.kwargs.items()
        }
        try:
            with warnings.catch_warnings(), _time_limit(limit):
                warnings.simplefilter("ignore")
                leaves = _leaves(fn(*args, **kwargs))
                if not leaves:
                    whys.append("returns no arrays or numbers")
                    continue
                kinds = [_np_kind(v) for v in leaves]
                values = [np.asarray(v, dtype=np.float64) for v, k in zip(leaves, kinds) if k == "f"]
                if not all(np.all(np.isfinite(v)) for v in values):
                    whys.append(f"non-finite values at inputs in {list(rng_range)}")
                    continue
                weights = [
                    np.random.default_rng(_seed(qualname) + 1 + i).standard_normal(v.shape)
                    for i, v in enumerate(values)
                ]
                wrt = _float_paths(args)
                fds, kinks = [], []
                if wrt and values:
                    flat = [_get(args, p) for p in wrt]

                    def loss(*xs, args=args, wrt=wrt, kwargs=kwargs, weights=weights):
                        call = args
                        for p, x in zip(wrt, xs):
                            call = _replace(call, p, x)
                        ys = [
                            np.asarray(v, dtype=np.float64) for v in _leaves(fn(*call, **kwargs)) if _np_kind(v) == "f"
                        ]
                        return float(sum(np.sum(w * y) for w, y in zip(weights, ys)))

                    diffs = finite_differences(loss, flat)
                    for k in range(len(flat)):
                        central, fw, bw = diffs[k]
                        if not (np.all(np.isfinite(central)) and np.all(np.isfinite(fw)) and np.all(np.isfinite(bw))):
                            raise FloatingPointError("non-finite finite differences")
                        fds.append(central)
                        kinks.append(np.abs(fw - bw) > 1e-3 * np.maximum(1.0, np.abs(fw) + np.abs(bw)))
        except AuditTimeout as e:
            return f"the library's NumPy run {e}"
        except Exception as e:
            whys.append(_one_line(e, 160))
            continue
        return _Reference(args, kwargs, wrt, values, kinds, weights, fds, kinks)
    return f"no inputs it could derive run on NumPy ({whys[0]})"


def _param_names(fn) -> list[str]:
    try:
        return [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        return []


def _close(
    got: np.ndarray, want: np.ndarray, tol: tuple[float, float], mask: np.ndarray | None = None
) -> tuple[bool, float]:
    """Whether ``got`` is within ``atol + rtol * scale`` of ``want`` (outside ``mask``), and the
    largest relative error."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return False, math.inf
    keep = ~mask if mask is not None else np.ones(got.shape, bool)
    err = np.abs(got - want)[keep]
    if err.size == 0:
        return True, 0.0
    scale = np.maximum(np.abs(got), np.abs(want))[keep]
    rtol, atol = tol
    big = scale > atol
    rel = float((err[big] / scale[big]).max()) if big.any() else 0.0
    return bool(np.all(err <= atol + rtol * scale)), rel


def _native_gradients(fn, ref: _Reference, backend, limit: float | None) -> list[np.ndarray] | str:
    """The library run on the backend's own arrays, differentiated by the library's autodiff
    (``Backend.native_grad``); a string saying why when it does not run."""
    natives = _map_arrays(ref.args, lambda a: asarray(a, backend=backend.name).native)
    flat = [_get(natives, p) for p in ref.wrt]
    ws = [asarray(w, backend=backend.name).native for w in ref.weights]
    xp = backend.xp

    def loss(*xs):
        call = natives
        for p, x in zip(ref.wrt, xs):
            call = _replace(call, p, x)
        kw = {
            k: (asarray(v, backend=backend.name).native if isinstance(v, np.ndarray) else v)
            for k, v in ref.kwargs.items()
        }
        leaves = _leaves(fn(*call, **kw))
        if any(isinstance(v, (np.ndarray, np.generic)) for v in leaves):
            raise TypeError("it returns NumPy arrays for the library's own arrays")
        ys = [v for v, k in zip(leaves, ref.kinds) if k == "f"]
        total = 0.0
        for y, w in zip(ys, ws):
            total = total + xp.sum(y * w)
        return total

    try:
        with warnings.catch_warnings(), _time_limit(limit):
            warnings.simplefilter("ignore")
            gs = backend.native_grad(loss, *flat)
        return [backend.to_numpy(g) for g in gs]
    except AuditTimeout as e:
        return str(e)
    except Exception as e:
        return _one_line(e, 60)


def _run_backend(fn, ref: _Reference, backend_name: str, limit: float | None, native: bool) -> Outcome:
    b = _backends.get(backend_name)
    args = _map_arrays(ref.args, lambda a: asarray(a, backend=backend_name))
    kwargs = {k: (asarray(v, backend=backend_name) if isinstance(v, np.ndarray) else v) for k, v in ref.kwargs.items()}
    xs = [_get(args, p) for p in ref.wrt]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warnings.simplefilter("error", GradientLeakWarning)
            with _time_limit(limit), use_backend(backend_name):
                with GradientTape(persistent=False) as tape:
                    tape.watch(xs)
                    leaves = _leaves(fn(*args, **kwargs))
                    outs = [v for v in leaves if isinstance(v, Tensor)]
                    floats = [v for v in outs if v.dtype.is_floating]
                    loss = None
                    if floats and len(floats) == len(ref.values):
                        loss = _sum(floats[0] * asarray(ref.weights[0], backend=backend_name))
                        for y, w in zip(floats[1:], ref.weights[1:]):
                            loss = loss + _sum(y * asarray(w, backend=backend_name))
                # a floating result that is not a gradtape tensor left the tape (ints, shapes: not values)
                other = sorted({type(v).__name__ for v in leaves if not isinstance(v, Tensor) and _np_kind(v) == "f"})
                if other and xs:
                    return Outcome("lost", f"returns {', '.join(other)}, not gradtape tensors")
                if not xs:
                    return Outcome("nondiff", "no floating input (the arguments are labels or integers)")
                if not ref.values or not floats:
                    return Outcome("nondiff", "integer or boolean output")
                if len(floats) != len(ref.values):
                    return Outcome("error", f"{len(floats)} floating outputs where NumPy gives {len(ref.values)}")
                grads = tape.gradient(loss, xs)
                values = [y.numpy() for y in floats]
                grads_np = [None if g is None else g.numpy() for g in grads]
    except GradientLeakWarning as e:
        return Outcome("lost", f"left the tape at {_leak_site(e)}")
    except AuditTimeout as e:
        return Outcome("error", str(e))
    except Exception as e:
        return Outcome("error", _one_line(e, backend=backend_name))
    for k, (got, want) in enumerate(zip(values, ref.values)):
        ok, rel = _close(got, want, VALUE_TOL)
        if not ok:
            return Outcome("wrong", f"output {k}'s value differs from NumPy's (relative error {_err(rel)})")
    worst = 0.0
    notes: list[str] = []
    for k, (g, fd, kink) in enumerate(zip(grads_np, ref.fd, ref.kinks)):
        if g is None:
            if np.any(fd[~kink] != 0):
                return Outcome("lost", f"argument {k} is not connected to the output (no conversion was seen)")
            g = np.zeros_like(fd)
        if not np.all(np.isfinite(g)):
            return Outcome("nan", f"argument {k}: the gradient is not finite where finite differences are")
        ok, rel = _close(g, fd, FD_TOL, kink)
        if not ok:
            return Outcome("wrong", f"argument {k}: relative error {_err(rel)} against finite differences", rel)
        worst = max(worst, rel)
        grads_np[k] = g
        if not np.any(fd[~kink]):
            notes.append(f"argument {k}: the gradient is zero (piecewise constant, as finite differences say)")
        if kink.any():
            notes.append(f"argument {k}: {int(kink.sum())} kink(s) not compared")
    if native and getattr(b, "supports_native_grad", False):
        label = native_method_name(backend_name)
        ng = _native_gradients(fn, ref, b, limit)
        if isinstance(ng, str):
            notes.append(f"{label} did not run ({ng})")
        else:
            for k, (g, n, fd, kink) in enumerate(zip(grads_np, ng, ref.fd, ref.kinks)):
                ok, rel = _close(np.asarray(g), n, AD_TOL, kink)
                if ok:
                    continue
                native_ok, _ = _close(n, fd, FD_TOL, kink)
                if native_ok:  # the library's own autodiff agrees with finite differences, gradtape does not
                    return Outcome("wrong", f"argument {k}: relative error {_err(rel)} against {label}", rel)
                notes.append(f"{label} differs from finite differences on argument {k}")
    return Outcome("correct", "", worst, notes)


@contextlib.contextmanager
def _float64() -> Iterator[None]:
    """Default float64 while the library runs (NumPy's, which SciPy and scikit-learn assume)."""
    old = config.floatx()
    config.set_floatx("float64")
    try:
        yield
    finally:
        config.set_floatx(old)


def audit_function(
    fn: Callable[..., Any],
    qualname: str,
    backends: Iterable[str] | None = None,
    *,
    plan: Plan | None = None,
    native: bool = True,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
) -> FunctionAudit:
    """Audit one function (named ``qualname``, ``"module.name"``) on ``backends`` (default: every
    installed one); ``plan`` (default :func:`plan_inputs`) says how to call it."""
    names = list(backends) if backends is not None else available_backends()
    module, _, name = qualname.rpartition(".")
    plan = plan if plan is not None else plan_inputs(qualname, fn)
    if plan.why:
        return FunctionAudit(module, name, "", {b: Outcome("notdriven", plan.why) for b in names})
    if plan.call is not None:
        fn = plan.call
    with _float64():
        ref = _reference(fn, plan, qualname, time_limit)
        if isinstance(ref, str):
            return FunctionAudit(module, name, "", {b: Outcome("notdriven", ref) for b in names})
        outcomes = {b: _run_backend(fn, ref, b, time_limit, native) for b in names}
    inputs = f"{plan.called}: {ref.describe()}" if plan.called else ref.describe()
    return FunctionAudit(module, name, inputs, outcomes)


def public_callables(module: Any) -> list[tuple[str, Any]]:
    """``(name, object)`` of a module's public callables (``__all__``, else the names without a
    leading underscore), in name order; submodules are left out."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")]
    out = []
    for n in sorted(set(names)):
        obj = getattr(module, n, None)
        if obj is None or inspect.ismodule(obj) or not callable(obj):
            continue
        out.append((n, obj))
    return out


def prepare(module_name: str) -> None:
    """SciPy's array-API dispatch (``SCIPY_ARRAY_API=1``, read once, when SciPy is first
    imported): set here before the module is imported; an error if SciPy was imported without it."""
    os.environ.setdefault("SCIPY_ARRAY_API", "1")
    if "scipy" in sys.modules:
        from scipy._lib._array_api import SCIPY_ARRAY_API  # (SciPy only when it is already imported)

        if not SCIPY_ARRAY_API:
            raise RuntimeError(
                f"auditing {module_name}: SciPy was imported before SCIPY_ARRAY_API=1 was set, so its "
                "array-API dispatch is off and every function would convert to NumPy; set "
                "SCIPY_ARRAY_API=1 in the environment (or before the first import of scipy) and run again"
            )


def audit(
    modules: Iterable[str],
    backends: Iterable[str] | None = None,
    *,
    native: bool = True,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
    names: Iterable[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> AuditReport:
    """Audit every public callable of each module named in ``modules`` (``"scipy.special"``, ...)
    on ``backends`` (default: every installed one).  ``names`` keeps only those function names;
    ``progress`` is called with each function's qualified name before it runs.  A name of ``names``
    that no module has is a ``ValueError``."""
    mods = list(modules)
    bnames = list(backends) if backends is not None else available_backends()
    keep = set(names) if names is not None else None
    found: set[str] = set()
    functions = []
    for mod_name in mods:
        prepare(mod_name)
        module = importlib.import_module(mod_name)
        ctx = CONTEXTS.get(mod_name.split(".")[0])
        with ctx() if ctx else contextlib.nullcontext():
            for name, obj in public_callables(module):
                if keep is not None and name not in keep:
                    continue
                found.add(name)
                qual = f"{mod_name}.{name}"
                if progress is not None:
                    progress(qual)
                functions.append(audit_function(obj, qual, bnames, native=native, time_limit=time_limit))
    if keep is not None and keep - found:
        raise ValueError(
            f"no public callable named {', '.join(sorted(keep - found))} in {', '.join(mods)}: "
            "the names are those of the module's __all__ (or its names without a leading underscore)"
        )
    return AuditReport(mods, bnames, functions)
