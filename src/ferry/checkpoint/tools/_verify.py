"""Verifying any checkpoint path: a file, a checkpoint (step) folder, plain or sharded, or a whole run directory.

:func:`verify` is ``ferry.verify``: it raises on the first problem, as for one file. :func:`verify_path` is what
``ferry ckpt verify`` prints: one :class:`Check` per file or folder. A sharded checkpoint folder (saved under
``torch.distributed``) is checked whole: the manifest's sizes, the SHA-256 of ``shards.json``, every checksum of
every file, and that every piece ``shards.json`` places in a rank file is there with its shape. A folder written by
DCP's own ``FileSystemWriter`` is refused: its metadata is a pickle. A Hugging Face Trainer's ``checkpoint-<n>``
folder written by :mod:`ferry.integrations.transformers` is checked like a Checkpointer's: its manifest, and each file
by its own checksums (ferry files) or by the ``xxh3_64`` of the whole file that the manifest records (the model's
safetensors, JSON).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferry._remote import is_url, open_remote
from ferry._remote_path import Folder, RemotePath
from ferry.checkpoint.file import api as file_api
from ferry.checkpoint.file import layout
from ferry.checkpoint.file.kinds import KIND_NAMES, sniff
from ferry.checkpoint.file.structure import read_structure
from ferry.checkpoint.folder import (
    FILE_CHECKSUM,
    MANIFEST_FILE,
    SHARDS_FILE,
    STATE_FILE,
    TRAINER_LAYOUT,
    file_checksum,
    folder_step,
    has_shards,
    is_plain_dcp,
    plain_dcp_error,
    read_manifest,
    trainer_step_of,
)
from ferry.checkpoint.run import remote
from ferry.checkpoint.run.folders import scan, stale_temporaries
from ferry.checkpoint.sharded import ranks
from ferry.checkpoint.tools._paths import (
    Meter,
    Progress,
    is_payload,
    location,
    missing,
    no_progress,
    run_directory,
    step_alias,
)
from ferry.errors import CheckpointError, CorruptCheckpointError, UnsafeCheckpointError

__all__ = ["Check", "verify", "verify_path"]

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


def _file(file: Folder, progress: Meter) -> Check:
    """Verify one file. Corrupt and unsafe files are problems; a file ferry cannot verify at all raises."""
    if isinstance(file, RemotePath):
        return _remote_file(file.url, file.storage_options, lambda total, text: contextlib.nullcontext(progress))
    kind, size = sniff(file)
    progress.describe(f"verifying {file.name}")
    try:
        file_api.verify(file)
    except (CorruptCheckpointError, UnsafeCheckpointError) as err:
        return Check(str(file), KIND_NAMES[kind], size, False, _CHECKED.get(kind, ""), str(err))
    finally:
        progress.advance(size)
    return Check(str(file), KIND_NAMES[kind], size, True, _CHECKED[kind])


def _remote_file(url: str, storage_options: Mapping[str, Any] | None, progress: Progress) -> Check:
    """Verify one object on object storage: every byte is fetched and checked, as :func:`_file` does locally."""
    with open_remote(url, storage_options) as (handle, size):
        kind = "ferry file" if layout.looks_like_safetensors(handle.read(16)) else "object"
    with progress(size, f"verifying {url.rsplit('/', 1)[-1]}") as meter:
        try:
            file_api.verify(url, storage_options=storage_options)
        except (CorruptCheckpointError, UnsafeCheckpointError) as err:
            return Check(url, kind, size, False, "header, sizes and every tensor's checksum", str(err))
        finally:
            meter.advance(size)
    return Check(url, kind, size, True, "header, sizes and every tensor's checksum")


def _whole_file(file: Folder, expected: str, progress: Meter) -> Check:
    """Check a file that carries no checksums of its own against the ``xxh3_64`` its folder's manifest records."""
    size = file.stat().st_size
    progress.describe(f"verifying {file.name}")
    try:
        got = file_checksum(file)
    except OSError as err:
        raise CheckpointError(
            f"cannot read {str(file)!r}: {err.strerror or err}. Check that the file is readable by this user.",
            path=file,
        ) from err
    finally:
        progress.advance(size)
    checked = f"the {FILE_CHECKSUM} of the whole file"
    if got != expected:
        problem = (
            f"{file.name} is damaged: its {FILE_CHECKSUM} is {got} but {MANIFEST_FILE} recorded {expected} when it "
            "was saved (a flipped bit, an edit, or a partial copy)"
        )
        return Check(str(file), "file", size, False, checked, problem)
    return Check(str(file), "file", size, True, checked)


