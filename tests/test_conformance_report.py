"""The conformance report as people read it: the verdict first and last, a legend, known
disagreements apart from failures, every compared pair per cell, and the HTML page (parsed here
without a browser; tests/test_report_browser.py opens it in Chromium)."""

from __future__ import annotations

import html
import html.parser
import json
import math
import re

import pytest

import gradtape as gt
from gradtape.core import registry
from gradtape.cli import main
from gradtape.conformance import html_report
from gradtape.conformance import report as report_mod
from gradtape.conformance.report import Report, run
from gradtape.testing.crosscheck import native_method_name

# the bands of a passing cell, written out here rather than read from html_report.BANDS: (upper bound, class)
EXPECTED_BANDS = [(1e-12, "e12"), (1e-9, "e9"), (1e-6, "e6"), (1e-3, "e3"), (math.inf, "big")]


def expected_class(status, err, checks):
    if status == "FAIL":
        return "fail"
    if status == "known":
        return "known"
    if checks == ["forward"]:
        return "fwd"
    return next(cls for upper, cls in EXPECTED_BANDS if err <= upper)


# ------------------------------------------------------------------------------------------ synthetic reports
def pair(a, b, err, *, kind="grad", failed_on=(), cases=1, rtol=1e-9):
    """An aggregated compared pair as report.run stores it in a cell (failed in every case, blamed
    on the backends ``failed_on``, if any)."""
    failures = [
        {"case": "Case(X)", "max_abs_err": err, "max_rel_err": err, "note": "argument 0", "blamed": list(failed_on)}
    ]
    return {
        "kind": kind,
        "a": a,
        "b": b,
        "rtol": rtol,
        "atol": rtol / 100,
        "passed": not failed_on,
        "cases": cases,
        "max_abs_err": err,
        "max_rel_err": err,
        "passing_max_rel_err": 0.0 if failed_on else err,
        "failures": failures if failed_on else [],
        "notes": ["argument 0"],
    }


def cell(status, err, pairs, checks=("grad", "native"), reason=None):
    c = {"status": status, "max_err": err, "checks": list(checks), "pairs": pairs}
    if reason:
        c["reason"] = reason
    return c


def synthetic_report():
    """Three backends, six ops: one per colour band, a failure on torch, a known disagreement on jax
    and a forward-only op."""
    backends = ["numpy", "torch", "jax"]
    rows = {}
    errs = {"op_e12": 3e-13, "op_e9": 4e-10, "op_e6": 2e-8, "op_e3": 5e-5, "op_big": 0.02}
    for op, err in errs.items():
        rows[op] = {
            b: cell("pass", err, [pair(f"gradtape:{b}", "finite differences", err, rtol=1e-5)]) for b in backends
        }
    rows["op_fail"] = {b: cell("pass", 1e-10, [pair(f"gradtape:{b}", "finite differences", 1e-10)]) for b in backends}
    rows["op_fail"]["torch"] = cell(
        "FAIL",
        0.5,
        [pair("gradtape:torch", "finite differences", 0.5, failed_on=["torch"], rtol=1e-5)],
    )
    rows["op_known"] = {
        b: cell("pass", 2e-9, [pair(f"gradtape:{b}", "jax.grad", 2.0, failed_on=["jax"])]) for b in backends
    }
    rows["op_known"]["jax"] = cell(
        "known",
        2.0,
        [pair("jax.grad", "finite differences", 2.0, failed_on=["jax"], rtol=1e-5)],
        reason="jax.grad takes the other branch",
    )
    rows["op_fwd"] = {
        b: cell("pass", 0.0, [pair(f"gradtape:{b}", "numpy (reference)", 0.0, kind="forward")], ["forward"])
        for b in backends
    }
    return Report(backends=backends, dtype="float64", native=True, rows=rows, seconds=1.5)


