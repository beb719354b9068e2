"""Run the rules over one source: parse, check, silence ``# noqa``, sort.

``lint_source`` is the whole pipeline for one file; the command line (``ferry lint``), the flake8 plugin and the
pre-commit hook all call it. A source that does not parse gives one ``FRY000`` (``syntax-error``) diagnostic
instead of an exception, so one bad file never stops a run.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterable, Sequence

from ferry.errors import ArgumentError
from ferry.lint.context import FileContext
from ferry.lint.model import Diagnostic, Finding, Rule
from ferry.lint.rules import RULES

__all__ = ["SYNTAX_ERROR", "lint_source", "select_rules"]

SYNTAX_ERROR = "FRY000"

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


def _matches(rule: Rule, pattern: str) -> bool:
    pattern = pattern.strip()
    if pattern == rule.name:
        return True
    upper = pattern.upper()
    if upper in ("ALL",):
        return True
    if not rule.code.startswith(upper) or not upper.startswith("FRY"):
        return False
    # a prefix shorter than "FRY9" selects the default rules only: noisy FRY9xx rules need to be named
    return rule.default or upper.startswith("FRY9")


def select_rules(select: Iterable[str] | None = None, ignore: Iterable[str] | None = None) -> list[Rule]:
    """The rules to run: those ``select`` names (default: every default rule), minus those ``ignore`` names.

    Args:
        select: Codes, code prefixes (``"FRY0"``, ``"FRY1"``) or rule names; ``"ALL"`` is every rule. The noisy
            ``FRY9xx`` rules run only when a pattern starting with ``FRY9`` (or their name, or ``ALL``) selects them.
        ignore: The same kinds of patterns, removed after selecting.

    Raises:
        ArgumentError: A pattern matches no rule (a typo would otherwise silently select nothing).
    """
    chosen = [r for r in RULES if r.default] if select is None else []
    for pattern in select or ():
        found = [r for r in RULES if _matches(r, pattern)] if pattern.strip() else []
        if not found and not (pattern.strip() and any(_is_code_prefix(r, pattern) for r in RULES)):
            raise _unknown(pattern)
        chosen.extend(r for r in found if r not in chosen)
    for pattern in ignore or ():
        if not pattern.strip() or not any(_is_code_prefix(r, pattern) or r.name == pattern.strip() for r in RULES):
            raise _unknown(pattern)
        chosen = [r for r in chosen if not (r.code.startswith(pattern.strip().upper()) or r.name == pattern.strip())]
    return sorted(chosen, key=lambda r: r.code)


def _is_code_prefix(rule: Rule, pattern: str) -> bool:
    """Whether ``pattern`` is ``FRY`` or longer and starts ``rule``'s code (``F`` and ``FR`` name no rule)."""
    upper = pattern.strip().upper()
    return upper.startswith("FRY") and rule.code.startswith(upper)


def _unknown(pattern: str) -> ArgumentError:
    codes = ", ".join(f"{r.code} ({r.name})" for r in RULES)
    return ArgumentError(
        f"no lint rule matches {pattern!r}. Use a code, a code prefix such as FRY0, a rule name, or ALL; "
        f"the rules are: {codes}."
    )


def _noqa_lines(source: str) -> dict[int, frozenset[str] | None]:
    """Line -> the codes its ``# noqa: ...`` comment allows (``None``: a bare ``# noqa`` allows everything).

    Only comments count (``"# noqa"`` in a string does not); when the source cannot be tokenized, each line is
    searched as text.
    """
    found: dict[int, frozenset[str] | None] = {}
    if "noqa" not in source.lower():
        return found
    try:
        comments = [
            (token.start[0], token.string)
            for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError, ValueError, RecursionError, MemoryError):
        comments = [(number, line) for number, line in enumerate(source.splitlines(), start=1) if "#" in line]
    for number, text in comments:
        match = _NOQA.search(text)
        if match:
            codes = match.group("codes")
            found[number] = None if codes is None else frozenset(re.split(r"[\s,]+", codes.upper()))
    return found


def _column(lines: list[str], line: int, byte_col: int) -> int:
    """1-based character column of a 0-based UTF-8 byte offset on ``line``."""
    if 1 <= line <= len(lines):
        text = lines[line - 1]
        if text.isascii():
            return byte_col + 1
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="replace")) + 1
    return byte_col + 1


def _diagnostic(rule: Rule, finding: Finding, path: str, lines: list[str]) -> Diagnostic:
    node = finding.node
    line = finding.line if finding.line is not None else getattr(node, "lineno", 1)
    col = finding.col if finding.col is not None else getattr(node, "col_offset", 0)
    end_line = getattr(node, "end_lineno", None) or line
    end_col = getattr(node, "end_col_offset", None)
    if end_col is None or finding.line is not None:
        end_line, end_col = line, col
    return Diagnostic(
        path=path,
        line=line,
        col=_column(lines, line, col),
        end_line=end_line,
        end_col=_column(lines, end_line, end_col),
        code=rule.code,
        name=rule.name,
        message=finding.message or rule.message,
        fix=finding.fix,
    )


def lint_source(
    source: str,
    path: str = "-",
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    rules: Sequence[Rule] | None = None,
) -> list[Diagnostic]:
    """Lint one Python source and return its diagnostics, sorted by position.

    Args:
        source: The code (text; decode files as UTF-8).
        path: Shown in diagnostics (``"-"``: standard input).
        select: See :func:`select_rules`; ignored when ``rules`` is given.
        ignore: See :func:`select_rules`; ignored when ``rules`` is given.
        rules: Run exactly these rules.

    Returns:
        One :class:`Diagnostic` per finding not silenced by ``# noqa``/``# noqa: FRY0xx`` on its line; a source
        that does not parse gives a single ``FRY000`` diagnostic at the error.

    Raises:
        ArgumentError: ``select`` or ``ignore`` names no rule.
    """
    chosen = list(rules) if rules is not None else select_rules(select, ignore)
    lines = source.splitlines()
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as err:  # ValueError: null bytes in the source
        line = getattr(err, "lineno", None) or 1
        col = (getattr(err, "offset", None) or 1) - 1
        message = getattr(err, "msg", None) or str(err)
        return [
            Diagnostic(path, line, col + 1, line, col + 1, SYNTAX_ERROR, "syntax-error", f"cannot parse: {message}")
        ]
    except (RecursionError, MemoryError):  # CPython's parser gives up on very deep nesting
        return [_not_checked(path, "cannot parse: the code is too complex (it nests too deeply for the parser)")]
    try:
        found = _run_rules(source, tree, path, chosen, lines)
    except RecursionError:
        return [_not_checked(path, TOO_DEEP)]
    found.sort(key=lambda d: (d.line, d.col, d.code))
    return found


#: The ``FRY000`` message of a file whose nesting the rules could not follow.
TOO_DEEP = "not checked: the code nests deeper than the linter follows"


def _not_checked(path: str, message: str) -> Diagnostic:
    return Diagnostic(path, 1, 1, 1, 1, SYNTAX_ERROR, "syntax-error", message)


def _run_rules(source: str, tree: ast.Module, path: str, chosen: Sequence[Rule], lines: list[str]) -> list[Diagnostic]:
    ctx = FileContext(source, tree, path)
    noqa = _noqa_lines(source)
    found: list[Diagnostic] = []
    for rule in chosen:
        for finding in rule.check(ctx):
            diagnostic = _diagnostic(rule, finding, path, lines)
            allowed = noqa.get(diagnostic.line, frozenset())
            if allowed is None or rule.code in allowed:
                continue
            found.append(diagnostic)
    return found
