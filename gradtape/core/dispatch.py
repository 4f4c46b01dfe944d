"""``apply(op, args, attrs)``: the one path every op call takes.

Unwrap the inputs, check they share one backend, run the forward on the backend's namespace, wrap
the outputs, and only if a tape is active hand the call to ``tape.record``.  The not-recording path
is a loop over the arguments, one dict lookup for the native function, and the call itself.
"""

from __future__ import annotations

from gradtape.core import config as _config
from gradtape.core import dtypes as _dt
from gradtape.core.engine import native_dtypes, record, record1
from gradtape.core.recording_state import _ACTIVE, _state, recording_context
from gradtape.core.registry import get_op
from gradtape.core.tensor import Tensor, Variable, _wrap, convert_to_tensor, lift

__all__ = ["apply", "apply1", "apply2"]

_SCALARS = (bool, int, float, complex)

#: backend -> its native floating and complex dtypes (as arrays carry them and as the library names them)
_FLOATS = {}


def _floats(b):
    s = _FLOATS[b] = native_dtypes(b, "fc")
    return s


def _to_float(v, b):
    """A bool / integer native array cast to the default float dtype (``gt.config.floatx()``), for the functions
    declared ``floating``: the same dtype on every backend (NumPy alone would pick float16 for bool
    and float64 for int64).  Not recorded: a bool or integer tensor carries no gradient."""
    if v.__class__ in _SCALARS or v.dtype in (_FLOATS.get(b) or _floats(b)):
        return v
    return b.xp.astype(v, b.dtype_to_native(_dt.floatx()))


def apply1(op, x, attrs=None):
    """Fast path of :func:`apply` for one input."""
    if x.__class__ is not Tensor:
        return apply(op, (x,), attrs)
    b = x._b
    impl = op.impls.get(b) or op.resolve(b)
    v = x._v
    if op.floating:
        v = _to_float(v, b)
    try:
        out = impl(v, **attrs) if attrs else impl(v)
    except Exception as e:
        _reraise(op, b, (x,), (v,), e)
    if out.__class__ is not b.array_type:
        out = b.fix_output(out)
    y = _wrap(out, b)
    if _ACTIVE[0] and op.differentiable:
        tapes = _state.tapes
        if tapes:
            if op.nout is None:
                record1(op, x._id, v, out, y._id, b, tapes, attrs)
            else:
                record(op, (x,), (v,), attrs, (y,))
    return y


def apply2(op, x1, x2, attrs=None):
    """Fast path of :func:`apply` for two inputs: Tensors or Variables of one backend and one dtype
    (anything else goes through :func:`apply`)."""
    c1 = x1.__class__
    c2 = x2.__class__
    if (c1 is Tensor or c1 is Variable) and (c2 is Tensor or c2 is Variable):
        b = x1._b
        v1 = x1._v
        v2 = x2._v
        if x2._b is b and v1.dtype is v2.dtype:
            impl = op.impls.get(b) or op.resolve(b)
            try:
                out = impl(v1, v2, **attrs) if attrs else impl(v1, v2)
            except Exception as e:
                _reraise(op, b, (x1, x2), (v1, v2), e)
            if out.__class__ is not b.array_type:
                out = b.fix_output(out)
            y = _wrap(out, b)
            if _ACTIVE[0] and op.differentiable and _state.tapes:
                record(op, (x1, x2), (v1, v2), attrs, (y,))
            return y
    return apply(op, (x1, x2), attrs)


def apply(op, args, attrs=None):
    """Run ``op`` on ``args`` (array inputs) with keyword attributes ``attrs``; record if taped."""
    b = None
    like = None
    for a in args:
        if isinstance(a, Tensor):
            if b is None:
                b, like = a._b, a
            elif a._b is not b:
                return apply(op, _lifted(op, args, like, a), attrs)
    if b is None:
        b = _config.get_backend()
    natives = [a._v if isinstance(a, Tensor) else _convert(a, b, op, like) for a in args]
    if op.promote and len(natives) > 1:
        promoted = _promote(op, b, args, natives)
        if promoted is not None:
            return apply(op, promoted, attrs)
    if op.floating:
        natives = [_to_float(v, b) for v in natives]
    impl = op.impls.get(b) or op.resolve(b)
    try:
        out = impl(*natives, **attrs) if attrs else impl(*natives)
    except Exception as e:
        _reraise(op, b, args, natives, e)
    at = b.array_type
    if op.nout is None:
        y = _wrap(out if out.__class__ is at else b.fix_output(out), b)
        outs = (y,)
    else:
        outs = tuple(_wrap(o if o.__class__ is at else b.fix_output(o), b) for o in out)
        y = outs
    if _ACTIVE[0] and op.differentiable and _state.tapes:
        record(op, args, natives, attrs, outs)
    return y