def test_markdown_verdict_first_and_last_with_a_legend():
    rep = synthetic_report()
    lines = rep.markdown().splitlines()
    assert lines[0] == lines[-1] == rep.verdict()
    assert lines[-1].startswith("gradtape conformance: FAIL: 1 failure(s), 1 known disagreement(s) (op_known on jax)")
    legend = lines.index(next(line for line in lines if line.startswith("Legend:")))
    text = "\n".join(lines[legend:])
    for term in ("`pass (1e-08)`", "`pass (fwd)`", "`known: reason`", "`**FAIL**`", "relative error", "rtol 1e-05"):
        assert term in text, term
    assert "`compiled`" not in text  # only explained where the column is shown


def test_known_disagreements_are_not_listed_as_failures():
    md = synthetic_report().markdown()
    failures = md.index("Failures (these fail the run):")
    known = md.index("Known disagreements (not failures")
    assert failures < known
    fail_part, known_part = md[failures:known], md[known : md.index("Legend:")]
    assert "`op_fail` on torch" in fail_part and "op_known" not in fail_part
    assert "`op_known` on jax: jax.grad takes the other branch" in known_part and "op_fail" not in known_part
    assert "jax.grad vs finite differences: max rel err 2 > rtol 1e-05" in known_part
    # a comparison that differed where the other method is blamed is not the backend's disagreement
    assert "gradtape:numpy vs jax.grad" not in md


def test_a_passing_run_says_pass_and_lists_no_failures():
    rep = synthetic_report()
    del rep.rows["op_fail"]
    md = rep.markdown()
    assert md.splitlines()[-1].startswith("gradtape conformance: PASS: 0 failure(s), 1 known disagreement(s)")
    assert "Failures (" not in md and "Known disagreements (not failures" in md


# ------------------------------------------------------------------------------------------ parsing the page
class Page(html.parser.HTMLParser):
    """The matrix of a report page: rows (op, status) and per cell its attributes, chips and pairs."""

    def __init__(self):
        super().__init__()
        self.rows, self.cells, self.tags, self.external = [], [], [], []
        self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        for key in ("src", "href"):
            if a.get(key):
                self.external.append(a[key])
        if tag == "link":
            self.external.append(str(a))
        if tag == "tr" and "data-op" in a:
            self.rows.append({"op": a["data-op"], "status": a["data-status"]})
        elif tag == "td" and "cell" in a.get("class", "").split():
            self._cell = {**a, "op": self.rows[-1]["op"], "chips": [], "pairs": []}
            self.cells.append(self._cell)
        elif tag == "span" and "chip" in a.get("class", "").split() and self._cell is not None:
            self._cell["chips"].append((a["data-ref"], a["data-class"]))
        elif tag == "tr" and "pair" in a.get("class", "").split() and self._cell is not None:
            self._cell["pairs"].append({"class": a["data-class"], "ref": a["data-ref"], "text": []})

    def handle_endtag(self, tag):
        if tag == "details":
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None and self._cell["pairs"] and data.strip():
            self._cell["pairs"][-1]["text"].append(data.strip())


def parse(text):
    page = Page()
    page.feed(text)
    page.close()
    return page


def test_html_page_has_every_cell_coloured_by_its_error(tmp_path):
    rep = synthetic_report()
    path = tmp_path / "r.html"
    rep.write(path)
    text = path.read_text(encoding="utf-8")
    page = parse(text)
    assert [r["op"] for r in page.rows] == list(rep.rows)
    assert len(page.cells) == len(rep.rows) * len(rep.backends)
    assert {(c["op"], c["data-backend"]) for c in page.cells} == {(op, b) for op in rep.rows for b in rep.backends}
    for c in page.cells:
        want = rep.rows[c["op"]][c["data-backend"]]
        assert c["data-class"] == expected_class(want["status"], want["max_err"], want["checks"]), c
        assert f"c-{c['data-class']}" in c["class"].split()
    statuses = {r["op"]: r["status"] for r in page.rows}
    assert statuses == {**{op: "pass" for op in rep.rows}, "op_fail": "FAIL", "op_known": "known"}
    # the colour of each class is in the page's own CSS; nothing is fetched
    for name, _, colour, _ in html_report.BANDS:
        assert f".c-{name}{{background:{colour}}}" in text
    assert page.external == [] and "script" in page.tags and "<style>" in text
    # the verdict opens and closes the page
    verdict = html.escape(rep.verdict())
    assert text.count(verdict) == 2  # at the top and at the bottom
    assert text.index('id="verdict-top"') < text.index("<table") < text.index('id="verdict-bottom"')


