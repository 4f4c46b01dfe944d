"""gradtape: TensorFlow's GradientTape without TensorFlow.

A backend-neutral tape and gradient registry over the Array API standard: one program runs, and
is differentiated, on NumPy, PyTorch, JAX, array_api_strict or any plugged-in array library.

    import gradtape as gt
    x = gt.Variable(3.0)
    with gt.GradientTape() as tape:
        y = x * x
    tape.gradient(y, x)   # 6.0

``gradtape`` is itself an Array API namespace (``__array_api_version__ == "2025.12"``; code written
for 2024.12 and earlier keeps working).
"""

from __future__ import annotations

import math as _math
import sys as _sys

__version__ = "0.1.0"
__array_api_version__ = "2025.12"

from gradtape.core import dtypes  # noqa: F401
from gradtape.core.dtypes import (  # noqa: F401
    DType,
    bool,
    complex64,
    complex128,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    isdtype,
    uint8,
    uint16,
    uint32,
    uint64,
)
from gradtape.core.dtypes import as_dtype  # noqa: F401
from gradtape.core.config import available_backends, config, get_backend, set_backend, use_backend  # noqa: F401
from gradtape.core.tensor import (  # noqa: F401
    GradientLeakError,
    GradientLeakWarning,
    Tensor,
    TensorShape,
    Variable,
    compute,
    constant,
    convert_to_tensor,
    is_tensor,
    persist,
)
from gradtape.autodiff.tape import GradientTape, UnconnectedGradients  # noqa: F401
from gradtape.core.registry import NotDifferentiable, RegisterGradient  # noqa: F401
from gradtape.ops.elementwise import (  # noqa: F401
    abs,
    acos,
    acosh,
    add,
    asin,
    asinh,
    astype,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    cast,
    ceil,
    clip,
    conj,
    copysign,
    cos,
    cosh,
    divide,
    equal,
    exp,
    expm1,
    floor,
    floor_divide,
    greater,
    greater_equal,
    hypot,
    imag,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    multiply,
    negative,
    nextafter,
    not_equal,
    positive,
    pow,
    real,
    reciprocal,
    remainder,
    round,
    sign,
    signbit,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    trunc,
)
from gradtape.ops.creation import (  # noqa: F401
    arange,
    asarray,
    empty,
    empty_like,
    eye,
    from_dlpack,
    full,
    full_like,
    linspace,
    meshgrid,
    ones,
    ones_like,
    tril,
    triu,
    zeros,
    zeros_like,
)
from gradtape.ops.manipulation import (  # noqa: F401
    broadcast_arrays,
    broadcast_shapes,
    broadcast_to,
    concat,
    expand_dims,
    flip,
    moveaxis,
    pad,
    permute_dims,
    repeat,
    reshape,
    roll,
    split,
    squeeze,
    stack,
    tile,
    unstack,
)
from gradtape.ops.statistical import (  # noqa: F401
    cumulative_prod,
    cumulative_sum,
    max,
    mean,
    min,
    prod,
    std,
    sum,
    var,
)
from gradtape.ops.linear_algebra_functions import matmul, matrix_transpose, tensordot, vecdot  # noqa: F401
from gradtape.ops.einsum import einsum
from gradtape.ops.indexing import take, take_along_axis  # noqa: F401
from gradtape.ops.indexing import gather_nd, tensor_scatter_nd_add, tensor_scatter_nd_update  # noqa: F401
from gradtape.ops.searching import argmax, argmin, count_nonzero, nonzero, searchsorted, where  # noqa: F401
from gradtape.ops.sorting import *  # noqa: F403  (each chapter's __all__)
from gradtape.ops.sets import *  # noqa: F403
from gradtape.ops.utility import *  # noqa: F403
from gradtape.ops.data_types import *  # noqa: F403
from gradtape.ops.inspection import *  # noqa: F403
from gradtape.ops import fft  # noqa: F401  (the extensions: gt.fft.*, gt.linalg.*)
from gradtape.ops import linalg_extension as linalg
from gradtape.ops import special  # noqa: F401  (gt.special.*: what SciPy's array-API dispatch looks up)
from gradtape.ops.nan_functions import *  # noqa: F403  (nansum, nanmean, ...: what xarray looks up)
from gradtape.autodiff.custom_gradient import custom_gradient, grad_pass_through, register_op, stop_gradient  # noqa: F401
from gradtape.autodiff.recompute import checkpoint_policies, recompute_grad  # noqa: F401
from gradtape.ops import operators as _operators  # noqa: F401  (binds the Python operators and computing methods)
from gradtape.core import registry  # noqa: F401
from gradtape.core import domains  # noqa: F401  (the input domains op authors declare)
from gradtape import backends  # noqa: F401  (gt.backends.register / get: the adapters' registry)

e = _math.e
pi = _math.pi
inf = _math.inf
nan = _math.nan
newaxis = None


def transpose(a, perm=None, conjugate=False, name=None):
    """TensorFlow's ``tf.transpose``: permute the axes (reversed when ``perm`` is None)."""
    a = convert_to_tensor(a)
    y = permute_dims(a, tuple(range(a.ndim))[::-1] if perm is None else tuple(perm))
    return conj(y) if conjugate else y


