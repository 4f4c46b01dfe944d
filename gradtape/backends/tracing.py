"""Capturing a step as a flat program of native calls: the engine of ``gt.function``.

A trace runs the user's function once, eagerly, on *stand-in arrays*: every native array of the
traced backend is a :class:`TraceArray` that holds its concrete value (so the first call computes
exactly what eager gradtape computes) and a slot number.  The traced tensors live on a
:class:`TracingBackend`, which wraps the real adapter: every call that makes an array -- an op's
native forward, a function of the namespace a gradient rule calls, an operator or a method on a
native array, the adapter's conversions -- runs on the concrete values and is appended to the
:class:`Trace` as one *step* (the callable, its arguments with the stand-ins as slot references,
its output slots).  Dispatch, Tensor wrapping, taping and the backward walk's bookkeeping run only
while tracing; what is left is the native program of the forward, the gradient and the updates.

:meth:`Trace.program` turns the live steps into Python source (``t5 = f3(t1, t2)``; operators as
operators, ``t6 = t5 * t1``) with the callables and constants as globals: replayed as it is on
NumPy, array_api_strict and PyTorch, compiled by ``jax.jit`` or ``torch.compile``.

What depends on a value rather than on shapes and dtypes cannot be captured: ``bool()``,
``int()``, ``float()`` or a NumPy conversion of a traced array raise
:class:`OperatorNotAllowedInGraphError`; ``gt.cond``/``gt.while_loop`` record a *guard* instead (the
program checks the predicate is what it was when traced; if not, the function is traced again).
Random numbers are drawn on the host (:func:`host_draw`): each draw is an input of the program,
drawn again before every call.

This module knows native arrays and backends only: ``gradtape/compile/function.py`` holds the front end.
"""

from __future__ import annotations

import operator
import threading
import types

import numpy as np

from gradtape.core import dtypes as _dt
from gradtape.core.recording_state import active_context, recording_context
from gradtape.core.tensor import user_site, wrap
from gradtape.backends import Backend

__all__ = [
    "OperatorNotAllowedInGraphError",
    "Trace",
    "TraceArray",
    "TracingBackend",
    "tracing_backend",
    "host_draw",
    "host_then",
    "run_draw",
    "value_check",
    "GuardFailed",
    "NotLowerable",
    "QUIET",
]


class OperatorNotAllowedInGraphError(TypeError):
    """A value-dependent Python use of a traced tensor inside ``gt.function`` (``bool``, ``int``,
    ``float``, NumPy conversion), as TensorFlow's ``tf.errors.OperatorNotAllowedInGraphError``."""


#: > 0 while a program runs to be checked, not for the user: host effects (``gt.print``) stay quiet
QUIET = [0]


class NotLowerable(Exception):
    """A ``gt.cond`` / ``gt.while_loop`` that cannot become one structured step of the program (a
    branch assigns a variable, draws random numbers, or the gradient is taken while a tape records):
    the function is traced again with its predicates as guards (path by path)."""


class GuardFailed(Exception):
    """A replayed program met a predicate (``gt.cond``/``gt.while_loop``) whose value differs from
    the one it was traced with (``args[0]``: the guard's index)."""


def _not_allowed(what, trace):
    if trace is not None and trace.closed:
        _finished(trace)
    name = trace.name if trace is not None else "a gt.function"
    if what == "bool":
        hint = (
            "use gt.cond(pred, true_fn, false_fn) or gt.while_loop(cond, body, loop_vars) for control flow "
            "on a tensor, or pass the value as a Python argument (the function is traced once per value)"
        )
    else:
        hint = (
            "compute with gradtape ops instead, return the tensor and convert (or print) it outside, or pass "
            "the value as a Python argument (the function is traced once per value)"
        )
    raise OperatorNotAllowedInGraphError(
        f"using a traced tensor as a Python {what} is not allowed inside gt.function {name!r} (at {user_site()}): "
        f"its value is not known when the step is traced, only its shape and dtype; {hint}"
    )


# ------------------------------------------------------------------------------------ stand-in arrays
_BINARY = {
    "__add__": (operator.add, "+"),
    "__sub__": (operator.sub, "-"),
    "__mul__": (operator.mul, "*"),
    "__truediv__": (operator.truediv, "/"),
    "__floordiv__": (operator.floordiv, "//"),
    "__mod__": (operator.mod, "%"),
    "__pow__": (operator.pow, "**"),
    "__matmul__": (operator.matmul, "@"),
    "__and__": (operator.and_, "&"),
    "__or__": (operator.or_, "|"),
    "__xor__": (operator.xor, "^"),
    "__lshift__": (operator.lshift, "<<"),
    "__rshift__": (operator.rshift, ">>"),
    "__lt__": (operator.lt, "<"),
    "__le__": (operator.le, "<="),
    "__gt__": (operator.gt, ">"),
    "__ge__": (operator.ge, ">="),
    "__eq__": (operator.eq, "=="),
    "__ne__": (operator.ne, "!="),
}
_UNARY = {
    "__neg__": (operator.neg, "-"),
    "__pos__": (operator.pos, "+"),
    "__invert__": (operator.invert, "~"),
    "__abs__": (operator.abs, None),
}
#: operator function -> its symbol, for the generated source
_SYMBOL = {f: s for f, s in list(_BINARY.values()) + list(_UNARY.values()) if s is not None}
_UNARY_FNS = frozenset(f for f, _ in _UNARY.values())
#: methods of native arrays whose result is a value read into Python
_VALUE_METHODS = {
    "item": "scalar",
    "tolist": "list",
    "numpy": "NumPy array",
    "tobytes": "bytes",
    "__array__": "NumPy array",
    "__dlpack__": "DLPack capsule",
    "data_ptr": "pointer",
}


