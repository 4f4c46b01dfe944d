"""The PyTorch backend (CPU and CUDA).

The namespace is ``array_api_compat.torch`` with its most called wrappers replaced by direct
``torch`` calls where the wrapper's work is provably a no-op: its two-argument functions fix type
promotion only when one argument is a 0-d tensor of another dtype, and ``matmul``/``tensordot``/
``vecdot`` only when the dtypes differ.  Each fast function checks exactly that condition and
otherwise defers to the compat wrapper, so the semantics are the standard's either way.

Devices: ``"cpu"``, ``"cuda"`` (the current CUDA device), ``"cuda:1"``; ``"gpu"``/``"gpu:1"`` are
accepted as synonyms.  A ``torch.device`` passes through.  ``Tensor.device`` reads ``"cpu"`` or
``"cuda:N"``.
"""

from __future__ import annotations

import importlib
import math
import types
import warnings

import numpy as np

from gradtape.backends._indexing import advanced_first
from gradtape.backends._masks import ALL_ZERO, NO_ZERO, SOME_ZERO, unmasked_where_no_zero
from gradtape.backends._values import check_new_int, with_conventions
from gradtape.core.backend import Backend

# name: (torch function name, compat turns a scalar x1 into a tensor, ... a scalar x2)
# (from array_api_compat/torch/_aliases.py: where compat converts scalars, torch rejects them)
_BINARY = {
    "add": ("add", False, False),
    "subtract": ("subtract", False, False),
    "multiply": ("multiply", False, False),
    "divide": ("divide", False, False),
    "pow": ("pow", False, False),
    "remainder": ("remainder", False, False),
    "floor_divide": ("floor_divide", False, False),
    "maximum": ("maximum", True, True),
    "minimum": ("minimum", True, True),
    "equal": ("eq", True, False),
    "not_equal": ("not_equal", True, False),
    "greater": ("greater", True, False),
    "greater_equal": ("greater_equal", True, False),
    "less": ("less", True, False),
    "less_equal": ("less_equal", True, False),
    "atan2": ("atan2", True, True),
    "hypot": ("hypot", True, True),
    "logaddexp": ("logaddexp", True, True),
    "copysign": ("copysign", True, False),
    "nextafter": ("nextafter", True, True),
    "logical_and": ("logical_and", True, True),
    "logical_or": ("logical_or", True, True),
    "logical_xor": ("logical_xor", True, True),
}


#: the arithmetic whose Python-scalar operand may be a cached 0-d tensor of the other operand's
#: dtype (:func:`_scalar_operand`): the same bits, half the time
_SCALAR_CACHED = frozenset({"add", "subtract", "multiply", "divide"})
#: Python ints at most this large in magnitude are exact in float32's and float64's cached 0-d tensors
_EXACT_INT = 2**24


def _scalar_operand(torch):
    """``operand(v, x) -> s``: for a Python float or int ``v`` beside a CPU tensor ``x`` of float32 or
    float64, a cached 0-d CPU tensor of ``v`` in ``x``'s dtype; else ``v`` itself.

    torch turns a Python scalar into a new 0-d "wrapped number" tensor at every call (``t * 3.0``
    costs about twice ``t * s``, ``s`` a 0-d tensor); for ``add``, ``subtract``, ``multiply`` and
    ``divide`` on float32 / float64 CPU tensors a 0-d tensor of the same dtype gives the same
    result bit for bit (the kernel reads the wrapped scalar in the tensor's dtype too; the same
    result type: a 0-d operand never promotes a tensor of its own kind).  A value is cached the
    second time it is met (making the tensor costs about what it saves once: a value met once, as
    a scalar computed afresh at each step, stays a Python scalar at the cost of a set lookup).
    Zero is never cached (its key would not tell +0.0 from -0.0), nor an int that float32 cannot
    hold exactly; both tables are bounded (NaN, never equal to itself, never hits them).
    ``tests/test_adapters.py`` checks the bits."""
    exact = (torch.float32, torch.float64)
    cache = dict()  # (value, dtype) -> 0-d tensor
    seen = set()  # (value, dtype) met once

    def operand(v, x):
        if not v or (v.__class__ is int and not -_EXACT_INT <= v <= _EXACT_INT):
            return v
        d = x.dtype
        key = (v, d)
        s = cache.get(key)
        if s is None:
            if d not in exact or not x.is_cpu:
                return v
            if key not in seen:
                if len(seen) >= 256:
                    seen.clear()
                seen.add(key)
                return v
            if len(cache) >= 256:
                cache.clear()
            s = cache[key] = torch.tensor(v, dtype=d)
        elif not x.is_cpu:
            return v
        return s

    return operand


