"""The CuPy backend (gradtape/backends/cupy.py): NVIDIA GPUs through ``array_api_compat.cupy``.

The tests that compute on a GPU are marked ``gpu`` and skip, saying why, where CuPy is not installed
or has no usable GPU.  On a machine with one: ``python3 -m pytest tests/test_cupy.py -q`` (this file),
and ``python3 -m pytest --backend cupy -q`` (the whole suite on CuPy).  What the adapter says when CuPy
cannot run -- not installed, no driver or device, CUDA libraries missing -- is checked everywhere: on
stand-in ``cupy`` modules, and on the real CuPy where it is installed without a GPU.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
import types

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import backend_registry as _backends
from gradtape.backends.cupy import CupyBackend
from gradtape.cli import main as cli_main
from gradtape.conformance import cases
from gradtape.conformance.report import run as conformance_run

CUPY_INSTALLED = importlib.util.find_spec("cupy") is not None


# ================================================================ without a GPU: the errors, everywhere
class _CudaError(RuntimeError):
    """What CuPy's ``CUDARuntimeError`` is: a RuntimeError with CUDA's own text."""


def _stand_in(count=None, error=None, compute_error=None):
    """A ``cupy`` module as an installed CuPy looks on a machine where it cannot run: its device count
    is ``count`` or raises ``error``; computing raises ``compute_error``."""
    cupy = types.ModuleType("cupy")
    cupy.__spec__ = importlib.machinery.ModuleSpec("cupy", None)  # (so that the registry finds it)
    cupy.__version__ = "13.9.9"
    cupy.float64 = np.float64

    def get_device_count():
        if error is not None:
            raise error
        return count

    def arange(*args, **kwargs):
        raise compute_error

    cupy.arange = arange
    cupy.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_device_count))
    return cupy


@pytest.fixture
def fresh_registry(monkeypatch):
    """The registry with no cupy adapter made yet (so that the next ``get`` loads one)."""
    monkeypatch.setattr(_backends, "_instances", {})
    return monkeypatch


def test_cupy_is_a_builtin_backend_with_its_install_command():
    assert "cupy" in _backends.known_backends()
    module, cls, lib, command = _backends._BUILTIN["cupy"]
    assert (module, cls, lib) == ("gradtape.backends.cupy", "CupyBackend", "cupy")
    assert command == "python3 -m pip install cupy-cuda12x" == CupyBackend.install_hint


def test_cupy_not_installed_is_an_import_error_with_the_install_command(fresh_registry):
    fresh_registry.setitem(sys.modules, "cupy", None)  # ``import cupy`` fails
    with pytest.raises(ImportError, match=r"CuPy failed to import .*`python3 -m pip install cupy-cuda12x`"):
        CupyBackend().load()
    module, cls, _, command = _backends._BUILTIN["cupy"]
    fresh_registry.setitem(_backends._BUILTIN, "cupy", (module, cls, "cupy_not_installed_anywhere", command))
    with pytest.raises(ImportError, match=r"install it with `python3 -m pip install cupy-cuda12x`"):
        with gt.use_backend("cupy"):
            pass


@pytest.mark.parametrize(
    "count, error, cause",
    [
        (None, _CudaError("cudaErrorNoDevice: no CUDA-capable device\nis detected"), "cudaErrorNoDevice"),
        (None, _CudaError("cudaErrorInsufficientDriver: CUDA driver version is insufficient"), "InsufficientDriver"),
        (0, None, "CUDA reports no device"),
    ],
)
def test_no_usable_gpu_is_one_line_naming_the_cause_and_what_to_do(fresh_registry, capsys, count, error, cause):
    fresh_registry.setitem(sys.modules, "cupy", _stand_in(count=count, error=error))
    fresh_registry.setattr(_backends, "available_backends", lambda: ["numpy", "cupy"])
    with pytest.raises(RuntimeError) as info:
        CupyBackend().load()
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert msg.startswith("gradtape backend 'cupy': CuPy 13.9.9 is installed but no CUDA GPU is usable here"), msg
    assert cause in msg and "nvidia-smi" in msg and "use the numpy, torch or jax backend" in msg, msg
    with pytest.raises(RuntimeError, match="no CUDA GPU is usable here"), gt.use_backend("cupy"):
        pass
    # `gradtape backends` reports it in cupy's row, on one line, and lists the other backends
    assert cli_main(["backends"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| cupy |")]
    assert len(rows) == 1 and "error: RuntimeError: gradtape backend 'cupy'" in rows[0] and cause in rows[0], rows


def test_missing_cuda_libraries_say_how_to_install_them(fresh_registry):
    nvrtc = RuntimeError("CuPy failed to load libnvrtc.so.12: OSError: libnvrtc.so.12: cannot open shared object file")
    fresh_registry.setitem(sys.modules, "cupy", _stand_in(count=1, compute_error=nvrtc))
    with pytest.raises(RuntimeError) as info:
        CupyBackend().load()
    msg = str(info.value)
    assert "\n" not in msg and "CuPy 13.9.9 found 1 GPU(s) but cannot compute on them" in msg, msg
    assert "libnvrtc.so.12" in msg and '`python3 -m pip install "cupy-cuda12x[ctk]"`' in msg, msg
    other = RuntimeError("cudaErrorNoKernelImageForDevice: no kernel image is available")
    fresh_registry.setitem(sys.modules, "cupy", _stand_in(count=2, compute_error=other))
    with pytest.raises(RuntimeError, match=r"found 2 GPU\(s\).*NoKernelImage.*check the GPU with `nvidia-smi`"):
        CupyBackend().load()


def _python(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_installed_cupy_without_a_gpu_says_so_in_one_line():
    """The real CuPy, where it is installed on a machine without a (usable) GPU."""
    if not CUPY_INSTALLED:
        pytest.skip("CuPy is not installed here: the stand-in modules above check the same messages")
    p = _python("import gradtape as gt\nwith gt.use_backend('cupy'):\n    pass\n")
    if p.returncode == 0:
        pytest.skip("CuPy has a usable GPU here: the gpu tests below run on it")
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: gradtape backend 'cupy': CuPy "), p.stderr
    assert "no CUDA GPU is usable here" in last or "cannot compute on them" in last, p.stderr
    p = _python("from gradtape.cli import main\nmain(['backends'])\n")
    rows = [line for line in p.stdout.splitlines() if line.startswith("| cupy |")]
    assert p.returncode == 0 and len(rows) == 1 and "error: RuntimeError: gradtape backend 'cupy'" in rows[0], p


# ================================================================ on a GPU
@pytest.fixture(scope="module")
def cp():
    """CuPy, its adapter loaded; skips, saying why, where it cannot run."""
    if not CUPY_INSTALLED:
        pytest.skip("CuPy is not installed here (`python3 -m pip install cupy-cuda12x`, on an NVIDIA GPU machine)")
    try:
        _backends.get("cupy")
    except (ImportError, RuntimeError) as e:
        pytest.skip(f"CuPy cannot run here: {e}")
    import cupy

    return cupy


def _b():
    return _backends.get("cupy")


def _model(W, b, x, idx):
    """A small loss touching matmul, element-wise ops, a reduction and indexing with repeated indices."""
    h = gt.tanh(gt.matmul(W, x) + b)
    picked = x[idx]
    return gt.sum(h * h) + gt.mean(gt.exp(-picked) * picked) + gt.sqrt(gt.sum(W * W)) + gt.sum(gt.nn.erf(b))


@pytest.mark.gpu("cupy")
def test_gradient_on_cupy_matches_numpy_in_float64(cp):
    rng = np.random.default_rng(0)
    values = [rng.standard_normal((4, 3)), rng.standard_normal(4), rng.standard_normal(3)]
    idx = np.array([0, 2, 2, 1, 2])
    grads = {}
    for name in ("numpy", "cupy"):
        with gt.use_backend(name):
            W, b, x = (gt.Variable(v, dtype=gt.float64) for v in values)
            with gt.GradientTape() as tape:
                loss = _model(W, b, x, gt.constant(idx))
            grads[name] = tape.gradient(loss, [W, b, x])
    for g in grads["cupy"]:
        assert g.backend == "cupy" and g.device == "cuda:0" and g.dtype is gt.float64
        assert type(g.native) is cp.ndarray
    for got, want in zip(grads["cupy"], grads["numpy"]):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.gpu("cupy")
def test_compiled_steps_and_optimizers_on_cupy(cp):
    """``gt.function`` keys its programs by device and the optimizers group variables by device: both
    need the adapter's devices hashable.  The program is replayed (CuPy has no compiler gradtape uses)."""
    with gt.use_backend("cupy"):
        w = gt.Variable(np.array([1.0, -2.0, 0.5]), dtype=gt.float64)
        opt = gt.optimizers.Adam(learning_rate=0.1)

        @gt.function
        def step(x):
            with gt.GradientTape() as tape:
                loss = gt.sum((w * x - 1.0) ** 2)
            return tape.gradient(loss, w)

        x = gt.constant(np.array([0.5, 1.0, 2.0]), dtype=gt.float64)
        g1, g2 = step(x), step(x)
        opt.apply_gradients([(g2, w)])
    want = 2.0 * (np.array([1.0, -2.0, 0.5]) * [0.5, 1.0, 2.0] - 1.0) * [0.5, 1.0, 2.0]
    np.testing.assert_allclose(g1.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(g2.numpy(), want, rtol=1e-12)
    assert w.device == "cuda:0" and not np.allclose(w.numpy(), [1.0, -2.0, 0.5])


@pytest.mark.gpu("cupy")
def test_device_strings(cp):
    b = _b()
    n = cp.cuda.runtime.getDeviceCount()
    assert b.devices() == [f"cuda:{i}" for i in range(n)] and b.has_gpu()
    with cp.cuda.Device(0):
        for spec in ("cuda", "gpu", "cuda:0", "gpu:0", " CUDA:0 "):
            assert b.device_str(b.parse_device(spec)) == "cuda:0", spec
        assert b.device_str(b.parse_device(cp.cuda.Device(0))) == "cuda:0"
        x = b.asarray(np.arange(3.0))
        dev = b.device_of(x)
        assert dev == x.device and {dev: 1}[b.parse_device("cuda:0")] == 1  # equal to CuPy's, and hashable
        with gt.use_backend("cupy"):
            assert gt.zeros((2,), device="gpu:0").device == "cuda:0"
        with gt.use_backend("cupy:cuda:0"):
            assert gt.ones((2,)).device == "cuda:0" and gt.random.normal((2,), seed=1).device == "cuda:0"
    with pytest.raises(ValueError, match=r"no device 'cpu': CuPy arrays live in GPU memory"):
        b.parse_device("cpu")
    with pytest.raises(ValueError, match=rf"no device 'cuda:{n}' \(devices: \['cuda:0'"):
        b.parse_device(f"cuda:{n}")
    with pytest.raises(ValueError, match="no device 'tpu:0'"):
        b.parse_device("tpu:0")
    with pytest.raises(TypeError, match="a device is a string"):
        b.parse_device(0)
    with gt.use_backend("cupy"):
        t = gt.constant([1.0, 2.0])
        with pytest.raises(ValueError, match="no device 'cpu'"):
            t.to_device("cpu")
        np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])  # the host copy is .numpy()


