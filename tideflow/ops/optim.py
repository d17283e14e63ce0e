"""Fused optimizer updates: one op per parameter and step, writing the parameter and its
optimizer state in place (`mutates=`). Eager optimizers call them under no_grad; a compiled
graph records them as its update nodes. The arithmetic follows PyTorch's single-tensor
implementations so trajectories match step for step.
"""

from __future__ import annotations

import math

import numpy as np

from ..framework.errors import Rejected, ShapeError
from ._rules import B, Meta, Signature, defop, dispatch, elementwise_sbp

__all__: list[str] = []


def _update_meta(name: str, inputs: tuple[str, ...]):
    """The meta rule of an update op: no outputs; the gradient and every state tensor (None
    where absent) has the parameter's shape."""

    def meta(param: Meta, *others, **_) -> tuple:
        for operand, other in zip(inputs[1:], others, strict=True):
            if other is not None and tuple(other.shape) != tuple(param.shape):
                # NOTE: a grad of another shape is the user's assignment to `.grad`; state of
                # another shape usually comes from an optimizer state_dict of another model.
                raise ShapeError(
                    f"{name}: {operand} of shape {list(other.shape)} does not match the "
                    f"parameter of shape {list(param.shape)}"
                    + ("" if operand == "grad" else " (optimizer state from another model?)")
                )
        return ()

    return meta


def _reject_other_shapes(p: np.ndarray, *others) -> None:
    """Each kernel's first step: NumPy would broadcast some mismatched operands, and an update
    must not write some of its operands and then fail on another."""
    for other in others:
        if other is not None and other.shape != p.shape:
            raise Rejected("optimizer update: operand shapes differ")


_elementwise = elementwise_sbp()


def _update_sbp(*operands, **_) -> list[Signature]:
    """Updates are elementwise over parameter, gradient and state: any common split, or B."""
    return [Signature(sig.ins, ()) for sig in _elementwise(*operands)]


def _whole_update_sbp(*operands, **_) -> list[Signature]:
    """Updates that reduce over the whole parameter (LAMB's norms): every operand whole."""
    return [Signature(tuple(B if isinstance(m, Meta) else None for m in operands), ())]


def _lerp_(start: np.ndarray, end: np.ndarray, weight: float, scratch=None) -> None:
    """`start.lerp_(end, weight)` with PyTorch's two formulas (exact at weight 0 and 1)."""
    diff = np.subtract(end, start, out=scratch)
    if abs(weight) < 0.5:
        diff *= weight
        start += diff
    else:
        diff *= 1 - weight
        np.subtract(end, diff, out=start)


def _on_real_parts(kernel):
    """`kernel` updating complex parameters as pairs of reals, as PyTorch's optimizers do
    (`view_as_real`): complex operands go in as interleaved real views, written in place."""

    def run(*arrays, **hyper):
        if not any(isinstance(a, np.ndarray) and a.dtype.kind == "c" for a in arrays):
            return kernel(*arrays, **hyper)
        real = [a.view(a.real.dtype) if isinstance(a, np.ndarray) else a for a in arrays]
        return kernel(*real, **hyper)

    return run


def _update_op(name: str, inputs: tuple[str, ...], kernel, mutates: tuple[int, ...],
               sbp=_update_sbp):  # fmt: skip
    return defop(
        name,
        inputs=inputs,
        meta=_update_meta(name, inputs),
        sbp=sbp,
        kernels={"cpu": _on_real_parts(kernel)},
        n_out=0,
        mutates=mutates,
    )


