"""``gt.train``: checkpoints, as ``tf.train`` (``Checkpoint``, ``CheckpointManager``,
``latest_checkpoint``).

A checkpoint saves the objects given to ``Checkpoint(**objects)`` and everything they hold, found by
attribute name as TensorFlow does: Modules and layers (their attributes, and lists, tuples and dicts
of them), Variables, optimizers (``iterations``, the learning rate and every slot, saved beside the
variable it belongs to) and ``gt.random.Generator`` states.  A value is matched on restore by its
path in that graph (``model/dense/kernel``), never by a Python id, so it restores into fresh objects,
in another process and on another backend.  Objects that do not exist yet when ``restore`` runs (a
layer built on its first call, an optimizer's slots created on its first apply) take their values
when they are created (TensorFlow's deferred restoration).

The file is a safetensors file (``<path>.safetensors``: an 8-byte little-endian header length, a
JSON header, the raw little-endian tensors), written here without the ``safetensors`` package and
readable with it or with NumPy alone; the header's ``__metadata__["gradtape"]`` holds the index
(JSON: format, version and, per path, the kind, dtype, shape and the backend it came from).  See
docs/checkpoints.md.  Files are written atomically: a save that fails or is killed halfway leaves the
previous checkpoints as they were (and no new file, nor an advanced ``save_counter``; the next
manager on the directory deletes a killed save's temporaries).  Every tensor and the header carry a
CRC-32 (``zlib.crc32``), checked with every value's shape, dtype and kind before anything is
assigned: a damaged file is a :class:`DataLossError`.  Saves into one directory are serialised
across threads.
"""

from __future__ import annotations

import collections
import json
import os
import re
import sys
import threading
import uuid
import warnings
import weakref
import zlib

import numpy as np

from gradtape.core import dtypes as _dt
from gradtape.training import module as _module
from gradtape.training import optimizers as _optimizers
from gradtape.training.layers import WEIGHTS, Layer
from gradtape.training.module import Module
from gradtape.training.optimizers import Optimizer
from gradtape.core.recording_state import active_context
from gradtape.random import Generator
from gradtape.core.tensor import Variable, user_stacklevel

__all__ = [
    "Checkpoint",
    "CheckpointLoadStatus",
    "CheckpointManager",
    "DataLossError",
    "InitializationOnlyStatus",
    "NotFoundError",
    "latest_checkpoint",
]

FORMAT = "gradtape.train.Checkpoint"
VERSION = 1
SUFFIX = ".safetensors"
STATE_FILE = "checkpoint"  # the directory's list of checkpoints, as TensorFlow's
SLOT = ".OPTIMIZER_SLOT"  # <variable path>/.OPTIMIZER_SLOT/<optimizer path>/<slot name>, as TensorFlow


class NotFoundError(FileNotFoundError):
    """No checkpoint at the path given (TensorFlow's ``tf.errors.NotFoundError``)."""


class DataLossError(ValueError):
    """A checkpoint file is damaged: a tensor or the header does not match its checksum, or the file
    is cut short or not a checkpoint (TensorFlow's ``tf.errors.DataLossError``; a ``ValueError`` too).
    Raised before any value is assigned."""


#: the checksums (CRC-32 of zlib, IEEE 802.3): per tensor in its index entry (``"crc32"``), and of
#: the header in ``__metadata__[HEADER_CRC]`` (8 hex digits; the CRC of the 8 length bytes and the
#: header with those digits as ``0``); the index says ``"checksums": CHECKSUMS``.  A file of an
#: earlier gradtape has neither and is read with a warning
CHECKSUMS = "gradtape-crc32"
HEADER_CRC = "gradtape_crc32"
_HEADER_CRC_FIELD = re.compile(rb'"' + HEADER_CRC.encode() + rb'"\s*:\s*"([0-9a-f]{8})"')
_NO_CRC = b"00000000"


# ---------------------------------------------------------------------------------------- the file
# gradtape dtype -> (safetensors dtype, NumPy dtype stored); complex values are stored as pairs of
# floats (a trailing axis of 2), which every safetensors reader can open
_STORED = {
    "float64": ("F64", "<f8"),
    "float32": ("F32", "<f4"),
    "int64": ("I64", "<i8"),
    "int32": ("I32", "<i4"),
    "int16": ("I16", "<i2"),
    "int8": ("I8", "<i1"),
    "uint64": ("U64", "<u8"),
    "uint32": ("U32", "<u4"),
    "uint16": ("U16", "<u2"),
    "uint8": ("U8", "<u1"),
    "bool": ("BOOL", "|b1"),
    "complex64": ("F32", "<f4"),
    "complex128": ("F64", "<f8"),
}
_NUMPY_OF = {st: np.dtype(npd) for st, npd in _STORED.values()}


def _stored(arr, dtype_name):
    """``arr`` as the little-endian, C-ordered array the file holds (complex: float pairs)."""
    st, npd = _STORED[dtype_name]
    a = np.asarray(arr, order="C")
    if dtype_name.startswith("complex"):
        a = np.asarray(a.view(a.real.dtype).reshape(a.shape + (2,)), order="C")
    return st, np.asarray(a, dtype=npd, order="C")


def _unstored(arr, dtype_name, shape):
    """The value of ``dtype_name`` and ``shape`` from the stored ``arr``."""
    if dtype_name.startswith("complex"):
        arr = np.asarray(arr, order="C").view(np.dtype(dtype_name)).reshape(shape)
    return arr.astype(np.dtype(dtype_name).newbyteorder("="), copy=False)


def _write_array(f, arr):
    """Write one stored array's bytes (one call per tensor, so a test can fail a save halfway)."""
    f.write(arr.reshape(-1).view(np.uint8).data)


def _crc(arr):
    """The checksum of a stored array's bytes."""
    return zlib.crc32(np.ascontiguousarray(arr).reshape(-1).view(np.uint8).data)


