"""Records of the tensors assembled from others (tideflow/ops/assembly.py): products of one to
three vectors (empty ones too), combinations of every length with and without repeats, block
diagonals of 0-, 1- and 2-d blocks of mixed dtypes (empty blocks too), Vandermonde matrices of
every width in both orders, through zeros."""

import numpy as np

from ..opinfo import INTS, OpInfo, Sample, make_array

NUMBERS = ("float32", "float64", *INTS)


def _cartesian_samples(rng, dtype):
    def v(n):
        return make_array(rng, (n,), dtype)

    return [
        Sample((v(3),)),
        Sample((v(2), v(3))),
        Sample((v(2), v(1), v(3))),
        Sample((v(2), v(0))),
    ]


def _combinations_samples(rng, dtype):
    x = make_array(rng, (4,), dtype)
    return [
        Sample((x,)),
        Sample((x, 3)),
        Sample((x, 1)),
        Sample((x, 0), grad=False),  # PyTorch's empty result is cut from the graph
        Sample((x, 5)),
        Sample((x, 2, True)),
        Sample((x,), {"r": 3, "with_replacement": True}),
        Sample((make_array(rng, (0,), dtype),)),
    ]


def _block_diag_samples(rng, dtype):
    def x(*shape):
        return np.asarray(make_array(rng, shape, dtype))

    return [
        Sample((x(2, 3),)),
        Sample((x(2, 3), x(1, 1), x(3, 2))),
        Sample((x(), x(3), x(2, 2))),
        Sample((x(2, 2), x(0, 3), x(2, 0))),
        Sample((x(2, 2), make_array(rng, (2,), "int32"))),  # promoted together
        Sample((x(2, 2), np.asarray(make_array(rng, (), "int64")))),  # a 0-d block ranks lower
        Sample(()),
    ]


def _vander_samples(rng, dtype):
    x = make_array(rng, (4,), dtype)
    with_zero = np.array([0, 1.5, -2, 0.5]).astype(dtype)
    return [
        Sample((x,)),
        Sample((x, 6)),
        Sample((x, 1)),
        Sample((x, 0)),
        Sample((x,), {"increasing": True}),
        Sample((with_zero, 5, True)),
        Sample((make_array(rng, (0,), dtype), 3)),
    ]


def _numpy_vander(x, N=None, increasing=False):
    return np.vander(x, N, increasing)


RECORDS = [
    OpInfo("cartesian_prod", _cartesian_samples, dtypes=(*NUMBERS, "bool")),
    OpInfo("combinations", _combinations_samples, dtypes=(*NUMBERS, "bool")),
    OpInfo("block_diag", _block_diag_samples, dtypes=NUMBERS),
    # NOTE: PyTorch 2.13's vander cannot be differentiated (its in-place running product
    # trips autograd's version check): values against NumPy, gradients numerically; dtypes
    # against PyTorch without gradients
    OpInfo("vander", _vander_samples, ref=_numpy_vander),
    OpInfo("vander", _vander_samples, variant="dtypes", dtypes=(*NUMBERS, "bool"), grad=False),
]
