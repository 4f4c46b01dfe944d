"""``gradtape audit`` (gradtape/testing/audit.py, issue 25 item 6): the classifier on hand-made
functions whose verdict is known, a slice of ``scipy.special`` end to end, the command line, and the
HTML report in Chromium (skipped, saying why, where Chromium or Playwright is missing)."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from array_api_compat import array_namespace

import gradtape as gt
from gradtape.cli import main
from gradtape.conformance import audit_html, html_report
from gradtape.testing.audit import Arr, Ints, Plan, audit, audit_function, plan_inputs

ONE = Plan(args=[Arr((3,))])  # one float64 vector


# ------------------------------------------------------------------------------ hand-made functions
def smooth(x):
    xp = array_namespace(x)  # as libraries do: torch's and jax's arrays too (so their autodiff runs)
    return xp.sin(x) * x + xp.exp(-x)


def leaky(x):
    xp = x.__array_namespace__()
    squared = np.asarray(x) ** 2  # LEAK: the value leaves the tape here
    return xp.asarray(squared)


@gt.custom_gradient
def wrong_sin(x):
    def grad(dy):
        return dy * 2.0 * gt.cos(x)  # the derivative of sin is cos, not 2 cos

    return gt.sin(x), grad


@gt.custom_gradient
def nan_grad(x):
    def grad(dy):
        return dy * gt.log(-x)  # log of a negative number: NaN

    return gt.sin(x), grad


@gt.custom_gradient
def _sin_off_by_1e_6(x):
    def grad(dy):
        return dy * gt.cos(x) * (1.0 + 1e-6)  # within finite differences' tolerance, not an autodiff's

    return gt.sin(x), grad


def slightly_off(x):
    if isinstance(x, gt.Tensor):
        return _sin_off_by_1e_6(x)
    return array_namespace(x).sin(x)  # NumPy, torch and jax arrays: their own sin


def integer_valued(x):
    xp = x.__array_namespace__()
    return xp.astype(xp.floor(x * 10.0), xp.int64)


def raises_on_tensors(x):
    if not isinstance(x, np.ndarray):
        raise ValueError("this function only takes NumPy arrays")
    return np.sin(x)


def slow_on_tensors(x):
    if not isinstance(x, np.ndarray):
        time.sleep(30)
    return x * 2.0


def takes_a_mode(x, mode):
    """A function with a string parameter.

    Parameters
    ----------
    x : array_like of shape (n_samples,)
        The values.
    mode : str
        How.
    """
    return x


def _line_of(fn, marker):
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if marker in line)


def _one(fn, backend, plan=ONE, **kw):
    return audit_function(fn, f"tests.{fn.__name__}", [backend], plan=plan, **kw).outcomes[backend]


def test_a_correct_gradient(backend):
    o = _one(smooth, backend)
    assert o.verdict == "correct", o
    assert o.max_rel_err is not None and o.max_rel_err < 1e-5
    assert not any("did not run" in n for n in o.notes), o.notes  # torch.autograd / jax.grad ran too


def test_a_gradient_lost_names_the_line_that_converted(backend):
    o = _one(leaky, backend)
    assert o.verdict == "lost", o
    assert f"test_audit.py:{_line_of(leaky, '# LEAK')} (leaky)" in o.detail, o.detail


def test_a_wrong_custom_gradient(backend):
    o = _one(wrong_sin, backend)
    assert o.verdict == "wrong", o
    assert "finite differences" in o.detail


def test_a_gradient_off_by_less_than_finite_differences_see_is_caught_by_the_native_autodiff(backend):
    o = _one(slightly_off, backend)
    if backend in ("torch", "jax"):  # torch.autograd / jax.grad of sin agree with finite differences
        assert o.verdict == "wrong", o
        assert f"against {'torch.autograd' if backend == 'torch' else 'jax.grad'}" in o.detail
    else:  # no autodiff of its own: finite differences only, which cannot see 1e-6
        assert o.verdict == "correct", o


def test_a_nan_gradient(backend):
    o = _one(nan_grad, backend)
    assert o.verdict == "nan", o


def test_an_integer_output_is_not_differentiable(backend):
    o = _one(integer_valued, backend)
    assert (o.verdict, o.detail) == ("nondiff", "integer or boolean output")


def test_an_error_is_one_line_with_the_message(backend):
    o = _one(raises_on_tensors, backend)
    assert o.verdict == "error"
    assert o.detail == "ValueError: this function only takes NumPy arrays"


def test_a_call_past_the_time_limit_is_an_error_not_a_hang(backend):
    start = time.perf_counter()
    o = _one(slow_on_tensors, backend, time_limit=0.5)
    assert time.perf_counter() - start < 10
    assert (o.verdict, o.detail) == ("error", "ran past the time limit of 0.5 s")


def test_not_driven_says_why():
    plan = plan_inputs("tests.takes_a_mode", takes_a_mode)
    assert "parameter 'mode' takes a string" in plan.why
    f = audit_function(takes_a_mode, "tests.takes_a_mode", ["numpy"])
    assert f.outcomes["numpy"].verdict == "notdriven" and "OVERRIDES" in f.outcomes["numpy"].detail

    # a function that no drawn input runs on NumPy is not driven either, with the library's message
    def refuses(x):
        raise ValueError("refused")

    f = audit_function(refuses, "tests.refuses", ["numpy"])
    assert f.outcomes["numpy"].verdict == "notdriven"
    assert f.outcomes["numpy"].detail == "no inputs it could derive run on NumPy (ValueError: refused)"


def test_inputs_from_signatures_docstrings_and_ufunc_loops():
    import scipy.special

    plan = plan_inputs("tests.takes_a_mode", smooth)
    assert plan.args == [Arr((6,))] and plan.source == "signature and docstring"
    # an ufunc with an integer order (eval_legendre's loop "ld->d"): the order is an integer array
    plan = plan_inputs("scipy.special.eval_legendre", scipy.special.eval_legendre)
    assert [type(a) for a in plan.args] == [Ints, Arr], plan

    # the docstring's shape, with sklearn's symbolic sizes
    def metric(y_true, X):
        """Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            Labels.
        X : array-like of shape (n_samples, n_features)
            Data.
        """

    plan = plan_inputs("tests.metric", metric)
    assert plan.args == [Arr((6,)), Arr((6, 3))] and plan.label_names == ("y_true",)
    assert plan_inputs("scipy.special.seterr", scipy.special.seterr).why  # an override says "do not call"


# ------------------------------------------------------------------------------ a real module
SLICE = ["erf", "xlogy", "bdtr", "agm", "roots_legendre"]


@pytest.fixture(scope="module")
def special_slice():
    return {}


def test_a_slice_of_scipy_special(backend, special_slice):
    rep = audit(["scipy.special"], [backend], names=SLICE)
    special_slice[backend] = rep
    got = {f.name: f.outcomes[backend] for f in rep.functions}
    assert sorted(got) == sorted(SLICE)
    assert got["erf"].verdict == got["xlogy"].verdict == "correct", (got["erf"], got["xlogy"])
    if backend in ("torch", "jax"):  # SciPy dispatches erf to torch.special / jax.scipy: compared too
        assert got["erf"].notes == [], got["erf"].notes
    assert got["bdtr"].verdict == "lost"
    assert "scipy/special/_support_alternative_backends.py:" in got["bdtr"].detail
    assert got["agm"].verdict == "error" and "NumPy ufuncs do not run on gradtape tensors" in got["agm"].detail
    assert got["roots_legendre"].verdict == "nondiff"
    assert rep.counts() == {"correct": 2, "lost": 1, "wrong": 0, "nan": 0, "nondiff": 1, "error": 1, "notdriven": 0}
    # deterministic: a second run prints the same
    assert audit(["scipy.special"], [backend], names=SLICE).markdown() == rep.markdown()
    table = rep.markdown()
    assert "| `erf` | correct (" in table and "| `bdtr` | gradient lost |" in table


def test_distributions_through_their_log_density():
    rep = audit(["scipy.stats"], ["numpy"], names=["norm", "poisson", "Normal"], native=False)
    got = {f.name: f for f in rep.functions}
    assert got["norm"].inputs.startswith("norm.logpdf(x): float64[3]")
    assert got["poisson"].inputs.startswith("poisson.logpmf(x, mu): int[3] [1, 2, 3], float64[3]")
    assert got["Normal"].inputs.startswith("Normal(mu, sigma).logpdf(x): float64[3]")
    for f in got.values():  # SciPy's distributions convert their arguments to NumPy
        assert f.outcomes["numpy"].verdict == "lost", f
        assert "scipy/stats/_dist" in f.outcomes["numpy"].detail


# ------------------------------------------------------------------------------ the command
def test_the_command(backend, tmp_path, capsys):
    html, js, md = tmp_path / "a.html", tmp_path / "a.json", tmp_path / "a.md"
    code = main(
        [
            "audit",
            "scipy.special",
            "--functions",
            "erf,bdtr",
            "--backends",
            backend,
            "--html",
            str(html),
            "--json",
            str(js),
            "--markdown",
            str(md),
            "--no-progress",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "| function | " + backend + " | details |" in out and "| `bdtr` | gradient lost |" in out
    assert out.strip().splitlines()[-1].startswith("audit of scipy.special: 2 public callables, 2 driven")
    data = json.loads(js.read_text())
    assert {f["name"]: f["verdict"] for f in data["functions"]} == {"bdtr": "lost", "erf": "correct"}
    assert html.read_text().startswith("<!DOCTYPE html>")
    assert md.read_text() == out  # the tables as printed


def test_the_command_fails_on_a_wrong_gradient(tmp_path, monkeypatch, capsys):
    """A wrong (or NaN) gradient is a silent wrong number: ``gradtape audit`` exits 1 (a CI job gates on
    it), as a failed ``gradtape check``; a module whose functions are right exits 0."""
    (tmp_path / "audited_here.py").write_text(
        "import gradtape as gt\n\n"
        "@gt.custom_gradient\n"
        "def wrong_sin(x):\n"
        "    def grad(dy):\n"
        "        return dy * 2.0 * gt.cos(x)\n"
        "    return gt.sin(x), grad\n\n"
        "def right_sin(x):\n"
        "    return gt.sin(x)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    base = ["audit", "audited_here", "--backends", "numpy", "--no-progress", "--functions"]
    assert main(base + ["wrong_sin,right_sin"]) == 1
    assert "wrong gradient" in capsys.readouterr().out
    assert main(base + ["right_sin"]) == 0


def test_the_command_refuses_mistakes_in_one_line(capsys):
    assert main(["audit", "no_such_module_here"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no module named 'no_such_module_here'" in err
    assert main(["audit", "einops", "--html", "out.txt"]) == 2
    assert "give a file ending in .html" in capsys.readouterr().err
    assert main(["audit", "einops", "--functions", "rearange", "--backends", "numpy"]) == 2
    assert "no public callable named rearange in einops" in capsys.readouterr().err


# ------------------------------------------------------------------------------ the page in Chromium
CHROMIUM = os.environ.get("GRADTAPE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    sync = pytest.importorskip(
        "playwright.sync_api", reason="Playwright for Python is not installed (pip install playwright)"
    )
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set GRADTAPE_CHROMIUM to its path)")
    with sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def _rgb(hex_colour):
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def test_the_html_report_in_chromium(browser, tmp_path):
    rep = audit(["scipy.special"], ["numpy"], names=SLICE, native=False)
    extra = audit_function(leaky, "tests.leaky", ["numpy"], plan=ONE)
    rep.functions.append(extra)
    path = tmp_path / "audit.html"
    audit_html.write(rep, path)
    page = browser.new_page()
    errors, requests = [], []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url) if r.url != path.as_uri() else None)
    page.goto(path.as_uri())
    cells = page.eval_on_selector_all(
        "#matrix td.cell",
        "els => els.map(e => ({fn: e.closest('tr').dataset.op, verdict: e.dataset.verdict, cls: e.dataset.class, "
        "bg: getComputedStyle(e).backgroundColor}))",
    )
    assert len(cells) == len(SLICE) + 1
    colours = {name: _rgb(c) for name, _, c, _ in html_report.BANDS}
    colours |= {cls: _rgb(c) for cls, c in audit_html.VERDICT_COLOURS.values()}
    for c in cells:
        f = next(f for f in rep.functions if f.qualname == c["fn"])
        o = f.outcomes["numpy"]
        assert (c["verdict"], c["cls"]) == (o.verdict, audit_html.cell_class(o))
        assert c["bg"] == colours[c["cls"]], c
    assert len({c["bg"] for c in cells if c["verdict"] != "correct"}) == 3  # lost, error, not differentiable
    assert page.locator("#shown").inner_text() == f"{len(cells)} of {len(cells)} functions shown"
    page.check("#only-bad")
    shown = [r.get_attribute("data-op") for r in page.locator("#matrix > tbody > tr").all() if r.is_visible()]
    assert shown == ["scipy.special.agm", "scipy.special.bdtr", "tests.leaky"]
    page.uncheck("#only-bad")
    page.fill("#filter", "leaky")
    cell = page.locator('#matrix tr[data-op="tests.leaky"] td.cell')
    cell.locator("summary").click()
    assert f"test_audit.py:{_line_of(leaky, '# LEAK')}" in cell.inner_text()
    assert errors == [] and requests == []
    page.close()
