"""The gradient conformance suite, derived from the op registry (``gradtape.conformance``).

It keeps no list of ops of its own: :func:`cases` enumerates every registered op and the sample
calls its declared domain stands for, so an op is covered the day it is registered.
"""

from gradtape.conformance.cases import cases, uncovered_ops

__all__ = ["cases", "uncovered_ops"]
