"""Fused optimizer updates, checked through the optimizers that use them: three steps of
tideflow.optim.X and torch.optim.X from the same parameter and gradients. LAMB, which PyTorch
lacks, is checked against a NumPy transcription of the paper's algorithm; LBFGS, which has no
fused update, runs on a closure (a convex quartic) in both libraries."""

import numpy as np

from ..opinfo import OpInfo, Sample, make_array

_CONFIGS = {
    "SGD": [dict(lr=0.1), dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
            dict(lr=0.05, momentum=0.5, dampening=0.1, maximize=True)],
    "Adam": [dict(lr=0.01), dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True)],
    "AdamW": [dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6)],
    "RMSprop": [dict(), dict(lr=0.01, alpha=0.9, momentum=0.8, weight_decay=0.1),
                dict(centered=True, momentum=0.5, maximize=True),
                dict(alpha=0.3, centered=True, eps=1e-3)],
    "Adagrad": [dict(lr=0.1), dict(lr=0.1, lr_decay=0.2, weight_decay=0.1,
                                   initial_accumulator_value=0.5, maximize=True)],
    "Adadelta": [dict(), dict(lr=0.5, rho=0.5, eps=1e-4, weight_decay=0.1, maximize=True)],
    "Adamax": [dict(), dict(lr=0.01, betas=(0.5, 0.9), weight_decay=0.1, maximize=True)],
    "NAdam": [dict(), dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)],
    # three steps are momentum steps (rho_t <= 5): test_optim.py runs on to rectified ones
    "RAdam": [dict(), dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, maximize=True)],
    "ASGD": [dict(t0=1), dict(lr=0.1, lambd=0.1, alpha=0.5, weight_decay=0.1, maximize=True)],
    "Rprop": [dict(), dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)],
}  # fmt: skip

_LAMB_CONFIGS = [
    dict(lr=0.01),
    dict(lr=0.02, betas=(0.8, 0.9), eps=1e-4, weight_decay=0.1, clamp_value=2.0),
    dict(lr=0.01, weight_decay=0.01, bias_correction=False, maximize=True),
]

_LBFGS_CONFIGS = [
    dict(max_iter=4),
    dict(lr=0.5, max_iter=5, history_size=2),
    dict(max_iter=4, line_search_fn="strong_wolfe"),
    dict(max_iter=6, history_size=3, line_search_fn="strong_wolfe"),
]


def _steps(lib, optim_cls, p, grads, kw):
    param = lib.nn.Parameter(p.detach().clone())
    opt = getattr(lib.optim, optim_cls)([param], **kw)
    for g in grads:
        param.grad = g.detach().clone()
        opt.step()
    return param.detach()


def _samples(configs):
    def build(rng, dtype):
        return [
            Sample((make_array(rng, (3, 4), dtype), make_array(rng, (3, 4), dtype),
                    make_array(rng, (3, 4), dtype)), dict(kw))
            for kw in configs
        ]  # fmt: skip

    return build


def _record(optim_cls):
    import tideflow as flow

    return OpInfo(
        f"optim.{optim_cls}",
        _samples(_CONFIGS[optim_cls]),
        op=lambda p, g1, g2, **kw: _steps(flow, optim_cls, p, (g1, g2, g1), kw),
        torch=lambda t, p, g1, g2, **kw: _steps(t, optim_cls, p, (g1, g2, g1), kw),
        grad=False,
    )


def lamb_reference(
    p,
    grads,
    lr=1e-3,
    betas=(0.9, 0.999),
    eps=1e-6,
    weight_decay=0.0,
    clamp_value=10.0,
    bias_correction=True,
    maximize=False,
) -> np.ndarray:
    """LAMB (You et al., 2019, Algorithm 2) step by step in NumPy: `p` after one step per
    gradient in `grads`."""  # fmt: skip
    p = p.copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    beta1, beta2 = betas
    for t, g in enumerate(grads, start=1):
        g = -g if maximize else g
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        m_hat = m / (1 - beta1**t) if bias_correction else m
        v_hat = v / (1 - beta2**t) if bias_correction else v
        r = m_hat / (np.sqrt(v_hat) + eps) + weight_decay * p
        phi = min(np.sqrt(np.sum(p**2)), clamp_value)
        r_norm = np.sqrt(np.sum(r**2))
        ratio = phi / r_norm if phi > 0 and r_norm > 0 else 1.0
        p = p - lr * ratio * r
    return p


def _lamb_record():
    import tideflow as flow

    return OpInfo(
        "optim.LAMB",
        _samples(_LAMB_CONFIGS),
        op=lambda p, g1, g2, **kw: _steps(flow, "LAMB", p, (g1, g2, g1), kw),
        ref=lambda p, g1, g2, **kw: lamb_reference(p, (g1, g2, g1), **kw),
        grad=False,
    )


def _lbfgs_steps(lib, p, a, b, kw):
    """Two LBFGS steps on sum(a**2 / 2 * x**2 + b * x + x**4 / 10): smooth and convex."""
    x = lib.nn.Parameter(p.detach().clone())
    curvature = a.detach() ** 2 + 0.5
    opt = lib.optim.LBFGS([x], **kw)

    def closure():
        opt.zero_grad()
        loss = (0.5 * curvature * x * x + b * x + 0.1 * x**4).sum()
        loss.backward()
        return loss

    for _ in range(2):
        opt.step(closure)
    return x.detach()


def _lbfgs_record():
    import tideflow as flow

    return OpInfo(
        "optim.LBFGS",
        _samples(_LBFGS_CONFIGS),
        op=lambda p, a, b, **kw: _lbfgs_steps(flow, p, a, b, kw),
        torch=lambda t, p, a, b, **kw: _lbfgs_steps(t, p, a, b, kw),
        grad=False,
        # NOTE: float64 only: the iteration multiplies tiny steps by large curvature
        # estimates, so the SBP simulation's random partial sums lose float32 precision.
        # tests/unit/test_optim.py compares float32 trajectories with PyTorch.
        dtypes=("float64",),
    )


RECORDS = [*(_record(name) for name in _CONFIGS), _lamb_record(), _lbfgs_record()]
