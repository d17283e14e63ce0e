"""Devices. A device names a backend ('cpu' -> NumPy, 'cuda' -> CuPy) and an index."""

from __future__ import annotations

from ..backends import BackendUnavailable, get_backend
from .errors import DeviceError


class device:
    __slots__ = ("index", "type")

    def __init__(self, type_or_str="cpu", index: int | None = None) -> None:
        if isinstance(type_or_str, device):
            type_or_str, index = type_or_str.type, type_or_str.index
        kind, _, idx = str(type_or_str).partition(":")
        if kind not in ("cpu", "cuda"):
            raise DeviceError(f"device: unknown device type {type_or_str!r} (use 'cpu' or 'cuda')")
        if idx:
            if index is not None:
                raise DeviceError(f"device: index given twice in {type_or_str!r} and {index}")
            index = int(idx)
        self.type = kind
        self.index = index

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (
            other.type,
            other.index,
        )

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        idx = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self.type}'{idx})"


CPU = device("cpu")


def check_available(dev) -> device:
    """The device, if a backend for it is installed; else a DeviceError naming it."""
    dev = device(dev)
    try:
        get_backend(dev.type)
    except BackendUnavailable as e:
        raise DeviceError(f"device {dev}: {e}") from None
    return dev
