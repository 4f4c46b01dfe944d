"""``gt.optimizers``: SGD, Adam, AdamW, RMSprop and Adagrad with Keras 3's defaults and update
formulas, and ``apply_gradients(zip(grads, vars))``.

Updates are state changes, not computations to differentiate: they are computed on the native
arrays with the backend's own namespace and written with ``Variable.assign`` / ``assign_add`` /
``assign_sub``, so no tape ever sees them, and they run on whatever backend and device each variable
lives on.  Each optimizer keeps its slot variables (``momentum``, ``velocity``, ...) per variable,
created on first use, and counts its steps in ``iterations`` (an int64 Variable, as Keras).

Keras 3's formulas (``lr`` the learning rate, ``g`` the gradient, ``t = iterations + 1``):

* SGD: ``m = momentum * m - lr * g``; ``v += m`` (Nesterov: ``v += momentum * m - lr * g``);
  without momentum ``v -= lr * g``.
* Adam: ``m += (g - m)(1 - beta_1)``, ``u += (g^2 - u)(1 - beta_2)`` (AMSGrad: ``u_hat = max(u_hat,
  u)``), ``v -= m * alpha / (sqrt(u) + epsilon)`` with ``alpha = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)``.
* RMSprop: ``s = rho s + (1 - rho) g^2`` (centered: ``a = rho a + (1 - rho) g``, denominator
  ``s - a^2 + epsilon``, else ``s + epsilon``); ``inc = lr g / sqrt(denominator)``; with momentum
  ``m = momentum m + inc``, ``v -= m``, else ``v -= inc``.
* Adagrad: ``a += g^2``; ``v -= lr g / sqrt(a + epsilon)``.
* ``weight_decay`` (decoupled, applied before the update): ``v -= v * weight_decay * lr``;
  ``clipnorm``, ``clipvalue``, ``global_clipnorm`` clip the gradients first.

Keras takes any number there; gradtape refuses, with a ``ValueError``, those that make a step NaN,
empty or the wrong way (PyTorch's bounds): ``beta_1`` and ``beta_2`` outside ``[0, 1)``, ``rho``
outside ``[0, 1]``, a negative ``momentum``, ``epsilon``, ``weight_decay``, clipping bound or initial
accumulator; and variables that are not floating-point or complex (an integer step truncates to 0).
Complex variables take SGD's rule only (PyTorch's steps; ``clipnorm`` clips ``sqrt(sum |g|^2)``):
Adam's, RMSprop's and Adagrad's ``g * g`` is no magnitude there, and ``clipvalue`` has no meaning.

``apply`` never reads a tensor's value into Python, so a step can be traced (``gt.function``): the
step count, a schedule's learning rate, Adam's bias correction and the clipping factors are native
0-d arrays computed from ``iterations`` (as Keras 3: ``t = cast(iterations + 1, dtype)``; clipping
with ``maximum``, not ``if``), once per apply for each backend, device and dtype of the variables.
Adam's ``1 - beta^t`` is ``-expm1(t log(beta))``, so float32 keeps its digits (``1 - beta_2^t``
cancels).  A constant learning rate stays a Python float.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeAlias

from gradtape.core import dtypes as _dt
from gradtape.ops.creation import full_like, zeros_like
from gradtape.ops.elementwise import astype, cos, floor, minimum
from gradtape.ops.searching import where
from gradtape.autodiff.tape import GradientTape
from gradtape.core.tensor import Tensor, TensorLike, Variable, wrap, convert_to_tensor, user_stacklevel

__all__ = [
    "SGD",
    "Adagrad",
    "Adam",
    "AdamW",
    "CosineDecay",
    "ExponentialDecay",
    "LearningRateSchedule",
    "PiecewiseConstantDecay",
    "Optimizer",
    "RMSprop",
    "get",
    "schedules",
]


# ---------------------------------------------------------------------------------------- schedules
class LearningRateSchedule:
    """A learning rate that depends on the step: ``schedule(step)``.  ``apply`` passes ``iterations``
    as a 0-d int64 Tensor and takes a Tensor (or a float) back; called with a Python int (as the
    ``learning_rate`` property does), a schedule may return a float."""

    def __call__(self, step: int | Tensor) -> float | Tensor:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        """The schedule's arguments, as a dict (Keras' ``get_config``)."""
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> LearningRateSchedule:
        """The schedule of ``get_config``'s dict (Keras' ``from_config``)."""
        return cls(**config)


def _serialize_schedule(schedule):
    """Keras' ``serialize`` of a schedule: ``{"class_name": ..., "config": get_config()}``."""
    return {
        "module": "keras.optimizers.schedules",
        "class_name": type(schedule).__name__,
        "config": schedule.get_config(),
        "registered_name": None,
    }


def _deserialize_schedule(config):
    """The schedule of ``_serialize_schedule``'s dict: the LearningRateSchedule subclass of that name."""
    name = config.get("class_name")
    todo, seen = [LearningRateSchedule], []
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo.extend(cls.__subclasses__())
    for cls in seen:
        if cls.__name__ == name:
            return cls.from_config(config.get("config") or {})
    raise ValueError(
        f"Could not interpret the learning rate schedule {name!r}: no subclass of "
        "gt.optimizers.LearningRateSchedule has that name (define or import it first)"
    )


