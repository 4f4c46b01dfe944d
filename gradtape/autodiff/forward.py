"""``ForwardAccumulator``: forward-mode derivatives (as ``tf.autodiff.ForwardAccumulator``).

``jvp`` walks the recorded nodes forward once, carrying a tangent per tensor, and derives each
node's output tangent from the op's one rule (no rule of its own is needed):

* an element-wise op (real values): its Jacobian is diagonal, so the tangent is the sum over the
  inputs of the vector-Jacobian product taken at that input's tangent, ``rule(xp, op, t_k)[k]``;
* an op linear in its inputs (``reshape``, ``sum``, ``getitem``, ``concat``, ...): the op itself
  on the tangents; a multilinear one (``matmul``): the product rule, one call per tangent;
* an op whose Jacobian is symmetric (``softmax``): the rule at the tangent, as element-wise ops;
* an op that reduces each row of its inputs to one output element (the softmax cross-entropies):
  the row sums of the rule at ones times the tangent.

Every other node (several outputs, complex tangents, a TensorFlow-style or custom rule, a shape the
node did not keep) makes ``jvp`` transpose the tape twice instead: the vector-Jacobian product
``u -> J^T u`` is linear in ``u``, so differentiating it with respect to ``u`` in the direction of the
tangents gives ``J v``.  The tangents are computed with gradtape's ops on Tensors that carry the
recorded identities, so an outer tape or accumulator records them (higher order).
"""

from __future__ import annotations

import optree

from gradtape.backends.batching import KINDS, BatchArray, NoBatchingRule, batching_backend
from gradtape.core.engine import TensorOp, native_dtypes
from gradtape.core.recording_state import per_thread
from gradtape.core.rule_namespace import native_namespace, tensor_namespace
from gradtape.core.dispatch import apply, apply1, run_native
from gradtape.core.registry import get_op
from gradtape.autodiff.tape import GradientTape, UnconnectedGradients
from gradtape.core.tensor import Tensor, convert_to_tensor, wrap
from gradtape.ops import elementwise as _elementwise  # noqa: F401  (registers the ops of _DIRECT)
from gradtape.ops.creation import zeros_like

__all__ = ["ForwardAccumulator", "as_tangent"]


def as_tangent(t, like, where, what, of):
    """``t`` (a tangent or a cotangent) as a Tensor of ``like``'s dtype and backend, as the transforms
    take them; a complex one for a real ``like`` is refused (the cast would drop its imaginary part,
    silently; JAX refuses it too): ``what`` names it, ``of`` what ``like`` is, in the message."""
    if like.dtype.is_floating and not (isinstance(t, Tensor) and not t.dtype.is_complex):
        c = t if isinstance(t, Tensor) else convert_to_tensor(t, like=like)
        if c.dtype.is_complex:
            raise TypeError(
                f"{where}: {what} of dtype {c.dtype} for a real {of} of dtype {like.dtype}: casting it would drop "
                f"its imaginary part; pass a real {what.split()[-1]} (gt.real(t)), or make the {of} complex"
            )
    return convert_to_tensor(t, dtype=like.dtype, like=like)


