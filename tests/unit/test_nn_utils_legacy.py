"""nn.utils against torch.nn.utils: the hook-based weight_norm / spectral_norm (state dict
keys, forward, gradients, power iterations, removal), batch-norm fusion, functional_call,
skip_init and the deprecated clip_grad_norm."""

import importlib

import numpy as np
import pytest

import tideflow as flow

from .test_nn_layers import run_doctests

torch = pytest.importorskip("torch")


def _twins(make):
    """A torch module and its tideflow twin with the same state."""
    theirs, ours = make(torch), make(flow)
    ours.load_state_dict(
        {k: flow.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    )
    return ours, theirs


def _same(a, b, **tol):
    np.testing.assert_allclose(
        a.detach().numpy(), b.detach().numpy(), **(tol or dict(rtol=1e-5, atol=1e-6))
    )


@pytest.mark.parametrize(
    ("make", "dim"),
    [(lambda lib: lib.nn.Linear(4, 3), 0), (lambda lib: lib.nn.Conv2d(2, 3, 2), None),
     (lambda lib: lib.nn.Conv1d(2, 3, 2), 1)],
)  # fmt: skip
def test_weight_norm_matches_pytorch(make, dim):
    def build(lib):
        with pytest.warns(FutureWarning, match="weight_norm` is deprecated"):
            return lib.nn.utils.weight_norm(make(lib), dim=dim)

    ours, theirs = _twins(build)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    shape = (2, 4) if isinstance(theirs, torch.nn.Linear) else (1, 2, 5, 5)[: theirs.weight.ndim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out_ours, out_theirs = ours(flow.tensor(x)), theirs(torch.tensor(x))
    _same(out_ours, out_theirs)
    out_ours.square().sum().backward()
    out_theirs.square().sum().backward()
    _same(ours.weight_g.grad, theirs.weight_g.grad)
    _same(ours.weight_v.grad, theirs.weight_v.grad)
    flow.nn.utils.remove_weight_norm(ours)
    torch.nn.utils.remove_weight_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _same(ours.weight, theirs.weight)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        flow.nn.utils.remove_weight_norm(ours)


def test_weight_norm_twice_on_one_parameter_is_refused():
    m = flow.nn.Linear(2, 2)
    with pytest.warns(FutureWarning):
        flow.nn.utils.weight_norm(m)
        with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"):
            flow.nn.utils.weight_norm(m)


@pytest.mark.parametrize(
    "make", [lambda lib: lib.nn.Linear(5, 4), lambda lib: lib.nn.ConvTranspose2d(3, 2, 2)]
)
def test_spectral_norm_matches_pytorch_in_training_and_eval(make):
    ours, theirs = _twins(lambda lib: lib.nn.utils.spectral_norm(make(lib), n_power_iterations=2))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    linear = isinstance(theirs, torch.nn.Linear)
    x = np.random.default_rng(1).standard_normal((2, 5) if linear else (1, 3, 3, 3))
    x = x.astype(np.float32)
    for _ in range(3):  # each training forward refines u and v
        _same(ours(flow.tensor(x)), theirs(torch.tensor(x)))
    _same(ours.weight_u, theirs.weight_u)
    ours.eval(), theirs.eval()
    out_ours, out_theirs = ours(flow.tensor(x)), theirs(torch.tensor(x))
    _same(out_ours, out_theirs)
    out_ours.sum().backward()
    out_theirs.sum().backward()
    _same(ours.weight_orig.grad, theirs.weight_orig.grad)
    flow.nn.utils.remove_spectral_norm(ours)
    torch.nn.utils.remove_spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _same(ours.weight, theirs.weight)


@pytest.mark.parametrize("transpose", [False, True])
def test_conv_bn_fusion_matches_pytorch(transpose):
    def build(lib):
        conv = (lib.nn.ConvTranspose2d if transpose else lib.nn.Conv2d)(3, 4, 2)
        return lib.nn.Sequential(conv, lib.nn.BatchNorm2d(4))

    ours, theirs = _twins(build)
    rng = np.random.default_rng(2)
    for model in (ours, theirs):  # running statistics other than the initial ones
        model[1].running_mean.copy_(model[1].running_mean + 0.3)
        model[1].running_var.copy_(model[1].running_var * 1.7)
    ours.eval(), theirs.eval()
    fused_ours = flow.nn.utils.fuse_conv_bn_eval(ours[0], ours[1], transpose)
    fused_theirs = torch.nn.utils.fuse_conv_bn_eval(theirs[0], theirs[1], transpose)
    _same(fused_ours.weight, fused_theirs.weight)
    _same(fused_ours.bias, fused_theirs.bias)
    x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    _same(fused_ours(flow.tensor(x)), ours(flow.tensor(x)), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="Fusion only for eval"):
        flow.nn.utils.fuse_conv_bn_eval(ours[0].train(), ours[1])


def test_linear_bn_fusion_matches_pytorch():
    ours, theirs = _twins(lambda lib: lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4)))
    for model in (ours, theirs):
        model[1].running_var.copy_(model[1].running_var * 2.5)
    ours.eval(), theirs.eval()
    fused_ours = flow.nn.utils.fuse_linear_bn_eval(ours[0], ours[1])
    fused_theirs = torch.nn.utils.fuse_linear_bn_eval(theirs[0], theirs[1])
    _same(fused_ours.weight, fused_theirs.weight)
    _same(fused_ours.bias, fused_theirs.bias)


