"""A lock file that stops two processes from writing one checkpoint directory.

The lock is a file ``.ferry-lock`` holding the writer's pid, host and start time as JSON. It is written under a
temporary name first and then hard-linked to ``.ferry-lock`` (``link`` fails if the name exists, atomically, on local
file systems and NFS), so the lock never exists without its content; a lock file that is empty or unreadable
anyway (written by hand, or by a crashed older writer) is treated as stale. A lock left by a process that no longer
runs on this host is stale and taken over; a lock held from another host cannot be checked from here, so its message
says how to remove it by hand once that writer is gone. Readers take no lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from ferry._fs import pid_alive, temporary_name
from ferry.errors import CheckpointError

__all__ = ["LOCK_FILE", "DirectoryLock"]

LOCK_FILE = ".ferry-lock"


class DirectoryLock:
    """The write lock of one checkpoint directory, taken with :meth:`acquire` and given back with :meth:`release`."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        self.held = False
        self._token = f"{os.getpid()}-{time.time_ns()}"

    def _holder(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def acquire(self) -> None:
        """Take the lock (a no-op if this object holds it already).

        Raises:
            CheckpointError: another live process holds it; the message names its pid and host.
        """
        if self.held:
            return
        record = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "token": self._token}
        for _ in range(3):
            try:
                self._create(record)
            except FileExistsError:
                holder = self._holder()
                if holder is None:
                    continue  # released between our open and our read: try again
                if self._stale(holder):
                    with contextlib.suppress(FileNotFoundError):
                        self.path.unlink()
                    continue
                raise CheckpointError(
                    f"checkpoint directory {str(self.path.parent)!r} is being written by another process "
                    f"(pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, lock file {str(self.path)!r}). "
                    "Two writers would delete each other's checkpoints. Save to another directory, close the other "
                    "Checkpointer, or, if that process is gone, delete the lock file (`ferry ckpt gc "
                    f"{self.path.parent} --break-lock`). To read the run while it is "
                    "written (an evaluation script), create the Checkpointer with read_only=True.",
                    path=self.path,
                ) from None
            except OSError as err:
                raise CheckpointError(
                    f"cannot create the lock file {str(self.path)!r}: {err.strerror}. Make the checkpoint directory "
                    "writable.",
                    path=self.path,
                ) from err
            self.held = True
            return
        raise CheckpointError(  # pragma: no cover - three lost races in a row
            f"could not take the lock {str(self.path)!r}: other processes keep taking it. Save to another directory.",
            path=self.path,
        )

    def _create(self, record: dict[str, Any]) -> None:
        """Create the lock file with ``record`` in it, atomically; FileExistsError if it exists."""
        tmp = temporary_name(self.path)
        try:
            tmp.write_text(json.dumps(record), encoding="utf-8")
            try:
                os.link(tmp, self.path)
            except (AttributeError, NotImplementedError, PermissionError):  # pragma: no cover - no hard links here
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(record, handle)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    @staticmethod
    def _stale(holder: dict[str, Any]) -> bool:
        """A lock whose process is gone (same host, pid not running), or one without a readable record."""
        if not holder:
            return True
        pid = holder.get("pid")
        return holder.get("host") == socket.gethostname() and isinstance(pid, int) and not pid_alive(pid)

    def release(self) -> None:
        """Give the lock back if this object holds it (and the file is still ours)."""
        if not self.held:
            return
        self.held = False
        holder = self._holder()
        if holder and holder.get("token") == self._token:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
