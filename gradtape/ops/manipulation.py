"""Manipulation functions (Array API standard, chapter "Manipulation Functions").

All of them are linear, so each rule is the adjoint manipulation of the gradient.
"""

from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from gradtape.core.domains import REAL, Case, Pack, with_complex
from gradtape.ops import apply, apply1, batch_as, composite, defop, public
from gradtape.ops.indexing import _getitem_op, _native_key, _setitem_op, take
from gradtape.core.tensor import Tensor, convert_to_tensor

__all__ = [
    "broadcast_arrays",
    "broadcast_shapes",
    "broadcast_to",
    "concat",
    "expand_dims",
    "flip",
    "moveaxis",
    "pad",
    "permute_dims",
    "repeat",
    "reshape",
    "roll",
    "split",
    "squeeze",
    "stack",
    "tile",
    "unstack",
]


def _norm_axis(axis, ndim, prefix=""):
    if not -ndim <= axis < builtins.max(ndim, 1):
        # NumPy's AxisError wording (and prefix: moveaxis' "source: "), which SciPy's tests match (issue 21)
        raise IndexError(f"{prefix}axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim if ndim else 0


def _lead(g, ndim):
    """The leading (batch) axes of cotangent ``g`` of an output of ``ndim`` dimensions: ``()``
    outside a batched walk."""
    return tuple(g.shape[: g.ndim - ndim])


def _ndim(a):
    """The number of dimensions of an argument of a public function (a Tensor, a native array, a
    nested list or a Python scalar)."""
    nd = getattr(a, "ndim", None)
    return np.ndim(a) if nd is None else nd


def _linked(view, base, op, attrs, copy=None, read_only=False):
    """``view``, just computed as ``op(base, **attrs)``, shares its values with ``base`` where NumPy's
    result is a view.  A no-op here: ``gradtape.ops.operators`` (above this layer) replaces it with the
    function that links them (docs/conventions.md, "Views"); ``copy=False`` (reshape) raises there
    where NumPy would copy."""
    return view


# --------------------------------------------------------------------------- reshape family
_reshape = defop(
    "reshape",
    lambda xp, x, *, shape: xp.reshape(x, shape),
    chapter="manipulation",
    domain=with_complex([Case(REAL[2, 3], shape=(3, 2)), Case(REAL[6], shape=(2, -1)), Case(REAL[1], shape=())]),
    saves="inputs",
    batched=True,
)


@_reshape.gradient
def _reshape_grad(xp, op, grad):
    """The gradient reshaped back to the input's shape (leading batch axes kept); the rule reads
    only the input's shape."""
    return xp.reshape(grad, tuple(grad.shape[: grad.ndim - len(op.attrs["shape"])]) + tuple(op.inputs[0].shape))


@public(_reshape)
def reshape(x, /, shape, *, copy=None):
    """``x`` with a new shape (one entry may be -1)."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if isinstance(x, Tensor):
        old = tuple(x._v.shape)
        if old == shape and not copy:
            return x
        _check_reshape(old, shape)
        out = apply1(_reshape, x, {"shape": shape})
        return out if copy else _linked(out, x, _reshape, {"shape": shape}, copy)
    return apply1(_reshape, x, {"shape": shape})


def _check_reshape(old, shape):
    """The same ``ValueError`` on every backend (they disagree on the class otherwise)."""
    size = 1
    for n in old:
        size *= n
    known = 1
    for n in shape:
        if n != -1:
            known *= n
    unknown = shape.count(-1)
    if unknown > 1 or any(n < -1 for n in shape) or (known != size if not unknown else (known == 0 or size % known)):
        raise ValueError(f"cannot reshape a tensor of shape {old} (size {size}) into shape {shape} (in op 'reshape')")


def _expand_dims_forward(xp, x, *, axis):
    for a in axis:  # ascending positions of the output: each lands where it must
        x = xp.expand_dims(x, axis=a)
    return x


_expand_dims = defop(
    "expand_dims",
    _expand_dims_forward,
    chapter="manipulation",
    domain=with_complex(
        [Case(REAL[3], axis=0), Case(REAL[2, 3], axis=-1), Case(REAL[()], axis=0), Case(REAL[2, 3], axis=(0, -1, 2))]
    ),
    saves="inputs",
    batched=True,
)


@_expand_dims.gradient
def _expand_dims_grad(xp, op, grad):
    """The gradient reshaped back to the input's shape (the new axes have size one)."""
    x = op.inputs[0]
    return xp.reshape(grad, _lead(grad, x.ndim + len(op.attrs["axis"])) + tuple(x.shape))


@public(_expand_dims)
def expand_dims(x, /, axis):
    """``x`` with new axes of size one at ``axis``: an int, or (2025.12) a tuple of positions in the
    output, each in ``[-M, M)`` for ``M = x.ndim + len(axis)`` and distinct once normalized."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    m = x.ndim + len(axes)
    norm = []
    for a in axes:
        a = operator.index(a)
        if not -m <= a < m:
            raise IndexError(
                f"expand_dims: axis {a} is out of bounds for an output of {m} dimensions "
                f"(input of {x.ndim}, {len(axes)} new)"
            )
        norm.append(a % m)
    if len(set(norm)) != len(norm):
        raise ValueError(f"expand_dims: axis {axis!r} names an output position twice")
    attrs = {"axis": tuple(sorted(norm))}
    return _linked(apply1(_expand_dims, x, attrs), x, _expand_dims, attrs)


_squeeze = defop(
    "squeeze",
    lambda xp, x, *, axis: xp.squeeze(x, axis=axis),
    chapter="manipulation",
    domain=with_complex([Case(REAL[1, 3], axis=0), Case(REAL[2, 1, 1], axis=(1, 2))]),
    saves="inputs",
    batched=True,
)


@_squeeze.gradient
def _squeeze_grad(xp, op, grad):
    """The gradient reshaped back to the input's shape (the squeezed axes had size one)."""
    x = op.inputs[0]
    axis = op.attrs["axis"]
    return xp.reshape(grad, _lead(grad, x.ndim - (len(axis) if isinstance(axis, tuple) else 1)) + tuple(x.shape))


@public(_squeeze)
def squeeze(x, /, axis):
    """``x`` without the size-one axes ``axis`` (an int or a tuple)."""
    axis = tuple(int(a) for a in axis) if isinstance(axis, (tuple, list)) else int(axis)
    out = apply1(_squeeze, x, {"axis": axis})
    return _linked(out, x, _squeeze, {"axis": axis}) if isinstance(x, Tensor) else out


_permute_dims = defop(
    "permute_dims",
    lambda xp, x, *, axes: xp.permute_dims(x, axes),
    chapter="manipulation",
    domain=with_complex([Case(REAL[2, 3], axes=(1, 0)), Case(REAL[2, 3, 4], axes=(2, 0, 1))]),
    saves=(),
    batched=True,
)


@_permute_dims.gradient
def _permute_dims_grad(xp, op, grad):
    """The inverse permutation of the gradient (leading batch axes stay in front)."""
    axes = op.attrs["axes"]
    lead = grad.ndim - len(axes)
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = lead + i
    return xp.permute_dims(grad, tuple(range(lead)) + tuple(inv))


@public(_permute_dims)
def permute_dims(x, /, axes):
    """``x`` with its axes permuted (negative axes count from the last, as 2025.12 allows)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    nd = x.ndim
    axes = tuple(_norm_axis(operator.index(a), nd) for a in axes)
    if sorted(axes) != list(range(nd)):
        raise ValueError(
            f"permute_dims: axes {tuple(axes)} are not a permutation of the {nd} axes of a tensor of shape {x.shape}"
        )
    return _linked(apply1(_permute_dims, x, {"axes": axes}), x, _permute_dims, {"axes": axes})


def moveaxis(x, source, destination, /):
    """Move axes of ``x`` to new positions (a permute_dims)."""
    nd = x.ndim
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    src = [_norm_axis(a, nd, "source: ") for a in src]
    dst = [_norm_axis(a, nd, "destination: ") for a in dst]
    order = [a for a in range(nd) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute_dims(x, tuple(order))


composite(
    "moveaxis",
    moveaxis,
    chapter="manipulation",
    complex=True,
    domain=[Case(REAL[2, 3, 4], 0, -1), Case(REAL[2, 3, 4], (0, 1), (2, 0))],
)


_broadcast_to = defop(
    "broadcast_to",
    lambda xp, x, /, shape: xp.broadcast_to(x, shape),
    chapter="manipulation",
    domain=with_complex([Case(REAL[3], shape=(2, 3)), Case(REAL[2, 1], shape=(2, 4)), Case(REAL[()], shape=(3,))]),
    saves=(),
    batched=True,
    xp_callable=True,  # rules' xp.broadcast_to(g, shape): an adapter's override on native arrays too
)
_broadcast_to.gradient(lambda xp, op, grad: grad)  # the engine sums the gradient back to the input's shape


def _broadcast(x, shape):
    """``x`` broadcast to ``shape`` as a new tensor (gradtape's own uses: a constant's fill, a grid)."""
    shape = tuple(int(s) for s in shape)
    if isinstance(x, Tensor) and tuple(x._v.shape) == shape:
        return x
    return apply1(_broadcast_to, x, {"shape": shape})


@public(_broadcast_to)
def broadcast_to(x, /, shape):
    """``x`` broadcast to ``shape``, a read-only view of ``x`` as NumPy's (it sees writes into ``x``;
    a write into it is a ``ValueError``); the gradient sums over the broadcast axes."""
    out = _broadcast(x, shape)
    if out is x:
        return out
    return _linked(out, x, _broadcast_to, {"shape": out.shape}, read_only=True)


def broadcast_shapes(*shapes):
    """The shape that ``shapes`` broadcast to (2025.12; ``()`` for none); a ``ValueError`` when they
    do not broadcast.  Not an op: it takes and returns tuples of ints."""
    out = []
    for shape in shapes:
        shape = tuple(operator.index(n) for n in shape)
        if len(shape) > len(out):
            out = [1] * (len(shape) - len(out)) + out
        for k, n in enumerate(shape, len(out) - len(shape)):
            if n < 0:
                raise ValueError(f"broadcast_shapes: shape {shape} has a negative size")
            if out[k] == 1:
                out[k] = n
            elif n != 1 and n != out[k]:
                raise ValueError(
                    f"broadcast_shapes: shapes {', '.join(map(str, shapes))} do not broadcast "
                    # NumPy's words after ours: SciPy matches "not be broadcast" (issue 21)
                    f"(size {n} against {out[k]}); shape mismatch: objects cannot be broadcast to a single shape"
                )
    return tuple(out)


def broadcast_arrays(*arrays):
    """The arrays broadcast against each other (each a differentiable broadcast_to), as a tuple
    (2025.12; a list before)."""
    shape = broadcast_shapes(*[tuple(a.shape) if hasattr(a, "shape") else () for a in arrays])
    return tuple(_broadcast(a, shape) for a in arrays)  # (new tensors: NumPy's are writable views, deprecated)


composite(
    "broadcast_arrays",
    broadcast_arrays,
    chapter="manipulation",
    complex=True,
    domain=[Case(REAL[2, 1], REAL[3]), Case(REAL[2, 3], REAL[()], REAL[1, 3])],
)


_flip = defop(
    "flip",
    lambda xp, x, *, axis=None: xp.flip(x, axis=axis),
    chapter="manipulation",
    domain=with_complex([Case(REAL[3]), Case(REAL[2, 3], axis=1), Case(REAL[2, 3, 2], axis=(0, 2))]),
    saves=(),
    batched=True,
)


@_flip.gradient
def _flip_grad(xp, op, grad):
    """The gradient flipped back along the same axes (recorded negative, so that leading batch
    axes stay; None only for a 0-d input, where flipping changes nothing)."""
    axis = op.attrs["axis"]
    return grad if axis is None else xp.flip(grad, axis=axis)


@public(_flip)
def flip(x, /, *, axis=None):
    """``x`` reversed along ``axis`` (all axes by default)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    nd = x.ndim
    if axis is None:
        axis = tuple(range(-nd, 0)) if nd else None
    else:
        axes = tuple(operator.index(a) for a in axis) if isinstance(axis, (tuple, list)) else operator.index(axis)
        for a in axes if isinstance(axes, tuple) else (axes,):
            if not -nd <= a < nd:  # the same words on every backend (NumPy's AxisError's)
                raise IndexError(f"flip: axis {a} is out of bounds for array of dimension {nd}")
        axis = tuple(a % nd - nd for a in axes) if isinstance(axes, tuple) else axes % nd - nd
    out = apply1(_flip, x, {"axis": axis})
    return _linked(out, x, _flip, {"axis": axis}) if nd else out  # of a 0-D x, NumPy's is a scalar: a copy


