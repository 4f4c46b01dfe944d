"""The Dask backend: every op records lazily, on one machine or a ``dask.distributed`` cluster.

``dask.array`` through ``array_api_compat.dask.array``.  A Tensor on this backend holds a dask array:
forward values and gradients are task graphs, and nothing is computed until the user asks
(``Tensor.compute()``, ``gt.compute(*tensors)`` -- several results in one pass, so the intermediates
they share are computed once --, ``.numpy()``, ``float(t)``, printing).  The tape itself records the
same nodes as on any backend; what it keeps are graphs, not values.

Chunks are the user's: a dask array passed in keeps its chunks, ``gt.asarray(x, chunks=...)`` sets
them, and arrays gradtape makes from host values get dask's ``"auto"`` chunks.  Gradients come back
with the chunks of their sources (the engine's broadcasting and dtype fixes keep them; where an op's
rule changes them the gradient is rechunked to its source's chunks at the end of the walk).

What the standard lacks is built from dask's own lazy operations where dask has them (``setitem`` by
dask's ``__setitem__`` for the keys it takes, ``erf`` by ``map_blocks``), and otherwise as one task
over the whole array (``index_add``'s scatter-add with integer-array keys, ``setitem`` with keys dask
refuses): still lazy and exact, but that one step is not chunked, so the array must fit in one
worker's memory (docs/scaling.md).

What dask cannot do raises ``DataDependentShapeError`` (a ``NotImplementedError``) naming the op
and the dask limitation: a shape that depends on the data.  Indexing with a boolean mask computed
lazily, and ``repeat`` by an array of counts, raise when they run (a NumPy mask works: its values size
the result).  ``nonzero`` and ``unique_*`` run, their results sized NaN (dask's unknown chunks), and
indexing or linear algebra on them then raises the same error, naming them.
"""

from __future__ import annotations

import math
import types

import numpy as np

from gradtape.core import dtypes as _dt

from gradtape.backends._indexing import advanced_first, check_in_bounds, integer_arrays, plain_slices
from gradtape.backends._values import check_new_int, with_conventions
from gradtape.core.backend import Backend, DataDependentShapeError


#: linalg functions dask computes chunked itself, at any number of dimensions
_DASK_LINALG = ("matmul", "matrix_transpose", "tensordot", "vecdot", "vector_norm", "outer")
#: dask's own, for 2-D inputs only (tall-and-skinny QR and SVD: the ones that scale); other calls, and
#: every other linalg function, are one task over NumPy's (dask's are 2-D only, several are missing, and
#: dask's cholesky returns the upper factor where the standard asks for the lower)
_DASK_LINALG_2D = {"qr": {"mode": ("reduced",)}, "svd": {"full_matrices": (False,)}}


#: fft functions that take no array to transform
_FFT_NO_ARRAY = ("fftfreq", "rfftfreq", "fftshift", "ifftshift")


def _known(size):
    """Whether an axis size is known (dask's unknown sizes are NaN)."""
    return size == size


def _whole_axes(fn, name):
    """``fn`` (dask's fft) with the transformed axes in one chunk each, as dask requires."""

    def f(x, /, *args, **kwargs):
        axes = kwargs.get("axes")
        if axes is None and "axis" in kwargs:
            axes = (kwargs["axis"],)
        if axes is None:
            axes = tuple(range(x.ndim)) if name.endswith(("fftn", "fft2")) else (-1,)
        x = x.rechunk({a % x.ndim: -1 for a in axes})
        return fn(x, *args, **kwargs)

    f.__name__ = name
    return f


def _probe(a):
    """A small stand-in for ``a`` (batch axes of length 1, identity matrices) giving the structure and
    core shapes of a linalg function's output without computing on ``a``."""
    if a.ndim < 2:
        return np.ones(a.shape, dtype=a.dtype)
    m, n = a.shape[-2:]
    return np.broadcast_to(np.eye(m, n, dtype=a.dtype), (1,) * (a.ndim - 2) + (m, n)).copy()


