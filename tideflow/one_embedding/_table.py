"""What one embedding's lookup and update ops run: deduplicate the batch's keys, find their
rows in the store (inserting new keys), and apply an optimizer rule to the rows of a
gradient. Ids arrive as arrays; this layer never sees a Tensor.
"""

from __future__ import annotations

import numpy as np

from ..framework.errors import TideflowError
from ._init import RowInitializer
from ._rules import RowRule


def unique_pairs(tables: np.ndarray, keys: np.ndarray):
    """The distinct (table, key) pairs of two flat arrays:
    `(u_tables, u_keys, inverse, order, starts)`, with `order` a stable sort of the input by
    pair and `starts` where each pair's run begins in it (for summing rows per pair in
    batch order)."""
    n = keys.size
    if not n:
        empty = np.zeros(0, np.int64)
        return tables[:0], keys[:0], empty, empty, empty
    # NOTE: NumPy's stable sorts of int64 are 4-5x slower than its quicksort: rank the keys
    # (one quicksort), then sort one int64 per element made unique by its position (a
    # second quicksort), which orders like a stable sort by (key, table).
    by_key = np.argsort(keys)
    ranked = keys[by_key]
    rank = np.empty(n, np.int64)
    rank[by_key] = np.cumsum(np.r_[False, ranked[1:] != ranked[:-1]])
    span = int(tables.max()) + 1
    position_bits = n.bit_length()
    if (int(rank[by_key[-1]]) + 1) * span >= 1 << (62 - position_bits):
        order = np.lexsort((keys, tables))  # too many distinct pairs to pack (2**40 and up)
    else:
        order = np.argsort(((rank * span + tables) << position_bits) | np.arange(n))
    st, sk = tables[order], keys[order]
    first = np.ones(n, bool)
    first[1:] = (st[1:] != st[:-1]) | (sk[1:] != sk[:-1])
    inverse = np.empty(n, np.int64)
    inverse[order] = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    return st[starts], sk[starts], inverse, order, starts


_REMEMBERED = 16  # lookups whose deduplication waits for their gradient


