"""The documentation site (mkdocs.yml, docs/, the API reference of docs/reference/).

* ``mkdocs build --strict`` builds the site: a broken link or anchor, a page left out of the nav, or
  an entry mkdocstrings cannot find fails it. It needs the ``[docs]`` extra; where that is not
  installed, the build tests skip and say so.
* Every public name of gradtape has a docstring (mkdocstrings renders a name without one as nothing,
  and does not fail): the classes and functions of the ``gradtape`` namespace, of its public modules,
  and the public methods and properties of their classes.
* docs/reference/ is what ``python docs/gen_reference.py`` makes, and lists every public class and
  function of gradtape that is not an op (the ops are in docs/ops.md).
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest

import gradtape as gt

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# the modules whose __all__ is public API (the reference has a page for each)
PUBLIC_MODULES = ["nn", "layers", "losses", "optimizers", "random", "math", "train", "function", "fft", "linalg"]
DOCS_EXTRA = ["mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"]


def _env():
    return {**os.environ, "GRADTAPE_BACKEND": "numpy", "NO_MKDOCS_2_WARNING": "1"}


def _docs_extra_missing():
    missing = []
    for name in DOCS_EXTRA:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(name)
    return missing


needs_docs_extra = pytest.mark.skipif(
    bool(_docs_extra_missing()),
    reason=f"the [docs] extra is not installed (missing: {', '.join(_docs_extra_missing())}); "
    'install it with python3 -m pip install -e ".[docs]"',
)


# ------------------------------------------------------------------------------------ docstrings
def _module(name):
    mod = sys.modules.get(f"gradtape.{name}")
    return mod if isinstance(mod, types.ModuleType) else getattr(gt, name)


def _has_own_doc(obj):
    if inspect.isclass(obj):  # not a base class's docstring, which inspect.getdoc would return
        return bool((vars(obj).get("__doc__") or "").strip())
    return bool((inspect.getdoc(obj) or "").strip())


def _is_gradtape(obj):
    return (getattr(obj, "__module__", None) or "").startswith("gradtape")


def _public_members(cls):
    """The public methods and properties that ``cls`` itself defines; a method that overrides a
    documented one of a base class shares its docstring (``inspect.getdoc``), as mkdocstrings shows it."""
    for name, raw in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(raw, property):
            documented, fn = bool((raw.__doc__ or "").strip()), raw.fget
        elif isinstance(raw, (staticmethod, classmethod)) or inspect.isfunction(raw):
            documented, fn = bool((inspect.getdoc(getattr(cls, name)) or "").strip()), getattr(raw, "__func__", raw)
        else:
            continue
        yield name, documented, fn


def _source_file(obj):
    """The file that defines ``obj``, relative to the checkout, else its module's name."""
    try:
        path = inspect.getsourcefile(obj)  # (None for a generated function: gt.sin is dispatch.apply's)
    except (TypeError, OSError):
        path = None
    return os.path.relpath(path, ROOT) if path else obj.__module__


def undocumented():
    """``[(module file, qualified name)]`` of every public name without a docstring."""
    entries = [(f"gt.{n}", getattr(gt, n)) for n in dir(gt) if not n.startswith("_")]
    for modname in PUBLIC_MODULES:
        mod = _module(modname)
        entries += [(f"gt.{modname}.{n}", getattr(mod, n)) for n in getattr(mod, "__all__", [])]
    seen, out = set(), []
    for qual, obj in entries:
        if isinstance(obj, types.ModuleType):
            if qual.count(".") == 1 and _is_gradtape(obj) and not (obj.__doc__ or "").strip():
                out.append((getattr(obj, "__file__", qual), qual))
            continue
        if not (inspect.isclass(obj) or callable(obj)) or not _is_gradtape(obj) or id(obj) in seen:
            continue
        seen.add(id(obj))
        where = _source_file(obj)
        if not _has_own_doc(obj):
            out.append((where, qual))
        if inspect.isclass(obj):
            out += [(_source_file(fn), f"{qual}.{n}") for n, documented, fn in _public_members(obj) if not documented]
    return out


def test_every_public_name_has_a_docstring():
    missing = undocumented()
    if missing:
        pytest.fail(
            f"{len(missing)} public names have no docstring, so the API reference shows nothing for "
            "them; give each a one-line docstring that says what it is and why:\n"
            + "\n".join(f"  {where}: {qual}" for where, qual in missing),
            pytrace=False,
        )


