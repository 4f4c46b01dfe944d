"""What every crossing between gradtape and another framework shares (:mod:`gradtape.interop.torch`,
:mod:`gradtape.interop.jax`, :mod:`gradtape.interop.tf`).

A crossing turns a user's function of nested structures into a *flat* function of gradtape Tensors
(:class:`Flat`: the array leaves are its inputs, the other leaves stay where they are), runs it on
a gradtape backend, and gets its vector-Jacobian product from gradtape's tape.  Higher orders need
no extra machinery: :func:`vjp_function` is the VJP of a flat function as another flat function,
made of recorded gradtape ops, so a framework that differentiates a crossing's backward crosses
again, into the VJP of the VJP (``to_torch``'s double backward, ``to_jax``'s second order).

The reverse crossings (a native function inside a gradtape program) read :func:`outer_tape_records`:
whether a tape records the backward walk that is calling their rule right now (then their rule must
itself be a recorded op: higher order).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from gradtape.autodiff.tape import GradientTape
from gradtape.core.backend_registry import get as get_backend_named
from gradtape.core.config import active, get_backend
from gradtape.core.recording_state import connected_tapes
from gradtape.core.tensor import Tensor, wrap

__all__ = [
    "Flat",
    "differentiable",
    "display_name",
    "on_inputs_device",
    "outer_tape_records",
    "resolve_backend",
    "to_gradtape",
    "to_gradtape_beside",
    "vjp_function",
]


def resolve_backend(backend: Any) -> Any:
    """The gradtape backend a crossing computes on: ``backend`` (a name, ``"torch:cuda"``, or a
    Backend), or the active one at call time when None."""
    return get_backend() if backend is None else get_backend_named(backend)


def to_gradtape(x: Any, b: Any) -> Tensor:
    """Native array ``x`` of any DLPack-capable library as a Tensor of backend ``b``: ``x`` itself
    when it is ``b``'s (no copy), else shared through DLPack where ``b`` can (``Backend.from_dlpack``;
    a copy through NumPy only where DLPack cannot carry it)."""
    return wrap(b.from_dlpack(x), b)


def on_inputs_device(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` (a flat gradtape function) made to create its new tensors (``gt.eye``, constants, zeros)
    on the device of its first tensor input, as eager code beside that input does: a crossing from a
    CPU tensor computes on the CPU even where the backend's configured device is a GPU."""

    def run(*xs: Any) -> Any:
        for x in xs:
            if isinstance(x, Tensor):
                with active(x._b, x._b.device_beside(x._v)):
                    return f(*xs)
        return f(*xs)

    run.__name__ = run.__qualname__ = getattr(f, "__name__", "f")
    return run


def to_gradtape_beside(xs: Sequence[Any], b: Any) -> list:
    """Native arrays as Tensors of ``b`` (:func:`to_gradtape`), with those that arrive as NumPy arrays
    (a cotangent JAX hands over as a literal, say) placed beside the first that does not: on its
    device (a GPU), not on the host."""
    ts = [to_gradtape(x, b) for x in xs]
    beside = next((t for x, t in zip(xs, ts) if not isinstance(x, np.ndarray)), None)
    if beside is None:
        return ts
    device = b.device_beside(beside._v)
    if device is None:
        return ts
    return [
        wrap(b.to_device(t._v, device), b) if isinstance(x, np.ndarray) and b.device_of(t._v) != device else t
        for x, t in zip(xs, ts)
    ]


def display_name(fn: Any) -> str:
    """How errors name a user's function: its qualified name (``Model.apply`` for a bound method)."""
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    if isinstance(owner, type) and not name.startswith(owner.__name__ + "."):
        return f"{owner.__name__}.{getattr(fn, '__name__', name)}"
    return name


def differentiable(t: Any) -> bool:
    """Whether ``t`` is a Tensor of a floating or complex dtype (what carries a gradient)."""
    return isinstance(t, Tensor) and t.dtype.differentiable


def outer_tape_records(tensors: Sequence[Any]) -> bool:
    """Whether a recording tape of this thread is connected to one of ``tensors`` (inside a rule: the
    walk calling it is recorded, so the rule must compute with recorded ops)."""
    return any(isinstance(t, Tensor) and connected_tapes(t._id) for t in tensors)