class ExponentialDecay(LearningRateSchedule):
    """``initial_learning_rate * decay_rate ** (step / decay_steps)`` (floored with ``staircase``)."""

    def __init__(
        self,
        initial_learning_rate: float,
        decay_steps: float,
        decay_rate: float,
        staircase: bool = False,
        name: str | None = None,
    ) -> None:
        if decay_steps <= 0:
            raise ValueError(f"decay_steps must be positive, got {decay_steps}")
        # (a negative rate to a fractional power is NaN: the variables stepped to NaN, silently)
        who = "ExponentialDecay"
        self.initial_learning_rate = _check_range(who, "initial_learning_rate", initial_learning_rate, 0.0, None)
        self.decay_rate = _check_range(who, "decay_rate", decay_rate, 0.0, None)
        self.decay_steps, self.staircase = decay_steps, staircase

    def __call__(self, step: int | Tensor) -> float | Tensor:
        if isinstance(step, Tensor):  # in float64, as the Python floats below
            p = astype(step, _dt.float64) / self.decay_steps
            if self.staircase:
                p = floor(p)
        else:
            p = step / self.decay_steps
            if self.staircase:
                p = math.floor(p)
        return self.initial_learning_rate * self.decay_rate**p

    def get_config(self) -> dict[str, Any]:
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "decay_rate": self.decay_rate,
            "staircase": self.staircase,
        }


class CosineDecay(LearningRateSchedule):
    """Keras' ``CosineDecay``: from ``initial_learning_rate`` (or, after ``warmup_steps`` of linear
    warm-up, from ``warmup_target``) down to ``alpha`` times it along half a cosine over
    ``decay_steps``, then constant."""

    def __init__(
        self,
        initial_learning_rate: float,
        decay_steps: float,
        alpha: float = 0.0,
        name: str = "CosineDecay",
        warmup_target: float | None = None,
        warmup_steps: float = 0,
    ) -> None:
        who = "CosineDecay"
        if decay_steps <= 0:
            raise ValueError(f"decay_steps must be positive, got {decay_steps}")
        self.initial_learning_rate = _check_range(who, "initial_learning_rate", initial_learning_rate, 0.0, None)
        self.alpha = _check_range(who, "alpha", alpha, 0.0, 1.0)
        self.warmup_target = (
            None if warmup_target is None else _check_range(who, "warmup_target", warmup_target, 0.0, None)
        )
        _check_range(who, "warmup_steps", warmup_steps, 0.0, None)
        self.decay_steps, self.warmup_steps, self.name = decay_steps, warmup_steps, name

    def __call__(self, step: int | Tensor) -> float | Tensor:
        tensor = isinstance(step, Tensor)
        warm = float(self.warmup_steps) if self.warmup_target is not None else 0.0
        s = astype(step, _dt.float64) if tensor else float(step)  # (float64, as the Python floats)
        s = minimum(s, self.decay_steps + warm) if tensor else min(s, self.decay_steps + warm)
        fraction = (s - warm) / self.decay_steps
        cosine = 0.5 * (1.0 + (cos(math.pi * fraction) if tensor else math.cos(math.pi * fraction)))
        peak = self.initial_learning_rate if self.warmup_target is None else self.warmup_target
        decayed = peak * ((1 - self.alpha) * cosine + self.alpha)
        if self.warmup_target is None:
            return decayed
        lr0 = self.initial_learning_rate
        warming = (self.warmup_target - lr0) * s / (warm or 1.0) + lr0
        return where(s < warm, warming, decayed) if tensor else (warming if s < warm else decayed)

    def get_config(self) -> dict[str, Any]:
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "alpha": self.alpha,
            "name": self.name,
            "warmup_target": self.warmup_target,
            "warmup_steps": self.warmup_steps,
        }


class PiecewiseConstantDecay(LearningRateSchedule):
    """Keras' ``PiecewiseConstantDecay``: ``values[0]`` up to and including step ``boundaries[0]``,
    ``values[i]`` for ``boundaries[i - 1] < step <= boundaries[i]``, ``values[-1]`` after the last."""

    def __init__(self, boundaries: Sequence[float], values: Sequence[float], name: str = "PiecewiseConstant") -> None:
        boundaries, values = list(boundaries), list(values)
        if len(boundaries) != len(values) - 1:
            raise ValueError(
                "The length of boundaries should be 1 less than the length of values. Received: "
                f"boundaries={boundaries} of length {len(boundaries)}, and values={values} of length {len(values)}."
            )
        who = "PiecewiseConstantDecay"
        self.boundaries = boundaries
        self.values = [_check_range(who, "values", v, 0.0, None) for v in values]
        self.name = name

    def __call__(self, step: int | Tensor) -> float | Tensor:
        if not isinstance(step, Tensor):
            return next((v for b, v in zip(self.boundaries, self.values) if step <= b), self.values[-1])
        lr = full_like(astype(step, _dt.float64), self.values[-1])
        for b, v in zip(reversed(self.boundaries), reversed(self.values[:-1])):
            lr = where(step <= b, v, lr)
        return lr

    def get_config(self) -> dict[str, Any]:
        return {"boundaries": self.boundaries, "values": self.values, "name": self.name}


#: A learning rate: a float (or 0-d Tensor), a :class:`LearningRateSchedule`, or a callable taking the
#: step (``iterations``) and returning the rate.
LearningRate: TypeAlias = "float | Tensor | LearningRateSchedule | Callable[..., Any]"


