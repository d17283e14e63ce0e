"""nn.Module registration, traversal, state_dict round trips, modes, hooks and printing."""

from collections import OrderedDict

import numpy as np
import pytest

import tideflow as flow
from tideflow import nn


class Affine(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(flow.ones(n))
        self.bias = nn.Parameter(flow.zeros(n))
        self.register_buffer("calls", flow.zeros(1))
        self.register_buffer("scratch", flow.zeros(1), persistent=False)

    def forward(self, x):
        return x * self.weight + self.bias

    def extra_repr(self) -> str:
        return f"n={self.weight.shape[0]}"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = Affine(3)
        self.blocks = nn.ModuleList([Affine(3), Affine(3)])
        self.head = nn.Sequential(OrderedDict(first=Affine(3)))

    def forward(self, x):
        x = self.a(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def test_registration_and_pytorch_key_names():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == [
        "a.weight", "a.bias", "blocks.0.weight", "blocks.0.bias",
        "blocks.1.weight", "blocks.1.bias", "head.first.weight", "head.first.bias",
    ]  # fmt: skip
    assert [n for n, _ in net.named_buffers()][:2] == ["a.calls", "a.scratch"]
    sd = net.state_dict()
    assert "a.calls" in sd and "a.scratch" not in sd  # non-persistent buffers are not saved
    assert [n for n, _ in net.named_children()] == ["a", "blocks", "head"]
    assert len(list(net.modules())) == 7
    assert net.get_submodule("blocks.1") is net.blocks[1]
    assert net.get_parameter("head.first.bias") is net.head.first.bias


def test_shared_parameters_are_listed_once():
    net = Net()
    net.blocks[1].weight = net.a.weight
    assert len(list(net.parameters())) == 7


def test_state_dict_round_trip_and_key_report():
    src, dst = Net(), Net()
    with flow.no_grad():
        for p in src.parameters():
            p.uniform_()
    result = dst.load_state_dict(src.state_dict())
    assert repr(result) == "<All keys matched successfully>"
    for (_, a), (_, b) in zip(src.named_parameters(), dst.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    partial = {k: v for k, v in src.state_dict().items() if not k.startswith("head")}
    partial["extra.weight"] = flow.zeros(1)
    with pytest.raises(flow.TideflowError, match=r'Missing key.*"head.first.weight".*\n.*'
                       r'Unexpected key.*"extra.weight"'):  # fmt: skip
        dst.load_state_dict(partial)
    missing, unexpected = dst.load_state_dict(partial, strict=False)
    assert missing == ["head.first.weight", "head.first.bias", "head.first.calls"]
    assert unexpected == ["extra.weight"]
    bad = src.state_dict()
    bad["a.weight"] = flow.zeros(4)
    with pytest.raises(flow.TideflowError, match=r"size mismatch for a.weight.*\[4\].*\[3\]"):
        dst.load_state_dict(bad)


def test_load_keeps_parameter_objects():
    net = Net()
    w = net.a.weight
    net.load_state_dict(Net().state_dict())
    assert net.a.weight is w and w.requires_grad and w.is_leaf


def test_train_eval_requires_grad_zero_grad_apply():
    net = Net()
    assert net.training and net.eval() is net and not net.blocks[0].training
    net.train()
    assert all(m.training for m in net.modules())
    net(flow.ones(3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen.count("Affine") == 4


def test_to_dtype_keeps_parameter_identity():
    net = Net()
    w = net.a.weight
    net.double()
    assert net.a.weight is w and w.dtype == flow.float64 and w.requires_grad
    assert net.a.calls.dtype == flow.float64


def test_forward_hooks():
    layer = Affine(2)
    calls = []
    h1 = layer.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    h2 = layer.register_forward_hook(lambda m, args, out: calls.append(out) or out + 1)
    out = layer(flow.ones(2))
    assert out.tolist() == [3.0, 3.0] and len(calls) == 1
    h1.remove()
    h2.remove()
    assert layer(flow.ones(2)).tolist() == [1.0, 1.0]
    layer.register_forward_pre_hook(
        lambda m, args, kwargs: ((args[0] + 1,), kwargs), with_kwargs=True
    )
    assert layer(flow.ones(2)).tolist() == [2.0, 2.0]


def test_attribute_rules():
    net = Net()
    with pytest.raises(TypeError, match=r"nn\.Parameter or None expected"):
        net.a.weight = flow.ones(3)
    net.a.weight = None
    assert "weight" not in dict(net.a.named_parameters())
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = net.nope
    del net.a.bias
    assert "bias" not in dict(net.a.named_parameters())
    with pytest.raises(KeyError, match="contain"):
        net.register_buffer("a.b", flow.zeros(1))


def test_repr_lists_children_with_extra_repr():
    text = repr(Net())
    assert text.startswith(
        "Net(\n  (a): Affine(n=3)\n  (blocks): ModuleList(\n    (0): Affine(n=3)"
    )
    assert "(head): Sequential(\n    (first): Affine(n=3)\n  )" in text
    assert repr(nn.Parameter(flow.zeros(1))).startswith("Parameter containing:\ntensor([0.]")


def test_containers():
    seq = nn.Sequential(Affine(2), Affine(2))
    assert len(seq) == 2 and isinstance(seq[-1], Affine) and len(seq[:1]) == 1
    seq.append(Affine(2))
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2"]
    ml = nn.ModuleList()
    ml += [Affine(1)]
    ml.insert(0, Affine(2))
    assert ml[0].weight.shape == (2,)
    md = nn.ModuleDict({"x": Affine(1)})
    md["y"] = Affine(1)
    assert list(md.keys()) == ["x", "y"] and "y" in md
    pl = nn.ParameterList([flow.zeros(2), nn.Parameter(flow.ones(1))])
    assert len(list(pl.parameters())) == 2 and pl[0].requires_grad
    pd = nn.ParameterDict({"w": flow.zeros(1)})
    assert isinstance(pd["w"], nn.Parameter)
