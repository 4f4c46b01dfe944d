"""The JAX backend (CPU and GPU).  ``jax.numpy`` is an Array API namespace already; the adapter only
reports its shape mismatches as ValueError (JAX raises TypeError for some), as every backend does.

float64: JAX computes in 32 bits unless ``jax_enable_x64`` is on, and silently turns float64
requests into float32.  Loading this backend therefore sets ``jax.config.update("jax_enable_x64",
True)`` once, process-wide (see docs/backends.md for what that changes in the user's own JAX code).

Devices: ``"cpu"``, ``"gpu"``/``"cuda"`` (the first GPU), ``"gpu:1"``/``"cuda:1"``, ``"tpu:0"``; a
``jax.Device`` passes through.  ``Tensor.device`` reads ``"cpu"`` or ``"gpu:N"``.  The default device
is JAX's own (``jax.devices()[0]``: the GPU where one is present).
"""

from __future__ import annotations

import functools
import types

import numpy as np

from gradtape import dtypes as _dt

from ._protocol import Backend

_ALIASES = {"cuda": "gpu", "rocm": "gpu"}
#: functions for which JAX reports a shape mismatch as TypeError (NumPy, PyTorch and array_api_strict:
#: ValueError, as gradtape does on every backend)
_SHAPE_CHECKED = ("reshape", "matmul", "concat", "permute_dims", "tensordot")
_SHAPE_WORDS = ("shape", "permutation", "dimension")


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


def _namespace(jnp):
    """``jax.numpy``, with shape mismatches reported as ValueError."""
    ns = types.ModuleType("gradtape.backends.jax.xp", "jax.numpy, with shape mismatches reported as ValueError")
    ns.__dict__.update(
        {k: v for k, v in vars(jnp).items() if k not in ("__name__", "__doc__", "__spec__", "__loader__", "__path__")}
    )
    for name in _SHAPE_CHECKED:
        setattr(ns, name, _shape_errors_are_value_errors(getattr(jnp, name)))
    for name in ("sum", "prod", "mean", "max", "min"):
        setattr(ns, name, _fast_reduction(getattr(jnp, name)))
    return ns


class JaxBackend(Backend):
    name = "jax"
    install_hint = "python3 -m pip install jax"
    python_scalars = True  # JAX's weak types keep the array's dtype
    supports_vmap = True
    supports_native_grad = True

    def load(self):
        import jax

        if not jax.config.read("jax_enable_x64"):
            jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        self._jax = jax
        self._jnp = jnp
        self._default_device = None
        self.array_type = type(jnp.zeros(()))
        self._abstract = jax.Array  # tracers (inside vmap/grad) are jax.Arrays too
        return _namespace(jnp)

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
        if not isinstance(device, str):
            raise TypeError(
                f"backend 'jax': a device is a string ('cpu', 'gpu:0') or a jax.Device, not {type(device).__name__}"
            )
        kind, _, idx = device.strip().lower().partition(":")
        kind = _ALIASES.get(kind, kind)
        devs = self._platform_devices(kind) if kind in ("cpu", "gpu", "tpu") else []
        i = int(idx) if idx else 0
        if not devs or not 0 <= i < len(devs):
            raise ValueError(f"backend 'jax' has no device {device!r} (devices: {self.devices()})")
        return devs[i]

    def device_of(self, x):
        try:
            return x.device
        except Exception:  # a tracer, or an array sharded over several devices
            try:
                ds = x.devices()
            except Exception:  # a tracer has no devices (jax.errors.ConcretizationTypeError)
                ds = ()
            return next(iter(ds)) if len(ds) == 1 else self.default_device()

    def device_str(self, device) -> str:
        jax = self._jax
        if isinstance(device, str):
            device = self.parse_device(device)
        if not isinstance(device, jax.Device):
            return str(device)
        plat = _ALIASES.get(device.platform, device.platform)
        same = self._platform_devices(device.platform)
        i = same.index(device) if device in same else device.id
        return "cpu" if plat == "cpu" and i == 0 else f"{plat}:{i}"

    def devices(self):
        out = []
        for plat in ("cpu", "gpu", "tpu"):
            for i, _ in enumerate(self._platform_devices(plat)):
                out.append("cpu" if plat == "cpu" and i == 0 else f"{plat}:{i}")
        return out

    def _move(self, x, device):
        return self._jax.device_put(x, device)

    # ------------------------------------------------------------------ conversion
    def fix_output(self, out):
        return self._jnp.asarray(out)

    # ------------------------------------------------------------------ what the standard lacks
    def index_add(self, shape, dtype, key, values):
        """``.at[key].add``: JAX's functional scatter-add (repeated indices accumulate)."""
        jnp = self._jnp
        nd = self.dtype_to_native(dtype)
        if not isinstance(values, self._abstract):
            values = jnp.asarray(values, dtype=nd)
        zeros = jnp.zeros_like(values, dtype=nd, shape=tuple(shape))
        return zeros.at[key].add(values.astype(nd) if values.dtype != nd else values)

    def setitem(self, x, key, value):
        """``.at[key].set``: a new array, ``x`` untouched."""
        return x.at[key].set(value)

    def erf(self, x):
        from jax.scipy.special import erf

        return erf(x)

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
