"""``ForwardAccumulator``: forward-mode derivatives (as ``tf.autodiff.ForwardAccumulator``).

Jacobian-vector products are computed by transposing the tape twice: the vector-Jacobian product
``u -> J^T u`` is linear in ``u``, so differentiating it with respect to ``u`` in the direction of the
tangents gives ``J v``.  Every rule is written in gradtape ops, so this needs nothing per op.
"""

from __future__ import annotations

import optree

from gradtape.autodiff.tape import GradientTape, UnconnectedGradients
from gradtape.core.tensor import Tensor, convert_to_tensor
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
        out = []
        for y in leaves:
            if not isinstance(y, Tensor):
                raise TypeError(f"ForwardAccumulator.jvp: expected a Tensor, got {type(y).__name__}")
            with GradientTape(persistent=True) as outer:
                u = zeros_like(y)
                outer.watch(u)
                with self._tape.stop_recording() if self._tape._recording else _null():
                    vjps = self._tape.gradient(y, self._primals, output_gradients=u)
            pairs = [(g, t) for g, t in zip(vjps, self._tangents) if g is not None]
            if not pairs:
                out.append(
                    zeros_like(y) if UnconnectedGradients(unconnected_gradients) is UnconnectedGradients.ZERO else None
                )
                continue
            jv = outer.gradient(
                [g for g, _ in pairs], u, output_gradients=[t for _, t in pairs], unconnected_gradients="zero"
            )
            out.append(jv)
        return optree.tree_unflatten(spec, out)


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
