"""The ``linalg`` extension of the Array API standard (2025.12): ``gt.linalg``.

Every function of the extension, with the standard's signature; each forward runs the backend's own
``xp.linalg`` function (LAPACK through NumPy, PyTorch or XLA), batched over leading axes where the
standard allows them.  ``matmul``, ``matrix_transpose``, ``tensordot`` and ``vecdot`` are the main
namespace's ops (``gt.linalg.matmul is gt.matmul``).

The gradient rules are written once against the namespace ``xp`` the engine passes (native arrays in a
first-order walk; gradtape's ops when an outer tape records, so higher orders come free), with
TensorFlow's complex convention (the gradient of a real ``L`` is ``2 dL/d conj(z)``).  The formulas
are the standard ones: Giles 2008 ("An extended collection of matrix derivative results") for
``det``, ``inv``, ``solve``; Murray 2016 for ``cholesky``; PyTorch's ``FunctionsManual.cpp`` (Seeger
et al., Townsend) for ``eigh``, ``svd``, ``qr`` and ``pinv``, complex cases included; TensorFlow's
``_EigGrad`` (the same as PyTorch's ``linalg_eig_backward``) for ``eig`` and ``eigvals`` (2025.12).

Conventions (docs/conventions.md):

* ``cholesky``, ``eigh``, ``eigvalsh`` read the lower triangle only, on every backend; their gradients
  are Hermitian (the gradient of ``f((A + A^H) / 2)``), as TensorFlow's and JAX's are, so they are the
  right gradients whenever the input is Hermitian (``A = X + X^H`` gets twice the symmetric part).
* ``eig`` and ``eigvals`` (2025.12) return complex eigenvalues and unit-norm eigenvectors for every
  input, real ones included (NumPy's own ``eig`` returns real arrays when every eigenvalue is real);
  their order is the library's (LAPACK's ``geev`` on every CPU backend).  Where the library has no
  ``eig`` (array_api_strict below 2025.12, JAX on a GPU) it runs on the host through NumPy, as
  TensorFlow's ``Eig`` kernel does.  The gradient of a real input is the real part of the complex one.
* Eigenvectors and singular vectors are defined up to a sign (a phase, for complex inputs), and ``Q``,
  ``R`` of ``qr`` up to the signs of ``R``'s diagonal: a loss must not depend on that choice (each
  library makes it its own way).  The rules assume it does not (PyTorch and JAX do the same).
* At degenerate points the gradient is not defined and is not finite: repeated eigenvalues
  (``eigh``'s eigenvectors), repeated or zero singular values (``svd``'s singular vectors; ``svd`` of a
  non-square matrix and ``matrix_norm(ord=2 / -2 / 'nuc')`` at rank loss), repeated eigenvalues and
  defective matrices (``eig``'s eigenvectors), singular matrices (``inv``,
  ``solve``, ``slogdet``, ``det``'s rule uses the inverse), ``pinv`` where the rank changes, and
  ``vector_norm`` / ``matrix_norm('fro')`` at zero.  Ties of ``max``/``min`` in the ``1``/``inf`` norms
  split the gradient evenly (as ``gt.max`` does).
* ``svd(full_matrices=True)`` of a non-square matrix returns singular vectors the input does not
  determine: the gradient flows through ``S`` and the determined ones only (as PyTorch's does), so a
  loss must not use the others.  ``qr(mode='complete')`` of a tall matrix: its gradient raises
  ``NotImplementedError`` (as TensorFlow's and PyTorch's do); use ``mode='reduced'``.
* Singular or non-positive-definite inputs raise ``ValueError`` naming the op where the library
  detects them (NumPy, PyTorch, array_api_strict); JAX returns ``inf``/``nan`` instead, as it does.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import math
import operator
from collections import namedtuple

import numpy as np

from array_api_compat import device as _device

from gradtape.core import dtypes as _dt
from gradtape.core.rule_namespace import tensor_namespace
from gradtape.core.domains import NONZERO, REAL, SMALL, Case, with_complex
from gradtape.ops import apply, apply1, batch_as, defop, public
from gradtape.ops import manipulation as _manipulation
from gradtape.ops.elementwise import astype, conj_, is_complex, ones_where_zero
from gradtape.ops.linear_algebra_functions import matmul, matrix_transpose, mT, tensordot, vecdot
from gradtape.ops.statistical import _axes
from gradtape.core.tensor import Tensor, wrap, convert_to_tensor

__all__ = [
    "cholesky",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "inv",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "tensordot",
    "trace",
    "vecdot",
    "vector_norm",
]

EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


# ---------------------------------------------------------------------------------------- helpers
def _tensor(x, like=None):
    if isinstance(x, Tensor):
        return x
    return convert_to_tensor(x, like=like if isinstance(like, Tensor) else None)


def _mH(xp, x):
    """The conjugate transpose of the last two axes."""
    return conj_(xp, mT(xp, x))


def _eye(xp, x, n, m=None, k=0):
    """The identity (ones on the ``k``-th diagonal of an ``n x m`` matrix) in ``x``'s dtype, on its
    device."""
    return xp.eye(n, m, k=k, dtype=x.dtype, device=_device(x))


def _diag_embed(xp, v):
    """``(..., n)`` -> ``(..., n, n)`` with ``v`` on the diagonal."""
    return xp.expand_dims(v, axis=-1) * _eye(xp, v, v.shape[-1])


def _half_diag(xp, y):
    """``y`` with its diagonal halved."""
    return y * (1.0 - 0.5 * _eye(xp, y, y.shape[-1]))


def _sgn(xp, x):
    """d|x|/dx in TensorFlow's convention: sign(x) for real ``x`` (0 at 0), x / |x| for complex."""
    if not is_complex(x):
        return xp.sign(x)
    a = xp.abs(x)
    zero = a == 0
    return xp.where(zero, 0.0, x / xp.where(zero, 1.0, a))


def _native_like(x, value):
    """A constant tensor (NumPy ``value``) on ``x``'s backend and device, in ``x``'s dtype (for the
    domain maps)."""
    b = x._b
    v = b.asarray(np.asarray(value), dtype=x.dtype, device=b.device_beside(x._v))
    return wrap(v if v.__class__ is b.array_type else b.fix_output(v), b)


def _check_float(name, x):
    if x.dtype.kind not in "fc":
        raise TypeError(
            f"{name} expects a floating-point tensor, got {x.dtype}; cast it first, e.g. gt.astype(x, gt.float64)"
        )


