import functools
import warnings

import numpy as np

import tideflow as flow

from ..opinfo import COMPLEX, FLOATS, INTS, OpInfo, Sample, make_array

# float32 first: the meta/SBP tests run on a record's first dtype.
PRODUCT_DTYPES = ("float32", "float64", "float16", "bfloat16", *INTS)
# Solvers and decompositions: LAPACK's four types, as PyTorch takes them.
SOLVER_DTYPES = (*FLOATS, *COMPLEX)


def _arrays(rng, dtype, shapes, low=-3.0, high=3.0) -> tuple:
    return tuple(make_array(rng, s, dtype, low, high) for s in shapes)


def _shaped(*cases, **kwargs):
    """Samples f(*arrays, **kwargs) for tuples of operand shapes."""

    def build(rng, dtype):
        return [Sample(_arrays(rng, dtype, shapes), dict(kwargs)) for shapes in cases]

    return build


def _with_kwargs(cases):
    """Samples from (operand shapes, kwargs) pairs."""

    def build(rng, dtype):
        return [Sample(_arrays(rng, dtype, shapes), dict(kw)) for shapes, kw in cases]

    return build


def _double(dtype: str) -> str:
    return "complex128" if dtype.startswith("complex") else "float64"


def _well_conditioned(rng, dtype, shape, sign=1.0):
    """Matrices near 3 * identity: invertible, with every gradient finite and tame."""
    n = shape[-1]
    base = make_array(rng, shape, _double(dtype), -1.0, 1.0) + 3.0 * np.eye(n)
    return (sign * base).astype(dtype)


MATMUL_CASES = (
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3, 4)),
    ((2, 2, 3), (3, 4)),
    ((2, 3), (2, 3, 2)),
    ((3,), (2, 3, 4)),
    ((2, 3, 4), (4,)),
    ((2, 1, 2, 3), (3, 3, 2)),
    ((1, 2, 3), (4, 3, 2)),
    ((0, 3), (3, 2)),
    ((2, 0), (0, 3)),
)


def _add_product_samples(input_shapes, mats, **kwargs):
    def build(rng, dtype):
        out = []
        for shape in input_shapes:
            args = _arrays(rng, dtype, (shape, *mats))
            out.append(Sample(args, dict(kwargs)))
        return out

    return build


EINSUM_CASES = (
    ("ij,jk->ik", (2, 3), (3, 4)),
    ("bij,bjk->bik", (2, 2, 3), (2, 3, 2)),
    ("...ij,...jk", (2, 1, 2, 3), (3, 3, 2)),
    ("ii->i", (3, 3)),
    ("ii", (3, 3)),
    ("iij->j", (2, 2, 3)),
    ("ij->ji", (2, 3)),
    ("ijk->kij", (2, 3, 2)),
    ("ij->", (2, 3)),
    ("...i->i", (2, 3)),
    ("i,j->ij", (3,), (4,)),
    ("i,i->", (4,), (4,)),
    ("i,->i", (3,), ()),
    ("ij,ij->ij", (1, 3), (2, 3)),
    ("ii,i->i", (3, 3), (3,)),
    ("i j , j k -> i k", (0, 3), (3, 2)),
)
# Cases summed in another order than PyTorch's (three operands; labels one side sums alone or
# merely broadcasts): half precision rounds differently, and PyTorch's int32 results are an
# artifact of its order (int64 or an error), so float and int64 only.
EINSUM_REORDERED = (
    ("ij,jk,kl->il", (2, 3), (3, 2), (2, 2)),
    ("bn,anm,bm->ba", (2, 3), (2, 3, 4), (2, 4)),
    ("i,j,k->ijk", (2,), (3,), (2,)),
    ("ij,jk->ik", (2, 1), (3, 2)),
    ("ij,jk->i", (2, 3), (3, 2)),
)


def _einsum_samples(cases):
    def build(rng, dtype):
        return [Sample((eq, *_arrays(rng, dtype, shapes)), name=eq) for eq, *shapes in cases]

    return build


def _einsum_sublist_samples(rng, dtype):
    a, b, c = _arrays(rng, dtype, ((2, 3), (3, 4), (2, 3)))
    return [
        Sample((a, [0, 1], b, [1, 2], [0, 2])),
        Sample((a, [Ellipsis, 30], [30])),
        Sample((a, [0, 27], c, [0, 27])),
    ]


def _multi_dot(lib, *tensors):
    return lib.linalg.multi_dot(list(tensors))


def _matrix_power_samples(rng, dtype):
    """n = 0 is the identity, cut from A's graph (PyTorch links it with a zero gradient)."""
    out = [Sample((_well_conditioned(rng, dtype, (3, 3)), 0), grad=False)]
    out += [
        Sample((_well_conditioned(rng, dtype, shape), n))
        for shape, n in (((3, 3), 1), ((3, 3), 3), ((2, 2, 2), 2), ((3, 3), -2))
    ]
    return out


