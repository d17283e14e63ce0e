"""A checkpoint's object tree as JSON, with tensors replaced by indices into a table.

JSON's own null, true/false, integers, finite floats and strings stand for themselves. Every
other value is an object with exactly one key, its tag:

    {"tensor": 3}             the table's tensor 3 (one index per tensor object)
    {"list": [...]}  {"tuple": [...]}  {"set": [...]}
    {"dict": [[key, value], ...]}  {"odict": [...]}  {"counter": [...]}   keys are values too
    {"float": "nan" | "inf" | "-inf"}  {"complex": [re, im]}  {"bytes": "<hex>"}
    {"dtype": "bfloat16"}  {"device": "cpu"}  {"size": [2, 3]}

So dict keys keep their types (0 stays an int), tuples stay tuples, OrderedDicts stay
ordered and Counters (MultiStepLR's milestones) stay Counters. Decoding builds only these
types: a file describes data and can name no code.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import ClassVar

from ..framework import dtype as dtypes
from ..framework.device import device as Device
from ..framework.errors import DeviceError, TideflowError
from ..framework.tensor import Size, Tensor

_CONTAINER_TAGS = {
    list: "list",
    tuple: "tuple",
    set: "set",
    dict: "dict",
    OrderedDict: "odict",
    Counter: "counter",
}
_MAPPING_TAGS = ("dict", "odict", "counter")
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_DTYPES = {d.name: d for d in dtypes.ALL}
_SAVABLE = (
    "tensors, None, bool, int, float, complex, str, bytes, dtypes, devices, Size, and "
    "list/tuple/set/dict/OrderedDict/Counter of them"
)


def where(path: tuple) -> str:
    """A location in the saved object, as Python would index it: obj['state'][0]."""
    return "obj" + "".join(f"[{key!r}]" for key in path)


def _float_node(x: float):
    return x if math.isfinite(x) else {"float": repr(x)}


class Encoder:
    """Turns an object into a JSON node, collecting its tensors (each object once) and a
    readable, unique safetensors name for each from where it was first met."""

    def __init__(self, context: str) -> None:
        self.context = context
        self.tensors: list[Tensor] = []
        self.names: list[str] = []
        self._index: dict[int, int] = {}
        self._used_names = {"__metadata__"}  # reserved by the safetensors header
        self._open: set[int] = set()  # ids of the containers being encoded: a repeat is a cycle

    def encode(self, obj, path: tuple = ()):
        kind = type(obj)
        # Exact types: subclasses (IntEnum, numpy scalars, namedtuples) would not come back.
        if obj is None or kind is bool or kind is int or kind is str:
            return obj
        if kind is float:
            return _float_node(obj)
        if isinstance(obj, Tensor):
            return {"tensor": self._tensor_index(obj, path)}
        if kind is complex:
            return {"complex": [_float_node(obj.real), _float_node(obj.imag)]}
        if kind is bytes:
            return {"bytes": obj.hex()}
        if kind is dtypes.DType:
            return {"dtype": obj.name}
        if kind is Device:
            return {"device": str(obj)}
        if kind is Size:
            return {"size": list(obj)}
        tag = _CONTAINER_TAGS.get(kind)
        if tag is None:
            hint = " (save its state_dict() instead)" if hasattr(obj, "state_dict") else ""
            raise TideflowError(
                f"{self.context}: cannot save a {kind.__module__}.{kind.__qualname__} object at "
                f"{where(path)}{hint}: a checkpoint holds only {_SAVABLE} (loading never runs "
                "code, so arbitrary objects cannot be stored)"
            )
        if id(obj) in self._open:
            raise TideflowError(
                f"{self.context}: the {kind.__name__} at {where(path)} contains itself; "
                "a checkpoint cannot hold a reference cycle"
            )
        self._open.add(id(obj))
        try:
            if tag in _MAPPING_TAGS:
                payload = [
                    [self.encode(k, path), self.encode(v, (*path, k))] for k, v in obj.items()
                ]
            else:
                payload = [self.encode(v, (*path, i)) for i, v in enumerate(obj)]
        finally:
            self._open.discard(id(obj))
        return {tag: payload}

    def _tensor_index(self, t: Tensor, path: tuple) -> int:
        index = self._index.get(id(t))
        if index is None:
            index = self._index[id(t)] = len(self.tensors)
            self.tensors.append(t)
            self.names.append(self._unique_name(".".join(map(str, path)) or "tensor"))
        return index

    def _unique_name(self, base: str) -> str:
        name, n = base, 0
        while name in self._used_names:
            n += 1
            name = f"{base}#{n}"
        self._used_names.add(name)
        return name


class Decoder:
    """Rebuilds the object from a JSON node, taking tensors from `tensors` by index. Anything
    outside the format raises a TideflowError naming the location."""

    def __init__(self, tensors: list[Tensor], context: str) -> None:
        self.tensors = tensors
        self.context = context

    def decode(self, node, path: tuple = ()):
        kind = type(node)
        if node is None or kind in (bool, int, float, str):
            return node
        if kind is not dict or len(node) != 1:
            problem = f"expected a value or a one-key tagged object, got {node!r:.80}"
            raise self._malformed(path, problem)
        ((tag, payload),) = node.items()
        rule = self._RULES.get(tag)
        if rule is None:
            raise TideflowError(
                f"{self.context}: malformed checkpoint: unknown structure tag {tag!r} at "
                f"{where(path)} (known: {', '.join(self._RULES)})"
            )
        return rule(self, payload, path)

    def _malformed(self, path: tuple, problem: str) -> TideflowError:
        return TideflowError(f"{self.context}: malformed checkpoint at {where(path)}: {problem}")

    def _expect(self, ok: bool, path: tuple, problem: str) -> None:
        if not ok:
            raise self._malformed(path, problem)

    def _items(self, payload, path: tuple) -> list:
        self._expect(type(payload) is list, path, f"expected a JSON array, got {payload!r:.80}")
        return [self.decode(v, (*path, i)) for i, v in enumerate(payload)]

    def _pairs(self, payload, path: tuple, container: type) -> dict:
        self._expect(type(payload) is list, path, f"expected a JSON array, got {payload!r:.80}")
        out = container()
        for pair in payload:
            self._expect(type(pair) is list and len(pair) == 2, path, "expected [key, value]")
            key = self.decode(pair[0], path)
            try:
                hash(key)
            except TypeError:
                raise self._malformed(path, f"unhashable dict key {key!r:.80}") from None
            out[key] = self.decode(pair[1], (*path, key))
        return out

    def _tensor(self, payload, path: tuple) -> Tensor:
        self._expect(
            type(payload) is int and 0 <= payload < len(self.tensors),
            path,
            f"tensor index {payload!r:.80} is not in the table of {len(self.tensors)} tensors",
        )
        return self.tensors[payload]

    def _float(self, payload, path: tuple) -> float:
        ok = type(payload) is str and payload in _NONFINITE
        self._expect(ok, path, f"bad non-finite float {payload!r:.80}")
        return _NONFINITE[payload]

    def _complex(self, payload, path: tuple) -> complex:
        self._expect(type(payload) is list and len(payload) == 2, path, "expected [re, im]")
        re, im = (self.decode(v, path) for v in payload)
        self._expect(type(re) is float and type(im) is float, path, "expected float parts")
        return complex(re, im)

    def _bytes(self, payload, path: tuple) -> bytes:
        try:
            return bytes.fromhex(payload)
        except (TypeError, ValueError):
            raise self._malformed(path, f"bad hex bytes {payload!r:.80}") from None

    def _dtype(self, payload, path: tuple) -> dtypes.DType:
        ok = type(payload) is str and payload in _DTYPES
        self._expect(ok, path, f"unknown dtype {payload!r:.80}")
        return _DTYPES[payload]

    def _device(self, payload, path: tuple) -> Device:
        try:
            if type(payload) is str:
                return Device(payload)
        except (DeviceError, ValueError):
            pass
        raise self._malformed(path, f"bad device {payload!r:.80}")

    def _size(self, payload, path: tuple) -> Size:
        ok = type(payload) is list and all(type(d) is int and d >= 0 for d in payload)
        self._expect(ok, path, f"bad Size {payload!r:.80}")
        return Size(payload)

    def _set(self, payload, path: tuple) -> set:
        try:
            return set(self._items(payload, path))
        except TypeError:
            raise self._malformed(path, "unhashable set element") from None

    _RULES: ClassVar[dict[str, Callable]] = {  # tag -> rule(self, payload, path)
        "tensor": _tensor,
        "list": _items,
        "tuple": lambda self, payload, path: tuple(self._items(payload, path)),
        "set": _set,
        "dict": lambda self, payload, path: self._pairs(payload, path, dict),
        "odict": lambda self, payload, path: self._pairs(payload, path, OrderedDict),
        "counter": lambda self, payload, path: self._pairs(payload, path, Counter),
        "float": _float,
        "complex": _complex,
        "bytes": _bytes,
        "dtype": _dtype,
        "device": _device,
        "size": _size,
    }
