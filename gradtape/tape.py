"""The tape: ``GradientTape``, the per-thread tape stack, ``record`` and the backward walk.

A recorded node keeps the op, the identities and native values of its inputs and outputs, and the
attributes.  Rules see it as ``op`` (``op.inputs``/``op.outputs`` are rebuilt as Tensors carrying the
recorded identities, so an outer tape that watches them records what the rule computes: that is
all higher order needs).  The backward walk is a loop: select the nodes on a path from the sources,
walk them in reverse, call each rule, undo broadcasting, sum gradients that meet.
"""
from __future__ import annotations

import contextlib
import enum
import warnings

import optree

from gradtape._recording_state import _ACTIVE, _activate, _active_lock, _state  # noqa: F401  (re-exported)
from gradtape.tensor import Tensor, Variable, _wrap

__all__ = ["GradientTape", "UnconnectedGradients", "record", "Node"]


class UnconnectedGradients(enum.Enum):
    """What ``gradient`` returns for a source not connected to the target."""
    NONE = "none"
    ZERO = "zero"


_NO_ATTRS = {}
_PY_SCALARS = (bool, int, float, complex)

# A recorded node is a plain tuple (one allocation per recorded op call):
#   (opdef, in_ids, in_vals, attrs, out_id, out_val, backend)
# where ``out_id``/``out_val`` are the identity (an int) and native value of the one output, or, for
# an op of several outputs, tuples of them.
# ``in_vals``/``out_vals`` hold the native values the op's rule needs (``OpDef.saves``); an input
# that is not saved is None (its gradient needs no fitting: same shape and dtype as the output) or
# a ``_Meta`` (its shape and dtype, for undoing broadcasting); an output not saved is None.
# Rules receive a :class:`Node` built from the tuple when the walk reaches it.


class _Meta:
    """The shape and dtype of an input whose value the op's rule does not need."""

    __slots__ = ("shape", "dtype")

    def __init__(self, v):
        self.shape = v.shape
        self.dtype = v.dtype

    def __repr__(self):
        return f"<not saved: shape {tuple(self.shape)}, dtype {self.dtype}>"


def _scalar_tensor(v, like):
    """A 0-d tensor of Python scalar ``v`` on ``like``'s backend and device, in ``like``'s dtype
    where the scalar fits it (as the forward computed)."""
    from gradtape.dispatch import _scalar_fits
    b = like._b
    lv = like._v
    if _scalar_fits(v, b.dtype_of(lv)):
        return _wrap(b.xp.asarray(v, dtype=lv.dtype, device=b.device_of(lv)), b)
    from gradtape.tensor import convert_to_tensor
    return convert_to_tensor(v, like=like)


def _not_saved(opdef, what):
    raise RuntimeError(f"the gradient rule of {opdef.name!r} reads op.{what}, but the op declares "
                       f"saves={opdef.saves!r} (the values it keeps for its rule); add {what!r} to "
                       "its saves")


