"""What every crossing between gradtape and another framework shares (:mod:`gradtape.interop.torch`,
:mod:`gradtape.interop.jax`, :mod:`gradtape.interop.tf`).

A crossing turns a user's function of nested structures into a *flat* function of gradtape Tensors
(:class:`Flat`: the array leaves are its inputs, the other leaves stay where they are), runs it on
a gradtape backend, and gets its vector-Jacobian product from gradtape's tape.  Higher orders need
no extra machinery: :func:`vjp_function` is the VJP of a flat function as another flat function,
made of recorded gradtape ops, so a framework that differentiates a crossing's backward crosses
again, into the VJP of the VJP (``to_torch``'s double backward, ``to_jax``'s second order).

The reverse crossings (a native function inside a gradtape program) are :class:`NativeOp` calls: each
call is one recorded op whose rule is the library's VJP of that call; the rule reads
:func:`outer_tape_records`, whether a tape records the backward walk that is calling it right now
(then it must itself be a recorded op: higher order).

What a crossing does per call is kept to the unavoidable (``benchmarks/crossing.py --calls`` counts
it): one forward under a tape, kept for one walk in the backward (:class:`Taped`: ``to_torch``, and
``to_jax`` on concrete values); positional arrays in and one array or a flat tuple out skip the
pytree machinery (:class:`Flat`), the backend context is entered only where the active one is not
already the inputs' (:func:`run_beside`), and an array already on its backend and device is not
handed to the library again (:func:`native_on`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from gradtape.autodiff.custom_gradient import run_privately
from gradtape.core.backend_registry import get as get_backend_named
from gradtape.core.config import active, current, get_backend
from gradtape.core.engine import Recording, UnconnectedGradients, backward, record
from gradtape.core.recording_state import add_active_tapes, connected_tapes, per_thread
from gradtape.core.registry import OpDef
from gradtape.core.tensor import Tensor, wrap

__all__ = [
    "Flat",
    "NativeOp",
    "ONE",
    "TUPLE",
    "Taped",
    "differentiable",
    "display_name",
    "flatten_outputs",
    "from_native",
    "native_on",
    "on_inputs_device",
    "outer_tape_records",
    "resolve_backend",
    "run_beside",
    "to_gradtape",
    "to_gradtape_beside",
    "unflatten_outputs",
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


def native_on(b: Any, a: Any, device: Any) -> Any:
    """``a`` (an array of any DLPack-capable library) as a native array of backend ``b`` on
    ``device``: ``a`` itself where it is already one there (no call into the library: a JAX
    ``device_put`` costs as much as an op), else ``Backend.from_dlpack``."""
    if b.is_native(a) and b.device_of(a) == device:
        return a
    return b.from_dlpack(a, device)


def run_beside(f: Callable[..., Any], xs: Sequence[Any]) -> Any:
    """``f(*xs)`` (a flat gradtape function) creating its new tensors (``gt.eye``, constants, zeros)
    on the device of its first tensor input, as eager code beside that input does: a crossing from a
    CPU tensor computes on the CPU even where the backend's configured device is a GPU."""
    for x in xs:
        if isinstance(x, Tensor):
            b = x._b
            device = b.device_beside(x._v)
            s = current()
            if s.backend is b:
                d = s.device
                if (b.unplaced_device() if d is None else d) == device:
                    return f(*xs)  # (already so: new tensors go to that device without a context)
            with active(b, device):
                return f(*xs)
    return f(*xs)


