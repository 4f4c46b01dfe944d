"""The one place where broadcasting is undone: a rule returns an input's gradient in the broadcast
shape, and the engine sums it back to the input's shape (and casts it to its dtype) here, on the
namespace of the walk (native arrays, or gradtape Tensors when an outer tape records)."""

from __future__ import annotations

from gradtape.core.registry import rule_location

__all__ = ["broadcasts_to", "sum_to_shape", "fit", "bad_gradient"]


def bad_gradient(n, k, gshape, shape):
    """A rule returned, for input ``k`` of node ``n``, a gradient its input's shape cannot come from:
    a ``ValueError`` naming the op, its rule (file:line) and the shapes."""
    op = n.opdef
    fn = n.attrs.get("grad_fn") if op.name == "custom_gradient" else op.grad
    code = getattr(fn, "__code__", None)
    where = (
        f"{getattr(fn, '__qualname__', fn)!r} at {code.co_filename}:{code.co_firstlineno}"
        if code
        else rule_location(op)
    )
    raise ValueError(
        f"the gradient rule of op {op.name!r} ({where}) returned a gradient of shape "
        f"{gshape} for input {k} of shape {shape} (backend {n.backend.name!r}); a rule must "
        "return, for each input, a gradient of that input's shape (or of the shape it was "
        "broadcast to, which the engine sums back)"
    )


def _same_length(x, y):
    """Two axis lengths equal, an unknown (NaN) one equal to an unknown one (dask's data-dependent lengths)."""
    return x == y or (x != x and y != y)


def _same(a, b):
    """Shapes equal, unknown lengths matching unknown ones."""
    return len(a) == len(b) and all(_same_length(x, y) for x, y in zip(a, b))


def broadcasts_to(shape, gshape):
    """Whether an input of ``shape`` broadcasts to ``gshape`` (its gradient may then have that
    shape: the engine sums it back)."""
    lead = len(gshape) - len(shape)
    if lead < 0:
        return False
    for k, d in enumerate(shape):
        if d != 1 and not _same_length(d, gshape[lead + k]):
            return False
    return True


def sum_to_shape(xp, g, shape, nb=0):
    """``g`` summed over the axes that broadcasting added or stretched, giving ``shape``; ``nb``
    leading axes of ``g`` are a batch and stay."""
    shape = tuple(shape)
    gshape = tuple(g.shape)
    if gshape[nb:] == shape or _same(gshape[nb:], shape):
        return g
    lead = len(gshape) - nb - len(shape)
    if lead < 0 or not broadcasts_to(shape, gshape[nb:]):
        raise ValueError(f"cannot sum a gradient of shape {gshape[nb:]} to the shape {shape}")
    axes = tuple(range(nb, nb + lead)) + tuple(
        nb + lead + k for k, d in enumerate(shape) if d == 1 and gshape[nb + lead + k] != 1
    )
    if axes:
        g = xp.sum(g, axis=axes, keepdims=True)
    if tuple(g.shape) != gshape[:nb] + shape:
        g = xp.reshape(g, gshape[:nb] + shape)
    return g


def fit(xp, g, shape, dtype, nb=0, node=None, k=None):
    """Gradient ``g`` summed to ``shape`` and cast to ``dtype`` (both in ``xp``'s terms); a complex
    gradient of a real input keeps its real part.  ``node``, ``k``: the node and input index, named
    (with the rule) when ``g`` cannot be that input's gradient."""
    gshape = tuple(g.shape)
    shape = tuple(shape)
    if gshape[nb:] != shape and not _same(gshape[nb:], shape):
        if not broadcasts_to(shape, gshape[nb:]):
            if node is not None:
                bad_gradient(node, k, gshape[nb:], shape)
            raise ValueError(f"cannot sum a gradient of shape {gshape[nb:]} to the shape {shape}")
        g = sum_to_shape(xp, g, shape, nb)
    if g.dtype != dtype:
        if xp.isdtype(g.dtype, "complex floating") and not xp.isdtype(dtype, "complex floating"):
            g = xp.real(g)
        if g.dtype != dtype:
            g = xp.astype(g, dtype)
    return g
