"""The one interface every array library implements to run under gradtape.

An adapter subclasses :class:`Backend` and fills in what differs for its library: the namespace,
the dtype and device mappings, and the few functions the Array API standard lacks but gradient
rules need (a scatter-add for indexing gradients, ``erf``, a functional ``setitem``).  Everything
else (ops, rules, the tape) is backend-neutral and lives in the core.

Capability flags (``supports_vmap``, ``python_scalars``, ``supports_native_grad``) replace
``if backend == "torch"`` checks.

The contract, in short (``x`` is always a *native* array of the backend):

========================  ==========================================================================
``load()``                import the library, return its Array API namespace (called once, lazily)
``array_type``            the exact class of the library's arrays: outputs of any other class go
                          through ``fix_output`` (so keep it exact: that check is on the hot path)
``asarray(v, dtype, d)``  a native array from a Python scalar, nested list, NumPy or native array
                          (shared: an adapter fills in ``_new_array`` and, where it can do better,
                          ``_cast_and_move``)
``to_numpy(x)``           a NumPy array (host copy or view)
``from_dlpack(obj)``      a native array from any DLPack-capable array (zero-copy where possible)
``parse_device(s)``       native device for ``"cpu"``, ``"cuda:1"``, ``"gpu"``, ... (native objects pass)
``device_of(x)``          the native device of ``x``; ``device_str(d)`` its backend-neutral name
``to_device(x, d)``       ``x`` on device ``d`` (shared: an adapter fills in ``_move``)
``index_add(...)``        ``zeros(shape)`` with values added at ``key``, repeated indices accumulating
``setitem(x, k, v)``      a *new* array equal to ``x`` with ``x[k] = v`` (``x`` is never mutated)
``erf(x)``                the error function (not in the standard)
``vmap(f, ...)``          the library's vectorising map, where ``supports_vmap``
``random_from_numpy``     host NumPy random numbers moved onto the backend (one seed, same numbers)
``native_grad(f, *xs)``   gradients of ``sum(f(*xs))`` by the library's own autodiff, where it has one
========================  ==========================================================================
"""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import numpy as np

from gradtape.core import dtypes as _dt

__all__ = ["Backend", "DataDependentShapeError", "bind_forward", "is_gpu_device", "DLPACK_ERRORS"]


class DataDependentShapeError(NotImplementedError):
    """An op whose result's shape depends on the data, which a lazy backend cannot size before it
    computes (dask: a boolean mask from a lazy value, ``repeat`` by an array of counts).  The message
    names the op, the backend's limitation and what to do instead."""


#: the dtype a Python scalar gets when no dtype is asked for (TensorFlow's, the same on every backend;
#: ``float`` and ``complex`` follow ``gt.config.floatx()``, which ``_dt.as_dtype`` reads)
_PY_DEFAULT = {bool: _dt.bool, int: _dt.int64, float: float, complex: complex}
#: what a failed DLPack import raises, depending on the library (then :meth:`Backend.from_dlpack` copies)
DLPACK_ERRORS = (TypeError, ValueError, RuntimeError, BufferError, AttributeError)


def bind_forward(fwd, backend, takes):
    """``fwd``, an op's callable forward, as a function of the native arrays of ``backend``, given what
    its first argument is as the op declares (``OpDef.forward_takes``): the namespace (``"xp"``), the
    Backend (``"backend"``), or nothing (``"arrays"``: called as it is)."""
    if takes == "xp":
        return functools.partial(fwd, backend.xp)
    if takes == "backend":
        return functools.partial(fwd, backend)
    return fwd


def is_gpu_device(name: str) -> bool:
    """Whether a backend-neutral device name (``"cuda:0"``, ``"gpu:1"``) names an accelerator."""
    return str(name).split(":")[0].lower() in ("cuda", "gpu", "rocm", "tpu", "mps")


#: ``f(backend)``: the default device the configuration (``gradtape.core.config``, which sits on top of
#: the adapters and sets this when it loads) names for ``backend``; None: the library's own
CONFIGURED_DEVICE: list = [None]


