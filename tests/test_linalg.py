"""``gt.linalg``: what the registry-generated tests (tests/test_gradients.py) cannot see.

Signatures against the 2025.12 stubs, the result namedtuples, errors that name the op, batch shapes
and broadcasting, ``upper=True``, ``full_matrices``, ``mode='complete'``, negative powers, the
degenerate cases that raise instead of returning a wrong number, ``eig``/``eigvals`` (2025.12, complex
outputs, the host path), zero cotangents at degenerate inputs, and a few higher-order checks.
"""

from __future__ import annotations

import ast
import inspect
import math
import types
from pathlib import Path

import numpy as np
import pytest

import gradtape as gt

# the 2025.12 stub signatures (annotations dropped), checked against the standard's stub file itself
# (tests/data/array_api_stubs/, vendored with its license)
STUB_SIGNATURES = {
    "cholesky": "(x, /, *, upper=False)",
    "cross": "(x1, x2, /, *, axis=-1)",
    "det": "(x, /)",
    "diagonal": "(x, /, *, offset=0)",
    "eig": "(x, /)",
    "eigh": "(x, /)",
    "eigvals": "(x, /)",
    "eigvalsh": "(x, /)",
    "inv": "(x, /)",
    "matmul": "(x1, x2, /)",
    "matrix_norm": "(x, /, *, keepdims=False, ord='fro')",
    "matrix_power": "(x, n, /)",
    "matrix_rank": "(x, /, *, rtol=None)",
    "matrix_transpose": "(x, /)",
    "outer": "(x1, x2, /)",
    "pinv": "(x, /, *, rtol=None)",
    "qr": "(x, /, *, mode='reduced')",
    "slogdet": "(x, /)",
    "solve": "(x1, x2, /)",
    "svd": "(x, /, *, full_matrices=True)",
    "svdvals": "(x, /)",
    "tensordot": "(x1, x2, /, *, axes=2)",
    "trace": "(x, /, *, offset=0, dtype=None)",
    "vecdot": "(x1, x2, /, *, axis=-1)",
    "vector_norm": "(x, /, *, axis=None, keepdims=False, ord=2)",
}
_STUB = Path(__file__).resolve().parent / "data" / "array_api_stubs" / "_2025_12" / "linalg.py.txt"


def _bare(sig):
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def _stub_signatures(path):
    out = {}
    for f in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(f, ast.FunctionDef):
            continue
        a = f.args
        allpos = a.posonlyargs + a.args
        defaults = [None] * (len(allpos) - len(a.defaults)) + [ast.unparse(d) for d in a.defaults]
        parts = []
        for i, (p, d) in enumerate(zip(allpos, defaults)):
            parts.append(p.arg if d is None else f"{p.arg}={d}")
            if i == len(a.posonlyargs) - 1:
                parts.append("/")
        if a.kwonlyargs:
            parts.append("*")
        parts += [p.arg if d is None else f"{p.arg}={ast.unparse(d)}" for p, d in zip(a.kwonlyargs, a.kw_defaults)]
        out[f.name] = "(" + ", ".join(parts) + ")"
    return out


def test_the_extension_is_complete_with_the_stub_signatures():
    assert sorted(gt.linalg.__all__) == sorted(STUB_SIGNATURES)
    for name, want in STUB_SIGNATURES.items():
        assert _bare(inspect.signature(getattr(gt.linalg, name))) == want, name
    assert _stub_signatures(_STUB) == STUB_SIGNATURES


def test_main_namespace_functions_are_reexported():
    for name in ("matmul", "matrix_transpose", "tensordot", "vecdot"):
        assert getattr(gt.linalg, name) is getattr(gt, name)


def test_ops_are_registered_with_the_linalg_chapter():
    for name in STUB_SIGNATURES:
        if name in ("matmul", "matrix_transpose", "tensordot", "vecdot"):
            continue
        op = gt.registry.get_op(f"linalg.{name}")
        assert op.chapter == "linalg" and op.public is getattr(gt.linalg, name)
        assert op.differentiable is (name != "matrix_rank")


# ---------------------------------------------------------------------------------------- helpers
def _rng(seed=0):
    return np.random.default_rng(seed)


