"""Data type functions and the inspection namespace (issue 5): ``finfo`` / ``iinfo`` against NumPy,
``can_cast`` / ``result_type`` against the standard's promotion tables (Python scalars included),
and ``__array_namespace_info__`` on every backend."""

from __future__ import annotations

import inspect
import itertools

import numpy as np
import pytest

import gradtape as gt

_ALL = list(gt.dtypes.ALL_DTYPES)  # every dtype gradtape has
_INTS = [gt.int8, gt.int16, gt.int32, gt.int64, gt.uint8, gt.uint16, gt.uint32, gt.uint64]
_FLOATS = [gt.float32, gt.float64, gt.complex64, gt.complex128]

# the standard's promotion tables (2024.12, "Type Promotion Rules"), as (a, b) -> result
_I = {
    "i1": gt.int8,
    "i2": gt.int16,
    "i4": gt.int32,
    "i8": gt.int64,
    "u1": gt.uint8,
    "u2": gt.uint16,
    "u4": gt.uint32,
    "u8": gt.uint64,
    "f4": gt.float32,
    "f8": gt.float64,
    "c8": gt.complex64,
    "c16": gt.complex128,
}
_TABLES = [
    (
        ["i1", "i2", "i4", "i8"],
        [["i1", "i2", "i4", "i8"], ["i2", "i2", "i4", "i8"], ["i4", "i4", "i4", "i8"], ["i8", "i8", "i8", "i8"]],
    ),
    (
        ["u1", "u2", "u4", "u8"],
        [["u1", "u2", "u4", "u8"], ["u2", "u2", "u4", "u8"], ["u4", "u4", "u4", "u8"], ["u8", "u8", "u8", "u8"]],
    ),
    (
        ["f4", "f8", "c8", "c16"],
        [
            ["f4", "f8", "c8", "c16"],
            ["f8", "f8", "c16", "c16"],
            ["c8", "c16", "c8", "c16"],
            ["c16", "c16", "c16", "c16"],
        ],
    ),
]
_MIXED = {
    ("i1", "u1"): "i2",
    ("i1", "u2"): "i4",
    ("i1", "u4"): "i8",
    ("i2", "u1"): "i2",
    ("i2", "u2"): "i4",
    ("i2", "u4"): "i8",
    ("i4", "u1"): "i4",
    ("i4", "u2"): "i4",
    ("i4", "u4"): "i8",
    ("i8", "u1"): "i8",
    ("i8", "u2"): "i8",
    ("i8", "u4"): "i8",
}


def _promotion_table():
    out = {(gt.bool, gt.bool): gt.bool}
    for names, rows in _TABLES:
        for a, row in zip(names, rows):
            for b, r in zip(names, row):
                out[_I[a], _I[b]] = _I[r]
    for (a, b), r in _MIXED.items():
        out[_I[a], _I[b]] = out[_I[b], _I[a]] = _I[r]
    return out


PROMOTION = _promotion_table()

_SIGNATURES = {
    "can_cast": "(from_, to, /)",
    "finfo": "(type, /)",
    "iinfo": "(type, /)",
    "result_type": "(*arrays_and_dtypes)",
    "isdtype": "(dtype, kind)",
    "__array_namespace_info__": "()",
}


@pytest.mark.parametrize("name", sorted(_SIGNATURES))
def test_signature_is_the_standards(name):
    sig = inspect.signature(getattr(gt, name))
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]  # (typed: issue 13)
    assert str(sig.replace(parameters=bare, return_annotation=inspect.Signature.empty)) == _SIGNATURES[name]


def test_info_method_signatures():
    info = gt.__array_namespace_info__()
    assert str(inspect.signature(info.capabilities)) == "()"
    assert str(inspect.signature(info.default_device)) == "()"
    assert str(inspect.signature(info.devices)) == "()"
    assert str(inspect.signature(info.default_dtypes)) == "(*, device=None)"
    assert str(inspect.signature(info.dtypes)) == "(*, device=None, kind=None)"


