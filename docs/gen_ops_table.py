"""Generate docs/ops.md, and the generated lists in docs/conventions.md, from gradtape's op registry.

    python docs/gen_ops_table.py           # rewrite docs/ops.md and the generated parts of conventions.md
    python docs/gen_ops_table.py --check   # change nothing; exit 1 with a diff if either is out of date

Everything here is read from the registry (``gradtape.core.registry.ops()``): one row per registered op,
grouped by the chapter of the Array API standard the op belongs to, with its gradient status, the
number of sample cases its domain gives the conformance suite, and the convention it follows where
the mathematics leaves a choice (``convention=`` in the op's declaration).  A new op appears here the
day it is registered; ``tests/test_docs.py`` fails until this script has been run.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
OPS_MD = DOCS / "ops.md"
CONVENTIONS_MD = DOCS / "conventions.md"

# The standard's chapters in the standard's order, then the extensions and what lies beyond it.
CHAPTERS = [
    ("creation", "Creation functions"),
    ("data_types", "Data type functions"),
    ("elementwise", "Element-wise functions"),
    ("indexing", "Indexing"),
    ("linear_algebra", "Linear algebra functions"),
    ("manipulation", "Manipulation functions"),
    ("searching", "Searching functions"),
    ("sets", "Set functions"),
    ("sorting", "Sorting functions"),
    ("statistical", "Statistical functions"),
    ("utility", "Utility functions"),
    ("linalg", "gt.linalg (extension)"),
    ("fft", "gt.fft (extension)"),
    ("special", "gt.special (SciPy's special functions)"),
    ("nan_functions", "NaN-ignoring reductions (NumPy's nan*)"),
    ("nn", "gt.nn (beyond the standard)"),
    ("math", "gt.math (beyond the standard)"),
    ("random", "gt.random (beyond the standard)"),
    ("user", "Registered by users"),
]

# Python operators of gt.Tensor, as they are written.
OPERATORS = {
    "__add__": "x + y",
    "__sub__": "x - y",
    "__mul__": "x * y",
    "__truediv__": "x / y",
    "__floordiv__": "x // y",
    "__mod__": "x % y",
    "__pow__": "x ** y",
    "__matmul__": "x @ y",
    "__and__": "x & y",
    "__or__": "x | y",
    "__xor__": "x ^ y",
    "__lshift__": "x << y",
    "__rshift__": "x >> y",
    "__eq__": "x == y",
    "__ne__": "x != y",
    "__lt__": "x < y",
    "__le__": "x <= y",
    "__gt__": "x > y",
    "__ge__": "x >= y",
    "__neg__": "-x",
    "__pos__": "+x",
    "__abs__": "abs(x)",
    "__invert__": "~x",
    "__getitem__": "x[key]",
}

# Ops reached through something other than a namespace function or an operator (Markdown).
INDIRECT = {
    "getitem": "`x[key]`",
    "setitem": "`x[key] = v`",
    "identity": "reading a `gt.Variable`",
    "index_add": "internal: the gradient of `x[key]`",
    "to_device": "`x.to_device(d)`",
}

SUBMODULES = ("", "linalg", "fft", "special", "nn", "random", "math", "losses")


def _import_gradtape():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import gradtape

    return gradtape


def _chapter_order(chapter):
    names = [c for c, _ in CHAPTERS]
    return (names.index(chapter), "") if chapter in names else (len(names), str(chapter))


def _chapter_title(chapter):
    return dict(CHAPTERS).get(chapter, str(chapter or "other"))


def _status(op):
    if not op.differentiable:
        return "not differentiable"
    return "rule" if op.grad is not None else "no rule"


def _cases(op):
    """How many sample calls the op's domain gives the conformance suite (``domains.op_cases``)."""
    from gradtape.core import domains

    return len(domains.op_cases(op))


def _called_as(gt, op):
    """How users reach the op: namespace names (aliases included), operators, or a note."""
    pub = op.public
    found = []
    if pub is not None:
        for sub in SUBMODULES:
            mod = getattr(gt, sub, None) if sub else gt
            if mod is None or not hasattr(mod, "__dict__"):
                continue
            prefix = f"gt.{sub}." if sub else "gt."
            # a submodule's public names are its __all__ (not what it imports for its own use)
            public = getattr(mod, "__all__", None) if sub else None
            names = sorted(
                k
                for k, v in vars(mod).items()
                if v is pub and not k.startswith("_") and (public is None or k in public)
            )
            # the op's own name first, then aliases (TF's reduce_* names, cast, transpose, ...)
            names.sort(key=lambda k: k != op.name)
            found += [prefix + k for k in names]
        for dunder, text in OPERATORS.items():
            if getattr(gt.Tensor, dunder, None) is pub:
                found.append(text)
    if not found:
        return INDIRECT.get(op.name, "internal")
    return ", ".join("`" + f.replace("|", "\\|") + "`" for f in found)


def _md(text):
    """Convention text as table-safe Markdown."""
    return re.sub(r"([|*])", r"\\\1", " ".join(str(text).split()))


