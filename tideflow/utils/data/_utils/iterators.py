"""The DataLoader's iterators: the common part (sampler, seeds, length checks) and loading in
the main process. Loading in worker processes is in `multiprocessing_iter.py`."""

from __future__ import annotations

import warnings

from .fetch import create_fetcher
from .seeding import draw_seed


class _BaseDataLoaderIter:
    """One pass over a DataLoader. It copies what it needs from the loader instead of holding
    it, so a loader with persistent workers is freed (and its workers stopped) as soon as the
    user drops it."""

    def __init__(self, loader) -> None:
        self._dataset = loader.dataset
        self._is_iterable = loader._is_iterable
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._collate_fn = loader.collate_fn
        self._num_workers = loader.num_workers
        self._timeout = loader.timeout
        self._persistent_workers = loader.persistent_workers
        self._sampler_iter = iter(self._index_sampler)
        # NOTE: drawn for every iterator, workers or not, like PyTorch: the default
        # generator advances the same way whatever num_workers is.
        self._base_seed = draw_seed(loader.generator)
        self._num_yielded = 0
        self._reported_len = loader._iterable_len_reported

    def __iter__(self):
        return self

    def __len__(self) -> int:
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError(f"{type(self).__name__} cannot be pickled")

    def _reset(self, loader) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._reported_len = loader._iterable_len_reported

    def _next_index(self):
        return next(self._sampler_iter)  # StopIteration ends the epoch

    def _next_data(self):
        raise NotImplementedError

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        if self._reported_len is not None and self._num_yielded > self._reported_len:
            self._warn_length_exceeded()
        return data

    def _warn_length_exceeded(self) -> None:
        msg = (
            f"Length of IterableDataset {self._dataset} was reported to be "
            f"{self._reported_len} (when accessing len(dataloader)), but {self._num_yielded} "
            "samples have been fetched. "
        )
        if self._num_workers > 0:
            msg += (
                "For multiprocessing data-loading, this could be caused by not properly "
                "configuring the IterableDataset replica at each worker (see get_worker_info)."
            )
        warnings.warn(msg, stacklevel=3)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    """Loads each batch in the main process when it is asked for."""

    def __init__(self, loader) -> None:
        super().__init__(loader)
        self._fetcher = create_fetcher(
            self._is_iterable, self._dataset, self._auto_collation, self._collate_fn,
            self._drop_last,
        )  # fmt: skip

    def _next_data(self):
        return self._fetcher.fetch(self._next_index())
