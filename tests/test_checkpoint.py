"""``gt.train``: checkpoints (save, restore, the manager), their file format, atomic writes,
validation, deferred restoration, resuming on the same backend bit for bit and on every other
backend; pickling and deep copies of Modules, optimizers, Variables and Generators; and the message
of a NumPy ufunc called on a tensor (issue 13, items 1 and 5)."""

from __future__ import annotations

import copy
import gc
import itertools
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import warnings
import weakref

import numpy as np
import pytest

import gradtape as gt
from gradtape.training import checkpoint as gt_train

BACKENDS = [b for b in ("numpy", "torch", "jax", "array_api_strict") if b in gt.available_backends()]

X = np.random.default_rng(0).normal(size=(16, 3))
Y = np.sin(X.sum(axis=1, keepdims=True))


def make(backend, lr=0.01):
    """A float64 MLP (built on its first call, with a seeded Dropout) and an Adam on ``backend``."""
    with gt.use_backend(backend):
        gt.random.set_seed(0)
        model = gt.layers.Sequential(
            [
                gt.layers.Dense(8, activation="tanh", dtype="float64"),
                gt.layers.Dropout(0.25, seed=3, dtype="float64"),
                gt.layers.Dense(1, dtype="float64"),
            ]
        )
        opt = gt.optimizers.Adam(lr)
    return model, opt


