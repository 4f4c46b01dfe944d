"""The adapters: one module per array library, each saying only what differs from the Array API.

``gradtape.backends.numpy``, ``.torch``, ``.jax``, ``.array_api_strict``, ``.dask``, ``.cupy`` implement the
core's :class:`~gradtape.core.backend.Backend` protocol; ``.tracing`` is the stand-in backend a
``gt.function`` trace computes on.  Adapters are imported only when first asked for.  The registry's
functions (``register``, ``get``, ...) are re-exported here, where plugin authors look for them.
"""

from __future__ import annotations

from gradtape.core import backend_registry as _registry
from gradtape.core.backend_registry import *  # noqa: F403  (register, get, Backend, ...: its __all__)

__all__ = list(_registry.__all__)
