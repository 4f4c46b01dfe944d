"""gradtape inside JAX and JAX inside gradtape: :func:`to_jax` and :func:`from_jax`.

``to_jax(fn)`` is a ``jax.custom_vjp`` function whose backward is gradtape's VJP.  On the jax backend
gradtape's ops run on JAX's own values, tracers included, so the function is traced straight through
(``jax.jit`` compiles gradtape's forward and its rules); on another backend it runs on the host, through
``jax.pure_callback``, and so does its backward.  Every call is one ``jax.custom_vjp`` built once
(:data:`_CROSS`, what to run its static argument).  Eagerly (concrete values) the forward runs once,
under a tape that JAX carries to the backward as a residual without leaves (:class:`_Kept`): one
forward, one walk.  Under a transformation (tracers) JAX's residuals must be arrays, so the backward
recomputes the forward under a tape.  When JAX differentiates the backward
(``jax.grad`` of ``jax.grad``, ``jax.hessian``) it meets another ``to_jax`` function: gradtape's VJP
(:func:`gradtape.interop.crossing.vjp_function`), recorded, so every order is gradtape's.

``from_jax(fn)`` is a JAX function as a gradtape op whose rule is ``jax.vjp``'s; under an outer gradtape
tape the rule is itself a ``from_jax`` op, the VJP as a JAX function of the inputs and the cotangents.

Copies: none on the jax backend.  NumPy, array_api_strict and torch arrays on the CPU cross by
DLPack and share memory with JAX where JAX accepts the buffer (JAX may copy one it finds misaligned);
a dask array is computed; under ``jax.jit`` a callback's arguments and results are copied by JAX.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradtape.core.backend_registry import get as get_backend_named
from gradtape.core.tensor import Tensor, wrap
from gradtape.interop.crossing import (
    Flat,
    NativeOp,
    Taped,
    native_on,
    display_name,
    from_native,
    resolve_backend,
    on_inputs_device,
    to_gradtape_beside,
    vjp_function,
)

__all__ = ["from_jax", "to_jax"]

_JAX = get_backend_named("jax")
_FLOAT0 = jax.dtypes.float0
VMAP_METHODS = ("sequential", "expand_dims", "broadcast_all", "sequential_unrolled")


def _floating(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jnp.inexact)


def _is_jax_array(x: Any) -> bool:
    return isinstance(x, jax.Array)


def _is_tracer(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


# -------------------------------------------------------------------------------------------- to_jax
def _outputs(outs: list, name: str) -> list:
    """A flat function's outputs, checked: Tensors (None: an input of a VJP that carries no gradient)."""
    res: list[Tensor | None] = []
    for k, o in enumerate(outs):
        if o is None:
            res.append(None)
        elif isinstance(o, Tensor):
            res.append(o)
        else:
            raise TypeError(
                f"to_jax({name}): output {k} is {type(o).__name__} {o!r:.60}, not a gradtape Tensor; return "
                "gradtape tensors (gt.asarray(value) makes one), so JAX can differentiate them"
            )
    return res


def _traced(f: Callable[..., Any], name: str) -> Callable[..., tuple]:
    """``f`` on the jax backend: JAX's values (tracers too) are the gradtape tensors' arrays."""

    def run(*xs: Any) -> tuple:
        # (JAX may hand a cotangent over as a NumPy-like literal, not a jax.Array: made one here)
        outs = _outputs(list(f(*[wrap(x if _is_jax_array(x) else jnp.asarray(x), _JAX) for x in xs])), name)
        return tuple(jnp.zeros((), jnp.float32) if o is None else o._v for o in outs)

    return run


def _to_jax_beside(o: Any, home: Any) -> Any:
    """A gradtape result (a Tensor, or None: no gradient) as a JAX array on the device of ``home``
    (the call's first JAX input): a GPU backend's array crosses by DLPack in place, a host one is
    put where the inputs are (a result on JAX's CPU beside GPU inputs would not mix with them)."""
    if o is None:
        return jnp.zeros((), jnp.float32)
    arr = _JAX.from_dlpack(o._v)
    if home is not None and arr.devices() != home.devices():
        arr = jax.device_put(arr, next(iter(home.devices())))
    return arr


