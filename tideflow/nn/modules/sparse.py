"""Lookup tables: Embedding and EmbeddingBag."""

from __future__ import annotations

from ...framework.errors import ShapeError
from ...framework.grad_mode import no_grad
from ...ops.creation import empty
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
        return F.embedding_bag(
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
