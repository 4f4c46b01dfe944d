"""``einsum`` (``tf.einsum``, ``tf.linalg.einsum``, ``numpy.einsum``): Einstein summation, an op of its own.

Its forward is the library's own einsum where it has one (the adapters' ``overrides``: NumPy, PyTorch,
JAX, Dask, CuPy) and, where it has none (array_api_strict), the composite below, written on the Array
API alone: diagonals by ``take``, contractions by one batched ``matmul`` per pair of operands.

Its rule is einsum again: the gradient of an operand is the einsum of the cotangent with the other
operands (conjugated), written out to the operand's labels.  Three cases need more than that einsum:

* a label the operand shares with no other operand nor the output (summed out by the forward): the
  gradient is constant along it, so it is broadcast back;
* an axis of size 1 that broadcasts against a longer one (of the ellipsis, or of a label, as NumPy
  allows): it gets a label of its own, so the einsum sums the cotangent over the broadcast axis;
* a repeated label (``"ii->i"``, ``"ii->"``): the einsum gives the diagonal, and an einsum with an
  identity matrix puts it on the diagonal of a zero matrix.

Subscripts are NumPy's, explicit (``"ij,jk->ik"``) or implicit (``"ij,jk"``: the labels that appear
once, in alphabetical order, after the ellipsis's axes), with ``...`` for broadcast axes.  The public
function checks them against the operands' shapes (a ``ValueError`` naming einsum) and hands the op
the explicit form.
"""

from __future__ import annotations

import string

from gradtape.backends.batching import NoBatchingRule
from gradtape.core.domains import REAL, Case, with_complex
from gradtape.core.tensor import Tensor, convert_to_tensor
from gradtape.ops import apply, defop, public
from gradtape.ops.elementwise import conj_
from gradtape.ops.linalg_extension import _device, _eye

__all__ = ["einsum", "parse_subscripts"]

_LETTERS = string.ascii_letters


# ---------------------------------------------------------------------------------------- parsing
def parse_subscripts(subscripts, shapes):
    """``(labels, out, explicit)`` of ``subscripts`` for operands of ``shapes``: each operand's labels,
    one per axis (a letter, or an int ``k`` for the ``k``-th axis of the ellipsis counted from the
    right, so operands with fewer broadcast axes get the rightmost ones, as NumPy), the output's
    labels, and the subscripts in explicit form.  A ``ValueError`` naming einsum for anything NumPy
    refuses."""
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: subscripts must be a str such as 'ij,jk->ik', got {type(subscripts).__name__}")
    s = subscripts.replace(" ", "")
    bad = sorted(set(s) - set(_LETTERS) - set(",.->"))
    if bad:
        raise ValueError(f"einsum: subscripts {subscripts!r} hold characters {bad} (labels are letters a-z, A-Z)")
    if s.count("->") > 1 or s.replace("->", "").count("-") or s.replace("->", "").count(">"):
        raise ValueError(f"einsum: subscripts {subscripts!r}: '->' must appear at most once, between inputs and output")
    lhs, arrow, rhs = s.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(shapes):
        raise ValueError(
            f"einsum: subscripts {subscripts!r} name {len(specs)} operand(s), but {len(shapes)} were given"
        )
    labels, n_ell, has_ell = [], 0, False
    for k, (spec, shape) in enumerate(zip(specs, shapes)):
        head, dots, tail = spec.partition("...")
        if "." in head + tail:
            raise ValueError(f"einsum: operand {k} of {subscripts!r}: '.' only as one ellipsis '...'")
        n = len(shape) - len(head) - len(tail) if dots else 0
        if n < 0 or (not dots and len(spec) != len(shape)):
            raise ValueError(
                f"einsum: operand {k} of {subscripts!r} has subscripts {spec!r} "
                f"but {len(shape)} dimension(s) (shape {tuple(shape)})"
            )
        has_ell = has_ell or bool(dots)
        n_ell = max(n_ell, n)
        labels.append(list(head) + [n - 1 - i for i in range(n)] + list(tail))
    if arrow:
        head, dots, tail = rhs.partition("...")
        if "." in head + tail:
            raise ValueError(f"einsum: output of {subscripts!r}: '.' only as one ellipsis '...'")
        if not dots and n_ell:
            raise ValueError(
                f"einsum: subscripts {subscripts!r}: the operands have {n_ell} broadcast dimension(s) ('...') "
                "but the output has no '...' (as NumPy: write '...' in the output)"
            )
        out = list(head) + [n_ell - 1 - i for i in range(n_ell)] + list(tail)
        seen = [c for c in head + tail]
        if len(set(seen)) != len(seen):
            raise ValueError(f"einsum: output subscripts of {subscripts!r} repeat a label")
        missing = sorted(set(seen) - {c for ls in labels for c in ls})
        if missing:
            raise ValueError(f"einsum: output labels {missing} of {subscripts!r} are in no operand")
    else:
        counts = {}
        for ls in labels:
            for c in ls:
                if isinstance(c, str):
                    counts[c] = counts.get(c, 0) + 1
        rhs = ("..." if has_ell else "") + "".join(sorted(c for c, m in counts.items() if m == 1))
        out = [n_ell - 1 - i for i in range(n_ell)] + sorted(c for c, m in counts.items() if m == 1)
    size = {}
    for k, (ls, shape) in enumerate(zip(labels, shapes)):
        for c, n in zip(ls, shape):
            m = size.get(c, 1)
            if n != m and 1 not in (n, m):
                what = f"label {c!r}" if isinstance(c, str) else "the ellipsis '...'"
                raise ValueError(
                    f"einsum: {what} of {subscripts!r} has size {m} in one operand and {n} in operand {k} "
                    "(sizes must be equal, or 1 to broadcast)"
                )
            size[c] = max(m, n)
    return labels, out, lhs + "->" + rhs


