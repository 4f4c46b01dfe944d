"""``gradtape conformance --report FILE.html``: the report as one self-contained page.

An op x backend matrix, each cell coloured by its worst error (:data:`BANDS`, or red for a failure,
violet for a known disagreement, blue for a forward-only check), with one chip per reference the
backend was compared with (finite differences, its own autodiff, other libraries' autodiffs, the
other backends, second order, forward values, gt.function) coloured the same way, and every
compared pair in the cell's details.  A text filter on op names and an "only failures and known
disagreements" toggle hide rows.  The CSS and the script are inline and nothing is fetched, so the
file can be mailed, archived or opened from a CI artifact as it is.
"""

from __future__ import annotations

import decimal
import html
import math

import gradtape as gt
from gradtape.testing.crosscheck import native_method_name

__all__ = ["BANDS", "STATUS_COLOURS", "band_of", "reference_of", "render"]

#: a passing comparison's colour by its largest relative error: (class, upper bound, colour, legend)
BANDS = (
    ("e12", 1e-12, "#1a9850", "≤ 1e-12"),
    ("e9", 1e-9, "#66bd63", "≤ 1e-9"),
    ("e6", 1e-6, "#a6d96a", "≤ 1e-6"),
    ("e3", 1e-3, "#fee08b", "≤ 1e-3"),
    ("big", math.inf, "#fdae61", "> 1e-3 (within the absolute tolerance)"),
)
#: colours of what is not a passing error: (class, colour, legend)
STATUS_COLOURS = (
    ("fail", "#d73027", "failure"),
    ("known", "#b39ddb", "known disagreement (not a failure)"),
    ("fwd", "#c6dbef", "forward values equal NumPy's (not differentiable)"),
    ("na", "#e0e0e0", "not checked: not traceable, n/a, or only compared elsewhere"),
)
#: the references a backend's gradient is compared with, in the order the chips show them
REFERENCES = (
    ("fd", "finite differences", "central finite differences in float64"),
    ("own", "own autodiff", "this library's own autodiff (torch.autograd, jax.grad) of the same forward"),
    ("ad", "other autodiffs", "the other libraries' autodiffs (and TensorFlow's, where installed)"),
    ("peers", "other backends", "gradtape's gradient on the other backends"),
    ("2nd", "second order", "first and second order (nested tapes) against finite differences"),
    ("fwd", "forward", "forward values against NumPy's"),
    ("jit", "gt.function", "the gradient inside gt.function against eager gradtape"),
)


def band_of(err):
    """The class of :data:`BANDS` a passing comparison with largest relative error ``err`` gets."""
    return next(name for name, upper, _, _ in BANDS if err <= upper)


def reference_of(pair, backend):
    """Which of :data:`REFERENCES` a compared pair is, seen from ``backend``'s cell."""
    if pair["kind"] == "forward":
        return "fwd"
    if pair["kind"] == "order2":
        return "2nd"
    if pair["kind"] == "compiled":
        return "jit"
    mine = {f"gradtape:{backend}", native_method_name(backend)}
    other = [m for m in (pair["a"], pair["b"]) if m not in mine]
    if not other:
        return "own"
    if other[0] == "finite differences":
        return "fd"
    if other[0].startswith("gradtape:"):
        return "peers"
    if other[0] == "(did not run)":
        return "fd"
    return "ad"


def _e(text):
    return html.escape(str(text), quote=True)


def _num(x, fmt=".2e"):
    return "inf" if x == math.inf else ("nan" if x != x else format(x, fmt))


def _err_label(x):
    """A cell's worst error, rounded *up* to two significant digits: never below the error, so the
    number shown lies in the band of the cell's colour (``.0e`` showed "1e-06" for 9.6e-07 and for
    1.2e-06, in two colours, on adjacent rows)."""
    if not 0 < x < math.inf:
        return _num(x, ".1e")
    d = decimal.Decimal(repr(float(x)))  # the shortest decimal of x, not its binary expansion
    return format(d.quantize(decimal.Decimal(1).scaleb(d.adjusted() - 1), rounding=decimal.ROUND_CEILING), ".1e")


def _pair_class(pair, backend, cell_status):
    """The colour class of one compared pair in ``backend``'s cell: failed (or known) where a
    failure is blamed on this backend, else by its largest error over the cases that passed; a
    pair that only differed where the other method is blamed has nothing to show here ("na")."""
    if any(backend in f["blamed"] for f in pair["failures"]):
        return "known" if cell_status == "known" else "fail"
    if pair["kind"] == "forward":
        return "fwd"
    if len(pair["failures"]) == pair["cases"]:
        return "na"
    return band_of(pair["passing_max_rel_err"])


