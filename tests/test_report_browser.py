"""``gradtape conformance --report FILE.html`` opened in a real browser: headless Chromium (Debian's
``chromium`` package) driven by Playwright for Python.  The page renders the op x backend matrix,
each cell's colour is that of its worst error, the filter and the "only failures and known" toggle
hide rows, a cell opens on every compared pair, and nothing is fetched from the network.

Needs ``apt-get install chromium`` and ``pip install playwright`` (no browser download: the system's
Chromium is launched by path, ``GRADTAPE_CHROMIUM`` to point elsewhere); skipped, with the reason,
where either is missing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gradtape.conformance import html_report
from gradtape.conformance.report import run

# the same synthetic report and expected colour classes as the parsed-HTML tests
from test_conformance_report import expected_class, synthetic_report

CHROMIUM = os.environ.get("GRADTAPE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    pytest.skip(
        "Playwright for Python is not installed (pip install playwright; .ci/run installs it)", allow_module_level=True
    )
if not Path(CHROMIUM).exists():
    pytest.skip(
        f"no Chromium at {CHROMIUM} (apt-get install chromium, or set GRADTAPE_CHROMIUM to its path)",
        allow_module_level=True,
    )


def rgb(hex_colour):
    """``#rrggbb`` as the browser's computed ``rgb(r, g, b)``."""
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


COLOURS = {name: rgb(c) for name, _, c, _ in html_report.BANDS} | {
    name: rgb(c) for name, c, _ in html_report.STATUS_COLOURS
}


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def open_report(browser, tmp_path):
    """Open a report's HTML file in a fresh page; the page records its script errors and every
    request that is not the file itself."""
    pages = []

    def load(rep):
        path = tmp_path / "report.html"
        rep.write(path)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.errors, page.requests = [], []
        page.on("pageerror", lambda e: page.errors.append(str(e)))
        page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
        page.on("request", lambda r: page.requests.append(r.url) if r.url != path.as_uri() else None)
        page.goto(path.as_uri())
        pages.append(page)
        return page

    yield load
    for page in pages:
        page.close()


def cells(page):
    """Per rendered cell: op, backend, class and computed background colour."""
    return page.eval_on_selector_all(
        "#matrix td.cell",
        """els => els.map(e => ({op: e.closest('tr').dataset.op, backend: e.dataset.backend,
                                 cls: e.dataset.class, bg: getComputedStyle(e).backgroundColor,
                                 width: e.getBoundingClientRect().width}))""",
    )


def visible_ops(page):
    return [r.get_attribute("data-op") for r in page.locator("#matrix > tbody > tr").all() if r.is_visible()]


def test_matrix_renders_with_the_colour_of_each_cells_error(open_report):
    rep = synthetic_report()
    page = open_report(rep)
    got = cells(page)
    assert len(got) == len(rep.rows) * len(rep.backends)
    assert {(c["op"], c["backend"]) for c in got} == {(op, b) for op in rep.rows for b in rep.backends}
    for c in got:
        want = rep.rows[c["op"]][c["backend"]]
        cls = expected_class(want["status"], want["max_err"], want["checks"])
        assert (c["cls"], c["bg"]) == (cls, COLOURS[cls]), (c, want["max_err"])
        assert c["width"] > 0
    # every band and status is on the page, in distinct colours
    assert {c["cls"] for c in got} == {"e12", "e9", "e6", "e3", "big", "fail", "known", "fwd"}
    assert len({c["bg"] for c in got}) == 8
    assert page.locator("#shown").inner_text() == f"{len(rep.rows)} of {len(rep.rows)} ops shown"
    assert page.locator("#verdict-bottom").inner_text() == rep.verdict()
    assert page.errors == [] and page.requests == []


def test_filter_and_toggle_hide_rows(open_report):
    rep = synthetic_report()
    page = open_report(rep)
    everything = list(rep.rows)
    assert visible_ops(page) == everything
    page.fill("#filter", "op_e")
    assert visible_ops(page) == ["op_e12", "op_e9", "op_e6", "op_e3"]
    assert page.locator("#shown").inner_text() == f"4 of {len(everything)} ops shown"
    page.fill("#filter", "fwd, BIG")  # several terms, any case
    assert visible_ops(page) == ["op_big", "op_fwd"]
    page.fill("#filter", "")
    page.check("#only-bad")
    assert visible_ops(page) == ["op_fail", "op_known"]
    page.fill("#filter", "fail")
    assert visible_ops(page) == ["op_fail"]
    page.fill("#filter", "nosuchop")
    assert visible_ops(page) == [] and page.locator("#shown").inner_text() == f"0 of {len(everything)} ops shown"
    page.fill("#filter", "")
    page.uncheck("#only-bad")
    assert visible_ops(page) == everything
    assert page.errors == []


def test_a_cell_shows_its_compared_pairs(open_report):
    page = open_report(synthetic_report())
    cell = page.locator('#matrix tr[data-op="op_fail"] td.cell[data-backend="torch"]')
    pairs = cell.locator("table.pairs")
    assert not pairs.is_visible()
    assert "gradtape:torch vs finite differences: 5.00e-01 (fail)" in cell.get_attribute("title")  # the tooltip
    cell.locator("summary").click()
    assert pairs.is_visible()
    row = pairs.locator("tbody tr")
    assert row.count() == 1
    text = row.inner_text()
    for part in ("gradtape:torch", "finite differences", "5.00e-01", "rtol 1e-05", "FAIL in 1 of 1 case(s)"):
        assert part in text, (part, text)
    assert row.evaluate("e => getComputedStyle(e).backgroundColor") == COLOURS["fail"]
    # the known disagreement's cell names its reason; "expand shown" opens every shown cell
    page.check("#only-bad")
    page.click("#expand")
    known = page.locator('#matrix tr[data-op="op_known"] td.cell[data-backend="jax"]')
    assert "known: jax.grad takes the other branch" in known.inner_text()
    assert page.locator("#matrix details[open]").count() == 2 * 3
    page.click("#collapse")
    assert page.locator("#matrix details[open]").count() == 0


def test_a_real_run_in_the_browser(open_report, backend):
    rep = run(backends=[backend], ops=["sin", "floor", "matmul"], samples=1, progress=False)
    assert rep.failed == [], rep.markdown()
    page = open_report(rep)
    got = cells(page)
    assert len(got) == 3 * len(rep.backends)
    for c in got:
        want = rep.rows[c["op"]][c["backend"]]
        cls = expected_class(want["status"], want["max_err"], want["checks"])
        assert (c["cls"], c["bg"]) == (cls, COLOURS[cls]), (c, want)
    page.fill("#filter", "mat")
    assert visible_ops(page) == ["matmul"]
    cell = page.locator(f'#matrix tr[data-op="matmul"] td.cell[data-backend="{backend}"]')
    cell.locator("summary").click()
    text = cell.locator("table.pairs").inner_text()
    assert f"gradtape:{backend}" in text and "finite differences" in text
    assert cell.locator("table.pairs tbody tr").count() == len(rep.rows["matmul"][backend]["pairs"])
    assert page.errors == [] and page.requests == []
