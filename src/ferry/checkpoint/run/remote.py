"""A run directory on object storage (S3, GCS, Azure, ``memory://``): the commit protocol, which needs no rename.

Object stores have no rename (an S3 "rename" is a copy and a delete) and no folders, so the local protocol (write
under a temporary name, rename the finished folder onto ``step-<n>``) does not carry over. What does: an object
appears complete or not at all. The protocol for ``s3://bucket/run``::

    s3://bucket/run/
        .ferry-lock                   the writer's lease: {"pid", "host", "since", "token"}
        step-000000100.5e1f07a2/      one save of step 100: a folder name of its own, never used before
            state.safetensors         uploaded first (multipart, parts in parallel, streamed from the tensors)
            manifest.json             the commit: created last, only if absent (If-None-Match: *)
        step-000000200.0c9d4b71/ ...

1. **One writer.** A writer creates ``.ferry-lock`` with a conditional create before its first step, and checks
   it is still its own right before each commit. A lease left by a dead process of this host is taken over; one
   held from another host cannot be checked from here, and the error says how to remove it once that writer is gone
   (``ferry ckpt gc --break-lock``, which refuses while the holder runs on this host). Readers take no lock.
2. **A folder of its own, pieces first.** Each save uploads its files into a new folder ``step-<n>.<token>/``
   (each file complete or absent: a failed or killed upload leaves nothing visible). Folder names are never
   reused: some stores (SeaweedFS among them) finish deleting a folder after the delete has returned, so a save
   that wrote into a name just freed of debris could lose objects to that deletion. Under ``torch.distributed``
   every rank uploads its own files at once, and rank 0 commits after all have finished.
3. **The manifest is the commit.** ``manifest.json`` (the step, the save's sequence number, every file with its size)
   is created last, with ``If-None-Match: *`` where the server takes conditional writes, so two writers cannot both
   commit one folder. A reader lists a folder as a checkpoint only when its manifest exists and every file it names
   is there with its recorded size; :func:`ferry.load` then verifies every checksum while reading. One listing of
   the run finds the folders; a manifest or file the listing lacks is asked for by name before it counts as missing.
4. **Committed folders are never written again.** A new save of a step that is already committed goes to its own
   folder like any save; once it commits, the older one is deleted. Of two committed folders of one step, readers
   take the newer save (by sequence number).
5. **Retention after the commit.** Checkpoints the retention policy lets go are deleted only after a newer one has
   committed, manifest first: from the moment its manifest is gone a folder is no longer a checkpoint, so a
   deletion cut short leaves debris, never a damaged checkpoint that a reader would pick.
6. **Debris.** Folders without a manifest (saves that died, deletions cut short) and superseded folders are removed
   by the next writer when it starts, and by ``ferry ckpt gc``; incomplete multipart uploads into the run's own
   folders, which no reader sees, are aborted then too (S3), and a bucket lifecycle rule for incomplete uploads
   reclaims them as well. Runs stored below the run's URL are other runs: nothing of theirs is touched.

A local run directory keeps its own protocol (:mod:`ferry.checkpoint.run.commit`); both share the description of a
checkpoint folder (:mod:`ferry.checkpoint.folder`: its files, manifest and checksums).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any

from ferry._remote import remote_error
from ferry._remote_path import RemotePath, create_exclusive
from ferry.checkpoint.folder import MANIFEST_FILE, step_name, step_of
from ferry.checkpoint.run.folders import SUPERSEDED, CheckpointEntry, scan
from ferry.errors import CheckpointError

__all__ = [
    "RemoteLock",
    "abort_uploads",
    "check_readable",
    "check_writable",
    "clear_folder",
    "commit_manifest",
    "debris",
    "delete_checkpoint",
    "folder_of_step",
    "pending_uploads",
    "plan_folder",
    "remove_debris",
    "write_checkpoint",
]

LOCK_OBJECT = ".ferry-lock"


class RemoteLock:
    """The write lease of a run on object storage: the object ``.ferry-lock``, created only if absent.

    The same interface and meaning as :class:`ferry.checkpoint.run.lock.DirectoryLock`.
    """

    def __init__(self, directory: RemotePath) -> None:
        self.path = directory / LOCK_OBJECT
        self.held = False
        self._token = f"{os.getpid()}-{time.time_ns()}-{secrets.token_hex(4)}"

    def _holder(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def acquire(self) -> None:
        """Take the lease (a no-op if this object holds it already).

        Raises:
            CheckpointError: another live writer holds it (the message names its pid and host), or the server
                refused or could not be reached.
        """
        if self.held:
            return
        record = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "token": self._token}
        for _ in range(3):
            if create_exclusive(self.path, json.dumps(record).encode("utf-8")):
                self.held = True
                return
            holder = self._holder()
            if holder is None:
                continue  # released between our create and our read: try again
            if _stale(holder):
                self.path.unlink(missing_ok=True)
                continue
            since = holder.get("since")
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if isinstance(since, float) else "?"
            raise CheckpointError(
                f"checkpoint run {str(self.path.parent)!r} is being written by another process (pid "
                f"{holder.get('pid', '?')} on host {holder.get('host', '?')}, since {when}; lease object "
                f"{str(self.path)!r}). Two writers would delete each other's checkpoints. Save to another URL, close "
                "the other Checkpointer, or, if that process is gone, delete the lease: "
                f"`ferry ckpt gc {self.path.parent} --break-lock`. To read the run while it is written, create the "
                "Checkpointer with read_only=True.",
                path=str(self.path),
            )
        raise CheckpointError(  # pragma: no cover - three lost races in a row
            f"could not take the lease {str(self.path)!r}: other processes keep taking it. Save to another URL.",
            path=str(self.path),
        )

    def release(self) -> bool:
        """Give the lease back if this object holds it (and the object is still ours).

        Returns:
            False when the lease object could not be deleted (the server refused or was unreachable): it stays, and
            the next writer takes it over as stale (this host) or needs ``ferry ckpt gc --break-lock``.
        """
        if not self.held:
            return True
        self.held = False
        for _ in range(2):  # once more: the first request after a server restart may meet a dead pooled connection
            try:
                holder = self._holder()
                if holder and holder.get("token") == self._token:
                    self.path.unlink(missing_ok=True)
            except Exception:
                continue
            return True
        return False

    def check(self) -> None:
        """Raise unless the lease object is still this writer's (nobody broke it and took the run over).

        Raises:
            CheckpointError: the lease is gone or someone else's; the save in progress is not committed.
        """
        if not self.held:
            return
        holder = self._holder()
        if holder and holder.get("token") == self._token:
            return
        self.held = False
        who = (
            "nobody holds it now"
            if not holder
            else f"pid {holder.get('pid', '?')} on {holder.get('host', '?')} holds it"
        )
        raise CheckpointError(
            f"this writer's lease on {str(self.path.parent)!r} was removed ({who}; `ferry ckpt gc --break-lock`, or "
            "another writer that took the run over), so this save was not committed: two writers would delete "
            "each other's checkpoints. Stop the other writer, then create a new Checkpointer to go on saving.",
            path=self.path,
        )

    def break_lock(self) -> dict[str, Any] | None:
        """Delete the lease whoever holds it; returns the holder's record (None if there was no lease)."""
        holder = self._holder()
        self.path.unlink(missing_ok=True)
        return holder


