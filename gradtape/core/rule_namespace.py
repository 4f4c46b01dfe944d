"""The namespaces gradient rules run on.

A rule ``rule(xp, op, *grads)`` is written once against an Array API namespace ``xp``; the engine
passes one of two:

* :func:`native_namespace` (a first-order walk on real cotangents, nothing records): backend ``b``'s
  own functions on native arrays.  A name is looked up once, then cached on the object: a
  registered op declared ``xp_callable`` (its native forward takes the public function's arguments:
  every element-wise op, every op whose forward is a namespace function) resolves to that forward
  (with the adapter's fixes), anything else to the library's Array API namespace (``b.xp``).  So
  ``xp.xdivy``, ``xp.special.digamma`` and ``xp.linalg.solve`` mean the same in both namespaces.
* :func:`tensor_namespace`: gradtape itself, on Tensors (every call recorded by outer tapes: higher
  order), each name the public function of the op of that name, else gradtape's attribute.

This module knows the registry and nothing above it: gradtape's top-level package hands its
namespace in with :func:`set_tensor_module` once every chapter is loaded.
"""

from __future__ import annotations

from gradtape.core.registry import _OPS

__all__ = ["native_namespace", "tensor_namespace", "set_tensor_module", "SUBNAMESPACES"]

#: the extensions and gradtape's own sub-namespaces that rules may reach as ``xp.<name>.<fn>``
SUBNAMESPACES = frozenset({"linalg", "fft", "special", "nn", "math"})

_NATIVE = {}
_TENSOR = [None]
_TENSOR_MODULE = [None]


class NativeNamespace:
    """Backend ``b``'s functions on native arrays, as rules call them (see the module docstring)."""

    def __init__(self, backend, prefix=""):
        self._backend = backend
        self._prefix = prefix
        ns = backend.xp
        for part in prefix.split(".")[:-1]:
            ns = getattr(ns, part, None)
        self._xp = ns

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        full = self._prefix + name
        b = self._backend
        if not self._prefix and name in SUBNAMESPACES:
            value = NativeNamespace(b, name + ".")
        else:
            op = _OPS.get(full)
            if op is not None and op.xp_callable:
                value = op.impls.get(b) or op.resolve(b)
            else:
                value = getattr(self._xp, name, None) if self._xp is not None else None
                if value is None:
                    raise AttributeError(
                        f"gradient rules on backend {b.name!r}: the native namespace has no {full!r} "
                        "(a rule may call the Array API, and registered ops declared xp_callable)"
                    )
        setattr(self, name, value)
        return value

    def __repr__(self):
        return f"<native namespace {self._prefix or ''}of backend {self._backend.name!r}>"


class TensorNamespace:
    """gradtape's public functions on Tensors, as rules call them."""

    def __init__(self, module, prefix=""):
        self._module = module
        self._prefix = prefix

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        full = self._prefix + name
        if not self._prefix and name in SUBNAMESPACES:
            value = TensorNamespace(getattr(self._module, name, None), name + ".")
        else:
            op = _OPS.get(full)
            value = op.public if op is not None and op.public is not None else None
            if value is None:
                value = getattr(self._module, name, None) if self._module is not None else None
            if value is None:
                raise AttributeError(f"gradient rules: gradtape's namespace has no {full!r}")
        setattr(self, name, value)
        return value

    def __repr__(self):
        return f"<gradtape namespace {self._prefix or ''}on Tensors>"


def native_namespace(b):
    """The namespace of native functions of backend ``b`` (cached)."""
    ns = _NATIVE.get(b)
    if ns is None:
        ns = _NATIVE[b] = NativeNamespace(b)
    return ns


def tensor_namespace():
    """gradtape's namespace on Tensors (set by the package once its chapters are loaded)."""
    ns = _TENSOR[0]
    if ns is None:
        raise RuntimeError("gradtape's namespace is not set up yet (import gradtape first)")
    return ns


def set_tensor_module(module):
    """Called once by ``gradtape/__init__.py``: the module whose public functions rules use on
    Tensors."""
    _TENSOR_MODULE[0] = module
    _TENSOR[0] = TensorNamespace(module)
