"""``gt.special``: the special functions SciPy's array-API dispatch looks up, differentiable.

With ``SCIPY_ARRAY_API=1``, ``scipy.special.<f>(x)`` takes ``xp = array_namespace(x)`` (``gradtape``
for a gradtape tensor), finds no "scipy namespace" for it (that is only for CuPy, JAX and torch)
and then looks up ``getattr(xp.special, name)`` (``scipy/special/_support_alternative_backends.py``,
``_get_native_func``), by SciPy's own name (``psi`` for ``digamma``; ``alt_names_map`` renames only
for ``torch``/``jax.numpy``), calling it with SciPy's positional arguments.  Found, it is called as is
and its result returned; not found, SciPy uses its generic array-API version where it has one
(``xlogy``, ``rel_entr``, ...) or, failing that, converts the arguments with ``np.asarray``, calls the
NumPy ufunc and wraps the result with ``xp.asarray``: a tensor no tape connects to its inputs.

Provided here (each a registered op, chapter ``special``, with a rule in gradtape ops and a domain),
of SciPy's list: ``erf``, ``erfc``, ``erfinv``, ``expit``, ``logit``, ``xlogy``, ``xlog1py``, ``entr``,
``rel_entr``, ``gammaln``, ``psi`` (= ``digamma``), ``polygamma``, ``gamma``, ``ndtr``, ``log_ndtr``,
``ndtri``, ``i0``, ``i0e``, ``i1``, ``i1e``, ``betaln``, ``sinc``, ``exp2``, ``exp10``, ``cosm1``.
Also ``erfcinv`` (a bare ufunc in SciPy 1.17, never dispatched: ``scipy.special.erfcinv(tensor)`` is
a ``TypeError``) and ``softmax``, ``log_softmax``, ``logsumexp`` with SciPy's signatures (SciPy
computes those from the namespace's own functions, so they differentiate without ``xp.special``).

Forwards: the library's own function where its adapter declares one (``Backend.special_function``:
SciPy's for NumPy's arrays, ``torch.special``, ``jax.scipy.special``); else, where the library has
what it is made of, a composition (``erfcinv`` from ``ndtri``, ``betaln`` from ``gammaln`` with SciPy's
values at the poles); else SciPy on the host copies (dask, array_api_strict, CuPy), as for complex
inputs, which the libraries' special functions do not take.  ``sinc`` falls back on its Array API form.
At the edges where a library's own function gives another number than SciPy's (torch's ``gamma(+-0)``
NaN, JAX's ``digamma(+-0)`` NaN, ``polygamma`` at poles and +-inf, ``rel_entr`` of NaN, ``gammaln(-inf)``),
the forward puts SciPy's there (``edges=``: one ``where`` per edge), so every backend gives SciPy's numbers.

The rest of SciPy's list (``bdtr``, ``betainc``, ``gammainc``, ``j0``, ``k0``, ``zeta``, ... about 70
functions) is not provided yet: SciPy then computes them through NumPy and the result is constant to
every tape (its gradient is ``None``).

Rules follow the zero-cotangent convention: where a derivative is infinite or undefined (``logit``
at 0 and 1, ``erfinv`` at +-1, ``xlogy``'s ``d/dy`` at ``y = 0``, poles of ``gammaln``...) a zero
cotangent gives a zero gradient, never NaN (``multiply_no_nan(derivative, grad)``, whose own rule
keeps higher-order and forward-mode derivatives right).
"""

from __future__ import annotations

import math

import numpy as np

from gradtape.core import dtypes as _dt
from gradtape.core.domains import POSITIVE, REAL, UNIT, Case, Sampler
from gradtape.ops import apply1, batch_as, binary, composite, defop, public, unary
from gradtape.ops import nn as _nn
from gradtape.ops.elementwise import (
    abs,
    astype,
    conj_,
    equal,
    exp,
    less,
    log,
    sign,
    sin,
    square,
)
from gradtape.ops.manipulation import _broadcast, permute_dims, reshape
from gradtape.ops.searching import where
from gradtape.ops.statistical import _axes, max, sum
from gradtape.core.tensor import Tensor, wrap, convert_to_tensor

