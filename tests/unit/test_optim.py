"""RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop, LBFGS (against torch.optim)
and LAMB (against a NumPy transcription of the paper): parameter groups, state, state-dict
round trips, errors."""

import io

import numpy as np
import pytest

import tideflow as flow
from tideflow.io import load, save
from tideflow.testing.records.optim import lamb_reference


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _tol(dtype) -> dict:
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)


def _problem(dtype, steps: int, seed: int = 0):
    """Initial values of three parameters and a gradient per step for the first two (the
    third never gets one: optimizers must skip it)."""
    rng = np.random.default_rng(seed)
    shapes = [(4, 3), (3,), (2,)]
    init = [rng.standard_normal(s).astype(dtype) for s in shapes]
    grads = [[rng.standard_normal(s).astype(dtype) for s in shapes[:2]] for _ in range(steps)]
    return init, grads


def _build(lib, cls, init, base, group1):
    params = [lib.nn.Parameter(lib.tensor(v.copy())) for v in init]
    groups = [{"params": [params[0], params[2]]}, {"params": [params[1]], **group1}]
    return params, getattr(lib.optim, cls)(groups, **base)


def _run(lib, cls, init, grads, base, group1):
    params, opt = _build(lib, cls, init, base, group1)
    for gs in grads:
        for p, g in zip(params, gs, strict=False):
            p.grad = lib.tensor(g.copy())
        opt.step()
    return params, opt


CONFIGS = {
    "RMSprop": (dict(lr=0.01, momentum=0.9, centered=True), dict(alpha=0.5, weight_decay=0.1)),
    "RMSprop-maximize": (dict(alpha=0.9, eps=1e-4, maximize=True), dict(momentum=0.3)),
    "Adagrad": (dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1),
                dict(weight_decay=0.1, eps=1e-3, initial_accumulator_value=5.0)),
    "Adadelta": (dict(rho=0.8), dict(lr=0.5, weight_decay=0.1, maximize=True)),
    "Adamax": (dict(lr=0.01, betas=(0.8, 0.9)), dict(weight_decay=0.1, eps=1e-3, maximize=True)),
    "NAdam": (dict(lr=0.01, momentum_decay=0.1), dict(weight_decay=0.1)),
    "NAdam-decoupled": (dict(weight_decay=0.1, decoupled_weight_decay=True),
                        dict(betas=(0.5, 0.9), maximize=True)),
    # beta2 = 0.99: the rectified rate starts at step 6 (rho_t > 5), within the steps run
    "RAdam": (dict(lr=0.01, betas=(0.9, 0.99)), dict(weight_decay=0.1, eps=1e-3)),
    "RAdam-decoupled": (dict(betas=(0.8, 0.99), weight_decay=0.1, decoupled_weight_decay=True),
                        dict(maximize=True)),
    "ASGD": (dict(lr=0.05, lambd=0.1, t0=3), dict(alpha=0.5, weight_decay=0.1)),
    "ASGD-maximize": (dict(maximize=True), dict(lr=0.1)),
    "Rprop": (dict(lr=0.05), dict(etas=(0.3, 1.5), step_sizes=(1e-3, 0.1), maximize=True)),
}  # fmt: skip


def _cls(name: str) -> str:
    return name.split("-")[0]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_parameters_and_state_match_pytorch(torch, name, dtype):
    init, grads = _problem(dtype, steps=8)
    ours, opt = _run(flow, _cls(name), init, grads, *CONFIGS[name])
    theirs, topt = _run(torch, _cls(name), init, grads, *CONFIGS[name])
    for p, tp in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), **_tol(dtype))
        state, tstate = opt.state[p], topt.state[tp]
        assert set(state) == set(tstate)
        for key, value in state.items():
            if key == "step":
                assert value == int(tstate[key])
            else:  # scalars (NAdam's mu_product, ASGD's eta and mu) are floats here
                ours_value = value.numpy() if isinstance(value, flow.Tensor) else value
                np.testing.assert_allclose(ours_value, tstate[key].numpy(), **_tol(dtype))


