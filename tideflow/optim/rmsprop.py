"""RMSprop: plain or centered, with momentum, weight decay and maximize."""

from __future__ import annotations

from ..framework.errors import TideflowError
from ..ops.creation import zeros_like
from ..ops.optim import rmsprop_update
from .optimizer import Optimizer, params_with_grad


class RMSprop(Optimizer):
    """Divides each step by a running root mean square of the gradients (Hinton's RMSprop),
    with PyTorch's update rule: the square root is taken before `eps` is added.

    `centered=True` normalizes by an estimate of the gradient's variance instead of its
    second moment; `momentum > 0` keeps a buffer of the normalized steps.

    >>> import tideflow as flow
    >>> w = flow.nn.Parameter(flow.tensor([1.0, -2.0]))
    >>> opt = flow.optim.RMSprop([w], lr=0.01, momentum=0.9, centered=True)
    >>> (w * w).sum().backward()
    >>> opt.step()
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False) -> None:  # fmt: skip
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not eps >= 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not momentum >= 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not alpha >= 0.0:
            raise ValueError(f"Invalid alpha value: {alpha}")
        if differentiable:
            raise TideflowError("RMSprop: differentiable=True is not supported (updates are "
                                "fused in-place ops outside autograd)")  # fmt: skip
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                        momentum=momentum, centered=centered, maximize=maximize)  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict) -> None:
        for p in params_with_grad(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["square_avg"] = zeros_like(p)
            # NOTE: buffers are created when first needed, so turning momentum or centering on
            # for a group mid-training works (PyTorch raises a KeyError there).
            if group["momentum"] > 0 and "momentum_buffer" not in state:
                state["momentum_buffer"] = zeros_like(p)
            if group["centered"] and "grad_avg" not in state:
                state["grad_avg"] = zeros_like(p)
            state["step"] += 1
            rmsprop_update(
                p, p.grad, state["square_avg"],
                state["grad_avg"] if group["centered"] else None,
                state["momentum_buffer"] if group["momentum"] > 0 else None,
                lr=group["lr"], alpha=group["alpha"], eps=group["eps"],
                weight_decay=group["weight_decay"], momentum=group["momentum"],
                centered=group["centered"], maximize=group["maximize"],
            )  # fmt: skip
