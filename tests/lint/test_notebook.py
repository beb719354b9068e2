"""Notebooks as Python: magics neutralised line for line, positions mapped to cells, JSON written back unchanged."""

from __future__ import annotations

import ast
import json

import pytest

from ferry.lint.notebook import Notebook, NotebookError, neutralise_magics, read_notebook

# (cell source, the source the linter sees, the lines replaced)
MAGICS = [
    ("x = 1\n", "x = 1\n", set()),
    ("%matplotlib inline\nimport torch\n", "...\nimport torch\n", {1}),
    ("!pip install torch\nx = 1", "...\nx = 1", {1}),
    ("files = !ls\nprint(files)\n", "files = ...\nprint(files)\n", {1}),
    ("t = %timeit -o f()\n", "t = ...\n", {1}),
    ("torch.randn?\ntorch.randn??\n?torch\n", "...\n...\n...\n", {1, 2, 3}),
    ("for i in range(3):\n    !echo $i\n", "for i in range(3):\n    ...\n", {2}),
    ("%%time\nx = 1\ny = 2\n", "...\nx = 1\ny = 2\n", {1}),
    ("%%bash\necho hi\nfor i in 1 2; do echo $i; done\n", "\n\n\n", {1, 2, 3}),
    ("!pip install \\\n    torch\nx = 1\n", "...\n\nx = 1\n", {1, 2}),
    # a cell that parses is left alone, even with IPython-looking lines in strings
    ('s = """\n!not a shell line\n%not a magic\n"""\n', 's = """\n!not a shell line\n%not a magic\n"""\n', set()),
    ("x = 1\r\n%time f()\r\n", "x = 1\r\n...\r\n", {2}),
]


def notebook(*cells: tuple[str, str | list[str]], language: str = "python") -> dict:
    return {
        "cells": [
            {"cell_type": kind, "metadata": {}, "source": source}
            | ({"execution_count": None, "outputs": []} if kind == "code" else {})
            for kind, source in cells
        ],
        "metadata": {"kernelspec": {"display_name": "k", "language": language, "name": "k"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


@pytest.mark.parametrize(("source", "expected", "replaced"), MAGICS)
def test_neutralise_magics(source: str, expected: str, replaced: set[int]) -> None:
    code, lines = neutralise_magics(source)
    assert (expected, replaced) == (code, set(lines))
    assert source.count("\n") == code.count("\n")


def test_cells_are_joined_and_positions_map_back_counting_every_cell() -> None:
    nb = Notebook(
        notebook(
            ("markdown", "# Title\n"),
            ("code", ["%matplotlib inline\n", "import torch"]),
            ("raw", "raw text"),
            ("code", ""),
            ("code", "x = torch.randn(3)\nx.cuda()\n"),
        )
    )
    assert "...\nimport torch\nx = torch.randn(3)\nx.cuda()\n" == nb.source
    ast.parse(nb.source)
    assert [2, 4, 5] == [cell.cell for cell in nb.cells]
    assert [(2, 1), (2, 2), (5, 1), (5, 2)] == [nb.position(line) for line in (1, 2, 3, 4)]


def test_dumps_keeps_the_layout_and_changes_only_the_new_sources() -> None:
    data = notebook(("markdown", "# Café\n"), ("code", ["x = torch.randn(3)\n", "x.cuda()"]), ("code", "y = 1"))
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    nb = read_notebook(text)
    assert text == nb.dumps()
    changed = nb.with_sources({2: "x = torch.randn(3)\nx = x.cuda()"})
    expected = json.loads(text)
    expected["cells"][1]["source"] = ["x = torch.randn(3)\n", "x = x.cuda()"]
    assert json.dumps(expected, indent=1, ensure_ascii=False) + "\n" == changed.dumps()
    assert "y = 1" == changed.data["cells"][2]["source"]  # a string stays a string


def test_dumps_keeps_ascii_escapes_and_other_indents() -> None:
    data = notebook(("code", "s = 'é'"))
    for text in (json.dumps(data, indent=2), json.dumps(data, indent=4, ensure_ascii=False), json.dumps(data)):
        assert text == read_notebook(text).dumps()


@pytest.mark.parametrize(
    ("language", "is_python"), [("python", True), ("Python 3", True), ("R", False), ("julia", False)]
)
def test_kernel_language(language: str, is_python: bool) -> None:
    assert is_python == Notebook(notebook(("code", "1"), language=language)).is_python


BAD_NOTEBOOKS = [
    ("not json", "not valid JSON"),
    ("[1, 2]", "not a notebook object"),
    ('{"nbformat": 3, "worksheets": []}', "not an nbformat 4 notebook (nbformat 3)"),
    ('{"cells": {}}', "expected a list"),
    ('{"cells": [1]}', "cell 1 is a int"),
    ('{"cells": [{"cell_type": "code", "source": 5}]}', "cell 1: the source is int"),
]


@pytest.mark.parametrize(("text", "message"), BAD_NOTEBOOKS)
def test_bad_notebooks_raise_notebook_error(text: str, message: str) -> None:
    with pytest.raises(NotebookError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_notebook(text)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"cells": ' + "1" * 5000 + "}"])
def test_unreadable_json_is_a_notebook_error(text: str) -> None:
    with pytest.raises(NotebookError, match="not valid JSON"):
        read_notebook(text)
