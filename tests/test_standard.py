"""Semantics of the Array API standard that the generated per-op tests do not sample: exact
gradients at special points, special cases, signatures (the standard's own test suite,
data-apis/array-api-tests, is run separately: see docs/conformance.md)."""
from __future__ import annotations

import numpy as np
import pytest

import gradtape as gt


def _torch_grads(x, g, f, include_initial=False):
    torch = pytest.importorskip("torch")
    xt = torch.tensor(x, requires_grad=True)
    d, = torch.autograd.grad((f(torch, xt) * torch.tensor(g)).sum(), xt, create_graph=True)
    dd, = torch.autograd.grad((d * d).sum(), xt)
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
        for y in (gt.zeros(3, device=x.device), gt.asarray([1.0], device=x.device),
                  gt.full((2,), 1.0, device=x.device), gt.arange(3, device=x.device)):
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
    cases = [("test_special_cases", name, "<failure message='x'/>"),
             ("test_creation_functions", "test_zeros", ""),
             ("test_inspection_functions.TestInspection", "test_devices", "<failure message='y'/>"),
             ("test_fft", "test_fft", "<skipped message='z'/>")]
    body = "".join(f"<testcase classname={quoteattr('array_api_tests.' + c)} name={quoteattr(n)}>{t}</testcase>"
                   for c, n, t in cases)
    xml.write_text(f"<?xml version='1.0' encoding='utf-8'?><testsuites><testsuite>{body}</testsuite></testsuites>")
    passed, failed, skipped = aat.read_junit(xml)
    assert passed == ["array_api_tests/test_creation_functions.py::test_zeros"]
    assert failed == [quirk, "array_api_tests/test_inspection_functions.py::TestInspection::test_devices"]
    assert skipped == ["array_api_tests/test_fft.py::test_fft"]
    text, new = aat.summary(passed, failed, skipped, known)
    assert new == ["array_api_tests/test_inspection_functions.py::TestInspection::test_devices"]
    assert "1 of 3 passed" in text and "1 known suite quirks, 1 new failures" in text


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
# functions that take no tensor to differentiate (creation from values or shapes, dtype queries)
_NOT_OPS = set("arange asarray empty empty_like eye from_dlpack full full_like linspace ones ones_like zeros "
               "zeros_like can_cast finfo iinfo isdtype result_type fftfreq rfftfreq".split())


def test_the_whole_2024_12_namespace_is_there_and_every_array_function_is_a_checked_op():
    from gradtape import domains, registry
    assert gt.__array_api_version__ == "2024.12"
    for name in ("e", "inf", "nan", "newaxis", "pi", "__array_namespace_info__"):
        assert hasattr(gt, name), name
    for dt in ("bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 complex64 "
               "complex128").split():
        assert isinstance(getattr(gt, dt), gt.DType), dt
    for chapter, names in _STANDARD_2024_12.items():
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


def test_searchsorted_takes_a_sorter_tensor_or_list(backend):
    x = gt.asarray([3.0, 1.0, 2.0])
    for sorter in (gt.argsort(x), [1, 2, 0]):
        got = gt.searchsorted(x, gt.asarray([0.5, 2.5, 4.0]), sorter=sorter, side="right")
        assert got.numpy().tolist() == [0, 2, 3] and got.dtype == gt.int64
