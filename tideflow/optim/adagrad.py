"""Adagrad: per-coordinate steps scaled by the accumulated squared gradients."""

from __future__ import annotations

from ..framework.errors import TideflowError
from ..ops.creation import full_like
from ..ops.optim import adagrad_update
from .optimizer import Optimizer, params_with_grad


class Adagrad(Optimizer):
    """Adagrad (Duchi et al., 2011) with PyTorch's learning-rate decay
    `lr / (1 + (step - 1) * lr_decay)`, weight decay and maximize.

    As in PyTorch, every parameter's state exists from construction: `step` 0 and `sum`
    filled with `initial_accumulator_value`.

    >>> import tideflow as flow
    >>> w = flow.nn.Parameter(flow.tensor([1.0, -2.0]))
    >>> opt = flow.optim.Adagrad([w], lr=0.1, initial_accumulator_value=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False,
                 fused=None) -> None:  # fmt: skip
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not lr_decay >= 0.0:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not initial_accumulator_value >= 0.0:
            raise ValueError(
                f"Invalid initial_accumulator_value value: {initial_accumulator_value}"
            )
        if not eps >= 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if differentiable:
            raise TideflowError("Adagrad: differentiable=True is not supported (updates are "
                                "fused in-place ops outside autograd)")  # fmt: skip
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value,
                        maximize=maximize)  # fmt: skip
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p) -> None:
        # NOTE: PyTorch fills every sum with the constructor's initial_accumulator_value, even
        # for groups that set their own; we keep its numbers.
        self.state[p]["step"] = 0
        self.state[p]["sum"] = full_like(p, self.defaults["initial_accumulator_value"])

    def _step_group(self, group: dict) -> None:
        for p in params_with_grad(group):
            state = self.state[p]
            if not state:  # a parameter group added after construction
                self._init_state(p)
            state["step"] += 1
            adagrad_update(
                p, p.grad, state["sum"],
                lr=group["lr"], lr_decay=group["lr_decay"], weight_decay=group["weight_decay"],
                eps=group["eps"], maximize=group["maximize"], step=state["step"],
            )  # fmt: skip
