"""Dask clusters started by the suite, the docs and the benchmarks take no fixed port (issue 26).

``LocalCluster(dashboard_address=None)`` turns the dashboard off but still serves the scheduler's HTTP
routes on dask's default port, 8787: where that port is busy (a user's own dashboard open), dask warns
"Port 8787 is already in use" and a docs example's output no longer matches. ``dashboard_address=":0"``
takes a free port. Here 8787 is held busy while the docs' cluster example (docs/scaling.md) runs, and
every ``LocalCluster(...)`` written in the repository is checked to pass ``dashboard_address=":0"``.
"""

from __future__ import annotations

import ast
import contextlib
import os
import socket
import subprocess
import sys

import pytest

from test_docs import DOCS, ROOT, _normalize, parse

pytest.importorskip("distributed", reason="cluster examples need distributed (pip install gradtape[dask])")
pytest.importorskip("dask.array", reason="the dask backend needs dask[array] (pip install gradtape[dask])")

DASHBOARD_PORT = 8787


@contextlib.contextmanager
def port_held_busy(port):
    """Listen on ``port`` for the duration (if another process already does, it is busy anyway)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(OSError):
            s.bind(("", port))
            s.listen()
        yield
    finally:
        s.close()


def _port_is_busy(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def cluster_example():
    """The docs' python block that starts a ``LocalCluster``."""
    blocks = [b for b in parse(DOCS / "scaling.md") if b.lang == "python" and "LocalCluster(" in b.code]
    assert len(blocks) == 1, [b.id for b in blocks]
    return blocks[0]


def test_the_docs_cluster_example_runs_with_port_8787_busy():
    block = cluster_example()
    assert block.expected is not None, block.id
    prelude = "import numpy as np\nimport gradtape as gt\n"
    env = {**os.environ, "GRADTAPE_BACKEND": "numpy", "PYTHONWARNINGS": "always"}
    with port_held_busy(DASHBOARD_PORT):
        assert _port_is_busy(DASHBOARD_PORT)
        proc = subprocess.run(
            [sys.executable, "-c", prelude + block.code],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert str(DASHBOARD_PORT) not in proc.stderr, f"{block.id}: the cluster tried the fixed port:\n{proc.stderr}"
    assert _normalize(proc.stdout) == _normalize(block.expected), (proc.stdout, proc.stderr[-2000:])


def local_cluster_calls():
    """``(file:line, {keyword: source})`` of every ``LocalCluster(...)`` call in the repository's Python
    files and the docs' python blocks."""
    sources = [
        (p.relative_to(ROOT), p.read_text(encoding="utf-8"), 0)
        for d in ("tests", "benchmarks", "examples")
        for p in sorted((ROOT / d).rglob("*.py"))
    ]
    for md in sorted(DOCS.glob("*.md")):
        sources += [(md.relative_to(ROOT), b.code, b.line - 1) for b in parse(md) if b.lang == "python"]
    out = []
    for where, text, offset in sources:
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", getattr(node.func, "id", None)) == "LocalCluster"
            ):
                out.append((f"{where}:{node.lineno + offset}", {k.arg: ast.unparse(k.value) for k in node.keywords}))
    return out


def test_every_local_cluster_takes_a_free_port():
    calls = local_cluster_calls()
    where = {w.split(":")[0] for w, _ in calls}
    # the ones this file was written for are seen
    assert {"tests/test_dask_cluster.py", "benchmarks/dask_scaling.py", "docs/scaling.md"} <= where, where
    fixed = [w for w, kw in calls if kw.get("dashboard_address") not in ("':0'", '":0"')]
    assert not fixed, (
        f"LocalCluster without dashboard_address=':0' (dask then serves on port {DASHBOARD_PORT}, "
        f"and warns or fails where it is busy): {fixed}"
    )
