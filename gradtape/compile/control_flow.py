"""``gt.cond`` and ``gt.while_loop`` inside ``gt.function``: one structured step each.

Each branch (or the loop's predicate and body) runs once, eagerly, in a *sub-trace*
(:class:`gradtape.backends.tracing.Trace` with a parent): a value it reads from outside becomes an input of the
sub-program (a capture), and its ops are recorded on a private tape that watches what the enclosing
tapes watch.  The sub-programs become callables of one step of the enclosing program, run by the
backend's hooks (:meth:`Backend.cond`, :meth:`Backend.while_loop`, :meth:`Backend.loop_forward`,
:meth:`Backend.loop_backward`): ``lax.cond`` / ``lax.while_loop`` / ``lax.scan`` on JAX, Python control
flow in a replayed program.

Gradients: where an enclosing tape records, the branch's vector-Jacobian product is traced too (the
private tape's backward walk, with the cotangents as inputs), and the step is recorded on the tapes
as one node whose rule is a second structured step: a cond of the branches' VJPs, or a reverse loop
over the saved carries.  A cond recomputes its branch's forward inside the VJP; a loop saves every
carry (as ``tf.while_loop`` and ``lax.scan`` do).

What cannot be one step -- a branch that assigns a variable, draws random numbers or creates a
variable, branches of different structures, a higher-order gradient, a reverse-differentiated loop
without ``maximum_iterations`` on a compiler that needs static shapes -- raises
:class:`NotLowerable`: that construct's predicate becomes a guard of the program (one path per
trace), or, where the branch already acted on a tape or the gradient is of higher order, the whole
function is traced again with guards.
"""

from __future__ import annotations

import contextlib

import warnings

import numpy as np
import optree

from gradtape.core import dtypes as _dt
from gradtape.core.engine import TensorOp, UnconnectedGradients, Recording, backward, make_node
from gradtape.core.recording_state import per_thread, recording_context
from gradtape.backends.tracing import QUIET, NotLowerable, Trace
from gradtape.core.registry import OpDef
from gradtape.core.tensor import LIVE_VARIABLES, Tensor, wrap, convert_to_tensor, lift

__all__ = ["lowered_cond", "lowered_while"]


class _Source:
    """A source of a sub-trace's backward walk: a recorded identity (what the walk reads of it)."""

    __slots__ = ("_id", "dtype", "_b")

    def __init__(self, i, b):
        self._id = i
        self.dtype = _dt.float64  # (only ``dtype.differentiable`` is read)
        self._b = b


def _private_recording():
    """A recording of a sub-trace's own, watching what the enclosing tapes watch (its VJP is traced
    from it); None where no tape records."""
    outer = list(per_thread.tapes)
    if not outer:
        return None
    private = Recording(any(r.watch_accessed for r in outer))
    for r in outer:
        private.watched |= r.watched
    private.roots = set(private.watched)
    return private


def _tape_sizes(tapes):
    return [(r, len(r.nodes), len(r.watched), len(r.variables)) for r in tapes]


