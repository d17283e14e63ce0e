"""Utilities: `data` (datasets, samplers, DataLoader) and `global_view` (nested containers of
global tensors)."""

from . import data, global_view

__all__ = ["data", "global_view"]
