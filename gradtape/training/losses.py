"""``gt.losses``: Keras' losses, as functions and as classes.

Functions return one loss per example (the mean or sum over the last axis, as Keras); the classes
(``MeanSquaredError()(y_true, y_pred)``) weight and reduce them to a scalar, by default the mean over
the batch (Keras' ``"sum_over_batch_size"``).  All of them are compositions of gradtape ops, so
they are differentiable on every backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeAlias

from gradtape import nn as _nn
from gradtape.core.dtypes import DTypeLike
from gradtape.ops.elementwise import abs as _abs
from gradtape.ops.elementwise import astype, clip, log, maximum, square
from gradtape.ops.statistical import mean
from gradtape.ops.statistical import sum as _sum
from gradtape.core.tensor import Tensor, TensorLike, convert_to_tensor
from gradtape.ops.manipulation import expand_dims, squeeze
from gradtape.ops.nn import check_class_labels
from gradtape.ops.elementwise import not_equal
from gradtape.ops.searching import where

__all__ = [
    "MAE",
    "MSE",
    "BinaryCrossentropy",
    "CategoricalCrossentropy",
    "Huber",
    "KLDivergence",
    "Loss",
    "MeanAbsoluteError",
    "MeanSquaredError",
    "SparseCategoricalCrossentropy",
    "binary_crossentropy",
    "categorical_crossentropy",
    "get",
    "huber",
    "kl_divergence",
    "mae",
    "mean_absolute_error",
    "mean_squared_error",
    "mse",
    "sparse_categorical_crossentropy",
]

#: How a loss class reduces the per-example losses (Keras' names; None is "none").
Reduction: TypeAlias = Literal["sum_over_batch_size", "sum", "mean", "none"] | None

EPSILON = 1e-7  # Keras' backend.epsilon(): probabilities are clipped to [eps, 1 - eps]


def _pair(y_true, y_pred):
    """``y_pred`` as a tensor; ``y_true`` converted beside it, cast to its dtype and brought to its
    rank (as Keras' ``squeeze_or_expand_to_same_rank``): labels of shape ``(n,)`` against
    predictions of shape ``(n, 1)`` compare example by example instead of broadcasting to ``(n, n)``."""
    if not isinstance(y_pred, Tensor):
        y_pred = convert_to_tensor(y_pred)
    if not isinstance(y_true, Tensor):
        y_true = convert_to_tensor(y_true, like=y_pred)
    if y_true.dtype != y_pred.dtype and y_pred.dtype.is_floating:
        y_true = astype(y_true, y_pred.dtype)
    return _same_rank(y_true, y_pred)


def _same_rank(a, b):
    """Keras' ``squeeze_or_expand_to_same_rank``: where the ranks differ by one and the longer one
    ends in an axis of size one, drop that axis (or, the other being of rank 1, add one to it)."""
    if a.ndim == b.ndim + 1 and a.shape[-1] == 1:
        return (a, expand_dims(b, axis=-1)) if b.ndim == 1 else (squeeze(a, axis=-1), b)
    if b.ndim == a.ndim + 1 and b.shape[-1] == 1:
        return (expand_dims(a, axis=-1), b) if a.ndim == 1 else (a, squeeze(b, axis=-1))
    return a, b


def _same_shape(y_true, y_pred, who, hint=""):
    """Keras' cross-entropies refuse labels and predictions of different shapes (broadcasting them
    gives a loss over the wrong pairs, silently)."""
    if tuple(y_true.shape) != tuple(y_pred.shape):
        raise ValueError(
            f"{who}: y_true has shape {tuple(y_true.shape)} and y_pred {tuple(y_pred.shape)}; they must "
            f"have the same shape{hint}"
        )


def mean_squared_error(y_true: TensorLike, y_pred: TensorLike) -> Tensor:
    """``mean(square(y_true - y_pred), axis=-1)``: one loss per example (as Keras)."""
    y_true, y_pred = _pair(y_true, y_pred)
    return mean(square(y_pred - y_true), axis=-1)


def mean_absolute_error(y_true: TensorLike, y_pred: TensorLike) -> Tensor:
    """``mean(abs(y_true - y_pred), axis=-1)``."""
    y_true, y_pred = _pair(y_true, y_pred)
    return mean(_abs(y_pred - y_true), axis=-1)


def huber(y_true: TensorLike, y_pred: TensorLike, delta: float = 1.0) -> Tensor:
    """Keras' ``huber``: ``mean(e^2 / 2 if |e| <= delta else delta * |e| - delta^2 / 2, axis=-1)``
    with ``e = y_pred - y_true`` (the quadratic side at ``|e| == delta``, as Keras)."""
    y_true, y_pred = _pair(y_true, y_pred)
    error = y_pred - y_true
    abs_error = _abs(error)
    delta = float(delta)
    return mean(where(abs_error <= delta, 0.5 * square(error), delta * abs_error - 0.5 * delta * delta), axis=-1)


def kl_divergence(y_true: TensorLike, y_pred: TensorLike) -> Tensor:
    """Keras' ``kl_divergence``: ``sum(y_true * log(y_true / y_pred), axis=-1)``, both clipped to
    ``[EPSILON, 1]`` first."""
    y_true, y_pred = _pair(y_true, y_pred)
    y_true, y_pred = clip(y_true, EPSILON, 1.0), clip(y_pred, EPSILON, 1.0)
    return _sum(y_true * log(y_true / y_pred), axis=-1)


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error


def categorical_crossentropy(
    y_true: TensorLike, y_pred: TensorLike, from_logits: bool = False, label_smoothing: float = 0.0, axis: int = -1
) -> Tensor:
    """Cross-entropy between one-hot (or soft) labels and predicted probabilities (or logits, with
    ``from_logits=True``) along ``axis``.  Probabilities are normalised to sum to one and clipped
    to ``[1e-7, 1 - 1e-7]``, as Keras."""
    y_true, y_pred = _pair(y_true, y_pred)
    _same_shape(
        y_true, y_pred, "categorical_crossentropy", " (for integer class labels use sparse_categorical_crossentropy)"
    )
    if label_smoothing:
        n = y_pred.shape[axis]
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / n
    if from_logits:
        return _nn.softmax_cross_entropy_with_logits(y_true, y_pred, axis=axis)
    y_pred = y_pred / _sum(y_pred, axis=axis, keepdims=True)
    y_pred = clip(y_pred, EPSILON, 1.0 - EPSILON)
    return -_sum(y_true * log(y_pred), axis=axis)


def sparse_categorical_crossentropy(
    y_true: TensorLike, y_pred: TensorLike, from_logits: bool = False, ignore_class: int | None = None, axis: int = -1
) -> Tensor:
    """Cross-entropy between integer class labels and predicted probabilities (or logits, with
    ``from_logits=True``).  ``y_true`` may carry a trailing axis of size one (as Keras accepts)."""
    if not isinstance(y_pred, Tensor):
        y_pred = convert_to_tensor(y_pred)
    if not isinstance(y_true, Tensor):
        y_true = convert_to_tensor(y_true, like=y_pred)
    if axis not in (-1, y_pred.ndim - 1):
        raise ValueError("sparse_categorical_crossentropy supports only axis=-1")
    if y_true.ndim == y_pred.ndim and y_true.shape[-1] == 1:
        y_true = squeeze(y_true, axis=-1)
    if not y_true.dtype.is_integer:
        y_true = astype(y_true, "int64")
    valid = None
    if ignore_class is not None:
        valid = not_equal(y_true, int(ignore_class))
        y_true = where(valid, y_true, 0)
    if from_logits:
        loss = _nn.sparse_softmax_cross_entropy_with_logits(y_true, y_pred)
    else:
        # one_hot gives a row of zeros for a label out of range (as TF's): a silent zero loss here
        check_class_labels(y_true, y_pred.shape[-1], "sparse_categorical_crossentropy")
        p = y_pred / _sum(y_pred, axis=-1, keepdims=True)
        p = clip(p, EPSILON, 1.0 - EPSILON)
        oh = _nn.one_hot(y_true, y_pred.shape[-1], dtype=y_pred.dtype)
        loss = -_sum(oh * log(p), axis=-1)
    if valid is not None:
        loss = where(valid, loss, 0)
    return loss


def binary_crossentropy(
    y_true: TensorLike, y_pred: TensorLike, from_logits: bool = False, label_smoothing: float = 0.0, axis: int = -1
) -> Tensor:
    """Mean over ``axis`` of the element-wise binary cross-entropy (probabilities clipped to
    ``[1e-7, 1 - 1e-7]``, or logits with ``from_logits=True``), as Keras."""
    y_true, y_pred = _pair(y_true, y_pred)
    _same_shape(y_true, y_pred, "binary_crossentropy")
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:
        bce = _nn.sigmoid_cross_entropy_with_logits(labels=y_true, logits=y_pred)
    else:
        p = clip(y_pred, EPSILON, 1.0 - EPSILON)
        bce = -(y_true * log(p) + (1 - y_true) * log(1 - p))
    return mean(bce, axis=axis)


# ---------------------------------------------------------------------------------------- classes
_REDUCTIONS = ("sum_over_batch_size", "sum", "mean", "none", None)


class Loss:
    """Base of the loss classes: ``loss(y_true, y_pred, sample_weight=None)`` applies the loss
    function, weights each example and reduces (``"sum_over_batch_size"``, the default, is the
    mean, 0 for an empty batch as Keras; ``"sum"``; ``"none"`` keeps one loss per example).  With a
    ``dtype``, predictions (and floating labels) are cast to it first, as Keras; without one the loss
    keeps ``y_pred``'s dtype."""

    def __init__(
        self, name: str | None = None, reduction: Reduction = "sum_over_batch_size", dtype: DTypeLike | None = None
    ) -> None:
        if reduction not in _REDUCTIONS:
            raise ValueError(f"Invalid value for argument `reduction`: {reduction!r}; expected one of {_REDUCTIONS}")
        self.name = name or _snake(type(self).__name__)
        self.reduction = reduction
        self.dtype = dtype

    def call(self, y_true: TensorLike, y_pred: TensorLike) -> Tensor:
        """The per-example loss of ``y_pred`` against ``y_true``, before reduction; subclasses implement it."""
        raise NotImplementedError

    def _in_dtype(self, y_true, y_pred):
        """``y_pred`` (and floating ``y_true``; integer labels stay labels) in the loss's ``dtype``,
        where one was given (as Keras, which computes the loss in it)."""
        if self.dtype is None:
            return y_true, y_pred
        y_pred = y_pred if isinstance(y_pred, Tensor) else convert_to_tensor(y_pred)
        y_pred = astype(y_pred, self.dtype)
        y_true = y_true if isinstance(y_true, Tensor) else convert_to_tensor(y_true, like=y_pred)
        if y_true.dtype.is_floating:
            y_true = astype(y_true, self.dtype)
        return y_true, y_pred

    @staticmethod
    def _weighted(losses, sample_weight):
        """``losses * sample_weight``, the weights in the losses' dtype and with trailing axes of size
        one dropped down to the losses' rank (weights of shape ``(n, 1)`` weight ``n`` losses, rather
        than broadcasting them to ``(n, n)``)."""
        if sample_weight is None:
            return losses
        w = sample_weight if isinstance(sample_weight, Tensor) else convert_to_tensor(sample_weight, like=losses)
        if w.dtype != losses.dtype:
            w = astype(w, losses.dtype)
        while w.ndim > losses.ndim and w.shape[-1] == 1:
            w = squeeze(w, axis=-1)
        return losses * w

    def __call__(self, y_true: TensorLike, y_pred: TensorLike, sample_weight: TensorLike | None = None) -> Tensor:
        y_true, y_pred = self._in_dtype(y_true, y_pred)
        losses = self._weighted(self.call(y_true, y_pred), sample_weight)
        if self.reduction in ("none", None):
            return losses
        if self.reduction == "sum":
            return _sum(losses)
        if losses.ndim and 0 in losses.shape:  # an empty batch: 0, as Keras' divide_no_nan (mean: NaN)
            return _sum(losses)
        return mean(losses) if losses.ndim else losses

    def get_config(self) -> dict[str, Any]:
        """The constructor arguments, as a dict (Keras' ``get_config``)."""
        return {"name": self.name, "reduction": self.reduction}


