"""Input domains: where each op is sampled by the gradient checks and the conformance suite.

An op declares its domain next to its rule.  The vocabulary:

* a :class:`Sampler` (``REAL``, ``POSITIVE``, ``UNIT`` ...) draws float64 NumPy arrays of a shape
  from an interval, keeping away from kinks (``NONZERO`` avoids 0, where ``abs`` has one);
  ``REAL[2, 3]`` is an argument of that sampler and shape;
* :class:`Case` is one call of the op's public function: ``Case(REAL[2, 3], axis=1)`` is
  ``op.public(x, axis=1)`` with ``x`` drawn from ``REAL`` at shape ``(2, 3)``; positional arguments
  are Args (samplers with a shape), :class:`Pack` (a list of Args, for ``concat([a, b])``) or literal
  values passed as they are; then keyword arguments, passed as they are;
* the ``domain=`` of an op is a Sampler (unary ops: sampled at several shapes), a tuple of Samplers
  (binary ops: sampled at several shape pairs, broadcasting included), or a list of Cases;
  :func:`with_complex` adds complex versions of a domain, :func:`op_cases` lists an op's Cases.

Two maps keep structured inputs and gauge-dependent outputs comparable (linalg):

* ``Arg.via(fn)``: the drawn tensor is passed through ``fn`` (a function written in gradtape ops)
  before the call: ``REAL[3, 3].via(symmetrize)`` calls the op on ``(x + x^H) / 2``, so the function
  checked is ``x -> op(fn(x))``, defined for every ``x`` (finite differences may perturb any element,
  every backend reads the same matrix) and its gradient flows back through ``fn``;
* ``Case(...).map_outputs(fn)``: the op's result is passed through ``fn`` (gradtape ops again) before
  it is compared or differentiated, e.g. to fix the signs or phases of eigenvectors, which each
  library chooses in its own way: the checks then see a function with one well-defined value.
"""

from __future__ import annotations

import inspect

import numpy as np

__all__ = [
    "ANY",
    "BINARY_SHAPES",
    "BOOL",
    "BROADCAST_SHAPES",
    "COMPLEX",
    "DEFAULT_DEVICE",
    "GT_MINUS_ONE",
    "GT_ONE",
    "INT",
    "NONNEG",
    "NONZERO",
    "OFF_AXES",
    "POSITIVE",
    "REAL",
    "SMALL",
    "SPD",
    "UNARY_SHAPES",
    "UNIT",
    "Arg",
    "Case",
    "Pack",
    "Sampler",
    "expand",
    "first_real_and_complex",
    "is_complex_case",
    "nargs_of",
    "op_cases",
    "with_complex",
]


class Sampler:
    """Uniform samples in ``[lo, hi]`` (complex: real and imaginary parts), at least ``gap`` away
    from each point of ``avoid``; ``kind`` is 'f' (float), 'c' (complex), 'i' (int), 'b' (bool) or
    'spd' (symmetric positive definite matrices over the last two axes).

    ``edges``: the points at the border of the interval (or in ``avoid``) where an op sampled here
    may have an infinite or undefined derivative (0 for ``POSITIVE``, +-1 for ``UNIT``): the
    zero-cotangent checks evaluate every op there, where a masked branch must still give a zero,
    never a NaN, gradient.  Defaults to ``avoid``."""

    def __init__(self, name, lo=-2.0, hi=2.0, *, avoid=(), gap=0.15, kind="f", edges=None):
        self.name, self.lo, self.hi, self.avoid, self.gap, self.kind = name, lo, hi, tuple(avoid), gap, kind
        self.edges = tuple(self.avoid if edges is None else edges)

    def __repr__(self):
        return self.name

    def __getitem__(self, shape):
        if not isinstance(shape, tuple):
            shape = (shape,)
        return Arg(self, shape)

    def sample(self, rng: np.random.Generator, shape, dtype="float64"):
        if self.kind == "i":
            return rng.integers(int(self.lo), int(self.hi) + 1, size=shape).astype("int64")
        if self.kind == "b":
            return rng.integers(0, 2, size=shape).astype(bool)
        if self.kind == "spd":
            a = rng.uniform(-1, 1, size=shape)
            n = shape[-1]
            m = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
            return m.astype(dtype)
        x = self._real(rng, shape)
        if self.kind == "c":
            x = x + 1j * self._real(rng, shape)
            dtype = {"float64": "complex128", "float32": "complex64"}.get(str(dtype), dtype)
        return np.asarray(x).astype(dtype)

    def _real(self, rng, shape):
        x = rng.uniform(self.lo, self.hi, size=shape)
        for p in self.avoid:
            close = np.abs(x - p) < self.gap
            while close.any():
                x = np.where(close, rng.uniform(self.lo, self.hi, size=shape), x)
                close = np.abs(x - p) < self.gap
        return x

    def complex(self):
        """This interval in both the real and the imaginary part."""
        return Sampler(
            self.name + "_complex", self.lo, self.hi, avoid=self.avoid, gap=self.gap, kind="c", edges=self.edges
        )


