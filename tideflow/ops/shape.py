"""Shape ops: views (reshape, view, expand, permute, ...) and re-arrangements (cat, split, ...).

Views share memory with their input and its version counter (`view=True`), as in PyTorch.
Eight ops make views: reshape/view, expand, permute, slice, split, unbind and diagonal (split
and unbind with one output per piece). Everything else that only relabels dimensions
(squeeze, flatten, transpose, movedim, chunk, tensor_split, ...) is a composite of them, so
its gradient, graph node and SBP come from those. cat, stack, repeat, flip, roll, tril/triu
and the `*_scatter` ops copy.
"""

from __future__ import annotations

import itertools
import math
import operator

import numpy as np

from ..framework.dispatch import inplace
from ..framework.errors import (
    ArgumentError,
    DTypeError,
    ShapeError,
    TensorIndexError,
    TideflowError,
)
from ..framework.tensor import Size, Tensor
from ._onnx_rules import INT64_MAX, reshape_target, scalar_of
from ._rules import (
    B,
    Meta,
    P,
    S,
    Signature,
    checked,
    defop,
    dispatch,
    int_arg,
    methods,
    normalize_dim,
    tensor_arg,
    tensors_arg,
)
from ._rules import broadcast_shapes as _broadcast

__all__ = [
    "reshape",
    "view",
    "flatten",
    "unflatten",
    "squeeze",
    "unsqueeze",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "expand",
    "expand_as",
    "broadcast_to",
    "broadcast_shapes",
    "broadcast_tensors",
    "meshgrid",
    "permute",
    "transpose",
    "swapaxes",
    "swapdims",
    "t",
    "movedim",
    "moveaxis",
    "narrow",
    "select",
    "split",
    "chunk",
    "unbind",
    "tensor_split",
    "hsplit",
    "vsplit",
    "dsplit",
    "slice_scatter",
    "select_scatter",
    "cat",
    "concat",
    "concatenate",
    "stack",
    "hstack",
    "vstack",
    "row_stack",
    "dstack",
    "column_stack",
    "tile",
    "repeat_interleave",
    "flip",
    "fliplr",
    "flipud",
    "rot90",
    "roll",
    "tril",
    "triu",
    "diagonal",
    "diagonal_scatter",
    "diag_embed",
    "diag",
]


# -- helpers --------------------------------------------------------------------------------
def _sizes(size: tuple) -> tuple:
    """Accept both `f(2, 3)` and `f((2, 3))`."""
    if len(size) == 1 and isinstance(size[0], tuple | list):
        return tuple(size[0])
    return tuple(size)


def _numel(shape: tuple) -> int:
    return math.prod(shape)


def _dims(op: str, dims, ndim: int) -> tuple[int, ...]:
    """An int or a sequence of dims -> non-negative dims in the given order, each once."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    out = tuple(normalize_dim(op, d, ndim) for d in dims)
    for i, d in enumerate(out):
        if d in out[:i]:
            raise ShapeError(f"{op}: dim {d} appears multiple times in the list of dims {dims}")
    return out


def _insert_dim(op: str, dim: int, ndim: int) -> int:
    """A position for a new dimension: in [-ndim - 1, ndim] (unsqueeze, stack)."""
    n = ndim + 1
    if not -n <= dim < n:
        raise IndexError(
            f"{op}: dimension {dim} is out of range for inserting a dimension into a "
            f"{ndim}-d tensor (expected to be in [{-n}, {n - 1}])"
        )
    return dim % n


def _at_least(op: str, x: Meta | Tensor, ndim: int) -> None:
    if not isinstance(x, Meta):
        tensor_arg(op, "input", 1, x)
    if len(x.shape) < ndim:
        raise ShapeError(
            f"{op}: expected a tensor with at least {ndim} dimension{'s' if ndim > 1 else ''}, "
            f"got shape {list(x.shape)}"
        )


def _moved_sbp(axis_map: dict[int, int], n_in: int = 1, n_out: int = 1) -> list[Signature]:
    """SBP of data-movement ops: all B -> B, all P -> P (moving values is linear), and a split
    input axis i -> a split output axis axis_map[i] where the op never mixes slices of i."""
    sigs = [Signature((B,) * n_in, (B,) * n_out), Signature((P,) * n_in, (P,) * n_out)]
    sigs += [Signature((S(i),) * n_in, (S(j),) * n_out) for i, j in axis_map.items()]
    return sigs


def _view_sbp(x: Meta, axis_map: dict[int, int]) -> list[Signature]:
    """`_moved_sbp` for view ops on one input."""
    sigs = _moved_sbp(axis_map)
    if x.shape:
        return sigs
    # NOTE: P is valid for 0-d inputs too, but testing/sbp_sim.py shards a 0-d P operand into
    # NumPy scalars, which a view cannot alias; declare it once the simulator passes arrays.
    return [s for s in sigs if s.ins[0] is not P]


def _kept_axes(ndim: int, moved) -> dict[int, int]:
    """axis -> axis for every axis an op leaves in place (not in `moved`)."""
    return {i: i for i in range(ndim) if i not in moved}


# -- reshape and view -----------------------------------------------------------------------
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


def _reshape_meta(op):
    def meta(x: Meta, *, shape) -> Meta:
        return Meta(infer_shape(op, shape, _numel(x.shape)), x.dtype)

    return meta


def _split_target(in_shape: tuple, out_shape: tuple, axis: int) -> int | None:
    """The output axis that a split of input `axis` becomes under a reshape, or None.

    Rank-local reshapes of shards along `axis` give shards of the output along axis j when the
    dims before them hold the same number of elements (same row-major prefix blocks) and the
    elements after output axis j evenly divide those after `axis`: then every shard boundary
    of `axis` is a boundary of j. Merging (2, 3, 4) -> (6, 4) keeps S(0) -> S(0) and
    S(2) -> S(1) but not S(1); splitting (6, 4) -> (2, 3, 4) keeps only S(1) -> S(2).
    """
    prefix = _numel(in_shape[:axis])
    j, before = 0, 1
    while before < prefix:
        before *= out_shape[j]
        j += 1
    if before != prefix:
        return None
    while out_shape[j] == 1:  # the split lands on the next non-trivial output axis
        j += 1
    if _numel(in_shape[axis + 1 :]) % _numel(out_shape[j + 1 :]):
        return None
    return j


def _reshape_sbp(x: Meta, *, shape) -> list[Signature]:
    numel = _numel(x.shape)
    out = infer_shape("reshape", shape, numel)
    axis_map = {}
    if numel:
        for i, d in enumerate(x.shape):
            j = _split_target(x.shape, out, i) if d > 1 else None
            if j is not None:
                axis_map[i] = j
    return _view_sbp(x, axis_map)


def _reshape_local_attrs(attrs: dict, sig: Signature, x: Meta) -> dict:
    """Each rank reshapes its own shard: the split output dim takes its local size (-1)."""
    out = sig.outs[0]
    if out is B or out is P:
        return attrs
    shape = list(infer_shape("reshape", attrs["shape"], _numel(x.shape)))
    shape[out.axis] = -1
    return {**attrs, "shape": tuple(shape)}


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


def _reshape_onnx(g, x, *, shape):
    if not g.out[0].shape:
        return scalar_of(g, x)
    return g.op("Reshape", x, reshape_target(g, x))


def _expand_onnx(g, x, *, shape):
    # NOTE: a 1 in Expand's shape keeps the input's dim (broadcasting both ways), so dims
    # the input already has stay dynamic
    out, dims = g.out[0].shape, g.meta(x).shape
    lead = len(out) - len(dims)
    target = [1 if i >= lead and dims[i - lead] == d else d for i, d in enumerate(out)]
    return g.op("Expand", x, g.ints(target))


def _slice_onnx(g, x, *, dim, start, end, step):
    stop = INT64_MAX if end == g.meta(x).shape[dim] else end
    return g.op("Slice", x, g.ints([start]), g.ints([stop]), g.ints([dim]), g.ints([step]))


def _split_onnx(g, x, *, dim, sizes):
    if len(set(sizes)) > 1:
        return g.op("Split", x, g.ints(sizes), axis=dim, outputs=len(sizes))
    # NOTE: equal pieces are split by count, so a dynamic dim (an RNN's time steps times the
    # batch) splits at any size
    count = {"num_outputs": len(sizes)} if g.opset >= 18 else {}
    return g.op("Split", x, axis=dim, outputs=len(sizes), **count)


def _unbind_onnx(g, x, *, dim):
    n = g.meta(x).shape[dim]
    if n == 0:
        return ()
    pieces = g.op("Split", x, g.ints([1] * n), axis=dim, outputs=n)
    pieces = (pieces,) if n == 1 else pieces
    return tuple(g.op("Squeeze", p, g.ints([dim])) for p in pieces)


def _cat_onnx(g, *xs, dim):
    parts = [x for x in xs if not _skipped(g.meta(x).shape)]
    if not parts:
        return g.constant(np.empty((0,)), g.out[0].dtype)
    return g.op("Concat", *parts, axis=dim)


def _stack_onnx(g, *xs, dim):
    return g.op("Concat", *(g.op("Unsqueeze", x, g.ints([dim])) for x in xs), axis=dim)


def _repeat_onnx(g, x, *, sizes):
    extra = len(sizes) - len(g.meta(x).shape)
    if extra:
        x = g.op("Unsqueeze", x, g.ints(list(range(extra))))
    return g.op("Tile", x, g.ints(sizes))


def _flip_onnx(g, x, *, dims):
    if not dims:
        return g.op("Identity", x)
    n = len(dims)
    starts, ends = g.ints([-1] * n), g.ints([-INT64_MAX - 1] * n)
    return g.op("Slice", x, starts, ends, g.ints(list(dims)), g.ints([-1] * n))


def _roll_onnx(g, x, *, shifts, dims):
    shape = g.meta(x).shape
    if dims is None:
        flat = g.op("Reshape", x, g.ints([-1]))
        rolled = _rolled(g, flat, shifts[0], 0, math.prod(shape))
        return g.op("Reshape", rolled, g.ints(list(shape)))
    for shift, dim in zip(shifts, dims, strict=True):
        x = _rolled(g, x, shift, dim, shape[dim])
    return x


def _rolled(g, x: str, shift: int, dim: int, n: int) -> str:
    """`x` rolled by `shift` along `dim` (of size n): its last entries moved to the front."""
    cut = n - shift % n if n else 0
    if cut in (0, n):
        return x
    axis = g.ints([dim])
    tail = g.op("Slice", x, g.ints([cut]), g.ints([INT64_MAX]), axis)
    head = g.op("Slice", x, g.ints([0]), g.ints([cut]), axis)
    return g.op("Concat", tail, head, axis=dim)


_reshape = defop(
    "reshape",
    inputs=("input",),
    meta=_reshape_meta("reshape"),
    sbp=_reshape_sbp,
    kernels={"cpu": lambda x, *, shape: np.reshape(x, shape)},
    grad=lambda ctx, gy: (gy.reshape(ctx.input_shape(0)),),
    view=True,
    local_attrs=_reshape_local_attrs,
    onnx=_reshape_onnx,
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
    onnx=_reshape_onnx,
)


def _viewable(x: Tensor, shape: tuple) -> bool:
    """Whether `x`'s strides allow `shape` without a copy (an invalid shape counts as
    viewable: the op itself then raises the user-facing error)."""
    a = x._data.view()
    try:
        a.shape = shape
    except AttributeError:
        return False
    except ValueError:
        return True
    return True


def _sizes_or_keyword(op: str, sizes: tuple, keyword: str, value) -> tuple:
    """Sizes given positionally or (PyTorch's and OneFlow's keyword) by name, not both."""
    if value is None:
        return _sizes(sizes)
    if sizes:
        raise ArgumentError(f"{op}(): give the sizes positionally or as {keyword}=, not both")
    return _sizes((value,))


@checked
def reshape(input: Tensor, *shape_args, shape=None):
    """The same data with a new shape (one dim may be -1): a view when the strides allow,
    else a view of a contiguous copy, as in PyTorch. `x.reshape(2, 3)`, `x.reshape((2, 3))`
    or `x.reshape(shape=(2, 3))`."""
    shape = _sizes_or_keyword("reshape", shape_args, "shape", shape)
    if isinstance(input, Tensor) and not _viewable(input, shape):
        # NOTE: copying first keeps the result from sharing the input's version counter.
        input = input.contiguous()
    return dispatch(_reshape, (input,), {"shape": shape})


def view(input, *shape, size=None):
    """A view with a new shape (also `size=`); raises if the strides do not allow one (see
    `reshape`)."""
    return dispatch(_view, (input,), {"shape": _sizes_or_keyword("view", shape, "size", size)})


def view_as(input, other):
    """`input.view(other.shape)`."""
    return view(input, tuple(other.shape))


def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims `start_dim..end_dim` into one (a 0-d tensor becomes 1-d). Like `reshape`, a
    view when the strides allow; `input` itself when there is nothing to merge."""
    shape = tuple(tensor_arg("flatten", "input", 1, input).shape)
    if not shape:
        return reshape(input, (1,))
    start = normalize_dim("flatten", start_dim, len(shape))
    end = normalize_dim("flatten", end_dim, len(shape))
    if start > end:
        raise ShapeError(
            f"flatten: start_dim ({start_dim}) cannot come after end_dim ({end_dim}) for a "
            f"tensor of shape {list(shape)}"
        )
    if start == end:
        return input
    return reshape(input, (*shape[:start], _numel(shape[start : end + 1]), *shape[end + 1 :]))


