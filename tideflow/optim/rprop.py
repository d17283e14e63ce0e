"""Rprop: steps by the sign of the gradient, each coordinate's step size adapted."""

from __future__ import annotations

from ..framework.errors import TideflowError
from ..ops.creation import full_like, zeros_like
from ..ops.optim import rprop_update
from .optimizer import Optimizer, params_with_grad


class Rprop(Optimizer):
    """Resilient backpropagation (Riedmiller and Braun, 1993), PyTorch's variant: each
    coordinate moves by its step size against the gradient's sign; the step size grows by
    `etas[1]` while the sign holds and shrinks by `etas[0]` when it flips (that step is
    skipped), within `step_sizes`.

    >>> import tideflow as flow
    >>> w = flow.nn.Parameter(flow.tensor([1.0, -2.0]))
    >>> opt = flow.optim.Rprop([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False,
                 differentiable=False) -> None:  # fmt: skip
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        if differentiable:
            raise TideflowError("Rprop: differentiable=True is not supported (updates are "
                                "fused in-place ops outside autograd)")  # fmt: skip
        defaults = dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes),
                        maximize=maximize)  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict) -> None:
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        for p in params_with_grad(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["prev"] = zeros_like(p)
                state["step_size"] = full_like(p, group["lr"])
            state["step"] += 1
            rprop_update(
                p, p.grad, state["prev"], state["step_size"],
                etaminus=etaminus, etaplus=etaplus, step_size_min=step_size_min,
                step_size_max=step_size_max, maximize=group["maximize"],
            )  # fmt: skip
