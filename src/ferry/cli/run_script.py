"""``ferry run [--sanitize] [--pretend cuda] script.py [args...]``: run a script, maybe sanitized or on pretend GPUs.

Options: ``--on-error raise|warn|breakpoint`` and ``--strict`` (with ``--sanitize``), ``--device-count N`` (with
``--pretend``).

``--pretend cuda`` runs the script on this machine's CPU as if it had ``N`` CUDA GPUs (default 1; see
:mod:`ferry.sanitizer.pretend`): ``.cuda()`` and ``device="cuda"`` work and PyTorch's own device errors are raised as
on a GPU. It does not imply ``--sanitize``: alone it only pretends; with ``--sanitize`` every sanitizer check runs
against the pretend GPUs, so a device bug in GPU code is reported at its line on a CPU-only machine.

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

from ferry.errors import FerryError, FerryWarning
from ferry.sanitizer import Sanitizer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ferry run", description="Run a Python script, under ferry's sanitizer and/or on pretend CUDA GPUs."
    )
    parser.add_argument("--sanitize", action="store_true", help="check every torch operation for device bugs")
    parser.add_argument(
        "--on-error",
        choices=("raise", "warn", "breakpoint"),
        default=None,
        help="what a device mismatch does (default: $FERRY_ON_ERROR, else raise)",
    )
    parser.add_argument("--strict", action="store_true", help="treat the sanitizer's warnings as errors too")
    parser.add_argument(
        "--pretend",
        choices=("cuda",),
        default=None,
        help="run on the CPU as if this machine had CUDA GPUs (without --sanitize: no checks, only PyTorch's errors)",
    )
    parser.add_argument(
        "--device-count", type=int, default=None, metavar="N", help="how many pretend GPUs (with --pretend; default 1)"
    )
    parser.add_argument(
        "script", nargs="?", help="the Python file to run (or a folder with a __main__.py, as `python FOLDER` runs it)"
    )
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script as sys.argv[1:]")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ferry run`` with ``argv`` (the arguments after ``run``) and return the exit code."""
    parser = _parser()
    try:
        options = parser.parse_args(list(sys.argv[2:] if argv is None else argv))
    except SystemExit as exit_:
        return 0 if exit_.code == 0 else 2
    if options.device_count is not None and options.pretend is None:
        print(
            "ferry run: --device-count needs --pretend cuda: `ferry run --pretend cuda --device-count 2 ...`.",
            file=sys.stderr,
        )
        return 2
    if options.script is None:
        print(f"{parser.format_usage()}ferry run: no script given: name the Python file to run.", file=sys.stderr)
        return 2
    script = os.path.abspath(options.script)
    if os.path.isdir(script) and not os.path.isfile(os.path.join(script, "__main__.py")):
        print(
            f"ferry run: {options.script} is a folder with no __main__.py. Give the path of a Python script, or of a "
            "folder with a __main__.py.",
            file=sys.stderr,
        )
        return 2
    if not os.path.isfile(script) and not os.path.isdir(script):
        print(f"ferry run: {options.script}: no such file. Give the path of a Python script.", file=sys.stderr)
        return 2
    device_count = 1 if options.device_count is None else options.device_count
    if device_count < 1:
        print(f"ferry run: --device-count {device_count}: pretend at least one GPU.", file=sys.stderr)
        return 2
    on_error = options.on_error or os.environ.get("FERRY_ON_ERROR") or "raise"
    if on_error not in ("raise", "warn", "breakpoint"):
        print(f"ferry run: FERRY_ON_ERROR={on_error!r}: choose raise, warn or breakpoint.", file=sys.stderr)
        return 2
    if options.pretend is not None:  # an invalid device index then names this command's option
        import ferry.sanitizer.pretend as pretend_module

        more = f"`ferry run --pretend cuda --device-count {device_count + 1} ...`"
        pretend_module.MORE_GPUS = more
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [options.script, *options.args]
    sys.path.insert(0, script if os.path.isdir(script) else os.path.dirname(script))  # as `python SCRIPT` does
    try:
        with ExitStack() as stack:
            if options.sanitize:
                sanitizer = Sanitizer(
                    on_error=on_error,  # type: ignore[arg-type]  # checked just above
                    strict=options.strict,
                    pretend=options.pretend,
                    device_count=device_count,
                )
                stack.enter_context(sanitizer)
            elif options.pretend is not None:
                from ferry.sanitizer.pretend import pretend_cuda

                stack.enter_context(pretend_cuda(device_count))
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


def _torch_dir() -> str | None:
    """The folder of the imported torch package (``None`` when torch was never imported)."""
    torch = sys.modules.get("torch")
    path = getattr(torch, "__file__", None)
    return os.path.dirname(os.path.abspath(path)) + os.sep if path else None


def _print_user_traceback(error: BaseException) -> None:
    """Print ``error``'s traceback without ferry's and runpy's frames: the script's code and the libraries it called."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # src/ferry
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith((here, "<frozen runpy>")) and frame.filename != runpy.__file__
    ]
    hidden = 0
    # the sanitizer's report (an error, or a warning raised under --strict): its lines are the user's, and torch's
    # frames (`Module.__call__` between a model call and its `forward`, the op below) are noise
    if isinstance(error, FerryError | FerryWarning):
        torch_dir = _torch_dir()
        kept = [f for f in frames if torch_dir is None or not f.filename.startswith(torch_dir)]
        hidden = len(frames) - len(kept)
        frames = kept
    print("Traceback (most recent call last):", file=sys.stderr)
    print("".join(traceback.format_list(frames)), end="", file=sys.stderr)
    if hidden:
        print(f"  ({hidden} frame(s) inside torch hidden)", file=sys.stderr)
    print("".join(traceback.format_exception_only(type(error), error)), end="", file=sys.stderr)
