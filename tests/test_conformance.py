"""The conformance suite and the CLI: derived from the registry, green, and red on a wrong rule."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gradtape as gt
from gradtape import registry
from gradtape.cli import main
from gradtape.conformance import cases, uncovered_ops
from gradtape.conformance.checks import check_case_everywhere, known_failures
from gradtape.conformance.report import run


def test_every_builtin_op_is_covered():
    assert uncovered_ops() == []
    names = {op.name for op, _ in cases()}
    builtin = {op.name for op in registry.ops() if op.chapter != "user"}
    assert names == builtin


def test_quick_run_is_green_and_covers_the_ops_asked(capsys):
    report = run(backends=None, ops=["sin", "matmul", "sum", "floor", "getitem"], samples=1, progress=False)
    assert report.failed == [], report.markdown()
    assert set(report.rows) == {"sin", "matmul", "sum", "floor", "getitem"}
    for cells in report.rows.values():
        assert set(cells) == set(report.backends)
    md = report.markdown()
    assert "| sin |" in md and "pass" in md


def test_a_wrong_rule_turns_it_red_and_names_it(tmp_path):
    op = registry.get_op("sinh")
    old = op.grad
    op.grad = lambda o, g: g * gt.sinh(o.inputs[0])  # wrong: should be cosh
    try:
        report = run(backends=["numpy"], ops=["sinh"], samples=1, progress=False, order2=False)
    finally:
        op.grad = old
    assert report.failed == [("sinh", "numpy")]
    assert "sinh" in report.markdown() and "FAIL" in report.markdown()
    path = tmp_path / "r.json"
    report.write(path)
    assert '"FAIL"' in path.read_text()


def test_cli_exit_codes_and_report(tmp_path, capsys):
    out = tmp_path / "r.md"
    assert (
        main(
            [
                "conformance",
                "--ops",
                "exp,where",
                "--backends",
                "numpy",
                "--samples",
                "1",
                "--no-progress",
                "--report",
                str(out),
            ]
        )
        == 0
    )
    assert "| exp |" in out.read_text()
    with pytest.raises(ValueError, match="no registered op"):
        main(["conformance", "--ops", "no_such_op", "--no-progress"])
    assert main(["backends"]) == 0
    assert "| numpy | yes |" in capsys.readouterr().out


def test_cli_check_a_user_function(tmp_path, monkeypatch):
    (tmp_path / "userfns.py").write_text(
        "def f(x):\n    xp = x.__array_namespace__()\n    return xp.sum(xp.tanh(x) * x)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["check", "userfns:f", "--shape", "3", "--backends", "numpy"]) == 0


def test_console_script_is_installed():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gradtape.conformance",
            "--ops",
            "abs",
            "--backends",
            "numpy",
            "--samples",
            "1",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "| abs |" in out.stdout


def test_known_failures_are_data():
    for b in gt.available_backends():
        for op, reason in known_failures(b).items():
            assert reason and op in {o.name for o in registry.ops()}, (b, op)


def test_forward_only_ops_compare_backends():
    op = registry.get_op("floor")
    case = gt.domains.expand(op.domain, 1)[0]
    res = check_case_everywhere(op, case, 0, gt.available_backends())
    assert all(res.passed.values()) and res.kinds == ("forward",)


def test_quick_conformance_pass_over_every_op_and_backend():
    """CI's quick conformance pass: one sample per op, every installed backend, native torch and
    JAX cross-checks included (second order is covered by tests/test_gradients.py)."""
    report = run(samples=1, progress=False, order2=False)
    assert report.failed == [], report.markdown()
    assert len(report.rows) == len({op.name for op, _ in cases()})
