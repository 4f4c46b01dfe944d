"""The op registry: one :class:`OpDef` per op, holding its forward, its gradient rule and its input
domain; ``RegisterGradient`` and ``NotDifferentiable`` as in TensorFlow's ``framework/ops.py``.

Everything else (the namespace, the conformance cases, the docs tables) is derived from here.
"""

from __future__ import annotations

import inspect

__all__ = [
    "OpDef",
    "RegisterGradient",
    "NotDifferentiable",
    "get_op",
    "ops",
    "differentiable_ops",
    "rule_location",
]

_OPS: dict[str, OpDef] = {}
_PENDING_RULES: dict[str, object] = {}
_NOT_DIFFERENTIABLE_PENDING: set[str] = set()


class OpDef:
    """One op: ``name``; ``forward`` (the name of a function of the backend's namespace, or a callable
    ``forward(xp, *native_arrays, **attrs)``, or ``forward(backend, ...)`` to get the Backend);
    ``grad`` (the rule ``rule(xp, op, *output_grads)``, written against the namespace ``xp`` the
    engine passes; a TensorFlow-style ``rule(op, *output_grads)`` on Tensors is accepted too);
    ``differentiable`` (False: outputs carry no gradient); ``domain`` (what inputs the conformance
    suite samples); ``nout`` (None for one output, else the number of outputs);
    ``public`` (the function users call); ``chapter`` (the standard's chapter it belongs to);
    ``floating`` (a function of the standard defined on floating inputs, such as ``sin``: bool and
    integer inputs are cast to the default float dtype, float32, so every backend agrees);
    ``xp_callable`` (the native forward takes the public function's arguments, so rules may call
    it by name on the native namespace: element-wise ops and namespace functions);
    ``batched`` (the rule accepts extra leading batch axes on its cotangents: a jacobian then walks
    once for every row).
    """

    __slots__ = (
        "name",
        "forward",
        "differentiable",
        "domain",
        "nout",
        "public",
        "impls",
        "chapter",
        "scalars",
        "doc",
        "output_differentiable",
        "convention",
        "promote",
        "_grad",
        "xp_rule",
        "_saves",
        "float_out",
        "floating",
        "xp_callable",
        "batched",
        "__weakref__",
    )

    def __init__(
        self,
        name,
        forward=None,
        *,
        grad=None,
        differentiable=True,
        domain=None,
        nout=None,
        chapter=None,
        scalars=False,
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
        self.name = name
        self.forward = name if forward is None else forward
        self.grad = grad
        self.differentiable = differentiable
        self.domain = domain
        self.nout = nout
        self.public = None
        self.impls = {}
        self.chapter = chapter
        self.scalars = scalars  # Python scalars may be passed through to the backend as is
        self.doc = doc
        self.output_differentiable = output_differentiable  # per-output mask for multi-output ops
        self.convention = convention  # the subgradient convention at kinks, for the docs
        self.promote = promote  # inputs of different dtypes are cast to gradtape's result_type
        self._saves = None
        self.saves = saves  # which recorded values the rule reads (None: all)
        self.float_out = float_out  # a floating input gives a floating output (no check)
        self.floating = floating  # bool / int inputs are computed in the default float dtype
        # the native forward takes the public function's arguments (rules may call it by name)
        self.xp_callable = isinstance(self.forward, str) if xp_callable is None else bool(xp_callable)
        self.batched = batched  # the rule takes extra leading batch axes on its cotangents

    @property
    def saves(self):
        """Which recorded values the rule reads: None (all), or a
        :class:`Saves` (``saves=("inputs",)``, ``("outputs",)``, ``()``, input indices ``(1,)``...).
        What is not saved is freed as soon as the caller drops it."""
        return self._saves

    @saves.setter
    def saves(self, spec):
        self._saves = None if spec is None else Saves.of(spec)

    def __repr__(self):
        state = "rule" if self.grad is not None else ("not differentiable" if not self.differentiable else "no rule")
        return f"<OpDef {self.name!r} ({state})>"

    @property
    def grad(self):
        """The rule: ``rule(xp, op, *output_grads)`` (``xp_rule``), or TensorFlow's form
        ``rule(op, *output_grads)``, which always runs on Tensors."""
        return self._grad

    @grad.setter
    def grad(self, fn):
        self._grad = fn
        self.xp_rule = fn is not None and _first_param(fn) == "xp"

    def gradient(self, fn):
        """Decorator: ``@sin.gradient`` sets the op's rule (its definition sits next to the op)."""
        self.grad = fn
        return fn

    def resolve(self, backend):
        """The native callable for ``backend`` (what ``backend.op_impl`` returns: an adapter's
        override, the namespace function, or ``forward`` bound to the namespace).  Cached per backend."""
        impl = self.impls[backend] = backend.op_impl(self)
        return impl


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


def _first_param(fn):
    """``forward(xp, ...)`` gets the namespace, ``forward(backend, ...)`` the Backend object."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return "xp"
    return params[0] if params else None


def register(opdef: OpDef) -> OpDef:
    """Add an op to the registry (a duplicate name is a ``KeyError`` naming the first definition)."""
    if opdef.name in _OPS:
        raise KeyError(
            f"an op named {opdef.name!r} is already registered ({_OPS[opdef.name]!r}); "
            "pick another name or override its gradient with gt.RegisterGradient"
        )
    _OPS[opdef.name] = opdef
    if opdef.name in _PENDING_RULES:
        opdef.grad = _PENDING_RULES.pop(opdef.name)
        opdef.saves = None
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

    The rule is ``f(op, *output_grads)`` and returns one gradient per input (``None`` for none);
    ``op.inputs``, ``op.outputs`` and ``op.attrs`` describe the recorded call, as Tensors.  Rules
    written in gradtape ops are themselves recorded by outer tapes, so higher derivatives come for
    free.  (gradtape's own rules take the namespace first, ``f(xp, op, *output_grads)``, and run on
    native arrays when nothing records; either form is accepted.)  The op then keeps every input
    and output for the rule (a user's rule may read any of them).
    """

    def __init__(self, op_name: str):
        if not isinstance(op_name, str):
            raise TypeError(f"RegisterGradient expects an op name (str), got {type(op_name).__name__}")
        self._op_name = op_name

    def __call__(self, fn):
        op = _OPS.get(self._op_name)
        if op is None:
            _PENDING_RULES[self._op_name] = fn
        else:
            op.grad = fn
            op.saves = None
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
