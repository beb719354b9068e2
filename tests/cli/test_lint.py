"""``ferry lint``, every option, in-process through ``ferry.cli.main``."""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path

import pytest

from ferry.cli import main
from ferry.lint import RULES

BUGGY = """import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.randn(8, 3)
x.to(device)  # moves nothing
y = torch.zeros(2)
y.cpu()
"""
CLEAN = "import torch\n\nx = torch.randn(8, 3)\nx = x.to('cpu')\n"
FIXED = BUGGY.replace("x.to(device)  #", "x = x.to(device)  #").replace("y.cpu()", "y = y.cpu()")
MESSAGE_X = "FRY001 result of `x.to(device)` is discarded"


def notebook(*sources: str) -> str:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# Notes\n"]}]
    cells += [
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}
        for source in sources
    ]
    meta = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}}
    return json.dumps({"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


NOTEBOOK = notebook(
    "%matplotlib inline\nimport torch\ndevice = torch.device('cpu')\n", "x = torch.randn(3)\n!ls\nx.to(device)"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with a buggy file, a clean file, an ignored file, a notebook; the current folder."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BUGGY)
    (tmp_path / "src" / "clean.py").write_text(CLEAN)
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "g.py").write_text(BUGGY)
    (tmp_path / "explore.ipynb").write_text(NOTEBOOK)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def lint(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["lint", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_lint_is_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert 0 == main(["--help"])
    assert "  lint " in capsys.readouterr().out
    code, out, _ = lint(capsys, "--help")
    assert 0 == code
    assert "usage: ferry lint" in out


def test_default_output_and_summary(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lint(capsys, "--select", "FRY001")
    assert 1 == code
    assert [
        "explore.ipynb:cell 3:3:1: FRY001 result of `x.to(device)` is discarded: tensors are not moved or converted in "
        "place; assign it: `x = x.to(device)`",
        "src/train.py:5:1: FRY001 result of `x.to(device)` is discarded: tensors are not moved or converted in place; "
        "assign it: `x = x.to(device)`",
        "src/train.py:7:1: FRY001 result of `y.cpu()` is discarded: tensors are not moved or converted in place; "
        "assign it: `y = y.cpu()`",
    ] == out.splitlines()
    assert "Found 3 problems (3 fixable with --fix).\n" == err


def test_clean_exits_0(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (0, "", "No problems found in 1 file.\n") == lint(capsys, "src/clean.py")


def test_quiet_drops_the_summary(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (0, "", "") == lint(capsys, "-q", "src/clean.py")


def test_gitignored_files_are_skipped_unless_named(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = lint(capsys, "--select", "FRY001", ".")
    assert "generated/" not in out
    _, out, _ = lint(capsys, "--select", "FRY001", "generated/g.py")
    assert out.startswith("generated/g.py:5:1: FRY001")
    _, out, _ = lint(capsys, "--select", "FRY001", "--no-respect-gitignore", ".")
    assert "generated/g.py:5:1" in out


# (options, how many FRY001 diagnostics in src/train.py)
SELECTION = [
    (["--select", "FRY001"], 2),
    (["--select", "FRY0"], 2),
    (["--select", "discarded-tensor-move"], 2),
    (["--select", "FRY001,FRY0"], 2),
    (["--select", "ALL", "--ignore", "FRY001"], 0),
    (["--ignore", "FRY0", "--ignore", "FRY1"], 0),
    (["--select", "FRY001", "--ignore", "discarded-tensor-move"], 0),
    (["--ignore", "FRY001", "--extend-select", "FRY001"], 0),
]


@pytest.mark.parametrize(("options", "count"), SELECTION)
def test_select_and_ignore(project: Path, capsys: pytest.CaptureFixture[str], options: list[str], count: int) -> None:
    _, out, _ = lint(capsys, *options, "src/train.py")
    assert count == out.count("FRY001")


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
def test_unknown_rule_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str], option: str) -> None:
    code, out, err = lint(capsys, option, "FRY777", "src")
    assert (2, "") == (code, out)
    assert "ferry lint: no lint rule matches 'FRY777'" in err
    assert "FRY001 (discarded-tensor-move)" in err


USAGE = [
    (["nope.py"], "ferry lint: nope.py: no such file or folder. Check the path."),
    (["-", "src"], "'-' (standard input) must be the only path"),
    (["--statistics", "--format", "sarif", "src"], "--statistics gives counts"),
    (["--format", "xml", "src"], "invalid choice: 'xml'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--config", "missing.toml"], "--config missing.toml: no such file"),
]


@pytest.mark.parametrize(("args", "message"), USAGE)
def test_usage_errors_exit_2(project: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, _, err = lint(capsys, *args)
    assert 2 == code
    assert message in err


def test_noqa(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = BUGGY.replace("# moves nothing", "# noqa: FRY001").replace("y.cpu()", "y.cpu()  # noqa")
    (project / "src" / "train.py").write_text(source)
    assert 0 == lint(capsys, "--select", "FRY001", "src/train.py")[0]


def test_syntax_errors_and_unreadable_files_are_reported_not_fatal(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "src" / "broken.py").write_text("def f(:\n")
    (project / "src" / "latin.py").write_bytes(b"x = '\xe9'\n")
    (project / "bad.ipynb").write_text("{not json")
    code, out, _ = lint(capsys, "--select", "FRY001", "src", "bad.ipynb")
    lines = out.splitlines()
    assert 1 == code
    assert any(line.startswith("src/broken.py:1:7: FRY000 cannot parse:") for line in lines)
    assert "src/latin.py:1:1: FRY000 cannot decode as utf-8: byte 0xe9 at offset 5" in out
    assert "bad.ipynb:1:1: FRY000 not a notebook ferry can read: not valid JSON" in out
    assert "src/train.py:5:1: FRY001" in out  # the other files are still linted


def test_a_crashing_rule_exits_2_and_the_other_files_are_reported(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ferry.cli.lint as cli_lint

    real = cli_lint.lint_file

    def flaky(source, rules):  # type: ignore[no-untyped-def]
        if source.path.endswith("clean.py"):
            raise RuntimeError("rule bug")
        return real(source, rules)

    monkeypatch.setattr(cli_lint, "lint_file", flaky)
    code, out, err = lint(capsys, "--select", "FRY001", "src")
    assert 2 == code
    assert "ferry lint: internal error while checking src/clean.py (please report it):" in err
    assert "RuntimeError: rule bug" in err
    assert "src/train.py:5:1: FRY001" in out


def test_stdin(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(BUGGY))
    code, out, _ = lint(capsys, "--select", "FRY001", "-")
    assert 1 == code
    assert out.startswith(f"-:5:1: {MESSAGE_X}")
    monkeypatch.setattr("sys.stdin", io.StringIO(NOTEBOOK))
    _, out, _ = lint(capsys, "--select", "FRY001", "--stdin-filename", "nb/explore.ipynb", "-")
    assert out.startswith(f"nb/explore.ipynb:cell 3:3:1: {MESSAGE_X}")


def test_stdin_fix_prints_the_fixed_code(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(BUGGY))
    code, out, err = lint(capsys, "--select", "FRY001", "--fix", "-")
    assert (0, FIXED) == (code, out)
    assert "Found 2 problems (2 fixed, 0 remaining)." in err


def test_notebook_positions_in_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = lint(capsys, "--select", "FRY001", "--format", "json", "explore.ipynb")
    [item] = json.loads(out)
    assert {
        "path": "explore.ipynb",
        "cell": 3,
        "line": 3,
        "col": 1,
        "end_line": 3,
        "end_col": 13,
        "code": "FRY001",
        "name": "discarded-tensor-move",
        "message": item["message"],
        "fix": {
            "title": "Assign the result: `x = x.to(device)`",
            "edits": [{"cell": 3, "line": 3, "col": 1, "end_line": 3, "end_col": 13, "text": "x = x.to(device)"}],
        },
    } == item


@pytest.mark.parametrize("option", [["--format", "json"], ["--json"]])
def test_json(project: Path, capsys: pytest.CaptureFixture[str], option: list[str]) -> None:
    code, out, err = lint(capsys, "--select", "FRY001", *option, "src")
    assert (1, "") == (code, err)
    items = json.loads(out)
    assert [("src/train.py", None, 5, 1, 5, 13), ("src/train.py", None, 7, 1, 7, 8)] == [
        (i["path"], i["cell"], i["line"], i["col"], i["end_line"], i["end_col"]) for i in items
    ]
    assert ["code", "name", "message", "fix"] == list(items[0])[6:]


def test_json_when_clean_is_an_empty_list(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (0, "[]\n", "") == lint(capsys, "--json", "src/clean.py")


def test_sarif(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lint(capsys, "--select", "FRY001", "--format", "sarif", ".")
    assert 1 == code
    log = json.loads(out)
    run = log["runs"][0]
    assert ("2.1.0", "ferry") == (log["version"], run["tool"]["driver"]["name"])
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]]
    assert ["explore.ipynb", "src/train.py", "src/train.py"] == uris
    assert {"cell": 3} == run["results"][0]["properties"]


def test_statistics(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lint(capsys, "--select", "FRY001", "--statistics", ".")
    assert 1 == code
    assert ["Count", "Code", "Name", "Fixable"] == out.splitlines()[0].split()
    assert ["3", "FRY001", "discarded-tensor-move", "3"] == out.splitlines()[1].split()
    _, out, _ = lint(capsys, "--select", "FRY001", "--statistics", "--json", ".")
    assert [{"code": "FRY001", "name": "discarded-tensor-move", "count": 3, "fixable": 3}] == json.loads(out)


def test_output_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lint(capsys, "--select", "FRY001", "--format", "sarif", "-o", "ferry.sarif", "src")
    assert (1, "") == (code, out)
    assert 2 == len(json.loads((project / "ferry.sarif").read_text())["runs"][0]["results"])


def test_output_file_in_a_new_folder_and_a_clear_error_where_it_cannot_be(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = lint(capsys, "--select", "FRY001", "--json", "-o", "reports/lint/ferry.json", "src")
    assert (1, "") == (code, out)
    assert 2 == len(json.loads((project / "reports" / "lint" / "ferry.json").read_text()))
    (project / "taken").write_text("a file, not a folder")
    code, out, err = lint(capsys, "--select", "FRY001", "--json", "-o", "taken/ferry.json", "src")
    assert (2, "") == (code, out)
    assert "cannot write 'taken/ferry.json': a folder on the path is a file; pass another path to -o" in err
    assert not list(project.glob("taken*/**/*.ferry-tmp-*"))


def test_fix_writes_keeps_comments_and_is_idempotent(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lint(capsys, "--select", "FRY001", "--fix", "src", "explore.ipynb")
    assert (0, "") == (code, out)
    assert "Found 3 problems (3 fixed, 0 remaining).\n" == err
    fixed = (project / "src" / "train.py").read_text()
    assert FIXED == fixed
    ast.parse(fixed)
    cells = json.loads((project / "explore.ipynb").read_text())["cells"]
    assert "x = torch.randn(3)\n!ls\nx = x.to(device)" == cells[2]["source"]
    assert json.loads(NOTEBOOK)["cells"][:2] == cells[:2]
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    again = lint(capsys, "--select", "FRY001", "--fix", "src", "explore.ipynb")
    assert (0, "", "No problems found in 3 files.\n") == again
    assert before == {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}


def test_fix_reports_what_remains(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # an expression receiver has no safe fix: it stays reported after --fix
    (project / "src" / "train.py").write_text(BUGGY + "torch.randn(2).to(device)\n")
    code, out, err = lint(capsys, "--select", "FRY001", "--fix", "src/train.py")
    assert 1 == code
    assert [8] == [int(line.split(":")[1]) for line in out.splitlines()]
    assert "Found 3 problems (2 fixed, 1 remaining).\n" == err


def test_diff_writes_nothing_and_exits_1(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lint(capsys, "--select", "FRY001", "--diff", "src/train.py")
    assert 1 == code
    assert out.startswith("--- src/train.py\n+++ src/train.py\n@@ ")
    assert "-x.to(device)  # moves nothing\n+x = x.to(device)  # moves nothing\n" in out
    assert "Would fix 2 problems in 1 file.\n" == err
    assert BUGGY == (project / "src" / "train.py").read_text()
    assert (0, "", "No fixes to make in 1 file.\n") == lint(capsys, "--diff", "src/clean.py")


def test_diff_reports_a_file_that_does_not_parse(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "src" / "broken.py").write_text("import torch\nx = torch.randn(3\n")
    code, out, err = lint(capsys, "--diff", "src/broken.py")
    assert (1, "") == (code, out)
    assert "src/broken.py:2:" in err
    assert "FRY000 cannot parse" in err


def test_config_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.ferry.lint]\nselect = ["FRY001"]\nexclude = ["*.ipynb"]\n'
        '[tool.ferry.lint.per-file-ignores]\n"src/train.py" = ["FRY001"]\n'
    )
    (project / "src" / "other.py").write_text(BUGGY)
    _, out, _ = lint(capsys, ".")
    assert ["src/other.py"] == sorted({line.split(":")[0] for line in out.splitlines()})
    # found from the first path, wherever the current folder is
    (project / "elsewhere").mkdir()
    _, out, _ = lint(capsys, "src")
    assert "src/train.py" not in out
    # the command line overrides the file; --isolated reads none; --config names one
    _, out, _ = lint(capsys, "--exclude", "", ".")
    assert "explore.ipynb:cell 3" in out
    _, out, _ = lint(capsys, "--isolated", "--select", "FRY001", "src/train.py")
    assert "src/train.py:5:1" in out
    (project / "elsewhere" / "strict.toml").write_text('[tool.ferry.lint]\nignore = ["FRY0", "FRY1"]\n')
    assert 0 == lint(capsys, "--config", "elsewhere/strict.toml", "src")[0]


def test_bad_config_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text('[tool.ferry.lint]\nselect = ["FRY777"]\n')
    code, _, err = lint(capsys, "src")
    assert 2 == code
    assert "pyproject.toml: [tool.ferry.lint]: no lint rule matches 'FRY777'" in err


def test_force_exclude_for_files_named_explicitly(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text('[tool.ferry.lint]\nexclude = ["src/train.py"]\n')
    assert 1 == lint(capsys, "--select", "FRY001", "src/train.py")[0]
    assert (0, "", "No problems found in 0 files.\n") == lint(capsys, "--force-exclude", "src/train.py")


@pytest.mark.parametrize("name", ["FRY001", "fry001", "discarded-tensor-move"])
def test_explain(capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, out, _ = lint(capsys, "--explain", name)
    assert 0 == code
    assert out.startswith("# FRY001 discarded-tensor-move (on by default)\n")
    for section in ("## What it does", "## Why is this bad", "## Example", "## Use instead"):
        assert section in out


def test_explain_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lint(capsys, "--explain", "FRY001", "--json")
    explained = json.loads(out)
    assert (0, "discarded-tensor-move", True) == (code, explained["name"], explained["default"])
    assert explained["doc"].startswith("## What it does")


def test_explain_unknown_lists_the_rules(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lint(capsys, "--explain", "FRY777")
    assert (2, "") == (code, out)
    assert "ferry lint: no rule 'FRY777'" in err
    for rule in RULES:
        assert f"{rule.code}  {rule.name}" in err


def test_stdin_fix_prints_the_code_unchanged_when_it_cannot_be_fixed(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("def f(:\n"))
    code, out, err = lint(capsys, "--fix", "-")
    assert (1, "def f(:\n") == (code, out)
    assert "-:1:7: FRY000 cannot parse:" in err


def test_fix_that_cannot_be_written_exits_2_and_leaves_the_file(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    def refuse(src: object, dst: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    code, _, err = lint(capsys, "--select", "FRY001", "--fix", "src/train.py")
    assert 2 == code
    assert "ferry lint: cannot write the fixes to src/train.py: Permission denied." in err
    assert BUGGY == (project / "src" / "train.py").read_text()


@pytest.mark.parametrize("pattern", ["F", "FR", ""])
def test_select_matching_no_rule_is_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str], pattern: str
) -> None:
    code, _, err = lint(capsys, "--select", pattern, "src")
    assert 2 == code
    assert "no lint rule matches" in err


def test_non_utf8_pyproject_is_a_clear_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_bytes(b"[tool.ferry.lint]\n# caf\xe9\n")
    code, _, err = lint(capsys, "src")
    assert 2 == code
    assert "pyproject.toml: not valid TOML" in err
    assert "Traceback" not in err


def test_explain_into_a_closed_pipe_is_quiet(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("sys.stdout", ClosedPipe())
    assert 1 == main(["lint", "--explain", "FRY001"])
    assert "Traceback" not in capsys.readouterr().err


class BytesStdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


def test_stdin_is_decoded_like_a_file(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    latin = b"# -*- coding: latin-1 -*-\nimport torch\nx = torch.ones(2)  # caf\xe9\nx.cpu()\n"
    monkeypatch.setattr("sys.stdin", BytesStdin(latin))
    code, out, err = lint(capsys, "--isolated", "-")
    assert 1 == code
    assert out.startswith("-:4:1: FRY001")
    monkeypatch.setattr("sys.stdin", BytesStdin(b"x = 1  # caf\xe9\n"))
    code, out, err = lint(capsys, "--isolated", "-")
    assert 1 == code
    assert "FRY000 cannot decode as utf-8: byte 0xe9" in out
    assert "Traceback" not in err


def test_a_notebook_cell_that_does_not_parse_does_not_hide_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nb.ipynb").write_text(
        notebook("import torch\nx = torch.randn(3)\n", "def f(:\n    pass\n", "x.to('cpu')\n")
    )
    code, out, _ = lint(capsys, "--select", "FRY001", "nb.ipynb")
    assert 1 == code
    lines = out.splitlines()
    assert lines[0].startswith("nb.ipynb:cell 3:1:")
    assert "FRY000 cannot parse" in lines[0]
    assert lines[1].startswith("nb.ipynb:cell 4:1:1: FRY001 result of `x.to('cpu')` is discarded")
