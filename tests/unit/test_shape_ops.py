"""Shape ops beyond what the op database checks: user-facing errors, view semantics (shared
memory and version counters), in-place methods, and that every SBP layout the simulator
accepts is declared (the database tests check the converse)."""

import itertools

import numpy as np
import pytest

import tideflow as flow
import tideflow.ops.shape as shape_ops
from tideflow.framework.errors import AutogradError, DTypeError, ShapeError, TideflowError
from tideflow.framework.sbp import B, P, S, Signature
from tideflow.testing.sbp_sim import check_signature, metas_of, record_calls


def _arange(*shape, dtype=flow.float32):
    return flow.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


# -- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: flow.cat([flow.zeros(2, 3), flow.zeros(3, 4)], dim=1),
            ShapeError,
            r"cat: sizes of tensors must match except in dimension 1; got \[2, 3\] \(tensor 0\) "
            r"and \[3, 4\] \(tensor 1\)",
        ),
        (
            lambda: flow.cat([flow.zeros(2, 3), flow.zeros(2, 3, 1)]),
            ShapeError,
            r"cat: .*\[2, 3\] \(tensor 0\) and \[2, 3, 1\] \(tensor 1\)",
        ),
        (
            lambda: flow.cat([flow.zeros(2), flow.tensor(1.0)]),
            ShapeError,
            r"cat: zero-dimensional tensor \(at position 1\)",
        ),
        (lambda: flow.cat([]), TideflowError, "cat: expected a non-empty list"),
        (lambda: flow.cat([flow.zeros(2, 3)], dim=2), IndexError, "cat: dimension 2"),
        (
            lambda: flow.stack([flow.zeros(2, 3), flow.zeros(2, 4)]),
            ShapeError,
            r"stack: expects each tensor to be equal size, but got \[2, 3\] at entry 0 and "
            r"\[2, 4\] at entry 1",
        ),
        (lambda: flow.stack([flow.zeros(2)], dim=3), IndexError, r"stack: dimension 3"),
        (
            lambda: flow.zeros(2, 3).permute(0, 0),
            ShapeError,
            "permute: dim 0 appears multiple times",
        ),
        (
            lambda: flow.zeros(2, 3).permute(0, 1, 2),
            ShapeError,
            r"permute: the number of dims \(3\) does not match .* shape \[2, 3\]",
        ),
        (lambda: flow.zeros(2, 3).permute(0, 2), IndexError, "permute: dimension 2"),
        (
            lambda: flow.zeros(2, 3).squeeze(3),
            IndexError,
            r"squeeze: dimension 3 is out of range for a 2-d tensor "
            r"\(expected to be in \[-2, 1\]\)",
        ),
        (
            lambda: flow.zeros(2, 3).unsqueeze(-4),
            IndexError,
            r"unsqueeze: dimension -4 .* 2-d tensor \(expected to be in \[-3, 2\]\)",
        ),
        (
            lambda: flow.zeros(3, 4).t().view(12),
            ShapeError,
            r"view: shape \[12\] is not compatible with the input's size \[4, 3\]",
        ),
        (
            lambda: flow.zeros(3, 4).reshape(5, -1),
            ShapeError,
            r"reshape: shape \[5, -1\] is invalid for input of size 12",
        ),
        (
            lambda: flow.zeros(3, 4).flatten(1, 0),
            ShapeError,
            "flatten: start_dim .* cannot come after end_dim",
        ),
        (
            lambda: flow.zeros(3, 4).unflatten(1, (3, 2)),
            ShapeError,
            r"unflatten: sizes \[3, 2\] don't multiply up to the size of dim 1 \(4\)",
        ),
        (lambda: flow.zeros(2, 3, 4).t(), ShapeError, r"t: .*<= 2 dimensions.*\[2, 3, 4\]"),
        (lambda: flow.zeros(3).mT, ShapeError, r"mT: .*at least 2 dimensions, got shape \[3\]"),
        (
            lambda: flow.zeros(2, 3).movedim((0, 1), 0),
            ShapeError,
            r"movedim: source \[0, 1\] and destination \[0\]",
        ),
        (
            lambda: flow.zeros(3, 4).narrow(1, 3, 2),
            ShapeError,
            r"narrow: start \(3\) \+ length \(2\) exceeds the size \(4\) of dim 1",
        ),
        (lambda: flow.zeros(3, 4).narrow(1, 5, 0), IndexError, "narrow: start 5 is out of range"),
        (
            lambda: flow.tensor(1.0).narrow(0, 0, 1),
            IndexError,
            "narrow: cannot be applied to a 0-d",
        ),
        (
            lambda: flow.zeros(2, 3).select(1, 3),
            IndexError,
            r"select: index 3 is out of range for dim 1 of size 3",
        ),
        (
            lambda: flow.zeros(5).split([2, 2]),
            ShapeError,
            r"split: split sizes \[2, 2\] must be non-negative and sum exactly to 5",
        ),
        (lambda: flow.zeros(3).split(0), ShapeError, "split: split_size must be positive"),
        (lambda: flow.zeros(3).chunk(0), ShapeError, "chunk: expects `chunks` to be greater"),
        (lambda: flow.zeros(3).chunk(2.0), TypeError, "chunk: chunks must be an int, got float"),
        (lambda: flow.tensor(1.0).unbind(), IndexError, "unbind: cannot be applied to a 0-d"),
        (lambda: flow.zeros(2).unbind(1), IndexError, r"unbind: dimension 1 is out of range"),
        (
            lambda: flow.zeros(5).split(2.0),
            TypeError,
            "split: split_size_or_sections must be an int or a sequence of ints, got float",
        ),
        (
            lambda: flow.zeros(7).tensor_split(0),
            ShapeError,
            "tensor_split: number of sections must be larger than 0, got 0",
        ),
        (
            lambda: flow.tensor(1.0).tensor_split(1),
            ShapeError,
            "tensor_split: expected at least a 1-dimensional tensor",
        ),
        (
            lambda: flow.zeros(7).tensor_split(flow.tensor([1.0, 2.0])),
            DTypeError,
            "tensor_split: expected indices_or_sections to have an integer dtype, got "
            "tideflow.float32",
        ),
        (
            lambda: flow.zeros(7).tensor_split(flow.tensor([[1, 2]])),
            ShapeError,
            r"tensor_split: expected indices_or_sections to be a 0-d or 1-d tensor, got shape "
            r"\[1, 2\]",
        ),
        (
            lambda: flow.zeros(2, 6).hsplit(4),
            ShapeError,
            r"hsplit: cannot split dim 1 of size 6 into 4 equal sections \(tensor of shape "
            r"\[2, 6\]\)",
        ),
        (
            lambda: flow.zeros(6, 2).vsplit(0),
            ShapeError,
            "vsplit: cannot split dim 0 of size 6 into 0 equal sections",
        ),
        (
            lambda: flow.zeros(6).vsplit(2),
            ShapeError,
            r"vsplit: expected a tensor with at least 2 dimensions, got shape \[6\]",
        ),
        (
            lambda: flow.zeros(6, 2).dsplit(2),
            ShapeError,
            r"dsplit: expected a tensor with at least 3 dimensions, got shape \[6, 2\]",
        ),
        (lambda: flow.tensor(1.0).hsplit(1), ShapeError, "hsplit: expected a tensor with at"),
        (
            lambda: flow.zeros(2, 3).repeat(2),
            ShapeError,
            r"repeat: the number of repeat dims \(1\) can not be smaller",
        ),
        (
            lambda: flow.zeros(3, 4).roll((1, 2), 0),
            ShapeError,
            r"roll: shifts \[1, 2\] and dims \[0\] must align",
        ),
        (lambda: flow.zeros(3, 4).roll((1, 2)), ShapeError, "roll: shifts .* dims is None"),
        (lambda: flow.zeros(3).tril(), ShapeError, r"tril: .*at least 2 dimensions.*\[3\]"),
        (lambda: flow.zeros(3).fliplr(), ShapeError, r"fliplr: .*at least 2 dimensions"),
        (lambda: flow.zeros(2, 3).flip((0, -2)), ShapeError, "flip: dim 0 appears multiple"),
        (
            lambda: flow.zeros(3, 4).diagonal(0, 1, -1),
            ShapeError,
            r"diagonal: diagonal dimensions cannot be identical \(1, -1\)",
        ),
        (
            lambda: flow.zeros(2, 2, 2).diag(),
            ShapeError,
            r"diag: expects a 1-d or 2-d.*\[2, 2, 2\]",
        ),
        (
            lambda: flow.diagonal_scatter(flow.zeros(3, 4), flow.zeros(4)),
            ShapeError,
            r"diagonal_scatter: expected src to have the shape of the diagonal \[3\], got \[4\]",
        ),
        (
            lambda: flow.slice_scatter(flow.zeros(3, 4), flow.zeros(1, 2), 1, 0, 2),
            ShapeError,
            r"slice_scatter: expected src to have the shape of the slice \[3, 2\], got \[1, 2\]",
        ),
        (
            lambda: flow.diagonal_scatter(flow.zeros(3, 4), flow.zeros(1)),
            ShapeError,
            r"diagonal_scatter: expected src .* \[3\], got \[1\]",
        ),
        (
            lambda: flow.repeat_interleave(flow.tensor([[1, 2]])),
            ShapeError,
            r"repeat_interleave: repeats must be a 1-d tensor, got shape \[1, 2\]",
        ),
        (
            lambda: flow.slice_scatter(flow.zeros(3, 4), flow.zeros(3, 3), 1, 0, 2),
            ShapeError,
            r"slice_scatter: expected src to have the shape of the slice \[3, 2\], got \[3, 3\]",
        ),
        (
            lambda: flow.select_scatter(flow.zeros(3, 4), flow.zeros(3), 0, 0),
            ShapeError,
            r"select_scatter: expected src of shape \[4\]",
        ),
        (
            lambda: flow.meshgrid(flow.zeros(2), flow.zeros(3, dtype=flow.float64), indexing="ij"),
            DTypeError,
            "meshgrid: expects all tensors to have the same dtype",
        ),
        (
            lambda: flow.meshgrid(flow.zeros(2, 2), indexing="ij"),
            ShapeError,
            r"meshgrid: expected 0-d or 1-d tensors, but tensor 0 has shape \[2, 2\]",
        ),
        (
            lambda: flow.broadcast_tensors(flow.zeros(2, 3), flow.zeros(4)),
            ShapeError,
            r"broadcast_tensors: shapes \[2, 3\] and \[4\] cannot be broadcast",
        ),
        (
            lambda: flow.zeros(3, 2).expand(3, 4),
            ShapeError,
            r"expand: the expanded size 4 must match the existing size 2 at dimension 1",
        ),
        (
            lambda: flow.repeat_interleave(flow.zeros(2, 3), flow.tensor([1, 2]), dim=1),
            ShapeError,
            r"repeat_interleave: repeats must have one count per entry of dim 1",
        ),
        (
            lambda: flow.repeat_interleave(flow.tensor([1, -1])),
            ShapeError,
            "repeat_interleave: repeats can not be negative",
        ),
        (
            lambda: flow.repeat_interleave(flow.tensor([1.0, 2.0])),
            DTypeError,
            "repeat_interleave: repeats must be integers",
        ),
    ],
)
def test_errors_name_the_op_and_shapes(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- view semantics -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make_view",
    [
        lambda x: x.view(4, 3),
        lambda x: x.reshape(-1),
        lambda x: x.flatten(),
        lambda x: x.unflatten(1, (2, 2)),
        lambda x: x.unsqueeze(1).squeeze(1),
        lambda x: x.permute(1, 0),
        lambda x: x.transpose(0, 1),
        lambda x: x.t(),
        lambda x: x.T,
        lambda x: x.mT,
        lambda x: x.movedim(0, 1),
        lambda x: x.narrow(1, 1, 2),
        lambda x: x.select(0, 1),
        lambda x: x.split(2, 1)[1],
        lambda x: x.chunk(3)[2],
        lambda x: x.unbind(1)[3],
        lambda x: x.tensor_split(2, 1)[1],
        lambda x: x.tensor_split([2, 1])[2],  # overlapping pieces
        lambda x: x.hsplit([1])[1],
        lambda x: x.vsplit(3)[0],
        lambda x: x.diagonal(1),
        lambda x: x.view_as(flow.zeros(2, 6)),
    ],
)
def test_views_share_memory_and_version(make_view):
    x = _arange(3, 4)
    v = make_view(x)
    v.add_(100)  # writes through the view ...
    assert x.numpy().min() >= 100 or x.numpy().max() >= 100
    assert x._version_count == v._version_count == 1  # ... and both see the new version
    x.mul_(0)
    assert not v.numpy().any()