#: What verifying a Hugging Face Trainer's folder checks, for people.
_CHECKED_TRAINER = (
    f"{MANIFEST_FILE}, file sizes, every checksum (ferry files' own, the {FILE_CHECKSUM} of the model and JSON "
    "files), the step"
)

#: What verifying a sharded folder checks, for people.
_CHECKED_SHARDED = (
    f"{MANIFEST_FILE}, file sizes, the SHA-256 of {SHARDS_FILE}, every checksum of every file, every piece "
    "in its rank file, the step"
)
_SHARDED_KIND = "Checkpointer checkpoint (sharded)"


def _folder(folder: Folder, progress: Meter) -> Check:
    """Verify a ``step-<n>`` folder: manifest, file sizes, every checksum, and that it holds the step it names."""
    from ferry.checkpoint.sharded.verify import sharded_problem  # imports DCP (1.5 s): used for sharded folders

    size = sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
    if is_plain_dcp(folder):
        progress.advance(size)
        return Check(
            str(folder), "DCP folder (torch FileSystemWriter)", size, False, "nothing: it is unsafe to read",
            str(plain_dcp_error(folder)),
        )  # fmt: skip
    bare = folder_step(folder.name) is None and not (folder / MANIFEST_FILE).exists()
    if has_shards(folder) and bare and not (folder / STATE_FILE).exists():
        problem = sharded_problem(folder, None)
        progress.advance(size)
        checked = f"{SHARDS_FILE}, every checksum of every file, every piece in its rank file"
        return Check(str(folder), "DCP folder (ferry storage)", size, problem is None, checked, problem)
    manifest, problem = read_manifest(folder)
    sharded = has_shards(folder) or (manifest or {}).get("layout") == ranks.LAYOUT
    kind = _SHARDED_KIND if sharded else "Checkpointer checkpoint"
    checked = _CHECKED_SHARDED if sharded else f"{MANIFEST_FILE}, file sizes, every checksum, the step"
    trainer = (manifest or {}).get("layout") == TRAINER_LAYOUT
    if trainer or (manifest is None and trainer_step_of(folder.name) is not None):
        kind, checked = "transformers Trainer checkpoint", _CHECKED_TRAINER
    if manifest is None:
        progress.advance(size)
        return Check(str(folder), kind, size, False, checked, f"incomplete: {problem}")
    if sharded:
        progress.describe(f"verifying {folder.name}")
        problem = sharded_problem(folder, manifest)
        progress.advance(size)
        if problem is not None:
            return Check(str(folder), kind, size, False, checked, problem)
    for name in [] if sharded else sorted(manifest["files"]):
        info = manifest["files"][name]
        expected = info.get(FILE_CHECKSUM) if isinstance(info, dict) else None
        check = _whole_file(folder / name, expected, progress) if expected else _file(folder / name, progress)
        if not check.ok:
            return Check(str(folder), kind, size, False, checked, check.problem)
    step = manifest.get("step")
    named = folder_step(folder.name)
    if named is not None and step != named:
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


