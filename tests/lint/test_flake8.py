"""The flake8 plugin: ``flake8 --select FRY`` runs ferry's rules, through the entry point pyproject.toml declares."""

from __future__ import annotations

import ast
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from ferry.lint.flake8 import Plugin

BUGGY = """import torch

x = torch.randn(8, 3)
x.to('cpu')  # moves nothing
y = torch.ones(2)
y.cuda()  # noqa: FRY001
"""


def test_plugin_yields_flake8_tuples() -> None:
    plugin = Plugin(ast.parse(BUGGY), BUGGY.splitlines(keepends=True), "t.py")
    [(line, col, message, kind)] = list(plugin.run())
    assert (4, 0, Plugin) == (line, col, kind)
    assert message.startswith("FRY001 result of `x.to('cpu')` is discarded")


def test_entry_point_is_registered() -> None:
    found = [ep for ep in entry_points(group="flake8.extension") if ep.name == "FRY"]
    assert ["ferry.lint.flake8:Plugin"] == [ep.value for ep in found], "reinstall ferry: pip install -e ."


@pytest.mark.slow
def test_flake8_reports_fry_codes(tmp_path: Path) -> None:
    pytest.importorskip("flake8")
    (tmp_path / "t.py").write_text(BUGGY)
    result = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "FRY", "t.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert (1, "") == (result.returncode, result.stderr)
    [line] = result.stdout.splitlines()
    assert line.startswith("t.py:4:1: FRY001 result of `x.to('cpu')` is discarded")


@pytest.mark.parametrize(
    "code",
    ["import torch\nx = torch.ones(2)\nz = " + "+".join(["x"] * 500) + "\n", "t.to('cpu')" + ".to('cpu')" * 400 + "\n"],
)
def test_plugin_never_raises_on_deep_nesting(code: str) -> None:
    plugin = Plugin(ast.parse(code), code.splitlines(keepends=True), "t.py")
    for _, _, message, _ in plugin.run():
        assert message.startswith("FRY")


def test_plugin_reports_a_rule_crash_instead_of_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("ferry.lint.flake8.lint_source", broken)
    [(line, col, message, _)] = list(Plugin(ast.parse(BUGGY), BUGGY.splitlines(keepends=True), "t.py").run())
    assert (1, 0) == (line, col)
    assert message.startswith("FRY000 ")
    assert "boom" in message
