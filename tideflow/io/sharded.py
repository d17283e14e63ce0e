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
- atomic, also against a process killed at any moment (tests/unit/test_checkpoint_crash.py):
  1. the ranks write into a temporary directory `.<name>.<token>.tmp` next to the target,
     each rank file fsynced and renamed into it complete (`_file.write`);
  2. rank 0 writes metadata.json last, fsyncs it and the directory (a directory without
     metadata.json is no checkpoint);
  3. rank 0 swaps the temporary directory with the target in one `renameat2(RENAME_EXCHANGE)`
     (Linux), fsyncs the parent and deletes the previous checkpoint, now under the temporary
     name. So the name holds the previous or the new checkpoint at every moment; a kill
     leaves at most a hidden `.<name>.<token>.tmp` behind. Where the exchange is not
     available (other systems, filesystems without it), the previous checkpoint is renamed
     away first (to `.<name>.<token>.old`), which leaves a moment without the name;
  a failure on any rank leaves the name untouched.

Loading needs no communication. In a world of one it returns local tensors holding the full
logical values. In a larger world it returns global tensors: on the saved placement and
layout when the world has the saved size, else split over every rank along the dim the
checkpoint was split along (broadcast if it was not). Each rank reads only the bytes of its
own shard (memory-mapped). Every file is treated as hostile: only `metadata.json` (at most
`_MAX_METADATA_BYTES`) and files named `rank_NNNNN.safetensors` in the directory itself are
opened, never through a symbolic link; headers, offsets, shapes and dtypes are checked
against the file sizes before anything is allocated, so memory stays bounded by the bytes
the checkpoint really holds. `Module.load_state_dict` then converts them to the layout of the
module's parameters. A shard read whole is checked against its CRC-32; a shard read in part
(loading onto another layout) is not.

The files share one directory, so every rank must see the same filesystem path.
"""

from __future__ import annotations

import ctypes
import errno
import json
import math
import os
import re
import secrets
import shutil
import stat
import zlib
from collections.abc import Callable

import numpy as np

from ..distributed import faults
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
from ._file import _FROM_CODE, _MAX_HEADER_BYTES, as_contiguous, write
from ._structure import Decoder

__all__ = ["is_sharded_checkpoint", "load", "save"]

FORMAT = "tideflow.sharded"
FORMAT_VERSION = 1
METADATA = "metadata.json"
_CRC_KEY = "tideflow.crc32"  # in each rank file's safetensors metadata: {name: crc32}
_RANK_FILE = re.compile(r"rank_\d{5}\.safetensors")
_MAX_METADATA_BYTES = _MAX_HEADER_BYTES  # the same bound as a single file's JSON header
_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


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
        [name, list(t.shape), t.dtype.name, t.placement.ranks.tolist(), _sbp_text(t._nd_sbp)]
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
    grid = where.ranks
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
    if faults.armed:
        faults.reached("checkpoint", "writing its shards")
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
            record["placement"] = t.placement.ranks.tolist()
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
    directory into place, replacing what the name held (see the module docstring)."""
    path = os.path.join(tmp, METADATA)
    with open(path, "w") as out:
        json.dump(document, out, separators=(",", ":"), allow_nan=False)
        out.flush()
        os.fsync(out.fileno())
    _fsync_directory(tmp)
    parent, base = os.path.split(target)
    old = None
    if not os.path.lexists(target):
        os.rename(tmp, target)
    elif _exchange(tmp, target):
        old = tmp  # now holds the previous checkpoint
    else:
        old = os.path.join(parent, f".{base}.{token}.old")
        os.rename(target, old)
        os.rename(tmp, target)
    _fsync_directory(parent)  # make the renames durable
    if old is not None:
        if os.path.isdir(old) and not os.path.islink(old):
            shutil.rmtree(old)
        else:
            os.remove(old)


def _fsync_directory(path: str) -> None:
    if os.name == "posix":
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _exchange(a: str, b: str) -> bool:
    """Swap the entries `a` and `b` in one atomic step; False where the system or the
    filesystem cannot (the caller then renames in two steps)."""
    renameat2 = getattr(_libc(), "renameat2", None) if os.name == "posix" else None
    if renameat2 is None:
        return False
    done = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), b)


