"""Creation functions (Array API standard, chapter "Creation Functions").

Creation from shapes and scalars records nothing (no tensor input).  ``tril``/``triu`` are linear
and differentiable; ``*_like`` outputs do not depend on the input's values (not differentiable);
``to_device`` and ``asarray`` of a tensor pass the gradient through.
"""

from __future__ import annotations

import numpy as _np
from array_api_compat import device as _device

from gradtape.core import config as _config
from gradtape import backends as _bk
from gradtape.core import dtypes as _dt
from gradtape.core.domains import DEFAULT_DEVICE, REAL, Case, with_complex
from gradtape.core.recording_state import ACTIVE_TAPES
from gradtape.ops import apply1, batch_as, composite, defop, public
from gradtape.ops.elementwise import _identity, astype
from gradtape.ops.manipulation import _broadcast, reshape
from gradtape.core.tensor import Tensor, check_leak, wrap, convert_to_tensor

__all__ = [
    "arange",
    "asarray",
    "empty",
    "empty_like",
    "eye",
    "from_dlpack",
    "full",
    "full_like",
    "linspace",
    "meshgrid",
    "ones",
    "ones_like",
    "to_device",
    "tril",
    "triu",
    "zeros",
    "zeros_like",
]


def _backend_and_device(device, backend=None):
    if backend is not None:
        b = _bk.get(backend)
    elif getattr(device, "backend", None) is not None:  # a tensor's Device: its backend
        b = device.backend
    else:
        b = _config.get_backend()
    if device is None:
        cfg = _config.current()
        dev = cfg.device if cfg.backend is b and cfg.device is not None else b.unplaced_device()
    elif isinstance(device, str):
        dev = b.parse_device(device)
    else:
        dev = device
    return b, dev


#: the ``default=`` of :func:`_native_dtype` / :func:`_make` that means ``gt.config.floatx()`` (read at
#: each call: ``gt.config.set_floatx`` applies to every creation function)
FLOATX = float


def _native_dtype(b, dtype, default=FLOATX):
    """The native dtype for ``dtype``; ``default`` (a dtype, :data:`FLOATX`, ``complex`` for the default
    complex dtype, or None: the library's own) when ``dtype`` is None."""
    d = (None if default is None else _dt.as_dtype(default)) if dtype is None else _dt.as_dtype(dtype)
    return None if d is None else b.dtype_to_native(d)


def _shape(shape, who="a random draw"):
    if isinstance(shape, Tensor):
        shape = tuple(int(s) for s in shape.numpy().reshape(-1))
    elif isinstance(shape, _np.ndarray):  # (NumPy's and TF's creation functions take an array of sizes)
        shape = shape.reshape(-1).tolist()
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if any(isinstance(s, float) and s != s for s in dims):  # dask's size of a data-dependent axis
        raise ValueError(
            f"{who}: the shape {dims} has an axis of unknown size (NaN): the size of a lazy Dask result "
            "that depends on the data (unique_values', a boolean mask's); compute that tensor first "
            "(t.numpy(), or gt.compute(t)) to know its size"
        )
    return tuple(_size(s, who) for s in dims)


def _size(n, who, what="a size"):
    """``n`` as an int; a value with a fractional part (``2.5``) is a TypeError, as NumPy's, PyTorch's
    and JAX's (``int()`` truncated it: ``gt.zeros(2.5)`` had 2 elements, silently)."""
    try:
        i = int(n)
    except (TypeError, ValueError):
        raise TypeError(f"{who}: {what} must be an integer, got {n!r}") from None
    if i != n:
        raise TypeError(f"{who}: {what} must be an integer, got {n!r}, which has a fractional part")
    return i


def _make(fname, *args, dtype=None, device=None, default=FLOATX, backend=None, **kw):
    b, dev = _backend_and_device(device, backend)
    v = getattr(b.xp, fname)(*args, dtype=_native_dtype(b, dtype, default), device=dev, **kw)
    return wrap(v if v.__class__ is b.array_type else b.fix_output(v), b)


