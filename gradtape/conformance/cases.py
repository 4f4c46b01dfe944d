"""Cases from the registry: every op and the sample calls of its declared domain."""

from __future__ import annotations

from gradtape.core import registry
from gradtape.core.domains import op_cases


def cases(ops=None, *, differentiable_only=False, include_user=False):
    """Yield ``(opdef, case)`` for every registered op (or those named in ``ops``)."""
    wanted = None if ops is None else set(ops)
    for op in registry.differentiable_ops() if differentiable_only else registry.ops():
        if wanted is not None and op.name not in wanted:
            continue
        if op.chapter == "user" and not include_user:
            continue
        for case in op_cases(op):
            yield op, case


def uncovered_ops():
    """Built-in ops whose domain yields no case (a meta-test requires this to be empty)."""
    return [op.name for op in registry.ops() if op.chapter != "user" and not op_cases(op)]
