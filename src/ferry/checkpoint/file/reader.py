"""Reading a ferry (or any safetensors) file.

Parse and validate the header, then read or stream the data through its checksums. Every defect becomes a
:class:`~ferry.CorruptCheckpointError` that says what is wrong and where.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import struct
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import torch

from ferry.checkpoint.file.layout import (
    ALGORITHM_KEY,
    ALGORITHMS,
    CHECKSUMS_KEY,
    DTYPES,
    FERRY_KEYS,
    FOREIGN_CODES,
    FORMAT_KEY,
    FORMAT_VERSION,
    FORMAT_VERSIONS,
    HEADER_CHECKSUM_KEY,
    MAX_HEADER_BYTES,
    THREADS_FROM,
    TORCH_NAMES,
    Checksum,
    Entry,
    Hasher,
    Header,
    file_shape,
    header_checksum,
    is_canonical_header,
    itemsize,
    parallel_map,
    require_little_endian,
)
from ferry.errors import CheckpointError, CorruptCheckpointError

__all__ = ["read_header", "read_into", "read_tensors", "verify_data"]

#: Bytes per read call: small enough that a piece is still in the CPU cache when its reader hashes it.
PIECE = 4 << 20
#: Most buffers one ``preadv`` call fills (POSIX guarantees at least 16; Linux allows 1024).
_IOV_MAX = 1024
#: Most reading threads: they overlap the disk with the copy out of the page cache and the page faults.
_READERS = 4
#: Tensors of this many bytes or more get memory of their own; smaller ones share an allocation.
_OWN_MEMORY_FROM = 1 << 20


def _corrupt(path: Path, what: str, fix: str | None = None) -> CorruptCheckpointError:
    fix = fix or "Restore the file from a copy, or load an earlier checkpoint; this one cannot be repaired"
    return CorruptCheckpointError(f"checkpoint {str(path)!r} is corrupt: {what}. {fix}.", path=path)


def _read_exact(handle: BinaryIO, nbytes: int) -> bytes:
    chunks = []
    while nbytes:
        chunk = handle.read(nbytes)
        if not chunk:
            break
        chunks.append(chunk)
        nbytes -= len(chunk)
    return b"".join(chunks)


def read_header(handle: BinaryIO, path: Path, size: int) -> Header:
    """Parse and validate the header of the safetensors file open in ``handle`` (``size`` bytes long).

    Checks the header length, the JSON, every entry's dtype, shape and byte range, that the ranges tile the data
    section exactly, and, for ferry files, the format version, the header checksum, and that the header's bytes
    are exactly those ferry writes for its content (so no byte of a ferry file escapes every check). Plain
    safetensors files may be laid out as their writer chose.

    Raises:
        CorruptCheckpointError: truncated, trailing bytes, malformed header, or a header checksum mismatch.
        CheckpointError: a dtype torch lacks (F6_*), or a ferry format newer than this ferry reads.
    """
    handle.seek(0)
    prefix = _read_exact(handle, 8)
    if len(prefix) < 8:
        raise _corrupt(path, f"the file is {size} bytes, too short for even the 8-byte header length: truncated")
    (length,) = struct.unpack("<Q", prefix)
    if length > MAX_HEADER_BYTES:
        raise _corrupt(path, f"its first 8 bytes give a header length of {length} bytes, over the safetensors limit")
    if 8 + length > size:
        raise _corrupt(
            path, f"the file is {size} bytes but the header says its header alone is {8 + length}: truncated"
        )
    raw = _read_exact(handle, length)
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise _corrupt(path, f"its {length}-byte header is not valid UTF-8 JSON ({err})") from None
    if not isinstance(parsed, dict):
        raise _corrupt(path, f"its header is a JSON {type(parsed).__name__}, not an object")
    metadata = parsed.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _corrupt(path, "its __metadata__ is not a mapping of strings to strings")
    # A ferry file's header is checksummed; its checksum needs the parsed tensor index, so a bit flip that breaks the
    # index itself is named as what it is (the checksummed header changed) before the detail.
    altered = "its checksummed header changed after it was written: " if FERRY_KEYS & metadata.keys() else ""
    entries = sorted(
        (_entry(path, name, info, altered) for name, info in parsed.items()), key=lambda e: (e.start, e.end)
    )
    data_start = 8 + length
    expected = 0
    for entry in entries:
        if entry.start != expected:
            raise _corrupt(
                path, f"tensor {entry.name!r} starts at data byte {entry.start}, expected {expected}: gap or overlap"
            )
        expected = entry.end
    if data_start + expected > size:
        raise _corrupt(path, f"the file is {size} bytes but the header says {data_start + expected}: truncated")
    if data_start + expected < size:
        raise _corrupt(
            path, f"the file is {size} bytes but the header says {data_start + expected}: trailing bytes after the data"
        )
    # Any one ferry key makes it a ferry file, so a bit flip in one key cannot pass it off as a plain file.
    if FERRY_KEYS & metadata.keys():
        checksums, algorithm = _check_ferry_metadata(path, metadata, entries, raw)
        return Header(path, data_start, tuple(entries), metadata, checksums, algorithm)
    return Header(path, data_start, tuple(entries), metadata, None)


def _entry(path: Path, name: str, info: object, altered: str = "") -> Entry:
    """Parse one tensor's header entry; ``altered`` prefixes the reason when the header is a checksummed one."""
    if not isinstance(info, dict):
        raise _corrupt(path, f"{altered}the header entry of tensor {name!r} is not an object")
    keys = ("dtype", "shape", "data_offsets")
    unknown = sorted(set(info) - set(keys))
    missing = [key for key in keys if key not in info]
    if missing:
        found = f" (it has {', '.join(map(repr, unknown))} instead)" if unknown else ""
        raise _corrupt(path, f"{altered}the header entry of tensor {name!r} lacks {', '.join(missing)}{found}")
    code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if code in FOREIGN_CODES or (isinstance(code, str) and code in TORCH_NAMES and code not in DTYPES):
        raise CheckpointError(
            f"tensor {name!r} in {str(path)!r} has dtype {code}, which torch {torch.__version__} cannot hold. "
            "Upgrade torch, or convert the file with a tool that understands that dtype.",
            path=path,
        )
    if not isinstance(code, str) or code not in DTYPES:
        raise _corrupt(path, f"{altered}tensor {name!r} has unknown dtype {code!r}")
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
        raise _corrupt(path, f"{altered}tensor {name!r} has a malformed shape {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)):
        raise _corrupt(path, f"{altered}tensor {name!r} has malformed data_offsets {offsets!r}")
    start, end = offsets
    if code == "F4":
        if not shape or shape[-1] % 2:
            raise _corrupt(path, f"{altered}F4 tensor {name!r} has shape {shape}: its last dimension must be even")
        shape = [*shape[:-1], shape[-1] // 2]
    numel = 1
    for dim in shape:
        numel *= dim
    if not 0 <= start <= end or end - start != numel * itemsize(code):
        raise _corrupt(
            path,
            f"{altered}tensor {name!r} ({code}, shape {shape}) needs {numel * itemsize(code)} bytes but its "
            f"data_offsets {offsets} span {end - start}",
        )
    return Entry(name, code, tuple(shape), start, end)


def _check_ferry_metadata(
    path: Path, metadata: Mapping[str, str], entries: Sequence[Entry], raw: bytes
) -> tuple[dict[str, int], Checksum]:
    """Check the ferry keys, the format, the header checksum and the header bytes; return the tensor checksums.

    ``raw`` is the header as stored (after its 8-byte length), ``entries`` the tensors in file order.
    """
    rows = [(e.name, e.dtype, file_shape(e.shape, e.dtype), e.start, e.end) for e in entries]
    expected = f"{header_checksum(metadata, rows):08x}"
    got = metadata.get(HEADER_CHECKSUM_KEY)
    version = metadata.get(FORMAT_KEY, "")
    if version.isdigit() and int(version) > int(FORMAT_VERSION) and got in (None, expected):
        raise CheckpointError(
            f"{str(path)!r} is a ferry format {version} file; this ferry reads formats up to {FORMAT_VERSION}. "
            "It was written by a newer ferry. Upgrade ferry (pip install -U ferry) to load it.",
            path=path,
        )
    missing = sorted(FERRY_KEYS - metadata.keys())
    if missing:
        raise _corrupt(path, f"its ferry metadata lacks {', '.join(missing)}")
    if got != expected:
        raise _corrupt(
            path,
            f"the header fails its checksum (stored crc32 {got}, computed {expected}): its structure, metadata or "
            "tensor index changed after it was written",
        )
    if version not in FORMAT_VERSIONS:
        raise _corrupt(path, f"unknown format {version!r}")
    algorithm = ALGORITHMS.get(metadata[ALGORITHM_KEY])
    if algorithm is None:  # the header checksum holds, so this is no bit flip: another (newer) writer
        raise CheckpointError(
            f"{str(path)!r} uses the checksum algorithm {metadata[ALGORITHM_KEY]!r}, which this ferry does not "
            f"know (it reads {', '.join(sorted(ALGORITHMS))}). It was written by a newer ferry. Upgrade ferry "
            "(pip install -U ferry) to load it.",
            path=path,
        )
    try:
        listed = json.loads(metadata[CHECKSUMS_KEY])
        checksums = {name: int(value, 16) for name, value in listed.items()}
    except (ValueError, TypeError, AttributeError) as err:
        raise _corrupt(path, f"its checksum table is malformed ({err})") from None
    if set(checksums) != {e.name for e in entries}:
        raise _corrupt(path, "its checksum table does not list exactly the tensors in the file")
    if not is_canonical_header(raw, metadata, rows):
        raise _corrupt(
            path,
            f"its {len(raw)}-byte header means what was written but its bytes differ from what ferry wrote (a "
            "padding space or whitespace changed, characters escaped differently, keys reordered or repeated): "
            "it was changed after it was written, so the rest of the file may be damaged too",
        )
    return checksums, algorithm


def _preadv_all(fd: int, buffers: list[memoryview], offset: int) -> int:
    """Fill ``buffers`` (in order) from file ``offset``; returns the bytes read (fewer only at the end of the file)."""
    total = 0
    while buffers:
        got = os.preadv(fd, buffers, offset + total)
        if not got:
            break
        total += got
        while buffers and got >= len(buffers[0]):
            got -= len(buffers.pop(0))
        if got:
            buffers[0] = buffers[0][got:]
    return total


def _read_into(handle: BinaryIO, lock: threading.Lock, buffers: list[memoryview], offset: int) -> int:
    """Fill ``buffers`` in order from file ``offset``; returns the bytes read (fewer only if the file shrank).

    Safe from several threads at once: ``preadv`` does not move the file position (elsewhere, ``lock`` guards a
    seek and reads).
    """
    buffers = [buffer for buffer in buffers if len(buffer)]
    pread_into = getattr(handle, "pread_into", None)
    if pread_into is not None:  # a remote object (ferry._remote.RemoteFile): one ranged GET, from any thread
        return int(pread_into(buffers, offset))
    if hasattr(os, "preadv"):
        return _preadv_all(handle.fileno(), buffers, offset)
    total = 0  # pragma: no cover - platforms without preadv (Windows)
    with lock:  # pragma: no cover
        handle.seek(offset)
        for buffer in buffers:
            got = handle.readinto(buffer) or 0  # type: ignore[attr-defined]
            total += got
            if got < len(buffer):
                break
    return total  # pragma: no cover


def _checksum_error(header: Header, entry: Entry, expected: int, got: int) -> CorruptCheckpointError:
    assert header.algorithm is not None
    name = header.algorithm.name
    return _corrupt(
        header.path,
        f"tensor {entry.name!r} fails its checksum (stored {name} {header.algorithm.format(expected)}, computed "
        f"{header.algorithm.format(got)}): its {entry.nbytes} bytes at file offset {header.data_start + entry.start} "
        "changed after they were written (disk, memory or transfer corruption)",
    )


def _short_read(header: Header, entry: Entry, got: int) -> CorruptCheckpointError:
    return _corrupt(
        header.path,
        f"reading tensor {entry.name!r} returned {got} of its {entry.nbytes} bytes: the file shrank while being "
        "read (another process truncated it)",
    )


@dataclass(frozen=True)
class _Region:
    """One allocation that consecutive tensors are read into: bytes ``start:end`` of the data section.

    A tensor of ``_OWN_MEMORY_FROM`` bytes or more gets a region of its own; smaller neighbours share one of up to
    ``PIECE`` bytes (one allocation and one read for thousands of optimizer scalars).
    """

    start: int
    end: int
    entries: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        """Size of the region."""
        return self.end - self.start


def _regions(entries: Sequence[Entry]) -> list[_Region]:
    regions: list[_Region] = []
    group: list[int] = []

    def close() -> None:
        if group:
            regions.append(_Region(entries[group[0]].start, entries[group[-1]].end, tuple(group)))
            group.clear()

    for index, entry in enumerate(entries):
        if entry.nbytes >= _OWN_MEMORY_FROM:
            close()
            regions.append(_Region(entry.start, entry.end, (index,)))
            continue
        if group and entry.end - entries[group[0]].start > PIECE:
            close()
        group.append(index)
    close()
    return regions


@dataclass(frozen=True)
class _Piece:
    """One read call: its ``parts`` fill the file from ``offset`` on.

    A part is (region index, which part of that region, start and end within the region's bytes).
    """

    offset: int
    parts: tuple[tuple[int, int, int, int], ...]


def _plan(regions: Sequence[_Region], data_start: int) -> list[_Piece]:
    """Cut the regions into pieces of at most ``PIECE`` bytes (and ``_IOV_MAX`` buffers), in file order.

    One piece is one read of consecutive file bytes, so a region that does not start where the previous one ended
    (a subset of a file's tensors is read: a rank's pieces of a sharded checkpoint) starts a new piece.
    """
    pieces: list[_Piece] = []
    parts: list[tuple[int, int, int, int]] = []
    offset = filled = 0
    for index, region in enumerate(regions):
        if parts and index > 0 and region.start != regions[index - 1].end:
            pieces.append(_Piece(offset, tuple(parts)))
            parts, filled = [], 0
        start = position = 0
        while start < region.nbytes:
            if not parts:
                offset = data_start + region.start + start
            end = min(region.nbytes, start + PIECE - filled)
            parts.append((index, position, start, end))
            filled += end - start
            start, position = end, position + 1
            if filled == PIECE or len(parts) == _IOV_MAX:
                pieces.append(_Piece(offset, tuple(parts)))
                parts, filled = [], 0
    if parts:
        pieces.append(_Piece(offset, tuple(parts)))
    return pieces


class _Verifier:
    """Checks the tensors of every region as the worker threads finish reading its parts, in any order.

    A region of one tensor is hashed part by part in order: the thread that completes the next part in order
    hashes it and every later part already read, so most bytes are hashed right after they were read, while still
    in the CPU cache. A shared region (small tensors) is hashed tensor by tensor once all of it is read.
    """

    def __init__(self, header: Header, regions: Sequence[_Region], views: Sequence[memoryview]) -> None:
        assert header.algorithm is not None
        assert header.checksums is not None
        self._header = header
        self._algorithm = header.algorithm
        self._checksums = header.checksums
        self._regions = regions
        self._views = views
        self._parts: dict[int, list[tuple[int, int]]] = {}  # regions read in several parts
        self._lock = threading.Lock()
        self._read: dict[int, list[bool]] = {}
        self._next: dict[int, int] = {}
        self._busy: set[int] = set()
        self._hashers: dict[int, Hasher] = {}

    def expect(self, pieces: Sequence[_Piece]) -> None:
        """Record how the pieces cut the regions."""
        counts: dict[int, list[tuple[int, int]]] = {}
        for piece in pieces:
            for index, _, start, end in piece.parts:
                counts.setdefault(index, []).append((start, end))
        self._parts = {index: parts for index, parts in counts.items() if len(parts) > 1}
        self._read = {index: [False] * len(parts) for index, parts in self._parts.items()}
        self._next = dict.fromkeys(self._parts, 0)
        for index, region in enumerate(self._regions):  # regions of no bytes (empty tensors) have no parts
            if not region.nbytes:
                self._check_entries(index)

    def done(self, index: int, position: int) -> None:
        """Part ``position`` of region ``index`` is read; hash what can now be hashed."""
        region = self._regions[index]
        parts = self._parts.get(index)
        if parts is None:
            self._check_entries(index)
            return
        with self._lock:
            self._read[index][position] = True
            if len(region.entries) > 1:  # shared region: wait for all of it
                if not all(self._read[index]):
                    return
                ready = True
            else:
                if index in self._busy or self._next[index] != position:
                    return
                self._busy.add(index)
                ready = False
        if ready:
            self._check_entries(index)
            return
        hasher = self._hashers.setdefault(index, self._algorithm.new())
        while True:
            lo, hi = parts[self._next[index]]
            hasher.update(self._views[index][lo:hi])
            with self._lock:
                self._next[index] += 1
                if self._next[index] == len(parts):
                    break
                if not self._read[index][self._next[index]]:
                    self._busy.discard(index)
                    return
        self._compare(region.entries[0], hasher.intdigest())

    def _check_entries(self, index: int) -> None:
        """Hash each tensor of region ``index`` (all of it is read) in one go."""
        region, view = self._regions[index], self._views[index]
        for entry_index in region.entries:
            entry = self._header.entries[entry_index]
            self._compare(entry_index, self._algorithm.of(view[entry.start - region.start : entry.end - region.start]))

    def _compare(self, entry_index: int, got: int) -> None:
        entry = self._header.entries[entry_index]
        if got != self._checksums[entry.name]:
            raise _checksum_error(self._header, entry, self._checksums[entry.name], got)


def read_tensors(handle: BinaryIO, header: Header) -> dict[str, torch.Tensor]:
    """Read every tensor onto the CPU, verifying ferry checksums; returns them by name, in file order.

    Tensors get fresh memory (``torch.empty``; a large tensor its own, small neighbours share one allocation of
    at most ``PIECE`` bytes) and nothing maps the file: changing the file later cannot change them. The data
    section is read in pieces of ``PIECE`` bytes by up to ``_READERS`` threads (one ``preadv`` fills the memory of
    many tensors), and each piece is hashed by the thread that read it, right after reading it. The threads
    overlap the disk with the work that costs CPU time: the copy out of the page cache, faulting in the fresh
    memory (expensive on VMs whose balloon hands freed memory back to the host) and hashing.

    Raises:
        CorruptCheckpointError: a tensor fails its checksum, or the file shrank while being read.
    """
    require_little_endian(header.path)
    regions = _regions(header.entries)
    memory = [torch.empty(-(-region.nbytes // 8) * 8, dtype=torch.uint8) for region in regions]
    views = [data.numpy().data[: region.nbytes] for data, region in zip(memory, regions, strict=True)]
    pieces = _plan(regions, header.data_start)
    verifier = _Verifier(header, regions, views) if header.checksums is not None else None
    if verifier is not None:
        verifier.expect(pieces)
    lock, claim = threading.Lock(), threading.Lock()
    numbers = iter(range(len(pieces)))
    failed = threading.Event()

    def work() -> None:
        try:
            while not failed.is_set():
                with claim:
                    number = next(numbers, None)
                if number is None:
                    return
                piece = pieces[number]
                buffers = [views[index][start:end] for index, _, start, end in piece.parts]
                got = _read_into(handle, lock, buffers, piece.offset)
                if got < sum(len(buffer) for buffer in buffers):
                    _short_piece(header, regions, piece, got)
                if verifier is not None:
                    for index, position, _, _ in piece.parts:
                        verifier.done(index, position)
        except BaseException:
            failed.set()
            raise

    size = header.entries[-1].end if header.entries else 0
    threads = min(_READERS, os.cpu_count() or 1, len(pieces)) if size >= THREADS_FROM else 1
    if threads <= 1:
        work()
    else:
        with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="ferry-read") as pool:
            futures = [pool.submit(work) for _ in range(threads)]
        for future in futures:
            future.result()
    tensors: dict[str, torch.Tensor] = {}
    for region, data, view in zip(regions, memory, views, strict=True):
        for index in region.entries:
            entry = header.entries[index]
            tensors[entry.name] = _tensor_at(data, view, entry, entry.start - region.start)
    return {entry.name: tensors[entry.name] for entry in header.entries}


#: Bytes of each staging buffer of :func:`read_into` (pinned host memory for an accelerator destination).
STAGING = 64 << 20


def read_into(handle: BinaryIO, header: Header, pairs: Sequence[tuple[int, torch.Tensor]]) -> None:
    """Read tensors of the file straight into ``destination`` tensors, verifying ferry checksums on the way.

    ``pairs`` holds ``(entry index, destination)``; a destination has the entry's shape and any dtype and device.
    A contiguous CPU destination of the entry's dtype is filled by reading the file into its memory (no other
    copy); any other (an accelerator, another dtype) through one reused staging buffer of :data:`STAGING` bytes,
    pinned for an accelerator, so host memory never holds more than that buffer whatever the size of the model.
    CPU destinations are read by up to ``_READERS`` threads.

    Raises:
        CorruptCheckpointError: a tensor fails its checksum, or the file shrank while being read.
    """
    require_little_endian(header.path)
    lock = threading.Lock()
    direct = [
        (index, destination)
        for index, destination in pairs
        if destination.device.type == "cpu"
        and destination.is_contiguous()
        and destination.dtype == DTYPES[header.entries[index].dtype]
    ]
    direct_ids = {id(destination) for _, destination in direct}
    staged = [(index, destination) for index, destination in pairs if id(destination) not in direct_ids]

    def read_direct(item: tuple[int, torch.Tensor]) -> None:
        index, destination = item
        entry = header.entries[index]
        if not entry.nbytes:
            return
        view = destination.view(-1).view(torch.uint8).numpy().data
        hasher = header.algorithm.new() if header.algorithm is not None else None
        for start in range(0, entry.nbytes, PIECE):
            part = view[start : start + PIECE]
            got = _read_into(handle, lock, [part], header.data_start + entry.start + start)
            if got < len(part):
                raise _short_read(header, entry, start + got)
            if hasher is not None:
                hasher.update(part)
        if hasher is not None and header.checksums is not None:
            _compare(header, entry, hasher.intdigest())

    total = sum(header.entries[index].nbytes for index, _ in direct)
    threads = min(_READERS, os.cpu_count() or 1, len(direct)) if total >= THREADS_FROM else 1
    if threads <= 1:
        for item in direct:
            read_direct(item)
    else:
        with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="ferry-read") as pool:
            for _ in pool.map(read_direct, direct):
                pass
    if not staged:
        return
    largest = max(header.entries[index].nbytes for index, _ in staged)
    pin = any(destination.device.type == "cuda" for _, destination in staged) and torch.cuda.is_available()
    buffer = torch.empty(min(STAGING, max(largest, 8)), dtype=torch.uint8, pin_memory=pin)
    buffer_view = buffer.numpy().data
    for index, destination in staged:
        entry = header.entries[index]
        dtype = DTYPES[entry.dtype]
        flat = destination.view(-1) if destination.is_contiguous() else None
        step = max(len(buffer_view) // dtype.itemsize, 1) * dtype.itemsize
        hasher = header.algorithm.new() if header.algorithm is not None else None
        whole = None if flat is not None else torch.empty(destination.shape, dtype=destination.dtype)
        for start in range(0, entry.nbytes, step):
            size = min(step, entry.nbytes - start)
            part = buffer_view[:size]
            got = _read_into(handle, lock, [part], header.data_start + entry.start + start)
            if got < size:
                raise _short_read(header, entry, start + got)
            if hasher is not None:
                hasher.update(part)
            values = buffer[:size].view(dtype)
            first = start // dtype.itemsize
            target = flat if flat is not None else whole.view(-1)  # type: ignore[union-attr]
            target[first : first + values.numel()].copy_(values)  # waits for the copy: the buffer is reused next
        if whole is not None:
            destination.copy_(whole)
        if hasher is not None and header.checksums is not None:
            _compare(header, entry, hasher.intdigest())


def _compare(header: Header, entry: Entry, got: int) -> None:
    assert header.checksums is not None
    expected = header.checksums[entry.name]
    if got != expected:
        raise _checksum_error(header, entry, expected, got)


def _short_piece(header: Header, regions: Sequence[_Region], piece: _Piece, got: int) -> None:
    """Raise the short-read error for the tensor of ``piece`` in which the file ended, ``got`` bytes in."""
    for index, _, start, end in piece.parts:
        if got < end - start:
            at = regions[index].start + start + got  # the data-section offset where the file ended
            entry = next(e for e in header.entries if e.start <= at < e.end)
            raise _short_read(header, entry, at - entry.start)
        got -= end - start


def _tensor_at(data: torch.Tensor, view: memoryview, entry: Entry, offset: int) -> torch.Tensor:
    """The tensor of ``entry`` at byte ``offset`` of its region's memory (``data``; ``view`` shares it).

    Each tensor gets a storage of its own that starts at its first byte (storage offset 0, as after
    ``torch.load``): some torch functions (``torch.set_rng_state``) assume that.
    """
    dtype = DTYPES[entry.dtype]
    if not entry.nbytes:
        return torch.empty(entry.shape, dtype=dtype)
    if offset == 0 and entry.nbytes == view.nbytes:  # a tensor with a region of its own
        return data[: entry.nbytes].view(dtype).reshape(entry.shape)
    if offset % dtype.itemsize:  # only files from other writers misalign tensors: copy to aligned memory
        return data[offset : offset + entry.nbytes].clone().view(dtype).reshape(entry.shape)
    tensor = torch.frombuffer(view[offset : offset + entry.nbytes], dtype=dtype)
    return tensor if len(entry.shape) == 1 else tensor.reshape(entry.shape)  # 1-D already: skip 1.5 us a tensor


def verify_data(handle: BinaryIO, header: Header) -> None:
    """Stream every tensor's bytes through its checksum (ferry files) without building tensors.

    Worker threads take whole tensors, each reading through a buffer of its own of ``PIECE`` bytes.

    Raises:
        CorruptCheckpointError: a tensor fails its checksum, or the file shrank while being read.
    """
    checksums, algorithm = header.checksums, header.algorithm
    if checksums is None or algorithm is None:
        return  # a plain safetensors file: read_header has checked the header, the offsets and the size
    lock = threading.Lock()
    local = threading.local()

    def check(entry: Entry) -> None:
        buffer = getattr(local, "buffer", None)
        if buffer is None:
            buffer = local.buffer = torch.empty(PIECE, dtype=torch.uint8).numpy().data
        hasher = algorithm.new()
        done = 0
        while done < entry.nbytes:
            part = buffer[: min(PIECE, entry.nbytes - done)]
            got = _read_into(handle, lock, [part], header.data_start + entry.start + done)
            hasher.update(part[:got])
            done += got
            if got < len(part):
                raise _short_read(header, entry, done)
        if hasher.intdigest() != checksums[entry.name]:
            raise _checksum_error(header, entry, checksums[entry.name], hasher.intdigest())

    parallel_map(check, header.entries, header.entries[-1].end if header.entries else 0)
