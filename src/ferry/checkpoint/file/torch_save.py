"""Files written by ``torch.save``: zip archives (torch >= 1.6), legacy pickles and tar files, and TorchScript.

Recognised by content, never by extension (a pickle of protocol 0 or 1 has no header: it is recognised by parsing
its first opcodes). They load through torch's restricted unpickler (``torch.load(weights_only=True)``), which builds
only tensors, containers and plain values. A pickle that names any other global would run that global's code; ferry
refuses it with :class:`~ferry.UnsafeCheckpointError` naming the global, unless the caller opts in with
``trusted=True``. On torch < 2.6 the restricted unpickler itself could be bypassed (CVE-2025-32434), so there ferry
refuses every untrusted pickle.

To name the globals and tell a plain pickle from a ``torch.save`` file, ferry reads the pickle's opcodes with
:mod:`pickletools`, which runs nothing. A plain pickle (``pickle.dump``, not ``torch.save``) is never unpickled, not
even with ``trusted=True``: ``torch.load`` would run all of it before finding that it is not a ``torch.save`` file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import pickle
import pickletools
import re
import warnings
import zipfile
from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, cast

import torch

from ferry.checkpoint.file.kinds import TorchSaveKind
from ferry.errors import CheckpointError, CorruptCheckpointError, UnsafeCheckpointError

__all__ = ["load_torch_file", "restricted_unpickler_is_safe", "verify_torch_file"]


#: How many leading bytes :func:`sniff` is given (fewer only for a shorter file).
#: The first pickle of every legacy (non-zip) ``torch.save`` file is this number (``torch.serialization``'s).
_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
_OPCODES = {op.code.encode("latin-1"): op for op in pickletools.opcodes}
#: Opcodes that push a string (a STACK_GLOBAL's module or name), and those that only manage the memo or framing.
_STRINGS = frozenset(
    {"UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "STRING", "BINSTRING", "SHORT_BINSTRING"}
)
_BOOKKEEPING = frozenset({"PROTO", "FRAME", "MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"})
#: How many opcodes a scan reads at most (about half a second): a huge plain pickle is judged by its start.
_SCAN_OPCODES = 1_000_000
#: torch warnings that say nothing to ferry's users (ferry's own messages name the protocol when it matters).
_NOISE = (r"Detected pickle protocol", r"TypedStorage is deprecated")
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
    "with torch.load(weights_only=False), and re-save it with ferry.save(obj, path) as a safetensors file that "
    "loads without running code; otherwise do not open it"
)
#: The same fix for ferry's command line (ferry ckpt inspect/verify/diff/convert take --trusted).
_FIX_UNSAFE_CLI = (
    "If you trust where this file came from, pass --trusted (it runs the file's pickle with "
    "torch.load(weights_only=False)), e.g. `ferry ckpt convert --trusted FILE OUT.safetensors` to re-save it as a "
    "safetensors file that loads without running code; otherwise do not open it"
)
_FIX_PLAIN = (
    "ferry.load reads ferry.save, safetensors and torch.save files. If you trust where this file came from, read it "
    "with pickle.load and save its tensors with ferry.save(obj, path); otherwise do not open it"
)


@dataclasses.dataclass(frozen=True)
class _Scan:
    """What one pickle's opcodes say, read without running it."""

    protocol: int  # PROTO's argument, else the newest protocol among its opcodes (0 or 1)
    globals: tuple[str, ...]  # "module.name" of every class or function it calls, in order, each once
    value: object  # the pickled value when it is a lone number (torch's magic number), else None


#: What Python's zipfile raises on damaged archives: a flipped "version needed" field gives NotImplementedError, a
#: flipped "encrypted" flag RuntimeError, a bad compression method NotImplementedError too.
_ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError, KeyError)


class _Bounded:
    """A reader over ``stream`` that never asks for more bytes than are left.

    A damaged length field in a pickle (``BINBYTES8`` of 2**60 bytes) then reads short, which ``pickletools`` reports
    as ``ValueError``, instead of allocating the declared size first (``MemoryError``).
    """

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        here = stream.tell()
        self._end = stream.seek(0, io.SEEK_END)
        stream.seek(here)

    def read(self, size: int = -1) -> bytes:
        left = max(0, self._end - self._stream.tell())
        return self._stream.read(left if size < 0 else min(size, left))

    def readline(self) -> bytes:
        return self._stream.readline()

    def tell(self) -> int:
        return self._stream.tell()


