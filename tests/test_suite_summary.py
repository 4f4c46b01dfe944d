"""The run ends with its cost per backend (tests/suite_summary.py, issue 26): a row per backend with its
tests, outcomes and time, the slowest files, and the process's peak memory."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gradtape.conformance import jax_compiles

ROOT = Path(__file__).resolve().parent.parent


def _habits_run_table(*extra):
    """The summary table of a small run (four tests of tests/test_habits.py on numpy), ``extra`` pytest
    options added; the run must pass."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("GRADTAPE_TEST_BACKENDS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_habits.py", "--backend", "numpy", "-q", "-p", "no:cacheprovider"]
        + ["-k", "the_issues_habits or no_getattr or dir_of or gradient_tape_hint", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-2000:]
    table = out[out.index("the run, per backend") :]
    assert re.search(r"^numpy\s+1\s+1\s+0\s+0\s+\S", table, re.M), table
    assert re.search(r"^\(none\)\s+1\s+1\s+0\s+0\s+\S", table, re.M), table
    return table


def test_the_run_ends_with_a_table_per_backend():
    table = _habits_run_table()
    assert "the slowest files: test_habits.py" in table
    assert re.search(r"peak memory \(RSS\) of this process: \d+\.\d GB", table), table


def test_jax_caches_are_cleared_above_the_memory_limit(tmp_path):
    """With the limit at 1 MiB every jax test's teardown clears JAX's caches, and the summary says so;
    the tests still pass (the ops compile again)."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed: no caches to clear")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GRADTAPE_TEST_MEMORY_MIB": "1"}
    env.pop("GRADTAPE_TEST_BACKENDS", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/test_habits.py",
            "--backend",
            "jax",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "the_issues_habits",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "JAX's caches cleared 1 time(s) above 1 MiB" in proc.stdout, proc.stdout[-2000:]


def test_a_bad_gradtape_backend_stops_the_suite_in_one_line():
    env = {**os.environ, "GRADTAPE_BACKEND": "nump"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_habits.py", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [s for s in (proc.stdout + proc.stderr).splitlines() if s.strip()]
    assert proc.returncode == 4, lines  # pytest's usage error
    assert lines == [lines[0]] and lines[0].startswith("ERROR: GRADTAPE_BACKEND='nump': unknown gradtape backend"), (
        lines
    )


def test_a_process_that_stays_large_is_not_cleared_after_every_test(monkeypatch):
    """A clearing that leaves the process above the limit (memory the allocator keeps, torch's) moves the
    next clearing up by half the limit: clearing (recompiling, collecting) after every test made the
    whole suite several times slower."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import suite_summary
    finally:
        sys.path.remove(str(ROOT / "tests"))
    cleared = []

    class FakeJax:
        @staticmethod
        def clear_caches():
            cleared.append(True)

    monkeypatch.setitem(sys.modules, "jax", FakeJax)
    monkeypatch.setattr(suite_summary, "MEMORY_LIMIT_MIB", 1000)
    monkeypatch.setattr(suite_summary, "_next_clearing_mib", [1000.0])
    monkeypatch.setattr(suite_summary, "clearings", [])
    rss = iter([1200, 1100, 1100, 1300, 1600, 1400])  # (a clearing reads it twice: before and after)
    monkeypatch.setattr(suite_summary, "rss_mib", lambda: next(rss, 0))
    suite_summary.pytest_runtest_teardown(None, None)  # 1200 > 1000: cleared, to 1100
    assert len(cleared) == 1 and suite_summary._next_clearing_mib[0] == 1600
    suite_summary.pytest_runtest_teardown(None, None)  # 1100: not past 1600
    suite_summary.pytest_runtest_teardown(None, None)  # 1300: not past 1600
    assert len(cleared) == 1
    suite_summary.pytest_runtest_teardown(None, None)  # 1600: not past 1600
    suite_summary.pytest_runtest_teardown(None, None)  # 1400
    assert len(cleared) == 1


def test_the_table_adds_up_pytest_xdist_workers():
    """``pytest -n 2`` (the README's test command): the controller, which collects nothing, still puts each
    test under its backend, and reports the workers' peak memory."""
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (the [test] extra installs it)")
    table = _habits_run_table("-n", "2")
    assert re.search(r"peak memory \(RSS\) of the 2 workers: \d+\.\d \+ \d+\.\d GB", table), table


def _suite_summary():
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import suite_summary
    finally:
        sys.path.remove(str(ROOT / "tests"))
    return suite_summary


def test_quick_jax_compiles_sets_only_flags_xla_knows(monkeypatch):
    """The suite's XLA options are set before JAX is imported, an option the installed XLA would not parse
    (an unknown one in XLA_FLAGS aborts the process) is left out, and GRADTAPE_TEST_XLA_DEFAULTS=1 keeps
    JAX's defaults."""
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.delenv("JAX_DISABLE_MOST_OPTIMIZATIONS", raising=False)
    monkeypatch.setattr(jax_compiles, "QUICK_XLA_CPU_FLAGS", ("--xla_cpu_no_such_flag=true",))
    jax_compiles.quick_jax_compiles()
    assert os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] == "1"
    assert "XLA_FLAGS" not in os.environ
    monkeypatch.delenv("JAX_DISABLE_MOST_OPTIMIZATIONS")
    monkeypatch.setenv("GRADTAPE_TEST_XLA_DEFAULTS", "1")
    jax_compiles.quick_jax_compiles()
    assert "JAX_DISABLE_MOST_OPTIMIZATIONS" not in os.environ


def test_quick_jax_compiles_reads_the_installed_xla():
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed: no XLA to configure")
    assert not jax_compiles._xla_knows("--xla_cpu_no_such_flag=true")
    for flag in jax_compiles.QUICK_XLA_CPU_FLAGS:
        if jax_compiles._xla_knows(flag):  # then this process (the suite) runs with it
            assert flag in os.environ.get("XLA_FLAGS", "") or os.environ.get("GRADTAPE_TEST_XLA_DEFAULTS") == "1"