def verify_path(
    path: str | os.PathLike[str] | RemotePath,
    progress: Progress = no_progress,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[list[Check], list[str]]:
    """Verify what ``path`` names: a file, a ``step-<n>`` folder, or every checkpoint folder of a run directory.

    Args:
        path: The file or folder; or the URL of one file on object storage (``s3://bucket/run/model.safetensors``).
        progress: Receives the bytes verified (``ferry ckpt`` draws a progress bar); by default nothing.
        storage_options: For a URL: passed to its fsspec file system, as for :func:`ferry.save`.

    Returns:
        One :class:`Check` per file or folder, and notes (stale temporary folders; not problems). ``ferry ckpt verify
        --json`` prints them as ``{"path", "ok", "checked": [Check as a dict], "notes"}``.

    Raises:
        CheckpointError: nothing at ``path``, a folder holding no checkpoint, or a file ferry cannot verify at all
            (a TorchScript archive, a file from a newer ferry, an unreadable file).
    """
    where: Folder = (
        step_alias(location(path, storage_options))
        if isinstance(path, RemotePath) or is_url(path)
        else file_api.as_path(path, "checkpoint.tools.verify_path")
    )
    if isinstance(where, RemotePath) and where.is_file():
        return [_remote_file(where.url, where.storage_options, progress)], []
    if where.is_file():
        with progress(where.stat().st_size, f"verifying {where.name}") as meter:
            return [_file(where, meter)], []
    if where.is_dir() and (
        (where / MANIFEST_FILE).exists() or (where / STATE_FILE).exists() or has_shards(where) or is_plain_dcp(where)
    ):
        folders: list[Folder] = [where]
        notes: list[str] = []
    else:
        directory = run_directory(where)
        entries = scan(directory, trainer_folders=True)
        debris = set(remote.debris(directory, entries)) if isinstance(directory, RemotePath) else set()
        folders = [
            entry.folder for entry in sorted(entries, key=lambda entry: entry.step) if entry.folder not in debris
        ]
        if not folders:
            raise CheckpointError(
                f"{str(where)!r} holds no checkpoint to verify (no step-<n> folders, no {MANIFEST_FILE}). Pass a "
                "checkpoint file, a step-<n> folder or a Checkpointer run directory.",
                path=where,
            )
        if isinstance(directory, RemotePath):
            notes = [
                f"{stale.name} is no checkpoint (a save or deletion cut short, or a superseded save; ferry ckpt gc "
                "removes it)"
                for stale in remote.debris(directory, entries)
            ]
        else:
            notes = [
                f"stale temporary {stale.name} (left by a crashed save; ferry ckpt gc removes it)"
                for stale in stale_temporaries(directory)
            ]
    total = sum(file.stat().st_size for folder in folders for file in folder.iterdir() if file.is_file())
    with progress(total, "verifying") as meter:
        return [_folder(folder, meter) for folder in folders], notes


def verify(path: str | os.PathLike[str] | RemotePath, *, storage_options: Mapping[str, Any] | None = None) -> None:
    """Check a checkpoint without loading it: a file, a checkpoint (step) folder, plain or sharded, or a run directory.

    A file: header, offsets, size and every checksum, streaming the file (plain safetensors files: header, offsets
    and size; ``torch.save`` zip files: the CRC-32 of every entry; a legacy pickle is loaded on the CPU). A step
    folder (what :meth:`ferry.Checkpointer.latest` returns): its manifest, every file's size and checksum, and that
    it holds the step it is named for; a sharded one also the SHA-256 of ``shards.json`` and that every piece lies
    where ``shards.json`` says. A run directory: every checkpoint folder in it. Mirrors ``ferry ckpt verify``.

    Raises:
        CorruptCheckpointError: a checksum, size or structure does not match, or a folder is incomplete (the message
            names the file or folder, what is wrong and what to do).
        UnsafeCheckpointError: a legacy pickle that would run code, or a folder written by DCP's own
            ``FileSystemWriter`` (its metadata is a pickle).
        CheckpointError: nothing at ``path``; a folder holding no checkpoint; a file that is missing, unreadable, a
            TorchScript archive, or from a newer ferry.
        ArgumentError: ``path`` is not a ``str`` or ``os.PathLike`` (e.g. an open file object).

    ``path`` may also be a URL of object storage (a file, a step folder or a run: ``"s3://bucket/run"``), with
    ``storage_options`` for its fsspec file system as for :func:`ferry.save`; every byte is fetched and checked.
    """
    where: Folder
    if isinstance(path, RemotePath) or is_url(path):
        where = location(path, storage_options)
    elif storage_options is not None:
        file_api.verify(path, storage_options=storage_options)  # raises: storage options are for URLs
        return
    else:
        where = file_api.as_path(path, "verify")
    if not where.exists():
        raise missing(where)
    if where.is_file():
        file_api.verify(where)
        return
    if is_plain_dcp(where):
        raise plain_dcp_error(where)
    checks, _ = verify_path(where)
    failed = [check for check in checks if not check.ok]
    if not failed:
        return
    fix = (
        "Restore from another checkpoint (ferry.Checkpointer(directory).restore(state) falls back to the newest one "
        "that verifies), or delete the damaged folder."
    )
    if len(checks) == 1:
        problem = str(failed[0].problem).rstrip(".")
        said = problem if str(where) in problem else f"checkpoint folder {str(where)!r} fails verification: {problem}"
        raise CorruptCheckpointError(f"{said}. {fix}", path=where)
    problems = "".join(f"\n  {Path(check.path).name}: {str(check.problem).rstrip('.')}" for check in failed)
    raise CorruptCheckpointError(
        f"{len(failed)} of {len(checks)} checkpoints in {str(where)!r} fail verification:{problems}\n{fix}",
        path=failed[0].path,
    )
