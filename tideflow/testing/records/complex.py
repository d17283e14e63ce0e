"""Records of complex numbers (`tideflow.ops.complex`) and of the common ops on complex
operands: arithmetic with promotion from real tensors and Python complex scalars, the analytic
math functions, products and reductions. Backward runs against PyTorch's gradients, which
follow the conjugate Wirtinger convention (`tests/ops/test_oracle.py: test_backward`)."""

import numpy as np

from ..opinfo import COMPLEX, FLOATS, SHAPES, OpInfo, Sample, make_array


def _complex_of(dtype: str) -> str:
    """The complex dtype of a real dtype's precision (float32 -> complex64)."""
    return "complex128" if dtype in ("float64", "complex128") else "complex64"


def _array(rng, shape, dtype, low=-2.0, high=2.0) -> np.ndarray:
    return np.asarray(make_array(rng, shape, dtype, low, high))


def _away_from_zero(rng, shape, dtype) -> np.ndarray:
    """Moduli in [0.5, 2) at any angle: operands of log, reciprocal, division."""
    modulus = rng.uniform(0.5, 2.0, size=shape)
    phase = rng.uniform(-np.pi, np.pi, size=shape)
    return np.asarray(modulus * np.exp(1j * phase)).astype(dtype)


def _unary(draw=_array, shapes=SHAPES):
    return lambda rng, dtype: [Sample((draw(rng, s, dtype),)) for s in shapes]


