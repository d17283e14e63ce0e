"""Child processes started with spawn or forkserver run with the mock enabled too.

Such a child is a fresh interpreter: it re-imports the program's main script (as
`__mp_main__`) before it unpickles the work it was given, so the script's `import torch` would
find real torch (or nothing), not tideflow. multiprocessing sends the child a dict of
preparation data and unpickles it before importing the main script; one more entry in it,
which unpickles by calling `enable()`, turns the mock on in time. (Forked children inherit the
parent's `sys.modules` and need nothing.)
"""

from __future__ import annotations

import multiprocessing.spawn

from ._importer import enable

_KEY = "tideflow_mock_torch"


class _EnableOnUnpickle:
    def __reduce__(self):
        return enable, ()


def mock_torch_in_spawned_children() -> None:
    """Have every spawn/forkserver child this process starts enable the mock first."""
    get_preparation_data = multiprocessing.spawn.get_preparation_data
    if getattr(get_preparation_data, "_adds_mock_torch", False):
        return

    def with_mock_torch(name):
        data = get_preparation_data(name)
        # NOTE: `spawn.prepare` reads only the keys it knows, so the extra entry's one effect
        # is the `enable()` its unpickling runs.
        data[_KEY] = _EnableOnUnpickle()
        return data

    with_mock_torch._adds_mock_torch = True
    multiprocessing.spawn.get_preparation_data = with_mock_torch