def _compiled_pair(cell, backend):
    """The gt.function check of a cell as a compared pair (kind "compiled")."""
    c = cell["compiled"]
    reasons = "; ".join(f"{r['case']}: {r['reason']}" for r in c["reasons"][:3])
    status = c["status"]
    return {
        "kind": "compiled",
        "a": f"gt.function on {backend}" + (f" ({c['how']})" if c["how"] else ""),
        "b": "eager gradtape",
        "rtol": None,
        "atol": None,
        "cases": None,
        "max_abs_err": None,
        "max_rel_err": c["max_err"],
        "status": status,
        "note": reasons or "; ".join(c["notes"][:2]),
        "class": "fail" if status == "FAIL" else ("na" if status != "pass" else band_of(c["max_err"])),
    }


def _cell_status(cell):
    """``(status, class)`` of a cell: "FAIL" (its check or its gt.function check failed), "known",
    "fwd" (forward-only, passed) or "pass", and its colour class."""
    if cell["status"] == "FAIL" or cell.get("compiled", {}).get("status") == "FAIL":
        return "FAIL", "fail"
    if cell["status"] == "known":
        return "known", "known"
    if cell.get("checks") == ["forward"]:
        return "fwd", "fwd"
    return "pass", band_of(cell["max_err"])


_WORST = ("fail", "known", *(b[0] for b in reversed(BANDS)), "fwd", "na")


def _chips(groups):
    """One chip per reference group: the worst class among its pairs."""
    out = []
    for key, label, what in REFERENCES:
        rows = groups.get(key)
        if not rows:
            continue
        cls = min((cls for _, cls in rows), key=_WORST.index)
        out.append(
            f'<span class="chip c-{cls}" data-ref="{key}" data-class="{cls}" title="{_e(label + ": " + what)}">'
            f"{_e(key)}</span>"
        )
    return "".join(out)


def _pair_row(pair, cls, backend):
    if pair["kind"] == "compiled":
        result = pair["status"]
        err = _num(pair["max_rel_err"])
        tol, cases, abs_err = "1e-12 / 1e-9", "", ""
    else:
        blamed_here = [f for f in pair["failures"] if backend in f["blamed"]]
        elsewhere = [f for f in pair["failures"] if backend not in f["blamed"]]
        if blamed_here:
            result = f"FAIL in {len(blamed_here)} of {pair['cases']} case(s)"
        elif elsewhere:
            others = sorted({b for f in elsewhere for b in f["blamed"]})
            result = f"differs in {len(elsewhere)} case(s), blamed on {', '.join(others)}"
        else:
            result = "pass"
        err, abs_err = _num(pair["max_rel_err"]), _num(pair["max_abs_err"])
        tol = "" if pair["rtol"] is None else f"rtol {pair['rtol']:g}, atol {pair['atol']:g}"
        cases = str(pair["cases"])
    notes = [
        f"{f['case']}: rel err {_num(f['max_rel_err'])}" + (f" ({f['note']})" if f["note"] else "")
        for f in pair.get("failures", ())[:3]
    ]
    notes += [pair["note"]] if pair.get("note") else pair.get("notes", [])[:2]
    return (
        f'<tr class="pair c-{cls}" data-class="{cls}" data-ref="{reference_of(pair, backend)}">'
        f"<td>{_e(pair['a'])}</td><td>{_e(pair['b'])}</td><td>{err}</td><td>{abs_err}</td>"
        f"<td>{_e(tol)}</td><td>{cases}</td><td>{_e(result)}</td>"
        f'<td class="note">{"; ".join(_e(n) for n in notes)}</td></tr>'
    )


