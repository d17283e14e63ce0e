"""Fused optimizer updates: one op per parameter and step, writing the parameter and its
optimizer state in place (`mutates=`). Eager optimizers call them under no_grad; a compiled
graph records them as its update nodes. The arithmetic follows PyTorch's single-tensor
implementations so trajectories match step for step.
"""

from __future__ import annotations

import math

import numpy as np

from ._rules import Signature, defop, dispatch, elementwise_sbp

__all__: list[str] = []


def _no_outputs(*_, **__) -> tuple:
    return ()


_elementwise = elementwise_sbp()


def _update_sbp(*operands, **_) -> list[Signature]:
    """Updates are elementwise over parameter, gradient and state: any common split, or B."""
    return [Signature(sig.ins, ()) for sig in _elementwise(*operands)]


def _update_op(name: str, inputs: tuple[str, ...], kernel, mutates: tuple[int, ...]):
    return defop(
        name,
        inputs=inputs,
        meta=_no_outputs,
        sbp=_update_sbp,
        kernels={"cpu": kernel},
        n_out=0,
        mutates=mutates,
    )


# -- SGD --------------------------------------------------------------------------------------
def _sgd_kernel(p, g, buf, *, lr, momentum, dampening, weight_decay, nesterov, maximize, first):
    d = -g if maximize else g
    if weight_decay:
        d = d + weight_decay * p
    if momentum:
        if first:
            np.copyto(buf, d)
        else:
            buf *= momentum
            buf += (1 - dampening) * d
        d = d + momentum * buf if nesterov else buf
    p -= (lr * d).astype(p.dtype, copy=False)


_sgd = _update_op("sgd_update", ("param", "grad", "momentum_buffer"), _sgd_kernel, (0, 2))


def sgd_update(param, grad, momentum_buffer, **hyper) -> None:
    """One SGD step on `param` (and its momentum buffer, which may be None)."""
    dispatch(_sgd, (param, grad, momentum_buffer), hyper)


# -- Adam / AdamW -------------------------------------------------------------------------------
def _adam_kernel(p, g, m, v, vmax, *, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad,
                 maximize, step):  # fmt: skip
    if maximize:
        g = -g
    if weight_decay:
        if decoupled:
            p *= 1 - lr * weight_decay
        else:
            g = g + weight_decay * p
    m += (g - m) * (1 - beta1)  # lerp, as PyTorch's exp_avg.lerp_(grad, 1 - beta1)
    v *= beta2
    v += (1 - beta2) * g * g
    if amsgrad:
        np.maximum(vmax, v, out=vmax)
        v = vmax
    bias1 = 1 - beta1**step
    bias2_sqrt = math.sqrt(1 - beta2**step)
    denom = np.sqrt(v) / bias2_sqrt + eps
    p -= (lr / bias1) * (m / denom)


_adam = _update_op(
    "adam_update",
    ("param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"),
    _adam_kernel,
    (0, 2, 3, 4),
)


def adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, **hyper) -> None:
    """One Adam (or AdamW with decoupled=True) step, in place."""
    dispatch(_adam, (param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq), hyper)
