"""``ferry lint``'s output formats: text lines, JSON, SARIF 2.1.0 (GitHub code scanning), statistics.

- Text: ``path:line:col: FRY001 message``, one per line (``path:cell N:line:col`` in notebooks), as compilers and
  ruff print them, so editors jump to the place.
- JSON (:func:`json_report`): a list of objects ``{path, cell, line, col, end_line, end_col, code, name, message,
  fix}``; ``cell`` is ``null`` outside notebooks; ``fix`` is ``null`` or ``{title, edits: [{cell, line, col,
  end_line, end_col, text}]}`` with positions counted as the diagnostic's (1-based lines, 1-based character
  columns, lines in the cell for notebooks).
- SARIF (:func:`sarif_report`): one run whose driver lists every rule with its documentation; each result points
  at the file (a URI relative to the current folder, under ``%SRCROOT%``) and region. For notebooks the region's
  lines are those of the cell, named in the message and in ``properties.cell``.
- Statistics (:func:`statistics`): how many diagnostics each code has, and how many are fixable.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ferry._version import __version__
from ferry.lint.engine import SYNTAX_ERROR
from ferry.lint.files import FileResult
from ferry.lint.model import Diagnostic, Rule
from ferry.lint.rules import RULES

__all__ = [
    "INFORMATION_URI",
    "SARIF_SCHEMA",
    "Statistic",
    "diagnostic_json",
    "json_report",
    "level",
    "sarif_report",
    "statistics",
    "summary",
    "text_report",
]

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
#: Where people learn about the tool (SARIF's ``informationUri``).
INFORMATION_URI = "https://pypi.org/project/ferry/"

_FILE_PROBLEM_DOC = """## What it does
Reports a file ferry lint could not check: it does not parse (a syntax error), cannot be read, is not in the
encoding it declares, or is a notebook that is not nbformat 4 JSON.

## Why is this bad
Nothing in the file was checked, so the bugs ferry looks for may be there unseen.

## Example
```python
def f(:
```

