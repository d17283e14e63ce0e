"""embedding_bag: reduce bags of embedding rows (sum, mean, max), composed of a lookup and a
scatter into one row per bag, so its gradient is the lookup's."""

from __future__ import annotations

import itertools

from ...framework.tensor import Tensor
from .._rules import checked
from ..binary import where
from ..creation import arange, on_placement_of, zeros
from ..indexing import searchsorted
from .embedding import embedding

__all__ = ["embedding_bag"]


@checked
def embedding_bag(
    input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights: Tensor | None = None,
    include_last_offset=False, padding_idx=None,
):  # fmt: skip
    """The sum, mean or max of each bag of embedding rows, without a tensor of the rows per
    bag: bags are the rows of a 2-d `input`, or the slices of a 1-d `input` starting at
    `offsets` (`include_last_offset`: the last offset ends the last bag). `per_sample_weights`
    (mode 'sum') weighs each lookup; lookups of `padding_idx` are left out. Empty bags give
    zeros.

    >>> F.embedding_bag(flow.tensor([[0, 2], [1, 1]]), flow.eye(3), mode="sum")
    tensor([[1., 0., 1.],
            [0., 2., 0.]])
    """
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) is not "
            f"None, then it must have the same shape as the input ({list(input.shape)})"
        )
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}')"
        )
    bag_of, n_bags = _bag_of_each_lookup(input, offsets, include_last_offset)
    indices = input.reshape(-1)
    rows = embedding(indices, weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1)
    # Lookups outside every bag (padding, or past the last offset) go to a spare bag n_bags,
    # dropped at the end: they add nothing, count for nothing and get no gradient.
    if padding_idx is not None:
        bag_of = where(indices == padding_idx, n_bags, bag_of)
    out = zeros((n_bags + 1, weight.shape[1]), dtype=weight.dtype, **on_placement_of(weight))
    if mode == "max":
        # include_self=False: a bag's max ranges over its lookups only; empty bags keep 0.
        spread = bag_of.reshape(-1, 1).expand(*rows.shape)
        return out.scatter_reduce(0, spread, rows, "amax", include_self=False)[:n_bags]
    sums = out.index_add(0, bag_of, rows)[:n_bags]
    if mode == "sum":
        return sums
    ones = rows.new_ones(len(rows))
    counts = zeros(n_bags + 1, dtype=weight.dtype, **on_placement_of(weight))
    counts = counts.index_add(0, bag_of, ones)[:n_bags]
    return sums / counts.clamp_min(1).reshape(-1, 1)


def _bag_of_each_lookup(input, offsets, include_last_offset: bool):
    """(bag index of every lookup of the flattened input, number of bags). Lookups past the
    last offset with `include_last_offset` get the spare index `number of bags`."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a "
                "mini-batch of fixed length sequences. However, found offsets of type "
                f"{type(offsets)}"
            )
        n_bags, length = input.shape
        return arange(n_bags * length, **on_placement_of(input)) // max(length, 1), n_bags
    if input.ndim != 1:
        raise ValueError(
            f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}"
        )
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    if offsets.ndim != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    _check_offsets(offsets, len(input))
    n_bags = len(offsets) - 1 if include_last_offset else len(offsets)
    # A lookup belongs to the last bag starting at or before it: with include_last_offset,
    # lookups from the last offset on (which PyTorch documents as the input's length) belong
    # to no bag
    positions = arange(len(input), **on_placement_of(input))
    return searchsorted(offsets, positions, right=True) - 1, n_bags


def _check_offsets(offsets, length: int) -> None:
    values = offsets.tolist()
    if values and values[0] != 0:
        raise ValueError(
            "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
            f"from position 0. However, got {values[0]}"
        )
    if values and values[-1] > length:
        raise ValueError(
            f"offsets[-1] can not be greater than input's length {length} but got "
            f"offsets[-1] of {values[-1]}"
        )
    if any(b < a for a, b in itertools.pairwise(values)):
        raise ValueError(f"offsets has to be non-decreasing, got {values}")