def _check_matrix(name, x, square=False):
    if x.ndim < 2:
        raise ValueError(f"{name} expects a matrix or a stack of matrices (at least 2 dimensions), got shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name} expects square matrices in the last two axes, got shape {x.shape}")


def _prep(name, x, square=False, floating=True):
    x = _tensor(x)
    if floating:
        _check_float(name, x)
    _check_matrix(name, x, square)
    return x


@functools.cache
def _takes(fn, param):
    """Whether the native function ``fn`` takes the keyword ``param``."""
    try:
        return param in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _lower(fn, x, **kw):
    """``fn(x)`` reading the lower triangle only (JAX symmetrises by default: switched off)."""
    if _takes(fn, "symmetrize_input"):
        kw["symmetrize_input"] = False
    return fn(x, **kw)


# ------------------------------------------------- input maps and gauge fixes used by the domains
# (they run on Tensors: the helpers above are called with gradtape's namespace)
def _sym(x):
    """The Hermitian part ``(x + x^H) / 2`` (a domain map: eigh of any matrix)."""
    return (x + _mH(tensor_namespace(), x)) * 0.5


def _spd(x):
    """``x x^H + n I``: Hermitian positive definite, well conditioned (a domain map)."""
    xp = tensor_namespace()
    return xp.matmul(x, _mH(xp, x)) + x.shape[-1] * _eye(xp, x, x.shape[-1])


def _shift(x):
    """``x + 1.5 n I``: diagonally dominant for entries in [-1, 1], so well conditioned."""
    return x + (1.5 * x.shape[-1]) * _eye(tensor_namespace(), x, x.shape[-1])


def _spread(x):
    """``x + diag(2, 4, 6, ...)``: distinct singular values, away from zero, for entries in [-1, 1]."""
    m, n = x.shape[-2:]
    return x + _native_like(x, np.eye(m, n) * (2.0 * np.arange(1, n + 1)))


def _C(*args, **kwargs):
    """The complex version of ``Case(*args, **kwargs)``."""
    return Case(*args, **kwargs).complex()


def _phase(s):
    return s / tensor_namespace().abs(s)


def _fix_eigh(res):
    """Eigenvectors scaled so that each column sums to a positive real number."""
    xp = tensor_namespace()
    w, v = res
    return w, v * conj_(xp, _phase(xp.sum(v, axis=-2, keepdims=True)))


def _fix_svd(res):
    """Singular vector pairs scaled so that each column of ``U`` sums to a positive real number."""
    xp = tensor_namespace()
    u, s, vh = res
    p = _phase(xp.sum(u, axis=-2, keepdims=True))
    return u * conj_(xp, p), s, vh * p.mT


def _fix_qr(res):
    """``Q`` and ``R`` scaled so that ``R``'s diagonal is positive (the unique QR of a full-rank
    matrix)."""
    xp = tensor_namespace()
    q, r = res
    p = _phase(diagonal(r))
    return q * conj_(xp, xp.expand_dims(p, axis=-2)), r * xp.expand_dims(p, axis=-1)


def _rotate(x):
    """``x / 4`` plus a rotation by 90 degrees scaled by 2 and a 3 (for a 3 x 3 ``x`` in [-1, 1]): a real
    matrix with a conjugate pair of eigenvalues near +-2i and a real one near 3 (a domain map)."""
    return x * 0.25 + _native_like(x, np.array([[0.0, 2.0, 0.0], [-2.0, 0.0, 0.0], [0.0, 0.0, 3.0]]))


def _eig_order(w):
    """The permutation sorting eigenvalues by real part, then imaginary part (a conjugate pair of a
    real matrix has equal real parts, to the bit, in LAPACK's output)."""
    xp = tensor_namespace()
    by_imag = xp.argsort(xp.imag(w), axis=-1, stable=True)
    by_real = xp.argsort(xp.take_along_axis(xp.real(w), by_imag, axis=-1), axis=-1, stable=True)
    return xp.take_along_axis(by_imag, by_real, axis=-1)


def _fix_eigvals(w):
    """Eigenvalues sorted by real part, then imaginary part (each library has its own order)."""
    return tensor_namespace().take_along_axis(w, _eig_order(w), axis=-1)


def _fix_eig(res):
    """Eigenpairs sorted as :func:`_fix_eigvals`, each eigenvector's phase fixed as ``eigh``'s."""
    xp = tensor_namespace()
    w, v = res
    p = _eig_order(w)
    v = xp.take_along_axis(v, xp.broadcast_to(xp.expand_dims(p, axis=-2), tuple(v.shape)), axis=-1)
    return xp.take_along_axis(w, p, axis=-1), v * conj_(xp, _phase(xp.sum(v, axis=-2, keepdims=True)))


# ---------------------------------------------------------------------------------------- cholesky
def _cholesky_forward(xp, x, *, upper=False):
    return _lower(xp.linalg.cholesky, x, upper=upper)


_cholesky = defop(
    "linalg.cholesky",
    _cholesky_forward,
    chapter="linalg",
    saves="outputs",
    batched=True,
    xp_callable=True,
    domain=with_complex([Case(REAL[3, 3].via(_spd))]) + [Case(REAL[2, 3, 3].via(_spd), upper=True)],
    convention="reads the lower triangle; Hermitian gradient (Murray 2016), as TF",
)


@_cholesky.gradient
def _cholesky_grad(xp, op, grad):
    """A = L L^H: dL = L phi(L^-1 dA L^-H), phi = lower triangle with the diagonal halved; so
    gA = L^-H phi(L^H gL) L^-1, made Hermitian (dA is)."""
    lo = op.outputs[0]
    g = grad
    if op.attrs.get("upper", False):
        lo, g = _mH(xp, lo), _mH(xp, g)
    lh = _mH(xp, lo)
    p = _half_diag(xp, xp.tril(xp.matmul(lh, g)))
    x = xp.linalg.solve(lh, p)  # L^-H P
    ga = _mH(xp, xp.linalg.solve(lh, _mH(xp, x)))  # L^-H P L^-1
    return (ga + _mH(xp, ga)) * 0.5


@public(_cholesky)
def cholesky(x, /, *, upper=False):
    """The Cholesky factor of a Hermitian positive-definite matrix (lower, or upper with ``upper=True``)."""
    x = _prep("linalg.cholesky", x, square=True)
    return apply1(_cholesky, x, {"upper": bool(upper)})