def _scan(stream: BinaryIO, limit: int = _SCAN_OPCODES) -> _Scan:
    """Read one pickle's opcodes from ``stream`` (left after its STOP) without running any of them.

    Stops after ``limit`` opcodes; the globals are then those of the pickle's start.

    Raises:
        ValueError: the bytes are not a pickle (up to the limit).
    """
    declared: int | None = None
    newest = 0
    found: dict[str, None] = {}
    memo: dict[int, object] = {}
    pushed: list[object] = []  # the values pushed, as far as a STACK_GLOBAL needs them (strings), else None
    values: list[object] = []
    for count, (opcode, arg, _) in enumerate(pickletools.genops(cast("BinaryIO", _Bounded(stream))), 1):
        name = opcode.name
        newest = max(newest, opcode.proto)
        number = arg if isinstance(arg, int) else 0
        if name == "PROTO":
            declared = number
        elif name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
            memo[len(memo) if name == "MEMOIZE" else number] = pushed[-1] if pushed else None
        elif name in ("GLOBAL", "INST", "STACK_GLOBAL"):
            if name == "STACK_GLOBAL":
                module, qualname = [item if isinstance(item, str) else "?" for item in [None, None, *pushed][-2:]]
            else:
                module, _, qualname = str(arg).partition(" ")
            found[_modern_name(module, qualname)] = None
            pushed.append(None)
        elif name not in _BOOKKEEPING:
            pushed.append(arg if name in _STRINGS else memo.get(number) if name.endswith("GET") else None)
        if name not in _BOOKKEEPING and name != "STOP":
            values.append(arg)
        if count >= limit:
            values.append(None)  # incomplete: not a lone number
            break
    lone = values[0] if len(values) == 1 and isinstance(values[0], int) else None
    return _Scan(declared if declared is not None else newest, tuple(found), lone)


def _modern_name(module: str, name: str) -> str:
    """``module.name`` as Python 3 (and torch's allowlist) spells it: ``__builtin__.set`` is ``builtins.set``."""
    if (module, name) in NAME_MAPPING:
        module, name = NAME_MAPPING[(module, name)]
    else:
        module = IMPORT_MAPPING.get(module, module)
    return f"{module}.{name}"


def _main_pickle(handle: BinaryIO, kind: TorchSaveKind) -> _Scan:
    """Scan the pickle that holds a ``torch.save`` file's object: ``data.pkl``, or a legacy file's fourth pickle.

    Raises:
        ValueError: no such pickle, or it does not parse.
    """
    handle.seek(0)
    if kind == "zip":
        try:
            with zipfile.ZipFile(handle) as archive:
                name = next(n for n in archive.namelist() if n == "data.pkl" or n.endswith("/data.pkl"))
                return _scan(io.BytesIO(archive.read(name)))
        except (*_ZIP_ERRORS, StopIteration) as err:
            raise ValueError(f"the zip archive is damaged ({err or 'no data.pkl'})") from err
    if kind != "pickle":
        raise ValueError(f"cannot scan a {kind} file")
    scans = [_scan(handle) for _ in range(4)]  # magic number, protocol version, system info, the object
    return _Scan(scans[-1].protocol, tuple(dict.fromkeys(g for s in scans for g in s.globals)), None)


def _unsafe(names: Sequence[str]) -> list[str]:
    """The globals among ``names`` that torch's restricted unpickler refuses (those not on its allowlist)."""
    allowed = {
        entry[1] if isinstance(entry, tuple) else f"{entry.__module__}.{entry.__qualname__}"
        for entry in torch.serialization.get_safe_globals()  # what the user allowed with add_safe_globals
    }
    try:
        from torch import _weights_only_unpickler as unpickler

        allowed.update(unpickler._get_allowed_globals())
    except Exception:  # pragma: no cover - a private torch API; without it, count only torch's own names safe
        allowed.update(name for name in names if name.startswith("torch.") or name == "collections.OrderedDict")
    return [name for name in names if name not in allowed]


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:5])
    return shown if len(names) <= 5 else f"{shown} and {len(names) - 5} more"


def _check_is_torch_pickle(handle: BinaryIO, path: Path) -> None:
    """Refuse a pickle that is not a legacy ``torch.save`` file, without running any of it.

    ``torch.load`` unpickles a legacy file's first pickle in full before checking that it is torch's magic number,
    so a plain pickle would run its code even under ``weights_only=False`` and then fail anyway.
    """
    handle.seek(0)
    try:
        first = _scan(handle)
    except ValueError as err:
        raise _corrupt(
            path,
            f"it starts like a pickle but its first object does not parse ({err}); a file cut short or damaged "
            "looks like this",
        ) from None
    if first.value == _MAGIC_NUMBER:
        return
    unsafe = _unsafe(first.globals)
    if unsafe:
        raise UnsafeCheckpointError(
            f"{str(path)!r} is a plain Python pickle (protocol {first.protocol}), not a torch.save file, and it calls "
            f"{_listed(unsafe)} when loaded. ferry refuses it: loading it would run that code (a pickle can run any "
            f"command), and torch.load cannot read it even with trusted=True. {_FIX_PLAIN}.",
            path=path,
        )
    raise CorruptCheckpointError(
        f"{str(path)!r} is not a checkpoint: it is a plain Python pickle (protocol {first.protocol}), not a "
        f"torch.save file (those start with torch's magic number). {_FIX_PLAIN}.",
        path=path,
    )


