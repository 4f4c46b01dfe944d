"""Differentiation on top of the core: ``GradientTape`` and its jacobians, forward mode
(``ForwardAccumulator``, as ``tf.autodiff.ForwardAccumulator``), ``custom_gradient`` and ``register_op``."""

from __future__ import annotations

from gradtape.autodiff.forward import ForwardAccumulator

__all__ = ["ForwardAccumulator"]
