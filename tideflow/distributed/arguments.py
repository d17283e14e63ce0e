"""Argument checks and buffer handling shared by the tensor-level communication calls."""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence

import numpy as np

from ..framework.dtype import from_numpy
from ..framework.errors import DTypeError, ShapeError, TideflowError
from ..framework.tensor import Tensor
from . import faults
from .backend import ReduceOp
from .groups import ProcessGroup, group
from .world import get_world


def member_group(pg, call: str) -> ProcessGroup | None:
    """The group a call runs on (None: the world), or None when this rank is not in it:
    then the call does nothing, after PyTorch's warning."""
    pg = group.WORLD if pg is None else pg
    if not isinstance(pg, ProcessGroup):
        raise TypeError(f"{call}: group must be a ProcessGroup, got {type(pg).__name__}")
    if not pg.is_member():
        warnings.warn(
            f"Running {call} on global rank {get_world().rank} which does not belong to "
            "the given group.",
            stacklevel=3,
        )
        return None
    if faults.armed:
        faults.reached("collective", call)
    return pg


def array_of(tensor, call: str, name: str) -> np.ndarray:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{call}: {name} must be a tideflow.Tensor, got {type(tensor).__name__}")
    return tensor._data


def list_of_tensors(tensors, call: str, name: str, size: int, dtype: np.dtype) -> list[np.ndarray]:
    """The arrays of a list of one tensor per rank of the group, all of dtype `dtype`."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{call}: {name} must be a list of tensors, got {type(tensors).__name__}")
    if len(tensors) != size:
        raise TideflowError(
            f"{call}: {name} has {len(tensors)} tensors, expected one per rank of the "
            f"group ({size})"
        )
    arrays = [array_of(t, call, f"{name}[{i}]") for i, t in enumerate(tensors)]
    for i, a in enumerate(arrays):
        if a.dtype != dtype:
            raise DTypeError(
                f"{call}: {name}[{i}] is {_dtype_name(a)}, expected "
                f"{_dtype_name(dtype)} like the other tensors"
            )
    return arrays


def same_numel(a: np.ndarray, b: np.ndarray, call: str, what: str) -> None:
    if a.size != b.size:
        raise ShapeError(
            f"{call}: {what} has shape {list(a.shape)} ({a.size} elements), expected "
            f"{b.size} elements (shape {list(b.shape)})"
        )


def check_dtypes(a: np.ndarray, b: np.ndarray, call: str, a_name: str, b_name: str) -> None:
    if a.dtype != b.dtype:
        raise DTypeError(
            f"{call}: {a_name} is {_dtype_name(a)} but {b_name} is {_dtype_name(b)}; "
            "they must have the same dtype"
        )


def check_reduction(op: ReduceOp, a: np.ndarray, call: str) -> None:
    kind = a.dtype.kind
    if op is ReduceOp.AVG and kind not in "fV":  # ml_dtypes' bfloat16 has kind 'V'
        raise DTypeError(
            f"{call}: ReduceOp.AVG needs a floating point tensor, got {_dtype_name(a)}"
        )
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and kind not in "iub":
        raise DTypeError(
            f"{call}: ReduceOp.{op.name} needs an integer or bool tensor, got {_dtype_name(a)}"
        )


def group_rank(
    pg: ProcessGroup, global_rank, rank_in_group, call: str, name: str, default: int | None
) -> int:
    """The group rank a call names by its world rank (`src`), or directly (`group_src`)."""
    if global_rank is not None and rank_in_group is not None:
        raise ValueError(f"{call}: give {name} or group_{name}, not both")
    if rank_in_group is not None:
        rank = _index(rank_in_group, call, f"group_{name}")
        pg.global_rank(rank, f"{call}: group_{name}")  # checks the range
        return rank
    if global_rank is None:
        if default is None:
            raise ValueError(f"{call}: {name} (the rank to use) is required")
        global_rank = default
    return pg.group_rank(_index(global_rank, call, name), f"{call}: {name}")


def peer_rank(pg: ProcessGroup, rank, rank_in_group, call: str, name: str) -> int:
    """The group rank of a point-to-point peer, which must not be this process."""
    peer = group_rank(pg, rank, rank_in_group, call, name, default=None)
    if peer == pg.rank():
        raise ValueError(
            f"{call}: {name} {pg.ranks[peer]} is this process's own rank; a rank cannot "
            "send to or receive from itself"
        )
    return peer


def check_tag(tag, call: str) -> int:
    tag = _index(tag, call, "tag")
    if tag < 0:
        raise ValueError(f"{call}: tag must be non-negative, got {tag}")
    return tag


def contiguous(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def apart(send: np.ndarray, recv) -> np.ndarray:
    """`send`, or a copy of it where it may overlap the receive buffer(s) (an array, a list
    or None): MPI forbids aliased buffers, while `gather(t, [t, u])` is natural code."""
    recvs = () if recv is None else [recv] if isinstance(recv, np.ndarray) else recv
    return send.copy() if any(np.may_share_memory(send, r) for r in recvs) else send


def write(tensor: Tensor, values: np.ndarray) -> None:
    """Store `values` (same number of elements) into `tensor` in place."""
    data = tensor._data
    if values is not data:
        np.copyto(data, values.reshape(data.shape))
    tensor._version[0] += 1


def concat(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """The arrays' elements back to back in one new contiguous buffer."""
    return np.concatenate([a.reshape(-1) for a in arrays])


def write_each(tensors: Sequence[Tensor], buffers: Sequence[np.ndarray]) -> None:
    for t, b in zip(tensors, buffers, strict=True):
        write(t, b)


def _index(value, call: str, name: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{call}: {name} must be an int, got {type(value).__name__}") from None


def _dtype_name(a: np.ndarray | np.dtype) -> str:
    return repr(from_numpy(a if isinstance(a, np.dtype) else a.dtype))
