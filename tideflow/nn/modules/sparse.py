"""Lookup tables: Embedding and EmbeddingBag."""

from __future__ import annotations

import itertools

from ...framework.errors import ShapeError
from ...framework.grad_mode import no_grad
from ...ops.binary import where
from ...ops.creation import arange, empty, zeros
from ...ops.indexing import searchsorted
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


def _normalize_padding_idx(padding_idx: int | None, num_embeddings: int) -> int | None:
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(
            f"padding_idx must be within num_embeddings: got padding_idx={padding_idx} for "
            f"{num_embeddings} embeddings"
        )
    return padding_idx % num_embeddings


def _given_weight(weight, num_embeddings: int, embedding_dim: int):
    if list(weight.shape) != [num_embeddings, embedding_dim]:
        raise ShapeError(
            f"Shape of weight does not match num_embeddings and embedding_dim: expected "
            f"{[num_embeddings, embedding_dim]}, got {list(weight.shape)}"
        )
    return weight


class Embedding(Module):
    """A table of `num_embeddings` vectors of size `embedding_dim`, looked up by integer
    indices: the output has shape `input.shape + (embedding_dim,)`. The weight starts from
    N(0, 1); the row `padding_idx` starts at zero and gets no gradient. With `max_norm`,
    looked-up rows are renormalized in place to at most that norm.

    >>> emb = flow.nn.Embedding(10, 3, padding_idx=0)
    >>> emb(flow.tensor([[0, 2, 4], [4, 3, 9]])).shape
    tideflow.Size([2, 3, 3])
    """

    def __init__(
        self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
        max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
        sparse: bool = False, _weight=None, _freeze: bool = False, device=None, dtype=None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _normalize_padding_idx(padding_idx, num_embeddings)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            shape = (num_embeddings, embedding_dim)
            weight = empty(shape, device=device, dtype=dtype)
            self.weight = Parameter(weight, requires_grad=not _freeze)
            self.reset_parameters()
        else:
            weight = _given_weight(_weight, num_embeddings, embedding_dim)
            self.weight = Parameter(weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self) -> None:
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        return F.embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
            self.scale_grad_by_freq, self.sparse,
        )  # fmt: skip

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        if self.sparse is not False:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(
        cls, embeddings, freeze: bool = True, padding_idx: int | None = None,
        max_norm: float | None = None, norm_type: float = 2.0,
        scale_grad_by_freq: bool = False, sparse: bool = False,
    ) -> Embedding:  # fmt: skip
        """An Embedding whose weight is (and shares memory with) the 2-d `embeddings`;
        `freeze` keeps it out of training. The padding row is used as given.

        >>> emb = flow.nn.Embedding.from_pretrained(flow.tensor([[1.0, 2.3], [4.0, 5.1]]))
        >>> emb(flow.tensor([1]))
        tensor([[4.0000, 5.1000]])
        """
        if embeddings.ndim != 2:
            raise ShapeError(
                f"Embeddings parameter is expected to be 2-dimensional, got shape "
                f"{list(embeddings.shape)}"
            )
        rows, cols = embeddings.shape
        return cls(
            rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
            _weight=embeddings, _freeze=freeze,
        )  # fmt: skip


_BAG_MODES = ("sum", "mean", "max")


class EmbeddingBag(Module):
    """Sums, averages or takes the max of bags of embeddings without materializing the
    looked-up rows per bag. Bags are the rows of a 2-d `input`, or the slices of a 1-d
    `input` starting at `offsets`. `per_sample_weights` (mode 'sum') weighs each lookup;
    entries equal to `padding_idx` are left out of their bag. Empty bags give zeros.

    >>> bag = flow.nn.EmbeddingBag(10, 3, mode="sum")
    >>> bag(flow.tensor([1, 2, 4, 5, 4, 3, 2, 9]), flow.tensor([0, 4])).shape
    tideflow.Size([2, 3])
    """

    def __init__(
        self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
        norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
        sparse: bool = False, _weight=None, include_last_offset: bool = False,
        padding_idx: int | None = None, device=None, dtype=None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = _normalize_padding_idx(padding_idx, num_embeddings)
        if _weight is None:
            shape = (num_embeddings, embedding_dim)
            self.weight = Parameter(empty(shape, device=device, dtype=dtype))
            self.reset_parameters()
        else:
            self.weight = Parameter(_given_weight(_weight, num_embeddings, embedding_dim))
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return _embedding_bag(
            input, self.weight, offsets, self.max_norm, self.norm_type,
            self.scale_grad_by_freq, self.mode, self.sparse, per_sample_weights,
            self.include_last_offset, self.padding_idx,
        )  # fmt: skip

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings!r}, {self.embedding_dim!r}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s

    @classmethod
    def from_pretrained(
        cls, embeddings, freeze: bool = True, max_norm: float | None = None,
        norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
        sparse: bool = False, include_last_offset: bool = False,
        padding_idx: int | None = None,
    ) -> EmbeddingBag:  # fmt: skip
        """An EmbeddingBag whose weight is the 2-d `embeddings` (frozen if `freeze`).

        >>> bag = flow.nn.EmbeddingBag.from_pretrained(flow.tensor([[1.0, 2.0], [3.0, 4.0]]))
        >>> bag(flow.tensor([[0, 1]]))
        tensor([[2., 3.]])
        """
        if embeddings.ndim != 2:
            raise ShapeError(
                f"Embeddings parameter is expected to be 2-dimensional, got shape "
                f"{list(embeddings.shape)}"
            )
        rows, cols = embeddings.shape
        bag = cls(
            rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings,
            include_last_offset, padding_idx,
        )  # fmt: skip
        bag.weight.requires_grad_(not freeze)
        return bag


def _embedding_bag(
    input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
    per_sample_weights, include_last_offset, padding_idx,
):  # fmt: skip
    """PyTorch's `F.embedding_bag`, from a lookup and a scatter into one row per bag."""
    # NOTE: belongs in ops/nn/embedding.py as F.embedding_bag (with a fused kernel); built
    # here from existing ops until then.
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) is not "
            f"None, then it must have the same shape as the input ({list(input.shape)})"
        )
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if mode not in _BAG_MODES:
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
    rows = F.embedding(indices, weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1)
    # Lookups outside every bag (padding, or past the last offset) go to a spare bag n_bags,
    # dropped at the end: they add nothing, count for nothing and get no gradient.
    if padding_idx is not None:
        bag_of = where(indices == padding_idx, n_bags, bag_of)
    out = zeros((n_bags + 1, weight.shape[1]), dtype=weight.dtype)
    if mode == "max":
        # include_self=False: a bag's max ranges over its lookups only; empty bags keep 0.
        spread = bag_of.reshape(-1, 1).expand(*rows.shape)
        return out.scatter_reduce(0, spread, rows, "amax", include_self=False)[:n_bags]
    sums = out.index_add(0, bag_of, rows)[:n_bags]
    if mode == "sum":
        return sums
    ones = rows.new_ones(len(rows))
    counts = zeros(n_bags + 1, dtype=weight.dtype).index_add(0, bag_of, ones)[:n_bags]
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
        return arange(n_bags * length) // max(length, 1), n_bags
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
    # A lookup belongs to the last bag starting at or before it.
    return searchsorted(offsets, arange(len(input)), right=True) - 1, n_bags


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
