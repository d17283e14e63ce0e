"""nn.Graph over global tensors in one process (1-rank placements): graph training equals
eager global training, outputs keep their layout and stream, parameters made from global
tensors stay global, the layout is part of the input signature, and debug shows the layout
of values and the boxing the trace recorded. Real multi-rank runs: tests/dist."""

import copy
import itertools

import numpy as np
import pytest

import tideflow as flow
import tideflow.parallel as par
from tideflow.framework.errors import TideflowError
from tideflow.models import GPT, GPTConfig

S = par.sbp
ONE = par.placement("cpu", [0])
GRID = par.placement("cpu", [[0]])
SPLIT = S.split(0)


pytestmark = pytest.mark.usefixtures("local_dispatch")


def _mlp():
    flow.manual_seed(0)
    return flow.nn.Sequential(flow.nn.Linear(4, 6), flow.nn.Tanh(), flow.nn.Linear(6, 3))


class TrainGraph(flow.nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


def _batches(n=4, where=ONE, sbp=SPLIT):
    rng = np.random.default_rng(0)
    return [
        (
            flow.tensor(rng.standard_normal((8, 4)).astype(np.float32)).to_global(where, sbp),
            flow.tensor(rng.standard_normal((8, 3)).astype(np.float32)).to_global(where, sbp),
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize("where", [ONE, GRID], ids=["1-d", "2-d"])
def test_graph_training_equals_eager_global_training(where):
    data_sbp = (S.split(0),) * where.ndim
    eager_model = par.module_to_global(_mlp(), where, (S.broadcast,) * where.ndim)
    graph_model = copy.deepcopy(eager_model)
    eager_opt = flow.optim.Adam(eager_model.parameters(), lr=0.01)
    graph = TrainGraph(graph_model, flow.optim.Adam(graph_model.parameters(), lr=0.01))
    for x, y in _batches(where=where, sbp=data_sbp):
        loss = graph(x, y)
        want = ((eager_model(x) - y) ** 2).mean()
        eager_opt.zero_grad()
        want.backward()
        eager_opt.step()
        assert loss.is_global and loss.placement == where and loss.sbp == want.sbp
        np.testing.assert_allclose(loss.numpy(), want.detach().numpy(), rtol=1e-6)
    for p, q in zip(graph_model.parameters(), eager_model.parameters(), strict=True):
        assert p.is_global and p.sbp == q.sbp
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6)


def test_global_outputs_stream_and_keep_their_layout():
    model = par.module_to_global(_mlp().eval(), ONE, S.broadcast)

    class Forward(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x), x.to_global(sbp=S.broadcast)

    x, _ = _batches(1)[0]
    out, whole = Forward()(x)
    assert type(out).__name__ == "PendingGlobalTensor"  # the call did not wait for the step
    assert out.shape == (8, 3) and out.sbp == (S.split(0),) and whole.sbp == (S.broadcast,)
    with flow.no_grad():
        want = model(x)
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6)
    assert type(out) is par.GlobalTensor
    np.testing.assert_array_equal(whole.numpy(), x.numpy())


def test_a_parameter_of_a_global_tensor_is_global():
    weight = flow.randn(3, 4).to_global(ONE, S.split(0))
    param = flow.nn.Parameter(weight)
    assert param.is_global and param.sbp == (S.split(0),) and param.shape == (3, 4)
    assert isinstance(param, flow.nn.Parameter) and param.requires_grad
    layer = flow.nn.Linear(4, 3)
    layer.weight = flow.nn.Parameter(weight)
    layer.bias = flow.nn.Parameter(flow.zeros(3).to_global(ONE, S.split(0)))
    graph = TrainGraph(layer, flow.optim.SGD(layer.parameters(), lr=0.1))
    eager = copy.deepcopy(layer)
    x, y = _batches(1, sbp=S.broadcast)[0]
    graph(x, y)
    loss = ((eager(x) - y) ** 2).mean()
    loss.backward()
    with flow.no_grad():
        want = eager.weight - 0.1 * eager.weight.grad
    assert layer.weight.is_global and layer.weight.sbp == (S.split(0),)
    np.testing.assert_allclose(layer.weight.detach().numpy(), want.numpy(), rtol=1e-6)


def test_the_layout_of_inputs_is_part_of_the_signature():
    model = par.module_to_global(_mlp(), ONE, S.broadcast)
    graph = TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1))
    (x, y), (bx, by) = _batches(1)[0], _batches(1, sbp=S.broadcast)[0]
    graph(x, y)
    graph(bx, by)
    graph(x, y)
    assert len(graph._plans) == 2


