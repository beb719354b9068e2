"""``ferry lint``: a static checker for PyTorch device bugs.

Public entry points: :func:`lint_source` (one source), :data:`RULES` (every rule, by code), and the command line
``ferry lint`` (:mod:`ferry.cli.lint`). See ``README.md`` in this folder for how the engine is built.
"""

from __future__ import annotations

from ferry.lint.engine import lint_source, select_rules
from ferry.lint.model import Diagnostic, Edit, Finding, Fix, Rule
from ferry.lint.rules import RULES

__all__ = ["RULES", "Diagnostic", "Edit", "Finding", "Fix", "Rule", "lint_source", "select_rules"]
