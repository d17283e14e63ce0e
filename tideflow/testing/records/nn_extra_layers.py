"""Records of nn.functional ops added for PyTorch conformance: glu, rrelu, gumbel_softmax,
local_response_norm, pdist, channel_shuffle. The random ones (rrelu in training,
gumbel_softmax) compare shapes only; tests/unit/test_extra_layers.py checks their statistics."""

import numpy as np

from ..opinfo import FLOATS, OpInfo, Sample, make_array

ALL_FLOATS = (*FLOATS, "float16", "bfloat16")


def _fn(name):
    return f"nn.functional.{name}"


def _glu_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype),)),
        Sample((make_array(rng, (4, 3), dtype), 0)),
        Sample((make_array(rng, (2, 6, 2), dtype),), {"dim": 1}),
        Sample((make_array(rng, (0, 2), dtype),)),
    ]


def _rrelu_samples(training):
    def build(rng, dtype):
        return [
            Sample((make_array(rng, (3, 4), dtype),), {"training": training}),
            Sample((make_array(rng, (5,), dtype), 0.2, 0.4), {"training": training}),
        ]

    return build


def _gumbel_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype),)),
        Sample((make_array(rng, (2, 3, 4), dtype),), {"tau": 0.5, "hard": True, "dim": 1}),
    ]


def _lrn_samples(rng, dtype):
    return [
        Sample((make_array(rng, (2, 5, 4), dtype), 3)),
        Sample((make_array(rng, (2, 5, 3, 4), dtype), 2), {"alpha": 0.1, "beta": 0.5, "k": 2.0}),
        Sample((make_array(rng, (1, 4, 2, 3, 2), dtype), 4)),
        Sample((make_array(rng, (0, 3, 2), dtype), 2)),
    ]


def _distinct_rows(rng, n, d, dtype):
    """Rows apart from one another (a zero distance has a kink PyTorch resolves by
    convention), and one duplicate pair to check that convention."""
    rows = make_array(rng, (n, d), dtype)
    rows[-1] = rows[0]
    return rows


def _pdist_samples(rng, dtype):
    return [
        Sample((make_array(rng, (5, 3), dtype),)),
        Sample((make_array(rng, (4, 2), dtype), 1.0)),
        Sample((make_array(rng, (4, 3), dtype), 3.0)),
        Sample((make_array(rng, (4, 3), dtype), float("inf"))),
        Sample((make_array(rng, (1, 3), dtype),)),
    ]


def _duplicate_row_samples(rng, dtype):
    return [Sample((_distinct_rows(rng, 4, 3, dtype),))]


def _shuffle_samples(rng, dtype):
    return [
        Sample((make_array(rng, (2, 6, 3), dtype), 3)),
        Sample((make_array(rng, (1, 4, 2, 2), dtype), 2)),
        Sample((make_array(rng, (2, 6, 1, 2, 1), dtype), 1)),
    ]


RECORDS = [
    OpInfo(_fn("glu"), _glu_samples, dtypes=ALL_FLOATS),
    OpInfo(_fn("rrelu"), _rrelu_samples(False), dtypes=ALL_FLOATS),
    OpInfo(_fn("rrelu"), _rrelu_samples(True), variant="training", random=True),
    OpInfo(_fn("gumbel_softmax"), _gumbel_samples, random=True),
    OpInfo(_fn("local_response_norm"), _lrn_samples),
    OpInfo(_fn("pdist"), _pdist_samples),
    # a zero distance: the gradient is 0 there by PyTorch's convention, not a limit
    OpInfo(_fn("pdist"), _duplicate_row_samples, variant="duplicate_rows", gradcheck=False),
    OpInfo(_fn("channel_shuffle"), _shuffle_samples, dtypes=(*ALL_FLOATS, "int64")),
]


def _bag_samples(rng, dtype):
    weight = make_array(rng, (6, 3), dtype)
    ids = rng.integers(0, 6, (4, 3)).astype(np.int64)
    flat = rng.integers(0, 6, (7,)).astype(np.int64)
    offsets = np.array([0, 2, 2, 5], np.int64)  # an empty bag
    return [
        Sample((ids, weight)),
        Sample((ids, weight), {"mode": "sum", "padding_idx": int(ids[0, 0])}),
        Sample((ids, weight), {"mode": "max"}),
        Sample((flat, weight, offsets), {"mode": "sum"}),
        Sample((flat, weight, np.array([0, 2, 2, 7])), {"include_last_offset": True}),
        # per_sample_weights in its place (a tensor argument: its gradient is checked too)
        Sample(
            (flat, weight, offsets, None, 2.0, False, "sum", False, make_array(rng, (7,), dtype))
        ),
    ]


RECORDS.append(OpInfo(_fn("embedding_bag"), _bag_samples))
