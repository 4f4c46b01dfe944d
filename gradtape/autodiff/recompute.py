"""``gt.recompute_grad`` (``tf.recompute_grad``; JAX's ``jax.checkpoint``): trade compute for memory.

``recompute_grad(f)(*args)`` runs ``f`` without recording its inside: a tape records one node for the
whole call (a :func:`~gradtape.autodiff.custom_gradient.custom_gradient` node), which keeps ``f``'s
inputs, the variables it read and its outputs, and nothing ``f`` computed on the way.  Its backward
recomputes ``f`` under a fresh tape and takes the vector-Jacobian product of that recording: the one
backward walk, run on the recomputation.  Whatever tapes record the backward (higher order) record the
recomputation and its walk as they would any code, so derivatives of any order come out.

Two things of the forward are kept for the recomputation, so that it computes what the forward did:

* **random draws**: every draw of ``gt.random`` made inside ``f`` (the global generator, a
  ``gt.random.Generator``, an op seed) is seen (``gradtape.ops.random.draw_observer``): the forward
  records each stream's state before its draw, and the recomputation draws from those states, so it
  gets the same numbers (and the generators are not advanced a second time).  Under ``gt.function`` a
  draw inside ``f`` is an error: the program draws its random inputs afresh on every call and cannot
  give the recomputation the forward's;
* **what the policy saves**: ``policy`` (JAX's ``checkpoint_policies``) names the ops whose outputs the
  forward keeps; the recomputation takes those outputs instead of computing them again (the op's
  forward is skipped; the op is still recorded, so its rule runs).  Default: nothing is saved.

The saved outputs are handed back in the order the forward computed them, each checked against the
op's name and input shapes; a recomputation that computes other ops, or draws other numbers, than the
forward did raises, naming ``recompute_grad``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import optree

from gradtape.autodiff.custom_gradient import custom_gradient_unrecorded
from gradtape.autodiff.tape import GradientTape
from gradtape.core.recording_state import active_context, per_thread
from gradtape.core.registry import OpDef, get_op, ops
from gradtape.core.tensor import Tensor
from gradtape.ops.random import Stream, draw_observer

__all__ = ["CheckpointPolicy", "checkpoint_policies", "recompute_grad"]


# ------------------------------------------------------------------------------------------ policies
class CheckpointPolicy:
    """Which ops' outputs the forward of a :func:`recompute_grad` call saves for its recomputation:
    ``saves(op_name) -> bool``."""

    def __init__(self, name: str, saves: Callable[[str], bool]) -> None:
        self.name = name
        self.saves = saves
        self._ops: tuple[OpDef, ...] = ()
        self._names: frozenset[str] = frozenset()
        self._seen = -1  # the number of registered ops when _ops was read

    def ops(self) -> tuple[OpDef, ...]:
        """The registered ops this policy saves (read again when an op is registered)."""
        registered = ops()
        if len(registered) != self._seen:
            self._ops = tuple(op for op in registered if op.forward is not None and self.saves(op.name))
            self._names = frozenset(op.name for op in self._ops)
            self._seen = len(registered)
        return self._ops

    def names(self) -> frozenset[str]:
        """The names of :meth:`ops`."""
        self.ops()
        return self._names

    def __repr__(self) -> str:
        return f"<checkpoint policy {self.name}>"


#: the ops whose outputs are matrix products: what ``save_matmul_outputs`` keeps
MATMUL_OPS = frozenset({"matmul", "tensordot", "vecdot", "einsum"})


class _Policies:
    """``gt.checkpoint_policies``: the policies of ``recompute_grad(f, policy=...)`` (JAX's names)."""

    nothing_saveable = CheckpointPolicy("nothing_saveable", lambda name: False)
    everything_saveable = CheckpointPolicy("everything_saveable", lambda name: True)
    save_matmul_outputs = CheckpointPolicy("save_matmul_outputs", lambda name: name in MATMUL_OPS)
    dots_saveable = save_matmul_outputs  # (JAX's name)

    @staticmethod
    def save_ops(*names: str) -> CheckpointPolicy:
        """A policy saving the outputs of the ops named (``"matmul"``, ``"tanh"``...)."""
        for n in names:
            get_op(n)  # (an unknown name raises here, naming it)
        wanted = frozenset(names)
        return CheckpointPolicy(f"save_ops{tuple(sorted(wanted))}", lambda name: name in wanted)


checkpoint_policies = _Policies()


def _as_policy(policy):
    if policy is None:
        return checkpoint_policies.nothing_saveable
    if isinstance(policy, CheckpointPolicy):
        return policy
    if callable(policy):
        return CheckpointPolicy(getattr(policy, "__name__", repr(policy)), policy)
    raise TypeError(
        "recompute_grad: policy must be None, a gt.checkpoint_policies policy or a callable "
        f"policy(op_name) -> bool, got {type(policy).__name__}"
    )


# ------------------------------------------------------------------------- the running call's state
class _Local(threading.local):
    session = None  # the innermost running recompute_grad call of this thread (its forward or recomputation)


_local = _Local()
_install_lock = threading.Lock()


class _Session:
    """One ``recompute_grad`` call: what its forward saved (op outputs, stream states) and where its
    recomputation stands."""

    __slots__ = ("where", "policy", "saved", "states", "replaying", "pos", "draw_pos", "inside", "outer", "outer_obs")

    def __init__(self, where, policy):
        self.where = where
        self.policy = policy.names()
        self.saved = []  # (op name, input shapes, native output)
        self.states = []  # the stream's state before each draw
        self.replaying = self.inside = False
        self.pos = self.draw_pos = 0

    def __enter__(self):
        self.outer, _local.session = _local.session, self
        self.outer_obs, draw_observer.current = draw_observer.current, self
        self.pos = self.draw_pos = 0
        return self

    def __exit__(self, *exc):
        _local.session = self.outer
        draw_observer.current = self.outer_obs
        self.outer = self.outer_obs = None
        if exc[0] is None and self.replaying:
            if self.pos != len(self.saved) or self.draw_pos != len(self.states):
                raise ValueError(
                    f"recompute_grad({self.where}): the recomputation computed {self.pos} of the "
                    f"{len(self.saved)} saved op outputs and drew {self.draw_pos} of the {len(self.states)} "
                    "random draws of the forward: the function must compute the same thing every call"
                )

    # the draws of gt.random, seen through gradtape.ops.random.draw_observer
    def draw(self, stream, method, args):
        if active_context() is not None:
            raise NotImplementedError(
                f"recompute_grad({self.where}): a random draw ({method}) inside the recomputed function under "
                "gt.function: the program draws its random numbers afresh on every call and cannot give the "
                "recomputation the forward's. Draw them outside the function and pass them in as an argument"
            )
        if not self.replaying:
            self.states.append(stream.gen.bit_generator.state)
            return getattr(stream, method)(*args)
        if self.draw_pos >= len(self.states):
            raise ValueError(
                f"recompute_grad({self.where}): the recomputation draws more random numbers than the forward "
                f"({len(self.states)} draws): the function must draw the same numbers every call"
            )
        replay = Stream(None)
        replay.gen.bit_generator.state = self.states[self.draw_pos]
        self.draw_pos += 1
        return getattr(replay, method)(*args)

    # the saved op outputs, through the wrappers of _install
    def forward(self, name, impl, arrays, attrs):
        if self.inside:  # (a wrapped forward calling another: gt.function's, the real backend's)
            return impl(*arrays, **attrs)
        if not self.replaying:
            self.inside = True
            try:
                out = impl(*arrays, **attrs)
            finally:
                self.inside = False
            self.saved.append((name, tuple(tuple(a.shape) for a in arrays if hasattr(a, "shape")), out))
            return out
        shapes = tuple(tuple(a.shape) for a in arrays if hasattr(a, "shape"))
        if self.pos >= len(self.saved) or self.saved[self.pos][:2] != (name, shapes):
            want = self.saved[self.pos][:2] if self.pos < len(self.saved) else "nothing more"
            raise ValueError(
                f"recompute_grad({self.where}): the recomputation computes {name} of shapes {shapes} where the "
                f"forward computed {want}: the function must compute the same ops every call"
            )
        out = self.saved[self.pos][2]
        self.pos += 1
        return out


def _wrapped(op, impl):
    """``impl`` (op's native forward on one backend) as the running recompute_grad call of this thread
    sees it: saved in its forward, taken back in its recomputation, where its policy names the op;
    called as it is everywhere else."""
    name = op.name

    def forward(*arrays, **attrs):
        s = _local.session
        if s is None or name not in s.policy:
            return impl(*arrays, **attrs)
        return s.forward(name, impl, arrays, attrs)

    forward.recompute_wrapper = True
    forward.__wrapped__ = impl
    return forward


def _install(policy, backends):
    """The forwards of the ops ``policy`` saves, wrapped (once; they stay, and pass through outside a
    recompute_grad call) on ``backends``."""
    for op in policy.ops():
        for b in backends:
            impl = op.impls.get(b)
            if impl is None or not getattr(impl, "recompute_wrapper", False):
                with _install_lock:
                    try:
                        impl = op.impls.get(b) or op.resolve(b)
                    except NotImplementedError:  # (an op this backend lacks: never called on it)
                        continue
                    if not getattr(impl, "recompute_wrapper", False):
                        op.impls[b] = _wrapped(op, impl)


# ---------------------------------------------------------------------------------- recompute_grad
def recompute_grad(f: Callable[..., Any] | None = None, policy: Any = None) -> Callable[..., Any]:
    """``f`` whose intermediate results are recomputed in the backward instead of kept (as
    ``tf.recompute_grad``; ``jax.checkpoint``).  A tape records one node for a call: ``f``'s inputs,
    the variables it reads and its outputs; the backward runs ``f`` again under a fresh tape and
    differentiates that recording, so gradients (of every order, of the inputs and of the variables
    ``f`` reads) are those of ``f`` itself.  Random draws inside ``f`` are replayed (the same numbers).
    ``policy``: which ops' outputs to save rather than recompute -- ``gt.checkpoint_policies.
    nothing_saveable`` (the default), ``save_matmul_outputs``, ``everything_saveable``,
    ``save_ops("matmul", ...)``, or a callable ``policy(op_name) -> bool``.  Usable as a decorator,
    with or without arguments."""
    if f is None:
        return lambda g: recompute_grad(g, policy=policy)
    if not callable(f):
        raise TypeError(f"recompute_grad: f must be callable, got {type(f).__name__}")
    pol = _as_policy(policy)
    where = getattr(f, "__qualname__", None) or repr(f)

    @custom_gradient_unrecorded
    def checkpointed(call, *tensors):
        # ``call(tensors)``: f on its arguments with these tensors at their places (the inputs of the
        # node: every tensor of the arguments, in dicts, lists and tuples and keywords too)
        session = _Session(where, pol)
        if session.policy:
            _install(pol, {t._b for t in tensors})
        with session:
            y = call(tensors)

        def grad_fn(*dys, variables=None):
            session.replaying = True
            with GradientTape() as tape:
                tape.watch(tensors)
                with session:
                    y2 = call(tensors)
            sources = list(tensors) + list(variables or [])
            grads = tape.gradient(optree.tree_leaves(y2, none_is_leaf=True), sources, output_gradients=list(dys))
            grads = list(grads)
            if variables is None:
                return grads[: len(tensors)]
            return grads[: len(tensors)], grads[len(tensors) :]

        return y, grad_fn

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        if not per_thread.tapes:  # nothing records: f itself, nothing kept
            return f(*args, **kwargs)
        # (only the top-level tensors were the node's inputs: one in a dict, a tuple or a keyword got no
        # gradient, silently -- jax.checkpoint and torch's checkpoint take any nesting)
        leaves, treedef = optree.tree_flatten((args, kwargs), none_is_leaf=True)
        at = [k for k, a in enumerate(leaves) if isinstance(a, Tensor)]

        def call(tensors):
            for k, t in zip(at, tensors):
                leaves[k] = t
            a, kw = optree.tree_unflatten(treedef, leaves)
            return f(*a, **kw)

        return checkpointed(call, *[leaves[k] for k in at])

    wrapper.policy = pol  # type: ignore[attr-defined]
    return wrapper
