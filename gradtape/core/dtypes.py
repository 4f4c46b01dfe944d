"""Backend-neutral dtypes.

Each dtype is a singleton; ``Tensor.dtype == gt.float32`` holds on every backend because every
adapter maps its library's dtype objects to these (``Backend.dtype_from_native``).
"""

from __future__ import annotations

import builtins
import os
from typing import TypeAlias

import numpy as _np

__all__ = [
    "DType",
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "ALL_DTYPES",
    "as_dtype",
    "is_floating",
    "is_complex",
    "is_differentiable",
    "real_dtype",
    "complex_dtype",
    "isdtype",
    "floatx",
    "set_floatx",
    "default_complex",
    "scalar_dtype",
    "DTypeLike",
    "result_type",
    "int_range",
    "check_python_int",
]

_builtin_bool = builtins.bool

#: What names a dtype: a :class:`DType`, its name (``"float32"``), a Python type (``float``) or any
#: library's dtype object with a ``name`` (``numpy.float64``, ``torch.float32``).
DTypeLike: TypeAlias = "DType | str | type | object"


class DType:
    """A backend-neutral dtype: ``name``, ``kind`` ('b', 'i', 'u', 'f', 'c') and ``itemsize`` in bytes."""

    __slots__ = ("name", "kind", "itemsize")

    def __init__(self, name: str, kind: str, itemsize: int) -> None:
        self.name, self.kind, self.itemsize = name, kind, itemsize

    def __repr__(self) -> str:
        return f"gt.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (as_dtype, (self.name,))

    def __eq__(self, other: object) -> builtins.bool:
        """Equal to itself and, as TensorFlow's ``DType``, to whatever names it (``"float32"``,
        ``numpy.float32``, ``numpy.dtype("float32")``): a ported ``x.dtype == np.float32`` holds."""
        if other.__class__ is DType:
            return self is other
        try:
            return as_dtype(other) is self
        except (TypeError, ValueError):
            return False

    def __ne__(self, other: object) -> builtins.bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def dtype(self) -> _np.dtype:
        """NumPy's dtype of the same name: ``numpy.dtype(gt.float64)`` reads this attribute (NumPy
        converts any object whose ``dtype`` is a NumPy dtype), as scikit-learn does after ``.kind``."""
        return _np.dtype(self.name)

    @property
    def is_floating(self) -> builtins.bool:
        """Whether this is a real floating dtype (float32, float64)."""
        return self.kind == "f"

    @property
    def is_complex(self) -> builtins.bool:
        """Whether this is a complex dtype (complex64, complex128)."""
        return self.kind == "c"

    @property
    def is_integer(self) -> builtins.bool:
        """Whether this is a signed or unsigned integer dtype."""
        return self.kind in "iu"

    @property
    def is_bool(self) -> builtins.bool:
        """Whether this is the boolean dtype."""
        return self.kind == "b"

    @property
    def differentiable(self) -> builtins.bool:
        """Whether gradients flow through values of this dtype (floating and complex dtypes)."""
        return self.kind in "fc"


bool = DType("bool", "b", 1)
int8 = DType("int8", "i", 1)
int16 = DType("int16", "i", 2)
int32 = DType("int32", "i", 4)
int64 = DType("int64", "i", 8)
uint8 = DType("uint8", "u", 1)
uint16 = DType("uint16", "u", 2)
uint32 = DType("uint32", "u", 4)
uint64 = DType("uint64", "u", 8)
float32 = DType("float32", "f", 4)
float64 = DType("float64", "f", 8)
complex64 = DType("complex64", "c", 8)
complex128 = DType("complex128", "c", 16)

ALL_DTYPES = (bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64, complex64, complex128)
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update({"float": float32, "double": float64})


