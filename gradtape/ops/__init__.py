"""The vocabulary in which every op of gradtape is declared (read this before the chapter files).

An op is written once, in the file of its chapter of the Array API standard, with its gradient rule,
what the rule reads, and its input domain beside it:

    sin = unary("sin", domain=REAL, complex=True, saves="inputs")

    @sin.gradient
    def _sin_grad(xp, op, grad):
        "d sin(x) = cos(x) dx, so grad * conj(cos(x))."
        return grad * conj_(xp, xp.cos(op.inputs[0]))

* ``unary(name, domain, ...)`` / ``binary(name, domain, ...)`` declare an element-wise op and return
  the public function (``f(x, /)`` / ``f(x1, x2, /)``); ``defop(name, forward, domain, ...)`` declares
  any other op and returns its :class:`~gradtape.core.registry.OpDef`; ``public(opdef)`` links it to the
  hand-written public function.
* ``forward`` is the name of a function of the backend's Array API namespace (the default: the op's
  own name), or a callable ``forward(xp, *native_arrays, **attrs)`` (``forward_takes="backend"``
  declares ``forward(backend, ...)``, which gets the adapter; ``"arrays"`` the arrays alone).
* The op's public function calls :func:`~gradtape.core.dispatch.apply`, the one path of every op call
  (``unary`` and ``binary`` return ``apply`` itself, generated for one or two arguments).
* A rule is ``rule(xp, op, *output_grads)`` returning one gradient per input (``None``: no gradient),
  written once against the namespace ``xp`` the engine passes (the HIPS autograd idea):

  - nothing records the backward walk and the cotangent is real: ``xp`` is the backend's native
    namespace (:mod:`gradtape.core.rule_namespace`) and ``op`` the recorded :class:`~gradtape.core.engine.Node`
    itself, its ``op.inputs``/``op.outputs`` native arrays (an input passed as a Python scalar stays
    one).  No Tensor is made: this is the fast path, for every op;
  - an outer tape records the walk (higher order), the cotangent is complex, or the rule was set by
    ``gt.RegisterGradient``: ``xp`` is gradtape itself and ``op.inputs``/``op.outputs`` Tensors
    carrying their recorded identities, so outer tapes record what the rule computes.

  So a rule calls only ``xp.<function>`` and Python operators: the Array API, the registered ops
  declared ``xp_callable`` (every element-wise op, such as ``xp.xdivy`` and ``xp.multiply_no_nan``,
  and every op whose forward is a namespace function), and the extensions ``xp.linalg``, ``xp.fft``,
  ``xp.special``.  Never a gradtape function by its Python name: that would make Tensors in a native
  walk.  ``op.attrs`` holds the call's attributes, ``op.needs_grad(k)`` says whether input ``k``'s
  gradient is wanted.  Rules conjugate for complex inputs (TensorFlow's convention: the gradient of
  real ``L`` is ``2 dL/d conj(z)``; ``conj_(xp, x)`` is free on real values) and never undo
  broadcasting: the engine sums each gradient to its input's shape and casts it to its dtype.
* ``saves=`` (on ``defop``/``unary``/``binary``): the recorded values the rule reads --
  ``("inputs",)``, ``("outputs",)``, ``()`` or input indices; by default all.  The tape keeps only those
  (an input's shape and dtype always), so activations are freed with the forward (``tanh`` keeps its
  output, ``add`` nothing).  A registry-wide test runs every rule on a recording stub and fails if
  it reads what its op does not save.
* ``batched=True``: the rule also takes cotangents with extra leading (batch) axes (element-wise
  rules always do, and are declared so): ``tape.jacobian`` on a backend without ``vmap`` then walks
  once with a batch of cotangents instead of once per row.
* ``floating=True`` declares a function defined on floating inputs (``sin``, ``divide``): bool and
  integer inputs are computed in the default float dtype (``gt.config.floatx()``, float32 unless
  set), so every backend gives the same dtype (NumPy alone would give float16 for bool, float64
  for int64).  The standard's functions that require floating inputs (``FLOATING_FUNCTIONS``)
  are declared so by default.
* ``differentiable=False`` declares an op whose outputs carry no gradient (``gt.NotDifferentiable``).
* ``composite(name, fn, domain=...)`` declares a function of the standard that gradtape composes of
  other ops (``moveaxis`` is a ``permute_dims``): it has no rule of its own (it is differentiated
  through the ops it calls), and its domain gets it checked like every op.
* ``domain`` is a :mod:`gradtape.core.domains` declaration; ``complex=True`` adds complex samples.
  Every op has one: a meta-test fails otherwise.
"""

from __future__ import annotations

from gradtape.core import domains as _domains
from gradtape.core.dispatch import apply, apply1, fast_path
from gradtape.core.registry import OpDef, get_op, register

__all__ = ["unary", "binary", "defop", "public", "composite", "apply", "apply1", "batch_as"]