def _stale(holder: dict[str, Any]) -> bool:
    """A lease of a process that is gone (this host, pid not running), or one without a readable record."""
    from ferry._fs import pid_alive

    if not holder:
        return True
    pid = holder.get("pid")
    return holder.get("host") == socket.gethostname() and isinstance(pid, int) and not pid_alive(pid)


def _not_an_object(directory: RemotePath) -> None:
    """Raise when the run's URL names an object (a file) rather than a folder of step folders."""
    if directory.is_file():
        raise CheckpointError(
            f"{str(directory)!r} is an object (a file), not a run folder: the Checkpointer keeps a run's checkpoints "
            "as step-<n>/ folders under a URL. Pass the URL of a folder (the run's).",
            path=directory,
        )


def check_writable(directory: RemotePath) -> None:
    """Write and delete a small object in ``directory``: credentials, bucket and permissions work, before any step.

    Raises:
        CheckpointError: the bucket does not exist, the credentials are refused, the server cannot be reached.
    """
    _not_an_object(directory)
    probe = directory / f".ferry-write-check-{secrets.token_hex(4)}"
    try:
        probe.write_bytes(b"")
        probe.unlink(missing_ok=True)
    except FileNotFoundError as err:
        raise remote_error(str(directory), err, "save") from err
    except CheckpointError as err:
        raise CheckpointError(
            f"cannot write the checkpoint run {str(directory)!r}, so the first save would fail after training steps "
            f"had been spent. {err} To only read this run, pass read_only=True.",
            path=str(directory),
        ) from err


