"""docs/graph.md is a tutorial: its Python code blocks run in order as one script."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "graph.md"


def test_the_graph_tutorial_runs():
    text = DOC.read_text()
    blocks = list(re.finditer(r"```python\n(.*?)```", text, flags=re.S))
    assert len(blocks) >= 8
    namespace = {"__name__": "graph_tutorial"}
    for block in blocks:
        first_line = text.count("\n", 0, block.start(1))
        # NOTE: padded with newlines so a failure points at the line of the document.
        exec(compile("\n" * first_line + block.group(1), str(DOC), "exec"), namespace)