class _Schedules:
    LearningRateSchedule = LearningRateSchedule
    ExponentialDecay = ExponentialDecay
    CosineDecay = CosineDecay
    PiecewiseConstantDecay = PiecewiseConstantDecay


schedules = _Schedules()


# ---------------------------------------------------------------------------------------- base
def _tensor(native, like):
    """A Tensor around a native array of ``like``'s backend, computed on its device (no copy, nothing
    recorded)."""
    b = like._b
    if type(native) is not b.array_type:  # a NumPy scalar from 0-d arithmetic
        native = b.fix_output(native)
    return wrap(native, b)


def _log(beta):
    """``log(beta)`` for a decay rate in [0, 1] (``-inf`` for 0)."""
    return math.log(beta) if beta > 0 else -math.inf


def _onto(x, src, b, device):
    """Native ``x`` of backend ``src`` as an array of backend ``b`` on ``device`` (``x`` itself where
    it is one already)."""
    if src is not b:
        return b.from_dlpack(x, device)
    if b.device_of(x) != device:
        return b.to_device(x, device)
    return x


class Optimizer:
    """Base of the optimizers: ``apply_gradients(zip(grads, vars))`` / ``apply(grads, vars)``,
    ``minimize(loss, var_list, tape=None)``, ``iterations``, ``learning_rate``, ``variables``.

    Subclasses name their slots in ``_slot_names`` and implement ``update_step(gradient, variable,
    learning_rate)`` on native arrays (``self._xp`` is the variable's namespace; read a slot with
    ``self._slot(variable, name)``); what the variables of one dtype share in an apply (Adam's bias
    correction) comes from ``_per_apply`` as ``self._shared``.  Nothing there may read a tensor's
    value into Python (``int``, ``float``, ``if``): steps are traced by ``gt.function``.
    """

    _slot_names: tuple = ()
    _complex_ok = False  # whether update_step's rule holds for complex variables (SGD's)

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        for k in (
            "use_ema",
            "ema_momentum",
            "ema_overwrite_frequency",
            "loss_scale_factor",
            "gradient_accumulation_steps",
        ):
            value = kwargs.pop(k, None)
            if value is not None and value is not False and not (k == "ema_momentum" and value == 0.99):
                _unsupported(k)
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected keyword arguments {sorted(kwargs)}")
        if clipnorm is not None and global_clipnorm is not None:
            raise ValueError(
                "Only one of `clipnorm` and `global_clipnorm` can be set. Received: "
                f"clipnorm={clipnorm}, global_clipnorm={global_clipnorm}"
            )
        self.name = name or type(self).__name__.lower()
        who = type(self).__name__
        # a negative clipping bound turns the gradient around, a negative decay grows the weights
        if weight_decay is not None:
            _check_range(who, "weight_decay", weight_decay, 0.0, None)
        for k, c in (("clipnorm", clipnorm), ("clipvalue", clipvalue), ("global_clipnorm", global_clipnorm)):
            if c is not None:
                _check_range(who, k, c, 0.0, None)
        self.weight_decay = weight_decay
        self.clipnorm, self.clipvalue, self.global_clipnorm = clipnorm, clipvalue, global_clipnorm
        self._learning_rate = self._check_lr(learning_rate)
        self.iterations = Variable(0, trainable=False, dtype=_dt.int64, name=f"{self.name}/iteration")
        # a constant learning rate is also a variable (as Keras): a traced step reads it, so setting
        # ``learning_rate`` later changes what a compiled step does
        self._lr_variable = Variable(
            self._learning_rate if not callable(self._learning_rate) else 0.0,
            trainable=False,
            dtype=_dt.float64,
            name=f"{self.name}/learning_rate",
        )
        # id(variable) -> (variable, {slot name: Variable}); ``__setstate__`` re-keys it by the new ids
        # when the optimizer is unpickled or deep-copied with its variables
        self._slots = {}
        self._slot_order = []
        self._exclude_ids = {}  # id(variable) -> variable
        self._exclude_names: tuple[str, ...] = ()
        self._slots_lock = threading.Lock()  # (two threads' first applies make one set of slots)

    # ------------------------------------------------------------------ learning rate
    @staticmethod
    def _check_lr(lr):
        if isinstance(lr, LearningRateSchedule) or callable(lr):
            return lr
        if isinstance(lr, dict) and "class_name" in lr:  # a schedule, as get_config gives it
            return _deserialize_schedule(lr)
        if isinstance(lr, Tensor):
            lr = float(lr)
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) and not hasattr(lr, "__float__"):
            # (Keras' message and class)
            raise ValueError(
                "Argument `learning_rate` should be float, or an instance of "
                "LearningRateSchedule, or a callable (that takes in the current iteration "
                f"value and returns the corresponding learning rate value). Received "
                f"instead: learning_rate={lr!r}"
            )
        lr = float(lr)
        if lr < 0:
            raise ValueError(f"learning_rate must be non-negative, got {lr}")
        return lr

    @property
    def learning_rate(self) -> float:
        """The current learning rate, a float (a schedule evaluated at ``iterations``; a constant one
        is read without reading ``iterations``, so a traced step may read it)."""
        lr = self._learning_rate
        if not callable(lr):
            return lr
        return float(self._lr_at(int(self.iterations)))

    @learning_rate.setter
    def learning_rate(self, value: LearningRate) -> None:
        self._learning_rate = self._check_lr(value)
        if not callable(self._learning_rate):
            self._lr_variable.assign(self._learning_rate)

    def _lr_at(self, step):
        """The learning rate at ``step`` (a Python int or a Tensor): a constant's float, or what the
        schedule returns."""
        lr = self._learning_rate
        return lr(step) if callable(lr) else lr

    def _scheduled_lr(self, memo, b, device, dtype, like):
        """The schedule's learning rate for this apply (evaluated once, kept in ``memo``) as a native
        0-d array of backend ``b`` on ``device`` in ``dtype`` (a float where it returns one)."""
        if not memo:
            it = self.iterations
            memo.append(self._lr_at(_tensor(_onto(it._v, it._b, b, device), like)))
        lr = memo[0]
        if isinstance(lr, Tensor):
            lr, src = lr._v, lr._b
        elif b.is_native(lr):
            src = b
        else:
            return float(lr)  # a Python value the schedule computed
        lr = _onto(lr, src, b, device)
        return lr if lr.dtype == dtype else b.xp.astype(lr, dtype)

    def _prepare(self, b, x, device, memo, like):
        """What the variables of ``x``'s backend, ``device`` and dtype share in one apply: (namespace,
        learning rate, ``_per_apply``'s values, weight decay times learning rate)."""
        xp = b.xp
        dtype = x.dtype
        d = b.dtype_of(x)
        if d.kind == "c":  # the step, learning rate and factors are real
            dtype = b.dtype_to_native(_dt.real_dtype(d))
        lr = self._learning_rate
        if callable(lr):
            lr = self._scheduled_lr(memo, b, device, dtype, like)
        else:  # the variable's value (in the variables' dtype), not the float of when it was traced
            v = self._lr_variable
            lr = _onto(v._v, v._b, b, device)
            if lr.dtype != dtype:
                lr = xp.astype(lr, dtype)
        it = self.iterations
        shared = self._per_apply(xp, _onto(it._v, it._b, b, device), dtype, lr)
        wd_lr = self.weight_decay * lr if self.weight_decay else None
        return xp, lr, shared, wd_lr

    def _per_apply(self, xp, iterations, dtype, learning_rate):
        """Values ``update_step`` shares across the variables of one dtype (``self._shared``), from
        ``iterations`` (a native int64 array) and the learning rate: native arrays in ``dtype``."""
        return None

    # ------------------------------------------------------------------ slots
    @property
    def variables(self) -> list[Variable]:
        """``iterations`` and every slot variable, in order of creation."""
        return [self.iterations] + list(self._slot_order)

    def _ensure_slots(self, var, created=None):
        """``var``'s slots, made on first use; with ``created`` (a list), a slot table just made is
        appended there for the caller to hand to a waiting restore, rather than handed now."""
        entry = self._slots.get(id(var))
        if entry is None:
            base = var.name.removesuffix(":0")
            base = base.replace("/", "_")
            slots = {}
            for s in self._slot_names_for(var):
                slot = Variable(
                    zeros_like(var) if s != "accumulator" else self._initial_accumulator(var),
                    trainable=False,
                    name=f"{self.name}/{base}_{s}",
                )
                slots[s] = slot
                self._slot_order.append(slot)
            entry = self._slots[id(var)] = (var, slots)
            if created is not None:
                created.append((var, slots))
            elif _DEFERRED_SLOTS:
                _restore_deferred_slots(self, var, slots)
        return entry[1]

    def _slot_names_for(self, var):
        return self._slot_names

    def _slot(self, var, name):
        return self._slots[id(var)][1][name]

    def _slots_by_variable(self):
        """``(variable, {slot name: slot Variable})`` for every variable this optimizer has slots for,
        in order of creation (what ``gt.train.Checkpoint`` saves beside each variable)."""
        return list(self._slots.values())

    def __getstate__(self):
        """The state to pickle or deep-copy: everything but what one apply caches (the namespace of
        the variables it updates, a module, and the values it shares)."""
        state = self.__dict__.copy()
        state.pop("_xp", None)
        state.pop("_shared", None)
        state.pop("_slots_lock", None)
        return state

    def __setstate__(self, state):
        """Unpickled or deep-copied: the slot table is re-keyed by the ids of the (copied) variables."""
        self.__dict__.update(state)
        self._slots_lock = threading.Lock()
        self._slots = {id(v): (v, slots) for v, slots in state["_slots"].values()}
        self._exclude_ids = {id(v): v for v in state["_exclude_ids"].values()}

    def _initial_accumulator(self, var):
        raise NotImplementedError

    def exclude_from_weight_decay(
        self, var_list: Iterable[Variable] | None = None, var_names: Iterable[str] | None = None
    ) -> None:
        """Variables (or variables whose names match one of ``var_names``, regular expressions searched
        for in the name as Keras: ``"bias"``, ``"bias:0$"``, ``"norm|bias"``) that weight decay skips."""
        self._exclude_ids.update((id(v), v) for v in var_list or ())
        names = tuple(var_names or ())
        for n in names:
            re.compile(n)  # (a malformed pattern is re.error here, not at the first apply)
        self._exclude_names = tuple(self._exclude_names) + names

    def _use_weight_decay(self, var):
        if id(var) in self._exclude_ids:
            return False
        return not any(re.search(n, var.name) for n in self._exclude_names)

    # ------------------------------------------------------------------ applying
    def apply_gradients(
        self,
        grads_and_vars: Iterable[tuple[TensorLike | None, Variable]],
        name: str | None = None,
        skip_gradients_aggregation: bool = False,
        **kwargs: Any,
    ) -> Variable:
        """Apply ``(gradient, variable)`` pairs: pairs whose gradient is ``None`` are skipped with a
        warning (all ``None`` is a ``ValueError``), as Keras.  Returns ``iterations``."""
        pairs = list(grads_and_vars)
        for k, p in enumerate(pairs):
            if not isinstance(p, (tuple, list)) or len(p) != 2:
                raise ValueError(
                    f"{type(self).__name__}.apply_gradients: expects (gradient, variable) "
                    f"pairs, such as zip(grads, variables); item {k} is {type(p).__name__} "
                    f"{_short(p)}"
                )
        grads = [g for g, _ in pairs]
        variables = [v for _, v in pairs]
        return self.apply(grads, variables)

    def apply(
        self, grads: Iterable[TensorLike | None], trainable_variables: Iterable[Variable] | None = None
    ) -> Variable:
        """Apply ``grads`` to ``trainable_variables`` (Keras 3's ``Optimizer.apply``)."""
        if trainable_variables is None:
            raise ValueError(
                f"{type(self).__name__}.apply: pass the variables to update, apply(grads, "
                "trainable_variables), one per gradient"
            )
        grads = list(grads)
        variables = list(trainable_variables)
        if len(grads) != len(variables):
            raise ValueError(f"got {len(grads)} gradients for {len(variables)} variables")
        for v in variables:
            if not isinstance(v, Variable):
                raise TypeError(
                    f"{type(self).__name__}.apply: optimizers update gt.Variable objects, got "
                    f"{type(v).__name__}; wrap the value in gt.Variable(...) (apply_gradients "
                    "takes (gradient, variable) pairs, in that order)"
                )
            dtype = v.dtype
            if dtype.is_floating:
                continue
            if dtype.is_complex and (not self._complex_ok or self.clipvalue is not None):
                # Adam's, RMSprop's and Adagrad's g * g of a complex g is not a square magnitude (the
                # steps were wrong, AMSGrad's NaN); clipping a complex number by value is undefined
                what = "clipvalue" if self._complex_ok else f"{type(self).__name__}'s update rule"
                raise ValueError(
                    f"{type(self).__name__}.apply: the variable {v.name!r} is {dtype.name}; {what} is defined "
                    "for real variables only. Keep the real and imaginary parts as two float variables "
                    "(PyTorch's view_as_real), or use SGD (without clipvalue; clipnorm clips |g|)"
                )
            if not dtype.is_complex:
                # (an integer step ``lr * g`` truncates to 0: SGD left the variable as it was, silently)
                raise ValueError(
                    f"{type(self).__name__}.apply: the variable {v.name!r} is {dtype.name}; optimizers "
                    "update floating-point or complex variables only (as TensorFlow's and PyTorch's). "
                    f"Make it one (gt.Variable(gt.cast(value, gt.float32))), or leave it out of the list"
                )
        missing = [v.name for g, v in zip(grads, variables) if g is None]
        kept = [(g, v) for g, v in zip(grads, variables) if g is not None]
        if not kept:
            raise ValueError(f"No gradients provided for any variable: {[v.name for v in variables]}.")
        if missing:
            warnings.warn(
                f"Gradients do not exist for variables {missing} when minimizing the loss. "
                "If you're using `model.compile()`, did you forget to provide a `loss` argument?",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        natives = [self._native_gradient(g, v) for g, v in kept]
        natives = self._clip(natives, [v for _, v in kept])
        # the variables, their slots, the step count and the learning rate are locked for the whole
        # apply: another thread's apply (or update of one of them) waits, and no update is lost
        created = []
        with self._slots_lock:
            updated = [self.iterations, self._lr_variable]
            for _, v in kept:
                updated.append(v)
                updated.extend(self._ensure_slots(v, created).values())
        if created and _DEFERRED_SLOTS:  # (a restore waits for them: assigned outside the lock above)
            for v, slots in created:
                _restore_deferred_slots(self, v, slots)
        with _holding_locks(updated):
            return self._apply_locked(kept, natives)

    def _apply_locked(self, kept, natives):
        groups, memo, of_var = {}, [], []
        for _, v in kept:
            b, x = v._b, v._v
            key = (b, x.dtype, b.device_of(x))
            group = groups.get(key)
            if group is None:
                group = groups[key] = self._prepare(b, x, key[2], memo, v)
            of_var.append(group)
        x = None  # (a reference to the last variable's value would keep its update from being in place)
        if self.weight_decay:
            for (_, v), group in zip(kept, of_var):
                if self._use_weight_decay(v):
                    v.assign_sub(_tensor(v._v * group[3], v))
        for (_, v), g, (xp, lr, values, _) in zip(kept, natives, of_var):
            self._xp, self._shared = xp, values
            self.update_step(g, v, lr)
            if v._constraint is not None:  # (as Keras: after the variable's update)
                v.assign(v._constraint(v))
        # drop the references (iterations is updated in place)
        groups = memo = of_var = group = self._shared = None
        it = self.iterations
        it.assign_add(_tensor(it._b.xp.ones_like(it._v), it))
        return it

    def minimize(
        self,
        loss: Tensor | Callable[[], Tensor],
        var_list: Sequence[Variable] | Callable[[], Sequence[Variable]],
        tape: GradientTape | None = None,
    ) -> Variable:
        """Compute the gradients of ``loss`` (a tensor recorded on ``tape``, or a callable taking no
        arguments) with respect to ``var_list`` and apply them."""
        if callable(var_list) and not isinstance(var_list, (list, tuple)):
            var_list = var_list()
        var_list = list(var_list)
        if callable(loss):
            with GradientTape() as new_tape:
                new_tape.watch(var_list)
                loss = loss()
            tape = new_tape
        elif tape is None:
            raise ValueError(f"`tape` is required when a `Tensor` loss is passed. Received: loss={loss!r}, tape=None.")
        grads = tape.gradient(loss, var_list)
        return self.apply_gradients(zip(grads, var_list))

    @staticmethod
    def _native_gradient(g, var):
        """The gradient as a native array of the variable's backend, shape and dtype."""
        if g.__class__ is Tensor and g._b is var._b:  # (the common case: a tape's gradient, as it is)
            v, x = g._v, var._v
            if v.shape == x.shape and v.dtype == x.dtype and var._b.device_of(v) == var._b.device_of(x):
                return v
        if isinstance(g, Tensor):
            if g._b is not var._b:
                raise ValueError(
                    f"apply_gradients: the gradient of {var.name!r} lives on "
                    f"backend {g._b.name!r} but the variable on {var._b.name!r}; compute the gradient on the "
                    f"variable's backend, or move it there with gt.asarray(grad, backend={var._b.name!r})"
                )
        else:
            g = convert_to_tensor(g, like=var)
        if tuple(g.shape) != tuple(var.shape):
            raise ValueError(f"the gradient of {var.name!r} has shape {g.shape}, the variable {var.shape}")
        v = g._v
        b = var._b
        if g.dtype != var.dtype:
            v = b.xp.astype(v, b.dtype_to_native(var.dtype))
        device = b.device_of(var._v)
        if b.device_of(v) != device:
            v = b.to_device(v, device)
        return v

    def _clip(self, grads, variables):
        """The native gradients clipped by value, then by norm: ``g * c / maximum(norm, c)`` (a
        factor of exactly 1 where the norm is at most ``c``)."""
        if self.clipvalue is not None:
            c = float(self.clipvalue)
            grads = [v._b.xp.clip(g, -c, c) for g, v in zip(grads, variables)]
        if self.clipnorm is not None:
            c = float(self.clipnorm)
            out = []
            for g, v in zip(grads, variables):
                xp = v._b.xp
                out.append(g * (c / xp.maximum(xp.sqrt(_sum_of_squares(g, v)), c)))
            grads = out
        if self.global_clipnorm is not None:
            c = float(self.global_clipnorm)
            b0 = variables[0]._b
            device0 = b0.device_of(grads[0])
            total = None
            for g, v in zip(grads, variables):
                s = _onto(_sum_of_squares(g, v), v._b, b0, device0)
                total = s if total is None else total + s
            scale = c / b0.xp.maximum(b0.xp.sqrt(total), c)
            out = []
            for g, v in zip(grads, variables):
                b = v._b
                f = _onto(scale, b0, b, b.device_of(g))
                out.append(g * (f if f.dtype == g.dtype else b.xp.astype(f, g.dtype)))
            grads = out
        return grads

    def update_step(self, gradient: Any, variable: Variable, learning_rate: Any) -> None:
        """Update ``variable`` in place from ``gradient`` at ``learning_rate``; each optimizer implements its rule
        here (Keras' ``update_step``)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers for update_step
    @staticmethod
    def _assign(var, native):
        var.assign(_tensor(native, var))

    @staticmethod
    def _assign_add(var, native):
        var.assign_add(_tensor(native, var))

    @staticmethod
    def _assign_sub(var, native):
        var.assign_sub(_tensor(native, var))

    @staticmethod
    def _descend(var, native, learning_rate):
        """``var -= native * learning_rate`` as one step (TensorFlow's ``ResourceApplyGradientDescent``):
        in place with the backend's fused kernel where it has one (PyTorch's ``addcmul_``: no product
        allocated), else the product and the difference."""
        var._update("subtract", _tensor(native, var), "assign_sub", learning_rate)

    def get_config(self) -> dict[str, Any]:
        """The hyperparameters, as a dict (Keras' ``get_config``; a schedule in Keras' form, ``{"class_name":
        ..., "config": ...}``): ``type(opt).from_config(opt.get_config())``, or ``type(opt)(**opt.get_config())``,
        makes a fresh optimizer with the same settings."""
        lr = self._learning_rate
        return {
            "name": self.name,
            # (Keras' form of a schedule: what ``learning_rate=`` and ``from_config`` take back)
            "learning_rate": _serialize_schedule(lr) if isinstance(lr, LearningRateSchedule) else lr,
            "weight_decay": self.weight_decay,
            "clipnorm": self.clipnorm,
            "clipvalue": self.clipvalue,
            "global_clipnorm": self.global_clipnorm,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Optimizer:
        """An optimizer of ``get_config``'s dict (Keras' ``from_config``)."""
        return cls(**config)

    def __repr__(self) -> str:
        return f"<gt.optimizers.{type(self).__name__} name={self.name!r} iterations={int(self.iterations)}>"


#: slot values waiting for their slots (``gt.train``'s deferred restoration): optimizer ->
#: {id(variable): (weak reference to the variable, callback(slots))}; a restored optimizer creates
#: its slots on its first apply, and they take the checkpoint's values then
_DEFERRED_SLOTS = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def _holding_locks(variables: Iterable[Variable]) -> Iterator[None]:
    """The locks of ``variables``, held together (taken in the one order every holder of several
    takes them, ``Variable._locks``): no other thread's update of any of them (an apply, a compiled
    step, an ``assign``) runs meanwhile, so what is read or written inside is one state."""
    locks = Variable._locks(variables)
    for lock in locks:
        lock.acquire()
    try:
        yield
    finally:
        for lock in reversed(locks):
            lock.release()


def _restore_deferred_slots(optimizer, var, slots):
    pending = _DEFERRED_SLOTS.get(optimizer)
    if not pending:
        return
    entry = pending.get(id(var))
    if entry is None or entry[0]() is not var:
        return
    del pending[id(var)]
    if not pending:
        _DEFERRED_SLOTS.pop(optimizer, None)
    entry[1](slots)


def _sum_of_squares(g, var):
    """``sum(|g|^2)`` of the native gradient of ``var`` (real for a complex one: ``g * g`` is not)."""
    xp = var._b.xp
    return xp.sum(xp.real(g * xp.conj(g)) if var.dtype.is_complex else g * g)


def _check_range(who, name, value, low, high, high_open=False, why=""):
    """``value`` as a float, or a ValueError (Keras' wording) when it lies outside ``[low, high]``
    (``[low, high)`` with ``high_open``; ``high`` None: no upper bound)."""
    if isinstance(value, (bool, str)) or not hasattr(value, "__float__"):
        raise ValueError(f"{who}: `{name}` must be a float. Received: {name}={value!r}")
    value = float(value)  # (a NumPy scalar or a 0-d Tensor too)
    above = high is not None and (value >= high if high_open else value > high)
    if not value >= low or above:  # (NaN fails the first test)
        span = f">= {low}" if high is None else f"in [{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{who}: `{name}` must be {span}. Received: {name}={value}{why}")
    return value


def _short(o):
    r = repr(o)
    return r if len(r) <= 80 else r[:77] + "..."


def _unsupported(what):
    raise NotImplementedError(f"the Keras optimizer option {what!r} is not supported by gradtape")


# ---------------------------------------------------------------------------------------- optimizers
class SGD(Optimizer):
    """Gradient descent with optional (Nesterov) momentum, as Keras 3's ``SGD``."""

    _complex_ok = True  # (PyTorch's steps on complex parameters)

    def __init__(
        self,
        learning_rate: LearningRate = 0.01,
        momentum: float = 0.0,
        nesterov: bool = False,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
        name: str | None = "SGD",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            learning_rate=learning_rate,
            weight_decay=weight_decay,
            clipnorm=clipnorm,
            clipvalue=clipvalue,
            global_clipnorm=global_clipnorm,
            name=name,
            **kwargs,
        )
        if not isinstance(momentum, (int, float)) or momentum < 0 or momentum > 1:
            raise ValueError("`momentum` must be a float between [0, 1].")
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)

    def _slot_names_for(self, var):
        return ("momentum",) if self.momentum != 0 else ()

    def update_step(self, gradient: Any, variable: Variable, learning_rate: Any) -> None:
        lr = learning_rate
        if self.momentum != 0:
            m_var = self._slot(variable, "momentum")
            m = m_var._v * self.momentum - gradient * lr
            self._assign(m_var, m)
            if self.nesterov:
                self._assign_add(variable, m * self.momentum - gradient * lr)
            else:
                self._assign_add(variable, m)
        else:
            self._descend(variable, gradient, lr)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "momentum": self.momentum, "nesterov": self.nesterov}


