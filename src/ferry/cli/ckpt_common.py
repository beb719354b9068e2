"""What the ``ferry ckpt`` subcommands share.

Finding the checkpoint a path names, reading a file's structure without its data, flattening a saved object to
paths, JSON-ready values, sizes for people, and the progress bar.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ferry.checkpoint.file import layout, reader, tree
from ferry.checkpoint.file import torch_save as legacy
from ferry.checkpoint.file.api import load
from ferry.checkpoint.run.folders import MANIFEST_FILE, STATE_FILE, read_manifest, scan
from ferry.checkpoint.sharded import storage as dcp
from ferry.checkpoint.sharded.consolidate import plain_dcp_error
from ferry.errors import CheckpointError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "KIND_NAMES",
    "PROGRESS_FROM",
    "Meter",
    "Structure",
    "Target",
    "flatten",
    "human_bytes",
    "is_payload",
    "is_sharded",
    "jsonable",
    "meter",
    "read_structure",
    "resolve",
    "run_directory",
    "short_repr",
    "sniff",
]

#: Work over this many bytes gets a progress bar (when stderr is a terminal).
PROGRESS_FROM = 256 << 20

_STEP_NAME = re.compile(r"^step-\d+$")
#: What :func:`sniff` finds, for people.
KIND_NAMES = {
    "ferry": "ferry file",
    "safetensors": "safetensors file",
    "zip": "torch.save file (zip)",
    "pickle": "torch.save file (legacy pickle)",
    "tar": "torch.save file (legacy tar)",
    "unknown": "unknown",
}


@dataclass(frozen=True)
class Target:
    """The checkpoint file a command-line path names, and the Checkpointer folder it lies in, if any.

    Attributes:
        file: The file to read.
        folder: The ``step-<n>`` folder when the path was one, or a run directory (then its newest checkpoint).
        manifest: That folder's manifest, when it is complete.
        problem: Why that folder is not complete (``None`` when it is, or when there is no folder).
    """

    file: Path
    folder: Path | None = None
    manifest: dict[str, Any] | None = None
    problem: str | None = None


def _is_step_folder(path: Path) -> bool:
    return (
        bool(_STEP_NAME.match(path.name))
        or (path / MANIFEST_FILE).exists()
        or (path / STATE_FILE).exists()
        or (path / dcp.METADATA_FILE).exists()
    )


def is_sharded(folder: Path | None) -> bool:
    """Whether ``folder`` holds state saved through DCP with ferry's storage (a ``shards.json``)."""
    return folder is not None and (folder / dcp.METADATA_FILE).is_file()


def _missing(path: Path) -> CheckpointError:
    return CheckpointError(
        f"no file or folder at {str(path)!r} (working directory {os.getcwd()!r}). Check the path.", path=path
    )


def resolve(path: Path) -> Target:
    """The checkpoint ``path`` names: a file; a ``step-<n>`` folder (its state file); a run directory (its newest).

    A sharded step folder (see :func:`is_sharded`) is a ``step-<n>`` folder too; so is a folder written by
    ``dcp.save`` with ferry's storage (``shards.json``, no manifest).

    Raises:
        UnsafeCheckpointError: a folder written by DCP's own ``FileSystemWriter`` (a pickled ``.metadata``); the
            message gives the ``ferry ckpt convert --trusted`` command that converts it.
        CheckpointError: nothing at ``path``; a folder that is neither a checkpoint nor a run directory; a run
            directory without a complete checkpoint (the message lists what is wrong with each).
    """
    if path.is_file():
        return Target(path)
    if not path.is_dir():
        raise _missing(path)
    if dcp.is_plain_dcp(path) and not is_sharded(path):
        raise plain_dcp_error(path)
    if _is_step_folder(path):
        manifest, problem = read_manifest(path)
        return Target(path / STATE_FILE, path, manifest, problem)
    entries = scan(path)
    complete = [entry for entry in entries if entry.complete]
    if complete:
        newest = complete[-1]
        return Target(newest.folder / STATE_FILE, newest.folder, newest.manifest, None)
    if entries:
        problems = "; ".join(f"{entry.folder.name}: {entry.problem}" for entry in entries)
        raise CheckpointError(
            f"run directory {str(path)!r} holds no complete checkpoint ({problems}). Restore the folders from a "
            "copy, or pass one step folder to read what it holds.",
            path=path,
        )
    raise CheckpointError(
        f"{str(path)!r} is a folder but neither a checkpoint folder (no {MANIFEST_FILE} or {STATE_FILE}) nor a run "
        "directory (no step-<n> folders). Pass a checkpoint file, a step-<n> folder or a Checkpointer directory.",
        path=path,
    )


