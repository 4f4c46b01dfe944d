"""The CuPy backend: NVIDIA GPUs (CUDA 12), through ``array_api_compat.cupy``.

CuPy arrays live in GPU memory only: the devices are ``"cuda:0"``, ``"cuda:1"``, ... (``"gpu:N"`` is a
synonym; ``"cuda"``/``"gpu"`` name CuPy's current device).  There is no ``"cpu"`` device: ``.numpy()``
gives a host copy, and the numpy backend computes on the CPU.  A ``cupy.cuda.Device`` passes as a
device; the ones the adapter hands out are hashable (gradtape keys its caches by device, and CuPy's own
are not).

What differs from the standard, and what this adapter does about it:

* ``array_api_compat.cupy``'s creation functions (``zeros``, ``arange``, ``*_like``...) and
  ``fft.fftfreq``/``rfftfreq`` ignore or refuse ``device=``: here they create on the device asked for.
  CuPy runs every kernel, and allocates, on its current device, reading other GPUs' memory through
  peer access.  On a machine with several GPUs the adapter therefore runs each namespace function (and
  its own forwards) on the GPU its arguments are on, and arrays on two GPUs are a ``ValueError``, as on
  every backend.  The Python operators a gradient rule applies to native arrays (``grad * x``) cannot
  be redirected: for gradients of work on another GPU, make it current (``with cupy.cuda.Device(1):``);
  a gradient that crosses GPUs leaves them to CuPy's peer access.
* CuPy wraps out-of-bounds integer-array indices around silently (NumPy and torch raise): ``x[idx]``,
  ``take`` and ``x[idx] = v`` check them here and raise ``IndexError`` as NumPy does, at the price of
  one device-to-host read per such call (``check_bounds = False`` turns it off).
* The scatter-add of indexing gradients is ``cupyx.scatter_add`` (CUDA atomics: the order of a sum
  over repeated indices, and so its last bit, may vary from run to run).  Its atomics take float32,
  float64, int32, uint32 and uint64; complex values are added as their real and imaginary parts,
  int64 as uint64 (the same bits modulo 2**64), narrower integers and bool in 32 bits.
* ``erf`` is ``cupyx.scipy.special.erf``; integer ``reciprocal`` is floating (float32), as on the
  other backends.
* DLPack: ``cupy.from_dlpack`` imports torch CUDA tensors and JAX GPU arrays without a copy, and they
  import CuPy arrays (through ``Tensor.__dlpack__``) the same way.  Arrays in host memory are copied
  to the GPU.
* CuPy has no autodiff (``native_grad``), no ``vmap`` and no compiler gradtape uses: ``gt.function``
  programs are replayed.

Loading checks that the GPU is usable (a CUDA driver, a device, the CUDA libraries CuPy compiles and
multiplies with), so that an installed CuPy on a machine without one fails there, in one line that
says what is missing and what to do.
"""

from __future__ import annotations

import functools
import types

import numpy as np

from gradtape.core import dtypes as _dt

from gradtape.core.backend import DLPACK_ERRORS, Backend
from gradtape.backends._indexing import integer_arrays
from gradtape.backends._values import check_new_int, eager, with_conventions

#: DLPack device types of GPU memory (CUDA, ROCm, CUDA managed): such an array cannot go through the host
_DLPACK_GPU = (2, 10, 13)
#: dtypes ``cupyx.scatter_add`` adds with atomics when the key has integer arrays
_ATOMIC = frozenset(("float32", "float64", "int32", "uint32", "uint64"))
#: dtypes without atomics, added in a wider one and cast back (the same result, modulo the width)
_WIDEN = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "uint32", "uint16": "uint32"}
#: the functions of ``array_api_compat.cupy`` that take ``device=`` but create on the current device
_CREATION = (
    "arange",
    "empty",
    "empty_like",
    "eye",
    "full",
    "full_like",
    "linspace",
    "ones",
    "ones_like",
    "zeros",
    "zeros_like",
)
_INSTALL = "python3 -m pip install cupy-cuda12x"
_INSTALL_LIBS = 'python3 -m pip install "cupy-cuda12x[ctk]"'


