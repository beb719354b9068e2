"""Finding files (folders, .gitignore, skipped folders, excludes), reading them, and linting notebooks by cell."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ferry.lint import RULES
from ferry.lint.files import PathFilter, discover, lint_file, read_source, source_from_text, unreadable

FRY001 = [rule for rule in RULES if rule.code == "FRY001"]
BUGGY = 'import torch\n\nx = torch.randn(8, 3)\nx.to("cpu")\n'


def tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository (a ``.git`` folder is all discovery looks for) with ignored and skipped files."""
    (tmp_path / ".git" / "info").mkdir(parents=True)
    tree(
        tmp_path,
        {
            ".gitignore": "*.gen.py\nscratch/\n!keep.gen.py\n",
            ".git/info/exclude": "local.py\n",
            ".git/hooks.py": "",
            "a.py": "",
            "b.ipynb": "{}",
            "notes.txt": "",
            "stub.pyi": "",
            "local.py": "",
            "x.gen.py": "",
            "keep.gen.py": "",
            "scratch/s.py": "",
            "pkg/__init__.py": "",
            "pkg/.gitignore": "secret.py\n!x.gen.py\n",
            "pkg/secret.py": "",
            "pkg/x.gen.py": "",
            "pkg/deep/d.py": "",
            "pkg/__pycache__/c.py": "",
            ".venv/lib/v.py": "",
            "venv/v.py": "",
            "build/b.py": "",
            "dist/d.py": "",
            "node_modules/n.py": "",
            ".tox/t.py": "",
            ".mypy_cache/m.py": "",
            ".ipynb_checkpoints/b-checkpoint.ipynb": "{}",
        },
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_walk_honours_gitignore_and_skips_tool_folders(repo: Path) -> None:
    expected = ["a.py", "b.ipynb", "keep.gen.py", "pkg/__init__.py", "pkg/deep/d.py", "pkg/x.gen.py"]
    assert expected == discover(["."])


def test_gitignore_above_the_walked_folder_counts(repo: Path) -> None:
    tree(repo, {"pkg/deep/z.gen.py": ""})
    assert ["pkg/deep/d.py"] == discover(["pkg/deep"])
    os.chdir(repo / "pkg")
    assert ["deep/d.py"] == discover(["deep"])


def test_without_a_repository_only_the_walked_folders_gitignore_counts(tmp_path: Path) -> None:
    tree(tmp_path, {"p/.gitignore": "x.py\n", "p/x.py": "", "p/y.py": "", ".gitignore": "y.py\n"})
    assert [str(tmp_path / "p" / "y.py")] == discover([str(tmp_path / "p")])


def test_files_named_explicitly_are_always_linted(repo: Path) -> None:
    names = ["x.gen.py", "scratch/s.py", "build/b.py", "notes.txt", "pkg/secret.py"]
    assert names == discover(names)


def test_explicit_folders_are_walked_even_if_ignored_or_skipped(repo: Path) -> None:
    assert ["scratch/s.py"] == discover(["scratch"])
    assert ["build/b.py"] == discover(["build"])


def test_respect_gitignore_off(repo: Path) -> None:
    found = discover(["."], keep=PathFilter(respect_gitignore=False))
    assert {"x.gen.py", "scratch/s.py", "pkg/secret.py", "local.py"} <= set(found)
    assert "build/b.py" not in found


def test_exclude_globs(repo: Path) -> None:
    keep = PathFilter(exclude=["pkg/deep/", "keep.*.py"], root=repo)
    assert ["a.py", "b.ipynb", "pkg/__init__.py", "pkg/x.gen.py"] == discover(["."], keep=keep)
    # named explicitly: linted, unless force_exclude
    assert ["keep.gen.py"] == discover(["keep.gen.py"], keep=keep)
    assert [] == discover(["keep.gen.py"], keep=keep, force_exclude=True)


def test_each_file_once_and_stdin_passes_through(repo: Path) -> None:
    assert ["a.py", "pkg/__init__.py", "pkg/deep/d.py", "pkg/x.gen.py"] == discover(["a.py", "pkg", "./a.py"])
    assert ["-"] == discover(["-"])


def test_missing_path_raises(repo: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.py: no such file or folder"):
        discover(["nope.py"])


def test_symlinked_folders_are_not_followed(tmp_path: Path) -> None:
    tree(tmp_path, {"real/a.py": ""})
    (tmp_path / "real" / "loop").symlink_to(tmp_path / "real")
    assert [str(tmp_path / "real" / "a.py")] == discover([str(tmp_path / "real")])


# (file bytes, the text read)
ENCODINGS = [
    (b"x = 1\n", "x = 1\n"),
    (b"\xef\xbb\xbfx = '\xc3\xa9'\n", "x = '\u00e9'\n"),
    (b"# -*- coding: latin-1 -*-\nx = '\xe9'\n", "# -*- coding: latin-1 -*-\nx = '\u00e9'\n"),
    (b"x = 1\r\ny = 2\r\n", "x = 1\r\ny = 2\r\n"),
]


@pytest.mark.parametrize(("data", "text"), ENCODINGS)
def test_read_source_decodes_as_the_file_declares(tmp_path: Path, data: bytes, text: str) -> None:
    path = tmp_path / "f.py"
    path.write_bytes(data)
    source = read_source(str(path))
    assert text == source.text
    assert data == source.raw.encode(source.encoding)


UNREADABLE = [
    ("f.py", b"x = '\xff'\n", "cannot decode as utf-8: byte 0xff at offset 5"),
    ("f.py", b"# -*- coding: klingon -*-\n", "cannot read: unknown encoding"),
    ("f.ipynb", b"{", "not a notebook ferry can read: not valid JSON"),
]


@pytest.mark.parametrize(("name", "data", "message"), UNREADABLE)
def test_unreadable_files_become_fry000(tmp_path: Path, name: str, data: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(Exception) as caught:  # noqa: PT011 - each case raises its own kind
        read_source(str(path))
    diagnostic = unreadable(name, caught.value)
    assert ("FRY000", "unreadable-file", 1, 1) == (diagnostic.code, diagnostic.name, diagnostic.line, diagnostic.col)
    assert message in diagnostic.message


def test_notebook_diagnostics_give_cell_and_line(tmp_path: Path) -> None:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Title"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["%pip install torch\n", "import torch"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["x = torch.randn(3)\n", "!ls\n", "x.cuda()"]},
    ]
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    [diagnostic] = lint_file(read_source(str(path)), FRY001)
    assert diagnostic.location().endswith("n.ipynb:cell 3:3:1")
    assert (3, 9) == (diagnostic.end_line, diagnostic.end_col)


def test_syntax_error_in_a_notebook_points_at_its_cell() -> None:
    cells = [{"cell_type": "code", "source": "x = 1\n"}, {"cell_type": "code", "source": "y = (\n"}]
    source = source_from_text(json.dumps({"cells": cells}), "n.ipynb")
    [diagnostic] = lint_file(source, FRY001)
    assert ("FRY000", 2) == (diagnostic.code, diagnostic.cell)


def test_non_python_notebooks_give_nothing() -> None:
    data = {"cells": [{"cell_type": "code", "source": "x <- c(1, 2"}], "metadata": {"kernelspec": {"language": "R"}}}
    assert [] == lint_file(source_from_text(json.dumps(data), "r.ipynb"), FRY001)


def test_python_file_positions_are_unchanged() -> None:
    [diagnostic] = lint_file(source_from_text(BUGGY, "t.py"), FRY001)
    assert "t.py:4:1" == diagnostic.location()
    assert diagnostic.cell is None
