"""Sharded checkpoints: `flow.save` of an object holding global tensors writes a directory in
which each rank stores only its own shards, and `flow.load` of it puts the logical tensors
back onto whatever world loads it.

    checkpoint/
      metadata.json            the object tree, and per tensor its dtype, logical shape,
                               placement, SBP and where each shard lies (file, offsets, shape)
      rank_00000.safetensors   the shards rank 0 wrote (plain safetensors: any reader opens
      rank_00001.safetensors   them), with a CRC-32 per shard in the header's metadata
      ...

Saving (collective: every rank of the job calls it with the same structure):
- nothing is gathered: partial-sum axes are first reduce-scattered into splits, then each
  rank writes its shard if it is the first rank along every broadcast axis (so each piece of
  a tensor is written once);
- local tensors and every other value are taken from rank 0 (rank 0 writes them);
- atomic: the ranks write into a temporary directory next to the target, which rank 0
  renames into place once every rank's file is complete. A previous checkpoint under the
  name is renamed away first and then deleted (a crash between the two renames leaves it as
  the hidden `.<name>.<token>.old`); a failure on any rank leaves the name untouched.

Loading needs no communication. In a world of one it returns local tensors holding the full
logical values. In a larger world it returns global tensors: on the saved placement and
layout when the world has the saved size, else split over every rank along the dim the
checkpoint was split along (broadcast if it was not). Each rank reads only the bytes of its
own shard (memory-mapped). `Module.load_state_dict` then converts them to the layout of the
module's parameters. A shard read whole is checked against its CRC-32; a shard read in part
(loading onto another layout) is not.

The files share one directory, so every rank must see the same filesystem path.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import shutil
import zlib
from collections.abc import Callable

import numpy as np

from ..distributed.groups import communicator
from ..framework import dtype as dtypes
from ..framework.errors import TideflowError
from ..framework.grad_mode import no_grad
from ..framework.sbp import B, P, SbpParallel, Split
from ..framework.tensor import Tensor, make_tensor
from ..nn.parameter import Parameter
from ..parallel._layout import shard_index
from ..parallel.boxing import empty_shard
from ..parallel.dispatch import install
from ..parallel.global_tensor import GlobalTensor, wrap
from ..parallel.placement import placement as Placement
from ..parallel.to_global import global_class
from ._file import _FROM_CODE, as_contiguous, write
from ._structure import Decoder

__all__ = ["is_sharded_checkpoint", "load", "save"]

FORMAT = "tideflow.sharded"
FORMAT_VERSION = 1
METADATA = "metadata.json"
_CRC_KEY = "tideflow.crc32"  # in each rank file's safetensors metadata: {name: crc32}
_RANK_FILE = re.compile(r"rank_\d{5}\.safetensors")


def is_sharded_checkpoint(f) -> bool:
    """Whether `f` is a path to a directory holding a sharded checkpoint.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "checkpoint")
    >>> w = flow.ones(4, 2).to_global(flow.placement("cpu", [0]), flow.sbp.split(0))
    >>> flow.save({"w": w, "step": 3}, path)
    >>> flow.io.sharded.is_sharded_checkpoint(path), sorted(os.listdir(path))
    (True, ['metadata.json', 'rank_00000.safetensors'])
    >>> flow.load(path)["w"].shape  # a world of one: the whole tensor, local
    tideflow.Size([4, 2])
    """
    return isinstance(f, str | os.PathLike) and os.path.isfile(os.path.join(f, METADATA))


def _rank_file(rank: int) -> str:
    return f"rank_{rank:05d}.safetensors"


# -- layouts as text ---------------------------------------------------------------------------
def _sbp_text(nd: tuple) -> list[str]:
    return [f"S({s.axis})" if isinstance(s, Split) else "B" if s is B else "P" for s in nd]


def _sbp_value(text: str) -> SbpParallel:
    if text == "B":
        return B
    if text == "P":
        return P
    match = re.fullmatch(r"S\((\d+)\)", text)
    if match is None:
        raise ValueError(f"unknown sbp {text!r}")
    return Split(int(match.group(1)))


# -- saving ------------------------------------------------------------------------------------
def save(root, tensors: list[Tensor], names: list[str], f, context: str) -> None:
    """Write the encoded object (`root`, whose tensors are `tensors` named `names`) as a
    sharded checkpoint directory at path `f`. Collective over every rank of the job."""
    if not isinstance(f, str | os.PathLike):
        raise TideflowError(
            f"{context}: an object holding global tensors is saved as a directory of shards, "
            f"one file per rank: f must be a path, got {type(f).__name__}"
        )
    comm = communicator(None)
    _check_same_tensors(tensors, names, comm, context)
    with no_grad():
        stored = [_storable(t) for t in tensors]
    target = os.path.abspath(os.fspath(f))
    token = _shared_token(comm)
    parent, base = os.path.split(target)
    tmp = os.path.join(parent, f".{base}.{token}.tmp")
    first = comm.rank == 0
    _together(comm, context, lambda: os.mkdir(tmp) if first else None)

    def publish() -> None:
        if first:
            _publish(_document(root, stored, names, tensors, comm.size), tmp, target, token)

    try:
        _together(comm, context, lambda: _write_shards(stored, names, tmp, comm.rank, context))
        _together(comm, context, publish)
    except Exception:
        # NOTE: the steps fail on every rank together: all are here, and leave once the
        # temporary directory is gone
        if first:
            shutil.rmtree(tmp, ignore_errors=True)
        comm.barrier()
        raise


def _check_same_tensors(tensors: list[Tensor], names: list[str], comm, context: str) -> None:
    """Every rank saves the same global tensors (names, shapes, dtypes, layouts) in the same
    order: their conversions below are collectives that must match."""
    described = [
        [name, list(t.shape), t.dtype.name, t.placement.ranks, _sbp_text(t._nd_sbp)]
        for t, name in zip(tensors, names, strict=True)
        if isinstance(t, GlobalTensor)
    ]
    mine = np.array([zlib.crc32(json.dumps(described).encode())], np.int64)
    everyone = np.empty(comm.size, np.int64)
    comm.allgather(mine, everyone)
    differing = [r for r in range(comm.size) if everyone[r] != everyone[0]]
    if differing:
        raise TideflowError(
            f"{context}: every rank must save the same global tensors (names, shapes, dtypes, "
            f"placements, sbp), but ranks {differing} differ from rank 0"
        )


def _storable(t: Tensor) -> Tensor:
    """`t` in a layout whose shards can be written once each: partial sums reduce-scattered
    along dim 0 (broadcast for 0-d tensors). Local tensors stay as they are."""
    if not isinstance(t, GlobalTensor) or P not in t._nd_sbp:
        return t
    resolved = Split(0) if t.ndim else B
    return t.to_global(sbp=[resolved if s is P else s for s in t._nd_sbp])


def _shards(t: Tensor) -> list[tuple[int, tuple[slice, ...]]]:
    """(writing rank, region of the logical tensor) of each non-empty shard to store: the
    first rank along every broadcast axis writes; rank 0 writes a local tensor whole."""
    if not isinstance(t, GlobalTensor):
        return [(0, tuple(slice(0, n) for n in t.shape))] if t.numel() else []
    where, nd, shape = t._placement, t._nd_sbp, t._logical
    grid = np.array(where.ranks)
    out = []
    for coord in np.ndindex(grid.shape):
        if any(s is B and c != 0 for s, c in zip(nd, coord, strict=True)):
            continue
        region = shard_index(shape, nd, tuple(where.hierarchy), coord)
        if all(r.stop > r.start for r in region):
            out.append((int(grid[coord]), region))
    return out


def _shared_token(comm) -> str:
    """A random name part, the same on every rank (rank 0's)."""
    token = np.frombuffer(secrets.token_hex(6).encode(), np.uint8).copy()
    comm.bcast(token, 0)
    return token.tobytes().decode()


def _together(comm, context: str, step: Callable[[], object]) -> None:
    """Run `step` on every rank; if it fails on any, every rank raises (the failing ones
    their own error), so that no rank goes on to a collective the others never reach."""
    failure = None
    try:
        step()
    except Exception as e:
        failure = e
    flags = np.empty(comm.size, np.int64)
    comm.allgather(np.array([failure is not None], np.int64), flags)
    if failure is not None:
        raise failure
    if flags.any():
        failed = np.flatnonzero(flags).tolist()
        raise TideflowError(f"{context}: ranks {failed} failed (see their errors); nothing saved")


def _write_shards(stored: list[Tensor], names: list[str], tmp: str, rank: int, context: str):
    arrays, crcs = {}, {}
    for t, name in zip(stored, names, strict=True):
        for writer, region in _shards(t):
            if writer == rank:
                # NOTE: shaped from the region: a 0-d shard may be held as a NumPy scalar or
                # a 1-element array (see the lead's report)
                shape = tuple(r.stop - r.start for r in region)
                a = as_contiguous(np.asarray(t._data).reshape(shape))
                arrays[name] = a
                crcs[name] = f"{zlib.crc32(a.reshape(-1).view(np.uint8)):08x}"
    if arrays:
        write(arrays, {_CRC_KEY: json.dumps(crcs)}, os.path.join(tmp, _rank_file(rank)), context)


def _document(root, stored: list[Tensor], names: list[str], originals, world_size: int) -> dict:
    records = []
    for t, name, original in zip(stored, names, originals, strict=True):
        record = {
            "name": name,
            "type": "Parameter" if isinstance(original, Parameter) else "Tensor",
            "requires_grad": original.requires_grad,
            "dtype": t.dtype.name,
            "shape": list(t.shape),
            "shards": [
                {
                    "file": _rank_file(writer),
                    "offset": [r.start for r in region],
                    "shape": [r.stop - r.start for r in region],
                }
                for writer, region in _shards(t)
            ],
        }
        if isinstance(t, GlobalTensor):
            record["placement"] = t.placement.ranks
            record["sbp"] = _sbp_text(original._nd_sbp)
            record["layout"] = _sbp_text(t._nd_sbp)
        records.append(record)
    body = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "world_size": world_size,
        "tensors": records,
        "root": root,
    }
    return {**body, "crc32": _document_crc(body)}


