"""The simplification pass alone: each rule's program before and after, the same bits from
both, and the rewrites that must not happen (they would change a bit, a shape, a dtype, a
memory layout or what the caller gets back)."""

import collections

import numpy as np
import pytest

import tideflow as flow
from tideflow.compiler.passes import dce, fold_constants, simplify
from tideflow.models import GPT, GPTConfig
from tideflow.nn.graph import Graph

from ._graph_support import interpret, op_names, trace

F32 = flow.float32
# -0.0, infinities, NaN and the largest floats: the values identities get wrong first
SPECIAL = np.array([-0.0, 0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 3e38, 1e-45, -7, 2, 0.1])
X = SPECIAL.astype(np.float32).reshape(3, 4)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def _simplified(fn, *feeds, variables=None, arrays=None):
    """`fn` traced, folded (as the pipeline does first: created tensors become constants) and
    simplified, checked to give the same bits (NaN payloads and the sign of zero included)
    on `arrays` (by default the special values, in each feed's shape)."""
    before = fold_constants(trace(fn, *feeds, variables=variables))
    after = simplify(before)
    if arrays is None:
        arrays = [np.resize(SPECIAL, shape).astype(dtype.np) for shape, dtype in feeds]
    for b, a in zip(interpret(before, arrays), interpret(after, arrays), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(_bits(a), _bits(b))
    return before, after


# -- arithmetic identities ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        lambda y: y * 1,
        lambda y: 1.0 * y,
        lambda y: y / 1,
        lambda y: y - 0,
        lambda y: y - 0.0,
        lambda y: y + -0.0,
        lambda y: -0.0 + y,
        lambda y: y * flow.ones(1),  # a one-element constant broadcasts to nothing new
    ],
)
def test_neutral_operands_are_dropped(fn):
    before, after = _simplified(lambda x: fn(x.neg()), ((3, 4), F32))
    assert op_names(before)[-1] in ("mul", "div", "add", "sub")
    assert op_names(after) == ["neg"]
    assert after.fetches == (after.nodes[0].outputs[0],)


def test_float_plus_zero_is_kept_it_turns_minus_zero_into_plus_zero():
    before, after = _simplified(lambda x: x.neg() + 0.0, ((3, 4), F32))
    assert op_names(after) == op_names(before) == ["neg", "add"]
    (out,) = interpret(after, [X])
    assert not np.signbit(out[0, 1]) and np.signbit(-X[0, 1])


def test_integer_plus_zero_is_dropped():
    ints = np.array([[-3, 0, 7]], np.int64)
    before, after = _simplified(lambda x: (x * 2) + 0, ((1, 3), flow.int64), arrays=(ints,))
    assert op_names(before) == ["mul", "add"] and op_names(after) == ["mul"]


def test_an_integer_times_float_one_keeps_its_promotion():
    ints = np.array([[-3, 0, 7]], np.int64)
    before, after = _simplified(lambda x: (x * 2) * 1.0, ((1, 3), flow.int64), arrays=(ints,))
    assert op_names(before) == ["mul", "cast", "mul"] and op_names(after) == ["mul", "cast"]
    assert after.fetches[0].dtype is F32


@pytest.mark.parametrize(
    "fn, why",
    [
        (lambda y: y * flow.ones(2, 3, 4), "broadcasting to a larger shape"),
        (lambda y: y + flow.zeros(1, 1, 1), "broadcasting to more dims"),
        (lambda y: y * 2, "not neutral"),
        (lambda y: y * 2 * 0.5, "x * 2 overflows, x * 1.0 does not"),
        (lambda y: y * -1, "neg flips a NaN's sign bit, mul keeps it"),
        (lambda y: y - -0.0, "-0.0 - (-0.0) is +0.0"),
        (lambda y: 0 - y, "not an identity"),
        (lambda y: 1 / y, "not an identity"),
        (lambda y: y * flow.ones(3, 4), "the result would take the constant's layout too"),
    ],
)
def test_non_identities_are_kept(fn, why):
    before, after = _simplified(lambda x: fn(x.neg()), ((3, 4), F32))
    assert op_names(after) == op_names(before), why


