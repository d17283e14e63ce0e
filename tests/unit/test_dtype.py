"""Type promotion follows PyTorch, checked against torch.result_type over every pair."""

import itertools

import numpy as np
import pytest

import tideflow as flow
from tideflow.framework import dtype as dtypes

torch = pytest.importorskip("torch")

NAMES = [d.name for d in dtypes.ALL]


def _torch_dtype(name):
    return getattr(torch, name)


def _name(torch_dtype):
    """PyTorch's dtype as tideflow names it: tideflow has no complex32 and computes in
    complex64 where PyTorch picks it (float16 with a complex operand)."""
    name = str(torch_dtype).replace("torch.", "")
    return "complex64" if name == "complex32" else name


@pytest.mark.parametrize(("a", "b"), list(itertools.product(NAMES, NAMES)))
def test_promote_types_matches_torch(a, b):
    ours = flow.promote_types(dtypes.to_dtype(a), dtypes.to_dtype(b))
    theirs = torch.promote_types(_torch_dtype(a), _torch_dtype(b))
    assert ours.name == _name(theirs)


@pytest.mark.parametrize("a", NAMES)
@pytest.mark.parametrize("scalar", [True, 3, 2.5, 1j])
@pytest.mark.parametrize("zero_dim", [False, True])
def test_result_type_with_scalars_and_zero_dim(a, scalar, zero_dim):
    shape = () if zero_dim else (2,)
    t = torch.zeros(shape, dtype=_torch_dtype(a))
    expected = _name(torch.result_type(t, scalar))
    groups = ([], [dtypes.to_dtype(a)]) if zero_dim else ([dtypes.to_dtype(a)], [])
    assert dtypes.result_type(*groups, [scalar]).name == expected


@pytest.mark.parametrize(("a", "b"), list(itertools.product(NAMES, NAMES)))
def test_dimensioned_beats_zero_dim_within_a_category(a, b):
    t = torch.zeros(2, dtype=_torch_dtype(a))
    z = torch.zeros((), dtype=_torch_dtype(b))
    expected = _name(torch.result_type(t, z))
    got = dtypes.result_type([dtypes.to_dtype(a)], [dtypes.to_dtype(b)], [])
    assert got.name == expected


def test_binary_op_results_use_torch_promotion():
    x = flow.tensor([1, 2, 3])
    assert (x * 2.5).dtype == flow.float32
    assert (x * 2).dtype == flow.int64
    h = flow.tensor([1.0], dtype=flow.float16)
    assert (h + flow.tensor(2.0, dtype=flow.float64)).dtype == flow.float16
    assert (h + flow.tensor([2.0], dtype=flow.float64)).dtype == flow.float64
    assert (flow.tensor([True]) + 1).dtype == flow.int64
    assert (flow.tensor([1], dtype=flow.uint8) + flow.tensor([1], dtype=flow.int8)).dtype == (
        flow.int16
    )
    assert (x / 2).dtype == flow.float32  # true division of integers gives the default float


def test_default_dtype_is_settable_and_restricted_to_floats():
    assert flow.get_default_dtype() == flow.float32
    try:
        flow.set_default_dtype(flow.float64)
        assert flow.tensor([1.5]).dtype == flow.float64
        assert flow.zeros(2).dtype == flow.float64
        assert (flow.tensor([1]) * 0.5).dtype == flow.float64
    finally:
        flow.set_default_dtype(flow.float32)
    with pytest.raises(flow.TideflowError, match="floating"):
        flow.set_default_dtype(flow.int32)


def test_dtype_objects():
    assert flow.float is flow.float32 and flow.long is flow.int64 and flow.half is flow.float16
    assert flow.bfloat16.is_floating_point and not flow.int8.is_floating_point
    assert repr(flow.float32) == "tideflow.float32"
    assert flow.tensor(np.zeros(2, np.float64)).dtype == flow.float64
    with pytest.raises(flow.TideflowError, match="not supported"):
        flow.from_numpy(np.zeros(2, np.uint32))
