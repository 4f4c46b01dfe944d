"""``gt.initializers``: Keras' weight initializers (``tf.keras.initializers``).

Each is a class whose instances are called as ``init(shape, dtype=None)`` and return a Tensor on the
active backend (``dtype`` defaults to ``gt.config.floatx()``): ``Zeros``, ``Ones``, ``Constant``,
``RandomNormal``, ``RandomUniform``, ``TruncatedNormal``, ``VarianceScaling`` and its named forms
``GlorotUniform`` (``Dense``'s default), ``GlorotNormal``, ``HeNormal``, ``HeUniform``,
``LecunNormal``, ``LecunUniform``.  The random ones draw from :mod:`gradtape.random`, so
``gt.random.set_seed`` makes a model's initial weights the same on every backend.

:func:`get_initializer` (also ``get``, Keras' spelling) turns Keras' names (``"glorot_uniform"`` or
``"GlorotUniform"``, ``"zeros"``, ...) into initializers; layers take those names, an
:class:`Initializer` or any callable ``init(shape, dtype)``.  ``gt.layers.GlorotUniform`` & co. are
these same classes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

from gradtape.core import dtypes as _dt
from gradtape import random as _random
from gradtape.core.dtypes import DTypeLike
from gradtape.training.module import camel_to_snake
from gradtape.ops.creation import full, ones, zeros
from gradtape.core.tensor import Tensor

__all__ = [
    "Constant",
    "GlorotNormal",
    "GlorotUniform",
    "HeNormal",
    "HeUniform",
    "Initializer",
    "LecunNormal",
    "LecunUniform",
    "Ones",
    "RandomNormal",
    "RandomUniform",
    "TruncatedNormal",
    "VarianceScaling",
    "Zeros",
    "get_initializer",
]


def _fans(shape):
    """Keras' ``compute_fans``: (fan_in, fan_out) of a weight shape."""
    shape = tuple(int(s) for s in shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


class Initializer:
    """Base of initializers: ``init(shape, dtype=None)`` returns a Tensor on the active backend."""

    def __call__(self, shape: Sequence[int], dtype: DTypeLike | None = None) -> Tensor:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        """The initializer's arguments, as a dict (Keras' ``get_config``); the named variance-scaling
        initializers (``GlorotNormal``, ``HeNormal``, ...) give ``VarianceScaling``'s."""
        return {}


class Zeros(Initializer):
    """Initializer of all zeros (Keras' ``zeros``)."""

    def __call__(self, shape: Sequence[int], dtype: DTypeLike | None = None) -> Tensor:
        return zeros(tuple(shape), dtype=dtype or _dt.floatx())


class Ones(Initializer):
    """Initializer of all ones (Keras' ``ones``)."""

    def __call__(self, shape: Sequence[int], dtype: DTypeLike | None = None) -> Tensor:
        return ones(tuple(shape), dtype=dtype or _dt.floatx())


class Constant(Initializer):
    """Initializer filled with ``value`` (Keras' ``Constant``)."""

    def __init__(self, value: float = 0.0) -> None:
        self.value = value

    def __call__(self, shape: Sequence[int], dtype: DTypeLike | None = None) -> Tensor:
        return full(tuple(shape), float(self.value), dtype=dtype or _dt.floatx())

    def get_config(self) -> dict[str, Any]:
        return {"value": self.value}


class RandomNormal(Initializer):
    """Initializer drawing from a normal distribution of ``mean`` and ``stddev`` (Keras' ``RandomNormal``)."""

    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: int | None = None) -> None:
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def __call__(self, shape: Sequence[int], dtype: DTypeLike | None = None) -> Tensor:
        return _random.normal(tuple(shape), self.mean, self.stddev, dtype=dtype or _dt.floatx(), seed=self.seed)


class TruncatedNormal(Initializer):
    """Initializer drawing from a normal distribution cut at two standard deviations (Keras' ``TruncatedNormal``)."""

    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: int | None = None) -> None:
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def __call__(self, shape: Sequence[int], dtype: DTypeLike | None = None) -> Tensor:
        return _random.truncated_normal(
            tuple(shape), self.mean, self.stddev, dtype=dtype or _dt.floatx(), seed=self.seed
        )


