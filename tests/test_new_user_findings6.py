"""What a sixth newcomer, from TensorFlow/Keras and PyTorch, who trusts gradtape with state (variables,
checkpoints, threads, compiled steps), met (the ``keeping6`` brief): each test fails on the code before
its fix, and runs on every backend."""

from __future__ import annotations

import os
import threading
import warnings

import numpy as np
import pytest

import gradtape as gt
from gradtape.core.tensor import Variable
from gradtape.training import checkpoint as gt_train

N = 6  # variables one training step updates together


def _sgd_run(n=N):
    """``n`` float64 variables and an SGD(1.0) whose every step adds 1 to each of them: in any state
    between two steps every variable's value equals ``iterations``."""
    vs = [gt.Variable(np.zeros(4), name=f"w{k}") for k in range(n)]
    opt = gt.optimizers.SGD(1.0)
    grads = [gt.constant(-np.ones(4)) for _ in vs]
    return vs, opt, lambda: opt.apply_gradients(zip(grads, vs))


def _one_state(values, iterations):
    """Whether the values are of one step (each equal to the step count)."""
    return all(np.array_equal(np.asarray(v), np.full(4, float(iterations))) for v in values)


def _step_in_between(step):
    """A thread that runs ``step`` once ``go`` is set; ``done`` is set when it has run.  The caller
    waits for ``done`` a short while only: where the step rightly waits for locks the caller holds,
    it runs after them."""
    go, done = threading.Event(), threading.Event()

    def run():
        go.wait(10)
        step()
        done.set()

    t = threading.Thread(target=run)
    t.start()
    return go, done, t


def _then_step(fn, vs, go, done):
    """``fn(v, ...)`` that, once it has run on the first of the variables ``vs``, lets the thread of
    :func:`_step_in_between` run its step (and waits a short while for it)."""
    first = []

    def wrapped(v, *rest):
        out = fn(v, *rest)
        if not first and any(v is w for w in vs):
            first.append(v)
            go.set()
            done.wait(0.5)
        return out

    return wrapped


def test_a_checkpoint_saved_while_another_thread_trains_is_of_one_step(backend, tmp_path, monkeypatch):
    """A save read the variables one at a time: a training step of another thread that ran between two
    reads left a checkpoint of half one step and half the next (the weights, the slots and the step
    count of no state the run was ever in), and a resume from it was silently not any step's.  Now a
    save reads every variable of the checkpoint while holding all their locks (a step waits for it)."""
    vs, opt, step = _sgd_run()
    step()
    go, done, t = _step_in_between(step)
    # after the first weight is read, another thread's step gets its chance
    monkeypatch.setattr(gt_train, "_variable_value", _then_step(gt_train._variable_value, vs, go, done))
    path = gt.train.Checkpoint(vs=vs, optimizer=opt).write(str(tmp_path / "during"))
    t.join()
    monkeypatch.undo()
    assert int(opt.iterations) == 2  # the other thread's step ran, after the save
    saved_vs = [gt.Variable(np.zeros(4)) for _ in range(N)]
    saved_opt = gt.optimizers.SGD(1.0)
    gt.train.Checkpoint(vs=saved_vs, optimizer=saved_opt).read(path)
    assert _one_state([v.numpy() for v in saved_vs], int(saved_opt.iterations))


def test_a_restore_while_another_thread_trains_is_never_half_applied(backend, tmp_path, monkeypatch):
    """A restore assigned the values one at a time: another thread's step between two assignments
    updated some variables after their restore and some before, a state that was never saved.  Now a
    restore assigns every value while holding all their locks."""
    vs, opt, step = _sgd_run()
    step()
    ckpt = gt.train.Checkpoint(vs=vs, optimizer=opt)
    path = ckpt.write(str(tmp_path / "at1"))
    for _ in range(3):
        step()
    go, done, t = _step_in_between(step)
    # after the first weight is restored, another thread's step gets its chance
    monkeypatch.setattr(Variable, "_restore", _then_step(Variable._restore, vs, go, done))
    ckpt.read(path)
    t.join()
    monkeypatch.undo()
    assert int(opt.iterations) == 2  # restored to 1, then the other thread's step
    assert _one_state([v.numpy() for v in vs], int(opt.iterations))


