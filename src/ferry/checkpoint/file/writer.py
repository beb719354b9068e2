"""Writing a ferry file durably.

Reserve the header, stream every tensor to disk while checksumming it, then write the header; all inside
``atomic_file`` (temporary file, fsync, rename, fsync of the folder).

Files with at least ``DIRECT_FROM`` bytes of data bypass the page cache where the file system allows it (Linux
``O_DIRECT``): the tensors are copied piece by piece into page-aligned staging buffers that are kept from one save to
the next, each piece is hashed right after its copy (while still in the CPU cache), and writer threads send the full
buffers to the disk, several at a time. Measured on a 2-core VM (1 GiB, virtio disk, benchmarks/RESULTS.md): 0.37
to 0.68 s and 0.2 s of CPU time, where a plain ``write`` + ``fsync`` of the same bytes took 0.5 to 2.5 s and 0.33 to
1.7 s of CPU time. A buffered write copies every byte into the page cache, whose fresh memory this VM's balloon must
first fault in from the host (slow in some runs, not in others), and it evicts the training job's own cache. The
header of such a file is padded so that the data starts at a multiple of ``DIRECT_ALIGN``; the last write is padded
too, and the file truncated back. Elsewhere (small files, file systems without direct I/O, macOS, Windows) the
tensors are written from their own memory through the page cache, with ``sync_file_range`` starting the flush as
the writing goes.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import errno
import functools
import mmap
import os
import queue
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch

from ferry._fs import atomic_file
from ferry.checkpoint.file.layout import (
    ALGORITHM,
    ALGORITHM_KEY,
    CHECKSUMS_KEY,
    CHUNK,
    CODES,
    DIRECT_ALIGN,
    DIRECT_FROM,
    FORMAT_KEY,
    FORMAT_VERSION,
    HEADER_CHECKSUM_KEY,
    MAX_HEADER_BYTES,
    THREADS_FROM,
    TREE_KEY,
    Blob,
    checksum_table,
    encode_header,
    file_shape,
    header_checksum,
    require_little_endian,
)
from ferry.errors import CheckpointError

__all__ = ["write_file", "write_stream"]

#: Bytes per staging buffer, and so per direct write.
STAGE = 32 << 20
#: Staging buffers per save: the one being filled, the rest being written.
_STAGES = 3
#: Threads sending staging buffers to the disk at once.
_WRITERS = 2


def _host_bytes(tensor: torch.Tensor) -> np.ndarray:
    """The tensor's values as a flat uint8 array on the CPU; no copy for a contiguous CPU tensor."""
    tensor = tensor.detach()
    if tensor.is_conj():
        tensor = tensor.resolve_conj()
    if tensor.is_neg():
        tensor = tensor.resolve_neg()
    tensor = tensor.contiguous()
    if tensor.device.type != "cpu":
        tensor = tensor.to("cpu")
    return tensor.reshape(-1).view(torch.uint8).numpy()


# -- buffered writes ---------------------------------------------------------------------------------------------