class _FnLoss(Loss):
    _fn: Any = None  # the loss function (a staticmethod in each subclass)

    def __init__(
        self,
        name: str | None = None,
        reduction: Reduction = "sum_over_batch_size",
        dtype: DTypeLike | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self._kwargs = kwargs

    def call(self, y_true: TensorLike, y_pred: TensorLike) -> Tensor:
        return type(self)._fn(y_true, y_pred, **self._kwargs)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self._kwargs}


class MeanSquaredError(_FnLoss):
    """Mean of squares of errors (Keras' ``MeanSquaredError``)."""

    _fn = staticmethod(mean_squared_error)

    def __init__(
        self,
        reduction: Reduction = "sum_over_batch_size",
        name: str = "mean_squared_error",
        dtype: DTypeLike | None = None,
    ) -> None:
        super().__init__(name=name, reduction=reduction, dtype=dtype)


class MeanAbsoluteError(_FnLoss):
    """Mean of absolute errors (Keras' ``MeanAbsoluteError``)."""

    _fn = staticmethod(mean_absolute_error)

    def __init__(
        self,
        reduction: Reduction = "sum_over_batch_size",
        name: str = "mean_absolute_error",
        dtype: DTypeLike | None = None,
    ) -> None:
        super().__init__(name=name, reduction=reduction, dtype=dtype)