class ForwardAccumulator:
    """Computes Jacobian-vector products of the ops run inside its context.

    with gt.ForwardAccumulator(primals=x, tangents=v) as acc:
        y = f(x)
    acc.jvp(y)          # J_f(x) @ v, shaped like y
    """

    def __init__(self, primals, tangents):
        p_leaves, p_spec = optree.tree_flatten(primals, none_is_leaf=True)
        t_leaves, t_spec = optree.tree_flatten(tangents, none_is_leaf=True)
        if p_spec != t_spec:
            raise ValueError("ForwardAccumulator: primals and tangents must have the same structure")
        for p in p_leaves:
            if not isinstance(p, Tensor):
                raise TypeError(f"ForwardAccumulator: primals must be Tensors or Variables, got {type(p).__name__}")
        self._primals = p_leaves
        self._tangents = []
        for p, t in zip(p_leaves, t_leaves):
            t = as_tangent(t, p, "ForwardAccumulator", "a tangent", "primal")
            if t.shape != p.shape:
                raise ValueError(
                    f"ForwardAccumulator: a tangent of shape {t.shape} for a primal of shape {p.shape}; they must match"
                )
            self._tangents.append(t)
        self._tape = GradientTape(persistent=True, watch_accessed_variables=False)

    def __enter__(self):
        self._tape.__enter__()
        self._tape.watch(self._primals)
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)

    def jvp(self, primals, unconnected_gradients=UnconnectedGradients.NONE):
        """The Jacobian-vector product of ``primals`` (a tensor or nested structure computed inside
        the context) along the tangents, in the structure of ``primals``."""
        leaves, spec = optree.tree_flatten(primals, none_is_leaf=True)
        for y in leaves:
            if not isinstance(y, Tensor):
                raise TypeError(f"ForwardAccumulator.jvp: expected a Tensor, got {type(y).__name__}")
        return optree.tree_unflatten(spec, self._jvp_along(leaves, self._tangents, unconnected_gradients))

    def _jvp_along(self, leaves, tangents, unconnected_gradients=UnconnectedGradients.NONE):
        """The jvps of the Tensors ``leaves`` along ``tangents`` (one per primal, in order; None: no
        tangent) instead of the accumulator's own: what it recorded, walked again (``gt.jacfwd``
        pushes each basis vector through one recording this way)."""
        zero = UnconnectedGradients(unconnected_gradients) is UnconnectedGradients.ZERO
        rec = self._tape._rec
        if rec is not None:
            with self._tape.stop_recording() if self._tape._recording else _null():
                tan = _forward_walk(rec.nodes, self._primals, tangents)
            if tan is not None:
                out = []
                for y in leaves:
                    t = tan.get(y._id)
                    if t is None:
                        t = zeros_like(y) if zero else None
                    elif t.__class__ is not Tensor:  # (a native walk's tangent)
                        b = y._b
                        t = wrap(t if t.__class__ is b.array_type else b.fix_output(t), b)
                    out.append(t)
                return out
        return self._transposed(leaves, unconnected_gradients, tangents)

    def _jvps_batched(self, leaves, tangents, nb):
        """The jvps of the Tensors ``leaves`` along ``nb`` tangents at once: ``tangents`` (one per
        primal, in order; None: no tangent) carry a leading axis of size ``nb``, native arrays where
        no tape of this thread records (the results then native too), else Tensors; each result is
        ``[nb, *leaf.shape]`` (zeros where unconnected).  One forward walk; raises
        :class:`NotBatched` where a node's tangent does not take the batch axis."""
        rec = self._tape._rec
        if rec is None:
            raise NotBatched("(nothing recorded)")
        with self._tape.stop_recording() if self._tape._recording else _null():
            tan = _forward_walk(rec.nodes, self._primals, tangents, nb)
            native = not per_thread.tapes
            xp = None
            out = []
            for y in leaves:
                shape = (nb,) + tuple(y.shape)
                t = tan.get(y._id)
                if t is None or tuple(t.shape) != shape:
                    if xp is None:
                        xp = y._b.xp if native else tensor_namespace()
                    if t is None:
                        t = xp.zeros(shape, dtype=y._v.dtype if native else y.dtype, device=y._b.device_of(y._v))
                    else:
                        t = xp.broadcast_to(t, shape)
                out.append(t)
        return out

    def _transposed(self, leaves, unconnected_gradients, tangents=None):
        """The jvps of ``leaves`` by transposing the tape twice (every op, any rule), along
        ``tangents`` (default: the accumulator's own)."""
        if tangents is None:
            tangents = self._tangents
        out = []
        for y in leaves:
            with GradientTape(persistent=True) as outer:
                u = zeros_like(y)
                outer.watch(u)
                with self._tape.stop_recording() if self._tape._recording else _null():
                    vjps = self._tape.gradient(y, self._primals, output_gradients=u)
            pairs = [(g, t) for g, t in zip(vjps, tangents) if g is not None and t is not None]
            if not pairs:
                out.append(
                    zeros_like(y) if UnconnectedGradients(unconnected_gradients) is UnconnectedGradients.ZERO else None
                )
                continue
            jv = outer.gradient(
                [g for g, _ in pairs], u, output_gradients=[t for _, t in pairs], unconnected_gradients="zero"
            )
            out.append(jv)
        return out


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


