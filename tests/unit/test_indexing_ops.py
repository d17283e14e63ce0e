"""Indexing family: error messages, view and in-place semantics, and edge cases the op
database records cannot express (gradients PyTorch itself rejects, NaN ordering, warnings)."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.framework.errors import AutogradError, DTypeError, ShapeError, TideflowError
from tideflow.framework.registry import all_ops
from tideflow.ops.indexing import DATA_DEPENDENT, TensorIndexError, _where_single


def _t(*shape, dtype="float64", requires_grad=False):
    n = int(np.prod(shape))
    data = np.arange(n, dtype=dtype).reshape(shape)
    return flow.tensor(data, requires_grad=requires_grad)


# -- subscripts: errors -------------------------------------------------------------------------
def test_int_out_of_range_names_index_dim_and_size():
    x = _t(2, 3)
    with pytest.raises(IndexError, match=r"index 5 is out of bounds for dimension 0 with size 2"):
        x[5]
    with pytest.raises(IndexError, match=r"index -4 is out of bounds for dimension 1 with size 3"):
        x[:, -4]


def test_tensor_index_out_of_range_names_index_dim_and_size():
    x = _t(2, 3)
    with pytest.raises(IndexError, match=r"index 7 is out of bounds for dimension 1 with size 3"):
        x[:, flow.tensor([0, 7])]


def test_float_index_tensor_is_rejected_naming_dtype():
    x = _t(3)
    with pytest.raises(IndexError, match=r"long, int, byte or bool tensors, got tideflow.float32"):
        x[flow.tensor([0.0])]
    with pytest.raises(IndexError, match=r"got tideflow.int16"):
        x[flow.tensor([0], dtype=flow.int16)]


def test_errors_are_tideflow_errors_and_index_errors():
    with pytest.raises(TensorIndexError) as info:
        _t(3)[3]
    assert isinstance(info.value, IndexError)
    assert isinstance(info.value, TideflowError)


def test_too_many_indices():
    with pytest.raises(IndexError, match=r"too many indices for tensor of dimension 2"):
        _t(2, 3)[0, 0, 0]
    with pytest.raises(IndexError, match=r"invalid index of a 0-dim tensor"):
        _t(1).reshape(())[0]


def test_slice_steps_must_be_positive():
    x = _t(4)
    with pytest.raises(ValueError, match=r"step must be greater than zero"):
        x[::-1]
    with pytest.raises(ValueError, match=r"slice step cannot be zero"):
        x[::0]


def test_mask_shape_mismatch():
    x = _t(2, 3)
    with pytest.raises(
        IndexError, match=r"mask \[3\] at index 0 does not match .* \[2, 3\] at index 0"
    ):
        x[flow.tensor([True, False, True])]


def test_only_one_ellipsis_and_valid_key_types():
    x = _t(2, 3)
    with pytest.raises(IndexError, match=r"single ellipsis"):
        x[..., 0, ...]
    with pytest.raises(IndexError, match=r"\(got float\)"):
        x[1.5]


def test_index_tensors_that_do_not_broadcast():
    x = _t(3, 4)
    with pytest.raises(
        IndexError, match=r"could not be broadcast together with shapes \[2\], \[3\]"
    ):
        x[flow.tensor([0, 1]), flow.tensor([0, 1, 2])]


def test_uint8_mask_is_deprecated_but_works():
    x = _t(3)
    with pytest.warns(UserWarning, match="uint8 is deprecated"):
        y = x[flow.tensor([1, 0, 1], dtype=flow.uint8)]
    assert y.tolist() == [0.0, 2.0]


# -- subscripts: semantics ----------------------------------------------------------------------
def test_basic_index_is_a_view_sharing_version():
    x = _t(3, 4)
    row = x[1]
    col = x[:, 2]
    assert np.shares_memory(row._data, x._data) and np.shares_memory(col._data, x._data)
    row[0] = 100.0
    assert x[1, 0].item() == 100.0
    assert x._version[0] == 1 and col._version is x._version


def test_full_int_index_gives_a_0d_view():
    x = _t(2, 2)
    v = x[1, 1]
    assert v.shape == () and np.shares_memory(v._data, x._data)


def test_advanced_index_copies():
    x = _t(3, 4)
    y = x[flow.tensor([0, 2])]
    assert not np.shares_memory(y._data, x._data)
    y[0, 0] = -1.0
    assert x[0, 0].item() == 0.0


def test_ints_select_before_advanced_placement():
    """PyTorch applies ints first: x[:, 0, :, idx] keeps the index dim in place (NumPy would
    move it first, counting the int as an advanced index)."""
    x = _t(2, 3, 4, 5)
    assert tuple(x[:, 0, :, [0, 1]].shape) == (2, 4, 2)
    assert tuple(x[[0, 1], :, 0].shape) == (2, 3, 5)
    assert tuple(x[[0, 1], :, [0, 1]].shape) == (2, 3, 5)
    assert tuple(x[:, [0, 1], [0, 1]].shape) == (2, 2, 5)


def test_bool_scalars_add_a_dim():
    x = _t(2, 3)
    assert tuple(x[True].shape) == (1, 2, 3)
    assert tuple(x[False].shape) == (0, 2, 3)
    assert tuple(x[None, 0, True].shape) == (1, 1, 3)


def test_zero_dim_int_tensor_selects_like_an_int():
    x = _t(3, 4)
    y = x[flow.tensor(2)]
    assert tuple(y.shape) == (4,) and np.shares_memory(y._data, x._data)


def test_iteration_stops_at_index_error():
    rows = list(_t(3, 2))
    assert [r.tolist() for r in rows] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]


def test_repeated_indices_accumulate_gradient():
    x = _t(3, requires_grad=True)
    x[flow.tensor([0, 0, 2, 0])].sum().backward()
    assert x.grad.tolist() == [3.0, 0.0, 1.0]


# -- setitem --------------------------------------------------------------------------------------
def test_setitem_fast_path_writes_in_place_and_bumps_version():
    x = _t(3, 4)
    base = x._data
    x[1:, flow.tensor([0, 3])] = 7.0
    assert x._data is base and x._version[0] == 1
    assert x[1:, 0].tolist() == [7.0, 7.0] and x[0, 0].item() == 0.0


def test_setitem_casts_value_to_the_tensor_dtype():
    x = flow.zeros(3, dtype=flow.int64)
    x[0:2] = flow.tensor([1.7, -2.7])
    x[2] = True
    assert x.tolist() == [1, -2, 1] and x.dtype is flow.int64


def test_setitem_ignores_leading_unit_dims_of_the_value():
    x = flow.zeros(3, 4)
    x[0] = flow.ones(1, 1, 4)
    assert x[0].tolist() == [1.0] * 4


def test_setitem_shape_mismatch():
    x = flow.zeros(2, 3)
    with pytest.raises(ShapeError, match=r"setitem: .*value tensor of shape \[2, 3\] .* \[3\]"):
        x[0] = flow.ones(2, 3)


def test_setitem_rejects_non_tensor_values():
    x = flow.zeros(4)
    with pytest.raises(TypeError, match=r"can't assign a list"):
        x[0] = [1, 2]


def test_setitem_on_a_leaf_that_requires_grad():
    w = flow.zeros(3, requires_grad=True)
    with pytest.raises(AutogradError, match=r"a leaf Variable that requires grad"):
        w[0] = 1.0
    with flow.no_grad():
        w[0] = 1.0
    assert w.tolist() == [1.0, 0.0, 0.0] and w.grad_fn is None


def test_setitem_on_a_view_in_autograd_rewrites_the_base_history():
    leaf = flow.zeros(2, 3, requires_grad=True)
    x = leaf.clone()
    x[0][1] = 2.0
    x.sum().backward()
    np.testing.assert_array_equal(x.numpy(), [[0.0, 2.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(leaf.grad.numpy(), [[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])


def test_setitem_out_of_range_error_on_the_fast_path():
    x = flow.zeros(2, 3)
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for dimension 1 with size 3"):
        x[:, flow.tensor([3])] = 1.0
    # like PyTorch, the dim is counted after ints have selected (here: of x[0])
    with pytest.raises(IndexError, match=r"index -4 is out of bounds for dimension 0 with size 3"):
        x[0, flow.tensor([-4])] = 1.0


def test_setitem_gradients_flow_to_value_and_remaining_elements():
    x = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = flow.tensor(5.0, requires_grad=True)
    y = x.clone()
    y[flow.tensor([True, False, True])] = v
    (y * flow.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert x.grad.tolist() == [0.0, 10.0, 0.0]
    assert v.grad.item() == 101.0


def test_setitem_after_save_breaks_backward():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    y = x.clone()
    z = y * y
    y[0] = 5.0
    with pytest.raises(AutogradError, match=r"modified by an inplace operation"):
        z.sum().backward()


def test_setitem_value_requiring_grad_gives_the_target_history():
    v = flow.tensor([1.0, 2.0], requires_grad=True)
    out = flow.zeros(2, 2)
    out[1] = v
    assert out.requires_grad and out.grad_fn is not None
    out.sum().backward()
    assert v.grad.tolist() == [1.0, 1.0]


# -- index_put ------------------------------------------------------------------------------------
def test_index_put_accumulates_repeats():
    x = flow.zeros(3)
    y = flow.index_put(x, (flow.tensor([0, 0, 2]),), flow.tensor(1.0), accumulate=True)
    assert y.tolist() == [2.0, 0.0, 1.0] and x.tolist() == [0.0, 0.0, 0.0]


def test_index_put_in_place_and_errors():
    x = flow.zeros(3)
    x.index_put_((flow.tensor([1]),), flow.tensor([4.0]))
    assert x.tolist() == [0.0, 4.0, 0.0]
    with pytest.raises(DTypeError, match=r"index_put: values \(tideflow.float64\)"):
        flow.index_put(x, (flow.tensor([0]),), flow.tensor([1.0], dtype=flow.float64))
    with pytest.raises(TypeError, match=r"expected a tensor as element 0"):
        flow.index_put(x, (None,), flow.tensor(1.0))


# -- gather / scatter -----------------------------------------------------------------------------
def test_gather_errors():
    x = _t(3, 4)
    with pytest.raises(IndexError, match=r"gather: index -1 is out of bounds for dimension 0"):
        flow.gather(x, 0, flow.tensor([[-1]]))
    with pytest.raises(
        DTypeError, match=r"gather: expected an index tensor of dtype int32 or int64"
    ):
        flow.gather(x, 0, flow.tensor([[0.0]]))
    with pytest.raises(ShapeError, match=r"gather: index tensor must have the same number"):
        flow.gather(x, 0, flow.tensor([0]))
    with pytest.raises(ShapeError, match=r"size does not match at dimension 1"):
        flow.gather(x, 0, flow.tensor([[0, 1, 2, 0, 1]]))
    with pytest.raises(IndexError, match=r"dimension 2 is out of range"):
        flow.gather(x, 2, flow.tensor([[0]]))


def test_scatter_errors():
    x = flow.zeros(3, 4)
    idx = flow.tensor([[0, 1]])
    with pytest.raises(
        DTypeError, match=r"scatter: src \(tideflow.float64\) must have the same dtype"
    ):
        flow.scatter(x, 0, idx, flow.ones(1, 2, dtype=flow.float64))
    with pytest.raises(ShapeError, match=r"no larger than src \[1, 1\]"):
        flow.scatter(x, 0, idx, flow.ones(1, 1))
    with pytest.raises(IndexError, match=r"scatter_add: index 5 is out of bounds for dimension 0"):
        flow.scatter_add(x, 0, flow.tensor([[5]]), flow.ones(1, 1))
    with pytest.raises(ValueError, match=r"reduce argument must be either add or multiply"):
        flow.scatter(x, 0, idx, 1.0, reduce="max")
    with pytest.raises(ValueError, match=r"scatter_reduce: reduce argument must be one of"):
        flow.scatter_reduce(x, 0, idx, flow.ones(1, 2), "max")


def _float64(*shape, requires_grad=True):
    rng = np.random.default_rng(sum(shape))
    return flow.tensor(rng.standard_normal(shape), requires_grad=requires_grad)


def test_scatter_gradient_with_a_src_larger_than_the_index():
    """PyTorch's backward rejects this; only the index-shaped corner of src gets gradient."""
    x, src = _float64(3, 4), _float64(2, 5)
    idx = flow.tensor([[0, 1, 2], [2, 0, 1]])
    f = lambda a, b: flow.scatter(a, 1, idx.T.contiguous()[:2], b)  # noqa: E731
    assert flow.autograd.gradcheck(f, (x, src))
    assert flow.autograd.gradgradcheck(f, (x, src))
    g = lambda a, b: flow.scatter_add(a, 0, idx, b)  # noqa: E731
    assert flow.autograd.gradcheck(g, (x, _float64(3, 5)))


