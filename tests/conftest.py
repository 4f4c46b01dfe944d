"""Test configuration: every test that takes the ``backend`` fixture runs once per selected backend.

``pytest --backend=all`` (the default) selects every installed backend; ``--backend=numpy,torch``
a list, whose entries may name a device (``--backend=torch:cuda,jax:gpu`` runs the suite on GPUs).
Inside such a test the backend is active (``gt.use_backend``), so ``gt.constant`` and friends create
tensors on it (and on its device).

A test that also takes the ``device`` fixture runs on the backend's CPU and on its first GPU; the GPU
run is marked ``gpu``.  Tests marked ``gpu`` need an accelerator for the backend under test and skip
cleanly (with the reason) where there is none.
"""

from __future__ import annotations

import os

# SciPy reads it once, when first imported (by any test module): its array-API dispatch, which
# the third-party and special-function tests differentiate through
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import pytest

import gradtape as gt
from gradtape.core import backend_registry as _backends

# the table of the run per backend (tests, outcomes, time), the slowest files and the peak memory, at the end;
# JAX's caches cleared when the process grows past GRADTAPE_TEST_MEMORY_MIB
from suite_summary import (  # noqa: F401
    pytest_collection_modifyitems,
    pytest_runtest_logreport,
    pytest_runtest_teardown,
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_testnodedown,
    prepare_process,
)

prepare_process()  # XLA's quicker compiles for the suite's tiny arrays, a thread a worker (suite_summary.py)

#: SciPy's and scikit-learn's own suites with gradtape (issue 21): a runner, not tests of this suite;
#: ``python tests/downstream/run.py --help``
collect_ignore = ["downstream"]


def pytest_addoption(parser):
    parser.addoption(
        "--backend",
        default=os.environ.get("GRADTAPE_TEST_BACKENDS", "all"),
        help="backends to run the suite on: 'all' (installed ones) or a comma-separated list "
        "of names, each optionally with a device (numpy,torch:cuda,jax:gpu)",
    )


def pytest_configure(config):
    if os.environ.get("GRADTAPE_BACKEND", "").strip():  # a bad one: one line now, not an error per test file
        try:
            gt.get_backend()
        except (ValueError, ImportError, RuntimeError) as e:
            raise pytest.UsageError(" ".join(str(e).split())) from None
    config.addinivalue_line("markers", "gpu: needs a CUDA/GPU device (skipped without one)")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


#: The default run (``--backend all``) runs a lazy backend (dask: every check computes a task graph,
#: ~5 ms of scheduling each) on these modules only -- its own tests, the seeds' examples, the tape and
#: the third-party libraries; ``tests/test_conformance.py``'s quick pass covers every op on it.  Name it
#: (``pytest --backend dask``) to run the whole suite on it (about 35 minutes on 2 cores).
LAZY_BACKEND_MODULES = {
    "test_dask",
    "test_dask_cluster",
    "test_tape",
    "test_tensorflow_examples",
    "test_third_party",
    "test_views",
    "test_indexing_numpy",
    "test_einsum",
    "test_recompute",
}


#: installed backends that cannot run here (CuPy without a usable GPU): name -> why; reported in the header
_UNUSABLE: dict[str, str | None] = {}


def _usable(name):
    if name not in _UNUSABLE:
        try:
            _backends.get(name)
            _UNUSABLE[name] = None
        except RuntimeError as e:  # installed but cannot run here (cupy without a GPU)
            _UNUSABLE[name] = " ".join(str(e).split())
    return _UNUSABLE[name] is None


def pytest_report_header(config):
    return [f"backend {n!r} left out of --backend all: {why}" for n, why in _UNUSABLE.items() if why] or None


def _lazy(name):
    return getattr(_backends.get(name.split(":")[0]), "lazy", False)


