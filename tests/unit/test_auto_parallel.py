"""Auto-parallel's layout search (tideflow.parallel.auto) on hand-made problems, against
brute force and hand-priced boxing, and `config.enable_auto_parallel` on one process.
Multi-rank graphs: tests/dist/test_auto_parallel.py."""

import itertools
from dataclasses import dataclass

import numpy as np
import pytest

import tideflow as flow
import tideflow.parallel as par
from tideflow.framework.errors import TideflowError
from tideflow.framework.sbp import B, P, S
from tideflow.parallel._auto_session import Planned
from tideflow.parallel.auto import Node, Problem, Value, search
from tideflow.parallel.cost import Cluster, DeviceProfile, Link, Network

LINK = Link(bandwidth=1e9, latency_s=1e-5)
DEVICE = DeviceProfile("test", 1e10, 1e10, 1e9, max_efficiency=1.0, op_overhead_s=1e-6)
CLUSTER = Cluster(DEVICE, Network(LINK, LINK), gpus_per_node=2, nodes=1)
SHAPE = (64, 64)  # float32: 16 KiB
NBYTES = 4 * 64 * 64


@dataclass(frozen=True)
class Choice:
    ins: tuple
    outs: tuple


LAYOUTS = [(S(0),), (B,), (P,)]


def chain_problem(rng, length: int, requires_grad: bool) -> Problem:
    """A source, then `length` one-input nodes, each able to take and give any layout."""
    values = [Value(SHAPE, 4, requires_grad, (2,), layout=(S(0),))]
    nodes = []
    for v in range(length):
        choices = [Choice((i,), (o,)) for i in LAYOUTS for o in LAYOUTS]
        node = Node("op", f"layer{v}", (2,), choices, greedy=0, inputs=[(0, len(values) - 1)])
        node.compute = list(rng.uniform(0, 1e-4, len(choices)))
        node.memory = list(rng.uniform(0, 1e4, len(choices)))
        node.outputs = [len(values)]
        values.append(Value(SHAPE, 4, requires_grad, (2,), producer=v))
        nodes.append(node)
    return Problem(nodes, values, CLUSTER)


