"""The public API is typed: every public callable of the typed modules has annotations, the methods
bound to ``Tensor`` at import are declared for type checkers, and mypy checks a user's program
with them (a correct one passes with the intended types; typical mistakes are reported)."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gradtape as gt
from gradtape.core.tensor import Tensor, Variable

#: the modules whose public API is fully annotated (mypy's ``disallow_incomplete_defs`` covers them too)
TYPED_MODULES = (
    "autodiff.tape",
    "core.tensor",
    "nn",
    "training.layers",
    "training.initializers",
    "training.optimizers",
    "training.losses",
    "training.module",
    "random",
    "training.checkpoint",
    "core.dtypes",
    "autodiff.custom_gradient",
    "testing.crosscheck",
    "testing",
    "autodiff.jacobian",
)
_EMPTY = inspect.Parameter.empty


def _missing(qualname, fn, method):
    """``qualname`` with what its signature lacks (unannotated parameters, the return), or None."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())[1 if method else 0 :]
    bare = [p.name for p in params if p.annotation is _EMPTY]
    if not bare and sig.return_annotation is not _EMPTY:
        return None
    return f"{qualname}({', '.join(bare)}){' -> ?' if sig.return_annotation is _EMPTY else ''}"


def _public_members(mod):
    """(qualname, function, is_method) for each public function and class member defined in ``mod``;
    members bound from another module (Tensor's operators) are checked by the next test."""
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    for name in names:
        obj = getattr(mod, name)
        if getattr(obj, "__module__", None) != mod.__name__:
            continue
        if inspect.isfunction(obj):
            yield name, obj, False
        elif inspect.isclass(obj):
            for attr, value in vars(obj).items():
                if attr.startswith("_") and attr not in ("__init__", "__call__"):
                    continue
                if isinstance(value, property):
                    for acc, fn in (("", value.fget), (".setter", value.fset)):
                        if fn is not None and fn.__module__ == mod.__name__:
                            yield f"{name}.{attr}{acc}", fn, True
                elif isinstance(value, staticmethod):
                    yield f"{name}.{attr}", value.__func__, False
                elif isinstance(value, classmethod):
                    yield f"{name}.{attr}", value.__func__, True
                elif inspect.isfunction(value) and value.__module__ == mod.__name__:
                    yield f"{name}.{attr}", value, True


@pytest.mark.parametrize("module", TYPED_MODULES)
def test_public_callables_are_annotated(module):
    mod = importlib.import_module(f"gradtape.{module}")
    members = list(_public_members(mod))
    assert members, f"gradtape.{module} has no public callable: the check would pass vacuously"
    missing = [m for m in (_missing(q, fn, meth) for q, fn, meth in members) if m]
    assert not missing, f"gradtape.{module}: public callables without full annotations: {missing}"


def _declared_for_checkers(cls_name):
    """Names declared inside ``if TYPE_CHECKING:`` in class ``cls_name`` of gradtape/core/tensor.py."""
    tree = ast.parse(Path(inspect.getfile(Tensor)).read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name]
    names = set()
    for stmt in cls.body:
        if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING":
            for d in stmt.body:
                if isinstance(d, ast.FunctionDef):
                    args = d.args.posonlyargs + d.args.args + d.args.kwonlyargs
                    assert all(a.annotation is not None for a in args[1:]), f"{cls_name}.{d.name}: unannotated"
                    assert d.returns is not None, f"{cls_name}.{d.name}: no return annotation"
                    names.add(d.name)
                elif isinstance(d, ast.AnnAssign) and isinstance(d.target, ast.Name):
                    names.add(d.target.id)
    return names


def test_methods_bound_at_import_are_declared_for_checkers():
    """gradtape/ops/operators.py binds Tensor's operators and computing methods after the ops exist;
    mypy cannot see that, so tensor.py declares each one (annotated) under ``TYPE_CHECKING``.  A
    binding added there without its declaration fails here."""
    declared = {"Tensor": _declared_for_checkers("Tensor"), "Variable": _declared_for_checkers("Variable")}
    undeclared = []
    bound = 0
    for cls in (Tensor, Variable):
        for attr, value in vars(cls).items():
            fn = value.fget if isinstance(value, property) else value
            if not inspect.isfunction(fn) or fn.__module__ == "gradtape.core.tensor":
                continue
            bound += 1
            if not any(attr in declared[c.__name__] for c in cls.__mro__ if c.__name__ in declared):
                undeclared.append(f"{cls.__name__}.{attr}")
    assert bound >= 40, f"only {bound} methods bound from outside gradtape/core/tensor.py: the scan is broken"
    assert not undeclared, (
        f"bound at import but not declared for type checkers in gradtape/core/tensor.py: {undeclared}"
    )


def test_package_ships_py_typed():
    assert (Path(gt.__file__).parent / "py.typed").is_file(), "gradtape/py.typed (PEP 561 marker) is missing"


