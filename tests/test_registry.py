"""The gradient registry (API.md §4): RegisterGradient, NotDifferentiable, register_op,
custom_gradient, stop_gradient, the LookupError, the complex convention, un-broadcasting."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import dispatch
from gradtape.core import recording_state
from gradtape.core import registry

_names = (f"test_op_{i}" for i in itertools.count())


def close(t, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(t.numpy()), np.asarray(expected), rtol=rtol, atol=atol)


def test_register_op_forward_and_rule_on_every_backend(backend):
    name = next(_names)

    def cube(xp, x):
        return x * x * x

    f = gt.register_op(name, cube, lambda op, g: g * 3.0 * op.inputs[0] ** 2)
    x = gt.constant([1.0, 2.0])
    close(f(x), [1.0, 8.0])
    with gt.GradientTape() as t2:
        t2.watch(x)
        with gt.GradientTape() as t1:
            t1.watch(x)
            y = f(x)
        g = t1.gradient(y, x)
    close(g, [3.0, 12.0])
    close(t2.gradient(g, x), [6.0, 12.0])  # the rule is made of gradtape ops: 2nd order
    assert f(x).backend == backend.split(":")[0]


def test_register_op_with_attrs_and_jacobian(backend):
    name = next(_names)
    f = gt.register_op(name, lambda xp, x, *, k: x * k, lambda op, g: g * op.attrs["k"])
    x = gt.constant([1.0, 2.0, 3.0])
    with gt.GradientTape() as t:
        t.watch(x)
        y = f(x, k=2.5)
    close(t.jacobian(y, x), np.eye(3) * 2.5)


def test_op_without_rule_is_lookup_error(backend):
    name = next(_names)
    f = gt.register_op(name, lambda xp, x: x + 1)
    x = gt.Variable([1.0])
    with gt.GradientTape() as t:
        y = f(x)
    with pytest.raises(LookupError, match=f"gradient registry has no entry for: {name}"):
        t.gradient(y, x)
    assert recording_state.per_thread.tapes == []


def test_register_gradient_later_and_override(backend):
    name = next(_names)
    f = gt.register_op(name, lambda xp, x: xp.sin(x))

    @gt.RegisterGradient(name)
    def _grad(op, g):
        return g * gt.cos(op.inputs[0])

    x = gt.constant(0.3)
    with gt.GradientTape(persistent=True) as t:
        t.watch(x)
        y = f(x)
    close(t.gradient(y, x), np.cos(0.3))

    @gt.RegisterGradient(name)
    def _grad2(op, g):
        return g * 10.0

    close(t.gradient(y, x), 10.0)


def test_register_gradient_overrides_builtin_and_restores():
    op = registry.get_op("sin")
    old = op.rule  # (the whole rule: ``op.grad = old_fn`` would keep the override's saves, which reads
    # everything, and leak it into the tests that run after this one in the same process)
    try:

        @gt.RegisterGradient("sin")
        def _fake(op, g):
            return g * 0.0 + 42.0

        x = gt.Variable(1.0)
        with gt.GradientTape() as t:
            y = gt.sin(x)
        close(t.gradient(y, x), 42.0)
    finally:
        op.rule = old
    assert op.rule == old


def test_not_differentiable(backend):
    name = next(_names)
    f = gt.register_op(name, lambda xp, x: x * 2, lambda op, g: g * 2)
    gt.NotDifferentiable(name)
    x = gt.Variable([1.0, 2.0])
    with gt.GradientTape(persistent=True) as t:
        y = f(x)
    assert t.gradient(y, x) is None
    close(t.gradient(y, x, unconnected_gradients="zero"), [0.0, 0.0])


def test_not_differentiable_before_registration():
    name = next(_names)
    gt.NotDifferentiable(name)
    f = gt.register_op(name, lambda xp, x: x * 2, lambda op, g: g * 2)
    assert f.op.differentiable is False


def test_builtin_non_differentiable_ops(backend):
    x = gt.Variable([2.7, -1.2])
    with gt.GradientTape(persistent=True) as t:
        outs = {
            "round": gt.round(x),
            "floor": gt.floor(x),
            "ceil": gt.ceil(x),
            "floor_divide": gt.floor_divide(x, 2.0),
            "greater": gt.astype(gt.greater(x, 0.0), gt.float32),
            "cast_int": gt.astype(gt.astype(x, gt.int32), gt.float32),
        }
        sign = gt.sign(x)
    for name, y in outs.items():
        assert t.gradient(y, x) is None, name
    close(t.gradient(sign, x), [0.0, 0.0])  # TF defines sign's gradient as zeros
    for op in ("round", "floor", "ceil", "floor_divide", "argmax", "greater", "equal", "nonzero", "trunc"):
        assert registry.get_op(op).differentiable is False, op


def test_duplicate_op_name_is_key_error():
    name = next(_names)
    gt.register_op(name, lambda xp, x: x)
    with pytest.raises(KeyError, match="already registered"):
        gt.register_op(name, lambda xp, x: x)


def test_register_gradient_needs_a_name():
    with pytest.raises(TypeError):
        gt.RegisterGradient(lambda op, g: g)


# --------------------------------------------------------------------------- custom_gradient
def test_custom_gradient_log1pexp(backend):
    @gt.custom_gradient
    def log1pexp(x):
        e = gt.exp(x)

        def grad(upstream):
            return upstream * (1 - 1 / (1 + e))

        return gt.log(1 + e), grad

    x = gt.constant(100.0, dtype=gt.float64)
    with gt.GradientTape() as t:
        t.watch(x)
        y = log1pexp(x)
    close(t.gradient(y, x), 1.0)


def test_custom_gradient_clips_gradient_and_second_order(backend):
    @gt.custom_gradient
    def clip_grad_square(x):
        def grad(dy):
            return gt.clip(dy * 2.0 * x, -1.0, 1.0)

        return x * x, grad

    x = gt.constant([0.1, 3.0])
    with gt.GradientTape() as t:
        t.watch(x)
        y = clip_grad_square(x)
    close(t.gradient(y, x), [0.2, 1.0])
    close(clip_grad_square(x), [0.01, 9.0])  # no tape: just the value

    @gt.custom_gradient
    def sq(x):
        return x * x, lambda dy: dy * 2.0 * x

    x = gt.constant(3.0)
    with gt.GradientTape() as t2:
        t2.watch(x)
        with gt.GradientTape() as t1:
            t1.watch(x)
            y = sq(x)
        g = t1.gradient(y, x)
    close(g, 6.0)
    close(t2.gradient(g, x), 2.0)


def test_custom_gradient_with_variables(backend):
    v = gt.Variable(2.0)

    @gt.custom_gradient
    def scale(x):
        def grad(dy, variables=None):
            assert [w.name for w in variables] == [v.name]
            return dy * v, [dy * x * 100.0]

        return x * v, grad

    x = gt.constant(3.0)
    with gt.GradientTape() as t:
        t.watch(x)
        y = scale(x)
    gx, gv = t.gradient(y, [x, v])
    close(gx, 2.0)
    close(gv, 300.0)


def test_custom_gradient_with_variables_needs_keyword(backend):
    v = gt.Variable(2.0)

    @gt.custom_gradient
    def scale(x):
        return x * v, lambda dy: dy * v

    x = gt.constant(3.0)
    with gt.GradientTape() as t:
        t.watch(x)
        y = scale(x)
    with pytest.raises(TypeError, match="variables"):
        t.gradient(y, x)


def test_custom_gradient_multiple_inputs_and_outputs(backend):
    @gt.custom_gradient
    def f(a, b):
        def grad(da, db):
            return da * 2.0 + db, db * 3.0

        return [a * 2.0, a + b * 3.0], grad

    a = gt.constant(1.0)
    b = gt.constant(2.0)
    with gt.GradientTape() as t:
        t.watch([a, b])
        y0, y1 = f(a, b)
    ga, gb = t.gradient([y0, y1], [a, b])
    close(ga, 3.0)
    close(gb, 3.0)


def test_stop_gradient(backend):
    x = gt.Variable(2.0)
    with gt.GradientTape() as t:
        y = x * gt.stop_gradient(x * x)
    close(t.gradient(y, x), 4.0)


# --------------------------------------------------------------------------- conventions
def test_complex_convention_abs_squared_gives_2z(backend):
    z = gt.constant(np.array([1.0 + 2.0j, -0.5 + 0.25j], dtype=np.complex128))
    with gt.GradientTape() as t:
        t.watch(z)
        loss = gt.sum(gt.real(z * gt.conj(z)))
    close(t.gradient(loss, z), 2 * z.numpy())


def test_complex_gradient_of_holomorphic_function(backend):
    z = gt.constant(np.array(0.3 + 0.4j, dtype=np.complex128))
    with gt.GradientTape() as t:
        t.watch(z)
        loss = gt.real(gt.exp(z))
    # L = Re(exp z): dL/dx + i dL/dy = conj(exp(z))
    close(t.gradient(loss, z), np.conj(np.exp(0.3 + 0.4j)))


def test_real_source_of_complex_computation_gets_real_gradient(backend):
    x = gt.constant(2.0, dtype=gt.float64)
    with gt.GradientTape() as t:
        t.watch(x)
        z = gt.astype(x, gt.complex128) * (1.0 + 1.0j)
        loss = gt.real(z * gt.conj(z))  # = 2 x^2
    g = t.gradient(loss, x)
    assert g.dtype == gt.float64
    close(g, 8.0)


def test_broadcasting_is_undone(backend):
    a = gt.Variable(np.ones((2, 1, 3), dtype=np.float32))
    b = gt.Variable(np.ones((4, 1), dtype=np.float32))
    c = gt.Variable(2.0)
    with gt.GradientTape() as t:
        y = a * b + c
    ga, gb, gc = t.gradient(y, [a, b, c])
    assert ga.shape == (2, 1, 3) and gb.shape == (4, 1) and gc.shape == ()
    close(ga, np.full((2, 1, 3), 4.0))
    close(gb, np.full((4, 1), 6.0))
    close(gc, 24.0)


def test_subgradient_conventions(backend):
    x = gt.Variable([0.0, 1.0, 1.0, -1.0])
    with gt.GradientTape(persistent=True) as t:
        a = gt.abs(x)
        m = gt.max(x)
        mx = gt.maximum(x, gt.constant([0.0, 1.0, 2.0, -1.0]))
        c = gt.clip(x, -1.0, 1.0)
    close(t.gradient(a, x), [0.0, 1.0, 1.0, -1.0])  # abs'(0) = 0
    close(t.gradient(m, x), [0.0, 0.5, 0.5, 0.0])  # ties split evenly
    close(t.gradient(mx, x), [1.0, 1.0, 0.0, 1.0])  # ties go to the first argument
    close(t.gradient(c, x), [1.0, 1.0, 1.0, 1.0])  # clip passes at its bounds


# ------------------------------------------------------------------ declared conventions (issue 23)
def test_forward_conventions_are_declared(backend):
    """``forward_takes`` says how a forward is called: the namespace, the Backend, or the arrays
    alone; anything else is a ValueError naming the op."""
    from gradtape.ops import defop

    seen = {}

    def by_xp(xp, x):
        seen["xp"] = xp
        return x * 2

    def by_backend(b, x):
        seen["backend"] = b
        return x * 3

    def by_arrays(x):
        return x * 4

    x = gt.constant([1.0, 2.0])
    for takes, fn, k in (("xp", by_xp, 2), ("backend", by_backend, 3), ("arrays", by_arrays, 4)):
        op = defop(next(_names), fn, forward_takes=takes, chapter="user")
        close(dispatch.apply(op, (x,)), [k, 2 * k])
        assert op.computes.forward_takes == takes == op.forward_takes
    assert seen["xp"] is x._b.xp and seen["backend"] is x._b
    with pytest.raises(ValueError, match="forward_takes"):
        defop(next(_names), by_xp, forward_takes="namespace")
    with pytest.raises(ValueError, match="forward_takes='name'"):
        defop(next(_names), by_xp, forward_takes="name")


def test_only_the_older_chapters_leave_a_backend_forward_undeclared():
    """A forward that takes the Backend declares ``forward_takes="backend"``; the chapters that
    predate it (special, nan_functions, nn) and register_op's wrapper are the only ones whose
    convention is still read from the first parameter's name."""
    modules = {registry.get_op(n).forward.__module__ for n in registry.UNDECLARED_BACKEND_FORWARDS}
    assert modules <= {
        "gradtape.ops.special",
        "gradtape.ops.nan_functions",
        "gradtape.ops.nn",
        "gradtape.autodiff.custom_gradient",
    }
    assert "to_device" not in registry.UNDECLARED_BACKEND_FORWARDS
    assert registry.get_op("to_device").forward_takes == "backend"


