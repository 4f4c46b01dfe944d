"""``gt.function``: a step traced once into a flat native program, then replayed or compiled (as
``tf.function`` is to TensorFlow's tape), and ``gt.cond``/``gt.while_loop``.

The first call with a new signature -- the shapes, dtypes, backend and device of the tensor
arguments, the values of the other arguments -- *traces* the function: it runs once, eagerly, on
stand-in arrays (:mod:`gradtape.backends.tracing`) that record every native call of the forward, the backward
walk and the variable updates.  Later calls run the recorded program on the new values:

* JAX: ``jax.jit`` of the program (unless ``jit_compile=False``);
* PyTorch: the program replayed call by call, or compiled by ``torch.compile`` with
  ``jit_compile=True``;
* NumPy, array_api_strict and other libraries: the program replayed call by call.

Every live ``gt.Variable`` is read through a stand-in while tracing: the variables the function
reads are the program's inputs, those it assigns its outputs, written back after each call exactly
as eager code leaves them.  Variables created while tracing (optimizer slots, lazily built layers)
become state too; as with ``tf.function``, only the first trace may create variables.
Random numbers (``gt.random`` and its Generators) are drawn on the host before each call, in the
order eager code draws them.  Python side effects (``print``) run while tracing only.
"""

from __future__ import annotations

import functools
import sys
import threading
import warnings
import weakref

import numpy as np
import optree
from array_api_compat import is_array_api_obj

from gradtape.core import config as _config
from gradtape.core import dtypes as _dt
from gradtape.core.recording_state import ACTIVE_TAPES, per_thread, active_context, recording_context
from gradtape.compile.control_flow import lowered_cond, lowered_while
from gradtape.ops import operators as _operators
from gradtape.backends.batching import innermost_map
from gradtape.backends.tracing import (
    GuardFailed,
    QUIET,
    NotLowerable,
    OperatorNotAllowedInGraphError,
    Trace,
    TraceArray,
    run_draw,
    tracing_backend,
)
from gradtape.ops.manipulation import reshape as _reshape
from gradtape.core.tensor import (
    LIVE_VARIABLES,
    Tensor,
    Variable,
    next_id,
    wrap,
    convert_to_tensor,
    lift,
    user_site,
    user_stacklevel,
)

__all__ = ["function", "Function", "TensorSpec", "cond", "while_loop", "print_", "OperatorNotAllowedInGraphError"]

#: programs kept per signature (one per path through gt.cond / gt.while_loop predicates)
MAX_PATHS = 8
#: gt.cond / gt.while_loop on traced predicates become one structured step each (``lax.cond`` ...);
#: False: always guards, one program per path (the fallback; tests compare the two)
LOWER_CONTROL_FLOW = True
#: consecutive calls that trace before a warning (as tf.function's "triggered retracing")
RETRACE_WARNING = 5
_TRACE_LOCK = threading.RLock()
_SIMPLE = (int, float, bool, str, complex, type(None))


class TensorSpec:
    """The shape and dtype a ``gt.function`` argument must have (``input_signature``), as
    ``tf.TensorSpec``; ``None`` in ``shape`` matches any size of that axis."""

    def __init__(self, shape=None, dtype=_dt.float32, name=None):
        self.shape = None if shape is None else tuple(None if s is None else int(s) for s in shape)
        self.dtype = _dt.as_dtype(dtype)
        self.name = name

    def is_compatible_with(self, t):
        """Whether tensor ``t`` has this spec's dtype and a shape that this spec's shape (``None`` for any size)
        admits."""
        if not isinstance(t, Tensor) or t.dtype != self.dtype:
            return False
        if self.shape is None:
            return True
        return len(t.shape) == len(self.shape) and all(s is None or s == n for s, n in zip(self.shape, t.shape))

    def __repr__(self):
        return f"gt.TensorSpec(shape={self.shape}, dtype={self.dtype}, name={self.name!r})"

    def __eq__(self, other):
        return isinstance(other, TensorSpec) and (self.shape, self.dtype) == (other.shape, other.dtype)

    __hash__ = object.__hash__


class _Concrete:
    """One traced program and how to feed it: ``feed`` (per input: ("arg", leaf index), ("var",
    Variable), ("tensor", a Tensor read from outside) or ("draw", k)), the variables it writes, its
    outputs' structure, its guards."""

    __slots__ = (
        "run",
        "source",
        "feed",
        "state_out",
        "out_tree",
        "out_leaves",
        "guards",
        "checks",
        "draws",
        "backend",
        "guards_out",
        "compiled_by",
        "call",
        "prints",
        "name",
    )