class Backend:
    """Base class of backend adapters.  One instance per library (a singleton)."""

    #: registry name, e.g. ``"numpy"``
    name: str = ""
    #: pip command that installs the library, for error messages
    install_hint: str = ""
    #: the concrete native array type (outputs of other types go through :meth:`fix_output`)
    array_type: type = object
    #: binary ops may receive Python scalars and keep the array's dtype (NEP 50 / weak types)
    python_scalars: bool = True
    #: the library has a ``vmap`` that gradtape can use for jacobians
    supports_vmap: bool = False
    #: the library has its own autodiff, reachable through :meth:`native_grad` (for cross-checks)
    supports_native_grad: bool = False
    #: the library's floating functions (``sin``, ``divide``...) compute bool and integer inputs in
    #: float32 or refuse them, as gradtape's rule wants: the dispatcher need not check the dtype
    floating_ints_to_float32: bool = False
    #: ops build a graph that runs when asked (dask): nothing is computed until :meth:`compute`
    lazy: bool = False
    #: arrays are split in chunks the user chooses (``gt.asarray(x, chunks=...)``)
    chunked: bool = False
    #: NumPy arrays and lists in an indexing key stay on the host (a lazy backend: their values, which
    #: are known, size the result; a native array's would be known only when computed)
    host_index_arrays: bool = False
    #: arrays carry a layout beyond shape and dtype (dask's chunks, a JAX sharding) that a source's
    #: gradient must have too: the tape calls :meth:`match_layout` on each gradient it returns
    lays_out: bool = False
    #: the native arrays are stand-ins of a recording context (``gt.function``'s ``TracingBackend``):
    #: their values are not known, only their shapes and dtypes, and cannot be read into Python
    stand_ins: bool = False
    #: when ``gt.function`` compiles its programs with :meth:`compile_program`: "default" (unless
    #: ``jit_compile=False``), "opt-in" (only with ``jit_compile=True``), None (never: replayed)
    compiles: str | None = None
    #: op name -> native callable that replaces the op's forward on this backend (checked first by
    #: :meth:`op_impl`; it is called as the op's forward would be, without the ``xp`` argument)
    overrides: ClassVar[dict] = {}

    def __init__(self):
        self._xp = None
        self._to_native = {}
        self._from_native = {}

    # ------------------------------------------------------------------ ops
    def op_impl(self, opdef):
        """The native callable of op ``opdef`` on this backend, called with the op's native arrays and
        attributes: this adapter's override, the namespace function ``forward`` names (``"sin"``,
        ``"fft.rfft"``), or ``forward`` bound to this backend (:func:`bind_forward`).  The one entry
        point from an op to a library: ``OpDef.resolve`` caches what it returns, and a backend that
        records its calls (``gt.function``'s) returns the real adapter's, wrapped."""
        impl = self.overrides.get(opdef.name)
        if impl is not None:
            return impl
        fwd = opdef.forward
        if opdef.forward_takes != "name":
            return bind_forward(fwd, self, opdef.forward_takes)
        impl = self.xp
        for part in fwd.split("."):
            impl = getattr(impl, part, None)
        if impl is None:
            raise NotImplementedError(
                f"op {opdef.name!r} is not available on backend {self.name!r}: its namespace has no {fwd!r}"
            )
        return impl

    def capture(self, other, x):
        """``x``, a native array of backend ``other``, as a native array of this backend where this
        backend takes it in (a stand-in backend makes a value computed outside its recording context a
        constant of it); None where it does not (the default: tensors of two backends do not mix)."""
        return None

    def capture_tensor(self, t):
        """``t``, a Tensor of another backend, taken in as a Tensor of this backend *with the step that
        takes it in recorded* (a batching backend: a gradient through it reaches ``t``); None where this
        backend has no such step (the default: :meth:`capture` is asked next)."""
        return None

    def restore_input(self, x, value, dtype) -> bool:
        """Make ``x`` hold ``value`` (a NumPy array of its shape; gradtape dtype ``dtype``) where ``x``
        is a stand-in for an input of a program being recorded (a Variable created while recording,
        then restored from a checkpoint: an input with that value, not an assignment the program would
        repeat on every call); False where it is not (the default: the caller assigns)."""
        return False

    # ------------------------------------------------------------------ namespace and dtypes
    def load(self):
        """Import the library and return its Array API namespace.  Called once, lazily."""
        raise NotImplementedError

    @property
    def xp(self):
        """The library's Array API namespace (imported on first use)."""
        if self._xp is None:
            xp = self.load()
            for d in _dt.ALL_DTYPES:
                nd = getattr(xp, d.name, None)
                if nd is not None:
                    self._to_native[d] = nd
                    self._from_native[nd] = d
            self._xp = xp
            self._extra_dtype_aliases()
        return self._xp

    def _extra_dtype_aliases(self):
        """Hook: register further native dtype objects that map to gradtape dtypes."""

    def dtype_to_native(self, dtype):
        if self._xp is None:
            self.xp  # noqa: B018 - load
        try:
            return self._to_native[_dt.as_dtype(dtype)]
        except KeyError:
            raise TypeError(f"backend {self.name!r} has no dtype {dtype}") from None

    def dtype_from_native(self, native_dtype):
        try:
            return self._from_native[native_dtype]
        except KeyError:
            d = _dt.as_dtype(native_dtype)
            self._from_native[native_dtype] = d
            return d

    def dtype_of(self, x):
        """gradtape dtype of a native array (one dict lookup: it is on the hot path)."""
        try:
            return self._from_native[x.dtype]
        except KeyError:
            return self.dtype_from_native(x.dtype)

    # ------------------------------------------------------------------ devices
    @property
    def device(self):
        """The default device of this backend in the current configuration (native object)."""
        configured = CONFIGURED_DEVICE[0]
        return self.default_device() if configured is None else configured(self)

    def default_device(self):
        """The device used when neither the configuration nor the call names one."""
        return "cpu"

    def device_beside(self, x):
        """The native device for a value converted to meet the native array ``x`` (a Python scalar
        or NumPy operand of an op on ``x``): ``x``'s device; None where ``x`` itself was never placed
        (:meth:`unplaced_device`), so that the value follows ``x`` rather than pinning it."""
        return self.device_of(x)

    def unplaced_device(self):
        """The native device given to a new array that no call placed (no ``device=``): the configured
        :attr:`device`; None where the library leaves such arrays free to follow the arrays they meet
        (JAX's uncommitted arrays)."""
        return self.device

    def parse_device(self, device):
        """A native device object for a backend-neutral string (``"cpu"``, ``"cuda:1"``, ``"gpu"``).
        This default is a CPU-only library's: ``"cpu"`` (any case, or ``"cpu:0"``) and nothing else."""
        if device is None or device == "cpu":
            return "cpu"
        if isinstance(device, str) and device.strip().lower() in ("cpu", "cpu:0"):
            return "cpu"
        raise ValueError(
            f"backend {self.name!r} has no device {device!r}; it runs on 'cpu' only "
            "(use the torch or jax backend for GPUs)"
        )

    def device_of(self, x):
        """The native device of a native array."""
        return "cpu"

    def device_str(self, device) -> str:
        """Backend-neutral name of a native device (``"cpu"``, ``"cuda:0"``)."""
        return str(device)

    def devices(self):
        """Backend-neutral names of the devices this library can use here."""
        return ["cpu"]

    def weights_device(self, device):
        """Where a layer creates its weights beside an input on native ``device``: that device (an
        adapter whose devices may be layouts over several devices returns those devices, replicated)."""
        return device

    def has_gpu(self) -> bool:
        """Whether an accelerator (CUDA/ROCm GPU, TPU, MPS) is usable by this library here."""
        return any(is_gpu_device(d) for d in self.devices())

    def to_device(self, x, device):
        """``x`` on ``device``, a native device or a backend-neutral name (parsed here)."""
        if isinstance(device, str):
            device = self.parse_device(device)
        return self._move(x, device)

    def _move(self, x, device):
        """Hook of :meth:`to_device`: ``x`` on the native ``device``.  This default is a CPU-only
        library's: ``x`` itself on the CPU, an error elsewhere (as ``array_api_compat.to_device``)."""
        if device != "cpu":
            self.parse_device(device)  # raises: not a device of this library
        return x

    # ------------------------------------------------------------------ conversion
    def is_native(self, obj) -> bool:
        return isinstance(obj, self.array_type)

    def asarray(self, value, dtype=None, device=None):
        """A native array from a Python scalar, nested list, NumPy array or native array.  A native
        array is cast and moved only where it differs (else it is returned as is); a Python scalar
        without ``dtype`` gets TensorFlow's dtype (float32, int64, complex64, bool; float64 and complex128
        under ``gt.config.set_floatx("float64")``) on every backend;
        a NumPy scalar becomes a 0-d NumPy array; what is made goes to ``device``, else to the
        configured default device."""
        nd = None if dtype is None else self.dtype_to_native(dtype)
        if isinstance(device, str):
            device = self.parse_device(device)
        if self.is_native(value):
            return self._cast_and_move(value, nd, device)
        if isinstance(value, np.generic):
            value = np.asarray(value)
        elif nd is None and type(value) in _PY_DEFAULT:
            nd = self.dtype_to_native(_dt.as_dtype(_PY_DEFAULT[type(value)]))
        return self._new_array(value, nd, self.unplaced_device() if device is None else device)

    def _cast_and_move(self, x, native_dtype, device):
        """Hook of :meth:`asarray`: native ``x`` as ``native_dtype`` on the native ``device`` (None:
        as it is); ``x`` itself where neither differs."""
        if native_dtype is not None and x.dtype != native_dtype:
            x = self.xp.astype(x, native_dtype)
        if device is not None and self.device_of(x) != device:
            x = self._move(x, device)
        return x

    def _new_array(self, value, native_dtype, device):
        """Hook of :meth:`asarray`: a native array from a value that is not one (a Python scalar,
        nested list, NumPy array...), of ``native_dtype`` (None: the library infers it) on the native
        ``device``."""
        return self.xp.asarray(value, dtype=native_dtype, device=device)

    def to_numpy(self, x) -> np.ndarray:
        return np.asarray(x)

    def compute(self, xs):
        """The values of the native arrays ``xs`` as NumPy arrays, computed together (a lazy backend
        computes them in one pass, sharing what their graphs share)."""
        return [self.to_numpy(x) for x in xs]

    def persist(self, xs):
        """The native arrays ``xs`` computed and kept on the backend (lazy backends)."""
        return list(xs)

    def match_layout(self, g, source, layout=None):
        """Gradient ``g`` laid out as its ``source`` (where :attr:`lays_out`): same chunks, same sharding.
        ``layout``: what :meth:`layout_of` read from the concrete source while tracing a ``gt.function``
        (the program's stand-ins carry none); None: read it from ``source``."""
        return g

    def layout_of(self, x):
        """What :meth:`match_layout` needs of a source, small and constant (a JAX sharding; None where
        the array itself is enough, as dask's chunks are at replay)."""
        return None

    def rechunk(self, x, chunks):
        """``x`` split in ``chunks`` (chunked backends)."""
        raise ValueError(f"backend {self.name!r} does not split arrays in chunks (chunks= is for the dask backend)")

    def from_dlpack(self, obj, device=None):
        """A native array sharing memory (where the library can) with a DLPack-capable ``obj`` (a
        native array passes as it is); falls back to a copy through NumPy (onto the default device)
        for objects DLPack cannot carry.  Then moved to ``device``, where one is given."""
        if self.is_native(obj):
            out = obj
        else:
            try:
                out = self.xp.from_dlpack(obj)
            except DLPACK_ERRORS:
                out = self.asarray(np.asarray(obj))
        return out if device is None else self.to_device(out, device)

    def update_inplace(self, name, x, delta, scale=None) -> bool:
        """``x = name(x, delta)`` (``name``: "add" or "subtract") done in place, where that cannot be
        observed: the caller (``Variable.assign_add``/``assign_sub``) checked that no Python object
        but the variable references ``x``; the backend checks that no view or foreign buffer shares
        its memory.  With ``scale`` (a 0-d array of ``x``'s dtype: an optimizer's learning rate),
        ``x = name(x, delta * scale)``, the bits of :meth:`scaled_update`'s.  True when done; the
        default never does it."""
        return False

    def scaled_update(self, name, x, delta, scale):
        """``name(x, delta * scale)`` as a new array (``name``: "add" or "subtract"; ``scale`` a 0-d
        array of ``x``'s dtype): gradient descent's step, where :meth:`update_inplace` cannot write
        into ``x``.  An adapter with a fused kernel for it overrides both, with the same bits."""
        xp = self.xp
        return getattr(xp, name)(x, xp.multiply(delta, scale))

    def fix_output(self, out):
        """Turn an op's output of a foreign type (NumPy scalars, say) into a native array."""
        return out

    # ------------------------------------------------------------------ what the standard lacks
    def index_add(self, shape, dtype, key, values):
        """``zeros(shape)`` with ``values`` added at ``key`` (duplicates accumulate): indexing gradients."""
        raise NotImplementedError

    def setitem(self, x, key, value):
        """A new array equal to ``x`` with ``x[key] = value``; ``x`` itself is not modified."""
        raise NotImplementedError

    def erf(self, x):
        """The error function, elementwise (float32/float64).  This fallback goes through the host."""
        try:
            from scipy.special import erf as _erf

            host = np.asarray(_erf(self.to_numpy(x)))
        except ImportError:  # pragma: no cover - scipy is optional
            host = np.vectorize(math.erf, otypes=[np.float64])(self.to_numpy(x))
        return self.asarray(host.astype(np.dtype(self.dtype_of(x).name), copy=False), device=self.device_of(x))

    def vmap(self, fn, in_axes=0, out_axes=0):
        """``fn`` mapped over the ``in_axes`` of its native arguments (the library's vmap)."""
        raise NotImplementedError(f"backend {self.name!r} has no vmap")

    # ------------------------------------------------ structured control flow (gt.function programs)
    #: a gradient through ``gt.while_loop`` may loop a number of times known only when it runs
    #: (Python loops); False where the compiler needs static shapes (``maximum_iterations`` is then
    #: required for it)
    dynamic_loops = True
    #: the compiler (:meth:`compile_program`) compiles :meth:`cond` and the loops below as they are
    #: (else a program with them is not compiled: its predicates become guards)
    compiles_control_flow = False

    #: the compiler keeps :meth:`host_callback` calls in the compiled program (else a program with
    #: ``gt.print`` is replayed)
    compiles_host_callbacks = False

    def host_callback(self, fn, *arrays):
        """Call ``fn(*arrays)`` on the host when a program runs this step (``gt.print``); a compiler
        stages the call into the compiled program."""
        fn(*arrays)

    def effects_barrier(self):
        """Wait until every host callback of the programs run so far has run."""

    def structured_step(self, fn):
        """``fn``, a ``gt.cond`` / ``gt.while_loop`` step of a program, as it is called (a compiler
        whose structured forms would compile anew on each eager call returns it compiled once)."""
        return fn

    def cond(self, pred, true_fn, false_fn, operands):
        """``gt.cond``'s step in a ``gt.function`` program: the branch of scalar ``pred`` applied to
        ``operands`` (each branch returns a tuple of arrays of the same shapes and dtypes)."""
        return true_fn(*operands) if bool(pred) else false_fn(*operands)

    def while_loop(self, cond_fn, body_fn, operands, init, max_iter):
        """``gt.while_loop``'s step where nothing differentiates it: the final carry (a tuple).
        ``cond_fn(*operands, *carry)`` returns a 1-tuple of a scalar bool, ``body_fn`` the carry."""
        carry = tuple(init)
        i = 0
        while (max_iter is None or i < max_iter) and bool(cond_fn(*operands, *carry)[0]):
            carry = tuple(body_fn(*operands, *carry))
            i += 1
        return carry

    def loop_forward(self, cond_fn, body_fn, operands, init, max_iter):
        """``gt.while_loop``'s step under a tape: ``(final carry, each carried variable stacked over
        the iterations that ran, their count)`` (the carries are what the gradient reads)."""
        xp = self.xp
        carry = tuple(init)
        saved = []
        while (max_iter is None or len(saved) < max_iter) and bool(cond_fn(*operands, *carry)[0]):
            saved.append(carry)
            carry = tuple(body_fn(*operands, *carry))
        if saved:
            stacked = tuple(xp.stack([s[k] for s in saved]) for k in range(len(carry)))
        else:
            stacked = tuple(xp.expand_dims(v, axis=0)[0:0, ...] for v in init)
        return carry, stacked, xp.asarray(len(saved), device=self.device_of(init[0]))

    def loop_backward(self, vjp_fn, operands, count, stacked, dfinal, max_iter, meta):
        """The gradient of :meth:`loop_forward`: the body's VJP ``vjp_fn(*operands, *carry, *d) ->
        (*d carry, *d captures)`` applied from the last iteration to the first; returns the
        gradients of the floating initial carry and of the captures.  ``meta``: (the floating
        carry's positions, the captures' gradient shapes and dtypes)."""
        floating, cap_meta = meta
        nf = len(floating)
        d = tuple(dfinal)
        dcaps = None
        for k in range(int(count) - 1, -1, -1):
            res = vjp_fn(*operands, *[s[k, ...] for s in stacked], *d)
            d = tuple(res[:nf])
            dcaps = tuple(res[nf:]) if dcaps is None else tuple(a + b for a, b in zip(dcaps, res[nf:]))
        if dcaps is None:
            device = self.device_of(stacked[0])
            dcaps = tuple(self.xp.zeros(shape, dtype=dtype, device=device) for shape, dtype in cap_meta)
        return (*d, *dcaps)

    def compile_program(self, fn):
        """``fn`` -- a ``gt.function`` program, a Python function of native arrays returning tuples
        of them -- compiled by the library's compiler (see :attr:`compiles`)."""
        raise NotImplementedError(f"backend {self.name!r} has no compiler")

    def native_grad(self, fn, *args):
        """Gradients of ``sum(fn(*args))`` with respect to each native array in ``args``, computed by
        the library's own autodiff; ``fn`` takes and returns native arrays (it may use ``self.xp``)."""
        raise NotImplementedError(f"backend {self.name!r} has no autodiff of its own")

    # ------------------------------------------------------------------ random numbers
    @staticmethod
    def random_generator(seed=None) -> np.random.Generator:
        """The generator behind gradtape's random numbers: NumPy's PCG64, on the host, for every
        backend (so one seed gives the same numbers everywhere)."""
        return np.random.Generator(np.random.PCG64(seed))

    def random_from_numpy(self, arr: np.ndarray, dtype, device=None):
        """Random numbers are drawn with NumPy's PCG64, so one seed gives the same numbers on every
        backend; the adapter only moves them onto its arrays (and device)."""
        return self.asarray(arr, dtype=dtype, device=device)

    def __repr__(self):
        return f"<gradtape backend {self.name!r}>"

    # ------------------------------------------------------------------ special functions
    def special_function(self, name):
        """The library's own ``scipy.special.<name>`` (SciPy's name and arguments), on native arrays of
        a real floating dtype, returning arrays of that dtype; None where the library has none
        (``gt.special`` then composes it of the library's others, or computes it with SciPy on the
        host, as it does for complex inputs)."""
        return None
