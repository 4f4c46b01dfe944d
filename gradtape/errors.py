"""The exception classes under TensorFlow's names (``tf.errors``), so ``except gt.errors.DataLossError``
reads as it does in TensorFlow code.  Each is raised where TensorFlow raises it, and is also the
Python class a Python user would catch (``NotFoundError`` is a ``FileNotFoundError``, ...)."""

from __future__ import annotations

from gradtape._trace import OperatorNotAllowedInGraphError
from gradtape.train import DataLossError, NotFoundError

__all__ = ["DataLossError", "NotFoundError", "OperatorNotAllowedInGraphError"]