# ---------------------------------------------------------------------------------------- det, slogdet
_det = defop(
    "linalg.det", chapter="linalg", batched=True, domain=[Case(SMALL[2, 3, 3].via(_shift)), _C(SMALL[3, 3].via(_shift))]
)


@_det.gradient
def _det_grad(xp, op, grad):
    """d det(A) = det(A) tr(A^-1 dA): gA = grad conj(det A) A^-H."""
    c = grad * conj_(xp, op.outputs[0])
    return xp.expand_dims(xp.expand_dims(c, axis=-1), axis=-1) * _mH(xp, xp.linalg.inv(op.inputs[0]))


@public(_det)
def det(x, /):
    """The determinant of a square matrix (or a stack of them)."""
    return apply1(_det, _prep("linalg.det", x, square=True))


def _slogdet_forward(xp, x):
    r = xp.linalg.slogdet(x)
    return r[0], r[1]


_slogdet = defop(
    "linalg.slogdet",
    _slogdet_forward,
    chapter="linalg",
    nout=2,
    batched=True,
    domain=[Case(SMALL[2, 3, 3].via(_shift)), _C(SMALL[3, 3].via(_shift))],
    convention="sign: zero gradient for real inputs; for complex ones sign = det/|det| is "
    "differentiated, as PyTorch and JAX",
)


@_slogdet.gradient
def _slogdet_grad(xp, op, gsign, glog):
    """d logabsdet = Re tr(A^-1 dA); d sign = sign i Im tr(A^-1 dA) (complex):
    gA = (glog - i Im(conj(gsign) sign)) A^-H (PyTorch's slogdet_backward)."""
    a = op.inputs[0]
    if is_complex(a):
        c = xp.astype(glog, a.dtype) - xp.astype(xp.imag(conj_(xp, gsign) * op.outputs[0]), a.dtype) * 1j
    else:
        c = glog
    return xp.expand_dims(xp.expand_dims(c, axis=-1), axis=-1) * _mH(xp, xp.linalg.inv(a))


@public(_slogdet)
def slogdet(x, /):
    """The sign (a unit complex number for complex input) and the natural log of the absolute value of
    the determinant: ``SlogdetResult(sign, logabsdet)``."""
    return SlogdetResult(*apply(_slogdet, (_prep("linalg.slogdet", x, square=True),)))


# ---------------------------------------------------------------------------------------- inv, solve
_inv = defop(
    "linalg.inv",
    chapter="linalg",
    saves="outputs",
    batched=True,
    domain=[Case(SMALL[2, 3, 3].via(_shift)), _C(SMALL[3, 3].via(_shift))],
)


@_inv.gradient
def _inv_grad(xp, op, grad):
    """Y = A^-1: dY = -Y dA Y, so gA = -Y^H grad Y^H."""
    yh = _mH(xp, op.outputs[0])
    return -xp.matmul(yh, xp.matmul(grad, yh))


@public(_inv)
def inv(x, /):
    """The inverse of a square matrix (or a stack of them)."""
    return apply1(_inv, _prep("linalg.inv", x, square=True))


_solve = defop(
    "linalg.solve",
    chapter="linalg",
    promote=True,
    batched=True,
    domain=with_complex([Case(SMALL[3, 3].via(_shift), REAL[3, 3])]) + [Case(SMALL[2, 3, 3].via(_shift), REAL[3])],
)


@_solve.gradient
def _solve_grad(xp, op, grad):
    """X = A^-1 B: gB = A^-H grad, gA = -gB X^H (a 1-D B is one column)."""
    a, b = op.inputs
    x = op.outputs[0]
    ah = _mH(xp, a)
    if b.ndim == 1:
        gb = xp.linalg.solve(ah, xp.expand_dims(grad, axis=-1))
        ga = -xp.matmul(gb, _mH(xp, xp.expand_dims(x, axis=-1))) if op.needs_grad(0) else None
        gb = gb[..., 0]
    else:
        gb = xp.linalg.solve(ah, grad)
        ga = -xp.matmul(gb, _mH(xp, x)) if op.needs_grad(0) else None
    return ga, (gb if op.needs_grad(1) else None)


@public(_solve)
def solve(x1, x2, /):
    """The solution ``X`` of ``x1 @ X = x2`` for square ``x1``; ``x2`` of shape ``(M,)`` is one vector,
    otherwise ``(..., M, K)`` (batch axes broadcast)."""
    x1 = _prep("linalg.solve", _tensor(x1, x2), square=True)
    x2 = _tensor(x2, x1)
    _check_float("linalg.solve", x2)
    m = x1.shape[-1]
    if x2.ndim == 0 or (x2.ndim == 1 and x2.shape[0] != m) or (x2.ndim > 1 and x2.shape[-2] != m):
        raise ValueError(
            f"linalg.solve: x2 of shape {x2.shape} does not fit x1 of shape {x1.shape}; it must "
            f"be ({m},) or (..., {m}, K)"
        )
    return apply(_solve, (x1, x2))


# ---------------------------------------------------------------------------------------- eigh
def _eigh_forward(xp, x):
    r = _lower(xp.linalg.eigh, x)
    return r[0], r[1]


_eigh = defop(
    "linalg.eigh",
    _eigh_forward,
    chapter="linalg",
    nout=2,
    saves="outputs",
    batched=True,
    xp_callable=True,
    domain=[Case(REAL[2, 3, 3].via(_sym)).map_outputs(_fix_eigh), _C(REAL[3, 3].via(_sym)).map_outputs(_fix_eigh)],
    convention="reads the lower triangle; Hermitian gradient; not defined at repeated "
    "eigenvalues; the loss must not depend on the eigenvectors' signs/phases",
)


def _eig_gap_inverse(xp, w):
    """F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it (inf where eigenvalues repeat)."""
    eye = _eye(xp, w, w.shape[-1])
    e = xp.expand_dims(w, axis=-2) - xp.expand_dims(w, axis=-1)
    return (1.0 - eye) / (e + eye)