from gradtape import math, nn, random  # noqa: E402,F401
from gradtape.training import initializers  # noqa: E402,F401
from gradtape.training import layers  # noqa: E402,F401
from gradtape.training import losses  # noqa: E402,F401
from gradtape.training import optimizers  # noqa: E402,F401

# TensorFlow's top-level names with TensorFlow's signatures, so code ported from TF reads the same.
from gradtape.math import (  # noqa: E402,F401
    add_n,
    clip_by_global_norm,
    clip_by_norm,
    clip_by_value,
    cumsum,
    identity,
    one_hot,
    reduce_all,
    reduce_any,
    reduce_logsumexp,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_std,
    reduce_sum,
    reduce_variance,
    scalar_mul,
    sigmoid,
    truediv,
)

linalg.global_norm = math.global_norm  # type: ignore[attr-defined]  # (tf.linalg.global_norm)
linalg.einsum = einsum  # type: ignore[attr-defined]  # (tf.linalg.einsum)
from gradtape.training.module import *  # noqa: E402, F403
from gradtape.autodiff.forward import ForwardAccumulator  # noqa: E402,F401
from gradtape.autodiff.vmap import vectorized_map, vmap  # noqa: E402,F401
from gradtape.backends.batching import VmapFallbackWarning  # noqa: E402,F401
from gradtape.autodiff.functional import (  # noqa: E402,F401  (JAX's / torch.func's transforms)
    grad,
    hessian,
    hvp,
    jacfwd,
    jacrev,
    jvp,
    value_and_grad,
    vjp,
)
from gradtape.testing.crosscheck import check_gradients  # noqa: E402,F401
from gradtape.compile.function import (  # noqa: E402,F401
    Function,
    OperatorNotAllowedInGraphError,
    TensorSpec,
    cond,
    function,
    while_loop,
)
from gradtape.compile.function import print_ as print  # noqa: E402, F401  (gt.print, as tf.print)
from gradtape.training import checkpoint as train  # noqa: E402,F401  (gt.train: Checkpoint, CheckpointManager)
from gradtape import errors  # noqa: E402,F401  (gt.errors: TensorFlow's exception names)
from gradtape.interop import einops as _einops  # noqa: E402,F401  (einops.rearrange & co. on gradtape tensors, whichever is imported first)

from gradtape.core.rule_namespace import set_tensor_module as _set_tensor_module  # noqa: E402

_set_tensor_module(_sys.modules[__name__])  # rules on Tensors call gradtape's own functions

# The module paths before the folders of issue 23 (gradtape.tensor, gradtape.layers, ...): ``from
# gradtape.tensor import Variable`` and pickles made with them keep working.
_MOVED = {
    "gradtape.dtypes": "gradtape.core.dtypes",
    "gradtape.registry": "gradtape.core.registry",
    "gradtape.domains": "gradtape.core.domains",
    "gradtape.backends._protocol": "gradtape.core.backend",
    "gradtape._config": "gradtape.core.config",
    "gradtape._recording_state": "gradtape.core.recording_state",
    "gradtape.tensor": "gradtape.core.tensor",
    "gradtape._engine": "gradtape.core.engine",
    "gradtape._unbroadcast": "gradtape.core.unbroadcast",
    "gradtape._rule_namespace": "gradtape.core.rule_namespace",
    "gradtape.dispatch": "gradtape.core.dispatch",
    "gradtape._trace": "gradtape.backends.tracing",
    "gradtape._operators": "gradtape.ops.operators",
    "gradtape.tape": "gradtape.autodiff.tape",
    "gradtape._jacobian": "gradtape.autodiff.jacobian",
    "gradtape.forward": "gradtape.autodiff.forward",
    "gradtape.custom_gradient": "gradtape.autodiff.custom_gradient",
    "gradtape._control_flow": "gradtape.compile.control_flow",
    "gradtape.function": "gradtape.compile.function",
    "gradtape.layers": "gradtape.training.layers",
    "gradtape.optimizers": "gradtape.training.optimizers",
    "gradtape.losses": "gradtape.training.losses",
    "gradtape.module": "gradtape.training.module",
    "gradtape.train": "gradtape.training.checkpoint",
    "gradtape.crosscheck": "gradtape.testing.crosscheck",
    "gradtape._einops": "gradtape.interop.einops",
}
for _old, _new in _MOVED.items():
    _sys.modules.setdefault(_old, _sys.modules[_new])

# PyTorch / JAX / Keras habits (t.sum(), loss.backward(), x.grad, gt.tensor, gt.optim) get an
# AttributeError that says what to write instead: gradtape/habits.py
from gradtape import habits as _habits  # noqa: E402

_habits.install()


def __getattr__(name):
    """A missing name of the package: ``AttributeError``, with the gradtape way for a PyTorch/JAX habit."""
    raise _habits.module_attribute_error(__name__, name)


def _linalg_getattr(name):
    """A missing name of ``gt.linalg``: named as the user wrote it (not its module's file), with a hint."""
    raise _habits.module_attribute_error("gradtape.linalg", name, _habits.LINALG_HINTS)


linalg.__getattr__ = _linalg_getattr  # type: ignore[method-assign]  # (PEP 562: read from the module's dict)
