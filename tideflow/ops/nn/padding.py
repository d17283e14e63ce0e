"""nn.functional padding: `pad` in the constant, reflect, replicate and circular modes.

Constant padding is its own op (negative amounts crop), whose gradient is the same op with the
amounts negated. The other modes read every output element from one input position along each
padded dim, so they are `resample` gathers; their gradient scatters back.
"""

from __future__ import annotations

import functools

import numpy as np

from ...framework.errors import ShapeError
from ...framework.tensor import Tensor
from .._onnx_rules import INT64_MAX
from .._rules import B, Meta, P, S, Signature, checked, defop, dispatch
from .sampling import make_taps, resample

__all__ = ["pad"]


def pad_or_crop(x: np.ndarray, pairs: tuple, value=0) -> np.ndarray:
    """`x` with `(before, after)` added to each of its trailing `len(pairs)` dims: positive
    amounts add `value`s, negative ones crop. Returns `x` itself when every amount is 0."""
    if not any(lo or hi for lo, hi in pairs):
        return x
    lead = (slice(None),) * (x.ndim - len(pairs))
    spatial = x.shape[len(lead) :]
    crop = tuple(
        slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in zip(spatial, pairs, strict=True)
    )
    x = x[lead + crop]
    if all(lo <= 0 and hi <= 0 for lo, hi in pairs):
        return x
    kept = x.shape[len(lead) :]
    grown = tuple(n + max(lo, 0) + max(hi, 0) for n, (lo, hi) in zip(kept, pairs, strict=True))
    out = np.full(x.shape[: len(lead)] + grown, value, dtype=x.dtype)
    inner = tuple(slice(max(lo, 0), max(lo, 0) + n) for n, (lo, _) in zip(kept, pairs, strict=True))
    out[lead + inner] = x
    return out


def _padded_shape(op: str, shape: tuple, pairs: tuple) -> tuple:
    nd = len(pairs)
    if nd > len(shape):
        raise ShapeError(
            f"{op}: padding of {nd} dims is too long for the input of shape {list(shape)} "
            f"(at most 2 values per dimension)"
        )
    out = list(shape)
    for i, (lo, hi) in enumerate(pairs):
        dim = len(shape) - nd + i
        out[dim] = shape[dim] + lo + hi
        if out[dim] < 0:
            raise ShapeError(
                f"{op}: the padding ({lo}, {hi}) of dimension {dim} of the input of shape "
                f"{list(shape)} gives a negative size {out[dim]}"
            )
    return tuple(out)


# -- constant padding -----------------------------------------------------------------------
def _constant_pad_kernel(x, *, pad, value):
    _padded_shape("pad", x.shape, pad)
    out = pad_or_crop(x, pad, value)
    return out.copy() if out.base is not None or out is x else out


def _constant_pad_sbp(x: Meta, *, pad, value) -> list[Signature]:
    """Dims that are not padded can be split; zeros pad a partial sum into a partial sum."""
    nd = len(pad)
    kept = [i for i in range(x.ndim) if i < x.ndim - nd or pad[i - (x.ndim - nd)] == (0, 0)]
    sigs = [Signature((B,), (B,))] + [Signature((S(i),), (S(i),)) for i in kept]
    if value == 0:
        sigs.append(Signature((P,), (P,)))
    return sigs


def _constant_pad_onnx(g, x, *, pad, value):
    if not any(lo or hi for lo, hi in pad):
        return g.op("Identity", x)  # onnxruntime pads no 0-d tensor, even by nothing
    ndim = len(g.meta(x).shape)
    first = ndim - len(pad)
    crops = [(d, max(-lo, 0), max(-hi, 0)) for d, (lo, hi) in enumerate(pad, first)]
    crops = [c for c in crops if c[1] or c[2]]
    if crops:  # negative amounts crop: a Slice (onnxruntime's Pad takes no negative pads)
        starts = g.ints([lo for _, lo, _ in crops])
        ends = g.ints([-hi if hi else INT64_MAX for _, _, hi in crops])
        x = g.op("Slice", x, starts, ends, g.ints([d for d, _, _ in crops]))
    lead = [0] * first
    pads = [*lead, *(max(lo, 0) for lo, _ in pad), *lead, *(max(hi, 0) for _, hi in pad)]
    return g.op("Pad", x, g.ints(pads), g.tensor(value, g.out[0].dtype), mode="constant")


