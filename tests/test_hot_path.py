"""The hot path: rules on the native namespace, per-op saves, the walk, in-place variable updates.

Each rule runs on the backend's native namespace when nothing records the backward walk, and on
gradtape's namespace (Tensors) when an outer tape does; tests/test_rules.py checks that both give
the same gradients for every op.  No test here times anything.
"""

from __future__ import annotations

import ast
import gc
import pathlib
import weakref

import numpy as np
import pytest

import gradtape as gt
from gradtape.core import dispatch
from gradtape.core import registry
from gradtape.core.engine import Meta


def _args(case, rng):
    arrays, kwargs = case.draw(rng, "float64")
    return [gt.constant(a) if isinstance(a, np.ndarray) else a for a in arrays], kwargs


def _grads(op, args, kwargs, outer):
    """Gradients of sum(f(*args) * weights) w.r.t. every float Tensor argument; with ``outer``, an
    outer tape records the walk (so the Tensor rules run)."""
    fn = op.public
    srcs = [a for a in args if isinstance(a, gt.Tensor) and a.dtype.is_floating]
    with gt.GradientTape(persistent=True) as out_tape:
        with gt.GradientTape() as tape:
            for s in srcs:
                tape.watch(s)
            y = fn(*args, **kwargs)
            w = gt.constant(np.linspace(0.5, 1.5, max(y.size, 1)).reshape(y.shape))
            loss = gt.sum(y * w)
        if outer:
            gs = tape.gradient(loss, srcs)
        else:
            with out_tape.stop_recording():
                gs = tape.gradient(loss, srcs)
    return gs


def test_matmul_native_rule_every_rank_combination(backend):
    rng = np.random.default_rng(1)
    shapes = [
        ((3,), (3,)),
        ((2, 3), (3,)),
        ((3,), (3, 4)),
        ((2, 3), (3, 4)),
        ((5, 2, 3), (3,)),
        ((3,), (5, 3, 4)),
        ((5, 2, 3), (3, 4)),
        ((1, 2, 3), (5, 3, 4)),
    ]
    for sa, sb in shapes:
        a = gt.constant(rng.standard_normal(sa))
        b = gt.constant(rng.standard_normal(sb))
        native = _grads(registry.get_op("matmul"), [a, b], {}, False)
        tensor = _grads(registry.get_op("matmul"), [a, b], {}, True)
        for gn, gr in zip(native, tensor):
            assert gn.shape == gr.shape
            np.testing.assert_allclose(gn.numpy(), gr.numpy(), rtol=1e-10, atol=1e-12)


def test_complex_gradients_take_the_rules(backend):
    z = gt.constant(np.array([1 + 2j, -0.5 + 0.3j]))
    with gt.GradientTape() as tape:
        tape.watch(z)
        y = gt.sum(gt.real(gt.sin(z) * gt.conj(z)))
    g = tape.gradient(y, z)
    zn = z.numpy()
    # d/dz* of Re(sin(z) conj(z)) * 2 = conj(cos z) z ... checked against finite differences
    eps = 1e-7
    f = lambda v: np.sum(np.real(np.sin(v) * np.conj(v)))
    want = np.array(
        [
            (f(zn + eps * np.eye(2)[k]) - f(zn - eps * np.eye(2)[k])) / (2 * eps)
            + 1j * (f(zn + 1j * eps * np.eye(2)[k]) - f(zn - 1j * eps * np.eye(2)[k])) / (2 * eps)
            for k in range(2)
        ]
    )
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)


def test_an_overridden_rule_replaces_the_native_one(backend):
    """A TensorFlow-style rule set at run time runs (on Tensors) instead of the op's own; assigning
    the old rule back restores its declared form."""
    op = registry.get_op("sinh")
    old, saves = op.grad, op.saves
    op.grad = lambda o, g: g * 3.0
    assert not op.xp_rule and op.rule_form == "tf"
    try:
        x = gt.constant(np.array([0.1, 0.2]))
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.sum(gt.sinh(x))
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), [3.0, 3.0])
    finally:
        op.grad = old
        op.saves = saves
    assert op.xp_rule
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sum(gt.sinh(x))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.cosh([0.1, 0.2]))