def _fast_binary(torch, fn, slow, scalar_x1_slow, scalar_x2_slow, operand=None):
    """``fn(x1, x2)`` straight to torch when compat's wrapper would not change the arguments;
    ``operand``: a Python-scalar operand's cached 0-d tensor (:func:`_scalar_operand`)."""
    T = torch.Tensor

    def f(x1, x2, /):
        if x1.__class__ is T:
            if x2.__class__ is T:
                if x1.dtype is x2.dtype or (x1.ndim and x2.ndim):
                    return fn(x1, x2)
            elif not scalar_x2_slow and x2.__class__ in (float, int):
                return fn(x1, x2) if operand is None else fn(x1, operand(x2, x1))
        elif x2.__class__ is T and not scalar_x1_slow and x1.__class__ in (float, int):
            return fn(x1, x2) if operand is None else fn(operand(x1, x2), x2)
        return slow(x1, x2)

    f.__name__ = f.__qualname__ = slow.__name__
    f.__doc__ = slow.__doc__
    return f


def _namespace(torch):
    """``array_api_compat.torch`` with direct torch calls on its hot paths (same semantics)."""
    import array_api_compat.torch as compat

    ns = types.ModuleType(
        "gradtape.backends.torch.xp",
        "array_api_compat.torch, with direct torch calls where compat's wrapper would be a no-op",
    )
    ns.__dict__.update({k: v for k, v in vars(compat).items() if not k.startswith("__")})
    ns.__array_api_version__ = compat.__array_api_version__
    ns.__array_namespace_info__ = compat.__array_namespace_info__
    T = torch.Tensor
    operand = _scalar_operand(torch)
    for name, (tname, s1, s2) in _BINARY.items():
        cached = operand if name in _SCALAR_CACHED else None
        setattr(ns, name, _fast_binary(torch, getattr(torch, tname), getattr(compat, name), s1, s2, cached))

    def _same(f, slow):
        def g(x1, x2, /, **kw):
            if x1.__class__ is T and x2.__class__ is T and x1.dtype is x2.dtype:
                return f(x1, x2, **kw)
            return slow(x1, x2, **kw)

        g.__name__ = g.__qualname__ = slow.__name__
        g.__doc__ = slow.__doc__
        return g

    ns.matmul = _same(torch.matmul, compat.matmul)

    def tensordot(x1, x2, /, *, axes=2):
        if x1.__class__ is T and x2.__class__ is T and x1.dtype is x2.dtype:
            return torch.tensordot(x1, x2, dims=axes)
        return compat.tensordot(x1, x2, axes=axes)

    ns.tensordot = tensordot

    def vecdot(x1, x2, /, *, axis=-1):
        # torch.linalg.vecdot conjugates x1 as the standard does; with a negative axis, moving the
        # axis last before broadcasting (compat's way) and after it are the same thing.  It takes
        # floating and complex tensors only (compat's matmul also integers)
        if (
            axis < 0
            and x1.__class__ is T
            and x2.__class__ is T
            and x1.dtype is x2.dtype
            and (x1.dtype.is_floating_point or x1.dtype.is_complex)
        ):
            if x1.shape[axis] != x2.shape[axis]:
                raise ValueError("x1 and x2 must have the same size along the given axis")
            return torch.linalg.vecdot(x1, x2, dim=axis)
        return compat.vecdot(x1, x2, axis=axis)

    ns.vecdot = vecdot

    def where(condition, x1, x2, /):
        c1 = x1.__class__
        c2 = x2.__class__
        if c1 is T:
            if (c2 is T and x1.dtype is x2.dtype) or c2 is float or c2 is int:
                return torch.where(condition, x1, x2)
        elif c2 is T and (c1 is float or c1 is int):
            # (a Python scalar beside a tensor, the masks' ``where(zero, 0, x)``: compat's where passes
            # it to torch.where as it is; one Python call fewer)
            return torch.where(condition, x1, x2)
        return compat.where(condition, x1, x2)

    ns.where = where

    def expand_dims(x, /, axis):
        if axis.__class__ is int:
            return torch.unsqueeze(x, axis)
        return compat.expand_dims(x, axis=axis)

    ns.expand_dims = expand_dims

    def squeeze(x, /, axis):
        if axis.__class__ is int:
            if x.shape[axis] != 1:
                raise ValueError("squeezed dimensions must be equal to 1")
            return torch.squeeze(x, axis)
        return compat.squeeze(x, axis=axis)

    ns.squeeze = squeeze

    def permute_dims(x, /, axes):
        return torch.permute(x, axes)

    ns.permute_dims = permute_dims

    def _no_identity(f):
        # a max / min over an empty axis: torch raises IndexError, NumPy (and so the other backends)
        # ValueError; gradtape raises the same class everywhere
        def g(x, /, **kw):
            try:
                return f(x, **kw)
            except IndexError as e:
                if x.numel() != 0:
                    raise
                raise ValueError(f"zero-size array to reduction operation {f.__name__} which has no identity") from e

        g.__name__ = g.__qualname__ = f.__name__
        g.__doc__ = f.__doc__
        return g

    ns.max = _no_identity(compat.max)
    ns.min = _no_identity(compat.min)
    return ns


