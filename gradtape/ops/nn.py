"""Neural-network functions (beyond the standard): TensorFlow's ``tf.nn`` ops, with TF's names,
signatures and defaults.

Each op is declared with its domain and followed by its rule.  Forwards are backend-neutral: they
use only Array API functions of ``xp`` (or, for ``erf``, ``gelu``, ``one_hot`` and the sparse
cross-entropy, the Backend object, for ``backend.erf`` and the inputs' device).  Rules are written
once against the namespace ``xp`` the engine passes (native arrays in a first-order walk, gradtape's
Tensors when an outer tape records, so higher derivatives come for free); ``sigmoid``, ``erf``,
``softmax`` and ``log_softmax`` are ``xp_callable``, so rules reach them as ``xp.sigmoid`` & co.
Numerically delicate forwards (``sigmoid``, ``softplus``, ``softmax``, ``logsumexp``, the
cross-entropies) are written in their stable forms.

The composites at the end (``silu``, ``relu6``, ``log_sigmoid``, ``l2_normalize``, ``moments``,
``sigmoid_cross_entropy_with_logits``, ``bias_add``) are plain compositions of ops: they need no rule
of their own.

``__all__`` is the one list of ``gt.nn``'s names: :mod:`gradtape.nn` re-exports it and adds
``dropout`` (which draws from :mod:`gradtape.random`, a front end).
"""

from __future__ import annotations

import math

import numpy as np

from array_api_compat import device as _device

from gradtape.core import config as _config
from gradtape.core import dtypes as _dt
from gradtape.backends.tracing import value_check
from gradtape.core.domains import NONZERO, POSITIVE, REAL, Case
from gradtape.backends.batching import BatchArray, axis_kind
from gradtape.ops import apply, apply1, batch_as, binary, defop, public
from gradtape.ops.elementwise import (
    abs as _abs,
    astype,
    conj_,
    exp,
    greater_equal,
    log1p,
    maximum,
    sqrt,
    square,
    tanh,
)
from gradtape.ops.indexing import take
from gradtape.ops.manipulation import reshape, squeeze
from gradtape.ops.searching import where
from gradtape.ops.statistical import _axes, _keep_shape, mean
from gradtape.ops.statistical import sum as _sum
from gradtape.core.tensor import Tensor, convert_to_tensor, wrap

__all__ = [
    "batch_normalization",
    "bias_add",
    "elu",
    "embedding_lookup",
    "erf",
    "gelu",
    "l2_loss",
    "l2_normalize",
    "leaky_relu",
    "log_sigmoid",
    "log_softmax",
    "logsumexp",
    "moments",
    "one_hot",
    "relu",
    "relu6",
    "selu",
    "sigmoid",
    "sigmoid_cross_entropy_with_logits",
    "silu",
    "softmax",
    "softmax_cross_entropy_with_logits",
    "softplus",
    "softsign",
    "sparse_softmax_cross_entropy_with_logits",
    "swish",
    "tanh",
]

_SQRT2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def _tensor(x, like=None):
    return x if isinstance(x, Tensor) else convert_to_tensor(x, like=like)


def _axis(axis, ndim, op):
    """One non-negative axis (``None`` means the last one, as TensorFlow)."""
    if axis is None:
        axis = -1
    axis = int(axis)
    if not -ndim <= axis < max(ndim, 1) or ndim == 0:
        raise ValueError(
            f"{op}: axis {axis} is out of bounds for a tensor of {ndim} dimensions (it needs at least one dimension)"
        )
    return axis % ndim


# --------------------------------------------------------------------------- activations
def _relu_forward(xp, x):
    return xp.maximum(x, xp.zeros_like(x))


_relu = defop(
    "relu", _relu_forward, chapter="nn", domain=NONZERO, saves="inputs", batched=True, convention="relu'(0) = 0, as TF"
)


@public(_relu)
def relu(features, name=None):
    """``max(features, 0)``; the gradient at 0 is 0 (TensorFlow's convention)."""
    return apply1(_relu, features)


@_relu.gradient
def _relu_grad(xp, op, grad):
    """grad where x > 0, else 0 (also at 0)."""
    return xp.where(op.inputs[0] > 0, grad, 0)


def _sigmoid_forward(xp, x):
    e = xp.exp(-xp.abs(x))  # never overflows
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


_sigmoid = defop(
    "sigmoid",
    _sigmoid_forward,
    chapter="nn",
    floating=True,
    domain=REAL,
    saves="outputs",
    xp_callable=True,
    batched=True,
)