class Node:
    """One recorded op call; the ``op`` that gradient rules receive."""

    __slots__ = ("opdef", "in_ids", "in_vals", "attrs", "out_ids", "out_vals", "backend", "_inputs",
                 "_outputs", "_reach")

    def __init__(self, opdef, in_ids, in_vals, attrs, out_ids, out_vals, backend):
        self.opdef = opdef
        self.in_ids = in_ids
        self.in_vals = in_vals
        self.attrs = attrs if attrs is not None else _NO_ATTRS
        if out_ids.__class__ is int:
            out_ids, out_vals = (out_ids,), (out_vals,)
        self.out_ids = out_ids
        self.out_vals = out_vals
        self.backend = backend
        self._inputs = None
        self._outputs = None
        self._reach = None

    @property
    def name(self):
        return self.opdef.name

    type = name

    @property
    def inputs(self):
        """The recorded inputs, as Tensors with their recorded identities (Python scalars as is)."""
        if self._inputs is None:
            b = self.backend
            ins = []
            scalars = False
            for i, v in zip(self.in_ids, self.in_vals):
                if v is None or v.__class__ is _Meta:
                    _not_saved(self.opdef, "inputs")
                if i:
                    t = _wrap(v, b)
                    t._id = i
                elif v.__class__ in _PY_SCALARS:
                    scalars = True
                    t = v
                else:
                    t = _wrap(v, b)
                ins.append(t)
            if scalars:
                # Python scalars passed through to the backend: tensors of their partner's dtype
                like = next(t for t in ins if isinstance(t, Tensor))
                ins = [t if isinstance(t, Tensor) else _scalar_tensor(t, like) for t in ins]
            self._inputs = tuple(ins)
        return self._inputs

    @property
    def outputs(self):
        """The recorded outputs, as Tensors with their recorded identities."""
        if self._outputs is None:
            b = self.backend
            outs = []
            for i, v in zip(self.out_ids, self.out_vals):
                if v is None:
                    _not_saved(self.opdef, "outputs")
                t = _wrap(v, b)
                if i:
                    t._id = i
                outs.append(t)
            self._outputs = tuple(outs)
        return self._outputs

    def needs_grad(self, k):
        """Whether the gradient of input ``k`` is wanted in this backward pass (rules may skip
        work for inputs that are not)."""
        r = self._reach
        return r is None or self.in_ids[k] in r

    def __repr__(self):
        return f"<Node {self.opdef.name} in={self.in_ids} out={self.out_ids}>"


class _Recording:
    """What one tape holds: the watched identities (``roots``: watched by the user or on variable
    access; ``watched``: those and every recorded output), the recorded nodes (tuples), the
    watched variables."""

    __slots__ = ("watched", "roots", "nodes", "variables", "watch_accessed", "__weakref__")

    def __init__(self, watch_accessed):
        self.watched = set()
        self.roots = set()
        self.nodes = []
        self.variables = {}
        self.watch_accessed = watch_accessed

    def watch_id(self, i):
        self.watched.add(i)
        self.roots.add(i)

    def watch_variable(self, v):
        if v._id not in self.variables:
            self.variables[v._id] = v
            self.watched.add(v._id)
            self.roots.add(v._id)


def _node(op, ids, natives, attrs, outs):
    """The node tuple of one call (None when no output is differentiable)."""
    b = outs[0]._b
    if len(outs) == 1:
        o = outs[0]
        ov = o._v
        if not op.float_out and b.dtype_of(ov).kind not in "fc":
            return None
        saves = op._saves
        if saves is None:
            return (op, ids, natives, attrs, o._id, ov, b)
        return (op, ids, _saved_inputs(saves, natives, ov), attrs, o._id, ov if saves.outputs else None, b)
    mask = op.output_differentiable
    out_ids = tuple(o._id if b.dtype_of(o._v).kind in "fc" and (mask is None or mask[k]) else 0
                    for k, o in enumerate(outs))
    if not any(out_ids):
        return None
    return (op, ids, natives, attrs, out_ids, tuple([o._v for o in outs]), b)


def _saved_inputs(saves, natives, ov):
    ins = saves.inputs
    if ins is True:
        return natives
    out = []
    for k, v in enumerate(natives):
        if (ins and k in ins) or v.__class__ in _PY_SCALARS:
            out.append(v)
        elif v.shape == ov.shape and v.dtype == ov.dtype:
            out.append(None)
        else:
            out.append(_Meta(v))
    return tuple(out)