class _NoTangentRule(Exception):
    """A node whose output tangent the forward walk cannot derive from its rule."""


#: ops linear in all their inputs together: the tangent is the op on the tangents (zeros for an
#: input without one)
_LINEAR = frozenset(
    {
        "reshape",
        "sum",
        "mean",
        "broadcast_to",
        "expand_dims",
        "squeeze",
        "permute_dims",
        "getitem",
        "astype",
        "concat",
        "stack",
        "setitem",
        "flip",
        "roll",
        "matrix_transpose",
        "identity",
    }
)
#: ops linear in each input separately: the product rule, one call per input with a tangent
_MULTILINEAR = frozenset({"matmul"})
#: element-wise ops outside the element-wise chapter (their Jacobians are diagonal too), and ops of
#: one input whose Jacobian is symmetric (``softmax``: ``diag(y) - y y^T``): the rule at the tangent
_ELEMENTWISE = frozenset(
    {
        "xdivy",
        "strong_zero_multiply",
        "multiply_no_nan",
        "divide_no_nan",
        "where",
        "relu",
        "sigmoid",
        "softplus",
        "softmax",
        # (the fused gradient ops the rules of tanh, sigmoid and the sparse cross-entropy call: a
        # recorded backward walk is made of them; the last is softmax's symmetric Jacobian per row)
        "tanh_grad",
        "sigmoid_grad",
        "sparse_softmax_cross_entropy_with_logits_grad",
    }
)
#: ops that reduce each row of their inputs (along ``attrs["axis"]``, else the last axis) to one element
#: of the output: the Jacobian is block-diagonal, one row per output element, so ``J t_k`` is the row
#: sums of ``(J^T 1)_k * t_k``: the rule once, at ones
_ROWWISE = frozenset({"sparse_softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits"})


def _kind(op):
    """How the walk derives ``op``'s tangent: "linear", "multilinear", "elementwise" or None."""
    k = _KINDS.get(op)
    if k is None:
        name = op.name
        if name in _LINEAR:
            k = "linear"
        elif name in _MULTILINEAR:
            k = "multilinear"
        elif op.chapter == "elementwise" or name in _ELEMENTWISE:
            k = "elementwise"
        elif name in _ROWWISE:
            k = "rowwise"
        else:
            k = ""
        _KINDS[op] = k
    return k


_KINDS: dict = {}
_PY_SCALARS = (bool, int, float, complex)


def _forward_walk(nodes, primals, tangents, nb=0):
    """The tangent of every tensor computed from the primals in ``nodes`` (identity -> tangent), or
    None where a node on the way needs the double transposition.

    ``nb``: the tangents carry a leading batch axis of that size (``gt.jacfwd``'s basis vectors,
    all at once: one walk instead of ``nb``); a node whose tangent does not take it raises
    :class:`NotBatched` (the caller walks once per basis vector instead).

    While a tape of this thread records (higher order), the tangents are Tensors computed with
    gradtape's ops, each node's rule given its ``TensorOp``, and the tape records them.  Otherwise
    they are native arrays, each node's tangent computed on its backend's native namespace with the
    node itself as the rules' ``op`` (as in the first-order backward walk), no Tensor made; a node
    off the native forms (:class:`_OnTensors`) is computed on Tensors then (nothing records them)."""
    native = not per_thread.tapes
    tan = {}
    for p, t in zip(primals, tangents):  # (Tensors)
        if t is not None:
            tan[p._id] = t._v if native else t
    get = tan.get
    last_b = reals = xp = None
    saved_reach = per_thread.reach
    try:
        for n in nodes if native else list(nodes):  # (a recorded walk may add to its own tape)
            in_ids = n.in_ids
            if len(in_ids) == 1:
                t = get(in_ids[0])
                if t is None:
                    continue
                ts = (t,)
            else:
                ts = [get(i) if i else None for i in in_ids]
                for t in ts:
                    if t is not None:
                        break
                else:
                    continue
            op = n.opdef
            kind = _KINDS.get(op) or _kind(op)
            if not kind or len(n.out_ids) != 1 or op._grad is None or not op.xp_rule:
                if nb:
                    raise NotBatched(op.name)
                return None
            b = n.backend
            if b is not last_b:
                last_b = b
                reals = native_dtypes(b, "f")
                xp = native_namespace(b) if native else tensor_namespace()
            for t in ts:
                if t is not None and (t if native else t._v).dtype not in reals:
                    if nb:
                        raise NotBatched(op.name)
                    return None  # complex tangents: the rules conjugate
            try:
                if nb:
                    out = _batched_tangent(xp, n if native else TensorOp(n), n, ts, kind, nb)
                    if native and out.__class__ is not b.array_type:
                        out = b.fix_output(out)
                elif not native:
                    out = _node_tangent(xp, TensorOp(n), n, ts, kind)
                else:
                    try:
                        out = _node_tangent(xp, n, n, ts, kind)
                    except _OnTensors:
                        wrapped = [None if t is None else wrap(t, b) for t in ts]  # (arrays: fixed below)
                        out = _node_tangent(tensor_namespace(), TensorOp(n), n, wrapped, kind)._v
                    if out.__class__ is not b.array_type:
                        out = b.fix_output(out)
            except _NoTangentRule:
                if nb:
                    raise NotBatched(op.name) from None
                return None
            oid = n.out_ids[0]
            if oid:
                tan[oid] = out
    finally:
        per_thread.reach = saved_reach
    return tan


