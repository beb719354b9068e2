"""Committing a checkpoint folder: its manifest, the atomic rename, making the rename durable, and failures.

A checkpoint is written under a temporary name; :func:`write_manifest` writes ``manifest.json`` last and fsyncs the
folder; :func:`commit` renames it onto ``step-<n>`` (the commit); :func:`sync_commit` fsyncs the run directory so the
rename survives a power cut. Used by the :class:`ferry.Checkpointer` for both layouts (one process, or rank 0 under
torch.distributed).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import torch

from ferry._fs import atomic_file, fsync_directory
from ferry._remote_path import Folder
from ferry.checkpoint.folder import MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION
from ferry.checkpoint.run.folders import RetentionPolicy
from ferry.errors import CheckpointError

__all__ = ["commit", "manifest_fields", "save_failed", "sync_commit", "write_manifest"]


def manifest_fields(
    policy: RetentionPolicy, step: int, sequence: int, objects: list[str], values: list[str], metrics: dict[str, float]
) -> dict[str, Any]:
    """The manifest's fields other than ``files`` (and, for sharded checkpoints, the layout)."""
    return {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "step": step,
        "sequence": sequence,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "torch": torch.__version__,
        "objects": objects,
        "values": values,
        "metrics": metrics,
        "retention": policy.to_json(),
    }


def write_manifest(tmp: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json`` into ``tmp`` (last, durably) and fsync ``tmp``: the folder is ready to commit."""
    with atomic_file(tmp / MANIFEST_FILE) as handle:
        handle.write(json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8"))
    fsync_directory(tmp)


def commit(tmp: Path, final: Path) -> Path | None:
    """Rename the finished ``tmp`` onto ``final``: the commit. Returns the parked old folder of the step, if any.

    Replacing a checkpoint of the same step parks the old one under a temporary name first, so at no moment is
    there neither; a crash in between leaves the parked copy, which the Checkpointer's start renames back, and a failed
    commit rename puts it back at once.

    Raises:
        OSError: a rename failed; ``final`` holds what it held before.
    """
    if not final.exists():
        os.replace(tmp, final)
        return None
    parked = final.with_name(final.name + ".ferry-old")
    shutil.rmtree(parked, ignore_errors=True)
    os.replace(final, parked)
    try:
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.replace(parked, final)
        raise
    return parked


def sync_commit(directory: Path, step: int, final: Path) -> CheckpointError | None:
    """Make the commit rename of ``final`` durable (survive a power cut): fsync the directory, retrying once.

    Returns:
        None once an fsync succeeds; else the error that says the folder is committed but not known durable.
    """
    try:
        fsync_directory(directory)
        return None
    except OSError:
        pass  # one retry: a transient error (EINTR from a signal, a network file system's hiccup) may pass
    try:
        fsync_directory(directory)
        return None
    except OSError as err:
        code = errno.errorcode.get(err.errno or 0, str(err.errno))
        error = CheckpointError(
            f"step {step} is saved and committed at {str(final)!r}, but its durability is not confirmed: the "
            f"fsync of {str(directory)!r} after the commit rename failed twice (errno {err.errno} {code}: "
            f"{err.strerror}). The checkpoint is listed and restores now, but a power cut or host crash could "
            "still lose it; no older checkpoint was pruned. Check the disk (e.g. dmesg), then save again.",
            path=final,
        )
        error.__cause__ = err
        return error


def save_failed(err: BaseException, what: str, final: Folder) -> BaseException:
    """The error to raise for a save that failed before its commit: OS errors and ferry's say so; others as they are."""
    if isinstance(err, OSError):
        return CheckpointError(
            f"{what} failed: {err}. The previous checkpoints are untouched; free disk space or fix permissions and "
            "save again.",
            path=final,
        )
    if isinstance(err, CheckpointError):
        return type(err)(f"{what} failed; the previous checkpoints are untouched. {err}", path=final)
    return err
