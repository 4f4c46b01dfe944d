"""The adapters (issue 3): each implements the Backend interface with the same meaning, so one program
gives the same numbers (to float round-off) on every installed backend."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import backend_registry as _backends

Backend = _backends.Backend

INSTALLED = gt.available_backends()
DTYPES = [gt.bool, gt.int8, gt.int16, gt.int32, gt.int64, gt.uint8, gt.float32, gt.float64, gt.complex64, gt.complex128]


def _b(backend):
    return _backends.get(backend.split(":")[0])


def close(a, b, rtol=1e-6, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# --------------------------------------------------------------------------- dtypes and types
def test_dtypes_map_to_gradtape_dtypes(backend):
    b = _b(backend)
    for d in DTYPES:
        t = gt.constant(np.zeros(3, dtype=np.dtype(d.name)))
        assert t.dtype == d and t.dtype is d, (d, t.dtype)
        assert b.dtype_from_native(b.dtype_to_native(d)) is d and b.dtype_of(t.native) is d
        assert gt.zeros((2,), dtype=d).dtype is d


def test_python_values_get_tensorflow_defaults(backend):
    assert gt.constant(1.5).dtype is gt.float32
    assert gt.constant([1.5, 2.0]).dtype is gt.float32
    assert gt.constant(3).dtype is gt.int64
    assert gt.constant(True).dtype is gt.bool
    assert gt.constant(1j).dtype is gt.complex64
    assert gt.zeros((2,)).dtype is gt.float32 and gt.ones((2,)).dtype is gt.float32


def test_float64_computes_in_float64(backend):
    x = gt.constant(np.array([0.1, 0.2, 0.3]), dtype=gt.float64)
    y = gt.exp(x) * 3.0 - x / 7.0
    assert y.dtype is gt.float64
    close(y, np.exp([0.1, 0.2, 0.3]) * 3.0 - np.array([0.1, 0.2, 0.3]) / 7.0, rtol=1e-15, atol=0)
    third = gt.constant(1.0, dtype=gt.float64) / 3.0
    assert abs(float(third) - 1.0 / 3.0) < 1e-16  # not float32 in disguise (jax_enable_x64)


def test_outputs_are_exactly_array_type(backend):
    """``array_type`` is the class ops return, so the dispatcher never pays for ``fix_output``."""
    b = _b(backend)
    x = gt.constant([[1.0, 2.0], [3.0, 4.0]])
    for out in (
        x + x,
        x * 2.0,
        gt.sin(x),
        gt.sum(x),
        gt.sum(x[0]),
        x @ x,
        gt.reshape(x, (4,)),
        x[0, 1],
        gt.mean(x, axis=0),
        gt.maximum(x, 1.0),
        gt.where(x > 2.0, x, 0.0),
        x == 2.0,
    ):
        assert type(out.native) is b.array_type, (type(out.native), b.array_type)


def test_python_scalars_keep_the_tensor_dtype(backend):
    x = gt.constant([1.0, 2.0])
    for y in (x * 2.0, 2.0 * x, x + 1, 1 - x, x / 2, 2.0 / x, x**2, 2.0**x, gt.maximum(x, 1.5)):
        assert y.dtype is gt.float32
    i = gt.constant([1, 2])
    assert (i * 2).dtype is gt.int64 and (3 - i).dtype is gt.int64
    d = gt.constant([1.0], dtype=gt.float64)
    assert (d * 3.0).dtype is gt.float64 and (1.0 - d).dtype is gt.float64


def test_zero_d_tensors_promote_as_the_standard_says(backend):
    """PyTorch lets a 0-d tensor's dtype lose against an n-d tensor; the standard does not."""
    a = gt.constant([1.0, 2.0])  # float32, shape (2,)
    s = gt.constant(3.0, dtype=gt.float64)  # float64, shape ()
    for y in (a + s, s * a, a - s, gt.maximum(a, s), a @ gt.constant([1.0, 1.0], dtype=gt.float64)):
        assert y.dtype is gt.float64


