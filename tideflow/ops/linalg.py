"""linalg ops."""

from __future__ import annotations

__all__: list[str] = []

# Functions published as `tideflow.linalg.<name>` (inv, solve, det, vector_norm, ...).
LINALG_NAMESPACE: dict = {}
