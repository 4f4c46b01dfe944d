"""``Tensor`` and ``Variable``.

A Tensor wraps one native array of its backend (``_v``), the backend (``_b``) and its identity on
the tape (``_id``).  Its native value is never mutated: ``x[i] = v`` and ``x += 1`` compute a new
value through a recorded op and the object takes the new value and a new identity.
Every Python operator, and every method that computes (``.T``, ``.mT``, ``to_device``, ``copy``,
``t[k] = v``, ``Variable.value``), calls an op of the namespace: they are bound in
``gradtape/ops/operators.py``, above the ops, and so are the few ops this module's conversions use
(:data:`ops`); this module imports no op.
"""

from __future__ import annotations

import itertools
import numbers
import os
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from sys import getrefcount as _getrefcount
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, overload

import numpy as np

from gradtape.core import config as _config
from gradtape.core import backend_registry as _backends
from gradtape.core import dtypes as _dt
from gradtape.core.recording_state import ACTIVE_TAPES, per_thread, on_variable_created

__all__ = [
    "GradientLeakError",
    "GradientLeakWarning",
    "Tensor",
    "TensorShape",
    "Variable",
    "constant",
    "convert_to_tensor",
    "is_tensor",
    "LIVE_VARIABLES",
    "Nested",
    "ShapeLike",
    "TensorLike",
    "check_leak",
    "compute",
    "user_site",
    "user_stacklevel",
    "lift",
    "new_tensor",
    "next_id",
    "ops",
    "persist",
    "wrap",
]

#: What converts to a Tensor: a Tensor, a Python scalar, a nested list, a NumPy array or a native array
#: of any backend (``Any``: the backends' arrays share no type).
TensorLike: TypeAlias = Any
#: A nested structure (tuples, lists, dicts, namedtuples) of Tensors, as TensorFlow's ``tf.nest``.
Nested: TypeAlias = Any
#: A shape: a sequence of ints (a tuple, a list, a Tensor's ``shape``), or one int for one axis.
ShapeLike: TypeAlias = "Sequence[int] | int"

_ids = itertools.count(1)
next_id = _ids.__next__


class _OpsForTensors:
    """The ops this module's conversions call (``astype``, ``identity``, ``stack``, ``reshape``,
    ``broadcast_to``), set by ``gradtape/ops/operators.py`` once the op chapters exist: the tensor sits
    below the ops, which are built on it."""

    def __getattr__(self, name):
        raise RuntimeError(f"gradtape's ops are not bound yet (Tensor conversion needs {name!r}); import gradtape")


ops = _OpsForTensors()


class GradientLeakWarning(UserWarning):
    """A recorded tensor was converted out of gradtape (``np.asarray(t)``, ``float(t)``,
    ``t.numpy()``...): whatever is computed from the converted value is invisible to the tape, so
    the gradient through it is lost.  ``gt.config.gradient_leak = "raise"`` makes it an error."""


class GradientLeakError(RuntimeError):
    """The error form of :class:`GradientLeakWarning` (``gt.config.gradient_leak = "raise"``)."""


# the gradtape package's folder (every subfolder): a leak is reported at the first frame outside it
_OWN_DIRS = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)
_LIBRARY_DIRS = ("site-packages" + os.sep, "dist-packages" + os.sep, os.path.dirname(os.__file__) + os.sep)


def _own(f):
    """Whether frame ``f`` runs gradtape's code: a module of the package or code it generated."""
    name = f.f_code.co_filename
    return name.startswith("<gradtape") or os.path.abspath(name).startswith(_OWN_DIRS)


