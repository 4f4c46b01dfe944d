"""``gradtape audit MODULE --html FILE``: the audit as one self-contained page, in the conformance
report's look (its CSS, its filter script and its error bands: :mod:`gradtape.conformance.html_report`).

A row per function, a column per backend; a cell is coloured by its verdict (a correct gradient by
its largest relative error against finite differences, in the conformance report's bands) and opens
on the details: where the gradient was lost, the error, what differed, the inputs used.  A text
filter on function names and an "only problems" toggle hide rows; nothing is fetched.
"""

from __future__ import annotations

import os

import gradtape as gt
from gradtape.conformance.html_report import (
    _CSS,
    BANDS,
    STATUS_COLOURS,
    _colour_css,
    _e,
    _err_label,
    band_of,
    filter_script,
)
from gradtape.testing.audit import LABELS, VERDICTS, AuditReport, FunctionAudit, Outcome

__all__ = ["VERDICT_COLOURS", "cell_class", "render", "write"]

#: the colour class and colour of each verdict but "correct" (coloured by its error, in BANDS)
_REPORT_COLOUR = {cls: colour for cls, colour, _ in STATUS_COLOURS}  # (the conformance report's classes)
VERDICT_COLOURS = {
    "wrong": ("fail", _REPORT_COLOUR["fail"]),
    "nan": ("nan", "#c51b7d"),
    "lost": ("lost", "#f46d43"),
    "error": ("error", _REPORT_COLOUR["known"]),
    "nondiff": ("fwd", _REPORT_COLOUR["fwd"]),
    "notdriven": ("na", _REPORT_COLOUR["na"]),
}

_AUDIT_CSS = """
#matrix td.inputs{font-family:monospace;font-size:11px;color:#555;max-width:28em;border:1px solid #bbb;padding:2px 6px}
td.cell p.detail{max-width:36em;white-space:normal;font-size:12px;margin:.3em 0}
"""


def cell_class(o: Outcome) -> str:
    """The colour class of one outcome: a band of :data:`BANDS` for a correct gradient, else its
    verdict's (:data:`VERDICT_COLOURS`)."""
    if o.verdict == "correct":
        return band_of(o.max_rel_err or 0.0)
    return VERDICT_COLOURS[o.verdict][0]


def _cell(o: Outcome | None, backend: str) -> str:
    if o is None:
        return f'<td class="cell c-na" data-backend="{_e(backend)}" data-verdict="none" data-class="na">—</td>'
    cls = cell_class(o)
    err = _err_label(o.max_rel_err) if o.verdict == "correct" and o.max_rel_err is not None else ""
    lines = [d for d in (o.detail, *o.notes) if d]
    title = "\n".join([f"{backend}: {LABELS[o.verdict]}" + (f", relative error {err}" if err else ""), *lines])
    body = "".join(f'<p class="detail">{_e(d)}</p>' for d in lines) or '<p class="detail">no remarks</p>'
    return (
        f'<td class="cell c-{cls}" data-backend="{_e(backend)}" data-verdict="{o.verdict}" data-class="{cls}" '
        f'title="{_e(title)}"><details><summary><span class="label">{_e(LABELS[o.verdict])}</span> '
        f'<span class="err">{err}</span></summary>{body}</details></td>'
    )


def _row(f: FunctionAudit, backends: list[str]) -> str:
    status = "pass" if f.verdict in ("correct", "nondiff", "notdriven") else f.verdict
    cells = "".join(_cell(f.outcomes.get(b), b) for b in backends)
    return (
        f'<tr data-op="{_e(f.qualname)}" data-status="{_e(status)}" data-verdict="{_e(f.verdict)}">'
        f'<td class="op">{_e(f.qualname)}</td>{cells}<td class="inputs">{_e(f.inputs)}</td></tr>'
    )


def _legend() -> str:
    items = [(f"c-{name}", f"correct, largest relative error {text}") for name, _, _, text in BANDS]
    items += [(f"c-{VERDICT_COLOURS[k][0]}", f"{label}: {what}") for k, label, what in VERDICTS if k != "correct"]
    lis = "".join(f'<li><span class="swatch {cls}"></span>{_e(text)}</li>' for cls, text in items)
    return (
        '<section id="legend"><h2>Legend</h2><p>A row per function, a column per backend; the last column is '
        "the inputs the function was called with. Open a cell for its details (where the gradient left the "
        "tape, the error, what differed). docs/audit.md says how each verdict is decided.</p>"
        f'<ul class="swatches">{lis}</ul></section>'
    )


def render(report: AuditReport) -> str:
    """The HTML page of an :class:`gradtape.testing.audit.AuditReport`."""
    summary = report.summary()
    problems = any(f.verdict in ("wrong", "nan") for f in report.functions)
    vcls = "fail" if problems else "pass"
    head = "".join(f'<th data-backend="{_e(b)}">{_e(b)}</th>' for b in report.backends)
    body = "\n".join(_row(f, report.backends) for f in report.functions)
    extra = "".join(
        f".c-{cls}{{background:{colour}}}"
        for cls, colour in VERDICT_COLOURS.values()
        if cls in ("nan", "lost", "error")
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gradtape audit: {_e(", ".join(report.modules))}</title>
<style>{_CSS}{_AUDIT_CSS}{_colour_css()}
{extra}</style></head>
<body>
<h1>gradtape audit of {_e(", ".join(report.modules))}</h1>
<p class="verdict {vcls}" id="verdict-top">{_e(summary)}</p>
<p>gradtape {_e(gt.__version__)}; backends: {_e(", ".join(report.backends))}; inputs in float64.</p>
<div id="controls">
<label>Filter functions: <input type="search" id="filter" placeholder="e.g. erf, metrics." autocomplete="off"></label>
<label><input type="checkbox" id="only-bad"> only problems (lost, wrong, NaN, error)</label>
<button type="button" id="expand">expand shown</button> <button type="button" id="collapse">collapse</button>
<span id="shown"></span>
</div>
<table id="matrix"><thead><tr><th>function</th>{head}<th>inputs</th></tr></thead>
<tbody>
{body}
</tbody></table>
{_legend()}
<p class="verdict {vcls}" id="verdict-bottom">{_e(summary)}</p>
<script>{filter_script("functions")}</script>
</body></html>
"""


def write(report: AuditReport, path: str | os.PathLike[str]) -> None:
    """Write :func:`render`'s page to ``path``."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render(report))