# ---------------------------------------------------------------------------------------- finfo, iinfo
@pytest.mark.parametrize("dtype", _FLOATS, ids=str)
def test_finfo_matches_numpy(dtype):
    real = {gt.complex64: gt.float32, gt.complex128: gt.float64}.get(dtype, dtype)
    ref = np.finfo(real.name)
    for arg in (dtype, dtype.name, gt.zeros((2,), dtype=dtype)):
        f = gt.finfo(arg)
        assert f.dtype is real  # complex: the real component type
        assert f.bits == ref.bits and isinstance(f.bits, int)
        for field in ("eps", "max", "min", "smallest_normal"):
            assert isinstance(getattr(f, field), float)
            assert getattr(f, field) == float(getattr(ref, field)), field


@pytest.mark.parametrize("dtype", _INTS, ids=str)
def test_iinfo_matches_numpy(dtype):
    ref = np.iinfo(dtype.name)
    for arg in (dtype, dtype.name, gt.zeros((2,), dtype=dtype)):
        i = gt.iinfo(arg)
        assert i.dtype is dtype
        assert (i.bits, i.max, i.min) == (ref.bits, int(ref.max), int(ref.min))
        assert all(isinstance(v, int) for v in (i.bits, i.max, i.min))


def test_finfo_iinfo_of_native_arrays_and_errors(backend):
    x = gt.ones((2,), dtype=gt.float64)
    assert gt.finfo(x.native).dtype is gt.float64
    assert gt.finfo(x.native.dtype).bits == 64
    assert gt.iinfo(gt.arange(3).native).dtype is gt.int64
    with pytest.raises(TypeError, match="finfo: int32 is not a floating-point dtype"):
        gt.finfo(gt.int32)
    with pytest.raises(TypeError, match="iinfo: float32 is not an integer dtype"):
        gt.iinfo(gt.float32)
    with pytest.raises(TypeError, match="iinfo: bool is not an integer dtype"):
        gt.iinfo(gt.bool)


# ---------------------------------------------------------------------------------------- can_cast
def test_can_cast_is_the_standards_promotion_lattice():
    for a, b in itertools.product(_ALL, _ALL):
        expected = a is b or any(PROMOTION.get((a, c)) is b for c in _ALL)
        assert gt.can_cast(a, b) is expected, (a, b)
    assert gt.can_cast(gt.uint8, gt.int64) and not gt.can_cast(gt.int8, gt.uint64)
    assert not gt.can_cast(gt.int32, gt.float64) and not gt.can_cast(gt.bool, gt.int8)  # no cross-kind
    assert gt.can_cast(gt.float32, gt.complex128) and not gt.can_cast(gt.float64, gt.complex64)


def test_can_cast_of_a_tensor(backend):
    x = gt.zeros((2,), dtype=gt.float32)
    assert gt.can_cast(x, gt.float64) and not gt.can_cast(x, gt.int64)


# ---------------------------------------------------------------------------------------- result_type
def test_result_type_is_the_standards_table_in_either_order():
    for (a, b), r in PROMOTION.items():
        assert gt.result_type(a, b) is r, (a, b)
        assert gt.result_type(b, a) is r, (b, a)
    assert gt.result_type(gt.int8, gt.uint8, gt.int16) is gt.int16
    assert gt.result_type(gt.float32, gt.complex64, gt.float64) is gt.complex128
    assert gt.result_type("float32") is gt.float32


def test_result_type_beyond_the_table_is_gradtapes_promotion():
    assert gt.result_type(gt.int32, gt.float32) is gt.float32  # mixed kinds: the float
    assert gt.result_type(gt.uint64, gt.int64) is gt.float64
    x = gt.asarray([1, 2], dtype=gt.int32) + gt.asarray([1.0], dtype=gt.float32)
    assert x.dtype is gt.result_type(gt.int32, gt.float32)


_SCALARS = {
    # dtype kind -> scalars that leave it unchanged
    "b": [True],
    "i": [True, 1, -3],  # (a bool beside an integer keeps the integer dtype)
    "u": [True, 7],
    "f": [1, 2.5],
    "c": [1, 2.5, 1j],
}


