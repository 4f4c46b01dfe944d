"""Semantics of the Array API standard that the generated per-op tests do not sample: exact
gradients at special points, special cases, signatures (the standard's own test suite,
data-apis/array-api-tests, is run separately: see docs/conformance.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import gradtape as gt


def _torch_grads(x, g, f, include_initial=False):
    torch = pytest.importorskip("torch")
    xt = torch.tensor(x, requires_grad=True)
    (d,) = torch.autograd.grad((f(torch, xt) * torch.tensor(g)).sum(), xt, create_graph=True)
    (dd,) = torch.autograd.grad((d * d).sum(), xt)
    return d.detach().numpy(), dd.numpy()


@pytest.mark.parametrize("include_initial", [False, True])
def test_cumulative_prod_gradient_is_exact_at_zeros(backend, include_initial):
    # zeros first, in the middle, last, twice in a slice: torch.autograd is exact there too
    x = np.array([[1.5, 0.0, 2.0, 0.0, 3.0], [0.0, 2.0, -1.0, 0.5, 2.0], [1.0, 2.0, 3.0, 0.5, 0.0]])
    g = np.random.default_rng(0).standard_normal((3, 6 if include_initial else 5))

    def f(torch, t):
        y = t.cumprod(1)
        return torch.cat([torch.ones_like(y[:, :1]), y], 1) if include_initial else y

    want, want2 = _torch_grads(x, g, f)
    xt = gt.asarray(x, backend=backend)
    with gt.GradientTape() as t2:
        t2.watch(xt)
        with gt.GradientTape() as t:
            t.watch(xt)
            y = gt.cumulative_prod(xt, axis=1, include_initial=include_initial)
            loss = gt.sum(y * gt.asarray(g, backend=backend))
        d = t.gradient(loss, xt)
        s = gt.sum(d * d)
    np.testing.assert_allclose(d.numpy(), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(t2.gradient(s, xt).numpy(), want2, rtol=1e-10, atol=1e-10)


def test_a_tensors_device_names_its_backend_for_array_api_code(backend):
    # Array API code creates beside an input with ``device=x.device``: that lands on x's backend even
    # while another backend is active, and the device still compares equal to its plain name
    name = backend.split(":")[0]
    other = "numpy" if name != "numpy" else gt.available_backends()[-1]
    x = gt.asarray([1.0, 2.0], backend=name)
    assert x.device == gt.asarray([0.0], backend=name).device and isinstance(x.device, str)
    with gt.use_backend(other):
        for y in (
            gt.zeros(3, device=x.device),
            gt.asarray([1.0], device=x.device),
            gt.full((2,), 1.0, device=x.device),
            gt.arange(3, device=x.device),
        ):
            assert y.backend == name and y.device == x.device
        assert (x * gt.asarray([2.0, 3.0], device=x.device)).numpy().tolist() == [2.0, 6.0]


def test_special_cases_libraries_get_wrong(backend):
    # floor_divide with exactly one infinite operand is floor(x1 / x2) (NumPy: NaN and -1), and
    # expm1 of a complex zero is +0 + 0j (NumPy: -0 for -0 + 0j)
    inf = float("inf")
    x1 = gt.asarray([inf, -inf, 1.0, -1.0, 1.0, 7.0])
    x2 = gt.asarray([2.0, 2.0, -inf, inf, inf, 2.0])
    with np.errstate(invalid="ignore"):
        got = (x1 // x2).numpy()
    np.testing.assert_array_equal(got, [inf, -inf, -0.0, -0.0, 0.0, 3.0])
    assert list(np.signbit(got)) == [False, True, True, True, False, False]
    z = gt.expm1(gt.asarray([complex(-0.0, 0.0)], dtype=gt.complex128)).numpy()[0]
    assert z == 0 and not np.signbit(z.real) and not np.signbit(z.imag)
    # tanh(+-inf + bj), b finite: +-1 with b's sign on the zero (C's ctanh: the sign of sin(2b))
    x = gt.asarray([complex(inf, 9932303639127196.0), complex(inf, -2.0), complex(-inf, 2.0)], dtype=gt.complex128)
    t = gt.tanh(x).numpy()
    np.testing.assert_array_equal(t.real, [1.0, 1.0, -1.0])
    assert list(np.signbit(t.imag)) == [False, True, False]


def test_array_api_tests_runner_reads_results_and_marks_known_quirks(tmp_path):
    from gradtape.conformance import array_api_tests as aat

    known = aat.known_quirks()
    assert known and all(t.startswith("array_api_tests/test_") and "::" in t and why for t, why in known.items())
    quirk = next(iter(known))
    name = quirk.split("::", 1)[1]
    xml = tmp_path / "junit.xml"
    from xml.sax.saxutils import quoteattr

    cases = [
        ("test_special_cases", name, "<failure message='x'/>"),
        ("test_creation_functions", "test_zeros", ""),
        ("test_inspection_functions.TestInspection", "test_devices", "<failure message='y'/>"),
        ("test_fft", "test_fft", "<skipped message='z'/>"),
    ]
    body = "".join(
        f"<testcase classname={quoteattr('array_api_tests.' + c)} name={quoteattr(n)}>{t}</testcase>"
        for c, n, t in cases
    )
    xml.write_text(f"<?xml version='1.0' encoding='utf-8'?><testsuites><testsuite>{body}</testsuite></testsuites>")
    passed, failed, skipped = aat.read_junit(xml)
    assert passed == ["array_api_tests/test_creation_functions.py::test_zeros"]
    assert failed == [quirk, "array_api_tests/test_inspection_functions.py::TestInspection::test_devices"]
    assert skipped == ["array_api_tests/test_fft.py::test_fft"]
    text, new = aat.summary(passed, failed, skipped, known)
    assert new == ["array_api_tests/test_inspection_functions.py::TestInspection::test_devices"]
    assert "1 of 3 passed" in text and "1 known suite quirks, 1 new failures" in text
    assert aat.VERSION == "2025.12" and "2025.12" in text
    assert "2024.12" in aat.summary(passed, failed, skipped, known, version="2024.12")[0]


# the 2024.12 standard's namespace, chapter by chapter (from the spec's stubs, array_api_stubs/_2024_12)
_STANDARD_2024_12 = {
    "creation": "arange asarray empty empty_like eye from_dlpack full full_like linspace meshgrid ones ones_like "
    "tril triu zeros zeros_like",
    "data_types": "astype can_cast finfo iinfo isdtype result_type",
    "elementwise": "abs acos acosh add asin asinh atan atan2 atanh bitwise_and bitwise_left_shift bitwise_invert "
    "bitwise_or bitwise_right_shift bitwise_xor ceil clip conj copysign cos cosh divide equal exp "
    "expm1 floor floor_divide greater greater_equal hypot imag isfinite isinf isnan less less_equal "
    "log log1p log2 log10 logaddexp logical_and logical_not logical_or logical_xor maximum minimum "
    "multiply negative nextafter not_equal positive pow real reciprocal remainder round sign signbit "
    "sin sinh square sqrt subtract tan tanh trunc",
    "indexing": "take take_along_axis",
    "linear_algebra": "matmul matrix_transpose tensordot vecdot",
    "manipulation": "broadcast_arrays broadcast_to concat expand_dims flip moveaxis permute_dims repeat reshape roll "
    "squeeze stack tile unstack",
    "searching": "argmax argmin count_nonzero nonzero searchsorted where",
    "sets": "unique_all unique_counts unique_inverse unique_values",
    "sorting": "argsort sort",
    "statistical": "cumulative_sum cumulative_prod max mean min prod std sum var",
    "utility": "all any diff",
    "linalg": "cholesky cross det diagonal eigh eigvalsh inv matmul matrix_norm matrix_power matrix_rank "
    "matrix_transpose outer pinv qr slogdet solve svd svdvals tensordot trace vecdot vector_norm",
    "fft": "fft ifft fftn ifftn rfft irfft rfftn irfftn hfft ihfft fftfreq rfftfreq fftshift ifftshift",
}
# what 2025.12 adds (the spec's CHANGELOG.md, v2025.12 "Additions")
_ADDED_2025_12 = {"manipulation": "broadcast_shapes", "sets": "isin", "linalg": "eig eigvals"}
_STANDARD_2025_12 = {
    c: " ".join(sorted(set(n.split()) | set(_ADDED_2025_12.get(c, "").split()))) for c, n in _STANDARD_2024_12.items()
}
# functions that take no tensor to differentiate (creation from values or shapes, dtype and shape queries)
_NOT_OPS = set(
    "arange asarray empty empty_like eye from_dlpack full full_like linspace ones ones_like zeros "
    "zeros_like can_cast finfo iinfo isdtype result_type fftfreq rfftfreq broadcast_shapes".split()
)
# the spec's own stubs (data-apis/array-api, as the array-api-tests checkout of docs/conformance.md has them)
_STUBS = Path(__file__).resolve().parent / "data" / "array_api_stubs" / "_2025_12"
_STUB_FILES = {
    "creation": "creation_functions",
    "data_types": "data_type_functions",
    "elementwise": "elementwise_functions",
    "indexing": "indexing_functions",
    "linear_algebra": "linear_algebra_functions",
    "manipulation": "manipulation_functions",
    "searching": "searching_functions",
    "sets": "set_functions",
    "sorting": "sorting_functions",
    "statistical": "statistical_functions",
    "utility": "utility_functions",
    "linalg": "linalg",
    "fft": "fft",
}


def test_the_chapter_lists_are_the_specs_own():
    for chapter, stem in _STUB_FILES.items():
        tree = ast.parse((_STUBS / f"{stem}.py.txt").read_text(encoding="utf-8"))
        names = {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")}
        assert names == set(_STANDARD_2025_12[chapter].split()), chapter


def test_the_whole_2025_12_namespace_is_there_and_every_array_function_is_a_checked_op():
    from gradtape.core import domains
    from gradtape.core import registry

    assert gt.__array_api_version__ == "2025.12"
    x = gt.ones(2)
    for version in (None, "2025.12", "2024.12", "2023.12"):  # code written for 2024.12 keeps working
        assert x.__array_namespace__(api_version=version) is gt
    for name in ("e", "inf", "nan", "newaxis", "pi", "__array_namespace_info__"):
        assert hasattr(gt, name), name
    for dt in ("bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 complex64 complex128").split():
        assert isinstance(getattr(gt, dt), gt.DType), dt
    for chapter, names in _STANDARD_2025_12.items():
        ns = getattr(gt, chapter) if chapter in ("linalg", "fft") else gt
        for name in names.split():
            fn = getattr(ns, name, None)
            assert callable(fn), f"{chapter}: {name} is missing"
            if name in _NOT_OPS:
                continue
            op = getattr(fn, "op", None)
            assert op is not None, f"{chapter}: {name} is not a registered op (declare it, or composite())"
            assert registry.get_op(op.name) is op and op.public is fn
            assert domains.op_cases(op), f"{name} has no domain"
            if op.differentiable:
                assert op.grad is not None, f"{name} is differentiable but has no rule"
    assert registry.get_op("isin").chapter == "sets" and not registry.get_op("isin").differentiable
    assert {registry.get_op(n).chapter for n in ("linalg.eig", "linalg.eigvals")} == {"linalg"}


def test_2025_12_returns_tuples(backend):
    a, b = gt.asarray([1.0, 2.0, 3.0]), gt.asarray([[1.0], [2.0]])
    assert type(gt.broadcast_arrays(a, b)) is tuple
    assert type(gt.meshgrid(a, a)) is tuple
    # a tuple (a subclass that a list also joins, as the earlier versions' list did: SciPy 1.17)
    assert isinstance(gt.__array_namespace_info__().devices(), tuple)


def test_broadcast_shapes():
    assert gt.broadcast_shapes() == ()
    assert gt.broadcast_shapes((2, 3)) == (2, 3)
    assert gt.broadcast_shapes((2, 1), (3,), ()) == (2, 3)
    assert gt.broadcast_shapes((1, 0), (5, 1, 1)) == (5, 1, 0)
    assert gt.broadcast_shapes([4, 1, 3], (1, 2, 1)) == (4, 2, 3)
    out = gt.broadcast_shapes((np.int64(2), 1), (1, 3))
    assert out == (2, 3) and all(type(n) is int for n in out)
    for bad in (((2,), (3,)), ((2, 3), (3, 3)), ((0,), (2,))):
        with pytest.raises(ValueError, match="do not broadcast"):
            gt.broadcast_shapes(*bad)
    rng = np.random.default_rng(0)
    for _ in range(20):
        shapes = [tuple(int(n) for n in rng.choice([1, 1, 3], size=rng.integers(0, 4))) for _ in range(3)]
        assert gt.broadcast_shapes(*shapes) == np.broadcast_shapes(*shapes)


def test_isin(backend):
    x1 = gt.asarray([[1, 2, 3], [4, 5, 2]])
    x2 = gt.asarray([2, 4, 9])
    got = gt.isin(x1, x2)
    assert got.dtype == gt.bool and got.shape == (2, 3) and got.backend == backend.split(":")[0]
    assert got.numpy().tolist() == [[False, True, False], [True, False, True]]
    assert gt.isin(x1, x2, invert=True).numpy().tolist() == [[True, False, True], [False, True, False]]
    assert gt.isin(x1, 5).numpy().tolist() == [[False, False, False], [False, True, False]]
    s = gt.isin(4, x2)  # a scalar x1: a 0-d result
    assert s.shape == () and bool(s) and not bool(gt.isin(7, x2)) and bool(gt.isin(7, x2, invert=True))
    # mixed integer dtypes promote (torch alone refuses uint16 against int8); an empty x2 holds nothing
    u = gt.asarray([1, 2, 300], dtype=gt.uint16)
    assert gt.isin(u, gt.asarray([2, -1], dtype=gt.int8)).numpy().tolist() == [False, True, False]
    assert gt.isin(x1, gt.asarray([], dtype=gt.int64)).numpy().tolist() == [[False] * 3] * 2
    # by value equality: NaN is in nothing, -0.0 is 0.0
    f = gt.asarray([0.0, float("nan"), 1.5, -2.0])
    assert gt.isin(f, gt.asarray([-0.0, float("nan"), 1.5])).numpy().tolist() == [True, False, True, False]
    w = gt.Variable([1.0, 2.0])
    with gt.GradientTape() as tape:
        y = gt.isin(w, gt.asarray([2.0]))
    assert tape.gradient(gt.sum(gt.astype(y, gt.float32)), w) is None


def test_isin_without_a_native_isin_agrees_with_numpy(backend):
    """The sort-and-search fallback (array_api_strict below 2025.12) on this backend's namespace."""
    from gradtape import backends
    from gradtape.ops.sets import _isin_sorted

    b = backends.get(backend.split(":")[0])
    rng = np.random.default_rng(1)
    cases = [
        (rng.integers(-4, 4, (3, 4)), rng.integers(-4, 4, 5)),
        (rng.integers(0, 3, 6), np.array([1])),
        (np.array([0.5, -0.0, np.nan, 2.0]), np.array([np.nan, 0.0, 2.0, 2.0])),
        (np.array([1 + 1j, 2 + 0j]), np.array([2 + 0j, 3j])),
        (np.zeros((2, 0)), np.ones(3)),
        (np.array([0, 7, 300], dtype=np.uint16), np.array([300, 0], dtype=np.uint16)),
        (np.ones(3), np.zeros(0)),
    ]
    for a1, a2 in cases:
        for invert in (False, True):
            got = _isin_sorted(b.xp, b.asarray(a1), b.asarray(a2), invert)
            np.testing.assert_array_equal(b.to_numpy(got), np.isin(a1, a2, invert=invert))