class Huber(_FnLoss):
    """Keras' ``Huber(delta=1.0)``: squared error within ``delta``, linear beyond."""

    _fn = staticmethod(huber)

    def __init__(
        self,
        delta: float = 1.0,
        reduction: Reduction = "sum_over_batch_size",
        name: str = "huber_loss",
        dtype: DTypeLike | None = None,
    ) -> None:
        super().__init__(name=name, reduction=reduction, dtype=dtype, delta=delta)


class KLDivergence(_FnLoss):
    """Keras' ``KLDivergence``: the Kullback-Leibler divergence of ``y_pred`` from ``y_true``."""

    _fn = staticmethod(kl_divergence)

    def __init__(
        self,
        reduction: Reduction = "sum_over_batch_size",
        name: str = "kl_divergence",
        dtype: DTypeLike | None = None,
    ) -> None:
        super().__init__(name=name, reduction=reduction, dtype=dtype)


class CategoricalCrossentropy(_FnLoss):
    """Keras' ``CategoricalCrossentropy(from_logits=False, label_smoothing=0.0, axis=-1)``."""

    _fn = staticmethod(categorical_crossentropy)

    def __init__(
        self,
        from_logits: bool = False,
        label_smoothing: float = 0.0,
        axis: int = -1,
        reduction: Reduction = "sum_over_batch_size",
        name: str = "categorical_crossentropy",
        dtype: DTypeLike | None = None,
    ) -> None:
        super().__init__(
            name=name,
            reduction=reduction,
            dtype=dtype,
            from_logits=from_logits,
            label_smoothing=label_smoothing,
            axis=axis,
        )


