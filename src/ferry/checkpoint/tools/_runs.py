"""A run directory's checkpoints (``ferry ckpt ls``), and removing what its policy lets go (``ferry ckpt gc``)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
from collections.abc import Mapping
from typing import Any

from ferry._fs import fsync_directory, pid_alive
from ferry._remote_path import Folder, RemotePath
from ferry.checkpoint.run import remote
from ferry.checkpoint.run.folders import CheckpointEntry, RetentionPolicy, remove_checkpoint, scan, stale_temporaries
from ferry.checkpoint.run.lock import LOCK_FILE, DirectoryLock
from ferry.checkpoint.tools._paths import location, run_directory
from ferry.errors import CheckpointError

__all__ = ["collect", "list_run", "recorded_policy"]


def recorded_policy(entries: list[CheckpointEntry]) -> tuple[RetentionPolicy, bool]:
    """The retention policy in the newest complete manifest, and whether one was recorded (else the default)."""
    complete = [entry for entry in entries if entry.complete]
    manifest = complete[-1].manifest if complete else None
    recorded = manifest is not None and isinstance(manifest.get("retention"), dict)
    return RetentionPolicy.from_json(manifest.get("retention") if manifest else None), recorded


def _writer(directory: Folder) -> dict[str, Any] | None:
    """Who holds the directory's write lock, as its lock file says; None when unlocked.

    Returns:
        ``{"pid", "host", "alive"}``: ``alive`` is whether that process runs, when it is of this host (``None``
        for another host, which cannot be asked from here).
    """
    try:
        holder = json.loads((directory / LOCK_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"pid": None, "host": None, "alive": None}
    if not isinstance(holder, dict):
        return {"pid": None, "host": None, "alive": None}
    pid, host = holder.get("pid"), holder.get("host")
    alive = pid_alive(pid) if host == socket.gethostname() and isinstance(pid, int) else None
    return {"pid": pid, "host": host, "alive": alive}


def _entry_json(entry: CheckpointEntry, kept_by: list[str] | None, newest: bool) -> dict[str, Any]:
    return {
        "step": entry.step,
        "folder": str(entry.folder),
        "complete": entry.complete,
        "problem": entry.problem,
        "sequence": entry.sequence,
        "created": entry.created,
        "bytes": entry.size,
        "metrics": entry.metrics,
        "kept_by": kept_by,
        "newest": newest,
    }


def list_run(
    directory: str | os.PathLike[str] | RemotePath, *, storage_options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A run directory's checkpoints, complete or not, and which retention rule keeps each (``ferry ckpt ls``).

    Returns:
        ``{"directory", "policy", "policy_recorded", "newest", "checkpoints": [{"step", "folder", "complete",
        "problem", "sequence", "created", "bytes", "metrics", "kept_by", "newest"}], "stale_temporaries",
        "writer"}``: checkpoints in save order, incomplete ones last; ``kept_by`` is ``None`` for incomplete ones;
        ``writer`` is ``{"pid", "host", "alive"}`` from the lock file of a Checkpointer writing the directory, else
        ``None`` (``alive``: whether that process runs; ``None`` when it is of another host).
        On object storage (``directory`` a URL, with ``storage_options`` for its file system) ``stale_temporaries``
        lists the step folders that are no checkpoint (a save or deletion cut short, a superseded save).

    Raises:
        CheckpointError: nothing at ``directory``, a file, or one checkpoint folder (the message names its parent);
            for a URL, also what the server refused.
    """
    directory = location(directory, storage_options)
    entries = scan(run_directory(directory), trainer_folders=True)
    policy, recorded = recorded_policy(entries)
    reasons = policy.reasons(entries)
    complete = [entry for entry in entries if entry.complete]
    newest = complete[-1].folder if complete else None
    stale = _stale(directory, entries)  # on object storage: step folders that are no checkpoint, listed apart
    return {
        "directory": str(directory),
        "policy": policy.to_json(),
        "policy_recorded": recorded,
        "newest": str(newest) if newest else None,
        "checkpoints": [
            _entry_json(e, reasons.get(e.folder), e.folder == newest) for e in entries if e.folder not in stale
        ],
        "stale_temporaries": [str(path) for path in stale],
        "writer": _writer(directory),
    }


def _stale(directory: Folder, entries: list[CheckpointEntry]) -> list[Folder]:
    """What crashed saves left: temporary folders (local), step folders that are no checkpoint (object storage)."""
    if isinstance(directory, RemotePath):
        return list(remote.debris(directory, entries))
    return list(stale_temporaries(directory))