def _one_line(e, limit=300):
    """An exception's message on one line (CUDA and CuPy errors span several), shortened."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _no_gpu_error(version, cause):
    return RuntimeError(
        f"gradtape backend 'cupy': CuPy {version} is installed but no CUDA GPU is usable here ({cause}). "
        "It needs an NVIDIA GPU and a driver for CUDA 12 (`nvidia-smi` lists them); on this machine use "
        "the numpy, torch or jax backend"
    )


def _device_class(cupy):
    """``cupy.cuda.Device`` made hashable (by its id) and equal to CuPy's own for the same GPU."""
    base = cupy.cuda.Device

    class CudaDevice(base):
        """A CUDA device, as ``cupy.cuda.Device`` (a context manager, accepted wherever CuPy takes a
        device), hashable so that gradtape can key its caches by it."""

        def __hash__(self):
            return hash(("cuda", self.id))

        def __eq__(self, other):
            return isinstance(other, base) and other.id == self.id

        def __ne__(self, other):
            return not self.__eq__(other)

    return CudaDevice


#: namespace functions that compute nothing on arrays (the multi-GPU guard leaves them as they are)
_NO_GUARD = frozenset(("result_type", "can_cast", "isdtype", "finfo", "iinfo", "from_dlpack"))


def _copy_module(name, module):
    out = types.ModuleType(name, module.__doc__)
    out.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
    return out


def _on_device(fn, backend):
    """``fn`` creating on the device ``device=`` names (CuPy creates on its current device)."""

    @functools.wraps(fn)
    def f(*args, device=None, **kwargs):
        if device is None:
            return fn(*args, **kwargs)
        with backend.parse_device(device):
            return fn(*args, **kwargs)

    return f


def _same_device(fn, backend):
    """``fn`` run on the GPU its array arguments are on (CuPy would run it on its current device,
    reading other GPUs' memory where they have peer access): arrays on two GPUs are a ValueError, as
    they are on every backend.  Only on machines with several GPUs."""
    cls = backend.array_type
    current = backend._cupy.cuda.runtime.getDevice
    devs = backend._devs

    @functools.wraps(fn)
    def f(*args, **kwargs):
        dev = -1
        for group in (args, kwargs.values()):
            for a in group:
                for v in a if a.__class__ in (list, tuple) else (a,):
                    if v.__class__ is cls:
                        i = v.data.device_id
                        if dev < 0:
                            dev = i
                        elif i != dev:
                            raise ValueError(f"arrays on two devices: 'cuda:{dev}' and 'cuda:{i}'")
        if dev < 0 or dev == current():
            return fn(*args, **kwargs)
        with devs[dev]:
            return fn(*args, **kwargs)

    return f


def _checked(fn, cupyx):
    """``fn`` (a CuPy linalg function) raising ``numpy.linalg.LinAlgError`` on a singular input."""

    @functools.wraps(fn)
    def f(*args, **kwargs):
        with cupyx.errstate(linalg="raise"):
            return fn(*args, **kwargs)

    return f


def _broadcasting_solve(solve, cupy):
    """``solve(x1, x2)`` with the Array API's broadcasting: ``x2`` of shape ``(M,)`` is one vector
    for every matrix of ``x1``, and the batch dimensions of ``x1`` and ``x2`` broadcast (CuPy wants
    them equal)."""

    @functools.wraps(solve)
    def f(x1, x2, /):
        if x2.ndim == 1:
            column = cupy.broadcast_to(x2[:, None], x1.shape[:-2] + (x2.shape[0], 1))
            return f(x1, column)[..., 0]
        batch = np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
        return solve(cupy.broadcast_to(x1, batch + x1.shape[-2:]), cupy.broadcast_to(x2, batch + x2.shape[-2:]))

    return f


