"""Collectives on local tensors, with `torch.distributed`'s calling conventions.

Each call checks its arguments (so a world of one rejects what a world of eight would),
hands contiguous NumPy buffers to the group's communicator, and writes results into the
given tensors in place, bumping their version counters. Ranks named by `src`/`dst` are world
ranks; `group_src`/`group_dst` name them within `group`. A rank outside `group` does nothing
(after PyTorch's warning). Results do not record autograd history.
"""

from __future__ import annotations

import numpy as np

from ..framework.errors import ShapeError
from .arguments import (
    apart,
    array_of,
    check_dtypes,
    check_reduction,
    concat,
    contiguous,
    group_rank,
    list_of_tensors,
    member_group,
    same_numel,
    write,
    write_each,
)
from .backend import ReduceOp, to_reduce_op
from .work import Work, done


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False) -> Work | None:
    """Reduce `tensor` over the ranks of `group`; every rank gets the result, in place.

    `op`: ReduceOp.SUM (default), PRODUCT, MIN, MAX, AVG (floating point), BAND, BOR, BXOR
    (integers and bool), or its name.

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> t = flow.tensor([1.0, 2.0])
    >>> dist.all_reduce(t, op=dist.ReduceOp.MAX)
    >>> t
    tensor([1., 2.])
    """
    op = to_reduce_op(op)
    pg = member_group(group, "all_reduce")
    if pg is None:
        return None
    a = array_of(tensor, "all_reduce", "tensor")
    check_reduction(op, a, "all_reduce")
    buf = contiguous(a)
    pg.comm.allreduce(buf, buf, op)
    write(tensor, buf)
    return done(async_op)


def all_gather(tensor_list, tensor, group=None, async_op: bool = False) -> Work | None:
    """Gather every rank's `tensor` into `tensor_list` (one tensor per rank, in rank order).

    Ranks may contribute tensors of different sizes; `tensor_list[i]` must have rank i's
    number of elements (on every rank) and this rank's entry the shape of `tensor`.

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> out = [flow.zeros(2)]
    >>> dist.all_gather(out, flow.tensor([1.0, 2.0]))
    >>> out
    [tensor([1., 2.])]
    """
    pg = member_group(group, "all_gather")
    if pg is None:
        return None
    a = array_of(tensor, "all_gather", "tensor")
    outs = list_of_tensors(tensor_list, "all_gather", "tensor_list", pg.size(), a.dtype)
    mine = outs[pg.rank()]
    if mine.shape != a.shape:
        raise ShapeError(
            f"all_gather: tensor_list[{pg.rank()}] (this rank's) has shape {list(mine.shape)}, "
            f"expected the shape of tensor, {list(a.shape)}"
        )
    recvs = [contiguous(o) for o in outs]
    pg.comm.allgather(apart(contiguous(a), recvs), recvs)
    write_each(tensor_list, recvs)
    return done(async_op)


def all_gather_into_tensor(
    output_tensor, input_tensor, group=None, async_op: bool = False
) -> Work | None:
    """Gather every rank's `input_tensor` into `output_tensor`, concatenated along dim 0
    (shape `[size * n, ...]`) or stacked (shape `[size, n, ...]`).

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> out = flow.zeros(2)
    >>> dist.all_gather_into_tensor(out, flow.tensor([1.0, 2.0]))
    >>> out
    tensor([1., 2.])
    """
    call = "all_gather_into_tensor"
    pg = member_group(group, call)
    if pg is None:
        return None
    a = array_of(input_tensor, call, "input_tensor")
    out = array_of(output_tensor, call, "output_tensor")
    check_dtypes(out, a, call, "output_tensor", "input_tensor")
    _check_blocks(out, a, pg.size(), call, "output_tensor", "input_tensor")
    recv = contiguous(out)
    pg.comm.allgather(apart(contiguous(a), recv), recv)
    write(output_tensor, recv)
    return done(async_op)


