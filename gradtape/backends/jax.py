"""The JAX backend (CPU and GPU).  ``jax.numpy`` is an Array API namespace already; the adapter only
reports its shape mismatches as ValueError (JAX raises TypeError for some), as every backend does.

float64: JAX computes in 32 bits unless ``jax_enable_x64`` is on, and silently turns float64
requests into float32.  Loading this backend therefore sets ``jax.config.update("jax_enable_x64",
True)`` once, process-wide (see docs/backends.md for what that changes in the user's own JAX code).

Devices: ``"cpu"``, ``"gpu"``/``"cuda"`` (the first GPU), ``"gpu:1"``/``"cuda:1"``, ``"tpu:0"``; a
``jax.Device`` passes through.  ``Tensor.device`` reads ``"cpu"`` or ``"gpu:N"``.  The default device
is JAX's own (``jax.devices()[0]``: the GPU where one is present).

Sharded arrays (several devices): a ``jax.sharding.Sharding`` (``NamedSharding(mesh, P("batch"))``)
is a device here.  ``device_of`` of an array spread over several devices is its sharding (never one
of its devices: that would make ``asarray``/``to_device`` gather it), so everything the core creates
"on the device of x" (scalars beside it, rules' ``xp.zeros(shape, device=...)``, index arrays,
random draws, optimizer slots, a layer's weights) is placed by that sharding: as it is where it fits
the new shape, else replicated over the same devices (a 0-d constant beside a batch-sharded array is
replicated on its mesh, not put on device 0).  ``Tensor.device`` of a sharded array names every
device and the layout, e.g. ``"cpu:0-7 mesh(batch=8) P('batch',)"`` (``"cpu:0-7 mesh(batch=8)
P()"`` when replicated); the name parses back to the sharding (``x.to_device(y.device)``,
``gt.zeros(3, device=y.device)``).  ``gt.constant``/``gt.Variable``/``gt.asarray`` of a sharded
``jax.Array`` keep its sharding; ``device=`` takes a sharding (``gt.constant(batch,
device=NamedSharding(mesh, P("batch")))``), and so does ``gt.use_backend("jax", device=...)``: with a
replicated sharding there, every new array (weights, constants, random draws) is replicated on the
mesh.  Gradients come back sharded as their sources (:meth:`match_layout`, also inside a compiled
``gt.function`` step, where it is a sharding constraint); a layer's weights built beside a sharded
batch are replicated on its devices (:meth:`weights_device`).  An array made without ``device=`` is
uncommitted, as JAX makes it (:meth:`unplaced_device`), and follows a sharded one it meets; arrays
committed to one device and arrays on a mesh do not mix (JAX's rule: a ``ValueError`` naming both).
"""

from __future__ import annotations

import functools
import types

import numpy as np

from gradtape.core import dtypes as _dt

from gradtape.core.backend import Backend
from gradtape.backends._indexing import check_in_bounds, integer_arrays
from gradtape.backends._values import check_new_int, with_conventions

_ALIASES = {"cuda": "gpu", "rocm": "gpu"}
#: functions for which JAX reports a shape mismatch as TypeError (NumPy, PyTorch and array_api_strict:
#: ValueError, as gradtape does on every backend)
_SHAPE_CHECKED = ("reshape", "matmul", "concat", "permute_dims", "tensordot")
_SHAPE_WORDS = ("shape", "permutation", "dimension")
#: matrix products computed in full float32 precision (``einsum`` too: ``_full_einsum``): see _full_precision
_FULL_PRECISION = ("matmul", "tensordot", "vecdot")


