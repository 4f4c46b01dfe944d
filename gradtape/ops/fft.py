"""The ``fft`` extension of the Array API standard (2024.12): ``gt.fft``.

Every transform is linear, so each gradient is the adjoint map (under the real inner product
``Re(sum(conj(a) * b))``, which is TensorFlow's complex convention), written with the transforms
themselves:

* ``fft``/``ifft``/``fftn``/``ifftn`` (``x`` of size ``M`` padded or trimmed to ``n``, then
  transformed): the inverse transform of the gradient with the opposite normalisation
  (``'backward'`` <-> ``'forward'``, ``'ortho'`` stays), brought back to size ``M`` (the adjoint of
  zero-padding is trimming and vice versa);
* ``rfft``/``rfftn`` keep the bins ``0 .. n//2`` of a real signal's spectrum: the adjoint is
  ``irfft`` of the gradient with the bins that stand for two (all but DC and, for even ``n``,
  Nyquist) halved, since ``irfft`` counts them twice;
* ``irfft``/``irfftn`` extend the half spectrum hermitian-symmetrically and take the real inverse:
  the adjoint is ``rfft`` of the gradient with those bins doubled; DC and Nyquist come out real,
  as the forward ignores their imaginary parts;
* ``hfft(x) = irfft(conj(x))`` and ``ihfft(x) = conj(rfft(x))`` (with the opposite normalisation)
  conjugate around the rules above;
* ``fftshift`` and ``ifftshift`` are permutations, each the other's adjoint.

Dtypes follow the standard (and ``array_api_strict``): ``fft``, ``ifft``, ``fftn``, ``ifftn``,
``irfft``, ``irfftn`` and ``hfft`` take complex input, ``rfft``, ``rfftn`` and ``ihfft`` real
floating input; anything else is a ``TypeError`` naming the op.  ``complex64`` pairs with
``float32``, ``complex128`` with ``float64``.  ``fftfreq`` and ``rfftfreq`` are creation functions
(the active backend and device, ``gt.config.floatx()`` unless ``dtype`` says otherwise), not ops.
"""

from __future__ import annotations

import numpy as np

from array_api_compat import device as _device

from gradtape.core import dtypes as _dt
from gradtape.core.domains import COMPLEX, REAL, Case
from gradtape.backends.batching import axis_kind
from gradtape.ops import apply1, batch_as, defop, public
from gradtape.ops.creation import _backend_and_device, _native_dtype
from gradtape.ops.elementwise import conj_
from gradtape.ops.manipulation import roll
from gradtape.core.tensor import Tensor, wrap, convert_to_tensor

__all__ = [
    "fft",
    "ifft",
    "fftn",
    "ifftn",
    "rfft",
    "irfft",
    "rfftn",
    "irfftn",
    "hfft",
    "ihfft",
    "fftfreq",
    "rfftfreq",
    "fftshift",
    "ifftshift",
]

_NORMS = ("backward", "ortho", "forward")
#: the normalisation of the adjoint (and of the inverse transform): 1 <-> 1/n, 1/sqrt(n) stays
_SWAP = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


