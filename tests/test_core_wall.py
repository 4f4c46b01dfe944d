"""The wall between the eager core and ``gt.function`` (issue 23, item 4).

The core -- ``registry``, ``tensor``, ``dispatch``, ``_engine``, ``_recording_state`` -- knows
nothing of tracing: it imports none of ``gradtape.backends.tracing``, ``gradtape.compile.function``,
``gradtape.compile.control_flow``, and no name or string in its code (comments and docstrings aside) says
"trace".  What the compile layer needs from it goes through three generic doors, each tested here on
every installed backend:

* ``Backend.op_impl(opdef)``: the one entry point from an op to a library's native callable
  (``OpDef.resolve`` caches what it returns; ``gt.function``'s stand-in backend returns the real
  adapter's, recorded as one step);
* ``Backend.capture(other, x)``: a backend that takes in another backend's array (a stand-in backend,
  a value captured from outside); dispatch tries it before raising its two-backends error;
* the running recording context of ``_recording_state``: told of each Variable created
  (``on_variable_created``) and asked for its own error when an op mixes backends.
"""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import recording_state as _recording_state
from gradtape.backends.numpy import NumpyBackend
from gradtape.core.registry import OpDef, get_op
from gradtape.core.tensor import wrap

ROOT = Path(__file__).resolve().parents[1] / "gradtape"
#: every module of the core (gradtape/core/)
CORE = sorted(p.name for p in (ROOT / "core").glob("*.py"))
FORBIDDEN_MODULES = ("gradtape.backends.tracing", "gradtape.compile.function", "gradtape.compile.control_flow")
#: parts of an identifier (split at ``_`` and case changes) that name tracing
TRACE_PARTS = {"trace", "traces", "traced", "tracing", "tracer", "tracers"}
TRACE_WORD = re.compile(r"\btraces?\b", re.IGNORECASE)


def _docstrings(tree):
    """The ``Constant`` nodes that are docstrings (of the module, a class or a function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _imported(node, package):
    """The modules an import statement imports (``from gradtape.backends import tracing`` imports
    ``gradtape.backends.tracing``; relative imports resolved against ``package``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
    return [base] + [f"{base}.{a.name}" for a in node.names]


def _identifier_parts(name):
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower().split("_")
    return {w for w in words if w}


def wall_violations(source, filename="<source>", package="gradtape.core"):
    """Every place in ``source`` where the core reaches the compile layer: an import of one of its
    modules (function-level imports included), an identifier naming tracing, a string (not a
    docstring) with the word "trace"/"traces".  Comments are not read."""
    tree = ast.parse(source, filename)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for mod in _imported(node, package):
                if any(mod == m or mod.startswith(m + ".") for m in FORBIDDEN_MODULES):
                    found.append(f"{filename}:{line}: imports {mod}")
            # (the names bound: ``import a.b`` binds ``a``)
            bound = (a.asname or (a.name.split(".")[0] if isinstance(node, ast.Import) else a.name) for a in node.names)
            names = list(bound)
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.arg, ast.keyword)):
            names = [node.arg] if node.arg else []
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if TRACE_WORD.search(node.value):
                found.append(f"{filename}:{line}: string {node.value!r}")
            continue
        else:
            continue
        for n in names:
            if _identifier_parts(n.split(".")[-1]) & TRACE_PARTS:
                found.append(f"{filename}:{line}: name {n!r}")
    return found


@pytest.mark.parametrize("name", CORE)
def test_the_core_names_no_trace(name):
    path = ROOT / "core" / name
    violations = wall_violations(path.read_text(), str(path.relative_to(ROOT.parent)))
    assert not violations, "the core reaches into gt.function's tracing:\n" + "\n".join(violations)


BAD = '''
"""A docstring may say trace."""
import gradtape.backends.tracing
from gradtape.compile import function
from ..compile import control_flow
from gradtape.core.recording_state import active_trace  # a comment may say trace

def f(x, tracer=None):
    """So may a function's docstring: the trace."""
    if x.backend.traced:
        raise ValueError("a trace mixes backends")
    return TraceArray
'''


def test_the_wall_check_finds_each_kind_of_breach():
    found = wall_violations(BAD)
    text = "\n".join(found)
    assert "imports gradtape.backends.tracing" in text
    assert "imports gradtape.compile.function" in text
    assert "imports gradtape.compile.control_flow" in text
    assert "name 'active_trace'" in text
    assert "name 'tracer'" in text
    assert "name 'traced'" in text
    assert "name 'TraceArray'" in text
    assert "string 'a trace mixes backends'" in text
    assert len(found) == 8, text  # (the docstrings and the comment are not read)
    assert wall_violations('"""trace."""\n# trace\nx = "with_traceback"\ny = e.__traceback__\n') == []


