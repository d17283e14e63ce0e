"""Stochastic gradient descent with momentum, dampening, Nesterov, weight decay, maximize."""

from __future__ import annotations

from ..framework.errors import TideflowError
from ..ops.creation import zeros_like
from ..ops.optim import sgd_update
from .optimizer import Optimizer, params_with_grad, required


class SGD(Optimizer):
    """`flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)` — PyTorch's update rule."""

    def __init__(self, params, lr=required, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None) -> None:  # fmt: skip
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if differentiable:
            raise TideflowError(
                "SGD: differentiable=True is not supported (updates run outside autograd)"
            )
        defaults = dict(
            lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
            nesterov=nesterov, maximize=maximize,
        )  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict) -> None:
        for p in params_with_grad(group):
            state = self.state[p]
            buf = state.get("momentum_buffer")
            first = buf is None
            if group["momentum"] and first:
                buf = state["momentum_buffer"] = zeros_like(p)
            sgd_update(
                p, p.grad, buf if group["momentum"] else None,
                lr=group["lr"], momentum=group["momentum"], dampening=group["dampening"],
                weight_decay=group["weight_decay"], nesterov=group["nesterov"],
                maximize=group["maximize"], first=first,
            )  # fmt: skip