def test_adagrad_state_exists_from_construction():
    # NOTE: every sum starts at the constructor's initial_accumulator_value, even where a group
    # sets its own (PyTorch's behaviour, checked against it above).
    w, b = flow.nn.Parameter(flow.zeros(2)), flow.nn.Parameter(flow.zeros(1))
    opt = flow.optim.Adagrad(
        [{"params": [w]}, {"params": [b], "initial_accumulator_value": 3.0}],
        initial_accumulator_value=0.5,
    )
    state = opt.state_dict()["state"]
    assert sorted(state) == [0, 1]
    assert state[0]["step"] == 0
    assert state[1]["sum"].tolist() == [0.5]


def test_adagrad_initializes_parameters_of_a_group_added_later():
    opt = flow.optim.Adagrad([flow.nn.Parameter(flow.zeros(2))], initial_accumulator_value=0.5)
    late = flow.nn.Parameter(flow.ones(2))
    opt.add_param_group({"params": [late]})
    late.grad = flow.ones(2)
    opt.step()
    assert opt.state[late]["step"] == 1
    np.testing.assert_allclose(opt.state[late]["sum"].numpy(), [1.5, 1.5])


def test_rmsprop_creates_buffers_when_momentum_or_centering_is_turned_on_later():
    w = flow.nn.Parameter(flow.ones(2))
    opt = flow.optim.RMSprop([w])
    w.grad = flow.ones(2)
    opt.step()
    assert set(opt.state[w]) == {"step", "square_avg"}
    opt.param_groups[0].update(momentum=0.9, centered=True)
    opt.step()
    assert set(opt.state[w]) == {"step", "square_avg", "momentum_buffer", "grad_avg"}


