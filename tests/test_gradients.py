"""Every op of the registry, checked from its declared domain (DESIGN.md "Conformance").

The tests are generated from ``gradtape.core.registry.ops()`` at collection time: for each op and each
Case its ``domain=`` expands to, on every selected backend,

* the first-order gradient (tape vs central finite differences, float64 and complex128),
* the second-order gradient (nested tapes vs finite differences of the first-order gradient)
  and the gradient's dtype on float32 / complex64 inputs, for every differentiable op's first
  real and first complex case,
* the forward value and dtype against NumPy (``array_api_compat.numpy``),

each through the case's ``Arg.via`` and ``map_outputs`` maps (:mod:`gradtape.core.domains`).

Plus meta-tests (every built-in op declares a domain with at least one case; every differentiable
op has a rule; the element-wise chapter of the standard is complete), the non-differentiable ops
of API.md §4, and the ``LookupError`` of a floating op without a rule.
"""

from __future__ import annotations

import itertools
import warnings
import zlib

import array_api_compat.numpy as npx
import numpy as np
import pytest

import gradtape as gt
from gradtape import testing
from gradtape.core import domains
from gradtape.core import registry

# ---------------------------------------------------------------------------------------- the cases
_OPS = [op for op in registry.ops() if op.chapter != "user"]


def _rng(*parts):
    """A generator seeded by the test's identity: the same numbers on every run and backend."""
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def _params(ops, select=None):
    out = []
    for op in ops:
        cases = domains.op_cases(op)
        chosen = range(len(cases)) if select is None else select(cases)
        for i in chosen:
            out.append(pytest.param(op.name, i, id=f"{op.name}-{i}-{cases[i]!r}"))
    return out


_DIFF_OPS = [op for op in _OPS if op.differentiable and op.grad is not None]
FIRST_ORDER = _params(_DIFF_OPS)
SECOND_ORDER = _params(_DIFF_OPS, domains.first_real_and_complex)  # (each new shape is an XLA compile on JAX)
FLOAT32 = SECOND_ORDER


def _case(name, i):
    op = registry.get_op(name)
    return op, domains.op_cases(op)[i]


# ---------------------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("name,i", FIRST_ORDER)
def test_first_order_gradient_matches_finite_differences(backend, name, i):
    op, case = _case(name, i)
    report = testing.check_case(op, case, backend, _rng(name, i), order=1)
    assert report.passed, str(report)


@pytest.mark.parametrize("name,i", SECOND_ORDER)
def test_second_order_gradient_matches_finite_differences(backend, name, i):
    op, case = _case(name, i)
    report = testing.check_case(op, case, backend, _rng(name, i, 2), order=2)
    assert report.passed, str(report)


_COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}


def _tensors(case, values, backend, dtype=None):
    """The drawn arrays of ``case`` as tensors on ``backend`` (cast to ``dtype`` if floating)."""
    leaves, flags, rebuild = testing.case_leaves(case, values)
    ts = []
    for a in leaves:
        if dtype is not None and a.dtype.kind in "fc":
            a = a.astype(dtype if a.dtype.kind == "f" else _COMPLEX_OF[dtype])
        ts.append(gt.asarray(a, backend=backend))
    return ts, flags, rebuild