def test_scatter_reduce_prod_has_no_gradient():
    x = _float64(3)
    y = flow.scatter_reduce(x, 0, flow.tensor([0, 0]), flow.ones(2, dtype=flow.float64), "prod")
    with pytest.raises(AutogradError, match=r"reduce='prod' is not implemented"):
        y.sum().backward()


def test_scatter_reduce_amax_shares_gradient_between_ties():
    x = flow.tensor([1.0, 5.0], requires_grad=True)
    src = flow.tensor([1.0, 1.0, 3.0], requires_grad=True)
    y = flow.scatter_reduce(x, 0, flow.tensor([0, 0, 1]), src, "amax")
    y.sum().backward()
    assert x.grad.tolist() == pytest.approx([1 / 3, 1.0])
    assert src.grad.tolist() == pytest.approx([1 / 3, 1 / 3, 0.0])


def test_scatter_reduce_in_place_keeps_the_original_for_backward():
    a = flow.tensor([1.0, 5.0], requires_grad=True)
    src = flow.tensor([3.0, 2.0], requires_grad=True)
    x = a.clone()
    x.scatter_reduce_(0, flow.tensor([0, 1]), src, "amax")
    assert x.tolist() == [3.0, 5.0]
    x.sum().backward()
    assert a.grad.tolist() == [0.0, 1.0] and src.grad.tolist() == [1.0, 0.0]


