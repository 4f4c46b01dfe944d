"""Indexing (Array API standard, chapters "Indexing" and "Indexing Functions").

``x[key]`` is the op ``getitem``; its rule scatters the gradient back (a plain functional set for
basic keys, a scatter-add where integer arrays may repeat an index).  ``x[key] = v`` is the op
``setitem``: a recorded functional update whose gradient flows to the old value (outside ``key``)
and to ``v`` (inside it).
"""

from __future__ import annotations

import builtins

import numpy as np

from gradtape.backends.tracing import TraceArray, TracingBackend, value_check
from gradtape.core.domains import REAL, Case, with_complex
from gradtape.ops import apply, apply1, batch_as, composite, defop, public
from gradtape.core.tensor import Tensor, convert_to_tensor, lift, wrap
from gradtape.ops.elementwise import add

# (and the ops getitem, setitem, index_add: Tensor methods)
__all__ = ["gather_nd", "take", "take_along_axis", "tensor_scatter_nd_add", "tensor_scatter_nd_update"]

_BASIC = (int, slice, type(None), type(Ellipsis))


def _native_key(key, b, ndim=None, device=None, *, shape=None, op="getitem"):
    """The key with Tensors, lists and NumPy arrays turned into native arrays of backend ``b``.

    Given the indexed tensor's ``ndim``, a key that indexes fewer axes than that and has no
    Ellipsis gets a trailing one (``x[0]`` on a matrix is ``x[0, ...]``): NumPy, PyTorch and JAX
    do this implicitly, the standard leaves it unspecified (array_api_strict refuses it).  Given its
    ``shape``, integers and host integer arrays out of bounds are an ``IndexError`` naming ``op`` on
    every backend (JAX clamps a read and drops a write, silently)."""
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    host = {}  # position in out: the host array a native index array was made of
    for k in key:
        if isinstance(k, Tensor):
            if k._b is not b:
                if getattr(k._b, "real", None) is b or getattr(b, "real", None) is k._b:
                    # (one of the two is gt.vmap's per-example view of the other)
                    raise ValueError(
                        f"{op}: an index tensor that gt.vmap maps (one per example) cannot index a tensor "
                        "that is the same for every example with []; write gt.take(x, index, axis=...) "
                        "(jax.vmap's gather), or map the indexed tensor too"
                    )
                raise ValueError(
                    f"an index tensor on backend {k._b.name!r} cannot index a tensor on "
                    f"{b.name!r}; convert the index first"
                )
            if not (k.dtype.is_integer or k.dtype.is_bool):
                raise IndexError(f"tensors used as indices must be integer or bool, not {k.dtype}")
            out.append(k._v)
        elif isinstance(k, slice):
            out.append(slice(*(int(v) if isinstance(v, Tensor) else v for v in (k.start, k.stop, k.step))))
        elif isinstance(k, (list, np.ndarray)):
            arr = np.asarray(k)
            if arr.dtype.kind not in "biu":
                raise IndexError(f"arrays used as indices must be integer or bool, not {arr.dtype}")
            arr = arr.astype(np.int64) if arr.dtype.kind in "iu" else arr
            # a lazy backend indexes with host arrays: their values size the result (dask's chunks)
            out.append(arr if b.host_index_arrays else b.asarray(arr, device=device))
            host[len(out) - 1] = arr
        elif isinstance(k, (bool, np.bool_)):
            out.append(bool(k))
        elif isinstance(k, (int, np.integer)):
            out.append(int(k))
        elif k is None or k is Ellipsis or b.is_native(k):
            out.append(k)
        else:
            raise IndexError(
                f"only integers, slices, Ellipsis, None, and integer or boolean arrays are "
                f"valid indices, not {type(k).__name__}"
            )
    # (not with integer arrays: there the standard wants every axis indexed, by no Ellipsis)
    if (
        ndim is not None
        and not any(k is Ellipsis for k in out)
        and not _has_int_array(out, b)
        and builtins.sum(_axes_used(k, b) for k in out) < ndim
    ):
        out.append(Ellipsis)
    if shape is not None:
        _check_bounds([host.get(i, k) for i, k in enumerate(out)], tuple(shape), b, op)
        out = _check_traced_bounds(out, tuple(shape), b, op)
    return tuple(out)


