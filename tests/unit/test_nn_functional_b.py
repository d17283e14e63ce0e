"""nn.functional part B beyond the op database: user-facing errors, PyTorch's corner cases
(NaN and -inf in max pooling, windows in the padding, half-precision rounding), gradients of
higher order through strided/grouped geometry, and layout guarantees of the outputs."""

import numpy as np
import pytest

import tideflow as flow
import tideflow.nn.functional as F
from tideflow.framework.errors import AutogradError, DTypeError, ShapeError


def _randn(*shape, seed=0, dtype=np.float64, **kw):
    return flow.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype), **kw)


# -- convolution errors ---------------------------------------------------------------------
def test_conv_channel_mismatch_names_weight_groups_and_input():
    msg = (
        r"conv2d: expected input with 3 channels \(weight shape \[8, 3, 3, 3\], groups=1\), "
        r"got input of shape \[1, 4, 8, 8\]"
    )
    with pytest.raises(ShapeError, match=msg):
        F.conv2d(flow.ones(1, 4, 8, 8), flow.ones(8, 3, 3, 3))


@pytest.mark.parametrize(
    ("call", "message"),
    [(lambda: F.conv2d(flow.ones(4, 8, 8), flow.ones(8, 3, 3, 3)),
      r"conv2d: expected input with 3 channels .* got input of shape \[4, 8, 8\]$"),
     (lambda: F.conv1d(flow.ones(1, 2), flow.ones(1, 1, 3)),
      r"conv1d: the kernel size \[3\] .* \(input shape \[1, 2\], padding"),
     (lambda: F.conv_transpose1d(flow.ones(2, 1), flow.ones(2, 1, 1), padding=1),
      r"conv_transpose1d: the output size \[-1\] computed from the input of shape \[2, 1\],")],
    ids=["channels", "kernel-too-large", "transposed-output-empty"],
)  # fmt: skip
def test_conv_errors_show_an_unbatched_input_as_passed(call, message):
    with pytest.raises(ShapeError, match=message):
        call()


def test_conv_groups_must_divide_the_channels():
    with pytest.raises(ShapeError, match=r"conv2d: the weight's 8 output channels are not "):
        F.conv2d(flow.ones(1, 9, 5, 5), flow.ones(8, 3, 3, 3), groups=3)
    with pytest.raises(ShapeError, match=r"conv_transpose2d: the weight's 5 input channels"):
        F.conv_transpose2d(flow.ones(1, 5, 5, 5), flow.ones(5, 3, 3, 3), groups=2)


def test_conv_kernel_larger_than_the_padded_input():
    msg = r"conv2d: the kernel size \[5, 3\] \(dilated\) is larger than the padded input size "
    with pytest.raises(ShapeError, match=msg + r"\[4, 6\]"):
        F.conv2d(flow.ones(1, 1, 2, 4), flow.ones(1, 1, 3, 3), padding=1, dilation=(2, 1))


def test_conv_input_rank_dtype_and_bias_checks():
    with pytest.raises(ShapeError, match=r"conv1d: expected a 2-d \(unbatched\) or 3-d"):
        F.conv1d(flow.ones(1, 1, 1, 5), flow.ones(1, 1, 2))
    with pytest.raises(DTypeError, match="conv2d: expected operands of one dtype, got input "):
        F.conv2d(flow.ones(1, 1, 3, 3), flow.ones(1, 1, 2, 2, dtype=flow.float64))
    with pytest.raises(ShapeError, match=r"conv2d: expected a bias of shape \[2\], got bias of "):
        F.conv2d(flow.ones(1, 1, 3, 3), flow.ones(2, 1, 2, 2), flow.ones(1))
    with pytest.raises(DTypeError, match="conv2d: bool tensors are not supported"):
        F.conv2d(flow.ones(1, 1, 3, 3, dtype=flow.bool), flow.ones(1, 1, 2, 2, dtype=flow.bool))


def test_conv_padding_arguments():
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        F.conv2d(flow.ones(1, 1, 5, 5), flow.ones(1, 1, 3, 3), stride=2, padding="same")
    with pytest.raises(ValueError, match="conv2d: padding must be 'valid', 'same' or ints"):
        F.conv2d(flow.ones(1, 1, 5, 5), flow.ones(1, 1, 3, 3), padding="full")
    with pytest.raises(ShapeError, match=r"conv2d: negative padding \[-1, -1\]"):
        F.conv2d(flow.ones(1, 1, 5, 5), flow.ones(1, 1, 3, 3), padding=-1)
    with pytest.raises(ShapeError, match="stride must be an int or a tuple of 2 ints"):
        F.conv2d(flow.ones(1, 1, 5, 5), flow.ones(1, 1, 3, 3), stride=(1, 2, 3))


