"""The fused attention op and its backward as one kernel each: a loop over (batch, head)
pairs and tiles of query rows that calls BLAS's sgemm directly on the operands' strided
blocks (any row stride, the leading dimension), with the scale folded into the product and
the softmax (or its backward) applied to the tile in between while it is in cache. NumPy's
kernel pays, per tile, Python-level calls over every head, temporaries and copies instead.

Forward, per tile of query rows [r0, r1) and the keys they see (causal, top-left aligned:
[0, min(r1, S))): the scores `scale q k^T` go straight into `probs` (the backward's state),
become each row's softmax over its visible keys (the rest 0), and `out = probs v`.
Backward, per tile: dS = p (dO v^T - rowsum(p dO v^T)), dq = scale dS k, and over the tiles
dk += scale dS^T q, dv += p^T dO. Tiles run from the last: with causal attention its keys
include every other tile's, so its products initialize dk and dv (beta 0) and the others
accumulate (beta 1). Each head's keys (forward) and values (backward) are first transposed
into a contiguous block: sgemm multiplies by a transposed second operand about half as fast.

float32 only: float64 would take libm's scalar exp, slower than NumPy's SIMD exp over a score
block (see `_math.py`), so float64 stays with the NumPy kernels, as do other dtypes, empty
operands and batch dims that differ between operands. Row sums are reassociated (so they
vectorize): rounding differs from NumPy's within a float sum's error bound. A row's unseen
keys get probability 0 even where the row is NaN (NumPy's kernel and PyTorch's give NaN
there), so a NaN query reaches only the key and value gradients of the keys it sees.

sgemm is scipy's (`scipy.linalg.cython_blas`, the BLAS numba's own `np.dot` calls), bound by
name as an LLVM symbol, so numba's disk cache stays valid in other processes.
"""

from __future__ import annotations

import threading

import numpy as np

from .. import jit, vecmath
from ._common import consts

# Query rows per tile (measured on (8, 4, 128, 64) heads): with causal attention smaller
# tiles skip more of the masked triangle; without a mask larger ones give BLAS larger products.
CAUSAL_ROWS = 32
ROWS = 64
_REDUCE = frozenset({"contract", "reassoc"})
_SGEMM = "tideflow_sgemm"
_sgemm = None  # numba's declaration of the sgemm symbol, set by `_register`
_REGISTERING = threading.Lock()


def _blas_args():
    """The by-reference arguments of one sgemm call: 6 int32 sizes, alpha and beta, the
    characters "N" and "T"."""
    flags = np.empty(2, np.uint8)
    flags[0] = ord("N")
    flags[1] = ord("T")
    return np.empty(6, np.int32), np.empty(2, np.float32), flags


def _address(a, i):
    return a.ctypes.data + i * a.itemsize