def test_saves_drop_what_the_rule_does_not_read(backend):
    x = gt.constant(np.ones((4, 3)))
    b = gt.constant(np.ones(3))
    with gt.GradientTape() as tape:
        tape.watch(x)
        tape.watch(b)
        z = x + b  # add keeps nothing: x is shaped like z, b only its shape
        y = gt.tanh(z)  # tanh keeps its output only
    nodes = tape._rec.nodes
    add, tanh = nodes[0], nodes[1]
    assert add.inputs[0] is None and isinstance(add.inputs[1], Meta) and add.outputs == (None,)
    assert tanh.inputs == (None,) and tanh.outputs[0] is y.native
    with gt.GradientTape(persistent=True) as outer:
        with gt.GradientTape() as t2:
            t2.watch(x)
            t2.watch(b)
            y2 = gt.tanh(x + b)
        gx, gb = t2.gradient(y2, [x, b])  # Tensor rules: they read only what was saved
    want = 1 - np.tanh(2.0) ** 2
    np.testing.assert_allclose(gx.numpy(), np.full((4, 3), want))
    np.testing.assert_allclose(gb.numpy(), np.full(3, 4 * want))
    del outer


_TWICE = gt.register_op("hot_path_twice", lambda xp, x: 2 * x, lambda o, g: g * 0 + o.inputs[0] * 0 + 2 * g)
_TWICE.op.saves = ("outputs",)


def test_a_rule_reading_what_its_op_does_not_save_is_a_clear_error(backend):
    op = _TWICE
    x = gt.constant(np.ones(2))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = op(x)
    with pytest.raises(RuntimeError, match="hot_path_twice.*op.inputs.*saves"):
        tape.gradient(y, x)


_COS_OF_INPUT = gt.register_op(
    "hot_path_sin", lambda xp, x: xp.sin(x), lambda xp, op, g: g * xp.cos(op.inputs[0]), saves=("outputs",)
)


def test_a_native_rule_reading_what_its_op_does_not_save_is_a_clear_error(backend):
    """On native arrays the rule gets None for what was not kept; its failure names the op, its rule
    and the saves to fix."""
    x = gt.constant(np.ones(2))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = _COS_OF_INPUT(x)
    with pytest.raises(RuntimeError, match=r"hot_path_sin.*test_hot_path\.py.*op\.inputs\[0\].*saves"):
        tape.gradient(y, x)


def test_intermediates_are_freed_during_the_forward(backend):
    if backend != "numpy":
        pytest.skip("weak references to NumPy arrays")
    x = gt.constant(np.ones((64, 32)))
    b = gt.constant(np.ones(32))
    with gt.GradientTape() as tape:
        tape.watch(x)
        z = x + b
        ref = weakref.ref(z._v)  # the array itself (.native inside a tape warns)
        y = gt.sum(gt.tanh(z))
        del z
    gc.collect()
    assert ref() is None  # neither add nor tanh keeps the pre-activation
    assert tape.gradient(y, x).shape == (64, 32)


def test_a_non_persistent_gradient_consumes_the_nodes(backend):
    x = gt.constant(np.ones(3))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sin(x) * 2.0
    rec = tape._rec
    tape.gradient(y, x)
    assert rec.nodes == []


def test_gradients_for_a_subset_of_the_watched_sources(backend):
    x = gt.constant(np.array([0.3, 0.4]))
    w = gt.constant(np.array([2.0, 3.0]))
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        tape.watch(w)
        y = gt.sum(gt.sin(x) * w)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.cos([0.3, 0.4]) * [2.0, 3.0])
    np.testing.assert_allclose(tape.gradient(y, w).numpy(), np.sin([0.3, 0.4]))
    gx, gw = tape.gradient(y, [x, w])
    np.testing.assert_allclose(gw.numpy(), np.sin([0.3, 0.4]))