def on_inputs_device(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` (a flat gradtape function) as a function that runs it by :func:`run_beside`."""

    def run(*xs: Any) -> Any:
        return run_beside(f, xs)

    run.__name__ = run.__qualname__ = getattr(f, "__name__", "f")
    return run


def to_gradtape_beside(xs: Sequence[Any], b: Any, beside: Tensor | None = None) -> list:
    """Native arrays as Tensors of ``b`` (:func:`to_gradtape`), with those that arrive as NumPy arrays
    (a cotangent JAX hands over as a literal, say) placed beside the Tensor ``beside``, by default
    the first that does not arrive so: on its device (a GPU), not on the host."""
    ts = [to_gradtape(x, b) for x in xs]
    if beside is None:
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


#: the structures of a result that :func:`flatten_outputs` describes without a pytree: one leaf, a
#: flat tuple of leaves, a flat list of them
ONE, TUPLE, _LIST = "one", "tuple", "list"


class Flat:
    """``fn(*args, **kwargs)`` as a function of the leaves of ``(args, kwargs)`` that ``is_array`` (a
    type, or a predicate) picks (in order); the other leaves are kept as they are.  After a call, ``out_spec`` describes
    the outputs: ``call`` returns the flat list of output leaves.

    The common case, positional arrays in and one array or a flat tuple of them out (``out_leaf``:
    the type of the arrays ``fn`` returns), is handled without flattening a pytree."""

    __slots__ = ("fn", "leaves", "spec", "positions", "out_spec", "out_leaf")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        is_array: type | tuple[type, ...] | Callable[[Any], bool],
        out_leaf: type | tuple[type, ...] = (),
    ):
        self.fn = fn
        self.out_spec: Any = None
        self.out_leaf = out_leaf
        # the common case first: positional arrays only (leaves: the arguments; no spec, no positions)
        self.leaves: Sequence[Any] = args
        self.spec: Any = None
        self.positions: list[int] | None = None
        if not kwargs:
            if isinstance(is_array, (type, tuple)):
                for a in args:
                    if not isinstance(a, is_array):
                        break
                else:
                    return
            elif all(is_array(a) for a in args):
                return
        if isinstance(is_array, (type, tuple)):
            array_type = is_array
            is_array = lambda x: isinstance(x, array_type)
        self.leaves, self.spec = optree.tree_flatten((args, kwargs), none_is_leaf=True)  # type: ignore[arg-type]
        self.positions = [k for k, leaf in enumerate(self.leaves) if is_array(leaf)]

    @property
    def arrays(self) -> list:
        """The array leaves, in order (the flat function's inputs)."""
        if self.positions is None:
            return list(self.leaves)
        return [self.leaves[k] for k in self.positions]

    def call(self, *xs: Any) -> list:
        """``fn`` with the array leaves replaced by ``xs``; its outputs, flattened."""
        if self.spec is None:
            out = self.fn(*xs)
        else:
            leaves = list(self.leaves)
            for k, x in zip(self.positions, xs):  # type: ignore[arg-type]
                leaves[k] = x
            args, kwargs = optree.tree_unflatten(self.spec, leaves)
            out = self.fn(*args, **kwargs)
        outs, self.out_spec = flatten_outputs(out, self.out_leaf)
        return outs

    def unflatten(self, outs: Sequence[Any]) -> Any:
        """The flat outputs in the structure ``fn`` returned."""
        return unflatten_outputs(self.out_spec, outs)


def flatten_outputs(out: Any, leaf: type | tuple[type, ...]) -> tuple[list, Any]:
    """A function's result as a flat list of leaves and its structure: the common cases, one
    ``leaf`` (an array) or a flat tuple or list of them, without flattening a pytree."""
    if isinstance(out, leaf):
        return [out], ONE
    cls = out.__class__
    if cls is tuple or cls is list:
        for o in out:
            if not isinstance(o, leaf):
                break
        else:
            return list(out), (TUPLE if cls is tuple else _LIST)
    return optree.tree_flatten(out, none_is_leaf=True)


def unflatten_outputs(spec: Any, outs: Sequence[Any]) -> Any:
    """The flat ``outs`` in the structure ``spec`` (:func:`flatten_outputs`) describes."""
    if spec is ONE:
        return outs[0]
    if spec is TUPLE:
        return tuple(outs)
    if spec is _LIST:
        return list(outs)
    return optree.tree_unflatten(spec, list(outs))


class Taped:
    """One call of the gradtape function ``f`` on the Tensors ``xs`` (by :func:`run_beside`), recorded
    where ``watch`` says an input is watched (no recording where none), kept for its backward: a
    crossing's first order is this one forward and one walk of what it recorded (:meth:`gradient`;
    the recording stays: the other library may call a backward twice, torch's ``retain_graph``, a
    JAX pullback kept).  ``outs``: ``f``'s outputs as a flat list (checked by the crossing), ``spec``
    their structure (:func:`flatten_outputs`: ``f`` may return one Tensor, a tuple, any pytree).

    It is the engine's own recording (:class:`~gradtape.core.engine.Recording`, pushed on this
    thread's tapes for the call, as a tape's ``with`` block does) and its walk, not a
    :class:`~gradtape.autodiff.tape.GradientTape`: none of the public tape's checks of its arguments,
    its pytrees or its context apply to what a crossing hands it, and they were ~30 µs a call here.
    The gradients are the inputs' as ``f`` received them: ``f`` may update an input in place
    (``x *= x``, a recorded functional update that gives the Tensor a new identity), and the other
    library asks for the gradient with respect to the value it passed (:attr:`ids`).

    A crossing that is itself an object per call (``to_torch``'s) subclasses it, so that one object
    carries the call: it is made empty (:attr:`rec` None) and :meth:`record` runs the forward."""

    __slots__ = ("rec", "xs", "ids", "outs", "spec", "__weakref__")

    def __init__(self, f: Callable[..., Any], xs: Sequence[Any], watch: Sequence[bool]):
        self.record(f, xs, watch)

    def record(self, f: Callable[..., Any], xs: Sequence[Any], watch: Sequence[bool]) -> None:
        """The forward: ``f(*xs)`` (by :func:`run_beside`) recorded from the inputs ``watch`` says."""
        self.xs = xs
        rec = None
        for x, w in zip(xs, watch):
            if w:
                if rec is None:
                    rec = Recording(False)  # (variables read by f are not watched: they cannot cross)
                rec.watch_id(x._id)
        self.rec = rec
        if rec is None:
            self.outs, self.spec = flatten_outputs(run_beside(f, xs), Tensor)
            return
        self.ids = [x._id for x in xs]
        outer = per_thread.tapes
        per_thread.tapes = [*outer, rec]
        add_active_tapes(1)
        try:
            self.outs, self.spec = flatten_outputs(run_beside(f, xs), Tensor)
        finally:
            per_thread.tapes = outer
            add_active_tapes(-1)

    def gradient(self, cts: Sequence[Any], wrt: Sequence[int], zeros: bool = False) -> list:
        """The gradients of the inputs at the positions ``wrt`` given ``cts``, one cotangent (a Tensor)
        per output, None for an output that carries none; an unconnected input's is None (zeros
        where ``zeros``: then only where some output carries a cotangent)."""
        targets, grads = [], []
        for o, c in zip(self.outs, cts):
            if c is not None:
                targets.append(o)
                grads.append(c)
        rec = self.rec
        if not targets or rec is None:
            return [None] * len(wrt)
        xs, ids = self.xs, self.ids
        sources = []
        for k in wrt:
            x = xs[k]
            if x._id != ids[k]:  # f updated it in place: the gradient is the value's that f received
                x = wrap(x._v, x._b)
                x._id = ids[k]
            sources.append(x)
        # (the sources are this call's own: not a running gt.vmap's per-example ones, which a
        # GradientTape's gradient would make of them inside a map)
        return backward(rec, targets, grads, sources, UnconnectedGradients.ZERO if zeros else UnconnectedGradients.NONE)


def vjp_function(f: Callable[..., Any], n_in: int) -> Callable[..., list]:
    """The vector-Jacobian product of the flat gradtape function ``f`` (``n_in`` Tensor inputs; its
    outputs one Tensor, a sequence, or any pytree of them, :func:`flatten_outputs`) as another flat
    function: ``g(*xs, *gys)`` returns the gradient of each input (zeros where unconnected; None for
    an input that carries none, an integer one), one ``gy`` per output (ignored for outputs that
    carry no gradient).  It is computed by a :class:`Taped` call and its walk, with recorded ops: an
    outer tape differentiates it again."""

    def vjp(*args: Any) -> list:
        xs, gys = args[:n_in], args[n_in:]
        watch = [differentiable(x) for x in xs]
        run = Taped(f, xs, watch)
        if len(gys) != len(run.outs):
            raise ValueError(f"vjp_function: {len(gys)} cotangents for {len(run.outs)} outputs")
        wrt = [k for k, w in enumerate(watch) if w]
        grads = run.gradient([g if differentiable(o) else None for o, g in zip(run.outs, gys)], wrt, zeros=True)
        out: list = [None] * len(xs)
        for k, g in zip(wrt, grads):
            out[k] = g
        return out

    vjp.__name__ = vjp.__qualname__ = f"vjp_of_{getattr(f, '__name__', 'f')}"
    return on_inputs_device(vjp)


def _native_rule(xp: Any, op: Any, *gys: Any) -> Any:
    """The rule of every native call (:class:`NativeOp`): the library's VJP kept with the call, on
    native cotangents in a first-order walk; on Tensors (a complex cotangent, or an outer tape that
    records the walk: then the VJP is itself a recorded native call, so it differentiates again)."""
    a = op.attrs
    if not isinstance(gys[0], Tensor):
        return a["vjp"](gys)
    xs = op.inputs
    native: NativeOp = a["native"]
    if outer_tape_records((*xs, *gys)):
        n, name = len(xs), a["name"]
        return native.call((*xs, *gys), native.vjp_of(a["fn"], n, name), f"vjp of {name}")[:n]
    b = op.backend
    return [None if g is None else wrap(g, b) for g in a["vjp"]([g._v for g in gys])]


class NativeOp:
    """How a library's functions run inside gradtape (``from_torch``, ``from_jax``): each call is one
    recorded op ``what`` whose rule is the library's VJP of that call (no ``gt.custom_gradient``
    machinery per call).

    ``forward(xs, fn, name)``: runs the flat native function ``fn`` on the gradtape Tensors ``xs``
    (one backend) and returns its outputs as native arrays of that backend and ``vjp(cotangents)``:
    one native cotangent per output in, one gradient (or None: an input that carries none) per input
    out.  ``vjp_of(fn, n, name)``: the VJP of ``fn`` (``n`` inputs) as a flat native function of
    ``(*xs, *cotangents)`` that the library can differentiate again (higher orders)."""

    __slots__ = ("what", "forward", "vjp_of", "opdef")

    def __init__(self, what: str, forward: Callable[..., Any], vjp_of: Callable[..., Any]):
        self.what, self.forward, self.vjp_of = what, forward, vjp_of
        self.opdef = OpDef(what, forward=None, grad=_native_rule, rule_form="xp", chapter="user")

    def call(self, xs: Sequence[Tensor], fn: Callable[..., Any], name: str) -> list:
        """``fn`` on ``xs``, recorded: its outputs as Tensors of the inputs' backend."""
        (ys, vjp), read = run_privately(self.forward, xs, fn, name)
        if read:  # (a gradtape variable read inside a native function: torch / JAX cannot carry its gradient)
            v = next(iter(read.values()))
            raise ValueError(
                f"{self.what}({name}): the function reads the gradtape Variable {v.name!r}, whose gradient "
                f"cannot cross back through the native library; pass it as an argument instead"
            )
        b = xs[0]._b
        outs = [wrap(y, b) for y in ys]
        if outs and per_thread.tapes:  # (a function without outputs has nothing to differentiate)
            attrs = {"native": self, "fn": fn, "name": name, "vjp": vjp}
            record(self.opdef, tuple(xs), tuple([x._v for x in xs]), attrs, tuple(outs))
        return outs


def from_native(fn: Callable[..., Any], native: NativeOp, out_leaf: type | tuple[type, ...]) -> Callable[..., Any]:
    """``fn``, a native library's function, as a gradtape function (``from_torch``, ``from_jax``): its
    gradtape tensor arguments (any pytree, one backend) go to ``native`` (one recorded op that runs
    ``fn`` on native arrays and whose rule is the library's VJP) and its outputs (``out_leaf``: the
    library's array type) come back in their structure.  Called with no gradtape tensor among its
    arguments it is ``fn`` itself."""
    name = display_name(fn)
    what = native.what

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flat = Flat(fn, args, kwargs, Tensor, out_leaf)
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
        if b.stand_ins:
            # (a gt.function program records gradtape's native calls; the library's own function is not
            # one of them, and its arrays cannot be made from the trace's stand-ins)
            raise NotImplementedError(
                f"{what}({name}) is called inside gt.function, whose programs record gradtape's ops only: "
                f"call it outside the gt.function, or run the function eagerly "
                "(gt.config.run_functions_eagerly(True), or no gt.function around this step)"
            )
        return flat.unflatten(native.call(xs, flat.call, name))

    return wrapper