def as_dtype(d: DTypeLike) -> DType:
    """A gradtape dtype from a dtype, its name, a NumPy dtype or a Python type."""
    if isinstance(d, DType):
        return d
    if isinstance(d, str):
        try:
            return _BY_NAME[d]
        except KeyError:
            raise TypeError(f"unknown dtype name {d!r}; use one of {sorted(_BY_NAME)}") from None
    if d is _builtin_bool:
        return bool
    if d is int:
        return int64
    if d is float:
        return floatx()
    if d is complex:
        return default_complex()
    if isinstance(d, type) and issubclass(d, _np.generic):  # a NumPy scalar type (np.float64)
        name = _np.dtype(d).name
    else:
        name = getattr(d, "name", None) or getattr(getattr(d, "dtype", None), "name", None)
    if name is None:
        name = str(d).rsplit(".", 1)[-1]
    if name in _BY_NAME:
        return _BY_NAME[name]
    raise TypeError(f"cannot interpret {d!r} as a gradtape dtype")


def is_floating(d: DTypeLike) -> builtins.bool:
    return as_dtype(d).kind == "f"


def is_complex(d: DTypeLike) -> builtins.bool:
    return as_dtype(d).kind == "c"


def is_differentiable(d: DTypeLike) -> builtins.bool:
    return as_dtype(d).kind in "fc"


def real_dtype(d: DType) -> DType:
    """complex64 -> float32, complex128 -> float64; other dtypes unchanged."""
    return {complex64: float32, complex128: float64}.get(d, d)


def complex_dtype(d: DType) -> DType:
    """float32 -> complex64, float64 -> complex128; complex dtypes unchanged."""
    return {float32: complex64, float64: complex128}.get(d, d)


_KIND_GROUPS = {
    "bool": "b",
    "signed integer": "i",
    "unsigned integer": "u",
    "integral": "iu",
    "real floating": "f",
    "complex floating": "c",
    "numeric": "iufc",
}