@public(_sigmoid)
def sigmoid(x, name=None):
    """``1 / (1 + exp(-x))``, computed without overflow."""
    return apply1(_sigmoid, x)


@_sigmoid.gradient
def _sigmoid_grad(xp, op, grad):
    """d sigmoid = y (1 - y) dx, written with the output y: ``sigmoid_grad(y, grad)``, an op of its own
    (TensorFlow's ``SigmoidGrad``), so a backend may compute it with its fused kernel and a trace
    records it as one step."""
    return xp.sigmoid_grad(op.outputs[0], grad)


def _sigmoid_grad_forward(xp, y, dy):
    return dy * (y * (1 - y))


# (internal, not in gt.nn: rules reach it as ``xp.sigmoid_grad``; the PyTorch adapter computes it with
# ``torch.ops.aten.sigmoid_backward``, what torch.autograd runs)
_sigmoid_grad_fn = binary(
    "sigmoid_grad",
    (POSITIVE, REAL),
    forward=_sigmoid_grad_forward,
    chapter="math",
    scalars=False,
    saves="inputs",
    doc="``dy * y * (1 - y)``: the gradient of ``y = sigmoid(x)`` given ``dy`` (TensorFlow's ``SigmoidGrad``).",
    convention="internal: sigmoid's rule (TF's SigmoidGrad); PyTorch computes it with aten.sigmoid_backward, "
    "one kernel that may round the last bit otherwise than dy * (y * (1 - y))",
)


@_sigmoid_grad_fn.gradient
def _sigmoid_grad_grad(xp, op, grad):
    """d (dy y (1 - y)) = dy (1 - 2y) dy_in + y (1 - y) d dy: ``(grad dy (1 - 2y), sigmoid_grad(y,
    grad))`` (TensorFlow's ``_SigmoidGradGrad``; real: sigmoid takes no complex input)."""
    y, dy = op.inputs
    gy = grad * dy * (1 - 2 * y) if op.needs_grad(0) else None
    return gy, (xp.sigmoid_grad(y, grad) if op.needs_grad(1) else None)


def _softplus_forward(xp, x):
    return xp.log1p(xp.exp(-xp.abs(x))) + xp.maximum(x, xp.zeros_like(x))


_softplus = defop("softplus", _softplus_forward, chapter="nn", floating=True, domain=REAL, saves="inputs", batched=True)


@public(_softplus)
def softplus(features, name=None):
    """``log(1 + exp(features))``, as ``log1p(exp(-|x|)) + max(x, 0)`` (no overflow)."""
    return apply1(_softplus, features)


@_softplus.gradient
def _softplus_grad(xp, op, grad):
    """d softplus = sigmoid(x) dx."""
    return grad * xp.sigmoid(op.inputs[0])


def _erf_forward(backend, x):
    return backend.erf(x)


_erf = defop(
    "erf",
    _erf_forward,
    forward_takes="backend",
    chapter="nn",
    floating=True,
    domain=REAL,
    saves="inputs",
    xp_callable=True,
    batched=True,
    doc="The error function (the backend's erf).",
)