@pytest.mark.gpu("cupy")
def test_two_gpus_keep_tensors_and_gradients_on_their_devices(cp):
    """Creation, moves and forward ops follow the tensors' GPU whatever CuPy's current device is; a
    gradient of work on the second GPU is taken with that GPU current (what docs/backends.md says)."""
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("one GPU here: moving between GPUs needs two")
    with gt.use_backend("cupy"), cp.cuda.Device(0):
        x = gt.constant(np.array([1.0, 2.0]), dtype=gt.float64, device="cuda:0")
        a = gt.asarray(np.array([0.5, 0.25]), device="cuda:1")
        assert (x.device, a.device, gt.zeros_like(a).device) == ("cuda:0", "cuda:1", "cuda:1")
        y = x.to_device("cuda:1")
        s = gt.sum(gt.sin(y) * a)  # on cuda:1, while cuda:0 is CuPy's current device
        assert (y.device, s.device, a[gt.constant([1], device="cuda:1")].device) == ("cuda:1",) * 3
        back = s.to_device("cuda:0")
        assert back.device == "cuda:0" and np.isclose(float(back), np.sin([1.0, 2.0]) @ [0.5, 0.25])
        with pytest.raises(ValueError, match="two devices: 'cuda:0' and 'cuda:1'"):
            x + a
    with gt.use_backend("cupy", device="cuda:1"), cp.cuda.Device(1):
        w = gt.Variable(np.array([1.0, 2.0]), dtype=gt.float64)
        with gt.GradientTape() as tape:
            loss = gt.sum(gt.sin(w) * a)
        g = tape.gradient(loss, w)
        assert (w.device, g.device) == ("cuda:1", "cuda:1")
        np.testing.assert_allclose(g.numpy(), np.cos([1.0, 2.0]) * [0.5, 0.25], rtol=1e-12)