def _hosted(f: Callable[..., Any], b: Any, name: str, vmap_method: str) -> Callable[..., tuple]:
    """``f`` on backend ``b``: at once on concrete values, through ``jax.pure_callback`` under a trace."""

    def call(*arrays: Any) -> list:
        return _outputs(list(f(*to_gradtape_beside(arrays, b))), name)

    def host(*arrays: Any) -> tuple:  # (jax.pure_callback's form: NumPy arrays in and out)
        return tuple(np.zeros((), np.float32) if o is None else o._b.to_numpy(o._v) for o in call(*arrays))

    def run(*xs: Any) -> tuple:
        if not any(_is_tracer(x) for x in xs):  # at once: the results cross by DLPack, onto the inputs' device
            home = next((x for x in xs if _is_jax_array(x) and len(x.devices()) == 1), None)
            return tuple(_to_jax_beside(o, home) for o in call(*xs))
        shapes = _result_shapes(f, b, xs, host, name)
        return tuple(jax.pure_callback(host, shapes, *xs, vmap_method=vmap_method))

    return run


def _result_shapes(f: Callable[..., Any], b: Any, xs: tuple, host: Callable[..., tuple], name: str) -> tuple:
    """The shapes and dtypes of ``f``'s outputs at inputs shaped as ``xs``: by JAX's abstract
    evaluation of ``f`` on the jax backend (nothing computed), else by running ``f`` on ``b`` at ones."""
    structs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs]
    try:
        return tuple(jax.eval_shape(_traced(f, name), *structs))
    except Exception:  # f does not run on the jax backend (it holds another backend's tensors): run it
        outs = host(*[np.ones(s.shape, s.dtype) for s in structs])
        return tuple(jax.ShapeDtypeStruct(np.shape(o), np.asarray(o).dtype) for o in outs)


def _runner(f: Callable[..., Any], b: Any, name: str, vmap_method: str) -> Callable[..., tuple]:
    """The flat gradtape function ``f`` on backend ``b`` as a function of JAX values (no rule)."""
    return _traced(f, name) if b is _JAX else _hosted(f, b, name, vmap_method)


class _Call:
    """What one call of a :func:`to_jax` function runs: the flat gradtape function ``f`` (its
    arrays in, a list out) on backend ``b``; the static argument of :data:`_CROSS`."""

    __slots__ = ("f", "b", "name", "vmap_method", "_run")

    def __init__(self, f: Callable[..., Any], b: Any, name: str, vmap_method: str):
        self.f, self.b, self.name, self.vmap_method = f, b, name, vmap_method
        self._run: Callable[..., tuple] | None = None

    def run(self, *xs: Any) -> tuple:
        """``f`` on JAX values, tracers too (:func:`_runner`; no rule, no tape)."""
        run = self._run
        if run is None:
            run = self._run = _runner(on_inputs_device(self.f), self.b, self.name, self.vmap_method)
        return run(*xs)


class _Kept:
    """An eager forward's tape, kept for its backward (:class:`~gradtape.interop.crossing.Taped`), and
    the call's JAX inputs.  JAX's residuals are arrays; this one is a pytree node with no leaves that
    carries itself as its static data, so it reaches the backward rule as it is, and lives as long
    as JAX keeps the residuals (the pullback)."""

    __slots__ = ("call", "xs", "taped", "home")

    def __init__(self, call: _Call, xs: tuple, taped: Taped, home: Any):
        self.call, self.xs, self.taped, self.home = call, xs, taped, home


jax.tree_util.register_pytree_node(_Kept, lambda k: ((), k), lambda k, _: k)


def _inexact(x: Any) -> bool:
    """Whether the JAX (or NumPy) array ``x`` is floating or complex (float0 is neither): its dtype's
    kind at once, JAX's test only for the kind "V" (bfloat16 and the other ml_dtypes, float0)."""
    kind = x.dtype.kind
    return kind in "fc" or (kind == "V" and _floating(x))


def _eager_forward(call: _Call, xs: tuple) -> tuple:
    """``call`` on concrete JAX arrays under a tape: its outputs and the tape for the backward (no
    transformation above can differentiate concrete values: the forward runs once, here)."""
    b = call.b
    if b is _JAX:  # (JAX may hand a concrete value over as a NumPy-like array: made a jax.Array)
        gxs = [wrap(x if _is_jax_array(x) else jnp.asarray(x), _JAX) for x in xs]
    else:
        gxs = to_gradtape_beside(xs, b)
    taped = Taped(call.f, gxs, [_inexact(x) for x in xs])
    outs = _outputs(taped.outs, call.name)
    if b is _JAX:
        home = None
        ys = tuple(jnp.zeros((), jnp.float32) if o is None else o._v for o in outs)
    else:  # the results cross by DLPack, onto the inputs' device
        home = next((x for x in xs if _is_jax_array(x) and len(x.devices()) == 1), None)
        ys = tuple(_to_jax_beside(o, home) for o in outs)
    return ys, _Kept(call, xs, taped, home)


