"""Packaging: the wheel builds, installs and imports on its own; `import gradtape` stays lazy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_builds_installs_and_imports(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = wheels.glob("gradtape-*.whl")
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    code = (
        "import gradtape as gt, gradtape.backends, gradtape.conformance, sys;"
        f"assert gt.__file__.startswith({str(site)!r}), gt.__file__;"
        "x = gt.Variable(3.0)\n"
        "with gt.GradientTape() as t:\n    y = x * x\n"
        "assert float(t.gradient(y, x)) == 6.0\n"
        "assert 'numpy' in gt.available_backends()\n"
        "assert list(gradtape.conformance.cases())\n"
        "print('ok')"
    )
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    assert (site / "gradtape" / "backends" / "numpy.py").exists()
    assert (site / "gradtape" / "py.typed").exists()  # (typed: PEP 561)


def test_import_is_lazy():
    code = (
        "import sys, gradtape as gt\n"
        "x = gt.Variable([1.0, 2.0])\n"
        "with gt.GradientTape() as t:\n    y = gt.sum(gt.sin(x))\n"
        "t.gradient(y, x)\n"
        "bad = [m for m in ('torch', 'jax', 'array_api_strict') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GRADTAPE_BACKEND"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr


def _run(code, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("GRADTAPE_BACKEND", "PYTHONPATH")}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=env)


def test_imports_from_a_clone_without_installing(tmp_path):
    """``python -c "import gradtape"`` in a clone's root imports that clone's package, whole (issue 23: it
    failed with a circular-import error while backends/ and conformance/ were mapped in by package-dir)."""
    shutil.copytree(ROOT / "gradtape", tmp_path / "gradtape", ignore=shutil.ignore_patterns("__pycache__"))
    code = (
        "import gradtape as gt, gradtape.backends.numpy, gradtape.conformance\n"
        "print(gt.__file__)\n"
        "x = gt.Variable(3.0)\n"
        "with gt.GradientTape() as t:\n    y = x * x\n"
        "print(float(t.gradient(y, x)))\n"
    )
    out = _run(code, tmp_path)
    assert out.returncode == 0, out.stderr
    where, grad = out.stdout.split()
    assert Path(where) == tmp_path / "gradtape" / "__init__.py"
    assert grad == "6.0"


def test_a_folder_named_gradtape_does_not_shadow_the_installed_package(tmp_path):
    """Python started in the folder that holds a clone (``./gradtape`` is the clone's root, no package)
    still imports the installed gradtape, not an empty namespace package (issue 23)."""
    (tmp_path / "gradtape" / "docs").mkdir(parents=True)
    out = _run("import gradtape as gt; print(gt.Variable.__name__, gt.__file__)", tmp_path)
    assert out.returncode == 0, out.stderr
    name, where = out.stdout.split()
    assert name == "Variable"
    assert not Path(where).is_relative_to(tmp_path)
