"""Applying fixes: edits spliced back to front, overlaps skipped, rounds, notebooks by cell, atomic writes."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from ferry.lint import RULES, Edit, Fix, lint_source
from ferry.lint.files import read_source, source_from_text
from ferry.lint.fix import apply_fixes, fix_notebook, fix_source, fix_text, unified_diff, write_source
from ferry.lint.notebook import Notebook

FRY001 = [rule for rule in RULES if rule.code == "FRY001"]


def fix(*edits: tuple[tuple[int, int], tuple[int, int], str]) -> Fix:
    return Fix("t", tuple(Edit(start, end, text) for start, end, text in edits))


# (text, fixes, expected text, fixes applied)
APPLY = [
    ("abc\n", [fix(((1, 0), (1, 1), "X"))], "Xbc\n", 1),
    ("abc\ndef\n", [fix(((2, 0), (2, 3), "Z")), fix(((1, 1), (1, 2), "Y"))], "aYc\nZ\n", 2),
    # one fix of two edits applies both
    ("abc\ndef\n", [fix(((1, 0), (1, 0), "<"), ((2, 3), (2, 3), ">"))], "<abc\ndef>\n", 1),
    # overlapping fixes: the first (by position) wins, the other is skipped
    ("abcdef\n", [fix(((1, 2), (1, 5), "2")), fix(((1, 0), (1, 3), "1"))], "1def\n", 1),
    # two insertions at one place are ambiguous: one is applied, the next round decides about the other
    ("ab\n", [fix(((1, 1), (1, 1), "x")), fix(((1, 1), (1, 1), "y"))], "axb\n", 1),
    # touching but not overlapping
    ("abcd\n", [fix(((1, 0), (1, 2), "X")), fix(((1, 2), (1, 4), "Y"))], "XY\n", 2),
    # byte columns on a line with non-ASCII characters
    ("s = 'é'; x.cuda()\n", [fix(((1, 10), (1, 18), "x = x.cuda()"))], "s = 'é'; x = x.cuda()\n", 1),
    # CRLF line endings stay
    ("a\r\nbc\r\n", [fix(((2, 1), (2, 2), "Z"))], "a\r\nbZ\r\n", 1),
    # edits outside the text, or backwards, are skipped
    ("a\n", [fix(((5, 0), (5, 1), "Z")), fix(((1, 9), (1, 10), "Z")), fix(((1, 1), (1, 0), "Z"))], "a\n", 0),
    # a fix with one bad edit applies none of its edits
    ("ab\n", [fix(((1, 0), (1, 1), "X"), ((9, 0), (9, 1), "Y"))], "ab\n", 0),
    # the end of the text
    ("a\n", [fix(((2, 0), (2, 0), "b\n"))], "a\nb\n", 1),
]


@pytest.mark.parametrize(("text", "fixes", "expected", "applied"), APPLY)
def test_apply_fixes(text: str, fixes: list[Fix], expected: str, applied: int) -> None:
    assert (expected, applied) == apply_fixes(text, fixes)


BUGGY = '''"""A training script with device bugs."""
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.randn(8, 3)
y = torch.zeros(8)
x.to(device)   # moves nothing
if True:
        y.to(device)  ;  z = 1
w = [x, y]  # done
'''
FIXED = BUGGY.replace("x.to(device)   #", "x = x.to(device)   #").replace("y.to(device)  ;", "y = y.to(device)  ;")


def test_fix_text_keeps_comments_and_formatting_and_is_idempotent() -> None:
    fixed, count = fix_text(BUGGY, "t.py", FRY001)
    assert (FIXED, 2) == (fixed, count)
    ast.parse(fixed)
    assert [] == lint_source(fixed, rules=FRY001)
    assert (FIXED, 0) == fix_text(fixed, "t.py", FRY001)


def test_fix_text_stops_after_max_rounds() -> None:
    source = "import torch\nx = torch.randn(2)\nx.cuda()\n"
    assert (source, 0) == fix_text(source, "t.py", FRY001, max_rounds=0)


def test_a_fix_that_breaks_the_syntax_is_not_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    import ferry.lint.fix as fix_module

    broken = [Fix("break it", (Edit((1, 0), (1, 0), "(("),))]
    monkeypatch.setattr(fix_module, "_fixes", lambda text, path, rules: broken)
    assert ("x = 1\n", 0) == fix_text("x = 1\n", "t.py", FRY001)


def notebook_text() -> str:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["x.to(device)\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["%load_ext autoreload\n", "import torch\n", "device = torch.device('cpu')"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["x = torch.randn(3)  # é\n", "!nvidia-smi\n", "x.to(device)  # the bug"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": "y = torch.ones(2)\ny.cpu()\n"},
    ]  # fmt: skip
    meta = {"kernelspec": {"language": "python", "name": "python3", "display_name": "Python 3"}}
    return json.dumps({"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def test_notebook_fixes_go_into_their_cells_and_nothing_else_changes() -> None:
    text = notebook_text()
    fixed, count = fix_notebook(Notebook(json.loads(text), text), "n.ipynb", FRY001)
    assert 2 == count
    expected = json.loads(text)
    expected["cells"][2]["source"][2] = "x = x.to(device)  # the bug"
    expected["cells"][3]["source"] = "y = torch.ones(2)\ny = y.cpu()\n"
    assert json.dumps(expected, indent=1) + "\n" == fixed.dumps()
    again, count = fix_notebook(fixed, "n.ipynb", FRY001)
    assert (fixed.dumps(), 0) == (again.dumps(), count)


def test_notebook_fix_on_a_magic_line_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    import ferry.lint.fix as fix_module

    nb = Notebook({"cells": [{"cell_type": "code", "source": "%time x = 1\ny = 2\n"}]})
    assert 1 in nb.cells[0].neutralised
    monkeypatch.setattr(fix_module, "_fixes", lambda text, path, rules: [Fix("t", (Edit((1, 0), (1, 3), "y"),))])
    assert 0 == fix_notebook(nb, "n.ipynb", FRY001)[1]


def test_diff_of_a_notebook_names_the_cell() -> None:
    before = source_from_text(notebook_text(), "n.ipynb")
    after, count, _ = fix_source(before, FRY001)
    assert 2 == count
    diff = unified_diff(before, after)
    assert diff.startswith("--- n.ipynb:cell 3\n+++ n.ipynb:cell 3\n")
    assert "+x = x.to(device)  # the bug\n\\ No newline at end of file\n" in diff
    assert "--- n.ipynb:cell 4\n" in diff


def test_write_source_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.py"
    path.write_bytes(BUGGY.encode())
    fixed, _, _ = fix_source(read_source(str(path)), FRY001)

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        write_source(fixed)
    assert BUGGY == path.read_text()
    assert ["t.py"] == [p.name for p in tmp_path.iterdir()]  # no temporary left behind
    monkeypatch.undo()
    write_source(fixed)
    assert FIXED == path.read_text()


def test_write_source_keeps_encoding_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "t.py"
    data = b"\xef\xbb\xbf" + BUGGY.replace("\n", "\r\n").encode()
    path.write_bytes(data)
    fixed, count, _ = fix_source(read_source(str(path)), FRY001)
    write_source(fixed)
    assert 2 == count
    written = path.read_bytes()
    assert written.startswith(b"\xef\xbb\xbf")
    assert written.count(b"\r\n") == data.count(b"\r\n")
    assert b"x = x.to(device)" in written


def test_only_the_fixes_that_break_the_code_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    import ferry.lint.fix as fix_module

    def fixes(text: str, path: str, rules: object) -> list[Fix]:
        broken = Fix("break it", (Edit((2, 0), (2, 0), "(("),))
        return [broken] if text.startswith("y") else [Fix("good", (Edit((1, 0), (1, 1), "y"),)), broken]

    monkeypatch.setattr(fix_module, "_fixes", fixes)
    source = "x = 1\nz = 2\n"
    assert ("y = 1\nz = 2\n", 1, 1) == fix_module.fix_text_counting(source, "t.py", FRY001)
    after, count, skipped = fix_source(source_from_text(source, "t.py"), FRY001)
    assert ("y = 1\nz = 2\n", 1, 1) == (after.raw, count, skipped)


def test_summary_counts_skipped_fixes() -> None:
    from ferry.lint.files import FileResult
    from ferry.lint.report import summary

    results = [FileResult("t.py", [], fixed=1, skipped=2)]
    assert summary(results, fixing=True).endswith("2 fixes skipped: applying them would break the code.")
    assert summary(results, diff=True).endswith("2 fixes skipped: applying them would break the code.")
    assert "skipped" not in summary(results)


FIXABLE = "import torch\nx = torch.randn(2)\nx.cuda()\n"


def test_write_source_follows_symlinks_and_keeps_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "real.py"
    target.write_text(FIXABLE)
    target.chmod(0o755)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    fixed, _, _ = fix_source(read_source(str(link)), FRY001)
    write_source(fixed, link)
    assert link.is_symlink()
    assert "x = x.cuda()" in target.read_text()
    assert 0o755 == target.stat().st_mode & 0o777


def test_write_source_keeps_hard_links(tmp_path: Path) -> None:
    first = tmp_path / "a.py"
    first.write_text(FIXABLE)
    second = tmp_path / "b.py"
    os.link(first, second)
    fixed, _, _ = fix_source(read_source(str(first)), FRY001)
    write_source(fixed, first)
    assert first.stat().st_ino == second.stat().st_ino
    assert "x = x.cuda()" in second.read_text()
