"""JAX arrays sharded over several devices keep their sharding through the tape (issue 14, part 2).

The checks inspect ``.sharding`` of forward outputs, gradients, variables and optimizer slots: a
batch-sharded array stays split over the mesh, a replicated one stays on every device, nothing is
gathered onto one device unless asked (``to_device("cpu")``); the values are compared with the NumPy
backend (float64).

JAX fixes its number of devices when it starts, and the pytest process may have started it with one,
so the checks run in a child interpreter with host CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=16``), on meshes of 8 of them:
``python tests/test_sharding.py --child`` runs every ``check_*`` function and prints one JSON line per
check; the parent runs that child once and reports each check as its own test.  Twice the devices
the meshes use: XLA's CPU runtime runs each device's part of an all-reduce on a thread of one pool as
large as the number of host devices (or of cores); with no spare thread, on a 2-core machine, two
computations with all-reduces in flight can wait for each other until JAX aborts the process (plain
JAX code does it too).  The spare devices hold nothing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import traceback
import warnings

import numpy as np
import pytest

import gradtape as gt

HERE = pathlib.Path(__file__).resolve()
ROOT = HERE.parent.parent
DEVICES = 8  # in each mesh
HOST_DEVICES = 2 * DEVICES
FLAG = f"--xla_force_host_platform_device_count={HOST_DEVICES}"
CHECKS = {}


def check(fn):
    """Register ``fn`` as a check the child runs."""
    CHECKS[fn.__name__] = fn
    return fn


# ------------------------------------------------------------------ helpers of the checks (child)
def _jax():
    import jax

    return jax


def _mesh(shape=(DEVICES,), axes=("batch",)):
    jax = _jax()
    return jax.sharding.Mesh(np.array(jax.devices()[: int(np.prod(shape))]).reshape(shape), axes)


def _placements(mesh=None):
    """(replicated, split by rows) on ``mesh`` (8 devices in a row by default)."""
    jax = _jax()
    mesh = _mesh() if mesh is None else mesh
    P = jax.sharding.PartitionSpec
    return jax.sharding.NamedSharding(mesh, P()), jax.sharding.NamedSharding(mesh, P(mesh.axis_names[0]))


def spec(t):
    """The partition spec of a tensor spread over the mesh (asserts it spans every device)."""
    s = t.native.sharding
    assert len(s.device_set) == DEVICES, f"{t.device}: on {len(s.device_set)} devices, not {DEVICES}"
    return tuple(s.spec)


def split_rows(t):
    assert spec(t) == ("batch",), t.device
    return True


def replicated(t):
    assert spec(t) == (), t.device
    return True


def close(a, b, tol=1e-12):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and np.allclose(a, b, rtol=tol, atol=tol), (a, b)


def _on_numpy(fn, *arrays):
    """``fn`` on NumPy-backend tensors made from ``arrays`` (float64): (outputs, gradients)."""
    with gt.use_backend("numpy"):
        xs = [gt.Variable(np.asarray(a, dtype=np.float64)) for a in arrays]
        with gt.GradientTape() as tape:
            y = fn(*xs)
            loss = gt.reduce_sum(y)
        return y.numpy(), [g.numpy() for g in tape.gradient(loss, xs)]


def _grad(fn, *xs):
    with gt.GradientTape() as tape:
        tape.watch(xs)
        y = fn(*xs)
        loss = gt.reduce_sum(y)
    return y, tape.gradient(loss, list(xs))


def _data(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


# ------------------------------------------------------------------ the checks
@check
def check_sharded_arrays_keep_their_sharding():
    jax = _jax()
    rep, split = _placements()
    xn = jax.device_put(_data(16, 4), split)
    with gt.use_backend("jax"):
        for t in (gt.constant(xn), gt.constant(xn, dtype=gt.float64), gt.Variable(xn), gt.asarray(xn)):
            assert t.native.sharding == split, t.device
        assert gt.constant(xn, dtype=gt.float32).native.sharding == split  # a cast stays where it is
        t = gt.constant(_data(16, 4), device=split)  # device= takes a sharding
        assert t.native.sharding == split
        assert gt.Variable(_data(16, 4), device=rep).native.sharding == rep
        # Tensor.device names every device and the layout, never one device
        assert t.device == "cpu:0-7 mesh(batch=8) P('batch',)" and t.device != "cpu"
        assert gt.Variable(_data(3), device=rep).device == "cpu:0-7 mesh(batch=8) P()"
        # ... and parses back: creating "on x's device" places by x's sharding
        assert gt.zeros((16, 4), device=t.device).native.sharding == split
        assert gt.ones((5,), device=t.device).native.sharding == rep  # (5 rows do not split in 8: replicated)
        # gathering onto one device is what to_device("cpu") asks for; back onto the mesh by name
        one = t.to_device("cpu")
        assert one.device == "cpu" and len(one.native.sharding.device_set) == 1
        assert one.to_device(t.device).native.sharding == split
        close(one.numpy(), t.numpy())
        # a 2-D mesh
        mesh = _mesh((4, 2), ("batch", "model"))
        grid = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch", "model"))
        g = gt.constant(_data(8, 4), device=grid)
        assert g.device == "cpu:0-7 mesh(batch=4,model=2) P('batch', 'model')", g.device
        y, (dg,) = _grad(lambda a: gt.tanh(a) * a, g)
        assert y.native.sharding == grid and dg.native.sharding == grid
        assert gt.zeros((8, 4), device=g.device).native.sharding == grid


@check
def check_to_device_gradient_goes_back_to_the_mesh():
    _, split = _placements()
    with gt.use_backend("jax"):
        x = gt.Variable(_data(16, 4), device=split)
        with gt.GradientTape() as tape:
            loss = gt.reduce_sum(gt.sin(x.to_device("cpu")))
        (g,) = tape.gradient(loss, [x])
        assert split_rows(g)
        close(g.numpy(), np.cos(x.numpy()))


@check
def check_elementwise():
    _, split = _placements()
    a, b = _data(16, 4), _data(16, 4, seed=1)

    def f(x, y):
        return gt.sin(x) * y + x * x - gt.exp(y) / 3.0

    with gt.use_backend("jax"):
        x, y = gt.constant(a, device=split), gt.constant(b, device=split)
        out, (gx, gy) = _grad(f, x, y)
    assert split_rows(out) and split_rows(gx) and split_rows(gy)
    ref, (rx, ry) = _on_numpy(f, a, b)
    close(out.numpy(), ref)
    close(gx.numpy(), rx)
    close(gy.numpy(), ry)


@check
def check_gradients_come_back_sharded_as_their_sources():
    """Gradients computed from replicated cotangents only (the ones of a sum, times a constant) are
    placed as their source: split by rows."""
    _, split = _placements()
    with gt.use_backend("jax"):
        x = gt.constant(_data(16, 4), device=split)
        for fn in (lambda v: v * 2.0, lambda v: gt.reduce_sum(v), lambda v: gt.reduce_sum(v, axis=1)):
            _, (g,) = _grad(fn, x)
            assert split_rows(g)
        # unconnected_gradients="zero": zeros where the source is
        with gt.GradientTape() as tape:
            tape.watch(x)
            loss = gt.constant(1.0, dtype=gt.float64)
        assert split_rows(tape.gradient(loss, x, unconnected_gradients="zero"))


@check
def check_compiled_gradients_come_back_sharded_as_their_sources():
    """The same inside ``gt.function``: a compiled program's gradient made from replicated cotangents
    only is constrained to its source's sharding (else XLA puts it on one device, or replicates it)."""
    rep, split = _placements()
    with gt.use_backend("jax"):
        x = gt.constant(_data(16, 4), device=split)
        w = gt.Variable(_data(4, 3, seed=1), device=rep)
        for fn in (lambda v: v * 2.0, lambda v: gt.reduce_sum(v, axis=1), lambda v: v @ w):

            @gt.function
            def step(v, fn=fn):
                with gt.GradientTape() as tape:
                    tape.watch(v)
                    loss = gt.reduce_sum(fn(v))
                return tape.gradient(loss, v)

            for _ in range(2):  # (the first call traces, the second runs the compiled program)
                g = step(x)
            assert split_rows(g)
            _, (ref,) = _grad(fn, x)
            close(g.numpy(), ref.numpy())