def zeros(shape, *, dtype=None, device=None):
    """A tensor of zeros (``gt.config.floatx()``, float32 by default, unless ``dtype`` says otherwise)."""
    return _make("zeros", _shape(shape, "zeros"), dtype=dtype, device=device)


def ones(shape, *, dtype=None, device=None):
    """A tensor of ones (``gt.config.floatx()``, float32 by default, unless ``dtype`` says otherwise)."""
    return _make("ones", _shape(shape, "ones"), dtype=dtype, device=device)


def empty(shape, *, dtype=None, device=None):
    """An uninitialised tensor (zeros on backends that have no empty)."""
    return _make("empty", _shape(shape, "empty"), dtype=dtype, device=device)


def _scalar_dtype(value):
    if isinstance(value, bool):
        return _dt.bool
    if isinstance(value, int):
        return _dt.int64
    if isinstance(value, complex):
        return _dt.default_complex()
    if isinstance(value, Tensor):
        return value.dtype
    return _dt.floatx()


def _python_scalar(value):
    """A one-element Tensor as the Python scalar of its kind (bool, int, float, complex); anything else
    as it is.  Creation functions take 0-d tensors where the standard takes scalars (SciPy passes
    them), and not every library's ``full``/``arange`` does (torch's takes Numbers only)."""
    if not isinstance(value, Tensor):
        return value
    d = value.dtype
    return value._scalar(complex if d.is_complex else bool if d.is_bool else int if d.is_integer else float)


def full(shape, fill_value, *, dtype=None, device=None):
    """A tensor filled with ``fill_value`` (dtype from the value: float32, int64, bool, complex64;
    float64 and complex128 under ``gt.config.set_floatx("float64")``)."""
    if isinstance(fill_value, Tensor):
        fill_value = _python_scalar(fill_value)
    dtype = dtype if dtype is not None else _scalar_dtype(fill_value)
    _check_fill(fill_value, dtype, "full")
    return _make("full", _shape(shape, "full"), fill_value, dtype=dtype, device=device)


def _check_fill(value, dtype, who):
    """NumPy's ``OverflowError`` for a Python int fill value beyond an integer ``dtype`` (PyTorch and
    JAX would wrap it around)."""
    if value.__class__ is int:
        d = _dt.as_dtype(dtype)
        if d.kind in "iu":
            _dt.check_python_int(value, d.name, who)


def _like(fname, x, *args, dtype=None, device=None):
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    b = x._b
    nd = x._v.dtype if dtype is None else b.dtype_to_native(dtype)
    # x's device; None where x was never placed (JAX's uncommitted arrays): the new array is then as free as x,
    # not pinned to the default device (pinning made a committed twin of every array a rule computes from it,
    # and JAX compiles each program again for committed arguments)
    dev = b.device_beside(x._v) if device is None else (b.parse_device(device) if isinstance(device, str) else device)
    v = getattr(b.xp, fname)(tuple(x._v.shape), *args, dtype=nd, device=dev)
    return wrap(v if v.__class__ is b.array_type else b.fix_output(v), b)


def zeros_like(x, /, *, dtype=None, device=None):
    """Zeros of ``x``'s shape, dtype, backend and device (not differentiable)."""
    return _like("zeros", x, dtype=dtype, device=device)


def ones_like(x, /, *, dtype=None, device=None):
    """Ones of ``x``'s shape, dtype, backend and device (not differentiable)."""
    return _like("ones", x, dtype=dtype, device=device)