def _sizes(labels, shapes):
    size = {}
    for ls, shape in zip(labels, shapes):
        for c, n in zip(ls, shape):
            size[c] = max(size.get(c, 1), n)
    return size


# ------------------------------------------------------------ the composite forward (Array API alone)
def _diagonal(xp, x, labels):
    """The diagonal over every label repeated in ``labels`` (``"ii"`` -> ``"i"``)."""
    while len(set(labels)) < len(labels):
        i = next(k for k, a in enumerate(labels) if labels.index(a) != k)
        j = labels.index(labels[i])
        n = x.shape[i]
        rest = [k for k in range(x.ndim) if k not in (i, j)]
        x = xp.reshape(xp.permute_dims(x, (*rest, j, i)), (*[x.shape[k] for k in rest], n * n))
        x = xp.take(x, xp.arange(0, n * n, n + 1, device=_device(x)), axis=-1)
        labels = [labels[k] for k in rest] + [labels[j]]
    return x, labels


def _sum_out(xp, x, labels, keep):
    axes = tuple(k for k, a in enumerate(labels) if a not in keep)
    if not axes:
        return x, labels
    return xp.sum(x, axis=axes, dtype=x.dtype), [a for a in labels if a in keep]  # (integers keep their dtype)


def _contract(xp, a, la, b, lb, keep):
    """``a`` (labels ``la``) times ``b`` (``lb``) summed over their shared labels not in ``keep``,
    as one batched matmul: ``(batch, free_a, summed) @ (batch, summed, free_b)``."""
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    free_a = [c for c in la if c not in lb]
    free_b = [c for c in lb if c not in la]
    size = _sizes((la, lb), (a.shape, b.shape))

    def arrange(t, labels, order):
        t = xp.permute_dims(t, tuple(labels.index(c) for c in order))
        return xp.broadcast_to(t, tuple(size[c] for c in order))  # size-1 axes broadcast

    def prod(cs):
        n = 1
        for c in cs:
            n *= size[c]
        return n

    nb, na, ns, nf = prod(batch), prod(free_a), prod(summed), prod(free_b)
    a = xp.reshape(arrange(a, la, batch + free_a + summed), (nb, na, ns))
    b = xp.reshape(arrange(b, lb, batch + summed + free_b), (nb, ns, nf))
    y = xp.matmul(a, b)
    return xp.reshape(y, tuple(size[c] for c in batch + free_a + free_b)), batch + free_a + free_b


