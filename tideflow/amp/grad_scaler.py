"""`flow.amp.GradScaler`: dynamic loss scaling for float16 training.

Multiply the loss by a scale before backward so small gradients survive in float16; before
the optimizer step, divide the gradients back and skip the step if any is inf/NaN. The scale
halves after an overflow and doubles after `growth_interval` clean steps (PyTorch's rules).
"""

from __future__ import annotations

import math
from enum import Enum

from ..framework.errors import TideflowError
from ..framework.grad_mode import no_grad
from ..framework.tensor import Tensor
from ..ops.unary import isfinite


class _Stage(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


class GradScaler:
    """>>> scaler = flow.amp.GradScaler()
    >>> scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()"""

    def __init__(self, device: str = "cpu", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:  # fmt: skip
        if growth_factor <= 1.0 or not 0.0 < backoff_factor < 1.0:
            raise TideflowError("GradScaler: need growth_factor > 1 and 0 < backoff_factor < 1")
        self._enabled = enabled
        self._scale = float(init_scale)
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._per_optimizer: dict[int, dict] = {}

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def scale(self, outputs):
        """`outputs * scale` for a tensor or any nesting of lists/tuples of tensors."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, list | tuple):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TideflowError(f"GradScaler.scale: expected tensors, got {type(outputs).__name__}")

    def _state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(
            id(optimizer), {"stage": _Stage.READY, "found_inf": False}
        )

    @no_grad()
    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale and record whether any is inf/NaN."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] is _Stage.UNSCALED:
            raise TideflowError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        if state["stage"] is _Stage.STEPPED:
            raise TideflowError("unscale_() is being called after step().")
        inv = 1.0 / self._scale
        found = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.grad.mul_(inv)
                found = found or not bool(isfinite(p.grad).all())
        state["found_inf"] = found
        state["stage"] = _Stage.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """`optimizer.step()` unless the unscaled gradients hold inf/NaN (then skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        state = self._state(optimizer)
        if state["stage"] is _Stage.STEPPED:
            raise TideflowError("step() has already been called since the last update().")
        if state["stage"] is _Stage.READY:
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _Stage.STEPPED
        return result

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back off after an overflow, grow after `growth_interval` clean steps."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        else:
            if not self._per_optimizer:
                raise TideflowError("No inf checks were recorded prior to update().")
            if any(s["found_inf"] for s in self._per_optimizer.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = self._scale * self._growth_factor
                    self._scale = grown if math.isfinite(grown) else self._scale
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {
            "scale": self._scale,
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if not state_dict:
            raise TideflowError("GradScaler.load_state_dict: the state dict is empty")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