def _batch_shape(args):
    shapes = [a.shape[:-2] for a in args if hasattr(a, "ndim") and a.ndim >= 2]
    return np.broadcast_shapes(*shapes) if shapes else ()


def _part(res, i):
    return res[i]


def _reciprocal(x, /):
    """``1 / x``, floating for integer input (float32), as the standard and gradtape's other backends."""
    if x.dtype.kind in "biu":
        x = x.astype(np.float32)
    return 1.0 / x


def _np_index_add(shape, dtype, values, *key):
    out = np.zeros(shape, dtype=dtype)
    np.add.at(out, key, values)
    return out


def _in_bounds(block, size, axis, op):
    """A block of an index array, checked against the axis of ``size`` it indexes when it is computed
    (the values of a lazy index are known only then; dask would read past the end silently)."""
    check_in_bounds(block, size, axis, f" (in op {op!r} on backend 'dask', found when the result was computed)")
    return block


def _np_setitem(x, value, *key):
    out = np.array(x, copy=True)
    out[key] = value
    return out


def _array_axes(k):
    """How many axes an index array consumes: a mask its rank, integers one."""
    return k.ndim if k.dtype == bool else 1


def _has_unknown(shape):
    return any(isinstance(s, float) and math.isnan(s) for s in shape)


class DaskBackend(Backend):
    name = "dask"
    install_hint = 'python3 -m pip install "dask[array]" distributed'
    python_scalars = True
    lazy = True
    chunked = True
    lays_out = True
    host_index_arrays = True

    def __init__(self):
        super().__init__()
        self.overrides = {
            "getitem": self._getitem,
            "take": self._take,
            "reciprocal": _reciprocal,
            "einsum": self._einsum,
        }

    def op_impl(self, opdef):
        # lazy values are not read: a cast saturates without the warning; integer division by zero is
        # NumPy's (0 and its warning, when the blocks are computed), as is a negative integer power (an
        # array's when computed; a Python int's at once, where dask would raise a TypeError)
        return with_conventions(self, opdef.name, super().op_impl(opdef), None, division=False, power=True)

    def load(self):
        import array_api_compat.dask.array as compat
        import array_api_compat.numpy as np_xp
        import dask
        import dask.array as da

        self._dask = dask
        self._da = da
        self._np_xp = np_xp
        self.array_type = da.Array
        return self._namespace(compat)

    def _namespace(self, compat):
        """``array_api_compat.dask.array`` with what dask lacks or gets wrong filled in (see the module
        docstring): ``linalg`` beyond matmul, ``eye`` with an offset, ``take_along_axis``, ``repeat``
        with an array of counts."""
        ns = types.ModuleType("gradtape.backends.dask.xp", "array_api_compat.dask.array, completed for gradtape")
        ns.__dict__.update({k: v for k, v in vars(compat).items() if not k.startswith("__")})
        linalg = types.ModuleType("gradtape.backends.dask.xp.linalg")
        for name in dir(self._np_xp.linalg):
            if name.startswith("_") or not callable(getattr(self._np_xp.linalg, name)):
                continue
            if name in _DASK_LINALG and hasattr(compat.linalg, name):
                setattr(linalg, name, getattr(compat.linalg, name))
            else:
                setattr(linalg, name, self._linalg(name, getattr(compat.linalg, name, None)))
        ns.linalg = linalg
        da, np_xp = self._da, self._np_xp

        def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
            # dask's eye with an offset on a non-square shape builds a broken graph (missing keys)
            if device is not None:
                self.parse_device(device)
            return da.from_array(np_xp.eye(n_rows, n_cols, k=k, dtype=dtype), chunks="auto")

        def take_along_axis(x, indices, /, *, axis=-1):
            shape = np.broadcast_shapes(
                tuple(1 if d == axis % x.ndim else s for d, s in enumerate(x.shape)), indices.shape
            )
            return self._whole(lambda a, i: np.take_along_axis(a, i, axis=axis), shape, x.dtype, x, indices)

        def repeat(x, repeats, /, *, axis=None):
            if not isinstance(repeats, da.Array):
                return compat.repeat(x, repeats, axis=axis)
            # dask repeats by one integer only: an array of counts sizes the result by its values
            raise DataDependentShapeError(
                "repeat on the dask backend: dask repeats by one integer count only; with an array of "
                "counts the result's length depends on the data, which dask cannot size. Repeat by one "
                "integer, or compute on another backend"
            )

        def searchsorted(x1, x2, /, *, side="left", sorter=None):
            # dask's takes no sorter and fails on a 0-d x2: the sorted 1-D x1 is read whole
            shape = getattr(x2, "shape", ())
            return self._whole(
                lambda a, v, s: np.searchsorted(a, v, side=side, sorter=s), shape, np.int64, x1, x2, sorter
            )

        def matmul(x1, x2, /):
            # dask reports contracted axes of two sizes as "Chunks do not add up to shape"
            if x1.ndim and x2.ndim:
                k1, k2 = x1.shape[-1], x2.shape[0 if x2.ndim == 1 else -2]
                if _known(k1) and _known(k2) and k1 != k2:
                    which = "first" if x2.ndim == 1 else "second-to-last"
                    raise ValueError(
                        f"matmul: shapes {tuple(x1.shape)} and {tuple(x2.shape)} do not match: the last axis "
                        f"of x1 has size {k1}, the {which} axis of x2 size {k2}"
                    )
            return compat.matmul(x1, x2)

        def concat(arrays, /, *, axis=0):
            # dask's own message for other sizes is an unformatted tuple ('Shapes do not align: %s', ...)
            arrays = tuple(arrays)
            if axis is not None and arrays and arrays[0].ndim:
                first = arrays[0]
                ax = int(axis) % first.ndim
                for a in arrays[1:]:
                    if a.ndim == first.ndim and any(
                        _known(s) and _known(t) and s != t
                        for i, (s, t) in enumerate(zip(first.shape, a.shape))
                        if i != ax
                    ):
                        raise ValueError(
                            f"concat: the tensors' shapes {[tuple(b.shape) for b in arrays]} must match except "
                            f"along the concatenation axis {axis}"
                        )
            return compat.concat(arrays, axis=axis)

        ns.eye, ns.take_along_axis, ns.repeat, ns.searchsorted = eye, take_along_axis, repeat, searchsorted
        ns.matmul, ns.concat = matmul, concat
        fft = types.ModuleType("gradtape.backends.dask.xp.fft")
        for name in dir(compat.fft):
            fn = getattr(compat.fft, name)
            if not name.startswith("_") and callable(fn):
                setattr(fft, name, _whole_axes(fn, name) if name not in _FFT_NO_ARRAY else fn)
        ns.fft = fft
        for name in ("unique_all", "unique_counts", "unique_inverse", "unique_values"):
            setattr(ns, name, self._unique(name))
        return ns

    def _unique(self, name):
        """``unique_*`` as NumPy's, in one lazy task over the whole array: each NaN is distinct, as the
        standard (and NumPy through array_api_compat) says, where dask's ``unique`` merges the NaNs.
        The values' length is unknown until computed (NaN, dask's unknown size); the inverse indices
        have ``x``'s shape."""
        host = getattr(self._np_xp, name)
        da, delayed = self._da, self._dask.delayed

        def fn(x, /):
            task = delayed(host, pure=True)(x)
            if name == "unique_values":
                return da.from_delayed(task, shape=(math.nan,), dtype=x.dtype)
            fields = host(np.zeros((1,), x.dtype))._fields  # (the names of the result's fields)
            shapes = {"values": (math.nan,), "inverse_indices": x.shape}
            parts = [
                da.from_delayed(
                    delayed(_part, pure=True)(task, i),
                    shape=shapes.get(f, (math.nan,)),
                    dtype=x.dtype if f == "values" else np.int64,
                )
                for i, f in enumerate(fields)
            ]
            return tuple(parts)

        fn.__name__ = name
        return fn

    def _linalg(self, name, native):
        """``linalg.<name>``: dask's own for the 2-D calls it does right (see ``_DASK_LINALG_2D``), else
        NumPy's as one lazy task over the whole arrays (shapes from a small probe)."""
        host = getattr(self._np_xp.linalg, name)
        allowed = _DASK_LINALG_2D.get(name)
        da, delayed = self._da, self._dask.delayed

        def fn(*args, **kwargs):
            arrays = [a for a in args if isinstance(a, da.Array)]
            if (
                native is not None
                and allowed is not None
                and all(a.ndim == 2 for a in arrays)
                and all(kwargs.get(k, v[0]) in v for k, v in allowed.items())
            ):
                return native(*args, **kwargs)
            self._known(f"linalg.{name}", *arrays, *[v for v in kwargs.values() if isinstance(v, da.Array)])
            task = delayed(host, pure=True)(*args, **kwargs)
            if name == "cross":  # vectors along ``axis``, every other axis broadcast: the arguments' shape
                shape = np.broadcast_shapes(*(a.shape for a in arrays))
                dtype = host(*[np.ones(3, a.dtype) for a in arrays]).dtype
                return da.from_delayed(task, shape=shape, dtype=dtype)
            # an array keyword (``rtol``, ``tol``) is a batch of scalars: it broadcasts against the
            # matrices' batch axes, so its probe is all ones and its shape joins the batch shape
            probe_kw = {k: np.ones((1,) * v.ndim, v.dtype) if isinstance(v, da.Array) else v for k, v in kwargs.items()}
            res = host(*[_probe(a) if isinstance(a, da.Array) else a for a in args], **probe_kw)
            batch = np.broadcast_shapes(
                _batch_shape(arrays), *(v.shape for v in kwargs.values() if isinstance(v, da.Array))
            )

            def lazy(probe, part):
                p = np.asarray(probe)
                shape = tuple(batch) + p.shape[len(batch) :] if p.ndim >= len(batch) and batch else p.shape
                return da.from_delayed(part, shape=shape, dtype=p.dtype)

            if isinstance(res, tuple):
                parts = [lazy(r, delayed(_part, pure=True)(task, i)) for i, r in enumerate(res)]
                return type(res)(*parts) if hasattr(res, "_fields") else tuple(parts)
            return lazy(res, task)

        fn.__name__ = name
        return fn

    def _extra_dtype_aliases(self):
        # dask arrays report NumPy dtypes; the namespace's dtypes are NumPy's scalar types
        for d in _dt.ALL_DTYPES:
            nd = np.dtype(d.name)
            self._to_native[d] = nd
            self._from_native[nd] = d

    # ------------------------------------------------------------------ conversion
    def _new_array(self, value, native_dtype, device):
        if device not in (None, "cpu"):
            self.parse_device(device)
        check_new_int(self, value, native_dtype)  # (NumPy's words for the int64 default lack the dtype)
        return self._da.asarray(np.asarray(value, dtype=native_dtype))

    def _cast_and_move(self, x, native_dtype, device):
        if native_dtype is not None and x.dtype != native_dtype:
            x = x.astype(native_dtype)
        return x

    def parse_device(self, device):
        if device is not None and not isinstance(device, str) and str(device) == "DASK_DEVICE":
            return "cpu"
        return super().parse_device(device)

    def to_numpy(self, x):
        return self.compute([x])[0]

    def fix_output(self, out):
        return out if isinstance(out, self._da.Array) else self._da.asarray(out)

    def from_dlpack(self, obj, device=None):
        """A dask array over the host buffer (dask arrays have none to export: they are graphs)."""
        if device is not None:
            self.parse_device(device)
        if self.is_native(obj):
            return obj
        try:
            host = np.from_dlpack(obj)
        except (TypeError, ValueError, RuntimeError, BufferError, AttributeError):
            host = np.asarray(obj)
        return self._da.asarray(host)

    def compute(self, xs):
        try:
            return [np.asarray(v) for v in self._dask.compute(*xs)]
        except RecursionError:
            raise RecursionError(
                "dask backend: the task graph behind this tensor is too deep for dask to compute (a training "
                "loop's variables grow their graph by one step at each update). Persist them after each step: "
                "`w_now, loss = gt.persist(w, loss); w.assign(w_now)` (docs/scaling.md, training loops)"
            ) from None

    def persist(self, xs):
        return list(self._dask.persist(*xs))

    def match_layout(self, g, source, layout=None):
        """The gradient in its input's chunks (``source``: the input, or the engine's record of its shape,
        dtype and chunks).  A rule may have made others: a reduction's gradient is one broadcast chunk as
        long as the whole input, and the next rule's dense op would make it one task that large; split
        here, it stays views, one per chunk."""
        chunks = getattr(source, "chunks", None)
        if (
            chunks is not None
            and g.__class__ is self.array_type
            and g.chunks != chunks
            and g.shape == tuple(source.shape)
            and not _has_unknown(g.shape)
        ):
            g = g.rechunk(chunks)
        return g

    def rechunk(self, x, chunks):
        return x.rechunk(chunks)

    # ------------------------------------------------------------------ what the standard lacks
    def _known(self, op, *arrays):
        for a in arrays:
            if isinstance(a, self._da.Array) and _has_unknown(a.shape):
                raise DataDependentShapeError(
                    f"{op} on the dask backend: an input has unknown chunk sizes (shape {a.shape}), left by "
                    "an op whose output shape depends on the data (a boolean mask, nonzero, unique); dask "
                    "cannot index or scatter into it. Call `.compute_chunk_sizes()` on the dask array "
                    "(`gt.asarray(t.native.compute_chunk_sizes())`) or avoid data-dependent shapes"
                )

    def _whole(self, fn, shape, dtype, *args):
        """``fn(*args)`` as one lazy task over whole arrays (what dask has no chunked form of)."""
        d = self._dask.delayed(fn, pure=True)(*args)
        return self._da.from_delayed(d, shape=tuple(shape), dtype=dtype)

    @staticmethod
    def _basic(key):
        return all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in key)

    def _is_index_array(self, k):
        return isinstance(k, (np.ndarray, self._da.Array))

    def _take(self, x, indices, *, axis):
        self._known("take", indices)  # (indices from nonzero, say: their count is the data's)
        shape = tuple(x.shape[:axis]) + tuple(indices.shape) + tuple(x.shape[axis + 1 :])
        if indices.ndim > 1:  # (dask takes 0-d and 1-d lazy indices: others taken flat, then shaped)
            indices = indices.reshape(-1)
        (indices,) = self._checked_key((x.shape[axis],), (indices,), "take")
        taken = self._da.take(x, indices, axis=axis)
        return taken if taken.shape == shape else taken.reshape(shape)

    def _checked_key(self, shape, key, op):
        """``key`` with each lazy integer index array checked against its axis when computed."""
        da = self._da
        lazy = integer_arrays(shape, key, lambda k: isinstance(k, da.Array))
        if not lazy:
            return key
        checked = {
            id(k): k.map_blocks(_in_bounds, size=shape[axis], axis=axis, op=op, dtype=k.dtype) for k, axis in lazy
        }
        return tuple(checked.get(id(k), k) for k in key)

    def _dask_indexes(self, key):
        """Whether dask indexes ``key`` as NumPy does: basic entries, with at most one 1-D array and
        no ``None`` beside it (dask misreads 0-d and n-d integer arrays, n-d masks, ``None`` beside
        an array, Python bools; those keys run as one NumPy task)."""
        if any(k.__class__ is bool for k in key):
            return False
        arrays = [k for k in key if self._is_index_array(k)]
        if not arrays:
            return True
        return len(arrays) == 1 and arrays[0].ndim == 1 and not any(k is None for k in key)

    def _einsum(self, *arrays, subscripts):
        """The op ``einsum`` by dask's einsum, in its operands' (promoted) dtype: dask sums integers in
        int64, NumPy keeps their dtype."""
        out = self._da.einsum(subscripts, *arrays)
        return out if out.dtype == arrays[0].dtype else out.astype(arrays[0].dtype)

    def _getitem(self, x, *, key):
        """``x[key]`` by dask where it takes the key; integer arrays in several axes (which dask refuses)
        as one task over the whole array, its shape from the key's shapes."""
        keys = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, self._da.Array) and k.dtype == bool for k in keys):
            raise DataDependentShapeError(
                "getitem on the dask backend: indexing with a lazy boolean mask gives a result whose shape "
                "depends on the data, which dask cannot size (unknown chunks) and later ops refuse. Compute "
                "the mask first (`x[mask.numpy()]`: a NumPy mask keeps the shape known), or keep the shape "
                "with `gt.where(mask, x, 0.0)`"
            )
        moved = advanced_first(keys, x.ndim, self._is_index_array, _array_axes)
        if moved is not None:  # NumPy's placement of advanced-index dimensions (gradtape/backends/_indexing.py)
            perm, keys = moved
            x = x.transpose(perm)
        keys = self._checked_key(x.shape, keys, "getitem")
        if not _has_unknown(x.shape):
            keys = plain_slices(keys, x.shape, _array_axes)
        if self._dask_indexes(keys):
            try:
                out = x[keys]
                if not _has_unknown(out.shape):
                    return out
            except (NotImplementedError, IndexError):
                # dask refuses some keys: the probe below raises NumPy's IndexError where the key is
                # really out of bounds
                pass
        # one task over the whole array, its shape from the key (host masks are known; native integer
        # arrays count by their shapes)
        self._known("getitem", x, *keys)
        probe = tuple(np.zeros(k.shape, dtype=np.intp) if isinstance(k, self._da.Array) else k for k in keys)
        shape = np.broadcast_to(np.zeros((), dtype=x.dtype), x.shape)[probe].shape
        return self._whole(lambda a, *k: a[k], shape, x.dtype, x, *keys)

    def index_add(self, shape, dtype, key, values):
        da = self._da
        nd = self.dtype_to_native(dtype)
        key = key if isinstance(key, tuple) else (key,)
        if (
            self._basic(key) and None not in key and not _has_unknown(getattr(values, "shape", ()))
        ):  # no repeated positions: a lazy assignment into zeros
            out = da.zeros(tuple(shape), dtype=nd)
            try:
                out[plain_slices(key, shape, _array_axes)] = values
                return out
            except (ValueError, NotImplementedError, IndexError, TypeError):
                pass
        values = values.astype(nd) if isinstance(values, da.Array) and values.dtype != nd else values
        return self._whole(_np_index_add, shape, nd, tuple(shape), nd, values, *key)

    def setitem(self, x, key, value):
        key = self._checked_key(x.shape, key if isinstance(key, tuple) else (key,), "setitem")
        self._known("setitem", x, value, *key)
        if isinstance(value, self._da.Array) and value.dtype != x.dtype:
            value = value.astype(x.dtype)
        if self._basic(key) and None not in key:
            out = x.copy()
            try:
                out[plain_slices(key, x.shape, _array_axes)] = value
                return out
            except (ValueError, NotImplementedError, IndexError, TypeError):
                pass
        return self._whole(_np_setitem, x.shape, x.dtype, x, value, *key).rechunk(x.chunks)

    def erf(self, x):
        from scipy.special import erf

        return x.map_blocks(erf, dtype=x.dtype)
