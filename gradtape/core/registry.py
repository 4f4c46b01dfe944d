"""The op registry: one :class:`OpDef` per op, holding what it computes, its gradient rule and its
input domain; ``RegisterGradient`` and ``NotDifferentiable`` as in TensorFlow's ``framework/ops.py``.

An ``OpDef`` is made of small named parts, each declared once:

* :class:`Computes` -- what the op computes: its forward and the forward's calling convention
  (``forward_takes``), the number of outputs, how it treats dtypes;
* :class:`Rule` -- its gradient rule, the rule's calling convention (``form``), what it reads
  (``saves``) and whether it takes a batch of cotangents;
* ``domain`` -- what inputs the conformance suite samples (:mod:`gradtape.core.domains`);
* :class:`Docs` -- its chapter, one-line doc and subgradient convention, for the docs.

Everything else (the namespace, the conformance cases, the docs tables) is derived from here.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, NamedTuple

__all__ = [
    "OpDef",
    "Computes",
    "Rule",
    "Docs",
    "Saves",
    "RegisterGradient",
    "NotDifferentiable",
    "get_op",
    "ops",
    "differentiable_ops",
    "rule_location",
    "FORWARD_TAKES",
    "RULE_FORMS",
    "check_new_name",
    "register",
]

_OPS: dict[str, OpDef] = {}
_PENDING_RULES: dict[str, tuple] = {}
_NOT_DIFFERENTIABLE_PENDING: set[str] = set()

#: how a forward is called: ``"name"`` (``forward`` names a function of the backend's namespace,
#: called on the arrays), ``"xp"`` (``forward(xp, *arrays, **attrs)``), ``"backend"``
#: (``forward(backend, *arrays, **attrs)``: the adapter object), ``"arrays"`` (``forward(*arrays,
#: **attrs)``)
FORWARD_TAKES = ("name", "xp", "backend", "arrays")
#: how a rule is called: ``"xp"`` (gradtape's ``rule(xp, op, *grads)``, on the namespace the walk
#: passes) or ``"tf"`` (TensorFlow's ``rule(op, *grads)``, always on Tensors)
RULE_FORMS = ("xp", "tf")


class Computes(NamedTuple):
    """What an op computes.

    ``forward``: the name of a function of the backend's namespace (``"fft.rfft"`` in an extension)
    or a callable, called as ``forward_takes`` says (:data:`FORWARD_TAKES`); ``nout``: None for one
    output, else the number of outputs; ``output_differentiable``: per output, whether it carries
    a gradient (None: every floating one); ``casts_to_float``: bool and integer inputs are computed
    in the default float dtype (``gt.config.floatx()``, a function of the standard defined on
    floating inputs, such as ``sin``); ``keeps_float``: a floating input gives a floating output,
    so recording needs no dtype check; ``promote``: inputs of different dtypes are cast to
    gradtape's result type first; ``scalars``: a Python scalar beside a tensor may be passed to the
    library as is; ``namespace_callable``: the native forward takes the public function's
    arguments, so rules may call it by name on the native namespace (``xp.xdivy``)."""

    forward: Any
    forward_takes: str
    nout: int | None = None
    output_differentiable: tuple | None = None
    casts_to_float: bool = False
    keeps_float: bool = False
    promote: bool = False
    scalars: bool = False
    namespace_callable: bool = False


class Rule(NamedTuple):
    """An op's gradient rule: ``fn`` (None: no rule), its calling convention ``form``
    (:data:`RULE_FORMS`), what it reads (``saves``: a :class:`Saves`, None for everything) and
    whether it takes extra leading batch axes on its cotangents (``batched``)."""

    fn: Any = None
    form: str = "xp"
    saves: Saves | None = None
    batched: bool = False


class Docs(NamedTuple):
    """What the docs say of an op: its ``chapter`` of the standard, a one-line ``doc``, and the
    subgradient ``convention`` at its kinks."""

    chapter: str | None = None
    doc: str | None = None
    convention: str | None = None


#: the attributes of an OpDef that mirror its parts, for the hot path (set only by ``_sync``)
_MIRRORS = frozenset(
    {
        "forward",
        "forward_takes",
        "nout",
        "output_differentiable",
        "floating",
        "float_out",
        "promote",
        "scalars",
        "xp_callable",
        "_grad",
        "rule_form",
        "xp_rule",
        "_saves",
        "batched",
    }
)


def _first_param(fn):
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    return params[0] if params else None


#: the ops whose forward takes the backend without declaring it (``forward_takes="backend"``):
#: their convention was read from the forward's first parameter (``tests/test_registry.py`` lists them)
UNDECLARED_BACKEND_FORWARDS: set[str] = set()


def _undeclared_forward(name, fn):
    """The convention of a callable forward declared without ``forward_takes``: ``"xp"`` (gradtape's
    form), or ``"backend"`` for a forward whose first parameter is named ``backend`` (op chapters
    that predate ``forward_takes``; noted in :data:`UNDECLARED_BACKEND_FORWARDS`)."""
    if _first_param(fn) == "backend":
        UNDECLARED_BACKEND_FORWARDS.add(name)
        return "backend"
    return "xp"


def undeclared_rule_form(fn, where):
    """The form of a rule given without a declared ``rule_form`` where TensorFlow's form is the
    default (``RegisterGradient``, ``op.grad = fn``): ``"tf"``; a rule whose first parameter is
    named ``xp`` is gradtape's form, taken with a ``FutureWarning`` that says how to declare it."""
    if _first_param(fn) != "xp":
        return "tf"
    warnings.warn(
        f"{where}: the rule {getattr(fn, '__qualname__', fn)!r} takes xp first, which is gradtape's form "
        "rule(xp, op, *grads); declare it (RegisterGradient(name, rule_form='xp'), op.set_rule(fn, 'xp') "
        "or @op.gradient): rules given without a form are TensorFlow's rule(op, *grads)",
        FutureWarning,
        stacklevel=3,
    )
    return "xp"


