"""The Dask backend on a ``dask.distributed`` cluster, on data larger than a worker's memory (issue 14).

A ``LocalCluster`` of two worker processes, one thread and 256 MiB each, differentiates a logistic
loss over a float64 design matrix four times larger than one worker's memory (1 GiB, 128 row chunks of
8 MiB).  The matrix is generated on the workers chunk by chunk from per-chunk seeds: it never exists
on the driver.  The tests check that

* recording the tape and taking the gradient compute nothing (the scheduler sees no task) and give
  dask arrays whose graph is at most 1.5x the gradient a user would write in dask by hand;
* the gradient computes in one streamed pass: every worker's peak RSS under its memory limit, no
  worker restarted, no task larger than one chunk of X, a few chunks spilled at most, each chunk
  generated once for the loss and its gradient;
* the same data persisted on the cluster (so dask must spill it to disk) gives the same gradient;
* both equal, to 1e-10, the NumPy backend's gradient summed chunk by chunk over the same chunks
  (the loss is a sum over rows, so each chunk is a smaller slice of the same problem);
* ``gt.compute`` computes a loss and its gradients in one pass, their shared intermediates once;
* gradients come back with the chunks of their sources.

Nothing here is marked ``slow``: the file takes about 15 s on two cores (30 s on a loaded machine).
"""

from __future__ import annotations

import collections
import contextlib
import resource
import sys

import cloudpickle
import numpy as np
import pytest

import gradtape as gt

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # speed only: the NumPy reference then runs with BLAS's own threads
    threadpool_limits = None

dask = pytest.importorskip("dask", reason="the dask backend needs dask[array] (pip install gradtape[dask])")
da = pytest.importorskip("dask.array", reason="the dask backend needs dask[array] (pip install gradtape[dask])")
distributed = pytest.importorskip("distributed", reason="cluster tests need distributed (pip install gradtape[dask])")
psutil = pytest.importorskip("psutil", reason="worker memory is read with psutil (a dependency of distributed)")

if "dask" not in gt.available_backends():
    pytest.skip("the dask backend is not installed (pip install gradtape[dask])", allow_module_level=True)

# The functions below run on the worker processes: ship them by value, so the workers need not import
# this test module (its directory is not on their path).
cloudpickle.register_pickle_by_value(sys.modules[__name__])

MiB = 2**20
LIMIT = 256 * MiB  # each worker's memory limit
D = 32  # features
CHUNK_ROWS = 2**15  # 8 MiB float64 row chunks of X
CHUNKS = 4 * LIMIT // (CHUNK_ROWS * D * 8)  # 128 chunks: X is 1 GiB, 4x one worker's limit
ROWS = CHUNKS * CHUNK_ROWS
X_BYTES = ROWS * D * 8
SEED = 14
W0 = np.linspace(-1.0, 1.0, D)
B0 = 0.1
CALLS = collections.Counter()  # runs of _x_block_counted per chunk, in this process


def x_chunk(i, rows=CHUNK_ROWS):
    """Chunk ``i`` of the design matrix: multiples of 1/128 uniform on [-1, 1), from its own seed."""
    rng = np.random.default_rng([SEED, i, 0])
    return rng.integers(-128, 128, size=(rows, D), dtype=np.int8) / 128.0


def t_chunk(i, rows=CHUNK_ROWS):
    """Chunk ``i`` of the 0/1 labels, from its own seed."""
    return (np.random.default_rng([SEED, i, 1]).random(rows) < 0.5).astype(np.float64)


def _x_block(block_id=None):
    return x_chunk(block_id[0])


def _t_block(block_id=None):
    return t_chunk(block_id[0])


def lazy_data(chunks=CHUNKS, tag=""):
    """X and t as dask arrays generated on the workers, one task per chunk (named ``gen-x``/``gen-t``)."""
    X = da.map_blocks(_x_block, chunks=((CHUNK_ROWS,) * chunks, (D,)), dtype=np.float64, name=f"gen-x{tag}")
    t = da.map_blocks(_t_block, chunks=((CHUNK_ROWS,) * chunks,), dtype=np.float64, name=f"gen-t{tag}")
    return X, t


def logistic_loss(X, t, w, b, rows):
    """Mean logistic loss of the linear model ``X @ w + b`` against labels ``t``: a sum over rows."""
    z = X @ w + b
    return gt.sum(gt.logaddexp(0.0, z) - t * z) / rows


