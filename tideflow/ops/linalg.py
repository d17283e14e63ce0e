"""Linear algebra: matrix products (matmul and its fixed-rank relatives, the add<mm|mv|bmm>
family, outer, kron), einsum and tensordot, the `tideflow.linalg` solvers and decompositions
(inv, solve, det, slogdet, cholesky, qr, eigh), cross products and trace.

Products run NumPy's BLAS-backed matmul in the operands' own precision (float32 stays
float32); float16/bfloat16 accumulate in float32 and round once, as PyTorch's CPU kernels do.
Like PyTorch, products do not promote: operands of different dtypes raise. The matmul op has
private `ta`/`tb` flags (OneFlow's transpose_a/transpose_b) that transpose an operand's last two
axes inside the kernel, so the gradients of products are again products and never materialize
a transpose. Solvers and decompositions accept float32/float64 and complex64/complex128 (PyTorch
rejects half precision); their grad rules take adjoints (`_mH`), which are transposes for real
matrices, so one rule serves both.
"""

from __future__ import annotations

import functools
import math
import string
import warnings
from collections import namedtuple

import numpy as np

from ..backends import bf16_gemm
from ..framework import dtype as dtypes
from ..framework.dispatch import inplace
from ..framework.errors import DTypeError, LinAlgError, Rejected, ShapeError, TideflowError
from ..framework.tensor import Tensor
from ._rules import (
    B,
    Meta,
    P,
    S,
    Signature,
    broadcast_shapes,
    checked,
    defop,
    dispatch,
    methods,
    normalize_dim,
    tensor_arg,
    tensors_arg,
)
from .binary import where
from .complex import angle, conj, holomorphic, imag
from .creation import eye, on_placement_of, ones
from .shape import cat, diag_embed, diagonal, narrow, transpose, tril

__all__ = [
    "matmul",
    "mm",
    "bmm",
    "mv",
    "dot",
    "vdot",
    "outer",
    "ger",
    "addmm",
    "addmv",
    "baddbmm",
    "addbmm",
    "einsum",
    "tensordot",
    "kron",
    "trace",
    "cross",
    "det",
    "inverse",
    "slogdet",
    "logdet",
    "inner",
    "matrix_power",
]

# Functions published as `tideflow.linalg.<name>` (inv, solve, det, vector_norm, ...).
LINALG_NAMESPACE: dict = {}

_LOW_PRECISION = frozenset({dtypes.float16.np, dtypes.bfloat16.np})
_BF16 = dtypes.bfloat16.np
_SOLVER_DTYPES = (dtypes.float32, dtypes.float64, dtypes.complex64, dtypes.complex128)
_SOLVER_NP = frozenset(d.np for d in _SOLVER_DTYPES)
_LETTERS = string.ascii_letters  # einsum labels: a-z, A-Z


def _dims(shape) -> list:
    return list(shape)


def _check_same_dtype(name: str, *metas: Meta) -> None:
    """Products and einsum compute in their operands' dtype: mixed or bool operands raise."""
    first = metas[0].dtype
    for m in metas[1:]:
        if m.dtype is not first:
            listed = " and ".join(x.dtype.name for x in metas)
            raise DTypeError(f"{name}: expected operands of the same dtype, got {listed}")
    if first is dtypes.bool_:
        raise DTypeError(f"{name}: bool operands are not supported")


def _same_dtype_arrays(arrays) -> bool:
    first = arrays[0].dtype
    return first != np.bool_ and all(a.dtype == first for a in arrays)


# -- matrix products --------------------------------------------------------------------------
_PLAIN = {"ta": False, "tb": False}
_RANK_WORDS = {
    (2, 2): "two 2-D matrices",
    (3, 3): "two 3-D tensors (batches of matrices)",
    (2, 1): "a 2-D matrix and a 1-D vector",
    (1, 1): "two 1-D vectors",
}


def _matmul_arrays(a, b, ta: bool, tb: bool, out=None):
    """op(a) @ op(b), op transposing the last two axes when flagged, written into `out` when
    given (the product's shape and dtype, C-contiguous) unless half precision: that
    accumulates in float32 (NumPy has no half BLAS) and rounds once, into a fresh array."""
    if ta:
        a = np.swapaxes(a, -1, -2)
    if tb:
        b = np.swapaxes(b, -1, -2)
    if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous:
        # NOTE: np.matmul (and bf16_gemm) run one GEMM per matrix of a batch; stacked rows
        # times one matrix are one GEMM, 5-15% faster on a GPT's (batch, time, features)
        # activations in float32, more in bfloat16 (the right operand is read once).
        rows = math.prod(a.shape[:-1])
        into = None if out is None else out.reshape(rows, b.shape[-1])
        product = _matmul_arrays(a.reshape(rows, a.shape[-1]), b, False, False, into)
        return product.reshape(*a.shape[:-1], b.shape[-1])
    if a.dtype in _LOW_PRECISION:
        matrices = a.dtype == _BF16 and a.ndim >= 2 and b.ndim >= 2
        if matrices and bf16_gemm.worth_it(a.shape[-2], a.shape[-1], b.shape[-1]):
            # AVX512-BF16 products with float32 sums (3x float32 BLAS), rounded once
            return bf16_gemm.rounded(bf16_gemm.bf16_gemm(a, b))
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    return np.matmul(a, b, out=out)


def _mat_axes(ndim: int, transposed: bool, left: bool) -> tuple:
    """(free axis, contracted axis) of a product operand after its optional transpose: the
    left operand keeps its rows, the right one its columns; a vector has no free axis."""
    if ndim == 1:
        return None, 0
    rows, cols = (ndim - 1, ndim - 2) if transposed else (ndim - 2, ndim - 1)
    return (rows, cols) if left else (cols, rows)


def _product_meta(name: str, ranks, broadcast: bool, a: Meta, b: Meta, *, ta, tb) -> Meta:
    if ranks is None:
        if a.ndim == 0 or b.ndim == 0:
            raise ShapeError(
                f"{name}: both arguments need to be at least 1-D, got shapes "
                f"{_dims(a.shape)} and {_dims(b.shape)}"
            )
    elif (a.ndim, b.ndim) != ranks:
        raise ShapeError(
            f"{name}: expected {_RANK_WORDS[ranks]}, got shapes "
            f"{_dims(a.shape)} and {_dims(b.shape)}"
        )
    _check_same_dtype(name, a, b)
    free_a, k_a = _mat_axes(a.ndim, ta, left=True)
    free_b, k_b = _mat_axes(b.ndim, tb, left=False)
    if a.shape[k_a] != b.shape[k_b]:
        raise ShapeError(
            f"{name}: shapes {_dims(a.shape)} and {_dims(b.shape)} cannot be multiplied "
            f"({a.shape[k_a]} != {b.shape[k_b]})"
        )
    batch = _product_batch(name, a, b, broadcast)
    free = [m.shape[f] for m, f in ((a, free_a), (b, free_b)) if f is not None]
    return Meta((*batch, *free), a.dtype)


def _product_batch(name: str, a: Meta, b: Meta, broadcast: bool) -> tuple:
    """The output's batch dims: the operands' dims before the last two (vectors have none)."""
    batch_a, batch_b = tuple(a.shape[:-2]), tuple(b.shape[:-2])
    if not broadcast:
        if batch_a != batch_b:
            raise ShapeError(
                f"{name}: batch sizes of shapes {_dims(a.shape)} and {_dims(b.shape)} differ "
                f"({_dims(batch_a)} != {_dims(batch_b)})"
            )
        return batch_a
    try:
        return broadcast_shapes(name, batch_a, batch_b)
    except ShapeError:
        raise ShapeError(
            f"{name}: batch dimensions {_dims(batch_a)} and {_dims(batch_b)} of shapes "
            f"{_dims(a.shape)} and {_dims(b.shape)} cannot be broadcast together"
        ) from None


