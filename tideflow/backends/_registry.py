from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Backend:
    """One device type's array world: `xp` is its NumPy-compatible module."""

    device_type: str
    xp: ModuleType
    array_type: type

    def asarray(self, obj: Any, dtype=None):
        return self.xp.asarray(obj, dtype=dtype)

    def to_numpy(self, array):
        return array if self.xp.__name__ == "numpy" else self.xp.asnumpy(array)


class BackendUnavailable(RuntimeError):
    pass


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> None:
    _BACKENDS[backend.device_type] = backend


def get_backend(device_type: str) -> Backend:
    try:
        return _BACKENDS[device_type]
    except KeyError:
        known = ", ".join(sorted(_BACKENDS))
        raise BackendUnavailable(
            f"no backend for device type {device_type!r} is available (have: {known})"
        ) from None
