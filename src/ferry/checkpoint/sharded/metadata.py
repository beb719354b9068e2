"""DCP's checkpoint metadata as JSON (``shards.json``): what ferry writes instead of DCP's pickled ``.metadata``.

The document holds every saved entry (a tensor's dtype, global size and chunks, or a value), the paths DCP's
planner flattened the nested state_dict from, and where each piece is (its rank file and name in it). Parsing it
back gives DCP's own ``Metadata``, so DCP plans loads and resharding from it as from its own file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeGuard

import torch
from torch.distributed.checkpoint.metadata import (
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    TensorProperties,
    TensorStorageMetadata,
)

from ferry._remote_path import Folder, RemotePath
from ferry.checkpoint.folder import SHARDS_FILE, is_plain_dcp
from ferry.errors import CheckpointError, CorruptCheckpointError

__all__ = [
    "is_tensor_entry",
    "metadata_from_json",
    "metadata_to_json",
    "read_metadata",
]

METADATA_FORMAT = "ferry.dcp"
METADATA_VERSION = 1


def is_tensor_entry(entry: object) -> TypeGuard[TensorStorageMetadata]:
    """Whether an entry of DCP's ``state_dict_metadata`` describes a tensor (it has a size, a dtype and chunks)."""
    return isinstance(entry, TensorStorageMetadata)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def metadata_to_json(metadata: Metadata) -> dict[str, Any]:
    """DCP's ``Metadata`` (with ``storage_data`` holding each piece's file and name) as a JSON document.

    Raises:
        CheckpointError: a tensor that is not strided (sparse, nested): ferry stores dense tensors.
    """
    tensors: dict[str, Any] = {}
    for fqn, info in metadata.state_dict_metadata.items():
        if isinstance(info, BytesStorageMetadata):
            tensors[fqn] = {"value": True}
            continue
        properties = info.properties
        if properties.layout != torch.strided:
            raise CheckpointError(
                f"{fqn!r} is a {properties.layout} tensor; ferry stores strided (dense) tensors. Convert it with "
                ".to_dense() before saving.",
                path=fqn,
            )
        tensors[fqn] = {
            "dtype": _dtype_name(properties.dtype),
            "requires_grad": properties.requires_grad,
            "size": list(info.size),
            "chunks": [{"offsets": list(c.offsets), "sizes": list(c.sizes)} for c in info.chunks],
        }
    storage: list[dict[str, Any]] = []
    for index, where in (metadata.storage_data or {}).items():
        offset = None if index.offset is None else list(index.offset)
        storage.append({"fqn": index.fqn, "offset": offset, "index": index.index, **where})
    planner_data = metadata.planner_data if isinstance(metadata.planner_data, dict) else {}
    return {
        "format": METADATA_FORMAT,
        "version": METADATA_VERSION,
        "dcp_version": metadata.version,
        "tensors": tensors,
        "paths": {fqn: list(path) for fqn, path in planner_data.items()},
        "storage": sorted(storage, key=lambda row: (row["fqn"], row["offset"] or [])),
    }


def metadata_from_json(doc: Any, where: Folder) -> Metadata:
    """Rebuild DCP's Metadata from :func:`_metadata_json`'s document.

    Raises:
        CorruptCheckpointError: the document is not one ferry wrote, or a field has the wrong type.
        CheckpointError: a newer ferry wrote it.
    """
    if not isinstance(doc, dict) or doc.get("format") != METADATA_FORMAT:
        raise CorruptCheckpointError(
            f'{str(where)!r} is not ferry\'s DCP metadata (no "format": {METADATA_FORMAT!r}). The checkpoint is '
            "damaged; restore another one.",
            path=where,
        )
    if doc.get("version") != METADATA_VERSION:
        raise CheckpointError(
            f"{str(where)!r} has sharded-checkpoint version {doc.get('version')!r}; this ferry reads version "
            f"{METADATA_VERSION}. Upgrade ferry (pip install -U ferry).",
            path=where,
        )
    try:
        state: dict[str, TensorStorageMetadata | BytesStorageMetadata] = {}
        for fqn, info in doc["tensors"].items():
            if info.get("value"):
                state[fqn] = BytesStorageMetadata()
                continue
            dtype = getattr(torch, info["dtype"])
            if not isinstance(dtype, torch.dtype):
                raise TypeError(f"{info['dtype']!r} is not a dtype")
            size = _dims(info["size"])
            chunks = [ChunkStorageMetadata(_dims(c["offsets"]), _dims(c["sizes"])) for c in info["chunks"]]
            _check_tiling(fqn, size, chunks)
            properties = TensorProperties(dtype=dtype, requires_grad=bool(info["requires_grad"]))
            state[fqn] = TensorStorageMetadata(properties, size, chunks)
        storage = {}
        for row in doc["storage"]:
            index = MetadataIndex(row["fqn"], row["offset"], row["index"])
            file = str(row["file"])
            if Path(file).name != file or file in ("", ".", ".."):  # pieces live in the folder, nowhere else
                raise ValueError(f"the piece {row['name']!r} is placed in {file!r}, outside the checkpoint folder")
            storage[index] = {"file": file, "name": str(row["name"]), "kind": str(row["kind"])}
        paths = {fqn: tuple(path) for fqn, path in doc["paths"].items()}
        for fqn, path in paths.items():  # list indices within reason: a path builds the containers it names
            if not path or not all(_path_key(key, len(paths)) for key in path):
                raise ValueError(f"the path of {fqn!r} is {list(path)}")
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        raise CorruptCheckpointError(
            f"{str(where)!r} is malformed ({type(err).__name__}: {err}). The checkpoint is damaged; restore another "
            "one.",
            path=where,
        ) from None
    return Metadata(state, planner_data=paths, storage_data=storage, version=doc.get("dcp_version"))