def _product_sbp(a: Meta, b: Meta, *, ta, tb) -> list[Signature]:
    """OneFlow's matmul layouts: split a batch axis (an operand broadcast along it stays B),
    the left rows or the right columns; split the contracted axis on both -> P; P x B -> P."""
    free_a, k_a = _mat_axes(a.ndim, ta, left=True)
    free_b, k_b = _mat_axes(b.ndim, tb, left=False)
    batch = broadcast_shapes("sbp", tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    sigs = [Signature((B, B), (B,))]
    for j, size in enumerate(batch):
        ins = []
        for m in (a, b):
            i = j - (len(batch) - len(m.shape[:-2]))
            ins.append(S(i) if i >= 0 and m.shape[i] == size else B)
        sigs.append(Signature(tuple(ins), (S(j),)))
    out_ndim = len(batch) + (free_a is not None) + (free_b is not None)
    if free_a is not None:
        sigs.append(Signature((S(free_a), B), (S(len(batch)),)))
    if free_b is not None:
        sigs.append(Signature((B, S(free_b)), (S(out_ndim - 1),)))
    sigs += [
        Signature((S(k_a), S(k_b)), (P,)),
        Signature((P, B), (P,)),
        Signature((B, P), (P,)),
    ]
    return sigs


def _product_grad(ctx, gy):
    """d op(a) = gy @ op(b)^T and d op(b) = op(a)^T @ gy, written back through the flags.
    A vector operand is a one-row (left) or one-column (right) matrix here; the output's
    gradient gets that unit dim back, and the operand's gradient loses it again."""
    need_a, need_b = ctx.needs_input_grad
    a, b, ta, tb = ctx.input, ctx.other, ctx.ta, ctx.tb
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    if a_vec or b_vec:
        n_batch = gy.ndim - (not a_vec) - (not b_vec)
        rows = 1 if a_vec else gy.shape[n_batch]
        cols = 1 if b_vec else gy.shape[-1]
        gy = gy.reshape(*gy.shape[:n_batch], rows, cols)
        a = a.reshape(1, -1) if a_vec else a
        b = b.reshape(-1, 1) if b_vec else b
    ga = gb = None
    if need_a:
        ga = _mm(b, gy, tb, True) if ta else _mm(gy, b, False, not tb)
        if a_vec:
            ga = ga.reshape(*ga.shape[:-2], ga.shape[-1])
    if need_b:
        gb = _mm(gy, a, True, ta) if tb else _mm(a, gy, not ta, False)
        if b_vec:
            gb = gb.reshape(*gb.shape[:-1])
    return ga, gb


def _product(name: str, ranks=None, broadcast: bool = True):
    """A matrix-product op: `matmul` (ranks >= 1, broadcast batch dims) or a fixed-rank
    relative. They share kernel, SBP and grad; their meta rules (the user's errors) differ."""

    def kernel(a, b, *, ta, tb, out=None):
        rejected = (
            not _same_dtype_arrays((a, b))
            or (ranks is not None and (a.ndim, b.ndim) != ranks)
            or (not broadcast and a.shape[:-2] != b.shape[:-2])
        )
        if rejected:  # np.matmul would promote or broadcast: the meta rule words the error
            raise Rejected(f"{name}: operands rejected")
        return _matmul_arrays(a, b, ta, tb, out)

    return defop(
        name,
        inputs=("input", "other"),
        meta=functools.partial(_product_meta, name, ranks, broadcast),
        sbp=_product_sbp,
        kernels={"cpu": kernel},
        out_kernels={"cpu": kernel},
        grad=holomorphic(_product_grad),
        saves=("input", "other"),
        onnx=_product_onnx,
    )


def _product_onnx(g, a, b, *, ta, tb):
    """MatMul (NumPy's rules, as matmul's), with the flagged operands' last two axes swapped."""

    def swapped(x):
        n = len(g.meta(x).shape)
        return g.op("Transpose", x, perm=[*range(n - 2), n - 1, n - 2])

    if len(g.meta(a).shape) == len(g.meta(b).shape) == 1:
        # NOTE: a dot product as MatMul of two vectors crashes OpenVINO's CPU plugin
        return g.op("ReduceSum", g.op("Mul", a, b), g.ints([0]), keepdims=0)
    return g.op("MatMul", swapped(a) if ta else a, swapped(b) if tb else b)


_matmul = _product("matmul")
_mm_op = _product("mm", ranks=(2, 2))
_bmm = _product("bmm", ranks=(3, 3), broadcast=False)
_mv = _product("mv", ranks=(2, 1))
_dot = _product("dot", ranks=(1, 1))
_vdot = _product("vdot", ranks=(1, 1))


def _mm(x, y, ta: bool = False, tb: bool = False):
    """matmul(op(x), op(y)): the building block of every product's gradient."""
    return dispatch(_matmul, (x, y), {"ta": ta, "tb": tb})


def matmul(input, other):
    """Matrix product with PyTorch's rules: 1-D @ 1-D is a dot product; a 1-D operand acts as a
    row (left) or column (right) vector whose unit dim is dropped from the result; dims before
    the last two are batch dims and broadcast. Operands must share a dtype. `x @ y` calls this.
    """
    return dispatch(_matmul, (input, other), _PLAIN)


def mm(input, mat2):
    """The product of two 2-D matrices (no broadcasting; see `matmul`)."""
    return dispatch(_mm_op, (input, mat2), _PLAIN)


def bmm(input, mat2):
    """Batched product of two 3-D tensors with the same batch size: `out[i] = input[i] @
    mat2[i]` (no broadcasting; see `matmul`)."""
    return dispatch(_bmm, (input, mat2), _PLAIN)


def mv(input, vec):
    """The product of a 2-D matrix and a 1-D vector."""
    return dispatch(_mv, (input, vec), _PLAIN)


def dot(input, tensor):
    """The dot product of two 1-D tensors of the same size and dtype (a 0-d result)."""
    return dispatch(_dot, (input, tensor), _PLAIN)


def vdot(input, other):
    """The dot product of two 1-D tensors, conjugating the first: for real tensors, `dot`.

    >>> flow.vdot(flow.tensor([1j]), flow.tensor([1j]))
    tensor(1.+0.j)
    """
    tensor_arg("vdot", "input", 1, input)
    return dispatch(_vdot, (conj(input), other), _PLAIN)


def outer(input, vec2):
    """The outer product of two 1-D tensors, `out[i, j] = input[i] * vec2[j]` (promotes like
    `mul`, as in PyTorch). `ger` is an alias."""
    tensor_arg("outer", "input", 1, input)
    tensor_arg("outer", "vec2", 2, vec2)
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(
            f"outer: expected two 1-D tensors, got shapes {_dims(input.shape)} and "
            f"{_dims(vec2.shape)}"
        )
    return input.reshape(-1, 1) * vec2


ger = outer


def _add_product(name: str, input, product, beta, alpha):
    """`beta * input + alpha * product` for the add<mm|mv|bmm> family: `input` broadcasts to the
    product's shape, and beta=0 ignores its values (NaN and inf included), as in PyTorch."""
    if input.dtype is not product.dtype:
        raise DTypeError(
            f"{name}: expected input of the product's dtype {product.dtype.name}, got "
            f"{input.dtype.name}"
        )
    shape = tuple(product.shape)
    try:
        fits = broadcast_shapes(name, tuple(input.shape), shape) == shape
    except ShapeError:
        fits = False
    if not fits:
        raise ShapeError(
            f"{name}: input of shape {_dims(input.shape)} cannot be broadcast to the product's "
            f"shape {_dims(shape)}"
        )
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (input if beta == 1 else input * beta)


@checked
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1):
    """`beta * input + alpha * (mat1 @ mat2)` for 2-D `mat1`, `mat2`; `input` broadcasts to the
    product's shape and is ignored (even NaN) when beta is 0."""
    return _add_product("addmm", input, mm(mat1, mat2), beta, alpha)