@_eigh.gradient
def _eigh_grad(xp, op, gw, gv):
    """A = V diag(w) V^H: gA = V (diag(gw) + F o skew(V^H gV)) V^H with F_ij = 1 / (w_j - w_i) and
    skew(K) = (K - K^H) / 2 (PyTorch's linalg_eig_backward, Hermitian case)."""
    w, v = op.outputs
    vh = _mH(xp, v)
    k = xp.matmul(vh, gv)
    inner = xp.multiply_no_nan(_eig_gap_inverse(xp, w), (k - _mH(xp, k)) * 0.5) + _diag_embed(xp, gw)
    return xp.matmul(v, xp.matmul(inner, vh))


@public(_eigh)
def eigh(x, /):
    """Eigenvalues (ascending) and eigenvectors of a Hermitian matrix, reading its lower triangle:
    ``EighResult(eigenvalues, eigenvectors)``."""
    return EighResult(*apply(_eigh, (_prep("linalg.eigh", x, square=True),)))


_eigvalsh = defop(
    "linalg.eigvalsh",
    lambda xp, x: _lower(xp.linalg.eigvalsh, x),
    chapter="linalg",
    saves="inputs",
    batched=True,
    domain=[Case(REAL[2, 3, 3].via(_sym)), _C(REAL[3, 3].via(_sym))],
    convention="reads the lower triangle; Hermitian gradient V diag(g) V^H",
)


@_eigvalsh.gradient
def _eigvalsh_grad(xp, op, grad):
    """gA = V diag(grad) V^H (the eigenvectors recomputed, so higher orders see them)."""
    _, v = xp.linalg.eigh(op.inputs[0])
    return xp.matmul(v * xp.expand_dims(grad, axis=-2), _mH(xp, v))


@public(_eigvalsh)
def eigvalsh(x, /):
    """Eigenvalues (ascending) of a Hermitian matrix, reading its lower triangle."""
    return apply1(_eigvalsh, _prep("linalg.eigvalsh", x, square=True))


# ---------------------------------------------------------------------------------------- eig, eigvals
def _eig_native(backend, x, name):
    """``xp.linalg.<name>(x)`` as a tuple of complex arrays; through NumPy on the host where the
    namespace has no such function (array_api_strict below 2025.12, JAX on a GPU)."""
    xp = backend.xp
    fn = getattr(xp.linalg, name, None)
    out = missing = None
    if fn is not None:
        try:
            out = fn(x)
        except NotImplementedError as e:
            missing = e
        except RuntimeError as e:  # array_api_strict refuses 2025.12 functions below 2025.12
            if getattr(xp, "__array_api_version__", "2025.12") >= "2025.12":
                raise
            missing = e
    if out is None:
        try:
            host = backend.to_numpy(x)
        except Exception:  # a tracer (jax.grad of eigenvectors): the library's own error
            if missing is not None:
                raise missing from None
            raise
        host = getattr(np.linalg, name)(host)
        dev = backend.device_of(x)
        out = tuple(backend.asarray(h, device=dev) for h in (host if isinstance(host, tuple) else (host,)))
    out = tuple(out) if isinstance(out, tuple) or name == "eig" else (out,)
    cdt = xp.complex64 if x.dtype in (xp.float32, xp.complex64) else xp.complex128
    return tuple(o if o.dtype == cdt else xp.astype(o, cdt) for o in out)


def _eig_forward(backend, x):
    return _eig_native(backend, x, "eig")


def _eigvals_forward(backend, x):
    return _eig_native(backend, x, "eigvals")[0]


_EIG_DOMAIN = [Case(SMALL[3, 3].via(_rotate)), Case(SMALL[2, 3, 3].via(_spread)), _C(SMALL[3, 3].via(_spread))]

_eig = defop(
    "linalg.eig",
    _eig_forward,
    forward_takes="backend",
    chapter="linalg",
    nout=2,
    xp_callable=True,
    domain=[c.map_outputs(_fix_eig) for c in _EIG_DOMAIN],
    convention="complex outputs for real inputs (the gradient's real part); not defined at repeated "
    "eigenvalues; the loss must not depend on the eigenvectors' phases (their norm is 1)",
)


@_eig.gradient
def _eig_grad(xp, op, gw, gv):
    """A V = V diag(w), unit columns of V: gA = V^-H (diag(gw) + conj(F) o (K - V^H V diag(Re diag K))) V^H
    with K = V^H gV, F_ij = 1 / (w_j - w_i) off the diagonal (TensorFlow's _EigGrad)."""
    a = op.inputs[0]
    w, v = op.outputs
    vh = _mH(xp, v)
    k = xp.matmul(vh, gv)
    k = k - xp.matmul(vh, v * xp.expand_dims(xp.astype(xp.real(xp.linalg.diagonal(k)), k.dtype), axis=-2))
    inner = xp.multiply_no_nan(conj_(xp, _eig_gap_inverse(xp, w)), k) + _diag_embed(xp, gw)
    ga = xp.linalg.solve(vh, xp.matmul(inner, vh))
    return ga if is_complex(a) else xp.real(ga)


@public(_eig)
def eig(x, /):
    """Eigenvalues and unit-norm eigenvectors of a square matrix, complex for every input (2025.12):
    ``EigResult(eigenvalues, eigenvectors)``, in the library's order."""
    return EigResult(*apply(_eig, (_prep("linalg.eig", x, square=True),)))


_eigvals = defop(
    "linalg.eigvals",
    _eigvals_forward,
    forward_takes="backend",
    chapter="linalg",
    saves="inputs",
    domain=[c.map_outputs(_fix_eigvals) for c in _EIG_DOMAIN],
    convention="complex outputs for real inputs (the gradient's real part); V^-H diag(g) V^H",
)


@_eigvals.gradient
def _eigvals_grad(xp, op, grad):
    """gA = V^-H diag(grad) V^H (the eigenvectors recomputed, so higher orders see them)."""
    a = op.inputs[0]
    _, v = xp.linalg.eig(a)
    vh = _mH(xp, v)
    ga = xp.linalg.solve(vh, xp.expand_dims(grad, axis=-1) * vh)
    return ga if is_complex(a) else xp.real(ga)


@public(_eigvals)
def eigvals(x, /):
    """Eigenvalues of a square matrix, complex for every input (2025.12), in the library's order."""
    return apply1(_eigvals, _prep("linalg.eigvals", x, square=True))


# ---------------------------------------------------------------------------------------- svd
def _svd_forward(xp, x, *, full_matrices=True):
    r = xp.linalg.svd(x, full_matrices=full_matrices)
    return r[0], r[1], r[2]