def record(op, args, natives, attrs, outs):
    """Record one op call on every active tape that watches one of its inputs."""
    ids = []
    variables = None
    for a in args:
        c = a.__class__
        if c is Tensor:
            ids.append(a._id)
        elif c is Variable:
            ids.append(a._id)
            if a._trainable:
                variables = (variables or []) + [a]
        elif isinstance(a, Tensor):
            ids.append(a._id)
        else:
            ids.append(0)
    ids = tuple(ids)
    natives = tuple(natives)
    node = None
    for rec in _state.tapes:
        if variables is not None and rec.watch_accessed:
            for v in variables:
                if v._id not in rec.variables:
                    rec.watch_variable(v)
        w = rec.watched
        for i in ids:
            if i in w:
                break
        else:
            continue
        if node is None:
            node = _node(op, ids, natives, attrs, outs)
            if node is None:
                return
        rec.nodes.append(node)
        outs = node[4]
        if outs.__class__ is int:
            w.add(outs)
        else:
            w.update(i for i in outs if i)


def record1(op, xid, xv, yv, yid, b, tapes, attrs=None):
    """``record`` for one (non-Variable) Tensor input and one output: the fast path."""
    node = None
    for rec in tapes:
        w = rec.watched
        if xid in w:
            if node is None:
                if not op.float_out and b.dtype_of(yv).kind not in "fc":
                    return
                s = op._saves
                if s is None:
                    node = (op, (xid,), (xv,), attrs, yid, yv, b)
                else:
                    node = (op, (xid,), (xv,) if s.inputs is True else _saved_inputs(s, (xv,), yv), attrs,
                            yid, yv if s.outputs else None, b)
            rec.nodes.append(node)
            w.add(yid)


def record2(op, id1, id2, v1, v2, yv, yid, b, tapes):
    """``record`` for two inputs (Tensors or passed-through Python scalars, id 0) and one output."""
    node = None
    for rec in tapes:
        w = rec.watched
        if id1 in w or id2 in w:
            if node is None:
                if not op.float_out and b.dtype_of(yv).kind not in "fc":
                    return
                s = op._saves
                if s is None:
                    node = (op, (id1, id2), (v1, v2), None, yid, yv, b)
                else:
                    node = (op, (id1, id2), (v1, v2) if s.inputs is True else _saved_inputs(s, (v1, v2), yv),
                            None, yid, yv if s.outputs else None, b)
            rec.nodes.append(node)
            w.add(yid)


def _flatten(structure, what):
    leaves, treespec = optree.tree_flatten(structure, none_is_leaf=True)
    return leaves, treespec


def _check_unconnected(u):
    if isinstance(u, UnconnectedGradients):
        return u
    try:
        return UnconnectedGradients(u)
    except ValueError:
        raise ValueError(f"Unknown value for unconnected_gradients: {u!r}; use "
                         "gt.UnconnectedGradients.NONE / .ZERO or 'none' / 'zero'") from None


