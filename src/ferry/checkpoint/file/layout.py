r"""The bytes of a ferry file: a safetensors file whose ``__metadata__`` carries the tree and the checksums.

Layout (all integers little-endian)::

    [8 bytes]  N, the length of the header in bytes (unsigned 64-bit)
    [N bytes]  the header: UTF-8 JSON, padded with spaces so that 8 + N is a multiple of 8 (of 4096 when the
               data is at least ``DIRECT_FROM`` bytes: the data then starts on a page boundary)
               {"__metadata__": {"ferry.format": "2",
                                 "ferry.tree": "<JSON: the structure and plain values, see tree.py>",
                                 "ferry.checksum_algorithm": "xxh3_64",
                                 "ferry.checksums": "{\"<tensor name>\": \"<16 hex digits>\", ...}",
                                 "ferry.header_checksum": "<8 hex digits>"},
                "<tensor name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
    [rest]     the raw bytes of every tensor, back to back in ``data_offsets`` order (offsets count from the
               end of the header); tensors are ordered by element size, largest first, so every tensor starts
               at a multiple of its element size

The checksum of a tensor is a hash of its stored bytes, by the algorithm that ``ferry.checksum_algorithm`` names
(see ``ALGORITHMS``): ``xxh3_64`` (XXH3, 64-bit, seed 0: ``xxhash.xxh3_64_intdigest(data)``, 16 hex digits) in the
files ferry writes now, ``crc32`` (``zlib.crc32``, 8 hex digits) in files from earlier versions, which ferry still
reads and verifies. Measured on one core of a 2-core x86 VM: xxh3_64 hashes 23-28 GB/s, zlib's crc32 3.4-4.2 GB/s
(both release the GIL), so verifying adds 0-13 % to a 1 GiB load there instead of about 40 %.

``ferry.format`` is ``"2"`` in the files ferry writes now (xxh3_64) and ``"1"`` in earlier ones (crc32); see
``FORMAT_VERSIONS``. A ferry that reads only format 1 therefore refuses a new file with a request to upgrade instead
of calling it corrupt, and this ferry refuses a file of a newer format the same way.

``ferry.header_checksum`` is always the CRC-32 of a canonical JSON of every other metadata entry and of the tensor
index (name, dtype, shape, offsets), so any flip that changes the meaning of the header is caught. The bytes that
carry no meaning are checked too: a ferry file's header must be exactly what the writer makes of its content
(compact JSON, keys in the writer's order, space padding to 8 or ``DIRECT_ALIGN`` bytes; ``is_canonical_header``),
so a space turned into a newline is caught as well. Headers of other safetensors writers may be laid out freely.
Checksums are fixed-width, which lets the writer reserve the header, stream the data while it checksums it, then
write the header.

Any safetensors reader opens these files (``safetensors.safe_open``); ferry's reader (``reader.py``) is its own,
so that each defect is reported precisely (which tensor, which offset, how many bytes are missing). The writer is
``writer.py``; this module holds what both share.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import struct
import sys
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import torch
import xxhash

from ferry.errors import CheckpointError

__all__ = [
    "ALGORITHM",
    "ALGORITHMS",
    "ALGORITHM_KEY",
    "CHECKSUMS_KEY",
    "CHUNK",
    "CODES",
    "DIRECT_ALIGN",
    "DIRECT_FROM",
    "DTYPES",
    "FERRY_KEYS",
    "FERRY_KEY_ORDER",
    "FOREIGN_CODES",
    "FORMAT_KEY",
    "FORMAT_VERSION",
    "FORMAT_VERSIONS",
    "HEADER_CHECKSUM_KEY",
    "MAX_HEADER_BYTES",
    "THREADS_FROM",
    "TORCH_NAMES",
    "TREE_KEY",
    "Blob",
    "Checksum",
    "Entry",
    "Hasher",
    "Header",
    "checksum_table",
    "dtype_code",
    "encode_header",
    "file_shape",
    "header_checksum",
    "is_canonical_header",
    "itemsize",
    "looks_like_safetensors",
    "parallel_map",
    "require_little_endian",
]

FORMAT_KEY = "ferry.format"
#: Every ``ferry.format`` this ferry reads, and what its files hold.
FORMAT_VERSIONS = {
    "1": "crc32 tensor checksums (also xxh3_64, in files of development builds written before 2 existed)",
    "2": "xxh3_64 tensor checksums",
}
#: The ``ferry.format`` of the files ferry writes.
FORMAT_VERSION = "2"
TREE_KEY = "ferry.tree"
ALGORITHM_KEY = "ferry.checksum_algorithm"
CHECKSUMS_KEY = "ferry.checksums"
HEADER_CHECKSUM_KEY = "ferry.header_checksum"
#: The ferry metadata keys, in the order the writer puts them in the header.
FERRY_KEY_ORDER = (FORMAT_KEY, TREE_KEY, ALGORITHM_KEY, CHECKSUMS_KEY, HEADER_CHECKSUM_KEY)
FERRY_KEYS = frozenset(FERRY_KEY_ORDER)

#: The largest header safetensors' own reader accepts (bytes).
MAX_HEADER_BYTES = 100_000_000
#: Large tensors are written, read and checksummed in chunks of this many bytes.
CHUNK = 64 << 20
#: Below this many data bytes, worker threads cost more than they save.
THREADS_FROM = 16 << 20
#: From this many data bytes on, the writer bypasses the page cache (``O_DIRECT`` where the file system has it).
DIRECT_FROM = THREADS_FROM
#: Alignment of file offsets, lengths and memory for direct I/O; the header is padded to it for such files.
DIRECT_ALIGN = 4096

TORCH_NAMES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U64": "uint64",
    "U32": "uint32",
    "U16": "uint16",
    "U8": "uint8",
    "BOOL": "bool",
    "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
    "F4": "float4_e2m1fn_x2",  # two 4-bit values per byte; safetensors counts 4-bit elements in the shape
}
#: safetensors dtype code -> torch dtype, for the dtypes this torch build has.
DTYPES: dict[str, torch.dtype] = {
    code: getattr(torch, name) for code, name in TORCH_NAMES.items() if hasattr(torch, name)
}
CODES: dict[torch.dtype, str] = {dtype: code for code, dtype in DTYPES.items()}
#: safetensors dtypes that torch cannot hold (6-bit floats).
FOREIGN_CODES = frozenset({"F6_E2M3", "F6_E3M2"})


def dtype_code(dtype: torch.dtype) -> str | None:
    """Return the safetensors code of ``dtype`` (``torch.float32`` -> ``"F32"``), or None if it has none."""
    return CODES.get(dtype)


def itemsize(code: str) -> int:
    """Bytes per element of the safetensors dtype ``code`` (``"F32"`` -> 4)."""
    return DTYPES[code].itemsize


class Hasher(Protocol):
    """A running checksum: ``update`` it with the bytes in order, then read ``intdigest``."""

    def update(self, data: memoryview, /) -> object:
        """Add ``data`` (the next bytes) to the checksum."""

    def intdigest(self) -> int:
        """The checksum of every byte added so far."""


class _Crc32:
    """``zlib.crc32`` with the interface of an xxhash object."""

    def __init__(self) -> None:
        self._value = 0

    def update(self, data: memoryview, /) -> None:
        self._value = zlib.crc32(data, self._value)

    def intdigest(self) -> int:
        return self._value


@dataclass(frozen=True)
class Checksum:
    """A per-tensor checksum algorithm: its name in ``ferry.checksum_algorithm`` and its hex width in the table."""

    name: str
    hex_digits: int
    new: Callable[[], Hasher]
    of: Callable[[memoryview], int]
    """The checksum of some bytes, in one call."""

    def format(self, value: int) -> str:
        """``value`` as the fixed-width lowercase hex string stored in the checksum table."""
        return f"{value:0{self.hex_digits}x}"


#: Every algorithm ferry reads, by its name in ``ferry.checksum_algorithm``.
ALGORITHMS: dict[str, Checksum] = {
    "crc32": Checksum("crc32", 8, _Crc32, zlib.crc32),
    "xxh3_64": Checksum("xxh3_64", 16, xxhash.xxh3_64, xxhash.xxh3_64_intdigest),
}
#: The algorithm of the files ferry writes.
ALGORITHM = ALGORITHMS["xxh3_64"]


@dataclass(frozen=True)
class Entry:
    """One tensor in the header: name, safetensors dtype code, torch shape, byte range in the data section."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int

    @property
    def nbytes(self) -> int:
        """Size of the stored bytes."""
        return self.end - self.start


