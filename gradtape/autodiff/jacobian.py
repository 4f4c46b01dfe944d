"""``GradientTape.jacobian`` and ``batch_jacobian``: one backward pass per output element, over the
recorded nodes (which the tape keeps until every pass is done)."""

from __future__ import annotations

import warnings

import optree

from typing import Any, cast

from gradtape.core.engine import NotBatchable, UnconnectedGradients, Recording, backward
from gradtape.core.recording_state import per_thread
from gradtape.ops.creation import zeros, zeros_like
from gradtape.ops.manipulation import moveaxis, reshape, stack
from gradtape.core.tensor import Nested, Tensor, TensorLike, wrap, convert_to_tensor

__all__ = ["jacobian", "batch_jacobian"]


def _basis(t, n):
    """The rows of an n x n identity on ``t``'s backend, device and dtype."""
    b = t._b
    xp = b.xp
    return xp.eye(n, dtype=t._v.dtype, device=b.device_of(t._v))


def _connected(rec, target, src):
    """For each source, whether a recorded path leads from it to ``target``."""
    need = {target._id}
    for n in reversed(rec.nodes):
        for o in n.out_ids:
            if o in need:
                need.update(i for i in n.in_ids if i)
                break
    return [s._id in need for s in src]


def _vectorized(rec, target, src, cotangents):
    """The vector-Jacobian products of ``target`` for a batch of native ``cotangents`` (leading
    axis) in one backward walk: mapped by the backend's ``vmap`` where it has one, else walked once
    with the batch axis by the ops' rules on the native namespace.  None where a tape is recording
    (the loop is recordable, for higher order), where the walk does not map (a rule with
    data-dependent Python control flow, say), or, without ``vmap``, where an op on the path has a
    rule that does not take a batch axis (``OpDef.batched``)."""
    b = target._b
    if per_thread.tapes:
        return None
    if not getattr(b, "supports_vmap", False):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                gs = backward(rec, [target], None, src, UnconnectedGradients.NONE, batch=cotangents)
        except NotBatchable:
            return None
        xp = b.xp
        out = []
        for s, g in zip(src, gs):
            if g is None:
                out.append(None)
                continue
            want = (cotangents.shape[0],) + tuple(s._v.shape)
            if tuple(g.shape) != want:  # a source that is also the target, or a broadcast view
                g = xp.broadcast_to(g, want)
            out.append(g)
        return tuple(out)

    def vjp(u):
        gs = backward(rec, [target], [wrap(u, b)], src, UnconnectedGradients.ZERO)
        return tuple(g._v for g in gs)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return b.vmap(vjp)(cotangents)
    except Exception:
        return None


def check_args(call: str, target: Nested, sources: Nested) -> None:
    """Bad arguments of ``jacobian`` / ``batch_jacobian``, refused before the tape is used: a None
    target is a ``TypeError`` (as ``gradient``), a source that is not a Tensor or Variable a
    ``ValueError`` naming it."""
    if target is None:
        raise TypeError(f"GradientTape.{call}: `target` is None; pass the Tensor (or Variable) to differentiate")
    if isinstance(target, (list, tuple)) and any(isinstance(t, Tensor) for t in optree.tree_leaves(cast(Any, target))):
        # (converted to one tensor, its values would be a constant: no gradient, silently)
        raise ValueError(
            f"GradientTape.{call}: `target` is a {type(target).__name__} of tensors; the jacobian is of one "
            "Tensor (as TensorFlow's): stack them inside the tape (gt.stack([...])), or call "
            f"{call}() once per target on a persistent tape"
        )
    leaves = [sources] if call == "batch_jacobian" else optree.tree_leaves(sources, none_is_leaf=True)
    for k, s in enumerate(leaves):
        if not isinstance(s, Tensor):
            where = "source" if call == "batch_jacobian" else f"sources (leaf {k})"
            raise ValueError(
                f"GradientTape.{call}: {where} is {type(s).__name__} {s!r}, not a gt.Tensor "
                "or gt.Variable; differentiate with respect to tensors the tape watches "
                "(make one with gt.constant(...) and tape.watch(it) before computing)"
            )


