"""ferry's command line: ``ferry <command> [options]``, one module per command group.

Exit codes: 0 clean, 1 findings or failed verification, 2 usage or internal error.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

__all__ = ["main", "run"]

#: command name -> (module under ferry.cli, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "ckpt": ("ckpt", "list, inspect, verify, diff, convert and garbage-collect checkpoints"),
    "demo": ("demo", "train an MLP on the bundled digits data with checkpoints and resume"),
    "env": ("env", "show the devices ferry sees, with torch, CUDA and Python versions"),
    "lint": ("lint", "find PyTorch device bugs in Python files and notebooks, and fix the safe ones"),
    "run": ("run_script", "run a Python script, with --sanitize to check every torch operation for device bugs"),
}


def _usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    return (
        "usage: ferry [--version] <command> [options]\n\n"
        "Every model and tensor on the right device, and no training run ever lost.\n\n"
        "commands:\n" + "\n".join(lines) + "\n\nRun 'ferry <command> --help' for a command's options.\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ferry`` command line with ``argv`` (default ``sys.argv[1:]``) and return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage(), end="")
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        from ferry._version import __version__

        print(f"ferry {__version__}")
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"ferry: unknown command {command!r}. Choose one of: {', '.join(COMMANDS)}.", file=sys.stderr)
        print(_usage(), end="", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(f"ferry.cli.{COMMANDS[command][0]}")
        entry: Callable[[Sequence[str]], int] = module.main
        return entry(rest)
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] != "torch":
            raise
        from ferry._lazy import INSTALL_TORCH

        print(f"ferry {command}: needs PyTorch, which is not installed in this environment. {INSTALL_TORCH}; "
              "ferry lint needs no torch.", file=sys.stderr)  # fmt: skip
        return 2


def run() -> None:
    """Console-script entry point: ``sys.exit(main())``; Ctrl-C outside a command's own handling exits 130 quietly."""
    try:
        code = main()
    except KeyboardInterrupt:
        print("ferry: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)