@checked
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1):
    """`beta * input + alpha * (mat @ vec)` for a 2-D `mat` and a 1-D `vec`."""
    return _add_product("addmv", input, mv(mat, vec), beta, alpha)


@checked
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1):
    """`beta * input + alpha * bmm(batch1, batch2)`: a batch of `addmm`s."""
    return _add_product("baddbmm", input, bmm(batch1, batch2), beta, alpha)


@checked
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1):
    """`beta * input + alpha * sum_i batch1[i] @ batch2[i]`: the batch's products summed."""
    products = bmm(batch1, batch2)
    return _add_product("addbmm", input, products.sum(0, dtype=products.dtype), beta, alpha)


# -- einsum -----------------------------------------------------------------------------------
# The public einsum contracts its operands pairwise along NumPy's greedy path, through two ops:
# `einsum_reduce` (one operand: diagonals, sums, permutations) and `einsum` (two operands, no
# label repeated within one, every label shared or kept). Summing one-sided labels out first
# makes every gradient again an einsum of the output gradient with the other operand. (One
# n-ary op could not work: `saves` cannot name the operands of a '*' input.)


def _split_equation(equation: str) -> tuple[list[str], str]:
    lhs, out = equation.split("->")
    return lhs.split(","), out


def _einsum_subscripts(equation: str, shapes: list) -> tuple[list[str], str]:
    """Explicit labels of each operand and of the output: '...' becomes fresh letters (aligned
    from the right, like broadcasting); an implicit output becomes the ellipsis dims followed by
    the labels used exactly once, sorted (PyTorch's and NumPy's rule)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise TideflowError(
            f"einsum: the equation {equation!r} has {len(terms)} operand subscripts but "
            f"{len(shapes)} operands were given"
        )
    for term in (*terms, rhs):
        plain = term.replace("...", "", 1)
        if not all(c in _LETTERS for c in plain):
            raise TideflowError(
                f"einsum: invalid subscripts {term!r} in {equation!r}: use letters a-z, A-Z, "
                "at most one '...' per operand, and at most one '->'"
            )
    ell_dims = []
    for i, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        named = len(term.replace("...", ""))
        extra = len(shape) - named
        if extra < 0 or (extra and "..." not in term):
            raise ShapeError(
                f"einsum: subscripts {term!r} of operand {i} name {named} dimensions but the "
                f"operand has shape {_dims(shape)}"
            )
        ell_dims.append(extra)
    n_ell = max(ell_dims, default=0)
    fresh = [c for c in _LETTERS if c not in eq][:n_ell]
    if len(fresh) < n_ell:
        raise TideflowError("einsum: too many dimensions for the 52 subscript letters")
    ell = "".join(fresh)
    ins = [t.replace("...", ell[n_ell - e :]) for t, e in zip(terms, ell_dims, strict=True)]
    if arrow:
        out = rhs.replace("...", ell)
        for c in out:
            if out.count(c) > 1:
                raise TideflowError(f"einsum: output subscript {c!r} appears more than once")
            if not any(c in t for t in ins):
                raise TideflowError(
                    f"einsum: output subscript {c!r} does not appear in the operands' subscripts"
                )
    else:
        named = "".join(terms).replace("...", "")
        out = ell + "".join(sorted(c for c in set(named) if named.count(c) == 1))
    return ins, out


def _label_sizes(ins, shapes) -> dict:
    """Each label's size; a size-1 dim broadcasts against the label's other sizes, while a
    label repeated within one operand (a diagonal) needs equal sizes."""
    sizes: dict = {}
    for i, (labels, shape) in enumerate(zip(ins, shapes, strict=True)):
        if len(labels) != len(shape):
            raise ShapeError(
                f"einsum: subscripts {labels!r} of operand {i} do not match its shape "
                f"{_dims(shape)}"
            )
        own: dict = {}
        for label, d in zip(labels, shape, strict=True):
            if own.setdefault(label, d) != d:
                raise ShapeError(
                    f"einsum: subscript {label!r} is repeated in operand {i} (shape "
                    f"{_dims(shape)}) with different sizes {own[label]} and {d}"
                )
            seen = sizes.get(label, 1)
            if seen != 1 and d not in (1, seen):
                listed = " and ".join(str(_dims(s)) for s in shapes)
                raise ShapeError(
                    f"einsum: subscript {label!r} has sizes {seen} and {d} in operands of shapes "
                    f"{listed}, which cannot be broadcast together"
                )
            sizes[label] = d if seen == 1 else seen
    return sizes


def _einsum_meta(*operands: Meta, equation) -> Meta:
    ins, out = _split_equation(equation)
    _check_same_dtype("einsum", *operands)
    sizes = _label_sizes(ins, [m.shape for m in operands])
    return Meta(tuple(sizes[c] for c in out), operands[0].dtype)


def _einsum_pair_kernel(a, b, *, equation):
    """`la,lb->out` as one (batched) matmul, as PyTorch does: labels in both operands and the
    output are batch dims (broadcast by np.matmul), labels of one operand and the output are
    its free dims, labels of both operands only are contracted (np.einsum has no BLAS path for
    batch labels). `_contract` guarantees that no label repeats within an operand or belongs
    to one operand alone, and that contracted labels have equal sizes."""
    if not _same_dtype_arrays((a, b)):
        raise Rejected("einsum: operands rejected")
    (la, lb), out = _split_equation(equation)
    batch = [c for c in out if c in la and c in lb]
    free_a = [c for c in la if c not in lb]
    free_b = [c for c in lb if c not in la]
    summed = [c for c in la if c in lb and c not in out]
    size_a, size_b = dict(zip(la, a.shape, strict=True)), dict(zip(lb, b.shape, strict=True))
    a = a.transpose([la.index(c) for c in batch + free_a + summed])
    b = b.transpose([lb.index(c) for c in batch + summed + free_b])
    k = math.prod(size_a[c] for c in summed)
    a = a.reshape((*a.shape[: len(batch)], math.prod(size_a[c] for c in free_a), k))
    b = b.reshape((*b.shape[: len(batch)], k, math.prod(size_b[c] for c in free_b)))
    product = _matmul_arrays(a, b, False, False)
    free = [size_a[c] for c in free_a] + [size_b[c] for c in free_b]
    product = product.reshape((*product.shape[: len(batch)], *free))
    dims = [*batch, *free_a, *free_b]
    return product.transpose([dims.index(c) for c in out])


def _einsum_reduce_kernel(x, *, equation):
    """Diagonals, sums and permutations of one operand; summing integers gives int64."""
    if x.dtype == np.bool_:
        raise Rejected("einsum: operand rejected")
    if x.dtype.kind in "iu" and _sums(equation):
        return np.einsum(equation, x, dtype=np.int64)
    if x.dtype in _LOW_PRECISION:
        return np.einsum(equation, x.astype(np.float32)).astype(x.dtype)
    out = np.einsum(equation, x)
    return out.copy() if np.may_share_memory(out, x) else out  # permutations are views


def _einsum_sbp(*operands: Meta, equation) -> list[Signature]:
    """Split a label in every operand carrying it at full size (others broadcast it: B): a
    kept label splits the output, a contracted one leaves partial sums. Einsum is linear in
    each operand, so one P operand with the rest B gives P."""
    ins, out = _split_equation(equation)
    sizes = _label_sizes(ins, [m.shape for m in operands])
    n = len(operands)
    sigs = [Signature((B,) * n, (B,))]
    sigs += [Signature(tuple(P if j == i else B for j in range(n)), (P,)) for i in range(n)]
    for label, size in sizes.items():
        if any(labels.count(label) > 1 for labels in ins):
            continue  # a diagonal cannot be split along both of its axes
        split = tuple(
            S(labels.index(label))
            if label in labels and m.shape[labels.index(label)] == size
            else B
            for labels, m in zip(ins, operands, strict=True)
        )
        sigs.append(Signature(split, (S(out.index(label)),) if label in out else (P,)))
    return sigs


def _einsum_grad(ctx, gy):
    """a,b->out: grad_a = einsum(out,b->a); every label of a is in out or b by construction."""
    (la, lb), out = _split_equation(ctx.equation)
    need_a, need_b = ctx.needs_input_grad
    ga = _contract_op(gy, ctx.other, f"{out},{lb}->{la}") if need_a else None
    gb = _contract_op(gy, ctx.input, f"{out},{la}->{lb}") if need_b else None
    return ga, gb


def _einsum_reduce_grad(ctx, gy):
    """Spread the output gradient back: constant along summed labels (a ones factor) and
    placed on the diagonal of repeated labels (an identity factor over a fresh letter)."""
    (labels,), out = _split_equation(ctx.equation)
    fresh = iter(c for c in _LETTERS if c not in labels)
    target, factor_labels, factors = [], [], []
    for i, (label, size) in enumerate(zip(labels, ctx.input_shape(0), strict=True)):
        if label in labels[:i]:
            new = next(fresh)
            target.append(new)
            factor_labels.append(label + new)
            factors.append(eye(size, dtype=gy.dtype))
            continue
        target.append(label)
        if label not in out and labels.count(label) == 1:
            factor_labels.append(label)
            factors.append(ones(size, dtype=gy.dtype))
    equation = ",".join((out, *factor_labels)) + "->" + "".join(target)
    return (einsum(equation, gy, *factors),)


def _einsum_onnx(g, a, b, *, equation):
    """ONNX's Einsum, with labels of size 1 broadcast first (the kernel's matmul broadcasts
    them; Einsum wants a label's sizes equal)."""
    ins, _ = _split_equation(equation)
    sizes: dict[str, int] = {}
    for labels, x in zip(ins, (a, b), strict=True):
        for c, d in zip(labels, g.meta(x).shape, strict=True):
            sizes[c] = max(sizes.get(c, 1), d)
    operands = []
    for labels, x in zip(ins, (a, b), strict=True):
        full = [sizes[c] for c in labels]
        same = list(g.meta(x).shape) == full
        operands.append(x if same else g.op("Expand", x, g.ints(full)))
    return g.op("Einsum", *operands, equation=equation)


