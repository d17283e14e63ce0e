"""Per-op eager overhead, tideflow vs PyTorch in the same run: microseconds per call of a
small elementwise op (a) without grad, (b) with an input requiring grad, and (c) a 3-op
chain forward + backward. Medians over repeated timing rounds."""

from __future__ import annotations

import statistics
import timeit

import numpy as np

import tideflow as flow

ROUNDS = 7


def _median_us(fn, number: int) -> float:
    fn()  # warm up
    times = timeit.repeat(fn, number=number, repeat=ROUNDS)
    return statistics.median(times) / number * 1e6


def _cases(lib, x, y, xg):
    def chain():
        z = (xg * y).exp().sum()
        z.backward()
        xg.grad = None

    return {
        "add, no grad": (lambda: x + y, 20_000),
        "add, requires_grad": (lambda: xg + y, 20_000),
        "mul-exp-sum fwd+bwd": (chain, 2_000),
    }


def run() -> list[tuple[str, float, float | None]]:
    data = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    ours = _cases(
        flow,
        flow.tensor(data[0]),
        flow.tensor(data[1]),
        flow.tensor(data[0], requires_grad=True),
    )
    try:
        import torch
    except ImportError:
        theirs = {}
    else:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # per-op overhead: no intra-op threads, as NumPy on tiny arrays
        theirs = _cases(
            torch,
            torch.tensor(data[0]),
            torch.tensor(data[1]),
            torch.tensor(data[0], requires_grad=True),
        )
    rows = []
    for name, (fn, number) in ours.items():
        t = _median_us(fn, number)
        ref = _median_us(theirs[name][0], number) if name in theirs else None
        rows.append((name, t, ref))
    if theirs:
        torch.set_num_threads(threads)
    return rows


def report(rows) -> str:
    lines = [f"{'op overhead (us/call, median)':34} {'tideflow':>9} {'torch':>9} {'ratio':>7}"]
    for name, t, ref in rows:
        r = f"{t / ref:7.2f}" if ref else "      -"
        lines.append(f"{name:34} {t:9.2f} {ref or float('nan'):9.2f} {r}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
