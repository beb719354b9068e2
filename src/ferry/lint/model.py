"""The data of the linter: rules, findings, fixes and diagnostics.

A rule (one file each under ``ferry/lint/rules/``) is a :class:`Rule` whose ``check`` function receives a
:class:`~ferry.lint.context.FileContext` and yields :class:`Finding` objects: the AST node (or an explicit position)
where the bad code is, an optional message that replaces the rule's default one, and an optional :class:`Fix`.
The engine turns findings into :class:`Diagnostic` objects (path, 1-based line, 1-based column, code, name,
message), drops those silenced by ``# noqa``, and sorts them by position.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ferry.lint.context import FileContext

__all__ = ["Diagnostic", "Edit", "Finding", "Fix", "Rule"]


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the source between two positions with ``text``.

    Positions are ``(line, column)`` as the ``ast`` module gives them: 1-based lines, 0-based columns counted in
    UTF-8 bytes (``ast``'s ``col_offset``), so an edit can be built straight from a node's ``lineno``/
    ``col_offset``/``end_lineno``/``end_col_offset``. ``start == end`` inserts.
    """

    start: tuple[int, int]
    end: tuple[int, int]
    text: str

    @classmethod
    def replace(cls, node: ast.AST, text: str) -> Edit:
        """An edit that replaces the source of ``node`` (which must have a position) with ``text``."""
        return cls(
            (node.lineno, node.col_offset),  # type: ignore[attr-defined]
            (node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
            text,
        )


@dataclass(frozen=True)
class Fix:
    """A set of non-overlapping edits that repairs one finding; ``title`` says what it does."""

    title: str
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Finding:
    """What a rule's ``check`` yields: where, optionally a more specific message, optionally a safe fix.

    ``node`` gives the position; ``line``/``col`` (1-based line, 0-based column in UTF-8 bytes) override it.
    """

    node: ast.AST | None = None
    message: str | None = None
    fix: Fix | None = None
    line: int | None = None
    col: int | None = None


@dataclass(frozen=True)
class Rule:
    """One lint rule.

    Attributes:
        code: ``FRY`` + three digits: ``FRY0xx`` correctness (on by default), ``FRY1xx`` performance (on by
            default), ``FRY9xx`` noisy (off unless selected).
        name: What is wrong, in kebab case (``discarded-tensor-move``), so ``# noqa: FRY001`` reads as "allow
            discarded-tensor-move".
        message: One line saying what is wrong; a finding may give a more specific one.
        fix_title: One line saying what to do instead.
        doc: Markdown with the sections *What it does*, *Why is this bad*, *Example*, *Use instead*; the Example
            and Use-instead code blocks are tests (lines of the Example marked ``# FRY0xx`` must be reported,
            nothing else, and Use instead must be clean).
        check: The function that finds it.
    """

    code: str
    name: str
    message: str
    fix_title: str
    doc: str
    check: Callable[[FileContext], Iterable[Finding]] = field(repr=False, compare=False)

    @property
    def default(self) -> bool:
        """Whether the rule runs without being selected: everything but ``FRY9xx``."""
        return not self.code.startswith("FRY9")


@dataclass(frozen=True)
class Diagnostic:
    """One reported problem.

    Attributes:
        path: The file as given (``"-"`` for standard input).
        line: 1-based line in the file, or in the notebook cell when ``cell`` is set.
        col: 1-based column, in characters.
        end_line: 1-based last line of the flagged code.
        end_col: 1-based column just past the flagged code.
        code: The rule's code, e.g. ``"FRY001"``.
        name: The rule's name, e.g. ``"discarded-tensor-move"``.
        message: What is wrong at this place.
        fix: A safe fix, if the rule has one here (positions in the linted source, see :class:`Edit`).
        cell: 1-based notebook cell (counting every cell), or ``None`` for ``.py`` files.
    """

    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    code: str
    name: str
    message: str
    fix: Fix | None = None
    cell: int | None = None

    def location(self) -> str:
        """``path:line:col`` (``path:cell N:line:col`` in a notebook), as compilers print it."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.col}"

    def __str__(self) -> str:
        return f"{self.location()}: {self.code} {self.message}"
