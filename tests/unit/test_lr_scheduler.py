"""optim.lr_scheduler against torch.optim.lr_scheduler: the learning rates (and cycled
momenta) after every step are the same floats, stepped, jumped with `step(epoch)`, resumed and
restored from state dicts; plus the warnings and errors PyTorch users rely on."""

import io
import math
import warnings
from contextlib import contextmanager

import pytest

import tideflow as flow
from tideflow.framework.conventions import follow_pytorch
from tideflow.io import load, save
from tideflow.optim import lr_scheduler

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


@contextmanager
def _pytorch_convention():
    """What a mock_torch session sets: PyTorch's behaviour where OneFlow's differs."""
    follow_pytorch(True)
    try:
        yield
    finally:
        follow_pytorch(False)


def _torch_polynomial(s, o):
    """PolynomialLR with PyTorch's arguments (tideflow's takes them under mock_torch)."""
    with _pytorch_convention():
        return s.PolynomialLR(o, total_iters=6, power=2.0)


def _optimizer(lib, kind="sgd"):
    """Two parameter groups with different learning rates, in tideflow or PyTorch."""
    w = lib.nn.Parameter(lib.zeros(3))
    b = lib.nn.Parameter(lib.zeros(1))
    groups = [{"params": [w]}, {"params": [b], "lr": 0.05}]
    if kind == "sgd":
        return lib.optim.SGD(groups, lr=0.1, momentum=0.9)
    if kind == "adam":
        return lib.optim.Adam(groups, lr=0.1)
    return lib.optim.Adagrad(groups, lr=0.1)


def _snapshot(opt, sched) -> tuple:
    """Everything a schedule sets: last lrs, the groups' lrs and momenta."""
    groups = opt.param_groups
    return (
        sched.get_last_lr(),
        [g["lr"] for g in groups],
        [g.get("momentum") for g in groups],
        [tuple(g["betas"]) if "betas" in g else None for g in groups],
    )


def _trajectory(lib, kind, make, steps):
    opt = _optimizer(lib, kind)
    sched = make(lib.optim.lr_scheduler, opt)
    seen = [_snapshot(opt, sched)]
    for _ in range(steps):
        opt.step()
        sched.step()
        seen.append(_snapshot(opt, sched))
    return seen


def _halve(x):
    return 0.5 * x


