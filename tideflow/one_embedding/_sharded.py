"""An embedding's rows sharded over the ranks of an MPI world by a hash of each key (model
parallel), while each rank looks up its own batch (data parallel).

A lookup is OneFlow's embedding shuffle: each rank deduplicates its batch's keys, sends each
distinct key to its owner (all-to-all), owners look the keys up in their stores, and the
rows come back (all-to-all). The update takes the reverse path: each rank sums its batch's
gradient rows per distinct key before they travel, and owners sum what arrives from every
rank and apply the optimizer's rule. Only distinct keys travel, never the batch.

The rows' gradients are averaged over the ranks, as DistributedDataParallel averages the
dense part's: with each rank's loss the mean over its batch, training matches one process
on the concatenated batch.

Errors that one rank finds (an id outside the key type, a full store) are agreed on before
anything is stored, so every rank raises and none hangs or half-inserts a batch.
"""

from __future__ import annotations

import numpy as np

from ..distributed.world import get_world
from ..framework.errors import TideflowError
from ._hashing import owner_of
from ._table import EmbeddingTable, unique_pairs


def world_of():
    """The process world (a world of one outside a launcher)."""
    return get_world()


class ShardedTable:
    """`local` holds this rank's share of the keys; the ops call `lookup` and `update`.
    `sent` counts the keys this rank sent in its last lookup and last update."""

    def __init__(self, local: EmbeddingTable, world) -> None:
        self.local = local
        self.dim, self.dtype = local.dim, local.dtype
        self.gradients = local.gradients
        self.rank, self.size = world.rank, world.size
        self._comm = world.comm.dup()  # the embedding's own: its calls never interleave others'
        self.sent = {"lookup": 0, "update": 0}

    @property
    def rule(self):
        return self.local.rule

    def attach(self, rule, group) -> None:
        self.local.attach(rule, group)

    # -- lookup -----------------------------------------------------------------------------
    def lookup(self, ids, tables, insert: bool, trains: bool = False) -> np.ndarray:
        local = self.local
        pad, (u_tables, u_keys, inverse, _, _) = self._agree(
            lambda: local.deduplicate(ids, tables, trains)
        )
        owners = owner_of(u_tables, u_keys, self.size)
        by_owner = np.argsort(owners, kind="stable")
        send_counts = np.bincount(owners, minlength=self.size)
        recv_counts = self._counts(send_counts)
        asked = self._exchange(_pack(u_tables, u_keys)[by_owner], send_counts, recv_counts)
        self.sent["lookup"] = int(u_keys.size)
        # NOTE: ranks may ask for the same key: the owner looks up each distinct key once
        a_tables, a_keys, a_inverse, _, _ = unique_pairs(asked[:, 0].astype(np.int32), asked[:, 1])
        if insert:
            self._agree(lambda: local.store.check_room(a_tables, a_keys))
        rows = local.fetch(a_tables, a_keys, insert)[a_inverse]
        answered = self._exchange(rows, recv_counts, send_counts)
        mine = np.empty_like(answered)
        mine[by_owner] = answered
        return local.unpad(mine[inverse], pad).reshape((*ids.shape, self.dim))

    # -- update -----------------------------------------------------------------------------
    def update(self, ids, tables, grads, hyper) -> None:
        u_tables, u_keys, summed = self.local.summed_gradients(ids, tables, grads)
        owners = owner_of(u_tables, u_keys, self.size)
        by_owner = np.argsort(owners, kind="stable")
        send_counts = np.bincount(owners, minlength=self.size)
        recv_counts = self._counts(send_counts)
        got_keys = self._exchange(_pack(u_tables, u_keys)[by_owner], send_counts, recv_counts)
        got = self._exchange(summed[by_owner], send_counts, recv_counts)
        self.sent["update"] = int(u_keys.size)
        if not got_keys.size:
            return
        # NOTE: partial sums from the ranks, added in rank order (the order they arrived in)
        g_tables, g_keys, _, g_order, g_starts = unique_pairs(
            got_keys[:, 0].astype(np.int32), got_keys[:, 1]
        )
        total = np.add.reduceat(got[g_order], g_starts, axis=0) / self.size
        self.local.apply(g_tables, g_keys, total, hyper)

    # -- communication ------------------------------------------------------------------------
    def _counts(self, send_counts: np.ndarray) -> np.ndarray:
        recv = np.empty(self.size, np.int64)
        self._comm.alltoall(send_counts.astype(np.int64), recv)
        return recv

    def _exchange(self, rows: np.ndarray, send_counts, recv_counts) -> np.ndarray:
        """Rows grouped by destination rank (send_counts rows each) to their ranks; returns
        the rows received, grouped by source rank."""
        rows = np.ascontiguousarray(rows)
        width = int(np.prod(rows.shape[1:]))
        out = np.empty((int(recv_counts.sum()), *rows.shape[1:]), rows.dtype)
        self._comm.alltoall(rows, out, [int(c) * width for c in send_counts],
                            [int(c) * width for c in recv_counts])  # fmt: skip
        return out

    def _agree(self, check):
        """Run `check` on every rank; if it raises on any, raise on all (before anything
        is stored)."""
        error, result = None, None
        try:
            result = check()
        except TideflowError as e:
            error = e
        failed = np.zeros(self.size, np.int64)
        self._comm.allgather(np.array([error is not None], np.int64), failed)
        if error is not None:
            raise error
        if failed.any():
            ranks = np.flatnonzero(failed).tolist()
            raise TideflowError(
                f"one_embedding {self.local.name!r}: rank(s) {ranks} refused this batch (their "
                "error says why); nothing was stored"
            )
        return result


def _pack(tables: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """(n, 2) int64 rows of (table, key): one message for both."""
    return np.stack([tables.astype(np.int64), keys], axis=1)
