"""What a fourth newcomer, from Keras and PyTorch, met in gradtape's training pieces (the ``newuser4``
brief): each test fails on the code before its fix, and runs on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt

O = gt.optimizers


@pytest.mark.parametrize("make", [lambda: O.SGD(0.5), lambda: O.SGD(0.5, momentum=0.9), lambda: O.Adam(0.5)])
def test_an_optimizer_refuses_an_integer_variable_naming_it(backend, make):
    """SGD(0.5) on an int64 variable computed ``lr * g`` in int64 (0) and left the variable as it was,
    silently; Adam failed on one of its own slots.  Now both name the variable and what to do (TF and
    PyTorch refuse integer variables too), and leave it untouched."""
    v = gt.Variable(gt.constant([1, 2, 3]), name="counts")
    with pytest.raises(ValueError, match=r"'counts:0' is int64; optimizers update floating-point .*gt\.cast"):
        make().apply_gradients([(gt.constant([1, 1, 1]), v)])
    np.testing.assert_array_equal(np.asarray(v.numpy()), [1, 2, 3])


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda: O.Adam(beta_1=1.0), r"Adam: `beta_1` must be in \[0.0, 1.0\)"),  # was a NaN step
        (lambda: O.AdamW(beta_2=1.0), r"AdamW: `beta_2` must be in \[0.0, 1.0\)"),  # was no step at all
        (lambda: O.RMSprop(rho=2.0), r"RMSprop: `rho` must be in \[0.0, 1.0\]"),  # a negative mean square
        (lambda: O.RMSprop(momentum=-0.5), r"RMSprop: `momentum` must be >= 0.0"),  # was dropped
        (lambda: O.SGD(clipnorm=-1.0), r"SGD: `clipnorm` must be >= 0.0"),  # turned the gradient around
        (lambda: O.SGD(clipvalue=-1.0), r"SGD: `clipvalue` must be >= 0.0"),
        (lambda: O.Adam(global_clipnorm=-1.0), r"Adam: `global_clipnorm` must be >= 0.0"),
        (lambda: O.SGD(weight_decay=-0.1), r"SGD: `weight_decay` must be >= 0.0"),  # grew the weights
        (lambda: O.Adagrad(initial_accumulator_value=-1.0), r"`initial_accumulator_value` must be >= 0.0"),
        (lambda: O.Adam(epsilon=float("nan")), r"`epsilon` must be >= 0.0"),
    ],
)
def test_an_optimizer_refuses_hyperparameters_that_give_nan_or_wrong_steps(backend, make, says):
    """PyTorch's optimizers refuse these (``Invalid beta parameter at index 0: 1.0``); gradtape took
    them and stepped to NaN (Adam ``beta_1=1``), not at all (``beta_2=1``), or the wrong way (a
    negative ``clipnorm``: ``g * c / max(|g|, c)`` is ``-g / |g|``)."""
    with pytest.raises(ValueError, match=says):
        make()


def test_the_accepted_hyperparameters_still_step_as_torch(backend):
    """The bounds' ends that are valid (``beta = 0``, ``rho = 1``, ``epsilon = 0``, NumPy scalars)
    still construct, and Adam's step is torch.optim.Adam's (epsilon 0: the two place it differently)."""
    torch = pytest.importorskip("torch", reason="torch.optim gives the reference step")
    O.Adam(beta_1=0.0, beta_2=np.float32(0.5), epsilon=0.0)
    O.RMSprop(rho=1.0, momentum=np.float64(0.5))
    x0 = np.array([0.5, -1.0, 2.0])
    w = gt.Variable(gt.constant(x0, dtype=gt.float64))
    opt = O.Adam(0.1, beta_1=0.5, beta_2=0.75, epsilon=0.0)
    tw = torch.tensor(x0, requires_grad=True)
    topt = torch.optim.Adam([tw], lr=0.1, betas=(0.5, 0.75), eps=0.0)
    for _ in range(4):
        with gt.GradientTape() as tape:
            loss = gt.sum(w**4)
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        topt.zero_grad()
        (tw**4).sum().backward()
        topt.step()
    np.testing.assert_allclose(np.asarray(w.numpy()), tw.detach().numpy(), rtol=1e-12)
