"""bfloat16 GEMM with float32 accumulation on CPUs with AVX512-BF16 (`vdpbf16ps`).

NumPy has no half BLAS, and the OpenBLAS wheels NumPy ships (scipy-openblas 0.3.31 and
0.3.34, and Debian's 0.3.21) are built without `sbgemm`; MKL's `gemm_bf16bf16f32` runs its
generic path on AMD CPUs (no faster than float32 SGEMM there). So the kernel is our own: a
12x32 register-blocked micro-kernel written in LLVM IR, compiled once per process for the
host CPU by llvmlite (a numba dependency), driven over panels of the operands. Each
`vdpbf16ps` multiplies 32 bfloat16 pairs and adds them into 16 float32 lanes, twice the
work of a float32 FMA per instruction.

Layout: the left operand is read in place when its rows are contiguous along K (pairs of
bfloat16 are one 32-bit broadcast); the right operand is re-laid once as 32-bit pairs
(k even, k odd) per column in column panels of 32, contiguous along K.

`available()` is False (and callers keep their float32 path) when the CPU lacks
avx512_bf16, llvmlite is missing or fails, or `TIDEFLOW_BF16_GEMM=0`; `set_enabled` switches
it at run time (tests compare both paths).
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading

import ml_dtypes
import numpy as np

from . import jit
from .jit_kernels import bfloat16

__all__ = ["BF16", "available", "bf16_gemm", "rounded", "set_enabled", "worth_it"]

BF16 = np.dtype(ml_dtypes.bfloat16)

MR, NR = 12, 32  # micro-tile: 12 rows x 2 zmm of float32 accumulators (24 of 32 registers)
_KC = 128  # k pairs per block: a 128 x 32 pair panel of the right operand (16 KiB) stays in L1
_MIN_FLOPS = 1 << 18  # below this, padding to 12 x 32 tiles and the call cost outweigh it

_enabled = os.environ.get("TIDEFLOW_BF16_GEMM", "1") != "0"
_lock = threading.Lock()


def set_enabled(flag: bool) -> bool:
    """Turn the bfloat16 GEMM on or off (off: callers compute in float32); returns the old
    setting."""
    global _enabled
    old, _enabled = _enabled, bool(flag)
    return old


def _cpu_has_bf16() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512_bf16" in line.split()
    except OSError:
        pass
    return False


def _ukernel_ir() -> str:
    """C[MR, NR] (+)= A[MR, 2kc] . B[2kc, NR]: a[r * ar + p * ak] is row r's pair p, b[p * ldb]
    the pair row p of 32 columns. `first` stores instead of adding (no zero-filled C)."""
    lines = [
        "define internal void @ukernel(i64 %kc, ptr noalias %a, i64 %ak, i64 %ar, ptr noalias %b, "
        "i64 %ldb, ptr noalias %c, i64 %ldc, i1 %first) alwaysinline {",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %p = phi i64 [0, %entry], [%pn, %loop]",
    ]
    for r in range(MR):
        for h in range(2):
            lines.append(
                f"  %acc{r}_{h} = phi <16 x float> [zeroinitializer, %entry], [%nacc{r}_{h}, %loop]"
            )
    lines.append("  %boff = mul i64 %p, %ldb")
    for h in range(2):
        lines += [
            f"  %bo{h} = add i64 %boff, {16 * h}",
            f"  %bp{h} = getelementptr i32, ptr %b, i64 %bo{h}",
            f"  %bv{h} = load <32 x bfloat>, ptr %bp{h}, align 4",
        ]
    for r in range(MR):
        lines += [
            f"  %ar{r} = mul i64 %ar, {r}",
            f"  %pk{r} = mul i64 %p, %ak",
            f"  %ao{r} = add i64 %ar{r}, %pk{r}",
            f"  %ap{r} = getelementptr i32, ptr %a, i64 %ao{r}",
            f"  %as{r} = load i32, ptr %ap{r}, align 4",
            f"  %ai{r} = insertelement <16 x i32> poison, i32 %as{r}, i64 0",
            f"  %aw{r} = shufflevector <16 x i32> %ai{r}, <16 x i32> poison, "
            "<16 x i32> zeroinitializer",
            f"  %av{r} = bitcast <16 x i32> %aw{r} to <32 x bfloat>",
        ]
        for h in range(2):
            lines.append(
                f"  %nacc{r}_{h} = call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512("
                f"<16 x float> %acc{r}_{h}, <32 x bfloat> %av{r}, <32 x bfloat> %bv{h})"
            )
    lines += [
        "  %pn = add i64 %p, 1",
        "  %more = icmp slt i64 %pn, %kc",
        "  br i1 %more, label %loop, label %done",
        "done:",
    ]
    for r in range(MR):
        lines.append(f"  %cr{r} = mul i64 %ldc, {r}")
        for h in range(2):
            lines += [
                f"  %co{r}_{h} = add i64 %cr{r}, {16 * h}",
                f"  %cp{r}_{h} = getelementptr float, ptr %c, i64 %co{r}_{h}",
                f"  %cv{r}_{h} = load <16 x float>, ptr %cp{r}_{h}, align 4",
                f"  %cs{r}_{h} = fadd <16 x float> %cv{r}_{h}, %nacc{r}_{h}",
                f"  %cw{r}_{h} = select i1 %first, <16 x float> %nacc{r}_{h}, "
                f"<16 x float> %cs{r}_{h}",
                f"  store <16 x float> %cw{r}_{h}, ptr %cp{r}_{h}, align 4",
            ]
    lines += ["  ret void", "}"]
    return "\n".join(lines)


# The driver: k blocks outermost (one right panel block reused by every row panel), then
# row panels, then the column panels [j0, j1) (a caller may split them between threads).
_DRIVER_IR = """
define void @bf16_gemm(i64 %mp, i64 %j0, i64 %j1, i64 %kp, i64 %kcb, ptr %a, i64 %ak,
                       i64 %ar, i64 %ai, ptr %b, i64 %ldb, i64 %bj, ptr %c, i64 %ldc) {
entry:
  %any = icmp sgt i64 %kp, 0
  %anyj = icmp slt i64 %j0, %j1
  %go = and i1 %any, %anyj
  br i1 %go, label %kloop, label %exit
kloop:
  %k0 = phi i64 [0, %entry], [%k1, %kend]
  %first = icmp eq i64 %k0, 0
  %krest = sub i64 %kp, %k0
  %short = icmp slt i64 %krest, %kcb
  %kc = select i1 %short, i64 %krest, i64 %kcb
  %bkoff = mul i64 %k0, %ldb
  br label %iloop
iloop:
  %i = phi i64 [0, %kloop], [%in, %iend]
  %arow = mul i64 %i, @MR@
  %aroff = mul i64 %i, %ai
  %akoff = mul i64 %k0, %ak
  %aoff = add i64 %aroff, %akoff
  %ap = getelementptr i32, ptr %a, i64 %aoff
  %croff = mul i64 %arow, %ldc
  br label %jloop
jloop:
  %j = phi i64 [%j0, %iloop], [%jn, %jloop]
  %col = mul i64 %j, @NR@
  %bjoff = mul i64 %j, %bj
  %boff = add i64 %bkoff, %bjoff
  %bp = getelementptr i32, ptr %b, i64 %boff
  %coff = add i64 %croff, %col
  %cp = getelementptr float, ptr %c, i64 %coff
  call void @ukernel(i64 %kc, ptr %ap, i64 %ak, i64 %ar, ptr %bp, i64 %ldb, ptr %cp, i64 %ldc,
                     i1 %first)
  %jn = add i64 %j, 1
  %jmore = icmp slt i64 %jn, %j1
  br i1 %jmore, label %jloop, label %iend
iend:
  %in = add i64 %i, 1
  %imore = icmp slt i64 %in, %mp
  br i1 %imore, label %iloop, label %kend
kend:
  %k1 = add i64 %k0, %kcb
  %kmore = icmp slt i64 %k1, %kp
  br i1 %kmore, label %kloop, label %exit
exit:
  ret void
}
declare <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>, <32 x bfloat>,
                                                      <32 x bfloat>)
