"""``ferry lint``: find PyTorch device bugs in Python files and notebooks, and fix the ones with a safe fix.

The library does the work (:mod:`ferry.lint.files`: finding and reading files; :mod:`ferry.lint.config`:
``[tool.ferry.lint]``; :mod:`ferry.lint.fix`: fixes; :mod:`ferry.lint.report`: output formats); this module
parses the command line, wires them together and picks the exit code.

Exit codes:
    0   no problems (with ``--fix``: none left; with ``--diff``: nothing to fix).
    1   problems found (files that do not parse or cannot be read count, as ``FRY000``); with ``--diff``: there
        are fixes to make, or a file could not be read or parsed (its ``FRY000`` goes to stderr).
    2   usage error (unknown option or rule, a path that does not exist, a bad ``[tool.ferry.lint]``), or an
        internal error (a rule crashed on a file: the other files are still linted and reported).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import traceback
from collections.abc import Sequence
from dataclasses import replace

from ferry.errors import ArgumentError
from ferry.lint.config import LintConfig, find_config, load_config
from ferry.lint.files import (
    FileResult,
    SourceFile,
    decode_source,
    discover,
    lint_file,
    read_source,
    source_from_text,
    unreadable,
)
from ferry.lint.model import Rule
from ferry.lint.notebook import NotebookError
from ferry.lint.rules import RULES

__all__ = ["main"]

FORMATS = ("text", "json", "sarif")


def _patterns(values: Sequence[str] | None) -> list[str] | None:
    """``--select A,B --select C`` -> ``["A", "B", "C"]``; ``None`` when the option was not given."""
    if values is None:
        return None
    # a stray comma is tolerated, but an option given nothing (``--select ''``) stays, for select_rules to reject
    return [part.strip() for value in values for part in value.split(",") if part.strip() or not value.strip()]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ferry lint",
        description="Find PyTorch device bugs: tensors moved without keeping the result, hard-coded CUDA devices, "
        "checkpoints loaded onto the device they were saved from, and more (see --explain). Lints .py files and "
        "Jupyter notebooks; folders are searched recursively, honouring .gitignore. Configure in "
        "[tool.ferry.lint] of pyproject.toml; silence one line with '# noqa: FRY001'. Exit codes: 0 clean, "
        "1 problems found, 2 usage or internal error.",
    )
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="files and folders to lint (default: .); '-' reads standard input"
    )
    rules = parser.add_argument_group("rules")
    rules.add_argument(
        "--select", action="append", metavar="CODES", help="run only these rules: codes, prefixes (FRY0), names or "
        "ALL, comma-separated; replaces the configuration's select",
    )  # fmt: skip
    rules.add_argument("--extend-select", action="append", metavar="CODES", help="run these rules too")
    rules.add_argument(
        "--ignore", action="append", metavar="CODES", help="do not run these rules; replaces the configuration's "
        "ignore",
    )  # fmt: skip
    rules.add_argument("--explain", metavar="RULE", help="print a rule's documentation (code or name) and exit")
    files = parser.add_argument_group("files")
    files.add_argument(
        "--exclude", action="append", metavar="GLOBS", help="leave out files and folders matching these "
        ".gitignore-style globs; replaces the configuration's exclude",
    )  # fmt: skip
    files.add_argument("--extend-exclude", action="append", metavar="GLOBS", help="leave these out too")
    files.add_argument(
        "--force-exclude", action="store_true", help="apply exclude to files named on the command line too (for "
        "pre-commit, which names every file)",
    )  # fmt: skip
    files.add_argument("--no-respect-gitignore", action="store_true", help="lint what .gitignore files ignore too")
    files.add_argument("--config", metavar="FILE", help="the pyproject.toml to read (default: the nearest one)")
    files.add_argument("--isolated", action="store_true", help="read no configuration file")
    files.add_argument(
        "--stdin-filename", metavar="NAME", help="the name to report standard input under (and match per-file "
        "ignores against; a name ending in .ipynb reads a notebook)",
    )  # fmt: skip
    fixing = parser.add_argument_group("fixes")
    fixing.add_argument(
        "--fix", action="store_true", help="apply safe fixes in place (with '-': print the fixed code to stdout)"
    )
    fixing.add_argument(
        "--diff", action="store_true", help="print a unified diff of the fixes instead of writing them; exit 1 "
        "when there are any",
    )  # fmt: skip
    output = parser.add_argument_group("output")
    output.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    output.add_argument("--json", action="store_true", help="the same as --format json")
    output.add_argument("--statistics", action="store_true", help="print how often each rule fired instead")
    output.add_argument("-o", "--output-file", metavar="FILE", help="write the report to FILE instead of stdout")
    output.add_argument("-q", "--quiet", action="store_true", help="print no summary line")
    return parser


class _UsageError(Exception):
    """A command-line mistake: the message goes to stderr and the exit code is 2."""


def _error(message: str) -> None:
    print(f"ferry lint: {message}", file=sys.stderr)


def _find_rule(spec: str) -> Rule | None:
    wanted = spec.strip()
    return next((rule for rule in RULES if wanted.upper() == rule.code or wanted == rule.name), None)


def _explain(spec: str, *, as_json: bool) -> int:
    rule = _find_rule(spec)
    if rule is None:
        codes = "\n".join(f"  {r.code}  {r.name}" for r in RULES)
        _error(f"no rule {spec!r}. Name one by code or name; the rules are:\n{codes}")
        return 2
    doc = rule.doc.strip()
    first, _, rest = doc.partition("\n")
    body = rest.strip() if first.startswith(rule.code) else doc
    if as_json:
        item = {"code": rule.code, "name": rule.name, "message": rule.message, "fix_title": rule.fix_title}
        print(json.dumps({**item, "default": rule.default, "doc": body}, indent=2))
    else:
        default = "on by default" if rule.default else "off unless selected"
        print(f"# {rule.code} {rule.name} ({default})\n\n{rule.message}.\n\nFix: {rule.fix_title}.\n\n{body}")
    return 0


def _config(args: argparse.Namespace) -> LintConfig:
    if args.isolated:
        config = LintConfig()
    elif args.config:
        if not os.path.isfile(args.config):
            raise _UsageError(f"--config {args.config}: no such file. Name a pyproject.toml.")
        config = load_config(args.config)
    else:
        first = next((path for path in args.paths if path != "-"), None)
        start = args.stdin_filename if first is None and args.stdin_filename else first or os.curdir
        found = find_config(start if os.path.exists(start) else os.curdir)
        config = load_config(found) if found is not None else LintConfig()
    config = config.override(
        select=_patterns(args.select),
        extend_select=_patterns(args.extend_select) or (),
        ignore=_patterns(args.ignore),
        exclude=_patterns(args.exclude),
        extend_exclude=_patterns(args.extend_exclude) or (),
    )
    if args.no_respect_gitignore:
        config = replace(config, respect_gitignore=False)
    return config


def _read(path: str, args: argparse.Namespace) -> SourceFile:
    if path == "-":
        name = args.stdin_filename or "-"
        if args.stdin_bytes is None:  # a text-only stdin (an embedding program's): already decoded
            return source_from_text(args.stdin_text, name, notebook=name.endswith(".ipynb"))
        return decode_source(args.stdin_bytes, name, notebook=name.endswith(".ipynb"))
    return read_source(path)


def _check(path: str, args: argparse.Namespace, config: LintConfig, rules: Sequence[Rule]) -> FileResult:
    """Lint one file, after fixing it with ``--fix``/``--diff``; an unreadable file gives a ``FRY000`` diagnostic.

    Raises:
        OSError: Writing the fixed file failed (it then holds what it held before).
    """
    from ferry.lint.fix import fix_source, write_source

    shown = (args.stdin_filename or path) if path == "-" else path
    try:
        source = _read(path, args)
    except (OSError, UnicodeDecodeError, SyntaxError, NotebookError) as err:
        return FileResult(shown, [unreadable(shown, err)])
    file_rules = config.rules_for(source.path, rules)
    if not (args.fix or args.diff):
        return FileResult(source.path, lint_file(source, file_rules), source)
    fixed, count, skipped = fix_source(source, file_rules)
    if count and args.fix and not args.diff and path != "-":  # standard input: the caller prints the fixed code
        write_source(fixed, path)
    return FileResult(source.path, lint_file(fixed, file_rules), fixed, count, source if count else None, skipped)


def _print_statistics(results: Sequence[FileResult], args: argparse.Namespace, out: list[str]) -> None:
    from ferry.lint.report import statistics

    stats = statistics(results)
    if args.format == "json":
        items = [{"code": s.code, "name": s.name, "count": s.count, "fixable": s.fixable} for s in stats]
        out.append(json.dumps(items, indent=2) + "\n")
        return
    if not stats:
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    table.add_column("Count", justify="right")
    table.add_column("Code")
    table.add_column("Name")
    table.add_column("Fixable", justify="right")
    for stat in stats:
        table.add_row(str(stat.count), stat.code, stat.name, str(stat.fixable) if stat.fixable else "")
    buffer = io.StringIO()
    Console(file=buffer, width=100, highlight=False, color_system=None).print(table)
    out.append(buffer.getvalue())


def _read_stdin(args: argparse.Namespace, wanted: bool) -> None:
    """Read standard input as bytes (decoded later like a file); ``stdin_text`` is its text for echoing back."""
    args.stdin_bytes, args.stdin_text = None, ""
    if not wanted:
        return
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:
        args.stdin_text = sys.stdin.read()
        return
    args.stdin_bytes = buffer.read()
    args.stdin_text = args.stdin_bytes.decode("utf-8", errors="surrogateescape")


def _run(args: argparse.Namespace) -> int:
    if args.json:
        args.format = "json"
    if args.statistics and args.format == "sarif":
        raise _UsageError("--statistics gives counts, which SARIF has no place for. Use --format text or json.")
    paths = args.paths or [os.curdir]
    if "-" in paths and len(paths) > 1:
        raise _UsageError("'-' (standard input) must be the only path.")
    config = _config(args)
    rules = config.rules()
    _read_stdin(args, paths == ["-"])
    try:
        files = discover(paths, keep=config.path_filter(), force_exclude=args.force_exclude)
    except FileNotFoundError as err:
        raise _UsageError(f"{err}. Check the path.") from None

    results: list[FileResult] = []
    crashed = False
    for path in files:
        try:
            results.append(_check(path, args, config, rules))
        except OSError as err:  # writing the fixed file: report it, go on with the others, exit 2
            crashed = True
            _error(f"cannot write the fixes to {path}: {err.strerror or err}. Check its permissions; it is unchanged.")
        except Exception:  # a rule's bug must not stop the run: report it, lint the rest, exit 2
            crashed = True
            _error(f"internal error while checking {path} (please report it):\n{traceback.format_exc()}")

    stdin_fix = args.fix and not args.diff and paths == ["-"]
    out: list[str] = []
    unparsed = [r for r in results if any(d.code == "FRY000" for d in r.diagnostics)]
    if args.diff:
        from ferry.lint.fix import unified_diff
        from ferry.lint.report import text_report

        out.extend(unified_diff(r.original, r.source) for r in results if r.original and r.source)
        if unparsed:  # a file that cannot be read or parsed has no fixes, but it is not fine: say so on stderr
            sys.stderr.write(
                text_report(
                    [replace(r, diagnostics=[d for d in r.diagnostics if d.code == "FRY000"]) for r in unparsed]
                )
            )
    elif args.statistics:
        _print_statistics(results, args, out)
    elif args.format == "json":
        from ferry.lint.report import json_report

        out.append(json_report(results))
    elif args.format == "sarif":
        from ferry.lint.report import sarif_report

        out.append(json.dumps(sarif_report(results), indent=2) + "\n")
    else:
        from ferry.lint.report import text_report

        out.append(text_report(results))
    _emit("".join(out), args, to_stderr=stdin_fix)
    if stdin_fix:  # the fixed code, or the code as it came when it could not be fixed (editors replace the buffer)
        fixed = results[0].source if results else None
        if fixed is not None and results[0].fixed:
            _write_code(fixed.raw.encode(fixed.encoding), fixed.raw)
        else:  # unchanged: give back exactly the bytes that came
            _write_code(args.stdin_bytes, args.stdin_text)
    if not args.quiet and (args.format == "text" or args.diff):
        from ferry.lint.report import summary

        print(summary(results, fixing=args.fix, diff=args.diff), file=sys.stderr)
    if crashed:
        return 2
    if args.diff:
        return 1 if unparsed or any(r.fixed for r in results) else 0
    return 1 if any(r.diagnostics for r in results) else 0


def _write_code(data: bytes | None, text: str) -> None:
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None or data is None:
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    buffer.write(data)
    buffer.flush()


def _emit(text: str, args: argparse.Namespace, *, to_stderr: bool) -> None:
    if args.output_file:
        from pathlib import Path

        from ferry._fs import atomic_file

        target = Path(args.output_file)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)  # `-o reports/lint.json` into a new folder, as ruff does
            with atomic_file(target) as handle:
                handle.write(text.encode("utf-8"))
        except FileExistsError as err:  # `-o taken/ferry.json` where `taken` is a file
            raise OSError(err.errno, "a folder on the path is a file; pass another path to -o", str(target)) from err
        except OSError as err:  # name the file asked for, not the temporary one beside it
            raise OSError(err.errno, err.strerror, str(target)) from err
    elif text:
        (sys.stderr if to_stderr else sys.stdout).write(text)


def _silence_stdout() -> None:
    """Point stdout at the null device, so flushing it at exit after a broken pipe raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a real file (captured in tests)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ferry lint [PATH ...] [options]``; return the exit code (0 clean, 1 problems, 2 usage/internal error).

    Prints ``path:line:col: FRY001 message`` per problem (``path:cell N:line:col`` in notebooks) and a summary
    line on stderr; ``--format json`` prints a list of objects, ``--format sarif`` a SARIF 2.1.0 log (see
    :mod:`ferry.lint.report`); ``--statistics`` prints counts per rule instead; ``--fix`` writes the safe fixes
    (atomically), ``--diff`` prints them as a unified diff; ``--explain RULE`` prints a rule's documentation.

    Args:
        argv: The arguments after ``ferry lint``; ``None`` reads ``sys.argv[1:]``.
    """
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a usage error (2): return the code instead of exiting
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        if args.explain is not None:
            code = _explain(args.explain, as_json=args.json or args.format == "json")
        else:
            code = _run(args)
        sys.stdout.flush()  # a closed pipe shows here, not as a traceback when Python exits
        return code
    except BrokenPipeError:  # `ferry lint ... | head`: the reader has what it wanted
        _silence_stdout()
        return 1
    except (_UsageError, ArgumentError) as err:
        _error(str(err))
        return 2
    except OSError as err:  # writing a fix or the output file
        where = f" {str(err.filename)!r}" if err.filename else ""
        _error(f"cannot write{where}: {err.strerror or err}. Check the path and its permissions.")
        return 2
