"""nn.functional spatial transformers: `grid_sample` (sample an input at arbitrary points) and
`affine_grid` (the points of an affine map).

Both are composites of tideflow ops: `grid_sample` gathers the corners around each point and
weighs them with polynomials of the point's coordinates, so the gradients for the input (a
scatter through the gather) and for the grid (through the weights and the coordinate maps) and
every higher order come from the primitives' rules. Coordinates follow PyTorch's
GridSampler.h: normalized [-1, 1] -> pixels (`align_corners` says whether -1 and 1 are the
corner pixels' centers or their outer edges), then the padding mode's border or reflection.
"""

from __future__ import annotations

import itertools
import math

from ...framework import dtype as dtypes
from ...framework.errors import ArgumentError, DTypeError, ShapeError
from .. import binary, indexing, linalg, shape, unary
from .._rules import halves_in_float32, int_arg, tensor_arg
from ..creation import linspace, on_placement_of, zeros

__all__ = ["affine_grid", "grid_sample"]

_MODES = ("bilinear", "nearest")
_PADDING_MODES = ("zeros", "border", "reflection")


def _check_grid_sample(input, grid, mode: str, padding_mode: str) -> None:
    tensor_arg("grid_sample", "input", 1, input)
    tensor_arg("grid_sample", "grid", 2, grid)
    if mode not in _MODES:
        raise ValueError(f"grid_sample: mode must be one of {list(_MODES)}, got {mode!r}")
    if padding_mode not in _PADDING_MODES:
        raise ValueError(
            f"grid_sample: padding_mode must be one of {list(_PADDING_MODES)}, got {padding_mode!r}"
        )
    shapes = f"input of shape {list(input.shape)} and grid of shape {list(grid.shape)}"
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise ShapeError(
            f"grid_sample: expected a 4-d (N, C, H, W) or 5-d (N, C, D, H, W) input and a grid "
            f"of as many dims, got {shapes}"
        )
    if grid.shape[-1] != input.ndim - 2 or grid.shape[0] != input.shape[0]:
        raise ShapeError(
            f"grid_sample: the grid must be (N, *out, {input.ndim - 2}) with the input's batch "
            f"size, got {shapes}"
        )
    if any(s == 0 for s in input.shape[2:]):
        raise ShapeError(f"grid_sample: the input's spatial dims must be non-empty, got {shapes}")
    if input.dtype != grid.dtype or not input.dtype.is_floating_point:
        raise DTypeError(
            f"grid_sample: input and grid must have the same floating point dtype, got "
            f"{input.dtype} and {grid.dtype}"
        )


def _reflect(coord, twice_low: int, twice_high: int):
    """Fold `coord` into [twice_low / 2, twice_high / 2] by reflecting at both ends (the fold
    count's parity decides the direction); abs and fmod carry the gradient's sign flips."""
    if twice_low == twice_high:
        return coord * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = unary.abs(coord - low)
    extra = binary.fmod(distance, span)
    flips = unary.floor(distance / span).detach()
    even = binary.eq(binary.fmod(flips, 2), 0)
    return binary.where(even, extra + low, span - extra + low)


def _source_coordinate(coord, size: int, padding_mode: str, align_corners: bool):
    """`grid_sampler_compute_source_index`: a normalized coordinate in pixels of a dim of
    `size`, reflected and/or clipped by the padding mode."""
    pixel = (coord + 1) * ((size - 1) / 2) if align_corners else ((coord + 1) * size - 1) / 2
    if padding_mode == "reflection":
        twice = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        pixel = _reflect(pixel, *twice)
    if padding_mode != "zeros":
        pixel = unary.clamp(pixel, 0, size - 1)
    return pixel


# NOTE: PyTorch's kernels read coordinates that are not finite or beyond the int range as
# -100, outside every input (`safe_downgrade_to_int_range`)
_USABLE = 2.0**31 - 2


def _outside_if_unusable(pixel):
    usable = binary.logical_and(unary.isfinite(pixel), binary.lt(unary.abs(pixel), _USABLE))
    return binary.where(usable, pixel, -100.0)


def _gather_corner(flat_input, corner: list, sizes: tuple):
    """The input's values at integer positions `corner` (one (N, L) tensor per spatial dim),
    zero where a position falls outside: (N, C, L)."""
    inside = None
    linear = None
    for position, size in zip(corner, sizes, strict=True):
        ok = binary.logical_and(binary.ge(position, 0), binary.lt(position, size))
        inside = ok if inside is None else binary.logical_and(inside, ok)
        clipped = unary.clamp(position, 0, size - 1)
        linear = clipped if linear is None else linear * size + clipped
    n, c = flat_input.shape[:2]
    index = linear.unsqueeze(1).expand(n, c, linear.shape[-1])
    values = indexing.gather(flat_input, 2, index)
    return binary.where(inside.unsqueeze(1), values, 0.0)