class Adam(Optimizer):
    """Adam (optionally AMSGrad), as Keras 3's ``Adam``."""

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        amsgrad: bool = False,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
        name: str | None = "adam",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            learning_rate=learning_rate,
            weight_decay=weight_decay,
            clipnorm=clipnorm,
            clipvalue=clipvalue,
            global_clipnorm=global_clipnorm,
            name=name,
            **kwargs,
        )
        # beta = 1 makes 1 - beta^t zero: beta_1 a NaN step, beta_2 no step at all (PyTorch refuses both)
        who = type(self).__name__
        self.beta_1 = _check_range(who, "beta_1", beta_1, 0.0, 1.0, True, " (1 - beta_1**t would be 0)")
        self.beta_2 = _check_range(who, "beta_2", beta_2, 0.0, 1.0, True, " (1 - beta_2**t would be 0)")
        self.epsilon, self.amsgrad = _check_range(who, "epsilon", epsilon, 0.0, None), bool(amsgrad)

    def _slot_names_for(self, var):
        return ("momentum", "velocity", "velocity_hat") if self.amsgrad else ("momentum", "velocity")

    def _per_apply(self, xp, iterations, dtype, learning_rate):
        """``alpha = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)``, ``t = iterations + 1`` in ``dtype``; each
        ``1 - beta^t`` as ``-expm1(t log(beta))``, which float32 computes without cancellation."""
        t = xp.astype(iterations + 1, dtype)
        return xp.sqrt(-xp.expm1(t * _log(self.beta_2))) * -learning_rate / xp.expm1(t * _log(self.beta_1))

    def update_step(self, gradient: Any, variable: Variable, learning_rate: Any) -> None:
        xp = self._xp
        alpha = self._shared
        m_var = self._slot(variable, "momentum")
        v_var = self._slot(variable, "velocity")
        self._assign_add(m_var, (gradient - m_var._v) * (1 - self.beta_1))
        self._assign_add(v_var, (gradient * gradient - v_var._v) * (1 - self.beta_2))
        v = v_var._v
        if self.amsgrad:
            vh_var = self._slot(variable, "velocity_hat")
            self._assign(vh_var, xp.maximum(vh_var._v, v))
            v = vh_var._v
        self._assign_sub(variable, (m_var._v * alpha) / (xp.sqrt(v) + self.epsilon))

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "amsgrad": self.amsgrad,
        }


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.004), as Keras 3's ``AdamW``."""

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        weight_decay: float | None = 0.004,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        amsgrad: bool = False,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
        name: str | None = "adamw",
        **kwargs: Any,
    ) -> None:
        if weight_decay is None:
            raise ValueError("Argument `weight_decay` must be a float. Received: weight_decay=None")
        super().__init__(
            learning_rate=learning_rate,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            amsgrad=amsgrad,
            weight_decay=weight_decay,
            clipnorm=clipnorm,
            clipvalue=clipvalue,
            global_clipnorm=global_clipnorm,
            name=name,
            **kwargs,
        )


