"""Records of the binary/ternary elementwise family (tideflow/ops/binary.py).

Samples cover every broadcasting pair (zero-size and 0-d included), tensor-scalar and
scalar-tensor calls, integer and bool dtypes where the op takes them, mixed-dtype promotion,
and the special values (0**0, ties, nan, inf) where PyTorch defines a particular gradient.
"""

import numpy as np

import tideflow as flow

from ..opinfo import BROADCAST_PAIRS, INTS, OpInfo, Sample, make_array

FLOATING = ("float32", "float64", "float16", "bfloat16")  # float32 first: meta/SBP tests use it
NUMERIC = FLOATING + INTS
WITH_BOOL = (*NUMERIC, "bool")


# -- operand draws: f(rng, shape, dtype) -> array -------------------------------------------
def _draw(rng, shape, dtype: str, low=-3.0, high=3.0) -> np.ndarray:
    # NOTE: make_array gives a NumPy scalar, not an array, for a 0-d bool (`rng.random(()) <
    # 0.5`), which the harness would pass through as a Python-level operand.
    return np.asarray(make_array(rng, shape, dtype, low, high))


def _uniform(low=-3.0, high=3.0):
    return lambda rng, shape, dtype: _draw(rng, shape, dtype, low, high)


def _away_from_zero(low=0.5, high=3.0):
    """Magnitudes in [low, high) (integers 1..3) with random signs: divisors."""

    def draw(rng, shape, dtype):
        if dtype.startswith(("int", "uint")):
            magnitude = rng.integers(1, 4, size=shape)
        else:
            magnitude = rng.uniform(low, high, size=shape)
        sign = np.where(rng.random(shape) < 0.5, -1, 1)
        return _as(magnitude * sign, dtype)

    return draw


def _integral_values(low=-2, high=3):
    """Small integers in any dtype: comparisons and logical ops see ties and zeros."""
    return lambda rng, shape, dtype: _as(rng.integers(low, high, size=shape), dtype)


def _as(values, dtype: str) -> np.ndarray:
    if dtype == "bool":
        return np.asarray(np.asarray(values) != 0)  # a 0-d comparison gives a NumPy scalar
    if dtype == "bfloat16":
        import ml_dtypes

        return np.asarray(values, np.float32).astype(ml_dtypes.bfloat16)
    return np.asarray(values).astype(dtype)


# -- sample builders ------------------------------------------------------------------------
def _pairs(x=None, y=None, *, scalars=(2.5, -2), rscalars=(), pairs=BROADCAST_PAIRS, **kwargs):
    """f(x, y) over every broadcasting pair, then `x (3, 4) <op> scalar` for each of `scalars`
    and `scalar <op> y (3, 4)` for each of `rscalars`. `x`/`y` draw the operands."""
    draw_x = x or _uniform()
    draw_y = y or draw_x

    def build(rng, dtype):
        out = [
            Sample((draw_x(rng, a, dtype), draw_y(rng, b, dtype)), dict(kwargs)) for a, b in pairs
        ]
        out += [Sample((draw_x(rng, (3, 4), dtype), s), dict(kwargs)) for s in scalars]
        out += [Sample((s, draw_y(rng, (3, 4), dtype)), dict(kwargs)) for s in rscalars]
        return out

    return build


def _fixed(*calls, **kwargs):
    """Hand-written samples: each call is a tuple of lists/scalars; lists become arrays of the
    record's dtype."""

    def build(rng, dtype):
        return [
            Sample(tuple(_as(a, dtype) if isinstance(a, list) else a for a in call), dict(kwargs))
            for call in calls
        ]

    return build


def _mixed():
    """Operands of different dtypes (the record's dtype is ignored): PyTorch's promotion
    between dimensioned tensors, 0-d tensors and Python scalars. Values are in [1, 4), so
    every op (division, pow) is defined."""
    cases = (
        (("int32", (3, 4)), 2.5),
        (("int32", (3, 4)), ("float32", ())),
        (("float16", (3, 4)), ("float64", ())),
        (("bfloat16", (3, 4)), ("float16", (3, 4))),
        (("int32", (4,)), ("int64", (3, 4))),
        (("bool", (3, 4)), 2),
        (("bool", (3, 4)), ("float32", (4,))),
        (("uint8", (3, 4)), ("int8", (4,))),
        (("float32", (3, 4)), ("float64", (4,))),
        (("int64", ()), ("float16", (3,))),
        (3, ("int16", (2, 2))),
    )

    def build(rng, dtype):
        def draw(spec):
            if not isinstance(spec, tuple):
                return spec
            dt, shape = spec
            return _draw(rng, shape, dt, 1.0, 4.0)

        return [Sample((draw(a), draw(b))) for a, b in cases]

    return build


