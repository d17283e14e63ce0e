"""Deformable convolution (Dai et al. 2017; with a modulation mask, Zhu et al. 2019):
`deform_conv2d` with torchvision.ops' (and OneFlow's) semantics.

Each kernel tap of each output pixel reads the input at its regular position plus a learned
(dy, dx) offset, bilinearly interpolated (zero outside the input) and optionally scaled by a
mask; the sampled columns then meet the weight in one matrix product per group. A composite
of the interpolation and matmul, so the gradients for the input, offsets, mask, weight and
bias come from those ops' rules.
"""

from __future__ import annotations

from ...framework.errors import DTypeError, ShapeError
from .. import creation, linalg
from .._rules import tensor_arg
from .conv import ntuple
from .grid_sampling import linear_sample

__all__ = ["deform_conv2d"]


def _out_size(n: int, k: int, s: int, p: int, d: int) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _check(input, offset, weight, bias, mask, out: tuple) -> tuple[int, int]:
    """(offset groups, weight groups), or a ShapeError naming every shape."""
    op = "deform_conv2d"
    shapes = (
        f"input {list(input.shape)}, offset {list(offset.shape)}, weight {list(weight.shape)}"
        + ("" if mask is None else f", mask {list(mask.shape)}")
    )
    if input.ndim != 4 or offset.ndim != 4 or weight.ndim != 4:
        raise ShapeError(f"{op}: input, offset and weight must be 4-d, got {shapes}")
    n, c, _, _ = input.shape
    o, c_per_group, kh, kw = weight.shape
    taps = kh * kw
    if c_per_group == 0 or taps == 0 or c % c_per_group or o % (c // c_per_group):
        raise ShapeError(
            f"{op}: the weight needs a non-empty kernel, its input channels must divide the "
            f"input's channels and its groups the output channels; got {shapes}"
        )
    channels = offset.shape[1]
    if channels == 0 or channels % (2 * taps) or c % (channels // (2 * taps)):
        raise ShapeError(
            f"{op}: offset must have 2 * offset_groups * kH * kW channels, offset_groups "
            f"dividing the input channels; got {shapes}"
        )
    groups = offset.shape[1] // (2 * taps)
    if tuple(offset.shape) != (n, offset.shape[1], *out):
        raise ShapeError(
            f"{op}: offset must be (N, 2 * offset_groups * kH * kW, {out[0]}, {out[1]}), got "
            f"{shapes}"
        )
    if mask is not None and tuple(mask.shape) != (n, groups * taps, *out):
        raise ShapeError(
            f"{op}: mask must be (N, offset_groups * kH * kW, {out[0]}, {out[1]}), got {shapes}"
        )
    if bias is not None and tuple(bias.shape) != (o,):
        raise ShapeError(f"{op}: bias must be ({o},), got {list(bias.shape)} with {shapes}")
    tensors = [t for t in (input, offset, weight, bias, mask) if t is not None]
    if len({t.dtype for t in tensors}) != 1 or not input.dtype.is_floating_point:
        raise DTypeError(
            f"{op}: the tensors must share one floating point dtype, got "
            f"{[str(t.dtype) for t in tensors]}"
        )
    return groups, c // c_per_group


def deform_conv2d(
    input, offset, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), mask=None
):
    """Deformable 2-d convolution of `input` (N, C, H, W) with `weight` (O, C / groups, kH,
    kW): tap k of output pixel (i, j) reads the input at (i * sH - pH + ky * dH + dy,
    j * sW - pW + kx * dW + dx), (dy, dx) = `offset`[:, 2k : 2k + 2, i, j] of the tap's
    offset group, bilinearly interpolated (zero outside), times `mask`[:, k, i, j] if given.
    `offset` is (N, 2 * offset_groups * kH * kW, H_out, W_out); `mask` (N, offset_groups * kH
    * kW, H_out, W_out). With zero offsets and no mask it is `conv2d`.
    `flow.nn.functional.deform_conv2d(x, flow.zeros(1, 18, 4, 4), w, padding=1)`"""
    op = "deform_conv2d"
    operands = (("input", input), ("offset", offset), ("weight", weight), ("bias", bias))
    for position, (name, value) in enumerate((*operands, ("mask", mask)), 1):
        if value is not None or name in ("input", "offset", "weight"):
            tensor_arg(op, name, 8 if name == "mask" else position, value)
    stride, padding, dilation = (
        ntuple(v, 2, op, what)
        for v, what in ((stride, "stride"), (padding, "padding"), (dilation, "dilation"))
    )
    if min(*stride, *dilation) <= 0 or min(padding) < 0:
        raise ShapeError(
            f"{op}: stride {stride} and dilation {dilation} must be positive, padding "
            f"{padding} not negative"
        )
    n, c, h, w = input.shape if input.ndim == 4 else (0, 0, 0, 0)
    kh, kw = weight.shape[2:] if weight.ndim == 4 else (0, 0)
    out = tuple(
        _out_size(size, k, s, p, d)
        for size, k, s, p, d in zip((h, w), (kh, kw), stride, padding, dilation, strict=True)
    )
    offset_groups, groups = _check(input, offset, weight, bias, mask, out)
    taps, pixels = kh * kw, out[0] * out[1]
    layout = {"dtype": input.dtype, **creation.on_placement_of(input)}
    # the regular sampling positions of every (tap, output pixel), then shifted by the offsets
    rows = creation.arange(out[0], **layout) * stride[0] - padding[0]
    cols = creation.arange(out[1], **layout) * stride[1] - padding[1]
    tap_rows = (creation.arange(kh, **layout) * dilation[0]).repeat_interleave(kw)
    tap_cols = (creation.arange(kw, **layout) * dilation[1]).repeat(kh)
    base_y = tap_rows.reshape(taps, 1, 1) + rows.reshape(1, out[0], 1)
    base_x = tap_cols.reshape(taps, 1, 1) + cols.reshape(1, 1, out[1])
    shifts = offset.reshape(n, offset_groups, taps, 2, *out)
    ys = (shifts[:, :, :, 0] + base_y).reshape(n * offset_groups, taps * pixels)
    xs = (shifts[:, :, :, 1] + base_x).reshape(n * offset_groups, taps * pixels)
    per_group = c // offset_groups
    flat_input = input.reshape(n * offset_groups, per_group, h * w)
    sampled = linear_sample(flat_input, [ys, xs], (h, w))  # (N * og, C / og, taps * pixels)
    sampled = sampled.reshape(n, offset_groups, per_group, taps, pixels)
    if mask is not None:
        sampled = sampled * mask.reshape(n, offset_groups, 1, taps, pixels)
    # columns (N, groups, C / groups * taps, pixels) against weight (groups, O / groups, ...)
    columns = sampled.reshape(n, groups, (c // groups) * taps, pixels)
    kernel = weight.reshape(groups, weight.shape[0] // groups, (c // groups) * taps)
    result = linalg.matmul(kernel, columns).reshape(n, weight.shape[0], *out)
    if bias is not None:
        result = result + bias.reshape(1, -1, 1, 1)
    return result
