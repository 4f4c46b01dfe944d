"""``gt.random``: seeded random numbers, the same for one seed on every backend.

As ``tf.random``::

    gt.random.set_seed(42)                      # the global seed: what follows is reproducible
    w = gt.random.normal((3, 2))                # from the global generator
    u = gt.random.uniform((4,), seed=7)         # an op seed: a pure function of (global seed, 7)
    g = gt.random.Generator.from_seed(1)        # an explicit stateful generator
    x = g.normal((2, 2))

Numbers are drawn with NumPy's ``Generator(PCG64(seed))`` in float64 on the host, cast to the
requested dtype there, and moved onto the active backend and its configured device, so one seed
gives bit-identical numbers on NumPy, PyTorch, JAX, array_api_strict and any other backend.
Random tensors are not recorded on tapes.

Seeds (as TensorFlow, with one documented difference):

* no global seed, no op seed: numbers from a generator seeded by the operating system;
* global seed set (``set_seed``), no op seed: the global generator's sequence, restarted by every
  ``set_seed`` call;
* op seed ``seed=s``: the numbers depend only on ``s`` (and on the global seed, if one is set) --
  the same call gives the same numbers every time.  (TensorFlow's eager stateful ops advance a
  hidden per-seed counter instead; gradtape's op seeds are stateless, like
  ``tf.random.stateless_*``, so that one seed gives the same numbers on every backend and every
  call.)  For a stream of different numbers use ``seed=None`` or a :class:`Generator`.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from gradtape.core import dtypes as _dt
from gradtape.backends.tracing import host_draw
from gradtape.ops.creation import _size
from gradtape.ops.random import Stream, draw, emit, float_dtype, int_or_float_dtype, per_example
from gradtape.core.dtypes import DTypeLike
from gradtape.core.tensor import ShapeLike, Tensor, TensorLike, convert_to_tensor
from gradtape.ops.indexing import _getitem

__all__ = [
    "Generator",
    "categorical",
    "get_global_generator",
    "get_seed",
    "normal",
    "set_global_generator",
    "set_seed",
    "shuffle",
    "truncated_normal",
    "uniform",
]


class Generator:
    """A stateful random generator, as ``tf.random.Generator``: every draw advances its state.

    ``Generator.from_seed(s)`` (or ``Generator(s)``) is reproducible; ``from_non_deterministic_state()``
    is seeded by the operating system.
    """

    def __init__(self, seed: int | None = None, *, alg: Any = None) -> None:
        self._lock = threading.Lock()
        seed = None if seed is None else _size(seed, "gt.random.Generator", "seed")
        self._stream = Stream(seed)
        self._seed = seed

    @classmethod
    def from_seed(cls, seed: int, alg: Any = None) -> Generator:
        """A generator whose sequence is fixed by the integer ``seed``."""
        return cls(_size(seed, "Generator.from_seed", "seed"))

    @classmethod
    def from_non_deterministic_state(cls, alg: Any = None) -> Generator:
        """A generator seeded from the operating system's entropy."""
        return cls(None)

    def reset_from_seed(self, seed: int) -> None:
        """Restart this generator's sequence from ``seed``."""
        seed = _size(seed, "Generator.reset_from_seed", "seed")
        with self._lock:
            self._stream = Stream(seed)
            self._seed = seed

    def split(self, count: int = 1) -> list[Generator]:
        """``count`` new, independent generators (their seeds drawn from this one)."""
        with self._lock:
            seeds = self._stream.gen.integers(0, 2**63 - 1, size=_size(count, "Generator.split", "count"))
        return [Generator(int(s)) for s in seeds]

    def normal(
        self,
        shape: ShapeLike,
        mean: float = 0.0,
        stddev: float = 1.0,
        dtype: DTypeLike | None = None,
        name: str | None = None,
        *,
        device: Any = None,
    ) -> Tensor:
        """Normal samples of ``shape``."""
        d = float_dtype(dtype, "Generator.normal")
        shape, layout = per_example(shape, "normal", device)
        arr = host_draw(self._draw, "normal", shape, mean, stddev)
        return emit(arr, d, device, layout=layout)

    def truncated_normal(
        self,
        shape: ShapeLike,
        mean: float = 0.0,
        stddev: float = 1.0,
        dtype: DTypeLike | None = None,
        name: str | None = None,
        *,
        device: Any = None,
    ) -> Tensor:
        """Normal samples of ``shape`` redrawn until within two standard deviations of ``mean``."""
        d = float_dtype(dtype, "Generator.truncated_normal")
        shape, layout = per_example(shape, "truncated_normal", device)
        arr = host_draw(self._draw, "truncated_normal", shape, mean, stddev)
        return emit(arr, d, device, layout=layout)

    def uniform(
        self,
        shape: ShapeLike,
        minval: float = 0,
        maxval: float | None = None,
        dtype: DTypeLike | None = None,
        name: str | None = None,
        *,
        device: Any = None,
    ) -> Tensor:
        """Uniform samples in ``[minval, maxval)`` (``maxval`` defaults to 1 for floating dtypes
        and must be given for integer ones, as TF)."""
        d = int_or_float_dtype(dtype, "Generator.uniform")
        minval, maxval = _bounds(minval, maxval, d, "Generator.uniform")
        shape, layout = per_example(shape, "uniform", device)
        arr = host_draw(self._draw, "uniform", shape, minval, maxval, d)
        return emit(arr, d, device, layout=layout)

    def _draw(self, method, *args):
        """``method`` of this generator's current stream (read at each draw: ``reset_from_seed``
        replaces it), under its lock."""
        with self._lock:
            return draw(self._stream, method, *args)

    def __getstate__(self):
        """Pickled or deep-copied: the seed and the stream's state (a copy continues the same
        sequence, independently), not the lock."""
        with self._lock:
            return {"seed": self._seed, "state": self._stream.gen.bit_generator.state}

    def __setstate__(self, state):
        self._lock = threading.Lock()
        self._seed = state["seed"]
        self._stream = Stream(None)
        self._stream.gen.bit_generator.state = state["state"]

    def _get_state(self):
        """The stream's position as NumPy's ``PCG64`` state dict (what a checkpoint saves)."""
        with self._lock:
            return self._stream.gen.bit_generator.state

    def _set_state(self, state, seed):
        """Continue from ``state`` (a ``PCG64`` state dict), as ``reset_from_seed`` restarts."""
        stream = Stream(None)
        stream.gen.bit_generator.state = state
        with self._lock:
            self._stream, self._seed = stream, seed

    def __repr__(self):
        return f"<gt.random.Generator seed={self._seed}>"