@public(_erf)
def erf(x, name=None):
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t^2) dt``."""
    return apply1(_erf, x)


@_erf.gradient
def _erf_grad(xp, op, grad):
    """d erf = 2 / sqrt(pi) exp(-x^2) dx (conjugated for complex x: TensorFlow's convention)."""
    x = op.inputs[0]
    return grad * conj_(xp, (2.0 / math.sqrt(math.pi)) * xp.exp(-xp.square(x)))


def _gelu_forward(backend, x, *, approximate=False):
    xp = backend.xp
    if approximate:
        return 0.5 * x * (1 + xp.tanh(_SQRT_2_OVER_PI * (x + _GELU_A * (x * x * x))))
    return 0.5 * x * (1 + backend.erf(x / _SQRT2))


_gelu = defop(
    "gelu",
    _gelu_forward,
    forward_takes="backend",
    chapter="nn",
    floating=True,
    domain=[Case(REAL[3]), Case(REAL[2, 3]), Case(REAL[2, 3], approximate=True)],
    saves="inputs",
    batched=True,
)


@public(_gelu)
def gelu(features, approximate=False, name=None):
    """Gaussian error linear unit: ``x * Phi(x)`` (exact, with erf) or its tanh approximation."""
    return apply1(_gelu, features, {"approximate": bool(approximate)})


@_gelu.gradient
def _gelu_grad(xp, op, grad):
    """Exact: Phi(x) + x phi(x).  Approximate: with t = tanh(c (x + a x^3)),
    0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2)."""
    x = op.inputs[0]
    if op.attrs.get("approximate"):
        x2 = xp.square(x)
        t = xp.tanh(_SQRT_2_OVER_PI * (x + _GELU_A * (x2 * x)))
        d = 0.5 * (1 + t) + (0.5 * _SQRT_2_OVER_PI) * x * (1 - xp.square(t)) * (1 + 3 * _GELU_A * x2)
        return grad * d
    d = 0.5 * (1 + xp.erf(x / _SQRT2)) + x * xp.exp(-0.5 * xp.square(x)) * (1 / math.sqrt(2 * math.pi))
    return grad * d


def _elu_forward(xp, x, *, alpha=1.0):
    neg = xp.minimum(x, xp.zeros_like(x))  # expm1 of the positive part is never used
    return xp.where(x > 0, x, alpha * xp.expm1(neg))


_elu = defop(
    "elu",
    _elu_forward,
    chapter="nn",
    floating=True,
    domain=[Case(NONZERO[3]), Case(NONZERO[2, 3]), Case(NONZERO[2, 3], alpha=0.5)],
    batched=True,
    convention="elu'(0) = 1, as TF's EluGrad",
)


@public(_elu)
def elu(features, alpha=1.0, name=None):
    """``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise (``alpha`` as Keras' ``elu``)."""
    return apply1(_elu, features, {"alpha": float(alpha)})


@_elu.gradient
def _elu_grad(xp, op, grad):
    """grad where x >= 0, grad * (y + alpha) (= alpha exp(x)) where x < 0."""
    x = op.inputs[0]
    y = op.outputs[0]
    return xp.where(x < 0, grad * (y + op.attrs["alpha"]), grad)


def _leaky_relu_forward(xp, x, *, alpha=0.2):
    return xp.where(x > 0, x, alpha * x)


_leaky_relu = defop(
    "leaky_relu",
    _leaky_relu_forward,
    chapter="nn",
    domain=[Case(NONZERO[3]), Case(NONZERO[2, 3]), Case(NONZERO[2, 3], alpha=0.01)],
    saves="inputs",
    batched=True,
    convention="leaky_relu'(0) = alpha, as TF",
)


@public(_leaky_relu)
def leaky_relu(features, alpha=0.2, name=None):
    """``x`` for ``x > 0``, ``alpha * x`` otherwise."""
    return apply1(_leaky_relu, features, {"alpha": float(alpha)})


@_leaky_relu.gradient
def _leaky_relu_grad(xp, op, grad):
    """grad where x > 0, alpha * grad elsewhere (also at 0)."""
    return xp.where(op.inputs[0] > 0, grad, grad * op.attrs["alpha"])


# --------------------------------------------------------------------------- softmax family
def _softmax_forward(xp, x, *, axis=-1):
    e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
    return e / xp.sum(e, axis=axis, keepdims=True)


_AXIS_CASES = [Case(REAL[4]), Case(REAL[2, 3]), Case(REAL[2, 3], axis=0), Case(REAL[2, 3, 2], axis=1)]
_softmax = defop(
    "softmax",
    _softmax_forward,
    chapter="nn",
    floating=True,
    domain=_AXIS_CASES,
    saves="outputs",
    xp_callable=True,
    batched=True,
)


@public(_softmax)
def softmax(logits, axis=-1, name=None):
    """``exp(x) / sum(exp(x), axis)``, shifted by the maximum (no overflow)."""
    logits = _tensor(logits)
    return apply1(_softmax, logits, {"axis": _axis(axis, logits.ndim, "softmax")})


@_softmax.gradient
def _softmax_grad(xp, op, grad):
    """dx = y * (grad - sum(grad * y, axis)) (the axis counted from the end: grad may carry leading
    batch axes)."""
    y = op.outputs[0]
    return y * (grad - xp.sum(grad * y, axis=op.attrs["axis"] - y.ndim, keepdims=True))


def _log_softmax_forward(xp, x, *, axis=-1):
    shifted = x - xp.max(x, axis=axis, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))


_log_softmax = defop(
    "log_softmax",
    _log_softmax_forward,
    chapter="nn",
    floating=True,
    domain=_AXIS_CASES,
    saves="outputs",
    xp_callable=True,
    batched=True,
)


