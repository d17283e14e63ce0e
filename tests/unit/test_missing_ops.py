"""Ops added for PyTorch/OneFlow conformance: the errors users can cause (values and
gradients are checked against PyTorch through the op database records)."""

import pytest

import tideflow as flow
import tideflow.nn.functional as F
from tideflow.framework.errors import DTypeError, ShapeError


# -- grid_sample / affine_grid --------------------------------------------------------------
def test_grid_sample_names_both_shapes_when_the_grid_does_not_fit():
    x = flow.zeros(2, 3, 4, 4)
    with pytest.raises(ShapeError, match=r"grid_sample: .*\[2, 3, 4, 4\].*\[2, 5, 5, 3\]"):
        F.grid_sample(x, flow.zeros(2, 5, 5, 3), align_corners=False)
    with pytest.raises(ShapeError, match="batch size"):
        F.grid_sample(x, flow.zeros(1, 5, 5, 2), align_corners=False)


def test_grid_sample_refuses_mixed_dtypes_and_unknown_modes():
    x = flow.zeros(1, 1, 2, 2)
    with pytest.raises(DTypeError, match=r"grid_sample: .*float32 and .*float64"):
        F.grid_sample(x, flow.zeros(1, 1, 1, 2, dtype=flow.float64), align_corners=False)
    with pytest.raises(ValueError, match="grid_sample: mode"):
        F.grid_sample(x, flow.zeros(1, 1, 1, 2), mode="bicubic2")
    with pytest.raises(ValueError, match="grid_sample: padding_mode"):
        F.grid_sample(x, flow.zeros(1, 1, 1, 2), padding_mode="wrap")


def test_identity_affine_grid_samples_the_input_back():
    x = flow.randn(2, 3, 5, 4)
    theta = flow.eye(2, 3).unsqueeze(0).expand(2, 2, 3)
    for corners in (False, True):
        grid = F.affine_grid(theta, x.shape, align_corners=corners)
        y = F.grid_sample(x, grid, align_corners=corners)
        assert flow.allclose(y, x, atol=1e-6)


def test_affine_grid_names_the_expected_theta_shape():
    with pytest.raises(ShapeError, match=r"affine_grid: expected theta of shape \[1, 3, 4\]"):
        F.affine_grid(flow.zeros(1, 2, 3), (1, 1, 2, 2, 2), align_corners=False)


# -- as_strided, Tensor.unfold, batch_gather ------------------------------------------------
def test_as_strided_and_unfold_are_views_of_their_input():
    x = flow.arange(6.0)
    windows = x.unfold(0, 2, 2)
    strided = x.as_strided((3,), (2,))
    x.add_(1)
    assert windows.tolist() == [[1, 2], [3, 4], [5, 6]]
    assert strided.tolist() == [1, 3, 5]


def test_as_strided_names_the_elements_it_would_reach():
    with pytest.raises(ShapeError, match=r"as_strided: .*reach element 6, past the 6 elements"):
        flow.zeros(2, 3).as_strided((2, 2), (3, 1), 2)
    with pytest.raises(ShapeError, match="as_strided: got 2 sizes"):
        flow.zeros(6).as_strided((2, 2), (1,))


def test_unfold_refuses_windows_longer_than_the_dim():
    with pytest.raises(ShapeError, match=r"unfold: the window size 4 .* dim 1 \(of size 3\)"):
        flow.zeros(2, 3).unfold(1, 4, 1)
    with pytest.raises(ShapeError, match="step > 0"):
        flow.zeros(5).unfold(0, 2, 0)


def test_batch_gather_names_both_shapes():
    with pytest.raises(ShapeError, match=r"batch_gather: indices of shape \[3, 2\] .* \[2, 4\]"):
        flow.batch_gather(flow.zeros(2, 4), flow.zeros(3, 2, dtype=flow.int64))