_svd = defop(
    "linalg.svd",
    _svd_forward,
    chapter="linalg",
    nout=3,
    saves="outputs",
    batched=True,
    xp_callable=True,
    domain=[
        Case(SMALL[3, 3].via(_spread)).map_outputs(_fix_svd),
        _C(SMALL[4, 3].via(_spread), full_matrices=False).map_outputs(_fix_svd),
        Case(SMALL[2, 3, 4].via(_spread), full_matrices=False).map_outputs(_fix_svd),
    ],
    convention="not defined at repeated or (non-square) zero singular values; the loss must not "
    "depend on the singular vectors' signs/phases; full_matrices=True on a non-square "
    "input: through the determined vectors only, as PyTorch",
)


@_svd.gradient
def _svd_grad(xp, op, gu, gs, gvh):
    """PyTorch's svd_backward (Townsend; complex: the phase-invariant form):
    gA = U [(skew(U^H gU) S + S skew(V^H gV)) / E + diag(gS) + i Im diag(U^H gU) / S] V^H, with
    E_jk = S_k^2 - S_j^2, plus (I - U U^H) gU S^-1 V^H (tall) or U S^-1 gV^H (I - V V^H) (wide)."""
    u, s, vh = op.outputs
    m, n = u.shape[-2], vh.shape[-1]
    k = s.shape[-1]
    if op.attrs.get("full_matrices", True) and m != n:
        # the extra m - k columns of U (rows of Vh) are not determined by the input: as PyTorch does,
        # the gradient flows through the k determined ones only (and the loss should not use the rest)
        u, gu = u[..., :, :k], gu[..., :, :k]
        vh, gvh = vh[..., :k, :], gvh[..., :k, :]
    uh = _mH(xp, u)
    uhgu = xp.matmul(uh, gu)
    uhgu = uhgu - _mH(xp, uhgu)
    vhgv = xp.matmul(vh, _mH(xp, gvh))
    vhgv = vhgv - _mH(xp, vhgv)
    s2 = s * s
    eye = _eye(xp, s, k)
    e = xp.expand_dims(s2, axis=-2) - xp.expand_dims(s2, axis=-1) + eye
    inner = xp.xdivy(uhgu * xp.expand_dims(s, axis=-2) + xp.expand_dims(s, axis=-1) * vhgv, e) + _diag_embed(xp, gs)
    if is_complex(u):
        inner = inner + _diag_embed(xp, xp.xdivy(xp.linalg.diagonal(uhgu), 2.0 * s))
    if m > n:
        gusinv = xp.xdivy(gu, xp.expand_dims(s, axis=-2))
        ga = xp.matmul(u, inner) + gusinv - xp.matmul(u, xp.matmul(uh, gusinv))
        return xp.matmul(ga, vh)
    if m < n:
        sinvgvh = xp.xdivy(gvh, xp.expand_dims(s, axis=-1))
        ga = xp.matmul(inner, vh) + sinvgvh - xp.matmul(xp.matmul(sinvgvh, _mH(xp, vh)), vh)
        return xp.matmul(u, ga)
    return xp.matmul(u, xp.matmul(inner, vh))


@public(_svd)
def svd(x, /, *, full_matrices=True):
    """The singular value decomposition ``x = U diag(S) Vh``: ``SVDResult(U, S, Vh)``, singular values
    descending."""
    x = _prep("linalg.svd", x)
    return SVDResult(*apply(_svd, (x,), {"full_matrices": bool(full_matrices)}))


_svdvals = defop(
    "linalg.svdvals",
    chapter="linalg",
    saves="inputs",
    batched=True,
    domain=[Case(SMALL[3, 4].via(_spread)), _C(SMALL[2, 3, 3].via(_spread))],
    convention="U diag(g) V^H; not defined at repeated singular values",
)


@_svdvals.gradient
def _svdvals_grad(xp, op, grad):
    """gA = U diag(grad) V^H (the singular vectors recomputed, so higher orders see them)."""
    u, _, vh = xp.linalg.svd(op.inputs[0], full_matrices=False)
    return xp.matmul(u * xp.expand_dims(grad, axis=-2), vh)


@public(_svdvals)
def svdvals(x, /):
    """The singular values, descending."""
    return apply1(_svdvals, _prep("linalg.svdvals", x))


# ---------------------------------------------------------------------------------------- qr
def _qr_forward(xp, x, *, mode="reduced"):
    r = xp.linalg.qr(x, mode=mode)
    return r[0], r[1]


_qr = defop(
    "linalg.qr",
    _qr_forward,
    chapter="linalg",
    nout=2,
    saves="outputs",
    batched=True,
    domain=[
        Case(SMALL[4, 3].via(_spread)).map_outputs(_fix_qr),
        _C(SMALL[4, 3].via(_spread)).map_outputs(_fix_qr),
        _C(SMALL[2, 3, 4].via(_spread), mode="complete").map_outputs(_fix_qr),
    ],
    convention="the loss must not depend on the signs/phases of R's diagonal; mode='complete' on "
    "a tall input: NotImplementedError, as TF",
)


@_qr.gradient
def _qr_grad(xp, op, gq, gr):
    """PyTorch's linalg_qr_backward.  M = gR R^H - Q^H gQ; tall or square:
    gA = (Q sym*(triu(M)) + gQ) R^-H; wide: gA = [Q skew*(-M) R1^-H, 0] + Q gR, where sym* and skew*
    halve the diagonal of X + X^H and of X - X^H."""
    q, r = op.outputs
    m, n = q.shape[-2], r.shape[-1]
    if op.attrs.get("mode", "reduced") == "complete" and m > n:
        raise NotImplementedError(
            f"the gradient of linalg.qr with mode='complete' is not defined for a tall input (shape "
            f"{tuple(q.shape[:-1]) + (n,)}): the extra columns of Q are arbitrary; use mode='reduced'"
        )
    mm = xp.matmul(gr, _mH(xp, r)) - xp.matmul(_mH(xp, q), gq)
    if m >= n:
        t = xp.triu(mm)
        ga = xp.matmul(q, _half_diag(xp, t + _mH(xp, t))) + gq
        return _mH(xp, xp.linalg.solve(r, _mH(xp, ga)))  # ga R^-H
    t = -mm
    ga = xp.matmul(q, _half_diag(xp, xp.tril(t - _mH(xp, t))))
    ga = _mH(xp, xp.linalg.solve(r[..., :, :m], _mH(xp, ga)))  # ga R1^-H
    zeros = xp.zeros(tuple(ga.shape[:-1]) + (n - m,), dtype=ga.dtype, device=_device(ga))
    return xp.concat([ga, zeros], axis=-1) + xp.matmul(q, gr)