def test_a_pair_blamed_elsewhere_does_not_colour_the_cell(tmp_path):
    page = parse(html_report.render(synthetic_report()))
    numpy_known = next(c for c in page.cells if c["op"] == "op_known" and c["data-backend"] == "numpy")
    assert numpy_known["data-class"] == "e6"  # 2e-9
    [p] = numpy_known["pairs"]
    assert p["class"] == "na" and "differs in 1 case(s), blamed on jax" in p["text"]
    jax_known = next(c for c in page.cells if c["op"] == "op_known" and c["data-backend"] == "jax")
    assert jax_known["data-class"] == "known" and ("fd", "known") in jax_known["chips"]
    torch_fail = next(c for c in page.cells if c["op"] == "op_fail" and c["data-backend"] == "torch")
    assert torch_fail["data-class"] == "fail" and torch_fail["pairs"][0]["class"] == "fail"


def test_write_dispatches_on_the_extension(tmp_path):
    rep = synthetic_report()
    for name, check in [
        ("r.html", lambda t: t.startswith("<!DOCTYPE html>")),
        ("R.HTM", lambda t: t.startswith("<!DOCTYPE html>")),
        ("r.json", lambda t: json.loads(t)["rows"]["op_fail"]["torch"]["status"] == "FAIL"),
        ("r.md", lambda t: t.startswith("gradtape conformance: FAIL") and "| op_fail |" in t),
    ]:
        rep.write(tmp_path / name)
        assert check((tmp_path / name).read_text(encoding="utf-8")), name


# ------------------------------------------------------------------------------------------ real runs
@pytest.fixture
def wrong_sinh():
    op = registry.get_op("sinh")
    old = op.grad
    op.grad = lambda o, g: g * gt.sinh(o.inputs[0])  # wrong: should be cosh
    yield
    op.grad = old


def test_real_run_records_every_compared_pair(backend):
    rep = run(backends=[backend], ops=["sin", "floor"], samples=1, progress=False)
    assert rep.failed == [], rep.markdown()
    for b in rep.backends:
        sin = rep.rows["sin"][b]
        methods = {(p["kind"], p["a"], p["b"]) for p in sin["pairs"]}
        refs = {html_report.reference_of(p, b) for p in sin["pairs"]}
        assert {"fd", "2nd"} <= refs, methods
        assert ("order2", f"gradtape:{b}", "finite differences") in methods
        if gt.backends.get(b).supports_native_grad:
            assert "own" in refs, methods
            assert any(native_method_name(b) in (a, c) for _, a, c in methods)
        if len(rep.backends) > 1:
            assert "peers" in refs, methods
        assert all(p["passed"] and p["cases"] == 1 for p in sin["pairs"])
        assert max(p["passing_max_rel_err"] for p in sin["pairs"] if p["kind"] != "order2") <= sin["max_err"]
        [fwd] = rep.rows["floor"][b]["pairs"]
        assert (fwd["kind"], fwd["a"], fwd["max_abs_err"]) == ("forward", f"gradtape:{b}", 0.0)
    page = parse(html_report.render(rep))
    assert len(page.cells) == 2 * len(rep.backends)
    for c in page.cells:
        assert len(c["pairs"]) == len(rep.rows[c["op"]][c["data-backend"]]["pairs"])


