"""Records of the unary elementwise ops (`tideflow.ops.unary`): math functions, rounding,
clamping, predicates and the top-level activations."""

import ml_dtypes
import numpy as np

from ..opinfo import INTS, SHAPES, TOLERANCES, OpInfo, Sample, make_array
from ..opinfo import unary_samples as _unary_samples

# NOTE: float32 first: the meta/SBP tests run a record's first dtype, and float16 partial
# sums (P) cannot reproduce an unsharded result to the SBP check's tolerance.
ALL_FLOATS = ("float32", "float64", "float16", "bfloat16")
NUMERIC = ALL_FLOATS + INTS
ANY = (*NUMERIC, "bool")
NON_FLOAT = (*INTS, "bool")
SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5)


def np_dtype(dtype: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


def samples(low=-3.0, high=3.0, shapes=SHAPES, **kwargs):
    """`opinfo.unary_samples` with every operand an array (`make_array` gives a NumPy scalar,
    not a 0-d array, for a 0-d bool)."""
    base = _unary_samples(low, high, shapes, **kwargs)

    def build(rng, dtype):
        return [Sample(tuple(np.asarray(a) for a in s.args), s.kwargs) for s in base(rng, dtype)]

    return build


def float_function(name: str, build, floats=ALL_FLOATS, **kwargs) -> list[OpInfo]:
    """Records of a function that computes in floating point: float inputs at their own
    tolerances, and integer/bool inputs (promoted to float32) at float32's tolerances."""
    rtol, atol = TOLERANCES["float32"]
    return [
        OpInfo(name, build, dtypes=floats, **kwargs),
        OpInfo(name, build, variant="integer", dtypes=NON_FLOAT, grad=False, rtol=rtol, atol=atol),
    ]


def _away_from_zero(low=0.5, high=3.0):
    """Values of either sign with |x| in [low, high): for functions with a pole at 0."""

    def build(rng, dtype):
        out = []
        for s in SHAPES:
            mag = make_array(rng, s, dtype, low, high)
            if dtype != "bool":
                mag = np.where(rng.random(s) < 0.5, -mag, mag)
            out.append(Sample((np.asarray(mag),)))
        return out

    return build


def _with_specials(low=-3.0, high=3.0, **kwargs):
    """The standard samples plus one of nan, +-inf and signed zeros (float dtypes only; not
    differentiated: finite differences are meaningless there)."""
    base = samples(low, high, **kwargs)

    def build(rng, dtype):
        out = base(rng, dtype)
        if dtype in ALL_FLOATS:
            specials = np.array(SPECIALS).astype(np_dtype(dtype))
            out.append(Sample((specials,), dict(kwargs), grad=False))
        return out

    return build


def _fixed_values(values):
    """One sample of the given values in the record's dtype."""
    return lambda rng, dtype: [Sample((np.array(values).astype(np_dtype(dtype)),))]


def _halves(rng, dtype):
    """Exact ties: round half to even gives 0, 2, -2, 4, ... (no finite differences at ties)."""
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 0.25]).astype(np_dtype(dtype))
    return [Sample((values,), grad=False)]


def _clamp_scalars(rng, dtype):
    out = []
    for lo, hi in ((-1, 1), (-1.5, None), (None, 0.5), (1.0, -1.0)):
        for s in ((3, 4), (), (0,)):
            out.append(Sample((make_array(rng, s, dtype),), {"min": lo, "max": hi}))
    return out


def _clamp_tensors(rng, dtype):
    """Tensor bounds (positional: samples turn positional arrays into tensors), broadcast
    against the input and each other; `crossed` lies below `lo`, where max wins."""
    x = make_array(rng, (3, 4), dtype)
    lo = make_array(rng, (3, 1), dtype, -2.0, 0.0)
    hi = make_array(rng, (4,), dtype, 0.0, 2.0)
    crossed = make_array(rng, (4,), dtype, -3.0, -2.0)
    return [
        Sample((x, lo, hi)),
        Sample((x, lo)),
        Sample((x, None, hi)),
        Sample((x, lo, crossed)),
        Sample((make_array(rng, (4,), dtype), make_array(rng, (2, 4), dtype, -1.0, 0.0))),
    ]


def _clamp_promotes(rng, dtype):
    """Integer tensors with float bounds compute in the default float dtype."""
    return [
        Sample((make_array(rng, (3, 4), dtype),), {"min": 0.5}),
        Sample((make_array(rng, (5,), dtype),), {"min": -1.5, "max": 1.5}),
    ]


def _prelu(rng, dtype):
    def slopes(*shape):
        return make_array(rng, shape, dtype, 0.0, 1.0)

    return [
        Sample((make_array(rng, (2, 3, 4), dtype), slopes(3))),
        Sample((make_array(rng, (2, 3), dtype), slopes(1))),
        Sample((make_array(rng, (5,), dtype), slopes())),
        Sample((make_array(rng, (), dtype), slopes(1))),
        Sample((make_array(rng, (0, 2, 3), dtype), slopes(2))),
    ]


