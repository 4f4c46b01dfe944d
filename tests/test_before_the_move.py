"""What was made before the modules moved into folders (issue 23) still works: a checkpoint written then
restores on every backend, a pickle made then loads, and the old module paths import.

``tests/data/before_the_move.*`` were written by gradtape at 2ad395d (the last commit before the move):
``gt.train.Checkpoint(w=Variable(arange(6).reshape(2, 3)), step=Variable(7, int64))`` and a pickle of a
Variable, a Tensor, a dtype, a built ``Dense(2)`` and an ``Adam(0.1)``.
"""

from __future__ import annotations

import importlib
import pickle
from pathlib import Path

import numpy as np
import pytest

import gradtape as gt

DATA = Path(__file__).parent / "data"


def test_a_checkpoint_written_before_the_move_restores(backend):
    w = gt.Variable(gt.zeros((2, 3)))
    step = gt.Variable(0, dtype=gt.int64)
    gt.train.Checkpoint(w=w, step=step).read(str(DATA / "before_the_move")).assert_consumed()
    assert w.backend == backend.split(":")[0]
    np.testing.assert_array_equal(w.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
    assert int(step.numpy()) == 7


def test_a_pickle_made_before_the_move_loads():
    obj = pickle.loads((DATA / "before_the_move.pickle").read_bytes())
    assert isinstance(obj["variable"], gt.Variable) and obj["variable"].name == "w:0"
    np.testing.assert_array_equal(obj["variable"].numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(obj["tensor"].numpy(), [1.0, 2.0])
    assert obj["dtype"] == gt.float64
    assert isinstance(obj["layer"], gt.layers.Dense) and obj["layer"].kernel.shape == (3, 2)
    assert isinstance(obj["opt"], gt.optimizers.Adam)


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("gradtape.tensor", "gradtape.core.tensor", "Variable"),
        ("gradtape.tape", "gradtape.autodiff.tape", "GradientTape"),
        ("gradtape.function", "gradtape.compile.function", "Function"),
        ("gradtape.layers", "gradtape.training.layers", "Dense"),
        ("gradtape.train", "gradtape.training.checkpoint", "Checkpoint"),
        ("gradtape.registry", "gradtape.core.registry", "OpDef"),
        ("gradtape.domains", "gradtape.core.domains", "REAL"),
        ("gradtape.crosscheck", "gradtape.testing.crosscheck", "check_gradients"),
    ],
)
def test_the_old_module_paths_import(old, new, name):
    assert importlib.import_module(old) is importlib.import_module(new)
    assert getattr(importlib.import_module(old), name) is getattr(importlib.import_module(new), name)
