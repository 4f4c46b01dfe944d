"""MkDocs hooks (``hooks:`` in mkdocs.yml): links from the pages to the repository's other files.

A page of docs/ links to a file outside docs/ relatively (``../benchmarks/README.md``), which is
right on GitHub and in a clone. The site holds only docs/, so for the site each such file (and
whatever it links to in turn) is added under ``repo/`` at its path in the repository, and the link
is rewritten to it. A link to a file that does not exist is left alone, so the strict build still
fails on it. Links from an added file back into docs/ are rewritten to the page.

A fence's options for the docs' own tests (``python no-run``, ``python requires=backend:torch``: see
tests/test_docs.py) are no syntax the Markdown extensions know: such a block would render as
run-together text, its comments as headings. The site gets the fence without them (``python``).
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

PREFIX = "repo"
# an inline Markdown link's relative target (no scheme, no leading /, no pure anchor)
_LINK = re.compile(r"\]\((?![a-z][\w+.-]*:|/|#)(?P<target>[^)#\s]+)(?P<anchor>#[^)\s]*)?\)")
# a fence's opening line with the test options of tests/test_docs.py after its language
_TEST_FENCE = re.compile(r"^(?P<open>```[\w+-]+)(?:[ \t]+(?:no-run|requires=[\w.:,-]+))+[ \t]*$", re.M)


def _dirs(config):
    docs = Path(os.path.abspath(config["docs_dir"]))
    return docs, docs.parent


def _join(base, target):
    """``base / target`` normalised (``..`` folded; links are not followed, as Git does not)."""
    return Path(os.path.normpath(base / target))


def _outside_targets(path, docs, root):
    """The files outside docs/ (inside the repository) that the Markdown file ``path`` links to."""
    for m in _LINK.finditer(path.read_text(encoding="utf-8")):
        target = _join(path.parent, m["target"])
        if target.is_file() and target.is_relative_to(root) and not target.is_relative_to(docs):
            yield target


def on_files(files, config):
    """Add every repository file that a page links to outside docs/, transitively, under ``repo/``."""
    docs, root = _dirs(config)
    todo = [p for p in docs.rglob("*.md")]
    added = set()
    while todo:
        for target in _outside_targets(todo.pop(), docs, root):
            if target in added:
                continue
            added.add(target)
            rel = target.relative_to(root).as_posix()
            files.append(File.generated(config, f"{PREFIX}/{rel}", abs_src_path=str(target)))
            if target.suffix == ".md":
                todo.append(target)
    return files


def on_page_markdown(markdown, page, config, files):
    """Point the page's links outside docs/ at their copies under ``repo/`` (and back into docs/)."""
    docs, root = _dirs(config)
    here = page.file.src_uri
    # where the page really is: docs/<src_uri>, or the repository file a repo/ page was added from
    real = root / here[len(PREFIX) + 1 :] if here.startswith(PREFIX + "/") else docs / here
    site_dir_of_page = posixpath.dirname(here) or "."

    def repl(m):
        target = _join(real.parent, m["target"])
        if not target.is_file() or not target.is_relative_to(root):
            return m.group(0)
        if target.is_relative_to(docs):
            site_path = target.relative_to(docs).as_posix()
        else:
            site_path = f"{PREFIX}/{target.relative_to(root).as_posix()}"
        return f"]({posixpath.relpath(site_path, site_dir_of_page)}{m['anchor'] or ''})"

    return _LINK.sub(repl, _TEST_FENCE.sub(r"\g<open>", markdown))