def test_copies_of_feeds_are_kept_their_layout_is_unknown():
    # NOTE: a feed may be a broadcast view; NumPy sums it in another order than its copy.
    broadcast = np.broadcast_to(np.linspace(-1, 1, 500, dtype=np.float32)[:, None], (500, 300))
    before, after = _simplified(lambda x: (x * 1).sum(), ((500, 300), F32), arrays=(broadcast,))
    assert op_names(after) == op_names(before) == ["mul", "sum"]
    assert broadcast.sum() != (broadcast * 1).sum()  # why it matters


def test_double_negation_is_dropped():
    before, after = _simplified(lambda x: x.exp().neg().neg(), ((3, 4), F32))
    assert op_names(before) == ["exp", "neg", "neg"]
    assert op_names(dce(after)) == ["exp"]
    _, single = _simplified(lambda x: x.exp().neg(), ((3, 4), F32))
    assert op_names(single) == ["exp", "neg"]


# -- casts -------------------------------------------------------------------------------------
def test_cast_to_its_own_dtype_is_dropped():
    before, after = _simplified(lambda x: flow.cast(x.exp(), F32), ((3, 4), F32))
    assert op_names(before) == ["exp", "cast"] and op_names(after) == ["exp"]


@pytest.mark.parametrize(
    "source, middle, target, after_names",
    [
        (flow.float16, F32, flow.float64, ["neg", "cast"]),  # one cast
        (F32, flow.float64, F32, ["neg"]),  # a round trip through a wider type
        (flow.int8, flow.int32, flow.int16, ["neg", "cast"]),
        (flow.int16, flow.int64, F32, ["neg", "cast"]),
        (F32, flow.float16, F32, ["neg", "cast", "cast"]),  # float16 rounds
        (flow.int32, F32, flow.int64, ["neg", "cast", "cast"]),  # float32 rounds int32
        (flow.int16, F32, flow.int8, ["neg", "cast", "cast"]),  # out of range differs
        (F32, flow.float64, flow.float16, ["neg", "cast", "cast"]),  # to half: kept
    ],
)
def test_cast_chains(source, middle, target, after_names):
    values = np.array([[-300, -1.5, 0, 2.5, 70000, 1e10]]).astype(source.np)
    _, after = _simplified(
        lambda x: flow.cast(flow.cast(x.neg(), middle), target),
        ((1, 6), source),
        arrays=(values,),
    )
    assert op_names(dce(after)) == after_names
    if after_names == ["neg", "cast"]:
        assert after.nodes[-1].operands[0] is after.nodes[0].outputs[0]


# -- views -------------------------------------------------------------------------------------
def test_views_to_the_same_shape_are_dropped():
    def fn(x):
        y = x.exp()
        return y.reshape(3, 4) + y.view(3, 4).expand(3, 4) * y.permute(0, 1)

    before, after = _simplified(fn, ((3, 4), F32))
    assert op_names(before) == ["exp", "reshape", "view", "expand", "permute", "mul", "add"]
    assert op_names(after) == ["exp", "mul", "add"]


def test_a_permute_and_its_inverse_cancel():
    _, after = _simplified(lambda x: x.exp().permute(2, 0, 1).permute(1, 2, 0), ((2, 3, 4), F32))
    assert op_names(dce(after)) == ["exp"]


def test_two_permutes_become_one():
    before, after = _simplified(
        lambda x: x.exp().permute(0, 2, 1, 3).transpose(2, 3), ((2, 3, 4, 5), F32)
    )
    assert op_names(before) == ["exp", "permute", "permute"]
    (exp, permute) = dce(after).nodes
    assert permute.operands == (exp.outputs[0],) and permute.attrs == {"dims": (0, 2, 3, 1)}