_einsum = defop(
    "einsum",
    inputs=("input", "other"),
    meta=_einsum_meta,
    sbp=_einsum_sbp,
    kernels={"cpu": _einsum_pair_kernel},
    grad=holomorphic(_einsum_grad),
    saves=("input", "other"),
    onnx=_einsum_onnx,
)


def _sums(equation: str) -> bool:
    (labels,), out = _split_equation(equation)
    return any(c not in out for c in labels)


def _einsum_reduce_meta(x: Meta, *, equation) -> Meta:
    """Like `sum`, summing integers accumulates in int64 (as PyTorch's one-operand einsum)."""
    out = _einsum_meta(x, equation=equation)
    if (x.dtype is dtypes.bool_ or x.dtype in dtypes.INTEGRAL) and _sums(equation):
        return Meta(out.shape, dtypes.int64)
    return out


_einsum_reduce = defop(
    "einsum_reduce",
    inputs=("input",),
    meta=_einsum_reduce_meta,
    sbp=_einsum_sbp,
    kernels={"cpu": _einsum_reduce_kernel},
    grad=holomorphic(_einsum_reduce_grad),
    onnx=lambda g, x, *, equation: g.op("Einsum", g.cast(x, g.out[0].dtype), equation=equation),
)


def _contract_op(x, y, equation: str):
    return dispatch(_einsum, (x, y), {"equation": equation})


def _reduce(x, labels: str, target: str):
    return dispatch(_einsum_reduce, (x,), {"equation": f"{labels}->{target}"})


def _contract(x, la: str, y, lb: str, keep: str):
    """One pairwise step `la,lb->keep`. A label only one side carries, and a contracted label
    one side merely broadcasts (size 1), is summed out of each side first."""
    size_x, size_y = dict(zip(la, x.shape, strict=True)), dict(zip(lb, y.shape, strict=True))
    kx = "".join(dict.fromkeys(c for c in la if c in keep or size_y.get(c) == size_x[c]))
    ky = "".join(dict.fromkeys(c for c in lb if c in keep or size_x.get(c) == size_y[c]))
    if kx != la:
        x = _reduce(x, la, kx).to(x.dtype)  # integer sums come back in int64
    if ky != lb:
        y = _reduce(y, lb, ky).to(y.dtype)
    return _contract_op(x, y, f"{kx},{ky}->{keep}")


def _sublist_label(s) -> str:
    if s is Ellipsis:
        return "..."
    if isinstance(s, int) and 0 <= s < 52:  # PyTorch's order: 0-25 are A-Z, 26-51 a-z
        return chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26)
    raise TideflowError(f"einsum: sublist subscript {s!r} is not within the valid range [0, 52)")


def _sublist_equation(args: tuple) -> tuple[str, tuple]:
    """The equation and operands of `einsum(op0, sub0, op1, sub1, ..., [out_sub])`."""
    pairs, out = (args[:-1], args[-1]) if len(args) % 2 else (args, None)
    equation = ",".join("".join(map(_sublist_label, sub)) for sub in pairs[1::2])
    if out is not None:
        equation += "->" + "".join(map(_sublist_label, out))
    return equation, pairs[0::2]


def einsum(equation, *operands):
    """Einstein summation, e.g. `einsum("bij,bjk->bik", x, y)`: repeated labels are multiplied
    and the labels missing from the output summed; '...' stands for broadcast dims; without
    '->' the output is the labels used once, sorted. Operands (also given as one list) must
    share a dtype; several are contracted pairwise along NumPy's greedy (optimize) path.
    PyTorch's sublist form `einsum(x, [0, 1], y, [1, 2], [0, 2])` works too."""
    if not isinstance(equation, str):
        equation, operands = _sublist_equation((equation, *operands))
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    if not operands:
        raise TideflowError("einsum: at least one operand is required")
    tensors_arg("einsum", "operands", 1, operands)
    shapes = [tuple(t.shape) for t in operands]
    ins, out = _einsum_subscripts(equation, shapes)
    _label_sizes(ins, shapes)  # the user's shapes in the error, before any pairwise step
    _check_same_dtype("einsum", *(Meta(s, t.dtype) for s, t in zip(shapes, operands, strict=True)))
    if len(operands) == 1:
        return _reduce(operands[0], ins[0], out)
    dummies = [np.broadcast_to(np.zeros(()), s) for s in shapes]
    path = np.einsum_path(",".join(ins) + "->" + out, *dummies, optimize="greedy")[0][1:]
    terms = list(zip(ins, operands, strict=True))
    for step in path:  # each step contracts some terms into one, appended to the list
        group = [terms[i] for i in step]
        for i in sorted(step, reverse=True):
            del terms[i]
        labels, acc = group[0]
        for k, (other_labels, other) in enumerate(group[1:], 2):
            later = "".join(t[0] for t in terms + group[k:])
            if later:  # keep what the output or a later contraction needs
                both = labels + other_labels
                keep = "".join(dict.fromkeys(c for c in both if c in out or c in later))
            else:
                keep = out
            acc = _contract(acc, labels, other, other_labels, keep)
            labels = keep
        terms.append((labels, acc))
    return terms[0][1]


