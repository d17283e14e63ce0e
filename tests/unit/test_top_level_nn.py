"""The nn.functional ops at the top level (`flow.conv2d`, `flow.dropout`, ...) take the
top level's signatures and give torch.*'s results."""

import numpy as np
import pytest

import tideflow as flow

torch = pytest.importorskip("torch")
_rng = np.random.default_rng(0)
X = _rng.standard_normal((2, 4, 6)).astype(np.float32)
IMG = _rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
W1 = _rng.standard_normal((3, 4, 3)).astype(np.float32)
W2 = _rng.standard_normal((3, 4, 3, 3)).astype(np.float32)

CALLS = {
    "conv1d": lambda m, t: m.conv1d(t(X), t(W1), None, 1, 1),
    "conv2d": lambda m, t: m.conv2d(t(IMG), t(W2), None, 2),
    "conv_transpose1d": lambda m, t: m.conv_transpose1d(t(X), t(W1.transpose(1, 0, 2).copy())),
    "max_pool1d": lambda m, t: m.max_pool1d(t(X), 2),
    "max_pool2d": lambda m, t: m.max_pool2d(t(IMG), 3, 2, 1),
    "adaptive_max_pool1d": lambda m, t: m.adaptive_max_pool1d(t(X), 3),
    "avg_pool1d": lambda m, t: m.avg_pool1d(t(X), 2),
    "layer_norm": lambda m, t: m.layer_norm(t(X), (6,), None, None, 1e-5, True),
    "group_norm": lambda m, t: m.group_norm(t(X), 2, None, None, 1e-5, False),
    "dropout-eval": lambda m, t: m.dropout(t(X), 0.5, False),
    "pixel_shuffle": lambda m, t: m.pixel_shuffle(t(IMG), 2),
    "channel_shuffle": lambda m, t: m.channel_shuffle(t(IMG), 2),
    "cosine_similarity": lambda m, t: m.cosine_similarity(t(X), t(X[::-1].copy()), 2),
    "pdist": lambda m, t: m.pdist(t(X[0])),
    "rms_norm": lambda m, t: m.rms_norm(t(X), [6]),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_top_level_call_matches_torch(name):
    ours = CALLS[name](flow, flow.tensor)
    theirs = CALLS[name](torch, torch.tensor)
    ours, theirs = (v if isinstance(v, tuple) else (v,) for v in (ours, theirs))
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def test_dropout_in_training_drops_at_the_given_rate():
    kept = flow.dropout(flow.ones(100_000), 0.3, True)
    assert abs((kept.numpy() == 0).mean() - 0.3) < 0.01
