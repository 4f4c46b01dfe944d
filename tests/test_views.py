"""Views (issue 21, item 4): basic indexing returns a view that shares its values with its base, as in
NumPy, on every backend, and the writes are recorded so gradients through base and views stay right."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gradtape as gt
from gradtape.testing import finite_differences
from gradtape.ops import operators as _operators


def test_a_write_into_a_slice_reaches_its_base(backend):
    """The issue's repro (scikit-learn's GaussianMixture lost reg_covar this way)."""
    c = gt.zeros((2, 2), dtype=gt.float64)
    v = c[0, :]
    v[0] = 5.0
    assert float(c[0, 0]) == 5.0
    np.testing.assert_array_equal(v.numpy(), [5.0, 0.0])


def test_base_views_and_views_of_views_see_every_write(backend):
    a = np.arange(24.0).reshape(2, 3, 4)
    x = gt.asarray(a)
    row = x[1]  # (3, 4)
    col = row[:, 2]  # a view of a view
    other = x[..., ::-2]  # a sibling, negative step
    new = x[None, 0, 1:]  # None in the key
    x[1, 0, 2] = -1.0  # through the base
    a[1, 0, 2] = -1.0
    col[2] = -2.0  # through the view of a view
    a[1, 2, 2] = -2.0
    new[0, 0, 3] += 10.0  # in place, through a view with a new axis
    a[0, 1, 3] += 10.0
    row += 0.5  # in place on a view
    a[1] += 0.5
    for t, want in ((x, a), (row, a[1]), (col, a[1][:, 2]), (other, a[..., ::-2]), (new, a[None, 0, 1:])):
        np.testing.assert_array_equal(t.numpy(), want)


def test_scikit_learn_add_to_diagonal(backend):
    """scikit-learn's ``_add_to_diagonal`` on a covariance slice: ``array[i, i] += value``."""
    cov = gt.zeros((3, 2, 2), dtype=gt.float64)
    block = cov[1, :, :]
    for i in range(2):
        block[i, i] += 0.25
    want = np.zeros((3, 2, 2))
    want[1] += 0.25 * np.eye(2)
    np.testing.assert_array_equal(cov.numpy(), want)


def test_advanced_indexing_and_scalars_are_copies(backend):
    """As NumPy: integer arrays and masks copy, and so do ints on every axis (NumPy's scalar)."""
    x = gt.asarray(np.arange(6.0).reshape(2, 3))
    picked = x[gt.asarray([1, 0])]
    scalar = x[1, 2]
    masked = x[np.array([True, False])]
    picked[0, 0] = 100.0
    scalar += 1.0
    masked[0] = 7.0
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(2, 3))
    x[1, 2] = -5.0
    assert float(scalar) == 6.0 and float(picked[0, 2]) == 5.0


def test_in_place_update_that_changes_dtype_or_shape_raises(backend):
    x = gt.asarray(np.arange(6).reshape(2, 3))
    row = x[0]
    with pytest.raises(TypeError, match="shares its values with views"):
        row += 0.5
    with pytest.raises(ValueError, match="shares its values with views"):
        x += gt.ones((4, 2, 3), dtype=x.dtype)
    np.testing.assert_array_equal(x.numpy(), np.arange(6).reshape(2, 3))
    del row
    x += 0.5  # no view left: the rebinding update as before
    assert x.dtype.is_floating


def test_views_are_dropped_with_their_last_reference(backend):
    x = gt.ones((4, 3))
    gc.collect()
    before = len(_operators._LINKS), len(_operators._FAMILIES)
    total = gt.zeros((3,))
    for i in range(4):
        total = total + x[i]  # each view dies with its line
    kept = x[0]
    assert len(_operators._LINKS) == before[0] + 1
    del kept
    assert (len(_operators._LINKS), len(_operators._FAMILIES)) == before
    x[0, 0] = 2.0  # no view: a plain update
    np.testing.assert_array_equal(total.numpy(), [4.0, 4.0, 4.0])