@check
def check_broadcasting():
    rep, split = _placements()
    a, b = _data(16, 4), _data(4, seed=1)

    def f(x, bias):
        return gt.tanh(x + bias) * 0.5

    with gt.use_backend("jax"):
        x, bias = gt.Variable(a, device=split), gt.Variable(b, device=rep)
        out, (gx, gb) = _grad(f, x, bias)
        assert split_rows(out) and split_rows(gx) and replicated(gb)
        # a Python scalar and a list beside a sharded tensor are made on its mesh
        assert split_rows(x * 3 + 1.0)
        assert split_rows(x + [1.0, 2.0, 3.0, 4.0])
    ref, (rx, rb) = _on_numpy(f, a, b)
    close(out.numpy(), ref)
    close(gx.numpy(), rx)
    close(gb.numpy(), rb)


@check
def check_reductions_along_sharded_and_unsharded_axes():
    _, split = _placements()
    a = _data(16, 4)
    cases = {
        "sum over the sharded axis": (lambda x: gt.reduce_sum(x * x, axis=0), replicated),
        "mean over the other axis": (lambda x: gt.reduce_mean(gt.sin(x), axis=1), split_rows),
        "max over the other axis": (lambda x: gt.reduce_max(x, axis=1, keepdims=True), split_rows),
        "all": (lambda x: gt.reduce_mean(x**3), replicated),
    }
    for what, (f, placed) in cases.items():
        with gt.use_backend("jax"):
            x = gt.constant(a, device=split)
            out, (g,) = _grad(f, x)
        assert placed(out), what
        assert split_rows(g), what
        ref, (rg,) = _on_numpy(f, a)
        close(out.numpy(), ref)
        close(g.numpy(), rg)


