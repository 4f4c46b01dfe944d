"""The op chapters are portable (issue 23): what differs between array libraries lives in the adapters.

An op chapter (``gradtape/ops/*.py``) writes each op once, against the Array API namespace ``xp`` or
the ``Backend`` protocol's declared capabilities (``backend.erf``, ``backend.special_function``,
``backend.lazy``, ...).  What one library does differently goes into its adapter (``backends/<lib>.py``):
its ``overrides`` (op name -> the library's own forward) or its answer to a capability.  So a chapter
never asks which library it runs on: this module reads every chapter with ``ast`` and fails on

* an import of an array library that an adapter wraps (``import torch``, ``import jax.numpy``,
  ``from dask import array``), at the top of the file or inside a function;
* a comparison with a backend's name (``backend.name == "numpy"``, ``b in ("torch", "jax")``), or any
  other use of ``backend.name`` / ``b.name`` outside an f-string (an error message may name it);
* ``array_api_compat``'s library tests (``is_torch_array``, ``is_jax_namespace``, ...).

NumPy and SciPy are imported by chapters, by design: they are the host's libraries (shapes, index
arithmetic, random draws, the host fallback of ``gt.special``), applied to host values, never a
backend's arrays.  There is no allowlist: nothing in a chapter needed one.

The second half checks the capability that replaced the branches of ``gt.special``, on every backend:
a special function the adapter declares computes on the library, never through the host.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import backend_registry as _backends
from gradtape.ops import special as special_chapter

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "gradtape" / "ops").glob("*.py"))

#: the names a backend goes by (``gt.set_backend`` accepts each; aliases such as ``"np"`` too)
BACKEND_NAMES = frozenset(_backends.known_backends()) | frozenset({"np", "pytorch", "strict", "array-api-strict"})
#: the top-level modules of the array libraries the adapters wrap (NumPy is the host's: see above),
#: and the companions they import (``jaxlib``, ``cupyx``)
LIBRARIES = (frozenset(_backends.known_backends()) - {"numpy"}) | frozenset({"jaxlib", "cupyx"})
#: what a chapter calls the Backend it is handed
BACKEND_VARIABLES = frozenset({"backend", "b", "_b"})


def _is_backend(node):
    return (isinstance(node, ast.Name) and node.id in BACKEND_VARIABLES) or (
        isinstance(node, ast.Attribute) and node.attr in BACKEND_VARIABLES
    )


def _names_a_backend(node):
    """Whether ``node`` is a backend's name as a string, or a tuple/list/set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in BACKEND_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_backend(e) for e in node.elts)
    return False


