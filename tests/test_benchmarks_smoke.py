"""Smoke test of the benchmark harness (benchmarks/run.py, issue 6): it runs, in a subprocess, a
--quick --tiny W1/W6 configuration for gradtape on NumPy and emits the markdown table and the JSON.
No timing is asserted: benchmark figures are never test assertions."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

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
