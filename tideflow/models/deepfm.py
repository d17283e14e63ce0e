"""DeepFM (Guo et al., 2017): a factorization machine and a deep MLP over the same sparse
embeddings, as in OneFlow's recommender example, on `flow.one_embedding` tables."""

from __future__ import annotations

from collections.abc import Sequence

from .. import nn, one_embedding
from ..framework import dtype as dtypes
from ..framework.tensor import Tensor
from ._ctr_layers import embedding_tables, init_mlp_
from .criteo import NUM_FIELDS
from .mlp import MLP


class DeepFM(nn.Module):
    """Click logits of examples of `num_fields` categorical features (Criteo: its 13 counts
    bucketed and its 26 ids, 39 fields).

    Each feature key looks up one row of `embedding_dim + 1` values in a
    `MultiTableEmbedding` (one table per field): the first `embedding_dim` are the feature's
    factor `v`, the last its first-order weight `w`. The logit is the sum of

    - the FM: `sum_f w_f + sum_{f < g} <v_f, v_g>` (the pairwise term computed as
      `(|sum_f v_f|^2 - sum_f |v_f|^2) / 2`, linear in the number of fields), and
    - the deep part: an MLP over the concatenated factors (`hidden_units` wide, ReLU,
      `dropout` after each hidden layer), to one output.

    `forward(keys)` takes (batch, num_fields) int64 keys and returns (batch,) logits. The
    rows train through `flow.one_embedding.Optimizer`, the MLP through any optimizer. New
    rows start as N(0, embedding_std^2) (OneFlow's 1e-4: the model starts near a constant),
    the MLP with Xavier-normal weights and zero biases. `name` and `seed` are the
    embedding's: its snapshots' name and its initial rows' seed.

    >>> import tempfile
    >>> store = flow.one_embedding.make_cached_host_mem_store_options(
    ...     cache_budget_mb=8, persistent_path=tempfile.mkdtemp(), capacity=1000)
    >>> model = flow.models.DeepFM(store, num_fields=3, embedding_dim=4, hidden_units=[8])
    >>> model(flow.tensor([[1, 2, 3], [4, 5, 6]])).shape
    tideflow.Size([2])
    """

    def __init__(
        self,
        store_options,
        num_fields: int = NUM_FIELDS,
        embedding_dim: int = 16,
        hidden_units: Sequence[int] = (400, 400, 400),
        dropout: float = 0.0,
        embedding_std: float = 1e-4,
        name: str = "deepfm",
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.num_fields = num_fields
        self.embedding_dim = embedding_dim
        self.embedding = one_embedding.MultiTableEmbedding(
            name=name,
            embedding_dim=embedding_dim + 1,
            dtype=dtypes.float32,
            key_type=dtypes.int64,
            tables=embedding_tables(num_fields, embedding_std),
            store_options=store_options,
            seed=seed,
        )
        self.dnn = init_mlp_(MLP([num_fields * embedding_dim, *hidden_units, 1], dropout=dropout))

    def forward(self, keys: Tensor) -> Tensor:
        rows = self.embedding(keys)  # (batch, fields, dim + 1)
        factors = rows[:, :, : self.embedding_dim]
        first_order = rows[:, :, self.embedding_dim].sum(dim=1)
        second_order = 0.5 * (factors.sum(dim=1).square() - factors.square().sum(dim=1)).sum(dim=1)
        deep = self.dnn(factors.flatten(start_dim=1)).squeeze(1)
        return first_order + second_order + deep
