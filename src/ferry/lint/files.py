"""Finding, reading and linting files: what ``ferry lint PATH...`` does before it reports.

- :func:`discover` turns paths into the files to lint: files named explicitly are always linted; folders are
  walked for ``.py`` and ``.ipynb`` files, skipping :data:`SKIPPED_FOLDERS`, what ``.gitignore`` files ignore (read
  from every folder walked and from the folders above up to the repository root, plus ``.git/info/exclude``, with
  git's precedence: the deeper file wins, and nothing below an ignored folder comes back), and what the
  configuration's ``exclude`` globs match. A folder named explicitly is walked even when it is ignored or
  skipped (then only the ``.gitignore`` files inside it count).
- :func:`read_source` reads one file: a ``.py`` file in the encoding its coding cookie declares (UTF-8 by default),
  a ``.ipynb`` file as a notebook (:mod:`ferry.lint.notebook`).
- :func:`lint_file` lints it; diagnostics in notebooks carry their cell. A file that cannot be read or decoded
  gives one ``FRY000`` diagnostic (``unreadable-file``), as a file that does not parse does (``syntax-error``).
"""

from __future__ import annotations

import dataclasses
import io
import os
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ferry.lint.engine import SYNTAX_ERROR, lint_source
from ferry.lint.model import Diagnostic, Edit, Rule
from ferry.lint.notebook import Notebook, NotebookError, read_notebook

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

__all__ = [
    "SKIPPED_FOLDERS",
    "SUFFIXES",
    "FileResult",
    "PathFilter",
    "SourceFile",
    "decode_source",
    "discover",
    "glob_matches",
    "lint_file",
    "read_source",
    "source_from_text",
    "unreadable",
]

#: What a folder walk lints.
SUFFIXES = (".py", ".ipynb")
#: Folders a walk never enters (unless named on the command line): tools' caches, environments, build outputs.
SKIPPED_FOLDERS = frozenset(
    {
        ".bzr",
        ".direnv",
        ".eggs",
        ".git",
        ".hg",
        ".hypothesis",
        ".ipynb_checkpoints",
        ".mypy_cache",
        ".nox",
        ".pants.d",
        ".pytest_cache",
        ".pytype",
        ".ruff_cache",
        ".svn",
        ".tox",
        ".venv",
        "__pycache__",
        "__pypackages__",
        "_build",
        "buck-out",
        "build",
        "dist",
        "node_modules",
        "site-packages",
        "venv",
    }
)


def _spec(lines: Iterable[str]) -> GitIgnoreSpec:
    import pathspec  # lazily: only walks and exclude globs need it

    return pathspec.GitIgnoreSpec.from_lines(lines)


@lru_cache(maxsize=64)
def _globs(patterns: tuple[str, ...]) -> GitIgnoreSpec:
    return _spec(patterns)


