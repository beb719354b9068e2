"""``ferry lint``'s configuration: the ``[tool.ferry.lint]`` table of ``pyproject.toml``, and command-line overrides.

```toml
[tool.ferry.lint]
select = ["FRY0", "FRY101"]       # codes, code prefixes, rule names or "ALL" (default: every default rule)
extend-select = ["FRY901"]        # added to select
ignore = ["FRY005"]               # removed from what is selected
exclude = ["notebooks/scratch/", "*_pb2.py"]  # globs in .gitignore syntax, relative to this file's folder
extend-exclude = ["legacy/**"]    # added to exclude
respect-gitignore = true          # skip what .gitignore files ignore (default true)

[tool.ferry.lint.per-file-ignores]
"tests/**" = ["FRY002"]           # glob (relative to this file's folder) -> codes not reported there
"__init__.py" = ["FRY"]
```

The file used is the nearest ``pyproject.toml`` that has a ``[tool.ferry.lint]`` table, in the folder of the
first path linted or above it (as ruff finds its ``[tool.ruff]``), or the one named with ``--config``. Options
on the command line replace the file's values (``--select`` also drops the file's ``extend-select``); the
``--extend-*`` options add to them.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ferry.errors import ArgumentError
from ferry.lint.engine import select_rules
from ferry.lint.files import PathFilter, glob_matches
from ferry.lint.model import Rule

__all__ = ["CONFIG_FILE", "LintConfig", "find_config", "load_config"]

CONFIG_FILE = "pyproject.toml"
_LIST_KEYS = ("select", "extend-select", "ignore", "exclude", "extend-exclude")
_KEYS = (*_LIST_KEYS, "per-file-ignores", "respect-gitignore")


@dataclass(frozen=True)
class LintConfig:
    """Which rules run on which files, and which files a walk leaves out.

    Attributes:
        select: Patterns of the rules to run (:func:`ferry.lint.select_rules`); ``None``: every default rule.
        extend_select: Patterns of rules added to ``select``.
        ignore: Patterns of rules not to run.
        exclude: Globs of files and folders walks leave out (``.gitignore`` syntax, relative to ``root``).
        per_file_ignores: ``(glob, patterns)`` pairs: rules not run on the files the glob matches.
        respect_gitignore: Whether walks skip what ``.gitignore`` files ignore.
        root: The folder globs are relative to: the configuration file's, else the current one.
        source: The ``pyproject.toml`` the values came from, or ``None``.
    """

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    respect_gitignore: bool = True
    root: Path = field(default_factory=Path.cwd)
    source: Path | None = None

    def override(
        self,
        *,
        select: Sequence[str] | None = None,
        extend_select: Sequence[str] = (),
        ignore: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        extend_exclude: Sequence[str] = (),
    ) -> LintConfig:
        """A copy with command-line values: given ``select``/``ignore``/``exclude`` replace, ``extend_*`` add."""
        config = self
        if select is not None:
            config = replace(config, select=tuple(select), extend_select=())
        if ignore is not None:
            config = replace(config, ignore=tuple(ignore))
        if exclude is not None:
            config = replace(config, exclude=tuple(exclude))
        return replace(
            config,
            extend_select=config.extend_select + tuple(extend_select),
            exclude=config.exclude + tuple(extend_exclude),
        )

    def rules(self) -> tuple[Rule, ...]:
        """The rules to run where no per-file ignore applies, by code.

        Raises:
            ArgumentError: A pattern matches no rule; the message names the configuration file.
        """
        try:
            chosen = set(select_rules(self.select))
            if self.extend_select:
                chosen.update(select_rules(self.extend_select))
            kept = set(select_rules(["ALL"], self.ignore))
            for _, patterns in self.per_file_ignores:
                select_rules(["ALL"], patterns)  # check the patterns now, not at the first file they match
        except ArgumentError as err:
            if self.source is None:
                raise
            raise ArgumentError(f"{self.source}: [tool.ferry.lint]: {err}") from None
        return tuple(sorted(chosen & kept, key=lambda rule: rule.code))

    def rules_for(self, path: str, rules: Sequence[Rule] | None = None) -> tuple[Rule, ...]:
        """The rules to run on ``path``: :meth:`rules` (or ``rules``) less the per-file ignores matching it."""
        chosen = tuple(self.rules() if rules is None else rules)
        for glob, patterns in self.per_file_ignores:
            if path != "-" and glob_matches([glob], path, self.root):
                kept = set(select_rules(["ALL"], patterns))
                chosen = tuple(rule for rule in chosen if rule in kept)
        return chosen

    def path_filter(self) -> PathFilter:
        """What walks leave out, for :func:`ferry.lint.files.discover`."""
        return PathFilter(self.exclude, self.root, self.respect_gitignore)


def _table(path: Path) -> dict[str, Any] | None:
    """The ``[tool.ferry.lint]`` table of ``path``, or ``None`` when it has none."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as err:
        raise ArgumentError(f"{path}: not valid TOML: {err}. Fix the file, or pass --config with another.") from None
    except UnicodeDecodeError as err:  # TOML is UTF-8 by definition
        raise ArgumentError(
            f"{path}: not valid TOML: byte {err.object[err.start]:#04x} at offset {err.start} is not UTF-8. "
            "Save the file as UTF-8, or pass --config with another."
        ) from None
    except OSError as err:
        raise ArgumentError(f"{path}: cannot read: {err.strerror or err}.") from err
    table = data.get("tool", {}).get("ferry", {}).get("lint")
    if table is not None and not isinstance(table, dict):
        raise ArgumentError(f"{path}: tool.ferry.lint must be a table, not {type(table).__name__}.")
    return table