@pytest.mark.parametrize("name,i", FLOAT32)
def test_gradient_keeps_float32_dtypes(backend, name, i):
    """On float32 / complex64 inputs each gradient has its input's dtype and shape, and agrees
    with the float64 gradient to single precision."""
    op, case = _case(name, i)
    values, kwargs = case.draw(_rng(name, i, "f32"))
    grads = {}
    for dt in ("float32", "float64"):
        ts, flags, rebuild = _tensors(case, values, backend, dt)
        xs = [t for t, f in zip(ts, flags) if f and t.dtype.differentiable]
        if not xs:
            pytest.skip("no differentiable argument in this case")
        with gt.GradientTape() as tape:
            tape.watch(xs)
            ys = testing.flat_outputs(testing.case_outputs(case, op.public(*rebuild(ts), **kwargs)))
        ys = [y for y in ys if y.dtype.differentiable]
        if not ys:
            pytest.skip("no differentiable output in this case")
        gs = tape.gradient(ys, xs)
        if dt == "float32":
            for x, g in zip(xs, gs):
                if g is not None:
                    assert g.dtype == x.dtype and g.shape == x.shape, (g.dtype, x.dtype, g.shape, x.shape)
        grads[dt] = [None if g is None else g.numpy() for g in gs]
    # JAX on a GPU multiplies float32 matrices in TF32 by default (its documented precision): 10
    # bits of mantissa, so its float32 gradients through matmul-like ops are that much further off
    tol = 3e-3 if backend.startswith("jax:gpu") else 2e-4
    for g32, g64 in zip(grads["float32"], grads["float64"]):
        assert (g32 is None) == (g64 is None)
        if g32 is not None:
            np.testing.assert_allclose(g32, g64, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------- forward
def _np_setitem(x, key, value):
    out = np.array(x, copy=True)
    out[key] = value
    return out


def _np_index_add(values, key, shape):
    out = np.zeros(shape, dtype=values.dtype)
    np.add.at(out, key, values)
    return out


def _np_astype(x, dtype):
    if np.iscomplexobj(x) and not np.issubdtype(np.dtype(dtype), np.complexfloating):
        x = np.real(x)  # tf.cast semantics (the standard leaves it open)
    return x.astype(dtype)


def _np_tf_split(x, num_or_size_splits, axis=0):
    """tf.split on NumPy: equal pieces, or the sizes listed (one -1: the rest)."""
    if isinstance(num_or_size_splits, int):
        return np.split(x, num_or_size_splits, axis=axis)
    sizes = list(num_or_size_splits)
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def _np_tf_pad(x, paddings, mode="CONSTANT", constant_values=0):
    """tf.pad on NumPy (TF's REFLECT and SYMMETRIC are NumPy's reflect and symmetric)."""
    if mode == "CONSTANT":
        return np.pad(x, paddings, constant_values=constant_values)
    return np.pad(x, paddings, mode=mode.lower())


def _np_imag(x):
    return np.imag(x) if np.iscomplexobj(x) else np.zeros_like(x)


# NumPy references for the ops whose NumPy function has another name or signature; every other op
# is compared with ``array_api_compat.numpy.<name>`` called with the same arguments.
_REFERENCE = {
    "getitem": lambda x, key: np.asarray(x[key]),
    "setitem": _np_setitem,
    "index_add": _np_index_add,
    "identity": lambda x: x,
    "to_device": lambda x, device: x,
    "astype": _np_astype,
    "imag": _np_imag,
    "multiply_no_nan": lambda x, y: np.where(y == 0, 0, x * y),
    "divide_no_nan": lambda x, y: np.where(y == 0, 0, x / np.where(y == 0, 1, y)),
    "xdivy": lambda x, y: np.where(x == 0, 0, x / y),
    "einsum": lambda *operands, subscripts: np.einsum(subscripts, *operands),  # (NumPy takes the pattern first)
    "split": _np_tf_split,  # (TensorFlow's, not NumPy's)
    "pad": _np_tf_pad,
}


def _reference(name):
    """``npx.<name>``; a dotted name (``linalg.cholesky``, ``fft.rfft``) looks in the extension."""
    ref = _REFERENCE.get(name)
    if ref is not None:
        return ref
    ref = npx
    for part in name.split("."):
        ref = getattr(ref, part, None)
    return ref


# the chapters of the standard: each of their ops must have a NumPy reference
_STANDARD_CHAPTERS = {
    "elementwise",
    "creation",
    "manipulation",
    "statistical",
    "linear_algebra",
    "indexing",
    "searching",
    "sorting",
    "sets",
    "utility",
    "data_types",
    "linalg",
    "fft",
}
FORWARD_CASES = _params([op for op in _OPS if _reference(op.name) is not None])


def test_every_op_of_the_standard_has_a_numpy_reference():
    missing = [op.name for op in _OPS if op.chapter in _STANDARD_CHAPTERS and _reference(op.name) is None]
    assert missing == [], f"ops of the standard's chapters without a NumPy reference: {missing}"


@pytest.mark.parametrize("name,i", FORWARD_CASES)
def test_forward_matches_numpy(backend, name, i):
    op, case = _case(name, i)
    ref = _reference(name)
    assert ref is not None, f"no NumPy reference for {name}: add one to _REFERENCE"
    values, kwargs = case.draw(_rng(name, i, "fwd"))
    # float32 for the first case of each op (dtype handling is shape-independent; on JAX each new
    # shape and dtype is an XLA compilation)
    for dt, rtol in (("float64", 1e-10), ("float32", 2e-6))[: 2 if i == 0 else 1]:
        ts, _, rebuild = _tensors(case, values, backend, dt)
        got = testing.case_outputs(case, op.public(*rebuild(ts), **kwargs))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = testing.case_outputs(case, ref(*rebuild([t.numpy() for t in ts]), **kwargs))
        got = testing.flat_outputs(got)
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            w = np.asarray(w)
            # (dask: a length that depends on the data, nonzero's or unique's, is NaN until computed)
            shape = g.numpy().shape if any(d != d for d in g.shape) else g.shape
            assert shape == w.shape, (g.shape, w.shape)
            assert g.dtype.name == w.dtype.name, (g.dtype, w.dtype)
            assert g.backend == backend.split(":")[0]
            np.testing.assert_allclose(g.numpy(), w, rtol=rtol, atol=rtol)


# ---------------------------------------------------------------------------------------- meta
def test_every_builtin_op_declares_a_domain_with_cases():
    missing = [op.name for op in registry.ops() if op.chapter != "user" and not domains.op_cases(op)]
    assert missing == [], f"ops without a domain (declare domain= next to the op): {missing}"


def test_every_differentiable_op_has_a_rule():
    missing = [op.name for op in registry.ops() if op.differentiable and op.grad is None and op.chapter != "user"]
    assert missing == [], f"differentiable ops without a gradient rule: {missing}"


def test_every_builtin_op_has_a_public_function_its_cases_can_call():
    import inspect

    for op in _OPS:
        assert op.public is not None, f"op {op.name} has no public function"
        sig = inspect.signature(op.public)
        for case in domains.op_cases(op):
            sig.bind(*case.args, **case.kwargs)  # a TypeError names the op's broken case


def test_complex_flag_adds_complex_cases():
    assert any(domains.is_complex_case(c) for c in domains.op_cases(registry.get_op("sin")))
    assert any(domains.is_complex_case(c) for c in domains.op_cases(registry.get_op("sum")))
    assert any(domains.is_complex_case(c) for c in domains.op_cases(registry.get_op("matmul")))
    assert domains.Case(domains.INT[3]).complex() is None


_ELEMENTWISE_2024_12 = [
    "abs",
    "acos",
    "acosh",
    "add",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bitwise_and",
    "bitwise_left_shift",
    "bitwise_invert",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "ceil",
    "clip",
    "conj",
    "copysign",
    "cos",
    "cosh",
    "divide",
    "equal",
    "exp",
    "expm1",
    "floor",
    "floor_divide",
    "greater",
    "greater_equal",
    "hypot",
    "imag",
    "isfinite",
    "isinf",
    "isnan",
    "less",
    "less_equal",
    "log",
    "log1p",
    "log2",
    "log10",
    "logaddexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "nextafter",
    "not_equal",
    "positive",
    "pow",
    "real",
    "reciprocal",
    "remainder",
    "round",
    "sign",
    "signbit",
    "sin",
    "sinh",
    "square",
    "sqrt",
    "subtract",
    "tan",
    "tanh",
    "trunc",
]
# issue 2 §5: the other chapters' functions that must be ops with rules and domains
_OTHER_OPS = [
    "sum",
    "prod",
    "mean",
    "var",
    "std",
    "max",
    "min",
    "cumulative_sum",
    "cumulative_prod",
    "matmul",
    "tensordot",
    "vecdot",
    "matrix_transpose",
    "reshape",
    "expand_dims",
    "squeeze",
    "permute_dims",
    "concat",
    "stack",
    "broadcast_to",
    "flip",
    "where",
    "astype",
    "take",
    "tril",
    "triu",
    "argmax",
    "argmin",
    "nonzero",
]


@pytest.mark.parametrize("name", _ELEMENTWISE_2024_12 + _OTHER_OPS)
def test_namespace_function_is_a_registered_op(name):
    op = registry.get_op(name)
    assert getattr(gt, name) is op.public
    assert op.domain is not None


# ---------------------------------------------------------------------------------------- API.md §4
_NOT_DIFFERENTIABLE = {
    "round": lambda x: gt.round(x),
    "floor": lambda x: gt.floor(x),
    "ceil": lambda x: gt.ceil(x),
    "trunc": lambda x: gt.trunc(x),
    "floor_divide": lambda x: gt.floor_divide(x, 0.7),
    "argmax": lambda x: gt.argmax(x),
    "argmin": lambda x: gt.argmin(x, axis=0),
    "equal": lambda x: gt.equal(x, 0.5),
    "not_equal": lambda x: gt.not_equal(x, 0.5),
    "less": lambda x: gt.less(x, 0.5),
    "less_equal": lambda x: gt.less_equal(x, 0.5),
    "greater": lambda x: x > 0.5,
    "greater_equal": lambda x: x >= 0.5,
    "astype_int": lambda x: gt.astype(x, gt.int64),
    "astype_int32": lambda x: gt.astype(x, "int32"),
    "astype_bool": lambda x: gt.astype(x, gt.bool),
    "nonzero": lambda x: gt.nonzero(x)[0],
    "isfinite": lambda x: gt.isfinite(x),
    "signbit": lambda x: gt.signbit(x),
}


@pytest.mark.parametrize("what", sorted(_NOT_DIFFERENTIABLE))
def test_non_differentiable_ops_give_none_or_zeros(backend, what):
    f = _NOT_DIFFERENTIABLE[what]
    x = gt.constant([0.3, -1.7, 2.5, 0.0])
    for unconnected, expected in (("none", None), ("zero", [0.0, 0.0, 0.0, 0.0])):
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
            target = y if y.dtype.differentiable else gt.astype(y, gt.float32)
        g = tape.gradient(target, x, unconnected_gradients=unconnected)
        if expected is None:
            assert g is None
        else:
            assert g.dtype == gt.float32 and g.shape == (4,)
            np.testing.assert_array_equal(g.numpy(), expected)


@pytest.mark.parametrize(
    "name",
    [
        "round",
        "floor",
        "ceil",
        "trunc",
        "floor_divide",
        "argmax",
        "argmin",
        "equal",
        "not_equal",
        "less",
        "less_equal",
        "greater",
        "greater_equal",
        "nonzero",
        "isnan",
        "isinf",
        "isfinite",
        "signbit",
        "logical_not",
    ],
)
def test_non_differentiable_ops_are_registered_so(name):
    assert registry.get_op(name).differentiable is False


def test_integer_target_warns_and_gives_none(backend):
    x = gt.constant([0.3, -1.7, 2.5])
    with gt.GradientTape() as tape:
        tape.watch(x)
        i = gt.argmax(x)
    with pytest.warns(UserWarning, match="target tensor must be floating"):
        assert tape.gradient(i, x) is None


def test_sign_has_a_zero_gradient_not_none(backend):
    x = gt.constant([0.3, -1.7, 0.0])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sign(x) * 2.0
    g = tape.gradient(y, x)
    assert g is not None
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 0.0])