def _spd(n=3, batch=(), seed=0, complex_=False):
    r = _rng(seed)
    a = r.uniform(-1, 1, batch + (n, n))
    if complex_:
        a = a + 1j * r.uniform(-1, 1, batch + (n, n))
    return a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)


def _well(n=3, batch=(), seed=0):
    return _rng(seed).uniform(-1, 1, batch + (n, n)) + 1.5 * n * np.eye(n)


def _t(a):
    return gt.asarray(np.asarray(a))


# ---------------------------------------------------------------------------------------- results
def test_result_namedtuples(backend):
    a = _t(_spd())
    r = gt.linalg.eigh(a)
    assert r._fields == ("eigenvalues", "eigenvectors") and r.eigenvalues.shape == (3,)
    q = gt.linalg.qr(a)
    assert q._fields == ("Q", "R") and q.Q.shape == (3, 3)
    s = gt.linalg.slogdet(a)
    assert s._fields == ("sign", "logabsdet")
    np.testing.assert_allclose(s.sign.numpy() * np.exp(s.logabsdet.numpy()), np.linalg.det(a.numpy()), rtol=1e-10)
    u = gt.linalg.svd(a)
    assert u._fields == ("U", "S", "Vh")
    np.testing.assert_allclose((u.U.numpy() * u.S.numpy()) @ u.Vh.numpy(), a.numpy(), atol=1e-12)


# ---------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "name", ["cholesky", "det", "slogdet", "inv", "eigh", "eigvalsh", "matrix_power", "eig", "eigvals"]
)
def test_non_square_input_is_a_value_error_naming_the_op(backend, name):
    x = _t(np.ones((2, 3)))
    args = (x, 2) if name == "matrix_power" else (x,)
    with pytest.raises(ValueError, match=f"linalg.{name} expects square matrices"):
        getattr(gt.linalg, name)(*args)


@pytest.mark.parametrize("name", ["inv", "svd", "qr", "pinv", "matrix_norm", "matrix_rank", "trace", "diagonal"])
def test_vector_input_is_a_value_error(backend, name):
    with pytest.raises(ValueError, match=f"linalg.{name} expects a matrix"):
        getattr(gt.linalg, name)(_t(np.ones(3)))


def test_integer_input_to_a_decomposition_is_a_type_error(backend):
    with pytest.raises(TypeError, match="linalg.inv expects a floating-point tensor"):
        gt.linalg.inv(_t(np.eye(3, dtype=np.int64)))


def test_singular_input_is_a_value_error_naming_the_op(backend):
    # (JAX's own functions return inf / nan: its adapter reads the result's finiteness and raises eagerly)
    if gt.get_backend().lazy:
        # (dask: a value's error is raised when the value is computed, by NumPy's linalg)
        for op, args in [
            ("inv", (np.ones((3, 3)),)),
            ("cholesky", (-np.eye(3),)),
            ("solve", (np.ones((3, 3)), np.ones(3))),
        ]:
            out = getattr(gt.linalg, op)(*[_t(a) for a in args])
            with pytest.raises(np.linalg.LinAlgError):
                out.numpy()
        return
    with pytest.raises(ValueError, match="linalg.inv"):
        gt.linalg.inv(_t(np.ones((3, 3))))
    with pytest.raises(ValueError, match="linalg.cholesky"):
        gt.linalg.cholesky(_t(-np.eye(3)))
    with pytest.raises(ValueError, match="linalg.solve"):
        gt.linalg.solve(_t(np.ones((3, 3))), _t(np.ones(3)))


def test_bad_arguments_are_value_errors(backend):
    x = _t(_spd())
    with pytest.raises(ValueError, match="mode must be 'reduced' or 'complete'"):
        gt.linalg.qr(x, mode="r")
    with pytest.raises(ValueError, match="linalg.matrix_norm: ord must be one of"):
        gt.linalg.matrix_norm(x, ord=3)
    with pytest.raises(ValueError, match="3 elements"):
        gt.linalg.cross(_t(np.ones(4)), _t(np.ones(4)))
    with pytest.raises(ValueError, match=r"axis must be in \[-1, -1\]"):
        gt.linalg.cross(_t(np.ones(3)), _t(np.ones(3)), axis=0)
    with pytest.raises(ValueError, match="does not fit"):
        gt.linalg.solve(x, _t(np.ones(4)))
    with pytest.raises(ValueError, match="two 1-D tensors"):
        gt.linalg.outer(x, _t(np.ones(3)))
    with pytest.raises(TypeError, match="n must be an integer"):
        gt.linalg.matrix_power(x, 1.5)


