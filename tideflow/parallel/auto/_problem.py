"""The layout search's problem: the traced op graph, each node's valid layouts priced.

A step's predicted time under an assignment (one choice per node) is

    sum over nodes   compute of the chosen layout (forward, and twice that backward)
  + sum over edges   the boxing from the producer's output layout to the consumer's input
                     layout, and in backward the boxing of the gradient back

on the busiest rank (rank 0's shards are the largest), priced with the cost model on the
rank's share of its device (`Cluster.rank_device`): `op_time` for compute, the alpha-beta
collectives of `Network` for boxing. Beyond kernels and transfers, a compiled plan pays per
node, per task and per hand-over between stream threads (`DeviceProfile.node_s`, `task_s`,
`switch_s`), and each collective waits for its peers as a job of that size does (`Cluster.
collective_wait_s`). The search counts them as lowering will make them: a node per op
forward and two backward; a boxing runs on the communication stream, so it cuts the compute
chain it sits in, adding its node, two tasks (its chain and the compute after it) and two
hand-overs, and one that exchanges data (not a local slice) may wait. Once the searched plan is
lowered, `Solution.lowered` prices the plan's own counts instead (`PlanCounts`), and the
work of pipeline stages (ops on disjoint sets of ranks) overlaps as 1F1B runs their
micro-batches (`cost.pipeline_time`); the search itself sums every stage, which shifts every
plan of one stage assignment alike.

Gradients are priced as the global mode holds them, in the dual layout (`_layout.dual`: a
broadcast value's gradient is partial, a partial value's broadcast), so an edge's backward
is the dual of its boxing, from the dual of the consumer's layout to the dual of the
producer's. A source (a parameter) then needs its gradient in its own layout: a broadcast
parameter's partial gradient is all-reduced, data parallelism's all-reduce, whether the
ops reading it split the work or every rank computes all of it.

Memory per rank: parameters and their gradients (fixed), and the outputs of nodes that
backward needs (every node output that requires grad, as saved activations).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ...framework.errors import ShapeError
from ...framework.registry import get_op
from ...framework.sbp import B, P, Split
from .._layout import dual_nd, shard_shape
from ..cost import (
    AttentionShape,
    Cluster,
    DeviceProfile,
    attention_times,
    matmul_cost,
    op_time,
    pipeline_time,
    pointwise_cost,
)

_PRODUCTS = {"matmul", "mm", "bmm", "linear"}


@dataclass
class Value:
    shape: tuple
    itemsize: int
    requires_grad: bool
    hierarchy: tuple
    producer: int | None = None  # node index; None: a source (input, parameter, moved tensor)
    output: int = 0
    layout: tuple | None = None  # a source's fixed layout
    parameter: bool = False


@dataclass
class Node:
    op: str
    module: str
    hierarchy: tuple
    choices: list  # each with .ins (per argument: n-D sbp or None) and .outs
    greedy: int
    inputs: list  # (argument index, value index)
    outputs: list = field(default_factory=list)  # value indices
    searched: bool = True  # False: a `to_global` of build, one fixed choice
    compute: list = field(default_factory=list)  # seconds per choice, forward + backward
    memory: list = field(default_factory=list)  # saved bytes per choice
    plan_nodes: int = 1  # the nodes it lowers to (1, or 3 with backward); 0 for a to_global
    ranks: tuple = ()  # its placement's ranks, which tell pipeline stages apart


@dataclass(frozen=True)
class PlanCounts:
    """What a plan pays for beyond its kernels and transfers, counted."""

    nodes: int
    tasks: int
    switches: int  # chains that follow a chain of the other stream
    collectives: int
    update_bytes: float = 0.0  # what the optimizer updates read and write in place


@dataclass
class Problem:
    nodes: list
    values: list
    cluster: Cluster
    micro_batches: int = 1  # build traced once for each (gradient accumulation)
    consumers: list = field(init=False)  # per value: [(node, argument index)]

    def __post_init__(self) -> None:
        self.consumers = [[] for _ in self.values]
        for v, node in enumerate(self.nodes):
            for arg, value in node.inputs:
                self.consumers[value].append((v, arg))
        self._edges: dict[tuple, tuple[float, int, int]] = {}
        self.fixed_memory = sum(
            2 * _shard_bytes(val, val.layout) for val in self.values if val.parameter
        )
        self.device = device = self.cluster.rank_device
        self.boxing_s = device.node_s + 2 * (device.task_s + device.switch_s)
        self.collective_s = self.boxing_s + self.cluster.collective_wait_s

    # -- pricing --------------------------------------------------------------------------
    def layout_of(self, value: int, assign: list) -> tuple:
        val = self.values[value]
        if val.producer is None:
            return val.layout
        return self.nodes[val.producer].choices[assign[val.producer]].outs[val.output]

    def edge_time(self, value: int, assign: list, consumer: int, arg: int, choice) -> float:
        """Boxing time of `value` into argument `arg` of `consumer` laid out as `choice`, in
        forward and backward, its producer's layout taken from `assign`."""
        transfer, collectives, local = self._edge_parts(value, assign, choice.ins[arg])
        return transfer + collectives * self.collective_s + local * self.boxing_s

    def _edge_parts(self, value: int, assign: list, dst: tuple) -> tuple:
        """(transfer seconds, collectives, local boxings) of the edge, forward and backward."""
        key = (value, self.layout_of(value, assign), dst)
        parts = self._edges.get(key)
        if parts is None:
            parts = self._edges[key] = self._price_edge(*key)
        return parts

    def _price_edge(self, value: int, src: tuple, dst: tuple) -> tuple:
        val = self.values[value]
        parts = [self._box(val, src, dst)]
        if val.requires_grad:
            parts.append(self._box(val, dual_nd(dst), dual_nd(src)))
            if val.producer is None:  # a leaf takes its gradient in its own layout
                parts.append(self._box(val, dual_nd(src), src))
        return tuple(map(sum, zip(*parts, strict=True)))

    def _box(self, val: Value, src: tuple, dst: tuple) -> tuple[float, int, int]:
        net, device = self.cluster.rank_network, self.device
        total, collectives, local = 0.0, 0, 0
        for axis, (s, d) in enumerate(zip(src, dst, strict=True)):
            if s == d:
                continue
            n = val.hierarchy[axis]
            others = math.prod(
                val.hierarchy[j] for j, t in enumerate(src) if j != axis and isinstance(t, Split)
            )
            nbytes = val.itemsize * math.prod(val.shape) / others
            if s is P and d is B:
                total += net.allreduce(nbytes, n, n)
            elif d is B or (s is P and isinstance(d, Split)):
                total += net.allgather(nbytes, n, n)  # S->B all-gather; P->S reduce-scatter
            elif isinstance(s, Split) and isinstance(d, Split):
                total += net.alltoall(nbytes / n, n, n)
            else:  # B->S slice, B->P or S->P: a local copy
                total += nbytes / n / device.memory_bandwidth
                local += 1
                continue
            collectives += 1
        return total, collectives, local

    def total(self, assign: list) -> float:
        time = sum(node.compute[assign[v]] for v, node in enumerate(self.nodes))
        for v, node in enumerate(self.nodes):
            c = node.choices[assign[v]]
            time += sum(self.edge_time(value, assign, v, arg, c) for arg, value in node.inputs)
        return time

    def work(self, assign: list) -> float:
        """The step's kernels and transfers: `total` less what the plan pays per node, task,
        hand-over and collective, with pipeline stages overlapped. Each node's work, and
        the transfers into it, count on its stage."""
        node_s = self.device.node_s
        stages: dict[tuple, float] = {}
        for v, node in enumerate(self.nodes):
            c = node.choices[assign[v]]
            time = node.compute[assign[v]] - node.plan_nodes * node_s
            time += sum(
                self._edge_parts(value, assign, c.ins[arg])[0] for arg, value in node.inputs
            )
            stages[node.ranks] = stages.get(node.ranks, 0.0) + time
        rank_sets = [set(ranks) for ranks in stages]
        disjoint = sum(map(len, rank_sets)) == len(set().union(*rank_sets))
        if len(stages) == 1 or not disjoint:
            return sum(stages.values())
        m = self.micro_batches
        cores = self.cluster.cores_per_node
        if cores is None or cores >= self.cluster.gpus_per_node:
            return pipeline_time([t / m for t in stages.values()], m).total_s
        # NOTE: ranks time-share the cores: a stage waiting for its micro-batch gives its
        # cores to the busy ones, so the critical path runs at a core a rank (the stages'
        # times are priced at each rank's share of the cores), but the cores still do
        # every rank's work.
        share = cores / self.cluster.gpus_per_node
        path = pipeline_time([t * share / m for t in stages.values()], m).total_s
        every_rank = sum(len(ranks) * t * share for ranks, t in stages.items()) / cores
        return max(path, every_rank)

    def overhead(self, counts: PlanCounts) -> float:
        device = self.device
        return (
            counts.nodes * device.node_s
            + counts.tasks * device.task_s
            + counts.switches * device.switch_s
            + counts.collectives * self.cluster.collective_wait_s
            + counts.update_bytes / device.memory_bandwidth
        )

    def memory(self, assign: list) -> float:
        return self.fixed_memory + sum(node.memory[assign[v]] for v, node in enumerate(self.nodes))

    def local_cost(self, v: int, choice: int, assign: list, lam: float) -> float:
        """The terms of the objective that node `v`'s choice changes, the others held."""
        node = self.nodes[v]
        c = node.choices[choice]
        held = assign[v]
        assign[v] = choice
        try:
            cost = node.compute[choice] + lam * node.memory[choice]
            cost += sum(self.edge_time(value, assign, v, arg, c) for arg, value in node.inputs)
            for value in node.outputs:
                for consumer, arg in self.consumers[value]:
                    d = self.nodes[consumer].choices[assign[consumer]]
                    cost += self.edge_time(value, assign, consumer, arg, d)
        finally:
            assign[v] = held
        return cost