#: ``torch.special``'s names for SciPy's special functions, where they differ
_SPECIAL_NAMES = {"psi": "digamma"}


#: a CPU tensor of at most this many elements and at most one axis is read for the masks' zero test as
#: a Python list (``tolist``: ~1 µs), a larger one through NumPy's view of its memory (~3 µs)
_LISTED = 64


def _mask_tests(torch):
    """``(readable, zeros, local)`` for :func:`unmasked_where_no_zero` on PyTorch: a tensor's values
    are read for the masks' zero test only where that costs no synchronisation and breaks no trace
    -- ``readable()``, once per call: outside ``torch.compile`` (asked first: a compiler sees a
    constant there and traces nothing else), every ``TorchDispatchMode`` (``make_fx``'s tracer,
    which ``gt.function(jit_compile=True)`` compiles through: a value read there would fix the traced
    call's branch in the compiled program; FakeTensor's mode) and every ``torch.func`` transform
    (``gt.vmap``'s batched tensors); ``local(x)``: on the CPU and real (torch's product of a Python
    float and a complex tensor differs from the masks' in the sign of a NaN).  ``zeros(x)`` reads a
    local tensor's values as a Python list where it is small and has at most one axis, else through
    NumPy's view of its memory (half of torch's own count and ``item()``), else by torch's own count
    (a tensor that requires grad, a conjugate or negative view, bfloat16); a tensor that refuses to
    be read (a transform's tensor outside its transform) takes the masks."""
    compiling = torch.compiler.is_compiling
    modes = torch._C._len_torch_dispatch_stack
    level = torch._C._functorch.maybe_current_level
    np_count = np.count_nonzero
    torch_count = torch.count_nonzero

    def readable():
        return not compiling() and not modes() and level() is None

    def local(x):
        return x.is_cpu and not x.is_complex()

    def zeros(x):
        if not local(x):
            return None
        try:
            if x.ndim < 2 and x.numel() <= _LISTED:
                v = x.tolist()
                if v.__class__ is not list:  # (0-d: a Python number; NaN is true, as it is nonzero)
                    return NO_ZERO if v else ALL_ZERO
                if 0 not in v:  # (-0.0 == 0)
                    return NO_ZERO
                return SOME_ZERO if any(v) else ALL_ZERO
            try:
                n = np_count(x.numpy())
            except (RuntimeError, TypeError):
                n = int(torch_count(x))
        except RuntimeError:
            return None
        return NO_ZERO if n == x.numel() else ALL_ZERO if not n else SOME_ZERO

    return readable, zeros, local


def _gamma(torch):
    """SciPy's ``gamma`` (torch has ``gammaln`` only): the sign of gamma(x) times ``exp(gammaln(x))``;
    NaN at the poles 0, -1, -2, ..."""

    def gamma(x, /):
        s = torch.where((x > 0) | (torch.remainder(torch.floor(x), 2) == 0), 1.0, -1.0).to(x.dtype)
        v = s * torch.exp(torch.special.gammaln(x))
        return torch.where((x <= 0) & (x == torch.floor(x)), torch.full_like(x, math.nan), v)

    return gamma


