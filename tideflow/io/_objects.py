"""Whole objects in a checkpoint (`torch.save(model, f)`), without pickle.

An object is stored as its class's qualified name and its `__dict__` (encoded like any other
value: tensors, submodules, plain data); a class kept as a value (ResNet's `norm_layer`) and
a function a layer keeps (a TransformerEncoderLayer's activation) as their qualified names.
Loading names back into classes is where pickle runs code, so here it
- finds a name only in modules already imported (`sys.modules`), reading module and class
  dicts directly so that no module `__getattr__` runs, and never imports a module a file names;
- accepts only plain classes: written in Python, instances made by `object.__new__` with their
  whole state in `__dict__` (no built-in base, `__slots__`, custom `__new__` or `__del__`);
- builds an instance with `object.__new__(cls)` and fills its `__dict__`: no `__init__`,
  `__setstate__`, `__reduce__` or other hook runs;
- accepts functions of tideflow's own modules only: any other function would be code the file
  chooses for the program to call.
So a file chooses data, and which already-loaded plain class holds it, never code to run.
"""

from __future__ import annotations

import struct
import sys
import types

_NO_STATE_SLOTS = {"__dict__", "__weakref__"}


class NotRestorable(Exception):
    """Why a class or function cannot be stored or rebuilt; callers add the file and place."""


def class_name(cls: type) -> str:
    """The name a file stores for an instance of `cls`, once `cls` has passed every check
    `find_class` makes on loading (so that what saves, loads)."""
    _check_plain(cls)
    name = _qualified(cls)
    if "<locals>" in name:
        raise NotRestorable(f"{name} is defined inside a function, so no name can find it")
    if _lookup(name) is not cls:
        raise NotRestorable(f"{name} cannot be found again under its name")
    return name


def function_name(fn: types.FunctionType) -> str:
    name = _qualified(fn)
    _check_own_function(fn, name)
    if _lookup(name) is not fn:
        raise NotRestorable(f"function {name} cannot be found again under its name")
    return name


def find_class(name) -> type:
    """The plain class a file names as 'module:qualname', from the modules already imported."""
    cls = _lookup(name)
    if not isinstance(cls, type):
        raise NotRestorable(f"{name} is a {type(cls).__name__}, not a class")
    if _qualified(cls) != name:
        raise NotRestorable(f"{name} is another name of {_qualified(cls)}")
    _check_plain(cls)
    return cls


def find_function(name) -> types.FunctionType:
    fn = _lookup(name)
    if type(fn) is not types.FunctionType:
        raise NotRestorable(f"{name} is a {type(fn).__name__}, not a Python function")
    if _qualified(fn) != name:
        raise NotRestorable(f"{name} is another name of {_qualified(fn)}")
    _check_own_function(fn, name)
    return fn


def new_object(cls: type):
    """A bare instance of a class `find_class` returned (no `__init__`), for the caller to
    fill its `__dict__`."""
    return object.__new__(cls)


def _qualified(obj) -> str:
    return f"{obj.__module__}:{obj.__qualname__}"


def _lookup(name):
    if type(name) is not str or name.count(":") != 1:
        raise NotRestorable(f"{name!r:.120} is not a 'module:qualname' name")
    module_name, qualname = name.split(":")
    module = sys.modules.get(module_name)
    if module is None:
        raise NotRestorable(
            f"module {module_name!r:.120} is not imported (a checkpoint never makes tideflow "
            "import a module: import it before loading)"
        )
    obj = module
    for part in qualname.split("."):
        # NOTE: through __dict__, not getattr: a module's or metaclass's __getattr__ is code.
        namespace = vars(obj) if isinstance(obj, types.ModuleType | type) else {}
        if part not in namespace:
            raise NotRestorable(f"{name} does not exist in the imported modules")
        obj = namespace[part]
    return obj


def _check_plain(cls: type) -> None:
    for base in reversed(cls.__mro__[:-1]):  # from the most basic, `object` left out
        if not _plain_layout(base):
            slots = base.__dict__.get("__slots__", ())
            if set([slots] if isinstance(slots, str) else slots) - _NO_STATE_SLOTS:
                raise NotRestorable(f"{base.__qualname__} keeps state in __slots__")
            relation = "is" if base is cls else "derives from"
            raise NotRestorable(
                f"{cls.__qualname__} {relation} the built-in type {base.__qualname__}, whose "
                "state lives outside __dict__"
            )
        for hook in ("__new__", "__del__"):
            if hook in base.__dict__:
                raise NotRestorable(
                    f"{base.__qualname__} defines {hook}, which would run on the file's data"
                )
    if cls.__dictoffset__ == 0:
        raise NotRestorable(f"{cls.__qualname__} instances have no __dict__ to hold their state")


def _plain_layout(cls: type) -> bool:
    """Whether instances of `cls` are laid out as `object`'s plus a `__dict__` and a weak
    reference list, the only fields a class statement without `__slots__` adds: any other
    field is state of a built-in type or of `__slots__`, which `__dict__` does not hold."""
    pointer = struct.calcsize("P")
    fields = (cls.__dictoffset__ > 0) + (cls.__weakrefoffset__ > 0)  # <= 0: none, or managed
    return cls.__itemsize__ == 0 and cls.__basicsize__ == object.__basicsize__ + fields * pointer


def _check_own_function(fn, name: str) -> None:
    module = fn.__module__ or ""
    if module != "tideflow" and not module.startswith("tideflow."):
        raise NotRestorable(
            f"function {name} is not tideflow's: only tideflow's own functions (like "
            "nn.functional.relu) are stored, by name, since any other would be code the file "
            "chooses"
        )