def test_scatter_in_place_bumps_the_version():
    x = flow.zeros(3)
    x.scatter_(0, flow.tensor([1]), flow.tensor([2.0]))
    assert x.tolist() == [0.0, 2.0, 0.0] and x._version[0] == 1


def test_scatter_add_accumulates_half_precision_in_float32():
    x = flow.zeros(1, dtype=flow.float16)
    src = flow.full((4096,), 1.0, dtype=flow.float16)
    y = flow.scatter_add(x, 0, flow.zeros(4096, dtype=flow.int64), src)
    assert y.item() == 4096.0  # adding 1 step by step in float16 stalls at 2048


# -- index_select / index_add / index_copy / index_fill -------------------------------------------
def test_index_ops_errors():
    x = _t(3, 4)
    with pytest.raises(ShapeError, match=r"index_select: index is supposed to be a vector"):
        flow.index_select(x, 0, flow.tensor([[0]]))
    with pytest.raises(IndexError, match=r"index_select: index 3 is out of bounds"):
        flow.index_select(x, 0, flow.tensor([3]))
    with pytest.raises(DTypeError, match=r"index_copy: expected an index tensor of dtype int64"):
        flow.index_copy(
            x, 0, flow.tensor([0], dtype=flow.int32), flow.zeros(1, 4, dtype=flow.float64)
        )
    with pytest.raises(ShapeError, match=r"index_add: source of shape \[2, 4\] must be"):
        flow.index_add(x, 0, flow.tensor([0]), flow.zeros(2, 4, dtype=flow.float64))
    with pytest.raises(DTypeError, match=r"alpha must not be a floating point number"):
        flow.index_add(
            flow.zeros(3, dtype=flow.int64),
            0,
            flow.tensor([0]),
            flow.ones(1, dtype=flow.int64),
            alpha=1.5,
        )
    with pytest.raises(ShapeError, match=r"index_fill: only a 0-dimensional value tensor"):
        flow.index_fill(x, 0, flow.tensor([0]), flow.tensor([1.0]))