def check_readable(directory: RemotePath) -> None:
    """A reader of ``directory``: its bucket exists, the credentials work, and a run is there.

    A run is there once a writer has started (its lease object) or saved: a reader started beside a running writer
    with no save yet lists nothing, as for a local folder the writer created; a URL where nothing is stored at all
    (a typo) is refused, as a local folder that does not exist is.

    Raises:
        CheckpointError: the bucket does not exist, nothing is stored at ``directory``, the credentials are refused,
            the server cannot be reached.
    """
    _not_an_object(directory)
    bucket = directory.url.split("://", 1)[1].split("/", 1)[0]
    try:
        found = directory.fs.exists(bucket)
    except Exception as err:
        raise remote_error(directory.url, err, "read") from err
    if not found:
        raise CheckpointError(
            f"cannot read the checkpoint run {str(directory)!r}: the bucket {bucket!r} does not exist. Check the "
            "bucket name in the URL and the endpoint in storage_options.",
            path=directory,
        )
    if not directory.files():
        raise CheckpointError(
            f"nothing is stored at {str(directory)!r}: no checkpoint, and no writer has started there (its lease "
            f"{LOCK_OBJECT} would be). A read_only=True Checkpointer reads an existing run: check the URL, or start "
            "the reader after the writer.",
            path=directory,
        )


def folder_of_step(entries: list[CheckpointEntry], directory: RemotePath, step: int) -> RemotePath:
    """The committed folder of ``step`` (the newest save of it), else the plain ``step-<n>`` name."""
    for entry in reversed(entries):
        if entry.complete and entry.step == step and isinstance(entry.folder, RemotePath):
            return entry.folder
    return directory / step_name(step)


def plan_folder(
    directory: RemotePath, entries: list[CheckpointEntry], step: int
) -> tuple[RemotePath, RemotePath | None]:
    """Where a new save of ``step`` goes, and the committed folder of that step it replaces (deleted after), if any.

    A folder name of its own, never used before: ``step-<n>.<8 hex digits>``. A name is never reused, because some
    stores (SeaweedFS among them) finish deleting a folder after the delete returns, and a save that wrote into a
    name just freed of debris could lose objects to that deletion. ``entries`` is
    :func:`~ferry.checkpoint.run.folders.scan` of ``directory``. Changes nothing.
    """
    replaced = next(
        (entry.folder for entry in reversed(entries) if entry.step == step and entry.complete),
        None,
    )
    folder = directory / f"{step_name(step)}.{secrets.token_hex(4)}"
    return folder, replaced if isinstance(replaced, RemotePath) else None


def clear_folder(folder: RemotePath) -> None:
    """Check that nothing is stored under ``folder`` yet, before a new save uploads there.

    Raises:
        CheckpointError: something is (another writer chose the same name): folder names are never reused.
    """
    if folder.files():
        raise CheckpointError(
            f"{str(folder)!r} already holds objects, and a save never writes into a folder used before: another "
            "writer is saving to this run. Give each writer its own URL.",
            path=folder,
        )


def commit_manifest(folder: RemotePath, manifest: dict[str, Any]) -> None:
    """Create ``folder/manifest.json``, only if absent: the commit.

    Raises:
        CheckpointError: a manifest is there already (another writer committed this folder), or the server failed.
    """
    data = json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8")
    if not create_exclusive(folder / MANIFEST_FILE, data):
        raise CheckpointError(
            f"{str(folder)!r} was committed by another writer while this save was uploading (its {MANIFEST_FILE} "
            "appeared first), so this save does not commit. Two processes are saving to one run: give each its own "
            "URL, or let one of them write.",
            path=str(folder),
        )


def delete_checkpoint(folder: RemotePath) -> None:
    """Delete a checkpoint folder: its manifest first (from then on it is no checkpoint), then everything else.

    Raises:
        CheckpointError: the server refused or failed; if the manifest could not be deleted the checkpoint stands.
    """
    (folder / MANIFEST_FILE).unlink(missing_ok=True)
    folder.remove_tree()