_names = (f"_test_gradients_no_rule_{k}" for k in itertools.count())


def test_floating_op_without_rule_is_lookup_error(backend):
    name = next(_names)
    f = gt.register_op(name, lambda xp, x: xp.sin(x))
    x = gt.constant([0.5, 1.0])
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x) * 2.0
    np.testing.assert_allclose(y.numpy(), 2 * np.sin([0.5, 1.0]), rtol=1e-6)
    with pytest.raises(LookupError, match=f"^gradient registry has no entry for: {name}$"):
        tape.gradient(y, x)


@pytest.mark.parametrize("form", ["xp", "tf"])
def test_register_op_takes_the_rule_form_it_is_told(backend, form):
    """``register_op(..., rule_form=...)`` declares the rule's form, whatever its first parameter is
    called: gradtape's ``rule(xp, op, grad)`` runs on the walk's namespace, TensorFlow's
    ``rule(op, grad)`` on Tensors."""
    seen = []

    def xp_rule(ns, op, grad):  # gradtape's form, its namespace not named xp
        seen.append(ns)
        return grad * ns.cos(op.inputs[0])

    def tf_rule(xp, grad):  # TensorFlow's form, its op named xp
        seen.append(type(xp.inputs[0]))
        return grad * gt.cos(xp.inputs[0])

    f = gt.register_op(next(_names), lambda xp, x: xp.sin(x), xp_rule if form == "xp" else tf_rule, rule_form=form)
    x = gt.constant([0.5, 1.0], dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.cos([0.5, 1.0]), rtol=1e-12)
    assert len(seen) == 1
    assert (seen[0] is gt.Tensor) == (form == "tf")