class Arg:
    """An array argument of a case: a sampler and a shape (and a map applied before the call,
    see :meth:`via`)."""

    __slots__ = ("sampler", "shape", "map")

    def __init__(self, sampler, shape, map=None):
        self.sampler, self.shape, self.map = sampler, tuple(shape), map

    def __repr__(self):
        base = f"{self.sampler!r}{list(self.shape)}"
        return base if self.map is None else f"{base}.via({_fn_name(self.map)})"

    def via(self, fn):
        """This argument passed through ``fn`` (a function of one gradtape tensor, written in gradtape
        ops) before the op is called.  The drawn array stays the leaf that checks perturb and
        differentiate, so the function checked is ``x -> op(fn(x))``."""
        return Arg(self.sampler, self.shape, fn)

    @property
    def differentiable(self):
        return self.sampler.kind in "fc" or self.sampler.kind == "spd"


class Pack:
    """A positional argument that is a list of arrays (``concat([a, b], axis=0)``)."""

    __slots__ = ("args",)

    def __init__(self, *args):
        self.args = tuple(args)

    def __repr__(self):
        return f"[{', '.join(repr(a) for a in self.args)}]"


def _fn_name(fn):
    return getattr(fn, "__name__", None) or repr(fn)


def _complex_arg(a):
    if isinstance(a, Arg) and a.sampler.kind == "f":
        return Arg(a.sampler.complex(), a.shape, a.map)
    if isinstance(a, Pack):
        return Pack(*(_complex_arg(e) for e in a.args))
    return a


def _has_float(a):
    if isinstance(a, Pack):
        return any(_has_float(e) for e in a.args)
    return isinstance(a, Arg) and a.sampler.kind == "f"


class _DefaultDevice:
    """A literal argument of a :class:`Case`: the name of the active backend's default device where
    the case is drawn (``"cpu"``; ``"cuda:0"`` on CuPy, which has no CPU device)."""

    __slots__ = ()

    def __repr__(self):
        return "DEFAULT_DEVICE"


DEFAULT_DEVICE = _DefaultDevice()
#: what :data:`DEFAULT_DEVICE` draws as: set by ``gradtape.core.config`` (a layer above this pure data)
#: to the active backend's default device name
DEFAULT_DEVICE_NAME = [lambda: "cpu"]


class Case:
    """One sample call of an op's public function: positional arguments (Args, Packs of Args, or
    literal values) and keywords (passed as they are)."""

    __slots__ = ("args", "kwargs", "out_map")

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs, self.out_map = args, kwargs, None

    def __repr__(self):
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        tail = "" if self.out_map is None else f".map_outputs({_fn_name(self.out_map)})"
        return f"Case({', '.join(parts)}){tail}"

    def map_outputs(self, fn):
        """This case with the op's result passed through ``fn`` (gradtape ops; it takes the result,
        a Tensor or a tuple of them, and returns the same structure) before it is compared or
        differentiated: a gauge fix for outputs each library may choose differently (the signs of
        eigenvectors, say)."""
        c = Case(*self.args, **self.kwargs)
        c.out_map = fn
        return c

    def draw(self, rng, dtype="float64"):
        """NumPy arrays for the Args (a list of them for a Pack; literals unchanged), and the
        keyword arguments."""

        def one(a):
            if isinstance(a, Arg):
                return a.sampler.sample(rng, a.shape, dtype)
            if isinstance(a, Pack):
                return [one(e) for e in a.args]
            if a is DEFAULT_DEVICE:
                return DEFAULT_DEVICE_NAME[0]()
            return a

        return [one(a) for a in self.args], dict(self.kwargs)

    def complex(self):
        """This case with every real (float) Arg drawn complex instead; None if it has none."""
        if not any(_has_float(a) for a in self.args):
            return None
        c = Case(*(_complex_arg(a) for a in self.args), **self.kwargs)
        c.out_map = self.out_map
        return c


# a scalar and a matrix; for two arguments, broadcasting in each direction (few shapes: on JAX each
# new shape is an XLA compilation)
UNARY_SHAPES = [(), (2, 3)]
# broadcasting that both adds leading axes and stretches size-1 axes, each argument in turn the
# shorter one: (2, 1, 3) with (4, 1) is (2, 4, 3), so undoing it sums the shorter argument's gradient
# over an added axis and over a stretched one that is not its first (the axis arithmetic of
# gradtape.core.unbroadcast), and the longer argument's over a stretched middle axis
BROADCAST_SHAPES = [((2, 1, 3), (4, 1)), ((4, 1), (2, 1, 3))]
BINARY_SHAPES = [((), ()), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 2))] + BROADCAST_SHAPES

