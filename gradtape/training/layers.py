"""``gt.layers``: Keras-style layers (``Dense``, ``Flatten``, ``Dropout``, ``Activation``,
``Sequential``) on top of :class:`gradtape.Module`.

As in Keras, a layer creates its variables in ``build(input_shape)`` the first time it is called,
on the backend and device of its input.  Layer names are made unique per process (``dense``,
``dense_1``, ...; :func:`reset_names` / :func:`clear_session` restart the count) and variables are
named ``<layer>/<weight>:0`` (``dense/kernel:0``), as TensorFlow's Keras prints them.  A layer's
``trainable_variables`` are its own (in creation order: ``kernel``, ``bias``) followed by those of
its sublayers, in the order they were assigned (Keras' order, not ``tf.Module``'s sorted one).

Initializers are Keras' (:mod:`gradtape.training.initializers`, re-exported here: ``gt.layers.GlorotUniform``
is ``gt.initializers.GlorotUniform``): a name (``"glorot_uniform"``, Dense's default, ``"he_normal"``,
``"zeros"``, ...), an initializer, or a callable ``init(shape, dtype)``; they draw from
:mod:`gradtape.random`, so ``gt.random.set_seed`` makes a model's initial weights the same on every
backend.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import numpy as np

from gradtape.core import config as _config
from gradtape.core import dtypes as _dt
from gradtape.training.initializers import *  # noqa: F403  (gt.layers.GlorotUniform is gt.initializers.GlorotUniform)
from gradtape.training.initializers import Initializer, get_initializer
from gradtape.training.initializers import __all__ as __all__  # (so that mypy, too, sees them re-exported)
from gradtape import nn as _nn
from gradtape import random as _random
from gradtape.training.module import _DEFERRED, Module, _restore_deferred, camel_to_snake
from gradtape.ops.elementwise import abs as _abs
from gradtape.ops.elementwise import astype, exp, square
from gradtape.ops.linear_algebra_functions import matmul
from gradtape.ops.manipulation import expand_dims, reshape
from gradtape.ops.statistical import sum as _sum
from gradtape.core.dtypes import DTypeLike
from gradtape.core.tensor import Tensor, TensorLike, Variable, convert_to_tensor
from gradtape.ops.manipulation import permute_dims
from gradtape.ops.elementwise import greater_equal
from gradtape.ops.searching import where

# the initializers' names are written once, in gradtape.training.initializers' __all__
__all__ = [
    *__all__,
    "Activation",
    "Dense",
    "Dropout",
    "Flatten",
    "Layer",
    "Sequential",
    "clear_session",
    "get_activation",
    "reset_names",
]

# ---------------------------------------------------------------------------------------- names
_name_lock = threading.Lock()
# a layer's first call from several threads at once builds it once (one lock for every layer: builds
# are rare; re-entrant, as a Sequential builds its layers inside its own build)
_build_lock = threading.RLock()
_name_counts: dict[str, int] = {}


def unique_name(base: str) -> str:
    """``base`` the first time, then ``base_1``, ``base_2``, ... (per process, as Keras)."""
    with _name_lock:
        n = _name_counts.get(base, 0)
        _name_counts[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


def reset_names() -> None:
    """Restart the automatic layer names (the next ``Dense()`` is ``dense`` again)."""
    with _name_lock:
        _name_counts.clear()


def clear_session() -> None:
    """As ``keras.backend.clear_session``: forget the automatic layer names."""
    reset_names()


# ---------------------------------------------------------------------------------------- activations
def _linear(x):
    return x


def hard_sigmoid(x):
    """Keras 3's ``hard_sigmoid``: ``relu6(x + 3) / 6`` (0 below -3, 1 above 3, ``x / 6 + 0.5`` between;
    the gradient 0 at both kinks, as ``relu6``'s)."""
    return _nn.relu6(x + 3.0) / 6.0


