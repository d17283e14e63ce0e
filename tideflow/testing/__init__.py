"""Test support: the op database (`op_db.OP_DB`), oracle helpers and SBP simulation."""

from .opinfo import OpInfo, Sample

__all__ = ["OpInfo", "Sample"]