def _ignore_file(path: str) -> GitIgnoreSpec | None:
    """The patterns of one ignore file, or ``None`` where there is none (or it cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return _spec(handle.read().splitlines())
    except OSError:
        return None


def _repository_root(folder: str) -> str | None:
    current = folder
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


@dataclass(frozen=True)
class PathFilter:
    """What a walk leaves out besides :data:`SKIPPED_FOLDERS`.

    Attributes:
        exclude: Globs in ``.gitignore`` syntax (``"notebooks/scratch/"``, ``"*_pb2.py"``, ``"legacy/**"``),
            matched against paths relative to ``root``.
        root: The folder ``exclude`` is relative to: the configuration file's, or the current one.
        respect_gitignore: Whether ``.gitignore`` files count.
    """

    exclude: Sequence[str] = ()
    root: Path = field(default_factory=Path.cwd)
    respect_gitignore: bool = True

    def excluded(self, path: str | os.PathLike[str], *, is_dir: bool = False) -> bool:
        """Whether ``path`` (a file, or a folder with ``is_dir``) matches an ``exclude`` glob."""
        if not self.exclude:
            return False
        return glob_matches(self.exclude, path, self.root, is_dir=is_dir)


def _relative(path: str | os.PathLike[str], root: Path) -> str:
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute, os.path.abspath(root))
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        relative = absolute.lstrip(os.sep)  # outside the root: match the whole path
    return relative.replace(os.sep, "/")


def glob_matches(patterns: Sequence[str], path: str | os.PathLike[str], root: Path, *, is_dir: bool = False) -> bool:
    """Whether ``path`` relative to ``root`` matches one of ``patterns`` (``.gitignore`` syntax)."""
    relative = _relative(path, root) + ("/" if is_dir else "")
    return _globs(tuple(patterns)).match_file(relative)


class _GitIgnore:
    """The ``.gitignore`` patterns that apply in one folder of a walk: ``(folder, patterns)``, deepest last."""

    def __init__(self, chain: list[tuple[str, GitIgnoreSpec]]) -> None:
        self.chain = chain

    @classmethod
    def above(cls, start: str) -> _GitIgnore:
        """The ignore files from the repository root (``.git/info/exclude`` first) down to folder ``start``.

        A ``start`` they ignore was named on the command line: then only its own ``.gitignore`` counts.
        """
        chain = cls._above(start)
        if chain.ignored(start, is_dir=True):
            spec = _ignore_file(os.path.join(start, ".gitignore"))
            return cls([] if spec is None else [(start, spec)])
        return chain

    @classmethod
    def _above(cls, start: str) -> _GitIgnore:
        root = _repository_root(start)
        files: list[tuple[str, str]] = []  # (folder the patterns are relative to, ignore file)
        if root is not None:
            files.append((root, os.path.join(root, ".git", "info", "exclude")))
            folders = [start]
            while folders[-1] != root:
                folders.append(os.path.dirname(folders[-1]))
            files.extend((folder, os.path.join(folder, ".gitignore")) for folder in reversed(folders))
        else:
            files.append((start, os.path.join(start, ".gitignore")))
        return cls([(folder, spec) for folder, file in files if (spec := _ignore_file(file)) is not None])

    def below(self, folder: str) -> _GitIgnore:
        """The patterns for a subfolder of the walk: these plus the subfolder's own ``.gitignore``."""
        spec = _ignore_file(os.path.join(folder, ".gitignore"))
        return self if spec is None else _GitIgnore([*self.chain, (folder, spec)])

    def ignored(self, path: str, *, is_dir: bool) -> bool:
        """Whether git ignores ``path``: the deepest ignore file with a pattern for it decides."""
        for folder, spec in reversed(self.chain):
            if folder == path:
                continue  # a folder's own .gitignore speaks of what is inside it
            relative = os.path.relpath(path, folder).replace(os.sep, "/") + ("/" if is_dir else "")
            result = spec.check_file(relative)
            if result.include is not None:
                return bool(result.include)
        return False


def _walk(top: str, display: str, keep: PathFilter) -> Iterator[str]:
    """The lintable files under folder ``top`` (absolute), as display paths under ``display``."""
    ignore = _GitIgnore.above(top) if keep.respect_gitignore else None

    def visit(folder: str, shown: str, ignore: _GitIgnore | None) -> Iterator[str]:
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            return
        for entry in entries:
            path = entry.path
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file()
            except OSError:
                continue
            if is_dir:
                if entry.name in SKIPPED_FOLDERS or keep.excluded(path, is_dir=True):
                    continue
                if ignore is not None and ignore.ignored(path, is_dir=True):
                    continue
                yield from visit(path, os.path.join(shown, entry.name), ignore and ignore.below(path))
            elif is_file and entry.name.endswith(SUFFIXES):
                if keep.excluded(path) or (ignore is not None and ignore.ignored(path, is_dir=False)):
                    continue
                yield os.path.normpath(os.path.join(shown, entry.name))

    yield from visit(top, display, ignore)


