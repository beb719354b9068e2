"""Applying the rules' safe fixes: edits spliced into the text, so formatting and comments stay as they were.

A :class:`~ferry.lint.model.Fix` is a set of edits that must all apply or none. :func:`apply_fixes` takes the fixes
in order of position, skips any fix with an edit that overlaps an edit already taken (the next round gets it),
and splices the edits in from the back of the text to the front, so earlier positions stay valid. :func:`fix_text`
repeats lint-and-apply until nothing more is fixable or :data:`MAX_ROUNDS` rounds have run; when a round's result
does not parse, its fixes are tried one by one and those that would break the code are skipped (and counted, see
:func:`fix_text_counting`). :func:`fix_notebook` does the same for notebooks, applying each fix inside the cell it
belongs to (a fix that spans cells, or touches a neutralised IPython line, is left alone), and :func:`fix_source`
picks the right one. :func:`write_source` writes a fixed file (atomically, through symbolic links, keeping its
mode and hard links); :func:`unified_diff` shows the change.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ferry._fs import atomic_file
from ferry.lint.engine import lint_source
from ferry.lint.files import SourceFile
from ferry.lint.model import Edit, Fix, Rule
from ferry.lint.notebook import Notebook

__all__ = [
    "MAX_ROUNDS",
    "apply_fixes",
    "fix_notebook",
    "fix_notebook_counting",
    "fix_source",
    "fix_text",
    "fix_text_counting",
    "unified_diff",
    "write_source",
]

#: How many lint-and-fix rounds a file gets at most (a fix can make another one possible).
MAX_ROUNDS = 10

_NEWLINE = re.compile(r"\r\n|\r|\n")


class _Offsets:
    """Turns ``ast`` positions (1-based line, 0-based UTF-8 byte column) into offsets in a string."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [match.end() for match in _NEWLINE.finditer(text)]

    def offset(self, position: tuple[int, int]) -> int | None:
        line, byte_col = position
        if not 1 <= line <= len(self.starts) or byte_col < 0:
            return None
        start = self.starts[line - 1]
        end = self.starts[line] if line < len(self.starts) else len(self.text)
        encoded = _NEWLINE.sub("", self.text[start:end]).encode("utf-8")
        if byte_col > len(encoded):
            return None
        return start + len(encoded[:byte_col].decode("utf-8", errors="ignore"))


def _overlaps(span: tuple[int, int], taken: Iterable[tuple[int, int]]) -> bool:
    start, end = span
    return any((start < other_end and other_start < end) or start == other_start for other_start, other_end in taken)