REAL = Sampler("REAL", edges=(0.0,))
ANY = REAL
POSITIVE = Sampler("POSITIVE", 0.2, 3.0, edges=(0.0,))
NONNEG = POSITIVE
UNIT = Sampler("UNIT", -0.9, 0.9, edges=(-1.0, 1.0))  # open (-1, 1)
GT_ONE = Sampler("GT_ONE", 1.2, 3.0, edges=(1.0,))
NONZERO = Sampler("NONZERO", -2.0, 2.0, avoid=(0.0,), gap=0.2)
SMALL = Sampler("SMALL", -1.0, 1.0)
COMPLEX = Sampler("COMPLEX", -2.0, 2.0, kind="c")
# complex numbers in every quadrant, away from both axes: where log, sqrt, the inverse trigonometric
# and hyperbolic functions have their branch cuts; their branch points (0, +-1, +-i: real and imaginary
# parts in 0, +-1) are the edges
OFF_AXES = Sampler("OFF_AXES", -2.0, 2.0, avoid=(0.0,), gap=0.3, kind="c", edges=(0.0, -1.0, 1.0))
GT_MINUS_ONE = Sampler("GT_MINUS_ONE", -0.8, 3.0, edges=(-1.0,))  # log1p: singular at -1
INT = Sampler("INT", -3, 3, kind="i")
BOOL = Sampler("BOOL", kind="b")
SPD = Sampler("SPD", kind="spd")


def with_complex(spec):
    """``spec`` followed by its complex version: complex samplers for a Sampler or a tuple of them,
    and for a list of Cases each case with real Args that has one (see :meth:`Case.complex`)."""
    if spec is None:
        return None
    if isinstance(spec, Sampler):
        return [spec, spec.complex()]
    if isinstance(spec, tuple) and all(isinstance(s, Sampler) for s in spec):
        return [spec, tuple(s.complex() for s in spec)]
    if isinstance(spec, Case):
        spec = [spec]
    if isinstance(spec, list):
        out = list(spec)
        seen = {repr(c) for c in out}
        for c in spec:  # idempotent: complex cases already there are not repeated
            if isinstance(c, Case):
                extra = [c.complex()]
            elif isinstance(c, (Sampler, tuple)):
                extra = with_complex(c)[1:]
            else:
                extra = []
            for e in extra:
                if e is not None and repr(e) not in seen:
                    seen.add(repr(e))
                    out.append(e)
        return out
    raise TypeError(f"cannot read a domain from {spec!r}")


def nargs_of(fn):
    """How many positional arguments without defaults ``fn`` takes (the arity of an op)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


def op_cases(opdef):
    """The Cases of a registered op (its ``domain`` expanded at its public function's arity)."""
    n = nargs_of(opdef.public) if opdef.public is not None else 1
    return expand(opdef.domain, n)


def is_complex_case(case):
    """Whether ``case`` draws a complex argument."""

    def kinds(a):
        if isinstance(a, Pack):
            return [k for e in a.args for k in kinds(e)]
        return [a.sampler.kind] if isinstance(a, Arg) else []

    return "c" in [k for a in case.args for k in kinds(a)]


def first_real_and_complex(cases):
    """The indices of the first real and the first complex case of ``cases``: one of each kind, where a
    suite cannot afford every shape (on JAX each new shape is an XLA compilation)."""
    real = [i for i, c in enumerate(cases) if not is_complex_case(c)]
    cplx = [i for i, c in enumerate(cases) if is_complex_case(c)]
    return real[:1] + cplx[:1]


def expand(spec, nargs):
    """The list of Cases a ``domain=`` declaration stands for (``nargs``: the op's arity, which
    a bare Sampler is repeated to)."""
    if spec is None:
        return []
    if isinstance(spec, Case):
        return [spec]
    if isinstance(spec, Sampler):
        spec = (spec,) * max(nargs, 1)
    if isinstance(spec, tuple) and all(isinstance(s, Sampler) for s in spec):
        if len(spec) == 1:
            return [Case(spec[0][s]) for s in UNARY_SHAPES]
        if len(spec) == 2:
            return [Case(spec[0][a], spec[1][b]) for a, b in BINARY_SHAPES]
        return [Case(*(s[sh] for s in spec)) for sh in UNARY_SHAPES]
    if isinstance(spec, (list, tuple)):
        out = []
        for c in spec:
            out.extend(expand(c, nargs))
        return out
    raise TypeError(f"cannot read a domain from {spec!r}")