def test_reshape_chains_merge_when_the_first_only_splits():
    def fn(x):
        y = x.exp()  # [6, 4]
        return y.reshape(2, 3, 4).reshape(6, 4), y.reshape(2, 3, 2, 2).view(6, 2, 2)

    before, after = _simplified(fn, ((6, 4), F32))
    assert op_names(before) == ["exp", "reshape", "reshape", "reshape", "view"]
    exp, merged = dce(after).nodes
    assert merged.op.name == "reshape" and merged.attrs == {"shape": (6, 2, 2)}
    assert after.fetches == (exp.outputs[0], merged.outputs[0])


def test_views_of_views_merge():
    _, after = _simplified(lambda x: x.exp().view(2, 3, 4).view(6, 4).view(24), ((6, 4), F32))
    exp, view = dce(after).nodes
    assert view.op.name == "view" and view.operands == (exp.outputs[0],)


def test_a_reshape_that_may_copy_keeps_its_chain():
    # NOTE: `y.t()` cannot be flattened without a copy (C order) but is itself [6, 4]
    # already: merging would hand on the transposed layout instead of the copy's.
    before, after = _simplified(
        lambda x: x.exp().t().reshape(24).reshape(6, 4).sum(0), ((4, 6), F32)
    )
    assert op_names(after) == op_names(before) == ["exp", "permute", "reshape", "reshape", "sum"]


def test_a_real_expand_is_kept():
    _, after = _simplified(lambda x: x.exp().expand(2, 3, 4), ((3, 4), F32))
    assert op_names(after) == ["exp", "expand"]


# -- what the caller and in-place writes see ---------------------------------------------------
def test_fetched_views_of_sources_are_kept():
    w = flow.ones(3, 4)
    before, after = _simplified(
        lambda x: (x.reshape(3, 4), w.reshape(3, 4), x.exp().reshape(3, 4)),
        ((3, 4), F32),
        variables={"w": w},
    )
    assert op_names(before) == ["reshape", "reshape", "exp", "reshape"]
    assert op_names(after) == ["reshape", "reshape", "exp"]  # only the op result's view goes


def test_views_of_a_variable_inside_the_program_are_dropped():
    w = flow.ones(4, 3)
    _, after = _simplified(lambda x: x @ w.reshape(4, 3).t().t(), ((3, 4), F32), variables={"w": w})
    (matmul,) = dce(after).nodes
    assert matmul.operands[1] is after.variables["w"].value


class _Step(Graph):
    """A training step that also returns a view of the weight it updates."""

    def __init__(self):
        super().__init__()
        flow.manual_seed(0)
        self.linear = flow.nn.Linear(4, 3)
        self.add_optimizer(flow.optim.SGD(self.linear.parameters(), lr=0.5))

    def build(self, x):
        loss = self.linear(x).square().sum()
        loss.backward()
        return self.linear.weight.reshape(3, 4)


def test_a_fetched_view_of_an_updated_weight_still_shows_the_weight_before_the_step():
    graph = _Step()
    before = graph.linear.weight.detach().numpy().copy()
    out = graph(flow.ones(2, 4)).numpy()
    assert not np.array_equal(graph.linear.weight.detach().numpy(), before)  # it was updated
    np.testing.assert_array_equal(out, before)


# -- a real model ------------------------------------------------------------------------------
def test_gpt_forward_and_backward_same_bits_fewer_nodes():
    flow.manual_seed(0)
    config = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
    model = GPT(config)
    params = dict(model.named_parameters())

    def step(idx, targets):
        loss = model(idx, targets)[1]
        loss.backward()
        return (loss, *(p.grad for p in params.values()))

    spec = ((2, 16), flow.int64)
    program = fold_constants(trace(step, spec, spec, variables=params))
    rng = np.random.default_rng(0)
    tokens = [rng.integers(0, 64, (2, 16)) for _ in range(2)]
    after = simplify(program)
    for b, a in zip(interpret(program, tokens), interpret(after, tokens), strict=True):
        np.testing.assert_array_equal(_bits(a), _bits(b))
    removed = collections.Counter(op_names(dce(program))) - collections.Counter(
        op_names(dce(after))
    )
    # the logits gradient reshaped to 3-d and back (attention is one op: no transposes of
    # keys left to cancel)
    assert removed == {"reshape": 1}
