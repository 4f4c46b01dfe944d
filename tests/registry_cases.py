"""Which cases of an op's domain the registry-wide walks run on each backend (tests/test_gradients.py,
tests/test_rules.py, tests/test_forward_walk.py).

Every op is checked on every selected backend.  The reference backend (NumPy) runs each op's whole domain.
A backend that compiles each op for each new shape and dtype (JAX: an XLA program each, 20-40 ms to lower
and compile, ~80% of its time in the suite) runs, in a run that also has the reference backend, one case per
*rule path* of each op: the cases that differ only in their shapes where the op's rule does not look at
shapes are one path there.  A case's path is the dtype kind and sampler of each argument, its ``via`` map,
the keyword arguments, the output map, and

* for the element-wise chapters (:data:`SHAPE_FREE_CHAPTERS`: a rule there is written element by element and
  the engine sums each gradient back to its argument's shape): nothing more -- the case with the most
  dimensions (the most broadcasting) stands for the others;
* for every other op (``matmul`` of a vector, a batch of matrices, a reduction over axes...): each argument's
  number of dimensions as well.

The engine's broadcasting (each argument's gradient summed back to its shape, by the backend's own
reductions over axis tuples) is exercised on every backend, every case, through the ops of
:data:`FULL_DOMAIN`.  ``GRADTAPE_TEST_FULL_DOMAINS=1`` runs every case on every backend (as a run without
the reference backend does: ``pytest --backend jax``).
"""

from __future__ import annotations

import functools
import os

from gradtape.core import domains

#: the backend that runs every op's whole domain
REFERENCE = "numpy"
#: backends that compile each op for each new shape and dtype
COMPILING = frozenset({"jax"})
#: chapters whose rules are element-wise: a case's shapes are not part of its rule path there
SHAPE_FREE_CHAPTERS = frozenset({"elementwise", "math", "special"})
#: ops whose whole domain runs on every backend: the broadcasting cases (scalar with array, (2, 1) with
#: (1, 3), (2, 1, 3) with (4, 1), both ways) of an op with one rule per argument of each form: the sum
#: (add), a product of the other argument (multiply), a quotient (divide), a power (pow)
FULL_DOMAIN = frozenset({"add", "multiply", "divide", "pow"})


def full_domains():
    """Whether ``GRADTAPE_TEST_FULL_DOMAINS=1`` asks for every case on every backend."""
    return os.environ.get("GRADTAPE_TEST_FULL_DOMAINS") == "1"


def _arg_path(a, shapes):
    if isinstance(a, domains.Pack):
        return tuple(_arg_path(e, shapes) for e in a.args)
    if isinstance(a, domains.Arg):
        fn = None if a.map is None else getattr(a.map, "__name__", repr(a.map))
        return (a.sampler.name, a.sampler.kind, fn, len(a.shape) if shapes else None)
    return repr(a)


def rule_path(op, case):
    """The rule path of ``case`` (a hashable key): see the module's docstring."""
    shapes = op.chapter not in SHAPE_FREE_CHAPTERS
    out = None if case.out_map is None else getattr(case.out_map, "__name__", repr(case.out_map))
    return (tuple(_arg_path(a, shapes) for a in case.args), repr(case.kwargs), out)


def _ndims(a):
    if isinstance(a, domains.Case):
        return sum(_ndims(e) for e in a.args)
    if isinstance(a, domains.Pack):
        return sum(_ndims(e) for e in a.args)
    return len(a.shape) if isinstance(a, domains.Arg) else 0


@functools.cache
def representatives(op):
    """The indices of ``op``'s cases that stand for its rule paths (each path's case with the most
    dimensions, the first of those), in domain order; every index for an op of :data:`FULL_DOMAIN`."""
    cases = domains.op_cases(op)
    if op.name in FULL_DOMAIN:
        return tuple(range(len(cases)))
    best = {}
    for i, case in enumerate(cases):
        key = rule_path(op, case)
        if key not in best or _ndims(case) > _ndims(cases[best[key]]):
            best[key] = i
    return tuple(sorted(best.values()))


def sampled(backend, selected):
    """Whether ``backend`` (a ``--backend`` entry, ``"jax"`` or ``"jax:gpu"``) runs the representatives only,
    in a run whose backends are ``selected``: a compiling backend, beside the reference."""
    return (
        backend.split(":")[0] in COMPILING
        and any(b.split(":")[0] == REFERENCE for b in selected)
        and not full_domains()
    )


def case_indices(op, backend, selected):
    """The indices of ``op``'s cases to run on ``backend`` in a run of ``selected`` backends."""
    if sampled(backend, selected):
        return representatives(op)
    return tuple(range(len(domains.op_cases(op))))
