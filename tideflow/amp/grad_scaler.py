"""`flow.amp.GradScaler`: dynamic loss scaling for float16 training; `StaticGradScaler`: a fixed
one.

Multiply the loss by a scale before backward so small gradients survive in float16; before
the optimizer step, divide the gradients back and skip the step if any is inf/NaN. The scale
halves after an overflow and doubles after `growth_interval` clean steps (PyTorch's rules).

The scale and the growth tracker are 0-d tensors, and unscaling and the scale update are
tensor ops (`_unscale_grads_`, `_update_scale_`): an `nn.Graph` given the scaler
(`set_grad_scaler`) registers the tensors as variables of its plan and traces the same two
methods, so graph and eager code share one rule and `get_scale()` shows the graph's scale.

With global parameters each rank checks its own shards of the gradients, and the ranks then
agree: the flag is all-reduced (a MAX) over every rank that holds a part of the step (the
parameters' placements and the scaled losses'), so an overflow in one rank's shard skips the
step and backs the scale off on all of them. The scale and the tracker stay plain tensors of
each rank: updated from the same flags, they stay equal on every rank.
"""

from __future__ import annotations

from enum import Enum

from ..distributed.world import get_world
from ..framework import dtype as dtypes
from ..framework.errors import TideflowError
from ..framework.grad_mode import no_grad
from ..framework.tensor import Tensor
from ..ops.binary import where
from ..ops.creation import tensor
from ..ops.shape import stack
from ..ops.unary import isfinite, logical_not
from ..parallel.agreement import agree, agreeing_ranks


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
        # NOTE: float32 and int32, as PyTorch keeps them; written in place only, since a graph
        # reads and writes these very tensors.
        self._scale = tensor(float(init_scale), dtype=dtypes.float32)
        self._growth_tracker = tensor(0, dtype=dtypes.int32)
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._per_optimizer: dict[int, dict] = {}
        # the world ranks of the global losses scaled since the last update: they take part
        # in agreeing on found_inf, as they read the scale (a stage with no parameters)
        self._loss_ranks: set[int] = set()

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return float(self._scale._data) if self._enabled else 1.0

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
            if outputs.is_global:
                self._loss_ranks.update(outputs.placement.flat_ranks)
            return outputs * self.get_scale()
        if isinstance(outputs, list | tuple):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TideflowError(f"GradScaler.scale: expected tensors, got {type(outputs).__name__}")

    def _state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(
            id(optimizer), {"stage": _Stage.READY, "found_inf": False, "ranks": ()}
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
        params = [p for group in optimizer.param_groups for p in group["params"]]
        ranks = agreeing_ranks(params, self._loss_ranks)
        state["found_inf"] = bool(self._unscale_grads_(params, ranks))
        state["ranks"] = ranks
        state["stage"] = _Stage.UNSCALED

    def _unscale_grads_(self, params: list[Tensor], ranks: tuple[int, ...] = ()) -> Tensor:
        """Multiply the gradients of `params` in place by 1/scale; whether any holds inf/NaN
        (a bool tensor). A global gradient is checked on this rank's shard, and the ranks
        `ranks` (`agreeing_ranks`) then agree on the answer: a collective over them."""
        inv = self._scale.double().reciprocal().float()  # PyTorch's rounding of 1/scale
        finite = []
        rank = get_world().rank
        for p in params:
            g = p.grad
            if g is None:
                continue
            if g.is_global:
                if g.placement.coordinate(rank) is None:
                    continue  # another stage's: nothing of it here
                # NOTE: the shard shares the gradient's memory: unscaled in place. A partial
                # gradient's shard with inf/NaN makes the sum inf/NaN, so each rank checks its
                # own shards and none has to gather them.
                g = g.to_local()
            g.mul_(inv)
            finite.append(isfinite(g).all())
        found_inf = logical_not(stack(finite).all()) if finite else tensor(False)
        return agree(found_inf, ranks) if ranks else found_inf

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

    @no_grad()
    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back off after an overflow, grow after `growth_interval` clean steps."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale.fill_(float(new_scale))
        else:
            if not self._per_optimizer:
                raise TideflowError("No inf checks were recorded prior to update().")
            states = self._per_optimizer.values()
            found_inf = tensor(any(s["found_inf"] for s in states))
            groups = {s["ranks"] for s in states}
            if len(groups) > 1:
                # NOTE: optimizers of parameters on different ranks each agreed among their
                # own ranks; the scale is one for all of them
                found_inf = agree(found_inf, {r for g in groups for r in g})
            self._update_scale_(found_inf)
        self._per_optimizer = {}
        self._loss_ranks = set()

    def _update_scale_(self, found_inf: Tensor) -> None:
        """PyTorch's `_amp_update_scale_` in tensor ops: after an overflow multiply the scale
        by `backoff_factor` and reset the tracker; else count a clean step, and at
        `growth_interval` of them multiply by `growth_factor` (unless that overflows)."""
        scale, tracker = self._scale, self._growth_tracker
        counted = tracker + 1
        grow = counted == self._growth_interval
        grown = scale * self._growth_factor
        grown = where(isfinite(grown), grown, scale)
        scale.copy_(where(found_inf, scale * self._backoff_factor, where(grow, grown, scale)))
        tracker.copy_(where(found_inf.logical_or(grow), 0, counted))

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": int(self._growth_tracker._data),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if not state_dict:
            raise TideflowError("GradScaler.load_state_dict: the state dict is empty")
        self._scale.fill_(float(state_dict["scale"]))
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker.fill_(int(state_dict["_growth_tracker"]))


class StaticGradScaler(GradScaler):
    """A fixed loss scale (OneFlow's `flow.amp.StaticGradScaler`): the loss is multiplied by
    `scale_factor`, gradients are divided by it, steps whose gradients hold inf/NaN are
    skipped, and `update()` leaves the scale as it is.

    >>> scaler = flow.amp.StaticGradScaler(1024.0)
    >>> scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()"""

    def __init__(self, scale_factor: float) -> None:
        if not scale_factor > 0.0:
            raise TideflowError(f"StaticGradScaler: scale_factor must be > 0, got {scale_factor}")
        super().__init__(init_scale=scale_factor)

    def _update_scale_(self, found_inf: Tensor) -> None:
        """The scale stays as it is."""
