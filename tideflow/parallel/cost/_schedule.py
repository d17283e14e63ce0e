"""The pipeline's critical path over micro-batches.

With per-micro-batch stage times t_1..t_p (forward and backward), m micro-batches and v
model chunks per stage (interleaving), 1F1B finishes after

    m * max(t) + (sum(t) - max(t)) / v

the first micro-batch crosses every stage once (in chunks of 1/v) while the slowest stage
then works on all m. For equal stages the idle share is the bubble (p-1) / (v m + p - 1);
v = 1 gives 1F1B's (p-1) / (m + p - 1).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class PipelineTime:
    total_s: float
    busy_s: float  # the slowest stage's own work

    @property
    def bubble_fraction(self) -> float:
        return 1 - self.busy_s / self.total_s if self.total_s else 0.0


def pipeline_time(
    stage_times: list[float], micro_batches: int, interleave: int = 1
) -> PipelineTime:
    slowest = max(stage_times)
    busy = micro_batches * slowest
    fill_and_drain = (sum(stage_times) - slowest) / interleave
    return PipelineTime(busy + fill_and_drain, busy)


def bubble_fraction(pp: int, micro_batches: int, interleave: int = 1) -> float:
    """The closed form for equal stages."""
    return (pp - 1) / (interleave * micro_batches + pp - 1)