# ---------------------------------------------------------------------------------------- shapes
def test_batch_shapes_and_broadcasting(backend):
    a = _t(_well(batch=(2, 2)))
    assert gt.linalg.inv(a).shape == (2, 2, 3, 3)
    assert gt.linalg.eigvalsh(a).shape == (2, 2, 3)
    a2 = _t(_well(batch=(2,)))
    assert gt.linalg.det(a2).shape == (2,)
    # a 1-D x2 is one vector for every matrix; a 2-D one is a matrix (standard 2023.12+)
    assert gt.linalg.solve(a2, _t(np.ones(3))).shape == (2, 3)
    assert gt.linalg.solve(a2, _t(np.ones((3, 3)))).shape == (2, 3, 3)
    assert gt.linalg.solve(_t(_well()), _t(np.ones((2, 3, 1)))).shape == (2, 3, 1)
    x = _t(_rng().standard_normal((2, 3, 4)))
    u, s, vh = gt.linalg.svd(x)
    assert (u.shape, s.shape, vh.shape) == ((2, 3, 3), (2, 3), (2, 4, 4))
    u, s, vh = gt.linalg.svd(x, full_matrices=False)
    assert (u.shape, s.shape, vh.shape) == ((2, 3, 3), (2, 3), (2, 3, 4))
    q, r = gt.linalg.qr(gt.matrix_transpose(x), mode="complete")
    assert (q.shape, r.shape) == ((2, 4, 4), (2, 4, 3))
    assert gt.linalg.pinv(x).shape == (2, 4, 3)
    assert gt.linalg.matrix_norm(x, ord="nuc", keepdims=True).shape == (2, 1, 1)
    assert gt.linalg.vector_norm(x, axis=(0, 2), keepdims=True).shape == (1, 3, 1)
    assert gt.linalg.cross(_t(np.ones((4, 3))), _t(np.arange(3.0))).shape == (4, 3)


def test_trace_dtypes_and_matrix_rank(backend):
    i = _t(np.arange(9, dtype=np.int32).reshape(3, 3))
    t = gt.linalg.trace(i)
    assert t.dtype == gt.int64 and int(t) == 12
    assert gt.linalg.trace(i, offset=1, dtype=gt.float64).dtype == gt.float64
    assert float(gt.linalg.trace(i, offset=-1)) == 3 + 7
    c = _rng().standard_normal((3, 1))
    assert int(gt.linalg.matrix_rank(_t(c @ c.T))) == 1
    assert int(gt.linalg.matrix_rank(_t(np.diag([1.0, 1e-3, 1e-17])))) == 2
    assert int(gt.linalg.matrix_rank(_t(np.diag([1.0, 1e-3, 1e-17])), rtol=1e-2)) == 1
    assert gt.linalg.matrix_rank(_t(np.eye(3))).dtype == gt.int64


# ---------------------------------------------------------------------------------------- behaviours
def _grad(f, x):
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    return y, tape.gradient(y, x)


def test_cholesky_upper_is_the_adjoint_of_lower_with_the_same_gradient(backend):
    for cplx in (False, True):
        a = _t(_spd(complex_=cplx))
        w = _t(_rng(1).standard_normal((3, 3)))
        lo, g_lo = _grad(lambda x: gt.sum(gt.real(gt.linalg.cholesky(x)) * w), a)
        up, g_up = _grad(
            lambda x: gt.sum(gt.real(gt.matrix_transpose(gt.conj(gt.linalg.cholesky(x, upper=True)))) * w), a
        )
        np.testing.assert_allclose(up.numpy(), lo.numpy(), rtol=1e-12)
        np.testing.assert_allclose(g_up.numpy(), g_lo.numpy(), rtol=1e-10, atol=1e-12)
        # Hermitian, as the rule symmetrises
        np.testing.assert_allclose(g_lo.numpy(), np.conj(g_lo.numpy().T), atol=1e-12)


