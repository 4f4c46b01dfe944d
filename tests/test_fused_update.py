"""Gradient descent's step as one update (issue 23, W3): ``gt.optimizers.SGD`` without momentum writes
``var - grad * lr`` into the variable (TensorFlow's ``ResourceApplyGradientDescent``): on PyTorch with
``addcmul_`` (no product allocated), on NumPy block by block through a small buffer (no product of the
variable's size), elsewhere the product and the difference as before.  Every backend: the values of
``var - grad * lr`` (bit for bit where the backend computes the product and the difference; within one
rounding on PyTorch, whose kernel fuses them), every variable updated in place where the backend
can (the last one of an ``apply`` too), a replayed ``gt.function`` step giving the eager step's bits,
and the sparse cross-entropy's forward on PyTorch by ``F.cross_entropy``'s kernels.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import registry
from gradtape.core.backend import Backend
from test_fused_grads import _aten_ops_of  # (tests/ is on the path: pytest puts a test's folder there)

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch not installed")
#: backends whose arrays a Variable can update in place (the others make a new value each step)
IN_PLACE = ("numpy", "torch")
#: (784, 512): larger than NumPy's update block, in more than one block and a partial last one
SHAPES = [(5,), (3, 4), (784, 512), (100_003,)]


def _reference(p, g, lr, dtype, steps):
    """``p - g * lr`` ``steps`` times in NumPy, in ``dtype`` (the product and the difference rounded)."""
    p = p.astype(dtype)
    for _ in range(steps):
        p = p - g.astype(dtype) * dtype(lr)
    return p


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_sgd_step_is_var_minus_grad_times_lr(backend, dtype, shape):
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=shape).astype(dtype)
    g = rng.normal(size=shape).astype(dtype)
    v = gt.Variable(p0)
    opt = gt.optimizers.SGD(0.037)
    for _ in range(3):
        opt.apply_gradients([(gt.constant(g), v)])
    want = _reference(p0, g, 0.037, dtype, 3)
    got = v.numpy()
    assert got.dtype == dtype
    if backend == "torch":  # (addcmul fuses the product into the difference: one rounding fewer)
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps, atol=4 * np.finfo(dtype).eps)
    else:
        np.testing.assert_array_equal(got, want)
    assert int(opt.iterations.numpy()) == 3


def test_sgd_updates_every_variable_in_place(backend):
    """Every variable of an ``apply`` is written in place where the backend can: the last one too (a
    reference the optimizer kept to its value made its update a new array); Adam and momentum too."""
    if backend.split(":")[0] not in IN_PLACE:
        pytest.skip(f"{backend}'s arrays are not updated in place")
    rng = np.random.default_rng(1)
    shapes = [(784, 512), (512,), (3, 4), (70_000,)]
    for opt in (gt.optimizers.SGD(0.01), gt.optimizers.SGD(0.01, momentum=0.9), gt.optimizers.Adam(0.01)):
        params = [gt.Variable(rng.normal(size=s).astype(np.float32)) for s in shapes]
        grads = [gt.constant(rng.normal(size=s).astype(np.float32)) for s in shapes]
        start = [p.numpy().copy() for p in params]
        opt.apply_gradients(zip(grads, params))  # (slots made, values owned)
        opt.apply_gradients(zip(grads, params))
        before = [id(p._v) for p in params]
        opt.apply_gradients(zip(grads, params))
        assert [id(p._v) for p in params] == before, type(opt).__name__
        assert all(not np.array_equal(p.numpy(), s) for p, s in zip(params, start))


def test_a_shared_value_is_not_written_in_place(backend):
    """A value someone else still holds (a Tensor read from the variable) is left as it was: the step
    makes a new value, of the same numbers."""
    rng = np.random.default_rng(2)
    p0 = rng.normal(size=(300, 200)).astype(np.float32)
    g = rng.normal(size=(300, 200)).astype(np.float32)
    v = gt.Variable(p0)
    held = v.read_value()
    kept = held.numpy().copy()
    gt.optimizers.SGD(0.5).apply_gradients([(gt.constant(g), v)])
    np.testing.assert_array_equal(held.numpy(), kept)
    np.testing.assert_allclose(v.numpy(), p0 - g * np.float32(0.5), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_replayed_sgd_step_gives_the_eager_bits(backend, jit_compile):
    """An SGD step (a tanh layer, the sparse cross-entropy) eagerly and as a ``gt.function``: the replayed
    program (``jit_compile=False``) runs the eager step's kernels (PyTorch's ``addcmul``, recorded as one
    step), so the variables end bit for bit equal; compiled, within rounding."""
    if jit_compile and backend.split(":")[0] not in ("torch", "jax"):
        pytest.skip(f"jit_compile=True is jit_compile=None on {backend}")
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(16, 8)).astype(np.float32)
    labels = rng.integers(0, 4, size=16)
    w0 = (rng.normal(size=(8, 4)) / 3).astype(np.float32)

    def make():
        w = gt.Variable(w0)
        b = gt.Variable(np.full((4,), 0.01, np.float32))
        opt = gt.optimizers.SGD(0.1)

        def step(x, lab):
            with gt.GradientTape() as tape:
                logits = gt.tanh(x @ w + b)
                loss = gt.reduce_mean(gt.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=logits))
            grads = tape.gradient(loss, [w, b])
            opt.apply_gradients(zip(grads, [w, b]))
            return loss

        return w, b, step

    w_e, b_e, eager = make()
    w_f, b_f, stepped = make()
    compiled = gt.function(stepped, jit_compile=jit_compile)
    x, lab = gt.constant(xs), gt.constant(labels)
    for _ in range(3):
        le = eager(x, lab)
        lf = compiled(x, lab)
    if jit_compile:
        np.testing.assert_allclose(w_f.numpy(), w_e.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(lf.numpy(), le.numpy(), rtol=1e-5)
    else:
        np.testing.assert_array_equal(w_f.numpy(), w_e.numpy())
        np.testing.assert_array_equal(b_f.numpy(), b_e.numpy())
        np.testing.assert_array_equal(lf.numpy(), le.numpy())


# ------------------------------------------------------------------------- PyTorch's kernels
@needs_torch
def test_torch_runs_one_kernel_per_variable_and_the_cross_entropy_kernels():
    """On PyTorch: the SGD step is one ``addcmul_`` per variable (no ``mul``), the sparse cross-entropy's
    forward ``log_softmax`` + ``nll_loss`` (no gather of a shifted copy, no ``exp`` / ``log`` of its own)."""
    with gt.use_backend("torch"):
        rng = np.random.default_rng(4)
        params = [gt.Variable(rng.normal(size=s).astype(np.float32)) for s in ((6, 3), (3,))]
        grads = [gt.constant(np.ones(s, np.float32)) for s in ((6, 3), (3,))]
        opt = gt.optimizers.SGD(0.1)
        opt.apply_gradients(zip(grads, params))
        seen, _ = _aten_ops_of(lambda: opt.apply_gradients(zip(grads, params)))
        assert seen.count("addcmul_") == 2 and "mul" not in seen, seen

        logits = gt.constant(rng.normal(size=(5, 3)).astype(np.float32))
        lab = gt.constant(np.array([0, 2, 1, 1, 0]))
        seen, _ = _aten_ops_of(lambda: gt.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=logits))
        assert "nll_loss_forward" in seen and "_log_softmax" in seen, seen
        assert not {"exp", "log", "gather", "take_along_dim", "amax"} & set(seen), seen


@needs_torch
def test_torch_cross_entropy_forward_against_the_ops_own():
    """The adapter's form against the op's own forward (``Backend.op_impl``): within rounding for 1-D,
    2-D and 3-D logits, int32 and int64 labels, NaN and infinite logits; the op's own where the kernels do
    not apply (no elements)."""
    import torch

    b = gt.backends.get("torch")
    op = registry.get_op("sparse_softmax_cross_entropy_with_logits")
    fused, own = b.op_impl(op), Backend.op_impl(b, op)
    rng = np.random.default_rng(5)
    for shape in ((5,), (4, 5), (2, 3, 5)):
        for dt in (torch.float32, torch.float64):
            z = torch.tensor(3 * rng.normal(size=shape), dtype=dt)
            for ldt in (torch.int32, torch.int64):
                lab = torch.tensor(rng.integers(0, 5, size=shape[:-1]), dtype=ldt)
                got, want = fused(lab, z), own(lab, z)
                assert got.shape == want.shape and got.dtype == want.dtype
                torch.testing.assert_close(got, want, rtol=1e-6 if dt == torch.float32 else 1e-13, atol=1e-6)
    z = torch.tensor([[np.inf, 1.0, 2.0], [-np.inf, 1.0, 2.0], [np.nan, 1.0, 2.0], [1.0, 2.0, 3.0]])
    lab = torch.tensor([0, 0, 1, 2])
    torch.testing.assert_close(fused(lab, z), own(lab, z), equal_nan=True)
    empty = (torch.zeros((0,), dtype=torch.int64), torch.zeros((0, 5)))
    assert torch.equal(fused(*empty), own(*empty))