@checked
def tensordot(a: Tensor, b: Tensor, dims=2):
    """Sum products over `dims` of `a` and `b`: an int n pairs the last n dims of `a` with the
    first n of `b`; a pair of lists names them. The result has `a`'s free dims, then `b`'s."""
    if isinstance(dims, int):
        if not 0 <= dims <= min(a.ndim, b.ndim):
            raise ShapeError(
                f"tensordot: dims={dims} must be in [0, {min(a.ndim, b.ndim)}] for shapes "
                f"{_dims(a.shape)} and {_dims(b.shape)}"
            )
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
        if len(dims_a) != len(dims_b):
            raise ShapeError(
                f"tensordot: both sides must name as many dims, got {dims_a} and {dims_b}"
            )
        dims_a = [normalize_dim("tensordot", d, a.ndim) for d in dims_a]
        dims_b = [normalize_dim("tensordot", d, b.ndim) for d in dims_b]
        if len(set(dims_a)) != len(dims_a) or len(set(dims_b)) != len(dims_b):
            raise ShapeError(f"tensordot: a dim is named twice in {dims_a} or {dims_b}")
    for da, db in zip(dims_a, dims_b, strict=True):
        if a.shape[da] != b.shape[db]:
            raise ShapeError(
                f"tensordot: contracted dims must match, but a (shape {_dims(a.shape)}) has "
                f"size {a.shape[da]} in dim {da} and b (shape {_dims(b.shape)}) has size "
                f"{b.shape[db]} in dim {db}"
            )
    _check_same_dtype("tensordot", Meta(tuple(a.shape), a.dtype), Meta(tuple(b.shape), b.dtype))
    letters = iter(_LETTERS)
    la = [next(letters) for _ in range(a.ndim)]
    lb = [la[dims_a[dims_b.index(i)]] if i in dims_b else next(letters) for i in range(b.ndim)]
    out = [c for i, c in enumerate(la) if i not in dims_a]
    out += [c for i, c in enumerate(lb) if i not in dims_b]
    return einsum(f"{''.join(la)},{''.join(lb)}->{''.join(out)}", a, b)


