"""AMP in nn.Graph: graphs traced under autocast compute what eager autocast computes, loss
scaling in the plan follows eager `scaler.scale(loss).backward(); scaler.step(opt);
scaler.update()` step for step (skipped steps, backoff, growth), and the cast/scale fusion
leaves results unchanged."""

import numpy as np
import pytest

import tideflow as flow
from tideflow import nn
from tideflow.compiler.passes import fuse_cast_scale, pipeline
from tideflow.nn.graph import Graph, GraphConfig

from ._graph_support import (
    interpret,
    numpy_kernels,  # noqa: F401 (a fixture)
    op_names,
    trace,
)

F = nn.functional
STEPS = 20
# NOTE: an overflowing step computes inf/NaN on purpose.
overflow_ok = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _mlp(seed: int = 0) -> nn.Module:
    flow.manual_seed(seed)
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 5))  # fmt: skip


def _cnn(seed: int = 0) -> nn.Module:
    flow.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 2 * 2, 5),
    )  # fmt: skip


MODELS = {"mlp": (_mlp, (16, 10)), "cnn": (_cnn, (4, 3, 8, 8))}


def _batches(shape, n: int = STEPS, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [
        (flow.tensor(rng.standard_normal(shape).astype(np.float32)),
         flow.tensor(rng.integers(0, 5, shape[0])))
        for _ in range(n)
    ]  # fmt: skip


def _scaler(kind: str):
    if kind == "static":
        return flow.amp.StaticGradScaler(1024.0)
    return flow.amp.GradScaler(init_scale=2.0**14, growth_interval=3)


class AmpTrainGraph(Graph):
    def __init__(self, model, optimizer, scaler, dtype, accumulation: int = 1):
        super().__init__()
        self.model = model
        self.add_optimizer(optimizer)
        self.set_grad_scaler(scaler)
        self.config.enable_amp(True, dtype=dtype)
        self.config.set_gradient_accumulation_steps(accumulation)
        self.accumulation = accumulation

    def build(self, x, y):
        loss = F.cross_entropy(self.model(x), y) / self.accumulation
        loss.backward()
        return loss


class AmpInferenceGraph(Graph):
    def __init__(self, model, dtype):
        super().__init__()
        self.model = model
        self.config.enable_amp(True, dtype=dtype)

    def build(self, x):
        return self.model(x)


def _eager_step(model, optimizer, scaler, dtype, x, y, accumulation: int = 1) -> list[float]:
    optimizer.zero_grad()
    losses = []
    n = x.shape[0] // accumulation
    for k in range(accumulation):
        with flow.autocast("cpu", dtype=dtype):
            loss = F.cross_entropy(model(x[k * n : (k + 1) * n]), y[k * n : (k + 1) * n])
            loss = loss / accumulation
        scaler.scale(loss).backward()
        losses.append(loss.item())
    scaler.step(optimizer)
    scaler.update()
    return losses


def _pair(make, scaler_kind: str, dtype, accumulation: int = 1):
    """An eager model, optimizer and scaler, and a graph training an identical copy."""
    eager = (make(), _scaler(scaler_kind))
    model, scaler = make(), _scaler(scaler_kind)
    eager_opt = flow.optim.Adam(eager[0].parameters(), lr=3e-3)
    graph_opt = flow.optim.Adam(model.parameters(), lr=3e-3)
    graph = AmpTrainGraph(model, graph_opt, scaler, dtype, accumulation)
    return (eager[0], eager_opt, eager[1]), (model, graph_opt, scaler), graph


def _assert_same_state(eager, ours):
    (e_model, e_opt, e_scaler), (g_model, g_opt, g_scaler) = eager, ours
    theirs = e_model.state_dict()
    for key, value in g_model.state_dict().items():
        np.testing.assert_allclose(value.numpy(), theirs[key].numpy(), rtol=1e-5, atol=1e-6)
    assert g_scaler.state_dict() == e_scaler.state_dict()
    assert [s.get("step") for s in g_opt.state.values()] == [
        s.get("step") for s in e_opt.state.values()
    ]


@overflow_ok  # the scale grows until float16 gradients overflow, then backs off
@pytest.mark.parametrize("scaler_kind", ["dynamic", "static"])
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("dtype", [flow.float16, flow.bfloat16], ids=str)
def test_amp_training_follows_eager(dtype, model, scaler_kind):
    make, shape = MODELS[model]
    eager, ours, graph = _pair(make, scaler_kind, dtype)
    for x, y in _batches(shape):
        expected = _eager_step(*eager, dtype, x, y)
        np.testing.assert_allclose(graph(x, y).item(), expected[0], rtol=1e-3)
        assert ours[2].get_scale() == eager[2].get_scale()
    _assert_same_state(eager, ours)
    program = graph._latest.program
    weights = [v.value for k, v in program.variables.items() if k.endswith(("weight", "bias"))]
    assert weights and all(v.dtype == flow.float32 for v in weights)  # master weights
    low = {"linear", "conv"} & {n.op.name for n in program.nodes if n.outputs
                                and n.outputs[0].dtype == dtype}  # fmt: skip
    assert low, "matmuls/convolutions in the low-precision dtype"


@pytest.mark.usefixtures("numpy_kernels")
@overflow_ok
@pytest.mark.parametrize("dtype", [flow.float16, flow.bfloat16], ids=str)
def test_gpt_amp_training_follows_eager(dtype):
    config = flow.models.GPTConfig(vocab_size=16, block_size=8, n_layer=2, n_head=2, n_embd=16)

    def gpt():
        flow.manual_seed(0)
        return flow.models.GPT(config)

    class GPTStep(Graph):
        def __init__(self, model, optimizer, scaler):
            super().__init__()
            self.model = model
            self.add_optimizer(optimizer)
            self.set_grad_scaler(scaler)
            self.config.enable_amp(True, dtype=dtype)

        def build(self, idx, targets):
            _, loss = self.model(idx, targets)
            loss.backward()
            return loss

    rng = np.random.default_rng(0)
    batches = [
        tuple(flow.tensor(rng.integers(0, 16, (4, 8))) for _ in range(2)) for _ in range(STEPS)
    ]
    eager = (gpt(), None, _scaler("dynamic"))
    eager = (eager[0], flow.optim.AdamW(eager[0].parameters(), lr=3e-3), eager[2])
    model, scaler = gpt(), _scaler("dynamic")
    opt = flow.optim.AdamW(model.parameters(), lr=3e-3)
    graph = GPTStep(model, opt, scaler)
    expected, losses = [], []
    for idx, targets in batches:
        e_model, e_opt, e_scaler = eager
        e_opt.zero_grad()
        with flow.autocast("cpu", dtype=dtype):
            _, loss = e_model(idx, targets)
        e_scaler.scale(loss).backward()
        e_scaler.step(e_opt)
        e_scaler.update()
        expected.append(loss.item())
        losses.append(graph(idx, targets).item())
    assert any(n.op.name == "linear" and n.outputs[0].dtype == dtype
               for n in graph._latest.program.nodes)  # fmt: skip
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    _assert_same_state(eager, (model, opt, scaler))


@overflow_ok
@pytest.mark.parametrize("overflow_at", [0, 3])
def test_overflow_skips_the_step_and_backs_off(overflow_at):
    eager, ours, graph = _pair(_mlp, "dynamic", flow.float16)
    for step, (x, y) in enumerate(_batches((16, 10), n=6)):
        if step == overflow_at:
            x = x * 1e38  # inf activations in float16: every gradient is NaN
        before = [p.detach().numpy().copy() for p in ours[0].parameters()]
        scale = ours[2].get_scale()
        expected = _eager_step(*eager, flow.float16, x, y)
        loss = graph(x, y).item()
        if step == overflow_at:
            assert np.isnan(loss) and np.isnan(expected[0])
            assert ours[2].get_scale() == scale / 2
            assert ours[2].state_dict()["_growth_tracker"] == 0
            for p, q in zip(ours[0].parameters(), before, strict=True):
                np.testing.assert_array_equal(p.detach().numpy(), q)  # the step was skipped
        else:
            np.testing.assert_allclose(loss, expected[0], rtol=1e-3)
        assert ours[2].get_scale() == eager[2].get_scale()
    _assert_same_state(eager, ours)  # Adam's step counts skipped the overflow too


def test_scale_grows_after_growth_interval_and_state_round_trips():
    eager, ours, graph = _pair(_mlp, "dynamic", flow.bfloat16)
    for scaler in (eager[2], ours[2]):
        scaler.load_state_dict({**scaler.state_dict(), "scale": 1.0})
    scales = []
    for x, y in _batches((16, 10), n=7):
        _eager_step(*eager, flow.bfloat16, x, y)
        graph(x, y)
        scales.append(ours[2].get_scale())
        assert scales[-1] == eager[2].get_scale()
    assert scales == [1.0, 1.0, 2.0, 2.0, 2.0, 4.0, 4.0]
    restored = flow.amp.GradScaler()
    restored.load_state_dict(ours[2].state_dict())
    assert restored.state_dict() == ours[2].state_dict() == eager[2].state_dict()
    assert ours[2].state_dict()["_growth_tracker"] == 1


@overflow_ok
def test_gradient_accumulation_with_loss_scaling():
    eager, ours, graph = _pair(_mlp, "dynamic", flow.float16, accumulation=4)
    for step, (x, y) in enumerate(_batches((16, 10), n=6)):
        if step == 2:
            x = flow.cat([x[:12], x[12:] * 1e38])  # one micro-batch overflows: step skipped
        expected = _eager_step(*eager, flow.float16, x, y, accumulation=4)
        losses = graph(x, y).numpy()
        if step != 2:
            np.testing.assert_allclose(losses, expected, rtol=1e-3)
        assert ours[2].get_scale() == eager[2].get_scale()
    assert ours[2].get_scale() == 2.0**14  # backed off at step 2, grew after steps 3 to 5
    _assert_same_state(eager, ours)


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("dtype", [flow.float16, flow.bfloat16], ids=str)
def test_inference_graph_with_amp_equals_eager_autocast(dtype, model):
    make, shape = MODELS[model]
    net = make().eval()
    graph = AmpInferenceGraph(net, dtype)
    for x, _ in _batches(shape, n=2):
        with flow.autocast("cpu", dtype=dtype):
            expected = net(x).detach()
        out = graph(x)
        assert out.dtype == expected.dtype == dtype
        np.testing.assert_array_equal(out.float().numpy(), expected.float().numpy())
    casts = [n for n in graph._latest.program.nodes if n.op.name == "cast"]
    assert {n.attrs["dtype"] for n in casts} == {dtype}  # inputs and float32 weights, once each


# -- fuse_cast_scale ------------------------------------------------------------------------
def _cast_scale_programs():
    def cast_then_scale(g, s):
        return g.float() * s, g.float() * 0.5

    def scale_then_cast(x, s):
        return (x * s).half(), (x * 3.0).to(flow.bfloat16)

    def shared_cast(g, s):
        c = g.float()
        return c * s, c + 1

    half, single, scalar = ((64,), flow.float16), ((64,), flow.float32), ((), flow.float32)
    return [
        (trace(cast_then_scale, half, scalar), ["cast_scale", "cast_scale"]),
        (trace(cast_then_scale, ((64,), flow.bfloat16), scalar), ["cast_scale", "cast_scale"]),
        (trace(scale_then_cast, single, scalar), ["cast_scale", "cast_scale"]),
        (trace(shared_cast, half, scalar), ["cast", "mul", "add"]),
    ]


@pytest.mark.parametrize("case", range(4))
def test_fuse_cast_scale_merges_pairs_and_keeps_results(case):
    program, expected_ops = _cast_scale_programs()[case]
    fused = fuse_cast_scale(program)
    assert op_names(fused) == expected_ops
    rng = np.random.default_rng(case)
    feeds = [
        (rng.standard_normal(v.shape) * 1e3).astype(v.dtype.np) if v.shape else
        np.asarray(rng.uniform(1e-5, 1e-3), v.dtype.np)
        for v in program.feeds
    ]  # fmt: skip
    for a, b in zip(interpret(fused, feeds), interpret(program, feeds), strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_fuse_cast_scale_runs_when_the_config_allows_it():
    config = GraphConfig()
    assert "fuse_cast_scale" not in dict(pipeline(config))
    config.allow_fuse_cast_scale(True)
    names = [name for name, _ in pipeline(config)]
    assert names.index("fuse_cast_scale") < names.index("plan_memory")

    results = []
    for fuse in (False, True):
        model = _mlp()
        graph = AmpTrainGraph(model, flow.optim.SGD(model.parameters(), lr=0.1),
                              flow.amp.GradScaler(), flow.float16)  # fmt: skip
        graph.config.allow_fuse_cast_scale(fuse)
        losses = [graph(x, y).item() for x, y in _batches((16, 10), n=3)]
        fused = op_names(graph._latest.program).count("cast_scale")
        assert fused == (6 if fuse else 0)  # each weight's and bias's gradient unscaling
        results.append((losses, [p.detach().numpy() for p in model.parameters()]))
    assert results[0][0] == results[1][0]
    for a, b in zip(results[0][1], results[1][1], strict=True):
        np.testing.assert_array_equal(a, b)