def _document_crc(body: dict) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return f"{zlib.crc32(text.encode()):08x}"


def _publish(document: dict, tmp: str, target: str, token: str) -> None:
    """Rank 0: the metadata last (a directory without it is no checkpoint), then the
    directory into place, replacing what the name held."""
    path = os.path.join(tmp, METADATA)
    with open(path, "w") as out:
        json.dump(document, out, separators=(",", ":"), allow_nan=False)
        out.flush()
        os.fsync(out.fileno())
    parent, base = os.path.split(target)
    old = None
    if os.path.lexists(target):
        old = os.path.join(parent, f".{base}.{token}.old")
        os.rename(target, old)
    os.rename(tmp, target)
    if os.name == "posix":  # make the renames durable
        fd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    if old is not None:
        if os.path.isdir(old) and not os.path.islink(old):
            shutil.rmtree(old)
        else:
            os.remove(old)


# -- loading -----------------------------------------------------------------------------------
def load(f, relocate: Callable[[Tensor], Tensor], context: str):
    """The object saved as the sharded checkpoint directory `f` (see the module docstring)."""
    directory = os.fspath(f)
    document = _read_document(directory, context)
    reader = _ShardReader(directory, context)
    world_size = communicator(None).size
    tensors = []
    for i, record in enumerate(document["tensors"]):
        try:
            tensors.append(_tensor(record, reader, world_size, document["world_size"], relocate))
        except (ValueError, TypeError, KeyError, IndexError) as e:
            raise TideflowError(
                f"{context}: malformed checkpoint: tensor record {i} {record!r:.160}: {e}"
            ) from None
    try:
        return Decoder(tensors, context).decode(document["root"])
    except RecursionError:
        raise TideflowError(
            f"{context}: malformed checkpoint: the structure is nested too deeply"
        ) from None