@pytest.mark.parametrize("axis", [None, (), 0, -1, (0,), (1, 2), (0, 1, 2)], ids=str)
def test_reductions_over_axis_tuples(backend, axis):
    b = _b(backend)
    a = np.arange(1.0, 25.0).reshape(2, 3, 4) / 7.0
    x = b.asarray(a, dtype=gt.float64)
    for name in ("sum", "prod", "mean", "max", "min"):
        for keepdims in (False, True):
            got = getattr(b.xp, name)(x, axis=axis, keepdims=keepdims)
            want = getattr(np, name)(a, axis=axis, keepdims=keepdims)
            assert tuple(got.shape) == want.shape, (name, axis, keepdims)
            close(b.to_numpy(got), want, rtol=1e-14, atol=0)


SHAPE_MISMATCHES = {
    "reshape": lambda: gt.reshape(gt.ones((2,)), (3, 5)),
    "matmul": lambda: gt.matmul(gt.ones((2, 3)), gt.ones((2, 3))),
    "add": lambda: gt.ones((2, 3)) + gt.ones((4,)),
    "broadcast_to": lambda: gt.broadcast_to(gt.ones((3,)), (2, 4)),
    "concat": lambda: gt.concat([gt.ones((2, 3)), gt.ones((2, 4))], axis=0),
    "stack": lambda: gt.stack([gt.ones((2,)), gt.ones((3,))]),
    "squeeze": lambda: gt.squeeze(gt.ones((2, 3)), axis=0),
    "permute_dims": lambda: gt.permute_dims(gt.ones((2, 3)), (0, 0)),
    "tensordot": lambda: gt.tensordot(gt.ones((2, 3)), gt.ones((2, 3)), axes=1),
    "vecdot": lambda: gt.vecdot(gt.ones((2, 3)), gt.ones((2, 4))),
    "where": lambda: gt.where(gt.ones((2,)) > 0, gt.ones((3,)), gt.ones((2,))),
}


@pytest.mark.parametrize("op", SHAPE_MISMATCHES)
def test_shape_mismatches_are_value_errors(backend, op):
    """Each library has its own exception class for a shape mismatch (PyTorch RuntimeError, JAX
    TypeError for some ops); gradtape raises ValueError on every backend, naming the op."""
    with pytest.raises(ValueError, match=op):
        SHAPE_MISMATCHES[op]()


# --------------------------------------------------------------------------- what the standard lacks
A = np.arange(24.0).reshape(2, 3, 4)
KEYS = [
    (1,),
    (slice(None), 2),
    (Ellipsis, 1),
    (None, 0),
    (0, slice(0, 3, 2)),
    (Ellipsis, None, slice(1, 3)),
    (np.array([1, 1, 0]),),  # repeated indices accumulate
    (slice(None), np.array([2, 0, 2, 2])),
    (np.array([0, 1, 1]), np.array([2, 2, 0]), np.array([3, 3, 1])),
    (1, np.array([0, 0]), slice(None)),
    (A > 10.0,),
    (0, A[0] > 3.0),
    (Ellipsis, np.array([3, 3])),
    (slice(None, None, -1),),
    (Ellipsis, slice(3, 0, -2)),
    (np.array([1, 1]), slice(None, None, -2), 0),
]


def _key_id(key):
    def one(k):
        if isinstance(k, np.ndarray):
            return f"{'mask' if k.dtype == bool else 'ints'}{list(k.shape)}"
        if isinstance(k, slice):
            return "slice" if k.step is None or k.step > 0 else "slice<0"
        return {None: "None", Ellipsis: "..."}.get(k, repr(k))

    return ",".join(one(k) for k in key)


def _native_key(b, key):
    return tuple(b.asarray(k) if isinstance(k, np.ndarray) else k for k in key)


@pytest.mark.parametrize("key", KEYS, ids=_key_id)
def test_index_add_accumulates_like_numpy_add_at(backend, key):
    b = _b(backend)
    shape = A.shape
    sel = A[key]
    values = np.arange(1.0, sel.size + 1).reshape(sel.shape)
    want = np.zeros(shape)
    np.add.at(want, key, values)
    out = b.index_add(shape, gt.float64, _native_key(b, key), b.asarray(values, dtype=gt.float64))
    assert type(out) is b.array_type and b.dtype_of(out) is gt.float64
    close(b.to_numpy(out), want, rtol=0, atol=0)


