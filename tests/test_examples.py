"""The examples under ``examples/`` run, reach their stated targets, give the same numbers on every
backend, and exit non-zero when they miss (run with reduced steps/epochs to stay quick)."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import pytest

import gradtape as gt

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def load(name):
    """The example ``examples/<name>.py`` as a module (imported once)."""
    key = f"gradtape_example_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module  # dataclasses look their module up while it executes
        spec.loader.exec_module(module)
    return sys.modules[key]


def test_linear_regression(backend, capsys):
    ex = load("linear_regression")
    result = ex.main(["--backend", backend, "--steps", "150", "--seed", "1"])
    assert result.ok, result
    assert result.backend == backend.split(":")[0]
    out = capsys.readouterr().out
    assert out.startswith(f"y ≈ {result.a}x + {result.b}\n")
    # the same data and the same steps give the same fit on every backend
    reference = ex.main(["--backend", "numpy", "--steps", "150", "--seed", "1"])
    assert abs(result.a - reference.a) < 1e-4 and abs(result.b - reference.b) < 1e-4


def test_linear_regression_uses_the_configured_backend(backend):
    result = load("linear_regression").main(["--steps", "100"])
    assert result.backend == backend.split(":")[0] and result.ok


def test_polynomial_regression(backend, capsys):
    result = load("polynomial_regression").main(["--backend", backend, "--steps", "200"])
    assert result.ok, result
    a, b, c = result.coefficients
    assert capsys.readouterr().out.startswith(f"y ≈ {a}x^2 + {b}x + {c}\n")


def test_classifier(backend, capsys):
    pytest.importorskip("sklearn")
    ex = load("classifier")
    result = ex.main(["--backend", backend, "--epochs", "8", "--batch-size", "128"])
    assert result.ok and result.test_accuracy >= 0.95, result
    assert result.target == ex.TARGET_ACCURACY == 0.95
    assert "test accuracy" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["torch_with_gradtape_loss", "jax_with_gradtape_loss"])
def test_a_native_model_trained_with_a_gradtape_loss(backend, capsys, name):
    """issue 25: a torch / JAX model whose loss gradtape differentiates (gt.interop.to_torch / to_jax)."""
    ex = load(name)
    result = ex.main(["--backend", backend, "--steps", "150"])
    assert result.ok and result.test_accuracy >= ex.TARGET_ACCURACY == 0.9, result
    assert result.backend == backend.split(":")[0]
    assert "test accuracy" in capsys.readouterr().out


def test_examples_state_their_targets_in_their_docstrings():
    for name, phrase in (
        ("linear_regression", "0.25"),
        ("polynomial_regression", "0.3"),
        ("classifier", "0.95"),
        ("torch_with_gradtape_loss", "0.9"),
        ("jax_with_gradtape_loss", "0.9"),
    ):
        doc = load(name).__doc__
        assert phrase in doc and "--backend" in doc and "--seed" in doc, name


@pytest.mark.parametrize("args,code", [([], 0), (["--steps", "2"], 1)])
def test_exit_status_says_whether_the_target_was_reached(args, code):
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "linear_regression.py"), "--backend", "numpy", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert ("reached" if code == 0 else "MISSED") in proc.stdout


def test_examples_leave_the_active_backend_alone():
    before = gt.get_backend()
    load("linear_regression").main(["--backend", "numpy", "--steps", "5"])
    assert gt.get_backend() is before