def empty_like(x, /, *, dtype=None, device=None):
    """An uninitialised tensor of ``x``'s shape (and its dtype and device unless given), as the standard's
    ``empty_like``."""
    return _like("empty", x, dtype=dtype, device=device)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    """``fill_value`` (a scalar or a one-element tensor) in ``x``'s shape, dtype, backend and device (not
    differentiable)."""
    fill_value = _python_scalar(fill_value)
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    _check_fill(fill_value, x.dtype if dtype is None else dtype, "full_like")
    return _like("full", x, fill_value, dtype=dtype, device=device)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """A 2-D tensor with ones on the ``k``-th diagonal."""
    rows, cols = _size(n_rows, "eye", "n_rows"), None if n_cols is None else _size(n_cols, "eye", "n_cols")
    return _make("eye", rows, cols, k=_size(k, "eye", "k"), dtype=dtype, device=device)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """Evenly spaced values in ``[start, stop)`` (int64 for integer arguments, else ``gt.config.floatx()``;
    a 0-d tensor argument counts as the Python scalar of its kind, as NumPy reads it)."""
    start, stop, step = (_python_scalar(v) for v in (start, stop, step))
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, stop, step) if v is not None)
    return _make("arange", start, stop, step, dtype=dtype, device=device, default=_dt.int64 if ints else FLOATX)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """``num`` evenly spaced values from ``start`` to ``stop`` (``gt.config.floatx()`` unless told;
    complex ends: the default complex dtype)."""
    if isinstance(start, Tensor):
        start = float(start)
    if isinstance(stop, Tensor):
        stop = float(stop)
    default = complex if isinstance(start, complex) or isinstance(stop, complex) else FLOATX
    if dtype is not None and _dt.as_dtype(dtype).is_integer:
        # NumPy's values (float64 steps, floored) on every backend: the libraries' own integer linspace
        # differ (torch truncates towards zero and has no uint16/32/64 kernel, JAX steps in float32)
        values = _np.linspace(
            start, stop, _size(num, "linspace", "num"), endpoint=endpoint, dtype=_dt.as_dtype(dtype).name
        )
        return asarray(values, dtype=dtype, device=device)
    return _make(
        "linspace",
        start,
        stop,
        _size(num, "linspace", "num"),
        dtype=dtype,
        device=device,
        default=default,
        endpoint=endpoint,
    )


def asarray(obj, /, *, dtype=None, device=None, copy=None, backend=None, chunks=None):
    """A tensor from ``obj``.  A Tensor passes through, or is cast, moved or copied by recorded ops, so
    the tape connects the result to ``obj`` (a defensive ``asarray(x, copy=True)`` keeps the
    gradient); ``backend=`` converts to another backend (outside the tape: that warns
    ``GradientLeakWarning`` while a tape records ``obj``).  ``chunks=`` (dask) splits the result in
    chunks, as ``dask.array.from_array``: a new tensor, not connected to a Tensor ``obj`` on a tape."""
    if chunks is not None:
        t = asarray(obj, dtype=dtype, device=device, copy=copy, backend=backend)
        if ACTIVE_TAPES[0]:
            check_leak(t, "asarray(chunks=...)")
        return wrap(t._b.rechunk(t._v, chunks), t._b)
    if isinstance(obj, Tensor):
        if backend is not None:
            target = _bk.get(backend)
            if target is not obj._b:
                return convert_to_tensor(obj.numpy(), dtype=dtype, device=device, backend=target)
        t = convert_to_tensor(obj, dtype=dtype, device=device)
        if copy is False and t._v is not obj._v:
            raise ValueError(
                f"asarray(copy=False): converting a {obj.dtype} tensor on {obj.device} to dtype "
                f"{t.dtype} on {t.device} needs a copy; pass copy=None to allow one"
            )
        if copy and t._v is obj._v:
            t = astype(t, t.dtype, copy=True)  # a recorded copy: the gradient flows through
        return t
    return convert_to_tensor(obj, dtype=dtype, device=device, backend=backend)


