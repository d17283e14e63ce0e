"""Run on every rank under mpiexec: the ```python blocks of a Markdown file (argv[1]), in
order, in one namespace, as a reader would paste them into one script."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tideflow
import tideflow.distributed
import tideflow.parallel

# NOTE: until tideflow/__init__.py and nn.Module re-export them, the tutorial's names are
# bound here from where they live.
for name in ("placement", "sbp"):
    if not hasattr(tideflow, name):
        setattr(tideflow, name, getattr(tideflow.parallel, name))
if not hasattr(tideflow.nn.Module, "to_global"):
    tideflow.nn.Module.to_global = tideflow.parallel.module_to_global

text = Path(sys.argv[1]).read_text()
blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
assert blocks, f"no python code blocks in {sys.argv[1]}"
namespace: dict = {"__name__": "__main__"}
for i, block in enumerate(blocks):
    exec(compile(block, f"{sys.argv[1]} (block {i + 1})", "exec"), namespace)
print(f"rank {tideflow.distributed.get_rank()}: ok", flush=True)