def run_directory(path: Path) -> Path:
    """``path`` if it is a Checkpointer run directory (a folder not itself a ``step-<n>`` folder).

    Raises:
        CheckpointError: nothing at ``path``, a file, or one checkpoint folder (the message names its parent).
    """
    if not path.exists():
        raise _missing(path)
    if not path.is_dir():
        raise CheckpointError(
            f"{str(path)!r} is a file; this command takes a Checkpointer run directory (the folder holding the "
            "step-<n> folders). Pass that folder.",
            path=path,
        )
    if _is_step_folder(path):
        raise CheckpointError(
            f"{str(path)!r} is one checkpoint folder; this command takes the run directory holding the step-<n> "
            f"folders. Pass its parent: {str(path.parent)!r}.",
            path=path,
        )
    return path


@dataclass
class Structure:
    """A checkpoint file's saved object with every tensor on ``meta`` (shapes and dtypes, no data).

    Attributes:
        obj: The object as loaded, but with ``meta`` tensors.
        kind: What the file is, for people: ``ferry file``, ``safetensors file``, ``torch.save file (zip)``, ...
        size: The file's size in bytes.
        metadata: A safetensors file's own ``__metadata__`` entries (ferry's keys left out); ferry files add
            ``ferry_format`` (the format version).
    """

    obj: Any
    kind: str
    size: int
    metadata: dict[str, str] = field(default_factory=dict)


def _file_error(file: Path, err: OSError) -> CheckpointError:
    if isinstance(err, FileNotFoundError):
        where = f" The checkpoint folder {str(file.parent)!r} lacks it." if file.name == STATE_FILE else ""
        return CheckpointError(f"no checkpoint file at {str(file)!r}.{where} Check the path.", path=file)
    return CheckpointError(
        f"cannot read {str(file)!r}: {err.strerror or err}. Check that the file is readable by this user.", path=file
    )


