"""Which backend and device are active: process default, scoped overrides, GRADTAPE_BACKEND.

``set_backend`` changes the process-wide default; ``use_backend`` scopes a choice to the current
thread or asyncio task through a ``contextvars.ContextVar``, so two threads (or tasks) using two
backends at once never see each other's choice.  A new thread starts from the process default (Python
threads do not inherit the context); a new asyncio task starts from a copy of its creator's context.

``GRADTAPE_BACKEND`` (read once, on first use) names the process default: ``numpy``, ``torch``,
``torch:cuda``, ``torch:cuda:1``, ``jax``, ``jax:gpu``, ``array_api_strict``, or a plugin's name.
Nothing is imported until a backend is first asked for, so ``import gradtape`` with the NumPy backend
never imports torch or jax.
"""

from __future__ import annotations

import contextlib
import contextvars
import os

from gradtape.core import backend as _backend
from gradtape.core import backend_registry as _backends
from gradtape.core import domains as _domains
from gradtape.core import dtypes as _dt

__all__ = [
    "INSTALL_COMMANDS",
    "available_backends",
    "config",
    "get_backend",
    "install_command",
    "parse_spec",
    "set_backend",
    "use_backend",
    "active",
    "current",
]


def parse_spec(spec: str):
    """``"torch:cuda:1"`` -> ``("torch", "cuda:1")``; ``"numpy"`` -> ``("numpy", None)``."""
    name, _, device = spec.strip().partition(":")
    return name.strip(), (device.strip() or None)


class _Setting:
    __slots__ = ("backend", "device")

    def __init__(self, backend, device):
        self.backend, self.device = backend, device

    def __repr__(self):
        return f"<backend {self.backend.name!r} device {self.device!r}>"


_default: _Setting | None = None
_scoped: contextvars.ContextVar = contextvars.ContextVar("gradtape_backend", default=None)


def _make(name, device):
    if isinstance(name, str) and device is None and ":" in name:
        name, device = parse_spec(name)
    b = _backends.get(name)
    if device is None:
        dev = None
    elif isinstance(device, str):
        dev = b.parse_device(device)
    else:
        dev = b.parse_device(device)  # native device objects pass through (and are checked)
    return _Setting(b, dev)


#: the command that installs each built-in backend's library, as the README does it (torch: the
#: plain wheel, not ``gradtape[torch]``, whose resolution pulls CUDA packages onto a CPU machine)
INSTALL_COMMANDS = {
    "numpy": "python3 -m pip install numpy",
    "torch": "python3 -m pip install torch==2.13.0",
    "jax": "python3 -m pip install jax",
    "array_api_strict": "python3 -m pip install array-api-strict",
    "dask": 'python3 -m pip install "dask[array]" distributed',
    "cupy": "python3 -m pip install cupy-cuda12x",
}


def install_command(name):
    """The shell command that installs backend ``name``'s library (None for a plugin: its own
    package provides it)."""
    return INSTALL_COMMANDS.get(name)


def _env_error(spec, e, backend_found):
    """One line for a ``GRADTAPE_BACKEND`` that names no usable backend: the value, the backends
    there are, and what to set instead (the cause's own text is kept, flattened to one line)."""
    name, _ = parse_spec(spec)
    choices = ", ".join(available_backends()) or "none"
    cause = " ".join(str(e).split()).rstrip(".")
    if isinstance(e, ImportError):
        cmd = install_command(name)
        how = f"install it with `{cmd}`" if cmd else "install the package that provides it"
        if cmd and cmd in cause:  # (the cause already names the command: say it once)
            how = "install it as said"
        return ImportError(
            f"GRADTAPE_BACKEND={spec!r}: {cause}. To fix: {how}, or set GRADTAPE_BACKEND to an installed "
            f"backend ({choices}), or unset it for numpy"
        )
    if backend_found:  # the device part is wrong
        return ValueError(
            f"GRADTAPE_BACKEND={spec!r}: {cause}. To fix: set GRADTAPE_BACKEND={name} (its default device) "
            "or name one of the devices listed"
        )
    return ValueError(
        f"GRADTAPE_BACKEND={spec!r}: unknown gradtape backend {name!r}; known backends: "
        f"{', '.join(_backends.known_backends())} (installed here: {choices}). To fix: set GRADTAPE_BACKEND "
        "to an installed backend, optionally with a device (torch:cuda), or unset it for numpy"
    )


def _process_default() -> _Setting:
    global _default
    if _default is None:
        spec = os.environ.get("GRADTAPE_BACKEND", "").strip()
        if not spec:
            _default = _make("numpy", None)
            return _default
        name, device = parse_spec(spec)
        found = False
        try:
            _backends.get(name)
            found = True
            _default = _make(name, device)
        except (ValueError, ImportError) as e:
            # one line, at first use (not the registry's chained traceback); the next use raises again
            raise _env_error(spec, e, found) from None
        except RuntimeError as e:  # installed, but cannot run here (cupy without a usable GPU)
            choices = ", ".join(n for n in available_backends() if n != name) or "numpy"
            raise RuntimeError(
                f"GRADTAPE_BACKEND={spec!r}: {' '.join(str(e).split()).rstrip('.')}. To fix: set "
                f"GRADTAPE_BACKEND to a backend that can run here ({choices}), or unset it for numpy"
            ) from None
    return _default


def current() -> _Setting:
    s = _scoped.get()
    return s if s is not None else _process_default()


def get_backend():
    """The active :class:`~gradtape.backends.Backend` (``.name``, ``.xp``, ``.device``)."""
    s = _scoped.get()
    return (s if s is not None else _process_default()).backend