def _int_pow_samples(rng, dtype):
    signed = dtype != "uint8"
    rscalars = (2, -1) if signed else (2,)
    out = _pairs(_uniform(-3, 4), _uniform(0, 4), scalars=(2, 0, 3, 2.5), rscalars=rscalars)(
        rng, dtype
    )
    if signed:  # negative tensor exponents: 0 unless the base is +-1
        base, exponent = [0, 1, -1, -1, 2, -3], [2, -3, -3, -2, -1, -2]
        out.append(Sample((_as(base, dtype), _as(exponent, dtype))))
    return out


def _shift_samples(rng, dtype):
    out = _pairs(_uniform(-100, 100), _uniform(0, 8), scalars=(3,), rscalars=(5,))(rng, dtype)
    # past the width and negative: << gives 0, >> the sign fill
    bits = np.dtype(dtype).itemsize * 8
    counts = [-1, bits - 1, bits, bits + 3, 1, 0]
    out.append(Sample((_as([-7, -7, -7, 7, 1, 1], dtype), _as(counts, dtype))))
    return out


def _where_samples(rng, dtype):
    def x(shape):
        return _draw(rng, shape, dtype)

    def cond(shape):
        return _draw(rng, shape, "bool")

    return [
        Sample((cond((3, 4)), x((3, 4)), x((3, 4)))),
        Sample((cond((3, 1)), x((4,)), x((3, 4)))),
        Sample((cond((4,)), x((2, 1, 4)), x((3, 1)))),
        Sample((cond(()), x((3,)), x(()))),
        Sample((cond((0, 3)), x((3,)), x((0, 1)))),
        Sample((cond((3, 4)), x((3, 4)), 2.5)),
        Sample((cond((3, 4)), -2, x((4,)))),
        Sample((cond((3, 4)), 1, 2.5)),
        Sample((cond((2, 3)), True, False)),
    ]


def _lerp_samples(rng, dtype):
    def x(shape):
        return _draw(rng, shape, dtype)

    def w(shape):
        return _draw(rng, shape, dtype, -0.5, 1.5)  # both sides of PyTorch's 0.5 switch

    return [
        Sample((x((3, 4)), x((3, 4)), 0.3)),
        Sample((x((3, 4)), x((3, 4)), 0.8)),
        Sample((x((3, 4)), x((3, 4)), w((3, 4)))),
        Sample((x((3, 1)), x((1, 4)), w((4,)))),
        Sample((x(()), x((3,)), w(()))),
        Sample((x((0, 3)), x((3,)), 0.5)),
        Sample((x((2, 3)), x((2, 3)), w((1, 3)))),
    ]


def _addc_samples(value=1, divide=False):
    def build(rng, dtype):
        def x(shape):
            return _draw(rng, shape, dtype)

        def t2(shape):
            return _away_from_zero()(rng, shape, dtype) if divide else x(shape)

        kw = {} if value == 1 else {"value": value}
        return [
            Sample((x((3, 4)), x((3, 4)), t2((3, 4))), dict(kw)),
            Sample((x((3, 1)), x((4,)), t2((3, 4))), dict(kw)),
            Sample((x(()), x((2, 1, 4)), t2((3, 1))), dict(kw)),
            Sample((x((0, 3)), x((3,)), t2((1, 3))), dict(kw)),
        ]

    return build


def _close_samples(**kwargs):
    def build(rng, dtype):
        x = _draw(rng, (4, 5), dtype)
        if dtype in ("bool", *INTS):
            y = x.copy()
            y[::2] = _draw(rng, (2, 5), dtype)
            return [Sample((x, y), dict(kwargs)), Sample((x, x[0]), dict(kwargs))]
        scale = np.array([0.0, 1e-9, 1e-6, 1e-4, 1e-2])  # from equal to clearly apart
        y = _as(x.astype(np.float64) * (1 + scale), dtype)
        special = [np.nan, np.inf, -np.inf, 1.0, np.nan, np.inf]
        other = [np.nan, np.inf, np.inf, np.nan, 1.0, np.nan]
        return [
            Sample((x, y), dict(kwargs)),
            Sample((x, y[0]), dict(kwargs)),
            Sample((_as(special, dtype), _as(other, dtype)), dict(kwargs)),
            Sample((x, 0.5), dict(kwargs)),
        ]

    return build