def _binary(draw=_array):
    pairs = (((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (3,)), ((0, 3), (3,)))

    def build(rng, dtype):
        out = [Sample((_array(rng, a, dtype), draw(rng, b, dtype))) for a, b in pairs]
        out.append(Sample((_array(rng, (3, 4), dtype), 1.5 - 0.5j), name="complex_scalar"))
        out.append(Sample((_array(rng, (3, 4), dtype), 2.5), name="real_scalar"))
        return out

    return build


def _mixed(rng, dtype):
    """A real tensor with a complex one (`dtype` is the real operand's), both orders, and a
    real tensor with a Python complex scalar: the results are complex."""
    complex_dtype = _complex_of(dtype)
    return [
        Sample((_array(rng, (3, 4), dtype), _array(rng, (4,), complex_dtype))),
        Sample((_array(rng, (3, 1), complex_dtype), _array(rng, (1, 4), dtype))),
        Sample((_array(rng, (5,), dtype), 0.5 + 2j), name="complex_scalar"),
    ]


def _pairs_of_reals(rng, dtype):
    """(real, imag) float operands of `complex`, broadcasting."""
    return [
        Sample((_array(rng, (3, 4), dtype), _array(rng, (3, 4), dtype))),
        Sample((_array(rng, (3, 1), dtype), _array(rng, (4,), dtype))),
        Sample((_array(rng, (), dtype), _array(rng, (), dtype))),
    ]


def _polar_samples(rng, dtype):
    # NOTE: moduli are positive: PyTorch's polar gradient assumes abs >= 0.
    return [
        Sample((_array(rng, s, dtype, 0.5, 2.0), _array(rng, s, dtype, -3.0, 3.0)))
        for s in ((3, 4), (5,), ())
    ]


def _pairs_last(rng, dtype):
    """Float tensors whose last dim holds (real, imag): operands of view_as_complex."""
    return [Sample((_array(rng, (*s, 2), dtype),)) for s in ((), (5,), (3, 4))]


def _with_zero(rng, dtype):
    """A zero among the elements: abs, angle and sgn take PyTorch's gradient 0 there (not
    differentiable: no finite differences)."""
    x = _array(rng, (6,), dtype)
    x[2] = 0
    return [Sample((x,))]


def _products(*shapes):
    return lambda rng, dtype: [
        Sample(tuple(_array(rng, s, dtype) for s in pair)) for pair in shapes
    ]


def _einsum_samples(rng, dtype):
    def a(*shape):
        return _array(rng, shape, dtype)

    return [
        Sample(("ij,jk->ik", a(2, 3), a(3, 2))),
        Sample(("bij,bj->bi", a(2, 3, 4), a(2, 4))),
        Sample(("ii->", a(3, 3))),
    ]


def _reductions(**kwargs):
    def build(rng, dtype):
        x = _array(rng, (2, 3, 4), dtype, -1.5, 1.5)
        out = [Sample((x,), dict(kwargs, dim=d)) for d in (0, -1)]
        return [*out, Sample((_array(rng, (5,), dtype),), dict(kwargs, dim=0))]

    return build


def _pow_samples(rng, dtype):
    base = _away_from_zero(rng, (3, 4), dtype)
    return [
        Sample((base, 2)),
        Sample((base, 0.5)),
        Sample((base, _array(rng, (3, 4), dtype, -1.0, 1.0)), name="tensor_exponent"),
    ]


def _analytic(name: str, draw=_array) -> OpInfo:
    return OpInfo(name, _unary(draw), variant="complex", dtypes=COMPLEX)


RECORDS = [
    # -- building and taking apart ----------------------------------------------------------
    OpInfo("real", _unary(), dtypes=COMPLEX),
    OpInfo("imag", _unary(), dtypes=COMPLEX),
    OpInfo("conj", _unary(), dtypes=COMPLEX),
    OpInfo("conj_physical", _unary(), dtypes=COMPLEX),
    OpInfo("angle", _unary(), dtypes=COMPLEX),
    OpInfo("angle", _unary(), variant="real", dtypes=FLOATS),
    OpInfo("sgn", _unary(), dtypes=COMPLEX),
    *(
        OpInfo(
            name,
            _unary(),
            variant="inplace",
            dtypes=(*COMPLEX, *FLOATS),
            grad=False,
            op=lambda x, name=name: getattr(x.clone(), f"{name}_")(),
            torch=lambda torch, x, name=name: getattr(x.clone(), f"{name}_")(),
        )
        for name in ("sgn", "conj_physical")
    ),
    OpInfo("abs", _unary(), variant="complex", dtypes=COMPLEX),
    *(
        OpInfo(name, _with_zero, variant="at_zero", dtypes=COMPLEX, gradcheck=False)
        for name in ("angle", "sgn", "abs")
    ),
    OpInfo("complex", _pairs_of_reals, dtypes=FLOATS),
    OpInfo("polar", _polar_samples, dtypes=FLOATS),
    # NOTE: no empty sample: PyTorch's backward refuses the (0, 2) gradient's strides
    OpInfo("view_as_real", _unary(shapes=((), (5,), (3, 4))), dtypes=COMPLEX),
    OpInfo("adjoint", _unary(shapes=((3, 4), (2, 3, 4), (0, 2))), dtypes=COMPLEX),
    OpInfo(
        "view_as_complex",
        _pairs_last,
        dtypes=FLOATS,
        skips={"noncontiguous": "PyTorch refuses a last dim of stride 2 too (tested apart)"},
    ),
    # -- arithmetic -------------------------------------------------------------------------
    OpInfo("add", _binary(), variant="complex", dtypes=COMPLEX),
    OpInfo("sub", _binary(), variant="complex", dtypes=COMPLEX),
    OpInfo("mul", _binary(), variant="complex", dtypes=COMPLEX),
    OpInfo("div", _binary(_away_from_zero), variant="complex", dtypes=COMPLEX),
    OpInfo("mul", _mixed, variant="real_and_complex", dtypes=FLOATS),
    OpInfo("add", _mixed, variant="real_and_complex", dtypes=FLOATS),
    OpInfo("pow", _pow_samples, variant="complex", dtypes=COMPLEX),
    OpInfo("neg", _unary(), variant="complex", dtypes=COMPLEX),
    # -- analytic functions -----------------------------------------------------------------
    _analytic("exp"),
    _analytic("log", _away_from_zero),
    _analytic("sqrt", _away_from_zero),
    _analytic("rsqrt", _away_from_zero),
    _analytic("reciprocal", _away_from_zero),
    _analytic("sin"),
    _analytic("cos"),
    _analytic("tanh"),
    _analytic("sigmoid"),
    _analytic("square"),
    # -- products and reductions ------------------------------------------------------------
    OpInfo(
        "matmul", _products(((3, 4), (4, 2)), ((2, 3, 4), (4,))), variant="complex", dtypes=COMPLEX
    ),
    OpInfo("mm", _products(((2, 3), (3, 4))), variant="complex", dtypes=COMPLEX),
    OpInfo("bmm", _products(((2, 2, 3), (2, 3, 4))), variant="complex", dtypes=COMPLEX),
    OpInfo("dot", _products(((4,), (4,))), variant="complex", dtypes=COMPLEX),
    OpInfo("vdot", _products(((4,), (4,))), variant="complex", dtypes=COMPLEX),
    OpInfo(
        "nn.functional.linear",
        _products(((2, 3), (4, 3)), ((5, 3), (4, 3), (4,)), ((3,), (3,))),
        variant="complex",
        dtypes=COMPLEX,
    ),
    OpInfo("einsum", _einsum_samples, variant="complex", dtypes=COMPLEX),
    OpInfo("sum", _reductions(), variant="complex", dtypes=COMPLEX),
    OpInfo("mean", _reductions(), variant="complex", dtypes=COMPLEX),
    OpInfo("prod", _reductions(), variant="complex", dtypes=COMPLEX),
    OpInfo("cumsum", _reductions(), variant="complex", dtypes=COMPLEX),
    OpInfo("cumprod", _reductions(), variant="complex", dtypes=COMPLEX),
    OpInfo("var", _reductions(), variant="complex", dtypes=COMPLEX),
    OpInfo("std", _reductions(), variant="complex", dtypes=COMPLEX),
    OpInfo("linalg.vector_norm", _reductions(), variant="complex", dtypes=COMPLEX),
    OpInfo("linalg.vector_norm", _reductions(ord=1), variant="complex_l1", dtypes=COMPLEX),
]
