"""Metrics of binary classifiers on NumPy arrays: the area under the ROC curve and the log loss,
as click-through-rate models are judged."""

from __future__ import annotations

import numpy as np

from ..framework.errors import ShapeError, TideflowError, op_error


class UndefinedMetric(TideflowError, ValueError):
    """A metric asked of data it is not defined on (AUC of labels of one class only)."""


def roc_auc(labels, scores) -> float:
    """The area under the ROC curve: the probability that a random positive scores above a
    random negative, a tie counting one half (the Mann-Whitney U statistic over average ranks,
    so it equals scikit-learn's `roc_auc_score(labels, scores)`). `labels` are 0/1 (or bool),
    `scores` any real numbers of the same length (logits or probabilities rank alike).

    >>> flow.models.roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    0.75
    """
    labels, scores = _binary_inputs("roc_auc", labels, scores)
    positives = int(labels.sum())
    negatives = labels.size - positives
    if positives == 0 or negatives == 0:
        raise UndefinedMetric(
            f"roc_auc: undefined when the labels hold one class only, got {positives} "
            f"positive(s) and {negatives} negative(s)"
        )
    rank_sum = float(_average_ranks(scores)[labels].sum())
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def log_loss(labels, probabilities) -> float:
    """The mean binary cross-entropy, in nats, of 0/1 `labels` under predicted
    `probabilities`, clipped to [eps, 1 - eps] (eps: float64's machine epsilon) so that a
    confident mistake costs a large but finite amount, as scikit-learn's `log_loss` does.

    >>> round(flow.models.log_loss([0, 1], [0.5, 0.5]), 4)
    0.6931
    """
    labels, p = _binary_inputs("log_loss", labels, probabilities)
    eps = np.finfo(np.float64).eps
    p = np.clip(p, eps, 1 - eps)
    return float(-np.where(labels, np.log(p), np.log1p(-p)).mean())


def _binary_inputs(metric: str, labels, scores) -> tuple[np.ndarray, np.ndarray]:
    """`labels` as a bool vector and `scores` as a float64 vector, checked."""
    labels = np.asarray(labels)
    scores = np.asarray(scores, dtype=np.float64)
    if labels.ndim != 1 or scores.shape != labels.shape:
        raise op_error(
            metric,
            f"labels and scores must be vectors of one length, got shapes {labels.shape} and "
            f"{scores.shape}",
            ShapeError,
        )
    if labels.size and not np.isin(labels, (0, 1)).all():
        seen = np.unique(labels)[:5]
        raise op_error(metric, f"labels must be 0 or 1, got values such as {seen.tolist()}")
    if not np.isfinite(scores).all():
        raise op_error(
            metric,
            f"scores must be finite, got {int((~np.isfinite(scores)).sum())} NaN or infinite",
        )
    return labels.astype(bool), scores


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """The 1-based rank of each value in ascending order, tied values sharing the mean of
    their ranks."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    # each run of equal values: its first position and its length
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    lengths = np.diff(np.r_[starts, values.size])
    mean_rank = starts + (lengths + 1) / 2  # 0-based start + mean of ranks 1..length
    ranks = np.empty(values.size)
    ranks[order] = np.repeat(mean_rank, lengths)
    return ranks
