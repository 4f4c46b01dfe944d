"""The engine: what a tape records (the :class:`Node`), how an op call is recorded, and the one
backward walk.

A node keeps the op, the identities and native values of its inputs and outputs, and the attributes.
The walk visits the recorded nodes in reverse and calls each op's rule once, ``rule(xp, op, *grads)``,
with the namespace that fits the walk:

* nothing records the walk and the cotangent is real floating: the backend's native namespace
  (:func:`gradtape.core.rule_namespace.native_namespace`); ``op`` is the node itself, its ``inputs`` and
  ``outputs`` native arrays (the fast path: no Tensor is made);
* an outer tape records the walk (higher order), the cotangent is complex, or the rule is a
  TensorFlow-style ``rule(op, *grads)`` (``gt.RegisterGradient``): gradtape's own namespace, on
  Tensors that carry the recorded identities, so outer tapes record what the rule computes.

Broadcasting is undone in one place (:func:`gradtape.core.unbroadcast.fit`).  This module never imports
an op chapter: it sits below ``dispatch`` and the ops.
"""

from __future__ import annotations

import ast
import copy
import enum
import inspect
import textwrap
import threading
import warnings

from gradtape.core import dtypes as _dt
from gradtape.core.recording_state import per_thread
from gradtape.core.rule_namespace import native_namespace, tensor_namespace
from gradtape.core.unbroadcast import bad_gradient, broadcasts_to, fit
from gradtape.core.registry import OpDef, rule_location
from gradtape.core.tensor import Tensor, Variable, new_tensor, wrap, convert_to_tensor

__all__ = [
    "Node",
    "TensorOp",
    "UnconnectedGradients",
    "make_node",
    "record",
    "backward",
    "inline_calls",
    "fold_constants",
    "GENERATING",
    "NotBatchable",
    "Recording",
    "native_dtypes",
]


class UnconnectedGradients(enum.Enum):
    """What ``gradient`` returns for a source not connected to the target."""

    NONE = "none"
    ZERO = "zero"


NO_ATTRS = {}
_PY_SCALARS = (bool, int, float, complex)


class Meta:
    """The shape and dtype of an input whose value the op's rule does not need."""

    __slots__ = ("shape", "dtype", "chunks")

    def __init__(self, v):
        self.shape = v.shape
        self.dtype = v.dtype
        self.chunks = getattr(v, "chunks", None)  # (dask: a gradient gets its input's chunks)

    def __repr__(self):
        return f"<not saved: shape {tuple(self.shape)}, dtype {self.dtype}>"


class Node:
    """One recorded op call.  In a native walk it is the ``op`` a rule receives.

    ``inputs``/``outputs`` hold the native values the op's rule reads (``OpDef.saves``): an input that
    is not saved is None (shaped and typed like the output) or a ``Meta`` (its shape and dtype, for
    undoing broadcasting); an output not saved is None.  ``in_ids``/``out_ids`` are the identities
    of the recorded tensors (0: a Python scalar input, or an output that carries no gradient).

    A slotted object, built by :func:`make_node` alone and read by field name: making one costs
    about half of a named tuple's (``tuple.__new__`` copies the fields' tuple), and the walk's
    reads of its fields are slot reads."""

    __slots__ = ("opdef", "in_ids", "inputs", "attrs", "out_ids", "outputs", "backend")

    opdef: OpDef
    in_ids: tuple
    inputs: tuple
    attrs: dict
    out_ids: tuple
    outputs: tuple
    backend: object

    @property
    def name(self):
        return self.opdef.name

    type = name  # (a second name for the property, as TF's Operation.type)

    def needs_grad(self, k):
        """Whether the gradient of input ``k`` is wanted in this backward walk (rules may skip the
        work for inputs that are not).  A Python scalar input (identity 0) never is."""
        i = self.in_ids[k]
        if not i:
            return False
        r = per_thread.reach
        return r is None or i in r

    def _replace(self, **fields):
        """A copy with ``fields`` replaced (as a named tuple's ``_replace``: a rule's test stub)."""
        node = copy.copy(self)
        for f, v in fields.items():
            setattr(node, f, v)  # (an unknown field: AttributeError)
        return node

    def __repr__(self):
        return f"<Node {self.opdef.name} in={self.in_ids} out={self.out_ids}>"


new_node = object.__new__


def _not_saved(opdef, what):
    raise RuntimeError(
        f"the gradient rule of {opdef.name!r} reads op.{what}, which this call did not keep when it was "
        f"recorded (the op declares saves={opdef.saves!r}, the values it keeps for its rule; a rule "
        "replaced after the call sees what the rule of the time declared): add it to the op's saves "
        "(saves= where the op is declared, or op.saves = ...)"
    )