def _node_tangent(xp, op, n, ts, kind, lead=0):
    """The output tangent of node ``n`` given its inputs' tangents ``ts`` (None: no tangent): on
    gradtape's namespace ``xp`` with ``op`` the node's ``TensorOp`` and Tensor tangents, or on a
    native namespace with ``op`` the node itself and native tangents (raises :class:`_OnTensors`
    where that form does not fit)."""
    opdef = n.opdef
    if kind == "elementwise":
        # a diagonal Jacobian, so J t_k = J^T t_k for real values: the rule at t_k, asked (through
        # the walk's reach) for input k's gradient only; the commonest ops directly
        direct = _DIRECT.get(opdef.name)
        if direct is not None and opdef._grad is not _DIRECT_RULES[opdef.name]:
            direct = None
        out = None
        missing = None
        k = -1
        for t in ts:
            k += 1
            if t is None:
                v = n.inputs[k]
                if v.__class__ not in _PY_SCALARS:  # (a Python scalar broadcasts nothing)
                    missing = [v] if missing is None else missing + [v]
                continue
            if direct is not None:
                g = direct(xp, op, k, t)
            else:
                per_thread.reach = {n.in_ids[k]}
                g = _rule(xp, op, t, op is not n)
                if g.__class__ is tuple or g.__class__ is list:
                    g = g[k]
                if g is None:
                    raise _NoTangentRule(opdef.name)
                if op is not n:
                    if not isinstance(g, Tensor):
                        g = convert_to_tensor(g, dtype=t.dtype, like=t)
                elif g.__class__ in _PY_SCALARS:
                    raise _OnTensors
            out = g if out is None else out + g
        if missing is not None:
            # the terms have the broadcast shape of the inputs with a tangent; an input without one
            # may broadcast the output further (not one of that shape, kept or described by a Meta)
            shape = tuple(out.shape)[lead:]
            for v in missing:
                if v is None or tuple(v.shape) != shape:
                    shape = tuple(out.shape)[:lead] + _elementwise_out_shape(n, ts, lead)
                    if tuple(out.shape) != shape:
                        out = xp.broadcast_to(out, shape)
                    break
        return out
    attrs = n.attrs or None
    on_tensors = op is not n
    if kind == "linear":
        if on_tensors:
            if len(ts) == 1:
                return apply1(opdef, ts[0], attrs)
            args = [t if t is not None else _zeros_of(xp, op, n, k) for k, t in enumerate(ts)]
            return apply(opdef, args, attrs)
        if len(ts) != 1:
            _same_dtype(ts)
        return _native_call(n, ts, attrs)
    if kind == "multilinear":
        ins = op.inputs
        if not on_tensors:
            _same_dtype([t if t is not None else ins[j] for j, t in enumerate(ts)])
        out = None
        for k, t in enumerate(ts):
            if t is not None:
                args = [t if j == k else ins[j] for j in range(len(ts))]
                term = apply(opdef, args, attrs) if on_tensors else _native_call(n, args, attrs)
                out = term if out is None else out + term
        return out
    # rowwise
    axis = (attrs or {}).get("axis", -1)
    out = None
    for k, t in enumerate(ts):
        if t is None:
            continue
        per_thread.reach = {n.in_ids[k]}
        g = _rule(xp, op, xp.ones_like(xp.sum(t, axis=axis)), on_tensors)[k]
        if g is None:
            raise _NoTangentRule(opdef.name)
        term = xp.sum(g * t, axis=axis)
        out = term if out is None else out + term
    return out