class GradientTape:
    """Record operations for automatic differentiation (as ``tf.GradientTape``).

    Ops run inside the context are recorded when one of their inputs is watched; trainable
    variables read inside it are watched automatically unless ``watch_accessed_variables=False``.
    """

    def __init__(self, persistent=False, watch_accessed_variables=True):
        self._persistent = bool(persistent)
        self._watch_accessed_variables = bool(watch_accessed_variables)
        self._rec = None
        self._recording = False
        self._stack = None          # the tape stack (one thread's ``_state.tapes``) it records on
        self._used = False
        self._warned_inside = False
        self._watched_after_release = ()

    # ------------------------------------------------------------------ context
    def __enter__(self):
        self._push()
        return self

    def __exit__(self, typ, value, traceback):
        if self._recording:
            self._pop()

    def _ensure(self):
        if self._rec is None:
            self._rec = _Recording(self._watch_accessed_variables)
        return self._rec

    def _push(self, stack=None):
        """Start recording on ``stack`` (default: this thread's tape stack)."""
        if self._recording:
            raise ValueError("Tape is still recording; this can happen if you try to re-enter an "
                             "already-active tape")
        if stack is None:
            stack = _state.tapes
        rec = self._ensure()
        with _active_lock:      # another thread may be taking a tape off this stack
            stack.append(rec)
            _ACTIVE[0] += 1
        self._stack = stack
        self._recording = True

    def _pop(self):
        """Stop recording: off the stack it was pushed on, whichever thread calls (a tape exited,
        reset or used from another thread must not keep recording on its own)."""
        stack = self._stack
        rec = self._rec
        if stack is not None:
            with _active_lock:
                for k in range(len(stack) - 1, -1, -1):
                    if stack[k] is rec:
                        del stack[k]
                        _ACTIVE[0] -= 1
                        break
        self._stack = None
        self._recording = False
        return stack

    # ------------------------------------------------------------------ watching
    def watch(self, tensor):
        """Ensure ``tensor`` (a Tensor, Variable or nested structure of them) is traced by this tape."""
        leaves, _ = _flatten(tensor, "watch")
        rec = self._ensure()
        for t in leaves:
            if not isinstance(t, Tensor):
                raise ValueError(f"Passed in object {t!r} of type {type(t).__name__!r}, not a "
                                 "gt.Tensor or gt.Variable, to GradientTape.watch")
            if not t.dtype.differentiable:
                warnings.warn(f"The dtype of the watched tensor must be floating (e.g. gt.float32), "
                              f"got {t.dtype}; its gradients will be None", UserWarning, stacklevel=2)
                continue
            if t._is_var:
                rec.watch_variable(t)
            else:
                rec.watch_id(t._id)

    def watched_variables(self):
        """Variables watched by this tape, in order of construction."""
        if self._rec is None:
            return self._watched_after_release
        return tuple(v for _, v in sorted(self._rec.variables.items()))

    # ------------------------------------------------------------------ control
    def reset(self):
        """Clear everything recorded; the tape stays in its context (as exit and re-enter)."""
        stack = self._pop() if self._recording else None
        self._rec = None
        self._used = False
        if stack is not None:
            self._push(stack)

    @contextlib.contextmanager
    def stop_recording(self):
        """Temporarily stop recording operations on this tape."""
        if not self._recording:
            raise RuntimeError("Trying to stop recording a tape which is not recording.")
        stack = self._pop()
        try:
            yield
        finally:
            self._push(stack)

    # ------------------------------------------------------------------ gradients
    def _begin(self, what):
        if self._rec is None and not self._persistent and self._used:
            raise RuntimeError(f"A non-persistent GradientTape can only be used to compute one set of "
                               f"gradients (or jacobians); create the tape with persistent=True to call "
                               f"{what}() more than once")
        if self._used and not self._persistent:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one set of "
                               "gradients (or jacobians)")
        if self._recording:
            if not self._persistent:
                self._pop()
            elif not self._warned_inside:
                self._warned_inside = True
                warnings.warn(f"Calling GradientTape.{what} on a persistent tape inside its context is "
                              "significantly less efficient than calling it outside the context (it "
                              "causes the gradient ops to be recorded on the tape, leading to increased "
                              "CPU and memory usage). Only call GradientTape.gradient inside the "
                              "context if you actually want to trace the gradient in order to compute "
                              "higher order derivatives.", UserWarning, stacklevel=3)
        self._used = True
        return self._ensure()

    def _release(self):
        if not self._persistent:
            self._watched_after_release = self.watched_variables()
            self._rec = None

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=UnconnectedGradients.NONE):
        """Gradient of ``target`` (a tensor or nested structure; several are summed) with respect
        to ``sources``, in the structure of ``sources``."""
        if target is None:
            raise TypeError("Argument `target` should be a list or nested structure of Tensors or "
                            "Variables to be differentiated, but received None.")
        unconnected = _check_unconnected(unconnected_gradients)
        src, spec = _flatten(sources, "sources")
        for s in src:
            if not isinstance(s, Tensor):
                raise ValueError(f"GradientTape.gradient: sources must be Tensors or Variables, got "
                                 f"{type(s).__name__} {s!r}; differentiate with respect to tensors the "
                                 "tape watches")
        rec = self._begin("gradient")
        try:
            targets, _ = _flatten(target, "target")
            tgrads = None
            if output_gradients is not None:
                tgrads, _ = _flatten(output_gradients, "output_gradients")
                if len(tgrads) != len(targets):
                    raise ValueError(f"output_gradients has {len(tgrads)} entries but there are "
                                     f"{len(targets)} targets; give one per target, in the same structure")
            grads = _backward(rec, targets, tgrads, src, unconnected, consume=not self._persistent)
        finally:
            self._release()
        return optree.tree_unflatten(spec, grads)

    def jacobian(self, target, sources, unconnected_gradients=UnconnectedGradients.NONE,
                 parallel_iterations=None, experimental_use_pfor=True):
        """Jacobian of ``target`` with respect to each source: shape ``target.shape + source.shape``."""
        from gradtape._jacobian import check_args, jacobian
        if not experimental_use_pfor and not self._persistent:
            raise RuntimeError("GradientTape must be created with persistent=True to compute the "
                               "jacobian with experimental_use_pfor=False.")
        unconnected = _check_unconnected(unconnected_gradients)
        check_args("jacobian", target, sources)
        rec = self._begin("jacobian")
        try:
            return jacobian(rec, target, sources, unconnected)
        finally:
            self._release()

    def batch_jacobian(self, target, source, unconnected_gradients=UnconnectedGradients.NONE,
                       parallel_iterations=None, experimental_use_pfor=True):
        """Per-example jacobians: ``[b, y1..yn, x1..xm]`` for target ``[b, y...]``, source ``[b, x...]``."""
        from gradtape._jacobian import batch_jacobian, check_batch_args
        if not experimental_use_pfor and not self._persistent:
            raise RuntimeError("GradientTape must be created with persistent=True to compute the "
                               "batch jacobian with experimental_use_pfor=False.")
        unconnected = _check_unconnected(unconnected_gradients)
        check_batch_args(target, source)
        rec = self._begin("batch_jacobian")
        try:
            return batch_jacobian(rec, target, source, unconnected)
        finally:
            self._release()


