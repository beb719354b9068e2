"""Files written by ``torch.save``: zip archives (torch >= 1.6), legacy pickles and tar files, and TorchScript.

Recognised by content, never by extension. They load through torch's restricted unpickler
(``torch.load(weights_only=True)``), which builds only tensors, containers and plain values. A pickle that names any
other global would run that global's code; ferry refuses it with :class:`~ferry.UnsafeCheckpointError` naming the
global, unless the caller opts in with ``trusted=True``. On torch < 2.6 the restricted unpickler itself could be
bypassed (CVE-2025-32434), so there ferry refuses every untrusted pickle.
"""

from __future__ import annotations

import pickle
import pickletools
import re
import zipfile
from pathlib import Path
from typing import Any, BinaryIO, Literal, TypeAlias

import torch

from ferry.errors import CheckpointError, CorruptCheckpointError, UnsafeCheckpointError

__all__ = ["Kind", "load_torch_file", "restricted_unpickler_is_safe", "sniff", "verify_torch_file"]

Kind: TypeAlias = Literal["zip", "pickle", "tar"]

_PICKLE_OPCODES = frozenset(op.code.encode("latin-1") for op in pickletools.opcodes)
#: Phrases of torch's restricted unpickler that mean "this needs code to run", not "these bytes are damaged".
_NEEDS_CODE = (
    "GLOBAL",
    "unrecognized function",
    "Can only build",
    "Can only create new object",
    "must be imported to load",
)
_FIX_UNSAFE = (
    "If you trust where this file came from, load it with ferry.load(path, trusted=True), which runs its pickle "
    "with torch.load(weights_only=False); otherwise do not open it"
)


def sniff(head: bytes) -> Kind | None:
    """Which kind of ``torch.save`` file starts with ``head`` (the first 512 bytes, or all of a shorter file)."""
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:  # pickle PROTO opcode and version
        return "pickle"
    if head[257:262] == b"ustar":  # torch's oldest format: a tar of pickles
        return "tar"
    return None


