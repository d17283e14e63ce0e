"""`MultiTableEmbedding` and `MultiTableMultiColumnEmbedding`: modules over a key-value store
of rows, and the two ops their training runs on.

- `one_embedding_lookup(shadow, ids, table_ids)`: the rows of the ids (inserting new keys
  while the module trains). Its grad rule computes nothing: it hands the output's gradient
  to the embedding, whose optimizer turns it into a sparse update (the rows of the batch's
  distinct keys, their gradients summed). No dense table gradient ever exists.
- `one_embedding_update(shadow, *gradients)`: that update, run by
  `flow.one_embedding.Optimizer.step`, one per embedding and step.

`shadow` is a 1-element parameter standing for the table in the dataflow, as in OneFlow: the
lookup reads it (so autograd reaches the lookup's grad rule; its own gradient is zero) and
the update writes it (so a compiled graph orders the next lookup after this step's update,
as for any parameter).

These ops act on the embedding's store, named by their `table` attribute; they are not
tensor ops of `ops/` (no op record reaches them: their tests are tests/unit/
test_one_embedding*.py, against dense `nn.Embedding` references).
"""

from __future__ import annotations

import os

import numpy as np

from ..framework import dtype as dtypes
from ..framework.dispatch import dispatch
from ..framework.errors import DTypeError, ShapeError, TideflowError
from ..framework.grad_mode import is_grad_enabled
from ..framework.registry import Meta, OpDef
from ..framework.sbp import B, Signature
from ..framework.tensor import Tensor
from ..nn.modules.module import Module
from ..nn.parameter import Parameter
from ..ops.creation import arange, from_numpy, zeros, zeros_like
from ._init import RowInitializer, check_initializer
from ._sharded import ShardedTable, world_of
from ._store import DiskStore, HostStore
from ._table import EmbeddingTable


# -- the ops ------------------------------------------------------------------------------------
def _lookup_meta(shadow: Meta, ids: Meta, table_ids: Meta, *, table, insert, trains) -> Meta:
    return Meta((*ids.shape, table.dim), table.dtype)


def _lookup_kernel(shadow, ids, table_ids, *, table, insert, trains):
    return table.lookup(ids, table_ids, insert, trains)


def _lookup_grad(ctx, gy):
    ctx.table.gradients.append((ctx.ids, ctx.table_ids, gy))
    # NOTE: the rows do not depend on the shadow's value: its gradient is zero
    return zeros_like(ctx.shadow), None, None


def _local_sbp(*operands, **_) -> list[Signature]:
    """Ids are each rank's own batch: the embedding shards its rows itself (`_sharded`)."""
    return [Signature(tuple(B if isinstance(m, Meta) else None for m in operands), (B,))]


LOOKUP = OpDef(
    "one_embedding_lookup",
    inputs=("shadow", "ids", "table_ids"),
    meta=_lookup_meta,
    sbp=_local_sbp,
    kernels={"cpu": _lookup_kernel},
    grad=_lookup_grad,
    saves=("shadow", "ids", "table_ids"),
)


def _update_kernel(shadow, *gradients, table, rule_hyper):
    if len(gradients) == 3:
        ids, tables, grads = gradients
    else:  # several lookups (micro-batches) in one step, or none: one update of their union
        ids = np.concatenate([np.zeros(0, np.int64)] + [g.reshape(-1) for g in gradients[0::3]])
        tables = np.concatenate(
            [np.zeros(0, np.int32)] + [np.broadcast_to(t, i.shape).reshape(-1) for i, t in
                                       zip(gradients[0::3], gradients[1::3], strict=True)]
        )  # fmt: skip
        grads = np.concatenate(
            [np.zeros((0, table.dim), table.dtype.np)]
            + [g.reshape(-1, table.dim) for g in gradients[2::3]]
        )
    table.update(ids, tables, grads, rule_hyper)
    return ()


UPDATE = OpDef(
    "one_embedding_update",
    inputs=("shadow", "*gradients"),
    meta=lambda shadow, *gradients, **_: (),
    sbp=lambda *operands, **_: [Signature(tuple(B for _ in operands), ())],
    kernels={"cpu": _update_kernel},
    n_out=0,
    mutates=(0,),
)


# -- the modules --------------------------------------------------------------------------------
_DEFAULT_INITIALIZER = {"type": "normal", "mean": 0.0, "std": 0.05}  # OneFlow's