def from_dlpack(x, /, *, device=None, copy=None):
    """A tensor on the active backend (or ``device``'s) sharing memory with a DLPack-capable array.
    A gradtape tensor of that backend and device gives a recorded view of itself (a recorded copy
    with ``copy=True``), so the tape connects the two; across backends the tape cannot follow (that
    warns ``GradientLeakWarning`` while a tape records ``x``)."""
    b, dev = _backend_and_device(device)
    if isinstance(x, Tensor):
        if b is x._b and (device is None or b.device_str(b.device_of(x._v)) == b.device_str(dev)):
            return astype(x, x.dtype, copy=True) if copy else _identity(x)
        if ACTIVE_TAPES[0]:
            check_leak(x, f"from_dlpack to backend {b.name!r}")
        x = x._v
    v = b.from_dlpack(x, dev if device is not None else None)
    return wrap(v if v.__class__ is b.array_type else b.fix_output(v), b)


# --------------------------------------------------------------------------- differentiable
# (linear and acting on the last two axes: the rules read nothing and take leading batch axes)
_tril = defop(
    "tril",
    lambda xp, x, *, k=0: xp.tril(x, k=k),
    chapter="creation",
    saves=(),
    batched=True,
    domain=with_complex([Case(REAL[3, 3]), Case(REAL[2, 3, 4], k=1), Case(REAL[4, 3], k=-1)]),
)
_tril.gradient(lambda xp, op, grad: xp.tril(grad, k=op.attrs["k"]))
_triu = defop(
    "triu",
    lambda xp, x, *, k=0: xp.triu(x, k=k),
    chapter="creation",
    saves=(),
    batched=True,
    domain=with_complex([Case(REAL[3, 3]), Case(REAL[2, 3, 4], k=1), Case(REAL[4, 3], k=-1)]),
)
_triu.gradient(lambda xp, op, grad: xp.triu(grad, k=op.attrs["k"]))


@public(_tril)
def tril(x, /, *, k=0):
    """The lower triangle of (each matrix of) ``x``; the gradient is the lower triangle of grad."""
    return apply1(_tril, x, {"k": int(k)})


@public(_triu)
def triu(x, /, *, k=0):
    """The upper triangle of (each matrix of) ``x``; the gradient is the upper triangle of grad."""
    return apply1(_triu, x, {"k": int(k)})


def _to_device_forward(backend, x, device, *, stream=None):
    return backend.to_device(x, device)


# xp_callable: rules call ``xp.to_device(x, device)`` (a native device on native arrays, a
# backend-neutral name on Tensors)
_to_device = defop(
    "to_device",
    _to_device_forward,
    forward_takes="backend",
    chapter="creation",
    xp_callable=True,
    batched=True,
    domain=with_complex([Case(REAL[3], DEFAULT_DEVICE)]),
)


@_to_device.gradient
def _to_device_grad(xp, op, grad):
    """The gradient goes back to the input's device."""
    return xp.to_device(grad, _device(op.inputs[0]))


@public(_to_device)
def to_device(x, device, /, *, stream=None):
    """``x`` on ``device`` (a backend-neutral string or a native device); differentiable."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    b = x._b
    dev = b.parse_device(device) if isinstance(device, str) else device
    if b.device_str(b.device_of(x._v)) == b.device_str(dev):
        return x
    return apply1(_to_device, x, {"device": dev})


def meshgrid(*arrays, indexing="xy"):
    """Coordinate grids from 1-D tensors (composed of reshape and broadcast_to, so differentiable)."""
    if len(arrays) == 1 and isinstance(arrays[0], (list, tuple)):
        arrays = tuple(arrays[0])
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', not {indexing!r}")
    n = len(arrays)
    sizes = [a.shape[0] if isinstance(a, Tensor) else len(a) for a in arrays]
    if indexing == "xy" and n >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, a in enumerate(arrays):
        pos = i
        if indexing == "xy" and n >= 2 and i < 2:
            pos = 1 - i
        shape = [1] * n
        shape[pos] = -1
        out.append(_broadcast(reshape(a, tuple(shape)), tuple(sizes)))
    return tuple(out)


composite(
    "meshgrid",
    meshgrid,
    chapter="creation",
    complex=True,
    domain=[Case(REAL[3], REAL[2]), Case(REAL[3], REAL[2], REAL[2], indexing="ij")],
)


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("leading", _tril, _triu, _to_device)
batch_as("meshgrid", "meshgrid")
