"""Flatten parameters into one vector and back (for second-order and evolutionary methods)."""

from __future__ import annotations

from collections.abc import Iterable

from ...framework.tensor import Tensor
from ...ops.shape import cat

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All `parameters` flattened and concatenated into one 1-d tensor, in order.

    >>> flow.nn.utils.parameters_to_vector(flow.nn.Linear(3, 2).parameters()).shape
    tideflow.Size([8])
    """
    return cat([p.view(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Make each of `parameters` hold its slice of the 1-d `vec` (in the order of
    `parameters_to_vector`); the parameters then share memory with `vec`.

    >>> model = flow.nn.Linear(3, 2)
    >>> flow.nn.utils.vector_to_parameters(flow.zeros(8), model.parameters())
    >>> model.bias
    Parameter containing:
    tensor([0., 0.], requires_grad=True)
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected tideflow.Tensor, but got: {type(vec).__name__}")
    parameters = list(parameters)
    needed = sum(p.numel() for p in parameters)
    if vec.ndim != 1 or vec.numel() != needed:
        raise ValueError(
            f"vector_to_parameters: expected a 1-d vector of {needed} elements (the parameters' "
            f"total size), got shape {list(vec.shape)}"
        )
    pointer = 0
    for param in parameters:
        n = param.numel()
        param.data = vec[pointer : pointer + n].view_as(param).data
        pointer += n