@public(_qr)
def qr(x, /, *, mode="reduced"):
    """The QR decomposition ``x = Q R`` (``mode='reduced'`` or ``'complete'``): ``QRResult(Q, R)``."""
    x = _prep("linalg.qr", x)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return QRResult(*apply(_qr, (x,), {"mode": mode}))


# ---------------------------------------------------------------------------------------- pinv, rank
def _rtol_attr(name, rtol, x):
    if rtol is None or isinstance(rtol, (int, float)):
        return None if rtol is None else float(rtol)
    if isinstance(rtol, Tensor):
        if rtol._b is not x._b:
            raise ValueError(f"{name}: rtol is on backend {rtol.backend!r}, x on {x.backend!r}")
        return rtol._v
    return _tensor(rtol, x)._v


_pinv = defop(
    "linalg.pinv",
    chapter="linalg",
    batched=True,
    domain=[Case(SMALL[4, 3].via(_spread)), _C(SMALL[2, 3, 4].via(_spread), rtol=1e-3)],
    convention="Golub-Pereyra: defined where the rank is locally constant",
)


@_pinv.gradient
def _pinv_grad(xp, op, grad):
    """dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P, so
    gA = -P^H g P^H + (I - A P) g^H P P^H + P^H P g^H (I - P A)."""
    a = op.inputs[0]
    p = op.outputs[0]
    ph = _mH(xp, p)
    gh = _mH(xp, grad)
    t1 = -xp.matmul(ph, xp.matmul(grad, ph))
    ghppH = xp.matmul(gh, xp.matmul(p, ph))
    t2 = ghppH - xp.matmul(a, xp.matmul(p, ghppH))
    phpgh = xp.matmul(xp.matmul(ph, p), gh)
    t3 = phpgh - xp.matmul(xp.matmul(phpgh, p), a)
    return t1 + t2 + t3


@public(_pinv)
def pinv(x, /, *, rtol=None):
    """The Moore-Penrose pseudo-inverse (singular values below ``rtol`` times the largest dropped)."""
    x = _prep("linalg.pinv", x)
    return apply1(_pinv, x, {"rtol": _rtol_attr("linalg.pinv", rtol, x)})


def _low_rank(x):
    """``c c^H`` of the first column ``c`` of ``x``: a rank-1 matrix (a domain map)."""
    c = x[..., :, :1]
    return c @ _mH(tensor_namespace(), c)


def _matrix_rank_forward(xp, x, *, rtol=None):
    """The standard's rank from the singular values on every backend (``jax.numpy``'s ``rtol`` is an
    absolute tolerance)."""
    s = xp.linalg.svdvals(x)
    if rtol is None:
        rtol = builtins.max(x.shape[-2:]) * xp.finfo(s.dtype).eps
    elif not isinstance(rtol, float) and rtol.ndim > 0:
        rtol = xp.expand_dims(rtol, axis=-1)
    big = s > rtol * xp.max(s, axis=-1, keepdims=True)
    return xp.sum(xp.astype(big, xp.int64), axis=-1)


_matrix_rank = defop(
    "linalg.matrix_rank",
    _matrix_rank_forward,
    chapter="linalg",
    differentiable=False,
    domain=[Case(REAL[2, 3, 3], rtol=0.5), Case(REAL[3, 3].via(_low_rank))],
)


@public(_matrix_rank)
def matrix_rank(x, /, *, rtol=None):
    """The rank: the number of singular values above ``rtol`` times the largest (not differentiable)."""
    x = _prep("linalg.matrix_rank", x)
    return apply1(_matrix_rank, x, {"rtol": _rtol_attr("linalg.matrix_rank", rtol, x)})


# ---------------------------------------------------------------------------------------- norms
_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def _matrix_norm_forward(xp, x, *, ord="fro", keepdims=False):
    return xp.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)


_matrix_norm = defop(
    "linalg.matrix_norm",
    _matrix_norm_forward,
    chapter="linalg",
    batched=True,
    domain=[
        Case(REAL[3, 4]),
        _C(SMALL[3, 4].via(_spread), ord="nuc", keepdims=True),
        _C(REAL[3, 4], ord=1),
        Case(SMALL[3, 3].via(_spread), ord=2),
        Case(SMALL[2, 4, 3].via(_spread), ord=-2),
        Case(REAL[2, 3, 4], ord=1, keepdims=True),
        Case(REAL[3, 4], ord=-math.inf),
    ],
    convention="fro: x / |x| (0 at 0: the subgradient of least norm, as std); "
    "1, inf: ties of the max split the gradient evenly; 2, -2, nuc: "
    "through the SVD (not defined at repeated singular values)",
)


def _extreme_mask(xp, v, axis, largest):
    """Where ``v`` reaches its max (min) over ``axis``, each place weighted 1 / (number of places)."""
    ext = (xp.max if largest else xp.min)(v, axis=axis, keepdims=True)
    hit = xp.astype(v == ext, v.dtype)
    return hit / xp.sum(hit, axis=axis, keepdims=True)


@_matrix_norm.gradient
def _matrix_norm_grad(xp, op, grad):
    """fro: g x / |x|; nuc: g U V^H; 2 / -2: g u v^H of the largest / smallest singular value;
    1 / -1 (inf / -inf): g sgn(x) on the column (row) whose abs-sum is the max / min."""
    x = op.inputs[0]
    ordv = op.attrs["ord"]
    g = grad
    if not op.attrs.get("keepdims", False):
        g = xp.expand_dims(xp.expand_dims(g, axis=-1), axis=-1)
    if ordv == "fro":
        y = op.outputs[0]
        if not op.attrs.get("keepdims", False):
            y = xp.expand_dims(xp.expand_dims(y, axis=-1), axis=-1)
        return xp.multiply_no_nan(x / ones_where_zero(xp, y), g)
    if ordv in ("nuc", 2, -2):
        u, _, vh = xp.linalg.svd(x, full_matrices=False)
        if ordv == "nuc":
            return g * xp.matmul(u, vh)
        i = 0 if ordv == 2 else u.shape[-1] - 1
        return g * xp.matmul(u[..., :, i : i + 1], vh[..., i : i + 1, :])
    axis = -2 if ordv in (1, -1) else -1  # 1: column sums (over rows); inf: row sums
    sums = xp.sum(xp.abs(x), axis=axis, keepdims=True)
    mask = _extreme_mask(xp, sums, -1 if axis == -2 else -2, ordv > 0)
    return (g * mask) * _sgn(xp, x)