# --------------------------------------------------------------------------- joining and splitting
def _concat_forward(xp, *arrays, axis=0):
    return xp.concat(arrays, axis=axis)


_concat = defop(
    "concat",
    _concat_forward,
    chapter="manipulation",
    scalars=False,
    promote=True,
    domain=with_complex(
        [
            Case(Pack(REAL[2, 3], REAL[1, 3]), axis=0),
            Case(Pack(REAL[2, 3], REAL[2, 2]), axis=1),
            Case(Pack(REAL[2], REAL[3, 2]), axis=None),
            Case(Pack(REAL[2, 2], REAL[2, 2], REAL[2, 2]), axis=-1),
        ]
    ),
    saves="inputs",
    batched=True,
)


@_concat.gradient
def _concat_grad(xp, op, grad):
    """Slices of the gradient, one per input, along the concatenation axis (for ``axis=None``,
    slices of the flat gradient reshaped to each input's shape); leading batch axes stay.  The rule
    reads only the inputs' shapes."""
    axis = op.attrs["axis"]
    ins = op.inputs
    out = []
    start = 0
    if axis is None:
        lead = _lead(grad, 1)
        for k, x in enumerate(ins):
            n = math.prod(x.shape)
            out.append(xp.reshape(grad[..., start : start + n], lead + tuple(x.shape)) if op.needs_grad(k) else None)
            start += n
        return tuple(out)
    nd = ins[0].ndim
    after = (slice(None),) * (nd - 1 - axis % nd)  # the axes after ``axis``
    for k, x in enumerate(ins):
        n = x.shape[axis]
        out.append(grad[(Ellipsis, slice(start, start + n)) + after] if op.needs_grad(k) else None)
        start += n
    return tuple(out)