@pytest.mark.gpu("cupy")
def test_dlpack_with_torch_cuda_shares_gpu_memory(cp):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here (a CPU build, or no GPU it can use): DLPack with torch needs it")
    src = torch.arange(6, dtype=torch.float64, device="cuda:0")
    with gt.use_backend("cupy"):
        x = gt.from_dlpack(src)  # torch -> CuPy
        assert x.device == "cuda:0" and x.native.data.ptr == src.data_ptr()
        src[0] = 42.0
        torch.cuda.synchronize()
        assert x.numpy()[0] == 42.0  # the same memory
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.sum(x * x)
        np.testing.assert_array_equal(tape.gradient(y, x).numpy(), 2.0 * src.cpu().numpy())
        c = gt.constant(np.arange(4.0), dtype=gt.float64)
    back = torch.from_dlpack(c)  # CuPy -> torch, through Tensor.__dlpack__
    assert back.device.type == "cuda" and back.data_ptr() == c.native.data.ptr
    with gt.use_backend("torch"):
        t = gt.from_dlpack(c)  # CuPy -> torch, through the torch adapter
        assert t.device == "cuda:0" and t.native.data_ptr() == c.native.data.ptr


@pytest.mark.gpu("cupy")
def test_dlpack_with_jax_gpu_shares_gpu_memory(cp):
    jax = pytest.importorskip("jax")
    _backends.get("jax")  # (float64 on: the jax backend turns jax_enable_x64 on)
    gpus = [d for d in jax.devices() if d.platform in ("gpu", "cuda")]
    if not gpus:
        pytest.skip("JAX has no GPU here (a CPU build of jaxlib): DLPack with JAX on the GPU needs one")
    src = jax.device_put(jax.numpy.arange(6.0, dtype=jax.numpy.float64), gpus[0])
    with gt.use_backend("cupy"):
        x = gt.from_dlpack(src)  # JAX -> CuPy
        assert x.native.data.ptr == src.unsafe_buffer_pointer()
        np.testing.assert_array_equal(x.numpy(), np.arange(6.0))
        c = gt.constant(np.arange(4.0), dtype=gt.float64)
    back = jax.numpy.from_dlpack(c)  # CuPy -> JAX
    assert back.devices() == {gpus[0]} and back.unsafe_buffer_pointer() == c.native.data.ptr
    with gt.use_backend("jax"):
        t = gt.from_dlpack(c)
        assert t.device == "gpu:0" and t.native.unsafe_buffer_pointer() == c.native.data.ptr
        np.testing.assert_array_equal(t.numpy(), np.arange(4.0))