@check
def check_matmul_of_batch_sharded_by_replicated():
    rep, split = _placements()
    a, w = _data(16, 4), _data(4, 3, seed=1)

    def f(x, weights):
        return gt.matmul(x, weights)

    with gt.use_backend("jax"):
        x, weights = gt.Variable(a, device=split), gt.Variable(w, device=rep)
        out, (gx, gw) = _grad(f, x, weights)
    assert split_rows(out) and split_rows(gx)
    assert replicated(gw)  # the batch summed across the devices, on every device
    ref, (rx, rw) = _on_numpy(f, a, w)
    close(out.numpy(), ref)
    close(gx.numpy(), rx)
    close(gw.numpy(), rw)


@check
def check_indexing():
    rep, split = _placements()
    a = _data(16, 4)
    with gt.use_backend("jax", device=rep):
        index = gt.constant([0, 0, 5, 15])  # made on the mesh (the configured device): replicated
    keys = {
        "slice": slice(2, 10),
        "list (repeated rows accumulate)": [0, 0, 5, 15],
        "index tensor on the mesh": index,
        "rows and a column": (slice(None), 1),
    }
    for what, key in keys.items():
        with gt.use_backend("jax"):
            x = gt.constant(a, device=split)
            out, (g,) = _grad(lambda v, key=key: v[key] * 2.0, x)
        spec(out)  # on every device of the mesh (JAX chooses the layout of a gather)
        assert split_rows(g), what
        np_key = key.numpy() if isinstance(key, gt.Tensor) else key
        ref, (rg,) = _on_numpy(lambda v, key=np_key: v[key] * 2.0, a)
        close(out.numpy(), ref)
        close(g.numpy(), rg)


@check
def check_arrays_made_beside_a_sharded_one_are_on_its_mesh():
    rep, split = _placements()
    with gt.use_backend("jax"):
        x = gt.constant(_data(16, 4), device=split)
        assert split_rows(gt.ones_like(x)) and split_rows(gt.zeros_like(x))
        assert replicated(gt.zeros((3,), device=x.device))  # 3 does not split in 8
        r = gt.random.normal((16, 4), seed=7, dtype=gt.float64, device=x.device)
        assert split_rows(r)
        close(r.numpy(), gt.random.normal((16, 4), seed=7, dtype=gt.float64).numpy(), 0)  # the same draw
        assert split_rows(gt.one_hot(gt.constant(np.arange(16) % 4, device=split), 4))
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.nn.dropout(x, 0.5, seed=1)
            loss = gt.reduce_sum(y * 3.0)
        assert split_rows(y) and split_rows(tape.gradient(loss, x))
    # one configured placement for everything made in a scope
    with gt.use_backend("jax", device=rep):
        for t in (gt.constant(1.0), gt.zeros((5, 3)), gt.random.uniform((7,)), gt.arange(10), gt.eye(3)):
            assert replicated(t)