class NotBatched(Exception):
    """A batched forward walk (``nb``) met a node whose tangent does not take the batch axis."""


def _batched_tangent(xp, op, n, ts, kind, nb):
    """Node ``n``'s output tangent from its inputs' tangents ``ts``, each with a leading batch axis
    of size ``nb`` (None: no tangent): element-wise ops by their rule at the tangents (declared
    ``batched``: it takes leading batch axes), each padded with unit axes to the output's rank
    first; linear and multilinear ops by the op itself under its declared batching kind (the one
    ``gt.vmap`` runs: ``gradtape/backends/batching.py``), on native arrays (``op`` the node) or on
    Tensors (``op`` its ``TensorOp``, the ops recorded).  Raises :class:`NotBatched` otherwise."""
    opdef = n.opdef
    on_tensors = op is not n
    try:
        if kind == "elementwise":
            if not opdef.batched:
                raise NotBatched(opdef.name)
            rank = _batched_rank(n, ts)
            padded = []
            for t in ts:
                if t is not None and len(t.shape) - 1 < rank:
                    sh = tuple(t.shape)
                    t = xp.reshape(t, (nb,) + (1,) * (rank - len(sh) + 1) + sh[1:])
                padded.append(t)
            out = _node_tangent(xp, op, n, padded, kind, 1)
            if not on_tensors and out.__class__ in _PY_SCALARS:
                raise NotBatched(opdef.name)
            return out
        rule = KINDS.get(opdef.batching) if opdef.batching.__class__ is str else None
        if rule is None or kind not in ("linear", "multilinear"):
            raise NotBatched(opdef.name)
        if on_tensors:
            bk = _TENSOR_KINDS
            bk.real.xp = xp

            def impl(*args, **kw):
                return apply(opdef, args, kw or None)

        else:
            bk = batching_backend(n.backend)
            b = n.backend

            def impl(*args, **kw):
                return run_native(opdef, b, args, kw or None)

        ins = op.inputs
        array = Tensor if on_tensors else n.backend.array_type
        for k, t in enumerate(ts):
            if t is None and ins[k].__class__ is not array:  # (not kept, or not an array)
                raise NotBatched(opdef.name)
        attrs = n.attrs or {}
        if kind == "linear":
            args = [BatchArray(xp.zeros_like(ins[k]) if t is None else t, t is not None, bk) for k, t in enumerate(ts)]
            if len(args) > 1 and not on_tensors:
                _same_dtype([a.v for a in args])
            return rule(bk, impl, args, attrs)
        out = None  # multilinear: the product rule, one batched call per input with a tangent
        for k, t in enumerate(ts):
            if t is not None:
                args = [BatchArray(t, True, bk) if j == k else BatchArray(ins[j], False, bk) for j in range(len(ts))]
                if not on_tensors:
                    _same_dtype([a.v for a in args])
                term = rule(bk, impl, args, attrs)
                out = term if out is None else out + term
        return out
    except (NoBatchingRule, _OnTensors, _NoTangentRule, TypeError, AttributeError, ValueError) as e:
        raise NotBatched(opdef.name) from e


def _batched_rank(n, ts):
    """The rank of element-wise node ``n``'s output (one example's), from its inputs' ranks (the
    tangents' without the batch axis; an input not kept is shaped like the output)."""
    rank = 0
    unknown = False
    for v, t in zip(n.inputs, ts):
        if t is not None:
            r = len(t.shape) - 1
            if v is None:
                return r
        elif v is None:
            unknown = True
            continue
        else:
            r = len(getattr(v, "shape", ()))
        if r > rank:
            rank = r
    if unknown:
        o = n.outputs[0]
        if o is None:
            raise NotBatched(n.opdef.name)
        return len(o.shape)
    return rank