SCHEDULES = {
    "StepLR": ("sgd", lambda s, o: s.StepLR(o, step_size=3, gamma=0.5), 12),
    "MultiStepLR": ("sgd", lambda s, o: s.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3), 12),
    "ExponentialLR": ("sgd", lambda s, o: s.ExponentialLR(o, gamma=0.9), 10),
    "CosineAnnealingLR": ("sgd", lambda s, o: s.CosineAnnealingLR(o, T_max=5, eta_min=1e-3), 25),
    "CosineAnnealingWarmRestarts": (
        "sgd",
        lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01),
        25,
    ),
    "LambdaLR": ("sgd", lambda s, o: s.LambdaLR(o, lambda e: 0.9**e), 8),
    "LambdaLR-per-group": ("sgd", lambda s, o: s.LambdaLR(o, [lambda e: 1 / (e + 1), _halve]), 8),
    "MultiplicativeLR": ("sgd", lambda s, o: s.MultiplicativeLR(o, lambda e: 0.95), 8),
    "LinearLR": (
        "sgd",
        lambda s, o: s.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=4),
        8,
    ),
    "ConstantLR": ("sgd", lambda s, o: s.ConstantLR(o, factor=0.5, total_iters=3), 6),
    "PolynomialLR": ("sgd", _torch_polynomial, 9),
    "OneCycleLR-sgd": ("sgd", lambda s, o: s.OneCycleLR(o, max_lr=[0.1, 0.2], total_steps=20), 20),
    "OneCycleLR-adam-three-phase": (
        "adam",
        lambda s, o: s.OneCycleLR(
            o,
            max_lr=0.3,
            epochs=3,
            steps_per_epoch=5,
            pct_start=0.4,
            anneal_strategy="linear",
            three_phase=True,
            base_momentum=0.8,
        ),
        15,
    ),
    "OneCycleLR-no-momentum": (
        "adagrad",
        lambda s, o: s.OneCycleLR(o, max_lr=0.5, total_steps=10, cycle_momentum=False),
        10,
    ),
    "CyclicLR-triangular2": (
        "sgd",
        lambda s, o: s.CyclicLR(
            o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=3, step_size_down=2, mode="triangular2"
        ),
        20,
    ),
    "CyclicLR-exp-range-adam": (
        "adam",
        lambda s, o: s.CyclicLR(
            o,
            base_lr=0.01,
            max_lr=0.1,
            step_size_up=4,
            mode="exp_range",
            gamma=0.9,
            base_momentum=0.7,
            max_momentum=0.95,
        ),
        20,
    ),
    "CyclicLR-scale-fn": (
        "adagrad",
        lambda s, o: s.CyclicLR(
            o,
            0.01,
            0.1,
            step_size_up=2,
            scale_fn=lambda x: 0.8**x,
            scale_mode="iterations",
            cycle_momentum=False,
        ),
        10,
    ),
    "SequentialLR": (
        "sgd",
        lambda s, o: s.SequentialLR(
            o,
            [s.LinearLR(o, start_factor=0.1, total_iters=3), s.ExponentialLR(o, gamma=0.9)],
            milestones=[3],
        ),
        10,
    ),
    "SequentialLR-three": (
        "sgd",
        lambda s, o: s.SequentialLR(
            o,
            [
                s.ConstantLR(o, factor=0.2, total_iters=2),
                s.StepLR(o, step_size=2, gamma=0.5),
                s.CosineAnnealingLR(o, T_max=4),
            ],
            milestones=[2, 6],
        ),
        14,
    ),
    "ChainedScheduler": (
        "sgd",
        lambda s, o: s.ChainedScheduler(
            [s.ConstantLR(o, factor=0.1, total_iters=2), s.ExponentialLR(o, gamma=0.9)]
        ),
        8,
    ),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedule_matches_pytorch_at_every_step(name):
    kind, make, steps = SCHEDULES[name]
    assert _trajectory(flow, kind, make, steps) == _trajectory(torch, kind, make, steps)


CLOSED_FORMS = {
    "StepLR": lambda s, o: s.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda s, o: s.MultiStepLR(o, milestones=[2, 5, 5], gamma=0.3),
    "ExponentialLR": lambda s, o: s.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda s, o: s.CosineAnnealingLR(o, T_max=5, eta_min=1e-3),
    "LinearLR": lambda s, o: s.LinearLR(o, start_factor=0.25, total_iters=4),
    "ConstantLR": lambda s, o: s.ConstantLR(o, factor=0.5, total_iters=3),
    "PolynomialLR": _torch_polynomial,
    "LambdaLR": lambda s, o: s.LambdaLR(o, lambda e: 0.9**e),  # no closed form: get_lr
}


def _jumps(lib, make, epochs):
    opt = _optimizer(lib)
    sched = make(lib.optim.lr_scheduler, opt)
    seen = []
    for epoch in epochs:
        opt.step()
        with pytest.warns(UserWarning, match="epoch parameter in `scheduler.step\\(\\)`"):
            sched.step(epoch)
        seen.append((sched.last_epoch, sched.get_last_lr()))
    return seen


@pytest.mark.parametrize("name", list(CLOSED_FORMS))
def test_step_with_epoch_uses_the_closed_form_like_pytorch(name):
    epochs = [4, 1, 7, 7, 2, 12]
    got = _jumps(flow, CLOSED_FORMS[name], epochs)
    assert got == _jumps(torch, CLOSED_FORMS[name], epochs)


def test_warm_restarts_with_fractional_epochs_match_pytorch():
    def run(lib):
        opt = _optimizer(lib)
        sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=3)
        lrs = []
        for epoch in [0.5, 1.25, 2.0, 3.75, 9.5, 1.5, 30.2]:
            opt.step()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                sched.step(epoch)
            lrs.append((sched.last_epoch, sched.T_cur, sched.T_i, sched.get_last_lr()))
        return lrs

    assert run(flow) == run(torch)


def test_warm_restarts_rejects_negative_epoch():
    sched = lr_scheduler.CosineAnnealingWarmRestarts(_optimizer(flow), T_0=2)
    with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
        sched.step(-1)