def hard_silu(x):
    """Keras 3's ``hard_silu`` (``hard_swish``): ``x * hard_sigmoid(x)``."""
    return x * hard_sigmoid(x)


_ACTIVATIONS = {
    "linear": _linear,
    "relu": _nn.relu,
    "sigmoid": _nn.sigmoid,
    "tanh": _nn.tanh,
    "softmax": _nn.softmax,
    "log_softmax": _nn.log_softmax,
    "gelu": _nn.gelu,
    "elu": _nn.elu,
    "softplus": _nn.softplus,
    "leaky_relu": _nn.leaky_relu,
    "relu6": _nn.relu6,
    "selu": _nn.selu,
    "softsign": _nn.softsign,
    "silu": _nn.silu,
    "swish": _nn.silu,
    "hard_sigmoid": hard_sigmoid,
    "hard_silu": hard_silu,
    "hard_swish": hard_silu,
    "exponential": exp,
}


def get_activation(identifier: str | Callable[[Tensor], Tensor] | None) -> Callable[[Tensor], Tensor]:
    """An activation function from a name (``"relu"``, ``"sigmoid"``, ``"tanh"``, ``"softmax"``,
    ``"gelu"``, ``"linear"``, ...), ``None`` (linear) or a callable (returned as is)."""
    if identifier is None:
        return _linear
    if isinstance(identifier, str):
        try:
            return _ACTIVATIONS[identifier]
        except KeyError:
            raise ValueError(
                f"Could not interpret activation function identifier: {identifier!r}; known: {sorted(_ACTIVATIONS)}"
            ) from None
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret activation function identifier: {identifier!r}")


class _L2:
    """Keras' ``"l2"``: ``0.01 * sum(w^2)`` (a class, not a lambda, so that layers pickle)."""

    def __call__(self, w):
        return 0.01 * _sum(square(w))


class _L1:
    """Keras' ``"l1"``: ``0.01 * sum(|w|)``."""

    def __call__(self, w):
        return 0.01 * _sum(_abs(w))


def _regularizer(identifier):
    """``None``, a callable ``f(weight) -> scalar``, or ``"l1"`` / ``"l2"`` (Keras' factor 0.01)."""
    if identifier is None or callable(identifier):
        return identifier
    if identifier == "l2":
        return _L2()
    if identifier == "l1":
        return _L1()
    raise ValueError(f"Could not interpret regularizer identifier: {identifier!r}")


# ---------------------------------------------------------------------------------------- Layer
#: a checkpoint names a weight that no attribute holds by this prefix and its ``add_weight`` name
WEIGHTS = ".weights/"


def _first_tensor(x):
    if isinstance(x, (list, tuple)):
        for e in x:
            t = _first_tensor(e)
            if t is not None:
                return t
        return None
    return x if isinstance(x, Tensor) else None


def _shape_of(x):
    """The input shape ``build`` receives: a tuple, or a list of tuples for several inputs."""
    if isinstance(x, (list, tuple)):
        return [tuple(e.shape) for e in x if isinstance(e, Tensor)]
    return tuple(x.shape)


