"""The docs are tested like code.

* ``docs/ops.md`` and the generated lists in ``docs/conventions.md`` are exactly what
  ``python docs/gen_ops_table.py`` makes from the op registry, so a new op shows up the day it lands.
* Every fenced ``python`` block of every ``docs/*.md`` file runs, and prints what the docs say it
  prints.  The blocks of one file run in order, in one namespace, in a fresh interpreter (a fresh
  module-level state: no backend set by an earlier test, no op registered by one) on the NumPy
  backend.  A ``text`` block right after a ``python`` block is its expected output; a block that
  prints must show its output, and a block that shows output must print it.  Warnings are part of
  the output, one line each: ``UserWarning: <message>``.

Fence options, after the word ``python``:

* ``no-run`` -- not executed (only compiled); keep these very few (at most ``MAX_NO_RUN`` a file);
* ``requires=NAME[,NAME...]`` -- run only where each NAME is available, else the block is reported
  as skipped, naming what is missing (never skipped silently).  NAME is a dotted attribute of
  ``gradtape`` (``gt.layers.Dense``) or ``backend:<name>`` (a backend that can be created here).

Run ``python tests/test_docs.py docs/guide.md`` to see one file's results directly.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import io
import itertools
import json
import os
import re
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MAX_NO_RUN = 3

_OPEN = re.compile(r"^```(?P<lang>[\w+-]*)(?P<opts>.*)$")
_OPTION = re.compile(r"^(no-run|requires=[\w.:,-]+)$")


# ------------------------------------------------------------------------------------ parsing
class Block:
    """One fenced code block: language, options, code, its first code line, and expected output."""

    def __init__(self, path, lang, opts, code, line, end):
        self.path, self.lang, self.opts, self.code, self.line = path, lang, opts, code, line
        self.end = end  # 0-based index of the closing fence's line
        self.expected = None  # the text block right after it, if any
        self.expected_line = None

    @property
    def no_run(self):
        return "no-run" in self.opts

    @property
    def requires(self):
        out = []
        for o in self.opts:
            if o.startswith("requires="):
                out += [n for n in o[len("requires=") :].split(",") if n]
        return out

    @property
    def id(self):
        return f"{self.path.name}:{self.line}"


def parse(path):
    """The fenced blocks of a Markdown file (fences at the start of a line)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"{path.name}:{start + 1}: unterminated code fence")
        blocks.append(Block(path, m["lang"], m["opts"].split(), "\n".join(body) + "\n", start + 2, i))
        i += 1
    # a text block that follows a python block (blank lines between) is its output
    for prev, nxt in itertools.pairwise(blocks):
        if prev.lang == "python" and nxt.lang == "text":
            gap = lines[prev.end + 1 : nxt.line - 2]
            if all(not s.strip() for s in gap):
                prev.expected, prev.expected_line = nxt.code, nxt.line
    return blocks


def doc_files():
    return sorted(DOCS.glob("*.md"))


def example_files():
    """The pages whose python blocks run: docs/*.md and the README (its first example is a new
    user's first minute)."""
    return doc_files() + [README]


def python_blocks():
    return [b for p in example_files() for b in parse(p) if b.lang == "python"]


# ------------------------------------------------------------------------------------ running
_DOC_LINE = re.compile(r"(docs/[\w.-]+\.md):\d+")