def _shard_bytes(val: Value, nd: tuple) -> float:
    coord = (0,) * len(val.hierarchy)
    return val.itemsize * math.prod(shard_shape(val.shape, nd, val.hierarchy, coord))


# -- building it from a recording ---------------------------------------------------------------
def build_problem(
    calls: list, cluster: Cluster, pins: list = (), micro_batches: int = 1
) -> Problem:
    """The problem of the calls a `Recorder` wrote down (build traced `micro_batches` times);
    `pins`: (tensor, layout) pairs the user's `to_global` fixed where the layout already
    was."""
    values: list[Value] = []
    known: dict[int, int] = {}  # id of a global tensor -> its value
    nodes: list[Node] = []
    for v, call in enumerate(calls):
        hierarchy = tuple(call.placement.hierarchy)
        inputs = []
        for arg, t in enumerate(call.operands):
            if t is None:
                continue
            if id(t) not in known:
                known[id(t)] = len(values)
                values.append(
                    Value(
                        tuple(t._logical), t.dtype.itemsize, t.requires_grad, hierarchy,
                        layout=tuple(t._nd_sbp), parameter=t.requires_grad and t.is_leaf,
                    )
                )  # fmt: skip
            inputs.append((arg, known[id(t)]))
        node = Node(call.name, call.module, hierarchy, call.choices, call.greedy, inputs)
        node.searched = call.searched
        node.ranks = tuple(call.placement.flat_ranks)
        for k, t in enumerate(call.outputs):
            known[id(t)] = len(values)
            node.outputs.append(len(values))
            values.append(
                Value(tuple(t._logical), t.dtype.itemsize, t.requires_grad, hierarchy, v, k)
            )
        nodes.append(node)
    for t, layout in pins:
        _pin(nodes, values[known[id(t)]], layout)
    # NOTE: in a compiled plan an op's overhead is its node's, counted per node below
    device = dataclasses.replace(cluster.rank_device, op_overhead_s=0.0)
    for node in nodes:
        # NOTE: a `to_global`'s cost is the boxing on its input edge
        node.plan_nodes = _plan_nodes(node, values) if node.searched else 0
        node.compute = [
            _compute(node, c, values, device) + node.plan_nodes * cluster.rank_device.node_s
            if node.searched
            else 0.0
            for c in node.choices
        ]
        node.memory = [
            sum(
                _shard_bytes(values[o], c.outs[k])
                for k, o in enumerate(node.outputs)
                if values[o].requires_grad
            )
            for c in node.choices
        ]
    return Problem(nodes, values, cluster, micro_batches)


