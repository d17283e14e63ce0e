"""Snapshots of an embedding's rows, and OneFlow's persistent table reader and writer.

A snapshot `name` of a rank lives under its persistent path:

    snapshots/name.safetensors        the manifest: metadata only (dims, dtypes, world, the
                                      data directory, the number of chunks)
    snapshots/.name.<token>/rows-00000.safetensors ...
                                      keys (int64), table ids (int32), rows (n, width):
                                      each row's embedding and optimizer state

The chunks are written first, into a fresh directory; the manifest, written atomically by
tideflow.io's safetensors writer (temporary file, fsync, rename), then commits them and the
previous snapshot's directory is removed: a crash at any point leaves the previous snapshot
of that name whole.
"""

from __future__ import annotations

import os
import secrets
import shutil

import numpy as np

from ..framework import dtype as dtypes
from ..framework.errors import TideflowError
from ..io._file import read, write
from ._hashing import owner_of

FORMAT = "tideflow.one_embedding/1"
_CHUNK_ROWS = 1 << 20


def _snapshot_dir(path: str) -> str:
    return os.path.join(path, "snapshots")


def _manifest_path(path: str, name: str) -> str:
    return os.path.join(_snapshot_dir(path), f"{name}.safetensors")


def _check_name(owner: str, name) -> None:
    if not isinstance(name, str) or not name or name.startswith(".") or os.sep in name:
        raise TideflowError(
            f"one_embedding {owner!r}: a snapshot name is a non-empty file name, got {name!r}"
        )