def step(model, opt, backend):
    with gt.use_backend(backend):
        x, y = gt.asarray(X), gt.asarray(Y)
        with gt.GradientTape() as tape:
            loss = gt.reduce_mean((model(x, training=True) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return float(loss)


def state(model, opt):
    """Every value a resumed run must reproduce: weights, slots, step count."""
    return [v.numpy() for v in model.variables] + [v.numpy() for v in opt.variables]


# ---------------------------------------------------------------------------------------- resuming
def test_resume_reproduces_the_uninterrupted_run_bit_for_bit(backend, tmp_path):
    model, opt = make(backend)
    ref = [step(model, opt, backend) for _ in range(10)]
    ref_state = state(model, opt)

    model, opt = make(backend)
    for _ in range(5):
        step(model, opt, backend)
    manager = gt.train.CheckpointManager(gt.train.Checkpoint(model=model, optimizer=opt), tmp_path, max_to_keep=3)
    path = manager.save()
    del model, opt

    model, opt = make(backend)  # fresh objects: not built, no slots yet
    status = gt.train.Checkpoint(model=model, optimizer=opt).restore(gt.train.latest_checkpoint(tmp_path))
    assert path == gt.train.latest_checkpoint(tmp_path)
    got = [step(model, opt, backend) for _ in range(5)]
    status.assert_consumed()  # the layers' weights and Adam's moments were restored when created
    assert got == ref[5:]
    for a, b in zip(state(model, opt), ref_state, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_restored_adam_finds_its_moments(backend, tmp_path):
    """Without the optimizer's slots the resumed run drifts: the test above would see it."""
    model, opt = make(backend)
    ref = [step(model, opt, backend) for _ in range(8)]
    model, opt = make(backend)
    for _ in range(4):
        step(model, opt, backend)
    path = gt.train.Checkpoint(model=model).save(tmp_path / "weights-only")
    model, opt = make(backend)
    gt.train.Checkpoint(model=model).restore(path)
    got = [step(model, opt, backend) for _ in range(4)]
    assert got != ref[4:]


@pytest.mark.parametrize("src,dst", list(itertools.permutations(BACKENDS, 2)))
def test_a_checkpoint_restores_on_every_other_backend_and_training_resumes(src, dst, tmp_path):
    model, opt = make(src)
    ref = [step(model, opt, src) for _ in range(10)]
    model, opt = make(src)
    for _ in range(5):
        step(model, opt, src)
    path = gt.train.Checkpoint(model=model, optimizer=opt).save(tmp_path / "ckpt")

    model, opt = make(dst)
    status = gt.train.Checkpoint(model=model, optimizer=opt).restore(path)
    got = [step(model, opt, dst) for _ in range(5)]
    status.assert_consumed()
    assert all(v.backend == dst for v in model.variables + opt.variables)
    assert int(opt.iterations) == 10
    np.testing.assert_allclose(got, ref[5:], rtol=1e-12, atol=0)


def test_resume_inside_gt_function(backend, tmp_path):
    """Layers built and slots created on a compiled step's first call take the checkpoint's values
    as their initial values, not as an assignment the program would repeat on every call."""

    def make_step(model, opt):
        @gt.function
        def train_step(x, y):
            with gt.GradientTape() as tape:
                loss = gt.reduce_mean((model(x) - y) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return train_step

    x, y = gt.asarray(X), gt.asarray(Y)
    model, opt = make(backend)
    f = make_step(model, opt)
    ref = [float(f(x, y)) for _ in range(10)]
    model, opt = make(backend)
    f = make_step(model, opt)
    for _ in range(5):
        f(x, y)
    path = gt.train.Checkpoint(model=model, optimizer=opt).save(tmp_path / "ckpt")
    model, opt = make(backend)
    status = gt.train.Checkpoint(model=model, optimizer=opt).restore(path)
    f = make_step(model, opt)
    got = [float(f(x, y)) for _ in range(5)]
    status.assert_consumed()
    # the first call after the restore runs eagerly while it traces; a compiler (JAX's) may round
    # its fused steps differently from that eager call
    np.testing.assert_allclose(got, ref[5:], rtol=1e-13, atol=0)
    assert int(opt.iterations) == 10


# ---------------------------------------------------------------------------------------- API
def test_save_numbers_and_the_manager_keeps_max_to_keep(backend, tmp_path):
    v = gt.Variable([1.0, 2.0])
    ckpt = gt.train.Checkpoint(v=v)
    assert ckpt.save(tmp_path / "a" / "ck") == str(tmp_path / "a" / "ck-1")
    assert ckpt.save(tmp_path / "a" / "ck") == str(tmp_path / "a" / "ck-2")
    assert gt.train.latest_checkpoint(tmp_path / "a") == str(tmp_path / "a" / "ck-2")
    assert gt.train.latest_checkpoint(tmp_path / "empty") is None
    assert gt.train.latest_checkpoint(tmp_path / "a", latest_filename="checkpoint") == str(tmp_path / "a" / "ck-2")
    assert gt.train.latest_checkpoint(tmp_path / "a", latest_filename="other") is None

    manager = gt.train.CheckpointManager(ckpt, tmp_path / "m", max_to_keep=2)
    assert manager.latest_checkpoint is None and manager.checkpoints == []
    paths = []
    for k in range(4):
        v.assign([float(k), -float(k)])
        paths.append(manager.save())
    assert [os.path.basename(p) for p in paths] == ["ckpt-3", "ckpt-4", "ckpt-5", "ckpt-6"]
    assert manager.checkpoints == paths[-2:]
    assert sorted(os.listdir(tmp_path / "m")) == ["checkpoint", "ckpt-5.safetensors", "ckpt-6.safetensors"]
    assert gt.train.latest_checkpoint(tmp_path / "m") == paths[-1]
    assert gt.train.CheckpointManager(ckpt, tmp_path / "m").checkpoints == paths[-2:]  # read back
    assert manager.save(checkpoint_number=100).endswith("ckpt-100")

    # a new Checkpoint restores the save counter: its next save continues the numbering
    w = gt.Variable([0.0, 0.0])
    ckpt2 = gt.train.Checkpoint(v=w)
    ckpt2.restore(paths[-1]).assert_consumed()
    np.testing.assert_array_equal(w.numpy(), [3.0, -3.0])
    assert int(ckpt2.save_counter) == 6
    assert ckpt2.save(tmp_path / "b" / "ck").endswith("ck-7")

    # restore(None): a first run, nothing to restore
    status = ckpt2.restore(gt.train.latest_checkpoint(tmp_path / "empty"))
    assert isinstance(status, gt.train.InitializationOnlyStatus)
    status.expect_partial()
    with pytest.raises(AssertionError, match="nothing is being restored"):
        status.assert_consumed()


def test_write_and_read_leave_the_counter_and_the_directory_list_alone(backend, tmp_path):
    v = gt.Variable(np.arange(3.0))
    ckpt = gt.train.Checkpoint(v=v)
    assert ckpt.write(tmp_path / "one") == str(tmp_path / "one")
    assert os.listdir(tmp_path) == ["one.safetensors"]
    assert int(ckpt.save_counter) == 0
    v.assign([9.0, 9.0, 9.0])
    ckpt.read(str(tmp_path / "one") + ".safetensors").assert_consumed()  # the file's own name too
    np.testing.assert_array_equal(v.numpy(), [0.0, 1.0, 2.0])


def test_what_is_tracked(backend, tmp_path):
    """Plain variables, lists and dicts of them, nested modules, a layer's weights held by no
    attribute, generators, and the optimizer's learning rate."""

    class Scale(gt.layers.Layer):
        def build(self, input_shape):
            self.add_weight("s", (), "ones", dtype="float64")  # held by no attribute

        def call(self, x):
            return x * self._added_weights[0]

    class Net(gt.Module):
        def __init__(self):
            super().__init__()
            self.blocks = [{"w": gt.Variable(np.ones(2))}, gt.Variable(3.0)]
            self.scale = Scale()
            self.child = gt.Module()
            self.child.bias = gt.Variable(np.zeros(2))

    net, gen, opt = Net(), gt.random.Generator.from_seed(5), gt.optimizers.SGD(0.25)
    net.scale(gt.ones((2,), dtype="float64"))
    net.blocks[0]["w"].assign([4.0, 5.0])
    net.child.bias.assign([-1.0, 1.0])
    net.scale._added_weights[0].assign(7.0)
    gen.normal((3,))
    path = gt.train.Checkpoint(net=net, gen=gen, opt=opt).save(tmp_path / "ck")
    ref = gen.normal((4,)).numpy()

    net2, gen2, opt2 = Net(), gt.random.Generator.from_seed(99), gt.optimizers.SGD(0.5)
    status = gt.train.Checkpoint(net=net2, gen=gen2, opt=opt2).restore(path)
    with pytest.raises(AssertionError, match=r"net/scale/\.weights/s"):
        status.assert_consumed()  # the layer is not built yet: its weight waits
    status.assert_existing_objects_matched()
    net2.scale(gt.ones((2,), dtype="float64"))  # build: the weight takes its value now
    status.assert_consumed()
    np.testing.assert_array_equal(net2.blocks[0]["w"].numpy(), [4.0, 5.0])
    np.testing.assert_array_equal(net2.child.bias.numpy(), [-1.0, 1.0])
    assert float(net2.scale._added_weights[0]) == 7.0
    np.testing.assert_array_equal(gen2.normal((4,)).numpy(), ref)  # the generator continues
    assert opt2.learning_rate == 0.25 and float(opt2._lr_variable) == 0.25


def test_root_and_attributes_set_later(backend, tmp_path):
    root = gt.Module()
    root.w = gt.Variable([1.0, 2.0])
    ckpt = gt.train.Checkpoint(root=root)
    ckpt.extra = gt.Variable(5.0)  # tracked when assigned, as TensorFlow's
    assert ckpt.extra is ckpt._objects["extra"]
    path = ckpt.save(tmp_path / "ck")
    index, _ = read_with_numpy(path + ".safetensors")
    assert set(index["tensors"]) == {"w", "extra", "save_counter"}  # the root's children at the top
    root2 = gt.Module()
    root2.w = gt.Variable([0.0, 0.0])
    gt.train.Checkpoint(root=root2, extra=gt.Variable(0.0)).restore(path).assert_consumed()
    np.testing.assert_array_equal(root2.w.numpy(), [1.0, 2.0])
    with pytest.raises(AttributeError, match="save_counter is kept by the checkpoint"):
        ckpt.save_counter = gt.Variable(0)


def test_a_pending_restore_keeps_nothing_alive(backend, tmp_path):
    layer, opt = gt.layers.Dense(2), gt.optimizers.Adam()
    x = gt.ones((1, 3))
    with gt.GradientTape() as tape:
        y = gt.reduce_sum(layer(x))
    opt.apply_gradients(zip(tape.gradient(y, layer.trainable_variables), layer.trainable_variables))
    path = gt.train.Checkpoint(layer=layer, opt=opt).save(tmp_path / "ck")
    layer2, opt2 = gt.layers.Dense(2), gt.optimizers.Adam()
    gt.train.Checkpoint(layer=layer2, opt=opt2).restore(path).expect_partial()  # waits for build
    refs = weakref.ref(layer2), weakref.ref(opt2)
    del layer2, opt2
    gc.collect()
    assert [r() for r in refs] == [None, None]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool", "complex64", "complex128"])
def test_every_dtype_round_trips(backend, dtype, tmp_path):
    value = np.array([[1, 0, 3], [4, 5, 0]]).astype(dtype)
    if dtype.startswith("complex"):
        value = value + 1j * np.array([[0.5, -2, 1], [0, 3, -1]])
    v = gt.Variable(value)
    path = gt.train.Checkpoint(v=v).save(tmp_path / "ck")
    w = gt.Variable(np.zeros_like(value))
    gt.train.Checkpoint(v=w).restore(path).assert_consumed()
    assert w.dtype == v.dtype
    np.testing.assert_array_equal(w.numpy(), value)


def test_checkpoint_refuses_what_it_cannot_track():
    with pytest.raises(ValueError, match="trackable"):
        gt.train.Checkpoint(x=3)
    with pytest.raises(TypeError, match="gt.train.Checkpoint"):
        gt.train.CheckpointManager(object(), "/nonexistent")
    with pytest.raises(NotImplementedError, match="keep_checkpoint_every_n_hours"):
        gt.train.CheckpointManager(gt.train.Checkpoint(), "/nonexistent", keep_checkpoint_every_n_hours=1)


# ---------------------------------------------------------------------------------------- the file
def read_with_numpy(path):
    """The reader docs/checkpoints.md shows: NumPy and json only."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F64": "<f8", "F32": "<f4", "I64": "<i8", "I32": "<i4", "U64": "<u8", "U8": "u1", "BOOL": "?"}
    arrays = {}
    for key, e in header.items():
        if key != "__metadata__":
            begin, end = e["data_offsets"]
            arrays[key] = np.frombuffer(data[begin:end], dtype=dtypes[e["dtype"]]).reshape(e["shape"])
    return json.loads(header["__metadata__"]["gradtape"]), arrays


def test_the_file_opens_with_numpy_alone(backend, tmp_path):
    model, opt = make(backend)
    step(model, opt, backend)
    path = gt.train.Checkpoint(model=model, optimizer=opt).save(tmp_path / "ck")
    index, arrays = read_with_numpy(path + ".safetensors")
    assert index["format"] == "gradtape.train.Checkpoint" and index["version"] == 1
    assert set(index["tensors"]) == set(arrays)
    kernel = index["tensors"]["model/_layers/0/kernel"]
    assert kernel["kind"] == "variable" and kernel["backend"] == backend.split(":")[0]
    assert kernel["dtype"] == "float64" and kernel["shape"] == [3, 8]
    np.testing.assert_array_equal(arrays["model/_layers/0/kernel"], model.layers[0].kernel.numpy())
    m = index["tensors"]["model/_layers/0/kernel/.OPTIMIZER_SLOT/optimizer/momentum"]
    assert (m["kind"], m["variable"], m["optimizer"], m["slot"]) == (
        "slot",
        "model/_layers/0/kernel",
        "optimizer",
        "momentum",
    )
    np.testing.assert_array_equal(
        arrays["model/_layers/0/kernel/.OPTIMIZER_SLOT/optimizer/momentum"],
        opt._slot(model.layers[0].kernel, "momentum").numpy(),
    )
    assert arrays["optimizer/iterations"].dtype == np.int64 and int(arrays["optimizer/iterations"]) == 1
    assert index["tensors"]["model/_layers/1/_gen"]["kind"] == "generator"


def test_the_file_opens_with_safetensors(tmp_path):
    st = pytest.importorskip("safetensors.numpy", reason="the safetensors package is not installed")
    from safetensors import safe_open

    v = gt.Variable(np.arange(6.0).reshape(2, 3))
    c = gt.Variable(np.array([1 + 2j, 3 - 1j], dtype=np.complex128))
    path = gt.train.Checkpoint(v=v, c=c).save(tmp_path / "ck") + ".safetensors"
    arrays = st.load_file(path)
    np.testing.assert_array_equal(arrays["v"], v.numpy())
    np.testing.assert_array_equal(arrays["c"], [[1.0, 2.0], [3.0, -1.0]])  # complex: float pairs
    with safe_open(path, "np") as f:
        index = json.loads(f.metadata()["gradtape"])
    assert index["tensors"]["c"]["dtype"] == "complex128" and index["tensors"]["c"]["shape"] == [2]


# ---------------------------------------------------------------------------------------- validation
def test_a_wrong_shape_or_dtype_raises_naming_the_path_and_nothing_is_half_restored(backend, tmp_path):
    a, b = gt.Variable(np.ones(3)), gt.Variable(np.ones((2, 2)))
    path = gt.train.Checkpoint(a=a, b=b).save(tmp_path / "ck")

    a2, b2 = gt.Variable(np.zeros(3)), gt.Variable(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"b: the checkpoint's value has shape \(2, 2\).*shape \(2, 3\)"):
        gt.train.Checkpoint(a=a2, b=b2).restore(path)
    np.testing.assert_array_equal(a2.numpy(), np.zeros(3))  # validated before anything was assigned

    a3 = gt.Variable(np.zeros(3, dtype=np.float32))
    with pytest.raises(ValueError, match=r"a: the checkpoint's value is float64.*is float32"):
        gt.train.Checkpoint(a=a3, b=gt.Variable(np.zeros((2, 2)))).restore(path)

    # a deferred value is validated when its object appears
    layer = gt.layers.Dense(2, dtype="float64")
    layer(gt.ones((1, 3), dtype="float64"))
    lpath = gt.train.Checkpoint(layer=layer).save(tmp_path / "layer")
    other = gt.layers.Dense(2, dtype="float64")
    gt.train.Checkpoint(layer=other).restore(lpath).expect_partial()
    with pytest.raises(ValueError, match=r"layer/kernel: the checkpoint's value has shape \(3, 2\)"):
        other(gt.ones((1, 4), dtype="float64"))


def test_missing_files_and_keys(backend, tmp_path):
    with pytest.raises(gt.train.NotFoundError, match="no checkpoint at"):
        gt.train.Checkpoint(v=gt.Variable(1.0)).restore(tmp_path / "nothing-1")
    assert issubclass(gt.train.NotFoundError, FileNotFoundError)

    v, w = gt.Variable(1.0), gt.Variable(2.0)
    path = gt.train.Checkpoint(v=v).save(tmp_path / "ck")
    status = gt.train.Checkpoint(v=v, w=w).restore(path)
    with pytest.raises(AssertionError, match=r"holds no value for them: \['w'\]"):
        status.assert_consumed()

    # a value of the checkpoint that no object takes: named, and warned about unless expected
    status = gt.train.Checkpoint(other=v).restore(path)
    with pytest.raises(AssertionError, match=r"Unresolved object in checkpoint .*\['v'\]"):
        status.assert_consumed()
    with pytest.warns(UserWarning, match=r"never restored: \['v'\]"):
        del status
        gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gt.train.Checkpoint(other=v).restore(path).expect_partial()
        gc.collect()

    # a damaged file (here: a header edited without its checksum; tests/test_checkpoint_integrity.py
    # flips every bit of a file)
    file = path + ".safetensors"
    raw = open(file, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    del header["v"]
    new = json.dumps(header).encode()
    with open(file, "wb") as f:
        f.write(len(new).to_bytes(8, "little") + new + raw[8 + n :])
    with pytest.raises(gt.train.DataLossError, match=r"is damaged: its header does not match its checksum"):
        gt.train.Checkpoint(v=v).restore(path)
    with open(file, "wb") as f:
        f.write(b"not a checkpoint")
    with pytest.raises(gt.train.DataLossError, match="is damaged or not a gradtape checkpoint"):
        gt.train.Checkpoint(v=v).restore(path)


# ---------------------------------------------------------------------------------------- atomic writes
def test_a_save_that_fails_halfway_leaves_the_previous_checkpoint(backend, tmp_path, monkeypatch):
    model, opt = make(backend)
    step(model, opt, backend)
    ckpt = gt.train.Checkpoint(model=model, optimizer=opt)
    manager = gt.train.CheckpointManager(ckpt, tmp_path)
    first = manager.save()
    saved = open(first + ".safetensors", "rb").read()
    step(model, opt, backend)

    real, calls = gt_train._write_array, []

    def failing(f, arr):
        calls.append(1)
        if len(calls) == 3:
            raise OSError("disk full (simulated)")
        real(f, arr)

    monkeypatch.setattr(gt_train, "_write_array", failing)
    with pytest.raises(OSError, match="disk full"):
        manager.save()
    assert len(calls) == 3
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-1.safetensors"]  # no temporary file left
    assert open(first + ".safetensors", "rb").read() == saved
    assert gt.train.latest_checkpoint(tmp_path) == first and manager.latest_checkpoint == first
    assert int(ckpt.save_counter) == 1
    monkeypatch.setattr(gt_train, "_write_array", real)
    assert manager.save().endswith("ckpt-2")


KILLED = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import gradtape as gt
    from gradtape import train
    gt.set_backend(sys.argv[2])
    v = gt.Variable(np.arange(1000.0))
    w = gt.Variable(np.ones((50, 50)))
    manager = gt.train.CheckpointManager(gt.train.Checkpoint(v=v, w=w), sys.argv[1])
    manager.save()
    v.assign(np.zeros(1000))
    real = train._write_array
    def slow(f, arr):
        f.write(arr.reshape(-1).view(np.uint8).data[: arr.nbytes // 2])
        f.flush()
        print("half written", flush=True)
        time.sleep(120)
    train._write_array = slow
    manager.save()
    """
)


def test_a_killed_save_loses_nothing(backend, tmp_path):
    name = backend.split(":")[0]
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(tmp_path), name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()
        assert line.strip() == "half written", line + proc.stderr.read()
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    files = sorted(os.listdir(tmp_path))
    assert files[:2] == ["checkpoint", "ckpt-1.safetensors"] and "ckpt-2.safetensors" not in files
    assert len(files) == 3 and files[2].startswith("ckpt-2.safetensors.tmp-")  # the killed write, aside
    latest = gt.train.latest_checkpoint(tmp_path)
    assert latest == str(tmp_path / "ckpt-1")
    v, w = gt.Variable(np.zeros(1000)), gt.Variable(np.zeros((50, 50)))
    ckpt = gt.train.Checkpoint(v=v, w=w)
    ckpt.restore(latest).assert_consumed()
    np.testing.assert_array_equal(v.numpy(), np.arange(1000.0))
    np.testing.assert_array_equal(w.numpy(), np.ones((50, 50)))
    # the next manager on the directory deletes what the killed process left (and only that), and
    # goes on from the list
    other = tmp_path / "other.safetensors.tmp-1-0123abcd"
    other.write_bytes(b"not ours")
    manager = gt.train.CheckpointManager(ckpt, tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-1.safetensors", other.name]
    assert manager.checkpoints == [latest]
    assert manager.save() == str(tmp_path / "ckpt-2")
    assert manager.checkpoints == [latest, str(tmp_path / "ckpt-2")]


# ---------------------------------------------------------------------------------------- pickle, deepcopy
def test_pickle_and_deepcopy(backend):
    model, opt = make(backend)
    step(model, opt, backend)  # built, slots created, a namespace cached by apply
    gen = gt.random.Generator.from_seed(11)
    gen.uniform((2,))
    var = gt.Variable([1.5, 2.5], name="v")

    for obj in (model, opt, gen, var):
        for clone in (pickle.loads(pickle.dumps(obj)), copy.deepcopy(obj)):
            assert type(clone) is type(obj)
    v2 = pickle.loads(pickle.dumps(var))
    assert v2.name == "v:0" and v2.backend == backend.split(":")[0]
    np.testing.assert_array_equal(v2.numpy(), var.numpy())
    g2 = copy.deepcopy(gen)
    np.testing.assert_array_equal(g2.uniform((3,)).numpy(), gen.uniform((3,)).numpy())  # same sequence

    # copied together, the optimizer's slots follow the copied variables (deepcopy's memo) ...
    for model2, opt2 in (copy.deepcopy((model, opt)), pickle.loads(pickle.dumps((model, opt)))):
        for v, v_copy in zip(model.trainable_variables, model2.trainable_variables, strict=True):
            m, m_copy = opt._slot(v, "momentum"), opt2._slot(v_copy, "momentum")
            assert m_copy is not m
            np.testing.assert_array_equal(m_copy.numpy(), m.numpy())
        assert opt2._slot_order == [s for _, slots in opt2._slots.values() for s in slots.values()]
        # ... and both go on as the original would, independently of it
        before = state(model, opt)
        twin_model, twin_opt = copy.deepcopy((model, opt))
        a = [step(model2, opt2, backend) for _ in range(3)]
        for x, y in zip(state(model, opt), before, strict=True):
            np.testing.assert_array_equal(x, y)  # the original did not move
        b = [step(twin_model, twin_opt, backend) for _ in range(3)]
        assert a == b
        assert len(opt2.variables) == len(opt.variables)  # no slot was created anew

    # the variables weight decay skips are the copies' too
    v = gt.Variable([1.0])
    adamw = gt.optimizers.AdamW(weight_decay=0.1)
    adamw.exclude_from_weight_decay([v])
    v2, adamw2 = copy.deepcopy((v, adamw))
    assert not adamw2._use_weight_decay(v2) and adamw2._use_weight_decay(v)


# ---------------------------------------------------------------------------------------- item 5
def test_a_numpy_ufunc_on_a_tensor_names_the_gradtape_function(backend):
    v = gt.Variable(np.array([0.5, 1.0]))
    for fn, np_name, gt_name in (
        (np.sin, "np.sin", "gt.sin"),
        (np.arcsin, "np.arcsin", "gt.asin"),
        (np.absolute, "np.absolute", "gt.abs"),
        (np.add.reduce, "np.add.reduce", "gt.sum"),
    ):
        with pytest.raises(
            TypeError,
            match=rf"{np_name} got a gt.Variable \(backend '{backend.split(':')[0]}'\).*"
            rf"call {gt_name}\(\.\.\.\) instead",
        ):
            fn(v)
    with pytest.raises(TypeError, match="gradtape has no 'logaddexp2'"):
        np.logaddexp2(v, v)
    a = np.array([1.0, 2.0])
    with pytest.raises(TypeError, match=r"array = array \+ tensor"):
        a += v
    # NumPy's operators with a tensor on the right still give gradtape's recorded answer
    with gt.GradientTape() as tape:
        y = gt.reduce_sum(np.array([2.0, 3.0]) * v + 1.0 - np.ones(2) / v)
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), [2.0 + 1 / 0.25, 3.0 + 1.0])
    assert isinstance(np.ones(2) < v, gt.Tensor)
    np.testing.assert_array_equal((np.ones(2) < v).numpy(), [False, False])
    np.testing.assert_array_equal((np.ones(2) >= v).numpy(), [True, True])
    np.testing.assert_array_equal((np.eye(2) @ v).numpy(), v.numpy())


def test_save_inside_a_traced_function_is_refused_clearly(backend, tmp_path):
    """save() inside gt.function names the checkpoint and says to save between steps (it failed on its
    save counter with a generic 'traced tensor as a NumPy array'); nothing is written, the counter stays."""
    v = gt.Variable(np.zeros(3))
    ckpt = gt.train.Checkpoint(v=v)

    @gt.function
    def step():
        v.assign_add(np.ones(3))
        ckpt.save(str(tmp_path / "ckpt"))
        return v + 1.0

    with pytest.raises(
        RuntimeError, match=r"gt.train.Checkpoint: cannot save .* inside a gt.function trace; save between"
    ):
        step()
    assert not list(tmp_path.iterdir())
    assert ckpt.save(str(tmp_path / "ckpt")).endswith("ckpt-1")  # (between steps it saves)


def test_restore_inside_a_traced_function_is_refused(backend, tmp_path):
    # it would restore once, while tracing, and never on the program's later calls: an error
    v = gt.Variable(np.zeros(3))
    ckpt = gt.train.Checkpoint(v=v)
    path = ckpt.write(str(tmp_path / "small"))

    @gt.function
    def step():
        ckpt.restore(path)
        return v + 1.0

    with pytest.raises(RuntimeError, match="cannot restore inside a gt.function trace"):
        step()
    ckpt.restore(path).assert_consumed()  # (between steps it restores)