def test_conv_transpose_output_padding_must_be_smaller_than_stride_or_dilation():
    with pytest.raises(ShapeError, match=r"output_padding \[2, 2\] must be smaller than"):
        F.conv_transpose2d(flow.ones(1, 1, 3, 3), flow.ones(1, 1, 3, 3), stride=2, output_padding=2)
    # smaller than the dilation is enough, as in PyTorch
    y = F.conv_transpose1d(flow.ones(1, 1, 3), flow.ones(1, 1, 3), dilation=2, output_padding=1)
    assert y.shape == (1, 1, 8)


# -- convolution behaviour ------------------------------------------------------------------
def test_same_padding_puts_the_odd_pixel_after():
    x = _randn(1, 1, 6)
    w = flow.tensor(np.array([[[1.0, 0.0]]]))  # y[i] = x[i - 0]: left pad 0, right pad 1
    y = F.conv1d(x, w, padding="same")
    np.testing.assert_array_equal(y.numpy(), x.numpy())


def test_conv_outputs_are_contiguous_and_viewable():
    y = F.conv2d(_randn(2, 3, 6, 6), _randn(4, 3, 3, 3), padding=1)
    assert y.is_contiguous()
    t = F.conv_transpose2d(_randn(2, 3, 4, 4), _randn(3, 2, 3, 3), stride=2, padding=1)
    assert t.is_contiguous() and t.view(2, -1).shape == (2, 2 * 7 * 7)


def test_integer_convolution_is_exact():
    x = flow.tensor(np.arange(2 * 9, dtype=np.int64).reshape(1, 2, 3, 3))
    w = flow.ones(1, 2, 2, 2, dtype=flow.int64)
    y = F.conv2d(x, w)
    assert y.dtype == flow.int64
    np.testing.assert_array_equal(y.numpy().ravel(), [52, 60, 76, 84])  # 8 + 44, ...


@pytest.mark.parametrize(
    "kw",
    [
        {"stride": 2, "padding": 1},
        {"stride": (2, 1), "dilation": (1, 2), "groups": 2},
        {"padding": "same", "dilation": 2},
    ],
)
def test_conv2d_second_order_gradients(kw):
    x = _randn(1, 2, 5, 4, requires_grad=True)
    w = _randn(2, 1 if kw.get("groups") else 2, 3, 2, seed=1, requires_grad=True)
    b = _randn(2, seed=2, requires_grad=True)
    assert flow.autograd.gradgradcheck(lambda x, w, b: F.conv2d(x, w, b, **kw), (x, w, b))


def test_conv_transpose_second_order_gradients_with_output_padding():
    x = _randn(1, 2, 3, 3, requires_grad=True)
    w = _randn(2, 2, 2, 3, seed=1, requires_grad=True)

    def f(x, w):
        return F.conv_transpose2d(x, w, stride=(2, 3), padding=(0, 1), output_padding=(1, 2))

    assert flow.autograd.gradcheck(f, (x, w))
    assert flow.autograd.gradgradcheck(f, (x, w))


def test_backward_after_an_in_place_change_of_the_input_raises():
    x = _randn(1, 1, 4, 4)
    w = _randn(1, 1, 2, 2, requires_grad=True)
    y = F.conv2d(x, w).sum()
    x.mul_(2)
    with pytest.raises(AutogradError, match=r"ConvBackward0 saved 'input'"):
        y.backward()


# -- padding --------------------------------------------------------------------------------
def test_pad_argument_errors():
    x = flow.ones(1, 2, 3)
    with pytest.raises(ShapeError, match="pad: the padding length must be even, got 3 values"):
        F.pad(x, (1, 1, 1))
    with pytest.raises(ValueError, match="pad: unknown padding mode 'wrap'"):
        F.pad(x, (1, 1), mode="wrap")
    with pytest.raises(ValueError, match="padding mode 'reflect' does not take a value"):
        F.pad(x, (1, 1), mode="reflect", value=2.0)
    with pytest.raises(ShapeError, match=r"pad: padding of 4 dims is too long for the input"):
        F.pad(x, (1,) * 8)
    with pytest.raises(ShapeError, match=r"dimension 2 of the input of shape \[1, 2, 3\] gives a "):
        F.pad(x, (-2, -2))


def test_pad_mode_limits():
    x = flow.ones(1, 2, 3)
    with pytest.raises(ShapeError, match=r"reflect padding \(3, 0\) must be less than the size 3"):
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(ShapeError, match="would wrap around more than once"):
        F.pad(x, (4, 0), mode="circular")
    with pytest.raises(ShapeError, match=r"replicate padding of the last 2 dims needs a 3-d"):
        F.pad(flow.ones(3), (1, 1, 1, 1), mode="replicate")