class RandomUniform(Initializer):
    """Initializer drawing uniformly from ``[minval, maxval)`` (Keras' ``RandomUniform``)."""

    def __init__(self, minval: float = -0.05, maxval: float = 0.05, seed: int | None = None) -> None:
        self.minval, self.maxval, self.seed = minval, maxval, seed

    def __call__(self, shape: Sequence[int], dtype: DTypeLike | None = None) -> Tensor:
        return _random.uniform(tuple(shape), self.minval, self.maxval, dtype=dtype or _dt.floatx(), seed=self.seed)


class VarianceScaling(Initializer):
    """Keras' ``VarianceScaling``: variance ``scale / fan`` (``fan_in``, ``fan_out`` or their mean),
    from a truncated normal (stddev corrected for the truncation), a normal, or a uniform."""

    def __init__(
        self,
        scale: float = 1.0,
        mode: Literal["fan_in", "fan_out", "fan_avg"] = "fan_in",
        distribution: Literal["truncated_normal", "untruncated_normal", "normal", "uniform"] = "truncated_normal",
        seed: int | None = None,
    ) -> None:
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform", "normal"):
            raise ValueError(f"unknown distribution {distribution!r}")
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed

    def __call__(self, shape: Sequence[int], dtype: DTypeLike | None = None) -> Tensor:
        dtype = dtype or _dt.floatx()
        fan_in, fan_out = _fans(shape)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, fan)
        shape = tuple(shape)
        if self.distribution == "truncated_normal":
            stddev = math.sqrt(scale) / 0.87962566103423978
            return _random.truncated_normal(shape, 0.0, stddev, dtype=dtype, seed=self.seed)
        if self.distribution in ("untruncated_normal", "normal"):
            return _random.normal(shape, 0.0, math.sqrt(scale), dtype=dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return _random.uniform(shape, -limit, limit, dtype=dtype, seed=self.seed)

    def get_config(self) -> dict[str, Any]:
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution, "seed": self.seed}


class GlorotUniform(VarianceScaling):
    """Uniform in ``[-limit, limit]``, ``limit = sqrt(6 / (fan_in + fan_out))``."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(1.0, "fan_avg", "uniform", seed)


class GlorotNormal(VarianceScaling):
    """Truncated normal with ``stddev = sqrt(2 / (fan_in + fan_out))`` (Keras' ``GlorotNormal``)."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(1.0, "fan_avg", "truncated_normal", seed)


class HeNormal(VarianceScaling):
    """Truncated normal with ``stddev = sqrt(2 / fan_in)``, for ReLU layers (Keras' ``HeNormal``)."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(2.0, "fan_in", "truncated_normal", seed)


class HeUniform(VarianceScaling):
    """Uniform in ``[-limit, limit]``, ``limit = sqrt(6 / fan_in)``, for ReLU layers (Keras' ``HeUniform``)."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(2.0, "fan_in", "uniform", seed)


class LecunNormal(VarianceScaling):
    """Truncated normal with ``stddev = sqrt(1 / fan_in)`` (Keras' ``LecunNormal``)."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(1.0, "fan_in", "truncated_normal", seed)


class LecunUniform(VarianceScaling):
    """Uniform in ``[-limit, limit]``, ``limit = sqrt(3 / fan_in)`` (Keras' ``LecunUniform``)."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(1.0, "fan_in", "uniform", seed)


_INITIALIZERS = {
    "zeros": Zeros,
    "ones": Ones,
    "constant": Constant,
    "random_normal": RandomNormal,
    "random_uniform": RandomUniform,
    "truncated_normal": TruncatedNormal,
    "glorot_uniform": GlorotUniform,
    "glorot_normal": GlorotNormal,
    "he_normal": HeNormal,
    "he_uniform": HeUniform,
    "lecun_normal": LecunNormal,
    "lecun_uniform": LecunUniform,
    "variance_scaling": VarianceScaling,
}


def get_initializer(identifier: str | Initializer | Callable[..., Tensor]) -> Callable[..., Tensor]:
    """An initializer from a Keras name (``"glorot_uniform"``, ``"zeros"``, ...), an Initializer,
    or a callable ``init(shape, dtype)``."""
    if isinstance(identifier, str):
        key = identifier if identifier in _INITIALIZERS else camel_to_snake(identifier)
        try:
            return _INITIALIZERS[key]()
        except KeyError:
            raise ValueError(
                f"Could not interpret initializer identifier: {identifier!r}; known: {sorted(_INITIALIZERS)}"
            ) from None
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret initializer identifier: {identifier!r}")


get = get_initializer  # (Keras' name: tf.keras.initializers.get)