@checked
def inner(input: Tensor, other: Tensor):
    """The dot product over the last dim, for every pair of vectors: shape
    `input.shape[:-1] + other.shape[:-1]`; a 0-d operand scales the other."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise ShapeError(
            f"inner: the last dims must match, got shapes {_dims(input.shape)} and "
            f"{_dims(other.shape)}"
        )
    return tensordot(input, other, dims=([-1], [-1]))


def _chain_splits(sizes: list) -> dict:
    """The cheapest parenthesization of a matrix chain (matrix i is sizes[i] x sizes[i+1]):
    the textbook dynamic program, split[i, j] = where the product of matrices i..j splits."""
    n = len(sizes) - 1
    cost = {(i, i): 0 for i in range(n)}
    split = {}
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i, j], split[i, j] = min(
                (cost[i, k] + cost[k + 1, j] + sizes[i] * sizes[k + 1] * sizes[j + 1], k)
                for k in range(i, j)
            )
    return split


def multi_dot(tensors):
    """The product of a list of matrices, multiplied in the cheapest order. The first may be a
    1-D row vector and the last a 1-D column vector; their dims are dropped from the result."""
    tensors = list(tensors)
    n = len(tensors)
    if n < 2:
        raise TideflowError(f"linalg.multi_dot: expected at least 2 tensors, got {n}")
    mats = []
    for i, t in enumerate(tensors):
        if t.ndim == 1 and i in (0, n - 1):
            t = t.reshape(1, -1) if i == 0 else t.reshape(-1, 1)
        elif t.ndim != 2:
            ends = " (or 1-D, as the first or last)" if i in (0, n - 1) else ""
            raise ShapeError(
                f"linalg.multi_dot: tensor {i} must be 2-D{ends}, got shape {_dims(t.shape)}"
            )
        if mats and mats[-1].shape[1] != t.shape[0]:
            raise ShapeError(
                f"linalg.multi_dot: tensors {i - 1} and {i} with shapes "
                f"{_dims(tensors[i - 1].shape)} and {_dims(tensors[i].shape)} cannot be multiplied"
            )
        mats.append(t)
    _check_same_dtype("linalg.multi_dot", *(Meta(tuple(t.shape), t.dtype) for t in mats))
    split = _chain_splits([m.shape[0] for m in mats] + [mats[-1].shape[1]])

    def product(i, j):
        return mats[i] if i == j else mm(product(i, split[i, j]), product(split[i, j] + 1, j))

    out = product(0, n - 1)
    if tensors[0].ndim == 1 or tensors[-1].ndim == 1:
        kept = (d for d, t in zip(out.shape, (tensors[0], tensors[-1]), strict=True) if t.ndim == 2)
        out = out.reshape(*kept)
    return out


@checked
def matrix_power(A: Tensor, n):
    """A square matrix (or batch) to the integer power n by repeated squaring: n = 0 gives the
    identity (a constant, outside A's graph), a negative n powers the inverse."""
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(
            f"linalg.matrix_power: expected a square matrix or a batch of them, got shape "
            f"{_dims(A.shape)}"
        )
    if n == 0:
        return eye(A.shape[-1], dtype=A.dtype, **on_placement_of(A)).expand(*A.shape).clone()
    power, n = (inv(A), -n) if n < 0 else (A, n)
    result = None
    while True:
        if n & 1:
            result = power if result is None else matmul(result, power)
        n >>= 1
        if not n:
            break
        power = matmul(power, power)
    return result.clone() if result is A else result


@checked
def kron(input: Tensor, other: Tensor):
    """The Kronecker product: `out` has shape `input.shape * other.shape` (dims compared from
    the right) and blocks `input[i...] * other`. Promotes like `mul`."""
    ndim = max(input.ndim, other.ndim)
    sa = (1,) * (ndim - input.ndim) + tuple(input.shape)
    sb = (1,) * (ndim - other.ndim) + tuple(other.shape)
    a = input.reshape(*(d for size in sa for d in (size, 1)))
    b = other.reshape(*(d for size in sb for d in (1, size)))
    return (a * b).reshape(*(x * y for x, y in zip(sa, sb, strict=True)))


# -- trace, cross -----------------------------------------------------------------------------
def _trace_meta(x: Meta) -> Meta:
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a 2-D matrix, got shape {_dims(x.shape)}")
    if x.dtype is dtypes.bool_:
        raise DTypeError("trace: bool tensors are not supported")
    return Meta((), x.dtype if x.dtype.is_floating_point else dtypes.int64)


def _trace_kernel(x):
    if x.ndim != 2 or x.dtype == np.bool_:
        raise Rejected("trace: input rejected")
    if x.dtype in _LOW_PRECISION:
        return np.asarray(np.trace(x, dtype=np.float32)).astype(x.dtype)
    return np.trace(x, dtype=np.int64 if x.dtype.kind in "iu" else None)


_trace = defop(
    "trace",
    inputs=("input",),
    meta=_trace_meta,
    sbp=lambda x: [Signature((B,), (B,)), Signature((P,), (P,))],
    kernels={"cpu": _trace_kernel},
    grad=lambda ctx, gy: (gy * eye(*ctx.input_shape(0), dtype=gy.dtype),),
)


def trace(input):
    """The sum of the main diagonal of a 2-D matrix (integer inputs sum to int64)."""
    return dispatch(_trace, (input,), {})


def _cross_meta(a: Meta, b: Meta, *, dim) -> Meta:
    _check_same_dtype("linalg.cross", a, b)
    if a.ndim != b.ndim:
        raise ShapeError(
            f"linalg.cross: inputs must have the same number of dims, got shapes "
            f"{_dims(a.shape)} and {_dims(b.shape)}"
        )
    shape = broadcast_shapes("linalg.cross", a.shape, b.shape)
    if a.shape[dim] != 3 or b.shape[dim] != 3:
        raise ShapeError(
            f"linalg.cross: dim {dim} must have length 3 in both inputs, got shapes "
            f"{_dims(a.shape)} and {_dims(b.shape)}"
        )
    return Meta(shape, a.dtype)


def _cross_kernel(a, b, *, dim):
    three = a.ndim == b.ndim and a.shape[dim] == b.shape[dim] == 3  # np.cross takes 2-vectors
    if not three or not _same_dtype_arrays((a, b)):
        raise Rejected("linalg.cross: operands rejected")
    if a.dtype in _LOW_PRECISION:
        return np.cross(a.astype(np.float32), b.astype(np.float32), axis=dim).astype(a.dtype)
    return np.cross(a, b, axis=dim)


def _cross_sbp(a: Meta, b: Meta, *, dim) -> list[Signature]:
    """Vectors along `dim` are independent: split any other axis (an operand broadcast along
    it stays B). Bilinear: one P operand with the other B gives P."""
    shape = broadcast_shapes("sbp", a.shape, b.shape)
    sigs = [Signature((B, B), (B,)), Signature((P, B), (P,)), Signature((B, P), (P,))]
    for axis, size in enumerate(shape):
        if axis != dim:
            ins = tuple(S(axis) if m.shape[axis] == size else B for m in (a, b))
            sigs.append(Signature(ins, (S(axis),)))
    return sigs


def _cross_grad(ctx, gy):
    need_a, need_b = ctx.needs_input_grad
    attrs = {"dim": ctx.dim}
    ga = dispatch(_cross, (ctx.other, gy), attrs) if need_a else None
    gb = dispatch(_cross, (gy, ctx.input), attrs) if need_b else None
    return ga, gb


_cross = defop(
    "linalg_cross",
    inputs=("input", "other"),
    meta=_cross_meta,
    sbp=_cross_sbp,
    kernels={"cpu": _cross_kernel},
    grad=holomorphic(_cross_grad),
    saves=("input", "other"),
)


@checked
def linalg_cross(input: Tensor, other: Tensor, *, dim=-1):
    """The cross product of 3-vectors along `dim`; the other dims broadcast (the inputs need
    the same number of dims, as in PyTorch)."""
    return dispatch(_cross, (input, other), {"dim": normalize_dim("linalg.cross", dim, input.ndim)})


@checked
def cross(input: Tensor, other: Tensor, dim=None):
    """`torch.cross`: `linalg.cross` along `dim`. Without `dim` (deprecated, and warned about as
    in PyTorch) the first dim of size 3 is used, not the last."""
    if dim is None:
        warnings.warn(
            "Using cross without specifying the dim arg is deprecated: pass dim explicitly or "
            "use linalg.cross (whose default is dim=-1)",
            UserWarning,
            stacklevel=2,
        )
        sizes = tuple(input.shape)
        if 3 not in sizes:
            raise ShapeError(f"cross: no dimension of size 3 in input of shape {_dims(sizes)}")
        dim = sizes.index(3)
    return linalg_cross(input, other, dim=dim)


# -- solvers and decompositions ---------------------------------------------------------------
def _check_square(name: str, x: Meta, square: bool = True) -> None:
    if x.dtype not in _SOLVER_DTYPES:
        raise DTypeError(
            f"{name}: expected a float32, float64, complex64 or complex128 tensor, got "
            f"{x.dtype.name}"
        )
    if x.ndim < 2 or (square and x.shape[-1] != x.shape[-2]):
        kind = "square matrix" if square else "matrix"
        raise ShapeError(
            f"{name}: expected a {kind} or a batch of them, got shape {_dims(x.shape)}"
        )


def _lapack(name: str, fn, failure: str = "the LAPACK routine failed", square: bool = True):
    """A kernel around a NumPy LAPACK routine: it rejects what the meta rule words as an error
    (dtype, shape), and words LAPACK's failure (singular, not positive-definite)."""

    def kernel(*arrays, **attrs):
        x = arrays[0]
        bad_dtype = x.dtype not in _SOLVER_NP or not _same_dtype_arrays(arrays)
        if bad_dtype or x.ndim < 2 or (square and x.shape[-1] != x.shape[-2]):
            raise Rejected(f"{name}: operands rejected")
        try:
            return fn(*arrays, **attrs)
        except np.linalg.LinAlgError:
            raise LinAlgError(f"{name}: {failure}") from None

    return kernel


def _batch_sbp(n_out: int = 1):
    """Matrices of a batch are independent: split any batch axis."""

    def sbp(x: Meta, **_) -> list[Signature]:
        sigs = [Signature((B,), (B,) * n_out)]
        sigs += [Signature((S(i),), (S(i),) * n_out) for i in range(x.ndim - 2)]
        return sigs

    return sbp


def _square_meta(name: str, out):
    def meta(x: Meta, **attrs):
        _check_square(name, x)
        return out(x, **attrs)

    return meta


def _mT(x):
    return transpose(x, -2, -1)


def _mH(x):
    """The adjoint (conjugate transpose); the transpose of a real matrix."""
    return conj(transpose(x, -2, -1))


def _refuse_phase_dependence(op: str, vectors: str, phase) -> None:
    """PyTorch's refusal of a complex loss that depends on the phase e^{i phi} that each of
    the `vectors` is only defined up to: `phase` is the loss's derivative along those phases.
    Read from the data in eager mode only (a traced graph has none; its gradient is then the
    phase-free part)."""
    data = phase._data
    if isinstance(data, np.ndarray) and not np.allclose(data, 0, rtol=1e-2, atol=1e-2):
        raise TideflowError(
            f"{op}: the {vectors} are defined up to a phase e^{{i phi}}, and the loss depends "
            "on it, so its gradient is ill-defined"
        )


def _batched_outer(u, v):
    """u[..., i] * v[..., j] over broadcast batch dims."""
    return u.reshape(*u.shape, 1) * v.reshape(*v.shape[:-1], 1, v.shape[-1])


_inv = defop(
    "linalg_inv",
    inputs=("input",),
    meta=_square_meta("linalg.inv", lambda x: Meta(x.shape, x.dtype)),
    sbp=_batch_sbp(),
    kernels={"cpu": _lapack("linalg.inv", np.linalg.inv, "the input matrix is singular")},
    # d(A^-1) = -A^-1 dA A^-1, so grad_A = -A^-T gy A^-T (A^-H for complex A: analytic)
    grad=holomorphic(lambda ctx, gy: (-_mm(_mm(ctx.out, gy, True, False), ctx.out, False, True),)),
    saves=("out",),
)


def inv(A):
    """The inverse of a square matrix (or of each in a batch); raises if one is singular."""
    return dispatch(_inv, (A,), {})


@checked
def inverse(input: Tensor):
    """`linalg.inv` under its torch.inverse name (also `Tensor.inverse`)."""
    return inv(input)


def _det_grad(ctx, gy):
    """d det(A) = det(A) tr(A^-1 dA): grad_A = gy det(A) A^-T (A must be invertible)."""
    scale = (gy * ctx.out).reshape(*gy.shape, 1, 1)
    return (scale * _mT(inv(ctx.input)),)


_det = defop(
    "linalg_det",
    inputs=("input",),
    meta=_square_meta("linalg.det", lambda x: Meta(x.shape[:-2], x.dtype)),
    sbp=_batch_sbp(),
    kernels={"cpu": _lapack("linalg.det", np.linalg.det)},
    grad=holomorphic(_det_grad),
    saves=("input", "out"),
)


@checked
def det(A: Tensor):
    """The determinant of a square matrix (or of each in a batch). Its gradient inverts A, so
    it is not available at singular matrices."""
    return dispatch(_det, (A,), {})


SlogdetResult = namedtuple("linalg_slogdet", ["sign", "logabsdet"])


def _slogdet_grad(ctx, gsign, glogabs):
    """With t = tr(A^-1 dA): d log|det A| = Re t and d sign = i Im(t) sign, so
    grad_A = (gL - i Im(conj(gS) sign)) A^-H. A real sign is piecewise constant (no term)."""
    scale = glogabs
    if gsign is not None and gsign.dtype.is_complex:
        scale = scale - imag(conj(gsign) * ctx.out) * 1j
    return (scale.reshape(*scale.shape, 1, 1) * _mH(inv(ctx.input)),)


def _slogdet_meta(x: Meta):
    return Meta(x.shape[:-2], x.dtype), Meta(x.shape[:-2], dtypes.to_real(x.dtype))


_slogdet = defop(
    "linalg_slogdet",
    inputs=("input",),
    meta=_square_meta("linalg.slogdet", _slogdet_meta),
    sbp=_batch_sbp(n_out=2),
    kernels={"cpu": _lapack("linalg.slogdet", lambda x: tuple(np.linalg.slogdet(x)))},
    grad=_slogdet_grad,
    saves=("input", "out"),
    n_out=2,
)


@checked
def slogdet(A: Tensor):
    """`(sign, logabsdet)` with `det(A) = sign * exp(logabsdet)`, stable where `det` would
    overflow or underflow; a singular matrix gives sign 0 and logabsdet -inf."""
    return SlogdetResult(*dispatch(_slogdet, (A,), {}))


@checked
def logdet(input: Tensor):
    """log(det(input)): NaN where a real determinant is negative, -inf where it is 0 (see
    `slogdet`); the principal logarithm for complex input."""
    sign, logabsdet = slogdet(input)
    if sign.dtype.is_complex:
        return logabsdet + angle(sign) * 1j
    return where(sign < 0, math.nan, logabsdet)


def _is_vector_rhs(a_shape: tuple, b_shape: tuple) -> bool:
    """PyTorch's rule: B is a (batch of) vector(s) if it is 1-D or has A's shape minus one dim."""
    return len(b_shape) == 1 or (
        len(b_shape) == len(a_shape) - 1 and tuple(b_shape) == tuple(a_shape[:-1])
    )


def _solve_meta(a: Meta, b: Meta, *, left, adjoint) -> Meta:
    _check_square("linalg.solve", a)
    if b.dtype is not a.dtype:
        raise DTypeError(
            f"linalg.solve: expected A and B of the same dtype, got {a.dtype.name} and "
            f"{b.dtype.name}"
        )
    n = a.shape[-1]
    vector = _is_vector_rhs(a.shape, b.shape)
    equation = "AX = B" if left else "XA = B"
    if vector:  # B holds columns (n x 1), as in PyTorch: XA = B then needs n == 1
        matched = b.shape[-1] == n and (left or n == 1)
    else:
        matched = b.ndim >= 2 and b.shape[-2 if left else -1] == n
    if not matched:
        raise ShapeError(
            f"linalg.solve: incompatible shapes of A and B for the equation {equation} "
            f"({_dims(a.shape)} and {_dims(b.shape)})"
        )
    core = b.shape[-1:] if vector else b.shape[-2:]
    batch_b = b.shape[: b.ndim - len(core)]
    try:
        batch = broadcast_shapes("linalg.solve", a.shape[:-2], batch_b)
    except ShapeError:
        raise ShapeError(
            f"linalg.solve: batch dimensions of A {_dims(a.shape)} and B {_dims(b.shape)} cannot "
            "be broadcast together"
        ) from None
    return Meta((*batch, *core), a.dtype)


def _solve_arrays(a, b, *, left, adjoint):
    """X with op(A) X = B (left) or X op(A) = B, op transposing when `adjoint`. A vector B is
    a column, as in PyTorch (so XA = B rejects it unless A is 1 x 1)."""
    vector = _is_vector_rhs(a.shape, b.shape)
    if vector:
        b = b[..., None]
    if left == adjoint:  # NumPy solves M X = B; X op(A) = B is op(A)^T X^T = B^T
        a = np.swapaxes(a, -1, -2)
    if left:
        x = np.linalg.solve(a, b)
    else:
        x = np.swapaxes(np.linalg.solve(a, np.swapaxes(b, -1, -2)), -1, -2)
    return x[..., 0] if vector else x


def _solve_sbp(a: Meta, b: Meta, *, left, adjoint) -> list[Signature]:
    """Batch axes split (an operand broadcast along one stays B); the right-hand sides are
    independent columns (rows for XA = B); X is linear in B, so B partial gives P."""
    out = _solve_meta(a, b, left=left, adjoint=adjoint)
    vector = _is_vector_rhs(a.shape, b.shape)
    n_core = 1 if vector else 2
    n_batch = len(out.shape) - n_core
    sigs = [Signature((B, B), (B,)), Signature((B, P), (P,))]
    for j in range(n_batch):
        ins = []
        for m, core in ((a, 2), (b, n_core)):
            i = j - (n_batch - (m.ndim - core))
            ins.append(S(i) if i >= 0 and m.shape[i] == out.shape[j] else B)
        sigs.append(Signature(tuple(ins), (S(j),)))
    if not vector:
        axis = -1 if left else -2
        sigs.append(Signature((B, S(b.ndim + axis)), (S(len(out.shape) + axis),)))
    return sigs


def _solve_grad(ctx, gx):
    """With M = op(A): grad_B solves the adjoint system; grad_M = -grad_B X^T (MX = B) or
    -X^T grad_B (XM = B), and grad_A is grad_M or its transpose: both are products of the
    same two factors, in the order the flags below pick."""
    need_a, need_b = ctx.needs_input_grad
    a, x, left, adjoint = ctx.input, ctx.out, ctx.left, ctx.adjoint
    gb = dispatch(_solve, (a, gx), {"left": left, "adjoint": not adjoint})
    ga = None
    if need_a:
        u, v = (gb, x) if left != adjoint else (x, gb)
        if _is_vector_rhs(ctx.input_shape(0), ctx.input_shape(1)):
            ga = -_batched_outer(u, v)
        else:
            ga = -(_mm(u, v, False, True) if left else _mm(u, v, True, False))
    return ga, gb if need_b else None


_solve = defop(
    "linalg_solve",
    inputs=("input", "other"),
    meta=_solve_meta,
    sbp=_solve_sbp,
    kernels={"cpu": _lapack("linalg.solve", _solve_arrays, "the input matrix is singular")},
    grad=holomorphic(_solve_grad),
    saves=("input", "out"),
)


def solve(A, B, *, left=True):
    """The solution X of `A X = B` (or `X A = B` when left=False) for square invertible A. B is
    a batch of vectors when it is 1-D or has A's shape without its last dim; batch dims
    broadcast. More accurate and cheaper than multiplying by `inv(A)`."""
    return dispatch(_solve, (A, B), {"left": left, "adjoint": False})


def _cholesky_grad(ctx, gy):
    """Murray (2016), as in PyTorch: with A = L L^H, T = tril(L^H gL),
    grad_A = L^-H (T + tril(T, -1)^H) / 2 L^-1. An upper factor is U = L^H."""
    factor, upper = ctx.out, ctx.upper
    lower, g_lower = (_mH(factor), _mH(gy)) if upper else (factor, gy)
    t = tril(matmul(_mH(lower), g_lower))
    inv_lower = inv(lower)
    return (matmul(matmul(_mH(inv_lower), (t + _mH(tril(t, -1))) * 0.5), inv_lower),)


_cholesky = defop(
    "linalg_cholesky",
    inputs=("input",),
    meta=_square_meta("linalg.cholesky", lambda x, upper: Meta(x.shape, x.dtype)),
    sbp=_batch_sbp(),
    kernels={
        "cpu": _lapack(
            "linalg.cholesky",
            lambda x, *, upper: np.linalg.cholesky(x, upper=upper),
            "the factorization could not be completed because the input is not positive-definite",
        )
    },
    grad=_cholesky_grad,
    saves=("out",),
)


def cholesky(A, *, upper=False):
    """The Cholesky factor of a symmetric positive-definite matrix: lower L with A = L L^T, or
    upper U with A = U^T U. A is taken to be symmetric (one triangle is read); raises if it is
    not positive-definite."""
    return dispatch(_cholesky, (A,), {"upper": upper})


QRResult = namedtuple("linalg_qr", ["Q", "R"])
_QR_MODES = ("reduced", "complete", "r")


def _qr_meta(x: Meta, *, mode) -> tuple:
    if mode not in _QR_MODES:
        raise TideflowError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    _check_square("linalg.qr", x, square=False)
    *batch, m, n = x.shape
    k = m if mode == "complete" else min(m, n)
    q = Meta((0,), x.dtype) if mode == "r" else Meta((*batch, m, k), x.dtype)
    return q, Meta((*batch, k, n), x.dtype)


def _qr_arrays(x, *, mode):
    if mode not in _QR_MODES:  # NumPy still takes its deprecated modes ('full', ...)
        raise Rejected(f"linalg.qr: mode {mode!r} rejected")
    if mode == "r":  # PyTorch returns an empty Q
        return np.empty((0,), x.dtype), np.linalg.qr(x, mode="r")
    return tuple(np.linalg.qr(x, mode=mode))


def _qr_sbp(x: Meta, *, mode) -> list[Signature]:
    return _batch_sbp(n_out=2)(x) if mode != "r" else [Signature((B,), (B, B))]


def _qr_tall_grad(q, r, gq, gr):
    """m >= n (Liao et al. 2019, as in PyTorch): M = R gR^H - gQ^H Q,
    grad_A = (gQ + Q copyltu(M)) R^-H with copyltu(M) = H + H^H, H = tril(M) with its
    diagonal halved (a real diagonal: LAPACK's R has one, so Q^H dQ's is imaginary)."""
    m_ = matmul(r, _mH(gr)) - matmul(_mH(gq), q)
    half = tril(m_) - diag_embed(diagonal(m_, 0, -2, -1)) * 0.5
    return matmul(gq + matmul(q, half + _mH(half)), _mH(inv(r)))


def _qr_grad(ctx, gq, gr):
    """Tall or square A: see `_qr_tall_grad`. Wide A = [X | Y] (m < n): X = Q U is a square
    QR and Y = Q V, so grad_Y = Q gV and X sees gQ + Y gV^T (V = Q^T Y moves with Q)."""
    m, n = ctx.input_shape(0)[-2:]
    if ctx.mode == "r":
        raise TideflowError(
            "linalg.qr: the gradient depends on Q, which mode='r' does not compute; use "
            "mode='reduced'"
        )
    if ctx.mode == "complete" and m > n:
        raise TideflowError(
            f"linalg.qr: mode='complete' is not differentiable for matrices with more rows than "
            f"columns (got {m} x {n}): the extra columns of Q are not unique"
        )
    q, r = ctx.out, ctx.out1
    if m >= n:
        return (_qr_tall_grad(q, r, gq, gr),)
    gu, gv = narrow(gr, -1, 0, m), narrow(gr, -1, m, n - m)
    y = narrow(ctx.input, -1, m, n - m)
    gx = _qr_tall_grad(q, narrow(r, -1, 0, m), gq + matmul(y, _mH(gv)), gu)
    return (cat([gx, matmul(q, gv)], -1),)


_qr = defop(
    "linalg_qr",
    inputs=("input",),
    meta=_qr_meta,
    sbp=_qr_sbp,
    kernels={"cpu": _lapack("linalg.qr", _qr_arrays, square=False)},
    grad=_qr_grad,
    saves=("input", "out", "out1"),
    n_out=2,
)


def qr(A, mode="reduced"):
    """`(Q, R)` with A = Q R, Q orthonormal columns and R upper triangular. mode='reduced' gives
    Q of shape (m, min(m, n)), 'complete' the square Q, 'r' only R (and an empty Q)."""
    return QRResult(*dispatch(_qr, (A,), {"mode": mode}))


EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])