def _normalize(text):
    # a warning that names a line of the docs themselves (GradientLeakWarning) matches at any line
    # number, so an edit above an example does not break it
    text = _DOC_LINE.sub(r"\1:N", text or "")
    lines = [s.rstrip() for s in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _available(name):
    import gradtape

    if name.startswith("backend:"):
        try:
            gradtape.backends.get(name.split(":", 1)[1])
            return True
        except Exception:
            return False
    obj = gradtape
    for part in name.split(".")[1:] if name.startswith("gt.") else name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            return False
    return True


def run_file(path):
    """Run the python blocks of ``path`` in order in one namespace; one result dict per block.
    Meant for a fresh interpreter (see ``_results``)."""
    os.environ["GRADTAPE_BACKEND"] = "numpy"
    import gradtape  # noqa: F401 - imported before the first block, as a reader's session would

    rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    namespace = {"__name__": "__main__"}
    results = []
    for b in parse(path):
        if b.lang != "python":
            continue
        res = {"line": b.line, "status": "ok", "message": ""}
        results.append(res)
        bad = [o for o in b.opts if not _OPTION.match(o)]
        if bad:
            res.update(status="fail", message=f"unknown fence option(s) {bad}; use no-run or requires=...")
            continue
        try:
            code = compile("\n" * (b.line - 1) + b.code, rel, "exec")
        except SyntaxError as e:
            res.update(status="fail", message=f"SyntaxError: {e}")
            continue
        if b.no_run:
            res["status"] = "no-run"
            continue
        missing = [n for n in b.requires if not _available(n)]
        if missing:
            res.update(
                status="skip",
                message=f"{rel}:{b.line} needs {', '.join(missing)}, which this "
                "build does not have; its output is not verified",
            )
            continue
        out = io.StringIO()

        def show(message, category, filename, lineno, file=None, line=None, _out=out):
            _out.write(f"{category.__name__}: {message}\n")

        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(out):
                warnings.simplefilter("always")
                warnings.showwarning = show
                exec(code, namespace)
        except BaseException as e:
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            res.update(
                status="fail",
                message=f"{rel}:{b.line}: the example raised "
                f"{type(e).__name__}: {e}\n\n{tb}\noutput so far:\n"
                f"{out.getvalue()}",
            )
            continue
        got, want = _normalize(out.getvalue()), _normalize(b.expected)
        if b.expected is None and got:
            res.update(
                status="fail",
                message=f"{rel}:{b.line}: the example prints output that the docs "
                f"do not show; add a ```text block right after it:\n{got}",
            )
        elif b.expected is not None and got != want:
            diff = "\n".join(
                difflib.unified_diff(
                    want.splitlines(),
                    got.splitlines(),
                    f"{rel}:{b.expected_line} (the docs)",
                    "what the example prints",
                    lineterm="",
                )
            )
            res.update(
                status="fail",
                message=f"{rel}:{b.line}: the example's output differs from the docs (paste the real output):\n{diff}",
            )
    return results


@functools.cache
def _results(path):
    """Run one docs file in a fresh interpreter; ``{line: result}``."""
    env = dict(os.environ)
    env["GRADTAPE_BACKEND"] = "numpy"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--json", str(path)],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise AssertionError(
            f"running the examples of {path.name} crashed (exit {proc.returncode}):\n"
            f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        ) from None
    return {r["line"]: r for r in data}


# ------------------------------------------------------------------------------------ tests
def test_generated_docs_are_current():
    """docs/ops.md and conventions.md's generated lists match the registry."""
    proc = subprocess.run(
        [sys.executable, str(DOCS / "gen_ops_table.py"), "--check"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GRADTAPE_BACKEND": "numpy"},
    )
    assert proc.returncode == 0, (
        "the generated docs are out of date with the op registry; run "
        "`python docs/gen_ops_table.py` and commit docs/ops.md and docs/conventions.md\n\n"
        + proc.stdout[-6000:]
        + proc.stderr[-3000:]
    )


@pytest.mark.parametrize("block", python_blocks(), ids=lambda b: b.id)
def test_doc_example(block):
    res = _results(block.path).get(block.line)
    assert res is not None, f"{block.id}: no result (the runner did not reach this block)"
    if res["status"] == "skip":
        pytest.skip(res["message"])
    assert res["status"] in ("ok", "no-run"), res["message"]


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.name)
def test_fences_are_well_formed(path):
    """No python block hides from the runner, and no-run blocks stay rare."""
    text = path.read_text(encoding="utf-8")
    indented = [n + 1 for n, s in enumerate(text.splitlines()) if re.match(r"^\s+```\s*py", s)]
    assert not indented, (
        f"{path.name}: indented ```python fences at lines {indented} are not run; "
        "start fences at the beginning of a line"
    )
    blocks = parse(path)
    for b in blocks:
        if b.lang in ("py", "python3", "pycon"):
            raise AssertionError(f"{b.id}: write ```python (the runner runs only those)")
    no_run = [b.id for b in blocks if b.lang == "python" and b.no_run]
    assert len(no_run) <= MAX_NO_RUN, f"{path.name}: too many no-run blocks: {no_run}"


_NUMPY_ONLY = """
import importlib.abc, sys

class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "jax", "jaxlib", "array_api_strict", "tensorflow"):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden: the README's first example needs NumPy only)")

sys.meta_path.insert(0, _NotInstalled())
"""


