"""Linear algebra functions (Array API standard, chapter "Linear Algebra Functions").

``matmul`` is bilinear: each input's gradient is the other input (conjugated) applied to the
gradient; broadcast batch axes are summed back by the engine.
"""

from __future__ import annotations

from gradtape.core.domains import REAL, Case, with_complex
from gradtape.core.dispatch import apply2
from gradtape.ops import apply, apply1, batch_as, defop, public
from gradtape.ops import manipulation as _manipulation
from gradtape.ops.elementwise import conj_
from gradtape.core.tensor import Tensor, convert_to_tensor


def mT(xp, x):
    """The transpose of the last two axes: the standard's ``x.mT`` attribute (fast, and Tensors have it),
    else ``xp.matrix_transpose`` (dask arrays lack the attribute)."""
    try:
        return x.mT
    except AttributeError:
        return xp.matrix_transpose(x)


__all__ = ["matmul", "matrix_transpose", "tensordot", "vecdot"]


_matrix_transpose = defop(
    "matrix_transpose",
    lambda xp, x: xp.matrix_transpose(x),
    chapter="linear_algebra",
    domain=with_complex([Case(REAL[2, 3]), Case(REAL[4, 2, 3])]),
    saves=(),
    batched=True,
)
_matrix_transpose.gradient(lambda xp, op, grad: mT(xp, grad))  # linear: the transposed cotangent


@public(_matrix_transpose)
def matrix_transpose(x, /):
    """Transpose of the last two axes."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose needs at least 2 dimensions, got shape {x.shape}")
    # a view of x, as NumPy's (docs/conventions.md, "Views"); through the module: _operators links
    return _manipulation._linked(apply1(_matrix_transpose, x), x, _matrix_transpose, {})


_matmul = defop(
    "matmul",
    chapter="linear_algebra",
    scalars=False,
    promote=True,  # (mixed dtypes are cast first: the rule's products then have one dtype on torch too)
    saves="inputs",
    batched=True,
    domain=with_complex(
        [
            Case(REAL[2, 3], REAL[3, 4]),
            Case(REAL[3], REAL[3, 2]),
            Case(REAL[2, 3], REAL[3]),
            Case(REAL[4], REAL[4]),
            Case(REAL[2, 2, 3], REAL[3, 2]),
            Case(REAL[1, 2, 3], REAL[4, 3, 2]),
            Case(REAL[3], REAL[2, 3, 2]),
        ]
    ),
)


@_matmul.gradient
def _matmul_grad(xp, op, grad):
    """C = A @ B: dA = grad @ B^H, dB = A^H @ grad.  1-D operands are not promoted to matrices: each
    case is written out (outer products by broadcasting, a vector made a one-column matrix only
    against a stack), so ``grad`` may carry leading batch axes and no reshape is needed."""
    a, b = op.inputs
    ga = gb = None
    if op.needs_grad(0):
        if b.ndim == 1:  # (..., m) = A (..., m, k) @ v (k,), or () = u . v
            ga = xp.expand_dims(grad, axis=-1) * conj_(xp, b)
        elif a.ndim == 1 and b.ndim > 2:  # (..., n) = u (k,) @ B (..., k, n)
            ga = xp.matmul(conj_(xp, b), xp.expand_dims(grad, axis=-1))[..., 0]
        else:  # (..., m, n) = A @ B, or (n,) = u (k,) @ B (k, n)
            ga = xp.matmul(grad, conj_(xp, mT(xp, b)))
    if op.needs_grad(1):
        if a.ndim == 1:
            if b.ndim == 1:  # () = u . v
                gb = xp.expand_dims(grad, axis=-1) * conj_(xp, a)
            else:  # (..., n) = u (k,) @ B (..., k, n): conj(u) g^T
                gb = xp.expand_dims(conj_(xp, a), axis=-1) * xp.expand_dims(grad, axis=-2)
        elif b.ndim == 1:
            if a.ndim == 2:  # (m,) = A (m, k) @ v (k,): A^H g
                gb = xp.matmul(grad, conj_(xp, a))
            else:  # (..., m) = A (..., m, k) @ v (k,)
                gb = xp.matmul(xp.expand_dims(grad, axis=-2), conj_(xp, a))[..., 0, :]
        else:
            gb = xp.matmul(conj_(xp, mT(xp, a)), grad)
    return ga, gb


@public(_matmul)
def matmul(x1, x2, /):
    """Matrix product with the standard's broadcasting and 1-D rules."""
    return apply2(_matmul, x1, x2)


def _tensordot_forward(xp, x1, x2, *, axes):
    return xp.tensordot(x1, x2, axes=axes)


_tensordot = defop(
    "tensordot",
    _tensordot_forward,
    chapter="linear_algebra",
    scalars=False,
    promote=True,
    saves="inputs",
    batched=True,
    domain=with_complex(
        [
            Case(REAL[2, 3], REAL[3, 4], axes=1),
            Case(REAL[2, 3, 4], REAL[3, 4, 2], axes=2),
            Case(REAL[2, 3], REAL[2, 3], axes=((0, 1), (0, 1))),
            Case(REAL[2, 3, 4], REAL[4, 2], axes=((2, 0), (0, 1))),
            Case(REAL[2], REAL[3], axes=0),
        ]
    ),
)


