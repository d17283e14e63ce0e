"""Adadelta: steps scaled by the ratio of running RMS of updates and of gradients."""

from __future__ import annotations

from ..framework.errors import TideflowError
from ..ops.creation import zeros_like
from ..ops.optim import adadelta_update
from .optimizer import Optimizer, params_with_grad


class Adadelta(Optimizer):
    """Adadelta (Zeiler, 2012) with PyTorch's update rule; `lr` scales the step (default 1).

    >>> import tideflow as flow
    >>> w = flow.nn.Parameter(flow.tensor([1.0, -2.0]))
    >>> opt = flow.optim.Adadelta([w], rho=0.95)
    >>> (w * w).sum().backward()
    >>> opt.step()
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False) -> None:  # fmt: skip
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not eps >= 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise TideflowError("Adadelta: differentiable=True is not supported (updates are "
                                "fused in-place ops outside autograd)")  # fmt: skip
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _step_group(self, group: dict) -> None:
        for p in params_with_grad(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["square_avg"] = zeros_like(p)
                state["acc_delta"] = zeros_like(p)
            state["step"] += 1
            adadelta_update(
                p, p.grad, state["square_avg"], state["acc_delta"],
                lr=group["lr"], rho=group["rho"], eps=group["eps"],
                weight_decay=group["weight_decay"], maximize=group["maximize"],
            )  # fmt: skip