def collect(
    directory: str | os.PathLike[str] | RemotePath,
    policy: RetentionPolicy | None = None,
    *,
    dry_run: bool = False,
    break_lock: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Remove the complete checkpoints ``policy`` does not keep, and stale temporary folders.

    ``dry_run`` removes nothing. The newest complete checkpoint and the best (by ``keep_best``) are never removed;
    nor are incomplete checkpoints (they are listed, to inspect and delete by hand). On object storage the stale
    folders are the step folders that are no checkpoint (saves or deletions cut short, superseded saves; see
    :mod:`ferry.checkpoint.run.remote`), each checkpoint goes manifest first, and incomplete multipart uploads
    under the run are aborted.

    Args:
        directory: The run directory, or its URL.
        policy: The retention policy; ``None``: the one recorded in the newest manifest (or the default).
        dry_run: Only say what would go.
        break_lock: First delete the run's write lock whoever holds it: for a lock left by a writer that is gone
            and that ferry cannot tell is gone (it ran on another host). Never while that writer may still run.
        storage_options: For a URL: passed to its fsspec file system.

    Returns:
        ``{"directory", "policy", "dry_run", "removed": [{"step", "folder", "bytes"}], "kept": [{"step", "folder",
        "kept_by"}], "incomplete": [{"step", "folder", "problem"}], "stale_temporaries": [path], "stale_bytes",
        "uploads": [key of an incomplete multipart upload aborted (would be, with dry_run)], "errors": [text],
        "broken_lock": {"pid", "host", "alive"} of the lock broken (would be) or None}``.
    """
    directory = location(directory, storage_options)
    lock: DirectoryLock | remote.RemoteLock
    if isinstance(directory, RemotePath):
        lock = remote.RemoteLock(run_directory(directory))
    else:
        lock = DirectoryLock(run_directory(directory))
    broken = None
    if break_lock:
        broken = _break(lock, dry_run=dry_run)
    if not dry_run:  # taken before scanning, so no save or prune of a Checkpointer can interleave
        try:
            lock.acquire()
        except CheckpointError as err:
            holder = _writer(lock.path.parent)
            if holder is None:
                raise  # not a lock held by another writer: the server or the file system refused
            where = f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}"
            raise CheckpointError(
                f"ferry ckpt gc removes checkpoints only while no Checkpointer writes the run, and {str(directory)!r} "
                f"is being written by another process, {where} (its lock {str(lock.path)!r}). Run gc once that "
                "training has ended, or "
                "--dry-run to see what gc would remove; if that process is gone and ran on another host, add "
                "--break-lock.",
                path=directory,
            ) from err
    try:
        entries = scan(directory, trainer_folders=True)
        policy = policy or recorded_policy(entries)[0]
        reasons = policy.reasons(entries)
        complete = [entry for entry in entries if entry.complete]
        protected = {complete[-1].folder} if complete else set()
        best = policy.best(complete)
        if best is not None:
            protected.add(best.folder)
        doomed = [entry for entry in complete if not reasons[entry.folder] and entry.folder not in protected]
        stale = _stale(directory, entries)
        stale_bytes = sum(_size(path) for path in stale)
        removed, errors = _remove(doomed, stale, dry_run=dry_run)
        uploads: list[str] = []
        if isinstance(directory, RemotePath):
            uploads = [key for key, _ in remote.pending_uploads(directory)]
            if not dry_run:
                remote.abort_uploads(directory)
        elif not dry_run and (doomed or stale):
            fsync_directory(directory)
    finally:
        lock.release()
    going = {entry.folder for entry in doomed}
    return {
        "directory": str(directory),
        "policy": policy.to_json(),
        "dry_run": dry_run,
        "removed": removed,
        "kept": [
            {"step": e.step, "folder": str(e.folder), "kept_by": reasons[e.folder]}
            for e in complete
            if e.folder not in going
        ],
        "incomplete": [
            {"step": e.step, "folder": str(e.folder), "problem": e.problem}
            for e in entries
            if not e.complete and e.folder not in stale
        ],
        "stale_temporaries": [str(path) for path in stale],
        "stale_bytes": stale_bytes,
        "uploads": uploads,
        "errors": errors,
        "broken_lock": broken,
    }


def _break(lock: DirectoryLock | remote.RemoteLock, *, dry_run: bool) -> dict[str, Any] | None:
    """Delete ``lock``'s file or object (not with ``dry_run``); returns the holder's ``{"pid", "host"}`` (None: none).

    Raises:
        CheckpointError: the holder is a process of this host that is running: its lock is not broken.
    """
    holder = _writer(lock.path.parent)
    if holder is None:
        return None
    if holder.get("alive"):
        raise CheckpointError(
            f"--break-lock refused: {str(lock.path.parent)!r} is being written by pid {holder['pid']} on this host "
            f"({holder['host']}), which is running. Breaking its lock would let two writers delete each other's "
            "checkpoints. Stop that process (or close its Checkpointer) first; a lock it leaves when it dies is "
            "taken over by the next writer without --break-lock.",
            path=lock.path,
        )
    if not dry_run:
        if isinstance(lock, remote.RemoteLock):
            lock.break_lock()
        else:
            with contextlib.suppress(FileNotFoundError):
                lock.path.unlink()
    return holder


def _size(path: Folder) -> int:
    """Bytes of a file, or of every file under a folder (what removing it frees)."""
    if isinstance(path, RemotePath):
        return sum(path.files().values())
    if path.is_file():
        return path.stat().st_size
    total = 0
    for item in path.rglob("*"):
        try:
            total += item.stat().st_size if item.is_file() else 0
        except OSError:
            continue
    return total


def _remove(
    doomed: list[CheckpointEntry], stale: list[Folder], *, dry_run: bool
) -> tuple[list[dict[str, Any]], list[str]]:
    """Remove the checkpoints ``doomed`` and the temporaries ``stale``; return what went, and what failed."""
    removed: list[dict[str, Any]] = []
    errors: list[str] = []
    for entry in doomed:
        size = entry.size
        if not dry_run:
            try:
                if isinstance(entry.folder, RemotePath):
                    remote.delete_checkpoint(entry.folder)
                else:
                    remove_checkpoint(entry.folder)
            except CheckpointError as err:
                errors.append(f"cannot remove {str(entry.folder)!r}: {err}")
                continue
            except OSError as err:
                errors.append(f"cannot remove {str(entry.folder)!r}: {err.strerror or err}")
                continue
        removed.append({"step": entry.step, "folder": str(entry.folder), "bytes": size})
    for path in stale if not dry_run else ():
        try:
            if isinstance(path, RemotePath):
                path.remove_tree()
            elif path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue  # gone already: another process cleaned it
        except CheckpointError as err:
            errors.append(f"cannot remove {str(path)!r}: {err}")
        except OSError as err:
            errors.append(f"cannot remove {str(path)!r}: {err.strerror or err}")
    return removed, errors
