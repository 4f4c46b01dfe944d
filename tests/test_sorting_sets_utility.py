"""Sorting, set and utility functions (issue 5): what the generated tests of test_gradients.py do not
see -- signatures, stability of descending sorts, ties, NaN in unique, data-dependent shapes,
``diff``'s gradient in ``prepend`` / ``append``, error messages."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import registry

# the standard's signatures (array_api_stubs/_2024_12: sorting_functions.py, set_functions.py,
# utility_functions.py)
_SIGNATURES = {
    "sort": "(x, /, *, axis=-1, descending=False, stable=True)",
    "argsort": "(x, /, *, axis=-1, descending=False, stable=True)",
    "unique_all": "(x, /)",
    "unique_counts": "(x, /)",
    "unique_inverse": "(x, /)",
    "unique_values": "(x, /)",
    "all": "(x, /, *, axis=None, keepdims=False)",
    "any": "(x, /, *, axis=None, keepdims=False)",
    "diff": "(x, /, *, axis=-1, n=1, prepend=None, append=None)",
}


@pytest.mark.parametrize("name", sorted(_SIGNATURES))
def test_signature_is_the_standards_and_the_function_is_an_op(name):
    f = getattr(gt, name)
    assert str(inspect.signature(f)) == _SIGNATURES[name]
    op = registry.get_op(name)
    assert op.public is f
    assert op.chapter == {
        "sort": "sorting",
        "argsort": "sorting",
        "all": "utility",
        "any": "utility",
        "diff": "utility",
    }.get(name, "sets")
    assert op.differentiable is (name in ("sort", "diff"))


# ---------------------------------------------------------------------------------------- sorting
# (shapes and dtypes as in the ops' domains: on JAX each new one is a compilation)
_TIES = np.array([1.0, 3.0, 1.0, 3.0, 2.0])


def test_argsort_is_stable_ascending_and_descending(backend):
    x = gt.asarray(_TIES)
    assert gt.argsort(x).numpy().tolist() == [0, 2, 4, 1, 3]
    # descending and stable: equal elements keep their original order (not reversed)
    assert gt.argsort(x, descending=True).numpy().tolist() == [1, 3, 4, 0, 2]
    assert gt.argsort(x).dtype == gt.int64
    np.testing.assert_array_equal(gt.sort(x, descending=True).numpy(), [3, 3, 2, 1, 1])
    m = gt.asarray(np.array([[2.0, 1.0, 2.0], [1.0, 1.0, 0.0]]))
    assert gt.argsort(m, axis=0, descending=True).numpy().tolist() == [[0, 0, 0], [1, 1, 1]]
    assert gt.argsort(m, axis=-1).numpy().tolist() == [[1, 0, 2], [2, 0, 1]]
    assert gt.argsort(m, axis=-1, descending=True).numpy().tolist() == [[0, 2, 1], [0, 1, 2]]
    np.testing.assert_array_equal(gt.sort(m, axis=0).numpy(), np.sort(m.numpy(), axis=0))


def test_sort_gradient_follows_the_permutation(backend):
    x = gt.asarray(np.array([[0.3, -1.0, 2.0], [5.0, 4.0, -2.0]]))
    w = gt.asarray(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    for axis, desc in ((-1, False), (0, True)):
        with gt.GradientTape() as tape:
            tape.watch(x)
            loss = gt.sum(gt.sort(x, axis=axis, descending=desc) * w)
        g = tape.gradient(loss, x).numpy()
        perm = np.argsort(-x.numpy() if desc else x.numpy(), axis=axis, kind="stable")
        expected = np.empty_like(g)
        np.put_along_axis(expected, perm, w.numpy(), axis=axis)
        np.testing.assert_array_equal(g, expected)


def test_sort_second_order_through_the_permutation(backend):
    """d/dx of sum(sort(x)^3): 3 x^2; its gradient 6 x (the rule's gather is itself recorded)."""
    x = gt.asarray(np.array([0.5, -1.5, 2.0, 1.0, -0.2]))
    u = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    with gt.GradientTape() as outer:
        outer.watch(x)
        with gt.GradientTape() as inner:
            inner.watch(x)
            y = gt.sum(gt.sort(x, descending=True) ** 3)
        g = inner.gradient(y, x)
        z = gt.sum(g * gt.asarray(u))
    np.testing.assert_allclose(g.numpy(), 3 * x.numpy() ** 2)
    np.testing.assert_allclose(outer.gradient(z, x).numpy(), 6 * x.numpy() * u)


def test_argsort_has_no_gradient(backend):
    x = gt.asarray(_TIES)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.astype(gt.argsort(x), gt.float64)
    assert tape.gradient(y, x) is None


def test_sort_errors(backend):
    with pytest.raises(ValueError, match="sort needs a tensor of at least one dimension"):
        gt.sort(gt.asarray(1.0))
    with pytest.raises(IndexError, match="argsort: axis 2 is out of bounds"):
        gt.argsort(gt.asarray([[1.0]]), axis=2)


# ---------------------------------------------------------------------------------------- sets
def test_unique_with_nan_and_signed_zeros(backend):
    if gt.get_backend().lazy:
        pytest.skip("dask: unique's results have unknown sizes until computed, and dask cannot index with them")
    x = gt.asarray(np.array([np.nan, -0.0, 0.0, np.nan]))
    r = gt.unique_all(x)
    assert type(r).__name__ == "UniqueAllResult"
    assert r._fields == ("values", "indices", "inverse_indices", "counts")
    v = r.values.numpy()
    assert v.shape == (3,) and v[0] == 0.0 and np.isnan(v[1:]).all()  # each NaN distinct
    assert r.counts.numpy().tolist() == [2, 1, 1]  # signed zeros together
    assert r.indices.numpy()[0] == 1 and sorted(r.indices.numpy()[1:].tolist()) == [0, 3]
    assert r.inverse_indices.numpy()[1:3].tolist() == [0, 0]
    assert sorted(r.inverse_indices.numpy()[[0, 3]].tolist()) == [1, 2]
    assert r.values.dtype == gt.float64
    for t in (r.indices, r.inverse_indices, r.counts):
        assert t.dtype == gt.int64 and t.backend == backend.split(":")[0]
    c = gt.unique_counts(x)
    assert c._fields == ("values", "counts") and c.counts.numpy().tolist() == [2, 1, 1]
    v = gt.unique_values(x).numpy()
    assert v.shape == (3,) and np.isnan(v[1:]).all()


def test_unique_of_a_matrix(backend):
    if gt.get_backend().lazy:
        pytest.skip("dask: unique's results have unknown sizes until computed, and dask cannot index with them")
    x = gt.asarray(np.array([[3, 1, 3, 0, 1], [0, 1, 3, 7, 7]]))
    r = gt.unique_all(x)
    assert r.values.numpy().tolist() == [0, 1, 3, 7]
    assert r.indices.numpy().tolist() == [3, 1, 0, 8]  # first occurrences, flattened
    assert r.counts.numpy().tolist() == [2, 3, 3, 2]
    assert r.inverse_indices.shape == (2, 5)  # shaped like x (2024.12)
    assert r.inverse_indices.numpy().tolist() == [[2, 1, 2, 0, 1], [0, 1, 2, 3, 3]]
    i = gt.unique_inverse(x)
    assert i._fields == ("values", "inverse_indices") and i.inverse_indices.shape == (2, 5)
    np.testing.assert_array_equal(
        gt.take(i.values, gt.reshape(i.inverse_indices, (-1,))).numpy(), x.numpy().reshape(-1)
    )
    assert gt.unique_counts(x).counts.numpy().tolist() == [2, 3, 3, 2]
    assert gt.unique_values(x).numpy().tolist() == [0, 1, 3, 7]


def test_unique_all_fallback_matches_numpy():
    """The sort-based unique_all, used where a namespace has none (array_api_compat's torch) or
    cannot do a dtype (torch: complex, the wider unsigned ints)."""
    import array_api_compat.numpy as npx

    from gradtape.ops.sets import _unique_all_sorted

    x = np.array([[1.0, np.nan, -0.0, 3.0], [0.0, 1.0, np.nan, 1.0]])
    for a in (x, np.nan_to_num(x).astype(np.uint16), x + 1j * x[::-1], np.zeros((0, 2))):
        got = _unique_all_sorted(npx, a)
        want = npx.unique_all(a)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
            assert g.dtype == w.dtype and g.shape == w.shape


def test_unique_is_not_differentiable(backend):
    x = gt.asarray(np.array([1.0, 2.0, 1.0, 0.5]))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sum(gt.unique_values(x))
    assert tape.gradient(y, x) is None


# ---------------------------------------------------------------------------------------- all, any
def test_all_and_any(backend):
    x = gt.asarray(np.array([[0.0, np.nan, 1.0], [np.inf, -2.0, 0.5]]))
    assert bool(gt.all(x)) is False and bool(gt.any(x)) is True
    assert gt.all(x).shape == () and gt.all(x).dtype == gt.bool
    assert gt.all(x, axis=0).numpy().tolist() == [False, True, True]  # NaN and inf are true
    assert gt.any(x == 0.0, axis=-1).numpy().tolist() == [True, False]
    assert gt.all(x, axis=(0, 1), keepdims=True).shape == (1, 1)
    assert gt.any(x, axis=1, keepdims=True).shape == (2, 1)
    empty = gt.zeros((0, 2))
    assert bool(gt.all(empty)) is True and bool(gt.any(empty)) is False
    assert gt.any(empty, axis=0).numpy().tolist() == [False, False]
    z = gt.asarray(np.array([0j, 1j]))
    assert gt.any(z, axis=0).numpy().tolist() is True and bool(gt.all(z)) is False
    with pytest.raises(IndexError):
        gt.all(x, axis=2)


# ---------------------------------------------------------------------------------------- diff
def test_diff_values_match_numpy(backend):
    rng = np.random.default_rng(0)
    a, p, q = rng.standard_normal((2, 3)), rng.standard_normal((2, 1)), rng.standard_normal((2, 2))
    x = gt.asarray(a)
    np.testing.assert_allclose(gt.diff(x).numpy(), np.diff(a))
    np.testing.assert_allclose(gt.diff(x, axis=0).numpy(), np.diff(a, axis=0))
    np.testing.assert_allclose(
        gt.diff(x, n=2, prepend=gt.asarray(p), append=gt.asarray(q)).numpy(), np.diff(a, n=2, prepend=p, append=q)
    )
    np.testing.assert_allclose(gt.diff(x, n=0).numpy(), a)
    assert gt.diff(x, n=4).shape == (2, 0)  # n > M + N1 + N2: empty
    np.testing.assert_allclose(gt.diff(x, prepend=0.0).numpy(), np.diff(a, prepend=0.0))  # 0-d: broadcast
    i = gt.asarray([1, 4, 9, 16])
    assert gt.diff(i, n=2).numpy().tolist() == [2, 2] and gt.diff(i).dtype == gt.int64


def test_diff_gradient_in_x_prepend_and_append(backend):
    """diff is linear: gradients vs finite differences, first order, in all three arguments."""
    from gradtape.testing import numeric_gradient

    rng = np.random.default_rng(1)
    a, p, q = rng.standard_normal((2, 3)), rng.standard_normal((2, 2)), rng.standard_normal((2, 1))
    n = 2
    w = rng.standard_normal((2, 3 + 2 + 1 - n))
    xs = [gt.asarray(v) for v in (a, p, q)]
    with gt.GradientTape() as tape:
        tape.watch(xs)
        loss = gt.sum(gt.diff(xs[0], n=n, prepend=xs[1], append=xs[2]) * gt.asarray(w))
    got = tape.gradient(loss, xs)
    want = numeric_gradient(lambda a_, p_, q_: float(np.sum(np.diff(a_, n=n, prepend=p_, append=q_) * w)), [a, p, q])
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-6, atol=1e-8)
    # along axis 0, append only
    with gt.GradientTape() as tape:
        tape.watch(xs[0])
        loss = gt.sum(gt.diff(xs[0], axis=0, append=gt.ones((1, 3), dtype=gt.float64)) ** 2)
    g = tape.gradient(loss, xs[0])
    (e,) = numeric_gradient(lambda a_: float(np.sum(np.diff(a_, axis=0, append=np.ones((1, 3))) ** 2)), [a])
    np.testing.assert_allclose(g.numpy(), e, rtol=1e-6, atol=1e-8)


