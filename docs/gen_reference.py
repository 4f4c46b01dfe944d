"""Generate the API reference pages, docs/reference/*.md, that mkdocstrings renders from the docstrings.

    python docs/gen_reference.py           # rewrite docs/reference/*.md
    python docs/gen_reference.py --check   # change nothing; exit 1 with a diff if a page is out of date

Each page is a list of ``::: name`` entries. The module pages (``gt.nn``, ``gt.layers``, ...) list
their module's ``__all__``, so a new public function shows up the day it lands. The top-level names
are grouped by hand in ``PAGES`` below; a public class or function of ``gradtape`` that is neither
an op (those are in ops.md, generated from the registry) nor in a group is an error here, so none
is left out of the reference. ``tests/test_docs_site.py`` runs ``--check``.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import inspect
import os
import sys
import types
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REFERENCE = DOCS / "reference"
LINK = "Rendered from the docstrings (see the [reference's index](index.md))"

# page -> (title, what the page says first, [(section or None, [top-level names of gradtape])])
PAGES = {
    "tensors.md": (
        "Tensors, variables and modules",
        f"{LINK}; the prose version is [api.md §2](../api.md#2-tensors-dtypes-and-variables).",
        [
            (
                None,
                [
                    "Tensor",
                    "TensorShape",
                    "Variable",
                    "Module",
                    "constant",
                    "convert_to_tensor",
                    "is_tensor",
                    "compute",
                    "persist",
                    "DType",
                    "as_dtype",
                    "GradientLeakWarning",
                    "GradientLeakError",
                ],
            )
        ],
    ),
    "tapes.md": (
        "Tapes and gradients",
        f"{LINK}; the [guide](../guide.md) shows them at work.",
        [
            (
                None,
                [
                    "GradientTape",
                    "UnconnectedGradients",
                    "ForwardAccumulator",
                    "custom_gradient",
                    "grad_pass_through",
                    "recompute_grad",
                    "stop_gradient",
                    "register_op",
                    "RegisterGradient",
                    "NotDifferentiable",
                    "check_gradients",
                    "vmap",
                    "vectorized_map",
                    "VmapFallbackWarning",
                ],
            ),
            (
                "Function transforms",
                ["grad", "value_and_grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "hvp"],
            ),
        ],
    ),
    "backends.md": (
        "Backends and configuration",
        f"{LINK}; [backends.md](../backends.md) explains backends, devices and plugins.",
        [(None, ["set_backend", "use_backend", "get_backend", "available_backends", "config"])],
    ),
    "function.md": (
        "gt.function",
        f"{LINK}; [Faster steps with gt.function](../function.md) gives the semantics and the differences "
        "from `tf.function`.",
        [
            (
                None,
                ["function", "Function", "TensorSpec", "cond", "while_loop", "print", "OperatorNotAllowedInGraphError"],
            )
        ],
    ),
    "namespace.md": (
        "The namespace's other functions",
        f"{LINK}. These are the functions of `gradtape` that are not recorded ops: the Array API "
        "standard's creation functions and data-type queries, and TensorFlow's top-level names. The ops "
        "themselves (`gt.sin`, `gt.matmul`, `gt.sum`, ...) are listed in [ops.md](../ops.md) with their "
        "gradient status.",
        [
            (
                "Creation functions",
                [
                    "arange",
                    "asarray",
                    "empty",
                    "empty_like",
                    "eye",
                    "from_dlpack",
                    "full",
                    "full_like",
                    "linspace",
                    "ones",
                    "ones_like",
                    "zeros",
                    "zeros_like",
                ],
            ),
            ("Data types", ["can_cast", "finfo", "iinfo", "isdtype", "result_type", "broadcast_shapes"]),
            (
                "TensorFlow's names",
                [
                    "transpose",
                    "add_n",
                    "reduce_sum",
                    "reduce_mean",
                    "reduce_max",
                    "reduce_min",
                    "reduce_prod",
                    "reduce_std",
                    "reduce_variance",
                    "reduce_logsumexp",
                    "reduce_any",
                    "reduce_all",
                    "clip_by_value",
                    "clip_by_norm",
                    "clip_by_global_norm",
                    "cumsum",
                    "identity",
                    "one_hot",
                    "scalar_mul",
                    "sigmoid",
                    "truediv",
                ],
            ),
        ],
    ),
}

# The adapter protocol that a plugin implements (gradtape/core/backend.py, re-exported by gradtape.backends).
EXTRA = {"backends.md": ["gradtape.core.backend.Backend"]}

# page -> (module, title, what the page says first); the entries are the module's __all__
MODULE_PAGES = {
    "nn.md": ("gradtape.nn", "gt.nn", "Neural-network functions with TensorFlow's names."),
    "layers.md": (
        "gradtape.training.layers",
        "gt.layers",
        "Keras-style layers, and the initializers of `gt.initializers`.",
    ),
    "losses.md": ("gradtape.training.losses", "gt.losses", "Keras' losses, as functions and as classes."),
    "optimizers.md": (
        "gradtape.training.optimizers",
        "gt.optimizers",
        "Keras 3's optimizers and learning-rate schedules.",
    ),
    "random.md": ("gradtape.random", "gt.random", "Seeded random numbers, the same for one seed on every backend."),
    "math.md": ("gradtape.math", "gt.math", "TensorFlow's `tf.math` names for gradtape's ops."),
    "train.md": (
        "gradtape.training.checkpoint",
        "gt.train",
        "Checkpoints that move between backends ([the guide to checkpoints](../checkpoints.md)).",
    ),
}

INDEX = """# API reference