@public(_matrix_norm)
def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The matrix norm of the last two axes: ``'fro'``, ``'nuc'``, ``1``, ``-1``, ``2``, ``-2``,
    ``inf``, ``-inf``."""
    x = _prep("linalg.matrix_norm", x)
    if isinstance(ord, str) and ord not in ("fro", "nuc") or not isinstance(ord, str) and ord not in _MATRIX_ORDS:
        raise ValueError(f"linalg.matrix_norm: ord must be one of 'fro', 'nuc', 1, -1, 2, -2, inf, -inf; got {ord!r}")
    if not isinstance(ord, str):
        ord = float(ord) if math.isinf(ord) else int(ord)
    return apply1(_matrix_norm, x, {"ord": ord, "keepdims": bool(keepdims)})


def _vector_norm_forward(xp, x, *, axis=None, axes=None, keepdims=False, ord=2):
    if ord != -math.inf and axes is not None and any(x.shape[a] == 0 for a in axes):
        # a norm of no elements, as NumPy's and JAX's (torch raised a ValueError for inf and p < 0):
        # 0, and (sum of no |x_i|^p)^(1/p) = inf for p < 0; the 1-norm, 0, is one every library reduces
        zero = xp.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=1)
        return zero + math.inf if ord < 0 else zero
    return xp.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)


_vector_norm = defop(
    "linalg.vector_norm",
    _vector_norm_forward,
    chapter="linalg",
    batched=True,
    domain=[
        Case(NONZERO[3]),
        _C(NONZERO[3, 4], axis=-1, ord=math.inf),
        Case(NONZERO[3, 4], axis=1, ord=1),
        Case(NONZERO[2, 3, 3], axis=(0, 2), ord=-0.5, keepdims=True),
        Case(NONZERO[3, 4], ord=-math.inf, keepdims=True),
        Case(NONZERO[3, 4], axis=0, ord=0),
    ],
    convention="2 and p > 1: sgn(x) (|x| / |x|_p)^(p-1) (0 at 0: the subgradient of least norm, as std); "
    "1: sgn(x) (0 at 0); inf / -inf: ties split evenly; 0: zero gradient; "
    "p < 1: not defined at 0",
)


@_vector_norm.gradient
def _vector_norm_grad(xp, op, grad):
    """d ||x||_p = sgn(x) (|x| / ||x||)^(p - 1) (2: x / ||x||; 1: sgn(x); inf / -inf: sgn(x) where |x|
    is the max / min, ties split evenly; 0: piecewise constant, zero)."""
    x = op.inputs[0]
    p = op.attrs["ord"]
    axes = op.attrs["axes"]
    g = grad
    y = op.outputs[0]
    nb = g.ndim - y.ndim  # leading batch axes of the cotangent
    if not op.attrs.get("keepdims", False):
        keep = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        g = xp.reshape(g, tuple(g.shape[:nb]) + keep)
        y = xp.reshape(y, keep)
    if p == 0:
        return xp.zeros(tuple(g.shape[:nb]) + tuple(x.shape), dtype=x.dtype, device=_device(x))
    if p == 2:
        return xp.multiply_no_nan(x / ones_where_zero(xp, y), g)
    if p == 1:
        return g * _sgn(xp, x)
    if math.isinf(p):
        return (g * _extreme_mask(xp, xp.abs(x), axes, p > 0)) * _sgn(xp, x)
    return xp.multiply_no_nan((xp.abs(x) / (ones_where_zero(xp, y) if p > 1 else y)) ** (p - 1) * _sgn(xp, x), g)


@public(_vector_norm)
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The vector ``ord``-norm over ``axis`` (all axes by default): any real ``ord`` (``0``: count of
    nonzeros; negative and fractional orders as the standard defines them), ``inf``, ``-inf``."""
    x = _tensor(x)
    _check_float("linalg.vector_norm", x)
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise ValueError(f"linalg.vector_norm: ord must be a number, inf or -inf; got {ord!r}")
    axes = _axes(axis, x.ndim)
    ordv = float(ord) if math.isinf(ord) or ord != int(ord) else int(ord)
    native_axis = None if axis is None else (axes if len(axes) != 1 else axes[0])
    return apply1(_vector_norm, x, {"axis": native_axis, "axes": axes, "keepdims": bool(keepdims), "ord": ordv})


# ---------------------------------------------------------------------------------------- matrix_power
_matrix_power = defop(
    "linalg.matrix_power",
    lambda xp, x, *, n: xp.linalg.matrix_power(x, n),
    chapter="linalg",
    saves="inputs",
    batched=True,
    domain=[
        Case(SMALL[2, 3, 3], 3),
        _C(SMALL[3, 3].via(_shift), -1),
        Case(REAL[3, 3], 0),
        Case(SMALL[2, 3, 3].via(_shift), -2),
    ],
)


@_matrix_power.gradient
def _matrix_power_grad(xp, op, grad):
    """A^n = A...A: gA = sum_k (A^H)^k grad (A^H)^(n-1-k); for n < 0 the same for B = A^-1, then
    gA = -B^H gB B^H."""
    a = op.inputs[0]
    n = op.attrs["n"]
    if n == 0:
        return xp.zeros_like(grad)
    b = a if n > 0 else xp.linalg.inv(a)
    m = builtins.abs(n)
    bh = _mH(xp, b)
    powers = [None, bh]  # powers[k] = (B^H)^k, None standing for I
    for _ in range(2, m):
        powers.append(xp.matmul(powers[-1], bh))

    def times(left, mid, right):
        out = mid if left is None else xp.matmul(left, mid)
        return out if right is None else xp.matmul(out, right)

    gb = None
    for k in range(m):
        term = times(powers[k], grad, powers[m - 1 - k])
        gb = term if gb is None else gb + term
    if n > 0:
        return gb
    return -xp.matmul(bh, xp.matmul(gb, bh))


