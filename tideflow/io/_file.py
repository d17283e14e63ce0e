"""The safetensors container: arrays plus a str->str metadata map in one file.

Writes to a path are atomic: the bytes go to a temporary file in the target's directory, are
fsynced, and replace the target in one `os.replace`, so a crash mid-save leaves the previous
file intact. Reads validate the file before any tensor is built and turn every way a file can
be broken (not safetensors, truncated, corrupt) into a `TideflowError` naming the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from collections.abc import Mapping

import numpy as np
from safetensors import SafetensorError, TensorSpec, deserialize, serialize, serialize_file

from ..framework import dtype as dtypes
from ..framework.errors import TideflowError

# safetensors' dtype codes for the dtypes tideflow has; a file may hold others (U16, F8, ...).
_FROM_CODE = {
    "BOOL": dtypes.bool_,
    "U8": dtypes.uint8,
    "I8": dtypes.int8,
    "I16": dtypes.int16,
    "I32": dtypes.int32,
    "I64": dtypes.int64,
    "F16": dtypes.float16,
    "BF16": dtypes.bfloat16,
    "F32": dtypes.float32,
    "F64": dtypes.float64,
    "C64": dtypes.complex64,
}
# A tideflow dtype safetensors has no code for; `flow.save` stores it as float64 pairs.
UNSTORABLE = {dtypes.complex128}
_METADATA_KEY = "__metadata__"  # the header entry safetensors reserves for the str->str map
_MAX_HEADER_BYTES = 100_000_000  # safetensors' limit on the JSON header, on write and read
_NOT_SAFETENSORS_HINT = (
    "tideflow reads files written by flow.save or by safetensors; PyTorch pickle checkpoints "
    "(.pt/.pth) are not supported because unpickling can run code: convert them with "
    "safetensors.torch.save_file"
)


def describe(f) -> str:
    """How error messages name `f`: the path, the file object's name, or its type."""
    if isinstance(f, str | os.PathLike):
        return repr(os.fspath(f))
    name = getattr(f, "name", None)
    return repr(name) if isinstance(name, str) else f"<{type(f).__name__}>"


def _check_file(f, method: str, context: str) -> None:
    if not isinstance(f, str | os.PathLike) and not callable(getattr(f, method, None)):
        raise TypeError(
            f"{context}: f must be a path (str or os.PathLike) or a binary file object with "
            f".{method}(), got {type(f).__name__}"
        )


def as_contiguous(array: np.ndarray) -> np.ndarray:
    """`array` in C order (np.ascontiguousarray would turn a 0-d array into 1-d)."""
    return array if array.flags.c_contiguous else array.copy(order="C")


def write(arrays: Mapping[str, np.ndarray], metadata: Mapping[str, str], f, context: str):
    """Write `arrays` (any layout; stored C-contiguous) and `metadata` to a path (atomically)
    or to a binary file object at its current position."""
    _check_file(f, "write", context)
    keep_alive = []  # TensorSpec holds raw pointers: the arrays must outlive serialization
    specs = {}
    for name, array in arrays.items():
        if dtypes.from_numpy(array.dtype) in UNSTORABLE:
            raise TideflowError(
                f"{context}: tensor {name!r} is {array.dtype}, which safetensors cannot store "
                "(flow.save stores it as float64 pairs; here, save flow.view_as_real(t))"
            )
        contiguous = as_contiguous(array)
        keep_alive.append(contiguous)
        specs[name] = TensorSpec(
            dtype=dtypes.from_numpy(contiguous.dtype).name,  # tideflow's names are safetensors'
            shape=contiguous.shape,
            data_ptr=contiguous.ctypes.data,
            data_len=contiguous.nbytes,
        )
    try:
        if isinstance(f, str | os.PathLike):
            _write_atomic(specs, dict(metadata), os.fspath(f))
        else:
            f.write(serialize(specs, metadata=dict(metadata)))
    except SafetensorError as e:
        # Our inputs are valid specs, so the one limit left is the header size.
        raise TideflowError(
            f"{context}: safetensors refused to write the file ({e}); its JSON header, which "
            f"holds the object structure, is limited to {_MAX_HEADER_BYTES // 10**6} MB: store "
            "long sequences of numbers as tensors"
        ) from None


