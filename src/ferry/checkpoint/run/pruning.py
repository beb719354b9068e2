"""Deleting pruned checkpoints on a background thread, so that pruning costs a save only a rename per folder.

After a save commits, the :class:`ferry.Checkpointer` retires each checkpoint its retention policy lets go: one atomic
rename to a temporary name (:func:`~ferry.checkpoint.run.folders.retire_checkpoint`), so the folder stops being a
checkpoint at once and a crash leaves only a temporary folder that the next start removes. A :class:`Deleter` thread
then removes the renamed folders and fsyncs the directory; deleting inline cost a save 0.13-0.23 s per GiB
(benchmarks/RESULTS.md). The thread is joined before the next prune, and in ``wait()`` and ``close()``.

The thread raises nothing: what it fails to delete is kept in :meth:`Deleter.failures`, which the Checkpointer turns
into a :class:`ferry.CheckpointWarning` per folder in the caller's thread.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ferry._fs import fsync_directory
from ferry.checkpoint.run.folders import retire_checkpoint

__all__ = ["Deleter", "FailedDeletion"]


@dataclass(frozen=True)
class FailedDeletion:
    """A retired checkpoint that could not be deleted.

    Attributes:
        folder: The checkpoint's folder, as it was named.
        renamed: The temporary name it was retired to, which is still on disk (whole or in part).
        error: What the deletion raised.
    """

    folder: Path
    renamed: Path
    error: Exception


class Deleter:
    """Retires checkpoint folders at once and deletes them on a background thread, one batch at a time.

    Safe to call from several threads (a Checkpointer prunes from its async writer thread and joins from the
    caller's).

    Args:
        directory: The run directory holding the folders; fsynced after each batch.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._failures: list[FailedDeletion] = []

    @property
    def busy(self) -> bool:
        """Whether a batch is still being deleted."""
        with self._lock:
            return self._thread is not None and self._thread.is_alive()

    def delete(self, folders: Sequence[Path]) -> None:
        """Rename ``folders`` to temporary names now and start a thread that deletes them; join the previous one first.

        A folder that cannot be renamed stays as it is, a complete checkpoint (the next prune tries again).
        """
        self.join()
        retired = []
        for folder in folders:
            with contextlib.suppress(OSError):
                retired.append((folder, retire_checkpoint(folder)))
        if not retired:
            return
        thread = threading.Thread(target=self._delete, args=(retired,), name="ferry-prune")
        with self._lock:
            self._thread = thread
        thread.start()

    def _delete(self, retired: list[tuple[Path, Path]]) -> None:
        for folder, renamed in retired:
            try:
                shutil.rmtree(renamed)
            except Exception as err:  # kept for the caller's thread: an exception here would reach no one
                with self._lock:
                    self._failures.append(FailedDeletion(folder, renamed, err))
        # The new checkpoint is committed and durable already; a failed fsync here can only make a deletion
        # not durable (the folder may come back after a power cut, as a temporary that the next start removes).
        with contextlib.suppress(OSError):
            fsync_directory(self.directory)

    def join(self) -> None:
        """Wait until the batch being deleted, if any, is deleted (or has failed)."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()

    def failures(self) -> list[FailedDeletion]:
        """The deletions that failed since the last call, oldest first; each is reported once."""
        with self._lock:
            failures, self._failures = self._failures, []
        return failures