@pytest.mark.parametrize("key", KEYS, ids=_key_id)
def test_setitem_is_functional(backend, key):
    b = _b(backend)
    x = b.asarray(A, dtype=gt.float64)
    sel = A[key]
    value = -np.arange(1.0, sel.size + 1).reshape(sel.shape)
    if any(isinstance(k, np.ndarray) and k.dtype.kind in "iu" and len(np.unique(k)) < k.size for k in key):
        value = np.full(sel.shape, -5.0)  # repeated targets: which write wins is unspecified
    want = A.copy()
    want[key] = value
    out = b.setitem(x, _native_key(b, key), b.asarray(value, dtype=gt.float64))
    close(b.to_numpy(out), want, rtol=0, atol=0)
    close(b.to_numpy(x), A, rtol=0, atol=0)  # the input is untouched
    out2 = b.setitem(x, (0, 0, 0), 7.0)  # a Python scalar value
    assert b.to_numpy(out2)[0, 0, 0] == 7.0 and b.to_numpy(x)[0, 0, 0] == 0.0


@pytest.mark.parametrize("key", KEYS, ids=_key_id)
def test_getitem_takes_every_key(backend, key):
    t = gt.constant(A)
    close(t[key], A[key], rtol=0, atol=0)


def test_indexing_gradients_accumulate(backend):
    x = gt.Variable(np.arange(6.0).reshape(2, 3))
    with gt.GradientTape(persistent=True) as tape:
        ys = [x[gt.constant([1, 1, 0])], x[1, gt.constant([2, 2])], x[x > 2.5], x[0, 1:] * 2.0]
    want = [[[1, 1, 1], [2, 2, 2]], [[0, 0, 0], [0, 0, 2]], [[0, 0, 0], [1, 1, 1]], [[0, 2, 2], [0, 0, 0]]]
    for y, w in zip(ys, want):
        close(tape.gradient(y, x), w)


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
def test_erf_is_accurate(backend, dtype):
    b = _b(backend)
    xs = np.linspace(-4.0, 4.0, 41)
    want = np.array([math.erf(v) for v in xs])
    out = b.erf(b.asarray(xs, dtype=dtype))
    assert b.dtype_of(out) is dtype and type(out) is b.array_type
    close(b.to_numpy(out), want, rtol=0, atol=1e-6 if dtype is gt.float32 else 1e-15)


# --------------------------------------------------------------------------- random numbers
def test_same_seed_same_numbers_on_every_backend(backend):
    b = _b(backend)
    draw = Backend.random_generator(1234).standard_normal((3, 4))
    out = b.random_from_numpy(draw.astype(np.float32), gt.float32)
    assert b.dtype_of(out) is gt.float32 and b.device_str(b.device_of(out)) == b.device_str(b.device)
    want = np.random.Generator(np.random.PCG64(1234)).standard_normal((3, 4)).astype(np.float32)
    close(b.to_numpy(out), want, rtol=0, atol=0)
    if hasattr(gt.random, "Generator"):
        g1 = gt.random.Generator.from_seed(7).normal((5,))
        with gt.use_backend("numpy"):
            g2 = gt.random.Generator.from_seed(7).normal((5,))
        assert g1.backend == backend.split(":")[0] and g2.backend == "numpy"
        close(g1.numpy(), g2.numpy(), rtol=0, atol=0)


# --------------------------------------------------------------------------- DLPack
@pytest.mark.parametrize("source", INSTALLED)
def test_dlpack_transfer_between_backends(backend, source):
    b, src = _b(backend), _backends.get(source)
    for arr in (np.arange(6.0, dtype=np.float32).reshape(2, 3), np.array([1, -2, 3], dtype=np.int64), np.array(2.5)):
        native = src.asarray(arr)
        out = b.from_dlpack(native)
        assert type(out) is b.array_type
        assert b.dtype_of(out).name == arr.dtype.name
        close(b.to_numpy(out), arr, rtol=0, atol=0)


