"""``ferry lint``, ``ferry.lint``, the flake8 plugin and the pre-commit hook's entry run where torch cannot be imported.

Each runs in a fresh interpreter whose import system refuses torch, numpy and safetensors (as an environment
without them would), and must still find the bug. The import contract in pyproject.toml (import-linter) checks
the same statically; this checks what actually gets imported, lazy imports included.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: Run first in each interpreter: importing any of these raises ModuleNotFoundError.
BLOCK = """
import sys
class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "numpy", "safetensors"):
            raise ModuleNotFoundError(f"No module named {name!r} (refused by the test)", name=name)
        return None
sys.meta_path.insert(0, _Refuse())
"""

BUGGY = "import torch\n\nx = torch.randn(3)\nx.to('cpu')\n"

#: (what runs, the code after BLOCK): each prints what it found; the last line prints the ferry modules imported
RUNS = {
    "ferry lint": (
        "from ferry.cli import main\ncode = main(['lint', '--format', 'json', sys.argv[1]])\nprint('exit', code)\n"
    ),
    "pre-commit hook entry (ferry lint --force-exclude)": (
        "from ferry.cli import main\n"
        "code = main(['lint', '--force-exclude', '--fix', sys.argv[1]])\n"
        "print('exit', code)\n"
    ),
    "ferry.lint": (
        "import ferry.lint\n"
        "found = ferry.lint.lint_source(open(sys.argv[1]).read(), sys.argv[1])\n"
        "print(json.dumps([d.code for d in found]))\n"
    ),
    "flake8 plugin": (
        "from flake8.main.cli import main as flake8\n"
        "try:\n"
        "    code = flake8(['--isolated', '--select', 'FRY', sys.argv[1]])\n"
        "except SystemExit as done:\n"
        "    code = done.code\n"
        "print('exit', code)\n"
    ),
    "import ferry, the version and the errors": (
        "import ferry\nprint(ferry.__version__, ferry.FerryError.__name__, ferry.ArgumentError.__name__)\n"
    ),
}


def _run(code: str, target: Path) -> subprocess.CompletedProcess[str]:
    script = (
        BLOCK
        + "import json\n"
        + code
        + "print('modules', sorted(m for m in sys.modules if m.startswith(('torch', 'numpy'))))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, str(target)], capture_output=True, text=True, check=False, cwd=target.parent
    )


@pytest.mark.parametrize("name", RUNS)
def test_runs_without_torch(tmp_path: Path, name: str) -> None:
    if name == "flake8 plugin":
        pytest.importorskip("flake8")
    target = tmp_path / "train.py"
    target.write_text(BUGGY)
    result = _run(RUNS[name], target)
    assert 0 == result.returncode, result.stderr
    assert "No module named" not in result.stderr
    assert result.stdout.splitlines()[-1] == "modules []"
    found = {
        "ferry lint": ('"code": "FRY001"' in result.stdout, "exit 1" in result.stdout),
        "pre-commit hook entry (ferry lint --force-exclude)": ("x = x.to('cpu')\n" in target.read_text(), True),
        "ferry.lint": ('["FRY001"]' in result.stdout, True),
        "flake8 plugin": ("4:1: FRY001" in result.stdout, "exit 1" in result.stdout),
        "import ferry, the version and the errors": ("FerryError ArgumentError" in result.stdout, True),
    }
    assert (True, True) == found[name], result.stdout


def test_the_block_does_block(tmp_path: Path) -> None:
    result = _run("import torch\n", tmp_path / "t.py")
    assert "refused by the test" in result.stderr


def test_a_torch_feature_without_torch_says_how_to_install_it(tmp_path: Path) -> None:
    result = _run(
        "import ferry\ntry:\n    ferry.save\nexcept ferry.FerryError as err:\n    print(json.dumps(str(err)))\n",
        tmp_path / "t.py",
    )
    message = json.loads(result.stdout.splitlines()[0])
    assert "needs PyTorch" in message
    assert "pip install torch" in message


@pytest.mark.parametrize(
    "code",
    [
        "import ferry.distributed",
        "import ferry.checkpoint.tools as t; t.verify('x')",
        "import ferry; ferry.verify('x')",
        "import ferry; ferry.Checkpointer",
        "from ferry import save",
        "from ferry.checkpoint.tools import verify",
    ],
)
def test_torch_entry_points_without_torch_raise_ferry_errors(tmp_path: Path, code: str) -> None:
    result = _run(
        f"import ferry\ntry:\n    {code}\nexcept ferry.FerryError as err:\n    print('FerryError', err)\n",
        tmp_path / "t.py",
    )
    assert result.stdout.startswith("FerryError"), result.stderr[-2000:]
    assert "needs PyTorch" in result.stdout


@pytest.mark.parametrize("command", [["env"], ["ckpt", "ls", "."], ["ckpt", "verify", "x"], ["run", "x.py"], ["demo"]])
def test_cli_commands_without_torch_say_what_to_install(tmp_path: Path, command: list[str]) -> None:
    result = _run(f"from ferry.cli import main\nprint('exit', main({command!r}))\n", tmp_path / "t.py")
    assert "exit 2" in result.stdout, result.stderr[-2000:]
    assert "needs PyTorch" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_on_ferry_without_torch_lists_what_works(tmp_path: Path) -> None:
    # pydoc reads every name dir() gives; without torch, dir(ferry) gives those that work (ferry.save stays a
    # FerryError saying what to install, also for `from ferry import save`).
    result = _run(
        "import ferry, pydoc\n"
        "text = pydoc.render_doc(ferry, renderer=pydoc.plaintext)\n"
        "print(json.dumps(['save' in dir(ferry), 'FerryError' in text, 'lint (package)' in text]))\n",
        tmp_path / "t.py",
    )
    assert "[false, true, true]" == result.stdout.splitlines()[0], result.stderr[-2000:]
