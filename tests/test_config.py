"""Configuration (API.md §1): set_backend / use_backend / get_backend / available_backends,
GRADTAPE_BACKEND, lazy imports, and no cross-talk between threads or asyncio tasks."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import config as _config
from gradtape.core import backend_registry as _backends

INSTALLED = gt.available_backends()


def _other_backend():
    """A second backend to pair with numpy: any installed one, else a plugin made on the spot."""
    for n in ("array_api_strict", "torch", "jax"):
        if n in INSTALLED:
            return n
    from gradtape.backends.numpy import NumpyBackend

    class Twin(NumpyBackend):
        name = "numpy_twin"

    _backends.register("numpy_twin", Twin)
    return "numpy_twin"


@pytest.fixture
def restore_default():
    saved = _config._default
    yield
    _config._default = saved


def run_python(code, env=None, timeout=120):
    full_env = {k: v for k, v in os.environ.items() if k != "GRADTAPE_BACKEND"}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=False,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )
    return proc


# --------------------------------------------------------------------------- basics
def test_default_backend_is_numpy_without_env():
    proc = run_python("import gradtape as gt; print(gt.get_backend().name, gt.constant(1.0).backend)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["numpy", "numpy"]


def test_available_backends_lists_installed_libraries():
    names = gt.available_backends()
    assert "numpy" in names
    assert len(set(names)) == len(names)
    for n in ("torch", "jax", "array_api_strict"):
        import importlib.util

        assert (n in names) == (importlib.util.find_spec(n) is not None)


def test_get_backend_exposes_name_xp_device(backend):
    b = gt.get_backend()
    assert b.name == backend.split(":")[0]
    assert hasattr(b.xp, "add") and hasattr(b.xp, "sum")
    assert b.device_str(b.device) in b.devices()
    assert gt.constant([1.0]).backend == b.name


def test_set_backend_changes_the_process_default(restore_default):
    other = _other_backend()
    b = gt.set_backend(other)
    assert b is gt.get_backend() and b.name == other
    assert gt.constant(1.0).backend == other
    gt.set_backend("numpy", device="cpu")
    assert gt.get_backend().name == "numpy"


def test_set_backend_spec_with_device(restore_default):
    b = gt.set_backend("numpy:cpu")
    assert b.name == "numpy" and gt.zeros((2,)).device == "cpu"


def test_use_backend_is_scoped_and_nests():
    other = _other_backend()
    outer = gt.get_backend()
    with gt.use_backend(other) as b:
        assert b is gt.get_backend() and b.name == other
        with gt.use_backend("numpy"):
            assert gt.get_backend().name == "numpy"
        assert gt.get_backend().name == other
    assert gt.get_backend() is outer


def test_use_backend_restores_after_an_exception():
    outer = gt.get_backend()
    with pytest.raises(RuntimeError), gt.use_backend(_other_backend()):
        raise RuntimeError("boom")
    assert gt.get_backend() is outer


def test_active_makes_a_backend_instance_active_scoped_and_restored_after_an_exception():
    """``config.active`` (the adapter instance itself, on a device; what gt.function's traces and the
    crossings between frameworks enter): scoped, nested, and restored after an exception."""
    outer = gt.get_backend()
    other = _backends.get(_other_backend())
    with _config.active(other, "somewhere") as b:
        assert b is other and gt.get_backend() is other and _config.current().device == "somewhere"
        with _config.active(outer):
            assert gt.get_backend() is outer and _config.current().device is None
        assert gt.get_backend() is other
    assert gt.get_backend() is outer
    with pytest.raises(RuntimeError, match="boom"), _config.active(other):
        raise RuntimeError("boom")
    assert gt.get_backend() is outer


def test_backend_objects_and_aliases_are_accepted():
    b = _backends.get("numpy")
    with gt.use_backend(b) as got:
        assert got is b
    assert _backends.get("np") is b


def test_unknown_backend_is_a_clear_value_error():
    with pytest.raises(
        ValueError, match=r"unknown gradtape backend 'nosuchlib'.*`gradtape backends` says how to install"
    ):
        gt.set_backend("nosuchlib")
    with pytest.raises(ValueError, match="gradtape.backends"), gt.use_backend("nosuchlib"):
        pass


def test_uninstalled_backend_says_how_to_install(monkeypatch):
    monkeypatch.setitem(
        _backends._BUILTIN,
        "fakelib",
        (
            "gradtape.backends.fakelib",
            "FakeBackend",
            "fakelib_not_installed_anywhere",
            "python3 -m pip install fakelib",
        ),
    )
    with pytest.raises(ImportError, match=r"install it with `python3 -m pip install fakelib`"):
        gt.set_backend("fakelib")
    assert "fakelib" not in gt.available_backends()


def test_bad_device_for_a_backend_is_a_value_error():
    with pytest.raises(ValueError, match="no device"), gt.use_backend("numpy", device="cuda:3"):
        pass


# --------------------------------------------------------------------------- environment variable
ENV_SPECS = ["numpy", "numpy:cpu"] + [
    s
    for s in ("torch", "torch:cpu", "jax", "jax:cpu", "array_api_strict", "array_api_strict:cpu")
    if s.split(":")[0] in INSTALLED
]


@pytest.mark.parametrize("spec", ENV_SPECS)
def test_gradtape_backend_env_var(spec, monkeypatch, restore_default):
    monkeypatch.setenv("GRADTAPE_BACKEND", spec)
    _config._default = None  # read the variable again, as at import
    name = spec.split(":")[0]
    assert gt.get_backend().name == name
    x = gt.Variable([1.0, 2.0])
    with gt.GradientTape() as t:
        y = gt.sum(x * x)
    g = t.gradient(y, x)
    assert (x.backend, g.backend, g.device) == (name, name, "cpu")
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])


def test_gradtape_backend_env_var_at_import():
    spec = next((s for s in ("array_api_strict", "jax", "torch") if s in INSTALLED), "numpy")
    proc = run_python(
        """
        import gradtape as gt
        x = gt.Variable([1.0, 2.0])
        with gt.GradientTape() as t:
            y = gt.sum(x * x)
        print(gt.get_backend().name, t.gradient(y, x).backend)
    """,
        env={"GRADTAPE_BACKEND": spec},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [spec, spec]


def test_gradtape_backend_env_var_errors_name_the_variable():
    proc = run_python("import gradtape as gt; gt.constant(1.0)", env={"GRADTAPE_BACKEND": "nosuchlib"})
    assert proc.returncode != 0
    assert "GRADTAPE_BACKEND='nosuchlib'" in proc.stderr and "unknown gradtape backend" in proc.stderr


def test_numpy_work_never_imports_torch_or_jax():
    proc = run_python("""
        import sys
        import gradtape as gt
        x = gt.Variable([[1.0, 2.0], [3.0, 4.0]])
        with gt.GradientTape() as t:
            y = gt.sum(gt.tanh(x @ x) * x[0]) + gt.mean(x[:, 1])
        g = t.gradient(y, x)
        gt.available_backends()
        print(gt.get_backend().name, g.shape)
        heavy = [m for m in ("torch", "jax", "jaxlib", "array_api_strict") if m in sys.modules]
        assert not heavy, heavy
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "numpy"