def test_a_save_lists_the_slots_of_the_step_it_reads(backend, tmp_path, monkeypatch):
    """An optimizer's first apply makes its slots, then takes the variables' locks: a save that listed
    the graph before the slots existed and read the values (under the locks) after that step would
    hold the step count of step 1 without its slots, and Adam would resume from fresh moments,
    silently.  The save lists the graph again once it holds the locks, and reads it only when nothing
    was added meanwhile (this guards that second listing)."""
    v = gt.Variable(np.ones(3), name="w")
    opt = gt.optimizers.Adam(0.1)
    ckpt = gt.train.Checkpoint(v=v, optimizer=opt)
    listed, calls = gt_train._slot_entries, []

    def listing(leaves, optimizers):  # a whole first step runs right after the first listing
        out = listed(leaves, optimizers)
        if not calls:
            calls.append(out)
            with gt.GradientTape() as tape:
                loss = gt.reduce_sum(v * v)
            opt.apply_gradients([(tape.gradient(loss, v), v)])
        return out

    monkeypatch.setattr(gt_train, "_slot_entries", listing)
    path = ckpt.write(str(tmp_path / "first"))
    monkeypatch.undo()
    assert calls == [[]]  # (the step did run between the listing and the read)
    v2, opt2 = gt.Variable(np.zeros(3)), gt.optimizers.Adam(0.1)
    status = gt.train.Checkpoint(v=v2, optimizer=opt2).read(path)
    assert int(opt2.iterations) == 1
    np.testing.assert_array_equal(np.asarray(v2.numpy()), np.asarray(v.numpy()))
    for var, o in ((v2, opt2), (v, opt)):  # one more step each: the restored one makes its slots now
        o.apply_gradients([(gt.constant(np.full(3, 0.5)), var)])
    status.assert_consumed()  # the saved moments found their slots
    assert not np.array_equal(np.asarray(opt.variables[1].numpy()), np.full(3, 0.05))  # (not fresh moments)
    for got, want in zip([v2, *opt2.variables], [v, *opt.variables]):
        np.testing.assert_array_equal(np.asarray(got.numpy()), np.asarray(want.numpy()))


def _saved_run(directory, saves=4, max_to_keep=3):
    """A run that saved ``saves`` numbered checkpoints of ``v`` (``v`` = the save's number) with a
    manager keeping ``max_to_keep``."""
    v = gt.Variable(np.zeros(3))
    manager = gt.train.CheckpointManager(gt.train.Checkpoint(v=v), directory, max_to_keep=max_to_keep)
    for _ in range(saves):
        v.assign_add(np.ones(3))
        manager.save()
    return manager


def _files(directory):
    return sorted(f for f in os.listdir(directory) if f.endswith(".safetensors"))