def _plateau(lib, metrics, **kwargs):
    opt = _optimizer(lib)
    sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    seen = []
    for m in metrics:
        sched.step(m)
        seen.append((sched.get_last_lr(), sched.best, sched.num_bad_epochs, sched.cooldown_counter))
    return seen


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(patience=2),
        dict(mode="max", factor=0.5, patience=1, threshold=0.1, threshold_mode="abs"),
        dict(mode="max", factor=0.5, patience=0, cooldown=2),
        dict(factor=0.2, patience=1, threshold_mode="abs", min_lr=[0.01, 0.004]),
        dict(factor=0.5, patience=0, min_lr=0.04, eps=0.02),
    ],
)
def test_reduce_on_plateau_matches_pytorch(kwargs):
    metrics = [1.0, 0.99, 0.995, 1.2, 0.98, 0.98, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 0.4, 0.45]
    assert _plateau(flow, metrics, **kwargs) == _plateau(torch, metrics, **kwargs)


def test_reduce_on_plateau_accepts_a_tensor_metric():
    sched = lr_scheduler.ReduceLROnPlateau(_optimizer(flow), patience=0)
    sched.step(flow.tensor(1.0))
    sched.step(flow.tensor(2.0))
    assert sched.get_last_lr() == pytest.approx([0.01, 0.005])


# -- state dicts ----------------------------------------------------------------------------
def _through_file(state: dict) -> dict:
    buffer = io.BytesIO()
    save(state, buffer)
    buffer.seek(0)
    return load(buffer)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_state_dict_saves_and_resumes_the_schedule(name):
    kind, make, steps = SCHEDULES[name]
    uninterrupted = _trajectory(flow, kind, make, steps)

    opt = _optimizer(flow, kind)
    sched = make(lr_scheduler, opt)
    half = steps // 2
    for _ in range(half):
        opt.step()
        sched.step()
    saved_opt = _through_file(opt.state_dict())
    saved_sched = _through_file(sched.state_dict())

    opt = _optimizer(flow, kind)
    sched = make(lr_scheduler, opt)
    opt.load_state_dict(saved_opt)
    sched.load_state_dict(saved_sched)
    resumed = [_snapshot(opt, sched)]
    for _ in range(steps - half):
        opt.step()
        sched.step()
        resumed.append(_snapshot(opt, sched))
    assert resumed == uninterrupted[half:]


@pytest.mark.parametrize(
    "name", ["StepLR", "MultiStepLR", "CosineAnnealingWarmRestarts", "OneCycleLR-sgd"]
)
def test_state_dict_has_pytorchs_keys(name):
    kind, make, _ = SCHEDULES[name]
    ours = make(lr_scheduler, _optimizer(flow, kind)).state_dict()
    theirs = make(torch.optim.lr_scheduler, _optimizer(torch, kind)).state_dict()
    transient = {"_get_lr_called_within_step", "_is_initial"}  # flags PyTorch also saves
    assert set(ours) == set(theirs) - transient
    assert "optimizer" not in ours


def test_lambda_state_saves_callable_objects_not_functions():
    class Decay:
        def __init__(self) -> None:
            self.rate = 0.5

        def __call__(self, epoch):
            return self.rate**epoch

    opt = _optimizer(flow)
    decay = Decay()
    sched = lr_scheduler.LambdaLR(opt, [decay, lambda e: 1.0])
    assert sched.state_dict()["lr_lambdas"] == [{"rate": 0.5}, None]
    state = sched.state_dict()
    state["lr_lambdas"][0]["rate"] = 0.25
    sched.load_state_dict(state)
    assert decay.rate == 0.25


def test_plateau_state_dict_round_trips_through_a_file():
    opt = _optimizer(flow)
    sched = lr_scheduler.ReduceLROnPlateau(opt, mode="max", patience=1)
    for m in [1.0, 0.5]:
        sched.step(m)
    state = _through_file(sched.state_dict())
    assert state["mode_worse"] == -math.inf
    other = lr_scheduler.ReduceLROnPlateau(_optimizer(flow))
    other.load_state_dict(state)
    assert (other.mode, other.best, other.num_bad_epochs) == ("max", 1.0, 1)