# -- LAMB --------------------------------------------------------------------------------------
LAMB_CONFIGS = [
    (dict(lr=0.01), dict(lr=0.05)),
    (dict(lr=0.02, betas=(0.8, 0.9), weight_decay=0.1, clamp_value=1.0), dict(weight_decay=0.0)),
    (dict(lr=0.01, bias_correction=False, maximize=True), dict(eps=1e-2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("base", "group1"), LAMB_CONFIGS)
def test_lamb_matches_the_reference_per_group(base, group1, dtype):
    init, grads = _problem(dtype, steps=4)
    params, _ = _run(flow, "LAMB", init, grads, base, group1)
    for i, group in ((0, base), (1, {**base, **group1})):
        expected = lamb_reference(init[i], [g[i] for g in grads], **group)
        np.testing.assert_allclose(params[i].detach().numpy(), expected, **_tol(dtype))
    np.testing.assert_array_equal(params[2].detach().numpy(), init[2])  # never had a gradient


def test_lamb_step_length_is_lr_times_the_clipped_weight_norm():
    w = flow.nn.Parameter(flow.tensor([30.0, 40.0]))  # norm 50, clipped to clamp_value=10
    opt = flow.optim.LAMB([w], lr=0.1)
    start = w.detach().clone()
    w.grad = flow.tensor([1.0, -3.0])
    opt.step()
    assert float((w - start).norm()) == pytest.approx(0.1 * 10.0, rel=1e-5)


def test_lamb_zero_weights_take_an_unscaled_step():
    w = flow.nn.Parameter(flow.zeros(3))
    opt = flow.optim.LAMB([w], lr=0.1)
    w.grad = flow.tensor([1.0, -2.0, 0.5])
    opt.step()
    # first step: m_hat = g, v_hat = g**2, so the normalized step is sign(g) (up to eps)
    np.testing.assert_allclose(w.detach().numpy(), [-0.1, 0.1, -0.1], rtol=1e-5)


# -- LBFGS -------------------------------------------------------------------------------------
def _regression(lib, dtype, seed=0):
    """Least squares plus an L4 penalty for a 3 -> 2 linear map, and an unused parameter."""
    rng = np.random.default_rng(seed)
    x = lib.tensor(rng.standard_normal((8, 3)).astype(dtype))
    y = lib.tensor(rng.standard_normal((8, 2)).astype(dtype))
    weight = lib.nn.Parameter(lib.tensor(rng.standard_normal((3, 2)).astype(dtype)))
    bias = lib.nn.Parameter(lib.tensor(np.zeros(2, dtype)))
    unused = lib.nn.Parameter(lib.tensor(np.ones(2, dtype)))
    return x, y, [weight, bias, unused]


def _lbfgs_run(lib, dtype, steps=3, **kw):
    x, y, params = _regression(lib, dtype)
    weight, bias, _ = params
    opt = lib.optim.LBFGS(params, **kw)

    def closure():
        opt.zero_grad()
        loss = ((x @ weight + bias - y) ** 2).mean() + 0.1 * (weight**4).sum()
        loss.backward()
        return loss

    losses = [float(opt.step(closure).detach()) for _ in range(steps)]
    return params, losses, opt.state[params[0]]


LBFGS_CONFIGS = [
    dict(),
    dict(lr=0.5, max_iter=6, history_size=3),
    dict(line_search_fn="strong_wolfe"),
    dict(max_iter=8, history_size=2, line_search_fn="strong_wolfe"),
]


def _float32_resolution(weight: np.ndarray, loss: float) -> float:
    """How far from the optimum (`weight`, `loss`) a float32 run may stop. Its loss cannot
    tell apart points whose losses differ by less than its rounding, u * loss, and near the
    optimum the loss grows by curvature * d**2 / 2 at a distance d: so a run stops anywhere
    within sqrt(2 u loss / curvature), where the curvature is the Hessian's smallest
    eigenvalue (least squares: 2 A^T A / (N * 2) per output over A = [x, 1]; the L4 penalty
    adds 1.2 w**2 on the weights)."""
    x, y = (t.numpy() for t in _regression(flow, np.float64)[:2])
    a = np.c_[x, np.ones(len(x))]
    hessian = np.kron(2 * a.T @ a / y.size, np.eye(y.shape[1]))
    hessian[: weight.size, : weight.size] += np.diag(1.2 * weight.ravel() ** 2)
    curvature = np.linalg.eigvalsh(hessian).min()
    return float(np.sqrt(2 * np.finfo(np.float32).eps / 2 * loss / curvature))


@pytest.mark.torch
@pytest.mark.parametrize("kw", LBFGS_CONFIGS)
def test_lbfgs_matches_pytorch_in_float64(torch, kw):
    params, losses, state = _lbfgs_run(flow, np.float64, **kw)
    tparams, tlosses, tstate = _lbfgs_run(torch, np.float64, **kw)
    # NOTE: ulp differences (PyTorch fuses multiply-adds) grow over the closure evaluations
    tol = dict(rtol=1e-10, atol=1e-12)
    for p, tp in zip(params, tparams, strict=True):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), **tol)
    np.testing.assert_allclose(losses, tlosses, **tol)
    assert (state["func_evals"], state["n_iter"]) == (tstate["func_evals"], tstate["n_iter"])
    assert len(state["old_dirs"]) == len(tstate["old_dirs"])


@pytest.mark.torch
@pytest.mark.parametrize("kw", LBFGS_CONFIGS)
def test_lbfgs_in_float32_stops_within_float32_resolution(torch, kw):
    """float32 runs (ours or PyTorch's, on any CPU) end an iteration or two apart near the
    optimum: compared with PyTorch's float64 run within what float32 can resolve."""
    params, losses, _ = _lbfgs_run(flow, np.float32, **kw)
    tparams, tlosses, _ = _lbfgs_run(torch, np.float64, **kw)
    weight = tparams[0].detach().numpy()
    reach = _float32_resolution(weight, tlosses[-1])
    for p, tp in zip(params, tparams, strict=True):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=0, atol=reach)
    # the loss at a point within `reach`: rounding plus the curvature's share, both ~u * loss
    np.testing.assert_allclose(losses, tlosses, rtol=4 * np.finfo(np.float32).eps)


def test_lbfgs_returns_at_once_when_the_gradient_is_below_tolerance():
    x = flow.nn.Parameter(flow.tensor([2.0]))
    opt = flow.optim.LBFGS([x])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = ((x - 2.0) ** 2).sum()
        loss.backward()
        return loss

    assert float(opt.step(closure)) == 0.0
    assert len(calls) == 1 and opt.state[x]["n_iter"] == 0


