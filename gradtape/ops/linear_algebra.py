"""Linear algebra functions (Array API standard, chapter "Linear Algebra Functions").

``matmul`` is bilinear: each input's gradient is the other input (conjugated) applied to the
gradient; broadcast batch axes are summed back by the engine.
"""
from __future__ import annotations

from gradtape.domains import REAL, Case, with_complex
from gradtape.dispatch import apply2
from gradtape.ops import apply, apply1, defop, public
from gradtape.ops.elementwise import _conj
from gradtape.ops.manipulation import expand_dims, permute_dims, reshape
from gradtape.tensor import Tensor, convert_to_tensor

__all__ = ["matmul", "matrix_transpose", "tensordot", "vecdot"]


_matrix_transpose = defop("matrix_transpose", lambda xp, x: xp.matrix_transpose(x), chapter="linear_algebra",
                          domain=with_complex([Case(REAL[2, 3]), Case(REAL[4, 2, 3])]))
_matrix_transpose.gradient(lambda op, grad: matrix_transpose(grad))


@public(_matrix_transpose)
def matrix_transpose(x, /):
    """Transpose of the last two axes."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose needs at least 2 dimensions, got shape {x.shape}")
    return apply1(_matrix_transpose, x)


_matmul = defop("matmul", chapter="linear_algebra", scalars=False,
                domain=with_complex([Case(REAL[2, 3], REAL[3, 4]), Case(REAL[3], REAL[3, 2]),
                                     Case(REAL[2, 3], REAL[3]), Case(REAL[4], REAL[4]),
                                     Case(REAL[2, 2, 3], REAL[3, 2]), Case(REAL[1, 2, 3], REAL[4, 3, 2]),
                                     Case(REAL[3], REAL[2, 3, 2])]))


@_matmul.gradient
def _matmul_grad(op, grad):
    """C = A @ B: dA = grad @ B^H, dB = A^H @ grad (1-D operands promoted to matrices and back)."""
    a, b = op.inputs
    if a.ndim <= 2 and b.ndim <= 2 and 1 in (a.ndim, b.ndim):
        return _matmul_vector_grad(op, grad, a, b)
    a2 = expand_dims(a, axis=0) if a.ndim == 1 else a
    b2 = expand_dims(b, axis=-1) if b.ndim == 1 else b
    g = grad
    if a.ndim == 1 and b.ndim == 1:
        g = reshape(g, (1, 1))
    elif a.ndim == 1:
        g = expand_dims(g, axis=-2)
    elif b.ndim == 1:
        g = expand_dims(g, axis=-1)
    ga = gb = None
    if op.needs_grad(0):
        ga = matmul(g, _conj(matrix_transpose(b2)))
        if a.ndim == 1:
            ga = reshape(ga, tuple(ga.shape[:-2]) + (ga.shape[-1],)) if ga.ndim > 2 else reshape(ga, a.shape)
    if op.needs_grad(1):
        gb = matmul(_conj(matrix_transpose(a2)), g)
        if b.ndim == 1:
            gb = reshape(gb, tuple(gb.shape[:-1])) if gb.ndim > 2 else reshape(gb, b.shape)
    return ga, gb


def _matmul_vector_grad(op, g, a, b):
    """The 1-D cases without promoting vectors to matrices (outer products by broadcasting, which
    stay cheap when the backward walk is vectorised): y = A v, y = u B, y = u . v."""
    ga = gb = None
    if a.ndim == 2:                       # y = A v: dA = g v^H, dv = A^H g
        if op.needs_grad(0):
            ga = expand_dims(g, axis=-1) * _conj(b)
        if op.needs_grad(1):
            gb = matmul(_conj(matrix_transpose(a)), g)
    elif b.ndim == 2:                     # y = u B: du = conj(B) g, dB = conj(u) g^T
        if op.needs_grad(0):
            ga = matmul(_conj(b), g)
        if op.needs_grad(1):
            gb = expand_dims(_conj(a), axis=-1) * g
    else:                                 # y = u . v
        if op.needs_grad(0):
            ga = g * _conj(b)
        if op.needs_grad(1):
            gb = g * _conj(a)
    return ga, gb


@public(_matmul)
def matmul(x1, x2, /):
    """Matrix product with the standard's broadcasting and 1-D rules."""
    return apply2(_matmul, x1, x2)


def _tensordot_forward(xp, x1, x2, *, axes):
    return xp.tensordot(x1, x2, axes=axes)


