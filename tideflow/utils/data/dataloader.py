"""`DataLoader`: batches from a dataset, in the main process or in worker processes."""

from __future__ import annotations

import math
import multiprocessing
import os
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from ...framework.random import Generator
from ._utils.collate import default_collate, default_convert
from ._utils.iterators import _BaseDataLoaderIter, _SingleProcessDataLoaderIter
from ._utils.multiprocessing_iter import _MultiProcessingDataLoaderIter
from ._utils.worker import get_worker_info
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

T_co = TypeVar("T_co", covariant=True)

# Fixed once the loader exists: the iterators and the length are derived from them.
_FROZEN_ATTRIBUTES = frozenset(
    ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")
)


class _InfiniteConstantSampler(Sampler):
    """Endless None keys: an IterableDataset's fetcher ignores keys and reads its stream."""

    def __iter__(self):
        while True:
            yield None


class DataLoader(Generic[T_co]):
    """Iterates over `dataset` in batches, with PyTorch's options and semantics.

    Map-style datasets are read in `sampler` order (sequential, or `shuffle=True` for a
    `RandomSampler` using `generator`), grouped by `batch_size` (or a `batch_sampler`) and
    merged by `collate_fn` (`default_collate`; `default_convert` with `batch_size=None`).
    With `num_workers > 0` batches are loaded by worker processes (`multiprocessing_context`,
    the platform's default start method unless given), up to `prefetch_factor` batches ahead
    per worker, and returned in sampler order. Each worker's RNGs are seeded from a base seed
    drawn from `generator` (or the default generator) per iterator; `worker_init_fn(worker_id)`
    runs after seeding; `get_worker_info()` describes the worker to code running in it. A
    worker's exception is re-raised in the main process with the worker's traceback.
    `persistent_workers=True` keeps the workers (and their dataset copies) across epochs.
    `pin_memory` and `pin_memory_device` are accepted for compatibility; on CPU they do nothing.

    >>> ds = flow.utils.data.TensorDataset(flow.arange(10.0), flow.arange(10) % 2)
    >>> loader = flow.utils.data.DataLoader(ds, batch_size=4)
    >>> len(loader), [y.tolist() for _, y in loader]
    (3, [[0, 1, 0, 1], [0, 1, 0, 1], [0, 1]])
    """

    dataset: Dataset[T_co]
    batch_size: int | None
    num_workers: int
    pin_memory: bool
    drop_last: bool
    timeout: float
    sampler: Sampler | Iterable
    prefetch_factor: int | None
    _initialized = False

    def __init__(
        self,
        dataset: Dataset[T_co],
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler | Iterable | None = None,
        batch_sampler: Sampler[list] | Iterable[list] | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[list], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context=None,
        generator: Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        prefetch_factor = _check_worker_options(
            num_workers, timeout, prefetch_factor, persistent_workers
        )
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        self._is_iterable = isinstance(dataset, IterableDataset)
        batch_size, drop_last, sampler, batch_sampler = _resolve_sampling(
            dataset, self._is_iterable, batch_size, shuffle, sampler, batch_sampler, drop_last,
            generator,
        )  # fmt: skip
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._initialized = True
        self._iterable_len_reported: int | None = None  # len(dataset), once len(self) asked
        self._iterator: _BaseDataLoaderIter | None = None
        self.check_worker_number_rationality()

    @property
    def multiprocessing_context(self):
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context) -> None:
        if context is not None:
            if self.num_workers == 0:
                raise ValueError(
                    "multiprocessing_context can only be used with multi-process loading "
                    f"(num_workers > 0), but got num_workers={self.num_workers}"
                )
            if isinstance(context, str):
                methods = multiprocessing.get_all_start_methods()
                if context not in methods:
                    raise ValueError(
                        "multiprocessing_context option should specify a valid start method "
                        f"in {methods!r}, but got multiprocessing_context={context!r}"
                    )
                context = multiprocessing.get_context(context)
            if not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError(
                    "multiprocessing_context option should be a valid context object or a "
                    f"string specifying the start method, but got "
                    f"multiprocessing_context={context}"
                )
        self._multiprocessing_context = context

    def __setattr__(self, name: str, value) -> None:
        if self._initialized and name in _FROZEN_ATTRIBUTES:
            raise ValueError(
                f"{name} attribute should not be set after {type(self).__name__} is initialized"
            )
        super().__setattr__(name, value)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        """What the iterators draw keys from: batches of keys, or single keys."""
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> _BaseDataLoaderIter:
        if not (self.persistent_workers and self.num_workers > 0):
            return self._get_iterator()
        # Persistent workers live in the one iterator this loader keeps; a new epoch resets it.
        if self._iterator is None:
            self._iterator = self._get_iterator()
        else:
            self._iterator._reset(self)
        return self._iterator

    def _get_iterator(self) -> _BaseDataLoaderIter:
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        self.check_worker_number_rationality()
        return _MultiProcessingDataLoaderIter(self)

    def __len__(self) -> int:
        if not self._is_iterable:
            return len(self._index_sampler)
        # NOTE: an estimate trusted to the dataset: with workers, each worker's stream may end
        # in a short batch of its own.
        length = self._iterable_len_reported = len(self.dataset)
        if self.batch_size is not None:
            rounding = math.floor if self.drop_last else math.ceil
            length = rounding(length / self.batch_size)
        return length

    def check_worker_number_rationality(self) -> None:
        """Warn when more workers are asked for than this process may use CPUs."""
        if self.num_workers == 0:
            return
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        if cpus is None or self.num_workers > cpus:
            suggestion = (
                "DataLoader is not able to compute a suggested max number of worker in "
                "current system."
                if cpus is None
                else f"Our suggested max number of worker in current system is {cpus}, which "
                "is smaller than what this DataLoader is going to create."
            )
            warnings.warn(
                f"This DataLoader will create {self.num_workers} worker processes in total. "
                f"{suggestion} Please be aware that excessive worker creation might get "
                "DataLoader running slow or even freeze, lower the worker number to avoid "
                "potential slowness/freeze if necessary.",
                stacklevel=3,
            )