@pytest.mark.parametrize(
    "copy",
    [
        lambda x: flow.cat([x, x]),
        lambda x: flow.stack([x]),
        lambda x: x.repeat(1, 1),
        lambda x: x.tile((1,)),
        lambda x: x.flip(0),
        lambda x: x.roll(1),
        lambda x: x.tril(),
        lambda x: x.triu(),
        lambda x: x.diag(),
        lambda x: x.repeat_interleave(1),
        lambda x: flow.slice_scatter(x, x.narrow(1, 0, 1), 1, 0, 1),
    ],
)
def test_copies_do_not_alias(copy):
    x = _arange(3, 4)
    y = copy(x)
    y.add_(100)
    assert x.numpy().max() < 100
    assert x._version_count == 0


def test_reshape_of_a_non_contiguous_tensor_copies_once():
    x = _arange(3, 4).t()
    y = x.reshape(12)
    np.testing.assert_array_equal(y.numpy(), x.numpy().reshape(12))
    y.add_(1)
    assert x._version_count == 0 and x.numpy().max() == 11
    assert not np.shares_memory(y.numpy(), x.numpy())


def test_flatten_of_one_dim_is_the_input_itself():
    x = _arange(3, 4)
    assert x.flatten(1, 1) is x
    assert flow.flatten(_arange(5)).shape == (5,)


