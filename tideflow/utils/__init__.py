"""Utilities: `data` (datasets, samplers, DataLoader), `dlpack` (memory shared with other
array libraries) and `global_view` (nested containers of global tensors, global mode)."""

from . import data, dlpack, global_view

__all__ = ["data", "dlpack", "global_view"]
