"""The ``array_api_strict`` backend: the reference.  If gradtape runs here, the core uses nothing but
the Array API standard.

Version: gradtape targets the 2025.12 standard (array_api_strict 2.6's default).  On load this
adapter sets ``array_api_strict.set_array_api_strict_flags(api_version="2025.12")`` where the
library supports it and defaults to another version -- unless the user chose a version already
(``ARRAY_API_STRICT_API_VERSION`` in the environment, or flags set to anything but the library
default).  The flags are process-wide: other code using array_api_strict in the same process then
sees 2025.12 too.  At an earlier version gradtape still works: ``linalg.eig`` and ``isin``, which
array_api_strict refuses there, are computed on the host or from standard functions.

What the standard lacks (scatter-add for indexing gradients, ``setitem`` with integer-array keys,
``erf``, and the indexing keys that mix integer arrays with slices, ``...`` or ``None``, which the
standard leaves unspecified but gradtape offers on every backend) is computed on the host: the
arrays go to NumPy through DLPack and come back with ``asarray(..., device=...)``.  That is the only
place gradtape leaves the standard here, and it is confined to this adapter.

Devices: ``"cpu"`` (array_api_strict's ``CPU_DEVICE``) and the library's test devices ``"device1"``
and ``"device2"``, which behave as separate devices (mixing them is an error), so device handling
can be tested without a GPU.
"""

from __future__ import annotations

import os

import numpy as np

from gradtape.core import dtypes as _dt

from gradtape.backends._values import check_new_int, eager, with_conventions
from gradtape.core.backend import Backend

TARGET_API_VERSION = "2025.12"


class StrictBackend(Backend):
    name = "array_api_strict"
    install_hint = "python3 -m pip install array-api-strict"
    python_scalars = True  # the 2024.12 standard allows Python scalars in binary functions
    #: indexing keys the standard leaves unspecified but gradtape's API offers on every backend
    #: (integer arrays mixed with slices, ``...`` or ``None``) are computed on the host; set False
    #: to have array_api_strict refuse them, as it does for its own arrays
    host_indexing = True

    def __init__(self):
        super().__init__()
        self.overrides = {"getitem": self._getitem}

    def op_impl(self, opdef):
        # (the library computes as NumPy does: integer division by zero is NumPy's 0 and warning)
        return with_conventions(self, opdef.name, super().op_impl(opdef), eager, division=False)

    def _new_array(self, value, native_dtype, device):
        check_new_int(self, value, native_dtype)  # (the library's words lack the value and the dtype)
        return super()._new_array(value, native_dtype, device)

    def load(self):
        import array_api_strict as xp
        from array_api_strict import _flags

        if (
            "ARRAY_API_STRICT_API_VERSION" not in os.environ
            and xp.get_array_api_strict_flags()["api_version"] == getattr(_flags, "default_version", None)
            and TARGET_API_VERSION in getattr(_flags, "supported_versions", (TARGET_API_VERSION,))
        ):
            xp.set_array_api_strict_flags(api_version=TARGET_API_VERSION)
        self._strict = xp
        self.array_type = type(xp.asarray(0))
        self._cpu = xp.Device()
        return xp

    # ------------------------------------------------------------------ devices
    def default_device(self):
        return self._cpu

    def parse_device(self, device):
        xp = self._strict
        if device is None:
            return self._cpu
        if isinstance(device, xp.Device):
            return device
        if not isinstance(device, str):
            raise TypeError(
                f"backend 'array_api_strict': a device is a string ('cpu', 'device1') or an "
                f"array_api_strict.Device, not {type(device).__name__}"
            )
        s = device.strip()
        if s.lower() in ("cpu", "cpu:0", "cpu_device"):
            return self._cpu
        try:
            return xp.Device(s)
        except ValueError:
            raise ValueError(
                f"backend 'array_api_strict' has no device {device!r} (devices: {self.devices()})"
            ) from None

    def device_of(self, x):
        return x.device

    def device_str(self, device) -> str:
        if isinstance(device, str):
            device = self.parse_device(device)
        name = getattr(device, "_device", None) or str(device)
        return "cpu" if name == "CPU_DEVICE" else name

    def devices(self):
        return [self.device_str(d) for d in self._strict.__array_namespace_info__().devices()]

    def _move(self, x, device):
        return x.to_device(device)

    # ------------------------------------------------------------------ conversion
    def to_numpy(self, x):
        # DLPack is the standard's way out; array_api_strict's test devices refuse it, but their
        # memory is host memory, so that case moves the array to the CPU device first
        if x.device != self._cpu:
            x = x.to_device(self._cpu)
        return np.from_dlpack(x)

    # ------------------------------------------------------------------ what the standard lacks
    def _host_key(self, key):
        return tuple(self.to_numpy(k) if isinstance(k, self.array_type) else k for k in key)

    def _getitem(self, x, *, key):
        """``x[key]`` by array_api_strict; keys it refuses that NumPy takes go through the host."""
        try:
            return x[key]
        except (IndexError, RuntimeError) as e:  # RuntimeError: masks on the test devices
            if not self.host_indexing:
                raise
            try:
                out = np.asarray(self.to_numpy(x)[self._host_key(key)])
            except Exception:  # NumPy refuses the key too: report array_api_strict's error
                raise e from None
            return self._strict.asarray(np.array(out, copy=True), device=x.device)

    def index_add(self, shape, dtype, key, values):
        """On the host: ``np.add.at`` (the standard has no scatter), then back to the device."""
        out = np.zeros(tuple(shape), dtype=np.dtype(_dt.as_dtype(dtype).name))
        vals = self.to_numpy(values) if isinstance(values, self.array_type) else values
        np.add.at(out, self._host_key(key), vals)
        dev = values.device if isinstance(values, self.array_type) else None
        return self._strict.asarray(out, device=dev)

    def setitem(self, x, key, value):
        """Keys the standard's ``__setitem__`` takes stay on the device; the others (integer arrays,
        masks beside other indices) go through the host."""
        xp = self._strict
        if isinstance(value, self.array_type) and value.dtype != x.dtype:
            value = xp.astype(value, x.dtype)
        if not any(isinstance(k, self.array_type) and k.dtype != xp.bool for k in key):
            out = xp.asarray(x, copy=True)
            try:
                out[key] = value
                return out
            except (IndexError, RuntimeError):  # RuntimeError: masks on the test devices
                if not self.host_indexing:
                    raise
        host = np.array(self.to_numpy(x), copy=True)
        host[self._host_key(key)] = self.to_numpy(value) if isinstance(value, self.array_type) else value
        return xp.asarray(host, device=x.device)
