"""Records of nn.functional ops added for PyTorch conformance: power-average (LP) pooling,
max unpooling and alpha dropout."""

import itertools

import numpy as np

from ..opinfo import FLOATS, OpInfo, Sample, make_array

ALL_FLOATS = (*FLOATS, "float16", "bfloat16")


# -- LP pooling -----------------------------------------------------------------------------
def _lp_samples(cases):
    """cases: (input shape, norm_type, kernel_size, kwargs); positive inputs, so fractional
    powers stay real."""

    def build(rng, dtype):
        return [
            Sample((make_array(rng, shape, dtype, 0.1, 2.0), p, k), dict(kw))
            for shape, p, k, kw in cases
        ]

    return build


_LP1D = [((1, 2, 6), 2, 2, {}), ((2, 3, 9), 1, 3, {"stride": 2}), ((3, 8), 3.5, 3, {})]
_LP2D = [
    ((1, 2, 4, 4), 2, 2, {}),
    ((2, 3, 7, 8), 3, (3, 2), {"stride": (2, 1)}),
    ((2, 2, 7, 7), 1.5, 3, {"stride": 2, "ceil_mode": True}),
    ((3, 5, 6), 2, 2, {}),  # unbatched
]
_LP3D = [((1, 1, 2, 4, 4), 2, 2, {}), ((2, 2, 4, 5, 4), 3, (2, 3, 2), {"stride": 1})]


# -- max unpooling --------------------------------------------------------------------------
def _argmax_positions(rng, pooled, unpooled, kernel, stride, padding):
    """A plausible argmax for every pooling window: a random position inside it, as a flat
    index into the unpooled plane. Windows do not overlap (stride >= kernel), so positions
    are distinct, as a max pooling's are for distinct values."""
    flat = np.zeros(pooled, np.int64)
    for d in range(len(pooled)):
        o = np.arange(pooled[d]).reshape([-1 if i == d else 1 for i in range(len(pooled))])
        offset = rng.integers(0, kernel[d], size=pooled)
        pos = np.clip(o * stride[d] - padding[d] + offset, 0, unpooled[d] - 1)
        flat = flat * unpooled[d] + pos
    return flat


def _unpool_samples(cases):
    """cases: (pooled shape, kernel, stride, padding, output size or None)."""

    def build(rng, dtype):
        out = []
        for shape, k, s, p, size in cases:
            nd = len(k)
            default = tuple(
                (n - 1) * si + ki - 2 * pi
                for n, ki, si, pi in zip(shape[-nd:], k, s, p, strict=True)
            )
            target = default if size is None else size[-nd:]
            lead = shape[:-nd]
            idx = np.stack(
                [
                    _argmax_positions(rng, shape[-nd:], target, k, s, p)
                    for _ in range(int(np.prod(lead, dtype=np.int64)))
                ]
            ).reshape(shape)
            kwargs = {"stride": s, "padding": p}
            if size is not None:
                kwargs["output_size"] = size
            out.append(Sample((make_array(rng, shape, dtype), idx, k), kwargs))
        return out

    return build


_UNPOOL1D = [((1, 2, 3), (2,), (2,), (0,), None), ((2, 3, 4), (2,), (3,), (1,), (9,))]
_UNPOOL2D = [
    ((1, 2, 2, 2), (2, 2), (2, 2), (0, 0), None),
    ((2, 3, 3, 4), (2, 3), (2, 3), (1, 0), (5, 13)),
    ((3, 2, 2), (3, 3), (3, 3), (0, 0), (2, 3, 7, 6)),  # unbatched; output_size with N, C
]
_UNPOOL3D = [((1, 1, 2, 2, 2), (2, 2, 2), (2, 2, 2), (0, 0, 0), None)]


# -- alpha dropout --------------------------------------------------------------------------
def _alpha_dropout_samples(shape):
    def build(rng, dtype):
        return [
            Sample((make_array(rng, shape, dtype),), {"p": p, "training": True})
            for p in (0.0, 0.3, 1.0)
        ]

    return build


def _fn(name):
    return f"nn.functional.{name}"


RECORDS = [
    OpInfo(_fn("lp_pool1d"), _lp_samples(_LP1D), dtypes=ALL_FLOATS),
    OpInfo(_fn("lp_pool2d"), _lp_samples(_LP2D), dtypes=ALL_FLOATS),
    OpInfo(_fn("lp_pool3d"), _lp_samples(_LP3D)),  # PyTorch's CPU avg_pool3d lacks halves
    *(
        OpInfo(_fn(f"max_unpool{nd}d"), _unpool_samples(cases), dtypes=ALL_FLOATS)
        for nd, cases in ((1, _UNPOOL1D), (2, _UNPOOL2D), (3, _UNPOOL3D))
    ),
    *(
        OpInfo(_fn(name), _alpha_dropout_samples(shape), random=True, dtypes=ALL_FLOATS)
        for name, shape in itertools.product(
            ("alpha_dropout", "feature_alpha_dropout"), ((2, 3, 4),)
        )
    ),
]