def _resolve_sampling(dataset, is_iterable, batch_size, shuffle, sampler, batch_sampler,
                      drop_last, generator):  # fmt: skip
    """Check the sampling options against each other and fill in the default samplers;
    returns `(batch_size, drop_last, sampler, batch_sampler)`."""
    if is_iterable:
        # An IterableDataset decides its own order: sampling options make no sense.
        if shuffle not in (False, None):
            raise ValueError(
                "DataLoader with IterableDataset: expected unspecified shuffle option, "
                f"but got shuffle={shuffle}"
            )
        if sampler is not None:
            raise ValueError(
                "DataLoader with IterableDataset: expected unspecified sampler option, "
                f"but got sampler={sampler}"
            )
        if batch_sampler is not None:
            raise ValueError(
                "DataLoader with IterableDataset: expected unspecified batch_sampler "
                f"option, but got batch_sampler={batch_sampler}"
            )
    shuffle = bool(shuffle)
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    if batch_sampler is not None:
        if batch_size != 1 or shuffle or sampler is not None or drop_last:
            raise ValueError(
                "batch_sampler option is mutually exclusive with batch_size, shuffle, "
                "sampler, and drop_last"
            )
        return None, False, sampler, batch_sampler
    if batch_size is None and drop_last:
        raise ValueError(
            "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
        )
    if sampler is None:
        if is_iterable:
            sampler = _InfiniteConstantSampler()
        elif shuffle:
            sampler = RandomSampler(dataset, generator=generator)
        else:
            sampler = SequentialSampler(dataset)
    if batch_size is not None:
        batch_sampler = BatchSampler(sampler, batch_size, drop_last)
    return batch_size, drop_last, sampler, batch_sampler


def _check_worker_options(num_workers, timeout, prefetch_factor, persistent_workers) -> int | None:
    """Validate the worker options; returns the effective prefetch_factor."""
    if num_workers < 0:
        raise ValueError(
            "num_workers option should be non-negative; use num_workers=0 to disable "
            "multiprocessing."
        )
    if timeout < 0:
        raise ValueError(f"timeout option should be non-negative, but got timeout={timeout}")
    if num_workers == 0:
        if prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing. Let "
                "num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor "
                "to None."
            )
        if persistent_workers:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if timeout > 0:
            raise ValueError(
                "timeout option bounds the wait for a worker's batch and needs "
                f"num_workers > 0, but got timeout={timeout} with num_workers=0"
            )
        return None
    if prefetch_factor is None:
        return 2
    if prefetch_factor <= 0:
        raise ValueError(
            f"prefetch_factor option should be positive, but got prefetch_factor={prefetch_factor}"
        )
    return prefetch_factor
