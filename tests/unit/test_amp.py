"""autocast regions and GradScaler, against torch.autocast / torch.amp.GradScaler on CPU."""

import numpy as np
import pytest

import tideflow as flow

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _pair(shape, seed=0, requires_grad=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return (flow.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))  # fmt: skip


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_op_lists_match_torch(dtype):
    (fx, tx), (fw, tw) = _pair((4, 8)), _pair((8, 3), 1)
    with flow.autocast("cpu", dtype=getattr(flow, dtype)):
        f = {"mm": fx @ fw, "add": fx + 1, "exp": fx.exp(), "bce": flow.nn.functional.
             binary_cross_entropy_with_logits((fx @ fw), flow.zeros(4, 3))}  # fmt: skip
    with torch.autocast("cpu", dtype=getattr(torch, dtype)):
        t = {"mm": tx @ tw, "add": tx + 1, "exp": tx.exp(), "bce": torch.nn.functional.
             binary_cross_entropy_with_logits((tx @ tw), torch.zeros(4, 3))}  # fmt: skip
    for k in f:
        assert f[k].dtype.name == str(t[k].dtype).replace("torch.", ""), k
        np.testing.assert_allclose(
            f[k].detach().float().numpy(), t[k].detach().float().numpy(), rtol=1e-2, atol=1e-2
        )


def test_gradients_flow_back_in_the_parameter_dtype():
    (fx, tx), (fw, tw) = _pair((4, 8)), _pair((8, 3), 1, requires_grad=True)
    with flow.autocast("cpu"):
        fl = (fx @ fw).float().pow(2).sum()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tl = (tx @ tw).float().pow(2).sum()
    fl.backward()
    tl.backward()
    assert fw.grad.dtype == flow.float32
    np.testing.assert_allclose(fw.grad.numpy(), tw.grad.numpy(), rtol=2e-2, atol=2e-2)


def test_nesting_disabling_and_decorator():
    fx, _ = _pair((2, 2))
    with flow.autocast("cpu"):
        assert flow.amp.is_autocast_enabled()
        with flow.autocast("cpu", enabled=False):
            assert (fx @ fx).dtype == flow.float32
        assert (fx @ fx).dtype == flow.bfloat16
    assert not flow.amp.is_autocast_enabled() and (fx @ fx).dtype == flow.float32

    @flow.autocast("cpu", dtype=flow.float16)
    def f(a):
        return a @ a

    assert f(fx).dtype == flow.float16
    with pytest.raises(flow.TideflowError, match="bfloat16 or float16"):
        flow.autocast("cpu", dtype=flow.int32)


def test_weights_are_cast_once_per_region():
    fx, _ = _pair((2, 2))
    w = flow.nn.Parameter(flow.ones(2, 2))
    with flow.autocast("cpu"):
        a = fx @ w
        b = fx @ w
    # both products reuse one cast node of the weight
    assert a.grad_fn.next_functions[1][0] is b.grad_fn.next_functions[1][0]


def _scaler_run(lib, grads, **kw):
    p = lib.nn.Parameter(lib.tensor([1.0, 2.0]))
    opt = lib.optim.SGD([p], lr=0.1)
    scaler = lib.amp.GradScaler("cpu", **kw)
    scales, values = [], []
    for g in grads:
        opt.zero_grad()
        loss = scaler.scale((p * lib.tensor(g)).sum())
        loss.backward()
        scaler.step(opt)
        scaler.update()
        scales.append(float(scaler.get_scale()))
        values.append(p.detach().numpy().copy())
    return scales, values, scaler.state_dict()


def test_grad_scaler_matches_torch():
    grads = [[1.0, 1.0], [float("inf"), 1.0], [0.5, 0.5], [1.0, float("nan")], [2.0, 2.0]]
    kw = dict(init_scale=8.0, growth_interval=2)
    f_scales, f_values, f_state = _scaler_run(flow, grads, **kw)
    t_scales, t_values, t_state = _scaler_run(torch, grads, **kw)
    assert f_scales == t_scales
    for a, b in zip(f_values, t_values, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert f_state["scale"] == t_state["scale"]
    assert f_state["_growth_tracker"] == t_state["_growth_tracker"]


def test_grad_scaler_misuse():
    p = flow.nn.Parameter(flow.ones(1))
    opt = flow.optim.SGD([p], lr=0.1)
    scaler = flow.amp.GradScaler()
    scaler.scale(p.sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(flow.TideflowError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    restored = flow.amp.GradScaler()
    restored.load_state_dict(scaler.state_dict())
    assert restored.get_scale() == scaler.get_scale()