@check
def check_mixing_a_mesh_and_one_committed_device_is_an_error_naming_both():
    _, split = _placements()
    with gt.use_backend("jax"):
        x = gt.constant(_data(16, 4), device=split)
        bias = gt.constant(np.ones(4), device="cpu:0")  # placed on one device by the call: committed
        assert bias.native.committed
        with pytest.raises(ValueError) as info:
            x + bias
    msg = str(info.value)
    assert "cpu:0-7 mesh(batch=8) P('batch',)" in msg and "'cpu'" in msg, msg


@check
def check_unplaced_arrays_follow_a_sharded_one_as_jax_uncommitted_arrays():
    """Made without ``device=`` (a Variable of a NumPy array, a constant, a creation function), an
    array is uncommitted, as JAX makes it: it combines with a sharded array, the result and the
    gradients are placed as JAX places them, and the values are NumPy's."""
    jax = _jax()
    _, split = _placements()
    a, w0, b0 = _data(16, 4), _data(4, 3, seed=1), _data(3, seed=2)
    with gt.use_backend("jax"):
        x = gt.constant(a, device=split)
        w, b = gt.Variable(w0), gt.Variable(gt.zeros((3,), dtype=gt.float64) + b0)
        for t in (w, b, gt.constant(np.ones(4)), gt.ones((4,)), gt.random.normal((4,), seed=0)):
            assert not t.native.committed, t
        with gt.GradientTape() as tape:
            out = gt.tanh(x @ w + b)
            loss = gt.reduce_sum(out * out)
        gw, gb = tape.gradient(loss, [w, b])
        assert split_rows(out)
    jw, jb = jax.grad(lambda w, b: jax.numpy.sum(jax.numpy.tanh(x.native @ w + b) ** 2), argnums=(0, 1))(
        w.native, b.native
    )
    assert gw.native.sharding == jw.sharding and gb.native.sharding == jb.sharding, (gw.device, jw.sharding)
    _, (_, rw, rb) = _on_numpy(lambda x, w, b: gt.tanh(x @ w + b) ** 2, a, w0, b0)
    close(gw.numpy(), rw)
    close(gb.numpy(), rb)


@check
def check_variable_assign_keeps_the_sharding():
    rep, split = _placements()
    with gt.use_backend("jax"):
        v = gt.Variable(np.zeros((16, 4)), device=split)
        v.assign(np.ones((16, 4)))
        assert split_rows(v)
        v.assign(gt.constant(np.full((16, 4), 2.0)))  # made on one device: assigned where v lives
        assert split_rows(v)
        v.assign_add(gt.constant(np.ones((16, 4)), device=rep))
        v.assign_sub(np.ones((16, 4)) / 2)
        assert split_rows(v)
        close(v.numpy(), np.full((16, 4), 2.5))


def _dense_step(x, y, placement, optimizer, compiled, lazy=False, seed=0):
    """A Dense layer + loss + optimizer step, run twice; returns (layer, variables, grads, slots, losses)."""
    rep, split = placement if placement else (None, None)
    with gt.use_backend("jax", device=rep):
        gt.random.set_seed(seed)
        layer = gt.layers.Dense(3, activation="tanh", dtype=gt.float64)
        if not lazy:
            layer(gt.zeros((1, x.shape[1]), dtype=gt.float64))  # built in the scope: replicated weights
        opt = optimizer()  # (its step counter on the mesh too: a compiled step's inputs share their devices)

        def step(xb, yb):
            with gt.GradientTape() as tape:
                loss = gt.losses.mean_squared_error(yb, layer(xb))
                loss = gt.reduce_mean(loss)
            grads = tape.gradient(loss, layer.trainable_variables)
            opt.apply_gradients(zip(grads, layer.trainable_variables))
            return loss, grads

        run = gt.function(step) if compiled else step
        losses = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                loss, grads = run(gt.constant(x, device=split), gt.constant(y, device=split))
                losses.append(float(loss))
    fallbacks = [str(w.message) for w in caught if "gt.function" in str(w.message)]
    assert not fallbacks, fallbacks  # compiled by jax.jit, not replayed
    return layer, grads, opt, losses