def _eigh_grad(ctx, gl, gv):
    """A = V diag(L) V^H: grad_A = V (diag(gL) + skew(V^H gV) / E) V^H with E_ij = L_j - L_i
    (distinct eigenvalues needed; skew(X) = (X - X^H) / 2)."""
    values, vectors = ctx.out, ctx.out1
    n = values.shape[-1]
    vgv = matmul(_mH(vectors), gv)
    if vgv.dtype.is_complex:
        _refuse_phase_dependence("linalg.eigh", "eigenvectors", imag(diagonal(vgv, 0, -2, -1)))
    gaps = values.reshape(*values.shape[:-1], 1, n) - values.reshape(*values.shape, 1)
    # the skew part's diagonal is 0: shift the gaps' zero diagonal to 1 to keep it finite
    inner = (vgv - _mH(vgv)) * 0.5 / (gaps + eye(n, dtype=values.dtype)) + diag_embed(gl)
    return (matmul(matmul(vectors, inner), _mH(vectors)),)


def _eigh_meta(x: Meta, *, UPLO):
    return Meta(x.shape[:-1], dtypes.to_real(x.dtype)), Meta(x.shape, x.dtype)


_eigh = defop(
    "linalg_eigh",
    inputs=("input",),
    meta=_square_meta("linalg.eigh", _eigh_meta),
    sbp=_batch_sbp(n_out=2),
    kernels={
        "cpu": _lapack(
            "linalg.eigh",
            lambda x, *, UPLO: tuple(np.linalg.eigh(x, UPLO=UPLO)),
            "the eigenvalue algorithm did not converge",
        )
    },
    grad=_eigh_grad,
    saves=("out", "out1"),
    n_out=2,
)


