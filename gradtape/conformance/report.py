"""Running the suite over the registry, and its report: an op x backend table (Markdown), JSON, or
one self-contained HTML page (:mod:`gradtape.conformance.html_report`), by the file's extension.

Each op x backend cell holds the worst of the op's cases there: ``status`` ("pass", "known" or
"FAIL"), ``max_err`` and ``pairs``, every comparison that involved the backend (the method pair,
its largest errors over the cases, its tolerance and the cases that failed, with the backends each
failure is blamed on).  The Markdown report opens and ends with the verdict, separates failures from
known disagreements (``gradtape/conformance/known_failures/<backend>.txt``, outside gradtape) and explains
its columns in a legend.

With ``compiled`` (``--compiled``) each backend's cell also holds the ``gt.function`` check
(``cell["compiled"]``: status "pass", "FAIL", "not traceable" or "n/a", ``max_err``, ``reasons``,
``how``), summarised in the table's ``compiled`` column; a compiled failure fails the run, a case
that is not traceable is listed with its reason and counted apart."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import warnings

import numpy as np

from gradtape.conformance import html_report
from gradtape.conformance.cases import cases
from gradtape.conformance.checks import check_case_everywhere, known_failures
from gradtape.testing.crosscheck import TOLERANCES, native_method_name
import gradtape as gt

__all__ = ["Report", "run"]

#: which compiled status an op's cell shows when its cases differ (the first present)
_RANK = ("FAIL", "not traceable", "n/a", "pass")
#: the executor each backend's programs are expected to get (another one is noted in the table)
_EXPECTED_HOW = {"jax": "jax compiler"}
#: failed comparisons listed per op and section of the Markdown report (the rest are counted)
_MAX_LINES = 6


@dataclasses.dataclass
class Report:
    backends: list
    dtype: str
    native: bool
    rows: dict = dataclasses.field(default_factory=dict)  # op -> {backend: cell}
    problems: dict = dataclasses.field(default_factory=dict)  # op -> [lines]
    seconds: float = 0.0
    compiled: bool = False  # whether the gt.function check ran (cell["compiled"])

    @property
    def failed(self):
        """(op, backend) pairs that failed and are not listed as known failures; a failed
        ``gt.function`` check is ``(op, "<backend> (compiled)")``."""
        out = [(op, b) for op, cells in self.rows.items() for b, c in cells.items() if c["status"] == "FAIL"]
        out += [
            (op, f"{b} (compiled)")
            for op, cells in self.rows.items()
            for b, c in cells.items()
            if c.get("compiled", {}).get("status") == "FAIL"
        ]
        return out

    @property
    def known(self):
        """(op, backend) pairs whose check failed for a reason listed in
        ``gradtape/conformance/known_failures/<backend>.txt`` (known disagreements: not failures)."""
        return [(op, b) for op, cells in self.rows.items() for b, c in cells.items() if c["status"] == "known"]

    def natives_compared(self):
        """The libraries' own autodiffs that took part in a comparison (``["jax.grad", "torch.autograd"]``):
        none where ``native`` is off, or where no installed backend has one (NumPy alone)."""
        names = {native_method_name(b) for b in self.backends}
        return sorted(
            {
                m
                for cells in self.rows.values()
                for c in cells.values()
                for p in c.get("pairs", ())
                for m in (p["a"], p["b"])
                if m in names
            }
        )

    def _natives_text(self):
        if not self.native:
            return "native cross-checks off"
        ran = self.natives_compared()
        return (
            f"native cross-checks: {', '.join(ran)}"
            if ran
            else "native cross-checks: none (no backend here has its own autodiff)"
        )

    def _natives_short(self):
        return (", ".join(self.natives_compared()) or "none here") if self.native else "off: --no-native"

    def verdict(self):
        """One line: PASS or FAIL, the failures and known disagreements, what was run and how long."""
        summary = ""
        if self.compiled:
            n = self.compiled_counts()
            summary = (
                f"; gt.function check: {n['pass']} pass, {n['FAIL']} FAIL, {n['not traceable']} not traceable, "
                f"{n['n/a']} n/a (op x backend)"
            )
        known = self.known
        which = ", ".join(f"{op} on {b}" for op, b in known[:4]) + (", ..." if len(known) > 4 else "")
        return (
            f"gradtape conformance: {'FAIL' if self.failed else 'PASS'}: {len(self.failed)} failure(s), "
            f"{len(known)} known disagreement(s){f' ({which})' if known else ''}; {len(self.rows)} ops x "
            f"{len(self.backends)} backends, dtype {self.dtype}, {self._natives_text()}, "
            f"{self.seconds:.1f} s{summary}"
        )

    def compiled_counts(self):
        """``{status: number of (op, backend) cells}`` of the gt.function check."""
        counts = {s: 0 for s in _RANK}
        for cells in self.rows.values():
            for c in cells.values():
                if "compiled" in c:
                    counts[c["compiled"]["status"]] += 1
        return counts

    def _compiled_cell(self, cells):
        comp = {b: cells[b]["compiled"] for b in self.backends if "compiled" in cells.get(b, {})}
        if not comp:
            return ""
        worst = next(s for s in _RANK if any(c["status"] == s for c in comp.values()))
        where = [b for b, c in comp.items() if c["status"] == worst]
        on = "" if len(where) == len(comp) else f" ({', '.join(where)})"
        if worst == "FAIL":
            return f"**FAIL**{on}"
        if worst in ("not traceable", "n/a"):
            reason = comp[where[0]]["reasons"][0]["reason"]
            return f"{worst}{on}: {_cell_text(reason)}"
        fwd = all(c["checks"] == ["forward"] for c in comp.values())
        text = "pass (fwd" if fwd else f"pass ({max(c['max_err'] for c in comp.values()):.0e}"
        other = [b for b, c in comp.items() if b in _EXPECTED_HOW and c["how"] != _EXPECTED_HOW[b]]
        return text + (f"; {', '.join(other)}: {comp[other[0]]['how']}" if other else "") + ")"

    def markdown(self):
        """The report as Markdown: the verdict, the op x backend table, the failures, the known
        disagreements, the gt.function sections, a legend, and the verdict again (the last line)."""
        cols = list(self.backends) + (["compiled"] if self.compiled else [])
        head = "| op | " + " | ".join(cols) + " |"
        lines = [self.verdict(), "", head, "|---|" + "---|" * len(cols)]
        for op, cells in self.rows.items():
            row = []
            for b in self.backends:
                c = cells.get(b)
                if c is None:
                    row.append("")
                elif c["status"] == "pass":
                    row.append(f"pass ({c['max_err']:.0e})" if c["checks"] != ["forward"] else "pass (fwd)")
                elif c["status"] == "known":
                    row.append(f"known: {c['reason']}")
                else:
                    row.append("**FAIL**")
            if self.compiled:
                row.append(self._compiled_cell(cells))
            lines.append(f"| {op} | " + " | ".join(row) + " |")
        for status, title in (
            ("FAIL", "Failures (these fail the run):"),
            (
                "known",
                "Known disagreements (not failures: listed with their reason in "
                "gradtape/conformance/known_failures/<backend>.txt, the cause is outside gradtape):",
            ),
        ):
            entries = self._disagreement_lines(status)
            if entries:
                lines += ["", title] + entries
        if self.compiled:
            lines += self._compiled_lines()
        lines += ["", *self.legend(), "", self.verdict()]
        return "\n".join(lines)

    def legend(self):
        """What the table's cells and numbers mean (Markdown lines)."""
        (fd_rtol, fd_atol), (ex_rtol, ex_atol) = TOLERANCES.get(self.dtype, TOLERANCES["float64"])
        lines = [
            "Legend: a row per op, a column per backend; each cell is the worst of the op's cases on that backend.",
            "- `pass (1e-08)`: every comparison of this backend's gradient agreed; the number is the largest "
            "relative error |a - b| / max(|a|, |b|) among them: against central finite differences (tolerance "
            f"rtol {fd_rtol:g}, atol {fd_atol:g}), against the other backends and each library's own autodiff"
            f" ({self._natives_short()}) (rtol {ex_rtol:g}, "
            f"atol {ex_atol:g})"
            + (", and at second order (nested tapes) against finite differences" if self._ran("order2") else "")
            + ". A wrong rule is off by O(1).",
            "- `pass (fwd)`: the op is not differentiable (or not at these inputs): its forward values on this "
            "backend equal NumPy's (rtol 1e-6, atol 1e-9).",
            "- `known: reason`: a disagreement listed in gradtape/conformance/known_failures/<backend>.txt, whose "
            "cause is outside gradtape; shown, not counted as a failure.",
            "- `**FAIL**`: a comparison of this backend failed (listed under Failures); the run exits with 1.",
        ]
        if self.compiled:
            lines.append(
                "- `compiled`: the gradient (or a forward-only op's outputs) computed inside gt.function on every "
                "backend, three calls compared with eager gradtape; the number is the largest difference relative "
                "to max(|eager|, 1) (tolerance 1e-12 replayed, 1e-9 compiled); `not traceable` and `n/a` are "
                "neither passes nor failures."
            )
        lines.append("The HTML report (--report FILE.html) shows every compared pair of each cell.")
        return lines

    def _ran(self, kind):
        return any(kind in c.get("checks", ()) for cells in self.rows.values() for c in cells.values())

    def disagreements(self, status):
        """The cells of ``status`` ("FAIL" or "known"), per op: ``(op, backends, reasons, entries)``,
        ``reasons`` the known failures' reasons, ``entries`` the failed comparisons blamed on those
        backends as dicts (``case``, ``a``, ``b``, ``backends``, ``max_rel_err``, ``rtol``, ``note``;
        the same comparison blamed on several backends once) or, where no comparison was recorded,
        the checks' own lines (``{"line": ...}``)."""
        out = []
        for op, cells in self.rows.items():
            where = [b for b in self.backends if cells.get(b, {}).get("status") == status]
            if not where:
                continue
            entries = {}
            for b in where:
                for p in cells[b].get("pairs", ()):
                    for f in p["failures"]:
                        if b in f["blamed"]:
                            key = (f["case"], p["a"], p["b"], f["note"])
                            e = entries.setdefault(
                                key,
                                {"case": f["case"], "a": p["a"], "b": p["b"], "backends": [], "note": f["note"]}
                                | {"max_rel_err": f["max_rel_err"], "rtol": p["rtol"]},
                            )
                            e["backends"].append(b)
            listed = list(entries.values()) or [{"line": line} for line in self.problems.get(op, [])]
            reasons = sorted({cells[b]["reason"] for b in where if "reason" in cells[b]})
            out.append((op, where, reasons, listed))
        return out

    def _disagreement_lines(self, status):
        """Markdown lines of :meth:`disagreements` (at most ``_MAX_LINES`` comparisons per op)."""
        out = []
        for op, where, reasons, entries in self.disagreements(status):
            out.append(f"- `{op}` on {', '.join(where)}" + (": " + "; ".join(reasons) if reasons else ""))
            for e in entries[:_MAX_LINES]:
                if "line" in e:
                    out.append(f"  - {e['line']}")
                    continue
                on = f" [{', '.join(e['backends'])}]" if len(where) > 1 else ""
                tol = f" > rtol {e['rtol']:g}" if e["rtol"] is not None else ""
                note = f"; {e['note']}" if e["note"] else ""
                out.append(f"  - {e['case']}: {e['a']} vs {e['b']}{on}: max rel err {e['max_rel_err']:.3g}{tol}{note}")
            if len(entries) > _MAX_LINES:
                out.append(f"  - ... and {len(entries) - _MAX_LINES} more (the HTML or JSON report lists them all)")
        return out

    def _compiled_lines(self):
        """The gt.function check's failures, untraceable cases and executors other than expected."""
        groups = {"FAIL": [], "not traceable": [], "n/a": [], "other executor": []}
        for op, cells in self.rows.items():
            for b in self.backends:
                c = cells.get(b, {}).get("compiled")
                if c is None:
                    continue
                if c["status"] != "pass":
                    groups[c["status"]] += [f"- `{op}` on {b}: {r['case']}: {r['reason']}" for r in c["reasons"][:3]]
                if b in _EXPECTED_HOW and c["how"] and c["how"] != _EXPECTED_HOW[b]:
                    groups["other executor"] += [
                        f"- `{op}` on {b}: {c['how']}: {_cell_text(n, 300)}" for n in c["notes"][:1]
                    ]
        titles = {
            "FAIL": "gt.function check failures (the compiled gradient differs from eager, or tracing failed):",
            "not traceable": "Not traceable under gt.function (neither passed nor failed):",
            "n/a": "gt.function check not run (the eager call fails):",
            "other executor": "Programs run by another executor than expected (not failures):",
        }
        out = []
        for key, entries in groups.items():
            if entries:
                out += ["", titles[key]] + entries
        return out

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=1, default=float)

    def write(self, path):
        """Write the report to ``path``: JSON for ``.json``, a self-contained HTML page for ``.html``
        (or ``.htm``), Markdown otherwise."""
        name = str(path).lower()
        if name.endswith(".json"):
            text = self.to_json()
        elif name.endswith((".html", ".htm")):
            text = html_report.render(self)
        else:
            text = self.markdown() + "\n"
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def _progress(total, enabled):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, unit="case", file=sys.stderr, dynamic_ncols=True)


