"""OneFlow's WarmupLR: the rates of its documented examples, the hand-off to a wrapped
scheduler (with and without warmup_prefix), state dicts, and refused configurations."""

import math
import warnings

import pytest

import tideflow as flow
from tideflow.optim import lr_scheduler as L


def _rates(make, steps=8, lr=0.001):
    opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=lr)
    sched = make(opt)
    out = []
    for _ in range(steps):
        out.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    return out


def test_constant_and_linear_warmup_of_an_optimizer():  # OneFlow's examples 1 and 2
    constant = _rates(lambda o: L.WarmupLR(o, 0.5, 5, "constant"))
    assert constant == pytest.approx([0.0005] * 5 + [0.001] * 3)
    linear = _rates(lambda o: L.WarmupLR(o, 0.5, 5, "linear"))
    assert linear == pytest.approx([0.0005, 0.0006, 0.0007, 0.0008, 0.0009] + [0.001] * 3)


def test_linear_warmup_ends_where_the_wrapped_scheduler_is():
    def cosine(step):
        return 0.0001 + 0.0009 * (1 + math.cos(math.pi * step / 5)) / 2

    rates = _rates(lambda o: L.WarmupLR(L.CosineAnnealingLR(o, 5, 0.0001), 0.5, 2), steps=6)
    end = cosine(2) / 0.001
    assert rates[:2] == pytest.approx([0.0005, 0.001 * (0.5 + (end - 0.5) / 2)])
    assert rates[2:] == pytest.approx([cosine(s) for s in range(2, 6)])


def test_with_a_prefix_the_wrapped_scheduler_starts_after_the_warmup():
    def make(opt):
        return L.WarmupLR(L.StepLR(opt, 2, 0.5), 0.5, 2, warmup_prefix=True)

    rates = _rates(make)
    assert rates == pytest.approx([0.0005, 0.00075, 0.001, 0.001, 0.0005, 0.0005, 0.00025, 0.00025])


def test_state_dict_resumes_the_schedule():
    opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.001)
    sched = L.WarmupLR(L.ExponentialLR(opt, 0.5), 0.1, 3)
    for _ in range(2):
        opt.step()
        sched.step()
    saved = sched.state_dict()
    opt2 = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.001)
    resumed = L.WarmupLR(L.ExponentialLR(opt2, 0.5), 0.1, 3)
    resumed.load_state_dict(saved)
    with warnings.catch_warnings():  # opt2 never stepped: the order warning is expected
        warnings.simplefilter("ignore", UserWarning)
        for s in (sched, resumed):
            s.optimizer.step()
            s.step()
    assert resumed.get_last_lr() == pytest.approx(sched.get_last_lr())


def test_refused_configurations_say_why():
    opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.001)
    with pytest.raises(ValueError, match="warmup_method must be 'linear' or 'constant'"):
        L.WarmupLR(opt, warmup_method="cosine")
    with pytest.raises(ValueError, match=r"LambdaLR .* closed form"):
        L.WarmupLR(L.LambdaLR(opt, lambda e: 0.9**e), warmup_iters=2)
    with pytest.raises(TypeError, match="must be an LRScheduler or an Optimizer"):
        L.WarmupLR(0.1)