@public(_log_softmax)
def log_softmax(logits, axis=-1, name=None):
    """``x - logsumexp(x, axis)``, computed stably."""
    logits = _tensor(logits)
    return apply1(_log_softmax, logits, {"axis": _axis(axis, logits.ndim, "log_softmax")})


@_log_softmax.gradient
def _log_softmax_grad(xp, op, grad):
    """dx = grad - softmax(x) * sum(grad, axis), with softmax(x) = exp(y) (the axis counted from the
    end: grad may carry leading batch axes)."""
    y = op.outputs[0]
    return grad - xp.exp(y) * xp.sum(grad, axis=op.attrs["axis"] - y.ndim, keepdims=True)


def _logsumexp_forward(xp, x, *, axis, keepdims=False):
    m = xp.max(x, axis=axis, keepdims=True)
    m = xp.where(xp.isfinite(m), m, xp.zeros_like(m))  # all -inf (or inf): no shift, as TF
    out = xp.log(xp.sum(xp.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else xp.reshape(out, tuple(n for i, n in enumerate(x.shape) if i not in axis))


_logsumexp = defop(
    "logsumexp",
    _logsumexp_forward,
    chapter="nn",
    floating=True,
    domain=[
        Case(REAL[4]),
        Case(REAL[2, 3], axis=1),
        Case(REAL[2, 3], axis=0, keepdims=True),
        Case(REAL[2, 3, 2], axis=(0, 2)),
    ],
    batched=True,
)


@public(_logsumexp)
def logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """``log(sum(exp(x), axis))`` shifted by the maximum (stable; TF's ``reduce_logsumexp``)."""
    x = _tensor(input_tensor)
    if isinstance(axis, list):
        axis = tuple(axis)
    return apply1(_logsumexp, x, {"axis": _axes(axis, x.ndim), "keepdims": bool(keepdims)})


@_logsumexp.gradient
def _logsumexp_grad(xp, op, grad):
    """dx = grad * softmax(x) over the reduced axes, from ``x`` shifted by its maximum, as TF's
    composite (``exp(x - y)`` carried ``y``'s rounding into every element: 0.4999854 for 0.5 at
    ``x = [1000, 1000]`` in float32); grad broadcast back over the reduced axes (it may carry leading
    batch axes)."""
    x = op.inputs[0]
    axis = op.attrs["axis"]
    if not op.attrs["keepdims"]:
        keep = _keep_shape(x.shape, axis)
        grad = xp.reshape(grad, tuple(grad.shape)[: grad.ndim - op.outputs[0].ndim] + keep)
    m = xp.max(x, axis=axis, keepdims=True)
    e = xp.exp(x - xp.where(xp.isfinite(m), m, xp.zeros_like(m)))  # all -inf (or inf): no shift, as TF
    return grad * (e / xp.sum(e, axis=axis, keepdims=True))


reduce_logsumexp = logsumexp


# --------------------------------------------------------------------------- one_hot
def _one_hot_forward(backend, indices, *, depth, axis, on_value, off_value, dtype):
    xp = backend.xp
    dev = backend.device_of(indices)
    i64 = backend.dtype_to_native(_dt.int64)
    shape = [1] * (indices.ndim + 1)
    shape[axis] = depth
    classes = xp.reshape(xp.arange(depth, dtype=i64, device=dev), tuple(shape))
    hit = xp.expand_dims(xp.astype(indices, i64), axis=axis) == classes
    on = xp.asarray(on_value, dtype=dtype, device=dev)
    off = xp.asarray(off_value, dtype=dtype, device=dev)
    return xp.where(hit, on, off)


_one_hot = defop(
    "one_hot",
    _one_hot_forward,
    forward_takes="backend",
    chapter="nn",
    differentiable=False,
    domain=[
        Case(np.array([0, 2, 1, 3]), 4),
        Case(np.array([[0, 1], [2, -1]]), 3, axis=0),
        Case(np.array([1, 0]), 2, on_value=5.0, off_value=-1.0),
    ],
)


def _scalar_of(v):
    if isinstance(v, Tensor):
        return v._scalar(
            complex if v.dtype.is_complex else bool if v.dtype.is_bool else int if v.dtype.is_integer else float
        )
    return v


@public(_one_hot)
def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """A one-hot tensor: ``on_value`` where the index along the new ``axis`` equals ``indices``,
    ``off_value`` elsewhere (indices out of ``[0, depth)`` give an all-off row, as TF).  The dtype
    is ``dtype``, else that of ``on_value``/``off_value``, else float32.  Not differentiable."""
    indices = _tensor(indices)
    if not indices.dtype.is_integer:
        raise TypeError(f"one_hot: indices must be integers, got {indices.dtype}")
    if dtype is None:
        given = next((v for v in (on_value, off_value) if v is not None), None)
        if isinstance(given, Tensor):
            dtype = given.dtype
        elif isinstance(given, bool):
            dtype = _dt.bool
        elif isinstance(given, int):
            dtype = _dt.int64
        else:
            dtype = _dt.float32
    dtype = _dt.as_dtype(dtype)
    on = 1 if on_value is None else _scalar_of(on_value)
    off = 0 if off_value is None else _scalar_of(off_value)
    nd = indices.ndim + 1
    ax = -1 if axis is None else int(axis)
    if not -1 <= ax < nd:
        raise ValueError(f"one_hot: axis must be -1 or in [0, {nd}), got {axis}")
    b = indices._b
    attrs = {"depth": int(depth), "axis": ax % nd, "on_value": on, "off_value": off, "dtype": b.dtype_to_native(dtype)}
    return apply1(_one_hot, indices, attrs)


# --------------------------------------------------------------------------- cross-entropies
def _xent_forward(xp, labels, logits, *, axis):
    shifted = logits - xp.max(logits, axis=axis, keepdims=True)
    lse = xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))
    return -xp.sum(labels * (shifted - lse), axis=axis)