_constant_pad = defop(
    "constant_pad",
    inputs=("input",),
    meta=lambda x, *, pad, value: Meta(_padded_shape("pad", x.shape, pad), x.dtype),
    sbp=_constant_pad_sbp,
    kernels={"cpu": _constant_pad_kernel},
    grad=lambda ctx, gy: (
        dispatch(
            _constant_pad, (gy,), {"pad": tuple((-lo, -hi) for lo, hi in ctx.pad), "value": 0}
        ),
    ),
    onnx=_constant_pad_onnx,
)


# -- reflect / replicate / circular: gathers --------------------------------------------------
@functools.lru_cache(maxsize=256)
def _pad_taps(mode: str, size: int, lo: int, hi: int):
    """The input position of every output position of one padded dim (PyTorch's semantics:
    reflect and replicate mirror/clamp at the input's own borders; circular wraps around the
    part left after negative (cropping) amounts)."""
    j = np.arange(size + lo + hi)
    if mode == "circular":
        start = max(-lo, 0)
        kept = size - start - max(-hi, 0)
        src = start + (j - max(lo, 0)) % kept
    elif mode == "replicate":
        src = np.clip(j - lo, 0, size - 1)
    else:
        src = np.abs(j - lo)
        src = np.where(src > size - 1, 2 * (size - 1) - src, src)
    return make_taps(src, None, size)


def _check_mode_pad(mode: str, shape: tuple, pairs: tuple) -> None:
    nd = len(pairs)
    if nd > 3 or len(shape) not in (nd + 1, nd + 2):
        raise ShapeError(
            f"pad: {mode} padding of the last {nd} dims needs a {nd + 1}-d or {nd + 2}-d input "
            f"(2 values pad a 2-d/3-d input, 4 a 3-d/4-d one, 6 a 4-d/5-d one), got input of "
            f"shape {list(shape)}"
        )
    _padded_shape("pad", shape, pairs)
    for i, (lo, hi) in enumerate(pairs):
        dim = len(shape) - nd + i
        n = shape[dim]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise ShapeError(
                f"pad: reflect padding ({lo}, {hi}) must be less than the size {n} of "
                f"dimension {dim} of the input of shape {list(shape)}"
            )
        kept = n - max(-lo, 0) - max(-hi, 0)
        if mode == "circular" and (lo > kept or hi > kept):
            raise ShapeError(
                f"pad: circular padding ({lo}, {hi}) of dimension {dim} (size {kept} after "
                f"cropping) of the input of shape {list(shape)} would wrap around more than once"
            )
        if mode == "replicate" and n == 0 and (lo > 0 or hi > 0):
            raise ShapeError(
                f"pad: replicate padding of the empty dimension {dim} of the input of shape "
                f"{list(shape)}"
            )


_MODES = ("constant", "reflect", "replicate", "circular")


@checked
def pad(input: Tensor, pad, mode="constant", value=None):
    """Pad (or, with negative amounts, crop) the last dims of `input`. `pad` lists
    (before, after) amounts starting from the last dim: (left, right, top, bottom, ...).
    Modes: 'constant' (fill with `value`, default 0), 'reflect' (mirror without repeating the
    edge), 'replicate' (repeat the edge), 'circular' (wrap around).
    `F.pad(x, (1, 1, 2, 0), mode="reflect")`"""
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise ShapeError(f"pad: the padding length must be even, got {len(pad)} values {list(pad)}")
    if mode not in _MODES:
        raise ValueError(f"pad: unknown padding mode {mode!r}; expected one of {list(_MODES)}")
    pairs = tuple((pad[2 * i], pad[2 * i + 1]) for i in reversed(range(len(pad) // 2)))
    if mode == "constant":
        return dispatch(
            _constant_pad, (input,), {"pad": pairs, "value": 0 if value is None else value}
        )
    if value is not None and value != 0:
        raise ValueError(f"pad: padding mode {mode!r} does not take a value argument")
    _check_mode_pad(mode, tuple(input.shape), pairs)
    spatial = input.shape[input.ndim - len(pairs) :]
    taps = tuple(
        None if (lo, hi) == (0, 0) else _pad_taps(mode, n, lo, hi)
        for n, (lo, hi) in zip(spatial, pairs, strict=True)
    )
    return resample(input, taps)
