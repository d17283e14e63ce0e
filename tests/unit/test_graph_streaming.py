"""Streaming graph calls: a call returns once its step is started, with outputs that wait for
it on first use; eager code touching the graph's variables waits for the steps in flight; a
data source feeds the calls from a DataLoader, loading ahead while the plan computes."""

import pickle
import threading
import time

import numpy as np
import pytest

import tideflow as flow
from tideflow import nn
from tideflow.framework.registry import get_op, kernel_for, out_kernel_for
from tideflow.nn.graph import Graph
from tideflow.nn.graph.pending import PendingTensor
from tideflow.runtime import SourceExhausted, TaskError
from tideflow.utils.data import DataLoader, TensorDataset


class Forward(Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x)


class Square(Graph):
    def build(self, x):
        return flow.matmul(x, x)


class Train(Graph):
    def __init__(self, model, optimizer):
        super().__init__()
        self.model = model
        self.loss_fn = nn.MSELoss()
        self.add_optimizer(optimizer)

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


def _mlp(seed: int = 0) -> nn.Module:
    flow.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _data(n: int, seed: int = 0) -> tuple[flow.Tensor, flow.Tensor]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = rng.standard_normal((n, 3)).astype(np.float32)
    return flow.tensor(x), flow.tensor(y)


class _Gate:
    """Makes matmul's kernel wait for `open()` (and say when it started), or sleep."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.opened.set()
        self.delay = 0.0

    def close(self) -> None:
        self.entered.clear()
        self.opened.clear()

    def open(self) -> None:
        self.opened.set()

    def wrap(self, kernel):
        def gated(*args, **kwargs):
            self.entered.set()
            assert self.opened.wait(timeout=10)
            if self.delay:
                time.sleep(self.delay)
            return kernel(*args, **kwargs)

        return gated


@pytest.fixture
def gate(monkeypatch):
    """Compile graphs inside the test: their plans call the gated kernel (and its out
    variant, which plans call from their second run on)."""
    gate = _Gate()
    matmul = get_op("matmul")
    monkeypatch.setattr(matmul, "chosen", {"cpu": gate.wrap(kernel_for(matmul))})
    out_kernel = gate.wrap(out_kernel_for(matmul))
    monkeypatch.setattr(matmul, "out_kernels", {"cpu": out_kernel})
    yield gate
    gate.open()


def test_a_call_returns_before_its_step_finishes(gate):
    x = flow.tensor(np.arange(9, dtype=np.float32).reshape(3, 3))
    graph = Square()
    gate.close()
    out = graph(x)
    assert gate.entered.wait(timeout=10)  # the step runs, blocked in the kernel, and yet:
    assert type(out) is PendingTensor
    assert out.shape == (3, 3) and out.size(1) == 3 and out.ndim == 2  # metadata: no wait
    assert out.dtype == flow.float32 and out.numel() == 9
    assert not out.requires_grad and not out.is_global
    gate.open()
    np.testing.assert_array_equal(out.numpy(), x.numpy() @ x.numpy())
    assert type(out) is flow.Tensor  # the first use made it a plain tensor


def test_streamed_calls_equal_eager():
    model = _mlp()
    graph = Forward(model)
    batches = [_data(4, seed)[0] for seed in range(10)]
    outputs = [graph(x) for x in batches]  # not read until all are started
    for x, out in zip(batches, outputs, strict=True):
        np.testing.assert_allclose(out.numpy(), model(x).detach().numpy(), rtol=1e-6)


def test_calls_on_the_same_inputs_stream(gate):
    """The graph holds its inputs for the run reading them; the next call with the same
    tensors (a benchmark loop) starts without waiting for that run."""
    model = _mlp()
    graph = Train(model, flow.optim.SGD(model.parameters(), lr=0.1))
    x, y = _data(4)
    graph(x, y).numpy()  # compiled
    gate.close()
    first = graph(x, y)
    assert gate.entered.wait(timeout=10)
    started = threading.Thread(target=lambda: graph(x, y))
    started.start()
    started.join(timeout=10)
    assert not started.is_alive()  # returned while the first step is blocked
    gate.open()
    first.numpy()


def test_writing_the_next_batch_into_an_input_waits_for_the_step_reading_it(gate):
    x = flow.tensor(np.arange(9, dtype=np.float32).reshape(3, 3))
    first = x.numpy().copy()
    graph = Square()
    graph(x).numpy()  # compiled
    gate.close()
    out = graph(x)
    assert gate.entered.wait(timeout=10)  # the step is running, reading x
    writer = threading.Thread(target=lambda: x.copy_(flow.ones(3, 3)))
    writer.start()
    writer.join(timeout=0.2)
    assert writer.is_alive()  # the write waits for the step
    gate.open()
    writer.join(timeout=10)
    np.testing.assert_array_equal(out.numpy(), first @ first)
    np.testing.assert_array_equal(graph(x).numpy(), np.full((3, 3), 3.0, np.float32))


def test_pending_outputs_feed_eager_ops_the_next_call_and_pickle():
    graph = Forward(_mlp())
    x = flow.randn(4, 6)
    expected = graph(x).numpy()
    np.testing.assert_allclose((graph(x) * 2 + 1).numpy(), expected * 2 + 1, rtol=1e-6)
    chained = Forward(nn.Linear(3, 6))
    again = chained.model(flow.tensor(expected)).detach().numpy()
    np.testing.assert_allclose(chained(graph(x)).numpy(), again, rtol=1e-6)
    assert repr(graph(x)) == repr(flow.tensor(expected))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(graph(x))).numpy(), expected)
    assert graph(x)[1:3].shape == (2, 3)
    assert graph(x).sum().item() == pytest.approx(float(expected.sum()), rel=1e-5)


def test_a_failing_step_raises_at_first_use_and_the_graph_recovers():
    table = nn.Embedding(4, 2)
    graph = Forward(table)
    bad = graph(flow.tensor([1, 9]))  # out of range: the call itself returns
    assert bad.shape == (2, 2)
    with pytest.raises(TaskError, match=r"task 'embedding_\d+' failed in iteration 0"):
        bad.numpy()
    with pytest.raises(TaskError, match=r"embedding"):  # the same error: no data, ever
        bad + 1
    good = graph(flow.tensor([1, 3]))  # already raised: this call runs on a fresh executor
    np.testing.assert_array_equal(good.numpy(), table.weight[[1, 3]].detach().numpy())


def test_an_unread_failure_is_raised_by_the_next_call():
    table = nn.Embedding(4, 2)
    graph = Forward(table)
    bad = graph(flow.tensor([9]))
    with pytest.raises(TaskError, match=r"task 'embedding_\d+' failed"):
        for _ in range(100):  # the failure becomes known to a later call
            graph(flow.tensor([1]))
            time.sleep(0.01)
    with pytest.raises(TaskError):
        bad.numpy()
    np.testing.assert_array_equal(
        graph(flow.tensor([2])).numpy(), table.weight[[2]].detach().numpy()
    )


def test_eager_code_after_a_call_sees_the_updated_weights():
    graph_model, eager_model = _mlp(), _mlp()
    graph_opt = flow.optim.Adam(graph_model.parameters(), lr=0.01)
    eager_opt = flow.optim.Adam(eager_model.parameters(), lr=0.01)
    graph = Train(graph_model, graph_opt)
    for step in range(5):
        x, y = _data(8, step)
        graph(x, y)  # the loss is never read
        eager_opt.zero_grad()
        nn.MSELoss()(eager_model(x), y).backward()
        eager_opt.step()
        for p, q in zip(graph_model.parameters(), eager_model.parameters(), strict=True):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5)
            assert type(p) is nn.Parameter
    theirs = eager_opt.state_dict()["state"]
    for key, state in graph_opt.state_dict()["state"].items():
        np.testing.assert_allclose(state["exp_avg"].numpy(), theirs[key]["exp_avg"].numpy(),
                                   rtol=1e-5, atol=1e-8)  # fmt: skip


def test_eager_reads_of_parameters_wait_for_the_step_in_flight(gate):
    flow.manual_seed(0)
    model, reference = nn.Linear(3, 3), nn.Linear(3, 3)
    reference.load_state_dict(model.state_dict())
    graph = Train(model, flow.optim.SGD(model.parameters(), lr=0.1))
    x, y = flow.randn(4, 3), flow.randn(4, 3)
    graph(x, y).numpy()  # compiled and one step done
    gate.close()
    graph(x, y)
    assert gate.entered.wait(timeout=10)  # step 2 is blocked before its update
    assert model.weight.shape == (3, 3)  # metadata does not wait
    seen = []
    reader = threading.Thread(target=lambda: seen.append(model.weight.detach().numpy().copy()))
    reader.start()
    reader.join(timeout=0.2)
    assert reader.is_alive() and not seen  # waiting for the step
    gate.open()
    reader.join(timeout=10)
    opt = flow.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        nn.MSELoss()(reference(x), y).backward()
        opt.step()
    np.testing.assert_allclose(seen[0], reference.weight.detach().numpy(), rtol=1e-5)


def test_a_graph_sharing_parameters_waits_for_another_graphs_steps():
    model = _mlp()
    train = Train(model, flow.optim.SGD(model.parameters(), lr=0.1))
    infer = Forward(model)
    x, y = _data(8)
    for _ in range(3):
        train(x, y)
        out = infer(x)  # must read the weights after the training step
        np.testing.assert_allclose(out.numpy(), model(x).detach().numpy(), rtol=1e-6)


# -- data source ------------------------------------------------------------------------------
def test_training_from_a_data_source_equals_eager_training():
    x, y = _data(160)
    loader = DataLoader(TensorDataset(x, y), batch_size=8)
    graph_model, eager_model = _mlp(), _mlp()
    graph = Train(graph_model, flow.optim.SGD(graph_model.parameters(), lr=0.05, momentum=0.9))
    eager_opt = flow.optim.SGD(eager_model.parameters(), lr=0.05, momentum=0.9)
    graph.set_data_source(loader)
    losses = [graph() for _ in range(len(loader))]  # 20 steps, read afterwards
    for (bx, by), loss in zip(loader, losses, strict=True):
        eager_opt.zero_grad()
        expected = nn.MSELoss()(eager_model(bx), by)
        expected.backward()
        eager_opt.step()
        assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    for p, q in zip(graph_model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_an_ended_data_source_raises_and_the_next_call_starts_a_new_pass():
    model = _mlp()
    graph = Forward(model)
    x, _ = _data(12)
    graph.set_data_source(DataLoader(TensorDataset(x), batch_size=4))
    first = [graph().numpy() for _ in range(3)]
    with pytest.raises(SourceExhausted, match=rf"nn.Graph {graph.name}: .* ended after 3 batch"):
        graph()
    np.testing.assert_array_equal(graph().numpy(), first[0])  # the next epoch
    graph.set_data_source(None)
    np.testing.assert_allclose(graph(x).numpy(), model(x).detach().numpy(), rtol=1e-6)


def test_data_source_batches_of_another_shape_raise_a_clear_error():
    graph = Forward(_mlp())
    x, _ = _data(10)
    graph.set_data_source(DataLoader(TensorDataset(x), batch_size=4))  # last batch has 2 rows
    graph().numpy()
    graph().numpy()
    message = r"batch 2 of the data source holds \[2, 6\] .*float32.*compiled for \[4, 6\]"
    with pytest.raises(TaskError, match=message + ".*drop_last=True"):
        graph().numpy()


def test_an_empty_data_source_raises():
    graph = Forward(_mlp())
    graph.set_data_source([])
    with pytest.raises(SourceExhausted, match="data source is empty"):
        graph()


def test_a_slow_loader_overlaps_with_compute(gate):
    load, compute, steps = 0.05, 0.05, 8
    x = flow.randn(4, 4)

    def slow_batches():
        for _ in range(steps):
            time.sleep(load)
            yield (x,)

    graph = Square()
    graph(x).numpy()  # compile outside the timing
    gate.delay = compute
    graph.set_data_source(slow_batches())
    start = time.perf_counter()
    for _ in range(steps):
        graph().numpy()  # each output read before the next call
    elapsed = time.perf_counter() - start
    assert elapsed < 0.75 * steps * (load + compute), elapsed
