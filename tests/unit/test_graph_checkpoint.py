"""Module configs in nn.Graph (`GraphModule`), the scopes they put on traced nodes, and
activation checkpointing: the pass alone (IR before/after, same numbers, lower peak memory)
and whole training runs (checkpointed graph == plain graph == eager)."""

import numpy as np
import pytest

import tideflow as flow
from tideflow import nn
from tideflow.compiler import TensorHolder, Tracer
from tideflow.compiler.ir import BACKWARD, FORWARD, RECOMPUTE, Scope
from tideflow.compiler.passes import plan_memory, recompute_checkpointed
from tideflow.nn.graph import Graph, GraphModule
from tideflow.nn.graph.module_config import GraphModules

from ._graph_support import (
    interpret,
    numpy_kernels,  # noqa: F401 (a fixture)
)

F32 = flow.float32
STEPS = 20
BATCH = 64  # activations outweigh the gradients of the weights, which live to the end


# -- the pass alone ---------------------------------------------------------------------------
def _trace_blocks(n_blocks: int, checkpointed: bool, width: int = 16, dropout: float = 0.0):
    """A residual stack `h = h + tanh(h @ w1) @ w2` (each block in its own scope), its loss
    and backward; the program fetches the loss and every weight's gradient."""
    flow.manual_seed(0)
    weights = {
        f"blocks.{i}.{k}": (flow.randn(width, width) * 0.3).requires_grad_()
        for i in range(n_blocks)
        for k in ("w1", "w2")
    }
    tracer = Tracer()
    for name, w in weights.items():
        tracer.add_variable(name, w, TensorHolder(w))
    with tracer, tracer.scope(Scope()):  # Scope(): build itself
        h = tracer.feed((BATCH, width), F32)
        for i in range(n_blocks):
            scope = Scope(f"blocks.{i}", checkpoint=i if checkpointed else None)
            with tracer.scope(scope):
                inner = (h @ weights[f"blocks.{i}.w1"]).tanh()
                if dropout:
                    inner = nn.functional.dropout(inner, dropout)
                h = h + inner @ weights[f"blocks.{i}.w2"]
        loss = (h * h).mean()
        loss.backward()
    grads = tracer.gradients()
    return tracer.finish([loss, *(grads[name] for name in weights)])


def _feed():
    return np.random.default_rng(1).standard_normal((BATCH, 16)).astype(np.float32)


