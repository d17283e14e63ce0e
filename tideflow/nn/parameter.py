"""`nn.Parameter` and `nn.Buffer`: tensors a Module registers as its state, and the lazy
layers' `UninitializedParameter` and `UninitializedBuffer`."""

from __future__ import annotations

import numpy as np

from ..framework.dispatch import _init
from ..framework.dtype import get_default_dtype, to_dtype
from ..framework.tensor import Tensor
from ..parallel.global_tensor import GlobalTensor, set_global
from ..parallel.to_global import global_class


class Parameter(Tensor):
    """A leaf tensor that a Module registers as a parameter when assigned as an attribute.
    It shares memory with the tensor it wraps, and a global tensor's parameter is global with
    its layout. `nn.Parameter(flow.zeros(3))`"""

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = Tensor(0)
        is_global = isinstance(data, GlobalTensor)
        p = object.__new__(global_class(cls) if is_global else cls)
        _init(p, data._data if isinstance(data, Tensor) else np.asarray(data))
        if is_global:
            set_global(p, data._placement, data._nd_sbp, data._logical)
        if isinstance(data, Tensor):
            p._version = data._version
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad: bool = True) -> None:
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (Parameter, (Tensor(self._data), self.requires_grad))


class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute."""

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        t = object.__new__(cls)
        data = Tensor(0) if data is None else data
        _init(t, data._data)
        t._version = data._version
        t.persistent = persistent
        return t

    def __init__(self, data=None, *, persistent: bool = True) -> None:
        pass


class UninitializedParameter(Parameter):
    """A parameter whose shape is not known yet (the lazy layers' weights): it holds no
    elements until `materialize(shape)` gives it storage and turns it into a `Parameter`, the
    same object, so references to it (an optimizer's) stay valid."""

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        p = super().__new__(cls, None, requires_grad)
        if dtype is not None:
            _init(p, p._data.astype(to_dtype(dtype).np))
        return p

    def __init__(self, requires_grad: bool = True, device=None, dtype=None) -> None:
        pass

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the parameter uninitialized storage of `shape` (the layer initializes it)."""
        dtype = self.dtype if dtype is None else to_dtype(dtype)
        _init(self, np.empty(tuple(shape), dtype.np))
        self.__class__ = Parameter

    def __repr__(self) -> str:
        return "<UninitializedParameter>"

    def __reduce_ex__(self, protocol):
        return (UninitializedParameter, (self.requires_grad,))


class UninitializedBuffer(Tensor):
    """A buffer whose shape is not known yet (the lazy norms' running statistics): it holds no
    elements until `materialize(shape)` gives it storage and turns it into a plain tensor,
    the same object."""

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None):
        t = object.__new__(cls)
        _init(t, np.empty(0, (to_dtype(dtype) if dtype is not None else get_default_dtype()).np))
        return t

    def __init__(self, requires_grad: bool = False, device=None, dtype=None) -> None:
        pass

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the buffer uninitialized storage of `shape` (the layer initializes it)."""
        dtype = self.dtype if dtype is None else to_dtype(dtype)
        _init(self, np.empty(tuple(shape), dtype.np))
        self.__class__ = Tensor

    def __repr__(self) -> str:
        return "<UninitializedBuffer>"