def _namespace(compat, backend):
    """``array_api_compat.cupy``, with ``device=`` honoured by the creation functions and ``fftfreq``,
    and, on a machine with several GPUs, every function run on its arguments' GPU."""
    ns = _copy_module("gradtape.backends.cupy.xp", compat)
    ns.__array_api_version__ = compat.__array_api_version__
    ns.__array_namespace_info__ = compat.__array_namespace_info__
    for name in _CREATION:
        setattr(ns, name, _on_device(getattr(compat, name), backend))
    ns.fft = _copy_module("gradtape.backends.cupy.xp.fft", compat.fft)
    for name in ("fftfreq", "rfftfreq"):  # (compat refuses any device but "cpu" there)
        setattr(ns.fft, name, _on_device(getattr(compat.fft, name), backend))
    ns.linalg = _copy_module("gradtape.backends.cupy.xp.linalg", compat.linalg)
    import cupyx

    # a singular matrix is an error, as on NumPy and torch (CuPy returns inf / nan unless asked to
    # check, which reads cuSOLVER's status back from the GPU: one sync a call)
    for name in ("inv", "cholesky"):
        setattr(ns.linalg, name, _checked(getattr(compat.linalg, name), cupyx))
    ns.linalg.solve = _checked(_broadcasting_solve(compat.linalg.solve, backend._cupy), cupyx)
    if backend._count > 1:
        for module in (ns, ns.fft, ns.linalg):
            for name, fn in list(vars(module).items()):
                if callable(fn) and not isinstance(fn, type) and not name.startswith("_") and name not in _NO_GUARD:
                    setattr(module, name, _same_device(fn, backend))
    return ns