__all__ = [
    "betaln",
    "cosm1",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcinv",
    "erfinv",
    "exp10",
    "exp2",
    "expit",
    "gamma",
    "gammaln",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "rel_entr",
    "sinc",
    "softmax",
    "xlog1py",
    "xlogy",
]

_SQRT2 = math.sqrt(2.0)
_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)

# --------------------------------------------------------------------------- domains
OPEN01 = Sampler("OPEN01", 0.05, 0.95, edges=(0.0, 1.0))
OPEN02 = Sampler("OPEN02", 0.1, 1.9, edges=(0.0, 2.0))
NONNEG_EDGE = Sampler("NONNEG_EDGE", 0.05, 3.0, edges=(0.0,))
GT_MINUS1 = Sampler("GT_MINUS1", -0.8, 2.0, edges=(-1.0,))
# the real line around the poles of gamma at 0, -1, -2
OFF_POLES = Sampler("OFF_POLES", -2.8, 3.0, avoid=(0.0, -1.0, -2.0, -3.0), gap=0.15, edges=(0.0, -1.0, -2.0))
FAR_LEFT = Sampler("FAR_LEFT", -150.0, -20.0, edges=(-math.inf,))
MODERATE = Sampler("MODERATE", -3.0, 3.0, edges=(0.0,))


# --------------------------------------------------------------------------- forwards
def _host(backend, fn, *xs):
    """``fn`` (NumPy/SciPy) on the host copies of ``xs``, back on ``xs[0]``'s backend and device, in
    its dtype."""
    like = next(x for x in xs if hasattr(x, "shape"))
    out = np.asarray(fn(*[backend.to_numpy(x) if hasattr(x, "shape") else x for x in xs]))
    dt = np.dtype(backend.dtype_of(like).name)
    return backend.asarray(out.astype(dt, copy=False), device=backend.device_of(like))


def _real(backend, xs):
    """Whether no input is complex (the libraries' special functions take real inputs only)."""
    for x in xs:
        if hasattr(x, "dtype") and backend.dtype_of(x).is_complex:
            return False
    return True


def _forward(name, derive=None, edges=None):
    """``forward(backend, *xs)``: the library's own ``scipy.special.<name>``
    (``backend.special_function``), else ``derive(backend, *xs)`` where that gives a value (a
    composition of the library's other special functions), else SciPy's on the host.  ``edges(xp,
    out, *xs)`` puts SciPy's values where a library's own function gives others (poles, infinities,
    NaN: see :func:`_at`)."""

    def forward(backend, *xs):
        if _real(backend, xs):
            f = backend.special_function(name)
            if f is not None:
                return f(*xs) if edges is None else edges(backend.xp, f(*xs), *xs)
            if derive is not None:
                out = derive(backend, *xs)
                if out is not None:
                    return out
        return _host(backend, getattr(_scipy_special(name), name), *xs)

    forward.__name__ = f"_{name}_forward"
    return forward


def _at(xp, where, value, out):
    """``out`` with ``value`` (a number) where ``where``: SciPy's value at an edge where a library's
    own special function gives another (torch's ``gamma(0)`` was NaN, JAX's ``digamma(0)`` NaN,
    torch's ``polygamma(1, -1)`` 6.6e32, JAX's ``rel_entr(1, nan)`` inf: one input, a number per backend)."""
    return xp.where(where, xp.full_like(out, value), out)


def _pole(xp, x):
    """Where ``x`` is 0, a negative integer or -inf (the poles of the gamma family)."""
    return (x <= 0) & (x == xp.floor(x))


def _gamma_edges(xp, out, x):
    """``gamma(+-0) = +-inf``."""
    return xp.where(x == 0, xp.copysign(xp.full_like(out, math.inf), x), out)