# -- oracles --------------------------------------------------------------------------------
def _tensorized(name):
    """torch.<name> with Python scalars passed as 0-d tensors (many torch functions take only
    tensors). Next to a dimensioned tensor a 0-d tensor promotes exactly like a scalar."""

    def call(torch, *args, **kwargs):
        args = tuple(a if isinstance(a, torch.Tensor) else torch.tensor(a) for a in args)
        return getattr(torch, name)(*args, **kwargs)

    return call


def _isclose(torch, x, y, **kwargs):
    """torch.isclose takes a tensor of the input's dtype only."""
    y = y if isinstance(y, torch.Tensor) else torch.tensor(y, dtype=x.dtype)
    return torch.isclose(x, y, **kwargs)


def _python_bool(fn):
    """`fn`, which returns a Python bool, with the answer as a bool tensor: the oracle tests
    read a dtype off every output (harness.dtype_name), which a Python bool lacks."""

    def call(*args, **kwargs):
        out = fn(*args, **kwargs)
        if type(out) is not bool:
            raise TypeError(f"{fn.__name__} returned a {type(out).__name__}, not a bool")
        return flow.tensor(out)

    return call


def _operator(fn):
    """A record of a Python operator on tensors, the same expression for both frameworks."""
    return {"op": fn, "torch": lambda torch, *args: fn(*args)}


def _record(name, builder, dtypes, grad=True, **kw):
    """A record of a PyTorch function that may not take Python scalars."""
    return OpInfo(name, builder, torch=_tensorized(name), dtypes=dtypes, grad=grad, **kw)


def _ldexp_samples(rng, dtype):
    """Floating mantissas with integer exponents (PyTorch's common call) and floating ones."""
    out = _pairs(y=_integral_values(-3, 4), scalars=())(rng, dtype)
    # NOTE: non-negative: PyTorch differentiates 2**other in the integer dtype, so its
    # gradient is 0 where an integer exponent is negative (ours is 2**other)
    out.append(Sample((_draw(rng, (3, 4), dtype), _draw(rng, (4,), "int32", 0, 5))))
    return out


# Mixed-dtype records are checked on simulated ranks with float16 operands, whose partial
# sums do not add back exactly.
MIXED_TOL = {"rtol": 2e-3, "atol": 1e-2}
DIVISOR = _away_from_zero()
POSITIVE = _uniform(0.5, 3.0)
SMALL_INTS = _integral_values()

