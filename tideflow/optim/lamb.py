"""LAMB: Adam steps rescaled per parameter by a trust ratio (You et al., 2019)."""

from __future__ import annotations

from ..ops.creation import zeros_like
from ..ops.optim import lamb_update
from .optimizer import Optimizer, params_with_grad


class LAMB(Optimizer):
    """Layer-wise Adaptive Moments for Batch training (You et al., "Large Batch Optimization
    for Deep Learning: Training BERT in 76 minutes", 2019). Not part of PyTorch.

    Per parameter `w` and step `t`:

        m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g**2
        r = (m / (1 - beta1**t)) / (sqrt(v / (1 - beta2**t)) + eps) + weight_decay * w
        w = w - lr * phi(||w||) / ||r|| * r      phi(z) = min(z, clamp_value)

    The trust ratio `phi(||w||) / ||r||` is 1 when either norm is zero (fresh zero-initialized
    weights, or a zero update). `bias_correction=False` drops the `1 - beta**t` terms (the
    paper's earlier version); weight decay is decoupled, added to the normalized step.

    >>> import tideflow as flow
    >>> w = flow.nn.Parameter(flow.tensor([1.0, -2.0]))
    >>> opt = flow.optim.LAMB([w], lr=0.01, weight_decay=0.01)
    >>> (w * w).sum().backward()
    >>> opt.step()
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0,
                 clamp_value=10.0, *, bias_correction=True, maximize=False,
                 do_bias_correction=None) -> None:  # fmt: skip
        if do_bias_correction is not None:  # OneFlow's name for the option
            bias_correction = do_bias_correction
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not eps >= 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not clamp_value > 0.0:
            raise ValueError(f"Invalid clamp_value: {clamp_value} (the bound on the weight norm "
                             "in the trust ratio must be positive)")  # fmt: skip
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        clamp_value=clamp_value, bias_correction=bias_correction,
                        maximize=maximize)  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict) -> None:
        beta1, beta2 = group["betas"]
        for p in params_with_grad(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
            state["step"] += 1
            lamb_update(
                p, p.grad, state["exp_avg"], state["exp_avg_sq"],
                lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                weight_decay=group["weight_decay"], clamp_value=group["clamp_value"],
                bias_correction=group["bias_correction"], maximize=group["maximize"],
                step=state["step"],
            )  # fmt: skip