@public(_concat)
def concat(arrays, /, *, axis=0):
    """Join tensors along an existing axis (``axis=None`` flattens them first)."""
    arrays = tuple(arrays)
    if not arrays:
        raise ValueError("concat needs at least one tensor")
    return apply(_concat, arrays, {"axis": None if axis is None else int(axis)})


def _stack_forward(xp, *arrays, axis=0):
    return xp.stack(arrays, axis=axis)


_stack = defop(
    "stack",
    _stack_forward,
    chapter="manipulation",
    scalars=False,
    promote=True,
    domain=with_complex(
        [
            Case(Pack(REAL[3], REAL[3])),
            Case(Pack(REAL[2, 3], REAL[2, 3]), axis=1),
            Case(Pack(REAL[2], REAL[2], REAL[2]), axis=-1),
        ]
    ),
    saves=(),
    batched=True,
)


@_stack.gradient
def _stack_grad(xp, op, grad):
    """Each input gets its slice of the gradient along the new axis (recorded negative, so that
    leading batch axes stay)."""
    after = (slice(None),) * (-op.attrs["axis"] - 1)  # the axes after the new one
    return tuple(grad[(Ellipsis, k) + after] if op.needs_grad(k) else None for k in range(len(op.in_ids)))


@public(_stack)
def stack(arrays, /, *, axis=0):
    """Join tensors along a new axis."""
    arrays = tuple(arrays)
    if not arrays:
        raise ValueError("stack needs at least one tensor")
    axis = int(axis)
    nd = _ndim(arrays[0]) + 1
    if -nd <= axis < nd:  # (else the library reports it)
        axis = axis % nd - nd
    return apply(_stack, arrays, {"axis": axis})


