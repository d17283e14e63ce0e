"""The nn.Graph user API: calling and recompiling, nested inputs and outputs, errors, config,
debug output, printing, state dicts, and recovery after a failing step."""

import re
import threading

import numpy as np
import pytest

import tideflow as flow
from tideflow import nn
from tideflow.compiler.passes import PIPELINE
from tideflow.framework.errors import TideflowError
from tideflow.nn.graph import Graph, GraphConfig
from tideflow.runtime import TaskError


class Forward(Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x)


class Train(Graph):
    def __init__(self, model, optimizer, scheduler=None):
        super().__init__()
        self.model = model
        self.add_optimizer(optimizer, lr_sch=scheduler)

    def build(self, x):
        loss = self.model(x).square().mean()
        loss.backward()
        return loss


def _linear(seed: int = 0) -> nn.Linear:
    flow.manual_seed(seed)
    return nn.Linear(3, 2)


def _compilations(capsys) -> int:
    return capsys.readouterr().out.count("compiled in")


# -- calling --------------------------------------------------------------------------------------
def test_a_new_input_signature_compiles_another_plan(capsys):
    model = _linear()
    graph = Forward(model)
    graph.debug(0)
    for n in (4, 6, 4, 6):
        x = flow.randn(n, 3)
        np.testing.assert_array_equal(graph(x).numpy(), model(x).detach().numpy())
    assert _compilations(capsys) == 2


def test_the_plan_cache_keeps_the_most_recently_used_plans(capsys):
    graph = Forward(_linear())
    graph.config.set_plan_cache_size(1)
    graph.debug(0)
    for n in (4, 6, 4, 4):
        graph(flow.randn(n, 3))
    assert _compilations(capsys) == 3


def test_training_mode_and_grad_mode_are_part_of_the_signature(capsys):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    graph = Forward(model)
    graph.debug(0)
    x = flow.randn(5, 3)
    graph(x)
    model.eval()
    np.testing.assert_array_equal(graph(x).numpy(), model(x).detach().numpy())
    with flow.no_grad():
        graph(x)
    assert _compilations(capsys) == 3


def test_nested_inputs_and_outputs_keep_their_structure():
    class Nested(Graph):
        def build(self, pair, *, scale, table):
            a, b = pair
            return {"sum": (a + b) * scale, "parts": [a, (b, None)], "mean": table["m"].mean()}

    a, b = flow.randn(2), flow.randn(2)
    out = Nested()((a, b), scale=2.0, table={"m": flow.ones(3)})
    assert set(out) == {"sum", "parts", "mean"} and out["parts"][1][1] is None
    np.testing.assert_allclose(out["sum"].numpy(), ((a + b) * 2).numpy())
    np.testing.assert_array_equal(out["parts"][0].numpy(), a.numpy())
    assert out["mean"].item() == 1.0


def test_python_arguments_are_compiled_in(capsys):
    class Scaled(Graph):
        def build(self, x, factor):
            return x * factor

    graph = Scaled()
    graph.debug(0)
    x = flow.ones(2)
    assert graph(x, 2).tolist() == [2.0, 2.0] and graph(x, 3).tolist() == [3.0, 3.0]
    assert graph(x, 2.0).tolist() == [2.0, 2.0]  # a float is another signature than an int
    assert graph(x.double(), 2).dtype is flow.float64
    assert _compilations(capsys) == 4
    with pytest.raises(TypeError, match=r"argument args\[1\] of type ndarray is neither a tensor"):
        graph(x, np.ones(2))


def test_outputs_are_fresh_tensors():
    w = flow.ones(2)

    class Constant(Graph):
        def build(self, x):
            return x, w, flow.zeros(2)

    x = flow.ones(2)
    _, out_w, zeros = Constant()(x)
    assert not np.shares_memory(zeros.numpy(), w.numpy()) and not out_w.requires_grad
    zeros.add_(1)  # cannot change the plan's constant
    assert Constant()(x)[2].tolist() == [0.0, 0.0]


