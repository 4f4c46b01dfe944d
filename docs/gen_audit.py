"""Generate the published tables of docs/audit.md: ``gradtape audit`` of SciPy's and scikit-learn's
array-API functions and of einops, on every installed backend.

    python docs/gen_audit.py            # rerun the audit and rewrite the generated part of docs/audit.md
    python docs/gen_audit.py --check    # change nothing; exit 1 if the page differs from a fresh audit

The tables lie between the page's ``BEGIN GENERATED audit`` and ``END GENERATED audit`` lines and
are never edited by hand.  The audit takes a few minutes (it calls every function on every backend),
so the test suite does not rerun it; rerun it after a change to gradtape's ops or to the libraries.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # SciPy reads it once, when first imported

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))

from gradtape.testing.audit import audit  # noqa: E402  (after SCIPY_ARRAY_API is set)

PAGE = DOCS / "audit.md"
MODULES = ["scipy.special", "scipy.stats", "sklearn.metrics", "einops"]
BEGIN = "<!-- BEGIN GENERATED audit (python docs/gen_audit.py) -->"
END = "<!-- END GENERATED audit -->"


def _versions():
    import importlib.metadata as md

    names = ["gradtape", "scipy", "scikit-learn", "einops", "numpy", "torch", "jax", "dask", "array-api-strict"]
    out = []
    for n in names:
        try:
            out.append(f"{n} {md.version(n)}")
        except md.PackageNotFoundError:
            continue
    return ", ".join(out)


def generated():
    start = time.perf_counter()
    report = audit(MODULES, progress=lambda q: print(f"\r\033[K{q}", end="", file=sys.stderr, flush=True))
    print(f"\r\033[Kaudited in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    head = (
        f"Generated with {_versions()}: {report.audited} functions audited "
        f"({len(report.functions)} public callables) on {', '.join(report.backends)}.\n\n"
    )
    return head + report.markdown(heading_level=3)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if out of date")
    args = parser.parse_args(argv)
    text = PAGE.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"docs/gen_audit.py: {PAGE} has no {BEGIN!r} ... {END!r} section", file=sys.stderr)
        return 2
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    new = f"{before}{BEGIN}\n{generated()}\n{END}{after}"
    if args.check:
        if new != text:
            diff = difflib.unified_diff(
                text.splitlines(), new.splitlines(), "docs/audit.md", "fresh audit", lineterm=""
            )
            print("\n".join(list(diff)[:200]))
            print("\ndocs/audit.md is out of date: run `python docs/gen_audit.py`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    print(f"wrote {PAGE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
