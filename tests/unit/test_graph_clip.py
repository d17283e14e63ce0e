"""`nn.Graph.add_optimizer(..., clip_grad_max_norm=)`: the gradients of all the optimizer's
parameters clipped together by their total norm before the update, as
`clip_grad_norm_` between an eager backward and step; with gradient accumulation once, on the
sum of the micro-batches' gradients."""

from __future__ import annotations

import numpy as np
import pytest

import tideflow as flow
from tideflow.nn.utils import clip_grad_norm_

rng = np.random.default_rng(0)
X = flow.tensor(rng.standard_normal((8, 6)).astype(np.float32))
Y = flow.tensor(rng.standard_normal((8, 3)).astype(np.float32))
MAX_NORM = 0.05  # well below the gradients' norm (checked); SGD, which is not scale-free


def mlp():
    flow.manual_seed(0)
    return flow.nn.Sequential(flow.nn.Linear(6, 8), flow.nn.Tanh(), flow.nn.Linear(8, 3))


def loss_of(model, x, y):
    return ((model(x) - y) ** 2).mean()


class Clipped(flow.nn.Graph):
    def __init__(self, model, opt, micro_batches=1, **clip):
        super().__init__()
        self.model = model
        self.add_optimizer(opt, **clip)
        self.micro_batches = micro_batches
        if micro_batches > 1:
            self.config.set_gradient_accumulation_steps(micro_batches)

    def build(self, x, y):
        loss = loss_of(self.model, x, y)
        (loss / self.micro_batches).backward()
        return loss


def eager_losses(norm_type, clip=True, steps=3):
    model = mlp()
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_of(model, X, Y)
        loss.backward()
        if clip:
            assert clip_grad_norm_(model.parameters(), MAX_NORM, norm_type).item() > MAX_NORM
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
@pytest.mark.parametrize("micro_batches", [1, 2])
def test_a_graph_clips_like_the_eager_loop(norm_type, micro_batches):
    model = mlp()
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    graph = Clipped(model, opt, micro_batches, clip_grad_max_norm=MAX_NORM,
                    clip_grad_norm_type=norm_type)  # fmt: skip
    got = np.array([graph(X, Y).numpy().mean() for _ in range(3)])
    np.testing.assert_allclose(got, eager_losses(norm_type), atol=1e-6)
    assert not np.allclose(got, eager_losses(norm_type, clip=False), atol=1e-4)


def test_a_graph_without_clipping_leaves_the_gradients():
    model = mlp()
    graph = Clipped(model, flow.optim.SGD(model.parameters(), lr=0.1))
    got = np.array([graph(X, Y).item() for _ in range(3)])
    np.testing.assert_allclose(got, eager_losses(2.0, clip=False), atol=1e-6)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_the_max_norm_must_be_positive(bad):
    model = mlp()
    with pytest.raises(ValueError, match=f"clip_grad_max_norm must be positive, got {bad}"):
        Clipped(model, flow.optim.SGD(model.parameters(), lr=0.1), clip_grad_max_norm=bad)