def unstack(x, /, *, axis=0):
    """The slices of ``x`` along ``axis`` (each a differentiable indexing, a view of ``x`` as NumPy's)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    axis = _norm_axis(axis, x.ndim)
    out = []
    for k in range(x.shape[axis]):
        key = _native_key((slice(None),) * axis + (k,), x._b, x.ndim, x._b.device_of(x._v))
        piece = apply1(_getitem_op, x, {"key": key})
        # views of x, as NumPy's; of a 1-D x, NumPy's pieces are scalars: copies
        out.append(_linked(piece, x, _getitem_op, {"key": key}) if x.ndim > 1 else piece)
    return tuple(out)


composite(
    "unstack", unstack, chapter="manipulation", complex=True, domain=[Case(REAL[3, 2]), Case(REAL[2, 3, 2], axis=1)]
)


# --------------------------------------------------------------------------- repeat, roll, tile
def _repeat_forward(xp, x, *repeats, axis, count=None):
    return xp.repeat(x, repeats[0] if repeats else count, axis=axis)


_repeat = defop(
    "repeat",
    _repeat_forward,
    chapter="manipulation",
    domain=with_complex(
        [
            Case(REAL[3], 2),
            Case(REAL[2, 3], 2, axis=1),
            Case(REAL[2, 2], 3),
            Case(REAL[2, 3], np.array([1, 0, 2]), axis=1),
            Case(REAL[3, 2], np.array([2, 1, 1]), axis=-2),
        ]
    ),
    saves="inputs",
    batched=True,
)


@_repeat.gradient
def _repeat_grad(xp, op, grad):
    """Each element gets the sum of the gradient over its copies: a reshape and sum for an integer
    count; for per-element counts, differences of the gradient's cumulative sum at the segment ends.
    (The input is read for its shape only; leading batch axes of the gradient stay.)"""
    x = op.inputs[0]
    a = grad.ndim - x.ndim + op.attrs["axis"]  # the repeated axis in the gradient
    if len(op.in_ids) == 1:
        count = op.attrs["count"]
        shape = tuple(grad.shape)
        g = xp.reshape(grad, shape[:a] + (x.shape[op.attrs["axis"]], count) + shape[a + 1 :])
        return xp.sum(g, axis=a + 1)
    repeats = op.inputs[1]
    ends = xp.cumulative_sum(repeats)
    c = xp.cumulative_sum(grad, axis=a, include_initial=True)
    return xp.take(c, ends, axis=a) - xp.take(c, ends - repeats, axis=a), None


@public(_repeat)
def repeat(x, repeats, /, *, axis=None):
    """Each element of ``x`` repeated ``repeats`` times (an int, or one count per element) along
    ``axis`` (the flattened ``x`` by default)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    axis = _norm_axis(int(axis), x.ndim)
    if isinstance(repeats, int) and not isinstance(repeats, bool):
        return apply1(_repeat, x, {"axis": axis, "count": repeats})
    if not isinstance(repeats, Tensor):
        repeats = convert_to_tensor(repeats, like=x)
    if not repeats.dtype.is_integer:
        raise TypeError(f"repeat: repeats must be integers, not {repeats.dtype}")
    return apply(_repeat, (x, repeats), {"axis": axis})