def _read_document(directory: str, context: str) -> dict:
    try:
        with open(os.path.join(directory, METADATA)) as stream:
            document = json.load(stream)
        body = {k: v for k, v in document.items() if k != "crc32"}
        stored_crc = document.get("crc32")
    except (ValueError, RecursionError, AttributeError) as e:
        raise TideflowError(f"{context}: malformed {METADATA}: {e}") from None
    if body.get("format") != FORMAT:
        raise TideflowError(f"{context}: {METADATA} does not describe a {FORMAT} checkpoint")
    if body.get("version") != FORMAT_VERSION:
        raise TideflowError(
            f"{context}: sharded checkpoint format version {body.get('version')!r:.20} is not "
            f"supported; this tideflow reads version {FORMAT_VERSION}"
        )
    if stored_crc != _document_crc(body):
        raise TideflowError(
            f"{context}: checksum mismatch in {METADATA} (stored crc32 {stored_crc!r:.20}): the "
            "file was modified or corrupted after it was written"
        )
    if not isinstance(body.get("tensors"), list) or type(body.get("world_size")) is not int:
        raise TideflowError(f"{context}: malformed {METADATA}: no tensor table or world size")
    return body


def _tensor(record: dict, reader: _ShardReader, world_size: int, saved_world: int, relocate):
    dtype = dtypes.to_dtype(record["dtype"])
    shape = tuple(int(n) for n in record["shape"])
    if any(n < 0 for n in shape):
        raise ValueError(f"negative size in {list(shape)}")
    shards = record["shards"]
    if "placement" not in record or world_size == 1:
        whole = tuple(slice(0, n) for n in shape)
        t = relocate(make_tensor(reader.region(record["name"], dtype, shape, shards, whole)))
        if record["type"] == "Parameter":
            return Parameter(t, requires_grad=record["requires_grad"])
        return t.requires_grad_(True) if record["requires_grad"] else t
    where, nd = _target_layout(record, shape, world_size, saved_world)
    coord = where.coordinate(communicator(None).rank)
    if coord is None:
        local = empty_shard(shape, dtype.np)
    else:
        region = shard_index(shape, nd, tuple(where.hierarchy), coord)
        local = reader.region(record["name"], dtype, shape, shards, region)
    install()
    t = wrap(make_tensor(local), where, nd, shape)
    if record["type"] == "Parameter":
        t.__class__ = global_class(Parameter)
    if record["requires_grad"]:
        t.requires_grad_(True)
    return t


