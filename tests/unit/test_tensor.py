"""The Tensor API: metadata, conversions, copies and views, creation, printing."""

import numpy as np
import pytest

import tideflow as flow


def test_metadata():
    x = flow.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and isinstance(x.shape, flow.Size)
    assert x.size() == flow.Size([2, 3, 4]) and x.size(1) == 3 and x.size(-1) == 4
    assert x.ndim == 3 and x.dim() == 3 and x.numel() == 24 and x.shape.numel() == 24
    assert x.dtype == flow.float32 and x.device == flow.device("cpu") and x.device == "cpu"
    assert x.is_leaf and not x.requires_grad and x.grad is None and x.grad_fn is None
    assert x.element_size() == 4 and x.nbytes == 96 and x.is_contiguous()
    assert x.stride() == (12, 4, 1)
    with pytest.raises(IndexError, match="out of range"):
        x.size(3)


def test_scalars_and_python_conversions():
    t = flow.tensor(2.5)
    assert t.item() == 2.5 and float(t) == 2.5 and t.shape == ()
    assert flow.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert int(flow.tensor([7])) == 7 and bool(flow.tensor([1.0]))
    assert [1, 2, 3][flow.tensor(1)] == 2  # __index__
    with pytest.raises(flow.TideflowError, match="one element"):
        flow.zeros(2).item()
    with pytest.raises(flow.TideflowError, match="ambiguous"):
        bool(flow.zeros(2))
    assert len(flow.zeros(5, 2)) == 5
    assert flow.tensor([1.5], dtype=flow.bfloat16).item() == 1.5


def test_dtype_conversions():
    x = flow.tensor([1.7, -2.2])
    assert x.double().dtype == flow.float64 and x.half().dtype == flow.float16
    assert x.bfloat16().dtype == flow.bfloat16
    assert x.long().tolist() == [1, -2] and x.int().dtype == flow.int32
    assert x.bool().tolist() == [True, True]
    assert x.to(flow.float64).dtype == flow.float64
    assert x.to("cpu") is x and x.to(flow.float32) is x
    assert x.to(flow.zeros(1, dtype=flow.int64)).dtype == flow.int64
    assert x.to("cpu", flow.float64).dtype == flow.float64
    assert x.type(flow.float64).dtype == flow.float64
    with pytest.raises(RuntimeError, match="cuda"):
        x.to("cuda")


def test_casting_keeps_autograd():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    y = x.double() * 2
    y.sum().backward()
    assert x.grad.dtype == flow.float32 and x.grad.tolist() == [2.0, 2.0]


def test_creation_from_data():
    assert flow.tensor([1, 2]).dtype == flow.int64
    assert flow.tensor([1.0, 2]).dtype == flow.float32
    assert flow.tensor([True]).dtype == flow.bool
    assert flow.tensor(np.zeros(2, np.float64)).dtype == flow.float64
    assert flow.tensor([1, 2], dtype=flow.float16).dtype == flow.float16
    a = np.arange(3.0)
    t = flow.tensor(a)
    a[0] = 9
    assert t.tolist()[0] == 0.0  # tensor() copies
    s = flow.from_numpy(a)
    a[1] = 7
    assert s.tolist()[1] == 7.0  # from_numpy shares memory
    s.add_(1)
    assert a[2] == 3.0
    assert flow.as_tensor(a) is not None and flow.as_tensor(a).numpy() is a
    legacy = flow.Tensor(2, 3)
    assert legacy.shape == (2, 3) and legacy.dtype == flow.float32
    assert flow.Tensor([1, 2]).dtype == flow.float32


def test_creation_from_sizes():
    assert flow.zeros(2, 3).shape == (2, 3) and flow.zeros((2, 3)).shape == (2, 3)
    assert flow.ones([4]).tolist() == [1.0] * 4
    assert flow.full((2,), 7).dtype == flow.int64 and flow.full((2,), 7.0).dtype == flow.float32
    assert flow.zeros_like(flow.ones(2, dtype=flow.int32)).dtype == flow.int32
    assert flow.arange(5).tolist() == [0, 1, 2, 3, 4] and flow.arange(5).dtype == flow.int64
    assert flow.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert flow.linspace(0, 1, 3).tolist() == [0.0, 0.5, 1.0]
    assert flow.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert flow.empty(3).shape == (3,)
    assert flow.ones(2).new_zeros(3).dtype == flow.float32
    assert flow.zeros(2, requires_grad=True).requires_grad
    with pytest.raises(flow.TideflowError, match="negative dimension"):
        flow.zeros(2, -1)
    with pytest.raises(flow.TideflowError, match="step must be nonzero"):
        flow.arange(0, 5, 0)


def test_views_share_memory_and_version_counter():
    x = flow.arange(6.0)
    v = x.view(2, 3)
    v.add_(1)  # in place through the view
    assert x.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert x._version_count == v._version_count == 1
    e = flow.ones(3, 1).expand(3, 4)
    assert e.shape == (3, 4) and not e.is_contiguous()
    assert e.contiguous().is_contiguous()
    r = x.reshape(3, 2)
    assert np.shares_memory(r.numpy(), x.numpy())


def test_clone_and_detach():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    c = x.clone()
    assert c.grad_fn is not None and not np.shares_memory(c.detach().numpy(), x.detach().numpy())
    d = x.detach()
    assert np.shares_memory(d.numpy(), x.detach().numpy())
    assert x.data.requires_grad is False


def test_repr_matches_pytorch_format():
    assert repr(flow.tensor([1.0, 2.0, 3.0])) == "tensor([1., 2., 3.])"
    assert repr(flow.tensor(3.0)) == "tensor(3.)"
    assert repr(flow.tensor([1, 2])) == "tensor([1, 2])"
    assert (
        repr(flow.tensor([1.5], dtype=flow.float64)) == "tensor([1.5000], dtype=tideflow.float64)"
    )
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "tensor([1., 2.], requires_grad=True)"
    assert repr(x * 2) == "tensor([2., 4.], grad_fn=<MulBackward0>)"
    assert repr(flow.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(flow.tensor([[0.1234, 0.5678], [1.0, 2.0]])) == (
        "tensor([[0.1234, 0.5678],\n        [1.0000, 2.0000]])"
    )


FORMAT_CASES = [(1.5, "+.2f"), (3, ">6"), (-0.125, ".1e"), (True, ""), (255, "#x"), (2.5, "")]


@pytest.mark.torch
@pytest.mark.parametrize(("value", "spec"), FORMAT_CASES)
def test_format_of_a_0d_tensor_matches_pytorch(value, spec):
    torch = pytest.importorskip("torch")
    assert format(flow.tensor(value), spec) == format(torch.tensor(value), spec)


def test_format_of_a_0d_tensor_is_its_value_and_of_others_is_objects():
    loss = flow.tensor(2.0, requires_grad=True) * 1.25
    assert f"loss {loss:5.2f}" == "loss  2.50"
    step = flow.tensor(2.5).to_global(flow.placement("cpu", [0]), flow.sbp.broadcast)
    assert f"{step:.1f}" == "2.5"  # a global tensor formats as its logical value
    assert f"{flow.tensor([1.5])}" == str(flow.tensor([1.5]))
    for t in (flow.tensor([1.5]), flow.nn.Parameter(flow.tensor(1.0))):
        with pytest.raises(TypeError, match="unsupported format string"):
            format(t, ".2f")  # as in PyTorch: only a plain 0-d tensor is a number here
