"""A checkpoint's object tree as JSON, with tensors replaced by indices into a table.

JSON's own null, true/false, integers, finite floats and strings stand for themselves. Every
other value is an object with exactly one key, its tag:

    {"tensor": 3}             the table's tensor 3 (one index per tensor object)
    {"list": [...]}  {"tuple": [...]}  {"set": [...]}
    {"dict": [[key, value], ...]}  {"odict": [...]}  {"counter": [...]}   keys are values too
    {"defaultdict": ["dict", [[key, value], ...]]}   the default factory by name (or null)
    {"float": "nan" | "inf" | "-inf"}  {"complex": [re, im]}  {"bytes": "<hex>"}
    {"dtype": "bfloat16"}  {"device": "cpu"}  {"size": [2, 3]}
    {"ndarray": 0}            the array table's NumPy array 0 (see `_numpy`)
    {"numpy_scalar": ["<f4", "<hex>"]}
    {"object": {"id": 0, "class": "module:Qualname", "attrs": [[name, value], ...]}}
    {"ref": 0}                the object with id 0 again (shared submodules, cycles)
    {"function": "tideflow.ops.activation:relu"}
    {"class": "tideflow.nn.modules.batchnorm:BatchNorm2d"}   a class as a value (ResNet's
                              norm_layer), under the rules of classes of objects

So dict keys keep their types (0 stays an int), tuples stay tuples, OrderedDicts stay
ordered and Counters (MultiStepLR's milestones) stay Counters. Decoding builds only these
types, plus, when the caller opts in, objects of plain classes already imported (see
`_objects`): a file describes data and can name no code to run.
"""

from __future__ import annotations

import math
import types
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from ..framework import dtype as dtypes
from ..framework.device import device as Device
from ..framework.errors import DeviceError, TideflowError
from ..framework.tensor import Size, Tensor
from . import _allowlist, _numpy, _objects

_CONTAINER_TAGS = {
    list: "list",
    tuple: "tuple",
    set: "set",
    dict: "dict",
    OrderedDict: "odict",
    Counter: "counter",
}
_MAPPING_TAGS = ("dict", "odict", "counter")
# A defaultdict's factory is code, so it is named from this closed set (optimizer.state is a
# defaultdict(dict)).
_DEFAULT_FACTORIES = {f.__name__: f for f in (dict, list, set, int, float, OrderedDict)}
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_DTYPES = {d.name: d for d in dtypes.ALL}
_SAVABLE = (
    "tensors, NumPy arrays and scalars, None, bool, int, float, complex, str, bytes, dtypes, "
    "devices, Size, list/tuple/set/dict/OrderedDict/Counter/defaultdict of them, and objects "
    "of plain Python classes (whole modules) holding them"
)


class Attribute(str):
    """A path step into an object's attribute, not a container key."""


def where(path: tuple) -> str:
    """A location in the saved object, as Python would reach it: obj.fc['weight'][0]."""
    return "obj" + "".join(f".{key}" if type(key) is Attribute else f"[{key!r}]" for key in path)


# A module's tables of parameters, buffers and submodules: left out of stored tensors' names,
# so a module saved whole names its tensors as its state_dict does ('fc.weight').
_MODULE_TABLES = {"_parameters", "_buffers", "_modules"}


def _dotted(path: tuple) -> str:
    return ".".join(str(k) for k in path if not (type(k) is Attribute and k in _MODULE_TABLES))


def _float_node(x: float):
    return x if math.isfinite(x) else {"float": repr(x)}


