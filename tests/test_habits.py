"""PyTorch / JAX / Keras habits get an AttributeError that names the gradtape way (gradtape/habits.py,
issue 26): ``t.sum()``, ``loss.backward()``, ``x.grad``, ``x.requires_grad``, ``gt.tensor(...)``,
``gt.optim``, ``gt.keras.optimizers``; every hint's ``gt.`` names exist, and docs/coming_from.md lists
every habit."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import gradtape as gt
from gradtape import habits

DOCS = Path(__file__).resolve().parent.parent / "docs"
_GT_NAME = re.compile(r"\bgt\.([A-Za-z_][\w.]*[A-Za-z0-9_])")


def _names(key):
    return key.removesuffix("()")


def _resolve(dotted):
    obj = gt
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("key", list(habits.TENSOR_HINTS))
def test_a_tensor_habit_says_what_to_write(backend, key):
    name = _names(key)
    v = gt.Variable([1.0, 2.0])
    # a Variable has .assign: the others it lacks as tensors do
    for t in [gt.constant([1.0, 2.0])] + [v] * isinstance(inspect.getattr_static(v, name), habits._Habit):
        with pytest.raises(AttributeError) as e:
            getattr(t, name)
        msg = str(e.value)
        assert msg == f"{type(t).__name__!r} object has no attribute {name!r}: {habits.TENSOR_HINTS[key]}", msg
        assert e.value.name == name
        # as for any missing attribute: hasattr is False, getattr's default comes back
        assert not hasattr(t, name) and getattr(t, name, "default") == "default"


def test_the_issues_habits(backend):
    x = gt.Variable([1.0, 2.0])
    with gt.GradientTape() as tape:
        loss = gt.reduce_sum(x * x)
    with pytest.raises(
        AttributeError,
        match=r"^'Tensor' object has no attribute 'backward': gradients come from a GradientTape.*tape\.gradient",
    ):
        loss.backward()
    with pytest.raises(
        AttributeError, match=r"^'Tensor' object has no attribute 'sum': gt\.reduce_sum\(t, axis=\.\.\.\).*gt\.sum"
    ):
        loss.sum()
    with pytest.raises(AttributeError, match=r"^'Variable' object has no attribute 'grad': .*tape\.gradient"):
        x.grad  # noqa: B018
    with pytest.raises(
        AttributeError,
        match=r"^'Variable' object has no attribute 'requires_grad': make it a gt\.Variable .*tape\.watch",
    ):
        x.requires_grad  # noqa: B018
    # the gradtape way the hints name gives the gradient
    assert tape.gradient(loss, x).numpy().tolist() == [2.0, 4.0]


@pytest.mark.parametrize(
    "expr, hint",
    [
        ("gt.tensor([1.0])", r"gt\.constant\(value\)"),
        ("gt.optim.Adam", r"gt\.optimizers"),
        ("gt.keras.optimizers.Adam", r"tf\.keras\.optimizers is gt\.optimizers"),
        ("gt.no_grad()", r"stop_recording"),
        ("gt.cat([1.0])", r"gt\.concat"),
    ],
)
def test_a_module_habit_says_what_to_write(expr, hint):
    with pytest.raises(AttributeError, match=rf"^module 'gradtape' has no attribute '\w+': .*{hint}"):
        eval(expr, {"gt": gt})


def test_other_missing_names_stay_plain():
    with pytest.raises(AttributeError, match=r"^module 'gradtape' has no attribute 'no_such_name'$") as e:
        gt.no_such_name  # noqa: B018
    assert e.value.name == "no_such_name"
    assert not hasattr(gt, "tensor") and getattr(gt, "optim", None) is None
    with pytest.raises(ImportError):
        from gradtape import no_such_name  # noqa: F401


def test_every_habit_is_missing_and_every_hint_names_what_exists():
    """A habit is only for what gradtape lacks (a name that it gains is never covered: remove its hint),
    and every ``gt.`` name a hint gives exists."""
    for key in habits.TENSOR_HINTS:
        assert isinstance(vars(gt.Tensor).get(_names(key)), habits._Habit), (
            f"Tensor.{_names(key)} exists: remove {key!r} from TENSOR_HINTS"
        )
    for name in habits.MODULE_HINTS:
        assert name not in vars(gt), f"gt.{name} exists: remove it from MODULE_HINTS"
    for name in habits.LINALG_HINTS:
        assert name not in vars(gt.linalg), f"gt.linalg.{name} exists: remove it from LINALG_HINTS"
    hints = [*habits.TENSOR_HINTS.values(), *habits.MODULE_HINTS.values(), *habits.LINALG_HINTS.values()]
    named = {m for hint in hints for m in _GT_NAME.findall(hint)}
    assert {"reduce_sum", "optimizers", "constant", "GradientTape", "stop_gradient"} <= named
    missing = []
    for dotted in sorted(named):
        try:
            _resolve(dotted)
        except AttributeError:
            missing.append(f"gt.{dotted}")
    assert not missing, f"hints name what gradtape does not have: {missing}"


def test_install_leaves_defined_names_alone():
    class Mine(gt.Tensor):
        __slots__ = ()

        def sum(self):
            return "mine"

    installed = habits.install(Mine)
    assert installed == [] and Mine.sum(None) == "mine"  # sum is Mine's own; the rest came from Tensor


def test_no_getattr_on_the_tensor():
    """The hints are descriptors, not a ``Tensor.__getattr__``: a class with ``__getattr__`` slows every
    attribute lookup of its instances (the tensor's hot path), not only the missing ones."""
    for cls in (gt.Tensor, gt.Variable):
        assert not any("__getattr__" in vars(k) for k in cls.__mro__), cls


def test_the_coming_from_page_lists_every_habit():
    text = (DOCS / "coming_from.md").read_text(encoding="utf-8")
    missing = [f".{k}" for k in habits.TENSOR_HINTS if f"`.{k}`" not in text and f".{k}`" not in text]
    missing += [f"gt.{n}" for n in habits.MODULE_HINTS if f"gt.{n}" not in text]
    assert not missing, f"docs/coming_from.md does not list: {missing}"


def test_a_missing_linalg_name_is_named_as_written_with_a_hint():
    """``gt.linalg.norm`` (NumPy's and TensorFlow's name) names ``gradtape.linalg`` -- not the module file
    behind it -- and the two norms to call; another missing name says only that it is missing."""
    with pytest.raises(
        AttributeError, match=r"^module 'gradtape.linalg' has no attribute 'norm': gt.linalg.vector_norm"
    ):
        gt.linalg.norm  # noqa: B018
    with pytest.raises(AttributeError, match=r"^module 'gradtape.linalg' has no attribute 'nosuchname'$"):
        gt.linalg.nosuchname  # noqa: B018
    assert not hasattr(gt.linalg, "norm") and hasattr(gt.linalg, "vector_norm")