class _Unsaved:
    """Where a rule on Tensors finds a value its op did not save: any use of it is the
    ``RuntimeError`` of :func:`_not_saved` (so a rule may unpack ``op.inputs`` and read only what
    its op saves), but for the ``shape`` and ``ndim`` of an unsaved input, which the node keeps
    (a ``Meta``, or the output's shape), as the native walk's node gives them."""

    __slots__ = ("_opdef", "_what", "_shape")

    def __init__(self, opdef, what, shape=None):
        self._opdef = opdef
        self._what = what
        self._shape = shape

    @property
    def shape(self):
        if self._shape is None:
            _not_saved(self._opdef, self._what)
        return self._shape

    @property
    def ndim(self):
        return len(self.shape)

    def _fail(self, *args, **kwargs):
        _not_saved(self._opdef, self._what)

    def __getattr__(self, name):
        _not_saved(self._opdef, self._what)

    __array__ = __array_namespace__ = __bool__ = __len__ = __iter__ = __getitem__ = __float__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _fail
    __neg__ = __pos__ = __abs__ = __pow__ = __rpow__ = __matmul__ = __rmatmul__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __index__ = __int__ = __complex__ = _fail
    __hash__ = object.__hash__

    def __repr__(self):
        return f"<op.{self._what} of {self._opdef.name!r}: not saved>"


class TensorOp:
    """The ``op`` a rule receives on gradtape's namespace: the node's inputs and outputs as Tensors
    carrying their recorded identities (an outer tape that watches them records the rule)."""

    __slots__ = ("node", "_inputs", "_outputs", "_out_shape")

    def __init__(self, node, out_shape=None):
        self.node = node
        self._inputs = None
        self._outputs = None
        self._out_shape = out_shape  # (the first output's shape, where the walk knows it)

    opdef = property(lambda self: self.node.opdef)
    name = property(lambda self: self.node.opdef.name)
    type = name
    attrs = property(lambda self: self.node.attrs)
    in_ids = property(lambda self: self.node.in_ids)
    out_ids = property(lambda self: self.node.out_ids)
    backend = property(lambda self: self.node.backend)

    def needs_grad(self, k):
        return self.node.needs_grad(k)

    @property
    def inputs(self):
        """The recorded inputs, as Tensors with their recorded identities (Python scalars as they
        are, as the native walk passes them: the namespace's functions take them beside a Tensor)."""
        if self._inputs is None:
            n = self.node
            b = n.backend
            ins = []
            for k, (i, v) in enumerate(zip(n.in_ids, n.inputs)):
                if v is None or v.__class__ is Meta:
                    # (not kept: its shape is a Meta's, or the first output's where it is None)
                    shape = v.shape if v is not None else self._out_shape
                    if shape is None and n.outputs[0] is not None:
                        shape = n.outputs[0].shape
                    ins.append(_Unsaved(n.opdef, f"inputs[{k}]", None if shape is None else tuple(shape)))
                    continue
                if i:
                    t = new_tensor(Tensor)  # (wrap's body with the recorded identity: no new one)
                    t._v = v
                    t._b = b
                    t._id = i
                elif v.__class__ in _PY_SCALARS:
                    t = v
                else:
                    t = wrap(v, b)
                ins.append(t)
            self._inputs = tuple(ins)
        return self._inputs

    @property
    def outputs(self):
        """The recorded outputs, as Tensors with their recorded identities."""
        if self._outputs is None:
            n = self.node
            b = n.backend
            outs = []
            for k, (i, v) in enumerate(zip(n.out_ids, n.outputs)):
                if v is None:
                    outs.append(_Unsaved(n.opdef, f"outputs[{k}]"))
                    continue
                t = wrap(v, b)
                if i:
                    t._id = i
                outs.append(t)
            self._outputs = tuple(outs)
        return self._outputs

    def __repr__(self):
        return f"<op {self.node.opdef.name} in={self.node.in_ids} out={self.node.out_ids}>"


class Recording:
    """What one tape holds: the watched identities (``roots``: watched by the user or on variable
    access; ``watched``: those and every recorded output), the recorded nodes, the watched
    variables."""

    __slots__ = ("watched", "roots", "nodes", "variables", "watch_accessed", "hides_outer", "__weakref__")

    def __init__(self, watch_accessed, hides_outer=False):
        self.watched = set()
        self.roots = set()
        self.nodes = []
        self.variables = {}
        self.watch_accessed = watch_accessed
        # (a custom gradient's body: the recordings below this one on the thread's list still record, but
        # converting a tensor out of gradtape there leaks nothing -- the user gives the gradient)
        self.hides_outer = hides_outer

    def watch_id(self, i):
        self.watched.add(i)
        self.roots.add(i)

    def watch_variable(self, v):
        if v._id not in self.variables:
            self.variables[v._id] = v
            self.watched.add(v._id)
            self.roots.add(v._id)


# ---------------------------------------------------------------------------------------- recording
def make_node(op, ids, natives, attrs, out_ids, outs, b):
    """The node of one call, keeping only what ``op.saves`` declares (``natives``: the native
    inputs, ``outs``: the native outputs, tuples): the one constructor of :class:`Node`."""
    saves = op._saves
    kept = natives
    kept_out = outs
    if saves is not None:
        ins = saves.inputs
        if ins is not True:
            # an input the rule does not read: None where shaped and typed like the (first) output,
            # else its shape and dtype (for undoing broadcasting); Python scalars stay
            ov = outs[0]
            dt = ov.dtype
            shape = ov.shape
            if not ins and len(natives) == 2:  # (add, subtract: no input kept, without a loop)
                v1, v2 = natives
                kept = (
                    v1 if v1.__class__ in _PY_SCALARS else None if v1.dtype == dt and v1.shape == shape else Meta(v1),
                    v2 if v2.__class__ in _PY_SCALARS else None if v2.dtype == dt and v2.shape == shape else Meta(v2),
                )
            else:
                kept = tuple(
                    [
                        v
                        if v.__class__ in _PY_SCALARS or (ins and k in ins)
                        else None
                        if v.dtype == dt and v.shape == shape
                        else Meta(v)
                        for k, v in enumerate(natives)
                    ]
                )
        if not saves.outputs:
            kept_out = (None,) * len(outs)
    node = new_node(Node)
    node.opdef = op
    node.in_ids = ids
    node.inputs = kept
    node.attrs = attrs or NO_ATTRS
    node.out_ids = out_ids
    node.outputs = kept_out
    node.backend = b
    return node


