"""DeepFM and DLRM compute what their papers define (checked against NumPy on the rows their
tables return), and learn: DeepFM on synthetic clicks comes within 0.01 of the AUC of the
hidden model that drew the labels."""

from __future__ import annotations

import numpy as np
import pytest

import tideflow as flow
from tideflow.models import deepfm, dlrm
from tideflow.models.recommender import DeepFMTrainConfig, train_recommender
from tideflow.testing.accuracy import unit_roundoff

from .test_nn_layers import run_doctests

SMALL_TABLES = ",".join(map(str, [2, 3, 4, 5, 6, 8, 10] * 3 + [2, 3, 4, 5, 6]))
TWO_ID_TABLES = ",".join(["2"] * 26)


def _store(tmp_path):
    return flow.one_embedding.make_cached_host_mem_store_options(
        cache_budget_mb=8, persistent_path=str(tmp_path), capacity=10_000
    )


def _mlp_numpy(mlp, x: np.ndarray, final_relu: bool = False, bound: bool = False):
    """The MLP's forward pass in float64 from its weights. With `bound`, its magnitude pass
    instead: |weights| times the magnitudes `x` of the inputs, no ReLU (|relu(a)| <= |a|),
    what float32 rounding errors scale with."""
    linears = [m for m in mlp.modules() if isinstance(m, flow.nn.Linear)]
    for i, linear in enumerate(linears):
        weight, bias = (linear.weight.numpy().astype(np.float64), linear.bias.numpy())
        if bound:
            x = x @ np.abs(weight).T + np.abs(bias)
        else:
            x = x @ weight.T + bias
            if i < len(linears) - 1 or final_relu:
                x = np.maximum(x, 0)
    return x


def _fan_ins(mlp) -> int:
    return sum(m.in_features + 1 for m in mlp.modules() if isinstance(m, flow.nn.Linear))


def _float32_bound(n: int, magnitude: np.ndarray) -> np.ndarray:
    """First-order error bound of float32 arithmetic against exact: each of the `n` terms
    summed along the computation adds at most one unit roundoff of the magnitude (the same
    computation on absolute values) it is carried with."""
    return n * unit_roundoff("float32") * magnitude


def _pairwise_dots(vectors: np.ndarray) -> list[np.ndarray]:
    """Dot products of every pair (i, j), i > j, of the vectors (batch, n, dim), in DLRM's
    order: row by row of the strictly lower triangle."""
    n = vectors.shape[1]
    return [(vectors[:, i] * vectors[:, j]).sum(axis=1) for i in range(n) for j in range(i)]


def test_deepfm_adds_first_order_pairwise_and_deep_terms(tmp_path):
    flow.manual_seed(0)
    fields, dim = 5, 3
    model = deepfm.DeepFM(
        _store(tmp_path),
        num_fields=fields,
        embedding_dim=dim,
        hidden_units=[6, 4],
        embedding_std=1.0,
    )
    keys = flow.tensor(np.random.default_rng(0).integers(0, 50, (7, fields)))
    logits = model(keys).numpy()
    rows = model.embedding(keys).numpy().astype(np.float64)  # the same rows again
    v, w = rows[:, :, :dim], rows[:, :, dim]
    deep = _mlp_numpy(model.dnn, v.reshape(len(v), -1))[:, 0]
    expected = w.sum(axis=1) + sum(_pairwise_dots(v)) + deep
    assert logits.shape == (7,)
    # the pairwise term is computed as ((sum v)^2 - sum v^2) / 2: its rounding scales with
    # (sum |v|)^2, not with the pairs' sum
    fm_magnitude = np.abs(w).sum(axis=1) + (np.abs(v).sum(axis=1) ** 2).sum(axis=1)
    deep_magnitude = _mlp_numpy(model.dnn, np.abs(v).reshape(len(v), -1), bound=True)[:, 0]
    n = fields + _fan_ins(model.dnn) + 3
    bound = _float32_bound(n, fm_magnitude + deep_magnitude)
    assert (np.abs(logits - expected) <= bound).all(), (logits - expected, bound)


def test_dlrm_dots_every_pair_of_feature_vectors(tmp_path):
    flow.manual_seed(0)
    num_dense, num_sparse, dim = 4, 3, 5
    model = dlrm.DLRM(
        _store(tmp_path),
        num_dense=num_dense,
        num_sparse=num_sparse,
        embedding_dim=dim,
        bottom_mlp=[8],
        top_mlp=[6],
        embedding_std=1.0,
    )
    rng = np.random.default_rng(1)
    dense = rng.standard_normal((9, num_dense)).astype(np.float32)
    keys = flow.tensor(rng.integers(0, 30, (9, num_sparse)))
    logits = model(flow.tensor(dense), keys).numpy()
    rows = model.embedding(keys).numpy().astype(np.float64)
    bottom = _mlp_numpy(model.bottom, dense.astype(np.float64), final_relu=True)
    vectors = np.concatenate([bottom[:, None], rows], axis=1)
    expected = _mlp_numpy(model.top, np.column_stack([bottom, *_pairwise_dots(vectors)]))[:, 0]
    assert logits.shape == (9,)
    bottom_bound = _mlp_numpy(model.bottom, np.abs(dense).astype(np.float64), bound=True)
    magnitudes = np.concatenate([bottom_bound[:, None], np.abs(rows)], axis=1)
    top_in = np.column_stack([bottom_bound, *_pairwise_dots(magnitudes)])
    n = _fan_ins(model.bottom) + dim + _fan_ins(model.top)
    bound = _float32_bound(n, _mlp_numpy(model.top, top_in, bound=True)[:, 0])
    assert (np.abs(logits - expected) <= bound).all(), (logits - expected, bound)


def test_doc_examples():
    from tideflow.models import recommender

    for module in (deepfm, dlrm, recommender):
        run_doctests(module)


def test_deepfm_closes_most_of_the_gap_to_the_auc_ceiling_in_one_short_epoch(tmp_path):
    """The slow test's property on a problem ten times cheaper: tables of two ids, one epoch
    of 30,000 examples. The gap left is 0.02-0.04 (over data seeds); an untrained model's is
    0.3 or more, so a model that does not learn, or learns the wrong thing, fails."""
    config = DeepFMTrainConfig(
        train_samples=30_000, val_samples=5_000, table_sizes=TWO_ID_TABLES,
        batch_size=512, epochs=1, embedding_dim=4, hidden_units="16", learning_rate=2e-2,
        out=str(tmp_path), progress=False,
    )  # fmt: skip
    result = train_recommender(config, log=lambda line: None)
    assert result.auc_ceiling - 0.06 <= result.val_auc <= result.auc_ceiling


@pytest.mark.slow
def test_deepfm_comes_within_0_01_of_the_auc_ceiling(tmp_path):
    """Small tables, so that 150,000 examples show every id often enough to learn it (on
    Criteo-sized tables the gap closes only with far more data)."""
    config = DeepFMTrainConfig(
        train_samples=150_000, val_samples=10_000, table_sizes=SMALL_TABLES, batch_size=512,
        epochs=2, embedding_dim=4, hidden_units="16", learning_rate=1e-2, out=str(tmp_path),
        progress=False,
    )  # fmt: skip
    result = train_recommender(config, log=lambda line: None)
    assert result.auc_ceiling - 0.01 <= result.val_auc <= result.auc_ceiling
