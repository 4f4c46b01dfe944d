"""gradtape beside other libraries: einops on gradtape tensors (:mod:`gradtape.interop.einops`), and
gradients across frameworks (``docs/interop.md``):

* :func:`to_torch` / :func:`to_jax` / :func:`to_tf`: a gradtape function inside PyTorch, JAX or
  TensorFlow code, differentiated by their autodiff with gradtape's gradients;
* :func:`from_torch` / :func:`from_jax`: a torch or JAX function inside a gradtape program, recorded as
  one op whose rule is the library's own VJP.

The crossings import their library on first use (``gt.interop.to_torch`` imports torch), so
``import gradtape`` imports none of them.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module of this package that defines it (imported on first use)
_CROSSINGS = {
    "to_torch": "gradtape.interop.torch",
    "from_torch": "gradtape.interop.torch",
    "to_jax": "gradtape.interop.jax",
    "from_jax": "gradtape.interop.jax",
    "to_tf": "gradtape.interop.tf",
}

__all__ = list(_CROSSINGS)


def __getattr__(name: str) -> Any:
    if name in _CROSSINGS:
        return getattr(importlib.import_module(_CROSSINGS[name]), name)
    raise AttributeError(f"module 'gradtape.interop' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_CROSSINGS))
