"""What a ``gt.function`` program reads that it was not handed as a gt.Tensor, on every backend: a
native array argument of any library is a tensor argument (keyed by its shape and dtype, never baked
in by its identity or value); a tensor made outside the function is read as it is at each call (an
in-place change between calls is seen, as eagerly); and a write into such a tensor inside the
function is refused at the write, with the tensor left as it was."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt
from gradtape.testing import snapshot as snap

# a traced program that disagrees with eager (or a compiler that fails) warns and falls back: an error here
pytestmark = [
    pytest.mark.filterwarnings("error:gt.function:UserWarning"),
    # (torch.compile compiles each path of a gt.cond: said once, tested in test_function.py)
    pytest.mark.filterwarnings("ignore:gt.function .* compiles a program for each path:UserWarning"),
]


@pytest.fixture(params=[None, True], ids=["jit-default", "jit-on"])
def jit(request, backend):
    """``jit_compile``: None (compiled on JAX, replayed elsewhere), True (torch.compile too)."""
    if request.param is True and getattr(gt.get_backend(), "compiles", None) != "opt-in":
        pytest.skip(f"jit_compile=True is jit_compile=None on {backend}")
    return request.param


def native(values):
    """``values`` as a native array of the active backend (a torch tensor, a JAX array...)."""
    b = gt.get_backend()
    return b.xp.asarray(np.asarray(values, dtype=np.float64))


def test_native_array_arguments_are_tensor_arguments(backend, jit):
    f = gt.function(lambda x: gt.sum(x * 2.0), jit_compile=jit)
    got = [float(snap(f(native([k, 2.0 * k])))) for k in range(4)]
    assert got == [0.0, 6.0, 12.0, 18.0]  # each array's own values (not the first array's, baked in)
    assert f.experimental_get_tracing_count() == 1  # one trace per shape and dtype, not one per array
    assert float(snap(f(native([1.0, 2.0, 3.0])))) == 12.0  # a new shape traces again
    assert f.experimental_get_tracing_count() == 2


def test_native_array_changed_in_place_is_read_again(backend, jit):
    b = gt.get_backend()
    if backend not in ("numpy", "torch"):
        pytest.skip(f"{backend}'s arrays are not written in place")
    x = native([1.0, 2.0])
    f = gt.function(lambda a: gt.sum(a * 2.0), jit_compile=jit)
    assert float(snap(f(x))) == 6.0
    x[0] = 50.0
    assert float(snap(f(x))) == 104.0
    assert b.is_native(x)


def test_numpy_and_other_libraries_arrays_convert_as_eagerly(backend):
    torch = pytest.importorskip("torch")
    f = gt.function(lambda x: gt.sum(x * 2.0))
    assert float(snap(f(np.array([1.0, 2.0])))) == 6.0
    assert float(snap(f(np.array([10.0, 20.0])))) == 60.0
    assert float(snap(f(torch.tensor([3.0, 4.0], dtype=torch.float64)))) == 14.0  # (to this backend, as eagerly)
    assert float(snap(f(torch.tensor([5.0, 6.0], dtype=torch.float64)))) == 22.0


def test_a_tensor_from_outside_changed_in_place_is_seen(backend, jit):
    c = gt.constant(np.array([1.0, 2.0]))
    f = gt.function(lambda x: gt.sum(x * c), jit_compile=jit)
    ones = gt.constant(np.ones(2))
    assert float(snap(f(ones))) == 3.0
    c[0] = 10.0  # eagerly, gt.sum(ones * c) is now 12
    assert float(snap(f(ones))) == 12.0
    c += 1.0
    assert float(snap(f(ones))) == 14.0
    assert f.experimental_get_tracing_count() == 1


def test_a_tensor_from_outside_in_a_branch_and_a_gradient(backend, jit):
    c = gt.constant(np.array([10.0, 2.0]))

    @gt.function(jit_compile=jit)
    def g(x):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.cond(gt.sum(x) > 0.0, lambda: gt.sum(x * c), lambda: gt.sum(x - c))
        return y, tape.gradient(y, x)

    x = gt.constant(np.ones(2))
    y, dx = snap(g(x))
    assert float(y) == 12.0 and dx.tolist() == [10.0, 2.0]
    c[1] = 0.0
    y, dx = snap(g(x))
    assert float(y) == 10.0 and dx.tolist() == [10.0, 0.0]
    y, dx = snap(g(-x))
    assert float(y) == -12.0 and dx.tolist() == [1.0, 1.0]


def test_a_tensor_from_outside_of_a_new_shape_is_an_error(backend):
    c = gt.constant(np.array([1.0, 2.0]))
    f = gt.function(lambda x: gt.sum(x * c))
    x = gt.constant(np.ones(2))
    assert float(snap(f(x))) == 3.0
    c += gt.constant(np.ones((2, 2)))  # (gradtape's in-place add broadcasts c to (2, 2))
    with pytest.raises(ValueError, match=r"traced as shape \(2,\).*now shape \(2, 2\).*Pass the tensor as an argument"):
        f(x)


def test_writing_into_a_tensor_from_outside_is_refused_at_the_write(backend):
    buf = gt.constant(np.zeros(3))

    @gt.function
    def acc(x):
        buf[0] = buf[0] + x
        return x * 1.0

    with pytest.raises(TypeError, match=r"gt.function 'acc' writes into a tensor made outside it.*gt.Variable"):
        acc(gt.constant(np.float64(1.0)))
    assert snap(buf).tolist() == [0.0, 0.0, 0.0]  # left as it was, and usable
    assert snap(buf + 1.0).tolist() == [1.0, 1.0, 1.0]

    @gt.function
    def update(a):  # an argument updated in place is written back, as before
        a[0] = 7.0
        return a * 1.0

    a = gt.constant(np.zeros(2))
    update(a)
    assert snap(a).tolist() == [7.0, 0.0]
