"""Smoke test of benchmarks/nested_ad.py (issue 23, item 6): a --tiny run, in a subprocess, of the
saddle, particle and GMM problems for gradtape on NumPy (and, where installed, torch.autograd and
torch.func) prints the tables, writes the JSON, and every framework's answer agrees with the others.
No timing is asserted: benchmark figures are never test assertions."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks", "nested_ad.py")
HAVE_TORCH = importlib.util.find_spec("torch") is not None


def _run(tmp_path, *args):
    out_json = tmp_path / "nested.json"
    cmd = [sys.executable, BENCH, "--tiny", "--json", str(out_json), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
    return p, (json.loads(out_json.read_text()) if out_json.exists() else None)


def test_tiny_run_prints_the_tables_and_the_answers_agree(tmp_path):
    frameworks = ["gradtape-numpy"] + (["gradtape-torch", "torch.autograd", "torch.func"] if HAVE_TORCH else [])
    p, data = _run(tmp_path, "--frameworks", ",".join(frameworks))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    lines = [line for line in p.stdout.splitlines() if line.startswith("|")]
    assert lines[0] == "| framework | variant | saddle (s) | particle (s) |", p.stdout
    for v in ("rr", "ff", "rf", "fr"):
        row = next(line for line in lines if line.startswith(f"| `gradtape-numpy` | {v} |"))
        cells = [c.strip() for c in row.strip("|").split("|")][2:]
        for c in cells:
            float(c.split()[0])  # a time, not an error
    assert any(line.startswith("| framework | gmm gradient (ms) |") for line in lines)
    walk = next(line for line in lines if line.startswith("| `gradtape-numpy` | ") and line.endswith("× |"))
    float(walk.split("|")[2])  # the first-order walk's µs per op
    recs = data["results"]
    cells = {(r["problem"], r["framework"], r["variant"]) for r in recs}
    for problem in ("saddle", "particle"):
        for v in ("rr", "ff", "rf", "fr"):
            assert (problem, "gradtape-numpy", v) in cells
    assert ("gmm", "gradtape-numpy", "r") in cells
    assert ("walk", "gradtape-numpy", "recorded") in cells
    for r in recs:
        assert r["median_s"] > 0 and r["times_s"], r
        assert r["max_abs_diff"] <= 1e-7, r
    # the answers are the problems' own, not only consistent: one saddle step by hand (NumPy)
    by = {(r["problem"], r["framework"], r["variant"]): np.asarray(r["answer"]) for r in recs}
    np.testing.assert_allclose(by[("saddle", "gradtape-numpy", "rr")], _saddle_by_hand(), rtol=1e-9)
    if HAVE_TORCH:
        assert data["results"][0]["reference"] in ("torch.autograd rr", "torch.autograd r")


def _saddle_by_hand(n_outer=2, n_inner=2, eta_out=0.1, eta_in=0.2, start=(1.0, 0.5)):
    """The tiny saddle solve with hand-derived derivatives: f = |x|^2 - |y|^2 + 0.5 sin(x).y; the
    inner step y' = y + eta (-2 y + 0.5 sin x) has dy'/dx = (1 - 2 eta) dy/dx + 0.5 eta diag(cos x)."""
    s = np.array(start)

    def inner(x):
        y, dy = s.copy(), np.zeros(2)  # dy: d y_i / d x_i (the Jacobian is diagonal)
        for _ in range(n_inner):
            y, dy = y + eta_in * (-2 * y + 0.5 * np.sin(x)), (1 - 2 * eta_in) * dy + 0.5 * eta_in * np.cos(x)
        return y, dy

    x = s.copy()
    for _ in range(n_outer):
        y, dy = inner(x)
        # d/dx f(x, y(x)) = 2x + 0.5 cos(x) y + (-2 y + 0.5 sin x) dy
        x = x - eta_out * (2 * x + 0.5 * np.cos(x) * y + (-2 * y + 0.5 * np.sin(x)) * dy)
    y, _ = inner(x)
    return np.concatenate([x, y])


def test_a_wrong_answer_fails_the_run(tmp_path):
    # a solver whose answer is off: the run prints the disagreement and exits 1
    args = ("--only", "saddle", "--frameworks", "gradtape-numpy", "--variants", "rr,ff", "--perturb", "ff")
    p, _ = _run(tmp_path, *args)
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert "ANSWERS DISAGREE: saddle gradtape-numpy ff" in p.stderr


def test_unknown_framework_is_a_clear_error():
    p = subprocess.run(
        [sys.executable, BENCH, "--frameworks", "no-such"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert p.returncode != 0 and "unknown framework" in p.stderr
