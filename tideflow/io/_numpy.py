"""NumPy arrays and scalars in a checkpoint, loaded back with their exact type and dtype.

An array is a safetensors tensor of its own dtype when safetensors has that dtype (bool,
int8-64, uint8, float16-64, in native byte order), and otherwise its raw bytes as uint8 (uint16,
complex, big-endian, ...); its record in the document names the stored data, the NumPy dtype
string and the shape. A scalar (`np.float32(0.5)`) is small enough to sit in the document as
its dtype string and bytes. Only numeric dtypes are accepted: object arrays hold pointers,
which a file must never supply.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ._file import as_contiguous

# safetensors' dtypes that tideflow reads, in native byte order
_STORED_AS_IS = {np.dtype(t) for t in ["?", "i1", "u1", "i2", "i4", "i8", "f2", "f4", "f8"]}
_NUMERIC_DTYPE = re.compile(r"[<>|][biufc]\d{1,2}")  # how NumPy spells them: '<f4', '|b1'
_RECORD_FIELDS = {"data", "dtype", "shape"}


class BadArray(Exception):
    """What is wrong with an array or scalar; callers add the file and place."""


def check_savable(dtype: np.dtype) -> None:
    if not _NUMERIC_DTYPE.fullmatch(dtype.str):
        raise BadArray(f"its dtype {dtype.str} is not a number or bool dtype")


def stored_form(a: np.ndarray) -> np.ndarray:
    """What the file holds for `a` (C-contiguous): its values, or its bytes."""
    a = as_contiguous(a)
    return a if a.dtype in _STORED_AS_IS else a.reshape(-1).view(np.uint8)


def record(data_name: str, a: np.ndarray) -> dict:
    return {"data": data_name, "dtype": a.dtype.str, "shape": list(a.shape)}


def rebuild(entry, stored: dict[str, np.ndarray]) -> np.ndarray:
    """The array an `entry` of the document's array table describes, over its stored data."""
    if not (
        type(entry) is dict
        and set(entry) == _RECORD_FIELDS
        and type(entry["data"]) is str
        and entry["data"] in stored
    ):
        raise BadArray(f"expected the fields {sorted(_RECORD_FIELDS)} naming stored data")
    dtype, shape = _dtype(entry["dtype"]), entry["shape"]
    if not (type(shape) is list and all(type(n) is int and n >= 0 for n in shape)):
        raise BadArray(f"bad shape {shape!r:.80}")
    a = stored[entry["data"]]
    if a.dtype == dtype and list(a.shape) == shape:
        return a
    if a.dtype == np.uint8 and a.ndim == 1 and a.size == math.prod(shape) * dtype.itemsize:
        return a.view(dtype).reshape(shape)
    raise BadArray(
        f"the stored data is {a.dtype} {list(a.shape)}, which does not hold a {dtype} array "
        f"of shape {shape}"
    )


def scalar_node(x: np.generic) -> list:
    check_savable(x.dtype)
    return [x.dtype.str, x.tobytes().hex()]


def scalar(payload) -> np.generic:
    if not (type(payload) is list and len(payload) == 2 and type(payload[1]) is str):
        raise BadArray(f"expected [dtype, hex bytes], got {payload!r:.80}")
    dtype = _dtype(payload[0])
    try:
        data = bytes.fromhex(payload[1])
    except ValueError:
        raise BadArray(f"bad hex bytes {payload[1]!r:.80}") from None
    if len(data) != dtype.itemsize:
        raise BadArray(f"{len(data)} bytes cannot hold one {dtype}")
    return np.frombuffer(data, dtype=dtype)[0]


def _dtype(text) -> np.dtype:
    # NOTE: matched before NumPy parses it: np.dtype() also reads object and record dtypes.
    if type(text) is not str or not _NUMERIC_DTYPE.fullmatch(text):
        raise BadArray(f"{text!r:.40} is not a numeric NumPy dtype")
    try:
        return np.dtype(text)
    except TypeError:
        raise BadArray(f"{text!r:.40} is not a NumPy dtype of this platform") from None