def test_index_fill_value_gradient_counts_each_filled_position_once():
    x = _float64(3, 2)
    v = flow.tensor(2.0, dtype=flow.float64, requires_grad=True)
    flow.index_fill(x, 0, flow.tensor([0, 0, 2]), v).sum().backward()
    assert v.grad.item() == 4.0
    assert x.grad.tolist() == [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]


# -- masking ------------------------------------------------------------------------------------
def test_mask_ops_require_bool_masks():
    x = _t(3)
    with pytest.raises(DTypeError, match=r"masked_fill: expected a bool mask, got tideflow.int64"):
        flow.masked_fill(x, flow.tensor([1, 0, 1]), 1.0)
    with pytest.raises(
        DTypeError, match=r"masked_select: expected a bool mask, got tideflow.uint8"
    ):
        flow.masked_select(x, flow.tensor([1, 0, 1], dtype=flow.uint8))
    with pytest.raises(ShapeError, match=r"masked_fill: only a 0-dimensional value tensor"):
        flow.masked_fill(x, flow.tensor([True, False, True]), flow.tensor([1.0]))


def test_masked_scatter_needs_enough_source():
    with pytest.raises(ShapeError, match=r"source has 2 elements, fewer than the 3 True"):
        flow.masked_scatter(flow.zeros(3), flow.tensor([True, True, True]), flow.zeros(2))


