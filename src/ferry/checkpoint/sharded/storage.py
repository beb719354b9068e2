"""ferry's storage for ``torch.distributed.checkpoint`` (DCP): sharded state as safetensors files and JSON, no pickle.

DCP plans who writes what (each rank its shards of FSDP2/DTensor state; replicated tensors once) and reshards on
load; this module decides how the pieces lie on disk. In a checkpoint folder::

    shards.json                 DCP's metadata as JSON: every tensor's dtype, size and chunks, where each piece is
    shard-00000.safetensors     rank 0's pieces: a ferry file, one tensor per piece, each with its xxh3_64 checksum
    shard-00001.safetensors     rank 1's pieces (a rank with nothing to write writes no file)

A piece is a tensor (a whole tensor, or one rank's chunk of a sharded one) or, for a value that is not a tensor (an
optimizer's ``lr`` or ``betas``), bytes. :class:`FerrySavePlanner` encodes such values as JSON with ferry's tree
(tuples, ``inf`` and dtypes survive), and the writer stores those bytes as a uint8 tensor so that they are
checksummed like the rest; bytes that are a pickle or a ``torch.save`` archive (what DCP's default planner makes)
are refused. :class:`FerryLoadPlanner` decodes them again. On load, each rank reads only the pieces its plan
needs, verifying their checksums.

Use them with DCP directly::

    dcp.save(state_dict, storage_writer=FerryStorageWriter(folder), planner=FerrySavePlanner())
    dcp.load(state_dict, storage_reader=FerryStorageReader(folder), planner=FerryLoadPlanner())

The :class:`ferry.Checkpointer` does this under ``torchrun``.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner
from torch.distributed.checkpoint.metadata import (
    Metadata,
    MetadataIndex,
    TensorStorageMetadata,
)
from torch.distributed.checkpoint.planner import (
    LoadItemType,
    LoadPlan,
    LoadPlanner,
    ReadItem,
    SavePlan,
    SavePlanner,
    WriteItem,
    WriteItemType,
)
from torch.distributed.checkpoint.storage import StorageReader, StorageWriter, WriteResult
from torch.futures import Future

from ferry._fs import atomic_file
from ferry._remote_path import Folder, RemotePath, shown_path
from ferry.checkpoint.file import api as ferry_format
from ferry.checkpoint.file import reader, tree, writer
from ferry.checkpoint.file.layout import Blob
from ferry.checkpoint.folder import SHARDS_FILE, shard_file
from ferry.checkpoint.sharded.metadata import (
    metadata_to_json,
    read_metadata,
)
from ferry.errors import CheckpointError, CorruptCheckpointError

__all__ = [
    "FerryLoadPlanner",
    "FerrySavePlanner",
    "FerryStorageReader",
    "FerryStorageWriter",
    "empty_state_dict",
    "read_metadata",
]

_PICKLE_MAGIC = (b"\x80", b"PK\x03\x04")


# -- values that are not tensors ----------------------------------------------------------------------------------


def _encode_value(value: object, fqn: str) -> bytes:
    """``value`` (no tensors inside) as ferry-tree JSON bytes.

    Raises:
        CheckpointError: the value holds tensors or a type ferry does not store (the message names ``fqn``).
    """
    encoded = tree.encode(value, Path(fqn))
    if encoded.blobs:
        raise CheckpointError(
            f"the value at {fqn!r} is not a tensor but holds {len(encoded.blobs)} tensors inside a container DCP "
            "does not split up. Put the tensors directly in a dict of the state_dict.",
            path=fqn,
        )
    return encoded.tree_json.encode("utf-8")


def _decode_value(raw: bytes, fqn: str, where: Folder) -> object:
    """The value that :func:`_encode_value` encoded.

    Raises:
        CorruptCheckpointError: the bytes are not ferry-tree JSON.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptCheckpointError(
            f"{str(where)!r}: the value {fqn!r} is not UTF-8 JSON. The checkpoint is damaged; restore another one.",
            path=where,
        ) from None
    return tree.decode(text, {}, None, shown_path(where))