def test_result_type_with_python_scalars():
    for d in _ALL:
        for s in _SCALARS[d.kind]:
            assert gt.result_type(d, s) is d, (d, s)
            assert gt.result_type(s, d) is d, (d, s)
    # scalars join the dtypes' result, whatever their position
    assert gt.result_type(1, gt.int8, gt.uint8) is gt.int16
    assert gt.result_type(gt.float32, 1j) is gt.complex64
    assert gt.result_type(1j, gt.float64) is gt.complex128
    assert gt.result_type(gt.int16, 1.5) is gt.float32  # unspecified: gradtape's default float
    assert gt.result_type(gt.bool, 1) is gt.int64  # unspecified: gradtape's default integer
    with pytest.raises(ValueError, match="at least one array or dtype is required"):
        gt.result_type(1, 2.0)


def test_result_type_of_tensors_and_scalars(backend):
    a = gt.zeros((1,), dtype=gt.float32)
    b = gt.zeros((1,), dtype=gt.uint8)
    assert gt.result_type(a, 1) is gt.float32
    assert gt.result_type(b, gt.int8, 3) is gt.int16
    assert gt.result_type(a, gt.float64, 1j) is gt.complex128
    assert gt.result_type(a.native) is gt.float32


# ---------------------------------------------------------------------------------------- inspection
def test_array_namespace_info(backend):
    name = backend.split(":")[0]
    info = gt.__array_namespace_info__()
    assert gt.ones(1).__array_namespace__().__array_namespace_info__() is info
    caps = info.capabilities()
    assert set(caps) == {"boolean indexing", "data-dependent shapes", "max dimensions"}
    assert caps["boolean indexing"] is True and caps["data-dependent shapes"] is True
    assert caps["max dimensions"] is None or (isinstance(caps["max dimensions"], int) and caps["max dimensions"] >= 8)
    devices = info.devices()
    assert isinstance(devices, tuple)  # a tuple since 2025.12
    assert "cpu" in devices or name == "cupy"  # (CuPy's arrays live in GPU memory only)
    d = info.default_device()
    assert d in devices
    t = gt.zeros(2)
    assert t.device == d and t.backend == name
    for dev in devices[:2]:
        assert gt.asarray([1.0], device=dev).device == dev
    assert info.default_dtypes() == {
        "real floating": gt.float32,
        "complex floating": gt.complex64,
        "integral": gt.int64,
        "indexing": gt.int64,
    }
    assert info.default_dtypes(device=d) == info.default_dtypes()
    assert gt.arange(3).dtype is info.default_dtypes()["integral"]
    assert gt.argsort(gt.ones(3)).dtype is info.default_dtypes()["indexing"]
    assert gt.asarray(1.0).dtype is info.default_dtypes()["real floating"]
    dts = info.dtypes()
    assert {"bool", "int8", "int16", "int32", "int64", "uint8", "float32", "float64", "complex64", "complex128"} <= set(
        dts
    )
    assert all(getattr(gt, k) is v for k, v in dts.items())
    assert set(info.dtypes(kind="real floating")) == {"float32", "float64"}
    assert set(info.dtypes(kind=("bool", "complex floating"))) == {"bool", "complex64", "complex128"}
    assert set(info.dtypes(kind="signed integer")) == {"int8", "int16", "int32", "int64"}
    assert set(info.dtypes(kind="numeric")) == set(dts) - {"bool"}
    assert info.dtypes(device=d) == dts
    for k in dts:
        assert gt.zeros(1, dtype=k).dtype is dts[k]
    with pytest.raises(ValueError, match="has no device"):
        info.dtypes(device="no-such-device")


def test_info_follows_the_current_backend():
    info = gt.__array_namespace_info__()
    with gt.use_backend("numpy"):
        assert info.devices() == ("cpu",)
        assert "uint64" in info.dtypes()
    if "array_api_strict" in gt.available_backends():
        with gt.use_backend("array_api_strict"):
            assert "device1" in info.devices()
            assert "float64" not in info.dtypes(device="no_float64")
    if "torch" in gt.available_backends():
        with gt.use_backend("torch"):
            assert info.devices()[0] == "cpu"