def _differentiable_outputs(op, outs, b):
    """The identities of an op's several outputs that carry a gradient (0 for the others); None if
    none does."""
    mask = op.output_differentiable
    out_ids = tuple(
        o._id if b.dtype_of(o._v).kind in "fc" and (mask is None or mask[k]) else 0 for k, o in enumerate(outs)
    )
    return out_ids if any(out_ids) else None


def _input_ids(args):
    """The identities of an op call's inputs (0: not a Tensor) and the trainable Variables among
    them (None: none)."""
    ids = []
    variables = None
    for a in args:
        c = a.__class__
        if c is Tensor:
            ids.append(a._id)
        elif isinstance(a, Tensor):
            ids.append(a._id)
            if c is Variable and a._trainable:
                variables = (variables or []) + [a]
        else:
            ids.append(0)
    return tuple(ids), variables


def record(op, args, natives, attrs, outs, tapes=None):
    """Record one op call (``args``: its inputs; ``natives``: their native values as the forward
    took them, a tuple; ``outs``: its output Tensors) on every recording tape of this thread
    (``tapes``) that watches one of its inputs; trainable Variables read are watched first where
    the tape watches on access."""
    variables = None
    a = args[0] if args else None
    if a.__class__ is Tensor and len(args) == 1:  # (the common case, without a loop)
        ids = (a._id,)
    else:
        ids, variables = _input_ids(args)
    node = None
    for rec in per_thread.tapes if tapes is None else tapes:
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
            if len(outs) == 1:
                y = outs[0]
                b = y._b
                if not op.float_out and b.dtype_of(y._v).kind not in "fc":
                    return
                out_ids = (y._id,)
                node = make_node(op, ids, natives, attrs, out_ids, (y._v,), b)
            else:
                b = outs[0]._b
                out_ids = _differentiable_outputs(op, outs, b)
                if out_ids is None:
                    return
                node = make_node(op, ids, natives, attrs, out_ids, tuple([o._v for o in outs]), b)
        rec.nodes.append(node)
        for i in out_ids:
            if i:
                w.add(i)


# ---------------------------------------------------------------------------------------- backward
class NotBatchable(Exception):
    """A batched walk (``backward(batch=...)``) met a node whose rule does not take a leading batch
    axis on its cotangent (or must run on Tensors)."""


_NATIVE_DTYPES = {}


def native_dtypes(b, kinds):
    """The native dtypes of backend ``b`` whose gradtape kind is in ``kinds`` ("f": real floating,
    "fc": floating and complex), both as the library names them and as its arrays carry them
    (NumPy's ``np.dtype``, not the scalar type); cached."""
    s = _NATIVE_DTYPES.get((b, kinds))
    if s is None:
        s = set()
        for d in _dt.ALL_DTYPES:
            if d.kind not in kinds:
                continue
            try:
                nd = b.dtype_to_native(d)
                s.add(nd)
                s.add(b.xp.zeros((0,), dtype=nd).dtype)
            except Exception:  # a dtype the library lacks
                continue
        s = _NATIVE_DTYPES[(b, kinds)] = frozenset(s)
    return s


def _real_natives(b):
    """The native dtypes of ``b`` that are real floating (rules run on the native namespace for
    these gradients)."""
    return native_dtypes(b, "f")


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
        for i in n.in_ids:
            if i in reach:
                break
        else:
            continue
        path.append(n)
        reach.update(i for i in n.out_ids if i)
    return reach, path