def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` in this function's caller that names the first frame
    outside gradtape (its generated code included): the user's line, however many of gradtape's frames
    lie between (a number fixed in the code named ``sys:1`` where a call took a longer path)."""
    f: types.FrameType | None = sys._getframe(1)
    level = 1
    while f is not None and _own(f):
        f, level = f.f_back, level + 1
    return level


def _call_sites():
    """The first frame outside gradtape (where the conversion happened) and, when that one is in an
    installed library, the first frame outside every library (the user's line that called it)."""
    f = sys._getframe(2)
    while f is not None and _own(f):
        f = f.f_back
    if f is None:
        return None, None
    user = f
    while user is not None and any(d in os.path.abspath(user.f_code.co_filename) for d in _LIBRARY_DIRS):
        user = user.f_back
    return f, (user if user is not f else None)


def user_site() -> str:
    """``file:line`` of the user's line that called into gradtape, or ``"?"``: for messages that point at
    the user's code.  Where an installed library made the call (scikit-learn's ``normalize`` branching on
    a value inside a ``gt.function``), the user's line that called the library, then the library's
    function and line: the user's line alone has no ``if`` to find."""
    site, user = _call_sites()
    if site is None:
        return "?"
    if user is None:
        return f"{site.f_code.co_filename}:{site.f_lineno}"
    return (
        f"{user.f_code.co_filename}:{user.f_lineno}, inside {_function_of(site)} at "
        f"{site.f_code.co_filename}:{site.f_lineno}"
    )


def _function_of(frame):
    """``module.function`` of ``frame`` (a library's, for messages that name where it called gradtape)."""
    return f"{frame.f_globals.get('__name__', '?')}.{frame.f_code.co_name}"


def _connected(t):
    """Whether a recording tape of this thread connects ``t`` to a watched source (a trainable
    Variable counts where a tape watches the variables it reads); the tapes below one that hides them (a
    custom gradient's body: its gradient is the user's) do not count."""
    tapes = per_thread.tapes
    tid = t._id
    for k in range(len(tapes) - 1, -1, -1):
        rec = tapes[k]
        if tid in rec.watched or (t._is_var and t._trainable and rec.watch_accessed):
            return True
        if rec.hides_outer:
            return False
    return False


def check_leak(t: Tensor, how: str) -> None:
    """Warn (or raise, per ``gt.config.gradient_leak``) when ``how`` converts a tensor that a
    recording tape connects to a watched source out of gradtape."""
    if not ACTIVE_TAPES[0] or not _connected(t):
        return
    site, user = _call_sites()
    if user is not None:  # inside a library: name its function, then the user's line
        where = f" inside {_function_of(site)}, called from {user.f_code.co_filename}:{user.f_lineno},"
    elif site is not None:
        where = f" at {site.f_code.co_filename}:{site.f_lineno}"
    else:
        where = ""
    msg = (
        f"{how}{where} converts a tensor that a recording GradientTape connects to a watched source "
        f"(backend {t._b.name!r}, shape {t.shape}) out of gradtape: the gradient through the converted "
        "value is lost. Compute with gradtape ops (gt.* or x.__array_namespace__()) to keep it, or "
        "convert gt.stop_gradient(x) to cut it on purpose"
    )
    if _config.config.gradient_leak == "raise":
        raise GradientLeakError(msg + " (this is an error because gt.config.gradient_leak is 'raise').")
    msg += (
        " (no warning then), or set gt.config.gradient_leak = 'raise' (GRADTAPE_GRADIENT_LEAK=raise) to "
        "stop at the leak."
    )
    frame = user or site
    if frame is None:
        warnings.warn(msg, GradientLeakWarning, stacklevel=3)
        return
    g = frame.f_globals
    # once per call site (Python's 'default' action keyed on the caller's own registry)
    warnings.warn_explicit(
        msg,
        GradientLeakWarning,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=g.get("__name__", "<unknown>"),
        registry=g.setdefault("__warningregistry__", {}),
    )


class Device(str):
    """A tensor's device: its backend-neutral name (``'cpu'``, ``'cuda:0'``, ``'gpu:0'``; it compares
    equal to that string) that also remembers the tensor's backend, so that Array API code such as
    ``xp.zeros(n, device=x.device)`` creates on ``x``'s backend whichever backend is active."""

    backend = None


class TensorShape(tuple[int, ...]):
    """A tensor's shape: the tuple of ints the Array API standard requires (``x.shape == (2, 3)``,
    ``x.shape[0]``, unpacking), with TensorFlow's ``TensorShape`` methods that TF code calls on it
    (``as_list()``, ``rank``, ``num_elements()``).  A length that is not known (dask's after a
    data-dependent op: NaN) is ``None`` in ``as_list()``, as TF's unknown dimensions."""

    __slots__ = ()

    def as_list(self) -> list[int | None]:
        """The sizes as a list (``None`` for one not known)."""
        return [None if n is None or n != n else int(n) for n in self]

    @property
    def rank(self) -> int:
        """The number of axes (``tf.TensorShape.rank``)."""
        return len(self)

    ndims = rank

    def num_elements(self) -> int | None:
        """The number of elements (1 for a 0-d shape); ``None`` where a size is not known."""
        total = 1
        for n in self.as_list():
            if n is None:
                return None
            total *= n
        return total

    def is_fully_defined(self) -> bool:
        """Whether every size is known."""
        return all(n is not None for n in self.as_list())


class Tensor:
    """An immutable array of one backend, differentiable by :class:`gradtape.GradientTape`."""

    __slots__ = ("_v", "_b", "_id", "__weakref__")
    _is_var = False
    __array_priority__ = 1000

    if TYPE_CHECKING:
        # Bound at import by gradtape/ops/operators.py (above the ops, which are built on Tensor);
        # declared here for type checkers only: this block does not run.
        _v: Any
        _b: Any
        _id: int

        def __add__(self, other: TensorLike, /) -> Tensor: ...
        def __radd__(self, other: TensorLike, /) -> Tensor: ...
        def __iadd__(self, other: TensorLike, /) -> Tensor: ...
        def __sub__(self, other: TensorLike, /) -> Tensor: ...
        def __rsub__(self, other: TensorLike, /) -> Tensor: ...
        def __isub__(self, other: TensorLike, /) -> Tensor: ...
        def __mul__(self, other: TensorLike, /) -> Tensor: ...
        def __rmul__(self, other: TensorLike, /) -> Tensor: ...
        def __imul__(self, other: TensorLike, /) -> Tensor: ...
        def __truediv__(self, other: TensorLike, /) -> Tensor: ...
        def __rtruediv__(self, other: TensorLike, /) -> Tensor: ...
        def __itruediv__(self, other: TensorLike, /) -> Tensor: ...
        def __floordiv__(self, other: TensorLike, /) -> Tensor: ...
        def __rfloordiv__(self, other: TensorLike, /) -> Tensor: ...
        def __ifloordiv__(self, other: TensorLike, /) -> Tensor: ...
        def __mod__(self, other: TensorLike, /) -> Tensor: ...
        def __rmod__(self, other: TensorLike, /) -> Tensor: ...
        def __divmod__(self, other: TensorLike, /) -> tuple[Tensor, Tensor]: ...
        def __rdivmod__(self, other: TensorLike, /) -> tuple[Tensor, Tensor]: ...
        def __imod__(self, other: TensorLike, /) -> Tensor: ...
        def __pow__(self, other: TensorLike, /) -> Tensor: ...
        def __rpow__(self, other: TensorLike, /) -> Tensor: ...
        def __ipow__(self, other: TensorLike, /) -> Tensor: ...
        def __matmul__(self, other: TensorLike, /) -> Tensor: ...
        def __rmatmul__(self, other: TensorLike, /) -> Tensor: ...
        def __imatmul__(self, other: TensorLike, /) -> Tensor: ...
        def __and__(self, other: TensorLike, /) -> Tensor: ...
        def __rand__(self, other: TensorLike, /) -> Tensor: ...
        def __iand__(self, other: TensorLike, /) -> Tensor: ...
        def __or__(self, other: TensorLike, /) -> Tensor: ...
        def __ror__(self, other: TensorLike, /) -> Tensor: ...
        def __ior__(self, other: TensorLike, /) -> Tensor: ...
        def __xor__(self, other: TensorLike, /) -> Tensor: ...
        def __rxor__(self, other: TensorLike, /) -> Tensor: ...
        def __ixor__(self, other: TensorLike, /) -> Tensor: ...
        def __lshift__(self, other: TensorLike, /) -> Tensor: ...
        def __rlshift__(self, other: TensorLike, /) -> Tensor: ...
        def __ilshift__(self, other: TensorLike, /) -> Tensor: ...
        def __rshift__(self, other: TensorLike, /) -> Tensor: ...
        def __rrshift__(self, other: TensorLike, /) -> Tensor: ...
        def __irshift__(self, other: TensorLike, /) -> Tensor: ...
        def __eq__(self, other: object, /) -> Tensor: ...  # type: ignore[override]
        def __ne__(self, other: object, /) -> Tensor: ...  # type: ignore[override]
        def __lt__(self, other: TensorLike, /) -> Tensor: ...
        def __le__(self, other: TensorLike, /) -> Tensor: ...
        def __gt__(self, other: TensorLike, /) -> Tensor: ...
        def __ge__(self, other: TensorLike, /) -> Tensor: ...
        def __neg__(self) -> Tensor: ...
        def __pos__(self) -> Tensor: ...
        def __abs__(self) -> Tensor: ...
        def __invert__(self) -> Tensor: ...
        def __getitem__(self, key: Any, /) -> Tensor: ...
        def __setitem__(self, key: Any, value: TensorLike, /) -> None: ...
        def __copy__(self) -> Tensor: ...
        def __deepcopy__(self, memo: Any, /) -> Tensor: ...
        def to_device(self, device: Any, /, *, stream: Any = None) -> Tensor:
            """A copy on ``device``, recorded so gradients flow back."""

        @property
        def T(self) -> Tensor:
            """The transpose of a 2-D tensor; recorded."""

        @property
        def mT(self) -> Tensor:
            """The transpose of the last two axes; recorded."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """NumPy's operators on a NumPy array and a Tensor (``x * tensor``, ``x < tensor``) give
        gradtape's answer, a recorded Tensor, as the Tensor's own operator would; any other ufunc
        call (``np.sin(tensor)``) is a ``TypeError`` naming the gradtape function to call instead."""
        return _numpy_ufunc(self, ufunc, method, inputs, kwargs)

    def __init__(self, value: TensorLike, dtype: _dt.DTypeLike | None = None, device: Any = None) -> None:
        t = convert_to_tensor(value, dtype=dtype, device=device)
        self._v, self._b, self._id = t._v, t._b, next_id()

    # ------------------------------------------------------------------ properties
    @property
    def shape(self) -> TensorShape:
        """The shape, a tuple of Python ints (a :class:`TensorShape`: also ``as_list()``, ``rank``,
        ``num_elements()``, as TensorFlow's)."""
        return TensorShape(self._v.shape)

    @property
    def dtype(self) -> _dt.DType:
        """The gradtape dtype (``gt.float32``, ...), the same on every backend."""
        return self._b.dtype_of(self._v)

    @property
    def device(self) -> Device:
        """The device holding the values, as a backend-neutral string (``"cpu"``, ``"cuda:0"``)."""
        b = self._b
        d = Device(b.device_str(b.device_of(self._v)))
        d.backend = b
        return d

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self._v.shape)

    @property
    def size(self) -> int:
        """The number of elements (the product of the shape)."""
        n = 1
        for s in self._v.shape:
            n *= int(s)
        return n

    @property
    def backend(self) -> str:
        """Name of the backend this tensor lives on."""
        return self._b.name

    @property
    def native(self) -> Any:
        """The raw backend array (no copy).  Do not modify it in place.  What is computed from it is
        outside the tape: warns ``GradientLeakWarning`` while a recording tape connects this tensor to
        a watched source (wrap library calls in ``gt.custom_gradient`` to keep the gradient)."""
        if ACTIVE_TAPES[0]:
            check_leak(self, "Tensor.native")
        return self._v

    # ------------------------------------------------------------------ conversion
    def numpy(self) -> np.ndarray:
        """A NumPy copy of the value (outside the tape: warns ``GradientLeakWarning`` while a
        recording tape connects this tensor to a watched source)."""
        if ACTIVE_TAPES[0]:
            check_leak(self, "Tensor.numpy()")
        return np.array(self._b.to_numpy(self._v), copy=True)

    def compute(self) -> np.ndarray:
        """The value, computed: a NumPy array.  On a lazy backend (dask) this runs the graph behind
        the tensor (``gt.compute(a, b)`` computes several in one pass); elsewhere it is ``numpy()``."""
        return self.numpy()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if ACTIVE_TAPES[0]:
            check_leak(self, "np.asarray(tensor) (Tensor.__array__)")
        a = self._b.to_numpy(self._v)
        return np.asarray(a, dtype=dtype) if dtype is not None else np.asarray(a)

    def tolist(self) -> Any:
        """The value as (nested) Python scalars, as ``numpy.ndarray.tolist``."""
        if ACTIVE_TAPES[0]:
            check_leak(self, "Tensor.tolist()")
        return np.asarray(self._b.to_numpy(self._v)).tolist()

    def __array_namespace__(self, *, api_version: str | None = None) -> Any:
        if api_version is not None and api_version not in ("2021.12", "2022.12", "2023.12", "2024.12", "2025.12"):
            raise ValueError(
                f"gradtape implements the Array API standard 2025.12 (and the earlier versions), not {api_version!r}"
            )
        return sys.modules["gradtape"]

    def __dlpack__(
        self, /, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: bool | None = None
    ) -> Any:
        if ACTIVE_TAPES[0]:
            check_leak(self, "Tensor.__dlpack__() (from_dlpack of another library)")
        kwargs = {
            k: v
            for k, v in (("stream", stream), ("max_version", max_version), ("dl_device", dl_device), ("copy", copy))
            if v is not None
        }
        return self._exported().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[Any, int]:
        return self._exported().__dlpack_device__()

    def _exported(self) -> Any:
        """What DLPack exports: the native array, or (a lazy backend's, which has no buffer) its value."""
        v = self._v
        return v if hasattr(v, "__dlpack__") else self._b.to_numpy(v)

    def _scalar(self, kind: Callable[[Any], Any]) -> Any:
        if self._b.stand_ins:  # a stand-in (inside gt.function) raises, naming the conversion
            kind(self._v)
        if self.size != 1:
            raise TypeError(
                f"only a tensor of one element converts to a Python {kind.__name__} (this one has shape {self.shape})"
            )
        return kind(self._b.to_numpy(self._v).reshape(()).item())

    def __bool__(self) -> bool:
        return self._scalar(bool)

    def __int__(self) -> int:
        if ACTIVE_TAPES[0]:
            check_leak(self, "int(tensor)")
        return self._scalar(int)

    def __float__(self) -> float:
        if ACTIVE_TAPES[0]:
            check_leak(self, "float(tensor)")
        return self._scalar(float)

    def __complex__(self) -> complex:
        if ACTIVE_TAPES[0]:
            check_leak(self, "complex(tensor)")
        return self._scalar(complex)

    def __index__(self) -> int:
        if not self.dtype.is_integer:
            raise TypeError(f"only integer tensors can be used as an index, not {self.dtype}")
        return self._scalar(int)

    def __len__(self) -> int:
        if not self._v.shape:
            raise TypeError("len() of a 0-d tensor")
        return int(self._v.shape[0])

    def __iter__(self) -> Iterator[Tensor]:
        if not self._v.shape:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(int(self._v.shape[0])):
            yield self[i]

    __hash__ = object.__hash__

    def ref(self) -> _Ref:
        """A hashable reference to this object (as ``tf.Tensor.ref``)."""
        return _Ref(self)

    # ------------------------------------------------------------------ display
    def __repr__(self) -> str:
        b = self._b
        val = "<traced>" if b.stand_ins else _format_value(b.to_numpy(self._v))
        return f"gt.Tensor({val}, shape={self.shape}, dtype={self.dtype}, backend={b.name}, device={self.device})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if spec and self.size == 1:
            return format(self._scalar(float) if not self.dtype.is_complex else self._scalar(complex), spec)
        return str(self) if not spec else format(str(self), spec)

    # ------------------------------------------------------------------ functional updates
    def _become(self, new: Tensor) -> Tensor:
        """Take ``new``'s value and identity (used by __setitem__ and in-place operators)."""
        self._v, self._b, self._id = new._v, new._b, new._id
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (np.array(self._b.to_numpy(self._v), copy=True), self._b.name, str(self.device)))


# NumPy's operator ufuncs -> (the Tensor's operator, its reflected form): what ``x <op> tensor`` means
_UFUNC_OPERATORS = {
    "add": ("__add__", "__radd__"),
    "subtract": ("__sub__", "__rsub__"),
    "multiply": ("__mul__", "__rmul__"),
    "divide": ("__truediv__", "__rtruediv__"),
    "true_divide": ("__truediv__", "__rtruediv__"),
    "floor_divide": ("__floordiv__", "__rfloordiv__"),
    "remainder": ("__mod__", "__rmod__"),
    "power": ("__pow__", "__rpow__"),
    "matmul": ("__matmul__", "__rmatmul__"),
    "bitwise_and": ("__and__", "__rand__"),
    "bitwise_or": ("__or__", "__ror__"),
    "bitwise_xor": ("__xor__", "__rxor__"),
    "left_shift": ("__lshift__", "__rlshift__"),
    "right_shift": ("__rshift__", "__rrshift__"),
    "equal": ("__eq__", "__eq__"),
    "not_equal": ("__ne__", "__ne__"),
    "less": ("__lt__", "__gt__"),
    "less_equal": ("__le__", "__ge__"),
    "greater": ("__gt__", "__lt__"),
    "greater_equal": ("__ge__", "__le__"),
}

# NumPy's ufunc names that gradtape spells differently (the Array API's names)
_UFUNC_NAMES = {
    "absolute": "abs",
    "fabs": "abs",
    "arccos": "acos",
    "arccosh": "acosh",
    "arcsin": "asin",
    "arcsinh": "asinh",
    "arctan": "atan",
    "arctan2": "atan2",
    "arctanh": "atanh",
    "conjugate": "conj",
    "invert": "bitwise_invert",
    "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift",
    "power": "pow",
    "float_power": "pow",
    "true_divide": "divide",
    "rint": "round",
    "mod": "remainder",
}


# a ufunc's method -> the gradtape function that computes it
_UFUNC_METHODS = {
    ("add", "reduce"): "sum",
    ("multiply", "reduce"): "prod",
    ("maximum", "reduce"): "max",
    ("minimum", "reduce"): "min",
    ("add", "accumulate"): "cumulative_sum",
    ("multiply", "accumulate"): "cumulative_prod",
}


def _numpy_ufunc(t, ufunc, method, inputs, kwargs):
    """``Tensor.__array_ufunc__``: NumPy operators between NumPy values and ``t`` run as the
    Tensor's operators (so ``x * tensor`` works as it did when NumPy deferred to them); every
    other ufunc use raises a ``TypeError`` that names the gradtape function to use."""
    name = getattr(ufunc, "__name__", str(ufunc))
    ops_ = _UFUNC_OPERATORS.get(name)
    if ops_ is not None and method == "__call__" and not kwargs and len(inputs) == 2:
        a, b = inputs
        if a is t:
            return getattr(t, ops_[0])(b)
        if b is t and not isinstance(a, Tensor):
            return getattr(t, ops_[1])(a)
    gt = sys.modules["gradtape"]
    gname = _UFUNC_METHODS.get((name, method)) or _UFUNC_NAMES.get(name, name)
    if callable(getattr(gt, gname, None)):
        hint = f"call gt.{gname}(...) instead, which computes on the tensor's backend and records the gradient"
    elif callable(getattr(getattr(gt, "special", None), gname, None)):
        hint = f"call gt.special.{gname}(...) instead, which computes on the tensor's backend and records the gradient"
    else:
        hint = (
            f"gradtape has no {gname!r}: compose it from gradtape ops (gt.*), or convert with "
            "np.asarray(tensor) first, which cuts the gradient"
        )
    call = f"np.{name}" if getattr(np, name, None) is ufunc else f"the ufunc {name}"
    if method != "__call__":
        call += f".{method}"
    if "out" in kwargs:
        call += " with out= (an in-place NumPy update such as array += tensor)"
        hint = "write array = array + tensor (a gradtape Tensor) or convert with np.asarray(tensor) first"
    raise TypeError(
        f"NumPy ufuncs do not run on gradtape tensors: {call} got a gt.{type(t).__name__} "
        f"(backend {t._b.name!r}); {hint}"
    )


def _format_value(a, prefix="gt.Tensor("):
    a = np.asarray(a)
    if a.ndim == 0:
        return str(a[()])
    return np.array2string(a, separator=", ", threshold=100, prefix=prefix)


def _lazy_groups(tensors):
    """Positions of the tensors grouped by backend, in order."""
    groups: dict[Any, list[int]] = {}
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"gt.compute / gt.persist take gradtape tensors, not {type(t).__name__} (argument {i})")
        groups.setdefault(t._b, []).append(i)
    return groups


def compute(*tensors: Tensor) -> tuple[np.ndarray, ...]:
    """The values of ``tensors`` as NumPy arrays, computed together: on a lazy backend (dask) in one
    pass, so the intermediates they share (a forward value a loss and its gradients both read) are
    computed once.  ``gt.compute(loss, *grads)``; elsewhere each is ``numpy()``."""
    out: list[Any] = [None] * len(tensors)
    for b, idx in _lazy_groups(tensors).items():
        if ACTIVE_TAPES[0]:
            for i in idx:
                check_leak(tensors[i], "gt.compute()")
        for i, v in zip(idx, b.compute([tensors[i]._v for i in idx])):
            out[i] = np.array(v, copy=True)
    return tuple(out)


def persist(*tensors: Tensor) -> tuple[Tensor, ...]:
    """``tensors`` with their values computed and kept where they are (a dask cluster's workers' memory),
    as ``dask.persist``: later graphs start from them, not from the graphs that made them (so a training
    loop's variables do not grow a graph step by step).  Outside every tape: the results are new
    tensors, not connected to ``tensors`` on a tape.  On eager backends they are the tensors themselves."""
    out: list[Any] = list(tensors)
    for b, idx in _lazy_groups(tensors).items():
        if not b.lazy:
            continue
        for i, v in zip(idx, b.persist([tensors[i]._v for i in idx])):
            out[i] = wrap(v, b)
    return tuple(out)


class _Ref:
    __slots__ = ("_t",)

    def __init__(self, t: Tensor) -> None:
        self._t = t

    def deref(self) -> Tensor:
        return self._t

    def __hash__(self):
        return id(self._t)

    def __eq__(self, other):
        return isinstance(other, _Ref) and other._t is self._t


def lift(t: Tensor, b: Any) -> Tensor | None:
    """``t``, a Tensor of another backend, as a Tensor of ``b`` where ``b`` takes it in
    (``Backend.capture``: a stand-in backend makes a value computed outside its recording context a
    constant of it); None where it does not."""
    taken = b.capture_tensor(t)
    if taken is not None:
        return taken
    v = b.capture(t._b, t._v)
    return None if v is None else wrap(v, b)


def _rebuild(arr, backend_name, device=None):
    with _config.use_backend(backend_name):
        return constant(arr, device=_restore_device(backend_name, device))


def _restore_device(backend_name, device):
    """The device a pickled (or deep-copied) tensor goes back to: the one it was on (a copy of a GPU
    model stays on the GPU); where this machine's backend lacks that device, its default device,
    with a warning naming both.  None (a pickle of an older gradtape): the default."""
    if device is None:
        return None
    b = _backends.get(backend_name)
    names = b.devices()
    if device in names:
        return device
    if ":" in device and device.split(":", 1)[1].isdigit() or device == "cpu":
        warnings.warn(
            f"a tensor pickled on {backend_name!r} device {device!r} is restored on the default device: "
            f"this machine's {backend_name} has no {device!r} (devices: {names})",
            stacklevel=3,
        )
    return None  # (a sharded tensor's layout: the default device; re-shard with jax.device_put)


def wrap(v: Any, b: Any) -> Tensor:
    """A new Tensor around native ``v`` of backend ``b`` (the dispatcher's constructor)."""
    t = new_tensor(Tensor)
    t._v = v
    t._b = b
    t._id = next_id()
    return t


new_tensor = object.__new__


def is_tensor(x: object) -> bool:
    """Whether ``x`` is a ``gt.Tensor`` (variables included), as ``tf.is_tensor``."""
    return isinstance(x, Tensor)


# ---------------------------------------------------------------------------------------- variables
class _Probe:
    __slots__ = ("_v",)


def _sole_count(holder):
    cur = holder._v
    return _getrefcount(cur)


def _calibrate():
    """The reference count ``Variable._update`` sees for a value nothing else references (read
    from a slot into a local, as there), measured rather than assumed: interpreters differ."""
    p = _Probe()
    p._v = object()
    return _sole_count(p)


_SOLE = _calibrate()


_VAR_NAMES: dict[str, int] = {}

#: every Variable alive: a ``gt.function`` trace reads them through stand-ins (they are its state)
LIVE_VARIABLES: weakref.WeakSet[Variable] = weakref.WeakSet()


class Variable(Tensor):
    """A mutable, trainable value, as ``tf.Variable``.  Reading it inside a tape watches it (if
    trainable); arithmetic on it returns Tensors; assignment is not differentiable."""

    # ``_lock`` makes each update atomic with respect to other threads (assign, assign_add,
    # assign_sub, ``v[k] = x``; a gt.function program holds the locks of the variables it reads and
    # writes while it runs, an optimizer's apply those of every variable it updates, a trace all):
    # no update is lost.  Several are always taken in the order of ``_locks``
    __slots__ = ("_trainable", "_name", "_lock", "_constraint")
    _is_var = True

    if TYPE_CHECKING:  # bound in gradtape/ops/operators.py (see Tensor)

        def value(self) -> Tensor:
            """The current value as a Tensor (a recorded read: gradients flow to the variable)."""

        def read_value(self) -> Tensor:
            """The current value as a Tensor (a recorded read: gradients flow to the variable)."""

    def __init__(
        self,
        initial_value: TensorLike | Callable[[], TensorLike] = None,
        trainable: bool = True,
        name: str | None = None,
        dtype: _dt.DTypeLike | None = None,
        device: Any = None,
        constraint: Callable[[Tensor], TensorLike] | None = None,
    ) -> None:
        if initial_value is None:
            raise ValueError("gt.Variable needs an initial_value")
        if constraint is not None and not callable(constraint):
            raise ValueError(
                f"gt.Variable: constraint must be None or a callable (value -> constrained value), "
                f"got {type(constraint).__name__} {constraint!r}"
            )
        if callable(initial_value) and not isinstance(initial_value, Tensor):
            initial_value = initial_value()
        t = convert_to_tensor(initial_value, dtype=dtype, device=device)
        v = t._v
        if _held_by_caller(initial_value, v):  # never alias another tensor's value or the caller's array
            v = t._b.xp.asarray(v, copy=True)
        self._v, self._b, self._id = v, t._b, next_id()
        self._lock = threading.RLock()
        self._trainable = bool(trainable)
        self._constraint = constraint
        base = "Variable" if name is None else str(name)
        self._name = base if base.endswith(tuple(f":{i}" for i in range(10))) else base + ":0"
        LIVE_VARIABLES.add(self)
        on_variable_created(self)  # (inside gt.function: the program's state from now on)

    @property
    def name(self) -> str:
        """The variable's name (``tf.Variable.name``), unique within its model's naming scope."""
        return self._name

    @property
    def trainable(self) -> bool:
        """Whether tapes watch this variable automatically and optimizers update it."""
        return self._trainable

    @property
    def constraint(self) -> Callable[[Tensor], TensorLike] | None:
        """The function an optimizer applies to the value after each update (``tf.Variable``'s
        ``constraint``, as Keras applies it: ``v.assign(constraint(v))``); not applied by ``assign``."""
        return self._constraint

    def _coerce(self, value, what):
        if isinstance(value, Tensor) and value.dtype != self.dtype:
            # as TensorFlow: a tensor is not silently cast (Python values and NumPy arrays are)
            raise ValueError(
                f"Variable.{what}: the value is a {value.dtype} tensor but the variable "
                f"{self._name!r} is {self.dtype}; cast it first (gt.cast(value, {self.dtype}))"
            )
        if not isinstance(value, Tensor) and self.dtype.kind in "iub":
            _check_lossless(value, self, what)
        t = convert_to_tensor(value, dtype=self.dtype, like=self)
        if t._b is not self._b:  # (a tensor made outside the running recording context: captured)
            lifted = lift(t, self._b)
            t = t if lifted is None else lifted
        if t._b is not self._b:
            raise ValueError(
                f"Variable.{what}: the value lives on backend {t._b.name!r} but the "
                f"variable {self._name!r} on {self._b.name!r}; move it with .to_device "
                "or convert it first"
            )
        if tuple(t._v.shape) != tuple(self._v.shape):
            raise ValueError(
                f"Variable.{what}: cannot assign a value of shape {tuple(t._v.shape)} to "
                f"the variable {self._name!r} of shape {self.shape}"
            )
        v = t._v
        if t.dtype != self.dtype:
            v = self._b.xp.astype(v, self._b.dtype_to_native(self.dtype))
        if self._b.lays_out:  # a variable keeps its layout (a JAX sharding, dask's chunks)
            v = self._b.match_layout(v, self._v)
        return v

    @overload
    def assign(
        self, value: TensorLike, use_locking: bool = ..., name: str | None = ..., read_value: Literal[True] = ...
    ) -> Variable: ...
    @overload
    def assign(
        self, value: TensorLike, use_locking: bool = ..., name: str | None = ..., *, read_value: Literal[False]
    ) -> None: ...
    @overload
    def assign(
        self, value: TensorLike, use_locking: bool = ..., name: str | None = ..., read_value: bool = ...
    ) -> Variable | None: ...
    def assign(
        self, value: TensorLike, use_locking: bool = False, name: str | None = None, read_value: bool = True
    ) -> Variable | None:
        """Set the value to ``value`` (same shape and dtype) in place, as ``tf.Variable.assign``; returns the
        variable (None with ``read_value=False``, as TensorFlow's eager variables)."""
        with self._lock:  # (not inside another thread's compiled step or trace that holds this variable)
            v = self._coerce(value, "assign")
            if _held_by_caller(value, v):
                v = self._b.xp.asarray(v, copy=True)
            self._v = v
        return self if read_value else None

    @staticmethod
    def _locks(variables: Any) -> tuple:
        """The locks of ``variables`` in the one order every holder of several takes them (that of
        creation), so that no two threads each wait for a lock the other holds."""
        return tuple(v._lock for v in sorted({id(v): v for v in variables}.values(), key=lambda v: v._id))

    def _restore(self, value: Any) -> Variable:
        """Take ``value`` (a NumPy array of this variable's shape and dtype) from a checkpoint
        (``gt.train``): an ``assign``, except for a variable just created inside a ``gt.function``
        trace (a layer built, or an optimizer slot made, on a traced step's first call), whose
        stand-in takes the value instead: the variable is then an input of the program, as if it had
        been created with that value, not an assignment the program would repeat on every call."""
        if not self._b.restore_input(self._v, value, self.dtype):
            self.assign(value)
        return self

    def _delta(self, value, what):
        """The native value of an update: a Tensor of this backend, dtype and shape as is."""
        if value.__class__ is Tensor and value._b is self._b:
            v = value._v
            cur = self._v
            if v.dtype == cur.dtype and v.shape == cur.shape:
                return v
        return self._coerce(value, what)

    def _update(self, name: str, delta: TensorLike, what: str, scale: Any = None) -> Variable:
        """``name(value, delta)``, or with ``scale`` (a native 0-d array of the value's dtype: an
        optimizer's learning rate) ``name(value, delta * scale)``: one fused step where the backend
        has one (``Backend.scaled_update``: no product allocated, as TensorFlow's
        ``ResourceApplyGradientDescent``)."""
        with self._lock:  # read, add, write: atomic with respect to other threads
            d = self._delta(delta, what)
            cur = self._v
            b = self._b
            # in place when nothing but this variable references the value (no Tensor read from it,
            # no tape's saved value, no caller's array: see _SOLE) and the backend can tell that no
            # view shares its memory; otherwise a new value
            if scale is None:
                if _getrefcount(cur) != _SOLE or not b.update_inplace(name, cur, d):
                    self._v = getattr(b.xp, name)(cur, d)
            elif _getrefcount(cur) != _SOLE or not b.update_inplace(name, cur, d, scale):
                self._v = b.scaled_update(name, cur, d, scale)
        return self

    @overload
    def assign_add(
        self, delta: TensorLike, use_locking: bool = ..., name: str | None = ..., read_value: Literal[True] = ...
    ) -> Variable: ...
    @overload
    def assign_add(
        self, delta: TensorLike, use_locking: bool = ..., name: str | None = ..., *, read_value: Literal[False]
    ) -> None: ...
    @overload
    def assign_add(
        self, delta: TensorLike, use_locking: bool = ..., name: str | None = ..., read_value: bool = ...
    ) -> Variable | None: ...
    def assign_add(
        self, delta: TensorLike, use_locking: bool = False, name: str | None = None, read_value: bool = True
    ) -> Variable | None:
        """Add ``delta`` to the value in place, as ``tf.Variable.assign_add``; returns the variable (None
        with ``read_value=False``)."""
        self._update("add", delta, "assign_add")
        return self if read_value else None

    @overload
    def assign_sub(
        self, delta: TensorLike, use_locking: bool = ..., name: str | None = ..., read_value: Literal[True] = ...
    ) -> Variable: ...
    @overload
    def assign_sub(
        self, delta: TensorLike, use_locking: bool = ..., name: str | None = ..., *, read_value: Literal[False]
    ) -> None: ...
    @overload
    def assign_sub(
        self, delta: TensorLike, use_locking: bool = ..., name: str | None = ..., read_value: bool = ...
    ) -> Variable | None: ...
    def assign_sub(
        self, delta: TensorLike, use_locking: bool = False, name: str | None = None, read_value: bool = True
    ) -> Variable | None:
        """Subtract ``delta`` from the value in place, as ``tf.Variable.assign_sub``; returns the variable
        (None with ``read_value=False``)."""
        self._update("subtract", delta, "assign_sub")
        return self if read_value else None

    def _scatter(self, what, sparse_delta, indices, values):
        """The native row indices (checked against the first axis, as TF's) and values of a
        ``scatter_*`` update: ``sparse_delta`` is anything with ``.indices`` and ``.values`` (TF's
        ``IndexedSlices``), or ``indices=`` and ``values=`` are given."""
        if sparse_delta is not None:
            if not (hasattr(sparse_delta, "indices") and hasattr(sparse_delta, "values")):
                raise TypeError(
                    f"Variable.{what}: sparse_delta must have .indices and .values (TensorFlow's IndexedSlices), "
                    f"got {type(sparse_delta).__name__}; or pass indices= and values="
                )
            indices, values = sparse_delta.indices, sparse_delta.values
        if indices is None or values is None:
            raise TypeError(f"Variable.{what}: give the rows to update as indices= and values= (or sparse_delta)")
        idx = indices.numpy() if isinstance(indices, Tensor) else np.asarray(indices)
        if idx.dtype.kind not in "iu" and idx.size:
            raise TypeError(f"Variable.{what}: indices must be integers, not {idx.dtype}")
        if self.ndim == 0:
            raise ValueError(f"Variable.{what}: the variable {self._name!r} is 0-d: it has no rows to update")
        idx = idx.astype(np.int64)
        n = self.shape[0]
        bad = idx[(idx < 0) | (idx >= n)]
        if bad.size:
            raise IndexError(
                f"Variable.{what}: indices[{int(np.argmax((idx.reshape(-1) < 0) | (idx.reshape(-1) >= n)))}] "
                f"= {int(bad.reshape(-1)[0])} is not in [0, {n}) (the rows of the variable {self._name!r})"
            )
        want = tuple(idx.shape) + tuple(self.shape[1:])
        vals = convert_to_tensor(values, dtype=self.dtype, like=self)
        if tuple(vals.shape) != want:
            raise ValueError(
                f"Variable.{what}: values must have shape indices.shape + variable.shape[1:] = {want}, got {vals.shape}"
            )
        b = self._b
        key = (idx if b.host_index_arrays else b.asarray(idx, device=b.device_of(self._v)),)
        return key, vals._v

    def _set_keeping_layout(self, v):
        if self._b.lays_out:  # a variable keeps its layout (a JAX sharding, dask's chunks)
            v = self._b.match_layout(v, self._v)
        self._v = v

    def scatter_update(
        self,
        sparse_delta: Any = None,
        use_locking: bool = False,
        name: str | None = None,
        *,
        indices: Any = None,
        values: Any = None,
    ) -> Variable:
        """Write ``values`` into the rows ``indices`` of the first axis in place, as
        ``tf.Variable.scatter_update``; not recorded (no gradient), as every assignment."""
        with self._lock:
            key, vals = self._scatter("scatter_update", sparse_delta, indices, values)
            self._set_keeping_layout(self._b.setitem(self._v, key, vals))
        return self

    def scatter_add(
        self,
        sparse_delta: Any = None,
        use_locking: bool = False,
        name: str | None = None,
        *,
        indices: Any = None,
        values: Any = None,
    ) -> Variable:
        """Add ``values`` to the rows ``indices`` in place (repeated rows accumulate), as
        ``tf.Variable.scatter_add``."""
        return self._scatter_accumulate("scatter_add", "add", sparse_delta, indices, values)

    def scatter_sub(
        self,
        sparse_delta: Any = None,
        use_locking: bool = False,
        name: str | None = None,
        *,
        indices: Any = None,
        values: Any = None,
    ) -> Variable:
        """Subtract ``values`` from the rows ``indices`` in place (repeated rows accumulate), as
        ``tf.Variable.scatter_sub``."""
        return self._scatter_accumulate("scatter_sub", "subtract", sparse_delta, indices, values)

    def _scatter_accumulate(self, what, combine, sparse_delta, indices, values):
        """``scatter_add`` / ``scatter_sub``: the rows' values summed (repeated rows accumulate) and
        combined with the variable by the namespace's ``combine`` (``add``, ``subtract``), in place."""
        with self._lock:
            key, vals = self._scatter(what, sparse_delta, indices, values)
            b = self._b
            summed = b.index_add(tuple(self._v.shape), b.dtype_of(vals), key, vals)
            self._set_keeping_layout(getattr(b.xp, combine)(self._v, summed))
        return self

    # ``value()``/``read_value()`` (a recorded read), ``v[key] = ...`` (a state update, not recorded)
    # and the in-place operators (they return a Tensor: ``x += 1`` rebinds x, as in TF 2) are bound
    # in gradtape/ops/operators.py with the other operators.

    def __repr__(self):
        val = "<traced>" if self._b.stand_ins else _format_value(self._b.to_numpy(self._v), prefix="")
        if "\n" in val:
            val = "\n" + val
        return (
            f"<gt.Variable '{self._name}' shape={self.shape} dtype={self.dtype} "
            f"backend={self._b.name} device={self.device}, numpy={val}>"
        )

    __str__ = __repr__

    def __copy__(self):
        out = _rebuild_var(*self.__reduce__()[1])
        out._constraint = self._constraint  # (a pickle leaves it out: a lambda does not pickle)
        return out

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __reduce__(self):
        return (
            _rebuild_var,
            (
                np.array(self._b.to_numpy(self._v), copy=True),
                self._b.name,
                self._trainable,
                self._name,
                str(self.device),
            ),
        )


def _rebuild_var(arr, backend_name, trainable, name, device=None):
    with _config.use_backend(backend_name):
        return Variable(arr, trainable=trainable, name=name, device=_restore_device(backend_name, device))


# ---------------------------------------------------------------------------------------- conversion
_PY_SCALARS = (bool, int, float, complex)


def _default_native(value, b, device):
    """Native array from a non-tensor value with TensorFlow's default dtypes: Python floats (and
    nested lists of them) become float32, ints int64, complex complex64 (float64 and complex128
    under ``gt.config.set_floatx("float64")``); NumPy arrays keep theirs, and so do lists that hold
    NumPy scalars or arrays."""
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        return b.asarray(np.asarray(value), device=device)
    if b.is_native(value):
        if device is None:
            return value
        return b.to_device(value, b.parse_device(device) if isinstance(device, str) else device)
    if isinstance(value, bool):
        return b.asarray(value, dtype=_dt.bool, device=device)
    if isinstance(value, int):
        return b.asarray(value, dtype=_dt.int64, device=device)
    if isinstance(value, float):
        return b.asarray(value, dtype=_dt.floatx(), device=device)
    if isinstance(value, complex):
        return b.asarray(value, dtype=_dt.default_complex(), device=device)
    if isinstance(value, (list, tuple)):
        arr = np.asarray(value)
        if any(type(e) not in _PY_SCALARS for e in _leaves(value)):
            pass  # NumPy scalars or arrays among the elements: NumPy's dtype ([np.int32(1)] is int32, as in NumPy)
        elif arr.dtype == np.float64:
            arr = arr.astype(_dt.floatx().name, copy=False)
        elif arr.dtype == np.complex128:
            arr = arr.astype(_dt.default_complex().name, copy=False)
        elif arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
        elif arr.dtype.kind not in "bfc":
            raise TypeError(f"cannot convert {value!r} to a tensor (NumPy made dtype {arr.dtype})")
        return b.asarray(arr, device=device)
    if isinstance(value, numbers.Number):
        return _default_native(
            complex(value)
            if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real)
            else float(value),
            b,
            device,
        )
    if hasattr(value, "__dlpack__") or hasattr(value, "__array__"):
        return b.asarray(np.asarray(value), device=device)
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise TypeError(  # NumPy's and SciPy's words first: SciPy's tests match "Unsupported"
        f"Unsupported input type {type(value).__name__}: cannot convert {shown} to a gradtape tensor; pass a Tensor, "
        "a Python scalar, a nested list or a NumPy array"
    )


def _leaves(seq):
    for e in seq:
        if isinstance(e, (list, tuple)):
            yield from _leaves(e)
        else:
            yield e


def convert_to_tensor(
    value: TensorLike,
    dtype: _dt.DTypeLike | None = None,
    device: Any = None,
    *,
    like: Tensor | None = None,
    backend: Any = None,
    dtype_hint: _dt.DTypeLike | None = None,
    name: str | None = None,
) -> Tensor:
    """A Tensor from ``value``: Tensors pass through (cast if ``dtype`` differs); other values are
    converted on ``like``'s backend, or ``backend``, or the active backend."""
    if isinstance(value, Tensor):
        if dtype is not None and value.dtype != _dt.as_dtype(dtype):
            value = ops.astype(value, _dt.as_dtype(dtype))
        if device is not None:
            value = value.to_device(device)
        if value._is_var:  # a recorded read: gradients flow to the variable
            return ops.identity(value)
        return value
    if value.__class__ in (list, tuple) and holds_tensor(value):
        return _pack(value, dtype, device)
    if like is not None:
        b = like._b
        if device is None:
            device = b.device_beside(like._v)  # values beside a tensor go to its device
    elif backend is not None:
        b = _backends.get(backend)
    elif device.__class__ is Device and device.backend is not None:
        b = device.backend
    else:
        b = _config.get_backend()
    if device is None and like is None:
        cfg = _config.current()
        if cfg.backend is b and cfg.device is not None:
            device = cfg.device
    if dtype is None and dtype_hint is not None and isinstance(value, _PY_SCALARS + (list, tuple)):
        dtype = dtype_hint
    if value is None or value.__class__ in (list, tuple) and any(e is None for e in _leaves(value)):
        raise ValueError(
            f"Attempt to convert {value!r} to a tensor: None is not a number; pass a value "
            "(float('nan') for a missing one)"
        )
    if dtype is not None:
        d = _dt.as_dtype(dtype)
        if d.kind in "iub" and isinstance(value, _PY_SCALARS + (list, tuple)):
            _check_exact(value, d)
        if isinstance(value, (np.ndarray, np.generic)) or isinstance(value, _PY_SCALARS + (list, tuple)):
            try:  # Python values straight to the target dtype: big uint64 ones must not pass
                # through float64 (complex ones raise here, and below)
                value = np.asarray(
                    value,
                    dtype=None if d.kind == "c" or isinstance(value, (np.ndarray, np.generic)) else np.dtype(d.name),
                )
            except TypeError:
                value = np.asarray(value)
            if value.dtype.kind == "c" and d.kind not in "c":
                raise TypeError(
                    f"cannot convert complex values to {d} without losing the imaginary part; take gt.real first"
                )
        v = b.asarray(value, dtype=d, device=device)
    else:
        v = _default_native(value, b, device)
    if type(v) is not b.array_type:
        v = b.fix_output(v)
    return wrap(v, b)


def _held_by_caller(value, v):
    """Whether ``v``, the native array a Variable is to keep from ``value``, may share memory with an
    object its caller still holds: another Tensor's value, a NumPy array or a native array (torch's
    ``asarray`` of either is zero-copy).  A Variable copies those (as ``tf.Variable`` and JAX do), so
    that a later in-place change of the caller's array does not change the variable, or the reverse."""
    if isinstance(value, Tensor):
        return v is value._v
    return not isinstance(value, _PY_SCALARS + (list, tuple))


def _check_lossless(value, var, what):
    """A value that the integer or bool variable ``var`` cannot hold exactly (1.5, or 2 for a bool) is a
    ``TypeError``, as a Python float is in :func:`convert_to_tensor`: an array's values were truncated
    (``np.array(1.5)`` assigned 1) and integers other than 0 and 1 made True, silently."""
    d = var.dtype
    if isinstance(value, _PY_SCALARS + (list, tuple)):
        if d.kind != "b":
            return  # (Python floats: convert_to_tensor's own check)
        try:
            src = np.asarray(value)
        except (TypeError, ValueError):
            return  # (ragged and other bad values: convert_to_tensor says what is wrong)
    else:
        src = convert_to_tensor(value, like=var)
        if src.dtype.kind == d.kind or src.dtype.kind in "iu" and d.kind in "iu":
            return  # (integers of another width: a cast, as TensorFlow's convert_to_tensor of a NumPy array)
        src = src.numpy()
    if src.dtype.kind == d.kind or src.dtype.kind == "b" or src.dtype.kind == "O":
        return
    with np.errstate(invalid="ignore", over="ignore"):
        same = src.size == 0 or bool(np.all(src.astype(np.dtype(d.name)) == src))
    if not same:
        why = "only 0 and 1 are booleans" if d.kind == "b" else "a fraction or a value out of range"
        raise TypeError(
            f"Variable.{what}: {var.name!r} is {d}, which cannot hold the value's {src.dtype} numbers "
            f"without changing them ({why}); round or cast the value first, or make the variable floating"
        )


def holds_tensor(value):
    """Whether the (nested) list or tuple ``value`` holds a Tensor."""
    return any(isinstance(e, Tensor) for e in _leaves(value))


def _pack(value, dtype, device):
    """A (nested) list holding Tensors as one Tensor, stacked by a recorded op, as TensorFlow's
    ``convert_to_tensor`` packs it: the tape connects the result to each element (its gradient was
    lost, silently, when the list was converted to a new array).  Python values beside the Tensors
    take the first Tensor's dtype and backend (TensorFlow's too)."""
    first = next(e for e in _leaves(value) if isinstance(e, Tensor))
    d = None if dtype is None else _dt.as_dtype(dtype)
    parts = [
        convert_to_tensor(e, dtype=d, device=device)
        if isinstance(e, Tensor) or e.__class__ in (list, tuple) and holds_tensor(e)
        else convert_to_tensor(e, dtype=d or first.dtype, device=device, like=first)
        for e in value
    ]
    return ops.stack(parts)


def _check_exact(value, d):
    """Python floats (or complex) that the integer or bool dtype ``d`` cannot hold exactly are a
    ``TypeError``, as in TensorFlow, not a silent truncation."""
    for e in _leaves(value) if isinstance(value, (list, tuple)) else (value,):
        if isinstance(e, (float, complex)) and not isinstance(e, bool):
            if isinstance(e, complex) or not (
                e == e and e not in (float("inf"), float("-inf")) and e == int(e) and (d.kind != "b" or e in (0.0, 1.0))
            ):
                raise TypeError(
                    f"Cannot convert {e!r} to a tensor of dtype {d} without changing its value; "
                    "round it first (or pass a floating dtype)"
                )


def constant(
    value: TensorLike,
    dtype: _dt.DTypeLike | None = None,
    shape: Sequence[int] | None = None,
    name: str | None = None,
    device: Any = None,
) -> Tensor:
    """As ``tf.constant``: a Tensor from a value (Python float -> float32, or ``gt.config.floatx()``;
    int -> int64, ...)."""
    t = convert_to_tensor(value, dtype=dtype, device=device)
    if isinstance(value, Tensor) or value.__class__ in (list, tuple) and holds_tensor(value):
        # a constant is a new tensor, not connected to what it was made of (as ``tf.constant``); where
        # a recording tape connects that to a watched source, the lost gradient is said
        check_leak(t, "gt.constant (a constant: gt.convert_to_tensor keeps the gradient)")
        t = wrap(t._v, t._b)
    if shape is not None:
        shape = tuple(shape)
        t = ops.broadcast_to(t, shape) if t.size == 1 else ops.reshape(t, shape)
    return t