def check_batch_args(target: Any, source: Any) -> None:
    """``batch_jacobian``'s shapes, as TensorFlow: both of rank 2 or more, one batch size."""
    check_args("batch_jacobian", target, source)
    if not isinstance(target, Tensor):
        raise ValueError(
            f"GradientTape.batch_jacobian: `target` is {type(target).__name__}, not a gt.Tensor or gt.Variable"
        )
    tshape, sshape = tuple(target.shape), tuple(source.shape)
    for what, shape in (("target", tshape), ("source", sshape)):
        if len(shape) < 2:
            raise ValueError(
                f"GradientTape.batch_jacobian: the {what} has shape {shape}, rank "
                f"{len(shape)}, but must have rank at least 2 ([batch, ...]); use "
                "GradientTape.jacobian for tensors without a batch axis"
            )
    if tshape[0] != sshape[0]:
        raise ValueError(f"Need first dimension of target shape ({tshape}) and source shape ({sshape}) to match.")


def jacobian(rec: Recording, target: TensorLike, sources: Nested, unconnected: UnconnectedGradients) -> Nested:
    if not isinstance(target, Tensor):
        target = convert_to_tensor(target)
    src, spec = optree.tree_flatten(sources, none_is_leaf=True)
    tshape = target.shape
    n = target.size
    eye: Any = _basis(target, n) if n else None  # None only when n == 0: no row is read
    if n:
        xp = target._b.xp
        batched = _vectorized(rec, target, src, xp.reshape(eye, (n,) + tuple(tshape)))
        if batched is not None:
            out = []
            for s, conn, g in zip(src, _connected(rec, target, src), batched):
                shape = tuple(tshape) + tuple(s.shape)
                if not conn or g is None:
                    out.append(
                        zeros(shape, dtype=s.dtype, device=s._b.device_of(s._v))
                        if unconnected is UnconnectedGradients.ZERO
                        else None
                    )
                else:
                    out.append(reshape(wrap(g, s._b), shape))
            return optree.tree_unflatten(spec, out)
    rows = [[] for _ in src]
    for i in range(n):
        og = wrap(target._b.xp.reshape(eye[i, ...], tshape), target._b)
        gs = backward(rec, [target], [og], src, UnconnectedGradients.NONE)
        for k, g in enumerate(gs):
            rows[k].append(g)
    out = []
    for k, s in enumerate(src):
        shape = tuple(tshape) + tuple(s.shape)
        if n and all(g is None for g in rows[k]):
            out.append(
                zeros(shape, dtype=s.dtype, device=s._b.device_of(s._v))
                if unconnected is UnconnectedGradients.ZERO
                else None
            )
            continue
        if not n:
            out.append(zeros(shape, dtype=s.dtype))
            continue
        filled = [zeros_like(s) if g is None else g for g in rows[k]]
        out.append(reshape(stack(filled, axis=0), shape))
    return optree.tree_unflatten(spec, out)


def batch_jacobian(rec: Recording, target: Tensor, source: Tensor, unconnected: UnconnectedGradients) -> Tensor:
    """Per-example jacobians.  As TensorFlow: target and source of rank 2 or more (a
    ``ValueError`` otherwise), and zeros, never None, where the target does not depend on the
    source, whatever ``unconnected`` says (TF keeps this for compatibility; ``unconnected`` is
    validated and otherwise ignored).  The zeros have the source's dtype and device."""
    check_batch_args(target, source)
    tshape, sshape = target.shape, source.shape
    bsz = tshape[0]
    m = 1
    for d in tshape[1:]:
        m *= d
    eye: Any = _basis(target, m) if m else None  # None only when m == 0: no row is read
    xp = target._b.xp
    shape = (bsz,) + tuple(tshape[1:]) + tuple(sshape[1:])
    if m:
        rows = xp.reshape(eye, (m, 1) + tuple(tshape[1:]))
        batched = _vectorized(rec, target, [source], xp.broadcast_to(rows, (m,) + tuple(tshape)))
        if batched is not None:
            if not _connected(rec, target, [source])[0] or batched[0] is None:
                return zeros(shape, dtype=source.dtype, device=source._b.device_of(source._v))
            g = wrap(batched[0], source._b)  # [m, b, x...]
            return reshape(moveaxis(g, 0, 1), shape)
    cols = []
    for j in range(m):
        row = xp.reshape(eye[j, ...], (1,) + tuple(tshape[1:]))
        og = wrap(xp.broadcast_to(row, tuple(tshape)), target._b)
        (g,) = backward(rec, [target], [og], [source], UnconnectedGradients.NONE)
        cols.append(g)
    if not m or all(g is None for g in cols):
        return zeros(shape, dtype=source.dtype, device=source._b.device_of(source._v))
    filled = [zeros_like(source) if g is None else g for g in cols]
    return reshape(stack(filled, axis=1), shape)
