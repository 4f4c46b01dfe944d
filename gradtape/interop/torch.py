"""gradtape inside PyTorch and PyTorch inside gradtape: :func:`to_torch` and :func:`from_torch`.

``to_torch(fn)`` is ``fn`` on torch tensors, differentiable by ``torch.autograd``: one
``torch.autograd.Function`` per call, whose forward runs ``fn`` on gradtape under a tape and whose
backward is that tape's one walk (first order: the tape of the forward is reused).  When torch
differentiates the backward (``create_graph=True``: ``gradgradcheck``, Hessian-vector products),
the backward crosses again, as a ``to_torch`` function of its own: gradtape's VJP
(:func:`gradtape.interop.crossing.vjp_function`), recorded, so every order is gradtape's.

``from_torch(fn)`` is a torch function as a gradtape op: its rule is ``torch.autograd.grad`` on the
graph torch recorded in the forward; under an outer gradtape tape (higher order) the rule is itself a
``from_torch`` op, the VJP recomputed with ``create_graph=True``.

Copies: on the torch backend none (the torch tensors are the gradtape tensors' arrays).  From other
backends the arrays cross by DLPack: NumPy, array_api_strict and JAX on the CPU share memory with torch;
a dask array is computed (it has no buffer), a negatively strided NumPy array is made contiguous
first (``TorchBackend.from_dlpack``), and a torch tensor with the lazy conjugate bit (a complex
cotangent) is resolved before it crosses to another backend (:func:`_shareable`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from gradtape.core.backend import DLPACK_ERRORS
from gradtape.core.backend_registry import get as get_backend_named
from gradtape.core.tensor import Tensor, wrap
from gradtape.interop.crossing import (
    from_native,
    Flat,
    NativeOp,
    native_on,
    ONE,
    resolve_backend,
    Taped,
    to_gradtape,
    TUPLE,
    unflatten_outputs,
    vjp_function,
)

__all__ = ["from_torch", "to_torch"]

_TORCH = get_backend_named("torch")


def _torch_of(x: Any) -> torch.Tensor:
    """A native array of any gradtape backend as a torch tensor (itself on the torch backend).  A host
    array goes through a NumPy view of it (``np.from_dlpack``, no copy), which the torch adapter takes
    whatever its strides (torch's own ``from_dlpack`` aborts the process on negative ones: an
    array_api_strict array of a flipped view); a device array crosses by DLPack directly."""
    if isinstance(x, torch.Tensor):
        return x
    try:
        host = np.from_dlpack(x)
    except DLPACK_ERRORS:  # not on the host (a GPU array), or not a DLPack producer
        return _TORCH.from_dlpack(x)
    return _TORCH.from_dlpack(host)


def _shareable(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a tensor another library can take by DLPack: detached, and with torch's lazy conjugate
    or negation applied (a complex cotangent from torch.autograd often carries the conjugate bit,
    which DLPack cannot express: a copy then, the only way to hand those values over)."""
    return x.detach().resolve_conj().resolve_neg()


def _floating(x: torch.Tensor) -> bool:
    return x.is_floating_point() or x.is_complex()


