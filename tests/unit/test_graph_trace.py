"""Tracing into the graph IR: lazy tensors, data-access errors naming the user's line,
in-place writes, variables and constants, promotion casts, backward and optimizer capture."""

import re
import threading

import numpy as np
import pytest

import tideflow as flow
from tideflow.compiler import LazyTensor, TensorHolder, Tracer, capture_updates
from tideflow.framework.errors import AutogradError, TideflowError

from ._graph_support import interpret, op_names, trace

F32 = flow.float32


def _line_of(fn, marker: str) -> int:
    """The line number of the line of `fn` containing `marker`."""
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if marker in line)


# -- lazy tensors -------------------------------------------------------------------------------
def test_lazy_tensors_have_metadata_and_no_data():
    seen = {}

    def fn(x):
        y = x.sum(1)
        seen.update(
            shape=x.shape, dtype=y.dtype, ndim=x.ndim, size=x.size(), size1=x.size(1),
            numel=x.numel(), kind=type(y), text=repr(y),
        )  # fmt: skip
        return y

    trace(fn, ((2, 3), F32))
    assert seen["shape"] == (2, 3) and seen["size"] == flow.Size([2, 3]) and seen["size1"] == 3
    assert seen["dtype"] is F32 and seen["ndim"] == 2 and seen["numel"] == 6
    assert seen["kind"] is LazyTensor
    assert re.fullmatch(
        r"LazyTensor\(value=%\d+, shape=\[2\], dtype=tideflow.float32\)", seen["text"]
    )


@pytest.mark.parametrize(
    "access, what",
    [
        (lambda x: x.sum().item(), r"item\(\)"),
        (lambda x: x.tolist(), r"tolist\(\)"),
        (lambda x: x.numpy(), r"numpy\(\)"),
        (lambda x: float(x.sum()), r"float\(\)"),
        (lambda x: np.asarray(x), "converting it to a NumPy array"),
        (lambda x: x.detach().tolist(), r"tolist\(\)"),
    ],
)
def test_reading_values_while_tracing_names_the_line(access, what):
    def build(x):
        access(x)
        return x

    line = access.__code__.co_firstlineno  # the innermost user code asking for values
    pattern = rf"{what} needs the value of a tensor.*\(at {re.escape(__file__)}:{line}: "
    with pytest.raises(TideflowError, match=pattern):
        trace(build, ((3,), F32))


def test_control_flow_on_a_tensor_names_the_line():
    def build(x):
        if x.sum() > 0:  # branch on data
            return x
        return -x

    line = _line_of(build, "# branch on data")
    with pytest.raises(TideflowError, match=rf"bool\(\).*:{line}: if x.sum\(\) > 0:"):
        trace(build, ((3,), F32))


def test_a_lazy_tensor_of_another_trace_is_refused():
    kept = []
    trace(lambda x: kept.append(x * 2) or x, ((2,), F32))
    with pytest.raises(TideflowError, match="lazy tensor of another trace"):
        trace(lambda x: x + kept[0], ((2,), F32))


# -- what the program computes -------------------------------------------------------------------
def test_ops_of_other_threads_run_eagerly_while_a_graph_is_traced():
    """The dispatch mode is process-wide: a data source collating batches on its thread
    while the main thread traces must compute, not be recorded."""
    results = []

    def other_thread():
        results.append((flow.ones(3) * 2).numpy())

    def build(x):
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        return x.exp()

    program = trace(build, ((3,), F32))
    np.testing.assert_array_equal(results[0], [2.0, 2.0, 2.0])
    assert op_names(program) == ["exp"]


def test_promotion_becomes_explicit_casts():
    program = trace(lambda i, d: (i + 0.5, i.float() * d), ((3,), flow.int64), ((3,), flow.float64))
    assert op_names(program) == ["cast", "add", "cast", "cast", "mul"]
    casts = [n.attrs["dtype"] for n in program.nodes if n.op.name == "cast"]
    assert casts == [F32, F32, flow.float64]
    i, d = np.array([1, 2, 3]), np.array([0.5, 1.0, 2.0])
    a, b = interpret(program, [i, d])
    assert a.dtype == np.float32 and b.dtype == np.float64
    np.testing.assert_array_equal(b, i.astype(np.float32) * d)


def test_captured_tensors_are_constants_and_registered_ones_variables():
    scale = flow.tensor([2.0, 3.0])
    w = flow.tensor([1.0, -1.0])
    program = trace(lambda x: x * scale + scale * w, ((2,), F32), variables={"w": w})
    assert list(program.variables) == ["w"]
    assert [a.tolist() for a in program.constants.values()] == [[2.0, 3.0]]
    (out,) = interpret(program, [np.array([1.0, 1.0], np.float32)])
    np.testing.assert_array_equal(out, [4.0, 0.0])
    w.mul_(2)  # variables are read from the tensor at run time
    (out,) = interpret(program, [np.array([1.0, 1.0], np.float32)])
    np.testing.assert_array_equal(out, [6.0, -3.0])


def test_the_same_memory_is_one_variable():
    p = flow.nn.Parameter(flow.ones(2))
    tracer = Tracer()
    assert tracer.add_variable("a.weight", p, TensorHolder(p)) == "a.weight"
    assert tracer.add_variable("b.weight", p, TensorHolder(p)) == "a.weight"


def test_a_mutating_op_in_build_asks_for_add_optimizer():
    p = flow.nn.Parameter(flow.ones(2))

    def build(x):
        hyper = dict(lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False)
        flow.ops.optim.sgd_update(p, x, None, maximize=False, first=True, **hyper)
        return x

    with pytest.raises(TideflowError, match=r"sgd_update writes its operands.*add_optimizer"):
        trace(build, ((2,), F32), variables={"p": p})


