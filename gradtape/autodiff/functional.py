"""The functional transforms over the tape, as JAX's and ``torch.func``'s: ``grad``,
``value_and_grad``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian`` and ``hvp``.

Each one runs the function eagerly once under a :class:`~gradtape.autodiff.tape.GradientTape`
(reverse mode: ``grad``, ``value_and_grad``, ``vjp``, ``jacrev``) or a
:class:`~gradtape.autodiff.forward.ForwardAccumulator` (forward mode: ``jvp``, ``jacfwd``) and asks
it for the derivatives: there is no walk of its own.  The differentiated arguments (``argnums``) are
converted as ``gt.convert_to_tensor`` converts, then each leaf is passed on as a fresh recorded copy
(the ``identity`` op), so that

* a derivative is with respect to that argument only, not to the same tensor reached another way
  (passed twice, or closed over by the function), as in JAX;
* a tape or accumulator outside the call records the copy, the function and the walk, so the
  transforms compose with each other (``grad(grad(f))``, ``jacfwd(jacrev(f))``), with tapes and with
  ``gt.function``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import optree

from gradtape.autodiff.forward import ForwardAccumulator, NotBatched, as_tangent
from gradtape.autodiff.tape import GradientTape
from gradtape.core.recording_state import per_thread
from gradtape.core.tensor import Tensor, convert_to_tensor, wrap
from gradtape.ops.creation import zeros
from gradtape.ops.elementwise import _identity, conj
from gradtape.ops.manipulation import moveaxis, reshape, stack

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "hvp"]

_ZERO = "zero"


# ------------------------------------------------------------------------------- the arguments
def _fname(f: Callable) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


def _argnums(call: str, argnums: int | Sequence[int], nargs: int) -> tuple[tuple[int, ...], bool]:
    """``argnums`` as a tuple of non-negative positions, and whether it was one int (the result is
    then not a tuple)."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)  # type: ignore[arg-type]
    if not nums:
        raise ValueError(f"gt.{call}: argnums is empty; name at least one argument to differentiate")
    out = []
    for a in nums:
        if not isinstance(a, int) or isinstance(a, bool):
            raise TypeError(f"gt.{call}: argnums must be an int or a tuple of ints, got {argnums!r}")
        if not -nargs <= a < nargs:
            raise ValueError(
                f"gt.{call}: argnums {argnums!r} names argument {a}, but the function was called with "
                f"{nargs} positional argument(s)"
            )
        out.append(a % nargs)
    if len(set(out)) != len(out):
        raise ValueError(f"gt.{call}: argnums {argnums!r} names an argument twice")
    return tuple(out), single


#: why a Jacobian refuses complex arguments (as JAX's without ``holomorphic=True`` and torch.func's):
#: the derivative along the real basis alone is not the Jacobian of a function that is not holomorphic
_REAL_INPUTS = {
    "jacfwd": "walked forward along each real basis vector it gives the derivative with respect to the real "
    "part alone; use gt.jacrev (a real output: TensorFlow's convention, as gt.grad), gt.jvp with tangents "
    "of your choosing, or pass gt.real(z) and gt.imag(z) as two real arguments",
    "hessian": "use gt.grad (TensorFlow's convention) or pass gt.real(z) and gt.imag(z) as two real arguments",
}