def _cell(op, backend, cell, has_compiled):
    """The ``<td>`` of one op on one backend."""
    if cell is None:
        return f'<td class="cell c-na" data-backend="{_e(backend)}" data-status="none" data-class="na">—</td>'
    status, cls = _cell_status(cell)
    pairs = [(p, _pair_class(p, backend, cell["status"])) for p in cell.get("pairs", ())]
    if has_compiled and "compiled" in cell:
        cp = _compiled_pair(cell, backend)
        pairs.append((cp, cp["class"]))
    groups = {}
    for p, pcls in pairs:
        groups.setdefault(reference_of(p, backend), []).append((p, pcls))
    label = {"FAIL": "FAIL", "known": "known", "fwd": "fwd", "pass": "pass"}[status]
    err = "" if status == "fwd" else _err_label(cell["max_err"])
    tooltip = [f"{op} on {backend}: {label}" + (f", worst relative error {err}" if err else "")]
    if status == "known":
        tooltip.append(f"known: {cell.get('reason', '')}")
    for p, pcls in pairs:
        e = _num(p["max_rel_err"])
        tooltip.append(f"{p['a']} vs {p['b']}: {e}" + ("" if pcls not in ("fail", "known") else f" ({pcls})"))
    rows = "".join(_pair_row(p, pcls, backend) for p, pcls in pairs)
    reason = f'<p class="reason">known: {_e(cell.get("reason", ""))}</p>' if status == "known" else ""
    return (
        f'<td class="cell c-{cls}" data-backend="{_e(backend)}" data-status="{status}" data-class="{cls}" '
        f'data-err="{cell["max_err"]!r}" title="{_e(chr(10).join(tooltip))}">'
        f'<details><summary><span class="label">{label}</span> <span class="err">{err}</span>'
        f'<span class="chips">{_chips(groups)}</span></summary>{reason}'
        '<table class="pairs"><thead><tr><th>method</th><th>compared with</th><th>max rel err</th>'
        "<th>max abs err</th><th>tolerance</th><th>cases</th><th>result</th><th>notes</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></details></td>"
    )


def _row_status(cells):
    statuses = {_cell_status(c)[0] for c in cells.values()}
    return "FAIL" if "FAIL" in statuses else ("known" if "known" in statuses else "pass")


def _legend():
    swatches = [(f"c-{name}", f"passed, largest relative error {text}") for name, _, _, text in BANDS]
    swatches += [(f"c-{name}", text) for name, _, text in STATUS_COLOURS]
    items = "".join(f'<li><span class="swatch {cls}"></span>{_e(text)}</li>' for cls, text in swatches)
    refs = "".join(f"<li><b>{_e(key)}</b>: {_e(what)}</li>" for key, _, what in REFERENCES)
    return (
        '<section id="legend"><h2>Legend</h2><p>A row per op, a column per backend. A cell is the worst of '
        "the op's cases on that backend, coloured by its largest relative error |a − b| / max(|a|, |b|) among "
        "the comparisons that count for the backend (a failure blamed on the other method does not). Its chips "
        "are the references it was compared with, each coloured by its own worst comparison; open a cell for "
        "every compared pair.</p>"
        f'<ul class="swatches">{items}</ul><p>References:</p><ul class="refs">{refs}</ul></section>'
    )


