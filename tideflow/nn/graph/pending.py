"""Tensors that wait for a graph's runs in flight: the outputs of a call (their arrays come
when the plan finishes the iteration) and the variables the plan reads and writes (their
arrays may be changing under the runs in flight).

Both are subclasses of `Tensor` whose `_data` property, a data descriptor that wins over the
base class's slot, waits and then turns the tensor back into its own class: after the first
use it is an ordinary tensor again, and no other tensor pays anything. Metadata (shape,
dtype, ndim, size, numel) never waits: a local tensor's comes from the program, a global
tensor's is its own (logical) metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from ...framework import dtype as dtypes
from ...framework.tensor import Size, Tensor, _wrap_dim, raw_data
from ...framework.tensor import set_raw_data as _set_data
from ...parallel.global_tensor import GlobalTensor, set_global
from ...runtime import Executor


class PlanRuns:
    """One executor of a compiled plan, and what eager code needs of its runs: waiting for
    those in flight, whether their failure has been raised to the user yet (a failure is
    raised once by the graph, however many outputs carry it), and `on_settled`: what the host
    does once it has waited for the latest run (AMP sets back the step counters of a skipped
    step)."""

    __slots__ = ("batches", "executor", "failure_raised", "last", "on_settled", "source")

    def __init__(
        self,
        executor: Executor,
        source: object,
        batches: object,
        on_settled: tuple[Callable[[], None], ...] = (),
    ) -> None:
        self.executor = executor
        self.source = source  # the graph's data source feeding it, or None
        self.batches = batches  # the pass over that source the executor iterates
        self.last: Future | None = None  # the latest run
        self.failure_raised = False
        self.on_settled = on_settled

    def wait(self) -> None:
        """Wait until every started run has completed or failed."""
        self.executor.synchronize()
        self.settled()

    def settled(self) -> None:
        """Run the `on_settled` hooks if the latest run has completed."""
        last = self.last
        if last is not None and last.done() and last.exception() is None:
            for hook in self.on_settled:
                hook()

    def stop_failed(self) -> None:
        """An output raised the runs' failure: no later run can complete, so stop their
        threads now (after the runs before the failed one end)."""
        self.failure_raised = True
        self.executor.close()

    def failure(self) -> BaseException | None:
        """The error that stopped the runs, once the latest has failed."""
        last = self.last
        return last.exception() if last is not None and last.done() else None


# -- outputs -------------------------------------------------------------------------------
class _Output:
    __slots__ = ("dtype", "future", "index", "plain", "runs", "shape")

    def __init__(self, runs: PlanRuns, future: Future, index: int, shape, dtype, plain) -> None:
        self.runs = runs
        self.future = future
        self.index = index
        self.shape = Size(shape)
        self.dtype = dtype
        self.plain = plain  # the class the tensor becomes once its data came


class _AwaitsRun(Tensor):
    """Any use of the data waits for the output's iteration, and raises the iteration's
    error (a `TaskError` naming the failed op) if it failed."""

    __slots__ = ()

    @property
    def _data(self):
        return _resolve(self)

    @_data.setter
    def _data(self, value) -> None:
        _resolve(self)
        _set_data(self, value)

    def __reduce_ex__(self, protocol):
        _resolve(self)  # now a plain tensor, pickled as one
        return type(self).__reduce_ex__(self, protocol)


class PendingGlobalTensor(_AwaitsRun, GlobalTensor):
    """A global output of a graph (this rank's shard) whose iteration may still be running;
    afterwards it is a plain `GlobalTensor`."""

    __slots__ = ()


class PendingTensor(_AwaitsRun):
    """A graph output whose iteration may still be running; afterwards it is a plain
    `Tensor`."""

    __slots__ = ()

    @property
    def shape(self) -> Size:
        return _output(self).shape

    def size(self, dim: int | None = None):
        shape = _output(self).shape
        return shape if dim is None else shape[_wrap_dim(dim, len(shape), "size")]

    @property
    def dtype(self) -> dtypes.DType:
        return _output(self).dtype

    @property
    def ndim(self) -> int:
        return len(_output(self).shape)

    def dim(self) -> int:
        return len(_output(self).shape)

    def numel(self) -> int:
        return _output(self).shape.numel()


def pending_output(runs: PlanRuns, future: Future, index: int, shape, dtype, layout=None):
    """Output `index` of the run `future`, with the shape and dtype the program gives it;
    with `layout` (placement, n-D SBP, logical shape) a global tensor of that layout."""
    plain = Tensor if layout is None else GlobalTensor
    t = object.__new__(PendingTensor if layout is None else PendingGlobalTensor)
    t._version = [0]
    t.__dict__["_pending_output"] = _Output(runs, future, index, shape, dtype, plain)
    if layout is not None:
        set_global(t, *layout)
    return t


def _output(t: Tensor) -> _Output:
    return t.__dict__["_pending_output"]


def _resolve(t: Tensor):
    pending = t.__dict__.get("_pending_output")
    if pending is None:  # another thread resolved it meanwhile
        return raw_data(t)
    try:
        arrays = pending.future.result()
    except BaseException:
        pending.runs.stop_failed()
        raise
    pending.runs.settled()
    array = arrays[pending.index]
    _set_data(t, array)
    t.__class__ = pending.plain
    del t.__dict__["_pending_output"]
    return array


# -- variables -----------------------------------------------------------------------------
class _Settles(Tensor):
    """Eager use of the data waits for the runs in flight (it never raises their errors: it
    sees what they left)."""

    __slots__ = ()

    @property
    def _data(self):
        _settle(self)
        return raw_data(self)

    @_data.setter
    def _data(self, value) -> None:
        _settle(self)
        _set_data(self, value)

    def __reduce_ex__(self, protocol):
        _settle(self)
        return type(self).__reduce_ex__(self, protocol)


class PendingVariable(_Settles):
    """A parameter, buffer or optimizer state that runs in flight read or write. Subclassed
    per tensor class (`Parameter`, ...), so `isinstance` checks still hold; a global
    tensor's subclass keeps its own (logical) metadata."""

    __slots__ = ()

    @property
    def shape(self) -> Size:
        return Size(raw_data(self).shape)

    def size(self, dim: int | None = None):
        shape = raw_data(self).shape
        return Size(shape) if dim is None else shape[_wrap_dim(dim, len(shape), "size")]

    @property
    def dtype(self) -> dtypes.DType:
        return dtypes.from_numpy(raw_data(self).dtype)

    @property
    def ndim(self) -> int:
        return raw_data(self).ndim

    def dim(self) -> int:
        return raw_data(self).ndim

    def numel(self) -> int:
        return raw_data(self).size


_variable_classes: dict[type, type] = {}  # tensor class -> its pending subclass
_plain_classes: dict[type, type] = {}  # and back


def hold(tensors, runs: PlanRuns) -> None:
    """Before a run of `runs` starts: `tensors`, the plan's variables, wait for it from now
    on. One held by another plan's runs first waits for those (two executors do not order
    their runs between them), and an unfinished output becomes its array."""
    for t in tensors:
        d = t.__dict__
        held = d.get("_held_by")
        if held is runs:
            continue
        cls = type(t)
        if held is not None:
            held.wait()
        elif cls is PendingTensor:
            _resolve(t)
            t.__class__ = _variable_class(Tensor)
        else:
            t.__class__ = _variable_class(cls)
        d["_held_by"] = runs


def _variable_class(cls: type) -> type:
    pending = _variable_classes.get(cls)
    if pending is None:
        if cls is Tensor:
            pending = PendingVariable
        else:
            base = _Settles if issubclass(cls, GlobalTensor) else PendingVariable
            pending = type(f"Pending{cls.__name__}", (base, cls), {"__slots__": ()})
            pending.__module__ = __name__
        _variable_classes[cls] = pending
        _plain_classes[pending] = cls
    return pending


def _settle(t: Tensor) -> None:
    runs = t.__dict__.pop("_held_by", None)
    if runs is not None:
        runs.wait()
    cls = _plain_classes.get(type(t))
    if cls is not None:
        t.__class__ = cls
