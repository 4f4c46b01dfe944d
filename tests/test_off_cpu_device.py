"""What a GPU run found, kept on the CPU: array_api_strict's ``device1`` behaves as a GPU does here
-- its arrays do not mix with the host's (``CPU_DEVICE``) and do not turn into NumPy arrays
implicitly -- so each behaviour below, first seen failing on torch:cuda, jax:gpu and cupy on an
H200, is tested on every machine.  (``.ci/gpu-check`` runs the whole suite on the real GPUs.)
"""

from __future__ import annotations

import copy
import io
import pickle
import subprocess
import sys
import warnings
from contextlib import redirect_stderr

import numpy as np
import pytest

import gradtape as gt
import gradtape.compile.function as gradtape_function
from gradtape.core.domains import DEFAULT_DEVICE, Case

pytest.importorskip("array_api_strict", reason="array_api_strict is not installed: its device1 stands in for a GPU")
torch = pytest.importorskip("torch", reason="the crossings below start from torch tensors")

DEV = "device1"


@pytest.fixture
def on_device1():
    with gt.use_backend("array_api_strict", device=DEV):
        yield


def test_the_stand_in_refuses_what_a_gpu_refuses(on_device1):
    """The premise: mixing with the host is an error, and so is an implicit NumPy conversion."""
    a = gt.constant([1.0, 2.0])
    assert a.device == DEV
    with pytest.raises(ValueError, match="two devices"):
        a * gt.constant([1.0, 2.0], device="cpu")
    with pytest.raises(RuntimeError, match="NumPy"):
        np.asarray(a.native)


def test_numpy_arguments_of_a_function_go_beside_its_tensors(on_device1):
    f = gt.function(lambda x, y: x * y)
    for _ in range(2):  # the trace, then the replay
        out = f(gt.constant([1.0, 2.0]), np.array([3.0, 4.0]))
        assert out.device == DEV
        np.testing.assert_array_equal(out.numpy(), [3.0, 8.0])
    g = gt.function(lambda y: y * 2.0)  # no tensor argument: the configured device
    assert g(np.array([1.0])).device == DEV


def test_a_retrace_after_a_guard_redraws_nothing_and_matches_eager(on_device1, monkeypatch):
    """A program branching on a random draw, each path its own program (guards, the fallback where a
    branch cannot be one step): a guard failure retraces with the draws already made (kept on the
    host: a device array cannot be read back as NumPy implicitly)."""
    monkeypatch.setattr(gradtape_function, "LOWER_CONTROL_FLOW", False)

    def build():
        g = gt.random.Generator.from_seed(4)

        def step(x):
            z = g.normal((), dtype=gt.float64)
            return gt.cond(z > 0, lambda: x * z, lambda: x - z)

        return step

    xs = [gt.constant(np.float64(k + 1.0)) for k in range(8)]
    step = build()
    eager = [step(x).numpy() for x in xs]
    f = gt.function(build())
    got = [f(x) for x in xs]
    assert all(t.device == DEV for t in got)
    np.testing.assert_allclose([t.numpy() for t in got], eager, rtol=1e-12)
    assert f.experimental_get_tracing_count() >= 2  # both branches were taken


def test_print_inside_a_function_copies_to_the_host(on_device1):
    f = gt.function(lambda x: (gt.print("x:", x), x + 1.0)[1])
    err = io.StringIO()
    with redirect_stderr(err):
        f(gt.constant([1.0, 2.0]))
        f(gt.constant([3.0, 4.0]))
    assert err.getvalue().split("\n")[:2] == ["x: [1. 2.]", "x: [3. 4.]"]


def test_pickled_and_copied_tensors_stay_on_their_device(on_device1):
    v = gt.Variable([1.5, 2.5], name="v")
    t = gt.constant([3.0])
    for clone in (pickle.loads(pickle.dumps(v)), copy.deepcopy(v), pickle.loads(pickle.dumps(t))):
        assert clone.device == DEV
    restored = pickle.loads(pickle.dumps(v))
    assert (restored * v).device == DEV  # usable beside the original


def test_a_device_this_machine_lacks_restores_on_the_default_with_a_warning():
    from gradtape.core.tensor import _rebuild_var

    with pytest.warns(UserWarning, match="pickled on 'numpy' device 'cuda:3' is restored on the default device"):
        v = _rebuild_var(np.array([1.0]), "numpy", True, "w", "cuda:3")
    assert v.device == "cpu"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _rebuild_var(np.array([1.0]), "numpy", True, "w", None).device == "cpu"  # an older pickle


def test_to_torch_creates_its_tensors_on_the_inputs_device(on_device1):
    """A crossing from CPU torch tensors computes on the CPU although the configured device is
    another: ``gt.eye`` inside joins its inputs (it would not mix with them on ``device1``)."""
    f = gt.interop.to_torch(lambda a: gt.linalg.inv(a @ a.mT + 3.0 * gt.eye(a.shape[-1], dtype=a.dtype)))
    x = torch.tensor([[1.0, 0.5], [0.0, 2.0]], dtype=torch.float64, requires_grad=True)
    y = f(x)
    (g,) = torch.autograd.grad(y.sum(), x)
    ref = torch.func.grad(lambda a: torch.linalg.inv(a @ a.mT + 3.0 * torch.eye(2, dtype=a.dtype)).sum())(x.detach())
    assert y.device == x.device and g.device == x.device
    torch.testing.assert_close(g, ref, rtol=1e-10, atol=1e-12)


def test_from_torch_results_come_back_on_the_inputs_device(on_device1):
    f = gt.interop.from_torch(lambda a: torch.sin(a) * 2.0)
    x = gt.constant(np.array([0.5, 1.0]))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
        loss = gt.sum(y * gt.constant([1.0, 3.0], dtype=gt.float64))  # a device1 tensor beside y
    g = tape.gradient(loss, x)
    assert y.device == DEV and g.device == DEV
    np.testing.assert_allclose(g.numpy(), 2.0 * np.cos([0.5, 1.0]) * [1.0, 3.0], rtol=1e-12)


def test_a_domain_case_for_to_device_draws_the_default_device(on_device1):
    values, _ = Case(np.ones(2), DEFAULT_DEVICE).draw(np.random.default_rng(0))
    assert values[1] == "cpu"  # array_api_strict's default device (CuPy's would be "cuda:0")
    with gt.use_backend("numpy"):
        assert Case(DEFAULT_DEVICE).draw(np.random.default_rng(0))[0] == ["cpu"]


_TO_JAX_ON_DEVICE_1 = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, jax.numpy as jnp
import gradtape as gt
from jax.test_util import check_grads
d1 = jax.devices("cpu")[1]
f = gt.interop.to_jax(lambda x, y: gt.sum(gt.tanh(x * y) + x / y), backend="numpy")
x, y = (jax.device_put(jnp.asarray(v), d1) for v in ([0.3, 0.7], [1.5, 2.0]))
assert f(x, y).devices() == {d1}, f(x, y).devices()
assert jax.grad(f)(x, y).devices() == {d1}, jax.grad(f)(x, y).devices()
check_grads(f, (x, y), order=2, modes=["rev"])
print("ok")
"""


def test_to_jax_results_come_back_on_the_inputs_jax_device():
    """A crossing from JAX arrays on one device (a GPU; here the second of two host devices) into a
    backend computing elsewhere returns its results, and gradients, on that device: the H200 run's
    second-order check on torch:cuda met JAX-CPU cotangents beside GPU inputs."""
    pytest.importorskip("jax", reason="JAX is not installed")
    p = subprocess.run([sys.executable, "-c", _TO_JAX_ON_DEVICE_1], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr[-3000:]