def _grouped(gt):
    ops = gt.registry.ops()
    chapters = sorted({op.chapter for op in ops}, key=_chapter_order)
    return [(ch, [op for op in ops if op.chapter == ch]) for ch in chapters]


def render_ops(gt) -> str:
    ops = gt.registry.ops()
    groups = _grouped(gt)
    n_rule = sum(_status(o) == "rule" for o in ops)
    n_nd = sum(_status(o) == "not differentiable" for o in ops)
    n_none = sum(_status(o) == "no rule" for o in ops)
    n_conv = sum(bool(o.convention) for o in ops)
    out = [
        "# Registered ops",
        "",
        "<!-- Generated by `python docs/gen_ops_table.py` from gradtape's op registry; do not edit by hand. -->",
        "",
        (
            f"Every op in the registry of this build of gradtape: **{len(ops)} ops**, {n_rule} with a gradient "
            f"rule, {n_nd} not differentiable, {n_none} differentiable without a rule "
            f"(differentiating through one is a `LookupError`); {n_conv} state a convention where the "
            "mathematics leaves a choice. Ops you register with `gt.register_op` join the registry "
            "(chapter *Registered by users*) when your code runs; they are not listed here."
        ),
        "",
        (
            "Columns: **called as**: the namespace names (TF aliases included) and operators that run "
            "the op; **gradient**: `rule` (differentiable), `not differentiable` (outputs carry no "
            'gradient: `None`, or zeros with `unconnected_gradients="zero"`), `no rule` '
            "(differentiating through it raises `LookupError`); **cases**: the sample calls its domain "
            "gives the conformance suite (complex samples included); **convention**: the choice made at "
            "kinks and edge cases (see [conventions.md](conventions.md))."
        ),
        "",
        "| chapter | ops | rule | not differentiable | no rule |",
        "|---|---:|---:|---:|---:|",
    ]
    for ch, chops in groups:
        anchor = re.sub(r"[^a-z0-9 -]", "", _chapter_title(ch).lower()).replace(" ", "-")
        out.append(
            f"| [{_chapter_title(ch)}](#{anchor}) | {len(chops)} | "
            f"{sum(_status(o) == 'rule' for o in chops)} | "
            f"{sum(_status(o) == 'not differentiable' for o in chops)} | "
            f"{sum(_status(o) == 'no rule' for o in chops)} |"
        )
    for ch, chops in groups:
        out += [
            "",
            f"## {_chapter_title(ch)}",
            "",
            "| op | called as | gradient | cases | convention |",
            "|---|---|---|---:|---|",
        ]
        for op in chops:
            out.append(
                f"| `{op.name}` | {_called_as(gt, op)} | {_status(op)} | {_cases(op)} | {_md(op.convention or '')} |"
            )
    return "\n".join(out) + "\n"


def render_kinks(gt) -> str:
    lines = []
    for ch, chops in _grouped(gt):
        for op in chops:
            if op.convention:
                lines.append(f"- `{op.name}` ({_chapter_title(ch)}): {_md(op.convention)}")
    return "\n".join(lines) if lines else "- (no op states a convention)"


def render_not_differentiable(gt) -> str:
    lines = []
    for ch, chops in _grouped(gt):
        nd = [f"`{op.name}`" for op in chops if not op.differentiable]
        if nd:
            lines.append(f"- {_chapter_title(ch)}: {', '.join(nd)}")
    norule = [f"`{op.name}`" for op in gt.registry.ops() if op.differentiable and op.grad is None]
    lines.append(
        "- Differentiable but without a rule (a `LookupError` when differentiated): "
        + (", ".join(norule) if norule else "none")
    )
    return "\n".join(lines)


BLOCKS = {"kinks": render_kinks, "not-differentiable": render_not_differentiable}


def _fill(text, name, body):
    begin = f"<!-- BEGIN GENERATED {name} (python docs/gen_ops_table.py) -->"
    end = f"<!-- END GENERATED {name} -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise SystemExit(
            f"{CONVENTIONS_MD}: markers for the generated block {name!r} are missing:\n{begin}\n...\n{end}"
        )
    return text[: i + len(begin)] + "\n" + body + "\n" + text[j:]


def render_conventions(gt, current: str) -> str:
    for name, fn in BLOCKS.items():
        current = _fill(current, name, fn(gt))
    return current


def outputs():
    """``{path: wanted text}`` for every generated file."""
    gt = _import_gradtape()
    conv = CONVENTIONS_MD.read_text(encoding="utf-8") if CONVENTIONS_MD.exists() else ""
    return {OPS_MD: render_ops(gt), CONVENTIONS_MD: render_conventions(gt, conv)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 with a diff if a generated file is out of date"
    )
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if old == text:
            continue
        stale.append(path)
        if args.check:
            rel = path.relative_to(ROOT)
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(True),
                    text.splitlines(True),
                    f"{rel} (in the repository)",
                    f"{rel} (from the registry)",
                )
            )
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if args.check and stale:
        print(
            f"\n{', '.join(str(p.relative_to(ROOT)) for p in stale)} out of date with the op registry; "
            "run `python docs/gen_ops_table.py` and commit the result."
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