def _dims(values: object) -> torch.Size:
    """A list of non-negative ints as a ``torch.Size``.

    Raises:
        ValueError: anything else.
    """
    if not isinstance(values, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values
    ):
        raise ValueError(f"{values!r} is not a list of non-negative integers")
    return torch.Size(values)


def _check_tiling(fqn: str, size: torch.Size, chunks: list[ChunkStorageMetadata]) -> None:
    """The chunks of a tensor lie inside it, do not overlap, and cover it: the shards are the whole tensor.

    Raises:
        ValueError: they do not (the message says how).
    """
    total = 1
    for dim in size:
        total *= dim
    covered = 0
    for chunk in chunks:
        if len(chunk.offsets) != len(size) or len(chunk.sizes) != len(size):
            raise ValueError(f"a chunk of {fqn!r} has {len(chunk.sizes)} dimensions, the tensor {len(size)}")
        if any(o + n > d for o, n, d in zip(chunk.offsets, chunk.sizes, size, strict=True)):
            raise ValueError(f"a chunk of {fqn!r} at {list(chunk.offsets)} reaches past its size {list(size)}")
        volume = 1
        for n in chunk.sizes:
            volume *= n
        covered += volume
    for i, a in enumerate(chunks):
        for b in chunks[i + 1 :]:
            if all(
                oa < ob + nb and ob < oa + na
                for oa, na, ob, nb in zip(a.offsets, a.sizes, b.offsets, b.sizes, strict=True)
            ) and all(n > 0 for n in (*a.sizes, *b.sizes)):
                raise ValueError(f"two chunks of {fqn!r} overlap, at {list(a.offsets)} and {list(b.offsets)}")
    if covered != total:
        raise ValueError(f"the chunks of {fqn!r} hold {covered} of its {total} elements")


def _path_key(key: object, entries: int) -> bool:
    """Whether ``key`` can be one step of a saved path: a str, or a list index below the number of entries."""
    if isinstance(key, str):
        return True
    return isinstance(key, int) and not isinstance(key, bool) and 0 <= key < max(entries, 1)


def read_metadata(folder: str | os.PathLike[str] | RemotePath, *, complete: bool = True) -> Metadata:
    """Read the DCP metadata of a sharded ferry checkpoint folder (``shards.json``).

    The tensors it describes must fit in the shard files it names (a missing file holds nothing), so a crafted file
    cannot make a reader allocate more than the folder holds. ``complete=False`` (to describe a damaged folder)
    counts only the files that are there.

    Raises:
        CheckpointError: the folder has no ``shards.json``; for a folder written by DCP's ``FileSystemWriter``
            (pickled ``.metadata``) the message says how to convert it.
        CorruptCheckpointError: ``shards.json`` is not valid.
    """
    folder = folder if isinstance(folder, RemotePath) else Path(folder)
    path = folder / SHARDS_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if is_plain_dcp(folder):
            raise CheckpointError(
                f"{str(folder)!r} was written by torch.distributed.checkpoint's FileSystemWriter: its .metadata is a "
                "pickle, which can run code when loaded, so ferry does not read it. If you trust its origin, convert "
                f"it once: ferry ckpt convert --trusted {folder} OUT.safetensors",
                path=folder,
            ) from None
        raise CheckpointError(
            f"{str(folder)!r} has no {SHARDS_FILE}: it is not a sharded ferry checkpoint.", path=folder
        ) from None
    except OSError as err:
        raise CheckpointError(f"cannot read {str(path)!r}: {err.strerror}.", path=path) from err
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise CorruptCheckpointError(
            f"{str(path)!r} is not valid UTF-8 JSON ({err}). The checkpoint is damaged; restore another one.",
            path=path,
        ) from None
    metadata = metadata_from_json(doc, path)
    _check_bytes(folder, metadata, path, complete=complete)
    return metadata


def _check_bytes(folder: Folder, metadata: Metadata, where: Folder, *, complete: bool) -> None:
    """The tensors ``shards.json`` describes fit in the shard files it names (so loading allocates no more than that).

    Raises:
        CorruptCheckpointError: they describe more bytes than the files hold.
    """
    described = 0
    for info in metadata.state_dict_metadata.values():
        if isinstance(info, TensorStorageMetadata):
            numel = 1
            for dim in info.size:
                numel *= dim
            described += numel * info.properties.dtype.itemsize
    files = {where_["file"] for where_ in (metadata.storage_data or {}).values()}
    present = [folder / name for name in files if (folder / name).is_file()]
    if not complete and len(present) < len(files):
        return
    held = sum(path.stat().st_size for path in present)
    if described > held:
        raise CorruptCheckpointError(
            f"{str(where)!r} describes {described:,} bytes of tensors but its shard files hold {held:,} bytes: the "
            "metadata was changed or files were lost. The checkpoint is damaged; restore another one.",
            path=where,
        )
