"""Adam's relatives, with PyTorch's update rules: Adamax (the infinity norm for the second
moment), NAdam (Nesterov momentum with a momentum schedule), RAdam (the adaptive rate
rectified while its variance is intractable)."""

from __future__ import annotations

from ..framework import dtype as dtypes
from ..ops.creation import zeros_like
from ..ops.optim import adamax_update, nadam_update, radam_update
from .adam import check_adam_hyperparameters
from .optimizer import Optimizer, params_with_grad, scalar_state


class Adamax(Optimizer):
    """Adamax (Kingma and Ba, 2015, section 7.1): `u = max(beta2 * u, |g| + eps)` in place
    of Adam's second moment.

    >>> import tideflow as flow
    >>> w = flow.nn.Parameter(flow.tensor([1.0, -2.0]))
    >>> opt = flow.optim.Adamax([w], lr=0.01)
    >>> (w * w).sum().backward()
    >>> opt.step()
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False,
                 capturable=False) -> None:  # fmt: skip
        check_adam_hyperparameters(self, lr, betas, eps, weight_decay, differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        maximize=maximize)  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict) -> None:
        beta1, beta2 = group["betas"]
        for p in params_with_grad(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = zeros_like(p)
                state["exp_inf"] = zeros_like(p)
            state["step"] += 1
            adamax_update(
                p, p.grad, state["exp_avg"], state["exp_inf"],
                lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                weight_decay=group["weight_decay"], maximize=group["maximize"],
                step=state["step"],
            )  # fmt: skip


class NAdam(Optimizer):
    """NAdam (Dozat, 2016): Adam with Nesterov momentum, the momentum following the schedule
    `mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))`; `decoupled_weight_decay` as
    AdamW's.

    >>> import tideflow as flow
    >>> w = flow.nn.Parameter(flow.tensor([1.0, -2.0]))
    >>> opt = flow.optim.NAdam([w], lr=0.01)
    >>> (w * w).sum().backward()
    >>> opt.step()
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False) -> None:  # fmt: skip
        check_adam_hyperparameters(self, lr, betas, eps, weight_decay, differentiable)
        if not momentum_decay >= 0.0:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay,
                        maximize=maximize)  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict) -> None:
        beta1, beta2 = group["betas"]
        decay = group["momentum_decay"]
        for p in params_with_grad(group):
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["mu_product"] = 1.0
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
            state["step"] += 1
            step = state["step"]
            mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * decay))
            mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * decay))
            # NOTE: PyTorch multiplies in its state's dtype (float32 by default)
            kind = dtypes.get_default_dtype().np.type
            state["mu_product"] = scalar_state(kind(float(state["mu_product"])) * kind(mu))
            nadam_update(
                p, p.grad, state["exp_avg"], state["exp_avg_sq"],
                lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                weight_decay=group["weight_decay"],
                decoupled=group["decoupled_weight_decay"], maximize=group["maximize"],
                step=step, mu=mu, mu_next=mu_next, mu_product=state["mu_product"],
            )  # fmt: skip


class RAdam(Optimizer):
    """RAdam (Liu et al., 2020): Adam whose adaptive rate is rectified by the variance of its
    estimate, and plain momentum steps while that variance is intractable (the first steps);
    `decoupled_weight_decay` as AdamW's.

    >>> import tideflow as flow
    >>> w = flow.nn.Parameter(flow.tensor([1.0, -2.0]))
    >>> opt = flow.optim.RAdam([w], lr=0.01)
    >>> (w * w).sum().backward()
    >>> opt.step()
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False) -> None:  # fmt: skip
        check_adam_hyperparameters(self, lr, betas, eps, weight_decay, differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        decoupled_weight_decay=decoupled_weight_decay,
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
            radam_update(
                p, p.grad, state["exp_avg"], state["exp_avg_sq"],
                lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                weight_decay=group["weight_decay"],
                decoupled=group["decoupled_weight_decay"], maximize=group["maximize"],
                step=state["step"],
            )  # fmt: skip