## Use instead
Fix the syntax error (run the file with Python to see it), save the file as UTF-8, or convert the notebook with
`jupyter nbconvert --to notebook --nbformat 4`.
"""


def level(code: str) -> str:
    """SARIF level of a code: ``error`` for correctness (``FRY0xx``), ``warning`` for performance, else ``note``."""
    if code.startswith("FRY0"):
        return "error"
    if code.startswith("FRY1"):
        return "warning"
    return "note"


def _position(result: FileResult, diagnostic: Diagnostic) -> dict[str, Any]:
    return {
        "path": diagnostic.path,
        "cell": diagnostic.cell,
        "line": diagnostic.line,
        "col": diagnostic.col,
        "end_line": diagnostic.end_line,
        "end_col": diagnostic.end_col,
    }


def diagnostic_json(result: FileResult, diagnostic: Diagnostic) -> dict[str, Any]:
    """One diagnostic as :func:`json_report` gives it (fix edits converted with the file ``result`` holds)."""
    fix = None
    if diagnostic.fix is not None:
        edits = []
        for edit in diagnostic.fix.edits:
            if result.source is not None:
                where: dict[str, Any] = result.source.edit_position(edit)
            else:
                where = {"cell": None, "line": edit.start[0], "col": edit.start[1] + 1}
                where |= {"end_line": edit.end[0], "end_col": edit.end[1] + 1}
            edits.append({**where, "text": edit.text})
        fix = {"title": diagnostic.fix.title, "edits": edits}
    return {
        **_position(result, diagnostic),
        "code": diagnostic.code,
        "name": diagnostic.name,
        "message": diagnostic.message,
        "fix": fix,
    }


def text_report(results: Iterable[FileResult]) -> str:
    """Every diagnostic as ``path:line:col: CODE message``, one per line."""
    return "".join(f"{diagnostic}\n" for result in results for diagnostic in result.diagnostics)


def json_report(results: Iterable[FileResult]) -> str:
    """Every diagnostic as a JSON list of objects (see the module docstring), indented for people."""
    items = [diagnostic_json(result, diagnostic) for result in results for diagnostic in result.diagnostics]
    return json.dumps(items, indent=2, ensure_ascii=False) + "\n"


def _uri(path: str, base: Path) -> str:
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(os.path.abspath(base))
    except ValueError:
        return absolute.as_uri()
    return quote(relative.as_posix())


def _artifact(path: str, base: Path) -> dict[str, str]:
    """An artifactLocation: relative to ``%SRCROOT%`` when under ``base``, else an absolute ``file:`` URI alone."""
    uri = _uri(path, base)
    return {"uri": uri} if uri.startswith("file:") else {"uri": uri, "uriBaseId": "%SRCROOT%"}


def _descriptor(code: str, name: str, message: str, help_text: str, doc: str) -> dict[str, Any]:
    return {
        "id": code,
        "name": name,
        "shortDescription": {"text": message},
        "fullDescription": {"text": doc, "markdown": doc},
        "help": {"text": help_text, "markdown": f"{help_text}\n\n{doc}"},
        "helpUri": INFORMATION_URI,
        "defaultConfiguration": {"level": level(code)},
    }


def _doc(rule: Rule) -> str:
    doc = rule.doc.strip()
    first, _, rest = doc.partition("\n")
    return rest.strip() if first.startswith(rule.code) else doc


def sarif_report(results: Sequence[FileResult], *, base: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """A SARIF 2.1.0 log of every diagnostic, for GitHub code scanning (``upload-sarif``).

    Args:
        results: The files linted.
        base: The folder artifact URIs are relative to (``%SRCROOT%``); default: the current folder. Run
            ``ferry lint`` from the repository root so that GitHub finds the files.
    """
    root = Path(os.path.abspath(base if base is not None else os.getcwd()))
    descriptors = [
        _descriptor(SYNTAX_ERROR, "file-not-checked", "the file could not be checked", "Fix the file.",
                    _FILE_PROBLEM_DOC)
    ]  # fmt: skip
    descriptors.extend(_descriptor(r.code, r.name, r.message, r.fix_title, _doc(r)) for r in RULES)
    index = {descriptor["id"]: number for number, descriptor in enumerate(descriptors)}
    sarif_results = []
    for result in results:
        for diagnostic in result.diagnostics:
            message = diagnostic.message if diagnostic.cell is None else f"cell {diagnostic.cell}: {diagnostic.message}"
            region = {
                "startLine": diagnostic.line,
                "startColumn": diagnostic.col,
                "endLine": max(diagnostic.end_line, diagnostic.line),
                "endColumn": max(diagnostic.end_col, 1),
            }
            item: dict[str, Any] = {
                "ruleId": diagnostic.code,
                "ruleIndex": index.get(diagnostic.code, 0),
                "level": level(diagnostic.code),
                "message": {"text": message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": _artifact(diagnostic.path, root),
                            "region": region,
                        }
                    }
                ],
            }
            if diagnostic.cell is not None:
                item["properties"] = {"cell": diagnostic.cell}
            sarif_results.append(item)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ferry",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": descriptors,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "results": sarif_results,
            }
        ],
    }


@dataclass(frozen=True)
class Statistic:
    """How often one code was reported.

    Attributes:
        code: The rule's code.
        name: The rule's name.
        count: How many diagnostics.
        fixable: How many of them have a safe fix.
    """

    code: str
    name: str
    count: int
    fixable: int


def statistics(results: Iterable[FileResult]) -> list[Statistic]:
    """Counts per code, most frequent first (then by code)."""
    counts: Counter[tuple[str, str]] = Counter()
    fixable: Counter[str] = Counter()
    for result in results:
        for diagnostic in result.diagnostics:
            counts[diagnostic.code, diagnostic.name] += 1
            fixable[diagnostic.code] += diagnostic.fix is not None
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [Statistic(code, name, count, fixable[code]) for (code, name), count in ordered]


def _problems(count: int) -> str:
    return f"{count} problem{'' if count == 1 else 's'}"


def summary(results: Sequence[FileResult], *, fixing: bool = False, diff: bool = False) -> str:
    """The closing line: ``Found N problems (M fixable with --fix).`` and its variants for ``--fix`` and ``--diff``.

    With ``--fix``/``--diff``, fixes left out because they would have broken the code are counted after it.
    """
    line = _summary(results, fixing=fixing, diff=diff)
    skipped = sum(result.skipped for result in results) if fixing or diff else 0
    if skipped:
        fixes = f"{skipped} fix{'' if skipped == 1 else 'es'}"
        line += f" {fixes} skipped: applying {'it' if skipped == 1 else 'them'} would break the code."
    return line


def _summary(results: Sequence[FileResult], *, fixing: bool, diff: bool) -> str:
    remaining = sum(len(result.diagnostics) for result in results)
    fixed = sum(result.fixed for result in results)
    files = f"{len(results)} file{'' if len(results) == 1 else 's'}"
    if diff:
        changed = sum(1 for result in results if result.fixed)
        if not fixed:
            return f"No fixes to make in {files}."
        return f"Would fix {_problems(fixed)} in {changed} file{'' if changed == 1 else 's'}."
    if fixing:
        if not remaining and not fixed:
            return f"No problems found in {files}."
        return f"Found {_problems(remaining + fixed)} ({fixed} fixed, {remaining} remaining)."
    if not remaining:
        return f"No problems found in {files}."
    fixable = sum(1 for result in results for diagnostic in result.diagnostics if diagnostic.fix is not None)
    return f"Found {_problems(remaining)} ({fixable} fixable with --fix)."
