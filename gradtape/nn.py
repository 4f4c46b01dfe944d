"""``gt.nn``: neural-network functions with TensorFlow's names, signatures and defaults.

The ops (each with its gradient rule and domain) are declared in :mod:`gradtape.ops.nn`; this
module is the public face, as ``tf.nn``, and holds ``dropout`` (it draws its mask from
:mod:`gradtape.random`'s global generator, a front end too).
"""

from __future__ import annotations

from collections.abc import Sequence

from gradtape.core import config as _config
from gradtape.ops.elementwise import greater_equal

# the ops of tf.nn, each with its rule: their names are written once, in gradtape.ops.nn's __all__
from gradtape.ops.nn import *  # noqa: F403
from gradtape.ops.nn import __all__ as __all__  # (so that mypy, too, sees the names re-exported)
from gradtape.ops.searching import where
from gradtape.random import uniform
from gradtape.core.tensor import Tensor, TensorLike, convert_to_tensor

__all__ = [*__all__, "dropout"]  # a new list: gradtape.ops.nn's stays as it is


def dropout(
    x: TensorLike,
    rate: float,
    noise_shape: Sequence[int] | None = None,
    seed: int | None = None,
    name: str | None = None,
) -> Tensor:
    """Zeroes each element with probability ``rate`` and scales the rest by ``1 / (1 - rate)``
    (the mask comes from :func:`gradtape.random.uniform`, so it is the same on every backend)."""
    x = convert_to_tensor(x)
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate}")
    if rate == 0.0:
        return x
    shape = x.shape if noise_shape is None else tuple(int(s) for s in noise_shape)
    with _config.use_backend(x._b, x._b.device_of(x._v)):
        keep = greater_equal(uniform(shape, dtype=x.dtype, seed=seed), rate)
    return where(keep, x * (1.0 / (1.0 - rate)), 0)