_LIBC: list = []


def _libc():
    if not _LIBC:
        try:
            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        except OSError:
            _LIBC.append(None)
    return _LIBC[0]


# -- loading -----------------------------------------------------------------------------------
def load(f, relocate: Callable[[Tensor], Tensor], context: str):
    """The object saved as the sharded checkpoint directory `f` (see the module docstring)."""
    directory = os.fspath(f)
    document = _read_document(directory, context)
    world_size = communicator(None).size
    tensors = []
    with _ShardReader(directory, context) as reader:
        for i, record in enumerate(document["tensors"]):
            try:
                saved_world = document["world_size"]
                tensors.append(_tensor(record, reader, world_size, saved_world, relocate))
            except (ValueError, TypeError, KeyError, IndexError, OverflowError) as e:
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
    with _open_inside(directory, METADATA, context) as stream:
        size = os.fstat(stream.fileno()).st_size
        if size > _MAX_METADATA_BYTES:
            raise TideflowError(
                f"{context}: malformed checkpoint: {METADATA} holds {size} bytes, more than "
                f"the limit of {_MAX_METADATA_BYTES}"
            )
        text = stream.read(size)
    try:
        document = json.loads(text)
        body = {k: v for k, v in document.items() if k != "crc32"}
        stored_crc = document.get("crc32")
    except (ValueError, RecursionError, AttributeError) as e:
        raise TideflowError(f"{context}: malformed {METADATA}: {e}"[:400]) from None
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


