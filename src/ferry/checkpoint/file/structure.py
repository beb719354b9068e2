"""A file's saved object without its data: every tensor on ``meta``, from the header where the format allows.

ferry and safetensors files: only the header is read (and checked; checksums are not: that is ``verify``).
``torch.save`` files are unpickled with tensors placed on ``meta``. :func:`flatten` names every leaf by its tree
path, as ferry names tensors in its files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from ferry._remote_path import RemotePath
from ferry.checkpoint.file import layout, reader, tree
from ferry.checkpoint.file.api import load, open_any
from ferry.checkpoint.file.kinds import KIND_NAMES, SNIFF_BYTES, torch_save_kind
from ferry.errors import CheckpointError

__all__ = ["Structure", "flatten", "read_structure"]


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
        return CheckpointError(f"no checkpoint file at {str(file)!r}. Check the path.", path=file)
    return CheckpointError(
        f"cannot read {str(file)!r}: {err.strerror or err}. Check that the file is readable by this user.", path=file
    )


def read_structure(file: Path | RemotePath, *, trusted: bool = False) -> Structure:
    """Read ``file``'s structure, shapes and dtypes without reading tensor data where the format allows.

    ferry and safetensors files: only the header is read and checked (checksums are not: that is ``verify``).
    ``torch.save`` files are unpickled with tensors placed on ``meta`` (torch's restricted unpickler unless
    ``trusted``).

    Raises:
        CheckpointError: as :func:`ferry.load` (TorchScript, unsafe pickle, not a checkpoint, corrupt header).
    """
    if isinstance(file, RemotePath):
        with open_any(file) as (handle, size):
            head = handle.read(SNIFF_BYTES)
            shown = cast(Path, file.url)  # the file layer names the file in messages with str()
            header = reader.read_header(handle, shown, size) if layout.looks_like_safetensors(head) else None
    else:
        try:
            with open(file, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                head = handle.read(SNIFF_BYTES)
                header = reader.read_header(handle, file, size) if layout.looks_like_safetensors(head) else None
        except OSError as err:
            raise _file_error(file, err) from err
    if header is None:
        kind = KIND_NAMES[torch_save_kind(head) or "unknown"]
        return Structure(load(file, device="meta", trusted=trusted), kind, size)
    metas = {
        entry.name: torch.empty(entry.shape, dtype=layout.DTYPES[entry.dtype], device="meta")
        for entry in header.entries
    }
    extra = {key: value for key, value in header.metadata.items() if key not in layout.FERRY_KEYS}
    if not header.is_ferry:
        return Structure(metas, KIND_NAMES["safetensors"], size, extra)
    numels = {name: tensor.numel() for name, tensor in metas.items()}
    obj = tree.decode(
        header.metadata[layout.TREE_KEY], numels, metas, file if isinstance(file, Path) else cast(Path, file.url)
    )
    return Structure(obj, KIND_NAMES["ferry"], size, {**extra, "ferry_format": header.metadata[layout.FORMAT_KEY]})


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