class FerrySavePlanner(DefaultSavePlanner):
    """DCP's default save planner, with replicated tensors written by the lowest rank and values as JSON.

    Mirrors ``DefaultSavePlanner`` (flattens nested dicts, plans DTensor and ShardedTensor chunks) with
    ``dedup_save_to_lowest_rank=True``: a tensor every rank holds whole (a DDP replica) is written once, by rank 0.
    Values that are not tensors are encoded as ferry-tree JSON instead of ``torch.save`` pickles.
    """

    def __init__(self) -> None:
        super().__init__(dedup_save_to_lowest_rank=True)

    def transform_object(self, write_item: WriteItem, object: Any) -> Any:
        """Encode a value as ferry-tree JSON bytes; tensors pass through."""
        if write_item.type == WriteItemType.BYTE_IO:
            return io.BytesIO(_encode_value(object, write_item.index.fqn))
        return object


class FerryLoadPlanner(DefaultLoadPlanner):
    """DCP's default load planner, decoding values from ferry-tree JSON instead of unpickling them.

    Mirrors ``DefaultLoadPlanner``: tensors of ``state_dict`` are filled in place (resharded as needed), values are
    replaced. ``allow_partial_load=True`` lets ``state_dict`` hold keys the checkpoint lacks.
    """

    def __init__(self, *, allow_partial_load: bool = False) -> None:
        super().__init__(allow_partial_load=allow_partial_load)
        self.where: Folder = Path(".")

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        """Decode a value and put it at its place in the state_dict being loaded."""
        fqn = read_item.dest_index.fqn
        decoded = _decode_value(value.getvalue(), fqn, self.where)
        if self.flatten_state_dict:
            _set_path(self.original_state_dict, self.mappings[fqn], decoded)
        else:
            self.state_dict[fqn] = decoded


def _set_path(root: Any, path: Sequence[str | int], value: object) -> None:
    """Set ``root[path[0]][path[1]]...`` to ``value``, creating dicts (str keys) and lists (int keys) on the way."""
    node = root
    for key, following in itertools.pairwise(path):
        fresh: Any = [] if isinstance(following, int) else {}
        if isinstance(node, list):
            assert isinstance(key, int)
            node.extend([None] * (key + 1 - len(node)))
            if node[key] is None:
                node[key] = fresh
        elif key not in node:
            node[key] = fresh
        node = node[key]
    last = path[-1]
    if isinstance(node, list):
        assert isinstance(last, int)
        node.extend([None] * (last + 1 - len(node)))
    node[last] = value


def empty_state_dict(metadata: Metadata) -> dict[str, Any]:
    """A state_dict shaped like the saved one, to load a whole checkpoint into (one process, no resharding).

    Every tensor is a fresh ``torch.empty`` on the CPU with its saved dtype and full size; every value is ``None``
    until loaded. Nested dicts and lists come back as they were saved (DCP's ``planner_data`` records the paths).
    """
    paths: Mapping[str, Sequence[str | int]] = metadata.planner_data or {}
    root: dict[str, Any] = {}
    for fqn, info in metadata.state_dict_metadata.items():
        value = None
        if isinstance(info, TensorStorageMetadata):
            value = torch.empty(info.size, dtype=info.properties.dtype)
        _set_path(root, paths.get(fqn, (fqn,)), value)
    return root


# -- the storage writer and reader ----------------------------------------------------------------------------------


def _piece_key(index: MetadataIndex) -> str:
    """The name of a piece inside its shard file: ``fqn`` for values, ``fqn@offsets`` for tensor chunks."""
    if index.offset is None:
        return index.fqn
    return f"{index.fqn}@{','.join(str(o) for o in index.offset)}"


