"""``gt.Module``: variable tracking as ``tf.Module``.

A Module finds the Variables and Modules in its attributes -- directly, or inside lists, tuples,
dicts (and namedtuples) of them, to any depth -- and reports them in TensorFlow's order: its own
attributes sorted by name, each walked depth-first, each leaf once; then, module by module in the
order found, the leaves of its submodules (``_flatten_module`` of ``tensorflow/python/module``).  A
layer's ``add_weight`` variables that no attribute holds come after its attributes' leaves (a Keras
layer keeps them in a list attribute, where ``tf.Module`` finds them).
"""

from __future__ import annotations

import contextlib
import functools
import re
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from gradtape.core.tensor import Variable

_R = TypeVar("_R")

__all__ = ["Module"]

_CAMEL_TO_SNAKE = re.compile(r"((?<=[a-z0-9])[A-Z]|(?!^)[A-Z](?=[a-z]))")
_VALID_IDENTIFIER = re.compile(r"^[a-zA-Z_]([a-zA-Z0-9_])*$")


def camel_to_snake(value: str) -> str:
    """``"MyModule"`` -> ``"my_module"``, ``"MLP"`` -> ``"mlp"`` (TensorFlow's rule)."""
    return _CAMEL_TO_SNAKE.sub(r"_\1", value).lower()


def valid_identifier(name: str) -> bool:
    return bool(_VALID_IDENTIFIER.match(name))


#: restorations waiting for an attribute (``gt.train``'s deferred restoration, as TensorFlow's): object
#: -> {attribute name: callback(value) -> True once it restored something}.  A checkpoint restored
#: before a layer is built restores its weights when ``build`` assigns them.
_DEFERRED: weakref.WeakKeyDictionary[Any, dict[str, Callable[[Any], bool]]] = weakref.WeakKeyDictionary()


def _restore_deferred(obj, name, value):
    """Hand ``value``, just assigned to ``obj.<name>``, to the restoration waiting for it, if any."""
    pending = _DEFERRED.get(obj)
    if pending is None:
        return
    callback = pending.get(name)
    if callback is not None and callback(value):
        pending.pop(name, None)
        if not pending:
            _DEFERRED.pop(obj, None)


def _is_variable(o):
    return isinstance(o, Variable)


def _is_trainable_variable(o):
    return isinstance(o, Variable) and o.trainable


def _is_module(o):
    return isinstance(o, Module)