class _ChunkWriter:
    """Chunks of (keys, tables, rows) into a fresh directory, committed by `commit`."""

    def __init__(self, path: str, name: str, meta: dict) -> None:
        self.path, self.name, self.meta = path, name, meta
        os.makedirs(_snapshot_dir(path), exist_ok=True)
        self.data = f".{name}.{secrets.token_hex(6)}"
        self.directory = os.path.join(_snapshot_dir(path), self.data)
        os.mkdir(self.directory)
        self.chunks = 0
        self.rows = 0

    def add(self, tables: np.ndarray, keys: np.ndarray, rows: np.ndarray) -> None:
        if not keys.size:
            return
        file = os.path.join(self.directory, f"rows-{self.chunks:05d}.safetensors")
        write({"keys": keys, "tables": tables, "rows": rows}, {}, file, "save_snapshot")
        self.chunks += 1
        self.rows += keys.size

    def commit(self) -> None:
        manifest = _manifest_path(self.path, self.name)
        previous = _data_dir(manifest) if os.path.exists(manifest) else None
        meta = {**self.meta, "format": FORMAT, "data": self.data, "chunks": str(self.chunks),
                "rows": str(self.rows)}  # fmt: skip
        write({}, meta, manifest, "save_snapshot")
        if previous is not None and previous != self.data:
            shutil.rmtree(os.path.join(_snapshot_dir(self.path), previous), ignore_errors=True)

    def abandon(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _data_dir(manifest: str) -> str | None:
    try:
        return read(manifest, "load_snapshot")[1].get("data")
    except TideflowError:
        return None


def _read_manifest(owner: str, path: str, name: str) -> dict:
    manifest = _manifest_path(path, name)
    if not os.path.exists(manifest):
        raise TideflowError(f"one_embedding {owner!r}: no snapshot {name!r} under {path!r}")
    meta = read(manifest, f"one_embedding {owner!r}: snapshot {name!r}")[1]
    if meta.get("format") != FORMAT:
        raise TideflowError(
            f"one_embedding {owner!r}: {manifest} is not a one_embedding snapshot manifest"
        )
    return meta


def _chunks(path: str, meta: dict, context: str):
    directory = os.path.join(_snapshot_dir(path), meta["data"])
    for i in range(int(meta["chunks"])):
        arrays, _ = read(os.path.join(directory, f"rows-{i:05d}.safetensors"), context)
        yield arrays["tables"], arrays["keys"], arrays["rows"]


# -- an embedding's snapshots ---------------------------------------------------------------------
def _persistent_path(embedding) -> str:
    if embedding.persistent_path is None:
        raise TideflowError(
            f"one_embedding {embedding.name!r}: snapshots need a persistent_path in the "
            "store options"
        )
    return embedding.persistent_path


def save_snapshot(embedding, name: str) -> None:
    _check_name(embedding.name, name)
    path = _persistent_path(embedding)
    table = embedding._local
    meta = {
        "dim": str(table.dim),
        "dtype": embedding.dtype.name,
        "key_type": embedding.key_type.name,
        "width": str(table.store.width),
        "num_tables": str(table.num_tables),
        "world": str(getattr(embedding._table, "size", 1)),
    }
    try:
        writer = _ChunkWriter(path, name, meta)
    except OSError as e:
        raise TideflowError(
            f"one_embedding {embedding.name!r}: cannot write snapshot {name!r} under "
            f"{path!r}: {e.strerror}"
        ) from None
    try:
        for tables, keys, rows in table.store.export():
            writer.add(tables, keys, rows)
        writer.commit()
    except BaseException:
        writer.abandon()
        raise


def load_snapshot(embedding, name: str) -> None:
    _check_name(embedding.name, name)
    path = _persistent_path(embedding)
    context = f"one_embedding {embedding.name!r}: snapshot {name!r}"
    table = embedding._table
    ranks, rank = getattr(table, "size", 1), getattr(table, "rank", 0)
    if os.path.exists(_manifest_path(path, name)):
        meta = _read_manifest(embedding.name, path, name)
        chunks = _chunks(path, meta, context)
    else:  # saved by another number of ranks: each of them holds some of this rank's keys
        paths = _other_world(embedding, name, context)
        metas = [_read_manifest(embedding.name, p, name) for p in paths]
        meta = metas[0]
        chunks = _owned(
            (c for p, m in zip(paths, metas, strict=True) for c in _chunks(p, m, context)),
            rank, ranks,
        )  # fmt: skip
    dim = None if meta.get("dim") is None else int(meta["dim"])
    load_rows(embedding, context, meta["dtype"], dim, int(meta["width"]), chunks)


def _other_world(embedding, name: str, context: str) -> list[str]:
    """The rank directories of the one world size that saved snapshot `name` next to this
    rank's directory."""
    root = embedding._persistent_root
    if root is None:
        raise TideflowError(
            f"{context}: no snapshot {name!r} under {embedding.persistent_path!r} (reading "
            "another world's needs persistent_path to be one directory, not a list per rank)"
        )
    worlds = set()
    for entry in os.listdir(root):
        rank, _, world = entry.partition("-")
        saved = os.path.exists(_manifest_path(os.path.join(root, entry), name))
        if rank.isdigit() and world.isdigit() and saved:
            worlds.add(int(world))
    if len(worlds) != 1:
        found = "none" if not worlds else f"worlds of {sorted(worlds)} ranks"
        raise TideflowError(f"one_embedding {embedding.name!r}: no snapshot {name!r} under "
                            f"{root!r} ({found})")  # fmt: skip
    world = worlds.pop()
    paths = [os.path.join(root, f"{r}-{world}") for r in range(world)]
    missing = [p for p in paths if not os.path.exists(_manifest_path(p, name))]
    if missing:
        raise TideflowError(f"{context}: saved by {world} ranks, but {missing} lack it")
    return paths


def _owned(chunks, rank: int, ranks: int):
    for tables, keys, rows in chunks:
        mine = owner_of(tables, keys, ranks) == rank
        yield tables[mine], keys[mine], rows[mine]


def load_rows(embedding, context: str, dtype: str, dim: int | None, width: int, chunks) -> None:
    """Replace the embedding's rows with `chunks` of (tables, keys, rows), after checking
    that they are rows of this embedding (`dim` None: only the width is known): a mismatch
    changes nothing."""
    table = embedding._local
    if dtype != embedding.dtype.name:
        raise TideflowError(f"{context} holds {dtype} rows, the embedding's dtype is "
                            f"{embedding.dtype.name}")  # fmt: skip
    if (dim is not None and dim != table.dim) or width < table.dim:
        raise TideflowError(
            f"{context} holds rows of embedding_dim {dim if dim is not None else width}, the "
            f"embedding's is {table.dim}"
        )
    store = table.store
    store.clear()
    for tables, keys, rows in chunks:
        store.load(tables, keys, _fit(rows, store.width, table.dim, table.init.state_fill))


def _fit(rows: np.ndarray, width: int, dim: int, fill: np.ndarray) -> np.ndarray:
    """Rows of another width (an optimizer with other state) made `width` wide: the state
    columns the snapshot lacks start from their initial values, extra ones are dropped."""
    if rows.shape[1] == width:
        return rows
    out = np.empty((rows.shape[0], width), rows.dtype)
    kept = min(width, rows.shape[1])
    out[:, :kept] = rows[:, :kept]
    out[:, kept:] = fill[kept - dim :]
    return out


# -- OneFlow's persistent table reader and writer -----------------------------------------------
class PersistentTableReader:
    """Iterates `(keys, values)` chunks of snapshot `snapshot_name` of every path in
    `paths` (a persistent path per rank, `<persistent_path>/<rank>-<world>`); with
    `with_table_ids=True`, `(keys, table_ids, values)`."""

    def __init__(self, paths, snapshot_name, key_type, value_type, storage_dim,
                 with_table_ids=False) -> None:  # fmt: skip
        self.paths = [os.fspath(p) for p in ([paths] if isinstance(paths, str) else paths)]
        self.name = snapshot_name
        self.key_type = dtypes.to_dtype(key_type)
        self.value_type = dtypes.to_dtype(value_type)
        self.storage_dim = storage_dim
        self.with_table_ids = with_table_ids
        self._metas = []
        for path in self.paths:
            meta = _read_manifest("persistent_table_reader", path, snapshot_name)
            if meta["dtype"] != self.value_type.name or int(meta["width"]) != storage_dim:
                raise TideflowError(
                    f"persistent_table_reader: snapshot {snapshot_name!r} under {path!r} holds "
                    f"{meta['dtype']} rows of {meta['width']} values, not {self.value_type.name}"
                    f" rows of storage_dim {storage_dim}"
                )
            self._metas.append(meta)

    def __iter__(self):
        for path, meta in zip(self.paths, self._metas, strict=True):
            for tables, keys, rows in _chunks(path, meta, "persistent_table_reader"):
                keys = keys.astype(self.key_type.np)
                yield (keys, tables, rows) if self.with_table_ids else (keys, rows)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


class PersistentTableWriter:
    """Writes `(keys, values)` into snapshot `snapshot_name` of `paths` (one per rank of
    the job that will load it: keys go to their owner rank's path), committed by `close()`
    (or leaving a `with` block without an error)."""

    def __init__(self, paths, snapshot_name, key_type, value_type, storage_dim) -> None:
        paths = [os.fspath(p) for p in ([paths] if isinstance(paths, str) else paths)]
        _check_name("persistent_table_writer", snapshot_name)
        self.key_type = dtypes.to_dtype(key_type)
        self.value_type = dtypes.to_dtype(value_type)
        self.storage_dim = storage_dim
        meta = {"dtype": self.value_type.name, "key_type": self.key_type.name,
                "width": str(storage_dim), "world": str(len(paths))}  # fmt: skip
        self._writers = [_ChunkWriter(p, snapshot_name, meta) for p in paths]
        self._closed = False

    def write(self, keys, values, table_ids=None) -> None:
        keys = np.asarray(keys).reshape(-1).astype(np.int64)
        values = np.asarray(values, self.value_type.np).reshape(keys.size, -1)
        if values.shape[1] != self.storage_dim:
            raise TideflowError(
                f"persistent_table_writer: values have {values.shape[1]} columns, "
                f"storage_dim is {self.storage_dim}"
            )
        tables = (np.zeros(keys.size, np.int32) if table_ids is None
                  else np.asarray(table_ids).reshape(-1).astype(np.int32))  # fmt: skip
        owners = owner_of(tables, keys, len(self._writers))
        for rank, writer in enumerate(self._writers):
            mine = owners == rank
            for start in range(0, int(mine.sum()), _CHUNK_ROWS):
                part = np.flatnonzero(mine)[start : start + _CHUNK_ROWS]
                writer.add(tables[part], keys[part], values[part])

    def close(self) -> None:
        if not self._closed:
            for writer in self._writers:
                writer.commit()
            self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, kind, *_) -> None:
        if kind is None:
            self.close()
        else:
            for writer in self._writers:
                writer.abandon()


def make_persistent_table_reader(paths, snapshot_name, key_type, value_type, storage_dim,
                                 physical_block_size=4096, with_table_ids=False):  # fmt: skip
    """A reader of a saved snapshot's rows (OneFlow's API; the block size does not apply).

    >>> import tempfile
    >>> import numpy as np
    >>> d = tempfile.mkdtemp()
    >>> with flow.one_embedding.make_persistent_table_writer(
    ...         [d], "s", flow.int64, flow.float32, 2) as w:
    ...     w.write(np.array([5, 9]), np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    >>> for keys, values in flow.one_embedding.make_persistent_table_reader(
    ...         [d], "s", flow.int64, flow.float32, 2):
    ...     print(sorted(keys.tolist()), values.shape)
    [5, 9] (2, 2)
    """
    return PersistentTableReader(paths, snapshot_name, key_type, value_type, storage_dim,
                                 with_table_ids)  # fmt: skip


def make_persistent_table_writer(paths, snapshot_name, key_type, value_type, storage_dim,
                                 physical_block_size=4096):  # fmt: skip
    """A writer of a snapshot an embedding can `load_snapshot` (OneFlow's API)."""
    return PersistentTableWriter(paths, snapshot_name, key_type, value_type, storage_dim)