def _eager_backward(kept: _Kept, gys: tuple) -> tuple:
    """The gradients of the call ``kept`` ran, from its tape (one walk): complex cotangents go in
    conjugated and gradients come out conjugated (JAX's VJP is the conjugate of gradtape's
    gradient); an integer output's cotangent (float0) carries nothing; an integer input gets None."""
    b, taped, xs = kept.call.b, kept.taped, kept.xs
    cts: list = []
    for o, gy in zip(taped.outs, gys):
        if o is None or not (o.dtype.differentiable and _inexact(gy)):  # (None: a VJP's integer input)
            cts.append(None)
            continue
        if gy.dtype.kind == "c":
            gy = jnp.conj(gy)
        cts.append(wrap(gy if _is_jax_array(gy) else jnp.asarray(gy), _JAX) if b is _JAX else gy)
    if b is not _JAX:
        given = [k for k, c in enumerate(cts) if c is not None]
        moved = to_gradtape_beside([cts[k] for k in given], b, taped.xs[0] if taped.xs else None)
        for k, c in zip(given, moved):
            cts[k] = c
    wrt = [k for k, x in enumerate(xs) if _inexact(x)]
    grads: list = [None] * len(xs)
    for k, g in zip(wrt, taped.gradient(cts, wrt)):
        if g is None:
            continue  # (unconnected: JAX takes None as zeros)
        a = g._v if b is _JAX else _to_jax_beside(g, kept.home)
        if a.dtype.kind == "c":
            a = jnp.conj(a)
        x = xs[k]
        grads[k] = a if a.dtype == x.dtype else a.astype(x.dtype)
    return tuple(grads)


def _cross(call: _Call, *xs: Any) -> tuple:
    return call.run(*xs)


def _cross_fwd(call: _Call, *xs: Any) -> tuple:
    if not any(_is_tracer(x) for x in xs):
        return _eager_forward(call, xs)
    # tracers: the crossing itself, not run, so that under an outer transformation (the JVP of a
    # VJP, second order) JAX differentiates it by this rule again, never the callback; JAX's
    # residuals must be arrays: the inputs, and the backward runs the forward again under a tape
    return _CROSS(call, *xs), xs


def _cross_bwd(call: _Call, res: Any, gys: tuple) -> tuple:
    if isinstance(res, _Kept):
        if not any(_is_tracer(g) for g in gys):
            return _eager_backward(res, gys)
        xs = res.xs  # (a traced cotangent, JAX differentiating the pullback: the VJP crosses, below)
    else:
        xs = res
    n = len(xs)
    # cotangents of integer outputs (float0) carry nothing: vjp_function ignores them; complex
    # ones are conjugated going in and out (JAX's VJP is the conjugate of gradtape's gradient)
    gys = tuple(jnp.zeros(gy.shape, jnp.int8) if gy.dtype == _FLOAT0 else _conj(gy) for gy in gys)
    vjp = _Call(vjp_function(call.f, n), call.b, f"vjp of {call.name}", call.vmap_method)
    if any(_is_tracer(v) for v in (*xs, *gys)):  # JAX may differentiate the backward: a crossing
        grads = _CROSS(vjp, *xs, *gys)
    else:  # concrete: nothing above differentiates it; the VJP runs at once, as in _cross_fwd
        grads = vjp.run(*xs, *gys)
    return tuple(_conj(g).astype(x.dtype) if _inexact(x) else None for x, g in zip(xs, grads[:n]))


# JAX reads the signature of a custom_vjp function and of its rules on every call (its debug info,
# the binding of the arguments); given, inspect.signature returns it at once instead of building it
_cross.__signature__ = _cross_fwd.__signature__ = _cross_bwd.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    lambda *xs: None
)
#: every to_jax call: one jax.custom_vjp, built once, whose static first argument (a :class:`_Call`)
#: says what it runs
_CROSS = jax.custom_vjp(_cross, nondiff_argnums=(0,))
_CROSS.defvjp(_cross_fwd, _cross_bwd)