def test_masked_fill_in_place():
    x = flow.zeros(2, 2)
    x.masked_fill_(flow.tensor([True, False]), 3.0)
    assert x.tolist() == [[3.0, 0.0], [3.0, 0.0]]


# -- take ---------------------------------------------------------------------------------------
def test_take_errors():
    x = _t(2, 3)
    with pytest.raises(
        IndexError, match=r"take: out of range: tried to access index 6 on a tensor of 6"
    ):
        flow.take(x, flow.tensor([6]))
    with pytest.raises(DTypeError, match=r"take: expected an index tensor of dtype int64"):
        flow.take(x, flow.tensor([1], dtype=flow.int32))
    with pytest.raises(ShapeError, match=r"take_along_dim: input and indices should have the same"):
        flow.take_along_dim(x, flow.tensor([0]), dim=0)


# -- nonzero ------------------------------------------------------------------------------------
def test_nonzero_of_a_scalar():
    assert tuple(flow.nonzero(flow.tensor(5)).shape) == (1, 0)
    (only,) = flow.nonzero(flow.tensor(5), as_tuple=True)
    assert only.tolist() == [0]
    (none,) = _where_single(flow.tensor(0))
    assert none.tolist() == []


def test_data_dependent_ops_are_registered():
    assert set(all_ops()) >= DATA_DEPENDENT
    assert flow.nonzero(flow.tensor([0, 3, 0, 4])).tolist() == [[1], [3]]


# -- sorting ------------------------------------------------------------------------------------
def test_sort_puts_nan_last_ascending_and_first_descending():
    x = flow.tensor([1.0, float("nan"), 0.0])
    asc = flow.sort(x)
    desc = flow.sort(x, descending=True)
    assert asc.indices.tolist() == [2, 0, 1] and desc.indices.tolist() == [1, 0, 2]
    assert flow.topk(x, 1).indices.tolist() == [1]


def test_sort_is_stable_in_both_directions():
    x = flow.tensor([1, 2, 1, 2])
    assert flow.sort(x, stable=True).indices.tolist() == [0, 2, 1, 3]
    assert flow.sort(x, descending=True, stable=True).indices.tolist() == [1, 3, 0, 2]
    assert x.argsort(descending=True, stable=True).tolist() == [1, 3, 0, 2]