class EmbeddingTable:
    """The rows of one embedding on this rank: `store` (HostStore or DiskStore) filled by
    `init`, and the rule its optimizer updates them with."""

    def __init__(self, name: str, dim: int, dtype, num_tables: int, key_dtype, store, init,
                 padding) -> None:  # fmt: skip
        self.name = name
        self.dim = dim
        self.dtype = dtype  # the rows' tideflow dtype
        self.num_tables = num_tables
        self.key_dtype = np.dtype(key_dtype)
        self.store = store
        self.init: RowInitializer = init
        self.padding_idx = padding
        self.rule: RowRule | None = None
        # (ids, table_ids, gradient) of each lookup since the last update: what the lookup's
        # grad rule hands over, Tensors (lazy ones while a graph traces)
        self.gradients: list[tuple] = []
        # the deduplication of recent lookups by their ids array, for their gradients
        self._batches: dict[tuple[int, int], tuple] = {}

    # -- checks -----------------------------------------------------------------------------
    def check_ids(self, ids: np.ndarray, tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flat int64 keys and int32 tables, refusing ids outside the key type and table ids
        outside the embedding's tables."""
        ids, tables = ids.reshape(-1), np.broadcast_to(tables, ids.shape).reshape(-1)
        if ids.size:
            info = np.iinfo(self.key_dtype)
            low, high = ids.min(), ids.max()
            if low < info.min or high > info.max:
                bad = low if low < info.min else high
                raise TideflowError(
                    f"one_embedding {self.name!r}: id {bad} is outside the key type "
                    f"{self.key_dtype} ([{info.min}, {info.max}])"
                )
            low, high = tables.min(), tables.max()
            if low < 0 or high >= self.num_tables:
                bad = low if low < 0 else high
                raise TideflowError(
                    f"one_embedding {self.name!r}: table id {bad} is outside the embedding's "
                    f"{self.num_tables} tables"
                )
        return ids.astype(np.int64, copy=False), tables.astype(np.int32, copy=False)

    def attach(self, rule: RowRule, group: dict) -> None:
        """Train with `rule`: rows widen to hold its state, the new columns of existing rows
        (and of rows to come) filled with the state's initial values."""
        fill = np.repeat(np.asarray(rule.state_fill(group), self.init.dtype), self.dim)
        # NOTE: a store already wider (another optimizer's state) keeps its width
        extra = np.zeros(max(self.store.width - self.dim - fill.size, 0), self.init.dtype)
        fill = np.concatenate([fill, extra])
        self.store.widen(self.dim + fill.size, fill)
        self.init.state_fill = fill
        self.rule = rule

    # -- lookup -----------------------------------------------------------------------------
    def lookup(self, ids, tables, insert: bool, trains: bool = False) -> np.ndarray:
        """The embeddings of `ids` (shape ids.shape + (dim,)); new keys are stored when
        `insert`, else only computed. `trains`: their gradient will come."""
        pad, (u_tables, u_keys, inverse, _, _) = self.deduplicate(ids, tables, trains)
        rows = self.fetch(u_tables, u_keys, insert)[inverse]
        return self.unpad(rows, pad).reshape((*ids.shape, self.dim))

    def deduplicate(self, ids: np.ndarray, tables: np.ndarray, remember: bool = False):
        """`(pad, unique_pairs(...))` of the keys of `ids` but padding_idx; with `remember`,
        kept for the gradient of this lookup (its update gets the same arrays: see
        `summed_gradients`)."""
        keys, tabs = self.check_ids(ids, tables)
        pad = self.padding(keys)
        if pad is not None:
            keys, tabs = keys[~pad], tabs[~pad]
        result = pad, unique_pairs(tabs, keys)
        if remember:
            if len(self._batches) >= _REMEMBERED:
                del self._batches[next(iter(self._batches))]
            self._batches[id(ids), id(tables)] = (ids, tables, result)
        return result

    def padding(self, keys: np.ndarray) -> np.ndarray | None:
        """Where `keys` hold padding_idx (None if nowhere)."""
        if self.padding_idx is None:
            return None
        pad = keys == self.padding_idx
        return pad if pad.any() else None

    def unpad(self, rows: np.ndarray, pad: np.ndarray | None) -> np.ndarray:
        """`rows` of the keys that are not padding, with zero rows where `pad` is set."""
        if pad is None:
            return rows
        full = np.zeros((pad.size, self.dim), rows.dtype)
        full[~pad] = rows
        return full

    def fetch(self, tables: np.ndarray, keys: np.ndarray, insert: bool) -> np.ndarray:
        """Embeddings of distinct keys held on this rank."""
        out = np.empty((keys.size, self.dim), self.init.dtype)
        for part in _pieces(keys.size, self.store.piece_rows()):
            t, k = tables[part], keys[part]
            positions = self.store.locate(t, k, self.init if insert else None)
            held = positions >= 0
            rows = out[part]  # a view: filling it fills `out`
            rows[held] = self.store.read(positions[held], self.dim)
            if not held.all():
                rows[~held] = self.init.embeddings(t[~held], k[~held])
        return out

    # -- update -----------------------------------------------------------------------------
    def update(self, ids: np.ndarray, tables: np.ndarray, grads: np.ndarray, hyper: dict):
        """Apply the rule to the rows of `ids` with `grads` (ids.shape + (dim,)), the rows
        of a repeated key summed first."""
        u_tables, u_keys, summed = self.summed_gradients(ids, tables, grads)
        if u_keys.size:
            self.apply(u_tables, u_keys, summed, hyper)

    def summed_gradients(self, ids, tables, grads):
        """(tables, keys, gradient) of the distinct keys of `ids` but padding_idx, the
        gradient rows of a key summed in batch order, as nn.Embedding's backward sums."""
        seen = self._batches.pop((id(ids), id(tables)), None)
        if seen is not None and seen[0] is ids and seen[1] is tables:
            pad, (u_tables, u_keys, _, order, starts) = seen[2]
        else:  # not this table's lookup (several lookups' gradients joined)
            pad, (u_tables, u_keys, _, order, starts) = self.deduplicate(ids, tables)
        grads = grads.reshape(-1, self.dim)
        if pad is not None:
            grads = grads[~pad]
        if not u_keys.size:
            return u_tables, u_keys, np.zeros((0, self.dim), grads.dtype)
        return u_tables, u_keys, np.add.reduceat(grads[order], starts, axis=0)

    def apply(self, tables: np.ndarray, keys: np.ndarray, grads: np.ndarray, hyper: dict):
        """The rule's step on distinct keys held on this rank."""
        for part in _pieces(keys.size, self.store.piece_rows()):
            positions = self.store.locate(tables[part], keys[part], self.init)
            rows = self.store.read(positions)
            self.rule.apply(rows, grads[part].astype(rows.dtype, copy=False), self.dim, hyper)
            self.store.write(positions, rows)


def _pieces(n: int, size: int):
    """Slices of [0, n) of at most `size` (a disk store's cache bounds one lookup)."""
    if n <= size:
        return [slice(0, n)]
    return [slice(start, start + size) for start in range(0, n, size)]
