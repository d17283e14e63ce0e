"""Lowering a program to the runtime's plan: sources and the chains of nodes (compute and
communication streams), updates with per-call attributes, reads of views before in-place
writes, protected fetches."""

import time
import tracemalloc

import numpy as np
import pytest

import tideflow as flow
from tideflow.compiler import TensorHolder, Tracer, capture_updates
from tideflow.compiler.lower import ATTRS_FEED, lower
from tideflow.framework.dispatch import dispatch
from tideflow.framework.registry import Meta, OpDef
from tideflow.ops._rules import broadcast_only
from tideflow.runtime import Executor, TaskError

from ._graph_support import interpret, trace

F32 = flow.float32


def _run(plan, *feeds):
    with Executor(plan) as executor:
        return executor.run(feeds).result()


def test_sources_and_one_chain_of_the_nodes():
    w = flow.tensor([1.0, 2.0])
    bias = flow.tensor([0.5, 0.5])
    program = trace(lambda x: (x * w + bias) * 3, ((2,), F32), variables={"w": w})
    plan = lower(program)
    const = next(iter(program.constants))
    sources = ("feed:0", "var:w", f"var:const:{const.id}")
    assert [(t.name, t.inputs) for t in plan.tasks] == [
        *((name, ()) for name in sources),
        ("chain:0", tuple((name, 0) for name in sources)),
    ]
    assert plan.feeds == ("feed:0",) and plan.fetches == (("chain:0", 0),)
    assert set(plan.variables) == {"w", f"const:{const.id}"}
    x = np.array([1.0, -1.0], np.float32)
    np.testing.assert_array_equal(_run(plan, x)[0], interpret(program, [x])[0])


def _timed_op(name: str, spans: list, delay: float, communicates: bool) -> OpDef:
    """x -> 2x, recording (name, start, end) and sleeping `delay` seconds."""

    def kernel(x):
        start = time.perf_counter()
        time.sleep(delay)
        spans.append((name, start, time.perf_counter()))
        return 2 * x

    return OpDef(
        name, inputs=("x",), meta=lambda x: Meta(tuple(x.shape), x.dtype), sbp=broadcast_only,
        kernels={"cpu": kernel}, differentiable=False, communicates=communicates,
    )  # fmt: skip


def test_communication_runs_on_its_stream_beside_the_compute_that_does_not_wait_for_it():
    """Chains alternate streams at each communicating node; the compute after a collective
    that does not read its result runs while it does (the collective sleeps here)."""
    spans: list = []
    collective = _timed_op("collective", spans, 0.05, communicates=True)
    other = _timed_op("other", spans, 0.0, communicates=False)

    def step(x):
        first = dispatch(collective, (x * 3,), {})
        second = dispatch(collective, (dispatch(other, (x,), {}),), {})
        return first + second

    program = trace(step, ((2,), F32))
    plan = lower(program)
    chains = [(t.stream, t.fn) for t in plan.tasks if t.name.startswith("chain:")]
    assert [s for s, _ in chains] == ["compute", "comm", "compute", "comm", "compute"]
    assert plan.in_order == {"compute", "comm"}
    x = np.array([1.0, -1.0], np.float32)
    got = _run(plan, x)[0]
    ran = {name: (start, end) for name, start, end in spans[:2]}  # the first two done
    assert ran["other"][0] < ran["collective"][1]  # in one chain: after the collective
    np.testing.assert_array_equal(got, interpret(program, [x])[0])


def test_communication_runs_at_most_one_compute_chain_ahead():
    """Collectives that read only variables (ZeRO-3's gathers) are ready at once; each waits
    for the compute chain before the previous one, so no more than one is fetched ahead."""
    spans: list = []
    w = flow.tensor([1.0, 2.0])
    gathers = [_timed_op(f"gather{k}", spans, 0.0, communicates=True) for k in range(3)]
    layers = [_timed_op(f"layer{k}", spans, 0.02, communicates=False) for k in range(3)]

    def step(x):
        for gather, layer in zip(gathers, layers, strict=True):
            x = dispatch(layer, (x + dispatch(gather, (w,), {}),), {})
        return x

    program = trace(step, ((2,), F32), variables={"w": w})
    plan = lower(program)
    # gather0 | x + w, layer0 | gather1 | ..., layer1 | gather2 | ..., layer2
    assert [t.after for t in plan.tasks if t.name.startswith("chain:")] == [
        (), (), (), (), ("chain:1",), ()
    ]  # fmt: skip
    x = np.array([1.0, -1.0], np.float32)
    got = _run(plan, x)[0]
    ran = {name: (start, end) for name, start, end in spans}
    assert ran["gather2"][0] >= ran["layer0"][1]
    np.testing.assert_array_equal(got, interpret(program, [x])[0])