def test_expand_dims_takes_a_tuple_of_axes(backend):
    x = gt.asarray(np.arange(6.0).reshape(2, 3))
    for axis, shape in [
        (0, (1, 2, 3)),
        (-1, (2, 3, 1)),
        ((0, 1), (1, 1, 2, 3)),
        ((0, -1, 2), (1, 2, 1, 3, 1)),
        ((-1, -4), (1, 2, 3, 1)),
        ((3, 1), (2, 1, 3, 1)),
        ((), (2, 3)),
    ]:
        y = gt.expand_dims(x, axis=axis)
        assert y.shape == shape, axis
        np.testing.assert_array_equal(y.numpy().reshape(2, 3), x.numpy())
    assert gt.expand_dims(gt.asarray(1.0), axis=(0, -1)).shape == (1, 1)
    for bad in (3, -4, (0, 4), (-5,)):
        with pytest.raises(IndexError, match="out of bounds"):
            gt.expand_dims(x, axis=bad)
    for bad in ((0, 0), (1, -3)):
        with pytest.raises(ValueError, match="twice"):
            gt.expand_dims(x, axis=bad)
    w = gt.Variable(np.arange(6.0).reshape(2, 3))
    with gt.GradientTape() as tape:
        y = gt.expand_dims(w, axis=(0, -1, 2)) * 2.0
    g = tape.gradient(y, w)
    assert g.shape == (2, 3) and np.all(g.numpy() == 2.0)