class RMSprop(Optimizer):
    """RMSprop (optionally centered, with momentum), as Keras 3's ``RMSprop``."""

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        rho: float = 0.9,
        momentum: float = 0.0,
        epsilon: float = 1e-7,
        centered: bool = False,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
        name: str | None = "rmsprop",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            learning_rate=learning_rate,
            weight_decay=weight_decay,
            clipnorm=clipnorm,
            clipvalue=clipvalue,
            global_clipnorm=global_clipnorm,
            name=name,
            **kwargs,
        )
        # rho > 1 makes the mean square negative (a NaN step); a negative momentum was dropped
        self.rho = _check_range("RMSprop", "rho", rho, 0.0, 1.0)
        self.momentum = _check_range("RMSprop", "momentum", momentum, 0.0, None)
        self.epsilon, self.centered = _check_range("RMSprop", "epsilon", epsilon, 0.0, None), bool(centered)

    def _slot_names_for(self, var):
        names = ["velocity"]
        if self.momentum > 0:
            names.append("momentum")
        if self.centered:
            names.append("average_gradient")
        return tuple(names)

    def update_step(self, gradient: Any, variable: Variable, learning_rate: Any) -> None:
        xp = self._xp
        rho = self.rho
        vel = self._slot(variable, "velocity")
        self._assign(vel, vel._v * rho + (gradient * gradient) * (1 - rho))
        if self.centered:
            avg = self._slot(variable, "average_gradient")
            self._assign(avg, avg._v * rho + gradient * (1 - rho))
            denominator = vel._v - avg._v * avg._v + self.epsilon
        else:
            denominator = vel._v + self.epsilon
        increment = (gradient * learning_rate) / xp.sqrt(denominator)
        if self.momentum > 0:
            mom = self._slot(variable, "momentum")
            self._assign(mom, mom._v * self.momentum + increment)
            self._assign_sub(variable, mom._v)
        else:
            self._assign_sub(variable, increment)

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "rho": self.rho,
            "momentum": self.momentum,
            "epsilon": self.epsilon,
            "centered": self.centered,
        }