def test_expanded_views_are_read_only():
    x = flow.zeros(3, 1)
    with pytest.raises(TideflowError, match="read-only"):
        x.expand(3, 4).add_(1)


# -- methods, properties, calling conventions -----------------------------------------------
def test_call_conventions_match_pytorch():
    x = _arange(2, 3, 4)
    assert x.permute(2, 0, 1).shape == x.permute((2, 0, 1)).shape == (4, 2, 3)
    assert flow.permute(x, (2, 0, 1)).shape == (4, 2, 3)
    assert x.flip(0, 2).shape == x.flip((0, 2)).shape == (2, 3, 4)
    assert x.tile(2, 1).shape == x.tile((2, 1)).shape == (2, 6, 4)
    assert x.repeat((1, 2, 1)).shape == x.repeat(1, 2, 1).shape == (2, 6, 4)
    assert [p.shape[0] for p in x.split(split_size=1)] == [1, 1]
    assert isinstance(flow.Tensor.T, property) and isinstance(flow.Tensor.mT, property)
    assert isinstance(x.split(1), tuple) and isinstance(x.unbind(), tuple)
    assert flow.concat is flow.cat and flow.concatenate is flow.cat
    assert flow.moveaxis is flow.movedim and flow.row_stack is flow.vstack


def test_atleast_returns_input_or_views():
    x = _arange(2, 3)
    assert flow.atleast_1d(x) is x and flow.atleast_2d(x) is x
    assert flow.atleast_3d(x).shape == (2, 3, 1)
    a, b = flow.atleast_2d([flow.tensor(1.0), flow.zeros(3)])
    assert a.shape == (1, 1) and b.shape == (1, 3)