def test_functional_call_matches_torch_func():
    ours, theirs = _twins(lambda lib: lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.Tanh()))
    w = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    x = np.ones((4, 3), np.float32)
    w_ours, w_theirs = flow.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    out_ours = flow.nn.utils.stateless.functional_call(
        ours, {"0.weight": w_ours}, (flow.tensor(x),)
    )
    out_theirs = torch.func.functional_call(theirs, {"0.weight": w_theirs}, (torch.tensor(x),))
    _same(out_ours, out_theirs)
    out_ours.sum().backward()
    out_theirs.sum().backward()
    _same(w_ours.grad, w_theirs.grad)
    assert ours[0].weight.grad is None  # the module's own weight was not used
    _same(ours[0].weight, theirs[0].weight)  # and is back in place
    with pytest.raises(RuntimeError, match=r"unexpected key\(s\): \['nope'\]"):
        flow.nn.utils.stateless.functional_call(ours, {"nope": w_ours}, (flow.tensor(x),))
    with pytest.raises(RuntimeError, match=r"missing key\(s\): \['0.bias'\]"):
        flow.nn.utils.stateless.functional_call(
            ours, {"0.weight": w_ours}, (flow.tensor(x),), strict=True
        )


def test_functional_call_replaces_every_name_of_a_tied_weight():
    class Tied(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = flow.nn.Linear(2, 2, bias=False)
            self.b = flow.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    model, w = Tied(), flow.eye(2) * 2
    out = flow.nn.utils.stateless.functional_call(model, {"a.weight": w}, (flow.ones(1, 2),))
    assert out.tolist() == [[4.0, 4.0]]


def test_skip_init_and_the_deprecated_clip_grad_norm():
    assert flow.nn.utils.skip_init(flow.nn.Linear, 5, 1).weight.shape == (1, 5)
    with pytest.raises(flow.TideflowError, match="must support a 'device' arg"):
        flow.nn.utils.skip_init(lambda: flow.nn.Linear(1, 1))
    p = flow.nn.Parameter(flow.ones(4))
    p.grad = flow.full((4,), 3.0)
    with pytest.warns(FutureWarning, match="clip_grad_norm` is now deprecated"):
        total = flow.nn.utils.clip_grad_norm([p], 1.0)
    assert total.item() == pytest.approx(6.0)
    assert p.grad.norm().item() == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize("module", ["fusion", "stateless", "init", "weight_norm"])
def test_docstring_examples_run(module):
    run_doctests(importlib.import_module(f"tideflow.nn.utils.{module}"))