def test_real_failure_and_known_disagreement_are_told_apart(backend, wrong_sinh, monkeypatch):
    """A wrong rule is a failure; the same failure listed in known_failures is a known disagreement:
    the run passes, and the Markdown says which is which."""
    rep = run(backends=[backend], ops=["sinh"], samples=1, progress=False, order2=False)
    assert ("sinh", backend) in rep.failed
    md = rep.markdown()
    assert md.splitlines()[-1].startswith("gradtape conformance: FAIL: ")
    assert "- `sinh` on " in md[md.index("Failures (these fail the run):") :]
    assert "Known disagreements" not in md
    assert f"gradtape:{backend} vs finite differences" in md

    monkeypatch.setattr(report_mod, "known_failures", lambda b: {"sinh": "a deliberately wrong rule (test)"})
    rep = run(backends=[backend], ops=["sinh"], samples=1, progress=False, order2=False)
    assert rep.failed == [] and ("sinh", backend) in rep.known
    md = rep.markdown()
    assert md.splitlines()[-1].startswith("gradtape conformance: PASS: 0 failure(s), ")
    assert "Failures (" not in md
    known = md[md.index("Known disagreements (not failures") :]
    assert "`sinh` on" in known and "a deliberately wrong rule (test)" in known
    page = parse(html_report.render(rep))
    assert {c["data-class"] for c in page.cells} == {"known"}


def test_cli_writes_the_html_report(tmp_path, capsys, backend):
    path = tmp_path / "report.html"
    args = ["conformance", "--ops", "exp,floor", "--backends", backend, "--samples", "1", "--no-progress"]
    assert main([*args, "--report", str(path)]) == 0
    out = capsys.readouterr().out
    verdict = next(line for line in out.splitlines() if line.startswith("gradtape conformance:"))
    assert out.splitlines().count(verdict) == 2  # first and last lines of the report
    page = parse(path.read_text(encoding="utf-8"))
    backends = ["numpy", backend] if backend != "numpy" else ["numpy"]
    assert {(c["op"], c["data-backend"]) for c in page.cells} == {(op, b) for op in ("exp", "floor") for b in backends}


def test_the_verdict_names_the_native_cross_checks_that_ran(backend):
    """A NumPy-only run compares with no library's own autodiff, and says so; a torch or jax run names
    torch.autograd / jax.grad; --no-native says off (issue 26: "native cross-checks on" though none ran)."""
    rep = run(backends=[backend], ops=["sin"], samples=1, progress=False, order2=False)
    ran = [native_method_name(b) for b in rep.backends if gt.backends.get(b).supports_native_grad]
    assert rep.natives_compared() == sorted(ran)
    if ran:
        assert f"native cross-checks: {', '.join(sorted(ran))}," in rep.verdict()
    else:
        assert "native cross-checks: none (no backend here has its own autodiff)," in rep.verdict()
        assert "native cross-checks on" not in rep.markdown()
    off = run(backends=[backend], ops=["sin"], samples=1, progress=False, order2=False, native=False)
    assert off.natives_compared() == [] and "native cross-checks off," in off.verdict()


def test_a_cells_number_agrees_with_its_colour():
    """Errors either side of a band's edge (9.6e-07 and 1.2e-06 round alike to one digit) read apart,
    and the number a cell shows falls in the band of its colour (issue 26)."""
    errs = {"just_under": 9.6e-7, "just_over": 1.2e-6, "edge": 1e-6, "under_e9": 9.96e-10, "over_e9": 1.04e-9}
    rows = {
        op: {"numpy": cell("pass", err, [pair("gradtape:numpy", "finite differences", err)])}
        for op, err in errs.items()
    }
    text = html_report.render(Report(backends=["numpy"], dtype="float64", native=True, rows=rows, seconds=1.0))
    shown = dict(re.findall(r'<tr data-op="(\w+)".*?<span class="err">([^<]*)</span>', text, re.S))
    classes = dict(re.findall(r'<tr data-op="(\w+)".*?data-class="(\w+)"', text, re.S))
    assert set(shown) == set(errs), shown
    assert len(set(shown.values())) == len(errs), shown  # no two different errors read alike
    for op, label in shown.items():
        assert html_report.band_of(float(label)) == classes[op] == html_report.band_of(errs[op]), (op, label)