def _gammaln_edges(xp, out, x):
    """``gammaln(-inf) = -inf``."""
    return _at(xp, x == -math.inf, -math.inf, out)


def _psi_edges(xp, out, x):
    """``psi(+-0) = -+inf``."""
    return xp.where(x == 0, xp.copysign(xp.full_like(out, math.inf), -x), out)


def _polygamma_edges(xp, out, x, n):
    """SciPy's ``polygamma(n, x)``: ``psi``'s at 0; for ``n >= 1``, ``(-1)^(n+1) inf`` at the poles and
    -inf, 0 at inf."""
    if n == 0:
        return _psi_edges(xp, out, x)
    out = _at(xp, _pole(xp, x), math.inf if n % 2 else -math.inf, out)
    return _at(xp, x == math.inf, 0.0, out)


def _rel_entr_edges(xp, out, x, y):
    """``rel_entr``: NaN where ``x`` or ``y`` is NaN, inf at ``x = inf`` and a positive finite ``y``."""
    out = _at(xp, xp.isnan(x) | xp.isnan(y), math.nan, out)
    return _at(xp, (x == math.inf) & (y > 0) & (y < math.inf), math.inf, out)


def _scipy_special(name):
    """``scipy.special`` (imported on first use: SciPy is needed only where it computes the forward)."""
    try:
        import scipy.special
    except ImportError:
        raise ImportError(
            f"gt.special.{name} on this backend computes with SciPy, which is not installed: pip install scipy"
        ) from None
    return scipy.special


def _named(fn, name, doc):
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = "gradtape.special"
    fn.__doc__ = doc
    fn.op.doc = doc.split("\n")[0]
    return fn


def _unary(name, domain, doc, convention=None, saves=None, derive=None, edges=None):
    return _named(
        unary(
            "special." + name,
            domain,
            forward=_forward(name, derive, edges),
            forward_takes="backend",
            chapter="special",
            convention=convention,
            doc=doc,
            floating=True,
            saves=saves,
        ),
        name,
        doc,
    )


def _binary(name, domain, doc, convention=None, saves=None, derive=None, edges=None):
    return _named(
        binary(
            "special." + name,
            domain,
            forward=_forward(name, derive, edges),
            forward_takes="backend",
            chapter="special",
            convention=convention,
            doc=doc,
            floating=True,
            scalars=False,
            saves=saves,
        ),
        name,
        doc,
    )


# --------------------------------------------------------------------------- error functions
def _erf_fn(x, /):
    return _nn.erf(x)


erf = composite("special.erf", _erf_fn, domain=REAL, chapter="special", doc="The error function (``gt.nn.erf``).")
_named(erf, "erf", "The error function, ``2/sqrt(pi) * integral_0^x exp(-t^2) dt``.")

erfc = _unary("erfc", REAL, "The complementary error function ``1 - erf(x)``, accurate for large x.", saves="inputs")
erfc.gradient(lambda xp, op, grad: grad * conj_(xp, (-2.0 / _SQRT_PI) * xp.exp(-xp.square(op.inputs[0]))))


def _erfcinv_from_ndtri(backend, x):
    """``erfcinv(x) = -ndtri(x / 2) / sqrt(2)``, where the library has ``ndtri``."""
    ndtri = backend.special_function("ndtri")
    return None if ndtri is None else -ndtri(x / 2) / _SQRT2


erfinv = _unary(
    "erfinv",
    UNIT,
    "The inverse of ``erf`` on (-1, 1).",
    convention="infinite slope at +-1: a zero cotangent gives 0",
    saves="outputs",
)
erfinv.gradient(lambda xp, op, grad: xp.multiply_no_nan((_SQRT_PI / 2) * xp.exp(xp.square(op.outputs[0])), grad))