# --------------------------------------------------------------------------- argument checks
def _tensor(name, x, kind):
    """``x`` as a Tensor whose dtype is of ``kind`` ('c': complex floating, 'f': real floating)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    if x.dtype.kind == kind:
        return x
    if kind == "c":
        hint = (
            f"cast it with gt.astype(x, gt.{_dt.complex_dtype(x.dtype).name})"
            if x.dtype.kind == "f"
            else "cast it with gt.astype(x, gt.complex128)"
        )
        if name in ("fft", "fftn"):
            hint += f", or use gt.fft.r{name} for real input"
        raise TypeError(
            f"fft.{name} needs a complex floating-point input (the Array API standard's dtype "
            f"rule), got {x.dtype}; {hint}"
        )
    hint = (
        f"use gt.fft.{_COMPLEX_TWIN[name]} for complex input, or take gt.real(x)"
        if x.dtype.kind == "c"
        else "cast it with gt.astype(x, gt.float64)"
    )
    raise TypeError(
        f"fft.{name} needs a real floating-point input (the Array API standard's dtype rule), got {x.dtype}; {hint}"
    )


_COMPLEX_TWIN = {"rfft": "fft", "rfftn": "fftn", "ihfft": "ifft"}


def _norm(name, norm):
    if norm not in _NORMS:
        raise ValueError(f"fft.{name}: norm must be 'backward', 'ortho' or 'forward', not {norm!r}")
    return norm


def _axis(name, axis, ndim):
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"fft.{name}: axis must be an integer, not {axis!r}")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise IndexError(
            f"fft.{name}: axis {axis} is out of bounds for array of dimension {ndim}"
            + (" (a 0-d tensor has no axis to transform)" if ndim == 0 else "")
        )
    return axis % ndim


def _size(name, n, what="n"):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"fft.{name}: {what} must be an integer, not {n!r}")
    n = int(n)
    if n < 1:
        raise ValueError(f"fft.{name}: invalid number of data points {what}={n}; it must be at least 1")
    return n


def _axes(name, x, s, axes, *, half=False):
    """Non-negative ``axes`` (all by default) and the transform sizes ``s`` (``-1`` and ``None``
    meaning the input's size, or ``2 * (M - 1)`` on the last axis of a half spectrum)."""
    if s is not None and axes is None:
        raise ValueError(
            f"fft.{name}: s= needs axes= (the Array API standard requires both, so the "
            "sizes cannot be matched to the wrong axes)"
        )
    ndim = x.ndim
    if axes is None:
        axes = tuple(range(ndim))
    else:
        if isinstance(axes, (int, np.integer)):
            raise TypeError(
                f"fft.{name}: axes must be a sequence of integers, not {axes!r}; use fft.{name[:-1]} for one axis"
            )
        axes = tuple(_axis(name, a, ndim) for a in axes)
        if len(set(axes)) != len(axes):
            raise ValueError(f"fft.{name}: repeated axis in axes={axes}; name each axis once")
    if s is None:
        s = (-1,) * len(axes)
    else:
        s = tuple(s)
        if len(s) != len(axes):
            raise ValueError(f"fft.{name}: s and axes must have the same length, got s={s} and axes={axes}")
    out = []
    for i, (n, a) in enumerate(zip(s, axes)):
        if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and int(n) == -1:
            n = 2 * (x.shape[a] - 1) if half and i == len(axes) - 1 else x.shape[a]
            if n < 1:
                raise ValueError(
                    f"fft.{name}: axis {a} of size {x.shape[a]} gives an empty transform; pass s= explicitly"
                )
        out.append(_size(name, n, "s[i]"))
    return tuple(out), axes


# --------------------------------------------------------------------------- rule helpers
# Rules run on the namespace ``xp`` the engine passes (native arrays, or Tensors at higher order);
# they count axes from the end (``axis - x.ndim``), so cotangents may carry leading batch axes.
def _resize(xp, t, axis, size):
    """``t`` trimmed or zero-padded to ``size`` along the negative ``axis`` (the adjoint of padding
    is trimming and vice versa)."""
    m = t.shape[axis]
    if m == size:
        return t
    if m > size:
        return t[(Ellipsis, slice(0, size)) + (slice(None),) * (-axis - 1)]
    shape = list(t.shape)
    shape[axis] = size - m
    return xp.concat([t, xp.zeros(tuple(shape), dtype=t.dtype, device=_device(t))], axis=axis)


def _resize_all(xp, t, axes, sizes):
    for a, n in zip(axes, sizes):
        t = _resize(xp, t, a, n)
    return t


def _bin_weights(xp, like, axis, n, weight):
    """``weight`` (0.5 or 2) on the bins ``1 .. n//2`` of a half spectrum of length ``n`` that stand
    for two bins of the full one (all but DC and, for even ``n``, Nyquist), 1 elsewhere; shaped
    to broadcast along the negative ``axis`` of ``like``, in its dtype and on its device."""
    size = n // 2 + 1
    w = [float(weight)] * size
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    w = xp.asarray(w, dtype=like.dtype, device=_device(like))
    return w if axis == -1 else xp.reshape(w, (size,) + (1,) * (-axis - 1))


def _neg(axes, ndim):
    """The non-negative ``axes`` of an ``ndim``-dimensional input as negative ones (from the end)."""
    return tuple(a - ndim for a in axes)


# --------------------------------------------------------------------------- domains
_C = COMPLEX
# small shapes, each norm, padding and trimming, odd and even lengths, negative axes (on JAX each
# new shape is a compilation: few cases)
_DOMAIN_1D = [Case(_C[5]), Case(_C[4], n=6, norm="ortho"), Case(_C[2, 3, 4], n=3, axis=-2, norm="forward")]
_DOMAIN_ND = [
    Case(_C[2, 4]),
    Case(_C[2, 3, 4], s=(3, 3), axes=(0, -1), norm="ortho"),
    Case(_C[2, 4], s=(1, 5), axes=(1, 0), norm="forward"),
]
_DOMAIN_R1D = [Case(REAL[5]), Case(REAL[4], n=6, norm="ortho"), Case(REAL[2, 3, 4], n=3, axis=-2, norm="forward")]
# half spectra: even and odd output lengths, padded (n//2+1 > M) and trimmed (n//2+1 < M)
_DOMAIN_H1D = [Case(_C[4]), Case(_C[2, 4], n=4, axis=-2, norm="ortho"), Case(_C[2, 3, 4], n=3, norm="forward")]
_DOMAIN_RND = [
    Case(REAL[2, 4]),
    Case(REAL[2, 3, 4], s=(3, 5), axes=(0, -1), norm="ortho"),
    Case(REAL[2, 4], s=(3, 2), axes=(1, 0), norm="forward"),
]
_DOMAIN_HND = [
    Case(_C[2, 4]),
    Case(_C[2, 3, 4], s=(3, 5), axes=(0, -1), norm="ortho"),
    Case(_C[2, 4], s=(3, 3), axes=(1, 0), norm="forward"),
]


# --------------------------------------------------------------------------- fft, ifft
# (the rules read the input's shape: saves="inputs"; every rule takes leading batch axes)
_fft = defop("fft.fft", chapter="fft", domain=_DOMAIN_1D, saves="inputs", batched=True)
_ifft = defop("fft.ifft", chapter="fft", domain=_DOMAIN_1D, saves="inputs", batched=True)


@_fft.gradient
def _fft_grad(xp, op, grad):
    """y = c F P x (P pads or trims to n): dx = P^T c F^H grad = ifft with the opposite norm,
    trimmed or padded back to the input's size."""
    a = op.attrs
    shape = op.inputs[0].shape
    ax = a["axis"] - len(shape)
    return _resize(xp, xp.fft.ifft(grad, axis=ax, norm=_SWAP[a["norm"]]), ax, shape[ax])


@_ifft.gradient
def _ifft_grad(xp, op, grad):
    """The adjoint of ifft: fft with the opposite norm, back to the input's size."""
    a = op.attrs
    shape = op.inputs[0].shape
    ax = a["axis"] - len(shape)
    return _resize(xp, xp.fft.fft(grad, axis=ax, norm=_SWAP[a["norm"]]), ax, shape[ax])


def _one_d(opdef, name, kind, x, n, axis, norm, half_in=False):
    x = _tensor(name, x, kind)
    axis = _axis(name, axis, x.ndim)
    if n is None:
        m = x.shape[axis]
        n = 2 * (m - 1) if half_in else m
        if n < 1:
            raise ValueError(f"fft.{name}: axis {axis} of size {m} gives an empty transform; pass n= explicitly")
    n = _size(name, n)
    return apply1(opdef, x, {"n": n, "axis": axis, "norm": _norm(name, norm)})


@public(_fft)
def fft(x, /, *, n=None, axis=-1, norm="backward"):
    """One-dimensional discrete Fourier transform of complex ``x`` along ``axis`` (padded or
    trimmed to ``n``)."""
    return _one_d(_fft, "fft", "c", x, n, axis, norm)


@public(_ifft)
def ifft(x, /, *, n=None, axis=-1, norm="backward"):
    """One-dimensional inverse discrete Fourier transform of complex ``x`` along ``axis``."""
    return _one_d(_ifft, "ifft", "c", x, n, axis, norm)


# --------------------------------------------------------------------------- fftn, ifftn
_fftn = defop("fft.fftn", chapter="fft", domain=_DOMAIN_ND, saves="inputs", batched=True)
_ifftn = defop("fft.ifftn", chapter="fft", domain=_DOMAIN_ND, saves="inputs", batched=True)


@_fftn.gradient
def _fftn_grad(xp, op, grad):
    """The adjoint of fftn: ifftn with the opposite norm, back to the input's sizes."""
    a = op.attrs
    shape = op.inputs[0].shape
    axes = _neg(a["axes"], len(shape))
    g = xp.fft.ifftn(grad, s=a["s"], axes=axes, norm=_SWAP[a["norm"]])
    return _resize_all(xp, g, axes, [shape[i] for i in axes])


@_ifftn.gradient
def _ifftn_grad(xp, op, grad):
    """The adjoint of ifftn: fftn with the opposite norm, back to the input's sizes."""
    a = op.attrs
    shape = op.inputs[0].shape
    axes = _neg(a["axes"], len(shape))
    g = xp.fft.fftn(grad, s=a["s"], axes=axes, norm=_SWAP[a["norm"]])
    return _resize_all(xp, g, axes, [shape[i] for i in axes])


def _n_d(opdef, name, kind, x, s, axes, norm, half_in=False):
    x = _tensor(name, x, kind)
    norm = _norm(name, norm)
    s, axes = _axes(name, x, s, axes, half=half_in)
    if not axes:
        if half_in or kind == "f":
            raise ValueError(f"fft.{name} needs at least one axis to transform")
        return x  # nothing to transform
    return apply1(opdef, x, {"s": s, "axes": axes, "norm": norm})


@public(_fftn)
def fftn(x, /, *, s=None, axes=None, norm="backward"):
    """n-dimensional discrete Fourier transform of complex ``x`` over ``axes`` (all by default),
    each padded or trimmed to its size in ``s``."""
    return _n_d(_fftn, "fftn", "c", x, s, axes, norm)


@public(_ifftn)
def ifftn(x, /, *, s=None, axes=None, norm="backward"):
    """n-dimensional inverse discrete Fourier transform of complex ``x`` over ``axes``."""
    return _n_d(_ifftn, "ifftn", "c", x, s, axes, norm)


# --------------------------------------------------------------------------- rfft, irfft
_rfft = defop("fft.rfft", chapter="fft", domain=_DOMAIN_R1D, saves="inputs", batched=True)
_irfft = defop(
    "fft.irfft",
    chapter="fft",
    domain=_DOMAIN_H1D,
    saves="inputs",
    batched=True,
    convention="the imaginary parts of the DC bin and, for even n, the Nyquist bin do not "
    "change the output: their gradient is 0",
)


def _rfft_adjoint(xp, grad, axis, n, norm, size):
    """The adjoint of ``rfft(., n, axis, norm)`` (``axis`` negative) on a signal of ``size``: irfft
    of the gradient with the doubled bins halved, opposite norm."""
    g = grad * _bin_weights(xp, grad, axis, n, 0.5)
    return _resize(xp, xp.fft.irfft(g, n=n, axis=axis, norm=_SWAP[norm]), axis, size)


def _irfft_adjoint(xp, grad, axis, n, norm, size):
    """The adjoint of ``irfft(., n, axis, norm)`` (``axis`` negative) on a half spectrum of
    ``size``: rfft of the gradient with the doubled bins doubled, opposite norm."""
    g = xp.fft.rfft(grad, n=n, axis=axis, norm=_SWAP[norm])
    return _resize(xp, g * _bin_weights(xp, g, axis, n, 2.0), axis, size)


def _one_d_adjoint(adjoint, xp, op, grad, norm):
    """``adjoint`` of the 1-D transform recorded in ``op`` (its norm given), on ``grad``."""
    a = op.attrs
    shape = op.inputs[0].shape
    ax = a["axis"] - len(shape)
    return adjoint(xp, grad, ax, a["n"], norm, shape[ax])


@_rfft.gradient
def _rfft_grad(xp, op, grad):
    """y = bins 0..n//2 of c F P x, x real: dx = Re(P^T c F^H E grad) = irfft of grad with the
    bins that irfft counts twice halved, opposite norm, back to the input's size."""
    return _one_d_adjoint(_rfft_adjoint, xp, op, grad, op.attrs["norm"])


@_irfft.gradient
def _irfft_grad(xp, op, grad):
    """y = c Re(F^H H P x) (H: the hermitian extension): dx = rfft(grad) with the bins that H
    duplicates doubled, opposite norm, back to the input's size."""
    return _one_d_adjoint(_irfft_adjoint, xp, op, grad, op.attrs["norm"])


@public(_rfft)
def rfft(x, /, *, n=None, axis=-1, norm="backward"):
    """One-dimensional discrete Fourier transform of real ``x``: the ``n//2 + 1`` non-negative
    frequency bins."""
    return _one_d(_rfft, "rfft", "f", x, n, axis, norm)


@public(_irfft)
def irfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The inverse of ``rfft``: a real signal of length ``n`` (``2 * (M - 1)`` by default) from
    the half spectrum ``x``."""
    return _one_d(_irfft, "irfft", "c", x, n, axis, norm, half_in=True)


# --------------------------------------------------------------------------- rfftn, irfftn
_rfftn = defop("fft.rfftn", chapter="fft", domain=_DOMAIN_RND, saves="inputs", batched=True)
_irfftn = defop(
    "fft.irfftn",
    chapter="fft",
    domain=_DOMAIN_HND,
    saves="inputs",
    batched=True,
    convention="the imaginary parts that the hermitian extension drops (DC and, for even "
    "sizes, Nyquist along the last axis) get a gradient of 0",
)


@_rfftn.gradient
def _rfftn_grad(xp, op, grad):
    """rfftn = fft over the other axes after rfft over the last: dx = irfftn of grad with the
    doubled bins of the last axis halved, opposite norm, back to the input's sizes."""
    a = op.attrs
    s = a["s"]
    shape = op.inputs[0].shape
    axes = _neg(a["axes"], len(shape))
    g = grad * _bin_weights(xp, grad, axes[-1], s[-1], 0.5)
    g = xp.fft.irfftn(g, s=s, axes=axes, norm=_SWAP[a["norm"]])
    return _resize_all(xp, g, axes, [shape[i] for i in axes])


@_irfftn.gradient
def _irfftn_grad(xp, op, grad):
    """dx = rfftn(grad) with the doubled bins of the last axis doubled, opposite norm, back to the
    input's sizes."""
    a = op.attrs
    s = a["s"]
    shape = op.inputs[0].shape
    axes = _neg(a["axes"], len(shape))
    g = xp.fft.rfftn(grad, s=s, axes=axes, norm=_SWAP[a["norm"]])
    g = g * _bin_weights(xp, g, axes[-1], s[-1], 2.0)
    return _resize_all(xp, g, axes, [shape[i] for i in axes])


@public(_rfftn)
def rfftn(x, /, *, s=None, axes=None, norm="backward"):
    """n-dimensional discrete Fourier transform of real ``x``; the last axis of ``axes`` keeps its
    ``s[-1]//2 + 1`` non-negative frequency bins."""
    return _n_d(_rfftn, "rfftn", "f", x, s, axes, norm)


@public(_irfftn)
def irfftn(x, /, *, s=None, axes=None, norm="backward"):
    """The inverse of ``rfftn``: a real signal of sizes ``s`` (the last ``2 * (M - 1)`` by default)."""
    return _n_d(_irfftn, "irfftn", "c", x, s, axes, norm, half_in=True)


# --------------------------------------------------------------------------- hfft, ihfft
_hfft = defop(
    "fft.hfft",
    chapter="fft",
    domain=_DOMAIN_H1D,
    saves="inputs",
    batched=True,
    convention="as irfft: the imaginary parts of DC and (even n) Nyquist get a gradient of 0",
)
_ihfft = defop("fft.ihfft", chapter="fft", domain=_DOMAIN_R1D, saves="inputs", batched=True)


@_hfft.gradient
def _hfft_grad(xp, op, grad):
    """hfft(x, norm) = irfft(conj(x), opposite norm): dx = conj of irfft's adjoint."""
    return conj_(xp, _one_d_adjoint(_irfft_adjoint, xp, op, grad, _SWAP[op.attrs["norm"]]))


@_ihfft.gradient
def _ihfft_grad(xp, op, grad):
    """ihfft(x, norm) = conj(rfft(x, opposite norm)): dx = rfft's adjoint of conj(grad)."""
    return _one_d_adjoint(_rfft_adjoint, xp, op, conj_(xp, grad), _SWAP[op.attrs["norm"]])


@public(_hfft)
def hfft(x, /, *, n=None, axis=-1, norm="backward"):
    """Discrete Fourier transform of a signal with hermitian symmetry, given by its first half
    ``x``: a real output of length ``n`` (``2 * (M - 1)`` by default)."""
    return _one_d(_hfft, "hfft", "c", x, n, axis, norm, half_in=True)


@public(_ihfft)
def ihfft(x, /, *, n=None, axis=-1, norm="backward"):
    """Inverse of ``hfft``: the ``n//2 + 1`` first bins of the inverse transform of real ``x``."""
    return _one_d(_ihfft, "ihfft", "f", x, n, axis, norm)


# --------------------------------------------------------------------------- fftfreq, rfftfreq
def _freq(fname, n, d, dtype, device):
    n = _size(fname, n)
    if isinstance(d, Tensor):
        d = float(d)
    if dtype is not None and not _dt.as_dtype(dtype).is_floating:
        raise TypeError(f"fft.{fname}: dtype must be a real floating-point dtype, not {dtype}")
    b, dev = _backend_and_device(device)
    v = getattr(b.xp.fft, fname)(n, d=d, dtype=_native_dtype(b, dtype), device=dev)
    return wrap(v if v.__class__ is b.array_type else b.fix_output(v), b)


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of a transform of length ``n`` with sample spacing ``d``:
    ``[0, 1, ..., -1] / (d * n)`` (``gt.config.floatx()`` unless ``dtype`` says otherwise; the active backend)."""
    return _freq("fftfreq", n, d, dtype, device)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The non-negative sample frequencies of ``rfft``: ``[0, 1, ..., n//2] / (d * n)``."""
    return _freq("rfftfreq", n, d, dtype, device)


# --------------------------------------------------------------------------- fftshift, ifftshift
_SHIFT_DOMAIN = [Case(REAL[2, 3, 4], axes=(0, -1)), Case(_C[5])]
# (the rules read only the axes: saves nothing; the axes count from the front, so no batch axes)
_fftshift = defop("fft.fftshift", chapter="fft", domain=_SHIFT_DOMAIN, saves=())
_ifftshift = defop("fft.ifftshift", chapter="fft", domain=_SHIFT_DOMAIN, saves=())
_fftshift.gradient(lambda xp, op, grad: xp.fft.ifftshift(grad, axes=op.attrs["axes"]))
_ifftshift.gradient(lambda xp, op, grad: xp.fft.fftshift(grad, axes=op.attrs["axes"]))


def _shift(opdef, name, x, axes, sign):
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (_axis(name, axes, x.ndim),)
    else:
        axes = tuple(_axis(name, a, x.ndim) for a in axes)
    if not axes:
        return x
    if not x.dtype.differentiable:
        # the standard asks for floating input (array_api_strict insists); a shift is a roll
        return roll(x, tuple(sign * (x.shape[a] // 2) for a in axes), axis=axes)
    return apply1(opdef, x, {"axes": axes})


@public(_fftshift)
def fftshift(x, /, *, axes=None):
    """Shift the zero-frequency bin to the centre along ``axes`` (all by default)."""
    return _shift(_fftshift, "fftshift", x, axes, 1)


@public(_ifftshift)
def ifftshift(x, /, *, axes=None):
    """The inverse of ``fftshift`` (they differ by one sample on odd lengths)."""
    return _shift(_ifftshift, "ifftshift", x, axes, -1)


# how these ops batch under gt.vmap (gradtape/backends/batching.py, docs/vmap.md)
batch_as("axis_or_loop", _fft, _ifft, _rfft, _irfft, _hfft, _ihfft)
_along_axes = axis_kind(attr="axes")


def _n_d_batching(bk, impl, args, attrs):
    """``gt.vmap``'s rule for the n-dimensional transforms: ``axes=None`` is the example's last
    ``len(s)`` axes (all of them without ``s``), then the axes shifted past the batch axis."""
    if attrs.get("axes") is None:
        n = args[0].ndim
        s = attrs.get("s")
        attrs = {**attrs, "axes": tuple(range(n - (n if s is None else len(s)), n))}
    return _along_axes(bk, impl, args, attrs)


batch_as(_n_d_batching, _fftn, _ifftn, _rfftn, _irfftn)
batch_as(axis_kind(attr="axes"), _fftshift, _ifftshift)