def einsum_composite(xp, *arrays, subscripts):
    """``einsum`` on the Array API alone (the forward where the library has no einsum): diagonals by
    ``take``, then the operands contracted left to right, each pair by one batched ``matmul``, every
    label summed out as soon as no later operand nor the output needs it."""
    labels, out, _ = parse_subscripts(subscripts, [a.shape for a in arrays])
    size = _sizes(labels, [a.shape for a in arrays])
    terms = [_diagonal(xp, t, ls) for t, ls in zip(arrays, labels)]
    x, lx = terms[0]
    for k in range(1, len(terms) + 1):
        later = set(out).union(*(ls for _, ls in terms[k:]))
        rhs = terms[k][1] if k < len(terms) else []
        x, lx = _sum_out(xp, x, lx, later | set(rhs))
        if k == len(terms):
            break
        y, ly = _sum_out(xp, *terms[k], later | set(lx))
        x, lx = _contract(xp, x, lx, y, ly, later)
    if lx != out:
        x = xp.permute_dims(x, tuple(lx.index(c) for c in out))
    shape = tuple(size[c] for c in out)
    return x if tuple(x.shape) == shape else xp.broadcast_to(x, shape)  # (a single operand's size-1 axes)


# -------------------------------------------------------------------------------------------- the op
_einsum = defop(
    "einsum",
    einsum_composite,
    chapter="linear_algebra",
    scalars=False,
    promote=True,
    saves="inputs",
    batched=True,
    xp_callable=True,  # rules call xp.einsum(*arrays, subscripts=...) on either namespace
    domain=with_complex(
        [
            Case(REAL[2, 3], REAL[3, 4], subscripts="ij,jk->ik"),
            Case(REAL[2, 2, 3], REAL[2, 3, 4], subscripts="bij,bjk->bik"),
            Case(REAL[3, 3], subscripts="ii->"),
            Case(REAL[3, 3], subscripts="ii->i"),
            Case(REAL[2], REAL[3], subscripts="i,j->ij"),
            Case(REAL[2, 3, 4], REAL[4], subscripts="...i,i->..."),
            Case(REAL[2, 3], subscripts="ij->j"),
            Case(REAL[2, 3], REAL[3, 4], REAL[4, 2], subscripts="ij,jk,kl->il"),
            Case(REAL[2, 3], REAL[3, 4], subscripts="ij,jk"),
            Case(REAL[1, 3], REAL[2, 3], subscripts="...i,...i->...i"),
        ]
    ),
    doc="Einstein summation over the operands' labelled axes (NumPy's subscripts).",
)


