"""``gt.vmap`` / ``gt.vectorized_map`` over ops whose result's shape depends on each example's values
(a boolean mask, ``nonzero``, ``unique_values``), on every backend: where the examples' results are
ragged, the map runs the whole function once per example (TensorFlow's ``fallback_to_while_loop``),
with a ``VmapFallbackWarning``, eagerly and inside ``gt.function`` (whose later calls may be ragged
where the traced one was not)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradtape as gt
from gradtape.testing import snapshot as snap

X = np.array([[1.0, 0.0, 3.0], [1.0, 0.0, 0.0], [2.0, 2.0, 2.0]])


def masked_sum(x):
    return gt.sum(x[x > 0.5])


def each(fn, x):
    """``fn`` on each row of ``x`` eagerly, stacked: what the map must give."""
    return np.stack([snap(fn(gt.constant(row))) for row in x])


@pytest.mark.parametrize(
    "fn",
    [
        masked_sum,
        lambda x: gt.sum(gt.take(x, gt.nonzero(x)[0])),
        lambda x: gt.sum(gt.unique_values(x)) * gt.max(x),
    ],
    ids=["mask", "nonzero", "unique_values"],
)
def test_ragged_results_run_the_function_per_example(backend, fn):
    want = each(fn, X)
    with pytest.warns(gt.VmapFallbackWarning, match="Python loop over the 3 examples"):
        got = snap(gt.vmap(fn)(gt.constant(X)))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gt.VmapFallbackWarning)
        np.testing.assert_allclose(snap(gt.vectorized_map(fn, gt.constant(X))), want, rtol=1e-12)


def test_ragged_results_without_the_fallback_raise(backend):
    with pytest.raises(ValueError, match="getitem.*fallback_to_while_loop"):
        gt.vmap(masked_sum, fallback_to_while_loop=False)(gt.constant(X))


def test_per_example_gradients_through_ragged_masks(backend):

    def grad_of(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.sum(x[x > 0.5] ** 2)
        return tape.gradient(y, x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gt.VmapFallbackWarning)
        got = snap(gt.vmap(grad_of)(gt.constant(X)))
    np.testing.assert_allclose(got, np.where(X > 0.5, 2.0 * X, 0.0), rtol=1e-12)


def test_ragged_results_inside_gt_function(backend):
    f = gt.function(lambda xs: gt.vmap(masked_sum)(xs))
    even = np.array([[1.0, 0.0, 3.0], [1.0, 1.0, 0.0]])  # two values above 0.5 in each row
    ragged = np.array([[0.0, 0.0, 3.0], [1.0, 1.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gt.VmapFallbackWarning)
        np.testing.assert_allclose(snap(f(gt.constant(even))), [4.0, 2.0], rtol=1e-12)
        np.testing.assert_allclose(snap(f(gt.constant(ragged))), [3.0, 2.0], rtol=1e-12)  # the same program