def _leading(a, cols):
    """The leading dimension of a row-major block: its row stride in elements (BLAS wants at
    least max(1, cols) even where a single row never steps by it)."""
    return max(a.strides[0] // a.itemsize, cols, 1)


def _matmul(a, trans_a, b, trans_b, c, alpha, beta, args):
    """c = alpha op(a) op(b) + beta c on 2D row-major views (unit stride along rows), op the
    transpose where asked. A row-major matrix is its transpose in BLAS's column-major
    terms, so this calls sgemm for c^T = op(b)^T op(a)^T."""
    sizes, scalars, flags = args
    m, n = c.shape
    k = a.shape[0] if trans_a else a.shape[1]
    sizes[0], sizes[1], sizes[2] = n, m, k
    sizes[3], sizes[4] = _leading(b, b.shape[1]), _leading(a, a.shape[1])
    sizes[5] = _leading(c, n)
    scalars[0], scalars[1] = alpha, beta
    _sgemm(
        _address(flags, trans_b), _address(flags, trans_a),
        _address(sizes, 0), _address(sizes, 1), _address(sizes, 2), _address(scalars, 0),
        b.ctypes.data, _address(sizes, 3), a.ctypes.data, _address(sizes, 4),
        _address(scalars, 1), c.ctypes.data, _address(sizes, 5),
    )  # fmt: skip


def _transpose(a, out):
    """out = a^T, out contiguous."""
    rows, cols = a.shape
    for i in range(rows):
        for j in range(cols):
            out[j, i] = a[i, j]


def _order_key(bits):
    """A float32's bits (as int32) mapped to an int32 of the same order (negative floats
    have their magnitude bits flipped); its own inverse. NaNs land beyond the infinities, so a
    row holding one gets a NaN max (or exp(NaN - max)): the row's softmax is NaN either way."""
    return bits ^ ((bits >> 31) & 0x7FFFFFFF)


def _row_max(bits, n):
    """max(x[:n]) of a float32 row x given as its int32 view `bits`, exactly: an integer
    max over order keys vectorizes without fastmath flags, where a float max does not."""
    key = _order_key(bits[0])
    for j in range(1, n):
        key = max(key, _order_key(bits[j]))
    return np.int32(_order_key(key)).view(np.float32)


def _row_sum(x, n, zero):
    total = zero
    for j in range(n):
        total += x[j]
    return total


def _row_dot(x, y, n, zero):
    total = zero
    for j in range(n):
        total += x[j] * y[j]
    return total


def _softmax_row(s, bits, n, c):
    """s[:n] = softmax(s[:n]) and s[n:] = 0 (the keys this row does not see); bits: s's
    int32 view."""
    zero, one = c[1], c[2]
    m = _row_max(bits, n)
    for j in range(n):
        s[j] = vecmath.exp32(s[j] - m)
    inv = one / _row_sum(s, n, zero)
    for j in range(n):
        s[j] = s[j] * inv
    for j in range(n, s.size):
        s[j] = zero


def _tile_keys(r1, n_keys, causal):
    """How many keys a tile of rows ending at r1 sees."""
    return min(r1, n_keys) if causal else n_keys


def _visible(row, n_keys, causal):
    """How many keys query row `row` sees: with causal attention, keys j <= row."""
    return min(row + 1, n_keys) if causal else n_keys


def _forward(q, k, v, c, causal, tile, out, probs, probs_bits):
    """q, k, v, out: (B, H, rows, features), rows of unit stride; probs: (B, H, rows, keys),
    contiguous, and probs_bits its int32 view; c: the scale, 0 and 1 in float32; tile: query
    rows per tile."""
    n_b, n_h, n_rows, _ = q.shape
    n_keys = k.shape[2]
    scale, zero, one = c[0], c[1], c[2]
    args = _blas_args()
    keys_t = np.empty((q.shape[3], n_keys), q.dtype)
    for b in range(n_b):
        for h in range(n_h):
            qh, kh, vh, oh, ph = q[b, h], k[b, h], v[b, h], out[b, h], probs[b, h]
            bits = probs_bits[b, h]
            _transpose(kh, keys_t)
            for r0 in range(0, n_rows, tile):
                r1 = min(r0 + tile, n_rows)
                keys = _tile_keys(r1, n_keys, causal)
                scores = ph[r0:r1, :keys]
                _matmul(qh[r0:r1], False, keys_t[:, :keys], False, scores, scale, zero, args)
                for r in range(r0, r1):
                    _softmax_row(ph[r], bits[r], _visible(r, n_keys, causal), c)
                _matmul(scores, False, vh[:keys], False, oh[r0:r1], one, zero, args)


def _backward(g, q, k, v, probs, c, causal, tile, dq, dk, dv):
    """As `_forward`; g, dq, dk, dv: like out, q, k, v."""
    n_b, n_h, n_rows, _ = q.shape
    n_keys = k.shape[2]
    scale, zero, one = c[0], c[1], c[2]
    args = _blas_args()
    grad_scores = np.empty(tile * n_keys, q.dtype)
    values_t = np.empty((v.shape[3], n_keys), q.dtype)
    last = (n_rows - 1) // tile * tile
    for b in range(n_b):
        for h in range(n_h):
            gh, qh, kh, vh, ph = g[b, h], q[b, h], k[b, h], v[b, h], probs[b, h]
            dqh, dkh, dvh = dq[b, h], dk[b, h], dv[b, h]
            _transpose(vh, values_t)
            for r0 in range(last, -1, -tile):
                r1 = min(r0 + tile, n_rows)
                keys = _tile_keys(r1, n_keys, causal)
                p = ph[r0:r1, :keys]
                ds = grad_scores[: (r1 - r0) * keys].reshape((r1 - r0, keys))
                _matmul(gh[r0:r1], False, values_t[:, :keys], False, ds, one, zero, args)
                for i in range(r1 - r0):
                    pi, dsi = ph[r0 + i], ds[i]
                    total = _row_dot(pi, dsi, keys, zero)
                    for j in range(keys):
                        dsi[j] = pi[j] * (dsi[j] - total)
                beta = zero if r0 == last else one
                _matmul(ds, False, kh[:keys], False, dqh[r0:r1], scale, zero, args)
                _matmul(ds, True, qh[r0:r1], False, dkh[:keys], scale, beta, args)
                _matmul(p, True, gh[r0:r1], False, dvh[:keys], one, beta, args)
            # keys no query row sees (causal, more keys than rows): no gradient
            for j in range(_tile_keys(n_rows, n_keys, causal), n_keys):
                dkh[j, :] = zero
                dvh[j, :] = zero


_HELPERS = (
    *(_blas_args, _address, _leading, _matmul, _transpose),
    *(_order_key, _row_max, _softmax_row, _tile_keys, _visible),
)
_SUMS = (_row_sum, _row_dot)  # compiled with `reassoc`, so they vectorize
_forward_loop = jit.jit(_forward, error_model="numpy")
_backward_loop = jit.jit(_backward, error_model="numpy")


def _register() -> None:
    """Before the loops' first compilation (idempotent; imports numba): sgemm bound as an
    LLVM symbol and declared to numba, and the helpers made callable from the loops, inlined
    into them (as vecmath's functions). Locked: graph streams may run the first calls at once."""
    global _sgemm
    with _REGISTERING:
        if _sgemm is not None:
            return
        import llvmlite.binding
        from numba import types
        from numba.extending import get_cython_function_address, register_jitable

        vecmath.register()
        for fn in _HELPERS:
            register_jitable(forceinline=True)(fn)
        # NOTE: fastmath flags are per instruction in LLVM, so the sums keep theirs when
        # inlined into loops compiled without them.
        for fn in _SUMS:
            register_jitable(forceinline=True, fastmath=set(_REDUCE))(fn)
        address = get_cython_function_address("scipy.linalg.cython_blas", "sgemm")
        llvmlite.binding.add_symbol(_SGEMM, address)
        # NOTE: every argument is a pointer (Fortran passes by reference), declared as an
        # address-sized integer: the arrays' `ctypes.data`.
        _sgemm = types.ExternalFunction(_SGEMM, types.void(*(types.uintp,) * 13))


def _as_4d(a: np.ndarray) -> np.ndarray:
    """(..., rows, features) as (B, H, rows, features): a view, unless more than two batch
    dims do not merge."""
    if a.ndim < 4:
        return a.reshape((1,) * (4 - a.ndim) + a.shape)
    return a.reshape(-1, *a.shape[-3:])


def _rows_unit_stride(a: np.ndarray) -> np.ndarray:
    """`a`, or a copy of it whose rows BLAS can read (elements adjacent, rows apart)."""
    item = a.itemsize
    if a.strides[-1] == item and (a.shape[-2] == 1 or a.strides[-2] >= a.shape[-1] * item):
        return a
    return np.ascontiguousarray(a)


def _covered(q, k, v, *others) -> bool:
    """float32, non-empty, one batch shape, and the sizes the products need (others: the
    output gradient and the probabilities); anything else goes to the NumPy kernel, which
    raises where the op does."""
    arrays = (q, k, v, *others)
    batch = q.shape[:-2]
    return (
        all(a.dtype == np.float32 and a.shape[:-2] == batch and a.size for a in arrays)
        and q.shape[-1] == k.shape[-1]
        and k.shape[-2] == v.shape[-2]
    )


def attention(numpy_kernel):
    """The `attention` kernel: `numpy_kernel` where the loop does not apply."""

    def kernel(q, k, v, *, scale, is_causal):
        if not _covered(q, k, v):
            return numpy_kernel(q, k, v, scale=scale, is_causal=is_causal)
        q4, k4, v4 = (_rows_unit_stride(_as_4d(a)) for a in (q, k, v))
        out = np.empty_like(q4, shape=(*q4.shape[:-1], v4.shape[-1]))
        probs = np.empty((*q4.shape[:-1], k4.shape[-2]), q.dtype)
        _register()
        c = consts(q.dtype, scale, 0, 1)
        tile = CAUSAL_ROWS if is_causal else ROWS
        _forward_loop(q4, k4, v4, c, is_causal, tile, out, probs, probs.view(np.int32))
        rows = q.shape[:-1]
        return out.reshape(*rows, v.shape[-1]), probs.reshape(*rows, k.shape[-2])

    return kernel


def attention_backward(numpy_kernel):
    """The `attention_backward` kernel: `numpy_kernel` where the loop does not apply."""

    def kernel(g, q, k, v, probs, *, scale, is_causal):
        rows = q.shape[:-1]
        if (
            not _covered(q, k, v, g, probs)
            or g.shape != (*rows, v.shape[-1])
            or probs.shape != (*rows, k.shape[-2])
        ):
            return numpy_kernel(g, q, k, v, probs, scale=scale, is_causal=is_causal)
        g4, q4, k4, v4 = (_rows_unit_stride(_as_4d(a)) for a in (g, q, k, v))
        p4 = np.ascontiguousarray(_as_4d(probs))
        dq, dk, dv = np.empty_like(q4), np.empty_like(k4), np.empty_like(v4)
        _register()
        c = consts(q.dtype, scale, 0, 1)
        tile = CAUSAL_ROWS if is_causal else ROWS
        _backward_loop(g4, q4, k4, v4, p4, c, is_causal, tile, dq, dk, dv)
        return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)

    return kernel


KERNELS = {"attention": attention, "attention_backward": attention_backward}