def test_batched_jacobian_walk_matches_the_loop(backend):
    rng = np.random.default_rng(3)
    w = gt.constant(rng.standard_normal((5, 4)))
    b = gt.constant(rng.standard_normal(5))
    x = gt.constant(rng.standard_normal(4))
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        tape.watch(b)
        y = gt.tanh(w @ x + b) * 2.0
    j_x, j_b = tape.jacobian(y, [x, b])
    loop = tape.jacobian(y, [x, b], experimental_use_pfor=False)
    yn = np.tanh(w.numpy() @ x.numpy() + b.numpy())
    want_x = (2 * (1 - yn**2))[:, None] * w.numpy()
    np.testing.assert_allclose(j_x.numpy(), want_x, rtol=1e-10)
    np.testing.assert_allclose(j_b.numpy(), np.diag(2 * (1 - yn**2)), rtol=1e-10)
    np.testing.assert_allclose(loop[0].numpy(), want_x, rtol=1e-10)


def test_batched_jacobian_through_an_op_whose_rule_is_not_batched(backend):
    x = gt.constant(np.array([0.2, 0.5, 0.9]))
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.cumulative_sum(gt.sin(x))
    j = tape.jacobian(y, x)
    want = np.tril(np.ones((3, 3))) * np.cos(x.numpy())[None, :]
    np.testing.assert_allclose(j.numpy(), want, rtol=1e-10)


def test_jacobian_of_a_source_itself_and_an_unconnected_one(backend):
    x = gt.constant(np.array([1.0, 2.0]))
    u = gt.constant(np.array([3.0]))
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        tape.watch(u)
        y = x * 1.0
    jx, ju = tape.jacobian(y, [x, u])
    np.testing.assert_allclose(jx.numpy(), np.eye(2))
    assert ju is None
    jx, ju = tape.jacobian(y, [x, u], unconnected_gradients="zero")
    np.testing.assert_allclose(ju.numpy(), np.zeros((2, 1)))


def test_variable_updates_in_place_only_when_nobody_sees(backend):
    v = gt.Variable(np.array([1.0, 2.0]))
    user = np.array([5.0, 6.0])
    v2 = gt.Variable(user)
    v2.assign_sub(gt.constant(np.array([1.0, 1.0])))
    np.testing.assert_allclose(user, [5.0, 6.0])  # the caller's array is never written
    read = v.value()
    before = read.numpy()
    v.assign_sub(gt.constant(np.array([1.0, 1.0])))
    v.assign_add(gt.constant(np.array([0.5, 0.5])))
    np.testing.assert_allclose(read.numpy(), before)  # a Tensor read earlier keeps its value
    np.testing.assert_allclose(v.numpy(), [0.5, 1.5])
    with gt.GradientTape(persistent=True) as tape:
        y = gt.sum(v * v)
    v.assign_sub(gt.constant(np.array([0.5, 0.5])))
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), [1.0, 3.0])  # saved value untouched
    for _ in range(3):
        v.assign_add(gt.constant(np.array([1.0, 1.0])))
    np.testing.assert_allclose(v.numpy(), [3.0, 4.0])


def test_multi_output_custom_gradient_in_the_native_walk(backend):
    @gt.custom_gradient
    def f(a):
        def grad(da, db):
            return da * 2.0 + db * 3.0

        return (a * 1.0, a * 1.0), grad

    x = gt.constant(np.array([1.0, 2.0]))
    with gt.GradientTape() as tape:
        tape.watch(x)
        p, q = f(x)
        y = gt.sum(p) + gt.sum(q * 0.0)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [2.0, 2.0])


# ------------------------------------------------------------------ the engine's structure (issue 23)
_PKG = pathlib.Path(gt.__file__).parent


