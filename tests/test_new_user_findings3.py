"""What a third newcomer from JAX / torch.func, PyTorch or TensorFlow met (the ``newuser3`` brief): each
test fails on the code before its fix, and runs on every backend."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import gradtape as gt


def test_vmap_refuses_keyword_arguments_naming_itself_and_the_way_out(backend):
    """``gt.vmap(f)(x, s=2.0)``: JAX maps a keyword argument along axis 0, torch.func passes it
    unmapped; gradtape's TypeError blamed the user's function ("<lambda>() got an unexpected keyword
    argument 's'", a function that takes ``s``).  It now names gt.vmap and what to write, and that runs."""
    f = lambda a, s=1.0: a * s  # noqa: E731
    x = gt.ones((2, 3), dtype=gt.float64)
    with pytest.raises(TypeError, match=r"^gt\.vmap: keyword arguments \['s'\] .*functools\.partial"):
        gt.vmap(f)(x, s=2.0)
    np.testing.assert_allclose(np.asarray(gt.vmap(functools.partial(f, s=2.0))(x).numpy()), np.full((2, 3), 2.0))
    got = gt.vmap(f, in_axes=(0, None))(x, gt.constant([1.0, 2.0, 3.0], dtype=gt.float64))
    np.testing.assert_allclose(np.asarray(got.numpy()), [[1.0, 2.0, 3.0]] * 2)