def discover(paths: Sequence[str], *, keep: PathFilter | None = None, force_exclude: bool = False) -> list[str]:
    """The files to lint under ``paths``, in order, each once, as display paths built from the paths given.

    Args:
        paths: Files and folders; ``"-"`` (standard input) passes through.
        keep: What to leave out of folder walks; default: ``.gitignore`` only.
        force_exclude: Apply ``keep.exclude`` to files named in ``paths`` too (for pre-commit, which names every
            file); ``.gitignore`` never drops a file named explicitly.

    Raises:
        FileNotFoundError: A path does not exist.
    """
    keep = keep or PathFilter()
    found: list[str] = []
    seen: set[str] = set()
    for path in paths:
        if path == "-":
            candidates: Iterable[str] = ["-"]
        elif os.path.isdir(path):
            candidates = _walk(os.path.abspath(path), path, keep)
        elif os.path.exists(path):
            candidates = [] if force_exclude and keep.excluded(path) else [os.path.normpath(path)]
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
        for candidate in candidates:
            key = candidate if candidate == "-" else os.path.abspath(candidate)
            if key not in seen:
                seen.add(key)
                found.append(candidate)
    return found


@dataclass(frozen=True)
class SourceFile:
    """One file to lint.

    Attributes:
        path: The path as shown (``"-"``, or ``--stdin-filename``, for standard input).
        raw: The file's text (a notebook's JSON).
        text: The Python source the engine parses (a notebook's code cells, joined).
        notebook: The parsed notebook, for ``.ipynb`` files.
        encoding: The encoding to write the file back in (a ``.py`` file's coding cookie; ``utf-8-sig`` keeps a
            byte-order mark).
    """

    path: str
    raw: str
    text: str
    notebook: Notebook | None = None
    encoding: str = "utf-8"

    def to_cell(self, line: int) -> tuple[int | None, int]:
        """``(cell, line)`` of ``line`` of :attr:`text`: the cell is ``None`` outside notebooks."""
        if self.notebook is None:
            return None, line
        return self.notebook.position(line)

    def edit_position(self, edit: Edit) -> dict[str, int | None]:
        """An edit's positions as diagnostics give them: cell, 1-based lines, 1-based character columns."""
        cell, line = self.to_cell(edit.start[0])
        _, end_line = self.to_cell(edit.end[0])
        return {
            "cell": cell,
            "line": line,
            "col": _char_column(self.text, edit.start),
            "end_line": end_line,
            "end_col": _char_column(self.text, edit.end),
        }


def _char_column(text: str, position: tuple[int, int]) -> int:
    line, byte_col = position
    lines = text.splitlines()
    if 1 <= line <= len(lines):
        return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="replace")) + 1
    return byte_col + 1


def source_from_text(raw: str, path: str, *, notebook: bool | None = None, encoding: str = "utf-8") -> SourceFile:
    """A :class:`SourceFile` from text already read; ``notebook`` defaults to whether ``path`` ends in ``.ipynb``.

    Raises:
        NotebookError: ``notebook`` and ``raw`` is not an nbformat 4 notebook.
    """
    if notebook is None:
        notebook = path.endswith(".ipynb")
    if notebook:
        parsed = read_notebook(raw)
        return SourceFile(path, raw, parsed.source if parsed.is_python else "", parsed, encoding)
    return SourceFile(path, raw, raw, None, encoding)


def read_source(path: str) -> SourceFile:
    """Read one file to lint; a ``.py`` (or any other) file as Python, a ``.ipynb`` file as a notebook.

    Raises:
        OSError: The file cannot be read.
        UnicodeDecodeError: It is not in the encoding it declares (UTF-8 by default).
        SyntaxError: Its coding cookie names an unknown encoding.
        NotebookError: A ``.ipynb`` file that is not an nbformat 4 notebook.
    """
    with open(path, "rb") as handle:
        data = handle.read()
    return decode_source(data, path)


