"""Atomic, durable file-system steps: every ferry write goes through these.

A write is durable when its bytes and the directory entry that names it are both on disk. The recipe: write a
temporary file in the same folder, flush, ``fsync`` it, ``os.replace`` it over the final name (atomic on POSIX and
Windows within one file system), then ``fsync`` the folder so the rename itself survives a power cut. A crash at any
moment leaves either the old file or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["TMP_MARKER", "atomic_file", "fsync_directory", "replace_durably", "temporary_name"]

#: Every temporary file or folder ferry creates has this in its name, so leftovers from a crash are recognisable.
TMP_MARKER = ".ferry-tmp-"


def temporary_name(final: Path) -> Path:
    """Return a fresh temporary path beside ``final`` (same folder, so a rename onto ``final`` is atomic)."""
    return final.with_name(f"{final.name}{TMP_MARKER}{os.getpid()}-{secrets.token_hex(4)}")


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

    On any exception inside the block the temporary file is removed and ``path`` is left as it was.

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
