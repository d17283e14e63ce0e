"""Records of the losses added for PyTorch conformance: gaussian_nll_loss and the margin
losses (hinge embedding, multi-class and multi-label margins, triplet with any distance)."""

import numpy as np

import tideflow as flow

from ..opinfo import OpInfo, Sample, make_array
from .nn import _constant_record, _fn, _targets

_REDUCTIONS = ({}, {"reduction": "sum"}, {"reduction": "none"})


def _gaussian_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    def var(*shape):  # away from the eps clamp, where the gradient is the formula's
        return make_array(rng, shape, dtype, 0.2, 2.0)

    return [
        Sample((a(3, 4), a(3, 4), var(3, 4))),
        Sample((a(3, 4), a(3, 4), var(3)), {"reduction": "sum"}),  # one variance per row
        Sample((a(3, 4), a(3, 4), var(3, 1)), {"full": True, "reduction": "none"}),
        Sample((a(2, 3, 4), a(2, 3, 4), 0.5), {"full": True}),  # a number
        Sample((a(5), a(5), var(5)), {"eps": 0.1}),
    ]


def _clamped_variance_samples(rng, dtype):
    """Variances below eps: the loss uses eps, the gradient passes as if unclamped (PyTorch's
    rule, which a numerical gradient cannot see)."""
    x, t = make_array(rng, (6,), dtype), make_array(rng, (6,), dtype)
    return [Sample((x, t, make_array(rng, (6,), dtype, 0.01, 1.0)), {"eps": 0.3})]


def _sign_target_samples(rng, dtype):
    """hinge_embedding_loss: distances and targets of -1 / 1 (constants)."""
    out = []
    for shape, margin in (((3, 4), 1.0), ((5,), 0.5), ((), 2.0)):
        for r in _REDUCTIONS:
            sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0).astype(dtype)
            x = make_array(rng, shape, dtype, 0.0, 3.0)
            out.append(Sample((x,), {"target": sign, "margin": margin, **r}))
    return out


def _multi_margin_samples(rng, dtype):
    out = []
    for p, margin in ((1, 1.0), (2, 0.5)):
        for r in _REDUCTIONS:
            out.append(Sample((make_array(rng, (4, 5), dtype), _targets(rng, (4,), 5)),
                              {"p": p, "margin": margin, **r}))  # fmt: skip
    weight = make_array(rng, (5,), dtype, 0.5, 2.0)
    out.append(Sample((make_array(rng, (4, 5), dtype), _targets(rng, (4,), 5)),
                      {"weight": weight, "p": 2}))  # fmt: skip
    out.append(Sample((make_array(rng, (5,), dtype), _targets(rng, (), 5))))
    return out


def _label_lists(rng, n_rows, n_classes):
    """Per row a few distinct classes, then -1 and anything after it (ignored)."""
    rows = []
    for _ in range(n_rows):
        k = int(rng.integers(0, n_classes))
        row = list(rng.permutation(n_classes)[:k]) + [-1] * (n_classes - k)
        if k + 1 < n_classes:
            row[k + 1] = int(rng.integers(0, n_classes))  # after the -1: not a label
        rows.append(row)
    return np.array(rows, np.int64)


def _multilabel_margin_samples(rng, dtype):
    out = [Sample((make_array(rng, (4, 5), dtype), _label_lists(rng, 4, 5)), r)
           for r in _REDUCTIONS]  # fmt: skip
    out.append(Sample((make_array(rng, (4,), dtype), _label_lists(rng, 1, 4)[0])))
    return out


def _multilabel_soft_margin_samples(rng, dtype):
    def labels(*shape):
        return (rng.random(shape) < 0.5).astype(dtype)

    out = [Sample((make_array(rng, (3, 4), dtype), labels(3, 4)), r) for r in _REDUCTIONS]
    weight = make_array(rng, (4,), dtype, 0.5, 2.0)
    out.append(Sample((make_array(rng, (3, 4), dtype), labels(3, 4)), {"weight": weight}))
    out.append(Sample((make_array(rng, (4,), dtype), labels(4)), {"reduction": "sum"}))
    return out


def _triplet_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    out = [Sample((a(3, 4), a(3, 4), a(3, 4)), r) for r in _REDUCTIONS]
    out.append(Sample((a(3, 4), a(3, 4), a(3, 4)), {"swap": True, "margin": 2.0}))
    out.append(Sample((a(4), a(4), a(4)), {"margin": 0.5}))
    return out


def _cosine_distance(lib):
    return lambda x, y: 1 - lib.nn.functional.cosine_similarity(x, y, dim=-1)


def _triplet_with(lib):
    """triplet_margin_with_distance_loss with a distance other than the default."""

    def call(a, p, n, **kw):
        return lib.nn.functional.triplet_margin_with_distance_loss(
            a, p, n, distance_function=_cosine_distance(lib), **kw
        )

    return call


RECORDS = [
    OpInfo(_fn("gaussian_nll_loss"), _gaussian_samples),
    OpInfo(_fn("gaussian_nll_loss"), _clamped_variance_samples, variant="clamped", gradcheck=False),
    _constant_record("hinge_embedding_loss", _sign_target_samples),
    _constant_record("multi_margin_loss", _multi_margin_samples),
    OpInfo(_fn("multilabel_margin_loss"), _multilabel_margin_samples),
    _constant_record("multilabel_soft_margin_loss", _multilabel_soft_margin_samples),
    OpInfo(_fn("triplet_margin_with_distance_loss"), _triplet_samples),
    OpInfo(
        _fn("triplet_margin_with_distance_loss"),
        _triplet_samples,
        variant="cosine_distance",
        op=_triplet_with(flow),
        torch=lambda torch, *args, **kw: _triplet_with(torch)(*args, **kw),
    ),
]