class _Sub:
    """One branch or loop body, run once on stand-ins (see the module docstring)."""

    def __init__(self, trace, what):
        self.st = Trace(f"{trace.name}/{what}", trace.backend, parent=trace)
        self.what = what
        self.tree = None
        self.outs = []  # the output Tensors
        self.natives = []  # their stand-ins in the sub-trace
        self.carry = []  # loop bodies: the carried variables' Tensors
        self.grads = {}  # recorded identity -> its gradient's stand-in (None: unconnected)
        self.caps = []  # the enclosing tapes' identities the sub-program reads differentiably
        self.variables = {}

    def run(self, fn, carry_values=(), grad=True, quiet=False):
        """Run ``fn(*carry)`` in the sub-trace (``carry_values``: concrete values of the carried
        variables, each an input); with ``grad`` and an enclosing tape, trace its VJP too."""
        private = _private_recording() if grad else None
        saved_tapes = per_thread.tapes
        tapes_before = _tape_sizes(saved_tapes)
        saved_context = recording_context[0]
        before = [(v, v._v) for v in list(LIVE_VARIABLES) if v._b.stand_ins]
        recording_context[0] = self.st
        per_thread.tapes = [private] if private is not None else []
        try:
            with np.errstate(all="ignore") if quiet else contextlib.nullcontext():
                self._run_body(fn, carry_values, private)
        except NotLowerable as e:
            error = e
        except Exception as e:
            # (the eager run that follows, with guards, raises it where the user's code does)
            error = NotLowerable(f"{self.what} raised {type(e).__name__}: {e}")
            error.__cause__ = e
        else:
            error = None
        finally:
            recording_context[0] = saved_context
            per_thread.tapes = saved_tapes
            changed = [v for v, value in before if v._v is not value]
            for v, value in before:
                v._v = value
        if error is None and changed:
            error = NotLowerable(f"{self.what} assigns gt.Variable {changed[0].name!r}")
        if _tape_sizes(saved_tapes) != tapes_before:
            # a tape reset, watched or exited inside: done already, for a branch that may not be
            # taken; only a new trace of the whole function, with guards, undoes it
            error = error or NotLowerable(f"{self.what} changes a GradientTape (reset, watch, ...) of the function")
            error.dirty = True
        if error is not None:
            raise error
        return self

    def _run_body(self, fn, carry_values, private):
        """``fn`` called on the carried variables' stand-ins; its outputs kept (as Tensors of the
        sub-trace), and its VJP traced where ``private`` records."""
        st = self.st
        tb = st.backend
        self.carry = [wrap(st.input(c, "carry", k), tb) for k, c in enumerate(carry_values)]
        if private is not None:
            for t in self.carry:
                if t.dtype.differentiable:
                    private.watch_id(t._id)
        out = fn(*self.carry)
        leaves, self.tree = optree.tree_flatten(out, none_is_leaf=True)
        for y in leaves:
            if not isinstance(y, Tensor):
                if y is None:
                    raise NotLowerable(f"{self.what} returned None")
                y = convert_to_tensor(y)
            if y._b is not tb:
                y = lift(y, tb)
                if y is None:
                    raise NotLowerable(f"{self.what} returned a tensor of another backend")
            if private is not None and y._is_var and y._trainable and private.watch_accessed:
                private.watch_variable(y)  # (a variable returned as it is is read, as in TensorFlow)
            self.outs.append(y)
            self.natives.append(st._localize(y._v))
        if private is not None:
            self._vjp(private, tb)

    def _vjp(self, private, tb):
        """The sub-program's gradient: with the cotangents of its floating outputs as inputs, the
        gradients of the enclosing tapes' identities it reads (and of its carried variables)."""
        st = self.st
        produced = set()
        caps = []
        for n in private.nodes:
            for i in n.in_ids:
                if i and i not in produced and i in private.roots and i not in caps:
                    caps.append(i)
            produced.update(n.out_ids)
        carry_ids = {t._id for t in self.carry}
        for y in self.outs:  # an outer tensor returned as it is
            if y._id in private.roots and y._id not in produced and y._id not in caps:
                caps.append(y._id)
        self.caps = [i for i in caps if i not in carry_ids]
        self.variables = dict(private.variables)
        targets = [y for y in self.outs if y.dtype.differentiable]
        real = tb.real
        dys = [wrap(st.input(real.xp.ones_like(y._v.c), "cotangent", k), tb) for k, y in enumerate(targets)]
        sources = [t for t in self.carry if t.dtype.differentiable] + [_Source(i, tb) for i in self.caps]
        if not targets or not sources:
            return
        per_thread.tapes = []  # (a native walk: its steps are the sub-program's)
        grads = backward(private, targets, dys, sources, UnconnectedGradients.NONE)
        for s, g in zip(sources, grads):
            self.grads[s._id] = None if g is None else st._localize(g._v)

    def zeros(self, like):
        """A zero stand-in of the sub-trace shaped and typed as concrete array ``like``."""
        real = self.st.backend.real
        return self.st.call(
            real.xp.zeros, (tuple(like.shape),), {"dtype": like.dtype, "device": real.device_of(like)}, label="zeros"
        )

    def program(self, outputs, operands, extra_kinds=(), host_effects=True):
        """The sub-program of ``outputs`` as a function of ``(*operands, *extras)``: ``operands``
        (a dict, enclosing slot -> position) for its captures, the inputs of ``extra_kinds`` after
        them in that order.  Checked: replayed on the sub-trace's inputs it gives its values."""
        st = self.st
        prog, _, used = st.program(outputs, host_effects=host_effects)
        n = len(operands)
        offsets = {}
        for kind in extra_kinds:
            offsets[kind] = n
            n += sum(1 for _, k, _ in st.inputs if k == kind)
        pos = []
        for _, kind, what in used:
            if kind == "capture":
                pos.append(operands[what.slot])
            else:
                pos.append(offsets[kind] + what)
        real = st.backend.real
        QUIET[0] += 1  # (a gt.print in it prints when the program runs, not when it is checked)
        # (a branch not taken computes on values it never sees: quiet, also where a lazy backend computes
        # in its own threads, when the values are read below -- NumPy's errstate is per thread)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                res = prog(*[st.values[s] for s, _, _ in used])[0]
                real.effects_barrier()
            finally:
                QUIET[0] -= 1
            pairs = [(np.asarray(real.to_numpy(got)), np.asarray(real.to_numpy(a.c))) for got, a in zip(res, outputs)]
        for g, e in pairs:
            if g.shape != e.shape or not np.array_equal(g, e, equal_nan=g.dtype.kind in "fc"):
                raise NotLowerable(f"the sub-program of {self.what} does not reproduce its values")

        def sub(*args):
            return prog(*[args[p] for p in pos])[0]

        sub.__name__ = self.what.replace(" ", "_")
        sub.host_effects = host_effects and st.host_effects  # (it prints: run it only where it runs)
        return sub


