"""The adapters against array-api-compat (issue 11): where the torch and jax adapters replace part of
array-api-compat by faster code of their own (fast paths around ``array_api_compat.torch``'s
wrappers, their own ``asarray``, dtype and device handling; for JAX, wrappers around ``jax.numpy``,
the namespace array-api-compat hands out for JAX arrays), both run here over a range of inputs and
must agree, so a change on either side that makes them drift apart fails here.  The second half tests
the methods the adapters share from ``Backend`` (``asarray``, ``dtype_of``, ``to_device``,
``from_dlpack``, ``parse_device``) on every installed backend and device, and on a bare adapter that
keeps every default."""

from __future__ import annotations

import inspect
import itertools
import sys
import warnings

import array_api_compat as aac
import array_api_compat.numpy as compat_numpy
import numpy as np
import pytest

import gradtape as gt
from gradtape.backends._masks import ALL_ZERO, NO_ZERO, SOME_ZERO, counted, unmasked_where_no_zero
from gradtape.core import backend_registry as _backends

Backend = _backends.Backend
INSTALLED = gt.available_backends()
needs_torch = pytest.mark.skipif("torch" not in INSTALLED, reason="torch not installed")
needs_jax = pytest.mark.skipif("jax" not in INSTALLED, reason="jax not installed")

DTYPES = list(gt.dtypes.ALL_DTYPES)  # every dtype gradtape has
PY_SCALARS = [True, 3, -1.5, 1 + 2j]
#: TensorFlow's dtypes for Python scalars, which the shared ``asarray`` gives on every backend
TF_DEFAULTS = {bool: gt.bool, int: gt.int64, float: gt.float32, complex: gt.complex64}
NESTED = [[1.0, 2.0], [[1, 2], [3, 4]], [True, False], [1j, 2.0], [[0.5], [1.5]], []]


def _b(backend):
    return _backends.get(backend.split(":")[0])


def _outcome(fn, *args, **kwargs):
    """``("ok", result)``, or ``("error", exception class)``: two implementations agree on both."""
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as e:  # the class is what is compared
        return "error", type(e)


def _host(x):
    return np.asarray(x.detach().cpu().resolve_conj()) if hasattr(x, "detach") else np.asarray(x)


def _assert_same(got, want, what):
    """Same outcome; for arrays, the same type, dtype, shape, device and values (NaN equals NaN)."""
    assert got[0] == want[0], f"{what}: {got} but array-api-compat gives {want}"
    if got[0] == "error":
        assert got[1] is want[1], f"{what}: raises {got[1].__name__}, array-api-compat {want[1].__name__}"
        return
    a, b = got[1], want[1]
    assert type(a) is type(b), f"{what}: {type(a)} vs {type(b)}"
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), (
        f"{what}: {a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}"
    )
    assert aac.device(a) == aac.device(b), f"{what}: device {aac.device(a)} vs {aac.device(b)}"
    if hasattr(a, "weak_type"):
        assert a.weak_type == b.weak_type, f"{what}: weak_type {a.weak_type} vs {b.weak_type}"
    np.testing.assert_array_equal(_host(a), _host(b), err_msg=what)


# ================================================================================== torch
@pytest.fixture(scope="module")
def torch_env():
    """torch, ``array_api_compat.torch`` and the adapter (optional dependencies: imported here)."""
    torch = pytest.importorskip("torch")
    return torch, pytest.importorskip("array_api_compat.torch"), _backends.get("torch")


def _torch_operands(torch):
    """Tensors of every kind of dtype, 0-d and 1-d, and Python scalars of every kind."""
    rows = {
        torch.bool: [True, False, True],
        torch.uint8: [2, 0, 3],
        torch.int32: [-2, 0, 3],
        torch.int64: [-2, 0, 3],
        torch.float32: [-1.5, 0.0, 2.5],
        torch.float64: [-1.5, 0.0, 2.5],
        torch.complex64: [1 + 1j, 0j, -2j],
    }
    out = []
    for dt, row in rows.items():
        out += [torch.tensor(row, dtype=dt), torch.tensor(row[0], dtype=dt)]
    return out + PY_SCALARS


@needs_torch
def test_torch_binary_table_is_compats(torch_env):
    """``_BINARY`` copies, per function, whether compat's wrapper turns a Python scalar into a tensor
    (its ``_two_arg`` flags) and which torch function it calls: a fast path is only right while so."""
    torch, compat, b = torch_env
    for name, (tname, s1, s2) in sys.modules[type(b).__module__]._BINARY.items():
        wrapped = inspect.getclosurevars(getattr(compat, name)).nonlocals
        assert wrapped.get("f") is getattr(torch, tname), f"compat.{name} no longer wraps torch.{tname}"
        assert (wrapped.get("scalar_x1"), wrapped.get("scalar_x2")) == (s1, s2), (
            f"compat.{name} converts Python scalars differently now: update _BINARY"
        )


@needs_torch
def test_torch_namespace_is_compats_with_fast_paths(torch_env):
    """Every name of ``array_api_compat.torch`` is there, the same object but for the fast ones."""
    torch, compat, b = torch_env
    fast = set(sys.modules[type(b).__module__]._BINARY) | {
        "matmul",
        "tensordot",
        "vecdot",
        "where",
        "expand_dims",
        "squeeze",
        "permute_dims",
        "max",  # (over an empty axis: NumPy's ValueError, not torch's IndexError)
        "min",
    }
    for name in dir(compat):
        if name.startswith("__") and name not in ("__array_api_version__", "__array_namespace_info__"):
            continue
        assert hasattr(b.xp, name), name
        if name not in fast:
            assert getattr(b.xp, name) is getattr(compat, name), name


