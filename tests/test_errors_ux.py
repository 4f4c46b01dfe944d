"""Errors that say what to do (issue 13, item 5): ``tape.watch`` of another library's array names its
full type and the conversion to use; a bad ``GRADTAPE_BACKEND`` is one line at first use (the value,
the backends there are, how to fix it), never at ``import gradtape``; an array method the standard
lacks (``x.sum()``) names the namespace function to call."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import config as _config
from gradtape.core import backend_registry as bk


def full_type_name(obj):
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


# ---------------------------------------------------------------------------------------- tape.watch
def test_watch_of_a_native_array_names_its_full_type_and_the_fix(backend):
    native = gt.asarray([1.0, 2.0]).native  # the backend's own array: torch.Tensor, numpy.ndarray, ...
    with gt.GradientTape() as tape, pytest.raises(ValueError) as info:
        tape.watch(native)
    msg = str(info.value)
    assert msg.startswith(f"GradientTape.watch: got an object of type {full_type_name(native)} ("), msg
    assert "not a gt.Tensor or gt.Variable" in msg
    assert "gt.constant(x) or gt.asarray(x)" in msg and "gt.Variable(x)" in msg
    assert "\n" not in msg


def test_watch_of_a_torch_tensor_says_torch_tensor():
    torch = pytest.importorskip("torch", reason="the message names torch.Tensor: needs torch")
    with (
        gt.GradientTape() as tape,
        pytest.raises(ValueError, match=r"of type torch\.Tensor \(tensor\(\[1\., 2\.\]\)\)"),
    ):
        tape.watch(torch.tensor([1.0, 2.0]))


def test_watch_of_a_python_float_and_a_long_repr(backend):
    with gt.GradientTape() as tape:
        with pytest.raises(ValueError, match=r"of type float \(2\.5\), not a gt\.Tensor"):
            tape.watch([gt.constant(1.0), 2.5])
        with pytest.raises(ValueError) as info:
            tape.watch(np.zeros(1000))
    assert "of type numpy.ndarray (array([0., 0., 0.," in str(info.value)
    assert len(str(info.value)) < 300  # the value's repr is cut short


def test_gradient_of_a_native_source_names_its_type(backend):
    x = gt.Variable([1.0, 2.0])
    with gt.GradientTape() as tape:
        y = gt.sum(x * x)
    with pytest.raises(ValueError) as info:
        tape.gradient(y, [x, x.native])
    msg = str(info.value)
    assert msg.startswith(
        f"GradientTape.gradient: sources must be Tensors or Variables, got {full_type_name(x.native)}"
    )
    assert "gt.constant(x) / gt.asarray(x)" in msg


def test_second_gradient_of_a_non_persistent_tape_says_persistent(backend):
    x = gt.Variable(2.0)
    with gt.GradientTape() as tape:
        y = x * x
    tape.gradient(y, x)
    with pytest.raises(RuntimeError, match=r"create the tape with persistent=True to call gradient\(\) more than once"):
        tape.gradient(y, x)


def test_stop_recording_outside_the_context_says_where_to_call_it():
    tape = gt.GradientTape()
    with pytest.raises(RuntimeError, match="not recording; call stop_recording\\(\\) inside the tape's `with` block"):
        with tape.stop_recording():
            pass


# ---------------------------------------------------------------------------------------- GRADTAPE_BACKEND
@pytest.fixture
def fresh_default(monkeypatch):
    """Forget the process default so that GRADTAPE_BACKEND is read again; restore it afterwards."""
    saved = _config._default
    _config._default = None
    yield monkeypatch
    _config._default = saved


def _raised(exc_type):
    with pytest.raises(exc_type) as info:
        gt.constant(1.0)
    e = info.value
    assert e.__cause__ is None and e.__suppress_context__  # no chained registry traceback
    assert "\n" not in str(e)
    return str(e)


def test_unknown_backend_in_the_environment(fresh_default):
    fresh_default.setenv("GRADTAPE_BACKEND", "nosuchlib")
    msg = _raised(ValueError)
    known = ", ".join(bk.known_backends())
    installed = ", ".join(gt.available_backends())
    assert msg == (
        f"GRADTAPE_BACKEND='nosuchlib': unknown gradtape backend 'nosuchlib'; known backends: {known} "
        f"(installed here: {installed}). To fix: set GRADTAPE_BACKEND to an installed backend, optionally "
        "with a device (torch:cuda), or unset it for numpy"
    )
    assert _raised(ValueError) == msg  # every use raises again: never a silent fallback to numpy


def test_unknown_device_in_the_environment(fresh_default):
    fresh_default.setenv("GRADTAPE_BACKEND", "numpy:nosuchdevice")
    msg = _raised(ValueError)
    assert msg.startswith("GRADTAPE_BACKEND='numpy:nosuchdevice': ")
    assert "nosuchdevice" in msg.split(": ", 1)[1]
    assert msg.endswith("To fix: set GRADTAPE_BACKEND=numpy (its default device) or name one of the devices listed")


def test_backend_in_the_environment_that_is_not_installed(fresh_default):
    fresh_default.setenv("GRADTAPE_BACKEND", "jax")
    module, cls, _, extra = bk._BUILTIN["jax"]
    fresh_default.setitem(bk._BUILTIN, "jax", (module, cls, "jax_not_installed_here", extra))
    fresh_default.setattr(bk, "_instances", {})
    msg = _raised(ImportError)
    assert msg.startswith("GRADTAPE_BACKEND='jax': gradtape backend 'jax' needs the 'jax_not_installed_here' package")
    # the install command, said once (the registry's cause names it; the fix does not repeat it)
    assert msg.count("`python3 -m pip install jax`") == 1, msg
    assert "To fix: install it" in msg and ", or set GRADTAPE_BACKEND to an installed backend" in msg


def _python(code, value):
    env = {k: v for k, v in os.environ.items() if k != "GRADTAPE_BACKEND"}
    env["GRADTAPE_BACKEND"] = value
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_a_bad_environment_value_does_not_break_the_import():
    p = _python("import gradtape as gt; print(gt.__version__, gt.available_backends()[0])", "nosuchlib")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [gt.__version__, "numpy"]


def test_a_bad_environment_value_is_one_line_at_first_use():
    p = _python("import gradtape as gt\ngt.ones(3)", "nosuchlib")
    assert p.returncode == 1
    assert "The above exception was the direct cause" not in p.stderr and "During handling" not in p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError: GRADTAPE_BACKEND='nosuchlib': unknown gradtape backend 'nosuchlib'")
    assert "To fix:" in last
    assert sum(line.startswith(("ValueError", "ImportError")) for line in p.stderr.splitlines()) == 1


# ---------------------------------------------------------------------------------------- array methods
def test_array_method_names_the_namespace_function(backend):
    """On the backend under test the function calls ``x.sum()``: that backend is reported skipped,
    with the function to call instead; the finite differences (on NumPy) still run."""

    def fn(x):
        xp = x.__array_namespace__()
        return x.sum() if x.backend == backend.split(":")[0] else xp.sum(x * x)

    if backend == "numpy":  # the finite differences run on NumPy too: check_gradients raises there
        with pytest.raises(AttributeError, match=r"no \.sum\(\) method; call the namespace function instead: xp\.sum"):
            gt.check_gradients(fn, np.ones(3), backends=[backend], native=False)
        return
    report = gt.check_gradients(fn, np.ones(3), backends=[backend], native=False)
    why = report.skipped[f"gradtape:{backend}"]
    # Python's words, then gradtape's spelling (gradtape/habits.py), then the Array API's (check_gradients)
    assert why.startswith("AttributeError: 'Tensor' object has no attribute 'sum': gt.reduce_sum(t, axis=...)"), why
    assert why.endswith(
        "the Array API standard's arrays have no .sum() method; call the namespace function instead: xp.sum(x), "
        "with xp = x.__array_namespace__()"
    ), why
    assert not report.passed  # nothing of gradtape's was compared


@pytest.mark.parametrize(
    ("method", "fix"),
    [("mean", "xp.mean(x)"), ("flatten", "xp.reshape(x, (-1,))"), ("cumsum", "xp.cumulative_sum(x)")],
)
def test_array_method_fixes(method, fix):
    def fn(x):
        return getattr(x, method)()

    with pytest.raises(AttributeError, match=rf"no \.{method}\(\) method; call the namespace function instead: "):
        gt.check_gradients(fn, np.ones(3), backends=["numpy"], native=False)
    with pytest.raises(AttributeError) as info:
        gt.check_gradients(fn, np.ones(3), backends=["numpy"], native=False)
    assert f"instead: {fix}, with xp" in str(info.value)


def test_other_attribute_errors_are_left_alone():
    def fn(x):
        return x.no_such_thing_anywhere

    with pytest.raises(AttributeError) as info:
        gt.check_gradients(fn, np.ones(3), backends=["numpy"], native=False)
    assert str(info.value) == "'Tensor' object has no attribute 'no_such_thing_anywhere'"


def test_tensorflow_hint_is_the_plain_package():
    report = gt.check_gradients(lambda x: x * x, np.ones(2), backends=["numpy"])
    if "tensorflow" not in report.skipped:
        pytest.skip("tensorflow is installed here: no install hint to read")
    assert report.skipped["tensorflow"] == "not installed (python3 -m pip install tensorflow)"