def _target_layout(record: dict, shape: tuple, world_size: int, saved_world: int):
    """Where a loading world puts a global tensor: as saved in a world of the saved size,
    else split over every rank along the checkpoint's split dim (or broadcast)."""
    stored = tuple(_sbp_value(s) for s in record["layout"])
    if world_size == saved_world:
        where = Placement("cpu", record["placement"])
        if len(stored) != where.ndim or any(
            isinstance(s, Split) and s.axis >= len(shape) for s in stored
        ):
            raise ValueError(f"layout {record['layout']} does not fit the placement and shape")
        return where, stored
    splits = [s for s in stored if isinstance(s, Split) and s.axis < len(shape)]
    return Placement.all("cpu"), (splits[0] if splits else B,)


class _ShardReader:
    """Reads parts of the stored shards, memory-mapping the rank files (headers cached)."""

    def __init__(self, directory: str, context: str) -> None:
        self.directory = directory
        self.context = context
        self._headers: dict[str, tuple[dict, int, dict]] = {}

    def region(self, name: str, dtype, shape: tuple, shards: list, region: tuple) -> np.ndarray:
        """The part `region` (slices of the logical tensor `shape`) assembled from `shards`."""
        out = np.empty(tuple(r.stop - r.start for r in region), dtype.np)
        filled = 0
        for shard in shards:
            offset, size = shard["offset"], shard["shape"]
            if len(offset) != len(shape) or len(size) != len(shape):
                raise ValueError(f"shard {shard} does not match the shape {list(shape)}")
            # per dim: the overlap [a, b) of the wanted region and this shard
            overlap = [
                (max(r.start, o), min(r.stop, o + n))
                for r, o, n in zip(region, offset, size, strict=True)
            ]
            if any(a >= b for a, b in overlap):
                continue
            starts = [r.start for r in region]
            part = tuple(slice(a - o, b - o) for (a, b), o in zip(overlap, offset, strict=True))
            dst = tuple(slice(a - s, b - s) for (a, b), s in zip(overlap, starts, strict=True))
            out[dst] = self._read(shard["file"], name, dtype, tuple(size), part)
            filled += math.prod(b - a for a, b in overlap)
        if filled != out.size:
            raise ValueError(
                f"the shards of {name!r} cover {filled} of the {out.size} elements needed"
            )
        return out

    def _read(self, file: str, name: str, dtype, size: tuple, part: tuple) -> np.ndarray:
        entries, start, crcs = self._header(file)
        entry = entries.get(name)
        if entry is None:
            raise TideflowError(f"{self.context}: {file} holds no shard of {name!r}")
        begin, end = entry["data_offsets"]
        if (
            _FROM_CODE.get(entry["dtype"]) is not dtype
            or tuple(entry["shape"]) != size
            or end - begin != math.prod(size) * dtype.itemsize
        ):
            raise TideflowError(
                f"{self.context}: the shard of {name!r} in {file} is {entry['dtype']} "
                f"{entry['shape']}, where the metadata says {dtype} {list(size)}"
            )
        path = os.path.join(self.directory, file)
        mapped = np.memmap(path, dtype.np, "r", offset=start + begin, shape=(math.prod(size),))
        whole = all(p.start == 0 and p.stop == n for p, n in zip(part, size, strict=True))
        if whole and crcs.get(name) != f"{zlib.crc32(mapped.view(np.uint8)):08x}":
            raise TideflowError(
                f"{self.context}: checksum mismatch for the shard of {name!r} in {file}: the "
                "file was modified or corrupted after it was written"
            )
        out = np.array(mapped.reshape(size)[part])
        del mapped
        return out

    def _header(self, file: str) -> tuple[dict, int, dict]:
        cached = self._headers.get(file)
        if cached is not None:
            return cached
        if not isinstance(file, str) or not _RANK_FILE.fullmatch(file):
            raise TideflowError(f"{self.context}: malformed checkpoint: shard file {file!r:.80}")
        path = os.path.join(self.directory, file)
        try:
            with open(path, "rb") as stream:
                size = int.from_bytes(stream.read(8), "little")
                header = json.loads(stream.read(size))
            total = os.path.getsize(path)
        except FileNotFoundError:
            raise TideflowError(f"{self.context}: shard file {file} is missing") from None
        except (ValueError, RecursionError) as e:
            raise TideflowError(f"{self.context}: {file} is not a safetensors file: {e}") from None
        meta = header.pop("__metadata__", None) or {}
        start = 8 + size
        if any(start + e["data_offsets"][1] > total for e in header.values()):
            raise TideflowError(f"{self.context}: {file} is truncated")
        crcs = json.loads(meta.get(_CRC_KEY, "{}"))
        self._headers[file] = (header, start, crcs)
        return header, start, crcs