def test_constant_pad_fills_integers_and_crops():
    x = flow.tensor(np.arange(6).reshape(2, 3))
    y = F.pad(x, (1, -1), value=7)
    assert y.dtype == flow.int64
    np.testing.assert_array_equal(y.numpy(), [[7, 0, 1], [7, 3, 4]])


def test_reflect_pad_gradient_adds_the_mirrored_cotangents():
    x = flow.zeros(1, 1, 4, requires_grad=True)
    F.pad(x, (2, 3), mode="reflect").backward(flow.tensor(np.arange(9.0).reshape(1, 1, 9)))
    # positions read: [2, 1, 0, 1, 2, 3, 2, 1, 0]
    np.testing.assert_array_equal(x.grad.numpy().ravel(), [2 + 8, 1 + 3 + 7, 0 + 4 + 6, 5])


# -- pooling --------------------------------------------------------------------------------
def test_pool_argument_errors():
    x = flow.ones(1, 1, 4, 4)
    with pytest.raises(ShapeError, match=r"max_pool2d: padding \[2, 2\] should be at most half"):
        F.max_pool2d(x, 3, padding=2)
    with pytest.raises(ShapeError, match=r"avg_pool2d: the output size \[0, 0\] computed from"):
        F.avg_pool2d(x, 5)
    with pytest.raises(ShapeError, match=r"max_pool1d: expected a 2-d \(unbatched\) or 3-d"):
        F.max_pool1d(x, 2)
    with pytest.raises(DTypeError, match="avg_pool2d: expected a floating point input"):
        F.avg_pool2d(flow.ones(1, 1, 4, 4, dtype=flow.int64), 2)
    with pytest.raises(ShapeError, match="avg_pool2d: divisor_override must not be zero"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(DTypeError, match="max_pool2d: bool tensors are not supported"):
        F.max_pool2d(flow.ones(1, 1, 4, 4, dtype=flow.bool), 2)


def test_max_pool_nan_wins_and_the_last_nan_gives_the_index():
    x = flow.tensor(np.array([[[1.0, np.nan, np.nan, 2.0, 0.0, 5.0]]]))
    values, indices = F.max_pool1d(x, 3, return_indices=True)
    assert np.isnan(values.numpy()[0, 0, 0]) and values.numpy()[0, 0, 1] == 5.0
    np.testing.assert_array_equal(indices.numpy(), [[[2, 5]]])


def test_max_pool_ties_pick_the_first_and_padding_is_never_an_index():
    x = flow.tensor(np.array([[[-np.inf, -np.inf, -np.inf, 2.0, 2.0]]]))
    values, indices = F.max_pool1d(x, 3, stride=1, padding=1, return_indices=True)
    np.testing.assert_array_equal(values.numpy(), [[[-np.inf, -np.inf, 2.0, 2.0, 2.0]]])
    np.testing.assert_array_equal(indices.numpy(), [[[0, 0, 3, 3, 3]]])


def test_max_pool_indices_are_flat_positions_in_each_plane():
    x = _randn(2, 3, 5, 6)
    values, indices = F.max_pool2d(x, 2, stride=1, return_indices=True)
    planes = x.numpy().reshape(2, 3, 30)
    gathered = np.take_along_axis(planes, indices.numpy().reshape(2, 3, -1), 2)
    np.testing.assert_array_equal(gathered.reshape(values.shape), values.numpy())
    assert indices.dtype == flow.int64 and not indices.requires_grad


def test_overlapping_max_pool_windows_accumulate_gradients_to_second_order():
    x = _randn(1, 2, 4, 5, requires_grad=True)
    assert flow.autograd.gradcheck(lambda x: F.max_pool2d(x, 3, stride=1, padding=1), (x,))
    assert flow.autograd.gradgradcheck(lambda x: F.max_pool2d(x, 3, stride=1, padding=1), (x,))
    y = _randn(1, 2, 5, 7, requires_grad=True)
    assert flow.autograd.gradgradcheck(lambda y: F.adaptive_max_pool2d(y, (3, 4)), (y,))


def test_avg_pool_window_fully_in_the_padding_is_zero():
    # ceil_mode keeps a last window that starts in the right padding: PyTorch outputs 0 there
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((1, 1, 4))
    kw = {"kernel_size": 2, "stride": 3, "padding": 1, "ceil_mode": True}
    for include in (True, False):
        got = F.avg_pool1d(flow.tensor(x), count_include_pad=include, **kw).numpy()
        want = torch.nn.functional.avg_pool1d(torch.tensor(x), count_include_pad=include, **kw)
        np.testing.assert_allclose(got, want.numpy())


def test_adaptive_pool_output_size_none_keeps_the_input_size():
    y = F.adaptive_avg_pool2d(_randn(2, 3, 5, 7), (None, 2))
    assert y.shape == (2, 3, 5, 2)
    with pytest.raises(ShapeError, match="adaptive_max_pool2d: output_size must be an int or 2"):
        F.adaptive_max_pool2d(_randn(1, 5, 7), (1, 2, 3))


# -- interpolation --------------------------------------------------------------------------
def test_interpolate_argument_errors():
    x = flow.ones(1, 1, 4, 4)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners can only be set with the interpolating"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ShapeError, match=r"mode 'linear' needs a 3-d input, got input of shape"):
        F.interpolate(x, scale_factor=2, mode="linear")
    with pytest.raises(ShapeError, match=r"output size \[2\]"):
        F.interpolate(x, size=(2,))
    with pytest.raises(DTypeError, match="mode 'bilinear' needs a floating point input"):
        F.interpolate(flow.ones(1, 1, 4, 4, dtype=flow.int64), scale_factor=2, mode="bilinear")
    with pytest.raises(ValueError, match="antialias is restricted to the bilinear and bicubic"):
        F.interpolate(x, scale_factor=0.5, antialias=True)
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful"):
        F.interpolate(x, size=2, recompute_scale_factor=True)


def test_nearest_indices_match_pytorch_over_many_sizes():
    torch = pytest.importorskip("torch")
    x = np.arange(13.0 * 11).reshape(1, 1, 13, 11).astype(np.float32)
    for mode in ("nearest", "nearest-exact"):
        for size in [(1, 1), (5, 3), (26, 22), (7, 29), (39, 4)]:
            got = F.interpolate(flow.tensor(x), size=size, mode=mode).numpy()
            want = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode=mode)
            np.testing.assert_array_equal(got, want.numpy(), err_msg=f"{mode} {size}")
        for scale in (0.3, 1.7, 2.5, 3.1):
            got = F.interpolate(flow.tensor(x), scale_factor=scale, mode=mode).numpy()
            want = torch.nn.functional.interpolate(torch.tensor(x), scale_factor=scale, mode=mode)
            np.testing.assert_array_equal(got, want.numpy(), err_msg=f"{mode} x{scale}")


