"""Agreement of ranks on a value (`parallel.agreement`) in a world of one process: the
all-reduce op eagerly and traced onto the graph channel, which ranks must agree on AMP's
found_inf, and eager loss scaling of global parameters equal to local. The multi-process
runs: tests/dist/test_loss_scaling.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tideflow as flow
import tideflow.parallel as par
from tideflow.compiler import TensorHolder, Tracer
from tideflow.compiler.passes.comm import GRAPH_CHANNEL, own_communicators
from tideflow.distributed.backend import ReduceOp
from tideflow.distributed.groups import RankError
from tideflow.framework.dispatch import dispatch
from tideflow.parallel import sbp as S
from tideflow.parallel.agreement import ALLREDUCE, GroupReduce, agree, agreeing_ranks

from ._graph_support import interpret

ONE = par.placement("cpu", [0])
# NOTE: an overflowing step computes inf/NaN on purpose.
overflow_ok = pytest.mark.filterwarnings("ignore::RuntimeWarning")


pytestmark = pytest.mark.usefixtures("local_dispatch")


def test_agree_in_a_group_of_one_is_the_tensor_itself():
    flag = flow.tensor(True)
    assert agree(flag, [0]) is flag
    assert agree(flag, []) is flag


def test_agree_over_ranks_the_world_lacks_names_them():
    with pytest.raises(RankError, match=r"ranks \[1\] are out of range for a world of 1"):
        agree(flow.tensor(False), [0, 1])


@pytest.mark.parametrize(
    "value", [np.array(True), np.array([3, -1], np.int64), np.array([[0.5]], np.float16)]
)
def test_the_allreduce_op_keeps_shape_and_dtype(value):
    step = GroupReduce((0,), ReduceOp.SUM)
    out = dispatch(ALLREDUCE, (flow.tensor(value),), {"step": step})
    assert out.dtype == flow.tensor(value).dtype
    np.testing.assert_array_equal(out.numpy(), value)
    assert repr(step) == "SUM over ranks [0]"


def test_a_traced_allreduce_runs_on_the_graph_channel():
    tracer = Tracer()
    with tracer:
        flag = tracer.feed((), flow.bool)
        out = dispatch(ALLREDUCE, (flag,), {"step": GroupReduce((0,))})
    program = own_communicators(tracer.finish([out]))
    (node,) = program.nodes
    assert node.op.communicates and not node.op.differentiable
    assert node.attrs["step"] == GroupReduce((0,), ReduceOp.MAX, GRAPH_CHANNEL)
    assert repr(node.attrs["step"]) == "MAX over ranks [0] (graph)"
    assert interpret(program, [np.array(True)])[0] == np.array(True)


def test_ranks_that_agree_on_found_inf():
    local = flow.nn.Linear(2, 2)
    assert agreeing_ranks(local.parameters()) == ()  # each process owns its step
    glob = par.module_to_global(flow.nn.Linear(2, 2), ONE, S.broadcast)
    # a world of one: the only rank agrees with itself, no collective
    assert agreeing_ranks([*local.parameters(), *glob.parameters()], {0}) == ()


def test_a_traces_source_ranks_are_its_inputs_and_variables_placements():
    w = flow.ones(2).to_global(ONE, S.broadcast)
    tracer = Tracer()
    assert tracer.source_ranks() == set()
    tracer.add_variable("w", w, TensorHolder(w))
    tracer.feed((2,), flow.float32)  # a local input has no placement
    assert tracer.source_ranks() == {0}


@overflow_ok  # the first steps' scale overflows float16 on purpose
def test_eager_loss_scaling_of_global_parameters_equals_local():
    rng = np.random.default_rng(0)
    data = [(rng.standard_normal((8, 4)), rng.standard_normal((8, 3))) for _ in range(6)]

    def train(make_global: bool):
        flow.manual_seed(0)
        model = flow.nn.Sequential(flow.nn.Linear(4, 6), flow.nn.Tanh(), flow.nn.Linear(6, 3))
        if make_global:
            par.module_to_global(model, ONE, S.broadcast)
        opt = flow.optim.SGD(model.parameters(), lr=0.1)
        scaler = flow.amp.GradScaler(init_scale=2.0**20, growth_interval=2)
        scales = []
        for x, y in data:
            x, y = flow.tensor(x, dtype=flow.float32), flow.tensor(y, dtype=flow.float32)
            if make_global:
                x, y = x.to_global(ONE, S.split(0)), y.to_global(ONE, S.split(0))
            opt.zero_grad()
            with flow.autocast("cpu", dtype=flow.float16):
                loss = ((model(x).float() - y) ** 2).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        return scales, [p.detach().numpy() for p in model.parameters()]

    scales, weights = train(make_global=True)
    want_scales, want_weights = train(make_global=False)
    assert scales == want_scales
    changes = list(itertools.pairwise([2.0**20, *scales]))
    assert any(b < a for a, b in changes) and any(b > a for a, b in changes)  # backoff, growth
    for got, want in zip(weights, want_weights, strict=True):
        np.testing.assert_array_equal(got, want)