def _write_atomic(specs: dict, metadata: dict, path) -> None:
    target = os.path.realpath(path)  # write through a symlink, as open(path, "wb") would
    directory, base = os.path.split(target)
    tmp = os.path.join(directory, f".{base}.{secrets.token_hex(6)}.tmp")
    # Reserve the name with O_EXCL (never clobber another file); mode 0o666 lets the umask
    # decide the permissions of a new checkpoint, as for any file the user creates.
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        serialize_file(specs, tmp, metadata=metadata)
        fd = os.open(tmp, os.O_RDWR)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):  # re-saving keeps the file's permissions
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
    if os.name == "posix":  # make the rename itself durable
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read(f, context: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The arrays (writable, in header order) and the metadata of a safetensors file, from a
    path or a binary file object (read from its current position to the end)."""
    _check_file(f, "read", context)
    if isinstance(f, str | os.PathLike):
        with open(f, "rb") as stream:
            # NOTE: the declared header size is judged before the file is read whole, so
            # that a crafted length cannot make a load read a huge file into memory
            prefix = stream.read(9)
            _parse_header(prefix, context, whole=False)
            data = prefix + stream.read()
    else:
        data = f.read()
        if not isinstance(data, bytes | bytearray):
            raise TideflowError(f"{context}: the file object must be opened in binary mode")
    header = _parse_header(data, context)
    try:
        entries = dict(deserialize(data))
    except SafetensorError as e:
        raise TideflowError(f"{context}: corrupt safetensors file: {e}") from None
    del data  # the arrays below live in deserialize's bytearrays: keep one copy, not two
    arrays = {}
    for name in header:
        if name == _METADATA_KEY:
            continue
        entry = entries[name]
        dtype = _FROM_CODE.get(entry["dtype"])
        if dtype is None:
            supported = ", ".join(_FROM_CODE)
            raise TideflowError(
                f"{context}: tensor {name!r} has safetensors dtype {entry['dtype']}, which "
                f"tideflow does not support (supported: {supported})"
            )
        # A bytearray is writable, so the loaded tensors are too; no copy is made.
        arrays[name] = np.frombuffer(entry["data"], dtype=dtype.np).reshape(entry["shape"])
    return arrays, header.get(_METADATA_KEY) or {}


def _parse_header(data: bytes, context: str, whole: bool = True) -> dict | None:
    """The JSON header, after the checks that tell 'not safetensors' from 'truncated'.
    safetensors' `deserialize` then validates the offsets, dtypes and sizes in full. With
    `whole=False`, `data` is the file's first bytes: only the declared size is checked."""
    if len(data) < 8:
        raise TideflowError(
            f"{context}: not a safetensors file: {len(data)} bytes is shorter than the 8-byte "
            f"header length ({_NOT_SAFETENSORS_HINT})"
        )
    size = int.from_bytes(data[:8], "little")
    looks_like_header = data[8:9] == b"{"
    if size > _MAX_HEADER_BYTES and looks_like_header:
        raise TideflowError(
            f"{context}: corrupt safetensors file: its header declares {size} bytes, more "
            f"than safetensors' limit of {_MAX_HEADER_BYTES}"
        )
    if not whole:
        return None
    if size > len(data) - 8:
        if looks_like_header:
            raise TideflowError(
                f"{context}: the file is truncated: its header declares {size} bytes but only "
                f"{len(data) - 8} follow"
            )
        raise TideflowError(f"{context}: not a safetensors file ({_NOT_SAFETENSORS_HINT})")
    try:
        header = json.loads(data[8 : 8 + size])
        metadata = header.get(_METADATA_KEY) or {}
        data_size = max(
            (entry["data_offsets"][1] for name, entry in header.items() if name != _METADATA_KEY),
            default=0,
        )
        well_formed = isinstance(data_size, int) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
        )
    except (ValueError, RecursionError, AttributeError, TypeError, KeyError, IndexError):
        well_formed = False
    if not well_formed:
        if not looks_like_header:
            raise TideflowError(f"{context}: not a safetensors file ({_NOT_SAFETENSORS_HINT})")
        raise TideflowError(f"{context}: corrupt safetensors file: the header is malformed")
    present = len(data) - 8 - size
    if data_size > present:
        raise TideflowError(
            f"{context}: the file is truncated: its tensors need {data_size} bytes of data but "
            f"only {present} are present"
        )
    return header