def _brief_example(x, w, sum_=gt.sum):
    """The brief's: y = x * 1; v = y[0]; v[1] = w * 3, then a write through a view of the view and one
    through the base that reads the view (``sum_``: torch.sum runs the same program on torch's views)."""
    y = x * 1
    v = y[0]
    v[1] = w * 3
    vv = v[1:]
    vv[1] += w
    y[1, 0] = v[2] * 2
    return sum_(y**2) + sum_(v * vv[0])


X = np.array([[1.0, -2.0, 3.0], [0.5, 5.0, -6.0]])
W = 0.7


def _gradients(example):
    """d example(x, w) / dx and / dw at (X, W), by gradtape, for the example's writes through views."""
    x = gt.asarray(X, dtype=gt.float64)
    w = gt.asarray(W, dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch([x, w])
        loss = example(x, w)
    gx, gw = tape.gradient(loss, [x, w])
    return gx.numpy(), float(gw)


def _assert_matches_finite_differences(example, rtol):
    gx, gw = _gradients(example)
    fd = finite_differences(
        lambda xa, wa: float(example(gt.asarray(xa, dtype=gt.float64), gt.asarray(wa, dtype=gt.float64))),
        [X, np.asarray(W)],
        eps=1e-6,
    )
    np.testing.assert_allclose(gx, fd[0][0], rtol=rtol, atol=1e-6)
    np.testing.assert_allclose(gw, fd[1][0], rtol=rtol)


def test_gradients_through_base_and_views_match_finite_differences(backend):
    _assert_matches_finite_differences(_brief_example, rtol=1e-7)


def test_gradients_through_base_and_views_match_torch_autograd(backend):
    torch = pytest.importorskip("torch")
    x = torch.tensor(X, requires_grad=True)
    w = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    _brief_example(x, w, sum_=torch.sum).backward()
    gx, gw = _gradients(_brief_example)
    np.testing.assert_allclose(gx, x.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gw, w.grad.item(), rtol=1e-12)


def test_variable_slices_follow_tensorflow(backend):
    """``v[k]`` of a Variable is a recorded read, a copy (tf.Variable's slice); its ``assign`` is
    TensorFlow's sliced assignment; writing into it raises, naming the ways that reach the variable."""
    v = gt.Variable(np.arange(6.0).reshape(2, 3))
    s = v[0]
    with gt.GradientTape() as tape:
        loss = gt.sum(v[1, 1:] * 2.0)
    np.testing.assert_array_equal(tape.gradient(loss, v).numpy(), [[0, 0, 0], [0, 2, 2]])
    v[0, 0] = 9.0  # a state update of the variable; the slice read before keeps its values
    np.testing.assert_array_equal(s.numpy(), [0.0, 1.0, 2.0])
    assert v[1, ::2].assign([-1.0, -2.0]) is v
    assert v[None, 0, 1].assign(7.0) is v
    np.testing.assert_array_equal(v.numpy(), [[9.0, 7.0, 2.0], [-1.0, 4.0, -2.0]])
    with pytest.raises(TypeError, match="sliced assignment"):
        s[0] = 1.0
    view_of_slice = s[1:]
    with pytest.raises(TypeError, match="sliced assignment"):
        view_of_slice[0] = 1.0
    s += 1.0  # rebinds to a new Tensor, as TensorFlow's (and a Variable's own ``v += 1``)
    assert type(s) is gt.Tensor
    np.testing.assert_array_equal(v.numpy()[0], [9.0, 7.0, 2.0])


def test_setitem_through_a_view_inside_gt_function(backend):
    def step(x, w):
        y = x * 1.0
        v = y[0]
        v[1] = w * 3.0
        return y

    f = gt.function(step)
    x = gt.asarray(X)
    for w in (0.5, 1.5):
        want = step(x, gt.asarray(w, dtype=x.dtype)).numpy()
        np.testing.assert_allclose(f(x, gt.asarray(w, dtype=x.dtype)).numpy(), want)
        assert want[0, 1] == w * 3.0


# ------------------------------------------------------------------------------- against NumPy
def _model_settings(examples):
    """The hypothesis settings of the NumPy-twin models: reproducible, no deadline (JAX compiles)."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        derandomize=True,
    )


@_model_settings(40)
@given(data=st.data())
def test_views_follow_numpy(backend, data):
    """Random basic keys and writes through the base, its views and views of views (and scalar
    copies), each done to a NumPy array too: every tensor ends equal to its NumPy twin."""

    def by_key(data, t, n):
        key = data.draw(hnp.basic_indices(n.shape, allow_newaxis=True, allow_ellipsis=True), label="key")
        return t[key], n[key]

    _follow_numpy(data, by_key, ["view", "view", "write", "write", "iadd"], newaxis_writes=True)


def _follow_numpy(data, make_view, actions, newaxis_writes):
    """The model both hypothesis tests run: a base and NumPy's twin; each step makes a view of one of
    them (``make_view(data, t, n)``: gradtape's and NumPy's), writes through one, or adds in place."""
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), label="shape")
    a = np.arange(float(np.prod(shape))).reshape(shape)
    objs = [(gt.asarray(a.copy()), a)]  # (no memory shared with the NumPy twin)
    for step in range(data.draw(st.integers(1, 8), label="steps")):
        t, n = objs[data.draw(st.integers(0, len(objs) - 1))]
        what = data.draw(st.sampled_from(actions))
        if what == "view":
            tv, nv = make_view(data, t, n)
            objs.append((tv, nv if isinstance(nv, np.ndarray) else np.array(nv)))  # a scalar: a copy
        elif what == "write":
            key = data.draw(hnp.basic_indices(n.shape, allow_newaxis=newaxis_writes, allow_ellipsis=True), label="key")
            target = n[key]
            value = 100.0 * (step + 1) + np.arange(np.size(target), dtype=np.float64).reshape(np.shape(target))
            n[key] = value
            t[key] = gt.asarray(value)
        else:
            n += 1.0
            t += 1.0
    for t, n in objs:
        assert t.shape == n.shape
        np.testing.assert_array_equal(t.numpy(), n)


def test_an_argument_written_through_a_view_inside_gt_function(backend):
    """A view made inside the step writes into its argument: the caller's tensor is updated, as eagerly."""

    def step(x, w):
        row = x[0]
        row[1] = w
        return x * 2.0

    f = gt.function(step)
    for w in (1.0, 2.0):
        x, x_eager = gt.zeros((2, 3)), gt.zeros((2, 3))
        out = f(x, gt.asarray(w))
        step(x_eager, gt.asarray(w))
        np.testing.assert_array_equal(x.numpy(), x_eager.numpy())
        np.testing.assert_array_equal(out.numpy(), 2.0 * x_eager.numpy())
        assert float(x[0, 1]) == w


# ------------------------------------------------------------------------------- views beyond indexing
def test_reshape_and_transpose_are_views(backend):
    """The brief's repros: a write into a reshape or a transpose reaches its base (NumPy: 5.0)."""
    c = gt.zeros((2, 3), dtype=gt.float64)
    r = gt.reshape(c, (3, 2))
    r[0, 0] = 5.0
    assert float(c[0, 0]) == 5.0
    c = gt.zeros((2, 3), dtype=gt.float64)
    t = c.T
    t[0, 0] = 5.0
    assert float(c[0, 0]) == 5.0
    c[1, 2] = 7.0  # and the other way round
    assert float(t[2, 1]) == 7.0


def test_every_view_making_function(backend):
    """permute_dims, .mT, matrix_transpose, moveaxis, squeeze, expand_dims, flip, unstack: each result shares its values
    with its base, as NumPy's (np.shares_memory holds for each on NumPy, checked here too)."""
    a = np.arange(24.0).reshape(2, 3, 4)
    x = gt.asarray(a)
    made = [
        (gt.permute_dims(x, (2, 0, 1)), np.permute_dims(a, (2, 0, 1))),
        (x.mT, a.mT),
        (gt.matrix_transpose(x), np.matrix_transpose(a)),
        (gt.moveaxis(x, 0, -1), np.moveaxis(a, 0, -1)),
        (gt.expand_dims(x, axis=(0, 2)), np.expand_dims(a, axis=(0, 2))),
        (gt.squeeze(x[:1], axis=0), np.squeeze(a[:1], axis=0)),
        (gt.flip(x, axis=1), np.flip(a, axis=1)),
        (gt.unstack(x, axis=-1)[2], np.unstack(a, axis=-1)[2]),
        (gt.reshape(x, (4, 6)), np.reshape(a, (4, 6))),
    ]
    for k, (t, n) in enumerate(made):
        assert np.shares_memory(n, a)
        t += float(k + 1)
        n += float(k + 1)
        for u, m in [(x, a)] + made:
            np.testing.assert_array_equal(u.numpy(), m)


def test_reshape_copies_where_numpy_copies(backend):
    """A reshape that NumPy cannot do without a copy (a transpose flattened, a strided slice) is a copy;
    with copy=False it raises, as NumPy's; copy=True always copies."""
    a = np.arange(6.0).reshape(2, 3)
    x = gt.asarray(a)
    flat_t = gt.reshape(x.T, (6,))
    assert not np.shares_memory(np.reshape(a.T, (6,)), a)
    flat_t[0] = 100.0
    np.testing.assert_array_equal(x.numpy(), a)
    with pytest.raises(ValueError, match="without a copy"):
        gt.reshape(x.T, (6,), copy=False)
    with pytest.raises(ValueError):
        np.reshape(a.T, (6,), copy=False)
    with pytest.raises(ValueError, match="without a copy"):
        gt.reshape(x[:, ::2], (4,), copy=False)
    split = gt.reshape(x.T, (3, 2, 1), copy=False)  # splitting an axis keeps the strides: a view
    assert np.shares_memory(np.reshape(a.T, (3, 2, 1), copy=False), a)
    split[2, 1, 0] = -1.0
    assert float(x[1, 2]) == -1.0
    c = gt.reshape(x, (3, 2), copy=True)
    c[0, 0] = 9.0
    assert float(x[0, 0]) == 0.0
    r = gt.reshape(x, (3, 2), copy=False)  # a tensor that is no view: always a view
    r[0, 1] = 8.0
    assert float(x[0, 1]) == 8.0


def test_a_variable_reshape_or_transpose_is_a_copy(backend):
    """As a Variable's slice (TensorFlow): its manipulations are reads, and writing them leaves it."""
    v = gt.Variable(np.arange(6.0).reshape(2, 3))
    t = v.T
    r = gt.reshape(v, (3, 2))
    t[0, 0] = 50.0
    r[0, 0] = 60.0
    np.testing.assert_array_equal(v.numpy(), np.arange(6.0).reshape(2, 3))


def test_scipy_patterns(backend):
    """What SciPy does: oaconvolve's ``swapaxes`` of a slice of a ``swapaxes`` written in place,
    ndimage's ``output = moveaxis(output, ...); output[...] = r``, tanhsinh's ``fr, fl =
    reshape(fj.T, (2, n, m)); fr[mask] = ...``."""
    ret = gt.zeros((4, 3), dtype=gt.float64)
    sary = gt.permute_dims(ret, (1, 0))
    sub = gt.permute_dims(sary[:, 1:3], (1, 0))
    sub += gt.ones((2, 3), dtype=gt.float64)
    want = np.zeros((4, 3))
    want[1:3] = 1.0
    np.testing.assert_array_equal(ret.numpy(), want)

    output = gt.zeros((2, 3, 4), dtype=gt.float64)
    moved = gt.moveaxis(output, 0, -1)
    r = np.arange(24.0).reshape(3, 4, 2)
    moved[...] = gt.asarray(r)
    np.testing.assert_array_equal(output.numpy(), np.moveaxis(r, -1, 0))

    n, m = 2, 3
    fj_np = np.arange(12.0).reshape(m * n, 2).T.copy().T  # (6, 2), as tanhsinh's (m*n, 2)
    fj = gt.asarray(fj_np)
    fr, fl = gt.reshape(fj.T, (2, n, m))
    nfr, nfl = np.reshape(fj_np.T, (2, n, m))
    mask = np.array([[True, False, True], [False, True, False]])
    fr[gt.asarray(mask)] = -1.0
    nfr[mask] = -1.0
    fl[0] = 7.0
    nfl[0] = 7.0
    np.testing.assert_array_equal(fj.numpy(), fj_np)
    np.testing.assert_array_equal(fr.numpy(), nfr)


def _manip_example(x, w):
    """Writes through a transpose, a reshape of it, a flip and an unstacked row, then a read of all."""
    y = x * 1.0
    t = y.T  # (3, 2)
    r = gt.reshape(t, (3, 2, 1))
    r[1, 0, 0] = w * 3.0
    f = gt.flip(y, axis=1)
    f[0] += w
    row = gt.unstack(y)[1]
    row[2] = t[0, 0] * w
    return gt.sum(y**2) + gt.sum(t[:, 0] * r[:, 1, 0]) + gt.sum(gt.squeeze(r, axis=2) ** 3)


def test_gradients_through_manipulation_views_match_finite_differences(backend):
    _assert_matches_finite_differences(_manip_example, rtol=1e-6)


def test_gradients_through_manipulation_views_match_torch_autograd(backend):
    """The same program on torch's own views (torch has no negative strides: the flip's write is
    written as the base write it is, ``y[0] += w``)."""
    torch = pytest.importorskip("torch")
    x = torch.tensor(X, requires_grad=True)
    w = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    y = x * 1.0
    t = y.T
    r = torch.reshape(t, (3, 2, 1))
    r[1, 0, 0] = w * 3.0
    y[0] += w
    row = y[1]  # (torch.unbind's views refuse in-place writes)
    row[2] = t[0, 0].clone() * w
    loss = (y**2).sum() + (t[:, 0] * r[:, 1, 0]).sum() + (torch.squeeze(r, 2) ** 3).sum()
    loss.backward()
    gx, gw = _gradients(_manip_example)
    np.testing.assert_allclose(gx, x.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gw, w.grad.item(), rtol=1e-12)


def test_an_argument_view_written_inside_gt_function_updates_its_base(backend):
    """A view passed to gt.function and written inside: its base (and the base's other views) see it,
    on the tracing call and on the compiled ones."""

    def step(x, w):
        x[1] = w
        return x * 2.0

    f = gt.function(step)
    for w in (1.0, 2.0, 3.0):
        base = gt.zeros((2, 3))
        row = base[0]
        other = base.T
        f(row, gt.asarray(w))
        np.testing.assert_array_equal(base.numpy(), [[0.0, w, 0.0], [0.0, 0.0, 0.0]])
        assert float(other[1, 0]) == w


def _manipulation(data, n):
    """A view-making function drawn for NumPy array ``n``: (its name, NumPy's result, gradtape's)."""
    nd = n.ndim
    kinds = ["permute_dims", "reshape", "expand_dims", "flip", "moveaxis", "key"]
    if nd >= 1 and 0 not in n.shape:
        kinds.append("unstack")
    if nd >= 2:
        kinds += ["mT", "T"] if nd == 2 else ["mT"]
    if 1 in n.shape:
        kinds.append("squeeze")
    kind = data.draw(st.sampled_from(kinds), label="function")
    if kind == "key":
        key = data.draw(hnp.basic_indices(n.shape, allow_newaxis=True, allow_ellipsis=True), label="key")
        return kind, n[key], lambda t: t[key]
    if kind == "permute_dims":
        axes = tuple(data.draw(st.permutations(range(nd)), label="axes"))
        return kind, np.permute_dims(n, axes), lambda t: gt.permute_dims(t, axes)
    if kind == "reshape":
        shapes = [(-1,), tuple(reversed(n.shape)), (1, *n.shape)]
        if nd >= 2:
            shapes += [(*n.shape[:-2], n.shape[-2] * n.shape[-1]), (n.shape[0], -1)]
        shape = data.draw(st.sampled_from(shapes), label="shape")
        return kind, np.reshape(n, shape), lambda t: gt.reshape(t, shape)
    if kind == "expand_dims":
        axis = data.draw(st.integers(-nd - 1, nd), label="axis")
        return kind, np.expand_dims(n, axis), lambda t: gt.expand_dims(t, axis=axis)
    if kind == "squeeze":
        axis = n.shape.index(1)
        return kind, np.squeeze(n, axis=axis), lambda t: gt.squeeze(t, axis=axis)
    if kind == "flip":
        axis = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1)) if nd else st.none(), label="axis")
        return kind, np.flip(n, axis=axis), lambda t: gt.flip(t, axis=axis)
    if kind == "moveaxis":
        if not nd:
            return kind, n[...], lambda t: t[...]
        src, dst = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
        return kind, np.moveaxis(n, src, dst), lambda t: gt.moveaxis(t, src, dst)
    if kind == "unstack":
        axis = data.draw(st.integers(-nd, nd - 1), label="axis")
        k = data.draw(st.integers(0, n.shape[axis] - 1), label="k")
        return kind, np.unstack(n, axis=axis)[k], lambda t: gt.unstack(t, axis=axis)[k]
    if kind == "T":
        return kind, n.T, lambda t: t.T
    return kind, n.mT, lambda t: t.mT