def to_jax(fn: Callable[..., Any], *, backend: Any = None, vmap_method: str = "sequential") -> Callable[..., Any]:
    """``fn`` (written for gradtape / the Array API) as a function of JAX arrays that ``jax.grad``
    differentiates, to any order, with gradtape's gradients; usable under ``jax.jit`` and ``jax.vmap``.

    The JAX arrays among the arguments (any pytree) become gradtape tensors of ``backend`` (default:
    the active backend when called; ``"jax"`` is traced straight through), ``fn`` runs on them and the
    gradtape tensors it returns (any pytree) come back as JAX arrays.  On a backend other than jax,
    under a JAX transformation the function runs through ``jax.pure_callback``; ``vmap_method`` says how
    ``jax.vmap`` calls it (``"sequential"``: once per element; ``"expand_dims"`` /
    ``"broadcast_all"`` where ``fn`` takes a leading batch axis)."""
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"to_jax: vmap_method must be one of {VMAP_METHODS}, got {vmap_method!r}")
    name = display_name(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flat = Flat(fn, args, kwargs, (jax.Array, np.ndarray), Tensor)
        xs = [x if _is_jax_array(x) else jnp.asarray(x) for x in flat.arrays]
        return flat.unflatten(_CROSS(_Call(flat.call, resolve_backend(backend), name, vmap_method), *xs))

    return wrapper


# ------------------------------------------------------------------------------------------ from_jax
def _jax_of(x: Any, name: str) -> Any:
    if getattr(x, "requires_grad", False):
        raise TypeError(
            f"from_jax({name}): a torch tensor that torch.autograd records cannot cross into JAX (its "
            "gradient would be lost); call the function on gradtape tensors under a gradtape tape"
        )
    return _JAX.from_dlpack(x)


def _jax_forward(xs: list, fn: Callable[..., Any], name: str) -> tuple:
    """One call of the flat JAX function ``fn`` on gradtape Tensors ``xs`` (of one backend): its
    outputs as the backend's arrays and their VJP, ``jax.vjp``'s (see :func:`from_jax`)."""
    b = xs[0]._b
    # (on the jax backend the arrays are JAX's already: nothing to check or hand over)
    js = [x._v for x in xs] if b is _JAX else [_jax_of(x._v, name) for x in xs]
    outs, pull = jax.vjp(lambda *a: tuple(fn(*a)), *js)
    for o in outs:
        if not _is_jax_array(o):
            raise TypeError(f"from_jax({name}): the function must return JAX arrays, got {type(o).__name__}")
    home = b.device_of(xs[0]._v)  # (JAX may compute elsewhere: on its default device)
    ys = [native_on(b, o, home) for o in outs]

    def vjp(dys: tuple) -> list:
        gs = _pullback(pull, outs, js, list(dys) if b is _JAX else [_jax_of(d, name) for d in dys])
        return [None if g is None else native_on(b, g, b.device_of(x._v)) for g, x in zip(gs, xs)]

    return ys, vjp


def _conj(a: Any) -> Any:
    return jnp.conj(a) if a.dtype.kind == "c" else a


def _pullback(pull: Callable[..., Any], outs: Sequence[Any], xs: Sequence[Any], dys: Sequence[Any]) -> list:
    """``pull`` (a ``jax.vjp`` pullback at inputs ``xs``, outputs ``outs``) on the cotangents ``dys``,
    in gradtape's (TensorFlow's) convention for complex values: JAX's VJP is the transpose without
    conjugation and TensorFlow's gradient its conjugate, so complex cotangents go in conjugated and
    complex gradients come out conjugated.  Integer outputs take float0 cotangents; integer inputs
    get None."""
    cts = tuple(
        _conj(d if d.dtype == o.dtype else d.astype(o.dtype)) if _inexact(o) else np.zeros(o.shape, _FLOAT0)
        for o, d in zip(outs, dys)
    )
    return [_conj(g) if _inexact(x) else None for g, x in zip(pull(cts), xs)]


def _vjp_of(fn: Callable[..., Any], n: int, name: str) -> Callable[..., tuple]:
    """The VJP of the flat JAX function ``fn`` as a flat JAX function of ``(*xs, *dys)``."""

    def vjp(*args: Any) -> tuple:
        xs, dys = args[:n], args[n:]
        outs, pull = jax.vjp(lambda *a: tuple(fn(*a)), *xs)
        gs = _pullback(pull, outs, xs, dys)
        return tuple(jnp.zeros(x.shape, x.dtype) if g is None else g for g, x in zip(gs, xs))

    return vjp


_FROM_JAX = NativeOp("from_jax", _jax_forward, _vjp_of)


def from_jax(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A JAX function as a gradtape function: its gradtape tensor arguments (any pytree, one backend)
    become JAX arrays (shared on the jax backend, by DLPack from others), ``fn`` runs on them, and the
    JAX arrays it returns (any pytree) come back as gradtape tensors of the inputs' backend, recorded
    as one op whose rule is ``jax.vjp``'s.  Called with no gradtape tensor among its arguments it is
    ``fn`` itself."""
    return from_native(fn, _FROM_JAX, jax.Array)