def declare(
    name,
    forward=None,
    *,
    forward_takes=None,
    nout=None,
    output_differentiable=None,
    floating=False,
    float_out=False,
    promote=False,
    scalars=False,
    xp_callable=None,
    grad=None,
    rule_form=None,
    saves=None,
    batched=False,
    chapter=None,
    doc=None,
    convention=None,
):
    """The parts of an op from the flat keywords of :func:`gradtape.ops.defop` (the one place they
    are mapped): ``(Computes, Rule, Docs)``.  ``floating`` is ``Computes.casts_to_float``,
    ``float_out`` ``Computes.keeps_float``, ``xp_callable`` ``Computes.namespace_callable``
    (default: a forward named in the namespace); ``rule_form`` defaults to ``"xp"``."""
    fwd = name if forward is None else forward
    if forward_takes is None:
        forward_takes = "name" if isinstance(fwd, str) else _undeclared_forward(name, fwd)
    if forward_takes not in FORWARD_TAKES:
        raise ValueError(f"op {name!r}: forward_takes must be one of {FORWARD_TAKES}, got {forward_takes!r}")
    if (forward_takes == "name") != isinstance(fwd, str):
        raise ValueError(f"op {name!r}: forward_takes='name' is for a forward named in the namespace (a str)")
    if rule_form is None:
        # (an OpDef made directly, not through defop, with an undeclared rule: the legacy reading
        # of its first parameter's name; defop, register_op and RegisterGradient declare the form)
        rule_form = "xp" if grad is None or _first_param(grad) == "xp" else "tf"
    if rule_form not in RULE_FORMS:
        raise ValueError(f"op {name!r}: rule_form must be one of {RULE_FORMS}, got {rule_form!r}")
    computes = Computes(
        fwd,
        forward_takes,
        nout,
        None if output_differentiable is None else tuple(output_differentiable),
        bool(floating),
        bool(float_out),
        bool(promote),
        bool(scalars),
        isinstance(fwd, str) if xp_callable is None else bool(xp_callable),
    )
    rule = Rule(grad, rule_form, None if saves is None else Saves.of(saves), bool(batched))
    return computes, rule, Docs(chapter, doc, convention)


