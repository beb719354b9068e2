"""Atomic, durable file-system steps: every ferry write goes through these.

A write is durable when its bytes and the directory entry that names it are both on disk. The recipe: write a
temporary file in the same folder, flush, ``fsync`` it, ``os.replace`` it over the final name (atomic on POSIX and
Windows within one file system), then ``fsync`` the folder so the rename itself survives a power cut. A crash at any
moment leaves either the old file or the new one, never a mix.

A process killed mid-write (SIGKILL, OOM killer, power cut) leaves its temporary file behind, named
``<final>.ferry-tmp-<pid>-<hex>``. The next :func:`atomic_file` for the same final name removes such leftovers whose
writer is no longer running on this host, so a crash-looping job does not fill the disk with full-size copies.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "TMP_MARKER",
    "atomic_file",
    "fsync_directory",
    "pid_alive",
    "remove_stale_temporaries",
    "replace_durably",
    "temporary_name",
]

#: Every temporary file or folder ferry creates has this in its name, so leftovers from a crash are recognisable.
TMP_MARKER = ".ferry-tmp-"
#: What :func:`temporary_name` appends after ``TMP_MARKER``: the writer's process id and a random suffix.
_TMP_SUFFIX = re.compile(r"(\d+)-[0-9a-f]+")


def temporary_name(final: Path) -> Path:
    """Return a fresh temporary path beside ``final`` (same folder, so a rename onto ``final`` is atomic).

    The name is ``<final name>.ferry-tmp-<pid>-<8 hex digits>``: the process id lets a later process tell a crash's
    leftover (its writer is dead) from a write in progress (see :func:`remove_stale_temporaries`).
    """
    return final.with_name(f"{final.name}{TMP_MARKER}{os.getpid()}-{secrets.token_hex(4)}")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` is running on this host (``os.kill(pid, 0)``, which sends no signal).

    Errs on the side of "alive": a process of another user (``PermissionError``), an impossible pid, and every pid
    on Windows (where ``os.kill`` would terminate the process instead of probing it) count as alive.
    """
    if os.name == "nt" or pid <= 0:  # pragma: no cover - os.kill(pid, 0) kills on Windows; pid 0 is a group
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # PermissionError: someone else's live process; others: cannot tell
        return True
    return True


def remove_stale_temporaries(final: Path, *, alive: Callable[[int], bool] = pid_alive) -> list[Path]:
    """Remove the temporaries that crashed writers of ``final`` left beside it; return what was removed.

    Only names of the form ``<final name>.ferry-tmp-<pid>-<hex>`` (what :func:`temporary_name` makes for ``final``)
    are candidates, and only those whose ``pid`` is not a live process (``alive(pid)`` is False) are removed: a
    live writer, in this process or another, keeps its temporary. Leftover files are unlinked, leftover folders
    (a Checkpointer's) removed with their contents. Best effort: entries that vanish or cannot be removed are
    skipped, and a missing or unreadable folder removes nothing.

    Caveat: pids are per host. On a file system shared between machines, a writer on another machine whose pid
    happens to be free here would look dead; give concurrent writers on different hosts different final names.

    Args:
        final: The final file or folder name whose leftovers to remove.
        alive: Says whether a pid is running; injectable for tests.

    Returns:
        The paths removed, sorted.
    """
    prefix = final.name + TMP_MARKER
    removed = []
    try:
        with os.scandir(final.parent) as entries:
            candidates = [entry.name for entry in entries if entry.name.startswith(prefix)]
    except OSError:
        return []
    for name in sorted(candidates):
        match = _TMP_SUFFIX.fullmatch(name[len(prefix) :])
        if match is None or alive(int(match[1])):
            continue
        leftover = final.parent / name
        try:
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
        except OSError:
            continue
        removed.append(leftover)
    return removed


def fsync_directory(path: str | os.PathLike[str]) -> None:
    """``fsync`` a directory so that the entries created or renamed in it are durable.

    A no-op where directories cannot be opened (Windows), since there renames are durable once they return.

    Raises:
        OSError: the directory cannot be opened or synced.
    """
    if os.name == "nt":  # pragma: no cover - no directory handles on Windows
        return
    fd = os.open(os.fspath(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` (a file or folder) onto ``final`` with ``os.replace`` and fsync the parent folder.

    Raises:
        OSError: the rename or the fsync failed; ``final`` then still holds what it held before.
    """
    os.replace(tmp, final)
    fsync_directory(final.parent)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str], *, buffering: int = -1) -> Iterator[BinaryIO]:
    """Open a temporary file beside ``path`` for binary writing; on success commit it durably to ``path``.

    On any exception inside the block the temporary file is removed and ``path`` is left as it was. Before
    creating it, the temporaries of ``path`` left by writers that died (:func:`remove_stale_temporaries`) are
    removed.

    Args:
        path: The final file name.
        buffering: Passed to ``open``: ``0`` gives an unbuffered ``FileIO`` (for writers that seek and write large
            buffers themselves), ``-1`` the default buffered writer.

    Yields:
        The open temporary file.

    Raises:
        OSError: the file system refused a step (permissions, full disk, a failing fsync).
    """
    final = Path(path)
    remove_stale_temporaries(final)
    tmp = temporary_name(final)
    try:
        with open(tmp, "xb", buffering=buffering) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        replace_durably(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