def test_eigh_reads_the_lower_triangle_on_every_backend(backend):
    a = _spd()
    junk = a + np.triu(np.full((3, 3), 5.0), 1)  # the strict upper triangle is ignored
    np.testing.assert_allclose(gt.linalg.eigvalsh(_t(junk)).numpy(), np.linalg.eigvalsh(a), rtol=1e-12)
    np.testing.assert_allclose(gt.linalg.cholesky(_t(junk)).numpy(), np.linalg.cholesky(a), rtol=1e-12)


def test_negative_matrix_power_and_its_gradient(backend):
    a = _t(_well())
    w = _t(_rng(2).standard_normal((3, 3)))
    for n in (-1, -2, -3):
        y, g = _grad(lambda x, n=n: gt.sum(gt.linalg.matrix_power(x, n) * w), a)

        def by_inv(x, n=n):
            b = gt.linalg.inv(x)
            p = b
            for _ in range(-n - 1):
                p = gt.matmul(p, b)
            return gt.sum(p * w)

        y2, g2 = _grad(by_inv, a)
        np.testing.assert_allclose(y.numpy(), y2.numpy(), rtol=1e-12)
        np.testing.assert_allclose(g.numpy(), g2.numpy(), rtol=1e-10, atol=1e-12)
    y, g = _grad(lambda x: gt.sum(gt.linalg.matrix_power(x, 0)), a)
    assert float(y) == 3.0 and np.all(g.numpy() == 0)


def test_full_matrices_gradients_use_the_determined_vectors_and_complete_qr_raises(backend):
    x = _t(_rng(3).uniform(-1, 1, (4, 3)) + np.eye(4, 3) * np.arange(2, 8, 2))
    # svd(full_matrices=True) of a non-square matrix (the standard's default): the gradient flows
    # through S and the determined singular vectors, as with full_matrices=False (PyTorch does this)
    for t in (x, gt.matrix_transpose(x)):

        def full(t):
            u, s, vh = gt.linalg.svd(t)
            k = s.shape[-1]  # |entries| do not depend on the vectors' signs
            return gt.sum(s) + gt.sum(gt.abs(u[:, :k])) + gt.sum(gt.abs(vh[:k, :]))

        def reduced(t):
            u, s, vh = gt.linalg.svd(t, full_matrices=False)
            return gt.sum(s) + gt.sum(gt.abs(u)) + gt.sum(gt.abs(vh))

        y, g = _grad(full, t)
        y2, g2 = _grad(reduced, t)
        np.testing.assert_allclose(y.numpy(), y2.numpy(), rtol=1e-12)
        np.testing.assert_allclose(g.numpy(), g2.numpy(), rtol=1e-9, atol=1e-12)
    with gt.GradientTape() as tape:
        tape.watch(x)
        q, r = gt.linalg.qr(x, mode="complete")  # tall: Q's last column is arbitrary
        y = gt.sum(r)
    with pytest.raises(NotImplementedError, match="mode='reduced'"):
        tape.gradient(y, x)
    # square full_matrices and wide complete mode are fine (nothing is arbitrary there)
    _, g = _grad(lambda t: gt.sum(gt.linalg.svd(t[:3])[1]), x)
    _, g2 = _grad(lambda t: gt.sum(gt.linalg.svdvals(t[:3])), x)
    np.testing.assert_allclose(g.numpy(), g2.numpy(), rtol=1e-10, atol=1e-12)
    xt = gt.matrix_transpose(x)
    _, g = _grad(lambda t: gt.sum(gt.abs(gt.linalg.qr(t, mode="complete")[1])), xt)
    _, g2 = _grad(lambda t: gt.sum(gt.abs(gt.linalg.qr(t)[1])), xt)
    np.testing.assert_allclose(g.numpy(), g2.numpy(), rtol=1e-10, atol=1e-12)