class Layer(Module):
    """Base of Keras-style layers: override ``build(input_shape)`` (create variables with
    :meth:`add_weight`) and ``call(inputs, ...)``.  ``layer(inputs)`` builds the layer on its first
    call, on the backend and device of ``inputs``, casts floating inputs to the layer's dtype, and
    runs ``call``.  ``trainable=False`` hides the layer's variables from ``trainable_variables``."""

    _TF_MODULE_IGNORED_PROPERTIES = frozenset(("_name", "_added_weights", "_regularizers"))

    def __init__(
        self, trainable: bool = True, name: str | None = None, dtype: DTypeLike | None = None, **kwargs: Any
    ) -> None:
        for k in ("input_shape", "input_dim", "batch_input_shape", "batch_size"):
            kwargs.pop(k, None)  # Keras' functional-model hints: nothing to do eagerly
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected keyword arguments {sorted(kwargs)}")
        if name is None:
            name = unique_name(camel_to_snake(type(self).__name__))
        elif not isinstance(name, str) or "/" in name:
            raise ValueError(f"layer names must be strings without '/', got {name!r}")
        self._name = name
        self._trainable = bool(trainable)
        self._dtype = _dt.floatx() if dtype is None else _dt.as_dtype(dtype)
        self._added_weights: list[Variable] = []
        self._regularizers: list[tuple[Variable, Callable[[Variable], Tensor]]] = []
        self.built = False

    # ------------------------------------------------------------------ properties
    @property
    def dtype(self) -> _dt.DType:
        """The dtype of the layer's variables and computations (``gt.config.floatx()`` when the layer
        was made: float32 by default)."""
        return self._dtype

    @property
    def trainable(self) -> bool:
        """Whether the layer's weights are trainable; setting it False freezes them."""
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = bool(value)

    # ------------------------------------------------------------------ building and calling
    def build(self, input_shape: Any) -> None:
        """Create the layer's variables (called once, before the first ``call``)."""
        self.built = True

    def call(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """The layer's computation."""
        return inputs

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        inputs = self._convert_inputs(inputs)
        if not self.built:
            with _build_lock:
                if not self.built:  # (another thread may have built it while this one waited)
                    self._build_for(inputs)
        return self.call(inputs, *args, **kwargs)

    def _build_for(self, inputs):
        x = _first_tensor(inputs)
        if x is None:
            self.build(None)
        else:
            b = x._b
            with _config.use_backend(b, b.weights_device(b.device_of(x._v))):
                self.build(_shape_of(inputs))
        self.built = True

    def _convert_inputs(self, inputs):
        if (
            isinstance(inputs, (list, tuple))
            and inputs
            and any(isinstance(e, (Tensor, list, tuple)) for e in inputs)
            and not _is_numeric_nest(inputs)
        ):
            return type(inputs)(self._convert_inputs(e) for e in inputs)
        if inputs is None:
            return None
        if not isinstance(inputs, Tensor):
            inputs = convert_to_tensor(inputs)
        if inputs.dtype.is_floating and inputs.dtype != self._dtype:
            inputs = astype(inputs, self._dtype)  # Keras' autocast of floating inputs
        return inputs

    def add_weight(
        self,
        name: str | None = None,
        shape: Sequence[int] = (),
        initializer: str | Initializer | Callable[..., Tensor] | None = None,
        dtype: DTypeLike | None = None,
        trainable: bool = True,
        regularizer: str | Callable[[Variable], Tensor] | None = None,
        constraint: Callable[[Tensor], TensorLike] | None = None,
    ) -> Variable:
        """Create a variable ``<layer name>/<name>:0`` of ``shape``, initialised by ``initializer``
        (default ``"glorot_uniform"`` for floating weights, as Keras); ``constraint``: a function of the
        value an optimizer applies after each update (``Variable.constraint``)."""
        dtype = self._dtype if dtype is None else _dt.as_dtype(dtype)
        init = get_initializer("glorot_uniform" if initializer is None else initializer)
        shape = tuple(int(s) for s in shape)
        value = init(shape, dtype=dtype)
        name = name or f"variable_{len(self._added_weights)}"
        var = Variable(value, trainable=trainable, name=f"{self._name}/{name}", dtype=dtype, constraint=constraint)
        self._added_weights.append(var)
        reg = _regularizer(regularizer)
        if reg is not None:
            self._regularizers.append((var, reg))
        if _DEFERRED:  # a checkpoint that saved this weight by its name (not an attribute)
            _restore_deferred(self, WEIGHTS + name, var)
        return var

    # ------------------------------------------------------------------ tracking (Keras' order)
    def _variables_beyond_attributes(self) -> list[Variable]:
        """The ``add_weight`` variables (those no attribute holds too are found only here, by a
        Module's walk)."""
        return list(self._added_weights)

    def _tracked(self):
        """(own variables in creation order, child layers/modules in assignment order)."""
        own = {}
        children = []
        seen_children = set()
        for v in self._added_weights:
            own[id(v)] = v
        for key, value in vars(self).items():
            if key in self._TF_MODULE_IGNORED_PROPERTIES:
                continue
            for leaf in _insertion_leaves(value):
                if isinstance(leaf, Variable):
                    own.setdefault(id(leaf), leaf)
                elif isinstance(leaf, Module) and leaf is not self and id(leaf) not in seen_children:
                    seen_children.add(id(leaf))
                    children.append(leaf)
        return sorted(own.values(), key=lambda v: v._id), children

    @property
    def weights(self) -> list[Variable]:
        """Own variables (trainable first, then non-trainable) followed by each sublayer's, once each."""
        own, children = self._tracked()
        out = [v for v in own if v.trainable] + [v for v in own if not v.trainable]
        seen = {id(v) for v in out}
        for c in children:
            for v in c.weights if isinstance(c, Layer) else c.variables:
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append(v)
        return out

    @property
    def variables(self) -> list[Variable]:  # type: ignore[override]  # a list, as Keras (tf.Module: a tuple)
        """All the layer's weights, its sublayers' included (Keras' ``variables``, the same list as ``weights``)."""
        return self.weights

    @property
    def trainable_weights(self) -> list[Variable]:
        """The weights an optimizer updates: trainable ones, of this layer and its sublayers (empty when frozen)."""
        if not self._trainable:
            return []
        own, children = self._tracked()
        out = [v for v in own if v.trainable]
        seen = {id(v) for v in out}
        for c in children:
            for v in c.trainable_weights if isinstance(c, Layer) else c.trainable_variables:
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append(v)
        return out

    @property
    def trainable_variables(self) -> list[Variable]:  # type: ignore[override]  # a list, as Keras
        """Own trainable variables in creation order (Dense: kernel, bias), then the sublayers'."""
        return self.trainable_weights

    @property
    def non_trainable_weights(self) -> list[Variable]:
        """The weights no optimizer updates (the non-trainable ones, and all of them when the layer is frozen)."""
        trainable = {id(v) for v in self.trainable_weights}
        return [v for v in self.weights if id(v) not in trainable]

    @property
    def non_trainable_variables(self) -> list[Variable]:  # type: ignore[override]  # a list, as Keras
        """Keras' other name for ``non_trainable_weights``."""
        return self.non_trainable_weights

    @property
    def losses(self) -> list[Tensor]:
        """Weight-regularization losses of this layer and its sublayers (computed now)."""
        out = [reg(v) for v, reg in self._regularizers]
        for c in self._tracked()[1]:
            if isinstance(c, Layer):
                out.extend(c.losses)
        return out

    def get_weights(self) -> list[np.ndarray]:
        """The values of ``weights`` as NumPy arrays."""
        return [v.numpy() for v in self.weights]

    def set_weights(self, weights: Sequence[TensorLike]) -> None:
        """Assign NumPy arrays (in ``weights`` order) to the layer's variables."""
        mine = self.weights
        if len(weights) != len(mine):
            raise ValueError(f"set_weights: the layer {self.name!r} has {len(mine)} weights, got {len(weights)}")
        for v, w in zip(mine, weights):
            v.assign(w)

    def count_params(self) -> int:
        """The number of scalars in the layer's weights (Keras' ``count_params``)."""
        return sum(v.size for v in self.weights)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name}, built={self.built}>"


