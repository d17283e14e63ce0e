"""Run a program as one rank of a job: `python -m tideflow.distributed.run train.py args`
(or `-m package.module args`). The tideflow launcher starts every rank this way.

Over running the script directly it adds two things:
- PyTorch's variables: RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE are set from the
  launcher's (where not set already), so scripts written for torchrun find them;
- `sys.exit(code)` with a non-zero code ends the whole job, like an uncaught exception
  does: otherwise the exiting rank would wait in MPI_Finalize for ranks that wait for it.
"""

from __future__ import annotations

import os
import runpy
import sys

from . import (
    failure,
    records,  # noqa: F401  for its effect: a supervised rank keeps its record from the start
)
from .world import launched, launcher_local_rank_and_size, launcher_rank_and_size

USAGE = "usage: python -m tideflow.distributed.run (script.py | -m module) [args ...]"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return
    if not argv or argv == ["-m"]:
        sys.exit(USAGE)
    if launched():
        export_torch_variables(os.environ)
    as_module = argv[0] == "-m"
    target, args = (argv[1], argv[2:]) if as_module else (argv[0], argv[1:])
    sys.argv = [target, *args]
    try:
        if as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        code = exit_status(e.code)
        if code != 0 and launched():
            if not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
            rank = launcher_rank_and_size()[0]
            failure.abort(f"tideflow: rank {rank} exited with status {code}", code)
        raise


def export_torch_variables(environ) -> None:
    """Set RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE from the launcher's variables."""
    rank, size = launcher_rank_and_size(environ)
    local_rank, local_size = launcher_local_rank_and_size(environ)
    for name, value in (
        ("RANK", rank),
        ("WORLD_SIZE", size),
        ("LOCAL_RANK", local_rank),
        ("LOCAL_WORLD_SIZE", local_size),
    ):
        if value is not None:
            environ.setdefault(name, str(value))


def exit_status(code) -> int:
    """The process exit status `sys.exit(code)` gives."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


if __name__ == "__main__":
    main()