_xent = defop(
    "softmax_cross_entropy_with_logits",
    _xent_forward,
    chapter="nn",
    domain=[Case(POSITIVE[4], REAL[4]), Case(POSITIVE[2, 3], REAL[2, 3]), Case(POSITIVE[3, 2], REAL[3, 2], axis=0)],
    saves="inputs",
    batched=True,
    convention="d/dlogits = softmax(logits) * sum(labels) - labels (TF's kernel drops the "
    "sum, assuming labels that sum to 1); d/dlabels = -log_softmax(logits), as TF",
)


@public(_xent)
def softmax_cross_entropy_with_logits(labels, logits, axis=-1, name=None):
    """``-sum(labels * log_softmax(logits), axis)``, computed stably; differentiable in both
    ``logits`` and ``labels`` (as TensorFlow's)."""
    logits = _tensor(logits)
    if not logits.dtype.is_floating:
        raise TypeError(f"softmax_cross_entropy_with_logits: logits must be floating, got {logits.dtype}")
    labels = _tensor(labels, like=logits)
    if labels.dtype != logits.dtype:
        labels = astype(labels, logits.dtype)
    if tuple(labels.shape) != tuple(logits.shape):
        raise ValueError(
            f"softmax_cross_entropy_with_logits: labels and logits must have the same "
            f"shape, got {labels.shape} and {logits.shape}"
        )
    return apply(_xent, (labels, logits), {"axis": _axis(axis, logits.ndim, "softmax_cross_entropy_with_logits")})


@_xent.gradient
def _xent_grad(xp, op, grad):
    """loss = -sum(labels * log_softmax(logits)): d/dlogits = grad * (softmax * sum(labels) - labels),
    d/dlabels = -grad * log_softmax(logits)."""
    labels, logits = op.inputs
    axis = op.attrs["axis"]
    g = xp.expand_dims(grad, axis=axis - logits.ndim)  # from the end: grad may carry batch axes
    g_labels = g_logits = None
    if op.needs_grad(0):
        g_labels = -g * xp.log_softmax(logits, axis=axis)
    if op.needs_grad(1):
        g_logits = g * (xp.softmax(logits, axis=axis) * xp.sum(labels, axis=axis, keepdims=True) - labels)
    return g_labels, g_logits


def _sparse_xent_forward(backend, labels, logits):
    xp = backend.xp
    depth = logits.shape[-1]
    shifted = logits - xp.max(logits, axis=-1, keepdims=True)
    lse = xp.log(xp.sum(xp.exp(shifted), axis=-1))
    if logits.ndim and labels.ndim == logits.ndim - 1 and hasattr(xp, "take_along_axis"):
        # (labels were checked to lie in [0, depth) by the public function)
        idx = xp.expand_dims(xp.astype(labels, xp.int64), axis=-1)
        picked = xp.take_along_axis(shifted, idx, axis=-1)[..., 0]
    else:
        classes = xp.arange(depth, dtype=labels.dtype, device=backend.device_of(logits))
        hit = xp.expand_dims(labels, axis=-1) == classes
        picked = xp.sum(xp.where(hit, shifted, xp.zeros_like(shifted)), axis=-1)
    return lse - picked


