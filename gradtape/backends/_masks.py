"""The NaN-safe masks (docs/conventions.md) as the plain quotient / product where an eager array has no
zero to mask: one adapter-side wrapper of the chapter's masked forward of ``xdivy`` and
``strong_zero_multiply``, for the libraries whose arrays can answer "has it a zero?" cheaply (NumPy's
always; PyTorch's where the tensor is on the CPU and no transform, tracer or compiler holds it).

``xdivy(x1, x2)`` is ``x1 / x2`` where ``x1`` has no zero (the mask at ``x1 == 0`` changes nothing there:
the same bits in one call instead of three) and ``x1 / 1`` where ``x1`` is all zeros (a zero cotangent:
the mask's own quotient, ``x1`` with the signs of its zeros); ``strong_zero_multiply(x1, x2)`` is
``x1 * x2`` where neither factor has a zero (the same bits in one call instead of six) and +0 everywhere
where an array factor is all zeros (what the masks give).  Anything else, and any array the adapter
cannot test without a synchronisation or a trace, takes the chapter's masked forward.
"""

from __future__ import annotations

__all__ = ["NO_ZERO", "SOME_ZERO", "ALL_ZERO", "counted", "unmasked_where_no_zero"]

#: what an array's zero test says (:func:`unmasked_where_no_zero`'s ``zeros``): it has no zero (an
#: empty array too), some, or only zeros; None: its values cannot be read here
NO_ZERO, SOME_ZERO, ALL_ZERO = 0, 1, 2


def counted(count_nonzero, size):
    """A ``zeros`` test from ``count_nonzero(x)`` (its number of nonzero elements, an int) and
    ``size(x)`` (its number of elements), for a library whose arrays can always be read."""

    def zeros(x):
        n = count_nonzero(x)
        return NO_ZERO if n == size(x) else ALL_ZERO if not n else SOME_ZERO

    return zeros


def unmasked_where_no_zero(name, masked, array_type, zeros, zeros_like, readable=None, local=None):
    """The forward of op ``name`` (``"xdivy"`` or ``"strong_zero_multiply"``) around the chapter's
    ``masked`` one; None for another op.  ``array_type``: the library's eager array class (an exact
    match: a subclass takes the masks); ``zeros(x)``: for such an array, :data:`NO_ZERO`,
    :data:`SOME_ZERO` or :data:`ALL_ZERO`, or None where its values may not be read now (where
    ``local(x)`` is false, at least); ``zeros_like(x)``: +0 shaped and typed like it; ``readable()``:
    whether any value may be read during this call (asked once per call, before any array's
    ``zeros``; None: always); ``local(x)``: whether such an array is one whose values could be read
    here (on the host: no device to meet; None: every one)."""

    def beside(x1, x2):
        """Whether ``x2`` is a Python number or a local array of ``x1``'s shape and dtype (no
        broadcasting, no promotion, no other device: a result shaped and typed like ``x1``)."""
        c = x2.__class__
        return (
            c is float
            or c is int
            or (c is array_type and x2.shape == x1.shape and x2.dtype == x1.dtype and (local is None or local(x2)))
        )

    def xdivy(x1, x2, /):
        if x1.__class__ is array_type and (readable is None or readable()):
            z = zeros(x1)
            if z == NO_ZERO:
                return x1 / x2
            if z == ALL_ZERO and beside(x1, x2):
                return x1 / 1
        return masked(x1, x2)

    def strong_zero_multiply(x1, x2, /):
        c1 = x1.__class__
        c2 = x2.__class__
        if c1 is array_type:
            if readable is None or readable():
                z = zeros(x1)
                if z == NO_ZERO:
                    if zeros(x2) == NO_ZERO if c2 is array_type else (c2 is float or c2 is int) and x2 != 0:
                        return x1 * x2
                elif z == ALL_ZERO and beside(x1, x2):
                    return zeros_like(x1)
        elif c2 is array_type and (c1 is float or c1 is int) and (readable is None or readable()):
            z = zeros(x2)
            if z == NO_ZERO and x1 != 0:
                return x1 * x2
            if z == ALL_ZERO:
                return zeros_like(x2)
        return masked(x1, x2)

    return {"xdivy": xdivy, "strong_zero_multiply": strong_zero_multiply}.get(name)
