import sys

import ferry
from ferry.cli import COMMANDS, main

SCRIPT = """\
import sys
import torch
print("argv", sys.argv[1:])
x = torch.ones(2)
x.to("meta")
code = int(sys.argv[1]) if sys.argv[1:] else 0
sys.exit(code)
"""

MISMATCH = """\
import torch
def loss(outputs, labels):
    return (outputs - labels).sum()
loss(torch.ones(2, device="meta"), torch.ones(2))
"""


def test_run_is_registered():
    assert "run" in COMMANDS


def test_run_passes_argv_and_returns_the_scripts_exit_code(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    assert 3 == main(["run", str(script), "3", "--flag"])
    assert "argv ['3', '--flag']" in capsys.readouterr().out
    assert 0 == main(["run", str(script)])


def test_run_sanitize_warns_at_the_scripts_line(tmp_path, capsys, recwarn):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    assert 0 == main(["run", "--sanitize", str(script)])
    assert [(str(script), 5)] == [(w.filename, w.lineno) for w in recwarn.list if w.category is ferry.SanitizerWarning]


def test_run_sanitize_raises_and_prints_the_users_traceback(tmp_path, capsys):
    script = tmp_path / "bad.py"
    script.write_text(MISMATCH)
    assert 1 == main(["run", "--sanitize", str(script)])
    err = capsys.readouterr().err
    assert "ferry.errors.DeviceMismatchError" in err
    assert "labels = labels.to(outputs.device)" in err
    assert f'File "{script}", line 4' in err.splitlines()[1]
    assert "runpy" not in err


def test_run_without_sanitize_gives_torchs_error(tmp_path, capsys):
    script = tmp_path / "bad.py"
    script.write_text(MISMATCH)
    assert 1 == main(["run", str(script)])
    assert "DeviceMismatchError" not in capsys.readouterr().err


def test_run_usage_errors(tmp_path, capsys):
    assert 2 == main(["run", str(tmp_path / "missing.py")])
    assert 2 == main(["run", "--on-error", "ignore", str(tmp_path / "missing.py")])


def test_python_m_ferry_run(tmp_path):
    import subprocess

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "-m", "ferry", "run", "--sanitize", str(script), "4"], capture_output=True, text=True
    )
    assert 4 == done.returncode
    assert "SanitizerWarning" in done.stderr