# -- construction and resuming --------------------------------------------------------------
def test_construction_records_initial_lr_and_base_lrs():
    opt = _optimizer(flow)
    sched = lr_scheduler.ExponentialLR(opt, gamma=0.5)
    assert sched.base_lrs == [0.1, 0.05]
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.05]
    assert (sched.last_epoch, sched.get_last_lr()) == (0, [0.1, 0.05])


def test_resuming_with_last_epoch_matches_pytorch():
    def run(lib):
        opt = _optimizer(lib)
        lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)  # records initial_lr
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, last_epoch=4)
        lrs = [sched.get_last_lr()]
        for _ in range(3):
            opt.step()
            sched.step()
            lrs.append(sched.get_last_lr())
        return lrs

    assert run(flow) == run(torch)


def test_resuming_without_initial_lr_raises():
    with pytest.raises(KeyError, match=r"'initial_lr' is not specified in param_groups\[0\]"):
        lr_scheduler.StepLR(_optimizer(flow), step_size=2, last_epoch=3)


# -- warnings -------------------------------------------------------------------------------
def test_stepping_the_scheduler_before_the_optimizer_warns():
    sched = lr_scheduler.StepLR(_optimizer(flow), step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()


def test_correct_order_does_not_warn():
    opt = _optimizer(flow)
    sched = lr_scheduler.StepLR(opt, step_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            opt.step()
            sched.step()


def test_replacing_optimizer_step_after_construction_warns():
    opt = _optimizer(flow)
    sched = lr_scheduler.StepLR(opt, step_size=2)
    opt.step = lambda closure=None: None
    with pytest.warns(UserWarning, match="`optimizer.step\\(\\)` has been overridden"):
        sched.step()


def test_calling_get_lr_directly_warns():
    sched = lr_scheduler.ExponentialLR(_optimizer(flow), gamma=0.5)
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        sched.get_lr()


def test_get_last_lr_is_a_copy():
    opt = _optimizer(flow)
    sched = lr_scheduler.StepLR(opt, step_size=2)
    sched.get_last_lr()[0] = 123.0
    assert sched.get_last_lr() == [0.1, 0.05]


def test_the_optimizer_step_wrapper_does_not_keep_the_optimizer_alive():
    import gc
    import weakref

    opt = _optimizer(flow)
    lr_scheduler.StepLR(opt, step_size=2)
    ref = weakref.ref(opt)
    del opt
    gc.collect()
    assert ref() is None


# -- errors ---------------------------------------------------------------------------------
def test_one_cycle_past_total_steps_raises():
    opt = _optimizer(flow)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=2)
    opt.step()
    sched.step()
    sched.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        sched.step()


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda o: lr_scheduler.StepLR("sgd", step_size=1), TypeError, "str is not an Optimizer"),
        (lambda o: lr_scheduler.ConstantLR(o, factor=1.5), ValueError, "between 0 and 1, got 1.5"),
        (lambda o: lr_scheduler.LinearLR(o, start_factor=0), ValueError, "greater than 0"),
        (lambda o: lr_scheduler.LinearLR(o, end_factor=2.0), ValueError, "between 0 and 1, got 2"),
        (lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=0), ValueError,
         "positive integer T_0, but got 0"),
        (lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=1.5), ValueError,
         "integer T_mult >= 1, but got 1.5"),
        (lambda o: lr_scheduler.LambdaLR(o, [lambda e: 1.0]), ValueError,
         "Expected 2 lr_lambdas, but got 1"),
        (lambda o: lr_scheduler.MultiplicativeLR(o, 0.9), TypeError,
         "lr_lambda should be a function, but got float"),
        (lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.1), ValueError,
         "either total_steps OR \\(epochs AND steps_per_epoch\\)"),
        (lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=0), ValueError,
         "positive integer total_steps, but got 0"),
        (lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=5, pct_start=1), ValueError,
         "float between 0 and 1 pct_start, but got 1"),
        (lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=5, anneal_strategy="exp"),
         ValueError, "'cos' or 'linear', instead got exp"),
        (lambda o: lr_scheduler.OneCycleLR(o, max_lr=[0.1], total_steps=5), ValueError,
         "max_lr must have the same length as optimizer.param_groups"),
        (lambda o: lr_scheduler.CyclicLR(o, 0.01, 0.1, mode="sine"), ValueError,
         "mode 'sine' is invalid and scale_fn is None"),
        (lambda o: lr_scheduler.ReduceLROnPlateau(o, factor=1.0), ValueError,
         "Factor should be < 1.0, got 1.0"),
        (lambda o: lr_scheduler.ReduceLROnPlateau(o, mode="lowest"), ValueError,
         "mode lowest is unknown"),
        (lambda o: lr_scheduler.ReduceLROnPlateau(o, threshold_mode="pct"), ValueError,
         "threshold mode pct is unknown"),
        (lambda o: lr_scheduler.ReduceLROnPlateau(o, min_lr=[0.1]), ValueError,
         "expected 2 min_lrs, got 1"),
        (lambda o: lr_scheduler.SequentialLR(o, [], milestones=[]), ValueError,
         "at least one scheduler"),
        (lambda o: lr_scheduler.SequentialLR(o, [lr_scheduler.StepLR(o, 2)], milestones=[3]),
         ValueError, "number of schedulers 1 and the number of milestones to be equal to 1"),
        (lambda o: lr_scheduler.SequentialLR(o, [lr_scheduler.ReduceLROnPlateau(o)],
                                             milestones=[]), ValueError,
         "does not support `ReduceLROnPlateau`"),
        (lambda o: lr_scheduler.ChainedScheduler(
            [lr_scheduler.StepLR(o, 2), lr_scheduler.StepLR(_optimizer(flow), 2)]), ValueError,
         "all schedulers to belong to the same optimizer"),
        (lambda o: lr_scheduler.ChainedScheduler([]), ValueError, "at least one scheduler"),
    ],
)  # fmt: skip
def test_invalid_arguments_raise(make, error, match):
    with pytest.raises(error, match=match):
        make(_optimizer(flow))


