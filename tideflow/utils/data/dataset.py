"""Datasets: the map-style `Dataset` and stream-style `IterableDataset` protocols, and the
combinators PyTorch ships (`TensorDataset`, `StackDataset`, `ConcatDataset`, `ChainDataset`,
`Subset`, `random_split`)."""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Generic, TypeVar

from ...framework.random import Generator, default_generator
from ...framework.tensor import Tensor
from ...ops.random import randperm

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "StackDataset",
    "ConcatDataset",
    "ChainDataset",
    "Subset",
    "random_split",
]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map from keys (usually `0..len-1`) to samples: subclasses define `__getitem__` and,
    for the default samplers, `__len__`. An optional `__getitems__(indices)` returns a whole
    batch of samples at once; the DataLoader uses it when present.

    >>> class Squares(flow.utils.data.Dataset):
    ...     def __len__(self):
    ...         return 4
    ...     def __getitem__(self, i):
    ...         return i * i
    >>> list(flow.utils.data.DataLoader(Squares(), batch_size=2))
    [tensor([0, 1]), tensor([4, 9])]
    """

    # NOTE: no default `__len__` (a length of 0 would be silently wrong) and no default
    # `__getitems__` (the fetcher would prefer it over a subclass's `__getitem__`).

    def __getitem__(self, index) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """A stream of samples: subclasses define `__iter__`. With `num_workers > 0` every worker
    iterates its own copy, so shard the stream with `get_worker_info()` to avoid duplicates.

    >>> class Count(flow.utils.data.IterableDataset):
    ...     def __iter__(self):
    ...         info = flow.utils.data.get_worker_info()
    ...         start, step = (0, 1) if info is None else (info.id, info.num_workers)
    ...         return iter(range(start, 6, step))
    >>> [b.tolist() for b in flow.utils.data.DataLoader(Count(), batch_size=3)]
    [[0, 1, 2], [3, 4, 5]]
    """

    def __add__(self, other: Dataset[T_co]) -> ChainDataset:
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple[Tensor, ...]]):
    """Samples are `(t[i] for t in tensors)`: row `i` of each tensor.

    >>> ds = flow.utils.data.TensorDataset(flow.arange(6).view(3, 2), flow.tensor([0, 1, 0]))
    >>> ds[1]
    (tensor([2, 3]), tensor(1))
    """

    tensors: tuple[Tensor, ...]

    def __init__(self, *tensors: Tensor) -> None:
        sizes = [t.size(0) for t in tensors]
        if any(size != sizes[0] for size in sizes):
            raise AssertionError(f"Size mismatch between tensors: first dimensions are {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Samples of several equally long datasets side by side: `StackDataset(a, b)[i]` is
    `(a[i], b[i])`, `StackDataset(x=a, y=b)[i]` is `{"x": a[i], "y": b[i]}`.

    >>> flow.utils.data.StackDataset(image=[10, 11], label=[0, 1])[1]
    {'image': 11, 'label': 1}
    """

    datasets: tuple | dict

    def __init__(self, *args: Dataset, **kwargs: Dataset) -> None:
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or ``dict``- (via ``kwargs``) "
                "like input/output, but both types are given."
            )
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        self.datasets = args or kwargs
        parts = args or tuple(kwargs.values())
        lengths = [len(d) for d in parts]
        if any(n != lengths[0] for n in lengths):
            raise ValueError(f"Size mismatch between datasets: lengths are {lengths}")
        self._length = lengths[0]

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        keys = list(self.datasets) if isinstance(self.datasets, dict) else None
        parts = list(self.datasets.values()) if keys is not None else list(self.datasets)
        columns = [_fetch_many(d, indices) for d in parts]
        if keys is not None:
            return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]
        return [tuple(row) for row in zip(*columns, strict=True)]

    def __len__(self) -> int:
        return self._length