@_model_settings(60)
@given(data=st.data())
def test_manipulation_views_follow_numpy(backend, data):
    """Views made by indexing and by every view-making function (reshape where NumPy's is a view, a
    copy where NumPy copies), in chains, and writes through any of them, each done to a NumPy array
    too: every tensor ends equal to its NumPy twin."""

    def by_function(data, t, n):
        _, nv, fn = _manipulation(data, n)
        return fn(t), nv

    _follow_numpy(data, by_function, ["view", "view", "write", "iadd"], newaxis_writes=False)


def test_broadcast_to_and_diagonal_are_read_only_views(backend):
    """NumPy's broadcast_to and linalg.diagonal are read-only views: they see writes into their
    argument and refuse writes of their own (a ValueError, as NumPy's), also through a view of them;
    gradtape's own broadcasts (a constant's fill, meshgrid, broadcast_arrays) stay new, writable tensors."""
    a = np.zeros(3)
    x = gt.asarray(a)
    b, nb = gt.broadcast_to(x, (2, 3)), np.broadcast_to(a, (2, 3))
    assert np.shares_memory(nb, a) and not nb.flags.writeable
    x[1] = 5.0
    a[1] = 5.0
    np.testing.assert_array_equal(b.numpy(), nb)
    for write in (lambda: b.__setitem__((0, 0), 1.0), lambda: b.__iadd__(1.0), lambda: b[0].__setitem__(0, 1.0)):
        with pytest.raises(ValueError, match="read-only"):
            write()
    np.testing.assert_array_equal(x.numpy(), a)  # nothing changed
    m = np.arange(9.0).reshape(3, 3)
    t = gt.asarray(m)
    d, nd = gt.linalg.diagonal(t), np.linalg.diagonal(m)
    assert np.shares_memory(nd, m) and not nd.flags.writeable
    t[1, 1] = 7.0
    m[1, 1] = 7.0
    np.testing.assert_array_equal(d.numpy(), nd)
    with pytest.raises(ValueError, match="read-only"):
        d[0] = 1.0
    c = gt.constant(1.0, shape=(3,))
    c[0] = 2.0
    gx, _ = gt.meshgrid(gt.arange(3.0), gt.arange(2.0))
    gx[0, 0] = 9.0
    p, q = gt.broadcast_arrays(gt.zeros((3,)), gt.zeros((2, 3)))
    p[0, 0] = 1.0
    assert float(c[0]) == 2.0 and float(gx[0, 0]) == 9.0 and float(p[0, 0]) == 1.0