# ---------------------------------------------------------------------------------------- backward
class _NotBatchable(Exception):
    """A batched walk (see ``_backward(batch=...)``) met a node without native vjps."""


_REAL_NATIVE = {}


def _real_natives(b):
    """The native dtypes of ``b`` that are real floating (native vjps run on these only)."""
    s = _REAL_NATIVE.get(b)
    if s is None:
        from gradtape import dtypes as _dt
        s = set()
        for d in (getattr(_dt, "float16", None), _dt.float32, _dt.float64, getattr(_dt, "bfloat16", None)):
            if d is None:
                continue
            try:
                nd = b.dtype_to_native(d)
            except (TypeError, KeyError):
                continue
            s.add(nd)
            try:        # the dtype objects arrays carry (NumPy's np.dtype, not the scalar type)
                s.add(b.xp.zeros((0,), dtype=nd).dtype)
            except Exception:   # pragma: no cover - a library that cannot make this array
                pass
        s = _REAL_NATIVE[b] = frozenset(s)
    return s


def _broadcasts_to(shape, gshape):
    """Whether an input of ``shape`` broadcasts to ``gshape`` (its gradient may then have that
    shape: the engine sums it back)."""
    lead = len(gshape) - len(shape)
    if lead < 0:
        return False
    for k, d in enumerate(shape):
        if d != 1 and d != gshape[lead + k]:
            return False
    return True