@functools.cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux's ``sync_file_range`` through ctypes, or None elsewhere (it is only a hint)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):  # pragma: no cover - libc without it
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def _start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Ask the kernel to start writing ``nbytes`` at ``offset`` to disk now, so the final fsync has little left.

    Errors are ignored: this is a hint, the fsync is what makes the file durable.
    """
    function = _sync_file_range()
    if function is not None:
        function(fd, offset, nbytes, 2)  # SYNC_FILE_RANGE_WRITE: start writeback, do not wait


def _write_all(handle: BinaryIO, data: memoryview, offset: int) -> None:
    handle.seek(offset)
    fd = handle.fileno()
    done = 0
    while done < len(data):
        written = handle.write(data[done : done + CHUNK])
        if not written:  # pragma: no cover - raw files raise instead
            raise OSError(f"write returned {written!r}")
        _start_writeback(fd, offset + done, written)
        done += written


def _write_data(handle: BinaryIO, blobs: Sequence[Blob], offsets: Sequence[int]) -> list[int]:
    """Write each blob at its file offset through the page cache while worker threads checksum it."""
    if sum(blob.tensor.nbytes for blob in blobs) < THREADS_FROM:
        digests = []
        for blob, offset in zip(blobs, offsets, strict=True):
            data = _host_bytes(blob.tensor).data
            _write_all(handle, data, offset)
            digests.append(ALGORITHM.of(data))
        return digests
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1))
    try:
        futures: list[concurrent.futures.Future[int]] = []
        for index, (blob, offset) in enumerate(zip(blobs, offsets, strict=True)):
            data = _host_bytes(blob.tensor).data
            futures.append(pool.submit(ALGORITHM.of, data))
            _write_all(handle, data, offset)
            if index >= 4:  # bound the host copies of accelerator tensors kept alive for checksumming
                futures[index - 4].result()
        return [future.result() for future in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# -- direct writes -----------------------------------------------------------------------------------------------


class _StagePool:
    """Page-aligned staging buffers (anonymous maps), kept between saves.

    Fresh memory is what costs on a VM (faulting in 64 MiB takes longer than copying it), so a save borrows the
    buffers of the previous one. Concurrent saves each get their own; at most ``_STAGES`` are kept.
    """

    def __init__(self) -> None:
        self._free: list[mmap.mmap] = []
        self._lock = threading.Lock()

    def take(self, count: int) -> list[mmap.mmap]:
        with self._lock:
            taken, self._free = self._free[:count], self._free[count:]
        return taken + [mmap.mmap(-1, STAGE) for _ in range(count - len(taken))]

    def give(self, buffers: list[mmap.mmap]) -> None:
        with self._lock:
            self._free = (self._free + buffers)[:_STAGES]


_POOL = _StagePool()


class _Direct:
    """Whether a file descriptor has ``O_DIRECT`` on; turns it off for good if the file system refuses a write."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.on = _set_direct(fd, on=True)
        self._lock = threading.Lock()

    def refused(self) -> None:
        """A direct write failed with EINVAL (alignment the file system does not accept): write buffered."""
        with self._lock:
            if self.on:
                _set_direct(self.fd, on=False)
                self.on = False


def _set_direct(fd: int, *, on: bool) -> bool:
    """Turn ``O_DIRECT`` on or off for ``fd``; returns whether it is now on (False where unsupported)."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:  # pragma: no cover - not Linux
        return False
    import fcntl  # POSIX only

    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | flag if on else flags & ~flag)
    except OSError:  # the file system has no direct I/O (tmpfs on older kernels, some FUSE and network mounts)
        return False
    return on


@functools.cache
def _fallocate() -> Callable[[int, int, int, int], int] | None:
    """Linux's ``fallocate`` through ctypes (no zero-writing emulation, unlike ``posix_fallocate``), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):  # pragma: no cover - libc without it
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    function.restype = ctypes.c_int
    return function


def _preallocate(fd: int, size: int) -> None:
    """Reserve ``size`` bytes of disk for ``fd`` and set its length, where the file system can do it cheaply.

    Then the direct writes land inside the file instead of extending it, which ext4 lets several threads do at
    once (extending writes take the inode lock one at a time), and a full disk fails before any data is written.
    """
    function = _fallocate()
    if function is not None and function(fd, 0, 0, size) != 0:
        err = ctypes.get_errno()
        if err in (errno.ENOSPC, errno.EDQUOT):
            raise OSError(err, os.strerror(err))
        # EOPNOTSUPP and the like: the writes allocate as they go


def _pwrite_all(direct: _Direct, data: memoryview, offset: int) -> None:
    done = 0
    while done < len(data):
        try:
            written = os.pwrite(direct.fd, data[done:], offset + done)
        except OSError as err:
            if err.errno != errno.EINVAL or not direct.on:
                raise
            direct.refused()  # nothing was written: retry through the page cache
            continue
        if not written:  # pragma: no cover - a full disk raises ENOSPC instead
            raise OSError(errno.EIO, f"write returned {written!r}")
        done += written