The pages of this section are rendered from gradtape's docstrings by
[mkdocstrings](https://mkdocstrings.github.io/) when the site is built
(`python3 -m pip install -e ".[docs]" && mkdocs serve`); on GitHub they show only the `::: name`
lines that ask for each entry. [api.md](../api.md) describes the same API in prose, call by call,
and [ops.md](../ops.md) lists every op of the Array API namespace (`gt.sin`, `gt.matmul`, ...) with
its gradient status.

| page | what it documents |
|---|---|
{rows}

These pages are generated by `python docs/gen_reference.py`. `tests/test_docs_site.py` checks that
they are current, that each public class and function of gradtape is on one of them and has a
docstring, and builds the site with `mkdocs build --strict` (a broken link or anchor fails it).
"""


class ReferenceError_(Exception):
    """What the reference would leave out or get wrong; the message says what to change."""


def _gradtape():
    os.environ.setdefault("GRADTAPE_BACKEND", "numpy")
    sys.path.insert(0, str(DOCS.parent))
    import gradtape

    return gradtape


def op_functions(gt):
    """The public functions of the registered ops (documented in ops.md)."""
    return {id(op.public) for op in gt.registry.ops() if getattr(op, "public", None) is not None}


def public_top_level(gt):
    """gradtape's public classes and functions that the reference must list: ``{name: object}``."""
    ops = op_functions(gt)
    out = {}
    for name in dir(gt):
        obj = getattr(gt, name)
        if name.startswith("_") or isinstance(obj, types.ModuleType) or id(obj) in ops:
            continue
        if not (inspect.isclass(obj) or inspect.isroutine(obj)):
            continue
        if not (getattr(obj, "__module__", None) or "").startswith("gradtape"):
            continue
        out[name] = obj
    return out


def directive(gt, name):
    """The ``:::`` path of ``gt.<name>``; a name that a submodule of the same name shadows for
    mkdocstrings (``gt.function``, ``gt.custom_gradient``) is given by its defining module."""
    obj = getattr(gt, name)
    if f"gradtape.{name}" in sys.modules and not isinstance(obj, types.ModuleType):
        return f"{obj.__module__}.{obj.__qualname__}"
    return f"gradtape.{name}"


def _entry(path, options=None):
    lines = [f"::: {path}"]
    if options:
        lines.append("    options:")
        for key, value in options.items():
            if isinstance(value, list):
                lines.append(f"      {key}:")
                lines += [f"        - {v}" for v in value]
            else:
                lines.append(f"      {key}: {value}")
    return "\n".join(lines)


def render(gt):
    """``{file name: text}`` for every page of docs/reference/."""
    pages, problems = {}, []
    listed = {}
    for fname, (title, intro, sections) in PAGES.items():
        parts = [f"# {title}", intro]
        for section, names in sections:
            if section:
                parts.append(f"## {section}")
            for name in names:
                if not hasattr(gt, name):
                    problems.append(f"{fname}: gradtape has no {name!r}; remove it from PAGES")
                    continue
                listed[name] = fname
                parts.append(_entry(directive(gt, name), {"heading_level": 3} if section else None))
        parts += [_entry(p) for p in EXTRA.get(fname, [])]
        pages[fname] = "\n\n".join(parts) + "\n"
    for fname, (modname, title, intro) in MODULE_PAGES.items():
        try:
            mod = importlib.import_module(modname)
        except ImportError as e:
            problems.append(f"{fname}: {modname} cannot be imported ({e}); remove its page from MODULE_PAGES")
            continue
        members = list(getattr(mod, "__all__", []))
        if not members:
            problems.append(f"{fname}: {modname} has no __all__; give it one (its public names)")
        options = {"show_root_heading": "false", "members": members}
        pages[fname] = "\n\n".join([f"# {title}", f"{intro} {LINK}.", _entry(modname, options)]) + "\n"
    for name in sorted(public_top_level(gt)):
        if name not in listed:
            problems.append(f"gt.{name} is on no reference page: add it to a page of PAGES in docs/gen_reference.py")
    if problems:
        raise ReferenceError_("\n".join(problems))
    rows = []
    for fname, (title, _, _) in PAGES.items():
        rows.append(f"| [{fname}]({fname}) | {title} |")
    for fname, (_, title, intro) in MODULE_PAGES.items():
        rows.append(f"| [{fname}]({fname}) | `{title}`: {intro} |")
    pages["index.md"] = INDEX.format(rows="\n".join(rows))
    return pages


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page is out of date")
    args = ap.parse_args(argv)
    try:
        pages = render(_gradtape())
    except ReferenceError_ as e:
        print(f"docs/gen_reference.py: the API reference cannot be generated:\n{e}", file=sys.stderr)
        return 1
    stale = []
    for fname, text in sorted(pages.items()):
        path = REFERENCE / fname
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if old == text:
            continue
        stale.append(fname)
        if args.check:
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(True), text.splitlines(True), f"docs/reference/{fname}", "generated"
                )
            )
        else:
            REFERENCE.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
    extra = sorted(p.name for p in REFERENCE.glob("*.md") if p.name not in pages)
    if extra:
        print(f"docs/reference/ has pages this script does not make: {extra}; remove them", file=sys.stderr)
        return 1
    if args.check and stale:
        print(f"\nout of date: {stale}; run `python docs/gen_reference.py`", file=sys.stderr)
        return 1
    print(("up to date: " if args.check else "written: ") + ", ".join(stale or ["nothing to change"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