def _bad_gradient(n, k, gshape, shape):
    """A rule returned, for input ``k`` of node ``n``, a gradient its input's shape cannot come from."""
    from gradtape.registry import rule_location
    op = n[0]
    attrs = n[3] or {}
    fn = attrs.get("grad_fn") if op.name == "custom_gradient" else op.grad
    code = getattr(fn, "__code__", None)
    where = (f"{getattr(fn, '__qualname__', fn)!r} at {code.co_filename}:{code.co_firstlineno}" if code
             else rule_location(op))
    raise ValueError(f"the gradient rule of op {op.name!r} ({where}) returned a gradient of shape "
                     f"{gshape} for input {k} of shape {shape} (backend {n[6].name!r}); a rule must "
                     "return, for each input, a gradient of that input's shape (or of the shape it was "
                     "broadcast to, which the engine sums back)")


def _fit_native(g, v, xp, nb, n=None, k=None):
    """Native gradient ``g`` summed to the shape of the saved input ``v`` (an array or ``_Meta``)
    and cast to its dtype; ``nb`` leading axes of ``g`` are a batch (a batched walk) and stay.
    ``n``, ``k``: the node and input index, named if ``g`` cannot be the input's gradient."""
    gs = g.shape
    vs = v.shape
    if (gs if not nb else gs[nb:]) != vs and tuple(gs[nb:]) != tuple(vs):
        vs = tuple(vs)
        gs = tuple(gs)
        lead = len(gs) - nb - len(vs)
        if not _broadcasts_to(vs, gs[nb:]):
            if n is not None:
                _bad_gradient(n, k, gs[nb:], vs)
            raise ValueError(f"cannot sum a gradient of shape {gs[nb:]} to the shape {vs}")
        axes = tuple(range(nb, nb + lead)) + tuple(
            nb + lead + k for k, n in enumerate(vs) if n == 1 and gs[nb + lead + k] != 1)
        if axes:
            g = xp.sum(g, axis=axes, keepdims=True)
        if tuple(g.shape) != gs[:nb] + vs:
            g = xp.reshape(g, gs[:nb] + vs)
    if g.dtype != v.dtype:
        if xp.isdtype(g.dtype, "complex floating") and not xp.isdtype(v.dtype, "complex floating"):
            g = xp.real(g)
        if g.dtype != v.dtype:
            g = xp.astype(g, v.dtype)
    return g


def _path(rec, source_ids):
    """The identities reachable from the sources, and the nodes on a path from them.  When the
    sources include every watched root, that is everything recorded: no filtering pass."""
    roots = rec.roots
    ids = {i for i in source_ids if i}
    if roots <= ids:
        return rec.watched | ids, None
    reach = ids
    path = []
    for n in rec.nodes:
        for i in n[1]:
            if i in reach:
                break
        else:
            continue
        path.append(n)
        outs = n[4]
        if outs.__class__ is int:
            reach.add(outs)
        else:
            reach.update(i for i in outs if i)
    return reach, path