def test_a_chain_drops_each_intermediate_after_its_last_use():
    """The first run drops each intermediate after its last use; later runs write them into
    the buffer that run planned, each elementwise kernel over its operand."""
    n = 1 << 18  # 1 MiB of float32
    program = trace(lambda x: ((((x + 1) * 2) - 3) * 4 + 5).exp(), ((n,), F32))
    (chain,) = [t.fn for t in lower(program).tasks if t.name.startswith("chain:")]
    x = np.ones(n, np.float32)
    peaks = []
    for _ in range(2):
        tracemalloc.start()
        try:
            (out,) = chain(x)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        np.testing.assert_array_equal(out, interpret(program, [x])[0])
    # the first run: one input of each kernel and its output, not all six, then the buffers
    assert peaks[0] < 4 * x.nbytes and chain.arena.nbytes == x.nbytes
    assert peaks[1] < 1.5 * x.nbytes  # the fetched result only


def _sgd_program(momentum: float):
    """y = x @ w.T, its mean backward, and SGD's update of w: (program, optimizer, w)."""
    w = flow.nn.Parameter(flow.tensor([[1.0, -2.0], [0.5, 3.0]]))
    opt = flow.optim.SGD([w], lr=0.1, momentum=momentum)
    tracer = Tracer()
    tracer.add_variable("w", w, TensorHolder(w))
    with tracer:
        x = tracer.feed((3, 2), F32)
        (x @ w.t()).mean().backward()
    w.grad = tracer.gradients()["w"]
    calls = capture_updates(opt.step)
    w.grad = None
    if momentum:
        buf = opt.state[w]["momentum_buffer"]
        tracer.add_variable("w.momentum_buffer", buf, TensorHolder(buf))
    tracer.add_updates(calls)
    return tracer.finish([]), opt, w, tuple(c.attrs for c in calls)


def test_updates_write_variables_with_the_attributes_of_each_call():
    program, _, w, attrs = _sgd_program(momentum=0.0)
    plan = lower(program)
    chain = plan.tasks[-1]
    assert plan.feeds == ("feed:0", ATTRS_FEED)
    assert chain.inputs[chain.mutates[0]] == ("var:w", 0) and len(chain.mutates) == 1
    assert chain.inputs[-1] == (ATTRS_FEED, 0)

    x = np.ones((3, 2), np.float32)
    eager = flow.nn.Parameter(w.detach().clone())
    eager_opt = flow.optim.SGD([eager], lr=0.1)
    with Executor(plan) as executor:
        for lr in (0.1, 0.01):
            executor.run((x, ({**attrs[0], "lr": lr},))).result()
            eager_opt.param_groups[0]["lr"] = lr
            eager_opt.zero_grad()
            (flow.tensor(x) @ eager.t()).mean().backward()
            eager_opt.step()
            np.testing.assert_array_equal(w.detach().numpy(), eager.detach().numpy())


def test_reads_of_views_happen_before_the_update_that_writes_the_variable():
    program, _, w, attrs = _sgd_program(momentum=0.9)
    plan = lower(program)
    chain = plan.tasks[-1]
    written = {chain.inputs[i] for i in chain.mutates}
    assert written == {("var:w", 0), ("var:w.momentum_buffer", 0)}
    # the forward matmul reads w through its transpose (a view); fetch its output
    matmul = next(n for n in program.nodes if n.op.name == "matmul")
    x = np.ones((3, 2), np.float32)
    before = w.detach().numpy().copy()
    (y,) = _run(lower(program.replace(fetches=matmul.outputs)), x, attrs)
    np.testing.assert_array_equal(y, x @ before.T)
    assert not np.array_equal(w.detach().numpy(), before)  # and the update did run


def test_fetches_of_constants_and_views_of_written_variables_are_copies():
    program, _, w, attrs = _sgd_program(momentum=0.0)
    zeros = flow.zeros(2)
    tracer_program = trace(lambda x: (x, zeros.view(1, 2)), ((2,), F32))
    (_, const_view) = _run(lower(tracer_program), np.ones(2, np.float32))
    assert not np.shares_memory(const_view, zeros.numpy())

    fetched = program.replace(fetches=(program.nodes[0].outputs[0],))  # w.t(), a view of w
    before = w.detach().numpy().copy()
    (wt,) = _run(lower(fetched), np.ones((3, 2), np.float32), attrs)
    np.testing.assert_array_equal(wt, before.T)  # copied before the update
    assert not np.shares_memory(wt, w.detach().numpy())


def test_a_failing_kernel_names_its_op():
    program = trace(lambda a, b: a // b, ((2,), flow.int64), ((2,), flow.int64))
    plan = lower(program)
    with pytest.raises(TaskError, match=r"task 'floor_divide_\d+' failed.*division by zero"):
        _run(plan, np.array([1, 2]), np.array([1, 0]))
