"""Checkpoints: `save` / `load` of nested state (tensors in safetensors, structure as JSON,
never pickle), sharded checkpoints of global tensors (a directory, one file per rank), and
plain safetensors files of flat tensor dicts; the classes trusted in `weights_only=True`
loads (`add_safe_globals`, as `torch.serialization`)."""

from . import sharded
from ._allowlist import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals
from ._checkpoint import load, load_safetensors, save, save_safetensors

__all__ = [
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "load",
    "load_safetensors",
    "safe_globals",
    "save",
    "save_safetensors",
    "sharded",
]
