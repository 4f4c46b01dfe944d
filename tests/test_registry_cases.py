"""The registry-wide walks' cases per backend (tests/registry_cases.py): on JAX beside NumPy one case per
rule path of each op, and no op, rule path or dtype kind left out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import registry_cases
from gradtape.core import domains, registry

ROOT = Path(__file__).resolve().parents[1]
OPS = [op for op in registry.ops() if op.chapter != "user"]


def _kinds(case):
    def one(a):
        if isinstance(a, domains.Pack):
            return tuple(one(e) for e in a.args)
        return a.sampler.kind if isinstance(a, domains.Arg) else None

    return tuple(one(a) for a in case.args)


def test_every_rule_path_and_dtype_kind_of_every_op_keeps_a_case():
    for op in OPS:
        cases = domains.op_cases(op)
        kept = registry_cases.representatives(op)
        assert kept, op.name
        assert {registry_cases.rule_path(op, cases[i]) for i in kept} == {
            registry_cases.rule_path(op, c) for c in cases
        }, op.name
        assert {_kinds(cases[i]) for i in kept} == {_kinds(c) for c in cases}, op.name
        assert {repr(cases[i].kwargs) for i in kept} == {repr(c.kwargs) for c in cases}, op.name


def test_shapes_are_a_rule_path_outside_the_element_wise_chapters():
    matmul = registry.get_op("matmul")  # vectors, matrices, batches: each its own path
    assert len(registry_cases.representatives(matmul)) == len(domains.op_cases(matmul))
    sin = registry.get_op("sin")  # [] and [2, 3], real and complex: one real case and one complex
    kept = [domains.op_cases(sin)[i] for i in registry_cases.representatives(sin)]
    assert [repr(c) for c in kept] == ["Case(REAL[2, 3])", "Case(REAL_complex[2, 3])"]
    assert len(registry_cases.representatives(registry.get_op("subtract"))) == 2


def test_the_broadcasting_ops_keep_their_whole_domain():
    for name in registry_cases.FULL_DOMAIN:
        op = registry.get_op(name)
        assert registry_cases.representatives(op) == tuple(range(len(domains.op_cases(op)))), name
        shapes = {tuple(a.shape for a in c.args) for c in domains.op_cases(op)}
        assert set(domains.BROADCAST_SHAPES) <= shapes, name


def test_only_a_compiling_backend_beside_the_reference_is_sampled(monkeypatch):
    monkeypatch.delenv("GRADTAPE_TEST_FULL_DOMAINS", raising=False)
    sin = registry.get_op("sin")
    every = tuple(range(len(domains.op_cases(sin))))
    assert registry_cases.case_indices(sin, "jax", ["numpy", "jax"]) == (1, 3)
    assert registry_cases.case_indices(sin, "jax:gpu", ["numpy", "jax:gpu"]) == (1, 3)
    assert registry_cases.case_indices(sin, "jax", ["jax"]) == every  # nothing else checks the rest
    assert registry_cases.case_indices(sin, "numpy", ["numpy", "jax"]) == every
    assert registry_cases.case_indices(sin, "torch", ["numpy", "torch"]) == every
    monkeypatch.setenv("GRADTAPE_TEST_FULL_DOMAINS", "1")
    assert registry_cases.case_indices(sin, "jax", ["numpy", "jax"]) == every


def _collected(backends, full):
    env = {k: v for k, v in os.environ.items() if k not in ("GRADTAPE_TEST_FULL_DOMAINS", "GRADTAPE_TEST_BACKENDS")}
    if full:
        env["GRADTAPE_TEST_FULL_DOMAINS"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_gradients.py", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-k", "first_order and (sin- or matmul-)", "--backend", backends],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return {line for line in proc.stdout.splitlines() if "::" in line}, proc.stdout


def test_the_gradient_checks_deselect_the_other_cases_on_jax_only():
    pytest.importorskip("jax", reason="jax is not installed: nothing is sampled")
    ids, out = _collected("numpy,jax", full=False)
    jax_sin = sorted(i for i in ids if "[jax-sin-" in i)
    assert [i.split("[jax-", 1)[1].split("-Case")[0] for i in jax_sin] == ["sin-1", "sin-3"], out
    assert len([i for i in ids if "[numpy-sin-" in i]) == 4, out
    n_matmul = len(domains.op_cases(registry.get_op("matmul")))
    assert len([i for i in ids if "[jax-matmul-" in i]) == n_matmul, out
    full, out = _collected("numpy,jax", full=True)
    assert len([i for i in full if "[jax-sin-" in i]) == 4, out
    alone, out = _collected("jax", full=False)
    assert len([i for i in alone if "[jax-sin-" in i]) == 4, out
