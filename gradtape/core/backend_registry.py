"""Backend registry: built-in adapters, entry-point plugins, lazy imports.

Built-in adapters are named by module path and imported only when first asked for, so
``import gradtape`` with the NumPy backend never imports torch or jax.  Third-party packages add
backends through the entry-point group ``gradtape.backends`` (``name = "pkg.module:BackendClass"``).
"""

from __future__ import annotations

import importlib
import importlib.util
import threading

from gradtape.core.backend import Backend, DataDependentShapeError, is_gpu_device

__all__ = [
    "Backend",
    "DataDependentShapeError",
    "available_backends",
    "get",
    "is_gpu_device",
    "known_backends",
    "register",
    "unregister",
]

# name -> (module path, class name, the module that must be importable, the command that installs it: the
# README's; torch's plain CPU wheel, not ``gradtape[torch]``, which pulls CUDA packages onto a CPU machine)
_BUILTIN = {
    "numpy": ("gradtape.backends.numpy", "NumpyBackend", "numpy", "python3 -m pip install numpy"),
    "torch": ("gradtape.backends.torch", "TorchBackend", "torch", "python3 -m pip install torch==2.13.0"),
    "jax": ("gradtape.backends.jax", "JaxBackend", "jax", "python3 -m pip install jax"),
    "dask": ("gradtape.backends.dask", "DaskBackend", "dask", 'python3 -m pip install "dask[array]" distributed'),
    "cupy": ("gradtape.backends.cupy", "CupyBackend", "cupy", "python3 -m pip install cupy-cuda12x"),
    "array_api_strict": (
        "gradtape.backends.array_api_strict",
        "StrictBackend",
        "array_api_strict",
        "python3 -m pip install array-api-strict",
    ),
}
_ALIASES = {"np": "numpy", "pytorch": "torch", "strict": "array_api_strict", "array-api-strict": "array_api_strict"}

_instances: dict[str, Backend] = {}
_plugins: dict[str, object] | None = None
_lock = threading.Lock()


def register(name: str, backend) -> None:
    """Register a backend instance or class under ``name`` (what entry points do, by hand)."""
    if name in _BUILTIN or name in _ALIASES:
        raise ValueError(f"{name!r} is a built-in gradtape backend; register a plugin under another name")
    with _lock:
        _instances.pop(name, None)
        _plugin_table()[name] = backend


def unregister(name: str) -> None:
    """Forget a backend registered with :func:`register` (or by an entry point)."""
    if name in _BUILTIN:
        raise ValueError(f"{name!r} is a built-in gradtape backend and cannot be unregistered")
    with _lock:
        _instances.pop(name, None)
        _plugin_table().pop(name, None)


def _plugin_table():
    global _plugins
    if _plugins is None:
        table = {}
        try:
            from importlib.metadata import entry_points

            for ep in entry_points(group="gradtape.backends"):
                if ep.name not in _BUILTIN:
                    table[ep.name] = ep
        except Exception:  # broken metadata of another package must not break gradtape
            pass
        _plugins = table
    return _plugins


def _is_entry_point(obj) -> bool:
    return hasattr(obj, "load") and hasattr(obj, "value") and not isinstance(obj, (Backend, type))


def known_backends():
    """Every backend name gradtape knows of, installed or not."""
    return list(_BUILTIN) + [n for n in _plugin_table() if n not in _BUILTIN]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def available_backends():
    """Names of the backends whose library is importable in this environment (no import done)."""
    names = [n for n, spec in _BUILTIN.items() if _importable(spec[2])]
    for n, ep in _plugin_table().items():
        if n in _BUILTIN:
            continue
        if not _is_entry_point(ep):  # registered by hand: a class or an instance
            names.append(n)
            continue
        mod = getattr(ep, "module", None) or ep.value.split(":")[0]
        if _importable(mod.split(".")[0]):
            names.append(n)
    return names


def get(name) -> Backend:
    """The backend instance called ``name`` (imported on first use)."""
    if isinstance(name, Backend):
        if name._xp is None:
            name.xp  # noqa: B018 - an adapter instance made by hand: load its library now
        return name
    inst = _instances.get(name)
    if inst is not None:
        return inst
    if isinstance(name, str) and ":" in name:  # a spec such as "torch:cuda": the backend part
        return get(name.partition(":")[0])
    with _lock:
        key = _ALIASES.get(name, name)
        inst = _instances.get(key)
        if inst is None:
            inst = _create(key)
            _instances[key] = inst
        _instances[name] = inst
        return inst


def _create(name) -> Backend:
    if name in _BUILTIN:
        module, cls, lib, command = _BUILTIN[name]
        if not _importable(lib):
            raise ImportError(
                f"gradtape backend {name!r} needs the {lib!r} package, which is not installed here; "
                f"install it with `{command}`"
            )
        obj = getattr(importlib.import_module(module), cls)
    elif name in _plugin_table():
        obj = _plugin_table()[name]
        if _is_entry_point(obj):
            try:
                obj = obj.load()
            except ImportError as e:
                raise ImportError(
                    f"gradtape backend plugin {name!r} ({obj.value}) failed to import: {e}; "
                    "is the package that provides it installed completely?"
                ) from e
    else:
        raise ValueError(
            f"unknown gradtape backend {name!r}; known backends: {', '.join(known_backends())} "
            f"(installed here: {', '.join(available_backends())}). `gradtape backends` says how to install "
            "the built-in ones; a third-party backend registers itself in the entry-point group "
            "'gradtape.backends' when its package is installed."
        )
    inst = obj() if isinstance(obj, type) else obj
    if not isinstance(inst, Backend):
        raise TypeError(f"backend {name!r} must be a gradtape.backends.Backend, got {type(inst).__name__}")
    if not inst.name:
        inst.name = name
    inst.xp  # noqa: B018 - import the library now, so a broken install fails here, clearly
    return inst