def test_norm_conventions(backend):
    x = _t(np.array([1.0, -3.0, 3.0, 0.5]))
    _, g = _grad(lambda t: gt.linalg.vector_norm(t, ord=math.inf), x)
    np.testing.assert_array_equal(g.numpy(), [0.0, -0.5, 0.5, 0.0])  # ties split evenly
    _, g = _grad(lambda t: gt.linalg.vector_norm(t, ord=0), x)
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 0.0, 0.0])
    y, g = _grad(lambda t: gt.linalg.vector_norm(t, ord=3), x)  # sgn(x) |x|^2 / ||x||_3^2
    xs = x.numpy()
    np.testing.assert_allclose(g.numpy(), np.sign(xs) * xs**2 / float(y) ** 2, rtol=1e-12)
    m = _t(np.array([[1.0, -2.0], [3.0, 0.5]]))
    _, g = _grad(lambda t: gt.linalg.matrix_norm(t, ord=1), m)  # column 0: |1| + |3| = 4
    np.testing.assert_array_equal(g.numpy(), [[1.0, 0.0], [1.0, 0.0]])
    _, g = _grad(lambda t: gt.linalg.matrix_norm(t, ord=-math.inf), m)  # row 0: 3 < 3.5
    np.testing.assert_array_equal(g.numpy(), [[1.0, -1.0], [0.0, 0.0]])
    _, g = _grad(lambda t: gt.linalg.matrix_norm(t, ord=2), m)
    u, _, vh = np.linalg.svd(m.numpy())
    np.testing.assert_allclose(g.numpy(), np.outer(u[:, 0], vh[0]), rtol=1e-10)


# ---------------------------------------------------------------------------------------- higher order
def test_second_order_of_logdet_through_cholesky(backend):
    """logdet A = 2 sum log diag(chol A): gradient A^-1, and d<A^-1, V> = -A^-1 V A^-1 (V symmetric)."""
    a = _t(_spd())
    v = _rng(4).standard_normal((3, 3))
    v = _t(v + v.T)
    with gt.GradientTape() as outer:
        outer.watch(a)
        with gt.GradientTape() as inner:
            inner.watch(a)
            logdet = 2.0 * gt.sum(gt.log(gt.linalg.diagonal(gt.linalg.cholesky(a))))
        g = inner.gradient(logdet, a)
        hv = gt.sum(g * v)
    h = outer.gradient(hv, a)
    ai = np.linalg.inv(a.numpy())
    np.testing.assert_allclose(g.numpy(), ai, rtol=1e-10)
    np.testing.assert_allclose(h.numpy(), -ai @ v.numpy() @ ai, rtol=1e-9, atol=1e-12)


def test_third_order_of_det(backend):
    """det of a 2 x 2 matrix is a quadratic: its third derivative is zero, its second a constant."""
    a = _t(np.array([[1.5, 0.3], [-0.7, 2.0]]))
    w = _t(np.array([[0.2, -1.0], [0.5, 0.3]]))
    with gt.GradientTape() as t3:
        t3.watch(a)
        with gt.GradientTape() as t2:
            t2.watch(a)
            with gt.GradientTape() as t1:
                t1.watch(a)
                d = gt.linalg.det(a)
            g1 = t1.gradient(d, a)  # [[d, -c], [-b, a]]
            s2 = gt.sum(g1 * w)
        g2 = t2.gradient(s2, a)  # [[w11, -w10], [-w01, w00]]
        s3 = gt.sum(g2 * g2)
    g3 = t3.gradient(s3, a, unconnected_gradients="zero")
    np.testing.assert_allclose(g1.numpy(), [[2.0, 0.7], [-0.3, 1.5]], rtol=1e-12)
    np.testing.assert_allclose(g2.numpy(), [[0.3, -0.5], [1.0, 0.2]], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g3.numpy(), np.zeros((2, 2)), atol=1e-10)


def test_eigvalsh_hessian_vector_product(backend):
    """sum(eigvalsh(A)^2) = ||A||_F^2 for symmetric A: gradient 2A, Hessian-vector product 2 sym(V)."""
    a = _t(_spd())
    v = _rng(5).standard_normal((3, 3))
    with gt.GradientTape() as outer:
        outer.watch(a)
        with gt.GradientTape() as inner:
            inner.watch(a)
            f = gt.sum(gt.linalg.eigvalsh(a) ** 2)
        g = inner.gradient(f, a)
        hv = gt.sum(g * _t(v))
    h = outer.gradient(hv, a)
    np.testing.assert_allclose(g.numpy(), 2 * a.numpy(), rtol=1e-10)
    np.testing.assert_allclose(h.numpy(), v + v.T, rtol=1e-8, atol=1e-10)