def _roll_forward(xp, x, *, shift, axis):
    return xp.roll(x, shift, axis=axis)


_roll = defop(
    "roll",
    _roll_forward,
    chapter="manipulation",
    domain=with_complex(
        [Case(REAL[5], 2), Case(REAL[2, 3], -1, axis=1), Case(REAL[2, 3], 4), Case(REAL[2, 3], (1, 2), axis=(0, 1))]
    ),
    saves=(),
)


@_roll.gradient
def _roll_grad(xp, op, grad):
    """Roll the gradient back: shift by ``-shift``."""
    shift = op.attrs["shift"]
    back = tuple(-s for s in shift) if isinstance(shift, tuple) else -shift
    return xp.roll(grad, back, axis=op.attrs["axis"])


@public(_roll)
def roll(x, /, shift, *, axis=None):
    """``x`` shifted by ``shift`` along ``axis`` (elements leaving one end come back at the other;
    the flattened ``x`` by default)."""
    shift = tuple(int(s) for s in shift) if isinstance(shift, (tuple, list)) else int(shift)
    if isinstance(axis, (tuple, list)):
        axis = tuple(int(a) for a in axis)
    elif axis is not None:
        axis = int(axis)
    return apply1(_roll, x, {"shift": shift, "axis": axis})


def _tile_forward(xp, x, *, repetitions):
    return xp.tile(x, repetitions)