# -- SGD --------------------------------------------------------------------------------------
def _sgd_kernel(p, g, buf, *, lr, momentum, dampening, weight_decay, nesterov, maximize, first):
    _reject_other_shapes(p, g, buf)
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
                 maximize, step, bias_correction=True):  # fmt: skip
    _reject_other_shapes(p, g, m, v, vmax)
    if maximize:
        g = -g
    if weight_decay:
        if decoupled:
            p *= 1 - lr * weight_decay
        else:
            g = g + weight_decay * p
    # NOTE: one scratch buffer instead of a temporary per operation: on W1's 1.9M
    # parameters this is a third of the time of the naive expression.
    tmp = np.empty_like(m)
    _lerp_(m, g, 1 - beta1, tmp)
    v *= beta2
    np.multiply(g, 1 - beta2, out=tmp)  # PyTorch's addcmul order: (value * g) * g
    tmp *= g
    v += tmp
    if amsgrad:
        np.maximum(vmax, v, out=vmax)
        v = vmax
    # NOTE: OneFlow's do_bias_correction=False steps on the raw moments
    bias1 = 1 - beta1**step if bias_correction else 1.0
    bias2_sqrt = math.sqrt(1 - beta2**step) if bias_correction else 1.0
    np.sqrt(v, out=tmp)
    tmp /= bias2_sqrt
    tmp += eps
    np.divide(m, tmp, out=tmp)
    tmp *= lr / bias1
    p -= tmp


_adam = _update_op(
    "adam_update",
    ("param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"),
    _adam_kernel,
    (0, 2, 3, 4),
)


def adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, **hyper) -> None:
    """One Adam (or AdamW with decoupled=True) step, in place."""
    dispatch(_adam, (param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq), hyper)


# -- RMSprop ------------------------------------------------------------------------------------
def _rmsprop_kernel(p, g, square_avg, grad_avg, momentum_buffer, *, lr, alpha, eps, weight_decay,
                    momentum, centered, maximize):  # fmt: skip
    _reject_other_shapes(p, g, square_avg, grad_avg, momentum_buffer)
    if maximize:
        g = -g
    if weight_decay:
        g = g + weight_decay * p
    square_avg *= alpha
    square_avg += (1 - alpha) * g * g
    if centered:
        _lerp_(grad_avg, g, 1 - alpha)
        avg = np.sqrt(square_avg - grad_avg * grad_avg)
    else:
        avg = np.sqrt(square_avg)
    avg += eps
    if momentum > 0:
        momentum_buffer *= momentum
        momentum_buffer += g / avg
        p -= lr * momentum_buffer
    else:
        p += (-lr * g) / avg  # addcdiv's order: (value * grad) / avg


_rmsprop = _update_op(
    "rmsprop_update",
    ("param", "grad", "square_avg", "grad_avg", "momentum_buffer"),
    _rmsprop_kernel,
    (0, 2, 3, 4),
)


def rmsprop_update(param, grad, square_avg, grad_avg, momentum_buffer, **hyper) -> None:
    """One RMSprop step, in place (grad_avg is None unless centered, momentum_buffer None
    without momentum)."""
    dispatch(_rmsprop, (param, grad, square_avg, grad_avg, momentum_buffer), hyper)


# -- Adagrad ------------------------------------------------------------------------------------
def _adagrad_kernel(p, g, state_sum, *, lr, lr_decay, weight_decay, eps, maximize, step):
    _reject_other_shapes(p, g, state_sum)
    if maximize:
        g = -g
    if weight_decay:
        g = g + weight_decay * p
    clr = lr / (1 + (step - 1) * lr_decay)
    state_sum += g * g
    std = np.sqrt(state_sum)
    std += eps
    p += (-clr * g) / std


_adagrad = _update_op("adagrad_update", ("param", "grad", "sum"), _adagrad_kernel, (0, 2))


def adagrad_update(param, grad, sum, **hyper) -> None:
    """One Adagrad step on `param` and its running sum of squared gradients, in place."""
    dispatch(_adagrad, (param, grad, sum), hyper)


# -- Adadelta -----------------------------------------------------------------------------------
def _adadelta_kernel(p, g, square_avg, acc_delta, *, lr, rho, eps, weight_decay, maximize):
    _reject_other_shapes(p, g, square_avg, acc_delta)
    if maximize:
        g = -g
    if weight_decay:
        g = g + weight_decay * p
    square_avg *= rho
    square_avg += (1 - rho) * g * g
    std = np.sqrt(square_avg + eps)
    delta = np.sqrt(acc_delta + eps)
    delta /= std
    delta *= g
    acc_delta *= rho
    acc_delta += (1 - rho) * delta * delta
    p -= lr * delta


