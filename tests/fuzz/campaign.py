"""A fuzzing campaign from the command line: `python tests/fuzz/campaign.py [N [SEED]]` draws
N calls (default 1000) with a NumPy generator seeded with SEED, checks each against PyTorch
when it is installed, and prints every bug call, the counts per outcome and the ops."""

from __future__ import annotations

import sys

from tideflow.testing.fuzz import campaign


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 1000
    seed = int(argv[1]) if len(argv) > 1 else 0
    try:
        import torch
    except ImportError:
        torch = None
    counts, bugs = campaign(n, seed, torch)
    for b in bugs:
        print(b)
    print(dict(counts))
    print(f"{len(bugs)} bug calls; ops: {sorted({b.call.info.id for b in bugs})}")


if __name__ == "__main__":
    main(sys.argv[1:])
