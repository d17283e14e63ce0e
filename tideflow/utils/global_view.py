"""`flow.utils.global_view`: convert nested containers (state dicts, lists, tuples) of
tensors between local and global, and `global_mode`, in which creators make global tensors."""

from ..parallel.global_mode import current_global_mode, global_mode
from ..parallel.global_view import to_global, to_local

__all__ = ["current_global_mode", "global_mode", "to_global", "to_local"]