_sparse_xent = defop(
    "sparse_softmax_cross_entropy_with_logits",
    _sparse_xent_forward,
    forward_takes="backend",
    chapter="nn",
    domain=[Case(np.array([0, 2, 1]), REAL[3, 4]), Case(np.array([[1, 0], [3, 2]]), REAL[2, 2, 4])],
    saves="inputs",
    batched=True,
)


def check_class_labels(labels, depth, who):
    """A ``ValueError`` naming ``who`` where an integer class label is outside ``[0, depth)``, as TF on
    CPU (a label out of range would otherwise pick no class: a silent zero loss and gradient). Inside
    ``gt.vmap`` every example's labels are checked at once; under ``gt.function`` and on lazy backends
    the check runs with the step (``value_check``)."""
    checked = labels
    while checked._v.__class__ is BatchArray:  # inside gt.vmap: every example's labels checked at once
        checked = wrap(checked._v.v, checked._v.bk.real)
    if not labels.size:
        return
    xp = checked._b.xp
    lv = checked._v

    def detail():
        bad = checked.numpy()
        bad = bad[(bad < 0) | (bad >= depth)].reshape(-1)[0]
        return f"{who}: received a label value of {bad} which is outside the valid range of [0, {depth})"

    value_check(
        xp.any((lv < 0) | (lv >= depth)),
        ValueError,
        f"{who}: received a label value outside the valid range of [0, {depth})",
        detail,
    )


@public(_sparse_xent)
def sparse_softmax_cross_entropy_with_logits(labels, logits, name=None):
    """``logsumexp(logits) - logits[label]`` per example; ``labels`` are integer class indices of
    shape ``logits.shape[:-1]`` (a label outside ``[0, num_classes)`` is a ``ValueError``, as TF on
    CPU).  Differentiable in ``logits``."""
    logits = _tensor(logits)
    if not logits.dtype.is_floating:
        raise TypeError(f"sparse_softmax_cross_entropy_with_logits: logits must be floating, got {logits.dtype}")
    labels = _tensor(labels, like=logits)
    if not labels.dtype.is_integer:
        raise TypeError(
            f"sparse_softmax_cross_entropy_with_logits: labels must be integers (class indices), got {labels.dtype}"
        )
    if logits.ndim == 0 or tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise ValueError(
            f"sparse_softmax_cross_entropy_with_logits: labels.shape must equal "
            f"logits.shape except for the last dimension; got labels.shape={labels.shape} "
            f"and logits.shape={logits.shape}"
        )
    check_class_labels(labels, logits.shape[-1], "sparse_softmax_cross_entropy_with_logits")
    return apply(_sparse_xent, (labels, logits))


@_sparse_xent.gradient
def _sparse_xent_grad(xp, op, grad):
    """d/dlogits = grad * (softmax(logits) - one_hot(labels)); labels get no gradient.  The backprop
    ``softmax(logits) - one_hot(labels)`` is an op of its own (what TensorFlow's kernel returns beside
    the loss), so a backend may compute it with its fused kernels (PyTorch: ``F.cross_entropy``'s
    backward) and a trace records it as one step."""
    labels, logits = op.inputs
    onehot_at = xp.expand_dims(labels, axis=-1)
    return None, xp.expand_dims(grad, axis=-1) * xp.sparse_softmax_cross_entropy_with_logits_grad(onehot_at, logits)


def _sparse_xent_grad_forward(xp, labels, logits):
    """``labels``: the class indices with a last axis of 1 (so they broadcast against the logits, as an
    element-wise op's inputs: the forward walk derives the op's tangent as one's); the one-hot rows are
    a comparison with ``arange(depth)`` (integers, on the logits' device)."""
    p = _softmax_forward(xp, logits, axis=-1)
    hit = labels == xp.arange(p.shape[-1], dtype=labels.dtype, device=_device(p))
    return p - xp.astype(hit, p.dtype)