def test_a_damaged_list_of_checkpoints_is_said_and_the_manager_finds_the_newest(backend, tmp_path):
    """A damaged ``checkpoint`` list (a crash of another tool, a disk error) made latest_checkpoint
    return None and a new manager start empty, silently: the run started over, and its saves overwrote
    the earlier run's checkpoints (ckpt-1, ckpt-2, ... again).  Now latest_checkpoint warns, naming the
    checkpoints the directory holds (TensorFlow logs a warning too), and a manager rebuilds its list
    from the files of its name: restore_or_initialize continues from the newest, and nothing is lost."""
    _saved_run(tmp_path)
    with open(tmp_path / "checkpoint", "r+b") as f:
        f.seek(10)
        f.write(b"\0")
    with pytest.warns(UserWarning, match=r"/checkpoint' is damaged .*holds the checkpoints \['ckpt-2', 'ckpt-3', "):
        assert gt.train.latest_checkpoint(tmp_path) is None
    v = gt.Variable(np.zeros(3))
    with pytest.warns(UserWarning, match=r"is damaged .*lists the checkpoints ckpt-<n> it finds instead"):
        manager = gt.train.CheckpointManager(gt.train.Checkpoint(v=v), tmp_path, max_to_keep=3)
    assert manager.restore_or_initialize() == str(tmp_path / "ckpt-4")
    np.testing.assert_array_equal(np.asarray(v.numpy()), np.full(3, 4.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numbering continues: nothing overwritten, nothing to say
        assert manager.save() == str(tmp_path / "ckpt-5")
    assert _files(tmp_path) == ["ckpt-3.safetensors", "ckpt-4.safetensors", "ckpt-5.safetensors"]
    assert gt.train.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-5")  # the list is whole again


def test_a_listed_checkpoint_whose_file_is_gone_is_said(backend, tmp_path):
    """latest_checkpoint returned None when the latest listed file had been deleted or renamed, and a
    new run started over silently; a manager dropped it from its list silently.  Now both warn, naming
    the missing file and the checkpoints that are there."""
    _saved_run(tmp_path)
    os.rename(tmp_path / "ckpt-4.safetensors", tmp_path / "ckpt-4-old.safetensors")
    with pytest.warns(UserWarning, match=r"names 'ckpt-4' as the latest, but its file 'ckpt-4.safetensors' is miss"):
        assert gt.train.latest_checkpoint(tmp_path) is None
    with pytest.warns(UserWarning, match=r"whose files are missing .*\['ckpt-4'\].*keeps \['ckpt-2', 'ckpt-3'\]"):
        manager = gt.train.CheckpointManager(gt.train.Checkpoint(v=gt.Variable(np.zeros(3))), tmp_path)
    assert manager.latest_checkpoint == str(tmp_path / "ckpt-3")


def test_a_new_run_that_did_not_restore_is_told_before_its_saves_replace_the_old_ones(backend, tmp_path):
    """A restarted run that forgot to restore has save_counter 0: its manager saved ckpt-1 beside the
    earlier run's ckpt-2..4, then overwrote ckpt-2, ..., and deleted the earlier run's newest as
    the "oldest", silently (as TensorFlow does).  Now its first save warns, naming the later
    checkpoints and how to continue from them; a run that restored first saves without a word."""
    _saved_run(tmp_path)
    v = gt.Variable(np.zeros(3))
    fresh = gt.train.CheckpointManager(gt.train.Checkpoint(v=v), tmp_path, max_to_keep=3)
    with pytest.warns(
        UserWarning,
        match=r"saved 'ckpt-1' .*held the checkpoints \['ckpt-2', 'ckpt-3', 'ckpt-4'\].*"
        r"restore_or_initialize",
    ):
        fresh.save()
    ckpt = gt.train.Checkpoint(v=gt.Variable(np.zeros(3)))
    resumed = gt.train.CheckpointManager(ckpt, tmp_path, max_to_keep=3)
    ckpt.restore(str(tmp_path / "ckpt-4"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resumed.save() == str(tmp_path / "ckpt-5")


@pytest.mark.parametrize("reg", ["l2", "l1", lambda out: gt.reduce_sum(out)])
def test_dense_refuses_an_activity_regularizer_it_would_never_apply(backend, reg):
    """``Dense(activity_regularizer=...)`` was accepted and kept, and never applied: ``layer.losses``
    held no penalty of the outputs, and the model trained without the regularization the user asked
    for, silently.  gradtape's layers have no ``add_loss``, so it is refused as weight constraints are,
    saying what to write instead; the weight regularizers still work."""
    with pytest.raises(NotImplementedError, match=r"activity_regularizer is not supported.*add the penalty"):
        gt.layers.Dense(2, activity_regularizer=reg)
    layer = gt.layers.Dense(2, kernel_regularizer="l2", kernel_initializer="ones")
    layer(gt.ones((1, 3)))
    np.testing.assert_allclose(float(gt.add_n(layer.losses)), 0.01 * 6)


def test_a_checkpoint_of_a_schedule_leaves_a_constant_learning_rate_alone(backend, tmp_path):
    """An optimizer with a schedule saved its (unread) learning-rate variable, 0.0: restored into an
    optimizer with a constant learning rate, it set that rate to 0.0, and training resumed without
    moving a weight, silently.  As in Keras, an optimizer with a schedule has no learning-rate
    variable: nothing of it is saved, and the constant rate stays the user's."""
    v = gt.Variable(np.ones(3))
    scheduled = gt.optimizers.Adam(gt.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9))
    scheduled.apply_gradients([(gt.constant(np.ones(3)), v)])
    path = gt.train.Checkpoint(v=v, opt=scheduled).write(str(tmp_path / "scheduled"))
    v2, constant = gt.Variable(np.zeros(3)), gt.optimizers.Adam(0.01)
    status = gt.train.Checkpoint(v=v2, opt=constant).read(path)
    assert constant.learning_rate == 0.01 and int(constant.iterations) == 1
    before = np.asarray(v2.numpy()).copy()
    constant.apply_gradients([(gt.constant(np.ones(3)), v2)])  # (its slots made: the moments restore)
    with pytest.raises(AssertionError, match=r"holds no value for them: \['opt/learning_rate'\]"):
        status.assert_consumed()  # every saved value was used; the constant rate has none (as TensorFlow)
    assert np.all(np.asarray(v2.numpy()) < before)  # it trains
    # a constant rate saved and restored into a constant-rate optimizer is still restored
    path = gt.train.Checkpoint(v=v2, opt=constant).write(str(tmp_path / "constant"))
    again = gt.optimizers.Adam(0.5)
    gt.train.Checkpoint(v=gt.Variable(np.zeros(3)), opt=again).read(path).expect_partial()  # (slots: not made)
    assert again.learning_rate == 0.01


class _Scale(gt.layers.Layer):
    """A custom layer as Keras' guides write them: its weight made by ``add_weight`` and read back
    from ``self.weights``, held by no attribute."""

    def build(self, input_shape):
        self.add_weight("s", (input_shape[-1],), "ones")
        self.built = True

    def call(self, x):
        return x * self.weights[0]


def test_a_module_over_a_custom_layer_trains_its_add_weight_variables(backend):
    """A ``gt.Module`` holding a layer found the layer's variables by its attributes only: a weight
    made by ``add_weight`` and held by no attribute was missing from the Module's
    ``trainable_variables`` (and ``variables``), so the training loop never updated it, silently
    (``tf.Module`` finds it: a Keras layer lists it in an attribute).  Now a Module's walk takes a
    layer's ``add_weight`` variables too, after its attributes' (the order is otherwise unchanged)."""

    class Model(gt.Module):
        def __init__(self):
            super().__init__()
            self.scale = _Scale()
            self.head = gt.layers.Dense(1, kernel_initializer="ones")

        def __call__(self, x):
            return self.head(self.scale(x))

    model = Model()
    x = gt.constant(np.array([[1.0, 2.0]], dtype=np.float32))
    model(x)
    s = model.scale.weights[0]
    tv = model.trainable_variables  # (TF's order: the head's attributes sorted, then the scale's weight)
    assert [id(v) for v in tv] == [id(model.head.bias), id(model.head.kernel), id(s)]
    assert any(v is s for v in model.variables)
    opt = gt.optimizers.SGD(0.1)
    with gt.GradientTape() as tape:
        loss = gt.reduce_sum(model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    np.testing.assert_allclose(np.asarray(s.numpy()), [0.9, 0.8], rtol=1e-6)  # d loss / d s = x * kernel
    assert len({id(v) for v in model.trainable_variables}) == len(model.trainable_variables) == 3


def test_a_frozen_layer_inside_a_module_is_not_trained(backend):
    """``layer.trainable = False`` hid the layer's weights from its own (and a Sequential's)
    ``trainable_variables``, but a ``gt.Module`` holding the layer still listed them, so a training
    loop over the Module's ``trainable_variables`` fine-tuned the frozen layer, silently.  Now a
    Module leaves a frozen layer's variables out of ``trainable_variables`` and lists them in
    ``non_trainable_variables`` (as Keras 3, which marks them non-trainable); unfreezing restores them."""

    class Model(gt.Module):
        def __init__(self):
            super().__init__()
            self.encoder = gt.layers.Dense(3)
            self.head = gt.layers.Dense(1)
            self.extra = gt.Variable(np.ones(1, np.float32), name="extra")

        def __call__(self, x):
            return self.head(self.encoder(x)) * self.extra

    model = Model()
    x = gt.ones((4, 2))
    model(x)
    everything = [id(v) for v in model.trainable_variables]
    model.encoder.trainable = False
    frozen = {id(model.encoder.kernel), id(model.encoder.bias)}
    assert [id(v) for v in model.trainable_variables] == [i for i in everything if i not in frozen]
    assert {id(v) for v in model.non_trainable_variables} == frozen
    kernel = np.asarray(model.encoder.kernel.numpy()).copy()
    opt = gt.optimizers.SGD(0.1)
    with gt.GradientTape() as tape:
        loss = gt.reduce_sum(model(x) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    np.testing.assert_array_equal(np.asarray(model.encoder.kernel.numpy()), kernel)
    model.encoder.trainable = True
    assert [id(v) for v in model.trainable_variables] == everything
    assert len(model.variables) == 5


def _native(backend, values):
    """``values`` as the backend's own array (a torch tensor, a NumPy array...)."""
    return gt.asarray(np.asarray(values), backend=backend)._v


@pytest.mark.parametrize("source", ["numpy", "native"])
def test_a_variable_does_not_share_memory_with_the_array_it_was_given(backend, source):
    """``gt.Variable(arr)`` and ``v.assign(arr)`` copy a NumPy or native array, as TensorFlow and JAX do: a
    later in-place change of the caller's array changed the variable (NumPy, torch, array_api_strict)."""
    b = backend.split(":")[0]
    make = (lambda vals: np.array(vals)) if source == "numpy" else (lambda vals: _native(backend, vals))
    arr = make([1.0, 2.0])
    v = gt.Variable(arr)
    try:
        arr[0] = 99.0
    except (TypeError, ValueError, NotImplementedError):
        pytest.skip(f"{source} arrays of {b} cannot be changed in place: nothing to share")
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    new = make([3.0, 4.0])
    v.assign(new)
    new[1] = 77.0
    np.testing.assert_array_equal(v.numpy(), [3.0, 4.0])


def test_an_integer_or_bool_variable_refuses_values_it_cannot_hold(backend):
    """A NumPy or native float array assigned to an integer variable was truncated (1.5 -> 1), integers
    other than 0 and 1 made a bool variable True: a TypeError now, as a Python float 1.5 already was; values
    held exactly still pass."""
    b = backend.split(":")[0]
    i = gt.Variable(gt.asarray(3, backend=b))
    for bad in (np.array(1.5), _native(backend, [1.5])[0]):
        with pytest.raises(TypeError, match="cannot hold|without changing"):
            i.assign(bad)
    assert int(i.numpy()) == 3
    i.assign(np.array(2.0))
    assert int(i.numpy()) == 2
    flags = gt.Variable(gt.asarray([True, False], backend=b))
    for bad in ([2, 0], np.array([3, 0])):
        with pytest.raises(TypeError, match="only 0 and 1"):
            flags.assign(bad)
    flags.assign([1, 1])
    np.testing.assert_array_equal(flags.numpy(), [True, True])
