"""`nn.Parameter` and `nn.Buffer`: tensors a Module registers as its state."""

from __future__ import annotations

import numpy as np

from ..framework.dispatch import _init
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