# --------------------------------------------------------------------------- no cross-talk
def _pair():
    return "numpy", _other_backend()


def test_threads_using_two_backends_see_no_cross_talk():
    names = _pair()
    barrier = threading.Barrier(2)
    errors = []

    def work(name):
        try:
            with gt.use_backend(name):
                for i in range(50):
                    barrier.wait(timeout=30)  # interleave the two threads step by step
                    x = gt.Variable([float(i), 2.0])
                    with gt.GradientTape() as t:
                        y = gt.sum(x * x)
                    g = t.gradient(y, x)
                    assert gt.get_backend().name == name, (gt.get_backend().name, name)
                    assert x.backend == name and g.backend == name
                    np.testing.assert_allclose(g.numpy(), [2.0 * i, 4.0])
        except Exception as e:  # a failure in a thread is reported below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(n,)) for n in names]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors, errors


def test_a_new_thread_starts_from_the_process_default():
    seen = []
    with gt.use_backend(_other_backend()):
        th = threading.Thread(target=lambda: seen.append(gt.get_backend().name))
        th.start()
        th.join()
    assert seen == [_config._process_default().backend.name]


def test_asyncio_tasks_using_two_backends_see_no_cross_talk():
    names = _pair()

    async def work(name):
        out = []
        with gt.use_backend(name):
            for i in range(20):
                await asyncio.sleep(0)  # hand over to the other task
                x = gt.constant([float(i)])
                out.append((gt.get_backend().name, x.backend))
        return out

    async def main():
        return await asyncio.gather(*(work(n) for n in names))

    results = asyncio.run(main())
    for name, res in zip(names, results):
        assert res == [(name, name)] * 20
    assert gt.get_backend().name == _config.current().backend.name


def test_set_backend_in_a_thread_does_not_override_a_scoped_choice(restore_default):
    other = _other_backend()
    with gt.use_backend("numpy"):
        th = threading.Thread(target=lambda: gt.set_backend(other))
        th.start()
        th.join()
        assert gt.get_backend().name == "numpy"
    assert gt.get_backend().name == other
