"""Elementwise fusion: the ops flagged elementwise, which nodes form a group, what the fused
node computes (the same bits as its members run one by one, tiled or whole), its errors, and
training graphs == eager with fusion in the pipeline."""

import functools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tideflow as flow
from tideflow.compiler import passes
from tideflow.compiler.lower import lower
from tideflow.compiler.passes import plan_memory
from tideflow.compiler.passes.fuse import _operand_index, _tiles, fuse_elementwise
from tideflow.framework.dispatch import run_local
from tideflow.framework.errors import TideflowError
from tideflow.framework.registry import Meta, all_ops, use_generated_kernels
from tideflow.framework.sbp import B, S, Signature
from tideflow.framework.tensor import make_tensor
from tideflow.runtime import Executor, TaskError
from tideflow.testing.harness import flow_fn, to_flow
from tideflow.testing.op_db import OP_DB
from tideflow.testing.sbp_sim import record_calls

from ._graph_support import interpret, op_names, trace

F32 = flow.float32


def _tiny_tiles(program):
    """Fusion in tiles of 7 elements: the small programs below run in several tiles."""
    return fuse_elementwise(program, tile_elements=7)


def _arrays(*shapes, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _same_bits(before, after, feeds):
    """The fused node's NumPy path (its generated loop is held to float rounding instead, in
    test_codegen.py) gives the members' bits."""
    generated = use_generated_kernels(False)
    try:
        pairs = zip(interpret(before, feeds), interpret(after, feeds), strict=True)
        for b, a in pairs:
            assert (a.dtype, a.shape) == (b.dtype, b.shape)
            np.testing.assert_array_equal(a, b)
    finally:
        use_generated_kernels(generated)


def _fused(program):
    return [n for n in program.nodes if n.op.name.startswith("fused(")]


# -- the elementwise flag --------------------------------------------------------------------------
def test_elementwise_ops_broadcast_and_compute_each_position_alone():
    """What fusion relies on, for every call of a flagged op the op database makes: the output
    has the broadcast shape of the tensor operands, and the op on the operands' parts under
    a block of the output gives that block of the output, bit for bit."""
    flagged = {name for name, op in all_ops().items() if op.elementwise}
    reached, problems = set(), []
    for info in OP_DB:
        for sample in info.samples(np.random.default_rng(0), info.dtypes[0]):
            with record_calls() as calls:
                flow_fn(info)(*to_flow(sample, False), **sample.kwargs)
            for call in calls:
                if call.op.elementwise:
                    reached.add(call.op.name)
                    problems += _elementwise_problems(call, sample)
    assert not problems, "\n".join(problems)
    assert reached == flagged, f"flagged but reached by no sample: {sorted(flagged - reached)}"


def _elementwise_problems(call, sample) -> list[str]:
    (out,) = call.outs
    shapes = [a.shape for a in call.args if isinstance(a, np.ndarray)]
    if out.shape != np.broadcast_shapes(*shapes):
        return [f"{call.op.name} in {sample}: output {out.shape} for operands {shapes}"]
    block = tuple(slice(d // 2, d) for d in out.shape)  # the last half along every axis
    args = tuple(
        make_tensor(_part(a, _operand_index(a.shape, block, out.ndim)))
        if isinstance(a, np.ndarray)
        else a
        for a in call.args
    )
    got = run_local(call.op, args, call.attrs)._data
    if got.dtype != out.dtype or not np.array_equal(got, out[block], equal_nan=True):
        return [f"{call.op.name} in {sample}: a block of the operands gives other values"]
    return []


def _part(array, index):
    return array if index is None else array[index]


# -- grouping --------------------------------------------------------------------------------------
def test_a_chain_becomes_one_node_computing_the_same_bits():
    program = trace(lambda x: ((x * 2 + 1).exp() - x).tanh(), ((5, 6, 7), F32))
    fused = _tiny_tiles(program)
    assert op_names(fused) == ["fused(mul,add,exp,sub,tanh)"]
    assert fused.nodes[0].outputs == program.fetches  # the members' values, not new ones
    assert fused.nodes[0].name == f"fused(mul,add,exp,sub,tanh)_{fused.nodes[0].id}"
    _same_bits(program, fused, _arrays((5, 6, 7)))


def test_a_diamond_is_one_group_with_one_output():
    def fn(x):
        e = x.exp()
        return e.sin() * e.cos() + e

    program = trace(fn, ((40,), F32))
    fused = _tiny_tiles(program)
    assert op_names(fused) == ["fused(exp,sin,cos,mul,add)"]
    assert len(fused.nodes[0].outputs) == 1
    _same_bits(program, fused, _arrays((40,)))


def test_values_read_outside_the_group_or_fetched_are_its_outputs():
    def fn(x):
        a = x * 3
        b = a.exp()
        c = b + a
        return c.sum(dim=0), b

    program = trace(fn, ((6, 5), F32))
    fused = _tiny_tiles(program)
    assert op_names(fused) == ["fused(mul,exp,add)", "sum"]
    b, c = (n.outputs[0] for n in program.nodes[1:3])
    assert fused.nodes[0].outputs == (b, c)  # a is read only inside
    _same_bits(program, fused, _arrays((6, 5)))


def test_a_reader_outside_closes_the_group_so_no_node_moves():
    def fn(x):
        a = x.exp()
        s = a.sum()  # reads `a` between the two multiplications
        return a * 2 * s

    program = trace(fn, ((4, 5), F32))
    fused = _tiny_tiles(program)
    assert op_names(fused) == ["exp", "sum", "fused(mul,mul)"]
    _same_bits(program, fused, _arrays((4, 5)))


def test_other_shapes_views_and_random_draws_stay_apart():
    def fn(x, bias):
        scale = bias.exp() + 1  # (4,): a group of its own shape
        y = (x * scale).view(12, 4).abs()  # the view cuts the chain
        return y + flow.rand(12, 4)  # a draw from the generator is effectful: its own node

    program = trace(fn, ((3, 4, 4), F32), ((4,), F32))
    fused = fuse_elementwise(program)
    assert op_names(fused) == ["fused(exp,add)", "mul", "view", "uniform", "fused(abs,add)"]


def test_a_node_reading_two_open_groups_merges_them():
    def fn(x, y):
        return x.exp() * y.sin()

    program = trace(fn, ((8,), F32), ((8,), F32))
    assert op_names(_tiny_tiles(program)) == ["fused(exp,sin,mul)"]


# -- the fused kernel ------------------------------------------------------------------------------
def test_operands_broadcast_along_tiled_axes():
    def fn(x, row, col, scalar):
        return ((x + row) * col - scalar).relu() / 3

    shapes = ((4, 5, 6), (6,), (4, 1, 6), ())
    program = trace(fn, *((s, F32) for s in shapes))
    fused = _tiny_tiles(program)
    assert op_names(fused) == ["fused(add,mul,sub,relu,div)"]
    assert fused.nodes[0].operands == program.feeds  # the 0-d operand is an input too
    _same_bits(program, fused, _arrays(*shapes))


def test_operands_that_are_views_of_other_layouts():
    def fn(x):
        xt = x.t()
        return (xt * 2).exp() + xt

    program = trace(fn, ((9, 6), F32))
    fused = _tiny_tiles(program)
    assert op_names(fused) == ["permute", "fused(mul,exp,add)"]
    _same_bits(program, fused, _arrays((9, 6)))


def test_mixed_dtypes_fuse_with_their_casts():
    def fn(i, x):
        mask = i > 2  # bool
        return flow.where(mask, x * i, x.double()).float() + i  # int64 promoted, float64 cast

    program = trace(fn, ((3, 9), flow.int64), ((3, 9), F32))
    fused = _tiny_tiles(program)
    assert len(fused.nodes) == 1 and "cast" in fused.nodes[0].op.name
    assert [v.dtype for v in fused.fetches] == [v.dtype for v in program.fetches]
    feeds = [np.arange(27).reshape(3, 9) % 5, *_arrays((3, 9))]
    _same_bits(program, fused, feeds)


def test_groups_no_larger_than_a_tile_run_on_whole_arrays():
    program = trace(lambda x: (x + 1).exp(), ((1000,), F32))
    whole = fuse_elementwise(program, tile_elements=1000)
    tiled = fuse_elementwise(program, tile_elements=999)
    assert op_names(whole) == op_names(tiled) == ["fused(add,exp)"]
    assert not whole.nodes[0].op.kernels["cpu"].tiled and tiled.nodes[0].op.kernels["cpu"].tiled
    for fused in (whole, tiled):
        _same_bits(program, fused, _arrays((1000,)))


def test_a_failing_member_names_its_node():
    program = trace(lambda a, b: a // b + 1, ((30,), flow.int64), ((30,), flow.int64))
    fused = _tiny_tiles(program)
    divide = program.nodes[0].name
    feeds = [np.arange(30), np.arange(30) % 7]
    with pytest.raises(TideflowError, match=rf"{divide} raised .*integer division by zero"):
        interpret(fused, feeds)
    with Executor(lower(fused)) as executor, pytest.raises(TaskError, match=divide):
        executor.run(tuple(feeds)).result()


def test_fused_meta_and_sbp():
    program = trace(lambda x, b: (x + b).exp() * x, ((2, 3), F32), ((3,), F32))
    node = _fused(_tiny_tiles(program))[0]
    x, b = (Meta(v.shape, v.dtype) for v in node.operands)
    assert node.op.meta(x, b) == Meta((2, 3), F32)
    assert node.op.sbp(x, b) == [
        Signature((S(0), B), (S(0),)),
        Signature((S(1), S(0)), (S(1),)),
        Signature((B, B), (B,)),
    ]
    assert not node.effectful and not node.op.differentiable


@given(st.lists(st.integers(0, 9), max_size=4).map(tuple), st.integers(1, 50))
def test_tiles_cover_the_shape_once_in_blocks_of_at_most_the_tile_size(shape, size):
    tiles = _tiles(shape, size)
    if not tiles:  # one block
        assert math.prod(shape) <= size
        return
    seen = np.zeros(shape, np.int64)
    for tile in tiles:
        seen[tile] += 1
        assert 0 < seen[tile].size <= size
    assert (seen == 1).all()


def test_the_memory_plan_drops_the_fused_intermediates():
    program = trace(lambda x: x.exp() * x.sin() + x, ((256,), F32))  # 1 KiB per array
    assert plan_memory(program).memory.peak_bytes == 4 * 1024  # x, exp, sin, their product
    assert plan_memory(_tiny_tiles(program)).memory.peak_bytes == 2 * 1024  # x, the result


# -- graphs == eager with fusion in the pipeline ---------------------------------------------------
class _TrainGraph(flow.nn.Graph):
    def __init__(self, model, optimizer, loss):
        super().__init__()
        self.model = model
        self.add_optimizer(optimizer)
        self.loss = loss

    def build(self, x, y):
        loss = self.loss(self.model, x, y)
        loss.backward()
        return loss


def _follows_eager(make_model, loss, batches, optimizer=flow.optim.AdamW):
    # NOTE: the NumPy kernels on both sides, fused ones tiled: the same bits up to summation
    # order, which several AdamW steps (whose update of a near-zero gradient is its sign) keep
    # within these tolerances. Generated loops are compared with eager in test_codegen.py.
    generated = use_generated_kernels(False)
    try:
        return _compare_with_eager(make_model, loss, batches, optimizer)
    finally:
        use_generated_kernels(generated)


def _compare_with_eager(make_model, loss, batches, optimizer):
    eager_model, graph_model = make_model(), make_model()
    eager_opt = optimizer(eager_model.parameters(), lr=1e-3)
    graph = _TrainGraph(graph_model, optimizer(graph_model.parameters(), lr=1e-3), loss)
    for x, y in batches:
        eager_opt.zero_grad()
        expected = loss(eager_model, x, y)
        expected.backward()
        eager_opt.step()
        assert graph(x, y).item() == pytest.approx(expected.item(), rel=1e-5, abs=1e-6)
    for key, value in eager_model.state_dict().items():
        got = graph_model.state_dict()[key].numpy()
        np.testing.assert_allclose(got, value.numpy(), rtol=1e-5, atol=1e-6)
    return graph._latest.program


def test_mlp_training_graph_with_fusion_follows_eager():
    def make():
        flow.manual_seed(0)
        return flow.nn.Sequential(
            flow.nn.Linear(10, 32), flow.nn.GELU(), flow.nn.Linear(32, 32), flow.nn.Tanh(),
            flow.nn.Linear(32, 5),
        )  # fmt: skip

    rng = np.random.default_rng(0)
    batches = [
        (flow.tensor(rng.standard_normal((16, 10)).astype(np.float32)),
         flow.tensor(rng.integers(0, 5, 16)))
        for _ in range(3)
    ]  # fmt: skip
    program = _follows_eager(
        make, lambda m, x, y: flow.nn.functional.cross_entropy(m(x), y), batches
    )
    assert _fused(program)


@pytest.fixture
def tiled_fusion(monkeypatch):
    """Graphs compile with fusion in tiles of 1K elements."""
    tiled = functools.partial(fuse_elementwise, tile_elements=1024)
    monkeypatch.setattr(
        passes,
        "PIPELINE",
        tuple((name, tiled if fn is fuse_elementwise else fn) for name, fn in passes.PIPELINE),
    )


def test_gpt_training_graph_with_tiled_fusion_follows_eager(tiled_fusion):
    config = flow.models.GPTConfig(vocab_size=48, block_size=16, n_layer=2, n_head=2, n_embd=32)

    def make():
        flow.manual_seed(0)
        return flow.models.GPT(config)

    rng = np.random.default_rng(0)
    tokens = [rng.integers(0, config.vocab_size, (4, 17)) for _ in range(3)]
    batches = [(flow.tensor(t[:, :-1]), flow.tensor(t[:, 1:])) for t in tokens]

    def loss(m, x, y):
        # NOTE: GPT's own backward has no chains of elementwise ops left (layer norm, softmax
        # and GELU backward are single ops): a logit penalty gives the fuser a chain.
        logits, ce = m(x, y)
        return ce + (logits * logits).mean() * 0.01

    program = _follows_eager(make, loss, batches)
    assert any(n.op.kernels["cpu"].tiled for n in _fused(program))