def _pin(nodes: list, val: Value, layout: tuple) -> None:
    """Keep only the producer's choices that give `val` the layout the user asked for."""
    if val.producer is None:
        return
    node = nodes[val.producer]
    keep = [c for c in node.choices if c.outs[val.output] == layout]
    greedy = node.choices[node.greedy]
    node.choices = keep
    node.greedy = keep.index(greedy)  # the greedy choice gave the layout the pin found


def _plan_nodes(node: Node, values: list) -> int:
    """One node forward; with backward, two more (as `_compute` prices backward)."""
    return 3 if any(values[value].requires_grad for _, value in node.inputs) else 1


def _compute(node: Node, choice, values: list, device: DeviceProfile) -> float:
    """Kernel time of the node's shard on rank 0, forward and, when it needs one, backward:
    a view's own in neither, but the gradient of one that selects or repeats elements is a
    new buffer of its operand's size; the fused attention's its own tiles'; any other op's
    backward twice its forward (the usual two products per product: the input's gradient
    and the weight's), and a linear layer's bias added and its gradient summed."""
    coord = (0,) * len(node.hierarchy)
    by_arg = dict(node.inputs)
    shapes, itemsize, backward = [], 1, False
    for arg, nd in enumerate(choice.ins):
        if nd is None or arg not in by_arg:
            continue
        val = values[by_arg[arg]]
        shapes.append(shard_shape(val.shape, nd, node.hierarchy, coord))
        itemsize = max(itemsize, val.itemsize)
        backward = backward or val.requires_grad
    outs = [
        shard_shape(values[o].shape, choice.outs[k], node.hierarchy, coord)
        for k, o in enumerate(node.outputs)
    ]
    if get_op(node.op).view:
        return _view_grad(device, shapes, outs, itemsize) if backward else 0.0
    if node.op == "attention" and len(shapes) == 3:
        forward, grad = attention_times(device, _attention_shape(shapes, choice), itemsize)
        return forward + (grad if backward else 0.0)
    costs = _product_costs(node, shapes, itemsize)
    if not costs:
        costs = [pointwise_cost(shapes, outs[0] if outs else (), itemsize)]
    forward = sum(op_time(device, cost, itemsize) for cost in costs)
    grad = 2 * forward
    if node.op == "linear" and len(shapes) == 3 and outs:
        out, bias = outs[0], shapes[2]
        forward += op_time(device, pointwise_cost([out, bias], out, itemsize), itemsize)
        grad += op_time(device, pointwise_cost([out], bias, itemsize), itemsize)
    return forward + (grad if backward else 0.0)


def _view_grad(device: DeviceProfile, shapes: list, outs: list, itemsize: int) -> float:
    """A view's backward: a view again where it keeps every element once (reshape,
    permute); else (slices, splits, expands) the outputs' gradients written into, or summed
    to, a new gradient of the operand's size."""
    if not shapes or all(math.prod(out) == math.prod(shapes[0]) for out in outs):
        return 0.0
    return op_time(device, pointwise_cost(outs, shapes[0], itemsize), itemsize)


def _product_costs(node: Node, shapes: list, itemsize: int) -> list:
    if node.op not in _PRODUCTS or len(shapes) < 2 or min(len(s) for s in shapes[:2]) < 2:
        return []
    a, b = shapes[0], shapes[1]
    if node.op == "linear":  # weight (out, in): x @ weight.T
        b = (b[1], b[0])
    try:
        return [matmul_cost(a, b, itemsize)]
    except ShapeError:  # a transposed operand (attributes the search does not read)
        return []


def _attention_shape(shapes: list, choice) -> AttentionShape:
    q, k, v = shapes
    return AttentionShape(
        math.prod(q[:-2]), q[-2], k[-2], q[-1], v[-1], bool(choice.attrs.get("is_causal"))
    )