def _adam():
    return gt.optimizers.Adam(0.05)


def _sgd():
    return gt.optimizers.SGD(0.1, momentum=0.9)


def _check_data_parallel(compiled, lazy=False, optimizers=(_adam, _sgd)):
    placement = _placements()
    x, y = _data(32, 16), _data(32, 3, seed=1)
    for make in optimizers:
        layer, grads, opt, losses = _dense_step(x, y, placement, make, compiled, lazy)
        for w in layer.trainable_variables:
            assert replicated(w), w.name
        for g in grads:
            assert replicated(g)
        slots = [v for v in opt.variables if v.ndim]
        assert slots and all(replicated(s) for s in slots)
        ref_layer, _, _, ref_losses = _dense_step(x, y, None, make, compiled=False)
        close(losses, ref_losses)
        for w, r in zip(layer.trainable_variables, ref_layer.trainable_variables):
            close(w.numpy(), r.numpy())


@check
def check_dense_layer_loss_and_optimizer_step():
    _check_data_parallel(compiled=False)


@check
def check_compiled_step_gt_function():
    _check_data_parallel(compiled=True)


@check
def check_a_layer_built_on_a_sharded_batch_gets_replicated_weights():
    """A layer built lazily by its first call on a batch-sharded input: its weights are replicated
    on the batch's devices (data parallelism), not split along the batch's mesh axis."""
    _check_data_parallel(compiled=False, lazy=True, optimizers=(_sgd,))
    _check_data_parallel(compiled=True, lazy=True, optimizers=(_adam,))


@check
def check_data_parallel_example():
    spec_ = importlib.util.spec_from_file_location("gradtape_example_data_parallel", ROOT / "examples/data_parallel.py")
    module = importlib.util.module_from_spec(spec_)
    sys.modules[spec_.name] = module
    spec_.loader.exec_module(module)
    result = module.main(["--steps", "2", "--batch", "64"])
    assert result.ok, result
    assert result.max_weight_difference <= 1e-12
    assert result.weights_device == "cpu:0-7 mesh(batch=8) P()"
    assert result.batch_device == "cpu:0-7 mesh(batch=8) P('batch',)"
    assert result.losses == pytest.approx(result.single_losses, rel=1e-12, abs=1e-12)


# ------------------------------------------------------------------ the parent: run the child once, report each check
@pytest.fixture(scope="module")
def child_results():
    pytest.importorskip("jax", reason="the sharding checks need JAX (python3 -m pip install jax)")
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(FLAG.split("=")[0])]
    env["XLA_FLAGS"] = " ".join([*flags, FLAG])
    env["JAX_PLATFORMS"] = "cpu"
    env.pop("GRADTAPE_BACKEND", None)
    proc = subprocess.run(
        [sys.executable, str(HERE), "--child"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            results.update(json.loads(line))
    return results, proc


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_sharded(name, child_results):
    results, proc = child_results
    assert name in results, f"the child did not run {name} (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    assert results[name] == "ok", results[name]


def test_the_child_ran_every_check_on_meshes_of_8_devices(child_results):
    results, proc = child_results
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(results) == sorted(CHECKS)
    assert f"jax devices: {HOST_DEVICES}" in proc.stdout


def _child():
    """Run every check (16 host devices, meshes of 8); one JSON line per check: "ok" or the traceback."""
    jax = _jax()
    print(f"jax devices: {len(jax.devices())}", flush=True)
    for name, fn in CHECKS.items():
        try:
            fn()
            out = "ok"
        except BaseException:  # (pytest.fail and friends included)
            out = traceback.format_exc()
        print(json.dumps({name: out}), flush=True)


if __name__ == "__main__" and sys.argv[1:] == ["--child"]:
    _child()