def _is_numeric_nest(x):
    """A nested list of numbers (a value to convert), rather than a list of inputs."""
    while isinstance(x, (list, tuple)):
        if not x:
            return True
        x = x[0]
    return not isinstance(x, Tensor)


def _insertion_leaves(value):
    """Leaves of lists, tuples and dicts in insertion order (Keras tracks assignment order)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _insertion_leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _insertion_leaves(v)
    else:
        yield value


# ---------------------------------------------------------------------------------------- layers
class Dense(Layer):
    """A densely connected layer, as Keras: ``activation(inputs @ kernel + bias)`` with ``kernel``
    of shape ``(input_dim, units)`` and ``bias`` of shape ``(units,)``, created on the first call."""

    def __init__(
        self,
        units: int,
        activation: str | Callable[[Tensor], Tensor] | None = None,
        use_bias: bool = True,
        kernel_initializer: str | Initializer | Callable[..., Tensor] = "glorot_uniform",
        bias_initializer: str | Initializer | Callable[..., Tensor] = "zeros",
        kernel_regularizer: str | Callable[[Variable], Tensor] | None = None,
        bias_regularizer: str | Callable[[Variable], Tensor] | None = None,
        activity_regularizer: str | Callable[[Tensor], Tensor] | None = None,
        kernel_constraint: Callable[[Tensor], TensorLike] | None = None,
        bias_constraint: Callable[[Tensor], TensorLike] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        units = int(units)
        if units <= 0:
            raise ValueError(
                f"Received an invalid value for `units`, expected a positive integer. Received: units={units}"
            )
        if activity_regularizer is not None:  # (it was kept and never applied: no loss, silently)
            raise NotImplementedError(
                "Dense: activity_regularizer is not supported by gradtape layers (they have no add_loss): add the "
                "penalty of the layer's outputs to your loss yourself, e.g. loss + 0.01 * gt.reduce_sum(outputs ** 2) "
                "for 'l2' (kernel_regularizer and bias_regularizer are supported: sum(model.losses))"
            )
        self.units = units
        self.activation = get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(bias_initializer)
        self.kernel_regularizer = _regularizer(kernel_regularizer)
        self.bias_regularizer = _regularizer(bias_regularizer)
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint
        self.activity_regularizer = None
        self.kernel: Variable | None = None  # created by build, on the first call
        self.bias: Variable | None = None

    def build(self, input_shape: Sequence[int] | None) -> None:
        if input_shape is None or len(input_shape) == 0:
            raise ValueError(f"Dense needs inputs of at least one dimension, got shape {input_shape}")
        in_dim = int(input_shape[-1])
        self.kernel = self.add_weight(
            "kernel",
            (in_dim, self.units),
            self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        if self.use_bias:
            self.bias = self.add_weight(
                "bias",
                (self.units,),
                self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        self.built = True

    def call(self, inputs: Tensor) -> Tensor:
        if inputs.shape[-1] != self.kernel.shape[0]:  # type: ignore[union-attr]  # (built: __call__ builds first)
            raise ValueError(
                f"Input 0 of layer {self.name!r} is incompatible with the layer: expected "
                f"axis -1 of input shape to have value {self.kernel.shape[0]}, but received "  # type: ignore[union-attr]
                f"input with shape {inputs.shape}"
            )
        x = matmul(inputs, self.kernel)
        if self.bias is not None:
            x = x + self.bias
        return self.activation(x)


class Flatten(Layer):
    """Flattens every axis but the first (a 1-D input becomes ``(batch, 1)``), as Keras."""

    def __init__(self, data_format: Literal["channels_last", "channels_first"] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data_format = data_format

    def call(self, inputs: Tensor) -> Tensor:
        if inputs.ndim == 1:
            return expand_dims(inputs, axis=1)
        if self.data_format == "channels_first" and inputs.ndim > 2:
            inputs = permute_dims(inputs, (0,) + tuple(range(2, inputs.ndim)) + (1,))
        return reshape(inputs, (inputs.shape[0], -1))


class Activation(Layer):
    """Applies an activation function (a name or a callable)."""

    def __init__(self, activation: str | Callable[[Tensor], Tensor] | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.activation = get_activation(activation)

    def call(self, inputs: Tensor) -> Tensor:
        return self.activation(inputs)


class Dropout(Layer):
    """Zeroes a fraction ``rate`` of its inputs (scaling the rest by ``1 / (1 - rate)``) when called
    with ``training=True``; the identity otherwise, as Keras."""

    def __init__(
        self, rate: float, noise_shape: Sequence[int] | None = None, seed: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        rate = float(rate)
        if not 0.0 <= rate <= 1.0:
            raise ValueError(
                f"Invalid value received for argument `rate`. Expected a float value between "
                f"0 and 1. Received: rate={rate}"
            )
        self.rate, self.noise_shape, self.seed = rate, noise_shape, seed
        self._gen = _random.Generator.from_seed(seed) if seed is not None else None

    def call(self, inputs: Tensor, training: bool = False) -> Tensor:
        if not training or self.rate == 0.0:
            return inputs
        shape: tuple[int, ...] = inputs.shape
        if self.noise_shape is not None:  # (a None in it is the input's size there, as Keras)
            if len(self.noise_shape) != inputs.ndim:
                raise ValueError(
                    f"Dropout {self.name!r}: noise_shape {tuple(self.noise_shape)} has {len(self.noise_shape)} "
                    f"axes, the input {inputs.ndim} (shape {tuple(inputs.shape)}); give one size (1 to share "
                    "the mask along it, None for the input's) per axis"
                )
            shape = tuple(n if s is None else s for s, n in zip(self.noise_shape, inputs.shape))
        b = inputs._b
        with _config.use_backend(b, b.device_of(inputs._v)):
            u = (
                self._gen.uniform(shape, dtype=inputs.dtype)
                if self._gen is not None
                else _random.uniform(shape, dtype=inputs.dtype)
            )
        keep = greater_equal(u, self.rate)  # (none where rate is 1: all zeros, as PyTorch's)
        return where(keep, inputs * (1.0 / (1.0 - self.rate) if self.rate < 1.0 else 0.0), 0)


class Sequential(Layer):
    """A stack of layers applied in order (``Sequential([Dense(64, "relu"), Dense(10)])``)."""

    def __init__(
        self,
        layers: Iterable[Callable[..., Any]] | None = None,
        trainable: bool = True,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(trainable=trainable, name=name, **kwargs)
        self._layers: list[Callable[..., Any]] = []
        for layer in layers or ():
            self.add(layer)

    @property
    def layers(self) -> list[Callable[..., Any]]:
        """The layers, in call order (a copy)."""
        return list(self._layers)

    def add(self, layer: Callable[..., Any]) -> None:
        """Append a layer (any callable; Layers are tracked for their variables)."""
        if not callable(layer):
            raise TypeError(f"Sequential.add expects a layer, got {type(layer).__name__}")
        self._layers.append(layer)
        self.built = False

    def pop(self) -> Callable[..., Any]:
        """Remove and return the last layer (a ``TypeError`` when there is none, as Keras)."""
        if not self._layers:
            raise TypeError("There are no layers in the model.")
        return self._layers.pop()

    def build(self, input_shape: Any) -> None:
        self.built = True  # each sublayer builds itself on its first call

    def _convert_inputs(self, inputs):
        # the first layer converts/casts its own inputs
        if not isinstance(inputs, (Tensor, list, tuple)) or _is_numeric_nest(inputs):
            return inputs if isinstance(inputs, Tensor) else convert_to_tensor(inputs)
        return inputs

    def call(self, inputs: Any, training: bool | None = None, **kwargs: Any) -> Any:
        x = inputs
        for layer in self._layers:
            kw = dict(kwargs)
            if training is not None and _accepts(layer, "training"):
                kw["training"] = training
            x = layer(x, **kw)
        return x


def _accepts(layer, arg):
    fn = layer.call if isinstance(layer, Layer) else layer
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return arg in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