def _normalize_tensordot_axes(axes, nd1, nd2):
    if isinstance(axes, int):
        return tuple(range(nd1 - axes, nd1)), tuple(range(axes))
    a1, a2 = axes
    a1 = (a1,) if isinstance(a1, int) else tuple(a1)
    a2 = (a2,) if isinstance(a2, int) else tuple(a2)
    return tuple(a % nd1 for a in a1), tuple(a % nd2 for a in a2)


@_tensordot.gradient
def _tensordot_grad(xp, op, grad):
    """Contract the gradient with the other operand over its free axes, then permute back (leading
    batch axes of ``grad`` are carried through both contractions)."""
    x1, x2 = op.inputs
    a1, a2 = op.attrs["axes"]
    nd1, nd2 = x1.ndim, x2.ndim
    free1 = [i for i in range(nd1) if i not in a1]
    free2 = [i for i in range(nd2) if i not in a2]
    nf1, nf2 = len(free1), len(free2)
    nb = grad.ndim - nf1 - nf2  # leading batch axes of the cotangent
    g1 = g2 = None
    if op.needs_grad(0):
        # grad axes: [batch..., free1..., free2...]; contract with conj(x2) over free2; the result's
        # axes: batch, free1, then x2's contracted axes ascending (each matching an axis of a1)
        t = xp.tensordot(grad, conj_(xp, x2), axes=(tuple(range(nb + nf1, nb + nf1 + nf2)), tuple(free2)))
        src = free1 + [a1[a2.index(j)] for j in sorted(a2)]
        g1 = _permute_back(xp, t, tuple(range(nb)) + tuple(nb + src.index(ax) for ax in range(nd1)))
    if op.needs_grad(1):
        # the result's axes: x1's contracted axes ascending (each matching an axis of a2), batch, free2
        t = xp.tensordot(conj_(xp, x1), grad, axes=(tuple(free1), tuple(range(nb, nb + nf1))))
        na = len(a1)
        src = [a2[a1.index(j)] for j in sorted(a1)]
        pos = [src.index(ax) if ax in src else na + nb + free2.index(ax) for ax in range(nd2)]
        g2 = _permute_back(xp, t, tuple(range(na, na + nb)) + tuple(pos))
    return g1, g2


def _permute_back(xp, t, perm):
    """``permute_dims(t, perm)``, skipped when ``perm`` is the identity."""
    return t if perm == tuple(range(len(perm))) else xp.permute_dims(t, perm)


@public(_tensordot)
def tensordot(x1, x2, /, *, axes=2):
    """Tensor contraction over ``axes`` (an int or a pair of axis sequences)."""
    if not isinstance(x1, Tensor):
        x1 = convert_to_tensor(x1, like=x2 if isinstance(x2, Tensor) else None)
    if not isinstance(x2, Tensor):
        x2 = convert_to_tensor(x2, like=x1)
    return apply(_tensordot, (x1, x2), {"axes": _normalize_tensordot_axes(axes, x1.ndim, x2.ndim)})


def _vecdot_forward(xp, x1, x2, *, axis=-1):
    return xp.vecdot(x1, x2, axis=axis)


_vecdot = defop(
    "vecdot",
    _vecdot_forward,
    chapter="linear_algebra",
    scalars=False,
    promote=True,
    saves="inputs",
    batched=True,
    domain=with_complex([Case(REAL[3], REAL[3]), Case(REAL[2, 3], REAL[3]), Case(REAL[3, 2], REAL[3, 2], axis=0)]),
)


@_vecdot.gradient
def _vecdot_grad(xp, op, grad):
    """y = sum(conj(x1) * x2): dx1 = conj(grad) x2, dx2 = grad x1 (the engine undoes broadcasting)."""
    x1, x2 = op.inputs
    g = xp.expand_dims(grad, axis=op.attrs["axis"])  # axis is negative (see vecdot)
    return (conj_(xp, g) * x2 if op.needs_grad(0) else None, g * x1 if op.needs_grad(1) else None)


@public(_vecdot)
def vecdot(x1, x2, /, *, axis=-1):
    """Dot product of vectors along ``axis`` (conjugating ``x1``)."""
    if not isinstance(x1, Tensor):
        x1 = convert_to_tensor(x1, like=x2 if isinstance(x2, Tensor) else None)
    if not isinstance(x2, Tensor):
        x2 = convert_to_tensor(x2, like=x1)
    nd = max(x1.ndim, x2.ndim)
    axis = int(axis)
    if axis >= 0:
        axis -= nd  # negative axes index the broadcast result the same way for every input
    return apply(_vecdot, (x1, x2), {"axis": axis})


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("leading", _matrix_transpose)
batch_as("matmul", _matmul)
batch_as("elementwise_axis", _vecdot)
batch_as("tensordot", _tensordot)