def decode_source(data: bytes, path: str, *, notebook: bool | None = None) -> SourceFile:
    """A :class:`SourceFile` from a file's bytes, decoded as :func:`read_source` does (standard input uses it).

    A notebook (``notebook``, by default whether ``path`` ends in ``.ipynb``) is UTF-8; Python source is in the
    encoding its BOM or coding cookie declares, else UTF-8.

    Raises:
        UnicodeDecodeError: The bytes are not in that encoding.
        SyntaxError: The coding cookie names an unknown encoding.
        NotebookError: A notebook that is not nbformat 4.
    """
    if notebook if notebook is not None else path.endswith(".ipynb"):
        return source_from_text(data.decode("utf-8-sig"), path, notebook=True)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as err:
        if not str(err).startswith("invalid or missing encoding declaration"):
            raise  # an unknown encoding in the cookie, or a cookie that contradicts the BOM
        encoding = "utf-8"  # not UTF-8 in the first two lines: decoding says where
    return source_from_text(data.decode(encoding), path, notebook=False, encoding=encoding)


def unreadable(path: str, err: BaseException) -> Diagnostic:
    """The ``FRY000`` diagnostic for a file that cannot be read, decoded or opened as a notebook."""
    if isinstance(err, UnicodeDecodeError):
        why = f"cannot decode as {err.encoding}: byte {err.object[err.start]:#04x} at offset {err.start}"
        why += ". Save it as UTF-8, or declare its encoding with a `# -*- coding: ... -*-` line"
    elif isinstance(err, NotebookError):
        why = f"not a notebook ferry can read: {err}"
    elif isinstance(err, OSError):
        why = f"cannot read: {err.strerror or err}"
    else:
        why = f"cannot read: {err}"
    return Diagnostic(path, 1, 1, 1, 1, SYNTAX_ERROR, "unreadable-file", why)


def lint_file(source: SourceFile, rules: Sequence[Rule]) -> list[Diagnostic]:
    """Lint one file with ``rules``; in a notebook, diagnostics give their cell and the line in it.

    Returns:
        The diagnostics sorted by position; a notebook whose kernel is not Python gives none.
    """
    found = lint_source(source.text, source.path, rules=rules)
    if source.notebook is None:
        return found
    if any(d.code == SYNTAX_ERROR and d.name == "syntax-error" for d in found):
        found = _lint_around_broken_cells(source.notebook, source.path, rules)
    mapped = []
    for diagnostic in found:
        cell, line = source.to_cell(diagnostic.line)
        end_cell, end_line = source.to_cell(diagnostic.end_line)
        if end_cell != cell:  # ends in a later cell: stop at the line it starts on
            end_line, end_col = line, diagnostic.col
        else:
            end_col = diagnostic.end_col
        mapped.append(dataclasses.replace(diagnostic, cell=cell, line=line, end_line=end_line, end_col=end_col))
    return mapped


def _lint_around_broken_cells(notebook: Notebook, path: str, rules: Sequence[Rule]) -> list[Diagnostic]:
    """Lint a notebook some of whose cells do not parse.

    Each such cell gives its own ``FRY000`` and is blanked out (same number of lines), so the other cells are still
    checked, as Jupyter runs them one by one.
    """
    parts: list[str] = []
    broken: list[Diagnostic] = []
    for cell in notebook.cells:
        errors = lint_source(cell.code, path, rules=())
        if errors:
            shift = cell.first_line - 1
            broken.extend(dataclasses.replace(d, line=d.line + shift, end_line=d.end_line + shift) for d in errors)
            parts.append("\n" * cell.line_count)
        else:
            parts.append(cell.code)
    found = lint_source("".join(parts), path, rules=rules) + broken
    return sorted(found, key=lambda d: (d.line, d.col, d.code))


@dataclass
class FileResult:
    """What linting (and fixing) one file gave.

    Attributes:
        path: The file as shown.
        diagnostics: What is left to report, sorted (after fixing, what the fixes did not repair).
        source: The file as read (after fixing: as fixed); ``None`` when it could not be read.
        fixed: How many fixes were applied (or, with ``--diff``, would be).
        original: The file's text before fixing, when fixes changed it.
        skipped: How many fixes were left out because they would have made the file unparsable.
    """

    path: str
    diagnostics: list[Diagnostic]
    source: SourceFile | None = None
    fixed: int = 0
    original: SourceFile | None = None
    skipped: int = 0