def test_diff_second_order(backend):
    """The rule is diff itself, so nested tapes see it: d/dx sum(diff(x)^2) then its gradient."""
    rng = np.random.default_rng(2)
    a, p = rng.standard_normal(5), rng.standard_normal(2)
    x, pt = gt.asarray(a), gt.asarray(p)
    u = rng.standard_normal(5)
    with gt.GradientTape() as outer:
        outer.watch([x, pt])
        with gt.GradientTape() as inner:
            inner.watch([x, pt])
            y = gt.sum(gt.diff(x, n=2, prepend=pt) ** 2)
        gx = inner.gradient(y, x)
        z = gt.sum(gx * gt.asarray(u))
    hx, hp = outer.gradient(z, [x, pt])

    def grad_x(a_, p_):
        d = np.diff(np.concatenate([p_, a_]), n=2)
        m = len(p_) + len(a_)
        full = np.zeros(m)
        for i in range(len(d)):  # d_i = z_{i+2} - 2 z_{i+1} + z_i
            full[i] += 2 * d[i]
            full[i + 1] -= 4 * d[i]
            full[i + 2] += 2 * d[i]
        return full[len(p_) :]

    from gradtape.testing import numeric_gradient

    ex, ep = numeric_gradient(lambda a_, p_: float(np.sum(grad_x(a_, p_) * u)), [a, p])
    np.testing.assert_allclose(gx.numpy(), grad_x(a, p), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hx.numpy(), ex, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(hp.numpy(), ep, rtol=1e-6, atol=1e-7)


def test_diff_errors(backend):
    x = gt.asarray([[1.0, 2.0, 4.0]])
    with pytest.raises(ValueError, match="diff: n must be a non-negative int"):
        gt.diff(x, n=-1)
    with pytest.raises(ValueError, match="diff needs a tensor of at least one dimension"):
        gt.diff(gt.asarray(1.0))
    with pytest.raises(IndexError, match="diff: axis 2 is out of bounds"):
        gt.diff(x, axis=2)
    with pytest.raises(ValueError, match=r"diff: prepend must have the shape of x \(1, 3\) except along axis 1"):
        gt.diff(x, prepend=gt.zeros((2, 1)))


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
def test_searchsorted_wide_unsigned_matches_numpy(backend, dtype):
    # torch has no searchsorted for uint16/32/64 (issue 21: scikit-learn's label_binarize on uint64);
    # uint64 values from 2**63 up must keep their order, not wrap to negative int64s
    top = int(np.iinfo(dtype).max)
    x1 = np.array([0, 1, 7, top // 2, top // 2 + 1, top - 3, top], dtype=dtype)
    x2 = np.array([0, 7, 8, top // 2 + 1, top - 4, top], dtype=dtype)
    for side in ("left", "right"):
        got = gt.searchsorted(gt.asarray(x1), gt.asarray(x2), side=side)
        assert got.dtype == gt.int64
        np.testing.assert_array_equal(np.asarray(got), np.searchsorted(x1, x2, side=side))
    # a narrower unsigned x2 beside a uint64 x1
    got = gt.searchsorted(gt.asarray(x1), gt.asarray(np.array([1, 8], dtype=np.uint8)))
    np.testing.assert_array_equal(np.asarray(got), np.searchsorted(x1, np.array([1, 8], dtype=np.uint8)))


def test_searchsorted_nans_and_infinities_match_numpy(backend):
    # NaN sorts after +inf, as in NumPy, on every backend (torch's own searchsorted differs there:
    # SciPy's quantile tests, issue 21); x1 sorted with its NaNs last, as every sort leaves them
    inf, nan = float("inf"), float("nan")
    x1 = np.array([-inf, -1.0, 0.0, 0.0, 2.0, inf, inf, nan, nan])
    x2 = np.array([nan, inf, -inf, 0.0, 1.0, 3.0, -2.0, nan])
    for a in (x1, x1[:-2], x1[1:5]):
        for side in ("left", "right"):
            got = gt.searchsorted(gt.asarray(a, dtype=gt.float64), gt.asarray(x2, dtype=gt.float64), side=side)
            assert got.dtype == gt.int64
            np.testing.assert_array_equal(np.asarray(got), np.searchsorted(a, x2, side=side), err_msg=side)
    got = gt.searchsorted(gt.asarray(x1, dtype=gt.float64), nan, side="left")
    assert int(got) == 7 and int(gt.searchsorted(gt.asarray(x1, dtype=gt.float64), inf, side="right")) == 7
