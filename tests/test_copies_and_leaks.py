"""Copies stay on the tape; conversions out of gradtape are loud (issue 10, parts 1, 2 and 7).

Every path that returns a copy or a view of a tensor is recorded, so a defensive copy keeps the
gradient; converting a recorded tensor out of gradtape warns ``gt.GradientLeakWarning`` (or raises
``gt.GradientLeakError``) naming the call site; ``None`` and lossy casts are errors, not NaNs or
truncations.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import recording_state

X = [1.0, 2.0, 3.0]


def _grad(fn):
    x = gt.asarray(X, dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    g = tape.gradient(y, x)
    assert g is not None, "the copy left the tape"
    return g.numpy()


COPIES = {
    "asarray(copy=True)": lambda x: gt.asarray(x, copy=True),
    "asarray(dtype=float32)": lambda x: gt.astype(gt.asarray(x, dtype=gt.float32), gt.float64),
    "astype(copy=True)": lambda x: gt.astype(x, gt.float64, copy=True),
    "reshape(copy=True)": lambda x: gt.reshape(x, (3,), copy=True),
    "from_dlpack": lambda x: gt.from_dlpack(x),
    "from_dlpack(copy=True)": lambda x: gt.from_dlpack(x, copy=True),
    "copy.copy": copy.copy,
    "copy.deepcopy": copy.deepcopy,
    "namespace asarray": lambda x: x.__array_namespace__().asarray(x, copy=True),
}


@pytest.mark.parametrize("path", list(COPIES))
def test_every_copy_or_view_is_recorded(backend, path):
    g = _grad(lambda x: gt.sum(COPIES[path](x) ** 2))
    np.testing.assert_allclose(g, [2.0, 4.0, 6.0], rtol=1e-6)


def test_the_issues_logsumexp_shape_of_copy(backend):
    """SciPy's logsumexp copies its input and subtracts the max: the gradient is the softmax."""
    g = _grad(lambda x: gt.sum(gt.exp(gt.asarray(x, copy=True) - gt.max(x))))
    x = np.asarray(X)
    np.testing.assert_allclose(g, np.exp(x - x.max()) - np.eye(3)[2] * np.exp(x - x.max()).sum(), rtol=1e-12)


def test_setitem_on_a_copy_keeps_the_other_entries_connected(backend):
    def f(x):
        c = gt.asarray(x, copy=True)
        c[0] = 5.0
        return gt.sum(c**2)

    np.testing.assert_allclose(_grad(f), [0.0, 4.0, 6.0])


def test_a_copy_is_a_copy_and_copy_false_refuses_a_cast(backend):
    x = gt.asarray(X, dtype=gt.float64)
    c = gt.asarray(x, copy=True)
    assert c._v is not x._v and np.array_equal(c.numpy(), x.numpy())
    assert gt.asarray(x, copy=False) is x
    with pytest.raises(ValueError, match="copy=False"):
        gt.asarray(x, dtype=gt.float32, copy=False)


def test_a_copied_variable_is_a_new_variable_and_a_copied_read_is_recorded(backend):
    v = gt.Variable([1.0, 2.0], name="w")
    w = copy.copy(v)
    assert isinstance(w, gt.Variable) and w is not v and w.name == "w:0"
    with gt.GradientTape() as tape:
        y = gt.sum(gt.asarray(v, copy=True) ** 2)
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), [2.0, 4.0])


# ------------------------------------------------------------------------------------- leaks
def _leaks(how):
    return [w for w in how if issubclass(w.category, gt.GradientLeakWarning)]


CONVERSIONS = {
    "np.asarray": lambda y: np.asarray(y),
    "float": lambda y: float(gt.sum(y)),
    "int": lambda y: int(gt.sum(y)),
    "complex": lambda y: complex(gt.sum(y)),
    "numpy()": lambda y: y.numpy(),
    "tolist()": lambda y: y.tolist(),
    "np.from_dlpack": lambda y: np.from_dlpack(y),
    ".native": lambda y: y.native,
}


@pytest.mark.parametrize("how", list(CONVERSIONS))
def test_converting_a_recorded_tensor_warns_naming_the_call_site(backend, how):
    x = gt.constant([1.0, 2.0], dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = x * 2
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                CONVERSIONS[how](y)
            except BufferError:  # NumPy imports CPU buffers only: the leak was named all the same
                if how != "np.from_dlpack" or y.device == "cpu":
                    raise
    leaks = _leaks(seen)
    assert len(leaks) == 1, [str(w.message) for w in seen]
    assert leaks[0].filename == __file__
    assert os.path.basename(__file__) in str(leaks[0].message)
    assert recording_state.per_thread.tapes == []


def test_the_warning_is_once_per_call_site(backend):
    x = gt.constant([1.0, 2.0])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = x * 2
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("default")
            for _ in range(3):
                np.asarray(y)  # one site: one warning
            np.asarray(y)  # another site: another
    assert len(_leaks(seen)) == 2


def test_no_warning_where_no_gradient_is_lost(backend):
    x = gt.constant([1.0, 2.0])
    y = x * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.GradientLeakWarning)
        np.asarray(y)  # nothing records
        with gt.GradientTape() as tape:
            tape.watch(x)
            z = x * 3
            np.asarray(y)  # y is not connected to x on this tape
            y.native, gt.stop_gradient(z).native
            np.asarray(gt.stop_gradient(z))  # a deliberate cut
            float(gt.argmax(z))  # integers carry no gradient
            repr(z), f"{gt.sum(z):.3f}"  # display is not a conversion
        np.asarray(z)  # the tape has stopped recording