def _backward(rec, targets, tgrads, sources, unconnected, consume=False, batch=None):
    """The reverse walk.  Returns one gradient (or None / zeros) per source.

    When no tape of this thread records (nothing needs the walk's own ops: no higher order), the
    walk runs on native arrays: nodes whose op has native vjps (``OpDef.defvjp``) run them directly,
    the others run their rule on Tensors wrapped around the native gradients.  Otherwise every rule
    runs on Tensors (recorded by the outer tapes).  ``consume`` (a non-persistent tape's only walk)
    drops each node once walked, freeing its saved values.  ``batch``: native cotangents with one
    leading batch axis for the (single) target, walked in one pass by native vjps only (raises
    ``_NotBatchable`` at a node without them).
    """
    for t in targets:
        if not isinstance(t, Tensor):
            raise ValueError(f"GradientTape.gradient: targets must be Tensors or Variables, got "
                             f"{type(t).__name__}")
        if not t.dtype.differentiable:
            warnings.warn(f"The dtype of the target tensor must be floating (e.g. gt.float32) when "
                          f"calling GradientTape.gradient, got {t.dtype}", UserWarning, stacklevel=3)
    source_ids = []
    for s in sources:
        if not s.dtype.differentiable:
            warnings.warn(f"The dtype of the source tensor must be floating (e.g. gt.float32) when "
                          f"calling GradientTape.gradient, got {s.dtype}", UserWarning, stacklevel=3)
            source_ids.append(0)
        else:
            source_ids.append(s._id)
    native = not _state.tapes
    if not native:
        consume = False
        # the walk's own ops may be recorded on this tape (a persistent tape inside its context)
        reach, path = _path(rec, source_ids)
        reach = set(reach)
        nodes = list(rec.nodes) if path is None else path
    else:
        reach, path = _path(rec, source_ids)
        nodes = rec.nodes if path is None else path
    if path is not None:
        consume = False

    nb = 0
    grads = {}
    for k, t in enumerate(targets):
        if not t.dtype.differentiable:
            continue
        g = None if tgrads is None else tgrads[k]
        if batch is not None:
            g = batch
            nb = 1
        elif g is not None:
            g = g if isinstance(g, Tensor) else _as_like(g, t)
            if tuple(g.shape) != tuple(t.shape):
                raise ValueError(f"output_gradients[{k}] has shape {tuple(g.shape)} but its target has "
                                 f"shape {tuple(t.shape)}; they must match")
        tid = t._id
        if tid not in reach:
            continue
        if native:
            if g is None:
                g = t._b.xp.ones_like(t._v)
            elif isinstance(g, Tensor):
                g = g._v
        elif g is None:
            from gradtape.ops.creation import ones_like
            g = ones_like(t)
        prev = grads.get(tid)
        grads[tid] = g if prev is None else prev + g

    keep = set(source_ids)
    if native:
        try:
            _walk_native(nodes, grads, reach, keep, consume, nb)
        finally:
            if consume:
                nodes.clear()
    else:
        _walk_tensors(nodes, grads, reach, keep)

    out = []
    for s, sid in zip(sources, source_ids):
        g = grads.get(sid) if sid else None
        if g is None:
            if unconnected is UnconnectedGradients.ZERO and not nb:
                from gradtape.ops.creation import zeros_like
                g = zeros_like(s)
        elif native and not nb:
            b = s._b
            if g.__class__ is not b.array_type:
                g = b.fix_output(g)
            g = _wrap(g, b)
        out.append(g)
    return out


def _walk_tensors(nodes, grads, reach, keep):
    """The walk with every rule on Tensors (an outer tape records what the rules compute)."""
    from gradtape.ops.creation import zeros_like
    for n in reversed(nodes):
        o = n[4]
        if o.__class__ is int:
            g = grads.get(o) if o in keep else grads.pop(o, None)
            if g is None:
                continue
            gs = (g,)
        else:
            gs = [(grads.get(i) if i in keep else grads.pop(i, None)) if i else None for i in o]
            if all(g is None for g in gs):
                continue
            if any(g is None for g in gs):
                outputs = Node(*n).outputs
                gs = [zeros_like(outputs[k]) if g is None else g for k, g in enumerate(gs)]
        in_grads = _call_rule(n, gs, reach)
        b = n[6]
        for k, (i, g, v) in enumerate(zip(n[1], in_grads, n[2])):
            if g is None or i not in reach:
                continue
            g = _fit_tensor(g, v, n, b, k, gs[0].shape)
            prev = grads.get(i)
            grads[i] = g if prev is None else prev + g


def _call_rule(n, gs, reach):
    """Run a node's Tensor rule; its input gradients, one per input."""
    op = n[0]
    rule = op.grad
    if rule is None:
        raise LookupError(f"gradient registry has no entry for: {op.name}")
    node = Node(*n)
    node._reach = reach
    in_grads = rule(node, *gs)
    if in_grads.__class__ is not tuple:
        in_grads = tuple(in_grads) if isinstance(in_grads, list) else (in_grads,)
    if len(in_grads) != len(n[1]):
        raise ValueError(f"the gradient rule of {op.name!r} returned {len(in_grads)} gradients "
                         f"for {len(n[1])} inputs")
    return in_grads