def _modules():
    # gradtape's own code but the adapters and the conformance suite (as before the folders: they were apart)
    skip = {"__pycache__", "backends", "conformance"}
    return sorted(p for p in _PKG.rglob("*.py") if not skip & set(p.relative_to(_PKG).parts))


def _functions_calling(tree, predicate):
    """The names of the functions (innermost ``def``) of ``tree`` holding a call that ``predicate``
    accepts ("<module>" at top level)."""
    found = []

    def walk(node, where):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(child, child.name)
            else:
                if isinstance(child, ast.Call) and predicate(child):
                    found.append(where)
                walk(child, where)

    walk(tree, "<module>")
    return found


def _is_name(node, *names):
    return (isinstance(node, ast.Name) and node.id in names) or (isinstance(node, ast.Attribute) and node.attr in names)


def test_the_node_is_built_in_one_function():
    """``_engine.make_node`` is the one place a Node is constructed (``Node(...)``, ``Node._make``,
    ``tuple.__new__(Node, ...)``): parsed from every module's source."""

    def builds_node(call):
        f = call.func
        if _is_name(f, "Node"):
            return True
        if isinstance(f, ast.Attribute) and _is_name(f.value, "Node"):
            return True  # Node._make, Node.__new__
        return bool(call.args) and _is_name(call.args[0], "Node") and not _is_name(f, "isinstance")

    where = {}
    for path in _modules():
        for fn in _functions_calling(ast.parse(path.read_text()), builds_node):
            where.setdefault(f"{path.relative_to(_PKG)}:{fn}", 0)
            where[f"{path.relative_to(_PKG)}:{fn}"] += 1
    assert where == {"core/engine.py:make_node": 1}


def test_nodes_are_read_by_field_name():
    """No module indexes or unpacks a node by position (``n[3]``, ``op, ids, ... = n``)."""
    bad = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Subscript)
                and _is_name(node.value, "n", "node")
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, int)
            ):
                bad.append(f"{path.name}:{node.lineno}")
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.targets[0], ast.Tuple)
                and _is_name(node.value, "n", "node")
            ):
                bad.append(f"{path.name}:{node.lineno}")
    assert bad == []


def test_fit_and_add_is_one_function():
    """A rule's gradients are fitted to their inputs (``fit``, ``_fit_tensor``) and summed into the
    walk's gradients in ``_engine._fit_add`` alone."""
    tree = ast.parse((_PKG / "core" / "engine.py").read_text())
    fits = _functions_calling(tree, lambda c: _is_name(c.func, "fit"))
    tensor_fits = _functions_calling(tree, lambda c: _is_name(c.func, "_fit_tensor"))
    assert set(fits) == {"_fit_add", "_fit_tensor"} and fits.count("_fit_add") == 1
    assert tensor_fits == ["_fit_add"]
    walk = _functions_calling(tree, lambda c: _is_name(c.func, "_fit_add"))
    # (the walk's two common cases, native and recorded, and the general node's two)
    assert sorted(walk) == ["_general_rule", "_general_rule", "_walk", "_walk"]


def test_every_op_call_goes_through_apply():
    """Only ``dispatch`` (``apply``, and ``run_native`` for the forward walk's native tangents) and
    the rules' native namespace reach an op's native forward; the
    element-wise ops' public functions are ``apply`` generated for their arity (no hand-written copy).
    (``recompute_grad``'s policies wrap the forwards of the ops they save, in ``OpDef.impls``: the one
    other place that resolves a forward, to wrap it, never to call it.)"""
    reach = []
    for path in _modules():
        for fn in _functions_calling(ast.parse(path.read_text()), lambda c: _is_name(c.func, "resolve")):
            reach.append(f"{path.relative_to(_PKG).as_posix()}:{fn}")
    assert sorted(set(reach)) == [
        "autodiff/recompute.py:_install",
        "core/dispatch.py:apply",
        "core/dispatch.py:run_native",
        "core/rule_namespace.py:__getattr__",
    ]
    for f, arity in ((gt.sin, 1), (gt.add, 2), (gt.multiply, 2)):
        assert (
            f.__code__.co_filename == f"<gradtape.core.dispatch.apply for {arity} argument{'s' if arity > 1 else ''}>"
        )
    assert registry.get_op("sin").public is gt.sin