# ---------------------------------------------------------------------------------------- eig, eigvals
def test_eig_outputs_are_complex_for_every_input(backend):
    """Complex eigenvalues and unit eigenvectors with A V = V diag(w), real eigenvalues included
    (NumPy's own eig returns them real), batched; the dtype follows the input's precision."""
    tri = np.array([[2.0, 1.0, 0.5], [0.0, -1.0, 3.0], [0.0, 0.0, 4.0]])  # real eigenvalues 2, -1, 4
    rot = np.array([[0.0, -2.0], [2.0, 0.0]])  # +-2i
    for a, want in ((tri, [-1, 2, 4]), (rot, [-2j, 2j])):
        for dt, cdt in ((gt.float64, gt.complex128), (gt.float32, gt.complex64)):
            w, v = gt.linalg.eig(gt.asarray(a, dtype=dt))
            assert w.dtype == cdt and v.dtype == cdt and w.shape == a.shape[:1] and v.shape == a.shape
            wn, vn = w.numpy(), v.numpy()
            tol = 1e-12 if dt == gt.float64 else 1e-5
            np.testing.assert_allclose(np.sort_complex(wn), want, atol=tol * 10)
            np.testing.assert_allclose(a @ vn, vn * wn, atol=tol * 10)
            np.testing.assert_allclose(np.linalg.norm(vn, axis=0), 1.0, atol=tol)
            ev = gt.linalg.eigvals(gt.asarray(a, dtype=dt))
            assert ev.dtype == cdt
            np.testing.assert_allclose(np.sort_complex(ev.numpy()), want, atol=tol * 10)
    batch = _rng(3).uniform(-1, 1, (2, 3, 3)) + 1j * _rng(4).uniform(-1, 1, (2, 3, 3))
    w, v = gt.linalg.eig(_t(batch))
    assert w.shape == (2, 3) and v.shape == (2, 3, 3) and w.dtype == gt.complex128
    np.testing.assert_allclose(batch @ v.numpy(), v.numpy() * w.numpy()[:, None, :], atol=1e-12)
    assert gt.linalg.eig(_t(np.eye(3))).eigenvalues.numpy().tolist() == [1, 1, 1]
    with pytest.raises(TypeError, match="floating-point"):
        gt.linalg.eig(gt.asarray([[1, 2], [3, 4]]))


def test_eig_runs_on_the_host_where_the_namespace_has_none():
    """array_api_strict below 2025.12 refuses eig; a namespace may lack it: NumPy computes it."""
    from gradtape import backends
    from gradtape.ops.linalg_extension import _eig_native

    a = _rng(5).uniform(-2, 2, (2, 3, 3))
    want_w, want_v = np.linalg.eig(a)
    b = backends.get("numpy")

    class NoEig:
        def __init__(self, xp):
            self._xp, self.linalg = xp, types.SimpleNamespace()

        def __getattr__(self, name):
            return getattr(self._xp, name)

    fake = types.SimpleNamespace(xp=NoEig(b.xp), to_numpy=b.to_numpy, asarray=b.asarray, device_of=b.device_of)
    w, v = _eig_native(fake, b.asarray(a), "eig")
    np.testing.assert_allclose(w, want_w, rtol=1e-14)
    np.testing.assert_allclose(v, want_v, rtol=1e-14)
    assert _eig_native(fake, b.asarray(a.astype(np.float32)), "eigvals")[0].dtype == np.complex64
    if "array_api_strict" not in gt.available_backends():
        return
    import array_api_strict

    for version in ("2024.12", "2025.12"):
        with array_api_strict.ArrayAPIStrictFlags(api_version=version):
            r = gt.linalg.eig(gt.asarray(a, backend="array_api_strict"))
            np.testing.assert_allclose(r.eigenvalues.numpy(), want_w, rtol=1e-12)
            np.testing.assert_allclose(r.eigenvectors.numpy(), want_v, rtol=1e-12)
            w = gt.linalg.eigvals(gt.asarray(a, backend="array_api_strict"))
            assert w.backend == "array_api_strict" and w.dtype == gt.complex128


