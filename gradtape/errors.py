"""The exception classes under TensorFlow's names (``tf.errors``), so ``except gt.errors.DataLossError``
reads as it does in TensorFlow code.  Each is raised where TensorFlow raises it, and is also the
Python class a Python user would catch (``NotFoundError`` is a ``FileNotFoundError``, ...)."""

from __future__ import annotations

from gradtape.backends.tracing import OperatorNotAllowedInGraphError
from gradtape.training.checkpoint import DataLossError, NotFoundError

__all__ = ["DataLossError", "NotFoundError", "OperatorNotAllowedInGraphError"]
