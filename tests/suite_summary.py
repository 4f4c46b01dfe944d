"""The suite's cost, per backend, at the end of a run (issue 26): a run of 20,000 tests on five backends
ends with a table a person can read -- tests, outcomes and time per backend, the slowest files, and
the peak memory of the process -- instead of only a total. ``tests/conftest.py`` takes the hooks.

    ----------------------------- the run, per backend ------------------------------
    backend            tests   passed   failed  skipped     time
    numpy               4812     4790        0       22   4m 05s
    ...
    the slowest files: test_forward_walk.py 2m 10s, ...
    peak memory (RSS) of this process: 2.1 GB

A test without a backend (the docs, the CLI...) counts under "(none)".

It also keeps the process's memory in check: JAX compiles every op for every shape it meets and keeps
each executable, so the registry-wide tests on the jax backend grow the process by gigabytes (the first
60 tests of tests/test_forward_walk.py on jax: 3.0 GB resident; with JAX's caches cleared, 0.6 GB).
When the process holds more than ``GRADTAPE_TEST_MEMORY_MIB`` (default 8192, a safety valve) after a
test, JAX's caches are cleared; the ops compile again when next met. Clearing is costly: every later
JAX test compiles afresh (at 1536 MiB, nine clearings in a run went with the JAX share of the suite
growing several times over), so the default keeps it for a process that would otherwise run out.

And it makes JAX compile faster (:func:`quick_jax_compiles`, before JAX is imported): on the jax backend
the suite's time is XLA compiling (eager JAX compiles every op for every new shape and dtype, ~50 ms each,
80% of the jax backend's time), not running, the tests' arrays being tiny; and it lowers JAX's programs
into one MLIR context per thread rather than one per program (:func:`reuse_mlir_contexts`: the jax
backend's tests of tests/test_cross_backend.py took 104 CPU seconds, 72 so).
"""

from __future__ import annotations

import collections
import gc
import os
import resource
import sys

import pytest

from gradtape.conformance.jax_compiles import quick_jax_compiles, reuse_mlir_contexts


def prepare_process():
    """Called by tests/conftest.py before any backend is loaded: :func:`quick_jax_compiles`, and under
    pytest-xdist one thread per worker for PyTorch's ops (``OMP_NUM_THREADS=1`` unless set): the workers share
    the cores, and PyTorch's threads waiting on each other run its tests many times slower (README)."""
    quick_jax_compiles()
    if os.environ.get("PYTEST_XDIST_WORKER") and "torch" not in sys.modules:
        os.environ.setdefault("OMP_NUM_THREADS", "1")


NONE = "(none)"
#: under pytest-xdist (``pytest -n 2``) each worker is a process of its own: the limit is shared among them
WORKERS = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
MEMORY_LIMIT_MIB = int(os.environ.get("GRADTAPE_TEST_MEMORY_MIB", str(8192 // WORKERS)))
_backend_of: dict[str, str] = {}
#: pytest-xdist's workers' peak memory and clearings (read in the controller when each worker ends)
_workers: dict[str, tuple[int, int]] = {}
_worker_limit_mib: list[int] = []
_outcomes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
_seconds: dict[str, float] = collections.defaultdict(float)
_file_seconds: dict[str, float] = collections.defaultdict(float)


def _clock(seconds):
    m, s = divmod(round(seconds), 60)
    return f"{m}m {s:02d}s" if m else f"{seconds:.1f}s"


def peak_rss_bytes():
    """The process's peak resident memory (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def rss_mib():
    """The process's resident memory now, in MiB (None where /proc is not there to read it)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return None


clearings = []  # the resident MiB before and after each clearing of JAX's caches
#: the size past which the next clearing happens: the limit, or, where a clearing left the process above
#: half of it (memory the allocator keeps, other libraries' caches), that size plus half the limit, so
#: that a process that stays large does not clear (and recompile, and collect) after every test
_next_clearing_mib = [float(MEMORY_LIMIT_MIB)]


def pytest_runtest_teardown(item, nextitem):
    reuse_mlir_contexts()
    jax = sys.modules.get("jax")
    if jax is None:
        return
    before = rss_mib()
    if before is not None and before > _next_clearing_mib[0]:
        jax.clear_caches()
        gc.collect()
        after = rss_mib() or before
        clearings.append((before, after))
        _next_clearing_mib[0] = max(MEMORY_LIMIT_MIB, after + MEMORY_LIMIT_MIB / 2)


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        spec = getattr(item, "callspec", None)
        name = spec.params.get("backend") if spec is not None else None
        _backend_of[item.nodeid] = name if isinstance(name, str) else NONE
        # (xdist's controller does not collect: the backend travels in the reports)
        item.user_properties.append(("gradtape_backend", _backend_of[item.nodeid]))


def pytest_sessionfinish(session):
    """A pytest-xdist worker hands its peak memory and clearings to the controller."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["gradtape_peak_rss"] = peak_rss_bytes()
        out["gradtape_clearings"] = len(clearings)
        out["gradtape_limit_mib"] = MEMORY_LIMIT_MIB


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    out = getattr(node, "workeroutput", None) or {}
    if "gradtape_peak_rss" in out:
        _workers[node.gateway.id] = (out["gradtape_peak_rss"], out["gradtape_clearings"])
        _worker_limit_mib.append(out.get("gradtape_limit_mib", MEMORY_LIMIT_MIB))


def pytest_runtest_logreport(report):
    backend = dict(report.user_properties).get("gradtape_backend") or _backend_of.get(report.nodeid, NONE)
    _seconds[backend] += report.duration
    _file_seconds[report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]] += report.duration
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = "failed" if report.failed else report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        _outcomes[backend][outcome] += 1


def rows():
    """``[(backend, tests, passed, failed, skipped, seconds)]``, the backends in the order they ran."""
    out = []
    for backend, counts in _outcomes.items():
        failed = counts["failed"] + counts["xpassed"]
        skipped = counts["skipped"] + counts["xfailed"]
        out.append((backend, sum(counts.values()), counts["passed"], failed, skipped, _seconds[backend]))
    return out


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    table = rows()
    if not table:
        return
    tr = terminalreporter
    tr.write_sep("-", "the run, per backend")
    tr.write_line(f"{'backend':<18}{'tests':>7}{'passed':>9}{'failed':>9}{'skipped':>9}{'time':>10}")
    for backend, n, passed, failed, skipped, seconds in table:
        tr.write_line(f"{backend:<18}{n:>7}{passed:>9}{failed:>9}{skipped:>9}{_clock(seconds):>10}")
    slowest = sorted(_file_seconds.items(), key=lambda kv: -kv[1])[:5]
    tr.write_line("the slowest files: " + ", ".join(f"{f} {_clock(s)}" for f, s in slowest))
    if _workers:  # pytest-xdist: the times above are the tests' own, summed over the workers
        peaks = " + ".join(f"{peak / 2**30:.1f}" for peak, _ in _workers.values())
        cleared = sum(n for _, n in _workers.values())
        tr.write_line(
            f"peak memory (RSS) of the {len(_workers)} workers: {peaks} GB (times above: summed over them)"
            + (f"; JAX's caches cleared {cleared} time(s) above {max(_worker_limit_mib)} MiB each" if cleared else "")
        )
        return
    tr.write_line(
        f"peak memory (RSS) of this process: {peak_rss_bytes() / 2**30:.1f} GB"
        + (f"; JAX's caches cleared {len(clearings)} time(s) above {MEMORY_LIMIT_MIB} MiB" if clearings else "")
    )