def backward(rec, targets, tgrads, sources, unconnected, consume=False, batch=None):
    """The reverse walk over ``rec``'s nodes.  Returns one gradient (or None / zeros) per source.

    When no tape of this thread records, the walk keeps native arrays and runs each rule on the
    native namespace (real cotangents; Tensors for the others); otherwise every rule runs on
    gradtape's namespace and outer tapes record it.  ``consume`` (a non-persistent tape's only walk)
    drops each node once walked, freeing its saved values.  ``batch``: native cotangents with one
    leading batch axis for the (single) target, walked in one pass (raises ``NotBatchable`` at a
    node whose rule does not take the batch axis).
    """
    for t in targets:
        if not isinstance(t, Tensor):
            raise ValueError(f"GradientTape.gradient: targets must be Tensors or Variables, got {type(t).__name__}")
        if not t.dtype.differentiable:
            warnings.warn(
                f"The dtype of the target tensor must be floating (e.g. gt.float32) when "
                f"calling GradientTape.gradient, got {t.dtype}",
                UserWarning,
                stacklevel=3,
            )
    source_ids = []
    for s in sources:
        if not s.dtype.differentiable:
            warnings.warn(
                f"The dtype of the source tensor must be floating (e.g. gt.float32) when "
                f"calling GradientTape.gradient, got {s.dtype}",
                UserWarning,
                stacklevel=3,
            )
            source_ids.append(0)
        else:
            # a source the tape does not watch (not watched, not a variable it saw read, not computed
            # from one) gets no gradient, as TensorFlow's: an unwatched non-trainable variable in
            # ``x * frozen`` is None, not ``x`` (a source that is a target is its own gradient, watched
            # or not, as in TensorFlow)
            i = s._id
            source_ids.append(i if i in rec.watched or any(t._id == i for t in targets) else 0)
    native = not per_thread.tapes
    reach, path = _path(rec, source_ids)
    if native:
        nodes = rec.nodes if path is None else path
    else:
        # the walk's own ops may be recorded on this tape (a persistent tape inside its context)
        reach = set(reach)
        nodes = list(rec.nodes) if path is None else path
        consume = False
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
            g = g if isinstance(g, Tensor) else convert_to_tensor(g, dtype=t.dtype, like=t)
            if tuple(g.shape) != tuple(t.shape):
                raise ValueError(
                    f"output_gradients[{k}] has shape {tuple(g.shape)} but its target has "
                    f"shape {tuple(t.shape)}; they must match"
                )
            if g.dtype.is_complex and not t.dtype.is_complex:
                # (the walk would keep its real part at the first real input: the imaginary part
                # lost without a word; TensorFlow's ops refuse the mixed dtypes, jax.vjp the cotangent;
                # a TypeError as gt.vjp's and as converting complex values to a real dtype)
                raise TypeError(
                    f"output_gradients[{k}] is {g.dtype} but its target is {t.dtype}: a real target's "
                    "cotangent is real; pass gt.real(...) of it if its real part is meant"
                )
        tid = t._id
        if tid not in reach:
            continue
        if native:
            if g is None:
                g = t._b.xp.ones_like(t._v)
            elif isinstance(g, Tensor):
                g = g._v
        elif g is None:
            g = tensor_namespace().ones_like(t)
        prev = grads.get(tid)
        grads[tid] = g if prev is None else prev + g

    keep = set(source_ids)
    saved_reach = per_thread.reach
    per_thread.reach = reach
    try:
        _walk_fast(nodes, grads, reach, keep, consume, nb, native)
    finally:
        per_thread.reach = saved_reach
        if consume:
            nodes.clear()

    out = []
    for s, sid in zip(sources, source_ids):
        g = grads.get(sid) if sid else None
        if g is None:
            if unconnected is UnconnectedGradients.ZERO and not nb:
                g = tensor_namespace().zeros_like(s)
        elif native and not nb:
            b = s._b
            if g.__class__ is not b.array_type:
                g = b.fix_output(g)
            if b.lays_out and isinstance(s, Tensor):
                # a gradient laid out as its source (dask's chunks, a JAX sharding); not for a sub-trace's
                # stand-in source (gt.cond / gt.while_loop), which has an identity and no value
                g = b.match_layout(g, s._v)
            g = wrap(g, b)
        out.append(g)
    return out


def _walk(nodes, grads, reach, keep, consume, nb, native):
    """Call each node's rule in reverse order and hand its gradients to :func:`_fit_add`.
    ``native``: ``grads`` holds native arrays (else Tensors).  The two common cases call the rule
    here: one output and a real cotangent in a native walk (the rule on native arrays), and one
    output and an ``xp`` rule in a recorded walk (on Tensors, an outer tape recording); everything
    else (several outputs, complex cotangents in a native walk, TensorFlow-style rules, a batched
    walk's other nodes) goes through :func:`_general_rule`."""
    pop = grads.pop
    get = grads.get
    last_b = None
    reals = xp_native = None
    xp_tensors = None if native else tensor_namespace()
    for idx in range(len(nodes) - 1, -1, -1):
        n = nodes[idx]
        if consume:
            nodes[idx] = None  # the node's saved values go with the last reference
        oids = n.out_ids
        if len(oids) == 1:
            (o,) = oids
            g = get(o) if o in keep else pop(o, None)
            if g is None:
                continue
            op = n.opdef
            if native and op.xp_rule:
                b = n.backend
                if b is not last_b:
                    last_b = b
                    reals = _real_natives(b)
                    xp_native = native_namespace(b)
                if g.dtype in reals:
                    if nb and not op.batched:
                        raise NotBatchable(op.name)
                    try:
                        in_grads = op._grad(xp_native, n, g)
                    except (TypeError, AttributeError) as e:
                        _native_rule_failed(n, e)
                    except _NAMED_IN_RULES as e:
                        _rule_raised(n, e)
                    _fit_add(grads, reach, n, in_grads, xp_native, nb, None)
                    in_grads = None  # (nothing of this rule's held while the next one runs)
                    continue
            elif not native and not nb and op.xp_rule:
                # the recorded walk's common case (an outer tape records it): one cotangent, an xp
                # rule on Tensors, its gradients kept as Tensors
                try:
                    in_grads = op._grad(xp_tensors, TensorOp(n, g._v.shape), g)
                except _NAMED_IN_RULES as e:
                    _rule_raised(n, e)
                _fit_add(grads, reach, n, in_grads, xp_tensors, 0, g, False)
                in_grads = None
                continue
            gs = (g,)
        else:
            gs = [(get(i) if i in keep else pop(i, None)) if i else None for i in oids]
            if all(h is None for h in gs):
                continue
        _general_rule(n, gs, grads, reach, nb, native)


