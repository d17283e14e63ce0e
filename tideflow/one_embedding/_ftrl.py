"""OneFlow's FTRL optimizer (`flow.one_embedding.Ftrl`): its update rule, as an update op for
dense parameters and as a NumPy function the embedding rows share.

OneFlow's rule, per element, with `g` the gradient plus `weight_decay * w` (OneFlow passes
weight decay as L2 on the gradient) and `n` the accumulator:

    n' = n + g^2
    sigma = (n'^lr_power - n^lr_power) / lr
    z' = z + g - sigma * w
    w' = 0 if |z'| < lambda1 else (sign(z') lambda1 - z') / ((beta + n'^lr_power) / lr + lambda2)

NOTE: OneFlow raises the accumulator to `lr_power` itself (-0.5 by default: 1/sqrt(n)),
where McMahan et al. and TensorFlow use `-lr_power` (sqrt(n)); we keep OneFlow's numbers.
"""

from __future__ import annotations

import numpy as np

from ..framework.dispatch import dispatch
from ..framework.errors import ShapeError, TideflowError
from ..framework.registry import Meta, OpDef
from ..framework.sbp import B, S, Signature
from ..ops.creation import full_like, zeros_like
from ..optim.optimizer import Optimizer, params_with_grad


def ftrl_rows(w, g, accumulate, z, *, lr, weight_decay, lr_power, lambda1, lambda2, beta):
    """One FTRL step on arrays of one shape, written in place into w, accumulate and z."""
    if weight_decay:
        g = g + weight_decay * w
    powered = np.power(accumulate, lr_power)
    accumulate += g * g
    next_powered = np.power(accumulate, lr_power)
    z += g - ((next_powered - powered) / lr) * w
    step = (np.copysign(lambda1, z) - z) / ((beta + next_powered) / lr + lambda2)
    np.copyto(w, np.where(np.abs(z) < lambda1, 0, step).astype(w.dtype, copy=False))


def _ftrl_meta(param: Meta, *others, **_) -> tuple:
    for other in others:
        if tuple(other.shape) != tuple(param.shape):
            raise ShapeError(
                f"ftrl_update: operand of shape {list(other.shape)} does not match the "
                f"parameter of shape {list(param.shape)}"
            )
    return ()


def _ftrl_sbp(param: Meta, *_, **__) -> list[Signature]:
    splits = [Signature((S(i),) * 4, ()) for i in range(len(param.shape))]
    return [Signature((B,) * 4, ()), *splits]


def _ftrl_kernel(w, g, accumulate, z, **hyper) -> tuple:
    ftrl_rows(w, g, accumulate, z, **hyper)
    return ()


# NOTE: an update op of this package's optimizer, not a registered tensor op (it has no
# tensor result to check against PyTorch, which has no FTRL): tests/unit check its numbers.
FTRL_UPDATE = OpDef(
    "ftrl_update",
    inputs=("param", "grad", "accumulate", "z"),
    meta=_ftrl_meta,
    sbp=_ftrl_sbp,
    kernels={"cpu": _ftrl_kernel},
    n_out=0,
    mutates=(0, 2, 3),
)


class Ftrl(Optimizer):
    """OneFlow's FTRL-Proximal optimizer (see the module docstring for the rule).

    >>> import tideflow as flow
    >>> w = flow.nn.Parameter(flow.tensor([1.0, -2.0]))
    >>> opt = flow.one_embedding.Ftrl([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    """

    def __init__(self, params, lr=0.001, weight_decay=0.0, lr_power=-0.5,
                 initial_accumulator_value=0.1, lambda1=0.0, lambda2=0.0,
                 beta=0.0) -> None:  # fmt: skip
        if not lr > 0.0:
            raise TideflowError(f"Ftrl: lr must be positive, got {lr}")
        if not weight_decay >= 0.0:
            raise TideflowError(f"Ftrl: weight_decay must be >= 0, got {weight_decay}")
        if not initial_accumulator_value > 0.0 and lr_power < 0:
            raise TideflowError(
                "Ftrl: initial_accumulator_value must be positive with a negative lr_power "
                f"(it is raised to lr_power), got {initial_accumulator_value}"
            )
        defaults = dict(lr=lr, weight_decay=weight_decay, lr_power=lr_power,
                        initial_accumulator_value=initial_accumulator_value, lambda1=lambda1,
                        lambda2=lambda2, beta=beta)  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict) -> None:
        for p in params_with_grad(group):
            state = self.state[p]
            if not state:
                state["accumulate"] = full_like(p, group["initial_accumulator_value"])
                state["z"] = zeros_like(p)
            dispatch(FTRL_UPDATE, (p, p.grad, state["accumulate"], state["z"]), hyper(group))


def hyper(group: dict) -> dict:
    """The update's hyperparameters from a parameter group."""
    keys = ("lr", "weight_decay", "lr_power", "lambda1", "lambda2", "beta")
    return {k: group[k] for k in keys}