class _AttrGet:
    """A step reading an attribute that is an array (``x.T``, ``x.mT``, ``x.real``)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __call__(self, obj):
        return getattr(obj, self.name)

    def __repr__(self):
        return f"<.{self.name}>"


class _MethodCall:
    """A step calling a method of a native array (``x.reshape(...)``, ``x.clone()``)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __call__(self, obj, *args, **kwargs):
        return getattr(obj, self.name)(*args, **kwargs)

    def __repr__(self):
        return f"<.{self.name}()>"


class TraceArray:
    """A native array of a trace: its concrete value ``c`` (what eager code computes on the
    traced call) and its ``slot`` in the trace's program.  Shapes, dtypes and devices are read
    from the concrete value (they are fixed for one trace); everything that computes is recorded."""

    __slots__ = ("c", "slot", "trace", "__weakref__")
    __array_ufunc__ = None  # NumPy defers its operators to ours
    __array_priority__ = 2000

    def __init__(self, c, slot, trace):
        self.c = c
        self.slot = slot
        self.trace = trace

    @property
    def shape(self):
        return self.c.shape

    @property
    def dtype(self):
        return self.c.dtype

    @property
    def ndim(self):
        return len(self.c.shape)

    @property
    def device(self):
        return self.c.device

    def __repr__(self):
        return f"<traced array t{self.slot}: shape {tuple(self.c.shape)}, dtype {self.c.dtype}>"

    def __len__(self):
        return int(self.c.shape[0])

    def __iter__(self):
        for i in range(int(self.c.shape[0])):
            yield self[i]

    __hash__ = object.__hash__

    def __getitem__(self, key):
        return self.trace.call(operator.getitem, (self, key), None)

    def __setitem__(self, key, value):
        self.trace.call(operator.setitem, (self, key, value), None, effect=True)

    def __array_namespace__(self, api_version=None):
        return self.trace.backend.xp

    def __getattr__(self, name):
        if name in _VALUE_METHODS:
            _not_allowed(_VALUE_METHODS[name], self.trace)
        if name.startswith("__"):
            raise AttributeError(name)
        attr = getattr(self.c, name)
        if callable(attr):
            m = _MethodCall(name)
            return lambda *a, **k: self.trace.call(m, (self, *a), k)
        if _is_array(attr):
            return self.trace.call(_AttrGet(name), (self,), None)
        return attr  # static information (a device, a flag)

    def _value(self, what):
        _not_allowed(what, self.trace)

    def __bool__(self):
        self._value("bool")

    def __int__(self):
        self._value("int")

    def __float__(self):
        self._value("float")

    def __complex__(self):
        self._value("complex")

    def __index__(self):
        self._value("int")

    def __array__(self, *args, **kwargs):
        self._value("NumPy array")

    def __dlpack__(self, *args, **kwargs):
        self._value("DLPack capsule")

    def __dlpack_device__(self):
        return self.c.__dlpack_device__()

    @property
    def T(self):
        return self.trace.call(_AttrGet("T"), (self,), None)

    @property
    def mT(self):
        return self.trace.call(_AttrGet("mT"), (self,), None)

    def to_device(self, device, /, *, stream=None):
        return self.trace.call(_MethodCall("to_device"), (self, device), None)


def _binary_method(fn):
    def method(self, other):
        return self.trace.call(fn, (self, other), None)

    def reflected(self, other):
        return self.trace.call(fn, (other, self), None)

    return method, reflected


for _name, (_fn, _) in _BINARY.items():
    _m, _r = _binary_method(_fn)
    setattr(TraceArray, _name, _m)
    if _name not in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
        setattr(TraceArray, "__r" + _name[2:], _r)
for _name, (_fn, _) in _UNARY.items():  # type: ignore[assignment]
    setattr(TraceArray, _name, (lambda f: lambda self: self.trace.call(f, (self,), None))(_fn))
del _name, _fn, _m, _r


def _is_array(v):
    return hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, type)


# ------------------------------------------------------------------------------------------ the trace
class Step:
    """One recorded call: ``outs`` = ``fn(*args, **kwargs)`` with the stand-ins of ``args`` read as
    slots.  ``outs``: ``[(path, slot)]`` (path: the indices into a tuple output; ``()`` the output
    itself).  ``effect``: kept even when no output is used (an in-place update)."""

    __slots__ = ("fn", "args", "kwargs", "outs", "effect", "label")

    def __init__(self, fn, args, kwargs, outs, effect, label):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.outs = outs
        self.effect = effect
        self.label = label