def _operand_list(subs):
    """The captures of ``subs``, merged: (enclosing slot -> operand position, the enclosing
    stand-ins in that order)."""
    operands = {}
    values = []
    for s in subs:
        for _, kind, what in s.st.inputs:
            if kind == "capture" and what.slot not in operands:
                operands[what.slot] = len(values)
                values.append(what)
    return operands, values


def _same_outputs(a, b, what):
    if a.tree != b.tree:
        raise NotLowerable(f"{what}: the two return different structures ({a.tree} and {b.tree})")
    for x, y in zip(a.natives, b.natives):
        if tuple(x.shape) != tuple(y.shape) or x.dtype != y.dtype:
            raise NotLowerable(f"{what}: outputs of shapes {tuple(x.shape)} and {tuple(y.shape)} / dtypes differ")


def _record(trace, name, in_ids, outs, rule, variables):
    """One node on every enclosing tape that watches one of ``in_ids`` (the variables the
    sub-programs read are watched first, where the tape watches on access)."""
    tapes = per_thread.tapes
    for rec in tapes:
        if rec.watch_accessed:
            for v in variables.values():
                rec.watch_variable(v)
    tb = trace.backend
    out_ids = tuple(o._id if o.dtype.differentiable else 0 for o in outs)
    if not any(out_ids) or not in_ids:
        return
    op = OpDef(name, grad=rule, rule_form="xp", nout=len(outs), differentiable=True)
    node = make_node(op, tuple(in_ids), (None,) * len(in_ids), None, out_ids, tuple(o._v for o in outs), tb)
    for rec in tapes:
        w = rec.watched
        if any(i in w for i in in_ids):
            rec.nodes.append(node)
            w.update(i for i in out_ids if i)


def _not_on_tensors(n, what):
    if n.__class__ is TensorOp:
        raise NotLowerable(f"the gradient of {what} is taken while a tape records (a higher-order gradient)")


# ------------------------------------------------------------------------------------------- cond
class _CondStep:
    """The step ``real.cond(pred, true_fn, false_fn, operands)``; ``eager`` runs it in Python."""

    def __init__(self, real, true_fn, false_fn, label):
        self.real = real
        self.true_fn = true_fn
        self.false_fn = false_fn
        self.__name__ = label
        # (compiled once where the backend's structured form would compile anew on every call)
        self._run = real.structured_step(lambda pred, *operands: real.cond(pred, true_fn, false_fn, operands))

    def __call__(self, pred, *operands):
        return self._run(pred, *operands)

    def eager(self, pred, *operands):
        return (self.true_fn if bool(pred) else self.false_fn)(*operands)


