"""Loading a sharded checkpoint folder whole, in one process, as one tree (what ``ferry ckpt convert`` writes).

Three kinds of folder hold state saved through ``torch.distributed.checkpoint`` (DCP):

- a sharded :class:`ferry.Checkpointer` step folder (``manifest.json`` with ``"layout": "sharded"``,
  ``shards.json``, ``shard-<rank>.safetensors``, ``state.safetensors``): loaded as the payload a single-process
  Checkpointer saves, ``{"step", "objects", "values"}``, the modules' and optimizers' full state_dicts among the
  ``objects``;
- a folder written by ``dcp.save`` with ferry's storage (``shards.json`` and shard files, no manifest): loaded as the
  state_dict that was saved;
- a folder written by DCP's own ``FileSystemWriter`` (a pickled ``.metadata``): loaded through DCP's reader, which
  unpickles, so only with ``trusted=True``.

Every tensor is loaded whole, on the CPU: the folder's size must fit in memory. DCP's planner does the resharding,
so a checkpoint saved by any number of ranks loads here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ferry._remote_path import Folder, RemotePath
from ferry.checkpoint.file.api import load
from ferry.checkpoint.folder import (
    MANIFEST_FILE,
    PLAIN_DCP_METADATA,
    SHARDS_FILE,
    STATE_FILE,
    is_plain_dcp,
    plain_dcp_error,
    read_manifest,
)
from ferry.checkpoint.sharded import ranks as collective
from ferry.checkpoint.sharded import storage as dcp
from ferry.errors import CheckpointError, CorruptCheckpointError

__all__ = ["load_sharded_folder", "read_values"]


def _load_dcp(folder: Folder, state_dict: dict[str, Any], reader: Any, planner: Any) -> None:
    """``dcp.load`` into ``state_dict`` in this process, DCP's exceptions turned into ferry's."""
    from torch.distributed.checkpoint.state_dict_loader import load as dcp_load

    storage = {"storage_reader": reader, "planner": planner}
    collective.call_dcp(dcp_load, state_dict, storage, None, what=f"reading {str(folder)!r}", where=folder)


def _check_manifest(folder: Folder) -> dict[str, Any] | None:
    """The folder's manifest when it has one (checked complete, and ``shards.json`` against its SHA-256).

    Raises:
        CheckpointError: the manifest lists files that are missing or have another size.
        CorruptCheckpointError: ``shards.json`` differs from what the manifest recorded.
    """
    if not (folder / MANIFEST_FILE).exists():
        return None
    manifest, problem = read_manifest(folder)
    if manifest is None:
        raise CheckpointError(
            f"checkpoint folder {str(folder)!r} is incomplete: {problem}. Restore it from a copy, or use another "
            "checkpoint (ferry ckpt ls lists them).",
            path=folder,
        )
    expected = (manifest["files"].get(SHARDS_FILE) or {}).get("sha256")
    if expected is not None and collective.metadata_digest(folder) != expected:
        raise CorruptCheckpointError(
            f"{str(folder / SHARDS_FILE)!r} does not have the SHA-256 its manifest recorded: it was changed "
            "after the checkpoint was saved. Restore the folder from a copy, or use another checkpoint.",
            path=folder / SHARDS_FILE,
        )
    return manifest


def _load_plain_dcp(folder: Path) -> dict[str, Any]:
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
    from torch.distributed.checkpoint.filesystem import FileSystemReader

    reader = FileSystemReader(str(folder))
    try:
        with collective.quiet_dcp():
            metadata = reader.read_metadata()
    except Exception as err:  # an unpickling failure can be any exception
        raise CorruptCheckpointError(
            f"cannot read {str(folder / PLAIN_DCP_METADATA)!r} ({type(err).__name__}: {err}). It is damaged or "
            "from another torch version; load it with the torch that wrote it.",
            path=folder,
        ) from err
    state_dict = dcp.empty_state_dict(metadata)
    _load_dcp(folder, state_dict, reader, DefaultLoadPlanner())
    return state_dict


def _numbered(state: Any) -> Any:
    """An optimizer state keyed by parameter name (DCP's) numbered as ``Optimizer.state_dict()`` numbers it.

    ``Optimizer.state_dict()`` numbers the parameters 0, 1, 2... in the order the param groups list them, and
    ``Optimizer.load_state_dict`` matches by that order; DCP's ``get_optimizer_state_dict`` lists names in the same
    order. Anything that is not such an optimizer state (a model's state_dict) comes back as it is.
    """
    if not isinstance(state, dict) or state.keys() != {"state", "param_groups"}:
        return state
    groups = state["param_groups"]
    if not isinstance(groups, list) or not all(
        isinstance(group, dict) and all(isinstance(p, str) for p in group.get("params", [None])) for group in groups
    ):
        return state
    numbers: dict[str, int] = {}
    for group in groups:
        for name in group["params"]:
            numbers.setdefault(name, len(numbers))
    if not set(state["state"]) <= numbers.keys():
        return state
    return {
        "state": {
            numbers[name]: value for name, value in sorted(state["state"].items(), key=lambda kv: numbers[kv[0]])
        },
        "param_groups": [{**group, "params": [numbers[name] for name in group["params"]]} for group in groups],
    }


def load_sharded_folder(folder: str | os.PathLike[str] | RemotePath, *, trusted: bool = False) -> dict[str, Any]:
    """Load a checkpoint folder saved through DCP whole into this process, as one nested dict of CPU tensors.

    Every piece's checksum is verified as it is read (ferry's storage); ``shards.json`` is checked against the
    manifest's SHA-256 and ``state.safetensors`` against its checksums.

    Args:
        folder: A sharded Checkpointer step folder, a folder written by ``dcp.save`` with
            :class:`ferry.checkpoint.sharded.storage.FerryStorageWriter`, or (``trusted`` only) one written by DCP's own
            ``FileSystemWriter``.
        trusted: Read a folder of DCP's ``FileSystemWriter``, unpickling its ``.metadata`` and values (which can run
            arbitrary code: only for folders whose origin you trust).

    Returns:
        For a Checkpointer step folder, ``{"step": int, "objects": {name: state}, "values": {name: value}}``: each
        module's state is its full ``state_dict`` (``{param_name: tensor}``, loadable with
        ``module.load_state_dict``), each optimizer's is numbered as ``Optimizer.state_dict()`` numbers it (load it
        with ``optimizer.load_state_dict`` into an optimizer built with the same param groups), the other objects'
        states are as saved. For other
        folders, the state_dict that was saved, nested as it was.

    Raises:
        UnsafeCheckpointError: a folder of DCP's ``FileSystemWriter`` without ``trusted`` (the message gives the
            command to convert it).
        CheckpointError: the folder holds no DCP checkpoint, is incomplete, or was written by a newer ferry.
        CorruptCheckpointError: a file fails its checksum, is missing, or does not match the metadata.
    """
    path = folder if isinstance(folder, RemotePath) else Path(folder)
    if not (path / SHARDS_FILE).is_file():
        if not is_plain_dcp(path):
            raise CheckpointError(
                f"{str(path)!r} holds no sharded checkpoint (no {SHARDS_FILE}, no {PLAIN_DCP_METADATA}). "
                "Pass a step folder saved under torch.distributed, or a folder written by "
                "torch.distributed.checkpoint.save.",
                path=path,
            )
        if not trusted:
            raise plain_dcp_error(path)
        assert isinstance(path, Path)  # DCP's own reader reads local folders only
        return _load_plain_dcp(path)
    manifest = _check_manifest(path)
    state_dict = dcp.empty_state_dict(dcp.read_metadata(path))
    _load_dcp(path, state_dict, dcp.FerryStorageReader(path), dcp.FerryLoadPlanner())
    if manifest is None or not (path / STATE_FILE).is_file():
        return state_dict
    payload = load(path / STATE_FILE)
    if not isinstance(payload, dict) or not {"step", "objects", "values"} <= payload.keys():
        raise CorruptCheckpointError(
            f"{str(path / STATE_FILE)!r} is not a Checkpointer checkpoint (no step/objects/values). The "
            "checkpoint is damaged; restore another one.",
            path=path / STATE_FILE,
        )
    objects = {**payload["objects"], **{name: _numbered(value) for name, value in state_dict.items()}}
    return {"step": payload["step"], "objects": dict(sorted(objects.items())), "values": payload["values"]}


def read_values(folder: str | os.PathLike[str] | RemotePath) -> dict[str, Any]:
    """The values that are not tensors (an optimizer's ``lr``, ``betas``) of a folder written with ferry's storage.

    Only their pieces are read (each a few bytes, checksummed); tensors are not.

    Returns:
        ``{fqn: value}`` in the order of ``shards.json``, e.g. ``{"optimizer.param_groups.0.lr": 0.001}``.

    Raises:
        CheckpointError: as :func:`ferry.checkpoint.sharded.storage.read_metadata`.
        CorruptCheckpointError: a piece fails its checksum, or a file is missing.
    """
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata

    path = folder if isinstance(folder, RemotePath) else Path(folder)
    metadata = dcp.read_metadata(path)
    fqns = [fqn for fqn, info in metadata.state_dict_metadata.items() if isinstance(info, BytesStorageMetadata)]
    if not fqns:
        return {}
    only_values = dataclasses.replace(
        metadata, state_dict_metadata={fqn: metadata.state_dict_metadata[fqn] for fqn in fqns}
    )
    state_dict = dcp.empty_state_dict(only_values)
    _load_dcp(path, state_dict, dcp.FerryStorageReader(path), dcp.FerryLoadPlanner(allow_partial_load=True))
    paths: Mapping[str, Any] = metadata.planner_data or {}
    values = {}
    for fqn in fqns:
        node: Any = state_dict
        for key in paths.get(fqn, (fqn,)):
            node = node[key]
        values[fqn] = node
    return values
