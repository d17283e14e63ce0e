"""`detect_anomaly`: record where each op was called and fail on the first NaN gradient."""

from __future__ import annotations

from ..framework.dispatch import ANOMALY


class detect_anomaly:
    """While active, a backward that produces NaN raises an error naming the op and showing the
    forward call that created it. `with flow.autograd.detect_anomaly(): loss.backward()`"""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self) -> None:
        self._prev = ANOMALY.enabled
        ANOMALY.enabled = self.check_nan

    def __exit__(self, *exc) -> None:
        ANOMALY.enabled = self._prev


class set_detect_anomaly(detect_anomaly):
    def __init__(self, mode: bool) -> None:
        super().__init__(mode)
        self._prev = ANOMALY.enabled
        ANOMALY.enabled = mode


def is_anomaly_enabled() -> bool:
    return ANOMALY.enabled