def test_broadcast_shapes():
    assert flow.broadcast_shapes((2, 1), (3,), 1) == flow.Size([2, 3])
    assert isinstance(flow.broadcast_shapes((2,)), flow.Size)
    with pytest.raises(ShapeError, match="broadcast_shapes"):
        flow.broadcast_shapes((2,), (3,))


def test_meshgrid_defaults_to_ij_and_accepts_a_list():
    a, b = flow.meshgrid([flow.arange(2), flow.arange(3)])
    assert a.shape == b.shape == (2, 3)
    np.testing.assert_array_equal(a.numpy(), [[0, 0, 0], [1, 1, 1]])
    with pytest.raises(TideflowError, match="indexing must be 'ij' or 'xy'"):
        flow.meshgrid(flow.arange(2), indexing="ji")


def test_cat_promotes_like_pytorch_and_skips_empty_1d_tensors():
    ints = flow.ones(2, 3, dtype=flow.int32)
    assert flow.cat([ints, flow.zeros(1, 3)]).dtype == flow.float32
    assert flow.cat([ints, flow.zeros(1, 3, dtype=flow.bool)]).dtype == flow.int32
    halves = [flow.zeros(2, dtype=flow.float16), flow.zeros(2, dtype=flow.bfloat16)]
    assert flow.cat(halves).dtype == flow.stack(halves).dtype == flow.float32
    # NOTE: a skipped empty tensor still takes part in type promotion, as in PyTorch
    out = flow.cat([flow.zeros(0), ints], dim=1)
    assert out.shape == (2, 3) and out.dtype == flow.float32
    assert flow.stack([flow.tensor(1), flow.tensor(2.0)]).dtype == flow.float32