def test_inf_reaches_only_the_outputs_that_read_it():
    x = np.zeros((1, 1, 6))
    x[0, 0, 0] = np.inf
    y = F.interpolate(flow.tensor(x), size=3, mode="area").numpy()
    assert np.isinf(y[0, 0, 0]) and np.all(y[0, 0, 1:] == 0)
    p = F.avg_pool1d(flow.tensor(x), 2, padding=1, count_include_pad=False).numpy()
    assert np.isinf(p[0, 0, 0]) and np.all(p[0, 0, 1:] == 0)  # windows [-1, 0], [1, 2], ...


def test_bicubic_antialias_second_order_gradients():
    x = _randn(1, 1, 6, 5, requires_grad=True)

    def f(x):
        return F.interpolate(x, size=(3, 2), mode="bicubic", antialias=True)

    assert flow.autograd.gradgradcheck(f, (x,))


# -- fold, unfold, pixel shuffle ------------------------------------------------------------
def test_fold_checks_the_number_of_blocks():
    msg = r"fold: the input's dimension 2 \(9\) must match the number of sliding blocks 5 \* 5"
    with pytest.raises(ShapeError, match=msg):
        F.fold(flow.ones(1, 8, 9), (6, 6), 2)
    with pytest.raises(ShapeError, match=r"fold: the input's dimension 1 \(7\) must be divisible"):
        F.fold(flow.ones(1, 7, 25), (6, 6), 2)
    with pytest.raises(ShapeError, match=r"unfold: no sliding block fits the spatial size"):
        F.unfold(flow.ones(1, 1, 2, 2), 3)


def test_fold_of_unfold_counts_how_often_each_pixel_is_covered():
    x = flow.ones(1, 1, 4, 4)
    y = F.fold(F.unfold(x, 3, padding=1), (4, 4), 3, padding=1).numpy()[0, 0]
    np.testing.assert_array_equal(y, [[4, 6, 6, 4], [6, 9, 9, 6], [6, 9, 9, 6], [4, 6, 6, 4]])


def test_unfold_of_a_1x1_kernel_does_not_alias_the_input():
    x = _randn(1, 2, 3, 3)
    before = x.numpy().copy()
    cols = F.unfold(x, 1)
    x.add_(1)
    np.testing.assert_array_equal(cols.numpy(), before.reshape(1, 2, 9))


def test_pixel_shuffle_round_trip_and_errors():
    x = _randn(2, 8, 3, 5)
    np.testing.assert_array_equal(F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2).numpy(), x.numpy())
    with pytest.raises(ShapeError, match=r"channel dim \(8\) .* divisible by upscale_factor\*\*2"):
        F.pixel_shuffle(x, 3)
    with pytest.raises(ShapeError, match=r"spatial size \(3, 5\) .* divisible by downscale"):
        F.pixel_unshuffle(x, 2)
