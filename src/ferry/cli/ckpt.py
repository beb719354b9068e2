"""``ferry ckpt``: list, inspect, verify, diff, convert and garbage-collect checkpoints.

The work is :mod:`ferry.checkpoint.tools`'s; the modules here parse arguments and print, one per subcommand:
``ckpt_run`` (``ls``, ``gc``: run directories), ``ckpt_inspect``, ``ckpt_verify``, ``ckpt_diff``, ``ckpt_convert``;
``ckpt_common`` holds sizes for people and the progress bar. Every subcommand prints rich tables for people and,
with ``--json``, one JSON object on stdout for scripts. Errors are messages on stderr, never tracebacks.

Exit codes:
    0   done, and clean: everything verifies; ``diff`` found no difference.
    1   findings: ``verify`` found a corrupt, incomplete or unsafe checkpoint; ``diff`` found differences (as
        ``diff(1)`` does).
    2   usage error, or the command could not do its job: a missing path, a folder that holds no checkpoint, an
        output that exists without ``--force``, a value ferry cannot save, a removal that failed, a file from a
        newer ferry; and a TorchScript archive (e.g. ``silero_vad.jit``), for every subcommand: it is not damaged
        (so not a finding), it is another kind of file, which ferry refuses with the message saying to open it with
        ``torch.jit.load``. A folder written by ``torch.distributed.checkpoint``'s own ``FileSystemWriter`` (a
        pickled ``.metadata``) is refused by ``inspect`` and ``convert`` (2, as an unsafe pickle is) and is a finding
        of ``verify`` (1); ``convert --trusted`` converts it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from ferry.errors import FerryError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON object for scripts instead of tables")
    remote = argparse.ArgumentParser(add_help=False)
    remote.add_argument(
        "--storage-options",
        metavar="JSON",
        help="for URLs of object storage (s3://bucket/run): the fsspec file system's options as JSON, e.g. "
        '\'{"client_kwargs": {"endpoint_url": "http://127.0.0.1:8333"}}\' (credentials also come from the AWS_* '
        "environment variables)",
    )
    trusted = argparse.ArgumentParser(add_help=False)
    trusted.add_argument(
        "--trusted",
        action="store_true",
        help="run torch.save pickles unrestricted (weights_only=False); only for files whose origin you trust",
    )
    parser = argparse.ArgumentParser(
        prog="ferry ckpt",
        description="List, inspect, verify, diff, convert and garbage-collect checkpoints: ferry files, Checkpointer "
        "folders and run directories, safetensors files and torch.save files. Exit codes: 0 clean, 1 findings "
        "(verification failed, diff found differences), 2 usage error or a file ferry cannot handle.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="<command>")

    ls = commands.add_parser(
        "ls", parents=[common, remote], help="a run directory's checkpoints", description="List a Checkpointer run "
        "directory: each checkpoint's step, time, size, whether it is complete (and why not), which retention rule "
        "keeps it (last, every, best; '—' when gc would remove it), the newest (*), and stale temporary folders. "
        "DIR may be the URL of a run on object storage (s3://bucket/run).",
    )  # fmt: skip
    ls.add_argument("dir", metavar="DIR", help="the run directory (the folder holding step-<n> folders)")
    ls.set_defaults(handler="ckpt_run:ls_main")

    inspect = commands.add_parser(
        "inspect", parents=[common, trusted, remote], help="what a checkpoint holds",
        description="Show a checkpoint's tree (every tensor's shape, dtype and size; plain values), parameter counts "
        "per top-level entry and in total, and its metadata (step, time, torch version, devices if recorded, RNG "
        "states). PATH is a ferry or safetensors file (only the header is read), a torch.save file, a step-<n> folder "
        "(a sharded one too: its tensors' global shapes, pieces and rank files, and its files), or a run directory "
        "(its newest checkpoint). Folders written by torch.distributed.checkpoint itself (a pickled .metadata) are "
        "refused. PATH may be a URL of object storage.",
    )  # fmt: skip
    inspect.add_argument("path", metavar="PATH")
    inspect.set_defaults(handler="ckpt_inspect:inspect_main")

    verify = commands.add_parser(
        "verify", parents=[common, remote], help="check files and checkpoint folders", description="Verify a "
        "file (ferry files: the header's CRC-32 and every tensor's xxh3_64, crc32 in files from before format 2; "
        "safetensors header and sizes; torch.save zip CRCs or a restricted load), a step-<n> folder (manifest, sizes, "
        "checksums, step; for a sharded one also the SHA-256 of shards.json and every piece of every rank file) or "
        "every checkpoint of a run directory. Exit 1 if anything fails. PATH may be a URL of object storage (a "
        "file, a step folder or a run: s3://bucket/run; credentials from the AWS_* environment variables or "
        "--storage-options).",
    )  # fmt: skip
    verify.add_argument("path", metavar="PATH")
    verify.set_defaults(handler="ckpt_verify:verify_main")

    diff = commands.add_parser(
        "diff", parents=[common, trusted, remote], help="compare two checkpoints", description="Compare two "
        "checkpoints entry by entry: added, removed and changed entries, shape and dtype changes, the largest absolute "
        "difference of each tensor, changed plain values. Exit 1 if they differ. A and B may be URLs of object "
        "storage.",
    )  # fmt: skip
    diff.add_argument("a", metavar="A")
    diff.add_argument("b", metavar="B")
    diff.add_argument("--atol", type=float, default=0.0, help="tensors differing by at most this count as the same")
    diff.set_defaults(handler="ckpt_diff:diff_main")

    convert = commands.add_parser(
        "convert", parents=[common, trusted, remote], help="convert to a ferry file",
        description="Convert a checkpoint (a torch.save file, loaded through torch's restricted unpickler; any file "
        "ferry loads; a sharded step folder, loaded whole in this process; with --trusted, a folder written by "
        "torch.distributed.checkpoint) to a ferry file (safetensors with checksums), written atomically and "
        "verified. IN may be a URL of object storage; OUT is a local file.",
    )  # fmt: skip
    convert.add_argument("input", metavar="IN")
    convert.add_argument("out", metavar="OUT", help="the file to write, e.g. model.safetensors")
    convert.add_argument("--force", action="store_true", help="replace OUT if it exists")
    convert.set_defaults(handler="ckpt_convert:convert_main")

    gc = commands.add_parser(
        "gc", parents=[common, remote], help="remove checkpoints the retention policy lets go", description="Apply "
        "the retention policy recorded in the newest manifest (the flags override it) and remove stale temporary "
        "folders. Never removes the newest complete checkpoint, the best, or incomplete checkpoints. DIR may be the "
        "URL of a run on object storage: there it also removes step folders that are no checkpoint (saves cut "
        "short) and aborts incomplete multipart uploads.",
    )  # fmt: skip
    gc.add_argument("dir", metavar="DIR", help="the run directory")
    gc.add_argument("--keep-last", type=int, metavar="N", help="keep the N most recently saved")
    gc.add_argument("--keep-every", metavar="N", help="keep every step divisible by N ('none': no such rule)")
    gc.add_argument("--keep-best", metavar="METRIC:min|max", help="keep the best by a metric ('none': no such rule)")
    gc.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    gc.add_argument(
        "--break-lock",
        action="store_true",
        help="first delete the run's write lock, whoever holds it: for a lock left by a writer on another host that "
        "is gone (never while it may still run)",
    )
    gc.set_defaults(handler="ckpt_run:gc_main")
    return parser


def _handler(spec: str) -> Callable[[argparse.Namespace], int]:
    import importlib

    module, name = spec.split(":")
    function: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(f"ferry.cli.{module}"), name)
    return function


def _error(command: str, message: str) -> None:
    from rich.console import Console

    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"ferry ckpt {command}: {message}", style="red", markup=False
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ferry ckpt <command> ...``; return the exit code (0 clean, 1 findings, 2 usage or other error).

    Subcommands (each takes ``--json``; the JSON objects' fields are in the docstrings of the functions named):

    - ``ls DIR``: :func:`ferry.checkpoint.tools.list_run`.
    - ``inspect PATH [--trusted]``: :func:`ferry.checkpoint.tools.describe`.
    - ``verify PATH``: ``{"path", "ok", "checked": [Check], "notes"}`` (:class:`ferry.checkpoint.tools.Check`).
    - ``--storage-options JSON`` (ls, inspect, verify, diff, gc): the fsspec options for URLs of object storage.
    - ``diff A B [--atol X] [--trusted]``: :func:`ferry.checkpoint.tools.diff`.
    - ``convert IN OUT [--force] [--trusted]``: :func:`ferry.checkpoint.tools.convert`.
    - ``gc DIR [--keep-last N] [--keep-every N] [--keep-best METRIC:min|max] [--dry-run] [--break-lock]``:
      :func:`ferry.checkpoint.tools.collect`.

    Args:
        argv: The arguments after ``ferry ckpt``; ``None`` reads ``sys.argv[1:]``.
    """
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a usage error (2): return the code instead of exiting
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        return _handler(args.handler)(args)
    except FerryError as err:
        _error(args.command, err.for_cli())
        return 2
    except OSError as err:  # outside ferry's own wrapped I/O: listing or statting a folder
        where = f" {str(err.filename)!r}" if err.filename else ""
        _error(args.command, f"cannot access{where}: {err.strerror or err}. Check the path and its permissions.")
        return 2
    except Exception as err:  # a bug: say so plainly rather than print a traceback
        if isinstance(err, ModuleNotFoundError) and (err.name or "").split(".")[0] == "torch":
            raise  # not a bug: PyTorch is not installed, and ferry.cli.main says how to install it
        _error(
            args.command,
            f"internal error ({type(err).__name__}: {err}). This is a bug in ferry; please report it with the "
            "command you ran.",
        )
        return 2