RECORDS = [
    # arithmetic
    OpInfo("neg", samples(), dtypes=NUMERIC),
    OpInfo("abs", samples(), dtypes=NUMERIC),
    OpInfo("abs", samples(), op=lambda x: abs(x), torch=lambda torch, x: abs(x), variant="dunder"),
    OpInfo("square", samples(), dtypes=ANY),
    *float_function("reciprocal", _away_from_zero()),
    # exponentials, logarithms, roots
    *float_function("exp", samples()),
    *float_function("exp2", samples()),
    *float_function("expm1", samples()),
    *float_function("log", samples(low=0.1)),
    OpInfo("log", _with_specials(), variant="specials", grad=False),
    *float_function("log2", samples(low=0.1)),
    *float_function("log10", samples(low=0.1)),
    *float_function("log1p", samples(low=-0.9)),
    *float_function("sqrt", samples(low=0.1)),
    *float_function("rsqrt", samples(low=0.1)),
    # trigonometric and hyperbolic
    *float_function("sin", samples()),
    *float_function("cos", samples()),
    *float_function("tan", samples(low=-1.4, high=1.4)),
    OpInfo("asin", samples(low=-0.95, high=0.95), dtypes=ALL_FLOATS),
    OpInfo("acos", samples(low=-0.95, high=0.95), dtypes=ALL_FLOATS),
    *float_function("atan", samples()),
    *float_function("sinh", samples()),
    *float_function("cosh", samples()),
    *float_function("tanh", samples()),
    OpInfo("tanh", samples(low=-40.0, high=40.0), variant="large"),
    *float_function("asinh", samples()),
    OpInfo("acosh", samples(low=1.1, high=4.0), dtypes=ALL_FLOATS),
    OpInfo("atanh", samples(low=-0.9, high=0.9), dtypes=ALL_FLOATS),
    # sigmoid and the error function
    *float_function("sigmoid", samples()),
    OpInfo("sigmoid", samples(low=-120.0, high=120.0), variant="large"),
    *float_function("erf", samples()),
    *float_function("erfc", samples()),
    OpInfo("erfinv", samples(low=-0.95, high=0.95), dtypes=ALL_FLOATS),
    # rounding
    OpInfo("floor", samples(), dtypes=NUMERIC),
    OpInfo("ceil", samples(), dtypes=NUMERIC),
    OpInfo("trunc", samples(), dtypes=NUMERIC),
    OpInfo("round", samples(), dtypes=NUMERIC),
    OpInfo("round", _halves, variant="ties", dtypes=ALL_FLOATS),
    OpInfo("round", samples(decimals=2), variant="decimals", dtypes=ALL_FLOATS),
    OpInfo(
        "round",
        samples(low=-3000.0, high=3000.0, decimals=-2),
        variant="negative_decimals",
        dtypes=("float32", "float64"),
    ),
    OpInfo("frac", samples(), dtypes=ALL_FLOATS),
    OpInfo("sign", _with_specials(), dtypes=ANY),
    # clamp
    OpInfo("clamp", _clamp_scalars, dtypes=NUMERIC),
    OpInfo("clamp", _clamp_tensors, variant="tensor_bounds", dtypes=ALL_FLOATS),
    OpInfo("clamp", _clamp_promotes, variant="promotes", dtypes=INTS),
    OpInfo("clip", samples(min=-0.5, max=0.5)),
    OpInfo("clamp_min", samples(min=-0.5)),
    OpInfo("clamp_max", samples(max=0.5)),
    # nan_to_num and predicates
    OpInfo("nan_to_num", _with_specials(), dtypes=ANY, dtype_dependent=True),
    OpInfo(
        "nan_to_num",
        _with_specials(nan=1.0, posinf=100.0, neginf=-50.0),
        variant="values",
        dtypes=ALL_FLOATS,
    ),
    OpInfo("isnan", _with_specials(), dtypes=ANY, grad=False),
    OpInfo("isinf", _with_specials(), dtypes=ANY, grad=False),
    OpInfo("isfinite", _with_specials(), dtypes=ANY, grad=False),
    OpInfo("logical_not", _with_specials(), dtypes=ANY, grad=False),
    OpInfo("bitwise_not", samples(), dtypes=NON_FLOAT, grad=False),
    OpInfo(
        "bitwise_not",
        samples(),
        op=lambda x: ~x,
        torch=lambda torch, x: ~x,
        variant="dunder",
        dtypes=NON_FLOAT,
        grad=False,
    ),
    # frexp: powers of two and subnormals split exactly; the specials keep their exponent 0
    OpInfo("frexp", _with_specials(-40.0, 40.0), dtypes=ALL_FLOATS),
    OpInfo(
        "frexp",
        _fixed_values([0.5, 1.0, 2.0**-20, -(2.0**10), 3.0 * 2.0**-140]),
        variant="exact",
        dtypes=("float32", "float64"),
        grad=False,
    ),
    # top-level activations
    OpInfo("relu", samples(), dtypes=NUMERIC),
    OpInfo("selu", samples(), dtypes=ALL_FLOATS),
    OpInfo("celu", samples(), dtypes=ALL_FLOATS),
    OpInfo("celu", samples(alpha=0.5), variant="alpha"),
    OpInfo("threshold", samples(threshold=0.5, value=-2.0), dtypes=NUMERIC),
    OpInfo("hardshrink", samples(), dtypes=ALL_FLOATS),
    OpInfo("hardshrink", samples(lambd=1.5), variant="lambd"),
    OpInfo("prelu", _prelu, dtypes=ALL_FLOATS),
]
