"""One rule per op, on the namespace the engine passes in (issue 11), registry-wide, on every backend.

* Every rule is written ``rule(xp, op, *grads)``: none is left in the Tensor-only form.
* The rule gives the same gradients on the backend's native namespace (a first-order walk: no Tensor
  is made, which a spy on the engine checks) and on gradtape's namespace (an outer tape records).
* A rule reads only what its op saves: run once on a stub whose unsaved values fail when touched.
* A rule declared ``batched`` takes a leading batch axis on its cotangents: the batched walk equals
  one walk per cotangent.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradtape as gt
from gradtape import testing
from gradtape.core import engine as _engine
from gradtape.core import registry
from gradtape.core.recording_state import per_thread
from gradtape.core.rule_namespace import native_namespace
from gradtape.core.domains import first_real_and_complex, op_cases

# gradtape's own ops (tests register ops of chapter "user", some with TensorFlow-style rules)
OWN_OPS = [op for op in registry.ops() if op.chapter != "user"]
RULE_OPS = sorted(
    op.name
    for op in OWN_OPS
    if op.differentiable
    and op.grad is not None
    and op.convention != "a composite: differentiated through the ops it calls"
)

#: backends on which each new shape is a compilation (eager JAX: one XLA program, ~35 ms of CPU, per
#: primitive, shape and dtype): the registry-wide engine checks here, backend-neutral code on each
#: backend's namespace, take each op's first real and first complex case there (every case elsewhere);
#: every case of every op is still checked on JAX against finite differences (tests/test_gradients.py)
COMPILES_EACH_SHAPE = {"jax"}


def rule_cases(op, backend):
    """The cases of ``op`` the registry-wide checks run on ``backend``."""
    cases = op_cases(op)
    if backend.split(":")[0] in COMPILES_EACH_SHAPE:
        return [cases[i] for i in first_real_and_complex(cases)]
    return cases


def _setup(op, case, rng):
    """The case's floating (and complex) sources as Tensors on the active backend, and a function
    computing the op on them (its result through the case's output map)."""
    values, kwargs = case.draw(rng, "float64")
    leaves, flags, rebuild = testing.case_leaves(case, values)
    ts = [gt.asarray(v) for v in leaves]
    srcs = [t for t, f in zip(ts, flags) if f and t.dtype.differentiable]
    raw = lambda: op.public(*rebuild(ts), **kwargs)
    call = lambda: testing.case_outputs(case, raw())
    call.raw = raw
    return srcs, call


def _weights(t, k):
    return gt.constant(np.linspace(0.5, 1.5, max(t.size, 1)).reshape(t.shape) + k, dtype=gt.real(t).dtype)


def _loss(ys):
    """A weighted sum of the floating outputs, real and imaginary parts."""
    terms = []
    for t in testing.flat_outputs(ys):
        if t.dtype.differentiable:
            terms.append(gt.sum(gt.real(t) * _weights(t, 0)))
            if t.dtype.is_complex:
                terms.append(gt.sum(gt.imag(t) * _weights(t, 1)))
    return gt.add_n(terms) if terms else None


def _grads(srcs, call, outer):
    """Gradients of the loss w.r.t. the sources; with ``outer``, an outer tape records the walk
    (the rules run on Tensors)."""
    with gt.GradientTape(persistent=True) as out_tape:
        with gt.GradientTape() as tape:
            tape.watch(srcs)
            loss = _loss(call())
        if loss is None:
            return None
        if outer:
            return tape.gradient(loss, srcs)
        with out_tape.stop_recording():
            return tape.gradient(loss, srcs)


def _recorded(srcs, fn):
    """A persistent tape that watched ``srcs`` while ``fn()`` ran, and what it returned (None, None
    where the op refuses these inputs on this backend: a singular matrix)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gt.GradientTape(persistent=True) as tape:
            tape.watch(srcs)
            try:
                return tape, fn()
            except ValueError:
                return None, None


class _CountingTensorOp(_engine.TensorOp):
    """The engine's Tensor view of a node, counted: a native walk makes none for a rule of the
    ``rule(xp, op, *grads)`` form."""

    __slots__ = ()
    made = []

    def __init__(self, node):
        if node.opdef.xp_rule:
            _CountingTensorOp.made.append(node.opdef.name)
        super().__init__(node)


def test_every_rule_takes_the_namespace():
    old_form = [op.name for op in OWN_OPS if op.grad is not None and not op.xp_rule]
    assert not old_form, (
        "rules still in the Tensor-only form rule(op, *grads); write them as "
        f"rule(xp, op, *grads) (see gradtape/ops/__init__.py): {old_form}"
    )


@pytest.mark.parametrize("name", RULE_OPS)
def test_both_namespaces_agree(name, backend, monkeypatch):
    op = registry.get_op(name)
    rng = np.random.default_rng(7)
    checked = 0
    for case in rule_cases(op, backend):
        srcs, call = _setup(op, case, rng)
        if not srcs:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                monkeypatch.setattr(_engine, "TensorOp", _CountingTensorOp)
                _CountingTensorOp.made.clear()
                native = _grads(srcs, call, outer=False)
                made = list(_CountingTensorOp.made)
            except ValueError:  # inputs the op refuses on this backend (a singular matrix)
                continue
            finally:
                monkeypatch.undo()
            tensor = _grads(srcs, call, outer=True)
        real = not any(t.dtype.is_complex for t in srcs) and not any(
            t.dtype.is_complex for t in testing.flat_outputs(call())
        )
        if native is None:
            continue
        checked += 1
        if real and op.xp_rule:
            assert not made, f"{name} {case!r}: the first-order walk ran rules on Tensors: {made}"
        for gn, gr in zip(native, tensor):
            assert (gn is None) == (gr is None), case
            if gn is not None:
                assert gn.shape == gr.shape and gn.dtype == gr.dtype, case
                np.testing.assert_allclose(gn.numpy(), gr.numpy(), rtol=1e-9, atol=1e-12, err_msg=repr(case))
    if op.domain is not None and not checked:
        pytest.skip(f"{name}: no case with floating inputs that the op takes on this backend")


@pytest.mark.parametrize("name", [n for n in RULE_OPS if registry.get_op(n).saves is not None])
def test_a_rule_reads_only_what_its_op_saves(name, backend):
    op = registry.get_op(name)
    rng = np.random.default_rng(11)
    ran = 0
    for case in rule_cases(op, backend):
        srcs, call = _setup(op, case, rng)
        if not srcs or any(a.dtype.is_complex for a in srcs):
            continue
        tape, ys = _recorded(srcs, call.raw)
        if tape is None:
            continue
        ys = testing.flat_outputs(ys)
        nodes = [n for n in tape._rec.nodes if n.opdef is op]
        if not nodes:
            continue
        n = nodes[-1]
        # (an unsaved input's shape stays readable: a Meta's, or the first output's where it is None)
        out_shape = tuple(ys[0].shape)
        stub = n._replace(
            inputs=tuple(
                _engine._Unsaved(op, f"inputs[{k}]", out_shape if v is None else tuple(v.shape))
                if v is None or isinstance(v, _engine.Meta)
                else v
                for k, v in enumerate(n.inputs)
            ),
            outputs=tuple(_engine._Unsaved(op, f"outputs[{k}]") if v is None else v for k, v in enumerate(n.outputs)),
        )
        xp = native_namespace(n.backend)
        gs = [xp.ones_like(t.native) for t in ys]
        if len(gs) != len(n.out_ids) or any(g.dtype not in _engine._real_natives(n.backend) for g in gs):
            continue
        per_thread.reach = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op.grad(xp, stub, *gs)
        ran += 1
    if not ran:
        pytest.skip(f"{name}: no real case recorded on this backend")


@pytest.mark.parametrize("name", [n for n in RULE_OPS if registry.get_op(n).batched])
def test_a_batched_rule_takes_a_leading_batch_axis(name, backend):
    op = registry.get_op(name)
    rng = np.random.default_rng(5)
    ran = 0
    for case in rule_cases(op, backend):
        srcs, call = _setup(op, case, rng)
        if not srcs or case.out_map is not None:
            continue
        tape, y = _recorded(srcs, call)
        if tape is None:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if isinstance(y, (tuple, list)):
                continue  # batched walks take one target
            if not y.dtype.is_floating:
                continue  # a complex cotangent: the rule runs on Tensors, unbatched
            xp = y._b.xp
            cots = np.stack([rng.standard_normal(tuple(y.shape)) for _ in range(2)])
            batch = gt.asarray(cots, dtype=y.dtype).native
            rec = tape._rec
            try:
                batched = _engine.backward(rec, [y], None, srcs, _engine.UnconnectedGradients.NONE, batch=batch)
            except _engine.NotBatchable:
                if any(a.dtype.is_complex for a in srcs):
                    continue  # complex gradients on the way: rules on Tensors, one walk a row
                raise
            for b in range(2):
                single = _engine.backward(
                    rec, [y], [gt.asarray(cots[b], dtype=y.dtype)], srcs, _engine.UnconnectedGradients.NONE
                )
                for gb, gs, s in zip(batched, single, srcs):
                    if gs is None:
                        continue
                    got = np.asarray(gt.asarray(xp.broadcast_to(gb, (2,) + tuple(s.shape))[b, ...]).numpy())
                    np.testing.assert_allclose(got, gs.numpy(), rtol=1e-9, atol=1e-12, err_msg=repr(case))
        ran += 1
    if not ran:
        pytest.skip(f"{name}: no real single-output case on this backend")