@checked
def unflatten(input: Tensor, dim, sizes):
    """Split dim `dim` into `sizes` (one of them may be -1): a view."""
    shape = tuple(input.shape)
    d = normalize_dim("unflatten", dim, len(shape))
    sizes = tuple(sizes)
    if not sizes:
        raise ShapeError("unflatten: sizes must be non-empty")
    try:
        sizes = infer_shape("unflatten", sizes, shape[d] if shape else 1)
    except ShapeError:
        raise ShapeError(
            f"unflatten: sizes {list(sizes)} don't multiply up to the size of dim {d} "
            f"({shape[d] if shape else 1}) of the tensor of shape {list(shape)}"
        ) from None
    return view(input, (*shape[:d], *sizes, *shape[d + 1 :]))


@checked
def squeeze(input: Tensor, dim=None):
    """Drop size-1 dims: all of them (`dim=None`), or those among `dim` (an int or a tuple;
    named dims of another size stay). A view."""
    shape = tuple(input.shape)
    drop = range(len(shape)) if dim is None else _dims("squeeze", dim, len(shape))
    return view(input, tuple(d for i, d in enumerate(shape) if d != 1 or i not in drop))


@checked
def unsqueeze(input: Tensor, dim):
    """Insert a size-1 dim at position `dim` (in [-ndim - 1, ndim]). A view."""
    shape = tuple(input.shape)
    d = _insert_dim("unsqueeze", dim, len(shape))
    return view(input, (*shape[:d], 1, *shape[d:]))


def _at_least_nd(name: str, grow):
    def atleast(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], tuple | list):
            return tuple(
                grow(tensor_arg(name, "tensors", i + 1, t)) for i, t in enumerate(tensors[0])
            )
        if len(tensors) == 1:
            return grow(tensor_arg(name, "input", 1, tensors[0]))
        return tuple(grow(tensor_arg(name, "tensors", i + 1, t)) for i, t in enumerate(tensors))

    atleast.__name__ = name
    atleast.__doc__ = (
        f"Each tensor viewed with at least {name[-2]} dimensions (size-1 dims added); one "
        "tensor in gives a tensor, several (or a list) give a tuple."
    )
    return atleast


def _grow_1d(x):
    return reshape(x, (1,)) if x.ndim == 0 else x


def _grow_2d(x):
    return reshape(x, (1, -1)) if x.ndim < 2 else x


def _grow_3d(x):
    if x.ndim == 2:
        return unsqueeze(x, -1)
    return reshape(x, (1, -1, 1)) if x.ndim < 2 else x


atleast_1d = _at_least_nd("atleast_1d", _grow_1d)
atleast_2d = _at_least_nd("atleast_2d", _grow_2d)
atleast_3d = _at_least_nd("atleast_3d", _grow_3d)