class Flat:
    """``fn(*args, **kwargs)`` as a function of the leaves of ``(args, kwargs)`` that ``is_array``
    picks (in order); the other leaves are kept as they are.  After a call, ``out_spec`` and
    ``out_kinds`` describe the outputs: ``call`` returns the flat list of output leaves."""

    __slots__ = ("fn", "leaves", "spec", "positions", "out_spec")

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict, is_array: Callable[[Any], bool]):
        self.fn = fn
        self.leaves, self.spec = optree.tree_flatten((args, kwargs), none_is_leaf=True)  # type: ignore[arg-type]
        self.positions = [k for k, leaf in enumerate(self.leaves) if is_array(leaf)]
        self.out_spec: Any = None

    @property
    def arrays(self) -> list:
        """The array leaves, in order (the flat function's inputs)."""
        return [self.leaves[k] for k in self.positions]

    def call(self, *xs: Any) -> list:
        """``fn`` with the array leaves replaced by ``xs``; its outputs, flattened."""
        leaves = list(self.leaves)
        for k, x in zip(self.positions, xs):
            leaves[k] = x
        args, kwargs = optree.tree_unflatten(self.spec, leaves)
        outs, self.out_spec = optree.tree_flatten(self.fn(*args, **kwargs), none_is_leaf=True)
        return outs

    def unflatten(self, outs: Sequence[Any]) -> Any:
        """The flat outputs in the structure ``fn`` returned."""
        return optree.tree_unflatten(self.out_spec, list(outs))


def vjp_function(f: Callable[..., Sequence[Any]], n_in: int) -> Callable[..., list]:
    """The vector-Jacobian product of the flat gradtape function ``f`` (``n_in`` Tensor inputs, a list
    of outputs) as another flat function: ``g(*xs, *gys)`` returns the gradient of each input
    (zeros where unconnected; None for an input that carries none, an integer one), one ``gy`` per
    output (ignored for outputs that carry no gradient).  It is computed by a GradientTape, with
    recorded ops: an outer tape differentiates it again."""

    def vjp(*args: Any) -> list:
        xs, gys = args[:n_in], args[n_in:]
        wrt = [x for x in xs if differentiable(x)]
        with GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(wrt)
            outs = list(f(*xs))
        if len(gys) != len(outs):
            raise ValueError(f"vjp_function: {len(gys)} cotangents for {len(outs)} outputs")
        pairs = [(o, g) for o, g in zip(outs, gys) if differentiable(o)]
        if not pairs or not wrt:
            grads: list = [None] * len(wrt)
        else:
            grads = tape.gradient(
                [o for o, _ in pairs],
                wrt,
                output_gradients=[g for _, g in pairs],
                unconnected_gradients="zero",
            )
        it = iter(grads)
        return [next(it) if differentiable(x) else None for x in xs]

    vjp.__name__ = vjp.__qualname__ = f"vjp_of_{getattr(f, '__name__', 'f')}"
    return on_inputs_device(vjp)


def from_native(fn: Callable[..., Any], native_op: Callable[..., Any], what: str) -> Callable[..., Any]:
    """``fn``, a native library's function, as a gradtape function (``from_torch``, ``from_jax``): its
    gradtape tensor arguments (any pytree, one backend) go to ``native_op`` (the recorded op that runs
    ``fn`` on native arrays and whose rule is the library's VJP) and its outputs come back in their
    structure.  Called with no gradtape tensor among its arguments it is ``fn`` itself."""
    name = display_name(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flat = Flat(fn, args, kwargs, lambda x: isinstance(x, Tensor))
        xs = flat.arrays
        if not xs:
            return fn(*args, **kwargs)
        b = xs[0]._b
        for x in xs[1:]:
            if x._b is not b:
                raise ValueError(
                    f"{what}({name}): its gradtape tensors are of two backends, {b.name!r} and "
                    f"{x._b.name!r}; convert them to one"
                )
        return flat.unflatten(native_op(*xs, fn=flat.call, name=name))

    return wrapper
