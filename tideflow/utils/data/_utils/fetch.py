"""Fetchers: turn one key (or one batch of keys) from the sampler into one collated item.
The same fetcher runs in the main process (`num_workers=0`) and inside each worker."""

from __future__ import annotations

from collections.abc import Callable


class MapDatasetFetcher:
    """Reads `dataset[key]` per key; a batch through `dataset.__getitems__` when defined."""

    def __init__(self, dataset, auto_collation: bool, collate_fn: Callable) -> None:
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn

    def fetch(self, possibly_batched_index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[possibly_batched_index])
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems:
            data = getitems(possibly_batched_index)
        else:
            data = [self.dataset[i] for i in possibly_batched_index]
        return self.collate_fn(data)


class IterableDatasetFetcher:
    """Pulls samples from one iterator over the dataset: as many as the batch has keys (the
    keys themselves are placeholders). Raises StopIteration when the stream is exhausted, or
    when only a short last batch is left and `drop_last` is set."""

    def __init__(
        self, dataset, auto_collation: bool, collate_fn: Callable, drop_last: bool
    ) -> None:
        self.dataset_iter = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, possibly_batched_index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = []
        for _ in possibly_batched_index:
            try:
                data.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(possibly_batched_index)):
            raise StopIteration
        return self.collate_fn(data)


def create_fetcher(is_iterable: bool, dataset, auto_collation: bool, collate_fn, drop_last: bool):
    if is_iterable:
        return IterableDatasetFetcher(dataset, auto_collation, collate_fn, drop_last)
    return MapDatasetFetcher(dataset, auto_collation, collate_fn)
