"""`flow.utils.global_view`: convert every tensor in a nested structure (a state dict, a
batch of lists and dicts) between local and global in one call."""

from __future__ import annotations

import copy

from ..framework.tensor import Tensor
from .global_tensor import GlobalTensor
from .sbp import of_tensor
from .to_global import to_global as _tensor_to_global

__all__ = ["to_global", "to_local"]


def to_global(obj, placement=None, sbp=None):
    """`obj` with each tensor `t` replaced by `t.to_global(placement, sbp)`; `sbp` may be a
    function of the tensor. Dicts (their subclasses and attributes too), lists and tuples
    (named ones too) are rebuilt; anything else is returned as it is. Every rank calls it.

    >>> p = flow.placement("cpu", ranks=[0])
    >>> state = {"w": flow.ones(2, 2), "step": 3}
    >>> to_global(state, p, lambda t: flow.sbp.broadcast)["w"].is_global
    True
    """
    return _map(obj, lambda t: _tensor_to_global(t, placement, of_tensor(sbp, t)))


def to_local(obj):
    """`obj` with each global tensor replaced by its local shard (`to_local()`)."""
    return _map(obj, lambda t: t.to_local() if isinstance(t, GlobalTensor) else t)


def _map(obj, fn):
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        out = copy.copy(obj)  # keeps the dict's type and attributes (a state dict's _metadata)
        for key, value in obj.items():
            out[key] = _map(value, fn)
        return out
    if isinstance(obj, list):
        return [_map(v, fn) for v in obj]
    if isinstance(obj, tuple):
        mapped = [_map(v, fn) for v in obj]
        return type(obj)(*mapped) if hasattr(obj, "_fields") else tuple(mapped)
    return obj
