"""Shape ops: views (reshape, view, expand, permute, ...) and re-arrangements (cat, split, ...).

Views share memory with their input and its version counter (`view=True`), as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from ..framework.errors import ShapeError
from ._rules import B, Meta, S, Signature, defop, dispatch, methods

__all__ = ["reshape", "view", "expand", "expand_as"]


def _sizes(size: tuple) -> tuple:
    """Accept both `f(2, 3)` and `f((2, 3))`."""
    if len(size) == 1 and isinstance(size[0], tuple | list):
        return tuple(size[0])
    return tuple(size)


def infer_shape(op: str, shape: tuple, numel: int) -> tuple:
    """Resolve one -1 in a target shape against the number of elements."""
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1:
        raise ShapeError(f"{op}: only one dimension can be inferred, got shape {list(shape)}")
    known = 1
    for d in shape:
        if d != -1:
            if d < 0:
                raise ShapeError(f"{op}: invalid shape dimension {d} in {list(shape)}")
            known *= d
    if unknown:
        if known == 0 or numel % known:
            raise ShapeError(f"{op}: shape {list(shape)} is invalid for input of size {numel}")
        shape = tuple(numel // known if d == -1 else d for d in shape)
    elif known != numel:
        raise ShapeError(f"{op}: shape {list(shape)} is invalid for input of size {numel}")
    return shape


def _numel(shape: tuple) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _reshape_meta(op):
    def meta(x: Meta, *, shape) -> Meta:
        return Meta(infer_shape(op, shape, _numel(x.shape)), x.dtype)

    return meta


def _reshape_sbp(x: Meta, *, shape) -> list[Signature]:
    """Splitting dim 0 survives a reshape that keeps dim 0 (the batch): S(0) -> S(0)."""
    sigs = [Signature((B,), (B,))]
    out = infer_shape("reshape", shape, _numel(x.shape))
    if x.shape and out and x.shape[0] == out[0]:
        sigs.append(Signature((S(0),), (S(0),)))
    return sigs


def _reshape_local_attrs(attrs: dict, sig: Signature, x: Meta) -> dict:
    """Each rank reshapes its own shard: a split leading dim becomes -1."""
    if sig.ins[0] == S(0):
        shape = infer_shape("reshape", attrs["shape"], _numel(x.shape))
        return {**attrs, "shape": (-1, *shape[1:])}
    return attrs


def _view_kernel(x, *, shape):
    try:
        out = x.view()
        out.shape = shape
    except AttributeError:
        raise ShapeError(
            f"view: shape {list(shape)} is not compatible with the input's size {list(x.shape)} "
            f"and strides; use reshape() (which copies when needed)"
        ) from None
    return out


_reshape = defop(
    "reshape",
    inputs=("input",),
    meta=_reshape_meta("reshape"),
    sbp=_reshape_sbp,
    kernels={"cpu": lambda x, *, shape: np.reshape(x, shape)},
    grad=lambda ctx, gy: (gy.reshape(ctx.input_shape(0)),),
    view=True,
    local_attrs=_reshape_local_attrs,
)
_view = defop(
    "view",
    inputs=("input",),
    meta=_reshape_meta("view"),
    sbp=_reshape_sbp,
    kernels={"cpu": _view_kernel},
    grad=lambda ctx, gy: (gy.reshape(ctx.input_shape(0)),),
    view=True,
    local_attrs=_reshape_local_attrs,
)


def reshape(input, *shape):
    """The same data with a new shape; a view when the strides allow, else a copy."""
    shape = _sizes(shape)
    return dispatch(_reshape, (input,), {"shape": shape})


def view(input, *shape):
    """A view with a new shape; raises if the strides do not allow one (see `reshape`)."""
    shape = _sizes(shape)
    return dispatch(_view, (input,), {"shape": shape})


def _expand_shape(op: str, in_shape: tuple, sizes: tuple) -> tuple:
    lead = len(sizes) - len(in_shape)
    if lead < 0:
        raise ShapeError(
            f"{op}: the number of sizes ({len(sizes)}) must be at least the number of "
            f"dimensions ({len(in_shape)}) of the tensor of shape {list(in_shape)}"
        )
    out = []
    for i, s in enumerate(sizes):
        if i < lead:
            if s < 0:
                raise ShapeError(f"{op}: size -1 is not allowed in a new leading dimension")
            out.append(s)
            continue
        d = in_shape[i - lead]
        if s == -1:
            out.append(d)
        elif d == s or d == 1:
            out.append(s)
        else:
            raise ShapeError(
                f"{op}: the expanded size {s} must match the existing size {d} at dimension "
                f"{i} (tensor of shape {list(in_shape)} to {list(sizes)})"
            )
    return tuple(out)


def _expand_sbp(x: Meta, *, shape) -> list[Signature]:
    out = _expand_shape("expand", x.shape, shape)
    lead = len(out) - len(x.shape)
    sigs = [Signature((B,), (B,))]
    for i, d in enumerate(x.shape):
        if d == out[lead + i]:
            sigs.append(Signature((S(i),), (S(lead + i),)))
    return sigs


def _expand_local_attrs(attrs: dict, sig: Signature, x: Meta) -> dict:
    """A split input dim keeps its local size (-1) in the target shape."""
    if sig.ins[0] is B:
        return attrs
    shape = list(attrs["shape"])
    shape[len(shape) - len(x.shape) + sig.ins[0].axis] = -1
    return {**attrs, "shape": tuple(shape)}


_expand = defop(
    "expand",
    inputs=("input",),
    meta=lambda x, *, shape: Meta(_expand_shape("expand", x.shape, shape), x.dtype),
    sbp=_expand_sbp,
    kernels={
        "cpu": lambda x, *, shape: np.broadcast_to(x, _expand_shape("expand", x.shape, shape))
    },
    grad=lambda ctx, gy: (gy.sum_to_size(ctx.input_shape(0)),),
    view=True,
    local_attrs=_expand_local_attrs,
)


def expand(input, *sizes):
    """A broadcast view: size-1 dims repeat without copying; -1 keeps a dim."""
    return dispatch(_expand, (input,), {"shape": _sizes(sizes)})


def expand_as(input, other):
    return expand(input, tuple(other.shape))


methods(reshape=reshape, view=view, expand=expand, expand_as=expand_as)
