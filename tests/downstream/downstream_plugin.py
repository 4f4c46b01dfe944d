"""pytest plugin of the downstream runner (``tests/downstream/run.py``): adds gradtape as one more
array namespace to SciPy's or scikit-learn's own array-API tests, beside a reference namespace, and
records every test's outcome to a JSON file.

Loaded by the runner with ``-p downstream_plugin`` (it puts this folder on ``PYTHONPATH``); it is
configured through the environment, which the runner sets:

``GRADTAPE_DOWNSTREAM_SUITE``  ``scipy`` or ``sklearn``
``GRADTAPE_DOWNSTREAM_REF``    the reference namespace: ``array_api_strict`` or ``torch``
``GRADTAPE_DOWNSTREAM_OUT``    the JSON file the outcomes are written to
``GRADTAPE_DOWNSTREAM_ONLY``   optional: a file of node ids to run (the runner's ``--only``)

Nothing of SciPy's or scikit-learn's is edited: SciPy's ``xp`` fixture (``scipy/conftest.py``) is
re-declared with the two namespaces as its parameters, and scikit-learn's
``yield_namespace_device_dtype_combinations`` is replaced before its test modules import it.  Only
the tests parametrized with one of the two namespaces are kept (the others are deselected).
"""

from __future__ import annotations

import json
import os
import re

import pytest

SUITE = os.environ.get("GRADTAPE_DOWNSTREAM_SUITE", "scipy")
REF = os.environ.get("GRADTAPE_DOWNSTREAM_REF", "array_api_strict")
OUT = os.environ.get("GRADTAPE_DOWNSTREAM_OUT", "downstream.json")
GT = "gradtape"

#: a namespace's name as one token of a test's parameter id (``test_x[gradtape-float32]``,
#: ``check_array_api_input(array_namespace=gradtape,...)``)
_TOKEN = {name: re.compile(rf"(?<![A-Za-z0-9_.]){re.escape(name)}(?![A-Za-z0-9_])") for name in ("gradtape", REF)}

#: sklearn: the (device, dtype) combinations each namespace is tested with, as sklearn does for
#: array_api_strict (two devices, float64 and float32) and torch (cpu, float64 and float32)
_SKLEARN_COMBOS = {
    "array_api_strict": [("CPU_DEVICE", "float64"), ("device1", "float32")],
    "torch": [("cpu", "float64"), ("cpu", "float32")],
    GT: [("cpu", "float64"), ("cpu", "float32")],
}


def _patch_scipy():
    import gradtape
    import scipy.conftest as sc  # SCIPY_ARRAY_API is set by the runner before this import

    marks = [pytest.mark.array_api_backends]
    ref = [p for p in sc.xp_available_backends if p.id == REF]
    if not ref:
        raise RuntimeError(f"reference namespace {REF!r} is not among SciPy's backends here")
    params = [*ref, pytest.param(gradtape, id=GT, marks=marks)]
    # np_only / cpu_only / eager_only markers name gradtape like any non-NumPy backend
    sc.xp_known_backends.add(GT)
    name, _, device = os.environ.get("GRADTAPE_BACKEND", "numpy").partition(":")
    if getattr(gradtape.backends.get(name), "lazy", False):
        sc.xp_skip_eager_only_backends.add(GT)
    if device and device != "cpu":  # SciPy's cpu_only markers skip GPU backends
        sc.xp_skip_cpu_only_backends.add(GT)
    sc.xp_available_backends[:] = params
    sc.xp = pytest.fixture(params=params)(sc.xp.__wrapped__)


def _patch_sklearn():
    import sklearn.utils._array_api as aa
    import sklearn.utils.estimator_checks as ec

    def yield_namespaces(include_numpy_namespaces=True):
        yield from (REF, GT)

    def yield_namespace_device_dtype_combinations(include_numpy_namespaces=True):
        for name in (REF, GT):
            for device, dtype in _SKLEARN_COMBOS[name]:
                yield name, device, dtype

    for mod in (aa, ec):
        if hasattr(mod, "yield_namespaces"):
            mod.yield_namespaces = yield_namespaces
        mod.yield_namespace_device_dtype_combinations = yield_namespace_device_dtype_combinations


if SUITE == "scipy":
    _patch_scipy()
elif SUITE == "sklearn":
    _patch_sklearn()
else:
    raise RuntimeError(f"GRADTAPE_DOWNSTREAM_SUITE={SUITE!r}: expected 'scipy' or 'sklearn'")


def namespace_of(nodeid):
    """``'gradtape'``, the reference's name, or None: which namespace a test is parametrized with."""
    params = nodeid.partition("[")[2]
    for name in (GT, REF):
        if _TOKEN[name].search(params):
            return name
    return None


_results: dict[str, dict] = {}


#: ``--only``: a file of node ids (one a line); every other test is deselected
_ONLY = os.environ.get("GRADTAPE_DOWNSTREAM_ONLY")


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected theirs: only what runs is recorded
def pytest_collection_modifyitems(session, config, items):
    only = set(open(_ONLY).read().splitlines()) if _ONLY else None
    keep, drop = [], []
    for item in items:
        wanted = namespace_of(item.nodeid) and (only is None or item.nodeid in only)
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
    for item in keep:
        _results[item.nodeid] = {"namespace": namespace_of(item.nodeid), "outcome": None, "error": ""}


def _error(excinfo, when):
    """The exception's first line, and up to four more non-blank lines of it (an ``AssertionError`` of
    ``xp_assert_close`` says what differs on its second and later lines)."""
    lines = [ln.strip() for ln in excinfo.exconly().strip().splitlines() if ln.strip()] or [""]
    return f"[{when}] " + lines[0][:300], " | ".join(lines[1:5])[:600]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    rec = _results.get(item.nodeid)
    if rec is None:
        return report
    if report.failed and rec["outcome"] != "failed":
        rec["outcome"] = "failed"
        if call.excinfo is not None:
            rec["error"], rec["detail"] = _error(call.excinfo, report.when)
    elif report.skipped and rec["outcome"] is None:
        rec["outcome"] = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        if call.excinfo is not None:
            rec["error"] = _error(call.excinfo, report.when)[0]
    elif report.when == "call" and report.passed and rec["outcome"] is None:
        rec["outcome"] = "xpassed" if hasattr(report, "wasxfail") else "passed"
    return report


_done = [0]


def _dump(exitstatus):
    done = {k: v for k, v in _results.items() if v["outcome"] is not None}
    with open(OUT + ".tmp", "w") as f:
        json.dump({"suite": SUITE, "reference": REF, "exitstatus": exitstatus, "tests": done}, f, indent=0)
    os.replace(OUT + ".tmp", OUT)


def pytest_runtest_logfinish(nodeid, location):
    # every 200 tests the outcomes so far: a run cut short by the runner's --timeout still reports
    _done[0] += 1
    if _done[0] % 200 == 0:
        _dump(None)


def pytest_sessionfinish(session, exitstatus):
    _dump(int(exitstatus))