_adadelta = _update_op(
    "adadelta_update",
    ("param", "grad", "square_avg", "acc_delta"),
    _adadelta_kernel,
    (0, 2, 3),
)


def adadelta_update(param, grad, square_avg, acc_delta, **hyper) -> None:
    """One Adadelta step, in place."""
    dispatch(_adadelta, (param, grad, square_avg, acc_delta), hyper)


# -- LAMB ---------------------------------------------------------------------------------------
def _lamb_kernel(p, g, m, v, *, lr, beta1, beta2, eps, weight_decay, clamp_value,
                 bias_correction, maximize, step):  # fmt: skip
    _reject_other_shapes(p, g, m, v)
    if maximize:
        g = -g
    m *= beta1
    m += (1 - beta1) * g
    v *= beta2
    v += (1 - beta2) * g * g
    bias1, bias2 = (1 - beta1**step, 1 - beta2**step) if bias_correction else (1.0, 1.0)
    update = (m / bias1) / (np.sqrt(v / bias2) + eps)
    if weight_decay:
        update += weight_decay * p
    # NOTE: the layer-wise trust ratio phi(||w||) / ||update|| of You et al. (2019), with
    # phi clipping the weight norm to [0, clamp_value]; a zero norm leaves the step unscaled.
    w_norm = min(float(np.linalg.norm(p.ravel())), clamp_value)
    u_norm = float(np.linalg.norm(update.ravel()))
    trust_ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
    p -= (lr * trust_ratio) * update


_lamb = _update_op(
    "lamb_update",
    ("param", "grad", "exp_avg", "exp_avg_sq"),
    _lamb_kernel,
    (0, 2, 3),
    sbp=_whole_update_sbp,
)


def lamb_update(param, grad, exp_avg, exp_avg_sq, **hyper) -> None:
    """One LAMB step, in place. The trust ratio needs norms of the whole parameter, so its
    only layout is every operand broadcast."""
    dispatch(_lamb, (param, grad, exp_avg, exp_avg_sq), hyper)


# -- Adamax, NAdam, RAdam -------------------------------------------------------------------------
def _adam_moments(p, g, m, v, *, lr, beta1, beta2, weight_decay, decoupled, maximize):
    """The first steps Adam's relatives share: maximize, weight decay (L2 or decoupled), and
    the moments' updates (v may be None). Returns the gradient as used."""
    if maximize:
        g = -g
    if weight_decay:
        if decoupled:
            p *= 1 - lr * weight_decay
        else:
            g = g + weight_decay * p
    _lerp_(m, g, 1 - beta1)
    if v is not None:
        v *= beta2
        v += (1 - beta2) * g * g  # PyTorch's addcmul order: (value * g) * g
    return g


def _adamax_kernel(p, g, m, u, *, lr, beta1, beta2, eps, weight_decay, maximize, step):
    _reject_other_shapes(p, g, m, u)
    g = _adam_moments(p, g, m, None, lr=lr, beta1=beta1, beta2=beta2,
                      weight_decay=weight_decay, decoupled=False, maximize=maximize)  # fmt: skip
    u *= beta2  # the infinity norm: max(beta2 * u, |g| + eps)
    np.maximum(u, np.abs(g) + eps, out=u)
    p -= (lr / (1 - beta1**step)) * (m / u)


_adamax = _update_op("adamax_update", ("param", "grad", "exp_avg", "exp_inf"), _adamax_kernel,
                     (0, 2, 3))  # fmt: skip


def adamax_update(param, grad, exp_avg, exp_inf, **hyper) -> None:
    """One Adamax step, in place."""
    dispatch(_adamax, (param, grad, exp_avg, exp_inf), hyper)


