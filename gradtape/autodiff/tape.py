"""``GradientTape``: the context that records, and ``gradient`` / ``jacobian`` / ``batch_jacobian``.

What a tape records and the backward walk are the engine's (:mod:`gradtape.core.engine`); this module
is the user's side of it, as ``tf.GradientTape``.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any, Literal, TypeVar, overload

import optree

from gradtape.core.engine import Node, UnconnectedGradients, Recording, backward
from gradtape.backends.batching import per_example_sources
from gradtape.autodiff.jacobian import batch_jacobian, check_args, check_batch_args, jacobian
from gradtape.core.recording_state import ACTIVE_TAPES, active_tapes_lock, per_thread
from gradtape.core.tensor import Nested, Tensor, Variable
from gradtape.ops.creation import zeros_like
from gradtape.ops.operators import REPLACED

__all__ = ["GradientTape", "UnconnectedGradients", "Node"]

_T = TypeVar("_T", bound=Tensor)


def _flatten(structure, what):
    leaves, treespec = optree.tree_flatten(structure, none_is_leaf=True)
    return leaves, treespec


def _type_name(obj):
    """The full name of ``obj``'s type (``torch.Tensor``, ``numpy.ndarray``; ``float`` for builtins),
    so that another library's ``Tensor`` is not mistaken for gradtape's."""
    t = type(obj)
    mod = t.__module__
    return t.__qualname__ if mod in ("builtins", None) else f"{mod}.{t.__qualname__}"


def _short_repr(obj, limit=60):
    r = " ".join(repr(obj).split())
    return r if len(r) <= limit else r[: limit - 3] + "..."


def _check_unconnected(u):
    if isinstance(u, UnconnectedGradients):
        return u
    try:
        return UnconnectedGradients(u)
    except ValueError:
        raise ValueError(
            f"Unknown value for unconnected_gradients: {u!r}; use "
            "gt.UnconnectedGradients.NONE / .ZERO or 'none' / 'zero'"
        ) from None


class GradientTape:
    """Record operations for automatic differentiation (as ``tf.GradientTape``).

    Ops run inside the context are recorded when one of their inputs is watched; trainable
    variables read inside it are watched automatically unless ``watch_accessed_variables=False``.
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        self._persistent = bool(persistent)
        self._watch_accessed_variables = bool(watch_accessed_variables)
        self._rec: Recording | None = None
        self._recording = False
        self._stack: list[Any] | None = None  # the tape stack (one thread's ``per_thread.tapes``) it records on
        self._used = False
        self._entered = False  # set by the first push: a tape never entered recorded nothing
        self._warned_inside = False
        self._watched_after_release: tuple[Variable, ...] = ()

    # ------------------------------------------------------------------ context
    def __enter__(self) -> GradientTape:
        self._push()
        return self

    def __exit__(self, typ: object, value: object, traceback: object) -> None:
        if self._recording:
            self._pop()

    def _ensure(self) -> Recording:
        if self._rec is None:
            self._rec = Recording(self._watch_accessed_variables)
        return self._rec

    def _push(self, stack=None):
        """Start recording on ``stack`` (default: this thread's tape stack)."""
        if self._recording:
            raise ValueError("Tape is still recording; this can happen if you try to re-enter an already-active tape")
        if stack is None:
            stack = per_thread.tapes
        rec = self._ensure()
        with active_tapes_lock:  # another thread may be taking a tape off this stack
            stack.append(rec)
            ACTIVE_TAPES[0] += 1
        self._stack = stack
        self._recording = True
        self._entered = True

    def _pop(self):
        """Stop recording: off the stack it was pushed on, whichever thread calls (a tape exited,
        reset or used from another thread must not keep recording on its own)."""
        stack = self._stack
        rec = self._rec
        if stack is not None:
            with active_tapes_lock:
                for k in range(len(stack) - 1, -1, -1):
                    if stack[k] is rec:
                        del stack[k]
                        ACTIVE_TAPES[0] -= 1
                        break
        self._stack = None
        self._recording = False
        return stack

    # ------------------------------------------------------------------ watching
    def watch(self, tensor: Nested) -> None:
        """Ensure ``tensor`` (a Tensor, Variable or nested structure of them) is traced by this tape."""
        leaves, _ = _flatten(tensor, "watch")
        rec = self._ensure()
        for t in leaves:
            if not isinstance(t, Tensor):
                raise ValueError(
                    f"GradientTape.watch: got an object of type {_type_name(t)} ({_short_repr(t)}), not a "
                    "gt.Tensor or gt.Variable; convert it first with gt.constant(x) or gt.asarray(x) (or make "
                    "it trainable with gt.Variable(x)) and compute with the converted tensor"
                )
            if not t.dtype.differentiable:
                warnings.warn(
                    f"The dtype of the watched tensor must be floating (e.g. gt.float32), "
                    f"got {t.dtype}; its gradients will be None",
                    UserWarning,
                    stacklevel=2,
                )
                continue
            if t._is_var:
                rec.watch_variable(t)
            else:
                rec.watch_id(t._id)

    def watched_variables(self) -> tuple[Variable, ...]:
        """Variables watched by this tape, in order of construction."""
        if self._rec is None:
            return self._watched_after_release
        return tuple(v for _, v in sorted(self._rec.variables.items()))

    # ------------------------------------------------------------------ control
    def reset(self) -> None:
        """Clear everything recorded; the tape stays in its context (as exit and re-enter)."""
        stack = self._pop() if self._recording else None
        self._rec = None
        self._used = False
        if stack is not None:
            self._push(stack)

    @contextlib.contextmanager
    def stop_recording(self) -> Iterator[None]:
        """Temporarily stop recording operations on this tape."""
        if not self._recording:
            raise RuntimeError(
                "Trying to stop recording a tape which is not recording; call stop_recording() inside the "
                "tape's `with` block"
            )
        stack = self._pop()
        try:
            yield
        finally:
            self._push(stack)

    # ------------------------------------------------------------------ gradients
    def _begin(self, what: str) -> Recording:
        if not self._entered:  # TensorFlow raises a RuntimeError too
            raise RuntimeError(
                f"GradientTape.{what}: this tape was never entered, so it recorded nothing; compute the "
                "target inside its `with gt.GradientTape() as tape:` block"
            )
        if self._rec is None and not self._persistent and self._used:
            raise RuntimeError(
                f"A non-persistent GradientTape can only be used to compute one set of "
                f"gradients (or jacobians); create the tape with persistent=True to call "
                f"{what}() more than once"
            )
        if self._used and not self._persistent:
            raise RuntimeError(
                "A non-persistent GradientTape can only be used to compute one set of gradients (or jacobians); "
                f"create the tape with persistent=True to call {what}() more than once"
            )
        if self._recording:
            if not self._persistent:
                self._pop()
            elif not self._warned_inside:
                self._warned_inside = True
                warnings.warn(
                    f"Calling GradientTape.{what} on a persistent tape inside its context is "
                    "significantly less efficient than calling it outside the context (it "
                    "causes the gradient ops to be recorded on the tape, leading to increased "
                    "CPU and memory usage). Only call GradientTape.gradient inside the "
                    "context if you actually want to trace the gradient in order to compute "
                    "higher order derivatives.",
                    UserWarning,
                    stacklevel=3,
                )
        self._used = True
        return self._ensure()

    def _release(self) -> None:
        if not self._persistent:
            self._watched_after_release = self.watched_variables()
            self._rec = None

    @overload
    def gradient(
        self,
        target: Nested,
        sources: Tensor,
        output_gradients: Nested = None,
        unconnected_gradients: UnconnectedGradients | Literal["none", "zero"] = ...,
    ) -> Tensor | None: ...
    @overload
    def gradient(
        self,
        target: Nested,
        sources: list[_T],
        output_gradients: Nested = None,
        unconnected_gradients: UnconnectedGradients | Literal["none", "zero"] = ...,
    ) -> list[Tensor | None]: ...
    @overload
    def gradient(
        self,
        target: Nested,
        sources: tuple[_T, ...],
        output_gradients: Nested = None,
        unconnected_gradients: UnconnectedGradients | Literal["none", "zero"] = ...,
    ) -> tuple[Tensor | None, ...]: ...
    @overload
    def gradient(
        self,
        target: Nested,
        sources: Nested,
        output_gradients: Nested = None,
        unconnected_gradients: UnconnectedGradients | Literal["none", "zero"] = ...,
    ) -> Nested: ...
    def gradient(
        self,
        target: Nested,
        sources: Nested,
        output_gradients: Nested = None,
        unconnected_gradients: UnconnectedGradients | Literal["none", "zero"] = UnconnectedGradients.NONE,
    ) -> Nested:
        """Gradient of ``target`` (a tensor or nested structure; several are summed) with respect
        to ``sources``, in the structure of ``sources``."""
        if target is None:
            raise TypeError(
                "Argument `target` should be a list or nested structure of Tensors or "
                "Variables to be differentiated, but received None."
            )
        unconnected = _check_unconnected(unconnected_gradients)
        src, spec = _flatten(sources, "sources")
        for s in src:
            if not isinstance(s, Tensor):
                raise ValueError(
                    f"GradientTape.gradient: sources must be Tensors or Variables, got "
                    f"{_type_name(s)} {_short_repr(s)}; differentiate with respect to tensors the "
                    "tape watches (gt.constant(x) / gt.asarray(x) converts an array, gt.Variable(x) "
                    "makes a trainable one)"
                )
        rec = self._begin("gradient")
        try:
            targets, _ = _flatten(target, "target")
            tgrads = None
            if output_gradients is not None:
                tgrads, _ = _flatten(output_gradients, "output_gradients")
                if len(tgrads) != len(targets):
                    raise ValueError(
                        f"output_gradients has {len(tgrads)} entries but there are "
                        f"{len(targets)} targets; give one per target, in the same structure"
                    )
            src = per_example_sources(src, rec.nodes)
            renewed = REPLACED.get(rec)
            if renewed and any(s._id in renewed for s in src):
                grads = backward(rec, targets, tgrads, src, UnconnectedGradients.NONE, consume=not self._persistent)
                grads = _explain_renewed(src, grads, renewed, unconnected)
            else:
                grads = backward(rec, targets, tgrads, src, unconnected, consume=not self._persistent)
        finally:
            self._release()
        return optree.tree_unflatten(spec, grads)

    def jacobian(
        self,
        target: Nested,
        sources: Nested,
        unconnected_gradients: UnconnectedGradients | Literal["none", "zero"] = UnconnectedGradients.NONE,
        parallel_iterations: int | None = None,
        experimental_use_pfor: bool = True,
    ) -> Nested:
        """Jacobian of ``target`` with respect to each source: shape ``target.shape + source.shape``."""
        if not experimental_use_pfor and not self._persistent:
            raise RuntimeError(
                "GradientTape must be created with persistent=True to compute the "
                "jacobian with experimental_use_pfor=False."
            )
        unconnected = _check_unconnected(unconnected_gradients)
        check_args("jacobian", target, sources)
        rec = self._begin("jacobian")
        try:
            return jacobian(rec, target, sources, unconnected)
        finally:
            self._release()

    def batch_jacobian(
        self,
        target: Tensor,
        source: Tensor,
        unconnected_gradients: UnconnectedGradients | Literal["none", "zero"] = UnconnectedGradients.NONE,
        parallel_iterations: int | None = None,
        experimental_use_pfor: bool = True,
    ) -> Tensor:
        """Per-example jacobians: ``[b, y1..yn, x1..xm]`` for target ``[b, y...]``, source ``[b, x...]``."""
        if not experimental_use_pfor and not self._persistent:
            raise RuntimeError(
                "GradientTape must be created with persistent=True to compute the "
                "batch jacobian with experimental_use_pfor=False."
            )
        unconnected = _check_unconnected(unconnected_gradients)
        check_batch_args(target, source)
        rec = self._begin("batch_jacobian")
        try:
            return batch_jacobian(rec, target, source, unconnected)
        finally:
            self._release()


def _explain_renewed(sources, grads, renewed, unconnected):
    """Gradients with respect to sources that an in-place update renewed after the tape watched them
    (``x[0] = 5``, ``x += 1``: a recorded functional update, as TensorFlow rebinds ``x``): where one
    is None, the target was computed from the value before the update, which TensorFlow's tape would
    also answer None for, silently; here a warning says why and what to do (then the ``"zero"`` fill)."""
    out = []
    for i, (s, g) in enumerate(zip(sources, grads)):
        if g is None and s._id in renewed:
            what, site = renewed[s._id]
            warnings.warn(
                f"GradientTape.gradient: source {i} (shape {s.shape}, {s.dtype}) was changed by {what} at "
                f"{site} after the tape watched it; an update makes a new tensor on the tape, and the target "
                "does not depend on the new value, so its gradient is None. To differentiate with respect to "
                "the value before the update, keep it under its own name and update a copy "
                "(x0 = x; x = gt.identity(x0); x[0] = ...), then ask for the gradient with respect to x0",
                UserWarning,
                stacklevel=3,
            )
            if unconnected is UnconnectedGradients.ZERO:
                g = zeros_like(s)
        out.append(g)
    return out
