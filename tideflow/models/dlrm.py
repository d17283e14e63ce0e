"""DLRM (Naumov et al., 2019): a bottom MLP over the dense features, dot products between it and
every sparse feature's embedding, and a top MLP over them, on `flow.one_embedding` tables."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import nn, one_embedding
from ..framework import dtype as dtypes
from ..framework.tensor import Tensor
from ..ops.creation import tensor
from ..ops.shape import cat
from ._ctr_layers import embedding_tables, init_mlp_
from .criteo import NUM_DENSE, NUM_SPARSE
from .mlp import MLP


class DLRM(nn.Module):
    """Click logits of examples of `num_dense` dense features (Criteo: log(1 + x) of its 13
    counts) and `num_sparse` categorical ones (its 26 ids).

    The bottom MLP (`bottom_mlp` wide, ReLU after every layer) maps the dense features to a
    vector of `embedding_dim`; each sparse key looks up a row of `embedding_dim` in a
    `MultiTableEmbedding` (one table per feature). The interaction takes the dot product of
    every pair of those `num_sparse + 1` vectors (the bottom output first), each pair once
    and no vector with itself: pairs (i, j) with i > j, row by row of the strictly lower
    triangle, as the DLRM reference code orders them. The top MLP (`top_mlp` wide, ReLU
    between layers) maps the bottom output and the dot products to one logit.

    `forward(dense, keys)` takes (batch, num_dense) float32 features and (batch, num_sparse)
    int64 keys, and returns (batch,) logits. New rows start as N(0, embedding_std^2), the
    MLPs with Xavier-normal weights and zero biases; `name` and `seed` are the embedding's.

    >>> import tempfile
    >>> store = flow.one_embedding.make_cached_host_mem_store_options(
    ...     cache_budget_mb=8, persistent_path=tempfile.mkdtemp(), capacity=1000)
    >>> model = flow.models.DLRM(store, num_dense=2, num_sparse=3, embedding_dim=4,
    ...                          bottom_mlp=[8], top_mlp=[8])
    >>> model(flow.randn(5, 2), flow.tensor([[1, 2, 3]] * 5)).shape
    tideflow.Size([5])
    """

    def __init__(
        self,
        store_options,
        num_dense: int = NUM_DENSE,
        num_sparse: int = NUM_SPARSE,
        embedding_dim: int = 16,
        bottom_mlp: Sequence[int] = (512, 256),
        top_mlp: Sequence[int] = (512, 256),
        embedding_std: float = 1e-4,
        name: str = "dlrm",
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.embedding = one_embedding.MultiTableEmbedding(
            name=name,
            embedding_dim=embedding_dim,
            dtype=dtypes.float32,
            key_type=dtypes.int64,
            tables=embedding_tables(num_sparse, embedding_std),
            store_options=store_options,
            seed=seed,
        )
        # ReLU after the bottom MLP's last layer too: its output is one more feature vector
        self.bottom = nn.Sequential(
            init_mlp_(MLP([num_dense, *bottom_mlp, embedding_dim])), nn.ReLU()
        )
        vectors = num_sparse + 1
        pairs = vectors * (vectors - 1) // 2
        self.top = init_mlp_(MLP([embedding_dim + pairs, *top_mlp, 1]))
        # (i, j) with i > j: each unordered pair of the vectors once
        i, j = np.tril_indices(vectors, k=-1)
        self._pair_i = tensor(i, dtype=dtypes.int64)
        self._pair_j = tensor(j, dtype=dtypes.int64)

    def forward(self, dense: Tensor, keys: Tensor) -> Tensor:
        bottom = self.bottom(dense)  # (batch, dim)
        vectors = cat([bottom.unsqueeze(1), self.embedding(keys)], dim=1)
        dots = vectors.matmul(vectors.transpose(1, 2))  # (batch, vectors, vectors)
        pairs = dots[:, self._pair_i, self._pair_j]
        return self.top(cat([bottom, pairs], dim=1)).squeeze(1)
