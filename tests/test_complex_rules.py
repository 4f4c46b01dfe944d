"""Every complex rule against finite differences under gradtape's (TensorFlow's) convention.

For each op with complex samples (its declared domain) and each backend, the gradient of
``L = Re(sum(conj(c) * f(z)))`` -- ``c`` a fixed complex weight, so both the real and the imaginary
part of ``f`` are seen -- is compared with central finite differences in complex128:
``dL/dRe z + 1j dL/dIm z`` (``gradtape.testing.finite_differences``).  A rule that forgets a
``conj`` gives the mirror image: this test fails on it.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import gradtape as gt
from gradtape.core.domains import OFF_AXES, Arg, Case, op_cases
from gradtape.core.registry import ops
from gradtape.testing import finite_differences

CHAPTERS = ("elementwise", "special", "math")


def _complex_cases():
    out = []
    for o in ops():
        if o.public is None or not o.differentiable or o.chapter not in CHAPTERS:
            continue
        for c in op_cases(o):
            args = [a for a in c.args if isinstance(a, Arg)]
            if args and all(a.map is None for a in args) and any(a.sampler.kind == "c" for a in args):
                out.append(pytest.param(o.public, c, id=f"{o.name}-{c!r}"))
                break  # one complex case per op: the rule is the same at every shape
    # erf and erfc are declared on real samples (not every library computes them on complex
    # values); the rule must still be right where one does (NumPy's backend: SciPy)
    out.append(pytest.param(gt.special.erf, Case(OFF_AXES[3]), id="special.erf-complex"))
    out.append(pytest.param(gt.special.erfc, Case(OFF_AXES[3]), id="special.erfc-complex"))
    return out


CASES = _complex_cases()


def _loss(fn, weights):
    def loss(*xs):
        y = fn(*xs)
        return gt.sum(gt.real(gt.conj(weights) * y))

    return loss


def test_the_sweep_covers_the_holomorphic_ops():
    names = {p.id.split("-")[0] for p in CASES}
    for name in ("exp", "log", "sin", "tanh", "sqrt", "pow", "divide", "multiply", "special.erf", "special.erfc"):
        assert name in names, name


@pytest.mark.parametrize(("fn", "case"), CASES)
def test_complex_rule_matches_finite_differences(backend, fn, case):
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    args, kwargs = case.draw(rng, "float64")
    args = [a.astype(np.complex128) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in args]
    with gt.use_backend("numpy"):
        y0 = np.asarray(fn(*[gt.asarray(a) if isinstance(a, np.ndarray) else a for a in args], **kwargs).numpy())
    w = rng.normal(size=y0.shape) + 1j * rng.normal(size=y0.shape)
    wrt = [k for k, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "c"]

    def on_numpy(*xs):
        with gt.use_backend("numpy"):
            ts = [gt.asarray(a) if isinstance(a, np.ndarray) else a for a in xs]
            return float(_loss(lambda *t: fn(*t, **kwargs), gt.asarray(w))(*ts).numpy())

    fd = finite_differences(on_numpy, args, wrt=wrt)
    ts = [gt.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    leaves = [ts[k] for k in wrt]
    with gt.GradientTape() as tape:
        tape.watch(leaves)
        loss = _loss(lambda *t: fn(*t, **kwargs), gt.asarray(w))(*ts)
    grads = tape.gradient(loss, leaves)
    for k, g in zip(wrt, grads):
        np.testing.assert_allclose(g.numpy(), fd[k][0], rtol=1e-5, atol=1e-6, err_msg=f"argument {k}")


def test_erf_gradient_at_the_issue_point(backend):
    """At z = -0.6-0.12j the gradient of Re(erf(z)) is conj(erf'(z)) = 0.7904+0.1146j (TF's
    convention: dL/dRe + 1j dL/dIm), not erf'(z)."""
    z = gt.asarray(np.array(-0.6 - 0.12j))
    with gt.GradientTape() as tape:
        tape.watch(z)
        y = gt.real(gt.special.erf(z))
    g = complex(tape.gradient(y, z).numpy())
    expected = np.conj(2 / np.sqrt(np.pi) * np.exp(-((-0.6 - 0.12j) ** 2)))
    assert abs(g - expected) < 1e-12
    assert g.imag > 0