def test_tensors_export_through_dlpack(backend):
    t = gt.constant([[1.0, 2.0], [3.0, 4.0]])
    close(np.from_dlpack(t), [[1.0, 2.0], [3.0, 4.0]])
    assert t.__dlpack_device__()[0] == 1  # kDLCPU
    u = gt.from_dlpack(np.arange(3.0))
    assert u.backend == backend.split(":")[0] and u.dtype is gt.float64
    close(u, [0.0, 1.0, 2.0])


# --------------------------------------------------------------------------- vmap and native autodiff
def test_vmap_where_the_library_has_one(backend):
    b = _b(backend)
    xp = b.xp
    batch = b.asarray(np.arange(12.0).reshape(3, 4), dtype=gt.float32)
    if not b.supports_vmap:
        with pytest.raises(NotImplementedError):
            b.vmap(lambda v: v)
        return
    out = b.vmap(lambda v: xp.sum(v * v))(batch)
    close(b.to_numpy(out), (np.arange(12.0).reshape(3, 4) ** 2).sum(axis=1))
    out = b.vmap(lambda v, w: v * w, in_axes=(1, None), out_axes=1)(batch, b.asarray(np.float32(2.0)))
    close(b.to_numpy(out), np.arange(12.0).reshape(3, 4) * 2.0)


def test_scatter_and_setitem_work_inside_vmap(backend):
    """Jacobians map one backward walk over a batch of cotangents, so the indexing rules'
    ``setitem``/``index_add`` must accept batched values inside the library's vmap."""
    b = _b(backend)
    if not b.supports_vmap:
        pytest.skip(f"{backend} has no vmap")
    rows = np.arange(6.0).reshape(3, 2)
    batch = b.asarray(rows, dtype=gt.float64)
    base = b.asarray(np.zeros(4), dtype=gt.float64)
    idx = b.asarray(np.array([0, 0]))
    cases = [
        (lambda v: b.setitem(base, (slice(1, 3),), v), lambda r: np.concatenate([[0.0], r, [0.0]])),
        (lambda v: b.setitem(base, (slice(None, None, -2),), v), lambda r: np.array([0.0, r[1], 0.0, r[0]])),
        (lambda v: b.index_add((4,), gt.float64, (idx,), v), lambda r: np.array([r.sum(), 0.0, 0.0, 0.0])),
        (lambda v: b.index_add((4,), gt.float64, (slice(2, 4),), v), lambda r: np.concatenate([[0.0, 0.0], r])),
    ]
    for fn, want in cases:
        close(b.to_numpy(b.vmap(fn)(batch)), np.stack([want(r) for r in rows]), rtol=0, atol=0)