class OpDef:
    """One op: its ``name``, its parts (:class:`Computes` ``computes``, :class:`Rule` ``rule``,
    ``domain``, :class:`Docs` ``docs``), ``differentiable`` (False: its outputs carry no gradient),
    ``public`` (the function users call) and ``impls`` (its native forward per backend, resolved
    once).

    ``OpDef(name, forward, **keywords)`` takes the keywords of :func:`declare`; or pass the parts.
    The flat attributes the engine reads on every call (``nout``, ``floating``, ``float_out``,
    ``promote``, ``scalars``, ``xp_callable``, ``xp_rule``, ``batched``, ...) mirror the parts and
    are read-only: change a part (``op.rule = op.rule._replace(...)``), or use ``op.saves = ...``,
    ``op.set_rule(fn, form)``, ``@op.gradient``.

    ``on_change``: None, or a function called after the op's parts (or ``differentiable``) change
    (``dispatch.fast_path`` regenerates the public function it folded the op's flags into).
    """

    __slots__ = (
        "name",
        "domain",
        "differentiable",
        "public",
        "impls",
        "_computes",
        "_rule",
        "docs",
        "on_change",
        "batching",
        *sorted(_MIRRORS),
        "__weakref__",
    )

    name: str
    # the hot path's mirrors of the parts (read-only; see _sync)
    forward: Any
    forward_takes: str
    nout: int | None
    output_differentiable: tuple | None
    floating: bool
    float_out: bool
    promote: bool
    scalars: bool
    xp_callable: bool
    _grad: Any
    rule_form: str
    xp_rule: bool
    _saves: Saves | None
    batched: bool

    def __init__(
        self,
        name,
        forward=None,
        *,
        computes=None,
        rule=None,
        docs=None,
        domain=None,
        differentiable=True,
        **keywords,
    ):
        if computes is None or rule is None or docs is None:
            c, r, d = declare(name, forward, **keywords)
            computes = c if computes is None else computes
            rule = r if rule is None else rule
            docs = d if docs is None else docs
        elif keywords or forward is not None:
            raise TypeError(f"OpDef({name!r}): pass either the parts or the keywords, not both")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "on_change", None)
        self.domain = domain
        self.differentiable = differentiable
        self.public = None
        self.impls = {}
        #: how the op batches under ``gt.vmap`` (``gradtape/backends/batching.py``): a kind's name
        #: (``"elementwise"``, ``"reduction"``, ...) or a callable; None: a loop over the batch, warned
        self.batching = None
        self.docs = docs
        object.__setattr__(self, "_computes", computes)
        object.__setattr__(self, "_rule", rule)
        self._sync()

    def _sync(self):
        """Set the hot path's mirrors from the parts (the only writer of them)."""
        s = object.__setattr__
        c = self._computes
        r = self._rule
        s(self, "forward", c.forward)
        s(self, "forward_takes", c.forward_takes)
        s(self, "nout", c.nout)
        s(self, "output_differentiable", c.output_differentiable)
        s(self, "floating", c.casts_to_float)
        s(self, "float_out", c.keeps_float)
        s(self, "promote", c.promote)
        s(self, "scalars", c.scalars)
        s(self, "xp_callable", c.namespace_callable)
        s(self, "_grad", r.fn)
        s(self, "rule_form", r.form)
        s(self, "xp_rule", r.fn is not None and r.form == "xp")
        s(self, "_saves", r.saves)
        s(self, "batched", r.batched)
        if self.on_change is not None:
            self.on_change()

    def __setattr__(self, name, value):
        if name in _MIRRORS or name == "name":
            raise AttributeError(
                f"OpDef.{name} is read-only (it mirrors the op's parts): set op.computes / op.rule "
                "(NamedTuple._replace), op.saves, or the rule with op.set_rule / @op.gradient"
            )
        object.__setattr__(self, name, value)
        if name == "differentiable" and self.on_change is not None:
            self.on_change()

    @property
    def computes(self):
        """What the op computes (a :class:`Computes`)."""
        return self._computes

    @computes.setter
    def computes(self, c):
        object.__setattr__(self, "_computes", c)
        self.impls.clear()
        self._sync()

    @property
    def rule(self):
        """The op's gradient rule and what it reads (a :class:`Rule`)."""
        return self._rule

    @rule.setter
    def rule(self, r):
        if r.form not in RULE_FORMS:
            raise ValueError(f"op {self.name!r}: rule_form must be one of {RULE_FORMS}, got {r.form!r}")
        object.__setattr__(self, "_rule", r)
        self._sync()

    chapter = property(lambda self: self.docs.chapter, doc="The standard's chapter the op belongs to.")
    convention = property(lambda self: self.docs.convention, doc="The subgradient convention at kinks.")

    @property
    def doc(self):
        """The op's one-line doc."""
        return self.docs.doc

    @doc.setter
    def doc(self, text):
        self.docs = self.docs._replace(doc=text)

    @property
    def saves(self):
        """Which recorded values the rule reads: None (all), or a
        :class:`Saves` (``saves=("inputs",)``, ``("outputs",)``, ``()``, input indices ``(1,)``...).
        What is not saved is freed as soon as the caller drops it."""
        return self._rule.saves

    @saves.setter
    def saves(self, spec):
        self.rule = self._rule._replace(saves=None if spec is None else Saves.of(spec))

    def __repr__(self):
        state = "rule" if self._grad is not None else ("not differentiable" if not self.differentiable else "no rule")
        return f"<OpDef {self.name!r} ({state})>"

    @property
    def grad(self):
        """The rule function (its form: ``op.rule_form``).  Assigning ``op.grad = fn`` sets a rule of
        the form it was declared with before (a rule read from ``op.grad``), else TensorFlow's
        ``rule(op, *grads)`` (see :func:`undeclared_rule_form`); ``op.set_rule(fn, form)`` declares it."""
        return self._grad

    @grad.setter
    def grad(self, fn):
        form = _DECLARED_FORMS.get(id(fn), (None, None))
        form = form[1] if form[0] is fn else None
        if fn is not None and form is None:
            form = undeclared_rule_form(fn, f"op {self.name!r}: op.grad = ...")
        self.set_rule(fn, form or "xp", saves=self._rule.saves)

    def set_rule(self, fn, form="xp", *, saves=None):
        """Set the rule ``fn`` of ``form`` (``"xp"``: ``rule(xp, op, *grads)``; ``"tf"``:
        ``rule(op, *grads)``) and what it reads (``saves``; None: everything)."""
        if fn is not None:
            _DECLARED_FORMS[id(fn)] = (fn, form)
        self.rule = self._rule._replace(fn=fn, form=form, saves=None if saves is None else Saves.of(saves))

    def gradient(self, fn):
        """Decorator: ``@sin.gradient`` sets the op's rule, ``rule(xp, op, *grads)`` (its definition
        sits next to the op); what it reads stays as the op declares."""
        self.set_rule(fn, "xp", saves=self._rule.saves)
        return fn

    def resolve(self, backend):
        """The native callable for ``backend`` (what ``backend.op_impl`` returns: an adapter's
        override, the namespace function, or ``forward`` bound to the namespace).  Cached per backend."""
        impl = self.impls[backend] = backend.op_impl(self)
        return impl