def find_config(start: str | os.PathLike[str]) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.ferry.lint]`` table at or above ``start`` (a file or folder).

    Raises:
        ArgumentError: A ``pyproject.toml`` on the way is not valid (UTF-8) TOML.
    """
    folder = Path(os.path.abspath(start))
    if not folder.is_dir():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        path = candidate / CONFIG_FILE
        if path.is_file() and _table(path) is not None:
            return path
    return None


def _strings(table: dict[str, Any], key: str, path: Path) -> tuple[str, ...]:
    value = table[key]
    if isinstance(value, str):
        value = [value]
    if not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
        raise ArgumentError(f'{path}: [tool.ferry.lint] {key} must be a list of strings, e.g. {key} = ["FRY0"].')
    return tuple(value)


def load_config(path: str | os.PathLike[str]) -> LintConfig:
    """Read the ``[tool.ferry.lint]`` table of a ``pyproject.toml`` (an empty configuration when it has none).

    Raises:
        ArgumentError: The file cannot be read, is not valid TOML, or the table has an unknown key or a value of
            the wrong type. Rule patterns are checked by :meth:`LintConfig.rules`.
    """
    file = Path(path)
    table = _table(file) or {}
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ArgumentError(
            f"{file}: [tool.ferry.lint] has unknown key(s) {', '.join(unknown)}. The keys are: {', '.join(_KEYS)}."
        )
    values: dict[str, Any] = {"root": file.parent.absolute(), "source": file}
    for key in _LIST_KEYS:
        if key in table:
            values[key.replace("-", "_")] = _strings(table, key, file)
    if "extend_exclude" in values:
        values["exclude"] = values.get("exclude", ()) + values.pop("extend_exclude")
    if "respect-gitignore" in table:
        if not isinstance(table["respect-gitignore"], bool):
            raise ArgumentError(f"{file}: [tool.ferry.lint] respect-gitignore must be true or false.")
        values["respect_gitignore"] = table["respect-gitignore"]
    ignores = table.get("per-file-ignores", {})
    if not isinstance(ignores, dict):
        raise ArgumentError(
            f'{file}: [tool.ferry.lint] per-file-ignores must be a table of glob = [codes], e.g. "tests/**" = ["FRY0"].'
        )
    values["per_file_ignores"] = tuple((glob, _strings(ignores, glob, file)) for glob in ignores)
    return LintConfig(**values)
