"""The top-level shorthands and predicates (ops/shorthands.py, ops/predicates.py) against
PyTorch: special values for the predicates, integer inputs promoted by deg2rad/rad2deg,
gradients where the ops are differentiable."""

import numpy as np

from ..opinfo import ALL_FLOATS, FLOATS, OpInfo, Sample, make_array

_SPECIAL = np.array([-np.inf, -1.5, -0.0, 0.0, 2.0, np.inf, np.nan])


def _with_specials(rng, dtype):
    samples = [Sample((make_array(rng, (3, 4), dtype),))]
    if dtype in ("float32", "float64"):
        samples.append(Sample((_SPECIAL.astype(dtype),)))
    elif dtype == "bfloat16":
        # a NaN's sign is not defined by the conversion: PyTorch's to bfloat16 sets it
        samples.append(Sample((_SPECIAL[:-1].astype(dtype),)))
    return samples


def _unary(rng, dtype):
    return [Sample((make_array(rng, (3, 4), dtype),)), Sample((make_array(rng, (), dtype),))]


def _dist_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((a(3, 4), a(3, 4))),
        Sample((a(3, 4), a(4)), {"p": 1}),
        Sample((a(5), a(5)), {"p": float("inf")}),
        Sample((a(2, 3), a(2, 3)), {"p": 3}),
    ]


def _creation(name, samples):
    return OpInfo(name, samples, torch=lambda t, *a, **k: getattr(t, name)(*a, **k), grad=False)


RECORDS = [
    OpInfo("signbit", _with_specials, dtypes=(*ALL_FLOATS, "int64"), grad=False),
    OpInfo("isneginf", _with_specials, dtypes=(*ALL_FLOATS, "int64"), grad=False),
    OpInfo("isposinf", _with_specials, dtypes=(*ALL_FLOATS, "int64"), grad=False),
    OpInfo(
        "isreal",
        lambda rng, dt: [
            Sample((make_array(rng, (3, 4), dt),)),
            Sample((make_array(rng, (1,), dt),)),
        ],
        dtypes=(*FLOATS, "complex64", "int64"),
        grad=False,
    ),
    OpInfo("deg2rad", _unary, dtypes=(*ALL_FLOATS, "int64")),
    OpInfo("rad2deg", _unary, dtypes=(*ALL_FLOATS, "int64")),
    OpInfo("positive", _unary, dtypes=(*FLOATS, "int64")),
    OpInfo("ravel", lambda rng, dt: [Sample((make_array(rng, (2, 3, 2), dt),))]),
    OpInfo("msort", lambda rng, dt: [Sample((make_array(rng, (4, 3), dt),))]),
    OpInfo(
        "diagflat",
        lambda rng, dt: [
            Sample((make_array(rng, (2, 2), dt),)),
            Sample((make_array(rng, (3,), dt), -1)),
        ],
    ),
    OpInfo("dist", _dist_samples),
    _creation("logspace", lambda rng, dt: [Sample((0, 2, 5)), Sample((-1, 1, 4), {"base": 2.0})]),
    _creation(
        "tril_indices", lambda rng, dt: [Sample((3, 4)), Sample((4, 3, -1)), Sample((3, 3, 1))]
    ),
    _creation("triu_indices", lambda rng, dt: [Sample((3, 4)), Sample((4, 3, 1)), Sample((0, 0))]),
    _creation("scalar_tensor", lambda rng, dt: [Sample((3,)), Sample((2.5,))]),
    OpInfo(
        "unravel_index",
        lambda rng, dt: [Sample((np.array([0, 4, 8, -1]), (3, 3))), Sample((np.array(5), (2, 3)))],
        dtypes=("int64",),
        grad=False,
    ),
]
