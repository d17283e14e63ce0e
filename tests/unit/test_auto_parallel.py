"""Auto-parallel's layout search (tideflow.parallel.auto) on hand-made problems, against
brute force and hand-priced boxing, and `config.enable_auto_parallel` on one process.
Multi-rank graphs: tests/dist/test_auto_parallel.py."""

import itertools
from dataclasses import dataclass, field

import numpy as np
import pytest

import tideflow as flow
import tideflow.parallel as par
from tideflow.framework.errors import TideflowError
from tideflow.framework.sbp import B, P, S
from tideflow.nn.graph.auto_parallel import plan_counts
from tideflow.parallel._auto_session import Planned
from tideflow.parallel.auto import Node, PlanCounts, Problem, Value, _problem, search
from tideflow.parallel.cost import Cluster, DeviceProfile, Link, Network

LINK = Link(bandwidth=1e9, latency_s=1e-5)
DEVICE = DeviceProfile(
    "test", 1e10, 1e10, 1e9, max_efficiency=1.0, node_s=1e-6, task_s=2e-6, switch_s=3e-6
)
CLUSTER = Cluster(DEVICE, Network(LINK, LINK), gpus_per_node=2, nodes=1)
# a collective's node, and the two tasks and two hand-overs of the chain it cuts out
COLLECTIVE = 1e-6 + 2 * (2e-6 + 3e-6)
SHAPE = (64, 64)  # float32: 16 KiB
NBYTES = 4 * 64 * 64


@dataclass(frozen=True)
class Choice:
    ins: tuple
    outs: tuple
    attrs: dict = field(default_factory=dict)


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


def residual_problem(blocks: int) -> Problem:
    """A broadcast source x, a = f(x), then per block a = a + g(a): every node computes in
    S(0) (half the work) or B, its inputs laid out as its output."""
    values = [Value(SHAPE, 4, False, (2,), layout=(B,))]
    nodes = []

    def add_node(name: str, inputs: list) -> int:
        choices = [Choice((layout,) * len(inputs), (layout,)) for layout in ((B,), (S(0),))]
        node = Node(name, name, (2,), choices, greedy=0, inputs=list(enumerate(inputs)))
        node.compute, node.memory = [2e-5, 1e-5], [0.0, 0.0]
        node.outputs = [len(values)]
        values.append(Value(SHAPE, 4, False, (2,), producer=len(nodes)))
        nodes.append(node)
        return len(values) - 1

    stream = add_node("f", [0])
    for _ in range(blocks):
        stream = add_node("add", [stream, add_node("g", [stream])])
    return Problem(nodes, values, CLUSTER)


def test_a_residual_stream_is_split_as_a_whole():
    # splitting one chain or node of the stream alone costs an all-gather (more than the
    # work it halves) where it meets the broadcast rest: only splitting all of it pays
    problem = residual_problem(blocks=2)
    found = search(problem)
    assert found.time == pytest.approx(brute_force(problem), rel=1e-12)
    assert found.time < found.greedy_time
    assert {problem.nodes[v].choices[c].outs for v, c in enumerate(found.assign)} == {((S(0),),)}


def test_a_partial_value_read_as_broadcast_costs_an_all_reduce():
    problem = chain_problem(np.random.default_rng(0), 2, requires_grad=False)
    assign = [problem.nodes[0].choices.index(Choice(((S(0),),), ((P,),))), 0]
    consumer = problem.nodes[1].choices[0]
    want = Choice(((B,),), ((B,),))
    reduce = 2 * (2 - 1) * LINK.latency_s + 2 * (2 - 1) / 2 * NBYTES / LINK.bandwidth
    assert problem.edge_time(1, assign, 1, 0, want) == pytest.approx(reduce + COLLECTIVE)
    assert problem.edge_time(1, assign, 1, 0, Choice(((P,),), ((P,),))) == 0
    assert consumer.ins == ((S(0),),)  # P -> S(0): a reduce-scatter, half the all-reduce's bytes
    scatter = LINK.latency_s + NBYTES / 2 / LINK.bandwidth
    assert problem.edge_time(1, assign, 1, 0, consumer) == pytest.approx(scatter + COLLECTIVE)


def test_a_broadcast_parameters_gradient_is_all_reduced_however_it_is_read():
    # data parallelism: the weight's gradient comes back partial and the update needs it
    # whole; computed whole on every rank, its gradient is still partial (the global mode
    # holds a broadcast value's gradient in the dual layout), so the all-reduce stays
    weight = Value(SHAPE, 4, True, (2,), layout=(B,), parameter=True)
    choices = [Choice(((B,),), ((S(0),),)), Choice(((B,),), ((B,),))]
    node = Node("op", "", (2,), choices, 0, [(0, 0)])
    node.compute, node.memory = [0.0, 0.0], [0.0, 0.0]
    problem = Problem([node], [weight], CLUSTER)
    reduce = 2 * LINK.latency_s + NBYTES / LINK.bandwidth
    assert problem.total([0]) == pytest.approx(reduce + COLLECTIVE)
    assert problem.total([1]) == pytest.approx(reduce + COLLECTIVE)
    assert problem.fixed_memory == 2 * NBYTES  # the weight and its gradient
    # with ranks beyond the cores, each collective also waits for its peers, and its
    # copies run at the rank's half of a core
    crowded = Cluster(DEVICE, Network(LINK, LINK), 2, 1, cores_per_node=1, collective_wait_s=0.5e-3)
    problem = Problem([node], [weight], crowded)
    shared = 2 * LINK.latency_s + NBYTES / (LINK.bandwidth / 2)
    assert problem.total([0]) == pytest.approx(shared + COLLECTIVE + 0.5e-3)


