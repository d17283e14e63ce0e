"""Key-value stores of embedding rows: each key's row holds its embedding followed by its
optimizer state, so an update reads and writes one row per key.

A store maps a batch of distinct (table, key) pairs to *positions* (`locate`), then reads and
writes rows at those positions. `HostStore` keeps every row in host memory (positions are
rows); `DiskStore` keeps rows in a memory-mapped file and the most recently used ones in an
in-memory cache (positions are cache lines, valid until the next `locate`). Both keep the
key -> row index in host memory, as OneFlow's stores do: a lookup probes it at random, which
a memory-mapped index would turn into page faults (several per key).
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator

import numpy as np

from ..framework.errors import TideflowError
from ._arrays import FileArrays, HostArrays
from ._index import MAX_LOAD, HashIndex, slots_for

# (tables, keys) -> their initial rows (n, width)
Initializer = Callable[[np.ndarray, np.ndarray], np.ndarray]

_CHUNK = 1 << 16  # rows per step when a whole table is copied (growth, export)
_FAULT_AROUND = 64 << 10  # bytes Linux maps around a read fault of a file page (its default)


class HostStore:
    """Every row in host memory, the index and the rows growing by doubling up to
    `capacity` keys (None: unbounded)."""

    # keys the arrays start with room for (they grow by doubling)
    _initial_keys = 1024

    def __init__(self, owner: str, width: int, dtype, capacity: int | None, alloc=None):
        self.owner = owner  # how errors name the embedding
        self.width = width
        self.dtype = np.dtype(dtype)
        self.capacity = capacity
        self._alloc = alloc if alloc is not None else HostArrays()  # makes the rows array
        self._made = 0  # arrays made so far: each gets a name of its own
        self._start()

    def _start(self) -> None:
        start = (
            self._initial_keys if self.capacity is None else min(self.capacity, self._initial_keys)
        )
        self.index = HashIndex(slots_for(start))
        self._rows_name = self._new_name("rows")
        self._rows = self._alloc(self._rows_name, (start, self.width), self.dtype)

    def _new_name(self, what: str) -> str:
        self._made += 1
        return f"{what}.{self._made}"

    def __len__(self) -> int:
        return self.index.size

    # -- lookups --------------------------------------------------------------------------
    def locate(self, tables, keys, init: Initializer | None) -> np.ndarray:
        """Positions of distinct (table, key) pairs. Absent keys are inserted with rows from
        `init`; with `init` None they are not, and their position is -1."""
        if init is not None:
            self._make_room(keys.size)
        slots = self.index.find(tables, keys)
        new = np.flatnonzero(slots < 0)
        if new.size and init is not None:
            slots[new] = self._insert(tables[new], keys[new], init)
        return self._positions(slots)

    def _positions(self, slots: np.ndarray) -> np.ndarray:
        rows = self.index.rows[np.maximum(slots, 0)]
        rows[slots < 0] = -1
        return rows

    def read(self, positions: np.ndarray, columns: int | None = None) -> np.ndarray:
        """A copy of the rows at `positions` (their first `columns` values only)."""
        return self._rows[positions] if columns is None else self._rows[positions, :columns]

    def write(self, positions: np.ndarray, rows: np.ndarray) -> None:
        self._rows[positions] = rows

    def check_room(self, tables, keys) -> None:
        """Raise if inserting the absent ones of these distinct keys would pass capacity."""
        if self.capacity is None:
            return
        absent = 0
        step = self.piece_rows()
        for start in range(0, keys.size, step):
            part = slice(start, start + step)
            absent += int(np.count_nonzero(self.index.find(tables[part], keys[part]) < 0))
            self._alloc.drop_resident()
        self._check_capacity(absent)

    def _check_capacity(self, n_new: int) -> None:
        total = self.index.size + n_new
        if self.capacity is not None and total > self.capacity:
            raise TideflowError(
                f"one_embedding {self.owner!r}: capacity reached: {n_new} new keys would "
                f"make {total} keys, the store's capacity is {self.capacity}"
            )

    def _insert(self, tables, keys, init: Initializer) -> np.ndarray:
        self._check_capacity(keys.size)
        first = self.index.size
        rows = np.arange(first, first + keys.size, dtype=np.int64)
        self._reserve_rows(first + keys.size)
        slots = self.index.insert(tables, keys, rows)
        self._store_new(first, init(tables, keys))
        return slots

    def _store_new(self, first: int, values: np.ndarray) -> None:
        """Store the rows of new keys, which take rows `first`, `first + 1`, ..."""
        self._rows[first : first + len(values)] = values

    # -- growth ---------------------------------------------------------------------------
    def _make_room(self, n_new: int) -> None:
        """Grow the index before a lookup that may insert `n_new` keys: slots found before
        a growth would not be the keys' slots after it."""
        n_keys = self.index.size + n_new
        if self.capacity is not None:
            n_keys = min(n_keys, self.capacity)
        if n_keys > MAX_LOAD * self.index.n_slots:
            self._grow_index(n_keys)

    def _grow_index(self, n_keys: int) -> None:
        limit = slots_for(self.capacity) if self.capacity is not None else None
        want = slots_for(2 * n_keys) if limit is None else min(slots_for(2 * n_keys), limit)
        old = self.index
        self.index = HashIndex(want)
        for start in range(0, old.n_slots, _CHUNK):
            part = old.tags[start : start + _CHUNK]
            used = np.flatnonzero(part) + start
            if used.size:
                self.index.insert(old.tags[used] - 1, old.keys[used], old.rows[used])

    def _reserve_rows(self, n_rows: int) -> None:
        have = self._rows.shape[0]
        if n_rows <= have:
            return
        grown = max(n_rows, 2 * have)
        if self.capacity is not None:
            grown = max(n_rows, min(grown, self.capacity))
        self._resize_rows(grown, self.width)

    def _resize_rows(self, n_rows: int, width: int, fill: np.ndarray | None = None) -> None:
        old, old_name = self._rows, self._rows_name
        self._rows_name = self._new_name("rows")
        self._rows = self._alloc(self._rows_name, (n_rows, width), self.dtype)
        kept = min(width, old.shape[1])
        used = self.index.size  # rows are taken in order: the rest were never written
        for start in range(0, used, _CHUNK):
            part = slice(start, min(start + _CHUNK, used))
            self._rows[part, :kept] = old[part, :kept]
            if fill is not None:
                self._rows[part, kept:] = fill
            self._alloc.drop_resident()
        self._alloc.release(old_name)

    def widen(self, width: int, fill: np.ndarray) -> None:
        """Make rows `width` wide, the new columns of existing rows filled with `fill`."""
        if width > self.width:
            self.flush()
            self._resize_rows(self._rows.shape[0], width, fill)
            self.width = width

    # -- whole-table access -----------------------------------------------------------------
    def flush(self) -> None:
        """Make the rows array hold every row's current values (a cache writes back)."""

    def export(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(tables, keys, rows) of every key, chunk by chunk, in slot order."""
        self.flush()
        index = self.index
        for start in range(0, index.n_slots, _CHUNK):
            used = np.flatnonzero(index.tags[start : start + _CHUNK]) + start
            if used.size:
                tables = (index.tags[used] - 1).astype(np.int32)
                yield tables, index.keys[used], self._rows[index.rows[used]]
            self._alloc.drop_resident()

    def contents(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tables, keys, rows) of every key in insertion order; `rows` is a view of the
        store's own array (no copy: a disk store's is the mapped file)."""
        self.flush()
        n = self.index.size
        tables, keys = np.empty(n, np.int32), np.empty(n, np.int64)
        index = self.index
        for start in range(0, index.n_slots, _CHUNK):
            used = np.flatnonzero(index.tags[start : start + _CHUNK]) + start
            rows = index.rows[used]
            tables[rows], keys[rows] = index.tags[used] - 1, index.keys[used]
        self._alloc.drop_resident()
        return tables, keys, self._rows[:n]

    def clear(self) -> None:
        """Forget every key (the arrays start over at their initial size)."""
        self._alloc.release(self._rows_name)
        self._start()

    def load(self, tables, keys, rows) -> None:
        """Insert distinct absent keys with the given rows (a snapshot being read back)."""
        step = self.piece_rows()
        for start in range(0, keys.size, step):
            part = slice(start, start + step)
            self.locate(tables[part], keys[part], lambda _t, _k, r=rows[part]: r)

    def piece_rows(self) -> int:
        """How many keys one `locate` may take: positions stay valid for that many."""
        return 1 << 62


class DiskStore(HostStore):
    """Rows in a memory-mapped file under `directory` (sized for `capacity` keys up front: a
    sparse file costs no disk until written); a cache of `cache_budget_mb` holds the most
    recently used rows in memory. The index and the map of cached slots stay in host memory
    beside the cache: 24 bytes per index slot, two to four slots per key of `capacity`, which
    for large tables is more than the cache.

    Cache lines are evicted least recently used first, a batch at a time (an eighth of the
    cache: one `argpartition` of the use stamps serves many steps); dirty lines are written
    back to the file as they go. New keys' rows go to the file at once (they take the next
    rows: one sequential write) and to the cache, clean. The mapped file pages are handed back
    to the page cache after each eviction and whenever lookups may have mapped half the
    budget's worth, so the resident set stays near the cache and the index however large the
    rows."""

    def __init__(self, owner, width, dtype, capacity, directory: str, cache_budget_mb: float):
        self._budget = int(cache_budget_mb * (1 << 20))
        self._files = FileArrays(directory)
        if capacity is not None:
            self._initial_keys = capacity
        super().__init__(owner, width, dtype, capacity, self._files)

    def _start(self) -> None:
        super()._start()
        self._make_cache()

    def _make_cache(self) -> None:
        self._fresh: np.ndarray | None = None  # the rows of the keys being inserted
        per_line = self.width * self.dtype.itemsize + 8 + 8 + 8 + 1  # + slot, stamp, free, dirty
        n = max(self._budget // per_line, 1)
        self._lines = np.zeros((n, self.width), self.dtype)
        self._line_slot = np.full(n, -1, np.int64)  # the index slot a line caches
        self._stamp = np.zeros(n, np.int64)  # the lookup that last used it (LRU order)
        self._dirty = np.zeros(n, bool)
        self._free = np.arange(n - 1, -1, -1)  # a stack of free lines
        self._n_free = n
        self._clock = 0
        self._mapped = 0  # bytes of file pages lookups may have mapped since the last drop
        # the line caching each index slot, plus one (0: not cached)
        self._line_of = np.zeros(self.index.n_slots, np.int32)

    @property
    def cache_rows(self) -> int:
        return self._lines.shape[0]

    def locate(self, tables, keys, init):
        self._clock += 1
        if init is not None:
            self._make_room(keys.size)
        slots = self.index.find(tables, keys)
        fresh = slots < 0 if init is not None else np.zeros(keys.shape, bool)
        if fresh.any():
            new = np.flatnonzero(fresh)
            slots[new] = self._insert(tables[new], keys[new], init)
        lines = np.full(keys.shape, -1, np.int64)
        present = np.flatnonzero(slots >= 0)
        lines[present] = self._resident(slots[present], fresh[present])
        # NOTE: Linux maps up to 64 KiB around each page of the rows file a read faults in
        # (fault-around): hand the pages back once lookups may have mapped half the budget's
        # worth
        self._mapped += _FAULT_AROUND * keys.size
        if self._mapped > self._budget // 2:
            self._drop_pages()
        return lines

    def _store_new(self, first: int, values: np.ndarray) -> None:
        # NOTE: new rows take the next rows of the file: one sequential write through the
        # mapping, onto holes (nothing read back) and in small page-cache folios (a write(2)
        # leaves large ones, which a later read of one row maps whole); `_resident` caches
        # them from `_fresh`, clean.
        super()._store_new(first, values)
        self._mapped += values.nbytes
        self._fresh = values

    def _resident(self, slots: np.ndarray, fresh: np.ndarray) -> np.ndarray:
        """Cache lines holding `slots` (distinct), loading the missing ones; the rows of
        those where `fresh` is set are the keys just inserted, in `_fresh`."""
        lines = self._line_of[slots].astype(np.int64) - 1
        hit = lines >= 0
        self._stamp[lines[hit]] = self._clock
        miss = np.flatnonzero(~hit)
        if not miss.size:
            return lines
        if slots.size > self.cache_rows:
            raise TideflowError(
                f"one_embedding {self.owner!r}: one lookup needs {slots.size} distinct rows "
                f"in the cache, which holds {self.cache_rows} rows of {self.width} values; "
                "raise cache_budget_mb"
            )
        if miss.size > self._n_free:
            self._evict(miss.size - self._n_free + self.cache_rows // 8)
        taken = self._free[self._n_free - miss.size : self._n_free].copy()
        self._n_free -= miss.size
        missing = slots[miss]
        lines[miss] = taken
        self._line_slot[taken] = missing
        self._line_of[missing] = taken + 1
        self._stamp[taken] = self._clock
        # new keys are never cached (all of them miss), and stay in order among the misses
        new = fresh[miss]
        if new.any():
            self._lines[taken[new]] = self._fresh
            self._fresh = None
        stored = ~new
        self._lines[taken[stored]] = self._rows[self.index.rows[missing[stored]]]
        self._dirty[taken] = False
        return lines

    def _evict(self, n: int) -> None:
        """Free up to `n` least recently used lines, sparing those of the current lookup."""
        used = np.flatnonzero(self._line_slot >= 0)
        stamps = self._stamp[used]
        n = min(n, int(np.count_nonzero(stamps < self._clock)))
        victims = used[np.argpartition(stamps, n - 1)[:n]] if n < used.size else used
        self._write_back(victims)
        self._line_of[self._line_slot[victims]] = 0
        self._line_slot[victims] = -1
        self._free[self._n_free : self._n_free + victims.size] = victims
        self._n_free += victims.size
        self._drop_pages()

    def _drop_pages(self) -> None:
        self._files.drop_resident()
        self._mapped = 0

    def _write_back(self, lines: np.ndarray) -> None:
        dirty = lines[self._dirty[lines]]
        rows = self.index.rows[self._line_slot[dirty]]
        order = np.argsort(rows)  # in file order: rows sharing a page fault it in once
        # NOTE: each page written stays mapped until dropped: an eighth of a large cache
        # scattered over the file would map a page per row, several times the budget
        step = max(self._budget // (2 * mmap.PAGESIZE), 1)
        for start in range(0, dirty.size, step):
            part = order[start : start + step]
            self._rows[rows[part]] = self._lines[dirty[part]]
            self._drop_pages()
        self._dirty[dirty] = False

    def read(self, positions, columns=None):
        return self._lines[positions] if columns is None else self._lines[positions, :columns]

    def write(self, positions, rows) -> None:
        self._lines[positions] = rows
        self._dirty[positions] = True

    def flush(self) -> None:
        self._write_back(np.flatnonzero(self._line_slot >= 0))

    def _grow_index(self, n_keys: int) -> None:
        # NOTE: the line map is per slot: write the cache back and start it over
        self.flush()
        super()._grow_index(n_keys)
        self._make_cache()

    def widen(self, width: int, fill: np.ndarray) -> None:
        if width > self.width:
            self.flush()
            super().widen(width, fill)
            self._make_cache()

    def piece_rows(self) -> int:
        return max(self.cache_rows // 2, 1)
