"""``ferry ckpt verify PATH``: check a file, a checkpoint folder, or every checkpoint of a run directory."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ferry.checkpoint.format import verify
from ferry.checkpoint.store import MANIFEST_FILE, STATE_FILE, read_manifest, scan, stale_temporaries
from ferry.cli.ckpt_common import (
    KIND_NAMES,
    Meter,
    human_bytes,
    is_payload,
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


def _folder(folder: Path, progress: Meter) -> Check:
    """Verify a ``step-<n>`` folder: manifest, file sizes, every checksum, and that it holds the step it names."""
    size = sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
    manifest, problem = read_manifest(folder)
    checked = f"{MANIFEST_FILE}, file sizes, every checksum, the step"
    if manifest is None:
        progress.advance(size)
        return Check(str(folder), "Checkpointer checkpoint", size, False, checked, f"incomplete: {problem}")
    for name in sorted(manifest["files"]):
        check = _file(folder / name, progress)
        if not check.ok:
            return Check(str(folder), "Checkpointer checkpoint", size, False, checked, check.problem)
    step = manifest.get("step")
    if folder.name.startswith("step-") and step != int(folder.name.removeprefix("step-")):
        return Check(
            str(folder), "Checkpointer checkpoint", size, False, checked,
            f"the folder is named {folder.name} but its {MANIFEST_FILE} says step {step!r}",
        )  # fmt: skip
    if STATE_FILE in manifest["files"]:
        payload = read_structure(folder / STATE_FILE).obj
        if not is_payload(payload):
            return Check(
                str(folder), "Checkpointer checkpoint", size, False, checked,
                f"{STATE_FILE} verifies but is not a Checkpointer checkpoint (no step/objects/values)",
            )  # fmt: skip
        if payload["step"] != step:
            return Check(
                str(folder), "Checkpointer checkpoint", size, False, checked,
                f"{MANIFEST_FILE} says step {step!r} but {STATE_FILE} holds step {payload['step']!r}",
            )  # fmt: skip
    return Check(str(folder), "Checkpointer checkpoint", size, True, checked)


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
    if path.is_dir() and ((path / MANIFEST_FILE).exists() or (path / STATE_FILE).exists()):
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