class CupyBackend(Backend):
    name = "cupy"
    install_hint = _INSTALL
    python_scalars = True  # as in NumPy, a Python scalar of the array's kind keeps the array's dtype
    #: check integer-array indices (CuPy would wrap them around): one device-to-host read per such index
    check_bounds = True

    def __init__(self):
        super().__init__()
        self.overrides = {
            "getitem": self._getitem,
            "take": self._take,
            "reciprocal": self._reciprocal,
            "einsum": self._einsum,
        }

    def op_impl(self, opdef):
        # a cast and an integer division by zero read one reduction on the host (docs/conventions.md)
        return with_conventions(self, opdef.name, super().op_impl(opdef), eager)

    # ------------------------------------------------------------------ loading
    def load(self):
        try:
            import cupy
        except ImportError as e:
            raise ImportError(
                f"gradtape backend 'cupy': CuPy failed to import ({_one_line(e)}); install the CUDA 12 build "
                f"with `{_INSTALL}`"
            ) from None
        version = getattr(cupy, "__version__", "?")
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # CUDARuntimeError: no driver, a driver too old for CUDA 12, no device
            raise _no_gpu_error(version, _one_line(e)) from None
        if count < 1:
            raise _no_gpu_error(version, "CUDA reports no device")
        try:  # a kernel (NVRTC compiles it) and a matrix product (cuBLAS): what a pip install can lack
            a = cupy.arange(4, dtype=cupy.float64).reshape(2, 2)
            float((a @ a + 1.0).sum())
        except Exception as e:
            cause = f"{type(e).__name__}: {_one_line(e)}"
            libs = any(w in cause.lower() for w in ("nvrtc", "cublas", "libcu", "cannot open shared object"))
            how = (
                f"install the CUDA 12 libraries CuPy loads with `{_INSTALL_LIBS}` (or a CUDA 12 toolkit)"
                if libs
                else "check the GPU with `nvidia-smi` and CuPy with `python3 -c 'import cupy; cupy.show_config()'`"
            )
            raise RuntimeError(
                f"gradtape backend 'cupy': CuPy {version} found {count} GPU(s) but cannot compute on them ({cause}); "
                f"{how}"
            ) from None
        import array_api_compat.cupy as compat
        import cupyx
        import cupyx.scipy.special

        self._cupy = cupy
        self._scatter_add = cupyx.scatter_add
        self._erf = cupyx.scipy.special.erf
        self.array_type = cupy.ndarray
        self._count = count
        self._devs = [_device_class(cupy)(i) for i in range(count)]
        self._owned = (cupy.cuda.memory.PooledMemory, cupy.cuda.memory.Memory)
        if count > 1:  # what computes outside the namespace runs on its arguments' GPU too
            self.overrides = {k: _same_device(f, self) for k, f in self.overrides.items()}
            self._erf = _same_device(self._erf, self)
        return _namespace(compat, self)

    def _extra_dtype_aliases(self):
        # the namespace's dtypes are NumPy's scalar types; CuPy arrays report NumPy dtypes
        for d in _dt.ALL_DTYPES:
            nd = np.dtype(d.name)
            self._to_native[d] = nd
            self._from_native[nd] = d

    # ------------------------------------------------------------------ devices
    def default_device(self):
        """CuPy's current device (``cupy.cuda.Device(n).use()`` or ``with cupy.cuda.Device(n):`` set it)."""
        return self._devs[self._cupy.cuda.runtime.getDevice()]

    def parse_device(self, device):
        if device is None:
            return self.default_device()
        if isinstance(device, self._cupy.cuda.Device):
            if not 0 <= device.id < self._count:
                raise ValueError(f"backend 'cupy' has no device {device!r} (devices: {self.devices()})")
            return self._devs[device.id]
        if not isinstance(device, str):
            raise TypeError(
                f"backend 'cupy': a device is a string ('cuda:0', 'gpu:1') or a cupy.cuda.Device, "
                f"not {type(device).__name__}"
            )
        kind, _, idx = device.strip().lower().partition(":")
        if kind in ("cuda", "gpu"):
            if not idx:
                return self.default_device()
            if idx.isdigit() and int(idx) < self._count:
                return self._devs[int(idx)]
        elif kind == "cpu":
            raise ValueError(
                f"backend 'cupy' has no device {device!r}: CuPy arrays live in GPU memory (devices: "
                f"{self.devices()}); `.numpy()` gives a host copy, and the numpy backend computes on the CPU"
            )
        raise ValueError(f"backend 'cupy' has no device {device!r} (devices: {self.devices()})")

    def device_of(self, x):
        return self._devs[x.data.device_id]

    def device_str(self, device) -> str:
        if isinstance(device, str):
            device = self.parse_device(device)
        return f"cuda:{device.id}"

    def devices(self):
        return [f"cuda:{i}" for i in range(self._count)]

    def _move(self, x, device):
        """A copy on ``device`` (GPU to GPU; CuPy copies onto its current device), ``x`` itself where it is."""
        if x.data.device_id == device.id:
            return x
        with device:
            return self._cupy.asarray(x)

    # ------------------------------------------------------------------ conversion
    def _cast_and_move(self, x, native_dtype, device):
        target = x.data.device_id if device is None else device.id
        if (native_dtype is None or x.dtype == native_dtype) and target == x.data.device_id:
            return x
        with self._devs[target]:
            return self._cupy.asarray(x, dtype=native_dtype)  # one copy at most, onto the target

    def _new_array(self, value, native_dtype, device):
        """A host value copied to ``device`` (CuPy stages NumPy arrays through pinned memory, so the
        source may change afterwards); objects with ``__cuda_array_interface__`` are not copied."""
        check_new_int(self, value, native_dtype)  # (NumPy's OverflowError, in its words, on every backend)
        with device:
            return self._cupy.asarray(value, dtype=native_dtype)

    def to_numpy(self, x):
        return self._cupy.asnumpy(x)

    def from_dlpack(self, obj, device=None):
        """``cupy.from_dlpack`` for arrays in GPU memory (torch CUDA tensors, JAX GPU arrays): no copy,
        and an error naming the cause where DLPack refuses one (never a trip through the host).  Arrays in
        host memory, and objects without DLPack, are copied to the GPU."""
        if self.is_native(obj):
            out = obj
        elif hasattr(obj, "__dlpack_device__") and obj.__dlpack_device__()[0] in _DLPACK_GPU:
            try:
                out = self._cupy.from_dlpack(obj)
            except DLPACK_ERRORS as e:
                raise ValueError(
                    f"backend 'cupy': from_dlpack could not import this {type(obj).__name__} from GPU memory: "
                    f"{_one_line(e)}"
                ) from e
        else:
            out = self.asarray(np.asarray(obj))
        return out if device is None else self.to_device(out, device)

    def update_inplace(self, name, x, delta):
        # memory CuPy allocated (not a DLPack import's, nor host memory), not a view of another array
        cupy = self._cupy
        if (
            x.__class__ is cupy.ndarray
            and x.base is None
            and delta.__class__ is cupy.ndarray
            and delta.dtype == x.dtype
            and delta.data.device_id == x.data.device_id
            and type(x.data.mem) in self._owned
        ):
            with self._devs[x.data.device_id]:
                (cupy.add if name == "add" else cupy.subtract)(x, delta, out=x)
            return True
        return False

    def fix_output(self, out):
        cupy = self._cupy
        if isinstance(out, cupy.ndarray):  # a subclass
            return out.view(type=cupy.ndarray)
        return cupy.asarray(out)  # a NumPy scalar or array, a Python number

    # ------------------------------------------------------------------ indexing
    def _check_index(self, k, size, axis):
        """IndexError where the integer array ``k`` indexes outside an axis of ``size``."""
        cupy = self._cupy
        if k.dtype.kind == "u":
            bad = k.astype(cupy.uint64, copy=False) >= size
        else:
            k64 = k.astype(cupy.int64, copy=False)
            bad = (k64 < -size) | (k64 >= size)
        if bool(bad.any()):  # (the one device-to-host read)
            first = int(k[bad].ravel()[0])
            raise IndexError(f"index {first} is out of bounds for axis {axis} with size {size}")

    def _check_key(self, shape, key):
        """Check the integer arrays of a native key against the axes they index."""
        cls = self.array_type
        for k, axis in integer_arrays(shape, key, lambda k: k.__class__ is cls):
            self._check_index(k, shape[axis], axis)

    def _einsum(self, *arrays, subscripts):
        """The op ``einsum`` by the library's own einsum."""
        return self._cupy.einsum(subscripts, *arrays)

    def _getitem(self, x, *, key):
        """``x[key]``, integer-array indices checked first (CuPy wraps them around)."""
        if self.check_bounds:
            self._check_key(x.shape, key)
        return x[key]

    def _take(self, x, indices, *, axis):
        if self.check_bounds and indices.size:
            self._check_index(indices, x.shape[axis], axis)
        return self._cupy.take(x, indices, axis=axis)

    def _reciprocal(self, x, /):
        """``1 / x``: CuPy's reciprocal of integers is integer division; the standard's is floating (float32
        here, as on the other backends)."""
        if x.dtype.kind in "biu":
            x = x.astype(self._cupy.float32)
        return self._cupy.reciprocal(x)

    def index_add(self, shape, dtype, key, values):
        """``zeros(shape)`` with ``values`` added at ``key``, on ``values``' device.  Keys without integer
        arrays select each position once (a plain assignment); with them ``cupyx.scatter_add`` adds
        repeated positions with atomics, in a dtype the atomics take (see the module's docstring)."""
        cupy = self._cupy
        nd = np.dtype(self.dtype_to_native(dtype))
        shape = tuple(int(s) for s in shape)
        dev = self._devs[values.data.device_id] if isinstance(values, cupy.ndarray) else self.device
        with dev:
            if not isinstance(values, cupy.ndarray):
                values = cupy.asarray(values, dtype=nd)
            elif values.dtype != nd:
                values = values.astype(nd)
            cls = self.array_type
            if not any(k.__class__ is cls and k.dtype.kind != "b" for k in key):
                out = cupy.zeros(shape, dtype=nd)
                out[key] = values
                return out
            if nd.name in _ATOMIC:
                out = cupy.zeros(shape, dtype=nd)
                self._scatter_add(out, key, values)
                return out
            if nd.kind == "c":
                part = np.dtype(f"float{nd.itemsize * 4}")
                re = cupy.zeros(shape, dtype=part)
                im = cupy.zeros(shape, dtype=part)
                self._scatter_add(re, key, values.real)
                self._scatter_add(im, key, values.imag)
                out = re.astype(nd)
                out += im.astype(nd) * 1j
                return out
            if nd.name == "int64":
                out = cupy.zeros(shape, dtype=cupy.uint64)
                self._scatter_add(out, key, values.view(cupy.uint64))
                return out.view(cupy.int64)
            wide = np.dtype(_WIDEN[nd.name])
            out = cupy.zeros(shape, dtype=wide)
            self._scatter_add(out, key, values.astype(wide))
            return out.astype(nd)

    def setitem(self, x, key, value):
        if self.check_bounds:
            self._check_key(x.shape, key)
        with self._devs[x.data.device_id]:
            out = x.copy()
            out[key] = value
        return out

    def erf(self, x):
        if x.dtype.kind == "c":  # (cupyx.scipy.special.erf is real only: SciPy's, on the host)
            import scipy.special

            with self._devs[x.data.device_id]:
                return self._cupy.asarray(scipy.special.erf(self._cupy.asnumpy(x)))
        return self._erf(x)
