"""`python -m tideflow.mock_torch [-m module | script.py] [args ...]`: run a PyTorch program
on tideflow, as `python script.py args ...` (or `python -m module args ...`) would run it."""

from __future__ import annotations

import os
import runpy
import sys

from ._importer import enable
from ._spawn import mock_torch_in_spawned_children

USAGE = "usage: python -m tideflow.mock_torch [-m module | script.py] [args ...]"


def _enable_everywhere() -> None:
    enable()
    mock_torch_in_spawned_children()  # DataLoader workers, multiprocessing.Pool, ...


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        sys.exit(0 if argv else 2)
    if argv[0] == "-m":
        if len(argv) < 2:
            print(f"{USAGE}\nerror: -m expects a module name", file=sys.stderr)
            sys.exit(2)
        _enable_everywhere()
        sys.argv = argv[1:]  # runpy replaces argv[0] with the module's file, as python -m does
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    script = argv[0]
    if not os.path.isfile(script):
        print(f"{sys.executable}: can't open file {script!r}: no such file", file=sys.stderr)
        sys.exit(2)
    _enable_everywhere()
    sys.argv = list(argv)
    # As `python script.py` does: the script's own directory comes first on the import path.
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