def sniff(file: Path) -> tuple[str, int]:
    """What kind of file ``file`` is, by content, and its size in bytes.

    The kind is ``ferry``, ``safetensors``, ``zip``, ``pickle``, ``tar`` or ``unknown``. Only the first bytes and
    the header are read; nothing is validated.

    Raises:
        CheckpointError: the file cannot be opened.
    """
    try:
        with open(file, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            head = handle.read(512)
            if layout.looks_like_safetensors(head):
                handle.seek(8)
                raw = handle.read(int.from_bytes(head[:8], "little"))
                return ("ferry" if f'"{layout.FORMAT_KEY}"'.encode() in raw else "safetensors"), size
    except OSError as err:
        raise _file_error(file, err) from err
    return legacy.sniff(head) or "unknown", size


def read_structure(file: Path, *, trusted: bool = False) -> Structure:
    """Read ``file``'s structure, shapes and dtypes without reading tensor data where the format allows.

    ferry and safetensors files: only the header is read and checked (checksums are not: that is ``verify``).
    ``torch.save`` files are unpickled with tensors placed on ``meta`` (torch's restricted unpickler unless
    ``trusted``).

    Raises:
        CheckpointError: as :func:`ferry.load` (TorchScript, unsafe pickle, not a checkpoint, corrupt header).
    """
    try:
        with open(file, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            head = handle.read(512)
            header = reader.read_header(handle, file, size) if layout.looks_like_safetensors(head) else None
    except OSError as err:
        raise _file_error(file, err) from err
    if header is None:
        kind = KIND_NAMES[legacy.sniff(head) or "unknown"]
        return Structure(load(file, device="meta", trusted=trusted), kind, size)
    metas = {
        entry.name: torch.empty(entry.shape, dtype=layout.DTYPES[entry.dtype], device="meta")
        for entry in header.entries
    }
    extra = {key: value for key, value in header.metadata.items() if key not in layout.FERRY_KEYS}
    if not header.is_ferry:
        return Structure(metas, KIND_NAMES["safetensors"], size, extra)
    numels = {name: tensor.numel() for name, tensor in metas.items()}
    obj = tree.decode(header.metadata[layout.TREE_KEY], numels, metas, file)
    return Structure(obj, KIND_NAMES["ferry"], size, {**extra, "ferry_format": header.metadata[layout.FORMAT_KEY]})


def is_payload(obj: object) -> bool:
    """Whether ``obj`` is what a :class:`ferry.Checkpointer` saves (``step``, ``objects``, ``values``, ...)."""
    return isinstance(obj, dict) and {"step", "objects", "values"} <= obj.keys()


def _key(key: object) -> tree.Key:
    if key is None or isinstance(key, (str, int, float)):
        return key
    return str(key)


def flatten(obj: object) -> list[tuple[str, Any]]:
    """Every leaf of ``obj`` with its path: dict keys and list indices joined by ``/``, as ferry names tensors.

    Dicts, lists and tuples (namedtuples too) are walked; anything else is a leaf, and so is an empty container.
    A bare leaf's path is ``~root``. Keys are escaped as in ferry files (``{"0": t}`` -> ``~s0``), so paths never
    collide.
    """
    leaves: list[tuple[str, Any]] = []

    def walk(value: object, trail: tuple[tree.Key, ...]) -> None:
        if isinstance(value, dict) and value:
            for key, item in value.items():
                walk(item, (*trail, _key(key)))
        elif isinstance(value, (list, tuple)) and not isinstance(value, torch.Size) and value:
            for index, item in enumerate(value):
                walk(item, (*trail, index))
        else:
            leaves.append((tree.tensor_name(trail), value))

    walk(obj, ())
    return leaves


def jsonable(value: object) -> Any:
    """A plain value as strict JSON.

    Non-finite floats become ``"inf"``/``"-inf"``/``"nan"``, dtypes and devices strings, ``torch.Size`` a list,
    anything else its (shortened) repr.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, torch.Size):
        return list(value)
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, (dict, list, tuple)) and not value:
        return [] if isinstance(value, (list, tuple)) else {}
    return short_repr(value, 200)


def short_repr(value: object, width: int = 60) -> str:
    """``repr(value)``, cut to ``width`` characters with an ellipsis."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def human_bytes(size: int) -> str:
    """``size`` in bytes for people: ``512 B``, ``1.5 KiB``, ``3.2 GiB``."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:,.1f} {unit}"


class Meter:
    """Advances a progress bar; does nothing when there is none (small work, or stderr is not a terminal)."""

    def __init__(self, advance: Any = None, describe: Any = None) -> None:
        self._advance = advance
        self._describe = describe

    def describe(self, text: str) -> None:
        """Show ``text`` (e.g. the file being read) beside the bar."""
        if self._describe is not None:
            self._describe(text)

    def advance(self, nbytes: int) -> None:
        """Count ``nbytes`` more as done."""
        if self._advance is not None:
            self._advance(nbytes)


@contextlib.contextmanager
def meter(
    total: int, description: str, console: Console | None = None, *, threshold: int = PROGRESS_FROM
) -> Iterator[Meter]:
    """A rich progress bar on stderr over ``total`` bytes when ``total >= threshold`` and stderr is a terminal.

    Args:
        total: Bytes of work.
        description: What the bar says at first.
        console: Where to draw it (default: a stderr console).
        threshold: Below this many bytes, no bar.
    """
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    console = console or Console(stderr=True)
    if total < threshold or not console.is_terminal:
        yield Meter()
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield Meter(
            lambda nbytes: bar.advance(task, nbytes),
            lambda text: bar.update(task, description=text),
        )