def test_a_trainable_variable_read_out_inside_a_tape_warns(backend):
    v = gt.Variable([1.0, 2.0])
    with gt.GradientTape():
        with pytest.warns(gt.GradientLeakWarning, match="Tensor.numpy"):
            v.numpy()
    with gt.GradientTape(watch_accessed_variables=False):
        with warnings.catch_warnings():
            warnings.simplefilter("error", gt.GradientLeakWarning)
            v.numpy()


def test_a_library_conversion_names_the_library_line_and_the_users_line(backend):
    x = gt.constant([3.0, 4.0], dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            np.linalg.norm(x * 1.0)  # NumPy converts inside its own Python code
    (w,) = _leaks(seen)
    assert "inside numpy.linalg" in str(w.message) and f"called from {__file__}:" in str(w.message)
    assert w.filename == __file__


def test_raise_mode_stops_at_the_leak_and_leaves_the_tape_stack_clean(backend):
    x = gt.constant([1.0, 2.0])
    gt.config.gradient_leak = "raise"
    try:
        with pytest.raises(gt.GradientLeakError, match="Tensor.numpy"):
            with gt.GradientTape() as tape:
                tape.watch(x)
                (x * 2).numpy()
    finally:
        gt.config.gradient_leak = "warn"
    assert recording_state.per_thread.tapes == []
    with pytest.raises(ValueError, match="gradient_leak"):
        gt.config.gradient_leak = "sometimes"
    assert gt.config.gradient_leak == "warn"


def test_the_environment_variable_sets_raise_mode():
    code = (
        "import gradtape as gt, numpy as np\n"
        "x = gt.constant([1.0])\n"
        "with gt.GradientTape() as t:\n"
        "    t.watch(x)\n"
        "    try:\n"
        "        np.asarray(x * 2)\n"
        "    except gt.GradientLeakError:\n"
        "        print('raised', gt.config.gradient_leak)\n"
    )
    env = dict(os.environ, GRADTAPE_GRADIENT_LEAK="raise")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "raised raise"


# ------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call",
    [
        lambda v: v.assign(None),
        lambda v: v.assign([None, 1.0]),
        lambda v: v.assign_add(None),
        lambda v: v.assign_sub([1.0, None]),
        lambda v: v.__setitem__((), None),
        lambda v: v.__setitem__(0, None),
    ],
)
def test_none_is_never_written_as_nan(backend, call):
    v = gt.Variable([1.0, 2.0])
    with pytest.raises(ValueError, match="None"):
        call(v)
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    with pytest.raises(ValueError, match="None"):
        gt.constant([1.0, None])


def test_lossy_python_floats_to_integer_dtypes_are_a_type_error(backend):
    for make in (
        lambda: gt.constant(1.5, dtype=gt.int32),
        lambda: gt.Variable(1.5, dtype=gt.int32),
        lambda: gt.constant([1, 2.5], dtype=gt.int64),
        lambda: gt.constant(0.5, dtype=gt.bool),
        lambda: gt.asarray(float("nan"), dtype=gt.int64),
    ):
        with pytest.raises(TypeError, match="Cannot convert"):
            make()
    assert gt.constant(2.0, dtype=gt.int32).numpy() == 2
    assert gt.constant([1.0, 0.0], dtype=gt.bool).numpy().tolist() == [True, False]


def test_add_n_is_at_the_top_level_and_differentiable(backend):
    a = gt.constant([1.0, 2.0], dtype=gt.float64)
    b = gt.constant([3.0, 4.0], dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch([a, b])
        y = gt.add_n([a, b, a * b])
    np.testing.assert_allclose(y.numpy(), [7.0, 14.0])
    ga, gb = tape.gradient(y, [a, b])
    np.testing.assert_allclose(ga.numpy(), [4.0, 5.0])
    np.testing.assert_allclose(gb.numpy(), [2.0, 3.0])


def test_assigning_a_tensor_of_another_dtype_is_an_error_as_in_tensorflow(backend):
    v = gt.Variable([1.0, 2.0])
    for call in (
        lambda: v.assign(gt.constant([3.0, 4.0], dtype=gt.float64)),
        lambda: v.assign_add(gt.constant([1, 2])),
        lambda: v.assign_sub(gt.constant([True, False])),
    ):
        with pytest.raises(ValueError, match="cast it first"):
            call()
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    v.assign(np.array([3.0, 4.0]))  # NumPy arrays and Python values are converted, as in TF
    v.assign_add([1, 1])
    np.testing.assert_array_equal(v.numpy(), [4.0, 5.0])


def test_native_inside_custom_gradient_keeps_the_gradient_and_is_quiet(backend):
    """The recorded way to call the library's own function on ``.native`` (docs/scaling.md): inside
    ``gt.custom_gradient`` nothing leaks, and the gradient is the one given."""

    @gt.custom_gradient
    def native_sin(x):
        y = gt.asarray(x._b.xp.sin(x.native))

        def grad(dy):
            return dy * gt.cos(x)

        return y, grad

    x = gt.constant([0.1, 0.5, 2.0], dtype=gt.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gt.GradientLeakWarning)
        with gt.GradientTape() as tape:
            tape.watch(x)
            loss = gt.sum(native_sin(x) ** 2)
        g = tape.gradient(loss, x)
    np.testing.assert_allclose(g.numpy(), np.sin(2 * x.numpy()), rtol=1e-12)