#: the standard's element-wise functions whose inputs "should have a floating-point data type" (and
#: gradtape's ``reciprocal``): a bool or integer input is computed in the default float dtype
#: (``gt.config.floatx()``) on every backend
FLOATING_FUNCTIONS = frozenset(
    {
        "acos",
        "acosh",
        "asin",
        "asinh",
        "atan",
        "atanh",
        "cos",
        "cosh",
        "exp",
        "expm1",
        "log",
        "log1p",
        "log2",
        "log10",
        "sin",
        "sinh",
        "sqrt",
        "tan",
        "tanh",
        "reciprocal",
        "atan2",
        "copysign",
        "divide",
        "hypot",
        "logaddexp",
        "nextafter",
    }
)


def defop(
    name, forward=None, *, domain=None, complex=False, differentiable=True, rule_form=None, batching=None, **keywords
):
    """Declare and register an op; returns its OpDef (decorate the rule with ``@opdef.gradient``).

    ``forward``: the name of a namespace function (default: the op's name) or a callable, called as
    ``forward_takes`` declares (``"xp"``, the default for a callable: ``forward(xp, *arrays,
    **attrs)``; ``"backend"``: the adapter first; ``"arrays"``: the arrays alone).  The other
    keywords are :func:`gradtape.core.registry.declare`'s, one per part of the op: what it computes
    (``nout``, ``floating``, ``float_out``, ``promote``, ``scalars``, ``xp_callable``,
    ``output_differentiable``), what its rule reads (``grad``, ``saves``, ``batched``;
    ``rule_form``: ``"xp"`` or ``"tf"``), its docs (``chapter``, ``doc``,
    ``convention``).  ``saves`` declares which recorded values the rule reads (``("inputs",)``,
    ``("outputs",)``, ``()``, or input indices; default all); ``batched`` that the rule takes
    leading batch axes on its cotangents; ``xp_callable`` that the forward takes the public
    function's arguments (rules may then call it as ``xp.<name>``; default: a forward named in the
    namespace); ``batching`` how it batches under ``gt.vmap`` (a kind of
    ``gradtape/backends/batching.py``'s ``KINDS``, or a callable; None: a warned loop)."""
    if complex and domain is not None:
        domain = _domains.with_complex(domain)
    op = register(OpDef(name, forward, domain=domain, differentiable=differentiable, rule_form=rule_form, **keywords))
    op.batching = batching
    return op


def batch_as(kind, *ops):
    """Declare how ``ops`` (OpDefs, or public functions with ``.op``) batch under ``gt.vmap``: ``kind``,
    a kind of ``gradtape/backends/batching.py``'s ``KINDS`` (``"reduction"``, ``"axis"``, ...)."""
    for op in ops:
        if isinstance(op, str):
            op = get_op(op)
        getattr(op, "op", op).batching = kind


def public(opdef):
    """Decorator linking a hand-written public function to its op (``fn.op``, ``fn.gradient``)."""

    def deco(fn):
        opdef.public = fn
        fn.op = opdef
        fn.gradient = opdef.gradient
        if opdef.doc is None:
            opdef.doc = (fn.__doc__ or "").strip().split("\n")[0]
        return fn

    return deco


def _finish(fn, op, doc):
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = doc or f"Element-wise ``{op.name}`` of the Array API standard, differentiable."
    fn.__module__ = "gradtape"
    fn.op = op
    fn.gradient = op.gradient
    op.public = fn
    return fn


def unary(name, domain=None, *, chapter="elementwise", floating=None, doc=None, **keywords):
    """Declare an element-wise op of one argument; returns the public function ``f(x, /)``
    (``floating``: see the module docstring; default: ``name in FLOATING_FUNCTIONS``; the other
    keywords are :func:`defop`'s)."""
    floating = name in FLOATING_FUNCTIONS if floating is None else bool(floating)
    op = defop(
        name,
        domain=domain,
        chapter=chapter,
        doc=doc,
        float_out=True,
        floating=floating,
        xp_callable=True,
        batched=True,
        batching="elementwise",
        **keywords,
    )

    return _finish(fast_path(op, 1), op, doc)


def binary(name, domain=None, *, chapter="elementwise", scalars=True, floating=None, doc=None, **keywords):
    """Declare an element-wise op of two arguments; returns the public function ``f(x1, x2, /)``
    (``floating``: see the module docstring; default: ``name in FLOATING_FUNCTIONS``; the other
    keywords are :func:`defop`'s)."""
    floating = name in FLOATING_FUNCTIONS if floating is None else bool(floating)
    op = defop(
        name,
        domain=domain,
        chapter=chapter,
        doc=doc,
        scalars=scalars,
        promote=True,
        float_out=True,
        floating=floating,
        xp_callable=True,
        batched=True,
        batching="elementwise",
        **keywords,
    )

    return _finish(fast_path(op, 2), op, doc)


def _through_its_parts(xp, op, *grads):
    raise AssertionError(f"{op.opdef.name} is a composite: the tape records the ops it calls, never it")


def composite(name, fn, *, domain, chapter, complex=False, doc=None):
    """Declare a public function composed of other ops (no node of its own is ever recorded): it
    is registered with its domain, so the conformance suite and the generated tests check its
    gradient like any op's, and the docs list it; returns ``fn``."""
    op = defop(
        name,
        name,
        domain=domain,
        chapter=chapter,
        complex=complex,
        doc=doc,
        grad=_through_its_parts,
        convention="a composite: differentiated through the ops it calls",
    )
    public(op)(fn)
    return fn