def test_cat_gives_skipped_tensors_an_empty_gradient():
    e = flow.zeros(0, requires_grad=True)
    x = flow.ones(2, 3, requires_grad=True)
    flow.cat([e, x, e], dim=1).sum().backward()
    assert e.grad.shape == (0,)
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((2, 3)))


def test_gradient_of_unused_split_pieces_is_zero():
    x = flow.arange(5.0).requires_grad_()
    a, _, c = x.split(2)
    ((a * 2).sum() + (c * 3).sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 0, 0, 3])


def test_gradient_of_unused_unbind_slices_is_zero():
    x = flow.arange(6.0).reshape(3, 2).requires_grad_()
    _, b = x.unbind(1)
    (b * flow.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1], [0, 2], [0, 3]])


# -- split, chunk and unbind are one op: backward is O(numel) whatever the number of pieces ------
@pytest.mark.parametrize(
    ("pieces_of", "op"),
    [
        (lambda x: x.split(1), "split"),
        (lambda x: x.chunk(x.shape[0]), "split"),
        (lambda x: x.tensor_split(x.shape[0]), "split"),
        (lambda x: x.unbind(), "unbind"),
    ],
)
def test_splitting_is_one_op_and_its_backward_is_linear_in_numel(pieces_of, op):
    def backward_work(steps: int) -> tuple[list[str], int]:
        """The ops backward dispatches and the elements they produce, for a loss over every
        other piece (the rest get materialized zero gradients)."""
        x = flow.zeros(steps, 8, requires_grad=True)
        with record_calls() as forward:
            pieces = pieces_of(x)
        assert [c.op.name for c in forward] == [op] and len(pieces) == steps
        loss = flow.stack([p.sum() for p in pieces[::2]]).sum()
        with record_calls() as calls:
            loss.backward()
        np.testing.assert_array_equal(x.grad.numpy()[:, 0], np.arange(steps) % 2 == 0)
        return [c.op.name for c in calls], sum(o.size for c in calls for o in c.outs)

    for steps in (50, 200):
        names, elements = backward_work(steps)
        assert names.count("stack" if op == "unbind" else "cat") == 1
        # slice-per-piece backward wrote `steps` input-sized arrays (steps * numel elements)
        assert elements <= 3 * steps * 8


def test_cat_and_stack_backward_split_the_gradient_once():
    xs = [flow.ones(2, 3, requires_grad=True) for _ in range(4)]
    with record_calls() as calls:
        flow.cat(xs, 1).sum().backward()
    assert [c.op.name for c in calls].count("split") == 1
    with record_calls() as calls:
        flow.stack(xs).sum().backward()
    assert [c.op.name for c in calls].count("unbind") == 1
    np.testing.assert_array_equal(xs[3].grad.numpy(), np.full((2, 3), 2.0))


def test_split_and_unbind_in_a_traced_graph():
    from ._graph_support import interpret, op_names, trace

    def fn(x):
        a, b = x.split([1, 2], 1)
        return (a * 2, b, *x.unbind(0))

    program = trace(fn, ((2, 3), flow.float32))
    assert op_names(program) == ["split", "mul", "unbind"]
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    got = interpret(program, [x])
    for g, want in zip(got, fn(flow.from_numpy(x)), strict=True):
        np.testing.assert_array_equal(g, want.numpy())


def test_docstring_examples_run():
    from .test_nn_layers import run_doctests

    run_doctests(shape_ops)


def test_repeat_interleave_index_form():
    r = flow.tensor([2, 0, 3], dtype=flow.int32)
    out = flow.repeat_interleave(r)
    assert out.dtype == flow.int32
    np.testing.assert_array_equal(out.numpy(), [0, 0, 2, 2, 2])
    with pytest.raises(ShapeError, match="output_size 4 does not match the sum of repeats"):
        flow.repeat_interleave(r, output_size=4)