def _open_inside(directory: str, file: str, context: str):
    """`file` (a plain name) of `directory` opened for reading, refusing a symbolic link or
    anything but a regular file: a checkpoint never makes tideflow read outside itself."""
    path = os.path.join(directory, file)
    try:
        # NOTE: O_NONBLOCK so that a FIFO planted under the name cannot stall the open
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise TideflowError(f"{context}: {file} is missing from the checkpoint") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise TideflowError(
                f"{context}: {file} is a symbolic link; a checkpoint's files must lie in its "
                "directory"
            ) from None
        raise TideflowError(f"{context}: cannot open {file}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TideflowError(f"{context}: {file} is not a regular file")
    return os.fdopen(fd, "rb")


class _ShardReader:
    """Reads parts of the stored shards, memory-mapping the rank files (opened once each,
    headers validated and cached). A context manager: leaving it closes the files."""

    def __init__(self, directory: str, context: str) -> None:
        self.directory = directory
        self.context = context
        self._headers: dict[str, tuple[dict, int, dict]] = {}
        self._files: dict[str, object] = {}

    def __enter__(self) -> _ShardReader:
        return self

    def __exit__(self, *exc) -> None:
        for stream in self._files.values():
            stream.close()
        self._files.clear()

    def region(self, name: str, dtype, shape: tuple, shards: list, region: tuple) -> np.ndarray:
        """The part `region` (slices of the logical tensor `shape`) assembled from `shards`."""
        if type(shards) is not list:
            raise ValueError("the shard list is not a list")
        pieces, files, filled, stored = [], set(), 0, 0
        for shard in shards:
            file, offset, size = shard["file"], shard["offset"], shard["shape"]
            if len(offset) != len(shape) or len(size) != len(shape):
                raise ValueError(f"shard {shard} does not match the shape {list(shape)}")
            # the shard must be in its file as described: this bounds what is allocated below
            # by the bytes the files really hold
            self._entry(file, name, dtype, tuple(size))
            if file in files:
                raise ValueError(f"two shards of {name!r} name the file {file!r:.80}")
            files.add(file)
            stored += math.prod(size)
            # per dim: the overlap [a, b) of the wanted region and this shard
            overlap = [
                (max(r.start, o), min(r.stop, o + n))
                for r, o, n in zip(region, offset, size, strict=True)
            ]
            if any(a >= b for a, b in overlap):
                continue
            pieces.append((file, tuple(size), offset, overlap))
            filled += math.prod(b - a for a, b in overlap)
        wanted = math.prod(r.stop - r.start for r in region)
        if filled != wanted or wanted > stored:
            raise ValueError(
                f"the shards of {name!r} cover {filled} of the {wanted} elements needed"
            )
        out = np.empty(tuple(r.stop - r.start for r in region), dtype.np)
        starts = [r.start for r in region]
        for file, size, offset, overlap in pieces:
            part = tuple(slice(a - o, b - o) for (a, b), o in zip(overlap, offset, strict=True))
            dst = tuple(slice(a - s, b - s) for (a, b), s in zip(overlap, starts, strict=True))
            out[dst] = self._read(file, name, dtype, size, part)
        return out

    def _entry(self, file, name: str, dtype, size: tuple) -> tuple[int, int]:
        """(begin, end) of the bytes of the shard of `name` in `file`, checked against what
        the metadata says it is."""
        entries, start, _ = self._header(file)
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
                f"{entry['shape']} ({end - begin} bytes), where the metadata says {dtype} "
                f"{list(size)}"
            )
        return start + begin, start + end

    def _read(self, file: str, name: str, dtype, size: tuple, part: tuple) -> np.ndarray:
        begin, _ = self._entry(file, name, dtype, size)
        _, _, crcs = self._header(file)
        count = math.prod(size)
        if count == 0:
            return np.empty(size, dtype.np)[part]
        stream = self._files[file]
        mapped = np.memmap(stream, dtype.np, "r", offset=begin, shape=(count,))
        whole = all(p.start == 0 and p.stop == n for p, n in zip(part, size, strict=True))
        if whole and crcs.get(name) != f"{zlib.crc32(mapped.view(np.uint8)):08x}":
            raise TideflowError(
                f"{self.context}: checksum mismatch for the shard of {name!r} in {file}: the "
                "file was modified or corrupted after it was written"
            )
        out = np.array(mapped.reshape(size)[part])
        del mapped
        return out

    def _header(self, file) -> tuple[dict, int, dict]:
        if not isinstance(file, str) or not _RANK_FILE.fullmatch(file):
            raise TideflowError(
                f"{self.context}: malformed checkpoint: shard file {file!r:.80} (shards are "
                "named rank_NNNNN.safetensors, in the checkpoint's directory)"
            )
        cached = self._headers.get(file)
        if cached is not None:
            return cached
        stream = _open_inside(self.directory, file, self.context)
        self._files[file] = stream
        total = os.fstat(stream.fileno()).st_size
        size = int.from_bytes(stream.read(8), "little")
        if total < 8 or size > total - 8 or size > _MAX_HEADER_BYTES:
            raise TideflowError(
                f"{self.context}: {file} is truncated or not a safetensors file: its header "
                f"declares {size} bytes, the file holds {total}"
            )
        try:
            header = json.loads(stream.read(size))
            meta = header.pop("__metadata__", None) or {}
            crcs = json.loads(meta.get(_CRC_KEY, "{}"))
            well_formed = type(crcs) is dict and all(_valid_entry(e) for e in header.values())
        except (ValueError, RecursionError, AttributeError, TypeError) as e:
            raise TideflowError(
                f"{self.context}: {file} is not a safetensors file: {e}"[:400]
            ) from None
        if not well_formed:
            raise TideflowError(f"{self.context}: {file} has a malformed safetensors header")
        start = 8 + size
        if any(start + e["data_offsets"][1] > total for e in header.values()):
            raise TideflowError(f"{self.context}: {file} is truncated")
        self._headers[file] = (header, start, crcs)
        return header, start, crcs


def _valid_entry(entry) -> bool:
    def count(x) -> bool:
        return type(x) is int and x >= 0

    return (
        type(entry) is dict
        and type(entry.get("dtype")) is str
        and type(entry.get("shape")) is list
        and all(count(n) for n in entry["shape"])
        and type(entry.get("data_offsets")) is list
        and len(entry["data_offsets"]) == 2
        and all(count(n) for n in entry["data_offsets"])
        and entry["data_offsets"][0] <= entry["data_offsets"][1]
    )