# -- in-place writes ---------------------------------------------------------------------------
def _inplace_chain(x):
    y = x * 1
    y.add_(2)
    y.relu_()
    z = (y * 1).view(6)
    z.mul_(3)  # the dead base of a view may go stale
    return z


def test_inplace_ops_rebind_to_new_values():
    program = trace(_inplace_chain, ((2, 3), F32))
    assert op_names(program) == ["mul", "add", "relu", "mul", "view", "mul"]
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    (out,) = interpret(program, [x])
    np.testing.assert_array_equal(out, _inplace_chain(flow.tensor(x)).numpy())


def test_reading_a_view_after_writing_its_base_raises():
    def build(x):
        y = x * 1
        row = y[0]
        y.add_(1)  # eager: row sees this; a graph cannot
        return row + 1

    with pytest.raises(TideflowError, match="read after an in-place write to a tensor sharing"):
        trace(build, ((2, 3), F32))


def test_writes_to_variables_are_assigned_at_the_end():
    stats = flow.zeros(3)

    def build(x):
        stats.mul_(0.5).add_(x)
        return stats * 2  # reads the new value

    program = trace(build, ((3,), F32), variables={"stats": stats})
    assert op_names(program) == ["mul", "add", "mul", "assign"]
    for _ in range(2):
        (out,) = interpret(program, [np.ones(3, np.float32)])
    np.testing.assert_array_equal(stats.numpy(), [1.5, 1.5, 1.5])
    np.testing.assert_array_equal(out, [3.0, 3.0, 3.0])


def test_writing_a_view_of_a_variable_raises():
    stats = flow.zeros(3)

    def build(x):
        stats[0].add_(1)
        return x

    with pytest.raises(TideflowError, match="in-place write to a view of 'stats'"):
        trace(build, ((3,), F32), variables={"stats": stats})


def test_reading_a_view_of_a_variable_after_writing_the_variable_raises():
    stats = flow.zeros(4)

    def build(x):
        pairs = stats.view(2, 2)
        stats.add_(x)  # eager: pairs shows the new values
        return pairs * 1

    with pytest.raises(TideflowError, match="read after an in-place write"):
        trace(build, ((4,), F32), variables={"stats": stats})


def test_writing_a_captured_tensor_raises():
    captured = flow.zeros(3)

    def build(x):
        captured.add_(x)
        return x

    with pytest.raises(TideflowError, match="captured from outside build"):
        trace(build, ((3,), F32))


# -- autograd ------------------------------------------------------------------------------------
def _mlp(seed=0):
    flow.manual_seed(seed)
    return flow.nn.Sequential(flow.nn.Linear(3, 4), flow.nn.Tanh(), flow.nn.Linear(4, 2))


def test_backward_records_the_gradient_graph_and_keeps_eager_grads():
    model = _mlp()
    params = dict(model.named_parameters())
    model[0].bias.grad = flow.full((4,), 7.0)
    tracer = Tracer()
    for name, p in params.items():
        tracer.add_variable(name, p, TensorHolder(p))
    with tracer:
        x = tracer.feed((5, 3), F32)
        loss = model(x).square().mean()
        loss.backward(retain_graph=True)
        (loss * 2).backward()  # a second backward adds to the gradients
    grads = tracer.gradients()
    program = tracer.finish([loss, *grads.values()])
    assert model[0].bias.grad.tolist() == [7.0] * 4 and model[0].weight.grad is None

    xs = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    outs = interpret(program, [xs])
    model[0].bias.grad = None
    eager = model(flow.tensor(xs)).square().mean()
    (eager * 3).backward()
    assert outs[0] == pytest.approx(eager.item(), rel=1e-6)
    for name, got in zip(grads, outs[1:], strict=True):
        np.testing.assert_allclose(got, params[name].grad.numpy(), rtol=1e-5, atol=1e-6)


def test_inplace_on_a_saved_tensor_fails_backward_as_in_eager():
    w = flow.nn.Parameter(flow.ones(3))

    def build(x):
        y = (x * w).exp()
        y.add_(1)  # exp saved its output
        y.sum().backward()
        return y

    with pytest.raises(AutogradError, match="modified by an inplace operation"):
        trace(build, ((3,), F32), variables={"w": w})


# -- optimizer capture -----------------------------------------------------------------------------
def test_capture_updates_records_updates_and_creates_state_eagerly():
    p = flow.nn.Parameter(flow.ones(3))
    opt = flow.optim.SGD([p], lr=0.5, momentum=0.9)
    p.grad = flow.ones(3)
    calls = capture_updates(opt.step)
    assert [c.op.name for c in calls] == ["sgd_update"]
    (call,) = calls
    assert call.args[0] is p and call.attrs["first"] and call.attrs["lr"] == 0.5
    buf = opt.state[p]["momentum_buffer"]
    assert call.args[2] is buf and buf.tolist() == [0.0, 0.0, 0.0]
    assert p.tolist() == [1.0, 1.0, 1.0]  # recorded, not run
    assert not capture_updates(opt.step)[0].attrs["first"]


def test_capture_refuses_optimizers_computing_outside_updates():
    p = flow.nn.Parameter(flow.ones(3))

    class Clipping(flow.optim.SGD):
        def step(self, closure=None):
            for q in self.param_groups[0]["params"]:
                q.grad = q.grad.clamp(-1, 1)
            return super().step(closure)

    tracer = Tracer()
    with tracer:
        p.grad = tracer.feed((3,), F32)
        with pytest.raises(TideflowError, match="clamp on gradients outside its fused update"):
            capture_updates(Clipping([p], lr=0.1).step)