def _shape_errors_are_value_errors(fn):
    def f(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            if any(w in str(e) for w in _SHAPE_WORDS):
                raise ValueError(str(e)) from e
            raise

    functools.update_wrapper(f, fn)
    return f


def _fast_reduction(fn):
    """``fn(x, axis=..., keepdims=...)`` with the axes normalised and passed positionally: JAX's jitted
    functions take noticeably longer per call for keyword and tuple arguments (same result)."""

    def f(x, /, *, axis=None, keepdims=False, **kwargs):
        if kwargs or keepdims:
            return fn(x, axis=axis, keepdims=keepdims, **kwargs)
        if axis.__class__ is tuple:
            n = x.ndim
            if len(axis) == n and axis and {a + n if a < 0 else a for a in axis} == set(range(n)):
                axis = None  # every axis, once each (else JAX reports the bad axes)
            elif len(axis) == 1:
                axis = axis[0]
        return fn(x) if axis is None else fn(x, axis)

    functools.update_wrapper(f, fn)
    return f


#: creation functions whose ``device=`` may be a sharding, with how to read the new array's shape from
#: their arguments (None: from the array made first, then placed)
_PLACED = {
    "zeros": lambda a, k: a[0] if a else k["shape"],
    "ones": lambda a, k: a[0] if a else k["shape"],
    "empty": lambda a, k: a[0] if a else k["shape"],
    "full": lambda a, k: a[0] if a else k["shape"],
    "zeros_like": lambda a, k: k.get("shape") or a[0].shape,
    "ones_like": lambda a, k: k.get("shape") or a[0].shape,
    "empty_like": lambda a, k: k.get("shape") or a[0].shape,
    "full_like": lambda a, k: k.get("shape") or a[0].shape,
    "asarray": lambda a, k: np.shape(a[0]),
    "eye": None,
    "arange": None,
    "linspace": None,
    "from_dlpack": None,
}


def _placing(fn, backend, shape_of):
    """``fn`` (a creation function) whose ``device=`` may also be a sharding: it is fitted to the
    shape of the new array (:meth:`JaxBackend._fit`)."""
    Device = backend._jax.Device

    def f(*args, **kwargs):
        device = kwargs.get("device")
        if device is None or isinstance(device, Device):
            return fn(*args, **kwargs)
        if shape_of is None:
            kwargs["device"] = None
            return backend._move(fn(*args, **kwargs), device)
        shape = shape_of(args, kwargs)
        kwargs["device"] = backend._fit(device, (shape,) if isinstance(shape, int) else tuple(shape))
        return fn(*args, **kwargs)

    functools.update_wrapper(f, fn)
    return f


def _full_precision(fn, config):
    """The matrix product ``fn`` in full float32 precision, as NumPy and torch compute it: JAX's
    default on GPUs rounds float32 operands to TF32 (relative errors of 1e-3; a compiled step then
    differs from the same step run eagerly by more than that).  A precision the program chose --
    ``precision=``, or ``jax.default_matmul_precision(...)`` around the code -- is honoured."""

    def f(*args, **kwargs):
        if "precision" not in kwargs and config.jax_default_matmul_precision is None:
            kwargs["precision"] = "highest"
        return fn(*args, **kwargs)

    functools.update_wrapper(f, fn)
    return f


def _namespace(jnp, backend):
    """``jax.numpy``, with shape mismatches reported as ValueError, and creation functions that take a
    sharding as ``device=`` for any shape."""
    ns = types.ModuleType("gradtape.backends.jax.xp", "jax.numpy, with shape mismatches reported as ValueError")
    ns.__dict__.update(
        {k: v for k, v in vars(jnp).items() if k not in ("__name__", "__doc__", "__spec__", "__loader__", "__path__")}
    )
    for name in _SHAPE_CHECKED:
        setattr(ns, name, _shape_errors_are_value_errors(getattr(jnp, name)))
    for name in _FULL_PRECISION:
        setattr(ns, name, _full_precision(getattr(ns, name), backend._jax.config))
    for name in ("sum", "prod", "mean", "max", "min"):
        setattr(ns, name, _fast_reduction(getattr(jnp, name)))
    for name, shape_of in _PLACED.items():
        setattr(ns, name, _placing(getattr(ns, name), backend, shape_of))
    return ns


#: the linear algebra NumPy and PyTorch refuse where the input is singular (not positive definite), and
#: NumPy's words for it; ``jax.numpy`` returns inf / NaN there
_LINALG_FAILURES = {
    "linalg.inv": "Singular matrix",
    "linalg.solve": "Singular matrix",
    "linalg.cholesky": "Matrix is not positive definite",
}

#: ``jax.scipy.special``'s names for SciPy's special functions, where they differ
_SPECIAL_NAMES = {"psi": "digamma"}
#: functions of ``jax.scipy.special`` that are not SciPy's: ``betaln`` is NaN at poles where SciPy's is finite
#: (``betaln(-3, 2)``); gt.special composes SciPy's from ``gammaln``
_SPECIAL_UNLIKE_SCIPY = frozenset({"betaln"})


class JaxBackend(Backend):
    name = "jax"
    install_hint = "python3 -m pip install jax"
    python_scalars = True  # JAX's weak types keep the array's dtype
    supports_vmap = True
    supports_native_grad = True
    #: set once an array spread over several devices (a sharding) has been met: from then on the tape
    #: places each gradient as its source (:meth:`match_layout`); until then single-device programs
    #: pay nothing for it
    lays_out = False
    #: check integer index arrays against the shape (JAX clamps them): one device-to-host read each
    check_bounds = True

    def __init__(self):
        super().__init__()
        self.overrides = {
            "getitem": self._getitem,
            "einsum": self._einsum,
            "linalg.matrix_power": self._matrix_power,
            "take": self._take,
        }
        self._special = {}

    def op_impl(self, opdef):
        impl = super().op_impl(opdef)
        if opdef.name == "sign":
            return self._unsigned_zero(impl)
        impl = with_conventions(
            self, opdef.name, impl, self._readable, host=self._host, signed_zeros=("remainder", "floor_divide")
        )
        failure = _LINALG_FAILURES.get(opdef.name)
        return impl if failure is None else self._refusing(impl, failure)

    @staticmethod
    def _unsigned_zero(impl):
        """``sign`` with NumPy's (and PyTorch's) ``sign(-0.0) = 0.0``: JAX keeps the zero's sign."""

        def sign(x, /):
            out = impl(x)
            return out + 0.0 if out.dtype.kind == "f" else out  # (-0.0 + 0.0 is +0.0; NaN stays)

        return sign

    def _readable(self, x):
        """Whether ``x``'s values can be read here (not a tracer of ``jax.jit`` / ``jax.vmap``)."""
        return not isinstance(x, self._Tracer)

    @staticmethod
    def _host(x):
        """``x``'s values as a NumPy array where they are in host memory (on the CPU: no copy), else None
        (a reduction on the device, read, costs less than a copy of the array)."""
        devices = x.devices()
        if len(devices) != 1 or next(iter(devices)).platform != "cpu":
            return None
        return np.asarray(x)

    def _refusing(self, impl, failure):
        """``impl`` raising NumPy's ``LinAlgError`` (``failure``: its message) where it returns a
        non-finite value for finite inputs, as NumPy's and PyTorch's functions refuse a singular (or
        not positive definite) matrix.  One host read of a reduction; a tracer's values (under
        ``jax.jit``) cannot be read, so those keep JAX's inf / NaN."""
        jnp = self._jnp
        tracer = self._Tracer

        def refusing(*arrays, **attrs):
            out = impl(*arrays, **attrs)
            if isinstance(out, tracer) or bool(jnp.all(jnp.isfinite(out))):
                return out
            if all(bool(jnp.all(jnp.isfinite(a))) for a in arrays):
                raise np.linalg.LinAlgError(failure)
            return out

        refusing.__name__ = refusing.__qualname__ = getattr(impl, "__name__", "refusing")
        return refusing

    def load(self):
        import jax

        if not jax.config.read("jax_enable_x64"):
            jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        self._jax = jax
        self._jnp = jnp
        self._full_einsum = _full_precision(jnp.einsum, jax.config)
        self._default_device = None
        self.array_type = type(jnp.zeros(()))
        self._abstract = jax.Array  # tracers (inside vmap/grad) are jax.Arrays too
        self._Sharding = jax.sharding.Sharding
        self._Tracer = jax.core.Tracer
        self._placement = {}  # an array's sharding -> its device, or the sharding (several devices)
        self._fits = {}  # (sharding, shape) -> the sharding an array of that shape gets
        self._named = {}  # Tensor.device name of a sharding -> the sharding
        self._names = {}  # sharding -> its name
        return _namespace(jnp, self)

    def _extra_dtype_aliases(self):
        # jnp.float32 is a scalar type; arrays report NumPy dtypes: map (and pass) those
        for d in _dt.ALL_DTYPES:
            nd = np.dtype(d.name)
            self._to_native[d] = nd
            self._from_native[nd] = d

    def is_native(self, obj):
        return isinstance(obj, self._abstract)

    # ------------------------------------------------------------------ devices
    def default_device(self):
        if self._default_device is None:
            self._default_device = self._jax.devices()[0]
        return self._default_device

    def device_beside(self, x):
        try:
            committed = x.committed
        except Exception:  # no such attribute; a tracer under jax.jit raises its own error for it
            committed = True
        return None if committed is False else self.device_of(x)

    def unplaced_device(self):
        """None on the default device: an array made there without ``device=`` is uncommitted, as
        JAX makes it, so it follows a committed (or sharded) array it meets instead of clashing."""
        d = self.device
        return None if d is self.default_device() else d

    def _platform_devices(self, platform):
        """The devices of ``platform`` ("cpu", "gpu", "tpu"); a GPU is "cuda" or "rocm" to newer
        JAX, which no longer answers to "gpu"."""
        for name in ("cuda", "rocm", "gpu") if platform == "gpu" else (platform,):
            try:
                found = self._jax.devices(name)
            except RuntimeError:
                continue
            if found:
                return found
        return []

    def parse_device(self, device):
        jax = self._jax
        if device is None:
            return self.default_device()
        if isinstance(device, jax.Device):
            return device
        if isinstance(device, self._Sharding):
            return self._canonical(device)
        if not isinstance(device, str):
            raise TypeError(
                "backend 'jax': a device is a string ('cpu', 'gpu:0'), a jax.Device or a jax.sharding.Sharding, "
                f"not {type(device).__name__}"
            )
        named = self._named.get(device)
        if named is not None:
            return named
        kind, _, idx = device.strip().lower().partition(":")
        kind = _ALIASES.get(kind, kind)
        devs = self._platform_devices(kind) if kind in ("cpu", "gpu", "tpu") else []
        i = int(idx) if idx.isdigit() else -1 if idx else 0
        if not devs or not 0 <= i < len(devs):
            raise ValueError(
                f"backend 'jax' has no device {device!r} (devices: {self.devices()}; an array over several "
                "devices takes a jax.sharding.Sharding, or the Tensor.device name of a sharded tensor)"
            )
        return devs[i]

    def device_of(self, x):
        """``x``'s device, or its sharding where it spans several devices (never one of them: placing
        something "on x's device" then places it over all of x's devices)."""
        try:
            s = x.sharding
        except Exception:  # a tracer (inside jax.vmap / jax.grad) has no placement of its own
            return self.default_device()
        d = self._placement.get(s)
        if d is None:
            if len(self._placement) > 256:
                self._placement.clear()
            d = self._placement[s] = self._canonical(s)
        return d

    def _canonical(self, sharding):
        """A sharding on one device is that device (how ``device_of`` reads an array on it)."""
        ds = sharding.device_set
        if len(ds) == 1:
            return next(iter(ds))
        self.lays_out = True
        return sharding

    def _fit(self, sharding, shape):
        """The placement of a new array of ``shape`` asked for with ``sharding``: the sharding itself
        where it fits the shape (its partitioned axes exist and divide evenly), else replicated over
        the same devices (so a scalar or a weight made beside a batch-sharded array is on its mesh)."""
        if not isinstance(sharding, self._Sharding):
            return sharding
        key = (sharding, shape)
        out = self._fits.get(key)
        if out is None:
            try:
                sharding.shard_shape(shape)
                out = sharding
            except Exception:  # (IndexError for a rank too small, IndivisibleError, ValueError)
                out = self._replicated(sharding)
            if len(self._fits) > 1024:
                self._fits.clear()
            self._fits[key] = out
        return out

    def _replicated(self, sharding):
        """``sharding``'s devices, each holding the whole array."""
        jax = self._jax
        P = jax.sharding.PartitionSpec
        if isinstance(sharding, jax.sharding.NamedSharding):
            return jax.sharding.NamedSharding(sharding.mesh, P(), memory_kind=sharding.memory_kind)
        devices = sorted(sharding.device_set, key=lambda d: d.id)
        return jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(devices), ("devices",)), P())

    def layout_of(self, x):
        """The sharding of ``x`` where it spans several devices, else None (its device is its layout)."""
        d = self.device_of(x)
        return d if isinstance(d, self._Sharding) else None

    def match_layout(self, g, source, layout=None):
        """Gradient ``g`` sharded as ``source`` (or as ``layout``, a sharding read from the concrete
        source while tracing a ``gt.function``: a compiled program's tracers carry none).  A gradient
        made from replicated cotangents only (the ones of a sum, a constant factor) would otherwise
        come back replicated beside a batch-sharded source, or on one device from a compiled step."""
        d = layout if layout is not None else self.device_of(source)
        if isinstance(d, self._Sharding) and (isinstance(g, self._Tracer) or self.device_of(g) != d):
            return self._move(g, d)
        return g

    def weights_device(self, device):
        """A layer's weights beside an input sharded over several devices: on those devices,
        replicated (data parallelism: the batch is split, the weights are not)."""
        return self._replicated(device) if isinstance(device, self._Sharding) else device

    def device_str(self, device) -> str:
        jax = self._jax
        if isinstance(device, str):
            device = self.parse_device(device)
        if isinstance(device, self._Sharding):
            device = self._canonical(device)
            if isinstance(device, self._Sharding):
                return self._sharding_name(device)
        if not isinstance(device, jax.Device):
            return str(device)
        plat = _ALIASES.get(device.platform, device.platform)
        same = self._platform_devices(device.platform)
        i = same.index(device) if device in same else device.id
        return "cpu" if plat == "cpu" and i == 0 else f"{plat}:{i}"

    def _sharding_name(self, s):
        """``"cpu:0-7 mesh(batch=8) P('batch',)"``: the platform, every device (in the mesh's order),
        the mesh's axes and the partition spec; kept so that :meth:`parse_device` reads it back."""
        name = self._names.get(s)
        if name is not None:
            return name
        jax = self._jax
        if isinstance(s, jax.sharding.NamedSharding):
            devices = list(s.mesh.devices.flat)
            layout = "mesh({}) {}".format(",".join(f"{a}={n}" for a, n in s.mesh.shape.items()), s.spec)
        else:
            devices = sorted(s.device_set, key=lambda d: d.id)
            layout = type(s).__name__
        plat = _ALIASES.get(devices[0].platform, devices[0].platform)
        same = self._platform_devices(devices[0].platform)
        ids = [same.index(d) if d in same else d.id for d in devices]
        span = f"{ids[0]}-{ids[-1]}" if ids == list(range(ids[0], ids[0] + len(ids))) else ",".join(map(str, ids))
        name = f"{plat}:{span} {layout}"
        k = 2
        while name in self._named and self._named[name] != s:  # (another mesh of the same devices and axes)
            name = f"{plat}:{span} {layout} #{k}"
            k += 1
        self._named[name] = s
        self._names[s] = name
        return name

    def devices(self):
        out = []
        for plat in ("cpu", "gpu", "tpu"):
            for i, _ in enumerate(self._platform_devices(plat)):
                out.append("cpu" if plat == "cpu" and i == 0 else f"{plat}:{i}")
        return out

    def _move(self, x, device):
        """``x`` on ``device``: a device, or a sharding (fitted to ``x``'s shape); inside a compiled
        program a sharding is a constraint on the layout (``with_sharding_constraint``), as a
        ``device_put`` there does not fix the output's sharding."""
        jax = self._jax
        if isinstance(device, self._Sharding):
            device = self._fit(device, tuple(x.shape))
            if isinstance(x, self._Tracer):
                try:
                    return jax.lax.with_sharding_constraint(x, device)
                except Exception:  # (a vmap tracer outside any jit: no layout to constrain)
                    return jax.device_put(x, device)
        return jax.device_put(x, device)

    def _new_array(self, value, native_dtype, device):
        if isinstance(device, self._Sharding):
            device = self._fit(device, np.shape(value))
        if (
            value.__class__ is np.ndarray
            and (native_dtype is None or native_dtype == value.dtype)
            and not isinstance(device, self._Sharding)
            and value.dtype.kind in "biufc"
        ):
            # a copy onto the device, as jnp.asarray makes it (uncommitted without a device), without the
            # XLA program jnp.asarray compiles for each new shape and dtype of a NumPy array (an identity,
            # ~20-40 ms of compiling each: 15% of the compiles of an op's gradient check).  device_put is
            # asynchronous and may read (or keep) the host buffer after it returns: it gets a copy of its
            # own, so that writing to the caller's array afterwards changes nothing
            return self._jax.device_put(value.copy(), device, may_alias=False)
        check_new_int(self, value, native_dtype)  # (JAX wraps a Python int around)
        return self._jnp.asarray(value, dtype=native_dtype, device=device)

    # ------------------------------------------------------------------ conversion
    def fix_output(self, out):
        return self._jnp.asarray(out)

    # ------------------------------------------------------------------ what the standard lacks
    @staticmethod
    def _misread(key):
        """Whether JAX may misread ``key``: it holds a Python bool (NumPy's 0-d mask), which JAX
        places wrongly beside ``None``, slices or another bool."""
        return key.__class__ is tuple and any(k.__class__ is bool for k in key)

    def _positions(self, shape, key):
        """For each element NumPy's ``x[key]`` selects, its flat position (NumPy reads the key)."""
        host = tuple(np.asarray(k) if isinstance(k, self._abstract) else k for k in key)
        n = int(np.prod(shape, dtype=np.int64))
        return self._jnp.asarray(np.arange(n).reshape(tuple(shape))[host])

    def _einsum(self, *arrays, subscripts):
        """The op ``einsum`` by the library's own einsum (in full precision: :func:`_full_precision`)."""
        return self._full_einsum(subscripts, *arrays)

    def _matrix_power(self, x, *, n):
        """The op ``linalg.matrix_power`` in full precision (:func:`_full_precision`): JAX's function
        takes no ``precision=``, so its products run under ``jax.default_matmul_precision``."""
        if self._jax.config.jax_default_matmul_precision is not None:
            return self._jnp.linalg.matrix_power(x, n)
        with self._jax.default_matmul_precision("highest"):
            return self._jnp.linalg.matrix_power(x, n)

    def _check_key(self, shape, key):
        """IndexError for an integer index array of a native key with a value outside the axis it
        indexes, as NumPy's (JAX clamps a read, fills NaN in ``take`` and drops a write).  One
        device-to-host read of each such array; a tracer's values (under ``jax.jit``,
        ``jax.vmap``) cannot be read, so those stay JAX's to handle (``check_bounds = False``: off)."""
        tracer = self._Tracer
        for k, axis in integer_arrays(shape, key, lambda k: isinstance(k, self._abstract)):
            if not isinstance(k, tracer):
                self._check_index(k, shape[axis], axis)

    def _check_index(self, k, size, axis):
        """IndexError where the integer array ``k`` indexes outside an axis of ``size``: read on the host
        (an index array is small; a jitted test would compile once per index shape and dtype)."""
        check_in_bounds(np.asarray(k), size, axis)

    def _take(self, x, indices, *, axis):
        if self.check_bounds and indices.size:
            self._check_key((x.shape[axis],), (indices,))
        return self._jnp.take(x, indices, axis=axis)

    def _getitem(self, x, *, key):
        """``x[key]``; a key JAX misreads is a gather at the flat positions NumPy reads from it."""
        if self.check_bounds:
            self._check_key(x.shape, key)
        if self._misread(key):
            return x.reshape(-1)[self._positions(x.shape, key)]
        return x[key]

    def index_add(self, shape, dtype, key, values):
        """``.at[key].add``: JAX's functional scatter-add (repeated indices accumulate)."""
        jnp = self._jnp
        nd = self.dtype_to_native(dtype)
        if not isinstance(values, self._abstract):
            values = jnp.asarray(values, dtype=nd)
        shape = tuple(shape)
        placed = self.device_of(values)
        if isinstance(placed, self._Sharding):  # (zeros_like would make them on one device)
            zeros = jnp.zeros(shape, dtype=nd, device=self._fit(placed, shape))
        else:
            zeros = jnp.zeros_like(values, dtype=nd, shape=shape)
        values = values.astype(nd) if values.dtype != nd else values
        if self._misread(key):
            pos = self._positions(shape, key)
            values = self._jnp.broadcast_to(values, pos.shape)
            return zeros.reshape(-1).at[pos].add(values).reshape(shape)
        return zeros.at[key].add(values)

    def setitem(self, x, key, value):
        """``.at[key].set``: a new array, ``x`` untouched."""
        if self.check_bounds:
            self._check_key(x.shape, key)
        if self._misread(key):
            pos = self._positions(x.shape, key)
            value = self._jnp.broadcast_to(self._jnp.asarray(value, dtype=x.dtype), pos.shape)
            return x.reshape(-1).at[pos].set(value).reshape(x.shape)
        return x.at[key].set(value)

    def erf(self, x):
        if self._jnp.iscomplexobj(x):  # jax.scipy.special.erf is real-only: SciPy's, on the host
            return super().erf(x)
        from jax.scipy.special import erf

        return erf(x)

    def special_function(self, name):
        """``jax.scipy.special``'s function for SciPy's ``name`` (``psi`` is ``digamma``; ``sinc`` is
        ``jax.numpy``'s); None where JAX has none, or none that is SciPy's."""
        try:
            return self._special[name]
        except KeyError:
            self.xp  # noqa: B018 - load jax
            import jax.scipy.special as jsp

            if name == "sinc":
                f = self._jnp.sinc
            elif name in _SPECIAL_UNLIKE_SCIPY:
                f = None
            else:
                f = getattr(jsp, _SPECIAL_NAMES.get(name, name), None)
            self._special[name] = f
            return f

    def vmap(self, fn, in_axes=0, out_axes=0):
        return self._jax.vmap(fn, in_axes=in_axes, out_axes=out_axes)

    compiles = "default"

    def compile_program(self, fn):
        return self._jax.jit(fn)

    dynamic_loops = False  # (a reverse-differentiated gt.while_loop needs maximum_iterations: lax.scan)
    compiles_control_flow = True
    compiles_host_callbacks = True

    def host_callback(self, fn, *arrays):
        self._jax.debug.callback(fn, *arrays, ordered=True)

    def effects_barrier(self):
        self._jax.effects_barrier()

    def structured_step(self, fn):
        # a replayed program (jit_compile=False) calls the step eagerly: lax.cond / lax.scan of new
        # closures would compile on every call; inside a jitted program the jit is inlined
        return self._jax.jit(fn)

    def cond(self, pred, true_fn, false_fn, operands):
        return self._jax.lax.cond(self._jax.numpy.reshape(pred, ()), true_fn, false_fn, *operands)

    def while_loop(self, cond_fn, body_fn, operands, init, max_iter):
        jnp = self._jax.numpy

        def go(state):
            i, carry = state
            ok = jnp.reshape(cond_fn(*operands, *carry)[0], ())
            return ok if max_iter is None else jnp.logical_and(i < max_iter, ok)

        def step(state):
            i, carry = state
            return i + 1, tuple(body_fn(*operands, *carry))

        return self._jax.lax.while_loop(go, step, (0, tuple(init)))[1]

    def loop_forward(self, cond_fn, body_fn, operands, init, max_iter):
        """``lax.scan`` over ``max_iter`` steps, each a ``lax.cond`` of the body while the predicate
        held (the carries of every step are saved: static shapes)."""
        lax = self._jax.lax
        jnp = self._jax.numpy

        def step(state, _):
            carry, done, count = state
            active = jnp.logical_and(jnp.logical_not(done), jnp.reshape(cond_fn(*operands, *carry)[0], ()))
            if getattr(body_fn, "host_effects", False):  # (a gt.print in the body: only the steps that run)
                new = lax.cond(active, lambda v: tuple(body_fn(*operands, *v)), lambda v: tuple(v), carry)
            else:  # (selecting is faster than a lax.cond per step; the values not taken are dropped)
                stepped = body_fn(*operands, *carry)
                new = tuple(jnp.where(active, b, a) for a, b in zip(carry, stepped))
            return (new, jnp.logical_not(active), count + active.astype(count.dtype)), carry

        start = (tuple(init), jnp.asarray(False), jnp.asarray(0))
        (final, _, count), stacked = lax.scan(step, start, None, length=max_iter)
        return final, stacked, count

    def loop_backward(self, vjp_fn, operands, count, stacked, dfinal, max_iter, meta):
        lax = self._jax.lax
        jnp = self._jax.numpy
        floating, cap_meta = meta
        nf = len(floating)

        def step(state, xs):
            k, carry = xs

            d, dc = state
            res = vjp_fn(*operands, *carry, *d)
            on = k < count
            d = tuple(jnp.where(on, b, a) for a, b in zip(d, res[:nf]))
            dc = tuple(jnp.where(on, a + b, a) for a, b in zip(dc, res[nf:]))
            return (d, dc), None

        zeros = tuple(jnp.zeros(shape, dtype) for shape, dtype in cap_meta)
        (d, dc), _ = lax.scan(step, (tuple(dfinal), zeros), (jnp.arange(max_iter), tuple(stacked)), reverse=True)
        return (*d, *dc)

    def native_grad(self, fn, *args):
        jax = self._jax
        diff = [i for i, a in enumerate(args) if self.dtype_of(a).differentiable]

        def total(*xs):
            full = list(args)
            for i, x in zip(diff, xs):
                full[i] = x
            out = fn(*full)
            if self._jnp.iscomplexobj(out):
                raise TypeError("native_grad needs a real-valued function")
            return self._jnp.sum(out)

        grads = jax.grad(total, argnums=tuple(range(len(diff))))(*[args[i] for i in diff]) if diff else ()
        res = [None] * len(args)
        for i, g in zip(diff, grads):
            # JAX returns the conjugate of TensorFlow's / PyTorch's complex gradient
            res[i] = self._jnp.conj(g) if self.dtype_of(args[i]).is_complex else g
        return res