def _bounds(minval, maxval, d, what):
    """``(minval, maxval)`` of a uniform draw of dtype ``d``: ``maxval`` defaults to 1 for floating
    dtypes and must be given for integer ones (as TF).  An integer dtype's bounds are integers its
    values can reach (``[minval, maxval)``): a bound with a fractional part is a TypeError and one
    beyond the dtype a ValueError, as TF's conversion of the bounds to ``dtype`` (``int()`` truncated
    2.5 to 2, and ``uint8`` draws below 300 wrapped around, silently)."""
    if maxval is None:
        if d.is_integer:
            raise ValueError(f"{what}: must specify maxval for integer dtype {d}")
        return minval, 1.0
    if not d.is_integer:
        return minval, maxval
    lo, hi = _size(minval, what, "minval"), _size(maxval, what, "maxval")
    info = np.iinfo(np.dtype(d.name))
    if lo < info.min or hi - 1 > info.max:
        raise ValueError(
            f"{what}: the bounds [{lo}, {hi}) do not fit dtype {d} (its values are {info.min} to "
            f"{info.max}); give bounds within them or a wider dtype"
        )
    return lo, hi


# ---------------------------------------------------------------------------------- global state
_lock = threading.Lock()
_global_seed: int | None = None
_global = Generator.from_non_deterministic_state()


def set_seed(seed: int | None) -> None:
    """Set the global random seed (as ``tf.random.set_seed``): restarts the global generator, so
    the calls that follow produce the same numbers on every run and every backend.
    ``set_seed(None)`` goes back to a non-deterministic global generator."""
    global _global_seed
    with _lock:
        if seed is None:
            _global_seed = None
            _global._stream = Stream(None)
            _global._seed = None
        else:
            _global_seed = _size(seed, "set_seed", "seed")
            _global.reset_from_seed(_global_seed)


def get_seed(op_seed: int | None = None) -> tuple[int | None, int | None]:
    """``(global_seed, op_seed)`` as gradtape uses them (``None`` where unset)."""
    return _global_seed, op_seed


def get_global_generator() -> Generator:
    """The generator used by ``normal``/``uniform``/... when no op seed is given."""
    return _global


def set_global_generator(generator: Generator) -> None:
    """Replace the global generator (a :class:`Generator`)."""
    global _global
    if not isinstance(generator, Generator):
        raise TypeError(f"set_global_generator expects a gt.random.Generator, got {type(generator).__name__}")
    with _lock:
        _global = generator


def _stream_for(seed):
    """The stream for one call: a fresh one for an op seed (stateless), else the global one."""
    if seed is None:
        return None
    seed = _size(seed, "gt.random", "seed")
    if _global_seed is None:
        return Stream(seed)
    return Stream([_global_seed, seed])


