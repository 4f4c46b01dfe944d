"""gradtape inside TensorFlow: :func:`to_tf` (optional: TensorFlow is not a dependency, nor in CI).

``to_tf(fn)`` is ``fn`` on ``tf.Tensor`` arguments under ``tf.custom_gradient``, in eager mode: the
forward runs on gradtape (each tensor crosses through NumPy: ``np.asarray`` of an eager CPU tensor
shares its buffer where TensorFlow allows), and the gradient is another ``to_tf`` crossing, gradtape's
recorded VJP (:func:`gradtape.interop.crossing.vjp_function`: the forward again under a tape, then one
walk), so TensorFlow can differentiate it again, to any order.  ``tf.function`` graphs are not
supported (the crossing reads concrete values).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from gradtape.core.tensor import Tensor
from gradtape.interop.crossing import (
    Flat,
    display_name,
    on_inputs_device,
    resolve_backend,
    to_gradtape,
    vjp_function,
)

__all__ = ["to_tf"]


def _to_tf(t: Any) -> Any:
    return None if t is None else tf.convert_to_tensor(t._b.to_numpy(t._v) if isinstance(t, Tensor) else t)


def _crossing(f: Callable[..., Any], b: Any, name: str) -> Callable[..., Any]:
    @tf.custom_gradient
    def g(*xs: Any) -> Any:
        if not tf.executing_eagerly():
            raise NotImplementedError(
                f"to_tf({name}): runs eagerly only (it reads concrete values); call it outside tf.function"
            )
        outs = [_to_tf(o) for o in f(*[to_gradtape(np.asarray(x), b) for x in xs])]

        def grad(*gys: Any) -> list:
            n = len(xs)
            return list(_crossing(vjp_function(f, n), b, f"vjp of {name}")(*xs, *gys))[:n]

        return outs, grad

    return g


def to_tf(fn: Callable[..., Any], *, backend: Any = None) -> Callable[..., Any]:
    """``fn`` (written for gradtape / the Array API) as a function of ``tf.Tensor`` arguments (any
    pytree) that ``tf.GradientTape`` differentiates with gradtape's gradients, on ``backend`` (default:
    the active one when called)."""
    name = display_name(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flat = Flat(fn, args, kwargs, tf.is_tensor)
        outs = _crossing(on_inputs_device(flat.call), resolve_backend(backend), name)(*flat.arrays)
        return flat.unflatten(outs)

    return wrapper