class Encoder:
    """Turns an object into a JSON node, collecting its tensors (each object once) and a
    readable, unique safetensors name for each from where it was first met."""

    def __init__(self, context: str) -> None:
        self.context = context
        self.tensors: list[Tensor] = []
        self.names: list[str] = []
        self.arrays: list[np.ndarray] = []
        self.array_names: list[str] = []
        self.objects = 0  # how many objects (`{"object": ...}` nodes) were encoded
        self._index: dict[int, int] = {}
        self._array_index: dict[int, int] = {}
        self._object_id: dict[int, int] = {}
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
        if kind is np.ndarray:
            return {"ndarray": self._numpy_array_index(obj, path)}
        if isinstance(obj, np.generic):
            return {"numpy_scalar": self._checked(_numpy.scalar_node, obj, path)}
        if kind is types.FunctionType:
            return {"function": self._checked(_objects.function_name, obj, path)}
        if isinstance(obj, type):
            return {"class": self._checked(_objects.class_name, obj, path)}
        tag = _CONTAINER_TAGS.get(kind)
        if kind is defaultdict:
            factory = self._factory_name(obj, path)
            return {"defaultdict": [factory, self._contents(obj, "dict", path)]}
        if tag is None:
            return self._object(obj, path)
        return {tag: self._contents(obj, tag, path)}

    def _factory_name(self, d: defaultdict, path: tuple) -> str | None:
        name = getattr(d.default_factory, "__qualname__", None)
        if d.default_factory is None or _DEFAULT_FACTORIES.get(name) is d.default_factory:
            return name
        raise TideflowError(
            f"{self.context}: cannot save the defaultdict at {where(path)}: its default_factory "
            f"{name or type(d.default_factory).__qualname__!s:.80} is none of None, "
            f"{', '.join(_DEFAULT_FACTORIES)} (a factory is code, so it is saved by name)"
        )

    def _contents(self, obj, tag: str, path: tuple) -> list:
        if id(obj) in self._open:
            raise TideflowError(
                f"{self.context}: the {type(obj).__name__} at {where(path)} contains itself; "
                "a checkpoint cannot hold a reference cycle"
            )
        self._open.add(id(obj))
        try:
            if tag in _MAPPING_TAGS:
                return [[self.encode(k, path), self.encode(v, (*path, k))] for k, v in obj.items()]
            return [self.encode(v, (*path, i)) for i, v in enumerate(obj)]
        finally:
            self._open.discard(id(obj))

    def _tensor_index(self, t: Tensor, path: tuple) -> int:
        index = self._index.get(id(t))
        if index is None:
            index = self._index[id(t)] = len(self.tensors)
            self.tensors.append(t)
            self.names.append(self._unique_name(_dotted(path) or "tensor"))
        return index

    def _numpy_array_index(self, a: np.ndarray, path: tuple) -> int:
        index = self._array_index.get(id(a))
        if index is None:
            self._checked(_numpy.check_savable, a, path, a.dtype)
            index = self._array_index[id(a)] = len(self.arrays)
            self.arrays.append(a)
            self.array_names.append(self._unique_name(_dotted(path) or "array"))
        return index

    def _object(self, obj, path: tuple) -> dict:
        known = self._object_id.get(id(obj))
        if known is not None:
            return {"ref": known}
        name = self._checked(_objects.class_name, obj, path, type(obj))
        # Registered before its attributes, so that an attribute leading back to it is a ref.
        self._object_id[id(obj)] = index = self.objects
        self.objects += 1
        attrs = []
        for key, value in vars(obj).items():
            if type(key) is not str:
                raise TideflowError(
                    f"{self.context}: cannot save the attribute {key!r:.80} of {where(path)}: "
                    "attribute names must be str"
                )
            attrs.append([key, self.encode(value, (*path, Attribute(key)))])
        return {"object": {"id": index, "class": name, "attrs": attrs}}

    def _checked(self, check: Callable, obj, path: tuple, arg=None):
        """`check(arg)` (default: `obj`), its refusal told as a TideflowError about `obj`."""
        try:
            return check(obj if arg is None else arg)
        except (_objects.NotRestorable, _numpy.BadArray) as e:
            kind = type(obj)
            raise TideflowError(
                f"{self.context}: cannot save the {kind.__module__}.{kind.__qualname__} at "
                f"{where(path)}: {e}. A checkpoint holds {_SAVABLE}, so that loading it runs "
                "no code"
            ) from None

    def _unique_name(self, base: str) -> str:
        name, n = base, 0
        while name in self._used_names:
            n += 1
            name = f"{base}#{n}"
        self._used_names.add(name)
        return name