def library_branches(source, filename="<chapter>"):
    """``[(line, what)]``: each place where ``source`` asks which library it runs on."""
    tree = ast.parse(source, filename)
    in_fstring = {id(n) for f in ast.walk(tree) if isinstance(f, ast.JoinedStr) for n in ast.walk(f)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in LIBRARIES:
                    found.append((node.lineno, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            top = node.module.split(".")[0]
            if top in LIBRARIES:
                found.append((node.lineno, f"from {node.module} import ..."))
            elif top == "array_api_compat":
                for alias in node.names:
                    if any(f"_{lib}_" in alias.name or alias.name.endswith(f"_{lib}") for lib in BACKEND_NAMES):
                        found.append((node.lineno, f"from {node.module} import {alias.name}"))
        elif isinstance(node, ast.Compare):
            if any(_names_a_backend(n) for n in [node.left, *node.comparators]):
                found.append((node.lineno, f"a comparison with a backend's name: {ast.unparse(node)}"))
        elif isinstance(node, ast.Attribute) and node.attr == "name" and _is_backend(node.value):
            if id(node) not in in_fstring:
                found.append((node.lineno, f"{ast.unparse(node)} read outside an error message"))
    return sorted(set(found))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_a_chapter_never_asks_which_library_it_runs_on(path):
    found = library_branches(path.read_text(encoding="utf-8"), str(path))
    assert not found, (
        f"gradtape/ops/{path.name} branches on the array library: "
        + "; ".join(f"line {line}: {what}" for line, what in found)
        + ".  Move the library's own code into its adapter (backends/<lib>.py): an entry of its "
        "`overrides` (op name -> forward), or its answer to a Backend capability (docs/backends.md)"
    )


def test_there_are_chapters_to_read():
    names = {p.name for p in CHAPTERS}
    assert {"special.py", "nan_functions.py", "elementwise.py", "__init__.py"} <= names, names


@pytest.mark.parametrize(
    "source, what",
    [
        ('def f(backend, x):\n    if backend.name == "numpy":\n        return x\n', "comparison"),
        ('def f(b, x):\n    if b in ("torch", "jax"):\n        return x\n', "comparison"),
        ('def f(backend, x):\n    return {"torch": 1}.get(backend.name)\n', "backend.name"),
        ("def f(x):\n    import torch\n\n    return torch.special.erf(x)\n", "import torch"),
        ("import jax.numpy as jnp\n", "import jax.numpy"),
        ("from dask import array as da\n", "from dask"),
        ("from array_api_compat import is_torch_array\n", "is_torch_array"),
    ],
)
def test_the_check_sees_a_library_branch(source, what):
    found = library_branches(source)
    assert found and any(what in w for _, w in found), found


def test_the_check_leaves_portable_code_alone():
    source = (
        "import numpy as np\n"
        "from array_api_compat import device\n"
        "def f(backend, x):\n"
        "    if backend.lazy:\n"
        '        raise ValueError(f"not on backend {backend.name!r}")\n'
        "    return backend.xp.where(x > 0, x, np.float64(0))\n"
    )
    assert library_branches(source) == []


# --------------------------------------------------------------------------- gt.special's capability
#: the functions gt.special computes with a forward of its own (the others are compositions of ops)
OWN_FORWARD = sorted(
    name
    for name in special_chapter.__all__
    if getattr(special_chapter, name).op.name == f"special.{name}"
    and callable(getattr(special_chapter, name).op.forward)
)
#: composed from another special function, where the library has that one
DERIVED = {"erfcinv": "ndtri", "betaln": "gammaln"}


def _call(name, dtype):
    """``gt.special.<name>`` and SciPy's on real arguments inside its domain."""
    x = np.array([0.3, 0.6], dtype=dtype)
    fn = getattr(gt.special, name)
    positional = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if name == "polygamma":
        args = (1, x)
    elif len(positional) == 2:
        args = (x, np.array([0.7, 1.2], dtype=dtype))
    else:
        args = (x,)
    got = fn(*[a if isinstance(a, int) else gt.constant(a) for a in args])
    return got, args


def test_the_functions_with_forwards_are_found():
    assert {"erfc", "gammaln", "psi", "polygamma", "sinc", "betaln", "erfcinv", "rel_entr"} <= set(OWN_FORWARD)


def test_a_special_function_the_adapter_declares_computes_on_the_library(backend, monkeypatch):
    """Where ``Backend.special_function`` gives the library's own function (``torch.special``,
    ``jax.scipy.special``, SciPy's on NumPy), or what ``erfcinv``/``betaln`` are made of, gt.special
    computes there; only the rest goes through SciPy on the host.  Values are SciPy's either way (within
    1e-8: torch's polygamma differs from SciPy's by 4e-10)."""
    scipy_special = pytest.importorskip("scipy.special")
    b = gt.get_backend()
    host_calls = []
    real_host = special_chapter._host

    def spy(backend_, fn, *xs):
        host_calls.append(fn)
        return real_host(backend_, fn, *xs)

    monkeypatch.setattr(special_chapter, "_host", spy)
    on_host = set()
    for name in OWN_FORWARD:
        del host_calls[:]
        got, args = _call(name, np.float64)
        if host_calls:
            on_host.add(name)
        want = getattr(scipy_special, name)(*args)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-8, atol=1e-12, err_msg=f"{name} on {backend}")
        assert got.dtype == gt.float64, (name, got.dtype)
    declared = {n for n in OWN_FORWARD if b.special_function(n) is not None}
    derived = {n for n, of in DERIVED.items() if n not in declared and b.special_function(of) is not None}
    assert on_host == set(OWN_FORWARD) - declared - derived - {"sinc"}, (
        f"backend {backend}: through the host {sorted(on_host)}; declared by the adapter {sorted(declared)}, "
        f"composed of those {sorted(derived)}"
    )


def test_special_functions_of_float32_keep_float32(backend):
    """A library's (or SciPy's) function in float64 for float32 input (SciPy's polygamma) comes back
    in float32, on every path."""
    for name in OWN_FORWARD:
        got, _ = _call(name, np.float32)
        assert got.dtype == gt.float32, (name, backend, got.dtype)


def test_complex_inputs_compute_with_scipy(backend):
    """The libraries' special functions take real inputs only: a complex input goes to SciPy, on every
    backend (``sinc``: its Array API form, which takes complex values)."""
    scipy_special = pytest.importorskip("scipy.special")
    z = np.array([0.3 + 0.4j, -1.2 + 0.1j])
    for name, want in (("erfc", scipy_special.erfc(z)), ("sinc", np.sinc(z))):
        got = getattr(gt.special, name)(gt.constant(z))
        assert got.dtype == gt.complex128, (name, got.dtype)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, err_msg=f"{name} on {backend}")