def _indexed_axes(key, shape, b):
    """``(position, entry, axis)`` for each entry of a native key other than an ``Ellipsis``: its
    position in ``key`` and the axis of ``shape`` it starts at (the entries after the ``Ellipsis``
    counted from the end)."""
    split = next((i for i, k in enumerate(key) if k is Ellipsis), len(key))
    tail = len(shape) - builtins.sum(_axes_used(k, b) for k in key[split + 1 :])
    for first, stop, axis in ((0, split, 0), (split + 1, len(key), tail)):
        for i in range(first, stop):
            yield i, key[i], axis
            axis += _axes_used(key[i], b)


def _check_traced_bounds(key, shape, b, op):
    """Inside ``gt.function``: an index tensor's values are not known when the step is traced, so its
    bounds are checked with the step (``value_check``: every call raises NumPy's ``IndexError`` where one
    is outside its axis, before any variable is written back), on every backend -- a compiled JAX
    program would clamp it silently, a compiled torch one fail in a kernel.  Returns the key with such
    an array's positions outside the axis replaced by 0, so that no kernel indexes out of bounds before
    the check raises."""
    if not any(k.__class__ is TraceArray for k in key):
        return key
    out = list(key)
    for i, k, axis in _indexed_axes(key, shape, b):
        size = shape[axis] if 0 <= axis < len(shape) else None
        if k.__class__ is TraceArray and isinstance(size, int) and _key_array_kind(k, b) in ("i", "u"):
            out[i] = _bounds_checked(k, size, axis, b, op)
    return out


def _bounds_checked(k, size, axis, b, op):
    """The traced index array ``k`` of an axis of ``size`` checked with the step (NumPy's bounds:
    ``-size <= k < size``), its positions outside read as 0."""
    error = IndexError(f"an index is out of bounds for axis {axis} with size {size} (in op {op!r})")
    return _checked_index(k, (k < -size) | (k >= size), b, error)


def _checked_index(k, bad, b, error):
    """The traced index array ``k`` with the positions ``bad`` says are invalid checked with the step
    (``error`` raised where any is) and replaced by 0."""
    xp = b.xp
    value_check(xp.any(bad), type(error), str(error))
    return xp.where(bad, xp.zeros_like(k), k)


def _check_bounds(key, shape, b, op):
    """Raise for an integer, or a host integer array, of a native key outside the axis it indexes:
    what the key's values say without reading a device (an index tensor's values are checked in a
    ``gt.function`` step, :func:`_check_traced_bounds`, and eagerly by the backends that do not raise)."""
    for _, k, axis in _indexed_axes(key, shape, b):
        size = shape[axis] if 0 <= axis < len(shape) else None
        if isinstance(size, int) and not isinstance(k, bool):
            if isinstance(k, int):
                bad = None if -size <= k < size else k
            elif isinstance(k, np.ndarray) and k.dtype.kind in "iu" and k.size:
                bad = next((int(v) for v in (k.min(), k.max()) if not -size <= v < size), None)
            else:
                bad = None
            if bad is not None:
                raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {size} (in op {op!r})")


def _key_array_kind(k, b):
    """The dtype kind ("b", "i", "u") of an array in a native key (a native array, or a NumPy one on a
    backend that indexes with host arrays); None for anything else."""
    if isinstance(k, np.ndarray):
        return k.dtype.kind
    return b.dtype_of(k).kind if b.is_native(k) else None


def _has_int_array(key, b):
    """Whether the key has an integer array of at least one dimension (0-d ones index like ints)."""
    return any(_key_array_kind(k, b) in ("i", "u") and len(k.shape) for k in key)


def _axes_used(k, b):
    """How many axes of the indexed tensor one entry of a native key consumes."""
    if k is None or isinstance(k, bool):
        return 0
    kind = _key_array_kind(k, b)
    if kind is not None:
        return len(k.shape) if kind == "b" else 1
    return 1


