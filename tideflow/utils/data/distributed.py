"""`DistributedSampler`: each rank loads its own slice of the dataset."""

from __future__ import annotations

import math
from collections.abc import Iterator

from ...distributed.world import get_world
from ...framework.random import Generator
from ...ops.random import randperm
from .dataset import Dataset
from .sampler import Sampler

__all__ = ["DistributedSampler"]

# Set by MPI launchers in every process they start (MPICH/Hydra, Open MPI, PMIx, Slurm's PMI).
_LAUNCHER_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def _world() -> tuple[int, int]:
    """(world size, rank) of this process (`flow.env`'s world): the launched MPI job, or a
    world of one for a plain process, which never initializes MPI to learn that."""
    world = get_world()
    return world.size, world.rank


class DistributedSampler(Sampler):
    """Restricts loading to this rank's share: rank `r` of `n` takes every `n`-th key from
    position `r` of a (shuffled, with `seed + epoch`) key list that is padded by repeating
    keys (or truncated, with `drop_last`) to a multiple of `n`. Every rank must use the same
    `seed`; call `set_epoch(epoch)` before each epoch to reshuffle.

    >>> sampler = flow.utils.data.DistributedSampler(range(5), num_replicas=2, rank=1,
    ...                                              shuffle=False)
    >>> list(sampler)
    [1, 3, 0]
    """

    def __init__(
        self,
        dataset: Dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            world_size, world_rank = _world()
            num_replicas = world_size if num_replicas is None else num_replicas
            rank = world_rank if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            g = Generator().manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[: self.total_size]
        elif indices:
            # Pad by cycling through the keys, so every rank gets num_samples of them.
            padding = self.total_size - n
            indices += (indices * math.ceil(padding / n))[:padding]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for `epoch` (with `shuffle=True`); without it every epoch has one order."""
        self.epoch = epoch