# -- expand and broadcasting ----------------------------------------------------------------
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
    return _view_sbp(x, {i: lead + i for i, d in enumerate(x.shape) if d == out[lead + i]})


def _expand_local_attrs(attrs: dict, sig: Signature, x: Meta) -> dict:
    """A split input dim keeps its local size (-1) in the target shape."""
    s = sig.ins[0]
    if s is B or s is P:
        return attrs
    shape = list(attrs["shape"])
    shape[len(shape) - len(x.shape) + s.axis] = -1
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
    onnx=_expand_onnx,
)


def expand(input, *sizes):
    """A broadcast view: size-1 dims repeat without copying; -1 keeps a dim."""
    return dispatch(_expand, (input,), {"shape": _sizes(sizes)})


def expand_as(input, other):
    """`input.expand(other.shape)`."""
    return expand(input, tuple(other.shape))


@checked
def broadcast_to(input: Tensor, size):
    """`input` broadcast to `size` (a view; -1 keeps a dim), like `expand`."""
    return expand(input, tuple(size))


def broadcast_shapes(*shapes):
    """The shape tensors of these shapes broadcast to (ints count as 1-d shapes)."""
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    return Size(_broadcast("broadcast_shapes", *shapes))


@checked
def broadcast_tensors(*tensors: Tensor):
    """The tensors expanded to their common broadcast shape (views), as a tuple."""
    shape = _broadcast("broadcast_tensors", *(tuple(t.shape) for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 0-d/1-d tensors: output i varies along dim i (`indexing='ij'`, the
    default) or, with `'xy'`, the first two dims swap (Cartesian x-y order). Views."""
    if len(tensors) == 1 and isinstance(tensors[0], tuple | list):
        tensors = tuple(tensors[0])
    tensors_arg("meshgrid", "tensors", 0, tensors)
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise TideflowError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if not tensors:
        raise ShapeError("meshgrid: expected a non-empty list of tensors")
    for i, x in enumerate(tensors):
        if x.ndim > 1:
            raise ShapeError(
                f"meshgrid: expected 0-d or 1-d tensors, but tensor {i} has shape {list(x.shape)}"
            )
        if x.dtype is not tensors[0].dtype:
            raise DTypeError(
                f"meshgrid: expects all tensors to have the same dtype, got {tensors[0].dtype} "
                f"(tensor 0) and {x.dtype} (tensor {i})"
            )
    axes = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        axes[0], axes[1] = 1, 0
    out_shape = [0] * len(tensors)
    for x, axis in zip(tensors, axes, strict=True):
        out_shape[axis] = x.numel()
    grids = []
    for x, axis in zip(tensors, axes, strict=True):
        along = [1] * len(tensors)
        along[axis] = x.numel()
        grids.append(expand(reshape(x, tuple(along)), tuple(out_shape)))
    return tuple(grids)


# -- permutations ---------------------------------------------------------------------------
def _check_perm(x: Meta | Tensor, dims: tuple) -> tuple:
    if len(dims) != len(x.shape):
        raise ShapeError(
            f"permute: the number of dims ({len(dims)}) does not match the number of "
            f"dimensions of the tensor of shape {list(x.shape)}"
        )
    return _dims("permute", dims, len(x.shape)) if dims else ()


def _permute_meta(x: Meta, *, dims) -> Meta:
    dims = _check_perm(x, dims)
    return Meta(tuple(x.shape[d] for d in dims), x.dtype)


def _permute_grad(ctx, gy):
    inverse = [0] * len(ctx.dims)
    for i, d in enumerate(ctx.dims):
        inverse[d] = i
    return (gy.permute(tuple(inverse)),)


_permute = defop(
    "permute",
    inputs=("input",),
    meta=_permute_meta,
    sbp=lambda x, *, dims: _view_sbp(x, {d: i for i, d in enumerate(dims)}),
    kernels={"cpu": lambda x, *, dims: np.transpose(x, dims)},
    grad=_permute_grad,
    view=True,
    onnx=lambda g, x, *, dims: g.op("Transpose", x, perm=list(dims)) if dims else x,
)


@checked
def permute(input: Tensor, *dims):
    """A view with the dims reordered: output dim i is input dim `dims[i]`."""
    dims = _check_perm(input, _sizes(dims))
    return dispatch(_permute, (input,), {"dims": dims})


def _swap(x, dim0: int, dim1: int, op: str):
    n = x.ndim
    d0, d1 = normalize_dim(op, dim0, n), normalize_dim(op, dim1, n)
    perm = list(range(n))
    if n:
        perm[d0], perm[d1] = d1, d0
    return dispatch(_permute, (x,), {"dims": tuple(perm)})


@checked
def transpose(input: Tensor, dim0, dim1):
    """A view with dims `dim0` and `dim1` swapped."""
    return _swap(input, dim0, dim1, "transpose")


@checked
def swapaxes(input: Tensor, axis0, axis1):
    """Alias of `transpose` (NumPy's name)."""
    return _swap(input, axis0, axis1, "swapaxes")


@checked
def swapdims(input: Tensor, dim0, dim1):
    """Alias of `transpose`."""
    return _swap(input, dim0, dim1, "swapdims")


@checked
def t(input: Tensor):
    """The transpose of a matrix (a view); 0-d and 1-d tensors are returned as views as is."""
    if input.ndim > 2:
        raise ShapeError(
            f"t: expects a tensor with <= 2 dimensions, got shape {list(input.shape)}; "
            "use transpose(dim0, dim1) or .mT for batches of matrices"
        )
    return dispatch(_permute, (input,), {"dims": tuple(range(input.ndim))[::-1]})


def _T(self):
    """All dims reversed (a view). PyTorch deprecates it for tensors that are not 2-d."""
    return dispatch(_permute, (self,), {"dims": tuple(range(self.ndim))[::-1]})


def _mT(self):
    """The last two dims swapped: a batch of matrices transposed (a view)."""
    _at_least("mT", self, 2)
    return _swap(self, -2, -1, "mT")


@checked
def movedim(input: Tensor, source, destination):
    """A view with dims `source` moved to positions `destination` (ints or sequences of equal
    length); the other dims keep their order."""
    n = input.ndim
    src = _dims("movedim", source, n)
    dst = _dims("movedim", destination, n)
    if len(src) != len(dst):
        raise ShapeError(
            f"movedim: source {list(src)} and destination {list(dst)} must have the same "
            "number of dims"
        )
    if n == 0:  # a 0-d tensor accepts dim 0 and has nothing to move
        return dispatch(_permute, (input,), {"dims": ()})
    perm = [-1] * n
    for s, d in zip(src, dst, strict=True):
        perm[d] = s
    rest = iter(i for i in range(n) if i not in src)
    return dispatch(_permute, (input,), {"dims": tuple(p if p >= 0 else next(rest) for p in perm)})


moveaxis = movedim


# -- slices: narrow, select, split, chunk, unbind, slice_scatter ----------------------------
def _slice_meta(x: Meta, *, dim, start, end, step) -> Meta:
    shape = list(x.shape)
    shape[dim] = len(range(start, end, step))
    return Meta(tuple(shape), x.dtype)


def _slice_index(ndim_before: int, start: int, end: int, step: int) -> tuple:
    return (slice(None),) * ndim_before + (slice(start, end, step),)


def _slice_grad(ctx, gy):
    zeros = gy.new_zeros(ctx.input_shape(0))
    return (dispatch(_slice_scatter, (zeros, gy), ctx.attrs),)


# NOTE: `slice` is the view op behind narrow and select (normalized attrs: 0 <= start <=
# end <= size, step > 0); PyTorch's slicing op has the same name.
_slice = defop(
    "slice",
    inputs=("input",),
    meta=_slice_meta,
    sbp=lambda x, *, dim, start, end, step: _moved_sbp(_kept_axes(len(x.shape), (dim,))),
    kernels={"cpu": lambda x, *, dim, start, end, step: x[_slice_index(dim, start, end, step)]},
    grad=_slice_grad,
    view=True,
    onnx=_slice_onnx,
)


def _piece(x, dim: int, start: int, end: int):
    return dispatch(_slice, (x,), {"dim": dim, "start": start, "end": end, "step": 1})


def _no_0d(op: str, x) -> None:
    if tensor_arg(op, "input", 1, x).ndim == 0:
        raise IndexError(f"{op}: cannot be applied to a 0-d tensor")


def narrow(input, dim, start, length):
    """The view of `length` entries of dim `dim` from `start` (negative counts from the end)."""
    _no_0d("narrow", input)
    d = normalize_dim("narrow", dim, input.ndim)
    size = input.shape[d]
    start = int(start)
    if not -size <= start <= size:
        raise IndexError(
            f"narrow: start {start} is out of range for dim {d} of size {size} "
            f"(expected to be in [{-size}, {size}])"
        )
    if start < 0:
        start += size
    if length < 0 or start + length > size:
        raise ShapeError(
            f"narrow: start ({start}) + length ({length}) exceeds the size ({size}) of dim {d} "
            f"of the tensor of shape {list(input.shape)}"
        )
    return _piece(input, d, start, start + length)


def select(input, dim, index):
    """The view of entry `index` of dim `dim`, with that dim removed (`x.select(0, i)` is
    `x[i]`)."""
    _no_0d("select", input)
    d = normalize_dim("select", dim, input.ndim)
    size = input.shape[d]
    index = int(index)
    if not -size <= index < size:
        raise IndexError(
            f"select: index {index} is out of range for dim {d} of size {size} "
            f"(tensor of shape {list(input.shape)})"
        )
    index %= size
    shape = tuple(input.shape)
    return view(_piece(input, d, index, index + 1), shape[:d] + shape[d + 1 :])


# NOTE: split and unbind are single ops with one output per piece (`n_out=None`: the count
# comes from the attributes), so backward is one `cat` / `stack` of the pieces' gradients:
# O(numel) whatever the number of pieces, where a slice per piece would cost O(pieces * numel).
def _check_sections(op: str, shape: tuple, dim: int, sizes: tuple) -> None:
    if any(s < 0 for s in sizes) or sum(sizes) != shape[dim]:
        raise ShapeError(
            f"{op}: split sizes {list(sizes)} must be non-negative and sum exactly to "
            f"{shape[dim]} (the size of dim {dim} of the tensor of shape {list(shape)})"
        )


def _split_meta(x: Meta, *, dim, sizes) -> tuple[Meta, ...]:
    _check_sections("split", x.shape, dim, sizes)
    return tuple(Meta((*x.shape[:dim], s, *x.shape[dim + 1 :]), x.dtype) for s in sizes)


def _split_kernel(x, *, dim, sizes):
    lead = (slice(None),) * dim
    pieces, start = [], 0
    for size in sizes:
        pieces.append(x[(*lead, slice(start, start + size))])
        start += size
    return tuple(pieces)


_split = defop(
    "split",
    inputs=("input",),
    meta=_split_meta,
    # NOTE: the split dim is never sharded, so `sizes` hold on every rank's shard as they are
    sbp=lambda x, *, dim, sizes: _moved_sbp(_kept_axes(len(x.shape), (dim,)), n_out=len(sizes)),
    kernels={"cpu": _split_kernel},
    grad=lambda ctx, *gys: (dispatch(_cat, gys, {"dim": ctx.dim}),),
    n_out=None,
    view=True,
    onnx=_split_onnx,
)


def _unbind_meta(x: Meta, *, dim) -> tuple[Meta, ...]:
    return (Meta((*x.shape[:dim], *x.shape[dim + 1 :]), x.dtype),) * x.shape[dim]


def _unbind_kernel(x, *, dim):
    lead = (slice(None),) * dim
    # NOTE: the trailing Ellipsis keeps a full integer index a 0-d view, not a NumPy scalar
    return tuple(x[(*lead, i, Ellipsis)] for i in range(x.shape[dim]))


def _unbind_sbp(x: Meta, *, dim) -> list[Signature]:
    kept = {a: a - (a > dim) for a in range(len(x.shape)) if a != dim}
    return _moved_sbp(kept, n_out=x.shape[dim])


_unbind = defop(
    "unbind",
    inputs=("input",),
    meta=_unbind_meta,
    sbp=_unbind_sbp,
    kernels={"cpu": _unbind_kernel},
    grad=lambda ctx, *gys: (dispatch(_stack, gys, {"dim": ctx.dim}),),
    n_out=None,
    view=True,
    onnx=_unbind_onnx,
)


def _split_into(input, d: int, sizes: tuple) -> tuple:
    return dispatch(_split, (input,), {"dim": d, "sizes": sizes})


def _split_sizes(input, split_size_or_sections, d: int) -> tuple[int, ...]:
    size = input.shape[d]
    if isinstance(split_size_or_sections, tuple | list):
        sections = tuple(operator.index(s) for s in split_size_or_sections)
        _check_sections("split", tuple(input.shape), d, sections)
        return sections
    try:
        step = operator.index(split_size_or_sections)
    except TypeError:
        raise TypeError(
            "split: split_size_or_sections must be an int or a sequence of ints, got "
            f"{type(split_size_or_sections).__name__}"
        ) from None
    if step < 0 or (step == 0 and size != 0):
        raise ShapeError(
            f"split: split_size must be positive (or 0 for a dim of size 0), got {step} "
            f"for dim {d} of size {size}"
        )
    if size == 0:
        return (0,)
    return (step,) * (size // step) + ((size % step,) if size % step else ())


def split(tensor, split_size_or_sections, dim=0):
    """Views of consecutive pieces along `dim`: of `split_size` entries each (the last may be
    smaller), or of the given section sizes (which must sum to the dim's size). The pieces
    share the input's memory and version counter; backward is one concatenation.

    >>> x = flow.arange(5)
    >>> x.split(2)
    (tensor([0, 1]), tensor([2, 3]), tensor([4]))
    >>> flow.split(x, [1, 4])
    (tensor([0]), tensor([1, 2, 3, 4]))
    """
    _no_0d("split", tensor)
    d = normalize_dim("split", dim, tensor.ndim)
    return _split_into(tensor, d, _split_sizes(tensor, split_size_or_sections, d))


def chunk(input, chunks, dim=0):
    """Split into `chunks` views of ceil(size / chunks) entries along `dim` (fewer pieces when
    the size does not allow that many; see `tensor_split` for exactly `chunks` pieces).

    >>> flow.arange(6).chunk(4)
    (tensor([0, 1]), tensor([2, 3]), tensor([4, 5]))
    """
    _no_0d("chunk", input)
    try:
        chunks = operator.index(chunks)
    except TypeError:
        raise TypeError(f"chunk: chunks must be an int, got {type(chunks).__name__}") from None
    if chunks <= 0:
        raise ShapeError(f"chunk: expects `chunks` to be greater than 0, got {chunks}")
    d = normalize_dim("chunk", dim, input.ndim)
    size = input.shape[d]
    if size == 0:
        return _split_into(input, d, (0,) * chunks)
    return _split_into(input, d, _split_sizes(input, -(-size // chunks), d))


def unbind(input, dim=0):
    """The slices along `dim` as a tuple of views, that dim removed; backward is one `stack`.

    >>> flow.tensor([[1, 2], [3, 4]]).unbind(1)
    (tensor([1, 3]), tensor([2, 4]))
    """
    _no_0d("unbind", input)
    d = normalize_dim("unbind", dim, input.ndim)
    return dispatch(_unbind, (input,), {"dim": d})


def _sections_or_indices(op: str, indices_or_sections) -> int | tuple[int, ...]:
    """tensor_split's argument: an int (or 0-d integer tensor) counts sections; a sequence
    (or 1-d integer tensor) lists the indices to split before."""
    if isinstance(indices_or_sections, Tensor):
        t = indices_or_sections
        if t.dtype.is_floating_point or t.dtype.name == "bool":
            raise DTypeError(
                f"{op}: expected indices_or_sections to have an integer dtype, got {t.dtype}"
            )
        if t.ndim > 1:
            raise ShapeError(
                f"{op}: expected indices_or_sections to be a 0-d or 1-d tensor, got shape "
                f"{list(t.shape)}"
            )
        return int(t.item()) if t.ndim == 0 else tuple(int(i) for i in t.tolist())
    if isinstance(indices_or_sections, tuple | list):
        return tuple(operator.index(i) for i in indices_or_sections)
    return operator.index(indices_or_sections)


@checked
def tensor_split(input: Tensor, indices_or_sections, dim=0):
    """Views of `input` split along `dim`, like NumPy's `array_split`: into n pieces whose sizes
    differ by at most one (the first `size % n` one larger), or before each of the given
    indices (`[2, 5]` gives `[:2]`, `[2:5]`, `[5:]`; out-of-range indices clamp).

    >>> flow.tensor_split(flow.arange(7), 3)
    (tensor([0, 1, 2]), tensor([3, 4]), tensor([5, 6]))
    >>> flow.tensor_split(flow.arange(7), [1, 5])
    (tensor([0]), tensor([1, 2, 3, 4]), tensor([5, 6]))
    """
    if input.ndim == 0:
        raise ShapeError("tensor_split: expected at least a 1-dimensional tensor, got a 0-d one")
    d = normalize_dim("tensor_split", dim, input.ndim)
    size = input.shape[d]
    spec = _sections_or_indices("tensor_split", indices_or_sections)
    if isinstance(spec, int):
        if spec <= 0:
            raise ShapeError(f"tensor_split: number of sections must be larger than 0, got {spec}")
        small, larger = divmod(size, spec)
        return _split_into(input, d, (small + 1,) * larger + (small,) * (spec - larger))
    # Each index starts a piece: negative ones count from the end, then all clamp to the dim.
    bounds = [0, *(min(max(i + size if i < 0 else i, 0), size) for i in spec), size]
    pairs = list(itertools.pairwise(bounds))
    if all(a <= b for a, b in pairs):
        return _split_into(input, d, tuple(b - a for a, b in pairs))
    # NOTE: decreasing indices give overlapping pieces (`[5, 1]`: `[:5]`, `[5:5]`, `[1:]`),
    # which are no partition of the dim: those are separate slices.
    return tuple(_piece(input, d, a, max(a, b)) for a, b in pairs)


def _split_along(op: str, input, indices_or_sections, dim: int):
    """hsplit/vsplit/dsplit: `tensor_split` along `dim`; a number of sections must divide it."""
    spec = _sections_or_indices(op, indices_or_sections)
    if isinstance(spec, int) and (spec <= 0 or input.shape[dim] % spec):
        raise ShapeError(
            f"{op}: cannot split dim {dim} of size {input.shape[dim]} into {spec} equal "
            f"sections (tensor of shape {list(input.shape)}); pass indices to split unevenly"
        )
    return tensor_split(input, spec, dim)


def hsplit(input, indices_or_sections):
    """`tensor_split` along dim 1 (dim 0 of a 1-d tensor); a number of sections must divide
    that dim evenly.

    >>> [p.shape for p in flow.zeros(2, 6).hsplit(3)]
    [tideflow.Size([2, 2]), tideflow.Size([2, 2]), tideflow.Size([2, 2])]
    """
    _at_least("hsplit", input, 1)
    return _split_along("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0)


def vsplit(input, indices_or_sections):
    """`tensor_split` along dim 0 of a tensor with at least 2 dims; a number of sections must
    divide that dim evenly.

    >>> [p.shape for p in flow.zeros(4, 3).vsplit([1])]
    [tideflow.Size([1, 3]), tideflow.Size([3, 3])]
    """
    _at_least("vsplit", input, 2)
    return _split_along("vsplit", input, indices_or_sections, 0)


def dsplit(input, indices_or_sections):
    """`tensor_split` along dim 2 (depth) of a tensor with at least 3 dims; a number of
    sections must divide that dim evenly.

    >>> [p.shape for p in flow.zeros(1, 2, 4).dsplit(2)]
    [tideflow.Size([1, 2, 2]), tideflow.Size([1, 2, 2])]
    """
    _at_least("dsplit", input, 3)
    return _split_along("dsplit", input, indices_or_sections, 2)


def _slice_scatter_meta(x: Meta, src: Meta, *, dim, start, end, step) -> Meta:
    expected = _slice_meta(x, dim=dim, start=start, end=end, step=step).shape
    if tuple(src.shape) != expected:
        raise ShapeError(
            f"slice_scatter: expected src to have the shape of the slice {list(expected)}, "
            f"got {list(src.shape)} (input of shape {list(x.shape)}, dim {dim}, "
            f"slice {start}:{end}:{step})"
        )
    return Meta(x.shape, x.dtype)


def _slice_scatter_kernel(x, src, *, dim, start, end, step):
    out = np.array(x, copy=True)
    out[_slice_index(dim, start, end, step)] = src
    return out


def _slice_scatter_grad(ctx, gy):
    need_x, need_src = ctx.needs_input_grad
    gx = gsrc = None
    if need_x:
        gx = dispatch(_slice_scatter, (gy, gy.new_zeros(ctx.input_shape(1))), ctx.attrs)
    if need_src:
        gsrc = dispatch(_slice, (gy,), ctx.attrs)
    return gx, gsrc


def _slice_scatter_onnx(g, x, src, *, dim, start, end, step):
    """ScatterND of `src` at the slice's positions (a constant of the traced sizes)."""
    shape = g.meta(x).shape
    positions = np.moveaxis(np.indices(shape), 0, -1)[_slice_index(dim, start, end, step)]
    return g.op("ScatterND", x, g.ints(positions), src)


_slice_scatter = defop(
    "slice_scatter",
    inputs=("input", "src"),
    meta=_slice_scatter_meta,
    sbp=lambda x, src, *, dim, **_: _moved_sbp(_kept_axes(len(x.shape), (dim,)), n_in=2),
    kernels={"cpu": _slice_scatter_kernel},
    grad=_slice_scatter_grad,
    onnx=_slice_scatter_onnx,
)


@checked
def slice_scatter(input, src: Tensor, dim=0, start=None, end=None, step=1):
    """A copy of `input` with `src` written into the slice `start:end:step` of dim `dim`."""
    _no_0d("slice_scatter", input)
    d = normalize_dim("slice_scatter", dim, input.ndim)
    if step <= 0:
        raise ShapeError(f"slice_scatter: slice step must be positive, got {step}")
    start, end, step = slice(start, end, step).indices(input.shape[d])
    attrs = {"dim": d, "start": start, "end": max(start, end), "step": step}
    _slice_scatter_meta(input, src, **attrs)  # NumPy would broadcast a src of the wrong shape
    return dispatch(_slice_scatter, (input, src), attrs)


@checked
def select_scatter(input, src: Tensor, dim, index):
    """A copy of `input` with `src` written into entry `index` of dim `dim` (src has the
    shape of `input.select(dim, index)`)."""
    _no_0d("select_scatter", input)
    d = normalize_dim("select_scatter", dim, input.ndim)
    size = input.shape[d]
    if not -size <= index < size:
        raise IndexError(
            f"select_scatter: index {index} is out of range for dim {d} of size {size}"
        )
    index %= size
    shape = tuple(input.shape)
    if tuple(src.shape) != shape[:d] + shape[d + 1 :]:
        raise ShapeError(
            f"select_scatter: expected src of shape {list(shape[:d] + shape[d + 1 :])} "
            f"(input of shape {list(shape)} without dim {d}), got {list(src.shape)}"
        )
    attrs = {"dim": d, "start": index, "end": index + 1, "step": 1}
    return dispatch(_slice_scatter, (input, unsqueeze(src, d)), attrs)


# -- cat and stack --------------------------------------------------------------------------
def _skipped(shape: tuple) -> bool:
    """PyTorch's legacy rule: cat skips 1-d empty tensors whatever the other shapes."""
    return tuple(shape) == (0,)


def _cat_meta(*tensors: Meta, dim) -> Meta:
    if not tensors:
        raise TideflowError("cat: expected a non-empty list of tensors")
    for i, m in enumerate(tensors):
        if not m.shape:
            raise ShapeError(
                f"cat: zero-dimensional tensor (at position {i}) cannot be concatenated"
            )
    parts = [(i, m) for i, m in enumerate(tensors) if not _skipped(m.shape)]
    if not parts:
        return Meta((0,), tensors[0].dtype)
    first, ref = parts[0]
    d = normalize_dim("cat", dim, len(ref.shape))
    for i, m in parts[1:]:
        same = len(m.shape) == len(ref.shape) and all(
            a == b for k, (a, b) in enumerate(zip(m.shape, ref.shape, strict=True)) if k != d
        )
        if not same:
            raise ShapeError(
                f"cat: sizes of tensors must match except in dimension {d}; got "
                f"{list(ref.shape)} (tensor {first}) and {list(m.shape)} (tensor {i})"
            )
    shape = list(ref.shape)
    shape[d] = sum(m.shape[d] for _, m in parts)
    return Meta(tuple(shape), tensors[0].dtype)


def _cat_kernel(*xs, dim, out=None):
    parts = [x for x in xs if not _skipped(x.shape)]
    if not parts:
        return np.empty((0,), xs[0].dtype)
    return np.concatenate(parts, axis=dim, out=out)


def _cat_sbp(*tensors: Meta, dim) -> list[Signature]:
    skipped = [_skipped(m.shape) for m in tensors]
    ndim = max(len(m.shape) for m in tensors)
    sigs = [Signature((B,) * len(tensors), (B,)), Signature((P,) * len(tensors), (P,))]
    for axis in range(ndim):
        if axis != dim:
            ins = tuple(B if s else S(axis) for s in skipped)
            sigs.append(Signature(ins, (S(axis),)))
    return sigs


def _cat_grad(ctx, gy):
    """gy split back into the operands' pieces (one `split`); skipped operands get empty
    gradients."""
    shapes = [ctx.input_shape(i) for i in range(len(ctx.needs_input_grad))]
    sizes = tuple(shape[ctx.dim] for shape in shapes if not _skipped(shape))
    pieces = iter(_split_into(gy, ctx.dim, sizes) if sizes else ())
    grads = []
    for shape, need in zip(shapes, ctx.needs_input_grad, strict=True):
        if _skipped(shape):
            grads.append(gy.new_zeros((0,)) if need else None)
        else:
            piece = next(pieces)
            grads.append(piece if need else None)
    return tuple(grads)


_cat = defop(
    "cat",
    inputs=("*tensors",),
    meta=_cat_meta,
    sbp=_cat_sbp,
    kernels={"cpu": _cat_kernel},
    out_kernels={"cpu": _cat_kernel},
    grad=_cat_grad,
    promote="common",
    onnx=_cat_onnx,
)


def _tensor_list(op: str, tensors) -> tuple:
    tensors = tuple(tensors)
    if not tensors:
        raise TideflowError(f"{op}: expected a non-empty list of tensors")
    return tensors


def cat(tensors, dim=0):
    """Concatenate tensors along an existing dim; dtypes promote like arithmetic. As in
    PyTorch, 1-d empty tensors are skipped whatever their shape."""
    tensors = _tensor_list("cat", tensors)
    ref = next((x for x in tensors if not _skipped(x.shape)), None)
    d = dim if ref is None else normalize_dim("cat", dim, ref.ndim)
    return dispatch(_cat, tensors, {"dim": d})


concat = cat
concatenate = cat


def _stack_meta(*tensors: Meta, dim) -> Meta:
    if not tensors:
        raise TideflowError("stack: expected a non-empty list of tensors")
    ref = tensors[0].shape
    for i, m in enumerate(tensors):
        if m.shape != ref:
            raise ShapeError(
                f"stack: expects each tensor to be equal size, but got {list(ref)} at entry 0 "
                f"and {list(m.shape)} at entry {i}"
            )
    d = _insert_dim("stack", dim, len(ref))
    return Meta((*ref[:d], len(tensors), *ref[d:]), tensors[0].dtype)


def _stack_sbp(*tensors: Meta, dim) -> list[Signature]:
    axis_map = {i: i if i < dim else i + 1 for i in range(len(tensors[0].shape))}
    return _moved_sbp(axis_map, n_in=len(tensors))


def _stack_grad(ctx, gy):
    slices = dispatch(_unbind, (gy,), {"dim": ctx.dim})
    return tuple(g if need else None for g, need in zip(slices, ctx.needs_input_grad, strict=True))


_stack = defop(
    "stack",
    inputs=("*tensors",),
    meta=_stack_meta,
    sbp=_stack_sbp,
    kernels={"cpu": lambda *xs, dim: np.stack(xs, axis=dim)},
    grad=_stack_grad,
    promote="common",
    onnx=_stack_onnx,
)


def stack(tensors, dim=0):
    """Stack equal-shape tensors along a new dim `dim`; dtypes promote like arithmetic."""
    tensors = _tensor_list("stack", tensors)
    d = _insert_dim("stack", dim, tensors[0].ndim)
    return dispatch(_stack, tensors, {"dim": d})


def hstack(tensors):
    """Concatenate horizontally: along dim 0 for 1-d tensors, else dim 1 (0-d become 1-d)."""
    tensors = [_grow_1d(x) for x in _tensor_list("hstack", tensors)]
    return cat(tensors, 0 if all(x.ndim == 1 for x in tensors) else 1)


def vstack(tensors):
    """Concatenate vertically (dim 0) after viewing each tensor as at least 2-d."""
    return cat([_grow_2d(x) for x in _tensor_list("vstack", tensors)], 0)


row_stack = vstack


def dstack(tensors):
    """Concatenate depth-wise (dim 2) after viewing each tensor as at least 3-d."""
    return cat([_grow_3d(x) for x in _tensor_list("dstack", tensors)], 2)


def column_stack(tensors):
    """Concatenate columns (dim 1): 0-d and 1-d tensors become (n, 1) columns first."""
    tensors = _tensor_list("column_stack", tensors)
    return cat([reshape(x, (x.numel(), 1)) if x.ndim < 2 else x for x in tensors], 1)


# -- repeat, tile, repeat_interleave --------------------------------------------------------
def _repeat_meta(x: Meta, *, sizes) -> Meta:
    lead = len(sizes) - len(x.shape)
    if lead < 0:
        raise ShapeError(
            f"repeat: the number of repeat dims ({len(sizes)}) can not be smaller than the "
            f"number of dimensions of the tensor of shape {list(x.shape)}"
        )
    if any(r < 0 for r in sizes):
        raise ShapeError(f"repeat: repeats must be non-negative, got {list(sizes)}")
    padded = (1,) * lead + tuple(x.shape)
    return Meta(tuple(r * d for r, d in zip(sizes, padded, strict=True)), x.dtype)


def _repeat_grad(ctx, gy):
    """The sum of gy's tiles: gy viewed as (r0, d0, r1, d1, ...) summed over every r."""
    in_shape = ctx.input_shape(0)
    sizes = ctx.sizes
    padded = (1,) * (len(sizes) - len(in_shape)) + tuple(in_shape)
    tiles = tuple(v for r, d in zip(sizes, padded, strict=True) for v in (r, d))
    summed = gy.reshape(tiles).sum(tuple(range(0, len(tiles), 2)))
    return (summed.reshape(in_shape),)


def _repeat_sbp(x: Meta, *, sizes) -> list[Signature]:
    lead = len(sizes) - len(x.shape)
    return _moved_sbp({i: lead + i for i in range(len(x.shape)) if sizes[lead + i] == 1})


_repeat = defop(
    "repeat",
    inputs=("input",),
    meta=_repeat_meta,
    sbp=_repeat_sbp,
    kernels={"cpu": lambda x, *, sizes: np.tile(x, sizes)},
    grad=_repeat_grad,
    onnx=_repeat_onnx,
)


def repeat(input, *sizes):
    """Tile the tensor `sizes[i]` times along dim i (extra leading sizes add dims). A copy."""
    attrs = {"sizes": tuple(int(s) for s in _sizes(sizes))}
    _repeat_meta(input, **attrs)  # np.tile would pad missing sizes instead of raising
    return dispatch(_repeat, (input,), attrs)


@checked
def tile(input: Tensor, dims):
    """`repeat` with `dims` padded with leading 1s to the tensor's number of dims."""
    dims = tuple(dims)
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def _repeat_index_meta(repeats: Meta, *, output_size) -> Meta:
    if repeats.dtype.is_floating_point or repeats.dtype.name == "bool":
        raise DTypeError(f"repeat_interleave: repeats must be integers, got {repeats.dtype}")
    if len(repeats.shape) != 1:
        raise ShapeError(
            f"repeat_interleave: repeats must be a 1-d tensor, got shape {list(repeats.shape)}"
        )
    return Meta((output_size,), repeats.dtype)


def _repeat_index_kernel(repeats, *, output_size):
    if (repeats < 0).any():
        raise ShapeError("repeat_interleave: repeats can not be negative")
    index = np.repeat(np.arange(repeats.size, dtype=repeats.dtype), repeats)
    if index.size != output_size:
        raise ShapeError(
            f"repeat_interleave: output_size {output_size} does not match the sum of repeats "
            f"({index.size})"
        )
    return index


# NOTE: the index form `repeat_interleave(repeats)`: [0] * r0 + [1] * r1 + ... Its length is
# the data-dependent sum of repeats, so the wrapper passes it (`output_size`) and meta knows it.
_repeat_index = defop(
    "repeat_interleave",
    inputs=("repeats",),
    meta=_repeat_index_meta,
    sbp=lambda repeats, **_: [Signature((B,), (B,))],
    kernels={"cpu": _repeat_index_kernel},
    differentiable=False,
)


@checked
def repeat_interleave(input: Tensor, repeats=None, dim=None, *, output_size=None):
    """Repeat each entry of `input` along `dim` (the flattened input when None) `repeats`
    times: an int, or a 1-d integer tensor with one count per entry. With a single tensor
    argument, `repeat_interleave(repeats)` gives the index tensor [0] * r0 + [1] * r1 + ..."""
    if repeats is None:
        _repeat_index_meta(input, output_size=0)
        if output_size is None:
            output_size = int(input.sum())
        return dispatch(_repeat_index, (input,), {"output_size": int(output_size)})
    if dim is None:
        input = flatten(input)
        dim = 0
    d = normalize_dim("repeat_interleave", dim, input.ndim)
    if isinstance(repeats, Tensor) and repeats.numel() == 1:
        repeats = int(repeats.reshape(()))
    if isinstance(repeats, Tensor):
        shape = tuple(input.shape)
        if repeats.ndim != 1 or repeats.shape[0] != shape[d]:
            raise ShapeError(
                f"repeat_interleave: repeats must have one count per entry of dim {d} of the "
                f"tensor of shape {list(shape)}, got repeats of shape {list(repeats.shape)}"
            )
        return input.index_select(d, repeat_interleave(repeats, output_size=output_size))
    repeats = int_arg("repeat_interleave", "repeats", repeats)
    if repeats < 0:
        raise ShapeError(f"repeat_interleave: repeats can not be negative, got {repeats}")
    shape = tuple(input.shape)
    factors = [1] * (len(shape) + 1)
    factors[d + 1] = repeats
    tiled = repeat(unsqueeze(input, d + 1), factors)  # (..., n, repeats, ...), a fresh copy
    return reshape(tiled, (*shape[:d], shape[d] * repeats, *shape[d + 1 :]))


# -- flip, roll -----------------------------------------------------------------------------
_flip = defop(
    "flip",
    inputs=("input",),
    meta=lambda x, *, dims: Meta(x.shape, x.dtype),
    sbp=lambda x, *, dims: _moved_sbp(_kept_axes(len(x.shape), dims)),
    kernels={"cpu": lambda x, *, dims: np.flip(x, dims).copy()},
    grad=lambda ctx, gy: (gy.flip(ctx.dims),),
    onnx=_flip_onnx,
)


@checked
def flip(input: Tensor, dims):
    """A copy with the order of entries reversed along each of `dims`."""
    dims = _dims("flip", dims, input.ndim) if input.ndim else ()
    return dispatch(_flip, (input,), {"dims": dims})


def fliplr(input):
    """Reverse dim 1 (left/right) of a tensor with at least 2 dims."""
    _at_least("fliplr", input, 2)
    return flip(input, (1,))


def flipud(input):
    """Reverse dim 0 (up/down) of a tensor with at least 1 dim."""
    _at_least("flipud", input, 1)
    return flip(input, (0,))


@checked
def rot90(input: Tensor, k=1, dims=(0, 1)):
    """A copy rotated by `k` quarter turns in the plane of `dims`, from the first dim toward
    the second (negative `k` turns the other way).

    >>> flow.rot90(flow.tensor([[1, 2], [3, 4]]))
    tensor([[2, 4],
            [1, 3]])
    """
    if len(dims) != 2:
        raise TensorIndexError(f"rot90: expected two rotation dims, got {list(dims)}")
    if input.ndim < 2:
        raise ShapeError(
            f"rot90: expected a tensor of at least 2 dims, got shape {list(input.shape)}"
        )
    first, second = (normalize_dim("rot90", d, input.ndim) for d in dims)
    if first == second:
        raise TensorIndexError(f"rot90: expected two different rotation dims, got {list(dims)}")
    turns = int_arg("rot90", "k", k) % 4
    if turns == 1:
        return input.flip((second,)).transpose(first, second)
    if turns == 2:
        return input.flip((first, second))
    if turns == 3:
        return input.flip((first,)).transpose(first, second)
    return input.clone()


def _roll_sbp(x: Meta, *, shifts, dims) -> list[Signature]:
    if dims is None:  # rolls the flattened tensor: every axis mixes
        return _moved_sbp({})
    return _moved_sbp(_kept_axes(len(x.shape), dims))


def _roll_kernel(x, *, shifts, dims):
    if dims is None:
        return np.roll(x, shifts[0])
    return np.roll(x, shifts, axis=dims)


_roll = defop(
    "roll",
    inputs=("input",),
    meta=lambda x, *, shifts, dims: Meta(x.shape, x.dtype),
    sbp=_roll_sbp,
    kernels={"cpu": _roll_kernel},
    grad=lambda ctx, gy: (
        dispatch(_roll, (gy,), {"shifts": tuple(-s for s in ctx.shifts), "dims": ctx.dims}),
    ),
    onnx=_roll_onnx,
)


@checked
def roll(input: Tensor, shifts, dims=None):
    """Rotate entries by `shifts` along `dims` (ints or sequences of equal length); entries
    pushed past the end come back at the start. With `dims=None`, roll the flattened tensor."""
    shifts = (shifts,) if isinstance(shifts, int) else tuple(int(s) for s in shifts)
    if dims is None:
        if len(shifts) != 1:
            raise ShapeError(
                f"roll: shifts {list(shifts)} name several dims but dims is None; "
                "pass one shift or one dim per shift"
            )
        return dispatch(_roll, (input,), {"shifts": shifts, "dims": None})
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise ShapeError(f"roll: shifts {list(shifts)} and dims {list(dims)} must align")
    if input.ndim == 0:
        raise IndexError("roll: cannot roll along a dim of a 0-d tensor; use dims=None")
    dims = tuple(normalize_dim("roll", d, input.ndim) for d in dims)
    return dispatch(_roll, (input,), {"shifts": shifts, "dims": dims})


# -- triangles and diagonals ----------------------------------------------------------------
def _triangle(name: str, kernel):
    def meta(x: Meta, *, diagonal) -> Meta:
        _at_least(name, x, 2)
        return Meta(x.shape, x.dtype)

    op = defop(
        name,
        inputs=("input",),
        meta=meta,
        # NOTE: the matrix axes need the global row/column index to place the diagonal
        sbp=lambda x, *, diagonal: _moved_sbp(_kept_axes(len(x.shape) - 2, ())),
        kernels={"cpu": lambda x, *, diagonal: kernel(x, diagonal)},
        grad=lambda ctx, gy: (dispatch(op, (gy,), ctx.attrs),),
        onnx=lambda g, x, *, diagonal: g.op(
            "Trilu", x, g.ints(diagonal), upper=int(name == "triu")
        ),
    )
    return op


_tril = _triangle("tril", np.tril)
_triu = _triangle("triu", np.triu)


def tril(input, diagonal=0):
    """The lower triangle of the last two dims (entries above the `diagonal`-th diagonal set
    to 0; positive `diagonal` keeps diagonals above the main one). A copy."""
    _at_least("tril", input, 2)
    return dispatch(_tril, (input,), {"diagonal": int(diagonal)})


def triu(input, diagonal=0):
    """The upper triangle of the last two dims (entries below the `diagonal`-th diagonal set
    to 0). A copy."""
    _at_least("triu", input, 2)
    return dispatch(_triu, (input,), {"diagonal": int(diagonal)})


def _diagonal_dims(op: str, x: Meta | Tensor, dim1: int, dim2: int) -> tuple[int, int]:
    _at_least(op, x, 2)
    d1 = normalize_dim(op, dim1, len(x.shape))
    d2 = normalize_dim(op, dim2, len(x.shape))
    if d1 == d2:
        raise ShapeError(f"{op}: diagonal dimensions cannot be identical ({dim1}, {dim2})")
    return d1, d2


def _diagonal_shape(shape: tuple, offset: int, dim1: int, dim2: int) -> tuple:
    rows = shape[dim1] - max(-offset, 0)  # rows and columns the diagonal can run through
    cols = shape[dim2] - max(offset, 0)
    return (*(d for i, d in enumerate(shape) if i not in (dim1, dim2)), max(0, min(rows, cols)))


def _diagonal_meta(x: Meta, *, offset, dim1, dim2) -> Meta:
    d1, d2 = _diagonal_dims("diagonal", x, dim1, dim2)
    return Meta(_diagonal_shape(x.shape, offset, d1, d2), x.dtype)


def _diagonal_kernel(x, *, offset, dim1, dim2):
    out = np.diagonal(x, offset, dim1, dim2)
    if x.flags.writeable:  # NumPy's diagonal is a read-only view; PyTorch's is writable
        out.flags.writeable = True
    return out


def _batch_axes(ndim: int, dim1: int, dim2: int) -> dict[int, int]:
    """Input axis -> position among the batch axes (all but dim1, dim2), as diagonal orders
    its output: the batch axes first, the diagonal last."""
    batch = [i for i in range(ndim) if i not in (dim1, dim2)]
    return {a: k for k, a in enumerate(batch)}


def _diagonal_grad(ctx, gy):
    zeros = gy.new_zeros(ctx.input_shape(0))
    return (dispatch(_diagonal_scatter, (zeros, gy), ctx.attrs),)


_diagonal = defop(
    "diagonal",
    inputs=("input",),
    meta=_diagonal_meta,
    sbp=lambda x, *, offset, dim1, dim2: _moved_sbp(_batch_axes(len(x.shape), dim1, dim2)),
    kernels={"cpu": _diagonal_kernel},
    grad=_diagonal_grad,
    view=True,
)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """A view of the `offset`-th diagonal of the planes spanned by dims `dim1`, `dim2` (above
    the main diagonal for offset > 0): those dims are removed and the diagonal is appended
    as the last dim."""
    d1, d2 = _diagonal_dims("diagonal", input, dim1, dim2)
    return dispatch(_diagonal, (input,), {"offset": int(offset), "dim1": d1, "dim2": d2})


def _diagonal_scatter_meta(x: Meta, src: Meta, *, offset, dim1, dim2) -> Meta:
    expected = _diagonal_meta(x, offset=offset, dim1=dim1, dim2=dim2).shape
    if tuple(src.shape) != expected:
        raise ShapeError(
            f"diagonal_scatter: expected src to have the shape of the diagonal "
            f"{list(expected)}, got {list(src.shape)} (input of shape {list(x.shape)}, "
            f"offset {offset}, dims {dim1} and {dim2})"
        )
    return Meta(x.shape, x.dtype)


def _diagonal_scatter_kernel(x, src, *, offset, dim1, dim2):
    out = np.array(x, copy=True)
    _diagonal_kernel(out, offset=offset, dim1=dim1, dim2=dim2)[...] = src
    return out


def _diagonal_scatter_grad(ctx, gy):
    need_x, need_src = ctx.needs_input_grad
    gx = gsrc = None
    if need_x:
        gx = dispatch(_diagonal_scatter, (gy, gy.new_zeros(ctx.input_shape(1))), ctx.attrs)
    if need_src:
        gsrc = dispatch(_diagonal, (gy,), ctx.attrs)
    return gx, gsrc


def _diagonal_scatter_sbp(x: Meta, src: Meta, *, offset, dim1, dim2) -> list[Signature]:
    sigs = [Signature((B, B), (B,)), Signature((P, P), (P,))]
    for a, k in _batch_axes(len(x.shape), dim1, dim2).items():
        sigs.append(Signature((S(a), S(k)), (S(a),)))
    return sigs


_diagonal_scatter = defop(
    "diagonal_scatter",
    inputs=("input", "src"),
    meta=_diagonal_scatter_meta,
    sbp=_diagonal_scatter_sbp,
    kernels={"cpu": _diagonal_scatter_kernel},
    grad=_diagonal_scatter_grad,
)


@checked
def diagonal_scatter(input, src: Tensor, offset=0, dim1=0, dim2=1):
    """A copy of `input` with `src` written into its diagonal (as `diagonal(input, offset,
    dim1, dim2)` lays it out)."""
    d1, d2 = _diagonal_dims("diagonal_scatter", input, dim1, dim2)
    attrs = {"offset": int(offset), "dim1": d1, "dim2": d2}
    _diagonal_scatter_meta(input, src, **attrs)  # NumPy would broadcast a src of the wrong shape
    return dispatch(_diagonal_scatter, (input, src), attrs)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices with the last dim of `input` on their `offset`-th diagonal (in the planes
    of output dims `dim1`, `dim2`) and zeros elsewhere."""
    _at_least("diag_embed", input, 1)
    ndim = input.ndim + 1
    d1 = normalize_dim("diag_embed", dim1, ndim)
    d2 = normalize_dim("diag_embed", dim2, ndim)
    if d1 == d2:
        raise ShapeError(f"diag_embed: diagonal dimensions cannot be identical ({dim1}, {dim2})")
    n = input.shape[-1] + abs(offset)
    shape = list(input.shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, n)
    attrs = {"offset": int(offset), "dim1": d1, "dim2": d2}
    return dispatch(_diagonal_scatter, (input.new_zeros(tuple(shape)), input), attrs)


@checked
def diag(input: Tensor, diagonal=0):
    """A 1-d tensor gives the square matrix with it on its `diagonal`-th diagonal; a 2-d
    tensor gives a copy of that diagonal."""
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return input.diagonal(diagonal).clone()
    raise ShapeError(f"diag: expects a 1-d or 2-d tensor, got shape {list(input.shape)}")


# -- Tensor methods -------------------------------------------------------------------------
def _split_method(self, split_size, dim=0):
    return split(self, split_size, dim)


def _tile_method(self, *dims):
    return tile(self, _sizes(dims))


def _flip_method(self, *dims):
    return flip(self, _sizes(dims))


methods(
    reshape=reshape,
    view=view,
    view_as=view_as,
    flatten=flatten,
    unflatten=unflatten,
    squeeze=squeeze,
    unsqueeze=unsqueeze,
    expand=expand,
    expand_as=expand_as,
    broadcast_to=broadcast_to,
    permute=permute,
    transpose=transpose,
    swapaxes=swapaxes,
    swapdims=swapdims,
    t=t,
    T=property(_T),
    mT=property(_mT),
    movedim=movedim,
    moveaxis=movedim,
    narrow=narrow,
    select=select,
    split=_split_method,
    chunk=chunk,
    unbind=unbind,
    tensor_split=tensor_split,
    hsplit=hsplit,
    vsplit=vsplit,
    dsplit=dsplit,
    slice_scatter=slice_scatter,
    select_scatter=select_scatter,
    repeat=repeat,
    tile=_tile_method,
    repeat_interleave=repeat_interleave,
    flip=_flip_method,
    fliplr=fliplr,
    flipud=flipud,
    rot90=rot90,
    roll=roll,
    tril=tril,
    triu=triu,
    tril_=inplace(tril, "tril_"),
    triu_=inplace(triu, "triu_"),
    diagonal=diagonal,
    diagonal_scatter=diagonal_scatter,
    diag_embed=diag_embed,
    diag=diag,
)