def taped_gradient(X, t, rows):
    """The loss and its gradient in (w, b), recorded on the active backend."""
    w = gt.Variable(W0, dtype=gt.float64)
    b = gt.Variable(B0, dtype=gt.float64)
    with gt.GradientTape() as tape:
        loss = logistic_loss(gt.constant(X, dtype=gt.float64), gt.constant(t, dtype=gt.float64), w, b, rows)
    gw, gb = tape.gradient(loss, [w, b])
    return w, loss, gw, gb


def _peak_rss():
    """This process's peak RSS in bytes: /proc's VmHWM, the high-water mark of this process's own memory
    (not ru_maxrss: Linux carries that over exec from the parent's forked copy, so a worker spawned by a
    big pytest process would report the parent's size)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # (no /proc: ru_maxrss, in KiB on Linux)


def worker_memory(dask_worker):
    """A worker's current and peak RSS, the bytes it has written to disk so far (spilled, counted by its
    metrics, whether or not they are still there), its process id."""
    return {
        "rss": psutil.Process().memory_info().rss,
        "peak": _peak_rss(),
        "spilled": sum(v for k, v in dask_worker.digests_total.items() if k[-2:] == ("disk-write", "bytes")),
        "pid": psutil.Process().pid,
    }


def transitions(dask_scheduler):
    return dask_scheduler.transition_counter


def graph(*arrays):
    """The merged task graph of dask ``arrays`` (keys they share counted once)."""
    return dict(dask.highlevelgraph.HighLevelGraph.merge(*(a.dask for a in arrays)))


def runs(task_stream, name):
    """How many tasks of the array ``name`` (keys ``(name, i, ...)``) the workers ran."""
    return sum(1 for ts in task_stream.data if ts["key"][0] == name)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    # a worker process takes ~100 MiB before it holds any data: keep the data it holds in memory to a
    # quarter of its limit (dask's default, 60 %, brings a 256 MiB worker to the 95 % kill line)
    with (
        dask.config.set({"distributed.worker.memory.target": 0.25}),
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=LIMIT,
            dashboard_address=":0",
            local_directory=str(tmp_path_factory.mktemp("dask-spill")),
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def reference():
    """The NumPy backend's loss and gradient over the whole problem, summed chunk by chunk (each chunk
    a smaller slice of the same sum over rows; the driver holds one chunk at a time)."""
    loss, gw, gb = 0.0, np.zeros(D), 0.0
    # one BLAS thread: on 2 busy cores OpenBLAS's threads contend and the reference takes 10x longer
    limits = threadpool_limits(1) if threadpool_limits else contextlib.nullcontext()
    with limits, gt.use_backend("numpy"):
        for i in range(CHUNKS):
            _, li, gwi, gbi = taped_gradient(x_chunk(i), t_chunk(i), ROWS)
            loss += float(li)
            gw += gwi.numpy()
            gb += float(gbi.numpy())
    return loss, gw, gb


def check_memory(client, before, task_stream, *, spilled):
    """No worker restarted, none near its limit; no task made more than one chunk of X (a task whose
    result grows with the number of rows would make the gradient fail at 10x or 100x); spilled to disk
    as expected."""
    biggest = max(task_stream.data, key=lambda ts: ts.get("nbytes", 0))
    assert biggest["nbytes"] <= CHUNK_ROWS * D * 8, (
        f"task {biggest['key']} made {biggest['nbytes'] / MiB:.0f} MiB, more than one chunk of X"
    )
    after = client.run(worker_memory)
    assert sorted(m["pid"] for m in after.values()) == sorted(m["pid"] for m in before.values()), (
        "a worker was restarted (killed by its nanny for memory)"
    )
    for addr, m in after.items():
        assert m["peak"] < 0.95 * LIMIT, f"worker {addr} peaked at {m['peak'] / MiB:.0f} MiB"
    total_spilled = sum(m["spilled"] - before[a]["spilled"] for a, m in after.items())
    if spilled:
        assert total_spilled > 2 * LIMIT, f"expected most of X on disk, spilled {total_spilled / MiB:.0f} MiB"
    else:
        # the gradient streams: a chunk of X is dropped once the forward and backward matmuls read it.
        # Dask may spill a few chunks it holds a little longer (0-250 MiB seen); a graph that needed all
        # of X at once (a backward waiting on the loss's value) would spill most of it.
        assert total_spilled < X_BYTES / 2, f"a streamed gradient spilled {total_spilled / MiB:.0f} MiB"


def test_gradient_of_a_loss_four_times_a_workers_memory(client, reference):
    X, t = lazy_data()
    assert X.nbytes == X_BYTES == 4 * LIMIT
    before = client.run(worker_memory)
    seen = client.run_on_scheduler(transitions)
    with gt.use_backend("dask"):
        w, loss, gw, gb = taped_gradient(X, t, ROWS)

    # recorded lazily: nothing reached the cluster, the results are dask graphs
    assert client.run_on_scheduler(transitions) == seen, "recording or differentiating computed something"
    for r in (loss, gw, gb):
        assert isinstance(r.native, da.Array)
    assert gw.native.chunks == w.native.chunks
    taped = graph(loss.native, gw.native, gb.native)
    assert sum(k[0] == "gen-x" for k in taped) == CHUNKS, "the gradient regenerates X"

    # the same gradient written in dask by hand: gradtape's graph is at most 1.5x its size
    z = X @ W0 + B0
    r = (1.0 / (1.0 + da.exp(-z)) - t) / ROWS
    hand = [da.sum(da.logaddexp(0.0, z) - t * z) / ROWS, X.T @ r, da.sum(r)]
    n_hand = len(graph(*hand))
    assert len(taped) <= 1.5 * n_hand, (len(taped), n_hand)

    with distributed.get_task_stream(client) as ts:
        L, GW, GB = gt.compute(loss, gw, gb)
    assert runs(ts, "gen-x") == CHUNKS, "each chunk of X is generated once for the loss and its gradient"
    check_memory(client, before, ts, spilled=False)

    loss_ref, gw_ref, gb_ref = reference
    np.testing.assert_allclose(L, loss_ref, rtol=1e-10)
    np.testing.assert_allclose(GW, gw_ref, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(GB, gb_ref, rtol=1e-10, atol=1e-15)


def test_gradient_from_data_spilled_to_disk(client, reference):
    X, t = lazy_data(tag="-persisted")
    before = client.run(worker_memory)
    X = client.persist(X)  # the user keeps the data set on the cluster: it does not fit, dask spills it
    distributed.wait(X)
    with gt.use_backend("dask"):
        _, loss, gw, gb = taped_gradient(X, t, ROWS)
    with distributed.get_task_stream(client) as ts:
        L, GW, GB = gt.compute(loss, gw, gb)
    assert runs(ts, "gen-x-persisted") == 0, "the persisted chunks are read back, not regenerated"
    check_memory(client, before, ts, spilled=True)
    del X

    loss_ref, gw_ref, gb_ref = reference
    np.testing.assert_allclose(L, loss_ref, rtol=1e-10)
    np.testing.assert_allclose(GW, gw_ref, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(GB, gb_ref, rtol=1e-10, atol=1e-15)


def _x_block_counted(block_id=None):
    CALLS[block_id[0]] += 1
    return x_chunk(block_id[0])


def test_compute_computes_shared_intermediates_once():
    """On the synchronous scheduler, where every ``compute`` runs its whole graph in this process (a
    cluster may reuse a key it still holds from the previous compute, so it cannot tell)."""
    chunks = 4
    X = da.map_blocks(_x_block_counted, chunks=((CHUNK_ROWS,) * chunks, (D,)), dtype=np.float64, name="gen-x-counted")
    _, t = lazy_data(chunks, tag="-counted")
    with gt.use_backend("dask"):
        _, loss, gw, gb = taped_gradient(X, t, chunks * CHUNK_ROWS)

    with dask.config.set(scheduler="sync"):
        CALLS.clear()
        values = gt.compute(loss, gw, gb)
        together = sum(CALLS.values())
        CALLS.clear()
        one_by_one = [loss.compute(), gw.compute(), gb.compute()]
        apart = sum(CALLS.values())
    # the chunks of X that the loss and both gradients read are made once by gt.compute, three times
    # by three separate computes
    assert together == chunks
    assert apart == 3 * chunks
    for v, u in zip(values, one_by_one):
        assert isinstance(v, np.ndarray)
        np.testing.assert_array_equal(v, u)


def test_gradients_come_back_with_the_chunks_of_their_sources():
    """The gradients in X and t (8 row chunks each) have their sources' chunks; nothing is computed."""
    X, t = lazy_data(8, tag="-layout")
    with gt.use_backend("dask"):
        Xt, tt = gt.constant(X, dtype=gt.float64), gt.constant(t, dtype=gt.float64)
        w = gt.Variable(W0, dtype=gt.float64)
        with gt.GradientTape() as tape:
            tape.watch([Xt, tt])
            loss = logistic_loss(Xt, tt, w, B0, 8 * CHUNK_ROWS)
        gX, gt_ = tape.gradient(loss, [Xt, tt])
    assert gX.native.chunks == X.chunks
    assert gt_.native.chunks == t.chunks
