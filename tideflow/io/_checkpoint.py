"""`save` / `load`: a tree of containers, plain values and tensors in one safetensors file.

The tensors are the file's tensors, named after where they sit in the object
(`model.fc.weight`, `optimizer.state.0.exp_avg`), so any safetensors reader sees the weights.
NumPy arrays are stored beside them (see `_numpy`). The metadata holds one JSON document (the
tree, see `_structure`, a table mapping each tensor object to its stored data and flags, and,
when there are any, a table of the NumPy arrays) and a CRC-32 over the document and every
stored array's name, dtype, shape and bytes. PyTorch's zip checkpoints carry CRC-32s for the same
reason: a flipped or edited byte is reported instead of loaded.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Mapping

import numpy as np

from ..framework.device import device as Device
from ..framework.errors import TideflowError
from ..framework.tensor import Tensor, make_tensor
from ..nn.parameter import Parameter
from . import _numpy, sharded
from ._file import as_contiguous, describe, read, write
from ._structure import Decoder, Encoder

FORMAT_VERSION = 1
_DOCUMENT_KEY = "tideflow"
_CHECKSUM_KEY = "tideflow.crc32"
_DOCUMENT_FIELDS = {"version", "tensors", "root"}
_OPTIONAL_FIELDS = {"arrays"}  # written only when needed: files without them read as before
_RECORD_FIELDS = {"data", "type", "requires_grad"}
# A record's "dtype" is the tensor's when its stored data has another: complex128, which
# safetensors lacks, is stored as float64 (real, imag) pairs on a last axis of 2.
_PAIRED = {"complex128": (np.complex128, np.float64)}


def save(
    obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True
) -> None:
    """Save `obj` to `f` (a path or a binary file object), as `torch.save`.

    `obj` may nest dicts (any savable keys: str, int, tuple, ...), OrderedDicts, Counters,
    lists, tuples and sets of tensors, NumPy arrays and scalars, None, bool, int, float,
    complex, str, bytes, dtypes, devices and `Size`s: module, optimizer and lr-scheduler state
    dicts, RNG states, training metadata. Each of these comes back from `load` with its exact
    type (and NumPy dtype). No pickle is involved.

    Objects of plain Python classes, whole modules among them (`flow.save(model, f)`), are
    stored as their class's qualified name and their attributes, recursively; loading them
    needs `weights_only=False` (see `load`). Objects that keep state outside `__dict__`
    (built-in types, `__slots__`) and functions other than tideflow's own raise a
    TideflowError naming where they sit.

    Tensors are stored as safetensors tensors (contiguous; complex128, which safetensors
    lacks, as float64 (real, imag) pairs); Parameters and `requires_grad` are restored. A
    tensor object that appears twice loads as one object, and tensors that view the same
    memory the same way (tied weights) are stored once and load sharing memory.
    Other overlapping views are stored as separate copies.

    Saving to a path is atomic: a crash mid-save leaves the previous file intact.
    `pickle_module`, `pickle_protocol` and `_use_new_zipfile_serialization` are accepted from
    PyTorch programs and change nothing: the file is safetensors, never a pickle.

    An object holding global tensors is saved sharded (`tideflow.io.sharded`): every rank
    calls `save`, `f` becomes a directory, and each rank writes only its own shards.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.safetensors")
    >>> flow.save({"step": 3, "weights": [flow.ones(2), flow.zeros(1)]}, path)
    >>> flow.load(path)["step"]
    3
    """
    context = f"flow.save({describe(f)})"
    encoder = Encoder(context)
    root = encoder.encode(obj)
    if any(t.is_global for t in encoder.tensors):
        if encoder.arrays or encoder.objects:
            raise TideflowError(
                f"{context}: an object holding global tensors is saved as a sharded "
                "checkpoint, which holds tensors and plain values only: save NumPy arrays and "
                "whole modules separately (or the module's state_dict())"
            )
        sharded.save(root, encoder.tensors, encoder.names, f, context)
        return
    records, arrays = _tensor_table(encoder.tensors, encoder.names)
    content = {"version": FORMAT_VERSION, "tensors": records, "root": root}
    if encoder.arrays:
        content["arrays"] = []
        for a, name in zip(encoder.arrays, encoder.array_names, strict=True):
            arrays[name] = _numpy.stored_form(a)
            content["arrays"].append(_numpy.record(name, a))
    document = json.dumps(
        content,
        separators=(",", ":"),
        allow_nan=False,  # non-finite floats are tagged; bare NaN would not be valid JSON
    )
    metadata = {_DOCUMENT_KEY: document, _CHECKSUM_KEY: _checksum(document, arrays)}
    write(arrays, metadata, f, context)


def load(f, map_location=None, pickle_module=None, *, weights_only: bool | None = True, mmap=None):
    """Load an object saved by `save` from `f` (a path or a binary file object).

    A plain safetensors file (no tideflow metadata, e.g. written by
    `safetensors.torch.save_file(model.state_dict(), path)`) loads as a flat dict of tensors
    by name, ready for `Module.load_state_dict`.

    `map_location` is as in `torch.load`: a device or device string for every tensor, a dict
    from saved location to new location, or a callable `fn(tensor, location)` returning the
    tensor to use (None keeps it). Tensors are saved from the 'cpu' location.

    A sharded checkpoint (a directory written by saving global tensors) loads as local
    tensors with the full values in a world of one, and as global tensors in a larger world,
    each rank reading only its own shards (`tideflow.io.sharded`).

    Loading never runs code from the file. With `weights_only=True` (the default, as in
    PyTorch) a file holding whole objects (`flow.save(model, f)`) is refused with a
    TideflowError, unless their classes were trusted with `flow.io.add_safe_globals`;
    `weights_only=False` rebuilds them, from classes already imported in this process only
    (a file never makes tideflow import a module), without calling `__init__`,
    `__setstate__` or any other hook: the instance gets the saved attributes as its
    `__dict__`. A file that is not safetensors, is truncated, fails its checksum or describes
    an unknown structure raises a TideflowError naming the file. `pickle_module` and `mmap`
    are accepted from PyTorch programs and change nothing (there is no pickle to unpickle, and
    the loaded tensors own their memory either way).

    >>> import io
    >>> buffer = io.BytesIO()
    >>> flow.save({"w": flow.arange(3)}, buffer)
    >>> _ = buffer.seek(0)
    >>> flow.load(buffer, map_location="cpu")["w"]
    tensor([0, 1, 2])
    """
    context = f"flow.load({describe(f)})"
    relocate = _relocation(map_location, context)
    if sharded.is_sharded_checkpoint(f):
        return sharded.load(f, relocate, context)
    arrays, metadata = read(f, context)
    document = _verified_document(metadata, arrays, context)
    if document is None:
        return {name: relocate(make_tensor(array)) for name, array in arrays.items()}
    tensors = _tensor_objects(document["tensors"], arrays, relocate, context)
    numpy_arrays = _numpy_arrays(document.get("arrays", []), arrays, context)
    # NOTE: only an explicit False opts in; None is PyTorch's "default", which is True.
    decoder = Decoder(tensors, context, arrays=numpy_arrays, objects=weights_only is False)
    try:
        return decoder.decode(document["root"])
    except RecursionError:
        raise TideflowError(
            f"{context}: malformed checkpoint: the structure is nested too deeply"
        ) from None


def save_safetensors(
    tensors: Mapping[str, Tensor], f, metadata: Mapping[str, str] | None = None
) -> None:
    """Write a flat dict of tensors as a plain safetensors file (the format of
    `safetensors.torch.save_file`), readable by any safetensors loader; `metadata` is an
    optional str -> str map stored in the header. Saving to a path is atomic.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> flow.io.save_safetensors({"fc.weight": flow.ones(2, 3)}, path)
    >>> flow.io.load_safetensors(path)["fc.weight"].shape
    tideflow.Size([2, 3])
    """
    context = f"save_safetensors({describe(f)})"
    if not isinstance(tensors, Mapping):
        raise TypeError(f"{context}: expected a dict of tensors, got {type(tensors).__name__}")
    for name, t in tensors.items():
        if type(name) is not str or not isinstance(t, Tensor):
            raise TideflowError(
                f"{context}: a safetensors file maps str names to tensors, got "
                f"{type(name).__name__} {name!r:.80} -> {type(t).__name__} (use flow.save for "
                "nested objects)"
            )
    metadata = dict(metadata or {})
    for key, value in metadata.items():
        if type(key) is not str or type(value) is not str:
            raise TideflowError(
                f"{context}: metadata must map str to str, got {key!r:.80}: {value!r:.80}"
            )
        if key in (_DOCUMENT_KEY, _CHECKSUM_KEY):
            raise TideflowError(f"{context}: metadata key {key!r} is reserved for flow.save")
    write({name: t._data for name, t in tensors.items()}, metadata, f, context)


def load_safetensors(f) -> dict[str, Tensor]:
    """Every tensor of a safetensors file by name, as `safetensors.torch.load_file`. For a
    file written by `flow.save` these are its stored tensors (checksum verified).

    >>> import io
    >>> buffer = io.BytesIO()
    >>> flow.io.save_safetensors({"bias": flow.zeros(2)}, buffer)
    >>> _ = buffer.seek(0)
    >>> list(flow.io.load_safetensors(buffer))
    ['bias']
    """
    context = f"load_safetensors({describe(f)})"
    arrays, metadata = read(f, context)
    _verified_document(metadata, arrays, context)
    return {name: make_tensor(array) for name, array in arrays.items()}


def _tensor_table(tensors: list[Tensor], names: list[str]):
    """A record per tensor object, and an array per distinct view of memory (same address,
    shape, strides and dtype): tied weights and `t` / `t.detach()` are stored once."""
    records, arrays = [], {}
    stored_as: dict[tuple, str] = {}
    for t, name in zip(tensors, names, strict=True):
        a = t._data
        data = stored_as.setdefault((a.ctypes.data, a.shape, a.strides, a.dtype), name)
        kind = "Parameter" if isinstance(t, Parameter) else "Tensor"
        record = {"data": data, "type": kind, "requires_grad": t.requires_grad}
        stored = as_contiguous(a)
        if a.dtype.name in _PAIRED:
            record["dtype"] = a.dtype.name
            stored = stored.reshape(-1).view(_PAIRED[a.dtype.name][1]).reshape(*a.shape, 2)
        if data == name:
            arrays[name] = stored
        records.append(record)
    return records, arrays


def _checksum(document: str, arrays: Mapping[str, np.ndarray]) -> str:
    crc = zlib.crc32(document.encode())
    for name in sorted(arrays):
        a = arrays[name]
        crc = zlib.crc32(json.dumps([name, str(a.dtype), a.shape]).encode(), crc)
        crc = zlib.crc32(a.reshape(-1).view(np.uint8), crc)
    return f"{crc:08x}"


def _reject_constant(name: str):
    raise ValueError(f"non-standard JSON constant {name}")


def _verified_document(metadata: Mapping[str, str], arrays, context: str) -> dict | None:
    """The checkpoint document of a tideflow file after its checksum passed; None for a
    plain safetensors file."""
    found = [key for key in (_DOCUMENT_KEY, _CHECKSUM_KEY) if key in metadata]
    if not found:
        return None
    if len(found) == 1:
        missing = ({_DOCUMENT_KEY, _CHECKSUM_KEY} - set(found)).pop()
        raise TideflowError(f"{context}: corrupt checkpoint: metadata entry {missing!r} is missing")
    stored, computed = metadata[_CHECKSUM_KEY], _checksum(metadata[_DOCUMENT_KEY], arrays)
    if stored != computed:
        raise TideflowError(
            f"{context}: checksum mismatch (stored crc32 {stored!r:.20}, computed {computed!r}): "
            "the file was modified or corrupted after it was written"
        )
    try:
        document = json.loads(metadata[_DOCUMENT_KEY], parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        raise TideflowError(f"{context}: malformed checkpoint document: {e}") from None
    if type(document) is not dict or not (
        _DOCUMENT_FIELDS <= set(document) <= _DOCUMENT_FIELDS | _OPTIONAL_FIELDS
    ):
        raise TideflowError(
            f"{context}: malformed checkpoint document: expected the fields "
            f"{sorted(_DOCUMENT_FIELDS)} (and optionally {sorted(_OPTIONAL_FIELDS)}), got "
            f"{document!r:.120}"
        )
    if document["version"] != FORMAT_VERSION:
        raise TideflowError(
            f"{context}: checkpoint format version {document['version']!r:.20} is not "
            f"supported; this tideflow reads version {FORMAT_VERSION} (was the file written by "
            "a newer tideflow?)"
        )
    return document


def _tensor_objects(
    records, arrays: dict[str, np.ndarray], relocate: Callable[[Tensor], Tensor], context: str
) -> list[Tensor]:
    """The tensor objects of the table: each its own Tensor over the stored data, which is
    relocated once however many tensors share it."""
    if type(records) is not list:
        raise TideflowError(f"{context}: malformed checkpoint: the tensor table is not a list")
    stored: dict[tuple[str, str | None], Tensor] = {}
    tensors = []
    for i, record in enumerate(records):
        try:
            tensors.append(_tensor_object(record, arrays, stored, relocate))
        except TideflowError as e:
            raise TideflowError(
                f"{context}: malformed checkpoint: tensor record {i} {record!r:.120}: {e}"
            ) from None
    return tensors


def _tensor_object(record, arrays, stored: dict[tuple, Tensor], relocate) -> Tensor:
    if not (
        type(record) is dict
        and _RECORD_FIELDS <= set(record) <= _RECORD_FIELDS | {"dtype"}
        and type(record["data"]) is str
        and record["data"] in arrays
        and record["type"] in ("Tensor", "Parameter")
        and type(record["requires_grad"]) is bool
        and record.get("dtype") in (None, *_PAIRED)
    ):
        raise TideflowError(
            f"expected the fields {sorted(_RECORD_FIELDS)} naming stored data (and optionally "
            f"a dtype among {sorted(_PAIRED)})"
        )
    key = (record["data"], record.get("dtype"))
    if key not in stored:
        stored[key] = relocate(make_tensor(_unpaired(arrays[key[0]], key[1])))
    t = make_tensor(stored[key]._data)
    if record["type"] == "Parameter":
        return Parameter(t, requires_grad=record["requires_grad"])
    return t.requires_grad_(True) if record["requires_grad"] else t


def _unpaired(array: np.ndarray, dtype: str | None) -> np.ndarray:
    """The stored `array` as a tensor's data of `dtype` (None: as it is)."""
    if dtype is None:
        return array
    wanted, parts = _PAIRED[dtype]
    if array.dtype != parts or array.ndim == 0 or array.shape[-1] != 2:
        raise TideflowError(
            f"a {dtype} tensor is stored as {np.dtype(parts)} pairs (shape [..., 2]), got "
            f"{array.dtype} {list(array.shape)}"
        )
    return array.view(wanted)[..., 0]


