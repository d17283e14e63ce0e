from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Backend:
    """One device type's array world: `xp` is its NumPy-compatible module. Ops register
    their kernels for the device type (`OpDef.kernels`); `registry.kernel_for` picks one."""

    device_type: str
    xp: ModuleType


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
