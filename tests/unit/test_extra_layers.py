"""glu, rrelu, gumbel_softmax, local_response_norm, pdist, channel_shuffle, embedding_bag,
the *_with_indices pools and their modules (the functions' forward and backward are checked
from the op database): modules against torch.nn's, the random ones' statistics, errors."""

import numpy as np
import pytest

import tideflow as flow

torch = pytest.importorskip("torch")
F = flow.nn.functional

_X = np.random.default_rng(0).standard_normal((2, 6, 4, 4)).astype(np.float32)

MODULES = {
    "GLU": (dict(dim=1), _X),
    "RReLU": (dict(lower=0.1, upper=0.3), _X),  # in eval mode: the mean slope
    "LocalResponseNorm": (dict(size=3, alpha=0.1, beta=0.5, k=2.0), _X),
    "ChannelShuffle": (dict(groups=3), _X),
    "Unfold": (dict(kernel_size=2, stride=2), _X),
    "Fold": (dict(output_size=(4, 4), kernel_size=2), _X.reshape(-1)[:108].reshape(1, 12, 9)),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_module_equals_pytorchs(name):
    options, x = MODULES[name]
    x = np.ascontiguousarray(x)
    ours = getattr(flow.nn, name)(**options).eval()(flow.tensor(x))
    theirs = getattr(torch.nn, name)(**options).eval()(torch.tensor(x))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6)
    assert repr(getattr(flow.nn, name)(**options)) == repr(getattr(torch.nn, name)(**options))


def test_rrelu_in_training_draws_slopes_uniformly_between_the_bounds():
    flow.manual_seed(0)
    x = -flow.ones(100_000)
    slopes = -F.rrelu(x, 0.1, 0.3, training=True).numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3
    assert abs(slopes.mean() - 0.2) < 1e-3 and abs(slopes.std() - 0.2 / np.sqrt(12)) < 1e-3
    positive = flow.ones(5)
    assert F.rrelu(positive, training=True).tolist() == [1.0] * 5
    y = -flow.ones(3)
    F.rrelu(y, training=True, inplace=True)
    assert (y.numpy() < 0).all() and (y.numpy() > -0.34).all()


def test_gumbel_softmax_samples_follow_the_softmax_and_pass_its_gradient():
    flow.manual_seed(0)
    logits = flow.tensor([[1.0, 2.0, 0.5]], requires_grad=True)
    hard = F.gumbel_softmax(logits.expand(40_000, 3), hard=True)
    assert set(np.unique(hard.detach().numpy())) == {0.0, 1.0}
    frequencies = hard.detach().numpy().mean(0)
    expected = F.softmax(logits, -1).detach().numpy()[0]
    assert np.abs(frequencies - expected).max() < 0.01  # ~4 standard errors
    (hard * flow.tensor([1.0, 0.0, 0.0])).sum().backward()  # straight through the soft sample
    assert logits.grad.abs().sum().item() > 0
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated"):
        F.gumbel_softmax(logits, eps=1e-5)


@pytest.mark.parametrize("pool", ["max_pool1d", "max_pool2d", "adaptive_max_pool2d"])
def test_pools_with_indices_are_the_pools_returning_indices(pool):
    x = _X[0] if pool == "max_pool1d" else _X
    x = np.ascontiguousarray(x.reshape(x.shape[0], x.shape[1], -1) if pool == "max_pool1d" else x)
    size = (2, 3) if pool.startswith("adaptive") else 2
    ours = getattr(F, f"{pool}_with_indices")(flow.tensor(x), size)
    theirs = getattr(torch.nn.functional, f"{pool}_with_indices")(torch.tensor(x), size)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: F.glu(flow.ones(3, 5)), flow.ShapeError, "dimension 1 is size 5"),
        (lambda: F.glu(flow.tensor(1.0)), flow.ShapeError, "does not support scalars"),
        (lambda: F.rrelu(flow.ones(2), 0.5, 0.1), ValueError, "lower bound"),
        (lambda: F.channel_shuffle(flow.ones(1, 5, 2), 2), flow.ShapeError, "divisible by groups"),
        (lambda: F.channel_shuffle(flow.ones(5, 2), 1), flow.ShapeError, "more than 2 dims"),
        (lambda: F.channel_shuffle(flow.ones(1, 4, 2), 0), ValueError, "must be positive"),
        (lambda: F.pdist(flow.ones(4)), flow.ShapeError, "expected a 2-d input"),
        (lambda: F.pdist(flow.ones(4, 2), -1), ValueError, "non-negative"),
        (lambda: F.local_response_norm(flow.ones(2, 3), 2), ValueError, "3D or higher"),
    ],
)
def test_errors_name_the_op(call, error, match):
    with pytest.raises(error, match=match):
        call()
