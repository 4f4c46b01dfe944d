"""Smoke test of the benchmark harness (benchmarks/run.py, issues 6 and 12): it runs, in a
subprocess, a --quick --tiny W1/W6 configuration for gradtape on NumPy, and the gt.function rows and
their compiled anchors on W1/W3, and checks the markdown tables and the JSON.  No timing is
asserted: benchmark figures are never test assertions."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "benchmarks", "run.py")


def test_quick_w1_w6_gradtape_numpy_emits_a_table(tmp_path):
    out_md = tmp_path / "bench.md"
    out_json = tmp_path / "bench.json"
    p = subprocess.run(
        [
            sys.executable,
            RUN,
            "--quick",
            "--tiny",
            "--only",
            "W1,W6",
            "--frameworks",
            "gradtape-numpy",
            "--out",
            str(out_md),
            "--json",
            str(out_json),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    table = [line for line in p.stdout.splitlines() if line.startswith("|")]
    assert table[0].startswith("| framework | W1 ") and "W6" in table[0], p.stdout
    assert table[1].startswith("|---|")
    row = next(line for line in table if line.startswith("| `gradtape-numpy`"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert len(cells) == 3
    for c in cells[1:]:
        float(c.split()[0])  # a number, not "error" / "skipped"
    assert out_md.read_text().strip() == p.stdout.strip()

    data = json.loads(out_json.read_text())
    recs = {r["workload"]: r for r in data["results"]}
    assert set(recs) == {"W1", "W6"}
    for r in recs.values():
        assert r["framework"] == "gradtape-numpy"
        assert r["status"] == "ok", r
        assert r["median_s"] > 0 and r["reps"] >= 1
    # the tiny chains still compute the right gradient: d y_n / d y_0 = prod 1.0001 cos(y_k)
    for w, n in (("W1", 100), ("W6", 2000)):
        assert recs[w]["ops"] == n
        y, g = 0.5, 1.0
        for _ in range(n):
            g *= 1.0001 * math.cos(y)
            y = math.sin(y) * 1.0001 + 1e-6
        assert math.isclose(recs[w]["checksum"], abs(g), rel_tol=1e-3), (w, recs[w]["checksum"], g)


def _run(tmp_path, only, frameworks, timeout=600):
    """A --quick --tiny run: (stdout, the JSON's records by (framework, workload), the JSON)."""
    out_json = tmp_path / "bench.json"
    cmd = [sys.executable, RUN, "--quick", "--tiny", "--only", only, "--frameworks", frameworks]
    cmd += ["--json", str(out_json)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads(out_json.read_text())
    return p.stdout, {(r["framework"], r["workload"]): r for r in data["results"]}, data


def _cells(stdout, name):
    row = next(line for line in stdout.splitlines() if line.startswith(f"| `{name}` "))
    return [c.strip() for c in row.strip("|").split("|")][1:]


def _installed(*mods):
    return all(importlib.util.find_spec(m) is not None for m in mods)


#: the gt.function rows that need no compiler, with what they must need and how they must run
REPLAY_ROWS = {
    "gradtape.function-numpy": (("numpy",), "replay"),
    "gradtape.function-array_api_strict": (("array_api_strict",), "replay"),
    "gradtape.function-torch": (("torch",), "replay"),
    "gradtape.function-jax": (("jax",), "jax compiler"),
}


def test_gt_function_rows_trace_once_and_match_the_hand_written_gradients(tmp_path):
    rows = [name for name, (needs, _) in REPLAY_ROWS.items() if _installed(*needs)]
    stdout, recs, data = _run(tmp_path, "W1,W3", ",".join(rows + ["numpy-hand"]))
    for name in rows:
        for c in _cells(stdout, name):
            float(c.split()[0])  # a number, not "error": the step traced and ran
        for w in ("W1", "W3"):
            r = recs[(name, w)]
            assert r["status"] == "ok", r
            assert r["tracing_count"] == 1, r  # traced once, then the program ran
            assert r["executor"] == REPLAY_ROWS[name][1], r
            assert r["first_call_s"] > 0 and r["median_s"] > 0, r
            ref = recs[("numpy-hand", w)]["checksum"]
            assert math.isclose(r["checksum"], ref, rel_tol=1e-3), (name, w, r["checksum"], ref)
    # the first calls have their own table, and issue 12's targets are in the targets table
    assert "### First calls" in stdout
    for name in rows:
        first = _cells(stdout.split("### First calls", 1)[1], name)
        float(first[0].split()[0])
    assert "| 12 | W1 gradtape.function-numpy ≤ 1.5 × hand-written NumPy |" in stdout
    assert any(t["issue"] == 12 and t["measured"] is not None for t in data["targets"])


@pytest.mark.skipif(not _installed("jax"), reason="jax is not installed")
def test_jax_loop_row_is_one_compiled_loop_step(tmp_path):
    # the W1/W2 chain as gt.while_loop: traced once, compiled by jax.jit, the hand-written gradients
    stdout, recs, data = _run(tmp_path, "W2", "gradtape.function-jax-loop,numpy-hand,jax.jit")
    r = recs[("gradtape.function-jax-loop", "W2")]
    assert r["status"] == "ok", r
    assert r["tracing_count"] == 1 and r["executor"] == "jax compiler", r
    assert math.isclose(r["checksum"], recs[("numpy-hand", "W2")]["checksum"], rel_tol=1e-3), r
    assert "W2 gradtape.function-jax-loop (gt.while_loop) ≤ 1.2 × jax.jit(jax.grad) (fori_loop)" in stdout


@pytest.mark.skipif(not _installed("torch"), reason="torch is not installed")
def test_torch_compile_rows_run_or_say_why(tmp_path):
    stdout, recs, data = _run(tmp_path, "W3", "gradtape.function-torch-compile,torch.compile,torch.autograd")
    for name in ("gradtape.function-torch-compile", "torch.compile"):
        r = recs[(name, "W3")]
        if r["status"] == "unavailable":  # no C++ compiler, say: the row reports why, the run goes on
            assert "torch.compile" in r["reason"], r
            assert _cells(stdout, name)[0].startswith("unavailable [")
            continue
        assert r["status"] == "ok", r
        assert r["first_call_s"] > 0, r
        ref = recs[("torch.autograd", "W3")]["checksum"]
        assert math.isclose(r["checksum"], ref, rel_tol=1e-3), (name, r["checksum"], ref)
    r = recs[("gradtape.function-torch-compile", "W3")]
    if r["status"] == "ok":
        assert r["executor"] == "torch compiler" and r["tracing_count"] == 1, r


def test_unknown_framework_is_a_clear_error():
    p = subprocess.run(
        [sys.executable, RUN, "--frameworks", "no-such-framework"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert p.returncode != 0
    assert "unknown framework" in p.stderr and "gradtape-numpy" in p.stderr