@contextlib.contextmanager
def _quiet_torch() -> Iterator[None]:
    """Silence torch's warnings that are noise here, so ``-W error`` test suites can load old files."""
    with warnings.catch_warnings():
        for message in _NOISE:
            warnings.filterwarnings("ignore", message=message, category=UserWarning)
        yield


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
    except _ZIP_ERRORS as err:
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


def _classify(err: Exception, path: Path, trusted: bool, scan: Callable[[], _Scan]) -> CheckpointError:
    message = str(err)
    if isinstance(err, pickle.UnpicklingError) and "Weights only load failed" in message:
        refused = _refused(message, path, scan)
        if refused is not None:
            return refused
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


def _refused(message: str, path: Path, scan: Callable[[], _Scan]) -> UnsafeCheckpointError | None:
    """Why torch's restricted unpickler refused the file, in ferry's words (torch's text stays the chained cause).

    None when the refusal looks like damage rather than a pickle that needs code.
    """
    try:
        found: _Scan | None = scan()
    except Exception:  # best effort, on bytes torch could not read: without a scan, torch's own finding is used
        found = None
    unsafe = _unsafe(found.globals) if found is not None else []
    named = re.search(r"GLOBAL (\S+)", message)
    if not unsafe and named:
        unsafe = [named[1]]
    if unsafe:
        return _unsafe_error(
            f"{str(path)!r} is a pickle that calls {_listed(unsafe)} when loaded; ferry refuses it because loading "
            f"it would run that code (a pickle can run any command).",
            path,
        )
    operand = re.search(r"Unsupported operand (\d+)", message)
    opcode = _OPCODES.get(bytes([int(operand[1])])) if operand and int(operand[1]) < 256 else None
    if opcode is not None and found is not None:
        return _unsafe_error(
            f"{str(path)!r} is a pickle of protocol {found.protocol}, and torch's restricted unpickler cannot read "
            f"its {opcode.name} opcode (it reads protocols 2 and 3; torch.save writes 2 unless told otherwise), so "
            f"ferry cannot load it without running its pickle unrestricted.",
            path,
        )
    if any(phrase in message for phrase in _NEEDS_CODE):
        return _unsafe_error(
            f"{str(path)!r} is a pickle that needs objects torch's restricted unpickler refuses "
            f"({_torch_detail(message)}); loading it would run code from the file.",
            path,
        )
    return None


def _unsafe_error(what: str, path: Path) -> UnsafeCheckpointError:
    """The error for a pickle that would run code: ``what`` it is, then the fix for Python and for the CLI."""
    return UnsafeCheckpointError(f"{what} {_FIX_UNSAFE}.", cli_message=f"{what} {_FIX_UNSAFE_CLI}.", path=path)


def _torch_detail(message: str) -> str:
    """The line of torch's refusal that names the problem, without its boilerplate about versions and docs."""
    boilerplate = ("Weights only load failed", "Please file an issue", "Check the documentation", "WeightsUnpickler")
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    specific = [line for line in lines if not line.startswith(boilerplate)]
    detail = specific[0] if specific else "no detail"
    return detail if len(detail) <= 200 else detail[:197] + "..."


def load_torch_file(handle: BinaryIO, path: Path, kind: TorchSaveKind, device: torch.device, trusted: bool) -> Any:
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
        UnsafeCheckpointError: the pickle needs arbitrary code (names the global) or uses opcodes torch's
            restricted unpickler cannot read (protocols 0, 1, 4, 5), and ``trusted`` is False; or it is a plain
            pickle (not ``torch.save``) that calls code, which is refused even when ``trusted``.
        CheckpointError: a TorchScript archive (open it with ``torch.jit.load``), or (trusted) a class that cannot be
            imported here.
        CorruptCheckpointError: a damaged or truncated archive, bytes that are no pickle torch can read, or a plain
            pickle (``pickle.dump``, not ``torch.save``).
    """
    if kind == "zip":
        _check_archive(handle, path)
    elif kind == "pickle":
        _check_is_torch_pickle(handle, path)
    if not trusted and not restricted_unpickler_is_safe(torch.__version__):
        raise UnsafeCheckpointError(
            f"{str(path)!r} is a pickle, and torch {torch.__version__}'s restricted unpickler can be bypassed "
            "(CVE-2025-32434, fixed in torch 2.6). Upgrade torch to 2.6 or later; or, if you trust where the file "
            "came from, load it with ferry.load(path, trusted=True).",
            path=path,
        )
    handle.seek(0)
    try:
        with _quiet_torch():
            return torch.load(handle, map_location=device, weights_only=not trusted)
    except Exception as err:  # torch.load raises all kinds of errors on damaged input: _classify sorts them
        raise _classify(err, path, trusted, lambda: _main_pickle(handle, kind)) from err


def verify_torch_file(handle: BinaryIO, path: Path, kind: TorchSaveKind) -> None:
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
    except _ZIP_ERRORS as err:
        raise _corrupt(path, f"an entry of its zip archive is damaged ({err})") from None