def _fetch_many(dataset, indices: list) -> list:
    """`[dataset[i] for i in indices]`, through the dataset's batched `__getitems__` if any."""
    getitems = getattr(dataset, "__getitems__", None)
    if not callable(getitems):
        return [dataset[i] for i in indices]
    items = getitems(indices)
    if len(items) != len(indices):
        raise ValueError(
            f"Nested dataset's output size mismatch. Expected {len(indices)}, got {len(items)}"
        )
    return items


class ConcatDataset(Dataset[T_co]):
    """Datasets one after another: indices run through the first, then the second, ...

    >>> ds = flow.utils.data.ConcatDataset([[1, 2], [3]])
    >>> len(ds), ds[2], ds[-1]
    (3, 3, 3)
    """

    datasets: list[Dataset[T_co]]
    cumulative_sizes: list[int]

    @staticmethod
    def cumsum(sequence) -> list[int]:
        return list(itertools.accumulate(len(d) for d in sequence))

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        n = len(self)
        if idx < 0:
            if -idx > n:
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += n
        if idx >= n:
            raise IndexError(f"index {idx} is out of range for a ConcatDataset of length {n}")
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """IterableDatasets one after another, chained lazily.

    >>> class Upto(flow.utils.data.IterableDataset):
    ...     def __init__(self, n):
    ...         self.n = n
    ...     def __iter__(self):
    ...         return iter(range(self.n))
    >>> list(flow.utils.data.ChainDataset([Upto(2), Upto(3)]))
    [0, 1, 0, 1, 2]
    """

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            _check_iterable(d)
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            _check_iterable(d)
            total += len(d)
        return total


def _check_iterable(dataset) -> None:
    if not isinstance(dataset, IterableDataset):
        raise AssertionError(
            f"ChainDataset only supports IterableDataset, got {type(dataset).__name__}"
        )


class Subset(Dataset[T_co]):
    """The samples of `dataset` at `indices`, in that order.

    >>> sub = flow.utils.data.Subset([10, 11, 12, 13], [3, 0])
    >>> len(sub), sub[0]
    (2, 13)
    """

    dataset: Dataset[T_co]
    indices: Sequence[int]

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list[T_co]:
        # NOTE: a subclass that overrides __getitem__ (to transform samples, say) must see
        # every sample go through it, so the batched path of the wrapped dataset is skipped.
        if type(self).__getitem__ is not Subset.__getitem__:
            return [self[i] for i in indices]
        return _fetch_many(self.dataset, [self.indices[i] for i in indices])

    def __len__(self) -> int:
        return len(self.indices)


def random_split(
    dataset: Dataset[T_co],
    lengths: Sequence[int | float],
    generator: Generator | None = default_generator,
) -> list[Subset[T_co]]:
    """Split `dataset` into non-overlapping random subsets of the given lengths. Fractions
    summing to 1 are allowed: each split gets `floor(frac * len)` samples and the remainder
    is dealt out one by one from the first split on.

    >>> a, b = flow.utils.data.random_split(range(10), [0.7, 0.3],
    ...                                     generator=flow.Generator().manual_seed(0))
    >>> len(a), len(b)
    (7, 3)
    """
    n = len(dataset)
    total = sum(lengths)
    if math.isclose(total, 1) and total <= 1:
        lengths = _lengths_from_fractions(lengths, n)
    if sum(lengths) != n:
        raise ValueError(
            f"Sum of input lengths does not equal the length of the input dataset! "
            f"(lengths {list(lengths)} sum to {sum(lengths)}, the dataset has {n} samples)"
        )
    indices = randperm(n, generator=generator).tolist()
    ends = itertools.accumulate(lengths)
    return [
        Subset(dataset, indices[end - length : end])
        for end, length in zip(ends, lengths, strict=True)
    ]


def _lengths_from_fractions(fractions: Sequence[float], n: int) -> list[int]:
    for i, frac in enumerate(fractions):
        if not 0 <= frac <= 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1 (got {frac})")
    lengths = [math.floor(n * frac) for frac in fractions]
    for i in range(n - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            warnings.warn(
                f"Length of split at index {i} is 0. This might result in an empty dataset.",
                stacklevel=3,
            )
    return lengths