erfcinv = _unary(
    "erfcinv",
    OPEN02,
    "The inverse of ``erfc`` on (0, 2).",
    derive=_erfcinv_from_ndtri,
    convention="infinite slope at 0 and 2: a zero cotangent gives 0",
    saves="outputs",
)
erfcinv.gradient(lambda xp, op, grad: xp.multiply_no_nan((-_SQRT_PI / 2) * xp.exp(xp.square(op.outputs[0])), grad))

ndtr = _unary("ndtr", REAL, "The standard normal CDF.", saves="inputs")
ndtr.gradient(lambda xp, op, grad: grad * (xp.exp(-0.5 * xp.square(op.inputs[0])) / _SQRT_2PI))

ndtri = _unary(
    "ndtri",
    OPEN01,
    "The inverse of ``ndtr`` on (0, 1).",
    convention="infinite slope at 0 and 1: a zero cotangent gives 0",
    saves="outputs",
)
ndtri.gradient(lambda xp, op, grad: xp.multiply_no_nan(_SQRT_2PI * xp.exp(0.5 * xp.square(op.outputs[0])), grad))

log_ndtr = _unary(
    "log_ndtr",
    [REAL, FAR_LEFT],
    "``log(ndtr(x))``, accurate far in the left tail.",
    convention="the slope -> |x| as x -> -inf: a zero cotangent gives 0 at -inf",
    saves=("inputs", "outputs"),
)


@log_ndtr.gradient
def _log_ndtr_grad(xp, op, grad):
    """d log ndtr = phi(x) / ndtr(x) = exp(-x^2/2 - y) / sqrt(2 pi); below x = -100 (where that
    difference cancels) the asymptotic -x / (1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8).  Each branch
    reads its inputs through a where, so the masked one stays finite."""
    x = op.inputs[0]
    y = op.outputs[0]
    far = x < -100.0
    near = xp.exp(-0.5 * xp.square(xp.where(far, 0.0, x)) - xp.where(far, 0.0, y)) / _SQRT_2PI
    xf = xp.where(far, x, -100.0)
    r = 1.0 / xp.square(xf)
    tail = -xf / (1.0 + r * (-1.0 + r * (3.0 + r * (-15.0 + r * 105.0))))
    return xp.multiply_no_nan(xp.where(far, tail, near), grad)


# --------------------------------------------------------------------------- logistic
def _expit_fn(x, /):
    return _nn.sigmoid(x)


expit = composite(
    "special.expit",
    _expit_fn,
    domain=REAL,
    chapter="special",
    doc="The logistic sigmoid ``1 / (1 + exp(-x))`` (``gt.nn.sigmoid``).",
)
_named(expit, "expit", "The logistic sigmoid ``1 / (1 + exp(-x))``.")

logit = _unary(
    "logit",
    OPEN01,
    "``log(p / (1 - p))``, the inverse of ``expit``.",
    convention="infinite slope at 0 and 1: a zero cotangent gives 0",
    saves="inputs",
)


@logit.gradient
def _logit_grad(xp, op, grad):
    """d logit = dp / (p (1 - p))."""
    p = op.inputs[0]
    return xp.multiply_no_nan(1.0 / (p * (1.0 - p)), grad)


# --------------------------------------------------------------------------- x log y family
xlogy = _binary(
    "xlogy",
    [(REAL, NONNEG_EDGE)],
    "``x * log(y)``, 0 where ``x == 0``.",
    convention="d/dx = log(y) (also at x = 0); d/dy = x / y, 0 where x == 0; a zero cotangent gives 0 at y = 0",
    saves="inputs",
)


@xlogy.gradient
def _xlogy_grad(xp, op, grad):
    """d/dx = log(y); d/dy = x / y (0 where x == 0: the function is 0 there for every y)."""
    x, y = op.inputs
    gx = gy = None
    if op.needs_grad(0):
        gx = xp.multiply_no_nan(xp.log(y), grad)
    if op.needs_grad(1):
        gy = xp.multiply_no_nan(xp.xdivy(x, y), grad)  # x / y, 0 where x == 0
    return gx, gy