# ---------------------------------------------------------------------------------------- mypy
GOOD = """
    from __future__ import annotations

    import numpy as np

    import gradtape as gt

    x = gt.Variable(3.0)
    with gt.GradientTape(persistent=True) as tape:
        y = x * x + 2.0 * x - x / 4.0
    g = tape.gradient(y, x)
    reveal_type(g)  # R: gradtape.core.tensor.Tensor | None
    if g is not None:
        arr: np.ndarray = g.numpy()
        f: float = float(g)
    jac = tape.batch_jacobian(gt.reshape(y, (1, 1)), gt.reshape(x, (1, 1)))
    reveal_type(jac)  # R: gradtape.core.tensor.Tensor

    model = gt.layers.Sequential([gt.layers.Dense(4, activation="relu"), gt.layers.Dense(1)])
    opt = gt.optimizers.Adam(learning_rate=1e-3)
    data = gt.random.normal((8, 3), seed=1)
    with gt.GradientTape() as tape2:
        pred = model(data)
        loss = gt.losses.MeanSquaredError()(gt.zeros((8, 1)), pred)
    grads = tape2.gradient(loss, model.trainable_variables)
    reveal_type(grads)  # R: list[gradtape.core.tensor.Tensor | None]
    step = opt.apply_gradients(zip(grads, model.trainable_variables))
    reveal_type(step)  # R: gradtape.core.tensor.Variable
    pair = tape2.gradient(loss, (x, data))
    reveal_type(pair)  # R: tuple[gradtape.core.tensor.Tensor | None, ...]

    t = gt.constant([[1.0, 2.0]])
    h = gt.layers.Dense(2)(t)
    u = -t @ gt.constant([[1.0], [2.0]]) ** 2 + 1
    reveal_type(u)  # R: gradtape.core.tensor.Tensor
    reveal_type(u.T[0] < 3)  # R: gradtape.core.tensor.Tensor
    reveal_type(t.shape)  # R: gradtape.core.tensor.TensorShape
    reveal_type(t.dtype)  # R: gradtape.core.dtypes.DType
    reveal_type(x.assign_add(1.0))  # R: gradtape.core.tensor.Variable
    reveal_type(x.value())  # R: gradtape.core.tensor.Tensor
    reveal_type(gt.check_gradients(lambda a: a * a, np.ones(3), backends=["numpy"]).passed)  # R: bool
"""

BAD = """
    import gradtape as gt

    x = gt.Variable(3.0)
    with gt.GradientTape(persistent="yes") as tape:  # E: arg-type
        y = x * x
    g = tape.gradient(y, x)
    g.numpy()  # E: union-attr
    grads, variables = [g], [x]
    gt.optimizers.SGD(learning_rate=0.1).apply_gradients(zip(variables, grads))  # E: arg-type
    gt.layers.Dense("four")  # E: arg-type
    gt.random.normal((2, 2), dtype=gt.float32).assign(1.0)  # E: attr-defined
"""


def _expected(source, marker):
    """{line number: what the ``# <marker>: ...`` comment on that line says}."""
    return {
        k: line.split(f"# {marker}: ", 1)[1].strip()
        for k, line in enumerate(source.splitlines(), 1)
        if f"# {marker}: " in line
    }


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory, request):
    """mypy's output for the two programs, checked together (one run: mypy analyses gradtape once;
    its cache lives in pytest's cache, so later runs take seconds instead of about a minute)."""
    pytest.importorskip("mypy", reason="mypy is not installed (pip install 'gradtape[test]'); the checks need it")
    d = tmp_path_factory.mktemp("typing")
    good, bad = textwrap.dedent(GOOD), textwrap.dedent(BAD)
    (d / "good.py").write_text(good)
    (d / "bad.py").write_text(bad)
    # as a user's configuration: gradtape is a typed library (errors inside it are not the user's)
    (d / "mypy.ini").write_text("[mypy]\nfollow_imports = silent\nignore_missing_imports = True\n")
    env = dict(os.environ)
    root = Path(gt.__file__).resolve().parent.parent
    if "site-packages" not in root.parts and "dist-packages" not in root.parts:
        env["MYPYPATH"] = str(root)  # a checkout (an editable install is an import hook mypy cannot follow)
    pytest_cache = getattr(request.config, "cache", None)  # (None with -p no:cacheprovider)
    cache = pytest_cache.mkdir("mypy") if pytest_cache is not None else d / "cache"
    cmd = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", str(cache), "good.py", "bad.py"]
    out = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1), f"mypy crashed:\n{out.stdout}\n{out.stderr}"
    return good, bad, out.stdout


def _lines(report, file, kind):
    """{line: [messages]} of ``kind`` ("error" or "note") that mypy reported in ``file``."""
    found = {}
    for m in re.finditer(rf"^{re.escape(file)}:(\d+): {kind}: (.*)$", report, re.M):
        found.setdefault(int(m.group(1)), []).append(m.group(2))
    return found


def test_mypy_passes_a_correct_program_with_the_intended_types(mypy_report):
    good, _, report = mypy_report
    errors = _lines(report, "good.py", "error")
    assert not errors, f"mypy reports errors in a correct program:\n{report}"
    notes = _lines(report, "good.py", "note")
    for line, want in _expected(good, "R").items():
        # (mypy before 1.11 writes builtins' names in full: builtins.list)
        got = [n.replace("builtins.", "") for n in notes.get(line, []) if n.startswith("Revealed type is")]
        assert got == [f'Revealed type is "{want}"'], f"good.py:{line}: expected {want}, mypy says {got}\n{report}"


def test_mypy_reports_typical_mistakes(mypy_report):
    _, bad, report = mypy_report
    errors = _lines(report, "bad.py", "error")
    for line, code in _expected(bad, "E").items():
        assert any(e.endswith(f"[{code}]") for e in errors.get(line, [])), (
            f"bad.py:{line}: mypy should report [{code}]:\n{report}"
        )
    unexpected = set(errors) - set(_expected(bad, "E"))
    assert not unexpected, f"mypy reports errors on lines without a mistake: {sorted(unexpected)}\n{report}"
