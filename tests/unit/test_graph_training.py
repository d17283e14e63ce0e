"""Graph == eager: inference graphs give eager's outputs, training graphs follow eager
training step for step (same init, same data), and eager code sees the graph's updates."""

import numpy as np
import pytest

import tideflow as flow
from tideflow import nn
from tideflow.nn.graph import Graph

from ._graph_support import numpy_kernels  # noqa: F401 (a fixture)

STEPS = 20


def _mlp(seed: int = 0) -> nn.Module:
    flow.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 5)
    )


def _cnn(seed: int = 0) -> nn.Module:
    flow.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 8, 3), nn.ReLU(), nn.Flatten(), nn.Dropout(0.3), nn.Linear(8 * 2 * 2, 4),
    )  # fmt: skip


def _batches(shape, classes: int, n: int = STEPS, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [
        (flow.tensor(rng.standard_normal(shape).astype(np.float32)),
         flow.tensor(rng.integers(0, classes, shape[0])))
        for _ in range(n)
    ]  # fmt: skip


class InferenceGraph(Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x)


class TrainGraph(Graph):
    def __init__(self, model, optimizer, scheduler=None):
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()
        self.add_optimizer(optimizer, lr_sch=scheduler)

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


def _eager_step(model, optimizer, x, y) -> float:
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


@pytest.mark.parametrize("make, shape", [(_mlp, (16, 10)), (_cnn, (4, 3, 8, 8))])
def test_inference_graph_equals_eager(make, shape):
    model = make().eval()
    graph = InferenceGraph(model)
    for x, _ in _batches(shape, 4, n=3):
        np.testing.assert_array_equal(graph(x).numpy(), model(x).detach().numpy())


OPTIMIZERS = {
    "SGD": lambda ps: flow.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3, nesterov=True),
    "Adam": lambda ps: flow.optim.Adam(ps, lr=3e-3, weight_decay=1e-2, amsgrad=True),
    # host-side schedules per step (NAdam's momentum product, ASGD's rate and average weight)
    "NAdam": lambda ps: flow.optim.NAdam(ps, lr=3e-3, momentum_decay=0.1),
    "ASGD": lambda ps: flow.optim.ASGD(ps, lr=0.05, lambd=0.01, t0=2),
    "Rprop": lambda ps: flow.optim.Rprop(ps, lr=0.01),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_training_graph_follows_eager_training(name):
    eager_model, graph_model = _mlp(), _mlp()
    eager_opt = OPTIMIZERS[name](eager_model.parameters())
    graph_opt = OPTIMIZERS[name](graph_model.parameters())
    eager_sch = flow.optim.lr_scheduler.StepLR(eager_opt, step_size=7, gamma=0.5)
    graph_sch = flow.optim.lr_scheduler.StepLR(graph_opt, step_size=7, gamma=0.5)
    graph = TrainGraph(graph_model, graph_opt, graph_sch)
    for x, y in _batches((16, 10), 5):
        expected = _eager_step(eager_model, eager_opt, x, y)
        eager_sch.step()
        assert graph(x, y).item() == pytest.approx(expected, rel=1e-5, abs=1e-6)
    # eager code sees the graph's parameters, optimizer state and schedule
    ours, theirs = graph_model.state_dict(), eager_model.state_dict()
    for key in theirs:
        np.testing.assert_allclose(ours[key].numpy(), theirs[key].numpy(), rtol=1e-5, atol=1e-6)
    ours, theirs = graph_opt.state_dict(), eager_opt.state_dict()
    assert ours["param_groups"] == theirs["param_groups"]
    for i, state in theirs["state"].items():
        for key, value in state.items():
            got = ours["state"][i][key]
            if isinstance(value, flow.Tensor):
                np.testing.assert_allclose(got.numpy(), value.numpy(), rtol=1e-5, atol=1e-6)
            else:
                assert got == value
    assert all(p.grad is None for p in graph_model.parameters())  # grads stay in the plan


def test_cnn_training_with_batch_norm_and_dropout_follows_eager():
    eager_model, graph_model = _cnn(), _cnn()
    eager_opt = flow.optim.SGD(eager_model.parameters(), lr=0.05, momentum=0.9)
    graph = TrainGraph(graph_model, flow.optim.SGD(graph_model.parameters(), lr=0.05, momentum=0.9))
    for step, (x, y) in enumerate(_batches((4, 3, 8, 8), 4, n=8)):
        flow.manual_seed(step)  # dropout draws the same masks in both
        expected = _eager_step(eager_model, eager_opt, x, y)
        flow.manual_seed(step)
        assert graph(x, y).item() == pytest.approx(expected, rel=1e-5, abs=1e-6)
    theirs = eager_model.state_dict()
    for key, value in graph_model.state_dict().items():  # running statistics included
        np.testing.assert_allclose(value.numpy(), theirs[key].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.usefixtures("numpy_kernels")
def test_gradient_accumulation_splits_the_batch_into_micro_batches():
    steps = 4
    eager_model, graph_model = _mlp(), _mlp()
    eager_opt = flow.optim.Adam(eager_model.parameters(), lr=1e-2)

    class AccumulatingGraph(Graph):
        def __init__(self):
            super().__init__()
            self.model = graph_model
            self.add_optimizer(flow.optim.Adam(graph_model.parameters(), lr=1e-2))
            self.config.set_gradient_accumulation_steps(steps)

        def build(self, x, y):
            logits = self.model(x)
            loss = nn.functional.cross_entropy(logits, y) / steps
            loss.backward()
            return loss, logits

    graph = AccumulatingGraph()
    for x, y in _batches((16, 10), 5, n=5):
        eager_opt.zero_grad()
        losses = []
        for k in range(steps):
            part = slice(4 * k, 4 * k + 4)
            loss = nn.functional.cross_entropy(eager_model(x[part]), y[part]) / steps
            loss.backward()
            losses.append(loss.item())
        eager_opt.step()
        loss, logits = graph(x, y)
        assert loss.shape == (steps,) and logits.shape == (16, 5)
        np.testing.assert_allclose(loss.numpy(), losses, rtol=1e-5, atol=1e-6)
    for p, q in zip(graph_model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_gradient_accumulation_needs_divisible_batches():
    graph = TrainGraph(_mlp(), flow.optim.SGD(_mlp().parameters(), lr=0.1))
    graph.config.set_gradient_accumulation_steps(3)
    x, y = _batches((16, 10), 5, n=1)[0]
    with pytest.raises(
        flow.TideflowError, match=r"3 micro-batches, but input 0 has shape \[16, 10\]"
    ):
        graph(x, y)


def test_eager_changes_are_seen_by_the_graph():
    model = _mlp().eval()
    graph = InferenceGraph(model)
    x, _ = _batches((4, 10), 5, n=1)[0]
    graph(x)
    with flow.no_grad():
        model[0].weight.mul_(0.5)  # in place
    np.testing.assert_array_equal(graph(x).numpy(), model(x).detach().numpy())
    other = _mlp(seed=1)
    model.load_state_dict(other.state_dict(), assign=True)  # new parameter objects
    np.testing.assert_array_equal(graph(x).numpy(), other(x).detach().numpy())


@pytest.mark.torch
def test_training_graph_matches_pytorch():
    torch = pytest.importorskip("torch")
    model = _mlp()
    reference = torch.nn.Sequential(
        torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
        torch.nn.Linear(32, 5),
    )  # fmt: skip
    with torch.no_grad():
        for p, q in zip(reference.parameters(), model.parameters(), strict=True):
            p.copy_(torch.from_numpy(q.detach().numpy().copy()))
    reference_opt = torch.optim.Adam(reference.parameters(), lr=3e-3)
    graph = TrainGraph(model, flow.optim.Adam(model.parameters(), lr=3e-3))
    for x, y in _batches((16, 10), 5):
        reference_opt.zero_grad()
        expected = torch.nn.functional.cross_entropy(
            reference(torch.from_numpy(x.numpy())), torch.from_numpy(y.numpy())
        )
        expected.backward()
        reference_opt.step()
        assert graph(x, y).item() == pytest.approx(expected.item(), rel=1e-4, abs=1e-5)
    for p, q in zip(reference.parameters(), model.parameters(), strict=True):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_gradient_clipping_in_build_follows_eager():
    eager_model, graph_model = _mlp(), _mlp()
    eager_opt = flow.optim.SGD(eager_model.parameters(), lr=0.5)

    class Clipped(Graph):
        def __init__(self):
            super().__init__()
            self.model = graph_model
            self.add_optimizer(flow.optim.SGD(graph_model.parameters(), lr=0.5))

        def build(self, x, y):
            loss = nn.functional.cross_entropy(self.model(x), y)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=0.1)
            nn.utils.clip_grad_value_(self.model.parameters(), 0.02)
            return loss, norm

    graph = Clipped()
    for x, y in _batches((16, 10), 5, n=5):
        eager_opt.zero_grad()
        nn.functional.cross_entropy(eager_model(x), y).backward()
        expected = nn.utils.clip_grad_norm_(eager_model.parameters(), max_norm=0.1)
        nn.utils.clip_grad_value_(eager_model.parameters(), 0.02)
        eager_opt.step()
        _, norm = graph(x, y)
        assert norm.item() == pytest.approx(expected.item(), rel=1e-5)
    for p, q in zip(graph_model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_gpt_training_graph_follows_eager():
    config = flow.models.GPTConfig(vocab_size=32, block_size=8, n_layer=2, n_head=2, n_embd=16)

    def gpt():
        flow.manual_seed(0)
        return flow.models.GPT(config)

    eager_model, graph_model = gpt(), gpt()
    eager_opt = flow.optim.AdamW(eager_model.parameter_groups(0.1), lr=1e-3)

    class GPTStep(Graph):
        def __init__(self):
            super().__init__()
            self.model = graph_model
            self.add_optimizer(flow.optim.AdamW(graph_model.parameter_groups(0.1), lr=1e-3))

        def build(self, idx, targets):
            _, loss = self.model(idx, targets)
            loss.backward()
            return loss

    graph = GPTStep()
    rng = np.random.default_rng(0)
    for _ in range(5):
        idx, targets = (flow.tensor(rng.integers(0, 32, (4, 8))) for _ in range(2))
        eager_opt.zero_grad()
        _, expected = eager_model(idx, targets)
        expected.backward()
        eager_opt.step()
        assert graph(idx, targets).item() == pytest.approx(expected.item(), rel=1e-5)
    for p, q in zip(graph_model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