"""

_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_SIGNATURE = ctypes.CFUNCTYPE(
    None, *[_I64] * 5, _PTR, _I64, _I64, _I64, _PTR, _I64, _I64, _PTR, _I64
)


@functools.cache
def _compiled():
    """The compiled driver as a ctypes function (ctypes drops the GIL during the call), or
    None where the CPU or llvmlite cannot run it."""
    if not _cpu_has_bf16():
        return None
    try:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        features = llvm.get_host_cpu_features()
        if not features.get("avx512bf16", False):
            return None
        source = _ukernel_ir() + _DRIVER_IR.replace("@MR@", str(MR)).replace("@NR@", str(NR))
        module = llvm.parse_assembly(source)
        module.verify()
        machine = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=features.flatten(), opt=3
        )
        passes = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(3))
        passes.getModulePassManager().run(module, passes)
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        fn = _SIGNATURE(engine.get_function_address("bf16_gemm"))
    except Exception:  # an llvmlite that cannot parse or target this IR: keep float32
        return None
    return engine, fn  # the engine owns the machine code: keep it alive with the pointer


def available() -> bool:
    """Whether `bf16_gemm` runs the native kernel (else callers compute in float32)."""
    if not _enabled:
        return False
    with _lock:
        return _compiled() is not None


def worth_it(m: int, k: int, n: int) -> bool:
    """The product is large enough for the kernel to beat the float32 path's setup."""
    return 2 * m * k * n >= _MIN_FLOPS and available()


