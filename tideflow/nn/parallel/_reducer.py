"""The gradient reducer of DistributedDataParallel: averages gradients over the ranks in
buckets while backward runs.

Parameters are grouped into buckets (one dtype each) in the reverse order of registration,
the order in which backward usually produces their gradients. A post-accumulate-grad hook on
each parameter copies its gradient, scaled by 1 / world size, into its bucket's flat buffer;
once every gradient of a bucket is in, the bucket's sum-allreduce starts (buckets start in
index order, so every rank issues the same collectives in the same order). When the last
expected gradient has arrived the reducer waits for every bucket and writes the averages back
into `.grad` (or makes `.grad` a view of the bucket with `gradient_as_bucket_view`).

Overlap: with a communicator that has a non-blocking `iallreduce` (returning a request with
`wait()`), a bucket's reduction runs while autograd computes the gradients of earlier layers.
Without one, each bucket is reduced with the blocking `allreduce` the moment it is ready: the
reduction then runs between backward steps rather than beside them.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...distributed import faults
from ...distributed.backend import Communicator, ReduceOp
from ...framework.errors import TideflowError
from ...framework.node import AccumulateGrad
from ...framework.tensor import Tensor, accumulator, make_tensor

__all__ = ["BucketCaps", "Reducer", "assign_buckets"]


@dataclass(frozen=True)
class BucketCaps:
    """How parameters are grouped: by bytes (`first_bytes` for the first bucket, so that
    communication starts early, `bytes` for the others) or, with `params`, by count."""

    first_bytes: int = 0
    bytes: int = 0
    params: int | None = None


def assign_buckets(params: Sequence[Tensor], caps: BucketCaps) -> list[list[int]]:
    """Parameter indices per bucket: reverse registration order, one dtype per bucket, each
    bucket closed once it reaches its cap."""
    open_buckets: dict = {}  # dtype -> (indices, bytes so far)
    closed = []
    for i in reversed(range(len(params))):
        p = params[i]
        indices, size = open_buckets.get(p.dtype, ([], 0))
        indices.append(i)
        size += p._data.nbytes
        if caps.params is not None:
            full = len(indices) >= caps.params
        else:
            full = size >= (caps.first_bytes if not closed else caps.bytes)
        if full:
            closed.append(indices)
            open_buckets.pop(p.dtype, None)
        else:
            open_buckets[p.dtype] = (indices, size)
    closed.extend(indices for indices, _ in open_buckets.values())
    # NOTE: ordered by their first (latest registered) parameter: the order backward fills them
    return sorted(closed, key=lambda b: -b[0])


@dataclass
class _Bucket:
    indices: list[int]  # parameter indices, in the bucket's order
    flat: np.ndarray  # every gradient of the bucket, one after the other
    views: list[np.ndarray]  # per parameter: its part of `flat`, in its shape
    pending: int = 0  # gradients still missing in this iteration
    request: object = None  # a non-blocking reduction in flight


class Reducer:
    """Averages the gradients of `params` over the ranks of `comm` as backward produces them.

    `find_unused`: parameters the forward output does not depend on are found by walking its
    autograd graph, count as ready with a zero (or accumulated) gradient, and keep `.grad`
    untouched when no rank used them. `static_graph`: the same walk, in the first iteration
    only; its result is kept.
    """

    def __init__(
        self,
        params: Sequence[Tensor],
        names: Sequence[str],
        comm: Communicator,
        caps: BucketCaps,
        *,
        gradient_as_bucket_view: bool = False,
        find_unused: bool = False,
        static_graph: bool = False,
    ) -> None:
        self.params = list(params)
        self.names = list(names)
        self.comm = comm
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.find_unused = find_unused or static_graph
        self.static_graph = static_graph
        self._scale = 1.0 / comm.size
        self.buckets: list[_Bucket] = []
        self._where: list[tuple[int, int]] = [(0, 0)] * len(self.params)  # (bucket, slot)
        for b, indices in enumerate(assign_buckets(self.params, caps)):
            self.buckets.append(self._bucket(indices))
            for slot, i in enumerate(indices):
                self._where[i] = (b, slot)
        self._accumulators = [accumulator(p) for p in self.params]
        me = weakref.ref(self)
        self._handles = [
            p.register_post_accumulate_grad_hook(_hook(me, i)) for i, p in enumerate(self.params)
        ]
        self._expecting = False  # a synced forward ran: the next backward reduces
        self._started = False  # a gradient of this iteration has arrived
        self._ready = np.zeros(len(self.params), bool)
        self._used = np.ones(len(self.params), np.int32)
        self._unused: list[int] | None = None  # static graph: found in the first iteration
        self._used_everywhere: np.ndarray | None = None  # static graph: reduced once
        self._next_bucket = 0

    def _bucket(self, indices: list[int]) -> _Bucket:
        sizes = [self.params[i].numel() for i in indices]
        offsets = [0, *np.cumsum(sizes)[:-1].tolist()]
        flat = np.zeros(sum(sizes), self.params[indices[0]]._data.dtype)
        views = [
            flat[o : o + n].reshape(self.params[i]._data.shape)
            for i, o, n in zip(indices, offsets, sizes, strict=True)
        ]
        return _Bucket(indices, flat, views)

    def remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __del__(self) -> None:
        self.remove_hooks()

    # -- one iteration -----------------------------------------------------------------------
    def prepare_for_forward(self) -> None:
        """Before a synced forward: the previous reduction must have finished."""
        if self._started:
            missing = [self.names[i] for i in np.flatnonzero(~self._ready)]
            raise TideflowError(
                "DistributedDataParallel: expected to have finished reduction in the prior "
                "iteration before starting a new one: parameters that did not receive a "
                f"gradient on rank {self.comm.rank}: {', '.join(missing)}. Pass "
                "find_unused_parameters=True to DistributedDataParallel if the forward pass "
                "does not use every parameter, and make sure every forward output takes part in "
                "the loss"
            )

    def prepare_for_backward(self, outputs) -> None:
        """After a synced forward: the next backward reduces. With `find_unused`, the
        parameters `outputs` do not depend on are found now."""
        self._expecting = True
        self._started = False
        self._ready[:] = False
        self._used[:] = 1
        self._next_bucket = 0
        for bucket in self.buckets:
            bucket.pending = len(bucket.indices)
        if self.find_unused and (self._unused is None or not self.static_graph):
            self._unused = self._unreachable(outputs)

    def _unreachable(self, outputs) -> list[int]:
        """Indices of the parameters whose gradient accumulators `outputs`' graph misses."""
        stack = [t.grad_fn for t in _tensors(outputs) if t.grad_fn is not None]
        seen = set()
        reached = set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, AccumulateGrad):
                reached.add(id(node))
                continue
            stack.extend(e[0] for e in node.edges if e is not None)
        direct = {id(accumulator(t)) for t in _tensors(outputs) if t.requires_grad and t.is_leaf}
        reached |= direct
        return [i for i, a in enumerate(self._accumulators) if id(a) not in reached]

    def on_gradient(self, index: int) -> None:
        """The post-accumulate-grad hook of parameter `index`."""
        if not self._expecting:
            return  # no synced forward since the last reduction (no_sync, or plain backward)
        if not self._started:
            self._started = True
            for i in self._unused or ():
                self._used[i] = 0
                self._mark_ready(i)
        if self._ready[index] and not self._used[index]:
            raise TideflowError(
                f"DistributedDataParallel: parameter {self.names[index]!r} received a gradient, "
                "but the forward output does not depend on it (find_unused_parameters counted "
                "it as unused); use parameters inside the wrapped module's forward"
            )
        if self._ready[index]:
            raise TideflowError(
                f"DistributedDataParallel: parameter {self.names[index]!r} received its gradient "
                "twice in one iteration; each parameter may take part in one backward pass per "
                "synced forward (a shared parameter used in two backward passes, or backward "
                "with retain_graph=True twice, reduces only once: wrap the extra passes in "
                "no_sync())"
            )
        self._mark_ready(index)

    def _mark_ready(self, index: int) -> None:
        b, slot = self._where[index]
        bucket = self.buckets[b]
        view = bucket.views[slot]
        grad = self.params[index].grad
        if grad is None:
            view[...] = 0
        elif grad._data is view:
            view *= self._scale
        else:
            np.multiply(grad._data, self._scale, out=view, casting="unsafe")
        self._ready[index] = True
        bucket.pending -= 1
        while self._next_bucket < len(self.buckets) and not self.buckets[self._next_bucket].pending:
            self._launch(self.buckets[self._next_bucket])
            self._next_bucket += 1
        if self._next_bucket == len(self.buckets):
            self._finalize()

    def _launch(self, bucket: _Bucket) -> None:
        if faults.armed:
            faults.reached("ddp_bucket", f"all-reduce of bucket {self._next_bucket}")
            if self._next_bucket:
                what = f"DDP's gradient all-reduce, buckets before {self._next_bucket} started"
                faults.reached("mid_collective", what)
        start = getattr(self.comm, "iallreduce", None)
        if start is not None:
            bucket.request = start(bucket.flat, bucket.flat, ReduceOp.SUM)
        else:
            self.comm.allreduce(bucket.flat, bucket.flat, ReduceOp.SUM)

    def _finalize(self) -> None:
        self._expecting = False
        self._started = False
        for bucket in self.buckets:
            if bucket.request is not None:
                bucket.request.wait()
                bucket.request = None
        used = self._globally_used()
        for bucket in self.buckets:
            for i, view in zip(bucket.indices, bucket.views, strict=True):
                if used[i]:
                    self._write_back(self.params[i], view)

    def _globally_used(self) -> np.ndarray:
        if not self.find_unused:
            return self._used
        if self._used_everywhere is not None:
            return self._used_everywhere
        total = np.empty_like(self._used)
        self.comm.allreduce(self._used, total, ReduceOp.MAX)
        if self.static_graph:
            self._used_everywhere = total
        return total

    def _write_back(self, p: Tensor, view: np.ndarray) -> None:
        grad = p.grad
        if self.gradient_as_bucket_view:
            if grad is None or grad._data is not view:
                p.grad = make_tensor(view)
            else:
                grad._version[0] += 1
        elif grad is None:
            p.grad = make_tensor(view.copy())
        else:
            np.copyto(grad._data, view)
            grad._version[0] += 1


def _hook(reducer: weakref.ref, index: int):
    # NOTE: the hook holds the reducer weakly: a dropped DDP wrapper's hooks do nothing (and
    # its reducer removes them), while the parameters may live on in a new wrapper.
    def hook(_param) -> None:
        r = reducer()
        if r is not None:
            r.on_gradient(index)

    return hook


def _tensors(obj):
    """The tensors in a (nested) forward output: tensors, lists, tuples, dict values."""
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, list | tuple):
        for item in obj:
            yield from _tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item)