RECORDS = [
    # number theory, steps and float representation (no gradients but ldexp's and
    # float_power's)
    _record("gcd", _pairs(_uniform(-20, 20), scalars=()), (*INTS, "int16", "uint8"), grad=False),
    _record("gcd", _fixed(([0, 0, -12, 7], [0, -5, 18, 0])), INTS, variant="zeros", grad=False),
    _record("lcm", _pairs(_uniform(-20, 20), scalars=()), (*INTS, "int16"), grad=False),
    _record("lcm", _fixed(([0, 0, -4, 6], [0, -5, 6, -4])), INTS, variant="zeros", grad=False),
    _record("heaviside", _pairs(SMALL_INTS, scalars=()), WITH_BOOL, grad=False),
    _record(
        "heaviside",
        _fixed(([np.nan, 0, -0.0, np.inf, -np.inf], [2, np.nan, 3, 4, 5])),
        ("float32", "float64"),
        variant="special",
        grad=False,
    ),
    # the next value is the dtype's own: halves are compared with PyTorch's halves
    _record("nextafter", _pairs(scalars=()), FLOATING, grad=False, dtype_dependent=True),
    _record(
        "nextafter",
        _fixed(([0, -0.0, 1, np.nan, np.inf, 2, -0.0], [-1, 1, 1, 0, 0, np.nan, 0])),
        FLOATING,
        variant="special",
        grad=False,
        dtype_dependent=True,
    ),
    _record("ldexp", _ldexp_samples, FLOATING),
    _record("ldexp", _pairs(y=_integral_values(-3, 4), scalars=()), INTS, variant="integer"),
    OpInfo(
        "float_power",
        _pairs(POSITIVE, _uniform(-2, 2), scalars=(2, -1, 0.5), rscalars=(2.5,)),
        dtypes=NUMERIC,
    ),
    OpInfo("float_power", _pairs(POSITIVE, scalars=(0.5j,)), variant="complex", grad=False),
    # arithmetic
    _record("add", _pairs(rscalars=(2.5,)), WITH_BOOL),
    _record("add", _pairs(alpha=2), NUMERIC, variant="alpha"),
    _record("add", _pairs(alpha=0.5), FLOATING, variant="float_alpha"),
    _record("sub", _pairs(rscalars=(2.5,)), NUMERIC),
    _record("sub", _pairs(alpha=-3), NUMERIC, variant="alpha"),
    _record("mul", _pairs(rscalars=(2.5,)), WITH_BOOL),
    _record("div", _pairs(y=DIVISOR, rscalars=(2.5,)), NUMERIC),
    _record("div", _pairs(y=DIVISOR, rounding_mode="trunc"), NUMERIC, variant="trunc"),
    _record("div", _pairs(y=DIVISOR, rounding_mode="floor"), NUMERIC, variant="floor"),
    # PyTorch has no derivative for floor_divide (div(rounding_mode='floor') has zeros)
    _record("floor_divide", _pairs(y=DIVISOR, rscalars=(5,)), NUMERIC, grad=False),
    _record("remainder", _pairs(y=DIVISOR, rscalars=(5, 2.5)), NUMERIC),
    _record("fmod", _pairs(y=DIVISOR, rscalars=(5, 2.5)), NUMERIC),
    _record("subtract", _pairs(), ("float32",)),
    _record("multiply", _pairs(), ("float32",)),
    _record("divide", _pairs(y=DIVISOR), ("float32",)),
    _record("true_divide", _pairs(y=DIVISOR), ("float32", "int32")),
    # pow: positive bases for tensor exponents (a negative base has a nan exponent gradient)
    _record(
        "pow",
        _pairs(POSITIVE, _uniform(-2, 2), scalars=(2, 3, -1, 0.5, 0), rscalars=(2.5,)),
        FLOATING,
    ),
    _record("pow", _pairs(scalars=(2, 3, 0), pairs=()), FLOATING, variant="negative_base"),
    _record("pow", _int_pow_samples, (*INTS, "uint8", "int8"), variant="integer"),
    _record(
        "pow",
        _fixed(
            ([0, 0, 0, 2, -2, -2], [0, 1, -1, 0, 2, 0.5]),
            ([0, 2, -1], 0),
            ([0, 2, -1], 0.5),
            ([0, 2, -1], -1),
            (0, [0, 1, -1]),
            (-2, [0, 1, -1]),
        ),
        ("float64", "float32"),
        variant="special",
        gradcheck=False,
    ),
    # floating point functions of two arguments
    _record("atan2", _pairs(rscalars=(2.5,)), NUMERIC),
    _record(
        "atan2",
        _fixed(([0, 0, 1, -0.0], [0, -0.0, 0, 0])),
        ("float64",),
        variant="origin",
        gradcheck=False,
    ),
    _record("arctan2", _pairs(), ("float32",)),
    _record("hypot", _pairs(rscalars=(2.5,)), FLOATING),
    _record("hypot", _fixed(([0, 3], [0, 4])), ("float64",), variant="origin", gradcheck=False),
    _record("copysign", _pairs(rscalars=(2.5,)), NUMERIC),
    _record(
        "copysign",
        _fixed(([0, -0.0, 2, -2], [1, -1, -0.0, 0])),
        ("float64",),
        variant="zeros",
        gradcheck=False,
    ),
    _record("xlogy", _pairs(y=POSITIVE, scalars=(2.5, 3), rscalars=(2, 0)), FLOATING),
    _record("xlogy", _pairs(y=_uniform(1, 4), scalars=(3,)), INTS, variant="integer"),
    _record(
        "xlogy",
        _fixed(([0, 0, 1, 2, 0, 0, 3], [0, -1, 2, 0, np.nan, np.inf, -1])),
        ("float64", "float32"),
        variant="special",
        gradcheck=False,
    ),
    _record("logaddexp", _pairs(rscalars=(2.5,)), FLOATING),
    _record("logaddexp2", _pairs(rscalars=(2.5,)), FLOATING),
    _record(
        "logaddexp",
        _fixed(([-np.inf, 1, np.inf, -np.inf, 500], [-np.inf, 2, np.inf, 0, -500])),
        ("float64",),
        variant="infinite",
        gradcheck=False,
    ),
    # maximum and minimum
    *(_record(n, _pairs(rscalars=(0.5,)), WITH_BOOL) for n in ("maximum", "minimum")),
    *(_record(n, _pairs(rscalars=(0.5,)), NUMERIC) for n in ("fmax", "fmin")),
    *(
        _record(
            n,
            _fixed(([1, 2, 3, np.nan, 1, np.nan], [1, 3, 2, 1, np.nan, np.nan]), ([1, 2, 3], 2)),
            ("float64", "float32"),
            variant="ties",
            gradcheck=False,
        )
        for n in ("maximum", "minimum", "fmax", "fmin")
    ),
    # comparisons (integral values, so ties occur)
    *(
        _record(n, _pairs(SMALL_INTS, scalars=(1, 0.5), rscalars=(1,)), WITH_BOOL, grad=False)
        for n in ("eq", "ne", "lt", "le", "gt", "ge")
    ),
    *(
        _record(n, _pairs(SMALL_INTS), ("float32",), grad=False)
        for n in ("greater", "greater_equal", "less", "less_equal", "not_equal")
    ),
    # in place: 1 and 0 in the tensor's own dtype (its shape: the other operand broadcasts)
    *(
        OpInfo(
            n,
            _fixed(([1, 2, 3, 2], [2, 2, 0, 3]), ([1, 2, 3, 2], 2)),
            variant="inplace",
            dtypes=("float32", "int64"),
            grad=False,
            op=lambda x, y, n=n: getattr(x.clone(), f"{n}_")(y),
            torch=lambda torch, x, y, n=n: getattr(x.clone(), f"{n}_")(y),
        )
        for n in (
            *("eq", "ne", "lt", "le", "gt", "ge"),
            *("greater", "greater_equal", "less", "less_equal", "not_equal"),
        )
    ),
    # logical and bitwise
    *(
        _record(
            n,
            _pairs(SMALL_INTS, scalars=(0, 2.5), rscalars=(True,)),
            ("bool", "float32", "int32", "bfloat16"),
            grad=False,
        )
        for n in ("logical_and", "logical_or", "logical_xor")
    ),
    *(
        _record(
            n,
            _pairs(_uniform(-100, 100), scalars=(3, True), rscalars=(12,)),
            ("int32", "int64", "bool", "uint8", "int8", "int16"),
            grad=False,
        )
        for n in ("bitwise_and", "bitwise_or", "bitwise_xor")
    ),
    *(
        _record(n, _shift_samples, ("int32", "int64", "int8", "int16"), grad=False)
        for n in ("bitwise_left_shift", "bitwise_right_shift")
    ),
    # ternary
    OpInfo("where", _where_samples, dtypes=WITH_BOOL),
    OpInfo(
        "where",
        _fixed((np.array([[True, False], [False, True]]),), (np.array([False]),)),
        dtypes=("float32",),
        grad=False,
        variant="nonzero",
    ),
    OpInfo("lerp", _lerp_samples, dtypes=FLOATING),
    OpInfo("addcmul", _addc_samples(), dtypes=NUMERIC),
    OpInfo("addcmul", _addc_samples(value=0.5), dtypes=FLOATING, variant="value"),
    OpInfo("addcmul", _addc_samples(value=2.7), dtypes=INTS, variant="int_value"),
    OpInfo("addcdiv", _addc_samples(divide=True), dtypes=FLOATING),
    OpInfo("addcdiv", _addc_samples(value=-2, divide=True), dtypes=FLOATING, variant="value"),
    # closeness
    OpInfo("isclose", _close_samples(), torch=_isclose, dtypes=WITH_BOOL, grad=False),
    OpInfo(
        "isclose",
        _close_samples(rtol=1e-3, atol=1e-6, equal_nan=True),
        torch=_isclose,
        dtypes=FLOATING,
        grad=False,
        variant="tolerances",
    ),
    OpInfo(
        "allclose",
        _close_samples(),
        op=_python_bool(flow.allclose),
        ref=lambda x, y, **kw: np.asarray(np.allclose(x, y, **kw)),
        dtypes=("float32", "float64"),
        grad=False,
    ),
    OpInfo(
        "allclose",
        _fixed(([1, np.nan], [1, np.nan]), equal_nan=True),
        op=_python_bool(flow.allclose),
        ref=lambda x, y, **kw: np.asarray(np.allclose(x, y, **kw)),
        dtypes=("float32",),
        grad=False,
        variant="equal_nan",
    ),
    OpInfo(
        "equal",
        _fixed(([1, 2, 3], [1, 2, 3]), ([1, 2, 3], [1, 2, 4]), ([1, 2], [1, 2, 3]), ([1], [1])),
        op=_python_bool(flow.equal),
        ref=lambda x, y: np.asarray(x.shape == y.shape and np.array_equal(x, y)),
        dtypes=("float32", "int64", "bool"),
        grad=False,
    ),
    # promotion across dtypes (the record's dtype is ignored)
    *(
        _record(n, _mixed(), ("float32",), grad=False, variant="promotion", **MIXED_TOL)
        for n in (
            "add",
            "mul",
            "div",
            "floor_divide",
            "remainder",
            "fmod",
            "pow",
            "atan2",
            "maximum",
            "fmin",
            "eq",
            "lt",
            "copysign",
            "xlogy",
        )
    ),
    # Python operators, scalars on either side
    *(
        OpInfo(name, _pairs(rscalars=(2.5,)), variant="operator", dtypes=NUMERIC, **_operator(fn))
        for name, fn in (
            ("add", lambda x, y: x + y),
            ("sub", lambda x, y: x - y),
            ("mul", lambda x, y: x * y),
        )
    ),
    *(
        OpInfo(
            name,
            _pairs(y=DIVISOR, rscalars=(5,)),
            variant="operator",
            dtypes=NUMERIC,
            grad=grad,
            **_operator(fn),
        )
        for name, fn, grad in (
            ("floor_divide", lambda x, y: x // y, False),
            # PyTorch has no derivative for `5 % x` (remainder of a scalar)
            ("remainder", lambda x, y: x % y, False),
        )
    ),
    OpInfo(
        "div",
        _pairs(y=DIVISOR, rscalars=(5,)),
        variant="operator",
        dtypes=NUMERIC,
        **_operator(lambda x, y: x / y),
    ),
    OpInfo(
        "pow",
        _pairs(POSITIVE, _uniform(-2, 2), scalars=(2,), rscalars=(2.5,)),
        variant="operator",
        dtypes=FLOATING,
        **_operator(lambda x, y: x**y),
    ),
    *(
        OpInfo(
            name,
            _pairs(SMALL_INTS, scalars=(1,), rscalars=(1,)),
            variant="operator",
            dtypes=NUMERIC,
            grad=False,
            **_operator(fn),
        )
        for name, fn in (
            ("eq", lambda x, y: x == y),
            ("ne", lambda x, y: x != y),
            ("lt", lambda x, y: x < y),
            ("le", lambda x, y: x <= y),
            ("gt", lambda x, y: x > y),
            ("ge", lambda x, y: x >= y),
        )
    ),
    *(
        OpInfo(
            name,
            _pairs(_uniform(-100, 100), scalars=(3,), rscalars=(6,)),
            variant="operator",
            dtypes=("int32", "bool"),
            grad=False,
            **_operator(fn),
        )
        for name, fn in (
            ("bitwise_and", lambda x, y: x & y),
            ("bitwise_or", lambda x, y: x | y),
            ("bitwise_xor", lambda x, y: x ^ y),
        )
    ),
    *(
        OpInfo(
            name, _shift_samples, variant="operator", dtypes=("int32",), grad=False, **_operator(fn)
        )
        for name, fn in (
            ("bitwise_left_shift", lambda x, y: x << y),
            ("bitwise_right_shift", lambda x, y: x >> y),
        )
    ),
    OpInfo(
        "where",
        _fixed((np.array([True, False, True]), [1, 2, 3], 4.5)),
        variant="method",
        dtypes=("float32",),
        op=lambda c, x, y: x.where(c, y),
        torch=lambda torch, c, x, y: x.where(c, y),
    ),
]