def _left(a: np.ndarray) -> np.ndarray:
    """(..., M, K) bfloat16 -> (..., Mp, Kp) uint32 pairs, rows padded to MR; no copy when
    the rows are C-contiguous with even K and M a multiple of MR."""
    *batch, m, k = a.shape
    mp, kp = -(-m // MR) * MR, -(-k // 2)
    bits = a.view(np.uint16) if a.flags.c_contiguous else None
    if bits is not None and m == mp and k % 2 == 0:
        return bits.view(np.uint32)
    out = np.zeros((*batch, mp, 2 * kp), np.uint16)
    out[..., :m, :k] = a.view(np.uint16) if bits is None else bits
    return out.view(np.uint32)


def _right(b: np.ndarray) -> np.ndarray:
    """(..., K, N) bfloat16 -> (..., Kp, Np) uint32: pair p of column j is (b[2p, j],
    b[2p+1, j]) in the low and high halves (vdpbf16ps's element order); columns padded to
    NR. Built with two widening copies and a shift-or instead of a 16-bit transpose."""
    *batch, k, n = b.shape
    kp, np_ = -(-k // 2), -(-n // NR) * NR
    bits = b.view(np.uint16)
    out = np.zeros((*batch, kp, np_), np.uint32)
    out[..., : k // 2 + k % 2, :n] = bits[..., 0::2, :]
    high = bits[..., 1::2, :].astype(np.uint32)
    high <<= 16
    out[..., : k // 2, :n] |= high
    return out


def _pack_right(right: np.ndarray) -> np.ndarray:
    """(..., Kp, Np) pairs -> (..., Np / NR, Kp, NR): a column panel contiguous along k."""
    *batch, kp, np_ = right.shape
    panels = right.reshape(*batch, kp, np_ // NR, NR)
    return np.ascontiguousarray(np.swapaxes(panels, -3, -2))


def bf16_gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for bfloat16 `a` (..., M, K) and `b` (..., K, N) with broadcast batch dims: the
    float32 products, accumulated in float32 (the caller rounds once). Call only when
    `available()`."""
    found = _compiled()
    if found is None:
        raise RuntimeError("bf16_gemm: no avx512_bf16 kernel on this machine")
    fn = found[1]
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    left, right = _left(a), _right(b)
    mp, kp, np_ = left.shape[-2], left.shape[-1], right.shape[-1]
    out = np.empty((*batch, mp, np_), np.float32)
    if k == 0:
        out.fill(0)
        return out[..., :m, :n]
    # the left operand is read in place (measured as fast as packing it: the 12 rows' pairs
    # stream from L1/L2), the right one packed into column panels (strided rows were 2x slower)
    rows = left.strides[-2] // 4
    right = _pack_right(right)
    lefts = np.broadcast_to(left, (*batch, mp, kp))
    rights = np.broadcast_to(right, (*batch, *right.shape[-3:]))
    for idx in np.ndindex(*batch):
        fn(
            mp // MR, 0, np_ // NR, kp, _KC,
            lefts[idx].ctypes.data, 1, rows, MR * rows,
            rights[idx].ctypes.data, NR, kp * NR,
            out[idx].ctypes.data, np_,
        )  # fmt: skip
    if mp == m and np_ == n:
        return out
    return out[..., :m, :n]


def rounded(y: np.ndarray) -> np.ndarray:
    """A float32 product rounded once to bfloat16: in one loop where generated kernels are
    available (ml_dtypes converts an element at a time)."""
    return bfloat16.narrow(y) if jit.available() else y.astype(BF16)