def _write_staged(direct: _Direct, blobs: Sequence[Blob], data_start: int, size: int) -> list[int]:
    """Write the blobs back to back from ``data_start`` (a multiple of ``DIRECT_ALIGN``) through staging buffers.

    Returns their checksums. The file is ``size`` bytes long afterwards.
    """
    buffers = _POOL.take(min(_STAGES, -(-(size - data_start) // STAGE)))
    free: queue.SimpleQueue[mmap.mmap] = queue.SimpleQueue()
    for buffer in buffers:
        free.put(buffer)
    errors: list[BaseException] = []

    def write(buffer: mmap.mmap, nbytes: int, offset: int) -> None:
        try:
            if not errors:
                _pwrite_all(direct, memoryview(buffer)[:nbytes], offset)
        except BaseException as err:
            errors.append(err)
        finally:
            free.put(buffer)

    def next_buffer() -> tuple[mmap.mmap, np.ndarray]:
        buffer = free.get()
        if errors:
            raise errors[0]
        return buffer, np.frombuffer(buffer, dtype=np.uint8)

    _preallocate(direct.fd, size)
    pool = concurrent.futures.ThreadPoolExecutor(_WRITERS, thread_name_prefix="ferry-write")
    try:
        digests = []
        offset = data_start
        buffer, stage = next_buffer()
        filled = 0
        for blob in blobs:
            source = _host_bytes(blob.tensor)
            hasher = ALGORITHM.new()
            done = 0
            while done < source.size:
                count = min(source.size - done, STAGE - filled)
                piece = stage[filled : filled + count]
                np.copyto(piece, source[done : done + count])  # one thread: torch's would wait for a busy core
                hasher.update(piece.data)
                filled += count
                done += count
                if filled == STAGE:
                    pool.submit(write, buffer, filled, offset)
                    offset += filled
                    buffer, stage = next_buffer()
                    filled = 0
            digests.append(hasher.intdigest())
        if filled:
            padded = -(-filled // DIRECT_ALIGN) * DIRECT_ALIGN  # direct writes need whole blocks
            stage[filled:padded] = 0
            pool.submit(write, buffer, padded, offset)
    finally:
        pool.shutdown(wait=True)
        _POOL.give(buffers)
    if errors:
        raise errors[0]
    os.ftruncate(direct.fd, size)  # drop the padding of the last write
    return digests


def _write_header(direct: _Direct, header: bytes) -> None:
    """Write the header at offset 0; with O_DIRECT on it goes through an aligned buffer (its length is aligned)."""
    if not direct.on:
        _pwrite_all(direct, memoryview(header), 0)
        return
    aligned = mmap.mmap(-1, len(header))
    try:
        aligned.write(header)
        with memoryview(aligned) as view:
            _pwrite_all(direct, view, 0)
    finally:
        aligned.close()


def write_stream(stream: BinaryIO, name: str, tree_json: str, blobs: Sequence[Blob]) -> None:
    """Write the same file as :func:`write_file` front to back into ``stream``, which cannot seek (an upload).

    The header comes first in the file and holds every tensor's checksum, so the tensors are checksummed first,
    from their own memory (a tensor on an accelerator is copied to the CPU for that, and once more when written),
    then the header and the tensors are written in file order, one ``CHUNK`` at a time. Nothing holds more than one
    tensor's host copy at once.

    Args:
        stream: Where the bytes go, in order (fsspec's upload stream).
        name: The URL, for messages.
        tree_json: The encoded structure (tree.py).
        blobs: The tensors, with unique names.

    Raises:
        CheckpointError: a header over 100 MB.
        OSError: the stream failed.
    """
    order, rows, metadata, align, _ = _layout(name, tree_json, blobs, direct=False)
    digests = [ALGORITHM.of(_host_bytes(blob.tensor).data) for blob in order]
    metadata[CHECKSUMS_KEY] = checksum_table(zip((blob.name for blob in order), digests, strict=True), ALGORITHM)
    metadata[HEADER_CHECKSUM_KEY] = f"{header_checksum(metadata, rows):08x}"
    stream.write(encode_header(metadata, rows, align=align))
    for blob in order:
        data = _host_bytes(blob.tensor).data
        for start in range(0, len(data), CHUNK):
            stream.write(data[start : start + CHUNK])


def _layout(
    name: str, tree_json: str, blobs: Sequence[Blob], *, direct: bool
) -> tuple[list[Blob], list[tuple[str, str, list[int], int, int]], dict[str, str], int, int]:
    """The file's plan: tensors in file order, header rows, metadata (checksums zeroed), alignment, data bytes.

    ``direct``: the file may be written with direct I/O, so from ``DIRECT_FROM`` bytes of data on its data starts
    at a multiple of ``DIRECT_ALIGN``.
    """
    order = sorted(blobs, key=lambda blob: -blob.tensor.element_size())  # stable: tree order within a size
    rows: list[tuple[str, str, list[int], int, int]] = []
    offset = 0
    for blob in order:
        code = CODES[blob.tensor.dtype]  # tree.py has checked every dtype
        nbytes = blob.tensor.numel() * blob.tensor.element_size()
        rows.append((blob.name, code, file_shape(blob.tensor.shape, code), offset, offset + nbytes))
        offset += nbytes
    align = DIRECT_ALIGN if direct and offset >= DIRECT_FROM else 8
    metadata = {  # in FERRY_KEY_ORDER
        FORMAT_KEY: FORMAT_VERSION,
        TREE_KEY: tree_json,
        ALGORITHM_KEY: ALGORITHM.name,
        CHECKSUMS_KEY: checksum_table(((blob.name, 0) for blob in order), ALGORITHM),
        HEADER_CHECKSUM_KEY: "00000000",
    }
    reserved = encode_header(metadata, rows, align=align)
    if len(reserved) - 8 > MAX_HEADER_BYTES:
        raise CheckpointError(
            f"cannot save {name!r}: its header would be {len(reserved) - 8} bytes, over the "
            f"{MAX_HEADER_BYTES}-byte limit of safetensors readers. The structure holds too many plain values or "
            "tensors. Store large collections of numbers as tensors (torch.tensor(values)).",
            path=name,
        )
    return order, rows, metadata, align, offset


def write_file(path: Path, tree_json: str, blobs: Sequence[Blob]) -> None:
    """Write ``blobs`` and the tree to ``path`` durably (temporary file, fsync, rename, fsync of the folder).

    Args:
        path: The final file name; its folder must exist.
        tree_json: The encoded structure (tree.py).
        blobs: The tensors, with unique names.

    Raises:
        CheckpointError: a dtype safetensors cannot store, or a header over 100 MB.
        OSError: the file system refused a step; ``path`` then still holds what it held before.
    """
    require_little_endian(path)
    order, rows, metadata, align, offset = _layout(str(path), tree_json, blobs, direct=True)
    staged = offset >= DIRECT_FROM
    reserved = encode_header(metadata, rows, align=align)
    with atomic_file(path, buffering=0) as handle:
        direct = _Direct(handle.fileno()) if staged else None
        if direct is not None and direct.on:
            digests = _write_staged(direct, order, len(reserved), len(reserved) + offset)
        else:
            digests = _write_data(handle, order, [len(reserved) + row[3] for row in rows])
        metadata[CHECKSUMS_KEY] = checksum_table(zip((blob.name for blob in order), digests, strict=True), ALGORITHM)
        metadata[HEADER_CHECKSUM_KEY] = f"{header_checksum(metadata, rows):08x}"
        final = encode_header(metadata, rows, align=align)
        assert len(final) == len(reserved), "fixed-width checksums keep the header length"
        if direct is not None and direct.on:
            _write_header(direct, final)
        else:
            _write_all(handle, memoryview(final), 0)
