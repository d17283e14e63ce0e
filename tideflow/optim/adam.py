"""Adam and AdamW (decoupled weight decay), with amsgrad and maximize."""

from __future__ import annotations

from ..framework.errors import TideflowError
from ..ops.creation import zeros_like
from ..ops.optim import adam_update
from .optimizer import Optimizer, params_with_grad


def check_adam_hyperparameters(optimizer, lr, betas, eps, weight_decay, differentiable) -> None:
    """PyTorch's checks (and messages) for the Adam family's arguments."""
    if lr < 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")
    if eps < 0.0:
        raise ValueError(f"Invalid epsilon value: {eps}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
    if weight_decay < 0.0:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    if differentiable:
        raise TideflowError(
            f"{type(optimizer).__name__}: differentiable=True is not supported "
            "(updates run outside autograd)"
        )


class Adam(Optimizer):
    """`flow.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8)` — PyTorch's rule.
    OneFlow's `do_bias_correction=False` drops the moments' `1 - beta**t` corrections."""

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, do_bias_correction=True) -> None:  # fmt: skip
        check_adam_hyperparameters(self, lr, betas, eps, weight_decay, differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize,
                        do_bias_correction=do_bias_correction)  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict) -> None:
        beta1, beta2 = group["betas"]
        for p in params_with_grad(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = zeros_like(p)
            state["step"] += 1
            adam_update(
                p, p.grad, state["exp_avg"], state["exp_avg_sq"], state.get("max_exp_avg_sq"),
                lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                weight_decay=group["weight_decay"], decoupled=self._decoupled,
                amsgrad=group["amsgrad"], maximize=group["maximize"], step=state["step"],
                # NOTE: groups loaded from PyTorch's state dicts lack OneFlow's key
                bias_correction=group.get("do_bias_correction", True),
            )  # fmt: skip


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2), as `torch.optim.AdamW`."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, **kwargs) -> None:  # fmt: skip
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, **kwargs)