def _general_rule(n, gs, grads, reach, nb, native):
    """One node off the walk's common cases: several outputs, a complex cotangent, a rule on
    Tensors in a native walk or a TensorFlow-style rule."""
    op = n.opdef
    rule = op._grad
    b = n.backend
    if rule is None:
        raise LookupError(f"gradient registry has no entry for: {op.name}")
    on_native = False
    if native and op.xp_rule:
        reals = _real_natives(b)
        on_native = all(h is None or h.dtype in reals for h in gs)
    if nb and not (on_native and op.batched):
        raise NotBatchable(op.name)
    if on_native:
        xp = native_namespace(b)
        if any(h is None for h in gs):
            if nb:
                raise NotBatchable(op.name)  # (zeros without the batch axis)
            gs = [xp.zeros_like(n.outputs[k]) if h is None else h for k, h in enumerate(gs)]
        try:
            in_grads = rule(xp, n, *gs)
        except (TypeError, AttributeError) as e:
            _native_rule_failed(n, e)
        except _NAMED_IN_RULES as e:
            _rule_raised(n, e)
        _fit_add(grads, reach, n, in_grads, xp, nb, None)
        return
    xp = tensor_namespace()
    view = TensorOp(n)
    if native:
        at = b.array_type
        gs = [None if h is None else wrap(h if h.__class__ is at else b.fix_output(h), b) for h in gs]
    if len(gs) > 1 and any(h is None for h in gs):
        gs = [xp.zeros_like(view.outputs[k]) if h is None else h for k, h in enumerate(gs)]
    if gs[0] is not None:
        view._out_shape = gs[0]._v.shape
    try:
        in_grads = rule(xp, view, *gs) if op.xp_rule else rule(view, *gs)
    except _NAMED_IN_RULES as e:
        _rule_raised(n, e)
    g_out = next(h for h in gs if h is not None)
    _fit_add(grads, reach, n, in_grads, xp, 0, g_out, native)


def _fit_add(grads, reach, n, in_grads, xp, nb, g_out, native=True):
    """The one place a rule's gradients join the walk: each input's gradient (one per input of
    node ``n``; a rule of one input may return it bare) summed to its input's shape and cast to
    its dtype (:func:`_unbroadcast.fit`), laid out as its input (dask's chunks), and added to what
    already reached that input.  ``g_out``: None for gradients on ``xp``'s native arrays; else the
    rule ran on Tensors and ``g_out`` is an output's cotangent (whose shape an unsaved input has),
    and ``native`` says whether ``grads`` holds native arrays."""
    in_ids = n.in_ids
    c = in_grads.__class__
    if c is not tuple and c is not list:
        in_grads = (in_grads,)
    if len(in_grads) != len(in_ids):
        _wrong_count(n.opdef, in_grads, in_ids)
    k = 0
    for i in in_ids:
        gi = in_grads[k]
        if gi is not None and i and i in reach:
            if g_out is None:
                v = n.inputs[k]
                if v is not None:
                    if gi.shape != v.shape or gi.dtype != v.dtype:
                        gi = fit(xp, gi, v.shape, v.dtype, nb, n, k)
                    if n.backend.chunked:
                        gi = n.backend.match_layout(gi, v)
            else:
                v = n.inputs[k]
                if gi.__class__ is not Tensor or (
                    (gi is not g_out and gi._v.shape != g_out._v.shape)
                    if v is None
                    else gi._v.shape != v.shape or gi._v.dtype != v.dtype
                ):
                    gi = _fit_tensor(gi, n, k, g_out, xp)
                if native:
                    gi = gi._v
            if i in grads:
                # (the addend popped is referenced by nothing else where the walk made it: NumPy then
                # adds into its memory, eliding the temporary, as it does for ``(a + b) + c``; an
                # array referenced elsewhere -- a view's base, one rule's gradient of two inputs --
                # is not elided, and other libraries allocate as before)
                grads[i] = grads.pop(i) + gi
            else:
                grads[i] = gi
        k += 1
    # (inlined into the walk, these are the walk's own variables: without this they would keep a
    # summed rule's addends alive while the next rule runs, one node's dead gradients on the peak)
    in_grads = gi = None


#: what a gradient rule may raise on the values it is given (a singular matrix: NumPy's LinAlgError,
#: torch's, a RuntimeError), named by the op whose gradient it is (the user called ``det``, not the
#: ``inv`` its rule calls)
_NAMED_IN_RULES = (ValueError, ArithmeticError, RuntimeError)


