"""The architecture, as imports: the import-linter contracts hold, and only checkpoint/sharded imports DCP."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _support import REPO

SRC = REPO / "src" / "ferry"
SHARDED = SRC / "checkpoint" / "sharded"


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports, at the top or inside functions."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def test_only_checkpoint_sharded_imports_torch_distributed_checkpoint() -> None:
    importers = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if any(name.startswith("torch.distributed.checkpoint") for name in _imports(path))
    )
    assert importers, "nothing imports DCP: the check looks at the wrong folder"
    assert [] == [name for name in importers if not name.startswith("checkpoint/sharded/")]


def test_import_contracts_hold() -> None:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if command is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    result = subprocess.run([command, "--no-cache"], capture_output=True, text=True, cwd=REPO, check=False)
    assert 0 == result.returncode, result.stdout[-3000:]
    assert "broken" not in result.stdout.lower().replace("0 broken", "")
