"""Running the suite over the registry, and its report: an op x backend table (Markdown) and JSON."""

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


@dataclasses.dataclass
class Report:
    backends: list
    dtype: str
    native: bool
    rows: dict = dataclasses.field(default_factory=dict)  # op -> {backend: cell}
    problems: dict = dataclasses.field(default_factory=dict)  # op -> [lines]
    seconds: float = 0.0

    @property
    def failed(self):
        """(op, backend) pairs that failed and are not listed as known failures."""
        return [(op, b) for op, cells in self.rows.items() for b, c in cells.items() if c["status"] == "FAIL"]

    def markdown(self):
        head = "| op | " + " | ".join(self.backends) + " |"
        lines = [
            f"gradtape conformance: {len(self.rows)} ops x {len(self.backends)} backends, dtype "
            f"{self.dtype}, native cross-checks {'on' if self.native else 'off'}, "
            f"{self.seconds:.1f} s; {len(self.failed)} failure(s)",
            "",
            head,
            "|---|" + "---|" * len(self.backends),
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
        return "\n".join(lines)

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


def run(backends=None, ops=None, *, dtype="float64", native=True, samples=None, order2=True, progress=True, seed=0):
    """Check every registered op (or those in ``ops``) on ``backends`` (default: installed ones).
    ``samples`` limits the cases per op (None: all of its domain).  Returns a :class:`Report`."""
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
    report = Report(backends=backends, dtype=dtype, native=native)
    bar = _progress(len(work), progress)
    t0 = time.perf_counter()
    for op, i, case in work:
        if bar is not None:
            bar.set_description(op.name[:24])
        res = check_case_everywhere(op, case, i, backends, native=native, order2=order2, dtype=dtype, seed=seed)
        cells = report.rows.setdefault(op.name, {})
        for b in backends:
            c = cells.setdefault(b, {"status": "pass", "max_err": 0.0, "checks": list(res.kinds)})
            c["max_err"] = float(max(c["max_err"], res.max_err[b])) if np.isfinite(res.max_err[b]) else float("inf")
            if not res.passed[b]:
                if op.name in known[b]:
                    c["status"], c["reason"] = "known", known[b][op.name]
                else:
                    c["status"] = "FAIL"
        if not all(res.passed.values()):
            report.problems.setdefault(op.name, []).extend(f"{res.case}: {p}" for p in res.problems)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    report.seconds = time.perf_counter() - t0
    return report
