"""OneFlow's CosineDecayLR: its documented formula step by step, the floor after
decay_steps, resuming from a state dict, inside WarmupLR, and the refused decay_steps."""

import math

import pytest

import tideflow as flow
from tideflow.optim import lr_scheduler as L


def _rates(make, steps, lr=0.1):
    opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=lr)
    sched = make(opt)
    out = []
    for _ in range(steps):
        out.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    return out, opt, sched


def _oneflow_formula(step, decay_steps, alpha, base=0.1):
    if step >= decay_steps:
        return base * alpha
    return base * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * step / decay_steps)) + alpha)


@pytest.mark.parametrize("alpha", [0.0, 0.2])
def test_rates_follow_the_formula_and_stay_at_the_floor(alpha):
    rates, _, _ = _rates(lambda o: L.CosineDecayLR(o, decay_steps=5, alpha=alpha), steps=8)
    assert rates == pytest.approx([_oneflow_formula(s, 5, alpha) for s in range(8)])
    assert rates[-1] == pytest.approx(0.1 * alpha)


def test_resumes_from_its_state_dict():
    _, opt, sched = _rates(lambda o: L.CosineDecayLR(o, decay_steps=6), steps=3)
    state = sched.state_dict()
    resumed = L.CosineDecayLR(opt, decay_steps=6)  # replaced by the saved state below
    resumed.load_state_dict(state)
    for step in range(3, 6):
        assert resumed.get_last_lr()[0] == pytest.approx(_oneflow_formula(step, 6, 0.0))
        opt.step()
        resumed.step()


def test_warmup_then_cosine_decay():
    rates, _, _ = _rates(lambda o: L.WarmupLR(L.CosineDecayLR(o, 10), 0.5, 2, "constant"), 5)
    assert rates[:2] == pytest.approx([0.05, 0.05])
    assert rates[2:] == pytest.approx([_oneflow_formula(s, 10, 0.0) for s in range(2, 5)])


def test_decay_steps_must_be_positive():
    opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    with pytest.raises(ValueError, match="decay_steps must greater than zero, but got 0"):
        L.CosineDecayLR(opt, decay_steps=0)