# ------------------------------------------------------------------------------------------ to_torch
class _Crossing(Taped):
    """One call of a gradtape function ``f`` of tensors (positional) from torch, on backend ``b``: its
    forward and what it recorded (a :class:`~gradtape.interop.crossing.Taped`, which also says how
    the outputs were structured: ``spec``) and whether each output carries a gradient."""

    __slots__ = ("f", "b", "n_in", "floating")

    def __init__(self, f: Callable[..., Any], b: Any, n_in: int):
        self.f, self.b, self.n_in = f, b, n_in
        self.rec = None  # (nothing recorded: before the forward, or no input needs a gradient)
        self.spec: Any = None
        self.floating: list = []  # whether each output carries a gradient (none: torch.func's vmap rule)

    def forward(self, xs: tuple) -> Any:
        """``f`` on the torch tensors ``xs``, recorded: its outputs as new torch tensors, one (``f``
        returned one Tensor) or a tuple (:attr:`spec` says how to restructure it)."""
        b = self.b
        if b is _TORCH:  # (the torch tensors are the gradtape tensors' arrays)
            gxs = [wrap(x, b) for x in xs]
        else:
            gxs = [to_gradtape(_shareable(x), b) for x in xs]
        # (a floating torch tensor is a floating Tensor: the tape watches those torch records)
        self.record(self.f, gxs, [x.requires_grad and (x.is_floating_point() or x.is_complex()) for x in xs])
        res = []
        floating = self.floating
        for k, o in enumerate(self.outs):
            if not isinstance(o, Tensor):
                raise TypeError(
                    f"to_torch: output {k} of the function is {type(o).__name__} {o!r:.60}, not a gradtape "
                    "Tensor; return gradtape tensors (gt.asarray(value) makes one), so torch can differentiate them"
                )
            t = o._v
            if b is not _TORCH:  # (a GPU backend's results, for CPU tensors: back where they came from)
                t = _torch_of(t)
                if xs and t.device != xs[0].device:
                    t = t.to(xs[0].device)
            # a new tensor object per output, a view of the same memory: torch hangs the graph on
            # what forward returns, and the tape's Tensor holding that very object would close a
            # reference cycle (output -> grad_fn -> crossing -> Tensor -> output) that only the GC
            # collects; and torch refuses to change a custom Function's view in place, which would
            # change the memory the tape's rules read (exp's output) under a wrong gradient
            res.append(t.view_as(t))
            floating.append(t.is_floating_point() or t.is_complex())
        return res[0] if self.spec is ONE else tuple(res)

    def backward(self, gys: tuple, needs: tuple, xs: tuple) -> tuple:
        """Gradients of the inputs ``xs`` (torch's) from the forward's recording (one walk; None where
        torch needs none, ``needs``: torch's ``needs_input_grad``, the crossing's own first), on the
        inputs' devices."""
        b = self.b
        cts = [
            None if g is None or not f else wrap(g, b) if b is _TORCH else to_gradtape(_shareable(g), b)
            for g, f in zip(gys, self.floating)
        ]
        wrt = [k for k in range(len(xs)) if needs[k + 1]]
        grads: list = [None] * (len(xs) + 1)
        for k, g in zip(wrt, self.gradient(cts, wrt)):
            if g is not None:
                t = g._v if b is _TORCH else _torch_of(g._v)
                device = xs[k].device
                grads[k + 1] = t if t.device == device else t.to(device)
        return tuple(grads)


def _setup(ctx: Any, c: _Crossing, xs: tuple, outs: Any) -> None:
    ctx.crossing = c
    ctx.save_for_backward(*xs)
    floating = c.floating
    if False in floating:
        ints = [o for o, f in zip(outs if isinstance(outs, tuple) else (outs,), floating) if not f]
        ctx.mark_non_differentiable(*ints)
    if len(floating) > 1:
        # an output that nothing downstream uses gets None, not zeros that the backward would walk
        # back through that output's part of the function
        ctx.set_materialize_grads(False)


def _zeros_like_output(c: _Crossing, k: int, xs: tuple) -> torch.Tensor:
    """Zeros shaped as the crossing ``c``'s output ``k``, where torch's outputs are (beside ``xs``)."""
    o = c.outs[k]._v
    return torch.zeros_like(o if c.b is _TORCH else _torch_of(o), device=xs[0].device if xs else None)


def _backward(ctx: Any, *gys: torch.Tensor) -> tuple:
    c: _Crossing = ctx.crossing
    needs = ctx.needs_input_grad
    # read on every backward: torch checks here that no input was changed in place since the
    # forward (the tape's rules read the inputs: sin's gradient is cos(x)), else its error
    xs = ctx.saved_tensors
    if True not in needs:
        return (None,) * len(needs)
    if c.rec is None or torch.is_grad_enabled():
        # create_graph=True: torch differentiates this backward, so it crosses again (gradtape's
        # VJP); so does a forward that recorded nothing (torch.func's transforms call it on arrays
        # that do not require grad)
        return (None, *_vjp_crossing(c, xs, gys, needs[1:]))
    return c.backward(gys, needs, xs)


def _vjp_crossing(c: _Crossing, xs: tuple, gys: tuple, needs: tuple) -> list:
    """The gradients of the inputs ``xs`` of the crossing ``c`` given the cotangents ``gys`` as another
    crossing (gradtape's VJP, recorded: torch differentiates it again): the gradients of its
    floating inputs only (an integer input has none, not a tensor to hand to torch)."""
    vjp = vjp_function(c.f, c.n_in)
    keep = [k for k, x in enumerate(xs) if _floating(x)]
    if None in gys:  # (an output torch needs no gradient of: torch gave None, see _setup; the VJP takes zeros)
        gys = tuple(_zeros_like_output(c, k, xs) if g is None else g for k, g in enumerate(gys))

    def floating_grads(*args: Any) -> list:
        grads = vjp(*args)
        return [grads[k] for k in keep]

    floating_grads.__name__ = floating_grads.__qualname__ = vjp.__name__
    grads = _apply(_Crossing(floating_grads, c.b, c.n_in + len(gys)), *xs, *gys)
    out: list = [None] * len(xs)
    for k, g in zip(keep, grads if isinstance(grads, tuple) else (grads,)):
        if needs[k]:
            out[k] = g
    return out