class _TensorKinds:
    """The batching kinds' backend, for tangents that are Tensors (a recorded walk): their native
    namespace is gradtape's, so what a kind adds (padding, a transposition) is recorded too."""

    class real:
        xp = None


_TENSOR_KINDS = _TensorKinds()


class _OnTensors(Exception):
    """A node whose tangent the native walk leaves to gradtape's ops on Tensors: inputs of several
    dtypes (which the ops promote), a value the node did not keep (the rule's error on Tensors says
    which), a rule that failed on native arrays or returned a Python scalar."""


def _rule(xp, op, t, on_tensors):
    """The op's rule at ``t``; on native arrays, its failure is left to the walk on Tensors."""
    if on_tensors:
        return op.opdef._grad(xp, op, t)
    try:
        return op.opdef._grad(xp, op, t)
    except (TypeError, AttributeError) as e:
        raise _OnTensors from e


def _native_call(n, args, attrs):
    """Node ``n``'s op on the native arrays ``args`` (what ``apply`` runs when nothing records)."""
    b = n.backend
    for v in args:
        if v.__class__ is not b.array_type:
            raise _OnTensors
    return run_native(n.opdef, b, args, attrs)


def _same_dtype(vs):
    """Raises :class:`_OnTensors` unless ``vs`` are native arrays of one dtype (``apply`` would
    convert or promote others)."""
    dt = None
    for v in vs:
        if v is None or v.__class__ in _PY_SCALARS or not hasattr(v, "dtype"):
            raise _OnTensors
        if dt is None:
            dt = v.dtype
        elif v.dtype != dt:
            raise _OnTensors


def _elementwise_out_shape(n, ts, lead=0):
    """The output shape of element-wise node ``n``, from what it kept and the tangents' shapes
    (after their ``lead`` batch axes)."""
    o = n.outputs[0]
    if o is not None:
        return tuple(o.shape)
    for v, t in zip(n.inputs, ts):
        if v is None and t is not None:  # (an input not kept is shaped like the output)
            return tuple(t.shape)[lead:]
    out = ()
    for v in n.inputs:
        if v is None:
            raise _NoTangentRule(n.opdef.name)
        out = _broadcast_shapes(out, tuple(getattr(v, "shape", ())))
    return out


def _broadcast_shapes(a, b):
    if len(a) < len(b):
        a, b = b, a
    b = (1,) * (len(a) - len(b)) + b
    return tuple(x if y == 1 else y for x, y in zip(a, b))


def _zeros_of(xp, view, n, k):
    """Zeros shaped as input ``k`` of node ``n`` (an input without a tangent of a linear op)."""
    v = n.inputs[k]
    if v is None or not hasattr(v, "__array_namespace__") and not n.backend.is_native(v):
        raise _NoTangentRule(n.opdef.name)
    return xp.zeros_like(view.inputs[k])


def _other(op, k):
    """Input ``1 - k`` of a binary node: a Python scalar as it is, else the recorded Tensor (the
    native value in a native walk)."""
    v = op.inputs[1 - k]
    if op.__class__ is not TensorOp and v.__class__ not in _PY_SCALARS and v.__class__ is not op.backend.array_type:
        raise _OnTensors  # (a native walk's node that did not keep it: the rule on Tensors says so)
    return v


#: tangents of the commonest element-wise ops, input ``k``'s term at its tangent ``t`` (used while
#: the op's rule is the one registered here, ``_DIRECT_RULES``: the rule at the tangent otherwise),
#: on either namespace (``op``: the node's ``TensorOp`` or, in a native walk, the node)
_DIRECT = {
    "add": lambda xp, op, k, t: t,
    "subtract": lambda xp, op, k, t: xp.negative(t) if k else t,
    "negative": lambda xp, op, k, t: xp.negative(t),
    "multiply": lambda xp, op, k, t: xp.multiply(t, _other(op, k)),
}
#: the rules the ops of ``_DIRECT`` are registered with, read when this module is imported (after the
#: chapter that registers them), so a rule replaced later is never taken for the registered one
_DIRECT_RULES = {name: get_op(name).grad for name in _DIRECT}
