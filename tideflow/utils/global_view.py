"""`flow.utils.global_view`: convert nested containers (state dicts, lists, tuples) of
tensors between local and global."""

from ..parallel.global_view import to_global, to_local

__all__ = ["to_global", "to_local"]