# -- in-place -------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "ref"), [("tril_", np.tril), ("triu_", np.triu)])
def test_triangle_in_place(name, ref):
    x = _arange(3, 4)
    expected = ref(x.numpy().copy(), 1)
    assert getattr(x, name)(1) is x
    np.testing.assert_array_equal(x.numpy(), expected)
    assert x._version_count == 1


def test_triangle_in_place_gradient_and_errors():
    leaf = flow.ones(3, 3, requires_grad=True)
    with pytest.raises(AutogradError, match="tril_: a leaf Variable that requires grad"):
        leaf.tril_()
    y = leaf * 2
    y.tril_()
    y.sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), 2 * np.tril(np.ones((3, 3))))

    z = leaf.exp()  # exp saves its output ...
    w = z * 1
    z.triu_()  # ... which triu_ then overwrites
    with pytest.raises(AutogradError, match="modified by an inplace operation"):
        (w + z).sum().backward()


def test_writing_into_a_diagonal_view():
    x = flow.zeros(3, 3)
    x.diagonal().add_(1)
    np.testing.assert_array_equal(x.numpy(), np.eye(3))


# -- SBP completeness -----------------------------------------------------------------------
def _candidates(shape: tuple, n: int) -> list:
    return [B, P] + [S(i) for i, d in enumerate(shape) if d >= n]


def _valid(call, sig, n) -> bool:
    try:
        return check_signature(call, sig, n) is None
    except Exception:  # a layout the kernel cannot even run on its shards
        return False


def _declared_and_valid(fn, *arrays):
    """(declared, simulated-valid) signature sets of the single op `fn` dispatches."""
    with record_calls() as calls:
        fn(*(flow.from_numpy(a) for a in arrays))
    (call,) = calls
    declared = set(call.op.sbp(*metas_of(call.args), **call.attrs))
    valid = set()
    ins_choices = [_candidates(a.shape, 2) for a in call.args]
    for ins in itertools.product(*ins_choices):
        for out in _candidates(call.outs[0].shape, 2):
            sig = Signature(tuple(ins), (out,) * len(call.outs))
            if _valid(call, sig, 2) and _valid(call, sig, 3):
                valid.add(sig)
    return declared, valid


def _rand(*shape):
    return np.random.default_rng(0).standard_normal(shape)


@pytest.mark.parametrize(
    ("fn", "shapes"),
    [
        (lambda x: x.reshape(6, 4), [(2, 3, 4)]),
        (lambda x: x.reshape(2, 3, 4), [(6, 4)]),
        (lambda x: x.reshape(4, 3, 2), [(2, 3, 4)]),
        (lambda x: x.reshape(3, 8), [(6, 4)]),
        (lambda x: x.view(3, 1, 4), [(3, 4)]),
        (lambda x: x.expand(3, 4, 2), [(4, 1)]),
        (lambda x: x.permute(2, 0, 1), [(2, 3, 4)]),
        (lambda x: x.narrow(1, 1, 2), [(4, 4)]),
        (lambda x: x.split([1, 3], 1), [(4, 4)]),
        (lambda x: x.split(2, 0), [(4, 4, 2)]),
        (lambda x: x.unbind(1), [(4, 3, 4)]),
        (lambda x: x.flip(1), [(4, 4)]),
        (lambda x: x.roll(1, 0), [(4, 4)]),
        (lambda x: x.roll(1), [(4, 4)]),
        (lambda x: x.repeat(2, 1, 1), [(4, 4)]),
        (lambda x: x.tril(), [(3, 4, 4)]),
        (lambda x: x.diagonal(0, 0, 2), [(4, 3, 4)]),
        (lambda x, y: flow.cat([x, y], 1), [(4, 2), (4, 3)]),
        (lambda x, y: flow.stack([x, y], 1), [(4, 2), (4, 2)]),
        (lambda x, y: flow.slice_scatter(x, y, 1, 1, 3), [(4, 4), (4, 2)]),
        (lambda x, y: flow.diagonal_scatter(x, y, 0, 1, 2), [(4, 3, 3), (4, 3)]),
    ],
)
def test_every_valid_sbp_layout_is_declared(fn, shapes):
    declared, valid = _declared_and_valid(fn, *(_rand(*s) for s in shapes))
    assert valid <= declared, f"valid but not declared: {valid - declared}"