xlog1py = _binary(
    "xlog1py",
    [(REAL, GT_MINUS1)],
    "``x * log1p(y)``, 0 where ``x == 0``.",
    convention="d/dx = log1p(y); d/dy = x / (1 + y), 0 where x == 0; a zero cotangent gives 0 at y = -1",
    saves="inputs",
)


@xlog1py.gradient
def _xlog1py_grad(xp, op, grad):
    """d/dx = log1p(y); d/dy = x / (1 + y) (0 where x == 0)."""
    x, y = op.inputs
    gx = gy = None
    if op.needs_grad(0):
        gx = xp.multiply_no_nan(xp.log1p(y), grad)
    if op.needs_grad(1):
        gy = xp.multiply_no_nan(xp.xdivy(x, 1.0 + y), grad)  # x / (1 + y), 0 where x == 0
    return gx, gy


entr = _unary(
    "entr",
    NONNEG_EDGE,
    "``-x log(x)`` for x > 0, 0 at 0, -inf below.",
    convention="infinite slope at 0: a zero cotangent gives 0",
    saves="inputs",
)
entr.gradient(lambda xp, op, grad: xp.multiply_no_nan(-(xp.log(op.inputs[0]) + 1.0), grad))


rel_entr = _binary(
    "rel_entr",
    [(NONNEG_EDGE, NONNEG_EDGE)],
    "``x log(x / y)`` for x, y > 0; 0 at x = 0, y >= 0; inf otherwise.",
    convention="infinite slopes at x = 0 and y = 0: a zero cotangent gives 0",
    saves="inputs",
    edges=_rel_entr_edges,
)


@rel_entr.gradient
def _rel_entr_grad(xp, op, grad):
    """d/dx = log(x / y) + 1, d/dy = -x / y."""
    x, y = op.inputs
    return (
        xp.multiply_no_nan(xp.log(x) - xp.log(y) + 1.0, grad) if op.needs_grad(0) else None,
        xp.multiply_no_nan(-x / y, grad) if op.needs_grad(1) else None,
    )


# --------------------------------------------------------------------------- gamma family
_POLES = "poles at 0, -1, -2, ...: a zero cotangent gives 0 there"

gammaln = _unary("gammaln", OFF_POLES, "``log|gamma(x)|``.", convention=_POLES, saves="inputs", edges=_gammaln_edges)
gammaln.gradient(lambda xp, op, grad: xp.multiply_no_nan(xp.special.psi(op.inputs[0]), grad))

psi = _unary(
    "psi",
    OFF_POLES,
    "The digamma function ``gammaln'(x)`` (SciPy's ``psi``).",
    convention=_POLES,
    saves="inputs",
    edges=_psi_edges,
)
digamma = psi
psi.gradient(lambda xp, op, grad: xp.multiply_no_nan(xp.special.polygamma(1, op.inputs[0]), grad))


def _polygamma_forward(backend, *args, n=None):
    """``polygamma(n, x)`` on ``backend``: called by the dispatch with the op's input and attribute
    (``x, n=n``), and by rules on the native namespace (``xp.special.polygamma``) with the public
    function's arguments ``(n, x)``."""
    x = args[-1]
    if n is None:
        n = args[0]
    f = backend.special_function("polygamma") if _real(backend, (x,)) else None
    if f is not None:
        return _polygamma_edges(backend.xp, f(n, x), x, n)
    sc = _scipy_special("polygamma")
    return _host(backend, lambda h: sc.polygamma(n, h), x)


_polygamma = defop(
    "special.polygamma",
    _polygamma_forward,
    forward_takes="backend",
    chapter="special",
    floating=True,
    domain=[Case(1, POSITIVE[2, 3]), Case(0, OFF_POLES[4]), Case(2, POSITIVE[3])],
    convention=_POLES,
    saves="inputs",
    xp_callable=True,
    batched=True,
)


