"""The built documentation site, read in a real browser (headless Chromium driven by Playwright, set up
as in tests/test_report_browser.py): what ``mkdocs build --strict`` cannot see.

* Every fenced code block of every page's Markdown is a code element of the rendered page, with the
  same text (a fence that the Markdown extensions do not recognise, such as ``python requires=...``
  before docs/site_hooks.py cleaned it, renders as run-together paragraphs, and its comments as headings).
* Every Markdown heading of a page is in the page's table of contents (the first ``#`` heading is the
  page's title), and on a page written by hand nothing else is: no code comment turned heading.
* The API reference shows a class's constructor parameters (``GradientTape(persistent=...)``), and its
  long signatures wrap inside the page instead of scrolling sideways.

The site is built once for the run (``mkdocs build --strict``, about 20 s, shared with
tests/test_docs_site.py); the tests skip, saying why, without the ``[docs]`` extra, Playwright or
Chromium.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from test_docs import parse
from test_docs_site import DOCS, ROOT, built_site, needs_docs_extra
from test_report_browser import ARGS, CHROMIUM, sync_playwright  # skips the module without a browser

pytestmark = needs_docs_extra

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_DIRECTIVE = re.compile(r"^:::\s", re.M)


def _text(s):
    """Text as a reader sees it: whitespace collapsed."""
    return " ".join(s.split())


def markdown_pages():
    """``(Markdown file, its page in the site, relative to the site)`` for every page of the site: docs/
    and the repository files that docs/site_hooks.py adds under repo/."""
    pages = []
    for md in sorted(DOCS.rglob("*.md")):
        rel = md.relative_to(DOCS).with_suffix("")
        pages.append((md, rel.parent if rel.name == "index" else rel))
    return pages


def repo_pages(site):
    """The pages that docs/site_hooks.py added from outside docs/ (``repo/<path>``)."""
    out = []
    for html in sorted((site / "repo").rglob("index.html")):
        rel = html.parent.relative_to(site / "repo")
        for name in ("README.md", "index.md"):
            if (ROOT / rel / name).is_file():
                out.append((ROOT / rel / name, Path("repo") / rel))
                break
        else:
            md = (ROOT / rel).with_suffix(".md")
            if md.is_file():
                out.append((md, Path("repo") / rel))
    return out


def fences_and_headings(md):
    """The fenced blocks' code and the headings (level, text) of a Markdown file, outside the fences."""
    blocks = parse(md)
    inside = set()
    for b in blocks:
        inside.update(range(b.line - 2, b.end + 1))  # the opening fence's line to the closing one's
    headings = []
    for i, line in enumerate(md.read_text(encoding="utf-8").splitlines()):
        m = _HEADING.match(line)
        if m and i not in inside:
            headings.append((len(m[1]), _text(_LINK.sub(r"\1", m[2]).replace("`", ""))))
    return [b.code for b in blocks], headings


@pytest.fixture(scope="module")
def site():
    site, proc = built_site()  # (the build test_docs_site.py checks, made once for both)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]
    return site


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def rendered(site, browser):
    """``open(page)`` -> what the browser shows of a page of the built site: its code elements' text,
    its table of contents, its title (the article's h1); one browser tab for the module."""
    tab = browser.new_page(viewport={"width": 1400, "height": 900})

    def open_(rel):
        tab.goto((site / rel / "index.html").as_uri())
        return tab.evaluate(
            """() => ({
                code: [...document.querySelectorAll('article pre > code')].map(e => e.textContent),
                toc: [...document.querySelectorAll('.md-sidebar--secondary nav.md-nav--secondary a.md-nav__link')]
                      .map(e => e.textContent.trim().replace(/\\s+/g, ' ')),
                h1: [...document.querySelectorAll('article h1')].map(e => e.textContent.replace('¶', '').trim()),
            })"""
        )

    yield open_
    tab.close()


def _problems(md, rel, got):
    fences, headings = fences_and_headings(md)
    where = md.relative_to(ROOT) if md.is_relative_to(ROOT) else md
    out = []
    shown = {_text(c) for c in got["code"]}
    for code in fences:
        if _text(code) and _text(code) not in shown:
            first = next(s for s in code.splitlines() if s.strip())
            out.append(f"{where}: the code block starting {first.strip()!r} is not a code element of {rel}/")
    if headings and headings[0][0] == 1:
        title, headings = headings[0], headings[1:]
        if _text(title[1]) not in [_text(h) for h in got["h1"]]:
            out.append(f"{where}: the title {title[1]!r} is not the page's h1 ({got['h1']})")
    want = [h for _, h in headings]
    missing = [h for h in want if h not in got["toc"]]
    if missing:
        out.append(f"{where}: headings not in the table of contents of {rel}/: {missing}")
    if not _DIRECTIVE.search(md.read_text(encoding="utf-8")):  # a page written by hand: nothing else
        extra = [h for h in got["toc"] if h not in want]
        if extra:
            out.append(f"{where}: the table of contents of {rel}/ has entries that are no heading: {extra}")
    return out


def test_every_code_block_and_heading_renders(site, rendered):
    pages = markdown_pages() + repo_pages(site)
    assert len(pages) > 20 and any(str(rel).startswith("repo") for _, rel in pages)
    problems = [p for md, rel in pages for p in _problems(md, rel, rendered(rel))]
    assert not problems, "the site renders the Markdown wrongly:\n" + "\n".join(problems)


def test_the_check_sees_a_mangled_block_and_a_missing_heading(tmp_path, site, rendered):
    """Against a page that renders a fence as text and loses a heading, the check reports both."""
    md = tmp_path / "page.md"
    md.write_text(
        "# Guide\n\n## Setup\n\n```python\nimport gradtape as gt\n# a comment\n```\n\n## Gone\n", encoding="utf-8"
    )
    got = {"code": ["something else\n"], "toc": ["Setup", "a comment"], "h1": ["Guide"]}
    problems = _problems(md, Path("page"), got)
    assert len(problems) == 3, problems
    assert "'import gradtape as gt' is not a code element" in problems[0]
    assert "['Gone']" in problems[1] and "['a comment']" in problems[2]


@pytest.mark.parametrize(
    "page, anchor, parameters",
    [
        ("reference/tapes", "gradtape.GradientTape", ["persistent", "watch_accessed_variables"]),
        ("reference/tensors", "gradtape.Variable", ["initial_value", "trainable", "dtype"]),
        ("reference/optimizers", "gradtape.training.optimizers.Adam", ["learning_rate", "beta_1", "epsilon"]),
    ],
)
def test_the_reference_shows_constructor_parameters(site, browser, page, anchor, parameters):
    tab = browser.new_page(viewport={"width": 900, "height": 900})  # narrow: long signatures must wrap
    try:
        tab.goto((site / page / "index.html").as_uri())
        heading = tab.locator(f'[id="{anchor}"]')
        assert heading.count() == 1, f"no {anchor} on {page}/"
        signature = heading.locator("xpath=following-sibling::div[contains(@class, 'doc-signature')][1]")
        text = signature.inner_text()
        assert text.startswith(anchor.rsplit(".", 1)[1] + "("), text
        for p in parameters:
            assert p in text, (p, text)
        # every signature of the page fits its width: it wraps instead of scrolling sideways
        too_wide = tab.eval_on_selector_all(
            ".doc-signature pre > code",
            "els => els.filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.slice(0, 60))",
        )
        assert too_wide == [], too_wide
    finally:
        tab.close()