class Trace:
    """What one trace records (see the module docstring).  ``inputs``: the slots the executor feeds,
    in order, each with what feeds it; ``consts``: slot -> a value captured from outside."""

    def __init__(self, name, backend, parent=None):
        self.name = name
        self.backend = backend  # the TracingBackend of the traced tensors
        self.parent = parent  # the enclosing trace of a branch or loop body (a sub-trace)
        self.captured = {}  # parent slot -> the stand-in of this (sub-)trace that reads it
        self.outside = {}  # id(Tensor) -> the input that reads a tensor made outside the trace
        self.lower = True  # gt.cond / gt.while_loop become structured steps (else guards)
        self.raw_draws = []  # the host draws as drawn (used again by a retrace)
        self.host_effects = False  # a step acts on the host (gt.print)
        self._foreign_seen = False
        self.steps = []
        self.nslots = 0
        self.inputs = []  # (slot, kind, what)
        self.consts = {}
        self.values = {}  # input slot -> the concrete value it had while tracing
        self.host = {}  # id(host array) -> (TraceArray, array): random draws, fed as inputs
        self.draws = []  # (fn, args) of each host draw, in order
        self.predrawn = []  # draws of a failed replay, used again by its retrace
        self.guards = []  # (slot, expected bool, site)
        self.checks = []  # (slot, exception class, message): a call raises where the value is true
        self.closed = False
        self.thread = threading.get_ident()

    # -------------------------------------------------------------- slots
    def _new(self, c):
        s = self.nslots
        self.nslots = s + 1
        return TraceArray(c, s, self)

    def input(self, c, kind, what=None):
        """A stand-in fed by the executor (an argument, a variable's value, a draw)."""
        a = self._new(c)
        self.inputs.append((a.slot, kind, what))
        self.values[a.slot] = c
        return a

    def capture(self, a):
        """The stand-in of this trace for ``a``, a stand-in of an enclosing trace (a value a branch
        or loop body reads from outside: an input of the sub-program)."""
        if a.trace is self:
            return a
        if self.parent is None:
            _foreign(a, self)
        outer = self.parent.capture(a)
        loc = self.captured.get(outer.slot)
        if loc is None:
            loc = self.captured[outer.slot] = self.input(outer.c, "capture", outer)
        return loc

    def outside_tensor(self, t):
        """The stand-in of this trace for Tensor ``t``, made outside it: an input of the whole program
        (``"tensor"``) that each call reads from ``t`` as it is then, so that a change of ``t`` in place
        between calls (``t[0] = 1.0``, ``t += 1``) is seen, as eager code sees it; a branch or loop body
        reads it through its enclosing trace."""
        root = self
        while root.parent is not None:
            root = root.parent
        a = root.outside.get(id(t))
        if a is None:
            a = root.outside[id(t)] = root.input(t._v, "tensor", t)  # (the inputs hold t)
        return a if root is self else self.capture(a)

    def _localize(self, a):
        """``a`` with every stand-in of an enclosing trace replaced by its capture."""
        c = a.__class__
        if c is TraceArray:
            return a if a.trace is self else self.capture(a)
        if c is tuple or c is list:
            return c(self._localize(x) for x in a)
        if c is dict:
            return {k: self._localize(x) for k, x in a.items()}
        if c is slice:
            return slice(*(self._localize(x) for x in (a.start, a.stop, a.step)))
        return a

    def on_variable(self, v):
        """A variable created inside a branch or loop body (the root trace's front end replaces
        this): not a structured step.  (Called through ``_recording_state.on_variable_created``.)"""
        raise NotLowerable(f"gt.Variable {v.name!r} is created inside a gt.cond branch or gt.while_loop body")

    def mixed_backends(self, b1, b2):
        """An op got tensors of backends ``b1`` and ``b2``: this trace's error where one of them holds
        stand-ins (the core's generic error otherwise).  (Called by ``dispatch``.)"""
        if b1.stand_ins or b2.stand_ins:
            _mixed_error(self, b1, b2)

    def const(self, c):
        """A stand-in for a native array captured from outside the trace (a constant)."""
        a = self._new(c)
        self.consts[a.slot] = c
        return a

    # -------------------------------------------------------------- recording
    def _template(self, a):
        """``a`` with its concrete values (for the call) and whether it holds a stand-in."""
        c = a.__class__
        if c is TraceArray:
            if a.trace is not self:
                if self.parent is None:
                    _foreign(a, self)
                self._foreign_seen = True
            return a.c, True
        if c is tuple or c is list:
            vals = []
            any_t = False
            for x in a:
                v, t = self._template(x)
                vals.append(v)
                any_t = any_t or t
            return (c(vals) if any_t else a), any_t
        if c is slice:
            vals = [self._template(x) for x in (a.start, a.stop, a.step)]
            if any(t for _, t in vals):
                return slice(*(v for v, _ in vals)), True
            return a, False
        if c is dict:
            vals = {k: self._template(x) for k, x in a.items()}
            if any(t for _, t in vals.values()):
                return {k: v for k, (v, _) in vals.items()}, True
            return a, False
        if c is np.ndarray and id(a) in self.host:
            return a, True
        return a, False

    def _swap_host(self, a):
        """``a`` with each host draw replaced by its stand-in (for the recorded arguments)."""
        c = a.__class__
        if c is np.ndarray:
            h = self.host.get(id(a))
            return h[0] if h is not None and h[1] is a else a
        if c is tuple or c is list:
            return c(self._swap_host(x) for x in a)
        if c is dict:
            return {k: self._swap_host(x) for k, x in a.items()}
        return a

    def call(self, fn, args, kwargs, effect=False, label=None, real=None, run=None):
        """Run ``fn`` (or ``run``, the same computation eagerly) on the concrete values of
        ``args``/``kwargs`` and record it as one step; returns the output with every array in it a
        stand-in."""
        if self.closed:
            _finished(self)
        cargs, has = self._template(args)
        if kwargs:
            ckw, hk = self._template(kwargs)
            has = has or hk
        else:
            ckw = kwargs or {}
        if self._foreign_seen:  # values of an enclosing trace: inputs of this sub-program
            self._foreign_seen = False
            args = self._localize(args)
            kwargs = self._localize(kwargs) if kwargs else kwargs
        out = (fn if run is None else run)(*cargs, **ckw)
        if has and self.host:
            args = self._swap_host(args)
            kwargs = self._swap_host(kwargs) if kwargs else kwargs
        outs = []
        self._fixes = []
        wrapped = self._wrap(out, (), outs, real)
        if not outs and not effect:
            return out  # static information (a dtype, a shape): nothing to record
        self.steps.append(Step(fn, args, kwargs or None, outs, effect, label))
        if self._fixes:
            self.steps.extend(self._fixes)
        return wrapped

    def _wrap(self, out, path, outs, real):
        if out.__class__ is TraceArray:
            raise AssertionError("a traced call returned a stand-in")
        if isinstance(out, (tuple, list)) and not _is_array(out):
            items = [self._wrap(o, path + (k,), outs, real) for k, o in enumerate(out)]
            if hasattr(out, "_fields"):
                return type(out)(*items)
            return tuple(items) if isinstance(out, tuple) else items
        if _is_array(out) and not isinstance(out, (str, bytes)):
            if real is not None and out.__class__ is not real.array_type and not isinstance(out, np.dtype):
                # a NumPy scalar and the like: the adapter's fix, as a step of its own
                a = self._new(out)
                outs.append((path, a.slot))
                fixed = real.fix_output(out)
                b = self._new(fixed)
                self._fixes.append(Step(real.fix_output, (a,), None, [((), b.slot)], False, "fix_output"))
                return b
            a = self._new(out)
            outs.append((path, a.slot))
            return a
        return out

    def guard(self, a):
        """The concrete truth value of stand-in ``a``, recorded as a guard: a replay checks that the
        predicate still has this value (else the function is traced again)."""
        if self.parent is not None:
            raise NotLowerable("a predicate inside a gt.cond branch or gt.while_loop body is a guard")
        if a.trace is not self:
            _foreign(a, self)
        value = bool(np.asarray(self.backend.real.to_numpy(a.c)).reshape(()).item())
        self.guards.append((a.slot, value, user_site()))
        return value

    def host_input(self, arr, fn, args):
        """Random numbers ``arr`` drawn on the host by ``fn(*args)``: an input of the program, drawn
        again before each call."""
        k = len(self.draws)
        a = self.input(arr, "draw", k)
        self.draws.append((fn, args))
        self.host[id(arr)] = (a, arr, k)

    # -------------------------------------------------------------- the program
    def program(self, outputs, extra=(), guards_as_outputs=False, host_effects=True):
        """Python source of the live steps, compiled: ``fn(*inputs) -> (outputs, extra[, checks]
        [, guards])`` (``outputs``/``extra``: lists of stand-ins).  Guards and value checks are
        checked inline, raising, or (``guards_as_outputs``, for a compiler) returned: ``checks``
        where the trace has value checks, ``guards`` last.
        Returns ``(fn, source, used)``: ``used`` the entries of ``inputs`` the program reads, in the
        order of its parameters.  ``host_effects``: keep the steps that only act on the host
        (``gt.print``; a gradient's program leaves them out).

        Three jobs, one function each: :meth:`live_steps` (dead-step removal), :class:`_InlineChecks`
        (where a replayed program checks each guard and value check) and :class:`_ProgramWriter`
        (the source)."""
        keep, live = self.live_steps(outputs, extra, host_effects)
        used = [i for i in self.inputs if i[0] in live]
        w = _ProgramWriter(self, [f"t{s}" for s, _, _ in used])
        inline = None if guards_as_outputs else _InlineChecks(self, w)
        if inline is not None:
            inline.after([s for s, _, _ in used] + list(self.consts))
        for st in keep:
            w.step(st)
            if inline is not None:
                inline.after([s for _, s in st.outs])
        returned = [list(outputs), list(extra)]
        if guards_as_outputs:
            if self.checks:
                returned.append([s for s, _, _ in self.checks])
            returned.append([s for s, _, _ in self.guards])
        w.returns(returned)
        return w.compile(), w.source, used

    def live_steps(self, outputs, extra=(), host_effects=True):
        """Dead-step removal: the steps that make ``outputs``, ``extra``, the guards' and value
        checks' values (and the steps with an effect: all, or all but the host's), in order; and
        the slots they read or make."""
        live = {a.slot for a in outputs} | {a.slot for a in extra} | {s for s, _, _ in self.guards}
        live |= {s for s, _, _ in self.checks}
        keep = []
        for st in reversed(self.steps):
            if (st.effect and (host_effects or st.effect != "host")) or any(s in live for _, s in st.outs):
                keep.append(st)
                _slots_of(st.args, live)
                if st.kwargs:
                    _slots_of(st.kwargs, live)
        keep.reverse()
        return keep, live