def test_lbfgs_minimizes_a_quadratic():
    target = flow.tensor([3.0, -1.0, 0.5])
    x = flow.nn.Parameter(flow.zeros(3))
    opt = flow.optim.LBFGS([x], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = (flow.tensor([1.0, 10.0, 100.0]) * (x - target) ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(x.detach().numpy(), target.numpy(), atol=1e-4)


def test_lbfgs_takes_one_parameter_group():
    a, b = flow.nn.Parameter(flow.zeros(1)), flow.nn.Parameter(flow.zeros(1))
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        flow.optim.LBFGS([{"params": [a]}, {"params": [b]}])
    opt = flow.optim.LBFGS([a])
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        opt.add_param_group({"params": [b]})


def test_lbfgs_rejects_unknown_line_searches():
    with pytest.raises(
        ValueError, match="line_search_fn must be None or 'strong_wolfe', got 'armijo'"
    ):
        flow.optim.LBFGS([flow.nn.Parameter(flow.zeros(1))], line_search_fn="armijo")


# -- state dicts: resuming equals never stopping ------------------------------------------------
def _through_file(state: dict) -> dict:
    buffer = io.BytesIO()
    save(state, buffer)
    buffer.seek(0)
    return load(buffer)


RESUMABLE = {
    "RMSprop": (dict(momentum=0.9, centered=True), dict(weight_decay=0.1)),
    "Adagrad": (dict(lr_decay=0.1), dict(lr=0.5)),
    "Adadelta": (dict(), dict(rho=0.5)),
    "Adamax": (dict(), dict(lr=0.1)),
    "NAdam": (dict(), dict(lr=0.1)),
    "RAdam": (dict(betas=(0.9, 0.99)), dict(lr=0.1)),
    "ASGD": (dict(t0=2), dict(lr=0.1)),
    "Rprop": (dict(), dict(lr=0.1)),
    "LAMB": (dict(lr=0.01, weight_decay=0.01), dict(lr=0.1)),
}


@pytest.mark.parametrize("name", list(RESUMABLE))
def test_state_dict_resumes_training_exactly(name):
    init, grads = _problem(np.float32, steps=6)
    straight, _ = _run(flow, name, init, grads, *RESUMABLE[name])

    params, opt = _run(flow, name, init, grads[:3], *RESUMABLE[name])
    saved = _through_file(opt.state_dict())
    values = [p.detach().numpy().copy() for p in params]
    params, opt = _build(flow, name, values, {}, {})  # hyperparameters come from the state
    opt.load_state_dict(saved)
    for gs in grads[3:]:
        for p, g in zip(params, gs, strict=False):
            p.grad = flow.tensor(g)
        opt.step()
    for p, q in zip(params, straight, strict=True):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_state_dict_is_a_snapshot():
    init, grads = _problem(np.float32, steps=2)
    params, opt = _run(flow, "RMSprop", init, grads[:1], *RESUMABLE["RMSprop"])
    saved = opt.state_dict()
    before = saved["state"][0]["square_avg"].numpy().copy()
    params[0].grad = flow.tensor(grads[1][0])
    opt.step()
    assert saved["state"][0]["step"] == 1
    np.testing.assert_array_equal(saved["state"][0]["square_avg"].numpy(), before)


def test_lbfgs_state_dict_resumes_exactly():
    x, y, params = _regression(flow, np.float64)

    def make(params):
        opt = flow.optim.LBFGS(params, max_iter=3, history_size=2, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = ((x @ params[0] + params[1] - y) ** 2).mean() + 0.1 * (params[0] ** 4).sum()
            loss.backward()
            return loss

        return opt, closure

    opt, closure = make(params)
    for _ in range(2):
        opt.step(closure)
    saved = _through_file(opt.state_dict())
    assert len(saved["state"][0]["old_dirs"]) == 2
    resumed = [flow.nn.Parameter(p.detach().clone()) for p in params]
    for _ in range(2):  # the history lists change: the saved copy must not
        opt.step(closure)

    opt, closure = make(resumed)
    opt.load_state_dict(saved)
    for _ in range(2):
        opt.step(closure)
    for p, q in zip(resumed, params, strict=True):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


# -- zero_grad and errors ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
                                  "ASGD", "Rprop", "LAMB", "LBFGS"])  # fmt: skip
def test_zero_grad(name):
    w = flow.nn.Parameter(flow.ones(2))
    opt = getattr(flow.optim, name)([w])
    w.grad = flow.ones(2)
    opt.zero_grad(set_to_none=False)
    assert w.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None


def _param():
    return [flow.nn.Parameter(flow.zeros(2))]


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: flow.optim.RMSprop(_param(), lr=-1), "Invalid learning rate: -1"),
        (lambda: flow.optim.RMSprop(_param(), eps=-1e-8), "Invalid epsilon value: -1e-08"),
        (lambda: flow.optim.RMSprop(_param(), momentum=-0.5), "Invalid momentum value: -0.5"),
        (lambda: flow.optim.RMSprop(_param(), weight_decay=-1), "Invalid weight_decay value: -1"),
        (lambda: flow.optim.RMSprop(_param(), alpha=-0.1), "Invalid alpha value: -0.1"),
        (lambda: flow.optim.Adagrad(_param(), lr=-0.1), "Invalid learning rate: -0.1"),
        (lambda: flow.optim.Adagrad(_param(), lr_decay=-1), "Invalid lr_decay value: -1"),
        (lambda: flow.optim.Adagrad(_param(), initial_accumulator_value=-1),
         "Invalid initial_accumulator_value value: -1"),
        (lambda: flow.optim.Adagrad(_param(), eps=-1), "Invalid epsilon value: -1"),
        (lambda: flow.optim.Adadelta(_param(), lr=-1), "Invalid learning rate: -1"),
        (lambda: flow.optim.Adadelta(_param(), rho=1.5), "Invalid rho value: 1.5"),
        (lambda: flow.optim.Adadelta(_param(), eps=-1), "Invalid epsilon value: -1"),
        (lambda: flow.optim.Adadelta(_param(), weight_decay=-2), "Invalid weight_decay value: -2"),
        (lambda: flow.optim.Adamax(_param(), betas=(0.9, 1.5)),
         "Invalid beta parameter at index 1: 1.5"),
        (lambda: flow.optim.Adamax(_param(), eps=-1), "Invalid epsilon value: -1"),
        (lambda: flow.optim.NAdam(_param(), momentum_decay=-1), "Invalid momentum_decay value: -1"),
        (lambda: flow.optim.NAdam(_param(), lr=-1), "Invalid learning rate: -1"),
        (lambda: flow.optim.RAdam(_param(), weight_decay=-1), "Invalid weight_decay value: -1"),
        (lambda: flow.optim.ASGD(_param(), lr=-1), "Invalid learning rate: -1"),
        (lambda: flow.optim.ASGD(_param(), weight_decay=-1), "Invalid weight_decay value: -1"),
        (lambda: flow.optim.Rprop(_param(), lr=-1), "Invalid learning rate: -1"),
        (lambda: flow.optim.Rprop(_param(), etas=(1.5, 2)), "Invalid eta values: 1.5, 2"),
        (lambda: flow.optim.Rprop(_param(), etas=(0.5, 0.9)), "Invalid eta values: 0.5, 0.9"),
        (lambda: flow.optim.LAMB(_param(), lr=-1), "Invalid learning rate: -1"),
        (lambda: flow.optim.LAMB(_param(), betas=(1.0, 0.9)),
         "Invalid beta parameter at index 0: 1.0"),
        (lambda: flow.optim.LAMB(_param(), betas=(0.9, -0.1)),
         "Invalid beta parameter at index 1: -0.1"),
        (lambda: flow.optim.LAMB(_param(), clamp_value=0), "Invalid clamp_value: 0"),
        (lambda: flow.optim.LBFGS(_param(), lr=-1), "Invalid learning rate: -1"),
    ],
)  # fmt: skip
def test_invalid_hyperparameters_raise_like_pytorch(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
                                  "ASGD", "Rprop"])  # fmt: skip
def test_differentiable_updates_are_refused(name):
    with pytest.raises(flow.TideflowError, match=f"{name}: differentiable=True is not supported"):
        getattr(flow.optim, name)(_param(), differentiable=True)