class Embedding(Module):
    """The base of OneFlow's embeddings over a key-value store; see `MultiTableEmbedding`."""

    def __init__(self, name, embedding_dim, dtype, key_type, tables, store_options,
                 default_initializer=None, padding_idx=None, seed=0) -> None:  # fmt: skip
        super().__init__()
        if not isinstance(name, str) or not name:
            raise TideflowError(f"one_embedding: name must be a non-empty str, got {name!r}")
        dims = list(embedding_dim) if isinstance(embedding_dim, list | tuple) else [embedding_dim]
        if not dims or not all(isinstance(d, int) and d > 0 for d in dims):
            raise TideflowError(
                f"one_embedding {name!r}: embedding_dim must be a positive int (or a list of "
                f"them, one per column), got {embedding_dim!r}"
            )
        dtype = dtypes.to_dtype(dtype)
        if not dtype.is_floating_point:
            raise DTypeError(f"one_embedding {name!r}: dtype must be floating, got {dtype}")
        key_type = dtypes.to_dtype(key_type)
        if key_type not in (dtypes.int32, dtypes.int64):
            raise DTypeError(
                f"one_embedding {name!r}: key_type must be int32 or int64, got {key_type}"
            )
        self.name = name
        self.embedding_dim = sum(dims)
        self.dtype = dtype
        self.key_type = key_type
        self.padding_idx = padding_idx
        self.seed = seed
        columns = _columns(name, dims, tables, default_initializer)
        self.num_tables = len(columns)
        self.shadow = Parameter(zeros(1, dtype=dtype))
        init = RowInitializer(seed, columns, self.embedding_dim, dtype.np)
        world = world_of()
        self.persistent_path = _rank_path(name, store_options, world)
        root = store_options["persistent_path"]
        # the directory of every world's rank directories (snapshots of other world sizes)
        self._persistent_root = None if isinstance(root, list | None) else os.fspath(root)
        store = _make_store(name, store_options, self.embedding_dim, dtype.np, world,
                            self.persistent_path)  # fmt: skip
        self._local = EmbeddingTable(name, self.embedding_dim, dtype, self.num_tables,
                                     key_type.np, store, init, padding_idx)  # fmt: skip
        # what the ops run: the local rows, or the shuffle over every rank's
        self._table = self._local if world.size == 1 else ShardedTable(self._local, world)
        self._column_tables = arange(self.num_tables, dtype=dtypes.int32)

    def forward(self, ids: Tensor, table_ids: Tensor | None = None) -> Tensor:
        """The rows of `ids`: (batch, num_tables) ids give (batch, num_tables, dim), column j
        looked up in table j; ids of any shape with `table_ids` of the same shape (or one
        table only) give ids.shape + (dim,)."""
        if not isinstance(ids, Tensor) or ids.dtype not in (dtypes.int32, dtypes.int64):
            got = ids.dtype if isinstance(ids, Tensor) else type(ids).__name__
            raise DTypeError(f"one_embedding {self.name!r}: ids must be an int32 or int64 "
                             f"tensor, got {got}")  # fmt: skip
        if table_ids is None:
            table_ids = self._default_table_ids(ids)
        elif not isinstance(table_ids, Tensor) or table_ids.dtype.is_floating_point:
            raise DTypeError(f"one_embedding {self.name!r}: table_ids must be an integer tensor")
        elif tuple(table_ids.shape) != tuple(ids.shape):
            raise ShapeError(
                f"one_embedding {self.name!r}: table_ids of shape {list(table_ids.shape)} do "
                f"not match ids of shape {list(ids.shape)}"
            )
        # NOTE: `trains`: a gradient will come, for which the lookup keeps its deduplication
        trains = is_grad_enabled() and self.shadow.requires_grad
        attrs = {"table": self._table, "insert": self.training, "trains": trains}
        return dispatch(LOOKUP, (self.shadow, ids, table_ids), attrs)

    def _default_table_ids(self, ids: Tensor) -> Tensor:
        if self.num_tables == 1:
            return self._column_tables[:1].expand(*ids.shape)
        if ids.ndim == 2 and ids.shape[1] == self.num_tables:
            return self._column_tables.expand(*ids.shape)
        raise ShapeError(
            f"one_embedding {self.name!r}: ids of shape {list(ids.shape)} need table_ids: "
            f"without them ids must be (batch, {self.num_tables}), one column per table"
        )

    # -- snapshots --------------------------------------------------------------------------
    def save_snapshot(self, snapshot_name: str) -> None:
        """Write every row (embedding and optimizer state) to the snapshot `snapshot_name`
        under the store's persistent path, atomically: a crash leaves the previous
        snapshot of that name whole.

        >>> import tempfile
        >>> store = flow.one_embedding.make_cached_host_mem_store_options(
        ...     cache_budget_mb=8, persistent_path=tempfile.mkdtemp(), capacity=100)
        >>> emb = flow.one_embedding.MultiTableEmbedding(
        ...     "doc", 4, flow.float32, flow.int64, None, store)
        >>> _ = emb(flow.tensor([[3], [7]]))
        >>> emb.save_snapshot("first")
        >>> emb.load_snapshot("first")
        """
        from ._snapshot import save_snapshot

        save_snapshot(self, snapshot_name)

    def load_snapshot(self, snapshot_name: str) -> None:
        """Replace every row with those of the snapshot `snapshot_name`."""
        from ._snapshot import load_snapshot

        load_snapshot(self, snapshot_name)

    # -- state dict -------------------------------------------------------------------------
    def get_extra_state(self) -> dict:
        """The rows in `state_dict()` (under `<prefix>_extra_state`): keys, table ids and
        rows (embedding and optimizer state), views of the store's memory, not copies, as
        parameters are in a state dict. Under MPI, this rank's share."""
        tables, keys, rows = self._local.store.contents()
        return {"keys": from_numpy(keys), "table_ids": from_numpy(tables),
                "rows": from_numpy(rows), "embedding_dim": self.embedding_dim}  # fmt: skip

    def set_extra_state(self, state) -> None:
        """Replace every row with those of a `get_extra_state()` (a loaded state dict)."""
        from ._snapshot import load_rows

        fields = ("keys", "table_ids", "rows", "embedding_dim")
        if not isinstance(state, dict) or any(f not in state for f in fields):
            raise TideflowError(
                f"one_embedding {self.name!r}: the state dict's rows must be a dict of "
                f"{', '.join(fields)}, got {type(state).__name__}"
            )
        rows = state["rows"]
        load_rows(self, f"one_embedding {self.name!r}: the state dict", rows.dtype.name,
                  int(state["embedding_dim"]), rows.shape[1],
                  [(state["table_ids"].numpy(), state["keys"].numpy(), rows.numpy())])  # fmt: skip

    def extra_repr(self) -> str:
        store = type(self._local.store).__name__
        return (
            f"name={self.name!r}, embedding_dim={self.embedding_dim}, dtype={self.dtype}, "
            f"key_type={self.key_type}, num_tables={self.num_tables}, store={store}"
        )


