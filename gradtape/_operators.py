"""Binds every Python operator of the Array API standard on Tensor to its op, and the methods that
compute (``.T``, ``.mT``, ``to_device``, ``copy``, ``t[k] = v``, ``Variable.value``).

Forward operators are the public functions themselves (``Tensor.__add__ is gt.add``), so an
operator costs exactly one op call.  Reflected operators swap the arguments; in-place operators
are functional updates: the tensor takes the new value and a new identity on the tape.  This module
sits above the op chapters and below the tape: ``gradtape.tensor`` imports no op.
"""

from __future__ import annotations

from gradtape import tensor as _tensor
from gradtape.ops import elementwise as E
from gradtape.ops.creation import to_device as _to_device
from gradtape.ops.indexing import _getitem, _native_key, _setitem
from gradtape.ops.linear_algebra_functions import matmul, matrix_transpose
from gradtape.ops.manipulation import broadcast_to, permute_dims, reshape, stack
from gradtape.tensor import Tensor, Variable, convert_to_tensor

_BINARY = {
    "add": E.add,
    "sub": E.subtract,
    "mul": E.multiply,
    "truediv": E.divide,
    "floordiv": E.floor_divide,
    "mod": E.remainder,
    "pow": E.pow,
    "matmul": matmul,
    "and": E.bitwise_and,
    "or": E.bitwise_or,
    "xor": E.bitwise_xor,
    "lshift": E.bitwise_left_shift,
    "rshift": E.bitwise_right_shift,
}


def _reflected(fn):
    def r(self, other):
        return fn(other, self)

    r.__name__ = f"r{fn.__name__}"
    return r


def _inplace(fn):
    def i(self, other):
        return self._become(fn(self, other))

    i.__name__ = f"i{fn.__name__}"
    return i


for _name, _fn in _BINARY.items():
    setattr(Tensor, f"__{_name}__", _fn)
    setattr(Tensor, f"__r{_name}__", _reflected(_fn))
    setattr(Tensor, f"__i{_name}__", _inplace(_fn))
    setattr(Variable, f"__i{_name}__", _fn)  # on a Variable, ``v += 1`` rebinds to a Tensor (TF 2)


def __eq__(self, other):
    """Element-wise ``equal``; ``t == None`` is False (as TensorFlow), not an error."""
    if other is None:
        return False
    return E.equal(self, other)


def __ne__(self, other):
    if other is None:
        return True
    return E.not_equal(self, other)


Tensor.__eq__ = __eq__
Tensor.__ne__ = __ne__
Tensor.__lt__ = E.less
Tensor.__le__ = E.less_equal
Tensor.__gt__ = E.greater
Tensor.__ge__ = E.greater_equal
Tensor.__neg__ = E.negative
Tensor.__pos__ = E.positive
Tensor.__abs__ = E.abs
Tensor.__invert__ = E.bitwise_invert
Tensor.__getitem__ = _getitem
Tensor.__hash__ = object.__hash__
Variable.__hash__ = object.__hash__


# --------------------------------------------------------------------------- methods that compute
def _T(self):
    """The transpose of a 2-D tensor (``gt.matrix_transpose`` for stacks of matrices); recorded."""
    if self.ndim != 2:
        raise ValueError(f"Tensor.T is for 2-D tensors (got {self.ndim}-D); use gt.matrix_transpose or gt.permute_dims")
    return permute_dims(self, (1, 0))


def _mT(self):
    """The transpose of the last two axes (``gt.matrix_transpose``); recorded."""
    return matrix_transpose(self)


def to_device(self, device, /, *, stream=None):
    """A copy on ``device`` (a backend-neutral string or a native device), recorded so gradients flow back."""
    return _to_device(self, device)


def __copy__(self):
    """``copy.copy(t)``: a recorded copy (the tape connects it to ``t``, as ``asarray(copy=True)``)."""
    return E.astype(self, self.dtype, copy=True)


def __deepcopy__(self, memo):
    return self.__copy__()


def __setitem__(self, key, value):
    self._become(_setitem(self, key, value))


def value(self):
    """The current value as a Tensor (a recorded read: gradients flow to the variable)."""
    return E._identity(self)


def _variable_setitem(self, key, value):
    """A state update, not recorded (assignment is not differentiable)."""
    with self._lock:  # read, write the elements, write back: atomic with respect to other threads
        v = convert_to_tensor(value, dtype=self.dtype, like=self)
        cur = self._v
        self._v = self._b.setitem(cur, _native_key(key, self._b, self.ndim, self._b.device_of(cur)), v._v)


Tensor.T = property(_T)
Tensor.mT = property(_mT)
Tensor.to_device = to_device
Tensor.__copy__ = __copy__
Tensor.__deepcopy__ = __deepcopy__
Tensor.__setitem__ = __setitem__
Variable.value = Variable.read_value = value
Variable.__setitem__ = _variable_setitem

# the ops that gradtape.tensor's conversions call
for _fn in (E.astype, stack, reshape, broadcast_to):
    setattr(_tensor.ops, _fn.__name__, _fn)
_tensor.ops.identity = E._identity