@dataclass(frozen=True)
class Header:
    """A parsed, validated header.

    Attributes:
        path: The file it came from.
        data_start: Byte offset of the data section in the file (8 + header length).
        entries: The tensors, in file order.
        metadata: The ``__metadata__`` mapping (empty when absent).
        checksums: Tensor name -> checksum for ferry files; None for plain safetensors files.
        algorithm: The algorithm of ``checksums`` (None for plain safetensors files).
    """

    path: Path
    data_start: int
    entries: tuple[Entry, ...]
    metadata: Mapping[str, str]
    checksums: Mapping[str, int] | None
    algorithm: Checksum | None = None

    @property
    def is_ferry(self) -> bool:
        """Whether ferry wrote this file (it has a tree and checksums)."""
        return self.checksums is not None


@dataclass(frozen=True)
class Blob:
    """A tensor to store under ``name``; it may be on any device and non-contiguous (made contiguous on write)."""

    name: str
    tensor: torch.Tensor


def file_shape(shape_: Sequence[int], code: str) -> list[int]:
    """The shape safetensors records for a torch shape (F4 counts 4-bit values: twice torch's last dimension)."""
    shape = list(shape_)
    if code == "F4":  # safetensors counts 4-bit elements; torch counts bytes holding two
        shape[-1] *= 2
    return shape