def lowered_cond(trace, pred, true_fn, false_fn):
    """``gt.cond`` inside a trace: both branches traced, one step (see the module docstring).  Every
    sub-program is made (and may raise :class:`NotLowerable`) before anything is recorded."""
    real = trace.backend.real
    p = pred._v
    taken = bool(np.asarray(real.to_numpy(p.c)).reshape(()))
    a = _Sub(trace, "gt.cond true_fn").run(lambda: true_fn(), quiet=not taken)
    b = _Sub(trace, "gt.cond false_fn").run(lambda: false_fn(), quiet=taken)
    _same_outputs(a, b, "gt.cond's branches")
    operands, op_values = _operand_list((a, b))
    step = _CondStep(real, a.program(a.natives, operands), b.program(b.natives, operands), "cond")
    caps = [i for i in dict.fromkeys(a.caps + b.caps) if a.grads.get(i) is not None or b.grads.get(i) is not None]
    vjp = None
    if caps and per_thread.tapes:
        grads = {}
        for s, other in ((a, b), (b, a)):
            grads[s] = [s.grads.get(i) if s.grads.get(i) is not None else s.zeros(other.grads[i]) for i in caps]
        v_ops, v_values = _operand_list((a, b))
        vjp = _CondStep(
            real,
            a.program(grads[a], v_ops, ("cotangent",), host_effects=False),
            b.program(grads[b], v_ops, ("cotangent",), host_effects=False),
            "cond_gradient",
        )
    concrete = tuple(x.c for x in (a if taken else b).natives)
    printing = a.st.host_effects or b.st.host_effects  # (the branch taken prints, once, as eagerly)
    trace.host_effects = trace.host_effects or printing
    run = step.eager if printing else lambda *_: concrete
    outs = trace.call(step, (p, *op_values), None, label="gt.cond", effect="host" if printing else False, run=run)
    tb = trace.backend
    out_t = [wrap(o, tb) for o in outs]
    if vjp is not None:
        floating = [k for k, o in enumerate(out_t) if o.dtype.differentiable]

        def rule(xp, n, *gs):
            _not_on_tensors(n, "gt.cond")
            t = recording_context[0]
            dys = [gs[k] for k in floating]
            return tuple(t.call(vjp, (p, *v_values, *dys), None, label="gt.cond gradient", run=vjp.eager))

        _record(trace, "cond", caps, out_t, rule, {**a.variables, **b.variables})
    else:
        _record(trace, "cond", (), out_t, None, {**a.variables, **b.variables})
    for s in (a, b):
        s.st.closed = True
    return optree.tree_unflatten(a.tree, out_t)


# ------------------------------------------------------------------------------------------- loops
class _LoopStep:
    """A loop's step on ``real``: ``kind`` "while" (forward only), "forward" (saves the carries)
    or "backward" (the reverse loop of the body's VJP)."""

    def __init__(self, real, kind, fns, nops, ncarry, max_iter, meta):
        self.real = real
        self.kind = kind
        self.fns = fns
        self.nops = nops
        self.ncarry = ncarry
        self.max_iter = max_iter
        self.meta = meta
        self.__name__ = f"while_{kind}"
        # (compiled once where the backend's structured form would compile anew on every call)
        self._run = real.structured_step(self._call)

    def _call(self, *args):
        real = self.real
        ops = args[: self.nops]
        rest = args[self.nops :]
        if self.kind == "while":
            return tuple(real.while_loop(*self.fns, ops, rest, self.max_iter))
        if self.kind == "forward":
            final, stacked, count = real.loop_forward(*self.fns, ops, rest, self.max_iter)
            return (*final, *stacked, count)
        count = rest[0]
        stacked = rest[1 : 1 + self.ncarry]
        dfinal = rest[1 + self.ncarry :]
        return tuple(real.loop_backward(self.fns[0], ops, count, stacked, dfinal, self.max_iter, self.meta))

    def __call__(self, *args):
        return self._run(*args)