# (internal, not in gt.nn: the sparse cross-entropy's rule reaches it as
# ``xp.sparse_softmax_cross_entropy_with_logits_grad``; the PyTorch adapter computes it with the kernels
# of F.cross_entropy's backward)
_sparse_xent_grad_op = defop(
    "sparse_softmax_cross_entropy_with_logits_grad",
    _sparse_xent_grad_forward,
    chapter="nn",
    domain=[Case(np.array([[0], [2], [1]]), REAL[3, 4]), Case(np.array([[[1], [0]], [[3], [2]]]), REAL[2, 2, 4])],
    saves="inputs",
    xp_callable=True,
    batched=True,
    batching="leading_all",
    doc="``softmax(logits) - one_hot(labels[..., 0])`` (labels with a last axis of 1): the gradient of the "
    "sparse cross-entropy with respect to "
    "its logits (the backprop TensorFlow's kernel returns beside the loss).",
    convention="internal: the sparse cross-entropy's rule; PyTorch computes it with F.cross_entropy's "
    "backward kernels (log_softmax, nll_loss_backward, _log_softmax_backward_data), which round otherwise "
    "than softmax - one_hot",
)


def _sparse_xent_grad_public(labels, logits):
    """``softmax(logits) - one_hot(labels[..., 0])``, differentiable in ``logits`` (the sparse
    cross-entropy's rule, recorded: its second order); ``labels`` of shape ``logits.shape[:-1] + (1,)``."""
    logits = _tensor(logits)
    return apply(_sparse_xent_grad_op, (_tensor(labels, like=logits), logits))


public(_sparse_xent_grad_op)(_sparse_xent_grad_public)


@_sparse_xent_grad_op.gradient
def _sparse_xent_grad_grad(xp, op, grad):
    """The one-hot is constant: softmax's rule, ``p * (grad - sum(grad * p, -1))`` (the axis counted from
    the end: ``grad`` may carry leading batch axes); labels get none."""
    p = xp.softmax(op.inputs[1], axis=-1)
    return None, p * (grad - xp.sum(grad * p, axis=-1, keepdims=True))


def _l2_loss_forward(xp, t):
    return xp.sum(t * t) / 2


_l2_loss = defop("l2_loss", _l2_loss_forward, chapter="nn", floating=True, domain=REAL, saves="inputs", batched=True)


@public(_l2_loss)
def l2_loss(t, name=None):
    """``sum(t ** 2) / 2``."""
    return apply1(_l2_loss, t)


@_l2_loss.gradient
def _l2_loss_grad(xp, op, grad):
    """d (sum(t^2) / 2) = t dt (a batch of cotangents, shape (B,), gets t's axes appended)."""
    t = op.inputs[0]
    if grad.ndim:
        grad = xp.reshape(grad, tuple(grad.shape) + (1,) * t.ndim)
    return grad * t


# --------------------------------------------------------------------------- composites
def silu(features, beta=1.0, name=None):
    """``x * sigmoid(beta * x)`` (``swish``)."""
    features = _tensor(features)
    return features * sigmoid(features if beta == 1.0 else beta * features)


swish = silu


def relu6(features, name=None):
    """``min(max(x, 0), 6)``; the gradient is 0 at both kinks, as TF."""
    features = _tensor(features)
    return where(greater_equal(features, 6), 6, relu(features))


#: SELU's constants (Klambauer et al. 2017), TensorFlow's and Keras' to the last digit
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(features, name=None):
    """``scale * elu(x, alpha)`` with SELU's ``alpha`` and ``scale``, as ``tf.nn.selu``: the
    gradient is ``scale`` at 0, as TF's SeluGrad."""
    return elu(features, alpha=_SELU_ALPHA) * _SELU_SCALE


def softsign(features, name=None):
    """``x / (1 + |x|)``, as ``tf.nn.softsign`` (and ``tf.math.softsign``)."""
    x = _tensor(features)
    return x / (_abs(x) + 1)