class FerryStorageWriter(StorageWriter):
    """A DCP ``StorageWriter`` that writes each rank's pieces as one ferry safetensors file, metadata as JSON.

    Each file is written durably (temporary name, fsync, rename) before the rank reports its pieces written, so
    once ``dcp.save`` returns on every rank, every file is on disk. The coordinator (rank 0) writes
    ``shards.json`` in :meth:`finish`.

    On object storage (``path`` a :class:`~ferry._remote_path.RemotePath`) each rank uploads its file as one object
    (parts in parallel, streamed from the tensors; complete or absent) and the coordinator stores ``shards.json``.

    Args:
        path: The folder to write into; it must exist. Or a remote folder.
    """

    def __init__(self, path: str | os.PathLike[str] | RemotePath) -> None:
        super().__init__()
        self.path: Folder = path if isinstance(path, RemotePath) else Path(path)
        self.rank = 0
        self.is_coordinator = True

    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        """Start a new save; ``checkpoint_id`` (a folder) replaces the folder given at construction."""
        if checkpoint_id is not None:
            self.path = checkpoint_id if isinstance(checkpoint_id, RemotePath) else Path(checkpoint_id)

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        """Remember whether this rank coordinates and its rank (DCP passes ``rank=``)."""
        self.is_coordinator = is_coordinator
        self.rank = int(kwargs.get("rank", 0) or 0)

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        """Nothing to change locally."""
        return plan

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        """Give each rank's plan its file name (``shard-<rank>.safetensors``)."""
        return [dataclasses.replace(plan, storage_data=shard_file(rank)) for rank, plan in enumerate(plans)]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        """Write this rank's pieces to its shard file, durably; return where each piece is.

        Raises:
            CheckpointError: a value encoded as a pickle (DCP's default planner: use :class:`FerrySavePlanner`), a
                dtype safetensors cannot store, or a file-system failure.
        """
        file = plan.storage_data if isinstance(plan.storage_data, str) else shard_file(self.rank)
        blobs: list[Blob] = []
        nodes: list[list[Any]] = []
        results: list[WriteResult] = []
        for item in plan.items:
            data = planner.resolve_data(item)
            key = _piece_key(item.index)
            name = tree.tensor_name((key,))
            if item.type == WriteItemType.BYTE_IO:
                raw = data.getvalue() if isinstance(data, io.BytesIO) else bytes(data)
                if raw.startswith(_PICKLE_MAGIC):
                    raise CheckpointError(
                        f"the value {item.index.fqn!r} came to ferry's storage writer as a pickle, which ferry never "
                        "stores. Pass planner=ferry.checkpoint.sharded.storage.FerrySavePlanner() to dcp.save.",
                        path=self.path / file,
                    )
                tensor = (
                    torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
                )
                kind = "value"
            elif isinstance(data, torch.Tensor):
                tensor = data.detach()
                kind = "tensor"
            else:
                raise CheckpointError(
                    f"the planner gave a {type(data).__name__} for the tensor {item.index.fqn!r}; ferry's storage "
                    "writer stores tensors. Use planner=ferry.checkpoint.sharded.storage.FerrySavePlanner().",
                    path=self.path / file,
                )
            blobs.append(Blob(name, tensor))
            nodes.append([key, {"tensor": name}])
            nbytes = tensor.numel() * tensor.element_size()
            results.append(WriteResult(item.index, nbytes, {"file": file, "name": name, "kind": kind}))
        if blobs and isinstance(self.path, RemotePath):
            ferry_format.save_tensors(self.path / file, json.dumps({"dict": nodes}, separators=(",", ":")), blobs)
        elif blobs:
            assert isinstance(self.path, Path)
            path = self.path / file
            try:
                writer.write_file(path, json.dumps({"dict": nodes}, separators=(",", ":")), blobs)
            except OSError as err:
                raise CheckpointError(
                    f"writing {str(path)!r} failed: {err}. Free disk space or fix permissions and save again.",
                    path=path,
                ) from err
        future: Future[list[WriteResult]] = Future()
        future.set_result(results)
        return future

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        """Write ``shards.json`` (coordinator only): the metadata with every piece's file and name."""
        storage = {result.index: result.storage_data for rank_results in results for result in rank_results}
        document = metadata_to_json(dataclasses.replace(metadata, storage_data=storage))
        data = json.dumps(document, indent=1, sort_keys=True).encode("utf-8")
        if isinstance(self.path, RemotePath):
            (self.path / SHARDS_FILE).write_bytes(data)  # one PUT: complete or absent
            return
        with atomic_file(self.path / SHARDS_FILE) as handle:
            handle.write(data)

    def storage_meta(self) -> None:
        """No storage metadata beyond ``shards.json``."""
        return None

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike[str]) -> bool:
        """Any local folder path."""
        return isinstance(checkpoint_id, (str, os.PathLike))