def _rel_entr(torch):
    """SciPy's ``rel_entr`` (not in ``torch.special``): ``x log(x / y)`` for x, y > 0; 0 at x = 0,
    y >= 0; inf otherwise; NaN where an input is."""

    def rel_entr(x, y, /):
        pos = (x > 0) & (y > 0)
        one = torch.ones_like(x)
        log_ratio = torch.log(torch.where(pos, x, one)) - torch.log(torch.where(pos, y, one))
        v = torch.where(pos, x * log_ratio, torch.full_like(x, math.inf))
        v = torch.where((x == 0) & (y >= 0), torch.zeros_like(v), v)
        return torch.where(torch.isnan(x) | torch.isnan(y), torch.full_like(v, math.nan), v)

    return rel_entr


#: SciPy's special functions that torch lacks, composed of its own
_SPECIAL_COMPOSED = {"gamma": _gamma, "rel_entr": _rel_entr}


def _negative_step(key):
    """Whether a key has a slice with a negative step (which torch's indexing refuses)."""
    for k in key:
        if k.__class__ is slice and k.step is not None and k.step < 0:
            return True
    return False


def _other_device(a, b):
    """Whether tensors ``a`` and ``b`` live on two devices (both on the CPU: no device objects made)."""
    return not (a.is_cpu and b.is_cpu) and a.device != b.device


