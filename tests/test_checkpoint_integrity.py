"""Nothing lost (issue 22, items 2-4): checkpoints that detect their own damage (every single-bit
flip of a file), a ``CheckpointManager`` that keeps a true list under threads, failures (an error
halfway, a full disk) and ``kill -9``, and deferred restoration at any depth, as TensorFlow's."""

from __future__ import annotations

import copy
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
import zlib

import numpy as np
import pytest

import gradtape as gt
from gradtape.training import checkpoint as gt_train

DataLossError = gt.train.DataLossError


def small_checkpoint(tmp_path):
    """A small file: two variables of two dtypes (and the save counter)."""
    v = gt.Variable(np.array([1.0, 2.0, 3.0, 4.0]), dtype=gt.float32)
    n = gt.Variable(np.array([7, -9]), dtype=gt.int64)
    return gt.train.Checkpoint(v=v, n=n).write(tmp_path / "small")


# ---------------------------------------------------------------------------------------- checksums
def test_every_bit_flip_is_harmless_or_a_data_loss_error_before_anything_changes(backend, tmp_path):
    """Every bit of the file on NumPy's backend; one bit of every byte (a different one in each) on the
    others: the file is checked before any backend sees a value, so the others add only the assignment
    (which must not happen), at an eighth of the time."""
    path = small_checkpoint(tmp_path)
    file = path + ".safetensors"
    raw = open(file, "rb").read()
    assert len(raw) < 1200
    bits = range(len(raw) * 8) if backend == "numpy" else [8 * i + i % 8 for i in range(len(raw))]
    caught = 0
    for bit in bits:
        damaged = bytearray(raw)
        damaged[bit // 8] ^= 1 << (bit % 8)
        with open(file, "wb") as f:
            f.write(damaged)
        v = gt.Variable(np.full(4, -1.0), dtype=gt.float32)
        n = gt.Variable(np.zeros(2, dtype=np.int64), dtype=gt.int64)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # (a file read as one of an earlier gradtape would warn)
                gt.train.Checkpoint(v=v, n=n).read(path).assert_consumed()
        except DataLossError as e:
            assert repr(file) in str(e), (bit, str(e))
            np.testing.assert_array_equal(v.numpy(), np.full(4, -1.0))  # nothing was assigned
            np.testing.assert_array_equal(n.numpy(), [0, 0])
            caught += 1
            continue
        # harmless: the values are the saved ones
        np.testing.assert_array_equal(v.numpy(), [1.0, 2.0, 3.0, 4.0], err_msg=f"bit {bit}")
        np.testing.assert_array_equal(n.numpy(), [7, -9], err_msg=f"bit {bit}")
    # (every bit is covered by a checksum: every flip is caught, none is restored)
    assert caught == len(bits)


def test_a_damaged_tensor_is_named(backend, tmp_path):
    path = small_checkpoint(tmp_path)
    file = path + ".safetensors"
    raw = bytearray(open(file, "rb").read())
    raw[-1] ^= 0x40  # the last byte of the data: the last tensor by key ('v')
    with open(file, "wb") as f:
        f.write(raw)
    v = gt.Variable(np.zeros(4), dtype=gt.float32)
    n = gt.Variable(np.zeros(2, dtype=np.int64), dtype=gt.int64)
    with pytest.raises(
        DataLossError, match=r"small.safetensors' is damaged: the tensor 'v' does not match its checksum"
    ):
        gt.train.Checkpoint(v=v, n=n).restore(path)
    assert issubclass(DataLossError, ValueError)
    assert not np.any(v.numpy()) and not np.any(n.numpy())


@pytest.mark.parametrize("extra", [1, 16, 4096])
def test_bytes_after_the_last_tensor_are_a_data_loss_error(backend, tmp_path, extra):
    """A file longer than its header says (appended to, or two files run together) is refused before
    anything changes, as the safetensors library refuses it ("file not fully covered")."""
    path = small_checkpoint(tmp_path)
    with open(path + ".safetensors", "ab") as f:
        f.write(b"\0" * extra)
    v = gt.Variable(np.zeros(4), dtype=gt.float32)
    n = gt.Variable(np.zeros(2, dtype=np.int64), dtype=gt.int64)
    with pytest.raises(
        DataLossError, match=rf"small.safetensors' is damaged.*holds {extra} bytes after its last tensor"
    ):
        gt.train.Checkpoint(v=v, n=n).read(path)
    assert not np.any(v.numpy()) and not np.any(n.numpy())


def without_checksums(file):
    """``file`` rewritten as gradtape wrote it before checksums (no "crc32", no header checksum)."""
    raw = open(file, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    meta = header["__metadata__"]
    del meta[gt_train.HEADER_CRC]
    index = json.loads(meta["gradtape"])
    del index["checksums"]
    for e in index["tensors"].values():
        del e["crc32"]
    meta["gradtape"] = json.dumps(index, sort_keys=True)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return header, len(head).to_bytes(8, "little") + head + raw[8 + n :]


def test_a_checkpoint_of_an_earlier_gradtape_restores_with_a_warning(backend, tmp_path):
    path = small_checkpoint(tmp_path)
    file = path + ".safetensors"
    _, old = without_checksums(file)
    assert b"crc32" not in old
    with open(file, "wb") as f:
        f.write(old)
    v = gt.Variable(np.zeros(4), dtype=gt.float32)
    n = gt.Variable(np.zeros(2, dtype=np.int64), dtype=gt.int64)
    with pytest.warns(UserWarning, match="written by an earlier gradtape, without checksums"):
        gt.train.Checkpoint(v=v, n=n).restore(path).assert_consumed()
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0, 3.0, 4.0])

    # there, a damaged name is caught by matching the index against the tensors
    for k in range(len(old)):
        if old[k : k + 4] == b'"n":':  # the tensor's key in the safetensors header
            damaged = old[:k] + b'"m":' + old[k + 4 :]
            break
    with open(file, "wb") as f:
        f.write(damaged)
    with pytest.warns(UserWarning, match="without checksums"):
        with pytest.raises(DataLossError, match=r"the index names the tensor 'n' but the file does not hold it"):
            gt.train.Checkpoint(v=v, n=n).restore(path)