def _convert(a, b, op, like, passthrough=True):
    """A non-Tensor input: Python scalars take the dtype of the tensor beside them (or pass through
    untouched where the backend keeps the array's dtype), or across kinds the dtype of the array's
    precision (``_dt.scalar_dtype``: a complex beside float64 is complex128, never rounded to
    complex64); everything else is converted."""
    if isinstance(a, _SCALARS):
        if a.__class__ not in _SCALARS:  # NumPy's float64 / complex128: typed, as a 0-d array (NEP 50)
            return b.asarray(a, device=None if like is None else b.device_beside(like._v))
        if like is not None:
            d = like.dtype
            if a.__class__ is bool and d.kind != "b":
                a = int(a)  # True beside numbers is 1 (torch and array_api_strict refuse a bool there)
            if passthrough and op.scalars and b.python_scalars and _dt.scalar_fits(a, d):
                return a
            return b.asarray(a, dtype=_dt.scalar_dtype(a, d), device=b.device_beside(like._v))
        return convert_to_tensor(a, backend=b)._v
    if isinstance(a, (list, tuple)) or not b.is_native(a):
        if a is None:
            raise TypeError(f"op {op.name!r} got None where an array was expected")
        t = convert_to_tensor(a, like=like, backend=b if like is None else None)
        return t._v
    return a


def _promote(op, b, args, natives):
    """Inputs of different dtypes, cast (by a recorded ``astype``) to gradtape's result type, so
    every backend computes in the same dtype; None when they already agree."""
    dts = [None if v.__class__ in _SCALARS else b.dtype_of(v) for v in natives]
    present = [d for d in dts if d is not None]
    if len(set(present)) < 2:
        return None
    rt = _dt.result_type(*present)
    cast = get_op("astype")  # registered by the ops, above this module
    attrs = {"dtype": b.dtype_to_native(rt), "copy": True}
    return tuple(
        a if d is None or d is rt else apply1(cast, a if isinstance(a, Tensor) else _wrap(v, b), attrs)
        for a, v, d in zip(args, natives, dts)
    )


def _lifted(op, args, a, c):
    """``args`` with the Tensors of one backend taken in by the other (``Backend.capture``: a stand-in
    backend makes a value computed outside its recording context a constant of it); else the error."""
    for b in (a._b, c._b):
        out = tuple(lift(x, b) if isinstance(x, Tensor) and x._b is not b else x for x in args)
        if all(y is not None for x, y in zip(args, out) if isinstance(x, Tensor)):
            return out
    _mixed_backends(op, a, c)


def _mixed_backends(op, a, b):
    ctx = recording_context[0]
    if ctx is not None:  # the running recording context's own error, where a backend is its
        ctx.mixed_backends(a._b, b._b)
    raise ValueError(
        f"op {op.name!r} got tensors of two backends: {a._b.name!r} (device {a.device}) and "
        f"{b._b.name!r} (device {b.device}); move one with gt.asarray(x, backend=...) / .to_device, "
        "or convert through NumPy"
    )


def _reraise(op, b, args, natives, e):
    devices = []
    for a, v in zip(args, natives):
        if isinstance(a, Tensor):
            d = b.device_str(b.device_of(v))
            if d not in devices:
                devices.append(d)
    if len(devices) > 1:
        raise ValueError(
            f"op {op.name!r} on backend {b.name!r} got tensors on two devices: "
            f"{devices[0]!r} and {devices[1]!r}; move them to one device with "
            ".to_device()"
        ) from e
    if isinstance(e, (TypeError, ValueError, IndexError, NotImplementedError, RuntimeError)):
        msg = f"{e} (in op {op.name!r} on backend {b.name!r})"
        cls = type(e)
        if issubclass(cls, RuntimeError) and not issubclass(cls, (NotImplementedError, RecursionError)):
            # PyTorch reports invalid arguments (shapes, dtypes, singular matrices: its LinAlgError)
            # as RuntimeError; gradtape raises the same class on every backend, ValueError, as
            # TensorFlow's InvalidArgumentError is one
            cls = ValueError
        try:
            new = cls(msg)
        except Exception:
            raise e from None
        raise new.with_traceback(e.__traceback__) from None
    raise e