@_einsum.gradient
def _einsum_grad(xp, op, grad):
    """d(operand k) = einsum of the cotangent with the other operands (conjugated), to operand k's
    labels: broadcast back along the labels only it has, summed over its broadcast size-1 axes, put
    on the diagonal of its repeated labels.  The cotangent may carry leading batch axes."""
    xs = op.inputs
    shapes = [tuple(x.shape) for x in xs]
    labels, out, _ = parse_subscripts(op.attrs["subscripts"], shapes)
    size = _sizes(labels, shapes)
    nb = grad.ndim - len(out)
    # every label a letter of its own; a size-1 axis that broadcasts gets a fresh one
    names = {}

    def letter(key):
        if key not in names:
            if len(names) == len(_LETTERS):
                raise ValueError("einsum's gradient needs more than 52 labels")
            names[key] = _LETTERS[len(names)]
        return names[key]

    batch = [letter(("batch", i)) for i in range(nb)]
    spec = [
        [letter(("own", j, a)) if n == 1 and size[c] > 1 else letter(c) for a, (c, n) in enumerate(zip(ls, shape))]
        for j, (ls, shape) in enumerate(zip(labels, shapes))
    ]
    g_spec = batch + [letter(c) for c in out]
    grads = []
    for k in range(len(xs)):
        if not op.needs_grad(k):
            grads.append(None)
            continue
        others = [(conj_(xp, xs[j]), spec[j]) for j in range(len(xs)) if j != k] + [(grad, g_spec)]
        have = {c for _, s in others for c in s}
        own = list(dict.fromkeys(spec[k]))  # operand k's labels, a repeated one once
        target = batch + [c for c in own if c in have]
        g = xp.einsum(
            *[t for t, _ in others], subscripts=",".join("".join(s) for _, s in others) + "->" + "".join(target)
        )
        # labels only operand k has (summed out by the forward): the gradient is constant along them
        extent = dict(zip(spec[k], shapes[k]))
        lost = [c for c in own if c not in have]
        if lost:
            g = xp.reshape(g, tuple(g.shape) + (1,) * len(lost))
            g = xp.broadcast_to(g, tuple(g.shape[: len(target)]) + tuple(extent[c] for c in lost))
            target = target + lost
        # a repeated label: the diagonal of a zero matrix, by an einsum with the identity
        final, eyes = list(batch), []
        for a, c in enumerate(spec[k]):
            if c in spec[k][:a]:
                c2 = letter(("diag", k, a))
                eyes.append((_eye(xp, g, extent[c]), c + c2))
                c = c2
            final.append(c)
        if eyes:
            g = xp.einsum(
                g,
                *[e for e, _ in eyes],
                subscripts=",".join(["".join(target)] + [s for _, s in eyes]) + "->" + "".join(final),
            )
        elif target != final:
            g = xp.permute_dims(g, tuple(target.index(c) for c in final))
        grads.append(g)
    return tuple(grads)


def _einsum_batching(bk, impl, args, attrs):
    """``gt.vmap``'s rule for einsum: a label no operand uses, prepended to the batched operands and the
    output (``"ij,jk->ik"`` on a batched first operand is ``"Zij,jk->Zik"``): one call of the library."""
    subscripts = attrs["subscripts"]
    lhs, _, rhs = subscripts.partition("->")
    free = next((c for c in reversed(_LETTERS) if c not in subscripts), None)
    if free is None:
        raise NoBatchingRule  # (every letter in use)
    specs = lhs.split(",")
    arrays = []
    for k, a in enumerate(args):
        if a.bat:
            specs[k] = free + specs[k]
        arrays.append(a.v)
    return impl(*arrays, subscripts=",".join(specs) + "->" + free + rhs)


_einsum.batching = _einsum_batching


@public(_einsum)
def einsum(*operands, subscripts=None, name=None):
    """Einstein summation (``tf.einsum(equation, *inputs)``, ``numpy.einsum``): ``einsum("ij,jk->ik", a,
    b)`` is ``a @ b``.  NumPy's subscripts, explicit (``"...ij,jk->...ik"``) or implicit (``"ij,jk"``);
    a repeated label takes a diagonal (``"ii->i"``), a label missing from the output is summed.  Rules
    may also call it as ``einsum(*operands, subscripts=...)``.  Differentiable on every backend, to any
    order: its gradient is einsum again."""
    if subscripts is None:
        if not operands or not isinstance(operands[0], str):
            raise TypeError("einsum(subscripts, *operands): the first argument must be the subscripts, a str")
        subscripts, operands = operands[0], operands[1:]
    if not operands:
        raise ValueError(f"einsum: subscripts {subscripts!r} and no operand")
    like = next((t for t in operands if isinstance(t, Tensor)), None)
    ts = tuple(t if isinstance(t, Tensor) else convert_to_tensor(t, like=like) for t in operands)
    _, _, explicit = parse_subscripts(subscripts, [t.shape for t in ts])
    return apply(_einsum, ts, {"subscripts": explicit})
