"""A graph's data source (`Graph.set_data_source`): the batches of an iterable, such as a
DataLoader, pulled on the runtime's data stream ahead of the calls that use them."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from ...framework.errors import TideflowError
from ...framework.tensor import Tensor
from ...runtime import SourceExhausted
from .structure import flatten_inputs


class GraphSource:
    """The batches of `iterable` for the graph named `graph`. The first batch, pulled on the
    caller's thread, fixes the signature the graph compiles for. Each pass over the iterable
    (`start_pass`: a DataLoader's epoch) is a `Pass` the runtime iterates on its data stream."""

    def __init__(self, iterable: Iterable, graph: str) -> None:
        self.graph = graph
        self._iterable = iterable
        self._signature: tuple[list[Tensor], tuple] | None = None
        self._head: tuple[object, Iterator] | None = None  # the first batch and its iterator
        self.current: Pass | None = None  # the pass the calls take batches from

    def signature(self) -> tuple[list[Tensor], tuple]:
        """The first batch's tensors and nesting (what `flatten_inputs` gives for a call)."""
        if self._signature is None:
            iterator = iter(self._iterable)
            try:
                batch = next(iterator)
            except StopIteration:
                raise SourceExhausted(f"nn.Graph {self.graph}: the data source is empty") from None
            self._signature = flatten_inputs(_arguments(batch), {})
            self._head = (batch, iterator)
        return self._signature

    def start_pass(self) -> Pass:
        """A new pass over the iterable (the first one resumes where `signature` pulled)."""
        tensors, spec = self.signature()
        if self._head is not None:
            (batch, iterator), self._head = self._head, None
            batches = _prepend(batch, iterator)
        else:
            batches = iter(self._iterable)
        self.current = Pass(self.graph, batches, spec, [(t.shape, t.dtype) for t in tensors])
        return self.current


class Pass:
    """One pass over the batches, iterated once by the runtime's data source: each batch
    becomes a tuple of arrays after it is checked against the compiled signature. The caller
    takes them in order (`taken`) and `has` waits until the batch it needs is loaded."""

    def __init__(self, graph: str, batches: Iterator, spec: tuple, metas: list) -> None:
        self.graph = graph
        self.taken = 0  # batches the calls have used
        self._batches = batches
        self._spec = spec
        self._metas = metas
        self._loaded = 0
        self._ended = False  # no more batches will be loaded
        self._failed = False  # because loading one raised
        self._changed = threading.Condition()

    def __iter__(self) -> Iterator[tuple]:
        try:
            for index, batch in enumerate(self._batches):
                arrays = self._arrays(index, batch)
                with self._changed:
                    self._loaded += 1
                    self._changed.notify_all()
                yield arrays
        except Exception:  # the runtime fails the run that needed the batch with it
            self._failed = True
            raise
        finally:
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def has(self, index: int) -> bool:
        """Wait until batch `index` is loaded (True) or the pass ended before it (False). A
        batch that failed to load counts as loaded: its run raises the error."""
        with self._changed:
            while self._loaded <= index and not self._ended:
                self._changed.wait()
            return self._loaded > index or self._failed

    def exhausted(self) -> SourceExhausted:
        return SourceExhausted(
            f"nn.Graph {self.graph}: the data source ended after {self.taken} batch(es); the "
            "next call starts a new pass over it"
        )

    def _arrays(self, index: int, batch) -> tuple:
        tensors, spec = flatten_inputs(_arguments(batch), {})
        metas = [(t.shape, t.dtype) for t in tensors]
        if spec != self._spec or metas != self._metas:
            raise TideflowError(
                f"nn.Graph {self.graph}: batch {index} of the data source holds "
                f"{_describe(metas)}, but the graph was compiled for {_describe(self._metas)} "
                "(its first batch); every batch must have the same shapes and dtypes "
                "(a DataLoader's last batch may be smaller: pass drop_last=True)"
            )
        return tuple(t._data for t in tensors)


def _arguments(batch) -> tuple:
    """A batch as build's positional arguments: a tuple or list spreads, anything else is one."""
    return tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)


def _prepend(first, rest: Iterator) -> Iterator:
    yield first
    yield from rest


def _describe(metas: list) -> str:
    return ", ".join(f"{list(shape)} {dtype}" for shape, dtype in metas) or "no tensors"
