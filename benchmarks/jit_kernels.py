"""Generated CPU kernels (`backends/jit_kernels`) against the NumPy kernels they replace and
against PyTorch, single thread, float32 (bfloat16 where named), on the sizes of the GPT
benchmark (W3: 4 layers of width 256, batch 8 x block 128; 3.3M parameters): median
microseconds per call, ratios to NumPy and to torch. Kernels are called directly (no
dispatch), torch through its functional API; the last rows are tiny inputs, where per-call
overhead decides.

    OPENBLAS_NUM_THREADS=1 python benchmarks/jit_kernels.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import ml_dtypes
import numpy as np

import tideflow as flow
from tideflow.backends import jit
from tideflow.framework.registry import get_op

ROUNDS = 7


def _median_us(fn: Callable[[], object]) -> float:
    fn()
    fn()  # compiled (or loaded from the disk cache) and warm
    once = time.perf_counter()
    fn()
    number = max(1, int(2e-3 / max(time.perf_counter() - once, 1e-7)))
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times) * 1e6


def _kernels(name: str):
    op = get_op(name)
    return op.kernels[jit.KERNEL_KEY], op.kernels["cpu"]


def _cases(torch):
    rng = np.random.default_rng(0)
    f32 = np.float32
    n_params = 3_300_000
    p, g, m = (rng.standard_normal(n_params).astype(f32) for _ in range(3))
    v = np.abs(rng.standard_normal(n_params).astype(f32))
    adamw = dict(lr=3e-4, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, decoupled=True,
                 amsgrad=False, maximize=False, step=10)  # fmt: skip
    sgd = dict(lr=0.01, momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=False,
               maximize=False, first=False)  # fmt: skip
    act = rng.standard_normal((8, 128, 256)).astype(f32)
    w, b = rng.standard_normal((2, 256)).astype(f32)
    scores = rng.standard_normal((8, 4, 128, 128)).astype(f32)
    logits = rng.standard_normal((1024, 512)).astype(f32)
    hidden = rng.standard_normal((8, 128, 1024)).astype(f32)
    tiny = rng.standard_normal((2, 16)).astype(f32)
    hidden16 = hidden.astype(ml_dtypes.bfloat16)

    cases = [
        ("adam_update AdamW 3.3M", "adam_update", (p, g, m, v, None), adamw),
        ("sgd_update momentum 3.3M", "sgd_update", (p, g, m), sgd),
        ("layer_norm 8x128x256", "layer_norm", (act, w, b),
         dict(normalized_shape=(256,), eps=1e-5)),
        ("safe_softmax 8x4x128x128", "safe_softmax", (scores,), dict(dim=3)),
        ("log_softmax 1024x512", "log_softmax", (logits,), dict(dim=1)),
        ("gelu 8x128x1024", "gelu", (hidden,), dict(approximate="none")),
        ("gelu tanh 8x128x1024", "gelu", (hidden,), dict(approximate="tanh")),
        ("gelu_backward 8x128x1024", "gelu_backward", (hidden, hidden),
         dict(approximate="none")),
        ("gelu bf16 8x128x1024", "gelu", (hidden16,), dict(approximate="none")),
        ("cast f32->bf16 8x128x1024", "cast", (hidden,), dict(dtype=flow.bfloat16)),
        ("layer_norm 2x16 (tiny)", "layer_norm", (tiny, w[:16], b[:16]),
         dict(normalized_shape=(16,), eps=1e-5)),
        ("softmax 2x16 (tiny)", "softmax", (tiny,), dict(dim=1)),
        ("adam_update AdamW 16 (tiny)", "adam_update", (p[:16], g[:16], m[:16], v[:16], None),
         adamw),
    ]  # fmt: skip
    refs: dict[str, Callable[[], object] | None] = dict.fromkeys(c[0] for c in cases)
    if torch is not None:
        F = torch.nn.functional
        tp, tg = torch.from_numpy(p.copy()), torch.from_numpy(g)
        tp.grad = tg
        adam_opt = torch.optim.AdamW([tp], lr=3e-4)
        sgd_p = torch.from_numpy(p.copy())
        sgd_p.grad = tg
        sgd_opt = torch.optim.SGD([sgd_p], lr=0.01, momentum=0.9)
        arrays = dict(act=act, w=w, b=b, scores=scores, logits=logits, hidden=hidden, tiny=tiny)
        t = {k: torch.from_numpy(a) for k, a in arrays.items()}
        t16 = t["hidden"].to(torch.bfloat16)
        tiny_p = torch.from_numpy(p[:16].copy())
        tiny_p.grad = tg[:16]
        tiny_opt = torch.optim.AdamW([tiny_p], lr=3e-4)
        refs.update({
            "adam_update AdamW 3.3M": adam_opt.step,
            "sgd_update momentum 3.3M": sgd_opt.step,
            "layer_norm 8x128x256": lambda: F.layer_norm(t["act"], (256,), t["w"], t["b"]),
            "safe_softmax 8x4x128x128": lambda: F.softmax(t["scores"], -1),
            "log_softmax 1024x512": lambda: F.log_softmax(t["logits"], -1),
            "gelu 8x128x1024": lambda: F.gelu(t["hidden"]),
            "gelu tanh 8x128x1024": lambda: F.gelu(t["hidden"], approximate="tanh"),
            "gelu_backward 8x128x1024": lambda: torch.ops.aten.gelu_backward(
                t["hidden"], t["hidden"]),
            "gelu bf16 8x128x1024": lambda: F.gelu(t16),
            "cast f32->bf16 8x128x1024": lambda: t["hidden"].to(torch.bfloat16),
            "layer_norm 2x16 (tiny)": lambda: F.layer_norm(t["tiny"], (16,), t["w"][:16],
                                                           t["b"][:16]),
            "softmax 2x16 (tiny)": lambda: F.softmax(t["tiny"], -1),
            "adam_update AdamW 16 (tiny)": tiny_opt.step,
        })  # fmt: skip
    for label, name, args, attrs in cases:
        gen, ref = _kernels(name)
        yield (
            label,
            (lambda gen=gen, a=args, k=attrs: gen(*a, **k)),
            (lambda ref=ref, a=args, k=attrs: ref(*a, **k)),
            refs[label],
        )
    yield _attention_case(torch)


def _attention_case(torch):
    """The fused attention op forward and backward (two kernels) on W3's heads: (8, 4, 128,
    64) causal, transposed views of (B, T, H, D) as the model splits them; torch's SDPA
    forward and backward."""
    rng = np.random.default_rng(0)
    q, k, v, g = (rng.standard_normal((8, 128, 4, 64)).astype(np.float32).swapaxes(1, 2)
                  for _ in range(4))  # fmt: skip
    attrs = dict(scale=0.125, is_causal=True)

    def step(forward, backward):
        def call():
            _, probs = forward(q, k, v, **attrs)
            backward(g, q, k, v, probs, **attrs)

        return call

    (gen, ref), (gen_b, ref_b) = _kernels("attention"), _kernels("attention_backward")
    tref = None
    if torch is not None:
        tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
        tg = torch.from_numpy(g)

        def tref():
            out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
            out.backward(tg)

    return "attention fwd+bwd W3 causal", step(gen, gen_b), step(ref, ref_b), tref


def run() -> list[tuple[str, float, float, float | None]]:
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    with np.errstate(all="ignore"):
        return [
            (label, _median_us(gen), _median_us(ref), None if tref is None else _median_us(tref))
            for label, gen, ref, tref in _cases(torch)
        ]


def report(rows) -> str:
    head = f"{'kernel (us, median)':30} {'generated':>10} {'numpy':>10} {'torch':>10}"
    lines = [head + f" {'gen/numpy':>9} {'gen/torch':>9}"]
    for label, gen, ref, tref in rows:
        t = "-" if tref is None else f"{tref:10.1f}"
        ratio = "-" if tref is None else f"{gen / tref:9.2f}"
        lines.append(f"{label:30} {gen:10.1f} {ref:10.1f} {t:>10} {gen / ref:9.2f} {ratio:>9}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
