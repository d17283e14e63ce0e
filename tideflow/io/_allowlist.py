"""The classes and functions trusted in `weights_only=True` loads, as PyTorch's
`torch.serialization.add_safe_globals` (what PyTorch 2.6+ programs call to load their own
config objects). Naming a class here lets its objects load without `weights_only=False`; the
rules of `_objects` (already imported, plain class, no hook runs) hold either way.

Names are kept as PyTorch spells them, "module.qualname", so a program may also allowlist a
class by name without importing it; loading still needs it imported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

from ..framework.errors import ArgumentError

_trusted: dict[str, object] = {}  # "module.qualname" -> what the program passed


def add_safe_globals(safe_globals: Iterable) -> None:
    """Trust objects of these classes (and these functions) in `load(f)` with the default
    `weights_only=True`, as `torch.serialization.add_safe_globals`. Items are classes or
    functions, `(obj, "module.qualname")` pairs, or "module.qualname" strings.

    >>> import argparse
    >>> flow.io.add_safe_globals([argparse.Namespace])
    >>> "argparse.Namespace" in [f"{g.__module__}.{g.__qualname__}" for g in
    ...                          flow.io.get_safe_globals()]
    True
    >>> flow.io.clear_safe_globals()
    """
    for item in safe_globals:
        _trusted[_dotted_name(item)] = item


def get_safe_globals() -> list:
    """What `add_safe_globals` was given, in order."""
    return list(_trusted.values())


def clear_safe_globals() -> None:
    _trusted.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: Iterable) -> Iterator[None]:
    """`add_safe_globals` for the duration of a `with` block."""
    saved = dict(_trusted)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _trusted.clear()
        _trusted.update(saved)


def is_trusted(name) -> bool:
    """Whether a file's 'module:qualname' names an allowlisted class or function."""
    return type(name) is str and name.replace(":", ".", 1) in _trusted


def _dotted_name(item) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str):
        return item[1]
    module, qualname = getattr(item, "__module__", None), getattr(item, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(qualname, str)):
        raise ArgumentError(
            f"add_safe_globals: expected classes, functions, (obj, name) pairs or names, got "
            f"{type(item).__name__} {item!r:.80}"
        )
    return f"{module}.{qualname}"
