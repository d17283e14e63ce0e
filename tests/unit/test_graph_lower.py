"""Lowering a program to the runtime's plan: tasks and their wiring, updates with per-call
attributes, ordering of in-place writes after readers of views, protected fetches."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.compiler import TensorHolder, Tracer, capture_updates
from tideflow.compiler.lower import ATTRS_FEED, lower
from tideflow.runtime import Executor, TaskError

from ._graph_support import interpret, trace

F32 = flow.float32


def _run(plan, *feeds):
    with Executor(plan) as executor:
        return executor.run(feeds).result()


def test_tasks_feeds_variables_constants_and_fetches():
    w = flow.tensor([1.0, 2.0])
    bias = flow.tensor([0.5, 0.5])
    program = trace(lambda x: (x * w + bias) * 3, ((2,), F32), variables={"w": w})
    plan = lower(program)
    const = next(iter(program.constants))
    mul, add, scale = (n.name for n in program.nodes)
    assert [(t.name, t.inputs) for t in plan.tasks] == [
        ("feed:0", ()),
        ("var:w", ()),
        (f"var:const:{const.id}", ()),
        (mul, (("feed:0", 0), ("var:w", 0))),
        (add, ((mul, 0), (f"var:const:{const.id}", 0))),
        (scale, ((add, 0),)),  # the Python scalar 3 stays in the task's function
    ]
    assert plan.feeds == ("feed:0",) and plan.fetches == ((scale, 0),)
    assert set(plan.variables) == {"w", f"const:{const.id}"}
    x = np.array([1.0, -1.0], np.float32)
    np.testing.assert_array_equal(_run(plan, x)[0], interpret(program, [x])[0])


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
    update = plan.tasks[-1]
    assert update.name.startswith("sgd_update_") and plan.feeds == ("feed:0", ATTRS_FEED)
    assert update.inputs[0] == ("var:w", 0) and update.inputs[-1] == (ATTRS_FEED, 0)
    assert update.mutates == (0,)  # the momentum buffer operand is None: no input

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


def test_writers_wait_for_the_readers_of_views_of_what_they_write():
    program, *_ = _sgd_program(momentum=0.9)
    plan = lower(program)
    tasks = {t.name: t for t in plan.tasks}
    update = plan.tasks[-1]
    # the forward matmul reads w through its transpose (a view): the update waits for it
    (reader,) = [t for t in plan.tasks if t.name.startswith("matmul_")][:1]
    transpose = reader.inputs[1][0]
    assert tasks[transpose].inputs == (("var:w", 0),)
    assert (reader.name, 0) in update.inputs[3:-1]
    assert update.mutates == (0, 2)  # w and its momentum buffer


def test_fetches_of_constants_and_views_of_written_variables_are_copies():
    program, _, w, attrs = _sgd_program(momentum=0.0)
    zeros = flow.zeros(2)
    tracer_program = trace(lambda x: (x, zeros.view(1, 2)), ((2,), F32))
    plan = lower(tracer_program)
    assert plan.tasks[-1].name.startswith("clone_")
    (_, const_view) = _run(plan, np.ones(2, np.float32))
    assert not np.shares_memory(const_view, zeros.numpy())

    fetched = program.replace(fetches=(program.nodes[0].outputs[0],))  # w.t(), a view of w
    plan = lower(fetched)
    names = [t.name for t in plan.tasks]
    clone = next(n for n in names if n.startswith("clone_"))
    assert names.index(clone) < names.index(plan.tasks[-1].name)  # copied before the update
    (wt,) = _run(plan, np.ones((3, 2), np.float32), attrs)
    assert not np.shares_memory(wt, w.detach().numpy())


def test_a_failing_kernel_names_its_task():
    program = trace(lambda a, b: a // b, ((2,), flow.int64), ((2,), flow.int64))
    plan = lower(program)
    task = plan.tasks[-1].name
    with pytest.raises(TaskError, match=f"task '{task}' failed.*integer division by zero"):
        _run(plan, np.array([1, 2]), np.array([1, 0]))