# -- errors ---------------------------------------------------------------------------------------
def test_outputs_must_be_tensors():
    class Bad(Graph):
        def build(self, x):
            return x, {"note": "done"}

    line = Bad.build.__code__.co_firstlineno
    pattern = (
        rf"build\(\) \({re.escape(__file__)}:{line}\) returned output\[1\]\['note'\] = 'done' "
        "of type str; a graph's outputs must be tensors"
    )
    with pytest.raises(TideflowError, match=pattern):
        Bad()(flow.ones(2))


def test_data_dependent_control_flow_names_the_line():
    class Branchy(Graph):
        def build(self, x):
            if x.sum() > 0:
                return x
            return -x

    line = Branchy.build.__code__.co_firstlineno + 1
    with pytest.raises(TideflowError, match=rf"bool\(\).*{re.escape(__file__)}:{line}: if x.sum"):
        Branchy()(flow.ones(2))


def test_misuse_raises_clear_errors():
    class NoInit(Graph):
        def __init__(self):
            self.model = _linear()

    with pytest.raises(AttributeError, match=r"call super\(\).__init__\(\) first"):
        NoInit()
    with pytest.raises(NotImplementedError, match="must define build"):
        Graph()(flow.ones(1))
    with pytest.raises(TypeError, match="expected an optimizer, got Linear"):
        Graph().add_optimizer(_linear())
    model = _linear()
    graph = Train(model, flow.optim.SGD(model.parameters(), lr=0.1))
    graph(flow.ones(4, 3))
    with pytest.raises(TideflowError, match="add_optimizer after the graph was compiled"):
        graph.add_optimizer(flow.optim.SGD(model.parameters(), lr=0.1))

    class Outer(Graph):
        def build(self, x):
            return inner(x)

    inner = Forward(_linear())
    with pytest.raises(TideflowError, match="called inside the build"):
        Outer()(flow.ones(1, 3))


def test_a_failing_step_raises_with_the_task_and_the_graph_recovers():
    table = nn.Embedding(4, 2)
    graph = Forward(table)
    threads = threading.active_count()
    with pytest.raises(TaskError, match=r"task 'embedding_\d+' failed in iteration 0"):
        graph(flow.tensor([1, 9])).numpy()  # out of range: raised when the output is read
    assert threading.active_count() <= threads  # the failed executor is closed
    np.testing.assert_array_equal(
        graph(flow.tensor([1, 3])).numpy(), table.weight[[1, 3]].detach().numpy()
    )


def test_changing_the_optimizer_after_compiling_raises():
    model = _linear()
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    graph = Train(model, opt)
    graph(flow.ones(4, 3))
    opt.param_groups[0]["params"].pop()
    with pytest.raises(TideflowError, match="updates changed since the graph was compiled"):
        graph(flow.ones(4, 3))


# -- config ----------------------------------------------------------------------------------------
def test_config_validates_and_records():
    config = GraphConfig()
    for setter in (config.set_gradient_accumulation_steps, config.set_outputs_buffer_size,
                   config.set_plan_cache_size):  # fmt: skip
        with pytest.raises(ValueError, match="expected a positive integer, got 0"):
            setter(0)
    with pytest.raises(ValueError, match="stage must be 1, 2 or 3"):
        config.enable_zero(True, stage=4)
    with pytest.raises(ValueError, match=r"dtype must be float16 or bfloat16, got tideflow\.int8"):
        config.enable_amp(True, dtype=flow.int8)
    config.allow_fuse_add_to_output(True)
    config.allow_fuse_model_update_ops(True)
    config.set_outputs_buffer_size(3)
    assert repr(config) == (
        "GraphConfig(training=False, gradient_accumulation_steps=1, amp=False, zero=False, "
        "outputs_buffer_size=3, plan_cache_size=8, fuse_add_to_output=True, "
        "fuse_model_update_ops=True)"
    )