class _Function(torch.autograd.Function):
    """The torch side of one crossing: ``apply(crossing, *torch_tensors)``."""

    @staticmethod
    def forward(ctx: Any, c: _Crossing, *xs: torch.Tensor) -> Any:
        outs = c.forward(xs)
        _setup(ctx, c, xs, outs)
        return outs

    backward = staticmethod(_backward)


class _FunctorchFunction(torch.autograd.Function):
    """:class:`_Function` in the form ``torch.func``'s transforms call (forward and ``setup_context``
    apart), used only under them: torch binds the arguments of that form by ``inspect.signature`` on
    every call (+50 µs a call)."""

    @staticmethod
    def forward(c: _Crossing, *xs: torch.Tensor) -> Any:
        return c.forward(xs)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        _setup(ctx, inputs[0], inputs[1:], output)

    backward = staticmethod(_backward)

    @staticmethod
    def vmap(info: Any, in_dims: tuple, c: _Crossing, *xs: torch.Tensor) -> tuple:
        """``torch.func.vmap`` over a crossing (``vmap(grad(f))``, ``jacrev``, ``jacrev(jacrev(f))``): one
        crossing per element of the batch, each differentiable by the transforms below, the outputs
        stacked on axis 0 (torch cannot vectorise gradtape's function; ``gt.vmap`` inside ``fn``
        vectorises it on gradtape's side)."""
        rows = []
        for i in range(info.batch_size):
            args = [x if d is None else x.select(d, i) for x, d in zip(xs, in_dims[1:])]
            row = _Crossing(c.f, c.b, c.n_in)
            rows.append(_apply(row, *args))
            c.spec = row.spec  # (the structure the caller restructures by)
        if not isinstance(rows[0], tuple):  # (one output)
            return torch.stack(rows), 0
        outs = tuple(torch.stack(col) for col in zip(*rows))
        return outs, (0,) * len(outs)


_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: True)


def _apply(c: _Crossing, *xs: torch.Tensor) -> Any:
    """The crossing ``c`` on torch tensors: one output (``c.f`` returned one Tensor), or a tuple."""
    return (_FunctorchFunction if _functorch_active() else _Function).apply(c, *xs)


def to_torch(fn: Callable[..., Any], *, backend: Any = None) -> Callable[..., Any]:
    """``fn`` (written for gradtape / the Array API) as a function of torch tensors that
    ``torch.autograd`` differentiates, to any order, with gradtape's gradients.

    The torch tensors among the arguments (nested in lists, tuples, dicts: any pytree) become gradtape
    tensors of ``backend`` (default: the active backend when called; ``"torch"`` shares their
    memory, others cross by DLPack), ``fn`` runs on them, and the gradtape tensors it returns (any
    pytree) come back as torch tensors.  Other arguments are passed as they are."""

    named: list = []  # (a named backend, once resolved)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if named:
            b = named[0]
        else:
            b = resolve_backend(backend)
            if backend is not None:
                named.append(b)
        if not kwargs:  # the common case: torch tensors only, positional (no pytree to flatten)
            for a in args:
                if not isinstance(a, torch.Tensor):
                    break
            else:
                c = _Crossing(fn, b, len(args))
                out = (_FunctorchFunction if _functorch_active() else _Function).apply(c, *args)
                spec = c.spec
                return out if spec is ONE or spec is TUPLE else unflatten_outputs(spec, out)
        flat = Flat(fn, args, kwargs, torch.Tensor, Tensor)
        xs = flat.arrays
        c = _Crossing(flat.call, b, len(xs))
        out = _apply(c, *xs)
        return flat.unflatten(out if isinstance(out, tuple) else (out,))

    return wrapper