def _same(a, b):
    assert type(a) is type(b) and a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(np.asarray(a.numpy()), np.asarray(b.numpy()))


def test_the_generated_fast_path_is_apply(backend):
    """The generated public functions and ``dispatch.apply`` give the same values, dtypes and
    gradients on every kind of input: Tensors, Variables, Python scalars on either side, bool and
    integer inputs of a floating function (computed in floatx), mixed dtypes (promoted), and an
    error that names the op."""
    f32 = gt.constant(np.array([0.25, 0.5], np.float32))
    f64 = gt.constant(np.array([0.25, 0.5]))
    ints = gt.constant(np.array([1, 2], np.int32))
    v = gt.Variable(np.array([0.5, 1.5], np.float32))
    sin, mul = registry.get_op("sin"), registry.get_op("multiply")
    for x in (f32, f64, ints, v):
        _same(gt.sin(x), dispatch.apply(sin, (x,)))
    assert gt.sin(ints).dtype == gt.float32
    for a, b in ((f32, 2.0), (3, f32), (f32, v), (f32, f64), (ints, 2), (ints, f32)):
        _same(gt.multiply(a, b), dispatch.apply(mul, (a, b)))
    assert gt.multiply(f32, f64).dtype == gt.float64
    with pytest.raises((ValueError, TypeError), match="in op 'multiply'"):  # (JAX: a TypeError)
        gt.multiply(f32, gt.constant(np.ones(3, np.float32)))
    for fn in (lambda x: gt.sin(x) * 2.0 + v, lambda x: dispatch.apply(mul, (dispatch.apply(sin, (x,)), 2.0)) + v):
        with gt.GradientTape() as tape:
            tape.watch(f64)
            y = gt.sum(fn(f64))
        np.testing.assert_allclose(tape.gradient(y, f64).numpy(), 2 * np.cos([0.25, 0.5]))
    with gt.GradientTape() as tape:  # a Variable read inside a tape is watched on access
        y = gt.sum(gt.sin(v) * v)
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), np.sin(v.numpy()) + v.numpy() * np.cos(v.numpy()), 1e-6)


def test_the_fast_path_folds_the_op_flags():
    """An element-wise public function reads none of its op's flags at call time: they are
    constants of its code (``dispatch.FOLDED``), so each op's function has only its own branches."""
    x = gt.constant(np.array([0.5, 2.0]))
    for f in (gt.sin, gt.add, gt.multiply, gt.exp, gt.divide, gt.subtract):
        f(*[x] * f.__code__.co_argcount)  # (generated on the first call)
        names = set(f.__code__.co_names)
        assert "_first_call" not in names
        assert not names & set(dispatch.FOLDED), (f.__name__, names & set(dispatch.FOLDED))
    # two ops of different saves run different code; two of the same flags share it
    assert gt.add.__code__ is not gt.multiply.__code__
    assert gt.add.__code__ is gt.subtract.__code__