def _disagreements(report):
    out = []
    for status, title in (("FAIL", "Failures (these fail the run)"), ("known", "Known disagreements (not failures)")):
        items = []
        for op, where, reasons, entries in report.disagreements(status):
            lines = []
            for e in entries:
                if "line" in e:
                    lines.append(_e(e["line"]))
                else:
                    tol = f" &gt; rtol {e['rtol']:g}" if e["rtol"] is not None else ""
                    lines.append(
                        f"{_e(e['case'])}: {_e(e['a'])} vs {_e(e['b'])} [{_e(', '.join(e['backends']))}]: max rel "
                        f"err {_num(e['max_rel_err'], '.3g')}{tol}{_e('; ' + e['note']) if e['note'] else ''}"
                    )
            why = f": {_e('; '.join(reasons))}" if reasons else ""
            li = "".join(f"<li>{line}</li>" for line in lines)
            items.append(f"<li><code>{_e(op)}</code> on {_e(', '.join(where))}{why}<ul>{li}</ul></li>")
        if items:
            out.append(f'<section class="{status.lower()}-list"><h2>{title}</h2><ul>{"".join(items)}</ul></section>')
    return "".join(out)


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.5em}
.verdict{font-weight:600;padding:.4em .6em;border-radius:4px}
.verdict.pass{background:#e5f5e0}.verdict.fail{background:#fcbba1}
#controls{position:sticky;top:0;background:#fff;padding:.5em 0;z-index:3;border-bottom:1px solid #ddd}
#controls input[type=search]{width:20em;padding:.2em .4em}
#matrix{border-collapse:collapse;margin-top:.5em}
#matrix th,#matrix td.cell,#matrix td.op{border:1px solid #bbb;padding:2px 6px;vertical-align:top}
#matrix thead th{position:sticky;top:2.6em;background:#f4f4f4;z-index:2}
#matrix td.op{font-family:monospace;white-space:nowrap}
td.cell summary{cursor:pointer;white-space:nowrap}
td.cell .err{font-family:monospace}
.chips{margin-left:.4em}
.chip{display:inline-block;font-size:10px;padding:0 3px;margin-left:2px;border:1px solid rgba(0,0,0,.35);
border-radius:3px}
table.pairs{border-collapse:collapse;margin:.3em 0;background:#fff;font-size:12px}
table.pairs td,table.pairs th{border:1px solid #ccc;padding:1px 4px}
table.pairs td.note{max-width:40em;white-space:normal}
.reason{max-width:50em;margin:.3em 0}
.swatch{display:inline-block;width:1.2em;height:1em;border:1px solid #888;margin-right:.4em;vertical-align:middle}
ul.swatches{list-style:none;padding-left:0;columns:2}
"""


def _colour_css():
    rules = [f".c-{name}{{background:{colour}}}" for name, _, colour, _ in BANDS]
    rules += [f".c-{name}{{background:{colour}}}" for name, colour, _ in STATUS_COLOURS]
    return "\n".join(rules)


_FILTER_JS = """
(function () {
  var q = document.getElementById("filter"), bad = document.getElementById("only-bad");
  var shown = document.getElementById("shown");
  var rows = Array.prototype.slice.call(document.querySelectorAll("#matrix > tbody > tr"));
  function apply() {
    var terms = q.value.toLowerCase().split(/[\\s,]+/).filter(Boolean), n = 0;
    rows.forEach(function (r) {
      var op = r.getAttribute("data-op").toLowerCase();
      var ok = (terms.length === 0 || terms.some(function (t) { return op.indexOf(t) >= 0; })) &&
               (!bad.checked || r.getAttribute("data-status") !== "pass");
      r.hidden = !ok;
      if (ok) n++;
    });
    shown.textContent = n + " of " + rows.length + " %(noun)s shown";
  }
  function openAll(open) {
    rows.forEach(function (r) {
      if (!r.hidden) r.querySelectorAll("details").forEach(function (d) { d.open = open; });
    });
  }
  q.addEventListener("input", apply);
  bad.addEventListener("change", apply);
  document.getElementById("expand").addEventListener("click", function () { openAll(true); });
  document.getElementById("collapse").addEventListener("click", function () { openAll(false); });
  apply();
})();
"""


def filter_script(noun):
    """The page's script: the text filter on the rows' ``data-op``, the "only failures" toggle
    (rows whose ``data-status`` is not "pass"), expand / collapse, and "N of M <noun> shown"."""
    return _FILTER_JS % {"noun": noun}


_JS = filter_script("ops")


def render(report):
    """The HTML page of a :class:`gradtape.conformance.report.Report`."""
    verdict = report.verdict()
    vcls = "fail" if report.failed else "pass"
    has_compiled = report.compiled
    head = "".join(f'<th data-backend="{_e(b)}">{_e(b)}</th>' for b in report.backends)
    body = []
    for op, cells in report.rows.items():
        tds = "".join(_cell(op, b, cells.get(b), has_compiled) for b in report.backends)
        body.append(f'<tr data-op="{_e(op)}" data-status="{_row_status(cells)}"><td class="op">{_e(op)}</td>{tds}</tr>')
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gradtape conformance: {_e(vcls.upper())}</title>
<style>{_CSS}{_colour_css()}</style></head>
<body>
<h1>gradtape conformance report</h1>
<p class="verdict {vcls}" id="verdict-top">{_e(verdict)}</p>
<p>gradtape {_e(gt.__version__)}; backends: {_e(", ".join(report.backends))}; dtype {_e(report.dtype)}.</p>
<div id="controls">
<label>Filter ops: <input type="search" id="filter" placeholder="e.g. sin, linalg." autocomplete="off"></label>
<label><input type="checkbox" id="only-bad"> only failures and known disagreements</label>
<button type="button" id="expand">expand shown</button> <button type="button" id="collapse">collapse</button>
<span id="shown"></span>
</div>
<table id="matrix"><thead><tr><th>op</th>{head}</tr></thead>
<tbody>
{chr(10).join(body)}
</tbody></table>
{_disagreements(report)}
{_legend()}
<p class="verdict {vcls}" id="verdict-bottom">{_e(verdict)}</p>
<script>{_JS}</script>
</body></html>
"""
