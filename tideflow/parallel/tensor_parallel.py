"""Tensor parallelism as annotations: a Linear layer's weights split over a placement axis.

`column_parallel(linear, p)`: the weight's rows (output features) are split, so the output's
features are split and no communication happens in the layer. `row_parallel(linear, p)`:
the weight's columns (input features) are split; an input split along its features
(a column-parallel layer's output) gives partial sums, reduced where the next op needs the
whole value. A column-parallel layer followed by a row-parallel one is Megatron-LM's MLP,
with one all-reduce in forward and one in backward, inserted by boxing.

On a 2-D placement the last axis is the tensor-parallel one and the weights are broadcast
along the others (data parallel over the rows of the grid).
"""

from __future__ import annotations

from ..framework.sbp import B, Split
from .placement import placement as Placement
from .sbp import public
from .to_global import module_to_global

__all__ = ["column_parallel", "row_parallel"]


def column_parallel(linear, placement: Placement):
    """Split `linear`'s output features over the last axis of `placement` (in place).

    >>> lin = column_parallel(flow.nn.Linear(4, 6), flow.placement("cpu", [0]))
    >>> lin.weight.sbp
    (tideflow.sbp.split(dim=0),)
    """
    return _split_over(linear, placement, lambda t: Split(0))


def row_parallel(linear, placement: Placement):
    """Split `linear`'s input features over the last axis of `placement` (in place); the
    bias is broadcast (added once to the reduced sum).

    >>> lin = row_parallel(flow.nn.Linear(6, 4), flow.placement("cpu", [0]))
    >>> lin.weight.sbp, lin.bias.sbp
    ((tideflow.sbp.split(dim=1),), (tideflow.sbp.broadcast,))
    """
    return _split_over(linear, placement, lambda t: Split(1) if t.ndim == 2 else B)


def _split_over(module, placement: Placement, layout):
    """The module's tensors (local or global) broadcast over `placement` (the first rank's
    values), then laid out on its last axis by `layout(tensor)`: a local slice each."""
    whole = tuple(public(B) for _ in range(placement.ndim))
    module_to_global(module, placement, whole)
    return module_to_global(module, placement, lambda t: (*whole[:-1], public(layout(t))))
