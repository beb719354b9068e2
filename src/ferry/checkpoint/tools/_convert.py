"""Any checkpoint ferry loads (``torch.save`` files above all) to one ferry file (``ferry ckpt convert IN OUT``).

A sharded checkpoint folder (saved under ``torch.distributed``, or by ``torch.distributed.checkpoint`` itself with
``--trusted``) becomes one file: every tensor whole, loaded in this process (see
:mod:`ferry.checkpoint.sharded.consolidate`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from ferry._remote import is_url
from ferry._remote_path import Folder, RemotePath
from ferry.checkpoint.file.api import load, open_any, save, verify
from ferry.checkpoint.file.kinds import KIND_NAMES, FileKind, sniff, sniff_handle
from ferry.checkpoint.file.structure import flatten
from ferry.checkpoint.folder import MANIFEST_FILE, STATE_FILE, has_shards, is_plain_dcp
from ferry.checkpoint.sharded.consolidate import load_sharded_folder
from ferry.checkpoint.tools._paths import Progress, location, no_progress, resolve
from ferry.errors import ArgumentError, CheckpointError

__all__ = ["convert"]


def _sharded_source(source: Folder) -> tuple[Folder, str] | None:
    """The folder to load with :func:`load_sharded_folder` and what it is, when ``source`` names one; else None."""
    if isinstance(source, Path) and source.is_dir() and is_plain_dcp(source):
        return source, "DCP folder (torch FileSystemWriter)"
    folder = resolve(source).folder
    if folder is None or not has_shards(folder):
        return None
    checkpointer = (folder / MANIFEST_FILE).exists() or (folder / STATE_FILE).exists()
    return folder, "Checkpointer checkpoint (sharded)" if checkpointer else "DCP folder (ferry storage)"


def _check_out(out: Path, force: bool) -> None:
    """Refuse an ``out`` that is a folder, or that exists without ``force``."""
    if out.is_dir():
        raise CheckpointError(f"{str(out)!r} is a folder. Pass the name of the file to write, e.g. model.safetensors.")
    if out.exists() and not force:
        raise CheckpointError(
            f"{str(out)!r} already exists and was left as it is. Pass --force to replace it (atomically: it keeps "
            "its old content until the new file is complete), or choose another name.",
            path=out,
        )


def convert(
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    trusted: bool = False,
    force: bool = False,
    progress: Progress = no_progress,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Load ``source`` (through torch's restricted unpickler unless ``trusted``) and save it to ``out`` as a ferry file.

    ``out`` is written atomically, then verified (every checksum, read back from disk). A sharded checkpoint folder
    (or a run directory whose newest checkpoint is one) is loaded whole by
    :func:`ferry.checkpoint.sharded.consolidate.load_sharded_folder`: a Checkpointer's becomes
    ``{"step", "objects", "values"}`` with each module's full ``state_dict`` among the objects; a folder written by
    DCP's own ``FileSystemWriter`` needs ``trusted`` (its metadata is a pickle). ``progress`` receives the bytes
    read and written (``ferry ckpt convert`` draws a progress bar).

    A pickled whole ``nn.Module`` (``torch.save(model, f)``, with ``trusted``: it needs the model's code), alone or
    as a value of a dict, is written as its ``state_dict``, and ``notes`` says so. ``source`` may be a URL of object
    storage (with ``storage_options`` for its fsspec file system); ``out`` is a local file.

    Returns:
        ``{"input", "output", "input_kind", "tensors", "bytes", "notes"}`` (``bytes``: the size of ``out``;
        ``notes``: what was changed to store it, e.g. a module written as its state_dict).

    Raises:
        UnsafeCheckpointError: a pickle that needs code, or a folder of DCP's ``FileSystemWriter``, without
            ``trusted``.
        CheckpointError: ``out`` exists and not ``force``, or is a folder; ``source`` cannot be loaded (as
            :func:`ferry.load`: TorchScript, unsafe pickle, corrupt); or what it holds cannot be saved (the message
            names the value and the conversion to make).
    """
    if is_url(out):
        raise ArgumentError(
            f"convert writes OUT as a local file, and {str(out)!r} is a URL. Convert to a local file, then upload "
            "it with ferry.save(ferry.load(path), url, storage_options=...) (or `aws s3 cp`)."
        )
    where, out = location(source, storage_options), Path(out)
    sharded = _sharded_source(where)
    if sharded is not None:
        _check_out(out, force)
        folder, kind = sharded
        size = sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
        obj = _rewrite(folder.name, size, lambda: load_sharded_folder(folder, trusted=trusted), out, progress)
        tensors = sum(isinstance(leaf, torch.Tensor) for _, leaf in flatten(obj))
        return {"input": str(folder), "output": str(out), "input_kind": kind, "tensors": tensors,
                "bytes": out.stat().st_size}  # fmt: skip
    file = resolve(where).file
    _check_out(out, force)
    kind, size = sniff(file) if isinstance(file, Path) else _sniff_remote(file)
    notes: list[str] = []
    obj = _rewrite(file.name, size, lambda: _module_states(load(file, trusted=trusted), notes), out, progress)
    tensors = sum(isinstance(leaf, torch.Tensor) for _, leaf in flatten(obj))
    return {
        "input": str(file),
        "output": str(out),
        "input_kind": KIND_NAMES[kind],
        "tensors": tensors,
        "bytes": out.stat().st_size,
        "notes": notes,
    }


def _sniff_remote(file: RemotePath) -> tuple[FileKind, int]:
    """:func:`~ferry.checkpoint.file.kinds.sniff` of an object on object storage: its first bytes and header."""
    with open_any(file) as (handle, size):
        return sniff_handle(handle, size)


def _module_states(obj: Any, notes: list[str]) -> Any:
    """A pickled whole ``nn.Module`` (what ``torch.save(model, f)`` writes), or one in a dict, becomes its state_dict.

    ferry stores tensors and plain values, never objects; a module's weights are its ``state_dict``, which
    ``model.load_state_dict`` (or ``ferry.load_state_dict``) loads into a model built from code.
    """
    if isinstance(obj, torch.nn.Module):
        notes.append(f"the file held a whole {type(obj).__name__} module: its state_dict was written")
        return obj.state_dict()
    if isinstance(obj, dict) and any(isinstance(value, torch.nn.Module) for value in obj.values()):
        converted = {}
        for key, value in obj.items():
            if isinstance(value, torch.nn.Module):
                notes.append(f"{key!r} held a whole {type(value).__name__} module: its state_dict was written")
                value = value.state_dict()
            converted[key] = value
        return converted
    return obj


def _rewrite(name: str, size: int, read: Callable[[], Any], out: Path, progress: Progress) -> Any:
    """``read()`` the input (``size`` bytes, called ``name``), save it to ``out`` and verify it, reporting progress."""
    with progress(2 * size, f"loading {name}") as meter:
        obj = read()
        meter.advance(size)
        meter.describe(f"writing {out.name}")
        save(obj, out)
        verify(out)
        meter.advance(size)
    return obj
