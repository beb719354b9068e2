"""Every case of ``../shared/cases/lint`` as a test of ``ferry lint``.

Each ``# expect: N:slug ... [static]`` or ``[both]`` line must be reported by the rule for that slug, and files
marked ``# expect: none`` must give no diagnostic at all. ``[runtime]`` expectations belong to ``ferry sanitize``.

The line numbers in the case files name the line of the code itself (001 expects 26 for ``steps.to(imgs.device)``
on line 26).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from _support import CASES
from ferry.lint import RULES, lint_source

LINT_CASES = CASES / "lint"
CASE_FILES = sorted(LINT_CASES.glob("*.py")) if LINT_CASES.is_dir() else []

#: The case files' bug classes and the rules that report them.
SLUG_RULES: dict[str, set[str]] = {
    "discarded-tensor-move": {"FRY001"},
    "hardcoded-cuda-device": {"FRY002"},
    "load-without-map-location": {"FRY003"},
    "whole-module-pickled": {"FRY004"},
    "device-less-tensor-in-forward": {"FRY005"},
    "input-on-other-device": {"FRY006", "FRY007"},  # 010 "model built but never moved" is module-never-moved
    "optimizer-state-before-move": {"FRY008"},
    "data-parallel-state-dict": {"FRY009"},
    "inference-in-train-mode": {"FRY010"},
    "loss-on-other-device": {"FRY011"},
    "numpy-of-device-tensor": {"FRY012"},
    "float64-on-mps": {"FRY013"},
    "host-sync-in-training-loop": {"FRY101"},
}

EXPECT = re.compile(r"^# expect: (?P<line>\d+):(?P<slug>[\w-]+) .*\[(?P<where>static|runtime|both)\]\s*$")
REGISTERED = {rule.code for rule in RULES}


def expectations(path: Path) -> list[tuple[int, str]]:
    found = []
    for line in path.read_text().splitlines():
        match = EXPECT.match(line)
        if match and match["where"] in ("static", "both"):
            found.append((int(match["line"]), match["slug"]))
    return found


def is_negative(path: Path) -> bool:
    return "# expect: none" in path.read_text().splitlines()[:8]


STATIC = [
    pytest.param(path, line, slug, id=f"{path.stem[:3]}:{line}:{slug}")
    for path in CASE_FILES
    for line, slug in expectations(path)
    if SLUG_RULES[slug] & REGISTERED
]
NEGATIVE = [pytest.param(path, id=path.stem) for path in CASE_FILES if is_negative(path)]


def test_the_cases_are_there() -> None:
    if not LINT_CASES.is_dir():
        pytest.skip(f"{LINT_CASES} not found: the shared cases lie beside the repo in CI and dev checkouts")
    assert len(CASE_FILES) >= 40
    assert NEGATIVE


@pytest.mark.parametrize(("path", "line", "slug"), STATIC)
def test_static_expectation_is_reported(path: Path, line: int, slug: str) -> None:
    found = lint_source(path.read_text(), str(path))
    at_line = {(d.line, d.code) for d in found}
    assert any((line, code) in at_line for code in SLUG_RULES[slug]), [str(d) for d in found]


@pytest.mark.parametrize("path", NEGATIVE)
def test_correct_look_alike_gives_nothing(path: Path) -> None:
    assert [] == [str(d) for d in lint_source(path.read_text(), str(path))]


def test_every_slug_of_the_cases_has_a_rule() -> None:
    slugs = {slug for path in CASE_FILES for _, slug in expectations(path)}
    assert slugs <= set(SLUG_RULES)
