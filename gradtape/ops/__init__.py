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
  own name), or a callable ``forward(xp, *native_arrays, **attrs)``.
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
from gradtape.core import dtypes as _dt
from gradtape.core.dispatch import _FLOATS, _floats, _reraise, apply, apply1
from gradtape.core.registry import OpDef, register
from gradtape.core.engine import _NO_ATTRS, Node, _Meta, _tuple_new, record1, record2, saved_inputs
from gradtape.core.recording_state import _ACTIVE, _state
from gradtape.core.tensor import Tensor, Variable, _new, _next_id

__all__ = ["unary", "binary", "defop", "public", "composite", "apply", "apply1"]

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

#: backend -> the native dtypes (of arrays) that a Python float or int joins without changing them,
#: where the backend takes Python scalars as is (its floating and complex dtypes); else empty
_FC = {}


def _fc(b):
    s = _FC[b] = ((_FLOATS.get(b) or _floats(b)) if b.python_scalars else frozenset()) or frozenset({None})
    return s


def defop(
    name,
    forward=None,
    *,
    domain=None,
    grad=None,
    differentiable=True,
    nout=None,
    chapter=None,
    scalars=False,
    complex=False,
    doc=None,
    output_differentiable=None,
    convention=None,
    promote=False,
    saves=None,
    float_out=False,
    floating=False,
    xp_callable=None,
    batched=False,
):
    """Declare and register an op; returns its OpDef (decorate the rule with ``@opdef.gradient``).

    ``saves`` declares which recorded values the rule reads (``("inputs",)``, ``("outputs",)``,
    ``()``, or input indices; default all); ``batched`` that the rule takes leading batch axes on
    its cotangents; ``xp_callable`` that ``forward(xp, ...)`` takes the public function's arguments
    (rules may then call it as ``xp.<name>``; default: a forward named in the namespace)."""
    if complex and domain is not None:
        domain = _with_complex(domain)
    op = OpDef(
        name,
        forward,
        grad=grad,
        differentiable=differentiable,
        domain=domain,
        nout=nout,
        chapter=chapter,
        scalars=scalars,
        doc=doc,
        output_differentiable=output_differentiable,
        convention=convention,
        promote=promote,
        saves=saves,
        float_out=float_out,
        floating=floating,
        xp_callable=xp_callable,
        batched=batched,
    )
    return register(op)


def _with_complex(domain):
    return _domains.with_complex(domain)


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


def unary(
    name,
    domain=None,
    *,
    forward=None,
    grad=None,
    differentiable=True,
    complex=False,
    doc=None,
    chapter="elementwise",
    convention=None,
    saves=None,
    floating=None,
):
    """Declare an element-wise op of one argument; returns the public function ``f(x, /)``
    (``floating``: see the module docstring; default: ``name in FLOATING_FUNCTIONS``)."""
    floating = name in FLOATING_FUNCTIONS if floating is None else bool(floating)
    op = defop(
        name,
        forward,
        domain=domain,
        grad=grad,
        differentiable=differentiable,
        chapter=chapter,
        complex=complex,
        doc=doc,
        convention=convention,
        saves=saves,
        float_out=True,
        floating=floating,
        xp_callable=True,
        batched=True,
    )
    impls = op.impls

    def f(x, /):
        # fast path: a Tensor (not a Variable) whose backend's native function is resolved; the
        # tape check is one attribute read when nothing records
        if x.__class__ is Tensor:
            b = x._b
            impl = impls.get(b)
            if impl is not None:
                xv = x._v
                try:
                    v = impl(xv)
                except Exception as e:
                    if floating and xv.dtype not in (_FLOATS.get(b) or _floats(b)):
                        return apply1(op, x)  # a library refusing bool / int: cast to float32
                    _reraise(op, b, (x,), (xv,), e)
                # a floating function keeps a floating dtype; a bool / int input is computed again
                # in the default float dtype, gt.config.floatx() (cheaper here, where the dtype is
                # compared by identity, than a check before the call)
                if (
                    floating
                    and v.dtype is not xv.dtype
                    and xv.dtype not in (_FLOATS.get(b) or _floats(b))
                    and (not b.floating_ints_to_float32 or _dt.floatx() is not _dt.float32)
                ):
                    return apply1(op, x)
                if v.__class__ is not b.array_type:
                    v = b.fix_output(v)
                y = _new(Tensor)
                y._v = v
                y._b = b
                y._id = yid = _next_id()
                if _ACTIVE[0] and op.differentiable:
                    tapes = _state.tapes
                    if tapes:
                        if len(tapes) == 1:
                            # record1 inlined for the one-tape case (unary ops keep floats floating)
                            rec = tapes[0]
                            w = rec.watched
                            xid = x._id
                            if xid in w:
                                s = op._saves
                                rec.nodes.append(
                                    _tuple_new(
                                        Node,
                                        (op, (xid,), (xv,), _NO_ATTRS, (yid,), (v,), b)
                                        if s is None
                                        else (
                                            op,
                                            (xid,),
                                            (
                                                xv
                                                if s.inputs
                                                else None
                                                if xv.dtype is v.dtype or xv.dtype == v.dtype
                                                else _Meta(xv),
                                            ),
                                            _NO_ATTRS,
                                            (yid,),
                                            (v if s.outputs else None,),
                                            b,
                                        ),
                                    )
                                )
                                w.add(yid)
                        else:
                            record1(op, x._id, xv, v, yid, b, tapes)
                return y
        return apply1(op, x)

    return _finish(f, op, doc)