@public(_polygamma)
def polygamma(n, x, /):
    """The n-th derivative of ``psi`` (``n`` an int, or an integer array: one op per distinct value),
    as ``scipy.special.polygamma``: NaN where ``n`` is negative, the shape of ``n`` and ``x``
    broadcast together."""
    x = x if isinstance(x, Tensor) else convert_to_tensor(x)
    if isinstance(n, (int, np.integer)) and n >= 0:
        return apply1(_polygamma, x, {"n": int(n)})
    n_host = np.asarray(n.numpy() if isinstance(n, Tensor) else n)
    if n_host.dtype.kind not in "iub":
        raise TypeError(f"polygamma: n must be integers, got dtype {n_host.dtype}")
    if x.dtype.is_floating:  # an integer array n promotes with x, as any two arrays (NumPy's under floatx float64)
        rt = _dt.result_type(_dt.as_dtype(n_host.dtype.name), x.dtype)
        if rt != x.dtype:
            x = astype(x, rt)
    n_host = n_host.astype(np.int64)
    shape = np.broadcast_shapes(n_host.shape, tuple(x.shape))
    nt = convert_to_tensor(n_host, like=x)
    orders = [int(k) for k in np.unique(n_host) if k >= 0]
    out = apply1(_polygamma, x, {"n": orders[0] if orders else 0})
    for k in orders[1:]:
        out = where(equal(nt, k), apply1(_polygamma, x, {"n": k}), out)
    if not orders or orders[0] != int(n_host.min(initial=0)):  # a negative order: NaN there
        out = where(less(nt, 0), math.nan, out)
    return _broadcast(out, shape)


_polygamma.gradient(
    lambda xp, op, grad: xp.multiply_no_nan(xp.special.polygamma(op.attrs["n"] + 1, op.inputs[0]), grad)
)


gamma = _unary(
    "gamma", OFF_POLES, "The gamma function.", convention=_POLES, saves=("inputs", "outputs"), edges=_gamma_edges
)
gamma.gradient(lambda xp, op, grad: xp.multiply_no_nan(op.outputs[0] * xp.special.psi(op.inputs[0]), grad))


def _betaln_poles(gammaln, floor, where, a, b):
    """``log|beta(a, b)|`` as SciPy's (cephes ``lbeta``) where ``a`` or ``b`` is a pole (0, -1, -2, ...):
    ``gammaln(a) + gammaln(b) - gammaln(a + b)`` is inf - inf there.  For a pole ``p = -m`` and an
    integer ``0 < q <= m`` (``q`` and ``1 - p`` 32-bit C ints, as cephes checks), ``|beta(p, q)| = beta(1 - p - q, q)``
    (finite); at any other pole, inf."""
    out = gammaln(a) + gammaln(b) - gammaln(a + b)

    def pole(v):
        return (v <= 0) & (v == floor(v))

    pa, pb = pole(a), pole(b)
    out = where(pa | pb, float("inf"), out)
    for p, q, p_pole in ((a, b, pa), (b, a, pb)):
        # cephes takes this branch only where q and 1 - p are C ints (32 bits): inf beyond, as SciPy
        finite = p_pole & (p >= 2 - 2**31) & (q == floor(q)) & (q > 0) & (q < 2**31) & (1 - p - q > 0)
        r, s = where(finite, 1 - p - q, 1.0), where(finite, q, 1.0)
        out = where(finite, gammaln(r) + gammaln(s) - gammaln(r + s), out)
    return out


def _betaln_from_gammaln(backend, a, b):
    """``betaln`` from the library's ``gammaln``, with SciPy's values at the poles."""
    gammaln = backend.special_function("gammaln")
    if gammaln is None:
        return None
    xp = backend.xp
    return _betaln_poles(gammaln, xp.floor, xp.where, a, b)