class FerryStorageReader(StorageReader):
    """A DCP ``StorageReader`` for folders written by :class:`FerryStorageWriter`.

    Each rank reads only the pieces its load plan needs, verifying each piece's checksum, then copies the slice
    it needs into the target tensor (DCP's resharding: a checkpoint saved by N ranks loads on M).

    Args:
        path: The checkpoint folder, local or remote (a :class:`~ferry._remote_path.RemotePath`: ranged reads).
    """

    def __init__(self, path: str | os.PathLike[str] | RemotePath) -> None:
        super().__init__()
        self.path: Folder = path if isinstance(path, RemotePath) else Path(path)
        self._metadata: Metadata | None = None
        self._storage: dict[MetadataIndex, dict[str, str]] = {}

    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        """Start a new load; ``checkpoint_id`` (a folder) replaces the folder given at construction."""
        if checkpoint_id is not None and checkpoint_id != self.path:
            self.path = checkpoint_id if isinstance(checkpoint_id, RemotePath) else Path(checkpoint_id)
            self._metadata = None

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        """Read (once) and return the checkpoint's metadata (see :func:`read_metadata`)."""
        if self._metadata is None:
            self._metadata = read_metadata(self.path)
        return self._metadata

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        """Remember where each piece is."""
        self._storage = dict(metadata.storage_data or {})

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        """Nothing to change locally."""
        return plan

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        """Nothing to change globally."""
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        """Read the pieces of ``plan`` (verifying their checksums) into the planner's tensors and values.

        Raises:
            CorruptCheckpointError: a piece fails its checksum, a file is truncated or missing, or a piece's size
                does not match the metadata.
        """
        if isinstance(planner, FerryLoadPlanner):
            planner.where = self.path
        by_file: dict[str, list[tuple[ReadItem, dict[str, str]]]] = defaultdict(list)
        for item in plan.items:
            where = self._storage.get(item.storage_index)
            if where is None:
                raise CorruptCheckpointError(
                    f"{str(self.path / SHARDS_FILE)!r} does not say where the piece "
                    f"{_piece_key(item.storage_index)!r} is. The checkpoint is damaged; restore another one.",
                    path=self.path,
                )
            by_file[where["file"]].append((item, where))
        for file, items in sorted(by_file.items()):
            pieces = read_pieces(self.path / file, {where["name"] for _, where in items})
            for item, where in items:
                stored = pieces[where["name"]]
                if item.type == LoadItemType.BYTE_IO:
                    planner.load_bytes(item, io.BytesIO(stored.numpy().tobytes()))
                    continue
                source = stored
                for dim, (start, length) in enumerate(zip(item.storage_offsets, item.lengths, strict=True)):
                    source = source.narrow(dim, start, length)
                target = planner.resolve_tensor(item).detach()
                if target.shape != source.shape:
                    raise CorruptCheckpointError(
                        f"{str(self.path / file)!r}: the piece {where['name']!r} gives a {list(source.shape)} slice "
                        f"where {item.dest_index.fqn!r} needs {list(target.shape)}. The checkpoint does not match its "
                        "metadata; restore another one.",
                        path=self.path / file,
                    )
                target.copy_(source)
                planner.commit_tensor(item, target)
        future: Future[None] = Future()
        future.set_result(None)
        return future

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike[str]) -> bool:
        """A folder holding ``shards.json``."""
        return (Path(checkpoint_id) / SHARDS_FILE).is_file()


def read_pieces(path: Folder, names: set[str]) -> dict[str, torch.Tensor]:
    """Read the tensors ``names`` of the ferry file ``path`` onto the CPU, verifying their checksums.

    Raises:
        CorruptCheckpointError: the file is missing, damaged, not a ferry file, or lacks one of ``names``.
    """
    try:
        with ferry_format.open_any(path) as (handle, size):
            header = reader.read_header(handle, shown_path(path), size)
            if not header.is_ferry:
                raise CorruptCheckpointError(
                    f"{str(path)!r} is a plain safetensors file without ferry's checksums; a sharded ferry "
                    "checkpoint's pieces always have them. The checkpoint was changed; restore another one.",
                    path=path,
                )
            wanted = [entry for entry in header.entries if entry.name in names]
            missing = names - {entry.name for entry in wanted}
            if missing:
                raise CorruptCheckpointError(
                    f"{str(path)!r} lacks the pieces {sorted(missing)} that {SHARDS_FILE} places there. The "
                    "checkpoint is damaged; restore another one.",
                    path=path,
                )
            return reader.read_tensors(handle, dataclasses.replace(header, entries=tuple(wanted)))
    except CorruptCheckpointError:
        raise
    except CheckpointError as err:
        if not path.exists():
            raise CorruptCheckpointError(
                f"{str(path)!r} is missing: the sharded checkpoint lost a rank's file. Restore another one.",
                path=path,
            ) from None
        raise err