def test_an_all_reduce_in_forward_is_one_in_backward_too():
    # P -> B forward; its gradient, the dual boxing, goes from the dual of B (P) to the dual
    # of P (B): a second all-reduce, where Megatron's replicated gradients need none
    problem = chain_problem(np.random.default_rng(0), 2, requires_grad=True)
    assign = [problem.nodes[0].choices.index(Choice(((S(0),),), ((P,),))), 0]
    reduce = 2 * LINK.latency_s + NBYTES / LINK.bandwidth
    read_whole = Choice(((B,),), ((B,),))
    assert problem.edge_time(1, assign, 1, 0, read_whole) == pytest.approx(
        2 * (reduce + COLLECTIVE)
    )


def test_pipeline_stages_overlap_in_the_lowered_step():
    # two stages (disjoint ranks), 2 micro-batches each: 1F1B takes the slower stage's two
    # micro-batches and the faster one's first, 3e-3 + 3e-3 + 1e-3, where the search sums all
    source = Value(SHAPE, 4, False, (1,), layout=(B,))
    nodes = []
    for ranks, seconds in (((0,), 1e-3), ((1,), 3e-3), ((0,), 1e-3), ((1,), 3e-3)):
        node = Node("op", "", (1,), [Choice(((B,),), ((B,),))], 0, [(0, 0)], ranks=ranks)
        node.compute, node.memory = [seconds + DEVICE.node_s], [0.0]
        nodes.append(node)
    problem = Problem(nodes, [source], CLUSTER, micro_batches=2)
    assert search(problem).time == pytest.approx(8e-3 + 4 * DEVICE.node_s)
    assert problem.work([0] * 4) == pytest.approx(7e-3)
    # two ranks on one core, each priced at half its speed (2 and 6 ms): at a core a rank
    # the critical path is 3.5 ms (0.5 ms, then two 1.5 ms micro-batches), but the one
    # core does both ranks' 1 + 3 ms
    shared = Cluster(DEVICE, Network(LINK, LINK), 2, 1, cores_per_node=1)
    assert Problem(nodes, [source], shared, micro_batches=2).work([0] * 4) == pytest.approx(4e-3)
    one_stage = Problem(nodes[:2], [source], CLUSTER, micro_batches=2)
    nodes[1].ranks = (0, 1)  # overlapping rank sets: no pipeline to overlap
    assert one_stage.work([0, 0]) == pytest.approx(4e-3)


def test_fused_attention_is_priced_tile_by_tile():
    # (batch 2, 4 heads, 64 rows, 16 wide), causal: rows [0, 32) see 32 keys, rows [32, 64)
    # all 64; per tile q @ k^T and p @ v as 8 matrices each, and a cost per score
    shape = (2, 4, 64, 16)
    values = [Value(shape, 4, True, (1,), layout=(B,)) for _ in range(3)]
    values.append(Value(shape, 4, True, (1,), producer=0))
    causal = Choice(((B,),) * 3, ((B,),), {"is_causal": True})
    node = Node("attention", "", (1,), [causal], 0, [(0, 0), (1, 1), (2, 2)])
    node.outputs = [3]
    device = DeviceProfile("d", 1e10, 1e15, 1e9, max_efficiency=1.0, half_size=0.0,
                           gemm_call_s=1e-6, attention_score_s=2e-9,
                           attention_grad_score_s=1e-9)  # fmt: skip
    flops = sum(2 * 8 * rows * keys * 16 * 2 for rows, keys in [(32, 32), (32, 64)])
    scores = 8 * (32 * 32 + 32 * 64)
    forward = flops / 1e10 + 4 * 7 * 1e-6 + scores * 2e-9  # four products of 8 matrices
    backward = 2 * flops / 1e10 + 8 * 7 * 1e-6 + scores * 1e-9  # eight
    assert _problem._compute(node, causal, values, device) == pytest.approx(forward + backward)


