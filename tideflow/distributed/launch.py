"""Start a job: `python -m tideflow.distributed.launch --nproc_per_node 4 train.py args`.

A thin wrapper over the `mpiexec` of the MPI wheel installed next to this Python (the
`mpich` package): it becomes `mpiexec -n 4 -ppn 4 python -m tideflow.distributed.run
train.py args`. Several nodes: `--hostfile hosts` (one host name per line, `#` comments),
`--nproc_per_node` processes on each. Inside a Slurm step (`srun ... python -m
tideflow.distributed.launch ... train.py`) Slurm has already started one process per rank,
so each just runs the script. On one node the launcher stays to watch the ranks: one that
dies without a word (SIGKILL) is named, with what it was doing (see supervisor.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from . import run
from .supervisor import supervise
from .world import launched


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tideflow.distributed.launch",
        description="Run a training script on several processes (one per device) over MPI.",
    )
    p.add_argument(
        "--nproc_per_node",
        "--nproc-per-node",
        type=_positive,
        default=1,
        help="processes to start on each node (default 1)",
    )
    p.add_argument(
        "--nnodes",
        type=_positive,
        default=None,
        help="number of nodes (default: the hosts in --hostfile, else 1)",
    )
    p.add_argument("--hostfile", "-f", default=None, help="file naming the nodes, one a line")
    p.add_argument(
        "-m", "--module", action="store_true", help="run `script` as a module, like python -m"
    )
    p.add_argument("script", help="the training script (or module, with -m)")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help="the script's arguments")
    return p


def command(args: argparse.Namespace, mpiexec: str, python: str = sys.executable) -> list[str]:
    """The mpiexec command line that starts the job."""
    hosts = read_hostfile(args.hostfile) if args.hostfile else None
    nnodes = args.nnodes if args.nnodes is not None else len(hosts) if hosts else 1
    if hosts is not None and nnodes > len(hosts):
        raise SystemExit(
            f"launch: --nnodes {nnodes} but the hostfile {args.hostfile} names only "
            f"{len(hosts)} hosts"
        )
    if nnodes > 1 and hosts is None and "SLURM_JOB_ID" not in os.environ:
        raise SystemExit(f"launch: --nnodes {nnodes} needs --hostfile (or a Slurm allocation)")
    nproc = nnodes * args.nproc_per_node
    cmd = [mpiexec, "-n", str(nproc), "-ppn", str(args.nproc_per_node)]
    if args.hostfile:
        cmd += ["-f", args.hostfile]
    target = ["-m", args.script] if args.module else [args.script]
    return [*cmd, python, "-m", "tideflow.distributed.run", *target, *args.script_args]


def read_hostfile(path: str) -> list[str]:
    """The host names of a hostfile: one per line (`host` or `host:slots`), `#` comments."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise SystemExit(f"launch: cannot read the hostfile: {e}") from None
    hosts = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    hosts = [h for h in hosts if h]
    if not hosts:
        raise SystemExit(f"launch: the hostfile {path} names no hosts")
    return hosts


def find_mpiexec() -> str:
    """The mpiexec of the MPI wheel (in this Python's scripts directory), else on PATH."""
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(folder, "mpiexec")
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("mpiexec")
    if found is None:
        raise SystemExit(
            f"launch: no mpiexec next to {sys.executable} or on PATH; install the MPI wheel "
            "with `pip install mpich`"
        )
    return found


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if launched():
        # NOTE: srun (or an outer mpiexec) started this process as one rank already.
        run.main([*(["-m"] if args.module else []), args.script, *args.script_args])
        return
    mpiexec = find_mpiexec()
    cmd = command(args, mpiexec)
    sys.stdout.flush()
    if args.hostfile is None and (args.nnodes or 1) == 1:
        # NOTE: one node: the launcher sees every rank's process, and names one that dies
        sys.exit(supervise(cmd, args.nproc_per_node))
    os.execv(mpiexec, cmd)  # mpiexec takes over: signals, output and exit status are its own


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


if __name__ == "__main__":
    main()