class TorchBackend(Backend):
    name = "torch"
    install_hint = "python3 -m pip install torch==2.13.0"
    python_scalars = True
    supports_vmap = True
    supports_native_grad = True
    floating_ints_to_float32 = True  # (torch's default dtype, float32: sin(int) is float32)

    def __init__(self):
        super().__init__()
        self.overrides = {"getitem": self._getitem, "einsum": self._einsum}
        #: the ops whose forward is computed with torch's fused gradient kernels (what torch.autograd
        #: runs): op name -> ``make(forward)``, given the op's own forward (for the inputs the kernels
        #: do not take), returning the callable.  Ops of their own (``tanh_grad``, ...), so a trace
        #: records the kernel's call and a replayed step gives the eager step's bits
        self.fused = {
            "tanh_grad": self._fused_tanh_grad,
            "sigmoid_grad": self._fused_sigmoid_grad,
            "sparse_softmax_cross_entropy_with_logits_grad": self._fused_sparse_xent_grad,
            "sparse_softmax_cross_entropy_with_logits": self._fused_sparse_xent,
        }
        self._special = {}

    def _host(self, x):
        """``x``'s values as a NumPy array sharing its memory, on the CPU (None elsewhere)."""
        if x.device.type != "cpu" or x.requires_grad:
            return None
        return x.numpy()

    def _readable(self, x):
        """Whether ``x``'s values can be read here: not while ``make_fx`` or ``torch.compile`` trace a
        ``gt.function``'s program (a read there would fix the value of the traced call in the graph)."""
        torch = self._torch
        if torch.compiler.is_compiling():
            return False
        get_proxy_mode = self._get_proxy_mode
        if get_proxy_mode is None:
            get_proxy_mode = self._get_proxy_mode = importlib.import_module(
                "torch.fx.experimental.proxy_tensor"
            ).get_proxy_mode
        return get_proxy_mode() is None

    _get_proxy_mode = None

    def load(self):
        import torch

        self._torch = torch
        self.array_type = torch.Tensor
        self._cpu = torch.device("cpu")
        self._mask_tests = _mask_tests(torch)
        return _namespace(torch)

    def op_impl(self, opdef):
        make = self.fused.get(opdef.name)
        if make is not None:
            return make(super().op_impl(opdef))
        impl = super().op_impl(opdef)
        impl = with_conventions(self, opdef.name, impl, self._readable, host=self._host, signed_zeros=("remainder",))
        if opdef.name in self.overrides:
            return impl
        # the NaN-safe masks as the plain quotient / product where an eager CPU tensor has no zero to
        # mask (two or three torch calls where the masks make four to six)
        readable, zeros, local = self._mask_tests
        torch = self._torch
        unmasked = unmasked_where_no_zero(opdef.name, impl, torch.Tensor, zeros, torch.zeros_like, readable, local)
        return impl if unmasked is None else unmasked

    def from_dlpack(self, obj, device=None):
        """As the base, but a NumPy array with negative strides (``a[::-1]``) is made contiguous
        first: torch's ``from_dlpack`` aborts the whole process on one (torch 2.13).  That one is a
        copy (DLPack cannot share such memory with torch)."""
        if isinstance(obj, np.ndarray) and any(st < 0 for st in obj.strides):
            obj = np.ascontiguousarray(obj)
        return super().from_dlpack(obj, device)

    # ------------------------------------------------------------------ devices
    def default_device(self):
        return self._cpu

    def parse_device(self, device):
        torch = self._torch
        if device is None:
            return self._cpu
        if isinstance(device, torch.device):
            return device
        if not isinstance(device, str):
            raise TypeError(
                f"backend 'torch': a device is a string ('cpu', 'cuda:1') or a torch.device, "
                f"not {type(device).__name__}"
            )
        kind, _, idx = device.strip().lower().partition(":")
        if kind == "cpu":
            return self._cpu
        if kind in ("cuda", "gpu"):
            if not torch.cuda.is_available():
                raise ValueError(
                    f"backend 'torch' has no device {device!r}: CUDA is not available here (devices: {self.devices()})"
                )
            i = int(idx) if idx else torch.cuda.current_device()
            if not 0 <= i < torch.cuda.device_count():
                raise ValueError(f"backend 'torch' has no device {device!r} (devices: {self.devices()})")
            return torch.device("cuda", i)
        if kind == "mps" and getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        raise ValueError(f"backend 'torch' has no device {device!r} (devices: {self.devices()})")

    def device_of(self, x):
        return x.device

    def device_str(self, device) -> str:
        torch = self._torch
        if not isinstance(device, torch.device):
            device = self.parse_device(device) if isinstance(device, str) else torch.device(device)
        if device.type == "cpu":
            return "cpu"
        index = device.index
        if index is None and device.type == "cuda":
            index = torch.cuda.current_device()
        return device.type if index is None else f"{device.type}:{index}"

    def devices(self):
        torch = self._torch
        out = ["cpu"]
        if torch.cuda.is_available():
            out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        return out

    def _move(self, x, device):
        return x.to(device)

    # ------------------------------------------------------------------ conversion
    def _cast_and_move(self, x, native_dtype, device):
        if (native_dtype is None or x.dtype == native_dtype) and (device is None or x.device == device):
            return x
        return x.to(device=device, dtype=native_dtype)  # one call, one copy at most

    def _new_array(self, value, native_dtype, device):
        """NumPy arrays share memory through ``torch.from_numpy`` (read-only or negatively strided
        ones, which torch cannot wrap, are copied first); Python scalars go to ``torch.tensor``;
        other DLPack producers through DLPack; anything else through ``np.asarray``."""
        if isinstance(value, np.ndarray):
            if not value.flags.writeable or any(s < 0 for s in value.strides):
                value = value.copy()
            out = self._torch.from_numpy(value)
            if (native_dtype is not None and out.dtype != native_dtype) or device.type != "cpu":
                out = out.to(device=device, dtype=native_dtype)
            return out
        if isinstance(value, (bool, int, float, complex)):
            check_new_int(self, value, native_dtype)  # (torch wraps a Python int around)
            return self._torch.tensor(value, dtype=native_dtype, device=device)
        if not hasattr(value, "__len__") and hasattr(value, "__dlpack__"):
            return self._cast_and_move(self.from_dlpack(value), native_dtype, device)
        return self._new_array(np.asarray(value), native_dtype, device)

    def to_numpy(self, x):
        if x.device.type != "cpu":
            x = x.cpu()
        if x.requires_grad:
            x = x.detach()
        if x.is_conj():
            x = x.resolve_conj()
        if x.is_neg():
            x = x.resolve_neg()
        return x.numpy()

    def update_inplace(self, name, x, delta, scale=None):
        torch = self._torch
        if (
            x.__class__ is not torch.Tensor
            or x._base is not None
            or x.requires_grad
            or not self._beside(delta, x)
            or (scale is not None and not self._fits_scale(scale, x))
        ):
            return False
        try:
            use_count = torch._C._storage_Use_Count
            s = x.untyped_storage()
            # memory torch allocated (not a NumPy array's or a DLPack import's), shared by no view
            if not s.resizable() or use_count(s._cdata) != self._sole_storage():
                return False
        except (AttributeError, RuntimeError, TypeError):
            return False
        if scale is not None:  # (scaled_update's kernel, in place: no product allocated)
            x.addcmul_(delta, scale, value=1 if name == "add" else -1)
        elif name == "add":
            x.add_(delta)
        else:
            x.sub_(delta)
        return True

    def scaled_update(self, name, x, delta, scale):
        """``x ± delta * scale`` as one kernel, ``addcmul`` (``update_inplace``'s, out of place: the same
        bits); the namespace's product and sum for operands it does not take."""
        if x.__class__ is self._torch.Tensor and self._beside(delta, x) and self._fits_scale(scale, x):
            return self._torch.addcmul(x, delta, scale, value=1 if name == "add" else -1)
        return super().scaled_update(name, x, delta, scale)

    def _beside(self, a, x):
        """Whether ``a`` is a tensor of ``x``'s dtype on its device (an operand of its update's kernels)."""
        return a.__class__ is self._torch.Tensor and a.dtype == x.dtype and not _other_device(a, x)

    def _fits_scale(self, scale, x):
        """Whether ``scale`` is a 0-d tensor of ``x``'s dtype on its device (addcmul's operand)."""
        return self._beside(scale, x) and scale.ndim == 0

    def _sole_storage(self):
        n = getattr(self, "_sole_use_count", None)
        if n is None:
            t = self._torch.ones(1)
            n = self._sole_use_count = self._torch._C._storage_Use_Count(t.untyped_storage()._cdata)
        return n

    def fix_output(self, out):
        torch = self._torch
        if isinstance(out, torch.Tensor):  # a subclass (nn.Parameter) or a tensor needing grad
            return out.detach().as_subclass(torch.Tensor)
        return torch.as_tensor(np.asarray(out))

    # ------------------------------------------------------------------ indexing
    def _numpy_order(self, x, key):
        """``x`` and ``key`` with NumPy's placement of advanced-index dimensions (torch applies the
        integers of a key with arrays first, as basic indices: see ``gradtape/backends/_indexing.py``)."""
        torch = self._torch
        if key.__class__ is not tuple:
            return x, key
        moved = advanced_first(
            key,
            x.ndim,
            lambda k: isinstance(k, torch.Tensor),
            lambda k: k.ndim if k.dtype == torch.bool else 1,
        )
        if moved is None:
            return x, key
        perm, key = moved
        return x.permute(perm), key

    def _flat_positions(self, shape, key, device):
        """``arange(n).reshape(shape)[key]``: for each element that ``key`` selects, its flat position.
        Keys with negative-step slices (which torch refuses) are resolved by NumPy on the host."""
        torch = self._torch
        n = 1
        for s in shape:
            n *= int(s)
        if not _negative_step(key):
            pos, key = self._numpy_order(torch.arange(n, device=device).reshape(tuple(shape)), key)
            return pos[key]
        host = tuple(self.to_numpy(k) if isinstance(k, torch.Tensor) else k for k in key)
        # a copy, not ascontiguousarray: a selection of one element counts as contiguous and
        # keeps its negative stride, which torch.from_numpy refuses
        flat = np.arange(n).reshape(tuple(shape))[host].copy()
        return torch.from_numpy(flat).to(device)

    def _einsum(self, *arrays, subscripts):
        """The op ``einsum`` by torch's einsum, in its operands' (promoted) dtype: torch sums integers
        in int64, NumPy keeps their dtype."""
        out = self._torch.einsum(subscripts, *arrays)
        return out if out.dtype == arrays[0].dtype else out.to(arrays[0].dtype)

    # ------------------------------------------------------------------ fused gradient kernels
    def _fused_tanh_grad(self, forward):
        """``tanh_grad(y, dy) = dy * (1 - y^2)`` as ``aten.tanh_backward(dy, y)``: one kernel where
        the op's forward makes three."""
        return self._fused_output_backward(self._torch.ops.aten.tanh_backward, forward)

    def _fused_sigmoid_grad(self, forward):
        """``sigmoid_grad(y, dy) = dy * y * (1 - y)`` as ``aten.sigmoid_backward(dy, y)``: one kernel
        where the op's forward makes three."""
        return self._fused_output_backward(self._torch.ops.aten.sigmoid_backward, forward)

    @staticmethod
    def _fused_output_backward(kernel, forward):
        """An op ``f(y, dy)`` (a gradient written with the output ``y``) as torch's ``kernel(dy, y)``;
        the op's ``forward`` for inputs of two dtypes.  (For complex ``y`` torch's kernel conjugates
        its factor: it is given ``conj(y)``.)"""

        def fused(y, dy):
            if y.dtype != dy.dtype:
                return forward(y, dy)
            return kernel(dy, y.conj() if y.is_complex() else y)

        return fused

    def _fused_sparse_xent_grad(self, forward):
        """``softmax(logits) - one_hot(labels[..., 0])`` as the kernels of ``F.cross_entropy``'s backward:
        ``log_softmax``, ``nll_loss_backward`` (-1 at the labels, no one-hot) and
        ``_log_softmax_backward_data`` (adds the softmax), the leading axes flattened into one.  The
        op's own forward where they do not apply: labels not of shape ``logits.shape[:-1] + (1,)``,
        no elements."""
        torch = self._torch
        aten = torch.ops.aten
        nll_loss_backward = aten.nll_loss_backward
        log_softmax_backward = aten._log_softmax_backward_data
        log_softmax = torch.log_softmax
        int64 = torch.int64

        def sparse_xent_grad(labels, logits):
            shape = logits.shape
            if labels.shape[:-1] != shape[:-1] or labels.shape[-1:] != (1,) or not logits.numel():
                return forward(labels, logits)
            logp = log_softmax(logits if logits.ndim == 2 else logits.reshape(-1, shape[-1]), -1)
            target = labels.reshape(-1)
            if target.dtype != int64:
                target = target.to(int64)
            one = logp.new_ones(())
            # (reduction 2, a sum: the 0-d gradient one for every row, total_weight not read; the public
            # function checked the labels lie in [0, depth): none is the ignore_index -100)
            g = nll_loss_backward(one, logp, target, None, 2, -100, one)
            out = log_softmax_backward(g, logp, -1, logp.dtype)
            return out if logits.ndim == 2 else out.reshape(shape)

        return sparse_xent_grad

    def _fused_sparse_xent(self, forward):
        """``logsumexp(logits) - logits[label]`` as the kernels of ``F.cross_entropy``'s forward:
        ``log_softmax`` and ``nll_loss`` (no reduction: the label's ``-log_softmax``, no one-hot, no
        gather of a shifted copy), the leading axes flattened into one.  The op's own forward where
        they do not apply: labels not of shape ``logits.shape[:-1]``, no elements, logits that are
        not floating point; and in a program ``torch.compile`` or ``make_fx`` traces, where the labels'
        check runs with the step (``value_check``) and a compiled ``nll_loss`` would index with an
        out-of-range label first."""
        torch = self._torch
        nll_loss = torch.nn.functional.nll_loss
        log_softmax = torch.log_softmax
        int64 = torch.int64
        readable = self._readable

        def sparse_xent(labels, logits):
            shape = logits.shape
            kernels_apply = labels.shape == shape[:-1] and logits.numel() and logits.is_floating_point()
            if not kernels_apply or not readable(logits):
                return forward(labels, logits)
            logp = log_softmax(logits if logits.ndim == 2 else logits.reshape(-1, shape[-1]), -1)
            target = labels.reshape(-1)
            if target.dtype != int64:
                target = target.to(int64)
            # (the public function checked the labels lie in [0, depth): none is the ignore_index -100)
            out = nll_loss(logp, target, reduction="none")
            return out if logits.ndim == 2 else out.reshape(labels.shape)

        return sparse_xent

    def _getitem(self, x, *, key):
        """``x[key]`` (NumPy's meaning); a negative-step slice becomes a gather at the flat positions
        it selects."""
        x, key = self._numpy_order(x, key)
        if _negative_step(key):
            return x.reshape(-1)[self._flat_positions(x.shape, key, x.device)]
        return x[key]

    def _scatter(self, base, key, values, accumulate):
        """Out of place: ``base`` with ``values`` written (or added) at the flat positions ``key``
        selects.  Used where in-place writes cannot go: inside ``torch.func.vmap`` (a batched value
        written into an unbatched array), and for negative-step keys."""
        torch = self._torch
        flat = self._flat_positions(base.shape, key, base.device)
        idx = flat.reshape(-1)
        vals = (
            torch.broadcast_to(values, flat.shape).reshape(-1)
            if isinstance(values, torch.Tensor)
            else torch.full((idx.numel(),), values, dtype=base.dtype, device=base.device)
        )
        b = base.reshape(-1)
        out = b.index_add(0, idx, vals) if accumulate else b.index_copy(0, idx, vals)
        return out.reshape(base.shape)

    def index_add(self, shape, dtype, key, values):
        """Basic keys write into a view of the zeros; keys with arrays use the flat-index trick:
        ``arange(n).reshape(shape)[key]`` names, for each element of ``values``, the flat position it
        came from, and ``index_add`` sums repeated positions."""
        torch = self._torch
        nd = self.dtype_to_native(dtype)
        dev = values.device if isinstance(values, torch.Tensor) else self.device
        if not isinstance(values, torch.Tensor):
            values = torch.as_tensor(values, dtype=nd, device=dev)
        elif values.dtype != nd:
            values = values.to(nd)
        zeros = torch.zeros(tuple(shape), dtype=nd, device=dev)
        if not _negative_step(key) and all(k is None or k is Ellipsis or k.__class__ in (int, slice) for k in key):
            try:
                zeros[key] = values
                return zeros
            except RuntimeError as e:  # a batched value inside torch.func.vmap
                if "vmap" not in str(e):
                    raise
                zeros = torch.zeros(tuple(shape), dtype=nd, device=dev)
        return self._scatter(zeros, key, values, accumulate=True)

    def setitem(self, x, key, value):
        torch = self._torch
        if isinstance(value, torch.Tensor) and (value.dtype != x.dtype or value.device != x.device):
            value = value.to(device=x.device, dtype=x.dtype)
        if not _negative_step(key):
            out = x.clone()
            target, tkey = self._numpy_order(out, key)  # (a permuted view of out: it writes into out)
            try:
                target[tkey] = value
                return out
            except RuntimeError as e:  # a batched value inside torch.func.vmap
                if "vmap" not in str(e):
                    raise
        return self._scatter(x, key, value, accumulate=False)

    def erf(self, x):
        if x.is_complex():  # torch has no complex erf: SciPy's, on the host, as NumPy's backend
            return super().erf(x)
        return self._torch.special.erf(x)

    def special_function(self, name):
        """``torch.special``'s function for SciPy's ``name`` (``psi`` is ``digamma``; ``gamma`` and
        ``rel_entr`` composed of torch's functions); None where torch has none."""
        try:
            return self._special[name]
        except KeyError:
            self.xp  # noqa: B018 - load torch
            torch = self._torch
            composed = _SPECIAL_COMPOSED.get(name)
            f = composed(torch) if composed else getattr(torch.special, _SPECIAL_NAMES.get(name, name), None)
            self._special[name] = f
            return f

    def vmap(self, fn, in_axes=0, out_axes=0):
        return self._torch.func.vmap(fn, in_dims=in_axes, out_dims=out_axes)

    compiles = "opt-in"

    def compile_program(self, fn):
        """``fn`` traced to an FX graph of ATen ops by ``make_fx`` on its first call (the program's
        Python -- gradtape's forwards and their caches -- runs once there), then compiled by
        ``torch.compile`` (inductor).  Shapes are fixed per trace: no dynamic shapes."""
        torch = self._torch
        proxy_tensor = importlib.import_module("torch.fx.experimental.proxy_tensor")
        compiled = []

        def run(*args):
            if not compiled:
                with warnings.catch_warnings():  # (torch's own deprecations, from inside make_fx)
                    warnings.simplefilter("ignore", DeprecationWarning)
                    # distinct example arguments: one tensor passed twice must not make the graph
                    # assume that those inputs always alias
                    seen = set()
                    example = []
                    for a in args:
                        example.append(a.clone() if id(a) in seen else a)
                        seen.add(id(a))
                    graph = proxy_tensor.make_fx(fn)(*example)
                    compiled.append(torch.compile(graph, dynamic=False))
                    return compiled[0](*args)  # (the first call compiles: inductor's own imports warn too)
            return compiled[0](*args)

        return run

    def native_grad(self, fn, *args):
        torch = self._torch
        leaves = [a.detach().clone().requires_grad_(a.dtype.is_floating_point or a.dtype.is_complex) for a in args]
        out = fn(*leaves)
        if out.is_complex():
            raise TypeError("native_grad needs a real-valued function")
        wrt = [a for a in leaves if a.requires_grad]
        grads = iter(torch.autograd.grad(out.sum(), wrt, allow_unused=True))
        res = []
        for a in leaves:
            g = next(grads) if a.requires_grad else None
            res.append(torch.zeros_like(a) if g is None and a.requires_grad else (None if g is None else g.detach()))
        return res