def test_permute_dims_takes_negative_axes(backend):
    a = np.arange(24.0).reshape(2, 3, 4)
    x = gt.asarray(a)
    for axes in [(-1, 0, 1), (2, -3, -2), (-1, -2, -3)]:
        np.testing.assert_array_equal(gt.permute_dims(x, axes).numpy(), np.transpose(a, [n % 3 for n in axes]))
    for bad in ((0, 1), (0, 1, -3), (0, 1, 3)):
        with pytest.raises((ValueError, IndexError)):
            gt.permute_dims(x, bad)
    w = gt.Variable(a)
    with gt.GradientTape() as tape:
        y = gt.permute_dims(w, (-1, 0, -2))
        loss = gt.sum(y * gt.asarray(np.arange(24.0).reshape(4, 2, 3)))
    np.testing.assert_array_equal(
        tape.gradient(loss, w).numpy(), np.transpose(np.arange(24.0).reshape(4, 2, 3), (1, 2, 0))
    )


def test_searchsorted_takes_a_python_scalar(backend):
    x = gt.asarray([1.0, 2.0, 2.0, 3.5])
    for v, side, want in [(2.0, "left", 1), (2.0, "right", 3), (2, "left", 1), (0, "left", 0), (9.5, "right", 4)]:
        got = gt.searchsorted(x, v, side=side)
        assert got.shape == () and got.dtype == gt.int64 and int(got) == want, (v, side)
    xi = gt.asarray([1, 3, 5], dtype=gt.int32)
    assert int(gt.searchsorted(xi, 3)) == 1 and int(gt.searchsorted(xi, 3, side="right")) == 2
    assert int(gt.searchsorted(xi, 3.5)) == 2 and int(gt.searchsorted(xi, 0.5)) == 0  # a float beside ints
    assert int(gt.searchsorted(gt.asarray([3.0, 1.0, 2.0]), 2.5, sorter=[1, 2, 0])) == 2
    xu = gt.asarray([1, 70000, 4000000000], dtype=gt.uint32)  # torch has no uint32 searchsorted
    assert int(gt.searchsorted(xu, 70000)) == 1 and gt.searchsorted(xu, xu, side="right").numpy().tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="side"):
        gt.searchsorted(x, 1.0, side="middle")


def test_searchsorted_takes_a_sorter_tensor_or_list(backend):
    x = gt.asarray([3.0, 1.0, 2.0])
    for sorter in (gt.argsort(x), [1, 2, 0]):
        got = gt.searchsorted(x, gt.asarray([0.5, 2.5, 4.0]), sorter=sorter, side="right")
        assert got.numpy().tolist() == [0, 2, 3] and got.dtype == gt.int64
