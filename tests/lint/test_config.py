"""[tool.ferry.lint] in pyproject.toml: finding it, reading it, command-line overrides, per-file ignores."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.errors import ArgumentError
from ferry.lint import RULES, select_rules
from ferry.lint.config import LintConfig, find_config, load_config

DEFAULT = tuple(select_rules())
ALL = tuple(RULES)


def codes(rules: tuple) -> list[str]:
    return [rule.code for rule in rules]


def write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pyproject.toml"
    path.write_text(text)
    return path


def test_find_config_takes_the_nearest_with_a_table(tmp_path: Path) -> None:
    outer = write(tmp_path, "[tool.ferry.lint]\nselect = ['FRY001']\n")
    write(tmp_path / "a", "[project]\nname = 'a'\n")  # no [tool.ferry.lint]: passed over
    inner = write(tmp_path / "a" / "b", "[tool.ferry.lint]\n")
    (tmp_path / "a" / "b" / "c").mkdir()
    (tmp_path / "a" / "x.py").write_text("")
    assert inner == find_config(tmp_path / "a" / "b" / "c")
    assert outer == find_config(tmp_path / "a" / "x.py")
    assert outer == find_config(tmp_path / "a")


def test_load_config(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[tool.ferry.lint]
select = ["FRY0"]
extend-select = ["discarded-tensor-move"]
ignore = "FRY001"
exclude = ["legacy/"]
extend-exclude = ["*_pb2.py"]
respect-gitignore = false

[tool.ferry.lint.per-file-ignores]
"tests/**" = ["FRY001"]
""",
    )
    config = load_config(path)
    expected = LintConfig(
        select=("FRY0",),
        extend_select=("discarded-tensor-move",),
        ignore=("FRY001",),
        exclude=("legacy/", "*_pb2.py"),
        per_file_ignores=(("tests/**", ("FRY001",)),),
        respect_gitignore=False,
        root=tmp_path,
        source=path,
    )
    assert expected == config
    assert "FRY001" not in codes(config.rules())


BAD = [
    ("[tool.ferry.lint\n", "not valid TOML"),
    ("[tool.ferry]\nlint = 3\n", "tool.ferry.lint must be a table"),
    ("[tool.ferry.lint]\nselct = ['FRY0']\n", "unknown key(s) selct"),
    ("[tool.ferry.lint]\nselect = [1]\n", "select must be a list of strings"),
    ("[tool.ferry.lint]\nrespect-gitignore = 'yes'\n", "respect-gitignore must be true or false"),
    ("[tool.ferry.lint]\nper-file-ignores = ['x']\n", "per-file-ignores must be a table"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_config_raises_argument_error_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ArgumentError) as caught:
        load_config(path) if "TOML" not in message else find_config(tmp_path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


@pytest.mark.parametrize("key", ["select", "ignore", "extend-select"])
def test_unknown_rule_in_config_names_the_file(tmp_path: Path, key: str) -> None:
    path = write(tmp_path, f"[tool.ferry.lint]\n{key} = ['FRY777']\n")
    with pytest.raises(ArgumentError, match=r"pyproject.toml: \[tool.ferry.lint\]: no lint rule matches 'FRY777'"):
        load_config(path).rules()


def test_unknown_rule_in_per_file_ignores_is_caught_up_front(tmp_path: Path) -> None:
    path = write(tmp_path, "[tool.ferry.lint.per-file-ignores]\n'x.py' = ['FRY777']\n")
    with pytest.raises(ArgumentError, match="FRY777"):
        load_config(path).rules()


# (config, command-line overrides, the rules that run)
OVERRIDES = [
    (LintConfig(), {}, codes(DEFAULT)),
    (LintConfig(select=("FRY001",)), {}, ["FRY001"]),
    (LintConfig(select=("FRY001",)), {"select": ["ALL"]}, codes(ALL)),
    (LintConfig(ignore=("FRY001",)), {"ignore": []}, codes(DEFAULT)),
    (LintConfig(select=("FRY001",), extend_select=("ALL",)), {"select": ["FRY001"]}, ["FRY001"]),
    (LintConfig(select=("FRY001",)), {"extend_select": ["ALL"]}, codes(ALL)),
    (LintConfig(), {"ignore": ["FRY"]}, []),
    (LintConfig(ignore=("discarded-tensor-move",)), {}, [c for c in codes(DEFAULT) if c != "FRY001"]),
]


@pytest.mark.parametrize(("config", "options", "expected"), OVERRIDES)
def test_command_line_overrides(config: LintConfig, options: dict, expected: list[str]) -> None:
    assert expected == codes(config.override(**options).rules())


def test_exclude_overrides_and_extends(tmp_path: Path) -> None:
    config = LintConfig(exclude=("a/",), root=tmp_path)
    assert ("b/",) == config.override(exclude=["b/"]).exclude
    assert ("a/", "c/") == config.override(extend_exclude=["c/"]).exclude
    assert config.path_filter().excluded(tmp_path / "a", is_dir=True)


def test_per_file_ignores_match_relative_to_the_config_folder(tmp_path: Path) -> None:
    config = LintConfig(
        per_file_ignores=(("tests/**", ("FRY001",)), ("__init__.py", ("FRY0",))),
        root=tmp_path,
        select=("FRY001",),
    )
    assert ["FRY001"] == codes(config.rules_for(str(tmp_path / "src" / "a.py")))
    assert [] == codes(config.rules_for(str(tmp_path / "tests" / "deep" / "a.py")))
    assert [] == codes(config.rules_for(str(tmp_path / "src" / "__init__.py")))
    assert ["FRY001"] == codes(config.rules_for(str(tmp_path / "src" / "tests" / "a.py")))
    assert ["FRY001"] == codes(config.rules_for("-"))


def test_non_utf8_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_bytes("[tool.ferry.lint]\n# caf\xe9\n".encode("latin-1"))
    with pytest.raises(ArgumentError, match=r"pyproject\.toml: not valid TOML: byte 0xe9 .* not UTF-8"):
        find_config(tmp_path)
    with pytest.raises(ArgumentError, match=r"pyproject\.toml"):
        load_config(path)


@pytest.mark.parametrize("pattern", ["F", "FR", "", "  ", "fr"])
def test_patterns_that_select_no_rule_are_rejected(pattern: str) -> None:
    with pytest.raises(ArgumentError, match="no lint rule matches"):
        select_rules([pattern])
    with pytest.raises(ArgumentError, match="no lint rule matches"):
        select_rules(None, [pattern])


def test_fry_prefix_still_selects() -> None:
    assert select_rules(["FRY"]) == [r for r in RULES if r.default]