def apply_fixes(text: str, fixes: Iterable[Fix]) -> tuple[str, int]:
    """Apply each fix whose edits do not overlap an earlier fix's; return the new text and how many applied.

    Fixes are taken in order of their first edit's position. A fix with an edit outside ``text`` is skipped.
    """
    offsets = _Offsets(text)
    taken: list[tuple[int, int, str]] = []
    applied = 0
    for fix in sorted(fixes, key=lambda fix: min((edit.start for edit in fix.edits), default=(0, 0))):
        spans: list[tuple[int, int, str]] = []
        for edit in fix.edits:
            start, end = offsets.offset(edit.start), offsets.offset(edit.end)
            if start is None or end is None or end < start:
                break
            if _overlaps((start, end), [(s, e) for s, e, _ in (*taken, *spans)]):
                break
            spans.append((start, end, edit.text))
        else:
            if spans:
                taken.extend(spans)
                applied += 1
    for start, end, replacement in sorted(taken, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text, applied


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _fixes(text: str, path: str, rules: Sequence[Rule]) -> list[Fix]:
    return [d.fix for d in lint_source(text, path, rules=rules) if d.fix is not None]


def _apply_parsing(text: str, fixes: Sequence[Fix], parses: Callable[[str], bool]) -> tuple[str, int, int]:
    """Apply ``fixes`` to ``text``; if the result does not parse, apply them one by one, keeping those that parse.

    Returns:
        The new text, how many fixes it applied, and how many were skipped because they would break the code
        (a fix that overlaps a kept one is neither: the next round gets it).
    """
    new, applied = apply_fixes(text, fixes)
    if applied == 0 or parses(new):
        return new, applied, 0
    kept: list[Fix] = []
    skipped = 0
    for fix in sorted(fixes, key=lambda fix: min((edit.start for edit in fix.edits), default=(0, 0))):
        candidate, count = apply_fixes(text, [*kept, fix])
        if count <= len(kept):
            continue
        if parses(candidate):
            kept.append(fix)
        else:
            skipped += 1
    new, applied = apply_fixes(text, kept)
    return new, applied, skipped


def fix_text(text: str, path: str, rules: Sequence[Rule], *, max_rounds: int = MAX_ROUNDS) -> tuple[str, int]:
    """Apply the safe fixes of ``rules`` to a Python source, round after round; return it and the fixes applied.

    A fix whose result no longer parses is skipped: a fix never makes a file unparsable (see
    :func:`fix_text_counting` for how many were skipped).
    """
    text, fixed, _ = fix_text_counting(text, path, rules, max_rounds=max_rounds)
    return text, fixed


def fix_text_counting(
    text: str, path: str, rules: Sequence[Rule], *, max_rounds: int = MAX_ROUNDS
) -> tuple[str, int, int]:
    """:func:`fix_text`, also returning how many fixes were left out because they would break the code."""
    fixed = skipped = 0
    for _ in range(max_rounds):
        fixes = _fixes(text, path, rules)
        skipped = 0
        if not fixes:
            break
        new, applied, skipped = _apply_parsing(text, fixes, _parses)
        if applied == 0 or new == text:
            break
        text, fixed = new, fixed + applied
    return text, fixed, skipped


def _in_cell(notebook: Notebook, fix: Fix) -> tuple[int, Fix] | None:
    """``(cell, the fix in that cell's lines)``, or ``None`` when the fix spans cells or touches a magic line."""
    cells = set()
    edits = []
    for edit in fix.edits:
        cell = notebook.code_cell(edit.start[0])
        if cell is None or notebook.code_cell(edit.end[0]) is not cell:
            return None
        shift = cell.first_line - 1
        start, end = (edit.start[0] - shift, edit.start[1]), (edit.end[0] - shift, edit.end[1])
        if end[0] > cell.line_count or any(line in cell.neutralised for line in range(start[0], end[0] + 1)):
            return None
        cells.add(cell.cell)
        edits.append(Edit(start, end, edit.text))
    if len(cells) != 1:
        return None
    return cells.pop(), Fix(fix.title, tuple(edits))


def fix_notebook(
    notebook: Notebook, path: str, rules: Sequence[Rule], *, max_rounds: int = MAX_ROUNDS
) -> tuple[Notebook, int]:
    """:func:`fix_text` for a notebook: each fix is applied to the source of the cell it is in."""
    notebook, fixed, _ = fix_notebook_counting(notebook, path, rules, max_rounds=max_rounds)
    return notebook, fixed


def fix_notebook_counting(
    notebook: Notebook, path: str, rules: Sequence[Rule], *, max_rounds: int = MAX_ROUNDS
) -> tuple[Notebook, int, int]:
    """:func:`fix_notebook`, also returning how many fixes were left out because they would break the code."""
    fixed = skipped = 0
    for _ in range(max_rounds):
        by_cell: dict[int, list[Fix]] = {}
        for fix in _fixes(notebook.source, path, rules):
            found = _in_cell(notebook, fix)
            if found is not None:
                by_cell.setdefault(found[0], []).append(found[1])
        sources: dict[int, str] = {}
        applied = skipped = 0
        originals = {cell.cell: cell.source for cell in notebook.cells}
        for number, fixes in sorted(by_cell.items()):
            new, count, lost = _apply_parsing(originals[number], fixes, _cell_parses(notebook, sources, number))
            skipped += lost
            if new != originals[number]:
                sources[number], applied = new, applied + count
        if not sources:
            break
        notebook, fixed = notebook.with_sources(sources), fixed + applied
    return notebook, fixed, skipped


def _cell_parses(notebook: Notebook, sources: dict[int, str], number: int) -> Callable[[str], bool]:
    """Whether the notebook parses with cell ``number`` given a new source (and ``sources`` for other cells)."""

    def parses(cell_source: str) -> bool:
        return _parses(notebook.with_sources({**sources, number: cell_source}).source)

    return parses


def fix_source(source: SourceFile, rules: Sequence[Rule]) -> tuple[SourceFile, int, int]:
    """Fix a file's text or notebook.

    Returns:
        The file as fixed (the same object when nothing changed), how many fixes were applied, and how many were
        skipped because they would have made the code unparsable.
    """
    if source.notebook is not None:
        if not source.notebook.is_python:
            return source, 0, 0
        notebook, fixed, skipped = fix_notebook_counting(source.notebook, source.path, rules)
        if fixed == 0:
            return source, 0, skipped
        return SourceFile(source.path, notebook.dumps(), notebook.source, notebook, source.encoding), fixed, skipped
    text, fixed, skipped = fix_text_counting(source.text, source.path, rules)
    if fixed == 0:
        return source, 0, skipped
    return SourceFile(source.path, text, text, None, source.encoding), fixed, skipped


def write_source(source: SourceFile, path: str | Path | None = None) -> None:
    """Write a (fixed) file: through symbolic links, keeping its mode and its hard links.

    A symbolic link stays a link: the file it points to is written. The common case is atomic: a temporary file
    beside the target, given the target's mode, fsynced, then renamed over it. A file with more than one hard link
    is instead rewritten in place (the new content is fully encoded first, then written and truncated), since a
    rename would split it from its other names; that write is not atomic.

    Raises:
        OSError: The file system refused a step; with an atomic write, the file then holds what it held before.
    """
    target = os.path.realpath(path if path is not None else source.path)
    data = source.raw.encode(source.encoding)
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    if info is not None and info.st_nlink > 1:
        with open(target, "r+b") as handle:
            handle.write(data)
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())
        return
    with atomic_file(target) as handle:
        if info is not None:
            os.fchmod(handle.fileno(), stat.S_IMODE(info.st_mode))
        handle.write(data)


def _diff_lines(before: str, after: str, name: str) -> list[str]:
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    lines = []
    for line in difflib.unified_diff(old, new, fromfile=name, tofile=name):
        if not line.endswith(("\n", "\r")):
            line += "\n\\ No newline at end of file\n"
        lines.append(line)
    return lines


def unified_diff(before: SourceFile, after: SourceFile) -> str:
    """A unified diff from ``before`` to ``after``; for notebooks, one per changed cell (``path:cell N``)."""
    if before.notebook is None or after.notebook is None:
        return "".join(_diff_lines(before.raw, after.raw, before.path))
    old = {cell.cell: cell.source for cell in before.notebook.cells}
    parts = []
    for cell in after.notebook.cells:
        if old.get(cell.cell) != cell.source:
            parts.extend(_diff_lines(old.get(cell.cell, ""), cell.source, f"{before.path}:cell {cell.cell}"))
    return "".join(parts)
