"""docs/deployment.md is a tutorial: its Python code blocks run in order as one script."""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"

pytest.importorskip("onnxruntime")
pytest.importorskip("openvino")


def test_the_deployment_page_runs():
    text = DOC.read_text()
    blocks = list(re.finditer(r"```python\n(.*?)```", text, flags=re.S))
    assert len(blocks) >= 5
    namespace = {"__name__": "deployment_page"}
    for block in blocks:
        first_line = text.count("\n", 0, block.start(1))
        # NOTE: padded with newlines so a failure points at the line of the document.
        exec(compile("\n" * first_line + block.group(1), str(DOC), "exec"), namespace)
