"""The cost model's predictions against measured step times on this machine: calibrate the
`local` profile afresh, then time the auto-parallel tests' plans on 2 and 4 ranks and the
char-GPT in the parallel-graph tests' layouts on 2, 4 and 8 ranks
(tests/dist/workers/auto_parallel_timing.py). Prints the profile and markdown tables, the
ones docs/parallel_graphs.md shows under "Predicted against measured". Run it on a quiet
machine (other processes' load is measured as the model's error); about 4 minutes on 2 cores.

    python benchmarks/plan_validation.py [--steps N]

Every process runs one BLAS thread: ranks time-share the cores, and BLAS threads that spin
waiting for a descheduled sibling stall a GEMM for a whole scheduler slice (with two threads
per rank, a loaded 2-core machine ran the char-GPT's matrix products 60x slower). The profile
is measured in a temporary cache, so the one in ~/.cache is left as it was.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "tests" / "dist" / "workers" / "auto_parallel_timing.py"
BUDGET_S = 330  # the whole run, calibration included, stays under 6 minutes
JOBS = [(2, "plans"), (4, "plans"), (2, "layouts"), (4, "layouts"), (8, "layouts")]


def _environment(cache: str) -> dict[str, str]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    # NOTE: the generated kernels stay where they were cached (XDG_CACHE_HOME moves them too)
    home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    env.setdefault("TIDEFLOW_KERNEL_CACHE", str(Path(home) / "tideflow" / "kernels"))
    env["XDG_CACHE_HOME"] = cache
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["TIDEFLOW_COMM_TIMEOUT"] = "120"
    return env


def _calibrate(env: dict[str, str]) -> dict:
    code = (
        "import json; from tideflow.parallel.cost import calibrate; print(json.dumps(calibrate()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
        timeout=180,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def _profile_table(profile: dict) -> str:
    rows = [
        ("GEMM peak (one BLAS thread)", f"{profile['peak_flops'] / 1e9:.1f} GFLOP/s"),
        ("GEMM half size", f"{profile['half_size']:.1f}"),
        ("memory bandwidth", f"{profile['memory_bandwidth'] / 1e9:.1f} GB/s"),
        ("eager op overhead", f"{profile['op_overhead_s'] * 1e6:.2f} us"),
        ("graph node", f"{profile['node_s'] * 1e6:.2f} us"),
        ("graph task", f"{profile['task_s'] * 1e6:.2f} us"),
        ("stream hand-over", f"{profile['switch_s'] * 1e6:.2f} us"),
        ("MPI latency / bandwidth", f"{profile['link_latency_s'] * 1e6:.2f} us / "
                                    f"{profile['link_bandwidth'] / 1e9:.1f} GB/s"),
        ("fused attention per score, forward / backward",
         f"{profile['attention_score_s'] * 1e9:.1f} ns / "
         f"{profile['attention_grad_score_s'] * 1e9:.1f} ns"),
        *((f"a collective's wait, {ranks} ranks", f"{wait * 1e3:.2f} ms")
          for ranks, wait in profile["collective_waits"].items()),
        ("cores", str(profile["cpus"])),
    ]  # fmt: skip
    return "\n".join(["| local profile | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def _timing_table(env: dict[str, str], ranks: int, mode: str, steps: int, timeout: float) -> str:
    mpiexec = Path(sys.executable).parent / "mpiexec"
    with tempfile.NamedTemporaryFile("r", suffix=".md") as tables:
        command = [str(mpiexec), "-n", str(ranks), sys.executable, str(WORKER), mode,
                   str(steps), tables.name]  # fmt: skip
        try:
            done = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO
            )
        except subprocess.TimeoutExpired:
            return f"({ranks} ranks, {mode}: not finished within {timeout:.0f} s)"
        table = tables.read().strip()
    if done.returncode or not table:
        return f"({ranks} ranks, {mode}: failed)\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="timed steps per plan (10)")
    args = parser.parse_args()
    start = time.perf_counter()
    # NOTE: other processes' load shows up as the model's error: say how busy the machine was
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs\n")
    with tempfile.TemporaryDirectory(prefix="tideflow-profile-") as cache:
        env = _environment(cache)
        print(_profile_table(_calibrate(env)), end="\n\n", flush=True)
        for i, (ranks, mode) in enumerate(JOBS):
            left = BUDGET_S - (time.perf_counter() - start)
            # NOTE: the jobs still to run share what is left, larger jobs taking more
            share = ranks / sum(n for n, _ in JOBS[i:])
            print(_timing_table(env, ranks, mode, args.steps, max(left * share, 30)), end="\n\n",
                  flush=True)  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}; {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