def test_the_fast_path_follows_the_op_when_its_parts_change(backend):
    """Changing what an op saves, its rule or whether it is differentiable regenerates its public
    function (the same function object): a call after the change records as the op now says."""
    op = registry.get_op("sin")
    f = gt.sin
    rule, diff = op.rule, op.differentiable
    x = gt.constant(np.array([0.25, 0.5]))
    try:
        gt.sin(x)
        code = f.__code__  # (generated on the first call)
        op.saves = ("inputs", "outputs")
        assert gt.sin is f and f.__code__ is not code
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.sin(x)
        (node,) = tape._rec.nodes
        assert node.outputs[0] is y.native and node.inputs[0] is x.native
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.cos([0.25, 0.5]))
        op.saves = ("outputs",)  # a rule that reads the input now finds it not kept: the clear error
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.sin(x)
        assert tape._rec.nodes[0].inputs == (None,)
        with pytest.raises(RuntimeError, match="'sin'.*saves"):
            tape.gradient(y, x)
        op.rule = rule
        op.differentiable = False
        with gt.GradientTape() as tape:
            tape.watch(x)
            y = gt.sin(x)
        assert tape._rec.nodes == [] and tape.gradient(y, x) is None
    finally:
        op.rule = rule
        op.differentiable = diff
    with gt.GradientTape() as tape:
        tape.watch(x)
        y = gt.sin(x)
    assert tape._rec.nodes[0].outputs == (None,)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.cos([0.25, 0.5]))


def test_a_binary_fast_path_follows_its_scalars_flag(backend):
    """``scalars`` folded: turned off, a Python scalar beside a tensor is converted (the general
    path), and the result is the same."""
    op = registry.get_op("multiply")
    computes = op.computes
    x = gt.constant(np.array([0.25, 0.5], np.float32))
    want = gt.multiply(x, 3.0)
    try:
        op.computes = computes._replace(scalars=False)
        _same(gt.multiply(x, 3.0), want)
        _same(gt.multiply(3.0, x), want)
    finally:
        op.computes = computes
    _same(gt.multiply(x, 3.0), want)


def test_a_call_on_nested_tapes_is_recorded_on_each_tape_that_watches_an_input(backend):
    # the generated path's common case with several tapes: one node, on the tapes that watch an
    # input (and on no other), each tape's gradient right
    x = gt.constant([0.5, -1.0], dtype=gt.float64)
    z = gt.constant([2.0, 3.0], dtype=gt.float64)
    with gt.GradientTape(persistent=True) as outer:
        outer.watch(z)
        with gt.GradientTape(persistent=True) as inner:
            inner.watch(x)
            a = gt.sin(x)  # inner only
            b = z * 3.0  # outer only
            c = a * b  # both
            d = gt.sum(c)  # both (the general path: attributes)
    assert [n.opdef.name for n in inner._rec.nodes] == ["sin", "multiply", "sum"]
    assert [n.opdef.name for n in outer._rec.nodes] == ["multiply", "multiply", "sum"]
    assert inner._rec.nodes[1] is outer._rec.nodes[1]  # (one node for both tapes)
    xv, zv = np.array([0.5, -1.0]), np.array([2.0, 3.0])
    np.testing.assert_allclose(inner.gradient(d, x).numpy(), np.cos(xv) * 3 * zv, rtol=1e-12)
    np.testing.assert_allclose(outer.gradient(d, z).numpy(), np.sin(xv) * 3, rtol=1e-12)
    assert outer.gradient(d, x) is None and inner.gradient(d, z) is None


def test_the_fold_decides_only_tests_of_names_bound_to_constants():
    """Inside ``if fast:`` the generated paths' tests of ``fast`` are decided true (``fast`` is only
    ever bound to constants); a name bound otherwise (a list a branch may empty, a loop variable, an
    augmented count) keeps its test."""
    from gradtape.core.engine import fold_constants

    src = """
fast = 0
xs = make()
if c:
    fast = 2
if fast:
    a = f(1) if fast else f(2)
    if fast:
        b = f(3)
if xs:
    xs.pop()
    if xs:
        d = f(4)
"""
    out = ast.unparse(ast.Module(fold_constants(ast.parse(src).body), []))
    assert "if fast:\n    a = f(1)\n    b = f(3)" in out, out
    assert "xs.pop()\n    if xs:\n        d = f(4)" in out, out
    namespace = {}
    exec(compile(ast.parse(out), "<folded>", "exec"), {"make": lambda: [1], "c": True, "f": lambda v: v}, namespace)
    assert namespace.get("d") is None and namespace["b"] == 3