def _same_numbers(before, after):
    flow.manual_seed(7)  # dropout draws the same masks in both runs
    expected = interpret(before, [_feed()])
    flow.manual_seed(7)
    for a, b in zip(interpret(after, [_feed()]), expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_recompute_clones_each_blocks_forward_before_its_backward():
    before = _trace_blocks(3, checkpointed=True)
    after = recompute_checkpointed(before)
    phases = [(n.scope.module, n.scope.phase, n.op.name) for n in after.nodes if n.scope]
    clones = [(m, op) for m, phase, op in phases if phase == RECOMPUTE]
    # matmul + tanh make the value tanh's and the second matmul's backward read
    assert clones == [(f"blocks.{i}", op) for i in (2, 1, 0) for op in ("matmul", "tanh")]
    # each block's clones come right before the first backward node reading one of them,
    # after the backward of the blocks above it
    nodes = after.nodes
    for k, node in enumerate(nodes):
        if node.scope.phase == RECOMPUTE and nodes[k + 1].scope.phase != RECOMPUTE:
            clone_outputs = {v for n in nodes[k - 1 : k + 1] for v in n.outputs}
            reader = nodes[k + 1]
            assert reader.scope.phase == BACKWARD and reader.scope.module == node.scope.module
            assert clone_outputs & set(reader.inputs)
            above = f"blocks.{int(node.scope.module[-1]) + 1}"
            assert all(n.scope.module != above for n in nodes[k + 1 :])
    # backward reads no value a checkpointed block computed in forward, except its output
    kept = {v for n in before.nodes if n.scope and n.scope.phase == FORWARD for v in n.outputs}
    outputs = {
        n.outputs[0] for n in before.nodes if n.op.name == "add" and n.scope.phase == FORWARD
    }
    read_in_backward = {
        v for n in after.nodes if n.scope and n.scope.phase == BACKWARD for v in n.inputs
    }
    assert read_in_backward & kept <= outputs
    _same_numbers(before, after)


def test_recompute_lowers_the_peak_of_a_deep_stack():
    plain = plan_memory(_trace_blocks(8, checkpointed=False)).memory.peak_bytes
    before = _trace_blocks(8, checkpointed=True)
    checkpointed = plan_memory(recompute_checkpointed(before)).memory.peak_bytes
    assert plan_memory(before).memory.peak_bytes == plain
    # per block, the tanh activation (BATCH x 16 float32) is no longer kept for backward
    assert checkpointed <= plain - 6 * BATCH * 16 * 4


def test_dropout_masks_are_kept_not_redrawn():
    before = _trace_blocks(2, checkpointed=True, dropout=0.5)
    after = recompute_checkpointed(before)
    recomputed = [n.op.name for n in after.nodes if n.scope and n.scope.phase == RECOMPUTE]
    assert "dropout" not in recomputed and recomputed.count("tanh") == 2
    assert [n.op.name for n in after.nodes].count("dropout") == 2
    _same_numbers(before, after)


def test_programs_without_checkpointed_scopes_are_unchanged():
    program = _trace_blocks(2, checkpointed=False)
    assert recompute_checkpointed(program) is program
    once = recompute_checkpointed(_trace_blocks(2, checkpointed=True))
    assert recompute_checkpointed(once) is once  # backward already reads the clones


# -- scopes on traced nodes -------------------------------------------------------------------
class _Block(nn.Module):
    def __init__(self, width: int = 8, p: float = 0.0) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return x + self.drop(self.fc(x).tanh())


def _stack(n: int = 3, width: int = 8, p: float = 0.0, seed: int = 0) -> nn.Module:
    flow.manual_seed(seed)
    return nn.Sequential(*(_Block(width, p) for _ in range(n)), nn.Linear(width, 1))


def _traced_scopes(model, configure, calls: int = 1) -> list[Scope]:
    """The scopes of the program traced from `calls` calls of `model` and one backward, with
    `configure(graph_modules)` setting configs first."""
    graph_modules = GraphModules()
    graph_modules.proxy(model, "model")
    configure(graph_modules)
    tracer = Tracer()
    with tracer, graph_modules.scopes(tracer, {"model": model}):
        x = tracer.feed((4, 8), F32)
        with tracer.scope(Scope()):
            loss = sum(model(x).sum() for _ in range(calls))
            loss.backward()
    return [n.scope for n in tracer.finish([loss]).nodes]


def _config(graph_modules, model, path):
    return graph_modules.view(model.get_submodule(path), path).config


def test_nodes_carry_their_module_and_backward_nodes_their_forward_nodes_scope():
    model = _stack()
    scopes = _traced_scopes(model, lambda gm: None)
    forward = {(s.module, s.phase) for s in scopes}
    assert {("model.0.fc", FORWARD), ("model.0", FORWARD), ("model.3", FORWARD)} <= forward
    assert {("model.0.fc", BACKWARD), ("model.0", BACKWARD), ("", BACKWARD)} <= forward
    assert ("", FORWARD) in forward  # the loss, computed in build itself
    assert all(s.checkpoint is None and s.stage_id is None for s in scopes)


def test_stages_are_inherited_and_each_call_of_a_checkpointed_module_is_a_segment():
    model = _stack()

    def configure(gm):
        _config(gm, model, "0").set_stage(0)
        _config(gm, model, "1").stage_id = 1
        _config(gm, model, "1.fc").set_stage(2)
        _config(gm, model, "1").activation_checkpointing = True
        _config(gm, model, "1.fc").activation_checkpointing = True  # inside a segment already

    scopes = _traced_scopes(model, configure, calls=2)
    stages = {(s.module, s.stage_id) for s in scopes}
    assert {("model.0", 0), ("model.0.fc", 0), ("model.1", 1), ("model.1.fc", 2)} <= stages
    assert ("model.2", None) in stages
    segments = {s.module: set() for s in scopes}
    for s in scopes:
        segments[s.module].add(s.checkpoint)
    assert segments["model.1"] == segments["model.1.fc"] == {0, 1}  # one per call of model.1
    assert segments["model.0"] == segments["model.2"] == {None}


# -- the GraphModule API ------------------------------------------------------------------------
class _TrainGraph(Graph):
    def __init__(self, model, optimizer, checkpoint=(), accumulation: int = 1):
        super().__init__()
        self.model = model
        self.add_optimizer(optimizer)
        for i in checkpoint:
            self.model[i].to(GraphModule).config.activation_checkpointing = True
        if accumulation > 1:
            self.config.set_gradient_accumulation_steps(accumulation)
        self.accumulation = accumulation

    def build(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y) / self.accumulation
        loss.backward()
        return loss


def test_graph_modules_are_proxies_with_a_config():
    model = _stack()

    class Probe(Graph):
        def __init__(self):
            super().__init__()
            self.model = model

    graph = Probe()
    view = graph.model.to(GraphModule)
    assert view.name == "model" and view.module is model
    assert graph.model.to(nn.Module) is model
    assert graph.model[1].fc.to(GraphModule).name == "model.1.fc"
    assert [b.to(GraphModule).name for b in graph.model][:2] == ["model.0", "model.1"]
    assert len(graph.model) == 4 and graph.model[0].fc.weight is model[0].fc.weight
    graph.model[1].config.activation_checkpointing = True  # OneFlow 0.8's spelling
    assert graph.model[1].to(GraphModule).activation_checkpointing  # OneFlow's later one
    graph.model[2].to(GraphModule).set_stage(1)
    assert graph.model[2].config.stage_id == 1
    text = repr(graph)
    assert "(CONFIG:model.1:ModuleConfig(activation_checkpointing=True, stage_id=None))" in text
    assert "(CONFIG:model.2:ModuleConfig(activation_checkpointing=False, stage_id=1))" in text
    assert "CONFIG:model.0:" not in text
    assert repr(graph.model[1].to(GraphModule)) == (
        "GraphModule(model.1: _Block, ModuleConfig(activation_checkpointing=True, stage_id=None))"
    )


def test_graph_module_errors():
    model = _stack()
    with pytest.raises(flow.TideflowError, match=r"_Block.to\(GraphModule\): .* not seen"):
        model[0].to(GraphModule)

    class Probe(Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.gpt = flow.models.GPT(
                flow.models.GPTConfig(vocab_size=8, block_size=4, n_layer=1, n_head=1, n_embd=4)
            )

    graph = Probe()
    config = graph.model[0].to(GraphModule).config
    with pytest.raises(flow.TideflowError, match="no option 'activation_checkpoint'; the opt"):
        config.activation_checkpoint = True
    with pytest.raises(flow.TideflowError, match="GraphModule has no option 'stage'"):
        graph.model[0].to(GraphModule).stage = 1
    with pytest.raises(ValueError, match=r"'model.0': set_stage: stage_id must be .* got -1"):
        config.set_stage(-1)
    with pytest.raises(TypeError, match=r"placement must be a flow\.placement, got str"):
        config.set_stage(0, placement="cpu")
    with pytest.raises(TypeError, match="activation_checkpointing must be a bool, got 1"):
        config.activation_checkpointing = 1
    with pytest.raises(flow.TideflowError, match=r"'gpt' .* has an attribute 'config' of its own"):
        graph.gpt.config  # noqa: B018
    assert graph.gpt.to(nn.Module).config.n_embd == 4


def test_changing_a_config_after_compiling_compiles_again():
    model = _stack(p=0.0)
    graph = _TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1))
    x, y = flow.randn(4, 8), flow.randn(4, 1)
    graph(x, y)
    graph.model[0].to(GraphModule).activation_checkpointing = True
    graph(x, y)
    assert len(graph._plans) == 2
    phases = {n.scope.phase for n in graph._latest.program.nodes if n.scope is not None}
    assert RECOMPUTE in phases