class _InlineChecks:
    """The guards and value checks of a replayed program, each written right after the step that
    makes its value (or at the top, for an input's or a constant's): a guard raises
    ``GuardFailed(k)`` where the predicate differs from the traced value, a value check its
    exception where the value is true.  (A compiled program returns them instead.)"""

    def __init__(self, trace, writer):
        self.w = writer
        self.guard_at = {}  # slot -> [(guard index, traced value)]
        for k, (s, value, _) in enumerate(trace.guards):
            self.guard_at.setdefault(s, []).append((k, value))
        self.check_at = {}  # slot -> {(exception class, message)}, in order
        for s, exc, message in trace.checks:
            self.check_at.setdefault(s, {})[(exc, message)] = None

    def after(self, slots):
        """The lines checking the guards and value checks on ``slots`` (each once)."""
        w = self.w
        for s in slots:
            for k, value in self.guard_at.pop(s, ()):
                w.line(f"if {'not ' if value else ''}{w.slot(s)}: raise GuardFailed({k})")
            for exc, message in self.check_at.pop(s, ()):
                w.line(f"if {w.slot(s)}: raise {w.glob(exc)}({w.glob(message)})")


class _ProgramWriter:
    """The code generation of :meth:`Trace.program`: the source of ``def program(...)``, one line
    per step (``t5 = c0(t1, t2)``; operators as operators, ``t6 = (t5 * t1)``), with the callables
    and constants it names as globals (``c0``, ``c1``, ...)."""

    def __init__(self, trace, params):
        self.name = trace.name
        self.consts = trace.consts
        self.g = {"GuardFailed": GuardFailed}
        self._names = {}
        self.lines = [f"def program({', '.join(params)}):"]
        self.source = None

    def line(self, text):
        self.lines.append("    " + text)

    def glob(self, v):
        """The global name of ``v`` in the program (one per object)."""
        k = self._names.get(id(v))
        if k is None:
            k = self._names[id(v)] = f"c{len(self._names)}"
            self.g[k] = v
        return k

    def slot(self, s):
        return self.glob(self.consts[s]) if s in self.consts else f"t{s}"

    def ref(self, v):
        """``v`` (an argument of a step) as Python source: a slot, a literal, or a global."""
        c = v.__class__
        if c is TraceArray:
            return self.slot(v.slot)
        if c is tuple:
            inner = ", ".join(self.ref(x) for x in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        if c is list:
            return "[" + ", ".join(self.ref(x) for x in v) + "]"
        if c is dict:
            return "{" + ", ".join(f"{k!r}: {self.ref(x)}" for k, x in v.items()) + "}"
        if c is slice:
            return f"slice({self.ref(v.start)}, {self.ref(v.stop)}, {self.ref(v.step)})"
        if v is None or v is Ellipsis or c is bool or c is int or c is str:
            return repr(v)
        if c is float and v == v and v not in (float("inf"), float("-inf")):
            return repr(v)
        return self.glob(v)

    def expr(self, st):
        """The expression of step ``st`` (not an assignment: ``setitem`` is a statement)."""
        fn = st.fn
        ref = self.ref
        sym = _SYMBOL.get(fn)
        if sym is not None and not st.kwargs:
            if fn in _UNARY_FNS:
                return f"({sym}{ref(st.args[0])})"
            return f"({ref(st.args[0])} {sym} {ref(st.args[1])})"
        if fn is operator.getitem:
            return f"{ref(st.args[0])}[{ref(st.args[1])}]"
        if fn is operator.abs:
            return f"abs({ref(st.args[0])})"
        if isinstance(fn, _AttrGet):
            return f"{ref(st.args[0])}.{fn.name}"
        if isinstance(fn, _MethodCall):
            return f"{ref(st.args[0])}.{fn.name}({_call_args(st.args[1:], st.kwargs, ref)})"
        return f"{self.glob(fn)}({_call_args(st.args, st.kwargs, ref)})"

    def step(self, st):
        """The line(s) of step ``st``: its call, its outputs bound to their slots."""
        if st.fn is operator.setitem:
            self.line(f"{self.ref(st.args[0])}[{self.ref(st.args[1])}] = {self.ref(st.args[2])}")
            return
        call = self.expr(st)
        note = f"  # {st.label}" if st.label else ""  # (the op or function, for reading the source)
        if not st.outs:
            self.line(f"{call}{note}")
        elif len(st.outs) == 1 and st.outs[0][0] == ():
            self.line(f"t{st.outs[0][1]} = {call}{note}")
        else:
            self.line(f"_o = {call}{note}")
            for path, s in st.outs:
                self.line(f"t{s} = _o{''.join(f'[{i}]' for i in path)}")

    def returns(self, groups):
        """The return statement: a tuple of each group (stand-ins or slots)."""
        parts = []
        for group in groups:
            refs = [self.ref(a) if a.__class__ is TraceArray else self.slot(a) for a in group]
            parts.append(f"({', '.join(refs)}{',' if refs else ''})")
        self.line("return " + ", ".join(parts))

    def compile(self):
        """The program, compiled (its source in ``self.source``)."""
        self.source = "\n".join(self.lines) + "\n"
        exec(compile(self.source, f"<gt.function {self.name}>", "exec"), self.g)
        return self.g["program"]


def _call_args(args, kwargs, ref):
    parts = [ref(a) for a in args]
    if kwargs:
        parts += [f"{k}={ref(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _slots_of(a, out):
    c = a.__class__
    if c is TraceArray:
        out.add(a.slot)
    elif c is tuple or c is list:
        for x in a:
            _slots_of(x, out)
    elif c is dict:
        for x in a.values():
            _slots_of(x, out)
    elif c is slice:
        for x in (a.start, a.stop, a.step):
            _slots_of(x, out)


def _foreign(a, trace):
    raise ValueError(
        f"gt.function {trace.name!r} uses a tensor of another trace ({a.trace.name!r}), kept from when that "
        "function was traced (in a global or an attribute, say): pass it in as an argument or return it "
        f"from that function instead (at {user_site()})"
    )


def _finished(trace):
    raise ValueError(
        f"a tensor traced inside gt.function {trace.name!r} was used after the trace ended (it was kept in a "
        f"global, an attribute or a closure while tracing, at {user_site()}): return it from the function "
        "instead, and use the returned tensor"
    )


# ------------------------------------------------------------------------------------ the backend
_STATIC_NAMES = frozenset(
    {
        "finfo",
        "iinfo",
        "isdtype",
        "result_type",
        "can_cast",
        "__array_api_version__",
        "__array_namespace_info__",
        "e",
        "pi",
        "inf",
        "nan",
        "newaxis",
        "Device",
    }
)


def _recorder(fn, tb, label):
    """``fn`` recording itself on the running trace (called through, outside any trace)."""

    def recorded(*args, **kwargs):
        t = recording_context[0]
        if t is not None and t.thread != threading.get_ident():
            _other_thread(t)
        if t is None or t.backend is not tb:
            s = _stand_in(args, kwargs) if t is None else None
            if s is not None:
                _finished(s.trace)
            if t is not None:
                _mixed_error(t, tb, t.backend)
            return fn(*args, **kwargs)
        return t.call(fn, args, kwargs, label=label, real=tb.real)

    recorded.__name__ = getattr(fn, "__name__", label)
    recorded.__wrapped__ = fn
    return recorded


def _other_thread(trace):
    """A thread computes with a stand-in while another traces: every live variable holds one then."""
    while trace.parent is not None:
        trace = trace.parent
    raise RuntimeError(
        f"gt.function {trace.name!r} is tracing in another thread, and while it traces every gt.Variable "
        f"holds a stand-in: this thread computed with one (at {user_site()}), which would have been "
        "recorded into that trace. Trace the function once before other threads use its variables (call "
        "it once), or run it eagerly (gt.config.run_functions_eagerly(True))"
    )


def _mixed_error(trace, b1, b2):
    """The error of a traced function that computes on two backends."""
    raise ValueError(
        f"gt.function {trace.name!r} mixes backends: it computes on {b1.name!r} and {b2.name!r} tensors (at "
        f"{user_site()}); one function runs on one backend: move the tensors with gt.asarray(x, backend=...) "
        "(outside the function, or pass them in as arguments)"
    )


def _stand_in(args, kwargs):
    for a in list(args) + list((kwargs or {}).values()):
        if a.__class__ is TraceArray:
            return a
        if isinstance(a, (tuple, list)):
            s = _stand_in(a, None)
            if s is not None:
                return s
    return None


class RecordingNamespace:
    """The real backend's Array API namespace with every function that computes recorded on the
    running trace (dtypes, constants and inspection functions pass through)."""

    def __init__(self, ns, tb, prefix=""):
        self._ns = ns
        self._tb = tb
        self._prefix = prefix

    def __getattr__(self, name):
        if name.startswith("__") and name != "__array_api_version__":
            raise AttributeError(name)
        v = getattr(self._ns, name)
        if isinstance(v, types.ModuleType) or name in ("linalg", "fft"):
            r = RecordingNamespace(v, self._tb, self._prefix + name + ".")
        elif name in _STATIC_NAMES or not callable(v) or isinstance(v, type) or _is_dtype_name(name):
            r = v
        else:
            r = _recorder(v, self._tb, self._prefix + name)
        setattr(self, name, r)
        return r

    def __repr__(self):
        return f"<recording namespace {self._prefix}of {self._tb.name!r}>"


def _is_dtype_name(name):
    return isinstance(getattr(_dt, name, None), _dt.DType)


class TracingBackend(Backend):
    """A backend adapter whose native arrays are a trace's stand-ins: it answers dtypes, devices and
    flags as the real adapter (``real``) does and records everything that makes an array."""

    stand_ins = True
    supports_vmap = False
    supports_native_grad = False
    array_type = TraceArray

    def __init__(self, real):
        self.real = real
        self.name = real.name
        self.install_hint = real.install_hint
        self.python_scalars = real.python_scalars
        self.floating_ints_to_float32 = real.floating_ints_to_float32
        self.overrides = {}
        self._xp = None

    @property
    def xp(self):
        if self._xp is None:
            self._xp = RecordingNamespace(self.real.xp, self)
        return self._xp

    def op_impl(self, opdef):
        """The real adapter's native callable of ``opdef``, recorded as one step of the running trace
        (``OpDef.resolve`` caches it for this backend, as for any other)."""
        return _recorder(opdef.impls.get(self.real) or opdef.resolve(self.real), self, opdef.name)

    def capture_tensor(self, t):
        """``t``, a Tensor of the real adapter made outside the running trace, as a Tensor of the trace
        read from ``t`` at each call (:meth:`Trace.outside_tensor`); None outside a trace or for
        another backend's."""
        tr = recording_context[0]
        if tr is None or t._b is not self.real:
            return None
        return wrap(tr.outside_tensor(t), self)

    def capture(self, other, x):
        """``x``, a native array of the real adapter computed outside the running trace, as a constant
        of it (a value the function reads from outside); None for any other backend's, or outside a
        trace."""
        t = recording_context[0]
        if t is None or other is not self.real:
            return None
        return t.const(x)

    def restore_input(self, x, value, dtype):
        """A variable created while tracing (its stand-in ``x`` is an input of the program), restored
        from a checkpoint: the input takes ``value``, as if the variable had been created with it."""
        tr = getattr(x, "trace", None)
        if x.__class__ is not TraceArray or not any(s == x.slot and k == "var" for s, k, _ in tr.inputs):
            return False
        real = self.real
        v = real.asarray(np.asarray(value), dtype=dtype, device=real.device_of(x.c))
        if type(v) is not real.array_type:
            v = real.fix_output(v)
        x.c = tr.values[x.slot] = v
        return True

    def _rec(self, fn, label, *args, **kwargs):
        t = recording_context[0]
        if t is not None and t.thread != threading.get_ident():
            _other_thread(t)
        if t is None:
            s = _stand_in(args, kwargs)
            if s is not None:
                _finished(s.trace)
            return fn(*args, **kwargs)
        if t.backend is not self:
            _mixed_error(t, self, t.backend)
        return t.call(fn, args, kwargs, label=label, real=self.real)

    # dtypes and devices: as the real adapter (read from the concrete values)
    def dtype_to_native(self, dtype):
        return self.real.dtype_to_native(dtype)

    def dtype_from_native(self, nd):
        return self.real.dtype_from_native(nd)

    def dtype_of(self, x):
        return self.real.dtype_of(x)

    @property
    def device(self):
        return self.real.device

    @property
    def lays_out(self):
        return self.real.lays_out

    def match_layout(self, g, source, layout=None):
        # recorded, with the layout read from the concrete source (a compiled program's stand-ins
        # carry none: JAX's sharding then becomes a constraint in the program)
        if layout is None:
            layout = self.real.layout_of(source.c if source.__class__ is TraceArray else source)
        if layout is None:
            return self._rec(self.real.match_layout, "match_layout", g, source)
        return self._rec(self.real.match_layout, "match_layout", g, source, layout)

    def weights_device(self, device):
        return self.real.weights_device(device)

    def default_device(self):
        return self.real.default_device()

    def parse_device(self, device):
        return self.real.parse_device(device)

    def device_of(self, x):
        return self.real.device_of(x.c if x.__class__ is TraceArray else x)

    def device_str(self, device):
        return self.real.device_str(device)

    def devices(self):
        return self.real.devices()

    def has_gpu(self):
        return self.real.has_gpu()

    def is_native(self, obj):
        return obj.__class__ is TraceArray

    # what makes an array: recorded
    def asarray(self, value, dtype=None, device=None):
        if value.__class__ is TraceArray and dtype is None and device is None:
            return value
        return self._rec(self.real.asarray, "asarray", value, dtype=dtype, device=device)

    def to_device(self, x, device):
        return self._rec(self.real.to_device, "to_device", x, device)

    def from_dlpack(self, obj, device=None):
        if obj.__class__ is TraceArray:
            return obj if device is None else self.to_device(obj, device)
        return self._rec(self.real.from_dlpack, "from_dlpack", obj, device=device)

    def fix_output(self, out):
        if out.__class__ is TraceArray:
            return out
        return self._rec(self.real.fix_output, "fix_output", out)

    def index_add(self, shape, dtype, key, values):
        return self._rec(self.real.index_add, "index_add", shape, dtype, key, values)

    def setitem(self, x, key, value):
        return self._rec(self.real.setitem, "setitem", x, key, value)

    def erf(self, x):
        return self._rec(self.real.erf, "erf", x)

    def random_from_numpy(self, arr, dtype, device=None):
        t = recording_context[0]
        if t is not None and t.backend is self:
            h = t.host.get(id(arr))
            if h is not None and h[1] is arr:
                # a host draw: moved onto the backend before each call, so the program's input is a
                # native array (a compiler sees an input, not a constant)
                real = self.real

                def move(a):
                    v = real.random_from_numpy(a, dtype, device)
                    return v if v.__class__ is real.array_type else real.fix_output(v)

                return host_then(arr, move, ("random_from_numpy", dtype, device))
        return self._rec(self.real.random_from_numpy, "random_from_numpy", arr, dtype, device)

    def update_inplace(self, name, x, delta, scale=None):
        return False  # a trace's updates are new values (the program assigns them)

    def scaled_update(self, name, x, delta, scale):
        # one step of the program, the real adapter's (its fused kernel: the eager update's bits)
        return self._rec(self.real.scaled_update, "scaled_update", name, x, delta, scale)

    def to_numpy(self, x):
        if x.__class__ is TraceArray:
            _not_allowed("NumPy array", x.trace)
        return self.real.to_numpy(x)

    def vmap(self, fn, in_axes=0, out_axes=0):
        raise NotImplementedError("no vmap while tracing a gt.function (the batched walk is used)")

    def native_grad(self, fn, *args):
        raise NotImplementedError("no native autodiff while tracing a gt.function")

    random_generator = staticmethod(lambda seed=None: np.random.Generator(np.random.PCG64(seed)))

    def __getattr__(self, name):
        # anything else of the real adapter (its own helpers, flags)
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.real, name)

    def __repr__(self):
        return f"<gradtape tracing backend of {self.real.name!r}>"


_TRACING = {}


def tracing_backend(real):
    """The (one, cached) tracing backend of real adapter ``real``."""
    tb = _TRACING.get(real)
    if tb is None:
        tb = _TRACING[real] = TracingBackend(real)
    return tb


def host_draw(fn, *args):
    """``fn(*args)``: random numbers drawn on the host.  While tracing, the draw becomes an input of
    the program (drawn again before every call, so each call gets new numbers as eager code
    does)."""
    t = active_context()
    if t is None:
        return fn(*args)
    if t.parent is not None:
        raise NotLowerable("random numbers are drawn inside a gt.cond branch or gt.while_loop body")
    if t.predrawn:
        arr = t.predrawn.pop(0)
    else:
        arr = fn(*args)
    t.raw_draws.append(arr)
    t.host_input(arr, fn, args)
    return arr


class _Then:
    """A host draw followed by its post-processing (a cast on the host, the move onto the backend),
    as one draw; ``key`` says what the post-processing is (two draws are the same draw when their
    draws and keys are)."""

    __slots__ = ("draw", "then", "key")

    def __init__(self, draw, then, key):
        self.draw = draw
        self.then = then
        self.key = key

    def __call__(self, *args):
        return self.then(self.draw(*args))

    def __eq__(self, other):
        return isinstance(other, _Then) and self.draw == other.draw and self.key == other.key

    __hash__ = None  # type: ignore[assignment]


def run_draw(fn, args):
    """One draw of a program before its call: ``(raw, value)``, the host random numbers and what the
    program reads (after the draw's casts and its move onto the backend's device).  A retrace after a
    failed guard draws nothing new: it is handed the *raw* numbers, which are on the host whatever
    the device (a GPU array cannot be read back as NumPy implicitly)."""
    thens = []
    while isinstance(fn, _Then):
        thens.append(fn.then)
        fn = fn.draw
    raw = value = fn(*args)
    for then in reversed(thens):
        value = then(value)
    return raw, value


def host_then(arr, fn, key):
    """``fn(arr)`` for host random numbers ``arr`` (a cast, the move onto a backend; ``key``
    describes it); while tracing, ``fn`` joins the draw that made ``arr`` and its result is the
    draw's input of the program."""
    new = fn(arr)
    t = active_context()
    if t is not None:
        h = t.host.get(id(arr))
        if h is not None and h[1] is arr:
            a, _, k = h
            draw, args = t.draws[k]
            t.draws[k] = (_Then(draw, fn, key), args)
            a.c = new
            t.host[id(new)] = (a, new, k)
            t.values[a.slot] = new
            return a if new.__class__ is not np.ndarray else new
    return new


def value_check(bad, exc_type, message, detail=None):
    """Raise ``exc_type`` where the native bool scalar ``bad`` is true (a check of input values,
    such as labels out of range).  Eagerly, at once (``detail()``, when given, makes the message).
    Inside ``gt.function`` the check is also part of the program: every call raises
    ``exc_type(message)`` where it fails, before any variable is written back."""
    if bad.__class__ is not TraceArray:
        if bool(bad):
            raise exc_type(detail() if detail is not None else message)
        return
    t = bad.trace
    running = active_context()
    if running is not None and running.parent is not None:
        raise NotLowerable("a value check runs inside a gt.cond branch or gt.while_loop body")
    if bool(np.asarray(t.backend.real.to_numpy(bad.c)).reshape(())):
        raise exc_type(message)
    t.checks.append((bad.slot, exc_type, message))
