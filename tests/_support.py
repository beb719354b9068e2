"""Paths the tests share (importable from every test folder: pyproject's ``pythonpath`` lists ``tests``)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: ``../shared`` beside the checkout: real-world cases (``cases/lint``, ``cases/checkpoints``)
SHARED = REPO.parent / "shared"
CASES = SHARED / "cases"
#: scripts the tests run under torchrun
WORKERS = Path(__file__).resolve().parent / "_workers"
#: ``ferry lint`` fixture files with inline ``# FRY001`` markers
LINT_FIXTURES = Path(__file__).resolve().parent / "lint" / "fixtures"