def _is_basic(key):
    return all(isinstance(k, _BASIC) and not isinstance(k, bool) for k in key)


def _getitem_forward(xp, x, *, key):
    return x[key]


_getitem_op = defop(
    "getitem",
    _getitem_forward,
    chapter="indexing",
    domain=with_complex(
        [
            Case(REAL[4], key=(1,)),
            Case(REAL[3, 4], key=(slice(0, 2), slice(None, None, 2))),
            Case(REAL[3, 4], key=(Ellipsis, None, 1)),
            Case(REAL[5], key=(np.array([0, 2, 2, 4]),)),
            Case(REAL[3, 4], key=(np.array([[True, False, True, True]] * 3),)),
            Case(REAL[3, 4], key=(np.array([2, 0, 2]), np.array([1, 3, 1]))),
            Case(REAL[3, 4], key=(slice(1, None),)),
            Case(REAL[2, 3, 4], key=(0, None, slice(0, 3, 2))),
            Case(REAL[5], key=(slice(None, None, -2),)),
            Case(REAL[3, 4], key=(slice(2, 0, -1), -1)),
            # ints beside an array are advanced indices (NumPy): apart, their axis comes first
            Case(REAL[3, 4, 5], key=(1, slice(1, None), np.array([0, 2, 3]))),
        ]
    ),
    saves="inputs",
    xp_callable=True,
)


# (``xp.getitem``, ``xp.setitem`` and ``xp.index_add`` take their key, value and shape by keyword:
# the native forwards take them so, the public functions in another order)
@_getitem_op.gradient
def _getitem_grad(xp, op, grad):
    """Scatter the gradient into zeros of the input's shape at ``key`` (adding where integer
    arrays repeat an index); the input is read for its shape and dtype only."""
    x = op.inputs[0]
    key = op.attrs["key"]
    if _is_basic(key):
        if any(k is None for k in key):
            # the standard allows no None in a setitem key: drop the new axes from key and gradient
            key, new_axes = _without_newaxes(key, x.ndim)
            grad = xp.squeeze(grad, axis=new_axes)
        return xp.setitem(xp.zeros_like(x), key=key, value=grad)
    return xp.index_add(grad, key=key, shape=tuple(x.shape))


def _without_newaxes(key, ndim):
    """A basic key without its ``None`` entries, and the axes of ``x[key]`` those entries made."""
    consumed = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    out_axis = 0
    new_axes = []
    for k in key:
        if k is None:
            new_axes.append(out_axis)
            out_axis += 1
        elif k is Ellipsis:
            out_axis += ndim - consumed
        elif isinstance(k, slice):
            out_axis += 1
    return tuple(k for k in key if k is not None), tuple(new_axes)


def beside_key(x, key):
    """``x`` taken into the backend of an index tensor of ``key`` where theirs differ and that backend
    takes it in: inside ``gt.function``, a tensor captured from outside indexed by a traced one (as a
    binary op lifts its captured operand); else ``x`` (where it cannot, :func:`_native_key` says why)."""
    for k in key if isinstance(key, tuple) else (key,):
        if isinstance(k, Tensor) and k._b is not x._b and isinstance(k._b, TracingBackend):
            # (not gt.vmap's per-example backend: there an unmapped tensor indexed by a mapped index is
            # gt.take's, jax.vmap's gather, which _native_key's error names)
            lifted = lift(x, k._b)
            return x if lifted is None else lifted
    return x


