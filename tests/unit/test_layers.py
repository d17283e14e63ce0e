"""The import-layer contract (pyproject.toml, [tool.importlinter]) holds: a cycle fails CI."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_layers_contract_is_kept():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed")
    result = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_library_never_imports_torch():
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "tideflow").rglob("*.py")
        if any(
            line.strip().startswith(("import torch", "from torch"))
            for line in p.read_text().splitlines()
        )
    ]
    assert not offenders, f"tideflow must not import torch: {offenders}"
