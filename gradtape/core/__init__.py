"""The core, behind a wall: dtypes, the op registry, the backend protocol, configuration, ``Tensor``, the
recording engine and dispatch.  Everything else in gradtape is built on it.

The rest of the package imports from the core only the names each core module lists in its ``__all__``
(``tests/test_layers.py`` fails on a private name taken across the wall).  The core imports nothing from
outside it: it knows backends only through the protocol in :mod:`gradtape.core.backend` and the registry
in :mod:`gradtape.core.backend_registry`, which imports adapters by name on first use.
"""
