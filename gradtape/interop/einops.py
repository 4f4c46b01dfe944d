"""einops on gradtape tensors: ``einops.rearrange(x, ...)`` and the rest of einops' API, recorded.

einops picks a backend by the tensor's type: ``einops._backends.get_backend`` walks the subclasses of
``AbstractBackend`` whose ``framework_name`` is an imported module and asks each
``is_appropriate_type``.  :func:`install` (called by ``import gradtape``) defines such a subclass,
framework ``"gradtape"``, whose operations are gradtape ops, so everything einops does on a gradtape
tensor is recorded by the tape.  einops stays optional: when it is already imported the backend is
defined at once; otherwise a meta-path hook defines it right after ``einops._backends`` is first
imported (and removes itself), so ``import gradtape, einops`` works in either order and
``import gradtape`` never imports einops.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

from gradtape.core.dtypes import isdtype
from gradtape.ops.creation import arange, asarray
from gradtape.ops.einsum import einsum
from gradtape.ops.manipulation import broadcast_to, concat, expand_dims, permute_dims, reshape, stack, tile
from gradtape.ops.statistical import max as _max
from gradtape.ops.statistical import mean, prod
from gradtape.ops.statistical import min as _min
from gradtape.ops.statistical import sum as _sum
from gradtape.ops.utility import all as _all
from gradtape.ops.utility import any as _any
from gradtape.core.tensor import Tensor, convert_to_tensor

#: the gradtape functions einops' backend calls (imported from the chapters: this module is
#: imported by the package's ``__init__``)
gt = SimpleNamespace(
    Tensor=Tensor,
    convert_to_tensor=convert_to_tensor,
    asarray=asarray,
    arange=arange,
    reshape=reshape,
    permute_dims=permute_dims,
    stack=stack,
    expand_dims=expand_dims,
    broadcast_to=broadcast_to,
    tile=tile,
    concat=concat,
    isdtype=isdtype,
    sum=_sum,
    mean=mean,
    max=_max,
    min=_min,
    prod=prod,
    any=_any,
    all=_all,
    einsum=einsum,
)

__all__ = ["install"]

_TARGET = "einops._backends"
_backend_class = None


def install():
    """Make einops recognise gradtape tensors: now if einops is imported, else when it is."""
    if _TARGET in sys.modules:
        _define_backend()
    elif not any(isinstance(f, _EinopsHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _EinopsHook())


class _EinopsHook:
    """A meta-path finder that waits for ``einops._backends``: it lets the other finders find it
    and wraps their loader so that the gradtape backend is defined once the module has run."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _TARGET:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader)
        return spec

    def invalidate_caches(self):
        pass


class _Loader:
    """The loader of ``einops._backends``, then the gradtape backend's definition."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            _define_backend(module)
        except Exception as e:  # an einops we do not know: einops itself must still import
            import warnings

            warnings.warn(
                f"gradtape could not register its einops backend ({type(e).__name__}: {e}); "
                "einops functions will not accept gradtape tensors",
                RuntimeWarning,
                stacklevel=2,
            )

    def __getattr__(self, name):  # get_source, get_filename, ... as the wrapped loader has them
        return getattr(self._loader, name)


def _define_backend(module=None):
    """Define (once) the einops backend class for gradtape tensors, subclassing the
    ``AbstractBackend`` of ``module`` (``einops._backends``), which makes einops find it."""
    global _backend_class
    if _backend_class is not None:
        return _backend_class
    AbstractBackend = (module or sys.modules[_TARGET]).AbstractBackend

    class GradtapeBackend(AbstractBackend):
        """einops' backend for gradtape tensors: every operation is a gradtape op."""

        framework_name = "gradtape"

        def __init__(self):
            self.gt = gt

        def is_appropriate_type(self, tensor):
            return isinstance(tensor, self.gt.Tensor)

        def from_numpy(self, x):
            return self.gt.asarray(x)

        def to_numpy(self, x):
            return x.numpy()

        def arange(self, start, stop):
            return self.gt.arange(start, stop)

        def shape(self, x):
            return x.shape

        def reshape(self, x, shape):
            return self.gt.reshape(x, tuple(shape))

        def transpose(self, x, axes):
            return self.gt.permute_dims(x, tuple(axes))

        def reduce(self, x, operation, axes):
            if operation not in ("sum", "mean", "max", "min", "prod", "any", "all"):
                raise NotImplementedError(f"unknown reduction {operation!r}")
            return getattr(self.gt, operation)(x, axis=tuple(axes))

        def stack_on_zeroth_dimension(self, tensors):
            return self.gt.stack(list(tensors))

        def add_axis(self, x, new_position):
            return self.gt.expand_dims(x, axis=new_position)

        def add_axes(self, x, n_axes, pos2len):
            for position in sorted(pos2len):
                x = self.gt.expand_dims(x, axis=position)
            shape = list(x.shape)
            for position, length in pos2len.items():
                shape[position] = length
            return self.gt.broadcast_to(x, tuple(shape))

        def tile(self, x, repeats):
            return self.gt.tile(x, tuple(repeats))

        def concat(self, tensors, axis):
            return self.gt.concat(list(tensors), axis=axis)

        def is_float_type(self, x):
            return self.gt.isdtype(x.dtype, ("real floating", "complex floating"))

        def einsum(self, pattern, *x):
            return self.gt.einsum(pattern, *x)

    GradtapeBackend.__module__ = __name__
    GradtapeBackend.__qualname__ = "GradtapeBackend"
    _backend_class = GradtapeBackend
    return GradtapeBackend


install()