def isdtype(dtype: DTypeLike, kind: DTypeLike | str | tuple[DTypeLike | str, ...]) -> builtins.bool:
    """The standard's ``isdtype``: ``kind`` is a dtype, a kind name, or a tuple of either."""
    dtype = as_dtype(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        try:
            return dtype.kind in _KIND_GROUPS[kind]
        except KeyError:
            raise ValueError(f"isdtype: unknown kind {kind!r}; use one of {sorted(_KIND_GROUPS)}") from None
    return dtype is as_dtype(kind)


# --- type promotion (the standard's table, plus NumPy's mixed-kind rules for convenience) ---
_ORDER = {"b": 0, "u": 1, "i": 2, "f": 3, "c": 4}


def result_type(*dtypes: DTypeLike) -> DType:
    """Promote dtypes as the Array API standard does (mixed int/float promotes to the float)."""
    out = None
    for d in dtypes:
        d = as_dtype(d)
        out = d if out is None else _promote2(out, d)
    if out is None:
        raise ValueError("result_type needs at least one dtype")
    return out


def _promote2(a: DType, b: DType) -> DType:
    if a is b:
        return a
    ka, kb = a.kind, b.kind
    if ka == kb:
        return a if a.itemsize >= b.itemsize else b
    if {ka, kb} == {"i", "u"}:
        s, u = (a, b) if ka == "i" else (b, a)
        if s.itemsize > u.itemsize:
            return s
        return {1: int16, 2: int32, 4: int64}.get(u.itemsize, float64)
    if _ORDER[ka] < _ORDER[kb]:
        a, b = b, a
        ka, kb = kb, ka
    # a is the 'higher' kind
    if kb == "b":
        return a
    if ka in "fc" and kb in "iu":
        # float32 / complex64 beside an integer: TensorFlow's, torch's and JAX's rule keeps the floating
        # dtype; under floatx float64 (NumPy-like), NumPy's: an int of 4 or 8 bytes needs float64
        if a.itemsize == (4 if ka == "f" else 8) and b.itemsize >= 4 and floatx() is float64:
            return float64 if ka == "f" else complex128
        return a
    if ka == "c" and kb == "f":
        return complex128 if (b.itemsize == 8 or a.itemsize == 16) else complex64
    return a


# --- the default floating dtype (``gt.config.set_floatx``) ---
_FLOATX: list[DType | None] = [None]  # float32 or float64; None until first asked (GRADTAPE_FLOATX)
_FLOATX_CHOICES = ("float32", "float64")


def _parse_floatx(value: DTypeLike) -> DType:
    try:
        d = as_dtype(value.strip() if isinstance(value, str) else value)
    except TypeError:
        d = None
    if d is None or d.name not in _FLOATX_CHOICES:
        raise ValueError(f"floatx must be one of {_FLOATX_CHOICES} (a name or gt.float32 / gt.float64), got {value!r}")
    return d


def floatx() -> DType:
    """The default floating dtype: what Python floats, float lists, creation functions, integer
    inputs of floating functions, random draws and layers get when no dtype is given.  float32
    (TensorFlow's and Keras's) unless ``gt.config.set_floatx`` or ``GRADTAPE_FLOATX`` says float64."""
    d = _FLOATX[0]
    if d is None:
        env = os.environ.get("GRADTAPE_FLOATX", "").strip() or "float32"
        try:
            d = _parse_floatx(env)
        except ValueError as e:
            raise ValueError(f"GRADTAPE_FLOATX={env!r}: {e}; unset it for float32") from None
        _FLOATX[0] = d
    return d


def set_floatx(value: DTypeLike) -> None:
    """Set the default floating dtype, process-wide: ``"float32"`` or ``"float64"``."""
    _FLOATX[0] = _parse_floatx(value)


def default_complex() -> DType:
    """The default complex dtype: complex64 under float32, complex128 under float64."""
    return complex128 if floatx() is float64 else complex64


def scalar_dtype(value: object, dtype: DType) -> DType:
    """The dtype a Python scalar ``value`` takes beside an array of dtype ``dtype`` (the standard's
    rule: the array's dtype where the scalar's kind fits it; across kinds, the array's precision:
    a ``complex`` beside float32 is complex64, beside float64 complex128; a ``float`` beside an
    integer or bool array is the default float; an ``int`` beside a bool array int64)."""
    if scalar_fits(value, dtype):
        return dtype
    if isinstance(value, complex):
        return complex_dtype(dtype) if dtype.kind == "f" else default_complex()
    if isinstance(value, float):
        return floatx()
    return int64


def scalar_fits(value: object, dtype: DType) -> builtins.bool:
    """Whether Python scalar ``value`` joins an array of gradtape dtype ``dtype`` without changing
    its dtype (the standard's rule for Python scalars in binary operations)."""
    if isinstance(value, _builtin_bool):
        return True
    if isinstance(value, int):
        return dtype.kind != "b"
    if isinstance(value, float):
        return dtype.kind in "fc"
    return dtype.kind == "c"


#: integer dtype name -> (min, max)
_RANGES: dict[str, tuple[int, int]] = {}


def int_range(name: str) -> tuple[int, int]:
    """``(min, max)`` of the integer dtype called ``name`` (``"int32"``), as Python ints."""
    r = _RANGES.get(name)
    if r is None:
        info = _np.iinfo(name)
        r = _RANGES[name] = (int(info.min), int(info.max))
    return r


def check_python_int(
    value: int, name: str, who: str | None = None, advice: str = "pass a wider dtype, or reduce the value first"
) -> None:
    """NumPy's ``OverflowError`` where the Python int ``value`` does not fit the integer dtype called
    ``name`` (PyTorch and JAX would wrap it around silently); ``who``: the function, named first;
    ``advice``: what to do."""
    lo, hi = int_range(name)
    if not lo <= value <= hi:
        raise OverflowError(
            f"{'' if who is None else who + ': '}Python integer {value} out of bounds for {name} "
            f"(its range is [{lo}, {hi}]); {advice}"
        )