def _write_safetensors(f, tensors, metadata):
    """A safetensors file: ``tensors`` (key -> (safetensors dtype, stored array)) and the string
    ``metadata``, keys sorted, data contiguous; the header's checksum in ``metadata[HEADER_CRC]``."""
    header = {"__metadata__": dict(metadata, **{HEADER_CRC: _NO_CRC.decode()})}
    offset = 0
    for key in sorted(tensors):
        st, a = tensors[key]
        header[key] = {"dtype": st, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned
    head = len(raw).to_bytes(8, "little") + raw
    crc = b"%08x" % zlib.crc32(head)
    (field,) = [m for m in _HEADER_CRC_FIELD.finditer(head)]
    f.write(head[: field.start(1)] + crc + head[field.end(1) :])
    for key in sorted(tensors):
        _write_array(f, tensors[key][1])


def _read_safetensors(path):
    """``(header, arrays, checked)`` of the safetensors file at ``path`` (arrays by key, NumPy);
    ``checked``: the header matched its checksum (False: a file without one, of an earlier gradtape).
    A damaged file is a :class:`DataLossError`."""
    with open(path, "rb") as f:
        blob = f.read()
    bad = f"gt.train.Checkpoint: {path!r} is damaged or not a gradtape checkpoint (a safetensors file)"
    if len(blob) < 8:
        raise DataLossError(f"{bad}: the file is {len(blob)} bytes long")
    n = int.from_bytes(blob[:8], "little")
    if n > len(blob) - 8:
        raise DataLossError(f"{bad}: its header is cut short (the file is {len(blob)} bytes, the header {n})")
    head = blob[: 8 + n]
    fields = list(_HEADER_CRC_FIELD.finditer(head))
    if len(fields) == 1:
        m = fields[0]
        if zlib.crc32(head[: m.start(1)] + _NO_CRC + head[m.end(1) :]) != int(m.group(1), 16):
            raise DataLossError(
                f"gt.train.Checkpoint: {path!r} is damaged: its header does not match its checksum; restore an "
                "earlier checkpoint"
            )
        checked = True
    elif fields or CHECKSUMS.encode() in head or HEADER_CRC.encode() in head:
        raise DataLossError(f"gt.train.Checkpoint: {path!r} is damaged: the checksum of its header is damaged")
    else:
        checked = False
    try:
        header = json.loads(head[8:].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataLossError(f"{bad}: its header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise DataLossError(f"{bad}: its header is not a JSON object")
    data = memoryview(blob)[8 + n :]
    arrays = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        try:
            begin, end = info["data_offsets"]
            dtype = _NUMPY_OF[info["dtype"]]
            if not 0 <= begin <= end <= len(data):
                raise ValueError("its data lies outside the file")
            arrays[key] = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
        except (KeyError, TypeError, ValueError) as e:
            raise DataLossError(f"{bad}: the entry of the tensor {key!r} is damaged ({info!r}: {e})") from None
    covered = max((info["data_offsets"][1] for key, info in header.items() if key != "__metadata__"), default=0)
    if covered != len(data):
        # (bytes no tensor holds: appended to, or two files run together; safetensors refuses these too)
        raise DataLossError(f"{bad}: it holds {len(data) - covered} bytes after its last tensor")
    return header, arrays, checked


def _atomic_write(path, write):
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it to ``path``: a
    failure or a kill before the rename leaves whatever was at ``path`` untouched."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # the rename itself made durable
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------- the graph
class _Weights:
    """A layer's ``add_weight`` variables by name, for the ones no attribute holds (``.weights/w``)."""

    def __init__(self, layer):
        self.layer = layer

    def children(self):
        prefix = self.layer._name + "/"
        for v in self.layer._added_weights:
            name = v.name.removesuffix(":0")
            yield (name[len(prefix) :] if name.startswith(prefix) else name), v


def _escape(name):
    """One path component: ``/`` and ``%`` escaped, and a leading ``.`` (gradtape's own names)."""
    s = str(name).replace("%", "%25").replace("/", "%2F")
    return "%2E" + s[1:] if s.startswith(".") else s


def _join(path, name):
    return f"{path}/{name}" if path else name


def _is_trackable(o):
    return isinstance(o, (Variable, Generator, Module, Optimizer, Checkpoint, list, tuple, dict, _Weights))


def _children(obj):
    """``(path component, child)`` of a trackable object, in a fixed order (children that are not
    trackable, and ``None`` placeholders, are left out by the caller)."""
    if isinstance(obj, Checkpoint):
        out = list(_children(obj._root)) if obj._root is not None else []
        out += [(_escape(k), v) for k, v in obj._objects.items()]
        if obj._save_counter is not None:
            out.append(("save_counter", obj._save_counter))
        return out
    if isinstance(obj, Optimizer):
        # a schedule's optimizer has no learning-rate variable in Keras (gradtape's holds 0.0, unread):
        # saved, it set a constant learning rate restored from it to 0.0, and training stopped silently
        lr = [] if callable(obj._learning_rate) else [("learning_rate", obj._lr_variable)]
        return [("iterations", obj.iterations), *lr]
    if isinstance(obj, Module):
        ignored = getattr(obj, "_TF_MODULE_IGNORED_PROPERTIES", frozenset())
        out = [(_escape(k), v) for k, v in sorted(vars(obj).items()) if k not in ignored]
        if isinstance(obj, Layer):
            out.append((WEIGHTS[:-1], _Weights(obj)))
        return out
    if isinstance(obj, _Weights):
        return [(_escape(k), v) for k, v in obj.children()]
    if isinstance(obj, dict):
        return sorted((_escape(k), v) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return [(str(i), v) for i, v in enumerate(obj)]
    return []


def _graph(root):
    """``(leaves, optimizers)``: ``[(path, Variable or Generator)]`` breadth first (an object
    reachable by several paths is saved once, by its shortest), and ``[(path, Optimizer)]``."""
    leaves, optimizers = [], []
    queue = collections.deque([("", root)])
    seen = {id(root)}
    while queue:
        path, obj = queue.popleft()
        if isinstance(obj, (Variable, Generator)):
            leaves.append((path, obj))
            continue
        if isinstance(obj, Optimizer):
            optimizers.append((path, obj))
        for name, child in _children(obj):
            if child is None or not _is_trackable(child) or id(child) in seen:
                continue
            seen.add(id(child))
            queue.append((_join(path, name), child))
    return leaves, optimizers


def _slot_entries(leaves, optimizers):
    """``(path, slot Variable, variable path, optimizer path, slot name)`` for every slot whose
    variable is in the checkpoint (TensorFlow saves no other slot: it could not be matched back)."""
    var_paths = {id(o): p for p, o in leaves if isinstance(o, Variable)}
    out = []
    for opt_path, opt in optimizers:
        for var, slots in opt._slots_by_variable():
            vp = var_paths.get(id(var))
            if vp is None:
                continue
            for s, slot in slots.items():
                out.append((f"{vp}/{SLOT}/{opt_path}/{s}", slot, vp, opt_path, s))
    return out


def _variable_value(v):
    """A Variable's value as a NumPy array (read on the host; not a conversion the tape sees)."""
    with v._lock:  # (not halfway through another thread's update or compiled step)
        if v._b.stand_ins:
            raise RuntimeError(
                f"gt.train.Checkpoint: cannot save the variable {v.name!r} inside a gt.function trace; "
                "save between steps, outside the compiled function"
            )
        return np.array(v._b.to_numpy(v._v), copy=True)


def _snapshot(root):
    """``(leaves, slot entries, {id(variable): NumPy value})`` of ``root``'s graph, every variable
    and slot read while all their locks are held: one state, never half of another thread's
    training step (an apply, a compiled step) and half of the next.  The graph is listed again once
    the locks are held, and read only if it is unchanged: an optimizer's first apply makes its slots
    (a layer's first call its weights) before it takes the locks, and a step counted without its
    slots would resume with fresh ones."""

    def listed():
        leaves, optimizers = _graph(root)
        slot_entries = _slot_entries(leaves, optimizers)
        key = [(p, id(o)) for p, o in leaves] + [(p, id(s)) for p, s, *_ in slot_entries]
        return leaves, slot_entries, key

    while True:
        leaves, slot_entries, key = listed()
        variables = [o for _, o in leaves if isinstance(o, Variable)] + [e[1] for e in slot_entries]
        with _optimizers._holding_locks(variables):
            if listed()[2] == key:
                return leaves, slot_entries, {id(v): _variable_value(v) for v in variables}


def _generator_state(g):
    """A Generator's PCG64 state as 6 uint64: state (high, low), increment (high, low), has_uint32,
    uinteger."""
    st = g._get_state()
    if st.get("bit_generator") != "PCG64":
        raise ValueError(f"gt.train.Checkpoint: cannot save a generator of {st.get('bit_generator')!r}")
    m = (1 << 64) - 1
    s, inc = int(st["state"]["state"]), int(st["state"]["inc"])
    return np.array([s >> 64, s & m, inc >> 64, inc & m, int(st["has_uint32"]), int(st["uinteger"])], dtype=np.uint64)


def _generator_dict(a):
    a = [int(x) for x in a]
    return {
        "bit_generator": "PCG64",
        "state": {"state": (a[0] << 64) | a[1], "inc": (a[2] << 64) | a[3]},
        "has_uint32": a[4],
        "uinteger": a[5],
    }


def _seed_json(seed):
    if seed is None or isinstance(seed, (int, np.integer)):
        return None if seed is None else int(seed)
    return [int(s) for s in np.ravel(seed)]


# ---------------------------------------------------------------------------------------- restoring
class _Node:
    __slots__ = ("children", "entry", "slots")

    def __init__(self):
        self.children = {}
        self.entry = None  # (path, index entry) of the value saved here
        self.slots = []  # (path, index entry) of the optimizer slots saved beside this variable


class _Restore:
    """One restore: the saved values by path, matched against the live objects now and, for the
    objects created later, when they appear."""

    def __init__(self, checkpoint, file, entries, arrays):
        # what waits for an object holds no strong reference to the checkpoint or the optimizers
        # (a layer never built, an optimizer never applied are not kept alive by a restore)
        self.file = file
        self.entries = entries
        self.arrays = arrays
        self.unused = set(entries)  # saved paths not restored yet
        self.partial = False  # expect_partial() was called
        self.restored = weakref.WeakValueDictionary()  # path -> object restored from it
        self.root = _Node()
        for path, e in entries.items():
            if e["kind"] == "slot":
                continue
            node = self.root
            for part in path.split("/"):
                node = node.children.setdefault(part, _Node())
            node.entry = (path, e)
        self.optimizers = {}  # path -> weak reference to the optimizer the checkpoint names there
        self.slots_of = {}  # optimizer path -> [(slot path, entry)]
        for path, e in entries.items():
            if e["kind"] == "slot":
                self.slots_of.setdefault(e["optimizer"], []).append((path, e))
                opt = _resolve(checkpoint, e["optimizer"])
                if isinstance(opt, Optimizer):
                    self.optimizers[e["optimizer"]] = weakref.ref(opt)
                node = self.root
                for part in e["variable"].split("/"):
                    node = node.children.setdefault(part, _Node())
                node.slots.append((path, e))

    # ------------------------------------------------------------------ matching (no assignment)
    def match(self, node, obj, path, plan, errors):
        if node.entry is not None:
            self._match_leaf(node, obj, plan, errors)
        if isinstance(obj, Optimizer) and path in self.slots_of:
            self._match_optimizer(obj, path, plan, errors)
        live = None
        for name, child_node in node.children.items():
            if live is None:
                live = dict(_children(obj))
            child = live.get(name)
            child_path = _join(path, name)
            if child is None:
                target = _deferrable(obj, name)
                if target is not None:
                    plan.append(("defer", target[0], target[1], child_node, child_path))
                continue
            self.match(child_node, child, child_path, plan, errors)
        if isinstance(obj, Optimizer) and node.children:  # after its learning_rate variable
            plan.append(("sync_learning_rate", obj))

    def _value(self, path, e, errors):
        a = self.arrays.get(e["key"])
        if a is None:
            errors.append(f"{path}: the index names the tensor {e['key']!r} but the file does not hold it")
            return None
        st, npd = _STORED.get(e["dtype"], (None, None))
        want = tuple(e["shape"]) + ((2,) if e["dtype"].startswith("complex") else ())
        if st is None or a.dtype != np.dtype(npd) or a.shape != want:
            errors.append(f"{path}: the stored tensor ({a.dtype}, shape {a.shape}) does not match its index entry")
            return None
        return _unstored(a, e["dtype"], tuple(e["shape"]))

    def _check_variable(self, path, e, var, errors):
        if e["kind"] not in ("variable", "slot"):
            errors.append(f"{path}: the checkpoint holds a {e['kind']} here, the object is a gt.Variable")
            return None
        if tuple(e["shape"]) != var.shape:
            errors.append(
                f"{path}: the checkpoint's value has shape {tuple(e['shape'])}, the variable {var.name!r} "
                f"has shape {var.shape}"
            )
            return None
        if e["dtype"] != var.dtype.name:
            errors.append(
                f"{path}: the checkpoint's value is {e['dtype']}, the variable {var.name!r} is "
                f"{var.dtype.name}; create the variable with dtype={e['dtype']!r}"
            )
            return None
        return self._value(path, e, errors)

    def _match_leaf(self, node, obj, plan, errors):
        path, e = node.entry
        if isinstance(obj, Variable):
            v = self._check_variable(path, e, obj, errors)
            if v is not None:
                plan.append(("assign", obj, v, path))
            waiting = {}  # optimizer -> paths of the slots it has not created yet
            for spath, se in node.slots:
                opt = self._match_slot(obj, spath, se, plan, errors)
                if opt is not None:
                    waiting.setdefault(opt, []).append(spath)
            for opt, paths in waiting.items():
                plan.append(("defer_slots", opt, obj, paths))
        elif isinstance(obj, Generator):
            if e["kind"] != "generator":
                errors.append(f"{path}: the checkpoint holds a {e['kind']} here, the object is a gt.random.Generator")
                return
            v = self._value(path, e, errors)
            if v is not None:
                plan.append(("generator", obj, v, path))
        else:
            errors.append(f"{path}: the checkpoint holds a {e['kind']} here, the object is a {type(obj).__name__}")

    def _match_optimizer(self, opt, path, plan, errors):
        """An optimizer found (now, or attached after the restore, at any depth): the slots of the
        variables restored before it appeared are restored (or wait for their creation)."""
        ref = self.optimizers.get(path)
        if ref is not None and ref() is opt:
            return  # (known from the start: its slots are matched with their variables)
        self.optimizers[path] = weakref.ref(opt)
        waiting = {}
        for spath, se in self.slots_of[path]:
            var = self.restored.get(se["variable"])
            if isinstance(var, Variable) and self._match_slot(var, spath, se, plan, errors) is not None:
                waiting.setdefault(id(var), (var, []))[1].append(spath)
        for var, paths in waiting.values():
            plan.append(("defer_slots", opt, var, paths))

    def _match_slot(self, var, path, e, plan, errors):
        """Plan the restore of one slot; the optimizer, where it has no slots for ``var`` yet."""
        ref = self.optimizers.get(e["optimizer"])
        opt = ref() if ref is not None else None
        if opt is None:
            return None  # stays unused: assert_consumed names it
        entry = opt._slots.get(id(var))
        if entry is None:
            return opt
        slot = entry[1].get(e["slot"])
        if slot is not None:
            v = self._check_variable(path, e, slot, errors)
            if v is not None:
                plan.append(("assign", slot, v, path))
        return None

    # ------------------------------------------------------------------ assigning
    def apply(self, plan):
        for item in plan:
            kind = item[0]
            if kind == "assign":
                _, var, value, path = item
                var._restore(value)
                self._done(path, var)
            elif kind == "generator":
                _, gen, value, path = item
                gen._set_state(_generator_dict(value), self.entries[path].get("seed"))
                self._done(path, gen)
            elif kind == "defer":
                _, obj, name, node, path = item
                _module._DEFERRED.setdefault(obj, {})[name] = self._deferred(node, path)
            elif kind == "defer_slots":
                _, opt, var, paths = item
                pending = _optimizers._DEFERRED_SLOTS.setdefault(opt, {})
                pending[id(var)] = (weakref.ref(var), self._deferred_slots(paths))
            elif kind == "sync_learning_rate":  # a constant learning rate is also kept as a float
                opt = item[1]
                if not callable(opt._learning_rate):
                    lr = opt._lr_variable
                    opt._learning_rate = float(np.asarray(lr._b.to_numpy(lr._v)))

    def __del__(self):
        # the restore ends when nothing waits for a value any more (TensorFlow warns then too)
        try:
            unused, partial = self.unused, self.partial
            if unused and not partial:
                warnings.warn(
                    f"gt.train.Checkpoint: {len(unused)} value(s) of {self.file!r} were never restored: "
                    f"{sorted(unused)[:8]}; call status.expect_partial() if that is intended, or "
                    "status.assert_consumed() to find out why",
                    UserWarning,
                    stacklevel=2,
                )
        except Exception:  # interpreter shutdown
            pass

    def _done(self, path, obj):
        self.unused.discard(path)
        self.restored[path] = obj

    def _deferred(self, node, path):
        def restore_when_assigned(value):
            if value is None or not _is_trackable(value):
                return False
            plan, errors = [], []
            self.match(node, value, path, plan, errors)
            _raise(errors, self.file)
            self.apply(plan)
            return True

        return restore_when_assigned

    def _deferred_slots(self, paths):
        def restore_slots(slots):
            plan, errors = [], []
            for path in paths:
                e = self.entries[path]
                slot = slots.get(e["slot"])
                if slot is not None:
                    v = self._check_variable(path, e, slot, errors)
                    if v is not None:
                        plan.append(("assign", slot, v, path))
            _raise(errors, self.file)
            self.apply(plan)

        return restore_slots


_ENTRY_FIELDS = {"variable": (), "generator": (), "slot": ("variable", "optimizer", "slot")}


def _verified(file, index, arrays, checked):
    """The index's entries, every one checked against the file before anything is assigned: each
    names a tensor the file holds (and each tensor has an entry), its fields are whole, and (in a
    file with checksums) its bytes match its checksum.  Any mismatch is a :class:`DataLossError`
    naming the file and the tensor."""
    damaged = f"gt.train.Checkpoint: {file!r} is damaged"
    if not checked:
        if index.get("checksums") is not None:
            raise DataLossError(f"{damaged}: the checksum of its header is missing")
        warnings.warn(
            f"gt.train.Checkpoint: {file!r} was written by an earlier gradtape, without checksums: damage to its "
            "values cannot be detected. Save it again to add them",
            UserWarning,
            stacklevel=4,
        )
    elif index.get("checksums") != CHECKSUMS:
        raise DataLossError(f"{damaged}: its index names the checksums {index.get('checksums')!r}, not {CHECKSUMS!r}")
    entries = index.get("tensors")
    if not isinstance(entries, dict):
        raise DataLossError(f"{damaged}: its index has no table of tensors")
    keys = set()
    for path, e in entries.items():
        try:
            ok = (
                isinstance(e, dict)
                and e["kind"] in _ENTRY_FIELDS
                and all(isinstance(e[f], str) for f in _ENTRY_FIELDS[e["kind"]])
                and e["key"] == path
                and e["dtype"] in _STORED
                and isinstance(e["shape"], list)
            )
        except (KeyError, TypeError):
            ok = False
        if not ok:
            raise DataLossError(f"{damaged}: the index entry of the tensor {path!r} is damaged ({e!r})")
        a = arrays.get(path)
        if a is None:
            raise DataLossError(f"{damaged}: the index names the tensor {path!r} but the file does not hold it")
        if checked and _crc(a) != e.get("crc32"):
            raise DataLossError(
                f"{damaged}: the tensor {path!r} does not match its checksum (crc32 {e.get('crc32')!r} stored, "
                f"{_crc(a)} read); restore an earlier checkpoint"
            )
        keys.add(path)
    extra = sorted(set(arrays) - keys)
    if extra:
        raise DataLossError(f"{damaged}: the file holds tensors its index does not name: {extra[:8]}")
    return entries


def _resolve(root, path):
    """The object at ``path`` of the graph from ``root``, or None."""
    obj = root
    for part in path.split("/") if path else ():
        obj = dict(_children(obj)).get(part)
        if obj is None:
            return None
    return obj


def _deferrable(obj, name):
    """``(object, attribute)`` where a value for ``obj``'s child ``name`` can wait (a Module's
    attribute, or a layer's weight by name), else None."""
    if isinstance(obj, (Module, Checkpoint)) and re.fullmatch(r"[A-Za-z_]\w*", name) and name != "save_counter":
        return obj, name
    if isinstance(obj, _Weights):
        return obj.layer, WEIGHTS + _unescape(name)
    return None


def _unescape(part):
    return re.sub(r"%(25|2F|2E)", lambda m: {"25": "%", "2F": "/", "2E": "."}[m.group(1)], part)


def _raise(errors, file):
    if errors:
        raise ValueError(f"gt.train.Checkpoint: cannot restore {file!r}, nothing was restored: " + "; ".join(errors))


class CheckpointLoadStatus:
    """What ``Checkpoint.restore`` returns, as TensorFlow's: assertions about the match between the
    checkpoint and the objects."""

    def __init__(self, restore: _Restore, checkpoint: Checkpoint) -> None:
        self._restore = restore
        self._checkpoint = checkpoint

    def _live(self):
        """Paths of the live Variables, Generators and slots that nothing has been restored into."""
        leaves, optimizers = _graph(self._checkpoint)
        slots = [(p, s) for p, s, *_ in _slot_entries(leaves, optimizers)]
        done = {id(o) for o in self._restore.restored.values()}
        return [p for p, o in leaves + slots if id(o) not in done]

    def assert_consumed(self) -> CheckpointLoadStatus:
        """Every value of the checkpoint has been restored (none waits for an object not created
        yet) and every object of the graph has been restored; else an ``AssertionError`` naming the
        paths."""
        unused = sorted(self._restore.unused)
        if unused:
            raise AssertionError(
                f"Unresolved object in checkpoint {self._restore.file!r}: {unused} (no object at these "
                "paths yet, or a restore waits for them to be created; build the model and take an "
                "optimizer step first, or call expect_partial())"
            )
        self.assert_existing_objects_matched()
        return self

    def assert_existing_objects_matched(self) -> CheckpointLoadStatus:
        """Every Variable, Generator and slot of the graph that exists now was restored."""
        live = self._live()
        if live:
            raise AssertionError(
                f"Some objects were not restored from {self._restore.file!r}, which holds no value for them: {live}"
            )
        return self

    def assert_nontrivial_match(self) -> CheckpointLoadStatus:
        """At least one object besides the save counter was restored."""
        if not any(p != "save_counter" for p in self._restore.restored.keys()):
            raise AssertionError(f"Nothing except the save counter was restored from {self._restore.file!r}")
        return self

    def expect_partial(self) -> CheckpointLoadStatus:
        """Silence the warning about values of the checkpoint never restored (given when the
        restore ends: no object waits for a value any more)."""
        self._restore.partial = True
        return self

    def run_restore_ops(self, session: object = None) -> None:
        """Nothing to run (eager), as TensorFlow 2."""

    def initialize_or_restore(self, session: object = None) -> None:
        """Nothing to run (eager), as TensorFlow 2."""


class InitializationOnlyStatus:
    """``restore(None)``: nothing to restore (a first run), as TensorFlow's ``InitializationOnlyStatus``."""

    def assert_consumed(self) -> InitializationOnlyStatus:
        """Always raises: nothing was restored."""
        raise AssertionError("No checkpoint specified (save_path=None); nothing is being restored.")

    assert_existing_objects_matched = assert_nontrivial_match = assert_consumed

    def expect_partial(self) -> InitializationOnlyStatus:
        """Nothing to silence."""
        return self

    def run_restore_ops(self, session: object = None) -> None:
        """Nothing to run."""

    def initialize_or_restore(self, session: object = None) -> None:
        """Nothing to run."""


# ---------------------------------------------------------------------------------------- Checkpoint
class Checkpoint:
    """Saves and restores the objects given as keyword arguments, as ``tf.train.Checkpoint``::

        ckpt = gt.train.Checkpoint(model=model, optimizer=opt, rng=gen)
        path = ckpt.save("/tmp/run/ckpt")          # /tmp/run/ckpt-1 (the file: ckpt-1.safetensors)
        ckpt.restore(path).assert_consumed()

    Values are tracked by attribute name (see the module docstring); ``save_counter`` numbers the
    saves and is saved too.
    """

    def __init__(self, root: object = None, **kwargs: object) -> None:
        object.__setattr__(self, "_objects", {})
        object.__setattr__(self, "_root", None)
        object.__setattr__(self, "_save_counter", None)
        if root is not None:
            self._check(root, "root")
            object.__setattr__(self, "_root", root)
        for k, v in kwargs.items():
            setattr(self, k, v)

    @staticmethod
    def _check(value, name):
        if not _is_trackable(value):
            raise ValueError(
                f"`Checkpoint` was expecting {name} to be a trackable object (a gt.Variable, gt.Module "
                f"or layer, optimizer, gt.random.Generator, Checkpoint, or a list or dict of them), "
                f"got {value!r}"
            )

    def __setattr__(self, name, value):
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        if name == "save_counter":
            raise AttributeError("Checkpoint.save_counter is kept by the checkpoint itself")
        self._check(value, name)
        self._objects[name] = value
        if _module._DEFERRED:  # a restore (of a checkpoint holding this one) waits for this name
            _module._restore_deferred(self, name, value)

    def __getattr__(self, name):
        objects = self.__dict__.get("_objects", {})
        if name in objects:
            return objects[name]
        raise AttributeError(f"'Checkpoint' object has no attribute {name!r}")

    @property
    def save_counter(self) -> Variable:
        """The number of ``save`` calls so far (an int64 Variable, saved and restored)."""
        if self._save_counter is None:
            object.__setattr__(
                self, "_save_counter", Variable(0, trainable=False, dtype=_dt.int64, name="save_counter")
            )
        return self._save_counter

    # ------------------------------------------------------------------ writing
    def write(self, file_prefix: str | os.PathLike) -> str:
        """Write the checkpoint to ``file_prefix + ".safetensors"`` (atomically) and return
        ``file_prefix``; the save counter and the directory's list of checkpoints are left alone."""
        file_prefix = os.fspath(file_prefix)
        self.save_counter  # noqa: B018  (created now: every checkpoint holds it)
        leaves, slot_entries, values = _snapshot(self)
        tensors, index = {}, {}
        for path, obj in leaves:
            if isinstance(obj, Variable):
                a = values[id(obj)]
                e = {"kind": "variable", "name": obj.name, "trainable": obj.trainable}
                dtype = obj.dtype.name
            else:
                a = _generator_state(obj)
                e = {"kind": "generator", "seed": _seed_json(obj._seed)}
                dtype = "uint64"
            if isinstance(obj, Variable):
                e.update(backend=obj._b.name, device=str(obj.device))
            e.update(key=path, dtype=dtype, shape=list(a.shape))
            index[path] = e
            tensors[path] = _stored(a, dtype)
            e["crc32"] = _crc(tensors[path][1])
        for path, slot, vp, op, s in slot_entries:
            a = values[id(slot)]
            index[path] = {
                "kind": "slot",
                "variable": vp,
                "optimizer": op,
                "slot": s,
                "name": slot.name,
                "backend": slot._b.name,
                "device": str(slot.device),
                "key": path,
                "dtype": slot.dtype.name,
                "shape": list(a.shape),
            }
            tensors[path] = _stored(a, slot.dtype.name)
            index[path]["crc32"] = _crc(tensors[path][1])
        meta = {
            "format": "np",
            "gradtape": json.dumps(
                {
                    "format": FORMAT,
                    "version": VERSION,
                    "gradtape_version": sys.modules["gradtape"].__version__,
                    "checksums": CHECKSUMS,
                    "tensors": index,
                },
                sort_keys=True,
            ),
        }
        _atomic_write(file_prefix + SUFFIX, lambda f: _write_safetensors(f, tensors, meta))
        return file_prefix

    def save(self, file_prefix: str | os.PathLike) -> str:
        """Write a numbered checkpoint ``<file_prefix>-<n>`` (``n`` = the new ``save_counter``),
        record it as the latest in its directory, and return its path."""
        file_prefix = os.fspath(file_prefix)
        directory = os.path.dirname(file_prefix) or "."
        return self._save_numbered(file_prefix, None, directory, lambda path: _write_state(directory, path, [path]))

    def _save_numbered(self, file_prefix, number, directory, record):
        """Write ``<file_prefix>-<n>``, then ``record(path)`` (the directory's list): one save of the
        directory at a time (threads), and a failure of either (an error, a full disk) leaves no new
        file and the save counter where it was."""
        with _directory_lock(directory), _checkpoint_lock(self):
            counter = self.save_counter
            before = int(_variable_value(counter))  # (inside a trace: the clear error, not a stand-in read)
            path = f"{file_prefix}-{before + 1 if number is None else int(number)}"
            existed = os.path.exists(path + SUFFIX)
            # checkpoints of this name numbered from this one on: a run that did not restore the latest
            # (its save_counter behind) overwrites them, and its manager then deletes them as oldest
            # (not a file of this very number that the list does not name: a save killed before its
            # listing left it, and the list's latest is this run's restored one)
            ahead = []
            if number is None:
                listed = (_read_state(directory)[0] or {}).get("all_model_checkpoint_paths", [])
                listed = {os.path.normpath(os.path.join(directory, p)) for p in listed}
                for p in _saved_in(directory, os.path.basename(file_prefix)):
                    k = int(p.rsplit("-", 1)[1])
                    if k > before + 1 or k == before + 1 and os.path.normpath(p) in listed:
                        ahead.append(os.path.basename(p))
            counter.assign(before + 1)
            try:
                self.write(path)
                try:
                    record(path)
                except BaseException:
                    if not existed:  # (a file saved over an older one of its number stays)
                        _unlink(path + SUFFIX)
                    raise
            except BaseException:
                counter.assign(before)
                raise
        if ahead:  # (TensorFlow overwrites and deletes them silently)
            warnings.warn(
                f"gt.train.Checkpoint: saved {os.path.basename(path)!r}{' over the existing one' if existed else ''} "
                f"into {directory!r}, which held the checkpoints {ahead[-8:]} of that number and later: this "
                f"checkpoint's save_counter ({before}) is behind them (a new run that did not restore first?), so "
                "the next saves overwrite them, and a CheckpointManager deletes them as the oldest. Restore the "
                "latest before saving (manager.restore_or_initialize(), or "
                "checkpoint.restore(gt.train.latest_checkpoint(directory))), or save into another directory",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        return path

    # ------------------------------------------------------------------ reading
    def read(self, save_path: str | os.PathLike) -> CheckpointLoadStatus:
        """Restore from the checkpoint at ``save_path`` (what ``write`` or ``save`` returned; the
        ``.safetensors`` file itself is accepted too).  Every value found for an existing object is
        validated before any is assigned; values for objects created later are restored when they
        are created.  Returns a :class:`CheckpointLoadStatus`."""
        if active_context() is not None:
            # (it would restore once, while tracing, and never on the program's later calls)
            raise RuntimeError(
                "gt.train.Checkpoint: cannot restore inside a gt.function trace; restore between steps, "
                "outside the compiled function"
            )
        save_path = os.fspath(save_path)
        file = save_path if save_path.endswith(SUFFIX) else save_path + SUFFIX
        if not os.path.exists(file):
            raise NotFoundError(
                f"gt.train.Checkpoint: no checkpoint at {save_path!r} (no file {file!r}); pass what save() "
                "returned, or gt.train.latest_checkpoint(directory)"
            )
        header, arrays, checked = _read_safetensors(file)
        try:
            index = json.loads(header["__metadata__"]["gradtape"])
            if not isinstance(index, dict):
                raise TypeError
        except (KeyError, TypeError, json.JSONDecodeError):
            raise ValueError(
                f"{file!r} is a safetensors file but not a gradtape checkpoint (its metadata has no 'gradtape' index)"
            ) from None
        if index.get("format") != FORMAT or not isinstance(index.get("version"), int) or index["version"] > VERSION:
            raise ValueError(
                f"{file!r} is a checkpoint of format {index.get('format')!r} version {index.get('version')!r}; "
                f"this gradtape reads {FORMAT!r} up to version {VERSION}: upgrade gradtape"
            )
        entries = _verified(file, index, arrays, checked)
        self.save_counter  # noqa: B018  (created now, so that it is restored)
        restore = _Restore(self, file, entries, arrays)
        plan, errors = [], []
        restore.match(restore.root, self, "", plan, errors)
        restore.partial = bool(errors)  # a restore that raises warns of nothing more
        _raise(errors, file)
        # every value assigned while all the variables' locks are held: another thread's training
        # step runs before or after the restore, never on half-restored state
        with _optimizers._holding_locks(item[1] for item in plan if item[0] == "assign"):
            restore.apply(plan)
        return CheckpointLoadStatus(restore, self)

    def restore(self, save_path: str | os.PathLike | None) -> CheckpointLoadStatus | InitializationOnlyStatus:
        """As ``read``; ``restore(None)`` (no checkpoint yet: ``latest_checkpoint`` of an empty
        directory) restores nothing and returns a status whose assertions fail."""
        if save_path is None:
            return InitializationOnlyStatus()
        return self.read(save_path)

    def __repr__(self):
        return f"<gt.train.Checkpoint of {sorted(self._objects)}>"


# ---------------------------------------------------------------------------------------- the directory
_DIRECTORY_LOCKS: dict[str, threading.RLock] = {}
_DIRECTORY_LOCKS_LOCK = threading.Lock()


_CHECKPOINT_LOCKS: weakref.WeakKeyDictionary[Checkpoint, threading.RLock] = weakref.WeakKeyDictionary()


def _lock_in(table, key):
    """The lock ``table`` keeps for ``key``, made on first use."""
    with _DIRECTORY_LOCKS_LOCK:
        lock = table.get(key)
        if lock is None:
            lock = table[key] = threading.RLock()
        return lock


def _checkpoint_lock(checkpoint):
    """The lock of ``checkpoint``'s numbered saves (its save counter read, advanced, written); kept
    beside it, so that a Checkpoint still deep-copies."""
    return _lock_in(_CHECKPOINT_LOCKS, checkpoint)


def _directory_lock(directory):
    """The lock of the saves into ``directory`` in this process (its list is read, changed and
    written by one save at a time)."""
    return _lock_in(_DIRECTORY_LOCKS, os.path.realpath(directory))


def _unlink(file):
    try:
        os.unlink(file)
    except FileNotFoundError:
        pass


def _pid_alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # (another user's, or a system that cannot tell: left alone)
    return True


def _remove_stale_temporaries(directory, checkpoint_name):
    """Delete the temporary files that a save killed halfway left in ``directory`` (only this
    manager's kind: ``<checkpoint_name>-<n>.safetensors.tmp-<pid>-<hex>`` and the list's
    ``checkpoint.tmp-<pid>-<hex>``, of a process that no longer runs); returns their names."""
    pattern = re.compile(
        rf"(?:{re.escape(checkpoint_name)}-\d+{re.escape(SUFFIX)}|{re.escape(STATE_FILE)})\.tmp-(\d+)-[0-9a-f]{{8}}"
    )
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in names:
        m = pattern.fullmatch(name)
        if m is not None and not _pid_alive(int(m.group(1))):
            _unlink(os.path.join(directory, name))
            removed.append(name)
    return removed


def _read_state(directory, name=STATE_FILE):
    """``(state, damage)``: the directory's list of checkpoints (None where there is none), and what
    is wrong with a list that is there but cannot be read (None where nothing is)."""
    file = os.path.join(directory, name)
    try:
        with open(file, encoding="utf-8") as f:
            state = json.load(f)
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as e:
        return None, f"{type(e).__name__}: {e}"
    paths = state.get("all_model_checkpoint_paths", []) if isinstance(state, dict) else None
    latest = state.get("model_checkpoint_path", "") if isinstance(state, dict) else None
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths) or not isinstance(latest, str):
        return None, "it is not gradtape's JSON list of checkpoints"
    return state, None


def _saved_in(directory, checkpoint_name=None):
    """The checkpoints in ``directory`` (``<name>-<n>``, of ``checkpoint_name`` only where given), by
    name and then number: what a damaged or stale list of checkpoints can be rebuilt from."""
    pattern = re.compile(rf"({re.escape(checkpoint_name) if checkpoint_name else '.+'})-(\d+){re.escape(SUFFIX)}")
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = [(m.group(1), int(m.group(2))) for m in map(pattern.fullmatch, names) if m is not None]
    return [os.path.join(directory, f"{n}-{k}") for n, k in sorted(found)]


def _warn_list(file, what, directory, do):
    """A warning that the directory's list of checkpoints ``file`` cannot be trusted (``what``), naming
    the checkpoints the directory holds and what to ``do``."""
    found = [os.path.basename(p) for p in _saved_in(directory)]
    warnings.warn(
        f"gt.train: the list of checkpoints {file!r} {what}. The directory holds the checkpoints "
        f"{found[-8:] if found else '(none)'}{' (the last 8)' if len(found) > 8 else ''}; {do}",
        UserWarning,
        stacklevel=3,
    )


def _write_state(directory, latest, all_paths):
    """The directory's list of checkpoints (JSON, paths relative to it), written atomically."""
    rel = lambda p: os.path.relpath(p, directory)
    state = {
        "format": "gradtape.train.CheckpointState",
        "version": VERSION,
        "model_checkpoint_path": rel(latest),
        "all_model_checkpoint_paths": [rel(p) for p in all_paths],
    }
    data = json.dumps(state, indent=1).encode("utf-8")
    _atomic_write(os.path.join(directory, STATE_FILE), lambda f: f.write(data))


def latest_checkpoint(checkpoint_dir: str | os.PathLike, latest_filename: str | None = None) -> str | None:
    """The path of the latest checkpoint saved in ``checkpoint_dir`` (by ``save`` or a
    ``CheckpointManager``), or None when there is none, as ``tf.train.latest_checkpoint``
    (``latest_filename``: the name of the directory's list, ``"checkpoint"``)."""
    checkpoint_dir = os.fspath(checkpoint_dir)
    file = os.path.join(checkpoint_dir, latest_filename or STATE_FILE)
    state, damage = _read_state(checkpoint_dir, latest_filename or STATE_FILE)
    do = (
        "restore one by its path (checkpoint.restore(os.path.join(directory, name))), or open the "
        "directory with a CheckpointManager, which rebuilds its list"
    )
    if damage is not None:  # (TensorFlow logs a warning and returns None too; starting over is not silent)
        _warn_list(file, f"is damaged ({damage}), so no latest checkpoint is returned", checkpoint_dir, do)
        return None
    if not state or not state.get("model_checkpoint_path"):
        return None
    path = os.path.join(checkpoint_dir, state["model_checkpoint_path"])
    if not os.path.exists(path + SUFFIX):
        _warn_list(
            file,
            f"names {state['model_checkpoint_path']!r} as the latest, but its file "
            f"{os.path.basename(path + SUFFIX)!r} is missing (deleted or renamed), so no latest checkpoint is returned",
            checkpoint_dir,
            do,
        )
        return None
    return path


class CheckpointManager:
    """Numbered saves in one directory, keeping the ``max_to_keep`` latest (None keeps all), as
    ``tf.train.CheckpointManager``."""

    def __init__(
        self,
        checkpoint: Checkpoint,
        directory: str | os.PathLike,
        max_to_keep: int | None = 5,
        keep_checkpoint_every_n_hours: float | None = None,
        checkpoint_name: str = "ckpt",
        step_counter: object = None,
        checkpoint_interval: int | None = None,
        init_fn: object = None,
    ) -> None:
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"CheckpointManager manages a gt.train.Checkpoint, got {type(checkpoint).__name__}")
        for k, v in (
            ("keep_checkpoint_every_n_hours", keep_checkpoint_every_n_hours),
            ("step_counter", step_counter),
            ("checkpoint_interval", checkpoint_interval),
            ("init_fn", init_fn),
        ):
            if v is not None:
                raise NotImplementedError(f"CheckpointManager: the argument {k!r} is not supported by gradtape")
        if max_to_keep is not None and int(max_to_keep) < 1:
            raise ValueError(f"max_to_keep must be a positive integer or None, got {max_to_keep!r}")
        self._checkpoint = checkpoint
        self._directory = os.fspath(directory)
        self._max_to_keep = None if max_to_keep is None else int(max_to_keep)
        self._prefix = os.path.join(self._directory, checkpoint_name)
        with _directory_lock(self._directory):
            _remove_stale_temporaries(self._directory, checkpoint_name)
            state, damage = _read_state(self._directory)
            listed = [os.path.join(self._directory, p) for p in (state or {}).get("all_model_checkpoint_paths", [])]
            self._checkpoints = [p for p in listed if os.path.exists(p + SUFFIX)]
            file = os.path.join(self._directory, STATE_FILE)
            if damage is not None:
                # (rebuilt from the files of this manager's name, by number: nothing saved is lost,
                # restore_or_initialize finds the newest, max_to_keep keeps counting them)
                self._checkpoints = _saved_in(self._directory, checkpoint_name)
                _warn_list(
                    file,
                    f"is damaged ({damage}); this manager lists the checkpoints {checkpoint_name}-<n> it "
                    "finds instead, by number",
                    self._directory,
                    "call restore_or_initialize() to continue from the newest",
                )
            elif len(self._checkpoints) < len(listed):
                gone = [os.path.basename(p) for p in listed if p not in self._checkpoints]
                _warn_list(
                    file,
                    f"names checkpoints whose files are missing (deleted or renamed): {gone}",
                    self._directory,
                    f"this manager keeps {[os.path.basename(p) for p in self._checkpoints]}",
                )

    @property
    def directory(self) -> str:
        """The directory the checkpoints are written to."""
        return self._directory

    @property
    def checkpoint(self) -> Checkpoint:
        """The ``gt.train.Checkpoint`` this manager saves."""
        return self._checkpoint

    @property
    def checkpoints(self) -> list[str]:
        """The paths of the checkpoints kept, oldest first."""
        return list(self._checkpoints)

    @property
    def latest_checkpoint(self) -> str | None:
        """The path of the newest checkpoint kept, or None."""
        return self._checkpoints[-1] if self._checkpoints else None

    def save(self, checkpoint_number: int | None = None, check_interval: bool = True, options: object = None) -> str:
        """Save ``<directory>/<checkpoint_name>-<n>`` (``n``: ``checkpoint_number``, else the new
        ``save_counter``), list it as the latest, delete the oldest beyond ``max_to_keep``; returns
        the path."""
        listed = {}

        def record(path):  # first the list, then (below) the files it no longer names
            kept = [p for p in self._checkpoints if p != path] + [path]
            dropped = []
            if self._max_to_keep is not None and len(kept) > self._max_to_keep:
                dropped, kept = kept[: -self._max_to_keep], kept[-self._max_to_keep :]
            _write_state(self._directory, path, kept)
            listed.update(kept=kept, dropped=dropped)

        # (one save of the directory at a time: the list read, changed and written whole)
        with _directory_lock(self._directory):
            path = self._checkpoint._save_numbered(self._prefix, checkpoint_number, self._directory, record)
            self._checkpoints = listed["kept"]
            for p in listed["dropped"]:
                _unlink(p + SUFFIX)
        return path

    def restore_or_initialize(self) -> str | None:
        """Restore the latest checkpoint and return its path, or None when there is none."""
        latest = self.latest_checkpoint
        if latest is not None:
            self._checkpoint.restore(latest)
        return latest
