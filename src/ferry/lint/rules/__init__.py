"""The registry of lint rules: one module per rule, each defining ``RULE``; ``RULES`` lists them by code."""

from __future__ import annotations

from ferry.lint.model import Rule
from ferry.lint.rules import (
    discarded_tensor_move,
)

__all__ = ["MODULES", "RULES"]

#: Every rule module, in code order; a test checks that each file of this folder is listed.
MODULES = (discarded_tensor_move,)

RULES: tuple[Rule, ...] = tuple(sorted((m.RULE for m in MODULES), key=lambda rule: rule.code))