@halves_in_float32
def _grid_sample(input, grid, mode: str, padding_mode: str, align_corners: bool):
    n, c, *sizes = input.shape
    nd = len(sizes)
    out_spatial = tuple(grid.shape[1:-1])
    flat_grid = grid.reshape(n, math.prod(out_spatial), nd)
    # NOTE: the grid's last axis is (x, y[, z]): x indexes the last input dim
    coords = [
        _source_coordinate(flat_grid[..., nd - 1 - d], sizes[d], padding_mode, align_corners)
        for d in range(nd)
    ]
    flat_input = input.reshape(n, c, math.prod(sizes))
    if mode == "nearest":
        # NOTE: round half to even, as PyTorch's nearbyint
        nearest = [unary.round(_outside_if_unusable(p)).detach().to(dtypes.int64) for p in coords]
        out = _gather_corner(flat_input, nearest, tuple(sizes))
        return out.reshape(n, c, *out_spatial)
    return linear_sample(flat_input, coords, tuple(sizes)).reshape(n, c, *out_spatial)


def linear_sample(flat_input, coords: list, sizes: tuple):
    """Bi/trilinear interpolation of `flat_input` (N, C, prod(sizes)) at the pixel positions
    `coords` (one (N, L) tensor per spatial dim, first dim first): (N, C, L). Corners outside
    the input read zero; the weights are polynomials of the positions, so gradients reach
    them."""
    coords = [_outside_if_unusable(p) for p in coords]
    lows = [unary.floor(p).detach() for p in coords]
    # factor 0: the low neighbour's weight (high - p); factor 1: the high one's (p - low)
    factors = [((low + 1) - p, p - low) for p, low in zip(coords, lows, strict=True)]
    positions = [low.to(dtypes.int64) for low in lows]
    out = None
    for offsets in itertools.product((0, 1), repeat=len(sizes)):
        corner = [pos + o for pos, o in zip(positions, offsets, strict=True)]
        weight = math.prod(f[o] for f, o in zip(factors, offsets, strict=True))
        term = _gather_corner(flat_input, corner, sizes) * weight.unsqueeze(1)
        out = term if out is None else out + term
    return out


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample `input` (N, C, H, W) at the points `grid` (N, H_out, W_out, 2) gives in
    normalized coordinates, x then y, -1 the left/top and 1 the right/bottom edge; 5-d inputs
    (N, C, D, H, W) take grids (N, D_out, H_out, W_out, 3). `mode` 'bilinear' (trilinear for
    5-d) or 'nearest'; `padding_mode` says what points outside read: 'zeros', the 'border'
    pixels, or the input's 'reflection'. `align_corners=True` puts -1 and 1 at the corner
    pixels' centers instead of their outer edges (default False). Differentiable in `input`
    and, for 'bilinear', in `grid`.
    `flow.nn.functional.grid_sample(x, flow.zeros(1, 4, 4, 2), align_corners=False)`"""
    _check_grid_sample(input, grid, mode, padding_mode)
    return _grid_sample(input, grid, mode, padding_mode, bool(align_corners))


def _line(steps: int, align_corners: bool, like):
    """`linspace_from_neg_one`: pixel centers in normalized coordinates, in `like`'s dtype
    and in PyTorch's order of operations."""
    layout = {"dtype": like.dtype, **on_placement_of(like)}
    if steps <= 1:
        return zeros(steps, **layout)
    line = linspace(-1.0, 1.0, steps, **layout)
    return line if align_corners else line * (steps - 1) / steps


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of the affine maps `theta`, (N, 2, 3) for a 4-d `size` (N, C, H, W)
    or (N, 3, 4) for a 5-d one: point (.., x, y[, z]) of the output grid is theta applied to
    the output pixel's normalized coordinates (x, y[, z], 1). Differentiable in `theta`.
    `flow.nn.functional.affine_grid(flow.eye(2, 3).unsqueeze(0), (1, 1, 4, 4), False)`"""
    tensor_arg("affine_grid", "theta", 1, theta)
    if not isinstance(size, tuple | list):
        raise ArgumentError(
            f"affine_grid(): argument 'size' must be a tuple of ints, not {type(size).__name__}"
        )
    size = tuple(int_arg("affine_grid", "size", s) for s in size)
    if any(s < 0 for s in size):
        raise ShapeError(f"affine_grid: size {list(size)} must not be negative")
    if len(size) not in (4, 5):
        raise ShapeError(f"affine_grid: size must be 4-d or 5-d (N, C, *spatial), got {size}")
    nd = len(size) - 2
    if tuple(theta.shape) != (size[0], nd, nd + 1):
        raise ShapeError(
            f"affine_grid: expected theta of shape {[size[0], nd, nd + 1]} for size "
            f"{list(size)}, got {list(theta.shape)}"
        )
    if not theta.dtype.is_floating_point:
        raise DTypeError(f"affine_grid: theta must be floating point, got {theta.dtype}")
    spatial = size[2:]
    # NOTE: the base grid's last axis is (x, y[, z], 1): x runs along the last spatial dim
    lines = [_line(s, bool(align_corners), theta) for s in spatial]
    axes = shape.meshgrid(*lines, indexing="ij")[::-1]
    ones = axes[0].new_ones(spatial)
    base = shape.stack([*axes, ones], dim=-1).reshape(math.prod(spatial), nd + 1)
    grid = linalg.matmul(base, theta.transpose(1, 2))
    return grid.reshape(size[0], *spatial, nd)
