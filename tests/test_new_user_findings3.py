"""What a third newcomer from JAX / torch.func, PyTorch or TensorFlow met (the ``newuser3`` brief): each
test fails on the code before its fix, and runs on every backend."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import gradtape as gt


def test_vmap_refuses_keyword_arguments_naming_itself_and_the_way_out(backend):
    """``gt.vmap(f)(x, s=2.0)``: JAX maps a keyword argument along axis 0, torch.func passes it
    unmapped; gradtape's TypeError blamed the user's function ("<lambda>() got an unexpected keyword
    argument 's'", a function that takes ``s``).  It now names gt.vmap and what to write, and that runs."""
    f = lambda a, s=1.0: a * s
    x = gt.ones((2, 3), dtype=gt.float64)
    with pytest.raises(TypeError, match=r"^gt\.vmap: keyword arguments \['s'\] .*functools\.partial"):
        gt.vmap(f)(x, s=2.0)
    np.testing.assert_allclose(np.asarray(gt.vmap(functools.partial(f, s=2.0))(x).numpy()), np.full((2, 3), 2.0))
    got = gt.vmap(f, in_axes=(0, None))(x, gt.constant([1.0, 2.0, 3.0], dtype=gt.float64))
    np.testing.assert_allclose(np.asarray(got.numpy()), [[1.0, 2.0, 3.0]] * 2)


def test_a_complex_gradient_is_the_conjugate_of_jax_grad_and_equals_torch(backend):
    """docs/transforms.md: ``gt.grad`` of a real function of complex inputs takes TensorFlow's and
    PyTorch's convention; ``jax.grad`` gives its conjugate (a JAX user reads this there)."""
    jax = pytest.importorskip("jax", reason="jax gives the reference gradient")
    torch = pytest.importorskip("torch", reason="torch gives the reference gradient")
    jnp = jax.numpy
    z = np.array([1.0 + 2.0j, 0.5 - 1.0j, -0.3 + 0.7j])
    got = gt.grad(lambda z: gt.sum(gt.abs(z) ** 3 + gt.real(z * z)))(gt.constant(z, dtype=gt.complex128))
    jax.config.update("jax_enable_x64", True)  # (as gradtape's jax backend sets it)
    want_jax = np.asarray(jax.grad(lambda z: jnp.sum(jnp.abs(z) ** 3 + jnp.real(z * z)))(jnp.asarray(z)))
    tz = torch.tensor(z, requires_grad=True)
    (torch.abs(tz) ** 3 + torch.real(tz * tz)).sum().backward()
    np.testing.assert_allclose(np.asarray(got.numpy()), np.conj(want_jax), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(got.numpy()), tz.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize(
    "update, says",
    [
        ("p -= 0.1 * g", r"variable\.assign_sub\(value\)"),
        ("p += g", r"variable\.assign_add\(value\)"),
        ("p *= 0.5", r"variable\.assign\(variable \* value\)"),
    ],
)
def test_an_in_place_operator_on_a_variable_is_tensorflows_runtime_error(backend, update, says):
    """PyTorch's update ``p -= lr * g`` on a gt.Variable rebound ``p`` to a tensor: the next step's
    tape did not watch it and its gradient was None, silently (training stopped).  TensorFlow 2 raises
    a RuntimeError naming ``assign_sub``; so does gradtape now, and the call it names trains."""
    p = gt.Variable([1.0, 2.0], dtype=gt.float64)
    kept = p
    for _ in range(2):
        with gt.GradientTape() as tape:
            loss = gt.reduce_sum(p * p)
        g = tape.gradient(loss, p)
        assert g is not None
        with pytest.raises(RuntimeError, match=rf"^`variable .= value` with a gt\.Variable is not supported .*{says}"):
            exec(update, {"p": p, "g": g})
        p.assign_sub(0.25 * g)
    assert p is kept and type(p) is gt.Variable
    np.testing.assert_allclose(np.asarray(p.numpy()), [0.25, 0.5])
    s = p[0]  # a slice of a variable is a tensor (TensorFlow's): ``s += 1`` gives a new tensor
    s += 1.0
    assert float(s) == 1.25 and p.numpy().tolist() == [0.25, 0.5]
    p[0] += 1.0  # (item assignment: a state update of the variable, as before)
    p[1:] -= 0.5
    assert type(p) is gt.Variable and p.numpy().tolist() == [1.25, 0.0]


def test_gradtapes_own_warnings_name_the_users_line(backend):
    """The retracing warning of gt.function and the optimizer's "Gradients do not exist" named
    ``sys:1`` (their fixed stacklevel counted one frame too many on the path the call took); they name
    the line of the user's call, whichever path led there."""

    @gt.function
    def scale(x, n):
        return x * n

    with pytest.warns(UserWarning, match="traced again on each of its last") as caught:
        for n in range(6):
            scale(gt.constant(1.0), n)
    assert {(w.filename, w.lineno) for w in caught} == {(__file__, _line_of("scale(gt.constant(1.0), n)"))}
    a, b = gt.Variable(1.0), gt.Variable(2.0)
    with gt.GradientTape() as tape:
        loss = a * a
    grads = tape.gradient(loss, [a, b])
    opt = gt.optimizers.SGD(0.1)
    for call in ("opt.apply_gradients(zip(grads, [a, b]))", "opt.apply(grads, [a, b])"):
        with pytest.warns(UserWarning, match="Gradients do not exist") as caught:
            exec(compile(call, __file__, "exec"), {"opt": opt, "grads": grads, "a": a, "b": b})
        assert [(w.filename, w.lineno) for w in caught] == [(__file__, 1)], call


def _line_of(text):
    """The line of this file where ``text`` first appears (the call whose line a warning names)."""
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


@pytest.mark.parametrize(
    "kw, says",
    [
        ({"in_axes": 2}, r"in_axes maps argument leaf 0 \(shape \(3, 2\)\) along axis 2"),
        ({"in_axes": -3}, r"in_axes maps argument leaf 0 \(shape \(3, 2\)\) along axis -3"),
        ({"out_axes": 2}, r"out_axes puts the examples of a result \(each of shape \(2,\)\) along axis 2"),
        ({"out_axes": -3}, r"out_axes puts the examples of a result \(each of shape \(2,\)\) along axis -3"),
    ],
)
def test_vmap_refuses_an_axis_out_of_range(backend, kw, says):
    """``gt.vmap(f, in_axes=2)`` of a matrix mapped over axis 2 % 2 = 0, silently (and out_axes
    wrapped the same way); JAX raises a ValueError, and so does gradtape now.  Axes in range, negative
    ones included, map as jax.vmap maps them."""
    x = np.arange(6.0).reshape(3, 2)
    with pytest.raises(ValueError, match=rf"^gt\.vmap: {says}, which needs at least 3 dimensions, but it has 2"):
        gt.vmap(lambda a: a * 2.0, **kw)(gt.constant(x, dtype=gt.float64))
    for in_axes, out_axes in [(-1, 0), (1, -1), (-2, -2), (0, 1)]:
        got = gt.vmap(lambda a: a * 2.0, in_axes=in_axes, out_axes=out_axes)(gt.constant(x, dtype=gt.float64))
        want = np.moveaxis(np.moveaxis(x, in_axes, 0) * 2.0, 0, out_axes)  # what jax.vmap gives
        np.testing.assert_array_equal(np.asarray(got.numpy()), want)


def test_recompute_grad_differentiates_tensors_in_dicts_tuples_and_keywords(backend):
    """``gt.recompute_grad(f)(params, x)`` with the weights in a dict (JAX's and PyTorch's habit:
    ``jax.checkpoint`` and ``torch.utils.checkpoint`` take any nesting): only the top-level tensors
    were the node's inputs, so the weights' gradient was zero from gt.grad and None from a tape, silently;
    a tensor passed by keyword, or a variable in a dict, the same."""
    jax = pytest.importorskip("jax", reason="jax.grad gives the reference gradient")
    jax.config.update("jax_enable_x64", True)  # (as gradtape's jax backend sets it)
    jnp = jax.numpy
    rng = np.random.default_rng(3)
    w, b, x = rng.normal(size=(3, 2)), rng.normal(size=2), rng.normal(size=(4, 3))

    def loss(xp, p, x, *, scale):
        h = xp.tanh(x @ p["w"] + p["b"][0])
        return xp.sum(h * h) * scale + xp.sum(p["w"] ** 2)

    want = jax.grad(lambda p, s: jax.checkpoint(functools.partial(loss, jnp))(p, x, scale=s), argnums=(0, 1))(
        {"w": w, "b": (b,)}, 1.5
    )
    f = gt.recompute_grad(functools.partial(loss, gt))
    params = {"w": gt.constant(w, dtype=gt.float64), "b": (gt.constant(b, dtype=gt.float64),)}
    scale = gt.constant(1.5, dtype=gt.float64)
    g, gs = gt.grad(lambda p, s: f(p, gt.constant(x, dtype=gt.float64), scale=s), argnums=(0, 1))(params, scale)
    np.testing.assert_allclose(np.asarray(g["w"].numpy()), want[0]["w"], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(g["b"][0].numpy()), want[0]["b"][0], rtol=1e-12)
    np.testing.assert_allclose(float(gs), float(want[1]), rtol=1e-12)
    v = gt.Variable(w, dtype=gt.float64)
    with gt.GradientTape() as tape:
        y = f({"w": v, "b": params["b"]}, gt.constant(x, dtype=gt.float64), scale=scale)
    np.testing.assert_allclose(np.asarray(tape.gradient(y, v).numpy()), want[0]["w"], rtol=1e-12)


def test_custom_gradient_takes_the_tensors_of_a_list_argument(backend):
    """TensorFlow's ``tf.custom_gradient`` flattens its arguments: ``f([a, b])`` differentiates ``a``
    and ``b``, ``grad_fn`` returning their gradients in the list's structure.  gradtape recorded only
    top-level tensors: the gradients were None, silently."""

    @gt.custom_gradient
    def product(xs, scale):
        y = xs[0] * xs[1] * scale

        def grad_fn(dy):
            return [dy * xs[1] * scale, dy * xs[0] * scale], None

        return y, grad_fn

    a, b = gt.constant(2.0, dtype=gt.float64), gt.constant(3.0, dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch([a, b])
        y = product([a, b], 0.5)
    assert [float(g) for g in tape.gradient(y, [a, b])] == [1.5, 1.0]


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "jacrev", "jacfwd", "hessian"])
def test_the_functional_transforms_pass_keyword_arguments_through(backend, transform):
    """``gt.grad(f)(x, scale=3.0)`` was a TypeError naming the user's function (which takes
    ``scale``); ``jax.grad`` and ``torch.func.grad`` pass keyword arguments through, undifferentiated."""

    def f(x, scale=1.0, *, power):
        return gt.sum(x**power) * scale

    x = gt.constant([1.0, 2.0], dtype=gt.float64)
    out = getattr(gt, transform)(f)(x, scale=3.0, power=3)
    want = {
        "grad": [9.0, 36.0],
        "value_and_grad": [9.0, 36.0],
        "jacrev": [9.0, 36.0],
        "jacfwd": [9.0, 36.0],
        "hessian": [[18.0, 0.0], [0.0, 36.0]],
    }[transform]
    if transform == "value_and_grad":
        assert float(out[0]) == 27.0
        out = out[1]
    np.testing.assert_allclose(out.numpy(), want)


@pytest.mark.parametrize(
    "call, name, argnums",
    [
        (lambda x: gt.hessian(lambda x: gt.sum(x))(x), "hessian", True),
        (lambda x: gt.vjp(lambda x: x, x), "vjp", False),
        (lambda x: gt.jvp(lambda x: x, (x,), (x,)), "jvp", False),
    ],
)
def test_an_integer_input_is_named_by_the_transform_called(backend, call, name, argnums):
    """``gt.hessian`` of an integer input said "gt.jacrev requires ..." (its parts), and gt.vjp / gt.jvp
    told the user to leave it out of an ``argnums`` they do not take."""
    with pytest.raises(TypeError, match=rf"^gt\.{name} requires floating") as info:
        call(gt.constant([1, 2]))
    assert ("argnums" in str(info.value)) == argnums


def test_divmod_of_a_tensor_is_its_floor_quotient_and_remainder(backend):
    """``divmod(t, 2)`` was a TypeError (NumPy and PyTorch take it); the remainder is differentiable."""
    t = gt.constant([7.0, -7.0, 7.5])
    with gt.GradientTape() as tape:
        tape.watch(t)
        q, r = divmod(t, 2.0)
    assert q.numpy().tolist() == [3.0, -4.0, 3.0] and r.numpy().tolist() == [1.0, 1.0, 1.5]
    assert tape.gradient(r, t).numpy().tolist() == [1.0, 1.0, 1.0]
    q2, r2 = divmod(7, gt.constant([2, -2]))
    assert q2.numpy().tolist() == [3, -4] and r2.numpy().tolist() == [1, -1]


@pytest.mark.parametrize(
    "make", ["gt.eye(2.5)", "gt.zeros(2.5)", "gt.ones((2, 1.5))", "gt.full((1.5,), 1.0)", "gt.linspace(0, 1, 2.5)"]
)
def test_a_size_with_a_fractional_part_is_an_error(backend, make):
    """``gt.zeros(2.5)`` had 2 elements and ``gt.eye(2.5)`` was 2 x 2, silently (``int()`` truncated);
    NumPy, PyTorch and JAX raise TypeError.  Integral values of any type still size it."""
    with pytest.raises(TypeError, match="must be an integer, got .*, which has a fractional part"):
        eval(make, {"gt": gt})
    assert gt.zeros(2.0).shape == (2,) and gt.eye(np.int64(2)).shape == (2, 2)


def test_a_numpy_array_of_sizes_is_a_shape(backend):
    """``gt.zeros(np.array([2, 3]))`` was a TypeError (NumPy and TensorFlow take it)."""
    assert gt.zeros(np.array([2, 3])).shape == (2, 3) and gt.random.normal(np.array([2, 3])).shape == (2, 3)
    assert gt.ones(np.array(4)).shape == (4,)