class MultiTableEmbedding(Embedding):
    """Embedding tables of keys (arbitrary int64 or int32 ids, not row numbers) held in a
    key-value store that grows as new keys arrive (up to the store's capacity), each new key
    starting from its table's initializer, the same vector for the same key and `seed`
    whatever the number of ranks. OneFlow's `flow.one_embedding.MultiTableEmbedding`.

    A lookup reads only the rows of the batch's keys; training (through
    `flow.one_embedding.Optimizer`) writes only those. Under `mpiexec` the keys are sharded
    over the ranks by hash (each rank looks up its own batch; see docs/one_embedding.md).
    In `eval()` mode new keys are not stored: they get their initial vectors.

    Args: `name`; `embedding_dim`; `dtype` of the rows; `key_type` (int32 or int64);
    `tables`: one `make_table_options(initializer)` per table (None: one table with
    `default_initializer`, else N(0, 0.05^2)); `store_options` from one of the
    `make_*_store_options`; `padding_idx`: a key whose rows are zeros and never trained;
    `seed` of the initial rows.

    >>> tables = [flow.one_embedding.make_table_options(
    ...     flow.one_embedding.make_uniform_initializer(low=-0.1, high=0.1)) for _ in range(3)]
    >>> store = flow.one_embedding.make_cached_host_mem_store_options(
    ...     cache_budget_mb=8, persistent_path=None, capacity=1000)
    >>> emb = flow.one_embedding.MultiTableEmbedding(
    ...     "ctr", 8, flow.float32, flow.int64, tables, store)
    >>> emb(flow.tensor([[10, 20, 30], [10, 21, 99]])).shape
    tideflow.Size([2, 3, 8])
    """

    def __init__(self, name, embedding_dim, dtype, key_type, tables, store_options,
                 default_initializer=None, padding_idx=None, seed=0) -> None:  # fmt: skip
        if not isinstance(embedding_dim, int):
            raise TideflowError(
                f"MultiTableEmbedding {name!r}: embedding_dim must be an int, got "
                f"{embedding_dim!r} (columns of several sizes: MultiTableMultiColumnEmbedding)"
            )
        super().__init__(name, embedding_dim, dtype, key_type, tables, store_options,
                         default_initializer, padding_idx, seed)  # fmt: skip