def _rule_raised(n, e):
    """A gradient rule raised ``e``: the same exception (its class and attributes kept, control-flow
    signals too), its message naming the op whose gradient failed and the backend."""
    where = f"in the gradient of op {n.opdef.name!r} on backend {n.backend.name!r}"
    if isinstance(e, (NotImplementedError, RecursionError)) or not e.args or not isinstance(e.args[0], str):
        raise e
    if repr(n.opdef.name) in e.args[0]:  # (gradtape's own errors name it already: the class they chose kept)
        raise e
    if isinstance(e, RuntimeError):
        # PyTorch's LinAlgError and invalid arguments: a ValueError on every backend, as dispatch
        # raises for a forward (TensorFlow's InvalidArgumentError is one)
        raise ValueError(f"{e} ({where})").with_traceback(e.__traceback__) from None
    e.args = (f"{e.args[0]} ({where})",) + e.args[1:]
    raise e


def _native_rule_failed(n, e):
    """A rule failed on native arrays with a TypeError or AttributeError: where its node keeps
    ``None`` for a value its op does not save, that is the likely cause; say so (else re-raise)."""
    unsaved = [f"inputs[{k}]" for k, v in enumerate(n.inputs) if v is None or v.__class__ is Meta]
    unsaved += [f"outputs[{k}]" for k, v in enumerate(n.outputs) if v is None]
    if not unsaved:
        raise e
    op = n.opdef
    raise RuntimeError(
        f"the gradient rule of {op.name!r} ({rule_location(op)}) failed on backend {n.backend.name!r}: "
        f"{type(e).__name__}: {e}. This call kept no value for op.{', op.'.join(unsaved)} (the op "
        f"declares saves={op.saves!r}): if the rule reads one of them, add it to the op's saves "
        "(saves= where the op is declared, or op.saves = ...)"
    ) from e


def _wrong_count(op, in_grads, in_ids):
    raise ValueError(f"the gradient rule of {op.name!r} returned {len(in_grads)} gradients for {len(in_ids)} inputs")


def _fit_tensor(g, n, k, g_out, xp):
    """A rule's gradient of input ``k`` of node ``n``, on Tensors, summed to the input's shape and
    cast to its dtype (``g_out``: the output's cotangent, whose shape an unsaved input has)."""
    v = n.inputs[k]
    b = n.backend
    if not isinstance(g, Tensor):
        if g.__class__ in _PY_SCALARS or not b.is_native(g):
            like = v if v is not None and v.__class__ is not Meta and hasattr(v, "dtype") else None
            g = convert_to_tensor(g, dtype=b.dtype_of(like) if like is not None else None, backend=b)
        else:
            g = wrap(g, b)
    if v is None:
        shape = tuple(g_out.shape)
        if tuple(g.shape) != shape and not broadcasts_to(shape, tuple(g.shape)):
            bad_gradient(n, k, tuple(g.shape), shape)
        return g
    return fit(xp, g, v.shape, b.dtype_of(v), 0, n, k)


# ------------------------------------------------------------------------------- generated paths
def without_docstring(body):
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return body[1:]
    return body


