"""Habits of PyTorch, JAX and Keras users met with the gradtape way (issue 26).

``t.sum()``, ``loss.backward()``, ``x.grad``, ``gt.tensor(...)``, ``gt.optim``: gradtape has none of
these, and a bare ``AttributeError`` leaves the user guessing. Each name here gets an
``AttributeError`` that says what to write instead.

* On tensors (:data:`TENSOR_HINTS`): each name is a class attribute of ``Tensor`` whose lookup raises
  (:class:`_Habit`, a descriptor), so ``hasattr(t, "grad")`` stays ``False`` and
  ``getattr(t, "sum", None)`` stays ``None``, as for any missing attribute. A descriptor, not a
  ``__getattr__`` on ``Tensor``: a class with ``__getattr__`` makes every attribute lookup of its
  instances slower (about 3x for ``t._v`` on CPython 3.11, which then cannot specialise the lookup),
  and attribute lookups are the tensor's hot path. A name that ``Tensor`` defines is never covered.
* On the package (:data:`MODULE_HINTS`): ``gradtape.__getattr__`` (only reached for a missing name)
  calls :func:`module_attribute_error`.

docs/coming_from.md has the same calls as a table; tests/test_habits.py checks that every hint's
``gt.`` names exist, so the advice stays runnable.
"""

from __future__ import annotations

from gradtape.core.tensor import Tensor

__all__ = ["MODULE_HINTS", "TENSOR_HINTS", "install", "module_attribute_error"]

_TAPE = "with gt.GradientTape() as tape: loss = ...; then grads = tape.gradient(loss, [x, ...])"
_WATCH = "make it a gt.Variable (a tape watches variables it reads) or call tape.watch(x) inside the tape"
_CAST = "gt.cast(t, gt.float64) (TensorFlow) or gt.astype(t, gt.float64) (Array API)"
_COPY = (
    "gt.identity(t) returns a copy (as clone does: x[i] = v and x += 1 update a tensor in place, as in PyTorch, "
    "and every name bound to it sees the change)"
)
_DEVICE = "gt.asarray(t, device=...) or t.to_device(...); gt.use_backend(name, device=...) picks them for a block"


def _reduce(tf_name, api_name):
    return f"gt.{tf_name}(t, axis=...) (TensorFlow) or gt.{api_name}(t, axis=...) (Array API)"


#: ``Tensor`` attribute -> what to write instead (the key as the user wrote it: ``sum()`` is a call).
TENSOR_HINTS: dict[str, str] = {
    # gradients: a tape computes them, tensors do not hold them
    "backward()": f"gradients come from a GradientTape: {_TAPE}",
    "grad": f"a tensor holds no gradient; tape.gradient returns it: {_TAPE}",
    "requires_grad": _WATCH,
    "requires_grad_()": _WATCH,
    "retain_grad()": "tape.gradient(loss, t) gives the gradient of any tensor computed inside the tape, "
    "if it is watched (tape.watch(t) right after computing it)",
    "is_leaf": "a tape differentiates with respect to the variables and watched tensors you name: "
    "tape.gradient(loss, [x, ...])",
    "zero_()": "nothing accumulates on tensors: each tape.gradient call returns fresh gradients "
    "(a gt.Variable is set with v.assign(value))",
    "detach()": "gt.stop_gradient(t) (or compute it outside the tape)",
    "data": "t itself is the value (gt.stop_gradient(t) to cut the tape); a gt.Variable changes with v.assign(value)",
    # methods of NumPy / PyTorch arrays: functions of the namespace here (the Array API's arrays have none)
    "sum()": _reduce("reduce_sum", "sum"),
    "mean()": _reduce("reduce_mean", "mean"),
    "max()": _reduce("reduce_max", "max"),
    "min()": _reduce("reduce_min", "min"),
    "prod()": _reduce("reduce_prod", "prod"),
    "std()": _reduce("reduce_std", "std"),
    "var()": _reduce("reduce_variance", "var"),
    "all()": _reduce("reduce_all", "all"),
    "any()": _reduce("reduce_any", "any"),
    "argmax()": "gt.argmax(t, axis=...)",
    "argmin()": "gt.argmin(t, axis=...)",
    "cumsum()": "gt.cumsum(t, axis=...) (TensorFlow) or gt.cumulative_sum(t, axis=...) (Array API)",
    "abs()": "gt.abs(t) (or abs(t))",
    "exp()": "gt.exp(t)",
    "log()": "gt.log(t)",
    "norm()": "gt.linalg.vector_norm(t) (or gt.linalg.matrix_norm for a matrix norm)",
    "matmul()": "t @ u or gt.matmul(t, u)",
    "mm()": "t @ u or gt.matmul(t, u)",
    "view()": "gt.reshape(t, shape)",
    "reshape()": "gt.reshape(t, shape)",
    "flatten()": "gt.reshape(t, [-1])",
    "unsqueeze()": "gt.expand_dims(t, axis)",
    "squeeze()": "gt.squeeze(t, axis)",
    "permute()": "gt.transpose(t, perm) (TensorFlow) or gt.permute_dims(t, axes) (Array API)",
    "transpose()": "gt.transpose(t, perm), t.T for a matrix, t.mT for a stack of matrices",
    "dim()": "t.ndim",
    "numel()": "t.size",
    "item()": "float(t) or t.numpy().item() (outside a tape: the number leaves it)",
    "clone()": _COPY,
    "copy()": _COPY,
    "astype()": _CAST,
    "float()": _CAST.replace("float64", "float32"),
    "double()": _CAST,
    "long()": _CAST.replace("float64", "int64"),
    "int()": _CAST.replace("float64", "int32"),
    "type()": _CAST,
    "to()": _DEVICE,
    "cpu()": _DEVICE,
    "cuda()": _DEVICE,
    "assign()": "only a gt.Variable has .assign: make the value a gt.Variable(initial_value)",
    # JAX
    "at": "x.at[i].set(v) (a new array) is y = gt.identity(x); y[i] = v (x[i] = v updates x itself, "
    "recorded and differentiable, as in PyTorch), or gt.where(mask, v, x) with a mask of the positions to change",
    "block_until_ready()": "t.numpy() waits for the value (and gt.compute(*tensors) runs a lazy backend's graphs)",
}

