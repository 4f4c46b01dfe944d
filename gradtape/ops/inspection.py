"""Inspection (Array API standard, chapter "Inspection"): ``__array_namespace_info__``.

The info object answers for gradtape's *current* backend (``gt.set_backend`` / ``gt.use_backend``),
asked at each call: devices are gradtape's backend-neutral device names (``"cpu"``, ``"cuda:0"``,
``"gpu:0"``: what ``Tensor.device`` returns and every ``device=`` accepts), dtypes are gradtape's
dtype objects, and the defaults are gradtape's, the same on every backend (float32, complex64,
int64; indices int64; float64 and complex128 under ``gt.config.set_floatx("float64")``).  ``devices()``
is a tuple (2025.12) that also concatenates with a list, as the list it was before 2025.12 did
(SciPy 1.17 writes ``devices() + [None]``).  Boolean indexing and data-dependent shapes (``nonzero``, ``unique_*``) work
on every backend, JAX included, since gradtape runs eagerly.
"""

from __future__ import annotations

from gradtape.core import config as _config
from gradtape.core import dtypes as _dt

__all__ = ["__array_namespace_info__"]


class Devices(tuple):
    """The devices, a tuple (2025.12), which a list also joins (``devices() + [None]``,
    ``[None] + devices()``: a list, as the list ``devices()`` returned before 2025.12 would give)."""

    __slots__ = ()

    def __add__(self, other):
        if isinstance(other, list):
            return list(self) + other
        return tuple.__add__(self, other)

    def __radd__(self, other):
        if isinstance(other, list):
            return other + list(self)
        if isinstance(other, tuple):
            return other + tuple(self)
        return NotImplemented


def _backend():
    return _config.get_backend()


def _native_info(b):
    f = getattr(b.xp, "__array_namespace_info__", None)
    try:
        return f() if f is not None else None
    except Exception:  # a namespace whose info cannot be built: answer from gradtape alone
        return None


def _check_device(b, device):
    """The native device for ``device`` on backend ``b`` (a ValueError naming the devices if unknown)."""
    if device is None:
        return None
    try:
        return b.parse_device(device)
    except (ValueError, TypeError) as e:
        raise ValueError(f"backend {b.name!r} has no device {device!r}; its devices are {b.devices()} ({e})") from None


class Info:
    """The standard's inspection namespace for gradtape (``gt.__array_namespace_info__()``)."""

    __slots__ = ()

    def __repr__(self):
        return f"<gradtape array namespace info: backend {_backend().name!r}>"

    def capabilities(self):
        """Boolean indexing and data-dependent shapes: yes; the most dimensions the backend's arrays
        may have (None: no limit known)."""
        b = _backend()
        info = _native_info(b)
        max_dims = None
        if info is not None:
            try:
                max_dims = info.capabilities().get("max dimensions")
            except Exception:
                max_dims = None
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": max_dims}

    def default_device(self):
        """The device new tensors go to on the current backend (a backend-neutral name)."""
        b = _backend()
        return b.device_str(b.device)

    def devices(self):
        """The devices of the current backend (backend-neutral names, usable as ``device=``), as a
        tuple (2025.12; a list before) that a list also joins (:class:`Devices`)."""
        return Devices(_backend().devices())

    def default_dtypes(self, *, device=None):
        """gradtape's default dtypes (the same on every backend and device): the floating ones follow
        ``gt.config.floatx()``."""
        _check_device(_backend(), device)
        return {
            "real floating": _dt.floatx(),
            "complex floating": _dt.default_complex(),
            "integral": _dt.int64,
            "indexing": _dt.int64,
        }

    def dtypes(self, *, device=None, kind=None):
        """The dtypes the current backend supports (on ``device``), by canonical name; ``kind``
        filters as ``gt.isdtype`` does (a kind name or a tuple of them)."""
        b = _backend()
        native_device = _check_device(b, device)
        b.xp  # noqa: B018 - load the library, filling the dtype map
        supported = [d for d in _dt.ALL_DTYPES if d in b._to_native]
        info = _native_info(b)
        if info is not None:
            try:
                names = set(info.dtypes(device=native_device))
            except Exception:
                try:
                    names = set(info.dtypes())
                except Exception:
                    names = None
            if names is not None:
                supported = [d for d in supported if d.name in names]
        if kind is not None:
            if isinstance(kind, list):
                kind = tuple(kind)
            if not isinstance(kind, (str, tuple)):
                raise TypeError(f"dtypes: kind must be a kind name or a tuple of them, not {kind!r}")
            supported = [d for d in supported if _dt.isdtype(d, kind)]
        return {d.name: d for d in supported}


_INFO = Info()


def __array_namespace_info__():
    """The standard's inspection utilities (``capabilities``, ``default_device``,
    ``default_dtypes``, ``devices``, ``dtypes``), answering for gradtape's current backend."""
    return _INFO
