"""``ferry ckpt verify PATH``: check a file, a checkpoint folder, or every checkpoint of a run directory.

A sharded checkpoint folder (saved under ``torch.distributed``) is checked whole: the manifest's sizes, the SHA-256
of ``shards.json``, every checksum of every file, and that every piece ``shards.json`` places in a rank file is
there with its shape. A folder written by DCP's own ``FileSystemWriter`` is a finding: its metadata is a pickle.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ferry.checkpoint.file.api import verify
from ferry.checkpoint.run.folders import MANIFEST_FILE, STATE_FILE, read_manifest, scan, stale_temporaries
from ferry.checkpoint.sharded import ranks as collective
from ferry.checkpoint.sharded import storage as dcp
from ferry.checkpoint.sharded.consolidate import plain_dcp_error
from ferry.cli.ckpt_common import (
    KIND_NAMES,
    Meter,
    flatten,
    human_bytes,
    is_payload,
    is_sharded,
    meter,
    read_structure,
    run_directory,
    sniff,
)
from ferry.errors import CheckpointError, CorruptCheckpointError, UnsafeCheckpointError

__all__ = ["Check", "verify_main", "verify_path"]

#: What verifying each kind of file checks.
_CHECKED = {
    "ferry": "the CRC-32 of the header and the xxh3_64 of every tensor (crc32 in files of ferry before format 2)",
    "safetensors": "header, offsets and size (plain safetensors files carry no checksums)",
    "zip": "the CRC-32 of every zip entry",
    "pickle": "loaded through torch's restricted unpickler",
    "tar": "loaded through torch's restricted unpickler",
}


@dataclass
class Check:
    """The verdict on one file or checkpoint folder.

    Attributes:
        path: The file or folder.
        kind: ``ferry file``, ``Checkpointer checkpoint``, ``safetensors file``, ``torch.save file (zip)``, ...
        bytes: Its size on disk.
        ok: Whether it verified.
        checked: What was checked, for people.
        problem: What is wrong (``None`` when ``ok``).
    """

    path: str
    kind: str
    bytes: int
    ok: bool
    checked: str
    problem: str | None = None


def _file(file: Path, progress: Meter) -> Check:
    """Verify one file. Corrupt and unsafe files are problems; a file ferry cannot verify at all raises."""
    kind, size = sniff(file)
    progress.describe(f"verifying {file.name}")
    try:
        verify(file)
    except (CorruptCheckpointError, UnsafeCheckpointError) as err:
        return Check(str(file), KIND_NAMES[kind], size, False, _CHECKED.get(kind, ""), str(err))
    finally:
        progress.advance(size)
    return Check(str(file), KIND_NAMES[kind], size, True, _CHECKED[kind])


#: What verifying a sharded folder checks, for people.
_CHECKED_SHARDED = (
    f"{MANIFEST_FILE}, file sizes, the SHA-256 of {dcp.METADATA_FILE}, every checksum of every file, every piece "
    "in its rank file, the step"
)
_SHARDED_KIND = "Checkpointer checkpoint (sharded)"


def _pieces_problem(folder: Path, listed: set[str] | None) -> str | None:
    """What is wrong with where ``shards.json`` places the pieces: a file not in the manifest, a piece not there.

    Only headers are read (the checksums are :func:`ferry.checkpoint.sharded.ranks.verify_folder`'s job).
    """
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = dcp.read_metadata(folder)
    by_file: dict[str, list[tuple[Any, dict[str, str]]]] = {}
    for index, where in (metadata.storage_data or {}).items():
        by_file.setdefault(where["file"], []).append((index, where))
    for file, pieces in sorted(by_file.items()):
        if listed is not None and file not in listed:
            return f"{dcp.METADATA_FILE} places pieces in {file}, which {MANIFEST_FILE} does not list"
        if not (folder / file).is_file():
            return f"{file} is missing: {dcp.METADATA_FILE} places {len(pieces)} pieces there (a rank's file was lost)"
        stored = dict(flatten(read_structure(folder / file).obj))
        for index, where in pieces:
            if where["name"] not in stored:
                return (
                    f"{file} lacks the piece {where['name']!r} of {index.fqn!r} that {dcp.METADATA_FILE} places there"
                )
            info = metadata.state_dict_metadata.get(index.fqn)
            if isinstance(info, TensorStorageMetadata) and index.offset is not None:
                sizes = next((c.sizes for c in info.chunks if tuple(c.offsets) == tuple(index.offset)), None)
                got = tuple(stored[where["name"]].shape)
                if sizes is None or tuple(sizes) != got:
                    return (
                        f"{file}: the piece {where['name']!r} of {index.fqn!r} has shape {list(got)}, "
                        f"{dcp.METADATA_FILE} says {None if sizes is None else list(sizes)}"
                    )
    return None


def _sharded_problem(folder: Path, manifest: dict[str, Any] | None) -> str | None:
    """What is wrong with the DCP part of ``folder`` (``None`` when it verifies); ``manifest`` is complete or None."""
    try:
        if manifest is not None:
            collective.verify_folder(folder, manifest)
        else:  # a folder dcp.save wrote with ferry's storage: no manifest, so no SHA-256 to check
            dcp.read_metadata(folder)
            for file in sorted(folder.glob("shard-*.safetensors")):
                verify(file)
        return _pieces_problem(folder, None if manifest is None else set(manifest["files"]))
    except (CorruptCheckpointError, UnsafeCheckpointError) as err:
        return str(err)


def _folder(folder: Path, progress: Meter) -> Check:
    """Verify a ``step-<n>`` folder: manifest, file sizes, every checksum, and that it holds the step it names."""
    size = sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
    if dcp.is_plain_dcp(folder) and not is_sharded(folder):
        progress.advance(size)
        return Check(
            str(folder), "DCP folder (torch FileSystemWriter)", size, False, "nothing: it is unsafe to read",
            str(plain_dcp_error(folder)),
        )  # fmt: skip
    bare = not folder.name.startswith("step-") and not (folder / MANIFEST_FILE).exists()
    if is_sharded(folder) and bare and not (folder / STATE_FILE).exists():
        problem = _sharded_problem(folder, None)
        progress.advance(size)
        checked = f"{dcp.METADATA_FILE}, every checksum of every file, every piece in its rank file"
        return Check(str(folder), "DCP folder (ferry storage)", size, problem is None, checked, problem)
    manifest, problem = read_manifest(folder)
    sharded = is_sharded(folder) or (manifest or {}).get("layout") == collective.LAYOUT
    kind = _SHARDED_KIND if sharded else "Checkpointer checkpoint"
    checked = _CHECKED_SHARDED if sharded else f"{MANIFEST_FILE}, file sizes, every checksum, the step"
    if manifest is None:
        progress.advance(size)
        return Check(str(folder), kind, size, False, checked, f"incomplete: {problem}")
    if sharded:
        progress.describe(f"verifying {folder.name}")
        problem = _sharded_problem(folder, manifest)
        progress.advance(size)
        if problem is not None:
            return Check(str(folder), kind, size, False, checked, problem)
    for name in [] if sharded else sorted(manifest["files"]):
        check = _file(folder / name, progress)
        if not check.ok:
            return Check(str(folder), kind, size, False, checked, check.problem)
    step = manifest.get("step")
    if folder.name.startswith("step-") and step != int(folder.name.removeprefix("step-")):
        return Check(
            str(folder), kind, size, False, checked,
            f"the folder is named {folder.name} but its {MANIFEST_FILE} says step {step!r}",
        )  # fmt: skip
    if STATE_FILE in manifest["files"]:
        payload = read_structure(folder / STATE_FILE).obj
        if not is_payload(payload):
            return Check(
                str(folder), kind, size, False, checked,
                f"{STATE_FILE} verifies but is not a Checkpointer checkpoint (no step/objects/values)",
            )  # fmt: skip
        if payload["step"] != step:
            return Check(
                str(folder), kind, size, False, checked,
                f"{MANIFEST_FILE} says step {step!r} but {STATE_FILE} holds step {payload['step']!r}",
            )  # fmt: skip
    return Check(str(folder), kind, size, True, checked)


def verify_path(path: Path, progress_console: Any = None) -> tuple[list[Check], list[str]]:
    """Verify what ``path`` names: a file, a ``step-<n>`` folder, or every checkpoint folder of a run directory.

    Returns:
        One :class:`Check` per file or folder, and notes (stale temporary folders; not problems).

    Raises:
        CheckpointError: nothing at ``path``, a folder holding no checkpoint, or a file ferry cannot verify at all
            (a TorchScript archive, a file from a newer ferry, an unreadable file).
    """
    if path.is_file():
        with meter(path.stat().st_size, f"verifying {path.name}", progress_console) as progress:
            return [_file(path, progress)], []
    if path.is_dir() and (
        (path / MANIFEST_FILE).exists() or (path / STATE_FILE).exists() or is_sharded(path) or dcp.is_plain_dcp(path)
    ):
        folders = [path]
        notes: list[str] = []
    else:
        directory = run_directory(path)
        folders = [entry.folder for entry in scan(directory)]
        if not folders:
            raise CheckpointError(
                f"{str(path)!r} holds no checkpoint to verify (no step-<n> folders, no {MANIFEST_FILE}). Pass a "
                "checkpoint file, a step-<n> folder or a Checkpointer run directory.",
                path=path,
            )
        notes = [
            f"stale temporary {stale.name} (left by a crashed save; ferry ckpt gc removes it)"
            for stale in stale_temporaries(directory)
        ]
    total = sum(file.stat().st_size for folder in folders for file in folder.iterdir() if file.is_file())
    with meter(total, "verifying", progress_console) as progress:
        return [_folder(folder, progress) for folder in folders], notes


def _print(checks: list[Check], notes: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    table = Table()
    table.add_column("path", overflow="fold")
    table.add_column("kind")
    table.add_column("size", justify="right")
    table.add_column("result", overflow="fold")
    for check in checks:
        result = Text("ok", style="green") if check.ok else Text(f"FAILED: {check.problem}", style="red")
        table.add_row(Text(check.path), check.kind, human_bytes(check.bytes), result)
    console.print(table)
    for note in notes:
        console.print(Text(f"note: {note}", style="yellow"))
    failed = sum(not check.ok for check in checks)
    if failed:
        console.print(Text(f"{failed} of {len(checks)} failed verification.", style="bold red"))
    else:
        checked = "; ".join(sorted({check.checked for check in checks}))
        console.print(Text(f"all {len(checks)} verified ({checked}).", style="bold green"))


def verify_main(args: argparse.Namespace) -> int:
    """``ferry ckpt verify``: 0 when everything verifies, 1 when anything does not (each problem named)."""
    checks, notes = verify_path(Path(args.path))
    ok = all(check.ok for check in checks)
    if args.json:
        print(json.dumps({"path": args.path, "ok": ok, "checked": [asdict(check) for check in checks], "notes": notes}))
    else:
        _print(checks, notes)
    return 0 if ok else 1