def _nadam_kernel(p, g, m, v, *, lr, beta1, beta2, eps, weight_decay, decoupled, maximize, step,
                  mu, mu_next, mu_product):  # fmt: skip
    """`mu_product` is the product of the momentum schedule's mu up to this step (the caller
    keeps it, as PyTorch's state does)."""
    _reject_other_shapes(p, g, m, v)
    g = _adam_moments(p, g, m, v, lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay,
                      decoupled=decoupled, maximize=maximize)  # fmt: skip
    denom = np.sqrt(v / (1 - beta2**step))
    denom += eps
    p -= (lr * (1 - mu) / (1 - mu_product)) * (g / denom)
    p -= (lr * mu_next / (1 - mu_product * mu_next)) * (m / denom)


_nadam = _update_op("nadam_update", ("param", "grad", "exp_avg", "exp_avg_sq"), _nadam_kernel,
                    (0, 2, 3))  # fmt: skip


def nadam_update(param, grad, exp_avg, exp_avg_sq, **hyper) -> None:
    """One NAdam step, in place."""
    dispatch(_nadam, (param, grad, exp_avg, exp_avg_sq), hyper)


def _radam_kernel(p, g, m, v, *, lr, beta1, beta2, eps, weight_decay, decoupled, maximize, step):
    _reject_other_shapes(p, g, m, v)
    _adam_moments(p, g, m, v, lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay,
                  decoupled=decoupled, maximize=maximize)  # fmt: skip
    bias2 = 1 - beta2**step
    step_direction = (m / (1 - beta1**step)) * lr
    # NOTE: the variance of the adaptive rate is tractable once rho_t > 5 (Liu et al., 2020);
    # before that the step is momentum SGD's
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step * beta2**step / bias2
    if rho_t > 5.0:
        rect = math.sqrt(
            (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
        )
        adaptive = np.sqrt(v)
        adaptive += eps
        step_direction *= math.sqrt(bias2) / adaptive
        step_direction *= rect
    p -= step_direction


_radam = _update_op("radam_update", ("param", "grad", "exp_avg", "exp_avg_sq"), _radam_kernel,
                    (0, 2, 3))  # fmt: skip


def radam_update(param, grad, exp_avg, exp_avg_sq, **hyper) -> None:
    """One RAdam step, in place."""
    dispatch(_radam, (param, grad, exp_avg, exp_avg_sq), hyper)


# -- ASGD -----------------------------------------------------------------------------------------
def _asgd_kernel(p, g, ax, *, lambd, eta, mu, weight_decay, maximize):
    """`eta` and `mu` are this step's rate and averaging weight (the caller's schedule)."""
    _reject_other_shapes(p, g, ax)
    if maximize:
        g = -g
    if weight_decay:
        g = g + weight_decay * p
    p *= 1 - lambd * eta
    p -= eta * g
    if mu != 1:
        ax += (p - ax) * mu
    else:
        np.copyto(ax, p)


_asgd = _update_op("asgd_update", ("param", "grad", "ax"), _asgd_kernel, (0, 2))


def asgd_update(param, grad, ax, **hyper) -> None:
    """One ASGD step, in place (`ax` is the running average of the parameter)."""
    dispatch(_asgd, (param, grad, ax), hyper)


# -- Rprop ----------------------------------------------------------------------------------------
def _rprop_kernel(p, g, prev, step_size, *, etaminus, etaplus, step_size_min, step_size_max,
                  maximize):  # fmt: skip
    _reject_other_shapes(p, g, prev, step_size)
    if maximize:
        g = -g
    agree = np.sign(g * prev)
    # the factors in the parameter's dtype, as PyTorch keeps them in a tensor like the gradient
    kind = p.dtype.type
    factor = np.where(agree > 0, kind(etaplus), np.where(agree < 0, kind(etaminus), kind(1)))
    step_size *= factor
    np.clip(step_size, step_size_min, step_size_max, out=step_size)
    g = np.where(factor == kind(etaminus), kind(0), g)  # a sign change: no step, forgotten
    p -= np.sign(g) * step_size
    np.copyto(prev, g)


_rprop = _update_op("rprop_update", ("param", "grad", "prev", "step_size"), _rprop_kernel,
                    (0, 2, 3))  # fmt: skip


def rprop_update(param, grad, prev, step_size, **hyper) -> None:
    """One Rprop step, in place."""
    dispatch(_rprop, (param, grad, prev, step_size), hyper)