TENSORDOT_CASES = (
    (((2, 3, 4), (3, 4, 2)), {}),
    (((2, 3), (3, 4)), {"dims": 1}),
    (((2,), (3,)), {"dims": 0}),
    (((3, 2, 4), (2, 3, 2)), {"dims": ([1, 0], [0, 1])}),
    (((2, 3, 4), (4, 2)), {"dims": [[2], [0]]}),
)


def _square_samples(shapes=((3, 3), (2, 2, 2), (0, 0)), negative=True):
    def build(rng, dtype):
        out = [Sample((_well_conditioned(rng, dtype, s),)) for s in shapes]
        if negative:  # an odd-sized -A has a negative determinant
            out.append(Sample((_well_conditioned(rng, dtype, (3, 3), sign=-1.0),)))
        return out

    return build


def _logdet_samples(rng, dtype):
    """A negative determinant gives NaN (no gradient to compare); a zero one gives -inf. A
    complex zero determinant is left out: tideflow gives log(0) = -inf+0j, as NumPy does;
    PyTorch's complex sum of logabsdet and log(sign) makes the imaginary part NaN."""
    out = [
        Sample((_well_conditioned(rng, dtype, (3, 3)),)),
        Sample((_well_conditioned(rng, dtype, (2, 2, 2)),)),
        Sample((_well_conditioned(rng, dtype, (3, 3), sign=-1.0),), grad=False),
    ]
    if not dtype.startswith("complex"):
        out.append(Sample((np.zeros((2, 2), dtype),), grad=False))
    return out


def _solve_samples(rng, dtype):
    cases = (
        ((3, 3), (3,), {}),
        ((3, 3), (3, 2), {}),
        ((2, 3, 3), (2, 3), {}),
        ((2, 3, 3), (3,), {}),
        ((3, 3), (2, 3, 2), {}),
        ((2, 1, 2, 2), (3, 2, 1), {}),
        ((3, 3), (2, 3), {"left": False}),
        ((2, 2, 2), (2, 2, 2), {"left": False}),
    )
    return [
        Sample((_well_conditioned(rng, dtype, a), make_array(rng, b, dtype)), dict(kw))
        for a, b, kw in cases
    ]


def _spd(x):
    """A Hermitian positive-definite matrix built from any square x (also for gradcheck)."""
    n = x.shape[-1]
    return x @ x.mH + 3 * x.new_ones(n).diag()  # on a global x, global like it


def _cholesky(lib, x, **kwargs):
    return lib.linalg.cholesky(_spd(x), **kwargs)


def _eigh_gauge_free(lib, x, **kwargs):
    """Eigenvalues, and eigenvectors times their conjugated column sums: invariant under the
    sign (phase, if complex) each eigenvector is only defined up to. x is made Hermitian."""
    values, vectors = lib.linalg.eigh(x + x.mH, **kwargs)
    return values, vectors * vectors.sum(-2, keepdim=True).conj()


def _eigvalsh(lib, x):
    return lib.linalg.eigvalsh(x + x.mH)


def _qr_samples(shapes, mode):
    def build(rng, dtype):
        return [Sample((make_array(rng, s, dtype),), {"mode": mode}) for s in shapes]

    return build


def _qr_r_samples(rng, dtype):
    return [
        Sample((make_array(rng, s, dtype),), {"mode": "r"}, grad=False) for s in ((3, 2), (2, 3))
    ]


CROSS_CASES = (
    (((3,), (3,)), {"dim": 0}),
    (((2, 3), (2, 3)), {"dim": 1}),
    (((3, 2), (3, 2)), {"dim": 0}),
    (((1, 3), (4, 3)), {"dim": -1}),
)