#: id(rule) -> (rule, form) for every rule set with a declared form (``op.grad = old`` restores one)
_DECLARED_FORMS: dict[int, tuple] = {}


class Saves:
    """What an op keeps for its rule: ``inputs`` (True, False or a tuple of input indices) and
    ``outputs`` (bool)."""

    __slots__ = ("inputs", "outputs")

    def __init__(self, inputs, outputs):
        self.inputs = inputs
        self.outputs = outputs

    @classmethod
    def of(cls, spec):
        if isinstance(spec, Saves):
            return spec
        if isinstance(spec, str):
            spec = (spec,)
        inputs = False
        outputs = False
        idx = []
        for s in spec:
            if s == "inputs":
                inputs = True
            elif s == "outputs":
                outputs = True
            elif isinstance(s, int) and not isinstance(s, bool):
                idx.append(s)
            else:
                raise ValueError(f"saves: expected 'inputs', 'outputs' or input indices, got {s!r}")
        if idx and not inputs:
            inputs = tuple(sorted(set(idx)))
        return cls(inputs, outputs)

    def __repr__(self):
        parts = []
        if self.inputs is True:
            parts.append("'inputs'")
        elif self.inputs:
            parts.extend(str(i) for i in self.inputs)
        if self.outputs:
            parts.append("'outputs'")
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def check_new_name(name: str) -> None:
    """A ``KeyError`` naming the first definition where an op called ``name`` is registered already."""
    if name in _OPS:
        raise KeyError(
            f"an op named {name!r} is already registered ({_OPS[name]!r}); "
            "pick another name or override its gradient with gt.RegisterGradient"
        )