@pytest.mark.gpu("cupy")
@pytest.mark.parametrize("dtype", [gt.float32, gt.float64, gt.complex128])
def test_gradient_of_repeated_indices_accumulates(cp, dtype):
    base = np.arange(5.0) + (1j if dtype.is_complex else 0) * np.arange(5.0)
    idx = np.array([0, 3, 3, 3, 4, 0])
    with gt.use_backend("cupy"):
        x = gt.Variable(base, dtype=dtype)
        w = gt.constant(np.arange(1.0, 7.0), dtype=dtype)
        with gt.GradientTape() as tape:
            y = gt.real(gt.sum(w * x[gt.constant(idx)])) if dtype.is_complex else gt.sum(w * x[gt.constant(idx)])
        g = tape.gradient(y, x)
    want = np.zeros(5)
    np.add.at(want, idx, np.arange(1.0, 7.0))
    assert g.dtype is dtype and g.device == "cuda:0"
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)


@pytest.mark.gpu("cupy")
def test_index_add_matches_numpy_for_every_dtype_and_key(cp):
    """``cupyx.scatter_add``'s atomics take five dtypes; the others are added through them."""
    b = _b()
    shape = (4, 3)
    keys = [
        (np.array([0, 2, 2, -1]),),
        (slice(None), np.array([1, 1, 0])),
        (np.array([2, 0, 2]), np.array([1, 1, 1])),
        (slice(None, None, -1), np.array([0, 0])),
        (np.ones(shape, dtype=bool),),
        (slice(1, 3), 0),
    ]
    rng = np.random.default_rng(1)
    for dtype in gt.dtypes.ALL_DTYPES:
        for key in keys:
            sel = np.zeros(shape)[key].shape
            vals = rng.integers(-3, 5, size=sel)
            if dtype.is_complex:
                vals = vals + 1j * rng.integers(-2, 3, size=sel)
            vals = vals.astype(dtype.name)
            want = np.zeros(shape, dtype=dtype.name)
            np.add.at(want, key, vals)
            native_key = tuple(cp.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
            got = b.index_add(shape, dtype, native_key, cp.asarray(vals))
            assert b.dtype_of(got) is dtype, (dtype, key)
            np.testing.assert_array_equal(cp.asnumpy(got), want, err_msg=f"{dtype} {key}")


@pytest.mark.gpu("cupy")
def test_out_of_bounds_indices_raise_as_in_numpy(cp):
    """CuPy wraps them around; the adapter checks them."""
    with gt.use_backend("cupy"):
        x = gt.constant(np.arange(6.0).reshape(2, 3))
        for bad in (
            lambda: x[gt.constant([2])],
            lambda: x[:, gt.constant([0, 3])],
            lambda: x[..., gt.constant([-4])],
            lambda: gt.take(x, gt.constant([5]), axis=1),
            lambda: gt.take_along_axis(x, gt.constant([[3], [0]]), axis=1),
        ):
            with pytest.raises(IndexError, match="out of bounds"):
                bad()
        with pytest.raises(IndexError, match=r"index 7 is out of bounds for axis 1 with size 3"):
            x[gt.constant([0]), gt.constant([7])] = 1.0
        np.testing.assert_array_equal(x[gt.constant([-1, 0]), gt.constant([-3, 2])].numpy(), [3.0, 2.0])


@pytest.mark.gpu("cupy")
def test_assign_add_updates_in_place_on_the_gpu(cp):
    with gt.use_backend("cupy"):
        v = gt.Variable(np.array([1.0, 2.0]), dtype=gt.float64)
        ptr = v.native.data.ptr
        v.assign_add(gt.constant(np.array([0.5, 0.5]), dtype=gt.float64))
        v.assign_sub(gt.constant(np.array([1.0, 0.0]), dtype=gt.float64))
        np.testing.assert_array_equal(v.numpy(), [0.5, 2.5])
        assert v.native.data.ptr == ptr


@pytest.mark.gpu("cupy")
def test_erf_and_integer_reciprocal(cp):
    from scipy.special import erf

    xs = np.linspace(-2.0, 2.0, 7)
    with gt.use_backend("cupy"):
        for dtype in (gt.float32, gt.float64):
            y = gt.nn.erf(gt.constant(xs, dtype=dtype))
            assert y.dtype is dtype
            np.testing.assert_allclose(y.numpy(), erf(xs), rtol=1e-6 if dtype is gt.float32 else 1e-14)
        r = gt.reciprocal(gt.constant([2, 4, -8]))
        assert r.dtype is gt.float32
        np.testing.assert_array_equal(r.numpy(), [0.5, 0.25, -0.125])


@pytest.mark.gpu("cupy")
@pytest.mark.slow
def test_conformance_quick_pass_on_cupy(cp):
    """One sample of every op on CuPy against NumPy and finite differences (as CI's quick pass does on
    the CPU backends); ``to_device``'s case moves to the default device (CuPy has no ``"cpu"``)."""
    ops = sorted({op.name for op, _ in cases()})
    report = conformance_run(backends=["cupy"], ops=ops, samples=1, progress=False, order2=False)
    assert report.failed == [], report.markdown()
    assert set(report.rows) == set(ops)