def brute_force(problem: Problem, limit: float = float("inf")) -> float:
    sizes = [range(len(n.choices)) for n in problem.nodes]
    return min(
        problem.total(list(a))
        for a in itertools.product(*sizes)
        if problem.memory(list(a)) <= limit
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("requires_grad", [False, True])
def test_on_a_chain_the_search_finds_the_optimum(seed, requires_grad):
    problem = chain_problem(np.random.default_rng(seed), 3, requires_grad)
    found = search(problem)
    assert found.time == pytest.approx(brute_force(problem), rel=1e-12)
    assert found.time <= found.greedy_time


def test_a_partial_value_read_as_broadcast_costs_an_all_reduce():
    problem = chain_problem(np.random.default_rng(0), 2, requires_grad=False)
    assign = [problem.nodes[0].choices.index(Choice(((S(0),),), ((P,),))), 0]
    consumer = problem.nodes[1].choices[0]
    want = Choice(((B,),), ((B,),))
    reduce = 2 * (2 - 1) * LINK.latency_s + 2 * (2 - 1) / 2 * NBYTES / LINK.bandwidth
    assert problem.edge_time(1, assign, 1, 0, want) == pytest.approx(reduce + 1e-6)
    assert problem.edge_time(1, assign, 1, 0, Choice(((P,),), ((P,),))) == 0
    assert consumer.ins == ((S(0),),)  # P -> S(0): a reduce-scatter, half the all-reduce's bytes
    scatter = LINK.latency_s + NBYTES / 2 / LINK.bandwidth
    assert problem.edge_time(1, assign, 1, 0, consumer) == pytest.approx(scatter + 1e-6)


def test_a_broadcast_parameter_read_by_a_split_computation_all_reduces_its_gradient():
    # data parallelism: the weight's gradient comes back partial and the update needs it whole
    weight = Value(SHAPE, 4, True, (2,), layout=(B,), parameter=True)
    choices = [Choice(((B,),), ((S(0),),)), Choice(((B,),), ((B,),))]
    node = Node("op", "", (2,), choices, 0, [(0, 0)])
    node.compute, node.memory = [0.0, 0.0], [0.0, 0.0]
    problem = Problem([node], [weight], CLUSTER)
    reduce = 2 * LINK.latency_s + NBYTES / LINK.bandwidth + DEVICE.op_overhead_s
    assert problem.total([0]) == pytest.approx(reduce)
    assert problem.total([1]) == 0  # every rank computes the whole: its gradient is whole
    assert problem.fixed_memory == 2 * NBYTES  # the weight and its gradient


def test_the_memory_limit_is_kept_and_costs_time():
    problem = chain_problem(np.random.default_rng(1), 3, requires_grad=True)
    fastest = search(problem)
    leanest = min(
        problem.memory(list(a))
        for a in itertools.product(*[range(len(n.choices)) for n in problem.nodes])
    )
    limit = (leanest + fastest.memory) / 2
    fitted = search(problem, memory_limit=limit)
    assert fitted.memory <= limit < fastest.memory
    assert fitted.time >= fastest.time
    assert fitted.time >= brute_force(problem, limit) - 1e-12
    with pytest.raises(TideflowError, match="no layout found fits the memory limit"):
        search(problem, memory_limit=leanest - 1)


def test_a_build_that_calls_other_ops_than_when_searched_is_refused():
    planned = Planned([("matmul", Choice(((B,), (B,)), ((B,),)))])
    op = type("Op", (), {"name": "add"})()
    with pytest.raises(TideflowError, match="same ops in the same order"):
        planned.choose(op, (), (), (), None, [], None)


class Train(flow.nn.Graph):
    def __init__(self, model, auto: bool, memory_limit=None):
        super().__init__()
        self.model = model
        self.add_optimizer(flow.optim.Adam(model.parameters(), lr=1e-2))
        if auto:
            self.config.enable_auto_parallel(True, cluster=CLUSTER, memory_limit=memory_limit)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


def test_an_auto_parallel_graph_trains_as_the_greedy_one_on_one_rank(capsys):
    where = flow.placement("cpu", ranks=[0])
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((8, 4)).astype(np.float32))
    y = flow.tensor(rng.standard_normal((8, 2)).astype(np.float32))
    losses = []
    for auto in (False, True):
        flow.manual_seed(0)
        model = flow.nn.Sequential(flow.nn.Linear(4, 8), flow.nn.Tanh(), flow.nn.Linear(8, 2))
        graph = Train(par.module_to_global(model, where, flow.sbp.broadcast), auto)
        graph.debug(0)
        xs, ys = (t.to_global(where, flow.sbp.split(0)) for t in (x, y))
        losses.append([graph(xs, ys).numpy() for _ in range(3)])
    np.testing.assert_array_equal(losses[1], losses[0])
    printed = capsys.readouterr().out
    assert "auto_parallel: predicted step" in printed
    assert "model.0: linear" in printed
    assert graph._latest.layout_search.time <= graph._latest.layout_search.greedy_time


def test_a_memory_limit_no_plan_meets_fails_the_compilation():
    where = flow.placement("cpu", ranks=[0])
    model = par.module_to_global(flow.nn.Linear(4, 2), where, flow.sbp.broadcast)
    graph = Train(model, auto=True, memory_limit=16)  # the weight alone needs 32 bytes
    x = flow.zeros(8, 4).to_global(where, flow.sbp.split(0))
    with pytest.raises(TideflowError, match="memory limit of 16 bytes per rank; the leanest needs"):
        graph(x, flow.zeros(8, 2).to_global(where, flow.sbp.split(0)))


class Annotated(Train):
    def build(self, x, y):
        hidden = self.model[0](x).to_global(sbp=flow.sbp.broadcast)  # the user's layout
        loss = ((self.model[1](hidden) - y) ** 2).mean()
        loss.backward()
        return loss


def test_a_to_global_in_build_is_a_constraint_the_search_prices(capsys):
    where = flow.placement("cpu", ranks=[0])
    rng = np.random.default_rng(1)
    x = flow.tensor(rng.standard_normal((8, 4)).astype(np.float32))
    y = flow.tensor(rng.standard_normal((8, 2)).astype(np.float32))
    losses = []
    for auto in (False, True):
        flow.manual_seed(0)
        model = flow.nn.Sequential(flow.nn.Linear(4, 8), flow.nn.Linear(8, 2))
        graph = Annotated(par.module_to_global(model, where, flow.sbp.broadcast), auto)
        graph.debug(0)
        xs, ys = (t.to_global(where, flow.sbp.split(0)) for t in (x, y))
        losses.append([graph(xs, ys).numpy() for _ in range(2)])
    np.testing.assert_array_equal(losses[1], losses[0])
    assert "to_global S(0) -> B" in capsys.readouterr().out