def eigh(A, UPLO="L"):
    """Eigenvalues (ascending) and orthonormal eigenvectors (columns) of a symmetric matrix,
    read from its lower (UPLO='L') or upper ('U') triangle. Eigenvectors are defined up to sign;
    the gradient needs distinct eigenvalues."""
    if UPLO not in ("L", "U"):
        raise TideflowError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    return EighResult(*dispatch(_eigh, (A,), {"UPLO": UPLO}))


def eigvalsh(A, UPLO="L"):
    """The eigenvalues (ascending) of a symmetric matrix; see `eigh`."""
    return eigh(A, UPLO).eigenvalues


@checked
def vecdot(x: Tensor, y: Tensor, *, dim=-1):
    """The dot product of vectors along `dim`, broadcasting the other dims: `(x * y).sum(dim)`."""
    return (x * y).sum(dim)


LINALG_NAMESPACE.update(
    LinAlgError=LinAlgError,
    inv=inv,
    solve=solve,
    det=det,
    slogdet=slogdet,
    cholesky=cholesky,
    qr=qr,
    eigh=eigh,
    eigvalsh=eigvalsh,
    cross=linalg_cross,
    matmul=matmul,
    vecdot=vecdot,
    multi_dot=multi_dot,
    matrix_power=matrix_power,
)


def _rmatmul(self, other):
    return matmul(other, self)


methods(
    matmul=matmul,
    __matmul__=matmul,
    __rmatmul__=_rmatmul,
    mm=mm,
    bmm=bmm,
    mv=mv,
    dot=dot,
    vdot=vdot,
    outer=outer,
    ger=outer,
    addmm=addmm,
    addmv=addmv,
    baddbmm=baddbmm,
    addbmm=addbmm,
    addmm_=inplace(addmm, "addmm_"),
    addmv_=inplace(addmv, "addmv_"),
    baddbmm_=inplace(baddbmm, "baddbmm_"),
    addbmm_=inplace(addbmm, "addbmm_"),
    kron=kron,
    trace=trace,
    cross=cross,
    det=det,
    inverse=inverse,
    slogdet=slogdet,
    logdet=logdet,
    inner=inner,
    matrix_power=matrix_power,
)