def test_rule_forms_are_declared(backend):
    """``@op.gradient`` is gradtape's ``rule(xp, op, *grads)``; ``RegisterGradient`` is TensorFlow's
    ``rule(op, *grads)`` unless declared ``rule_form="xp"`` (then it runs on native arrays in a
    first-order walk); an undeclared rule taking ``xp`` first works, with a FutureWarning saying how
    to declare it."""
    f = gt.register_op(next(_names), lambda xp, x: xp.sin(x))
    name = f.op.name
    x = gt.constant(np.array([0.3, 0.4]))
    kinds = []

    def grad_of():
        with gt.GradientTape() as t:
            t.watch(x)
            y = gt.sum(f(x))
        return t.gradient(y, x)

    @gt.RegisterGradient(name, rule_form="xp")
    def _xp_rule(xp, op, g):
        kinds.append(type(op.inputs[0]))
        return g * xp.cos(op.inputs[0])

    assert f.op.rule_form == "xp" and f.op.xp_rule
    close(grad_of(), np.cos([0.3, 0.4]))
    assert kinds[-1] is type(x._v)  # native arrays: the fast walk

    @gt.RegisterGradient(name)
    def _tf_rule(op, g):
        kinds.append(type(op.inputs[0]))
        return g * 2.0

    assert f.op.rule_form == "tf" and not f.op.xp_rule
    close(grad_of(), [2.0, 2.0])
    assert kinds[-1] is gt.Tensor

    with pytest.warns(FutureWarning, match="rule_form='xp'"):

        @gt.RegisterGradient(name)
        def _undeclared(xp, op, g):
            return g * 5.0

    assert f.op.rule_form == "xp"
    close(grad_of(), [5.0, 5.0])
    with pytest.raises(ValueError, match="rule_form"):
        gt.RegisterGradient(name, rule_form="jax")


