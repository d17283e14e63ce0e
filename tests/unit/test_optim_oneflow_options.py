"""Optimizer options OneFlow has and PyTorch lacks, against NumPy transcriptions."""

import numpy as np
import pytest

import tideflow as flow


def _adam_without_bias_correction(p, grads, lr, betas, eps, weight_decay, decoupled):
    m, v = np.zeros_like(p), np.zeros_like(p)
    for g in grads:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        p = p - lr * m / (np.sqrt(v) + eps)
    return p


@pytest.mark.parametrize("optimizer", ["Adam", "AdamW"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adam_without_bias_correction_steps_on_the_raw_moments(optimizer, dtype):
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal((3, 4))
    grads = [rng.standard_normal((3, 4)) for _ in range(3)]
    kw = dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)
    param = flow.nn.Parameter(flow.tensor(p0.astype(dtype)))
    opt = getattr(flow.optim, optimizer)([param], do_bias_correction=False, **kw)
    for g in grads:
        param.grad = flow.tensor(g.astype(dtype))
        opt.step()
    want = _adam_without_bias_correction(p0, grads, decoupled=optimizer == "AdamW", **kw)
    # a dozen operations per element per step, three steps: a few dozen roundings of the dtype
    rtol = 50 * np.finfo(dtype).eps
    np.testing.assert_allclose(param.detach().numpy(), want, rtol=rtol, atol=rtol)


def test_lamb_takes_oneflows_name_for_bias_correction():
    def run(**kw):
        w = flow.nn.Parameter(flow.tensor([1.0, -2.0], dtype=flow.float64))
        opt = flow.optim.LAMB([w], lr=0.01, **kw)
        (w * w).sum().backward()
        opt.step()
        return w.detach().numpy()

    np.testing.assert_array_equal(run(do_bias_correction=False), run(bias_correction=False))
    assert not np.array_equal(run(do_bias_correction=False), run())
