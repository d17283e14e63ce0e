"""Lazy layers against PyTorch's: the printed form before and after the first call, the
inferred shapes, the layer they become, and (with PyTorch's weights loaded) equal outputs."""

import numpy as np
import pytest

import tideflow as flow
from tideflow import nn

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

CASES = [
    ("LazyLinear", (3,), {}, (4, 5)),
    ("LazyLinear", (2,), {"bias": False}, (2, 3, 4)),
    ("LazyConv1d", (4, 3), {"stride": 2}, (2, 3, 9)),
    ("LazyConv1d", (4, 3), {}, (6, 7)),  # unbatched: channels from dim 0
    ("LazyConv2d", (4, 3), {"padding": 1, "groups": 2}, (2, 6, 5, 5)),
    ("LazyConv3d", (2, 2), {"bias": False}, (1, 3, 3, 3, 3)),
    ("LazyConvTranspose1d", (4, 3), {"stride": 2}, (2, 3, 9)),
    ("LazyConvTranspose2d", (4, 3), {"groups": 2, "output_padding": 1, "stride": 2}, (2, 6, 5, 5)),
    ("LazyConvTranspose3d", (2, 2), {"bias": False}, (1, 3, 3, 3, 3)),
    ("LazyConvTranspose1d", (4, 3), {}, (6, 7)),  # unbatched
    ("LazyBatchNorm1d", (), {}, (4, 5)),
    ("LazyBatchNorm1d", (), {"affine": False}, (4, 5, 3)),
    ("LazyBatchNorm2d", (), {"momentum": 0.5}, (2, 3, 4, 4)),
    ("LazyBatchNorm3d", (), {"track_running_stats": False}, (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 6)),
    ("LazyInstanceNorm2d", (), {"track_running_stats": False, "bias": False}, (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), {"affine": False}, (1, 2, 3, 3, 3)),
]


@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), CASES)
def test_lazy_layer_becomes_the_plain_layer_of_its_first_input(name, args, kwargs, shape):
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    x = np.random.default_rng(0).standard_normal(shape)
    ours(flow.tensor(x, dtype=flow.float32))
    theirs(torch.tensor(x, dtype=torch.float32))
    assert type(ours).__name__ == type(theirs).__name__
    assert repr(ours) == repr(theirs)
    for (key, p), (tkey, tp) in zip(
        ours.named_parameters(), theirs.named_parameters(), strict=True
    ):
        assert key == tkey and tuple(p.shape) == tuple(tp.shape)
        assert type(p) is nn.Parameter
        p.data.copy_(flow.tensor(tp.detach().numpy()))
    for (key, b), (tkey, tb) in zip(ours.named_buffers(), theirs.named_buffers(), strict=True):
        assert key == tkey
        np.testing.assert_allclose(b.numpy(), tb.numpy(), rtol=4 * np.finfo(np.float32).eps)
    # float64: a few dozen products per output, so both agree to a few ulps
    y = ours.double()(flow.tensor(x)).detach().numpy()
    ty = theirs.double()(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(y, ty, rtol=1e-12, atol=1e-14)


def test_an_optimizer_made_before_the_first_call_updates_the_materialized_weights():
    m = nn.LazyLinear(2)
    opt = flow.optim.SGD(m.parameters(), lr=0.1)
    m(flow.ones(3, 4)).sum().backward()
    before = m.weight.detach().clone()
    opt.step()
    assert not flow.equal(m.weight, before)


def test_lazy_conv_refuses_channels_the_groups_do_not_divide():
    with pytest.raises(ValueError, match=r"LazyConv2d: in_channels \(3, .*divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(flow.randn(1, 3, 5, 5))


def test_lazy_instance_norm_reads_the_channels_of_an_unbatched_input():
    # NOTE: PyTorch's takes dim 1 of an unbatched (C, L) input and then refuses it
    m = nn.LazyInstanceNorm1d()
    assert m(flow.randn(3, 6)).shape == (3, 6) and m.num_features == 3
