"""``gt.vmap`` (JAX's and torch.func's) and ``gt.vectorized_map`` (TensorFlow's): a function of one
example mapped over a batch, on every backend, by the ops' batching rules.

The mapped function runs once, on the whole batch: its arguments cross into a batching backend
(``gradtape/backends/batching.py``: each op is called once on the batch, by the batching kind it
declares), its results cross back with the examples along ``out_axes``.  The crossings are
recorded steps with rules, so a ``GradientTape`` outside the map differentiates through it, one
inside gives per-example gradients, and maps nest.  See docs/vmap.md.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import optree

from gradtape.backends.batching import (
    BatchedValueError,
    MapCall,
    VmapFallbackWarning,
    batching_backend,
    capture,
    enter,
    exit_,
    fallback_policy,
    innermost_map,
    running_map,
)
from gradtape.core.tensor import Tensor, convert_to_tensor, lift
from gradtape.ops.manipulation import broadcast_to, expand_dims, stack

__all__ = ["vmap", "vectorized_map"]


def _is_leaf(x):
    return isinstance(x, Tensor) or x is None


def _broadcast_prefix(axes, tree, what, treedef=None):
    """``axes`` (an int, None, or a pytree prefix of ``tree``) as one entry per leaf of ``tree``
    (``treedef``: ``tree``'s, where the caller has it: an int, None or a tuple of them per entry of a
    tuple is then spread without walking the tree again)."""
    if treedef is not None:
        if axes is None or axes.__class__ is int:
            return [axes] * treedef.num_leaves
        if axes.__class__ is tuple and treedef.kind == optree.PyTreeKind.TUPLE:
            children = treedef.children()
            if len(children) == len(axes) and all(a is None or a.__class__ is int for a in axes):
                return [a for a, c in zip(axes, children) for _ in range(c.num_leaves)]
    try:
        return optree.broadcast_prefix(axes, tree, is_leaf=_is_leaf, none_is_leaf=True)
    except ValueError as e:
        raise ValueError(f"gt.vmap: {what} does not match the structure it maps over: {e}") from None


def _axis(axis, ndim, where, what):
    """``axis`` of ``what`` (an argument of ``ndim`` dimensions, or a result: ``ndim`` counts the
    examples' axis), counted from the front; an axis out of range is an error, as JAX's (it wrapped
    around: ``in_axes=2`` of a matrix mapped over axis 0, silently)."""
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(
            f"{where}: {what} along axis {axis}, which needs at least {axis + 1 if axis >= 0 else -axis} "
            f"dimensions, but it has {ndim}; an axis lies in [{-ndim}, {ndim - 1}]"
        )
    return axis % ndim


def _as_tensor(x):
    if isinstance(x, Tensor):
        return x
    return convert_to_tensor(x)


#: what a random draw inside a map does (torch.func's names): independent per example, one for all, or an error
RANDOMNESS = ("different", "same", "error")


def vmap(fn, in_axes=0, out_axes=0, *, randomness="different", fallback_to_while_loop=True, warn=True):
    """``fn`` mapped over axis ``in_axes`` of its arguments (JAX's ``jax.vmap``, torch.func's
    ``vmap``): ``vmap(fn)(xs)[i] == fn(xs[i])``, computed once on the whole batch.

    ``in_axes``: an int (every argument's axis), None (not mapped: the same value for every
    example), or a tuple with one entry per argument, each an int, None, or a pytree prefix of that
    argument (dicts, lists, tuples of tensors).  ``out_axes``: where the examples go in each result
    (an int or a pytree prefix of the results).  An op with no batching rule runs as a loop over
    the examples with one :class:`VmapFallbackWarning` naming it (``warn=False``: silent,
    TensorFlow's ``warn``), or raises where ``fallback_to_while_loop=False``.  ``randomness``
    (torch.func's): the ``gt.random`` normal, truncated-normal and uniform draws inside are
    independent per example (``"different"``, as ``tf.vectorized_map`` draws), one draw shared by
    every example (``"same"``), or a ValueError (``"error"``)."""
    if randomness not in RANDOMNESS:
        raise ValueError(f"gt.vmap: randomness={randomness!r}; use one of {RANDOMNESS}")

    @functools.wraps(fn)
    def mapped(*args, **kwargs):
        if kwargs:
            # (JAX maps keyword arguments along axis 0, torch.func passes them unmapped: neither silently)
            raise TypeError(
                f"gt.vmap: keyword arguments {sorted(kwargs)} are neither mapped nor passed on (JAX maps them "
                "along axis 0, torch.func passes them unmapped); pass them by position with an in_axes entry "
                "each (0: mapped, None: the same for every example), or bind unmapped ones first: "
                "gt.vmap(functools.partial(fn, name=value))"
            )
        return _run(fn, args, in_axes, out_axes, fallback_to_while_loop, warn, "gt.vmap", randomness)

    return mapped


def vectorized_map(fn, elems, fallback_to_while_loop=True, warn=True):
    """TensorFlow's ``tf.vectorized_map``: ``fn`` applied to each example of ``elems`` (a tensor or a
    nested structure of tensors, unstacked along axis 0), the results stacked along axis 0; computed
    once on the whole batch (see :func:`vmap`); random draws inside are independent per example."""
    return _run(fn, (elems,), 0, 0, fallback_to_while_loop, warn, "gt.vectorized_map")


def _run(fn, args, in_axes, out_axes, allow, warn, where, randomness="different"):
    if not isinstance(in_axes, (list, tuple)):
        in_axes = (in_axes,) * len(args)
    if len(in_axes) != len(args):
        raise ValueError(f"{where}: in_axes has {len(in_axes)} entries for {len(args)} arguments")
    in_axes = tuple(in_axes)
    leaves, treedef = optree.tree_flatten(args, is_leaf=_is_leaf, none_is_leaf=True)
    axes = _broadcast_prefix(in_axes, args, "in_axes", treedef)
    mapped = []
    size = None
    for k, (leaf, axis) in enumerate(zip(leaves, axes)):
        if axis is None or leaf is None:  # (None: an empty subtree, as JAX's, whatever its axis)
            axes[k] = None
            continue
        t = leaves[k] = _as_tensor(leaf)
        if t.ndim == 0:
            raise ValueError(f"{where}: cannot map over axis {axis} of a scalar argument")
        axis = _axis(axis, t.ndim, where, f"in_axes maps argument leaf {k} (shape {tuple(t.shape)})")
        axes[k] = axis
        n = t.shape[axis]
        if size is None:
            size = n
        elif n != size:
            raise ValueError(
                f"{where}: the mapped arguments have different sizes along their mapped axes ({size} and {n}); "
                "every mapped argument must hold the same number of examples"
            )
        mapped.append(k)
    if size is None:
        raise ValueError(f"{where}: nothing to map over (every in_axes entry is None)")
    # inside a running map, this one maps over it (a level above): its arguments are taken in first
    base = innermost_map() or leaves[mapped[0]]._b
    bk = batching_backend(base)
    call = MapCall(bk, size, where, randomness)
    inner = list(leaves)
    for k, (leaf, axis) in enumerate(zip(leaves, axes)):
        if isinstance(leaf, Tensor) and leaf._b is not base:
            taken = lift(leaf, base)
            leaf = leaf if taken is None else taken
        if axis is not None:
            inner[k] = enter(leaf, axis, call)
        elif isinstance(leaf, Tensor):
            inner[k] = capture(leaf, call) if leaf._b is base else leaf
    inner_args = optree.tree_unflatten(treedef, inner)
    try:
        with fallback_policy(allow, warn, where), running_map(call):
            out = fn(*inner_args)
    except BatchedValueError as e:
        if not allow:
            raise
        if warn:
            warnings.warn(
                f"{where}: the mapped function cannot run batched ({e}); it runs as "
                f"a Python loop over the {size} examples (TensorFlow's fallback_to_while_loop)",
                VmapFallbackWarning,
                stacklevel=3,
            )
        return _loop(fn, leaves, axes, treedef, out_axes, size)
    return _results(out, out_axes, call, where)


def _results(out, out_axes, call, where):
    leaves, treedef = optree.tree_flatten(out, is_leaf=_is_leaf, none_is_leaf=True)
    axes = _broadcast_prefix(out_axes, out, "out_axes", treedef)
    res = []
    for leaf, axis in zip(leaves, axes):
        if leaf is None:
            res.append(None)
            continue
        t = _as_tensor(leaf) if not isinstance(leaf, Tensor) else leaf
        if axis is None:
            res.append(_unmapped(t, call, where))
            continue
        axis = _axis(
            axis, t.ndim + 1, where, f"out_axes puts the examples of a result (each of shape {tuple(t.shape)})"
        )
        if t._b is call.bk:
            res.append(exit_(t, axis, call))
        else:  # a result that does not depend on the mapped arguments: the same for every example
            shape = tuple(t.shape)
            res.append(broadcast_to(expand_dims(t, axis=axis), shape[:axis] + (call.size,) + shape[axis:]))
    return optree.tree_unflatten(treedef, res)


def _unmapped(t, call, where):
    """Result ``t`` with ``out_axes=None``: one value, as ``jax.vmap`` returns it, for a result that is the
    same for every example (it depends on no mapped argument); the examples' first value, recorded (a
    tape outside gets its gradient through it)."""
    if t._b is not call.bk:  # computed from no tensor of the map: returned as it is
        return t
    if t._v.bat:
        raise ValueError(
            f"{where}: out_axes=None for a result (each of shape {tuple(t.shape)}) that differs from example to "
            "example (it depends on a mapped argument; jax.vmap refuses it too); "
            "give it an axis in out_axes (0: the examples first)"
        )
    if not call.size:
        raise ValueError(
            f"{where}: out_axes=None for a result of a map over 0 examples: its value leaves the map through "
            "its examples (none here); map over at least one example, or compute that result outside the map"
        )
    return exit_(t, 0, call)[0]


def _loop(fn, leaves, axes, treedef, out_axes, size):
    """The whole function called once per example (recorded: tapes outside see through it)."""
    if not size:
        raise ValueError(
            "gt.vmap: the mapped function cannot run batched (it runs as a loop over the examples), and with 0 "
            "examples there is no call to give its results' structure and shapes; skip the map for an empty "
            "batch, or write the function without Python control flow on the examples' values"
        )
    outs = []
    for i in range(size):
        ex = [leaf if axis is None else leaf[(slice(None),) * axis + (i,)] for leaf, axis in zip(leaves, axes)]
        outs.append(fn(*optree.tree_unflatten(treedef, ex)))
    flat = [optree.tree_flatten(o, is_leaf=_is_leaf, none_is_leaf=True) for o in outs]
    tdef = flat[0][1]
    oaxes = _broadcast_prefix(out_axes, outs[0], "out_axes")
    res = []
    for j, axis in enumerate(oaxes):
        if flat[0][0][j] is None:
            res.append(None)
            continue
        parts = [_as_tensor(f[0][j]) for f in flat]
        if axis is None:
            res.append(_same_for_all(parts))
            continue
        what = f"out_axes puts the examples of a result (each of shape {tuple(parts[0].shape)})"
        res.append(stack(parts, axis=_axis(axis, parts[0].ndim + 1, "gt.vmap", what)))
    return optree.tree_unflatten(tdef, res)


def _same_for_all(parts):
    """A result with ``out_axes=None`` of the loop over the examples: the first example's, where every
    example's is the same value (else the error JAX gives for a result that differs)."""
    first = parts[0].numpy()
    for p in parts[1:]:
        if not np.array_equal(p.numpy(), first, equal_nan=first.dtype.kind in "fc"):
            raise ValueError(
                f"gt.vmap: out_axes=None for a result (each of shape {tuple(parts[0].shape)}) that differs from "
                "example to example (jax.vmap refuses it too); give it an axis in out_axes (0: the examples first)"
            )
    return parts[0]
