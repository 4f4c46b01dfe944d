"""The conformance suite and the CLI: derived from the registry, green, and red on a wrong rule."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import gradtape as gt
from gradtape import testing
from gradtape.core import registry
from gradtape.cli import main
from gradtape.conformance import cases, uncovered_ops
from gradtape.conformance.checks import check_case_everywhere, check_compiled, known_failures
from gradtape.conformance.report import run

gt_function = importlib.import_module("gradtape.compile.function")  # (gt.function is the decorator)
COMPILED_OPS = ["sin", "matmul", "sum", "linalg.inv", "getitem", "where", "cumulative_sum"]


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
    assert main(["conformance", "--ops", "no_such_op", "--no-progress"]) == 2
    assert "no registered op named 'no_such_op'" in capsys.readouterr().err
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


def test_compiled_check_agrees_with_eager_on_every_backend():
    """--compiled: each op's gradient (first and second order) through gt.function, called on three
    draws of the case, equals eager gradtape's on every installed backend."""
    report = run(ops=COMPILED_OPS, samples=1, progress=False, native=False, compiled=True)
    assert report.failed == [], report.markdown()
    for op, cells in report.rows.items():
        for b, c in cells.items():
            comp = c["compiled"]
            assert comp["status"] == "pass" and comp["checks"] == ["grad", "order2"], (op, b, comp)
            assert comp["how"] == ("jax compiler" if b == "jax" else "replay"), (op, b, comp)
    assert report.compiled_counts()["pass"] == len(COMPILED_OPS) * len(report.backends)
    assert "| compiled |" in report.markdown()


def _wrong_programs(monkeypatch):
    """Every traced program (checked at trace time first) returns its outputs times 1.001."""
    compile_ = gt_function._compile

    def sabotaged(*args):
        run_, used, how, source = compile_(*args)
        if run_ is None:
            return run_, used, how, source

        def wrong(*a):
            res = run_(*a)
            return (tuple(o * 1.001 for o in res[0]),) + tuple(res[1:])

        return wrong, used, how, source

    monkeypatch.setattr(gt_function, "_compile", sabotaged)


def test_compiled_check_fails_on_a_wrong_program(monkeypatch, tmp_path):
    _wrong_programs(monkeypatch)
    report = run(ops=["sin", "floor"], samples=1, progress=False, native=False, order2=False, compiled=True)
    backends = report.backends
    want = [(op, f"{b} (compiled)") for op in ("sin", "floor") for b in backends]  # gradient and forward
    assert sorted(report.failed) == sorted(want), report.markdown()
    comp = report.rows["sin"]["numpy"]["compiled"]
    assert comp["status"] == "FAIL"
    assert "call 2 (its program, replay) differs from eager" in comp["reasons"][0]["reason"]
    assert "| sin | pass" in report.markdown() and "**FAIL**" in report.markdown()
    path = tmp_path / "r.json"
    report.write(path)
    assert '"compiled"' in path.read_text()


def test_compiled_check_fails_when_the_trace_falls_back_to_eager(monkeypatch):
    """A program that disagrees with eager at trace time makes the function run eagerly (so it would
    agree with eager from then on): the check reports it as a failure, not a pass."""
    monkeypatch.setattr(gt_function, "_agrees", lambda f, *a: gt_function._disagree(f, "sabotaged"))
    op = registry.get_op("sin")
    res = check_compiled(op, gt.domains.expand(op.domain, 1)[0], 0, "numpy")
    assert res["status"] == "FAIL" and "does not reproduce the eager call" in res["reason"], res


def test_an_untraceable_op_is_its_own_category(monkeypatch):
    """A value read into Python while tracing is reported as not traceable (with where it happened),
    neither a failure nor a pass."""
    op = registry.get_op("sin")

    def sin_if_positive(x):
        return gt.sin(x) if bool(gt.sum(x) > -100.0) else x

    monkeypatch.setattr(op, "public", sin_if_positive)
    report = run(ops=["sin"], samples=1, progress=False, native=False, order2=False, compiled=True)
    assert report.failed == [], report.markdown()
    comp = report.rows["sin"]["numpy"]["compiled"]
    assert comp["status"] == "not traceable", comp
    reason = comp["reasons"][0]["reason"]
    assert reason.startswith("a traced tensor read as a Python bool at tests/test_conformance.py:"), reason
    assert report.compiled_counts()["not traceable"] == len(report.backends)
    assert "| not traceable: a traced tensor read as a Python bool at" in report.markdown()


def test_cli_compiled_flag(capsys):
    args = ["conformance", "--compiled", "--ops", "exp", "--backends", "numpy", "--samples", "1", "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| compiled |" in out and "gt.function check: 1 pass" in out


def test_a_lazy_backends_finite_differences_run_on_numpy(monkeypatch):
    """dask's second-order check evaluates its finite differences on NumPy's forward (each evaluation on
    dask would build and compute a task graph: a conformance run with dask took most of an hour), and a
    wrong rule on dask is still found."""
    pytest.importorskip("dask")
    dask = gt.backends.get("dask")
    computes = []
    real_to_numpy = type(dask).to_numpy
    monkeypatch.setattr(type(dask), "to_numpy", lambda self, x: computes.append(1) or real_to_numpy(self, x))
    op = registry.get_op("matmul")
    case = next(c for _, c in cases(["matmul"]))
    assert testing.check_case(op, case, "dask", np.random.default_rng(0), order=2, reference="numpy").passed
    on_numpy = len(computes)
    computes.clear()
    assert testing.check_case(op, case, "dask", np.random.default_rng(0), order=2).passed
    assert on_numpy * 5 < len(computes), (on_numpy, len(computes))

    op = registry.get_op("sin")
    case = next(c for _, c in cases(["sin"]))
    old = op.grad
    try:
        op.grad = lambda o, g: g * gt.sin(o.inputs[0])  # (wrong: the derivative of sin is cos)
        bad = testing.check_case(op, case, "dask", np.random.default_rng(0), order=2, reference="numpy")
        assert not bad.passed
    finally:
        op.grad = old


def test_the_cli_compiles_jax_quickly_in_its_own_process():
    """``gradtape conformance`` / ``check`` / ``audit`` on the jax backend set XLA's quick compiles (before
    JAX is imported) and one MLIR context per thread: most of a check's time on JAX is compiling."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    code = (
        "import argparse, os, sys\n"
        "from gradtape import cli\n"
        "assert 'jax' not in sys.modules\n"
        "cli._quick_jax_compiles(argparse.Namespace(backends='numpy,jax'))\n"
        "from jax._src.interpreters import mlir\n"
        "reused = getattr(mlir.make_ir_context, 'reused_by_the_suite', False)\n"
        "print(os.environ.get('JAX_DISABLE_MOST_OPTIMIZATIONS'), reused)\n"
    )
    quiet = ("JAX_DISABLE_MOST_OPTIMIZATIONS", "GRADTAPE_TEST_XLA_DEFAULTS")
    env = {k: v for k, v in os.environ.items() if k not in quiet}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["1", "True"], out.stdout + out.stderr