def require_little_endian(path: Path) -> None:
    """Refuse to read or write ``path`` on a big-endian machine (ferry does not byte-swap)."""
    if sys.byteorder != "little":  # pragma: no cover - no big-endian CI machine
        raise CheckpointError(
            f"cannot read or write {str(path)!r} on this big-endian machine: ferry stores tensors little-endian "
            "and does not byte-swap yet. Use a little-endian machine (x86, ARM).",
            path=path,
        )


def header_checksum(metadata: Mapping[str, str], entries: Sequence[tuple[str, str, Sequence[int], int, int]]) -> int:
    """CRC-32 of everything the header says, except the header checksum itself."""
    document = {
        "metadata": {key: value for key, value in sorted(metadata.items()) if key != HEADER_CHECKSUM_KEY},
        "tensors": [[name, code, list(shape), start, end] for name, code, shape, start, end in entries],
    }
    return zlib.crc32(json.dumps(document, separators=(",", ":"), ensure_ascii=True).encode("ascii"))


def _header_json(metadata: Mapping[str, str], entries: Sequence[tuple[str, str, Sequence[int], int, int]]) -> bytes:
    """The JSON of the header, unpadded: compact, UTF-8, metadata first, then the tensors in the order given."""
    header: dict[str, object] = {"__metadata__": dict(metadata)}
    for name, code, shape, start, end in entries:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [start, end]}
    return json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _padding(length: int, align: int) -> int:
    """How many spaces follow a header JSON of ``length`` bytes so that the data starts at a multiple of ``align``."""
    return -(8 + length) % align


def encode_header(
    metadata: Mapping[str, str], entries: Sequence[tuple[str, str, Sequence[int], int, int]], *, align: int = 8
) -> bytes:
    """The 8-byte length and the JSON header, padded with spaces so that the data starts at a multiple of ``align``."""
    text = _header_json(metadata, entries)
    text += b" " * _padding(len(text), align)
    return struct.pack("<Q", len(text)) + text


def is_canonical_header(
    raw: bytes, metadata: Mapping[str, str], entries: Sequence[tuple[str, str, Sequence[int], int, int]]
) -> bool:
    """Whether ``raw`` (the header after its 8-byte length) is byte for byte what the writer makes of this content.

    The writer's bytes: ``metadata`` with the ferry keys in ``FERRY_KEY_ORDER``, the tensors in file order (as
    ``entries`` gives them), compact JSON, then the spaces that align the data to 8 or to ``DIRECT_ALIGN`` bytes
    (every ferry version wrote one of these). The checksums cover what the header means, not its bytes: this
    catches the rest (whitespace or escapes changed inside the JSON, another byte in the padding, keys reordered
    or repeated).
    """
    ordered = {key: metadata[key] for key in FERRY_KEY_ORDER if key in metadata}
    ordered.update((key, value) for key, value in metadata.items() if key not in FERRY_KEYS)
    text = _header_json(ordered, entries)
    padding = len(raw) - len(text)
    return (
        raw.startswith(text)
        and padding in (_padding(len(text), 8), _padding(len(text), DIRECT_ALIGN))
        and raw.endswith(b" " * padding)
    )


def checksum_table(pairs: Iterable[tuple[str, int]], algorithm: Checksum) -> str:
    """The ``ferry.checksums`` entry: JSON name -> fixed-width hex (so the header length never changes)."""
    return json.dumps(
        {name: algorithm.format(value) for name, value in pairs}, separators=(",", ":"), ensure_ascii=False
    )


def looks_like_safetensors(head: bytes) -> bool:
    """Whether the first bytes of a file (at least 9 of them) are a plausible safetensors start."""
    if len(head) < 9:
        return False
    (length,) = struct.unpack("<Q", head[:8])
    return 2 <= length <= MAX_HEADER_BYTES and head[8:9] == b"{"


_T = TypeVar("_T")
_R = TypeVar("_R")


def parallel_map(function: Callable[[_T], _R], items: Sequence[_T], nbytes: int) -> list[_R]:
    """``[function(item) for item in items]``, on worker threads when ``nbytes`` is large; stops at the first error."""
    if nbytes < THREADS_FROM or len(items) < 2:
        return [function(item) for item in items]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1))
    try:
        return [future.result() for future in [pool.submit(function, item) for item in items]]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
