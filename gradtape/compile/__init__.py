"""``gt.function``: a Python function traced once into a program of native calls and replayed (or handed to
``torch.compile`` / ``jax.jit``), with ``gt.cond`` and ``gt.while_loop`` lowered to the library's control flow.
The trace computes on the stand-in backend of :mod:`gradtape.backends.tracing`."""