class SparseCategoricalCrossentropy(_FnLoss):
    """Keras' ``SparseCategoricalCrossentropy(from_logits=False, ignore_class=None)``."""

    _fn = staticmethod(sparse_categorical_crossentropy)

    def __init__(
        self,
        from_logits: bool = False,
        ignore_class: int | None = None,
        reduction: Reduction = "sum_over_batch_size",
        name: str = "sparse_categorical_crossentropy",
        dtype: DTypeLike | None = None,
    ) -> None:
        super().__init__(
            name=name, reduction=reduction, dtype=dtype, from_logits=from_logits, ignore_class=ignore_class
        )

    def __call__(self, y_true: TensorLike, y_pred: TensorLike, sample_weight: TensorLike | None = None) -> Tensor:
        ic = self._kwargs.get("ignore_class")
        if ic is None or self.reduction != "sum_over_batch_size":
            return super().__call__(y_true, y_pred, sample_weight)
        # Keras averages over the examples that are not ignored
        y_true, y_pred = self._in_dtype(y_true, y_pred)
        losses = self.call(y_true, y_pred)
        yt = y_true if isinstance(y_true, Tensor) else convert_to_tensor(y_true, like=losses)
        yt = yt if yt.ndim == losses.ndim else _squeeze_last(yt)
        valid = astype(not_equal(yt, int(ic)), losses.dtype)
        # a batch of ignored labels only: 0, as Keras' divide_no_nan (0 / 0 was NaN)
        return _sum(self._weighted(losses, sample_weight)) / maximum(_sum(valid), 1.0)


def _squeeze_last(t):
    return squeeze(t, axis=-1)


class BinaryCrossentropy(_FnLoss):
    """Keras' ``BinaryCrossentropy(from_logits=False, label_smoothing=0.0, axis=-1)``."""

    _fn = staticmethod(binary_crossentropy)

    def __init__(
        self,
        from_logits: bool = False,
        label_smoothing: float = 0.0,
        axis: int = -1,
        reduction: Reduction = "sum_over_batch_size",
        name: str = "binary_crossentropy",
        dtype: DTypeLike | None = None,
    ) -> None:
        super().__init__(
            name=name,
            reduction=reduction,
            dtype=dtype,
            from_logits=from_logits,
            label_smoothing=label_smoothing,
            axis=axis,
        )


def _snake(name):
    import re

    return re.sub(r"((?<=[a-z0-9])[A-Z]|(?!^)[A-Z](?=[a-z]))", r"_\1", name).lower()


_BY_NAME = {
    "mean_squared_error": mean_squared_error,
    "mse": mean_squared_error,
    "mean_absolute_error": mean_absolute_error,
    "mae": mean_absolute_error,
    "categorical_crossentropy": categorical_crossentropy,
    "sparse_categorical_crossentropy": sparse_categorical_crossentropy,
    "binary_crossentropy": binary_crossentropy,
    "huber": huber,
    "kl_divergence": kl_divergence,
}


def get(identifier: str | Callable[..., Any]) -> Callable[..., Any]:
    """A loss from a name (``"mse"``, ``"sparse_categorical_crossentropy"``, ...), a Loss or a
    callable (returned as is)."""
    if callable(identifier):
        return identifier
    if isinstance(identifier, str):
        key = _snake(identifier) if identifier not in _BY_NAME else identifier
        if key in _BY_NAME:
            return _BY_NAME[key]
    raise ValueError(f"Could not interpret loss identifier: {identifier!r}")
