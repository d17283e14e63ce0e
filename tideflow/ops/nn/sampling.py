"""nn.functional sampling ops."""

from __future__ import annotations

__all__: list[str] = []
