"""Gradient clipping: by the total norm of all gradients, or by value. Global tensors may
lie on different placements (pipeline stages): their norms meet on the first one's."""

from __future__ import annotations

import types
import warnings
from collections.abc import Iterable

from ...framework.errors import TideflowError
from ...framework.grad_mode import no_grad
from ...framework.tensor import Tensor
from ...ops.creation import tensor
from ...ops.reduction import vector_norm
from ...ops.shape import stack
from ...parallel.sbp import broadcast

__all__ = [
    "clip_grad_norm",
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
]

_TensorOrTensors = Tensor | Iterable[Tensor]


def _as_list(tensors: _TensorOrTensors) -> list[Tensor]:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def get_total_norm(
    tensors: _TensorOrTensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:  # fmt: skip
    """The `norm_type`-norm of all `tensors` together, as if concatenated into one vector
    (`inf` for the max-norm). 0 for no tensors. `foreach` is accepted for PyTorch
    compatibility; tideflow has one implementation.

    >>> flow.nn.utils.get_total_norm([flow.tensor([3.0]), flow.tensor([4.0])])
    tensor(5.)
    """
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    with no_grad():
        if any(t.is_global for t in tensors):
            total_norm = _global_total_norm(tensors, norm_type)
        else:
            norms = stack([vector_norm(t, norm_type) for t in tensors])
            total_norm = vector_norm(norms, norm_type)
    if error_if_nonfinite and not bool(total_norm.isfinite()):
        raise TideflowError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
        )
    return total_norm


def clip_grads_with_norm_(
    parameters: _TensorOrTensors, max_norm: float, total_norm: Tensor,
    foreach: bool | None = None,
) -> None:  # fmt: skip
    """Scale the gradients of `parameters` in place by `min(1, max_norm / (total_norm +
    1e-6))`, given a `total_norm` from `get_total_norm` (possibly of other tensors).

    >>> w = flow.ones(4, requires_grad=True)
    >>> (w * 3).sum().backward()
    >>> flow.nn.utils.clip_grads_with_norm_([w], 1.0, flow.tensor(6.0))
    """
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    with no_grad():
        # NOTE: always a multiplication (by 1 when below the limit), never a branch on the
        # norm's value: the step stays the same code whatever the data.
        clip_coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(_on_placement_of(g, clip_coef))


def clip_grad_norm_(
    parameters: _TensorOrTensors, max_norm: float, norm_type: float = 2.0,
    error_if_nonfinite: bool = False, foreach: bool | None = None,
) -> Tensor:  # fmt: skip
    """Rescale the gradients of `parameters` in place so that their total `norm_type`-norm
    is at most `max_norm`; returns the total norm before clipping. With
    `error_if_nonfinite`, a nan or inf total norm raises instead.

    >>> model = flow.nn.Linear(4, 2)
    >>> model(flow.randn(8, 4)).pow(2).sum().backward()
    >>> total = flow.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_generator and not parameters:
            warnings.warn(
                "`parameters` is an empty generator, no gradient clipping will occur.",
                stacklevel=2,
            )
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_value_(
    parameters: _TensorOrTensors, clip_value: float, foreach: bool | None = None
) -> None:
    """Clamp the gradients of `parameters` in place to [-clip_value, clip_value].

    >>> w = flow.ones(3, requires_grad=True)
    >>> (w * 5).sum().backward()
    >>> flow.nn.utils.clip_grad_value_([w], 0.5)
    >>> w.grad
    tensor([0.5000, 0.5000, 0.5000])
    """
    clip_value = float(clip_value)
    with no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)


def _whole_on(t: Tensor, placement) -> Tensor:
    return t.to_global(placement=placement, sbp=(broadcast,) * placement.ndim)


def _on_placement_of(g: Tensor, value: Tensor) -> Tensor:
    """`value` (0-d) where `g` is, when both are global on different placements."""
    if g.is_global and value.is_global and g.placement != value.placement:
        return _whole_on(value, g.placement)
    return value


def _global_total_norm(tensors: list[Tensor], norm_type: float) -> Tensor:
    """The total norm of global tensors, on the first one's placement. A p-norm adds up
    `|t|^p` where each tensor lies (a sum over a split dim is a partial sum: one scalar is
    reduced, where a norm would gather the split tensor), then the placements' sums meet on
    the first one; other orders (inf, 0) take the norm of the norms, as PyTorch does."""
    if not all(t.is_global for t in tensors):
        raise TideflowError(
            "clip_grad_norm_: the gradients mix local and global tensors; make the whole "
            "model global (or local)"
        )
    by_placement: dict = {}
    for t in tensors:
        by_placement.setdefault(t.placement, []).append(t)
    first = tensors[0].placement
    p_norm = 0 < norm_type < float("inf")
    parts = []
    for group in by_placement.values():
        if p_norm:
            part = stack([(t.abs() ** norm_type).sum() for t in group]).sum()
        else:
            part = vector_norm(stack([vector_norm(t, norm_type) for t in group]), norm_type)
        parts.append(_whole_on(part, first))
    if p_norm:
        return stack(parts).sum() ** (1.0 / norm_type)
    return vector_norm(stack(parts), norm_type)


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated (as in PyTorch): `clip_grad_norm_`."""
    warnings.warn(
        "`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
        "`torch.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)
