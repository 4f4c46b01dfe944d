"""What a TensorFlow user moving code over met, checking gradtape against TensorFlow 2.21 run beside it
(the ``tfuser8`` brief).  TensorFlow is not installed in CI: its outputs are written here as literals,
each marked as TF 2.21's.  Each test fails on the code before its fix, and runs on every backend."""

from __future__ import annotations

import numpy as np

import gradtape as gt


def _grad(f, x):
    """``f(x)`` and the gradient of ``sum(f(x))`` with respect to ``x``, as NumPy arrays."""
    x = gt.constant(x)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    return y.numpy(), tape.gradient(y, x).numpy()


def test_top_k_returns_tensorflows_named_tuple(backend):
    # TF 2.21: tf.math.top_k(x, k=2) is TopKV2(values=..., indices=...); `.values` is how TF code reads it
    # (gradtape returned a plain tuple: AttributeError: 'tuple' object has no attribute 'values')
    x = gt.constant([[1.0, 3.0, 2.0], [5.0, 5.0, 0.0]])
    with gt.GradientTape() as tape:
        tape.watch(x)
        result = gt.math.top_k(x, k=2)
        y = gt.reduce_sum(result.values * gt.constant([1.0, 10.0]))
    assert type(result).__name__ == "TopKV2" and result._fields == ("values", "indices")
    np.testing.assert_array_equal(result.values.numpy(), [[3.0, 2.0], [5.0, 5.0]])  # TF 2.21's
    np.testing.assert_array_equal(result.indices.numpy(), [[1, 2], [0, 1]])  # TF 2.21's
    assert result.indices.dtype == gt.int32  # TF 2.21's
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [[0.0, 1.0, 10.0], [1.0, 10.0, 0.0]])  # TF 2.21's
    values, indices = result  # still unpacks as a pair
    assert values is result.values and indices is result.indices
