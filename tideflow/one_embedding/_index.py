"""The key -> row index of a store: an open-addressing hash table on NumPy arrays.

Slots hold a key, its table (stored as table + 1, so that zeroed memory is an empty table)
and the row the key's values occupy. Lookups and inserts work on whole batches of keys: each
round probes one slot for every key still searching (linear probing), so the Python loop
runs once per probe length, never once per key. Keys are never removed, so a probe ends at
the key or at the first empty slot.
"""

from __future__ import annotations

import numpy as np

from ._hashing import SLOT, key_hash

MAX_LOAD = 0.5  # linear probing stays short (about 1.5 probes per hit) up to half full


class HashIndex:
    """`n_slots` (a power of two) slots in three zero-filled arrays in host memory (20 bytes
    a slot; pages are committed as keys land on them)."""

    def __init__(self, n_slots: int) -> None:
        if n_slots & (n_slots - 1):
            raise ValueError(f"HashIndex: n_slots must be a power of two, got {n_slots}")
        self.n_slots = n_slots
        self._mask = np.uint64(n_slots - 1)
        self.keys = np.zeros(n_slots, np.int64)
        self.tags = np.zeros(n_slots, np.int32)
        self.rows = np.zeros(n_slots, np.int64)
        self.size = 0  # keys held

    def _home(self, tables: np.ndarray, keys: np.ndarray) -> np.ndarray:
        return (key_hash(SLOT, 0, tables, keys) & self._mask).astype(np.int64)

    def find(self, tables: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """The slot of each (table, key), -1 where absent."""
        slots = np.full(keys.shape, -1, np.int64)
        pos = self._home(tables, keys)
        searching = np.arange(keys.size)
        tags = tables.astype(np.int32) + 1
        while searching.size:
            p = pos[searching]
            held = self.tags[p]
            hit = (held == tags[searching]) & (self.keys[p] == keys[searching])
            slots[searching[hit]] = p[hit]
            searching = searching[~hit & (held != 0)]
            pos[searching] = (pos[searching] + 1) & (self.n_slots - 1)
        return slots

    def insert(self, tables: np.ndarray, keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Insert distinct (table, key) pairs that are absent, pointing at `rows`; returns
        their slots. The caller keeps the load at most MAX_LOAD."""
        slots = np.empty(keys.shape, np.int64)
        pos = self._home(tables, keys)
        placing = np.arange(keys.size)
        while placing.size:
            p = pos[placing]
            free = self.tags[p] == 0
            # NOTE: keys probing the same free slot in one round: the first takes it, the
            # others see it taken in the next round and move on
            taken, first = np.unique(p[free], return_index=True)
            winners = placing[free][first]
            self.keys[taken] = keys[winners]
            self.tags[taken] = tables[winners].astype(np.int32) + 1
            self.rows[taken] = rows[winners]
            slots[winners] = taken
            placed = np.zeros(placing.size, bool)
            placed[np.flatnonzero(free)[first]] = True
            placing = placing[~placed]
            pos[placing] = (pos[placing] + 1) & (self.n_slots - 1)
        self.size += keys.size
        return slots

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tables, keys, rows) of every key, in slot order."""
        used = np.flatnonzero(self.tags)
        return (self.tags[used] - 1).astype(np.int32), self.keys[used], self.rows[used]


def slots_for(n_keys: int) -> int:
    """The power-of-two slot count that holds `n_keys` at most MAX_LOAD full."""
    need = max(16, int(np.ceil(n_keys / MAX_LOAD)))
    return 1 << (need - 1).bit_length()