class MultiTableMultiColumnEmbedding(Embedding):
    """A `MultiTableEmbedding` whose rows are columns of several sizes (`embedding_dim` a
    list), each with its own initializer (`make_table_options([make_column_options(init),
    ...])`); a lookup returns the columns side by side (dim = sum of the sizes).

    >>> oe = flow.one_embedding
    >>> cols = [oe.make_column_options(oe.make_normal_initializer(std=0.01)),
    ...         oe.make_column_options(oe.make_constant_initializer(0))]
    >>> store = oe.make_cached_host_mem_store_options(8, None, 1000)
    >>> emb = oe.MultiTableMultiColumnEmbedding(
    ...     "wide_deep", [8, 1], flow.float32, flow.int64, [oe.make_table_options(cols)], store)
    >>> emb(flow.tensor([4, 5, 6])).shape
    tideflow.Size([3, 9])
    """


def _columns(name: str, dims: list[int], tables, default) -> list[list[tuple[dict, int, int]]]:
    """Per table, (initializer, start, stop) of each column."""
    bounds = np.cumsum([0, *dims])
    spans = list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))
    if tables is None:
        init = check_initializer(name, default if default is not None else _DEFAULT_INITIALIZER)
        return [[(init, a, b) for a, b in spans]]
    if not isinstance(tables, list | tuple) or not tables:
        raise TideflowError(
            f"one_embedding {name!r}: tables must be a non-empty list of make_table_options "
            f"results, got {tables!r}"
        )
    out = []
    for i, table in enumerate(tables):
        if not isinstance(table, dict) or ("initializer" in table) == ("columns" in table):
            raise TideflowError(
                f"one_embedding {name!r}: table {i} must be make_table_options(initializer) "
                f"or make_table_options([column options]), got {table!r}"
            )
        if "initializer" in table:
            init = check_initializer(name, table["initializer"])
            out.append([(init, a, b) for a, b in spans])
            continue
        columns = table["columns"]
        if len(columns) != len(dims):
            raise TideflowError(
                f"one_embedding {name!r}: table {i} has {len(columns)} columns, embedding_dim "
                f"{dims} has {len(dims)}"
            )
        out.append([(check_initializer(name, c.get("initializer") if isinstance(c, dict) else c),
                     a, b) for c, (a, b) in zip(columns, spans, strict=True)])  # fmt: skip
    return out


def _rank_path(name: str, options: dict, world) -> str | None:
    """This rank's directory under the persistent path (OneFlow's `<path>/<rank>-<world>`,
    or the rank's entry of a list), created and checked writable."""
    if not isinstance(options, dict) or "kind" not in options:
        raise TideflowError(
            f"one_embedding {name!r}: store_options must come from one of the "
            f"make_*_store_options, got {options!r}"
        )
    path = options["persistent_path"]
    if path is None:
        return None
    if isinstance(path, list):
        if len(path) != world.size:
            raise TideflowError(
                f"one_embedding {name!r}: persistent_path lists {len(path)} paths for "
                f"{world.size} ranks"
            )
        path = os.fspath(path[world.rank])
    else:
        path = os.path.join(os.fspath(path), f"{world.rank}-{world.size}")
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".probe-{os.getpid()}")
        with open(probe, "wb"):
            pass
        os.remove(probe)
    except OSError as e:
        raise TideflowError(
            f"one_embedding {name!r}: the store path {path!r} is not writable: {e.strerror}"
        ) from None
    return path


def _make_store(name, options, dim, np_dtype, world, path):
    capacity = options["capacity"]
    if capacity is not None:
        capacity = -(-capacity // world.size)  # each rank's share, rounded up
    if options["kind"] == "disk":
        if path is None:
            raise TideflowError(f"one_embedding {name!r}: the disk store needs a persistent_path")
        directory = os.path.join(path, "store")
        os.makedirs(directory, exist_ok=True)
        return DiskStore(name, dim, np_dtype, capacity, directory, options["cache_budget_mb"])
    return HostStore(name, dim, np_dtype, capacity)