def test_the_docstring_check_sees_a_missing_docstring(monkeypatch):
    """The walk above finds an undocumented function, class, method and property."""

    def fn():
        pass

    class Cls:
        """Documented."""

        def method(self):
            pass

        @property
        def prop(self):
            return 1

    class Bare:
        pass

    fn.__module__ = Cls.__module__ = Bare.__module__ = "gradtape.fake"
    monkeypatch.setattr(gt, "zz_fn", fn, raising=False)
    monkeypatch.setattr(gt, "zz_cls", Cls, raising=False)
    monkeypatch.setattr(gt, "zz_bare", Bare, raising=False)
    found = {qual for _, qual in undocumented()}
    assert {"gt.zz_fn", "gt.zz_cls.method", "gt.zz_cls.prop", "gt.zz_bare"} <= found
    assert "gt.zz_cls" not in found


# ------------------------------------------------------------------------------------ the reference
def _run(*args, cwd=ROOT, timeout=600):
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


def test_reference_pages_are_current_and_complete():
    proc = _run(str(DOCS / "gen_reference.py"), "--check")
    assert proc.returncode == 0, (
        "docs/reference/ is out of date, or leaves out a public name: run `python docs/gen_reference.py` "
        "(and add any name it reports to a page of its PAGES)\n" + proc.stdout[-6000:] + proc.stderr[-3000:]
    )


def test_the_reference_generator_refuses_to_leave_a_name_out(monkeypatch):
    """A new public function of gradtape that is on no page makes the generator fail, naming it."""
    spec = importlib.util.spec_from_file_location("_gen_reference", DOCS / "gen_reference.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)

    def brand_new():
        """Something new."""

    brand_new.__module__ = "gradtape.fake"
    monkeypatch.setattr(gt, "brand_new", brand_new, raising=False)
    with pytest.raises(gen.ReferenceError_, match=r"gt\.brand_new is on no reference page"):
        gen.render(gt)


# ------------------------------------------------------------------------------------ the site
def _mirror(tmp_path):
    """A copy of the checkout's docs/ and mkdocs.yml beside links to everything else, to edit freely."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for entry in ROOT.iterdir():
        if entry.name in ("docs", "mkdocs.yml", "site", ".git"):
            continue
        (tree / entry.name).symlink_to(entry)
    shutil.copytree(DOCS, tree / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", tree / "mkdocs.yml")
    return tree


def _build(cwd, site_dir):
    return _run("-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir), cwd=cwd)


@functools.cache
def built_site():
    """``(site folder, mkdocs' process)``: the checkout's site, built once per run (this file and
    tests/test_docs_browser.py read it), removed at exit."""
    tmp = Path(tempfile.mkdtemp(prefix="gradtape-site-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    site = tmp / "site"
    return site, _build(ROOT, site)


@needs_docs_extra
def test_site_builds_strict():
    site, proc = built_site()
    assert proc.returncode == 0, (
        "`mkdocs build --strict` failed; the WARNING lines say which page and link:\n"
        + proc.stdout[-6000:]
        + proc.stderr[-8000:]
    )
    # the reference is rendered from the docstrings themselves
    tapes = (site / "reference" / "tapes" / "index.html").read_text(encoding="utf-8")
    assert 'id="gradtape.GradientTape.gradient"' in tapes
    first_line = inspect.getdoc(gt.GradientTape.gradient).split()[:3]
    assert all(word.strip("`") in tapes for word in first_line), first_line
    # every page of the nav is there, the op table included
    for page in ("guide", "conventions", "backends", "function", "conformance", "performance", "ops", "checkpoints"):
        assert (site / page / "index.html").exists(), page
    # a link from a page to the repository outside docs/ reaches a copy of that file in the site
    perf = (site / "performance" / "index.html").read_text(encoding="utf-8")
    assert 'href="../repo/benchmarks/"' in perf
    assert (site / "repo" / "benchmarks" / "index.html").exists()


@needs_docs_extra
def test_strict_build_fails_on_a_broken_link_or_anchor(tmp_path):
    tree = _mirror(tmp_path)
    index = tree / "docs" / "index.md"
    index.write_text(
        index.read_text(encoding="utf-8")
        + "\n[a page that is not there](no-such-page.md), [a section that is not there](guide.md#no-such-section),"
        " [a file outside docs/ that is not there](../no-such-file.md)\n",
        encoding="utf-8",
    )
    proc = _build(tree, tmp_path / "site")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert "no-such-page.md" in out and "#no-such-section" in out and "no-such-file.md" in out, out[-4000:]