# ---------------------------------------------------------------------------------------- conventions
def test_subgradient_conventions(backend):
    """API.md §5: abs'(0) = 0, max ties split evenly, maximum ties go to x1, clip passes at bounds."""
    x = gt.constant([0.0, 1.0, -1.0])
    ties = gt.constant([3.0, 1.0, 3.0])
    with gt.GradientTape(persistent=True) as t:
        t.watch([x, ties])
        a = gt.abs(x)
        m = gt.max(ties)
        mn = gt.min(-ties)
        mx = gt.maximum(x, gt.zeros(3))
        mi = gt.minimum(x, gt.zeros(3))
        c = gt.clip(x, min=-1.0, max=1.0)
    np.testing.assert_array_equal(t.gradient(a, x).numpy(), [0.0, 1.0, -1.0])
    np.testing.assert_array_equal(t.gradient(m, ties).numpy(), [0.5, 0.0, 0.5])
    np.testing.assert_array_equal(t.gradient(mn, ties).numpy(), [-0.5, 0.0, -0.5])
    np.testing.assert_array_equal(t.gradient(mx, x).numpy(), [1.0, 1.0, 0.0])
    np.testing.assert_array_equal(t.gradient(mi, x).numpy(), [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(t.gradient(c, x).numpy(), [1.0, 1.0, 1.0])


def test_prod_gradient_is_exact_with_zeros(backend):
    """prod's rule multiplies the other elements (no division by x): exact where x has zeros."""
    for values, expected in (
        ([2.0, 0.0, 3.0], [0.0, 6.0, 0.0]),
        ([0.0, 0.0, 3.0], [0.0, 0.0, 0.0]),
        ([2.0, 5.0, 3.0], [15.0, 6.0, 10.0]),
    ):
        x = gt.constant(values)
        with gt.GradientTape() as t:
            t.watch(x)
            y = gt.prod(x)
        np.testing.assert_array_equal(t.gradient(y, x).numpy(), expected)
    x = gt.constant([[2.0, 0.0], [0.0, 0.0]])
    with gt.GradientTape() as t:
        t.watch(x)
        y = gt.prod(x, axis=0)
    np.testing.assert_array_equal(t.gradient(y, x).numpy(), [[0.0, 0.0], [2.0, 0.0]])
    with gt.GradientTape() as t:
        t.watch(x)
        y = gt.prod(x, axis=1)
    np.testing.assert_array_equal(t.gradient(y, x).numpy(), [[0.0, 2.0], [0.0, 0.0]])


def test_complex_convention_abs_squared(backend):
    """API.md §4: for L = |z|^2 the gradient is 2z."""
    z = gt.constant(np.array([1 + 2j, -0.5 + 0.25j], dtype=np.complex128))
    with gt.GradientTape() as t:
        t.watch(z)
        loss = gt.sum(gt.real(z * gt.conj(z)))
    np.testing.assert_allclose(t.gradient(loss, z).numpy(), 2 * z.numpy(), rtol=1e-12)


def test_numeric_gradient_complex_convention():
    z = np.array([1 + 2j, -0.5 + 0.25j])
    (g,) = testing.numeric_gradient(lambda a: float(np.sum(np.abs(a) ** 2)), [z])
    np.testing.assert_allclose(g, 2 * z, rtol=1e-8)


# ---------------------------------------------------------------------------------------- creation
def test_creation_functions(backend):
    """The creation functions (plain functions, not ops): values, TF's default dtypes, the backend."""
    name = backend.split(":")[0]

    def check(t, expected, dtype):
        assert isinstance(t, gt.Tensor) and t.backend == name
        assert t.dtype == dtype, (t.dtype, dtype)
        np.testing.assert_allclose(t.numpy(), expected, rtol=1e-6, atol=1e-7)

    check(gt.zeros((2, 3)), np.zeros((2, 3)), gt.float32)
    check(gt.ones(3, dtype=gt.float64), np.ones(3), gt.float64)
    check(gt.full((2,), 3), [3, 3], gt.int64)
    check(gt.full((2,), 1.5), [1.5, 1.5], gt.float32)
    check(gt.full((2,), True), [True, True], gt.bool)
    check(gt.arange(5), np.arange(5), gt.int64)
    check(gt.arange(1, 7, 2), [1, 3, 5], gt.int64)
    check(gt.arange(0.0, 1.0, 0.25), [0.0, 0.25, 0.5, 0.75], gt.float32)
    check(gt.linspace(0.0, 1.0, 5), np.linspace(0, 1, 5), gt.float32)
    check(gt.linspace(0.0, 1.0, 4, endpoint=False), [0.0, 0.25, 0.5, 0.75], gt.float32)
    check(gt.eye(2, 3, k=1), np.eye(2, 3, k=1), gt.float32)
    assert gt.empty((2, 4)).shape == (2, 4)
    x = gt.constant([[1.0, 2.0], [3.0, 4.0]], dtype=gt.float64)
    check(gt.zeros_like(x), np.zeros((2, 2)), gt.float64)
    check(gt.ones_like(x, dtype=gt.float32), np.ones((2, 2)), gt.float32)
    check(gt.full_like(x, 7.0), np.full((2, 2), 7.0), gt.float64)
    check(gt.tril(x), np.tril(x.numpy()), gt.float64)
    check(gt.triu(x, k=1), np.triu(x.numpy(), k=1), gt.float64)
    check(gt.asarray([1, 2], dtype=gt.float32), [1.0, 2.0], gt.float32)


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid_matches_numpy_and_is_differentiable(backend, indexing):
    a = gt.constant([1.0, 2.0, 3.0])
    b = gt.constant([10.0, 20.0])
    with gt.GradientTape() as tape:
        tape.watch([a, b])
        xs, ys = gt.meshgrid(a, b, indexing=indexing)
        loss = gt.sum(xs * ys)
    rx, ry = np.meshgrid(a.numpy(), b.numpy(), indexing=indexing)
    np.testing.assert_array_equal(xs.numpy(), rx)
    np.testing.assert_array_equal(ys.numpy(), ry)
    ga, gb = tape.gradient(loss, [a, b])
    np.testing.assert_allclose(ga.numpy(), [30.0, 30.0, 30.0])  # d/da_i sum_j a_i b_j = sum(b)
    np.testing.assert_allclose(gb.numpy(), [6.0, 6.0])