def _cell_text(text, limit=160):
    """``text`` on one line of a Markdown table cell."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _merge_compiled(cell, res, case):
    """Fold one case's gt.function result into a backend's cell."""
    c = cell.setdefault(
        "compiled", {"status": "pass", "max_err": 0.0, "reasons": [], "how": "", "checks": res["checks"], "notes": []}
    )
    if _RANK.index(res["status"]) < _RANK.index(c["status"]):
        c["status"] = res["status"]
    if res["status"] == "pass":
        c["max_err"] = float(max(c["max_err"], res["max_err"]))
    elif res["reason"]:
        c["reasons"].append({"case": case, "reason": res["reason"]})
    hows = set(filter(None, c["how"].split(", "))) | set(filter(None, res["how"].split(", ")))
    c["how"] = ", ".join(sorted(hows))
    c["checks"] = sorted(set(c["checks"]) | set(res["checks"]))
    c["notes"] = (c["notes"] + [n for n in res["notes"] if n not in c["notes"]])[:3]


def _merge_pair(cell, pair, case):
    """Fold one case's comparison into a backend's cell: per (kind, method, method), the largest
    errors (also over the cases that passed alone), the number of cases, and each failure with its
    case and the backends it is blamed on."""
    for p in cell["pairs"]:
        if (p["kind"], p["a"], p["b"]) == (pair["kind"], pair["a"], pair["b"]):
            break
    else:
        p = {k: pair[k] for k in ("kind", "a", "b", "rtol", "atol")}
        p.update(passed=True, cases=0, max_abs_err=0.0, max_rel_err=0.0, passing_max_rel_err=0.0)
        p.update(failures=[], notes=[])
        cell["pairs"].append(p)
    p["cases"] += 1
    p["max_abs_err"] = max(p["max_abs_err"], pair["max_abs_err"])
    p["max_rel_err"] = max(p["max_rel_err"], pair["max_rel_err"])
    if pair["passed"]:
        p["passing_max_rel_err"] = max(p["passing_max_rel_err"], pair["max_rel_err"])
        if pair["note"] and pair["note"] not in p["notes"] and len(p["notes"]) < 4:
            p["notes"].append(pair["note"])
    else:
        p["passed"] = False
        p["failures"].append(
            {
                "case": case,
                "max_abs_err": pair["max_abs_err"],
                "max_rel_err": pair["max_rel_err"],
                "note": pair["note"],
                "blamed": pair["blamed"],
            }
        )


def run(
    backends=None,
    ops=None,
    *,
    dtype="float64",
    native=True,
    samples=None,
    order2=True,
    progress=True,
    seed=0,
    compiled=False,
):
    """Check every registered op (or those in ``ops``) on ``backends`` (default: installed ones).
    ``samples`` limits the cases per op (None: all of its domain); ``compiled`` adds the
    ``gt.function`` check.  Returns a :class:`Report`."""
    backends = list(backends) if backends else gt.available_backends()
    if "numpy" not in backends:
        backends = ["numpy"] + backends  # the reference forward runs on NumPy
    known = {b: known_failures(b) for b in backends}
    todo = {}
    for op, case in cases(ops):
        todo.setdefault(op.name, (op, []))[1].append(case)
    if ops:
        missing = set(ops) - set(todo)
        if missing:
            raise ValueError(f"no registered op named {sorted(missing)}; see docs/ops.md")
    work = [(op, i, c) for op, cs in todo.values() for i, c in enumerate(cs[:samples] if samples else cs)]
    report = Report(backends=backends, dtype=dtype, native=native, compiled=compiled)
    bar = _progress(len(work), progress)
    t0 = time.perf_counter()
    for op, i, case in work:
        if bar is not None:
            bar.set_description(op.name[:24])
        with warnings.catch_warnings():
            # (dask makes each result's empty "meta" array by casting NumPy's: a complex op's real part
            # warns there, in dask's code, about an array of no elements)
            warnings.filterwarnings("ignore", category=np.exceptions.ComplexWarning, module=r"dask\.")
            res = check_case_everywhere(
                op, case, i, backends, native=native, order2=order2, dtype=dtype, seed=seed, compiled=compiled
            )
        cells = report.rows.setdefault(op.name, {})
        for b in backends:
            c = cells.setdefault(b, {"status": "pass", "max_err": 0.0, "checks": list(res.kinds), "pairs": []})
            c["checks"] = sorted(set(c["checks"]) | set(res.kinds))
            c["max_err"] = float(max(c["max_err"], res.max_err[b])) if np.isfinite(res.max_err[b]) else float("inf")
            if not res.passed[b]:
                if op.name in known[b]:
                    c["status"], c["reason"] = "known", known[b][op.name]
                else:
                    c["status"] = "FAIL"
            if b in res.compiled:
                _merge_compiled(c, res.compiled[b], res.case)
        for pair in res.pairs:
            for b in dict.fromkeys(pair["backends"]):  # once where both methods are the backend's
                _merge_pair(cells[b], pair, res.case)
        if not all(res.passed.values()):
            report.problems.setdefault(op.name, []).extend(f"{res.case}: {p}" for p in res.problems)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    report.seconds = time.perf_counter() - t0
    return report