def test_readme_first_example_needs_numpy_only():
    """The README's first command installs gradtape with NumPy only; its first example must run
    there, with no other backend's library importable, and print what the README shows."""
    first = next(b for b in parse(README) if b.lang == "python")
    assert not first.requires and not first.no_run, f"{first.id}: the first example must run everywhere"
    assert first.expected is not None, f"{first.id}: show the first example's output in a ```text block after it"
    env = {k: v for k, v in os.environ.items() if k != "GRADTAPE_BACKEND"}  # the default backend, as a new user
    proc = subprocess.run(
        [sys.executable, "-c", _NUMPY_ONLY + first.code],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{first.id}: the first example fails with NumPy alone:\n{proc.stderr[-3000:]}"
    assert _normalize(proc.stdout) == _normalize(first.expected), (
        f"{first.id}: the first example prints\n{proc.stdout}\nbut the README shows\n{first.expected}"
    )


def test_readme_install_hints_are_the_plain_wheels():
    """Every install command in the README installs a backend the way its test command does: the
    plain torch wheel (``gradtape[torch]`` pulls another torch and the CUDA packages on a CPU machine)."""
    text = README.read_text(encoding="utf-8")
    assert "python3 -m pip install torch==2.13.0" in text
    assert not re.search(r"gradtape\[(torch|jax|strict|all)\]", text), "the README names a backend extra"
    assert "python3 -m venv .venv" in text, "the README says how to make the virtual environment"
    assert "docs/index.md" in text and "mkdocs serve" in text, "the README links the docs and says how to serve them"


CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def readme_commands():
    """The README's fenced bash blocks, in order (.ci/run runs the second: the test command)."""
    return [b.code.strip() for b in parse(README) if b.lang == "bash"]


def test_readme_says_how_to_get_the_cpu_torch_anywhere():
    """From the public PyPI ``torch==2.13.0`` is the CUDA build on Linux: the README gives PyTorch's CPU
    index for the same version, and that version satisfies the unchanged test command's pin."""
    from packaging.specifiers import SpecifierSet

    commands = readme_commands()
    first, test = commands[0], commands[1]
    assert first == "python3 -m pip install -e . && gradtape conformance", first
    # (the suite in two processes: pytest-xdist, of the [test] extra)
    assert test.startswith("python3 -m pip install torch==") and test.endswith(
        "&& python3 -m pytest -n 2 --dist loadfile"
    ), test
    assert CPU_INDEX not in test, "the test command must keep working where only PyPI (or a mirror) is reachable"
    pin = re.match(r"python3 -m pip install torch(==[\w.]+) ", test)[1]
    cpu = [c for c in commands if CPU_INDEX in c]
    assert cpu == [f"python3 -m pip install torch{pin} {CPU_INDEX}"], cpu
    # the CPU index's wheel is 2.13.0+cpu: pip counts it as the test command's torch==2.13.0
    assert SpecifierSet(pin).contains(pin[2:] + "+cpu")
    assert CPU_INDEX in (DOCS / "backends.md").read_text(encoding="utf-8").replace("\n", " ")


@pytest.mark.parametrize("path", sorted(DOCS.rglob("*.md")), ids=lambda p: str(p.relative_to(DOCS)))
def test_local_links_resolve(path):
    """Every relative link of every page (docs/reference/ too) names a file that exists; the
    strict site build (tests/test_docs_site.py) checks anchors too, where the [docs] extra is installed."""
    text = path.read_text(encoding="utf-8")
    missing = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (path.parent / target).exists():
            missing.append(target)
    assert not missing, f"{path.name} links to files that do not exist: {missing}"


def test_api_reference_names_exist():
    """Each ``### `gt.name`...`` entry of docs/api.md names something gradtape has; entries
    marked *(not in this build yet)* name something it lacks (update the mark when it lands)."""
    import gradtape  # noqa: F401

    problems = []
    for line in (DOCS / "api.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^#{3,4} `(gt\.[\w.]+)", line)
        if not m:
            continue
        name = m.group(1)
        planned = "not in this build yet" in line
        if _available(name) == planned:
            problems.append(f"{name}: {'now exists; remove the mark' if planned else 'does not exist'}")
    assert not problems, "docs/api.md is out of step with the code:\n" + "\n".join(problems)


if __name__ == "__main__":
    args = sys.argv[1:]
    as_json = "--json" in args
    files = [Path(a).resolve() for a in args if a != "--json"] or doc_files()
    all_results = []
    for f in files:
        r = run_file(f)
        all_results += r
        if not as_json:
            for res in r:
                print(f"{f.name}:{res['line']}: {res['status']}")
                if res["message"]:
                    print("    " + res["message"].replace("\n", "\n    "))
    if as_json:
        sys.stdout = sys.__stdout__
        print(json.dumps(all_results))