def test_eig_gradients_of_trace_and_determinant(backend):
    """sum(w) = trace(A) and prod(w) = det(A), through eig (eigenvalues only, eigenvectors' cotangent
    zero) and eigvals, on a real matrix with a complex pair: gradients I and det(A) A^-T, real."""
    a = np.array([[0.5, -2.0, 0.3], [2.0, 0.2, -0.4], [0.1, 0.6, 3.0]])
    x = gt.Variable(a)
    with gt.GradientTape(persistent=True) as tape:
        w = gt.linalg.eig(x).eigenvalues
        w2 = gt.linalg.eigvals(x)
        tr, tr2, det = gt.real(gt.sum(w)), gt.real(gt.sum(w2)), gt.real(gt.prod(w2))
    for g in (tape.gradient(tr, x), tape.gradient(tr2, x)):
        assert g.dtype == gt.float64
        np.testing.assert_allclose(g.numpy(), np.eye(3), atol=1e-12)
    np.testing.assert_allclose(tape.gradient(det, x).numpy(), np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-10)


# ---------------------------------------------------------------------------------------- zero cotangents
def _grads(f, a, cotangents):
    """Gradients w.r.t. ``a`` of ``f(a)``'s outputs for the given output gradients, through the rules
    (an outer tape records the walk) and, where it differs, the native path."""
    out = []
    for outer in (False, True):
        x = gt.Variable(a)
        with gt.GradientTape() as tape:
            ys = f(x)
            ys = list(ys) if isinstance(ys, tuple) else [ys]
        cts = [gt.zeros_like(y) if c is None else gt.astype(gt.asarray(c), y.dtype) for y, c in zip(ys, cotangents)]
        if outer:
            with gt.GradientTape():
                out.append(tape.gradient(ys, x, output_gradients=cts).numpy())
        else:
            out.append(tape.gradient(ys, x, output_gradients=cts).numpy())
    return out


def test_zero_cotangents_at_repeated_eigenvalues_give_finite_gradients(backend):
    """At repeated eigenvalues (the identity, zero) the eigenvector gradient divides by 0: with a zero
    eigenvector cotangent only the eigenvalue term remains, V diag(gw) V^-1 (eigh: V^H), and all-zero
    cotangents give exactly zero."""
    gw = np.array([1.0, -2.0, 0.5])
    with np.errstate(all="ignore"):
        for a in (np.eye(3), np.zeros((3, 3)), np.diag([2.0, 2.0, -1.0])):
            v = np.linalg.eigh(a)[1]
            for g in _grads(gt.linalg.eigh, a, [gw, None]):
                np.testing.assert_allclose(g, (v * gw) @ v.T, atol=1e-12)
            for g in _grads(gt.linalg.eigh, a, [None, None]) + _grads(gt.linalg.eig, a, [None, None]):
                assert np.all(g == 0)
            for g in _grads(gt.linalg.eig, a, [gw.astype(complex), None]):
                ev, vv = gt.linalg.eig(_t(a))
                want = np.real(np.linalg.solve(vv.numpy().conj().T, (gw[:, None] * vv.numpy().conj().T)))
                assert np.all(np.isfinite(g))
                np.testing.assert_allclose(g, want, atol=1e-12)


def test_zero_cotangents_at_zero_and_repeated_singular_values(backend):
    """svd of a zero / rank-deficient / repeated-spectrum matrix, square, tall and wide: a cotangent on S
    only gives U diag(gS) V^H (the vector terms divide by 0 and by S_j^2 - S_k^2), all-zero gives 0."""
    cases = [
        np.zeros((3, 3)),
        np.eye(3),
        np.zeros((4, 3)),
        np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]),
        np.array([[2.0, 0.0], [0.0, 2.0], [0.0, 0.0]]),
    ]
    with np.errstate(all="ignore"):
        for a in cases:
            k = min(a.shape)
            gs = np.arange(1.0, k + 1)
            svd = lambda x: gt.linalg.svd(x, full_matrices=False)
            u, _, vh = np.linalg.svd(a, full_matrices=False)
            for g in _grads(svd, a, [None, gs, None]):
                np.testing.assert_allclose(g, (u * gs) @ vh, atol=1e-12)
            for g in _grads(svd, a, [None, None, None]) + _grads(gt.linalg.svd, a, [None, None, None]):
                assert np.all(g == 0), a
            if a.shape[0] == a.shape[1]:
                for g in _grads(lambda x: gt.linalg.matrix_norm(x, ord="nuc"), a, [0.0]):
                    assert np.all(g == 0)