def _draw(seed, method, *args):
    stream = _stream_for(seed)
    if stream is None:
        g = _global
        with g._lock:
            return draw(g._stream, method, *args)
    return draw(stream, method, *args)


# ---------------------------------------------------------------------------------- distributions
def normal(
    shape: ShapeLike,
    mean: float = 0.0,
    stddev: float = 1.0,
    dtype: DTypeLike | None = None,
    seed: int | None = None,
    name: str | None = None,
    *,
    device: Any = None,
) -> Tensor:
    """Samples of a normal distribution (as ``tf.random.normal``); ``gt.config.floatx()`` (float32) by default."""
    d = float_dtype(dtype, "normal")
    shape, layout = per_example(shape, "normal", device)
    return emit(host_draw(_draw, seed, "normal", shape, mean, stddev), d, device, layout=layout)


def truncated_normal(
    shape: ShapeLike,
    mean: float = 0.0,
    stddev: float = 1.0,
    dtype: DTypeLike | None = None,
    seed: int | None = None,
    name: str | None = None,
    *,
    device: Any = None,
) -> Tensor:
    """Normal samples, redrawn until within two standard deviations of the mean (as
    ``tf.random.truncated_normal``)."""
    d = float_dtype(dtype, "truncated_normal")
    shape, layout = per_example(shape, "truncated_normal", device)
    return emit(host_draw(_draw, seed, "truncated_normal", shape, mean, stddev), d, device, layout=layout)


def uniform(
    shape: ShapeLike,
    minval: float = 0,
    maxval: float | None = None,
    dtype: DTypeLike | None = None,
    seed: int | None = None,
    name: str | None = None,
    *,
    device: Any = None,
) -> Tensor:
    """Uniform samples in ``[minval, maxval)`` (as ``tf.random.uniform``): floats by default, with
    ``maxval`` defaulting to 1; integer dtypes need ``maxval``."""
    d = int_or_float_dtype(dtype, "uniform")
    minval, maxval = _bounds(minval, maxval, d, "uniform")
    shape, layout = per_example(shape, "uniform", device)
    return emit(host_draw(_draw, seed, "uniform", shape, minval, maxval, d), d, device, layout=layout)


def shuffle(value: TensorLike, seed: int | None = None, name: str | None = None) -> Tensor:
    """``value`` with its first axis randomly permuted (as ``tf.random.shuffle``).  The
    permutation is an indexing, so gradients flow back to ``value``."""
    if not isinstance(value, Tensor):
        value = convert_to_tensor(value)
    if value.ndim == 0:
        raise ValueError("shuffle needs a tensor of at least one dimension")
    perm = host_draw(_draw, seed, "permutation", value.shape[0])
    idx = emit(perm, _dt.int64, device=value._b.device_of(value._v), backend=value._b)
    return _getitem(value, (idx,))


def categorical(
    logits: TensorLike,
    num_samples: int,
    dtype: DTypeLike | None = None,
    seed: int | None = None,
    name: str | None = None,
) -> Tensor:
    """Class indices drawn from the categorical distributions ``softmax(logits)`` (one row per
    batch entry; shape ``[batch, num_samples]``, int64), as ``tf.random.categorical``."""
    if not isinstance(logits, Tensor):
        logits = convert_to_tensor(logits)
    if logits.ndim != 2:
        raise ValueError(f"categorical: logits must be 2-D [batch, num_classes], got shape {logits.shape}")
    # sampling has no gradient (as tf.random.categorical): read the values without a leak warning
    lg = np.asarray(logits._b.to_numpy(logits._v), dtype=np.float64)
    batch, n = lg.shape
    num_samples = _size(num_samples, "categorical", "num_samples")
    d = _dt.int64 if dtype is None else _dt.as_dtype(dtype)
    if not d.is_integer or n - 1 > np.iinfo(np.dtype(d.name)).max:
        raise ValueError(f"categorical: dtype must be an integer dtype that holds {n} classes (int32, int64), got {d}")
    bad = np.isnan(lg).any(axis=1) | (lg == -np.inf).all(axis=1)
    if bad.any():
        raise ValueError(
            f"categorical: row {int(np.argmax(bad))} of logits is NaN or all -inf: it is no distribution "
            "to draw from; check the logits for NaN or give a row a finite logit"
        )
    g = host_draw(_draw, seed, "gumbel", (batch, num_samples, n))
    out = np.argmax(lg[:, None, :] + g, axis=-1)
    return emit(out, d, device=logits._b.device_of(logits._v), backend=logits._b)