def test_native_autodiff_agrees_with_the_tape(backend):
    b = _b(backend)
    if not b.supports_native_grad:
        with pytest.raises(NotImplementedError):
            b.native_grad(lambda v: v, b.asarray(np.ones(2)))
        return
    xp = b.xp
    x0 = np.array([[0.3, -1.2], [2.0, 0.5]])
    y0 = np.array([1.5, -0.7])

    def f(x, y):
        return xp.sum(xp.tanh(x @ y) * xp.exp(x[0]))

    gx, gy = b.native_grad(f, b.asarray(x0, dtype=gt.float64), b.asarray(y0, dtype=gt.float64))
    x, y = gt.Variable(x0, dtype=gt.float64), gt.Variable(y0, dtype=gt.float64)
    with gt.GradientTape() as t:
        z = gt.sum(gt.tanh(x @ y) * gt.exp(x[0]))
    tx, ty = t.gradient(z, [x, y])
    close(b.to_numpy(gx), tx.numpy(), rtol=1e-12, atol=1e-12)
    close(b.to_numpy(gy), ty.numpy(), rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- one program, every backend
def _program(dtype, seed=0):
    """A small model with most kinds of op (matmul, reductions, indexing, where, broadcasting):
    returns its loss and gradients as NumPy arrays."""
    rng = np.random.default_rng(seed)
    w = gt.Variable(rng.standard_normal((4, 3)), dtype=dtype)
    bias = gt.Variable(rng.standard_normal(3), dtype=dtype)
    x = gt.constant(rng.standard_normal((5, 4)), dtype=dtype)
    labels = np.array([0, 2, 1, 1, 0])
    with gt.GradientTape() as tape:
        h = gt.tanh(x @ w + bias)
        h = gt.where(h > 0.0, h, 0.1 * h)
        logits = h * 2.0 - gt.mean(h, axis=0, keepdims=True)
        m = gt.max(logits, axis=1, keepdims=True)
        lse = gt.log(gt.sum(gt.exp(logits - m), axis=1)) + m[:, 0]
        picked = logits[gt.constant(np.arange(5)), gt.constant(labels)]
        loss = gt.mean(lse - picked) + 0.01 * gt.sum(w * w) + gt.sum(gt.sqrt(bias * bias + 1.0))
    gw, gb = tape.gradient(loss, [w, bias])
    assert loss.dtype is dtype and gw.dtype is dtype and gb.dtype is dtype
    return [loss.numpy(), gw.numpy(), gb.numpy()]


@pytest.mark.parametrize("dtype,tol", [(gt.float64, 1e-12), (gt.float32, 1e-5)], ids=["float64", "float32"])
def test_results_equal_across_backends(backend, dtype, tol):
    got = _program(dtype)
    with gt.use_backend("numpy"):
        want = _program(dtype)
    for g, w in zip(got, want):
        close(g, w, rtol=tol, atol=tol)


# --------------------------------------------------------------------------- torch's fast namespace
def test_torch_fast_namespace_matches_array_api_compat():
    """The direct torch calls behind gradtape's torch namespace give what array_api_compat gives."""
    if "torch" not in INSTALLED:
        pytest.skip("torch is not installed")
    import array_api_compat.torch as compat
    import torch

    ns = _backends.get("torch").xp
    f32 = torch.tensor([1.5, -2.0, 3.0])
    f64_0d = torch.tensor(2.0, dtype=torch.float64)
    i64 = torch.tensor([1, 2, 3])
    u8 = torch.tensor([1, 2, 3], dtype=torch.uint8)
    i8_0d = torch.tensor(-1, dtype=torch.int8)
    pairs = [
        (f32, f32),
        (f32, f64_0d),
        (f64_0d, f32),
        (f32, 2.0),
        (2.0, f32),
        (f32, 2),
        (3, f32),
        (i64, 2),
        (u8, i8_0d),
        (i8_0d, u8),
        (i64, u8),
        (f32, True),
    ]
    for name in (
        "add",
        "subtract",
        "multiply",
        "divide",
        "pow",
        "maximum",
        "minimum",
        "equal",
        "less",
        "greater_equal",
        "atan2",
        "hypot",
        "copysign",
        "remainder",
        "floor_divide",
    ):
        for a, c in pairs:
            try:
                want = getattr(compat, name)(a, c)
            except Exception as e:  # whatever compat raises, ours must raise too
                with pytest.raises(type(e)):
                    getattr(ns, name)(a, c)
                continue
            got = getattr(ns, name)(a, c)
            assert got.dtype == want.dtype, (name, a, c)
            assert torch.equal(got, want) or torch.allclose(got, want, equal_nan=True), (name, a, c)
    m32, m64 = torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64)
    assert ns.matmul(m32, m64).dtype == torch.float64 == compat.matmul(m32, m64).dtype
    assert ns.tensordot(m32, m64, axes=1).dtype == torch.float64
    z = torch.tensor([[1 + 2j, 3 - 1j]])
    assert torch.equal(ns.vecdot(z, z), compat.vecdot(z, z))
    assert torch.equal(ns.vecdot(m32, m32, axis=0), compat.vecdot(m32, m32, axis=0))
    assert ns.where(f32 > 0, f32, f64_0d).dtype == compat.where(f32 > 0, f32, f64_0d).dtype
    assert ns.expand_dims(f32, axis=-1).shape == (3, 1)
    with pytest.raises(ValueError):
        ns.squeeze(m32, axis=0)
    assert ns.squeeze(torch.ones(1, 3), axis=0).shape == (3,)
