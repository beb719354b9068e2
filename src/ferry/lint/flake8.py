"""ferry lint as a flake8 plugin: ``flake8 --select FRY`` reports ferry's rules beside flake8's own.

Registered in ``pyproject.toml`` as ``[project.entry-points."flake8.extension"] FRY = "ferry.lint.flake8:Plugin"``.
flake8 selects and ignores codes itself (``--select``, ``--extend-select``, ``--ignore``, ``# noqa``); the plugin
runs every default rule, and the noisy ``FRY9xx`` rules too when flake8's selection names a ``FRY9`` prefix.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator, Sequence
from typing import Any

from ferry.lint.engine import lint_source
from ferry.lint.model import Rule
from ferry.lint.rules import RULES

__all__ = ["Plugin"]


class Plugin:
    """The flake8 checker: flake8 passes the parsed ``tree``, the file's ``lines`` and its ``filename``.

    Args:
        tree: The module's AST (flake8 runs the plugin only on files that parse).
        lines: The file's lines, with their line endings.
        filename: The file's path as flake8 shows it.
    """

    name = "ferry"
    _rules: tuple[Rule, ...] = tuple(rule for rule in RULES if rule.default)

    def __init__(self, tree: ast.AST, lines: Sequence[str], filename: str = "-") -> None:
        self.tree = tree
        self.lines = lines
        self.filename = filename

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        """Take the noisy ``FRY9xx`` rules in when flake8's ``--select``/``--extend-select`` names them."""
        patterns: list[str] = []
        for attribute in ("select", "extend_select"):
            value: Any = getattr(options, attribute, None) or []
            patterns.extend(str(item).strip().upper() for item in value)
        noisy = tuple(
            rule
            for rule in RULES
            if not rule.default and any(p.startswith("FRY9") and rule.code.startswith(p) for p in patterns)
        )
        cls._rules = tuple(rule for rule in RULES if rule.default) + noisy

    def run(self) -> Iterator[tuple[int, int, str, type[Plugin]]]:
        """Yield ``(line, column from 0, "FRY001 message", Plugin)`` for each diagnostic, as flake8 expects."""
        try:
            found = lint_source("".join(self.lines), self.filename, rules=self._rules)
        except Exception as err:
            yield 1, 0, f"FRY000 not checked: ferry lint failed on this file ({type(err).__name__}: {err})", type(self)
            return
        for diagnostic in found:
            yield diagnostic.line, diagnostic.col - 1, f"{diagnostic.code} {diagnostic.message}", type(self)
