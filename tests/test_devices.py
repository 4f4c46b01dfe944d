"""Devices (API.md §1): backend-neutral device strings and native device objects, ``device=`` on
creation, ``Tensor.to_device``, gradients on their source's device, and clear errors when an op mixes
backends or devices.

Multi-device behaviour is tested without a GPU on array_api_strict, whose test devices ``device1``
and ``device2`` refuse to mix as real devices do.  Tests that need a GPU take the ``device`` fixture
(its GPU run is marked ``gpu``) or are marked ``gpu`` themselves, and skip cleanly without one.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import backend_registry as _backends

INSTALLED = gt.available_backends()
needs_strict = pytest.mark.skipif("array_api_strict" not in INSTALLED, reason="array_api_strict not installed")


def _b(backend):
    return _backends.get(backend.split(":")[0])


def close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# --------------------------------------------------------------------------- every backend, every device
def test_creation_and_tensors_on_a_device(backend, device):
    b = _b(backend)
    for t in (
        gt.zeros((2, 3), device=device),
        gt.ones((2,), device=device),
        gt.arange(4, device=device),
        gt.full((2,), 3.0, device=device),
        gt.eye(2, device=device),
        gt.constant([1.0], device=device),
        gt.asarray(np.ones(2), device=device),
        gt.linspace(0.0, 1.0, 3, device=device),
    ):
        assert t.device == device, (t, device)
        assert b.device_str(b.device_of(t.native)) == device
    native = b.parse_device(device)
    assert gt.zeros((2,), device=native).device == device  # a native device object works too
    assert gt.zeros_like(gt.zeros((2,), device=device)).device == device


def test_gradients_live_on_their_sources_device(backend, device):
    x = gt.Variable(np.array([1.0, 2.0, 3.0]), dtype=gt.float32, device=device)
    w = gt.constant(np.array([[1.0], [0.5], [-1.0]]), device=device)
    assert x.device == device
    with gt.GradientTape() as tape:
        y = gt.sum(gt.sin(x) * x)
        z = y + gt.sum(gt.matmul(gt.reshape(x, (1, 3)), w)) + gt.sum(x[1:])
    g = tape.gradient(z, x)
    assert g.device == device and g.dtype is gt.float32
    xs = np.array([1.0, 2.0, 3.0])
    close(g, np.sin(xs) + xs * np.cos(xs) + np.array([1.0, 0.5, -1.0]) + np.array([0.0, 1.0, 1.0]), 1e-5)


def _needs_a_cpu_device(backend):
    if "cpu" not in _b(backend).devices():
        pytest.skip(f"backend {backend!r} has no CPU device (its arrays live in GPU memory; test_cupy.py checks that)")


def test_to_device_round_trip_is_differentiable(backend, device):
    _needs_a_cpu_device(backend)
    x = gt.Variable([1.0, 2.0], device=device)
    with gt.GradientTape() as tape:
        c = x.to_device("cpu")
        assert c.device == "cpu"
        back = (c * 3.0).to_device(device)
        assert back.device == device
        y = gt.sum(back * x)
    g = tape.gradient(y, x)
    assert g.device == device
    close(g, [6.0, 12.0])


def test_device_strings_round_trip(backend):
    b = _b(backend)
    for name in b.devices():
        native = b.parse_device(name)
        assert b.device_str(native) == name
        assert b.parse_device(native) is native or b.device_str(b.parse_device(native)) == name
    if "cpu" in b.devices():  # (CuPy has none: tests/test_cupy.py checks its error)
        assert b.device_str(b.parse_device("cpu")) == "cpu"
    assert gt.constant([1.0]).device == b.device_str(b.device)  # the configured default device


def test_unknown_device_is_a_value_error_listing_the_devices(backend):
    b = _b(backend)
    with pytest.raises(ValueError, match="no device 'cuda:77'"):
        b.parse_device("cuda:77")
    with pytest.raises(ValueError, match="no device"):
        gt.zeros((2,), device="cuda:77")
    with pytest.raises(ValueError, match="devices|cpu"):
        gt.zeros((2,), device="warp-drive")


def test_use_backend_with_a_device_sets_the_default_device(backend, device):
    name = backend.split(":")[0]
    with gt.use_backend(name, device=device) as b:
        assert b.device_str(b.device) == device
        assert gt.zeros((2,)).device == device
        assert gt.constant([1.0, 2.0]).device == device
        assert gt.random.normal((3,), seed=1).device == device
    with gt.use_backend(f"{name}:{device}") as b:
        assert gt.ones((1,)).device == device


# --------------------------------------------------------------------------- mixing is an error
def test_mixing_backends_is_a_value_error_naming_both():
    others = [n for n in INSTALLED if n != "numpy"]
    if not others:
        pytest.skip("only one backend installed")
    a = gt.constant([1.0, 2.0])
    with gt.use_backend(others[0]):
        b = gt.constant([1.0, 2.0])
    with pytest.raises(ValueError, match=f"'numpy'.*'{others[0]}'"):
        a + b
    with pytest.raises(ValueError, match="two backends"):
        gt.matmul(b, a)


@needs_strict
def test_mixing_devices_is_a_value_error_naming_both():
    with gt.use_backend("array_api_strict"):
        a = gt.constant([1.0, 2.0], device="device1")
        b = gt.constant([3.0, 4.0])
        assert (a.device, b.device) == ("device1", "cpu")
        with pytest.raises(ValueError, match=r"two devices: 'device1' and 'cpu'"):
            a + b
        with pytest.raises(ValueError, match=r"'cpu' and 'device1'"):
            gt.matmul(b, a)
        close(a + b.to_device("device1"), [4.0, 6.0])


@needs_strict
def test_multi_device_gradients_on_strict_test_devices():
    with gt.use_backend("array_api_strict"):
        x = gt.Variable([1.0, 2.0, 3.0], device="device1")
        w = gt.Variable([0.5, 0.5, 0.5], device="device2")
        with gt.GradientTape() as tape:
            on2 = gt.sum(x.to_device("device2") * w)
            y = on2.to_device("device1") + gt.sum(x[gt.constant([0, 0], device="device1")])
        gx, gw = tape.gradient(y, [x, w])
        assert (gx.device, gw.device) == ("device1", "device2")
        close(gx, [2.5, 0.5, 0.5])
        close(gw, [1.0, 2.0, 3.0])


@needs_strict
def test_python_values_beside_a_tensor_on_another_device():
    """A tensor on a device other than the configured default (a GPU tensor under the CPU default):
    Python scalars, lists and index lists beside it are converted onto its device."""
    with gt.use_backend("array_api_strict"):
        x = gt.constant([1.0, -2.0], device="device1")
        for y in (gt.where(x > 0, x, 0.0), x + [1.0, 2.0], x[[1, 0]], gt.take_along_axis(x, [1, 0])):
            assert y.device == "device1"
        x[0] = 5.0
        assert x.device == "device1"
        close(x, [5.0, -2.0])


@needs_strict
def test_strict_devices_are_listed():
    b = _backends.get("array_api_strict")
    assert {"cpu", "device1", "device2"} <= set(b.devices())
    assert not b.has_gpu()


# --------------------------------------------------------------------------- GPUs
def test_gpu_devices_are_named_backend_neutrally(backend):
    b = _b(backend)
    gpus = [d for d in b.devices() if d.split(":")[0] in ("cuda", "gpu")]
    if not gpus:
        for spec in ("cuda", "gpu", "cuda:0", "gpu:0"):
            with pytest.raises(ValueError, match="no device"):
                b.parse_device(spec)
        return
    first = gpus[0]
    for spec in ("cuda", "gpu", "cuda:0", "gpu:0"):
        assert b.device_str(b.parse_device(spec)) == first


@pytest.mark.gpu
def test_backend_spec_with_a_gpu_device(backend):
    name = backend.split(":")[0]
    b = _b(backend)
    gpu = next(d for d in b.devices() if d.split(":")[0] in ("cuda", "gpu"))
    with gt.use_backend(f"{name}:{gpu}"):
        x = gt.Variable([1.0, 2.0])
        with gt.GradientTape() as t:
            y = gt.sum(gt.exp(x))
        g = t.gradient(y, x)
        assert x.device == gpu and g.device == gpu
        close(g, np.exp([1.0, 2.0]), 1e-5)


@pytest.mark.gpu
def test_gpu_and_cpu_tensors_do_not_mix(backend):
    _needs_a_cpu_device(backend)
    b = _b(backend)
    gpu = next(d for d in b.devices() if d.split(":")[0] in ("cuda", "gpu"))
    a = gt.constant([1.0, 2.0], device=gpu)
    c = gt.constant([1.0, 2.0], device="cpu")
    with pytest.raises(ValueError, match="two devices"):
        a * c
