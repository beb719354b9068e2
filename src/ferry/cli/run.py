"""``ferry run [--sanitize] [--on-error raise|warn|breakpoint] script.py [args...]``: run a script, maybe sanitized.

The script runs as ``__main__`` (:func:`runpy.run_path`) with ``sys.argv`` set to ``[script, *args]`` and its
folder first on ``sys.path``, as ``python script.py args`` would. Exit code: the script's own (``sys.exit``), 0 when
it ends normally, 1 when it raises (after printing the traceback of the user's code, without ferry's and runpy's
frames), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback
from collections.abc import Sequence
from contextlib import ExitStack

from ferry.sanitize import Sanitizer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ferry run", description="Run a Python script, under ferry's sanitizer.")
    parser.add_argument("--sanitize", action="store_true", help="check every torch operation for device bugs")
    parser.add_argument(
        "--on-error",
        choices=("raise", "warn", "breakpoint"),
        default=None,
        help="what a device mismatch does (default: $FERRY_ON_ERROR, else raise)",
    )
    parser.add_argument("--strict", action="store_true", help="treat the sanitizer's warnings as errors too")
    # --pretend DEVICE (run GPU code on a CPU with tensors that report that device) is added here: see
    # ferry.sanitize.pretend.
    parser.add_argument("script", help="the Python file to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script as sys.argv[1:]")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ferry run`` with ``argv`` (the arguments after ``run``) and return the exit code."""
    try:
        options = _parser().parse_args(list(sys.argv[2:] if argv is None else argv))
    except SystemExit as exit_:
        return 0 if exit_.code == 0 else 2
    script = os.path.abspath(options.script)
    if not os.path.isfile(script):
        print(f"ferry run: {options.script}: no such file. Give the path of a Python script.", file=sys.stderr)
        return 2
    on_error = options.on_error or os.environ.get("FERRY_ON_ERROR") or "raise"
    if on_error not in ("raise", "warn", "breakpoint"):
        print(f"ferry run: FERRY_ON_ERROR={on_error!r}: choose raise, warn or breakpoint.", file=sys.stderr)
        return 2
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [options.script, *options.args]
    sys.path.insert(0, os.path.dirname(script))
    try:
        with ExitStack() as stack:
            if options.sanitize:
                stack.enter_context(Sanitizer(on_error=on_error, strict=options.strict))  # type: ignore[arg-type]
            runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as exit_:
        return _exit_code(exit_.code)
    except Exception as error:
        _print_user_traceback(error)
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _print_user_traceback(error: BaseException) -> None:
    """Print ``error``'s traceback without ferry's and runpy's frames: the script's code and the libraries it called."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # src/ferry
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith((here, "<frozen runpy>")) and frame.filename != runpy.__file__
    ]
    print("Traceback (most recent call last):", file=sys.stderr)
    print("".join(traceback.format_list(frames)), end="", file=sys.stderr)
    print("".join(traceback.format_exception_only(type(error), error)), end="", file=sys.stderr)
