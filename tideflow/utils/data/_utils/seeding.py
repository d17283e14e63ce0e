"""Where the DataLoader's seeds come from (the main process) and how a worker applies its seed.

Like PyTorch: each iterator draws a 63-bit `base_seed` from the loader's generator (or the
default generator); worker `i` seeds tideflow's default generator and Python's `random` with
`base_seed + i`, and NumPy's global RNG with four words hashed from `(i, base_seed)`, so two
workers, or the same worker in two epochs, never share a random stream.
"""

from __future__ import annotations

import random

import numpy as np

from ....framework import dtype as dtypes
from ....framework.random import Generator, manual_seed
from ....ops.random import randint

_SEED_BOUND = 2**63 - 1


def draw_seed(generator: Generator | None) -> int:
    """A seed in [0, 2**63 - 1) from `generator` (the default generator when None)."""
    return randint(0, _SEED_BOUND, (), generator=generator, dtype=dtypes.int64).item()


def seed_worker(base_seed: int, worker_id: int) -> int:
    """Seed every global RNG of this worker process; returns the worker's seed."""
    seed = base_seed + worker_id
    random.seed(seed)
    manual_seed(seed)
    # NOTE: NumPy's legacy global seed is 32-bit words; hashing (worker, base_seed) through a
    # SeedSequence keeps workers apart where `seed % 2**32` could collide.
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(4))
    return seed
