"""optim.swa_utils against torch.optim.swa_utils: SWA and EMA averages of a training model
(parameters, and buffers with use_buffers), SWALR's rates, update_bn's statistics."""

import numpy as np
import pytest

import tideflow as flow

torch = pytest.importorskip("torch")


def _model(lib):
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(),
                             lib.nn.Linear(4, 2))  # fmt: skip


def _pair():
    theirs, ours = _model(torch), _model(flow)
    ours.load_state_dict({k: flow.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _batches(n=5):
    rng = np.random.default_rng(0)
    return [rng.standard_normal((8, 3)).astype(np.float32) for _ in range(n)]


def _train_and_average(lib, model, make_average):
    averaged = make_average(lib, model)
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    for x in _batches():
        opt.zero_grad()
        model(lib.tensor(x)).square().mean().backward()
        opt.step()
        averaged.update_parameters(model)
    return averaged


AVERAGES = {
    "swa": lambda lib, m: lib.optim.swa_utils.AveragedModel(m),
    "ema": lambda lib, m: lib.optim.swa_utils.AveragedModel(
        m, multi_avg_fn=lib.optim.swa_utils.get_ema_multi_avg_fn(0.9)
    ),
    "ema-one-at-a-time": lambda lib, m: lib.optim.swa_utils.AveragedModel(
        m, avg_fn=lib.optim.swa_utils.get_ema_avg_fn(0.8)
    ),
    "swa-buffers": lambda lib, m: lib.optim.swa_utils.AveragedModel(m, use_buffers=True),
    "swa-in-place": lambda lib, m: lib.optim.swa_utils.AveragedModel(
        m, multi_avg_fn=lib.optim.swa_utils.get_swa_multi_avg_fn()
    ),
}


@pytest.mark.parametrize("kind", list(AVERAGES))
def test_averaged_model_matches_pytorch(kind):
    ours, theirs = _pair()
    ours_avg = _train_and_average(flow, ours, AVERAGES[kind])
    theirs_avg = _train_and_average(torch, theirs, AVERAGES[kind])
    expected = theirs_avg.state_dict()
    got = ours_avg.state_dict()
    assert list(got) == list(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(
            got[key].numpy(), value.numpy(), rtol=1e-5, atol=1e-6, err_msg=key
        )
    x = _batches(1)[0]
    ours_avg.eval(), theirs_avg.eval()
    np.testing.assert_allclose(
        ours_avg(flow.tensor(x)).detach().numpy(),
        theirs_avg(torch.tensor(x)).detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


def test_averaged_model_refuses_two_averaging_functions():
    with pytest.raises(ValueError, match="Only one of avg_fn and multi_avg_fn"):
        flow.optim.swa_utils.AveragedModel(
            flow.nn.Linear(2, 2), avg_fn=lambda *a: a[0], multi_avg_fn=lambda *a: None
        )


def test_update_bn_matches_pytorch_and_restores_mode_and_momentum():
    ours, theirs = _pair()
    loader = [(x, 0) for x in _batches()]
    ours.eval(), theirs.eval()
    flow.optim.swa_utils.update_bn([(flow.tensor(x), y) for x, y in loader], ours)
    torch.optim.swa_utils.update_bn([(torch.tensor(x), y) for x, y in loader], theirs)
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=key)  # fmt: skip
    assert not ours.training and ours[1].momentum == 0.1


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 3])
def test_swalr_rates_match_pytorch(strategy, anneal_epochs):
    def rates(lib):
        w = lib.nn.Parameter(lib.zeros(2))
        other = lib.nn.Parameter(lib.zeros(1))
        opt = lib.optim.SGD([{"params": [w]}, {"params": [other], "lr": 0.3}], lr=0.1)
        sched = lib.optim.swa_utils.SWALR(opt, swa_lr=[0.05, 0.01], anneal_epochs=anneal_epochs,
                                          anneal_strategy=strategy)  # fmt: skip
        out = []
        for _ in range(6):
            out.append(sched.get_last_lr())
            opt.step()
            sched.step()
        return np.array(out)

    np.testing.assert_allclose(rates(flow), rates(torch), rtol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(anneal_strategy="step"), "anneal_strategy must by one of 'cos' or 'linear'"),
        (dict(anneal_epochs=-1), "anneal_epochs must be equal or greater than 0, got -1"),
    ],
)
def test_swalr_refuses_bad_arguments(kwargs, match):
    opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    with pytest.raises(ValueError, match=match):
        flow.optim.swa_utils.SWALR(opt, swa_lr=0.05, **kwargs)
