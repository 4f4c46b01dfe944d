"""Random numbers (beyond the standard): drawn with NumPy's PCG64 in float64 on the host, cast there,
then handed to the active backend with ``Backend.random_from_numpy`` -- so one seed gives the same
numbers on every backend and device.  Nothing here is recorded on a tape (random tensors have no
tensor inputs).

:class:`Stream` is one seeded NumPy generator with the distributions gradtape offers; the public
``gt.random`` module (``gradtape/random.py``) builds seeds, the global generator and
``tf.random.Generator`` on top of it.
"""

from __future__ import annotations

import threading

import numpy as np

from gradtape.core import dtypes as _dt
from gradtape.backends.batching import batched_random, draw_layout, innermost_map, shared_draw
from gradtape.backends.tracing import host_then
from gradtape.ops.creation import _backend_and_device, _shape
from gradtape.core.tensor import Tensor, wrap

__all__ = ["Stream", "draw", "draw_observer", "emit", "float_dtype", "int_or_float_dtype"]


def float_dtype(dtype, what):
    """The gradtape dtype ``dtype`` (default ``gt.config.floatx()``), which must be floating."""
    d = _dt.floatx() if dtype is None else _dt.as_dtype(dtype)
    if not d.is_floating:
        raise ValueError(f"{what}: dtype must be a floating dtype (float32, float64), got {d}")
    return d


def int_or_float_dtype(dtype, what):
    d = _dt.floatx() if dtype is None else _dt.as_dtype(dtype)
    if not (d.is_floating or d.is_integer):
        raise ValueError(f"{what}: dtype must be floating or integer, got {d}")
    return d


def _np_value(v):
    """A float64 NumPy value of a Python number, NumPy array or Tensor (mean, stddev, bounds)."""
    if isinstance(v, Tensor):
        return v.numpy().astype(np.float64)
    return np.asarray(v, dtype=np.float64)


def per_example(shape, what, device=None):
    """``(the shape to draw, layout)`` for a draw of one example's ``shape`` (``what``: its
    distribution) on the active backend: inside ``gt.vmap`` / ``gt.vectorized_map`` the maps that
    draw per example put their batch sizes in front (see ``draw_layout``); pass ``layout`` to
    :func:`emit`.  Outside a map: ``(shape, None)``."""
    if innermost_map() is None:  # (the common case: nothing to look up)
        return shape, None
    b, _ = _backend_and_device(device)
    return draw_layout(shape, what, b)


def emit(arr, dtype, device=None, backend=None, layout=None):
    """A Tensor of the active backend (or ``backend``) on its configured device (or ``device``)
    holding the NumPy array ``arr`` cast to ``dtype``; with a ``layout`` from :func:`per_example`, a
    tensor of the running map holding one draw per example."""
    if layout is None:
        shared_draw()  # (inside gt.vmap: a draw made once for every example, said once per map)
    b, dev = _backend_and_device(device, backend)
    d = _dt.as_dtype(dtype)
    nd = np.dtype(d.name)
    arr = host_then(arr, lambda a: np.asarray(a, dtype=nd, order="C"), ("astype", nd))
    if layout is not None:
        return batched_random(arr, d, dev, layout)
    v = b.random_from_numpy(arr, d, dev)
    if v.__class__ is not b.array_type:
        v = b.fix_output(v)
    return wrap(v, b)


class Stream:
    """A NumPy ``Generator(PCG64(seed))`` and the distributions drawn from it, in float64."""

    __slots__ = ("gen",)

    def __init__(self, seed=None):
        self.gen = np.random.Generator(np.random.PCG64(seed))

    def normal(self, shape, mean, stddev):
        shape = _shape(shape)
        return self.gen.standard_normal(shape) * _np_value(stddev) + _np_value(mean)

    def truncated_normal(self, shape, mean, stddev):
        """Standard normals redrawn until each lies within two standard deviations, scaled."""
        shape = _shape(shape)
        z = self.gen.standard_normal(shape)
        bad = np.abs(z) > 2.0
        while bad.any():
            z[bad] = self.gen.standard_normal(int(bad.sum()))
            bad = np.abs(z) > 2.0
        return z * _np_value(stddev) + _np_value(mean)

    def uniform(self, shape, minval, maxval, dtype):
        """Floats in ``[minval, maxval)`` (kept half-open after the cast), or integers in
        ``[minval, maxval)``."""
        shape = _shape(shape)
        if dtype.is_integer:
            lo, hi = int(minval), int(maxval)
            if hi <= lo:
                raise ValueError(f"uniform: need minval < maxval for integer dtypes, got {lo} and {hi}")
            return self.gen.integers(lo, hi, size=shape, dtype=np.int64)
        lo, hi = _np_value(minval), _np_value(maxval)
        out = (lo + (hi - lo) * self.gen.random(shape)).astype(np.dtype(dtype.name))
        top = np.asarray(hi, dtype=out.dtype)
        below = np.nextafter(top, np.asarray(lo, dtype=out.dtype))
        return np.where((out >= top) & (top > lo), below, out)

    def permutation(self, n):
        return self.gen.permutation(int(n))

    def gumbel(self, shape):
        return self.gen.gumbel(size=_shape(shape))


class _DrawObserver(threading.local):
    """This thread's observer of stateful draws (``gt.recompute_grad``'s: it records each stream's
    state before a draw of the function's forward and replays it in the recomputation), or None."""

    current = None


#: set ``draw_observer.current`` to an object with ``draw(stream, method, args)`` to see every draw
draw_observer = _DrawObserver()


def draw(stream, method, *args):
    """``stream.<method>(*args)``: the one place every draw of ``gt.random`` passes (the global
    generator's, a :class:`~gradtape.random.Generator`'s, an op seed's), so that an observer of this
    thread (``gt.recompute_grad``) can replay it."""
    obs = draw_observer.current
    if obs is None:
        return getattr(stream, method)(*args)
    return obs.draw(stream, method, args)