def register(opdef: OpDef) -> OpDef:
    """Add an op to the registry (a duplicate name is a ``KeyError`` naming the first definition)."""
    check_new_name(opdef.name)
    _OPS[opdef.name] = opdef
    if opdef.name in _PENDING_RULES:
        fn, form = _PENDING_RULES.pop(opdef.name)
        opdef.set_rule(fn, form)
    if opdef.name in _NOT_DIFFERENTIABLE_PENDING:
        _NOT_DIFFERENTIABLE_PENDING.discard(opdef.name)
        opdef.differentiable = False
    return opdef


def get_op(name: str) -> OpDef:
    try:
        return _OPS[name]
    except KeyError:
        raise LookupError(f"no op named {name!r} is registered") from None


def ops():
    """Every registered op, in registration order."""
    return list(_OPS.values())


def differentiable_ops():
    """Registered ops whose outputs carry gradients and that have a rule."""
    return [o for o in _OPS.values() if o.differentiable and o.grad is not None]


class RegisterGradient:
    """Decorator registering (or overriding) the gradient rule of the op called ``op_name``.

    The rule is TensorFlow's ``f(op, *output_grads)`` and returns one gradient per input (``None``
    for none); ``op.inputs``, ``op.outputs`` and ``op.attrs`` describe the recorded call, as
    Tensors.  Rules written in gradtape ops are themselves recorded by outer tapes, so higher
    derivatives come for free.  ``rule_form="xp"`` declares gradtape's form ``f(xp, op,
    *output_grads)`` instead, which runs on native arrays when nothing records (a rule taking ``xp``
    first without the declaration works, with a ``FutureWarning``).  The op then keeps every input
    and output for the rule (a user's rule may read any of them).
    """

    def __init__(self, op_name: str, *, rule_form: str | None = None):
        if not isinstance(op_name, str):
            raise TypeError(f"RegisterGradient expects an op name (str), got {type(op_name).__name__}")
        if rule_form is not None and rule_form not in RULE_FORMS:
            raise ValueError(f"RegisterGradient({op_name!r}): rule_form must be one of {RULE_FORMS}, got {rule_form!r}")
        self._op_name = op_name
        self._form = rule_form

    def __call__(self, fn):
        form = self._form or undeclared_rule_form(fn, f"RegisterGradient({self._op_name!r})")
        op = _OPS.get(self._op_name)
        if op is None:
            _PENDING_RULES[self._op_name] = (fn, form)
        else:
            op.set_rule(fn, form)
            op.differentiable = True
        return fn


def NotDifferentiable(op_name: str) -> None:
    """Declare that the outputs of ``op_name`` carry no gradient (``None``, or zeros under
    ``unconnected_gradients="zero"``)."""
    if not isinstance(op_name, str):
        raise TypeError(f"NotDifferentiable expects an op name (str), got {type(op_name).__name__}")
    op = _OPS.get(op_name)
    if op is None:
        _NOT_DIFFERENTIABLE_PENDING.add(op_name)
    else:
        op.differentiable = False


def rule_location(op: OpDef) -> str:
    fn = op.grad
    if fn is None:
        return "<none>"
    code = getattr(fn, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else repr(fn)
