"""``custom_gradient``, ``stop_gradient`` and ``register_op``: the user's ways to say how
something differentiates."""

from __future__ import annotations

import functools
import inspect
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from gradtape.ops import apply, defop
from gradtape.core.registry import OpDef, check_new_name
from gradtape.core.engine import Recording, record
from gradtape.core.recording_state import add_active_tapes, per_thread
from gradtape.core.tensor import GradientLeakWarning, Nested, Tensor, convert_to_tensor, next_id, wrap

__all__ = [
    "custom_gradient",
    "custom_gradient_unrecorded",
    "grad_pass_through",
    "stop_gradient",
    "register_op",
    "run_privately",
]


def stop_gradient(x: Nested) -> Nested:
    """The value of ``x`` as a new tensor that no tape connects to ``x``."""
    leaves, spec = optree.tree_flatten(x, none_is_leaf=True)
    out = []
    for t in leaves:
        if not isinstance(t, Tensor):
            t = convert_to_tensor(t)
        out.append(wrap(t._v, t._b))
    return optree.tree_unflatten(spec, out)


def _custom_rule(op, *grads):
    """Calls the user's ``grad_fn`` recorded with this call (see :func:`custom_gradient`)."""
    grad_fn = op.attrs["grad_fn"]
    n_in = op.attrs["n_inputs"]
    if per_thread.tapes:
        _warn_closed_over(op, grads)
    variables = op.inputs[n_in:]
    if op.attrs["variables"]:
        if not op.attrs["accepts_variables"]:
            raise TypeError(
                "If using @custom_gradient with a function that uses variables, then "
                "grad_fn must accept a keyword argument 'variables'."
            )
        result = grad_fn(*grads, variables=list(op.attrs["variables"]))
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise ValueError(
                "custom_gradient: with variables, grad_fn must return (input_gradients, variable_gradients)"
            )
        in_grads, var_grads = result
        in_grads = optree.tree_leaves(in_grads, none_is_leaf=True)
        var_grads = list(var_grads)
        if len(var_grads) != len(variables):
            raise ValueError(
                f"custom_gradient: grad_fn returned {len(var_grads)} variable gradients for {len(variables)} variables"
            )
    else:
        result = grad_fn(*grads)
        # (in the structure of the arguments, as TensorFlow's: one gradient per tensor of a list argument)
        in_grads = optree.tree_leaves(result, none_is_leaf=True)
        var_grads = []
    positions = op.attrs["positions"]
    if len(in_grads) == op.attrs["n_args"] and len(in_grads) != n_in:
        in_grads = [in_grads[p] for p in positions]
    if len(in_grads) != n_in:
        raise ValueError(f"custom_gradient: grad_fn returned {len(in_grads)} gradients for {n_in} tensor inputs")
    return tuple(in_grads) + tuple(var_grads)


def _all_zero(grads: tuple[Any, ...]) -> bool:
    """Whether every cotangent is known to be zero (a traced value, which cannot say: no)."""
    try:
        return all(isinstance(g, Tensor) and not bool(g._b.xp.any(g._v != 0)) for g in grads)
    except Exception:
        return False


def _warn_closed_over(op: Any, grads: tuple[Any, ...]) -> None:
    """A tape records this rule (a higher-order derivative) with respect to the call's inputs: warn where
    ``grad_fn`` reads tensors the function computed and that tape did not see the function compute them
    (it was opened after the call, or the function ran privately: ``recompute_grad``'s), so nothing on it
    connects them to the inputs: they are constants there, where a tape that recorded the function (as
    TensorFlow's do) differentiates through them."""
    seen_by = op.attrs["body_tapes"]  # (weak references to the tapes that recorded the function)
    unseen = [rec.watched for rec in per_thread.tapes if not any(r() is rec for r in seen_by)]
    if not any(i in w for w in unseen for i in op.in_ids):
        return
    lo, hi = op.attrs["ids"]
    grad_fn = op.attrs["grad_fn"]
    code, cells = getattr(grad_fn, "__code__", None), getattr(grad_fn, "__closure__", None) or ()
    if code is None:
        return
    names = []
    for name, cell in zip(code.co_freevars, cells):
        try:
            value = cell.cell_contents
        except ValueError:  # (an empty cell)
            continue
        for t in optree.tree_leaves(value, is_leaf=lambda v: isinstance(v, Tensor)):
            if isinstance(t, Tensor) and lo < t._id < hi and not t._is_var:
                names.append(name)
                break
    # (zero cotangents, as a walk gives an output nothing uses: the gradient function, linear in them,
    # gives zeros whatever it reads)
    if names and not _all_zero(grads):
        f = op.attrs["function"]
        warnings.warn(
            f"gt.custom_gradient: a higher-order derivative through {f} treats {', '.join(names)} (computed "
            f"inside {f}, read by its gradient function) as a constant: the tape that differentiates the gradient "
            f"did not see {f} run (it was opened after the call), so nothing on it connects that value to the "
            "inputs. Open that tape before calling the function (as TensorFlow, a tape then records it and "
            "differentiates through its values), or compute the value inside the gradient function from the inputs",
            GradientLeakWarning,
            stacklevel=2,
        )