class Decoder:
    """Rebuilds the object from a JSON node, taking tensors from `tensors` and NumPy arrays
    from `arrays` by index. Objects and functions are rebuilt only with `objects=True` (the
    caller's `weights_only=False`) or when allowlisted (`_allowlist`). Anything outside the
    format raises a TideflowError naming the location."""

    def __init__(
        self,
        tensors: list[Tensor],
        context: str,
        *,
        arrays: list[np.ndarray] | None = None,
        objects: bool = False,
    ) -> None:
        self.tensors = tensors
        self.arrays = arrays or []
        self.context = context
        self.objects_allowed = objects
        self.objects: list = []  # by id, in the order the file opens them

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

    def _ndarray(self, payload, path: tuple) -> np.ndarray:
        self._expect(
            type(payload) is int and 0 <= payload < len(self.arrays),
            path,
            f"array index {payload!r:.80} is not in the table of {len(self.arrays)} arrays",
        )
        return self.arrays[payload]

    def _numpy_scalar(self, payload, path: tuple) -> np.generic:
        try:
            return _numpy.scalar(payload)
        except _numpy.BadArray as e:
            raise self._malformed(path, f"bad NumPy scalar: {e}") from None

    def _object(self, payload, path: tuple):
        ok = type(payload) is dict and set(payload) == {"id", "class", "attrs"}
        self._expect(ok, path, f"expected an object's id, class and attrs, got {payload!r:.80}")
        name = payload["class"]
        self._require_opt_in(f"a whole {name!r:.120} object", name, path)
        self._expect(
            type(payload["id"]) is int and payload["id"] == len(self.objects),
            path,
            f"object id {payload['id']!r:.20} out of order (expected {len(self.objects)})",
        )
        self._expect(type(payload["attrs"]) is list, path, "expected a list of attributes")
        obj = _objects.new_object(self._named(_objects.find_class, name, path))
        self.objects.append(obj)  # before its attributes: they may lead back to it
        # Filled directly: no __setattr__, __setstate__ or __getattribute__ of the class runs.
        state = object.__getattribute__(obj, "__dict__")
        for pair in payload["attrs"]:
            ok = type(pair) is list and len(pair) == 2 and type(pair[0]) is str
            self._expect(ok, path, f"expected [attribute name, value], got {pair!r:.80}")
            state[pair[0]] = self.decode(pair[1], (*path, Attribute(pair[0])))
        return obj

    def _ref(self, payload, path: tuple):
        # Only objects already rebuilt (so allowed) can be referred to.
        ok = type(payload) is int and 0 <= payload < len(self.objects)
        self._expect(ok, path, f"reference {payload!r:.20} to an object not yet defined")
        return self.objects[payload]

    def _class(self, payload, path: tuple) -> type:
        self._require_opt_in(f"the class {payload!r:.120}", payload, path)
        return self._named(_objects.find_class, payload, path)

    def _function(self, payload, path: tuple):
        self._require_opt_in(f"the function {payload!r:.120}", payload, path)
        return self._named(_objects.find_function, payload, path)

    def _require_opt_in(self, what: str, name, path: tuple) -> None:
        if not (self.objects_allowed or _allowlist.is_trusted(name)):
            raise TideflowError(
                f"{self.context}: the checkpoint holds {what} at {where(path)} (as "
                "torch.save(model, f) writes); loading objects is off by default, as with "
                "PyTorch's weights_only=True. Pass weights_only=False to rebuild it from its "
                "already imported class, or trust the class with flow.io.add_safe_globals "
                "(torch.serialization.add_safe_globals): no code from the file runs, but the "
                "file chooses which classes to fill, so do it only for files you trust"
            )

    def _named(self, find: Callable, name, path: tuple):
        try:
            return find(name)
        except _objects.NotRestorable as e:
            raise TideflowError(f"{self.context}: refused to rebuild {where(path)}: {e}") from None

    def _defaultdict(self, payload, path: tuple) -> defaultdict:
        ok = type(payload) is list and len(payload) == 2
        self._expect(ok, path, f"expected [factory, pairs], got {payload!r:.80}")
        name, pairs = payload
        ok = name is None or (type(name) is str and name in _DEFAULT_FACTORIES)
        self._expect(ok, path, f"unknown defaultdict factory {name!r:.80}")
        out = self._pairs(pairs, path, dict)
        return defaultdict(None if name is None else _DEFAULT_FACTORIES[name], out)

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
        "defaultdict": _defaultdict,
        "float": _float,
        "complex": _complex,
        "bytes": _bytes,
        "dtype": _dtype,
        "device": _device,
        "size": _size,
        "ndarray": _ndarray,
        "numpy_scalar": _numpy_scalar,
        "object": _object,
        "ref": _ref,
        "function": _function,
        "class": _class,
    }