_tile = defop(
    "tile",
    _tile_forward,
    chapter="manipulation",
    domain=with_complex(
        [Case(REAL[3], (2,)), Case(REAL[2, 3], (2, 1)), Case(REAL[2, 3], (3,)), Case(REAL[3], (2, 1, 2))]
    ),
    saves="inputs",
    batched=True,
)


@_tile.gradient
def _tile_grad(xp, op, grad):
    """The sum over the copies: each tiled axis of the gradient is split into (copies, size) and
    the copies are summed (the input is read for its shape only; leading batch axes stay)."""
    x = op.inputs[0]
    reps = op.attrs["repetitions"]
    d = builtins.max(len(reps), x.ndim)
    reps = (1,) * (d - len(reps)) + tuple(reps)
    shape = (1,) * (d - x.ndim) + tuple(x.shape)
    split = []
    for r, n in zip(reps, shape):
        split += [r, n]
    lead = _lead(grad, d)
    g = xp.sum(xp.reshape(grad, lead + tuple(split)), axis=tuple(range(-2 * d, 0, 2)))
    return xp.reshape(g, lead + tuple(x.shape))


@public(_tile)
def tile(x, repetitions, /):
    """``x`` repeated ``repetitions[i]`` times along each axis ``i`` (leading axes added as needed)."""
    return apply1(_tile, x, {"repetitions": tuple(int(r) for r in repetitions)})


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("reshape", _reshape)
batch_as("expand_dims", _expand_dims)
batch_as("axis", _squeeze, _flip, "unstack")
batch_as("permute_dims", _permute_dims)
batch_as("broadcast_to", _broadcast_to)
batch_as("broadcast_arrays", "broadcast_arrays")
batch_as("concat", _concat)
batch_as("stack", _stack)
batch_as("axis_or_loop", _repeat, _roll)
batch_as("tile", _tile)
batch_as("moveaxis", "moveaxis")