def debris(directory: RemotePath, entries: list[CheckpointEntry]) -> list[RemotePath]:
    """Step folders that are no checkpoint and never will be: debris that only the lease holder may delete.

    That is: folders with no manifest at all (a save or a deletion cut short), and folders superseded by a newer
    save of the same step.
    """
    found = []
    for entry in entries:
        if entry.complete or not isinstance(entry.folder, RemotePath):
            continue
        if entry.problem == SUPERSEDED or entry.has_manifest is False:
            found.append(entry.folder)
    return sorted(found)


def pending_uploads(directory: RemotePath) -> list[tuple[str, str]]:
    """The incomplete multipart uploads of the run ``directory``, as ``(key, upload id)`` (S3 only; else none).

    Only uploads into the run's own step folders count: a run stored below it (``run/other/step-<n>/``) is another
    writer's.
    """
    fs = directory.fs
    if not hasattr(fs, "call_s3") or not hasattr(fs, "split_path"):
        return []
    bucket, key, _ = fs.split_path(directory.fs_path)
    prefix = key.rstrip("/") + "/" if key else ""
    try:
        listing = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix)
    except Exception:
        return []  # a store that does not list uploads: its lifecycle rules reclaim them
    uploads = []
    for upload in listing.get("Uploads", []) or []:
        key = str(upload["Key"])
        folder, _, name = key[len(prefix) :].partition("/")
        if step_of(folder) is not None and name and "/" not in name:  # this run's pieces, not a run below it
            uploads.append((key, str(upload["UploadId"])))
    return uploads


def abort_uploads(directory: RemotePath) -> int:
    """Abort the incomplete multipart uploads under ``directory`` (S3 only; elsewhere nothing): returns how many.

    An incomplete upload is invisible to readers but holds its parts' space until aborted. Only the lease holder
    (or ``ferry ckpt gc`` while it holds the lease) may call this: it aborts uploads in progress too.
    """
    fs = directory.fs
    bucket = fs.split_path(directory.fs_path)[0] if hasattr(fs, "split_path") else ""
    aborted = 0
    for key, upload_id in pending_uploads(directory):
        with contextlib.suppress(Exception):
            fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload_id)
            aborted += 1
    return aborted


def write_checkpoint(
    directory: RemotePath,
    step: int,
    sequence: int,
    upload: Callable[[RemotePath], dict[str, dict[str, Any]]],
    manifest: dict[str, Any],
    *,
    lease: RemoteLock | None = None,
    planned: tuple[RemotePath, RemotePath | None] | None = None,
) -> RemotePath:
    """Save one checkpoint of ``step`` by the protocol above; returns its committed folder.

    Args:
        directory: The run (the caller holds its lease).
        step: The step.
        sequence: The save's sequence number (one more than the newest committed).
        upload: Uploads the checkpoint's files into the folder it is given; returns the manifest's ``files``.
        manifest: The manifest's other fields.
        lease: The writer's lease, checked to be still its own right before the commit.
        planned: The folder and the folder it replaces, from :func:`plan_folder` (else planned here).

    Raises:
        CheckpointError: an upload or the commit failed; the folder's pieces are removed and every committed
            checkpoint is as it was.
    """
    folder, replaced = plan_folder(directory, scan(directory), step) if planned is None else planned
    clear_folder(folder)
    try:
        files = upload(folder)
        if lease is not None:
            lease.check()
        commit_manifest(folder, {**manifest, "files": files})
    except BaseException:
        with contextlib.suppress(Exception):  # what is left is debris: the next writer or `ferry ckpt gc` removes it
            folder.remove_tree()
        raise
    # Committed: from here on the step is saved, whatever fails.
    if replaced is not None:
        with contextlib.suppress(Exception):  # a superseded folder that stays is debris, never a reader's pick
            delete_checkpoint(replaced)
    return folder


def remove_debris(directory: RemotePath) -> list[str]:
    """Delete the debris of crashed saves and cut-short deletions, and abort incomplete uploads (lease held).

    Returns:
        What could not be deleted, as messages.
    """
    errors = []
    for folder in debris(directory, scan(directory)):
        try:
            folder.remove_tree()
        except CheckpointError as err:
            errors.append(f"cannot remove {str(folder)!r}: {err}")
    abort_uploads(directory)
    return errors
