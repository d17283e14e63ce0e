"""The soak benchmark (benchmarks/soak.py), briefly: two minutes of char-GPT training on two
data-parallel ranks, with DataLoader workers and checkpoints, keep their memory, threads and
descriptors flat. The real soak runs for 30 minutes by hand; this run is long enough for a
gross leak (a batch or a checkpoint's state kept per step) and any thread or descriptor
leak, and checks that the benchmark samples, judges and reports every rank."""

from __future__ import annotations

import re
import sys

import pytest

from .jobs import REPO, run_job

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

SERIES = ("rss_main_mb", "rss_workers_mb", "threads", "fds")


def test_two_minutes_on_two_ranks_stay_flat(mpiexec, tmp_path):
    soak = [sys.executable, str(REPO / "benchmarks" / "soak.py"), "--ranks", "2"]
    job = run_job([*soak, "--minutes", "2", "--dir", str(tmp_path)], timeout=420)
    output = job.stdout + job.stderr
    assert job.returncode == 0, output
    for rank in (0, 1):
        report = re.split(r"\nrank \d+: |\nverdict", job.stdout.split(f"\nrank {rank}: ", 1)[1])[0]
        assert int(report.split(" samples", 1)[0]) >= 10, output  # one each 10 s
        first, last = map(
            int, re.search(r"steps: (\d+) at the first sample, (\d+)", report).groups()
        )
        assert last > first, output
        for series in SERIES:
            assert re.search(rf"{series} .* flat\n", report), output
    assert re.search(r"checkpoint .*latest\.safetensors: loads, step [1-9]", output), output
    assert (tmp_path / "previous.safetensors").exists()  # the rotated one
    assert job.stdout.rstrip().endswith("verdict: flat"), output