@public(_matrix_power)
def matrix_power(x, n, /):
    """``x`` raised to the integer power ``n`` (``n < 0``: of its inverse; ``n = 0``: the identity)."""
    x = _prep("linalg.matrix_power", x, square=True, floating=False)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"linalg.matrix_power: n must be an integer, got {type(n).__name__}") from None
    if n < 0:
        _check_float("linalg.matrix_power (with n < 0)", x)
    return apply1(_matrix_power, x, {"n": n})


# ---------------------------------------------------------------------------------------- cross, outer
_cross = defop(
    "linalg.cross",
    chapter="linalg",
    saves="inputs",
    batched=True,
    promote=True,
    domain=with_complex([Case(REAL[4, 3], REAL[3])]) + [Case(REAL[3, 3], REAL[3, 3], axis=-2)],
)


@_cross.gradient
def _cross_grad(xp, op, grad):
    """c = a x b (bilinear): ga = conj(b) x grad, gb = grad x conj(a)."""
    a, b = op.inputs
    axis = op.attrs["axis"]
    ga = xp.linalg.cross(conj_(xp, b), grad, axis=axis) if op.needs_grad(0) else None
    gb = xp.linalg.cross(grad, conj_(xp, a), axis=axis) if op.needs_grad(1) else None
    return ga, gb


@public(_cross)
def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along ``axis`` (a negative axis; other axes broadcast)."""
    x1 = _tensor(x1, x2)
    x2 = _tensor(x2, x1)
    axis = operator.index(axis)
    nd = builtins.min(x1.ndim, x2.ndim)
    if not -nd <= axis <= -1:
        raise ValueError(
            f"linalg.cross: axis must be in [-{nd}, -1] for inputs of {x1.ndim} and {x2.ndim} dimensions, got {axis}"
        )
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(
            f"linalg.cross: the vectors along axis {axis} must have 3 elements, got shapes {x1.shape} and {x2.shape}"
        )
    return apply(_cross, (x1, x2), {"axis": axis})


_outer = defop(
    "linalg.outer",
    chapter="linalg",
    promote=True,
    saves="inputs",
    batched=True,
    domain=with_complex([Case(REAL[3], REAL[4])]),
)


@_outer.gradient
def _outer_grad(xp, op, grad):
    """y = a b^T: ga = grad conj(b), gb = grad^T conj(a)."""
    a, b = op.inputs
    return (
        xp.matmul(grad, conj_(xp, b)) if op.needs_grad(0) else None,
        xp.matmul(conj_(xp, a), grad) if op.needs_grad(1) else None,
    )


@public(_outer)
def outer(x1, x2, /):
    """The outer product of two vectors."""
    x1 = _tensor(x1, x2)
    x2 = _tensor(x2, x1)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"linalg.outer expects two 1-D tensors, got shapes {x1.shape} and {x2.shape}")
    return apply(_outer, (x1, x2))


# ---------------------------------------------------------------------------------------- trace, diagonal
def _trace_forward(xp, x, *, offset=0):
    """The library's trace, in ``x``'s dtype (the public function casts integers to int64 / uint64
    first; ``array_api_compat.torch`` sums uint64 into int64)."""
    out = xp.linalg.trace(x, offset=offset)
    return out if out.dtype == x.dtype else xp.astype(out, x.dtype)


_trace = defop(
    "linalg.trace",
    _trace_forward,
    xp_callable=True,
    chapter="linalg",
    saves="inputs",
    batched=True,
    domain=[Case(REAL[2, 3, 4], offset=1), _C(REAL[3, 3]), Case(REAL[3, 4], offset=-1)],
)


@_trace.gradient
def _trace_grad(xp, op, grad):
    """Linear: grad times the 0/1 mask of the diagonal."""
    x = op.inputs[0]
    m, n = x.shape[-2:]
    return xp.expand_dims(xp.expand_dims(grad, axis=-1), axis=-1) * _eye(xp, x, m, n, k=op.attrs["offset"])


@public(_trace)
def trace(x, /, *, offset=0, dtype=None):
    """The sum of the ``offset``-th diagonal of the last two axes (in ``dtype`` if given; integer
    inputs accumulate in int64 / uint64)."""
    x = _prep("linalg.trace", x, floating=False)
    if dtype is not None and _dt.as_dtype(dtype) is not x.dtype:
        x = astype(x, dtype)
    elif dtype is None and x.dtype.kind in "iu" and x.dtype not in (_dt.int64, _dt.uint64):
        x = astype(x, _dt.uint64 if x.dtype.kind == "u" else _dt.int64)
    return apply1(_trace, x, {"offset": operator.index(offset)})


_diagonal = defop(
    "linalg.diagonal",
    chapter="linalg",
    saves="inputs",
    batched=True,
    domain=[Case(REAL[2, 3, 4], offset=1), _C(REAL[3, 3]), Case(REAL[4, 3], offset=-2)],
)


@_diagonal.gradient
def _diagonal_grad(xp, op, grad):
    """Scatter the gradient back onto the diagonal: the 0/1 mask of the diagonal times the gradient
    laid out along rows (offset >= 0) or columns (offset < 0), padded with zeros."""
    x = op.inputs[0]
    m, n = x.shape[-2:]
    k = op.attrs["offset"]
    mask = _eye(xp, x, m, n, k=k)
    length = grad.shape[-1]
    full = m if k >= 0 else n
    g = grad
    if length < full:
        tail = xp.zeros(tuple(g.shape[:-1]) + (full - length,), dtype=g.dtype, device=_device(g))
        g = xp.concat([g, tail], axis=-1)
    return mask * (xp.expand_dims(g, axis=-1) if k >= 0 else xp.expand_dims(g, axis=-2))


@public(_diagonal)
def diagonal(x, /, *, offset=0):
    """The ``offset``-th diagonal of the last two axes."""
    x = _prep("linalg.diagonal", x, floating=False)
    attrs = {"offset": operator.index(offset)}
    # a read-only view of x, as NumPy's (docs/conventions.md, "Views"); through the module: _operators links
    return _manipulation._linked(apply1(_diagonal, x, attrs), x, _diagonal, attrs, read_only=True)


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("leading", _cholesky, _det, _slogdet, _inv, _eigh, _eigvalsh, _eig, _eigvals, _svd, _svdvals, _qr, _pinv)
batch_as("leading", _matrix_rank, _matrix_norm, _matrix_power, _trace, _diagonal)
batch_as("stacked_matrices", _solve)
batch_as("reduction", _vector_norm)
batch_as("elementwise_axis", _cross)
batch_as("outer", _outer)