def embedding_lookup(params, ids, max_norm=None, name=None):
    """The rows ``ids`` of ``params`` (``take(params, ids, axis=0)``: ``ids`` of any shape), as
    ``tf.nn.embedding_lookup``.  Its gradient is dense, a row looked up twice accumulating (TF's is an
    ``IndexedSlices`` of the same values); an id out of range is an ``IndexError``."""
    if max_norm is not None:
        raise NotImplementedError(
            "embedding_lookup: max_norm is not supported; clip the looked-up rows with gt.clip_by_norm(rows, "
            "max_norm, axes=[-1])"
        )
    params = _tensor(params)
    ids = ids if isinstance(ids, Tensor) else convert_to_tensor(ids, like=params)
    if ids.ndim == 1:
        return take(params, ids, axis=0)
    # (the standard's take wants 1-D indices: PyTorch's index_select refuses others)
    rows = take(params, reshape(ids, (-1,)), axis=0)
    return reshape(rows, tuple(ids.shape) + tuple(params.shape[1:]))


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """``(x - mean) * scale / sqrt(variance + variance_epsilon) + offset``, as ``tf.nn.batch_normalization``
    (its arithmetic: ``inv = scale / sqrt(variance + eps)``, ``x * inv + (offset - mean * inv)``);
    ``offset`` and ``scale`` may be None."""
    x = _tensor(x)
    inv = 1.0 / sqrt(_tensor(variance) + variance_epsilon)
    if scale is not None:
        inv = inv * scale
    shift = -_tensor(mean) * inv if offset is None else offset - mean * inv
    return x * inv + shift


def log_sigmoid(x, name=None):
    """``log(sigmoid(x)) = -softplus(-x)``, stable."""
    return -softplus(-_tensor(x))


def l2_normalize(x, axis=None, epsilon=1e-12, name=None):
    """``x / sqrt(max(sum(x ** 2, axis), epsilon))``."""
    x = _tensor(x)
    if isinstance(axis, list):
        axis = tuple(axis)
    sq = _sum(square(x), axis=axis, keepdims=True)
    return x / sqrt(maximum(sq, epsilon))


def moments(x, axes, shift=None, keepdims=False, name=None):
    """``(mean, variance)`` of ``x`` over ``axes`` (population variance, as TF)."""
    x = _tensor(x)
    if isinstance(axes, list):
        axes = tuple(axes)
    m = mean(x, axis=axes, keepdims=True)
    v = mean(square(x - m), axis=axes, keepdims=True)
    if not keepdims:
        ax = _axes(axes, x.ndim)
        m, v = squeeze(m, axis=ax), squeeze(v, axis=ax)
    return m, v


def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """``max(x, 0) - x * z + log(1 + exp(-|x|))`` for logits ``x`` and labels ``z`` (stable, as TF)."""
    if labels is None or logits is None:
        raise ValueError("sigmoid_cross_entropy_with_logits needs both labels= and logits=")
    logits = _tensor(logits)
    labels = _tensor(labels, like=logits)
    if labels.dtype != logits.dtype:
        labels = astype(labels, logits.dtype)
    if tuple(labels.shape) != tuple(logits.shape):
        raise ValueError(
            f"sigmoid_cross_entropy_with_logits: logits and labels must have the same "
            f"shape, got {logits.shape} and {labels.shape}"
        )
    # written with where (not relu/abs) so that the gradient at logits == 0 is sigmoid(0) - z, as TF
    pos = greater_equal(logits, 0)
    relu_logits = where(pos, logits, 0)
    neg_abs_logits = where(pos, -logits, logits)
    return relu_logits - logits * labels + log1p(exp(neg_abs_logits))


def bias_add(value, bias, data_format=None, name=None):
    """``value + bias`` along the channel axis: the last one (``"N...C"``), or axis 1 for
    ``"NC..."`` data formats."""
    value = _tensor(value)
    bias = _tensor(bias, like=value)
    if bias.ndim != 1:
        raise ValueError(f"bias_add: bias must be 1-D, got shape {bias.shape}")
    if data_format is not None and data_format.startswith("NC"):
        bias = reshape(bias, (bias.shape[0],) + (1,) * (value.ndim - 2))
    return value + bias


def _on(x):
    """The backend and device of ``x``, for creating tensors beside it."""
    return _config.use_backend(x._b, x._b.device_of(x._v))


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("elementwise", _relu, _sigmoid, _softplus, _erf, _gelu, _elu, _leaky_relu)
batch_as("axis", _softmax, _log_softmax)
batch_as("reduction", _logsumexp)
batch_as(axis_kind(extra=1), _one_hot)
batch_as("elementwise_axis", _xent)
batch_as("leading_all", _sparse_xent)


def _l2_loss_batching(bk, impl, args, attrs):
    """``gt.vmap``'s rule for ``l2_loss``: the sum over each example's axes, one call."""
    v = args[0].v
    xp = bk.real.xp
    sq = v * v
    return (xp.sum(sq, axis=tuple(range(1, len(v.shape)))) if len(v.shape) > 1 else sq) / 2


_l2_loss.batching = _l2_loss_batching