#: ``gradtape`` module attribute -> what to write instead.
MODULE_HINTS: dict[str, str] = {
    # dtypes the Array API standard has not (TensorFlow's and PyTorch's half precision)
    "float16": "gradtape's dtypes are the Array API standard's, which has no half precision: gt.float32 "
    "(TensorFlow's default) or gt.float64 (for gradient checks)",
    "bfloat16": "gradtape's dtypes are the Array API standard's, which has no bfloat16: gt.float32 "
    "(TensorFlow's default) or gt.float64 (for gradient checks)",
    "tensor": "gt.constant(value) makes a tensor (gt.Variable(value) a trainable one; gt.Tensor is their type)",
    "from_numpy": "gt.constant(array) or gt.asarray(array)",
    "optim": "the optimizers are gt.optimizers (torch.optim.Adam(params, lr=1e-3) is gt.optimizers.Adam("
    "learning_rate=1e-3), stepped with opt.apply_gradients(zip(grads, variables)))",
    "keras": "gradtape has no keras namespace: tf.keras.optimizers is gt.optimizers, tf.keras.layers "
    "gt.layers, tf.keras.losses gt.losses",
    "autograd": f"gradients come from a GradientTape: {_TAPE}",
    "no_grad": "nothing outside a GradientTape is recorded; inside one, `with tape.stop_recording():` "
    "or gt.stop_gradient(x)",
    "enable_grad": f"a GradientTape records what runs inside it: {_TAPE}",
    "jit": "gt.function(fn) traces a step once, then runs it with jax.jit on JAX and replays it elsewhere; "
    "gt.function(fn, jit_compile=True) compiles it with torch.compile on PyTorch",
    "device": _DEVICE,
    "manual_seed": "gt.random.set_seed(seed)",
    "set_seed": "gt.random.set_seed(seed)",
    "cat": "gt.concat(tensors, axis=0)",
    "concatenate": "gt.concat(tensors, axis=0)",
    # TensorFlow names that the Array API spells otherwise (a ported tf program meets these)
    "gather": "gt.take(x, indices, axis=0) (tf.gather under the Array API's name; gt.take_along_axis for "
    "per-row indices)",
    "range": "gt.arange(start, stop, step)",
    "norm": "gt.linalg.vector_norm(x, axis=...) (tf.norm's default, the Euclidean norm) or gt.linalg.matrix_norm",
    "shape": "x.shape (a tuple of ints)",
    "size": "x.size",
    "rank": "x.ndim",
    "fill": "gt.full(shape, value)",
    "reverse": "gt.flip(x, axis=...)",
    "boolean_mask": "x[mask] (a boolean tensor as the key)",
    # Keras and tf.image, which gradtape does not have (TensorFlow's GradientTape guides use both)
    "metrics": "gradtape has no metrics module: compute a metric with gradtape ops outside the tape "
    "(accuracy: gt.mean(gt.astype(gt.argmax(logits, axis=-1) == labels, gt.float32)); a running mean: "
    "sum the batches' values and count them in Python)",
    "image": "gradtape has no image ops: write one with gradtape's (tf.image.adjust_contrast(x, f) is "
    "(x - m) * f + m, m = gt.mean(x, axis=(-3, -2), keepdims=True)), or register it with gt.register_op",
}


class _Habit:
    """A ``Tensor`` class attribute whose every lookup raises an ``AttributeError`` with a hint: Python's
    own words (``'Tensor' object has no attribute 'sum'``, which gt.check_gradients reads to add the
    Array API's spelling for code written against the standard), then what to write instead."""

    __slots__ = ("hint", "name")

    def __init__(self, key, hint):
        self.name = key.removesuffix("()")
        self.hint = hint

    def __get__(self, obj, owner=None):
        what = f"type object {owner.__name__!r}" if obj is None else f"{type(obj).__name__!r} object"
        raise AttributeError(f"{what} has no attribute {self.name!r}: {self.hint}", name=self.name)


def install(cls=Tensor):
    """Put each name of :data:`TENSOR_HINTS` that ``cls`` does not define on it; the names installed."""
    done = []
    for key, hint in TENSOR_HINTS.items():
        name = key.removesuffix("()")
        if any(name in vars(k) for k in cls.__mro__):  # defined (or already installed): leave it
            continue
        setattr(cls, name, _Habit(key, hint))
        done.append(name)
    return done


#: ``gradtape.linalg`` attribute -> what to write instead (NumPy's and TensorFlow's names).
LINALG_HINTS: dict[str, str] = {
    "norm": "gt.linalg.vector_norm(x, ord=..., axis=...) or gt.linalg.matrix_norm(x, ord=...) (the Array "
    "API's two norms: np.linalg.norm and tf.norm pick one of them from their arguments)",
}


def module_attribute_error(module, name, hints=None):
    """The ``AttributeError`` for ``module.name`` (``module`` is ``"gradtape"`` or ``"gradtape.linalg"``),
    with a hint where ``hints`` (default :data:`MODULE_HINTS`) has one."""
    hint = (MODULE_HINTS if hints is None else hints).get(name)
    message = f"module {module!r} has no attribute {name!r}"
    return AttributeError(f"{message}: {hint}" if hint else message, name=name)