def default_device(backend):
    """The configured default device for ``backend`` in this context (a native device object): the
    scoped choice if it names this backend, else the process default's, else the library's own."""
    s = _scoped.get()
    if s is not None and s.backend is backend and s.device is not None:
        return s.device
    d = _default if _default is not None else _process_default()
    if d.backend is backend and d.device is not None:
        return d.device
    return backend.default_device()


_backend.CONFIGURED_DEVICE[0] = default_device  # Backend.device reads the configuration


def set_backend(name, device=None):
    """Set the process-wide default backend (``"numpy"``, ``"torch"``, ``"torch:cuda:1"``, ``"jax"``,
    a plugin's name, or a Backend object) and its default device; returns the Backend."""
    global _default
    _default = _make(name, device)
    return _default.backend


@contextlib.contextmanager
def use_backend(name, device=None):
    """Use a backend (and device) inside a ``with`` block, for this thread / async task only."""
    setting = _make(name, device)
    token = _scoped.set(setting)
    try:
        yield setting.backend
    finally:
        _scoped.reset(token)


class active:  # (lower case: used as a function, ``with active(b, device):``)
    """Make the adapter instance ``backend`` (used as it is: a ``gt.function`` trace's stand-in
    backend) the active one in this context, on ``device`` (native; None: its default).

    A class with ``__enter__`` / ``__exit__``, not a ``contextlib.contextmanager`` (whose generator
    costs several times as much per entry): the crossings between frameworks enter it per call."""

    __slots__ = ("backend", "setting", "token")

    def __init__(self, backend, device=None):
        self.backend = backend
        self.setting = _Setting(backend, device)
        self.token = None

    def __enter__(self):
        self.token = _scoped.set(self.setting)
        return self.backend

    def __exit__(self, *exc):
        _scoped.reset(self.token)
        return False


def available_backends():
    """Names of the backends importable in this environment (nothing is imported to find out)."""
    return _backends.available_backends()


_LEAK_MODES = ("warn", "raise")


class Config:
    """``gt.config``: process-wide settings.

    ``gradient_leak``: what converting a recorded tensor out of gradtape does (``np.asarray(t)``,
    ``float(t)``, ``t.numpy()``, ``t.tolist()``, ``t.__dlpack__()`` on a tensor that a recording tape
    connects to a watched source: the gradient through that value is lost).  ``"warn"`` (the default)
    warns :class:`gradtape.GradientLeakWarning` once per call site; ``"raise"`` raises
    :class:`gradtape.GradientLeakError`.  The environment variable ``GRADTAPE_GRADIENT_LEAK`` sets
    the default (read on first use).

    ``floatx()`` / ``set_floatx("float64")`` (Keras's names): the default floating dtype, float32
    (TensorFlow's) unless set; the environment variable ``GRADTAPE_FLOATX`` sets it (read on first use).
    """

    __slots__ = ("_gradient_leak", "_functions_eagerly")

    def __init__(self):
        self._gradient_leak = None
        self._functions_eagerly = False

    def floatx(self):
        """The default floating dtype's name, ``"float32"`` or ``"float64"`` (``keras.config.floatx``):
        what Python floats, float lists, creation functions, integer inputs of floating functions,
        random draws, initializers and new layers get when no dtype is given."""
        return _dt.floatx().name

    def set_floatx(self, value):
        """Set the default floating dtype process-wide (``keras.config.set_floatx``): ``"float32"``
        (the default, TensorFlow's) or ``"float64"`` (NumPy's, which SciPy and scikit-learn expect);
        complex defaults follow (complex64 / complex128).  Tensors made before keep their dtype."""
        _dt.set_floatx(value)

    def run_functions_eagerly(self, run_eagerly):
        """Run every ``gt.function`` as its plain Python function (no trace, no program), as
        ``tf.config.run_functions_eagerly``: for debugging a step with prints and a debugger."""
        self._functions_eagerly = bool(run_eagerly)

    def functions_run_eagerly(self):
        """Whether :meth:`run_functions_eagerly` is on (``tf.config.functions_run_eagerly``)."""
        return self._functions_eagerly

    @property
    def gradient_leak(self):
        mode = self._gradient_leak
        if mode is None:
            env = os.environ.get("GRADTAPE_GRADIENT_LEAK", "").strip().lower() or "warn"
            try:
                mode = self._gradient_leak = _leak_mode(env)
            except ValueError as e:
                raise ValueError(f"GRADTAPE_GRADIENT_LEAK={env!r}: {e}") from None
        return mode

    @gradient_leak.setter
    def gradient_leak(self, mode):
        self._gradient_leak = _leak_mode(mode)

    def __repr__(self):
        return (
            f"gt.config(gradient_leak={self.gradient_leak!r}, functions_run_eagerly={self._functions_eagerly!r}, "
            f"floatx={self.floatx()!r})"
        )


def _leak_mode(mode):
    m = str(mode).strip().lower() if isinstance(mode, str) else mode
    if m == "error":
        m = "raise"
    if m not in _LEAK_MODES:
        raise ValueError(f"gradient_leak must be one of {_LEAK_MODES} (or 'error'), got {mode!r}")
    return m


config = Config()


def _default_device_name():
    """The active backend's default device, by name (what a domain case's ``DEFAULT_DEVICE`` draws as)."""
    b = get_backend()
    return b.device_str(b.default_device())


_domains.DEFAULT_DEVICE_NAME[0] = _default_device_name