_CUSTOM = OpDef("custom_gradient", forward=None, grad=_custom_rule, rule_form="tf", chapter="user")


@functools.lru_cache(maxsize=256)
def _code_accepts_variables(code: Any) -> bool:
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    return "variables" in names or bool(code.co_flags & inspect.CO_VARKEYWORDS)


def _accepts_variables(grad_fn: Callable[..., Any]) -> bool:
    """Whether ``grad_fn`` takes a keyword ``variables`` (or ``**kwargs``): read from its code object,
    once per code (a closure made per call shares it), else from ``inspect.signature``."""
    code = getattr(grad_fn, "__code__", None)
    if code is not None and not hasattr(grad_fn, "__wrapped__") and not hasattr(grad_fn, "__signature__"):
        return _code_accepts_variables(code)
    try:
        params = inspect.signature(grad_fn).parameters
    except (TypeError, ValueError):
        return True
    return "variables" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def run_privately(f: Callable[..., Any], /, *args: Any, **kwargs: Any) -> tuple[Any, dict]:
    """``f(*args, **kwargs)`` with this thread's tapes replaced by a private one: outer tapes see
    nothing of what ``f`` computes, the private one collects the trainable variables ``f`` reads.
    Returns ``(result, {id: variable read})``."""
    return _run_with(f, [], args, kwargs)


def _run_with(f: Callable[..., Any], tapes: list, args: tuple, kwargs: dict) -> tuple[Any, dict]:
    """``f(*args, **kwargs)`` recorded by ``tapes`` (a list of this thread's recordings) and by a private
    recording that collects the trainable variables ``f`` reads (converting a tensor out of gradtape inside
    ``f`` is not a gradient leak for ``tapes``: ``f``'s gradient is the user's).  Returns ``(result,
    {id: variable read})``."""
    outer = per_thread.tapes
    private = Recording(True, hides_outer=True)
    per_thread.tapes = [*tapes, private]
    add_active_tapes(1)
    try:
        return f(*args, **kwargs), private.variables
    finally:
        per_thread.tapes = outer
        add_active_tapes(-1)


