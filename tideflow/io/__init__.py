"""Checkpoints: `save` / `load` of nested state (tensors in safetensors, structure as JSON,
never pickle), sharded checkpoints of global tensors (a directory, one file per rank), and
plain safetensors files of flat tensor dicts."""

from . import sharded
from ._checkpoint import load, load_safetensors, save, save_safetensors

__all__ = ["load", "load_safetensors", "save", "save_safetensors", "sharded"]
