"""Running the suite over the registry, and its report: an op x backend table (Markdown) and JSON.

With ``compiled`` (``--compiled``) each backend's cell also holds the ``gt.function`` check
(``cell["compiled"]``: status "pass", "FAIL", "not traceable" or "n/a", ``max_err``, ``reasons``,
``how``), summarised in the table's ``compiled`` column; a compiled failure fails the run, a case
that is not traceable is listed with its reason and counted apart."""

from __future__ import annotations

import dataclasses
import json
import sys
import time

import numpy as np

from gradtape.conformance.cases import cases
from gradtape.conformance.checks import check_case_everywhere, known_failures
import gradtape as gt

__all__ = ["Report", "run"]

#: which compiled status an op's cell shows when its cases differ (the first present)
_RANK = ("FAIL", "not traceable", "n/a", "pass")
#: the executor each backend's programs are expected to get (another one is noted in the table)
_EXPECTED_HOW = {"jax": "jax compiler"}


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
        cols = list(self.backends) + (["compiled"] if self.compiled else [])
        head = "| op | " + " | ".join(cols) + " |"
        summary = ""
        if self.compiled:
            n = self.compiled_counts()
            summary = (
                f"; gt.function check: {n['pass']} pass, {n['FAIL']} FAIL, {n['not traceable']} not traceable, "
                f"{n['n/a']} n/a (op x backend)"
            )
        lines = [
            f"gradtape conformance: {len(self.rows)} ops x {len(self.backends)} backends, dtype "
            f"{self.dtype}, native cross-checks {'on' if self.native else 'off'}, "
            f"{self.seconds:.1f} s; {len(self.failed)} failure(s){summary}",
            "",
            head,
            "|---|" + "---|" * len(cols),
        ]
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
        if self.problems:
            failing = {op for op, _ in self.failed}
            known = all(op not in failing for op in self.problems)
            lines += [
                "",
                "Known disagreements (listed in known_failures, not counted as failures):"
                if known
                else "Problems (failures, and known disagreements of the ops listed in known_failures):",
            ]
            for op, probs in self.problems.items():
                for p in probs[:6]:
                    lines.append(f"- `{op}`: {p}")
        if self.compiled:
            lines += self._compiled_lines()
        return "\n".join(lines)

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
        text = self.to_json() if str(path).endswith(".json") else self.markdown() + "\n"
        with open(path, "w") as f:
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
        res = check_case_everywhere(
            op, case, i, backends, native=native, order2=order2, dtype=dtype, seed=seed, compiled=compiled
        )
        cells = report.rows.setdefault(op.name, {})
        for b in backends:
            c = cells.setdefault(b, {"status": "pass", "max_err": 0.0, "checks": list(res.kinds)})
            c["max_err"] = float(max(c["max_err"], res.max_err[b])) if np.isfinite(res.max_err[b]) else float("inf")
            if not res.passed[b]:
                if op.name in known[b]:
                    c["status"], c["reason"] = "known", known[b][op.name]
                else:
                    c["status"] = "FAIL"
            if b in res.compiled:
                _merge_compiled(c, res.compiled[b], res.case)
        if not all(res.passed.values()):
            report.problems.setdefault(op.name, []).extend(f"{res.case}: {p}" for p in res.problems)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    report.seconds = time.perf_counter() - t0
    return report