def test_debug_shows_layouts_and_boxing(capsys):
    model = par.module_to_global(_mlp(), ONE, S.broadcast)

    class Gathering(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x.to_global(sbp=S.broadcast))

    graph = Gathering()
    graph.debug(1)
    graph(_batches(1)[0][0])
    text = capsys.readouterr().out
    assert "float32[8, 4] on [0] (split(dim=0),) = feed 0" in text
    assert "variable model.0.weight" in text and "on [0] (broadcast,)" in text
    assert "boxing(%" in text and "S(0)->B over ranks [0] (graph)" in text


def test_a_stage_moves_its_inputs_to_its_placement():
    model = _mlp()
    par.module_to_global(model[:2], ONE, S.broadcast)
    par.module_to_global(model[2:], GRID, (S.broadcast, S.broadcast))

    class Staged(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.model[2].to(flow.nn.graph.GraphModule).set_stage(1, GRID)

        def build(self, x):
            return self.model(x)

    x = _batches(1)[0][0]
    out = Staged()(x)
    assert out.placement == GRID
    with flow.no_grad():
        want = model[2](model[:2](x).to_global(placement=GRID, sbp=(S.broadcast, S.broadcast)))
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6)


def test_a_local_input_to_a_global_model_names_the_op():
    model = par.module_to_global(_mlp(), ONE, S.broadcast)
    graph = TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(
        TideflowError, match=r"linear: operand 0 is a local tensor \(shape \[8, 4\]"
    ):
        graph(flow.randn(8, 4), flow.randn(8, 3))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # float16 overflows on purpose
def test_loss_scaling_of_global_parameters_equals_a_local_graph():
    """Skipped steps, backoff and growth as a local graph's; in a world of one the ranks
    have nothing to agree on, so the plan has no collective."""
    results = []
    for where in (None, ONE):
        model = _mlp() if where is None else par.module_to_global(_mlp(), where, S.broadcast)
        graph = TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1))
        graph.config.enable_amp(True, dtype=flow.float16)
        scaler = flow.amp.GradScaler(init_scale=2.0**20, growth_interval=2)
        graph.set_grad_scaler(scaler)
        steps = []
        for x, y in _batches(6, where or ONE):
            if where is None:
                x, y = x.to_local(), y.to_local()
            loss = graph(x, y)
            steps.append((loss.numpy().item(), scaler.get_scale()))
        assert "allreduce" not in {n.op.name for n in graph._latest.program.nodes}
        results.append((steps, [p.detach().numpy() for p in model.parameters()]))
    (local_steps, local_weights), (steps, weights) = results
    assert steps == local_steps
    changes = list(itertools.pairwise([2.0**20] + [s for _, s in steps]))
    assert any(b < a for a, b in changes) and any(b > a for a, b in changes)  # backoff, growth
    for got, want in zip(weights, local_weights, strict=True):
        np.testing.assert_array_equal(got, want)


class _GPTGraph(flow.nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.add_optimizer(flow.optim.AdamW(model.parameters(), lr=1e-2))
        self.config.enable_amp(True, dtype=flow.bfloat16)

    def build(self, idx, targets):
        _, loss = self.model(idx, targets)
        loss.backward()
        return loss


def test_autocast_casts_global_operands_before_their_layout_is_chosen():
    """A bfloat16 GPT graph over global tensors equals the local graph: autocast (entered in
    build, above the global mode) casts the logical operands, so attention's matmul of a
    bfloat16 and a float32 tensor is never seen by the global mode."""
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16)
    tokens = np.random.default_rng(0).integers(0, 11, (3, 4, 9))
    losses = []
    for where in (None, ONE):
        flow.manual_seed(0)
        model = GPT(config)
        if where is not None:
            model = par.module_to_global(model, where, S.broadcast)
        graph = _GPTGraph(model)
        batches = [(flow.tensor(t[:, :-1]), flow.tensor(t[:, 1:])) for t in tokens]
        if where is not None:
            batches = [tuple(a.to_global(where, SPLIT) for a in b) for b in batches]
        losses.append([graph(*b).numpy().item() for b in batches])
    assert losses[0] == losses[1]