def inline_calls(body, callee):
    """``body`` (statements) with each statement that calls ``callee`` preceded by the callee's
    body (its parameters bound to the call's arguments, its own names suffixed), the call replaced
    by what the callee returns; a callee without a ``return`` (a procedure) replaces a statement
    that is the bare call.  ``callee`` ends in its one ``return``, or has none.  (How the generated
    fast paths -- ``dispatch.fast_path``, the backward walk -- keep one definition of what they
    inline: its source.)"""
    cdef = ast.parse(textwrap.dedent(inspect.getsource(callee))).body[0]
    cbody = without_docstring(cdef.body)
    returns = [n for n in ast.walk(cdef) if isinstance(n, ast.Return)]
    procedure = not returns
    if not procedure and (len(returns) != 1 or cbody[-1] is not returns[0]):
        raise AssertionError(f"{callee.__name__}: only a function ending in its one return (or without one) is inlined")
    params = [a.arg for a in cdef.args.args]
    defaults = dict(zip(params[len(params) - len(cdef.args.defaults) :], cdef.args.defaults))
    stored = {n.id for s in cbody for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    local = set(params) | stored
    uses = {}
    looped = _in_loops(cbody)
    for node in ast.walk(ast.Module(cbody, [])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            uses[node.id] = uses.get(node.id, 0) + (2 if id(node) in looped else 1)
    suffix = f"__{callee.__name__}"
    same = {}  # a parameter the callee never assigns, given a name or a constant: that, in place

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in same:
                return copy.deepcopy(same[node.id])
            return ast.Name(node.id + suffix, node.ctx) if node.id in local else node

    class Replace(ast.NodeTransformer):
        def __init__(self):
            self.call = None

        def visit_Call(self, node):
            if isinstance(node.func, ast.Name) and node.func.id == callee.__name__:
                self.call = node
                return ast.Constant(None) if procedure else Rename().visit(copy.deepcopy(returns[0].value))
            return self.generic_visit(node)

    out = []
    for stmt in body:
        for field, value in ast.iter_fields(stmt):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                setattr(stmt, field, inline_calls(value, callee))
        r = Replace()
        new = r.visit(copy.deepcopy(stmt))
        if r.call is not None:
            args = list(r.call.args) + [defaults[p] for p in params[len(r.call.args) :] if p in defaults]
            if r.call.keywords or len(args) != len(params):
                raise AssertionError(f"{callee.__name__} is inlined from a call with its positional arguments only")
            bare = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            if procedure and not (bare and _is_call_of(stmt.value, callee.__name__)):
                raise AssertionError(f"{callee.__name__} returns nothing: only a bare call of it is inlined")
            for p, a in zip(params, args):
                if p not in stored and (isinstance(a, (ast.Name, ast.Constant)) or uses.get(p, 0) == 1):
                    same[p] = a
                else:
                    out.append(ast.Assign([ast.Name(p + suffix, ast.Store())], a, lineno=0))
            out.extend(Rename().visit(copy.deepcopy(s)) for s in (cbody if procedure else cbody[:-1]))
            new = None if procedure else Replace().visit(stmt)  # (the returned expression, the parameters in place)
            same.clear()
        if new is not None:
            out.append(new)
    return out


def _in_loops(body):
    """The ids of the nodes of ``body`` inside a loop or a comprehension (evaluated more than once)."""
    loops = (ast.For, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    return {id(m) for s in body for n in ast.walk(s) if isinstance(n, loops) for m in ast.walk(n)}


def _is_call_of(node, name):
    return isinstance(node.func, ast.Name) and node.func.id == name


_PURE = (ast.Name, ast.Constant, ast.Attribute, ast.Compare)


class _Fold(ast.NodeTransformer):
    """Constant tests decided: ``None is None``, ``2 == 2``, ``not ()``, ``None or x``, ``x and
    True and y``, ``if True:`` / ``if False:``, ``(1,).x`` of a constant (a folded op's saves);
    inside ``if name:``, tests of ``name`` alone (:class:`_Truth`).
    ``changed``: whether it decided anything."""

    def __init__(self, scalars=frozenset()):
        self.changed = False
        self.scalars = scalars  # the names only ever bound to constants (their truth is their value's)

    def visit(self, node):
        r = super().visit(node)
        if r is not node:
            self.changed = True
        return r

    def visit_Attribute(self, node):
        node = self.generic_visit(node)
        if isinstance(node.value, ast.Constant) and isinstance(node.ctx, ast.Load):
            v = node.value.value
            if v is not None and not isinstance(v, (bool, int, float, complex, str, bytes, tuple)):
                return ast.Constant(getattr(v, node.attr))  # (an object folded in: its attribute)
        return node

    def visit_Compare(self, node):
        node = self.generic_visit(node)
        if isinstance(node.left, ast.Constant) and len(node.ops) == 1 and isinstance(node.comparators[0], ast.Constant):
            a, b = node.left.value, node.comparators[0].value
            o = node.ops[0]
            if isinstance(o, (ast.Is, ast.IsNot)):
                return ast.Constant((a is b) == isinstance(o, ast.Is))
            if isinstance(o, (ast.Eq, ast.NotEq)) and type(a) is type(b) and isinstance(a, (int, str, tuple)):
                return ast.Constant((a == b) == isinstance(o, ast.Eq))
        return node

    def visit_UnaryOp(self, node):
        node = self.generic_visit(node)
        if isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Constant):
            return ast.Constant(not node.operand.value)
        return node

    def visit_BoolOp(self, node):
        node = self.generic_visit(node)
        short = isinstance(node.op, ast.Or)  # the value that ends the evaluation: falsy for and, truthy for or
        values = []
        for k, v in enumerate(node.values):
            if isinstance(v, ast.Constant):
                if bool(v.value) == short:  # the evaluation ends here
                    values.append(v)
                    break
                if k < len(node.values) - 1:
                    continue  # a value that passes the evaluation on, not the last: skipped
            values.append(v)
        if len(values) == 1:
            return values[0]
        if len(values) != len(node.values):
            self.changed = True
            node.values = values
        return node

    def visit_If(self, node):
        node = self.generic_visit(node)
        t = _as_test(node.test)
        if t is not node.test:
            self.changed = True
            node.test = t
        if isinstance(node.test, ast.Constant):
            return (node.body if node.test.value else node.orelse) or ast.Pass()
        name = node.test.id if isinstance(node.test, ast.Name) else None
        if name in self.scalars and not any(
            isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
            for s in node.body
            for n in ast.walk(s)
        ):
            # ``if fast:``: inside, where nothing assigns ``fast`` (a name only ever bound to constants:
            # nothing else changes its truth), a test of ``fast`` alone is true
            truth = _Truth(name)
            node.body = [truth.visit(s) for s in node.body]
            self.changed = self.changed or truth.changed
        return node

    def visit_IfExp(self, node):
        node = self.generic_visit(node)
        t = _as_test(node.test)
        if t is not node.test:
            self.changed = True
            node.test = t
        if isinstance(node.test, ast.Constant):
            return node.body if node.test.value else node.orelse
        return node


class _Truth(ast.NodeTransformer):
    """The tests that are the bare name ``name`` (of ``if`` and conditional expressions), decided
    true: the body of an ``if name:`` that never assigns it."""

    def __init__(self, name):
        self.name = name
        self.changed = False

    def _decided(self, node):
        node = self.generic_visit(node)
        if isinstance(node.test, ast.Name) and node.test.id == self.name:
            self.changed = True
            node.test = ast.copy_location(ast.Constant(True), node.test)
        return node

    visit_If = visit_IfExp = _decided


def _as_test(t):
    """An ``if`` test with what only its truth needs: ``a and True`` is ``a``; ``a and False`` of
    pure ``a`` is False (and ``or`` alike)."""
    if isinstance(t, ast.BoolOp) and isinstance(t.values[-1], ast.Constant):
        end = t.values[-1].value
        rest = t.values[:-1]
        if bool(end) == isinstance(t.op, ast.Or):  # ends it: the test's truth is end's
            if all(isinstance(w, _PURE) for w in rest):
                return ast.Constant(bool(end))
        else:
            return rest[0] if len(rest) == 1 else ast.BoolOp(t.op, rest)
    return t


class _Propagate(ast.NodeTransformer):
    """Names assigned once, from a constant, and never otherwise: the constant in their place."""

    def __init__(self, consts):
        self.consts = consts

    def visit_Assign(self, node):
        t = node.targets[0]
        if len(node.targets) == 1 and isinstance(t, ast.Name) and t.id in self.consts:
            return None
        return self.generic_visit(node)

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.consts:
            return ast.copy_location(ast.Constant(self.consts[node.id]), node)
        return node


def single_assignments(body, value_of):
    """The names that ``body`` binds exactly once, by a plain ``name = value`` whose value ``value_of``
    maps to something (not None): name -> that.  A name bound anywhere else too (another assignment, a
    loop target, an augmented assignment) is left out: folding it would be wrong."""
    stores = {}
    found = {}
    for s in body:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                stores[n.id] = stores.get(n.id, 0) + 1
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                value = value_of(n.value)
                if value is not None:
                    found[n.targets[0].id] = value
    return {k: v for k, v in found.items() if stores.get(k) == 1}


def _constant_value(node):
    """A constant's value, boxed (a constant may be None itself)."""
    return (node.value,) if isinstance(node, ast.Constant) else None


def _constant_names(body):
    return {k: v[0] for k, v in single_assignments(body, _constant_value).items()}


def _constant_bound(body):
    """The names that ``body`` binds (assigns, loops over, deletes, ...) only by ``name = <constant>``."""
    bound = {}
    for s in body:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                bound.setdefault(n.id, True)
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    if isinstance(t, ast.Name) and not isinstance(n.value, ast.Constant):
                        bound[t.id] = False
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For, ast.With, ast.NamedExpr, ast.comprehension)):
                for m in ast.walk(n.target if not isinstance(n, ast.With) else n):
                    if isinstance(m, ast.Name) and not isinstance(m.ctx, ast.Load):
                        bound[m.id] = False
            elif isinstance(n, (ast.ExceptHandler, ast.FunctionDef, ast.ClassDef)) and n.name:
                bound[n.name] = False
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for a in n.names:
                    bound[(a.asname or a.name).split(".")[0]] = False
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                for name in n.names:
                    bound[name] = False
    return frozenset(k for k, v in bound.items() if v)