class Module:
    """A named container of Variables and other Modules (as ``tf.Module``).

    ``name`` defaults to the class name in snake_case (``MyModel`` -> ``my_model``) and must be a
    valid Python identifier.  ``variables``, ``trainable_variables``, ``non_trainable_variables``
    and ``submodules`` are tuples in TensorFlow's order (see the module docstring).
    """

    # attributes that hold framework state, never the user's variables
    _TF_MODULE_IGNORED_PROPERTIES = frozenset(("_name", "_name_scope_obj"))

    def __init__(self, name: str | None = None) -> None:
        if name is None:
            name = camel_to_snake(type(self).__name__)
        elif not valid_identifier(name):
            raise ValueError(
                f"{name!r} is not a valid module name. Module names must be valid Python "
                "identifiers (e.g. a valid class name)."
            )
        self._name = name

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if _DEFERRED:  # a checkpoint restored before this attribute existed
            _restore_deferred(self, name, value)

    @property
    def name(self) -> str:
        """The module's name (not made unique, as ``tf.Module``)."""
        try:
            return self._name
        except AttributeError:  # a subclass that forgot super().__init__()
            return camel_to_snake(type(self).__name__)

    @property
    def name_scope(self) -> contextlib.AbstractContextManager[str]:
        """A context manager standing for the module's name scope (gradtape has no graph names;
        it yields ``"<name>/"``)."""
        return _scope(self.name + "/")

    # ------------------------------------------------------------------ collections
    @property
    def variables(self) -> tuple[Variable, ...]:
        """Every Variable of this module and its submodules, each once, in TensorFlow's order."""
        return tuple(self._flatten(predicate=_is_variable))

    @property
    def trainable_variables(self) -> tuple[Variable, ...]:
        """The trainable Variables of this module and its submodules, in TensorFlow's order; those of a
        frozen layer below (``layer.trainable = False``) are not (as Keras 3, which marks them so)."""
        frozen = self._frozen()
        return tuple(v for v in self._flatten(predicate=_is_trainable_variable) if id(v) not in frozen)

    @property
    def non_trainable_variables(self) -> tuple[Variable, ...]:
        """The non-trainable Variables of this module and its submodules, a frozen layer's included."""
        frozen = self._frozen()
        return tuple(self._flatten(predicate=lambda o: _is_variable(o) and (not o.trainable or id(o) in frozen)))

    def _frozen(self) -> set[int]:
        """The ids of the variables of the frozen submodules (a layer whose ``trainable`` is False: they
        were in a Module's trainable_variables, and a training loop over it updated them, silently)."""
        frozen_modules = self._flatten(predicate=lambda o: _is_module(o) and getattr(o, "trainable", True) is False)
        return {id(v) for m in frozen_modules for v in m.variables}

    @property
    def submodules(self) -> tuple[Module, ...]:
        """Every Module reachable from this one (not itself), depth-first as TensorFlow."""
        return tuple(self._flatten(predicate=_is_module))

    def _flatten(self, recursive=True, predicate=None, attribute_traversal_key=None, with_path=False):
        """The leaves of this module's attributes that satisfy ``predicate`` (TF's ``_flatten``)."""
        if predicate is None:
            predicate = lambda _: True
        return _flatten_module(
            self, recursive, predicate, attribute_traversal_key, with_path, module_path=(), seen=None, stack=[]
        )

    @classmethod
    def with_name_scope(cls, method: Callable[..., _R]) -> Callable[..., _R]:
        """Decorator for methods that should run inside the module's name scope (as TF)."""

        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            with self.name_scope:
                return method(self, *args, **kwargs)

        return wrapper

    def _variables_beyond_attributes(self) -> list[Variable]:
        """Variables this module holds outside its attributes, which the attribute walk would miss
        (a layer's ``add_weight`` variables that no attribute holds); none for a plain Module."""
        return []

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__name__} name={self.name!r}>"


@contextlib.contextmanager
def _scope(name: str) -> Iterator[str]:
    yield name


def _paths(value, path=()):
    """``(path, leaf)`` pairs of a nested structure, as ``tf.nest.flatten_with_tuple_paths``: lists
    and tuples (namedtuples too) in order, dicts by sorted key; anything else is a leaf."""
    if isinstance(value, dict):
        try:
            keys = sorted(value)
        except TypeError:
            keys = list(value)
        for k in keys:
            yield from _paths(value[k], path + (k,))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _paths(v, path + (i,))
    else:
        yield path, value


def _flatten_module(module, recursive, predicate, key, with_path, module_path, seen, stack):
    module_id = id(module)
    if seen is None:
        seen = {module_id}
    if module_id in stack:  # a cycle: do not recurse again
        recursive = False
    attrs = vars(module)
    ignored = getattr(module, "_TF_MODULE_IGNORED_PROPERTIES", frozenset())
    submodules = []
    for name in sorted(attrs, key=key):
        if name in ignored:
            continue
        for leaf_path, leaf in _paths(attrs[name], (name,)):
            if not with_path:
                if id(leaf) in seen:
                    continue
                seen.add(id(leaf))
            if predicate(leaf):
                yield (module_path + leaf_path, leaf) if with_path else leaf
            if recursive and _is_module(leaf):
                submodules.append((module_path + leaf_path, leaf))  # own leaves first, then recurse
    # then the variables it holds elsewhere (a layer's add_weight ones: a Module over a custom layer
    # left them out of its trainable_variables, and they were never trained)
    for k, leaf in enumerate(module._variables_beyond_attributes() if _is_module(module) else ()):
        if not with_path:
            if id(leaf) in seen:
                continue
            seen.add(id(leaf))
        if predicate(leaf):
            yield (module_path + ("_added_weights", k), leaf) if with_path else leaf
    stack.append(module_id)
    for sub_path, sub in submodules:
        yield from _flatten_module(sub, recursive, predicate, key, with_path, sub_path, seen, stack)
    stack.pop()