def test_opdef_is_made_of_named_parts():
    """An OpDef's parts (what it computes, its rule, its docs) hold what defop declared; the flat
    attributes the engine reads mirror them and cannot be set on their own."""
    sin = registry.get_op("sin")
    assert isinstance(sin.computes, registry.Computes) and isinstance(sin.rule, registry.Rule)
    assert sin.computes.forward == "sin" and sin.computes.forward_takes == "name"
    assert sin.computes.casts_to_float is sin.floating is True
    assert sin.computes.keeps_float is sin.float_out is True
    assert sin.computes.namespace_callable is sin.xp_callable is True
    assert sin.rule.form == "xp" and sin.rule.batched is sin.batched is True and sin.rule.saves is sin.saves
    assert sin.docs.chapter == sin.chapter == "elementwise"
    with pytest.raises(AttributeError, match="read-only"):
        sin.floating = False
    assert registry.get_op("matmul").floating is False


def test_replacing_a_part_updates_what_the_engine_reads(backend):
    f = gt.register_op(next(_names), lambda xp, x: x * 2.0, lambda xp, op, g: g * 2.0)
    op = f.op
    x = gt.constant([1.0, 2.0])
    close(f(x), [2.0, 4.0])
    assert op.rule_form == "xp"
    op.computes = op.computes._replace(forward=lambda xp, x: x * 3.0, forward_takes="xp")
    close(f(x), [3.0, 6.0])  # (the resolved forward is dropped with the old part)
    op.rule = op.rule._replace(fn=lambda xp, o, g: g * 7.0)
    with gt.GradientTape() as t:
        t.watch(x)
        y = gt.sum(f(x))
    close(t.gradient(y, x), [7.0, 7.0])