RECORDS = [
    OpInfo("matmul", _shaped(*MATMUL_CASES), dtypes=PRODUCT_DTYPES),
    OpInfo(
        "matmul",
        _shaped(((2, 3), (3, 4)), ((3,), (3,))),
        op=lambda x, y: x @ y,
        torch=lambda t, x, y: x @ y,
        variant="operator",
    ),
    OpInfo("linalg.matmul", _shaped(((2, 2, 3), (3,)))),
    OpInfo(
        "mm", _shaped(((2, 3), (3, 4)), ((0, 3), (3, 2)), ((3, 0), (0, 2))), dtypes=PRODUCT_DTYPES
    ),
    OpInfo("bmm", _shaped(((2, 2, 3), (2, 3, 4)), ((0, 2, 3), (0, 3, 1))), dtypes=PRODUCT_DTYPES),
    OpInfo("mv", _shaped(((2, 3), (3,)), ((0, 3), (3,))), dtypes=PRODUCT_DTYPES),
    OpInfo("dot", _shaped(((4,), (4,)), ((0,), (0,))), dtypes=PRODUCT_DTYPES),
    OpInfo("vdot", _shaped(((4,), (4,))), dtypes=PRODUCT_DTYPES),
    OpInfo("outer", _shaped(((3,), (4,)), ((0,), (2,))), dtypes=(*FLOATS, *INTS)),
    OpInfo("ger", _shaped(((3,), (2,)))),
    OpInfo(
        "addmm",
        _add_product_samples(((3,), (2, 3), (1, 1), ()), ((2, 4), (4, 3))),
        dtypes=(*FLOATS, *INTS),
    ),
    OpInfo(
        "addmm",
        _add_product_samples(((2, 3),), ((2, 4), (4, 3)), beta=0.5, alpha=2.0),
        variant="scaled",
    ),
    OpInfo(
        "addmm",
        _add_product_samples(((3,),), ((2, 4), (4, 3)), beta=0),
        variant="beta0",
    ),
    OpInfo("addmv", _add_product_samples(((2,), ()), ((2, 3), (3,)), beta=2.0, alpha=-1.0)),
    OpInfo(
        "baddbmm",
        _add_product_samples(((2, 2, 2), (2,), ()), ((2, 2, 3), (2, 3, 2)), beta=0.5, alpha=3.0),
    ),
    OpInfo(
        "addbmm",
        _add_product_samples(((2, 2), (2,)), ((3, 2, 3), (3, 3, 2)), alpha=0.5),
    ),
    OpInfo("einsum", _einsum_samples(EINSUM_CASES), dtypes=PRODUCT_DTYPES),
    OpInfo(
        "einsum",
        _einsum_samples(EINSUM_REORDERED),
        dtypes=(*FLOATS, "int64"),
        variant="reordered",
    ),
    OpInfo("einsum", _einsum_sublist_samples, variant="sublist"),
    OpInfo("tensordot", _with_kwargs(TENSORDOT_CASES), dtypes=(*FLOATS, *INTS)),
    OpInfo(
        "inner",
        _shaped(((3,), (3,)), ((2, 3), (4, 3)), ((2, 1, 3), (3,)), ((), (2, 3))),
        dtypes=(*FLOATS, *INTS),
    ),
    OpInfo(
        "linalg.multi_dot",
        _shaped(
            ((2, 3), (3, 4)),
            ((3,), (3, 4), (4, 2), (2,)),
            ((4, 2), (2, 3), (3, 1), (1, 2)),
            ((3,), (3,)),
        ),
        op=functools.partial(_multi_dot, flow),
        torch=_multi_dot,
    ),
    OpInfo("linalg.matrix_power", _matrix_power_samples, dtypes=SOLVER_DTYPES),
    OpInfo("matrix_power", _matrix_power_samples),
    OpInfo(
        "kron",
        _shaped(((2,), (3,)), ((2, 3), (2, 2)), ((2, 1, 2), (3, 2)), ((), (3,))),
        dtypes=(*FLOATS, *INTS),
    ),
    OpInfo("trace", _shaped(((3, 3),), ((2, 4),), ((0, 0),)), dtypes=PRODUCT_DTYPES),
    OpInfo("cross", _with_kwargs(CROSS_CASES), dtypes=(*FLOATS, *INTS)),
    OpInfo(
        "linalg.cross",
        _with_kwargs(
            ((((2, 3), (2, 3)), {}), (((1, 3), (4, 3)), {}), (((3, 2), (3, 2)), {"dim": 0}))
        ),
    ),
    OpInfo(
        "linalg.vecdot",
        _with_kwargs(
            ((((3, 4), (3, 4)), {}), (((3, 4), (4,)), {}), (((3, 4), (3, 4)), {"dim": 0}))
        ),
    ),
    OpInfo("linalg.inv", _square_samples(), dtypes=SOLVER_DTYPES),
    OpInfo("inverse", _square_samples(shapes=((2, 2),), negative=False)),
    OpInfo("linalg.det", _square_samples(), dtypes=SOLVER_DTYPES),
    OpInfo("det", _square_samples(shapes=((2, 2),))),
    OpInfo("linalg.slogdet", _square_samples(), dtypes=SOLVER_DTYPES),
    OpInfo("slogdet", _square_samples(shapes=((2, 2),))),
    OpInfo("logdet", _logdet_samples, dtypes=SOLVER_DTYPES),
    OpInfo("linalg.solve", _solve_samples, dtypes=SOLVER_DTYPES),
    OpInfo(
        "linalg.cholesky",
        _shaped(((3, 3),), ((2, 2, 2),)),
        op=functools.partial(_cholesky, flow),
        torch=_cholesky,
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "linalg.cholesky",
        _shaped(((3, 3),), upper=True),
        op=functools.partial(_cholesky, flow),
        torch=_cholesky,
        variant="upper",
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "linalg.qr",
        _qr_samples(((3, 2), (3, 3), (2, 3, 2), (2, 3), (2, 2, 4)), "reduced"),
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "linalg.qr",
        _qr_samples(((3, 3), (2, 2, 2), (2, 3)), "complete"),
        variant="complete",
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo("linalg.qr", _qr_r_samples, variant="r"),
    OpInfo(
        "linalg.eigh",
        _shaped(((3, 3),), ((2, 2, 2),)),
        op=functools.partial(_eigh_gauge_free, flow),
        torch=_eigh_gauge_free,
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "linalg.eigh",
        _shaped(((3, 3),), UPLO="U"),
        op=functools.partial(_eigh_gauge_free, flow),
        torch=_eigh_gauge_free,
        variant="upper",
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "linalg.eigvalsh",
        _shaped(((3, 3),), ((2, 2, 2),)),
        op=functools.partial(_eigvalsh, flow),
        torch=_eigvalsh,
        dtypes=SOLVER_DTYPES,
    ),
]


# -- singular values ----------------------------------------------------------------------------
def _matrices(*shapes, **kwargs):
    """Samples of random matrices in the record's dtype (complex ones with both parts drawn)."""

    def build(rng, dtype):
        return [Sample((make_array(rng, s, dtype),), dict(kwargs)) for s in shapes]

    return build


def _phase_free(u, vh):
    """Singular vectors times their conjugated column (row, for Vh) sums: invariant under the
    sign (phase) each pair of singular vectors is only defined up to."""
    return u * u.sum(-2, keepdim=True).conj(), vh * vh.sum(-1, keepdim=True).conj()


def _svd_gauge_free(lib, x, **kwargs):
    """S, U and Vh made phase-free; the columns full_matrices adds beyond min(m, n) are any
    basis of their subspace, so they are left out."""
    u, s, vh = lib.linalg.svd(x, **kwargs)
    k = s.shape[-1]
    return (s, *_phase_free(u[..., :k], vh[..., :k, :]))


def _legacy_svd_gauge_free(lib, x, **kwargs):
    u, s, v = lib.svd(x, **kwargs)
    if not kwargs.get("compute_uv", True):
        return u, s, v
    k = s.shape[-1]
    return (s, *_phase_free(u[..., :k], v[..., :k].mT))


SVD_SHAPES = ((3, 2), (2, 3), (3, 3), (2, 3, 2), (0, 3))
RECORDS += [
    OpInfo(
        "linalg.svd",
        _matrices(*SVD_SHAPES, full_matrices=False),
        op=functools.partial(_svd_gauge_free, flow),
        torch=_svd_gauge_free,
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "linalg.svd",
        _matrices(*SVD_SHAPES),
        op=functools.partial(_svd_gauge_free, flow),
        torch=_svd_gauge_free,
        dtypes=SOLVER_DTYPES,
        variant="full_matrices",
    ),
    OpInfo("linalg.svdvals", _matrices(*SVD_SHAPES), dtypes=SOLVER_DTYPES),
    OpInfo(
        "svd",
        _matrices((3, 2), (2, 2, 3), some=True),
        op=functools.partial(_legacy_svd_gauge_free, flow),
        torch=_legacy_svd_gauge_free,
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "svd",
        _matrices((3, 2), some=False),
        op=functools.partial(_legacy_svd_gauge_free, flow),
        torch=_legacy_svd_gauge_free,
        variant="complete",
    ),
    OpInfo(
        "svd",
        _matrices((3, 2), (2, 2, 3), compute_uv=False),
        op=functools.partial(_legacy_svd_gauge_free, flow),
        torch=_legacy_svd_gauge_free,
        variant="values_only",
        # U and V are constant zeros here; S's derivatives are gradchecked by linalg.svdvals
        gradcheck=False,
    ),
]


# -- tolerances on singular values: pinv, matrix_rank, lstsq -----------------------------------
def _rank_deficient(rng, dtype, shape, rank):
    """A product of (m x rank) and (rank x n) factors: exactly `rank` nonzero singular values
    (to rounding), so a default tolerance must drop the rest."""
    *batch, m, n = shape
    left = make_array(rng, (*batch, m, rank), dtype)
    return (left @ make_array(rng, (*batch, rank, n), dtype)).astype(dtype)


def _hermitian(lib, name, x, **kwargs):
    return getattr(lib.linalg, name)(x + x.mH, hermitian=True, **kwargs)


def _matrix_rank_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 2), dtype),)),
        Sample((_rank_deficient(rng, dtype, (2, 4, 3), 1),)),
        Sample((_rank_deficient(rng, dtype, (4, 4), 2),), {"atol": 0.5}),
        Sample((_rank_deficient(rng, dtype, (4, 4), 2),), {"atol": 1e-3, "rtol": 0.2}),
        Sample((_rank_deficient(rng, dtype, (3, 3), 2), 1e-3)),
        Sample((make_array(rng, (0, 3), dtype),)),
    ]


