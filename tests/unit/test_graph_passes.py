"""Each compiler pass alone: the program before and after, and the same numbers from both."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.compiler.passes import (
    PIPELINE,
    cse,
    dce,
    fold_constants,
    fuse_boxing,
    plan_memory,
    run_passes,
)
from tideflow.framework.dispatch import dispatch
from tideflow.framework.sbp import B, P, S, Split
from tideflow.parallel.boxing import BOXING, AxisStep

from ._graph_support import (
    interpret,
    numpy_kernels,  # noqa: F401 (a fixture)
    op_names,
    trace,
)

F32 = flow.float32
X = np.linspace(-1.0, 2.0, 12, dtype=np.float32).reshape(3, 4)


def _same_numbers(before, after, *feeds):
    for b, a in zip(interpret(before, feeds), interpret(after, feeds), strict=True):
        np.testing.assert_array_equal(a, b)


def test_program_text():
    w = flow.ones(2)
    program = trace(lambda x: x * w, ((2,), F32), variables={"w": w})
    assert str(program) == (
        "program(\n"
        "    %1: float32[2] = feed 0\n"
        "    %0: float32[2] = variable w\n"
        "):\n"
        "    %3: float32[2] = mul(%1, %0)\n"
        "    return (%3)"
    )


# -- dead-code elimination ------------------------------------------------------------------------
def test_dce_drops_dead_nodes_unused_variables_and_constants():
    used, unused = flow.ones(4), flow.ones(4)
    captured = flow.full((4,), 3.0)

    def fn(x, y):
        (x * captured).exp()  # dead, like the capture it reads
        return x * used

    before = trace(fn, ((3, 4), F32), ((2,), F32), variables={"used": used, "unused": unused})
    after = dce(before)
    assert op_names(before) == ["mul", "exp", "mul"] and op_names(after) == ["mul"]
    assert "exp(" in str(before) and "exp(" not in str(after)
    assert list(after.variables) == ["used"] and not after.constants
    assert len(after.feeds) == 2  # the signature stays
    _same_numbers(before, after, X, np.zeros(2, np.float32))


def test_dce_keeps_random_draws_and_writes():
    stats = flow.zeros(4)

    def fn(x):
        flow.rand(3)  # unused, but it advances the generator as in eager
        stats.add_(x.sum(0))
        return x + 1

    after = dce(trace(fn, ((3, 4), F32), variables={"stats": stats}))
    assert op_names(after) == ["uniform", "sum", "add", "add", "assign"]


# -- common-subexpression elimination ----------------------------------------------------------
def test_cse_merges_repeated_pure_computations():
    def fn(x):
        a = x.exp().sin()
        b = x.exp().sin()  # the same chain again
        return a + b, x.pow(2) + x.pow(3)

    before = trace(fn, ((3, 4), F32))
    after = cse(before)
    assert op_names(before) == ["exp", "sin", "exp", "sin", "add", "pow", "pow", "add"]
    assert op_names(after) == ["exp", "sin", "add", "pow", "pow", "add"]
    add = after.nodes[2]
    assert add.operands[0] is add.operands[1]
    _same_numbers(before, after, X)


def test_cse_never_merges_random_draws():
    after = cse(trace(lambda x: flow.rand(3, 4) + flow.rand(3, 4) + x, ((3, 4), F32)))
    assert op_names(after).count("uniform") == 2


# -- constant folding ---------------------------------------------------------------------------
def test_fold_computes_constant_subgraphs_at_compile_time():
    before = trace(lambda x: x + (flow.ones(4) * 2 + flow.arange(4)), ((3, 4), F32))
    after = fold_constants(before)
    assert op_names(before) == ["full", "mul", "arange", "cast", "add", "add"]
    assert op_names(after) == ["add"]
    (offset,) = [after.constants[v] for v in after.nodes[0].inputs if v in after.constants]
    assert offset.tolist() == [2.0, 3.0, 4.0, 5.0]
    _same_numbers(before, after, X)


def test_fold_leaves_random_draws_large_results_and_failing_kernels():
    program = trace(
        lambda x: (x + flow.rand(4), flow.zeros(1000) + 1, flow.tensor([1]) // flow.tensor([0])),
        ((4,), F32),
    )
    after = fold_constants(program, max_bytes=1024)
    assert op_names(after) == ["uniform", "add", "full", "add", "floor_divide"]
    assert op_names(fold_constants(program)) == ["uniform", "add", "floor_divide"]
    with pytest.raises(flow.TideflowError, match="integer division by zero"):
        interpret(after, [np.zeros(4, np.float32)])


# -- memory planning -----------------------------------------------------------------------------
def test_memory_reuses_buffers_of_dead_arrays():
    program = trace(lambda x: x.exp().exp().exp(), ((4, 4), F32))  # 64 bytes each
    plan = plan_memory(program).memory
    assert plan_memory(program).nodes == program.nodes  # it only annotates
    x = program.feeds[0]
    a, b, c = (n.outputs[0] for n in program.nodes)
    assert [plan.buffers[v] for v in (x, a, b, c)] == [0, 1, 0, 1]
    assert plan.buffer_bytes == (64, 64)
    assert (plan.peak_bytes, plan.pool_bytes, plan.unshared_bytes) == (128, 128, 256)


def test_memory_views_keep_their_base_alive():
    def fn(x):
        v = x.view(16)
        b = x.exp().exp()
        return b + v.sin().view(4, 4)

    program = trace(fn, ((4, 4), F32))
    plan = plan_memory(program).memory
    outs = {n.op.name + str(i): n.outputs[0] for i, n in enumerate(program.nodes)}
    x = program.feeds[0]
    # x is read through its view until sin (step 3): exp's second result cannot take its buffer
    assert plan.buffers[x] == 0 and plan.buffers[outs["exp2"]] == 2
    assert outs["view0"] not in plan.buffers  # views have no buffer of their own
    assert plan.peak_bytes == 3 * 64 and plan.pool_bytes == 3 * 64


def test_memory_counts_fetches_to_the_end_and_persistent_state_apart():
    w = flow.ones(4, 4)
    program = trace(lambda x: (x.exp(), (x * w).exp()), ((4, 4), F32), variables={"w": w})
    plan = plan_memory(program).memory
    first, _, second = (n.outputs[0] for n in program.nodes)
    assert plan.buffers[first] != plan.buffers[second]
    assert plan.persistent_bytes == 64
    assert plan.summary() == (
        "memory: peak 192 B of transient arrays, 3 buffers of 192 B (without reuse 256 B), "
        "persistent 64 B"
    )


# -- the pipeline --------------------------------------------------------------------------------
@pytest.mark.usefixtures("numpy_kernels")
def test_pipeline_runs_every_pass_in_order():
    seen = []
    program = trace(lambda x: x.exp() + x.exp() + flow.ones(4).sum(), ((3, 4), F32))
    result = run_passes(program, on_pass=lambda name, p: seen.append((name, len(p.nodes))))
    assert [name for name, _ in seen] == [name for name, _ in PIPELINE]
    assert op_names(result) == ["fused(exp,add,add)"] and result.memory is not None
    _same_numbers(program, result, X)


# -- boxing peepholes -----------------------------------------------------------------------------
def _box(x, src, dst):
    """One boxing step on a 1-rank group (its kernel copies), for the peephole's patterns."""
    lengths = tuple((s.axis, x.shape[s.axis]) for s in (src, dst) if isinstance(s, Split))
    return dispatch(BOXING, (x,), {"step": AxisStep((0,), 0, src, dst, lengths)})


def test_fuse_boxing_turns_all_reduce_then_slice_into_reduce_scatter():
    before = trace(lambda g: _box(_box(g, P, B), B, S(0)) * 2, ((4, 3), F32))
    after = fuse_boxing(before)
    assert op_names(before) == ["boxing", "boxing", "mul"]
    assert op_names(after) == ["boxing", "mul"] and "P->S(0) over ranks [0]" in str(after)
    _same_numbers(before, after, X.reshape(4, 3))


def test_fuse_boxing_drops_a_broadcast_made_partial_and_reduced_again():
    before = trace(lambda x: _box(_box(x, B, P), P, B).exp(), ((3, 4), F32))
    after = fuse_boxing(before)
    assert op_names(after) == ["exp"] and "exp(%" in str(after)
    _same_numbers(before, after, X)
    shared = trace(lambda g: (lambda r: (_box(r, B, P), r + 1))(_box(g, P, B)), ((3, 4), F32))
    assert op_names(fuse_boxing(shared)) == op_names(shared)  # the all-reduce has two readers