# ---------------------------------------------------------------------------------------- from_torch
def _torch_forward(xs: list, fn: Callable[..., Any], name: str) -> tuple:
    """One call of the flat torch function ``fn`` on gradtape Tensors ``xs`` (of one backend): its
    outputs as the backend's arrays and their VJP, ``torch.autograd.grad`` on the graph torch
    recorded (see :func:`from_torch`).  (Loops, not generator expressions, and the torch backend's
    arrays taken as they are: this is the crossing's per-call cost, ``benchmarks/crossing.py``.)"""
    b = xs[0]._b
    on_torch = b is _TORCH
    live = False  # whether torch records already (an input requires grad: torch.func, an outer torch graph)
    ts = []
    wrt = []  # the inputs torch differentiates with respect to
    for k, x in enumerate(xs):
        t = x._v if on_torch else _torch_of(x._v)
        if t.requires_grad:
            live = live or on_torch
            wrt.append(k)
        elif t.is_floating_point() or t.is_complex():
            t = t.detach().requires_grad_()
            wrt.append(k)
        ts.append(t)
    if torch.is_grad_enabled():
        outs = fn(*ts)
    else:
        with torch.enable_grad():
            outs = fn(*ts)
    for o in outs:
        if not isinstance(o, torch.Tensor):
            raise TypeError(f"from_torch({name}): the function must return torch tensors (any pytree of them)")
    home = b.device_of(xs[0]._v)  # (torch may compute elsewhere, on the CPU for a GPU backend's arrays)
    keep = live and on_torch
    if on_torch:
        ys = [(o if keep else o.detach()) if o.device == home else native_on(b, o.detach(), home) for o in outs]
    else:
        ys = [native_on(b, o.detach(), home) for o in outs]

    def vjp(dys: tuple) -> list:
        grads: list = [None] * len(xs)
        if not wrt:
            return grads
        targets, cts = [], []
        for o, d in zip(outs, dys):
            if o.requires_grad:
                c = d if on_torch else _torch_of(d)
                targets.append(o)
                cts.append(c if c.dtype == o.dtype else c.to(o.dtype))
        if targets:
            gs = _autograd(name, targets, [ts[k] for k in wrt], cts)
            for k, g in zip(wrt, gs):
                v = xs[k]._v
                if g is None:
                    grads[k] = b.xp.zeros_like(v)
                else:  # (on the torch backend the gradient of a leaf made from v is on v's device already)
                    grads[k] = g if on_torch else native_on(b, g, b.device_of(v))
        return grads

    return ys, vjp


def _autograd(name: str, outs: list, wrt: list, cts: list, create_graph: bool = False) -> tuple:
    """``torch.autograd.grad`` (the graph kept: a persistent tape may walk it again); torch's refusal to
    differentiate a function twice (a ``once_differentiable`` backward, say) is said as gradtape's."""
    refused = [o for o in outs if type(o.grad_fn).__name__ in ("Error", "DelayedError")]
    try:
        if refused:  # torch marks a gradient it cannot differentiate so, and walks it as unconnected
            raise RuntimeError(
                f"its graph ends in {type(refused[0].grad_fn).__name__} (a once_differentiable backward)"
            )
        return torch.autograd.grad(outs, wrt, cts, retain_graph=True, create_graph=create_graph, allow_unused=True)
    except RuntimeError as e:
        if not refused and "twice" not in str(e):
            raise
        raise NotImplementedError(
            f"from_torch({name}): torch cannot differentiate this function's gradient ({e}); "
            "gradtape gets the higher derivatives of a torch function from torch.autograd, so compute only "
            "first-order gradients through it"
        ) from e


def _vjp_of(fn: Callable[..., Any], n: int, name: str) -> Callable[..., Any]:
    """The VJP of the flat torch function ``fn`` as a flat torch function of ``(*xs, *dys)`` whose
    result torch can differentiate again (``create_graph=True``)."""

    def vjp(*args: torch.Tensor) -> list:
        xs, dys = args[:n], args[n:]
        outs = fn(*xs)
        pairs = [(o, d) for o, d in zip(outs, dys) if o.requires_grad]
        wrt = [x for x in xs if x.requires_grad]
        cts = [d.to(o.dtype) for o, d in pairs]
        gs = iter(_autograd(name, [o for o, _ in pairs], wrt, cts, create_graph=True) if pairs and wrt else ())
        out = []
        for x in xs:
            g = next(gs) if x.requires_grad else None
            out.append(torch.zeros_like(x) if g is None else g)
        return out

    return vjp


_FROM_TORCH = NativeOp("from_torch", _torch_forward, _vjp_of)


def from_torch(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A torch function as a gradtape function: its gradtape tensor arguments (any pytree, one
    backend) become torch tensors (shared on the torch backend, by DLPack from others), ``fn`` runs
    on them, and the torch tensors it returns (any pytree) come back as gradtape tensors of the
    inputs' backend, recorded as one op whose rule is ``torch.autograd.grad``.  Called with no
    gradtape tensor among its arguments it is ``fn`` itself."""
    return from_native(fn, _FROM_TORCH, torch.Tensor)
