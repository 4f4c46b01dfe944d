"""The dask backend: lazy recording, chunks, computing on demand, and what dask cannot do.

These run wherever dask is installed (``pip install ".[dask]"``, which the test command does); the
whole suite also runs on dask with ``pytest --backend dask``.  The cluster (larger than memory) is
tests/test_dask_cluster.py.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gradtape as gt

da = pytest.importorskip("dask.array", reason="the dask backend needs dask: pip install 'dask[array]' distributed")
dask = pytest.importorskip("dask")


class Counter:
    """A map_blocks function that counts the chunks it computes (to see what runs, and how often)."""

    def __init__(self):
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, block):
        with self._lock:
            self.calls += 1
        return block


def counted(values, chunks):
    counter = Counter()
    base = da.from_array(np.asarray(values, dtype=np.float64), chunks=chunks)
    return base.map_blocks(counter, dtype=np.float64, meta=np.empty((0,) * base.ndim)), counter


@pytest.fixture
def on_dask():
    with gt.use_backend("dask"):
        yield


def _mlp_loss(x, w1, w2, y):
    h = gt.tanh(x @ w1)
    return gt.mean((h @ w2 - y) ** 2) + 0.1 * gt.sum(w1**2)


def test_nothing_is_computed_until_asked(on_dask):
    rng = np.random.default_rng(0)
    x_native, counter = counted(rng.normal(size=(8, 3)), chunks=(2, 3))
    x = gt.constant(x_native)
    w = gt.Variable(rng.normal(size=(3, 2)))
    with gt.GradientTape() as tape:
        loss = gt.sum(gt.sin(x @ w) ** 2)
    grad = tape.gradient(loss, w)
    assert isinstance(loss.native, da.Array) and isinstance(grad.native, da.Array)
    assert counter.calls == 0, "recording and differentiating must build graphs, not compute"
    assert loss.shape == () and grad.shape == (3, 2) and grad.dtype == gt.float64
    # one pass for both: the x chunks, which the loss and the gradient share, are computed once each
    loss_value, grad_value = gt.compute(loss, grad)
    assert counter.calls == 4
    assert isinstance(loss_value, np.ndarray) and isinstance(grad_value, np.ndarray)
    counter.calls = 0
    loss.compute(), grad.compute()
    assert counter.calls == 8  # separately, each pass computes them again


def test_gradients_equal_numpy_and_keep_their_sources_chunks(on_dask):
    rng = np.random.default_rng(1)
    xs, w1s, w2s, ys = (
        rng.normal(size=(12, 5)),
        rng.normal(size=(5, 4)),
        rng.normal(size=(4, 1)),
        rng.normal(size=(12, 1)),
    )
    x = gt.asarray(xs, chunks=(3, 5))
    w1 = gt.Variable(gt.asarray(w1s, chunks=(2, 4)))
    w2 = gt.Variable(gt.asarray(w2s, chunks=(3, 1)))
    y = gt.asarray(ys, chunks=(4, 1))
    with gt.GradientTape() as tape:
        tape.watch(x)
        loss = _mlp_loss(x, w1, w2, y)
    grads = tape.gradient(loss, [x, w1, w2])
    with gt.use_backend("numpy"):
        nx, nw1, nw2 = gt.constant(xs), gt.Variable(w1s), gt.Variable(w2s)
        with gt.GradientTape() as tape:
            tape.watch(nx)
            nloss = _mlp_loss(nx, nw1, nw2, gt.constant(ys))
        expected = tape.gradient(nloss, [nx, nw1, nw2])
    for g, e, src in zip(grads, expected, [x, w1, w2]):
        assert g.native.chunks == src.native.chunks
        np.testing.assert_allclose(g.compute(), e.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(float(loss), float(nloss), rtol=1e-12)


@pytest.mark.parametrize(
    "key",
    [
        np.s_[1:5],
        np.s_[::2, 1],
        np.s_[np.array([0, 2, 2, 5])],
        np.s_[:, np.array([1, 1, 0])],
        np.s_[np.array([0, 3]), np.array([1, 2])],
    ],
    ids=["slice", "strided", "repeated-ints", "ints-axis1", "ints-two-axes"],
)
def test_indexing_gradients_accumulate_lazily(on_dask, key):
    xs = np.arange(24.0).reshape(6, 4)
    x_native, counter = counted(xs, chunks=(2, 2))
    x = gt.constant(x_native)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sum(x[key] ** 2)
    g = tape.gradient(y, x)
    assert counter.calls == 0
    expected = np.zeros_like(xs)
    np.add.at(expected, key, 2 * xs[key])
    np.testing.assert_allclose(g.compute(), expected)
    assert g.native.chunks == x.native.chunks


def test_a_training_loop_persists_its_variables(on_dask):
    rng = np.random.default_rng(2)
    x = gt.asarray(rng.normal(size=(16, 3)), chunks=(4, 3))
    y = gt.asarray(rng.normal(size=(16, 1)), chunks=(4, 1))
    w = gt.Variable(gt.zeros((3, 1), dtype=gt.float64))
    opt = gt.optimizers.SGD(0.1)
    sizes = []
    for _ in range(3):
        with gt.GradientTape() as tape:
            loss = gt.mean((x @ w - y) ** 2)
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        sizes.append(len(w.native.__dask_graph__()))
        (value,) = gt.persist(w.read_value())
        w.assign(value)
    assert sizes[0] == sizes[-1], f"the variable's graph grew step by step: {sizes}"
    with gt.use_backend("numpy"):
        wn = gt.Variable(gt.zeros((3, 1), dtype=gt.float64))
        xn, yn = gt.constant(x.compute()), gt.constant(y.compute())
        opt = gt.optimizers.SGD(0.1)
        for _ in range(3):
            with gt.GradientTape() as tape:
                loss = gt.mean((xn @ wn - yn) ** 2)
            opt.apply_gradients([(tape.gradient(loss, wn), wn)])
    np.testing.assert_allclose(w.numpy(), wn.numpy(), rtol=1e-12)


def test_printing_and_conversions_compute(on_dask):
    t = gt.asarray(np.array([1.5, 2.5]), chunks=1)
    assert "backend=dask" in repr(t) and "1.5" in repr(t)
    assert float(gt.sum(t)) == 4.0
    np.testing.assert_array_equal(np.asarray(t), [1.5, 2.5])
    np.testing.assert_array_equal(np.from_dlpack(t), [1.5, 2.5])
    assert t.device == "cpu"


def test_a_boolean_mask_is_refused_by_name(on_dask):
    x = gt.asarray(np.arange(6.0), chunks=3)
    with pytest.raises(NotImplementedError, match="getitem.*dask.*depends on the data"):
        x[x > 2.0]
    with pytest.raises(NotImplementedError, match="repeat.*dask.*depends on the data"):
        gt.repeat(x, gt.asarray(np.array([1, 0, 2, 1, 1, 1])))
    # a host (NumPy) mask is known: the result's shape is, and the gradient flows
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sum(x[np.array([True, False] * 3)] ** 2)
    np.testing.assert_allclose(tape.gradient(y, x).compute(), [0, 0, 4, 0, 8, 0])
    # what works instead: a masked reduction keeps its shape
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sum(gt.where(x > 2.0, x**2, 0.0))
    np.testing.assert_allclose(tape.gradient(y, x).compute(), [0, 0, 0, 6, 8, 10])


def test_chunks_are_for_dask_only():
    with gt.use_backend("numpy"), pytest.raises(ValueError, match="chunks= is for the dask backend"):
        gt.asarray([1.0, 2.0], chunks=1)


def test_compute_takes_tensors_of_several_backends():
    with gt.use_backend("dask"):
        a = gt.asarray(np.ones(4), chunks=2) * 2
    b = gt.constant([3.0])
    va, vb = gt.compute(a, b)
    np.testing.assert_array_equal(va, [2.0] * 4)
    np.testing.assert_array_equal(vb, [3.0])
    with pytest.raises(TypeError, match="gt.compute"):
        gt.compute(np.ones(2))
    # persist on an eager backend: the tensor itself
    assert gt.persist(b)[0] is b
