"""ASGD: SGD with a decaying rate and a running average of the iterates (Polyak averaging)."""

from __future__ import annotations

from ..framework.errors import TideflowError
from ..ops.creation import zeros_like
from ..ops.optim import asgd_update
from .optimizer import Optimizer, params_with_grad, scalar_state


class ASGD(Optimizer):
    """Averaged SGD (Polyak and Juditsky, 1992) with PyTorch's schedules: the rate
    `eta_t = lr / (1 + lambd * lr * t) ** alpha`, each step shrinks the parameter by
    `1 - lambd * eta`, and `state["ax"]` averages the iterates from step `t0` on.

    >>> import tideflow as flow
    >>> w = flow.nn.Parameter(flow.tensor([1.0, -2.0]))
    >>> opt = flow.optim.ASGD([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False,
                 capturable=False) -> None:  # fmt: skip
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise TideflowError("ASGD: differentiable=True is not supported (updates are "
                                "fused in-place ops outside autograd)")  # fmt: skip
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        maximize=maximize)  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict) -> None:
        lr, lambd = group["lr"], group["lambd"]
        for p in params_with_grad(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["eta"] = scalar_state(lr)
                state["mu"] = 1.0
                state["ax"] = zeros_like(p)
            state["step"] += 1
            asgd_update(
                p, p.grad, state["ax"], lambd=lambd, eta=float(state["eta"]),
                mu=float(state["mu"]), weight_decay=group["weight_decay"],
                maximize=group["maximize"],
            )  # fmt: skip
            step = state["step"]
            state["eta"] = scalar_state(lr / (1 + lambd * lr * step) ** group["alpha"])
            state["mu"] = scalar_state(1 / max(1, step - group["t0"]))
