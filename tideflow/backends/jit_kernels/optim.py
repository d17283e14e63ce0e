"""Optimizer updates as one loop per parameter: each element of the parameter and its state
is read once and written once, where the NumPy kernels make a pass per arithmetic step.

The loops repeat the NumPy kernels' operations in the same order and in the parameter's dtype
(every hyperparameter is rounded to it once, as NumPy rounds a Python float against a float32
array) and are compiled without fastmath, so they give the NumPy kernels' results bit for bit.
Hyperparameters travel as one small array of that dtype and flags as one int: numba's call
checks the type of every argument, and a dozen scalars cost more than the update of a bias.
"""

from __future__ import annotations

import math

import numpy as np

from .. import jit
from ._common import FLOATS, empty_of

_MAXIMIZE, _WEIGHT_DECAY, _MOMENTUM, _NESTEROV, _FIRST, _DECOUPLED, _AMSGRAD, _LERP_SMALL = (
    1 << i for i in range(8)
)


@jit.jit(fastmath=False, error_model="numpy")
def _sgd_loop(p, g, buf, s, flags):
    lr, momentum, damp1, weight_decay = s[0], s[1], s[2], s[3]
    maximize = flags & _MAXIMIZE
    has_wd = flags & _WEIGHT_DECAY
    has_momentum = flags & _MOMENTUM
    nesterov = flags & _NESTEROV
    first = flags & _FIRST
    for i in range(p.size):
        d = -g[i] if maximize else g[i]
        if has_wd:
            d = d + weight_decay * p[i]
        if has_momentum:
            b = d if first else buf[i] * momentum + damp1 * d
            buf[i] = b
            d = d + momentum * b if nesterov else b
        p[i] = p[i] - lr * d


def sgd(numpy_kernel):
    """The `sgd_update` kernel: `numpy_kernel` for other dtypes and layouts."""

    def kernel(p, g, buf, *, lr, momentum, dampening, weight_decay, nesterov, maximize, first):
        dt = p.dtype
        if dt not in FLOATS or not same_layout(p, g, buf if momentum else None):
            return numpy_kernel(p, g, buf, lr=lr, momentum=momentum, dampening=dampening,
                                weight_decay=weight_decay, nesterov=nesterov,
                                maximize=maximize, first=first)  # fmt: skip
        flags = (
            (_MAXIMIZE if maximize else 0)
            | (_WEIGHT_DECAY if weight_decay else 0)
            | (_MOMENTUM if momentum else 0)
            | (_NESTEROV if nesterov else 0)
            | (_FIRST if first else 0)
        )
        s = np.array((lr, momentum, 1 - dampening, weight_decay), dt)
        _sgd_loop(p.ravel(), g.ravel(), buf.ravel() if momentum else empty_of(dt), s, flags)

    return kernel


@jit.jit(fastmath=False, error_model="numpy")
def _adam_loop(p, g, m, v, vmax, s, flags):
    decay, weight_decay, lerp_w, one_m_beta2 = s[0], s[1], s[2], s[3]
    beta2, bias2_sqrt, eps, step_size = s[4], s[5], s[6], s[7]
    maximize = flags & _MAXIMIZE
    has_wd = flags & _WEIGHT_DECAY
    decoupled = flags & _DECOUPLED
    amsgrad = flags & _AMSGRAD
    lerp_small = flags & _LERP_SMALL
    for i in range(p.size):
        gi = -g[i] if maximize else g[i]
        pi = p[i]
        if has_wd:
            if decoupled:
                pi = pi * decay
            else:
                gi = gi + weight_decay * pi
        # NOTE: torch's lerp (the NumPy kernel's `_lerp_`): exact at weights 0 and 1.
        mi = m[i]
        diff = gi - mi
        mi = mi + diff * lerp_w if lerp_small else gi - diff * lerp_w
        m[i] = mi
        vi = v[i] * beta2 + one_m_beta2 * gi * gi
        v[i] = vi
        if amsgrad:
            vm = vmax[i]
            if vi > vm or vi != vi:  # np.maximum: a NaN wins
                vm = vi
            vmax[i] = vm
            vi = vm
        p[i] = pi - mi / (np.sqrt(vi) / bias2_sqrt + eps) * step_size


def adam(numpy_kernel):
    """The `adam_update` kernel (Adam and AdamW): `numpy_kernel` for other dtypes and
    layouts."""

    def kernel(p, g, m, v, vmax, *, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad,
               maximize, step, bias_correction=True):  # fmt: skip
        dt = p.dtype
        if dt not in FLOATS or not same_layout(p, g, m, v, vmax if amsgrad else None):
            return numpy_kernel(p, g, m, v, vmax, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                                weight_decay=weight_decay, decoupled=decoupled, amsgrad=amsgrad,
                                maximize=maximize, step=step,
                                bias_correction=bias_correction)  # fmt: skip
        weight = 1 - beta1
        small = abs(weight) < 0.5
        flags = (
            (_MAXIMIZE if maximize else 0)
            | (_WEIGHT_DECAY if weight_decay else 0)
            | (_DECOUPLED if decoupled else 0)
            | (_AMSGRAD if amsgrad else 0)
            | (_LERP_SMALL if small else 0)
        )
        bias1 = 1 - beta1**step if bias_correction else 1.0
        bias2_sqrt = math.sqrt(1 - beta2**step) if bias_correction else 1.0
        # The NumPy kernel's scalars, each computed in Python floats and rounded once.
        s = np.array(
            (
                1 - lr * weight_decay, weight_decay, weight if small else 1 - weight, 1 - beta2,
                beta2, bias2_sqrt, eps, lr / bias1,
            ),
            dt,
        )  # fmt: skip
        vmax = vmax.ravel() if amsgrad else empty_of(dt)
        _adam_loop(p.ravel(), g.ravel(), m.ravel(), v.ravel(), vmax, s, flags)

    return kernel


def same_layout(p: np.ndarray, *others) -> bool:
    """p and every operand (None: unused) C-contiguous, of p's shape and dtype: the loops
    run over flat views, and a mismatch goes to the NumPy kernel (which rejects it)."""
    if not p.flags.c_contiguous:
        return False
    for a in others:
        if a is not None and (a.dtype != p.dtype or a.shape != p.shape or not a.flags.c_contiguous):
            return False
    return True


KERNELS = {"sgd_update": sgd, "adam_update": adam}
