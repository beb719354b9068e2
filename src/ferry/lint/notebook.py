"""Jupyter notebooks as Python sources: code cells joined for parsing, positions mapped back to cells.

A notebook (nbformat 4, the ``.ipynb`` JSON) is linted as one Python source made of its code cells, each ending
with a newline, in order. IPython syntax that is not Python (line magics ``%time x``, shell escapes ``!pip``,
help ``obj?``, assignments from them ``files = !ls``, and cell magics ``%%bash``) is replaced line by line with
``...``, so line numbers do not change and the rest of the cell still parses; a cell that parses as it is stays
as it is. A diagnostic's line in the joined source maps back to a cell (1-based, counting every cell, markdown
included, as Jupyter shows them) and a line in that cell.

Fixes go back into the cells they belong to (see :mod:`ferry.lint.fix`), and :meth:`Notebook.dumps` writes the
JSON in the layout it was read in (indent, key order, non-ASCII characters as they were), changing nothing but
the sources of the fixed cells.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ferry.errors import FerryError

__all__ = ["CodeCell", "Notebook", "NotebookError", "neutralise_magics", "read_notebook"]

#: Cell magics whose body is Python: only their first line is neutralised; other cell magics (``%%bash``,
#: ``%%writefile``, ``%%html``, ...) hold no Python and the whole cell is neutralised.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy"})
#: What a neutralised line becomes (after its indentation): a statement and an expression that does nothing.
PLACEHOLDER = "..."

_CELL_MAGIC = re.compile(r"^\s*%%(?P<name>\w+)")
_ESCAPE = re.compile(r"^(?P<indent>[ \t]*)[%!?]")
_HELP = re.compile(r"^(?P<indent>[ \t]*)[\w.\[\]()]+\?\??[ \t]*$")
_ASSIGNED = re.compile(r"^(?P<target>[ \t]*[\w.\[\], ()*]+?[ \t]*=[ \t]*)[%!]")


class NotebookError(FerryError, ValueError):
    """A file is not a notebook ferry can read: not JSON, not nbformat 4, or malformed cells (also a ``ValueError``)."""


@dataclass(frozen=True)
class CodeCell:
    """One code cell of a notebook.

    Attributes:
        cell: The cell's 1-based number among every cell of the notebook.
        source: The cell's code as the notebook holds it.
        code: What is linted: ``source`` with IPython lines neutralised, ending with a newline when not empty.
        first_line: The 1-based line of the joined source where the cell starts.
        neutralised: The 1-based lines of the cell that were neutralised.
    """

    cell: int
    source: str
    code: str
    first_line: int
    neutralised: frozenset[int]

    @property
    def line_count(self) -> int:
        """How many lines of the joined source the cell takes."""
        return self.code.count("\n")


def neutralise_magics(source: str) -> tuple[str, frozenset[int]]:
    """Replace each line of IPython syntax in ``source`` (one cell) with ``...``, keeping every other line.

    A cell that parses as Python is returned unchanged: a ``%`` or ``!`` line inside a string stays. Lines ending
    with a backslash after an IPython line are part of it.

    Returns:
        The new source (same number of lines) and the 1-based numbers of the lines replaced.
    """
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    else:
        return source, frozenset()
    lines = source.splitlines(keepends=True)
    replaced: set[int] = set()
    cell_magic = _CELL_MAGIC.match(source)
    whole_cell = cell_magic is not None and cell_magic["name"] not in PYTHON_CELL_MAGICS
    continued = False
    for index, line in enumerate(lines):
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        new: str | None = None
        if whole_cell or continued:  # the body of %%bash etc. is not Python; nor are continuation lines
            new = ""
        elif cell_magic is not None and index == 0:
            new = PLACEHOLDER
        elif match := _ASSIGNED.match(body):
            new = match["target"] + PLACEHOLDER
        elif (match := _ESCAPE.match(body)) or (match := _HELP.match(body)):
            new = match["indent"] + PLACEHOLDER
        if new is None:
            continue
        continued = body.endswith("\\")
        lines[index] = new + ending
        replaced.add(index + 1)
    return "".join(lines), frozenset(replaced)


def _text(value: object, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        return "".join(value)
    raise NotebookError(f"{where}: the source is {type(value).__name__}, expected a string or a list of strings")


class Notebook:
    """A parsed notebook: its JSON, its code cells, and the joined source the linter parses.

    Args:
        data: The notebook's JSON object (nbformat 4).
        text: The file's text, to write it back in the same layout; ``None`` writes Jupyter's layout.

    Raises:
        NotebookError: ``data`` is not an nbformat 4 notebook.
    """

    def __init__(self, data: dict[str, Any], text: str | None = None) -> None:
        if not isinstance(data, dict):
            raise NotebookError(f"the file holds a JSON {type(data).__name__}, not a notebook object")
        if "cells" not in data:
            found = data.get("nbformat")
            version = f"nbformat {found}" if found is not None else "no 'cells' list"
            raise NotebookError(
                f"not an nbformat 4 notebook ({version}). Convert it with "
                "`jupyter nbconvert --to notebook --nbformat 4`"
            )
        cells = data["cells"]
        if not isinstance(cells, list):
            raise NotebookError(f"'cells' is a {type(cells).__name__}, expected a list")
        self.data = data
        self._text = text
        code_cells: list[CodeCell] = []
        line = 1
        for number, cell in enumerate(cells, start=1):
            if not isinstance(cell, dict):
                raise NotebookError(f"cell {number} is a {type(cell).__name__}, expected an object")
            if cell.get("cell_type") != "code":
                continue
            source = _text(cell.get("source", ""), f"cell {number}")
            code, neutralised = neutralise_magics(source)
            if code and not code.endswith(("\n", "\r")):
                code += "\n"
            code_cells.append(CodeCell(number, source, code, line, neutralised))
            line += code_cells[-1].line_count
        self.cells: tuple[CodeCell, ...] = tuple(code_cells)
        self.source = "".join(cell.code for cell in code_cells)
        self._starts = [cell.first_line for cell in code_cells]

    @property
    def is_python(self) -> bool:
        """Whether the notebook's kernel runs Python (``True`` when the metadata does not say)."""
        metadata = self.data.get("metadata")
        if not isinstance(metadata, dict):
            return True
        for key, field in (("language_info", "name"), ("kernelspec", "language")):
            info = metadata.get(key)
            if isinstance(info, dict) and isinstance(info.get(field), str):
                return str(info[field]).lower().startswith("python")
        return True

    def code_cell(self, line: int) -> CodeCell | None:
        """The code cell holding ``line`` of the joined source (past the end: the last cell)."""
        if not self.cells:
            return None
        return self.cells[max(bisect.bisect_right(self._starts, line) - 1, 0)]

    def position(self, line: int) -> tuple[int, int]:
        """``(cell, line in the cell)``, both 1-based, of ``line`` of the joined source."""
        found = self.code_cell(line)
        if found is None:
            return 1, line
        return found.cell, line - found.first_line + 1

    def with_sources(self, sources: Mapping[int, str]) -> Notebook:
        """A copy whose cells (by 1-based number) have new sources, kept as a list of lines or a string as before."""
        data = json.loads(json.dumps(self.data))
        for number, source in sources.items():
            cell = data["cells"][number - 1]
            cell["source"] = source.splitlines(keepends=True) if isinstance(cell.get("source"), list) else source
        return Notebook(data, self._text)

    def dumps(self) -> str:
        """The notebook as JSON text, in the layout it was read in (Jupyter's: indent 1, when it was made)."""
        text = self._text
        indent: int | None = 1
        ensure_ascii = False
        newline = "\n"
        if text is not None:
            match = re.match(r"\{\r?\n([ ]*)\S", text)
            indent = len(match[1]) if match else None
            ensure_ascii = text.isascii() and "\\u" in text
            newline = "\n" if text.endswith("\n") else ""
        return json.dumps(self.data, indent=indent, ensure_ascii=ensure_ascii) + newline


def read_notebook(text: str) -> Notebook:
    """Parse a notebook's JSON text.

    Raises:
        NotebookError: The text is not JSON, or not an nbformat 4 notebook.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise NotebookError(f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except (ValueError, RecursionError, MemoryError) as err:  # a huge integer, or nesting deeper than json follows
        why = "nested too deeply" if isinstance(err, RecursionError) else str(err) or type(err).__name__
        raise NotebookError(f"not valid JSON: {why}") from None
    return Notebook(data, text)