def _source(call: str, where: str, leaf: Any, holomorphic: bool = False) -> Tensor:
    """A fresh recorded copy of one leaf of a differentiated argument (a Tensor of a floating or
    complex dtype; real only for the calls of ``_REAL_INPUTS``, complex only with ``holomorphic``)."""
    try:
        t = convert_to_tensor(leaf)  # (a Variable's read is a recorded copy of its own)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"gt.{call}: {where} is a {type(leaf).__name__}, which is not an array; the "
            f"differentiated arguments must be gt.Tensors, arrays or Python floats ({e})"
        ) from None
    if not t.dtype.differentiable:
        raise TypeError(
            f"gt.{call} requires floating (or complex) inputs, but {where} has dtype {t.dtype}; pass a "
            "floating value (gt.cast(x, gt.float32), or 1.0 rather than 1)"
            + (" or leave that argument out of argnums" if call not in ("vjp", "jvp", "hvp") else "")
        )
    if holomorphic and not t.dtype.is_complex:
        raise TypeError(
            f"gt.{call}(..., holomorphic=True) requires complex inputs, as JAX's does, but {where} has dtype "
            f"{t.dtype}; cast it (gt.cast(x, gt.complex64)), or leave holomorphic=False for a real argument"
        )
    if t.dtype.is_complex and call in _REAL_INPUTS and not holomorphic:
        raise TypeError(
            f"gt.{call} requires real inputs, as jax.{call} and torch.func.{call} do (JAX's without "
            f"holomorphic=True), but {where} has dtype {t.dtype}: {_REAL_INPUTS[call]} (a holomorphic "
            "function: holomorphic=True)"
        )
    return t if isinstance(leaf, Tensor) and leaf._is_var else _identity(t)


class _Args:
    """The call's arguments, the differentiated ones replaced by fresh recorded copies: ``args``
    (to call the function with), ``sources`` (the copies, flat) and :meth:`unflatten` (a flat list
    like ``sources`` back into the arguments' structures: one, or a tuple for tuple ``argnums``)."""

    def __init__(self, call: str, args: Sequence[Any], argnums: int | Sequence[int], holomorphic: bool = False) -> None:
        nums, self.single = _argnums(call, argnums, len(args))
        self.args = list(args)
        self.sources: list[Tensor] = []
        self.specs = []
        for a in nums:
            leaves, spec = optree.tree_flatten(args[a])
            paths = optree.tree_paths(args[a])
            fresh = [
                _source(call, f"argument {a}" + "".join(f"[{p!r}]" for p in path), leaf, holomorphic)
                for leaf, path in zip(leaves, paths)
            ]
            self.args[a] = optree.tree_unflatten(spec, fresh)
            self.sources.extend(fresh)
            self.specs.append(spec)
        #: what an output that is not a Tensor (a Python number) is converted beside
        self.like = self.sources[0] if self.sources else None

    def unflatten(self, flat: Sequence[Any]) -> Any:
        out, k = [], 0
        for spec in self.specs:
            n = spec.num_leaves
            out.append(optree.tree_unflatten(spec, list(flat[k : k + n])))
            k += n
        return out[0] if self.single else tuple(out)


def _call(call: str, f: Callable, args: Sequence[Any], has_aux: bool, kwargs: dict | None = None) -> tuple[Any, Any]:
    """``f(*args, **kwargs)``, split into its output and its auxiliary data when ``has_aux`` (keyword
    arguments are passed through, not differentiated, as ``jax.grad`` and ``torch.func.grad`` do)."""
    res = f(*args, **kwargs) if kwargs else f(*args)
    if not has_aux:
        return res, None
    if not isinstance(res, (tuple, list)) or len(res) != 2:
        raise TypeError(
            f"gt.{call}(..., has_aux=True) requires the function to return a pair (output, aux), but "
            f"{_fname(f)} returned a {type(res).__name__}"
            + (f" of length {len(res)}" if isinstance(res, (tuple, list)) else "")
        )
    return res[0], res[1]


def _tensor(y: Any, like: Tensor | None) -> Tensor:
    """An output leaf as a Tensor (a Python number or an array the function returned, converted)."""
    if isinstance(y, Tensor):
        return y
    return convert_to_tensor(y, like=like) if like is not None else convert_to_tensor(y)


