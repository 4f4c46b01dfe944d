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

from gradtape.core.engine import TensorOp, native_dtypes
from gradtape.core.recording_state import per_thread
from gradtape.core.rule_namespace import tensor_namespace
from gradtape.core.dispatch import apply, apply1
from gradtape.core.registry import get_op
from gradtape.autodiff.tape import GradientTape, UnconnectedGradients
from gradtape.core.tensor import Tensor, convert_to_tensor
from gradtape.ops import elementwise as _elementwise  # noqa: F401  (registers the ops of _DIRECT)
from gradtape.ops.creation import zeros_like

__all__ = ["ForwardAccumulator"]


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
            t = convert_to_tensor(t, dtype=p.dtype, like=p)
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
                    out.append(t if t is not None else (zeros_like(y) if zero else None))
                return out
        return self._transposed(leaves, unconnected_gradients, tangents)

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


def _forward_walk(nodes, primals, tangents):
    """The tangent (a Tensor) of every tensor computed from the primals in ``nodes`` (identity ->
    tangent), or None where a node on the way needs the double transposition."""
    tan = {}
    for p, t in zip(primals, tangents):
        tan[p._id] = t
    get = tan.get
    xp = None
    reals = {}
    saved_reach = per_thread.reach
    try:
        for n in list(nodes):
            ts = [get(i) if i else None for i in n.in_ids]
            for t in ts:
                if t is not None:
                    break
            else:
                continue
            if xp is None:
                xp = tensor_namespace()
            op = n.opdef
            kind = _kind(op)
            if not kind or len(n.out_ids) != 1 or op.grad is None or not op.xp_rule:
                return None
            for t in ts:
                if t is not None:
                    b = t._b
                    r = reals.get(b)
                    if r is None:
                        r = reals[b] = native_dtypes(b, "f")
                    if t._v.dtype not in r:
                        return None  # complex tangents: the rules conjugate
            try:
                out = _node_tangent(xp, n, ts, kind)
            except _NoTangentRule:
                return None
            oid = n.out_ids[0]
            if oid:
                tan[oid] = out
    finally:
        per_thread.reach = saved_reach
    return tan


def _node_tangent(xp, n, ts, kind):
    """The output tangent of node ``n`` given its inputs' tangents ``ts`` (None: no tangent)."""
    op = n.opdef
    view = TensorOp(n)
    if kind == "linear":
        if len(ts) == 1:
            return apply1(op, ts[0], n.attrs or None)
        args = [t if t is not None else _zeros_of(xp, view, n, k) for k, t in enumerate(ts)]
        return apply(op, args, n.attrs or None)
    if kind == "multilinear":
        ins = view.inputs
        out = None
        for k, t in enumerate(ts):
            if t is not None:
                term = apply(op, [t if j == k else ins[j] for j in range(len(ts))], n.attrs or None)
                out = term if out is None else out + term
        return out
    if kind == "rowwise":
        axis = (n.attrs or {}).get("axis", -1)
        out = None
        for k, t in enumerate(ts):
            if t is None:
                continue
            per_thread.reach = {n.in_ids[k]}
            g = op.grad(xp, view, xp.ones_like(xp.sum(t, axis=axis)))[k]
            if g is None:
                raise _NoTangentRule(op.name)
            term = xp.sum(g * t, axis=axis)
            out = term if out is None else out + term
        return out
    # element-wise: a diagonal Jacobian, so J t_k = J^T t_k for real values: the rule at t_k,
    # asked (through the walk's reach) for input k's gradient only; the commonest ops directly
    direct = _DIRECT.get(op.name)
    if direct is not None and op.grad is not _DIRECT_RULES.get(op.name):
        direct = None
    rule = op.grad
    out = None
    missing = False
    for k, t in enumerate(ts):
        if t is None:
            if n.inputs[k].__class__ not in _PY_SCALARS:  # (a Python scalar broadcasts nothing)
                missing = True
            continue
        if direct is not None:
            g = direct(view, k, t)
            out = g if out is None else out + g
            continue
        per_thread.reach = {n.in_ids[k]}
        g = rule(xp, view, t)
        if g.__class__ is tuple or g.__class__ is list:
            g = g[k]
        if g is None:
            raise _NoTangentRule(op.name)
        if not isinstance(g, Tensor):
            g = convert_to_tensor(g, dtype=t.dtype, like=t)
        out = g if out is None else out + g
    if missing:
        # the terms have the broadcast shape of the inputs with a tangent; an input without one
        # may broadcast the output further
        shape = _elementwise_out_shape(n, ts)
        if tuple(out.shape) != shape:
            out = xp.broadcast_to(out, shape)
    return out


def _elementwise_out_shape(n, ts):
    """The output shape of element-wise node ``n``, from what it kept and the tangents' shapes."""
    o = n.outputs[0]
    if o is not None:
        return tuple(o.shape)
    for v, t in zip(n.inputs, ts):
        if v is None and t is not None:  # (an input not kept is shaped like the output)
            return tuple(t.shape)
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


def _other(view, k):
    """Input ``1 - k`` of a binary node: a Python scalar as it is, else the recorded Tensor."""
    v = view.node.inputs[1 - k]
    return v if v.__class__ in _PY_SCALARS else view.inputs[1 - k]


#: tangents of the commonest element-wise ops, input ``k``'s term at its tangent ``t`` (used while
#: the op's rule is the one registered here, ``_DIRECT_RULES``: the rule at the tangent otherwise)
_DIRECT = {
    "add": lambda view, k, t: t,
    "subtract": lambda view, k, t: -t if k else t,
    "negative": lambda view, k, t: -t,
    "multiply": lambda view, k, t: t * _other(view, k),
}
#: the rules the ops of ``_DIRECT`` are registered with, read when this module is imported (after the
#: chapter that registers them), so a rule replaced later is never taken for the registered one
_DIRECT_RULES = {name: get_op(name).grad for name in _DIRECT}