def custom_gradient(f: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """Decorator (as ``tf.custom_gradient``): ``f(*x)`` returns ``(y, grad_fn)``; ``grad_fn(*dy)``
    returns the gradients of the inputs, or with ``variables=`` ``(input_grads, variable_grads)``.

    As TensorFlow's, the tapes recording the call record what ``f`` computes too (its outputs get the
    gradient of ``grad_fn``, a node of their own): a higher-order derivative differentiates through the
    values ``grad_fn`` reads (``e = exp(x)`` in TensorFlow's ``log1pexp`` example), as TensorFlow and
    ``jax.custom_vjp``'s residuals do."""
    if f is None:
        return custom_gradient
    return _custom_gradient(f, record_body=True)


def custom_gradient_unrecorded(f: Callable[..., Any]) -> Callable[..., Any]:
    """:func:`custom_gradient` whose ``f`` runs where no tape records it (only the call's node is kept):
    for ``recompute_grad``, whose point is to keep none of ``f``'s intermediate values (TensorFlow's
    ``recompute_grad`` stops recording around ``f`` too); its ``grad_fn`` computes from the inputs."""
    return _custom_gradient(f, record_body=False)


def _custom_gradient(f: Callable[..., Any], record_body: bool) -> Callable[..., Any]:
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        outer = per_thread.tapes
        lo = next_id() if outer else 0  # (the tensors f computes: ids between lo and hi)
        result, read = _run_with(f, outer if record_body else [], args, kwargs)
        if not (isinstance(result, tuple) and len(result) == 2 and callable(result[1])):
            raise TypeError("a @custom_gradient function must return (outputs, grad_fn)")
        y, grad_fn = result
        leaves, spec = optree.tree_flatten(y, none_is_leaf=True)
        outs = [wrap(t._v, t._b) if isinstance(t, Tensor) else convert_to_tensor(t) for t in leaves]
        # as TF: grad_fn owes gradients only to the variables used inside f that are not its inputs
        variables = []
        if read:
            flat_inputs = optree.tree_leaves((args, kwargs), none_is_leaf=True)
            variables = [v for _, v in sorted(read.items()) if not any(v is a for a in flat_inputs)]
        if outer:
            # the inputs: every tensor of the arguments, nested ones too (TensorFlow flattens them; a
            # tensor in a list argument got no gradient, silently)
            flat_args = optree.tree_leaves(args, none_is_leaf=True)
            positions = [k for k, a in enumerate(flat_args) if isinstance(a, Tensor)]
            inputs = [flat_args[k] for k in positions] + variables
            # (read only where there are variables: inspect.signature costs ~50 us a call)
            accepts = _accepts_variables(grad_fn) if variables else False
            attrs = {
                "grad_fn": grad_fn,
                "n_inputs": len(positions),
                "positions": positions,
                "n_args": len(flat_args),
                "variables": tuple(variables),
                "accepts_variables": accepts,
                "ids": (lo, next_id()),
                "body_tapes": tuple(weakref.ref(r) for r in outer) if record_body else (),
                "function": getattr(f, "__qualname__", None) or repr(f),
            }
            record(_CUSTOM, tuple(inputs), tuple(t._v for t in inputs), attrs, tuple(outs))
        return optree.tree_unflatten(spec, outs)

    return wrapper


def grad_pass_through(f: Callable[..., Any]) -> Callable[..., Any]:
    """As ``tf.grad_pass_through``: ``f``'s forward with the identity for its gradient -- each input
    gets the upstream gradient of the output at its position (``f(x)`` of one input and output: ``dy``),
    and variables ``f`` reads get none (``grad_pass_through(v.assign)(x)`` differentiates to 1 in ``x``)."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        @custom_gradient
        def passing(*xs):
            def grad(*dys, variables=None):
                through = dys if len(dys) > 1 else dys[0]
                return through if variables is None else (through, [None] * len(variables))

            return f(*xs, **kwargs), grad

        return passing(*args)

    return wrapper


def _describe(o):
    r = repr(o)
    return f"{type(o).__name__} {r[:60] + '...' if len(r) > 60 else r}"


def _check_output(name, backend, out, k=None):
    """One output of a registered op's forward: a native array of ``backend`` (or what it turns
    into one: a NumPy array or scalar, a Python number); a gt.Tensor of that backend is unwrapped."""
    if isinstance(out, Tensor) and out._b is backend:
        return out._v
    if backend.is_native(out):
        return out
    if isinstance(out, (bool, int, float, complex, np.ndarray, np.generic)) and np.asarray(out).dtype.kind in "biufc":
        return out
    which = "forward" if k is None else f"output {k} of forward"
    raise TypeError(
        f"register_op({name!r}): {which} returned {_describe(out)}, not an array of "
        f"backend {backend.name!r}; forward(xp, *arrays, **attrs) must compute on the "
        "namespace xp and return its array" + ("s" if k is not None else "")
    )


def register_op(
    name: str,
    forward: Callable[..., Any],
    gradient: Callable[..., Any] | None = None,
    *,
    nout: int | None = None,
    domain: Any = None,
    differentiable: bool = True,
    saves: tuple[str | int, ...] | None = None,
    rule_form: str | None = None,
) -> Callable[..., Any]:
    """Add an op: ``forward(xp, *native_arrays, **attrs)`` computes it on the backend's namespace
    ``xp``; ``gradient(xp, op, *grads)`` is its rule, on the namespace the backward walk passes
    (native arrays in a first-order walk, gradtape Tensors when an outer tape records), or
    TensorFlow's ``gradient(op, *grads)``, always on Tensors (or register one later with
    ``gt.RegisterGradient(name)``).  ``saves``: what the rule reads (``("inputs",)``,
    ``("outputs",)``, ``()`` or input indices; default everything), the rest is freed with the
    forward.  ``rule_form`` declares the rule's form, ``"xp"`` or ``"tf"`` (default: ``"xp"`` where the
    rule's first parameter is named ``xp``, else ``"tf"``).  Returns the function users call:
    ``f(*arrays, **attrs)``.

    The arguments are checked before anything is registered; what ``forward`` returns is checked
    on every call (one array, or a tuple of ``nout`` arrays), a ``TypeError`` naming the op."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_op: the op's name must be a non-empty str, got {_describe(name)}")
    if not callable(forward):
        raise TypeError(
            f"register_op({name!r}): forward must be callable forward(xp, *arrays, **attrs), got {_describe(forward)}"
        )
    if gradient is not None and not callable(gradient):
        raise TypeError(
            f"register_op({name!r}): gradient must be None or a rule gradient(xp, op, *grads) "
            "(or gradient(op, *grads)), "
            f"got {_describe(gradient)}"
        )
    if nout is not None and (isinstance(nout, bool) or not isinstance(nout, int) or nout < 1):
        raise ValueError(f"register_op({name!r}): nout must be None (one output) or a positive int, got {nout!r}")
    check_new_name(name)

    def fwd(backend, *arrays, **attrs):
        out = forward(backend.xp, *arrays, **attrs)
        if nout is None:
            return _check_output(name, backend, out)
        if not isinstance(out, (tuple, list)) or len(out) != nout:
            raise TypeError(
                f"register_op({name!r}): declared with nout={nout}, forward must return a "
                f"tuple of {nout} arrays, got {_describe(out)}"
            )
        return tuple(_check_output(name, backend, o, k) for k, o in enumerate(out))

    op = defop(
        name,
        fwd,
        grad=gradient,
        rule_form=rule_form,
        chapter="user",
        nout=nout,
        domain=domain,
        differentiable=differentiable,
        saves=saves,
        doc=(forward.__doc__ or "").strip() or None,
    )

    def f(*arrays, **attrs):
        return apply(op, arrays, attrs)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = forward.__doc__
    f.op = op  # type: ignore[attr-defined]
    f.gradient = op.gradient  # type: ignore[attr-defined]
    op.public = f
    return f