def test_debug_prints_scopes(capsys):
    model = _stack()
    graph = _TrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1), checkpoint=(1,))
    graph.model[2].to(GraphModule).set_stage(1)
    graph.debug(1)
    graph(flow.randn(4, 8), flow.randn(4, 1))
    out = capsys.readouterr().out
    assert "# model.1.fc, checkpoint 0\n" in out
    assert "# model.1.fc, checkpoint 0, backward\n" in out
    assert "# model.1.fc, checkpoint 0, recompute\n" in out
    assert "# model.2.fc, stage 1\n" in out


# -- training: checkpointed graph == plain graph == eager -------------------------------------
def _batches(n: int = STEPS):
    rng = np.random.default_rng(0)
    return [
        (flow.tensor(rng.standard_normal((8, 8)).astype(np.float32)),
         flow.tensor(rng.standard_normal((8, 1)).astype(np.float32)))
        for _ in range(n)
    ]  # fmt: skip


def _eager_losses(model, optimizer, batches, accumulation):
    losses = []
    for step, (x, y) in enumerate(batches):
        flow.manual_seed(step)  # the graph draws its dropout masks from the same seeds
        optimizer.zero_grad()
        size = x.shape[0] // accumulation
        for k in range(accumulation):
            part = slice(k * size, (k + 1) * size)
            loss = nn.functional.mse_loss(model(x[part]), y[part]) / accumulation
            loss.backward()
            losses.append(loss.item())
        optimizer.step()
    return np.array(losses, np.float32)


def _graph_losses(graph, batches):
    losses = []
    for step, (x, y) in enumerate(batches):
        flow.manual_seed(step)
        losses.append(graph(x, y).numpy().reshape(-1))
    return np.concatenate(losses)


