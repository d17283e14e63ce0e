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


# -- alpha dropout, LP pooling, max unpooling -----------------------------------------------
_SELU_SATURATION = 1.7580993408473766  # -SELU(-inf), in PyTorch's `_dropout_impl`


def test_alpha_dropout_maps_kept_and_dropped_units_affinely():
    p = 0.3
    x = flow.randn(4000, dtype=flow.float64)
    y = F.alpha_dropout(x, p, training=True)
    a = ((_SELU_SATURATION**2 * p + 1) * (1 - p)) ** -0.5
    dropped = flow.isclose(y, flow.full_like(y, -_SELU_SATURATION * a * (1 - p)))
    kept = flow.isclose(y, a * x + _SELU_SATURATION * a * p)
    assert bool((dropped | kept).all())
    # the fraction dropped: binomial, 5 standard deviations
    assert abs(dropped.double().mean().item() - p) < 5 * (p * (1 - p) / 4000) ** 0.5
    assert F.alpha_dropout(x, p) is x  # training defaults to False


def test_alpha_dropout_keeps_selu_activations_normalized():
    n = 200_000
    y = F.alpha_dropout(F.selu(flow.randn(n, dtype=flow.float64)), 0.4, training=True)
    # standard errors of a mean and a variance of n unit-variance samples, 5 of each
    assert abs(y.mean().item()) < 5 / n**0.5
    assert abs(y.var().item() - 1) < 5 * (2 / n) ** 0.5 * 1.5


def test_feature_alpha_dropout_drops_whole_channels():
    y = F.feature_alpha_dropout(flow.randn(3, 50, 4), 0.5, training=True)
    same = y[..., :1] - y[..., 1:]  # a dropped channel holds one value everywhere
    dropped = (same == 0).all(dim=-1)
    assert bool(dropped.any()) and not bool(dropped.all())
    with pytest.raises(ShapeError, match=r"feature_alpha_dropout: .* at least 2 dims"):
        F.feature_alpha_dropout(flow.randn(5), 0.5, training=True)


def test_max_unpool_inverts_max_pool_where_the_maxima_were():
    x = flow.rand(2, 3, 6, 6) + 1  # positive: the zeros around each maximum stay below it
    y, indices = F.max_pool2d(x, 2, return_indices=True)
    restored = flow.nn.MaxUnpool2d(2)(y, indices)
    assert restored.shape == x.shape
    assert flow.equal(F.max_pool2d(restored, 2), y)
    with pytest.raises(ShapeError, match=r"max_unpool2d: invalid output_size \[9, 6\]"):
        F.max_unpool2d(y, indices, 2, output_size=(9, 6))


def test_lp_pool_of_norm_one_sums_each_window():
    x = flow.rand(2, 3, 4, 4)
    assert flow.allclose(F.lp_pool2d(x, 1, 2), F.avg_pool2d(x, 2) * 4)
    assert (
        repr(flow.nn.LPPool1d(2, 3))
        == "LPPool1d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)"
    )


# -- CTC loss -------------------------------------------------------------------------------
def test_ctc_loss_of_a_certain_alignment_is_zero():
    # one frame per label, each certain: the only alignment has probability 1
    log_probs = flow.log(F.one_hot(flow.tensor([[1], [2]]), 3).double().clamp(min=1e-300))
    loss = F.ctc_loss(log_probs, flow.tensor([[1, 2]]), (2,), (2,), reduction="sum")
    assert abs(loss.item()) < 1e-12


def test_ctc_loss_names_the_lengths_that_do_not_fit():
    x = flow.randn(4, 2, 3).log_softmax(2)
    targets = flow.tensor([[1, 2], [2, 1]])
    with pytest.raises(ShapeError, match=r"ctc_loss: input_lengths \[5, 4\] must lie in \[0, 4\]"):
        F.ctc_loss(x, targets, (5, 4), (2, 2))
    with pytest.raises(ShapeError, match=r"ctc_loss: targets must be \(N, S\) with S >= .* = 3"):
        F.ctc_loss(x, targets, (4, 4), (3, 2))
    with pytest.raises(ShapeError, match=r"ctc_loss: target label 7 is not a class index"):
        F.ctc_loss(x, flow.tensor([[1, 7], [2, 1]]), (4, 4), (2, 2))
    with pytest.raises(ValueError, match="ctc_loss: reduction"):
        F.ctc_loss(x, targets, (4, 4), (2, 2), reduction="max")


# -- nn.common_types ------------------------------------------------------------------------
def test_common_types_has_pytorchs_aliases():
    torch_types = pytest.importorskip("torch.nn.common_types")
    from tideflow.nn import common_types

    def aliases(module):
        return {n for n in vars(module) if n.startswith("_") and n.endswith("_t")}

    assert aliases(common_types) == aliases(torch_types)


# -- keyword spellings ----------------------------------------------------------------------
def test_reshape_and_view_take_their_sizes_by_keyword():
    x = flow.arange(6.0)
    assert flow.reshape(x, shape=(2, 3)).shape == (2, 3)
    assert x.reshape(shape=[3, 2]).shape == (3, 2)
    assert x.view(size=(2, 3)).shape == (2, 3)
    with pytest.raises(TypeError, match=r"reshape\(\): give the sizes positionally or as shape="):
        x.reshape(2, shape=(2, 3))


# -- deform_conv2d --------------------------------------------------------------------------
def test_deform_conv2d_without_offsets_is_conv2d():
    f64 = {"dtype": flow.float64}
    x, w, b = flow.randn(2, 4, 5, 6, **f64), flow.randn(6, 2, 3, 3, **f64), flow.randn(6, **f64)
    y = F.deform_conv2d(x, flow.zeros(2, 18, 3, 2, **f64), w, b, stride=(1, 2))
    # float64 sums of 18 products of values of order 1: a few ulps apart
    assert flow.allclose(y, F.conv2d(x, w, b, stride=(1, 2), groups=2), rtol=1e-12, atol=1e-12)


def test_deform_conv2d_names_the_offset_shape_it_needs():
    x, w = flow.randn(1, 2, 4, 4), flow.randn(3, 2, 3, 3)
    with pytest.raises(ShapeError, match=r"deform_conv2d: offset must be \(N, 2 \* offset_groups"):
        F.deform_conv2d(x, flow.zeros(1, 18, 4, 4), w)
    with pytest.raises(ShapeError, match="deform_conv2d: mask must be"):
        F.deform_conv2d(x, flow.zeros(1, 18, 2, 2), w, mask=flow.ones(1, 8, 2, 2))
