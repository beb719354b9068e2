"""What kind of file a checkpoint is, told from its first bytes: the one place ferry sniffs files.

ferry files and plain safetensors files (an 8-byte header length, then JSON), and the three kinds of ``torch.save``
file (a zip archive, a legacy pickle, the oldest tar of pickles). Nothing is validated here: reading a file is the
reader's job, and what is not a checkpoint gets a guess at what it is instead (an image, a Git LFS pointer).
"""

from __future__ import annotations

import io
import os
import pickletools
from pathlib import Path
from typing import BinaryIO, Literal, TypeAlias

from ferry.checkpoint.file.layout import FORMAT_KEY, looks_like_safetensors
from ferry.errors import CheckpointError

__all__ = [
    "KIND_NAMES",
    "SNIFF_BYTES",
    "FileKind",
    "TorchSaveKind",
    "foreign_kind",
    "sniff",
    "sniff_handle",
    "torch_save_kind",
]

#: How many leading bytes are read to tell the kinds apart.
SNIFF_BYTES = 512

TorchSaveKind: TypeAlias = Literal["zip", "pickle", "tar"]
FileKind: TypeAlias = Literal["ferry", "safetensors", "zip", "pickle", "tar", "unknown"]

#: Each kind, for people.
KIND_NAMES: dict[str, str] = {
    "ferry": "ferry file",
    "safetensors": "safetensors file",
    "zip": "torch.save file (zip)",
    "pickle": "torch.save file (legacy pickle)",
    "tar": "torch.save file (legacy tar)",
    "unknown": "unknown",
}


def sniff(file: Path) -> tuple[FileKind, int]:
    """What kind of file ``file`` is, by content, and its size in bytes.

    Only the first bytes, and a safetensors file's header, are read; nothing is validated.

    Raises:
        CheckpointError: the file cannot be opened or read (the message names it and the OS error).
    """
    try:
        with open(file, "rb") as handle:
            return sniff_handle(handle, os.fstat(handle.fileno()).st_size)
    except FileNotFoundError as err:
        raise CheckpointError(f"no checkpoint file at {str(file)!r}. Check the path.", path=file) from err
    except OSError as err:
        raise CheckpointError(
            f"cannot read {str(file)!r}: {err.strerror or err}. Check that the file is readable by this user.",
            path=file,
        ) from err


def sniff_handle(handle: BinaryIO, size: int) -> tuple[FileKind, int]:
    """:func:`sniff` of an open file (local, or an object on object storage) of ``size`` bytes, read from its start."""
    head = handle.read(SNIFF_BYTES)
    if looks_like_safetensors(head):
        handle.seek(8)
        raw = handle.read(int.from_bytes(head[:8], "little"))
        return ("ferry" if f'"{FORMAT_KEY}"'.encode() in raw else "safetensors"), size
    return torch_save_kind(head) or "unknown", size


def torch_save_kind(head: bytes) -> TorchSaveKind | None:
    """Which kind of ``torch.save`` file starts with ``head`` (the first 512 bytes, or all of a shorter file)."""
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:  # pickle PROTO opcode and version
        return "pickle"
    if head[257:262] == b"ustar":  # torch's oldest format: a tar of pickles
        return "tar"
    if _parses_as_old_pickle(head):  # protocols 0 and 1 have no PROTO opcode
        return "pickle"
    return None


def _parses_as_old_pickle(head: bytes) -> bool:
    """Whether ``head`` is pickle opcodes of protocol 0 or 1 up to a STOP, or (a full head) up to its end."""
    stream = io.BytesIO(head)
    count = 0
    try:
        for opcode, _, _ in pickletools.genops(stream):
            if opcode.name in ("PROTO", "FRAME"):
                return False
            count += 1
            if opcode.name == "STOP":
                return count >= 2
    except ValueError:  # an unknown opcode, or the head ends inside one: then a longer file goes on
        return len(head) >= SNIFF_BYTES and count >= 16 and stream.tell() >= len(head)
    return False  # pragma: no cover - genops ends with STOP or raises


_SIGNATURES = (
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x89HDF", "an HDF5 file (Keras?)"),
    (b"\x1f\x8b", "gzip-compressed"),
    (b"\x93NUMPY", "a NumPy .npy array"),
    (b"GGUF", "a GGUF model file"),
    (b"version https://git-lfs", "a Git LFS pointer: the real file was never downloaded (run git lfs pull)"),
)


def foreign_kind(head: bytes) -> str | None:
    """What a file that is no checkpoint looks like, from its first bytes (``"a PNG image"``, ``"text"``), or None."""
    kind = next((name for magic, name in _SIGNATURES if head.startswith(magic)), None)
    if kind is None and head and all(32 <= byte < 127 or byte in b"\t\r\n" for byte in head[:64]):
        kind = "text"
    return kind