def test_cycling_momentum_needs_an_optimizer_with_momentum():
    opt = _optimizer(flow, "adagrad")
    with pytest.raises(ValueError, match=r"must support momentum or beta1.*Adagrad has neither"):
        lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=5)
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        lr_scheduler.CyclicLR(opt, 0.01, 0.1)


def test_plateau_with_a_new_param_group_needs_matching_min_lrs():
    opt = _optimizer(flow)
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=0, min_lr=[0.0, 0.0])
    opt.add_param_group({"params": [flow.nn.Parameter(flow.zeros(1))]})
    sched.step(1.0)
    with pytest.raises(RuntimeError, match=r"number of param groups in the `optimizer` \(3\)"):
        sched.step(2.0)


# -- OneFlow's spellings ----------------------------------------------------------------------
def _oneflow_polynomial(step, steps, end, power, cycle, base):
    """OneFlow's documented PolynomialLR formula."""
    if cycle:
        steps *= math.ceil(max(step, 1) / steps)
    else:
        step = min(step, steps)
    return (base - end) * (1 - step / steps) ** power + end


@pytest.mark.parametrize("cycle", [False, True])
def test_polynomial_lr_takes_oneflows_arguments_under_tideflow(cycle):
    opt = _optimizer(flow)
    sched = lr_scheduler.PolynomialLR(opt, 4, 0.001, 2.0, cycle)  # OneFlow's positional order
    for step in range(10):
        expected = [_oneflow_polynomial(step, 4, 0.001, 2.0, cycle, base) for base in (0.1, 0.05)]
        assert sched.get_last_lr() == pytest.approx(expected)
        opt.step()
        sched.step()
    with pytest.raises(TypeError, match=r"PolynomialLR\(optimizer, steps"):
        lr_scheduler.PolynomialLR(_optimizer(flow), total_iters=4)
    with pytest.raises(ValueError, match="steps must greater than zero, but got 0"):
        lr_scheduler.PolynomialLR(_optimizer(flow), steps=0)


def test_last_step_is_oneflows_name_for_last_epoch():
    opt = _optimizer(flow)
    sched = lr_scheduler.StepLR(opt, step_size=2)
    for _ in range(3):
        opt.step()
        sched.step()
    assert sched.last_step == sched.last_epoch == 3
    # resuming: the constructor's step moves past the given one, either way it is spelled
    assert lr_scheduler.StepLR(opt, step_size=2, last_step=3).last_epoch == 4
    with pytest.raises(TypeError, match="give last_epoch or last_step, not both"):
        lr_scheduler.StepLR(opt, step_size=2, last_step=3, last_epoch=3)