# ---------------------------------------------------------------------------- the generic doors
def test_resolve_caches_what_the_backend_op_impl_returns(backend, monkeypatch):
    b = gt.get_backend()
    op = OpDef("wall_probe", lambda xp, x: xp.sin(x) + 1.0)
    asked = []

    def op_impl(opdef):
        asked.append(opdef)
        return type(b).op_impl(b, opdef)

    monkeypatch.setattr(b, "op_impl", op_impl, raising=False)
    impl = op.resolve(b)
    assert asked == [op]
    assert op.impls[b] is impl
    x = b.asarray(np.array([0.0, 1.0]), dtype=gt.float64)
    np.testing.assert_allclose(b.to_numpy(impl(x)), np.sin([0.0, 1.0]) + 1.0)
    # the default: the namespace function a name gives, and an adapter's override first
    assert type(b).op_impl(b, get_op("sin")) is b.xp.sin
    for name, override in b.overrides.items():
        assert type(b).op_impl(b, get_op(name)) is override


def test_a_traced_op_is_the_real_impl_recorded_as_one_step(backend):
    @gt.function(jit_compile=False)
    def f(x):
        return gt.sin(x)

    x = gt.constant([0.5, 1.0], dtype=gt.float64)
    np.testing.assert_allclose(f(x).numpy(), np.sin([0.5, 1.0]))
    (program,) = next(iter(f._cache.values()))
    assert program.source.count("# sin") == 1, program.source
    sin = get_op("sin")
    real = gt.get_backend()
    traced = [
        impl for b, impl in sin.impls.items() if b is not real and b.stand_ins and getattr(b, "real", None) is real
    ]
    assert len(traced) == 1 and traced[0].__wrapped__ is sin.resolve(real)


class _Other(NumpyBackend):
    """A second backend instance (not registered): its tensors mix with no other backend's."""

    name = "wall_other"


class _Taker(NumpyBackend):
    """A backend that takes in any backend's arrays (as a stand-in backend takes its real one's)."""

    name = "wall_taker"

    def capture(self, other, x):
        return np.asarray(other.to_numpy(x))


class _Context:
    """A recording context as the core sees it."""

    def __init__(self, error=None):
        self.thread = threading.get_ident()
        self.variables = []
        self.mixed = []
        self.error = error

    def on_variable(self, v):
        self.variables.append(v)

    def mixed_backends(self, b1, b2):
        self.mixed.append((b1, b2))
        if self.error is not None:
            raise self.error


@pytest.fixture
def context():
    ctx = _Context()
    assert _recording_state.recording_context[0] is None
    _recording_state.recording_context[0] = ctx
    try:
        yield ctx
    finally:
        _recording_state.recording_context[0] = None


def test_a_variable_created_is_told_to_the_running_context_of_its_thread(backend, context):
    v = gt.Variable(gt.constant([1.0, 2.0]), name="told")
    assert context.variables == [v]
    made = []
    t = threading.Thread(target=lambda: made.append(gt.Variable(gt.constant(3.0), name="elsewhere")))
    t.start()
    t.join()
    assert len(made) == 1 and context.variables == [v]  # another thread's variables are its own


def test_mixed_backends_ask_the_running_context_for_its_error(backend, context):
    x = gt.constant([1.0, 2.0], dtype=gt.float64)
    other = _Other()
    y = wrap(other.asarray(np.array([3.0, 4.0]), dtype=gt.float64), other)
    with pytest.raises(ValueError, match="got tensors of two backends"):
        gt.add(x, y)
    assert context.mixed == [(x._b, other)]
    context.error = ValueError("the context's own message")
    with pytest.raises(ValueError, match="the context's own message"):
        gt.add(x, y)


def test_a_backend_that_captures_takes_the_other_backends_tensor(backend):
    x = gt.constant([1.0, 2.0], dtype=gt.float64)
    taker = _Taker()
    y = wrap(taker.asarray(np.array([3.0, 4.0]), dtype=gt.float64), taker)
    z = gt.add(x, y)
    assert z._b is taker
    np.testing.assert_array_equal(np.asarray(taker.to_numpy(z._v)), [4.0, 6.0])
    with pytest.raises(ValueError, match="got tensors of two backends"):  # the default takes nothing in
        gt.add(x, wrap(_Other().asarray(np.array([3.0, 4.0]), dtype=gt.float64), _Other()))