def _walk_native(nodes, grads, reach, keep, consume, nb):
    """The walk on native arrays (nothing records it)."""
    pop = grads.pop
    get = grads.get
    reals = None
    last_b = None
    for idx in range(len(nodes) - 1, -1, -1):
        n = nodes[idx]
        if consume:
            nodes[idx] = None           # the node's saved values go with the last reference
        op, in_ids, in_vals, attrs, o, y, b = n
        if o.__class__ is int:
            g = get(o) if o in keep else pop(o, None)
            if g is None:
                continue
            vjps = op.vjps
            if vjps is not None and op.grad is op.vjp_rule:
                if b is not last_b:
                    last_b = b
                    reals = _real_natives(b)
                    xp = b._xp
                if g.dtype in reals:
                    k = 0
                    for i in in_ids:
                        if i and i in reach:
                            f = vjps[k]
                            gi = None if f is None else (
                                f(xp, g, y, *in_vals, **attrs) if attrs else f(xp, g, y, *in_vals))
                            if gi is not None:
                                v = in_vals[k]
                                # (a Python scalar input has identity 0: never here)
                                if v is not None and (gi.shape != v.shape or gi.dtype != v.dtype):
                                    gi = _fit_native(gi, v, xp, nb, n, k)
                                prev = get(i)
                                grads[i] = gi if prev is None else prev + gi
                        k += 1
                    continue
            gs = (g,)
        else:
            gs = [(get(i) if i in keep else pop(i, None)) if i else None for i in o]
            if all(g is None for g in gs):
                continue
        if nb:
            raise _NotBatchable(op.name)
        _native_fallback(n, gs, grads, reach)


def _native_fallback(n, gs, grads, reach):
    """A node without native vjps in a native walk: its Tensor rule, on wrapped gradients."""
    from gradtape.ops.creation import zeros_like
    b = n[6]
    at = b.array_type
    gs = [None if g is None else _wrap(g if g.__class__ is at else b.fix_output(g), b) for g in gs]
    if any(g is None for g in gs):
        outputs = Node(*n).outputs
        gs = [zeros_like(outputs[k]) if g is None else g for k, g in enumerate(gs)]
    in_grads = _call_rule(n, gs, reach)
    for k, (i, g, v) in enumerate(zip(n[1], in_grads, n[2])):
        if g is None or i not in reach:
            continue
        g = _fit_tensor(g, v, n, b, k, gs[0].shape)._v
        prev = grads.get(i)
        grads[i] = g if prev is None else prev + g


def _fit_tensor(g, v, n, b, k, oshape):
    """A Tensor rule's gradient for input ``k``, saved as ``v`` (None: shaped like the output,
    ``oshape``); a ``ValueError`` naming the op and its rule if no broadcasting of the input gives
    the gradient's shape."""
    from gradtape._unbroadcast import fit_gradient
    shape = oshape if v is None else getattr(v, "shape", None)
    gshape = getattr(g, "shape", None)
    if gshape is None and g.__class__ in _PY_SCALARS:
        gshape = ()
    if shape is not None and gshape is not None:
        shape, gshape = tuple(shape), tuple(gshape)
        if gshape != shape and not _broadcasts_to(shape, gshape):
            _bad_gradient(n, k, gshape, shape)
    if v is not None:
        return fit_gradient(g, v, b)
    if isinstance(g, Tensor):
        return g
    ov = n[5] if n[4].__class__ is int else n[5][0]
    if ov is not None:
        return fit_gradient(g, ov, b)
    from gradtape.tensor import convert_to_tensor
    return convert_to_tensor(g, backend=b)


def _as_like(g, t):
    from gradtape.tensor import convert_to_tensor
    return convert_to_tensor(g, dtype=t.dtype, like=t)
