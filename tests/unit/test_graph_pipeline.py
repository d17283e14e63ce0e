"""Pipeline scheduling in one process: the 1F1B order of a stage's micro-batches, the pass
that puts a traced program in that order, and the timeline of a step. Stages on real ranks:
tests/dist/workers/graph_pipeline.py."""

import itertools
import json

import numpy as np
import pytest

import tideflow as flow
import tideflow.nn.graph.compiled as compiled
from tideflow.compiler.ir import FORWARD
from tideflow.compiler.passes.pipeline import one_forward_one_backward, schedule_micro_batches
from tideflow.nn.graph import Timeline


@pytest.mark.parametrize(("stages", "micro_batches"), [(2, 1), (2, 4), (4, 2), (4, 8), (3, 3)])
def test_1f1b_runs_each_block_once_and_bounds_the_activations_held(stages, micro_batches):
    for stage in range(stages):
        order = one_forward_one_backward(stage, micro_batches, stages)
        assert sorted(order) == sorted(itertools.product("BF", range(micro_batches)))
        held = 0
        for phase, k in order:
            if phase == "B":
                assert order.index(("F", k)) < order.index(("B", k))
            held += 1 if phase == "F" else -1
            assert held <= stages - stage  # micro-batches whose activations wait for backward
    last = one_forward_one_backward(stages - 1, micro_batches, stages)
    assert last == [(p, k) for k in range(micro_batches) for p in "FB"]


def _traced_program(steps: int):
    """The program traced from a local graph with gradient accumulation."""
    flow.manual_seed(0)
    model = flow.nn.Sequential(flow.nn.Linear(3, 4), flow.nn.Tanh(), flow.nn.Linear(4, 2))

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(flow.optim.SGD(model.parameters(), lr=0.1))
            self.config.set_gradient_accumulation_steps(steps)

        def build(self, x):
            loss = self.model(x).square().mean()
            loss.backward()
            return loss

    traced = []
    run_passes = compiled.run_passes
    try:
        compiled.run_passes = lambda program, *a, **k: traced.append(program) or program
        Train()(flow.randn(4 * steps, 3))
    finally:
        compiled.run_passes = run_passes
    return traced[0]


def _blocks(program) -> list:
    """The (phase, micro-batch) of each run of nodes, in program order."""
    out = []
    for node in program.nodes:
        scope = node.scope
        if scope is None or scope.micro_batch is None:
            continue
        block = ("F" if scope.phase == FORWARD else "B", scope.micro_batch)
        if not out or out[-1] != block:
            out.append(block)
    return out


def test_the_schedule_pass_orders_a_traced_program_1f1b():
    traced = _traced_program(3)
    assert _blocks(traced) == [(p, k) for k in range(3) for p in "FB"]  # as traced
    scheduled = schedule_micro_batches(traced, stage=0, stages=2)
    assert _blocks(scheduled) == one_forward_one_backward(0, 3, 2)
    assert sorted(n.id for n in scheduled.nodes) == sorted(n.id for n in traced.nodes)
    updates = [n for n in scheduled.nodes if n.step_attrs is not None]
    assert scheduled.nodes[-len(updates) :] == tuple(updates)  # after every micro-batch


def test_timeline_bubble_order_and_chrome_trace(tmp_path):
    timeline = Timeline(
        [
            [("F0", 0.0, 1.0), ("F1", 1.0, 2.0), ("recv", 2.0, 3.0), ("B0", 3.0, 4.0)],
            [("recv", 0.0, 1.0), ("F0", 1.0, 2.0), ("B0", 2.0, 3.0), ("B0", 3.5, 4.0)],
        ]
    )
    assert timeline.span == 4.0
    assert timeline.bubble == pytest.approx(((1 - 3 / 4) + (1 - 2.5 / 4)) / 2)
    assert timeline.order(0) == ["F0", "F1", "B0"] and timeline.order(1) == ["F0", "B0"]
    assert "rank 1: recv 0.00-1000.00" in str(timeline)
    path = tmp_path / "step.json"
    timeline.save(path)
    events = json.loads(path.read_text())["traceEvents"]
    assert len(events) == 8 and {e["pid"] for e in events} == {0, 1}
    assert events[2] == {
        "name": "recv", "cat": "wait", "ph": "X", "ts": 2e6, "dur": 1e6, "pid": 0, "tid": 1
    }  # fmt: skip
    assert timeline.overlap == 0.0  # every message held the compute up


def test_timeline_overlap_is_the_share_of_communication_beside_compute():
    timeline = Timeline(
        [
            [("step", 0.0, 2.0), ("comm", 1.0, 3.0), ("comm", 1.5, 2.5), ("step", 2.8, 4.0)],
            [("step", 0.0, 1.0), ("comm", 1.0, 2.0)],
        ]
    )
    # rank 0: communication over [1, 3], compute beside it over [1, 2] and [2.8, 3];
    # rank 1: communication over [1, 2], none beside it
    assert timeline.overlap == pytest.approx((1.0 + 0.2) / (2.0 + 1.0))
    assert "communication overlapped with compute 40.0%" in str(timeline)


def test_a_graph_without_stages_has_an_empty_timeline():
    graph = flow.nn.Graph()
    graph.build = lambda x: x * 2
    np.testing.assert_array_equal(graph(flow.ones(2)).numpy(), [2.0, 2.0])
    assert graph.timeline().ranks == [[]]