betaln = _binary(
    "betaln",
    [(POSITIVE, POSITIVE)],
    "``log|beta(a, b)|``.",
    convention=_POLES,
    derive=_betaln_from_gammaln,
    saves="inputs",
)


@betaln.gradient
def _betaln_grad(xp, op, grad):
    """d/da = psi(a) - psi(a + b), d/db = psi(b) - psi(a + b)."""
    a, b = op.inputs
    s = xp.special.psi(a + b)
    return (
        xp.multiply_no_nan(xp.special.psi(a) - s, grad) if op.needs_grad(0) else None,
        xp.multiply_no_nan(xp.special.psi(b) - s, grad) if op.needs_grad(1) else None,
    )


# --------------------------------------------------------------------------- Bessel
i0 = _unary("i0", REAL, "The modified Bessel function of the first kind, order 0.", saves="inputs")
i0.gradient(lambda xp, op, grad: grad * xp.special.i1(op.inputs[0]))

i0e = _unary("i0e", REAL, "``exp(-|x|) i0(x)``.", saves=("inputs", "outputs"))
i0e.gradient(lambda xp, op, grad: grad * (xp.special.i1e(op.inputs[0]) - xp.sign(op.inputs[0]) * op.outputs[0]))

i1 = _unary("i1", REAL, "The modified Bessel function of the first kind, order 1.", saves=("inputs", "outputs"))


@i1.gradient
def _i1_grad(xp, op, grad):
    """d i1 = i0(x) - i1(x) / x (1/2 at 0)."""
    x = op.inputs[0]
    x0 = x == 0
    return grad * xp.where(x0, 0.5, xp.special.i0(x) - op.outputs[0] / xp.where(x0, 1.0, x))


i1e = _unary("i1e", REAL, "``exp(-|x|) i1(x)``.", saves=("inputs", "outputs"))


@i1e.gradient
def _i1e_grad(xp, op, grad):
    """d i1e = i0e(x) - i1e(x) (sign(x) + 1 / x) (1/2 at 0)."""
    x = op.inputs[0]
    x0 = x == 0
    y = op.outputs[0]
    return grad * xp.where(x0, 0.5, xp.special.i0e(x) - y * (xp.sign(x) + 1.0 / xp.where(x0, 1.0, x)))


# --------------------------------------------------------------------------- elementary
def _sinc_forward(backend, x):
    f = backend.special_function("sinc") if _real(backend, (x,)) else None
    if f is not None:
        return f(x)
    xp = backend.xp
    z = x == 0
    px = math.pi * xp.where(z, xp.ones_like(x), x)
    return xp.where(z, xp.ones_like(x), xp.sin(px) / px)


sinc = _named(
    unary(
        "special.sinc", REAL, forward=_sinc_forward, forward_takes="backend", chapter="special", doc="s", saves="inputs"
    ),
    "sinc",
    "The normalised sinc ``sin(pi x) / (pi x)`` (1 at 0), as ``scipy.special.sinc``.",
)


@sinc.gradient
def _sinc_grad(xp, op, grad):
    """d sinc = (cos(pi x) - sinc(x)) / x (0 at 0)."""
    x = op.inputs[0]
    x0 = x == 0
    xs = xp.where(x0, 1.0, x)
    return grad * xp.where(x0, 0.0, (xp.cos(math.pi * xs) - xp.special.sinc(xs)) / xs)


def _exp2_fn(x, /):
    return exp(x * math.log(2.0))


def _exp10_fn(x, /):
    return exp(x * math.log(10.0))


def _cosm1_fn(x, /):
    return -2.0 * square(sin(0.5 * x))


exp2 = _named(composite("special.exp2", _exp2_fn, domain=MODERATE, chapter="special", doc="2**x"), "exp2", "``2**x``.")
exp10 = _named(
    composite("special.exp10", _exp10_fn, domain=MODERATE, chapter="special", doc="10**x"), "exp10", "``10**x``."
)
cosm1 = _named(
    composite("special.cosm1", _cosm1_fn, domain=REAL, chapter="special", doc="cos(x) - 1"),
    "cosm1",
    "``cos(x) - 1``, accurate near 0.",
)


