"""Records of the finite differences and integrals (tideflow/ops/calculus.py): orders and dims
of `diff` with prepended/appended slices, `gradient` with steps and coordinates at both edge
orders, `trapezoid`/`cumulative_trapezoid` with constant steps and coordinates (1-d along the
dim, or broadcasting), empty dims, integer and bool inputs."""

import numpy as np

import tideflow

from ..opinfo import INTS, OpInfo, Sample, make_array


def _diff_samples(rng, dtype):
    def x(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((x(3, 5),)),
        Sample((x(7),), {"n": 3}),
        Sample((x(3, 5), 2, 0)),
        Sample((x(3, 5),), {"n": 0}),
        Sample((x(3, 5),), {"n": 6}),  # more differences than points: empty
        Sample((x(2, 3, 4), 1, 1, x(2, 2, 4), x(2, 1, 4))),  # prepend, append
        Sample((x(3, 4), 2, -1, None, x(3, 1))),
        Sample((x(0, 3),), {"dim": 0}),
    ]


def _gradient_at(module, y, *coordinates, **kwargs):
    """gradient with one coordinate tensor per dim, given positionally so that the harness
    makes them tensors (global ones too)."""
    return module.gradient(y, spacing=coordinates, **kwargs)


def _gradient_samples(rng, dtype):
    def x(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((x(3, 5),)),
        Sample((x(3, 5),), {"edge_order": 2}),
        Sample((x(3, 5),), {"spacing": 0.5}),
        Sample((x(3, 5),), {"spacing": (2.0, 0.25), "edge_order": 2}),
        Sample((x(3, 5),), {"dim": 1}),
        Sample((x(2, 3, 4),), {"dim": (0, 2), "spacing": (1.5, 3.0)}),
        Sample((x(2),), {}),
    ]


def _increasing(rng, n, dtype):
    return np.cumsum(rng.uniform(0.5, 2.0, size=n)).astype(dtype)


def _coordinate_samples(rng, dtype):
    def x(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((x(3, 5), _increasing(rng, 5, dtype)), {"dim": 1}),
        Sample((x(3, 5), _increasing(rng, 5, dtype)), {"dim": -1, "edge_order": 2}),
        Sample((x(4, 3), _increasing(rng, 4, dtype), _increasing(rng, 3, dtype))),
        Sample((x(3, 2), _increasing(rng, 3, dtype)), {"dim": 0, "edge_order": 2}),
    ]


def _trapezoid_samples(rng, dtype):
    def x(*shape):
        return make_array(rng, shape, dtype)

    coordinates = _increasing(rng, 5, dtype)
    return [
        Sample((x(3, 5),)),
        Sample((x(5),)),
        Sample((x(3, 5),), {"dx": 0.5}),
        Sample((x(5, 3),), {"dx": 2, "dim": 0}),
        Sample((x(3, 5), coordinates)),
        Sample((x(5, 2), coordinates), {"dim": 0}),
        Sample((x(3, 5), x(3, 5))),  # coordinates per row
        Sample((x(3, 5), x(1, 5))),  # broadcasting coordinates
        Sample((x(2, 1),)),
        Sample((x(2, 0),), grad=False),  # PyTorch's zeros are cut from the graph
    ]


def _integer_samples(rng, dtype):
    return [Sample((make_array(rng, (3, 5), dtype, -5, 5),))]


def _bool_samples(rng, dtype):
    return [Sample((make_array(rng, (3, 6), "bool"),)), Sample((make_array(rng, (8,), "bool"), 2))]


RECORDS = [
    OpInfo("diff", _diff_samples),
    OpInfo("diff", _integer_samples, variant="integer", dtypes=INTS, grad=False),
    OpInfo("diff", _bool_samples, variant="bool", dtypes=("bool",), grad=False),
    OpInfo("gradient", _gradient_samples),
    OpInfo(
        "gradient",
        _coordinate_samples,
        variant="coordinates",
        op=lambda *args, **kwargs: _gradient_at(tideflow, *args, **kwargs),
        torch=_gradient_at,
    ),
    OpInfo("gradient", _integer_samples, variant="integer", dtypes=INTS, grad=False),
    OpInfo("trapezoid", _trapezoid_samples),
    OpInfo("trapezoid", _integer_samples, variant="integer", dtypes=INTS, grad=False),
    OpInfo("cumulative_trapezoid", _trapezoid_samples),
    OpInfo("cumulative_trapezoid", _integer_samples, variant="integer", dtypes=INTS, grad=False),
]