def _scalar(call: str, f: Callable, out: Any, like: Tensor | None) -> Tensor:
    """The function's output, checked to be one real floating scalar (JAX's rule for ``grad``)."""
    if not isinstance(out, Tensor) and optree.tree_structure(out).num_nodes > 1:
        raise TypeError(
            f"gt.{call} differentiates functions with one scalar output, but {_fname(f)} returned a "
            f"{type(out).__name__}; return one scalar (pass has_aux=True to return (output, aux)), or use "
            "gt.vjp / gt.jacrev for several outputs"
        )
    y = _tensor(out, like)
    if y.ndim != 0:
        raise TypeError(
            f"gt.{call} is only defined for scalar-output functions, but {_fname(f)}'s output has shape "
            f"{tuple(y.shape)}; reduce it (gt.sum, gt.reduce_mean), or use gt.vjp / gt.jacrev for a "
            "non-scalar output"
        )
    if not y.dtype.is_floating:
        raise TypeError(
            f"gt.{call} requires a real floating output, but {_fname(f)} returned dtype {y.dtype}"
            + ("; differentiate its real part or its absolute value" if y.dtype.is_complex else "")
        )
    return y


# ------------------------------------------------------------------------------- reverse mode
def _value_and_grad(call, f, args, argnums, has_aux, kwargs):
    a = _Args(call, args, argnums)
    with GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(a.sources)
        out, aux = _call(call, f, a.args, has_aux, kwargs)
    y = _scalar(call, f, out, a.like)
    grads = tape.gradient(y, a.sources, unconnected_gradients=_ZERO)
    return y, a.unflatten(grads), aux