_tensordot = defop("tensordot", _tensordot_forward, chapter="linear_algebra", scalars=False,
                   domain=with_complex([Case(REAL[2, 3], REAL[3, 4], axes=1),
                                        Case(REAL[2, 3, 4], REAL[3, 4, 2], axes=2),
                                        Case(REAL[2, 3], REAL[2, 3], axes=((0, 1), (0, 1))),
                                        Case(REAL[2, 3, 4], REAL[4, 2], axes=((2, 0), (0, 1))),
                                        Case(REAL[2], REAL[3], axes=0)]))


def _normalize_tensordot_axes(axes, nd1, nd2):
    if isinstance(axes, int):
        return tuple(range(nd1 - axes, nd1)), tuple(range(axes))
    a1, a2 = axes
    a1 = (a1,) if isinstance(a1, int) else tuple(a1)
    a2 = (a2,) if isinstance(a2, int) else tuple(a2)
    return tuple(a % nd1 for a in a1), tuple(a % nd2 for a in a2)


@_tensordot.gradient
def _tensordot_grad(op, grad):
    """Contract the gradient with the other operand over its free axes, then permute back."""
    x1, x2 = op.inputs
    a1, a2 = op.attrs["axes"]
    nd1, nd2 = x1.ndim, x2.ndim
    free1 = [i for i in range(nd1) if i not in a1]
    free2 = [i for i in range(nd2) if i not in a2]
    nf1 = len(free1)
    g1 = g2 = None
    if op.needs_grad(0):
        # grad axes: [free1..., free2...]; contract with conj(x2) over free2
        t = tensordot(grad, _conj(x2), axes=(tuple(range(nf1, nf1 + len(free2))), tuple(free2)))
        # t axes: free1 then a2 in order of x2's remaining axes (sorted a2 order)
        rem2 = [i for i in range(nd2) if i in a2]           # x2's contracted axes, ascending
        src_order = free1 + [a1[a2.index(j)] for j in rem2]
        inv = [0] * nd1
        for pos, ax in enumerate(src_order):
            inv[ax] = pos
        g1 = permute_dims(t, tuple(inv))
    if op.needs_grad(1):
        t = tensordot(_conj(x1), grad, axes=(tuple(free1), tuple(range(nf1))))
        rem1 = [i for i in range(nd1) if i in a1]
        src_order = [a2[a1.index(j)] for j in rem1] + free2
        inv = [0] * nd2
        for pos, ax in enumerate(src_order):
            inv[ax] = pos
        g2 = permute_dims(t, tuple(inv))
    return g1, g2


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


_vecdot = defop("vecdot", _vecdot_forward, chapter="linear_algebra", scalars=False,
                domain=with_complex([Case(REAL[3], REAL[3]), Case(REAL[2, 3], REAL[3]),
                                     Case(REAL[3, 2], REAL[3, 2], axis=0)]))


@_vecdot.gradient
def _vecdot_grad(op, grad):
    """y = sum(conj(x1) * x2): dx1 = conj(grad) x2, dx2 = grad x1 (the engine undoes broadcasting)."""
    x1, x2 = op.inputs
    axis = op.attrs["axis"]
    g = expand_dims(grad, axis=axis)            # axis is negative (see vecdot)
    return (_conj(g) * x2 if op.needs_grad(0) else None, g * x1 if op.needs_grad(1) else None)


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
        axis -= nd           # negative axes index the broadcast result the same way for every input
    return apply(_vecdot, (x1, x2), {"axis": axis})


# --------------------------------------------------------------------------- native vjps
# (see OpDef.defvjp: the rules above on native arrays; ``g`` may carry leading batch axes)
def _matmul_vjp_a(xp, g, y, a, b):
    if b.ndim == 1:                                    # ... (m,) = a (..., m, k) @ b (k,)
        return xp.expand_dims(g, axis=-1) * b
    if a.ndim == 1 and b.ndim > 2:                     # (..., n) = a (k,) @ b (..., k, n)
        return (b @ xp.expand_dims(g, axis=-1))[..., 0]
    return g @ b.mT


def _matmul_vjp_b(xp, g, y, a, b):
    if a.ndim == 1:
        if b.ndim == 1:                                # (...) = a (k,) . b (k,)
            return xp.expand_dims(g, axis=-1) * a
        return xp.expand_dims(a, axis=-1) * xp.expand_dims(g, axis=-2)   # (..., n) = a (k,) @ b (..., k, n)
    if b.ndim == 1:                                    # (..., m) = a (..., m, k) @ b (k,)
        if a.ndim == 2:
            return g @ a
        return (xp.expand_dims(g, axis=-2) @ a)[..., 0, :]
    return a.mT @ g


_matmul.defvjp(_matmul_vjp_a, _matmul_vjp_b, saves="inputs")
_matrix_transpose.defvjp(lambda xp, g, y, x: g.mT, saves=())