def lowered_while(trace, cond, body, leaves, max_iter):
    """``gt.while_loop`` inside a trace on the flat loop variables ``leaves`` (``cond(*leaves)``,
    ``body(*leaves) -> leaves``), or None where its predicate does not depend on a traced value (the
    loop is unrolled in Python)."""
    tb = trace.backend
    real = tb.real
    init = []
    for x in leaves:
        t = x if isinstance(x, Tensor) else convert_to_tensor(x)
        if t._b is not tb:
            t = lift(t, tb)
            if t is None:
                raise NotLowerable("a loop variable of another backend")
        init.append(t)
    values = [t._v.c for t in init]
    c = _Sub(trace, "gt.while_loop cond").run(cond, values, grad=False)
    if len(c.outs) != 1 or c.outs[0].dtype != _dt.bool or c.outs[0].size != 1:
        c.st.closed = True
        return None  # (a Python predicate: unrolled)
    quiet = not bool(np.asarray(real.to_numpy(c.natives[0].c)).reshape(()))
    bd = _Sub(trace, "gt.while_loop body").run(body, values, quiet=quiet)
    if len(bd.outs) != len(init):
        raise NotLowerable("gt.while_loop: body returns another number of values than loop_vars")
    for x, y in zip(init, bd.natives):
        if tuple(x.shape) != tuple(y.shape) or x._v.dtype != y.dtype:
            raise NotLowerable(f"gt.while_loop: a loop variable changes shape or dtype ({x.shape} to {tuple(y.shape)})")
    operands, op_values = _operand_list((c, bd))
    cf = c.program(c.natives, operands, ("carry",))
    bf = bd.program(bd.natives, operands, ("carry",))
    n = len(init)
    in_v = [t._v for t in init]
    printing = "host" if c.st.host_effects or bd.st.host_effects else False  # (a gt.print: kept, run)
    floating = [k for k, t in enumerate(init) if t.dtype.differentiable]
    caps = [i for i in bd.caps if bd.grads.get(i) is not None]
    watched = per_thread.tapes and (caps or any(init[k]._id in r.watched for r in per_thread.tapes for k in floating))
    if not watched:
        trace.host_effects = trace.host_effects or bool(printing)
        step = _LoopStep(real, "while", (cf, bf), len(op_values), n, max_iter, None)
        outs = trace.call(step, (*op_values, *in_v), None, label="gt.while_loop", effect=printing)
        out_t = [wrap(o, tb) for o in outs]
        _record(trace, "while_loop", (), out_t, None, bd.variables)
        for s in (c, bd):
            s.st.closed = True
        return out_t
    if max_iter is None and not real.dynamic_loops:
        raise NotLowerable(f"a gradient through gt.while_loop on {real.name} needs maximum_iterations")
    # the body's VJP: (*operands, *carry, *cotangents of the floating carry) -> (d carry, d captures)
    dcarry = [
        bd.grads.get(bd.carry[k]._id) if bd.grads.get(bd.carry[k]._id) is not None else bd.zeros(bd.carry[k]._v.c)
        for k in floating
    ]
    dcaps = [bd.grads[i] for i in caps]
    v_ops, v_values = _operand_list((c, bd))
    vjp = bd.program(dcarry + dcaps, v_ops, ("carry", "cotangent"), host_effects=False)
    trace.host_effects = trace.host_effects or bool(printing)
    fwd = _LoopStep(real, "forward", (cf, bf), len(op_values), n, max_iter, None)
    res = trace.call(fwd, (*op_values, *in_v), None, label="gt.while_loop", effect=printing)
    final, stacked, count = res[:n], res[n : 2 * n], res[2 * n]
    out_t = [wrap(o, tb) for o in final]
    meta = (floating, [(tuple(g.shape), g.dtype) for g in dcaps])
    bwd = _LoopStep(real, "backward", (vjp,), len(v_values), n, max_iter, meta)
    in_ids = [init[k]._id for k in floating] + caps

    def rule(xp, node, *gs):
        _not_on_tensors(node, "gt.while_loop")
        t = recording_context[0]
        dys = []
        for k in floating:
            g = gs[k]
            dys.append(g if g is not None else xp.zeros_like(final[k]))
        return tuple(t.call(bwd, (*v_values, count, *stacked, *dys), None, label="gt.while_loop gradient"))

    _record(trace, "while_loop", in_ids, out_t, rule, bd.variables)
    for s in (c, bd):
        s.st.closed = True
    return out_t