def _lstsq_without_singular_values(lib, *args, **kwargs):
    """gelsy (the default) and gels return no singular values: an empty tensor apart from
    the graph (second derivatives have nothing to differentiate), checked by the other
    record."""
    return lib.linalg.lstsq(*args, **kwargs)[:3]


def _lstsq_samples(rng, dtype):

    def pair(a, b, *args, **kwargs):
        return Sample((make_array(rng, a, dtype), make_array(rng, b, dtype), *args), kwargs)

    return [
        pair((4, 2), (4, 3)),
        pair((4, 2), (4,)),
        pair((2, 4, 3), (2, 4, 2)),
        pair((2, 4), (2, 3), 1e-2),
        pair((4, 2), (4, 3), driver="gels"),
        pair((2, 4, 3), (2, 4), driver="gels"),
    ]


def _lstsq_svd_driver_samples(rng, dtype):
    """gelsd and gelss also return the singular values, which PyTorch does not differentiate
    (tideflow does): forward only; their solutions' gradients are those of the records above."""

    def pair(a, b, *args, **kwargs):
        arrays = (make_array(rng, a, dtype), make_array(rng, b, dtype))
        return Sample((*arrays, *args), kwargs, grad=False)

    deficient = _rank_deficient(rng, dtype, (4, 3), 2)
    return [
        pair((2, 4, 3), (2, 4, 2), driver="gelsd"),
        pair((2, 4, 3), (2, 4), driver="gelss"),
        pair((2, 4), (2, 3), driver="gelsd"),
        pair((3, 3), (3, 2), 1e-2, driver="gelss"),
        Sample((deficient, make_array(rng, (4, 2), dtype)), {"driver": "gelsd"}, grad=False),
    ]