def test_a_view_costs_its_nodes_only_unless_its_gradient_is_a_new_buffer():
    values = [Value((64, 64), 4, True, (1,), layout=(B,)), Value((4096,), 4, True, (1,))]
    values += [Value((32, 64), 4, True, (1,)), Value((32, 64), 4, True, (1,))]
    device = DeviceProfile("d", 1e10, 1e9, 1e9, max_efficiency=1.0, half_size=0.0)
    flat = Node("reshape", "", (1,), [Choice(((B,),), ((B,),))], 0, [(0, 0)], outputs=[1])
    assert _problem._compute(flat, flat.choices[0], values, device) == 0
    # split's gradient concatenates its two halves' gradients: both read, the whole written
    halves = Choice(((B,),), ((B,), (B,)))
    split = Node("split", "", (1,), [halves], 0, [(0, 0)], outputs=[2, 3])
    assert _problem._compute(split, halves, values, device) == pytest.approx(2 * 4 * 4096 / 1e9)


def test_a_linear_layer_adds_its_bias_and_sums_its_gradient():
    x, weight, bias = (64, 32), (16, 32), (16,)
    values = [Value(shape, 4, True, (1,), layout=(B,)) for shape in (x, weight, bias)]
    values.append(Value((64, 16), 4, True, (1,)))
    node = Node("linear", "", (1,), [Choice(((B,),) * 3, ((B,),))], 0, [(0, 0), (1, 1), (2, 2)])
    node.outputs = [3]
    device = DeviceProfile("d", 1e10, 1e9, 1e9, max_efficiency=1.0, half_size=0.0)
    # the product is bound by memory: x, the weight and the output move in 14 us
    product = max(2 * 64 * 16 * 32 / 1e10, 4 * (64 * 32 + 16 * 32 + 64 * 16) / 1e9)
    add = 4 * (64 * 16 + 16 + 64 * 16) / 1e9  # the output and bias read, the output written
    summed = 4 * (64 * 16 + 16) / 1e9  # the output's gradient read, the bias's written
    want = product + add + 2 * product + summed
    assert _problem._compute(node, node.choices[0], values, device) == pytest.approx(want)


def test_a_local_boxing_cuts_the_chain_but_waits_for_no_one():
    # B -> S(0): each rank slices its own half; still a boxing node on the communication
    # stream, so its chain's two tasks and two hand-overs, but no wait for other ranks
    source = Value(SHAPE, 4, False, (2,), layout=(B,))
    node = Node("op", "", (2,), [Choice(((S(0),),), ((S(0),),))], 0, [(0, 0)])
    node.compute, node.memory = [0.0], [0.0]
    crowded = Cluster(DEVICE, Network(LINK, LINK), 2, 1, cores_per_node=1, collective_wait_s=0.5e-3)
    problem = Problem([node], [source], crowded)
    assert problem.total([0]) == pytest.approx(NBYTES / 2 / DEVICE.memory_bandwidth + COLLECTIVE)


def test_the_lowered_plan_is_priced_with_its_own_counts():
    weight = Value(SHAPE, 4, True, (2,), layout=(B,), parameter=True)
    node = Node("op", "", (2,), [Choice(((B,),), ((S(0),),))], 0, [(0, 0)], plan_nodes=3)
    node.compute, node.memory = [5e-6 + 3 * DEVICE.node_s], [0.0]  # a kernel, three nodes
    found = search(Problem([node], [weight], CLUSTER))
    reduce = 2 * LINK.latency_s + NBYTES / LINK.bandwidth
    assert found.time == pytest.approx(5e-6 + 3e-6 + reduce + COLLECTIVE)
    assert found.problem.work([0]) == pytest.approx(5e-6 + reduce)
    lowered = found.lowered(PlanCounts(nodes=10, tasks=7, switches=4, collectives=2))
    overhead = 10 * 1e-6 + 7 * 2e-6 + 4 * 3e-6  # no collective waits: a core per rank
    assert lowered.step_time == pytest.approx(5e-6 + reduce + overhead)
    assert (lowered.time, lowered.assign) == (found.time, found.assign)


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
    found = graph._latest.layout_search
    assert found.time <= found.greedy_time
    # the step is predicted again with the compiled plan's counts: on one rank the boxing
    # of the split batch's partial gradients stays, each a collective between two chains of
    # the compute stream (lowering alternates streams: every chain after the first is a
    # hand-over)
    plan, program = graph._latest.plan, graph._latest.program
    chains = sum(task.fn is not None for task in plan.tasks)
    boxings = sum(node.name.startswith("boxing") for node in program.nodes)
    assert boxings > 0
    assert plan_counts(plan, program).collectives == 0  # one rank exchanges with no one
    # Adam reads each of the 4*8 + 8 + 8*2 + 2 parameters, its gradient and two moments,
    # and writes back all but the gradient: 7 float32 per parameter
    updates = 7 * 4 * (4 * 8 + 8 + 8 * 2 + 2)
    assert plan_counts(plan, program).update_bytes == updates
    assert found.step_time == pytest.approx(
        found.problem.work(list(found.assign))
        + len(program.nodes) * DEVICE.node_s
        + len(plan.tasks) * DEVICE.task_s
        + (chains - 1) * DEVICE.switch_s
        + updates / DEVICE.memory_bandwidth
    )


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
