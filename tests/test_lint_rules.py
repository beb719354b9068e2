"""The rule registry, and every rule's documented Example and Use-instead code as tests."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import ferry.lint.rules as rules_package
from ferry.lint import RULES, lint_source
from ferry.lint.rules import MODULES

RULE_FILES = sorted(p.stem for p in Path(rules_package.__file__).parent.glob("*.py") if not p.stem.startswith("_"))
SECTIONS = ("## What it does", "## Why is this bad", "## Example", "## Use instead")
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
MARK = re.compile(r"#\s*(FRY\d{3})\b")


def blocks(doc: str, section: str) -> list[str]:
    start = doc.index(section)
    end = min((doc.index(s, start + 1) for s in SECTIONS if s in doc[start + 1 :]), default=len(doc))
    return BLOCK.findall(doc[start:end])


def test_every_rule_file_is_registered() -> None:
    assert RULE_FILES == sorted(m.__name__.rsplit(".", 1)[-1] for m in MODULES)


def test_codes_and_names_are_unique_and_well_formed() -> None:
    codes = [r.code for r in RULES]
    names = [r.name for r in RULES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for rule in RULES:
        assert re.fullmatch(r"FRY\d{3}", rule.code)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", rule.name)


def test_rule_module_names_match_rule_names() -> None:
    for module in MODULES:
        assert module.RULE.name.replace("-", "_") == module.__name__.rsplit(".", 1)[-1]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_doc_has_every_section(rule) -> None:
    for section in SECTIONS:
        assert section in rule.doc, section
    assert rule.message
    assert rule.fix_title


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_example_triggers_exactly_the_marked_lines(rule) -> None:
    examples = blocks(rule.doc, "## Example")
    assert examples
    for code in examples:
        ast.parse(code)
        marked = {(n, m) for n, line in enumerate(code.splitlines(), 1) for m in MARK.findall(line)}
        assert marked, "the Example marks no line"
        found = {(d.line, d.code) for d in lint_source(code, rules=[rule])}
        assert marked == found


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_use_instead_is_clean(rule) -> None:
    for code in blocks(rule.doc, "## Use instead"):
        assert [] == [str(d) for d in lint_source(code, rules=[rule])]


FIXTURES = sorted((Path(__file__).parent / "lint").glob("FRY*.py"))


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
def test_fixture_markers(fixture: Path) -> None:
    """Corner cases: ``tests/lint/FRYxxx_<what>.py``; lines marked ``# FRYxxx`` are reported, nothing else is."""
    code = fixture.stem[:6]
    rule = next(r for r in RULES if r.code == code)
    source = fixture.read_text()
    marked = {n for n, line in enumerate(source.splitlines(), 1) if code in MARK.findall(line)}
    found = {d.line for d in lint_source(source, str(fixture), rules=[rule])}
    assert sorted(marked) == sorted(found)


def test_readme_rules_table_is_current() -> None:
    """README.md's table is generated from RULES: `python scripts/lint_rules_table.py --write` after adding a rule."""
    import importlib.util

    repo = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("lint_rules_table", repo / "scripts" / "lint_rules_table.py")
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    readme = (repo / "README.md").read_text()
    assert f"{script.START}\n{script.table()}{script.END}" in readme