def _getitem(x, key):
    """``x[key]`` (used by ``Tensor.__getitem__`` and by rules)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    x = beside_key(x, key)
    return apply1(_getitem_op, x, {"key": _native_key(key, x._b, x.ndim, x._b.device_beside(x._v), shape=x.shape)})


_getitem_op.public = _getitem


def _index_add_forward(backend, values, *, key, shape):
    return backend.index_add(shape, backend.dtype_of(values), key, values)


_index_add_op = defop(
    "index_add",
    _index_add_forward,
    forward_takes="backend",
    chapter="indexing",
    domain=with_complex(
        [
            Case(REAL[4], (np.array([0, 2, 2, 4]),), (5,)),
            Case(REAL[2, 2], (np.array([1, 1]),), (3, 2)),
            Case(REAL[3], (np.array([0, 2, 0]), np.array([1, 1, 1])), (3, 2)),
        ]
    ),
    doc="zeros(shape) with values added at key (the adjoint of getitem)",
    saves=(),
    xp_callable=True,
)


@_index_add_op.gradient
def _index_add_grad(xp, op, grad):
    """The gradient at ``key`` (a ``take`` along axis 0 when the key is one integer array, which
    the standard allows whatever the rank)."""
    key = op.attrs["key"]
    b = op.backend
    if len(key) == 1 or (len(key) == 2 and key[1] is Ellipsis):
        k = key[0]
        if _key_array_kind(k, b) in ("i", "u") and len(k.shape) == 1:
            return xp.take(grad, k, axis=0)
    return xp.getitem(grad, key=key)


def _index_add(values, key, shape):
    """Zeros of ``shape`` (``values``' dtype) with ``values`` added at ``key``, repeated indices
    accumulating: the adjoint of ``x[key]`` (differentiable)."""
    if not isinstance(values, Tensor):
        values = convert_to_tensor(values)
    return apply1(
        _index_add_op, values, {"key": _native_key(key, values._b, len(shape)), "shape": tuple(int(s) for s in shape)}
    )


_index_add_op.public = _index_add


def _setitem_forward(backend, x, value, *, key):
    return backend.setitem(x, key, value)


_setitem_op = defop(
    "setitem",
    _setitem_forward,
    forward_takes="backend",
    chapter="indexing",
    domain=with_complex(
        [
            Case(REAL[4], (1,), REAL[()]),
            Case(REAL[3, 4], (slice(0, 2),), REAL[4]),
            Case(REAL[5], (np.array([0, 3]),), REAL[2]),
            Case(REAL[3, 4, 5], (1, slice(1, None), np.array([0, 2, 3])), REAL[3, 3]),
        ]
    ),
    saves=(),
    xp_callable=True,
)


@_setitem_op.gradient
def _setitem_grad(xp, op, grad):
    """The old value gets the gradient outside ``key`` (zero at ``key``); the new value gets the
    gradient at ``key`` (the engine sums it back where the value was broadcast)."""
    key = op.attrs["key"]
    gx = xp.setitem(grad, key=key, value=0.0) if op.needs_grad(0) else None
    gv = xp.getitem(grad, key=key) if op.needs_grad(1) else None
    return gx, gv


def _setitem(x, key, value):
    """A new tensor equal to ``x`` with ``x[key] = value`` (recorded, differentiable in both)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    x = beside_key(x, key)
    nkey = _native_key(key, x._b, x.ndim, x._b.device_beside(x._v), shape=x.shape, op="setitem")
    if not isinstance(value, Tensor) or value.dtype != x.dtype:
        value = convert_to_tensor(value, dtype=x.dtype, like=x)
    return apply(_setitem_op, (x, value), {"key": nkey})


_setitem_op.public = _setitem


def _take_forward(xp, x, indices, *, axis):
    """``xp.take``, with NumPy's (and JAX's) answer for indices of any rank on every backend: the
    standard's ``take`` takes 1-D indices (array_api_strict refuses others, PyTorch's a 0-d one gives a
    length-1 axis), so others are taken flat and the result shaped ``x.shape[:axis] + indices.shape +
    x.shape[axis + 1:]``; the rule's scatter reads the same key either way."""
    if len(indices.shape) == 1:
        return xp.take(x, indices, axis=axis)
    taken = xp.take(x, xp.reshape(indices, (-1,)), axis=axis)
    return xp.reshape(taken, tuple(x.shape[:axis]) + tuple(indices.shape) + tuple(x.shape[axis + 1 :]))


_take = defop(
    "take",
    _take_forward,
    chapter="indexing",
    domain=with_complex(
        [
            Case(REAL[5], np.array([0, 2, 2, 4])),
            Case(REAL[3, 4], np.array([3, 0, 3]), axis=1),
            Case(REAL[3, 2, 2], np.array([2, 1]), axis=-3),
            Case(REAL[3, 4], np.array(2), axis=0),
            Case(REAL[4, 3], np.array([[3, 0], [1, 3]]), axis=0),
        ]
    ),
    saves="inputs",
)


@_take.gradient
def _take_grad(xp, op, grad):
    """Scatter-add the gradient back along ``axis`` (repeated indices accumulate); ``x`` is read
    for its shape only."""
    x, indices = op.inputs
    axis = op.attrs["axis"]
    key = (slice(None),) * axis + (indices,) + (slice(None),) * (x.ndim - axis - 1)
    return xp.index_add(grad, key=key, shape=tuple(x.shape)), None


@public(_take)
def take(x, indices, /, *, axis=None):
    """Elements of ``x`` at the integer ``indices`` along ``axis`` (optional for 1-D ``x``): the standard's
    1-D indices, and NumPy's answer for a 0-d or N-D one on every backend."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    if axis is None:
        if x.ndim != 1:
            raise ValueError("take needs axis= for tensors of more than one dimension")
        axis = 0
    axis = int(axis)
    if not -x.ndim <= axis < x.ndim:
        raise IndexError(f"take: axis {axis} is out of bounds for a tensor of {x.ndim} dimensions")
    if not isinstance(indices, Tensor):
        indices = convert_to_tensor(indices, like=x)
    if not indices.dtype.is_integer:
        raise IndexError(f"take: indices must be integers, not {indices.dtype}")
    axis %= x.ndim
    if indices._v.__class__ is TraceArray and isinstance(x.shape[axis], int):
        # (inside gt.function: checked with the step, as an index tensor of x[...]; a compiled JAX take
        # would fill NaN silently)
        indices = wrap(_bounds_checked(indices._v, x.shape[axis], axis, indices._b, "take"), indices._b)
    return apply(_take, (x, indices), {"axis": axis})


def take_along_axis(x, indices, /, *, axis=-1):
    """Elements of ``x`` at ``indices`` matched along ``axis`` (differentiable)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    nd = x.ndim
    axis = axis % nd
    beside = x._b.device_beside(x._v)
    ind = indices._v if isinstance(indices, Tensor) else x._b.asarray(np.asarray(indices), device=beside)
    xp = x._b.xp
    if len(ind.shape) != nd:
        raise ValueError(
            f"take_along_axis: indices must have as many dimensions as x ({nd}), got shape {tuple(ind.shape)}"
        )
    key = []
    for d in range(nd):
        if d == axis:
            key.append(ind)
        else:  # x's own positions: they broadcast against the indices' other axes
            shape = [1] * nd
            shape[d] = x.shape[d]
            key.append(xp.reshape(xp.arange(x.shape[d], device=beside), tuple(shape)))
    return _getitem(x, tuple(key))


composite(
    "take_along_axis",
    take_along_axis,
    chapter="indexing",
    complex=True,
    domain=[Case(REAL[2, 3], np.array([[2, 0], [1, 1]]), axis=1), Case(REAL[3, 2], np.array([[0, 2, 2, 1]]).T, axis=0)],
)


# --------------------------------------------------------------------------- TensorFlow's *_nd
def _nd_indices(indices, who):
    """The integer ``indices`` of a TF ``*_nd`` function: a NumPy int64 array (:func:`_host_indices`),
    or inside ``gt.function`` the traced Tensor itself (its values are not known when the step is
    traced: :func:`_nd_key` checks them with the step)."""
    if isinstance(indices, Tensor) and indices._v.__class__ is TraceArray:
        if not indices.dtype.is_integer:
            raise TypeError(f"{who}: indices must be integers, not {indices.dtype}")
        return indices
    return _host_indices(indices, who)


def _host_indices(indices, who, what="indices"):
    """The integer ``indices`` of a TF indexing function as a NumPy int64 array (they are never
    differentiated; a Tensor's values are read, so that they can be checked against the shape on
    every backend, and a lazy backend indexes with host arrays anyway)."""
    if isinstance(indices, Tensor):
        if not indices.dtype.is_integer:
            raise TypeError(f"{who}: {what} must be integers, not {indices.dtype}")
        return indices.numpy().astype(np.int64)
    arr = np.asarray(indices)
    if arr.dtype.kind not in "iu" and arr.size:
        raise TypeError(f"{who}: {what} must be integers, not {arr.dtype}")
    return arr.astype(np.int64)


def _nd_key(idx, shape, who, batch_dims=0):
    """The key of NumPy's advanced indexing for TF's ``indices`` (last axis: a position in the first
    ``K`` axes of ``shape`` after ``batch_dims`` batch axes): one integer array per indexed axis, the
    batch axes' own positions first.  Positions outside ``shape`` raise an ``IndexError`` naming the
    first (TF's CPU kernels refuse them too; a negative one does not count from the end)."""
    if idx.ndim < 1:
        raise ValueError(f"{who}: indices must have at least one axis (the last holds positions), got a 0-d one")
    k = idx.shape[-1]
    if k == 0:
        raise ValueError(f"{who}: indices' last axis is empty (no position): give at least one index per row")
    if batch_dims + k > len(shape):
        raise ValueError(
            f"{who}: indices' last axis has {k} positions, but the tensor of shape {tuple(shape)} has "
            f"only {len(shape) - batch_dims} axes after its {batch_dims} batch axes"
        )
    cols = None
    if isinstance(idx, Tensor):  # (traced: each column checked with the step, negatives too, as TF)
        error = IndexError(f"{who}: an index does not index into shape {list(shape[batch_dims:])}")
        cols = []
        for j in range(k):
            col = idx[..., j]._v
            cols.append(_checked_index(col, (col < 0) | (col >= shape[batch_dims + j]), idx._b, error))
    else:
        bounds = np.asarray(shape[batch_dims : batch_dims + k], dtype=np.int64)
        bad = np.argwhere((idx < 0) | (idx >= bounds)) if idx.size else np.zeros((0, 1), dtype=np.int64)
        if len(bad):
            where = tuple(int(i) for i in bad[0][:-1])
            raise IndexError(
                f"{who}: indices{list(where)} = {idx[where].tolist()} does not index into shape "
                f"{list(shape[batch_dims:])}"
            )
    lead = idx.shape[:-1]
    key = []
    for d in range(batch_dims):
        grid = [1] * len(lead)
        grid[d] = shape[d]
        key.append(np.arange(shape[d], dtype=np.int64).reshape(grid))
    key += cols if cols is not None else [idx[..., j] for j in range(k)]
    return tuple(key)


def gather_nd(params, indices, batch_dims=0, name=None):
    """TensorFlow's ``tf.gather_nd``: ``out[i...] = params[indices[i...]]``, each row of ``indices``'
    last axis a position in ``params``' first axes (after ``batch_dims`` batch axes, which ``params``
    and ``indices`` share); the gradient is TF's, a scatter-add into zeros of ``params``' shape."""
    x = params if isinstance(params, Tensor) else convert_to_tensor(params)
    idx = _nd_indices(indices, "gather_nd")
    b = int(batch_dims)
    if b < 0 or b >= builtins.max(idx.ndim, 1) or tuple(idx.shape[:b]) != tuple(x.shape[:b]):
        raise ValueError(
            f"gather_nd: batch_dims={batch_dims} needs params and indices to share their first {b} axes "
            f"(and indices to have more): shapes {x.shape} and {tuple(idx.shape)}"
        )
    return _getitem(x, _nd_key(idx, x.shape, "gather_nd", b))


composite(
    "gather_nd",
    gather_nd,
    chapter="math",
    complex=True,
    domain=[
        Case(REAL[2, 3, 4], np.array([[0, 1], [1, 2], [0, 1]])),
        Case(REAL[2, 3, 4], np.array([[[0, 1, 2]], [[1, 0, 3]]])),
        Case(REAL[2, 3, 4], np.array([[1], [0]])),
        Case(REAL[2, 3, 4], np.array([[[1, 2]], [[0, 3]]]), batch_dims=1),
    ],
    doc="TensorFlow's tf.gather_nd: elements or slices at N-d positions (gradient: a scatter-add)",
)


def _scatter_nd_args(tensor, indices, updates, who):
    """``tensor`` as a Tensor, the key of ``indices`` and ``updates`` in the tensor's dtype, checked
    as TF checks them (``updates.shape == indices.shape[:-1] + tensor.shape[K:]``)."""
    x = tensor if isinstance(tensor, Tensor) else convert_to_tensor(tensor)
    idx = _nd_indices(indices, who)
    key = _nd_key(idx, x.shape, who)
    if not isinstance(updates, Tensor) or updates.dtype != x.dtype:
        updates = convert_to_tensor(updates, dtype=x.dtype, like=x)
    want = tuple(idx.shape[:-1]) + tuple(x.shape[idx.shape[-1] :])
    if tuple(updates.shape) != want:
        raise ValueError(
            f"{who}: updates must have shape indices.shape[:-1] + tensor.shape[K:] = {want} "
            f"(indices {tuple(idx.shape)}, tensor {x.shape}), got {updates.shape}"
        )
    return x, key, updates


def tensor_scatter_nd_update(tensor, indices, updates, name=None):
    """TensorFlow's ``tf.tensor_scatter_nd_update``: a new tensor equal to ``tensor`` with the
    ``updates`` written at ``indices`` (rows of positions, as ``gather_nd``'s).  Gradients: to
    ``tensor`` outside the positions written, to ``updates`` the gradient at their positions.  Where
    ``indices`` repeat a position, which update lands is left open (TF's too)."""
    x, key, updates = _scatter_nd_args(tensor, indices, updates, "tensor_scatter_nd_update")
    return apply(_setitem_op, (x, updates), {"key": _native_key(key, x._b, x.ndim, x._b.device_beside(x._v))})


def tensor_scatter_nd_add(tensor, indices, updates, name=None):
    """TensorFlow's ``tf.tensor_scatter_nd_add``: ``tensor`` plus the ``updates`` added at ``indices``,
    repeated positions accumulating; the gradients are the gradient itself (``tensor``) and the
    gradient at each update's position (``updates``)."""
    x, key, updates = _scatter_nd_args(tensor, indices, updates, "tensor_scatter_nd_add")
    return add(x, _index_add(updates, key, x.shape))


composite(
    "tensor_scatter_nd_update",
    tensor_scatter_nd_update,
    chapter="math",
    complex=True,
    domain=[
        Case(REAL[8], np.array([[4], [3], [1], [7]]), REAL[4]),
        Case(REAL[4, 3], np.array([[0], [2]]), REAL[2, 3]),
        Case(REAL[4, 3], np.array([[0, 1], [2, 2], [3, 0]]), REAL[3]),
    ],
    doc="TensorFlow's tf.tensor_scatter_nd_update: a copy with updates written at N-d positions",
)
composite(
    "tensor_scatter_nd_add",
    tensor_scatter_nd_add,
    chapter="math",
    complex=True,
    domain=[
        Case(REAL[8], np.array([[4], [3], [4], [7]]), REAL[4]),
        Case(REAL[4, 3], np.array([[0], [2], [0]]), REAL[3, 3]),
        Case(REAL[4, 3], np.array([[0, 1], [2, 2], [0, 1]]), REAL[3]),
    ],
    doc="TensorFlow's tf.tensor_scatter_nd_add: a copy with updates added at N-d positions",
)


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("getitem", _getitem_op)
batch_as("index_add", _index_add_op)
batch_as("setitem", _setitem_op)
batch_as("axis", _take)
batch_as("take_along_axis", "take_along_axis")