# --------------------------------------------------------------------------- softmax family
def _last(x, axis):
    """``x`` with the axes ``axis`` (None: all) moved last and flattened into one, and a function
    that undoes it."""
    x = x if isinstance(x, Tensor) else convert_to_tensor(x)
    axes = _axes(axis, x.ndim)
    rest = tuple(a for a in range(x.ndim) if a not in axes)
    perm = rest + axes
    moved = permute_dims(x, perm) if perm != tuple(range(x.ndim)) else x
    kept = tuple(x.shape[a] for a in rest)
    flat = reshape(moved, kept + (-1,))
    inv = tuple(int(i) for i in np.argsort(perm))

    def back(y):
        y = reshape(y, kept + tuple(x.shape[a] for a in axes))
        return permute_dims(y, inv) if inv != tuple(range(x.ndim)) else y

    return flat, back


def _softmax_fn(x, /, axis=None):
    flat, back = _last(x, axis)
    return back(_nn.softmax(flat, axis=-1))


def _log_softmax_fn(x, /, axis=None):
    flat, back = _last(x, axis)
    return back(_nn.log_softmax(flat, axis=-1))


_SOFTMAX_CASES = [Case(REAL[4]), Case(REAL[2, 3]), Case(REAL[2, 3], axis=0), Case(REAL[2, 3, 2], axis=(0, 2))]
softmax = _named(
    composite("special.softmax", _softmax_fn, domain=_SOFTMAX_CASES, chapter="special", doc="s"),
    "softmax",
    "``exp(x) / sum(exp(x), axis)`` (``axis=None``: over all axes), as SciPy.",
)
log_softmax = _named(
    composite("special.log_softmax", _log_softmax_fn, domain=_SOFTMAX_CASES, chapter="special", doc="l"),
    "log_softmax",
    "``x - logsumexp(x, axis)`` (``axis=None``: over all axes), as SciPy.",
)


def _logsumexp_fn(a, /, axis=None, b=None, keepdims=False, return_sign=False):
    a = a if isinstance(a, Tensor) else convert_to_tensor(a)
    if b is None and not return_sign:
        return _nn.logsumexp(a, axis=axis, keepdims=keepdims)
    if b is not None:
        b = b if isinstance(b, Tensor) else convert_to_tensor(b, like=a)
        a, b = a + 0.0 * b, b + 0.0 * a  # broadcast both
        a = where(equal(b, 0), -math.inf, a)  # terms with b == 0 do not count
    axes = _axes(axis, a.ndim)
    m = max(a, axis=axes, keepdims=True)
    m = wrap(m._v, m._b)  # a constant: stop_gradient (custom_gradient is a layer above)
    m = where(abs(m) < math.inf, m, 0.0)
    e = exp(a - m)
    s = sum(e if b is None else b * e, axis=axes, keepdims=True)
    out = log(abs(s)) + m
    if not keepdims:
        out = reshape(out, tuple(n for i, n in enumerate(a.shape) if i not in axes))
        s = reshape(s, out.shape)
    if return_sign:
        return out, sign(s)
    return where(less(s, 0), math.nan, out)


logsumexp = _named(
    composite(
        "special.logsumexp",
        _logsumexp_fn,
        chapter="special",
        doc="l",
        domain=[
            Case(REAL[4]),
            Case(REAL[2, 3], axis=1),
            Case(REAL[2, 3], axis=0, keepdims=True),
            Case(REAL[2, 3], axis=1, b=np.array([0.5, 2.0, 1.5])),
            Case(REAL[3], return_sign=True, b=np.array([1.0, -0.2, 0.5])),
        ],
    ),
    "logsumexp",
    "``log(sum(b * exp(a), axis))``, computed stably, with SciPy's signature.",
)


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("elementwise", _polygamma)
