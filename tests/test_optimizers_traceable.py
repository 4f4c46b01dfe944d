"""``Optimizer.apply`` reads no tensor value into Python (so ``gt.function`` can trace a training
step): every optimizer, with clipping, weight decay and a learning-rate schedule, runs its steps
while ``Tensor``'s value conversions raise, and ends exactly where the same steps without the patch
end; under ``gt.function`` it ends there too."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradtape as gt
from gradtape.core.tensor import Tensor

SHAPES = [(3, 4), (4,), ()]
STEPS = 5
#: the conversions that read a tensor's value into Python
VALUE_READS = ("__bool__", "__int__", "__float__", "__index__", "numpy", "tolist", "__array__")

O = gt.optimizers
CONFIGS = {
    "sgd": lambda: O.SGD(0.1),
    "sgd_momentum": lambda: O.SGD(0.1, momentum=0.9),
    "sgd_nesterov": lambda: O.SGD(0.1, momentum=0.9, nesterov=True),
    "adam": lambda: O.Adam(0.05),
    "adam_amsgrad": lambda: O.Adam(0.05, amsgrad=True),
    "adamw": lambda: O.AdamW(0.05, weight_decay=0.1),
    "rmsprop": lambda: O.RMSprop(0.01),
    "rmsprop_centered_momentum": lambda: O.RMSprop(0.01, centered=True, momentum=0.5),
    "adagrad": lambda: O.Adagrad(0.1),
    "sgd_clipvalue": lambda: O.SGD(0.1, clipvalue=0.3),
    "adam_clipnorm": lambda: O.Adam(0.05, clipnorm=2.0),  # clips some gradients, not others
    "sgd_global_clipnorm": lambda: O.SGD(0.1, momentum=0.5, global_clipnorm=2.0),  # clips every step
    "rmsprop_global_clipnorm_unclipped": lambda: O.RMSprop(0.01, global_clipnorm=100.0),
    "sgd_weight_decay": lambda: O.SGD(0.1, weight_decay=0.05),
    "sgd_schedule": lambda: O.SGD(O.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)),
    "adam_schedule_staircase": lambda: O.Adam(
        O.ExponentialDecay(0.05, decay_steps=2, decay_rate=0.7, staircase=True), weight_decay=0.1
    ),
}


def _setup(name):
    """A fresh optimizer, float64 variables and the gradients of every step (the same each call)."""
    rng = np.random.default_rng(0)
    variables = [gt.Variable(rng.normal(size=s), name=f"w{k}") for k, s in enumerate(SHAPES)]
    grads = [[gt.constant(rng.normal(size=s)) for s in SHAPES] for _ in range(STEPS)]
    opt = CONFIGS[name]()
    opt.exclude_from_weight_decay(var_names=["w1"])
    return opt, variables, grads


def _state(opt, variables):
    return [v.numpy() for v in variables + opt.variables]


def _forbid_value_reads(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise AssertionError("a tensor's value was read into Python on the optimizer's update path")

    for name in VALUE_READS:
        monkeypatch.setattr(Tensor, name, refuse)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_apply_gradients_reads_no_tensor_value(backend, name, monkeypatch):
    opt, variables, grads = _setup(name)
    for gs in grads:
        opt.apply_gradients(zip(gs, variables))
    want = _state(opt, variables)

    opt, variables, grads = _setup(name)
    _forbid_value_reads(monkeypatch)
    for gs in grads:
        opt.apply_gradients(zip(gs, variables))
    with pytest.raises(AssertionError, match="value was read"):
        float(opt.iterations)  # (a value read: the patch bites)
    monkeypatch.undo()

    got = _state(opt, variables)
    assert int(opt.iterations) == STEPS
    assert all(v.dtype == gt.float64 for v in variables)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.skipif(not hasattr(gt, "function"), reason="gt.function is not in this tree")
@pytest.mark.parametrize("name", list(CONFIGS))
def test_apply_gradients_under_gt_function(backend, name):
    """Traced once, then replayed (or compiled): the same state as eager steps."""
    opt, variables, grads = _setup(name)
    for gs in grads:
        opt.apply_gradients(zip(gs, variables))
    want = _state(opt, variables)

    opt, variables, grads = _setup(name)

    @gt.function
    def step(g0, g1, g2):
        opt.apply_gradients(zip([g0, g1, g2], variables))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a traced program that disagrees with eager warns)
        for gs in grads:
            step(*gs)
    assert step.experimental_get_tracing_count() == 1
    assert int(opt.iterations) == STEPS
    for g, w in zip(_state(opt, variables), want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)
