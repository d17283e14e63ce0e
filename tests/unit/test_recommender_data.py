"""Click-log data and metrics of the recommender models: AUC and log loss against scikit-learn,
the Criteo TSV format (parsing, hashing into keys, errors, streaming, the shipped sample) and
the synthetic generator's laws (Zipf popularity, missing rates, labels drawn from the hidden
model's probabilities)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tideflow.framework.errors import ShapeError, TideflowError
from tideflow.models import criteo, metrics
from tideflow.models.criteo import CriteoFormatError, parse_lines
from tideflow.models.synthetic_criteo import SyntheticCriteo

from .test_nn_layers import run_doctests

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "criteo_sample.tsv"
SAMPLE_SEED, SAMPLE_ROWS = 14, 300  # how tests/data/criteo_sample.tsv was generated


def _line(label="1", counts=("",) * 13, ids=("",) * 26) -> str:
    return "\t".join([label, *counts, *ids]) + "\n"


def _batches_equal(a: criteo.CriteoBatch, b: criteo.CriteoBatch) -> bool:
    return all(
        np.array_equal(getattr(a, f), getattr(b, f))
        for f in ("labels", "dense", "dense_keys", "sparse_keys")
    )


def _concat(batches) -> criteo.CriteoBatch:
    batches = list(batches)
    return criteo.CriteoBatch(
        *(
            np.concatenate([getattr(b, f) for b in batches])
            for f in ("labels", "dense", "dense_keys", "sparse_keys")
        )
    )


# --- metrics -----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 7, 1000])
@pytest.mark.parametrize("ties", [False, True])
def test_roc_auc_equals_scikit_learn(n, ties):
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(n)
    labels = rng.permutation(np.arange(n) % 2)  # both classes present
    scores = rng.integers(0, 4, n).astype(float) if ties else rng.normal(size=n)
    assert metrics.roc_auc(labels, scores) == pytest.approx(
        sklearn_metrics.roc_auc_score(labels, scores), rel=1e-12
    )


def test_roc_auc_counts_a_tie_as_one_half():
    assert metrics.roc_auc([0, 1], [0.3, 0.3]) == 0.5
    assert metrics.roc_auc([True, False, True], [1.0, 0.0, 0.0]) == 0.75


def test_log_loss_equals_scikit_learn():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 500)
    probabilities = rng.uniform(size=500)
    probabilities[:3] = [0.0, 1.0, 0.5]  # clipped, not infinite
    assert metrics.log_loss(labels, probabilities) == pytest.approx(
        sklearn_metrics.log_loss(labels, probabilities), rel=1e-6
    )


@pytest.mark.parametrize(
    ("labels", "scores", "error", "message"),
    [
        ([1, 1], [0.1, 0.2], metrics.UndefinedMetric, "2 positive(s) and 0 negative(s)"),
        ([0, 1], [0.1, 0.2, 0.3], ShapeError, "shapes (2,) and (3,)"),
        ([[0, 1]], [[0.1, 0.2]], ShapeError, "vectors"),
        ([0, 2], [0.1, 0.2], TideflowError, "labels must be 0 or 1, got values such as [0, 2]"),
        ([0, 1], [0.1, float("nan")], TideflowError, "1 NaN or infinite"),
    ],
)
def test_roc_auc_refuses_what_it_is_not_defined_on(labels, scores, error, message):
    with pytest.raises(error, match="roc_auc") as info:
        metrics.roc_auc(labels, scores)
    assert message in str(info.value)


# --- the Criteo format -------------------------------------------------------------------------


def test_parse_lines_reads_labels_counts_hex_ids_and_missing_fields():
    counts = ["3", "", "-2", "0", *[""] * 9]
    ids = ["68fd1e64", "", "FF", "0", *[""] * 22]
    rows = parse_lines([_line("0", counts, ids), _line("1")])
    np.testing.assert_array_equal(rows.labels, [0, 1])
    np.testing.assert_array_equal(rows.counts[0, :4], [3, 0, -2, 0])
    np.testing.assert_array_equal(rows.counts_missing[0, :4], [False, True, False, False])
    np.testing.assert_array_equal(rows.ids[0, :4], [0x68FD1E64, 0, 0xFF, 0])
    np.testing.assert_array_equal(rows.ids_missing[0, :4], [False, True, False, False])
    assert rows.counts_missing[1].all() and rows.ids_missing[1].all()


def test_encode_transforms_counts_and_keys_fields_apart():
    ids = ["ff", "ff", "", "0", *["ff"] * 22]
    batch = criteo.CriteoBatch.from_rows(
        parse_lines([_line("1", ["3", "", "-2", *["3"] * 10], ids)])
    )
    np.testing.assert_allclose(batch.dense[0, :3], [np.log1p(3), 0.0, 0.0], rtol=1e-7)
    assert batch.dense.dtype == np.float32 and batch.labels.dtype == np.float32
    keys = batch.sparse_keys[0]
    assert (keys >= 0).all() and batch.sparse_keys.dtype == np.int64
    assert len(set(keys.tolist())) == 26  # one id in different fields: different keys
    assert keys[2] != keys[3]  # a missing id is not id 0
    assert batch.all_keys.shape == (1, 39)
    # one count in different fields, or a missing count: different keys; equal buckets agree
    again = criteo.CriteoBatch.from_rows(parse_lines([_line("0", ["3"] * 13, ids)]))
    assert batch.dense_keys[0, 0] == again.dense_keys[0, 0]
    assert again.dense_keys[0, 0] != again.dense_keys[0, 1]
    np.testing.assert_array_equal(batch.sparse_keys, again.sparse_keys)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1\t2\t3\n", "expected 40 tab-separated fields"),
        (_line("2"), "the label must be 0 or 1, got '2'"),
        (_line("1", ["x", *[""] * 12]), "field 1 (I1) must be an integer (or empty), got 'x'"),
        (_line("1", ids=["", "12g", *[""] * 24]), "field 15 (C2) must be a hex id"),
        (_line("1", ids=["1" * 17, *[""] * 25]), "field 14 (C1) must be a hex id of at most 16"),
        (_line("1", ids=["é", *[""] * 25]), "field 14 (C1) must be a hex id"),
    ],
)
def test_a_malformed_line_is_named(line, message):
    with pytest.raises(CriteoFormatError) as info:
        parse_lines([_line("1"), line], "sample.tsv, line {}")
    assert f"sample.tsv, line 2: {message}" in str(info.value)


def test_files_round_trip_and_stream_in_batches(tmp_path):
    rows, _ = SyntheticCriteo(seed=3).sample(50)
    path = tmp_path / "clicks.tsv"
    criteo.write_criteo_tsv(path, rows)
    assert criteo.count_rows(path) == 50
    batches = list(criteo.read_criteo_tsv(path, 16))
    assert [len(b) for b in batches] == [16, 16, 16, 2]
    whole = criteo.CriteoBatch.from_rows(rows)
    assert _batches_equal(_concat(batches), whole)
    assert _batches_equal(_concat(criteo.read_criteo_tsv(path, 7, start=10, stop=31)), whole[10:31])


def test_count_rows_counts_a_last_line_without_newline(tmp_path):
    path = tmp_path / "two.tsv"
    path.write_text(_line("0") + _line("1").rstrip("\n"))
    assert criteo.count_rows(path) == 2
    assert len(next(criteo.read_criteo_tsv(path, 8))) == 2


def test_the_shipped_sample_is_the_generators_output():
    rows, _ = SyntheticCriteo(seed=SAMPLE_SEED).sample(SAMPLE_ROWS)
    assert _batches_equal(
        _concat(criteo.read_criteo_tsv(SAMPLE, 128)), criteo.CriteoBatch.from_rows(rows)
    )


def test_doc_examples():
    from tideflow.models import synthetic_criteo

    for module in (metrics, criteo, synthetic_criteo):
        run_doctests(module)


# --- the synthetic generator -------------------------------------------------------------------


def test_synthetic_rows_are_seeded_per_stream():
    source = SyntheticCriteo(seed=5)
    a, pa = source.sample(200, stream=0)
    b, pb = SyntheticCriteo(seed=5).sample(200, stream=0)
    c, _ = source.sample(200, stream=1)
    assert _batches_equal(
        criteo.CriteoBatch.from_rows(a), criteo.CriteoBatch.from_rows(b)
    ) and np.array_equal(pa, pb)
    assert not np.array_equal(a.ids, c.ids)


def _binomial_tolerance(p, n: int) -> float:
    """Four standard deviations of the mean of n coin flips of probability p."""
    return 4 * math.sqrt(p * (1 - p) / n)


def test_synthetic_features_follow_their_laws():
    sizes = [2, 5, 1000, *[10] * 23]
    source = SyntheticCriteo(sizes, zipf_exponent=1.5, seed=1)
    n = 20_000
    rows, _ = source.sample(n)
    for field, size in enumerate(sizes[:3]):
        present = rows.ids[~rows.ids_missing[:, field], field]
        assert len(np.unique(present)) <= size
        top_share = 1 / np.sum((np.arange(size) + 1.0) ** -1.5)  # Zipf: rank 0's probability
        observed = np.unique(present, return_counts=True)[1].max() / len(present)
        assert abs(observed - top_share) < _binomial_tolerance(top_share, len(present))
    missing = rows.counts_missing.mean(axis=0)
    assert missing.max() <= 0.4 + _binomial_tolerance(0.4, n) and missing.max() > 0
    assert (rows.counts[rows.counts_missing] == 0).all() and (rows.counts >= 0).all()


def test_synthetic_labels_are_drawn_from_the_hidden_probabilities():
    source = SyntheticCriteo(click_rate=0.25, seed=2)
    n = 20_000
    rows, probabilities = source.sample(n)
    # labels are Bernoulli(probabilities): their mean matches the probabilities' mean, and
    # the examples the hidden model ranks higher click more often
    tolerance = _binomial_tolerance(probabilities.mean(), n)
    assert abs(rows.labels.mean() - probabilities.mean()) < tolerance
    high = probabilities > np.median(probabilities)
    assert rows.labels[high].mean() > rows.labels[~high].mean()
    # the bias aims the mean probability at the click rate; it was fitted on a draw of its own
    # of 20,000 examples, so it misses by the standard error of that draw's mean
    assert abs(probabilities.mean() - 0.25) < 4 * probabilities.std() * math.sqrt(2 / n)
    assert source.auc_ceiling(rows, probabilities) == metrics.roc_auc(rows.labels, probabilities)


def test_synthetic_refuses_bad_sizes():
    with pytest.raises(ValueError, match="26 positive sizes"):
        SyntheticCriteo([10] * 25)