# PyTorch 2.13's names for the two calls above and below (the old ones are OneFlow's)
all_gather_single = all_gather_into_tensor


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False) -> Work | None:
    """Reduce the lists over the ranks; rank i receives the reduction of `input_list[i]`.

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> out = flow.zeros(2)
    >>> dist.reduce_scatter(out, [flow.tensor([1.0, 2.0])])
    >>> out
    tensor([1., 2.])
    """
    op = to_reduce_op(op)
    pg = member_group(group, "reduce_scatter")
    if pg is None:
        return None
    out = array_of(output, "reduce_scatter", "output")
    ins = list_of_tensors(input_list, "reduce_scatter", "input_list", pg.size(), out.dtype)
    check_reduction(op, out, "reduce_scatter")
    same_numel(ins[pg.rank()], out, "reduce_scatter", f"input_list[{pg.rank()}] (this rank's)")
    counts = [i.size for i in ins]
    recv = contiguous(out)
    pg.comm.reduce_scatter(concat(ins), recv, op, None if len(set(counts)) == 1 else counts)
    write(output, recv)
    return done(async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `input` over the ranks and scatter it: rank i receives block i along dim 0
    (`input` has shape `[size * n, ...]` or `[size, n, ...]` for an `output` of `[n, ...]`).

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> out = flow.zeros(2)
    >>> dist.reduce_scatter_tensor(out, flow.tensor([1.0, 2.0]))
    >>> out
    tensor([1., 2.])
    """
    call = "reduce_scatter_tensor"
    op = to_reduce_op(op)
    pg = member_group(group, call)
    if pg is None:
        return None
    out = array_of(output, call, "output")
    a = array_of(input, call, "input")
    check_dtypes(out, a, call, "output", "input")
    check_reduction(op, a, call)
    _check_blocks(a, out, pg.size(), call, "input", "output")
    recv = contiguous(out)
    pg.comm.reduce_scatter(apart(contiguous(a), recv), recv, op)
    write(output, recv)
    return done(async_op)


reduce_scatter_single = reduce_scatter_tensor


def broadcast(tensor, src=None, group=None, async_op: bool = False, group_src=None):
    """Copy rank `src`'s `tensor` into `tensor` on every rank of `group`.

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> t = flow.tensor([1, 2])
    >>> dist.broadcast(t, src=0)
    >>> t
    tensor([1, 2])
    """
    pg = member_group(group, "broadcast")
    if pg is None:
        return None
    a = array_of(tensor, "broadcast", "tensor")
    root = group_rank(pg, src, group_src, "broadcast", "src", default=None)
    buf = contiguous(a)
    pg.comm.bcast(buf, root)
    if pg.rank() != root:
        write(tensor, buf)
    return done(async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce `tensor` over the ranks of `group` into `tensor` on rank `dst`; the other
    ranks' tensors are left as they are.

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> t = flow.tensor([1.0, 2.0])
    >>> dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
    >>> t
    tensor([1., 2.])
    """
    op = to_reduce_op(op)
    pg = member_group(group, "reduce")
    if pg is None:
        return None
    a = array_of(tensor, "reduce", "tensor")
    check_reduction(op, a, "reduce")
    root = group_rank(pg, dst, group_dst, "reduce", "dst", default=None)
    buf = contiguous(a)
    at_root = pg.rank() == root
    pg.comm.reduce(buf, buf if at_root else None, op, root)
    if at_root:
        write(tensor, buf)
    return done(async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False) -> Work | None:
    """Send `input_tensor_list[j]` to rank j; receive rank i's into `output_tensor_list[i]`.
    Tensors may differ in size from rank to rank.

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> out = [flow.zeros(3)]
    >>> dist.all_to_all(out, [flow.tensor([1.0, 2.0, 3.0])])
    >>> out
    [tensor([1., 2., 3.])]
    """
    call = "all_to_all"
    pg = member_group(group, call)
    if pg is None:
        return None
    if not isinstance(input_tensor_list, (list, tuple)) or not input_tensor_list:
        raise TypeError(f"{call}: input_tensor_list must be a non-empty list of tensors")
    dtype = array_of(input_tensor_list[0], call, "input_tensor_list[0]").dtype
    ins = list_of_tensors(input_tensor_list, call, "input_tensor_list", pg.size(), dtype)
    outs = list_of_tensors(output_tensor_list, call, "output_tensor_list", pg.size(), dtype)
    recvs = [contiguous(o) for o in outs]
    pg.comm.alltoall([apart(contiguous(i), recvs) for i in ins], recvs)
    write_each(output_tensor_list, recvs)
    return done(async_op)


def all_to_all_single(
    output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False
) -> Work | None:
    """Split `input` along dim 0, send block j to rank j, and concatenate the blocks
    received from every rank into `output`. Without split sizes the blocks are even.

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> out = flow.zeros(2, 2)
    >>> dist.all_to_all_single(out, flow.ones(2, 2))
    >>> out
    tensor([[1., 1.],
            [1., 1.]])
    """
    call = "all_to_all_single"
    pg = member_group(group, call)
    if pg is None:
        return None
    a = array_of(input, call, "input")
    out = array_of(output, call, "output")
    check_dtypes(out, a, call, "output", "input")
    size = pg.size()
    send_counts = _split_counts(a, input_split_sizes, size, call, "input")
    recv_counts = _split_counts(out, output_split_sizes, size, call, "output")
    if out.ndim and a.ndim and out.shape[1:] != a.shape[1:]:
        raise ShapeError(
            f"{call}: output has shape {list(out.shape)} and input {list(a.shape)}; they "
            "must agree past dim 0"
        )
    recv = contiguous(out)
    send = apart(contiguous(a), recv)
    if input_split_sizes is None and output_split_sizes is None:
        pg.comm.alltoall(send, recv)
    else:
        pg.comm.alltoall(send, recv, send_counts, recv_counts)
    write(output, recv)
    return done(async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """Rank `src` (default 0) sends `scatter_list[i]` to rank i, which receives it into
    `tensor`. Only `src` gives `scatter_list`.

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> t = flow.zeros(2)
    >>> dist.scatter(t, [flow.tensor([1.0, 2.0])], src=0)
    >>> t
    tensor([1., 2.])
    """
    pg = member_group(group, "scatter")
    if pg is None:
        return None
    a = array_of(tensor, "scatter", "tensor")
    root = group_rank(pg, src, group_src, "scatter", "src", default=0)
    sends = None
    if pg.rank() == root:
        if not scatter_list:
            raise ValueError("scatter: scatter_list must be given on the source rank")
        ins = list_of_tensors(scatter_list, "scatter", "scatter_list", pg.size(), a.dtype)
        same_numel(ins[root], a, "scatter", f"scatter_list[{root}] (this rank's)")
        sends = [apart(contiguous(i), a) for i in ins]
    elif scatter_list:
        raise ValueError("scatter: scatter_list must not be given on ranks other than src")
    recv = contiguous(a)
    pg.comm.scatter(sends, recv, root)
    write(tensor, recv)
    return done(async_op)


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """Rank `dst` (default 0) receives every rank's `tensor` into `gather_list` (one
    tensor per rank). Only `dst` gives `gather_list`.

    >>> import tideflow as flow, tideflow.distributed as dist
    >>> out = [flow.zeros(2)]
    >>> dist.gather(flow.tensor([1.0, 2.0]), out, dst=0)
    >>> out
    [tensor([1., 2.])]
    """
    pg = member_group(group, "gather")
    if pg is None:
        return None
    a = array_of(tensor, "gather", "tensor")
    root = group_rank(pg, dst, group_dst, "gather", "dst", default=0)
    recvs = None
    if pg.rank() == root:
        if not gather_list:
            raise ValueError("gather: gather_list must be given on the destination rank")
        outs = list_of_tensors(gather_list, "gather", "gather_list", pg.size(), a.dtype)
        same_numel(outs[root], a, "gather", f"gather_list[{root}] (this rank's)")
        recvs = [contiguous(o) for o in outs]
    elif gather_list:
        raise ValueError("gather: gather_list must not be given on ranks other than dst")
    pg.comm.gather(apart(contiguous(a), recvs), recvs, root)
    if recvs is not None:
        write_each(gather_list, recvs)
    return done(async_op)


def barrier(group=None, async_op: bool = False, device_ids=None, timeout=None) -> Work | None:
    """Wait until every rank of `group` has called `barrier`.

    >>> import tideflow.distributed as dist
    >>> dist.barrier()
    """
    pg = member_group(group, "barrier")
    if pg is None:
        return None
    pg.comm.barrier()
    return done(async_op)


def _check_blocks(big: np.ndarray, block: np.ndarray, size: int, call, big_name, block_name):
    """`big` holds `size` blocks shaped like `block`, concatenated or stacked on dim 0."""
    stacked = (size, *block.shape)
    concatenated = (size * block.shape[0], *block.shape[1:]) if block.ndim else stacked
    if big.shape not in (concatenated, stacked):
        raise ShapeError(
            f"{call}: {big_name} has shape {list(big.shape)}, but with {size} ranks and "
            f"{block_name} of shape {list(block.shape)} it must be {list(concatenated)}"
            + ("" if stacked == concatenated else f" or {list(stacked)}")
        )


def _split_counts(a: np.ndarray, split_sizes, size: int, call: str, name: str) -> list[int]:
    """Elements per rank of `a` split along dim 0 by `split_sizes` (None: evenly)."""
    rows = a.shape[0] if a.ndim else 1
    row = int(np.prod(a.shape[1:]))
    if split_sizes is None:
        if rows % size:
            raise ShapeError(
                f"{call}: {name} has {rows} rows along dim 0, which do not split evenly "
                f"over {size} ranks; pass {name}_split_sizes"
            )
        return [rows // size * row] * size
    splits = [int(s) for s in split_sizes]
    if len(splits) != size or sum(splits) != rows or min(splits) < 0:
        raise ValueError(
            f"{call}: {name}_split_sizes {splits} must be {size} non-negative sizes that add "
            f"up to {name}'s {rows} rows along dim 0"
        )
    return [s * row for s in splits]