@pytest.mark.parametrize("stage", [2, 3])
def test_zero_leaves_a_local_graph_as_it_is(stage):
    model = _linear()
    shape = model.weight.shape
    graph = Train(model, flow.optim.Adam(model.parameters(), lr=0.1))
    graph.config.enable_zero(True, stage=stage)  # no data-parallel axis: nothing to shard
    graph(flow.ones(1, 3))
    assert all(t.shape == p.shape for p, s in graph._optimizers[0][0].state.items()
               for t in s.values() if isinstance(t, flow.Tensor))  # fmt: skip
    assert model.weight.is_local and model.weight.shape == shape
    assert "parameter gather" not in str(graph._latest.program)


def test_outputs_buffer_size_is_the_plan_quota():
    graph = Forward(_linear())
    graph.config.set_outputs_buffer_size(3)
    graph(flow.ones(1, 3))
    assert graph._latest.plan.quota == 3


# -- debug and printing --------------------------------------------------------------------------
def test_debug_prints_the_program_after_each_pass(capsys):
    graph = Forward(_linear())
    graph.debug(1)
    graph(flow.ones(2, 3))
    out = capsys.readouterr().out
    titles = re.findall(r"\] IR (.*):", out)
    assert titles == ["traced from build()", *(f"after {name}" for name, _ in PIPELINE)]
    assert "linear(%" in out and "variable model.weight" in out
    assert re.search(r"compiled in \d+\.\d+ s: 1 traced nodes -> 1 tasks", out)
    assert "memory: peak" in out
    with pytest.raises(ValueError, match="v_level must be an integer >= -1"):
        graph.debug(-2)


def test_repr_shows_the_module_tree_and_compiled_shapes():
    graph = Forward(nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)))
    graph(flow.ones(4, 3))
    text = repr(graph)
    assert text.startswith(f"(GRAPH:{graph.name}:Forward): (\n  (CONFIG:config:GraphConfig(")
    for line in [
        f"(INPUT:_{graph.name}_input.0:tensor(..., size=(4, 3), dtype=tideflow.float32))",
        "(MODULE:model:Sequential()): (",
        "(MODULE:model.0:Linear(in_features=3, out_features=2, bias=True)): (",
        "(PARAMETER:model.0.weight:tensor(..., size=(2, 3), dtype=tideflow.float32, "
        "requires_grad=True)): ()",
        "(BUFFER:model.1.running_mean:tensor(..., size=(2,), dtype=tideflow.float32)): ()",
        f"(OUTPUT:_{graph.name}_output.0:tensor(..., size=(4, 2), dtype=tideflow.float32))",
    ]:
        assert line in text


# -- state -----------------------------------------------------------------------------------------
def test_state_dict_round_trip_reaches_the_compiled_plan():
    model = _linear()
    opt = flow.optim.Adam(model.parameters(), lr=0.1)
    sch = flow.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    graph = Train(model, opt, sch)
    x = flow.randn(4, 3)
    graph(x)
    saved = {
        "model": {k: t.clone() for k, t in graph.state_dict()["model"].items()},
        "_optimizer0": graph.state_dict()["_optimizer0"],
        "_lr_scheduler0": graph.state_dict()["_lr_scheduler0"],
    }
    assert list(graph.state_dict()) == ["model", "_optimizer0", "_lr_scheduler0"]
    first = graph(x).item()
    graph(x)
    graph.load_state_dict(saved)
    assert opt.param_groups[0]["lr"] == 0.05
    assert graph(x).item() == pytest.approx(first, rel=1e-6)  # the same step again
    with pytest.raises(
        TideflowError, match=r"missing keys \['_lr_scheduler0'\], unexpected keys \['extra'\]"
    ):
        graph.load_state_dict(
            {"model": saved["model"], "_optimizer0": saved["_optimizer0"], "extra": 1}
        )


def test_with_dynamic_input_shape_sets_how_many_plans_are_kept():
    class Dynamic(Graph):
        @Graph.with_dynamic_input_shape(size=2)
        def __init__(self):
            super().__init__()
            self.model = nn.Linear(3, 2)

        def build(self, x):
            return self.model(x)

    graph = Dynamic()
    assert graph.config.plan_cache_size == 2
    for rows in (1, 2, 3):
        assert graph(flow.ones(rows, 3)).shape == (rows, 2)
    assert len(graph._plans) == 2  # the least recently used signature was released
