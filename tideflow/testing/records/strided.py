"""Records of the strided views (as_strided, Tensor.unfold) and OneFlow's batch_gather.

Samples read elements more than once (overlapping windows, zero strides) so the gradients'
scatter-adds are exercised, and cover empty and 0-d inputs."""

import numpy as np

from ..opinfo import OpInfo, Sample, make_array

DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "bool")


def _a(rng, shape, dtype):
    # NOTE: make_array gives a NumPy scalar, not a 0-d array, for shape ()
    return np.asarray(make_array(rng, shape, dtype))


def _cases(cases):
    """cases: (input shape, args, kwargs)."""
    return lambda rng, dtype: [Sample((_a(rng, s, dtype), *args), kw) for s, args, kw in cases]


_AS_STRIDED = [
    ((3, 4), ((2, 2), (1, 2)), {}),
    ((3, 4), ((2, 3), (4, 1)), {"storage_offset": 1}),
    ((10,), ((4, 3), (2, 1)), {}),  # overlapping windows
    ((2, 3), ((3, 2), (0, 1)), {"storage_offset": 4}),  # a zero stride repeats rows
    ((2, 3), ((), ()), {"storage_offset": 5}),
    ((0, 3), ((0, 2), (1, 1)), {}),
]
_UNFOLD = [
    ((7,), (0, 3, 2), {}),
    ((2, 5, 3), (1, 2, 1), {}),  # overlapping windows
    ((2, 6, 3), (-2, 2, 3), {}),  # step past the window: skipped elements
    ((2, 3), (1, 3, 1), {}),
    ((3, 4), (0, 0, 1), {}),
    ((), (0, 1, 1), {}),
]


def _unfold(x, *args, **kwargs):
    return x.unfold(*args, **kwargs)


def _batch_gather_samples(rng, dtype):
    cases = [  # input shape, indices shape: leading dims shared, indices into the next one
        ((4, 3), (5,)),
        ((2, 3, 4), (2, 5)),
        ((2, 2, 3, 2), (2, 2, 2)),
        ((2, 3, 4), (2, 0)),
        ((2, 3, 0), (2, 2)),
    ]
    return [
        Sample((_a(rng, xs, dtype), rng.integers(0, xs[len(ids) - 1], size=ids)))
        for xs, ids in cases
    ]


def _batch_gather_ref(x, indices):
    batch = indices.ndim - 1
    rest = x.ndim - batch - 1
    picks = indices.reshape(indices.shape + (1,) * rest)
    return np.take_along_axis(x, picks, axis=batch)


RECORDS = [
    OpInfo("as_strided", _cases(_AS_STRIDED), dtypes=DTYPES),
    OpInfo(
        "Tensor.unfold",
        _cases(_UNFOLD),
        op=_unfold,
        torch=lambda torch, x, *args, **kw: _unfold(x, *args, **kw),
        dtypes=DTYPES,
    ),
    OpInfo("batch_gather", _batch_gather_samples, ref=_batch_gather_ref, dtypes=DTYPES),
]
