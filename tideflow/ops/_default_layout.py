"""The layout of tensors that creators make when the call names none: local, or the
placement and sbp of the innermost enclosing `flow.utils.global_view.global_mode` of this
thread (OneFlow's source ops follow its global mode)."""

from __future__ import annotations

import threading


class _DefaultLayout(threading.local):
    def __init__(self) -> None:
        self.layout: tuple | None = None  # (placement, sbp) inside an enabled global_mode


DEFAULT = _DefaultLayout()
