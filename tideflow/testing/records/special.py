"""Records of the special functions (tideflow/ops/special.py), under the names PyTorch gives
them: top-level where torch has them there (lgamma, digamma, polygamma, mvlgamma, i0, logit,
sinc), `special.<name>` otherwise.

Samples stay inside each function's domain and away from its poles, where finite differences
mean nothing. PyTorch has no float16/bfloat16 CPU kernels for erfcx, ndtri, log_ndtr, zeta and
the Bessel j functions, so their records compare float32/float64 only.
"""

import numpy as np

from ..opinfo import BROADCAST_PAIRS, FLOATS, OpInfo, Sample, make_array
from .unary import ALL_FLOATS, SHAPES, float_function, np_dtype, samples


def _with_specials(low, high, specials, **kwargs):
    """The standard samples plus one sample of `specials` (values where the function has a
    defined limit or a special value: 0, +-inf, nan; not differentiated)."""
    base = samples(low, high, **kwargs)

    def build(rng, dtype):
        out = base(rng, dtype)
        if dtype in ALL_FLOATS:
            out.append(Sample((_values(specials, dtype),), dict(kwargs), grad=False))
        return out

    return build


def _values(values, dtype: str) -> np.ndarray:
    return np.asarray(values, np.float64).astype(np_dtype(dtype))


def _through_zero(rng, dtype):
    """Values around 0, where the function's gradient is a limit (i1: 1/2, sinc: 0)."""
    return [Sample((_values([0.0, 0.5, -1.5, 1e-3], dtype),))]


def _polygamma(rng, dtype):
    return [
        Sample((n, make_array(rng, shape, dtype, 0.5, 4.0)))
        for n in (0, 1, 2, 3)
        for shape in SHAPES
    ]


def _mvlgamma(rng, dtype):
    # NOTE: defined for input > (p - 1) / 2, where every lgamma term is finite
    return [
        Sample((make_array(rng, shape, dtype, (p - 1) / 2 + 0.2, 4.0),), {"p": p})
        for p in (1, 2, 3)
        for shape in SHAPES
    ]


def _pairs(x_range, y_range, *, scalars=(), rscalars=(), grad=True):
    """f(x, y) over every broadcasting pair, then `f(x, scalar)` for each of `scalars` and
    `f(scalar, y)` for each of `rscalars` (differentiated unless `grad` is False)."""

    def build(rng, dtype):
        def x(shape):
            return make_array(rng, shape, dtype, *x_range)

        def y(shape):
            return make_array(rng, shape, dtype, *y_range)

        out = [Sample((x(a), y(b)), grad=grad) for a, b in BROADCAST_PAIRS]
        out += [Sample((x((3, 4)), s), grad=grad) for s in scalars]
        out += [Sample((s, y((3, 4)))) for s in rscalars]
        return out

    return build


def _integer_shapes(rng, dtype):
    """gammainc(a, x) with integer shapes `a`: not differentiated (PyTorch has no derivative
    in `a`), promoted with `x`."""
    return [
        Sample((make_array(rng, shape, "int64", 1, 4), make_array(rng, shape, dtype, 0.2, 4.0)))
        for shape in ((3, 4), (5,), ())
    ]


def _incomplete_gamma(name: str) -> list[OpInfo]:
    return [
        OpInfo(f"special.{name}", _pairs((0.5, 3.0), (0.2, 4.0), grad=False), dtypes=ALL_FLOATS),
        OpInfo(f"special.{name}", _integer_shapes, variant="integer_shape"),
    ]


RECORDS = [
    # the gamma function and its derivatives
    *float_function("lgamma", samples(low=0.2, high=5.0)),
    OpInfo(
        "lgamma",
        _with_specials(-3.0, 3.0, [0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, -2.5]),
        variant="specials",
        grad=False,
        dtypes=ALL_FLOATS,
    ),
    *float_function("digamma", samples(low=0.2, high=5.0)),
    OpInfo("polygamma", _polygamma, dtypes=ALL_FLOATS),
    OpInfo("mvlgamma", _mvlgamma, dtypes=ALL_FLOATS),
    # in place, through the Tensor methods
    OpInfo(
        "polygamma",
        _polygamma,
        variant="inplace",
        grad=False,
        op=lambda n, x: x.clone().polygamma_(n),
        torch=lambda torch, n, x: x.clone().polygamma_(n),
    ),
    OpInfo(
        "mvlgamma",
        _mvlgamma,
        variant="inplace",
        grad=False,
        op=lambda x, p: x.clone().mvlgamma_(p),
        torch=lambda torch, x, p: x.clone().mvlgamma_(p),
    ),
    # incomplete gamma and Hurwitz zeta: no derivative in the first operand
    *_incomplete_gamma("gammainc"),
    *_incomplete_gamma("gammaincc"),
    OpInfo(
        "special.zeta", _pairs((1.5, 4.0), (0.5, 3.0), rscalars=(2.5, 3), grad=False), dtypes=FLOATS
    ),
    OpInfo(
        "special.xlog1py",
        _pairs((-3.0, 3.0), (-0.9, 3.0), scalars=(2.5,), rscalars=(2,)),
        dtypes=ALL_FLOATS,
    ),
    # Bessel functions
    *float_function("i0", _with_specials(-3.0, 3.0, [0.0, np.inf, -np.inf, np.nan])),
    *float_function("special.i0e", samples()),
    *float_function("special.i1", samples()),
    *float_function("special.i1e", samples()),
    OpInfo("special.i1", _through_zero, variant="zero", dtypes=FLOATS),
    OpInfo("special.i1e", _through_zero, variant="zero", dtypes=FLOATS),
    OpInfo(
        "sinc",
        _through_zero,
        variant="zero",
        dtypes=FLOATS,
        skips={
            "gradgrad": "sinc' is PyTorch's constant 0 at 0: its derivative there is not -pi^2/3"
        },
    ),
    # NOTE: within |x| < 5: beyond it PyTorch's float64 kernels take an asymptotic form whose
    # absolute error reaches 1.6e-7 (SciPy's, ours, stays near 1e-16); tests/unit/test_special.py
    # checks the far range against tabulated zeros.
    OpInfo("special.bessel_j0", samples(-5.0, 5.0), dtypes=FLOATS, grad=False),
    OpInfo("special.bessel_j1", samples(-5.0, 5.0), dtypes=FLOATS, grad=False),
    # the normal distribution and erfcx
    *float_function("special.ndtr", samples()),
    OpInfo("special.ndtri", samples(0.02, 0.98), dtypes=FLOATS),
    OpInfo("special.log_ndtr", samples(-6.0, 3.0), dtypes=FLOATS),
    OpInfo("special.erfcx", samples(-2.0, 4.0), dtypes=FLOATS),
    # logit, sinc, entr
    OpInfo("logit", samples(0.05, 0.95), dtypes=ALL_FLOATS),
    OpInfo("logit", samples(-0.2, 1.2, eps=0.1), variant="eps", dtypes=ALL_FLOATS),
    *float_function("sinc", _with_specials(-3.0, 3.0, [0.0, -0.0, np.inf, np.nan, 1.0])),
    *float_function("special.entr", _with_specials(0.05, 3.0, [0.0, -1.0, np.inf, np.nan])),
]