@needs_torch
@pytest.mark.parametrize(
    "name",
    [
        "add",
        "subtract",
        "multiply",
        "divide",
        "pow",
        "remainder",
        "floor_divide",
        "maximum",
        "minimum",
        "equal",
        "not_equal",
        "greater",
        "greater_equal",
        "less",
        "less_equal",
        "atan2",
        "hypot",
        "logaddexp",
        "copysign",
        "nextafter",
        "logical_and",
        "logical_or",
        "logical_xor",
    ],
)
def test_torch_fast_binary_functions_match_compat(torch_env, name):
    """Every pair of operands, tensors (0-d, 1-d, of every kind of dtype) and Python scalars: the
    fast function and compat's give the same result or raise the same error."""
    torch, compat, b = torch_env
    ops = _torch_operands(torch)
    fast, slow = getattr(b.xp, name), getattr(compat, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x1, x2 in itertools.product(ops, ops):
            if not (isinstance(x1, torch.Tensor) or isinstance(x2, torch.Tensor)):
                continue
            _assert_same(_outcome(fast, x1, x2), _outcome(slow, x1, x2), f"{name}({x1!r}, {x2!r})")


#: Python scalars beside a float tensor: ordinary, inexact in float32, subnormal, past float32's
#: range, infinite, NaN, signed zeros, ints at and past float32's exact range
_SCALAR_OPERANDS = [
    1.0001,
    1e-6,
    3.0,
    1 / 3,
    0.1,
    -2.5,
    1e-45,
    5e-324,
    3.5e38,
    1e39,
    -1e300,
    float("inf"),
    -float("inf"),
    float("nan"),
    0.0,
    -0.0,
    0,
    2,
    -7,
    2**24,
    2**24 + 1,
    2**53 + 1,
]


@needs_torch
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_scalar_operand_cache_same_bits(torch_env, name, dtype):
    """A Python scalar beside a float32 / float64 CPU tensor goes to torch as a cached 0-d tensor of
    the tensor's dtype (faster than torch's wrapped number): the result has the dtype, the shape and
    the bits of torch's own ``fn(tensor, scalar)`` (signed zeros and NaN payloads included), in both
    operand orders, on the call that fills the cache and on the one that reads it."""
    torch, compat, b = torch_env
    dt = getattr(torch, dtype)
    ints = torch.int32 if dt is torch.float32 else torch.int64
    g = torch.Generator().manual_seed(0)
    base = torch.randn(400, generator=g, dtype=torch.float64) * torch.logspace(-320, 300, 400, dtype=torch.float64)
    specials = [0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan"), 1e-45, 3e38]
    x = torch.cat([base, torch.tensor(specials, dtype=torch.float64)]).to(dt)
    fast, torch_fn = getattr(b.xp, name), getattr(torch, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for v in _SCALAR_OPERANDS:
            for t in (x, x[3].clone()):  # 1-d and 0-d
                for args in ((t, v), (v, t)):
                    want = torch_fn(*args)
                    for _ in range(3):  # (the value met, the cache filled, then read)
                        got = fast(*args)
                        what = f"{name}({dtype}{tuple(t.shape)}, {v!r}) order {args[0] is v}"
                        assert got.dtype is want.dtype and got.shape == want.shape, what
                        assert torch.equal(got.view(ints), want.view(ints)), what


@needs_torch
def test_torch_scalar_operand_cache(torch_env):
    """What the cache gives: one 0-d tensor per (value, dtype) of a float32 / float64 CPU tensor; the
    scalar itself the first time a value is met, for zero (+0.0 and -0.0 share a key), for an int
    float32 cannot hold exactly, and beside other dtypes."""
    torch, compat, b = torch_env
    operand = sys.modules[type(b).__module__]._scalar_operand(torch)
    x32, x64 = torch.ones(2), torch.ones(2, dtype=torch.float64)
    first = operand(3.0, x32)  # (met once: the Python scalar as it is)
    assert first.__class__ is float and first == 3.0
    s = operand(3.0, x32)
    assert isinstance(s, torch.Tensor) and s.ndim == 0 and s.dtype is torch.float32 and s.item() == 3.0
    assert operand(3.0, x32) is s and operand(3, x32) is s
    assert operand(3.0, x64).__class__ is float and operand(3.0, x64).dtype is torch.float64
    for v in (0.0, -0.0, 0, 2**24 + 1):
        for _ in range(2):
            assert operand(v, x32) is v
    for t in (
        torch.ones(2, dtype=torch.float16),
        torch.ones(2, dtype=torch.int64),
        torch.ones(2, dtype=torch.complex64),
    ):
        for _ in range(2):
            assert operand(3.0, t) == 3.0 and not isinstance(operand(3.0, t), torch.Tensor)


@needs_torch
def test_torch_fast_where_matches_compat(torch_env):
    """``where`` goes straight to torch for two tensors of one dtype: the same as compat's for all."""
    torch, compat, b = torch_env
    ops = _torch_operands(torch)
    for cond in (torch.tensor([True, False, True]), torch.tensor(False)):
        for x1, x2 in itertools.product(ops, ops):
            _assert_same(
                _outcome(b.xp.where, cond, x1, x2),
                _outcome(compat.where, cond, x1, x2),
                f"where({cond!r}, {x1!r}, {x2!r})",
            )


@needs_torch
def test_torch_masks_read_values_only_of_eager_cpu_tensors(torch_env):
    """The masks' no-zero shortcut of ``xdivy`` / ``strong_zero_multiply`` (PyTorch's adapter reads
    whether a tensor has a zero) runs on eager CPU tensors and gives the masked bits there; under
    ``torch.func.vmap`` (batched tensors: no storage to read, no ``item()``) the adapter keeps the
    masks, so the map runs (a shortcut there would raise) with the same values; and beside a tensor
    that requires grad (torch's own count: NumPy cannot view it) it is the same."""
    torch, compat, b = torch_env
    from gradtape.core.registry import get_op

    xdivy, szm = (get_op(name).resolve(b) for name in ("xdivy", "strong_zero_multiply"))
    masked = {
        "xdivy": lambda u, v: u / torch.where(u == 0, torch.ones_like(v), v),
        "szm": lambda u, v: torch.where((u == 0) | (v == 0), 0.0, u * v),
    }
    x = torch.tensor([[1.5, -2.0, 3.0], [0.0, -0.0, 0.0], [0.0, 2.0, -1e-310]], dtype=torch.float64)
    y = torch.tensor([[2.0, -0.5, float("inf")], [3.0, -4.0, 0.0], [float("nan"), 0.0, 7.0]], dtype=torch.float64)
    readable, zeros, local = b._mask_tests
    assert readable() and zeros(torch.tensor([1j])) is None and zeros(torch.tensor(1j)) is None
    assert local(x) and not local(torch.tensor([1j]))
    inside = []  # (read once per call: inside a torch.func transform, no value is read)
    torch.func.vmap(lambda t: inside.append(readable()) or t)(x)
    torch.func.grad(lambda t: inside.append(readable()) or t.sum())(x)
    assert inside == [False, False]
    cases = [x, x.clone().requires_grad_(), x.reshape(-1), x.reshape(-1).repeat(8), torch.empty(0)]
    cases += [x[k] for k in range(3)] + [x.reshape(-1)[k] for k in range(9)] + [torch.tensor(float("nan"))]
    cases += [x.to(torch.float32)[0], -x[1], x[1].requires_grad_(), x[1].to(torch.bfloat16), x[0] > 0, x[2] > 5]
    for t in cases:  # small tensors of one axis or none as lists, larger ones by a count: the same answer
        h = t.detach().double().numpy()
        n = np.count_nonzero(h)
        want = NO_ZERO if n == h.size else ALL_ZERO if not n else SOME_ZERO
        assert zeros(t) == want, t
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for u, v in ((x, y), (y, x)):
            for k in range(3):  # a row without a zero, an all-zero row, a row with one zero
                for name, f in (("xdivy", xdivy), ("szm", szm)):
                    want = masked[name](u[k], v[k])
                    for got in (f(u[k], v[k]), torch.func.vmap(f)(u[k : k + 1], v[k : k + 1])[0]):
                        assert got.dtype == want.dtype and got.numpy().tobytes() == want.numpy().tobytes(), (name, k)
            for name, f in (("xdivy", xdivy), ("szm", szm)):  # the map over rows of all three kinds
                got = torch.func.vmap(f)(u, v)
                want = masked[name](u, v)
                assert got.numpy().tobytes() == want.numpy().tobytes(), name


def test_masks_of_an_all_zero_operand_read_it_alone():
    """``xdivy(x1, x2)`` / ``strong_zero_multiply(x1, x2)`` of an all-zero ``x1``: the masks' answer
    (``x1 / 1``, +0) is decided by reading ``x1`` alone; ``x2`` is checked by shape, dtype and place,
    its values not read (a large one would cost a count for nothing)."""
    seen = []
    count = counted(np.count_nonzero, lambda a: a.size)

    def zeros(a):
        seen.append(a)
        return count(a)

    def masked(a, b):
        raise AssertionError("the masked forward ran")

    x1, x2 = np.array([0.0, -0.0, 0.0]), np.array([1.0, np.nan, 0.0])
    for name, want in (("xdivy", x1 / 1), ("strong_zero_multiply", np.zeros(3))):
        seen.clear()
        got = unmasked_where_no_zero(name, masked, np.ndarray, zeros, np.zeros_like)(x1, x2)
        assert got.tobytes() == want.tobytes() and len(seen) == 1 and seen[0] is x1, name


@needs_torch
def test_torch_masks_kept_in_a_compiled_program(torch_env):
    """``gt.function(jit_compile=True)`` on PyTorch traces its program with ``make_fx`` (a
    ``TorchDispatchMode``) and compiles what it saw: the masks' zero test reads no value under any
    dispatch mode, so the program keeps the masks.  Traced with a cotangent without zeros, a later
    call with zeros (at a zero divisor, at an infinite factor) gives the masks' 0, as eagerly (it gave
    NaN: the traced call's plain quotient and product fixed in the program)."""
    torch, compat, b = torch_env
    from torch.utils._python_dispatch import TorchDispatchMode

    readable, zeros, local = b._mask_tests

    class Passing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Passing():
        assert not readable()
    assert readable()
    with gt.use_backend("torch"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in (gt.math.xdivy, gt.math.strong_zero_multiply):
            f = gt.function(op, jit_compile=True)
            y = gt.constant(np.array([0.0, float("inf"), 2.0]))
            f(gt.constant(np.array([1.0, 2.0, 3.0])), y)  # (traced and compiled: no zero to mask)
            x = gt.constant(np.array([0.0, 0.0, 3.0]))
            got, want = f(x, y).numpy(), op(x, y).numpy()
            assert got.tobytes() == want.tobytes() and got[0] == 0.0, (op.__name__, got, want)


@needs_torch
def test_torch_fast_products_match_compat(torch_env):
    """matmul, tensordot and vecdot: same dtypes (the fast path), mixed dtypes, mismatched shapes."""
    torch, compat, b = torch_env
    g = torch.Generator().manual_seed(0)
    arrays = []
    for shape in ((3,), (2, 3), (3, 3), (2, 3, 3), (3, 2)):
        base = torch.randint(-3, 4, shape, generator=g)
        arrays += [base.to(dt) for dt in (torch.int64, torch.float32, torch.float64, torch.complex64)]
    for x1, x2 in itertools.product(arrays, arrays):
        what = f"{x1.dtype}{tuple(x1.shape)}, {x2.dtype}{tuple(x2.shape)}"
        _assert_same(_outcome(b.xp.matmul, x1, x2), _outcome(compat.matmul, x1, x2), "matmul " + what)
        for axes in (0, 1, 2, ([1], [0])):
            _assert_same(
                _outcome(b.xp.tensordot, x1, x2, axes=axes),
                _outcome(compat.tensordot, x1, x2, axes=axes),
                f"tensordot axes={axes} {what}",
            )
        for axis in (-1, -2, 0, 1):
            _assert_same(
                _outcome(b.xp.vecdot, x1, x2, axis=axis),
                _outcome(compat.vecdot, x1, x2, axis=axis),
                f"vecdot axis={axis} {what}",
            )


@needs_torch
def test_torch_fast_shape_functions_match_compat(torch_env):
    """expand_dims, squeeze, permute_dims: int axes take the fast path, tuples compat's; bad axes
    raise the same errors."""
    torch, compat, b = torch_env
    for shape in ((), (3,), (2, 3)):
        x = torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape)
        for axis in (0, 1, -1, -2, 3, -4, (0,), (0, 2), (-1, 0), (1, 1)):
            _assert_same(
                _outcome(b.xp.expand_dims, x, axis=axis),
                _outcome(compat.expand_dims, x, axis=axis),
                f"expand_dims {shape} axis={axis}",
            )
    for shape in ((1,), (1, 3), (3, 1), (1, 1, 2)):
        x = torch.ones(shape)
        for axis in (0, 1, -1, -2, 2, 3, -4, (0,), (0, 1)):
            _assert_same(
                _outcome(b.xp.squeeze, x, axis=axis),
                _outcome(compat.squeeze, x, axis=axis),
                f"squeeze {shape} axis={axis}",
            )
    x = torch.arange(24.0).reshape(2, 3, 4)
    for axes in ((0, 1, 2), (2, 0, 1), (-1, 0, 1), (1,), (0, 0, 1)):
        _assert_same(
            _outcome(b.xp.permute_dims, x, axes), _outcome(compat.permute_dims, x, axes), f"permute_dims axes={axes}"
        )


def _numpy_inputs():
    """NumPy arrays of every dtype (0-d, 1-d, 2-d, strided), a read-only one, a reversed one."""
    out = []
    for d in DTYPES:
        a = np.arange(6).reshape(2, 3).astype(d.name)
        out += [a, a[0], np.asarray(a[1, 2]), a[:, ::2]]
    ro = np.arange(4.0)
    ro.flags.writeable = False
    return out + [ro, np.arange(5.0)[::-1]]


def _dlpack_safe(a):
    """Writable, without negative strides: torch 2.13's ``from_dlpack`` aborts the process on a
    reversed NumPy array (JAX's raises); the adapters' fallback copies read-only ones."""
    return a.flags.writeable and all(s >= 0 for s in a.strides)


@needs_torch
def test_torch_asarray_matches_compat(torch_env):
    """``asarray`` against ``array_api_compat.torch.asarray``: Python scalars without a dtype get
    torch's default dtypes (which are TensorFlow's); nested lists and NumPy scalars are read by NumPy
    first (NumPy's dtype inference, as on every backend); a NumPy array is shared wherever compat
    shares it (``copy=False`` succeeds), and copied, without a warning, where torch cannot wrap it."""
    torch, compat, b = torch_env
    values = PY_SCALARS + NESTED + [np.float32(1.5), np.int16(-3), np.bool_(True), np.complex128(1j)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # complex to real casts, both sides
        for v, dtype, device in itertools.product(values, [None, *DTYPES], [None, "cpu", torch.device("cpu")]):
            nd = None if dtype is None else b.dtype_to_native(dtype)
            ref = v if isinstance(v, (bool, int, float, complex)) and not isinstance(v, np.generic) else np.asarray(v)
            dev = torch.device(device) if isinstance(device, str) else device
            _assert_same(
                _outcome(b.asarray, v, dtype=dtype, device=device),
                _outcome(compat.asarray, ref, dtype=nd, device=dev),
                f"asarray({v!r}, {dtype}, {device})",
            )
    for a, dtype in itertools.product(_numpy_inputs(), [None, gt.float32, gt.int64]):
        nd = None if dtype is None else b.dtype_to_native(dtype)
        what = f"asarray({a.dtype}{a.shape} strides {a.strides} writeable {a.flags.writeable}, {dtype})"
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the adapter copies instead of warning
            out = b.asarray(a, dtype=dtype)
        _assert_same(("ok", out), _outcome(compat.asarray, a.copy(), dtype=nd), what)
        if a.flags.writeable and all(s >= 0 for s in a.strides) and a.size:
            shares = _outcome(compat.asarray, a, dtype=nd, copy=False)[0] == "ok"
            assert np.shares_memory(out.numpy(), a) == shares, what
        else:
            assert not a.size or not np.shares_memory(out.numpy(), a), what


@needs_torch
def test_torch_asarray_of_tensors_matches_compat(torch_env):
    """A tensor is returned as is wherever ``compat.asarray(..., copy=False)`` gives it back, else cast
    or moved as compat does; it is never changed itself."""
    torch, compat, b = torch_env
    for dt in (torch.bool, torch.int32, torch.float32, torch.complex64):
        t = torch.tensor([1, 0, 2]).to(dt)
        before = t.clone()
        for dtype, device in itertools.product([None, gt.float32, gt.int64, gt.bool], [None, "cpu"]):
            nd = None if dtype is None else b.dtype_to_native(dtype)
            out = b.asarray(t, dtype=dtype, device=device)
            _assert_same(("ok", out), _outcome(compat.asarray, t, dtype=nd, device=device), f"{dt} -> {dtype}")
            same = _outcome(compat.asarray, t, dtype=nd, device=device, copy=False)
            assert (out is t) == (same[0] == "ok" and same[1] is t), (dt, dtype, device)
            assert torch.equal(t, before)


@needs_torch
def test_torch_dtypes_devices_and_conversions_match_compat(torch_env):
    """The dtype map, ``device_of``/``to_device`` (``array_api_compat.device``/``to_device``),
    ``fix_output`` (compat's ``asarray`` of the NumPy value) and ``from_dlpack``."""
    torch, compat, b = torch_env
    for d in DTYPES:
        nd = b.dtype_to_native(d)
        assert nd == getattr(compat, d.name), d
        x = compat.zeros((2,), dtype=getattr(compat, d.name))
        assert b.dtype_of(x) is d
        for kind, gkind in (
            ("bool", "b"),
            ("signed integer", "i"),
            ("unsigned integer", "u"),
            ("real floating", "f"),
            ("complex floating", "c"),
        ):
            assert compat.isdtype(nd, kind) == (d.kind == gkind), (d, kind)
    x = torch.arange(3.0)
    assert b.device_of(x) == aac.device(x)
    for dev in ["cpu", torch.device("cpu")] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]:
        _assert_same(("ok", b.to_device(x, dev)), ("ok", aac.to_device(x, torch.device(dev))), f"to_device {dev}")
    for v in (np.float64(2.5), np.int32(3), np.bool_(False), np.asarray(1j), 2.5, 3):
        _assert_same(("ok", b.fix_output(v)), ("ok", compat.asarray(np.asarray(v))), f"fix_output({v!r})")
    p = torch.nn.Parameter(torch.arange(3.0))
    out = b.fix_output(p)
    assert type(out) is torch.Tensor and not out.requires_grad and out.data_ptr() == p.data_ptr()
    for a in filter(_dlpack_safe, _numpy_inputs()):
        want = _outcome(compat.from_dlpack, a)  # where DLPack cannot, the adapter copies
        _assert_same(
            _outcome(b.from_dlpack, a),
            want if want[0] == "ok" else _outcome(compat.asarray, a),
            f"from_dlpack {a.dtype}{a.shape}",
        )


# ================================================================================== jax
@pytest.fixture(scope="module")
def jax_env():
    """jax, ``jax.numpy`` (what array-api-compat hands out for JAX arrays) and the adapter, loaded
    first (it turns on ``jax_enable_x64``)."""
    jax = pytest.importorskip("jax")
    b = _backends.get("jax")
    jnp = pytest.importorskip("jax.numpy")
    assert aac.array_namespace(jnp.zeros(1)) is jnp
    return jax, jnp, b


@needs_jax
def test_jax_namespace_is_jax_numpy_with_wrappers(jax_env):
    """Every name of ``jax.numpy`` is there, the same object but for the wrapped ones."""
    jax, jnp, b = jax_env
    module = sys.modules[type(b).__module__]
    # shape errors as ValueError, fast reductions, creation functions that take a sharding as device=
    wrapped = (
        set(module._SHAPE_CHECKED)
        | {"sum", "prod", "mean", "max", "min"}
        | set(module._PLACED)
        | set(module._FULL_PRECISION)
    )
    for name in dir(jnp):
        if name.startswith("__"):
            continue
        assert hasattr(b.xp, name), name
        if name not in wrapped:
            assert getattr(b.xp, name) is getattr(jnp, name), name


@needs_jax
def test_jax_matrix_products_are_full_float32_unless_the_program_chose(jax_env):
    """JAX's default float32 products on a GPU round to TF32 (1e-3): the adapter asks for full
    precision, as NumPy and torch compute; ``jax.default_matmul_precision`` around the code wins."""
    jax, jnp, b = jax_env
    a = jnp.ones((3, 3), jnp.float32)
    products = {
        "matmul": lambda: b.xp.matmul(a, a),
        "tensordot": lambda: b.xp.tensordot(a, a, axes=1),
        "vecdot": lambda: b.xp.vecdot(a, a),
        "einsum": lambda: b._einsum(a, a, subscripts="ij,jk->ik"),
    }
    for name, f in products.items():
        assert "Precision.HIGHEST" in str(jax.make_jaxpr(f)()), name
        with jax.default_matmul_precision("tensorfloat32"):
            assert "Precision.HIGHEST" not in str(jax.make_jaxpr(f)()), name


#: ops whose gradient rules multiply matrices (or whose forward has no ``precision=``), their arguments' shapes
_PRODUCT_RULES = {
    "matmul": (lambda a, b: a @ b, (3, 3), (3, 3)),
    "matmul (matrix, vector)": (lambda a, b: a @ b, (3, 3), (3,)),
    "linalg.outer": (lambda a, b: gt.linalg.outer(a, b), (3,), (3,)),
    "linalg.inv": (lambda a: gt.linalg.inv(a), (3, 3)),
    "linalg.solve": (lambda a, b: gt.linalg.solve(a, b), (3, 3), (3, 2)),
    "linalg.eigh": (lambda a: gt.linalg.eigh(a + gt.matrix_transpose(a))[1], (3, 3)),
    "linalg.svd": (lambda a: gt.linalg.svd(a, full_matrices=False)[0], (3, 3)),
    "linalg.pinv": (lambda a: gt.linalg.pinv(a), (3, 3)),
    "linalg.matrix_power": (lambda a: gt.linalg.matrix_power(a, 3), (3, 3)),
    "linalg.cholesky": (lambda a: gt.linalg.cholesky(a @ gt.matrix_transpose(a)), (3, 3)),
    "linalg.qr": (lambda a: gt.linalg.qr(a)[1], (3, 3)),
    "einsum": (lambda a, b: gt.einsum("ij,jk->ik", a, b), (3, 3), (3, 3)),
    "tensordot": (lambda a, b: gt.tensordot(a, b, axes=1), (3, 3), (3, 3)),
}


def _dot_precisions(jaxpr):
    """The ``precision`` of every ``dot_general`` in a jaxpr, sub-jaxprs included."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            out.append(str(eqn.params["precision"]))
        for p in eqn.params.values():
            inner = getattr(p, "jaxpr", None)
            if inner is not None:
                out += _dot_precisions(getattr(inner, "jaxpr", inner))
    return out


@needs_jax
@pytest.mark.parametrize("name", list(_PRODUCT_RULES))
def test_jax_gradient_rules_multiply_at_the_forwards_precision(jax_env, name):
    """A rule's own products (``grad @ B^H`` ...) in full float32 precision, as the forward's: with
    ``@`` on JAX arrays they ran at JAX's default, TF32 on a GPU, so float32 gradients were 1e-3 off
    while the forward was exact; ``jax.default_matmul_precision`` around the code still wins."""
    jax, jnp, _ = jax_env
    fn, *shapes = _PRODUCT_RULES[name]
    rng = np.random.default_rng(0)
    args = [jnp.asarray(rng.normal(size=s) + (3 * np.eye(*s) if len(s) == 2 else 0), jnp.float32) for s in shapes]

    def gradients(*arrays):
        xs = [gt.convert_to_tensor(a) for a in arrays]
        with gt.GradientTape() as tape:
            tape.watch(xs)
            y = gt.sum(fn(*xs))
        return [g.native for g in tape.gradient(y, xs)]

    with gt.use_backend("jax"):
        precisions = _dot_precisions(jax.make_jaxpr(gradients)(*args).jaxpr)
        assert precisions and all("HIGHEST" in p for p in precisions), (name, precisions)
        with jax.default_matmul_precision("tensorfloat32"):
            chosen = _dot_precisions(jax.make_jaxpr(gradients)(*args).jaxpr)
        assert any("HIGHEST" not in p for p in chosen), (name, chosen)  # (JAX's own pinv keeps some HIGHEST)


@needs_jax
@pytest.mark.parametrize("name", ["sum", "prod", "mean", "max", "min"])
def test_jax_fast_reductions_match_jax_numpy(jax_env, name):
    """Axes normalised and passed positionally: the same values, dtypes, shapes and weak types as
    ``jax.numpy``'s own function, and the same errors for bad axes.  The wrapper is one for all five:
    ``sum`` gets the full grid of axes, the others a few."""
    jax, jnp, b = jax_env
    fast, slow = getattr(b.xp, name), getattr(jnp, name)
    for shape in ((), (3,), (2, 3), (2, 3, 4)):
        x = jnp.asarray((np.arange(int(np.prod(shape))) % 5).reshape(shape).astype("float32"))
        every = tuple(range(len(shape)))
        axes = (
            (None, 0, -1, 3, (), (0,), (-1,), (0, 1), (0, 2), (1, 0), every, every[::-1], (0, 0), (0, -3))
            if name == "sum"
            else (None, (0,), every, (0, 2), (0, 0))
        )
        for axis in axes:
            _assert_same(_outcome(fast, x, axis=axis), _outcome(slow, x, axis=axis), f"{name}({shape}, axis={axis})")
        kws = [{"axis": every, "keepdims": True}]
        if name != "max" and name != "min":
            kws.append({"axis": every, "dtype": jnp.complex128})
        for kw in kws:
            _assert_same(_outcome(fast, x, **kw), _outcome(slow, x, **kw), f"{name}({shape}, {kw})")
    x = jnp.asarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    for axis in (None, (0, 1), (1,)):
        _assert_same(_outcome(fast, x, axis=axis), _outcome(slow, x, axis=axis), f"{name}(int32, axis={axis})")


@needs_jax
def test_jax_shape_errors_are_value_errors_and_results_unchanged(jax_env):
    """The shape-checked wrappers change nothing but the class of a shape error (ValueError, as on
    every backend, where JAX raises TypeError)."""
    jax, jnp, b = jax_env
    x, sq = jnp.arange(6.0).reshape(2, 3), jnp.ones((3, 3))
    good = [
        ("reshape", (x, (3, 2))),
        ("matmul", (x, sq)),
        ("concat", ([x, x],)),
        ("permute_dims", (x, (1, 0))),
        ("tensordot", (x, sq, 1)),
    ]
    for name, args in good:
        _assert_same(_outcome(getattr(b.xp, name), *args), _outcome(getattr(jnp, name), *args), name)
    bad = [
        ("reshape", (x, (4,)), {}),
        ("matmul", (x, x), {}),
        ("concat", ([x, sq],), {"axis": 1}),
        ("permute_dims", (x, (0, 0)), {}),
        ("permute_dims", (x, (0,)), {}),
        ("tensordot", (x, x), {"axes": 1}),
    ]
    for name, args, kw in bad:
        assert _outcome(getattr(jnp, name), *args, **kw)[1] in (TypeError, ValueError), name
        with pytest.raises(ValueError):
            getattr(b.xp, name)(*args, **kw)


@needs_jax
def test_jax_asarray_matches_jax_numpy(jax_env):
    """``asarray`` is ``jnp.asarray`` on the requested (else the default) device, with TensorFlow's
    dtypes for Python scalars given none (where JAX would give float64 and a weak type)."""
    jax, jnp, b = jax_env
    cpu = jax.devices("cpu")[0]
    scalars = PY_SCALARS + [np.float32(1.5), np.int16(-3), np.bool_(True)]
    arrays = [
        a
        for a in _numpy_inputs()
        if a.dtype.name in ("bool", "uint8", "int64", "float32", "complex64")
        or a.ndim == 1
        and a.dtype.name == "float64"
    ]
    cases = list(
        itertools.product(
            scalars,
            [None, gt.bool, gt.int8, gt.uint32, gt.int64, gt.float32, gt.float64, gt.complex64, gt.complex128],
            [None],
        )
    )
    cases += itertools.product(NESTED + arrays, [None, gt.float32], ["cpu"])
    cases += itertools.product(scalars + NESTED[:2] + arrays[:4], [None], [cpu])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)  # complex to float32, both sides
        for v, dtype, device in cases:
            want_dtype = TF_DEFAULTS.get(type(v)) if dtype is None else dtype
            nd = None if want_dtype is None else b.dtype_to_native(want_dtype)
            want = _outcome(jnp.asarray, v, dtype=nd, device=cpu if device is not None else b.device)
            _assert_same(_outcome(b.asarray, v, dtype=dtype, device=device), want, f"asarray({v!r}, {dtype}, {device})")
    x = jnp.arange(3.0)
    assert b.asarray(x) is x and b.asarray(x, dtype=gt.float64, device=b.device_of(x)) is x
    _assert_same(("ok", b.asarray(x, dtype=gt.float32)), ("ok", jnp.asarray(x, dtype=jnp.float32)), "cast")


@needs_jax
def test_jax_asarray_of_a_numpy_array_compiles_nothing_and_copies(jax_env):
    """A NumPy array becomes a JAX array without an XLA program (``jnp.asarray`` compiles an identity for each
    new shape and dtype, 20-40 ms each, a good part of the suite's JAX time), uncommitted as ``jnp.asarray``
    makes it, and a copy: writing to the NumPy array afterwards leaves the tensor as it was."""
    jax, jnp, b = jax_env
    compiles = []

    def listener(event, seconds, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        jnp.sin(jnp.ones((5, 17, 3)))  # the listener hears a compile (a new shape)
        assert compiles, "JAX reports no compile events under this name: the check below would prove nothing"
        compiles.clear()
        for shape, dtype in (((7, 13), "float64"), ((11,), "complex128"), ((3, 1, 5), "int32"), ((2, 9), "bool")):
            a = (np.arange(int(np.prod(shape))).reshape(shape) % 3).astype(dtype)
            want = a.copy()
            x = b.asarray(a)
            y = gt.asarray(a, backend="jax")
            a[...] = 1
            for t in (x, y.native):
                assert isinstance(t, jax.Array) and t.dtype == want.dtype and t.shape == shape
                assert t.committed is False
                np.testing.assert_array_equal(np.asarray(t), want)
        assert not compiles, f"asarray of NumPy arrays compiled {len(compiles)} XLA program(s)"
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


@needs_jax
def test_jax_like_arrays_are_as_free_as_their_model_and_rules_on_tensors_compile_nothing_new(jax_env):
    """``zeros_like``/``ones_like``/``full_like``/``empty_like`` of an uncommitted JAX array are uncommitted (of an
    array placed by ``device=``, on its device): JAX compiles each program again for a committed argument, so a
    committed seed or zeros made every op of a walk on Tensors (the rules under an outer tape: second order,
    forward mode) compile a twin of the first-order walk's programs.  The walk on Tensors compiles none here."""
    jax, jnp, b = jax_env
    with gt.use_backend("jax"):
        free, placed = gt.constant(np.ones((2, 3))), gt.constant(np.ones((2, 3)), device="cpu")
        assert free.native.committed is False and placed.native.committed is True
        for like in (gt.zeros_like, gt.ones_like, gt.empty_like, lambda t: gt.full_like(t, 2.0)):
            assert like(free).native.committed is False
            made = like(placed).native
            assert made.committed is True and made.devices() == placed.native.devices()
        compiles = []

        def listener(event, seconds, **kwargs):
            if event == "/jax/core/compile/backend_compile_duration":
                compiles.append(event)

        rng = np.random.default_rng(3)
        x, w = gt.constant(rng.standard_normal((5, 7))), gt.constant(rng.standard_normal((5, 7)))

        def grads(outer):
            with gt.GradientTape(persistent=True) as out_tape:
                with gt.GradientTape() as tape:
                    tape.watch([x, w])
                    loss = gt.reduce_sum(gt.sin(x) * w * 3.0)
                if outer:
                    return tape.gradient(loss, [x, w])
                with out_tape.stop_recording():
                    return tape.gradient(loss, [x, w])

        native = grads(outer=False)  # the first-order walk on native arrays compiles its programs
        jax.monitoring.register_event_duration_secs_listener(listener)
        try:
            tensor = grads(outer=True)  # the same rules on Tensors, an outer tape recording them
        finally:
            jax.monitoring.unregister_event_duration_listener(listener)
        for gn, gr in zip(native, tensor):
            np.testing.assert_allclose(gr.numpy(), gn.numpy(), rtol=1e-6)
        assert not compiles, f"the walk on Tensors compiled {len(compiles)} program(s) the native walk had not"


@needs_jax
def test_jax_dtypes_devices_and_conversions_match_compat(jax_env):
    """The dtype map, ``device_of``/``to_device`` (``array_api_compat.device``/``to_device``),
    ``is_native`` (``is_jax_array``, tracers included), ``fix_output`` and ``from_dlpack``."""
    jax, jnp, b = jax_env
    for d in DTYPES:
        nd = b.dtype_to_native(d)
        assert nd == jnp.dtype(getattr(jnp, d.name)), d
        assert b.dtype_of(jnp.zeros((2,), dtype=getattr(jnp, d.name))) is d
        for kind, gkind in (
            ("bool", "b"),
            ("signed integer", "i"),
            ("unsigned integer", "u"),
            ("real floating", "f"),
            ("complex floating", "c"),
        ):
            assert jnp.isdtype(nd, kind) == (d.kind == gkind), (d, kind)
    x = jnp.arange(3.0)
    assert b.device_of(x) == aac.device(x)
    for dev in jax.devices():
        _assert_same(("ok", b.to_device(x, dev)), ("ok", aac.to_device(x, dev)), f"to_device {dev}")
    _assert_same(("ok", b.to_device(x, "cpu")), ("ok", aac.to_device(x, jax.devices("cpu")[0])), "to_device cpu")
    for v in (x, np.arange(3.0), 2.5, [1, 2], np.float32(1.0)):
        assert b.is_native(v) == aac.is_jax_array(v), v
    seen = []
    jax.vmap(lambda t: seen.append((b.is_native(t), aac.is_jax_array(t))) or t)(x)
    assert seen == [(True, True)]  # tracers are native arrays for both
    for v in (np.float64(2.5), np.int32(3), np.bool_(False), 2.5):
        _assert_same(("ok", b.fix_output(v)), ("ok", jnp.asarray(v)), f"fix_output({v!r})")
    for a in (a for a in _numpy_inputs() if a.ndim == 2 and _dlpack_safe(a)):
        want = _outcome(jnp.from_dlpack, a)  # where DLPack cannot (bool), the adapter copies
        _assert_same(
            _outcome(b.from_dlpack, a),
            want if want[0] == "ok" else _outcome(jnp.asarray, a),
            f"from_dlpack {a.dtype}{a.shape}",
        )


# ================================================================================== the shared methods
def test_shared_methods_agree_with_compat_helpers(backend):
    """``device_of``/``to_device`` give what ``array_api_compat.device``/``to_device`` give, and the
    dtype map is the namespace's, on every backend that array-api-compat knows."""
    b = _b(backend)
    x = b.asarray(np.arange(3.0))
    ns = aac.array_namespace(x)
    assert b.device_of(x) == aac.device(x)
    same = b.to_device(x, b.device_of(x))
    assert b.device_str(b.device_of(same)) == b.device_str(aac.device(aac.to_device(x, aac.device(x))))
    for d in DTYPES:
        if hasattr(ns, d.name):
            assert b.dtype_of(ns.zeros((1,), dtype=getattr(ns, d.name))) is d, d
    if b.name == "numpy":  # array_api_compat.to_device's NumPy branch
        assert b.to_device(x, "cpu") is x is aac.to_device(x, "cpu")
        for dev in ("cuda", "gpu:0", object()):
            assert _outcome(b.to_device, x, dev)[1] is _outcome(aac.to_device, x, dev)[1] is ValueError


def test_dtype_of_maps_every_dtype_and_refuses_foreign_ones(backend):
    """Every dtype the library has maps to gradtape's; one gradtape lacks (float16) is a TypeError
    naming it, on every backend."""
    b = _b(backend)
    for d in DTYPES:
        try:
            nd = b.dtype_to_native(d)
        except TypeError:
            continue
        assert b.dtype_of(b.xp.zeros((2,), dtype=nd)) is d, d
        assert b.dtype_of(b.asarray(np.zeros(2, dtype=d.name))) is d, d
    try:
        half = b.asarray(np.zeros(2, dtype=np.float16))
    except TypeError:
        return  # array_api_strict has no float16 at all
    with pytest.raises(TypeError, match="float16"):
        b.dtype_of(half)


def test_to_device_takes_names_and_native_devices(backend, device):
    """A backend-neutral name and the native device it parses to move alike; an unknown name is a
    ValueError."""
    b = _b(backend)
    x = b.asarray(np.arange(3.0))
    for dev in (device, b.parse_device(device)):
        out = b.to_device(x, dev)
        assert b.device_str(b.device_of(out)) == device and b.dtype_of(out) is gt.float64
        np.testing.assert_array_equal(b.to_numpy(out), [0.0, 1.0, 2.0])
    if "cpu" in b.devices():  # (CuPy has no CPU device: tests/test_cupy.py checks its error)
        back = b.to_device(b.to_device(x, device), "cpu")
        assert b.device_str(b.device_of(back)) == "cpu"
    with pytest.raises(ValueError, match="no device"):
        b.to_device(x, "nonsense:7")


def test_from_dlpack_imports_passes_natives_and_falls_back(backend, device):
    """A native array passes as is; NumPy arrays come through DLPack, or (read-only ones, lists) a
    copy; ``device=`` moves the result."""
    b = _b(backend)
    native = b.asarray(np.arange(3.0))
    assert b.from_dlpack(native) is native
    ro = np.arange(4.0)
    ro.flags.writeable = False
    for src, want in (
        (np.arange(6, dtype=np.float32).reshape(2, 3), gt.float32),
        (np.array([1, -2]), gt.int64),
        (np.array(2.5), gt.float64),
        (ro, gt.float64),
        ([1.0, 2.0], gt.float64),
        (native, gt.float64),
    ):
        for dev in (None, device):
            out = b.from_dlpack(src, device=dev)
            assert type(out) is b.array_type and b.dtype_of(out) is want
            np.testing.assert_array_equal(b.to_numpy(out), b.to_numpy(src) if b.is_native(src) else np.asarray(src))
            if dev is not None:
                assert b.device_str(b.device_of(out)) == device
    with pytest.raises(ValueError, match="no device"):
        b.from_dlpack(np.arange(3.0), device="nonsense:7")


def test_asarray_reads_dtypes_and_devices_the_same_way(backend, device):
    """dtypes as gradtape dtypes, names or NumPy dtypes; devices as names or native devices; natives
    returned as they are where nothing changes; NumPy scalars and nested lists by NumPy's inference."""
    b = _b(backend)
    dev = b.parse_device(device)
    x = b.asarray(np.arange(3.0), device=device)
    assert b.device_str(b.device_of(x)) == device
    assert b.asarray(x) is x and b.asarray(x, dtype=gt.float64) is x and b.asarray(x, device=dev) is x
    assert b.asarray(x, dtype="float64", device=device) is x
    for dtype in (gt.float32, "float32", np.dtype("float32")):
        y = b.asarray(x, dtype=dtype)
        assert b.dtype_of(y) is gt.float32 and b.device_str(b.device_of(y)) == device
    assert b.dtype_of(x) is gt.float64  # the input is not changed
    for v, want in (
        (np.float32(1.5), gt.float32),
        (np.int16(-3), gt.int16),
        (np.bool_(True), gt.bool),
        ([1.0, 2.0], gt.float64),
        ([[1, 2]], gt.int64),
        ([True], gt.bool),
        ([1j], gt.complex128),
    ):
        for where in (device, dev):
            out = b.asarray(v, device=where)
            assert b.dtype_of(out) is want and b.device_str(b.device_of(out)) == device, (v, where)
            assert tuple(out.shape) == np.shape(v)
    rank = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}
    for v, dtype in itertools.product(PY_SCALARS, DTYPES):
        if rank[dtype.kind] < rank[np.asarray(v).dtype.kind]:
            continue  # no value-changing casts: not every library has them
        out = b.asarray(v, dtype=dtype, device=device)
        assert b.dtype_of(out) is dtype and b.to_numpy(out).item() == np.asarray(v).astype(dtype.name).item()
    if type(b).asarray is Backend.asarray:  # the shared conversion: TensorFlow's defaults
        for v in PY_SCALARS:
            assert b.dtype_of(b.asarray(v)) is TF_DEFAULTS[type(v)], v
    with pytest.raises(ValueError, match="no device"):
        b.asarray([1.0], device="nonsense:7")


@pytest.mark.skipif("array_api_strict" not in INSTALLED, reason="array_api_strict not installed")
def test_shared_methods_on_strict_test_devices():
    """array_api_strict's ``device1``/``device2`` behave as separate devices: the shared methods
    move, create and import onto them by name or by native device, and keep what is already there."""
    b = _backends.get("array_api_strict")
    x = b.asarray([1.0, 2.0], device="device1")
    assert b.device_str(b.device_of(x)) == "device1" and b.asarray(x, device="device1") is x
    for dev in ("device2", b.parse_device("device2")):
        for out in (
            b.to_device(x, dev),
            b.asarray(x, device=dev),
            b.asarray(x, dtype=gt.float32, device=dev),
            b.from_dlpack(np.arange(2.0), device=dev),
            b.asarray(np.arange(2.0), device=dev),
        ):
            assert b.device_str(b.device_of(out)) == "device2"
            assert b.device_str(b.device_of(x)) == "device1"
    y = b.asarray(x, dtype=gt.float32)
    assert b.dtype_of(y) is gt.float32 and b.device_str(b.device_of(y)) == "device1"
    assert b.from_dlpack(x) is x
    with gt.use_backend("array_api_strict", "device2"):  # the configured default device
        assert b.device_str(b.device_of(b.asarray([1.0]))) == "device2"
        assert b.device_str(b.device_of(b.asarray(3.5))) == "device2"


# ================================================================================== a bare adapter
class _Bare(Backend):
    """An adapter that fills in nothing but its namespace: every default of ``Backend`` at work."""

    name = "bare"
    array_type = np.ndarray

    def load(self):
        return compat_numpy


def test_a_bare_adapter_gets_every_shared_method():
    b = _Bare()
    for s in (None, "cpu", "CPU", " cpu:0 "):
        assert b.parse_device(s) == "cpu"
    for s in ("cuda", "gpu:0", 0, object()):
        with pytest.raises(ValueError, match="'bare' has no device"):
            b.parse_device(s)
    x = b.asarray([1.0, 2.0])
    assert x.dtype == np.float64 and b.dtype_of(x) is gt.float64
    assert [b.dtype_of(b.asarray(v)) for v in PY_SCALARS] == [TF_DEFAULTS[type(v)] for v in PY_SCALARS]
    assert b.asarray(x) is x and b.asarray(x, device="cpu") is x
    y = b.asarray(x, dtype=gt.float32)
    assert y.dtype == np.float32 and x.dtype == np.float64
    assert b.to_device(x, "cpu") is x and b.to_device(x, "CPU") is x
    with pytest.raises(ValueError):
        b.to_device(x, "cuda")
    assert b.from_dlpack(x) is x
    src = np.arange(3.0)
    z = b.from_dlpack(src, device="cpu")
    assert np.shares_memory(z, src) and b.dtype_of(z) is gt.float64
    np.testing.assert_array_equal(b.from_dlpack([1, 2]), [1, 2])
    assert b.device_str(b.device_of(x)) == "cpu" and b.devices() == ["cpu"] and not b.has_gpu()
    with pytest.raises(TypeError, match="float16"):
        b.dtype_of(np.zeros(1, np.float16))


def test_from_dlpack_of_a_reversed_numpy_array(backend):
    """A NumPy array with negative strides (torch's from_dlpack aborts the process on one)."""
    a = np.arange(5.0)[::-1]
    t = gt.from_dlpack(a)
    np.testing.assert_array_equal(t.numpy(), [4.0, 3.0, 2.0, 1.0, 0.0])
    np.testing.assert_array_equal(a, [4.0, 3.0, 2.0, 1.0, 0.0])