def binary(
    name,
    domain=None,
    *,
    forward=None,
    grad=None,
    differentiable=True,
    complex=False,
    doc=None,
    chapter="elementwise",
    scalars=True,
    convention=None,
    saves=None,
    floating=None,
):
    """Declare an element-wise op of two arguments; returns the public function ``f(x1, x2, /)``
    (``floating``: see the module docstring; default: ``name in FLOATING_FUNCTIONS``)."""
    floating = name in FLOATING_FUNCTIONS if floating is None else bool(floating)
    op = defop(
        name,
        forward,
        domain=domain,
        grad=grad,
        differentiable=differentiable,
        chapter=chapter,
        complex=complex,
        doc=doc,
        scalars=scalars,
        convention=convention,
        promote=True,
        saves=saves,
        float_out=True,
        floating=floating,
        xp_callable=True,
        batched=True,
    )
    impls = op.impls

    def f(x1, x2, /):
        # fast path: Tensors (not Variables) of one backend and dtype, or a Tensor and a Python
        # float/int the backend takes as is, the native function already resolved
        c1 = x1.__class__
        c2 = x2.__class__
        if c1 is Variable or c2 is Variable:
            # a Variable read is recorded through the general path (it may be watched on access)
            if _ACTIVE[0]:
                return apply(op, (x1, x2))
            c1 = Tensor if c1 is Variable else c1
            c2 = Tensor if c2 is Variable else c2
        if c1 is Tensor:
            b = x1._b
            v1 = x1._v
            if c2 is Tensor:
                v2 = x2._v if x2._b is b and x2._v.dtype is v1.dtype else None
            elif (c2 is float or c2 is int) and scalars and v1.dtype in (_FC.get(b) or _fc(b)):
                v2 = x2
            else:
                v2 = None
        elif c2 is Tensor and (c1 is float or c1 is int):
            b = x2._b
            v2 = x2._v
            v1 = x1 if scalars and v2.dtype in (_FC.get(b) or _fc(b)) else None
        else:
            v1 = v2 = None
        if v1 is not None and v2 is not None:
            impl = impls.get(b)
            if impl is not None:
                try:
                    v = impl(v1, v2)
                except Exception as e:
                    if floating and c1 is c2 and v1.dtype not in (_FLOATS.get(b) or _floats(b)):
                        return apply(op, (x1, x2))  # a library refusing bool / int: cast to float32
                    _reraise(op, b, (x1, x2), (v1, v2), e)
                # (two tensors of one dtype; with a Python scalar the tensor is floating already)
                if (
                    floating
                    and c1 is c2
                    and v.dtype is not v1.dtype
                    and v1.dtype not in (_FLOATS.get(b) or _floats(b))
                    and (not b.floating_ints_to_float32 or _dt.floatx() is not _dt.float32)
                ):
                    return apply(op, (x1, x2))
                if v.__class__ is not b.array_type:
                    v = b.fix_output(v)
                y = _new(Tensor)
                y._v = v
                y._b = b
                y._id = yid = _next_id()
                if _ACTIVE[0] and op.differentiable:
                    tapes = _state.tapes
                    if tapes:
                        id1 = x1._id if c1 is Tensor else 0
                        id2 = x2._id if c2 is Tensor else 0
                        if len(tapes) == 1:
                            # record2 inlined for the one-tape case
                            rec = tapes[0]
                            w = rec.watched
                            if id1 in w or id2 in w:
                                s = op._saves
                                if s is None:
                                    rec.nodes.append(
                                        _tuple_new(Node, (op, (id1, id2), (v1, v2), _NO_ATTRS, (yid,), (v,), b))
                                    )
                                else:
                                    ins = s.inputs
                                    if ins is False:
                                        # keep neither: None where shaped like the output (add, subtract)
                                        sv = (
                                            v1
                                            if c1 is not Tensor
                                            else None
                                            if v1.shape == v.shape and v1.dtype == v.dtype
                                            else _Meta(v1),
                                            v2
                                            if c2 is not Tensor
                                            else None
                                            if v2.shape == v.shape and v2.dtype == v.dtype
                                            else _Meta(v2),
                                        )
                                    else:
                                        sv = (v1, v2) if ins is True else saved_inputs(s, (v1, v2), v)
                                    rec.nodes.append(
                                        _tuple_new(
                                            Node,
                                            (op, (id1, id2), sv, _NO_ATTRS, (yid,), (v if s.outputs else None,), b),
                                        )
                                    )
                                w.add(yid)
                        else:
                            record2(op, id1, id2, v1, v2, v, yid, b, tapes)
                return y
        return apply(op, (x1, x2))

    return _finish(f, op, doc)


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
