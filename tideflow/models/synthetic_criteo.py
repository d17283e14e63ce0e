"""Synthetic click logs in the Criteo format, labelled by a hidden factorization machine, so
that the AUC a trained model reaches can be set against the best any model can reach."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .criteo import NUM_DENSE, NUM_SPARSE, CriteoRows
from .metrics import roc_auc

# Cardinalities from 3 to 200,000 ids, as uneven as Criteo's own (whose largest tables hold
# millions): a few huge tables of ids seen once or twice, many small ones seen constantly.
CRITEO_LIKE_TABLE_SIZES = (
    3, 4, 7, 10, 15, 25, 40, 60, 100, 150, 250, 400, 600,
    1_000, 1_500, 2_500, 4_000, 6_000, 10_000, 15_000, 25_000, 40_000, 60_000, 100_000,
    150_000, 200_000,
)  # fmt: skip


class SyntheticCriteo:
    """A seeded source of Criteo-format examples. The 26 categorical ids of an example are
    drawn independently, each from its table by a Zipf law over the table's ids (the
    `rank`-th most popular id with probability proportional to `(rank + 1) ** -zipf_exponent`);
    the 13 counts are geometric with means from 1 to 200; every feature is missing at a rate
    of its own column (up to 40%). The label is a coin flip with probability
    `sigmoid(logit)` from a hidden model of the features that is exactly what DeepFM's FM
    part computes::

        logit = bias + sum_j a_j log(1 + count_j)
                     + sum_f w_f[id_f] + sum_{f < g} <v_f[id_f], v_g[id_g]>

    with the weight `w` of an id of popularity rank r drawn from
    `N(0, (linear_scale * (r + 1) ** -effect_decay)^2)` and its factor `v` of `factor_dim`
    components likewise with `factor_scale` (a missing feature contributes nothing), and the
    bias set for a click rate near `click_rate`. The effects shrink with rarity so that the
    signal lies in ids seen often enough to be learnt: the long tail of a huge table, a few
    sightings per id, is there to fill the tables, not to hide a part of the labels' signal
    that no amount of training could recover.

    Knowing each example's true click probability gives the AUC ceiling: no model ranks
    examples better than their true probabilities do.

    >>> data = flow.models.SyntheticCriteo(seed=0)
    >>> rows, probabilities = data.sample(1000)
    >>> len(rows), rows.ids.shape, bool(0.5 < data.auc_ceiling(rows, probabilities) < 1)
    (1000, (1000, 26), True)
    """

    def __init__(
        self,
        table_sizes: Sequence[int] = CRITEO_LIKE_TABLE_SIZES,
        zipf_exponent: float = 1.2,
        factor_dim: int = 4,
        linear_scale: float = 0.3,
        factor_scale: float = 0.25,
        dense_scale: float = 0.15,
        effect_decay: float = 0.5,
        click_rate: float = 0.25,
        seed: int = 0,
    ) -> None:
        table_sizes = [int(n) for n in table_sizes]
        if len(table_sizes) != NUM_SPARSE or min(table_sizes) < 1:
            raise ValueError(
                f"SyntheticCriteo: table_sizes must be {NUM_SPARSE} positive sizes, got "
                f"{table_sizes}"
            )
        if not 0.0 < click_rate < 1.0:
            raise ValueError(f"SyntheticCriteo: click_rate must be in (0, 1), got {click_rate}")
        self.table_sizes = table_sizes
        self.seed = seed
        hidden = np.random.default_rng([seed, 0])
        popularity = [(np.arange(n) + 1.0) ** -zipf_exponent for n in table_sizes]
        self._cdfs = [np.cumsum(p) / p.sum() for p in popularity]
        # the id of each popularity rank: an affine map with an odd multiplier is a bijection
        # of 32-bit values, so a table's ids are distinct and look random
        multipliers = hidden.integers(0, 2**31, NUM_SPARSE, dtype=np.uint64) * 2 + 1
        offsets = hidden.integers(0, 2**32, NUM_SPARSE, dtype=np.uint64)
        self._ids = [
            (np.arange(n, dtype=np.uint64) * m + c) % np.uint64(2**32)
            for n, m, c in zip(table_sizes, multipliers, offsets, strict=True)
        ]
        shrink = [(np.arange(n) + 1.0) ** -effect_decay for n in table_sizes]
        self._weights = [
            hidden.normal(0, linear_scale, n) * s for n, s in zip(table_sizes, shrink, strict=True)
        ]
        self._factors = [
            hidden.normal(0, factor_scale, (n, factor_dim)) * s[:, None]
            for n, s in zip(table_sizes, shrink, strict=True)
        ]
        self._count_means = np.exp(hidden.uniform(0, np.log(200), NUM_DENSE))
        self._count_weights = hidden.normal(0, dense_scale, NUM_DENSE)
        self._count_missing = hidden.uniform(0, 0.4, NUM_DENSE)
        self._id_missing = np.where(
            hidden.random(NUM_SPARSE) < 0.3, hidden.uniform(0, 0.4, NUM_SPARSE), 0.0
        )
        # the bias that gives the click rate asked for, on a draw of its own
        ranks, counts, _ = self._features(20_000, hidden)
        self.bias = _bias_for_rate(self._logits(ranks, counts, bias=0.0), click_rate)

    def sample(self, n: int, stream: int = 0) -> tuple[CriteoRows, np.ndarray]:
        """`n` examples and their true click probabilities. Each `stream` is an independent
        draw (e.g. 0 for training, 1 for held-out data); the same stream gives the same rows."""
        rng = np.random.default_rng([self.seed, 1, stream])
        ranks, counts, counts_missing = self._features(n, rng)
        probabilities = _sigmoid(self._logits(ranks, counts, self.bias))
        labels = (rng.random(n) < probabilities).astype(np.int8)
        ids_missing = ranks < 0
        ids = np.stack(
            [
                np.where(r < 0, 0, table[np.maximum(r, 0)])
                for r, table in zip(ranks.T, self._ids, strict=True)
            ],
            axis=1,
        )
        return CriteoRows(labels, counts, counts_missing, ids, ids_missing), probabilities

    @staticmethod
    def auc_ceiling(rows: CriteoRows, probabilities: np.ndarray) -> float:
        """The AUC of the true click probabilities on `rows`' labels: what a perfect model
        would score on these examples."""
        return roc_auc(rows.labels, probabilities)

    def _features(self, n: int, rng: np.random.Generator):
        """Popularity ranks (n, 26) (-1 where missing), counts (n, 13) and their missing mask."""
        ranks = np.stack(
            [
                np.searchsorted(cdf, rng.random(n), side="right").clip(max=len(cdf) - 1)
                for cdf in self._cdfs
            ],
            axis=1,
        )
        ranks[rng.random((n, NUM_SPARSE)) < self._id_missing] = -1
        counts = rng.geometric(1 / (1 + self._count_means), (n, NUM_DENSE)) - 1
        counts_missing = rng.random((n, NUM_DENSE)) < self._count_missing
        counts[counts_missing] = 0
        return ranks, counts.astype(np.int64), counts_missing

    def _logits(self, ranks: np.ndarray, counts: np.ndarray, bias: float) -> np.ndarray:
        present = ranks >= 0
        at = np.maximum(ranks, 0)
        linear = sum(
            np.where(present[:, f], self._weights[f][at[:, f]], 0.0) for f in range(NUM_SPARSE)
        )
        factors = np.stack(
            [
                np.where(present[:, f, None], self._factors[f][at[:, f]], 0.0)
                for f in range(NUM_SPARSE)
            ],
            axis=1,
        )
        # sum over pairs f < g of <v_f, v_g> = (|sum_f v_f|^2 - sum_f |v_f|^2) / 2
        pairs = 0.5 * ((factors.sum(axis=1) ** 2).sum(axis=1) - (factors**2).sum(axis=(1, 2)))
        dense = np.log1p(counts) @ self._count_weights
        return bias + linear + pairs + dense


def _bias_for_rate(logits: np.ndarray, rate: float) -> float:
    """The bias b with mean(sigmoid(logits + b)) = rate, by bisection (the mean rises with b)."""
    low, high = -30.0, 30.0
    for _ in range(60):
        middle = (low + high) / 2
        if _sigmoid(logits + middle).mean() < rate:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(0.5 * x))  # no overflow at any x, unlike 1 / (1 + exp(-x))
