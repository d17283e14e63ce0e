"""The op database: every public op's test record, gathered from one module per op family
(`records/<family>.py`, each defining `RECORDS`). Tests are generated from `OP_DB`."""

from __future__ import annotations

import importlib
import pkgutil

from . import records
from .opinfo import OpInfo


def _gather() -> list[OpInfo]:
    db: list[OpInfo] = []
    for mod in sorted(pkgutil.iter_modules(records.__path__), key=lambda m: m.name):
        db += importlib.import_module(f"{records.__name__}.{mod.name}").RECORDS
    names = [r.id for r in db]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"op_db: duplicate record ids {sorted(dupes)}")
    return db


OP_DB: list[OpInfo] = _gather()