class Adagrad(Optimizer):
    """Adagrad, as Keras 3's ``Adagrad`` (accumulators start at ``initial_accumulator_value``)."""

    _slot_names = ("accumulator",)

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        initial_accumulator_value: float = 0.1,
        epsilon: float = 1e-7,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
        name: str | None = "adagrad",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            learning_rate=learning_rate,
            weight_decay=weight_decay,
            clipnorm=clipnorm,
            clipvalue=clipvalue,
            global_clipnorm=global_clipnorm,
            name=name,
            **kwargs,
        )
        self.initial_accumulator_value = _check_range(
            "Adagrad", "initial_accumulator_value", initial_accumulator_value, 0.0, None
        )
        self.epsilon = _check_range("Adagrad", "epsilon", epsilon, 0.0, None)

    def _initial_accumulator(self, var):
        return full_like(var, self.initial_accumulator_value)

    def update_step(self, gradient: Any, variable: Variable, learning_rate: Any) -> None:
        acc = self._slot(variable, "accumulator")
        self._assign_add(acc, gradient * gradient)
        self._assign_sub(variable, (gradient * learning_rate) / self._xp.sqrt(acc._v + self.epsilon))

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "initial_accumulator_value": self.initial_accumulator_value,
            "epsilon": self.epsilon,
        }


_BY_NAME = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop, "adagrad": Adagrad}


def get(identifier: str | Optimizer) -> Optimizer:
    """An optimizer from a name (``"adam"``, ``"sgd"``, ...) with default settings, or an Optimizer."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"Could not interpret optimizer identifier: {identifier!r}")