def test_norms_at_zero_give_zero_for_a_zero_cotangent_and_nan_otherwise(backend):
    """vector_norm and matrix_norm('fro') at a zero input: a zero cotangent gives 0; a non-zero one gives
    the subgradient of least norm, 0, for p > 1 (2, fro: test_a_norm_of_zeros_has_the_least_norm_subgradient)
    and keeps the undefined (NaN) derivative for p < 1 (fractional, negative orders)."""
    z = np.zeros((2, 3))
    fns = [
        (lambda x: gt.linalg.vector_norm(x), 0.0),
        (lambda x: gt.linalg.vector_norm(x, axis=1, ord=0.5), np.nan),
        (lambda x: gt.linalg.vector_norm(x, axis=0, ord=-1), np.nan),
        (lambda x: gt.linalg.matrix_norm(x), 0.0),
    ]
    with np.errstate(all="ignore"):
        for f, at_zero in fns:
            shape = f(_t(z)).shape
            for g in _grads(f, z, [np.zeros(shape)]):
                assert np.all(g == 0)
            for g in _grads(f, z, [np.ones(shape)]):
                assert np.all(np.isnan(g)) if np.isnan(at_zero) else np.all(g == at_zero)
        x = gt.Variable(np.array([[0.0, 0.0], [3.0, 4.0]]))
        with gt.GradientTape() as tape:
            n = gt.linalg.vector_norm(x, axis=1)
            y = gt.sum(gt.where(n > 0, n, 0.0))
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), [[0.0, 0.0], [0.6, 0.8]], rtol=1e-15, atol=0)


_NORMS_AT_ZERO = {
    # gradtape's norm, and the same norm in PyTorch (the reference)
    "vector_2": (lambda z: gt.linalg.vector_norm(z), lambda t, z: t.linalg.vector_norm(z)),
    "vector_3": (lambda z: gt.linalg.vector_norm(z, ord=3), lambda t, z: t.linalg.vector_norm(z, ord=3)),
    "vector_1.5_rows": (
        lambda z: gt.linalg.vector_norm(z, ord=1.5, axis=-1),
        lambda t, z: t.linalg.vector_norm(z, ord=1.5, dim=-1),
    ),
    "matrix_fro": (lambda z: gt.linalg.matrix_norm(z), lambda t, z: t.linalg.matrix_norm(z)),
}


@pytest.mark.parametrize("name", list(_NORMS_AT_ZERO))
def test_a_norm_of_zeros_has_the_least_norm_subgradient(backend, name):
    """At a norm's minimum the gradient is 0 (std's convention; PyTorch's for these norms), not 0 / 0:
    a norm penalty on a zero-initialised bias must not turn a training step into NaN.  Elsewhere, and
    for a row of zeros beside others, the gradients equal PyTorch's."""
    torch = pytest.importorskip("torch", reason="the reference gradients are torch.autograd's")
    norm, torch_norm = _NORMS_AT_ZERO[name]
    zeros = np.zeros((2, 3))
    got = gt.grad(lambda z: gt.reduce_sum(norm(z)))(gt.constant(zeros, dtype=gt.float64))
    np.testing.assert_array_equal(np.asarray(got.numpy()), zeros)
    x = np.array([[0.5, -1.0, 2.0], [0.0, 0.0, 0.0]])
    got = gt.grad(lambda z: gt.reduce_sum(norm(z)))(gt.constant(x, dtype=gt.float64))
    t = torch.tensor(x, requires_grad=True)
    torch_norm(torch, t).sum().backward()
    np.testing.assert_allclose(np.asarray(got.numpy()), t.grad.numpy(), rtol=1e-12, atol=0)
    # a second order meets no infinity there
    h = gt.hessian(lambda z: gt.reduce_sum(norm(z)))(gt.constant(zeros, dtype=gt.float64))
    assert np.isfinite(np.asarray(h.numpy())).all()
