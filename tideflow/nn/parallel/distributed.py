"""`DistributedDataParallel`: one replica of a module per rank, gradients averaged in backward.

Each rank runs the module on its own part of the batch; during backward the gradients are
summed over the ranks and divided by their number, bucket by bucket as they become ready
(`_reducer.py`), so after `loss.backward()` every rank holds the gradient of the mean loss
over the whole batch, and the same optimizer step keeps the replicas identical.

This is PyTorch's data parallelism on local tensors. tideflow's own form of it is a global
module (parameters broadcast, batch split: docs/global_tensors.md), where the all-reduce is
the boxing of the gradients; the two give the same result.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence

import numpy as np

from ...distributed.backend import Communicator
from ...distributed.groups import ProcessGroup, communicator, group
from ...framework import dtype as dtypes
from ...framework.conventions import follows_pytorch
from ...framework.errors import TideflowError
from ...framework.grad_mode import is_grad_enabled
from ...framework.tensor import Tensor
from ..modules.module import Module
from ._reducer import BucketCaps, Reducer

__all__ = ["DistributedDataParallel"]

_MIB = 1024 * 1024
_DEFAULT_BUCKET_CAP_MB = 25
_DEFAULT_FIRST_BUCKET_BYTES = 1 * _MIB  # small, so that the first reduction starts early
_BROADCAST_BUCKET_BYTES = 250 * _MIB  # parameters and buffers sent from rank 0 per call


class DistributedDataParallel(Module):
    """Data parallelism over the ranks of `process_group` (default: every rank), as
    `torch.nn.parallel.DistributedDataParallel`.

    At construction the ranks check that they hold the same parameters (number, shapes,
    dtypes) and take rank 0's values of the parameters and buffers (`init_sync`). During
    backward each parameter's gradient is averaged over the ranks, in buckets of
    `bucket_cap_mb` MiB (or of `bucket_size` parameters, OneFlow's keyword) reduced as soon as
    all their gradients are ready (beside the rest of backward where the communicator has a
    non-blocking all-reduce; MPI's blocking one runs between backward steps). Buffers
    (BatchNorm's running statistics) are sent from rank 0 before each forward unless
    `broadcast_buffers=False` (or PyTorch 2.13's `forward_sync_buffers=False`, which still
    syncs them at construction).

    - `no_sync()`: gradients of the backward passes run inside accumulate locally; the first
      synced backward after it averages the accumulated sums.
    - `find_unused_parameters=True`: parameters the forward output does not depend on count
      as ready (with zero gradients); a parameter no rank used keeps its `.grad`. Without it
      every parameter must get a gradient in every synced iteration.
    - `static_graph=True`: the set of unused parameters is found once, in the first iteration.
    - `gradient_as_bucket_view=True`: `.grad` tensors are views of the communication buckets
      (no copy back after the reduction).
    - `use_bucket=False` (OneFlow's keyword): each gradient is reduced alone as soon as it is
      ready (no buckets; `bucket_size` and `bucket_cap_mb` are then ignored).
    - As OneFlow's DDP (which returns the module itself), the wrapper answers attributes it
      lacks with the module's (`ddp.in_features`); under `mock_torch` it does not, as PyTorch's.

    `device_ids` and `output_device` must be None: modules are on the CPU. The wrapper's
    `state_dict()` keys start with "module.", as PyTorch's do; save `ddp.module.state_dict()`
    for keys that load into the bare module. In a world of one the wrapper adds nothing.

    >>> model = flow.nn.parallel.DistributedDataParallel(flow.nn.Linear(4, 2))
    >>> model(flow.ones(3, 4)).sum().backward()
    >>> model.module.weight.grad.shape
    tideflow.Size([2, 4])
    >>> list(model.state_dict())
    ['module.weight', 'module.bias']
    """

    def __init__(
        self,
        module: Module,
        device_ids=None,
        output_device=None,
        dim: int = 0,
        broadcast_buffers: bool | None = None,
        init_sync: bool = True,
        process_group: ProcessGroup | None = None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
        *,
        bucket_size: int | None = None,
        use_bucket: bool = True,
        forward_sync_buffers: bool | None = None,
    ) -> None:
        super().__init__()
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        _check_module(module, named, device_ids, output_device)
        if check_reduction:
            warnings.warn(
                "The `check_reduction` argument in `DistributedDataParallel` module is "
                "deprecated. Please avoid using it.",
                FutureWarning,
                stacklevel=2,
            )
        self.module = module
        self.device_ids = None
        self.output_device = None
        self.dim = dim
        self.process_group = group.WORLD if process_group is None else process_group
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.forward_sync_buffers, init_sync_buffers = _buffer_sync(
            broadcast_buffers, forward_sync_buffers
        )
        caps = _bucket_caps(bucket_cap_mb, bucket_size) if use_bucket else BucketCaps(params=1)
        self.bucket_bytes_cap = caps.bytes
        self._comm = _communicator(self.process_group)
        self._reducer: Reducer | None = None
        if self._comm.size == 1:
            return
        if init_sync:
            _verify_same_parameters(module, self._comm)
            states = list(module.parameters())
            if init_sync_buffers:
                states += _buffers(module)
            _broadcast_coalesced(states, self._comm)
        self._reducer = Reducer(
            [p for _, p in named],
            [n for n, _ in named],
            self._comm,
            caps,
            gradient_as_bucket_view=gradient_as_bucket_view,
            find_unused=find_unused_parameters,
            static_graph=static_graph,
        )

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            module = self.__dict__.get("_modules", {}).get("module")
            if module is None or follows_pytorch() or not hasattr(module, name):
                raise
            return getattr(module, name)

    @property
    def broadcast_buffers(self) -> bool:
        """Whether buffers are sent from rank 0 before each forward (PyTorch 2.13 calls it
        `forward_sync_buffers`)."""
        return self.forward_sync_buffers

    @broadcast_buffers.setter
    def broadcast_buffers(self, value: bool) -> None:
        self.forward_sync_buffers = value

    def forward(self, *inputs, **kwargs):
        reducer = self._reducer
        sync_gradients = (
            reducer is not None and is_grad_enabled() and self.require_backward_grad_sync
        )
        if sync_gradients:
            reducer.prepare_for_forward()
        if reducer is not None and self.require_forward_param_sync and self.forward_sync_buffers:
            _broadcast_coalesced(_buffers(self.module), self._comm)
        output = self.module(*inputs, **kwargs)
        # NOTE: as in PyTorch, a forward that will not sync gradients (no_sync, no_grad) also
        # skips the buffer sync of the forward after it.
        self.require_forward_param_sync = sync_gradients
        if sync_gradients:
            reducer.prepare_for_backward(output)
        return output

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward passes accumulate gradients without communicating; the first
        synced forward and backward after it average the accumulated gradients. The forward
        must run inside the context too.

        >>> ddp = flow.nn.parallel.DistributedDataParallel(flow.nn.Linear(2, 1))
        >>> with ddp.no_sync():
        ...     ddp(flow.ones(1, 2)).sum().backward()  # local accumulation
        >>> ddp(flow.ones(1, 2)).sum().backward()  # averages both passes' gradients
        >>> ddp.module.bias.grad
        tensor([2.])
        """
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous


def _check_module(module, named: list, device_ids, output_device) -> None:
    if not isinstance(module, Module):
        raise TypeError(
            f"DistributedDataParallel: expected an nn.Module, got {type(module).__name__}"
        )
    if not named:
        raise TideflowError(
            "DistributedDataParallel is not needed when a module doesn't have any parameter "
            "that requires a gradient."
        )
    global_names = [n for n, p in module.named_parameters() if p.is_global]
    if global_names:
        raise TideflowError(
            "DistributedDataParallel replicates a local module on every rank, but parameters "
            f"{global_names[:3]} are global: a module with broadcast global parameters and a "
            "split batch is already data parallel (its gradients are all-reduced by boxing)"
        )
    if device_ids is not None and len(device_ids) > 1:
        raise ValueError("device_ids can only be None or contain a single element.")
    if device_ids or output_device is not None:
        raise ValueError(
            "DistributedDataParallel device_ids and output_device arguments only work with "
            "single-device/multiple-device GPU modules or CPU modules, but got device_ids "
            f"{device_ids}, output_device {output_device}, and module parameters "
            "{device(type='cpu')}."
        )


def _buffer_sync(broadcast_buffers, forward_sync_buffers) -> tuple[bool, bool]:
    """(sync buffers before each forward, sync them at construction), PyTorch 2.13's rules:
    `forward_sync_buffers` wins and always syncs at construction; `broadcast_buffers=False`
    skips both."""
    if forward_sync_buffers is not None:
        if broadcast_buffers is not None:
            warnings.warn(
                "Both `broadcast_buffers` and `forward_sync_buffers` were specified. "
                "`broadcast_buffers` is deprecated and its value is ignored when "
                "`forward_sync_buffers` is provided.",
                FutureWarning,
                stacklevel=3,
            )
        return bool(forward_sync_buffers), True
    effective = True if broadcast_buffers is None else bool(broadcast_buffers)
    return effective, effective


def _bucket_caps(bucket_cap_mb, bucket_size) -> BucketCaps:
    if bucket_size is not None:
        if bucket_cap_mb is not None:
            raise ValueError(
                "DistributedDataParallel: give bucket_cap_mb (MiB per bucket) or bucket_size "
                f"(parameters per bucket, OneFlow's form), not both; got bucket_cap_mb="
                f"{bucket_cap_mb}, bucket_size={bucket_size}"
            )
        if isinstance(bucket_size, bool) or not isinstance(bucket_size, int) or bucket_size < 1:
            raise ValueError(
                f"DistributedDataParallel: bucket_size must be a positive number of parameters, "
                f"got {bucket_size!r}"
            )
        return BucketCaps(params=bucket_size)
    if bucket_cap_mb is None:
        cap = _DEFAULT_BUCKET_CAP_MB * _MIB
        return BucketCaps(first_bytes=_DEFAULT_FIRST_BUCKET_BYTES, bytes=cap)
    if bucket_cap_mb <= 0:
        raise ValueError(
            f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}"
        )
    cap = int(bucket_cap_mb * _MIB)
    return BucketCaps(first_bytes=cap, bytes=cap)


def _communicator(process_group) -> Communicator:
    """The library's communicator of the group's ranks (apart from the group's own, which
    user-level collectives use)."""
    if not isinstance(process_group, ProcessGroup):
        raise TypeError(
            "DistributedDataParallel: process_group must be a ProcessGroup (from "
            f"tideflow.distributed.new_group), got {type(process_group).__name__}"
        )
    return communicator(process_group.ranks)


def _buffers(module: Module) -> list[Tensor]:
    return [b for b in module.buffers() if b is not None]


def _broadcast_coalesced(tensors: Sequence[Tensor], comm: Communicator, root: int = 0) -> None:
    """Every rank's `tensors` take `root`'s values, in place: one broadcast per dtype and
    ~250 MiB, each rank packing and unpacking a flat buffer."""
    chunks: list[list[Tensor]] = []
    open_chunks: dict = {}  # dtype -> (tensors, bytes)
    for t in tensors:
        members, size = open_chunks.get(t.dtype, ([], 0))
        if members and size + t._data.nbytes > _BROADCAST_BUCKET_BYTES:
            chunks.append(members)
            members, size = [], 0
        members.append(t)
        open_chunks[t.dtype] = (members, size + t._data.nbytes)
    chunks.extend(members for members, _ in open_chunks.values())
    for members in chunks:
        if comm.rank == root:
            flat = np.concatenate([t._data.reshape(-1) for t in members])
        else:
            flat = np.empty(sum(t.numel() for t in members), members[0]._data.dtype)
        comm.bcast(flat, root)
        if comm.rank == root:
            continue
        offset = 0
        for t in members:
            n = t.numel()
            np.copyto(t._data, flat[offset : offset + n].reshape(t._data.shape))
            t._version[0] += 1
            offset += n


def _verify_same_parameters(module: Module, comm: Communicator) -> None:
    """Every rank holds parameters of rank 0's number, shapes and dtypes, or every rank
    raises (the ranks that differ say how)."""
    named = list(module.named_parameters())
    mine = [len(named)]
    for _, p in named:
        mine += [p.ndim, *p.shape, dtypes.ALL.index(p.dtype)]
    length = np.array([len(mine)], np.int64)
    comm.bcast(length, 0)
    reference = np.array(mine, np.int64) if comm.rank == 0 else np.empty(length[0], np.int64)
    comm.bcast(reference, 0)
    problem = _difference(named, _decode(reference.tolist()), comm.rank)
    flags = np.empty(comm.size, np.int64)
    comm.allgather(np.array([problem is not None], np.int64), flags)
    differing = [comm.ranks[r] for r in np.flatnonzero(flags)]
    if differing:
        detail = problem or "this rank matches rank 0"
        raise TideflowError(
            "DistributedDataParallel expects the same model on every rank, but the parameters "
            f"of ranks {differing} differ from rank 0's ({detail})"
        )


def _decode(signature: list[int]) -> list[tuple[tuple, dtypes.DType]]:
    out, k = [], 1
    for _ in range(signature[0]):
        ndim = signature[k]
        out.append((tuple(signature[k + 1 : k + 1 + ndim]), dtypes.ALL[signature[k + 1 + ndim]]))
        k += ndim + 2
    return out


def _difference(named: list, reference: list, rank: int) -> str | None:
    if len(named) != len(reference):
        return f"rank {rank} has {len(named)} parameters, rank 0 has {len(reference)}"
    for (name, p), (shape, dtype) in zip(named, reference, strict=True):
        if tuple(p.shape) != shape or p.dtype != dtype:
            return (
                f"parameter {name!r} is {list(p.shape)} {p.dtype} on rank {rank} and "
                f"{list(shape)} {dtype} on rank 0"
            )
    return None