def _numpy_arrays(records, arrays: dict[str, np.ndarray], context: str) -> list[np.ndarray]:
    if type(records) is not list:
        raise TideflowError(f"{context}: malformed checkpoint: the array table is not a list")
    out = []
    for i, record in enumerate(records):
        try:
            out.append(_numpy.rebuild(record, arrays))
        except _numpy.BadArray as e:
            raise TideflowError(
                f"{context}: malformed checkpoint: array record {i} {record!r:.120}: {e}"
            ) from None
    return out


def _relocation(map_location, context: str) -> Callable[[Tensor], Tensor]:
    """`map_location` as a function of one stored tensor, whose saved location is 'cpu'."""
    if map_location is None:
        return lambda t: t
    if isinstance(map_location, str | Device):
        target = Device(map_location)
        return lambda t: t.to(target)
    if isinstance(map_location, dict):
        target = Device(map_location.get("cpu", "cpu"))
        return lambda t: t.to(target)
    if callable(map_location):

        def call(t: Tensor) -> Tensor:
            moved = map_location(t, "cpu")
            if moved is None:
                return t
            if not isinstance(moved, Tensor):
                raise TypeError(
                    f"{context}: map_location returned {type(moved).__name__}; it must "
                    "return a tensor or None"
                )
            return moved

        return call
    raise TypeError(
        f"{context}: map_location must be None, a str, a tideflow.device, a dict or a "
        f"callable, got {type(map_location).__name__}"
    )