RECORDS += [
    OpInfo("linalg.pinv", _matrices((3, 2), (2, 3), (2, 3, 3), (0, 3)), dtypes=SOLVER_DTYPES),
    OpInfo(
        "linalg.pinv",
        _square_samples(shapes=((3, 3), (2, 2, 2))),
        op=functools.partial(_hermitian, flow, "pinv"),
        torch=lambda torch, x: _hermitian(torch, "pinv", x),
        dtypes=SOLVER_DTYPES,
        variant="hermitian",
    ),
    OpInfo("linalg.pinv", _matrices((3, 2), atol=0.1, rtol=0.01), variant="tolerances"),
    OpInfo("pinverse", _matrices((3, 2), (2, 2, 3)), dtypes=SOLVER_DTYPES),
    OpInfo("linalg.matrix_rank", _matrix_rank_samples, dtypes=SOLVER_DTYPES, grad=False),
    OpInfo(
        "linalg.matrix_rank",
        lambda rng, dtype: [Sample((_rank_deficient(rng, dtype, (3, 3), 1),))],
        op=functools.partial(_hermitian, flow, "matrix_rank"),
        torch=lambda torch, x: _hermitian(torch, "matrix_rank", x),
        dtypes=SOLVER_DTYPES,
        grad=False,
        variant="hermitian",
    ),
    OpInfo(
        "linalg.lstsq",
        _lstsq_samples,
        op=functools.partial(_lstsq_without_singular_values, flow),
        torch=_lstsq_without_singular_values,
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo("linalg.lstsq", _lstsq_svd_driver_samples, dtypes=SOLVER_DTYPES, variant="svd_drivers"),
]


# -- triangular solves and LU ---------------------------------------------------------------------
def _triangular(rng, dtype, shape, upper=True):
    """A well-conditioned triangular matrix, with noise in the other triangle, which the
    solvers must not read."""
    a = _well_conditioned(rng, dtype, shape)
    noise = make_array(rng, shape, dtype)
    keep = np.triu(np.ones(shape[-2:], bool)) if upper else np.tril(np.ones(shape[-2:], bool))
    return np.where(keep, a, noise).astype(dtype)


def _solve_triangular_samples(rng, dtype):
    cases = (
        ((3, 3), (3, 2), {"upper": True}),
        ((3, 3), (3, 2), {"upper": False}),
        ((2, 3, 3), (3, 1), {"upper": True}),
        ((3, 3), (2, 3, 2), {"upper": False, "unitriangular": True}),
        ((3, 3), (2, 3), {"upper": True, "left": False}),
        ((2, 2, 2), (2, 3, 2), {"upper": False, "left": False, "unitriangular": True}),
        ((0, 0), (0, 2), {"upper": True}),
    )
    return [
        Sample(
            (_triangular(rng, dtype, a, kw["upper"]), make_array(rng, b, dtype)),
            {k: v for k, v in kw.items() if k != "upper"} | {"upper": kw["upper"]},
        )
        for a, b, kw in cases
    ]


def _triangular_solve_samples(rng, dtype):
    cases = (
        ((3, 3), (3, 2), {}),
        ((3, 3), (3, 2), {"upper": False}),
        ((2, 3, 3), (2, 3, 1), {"transpose": True}),
        ((3, 3), (3, 2), {"upper": False, "transpose": True, "unitriangular": True}),
    )
    return [
        Sample((make_array(rng, b, dtype), _triangular(rng, dtype, a, kw.get("upper", True))), kw)
        for a, b, kw in cases
    ]


def _deprecated(name):
    """PyTorch's `name`, which warns that it is deprecated (tideflow keeps it, silently)."""

    def call(torch, *args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return getattr(torch, name)(*args, **kwargs)

    return call


def _lu_unpacked(lib, x, **kwargs):
    """The factors of lu_factor unpacked: P L (P, a constant, alone would have no derivative
    to check; P L, with L unit lower triangular, determines it) and U."""
    p, lower, upper = lib.lu_unpack(*lib.linalg.lu_factor(x, **kwargs))
    return p @ lower, upper


def _lu(lib, x):
    p, lower, upper = lib.linalg.lu(x)
    return p @ lower, upper


def _lu_factor_ex(lib, x):
    lu, pivots, info = lib.linalg.lu_factor_ex(x)
    return lu, pivots, info


def _lu_solve(lib, a, b, **kwargs):
    return lib.linalg.lu_solve(*lib.linalg.lu_factor(a), b, **kwargs)


def _lu_solve_samples(rng, dtype):
    cases = (
        ((3, 3), (3, 2), {}),
        ((2, 3, 3), (3, 1), {}),
        ((3, 3), (2, 3, 2), {"adjoint": True}),
        ((3, 3), (2, 3), {"left": False}),
        ((2, 2, 2), (2, 2), {"left": False, "adjoint": True}),
    )
    return [
        Sample((_well_conditioned(rng, dtype, a), make_array(rng, b, dtype)), kw)
        for a, b, kw in cases
    ]


def _singular_lu_samples(rng, dtype):
    """A zero column makes U singular: info reports it (forward only)."""
    a = make_array(rng, (2, 3, 3), dtype)
    a[1, :, 1] = 0
    return [Sample((a,), grad=False)]


def _spd_factor(lib, name, b, x, **kwargs):
    """cholesky_solve / cholesky_inverse given a Cholesky factor of a matrix built from x."""
    factor = lib.linalg.cholesky(_spd(x), upper=kwargs.get("upper", False))
    args = (factor,) if b is None else (b, factor)
    return getattr(lib, name)(*args, **kwargs)


LU_SHAPES = ((3, 3), (2, 4, 4), (2, 4), (4, 2), (2, 3, 2))
RECORDS += [
    OpInfo("linalg.solve_triangular", _solve_triangular_samples, dtypes=SOLVER_DTYPES),
    OpInfo(
        "triangular_solve",
        _triangular_solve_samples,
        torch=_deprecated("triangular_solve"),
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "linalg.lu_factor",
        _matrices(*LU_SHAPES),
        op=functools.partial(_lu_unpacked, flow),
        torch=_lu_unpacked,
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo("linalg.lu_factor", _matrices(*LU_SHAPES, (0, 0)), variant="packed"),
    OpInfo(
        "linalg.lu_factor_ex",
        _matrices(*LU_SHAPES),
        op=functools.partial(_lu_factor_ex, flow),
        torch=_lu_factor_ex,
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "linalg.lu_factor_ex",
        _singular_lu_samples,
        op=functools.partial(_lu_factor_ex, flow),
        torch=_lu_factor_ex,
        variant="singular",
    ),
    OpInfo(
        "linalg.lu",
        _matrices(*LU_SHAPES),
        op=functools.partial(_lu, flow),
        torch=_lu,
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo("lu", _matrices((3, 3), (2, 4, 3)), torch=_deprecated("lu")),
    OpInfo(
        "lu",
        lambda rng, dtype: [
            Sample(s.args, {"get_infos": True}) for s in _singular_lu_samples(rng, dtype)
        ],
        torch=_deprecated("lu"),
        variant="infos",
        grad=False,
    ),
    OpInfo(
        "linalg.lu_solve",
        _lu_solve_samples,
        op=functools.partial(_lu_solve, flow),
        torch=_lu_solve,
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "cholesky_solve",
        _shaped(((3, 2), (3, 3)), ((2, 3, 1), (3, 3))),
        op=lambda b, x: _spd_factor(flow, "cholesky_solve", b, x),
        torch=lambda torch, b, x: _spd_factor(torch, "cholesky_solve", b, x),
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "cholesky_solve",
        _shaped(((3, 2), (3, 3)), upper=True),
        op=lambda b, x, **kw: _spd_factor(flow, "cholesky_solve", b, x, **kw),
        torch=lambda torch, b, x, **kw: _spd_factor(torch, "cholesky_solve", b, x, **kw),
        variant="upper",
    ),
    OpInfo(
        "cholesky_inverse",
        _shaped(((3, 3),), ((2, 2, 2),)),
        op=lambda x: _spd_factor(flow, "cholesky_inverse", None, x),
        torch=lambda torch, x: _spd_factor(torch, "cholesky_inverse", None, x),
        dtypes=SOLVER_DTYPES,
    ),
]


# -- general eigenproblem -----------------------------------------------------------------------
def _eig_phase_free(lib, x):
    """Eigenvalues, and eigenvectors times their conjugated column sums (phase-free)."""
    values, vectors = lib.linalg.eig(x)
    return values, vectors * vectors.sum(-2, keepdim=True).conj()


RECORDS += [
    OpInfo(
        "linalg.eig",
        _matrices((3, 3), (2, 2, 2), (0, 0)),
        op=functools.partial(_eig_phase_free, flow),
        torch=_eig_phase_free,
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo("linalg.eigvals", _matrices((3, 3), (2, 2, 2)), dtypes=SOLVER_DTYPES),
]


def _small_matrices(*shapes):
    """Entries in [-1, 1): exponentials of moderate size."""

    def build(rng, dtype):
        return [Sample((make_array(rng, s, dtype, -1.0, 1.0),)) for s in shapes]

    return build


RECORDS += [
    OpInfo(
        "linalg.matrix_exp",
        _small_matrices((3, 3), (2, 2, 2), (1, 1), (0, 0)),
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "matrix_exp",
        _small_matrices(
            (2, 2),
        ),
    ),
]


# -- the _ex solvers ------------------------------------------------------------------------------
def _info_only(name):
    """The `info` of an `_ex` solver: its other result is unspecified where info > 0."""

    def call(lib, *args, **kwargs):
        return getattr(lib.linalg, name)(*args, **kwargs).info

    return call


def _singular_samples(rng, dtype):
    batch = _well_conditioned(rng, dtype, (3, 3, 3))
    batch[1, :, 2] = 0
    return [Sample((np.zeros((2, 2), dtype),)), Sample((batch,))]


def _not_positive_definite_samples(rng, dtype):
    batch = np.stack([np.eye(3), np.diag([1.0, -1.0, 1.0]), np.diag([1.0, 1.0, 0.0])])
    return [Sample((batch.astype(dtype),)), Sample((-np.eye(2, dtype=dtype),))]


def _cholesky_ex(lib, x, **kwargs):
    return tuple(lib.linalg.cholesky_ex(_spd(x), **kwargs))


RECORDS += [
    OpInfo("linalg.inv_ex", _square_samples(), dtypes=SOLVER_DTYPES),
    OpInfo(
        "linalg.inv_ex",
        _singular_samples,
        op=functools.partial(_info_only("inv_ex"), flow),
        torch=_info_only("inv_ex"),
        grad=False,
        variant="singular",
    ),
    OpInfo("linalg.solve_ex", _solve_samples, dtypes=SOLVER_DTYPES),
    OpInfo(
        "linalg.cholesky_ex",
        _shaped(((3, 3),), ((2, 2, 2),)),
        op=functools.partial(_cholesky_ex, flow),
        torch=_cholesky_ex,
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo(
        "linalg.cholesky_ex",
        _shaped(((3, 3),), upper=True),
        op=functools.partial(_cholesky_ex, flow),
        torch=_cholesky_ex,
        variant="upper",
    ),
    OpInfo(
        "linalg.cholesky_ex",
        _not_positive_definite_samples,
        op=functools.partial(_info_only("cholesky_ex"), flow),
        torch=_info_only("cholesky_ex"),
        grad=False,
        variant="not_positive_definite",
    ),
]


# -- compositions: cond, tensor inverses and solves, vander, diagonal, Householder products -------
_COND_NORMS = ("fro", "nuc", float("inf"), -float("inf"), 1, -1)


def _cond_samples(rng, dtype):
    out = [Sample((_well_conditioned(rng, dtype, (3, 3)),), {"p": p}) for p in (None, 2, -2)]
    out.append(Sample((make_array(rng, (2, 3, 2), dtype),)))
    return out


def _cond_norm_samples(rng, dtype):
    out = [Sample((_well_conditioned(rng, dtype, (2, 3, 3)),), {"p": p}) for p in _COND_NORMS]
    out.append(Sample((np.zeros((2, 2), dtype),), {"p": "fro"}, grad=False))  # singular: inf
    return out


def _cond_by_norms(torch, a, p):
    """What torch.linalg.cond computes for these orders, whose backward fails in PyTorch 2.13
    (it modifies linalg_inv_ex's output in place)."""
    return torch.linalg.matrix_norm(a, p) * torch.linalg.matrix_norm(torch.linalg.inv(a), p)


def _tensorinv_samples(rng, dtype):
    return [
        Sample((_well_conditioned(rng, dtype, (6, 6)).reshape(6, 2, 3),), {"ind": 1}),
        Sample((_well_conditioned(rng, dtype, (4, 4)).reshape(2, 2, 4),), {"ind": 2}),
    ]


def _tensorsolve_samples(rng, dtype):
    a = _well_conditioned(rng, dtype, (6, 6))
    return [
        Sample((a.reshape(2, 3, 6), make_array(rng, (2, 3), dtype))),
        Sample((a.reshape(6, 2, 3), make_array(rng, (6,), dtype))),
        Sample(
            (a.reshape(2, 3, 6).transpose(0, 2, 1).copy(), make_array(rng, (2, 3), dtype)),
            {"dims": (1,)},
        ),
    ]


def _geqrf_samples(shapes):
    """LAPACK's QR storage (from NumPy's raw mode) for the Householder records."""

    def build(rng, dtype):
        out = []
        for shape in shapes:
            a = make_array(rng, shape, dtype)
            h, tau = np.linalg.qr(a.reshape(-1, *shape[-2:])[0], mode="raw")
            out.append(Sample((np.ascontiguousarray(h.T).astype(dtype), tau.astype(dtype))))
        return out

    return build


def _ormqr_samples(rng, dtype):
    out = []
    for left, transpose in ((True, False), (True, True), (False, False), (False, True)):
        h, tau = _geqrf_samples(((4, 3),))(rng, dtype)[0].args
        other = make_array(rng, (4, 2) if left else (2, 4), dtype)
        out.append(Sample((h, tau, other), {"left": left, "transpose": transpose}))
    return out


RECORDS += [
    OpInfo("linalg.cond", _cond_samples, dtypes=SOLVER_DTYPES),
    OpInfo("linalg.cond", _cond_norm_samples, dtypes=SOLVER_DTYPES, grad=False, variant="norms"),
    OpInfo(
        "linalg.cond",
        lambda rng, dtype: [s for s in _cond_norm_samples(rng, dtype) if s.grad],
        torch=_cond_by_norms,
        dtypes=FLOATS,
        variant="norms_grad",
    ),
    OpInfo("linalg.tensorinv", _tensorinv_samples, dtypes=SOLVER_DTYPES),
    OpInfo("linalg.tensorsolve", _tensorsolve_samples, dtypes=SOLVER_DTYPES),
    OpInfo(
        "linalg.vander",
        lambda rng, dtype: [
            Sample((make_array(rng, (3,), dtype),)),
            Sample((make_array(rng, (2, 3), dtype),), {"N": 4}),
            Sample((np.array([0.0, 1.0, -2.0], dtype),), {"N": 2}),
        ],
        dtypes=(*FLOATS, *COMPLEX, *INTS),
    ),
    OpInfo(
        "linalg.diagonal",
        _with_kwargs(
            ((((3, 4),), {}), (((2, 3, 3),), {"offset": 1}), (((2, 3, 4),), {"dim1": 0, "dim2": 2}))
        ),
    ),
    OpInfo(
        "linalg.householder_product",
        _geqrf_samples(((3, 3), (4, 2), (5, 3))),
        dtypes=SOLVER_DTYPES,
    ),
    OpInfo("orgqr", _geqrf_samples(((4, 3),))),
    OpInfo("ormqr", _ormqr_samples, dtypes=SOLVER_DTYPES),
    OpInfo(
        "chain_matmul",
        _shaped(((2, 3), (3, 4), (4, 2)), ((3, 2),)),
        torch=_deprecated("chain_matmul"),
    ),
]
RECORDS += [
    OpInfo("geqrf", _matrices((4, 3), (3, 4), (2, 3, 3), (0, 3)), dtypes=SOLVER_DTYPES, grad=False),
    OpInfo("qr", _matrices((3, 2), (2, 2, 3)), torch=_deprecated("qr"), dtypes=SOLVER_DTYPES),
    OpInfo("qr", _matrices((3, 3), some=False), torch=_deprecated("qr"), variant="complete"),
]


# -- randomized low-rank decompositions ---------------------------------------------------------
def _lowrank_reproduced(name):
    """S and U diag(S) V^H, which for a matrix of rank q do not depend on the random sketch
    (the factors themselves do, by a phase per singular pair)."""

    def call(lib, *args, **kwargs):
        u, s, v = getattr(lib, name)(*args, **kwargs)
        return s, (u * s.unsqueeze(-2).to(u.dtype)) @ v.mH

    return call


def _lowrank_samples(rng, dtype):
    shift = make_array(rng, (5, 4), dtype)
    return [
        Sample((_rank_deficient(rng, dtype, (6, 4), 2),), {"q": 2}),
        Sample((_rank_deficient(rng, dtype, (2, 3, 5), 3),), {"q": 3, "niter": 1}),
        # A - M of rank 2 (M goes positionally: keyword arrays stay NumPy)
        Sample(((_rank_deficient(rng, dtype, (5, 4), 2) + shift).astype(dtype), 2, 2, shift)),
    ]


def _pca_samples(rng, dtype):
    return [
        Sample((_rank_deficient(rng, dtype, (6, 4), 2),), {"q": 2}),
        Sample((_rank_deficient(rng, dtype, (5, 4), 3),), {"q": 3, "center": False}),
    ]


RECORDS += [
    OpInfo(
        "svd_lowrank",
        _lowrank_samples,
        op=functools.partial(_lowrank_reproduced("svd_lowrank"), flow),
        torch=_lowrank_reproduced("svd_lowrank"),
        dtypes=SOLVER_DTYPES,
        grad=False,  # a function of the random sketch away from rank-q matrices
        random=True,  # a random sketch inside (values: tests/unit/test_linalg_decompositions)
    ),
    OpInfo(
        "pca_lowrank",
        _pca_samples,
        op=functools.partial(_lowrank_reproduced("pca_lowrank"), flow),
        torch=_lowrank_reproduced("pca_lowrank"),
        dtypes=SOLVER_DTYPES,
        grad=False,
        random=True,
    ),
]
