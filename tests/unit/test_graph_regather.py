"""The ZeRO stage-3 pass alone (`passes.regather.regather_parameters`): parameter gathers
move to their first reader, the backward reads gathers (and transposes) of its own, so the
gathered copies do not live from forward to backward; unread gathers go, fetched ones stay;
the numbers are unchanged. Gathers here are boxing steps on a group of one rank (their
kernel copies); tests/dist/workers/graph_zero.py runs the pass on real ranks."""

import numpy as np

import tideflow as flow
from tideflow.compiler import TensorHolder, Tracer
from tideflow.compiler.ir import BACKWARD, FORWARD, RECOMPUTE, Scope
from tideflow.compiler.passes import regather_parameters
from tideflow.framework.dispatch import dispatch
from tideflow.framework.sbp import B, S
from tideflow.parallel.boxing import BOXING, AxisStep

from ._graph_support import interpret, op_names

F32 = flow.float32
WIDTH = 32


def _gather(w):
    """An all-gather of `w` (split along dim 0) on a group of one rank."""
    step = AxisStep((0,), 0, S(0), B, ((0, w.shape[0]),))
    return dispatch(BOXING, (w,), {"step": step})


def _trace(unused=False, after_backward=False, fetch_gathered=False):
    """Two layers `tanh(h @ w.t())` on gathered weights (gathers traced first, as a stage-3
    graph traces them), the loss's backward; fetches the loss and the sums of the weights'
    gradients (which, like a graph's updates, leave nothing to the end).
    `unused`: a third parameter gathered and never read; `after_backward`: build reads a
    gathered weight after the backward too; `fetch_gathered`: build returns one."""
    flow.manual_seed(0)
    names = ["w1", "w2", "w3"] if unused else ["w1", "w2"]
    weights = {name: (flow.randn(WIDTH, WIDTH) * 0.2).requires_grad_() for name in names}
    tracer = Tracer()
    for name, w in weights.items():
        tracer.add_variable(name, w, TensorHolder(w))
    with tracer, tracer.scope(Scope()):
        x = tracer.feed((4, WIDTH), F32)
        with tracer.scope(Scope(gather=True)):
            gathered = {name: _gather(w) for name, w in weights.items()}
        h = (x * 2).tanh()
        for name in ("w1", "w2"):
            h = (h @ gathered[name].t()).tanh()
        loss = (h * h).sum()
        loss.backward()
        extra = [weights[name].grad.sum() for name in ("w1", "w2")]
        if after_backward:
            with tracer.scope(Scope("head")):  # forward code again
                extra.append(gathered["w2"].abs().sum())
        if fetch_gathered:
            extra.append(gathered["w1"])
    return tracer.finish([loss, *extra])


def _feed():
    return np.random.default_rng(1).standard_normal((4, WIDTH)).astype(np.float32)


def _same_numbers(before, after):
    for a, b in zip(interpret(after, [_feed()]), interpret(before, [_feed()]), strict=True):
        np.testing.assert_array_equal(a, b)


def _gathers(program):
    return [n for n in program.nodes if n.op is BOXING and n.scope.gather]


def _forward_values_read_in_backward(program):
    """Values made by a forward gather, or by forward nodes from those alone (the weight's
    transpose), that a backward node reads: what would keep a gathered copy alive from
    forward to backward."""
    made = set()
    for node in program.nodes:
        inputs = set(node.inputs)
        if node.scope.phase == FORWARD and (node.scope.gather or (inputs and inputs <= made)):
            made.update(node.outputs)
    return [
        v for node in program.nodes if node.scope.phase == BACKWARD for v in node.inputs
        if v in made
    ]  # fmt: skip


def test_gathers_move_to_their_readers_and_the_backward_gathers_again():
    before = _trace()
    after = regather_parameters(before)
    assert _forward_values_read_in_backward(before)  # as traced: kept to the backward
    assert not _forward_values_read_in_backward(after)
    _same_numbers(before, after)
    names = op_names(after)
    # each forward gather right before its weight's transpose, after the work before it
    assert names[:6] == ["mul", "tanh", "boxing", "permute", "matmul", "tanh"]
    assert names[6:8] == ["boxing", "permute"]
    # the backward needs w2 (for the gradient of the hidden layer), not w1 (the input
    # needs no gradient): one gather again, then the transpose, then the node reading it
    (again,) = [n for n in _gathers(after) if n.scope.phase == RECOMPUTE]
    assert again.inputs[0].label == "w2" and len(_gathers(after)) == 3
    i = after.nodes.index(again)
    transpose, reader = after.nodes[i + 1], after.nodes[i + 2]
    assert transpose.op.name == "permute" and transpose.scope.phase == RECOMPUTE
    assert transpose.inputs == again.outputs and reader.scope.phase == BACKWARD
    assert transpose.outputs[0] in reader.inputs


def test_unread_gathers_are_dropped():
    before = _trace(unused=True)
    after = regather_parameters(before)
    assert len(_gathers(before)) == 3 and len(_gathers(after)) == 3
    assert "w3" not in {n.inputs[0].label for n in _gathers(after)}
    _same_numbers(before, after)


def test_a_reader_after_the_backward_gathers_once_more():
    before = _trace(after_backward=True)
    after = regather_parameters(before)
    of_w2 = [n for n in _gathers(after) if n.inputs[0].label == "w2"]
    assert [n.scope.phase for n in of_w2] == [FORWARD, RECOMPUTE, FORWARD]
    last = after.nodes.index(of_w2[-1])
    assert after.nodes[last + 1].op.name == "abs"
    _same_numbers(before, after)


def test_a_fetched_gather_stays_where_it_was_traced():
    before = _trace(fetch_gathered=True)
    after = regather_parameters(before)
    first = _gathers(before)[0]
    assert after.nodes[0] is first and after.fetches[-1] is first.outputs[0]
    assert not _forward_values_read_in_backward(after)  # the backward still gathers again
    _same_numbers(before, after)


def test_a_program_without_gathers_is_left_as_it_is():
    w = flow.randn(3, 3)
    tracer = Tracer()
    tracer.add_variable("w", w, TensorHolder(w))
    with tracer, tracer.scope(Scope()):
        out = tracer.feed((2, 3), F32) @ w
    program = tracer.finish([out])
    assert regather_parameters(program) is program