class Function:
    """A function traced into native programs (see the module docstring).  Made by
    :func:`function`."""

    def __init__(self, fn, *, jit_compile=None, reduce_retracing=False, input_signature=None, name=None):
        if not callable(fn):
            raise TypeError(f"gt.function: expected a callable, got {type(fn).__name__}")
        self._python_function = fn
        self._jit_compile = jit_compile
        self._reduce_retracing = bool(reduce_retracing)
        self._input_signature = None if input_signature is None else _check_specs(input_signature)
        self._name = name or getattr(fn, "__name__", "function")
        self._cache = {}  # signature -> the programs traced for it, one per predicate path
        self._fast = {}  # the same lists, keyed by the specs of tensor-only positional arguments
        self._tracing_count = 0
        self._eager = False  # a traced program disagreed with eager code: run eagerly
        self._traced_in_a_row = 0  # calls that traced, since the last that ran a program
        self._warned_retracing = False
        self._warned_paths = False
        self._lock = threading.RLock()
        self._bound = {}
        functools.update_wrapper(self, fn)

    # ------------------------------------------------------------------ TF's API
    @property
    def python_function(self):
        """The wrapped Python function."""
        return self._python_function

    @property
    def input_signature(self):
        """The ``TensorSpec``s the function was declared with (``input_signature=``), or None."""
        return self._input_signature

    def experimental_get_tracing_count(self):
        """How many times the function has been traced (one per new signature, or predicate path)."""
        return self._tracing_count

    def __get__(self, obj, objtype=None):
        # a method: one Function per instance, traced with the instance bound; it holds the instance
        # weakly (a model with a compiled step is freed with it) and is dropped when the instance is
        if obj is None:
            return self
        key = id(obj)
        entry = self._bound.get(key)
        if entry is not None and entry[0]() is obj:
            return entry[1]
        fn = self._python_function
        try:
            ref = weakref.ref(obj, lambda _, bound=self._bound, key=key: bound.pop(key, None))

            def method(*args, **kwargs):
                return fn(ref(), *args, **kwargs)

            functools.update_wrapper(method, fn)
        except TypeError:  # no weak references (__slots__ without __weakref__): held strongly
            ref = (lambda o: lambda: o)(obj)
            method = fn.__get__(obj, objtype)
        bound = Function(
            method,
            jit_compile=self._jit_compile,
            reduce_retracing=self._reduce_retracing,
            input_signature=self._input_signature,
            name=self._name,
        )
        self._bound[key] = (ref, bound)
        return bound

    def __repr__(self):
        return f"<gt.function {self._name} (traced {self._tracing_count} times)>"

    # ------------------------------------------------------------------ calling
    def __call__(self, *args, **kwargs):
        if active_context() is not None:
            return self._python_function(*args, **kwargs)  # inside another trace: inlined
        if self._eager or ACTIVE_TAPES[0] and per_thread.tapes or _config.config._functions_eagerly or innermost_map():
            # an outer tape records: run eagerly, so that it records the function's ops (inside a
            # gt.vmap too: its ops batch)
            return self._python_function(*args, **kwargs)
        if self._input_signature is not None:
            args = self._check_input_signature(args, kwargs)
        setting = _config.current()
        active = (setting.backend, setting.device)  # (tensors made inside go there)
        fast = None if kwargs else _fast_key(args, active)
        if fast is not None:
            paths = self._fast.get(fast)
            if paths is not None:
                return self._run(fast, paths, args, None)
        leaves, treedef = optree.tree_flatten((args, kwargs), none_is_leaf=True)
        key, arrays = _signature(leaves, treedef, active)
        paths = self._cache.get(key)
        if paths is None:
            out = self._trace(key, leaves, treedef, None)
            if fast is not None and key in self._cache:
                self._fast[fast] = self._cache[key]
            return out
        if arrays:
            leaves = _numpy_leaves_to_tensors(leaves, paths[-1].backend, setting)
        return self._run(key, paths, leaves, treedef)

    def _run(self, key, paths, leaves, treedef):
        """Run the program of the latest path; another path's (or a new trace) when a guard fails."""
        p = paths[-1]
        raw, drawn = _draw(p)
        self._traced_in_a_row = 0
        try:
            return p.call(leaves, drawn) if not p.prints else _printing(p, leaves, drawn)
        except GuardFailed as e:
            k = e.args[0]
        tried = {id(p)}
        while True:
            path = p.guards[:k] + (not p.guards[k],)
            other = next((q for q in reversed(paths) if q.guards[: k + 1] == path and id(q) not in tried), None)
            if other is None:
                if treedef is None:  # (the fast path's leaves are the positional arguments)
                    treedef = optree.tree_structure((tuple(leaves), {}), none_is_leaf=True)
                    key = self._key_of(leaves, treedef)
                return self._trace(key, list(leaves), treedef, raw, new_path=True)
            if other.draws != p.draws:  # that path draws other numbers: drawn for it now
                raw, drawn = _draw(other)
            p = other
            tried.add(id(p))
            try:
                out = p.call(leaves, drawn) if not p.prints else _printing(p, leaves, drawn)
            except GuardFailed as e:
                k = e.args[0]
                continue
            paths.remove(p)
            paths.append(p)
            return out

    def _key_of(self, leaves, treedef):
        s = _config.current()
        specs = [(x._b, x._v.shape, x._v.dtype, x._b.device_of(x._v)) for x in leaves]
        return tuple([treedef, (s.backend, s.device)] + specs)

    # ------------------------------------------------------------------ tracing
    def _trace(self, key, leaves, treedef, predrawn, new_path=False):
        with _TRACE_LOCK, self._lock:
            paths = self._cache.get(key)
            if paths is not None and not new_path and predrawn is None:
                traced = paths  # another thread traced this signature while this one waited
            else:
                traced = None
                result = self._trace_locked(key, leaves, treedef, predrawn, new_path, paths)
        if traced is not None:
            # NumPy arguments become tensors as on any call that finds its trace (the caller's
            # leaves are as given: it found no trace when it looked)
            leaves = _numpy_leaves_to_tensors(leaves, traced[-1].backend, _config.current())
            return self._run(key, traced, leaves, treedef)
        return result

    def _trace_locked(self, key, leaves, treedef, predrawn, new_path, paths):
        if paths is not None and len(paths) >= MAX_PATHS:
            warnings.warn(
                f"gt.function {self._name!r} has been traced {len(paths)} times for one signature (one per "
                "path through its gt.cond / gt.while_loop predicates) and this call takes yet another path: it "
                "runs eagerly. A loop whose trip count changes from call to call makes a path per count: pass "
                "the count as a Python argument, or run the function without gt.function",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
            args, kwargs = optree.tree_unflatten(treedef, leaves)
            return self._python_function(*args, **kwargs)
        try:
            result, concrete = _trace_once(self, leaves, treedef, predrawn, new_path, LOWER_CONTROL_FLOW)
        except NotLowerable as e:
            # a gt.cond / gt.while_loop that cannot be one step: traced again, its predicates
            # guards (the numbers drawn are drawn once)
            result, concrete = _trace_once(self, leaves, treedef, e.raw_draws, new_path, lower=False)
        self._tracing_count += 1
        self._traced_in_a_row += 1
        if self._traced_in_a_row == RETRACE_WARNING and not self._warned_retracing:
            self._warned_retracing = True
            warnings.warn(
                f"gt.function {self._name!r} traced again on each of its last {RETRACE_WARNING} calls: tracing "
                "is expensive. New values of Python arguments (pass numbers that change as tensors), new "
                "shapes or dtypes of tensor arguments, and new paths through gt.cond / gt.while_loop "
                "each trace; see experimental_get_tracing_count()",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        if concrete is not None:
            # published whole: another thread's call reads the cache without the lock, and an empty
            # list (setdefault's, before the append) made its run fail with IndexError
            if paths is None:
                self._cache[key] = [concrete]
            else:
                paths.append(concrete)
            real = concrete.backend
            if (
                new_path
                and concrete.guards
                and not self._warned_paths
                and _compiling(self, real)
                and not real.compiles_control_flow
            ):
                # (a compiler without structured control flow: every path compiles anew)
                self._warned_paths = True
                warnings.warn(
                    f"gt.function {self._name!r} compiles a program for each path through its gt.cond / "
                    f"gt.while_loop predicates: {real.name}'s compiler here takes one path at a "
                    "time, and this call took a new one. With jit_compile=False each is one step of a "
                    "replayed program, traced once",
                    UserWarning,
                    stacklevel=user_stacklevel(),
                )
        return result

    def _check_input_signature(self, args, kwargs):
        if kwargs:
            raise TypeError(
                f"gt.function {self._name!r} has an input_signature: pass its arguments by position, got "
                f"keywords {sorted(kwargs)}"
            )
        specs = self._input_signature
        if len(args) != len(specs):
            raise TypeError(
                f"gt.function {self._name!r}: its input_signature has {len(specs)} arguments, "
                f"the call passes {len(args)}"
            )
        converted = []
        for k, (a, s) in enumerate(zip(args, specs)):
            t = a if isinstance(a, Tensor) else convert_to_tensor(a, dtype=s.dtype)
            if not s.is_compatible_with(t):
                raise TypeError(
                    f"gt.function {self._name!r}: argument {k} ({t.dtype}, shape {t.shape}) does not match its "
                    f"input_signature entry {s}"
                )
            converted.append(t)
        return tuple(converted)  # (Python values as tensors of their spec, as TensorFlow)


def _fast_key(args, active):
    """The signature of the common call -- tensors only, by position (the leaves are the
    arguments) -- or None for any other call."""
    fast = [active]
    for a in args:
        if a.__class__ is not Tensor:
            return None
        v = a._v
        b = a._b
        fast.append((b, v.shape, v.dtype, b.device_of(v)))
    return tuple(fast)


def _signature(leaves, treedef, active):
    """``(key, arrays)``: the call's signature -- the tensors' backends, shapes, dtypes and devices,
    the Variables' identities, the other arguments' values -- and whether a leaf is a NumPy array."""
    key = [treedef, active]
    arrays = False
    for x in leaves:
        c = x.__class__
        if c is Tensor:
            v = x._v
            key.append((x._b, v.shape, v.dtype, x._b.device_of(v)))
        elif isinstance(x, Variable):
            key.append(("variable", id(x)))
        elif isinstance(x, Tensor):
            v = x._v
            key.append((x._b, v.shape, v.dtype, x._b.device_of(v)))
        elif c is float:  # (-0.0 is not 0.0, and a NaN is the same value on every call)
            key.append((c, x.hex()))
        elif c in _SIMPLE:
            key.append((c, x))
        elif _is_array_arg(x):
            key.append(_array_key(x))
            arrays = True
        else:
            key.append((c, _hashable_or_id(x)))
    return tuple(key), arrays


def _is_array_arg(x):
    """Whether a call's leaf is an array that the program takes as a tensor argument, as
    ``tf.function`` takes a NumPy array: a NumPy array or any library's native array (a torch
    tensor, a JAX or array_api_strict array...), keyed by its shape and dtype, never by its values
    (which it may change in place) or its identity.  NumPy's scalars stay Python values; gradtape's
    own Tensors and Variables are not "arrays" here."""
    return not isinstance(x, (np.generic, Tensor)) and is_array_api_obj(x)


def _array_key(x):
    """The signature of an array argument: its type, shape, dtype and device."""
    try:
        device = x.device
        hash(device)
    except Exception:  # (a library without a hashable ``.device``: its shape and dtype alone)
        device = None
    return ("array", x.__class__, tuple(x.shape), x.dtype, device)


def _hashable_or_id(x):
    try:
        hash(x)
    except TypeError:
        return id(x)
    return x


def _check_specs(sig):
    if not isinstance(sig, (list, tuple)):
        raise TypeError(
            f"input_signature must be a list or tuple of gt.TensorSpec (one per argument), got {type(sig).__name__}"
        )
    sig = list(sig)
    for s in sig:
        if not isinstance(s, TensorSpec):
            raise TypeError(f"input_signature: expected gt.TensorSpec entries, got {type(s).__name__}")
    return tuple(sig)


def _as_native(x, b):
    """An argument that is not a Tensor (a NumPy array) as a native array of ``b``."""
    return convert_to_tensor(x, backend=b)._v


def _backend_of(fn_name, leaves):
    b = None
    for x in leaves:
        if isinstance(x, Tensor):
            if x._b.stand_ins:  # a tensor kept from a trace: its stand-in says which
                x._v.trace.call(None, (), None)
            if b is None:
                b = x._b
            elif x._b is not b:
                raise ValueError(
                    f"gt.function {fn_name!r} was called with tensors of two backends, {b.name!r} and {x._b.name!r}: "
                    "one function runs on one backend; move them with gt.asarray(x, backend=...) first"
                )
    return b


def _compiling(f, real_b):
    """Whether ``f``'s programs on ``real_b`` go to its compiler (else they are replayed)."""
    how = getattr(real_b, "compiles", None)
    return f._jit_compile is not False and (how == "default" or (how == "opt-in" and bool(f._jit_compile)))


def _numpy_device(leaves, b, setting):
    """Where a NumPy argument of a ``gt.function`` call goes on backend ``b``: beside the call's first
    tensor argument of ``b`` (as a NumPy operand of an eager op goes beside its tensor), else onto the
    configured device (a GPU, say), else ``b``'s default."""
    for x in leaves:
        if isinstance(x, Tensor) and x._b is b:
            return b.device_beside(x._v)
    return setting.device if setting.backend is b else None


def _numpy_leaves_to_tensors(leaves, b, setting):
    """The call's leaves with each array argument (:func:`_is_array_arg`) a Tensor of ``b``."""
    device = _numpy_device(leaves, b, setting)
    return [_array_to_tensor(x, b, device) if _is_array_arg(x) else x for x in leaves]


def _array_to_tensor(x, b, device):
    """An array argument as a Tensor of ``b``: a native array of ``b`` where it is (no copy), any other
    (NumPy's, another library's) on ``device`` (:func:`_numpy_device`), as an eager op converts it."""
    return convert_to_tensor(x, backend=b, device=None if b.is_native(x) else device)


def _draw(p):
    """The random numbers program ``p`` reads, drawn before its call: (the raw host draws, kept for
    a retrace, and the values the program reads; None where it draws nothing)."""
    if not p.draws:
        return [], None
    pairs = [run_draw(fn, a) for fn, a in p.draws]
    return [r for r, _ in pairs], [v for _, v in pairs]


def _trace_once(f, leaves, treedef, predrawn, new_path=False, lower=True):
    """Run ``f``'s Python function once on stand-ins; returns (its result, the :class:`_Concrete`).
    ``lower``: gt.cond / gt.while_loop on traced predicates become structured steps where the
    executor runs them (else guards)."""
    cap = _Capture(f, leaves, predrawn, new_path, lower)
    out_leaves, out_tree, finals = cap.run(leaves, treedef)
    result, outputs, out_spec = _first_results(f, out_leaves, out_tree)
    state_vars, state_vals = cap.state(finals, leaves)
    trace = cap.trace
    run, used, how, source = _compile(f, trace, outputs, state_vals, trace.backend.real)
    if run is None:
        return result, None
    return result, _concrete(trace, run, used, how, source, state_vars, out_tree, out_spec)


class _Capture:
    """One run of a function on stand-ins (:func:`_trace_once`): its :class:`Trace`, the variables
    whose values it swaps for stand-ins (and those created while it runs), the arguments'
    stand-ins."""

    def __init__(self, f, leaves, predrawn, new_path, lower):
        real = _backend_of(f._name, leaves)
        self.setting = _config.current()
        if real is None:
            real = self.setting.backend
        self.f = f
        self.real = real
        self.new_path = new_path
        trace = self.trace = Trace(f._name, tracing_backend(real))
        trace.lower = lower and (not _compiling(f, real) or real.compiles_control_flow)
        if predrawn:
            trace.predrawn = predrawn
        trace.on_variable = self.on_variable
        self.swapped = []  # (variable, its value before, its backend before, its stand-in)
        self.created = []
        self.arg_tensors = []  # (leaf index, its traced Tensor, its stand-in): updated in place?

    def on_variable(self, v):
        """A variable created while tracing: an input of the program, the program's state from now on."""
        f = self.f
        # the first trace may create variables, and so may the first trace of a new path through a
        # predicate (TensorFlow traces both branches of a tf.cond in its first trace): nothing traced
        # before reads them.  Another signature may not, as tf.function
        if f._tracing_count > 0 and not self.new_path:
            raise ValueError(
                f"gt.function {f._name!r} created a gt.Variable ({v.name!r}) on a call with a new signature: as "
                "tf.function, only the first trace (and the first call down a new gt.cond / gt.while_loop "
                "path) may create variables. Create them once, outside the function or on the first call only "
                "(if self.v is None: ...)"
            )
        if v._b.stand_ins:
            c = v._v.c if v._v.__class__ is TraceArray else v._v
            real_b = v._b.real
        else:
            c, real_b = v._v, v._b
        ph = self.trace.input(c, "var", v)
        self.created.append((v, None, real_b, ph))
        v._v, v._b = ph, tracing_backend(real_b)

    def run(self, leaves, treedef):
        """The function called on stand-ins, its trace the running recording context, no tape
        recording, the trace's backend active, every live variable locked and read through a
        stand-in; returns (its output's leaves, their structure, each variable's final value)."""
        trace = self.trace
        saved_tapes = per_thread.tapes
        ok = False
        recording_context[0] = trace
        per_thread.tapes = []
        # the active backend is the trace's: tensors made inside (gt.constant, random draws) are traced
        setting = self.setting
        active = _config.active(trace.backend, setting.device if setting.backend is self.real else None)
        active.__enter__()
        # every live variable's lock, held while its value is a stand-in: other threads' updates and
        # compiled calls wait for the trace to end (and the trace for theirs)
        live = [v for v in list(LIVE_VARIABLES) if not v._b.stand_ins]
        held = []
        try:
            for lock in Variable._locks(live):
                lock.acquire()
                held.append(lock)
            for v in live:
                ph = trace.input(v._v, "var", v)
                self.swapped.append((v, v._v, v._b, ph))
                v._v, v._b = ph, tracing_backend(v._b)
            args, kwargs = optree.tree_unflatten(treedef, self._stand_in_leaves(leaves))
            try:
                result = self.f._python_function(*args, **kwargs)
            except NotLowerable as e:
                e.raw_draws = list(trace.raw_draws)
                raise
            out_leaves, out_tree = optree.tree_flatten(result, none_is_leaf=True)
            ok = True
        finally:
            active.__exit__(None, None, None)
            recording_context[0] = None
            trace.closed = True
            per_thread.tapes = saved_tapes
            finals = self._restore_variables(ok)
            for lock in reversed(held):
                lock.release()
        return out_leaves, out_tree, finals

    def _stand_in_leaves(self, leaves):
        """The arguments' leaves with each tensor (and NumPy array) a Tensor of a stand-in."""
        trace = self.trace
        new_leaves = []
        device = None  # (where NumPy arguments go: looked up once, at the first)
        for k, x in enumerate(leaves):
            if isinstance(x, Tensor) and not isinstance(x, Variable):
                ph = trace.input(x._v, "arg", k)
                t = wrap(ph, tracing_backend(x._b))
                self.arg_tensors.append((k, t, ph))
                new_leaves.append(t)
            elif _is_array_arg(x):
                if device is None:
                    device = (_numpy_device(leaves, self.real, self.setting),)
                nat = _array_to_tensor(x, self.real, device[0])
                new_leaves.append(wrap(trace.input(nat._v, "arg", k), tracing_backend(nat._b)))
            else:
                new_leaves.append(x)
        return new_leaves

    def _restore_variables(self, ok):
        """Every variable swapped or created back on its real backend, with the value eager code
        leaves (or, where the trace failed, the value it had); returns their final stand-ins."""
        self.swapped += self.created
        finals = []
        for v, before, b_before, ph in self.swapped:
            final = v._v
            finals.append(final)
            v._b = b_before
            if (not ok or final is ph) and before is not None:
                v._v = before
            elif not ok:  # created by a trace that failed: its value at creation
                v._v = ph.c
            else:  # assigned (or created) while tracing: the value eager code leaves
                v._v = final.c if final.__class__ is TraceArray else final
        return finals

    def state(self, finals, leaves):
        """What the program writes back after each call -- ``("var", v)`` for a variable assigned,
        ``("arg", k)`` for an argument updated in place -- and the stand-ins of those values.  An
        argument updated in place takes its new value now, as eagerly."""
        state_vars = []
        state_vals = []
        for (v, _, _, ph), final in zip(self.swapped, finals):
            if final is not ph and final.__class__ is TraceArray:
                state_vars.append(("var", v))
                state_vals.append(final)
        for k, t, ph in self.arg_tensors:
            if t._v is not ph and t._v.__class__ is TraceArray:
                # an argument updated in place (x += 1, x[i] = v): the caller's tensor takes the new
                # value, as eagerly (on every call)
                state_vars.append(("arg", k))
                state_vals.append(t._v)
                leaves[k]._v, leaves[k]._id = t._v.c, next_id()
                _operators._propagate(leaves[k])  # a view's base and a base's views see it (NumPy's views)
        return state_vars, state_vals


def _first_results(f, out_leaves, out_tree):
    """The first call's result (the concrete values computed while tracing), the stand-ins the
    program returns, and per output leaf what a call returns there: ``("out", k)``, the program's
    k-th output, or ``("value", x)``, ``x`` itself."""
    outputs = []
    out_spec = []
    first = []
    for x in out_leaves:
        if isinstance(x, Variable):
            out_spec.append(("value", x))
            first.append(x)
        elif isinstance(x, Tensor) and x._v.__class__ is TraceArray:
            a = x._v
            out_spec.append(("out", len(outputs)))
            outputs.append(a)
            first.append(wrap(a.c, x._b.real))
        elif isinstance(x, Tensor) and x._b.stand_ins:
            raise ValueError(f"gt.function {f._name!r} returned a traced tensor of no trace")
        else:
            out_spec.append(("value", x))
            first.append(x)
    return optree.tree_unflatten(out_tree, first), outputs, out_spec


def _concrete(trace, run, used, how, source, state_vars, out_tree, out_spec):
    """The :class:`_Concrete` of a checked program ``run`` of ``trace`` (``how``: its executor)."""
    c = _Concrete()
    c.run = run
    # only the draws the program reads are drawn before each call (an initializer's draw for a
    # variable created while tracing is not: eager code draws it once)
    c.feed = []
    c.draws = []
    for slot, kind, what in used:
        if kind == "draw":
            c.feed.append(("draw", len(c.draws)))
            c.draws.append(trace.draws[what])
        elif kind == "tensor":  # (with the shape and dtype it was traced with: checked on each call)
            traced = trace.values[slot]
            c.feed.append((kind, (what, traced.shape, traced.dtype)))
        else:
            c.feed.append((kind, what))
    c.state_out = state_vars
    c.out_tree = out_tree
    c.out_leaves = out_spec
    c.guards = tuple(v for _, v, _ in trace.guards)
    c.checks = list(trace.checks)
    c.backend = trace.backend.real
    c.guards_out = how != "replay"
    c.compiled_by = how
    c.prints = trace.host_effects
    c.source = source
    c.name = trace.name
    c.call = _caller(c)
    return c


def _caller(c):
    """``call(leaves, drawn)``: the generated function that feeds ``c.run`` the call's arguments,
    variables and draws, checks its guards, writes the variables back and wraps the outputs."""
    b = c.backend
    g = {
        "run": c.run,
        "wrap": wrap,
        "B": b,
        "AT": b.array_type if b is not None else None,
        "fix": b.fix_output if b is not None else None,
        "unflatten": optree.tree_unflatten,
        "TREE": c.out_tree,
        "GUARDS": c.guards,
        "GuardFailed": GuardFailed,
        "first_change": _first_change,
        "next_id": next_id,
        "propagate": _operators._propagate,
    }
    g["outside_changed"] = functools.partial(_outside_changed, c.name)
    ins = []
    checks_in = []
    for k, (kind, what) in enumerate(c.feed):
        if kind == "arg":
            ins.append(f"leaves[{what}]._v")
        elif kind == "var":
            g[f"V{k}"] = what
            ins.append(f"V{k}._v")
        elif kind == "tensor":  # a tensor read from outside: its value now (changed in place or not)
            g[f"T{k}"], g[f"TS{k}"], g[f"TD{k}"] = what
            ins.append(f"T{k}._v")
            checks_in.append(f"    if T{k}._v.shape != TS{k} or T{k}._v.dtype != TD{k}:")
            checks_in.append(f"        outside_changed(T{k}, TS{k}, TD{k})")
        else:
            ins.append(f"drawn[{what}]")
    lines = ["def call(leaves, drawn):", *checks_in]
    # the variables the program reads and writes are locked from reading their values to writing
    # them back: another thread's update of one (eager, or another program's) waits, and none is
    # lost; a trace (which swaps every variable's value for a stand-in) waits for the call to end
    locks = Variable._locks(
        [v for kind, v in c.state_out if kind == "var"] + [v for kind, v in c.feed if kind == "var"]
    )
    if len(locks) == 1:
        g["L0"] = locks[0]
        lines.append("    with L0:")
    elif locks:
        g["LOCKS"] = locks
        g["UNLOCKS"] = tuple(reversed(g["LOCKS"]))
        lines.append("    for lock in LOCKS:")
        lines.append("        lock.acquire()")
        lines.append("    try:")
    body = len(lines)
    checks = c.checks if c.guards_out else ()  # (a replayed program checks them inline)
    results = "outs, state" + (", checks" if checks else "") + (", seen" if c.guards_out else "")
    lines.append(f"    {results} = run({', '.join(ins)})")
    if c.guards_out:
        lines.append("    seen = tuple(map(bool, seen))")
        lines.append("    if seen != GUARDS:")
        lines.append("        raise GuardFailed(first_change(seen, GUARDS))")
    for k, (_, exc, message) in enumerate(checks):
        g[f"E{k}"] = exc
        g[f"M{k}"] = message
        lines.append(f"    if checks[{k}]:")
        lines.append(f"        raise E{k}(M{k})")
    for k, (kind, what) in enumerate(c.state_out):
        if kind == "var":
            g[f"S{k}"] = what
            lines.append(f"    S{k}._v = state[{k}]")
        else:  # an argument updated in place: a new value and identity, as Tensor._become
            lines.append(f"    leaves[{what}]._v = state[{k}]")
            lines.append(f"    leaves[{what}]._id = next_id()")
            lines.append(f"    propagate(leaves[{what}])")
    if locks:
        lines[body:] = ["    " + line for line in lines[body:]]
    if len(locks) > 1:
        lines.append("    finally:")
        lines.append("        for lock in UNLOCKS:")
        lines.append("            lock.release()")
    parts = []
    for k, (kind, what) in enumerate(c.out_leaves):
        if kind == "out":
            lines.append(f"    o{k} = outs[{what}]")
            parts.append(f"wrap(o{k} if o{k}.__class__ is AT else fix(o{k}), B)")
        else:
            g[f"K{k}"] = what
            parts.append(f"K{k}")
    if c.out_tree.num_leaves == 1 and c.out_tree.is_leaf():
        lines.append(f"    return {parts[0]}")
    else:
        lines.append(f"    return unflatten(TREE, [{', '.join(parts)}])")
    exec(compile("\n".join(lines) + "\n", "<gradtape gt.function call>", "exec"), g)
    return g["call"]


def _outside_changed(name, t, shape, dtype):
    raise ValueError(
        f"gt.function {name!r} (called at {user_site()}) reads a {t._b.name} tensor made outside it, traced as shape "
        f"{tuple(shape)} {dtype}, which is now shape {tuple(t._v.shape)} {t._v.dtype} (an in-place update "
        "changed it): the program was traced for the old one. Pass the tensor as an argument (a new shape "
        "or dtype traces again), or keep it in a gt.Variable"
    )


def _first_change(seen, expected):
    return next(i for i, (a, b) in enumerate(zip(seen, expected)) if a != b)


def _compile(f, trace, outputs, state_vals, real_b):
    """The program of a finished trace, run by the executor its backend gets, and checked: run once
    on the traced call's inputs, it must give what the trace computed eagerly (else a warning, and
    the function runs eagerly from then on).  Returns ``(run, used inputs, how, source)``."""
    if _compiling(f, real_b) and trace.host_effects and not real_b.compiles_host_callbacks:
        warnings.warn(
            f"gt.function {f._name!r} prints (gt.print) and {real_b.name}'s compiler would print only while "
            "compiling: the program is replayed call by call instead, and prints on every call",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    elif _compiling(f, real_b):
        try:
            run, source, used = trace.program(outputs, state_vals, guards_as_outputs=True)
            run = real_b.compile_program(run)
            if _agrees(f, trace, run, used, outputs, state_vals, True, real_b):
                return run, used, f"{real_b.name} compiler", source
            return None, used, "eager", source
        except Exception as e:
            warnings.warn(
                f"gt.function {f._name!r}: {real_b.name}'s compiler failed on the traced program "
                f"({type(e).__name__}: {str(e)[:300]}); the program is replayed call by call instead",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
    run, source, used = trace.program(outputs, state_vals, guards_as_outputs=False)
    if not _agrees(f, trace, run, used, outputs, state_vals, False, real_b):
        return None, used, "eager", source
    return run, used, "replay", source


def _agrees(f, trace, run, used, outputs, state_vals, guards_out, b):
    """Whether ``run`` on the traced call's inputs reproduces the values the trace computed (to
    round-off for a compiler, which may fuse and reorder); warns when not."""
    QUIET[0] += 1  # (a gt.print in the program: printed by the call, not by its check)
    try:
        res = run(*[trace.values[s] for s, _, _ in used])
        b.effects_barrier()
        if guards_out and tuple(bool(g) for g in res[-1]) != tuple(v for _, v, _ in trace.guards):
            raise GuardFailed(-1)
    except GuardFailed:
        return _disagree(f, "a predicate (gt.cond / gt.while_loop) has another value")
    finally:
        QUIET[0] -= 1
    expected = [a.c for a in outputs] + [a.c for a in state_vals]
    got = list(res[0]) + list(res[1])
    for k, (e, g) in enumerate(zip(expected, got)):
        e = np.asarray(b.to_numpy(e))
        g = np.asarray(b.to_numpy(g))
        if e.shape != g.shape or e.dtype != g.dtype:
            return _disagree(f, f"value {k} has shape {g.shape} and dtype {g.dtype}, eager {e.shape} {e.dtype}")
        if e.dtype.kind in "fc":
            eps = np.finfo(e.dtype).eps
            rtol = np.sqrt(eps) if guards_out else 64 * eps
            # (an absolute floor: a value that is round-off of zero, a second derivative of a
            # piecewise linear function, may differ by round-off of its own)
            scale = max(float(np.max(np.abs(e[np.isfinite(e)]), initial=0.0)), 1.0)
            if not np.allclose(g, e, rtol=rtol, atol=rtol * scale, equal_nan=True):
                diff = float(np.nanmax(np.abs(g - e), initial=0.0))
                return _disagree(f, f"value {k} differs from eager by up to {diff:.3g}")
        elif not np.array_equal(g, e):
            return _disagree(f, f"value {k} differs from eager")
    return True


def _disagree(f, why):
    warnings.warn(
        f"gt.function {f._name!r}: the traced program does not reproduce the eager call it was traced from "
        f"({why}); the function runs eagerly from now on. This is a gradtape bug: please report it with the "
        "function",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    f._eager = True
    return False


def function(
    func=None,
    *,
    input_signature=None,
    autograph=True,
    jit_compile=None,
    reduce_retracing=False,
    experimental_implements=None,
    experimental_autograph_options=None,
    experimental_attributes=None,
    experimental_relax_shapes=None,
    experimental_compile=None,
    experimental_follow_type_hints=None,
    name=None,
):
    """Trace ``func`` into a native program run on later calls (as ``tf.function``); usable as
    ``@gt.function`` or ``@gt.function(jit_compile=True)``.  See the module docstring.

    ``jit_compile``: None compiles with ``jax.jit`` on JAX and replays elsewhere; True also compiles
    with ``torch.compile`` on PyTorch; False never compiles (replays).  ``input_signature``: a list of
    :class:`TensorSpec` the arguments must match.  ``reduce_retracing`` is accepted for TF
    compatibility: programs are specialised to shapes, so it does not change how often a function
    traces."""
    if jit_compile is None and experimental_compile is not None:
        jit_compile = experimental_compile

    def deco(fn):
        return Function(
            fn, jit_compile=jit_compile, reduce_retracing=reduce_retracing, input_signature=input_signature, name=name
        )

    return deco if func is None else deco(func)


# ---------------------------------------------------------------------------------------- control flow
def _predicate(pred, what):
    """``pred`` as a Python bool; a traced predicate is recorded as a guard of the program."""
    if isinstance(pred, Tensor):
        pred = _scalar_predicate(pred, what)
        v = pred._v
        if v.__class__ is TraceArray:
            return (active_context() or v.trace).guard(v)
        return bool(pred)
    return bool(pred)


def cond(pred, true_fn=None, false_fn=None, name=None):
    """``true_fn()`` if ``pred`` else ``false_fn()``, as ``tf.cond``.  Eagerly, the tape records the
    branch taken, so gradients flow through it.  Inside ``gt.function`` a traced predicate makes
    one step of both branches (``lax.cond`` on JAX, an ``if`` in a replayed program), differentiable
    as one op; where that cannot be (a branch assigns a variable or draws random numbers, the
    branches' outputs differ in structure, shape or dtype, a higher-order gradient, a compiler
    without control flow) the program is specialised to the branch taken and checks the predicate
    on every call (another branch traces again)."""
    if not callable(true_fn):
        raise TypeError("gt.cond: true_fn must be callable")
    if not callable(false_fn):
        raise TypeError("gt.cond: false_fn must be callable")
    trace = _lowering_trace(pred)
    if trace is not None:
        pred = _scalar_predicate(pred, "gt.cond")
        try:
            return lowered_cond(trace, pred, true_fn, false_fn)
        except NotLowerable as e:
            if trace.parent is not None or getattr(e, "dirty", False):
                raise  # (no guard inside a branch, or a side effect only a new trace undoes)
            # this cond is a guard of the program (one path per trace); the others stay one step
    return true_fn() if _predicate(pred, "gt.cond") else false_fn()


def _lowering_trace(pred):
    """The running trace, where ``pred`` is a traced tensor and the trace lowers control flow."""
    trace = active_context()
    if trace is None or not trace.lower or not isinstance(pred, Tensor) or pred._v.__class__ is not TraceArray:
        return None
    return trace


def _loop_predicate(p):
    """A loop's predicate as one step reads it: a one-element bool tensor as a 0-d one."""
    if isinstance(p, Tensor) and p.dtype == _dt.bool and p.size == 1 and p.ndim:
        return _reshape(p, ())
    return p


def _scalar_predicate(pred, what):
    """``pred``, a bool tensor of one element, as a 0-d one (a shape (1,) predicate is one too: the
    standard's ``bool()`` takes 0-d arrays only)."""
    if pred.size != 1:
        raise ValueError(f"{what}: the predicate must be a scalar, got shape {pred.shape}")
    if pred.dtype != _dt.bool:
        raise TypeError(f"{what}: the predicate must be a bool tensor, got {pred.dtype}")
    return pred if pred.ndim == 0 else _reshape(pred, ())


def while_loop(
    cond,
    body,
    loop_vars,
    shape_invariants=None,
    parallel_iterations=10,
    back_prop=True,
    swap_memory=False,
    maximum_iterations=None,
    name=None,
):
    """Repeat ``loop_vars = body(*loop_vars)`` while ``cond(*loop_vars)`` (and fewer than
    ``maximum_iterations`` times), as ``tf.while_loop``; returns the final ``loop_vars`` in their
    structure.  Differentiable through the tape (each iteration is recorded).  Inside
    ``gt.function`` the program is specialised to the trip count when traced and checks it on every
    call (another count traces again)."""
    if not callable(cond):
        raise TypeError("gt.while_loop: cond must be callable")
    if not callable(body):
        raise TypeError("gt.while_loop: body must be callable")
    packed = isinstance(loop_vars, (list, tuple))
    current = list(loop_vars) if packed else [loop_vars]
    if packed and not current:
        raise ValueError("gt.while_loop: loop_vars must not be empty")
    structure = optree.tree_structure(current, none_is_leaf=True)

    def fitted(out):
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        if optree.tree_structure(out, none_is_leaf=True) != structure:
            raise ValueError(
                f"gt.while_loop: body returned {len(out)} values in another structure than loop_vars "
                f"({len(current)} values); it must return the loop variables' structure"
            )
        return out

    out = _loop_as_one_step(cond, body, current, structure, fitted, maximum_iterations)
    if out is None:
        out = _unrolled_loop(cond, body, current, fitted, maximum_iterations)
    if not packed:
        return out[0]
    return type(loop_vars)(out) if not hasattr(loop_vars, "_fields") else type(loop_vars)(*out)


def _loop_as_one_step(cond, body, current, structure, fitted, maximum_iterations):
    """The final loop variables (a list) of a loop run as one step of the running trace, where its
    predicate depends on a traced value and the trace lowers control flow (the loop variables
    become tensors); None where the loop is unrolled instead."""
    trace = active_context()
    if (
        trace is None
        or not trace.lower
        or not (maximum_iterations is None or type(maximum_iterations) is int)
        or _lowering_trace(cond(*current)) is None
    ):
        return None
    leaves = optree.tree_leaves(current, none_is_leaf=True)
    try:
        out = lowered_while(
            trace,
            lambda *v: _loop_predicate(cond(*optree.tree_unflatten(structure, list(v)))),
            lambda *v: optree.tree_leaves(fitted(body(*optree.tree_unflatten(structure, list(v)))), none_is_leaf=True),
            leaves,
            maximum_iterations,
        )
    except NotLowerable as e:
        if trace.parent is not None or getattr(e, "dirty", False):
            raise  # (no guard inside a body, or a side effect only a new trace undoes)
        return None  # this loop's predicate is a guard (unrolled, one path per trip count)
    return optree.tree_unflatten(structure, list(out))


def _unrolled_loop(cond, body, current, fitted, maximum_iterations):
    """The loop run in Python: eagerly, or unrolled into the running trace with its predicates as
    guards (one path per trip count)."""
    i = 0
    while _below(maximum_iterations, i) and _predicate(cond(*current), "gt.while_loop"):
        current = fitted(body(*current))
        i += 1
    return current


def _below(maximum_iterations, i):
    """Whether iteration ``i`` may run under ``maximum_iterations`` (None, a number or a tensor)."""
    if maximum_iterations is None:
        return True
    if isinstance(maximum_iterations, Tensor):
        return _predicate(maximum_iterations > i, "gt.while_loop (maximum_iterations)")
    return i < int(maximum_iterations)


# ------------------------------------------------------------------------------------------- print
#: the prints of the programs running now, innermost last (a JAX callback runs on another thread)
_PRINTS = []
_PRINT_LOCK = threading.Lock()


def _printing(p, leaves, drawn):
    """``p.call(leaves, drawn)`` for a program that prints: its prints are written once it has run
    to the end, and dropped where a guard fails (the path traced or run next prints them)."""
    buf = []
    with _PRINT_LOCK:
        _PRINTS.append(buf)
    ok = False
    try:
        out = p.call(leaves, drawn)
        ok = True
    finally:
        p.backend.effects_barrier()
        with _PRINT_LOCK:
            _PRINTS.remove(buf)
        if ok:
            for printer, arrays in buf:
                printer.write(*arrays)
    return out


class _Printer:
    """The host step of one ``gt.print``: formats the values of its tensors into its layout."""

    def __init__(self, real, layout, stream, sep, end, summarize):
        self.real = real
        self.layout = layout  # per input: a Python value, or None where a tensor goes
        self.stream = stream
        self.sep = sep
        self.end = end
        self.threshold = sys.maxsize if summarize is None or summarize < 0 else 2 * summarize
        self.edge = 3 if summarize is None or summarize < 0 else summarize
        self.__name__ = "print"

    def __call__(self, *arrays):
        self.real.host_callback(self.emit, *arrays)

    def emit(self, *arrays):
        if QUIET[0]:
            return
        with _PRINT_LOCK:
            if _PRINTS:  # a program runs: printed when it has run to the end (not if a guard fails)
                _PRINTS[-1].append((self, arrays))
                return
        self.write(*arrays)

    def write(self, *arrays):
        values = iter(arrays)
        parts = []
        for item in self.layout:
            if item is None:
                a = next(values)  # a host copy (a GPU array is not read as NumPy implicitly)
                a = a if isinstance(a, np.ndarray) else np.asarray(self.real.to_numpy(a))
                parts.append(np.array2string(a, threshold=self.threshold, edgeitems=self.edge, separator=" "))
            else:
                parts.append(str(item))
        stream = self.stream
        if stream is None or isinstance(stream, str):
            stream = {None: sys.stderr, "stderr": sys.stderr, "stdout": sys.stdout}.get(stream, sys.stderr)
        print(*parts, sep=self.sep, end=self.end, file=stream, flush=True)


def print_(*inputs, output_stream=None, sep=" ", end="\n", summarize=3, name=None):
    """Print ``inputs`` (tensors and Python values) as ``tf.print``, to stderr by default: eagerly at
    once, and inside ``gt.function`` on every call of the program (a step of it, in the branch or
    loop body it is in), not only while tracing as Python's ``print``.  ``summarize``: the first and
    last elements shown per axis of a large tensor (-1: all)."""
    layout = []
    tensors = []
    for x in inputs:
        if isinstance(x, Tensor):
            layout.append(None)
            tensors.append(x)
        else:
            layout.append(x)
    trace = active_context()
    if trace is None or not any(t._v.__class__ is TraceArray for t in tensors):
        real = tensors[0]._b if tensors else None
        _Printer(real, layout, output_stream, sep, end, summarize).emit(*[t._b.to_numpy(t._v) for t in tensors])
        return
    real = trace.backend.real
    printer = _Printer(real, layout, output_stream, sep, end, summarize)
    natives = tuple(t._v if t._v.__class__ is TraceArray else lift(t, trace.backend)._v for t in tensors)
    # (in a branch or loop body the step's own run prints: not the sub-trace's)
    run = (lambda *a: None) if trace.parent is not None else (lambda *a: printer.emit(*[real.to_numpy(x) for x in a]))
    trace.call(printer, natives, None, effect="host", label="gt.print", run=run)
    trace.host_effects = True