def test_sort_result_fields():
    values, indices = flow.tensor([3.0, 1.0]).sort()
    result = flow.sort(flow.tensor([3.0, 1.0]))
    assert result.values.tolist() == values.tolist() == [1.0, 3.0]
    assert result.indices.tolist() == indices.tolist() == [1, 0]


def test_selection_errors():
    with pytest.raises(ShapeError, match=r"topk: selected index k=3 out of range"):
        flow.topk(flow.tensor([1.0, 2.0]), 3)
    with pytest.raises(
        ShapeError, match=r"kthvalue: selected number k=4 out of range for dimension 0"
    ):
        flow.kthvalue(flow.tensor([3.0, 1.0, 2.0]), 4)


# -- unique -------------------------------------------------------------------------------------
def test_unique_keeps_nans_apart():
    out = flow.unique(flow.tensor([float("nan"), 1.0, float("nan")]))
    assert out.shape == (3,) and out[0].item() == 1.0


def test_unique_result_shapes():
    x = flow.tensor([[3, 1], [3, 1], [0, 0]])
    values, inverse, counts = flow.unique(x, dim=0, return_inverse=True, return_counts=True)
    assert values.tolist() == [[0, 0], [3, 1]]
    assert inverse.tolist() == [1, 1, 0] and counts.tolist() == [1, 2]
    values, counts = x.unique_consecutive(return_counts=True)
    assert values.tolist() == [3, 1, 3, 1, 0] and counts.tolist() == [1, 1, 1, 1, 2]


# -- searching and counting ---------------------------------------------------------------------
def test_searchsorted_errors():
    seq = flow.tensor([[1, 3, 5], [2, 4, 6]])
    with pytest.raises(TideflowError, match=r"side and right can't be set to opposites"):
        flow.searchsorted(seq[0], flow.tensor([3]), side="left", right=True)
    with pytest.raises(ShapeError, match=r"first N-1 dimensions must match"):
        flow.searchsorted(seq, flow.tensor([3, 6]))
    with pytest.raises(ShapeError, match=r"boundaries tensor should have at least one dimension"):
        flow.searchsorted(flow.tensor(1), flow.tensor([3]))
    with pytest.raises(ShapeError, match=r"bucketize: boundaries tensor must be 1-d"):
        flow.bucketize(flow.tensor([1]), seq)


def test_batched_searchsorted_matches_row_by_row():
    rng = np.random.default_rng(0)
    seq = np.sort(rng.integers(0, 6, size=(4, 7)), axis=1)
    values = rng.integers(-1, 8, size=(4, 9))
    for right in (False, True):
        got = flow.searchsorted(flow.tensor(seq), flow.tensor(values), right=right).numpy()
        side = "right" if right else "left"
        want = np.stack([np.searchsorted(s, v, side) for s, v in zip(seq, values, strict=True)])
        np.testing.assert_array_equal(got, want)


def test_bincount_errors():
    with pytest.raises(TideflowError, match=r"bincount: only supports non-negative inputs"):
        flow.bincount(flow.tensor([0, -1]))
    with pytest.raises(
        TideflowError, match=r"1-d non-negative integral inputs, got shape \[1, 1\]"
    ):
        flow.bincount(flow.tensor([[0]]))
    with pytest.raises(TideflowError, match=r"minlength should be >= 0"):
        flow.bincount(flow.tensor([1]), minlength=-1)


def test_histc_errors():
    with pytest.raises(
        DTypeError, match=r"histc: expected a floating point input, got tideflow.int64"
    ):
        flow.histc(flow.tensor([1, 2]))
    with pytest.raises(TideflowError, match=r"histc: bins must be > 0"):
        flow.histc(flow.tensor([1.0]), bins=0)
    with pytest.raises(TideflowError, match=r"histc: max must be larger than min"):
        flow.histc(flow.tensor([1.0]), bins=3, min=2, max=1)