# --------------------------------------------------------------------------- TensorFlow's split and pad
def split(value, num_or_size_splits, axis=0, num=None, name=None):
    """TensorFlow's ``tf.split``: ``value`` cut along ``axis`` into ``num_or_size_splits`` equal
    pieces (an int that divides the axis), or into pieces of the sizes listed (one may be -1: the
    rest); a list of tensors, each a differentiable slice (the gradients meet in ``value``)."""
    x = value if isinstance(value, Tensor) else convert_to_tensor(value)
    nd = x.ndim
    if not -nd <= int(axis) < builtins.max(nd, 1) or nd == 0:
        raise ValueError(f"split: axis {axis} is out of range for a tensor of {nd} dimensions (-{nd} <= axis < {nd})")
    axis = int(axis) % nd
    n = x.shape[axis]
    if isinstance(num_or_size_splits, Tensor):
        num_or_size_splits = num_or_size_splits.numpy().tolist()
    if isinstance(num_or_size_splits, (int, np.integer)) and not isinstance(num_or_size_splits, bool):
        k = int(num_or_size_splits)
        if k <= 0 or n % k:
            raise ValueError(
                f"split: {k} pieces do not evenly divide axis {axis} of size {n} (tensor of shape {x.shape}); "
                "give the sizes as a list instead, e.g. [n // k] * (k - 1) + [-1]"
            )
        sizes = [n // k] * k
    else:
        sizes = [operator.index(s) for s in num_or_size_splits]
        if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
            raise ValueError(f"split: sizes {sizes}: there can be only one -1 and no other negative size")
        known = builtins.sum(s for s in sizes if s != -1)
        if -1 in sizes and known <= n:
            sizes[sizes.index(-1)] = n - known
        if builtins.sum(sizes) != n:
            raise ValueError(f"split: sizes {list(num_or_size_splits)} do not add up to axis {axis}'s size {n}")
    if num is not None and int(num) != len(sizes):
        raise ValueError(f"split: num={num} but {len(sizes)} pieces")
    out, start = [], 0
    for s in sizes:
        out.append(_getitem_slice(x, axis, start, start + s))
        start += s
    return out


def _getitem_slice(x, axis, start, stop):
    key = _native_key((slice(None),) * axis + (slice(start, stop),), x._b, x.ndim, x._b.device_of(x._v))
    return apply1(_getitem_op, x, {"key": key})


composite(
    "split",
    split,
    chapter="math",  # (TensorFlow's, beyond the standard: the docs list it under gt.math's)
    domain=[Case(REAL[3, 4], 2, axis=1), Case(REAL[5, 2], [1, -1, 2]), Case(REAL[2, 6], [0, 4, -1], axis=-1)],
    doc="TensorFlow's tf.split: equal pieces, or pieces of listed sizes (one -1), along an axis",
)


_PAD_MODES = ("CONSTANT", "REFLECT", "SYMMETRIC")


def pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None):
    """TensorFlow's ``tf.pad``: ``paddings[d] = [before, after]`` elements added on each side of axis
    ``d``; ``"CONSTANT"`` fills them with ``constant_values``, ``"REFLECT"`` mirrors ``x`` without its
    edge (``before, after < size``), ``"SYMMETRIC"`` with it (``<= size``).  The gradient is the slice
    of the gradient at ``x`` (constant), plus the mirrored parts added back (reflect, symmetric)."""
    x = tensor if isinstance(tensor, Tensor) else convert_to_tensor(tensor)
    m = str(mode).upper()
    if m not in _PAD_MODES:
        raise ValueError(f'pad: mode must be one of "CONSTANT", "REFLECT", or "SYMMETRIC", not {mode!r}')
    if isinstance(paddings, Tensor):
        paddings = paddings.numpy()
    pads = np.asarray(paddings)
    if pads.dtype.kind not in "iu" and pads.size:
        raise TypeError(f"pad: paddings must be integers, not {pads.dtype}")
    if pads.shape != (x.ndim, 2):
        raise ValueError(
            f"pad: paddings must have shape [rank, 2] = [{x.ndim}, 2] for a tensor of shape {x.shape}, "
            f"got shape {list(pads.shape)}"
        )
    pads = [(int(a), int(b)) for a, b in pads.reshape(x.ndim, 2)]
    for d, (a, b) in enumerate(pads):
        if a < 0 or b < 0:
            raise ValueError(f"pad: paddings must be non-negative, got {[a, b]} for axis {d}")
    if m == "CONSTANT":
        shape = tuple(n + a + b for n, (a, b) in zip(x.shape, pads))
        if shape == tuple(x.shape):
            return x
        from_ = convert_to_tensor(constant_values, dtype=x.dtype, like=x)
        if from_.ndim:
            raise ValueError(f"pad: constant_values must be a scalar, got shape {from_.shape}")
        key = tuple(slice(a, a + n) for n, (a, _) in zip(x.shape, pads))
        filled = _broadcast(from_, shape)
        return apply(_setitem_op, (filled, x), {"key": _native_key(key, x._b, x.ndim, x._b.device_beside(x._v))})
    edge = 1 if m == "REFLECT" else 0
    for d, (a, b) in enumerate(pads):
        n = x.shape[d]
        if a + edge > n or b + edge > n:
            raise ValueError(
                f"pad: {m} paddings {[a, b]} of axis {d} must be {'less than' if edge else 'at most'} "
                f"its size {n} (tensor of shape {x.shape})"
            )
        if a or b:
            before = range(a - 1 + edge, edge - 1, -1)  # the mirror images, nearest the edge last
            after = range(n - 1 - edge, n - 1 - edge - b, -1)
            idx = [*before, *range(n), *after]
            x = take(x, np.asarray(idx, dtype=np.int64), axis=d)
    return x


composite(
    "pad",
    pad,
    chapter="math",
    complex=True,
    domain=[
        Case(REAL[2, 3], [[1, 1], [2, 0]]),
        Case(REAL[2, 3], [[0, 1], [1, 2]], constant_values=1.5),
        Case(REAL[3, 4], [[2, 1], [1, 3]], mode="REFLECT"),
        Case(REAL[3, 4], [[3, 1], [0, 4]], mode="SYMMETRIC"),
    ],
    doc="TensorFlow's tf.pad: CONSTANT, REFLECT or SYMMETRIC padding",
)