def value_and_grad(
    fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., tuple[Any, Any]]:
    """A function returning ``(fun(*args), grad(fun)(*args))``, as ``jax.value_and_grad``; with
    ``has_aux=True`` it returns ``((value, aux), grad)``."""

    @functools.wraps(fun)
    def value_and_grad_fn(*args, **kwargs):
        y, g, aux = _value_and_grad("value_and_grad", fun, args, argnums, has_aux, kwargs)
        return ((y, aux), g) if has_aux else (y, g)

    return value_and_grad_fn


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The gradient of ``fun`` (a function of one scalar output), as ``jax.grad``: with respect to
    argument ``argnums`` (the first by default; a tuple gives a tuple of gradients), each in the
    structure of its argument.  With ``has_aux=True``, ``fun`` returns ``(output, aux)`` and the
    gradient function returns ``(gradient, aux)``.

    >>> gt.grad(lambda x: gt.sum(x ** 3))(gt.constant([1.0, 2.0]))   # [3., 12.]
    """

    @functools.wraps(fun)
    def grad_fn(*args, **kwargs):
        _, g, aux = _value_and_grad("grad", fun, args, argnums, has_aux, kwargs)
        return (g, aux) if has_aux else g

    return grad_fn


def vjp(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(fun(*primals), vjp_fn)``, as ``jax.vjp``: ``vjp_fn(cotangent)`` (a cotangent in the
    structure of the output) returns the vector-Jacobian products, a tuple with one entry per primal
    in its structure; it may be called any number of times.  With ``has_aux=True``, ``fun`` returns
    ``(output, aux)`` and ``vjp`` returns ``(output, vjp_fn, aux)``."""
    if not primals:
        raise TypeError("gt.vjp needs at least one primal to differentiate with respect to")
    a = _Args("vjp", primals, tuple(range(len(primals))))
    with GradientTape(persistent=True, watch_accessed_variables=False) as tape:
        tape.watch(a.sources)
        out, aux = _call("vjp", fun, a.args, has_aux)
    leaves, spec = optree.tree_flatten(out)
    targets = [_tensor(y, a.like) for y in leaves]

    def vjp_fn(cotangent):
        ct_leaves, ct_spec = optree.tree_flatten(cotangent)
        if ct_spec != spec:
            raise ValueError(
                f"gt.vjp: the cotangent's structure {ct_spec} differs from the output's {spec}; pass one "
                "cotangent per output, in the output's structure"
            )
        cts = []
        for y, c in zip(targets, ct_leaves):
            c = as_tangent(c, y, "gt.vjp", "a cotangent", "output")
            if tuple(c.shape) != tuple(y.shape):
                raise ValueError(
                    f"gt.vjp: a cotangent of shape {tuple(c.shape)} for an output of shape {tuple(y.shape)}; "
                    "they must match"
                )
            cts.append(c)
        grads = tape.gradient(targets, a.sources, output_gradients=cts, unconnected_gradients=_ZERO)
        return a.unflatten(grads)

    out = optree.tree_unflatten(spec, targets)
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def jacrev(
    fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """The Jacobian of ``fun`` by reverse mode, as ``jax.jacrev``: in the structure of the output,
    each output leaf replaced by the Jacobians with respect to ``argnums`` (in the arguments'
    structures; a tuple for tuple ``argnums``), each of shape ``output.shape + input.shape``.  One
    backward walk per output element, vectorized where the tape's ``jacobian`` can.  With
    ``has_aux=True`` returns ``(jacobian, aux)``.  Real outputs; with ``holomorphic=True`` (JAX's), a
    holomorphic function of complex inputs and outputs, whose Jacobian is ``f'(z)`` (the conjugate of
    the rows TensorFlow's convention gives)."""
    return _jacrev("jacrev", fun, argnums, has_aux, holomorphic)


def _jacrev(
    call: str, fun: Callable, argnums: int | Sequence[int], has_aux: bool, holomorphic: bool = False
) -> Callable[..., Any]:
    """:func:`jacrev`, its messages naming ``gt.<call>`` (``hessian`` is built of two)."""

    @functools.wraps(fun)
    def jacrev_fn(*args, **kwargs):
        a = _Args(call, args, argnums, holomorphic)
        with GradientTape(persistent=True, watch_accessed_variables=False) as tape:
            tape.watch(a.sources)
            out, aux = _call(call, fun, a.args, has_aux, kwargs)
        leaves, spec = optree.tree_flatten(out)
        jacs = []
        for y in leaves:
            y = _tensor(y, a.like)
            if not y.dtype.is_floating and not y.dtype.is_complex:
                raise TypeError(
                    f"gt.{call} requires floating outputs, as jax.jacrev does, but {_fname(fun)} returned dtype "
                    f"{y.dtype} (a Jacobian of zeros where it is defined); return it as auxiliary data "
                    "(has_aux=True), or cast it to a floating dtype for its zero Jacobian"
                )
            if holomorphic:
                if not y.dtype.is_complex:
                    raise TypeError(
                        f"gt.{call}(..., holomorphic=True) requires complex outputs, as JAX's does, but "
                        f"{_fname(fun)} returned dtype {y.dtype}; leave holomorphic=False for a real output"
                    )
                # (each row, TensorFlow's gradient of Re y_i, is conj(f'(z)) for a holomorphic f)
                js = tape.jacobian(y, a.sources, unconnected_gradients=_ZERO)
                jacs.append(a.unflatten([conj(j) for j in js]))
                continue
            if y.dtype.is_complex:
                raise TypeError(
                    f"gt.{call} requires real outputs, as jax.jacrev and torch.func.jacrev do, but {_fname(fun)} "
                    f"returned dtype {y.dtype}: its rows would be the gradients of the real part alone (the "
                    "imaginary part dropped, as tape.jacobian's); use gt.jacfwd (real inputs), gt.vjp with "
                    "cotangents of your choosing, differentiate gt.real(y) and gt.imag(y) apart, or pass "
                    "holomorphic=True for a holomorphic function of complex inputs"
                )
            js = tape.jacobian(y, a.sources, unconnected_gradients=_ZERO)
            jacs.append(a.unflatten(js))
        res = optree.tree_unflatten(spec, jacs)
        return (res, aux) if has_aux else res

    return jacrev_fn


# ------------------------------------------------------------------------------- forward mode
def _tangents(call: str, primals: Any, tangents: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """``jax.jvp``'s primals and tangents: two tuples (or lists) of one structure."""
    for what, v in (("primals", primals), ("tangents", tangents)):
        if not isinstance(v, (tuple, list)):
            raise TypeError(
                f"gt.{call}: {what} must be a tuple (or list) with one entry per argument of the function, "
                f"got a {type(v).__name__}; write gt.{call}(f, (x,), (v,)) for one argument"
            )
    if not primals:
        raise TypeError(f"gt.{call} needs at least one primal to differentiate with respect to")
    if len(primals) != len(tangents):
        raise ValueError(f"gt.{call}: {len(primals)} primals but {len(tangents)} tangents; give one tangent per primal")
    p_tree: Any = tuple(primals)
    t_tree: Any = tuple(tangents)
    ps, ts = optree.tree_structure(p_tree), optree.tree_structure(t_tree)
    if ps != ts:
        raise ValueError(f"gt.{call}: the primals' structure {ps} and the tangents' {ts} differ; they must match")
    return tuple(primals), tuple(tangents)


def _jvp(call, fun, primals, tangents, has_aux):
    primals, tangents = _tangents(call, primals, tangents)
    a = _Args(call, primals, tuple(range(len(primals))))
    tans = optree.tree_leaves(tangents)
    for k, (s, t) in enumerate(zip(a.sources, tans)):
        t = as_tangent(t, s, f"gt.{call}", "a tangent", "primal")
        if tuple(t.shape) != tuple(s.shape):
            raise ValueError(
                f"gt.{call}: a tangent of shape {tuple(t.shape)} for a primal of shape {tuple(s.shape)} "
                f"(leaf {k}); they must match"
            )
    with ForwardAccumulator(a.sources, tans) as acc:
        out, aux = _call(call, fun, a.args, has_aux)
    leaves, spec = optree.tree_flatten(out)
    outs = [_tensor(y, a.like) for y in leaves]
    jv = acc.jvp(outs, unconnected_gradients=_ZERO)
    return optree.tree_unflatten(spec, outs), optree.tree_unflatten(spec, jv), aux


def jvp(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False) -> tuple[Any, ...]:
    """``(fun(*primals), J @ tangents)``, as ``jax.jvp``: forward mode, by a
    ``gt.ForwardAccumulator`` (one forward walk over what ``fun`` recorded).  ``primals`` and
    ``tangents`` are tuples of one structure; the tangents take the primals' dtypes.  With
    ``has_aux=True`` returns ``(output, tangent_out, aux)``."""
    out, jv, aux = _jvp("jvp", fun, primals, tangents, has_aux)
    return (out, jv, aux) if has_aux else (out, jv)


def jacfwd(
    fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """The Jacobian of ``fun`` by forward mode, as ``jax.jacfwd`` (the same structure and shapes as
    ``gt.jacrev``): ``fun`` runs once under a ``gt.ForwardAccumulator``, then its recording is walked
    forward along every basis vector of each argument at once (the basis a leading batch axis of the
    tangents, on any backend, also while an outer tape records; where a node on the path does not
    take it, the walk is mapped by the backend's ``vmap`` (PyTorch, JAX) or run once per input
    element).  With ``has_aux=True`` returns ``(jacobian, aux)``.  Real inputs; with
    ``holomorphic=True`` (JAX's), complex ones of a holomorphic function (the Jacobian ``f'(z)``)."""

    @functools.wraps(fun)
    def jacfwd_fn(*args, **kwargs):
        a = _Args("jacfwd", args, argnums, holomorphic)
        srcs = a.sources
        # the other sources' tangents are zeros, not None: a node whose recorded inputs do not give its
        # output's shape (``x @ w + b`` keeps neither) needs a tangent for every input on its path
        nought = [_zeros(s, tuple(s.shape)) for s in srcs]
        with ForwardAccumulator(srcs, nought) as acc:
            out, aux = _call("jacfwd", fun, a.args, has_aux, kwargs)
        leaves, spec = optree.tree_flatten(out)
        outs = [_tensor(y, a.like) for y in leaves]
        per_source = []  # per source: per output, the Jacobian block [out..., in...]
        for k, s in enumerate(srcs):
            n = s.size
            if not n:
                per_source.append(
                    [zeros(tuple(y.shape) + tuple(s.shape), dtype=s.dtype, device=s._b.device_of(s._v)) for y in outs]
                )
                continue
            blocks = []
            for y, c in zip(outs, _columns(acc, outs, nought, k)):
                j = moveaxis(c, 0, -1) if y.ndim else c  # [out..., n]
                shape = tuple(y.shape) + tuple(s.shape)
                blocks.append(j if tuple(j.shape) == shape else reshape(j, shape))
            per_source.append(blocks)
        jacs = [a.unflatten([blocks[j] for blocks in per_source]) for j in range(len(outs))]
        res = optree.tree_unflatten(spec, jacs)
        return (res, aux) if has_aux else res

    return jacfwd_fn


def _zeros(like: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Zeros of ``like``'s dtype, backend and device, of ``shape`` (no op dispatched)."""
    b = like._b
    return wrap(b.xp.zeros(shape, dtype=like._v.dtype, device=b.device_of(like._v)), b)


def _columns(acc: ForwardAccumulator, outs: list[Tensor], nought: list[Tensor], k: int) -> list[Tensor]:
    """Per output, the jvps along each basis vector of source ``k`` (the others' tangents zero),
    stacked: ``[n, out...]``.  One forward walk with the basis as a leading batch axis of the
    tangents where every node on the path takes it (``ForwardAccumulator._jvps_batched``: on native
    arrays, or on Tensors while a tape records); else one walk mapped by the backend's ``vmap``
    where it has one and no tape records (as the tape's ``jacobian`` maps its backward walk); else
    one walk per basis vector, recordable."""
    s = nought[k]
    b, n, shape = s._b, s.size, tuple(s.shape)
    xp = b.xp
    eye = xp.eye(n, dtype=s._v.dtype, device=b.device_of(s._v))
    recording = bool(per_thread.tapes)
    try:
        basis = xp.reshape(eye, (n,) + shape)
        tans: list[Any] = []
        for j, t in enumerate(nought):
            tans.append(wrap(basis, b) if j == k else _zeros(t, (n,) + tuple(t.shape)))
        cols = acc._jvps_batched(outs, tans, n)
        if recording:
            return cols
        at = b.array_type
        return [wrap(c if c.__class__ is at else b.fix_output(c), b) for c in cols]
    except NotBatched:
        pass

    def push(e):
        basis = list(nought)
        basis[k] = wrap(e, b)
        return acc._jvp_along(outs, basis, _ZERO)

    if getattr(b, "supports_vmap", False) and not recording:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cols = b.vmap(lambda e: tuple(t._v for t in push(e)))(xp.reshape(eye, (n,) + shape))
            return [wrap(c, b) for c in cols]
        except Exception:  # a walk that does not map (Python control flow on values): the loop below
            pass
    rows = [push(xp.reshape(eye[i, ...], shape)) for i in range(n)]
    return [stack([r[j] for r in rows], axis=0) for j in range(len(outs))]


def hessian(
    fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """The Hessian of a scalar function, as ``jax.hessian``, with respect to ``argnums``: of shape
    ``input.shape + input.shape`` (for tuple ``argnums``, a tuple of tuples of the blocks).  With
    ``has_aux=True`` returns ``(hessian, aux)``; ``holomorphic=True`` (JAX's): of a holomorphic function of
    complex inputs.

    It is ``jacrev(jacrev(fun))`` (JAX composes ``jacfwd(jacrev(fun))``; the values are the same): the
    outer jacobian walks the recorded gradient once for all rows where the tape's ``jacobian``
    vectorizes (the backend's ``vmap``, or the ops' batched rules), 2-6x faster here than
    ``jacfwd(jacrev)`` (``benchmarks/hvp.py``; docs/performance.md)."""
    inner = _jacrev("hessian", fun, argnums, has_aux, holomorphic)
    return _jacrev("hessian", inner, argnums, has_aux, holomorphic)


def hvp(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, ...]:
    """The Hessian-vector product of a scalar function, forward over reverse: ``jvp(grad(fun,
    argnums=all), primals, tangents)``'s tangent, that is ``H @ v`` with ``H`` the Hessian with
    respect to every primal, a tuple in the structure of ``primals`` (``primals`` and ``tangents`` as
    ``gt.jvp`` takes them).  It costs a gradient and a forward walk over it, never the Hessian."""
    primals, tangents = _tangents("hvp", primals, tangents)
    g = grad(fun, argnums=tuple(range(len(primals))))
    _, hv, _ = _jvp("hvp", g, primals, tangents, False)
    return hv
