"""Backends are plugins (API.md §1): a third-party package registers one in the entry-point group
``gradtape.backends`` and gradtape uses it without any change to gradtape."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import backend_registry as _backends

PLUGIN = '''
"""myplug: a gradtape backend living outside gradtape (a thin variant of the NumPy adapter)."""
import numpy as np
from gradtape.backends import Backend
from gradtape.backends.numpy import NumpyBackend

assert issubclass(NumpyBackend, Backend)


class MyBackend(NumpyBackend):
    name = "myplug"
    install_hint = "pip install myplug"
    calls = 0

    def load(self):
        type(self).loaded = True
        return super().load()

    def index_add(self, shape, dtype, key, values):
        type(self).calls += 1
        return super().index_add(shape, dtype, key, values)
'''


def _install_plugin(root):
    pkg = root / "myplug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(PLUGIN)
    dist = root / "myplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[gradtape.backends]\nmyplug = myplug:MyBackend\n")
    (dist / "top_level.txt").write_text("myplug\n")


def test_an_installed_plugin_is_found_and_differentiates(tmp_path):
    _install_plugin(tmp_path)
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import gradtape as gt

        assert "myplug" in gt.available_backends(), gt.available_backends()
        assert "myplug" not in sys.modules                      # listed without being imported
        with gt.use_backend("myplug") as b:
            assert type(b).__name__ == "MyBackend" and b.name == "myplug" and b.loaded
            x = gt.Variable([1.0, 2.0, 3.0])
            with gt.GradientTape() as tape:
                y = gt.sum(gt.sin(x) * x[gt.constant([0, 0, 2])])
            g = tape.gradient(y, x)
        assert x.backend == g.backend == "myplug", (x.backend, g.backend)
        xs = np.array([1.0, 2.0, 3.0])
        want = np.cos(xs) * xs[[0, 0, 2]]
        want[0] += np.sin(1.0) + np.sin(2.0)
        want[2] += np.sin(3.0)
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)
        assert type(b).calls >= 1                             # the plugin's own scatter-add ran
        gt.set_backend("myplug")
        assert gt.constant(1.0).backend == "myplug"
        with gt.use_backend("numpy"):
            n = gt.constant([1.0])
        try:
            gt.constant([1.0]) + n
        except ValueError as e:
            assert "'myplug'" in str(e) and "'numpy'" in str(e)
        else:
            raise AssertionError("mixing a plugin's tensors with numpy's must fail")
        print("ok")
    """)
    env = dict(os.environ)
    env.pop("GRADTAPE_BACKEND", None)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    proc = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "ok"


def test_a_plugin_is_selected_by_gradtape_backend(tmp_path):
    _install_plugin(tmp_path)
    env = dict(os.environ, GRADTAPE_BACKEND="myplug")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    proc = subprocess.run(
        [sys.executable, "-c", "import gradtape as gt; print(gt.constant([1.0]).backend)"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "myplug"


def test_register_by_hand():
    from gradtape.backends.numpy import NumpyBackend

    class Handmade(NumpyBackend):
        name = "handmade"

    _backends.register("handmade", Handmade)
    try:
        assert "handmade" in gt.available_backends()
        with gt.use_backend("handmade"):
            x = gt.Variable([3.0])
            with gt.GradientTape() as t:
                y = x * x
            g = t.gradient(y, x)
        assert g.backend == "handmade"
        np.testing.assert_allclose(g.numpy(), [6.0])
    finally:
        _backends.unregister("handmade")
    assert "handmade" not in gt.available_backends()
    with pytest.raises(ValueError, match="unknown gradtape backend 'handmade'"):
        gt.set_backend("handmade")


def test_a_plugin_must_be_a_backend():
    _backends.register("not_a_backend", object)
    try:
        with pytest.raises(TypeError, match="must be a gradtape.backends.Backend"):
            gt.set_backend("not_a_backend")
    finally:
        _backends.unregister("not_a_backend")


def test_builtin_names_cannot_be_taken():
    with pytest.raises(ValueError, match="built-in"):
        _backends.register("torch", object)
