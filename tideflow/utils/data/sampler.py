"""Samplers: iterables of dataset keys (or of batches of keys) that decide the loading order.

Random samplers draw from a `Generator`; without one, `RandomSampler` seeds a fresh generator
from the default generator each epoch, so `flow.manual_seed` makes the order reproducible.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Generic, TypeVar

from ...framework import dtype as dtypes
from ...framework.random import Generator
from ...ops.creation import as_tensor
from ...ops.random import multinomial, randint, randperm
from ._utils.seeding import draw_seed

__all__ = [
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "BatchSampler",
]

T_co = TypeVar("T_co", covariant=True)

_DRAW_CHUNK = 32  # RandomSampler with replacement draws indices in chunks, like PyTorch


class Sampler(Generic[T_co]):
    """Base class of samplers: subclasses define `__iter__` (keys or lists of keys) and,
    for `len(loader)`, `__len__`.

    >>> class Backwards(flow.utils.data.Sampler[int]):
    ...     def __init__(self, n):
    ...         self.n = n
    ...     def __iter__(self):
    ...         return iter(range(self.n - 1, -1, -1))
    ...     def __len__(self):
    ...         return self.n
    >>> list(Backwards(3))
    [2, 1, 0]
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """`0, 1, ..., len(data_source) - 1`.

    >>> list(flow.utils.data.SequentialSampler(range(3)))
    [0, 1, 2]
    """

    data_source: Sized

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """A random permutation of the keys (repeated until `num_samples` are drawn), or
    `num_samples` keys drawn uniformly with replacement.

    >>> g = flow.Generator().manual_seed(0)
    >>> sorted(flow.utils.data.RandomSampler(range(4), generator=g))
    [0, 1, 2, 3]
    """

    data_source: Sized
    replacement: bool

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Generator | None = None,
    ) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        if not _is_positive_int(self.num_samples):
            raise ValueError(
                "num_samples should be a positive integer value, "
                f"but got num_samples={self.num_samples}"
            )

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        generator = self.generator
        if generator is None:
            generator = Generator().manual_seed(draw_seed(None))
        if self.replacement:
            for count in _chunks(self.num_samples, _DRAW_CHUNK):
                yield from randint(0, n, (count,), generator=generator).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from randperm(n, generator=generator).tolist()
            yield from randperm(n, generator=generator).tolist()[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


def _chunks(total: int, size: int) -> list[int]:
    """Chunk sizes covering `total`: `[size] * (total // size) + [total % size]`."""
    return [size] * (total // size) + [total % size]


class SubsetRandomSampler(Sampler[int]):
    """The given keys in a random order.

    >>> g = flow.Generator().manual_seed(0)
    >>> sorted(flow.utils.data.SubsetRandomSampler([5, 7, 9], generator=g))
    [5, 7, 9]
    """

    indices: Sequence[int]

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """`num_samples` keys from `0..len(weights)-1`, key `i` drawn with probability
    proportional to `weights[i]` (with or without replacement).

    >>> g = flow.Generator().manual_seed(0)
    >>> list(flow.utils.data.WeightedRandomSampler([0.0, 1.0, 0.0], 3, generator=g))
    [1, 1, 1]
    """

    num_samples: int
    replacement: bool

    def __init__(
        self,
        weights: Sequence[float],
        num_samples: int,
        replacement: bool = True,
        generator: Generator | None = None,
    ) -> None:
        if not _is_positive_int(num_samples):
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={num_samples}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        weights_tensor = as_tensor(weights, dtype=dtypes.float64)
        if weights_tensor.ndim != 1:
            raise ValueError(
                "weights should be a 1d sequence but given weights have shape "
                f"{tuple(weights_tensor.shape)}"
            )
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        drawn = multinomial(
            self.weights, self.num_samples, self.replacement, generator=self.generator
        )
        yield from drawn.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Groups the keys of `sampler` into lists of `batch_size` (the last one shorter unless
    `drop_last`).

    >>> list(flow.utils.data.BatchSampler(range(5), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    """

    def __init__(
        self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool
    ) -> None:
        if not _is_positive_int(batch_size):
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        keys = iter(self.sampler)
        while batch := list(itertools.islice(keys, self.batch_size)):
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


def _is_positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