def restricted_unpickler_is_safe(version: str) -> bool:
    """Whether torch ``version``'s ``weights_only`` unpickler is free of the CVE-2025-32434 bypass (>= 2.6)."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return match is not None and (int(match[1]), int(match[2])) >= (2, 6)


def _corrupt(path: Path, what: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(
        f"checkpoint {str(path)!r} is corrupt: {what}. Restore the file from a copy, or load an earlier checkpoint.",
        path=path,
    )


def _zip_names(handle: BinaryIO, path: Path) -> list[str]:
    handle.seek(0)
    try:
        with zipfile.ZipFile(handle) as archive:
            return archive.namelist()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
        raise _corrupt(
            path,
            f"it starts like a zip archive (a torch.save file) but the archive is damaged ({err}); a file cut short "
            "by a crash during torch.save looks like this",
        ) from None


def _check_archive(handle: BinaryIO, path: Path) -> None:
    names = _zip_names(handle, path)
    if any(name.endswith("constants.pkl") or "/code/" in name for name in names):
        raise CheckpointError(
            f"{str(path)!r} is a TorchScript archive (a compiled model with its code), not a checkpoint of tensors. "
            "ferry loads tensors and state_dicts only. Open it with torch.jit.load(path), and save "
            "model.state_dict() with ferry.save if you need a checkpoint.",
            path=path,
        )
    if not any(name == "data.pkl" or name.endswith("/data.pkl") for name in names):
        raise _corrupt(
            path, f"it is a zip archive of {len(names)} entries without a data.pkl, so not a torch.save file"
        )


def _classify(err: Exception, path: Path, trusted: bool) -> CheckpointError:
    message = str(err)
    if isinstance(err, pickle.UnpicklingError) and "Weights only load failed" in message:
        found = re.search(r"GLOBAL (\S+)", message)
        if found:
            return UnsafeCheckpointError(
                f"{str(path)!r} is a pickle that calls {found[1]} when loaded; torch's restricted unpickler refuses "
                f"it because loading it would run that code (a pickle can run any command). {_FIX_UNSAFE}.",
                path=path,
            )
        operand = re.search(r"Unsupported operand (\d+)", message)
        if any(phrase in message for phrase in _NEEDS_CODE) or (
            operand and int(operand[1]) < 256 and bytes([int(operand[1])]) in _PICKLE_OPCODES
        ):
            detail = message.strip().splitlines()[-1] if message.strip() else type(err).__name__
            return UnsafeCheckpointError(
                f"{str(path)!r} is a pickle that needs objects torch's restricted unpickler refuses ({detail}); "
                f"loading it would run code from the file. {_FIX_UNSAFE}.",
                path=path,
            )
    if trusted and isinstance(err, (ImportError, AttributeError)):
        return CheckpointError(
            f"{str(path)!r} could not be unpickled: {type(err).__name__}: {err}. Its pickle refers to code that "
            "is not importable here. Install and import the package that defined those classes, then load again.",
            path=path,
        )
    first_line = message.strip().splitlines()[0] if message.strip() else "no message"
    return _corrupt(
        path,
        f"torch.load could not read it ({type(err).__name__}: {first_line}); it is truncated or damaged, or not a "
        "torch.save file",
    )


def load_torch_file(handle: BinaryIO, path: Path, kind: Kind, device: torch.device, trusted: bool) -> Any:
    """Load a ``torch.save`` file with every tensor on ``device`` (``torch.load``'s ``map_location``).

    Args:
        handle: The file, open for binary reading.
        path: Its path, for messages.
        kind: What :func:`sniff` said.
        device: Where tensors go, whatever device they were saved from.
        trusted: Run the pickle unrestricted (``weights_only=False``): only for files whose origin you trust.

    Returns:
        What ``torch.load`` returns.

    Raises:
        UnsafeCheckpointError: the pickle needs arbitrary code (names the global) and ``trusted`` is False.
        CheckpointError: a TorchScript archive (open it with ``torch.jit.load``), or (trusted) a class that cannot be
            imported here.
        CorruptCheckpointError: a damaged or truncated archive, or bytes that are no pickle torch can read.
    """
    if kind == "zip":
        _check_archive(handle, path)
    if not trusted and not restricted_unpickler_is_safe(torch.__version__):
        raise UnsafeCheckpointError(
            f"{str(path)!r} is a pickle, and torch {torch.__version__}'s restricted unpickler can be bypassed "
            "(CVE-2025-32434, fixed in torch 2.6). Upgrade torch to 2.6 or later; or, if you trust where the file "
            "came from, load it with ferry.load(path, trusted=True).",
            path=path,
        )
    handle.seek(0)
    try:
        return torch.load(handle, map_location=device, weights_only=not trusted)
    except Exception as err:  # torch.load raises all kinds of errors on damaged input: _classify sorts them
        raise _classify(err, path, trusted) from err


def verify_torch_file(handle: BinaryIO, path: Path, kind: Kind) -> None:
    """Check a ``torch.save`` file: the CRC-32 of every zip entry; a legacy pickle by loading it on the CPU.

    Raises:
        CorruptCheckpointError: a damaged entry, a truncated archive, or an unreadable pickle.
        CheckpointError: a TorchScript archive.
        UnsafeCheckpointError: a legacy pickle that needs arbitrary code (cannot be checked without running it).
    """
    if kind != "zip":
        load_torch_file(handle, path, kind, torch.device("cpu"), trusted=False)
        return
    _check_archive(handle, path)
    handle.seek(0)
    try:
        with zipfile.ZipFile(handle) as archive:
            for info in archive.infolist():
                with archive.open(info) as entry:
                    while entry.read(1 << 24):
                        pass
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as err:
        raise _corrupt(path, f"an entry of its zip archive is damaged ({err})") from None
