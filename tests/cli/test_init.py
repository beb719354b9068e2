import subprocess
import sys

import ferry
from ferry.cli import main


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ferry {ferry.__version__}\n"


def test_no_command_prints_usage_and_exits_2(capsys):
    assert main([]) == 2
    assert "usage: ferry" in capsys.readouterr().out


def test_help_exits_0(capsys):
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out


def test_unknown_command(capsys):
    assert main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err


def test_python_dash_m_ferry():
    result = subprocess.run([sys.executable, "-m", "ferry", "--version"], capture_output=True, text=True, check=False)
    assert result.returncode == 0
    assert result.stdout.strip() == f"ferry {ferry.__version__}"