def test_gradient_through_a_broadcast_view_after_a_write_into_its_base(backend):
    """A broadcast view read after its base was written follows the write, and the gradient flows to
    both the base's original entries and the value written (finite differences)."""

    def f(xv, wv):
        y = xv * 1.0
        b = gt.broadcast_to(y, (2, 3))
        y[0] = wv * 3.0
        return gt.sum(b * b)

    x0, w0 = np.array([0.5, -1.0, 2.0]), np.array(0.7)
    x, w = gt.Variable(x0), gt.Variable(w0)
    with gt.GradientTape() as tape:
        loss = f(x, w)
    gx, gw = tape.gradient(loss, [x, w])
    fd = finite_differences(lambda xa, wa: float(f(gt.asarray(xa), gt.asarray(wa))), [x0, w0], eps=1e-6)
    np.testing.assert_allclose(gx.numpy(), fd[0][0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(float(gw), fd[1][0], rtol=1e-6)


@pytest.mark.parametrize(
    "update",
    [
        pytest.param(lambda x: x.__setitem__(0, 5.0), id="setitem"),
        pytest.param(lambda x: x.__iadd__(1.0), id="iadd"),
        pytest.param(lambda x: x[0:1].__setitem__(0, 5.0), id="through-a-view"),
    ],
)
def test_a_source_updated_in_place_after_recording_says_why_its_gradient_is_none(backend, update):
    """``y`` read ``x``, then ``x`` was updated in place: the update is a new tensor on the tape (as
    TensorFlow rebinds ``x``), so the gradient with respect to ``x`` is None; it was silent, it now
    warns, naming the update and its line; ``"zero"`` still fills zeros, and the value before the update,
    kept under its own name, gets its gradient."""
    x = gt.constant([1.0, 2.0], dtype=gt.float64)
    with gt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = gt.sum(x * x)
        update(x)
    changed = r"source 0 .* was changed by an? .*test_views.py:\d+ after the tape watched it"
    with pytest.warns(UserWarning, match=changed):
        assert tape.gradient(y, x) is None
    with pytest.warns(UserWarning, match="after the tape watched it"):
        z = tape.gradient(y, x, unconnected_gradients="zero")
    np.testing.assert_array_equal(z.numpy(), [0.0, 0.0])


def test_an_update_before_the_target_is_computed_does_not_warn(backend, recwarn):
    """The gradient with respect to the updated tensor, of a target computed from it, is its own:
    nothing to say."""
    x = gt.constant([1.0, 2.0], dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x)
        x[0] = 3.0
        x += 1.0
        y = gt.sum(x * x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [8.0, 6.0])
    assert not [w for w in recwarn if "watched it" in str(w.message)]


def test_the_value_kept_before_an_update_keeps_its_gradient(backend, recwarn):
    """The workaround the warning gives: keep the value, update a copy."""
    x0 = gt.constant([1.0, 2.0], dtype=gt.float64)
    with gt.GradientTape() as tape:
        tape.watch(x0)
        y = gt.sum(x0 * x0)
        x = gt.identity(x0)
        x[0] = 5.0
        y = y + gt.sum(x)
    np.testing.assert_allclose(tape.gradient(y, x0).numpy(), [2.0, 5.0])
    assert not [w for w in recwarn if "watched it" in str(w.message)]
