"""nn.functional resampling: `interpolate` / `upsample`, and the separable resampling op shared
by interpolation, average and adaptive average pooling and the reflect/replicate/circular pads.

Each of those maps is separable: along one spatial dim, output j is a weighted sum of a few
input positions ("taps"). `resample(x, taps)` applies one `Taps` table per trailing dim,
touching only the real taps (gathers, or a sparse matrix for wide windows), never a dense
matrix, so an inf or NaN reaches only the outputs that read it, as in PyTorch. Its gradient
`resample_backward` scatters through the same tables; each op is the other's gradient, so
gradients of any order stay exact.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from scipy import sparse

from ...framework.errors import DTypeError, ShapeError, UnsupportedError
from ...framework.tensor import Tensor
from .._rules import B, Meta, P, S, Signature, checked, defop, dispatch, int_arg, tensor_arg

__all__ = [
    "interpolate",
    "upsample",
    "upsample_nearest",
    "upsample_bilinear",
    "pixel_shuffle",
    "pixel_unshuffle",
    "channel_shuffle",
    "native_channel_shuffle",
]


class Taps(NamedTuple):
    """Resampling along one dim: `out[j] = sum_t weight[j, t] * in[index[j, t]]`.

    `index` is (out_size, taps) int64, -1 marking an unused tap (a window cut by the border:
    skipped, not multiplied by 0); `weight` has the same shape, or is None when every tap
    weighs 1 (pure gathers and sums: exact for integer dtypes).
    """

    index: np.ndarray
    weight: np.ndarray | None
    in_size: int

    @property
    def out_size(self) -> int:
        return self.index.shape[0]


def make_taps(index: np.ndarray, weight: np.ndarray | None, in_size: int) -> Taps:
    """Taps with read-only tables (builders cache them; kernels must not write into them)."""
    index = np.ascontiguousarray(index, dtype=np.int64).reshape(len(index), -1)
    index.flags.writeable = False
    if weight is not None:
        weight = np.ascontiguousarray(weight).reshape(index.shape)
        weight.flags.writeable = False
    return Taps(index, weight, in_size)


def is_half(dtype: np.dtype) -> bool:
    return dtype == np.float16 or dtype.name == "bfloat16"


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """float16/bfloat16 compute in float32 (as PyTorch's CPU kernels accumulate)."""
    return np.dtype(np.float32) if is_half(dtype) else dtype


def compute_array(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if is_half(x.dtype) else x


# -- the resampling op pair -----------------------------------------------------------------
def _tail(a: np.ndarray, axis: int) -> tuple:
    return (1,) * (a.ndim - axis - 1)


def _matrix(taps: Taps, dtype) -> sparse.csr_matrix:
    """The taps as an (out_size, in_size) sparse matrix. Only real taps are stored (a weight
    of exactly 0 stays stored, so 0 * inf is NaN there, as in PyTorch); repeated indices sum."""
    valid = taps.index >= 0
    rows = np.broadcast_to(np.arange(taps.out_size)[:, None], taps.index.shape)[valid]
    data = np.ones(rows.size, dtype) if taps.weight is None else taps.weight[valid].astype(dtype)
    shape = (taps.out_size, taps.in_size)
    return sparse.csr_matrix((data, (rows, taps.index[valid])), shape=shape)


def _matmul(matrix: sparse.csr_matrix, a: np.ndarray, axis: int) -> np.ndarray:
    """`matrix` applied along `axis` of `a` (a sparse product over the axis moved first)."""
    moved = np.moveaxis(a, axis, 0)
    rest = moved.shape[1:]
    out = matrix @ moved.reshape(moved.shape[0], math.prod(rest))
    return np.moveaxis(out.reshape(matrix.shape[0], *rest), 0, axis)


_MAX_GATHER_TAPS = 4  # wider windows (pooling) take one sparse product, not one pass per tap


def _gather(a: np.ndarray, taps: Taps, axis: int) -> np.ndarray:
    """Apply `taps` along `axis` of `a`: a gather per tap, weighted and summed in tap order
    (PyTorch's order)."""
    if taps.index.shape[1] > _MAX_GATHER_TAPS:
        return _matmul(_matrix(taps, a.dtype), a, axis)
    out = None
    for t in range(taps.index.shape[1]):
        col = taps.index[:, t]
        valid = col >= 0
        complete = bool(valid.all())
        part = np.take(a, col if complete else np.where(valid, col, 0), axis)
        if taps.weight is not None:
            part *= taps.weight[:, t].astype(a.dtype).reshape(-1, *_tail(a, axis))
        if out is None and complete:
            out = part
            continue
        if out is None:
            out = np.zeros_like(part)
        if complete:
            out += part
        else:
            np.add(out, part, out=out, where=valid.reshape(-1, *_tail(a, axis)))
    return out


def _scatter(g: np.ndarray, taps: Taps, axis: int) -> np.ndarray:
    """The adjoint of `_gather`: the transposed sparse matrix along `axis` (a scatter-add over
    the real taps only; ~10x faster than NumPy's reduceat/add.at scatters)."""
    return _matmul(_matrix(taps, g.dtype).T.tocsr(), g, axis)


def _apply(x: np.ndarray, taps: tuple, step) -> np.ndarray:
    nd = len(taps)
    out = compute_array(x)
    for i in reversed(range(nd)):  # the last dim first, as PyTorch's interpolation kernels
        if taps[i] is not None:
            out = step(out, taps[i], x.ndim - nd + i)
    if out is x:
        out = x.copy()
    return np.ascontiguousarray(out.astype(x.dtype, copy=False))


def _resample_shape(op: str, x: Meta, taps: tuple, backward: bool) -> tuple:
    nd = len(taps)
    if x.ndim < nd:
        raise ShapeError(f"{op}: expected at least {nd} dims, got input of shape {list(x.shape)}")
    lead, spatial = x.shape[: x.ndim - nd], x.shape[x.ndim - nd :]
    out = []
    for size, t in zip(spatial, taps, strict=True):
        if t is None:
            out.append(size)
            continue
        have, give = (t.out_size, t.in_size) if backward else (t.in_size, t.out_size)
        if size != have:
            raise ShapeError(
                f"{op}: the resampling tables expect spatial size {have}, got input of shape "
                f"{list(x.shape)}"
            )
        out.append(give)
    return (*lead, *out)


def _resample_meta(op: str, backward: bool):
    def meta(x: Meta, *, taps) -> Meta:
        if not x.dtype.is_floating_point and any(
            t is not None and t.weight is not None for t in taps
        ):
            raise DTypeError(
                f"{op}: weighted resampling needs a floating point input, got {x.dtype}"
            )
        return Meta(_resample_shape(op, x, taps, backward), x.dtype)

    return meta


def _resample_sbp(x: Meta, *, taps) -> list[Signature]:
    """Linear along the resampled dims, independent across the leading ones."""
    sigs = [Signature((B,), (B,)), Signature((P,), (P,))]
    sigs += [Signature((S(i),), (S(i),)) for i in range(x.ndim - len(taps))]
    return sigs


def _resample_onnx(g, x, *, taps):
    """Each resampled dim as a product with its taps' dense (out, in) matrix."""
    dtype = g.meta(x).dtype
    if not dtype.is_floating_point:
        raise UnsupportedError(
            f"onnx.export: resampling (interpolation, pooling, padding) of {dtype.name} "
            "tensors: it lowers to matrix products, which ONNX runtimes compute on floats"
        )
    ndim = len(g.meta(x).shape)
    for i in reversed(range(len(taps))):  # the last dim first, as the kernel
        if taps[i] is None:
            continue
        matrix = _matrix(taps[i], np.float64).toarray()
        axis = ndim - len(taps) + i
        if axis == ndim - 1:
            x = g.op("MatMul", x, g.constant(matrix.T, dtype))
        elif axis == ndim - 2:
            x = g.op("MatMul", g.constant(matrix, dtype), x)
        else:
            perm = [*range(axis), *range(axis + 1, ndim), axis]
            moved = g.op("MatMul", g.op("Transpose", x, perm=perm), g.constant(matrix.T, dtype))
            back = [*range(axis), ndim - 1, *range(axis, ndim - 1)]
            x = g.op("Transpose", moved, perm=back)
    return x


_resample = defop(
    "resample",
    inputs=("input",),
    meta=_resample_meta("resample", backward=False),
    sbp=_resample_sbp,
    kernels={"cpu": lambda x, *, taps: _apply(x, taps, _gather)},
    grad=lambda ctx, gy: (resample_backward(gy, ctx.taps),),
    onnx=_resample_onnx,
)
_resample_backward = defop(
    "resample_backward",
    inputs=("input",),
    meta=_resample_meta("resample_backward", backward=True),
    sbp=_resample_sbp,
    kernels={"cpu": lambda g, *, taps: _apply(g, taps, _scatter)},
    grad=lambda ctx, gg: (resample(gg, ctx.taps),),
)


def resample(input, taps: tuple):
    """Apply one `Taps` table (or None: unchanged) to each of the trailing `len(taps)` dims."""
    return dispatch(_resample, (input,), {"taps": tuple(taps)})


def resample_backward(grad, taps: tuple):
    """The adjoint of `resample(., taps)`: `grad` scattered back through the tables."""
    return dispatch(_resample_backward, (grad,), {"taps": tuple(taps)})


# -- tables of the interpolation modes (PyTorch's UpSample.h, in its arithmetic) ------------
def _opmath(dtype: np.dtype) -> type:
    """The precision PyTorch computes source positions and weights in: float64 for double."""
    return np.float64 if dtype == np.float64 else np.float32


@functools.lru_cache(maxsize=256)
def nearest_taps(in_size: int, out_size: int, scale: float | None, exact: bool) -> Taps:
    """'nearest' (floor(j * scale)) or 'nearest-exact' (floor((j + 0.5) * scale)), in float32
    like PyTorch (whose legacy 'nearest' copies when sizes agree and halves for a 2x output)."""
    j = np.arange(out_size)
    if not exact and out_size == in_size:
        src = j
    elif not exact and out_size == 2 * in_size:
        src = j >> 1
    else:
        s = np.float32(1.0 / scale) if scale else np.float32(in_size) / np.float32(out_size)
        if exact:
            src = np.floor(((j + 0.5) * np.float64(s)).astype(np.float32)).astype(np.int64)
        else:
            src = np.floor(j.astype(np.float32) * s).astype(np.int64)
        src = np.minimum(src, in_size - 1)
    return make_taps(src, None, in_size)


def _source_scale(in_size, out_size, scale, align_corners, opmath):
    """`area_pixel_compute_scale`: input pixels per output pixel."""
    if align_corners:
        return opmath(in_size - 1) / opmath(out_size - 1) if out_size > 1 else opmath(0)
    if scale:
        return opmath(1.0 / scale)
    return opmath(in_size) / opmath(out_size)


def _source_index(in_size, out_size, scale, align_corners, opmath, cubic) -> np.ndarray:
    """`area_pixel_compute_source_index` for every output position."""
    s = _source_scale(in_size, out_size, scale, align_corners, opmath)
    j = np.arange(out_size).astype(opmath)
    if align_corners:
        return s * j
    src = s * (j + opmath(0.5)) - opmath(0.5)
    return src if cubic else np.maximum(src, opmath(0))


def _guard(src: np.ndarray, in_size: int, opmath) -> tuple[np.ndarray, np.ndarray]:
    """`guard_index_and_lambda`: the tap left of `src` (at most the last pixel) and the
    fractional position past it, clamped to [0, 1]."""
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    return i0, np.clip(src - i0.astype(opmath), 0, 1).astype(opmath)


@functools.lru_cache(maxsize=256)
def linear_taps(in_size, out_size, scale, align_corners, opmath) -> Taps:
    """Two taps (left, right) weighted (1 - t, t); equal sizes copy (PyTorch's shortcut)."""
    if in_size == out_size:
        i0 = np.arange(in_size)
        w1 = np.zeros(in_size, opmath)
    else:
        src = _source_index(in_size, out_size, scale, align_corners, opmath, cubic=False)
        i0, w1 = _guard(src, in_size, opmath)
    w0 = opmath(1) - w1
    i1 = i0 + (i0 < in_size - 1)
    return make_taps(np.stack([i0, i1], 1), np.stack([w0, w1], 1), in_size)


_CUBIC_A = -0.75  # PyTorch's (and OpenCV's) cubic convolution coefficient


@functools.lru_cache(maxsize=256)
def cubic_taps(in_size, out_size, scale, align_corners, opmath) -> Taps:
    """Keys' cubic convolution on 4 taps; taps past the border read the edge pixel."""
    src = _source_index(in_size, out_size, scale, align_corners, opmath, cubic=True)
    i0, t = _guard(src, in_size, opmath)
    a = opmath(_CUBIC_A)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    u = opmath(1) - t
    weight = np.stack([far(t + opmath(1)), near(t), near(u), far(u + opmath(1))], 1)
    index = np.clip(i0[:, None] + np.arange(-1, 3), 0, in_size - 1)
    return make_taps(index, weight, in_size)


@functools.lru_cache(maxsize=256)
def antialias_taps(in_size, out_size, scale, align_corners, cubic, opmath) -> Taps:
    """PyTorch's antialiased (PIL-style) taps: when shrinking, the triangle (bilinear) or
    cubic (a = -0.5) filter widens to cover `scale` input pixels; weights renormalized. The
    arithmetic follows `_compute_indices_min_size_weights_aa` promotion by promotion."""
    s = _source_scale(in_size, out_size, scale, align_corners, opmath)
    half_width = 2.0 if cubic else 1.0
    support = opmath(half_width * s) if s >= 1 else opmath(half_width)
    invscale = opmath(1.0 / s) if s >= 1 else opmath(1)
    width = math.ceil(support) * 2 + 1
    center = (s * (np.arange(out_size) + 0.5)).astype(opmath)
    xmin = np.maximum(np.trunc((center - support).astype(np.float64) + 0.5), 0).astype(np.int64)
    xmax = np.minimum(np.trunc((center + support).astype(np.float64) + 0.5), in_size)
    xsize = np.clip(xmax.astype(np.int64) - xmin, 0, width)
    pos = xmin[:, None] + np.arange(width)
    x = ((pos.astype(opmath) - center[:, None]).astype(np.float64) + 0.5) * invscale
    x = np.abs(x.astype(opmath)).astype(np.float64)
    if cubic:
        a = -0.5
        w = np.where(
            x < 1,
            ((a + 2) * x - (a + 3)) * x * x + 1,
            np.where(x < 2, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0.0),
        )
    else:
        w = np.maximum(1.0 - x, 0.0)
    inside = np.arange(width) < xsize[:, None]
    w = np.where(inside, w, 0.0).astype(opmath)
    total = w.sum(1, keepdims=True)
    w = np.where(total != 0, w / np.where(total != 0, total, 1), w)
    return make_taps(np.where(inside, pos, -1), w, in_size)


@functools.lru_cache(maxsize=256)
def adaptive_avg_taps(in_size: int, out_size: int) -> Taps:
    """Adaptive average pooling: window j is [floor(j*L/n), ceil((j+1)*L/n)), averaged."""
    j = np.arange(out_size)
    start = (j * in_size) // out_size
    end = -((-(j + 1) * in_size) // out_size)
    width = int((end - start).max(initial=0))
    index = start[:, None] + np.arange(width)
    inside = index < end[:, None]
    weight = np.where(inside, 1.0 / (end - start)[:, None], 0.0)
    return make_taps(np.where(inside, index, -1), weight, in_size)


# -- interpolate ----------------------------------------------------------------------------
_MODE_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", "area", *_MODE_DIMS)


def _per_dim(value, nd: int, what: str, input) -> list:
    if isinstance(value, tuple | list):
        if len(value) != nd:
            raise ShapeError(
                f"interpolate: input and output must have the same number of spatial "
                f"dimensions, but got input of shape {list(input.shape)} and {what} "
                f"{list(value)}; give the input as (N, C, d1, ..., dK) and {what} as K values"
            )
        return list(value)
    return [value] * nd


def _output_geometry(input, nd, size, scale_factor, recompute_scale_factor, mode):
    """(output sizes, scales handed to the kernels), following torch.nn.functional."""
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    spatial = input.shape[2:]
    if size is not None:
        if recompute_scale_factor:
            raise ValueError(
                "interpolate: recompute_scale_factor is not meaningful with an explicit size"
            )
        out = [int_arg("interpolate", "size", s) for s in _per_dim(size, nd, "output size", input)]
        scales = [None] * nd
    else:
        scales = [float(s) for s in _per_dim(scale_factor, nd, "scale_factor", input)]
        if not all(math.isfinite(s) for s in scales):  # NOTE: floor(inf) is an OverflowError
            raise ValueError(f"interpolate: scale_factor must be finite, got {scale_factor}")
        out = [math.floor(float(n) * s) for n, s in zip(spatial, scales, strict=True)]
        if recompute_scale_factor or mode == "area":
            scales = [None] * nd
    if any(o <= 0 for o in out):
        raise ShapeError(
            f"interpolate: the output size {out} of the input of shape {list(input.shape)} "
            "must be positive in every spatial dimension"
        )
    return out, scales


def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode="nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias=False,
):
    """Resize the spatial dims of a (N, C, d1, ..., dK) input, K = 1, 2 or 3, to `size` or by
    `scale_factor`: mode 'nearest', 'nearest-exact', 'linear' (K=1), 'bilinear' / 'bicubic'
    (K=2), 'trilinear' (K=3) or 'area' (adaptive average pooling). `align_corners=True` maps
    the corner pixels' centers onto each other; otherwise pixels are areas (the default).
    `antialias=True` (bilinear/bicubic) widens the filter when shrinking, like PIL.
    Indices and weights are computed in PyTorch's own arithmetic, so results match it.
    `flow.nn.functional.interpolate(x, scale_factor=2, mode="bilinear")`"""
    if mode not in _MODES:
        raise ValueError(f"interpolate: unknown mode {mode!r}; expected one of {list(_MODES)}")
    nd = tensor_arg("interpolate", "input", 1, input).ndim - 2
    if nd not in (1, 2, 3):
        raise ShapeError(
            f"interpolate: expected a 3-d, 4-d or 5-d input (N, C, d1, ...), got input of "
            f"shape {list(input.shape)}"
        )
    if mode in _MODE_DIMS and _MODE_DIMS[mode] != nd:
        raise ShapeError(
            f"interpolate: mode {mode!r} needs a {_MODE_DIMS[mode] + 2}-d input, got input of "
            f"shape {list(input.shape)}"
        )
    if align_corners is not None and mode not in _MODE_DIMS:
        raise ValueError(
            "interpolate: align_corners can only be set with the interpolating modes "
            "linear | bilinear | bicubic | trilinear"
        )
    if antialias and (mode not in ("bilinear", "bicubic") or nd != 2):
        raise ValueError(
            "interpolate: antialias is restricted to the bilinear and bicubic modes and a 4-d input"
        )
    if mode not in ("nearest", "nearest-exact") and not input.dtype.is_floating_point:
        raise DTypeError(
            f"interpolate: mode {mode!r} needs a floating point input, got {input.dtype}"
        )
    out, scales = _output_geometry(input, nd, size, scale_factor, recompute_scale_factor, mode)
    geometry = zip(input.shape[2:], out, scales, strict=True)
    if mode == "area":
        taps = [adaptive_avg_taps(n, o) for n, o, _ in geometry]
    elif mode in ("nearest", "nearest-exact"):
        taps = [nearest_taps(n, o, s, mode == "nearest-exact") for n, o, s in geometry]
    elif antialias:
        opmath, cubic = _opmath(input.dtype.np), mode == "bicubic"
        corners = bool(align_corners)
        taps = [antialias_taps(n, o, s, corners, cubic, opmath) for n, o, s in geometry]
    else:
        build = cubic_taps if mode == "bicubic" else linear_taps
        opmath, corners = _opmath(input.dtype.np), bool(align_corners)
        taps = [build(n, o, s, corners, opmath) for n, o, s in geometry]
    return resample(input, taps)


@checked
def upsample(input: Tensor, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of `interpolate` (kept for PyTorch compatibility)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


@checked
def upsample_nearest(input: Tensor, size=None, scale_factor=None):
    """`interpolate(input, size, scale_factor, mode='nearest')` (deprecated alias)."""
    return interpolate(input, size, scale_factor, mode="nearest")


@checked
def upsample_bilinear(input: Tensor, size=None, scale_factor=None):
    """`interpolate(..., mode='bilinear', align_corners=True)` (deprecated alias)."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# -- pixel shuffle: pure re-arrangements (reshape and permute views) -------------------------
def _check_shuffle(op: str, input, factor: int) -> None:
    if input.ndim < 3:
        raise ShapeError(
            f"{op}: expected an input of at least 3 dims (*, C, H, W), got shape "
            f"{list(input.shape)}"
        )
    if factor < 1:
        raise ShapeError(f"{op}: the factor must be positive, got {factor}")


@checked
def pixel_shuffle(input: Tensor, upscale_factor):
    """Move channel blocks into space: (*, C * r * r, H, W) -> (*, C, H * r, W * r), output
    pixel (h * r + i, w * r + j) of channel c reading channel c * r * r + i * r + j."""
    r = int(upscale_factor)
    _check_shuffle("pixel_shuffle", input, r)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ShapeError(
            f"pixel_shuffle: the channel dim ({c}) of the input of shape {list(input.shape)} "
            f"must be divisible by upscale_factor**2 = {r * r}"
        )
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)  # (*, C, H, r, W, r)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


@checked
def pixel_unshuffle(input: Tensor, downscale_factor):
    """The inverse of `pixel_shuffle`: (*, C, H * r, W * r) -> (*, C * r * r, H, W)."""
    r = int(downscale_factor)
    _check_shuffle("pixel_unshuffle", input, r)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise ShapeError(
            f"pixel_unshuffle: the spatial size ({h}, {w}) of the input of shape "
            f"{list(input.shape)} must be divisible by downscale_factor = {r}"
        )
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)  # (*, C, r, r, H, W)
    return x.reshape(*lead, c * r * r, h // r, w // r)


@checked
def channel_shuffle(input: Tensor, groups):
    """Interleave the channels of `groups` groups (ShuffleNet): (N, g * k, *) with channel
    i * k + j moving to j * g + i.

    >>> F.channel_shuffle(flow.arange(6.0).reshape(1, 6, 1), 3).flatten().tolist()
    [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]
    """
    g = int(groups)
    if input.ndim <= 2:
        raise ShapeError(
            "channel_shuffle: expected an input with more than 2 dims, got shape "
            f"{list(input.shape)}"
        )
    if g <= 0:
        raise ValueError(f"channel_shuffle: the number of groups must be positive, got {g}")
    n, c, *rest = input.shape
    if c % g:
        raise ShapeError(
            f"channel_shuffle: the number of channels ({c}) must be divisible by groups ({g})"
        )
    return input.reshape(n, g, c // g, *rest).transpose(1, 2).reshape(input.shape)


native_channel_shuffle = channel_shuffle