def selected_backends(config, module=None):
    """The backends ``--backend`` names; for ``all``, the installed ones (a lazy one only in the
    modules of ``LAZY_BACKEND_MODULES`` when ``module`` is given)."""
    spec = config.getoption("--backend")
    if spec == "all":
        names = [n for n in gt.available_backends() if _usable(n)]
        if module is not None and module.split(".")[-1] not in LAZY_BACKEND_MODULES:
            names = [n for n in names if not _lazy(n)]
        return names
    names = [s.strip() for s in spec.split(",") if s.strip()]
    missing = [n for n in names if n.split(":")[0] not in gt.available_backends()]
    if missing:
        raise pytest.UsageError(f"--backend names backends that are not installed: {missing}")
    for n in names:
        name, _, dev = n.partition(":")
        if dev:
            try:
                _backends.get(name).parse_device(dev)
            except ValueError as e:
                raise pytest.UsageError(f"--backend {n}: {e}") from None
    return names


def _parametrized_names(metafunc):
    names = set()
    for m in metafunc.definition.iter_markers("parametrize"):
        argnames = m.args[0] if m.args else m.kwargs.get("argnames", ())
        if isinstance(argnames, str):
            argnames = [a.strip() for a in argnames.split(",")]
        names.update(argnames)
    return names


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", selected_backends(metafunc.config, metafunc.module.__name__), indirect=True)
    if (
        "device" in metafunc.fixturenames
        and "backend" in metafunc.fixturenames
        and "device" not in _parametrized_names(metafunc)
    ):
        metafunc.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)], indirect=True)


@pytest.fixture
def backend(request):
    """The name of the backend under test; it is the active backend for the test's duration."""
    with gt.use_backend(request.param):
        yield request.param


def gpu_devices(backend_spec):
    """Backend-neutral names of the accelerators the backend (``"torch"``, ``"torch:cuda"``) has here."""
    try:
        b = _backends.get(backend_spec.split(":")[0])
    except (ImportError, RuntimeError):  # not installed, or installed without a usable GPU (cupy)
        return []
    return [d for d in b.devices() if _backends.is_gpu_device(d)]


@pytest.fixture
def device(request, backend):
    """The device under test, as a backend-neutral string: ``"cpu"``, or the backend's first GPU
    (``"cuda:0"``, ``"gpu:0"``) for the run marked ``gpu`` -- skipped where the backend has none."""
    if request.param == "cpu":
        if "cpu" not in _backends.get(backend.split(":")[0]).devices():
            pytest.skip(f"backend {backend!r} has no CPU device (its arrays live in GPU memory)")
        return "cpu"
    gpus = gpu_devices(backend)
    if not gpus:
        pytest.skip(f"backend {backend!r} has no GPU here")
    return gpus[0]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """On a lazy backend (dask), a test that runs an op whose result's shape depends on the data (a lazy
    boolean mask, ``repeat`` by a tensor of counts) skips, naming the backend's limitation: gradtape
    raises DataDependentShapeError there, by design (tests/test_dask.py checks the errors themselves)."""
    try:
        return (yield)
    except _backends.DataDependentShapeError as e:
        spec = getattr(item, "callspec", None)
        name = spec.params.get("backend") if spec is not None else None
        if name is None or not _lazy(name):
            raise
        pytest.skip(f"{name.split(':')[0]} cannot size this result before computing it: {e}")


def pytest_runtest_setup(item):
    marker = item.get_closest_marker("gpu")
    if marker is None:
        return
    spec = getattr(item, "callspec", None)
    if marker.args:  # @pytest.mark.gpu("cupy"): the backends the test needs
        names = [n for n in marker.args if n in gt.available_backends()]
    elif spec is not None and "backend" in spec.params:
        names = [spec.params["backend"]]
    else:
        names = [n for n in ("torch", "jax", "cupy") if n in gt.available_backends()]
    if not any(gpu_devices(n) for n in names):
        pytest.skip(f"needs a GPU ({', '.join(names) or 'no GPU-capable backend installed'}: none here)")