def fold_constants(body):
    """``body`` with the tests that inlining (or an op's folded flags) made constant decided
    (:class:`_Fold`), and names bound once to a constant replaced by it, to a fixed point."""
    for _ in range(8):
        fold = _Fold(_constant_bound(body))
        out = []
        for stmt in body:
            r = fold.visit(stmt)
            out.extend(r if isinstance(r, list) else [r])
        consts = _constant_names(out)
        if consts:
            out = [r for s in out for r in _as_stmts(_Propagate(consts).visit(s))]
            for s in out:
                for n in ast.walk(s):
                    if "body" in n._fields and n.body == []:  # (an assignment propagated was all of it)
                        n.body = [ast.Pass()]
        ret = next((k for k, s in enumerate(out) if isinstance(s, ast.Return)), None)
        body = out if ret is None else out[: ret + 1]  # (what follows a return: unreachable)
        if not (fold.changed or consts or len(body) < len(out)):
            break
    return body


def _as_stmts(r):
    return [] if r is None else r if isinstance(r, list) else [r]


#: held while gradtape parses, transforms and compiles syntax trees (the generated paths): CPython's
#: conversions between ``ast`` objects and its compiler keep one recursion counter per interpreter, which
#: two threads doing them at once corrupt (``SystemError: AST constructor recursion depth mismatch``:
#: ops called for the first time from several threads)
GENERATING = threading.RLock()


def generated(fn, callee):
    """``fn`` compiled again from its source with ``callee`` inlined where it calls it
    (:func:`inline_calls`); ``fn`` itself where the source cannot be read."""
    with GENERATING:
        try:
            fdef = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
            fdef.body = fold_constants(inline_calls(fdef.body, callee))
        except (OSError, TypeError):
            return fn
        code = compile(
            ast.fix_missing_locations(ast.Module([fdef], [])),
            f"<gradtape {fn.__name__}, {callee.__name__} inlined>",
            "exec",
        )
    ns = {}
    exec(code, fn.__globals__, ns)
    new = ns[fn.__name__]
    new.__doc__ = fn.__doc__
    return new


#: the walk as it runs: _walk with _fit_add inlined from its source (one definition of each)
_walk_fast = generated(_walk, _fit_add)