def test_the_checksums_are_zlib_crc32_of_the_stored_bytes(tmp_path):
    """What docs/checkpoints.md says, so that another reader can check a file."""
    path = small_checkpoint(tmp_path)
    raw = open(path + ".safetensors", "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    index = json.loads(header["__metadata__"]["gradtape"])
    assert index["checksums"] == "gradtape-crc32"
    data = raw[8 + n :]
    for key, e in index["tensors"].items():
        begin, end = header[key]["data_offsets"]
        assert e["crc32"] == zlib.crc32(data[begin:end])
    stored = header["__metadata__"]["gradtape_crc32"]
    zeroed = raw[: 8 + n].replace(f'"gradtape_crc32":"{stored}"'.encode(), b'"gradtape_crc32":"00000000"')
    assert int(stored, 16) == zlib.crc32(zeroed)


# ---------------------------------------------------------------------------------------- the manager
@pytest.mark.parametrize("max_to_keep", [None, 3])
def test_two_threads_saving_on_one_manager_keep_a_true_list(backend, tmp_path, max_to_keep):
    v = gt.Variable(np.arange(3.0))
    ckpt = gt.train.Checkpoint(v=v)
    manager = gt.train.CheckpointManager(ckpt, tmp_path, max_to_keep=max_to_keep)
    start = threading.Barrier(2)
    paths, errors = [], []

    def work():
        try:
            start.wait()
            for _ in range(50):
                paths.append(manager.save())
        except BaseException as e:  # (re-raised below)
            errors.append(e)

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(before)
    assert not errors, errors
    every = [str(tmp_path / f"ckpt-{k}") for k in range(1, 101)]
    assert sorted(paths, key=lambda p: int(p.rsplit("-", 1)[1])) == every  # each number once
    kept = every if max_to_keep is None else every[-max_to_keep:]
    assert manager.checkpoints == kept
    assert gt.train.CheckpointManager(ckpt, tmp_path, max_to_keep=max_to_keep).checkpoints == kept
    assert sorted(os.listdir(tmp_path)) == sorted(["checkpoint"] + [os.path.basename(p) + ".safetensors" for p in kept])
    assert int(ckpt.save_counter) == 100
    copy.deepcopy(ckpt)  # (its lock is kept beside it: a Checkpoint still deep-copies)


@pytest.mark.parametrize("where", ["tensor", "list"])
def test_a_full_disk_leaves_nothing_and_advances_nothing(backend, tmp_path, monkeypatch, where):
    """ENOSPC raised by the writer of a tensor (halfway through the file) or of the directory's
    list (after the file was written): no new file, no temporary, the counter and the list as they
    were; the next save goes on."""
    v = gt.Variable(np.arange(6.0))
    ckpt = gt.train.Checkpoint(v=v)
    manager = gt.train.CheckpointManager(ckpt, tmp_path)
    first = manager.save()
    state = open(tmp_path / "checkpoint", "rb").read()

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device (simulated)")

    monkeypatch.setattr(gt_train, "_write_array" if where == "tensor" else "_write_state", full)
    with pytest.raises(OSError, match="No space left"):
        manager.save()
    with pytest.raises(OSError, match="No space left"):
        ckpt.save(tmp_path / "ckpt")
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-1.safetensors"]
    assert open(tmp_path / "checkpoint", "rb").read() == state
    assert int(ckpt.save_counter) == 1
    assert manager.checkpoints == [first] and gt.train.latest_checkpoint(tmp_path) == first
    monkeypatch.undo()
    assert manager.save() == str(tmp_path / "ckpt-2")
    assert manager.checkpoints == [first, str(tmp_path / "ckpt-2")]


SAVING = textwrap.dedent(
    """
    import sys
    import numpy as np
    import gradtape as gt
    gt.set_backend(sys.argv[2])
    v = gt.Variable(np.zeros(20000))
    ckpt = gt.train.Checkpoint(v=v)
    manager = gt.train.CheckpointManager(ckpt, sys.argv[1], max_to_keep=4)
    for i in range(1, 100000):
        v.assign(np.full(20000, float(i)))
        manager.save()   # ckpt-i holds i everywhere
        print(i, flush=True)
    """
)


def test_kill_9_during_saves_never_leaves_a_checkpoint_that_restores_wrongly(backend, tmp_path):
    name = backend.split(":")[0]
    rng = np.random.default_rng(0)
    for attempt in range(3):
        directory = tmp_path / str(attempt)
        proc = subprocess.Popen(
            [sys.executable, "-c", SAVING, str(directory), name], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            for _ in range(3):  # a few saves done, then killed at a random moment of the next ones
                line = proc.stdout.readline()
                assert line, proc.stderr.read()
            time.sleep(float(rng.uniform(0.0, 0.05)))
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=60)
            proc.stdout.close()
            proc.stderr.close()
        v = gt.Variable(np.zeros(20000))
        ckpt = gt.train.Checkpoint(v=v)
        manager = gt.train.CheckpointManager(ckpt, directory, max_to_keep=4)
        files = os.listdir(directory)
        assert not [f for f in files if ".tmp-" in f]  # the killed save's temporaries: removed
        assert manager.checkpoints and manager.latest_checkpoint == gt.train.latest_checkpoint(directory)
        for p in manager.checkpoints:  # every listed checkpoint restores, and to what was saved
            ckpt.restore(p).assert_consumed()
            k = float(p.rsplit("-", 1)[1])
            np.testing.assert_array_equal(v.numpy(), np.full(20000, k))
        manager.save()  # and the directory is usable


# ---------------------------------------------------------------------------------------- deferred
# TensorFlow 2.21.0 (tf.train.Checkpoint, tf.Module, tf.keras.optimizers.Adam(0.1), float64), run in
# a throwaway environment: a checkpoint {model: {w, inner: {deeper: {w}}, mod: Module{k}, var, opt}}
# (opt: two Adam steps on var) restored into an empty Checkpoint to which each object is attached
# afterwards, as in the test below.  TF restores (values pinned; TF's Adam itself rounds differently
# from Keras' formula, by 4e-6 here, so its moments are not compared with gradtape's):
TF_DEPTH1_W = [1.0, 2.0]  # h2.w, attached to the top Checkpoint after restore()
TF_DEPTH3_W = [[3.0, 4.0]]  # h2.inner.deeper.w, two Checkpoints attached below it, then the variable
TF_MODULE_K = [5.0, 6.0, 7.0]  # h2.mod.k, a Module attached, then its variable
TF_ITERATIONS_AFTER_ATTACH = 2  # an Adam attached after its variable: its step count at once
TF_VAR_RESTORED_EQUALS_SAVED = True  # bit for bit
TF_SLOTS_RESTORED_EQUAL_SAVED = True  # the moments, when the optimizer creates them
TF_STEP_AFTER_RESTORE_EQUALS_UNINTERRUPTED = True  # one more step: the same variable as never stopped


def test_deferred_restoration_at_any_depth_matches_tensorflow(backend, tmp_path):
    f64 = gt.float64
    w1 = gt.Variable([1.0, 2.0], dtype=f64)
    w3 = gt.Variable([[3.0, 4.0]], dtype=f64)
    m = gt.Module()
    m.k = gt.Variable([5.0, 6.0, 7.0], dtype=f64)
    var = gt.Variable([0.5, -0.5], dtype=f64)
    opt = gt.optimizers.Adam(0.1)
    for g in ([1.0, 2.0], [0.5, -1.0]):
        opt.apply_gradients([(gt.constant(g, dtype=f64), var)])
    inner = gt.train.Checkpoint(deeper=gt.train.Checkpoint(w=w3))
    holder = gt.train.Checkpoint(w=w1, inner=inner, mod=m, var=var, opt=opt)
    path = gt.train.Checkpoint(model=holder).save(tmp_path / "ck")

    h2 = gt.train.Checkpoint()
    status = gt.train.Checkpoint(model=h2).restore(path)
    h2.w = gt.Variable(gt.zeros(2, dtype=f64))
    np.testing.assert_array_equal(h2.w.numpy(), TF_DEPTH1_W)
    inner2 = gt.train.Checkpoint()
    h2.inner = inner2
    deeper2 = gt.train.Checkpoint()
    inner2.deeper = deeper2
    deeper2.w = gt.Variable(gt.zeros((1, 2), dtype=f64))
    np.testing.assert_array_equal(deeper2.w.numpy(), TF_DEPTH3_W)
    m2 = gt.Module()
    h2.mod = m2
    m2.k = gt.Variable(gt.zeros(3, dtype=f64))
    np.testing.assert_array_equal(m2.k.numpy(), TF_MODULE_K)
    var2 = gt.Variable(gt.zeros(2, dtype=f64))
    h2.var = var2
    assert np.array_equal(var2.numpy(), var.numpy()) == TF_VAR_RESTORED_EQUALS_SAVED
    opt2 = gt.optimizers.Adam(0.1)
    h2.opt = opt2  # attached after its variable was restored: its slots wait for their creation
    assert int(opt2.iterations) == TF_ITERATIONS_AFTER_ATTACH
    saved_slots = [opt._slot(var, s).numpy() for s in ("momentum", "velocity")]
    restored = []
    real = gt.optimizers.Adam.update_step

    def spy(self, gradient, variable, learning_rate):  # the slots as the step finds them
        restored.extend(self._slot(variable, s).numpy() for s in ("momentum", "velocity"))
        real(self, gradient, variable, learning_rate)

    gt.optimizers.Adam.update_step = spy
    try:
        opt2.apply_gradients([(gt.constant([1.0, 1.0], dtype=f64), var2)])
    finally:
        gt.optimizers.Adam.update_step = real
    assert all(map(np.array_equal, restored, saved_slots)) == TF_SLOTS_RESTORED_EQUAL_SAVED
    opt.apply_gradients([(gt.constant([1.0, 1.0], dtype=f64), var)])  # the run never interrupted
    assert np.array_equal(var2.numpy(), var.numpy()) == TF_STEP_AFTER_RESTORE_EQUALS_UNINTERRUPTED
    assert int(opt2.iterations) == TF_ITERATIONS_AFTER_ATTACH + 1
    status.assert_consumed()


def test_tensorflows_error_names_are_under_gt_errors():
    """``except gt.errors.DataLossError`` catches what a damaged checkpoint raises, as ``tf.errors``."""
    assert gt.errors.DataLossError is gt.train.DataLossError and issubclass(gt.errors.DataLossError, ValueError)
    assert gt.errors.NotFoundError is gt.train.NotFoundError and issubclass(gt.errors.NotFoundError, FileNotFoundError)
    assert issubclass(gt.errors.OperatorNotAllowedInGraphError, TypeError)