@pytest.mark.usefixtures("numpy_kernels")
@pytest.mark.parametrize("accumulation", [1, 4])
def test_checkpointed_mlp_training_equals_plain_graph_and_eager(accumulation):
    batches = _batches()
    models = [_stack(n=4, p=0.2) for _ in range(3)]
    opts = [flow.optim.Adam(m.parameters(), lr=1e-2) for m in models]
    expected = _eager_losses(models[0], opts[0], batches, accumulation)
    plain = _graph_losses(_TrainGraph(models[1], opts[1], (), accumulation), batches)
    graph = _TrainGraph(models[2], opts[2], range(4), accumulation)
    checkpointed = _graph_losses(graph, batches)
    assert RECOMPUTE in {n.scope.phase for n in graph._latest.program.nodes if n.scope}
    np.testing.assert_array_equal(checkpointed, plain)
    np.testing.assert_allclose(checkpointed, expected, rtol=1e-5, atol=1e-6)
    for p, q, r in zip(*(m.parameters() for m in models), strict=True):
        np.testing.assert_array_equal(r.detach().numpy(), q.detach().numpy())
        np.testing.assert_allclose(r.detach().numpy(), p.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("accumulation", [1, 2])
def test_checkpointed_cnn_training_equals_plain_graph_and_eager(accumulation):
    """Convolution blocks with batch norm (running statistics written in forward, not
    recomputed) and dropout after them."""

    def cnn():
        flow.manual_seed(0)
        return nn.Sequential(
            nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU()),
            nn.Sequential(nn.Conv2d(6, 8, 3, padding=1), nn.GELU(), nn.MaxPool2d(2)),
            nn.Flatten(), nn.Dropout(0.2), nn.Linear(8 * 4 * 4, 1),
        )  # fmt: skip

    rng = np.random.default_rng(0)
    batches = [
        (flow.tensor(rng.standard_normal((4, 3, 8, 8)).astype(np.float32)),
         flow.tensor(rng.standard_normal((4, 1)).astype(np.float32)))
        for _ in range(STEPS)
    ]  # fmt: skip
    models = [cnn() for _ in range(3)]
    opts = [flow.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in models]
    expected = _eager_losses(models[0], opts[0], batches, accumulation)
    plain = _graph_losses(_TrainGraph(models[1], opts[1], (), accumulation), batches)
    graph = _TrainGraph(models[2], opts[2], (0, 1), accumulation)
    checkpointed = _graph_losses(graph, batches)
    assert RECOMPUTE in {n.scope.phase for n in graph._latest.program.nodes if n.scope}
    np.testing.assert_array_equal(checkpointed, plain)
    np.testing.assert_allclose(checkpointed, expected, rtol=1e-5, atol=1e-6)
    states = [m.state_dict() for m in models]
    for key, value in states[2].items():  # weights and batch norm's running statistics
        np.testing.assert_array_equal(value.numpy(), states[1][key].numpy())
        np.testing.assert_allclose(value.numpy(), states[0][key].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.usefixtures("numpy_kernels")
@pytest.mark.parametrize("accumulation", [1, 2])
def test_checkpointed_gpt_training_equals_plain_graph_and_eager(accumulation):
    config = flow.models.GPTConfig(
        vocab_size=16, block_size=8, n_layer=3, n_head=2, n_embd=16, dropout=0.1
    )

    def gpt():
        flow.manual_seed(0)
        return flow.models.GPT(config)

    class GPTStep(Graph):
        def __init__(self, model, checkpoint: bool):
            super().__init__()
            self.model = model
            self.add_optimizer(flow.optim.AdamW(model.parameter_groups(0.1), lr=1e-3))
            if accumulation > 1:
                self.config.set_gradient_accumulation_steps(accumulation)
            for block in self.model.transformer.h:
                block.to(GraphModule).activation_checkpointing = checkpoint

        def build(self, idx, targets):
            _, loss = self.model(idx, targets)
            (loss / accumulation).backward()
            return loss

    rng = np.random.default_rng(0)
    batches = [
        tuple(flow.tensor(rng.integers(0, 16, (4, 8))) for _ in range(2)) for _ in range(STEPS)
    ]
    eager_model = gpt()
    eager_opt = flow.optim.AdamW(eager_model.parameter_groups(0.1), lr=1e-3)
    expected = []
    for step, (idx, targets) in enumerate(batches):
        flow.manual_seed(step)
        eager_opt.zero_grad()
        size = 4 // accumulation
        for k in range(accumulation):
            part = slice(k * size, (k + 1) * size)
            _, loss = eager_model(idx[part], targets[part])
            (loss / accumulation).backward()
            expected.append(loss.item())
        eager_opt.step()
    plain_graph, graph = GPTStep(gpt(), checkpoint=False), GPTStep(gpt(), checkpoint=True)
    plain = _graph_losses(plain_graph, batches)
    checkpointed = _graph_losses(graph, batches)
    plan = graph._latest.program
    assert plan.memory.peak_bytes < plain_graph._latest.program.memory.peak_bytes
    np.testing.assert_array_equal(checkpointed, plain)
    np.testing.assert_allclose(checkpointed, expected, rtol=1e-5, atol=1e-6)
    for p, q in zip(graph.model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
