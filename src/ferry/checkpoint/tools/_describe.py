"""What a checkpoint holds, read from headers where the format allows, not the data (``ferry ckpt inspect``).

A sharded checkpoint (saved under ``torch.distributed``) is described from its ``shards.json``, the headers of its
files, and the few bytes of its non-tensor values (an optimizer's ``lr``): its tensors' global shapes and which rank
files hold their pieces, and the replicated part in ``state.safetensors``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import torch

from ferry._remote_path import Folder
from ferry.checkpoint.file import tree
from ferry.checkpoint.file.structure import flatten, read_structure
from ferry.checkpoint.folder import MANIFEST_FILE, RANK_FILE, SHARDS_FILE, STATE_FILE, has_shards
from ferry.checkpoint.tools._paths import (
    Target,
    is_payload,
    jsonable,
    resolve,
    short_repr,
)
from ferry.errors import CheckpointError

__all__ = ["DCP_KIND", "SHARDED_KIND", "describe", "describe_sharded", "describe_target"]

#: Manifest entries shown as metadata, in this order.
_MANIFEST_KEYS = ("step", "created", "sequence", "torch", "host", "devices", "metrics", "retention")
#: What a description calls a sharded Checkpointer checkpoint, and a folder ``dcp.save`` wrote with ferry's storage.
SHARDED_KIND = "Checkpointer checkpoint (sharded)"
DCP_KIND = "DCP folder (ferry storage)"


def _group(path: str, payload: bool) -> str:
    """The top-level entry a leaf belongs to.

    ``objects/model`` in a Checkpointer checkpoint, the first key elsewhere; in a flat ``state_dict``
    (``conv1.weight``), the first dotted component (the top-level module).
    """
    parts = path.split("/")
    if payload and parts[0] in ("objects", "values") and len(parts) > 1:
        return "/".join(parts[:2])
    if len(parts) == 1 and "." in path:
        return path.split(".")[0]
    return parts[0]


def _rng_summary(rng: object) -> list[str]:
    if not isinstance(rng, dict):
        return []
    names = []
    for name, state in rng.items():
        if isinstance(state, list):
            names.append(f"{name} ({len(state)} device{'s' if len(state) != 1 else ''})")
        else:
            names.append(str(name))
    return names


def describe_target(target: Target, *, trusted: bool = False) -> dict[str, Any]:
    """Describe the checkpoint ``target`` names, as the JSON ``ferry ckpt inspect --json`` prints.

    Returns:
        ``{"path", "file", "kind", "bytes", "metadata", "tensors", "values", "entries", "total"}``; see
        :func:`ferry.cli.ckpt.main` for the fields. A sharded checkpoint's report is :func:`describe_sharded`'s.

    Raises:
        CheckpointError: as :func:`ferry.load` (TorchScript, unsafe pickle, not a checkpoint, corrupt header).
    """
    if target.folder is not None and has_shards(target.folder):
        return describe_sharded(target.folder, target.manifest, target.problem)
    if target.problem is not None and not target.file.exists():
        raise CheckpointError(
            f"checkpoint folder {str(target.folder)!r} is incomplete ({target.problem}) and has no {STATE_FILE} to "
            "inspect. Restore it from a copy, or inspect another checkpoint (ferry ckpt ls lists them).",
            path=target.folder,
        )
    structure = read_structure(target.file, trusted=trusted)
    payload = is_payload(structure.obj)
    metadata: dict[str, Any] = {}
    kind = structure.kind
    if target.folder is not None:
        kind = "Checkpointer checkpoint"
        metadata["complete"] = target.problem is None
        if target.problem is not None:
            metadata["problem"] = target.problem
        for key in _MANIFEST_KEYS:
            if target.manifest is not None and key in target.manifest:
                metadata[key] = target.manifest[key]
    if payload:
        step = structure.obj["step"]
        metadata.setdefault("step", step if isinstance(step, int) else jsonable(step))
        metadata["rng"] = _rng_summary(structure.obj.get("rng"))
    metadata.update(structure.metadata)

    tensors, values = [], []
    entries: dict[str, dict[str, Any]] = {}
    seen: set[int] = set()
    total = {"tensors": 0, "params": 0, "bytes": 0}
    counted: dict[str, set[int]] = {}
    for path, leaf in flatten(structure.obj):
        if not isinstance(leaf, torch.Tensor):
            values.append({"path": path, "value": jsonable(leaf), "repr": short_repr(leaf)})
            continue
        nbytes = leaf.numel() * leaf.element_size()
        tensors.append(
            {
                "path": path,
                "shape": list(leaf.shape),
                "dtype": str(leaf.dtype).removeprefix("torch."),
                "numel": leaf.numel(),
                "bytes": nbytes,
            }
        )
        group = entries.setdefault(_group(path, payload), {"tensors": 0, "params": 0, "bytes": 0})
        group["tensors"] += 1
        if id(leaf) not in counted.setdefault(_group(path, payload), set()):  # tied weights count once
            counted[_group(path, payload)].add(id(leaf))
            group["params"] += leaf.numel()
            group["bytes"] += nbytes
        total["tensors"] += 1
        if id(leaf) not in seen:
            seen.add(id(leaf))
            total["params"] += leaf.numel()
            total["bytes"] += nbytes
    return {
        "path": str(target.folder or target.file),
        "file": str(target.file),
        "kind": kind,
        "bytes": structure.size,
        "metadata": metadata,
        "tensors": tensors,
        "values": values,
        "entries": [{"name": name, **counts} for name, counts in entries.items()],
        "total": total,
    }


def _raw_manifest(folder: Folder) -> dict[str, Any]:
    """The manifest as written, even when the folder is incomplete (``{}`` when it cannot be read)."""
    try:
        raw = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _file_role(name: str) -> str:
    """What a file of a sharded checkpoint folder holds, for people."""
    match = RANK_FILE.match(name)
    if match:
        rank = int(match.group(2))
        return f"rank {rank}'s pieces" if match.group(1) == "shard" else f"rank {rank}'s RNG states"
    roles = {
        MANIFEST_FILE: "manifest: files, sizes, step",
        SHARDS_FILE: "DCP metadata: every tensor's chunks, where each piece is",
        STATE_FILE: "replicated state: step, other objects, values",
    }
    return roles.get(name, "")


def _children(folder: Folder) -> list[Folder]:
    return list(folder.iterdir())


def describe_sharded(folder: Folder, manifest: dict[str, Any] | None, problem: str | None = None) -> dict[str, Any]:
    """Describe a checkpoint folder saved through DCP with ferry's storage, as ``inspect --json`` prints it.

    Reads ``shards.json``, the header of ``state.safetensors`` and the non-tensor values' pieces; no tensor data.

    Args:
        folder: A sharded Checkpointer step folder, or a folder ``dcp.save`` wrote with ferry's storage.
        manifest: Its manifest when complete (``None`` when incomplete or absent).
        problem: Why the folder is incomplete, if it is.

    Returns:
        :func:`describe_target`'s fields, and ``"files"``; ``metadata`` adds ``layout`` (``"sharded"``) and
        ``world_size``.
        Each of ``tensors`` has ``"part"``: ``"sharded"`` (with ``"fqn"``, DCP's name, ``"pieces"``, the number of
        stored pieces, ``"ranks"`` and ``"files"``, the rank files holding them; ``shape`` is the global shape) or
        ``"replicated"`` (from ``state.safetensors``). ``values`` likewise. Paths are those of the file
        ``ferry ckpt convert`` makes of the folder. ``files`` is ``[{"name", "bytes", "holds"}]``.

    Raises:
        CheckpointError: ``shards.json`` is missing, damaged or from a newer ferry.
    """
    from ferry.checkpoint.sharded.consolidate import read_values  # these import DCP (1.5 s): sharded folders only
    from ferry.checkpoint.sharded.metadata import is_tensor_entry, read_metadata

    metadata_doc = read_metadata(folder, complete=False)  # describe a damaged folder too
    written = manifest or _raw_manifest(folder)
    payload = (folder / MANIFEST_FILE).exists() or (folder / STATE_FILE).is_file()
    files: list[dict[str, Any]] = [
        {"name": path.name, "bytes": path.stat().st_size, "holds": _file_role(path.name)}
        for path in sorted(_children(folder), key=str)
        if path.is_file()
    ]
    ranks = {int(m.group(2)) for f in files if (m := RANK_FILE.match(f["name"]))}
    metadata: dict[str, Any] = {"complete": problem is None or not payload}
    if problem is not None and payload:
        metadata["problem"] = problem
    metadata["layout"] = "sharded"
    metadata["world_size"] = written.get("world_size", max(ranks, default=0) + 1)
    for key in _MANIFEST_KEYS:
        if key in written:
            metadata[key] = written[key]

    paths = metadata_doc.planner_data or {}
    where: dict[str, set[str]] = {}
    pieces: dict[str, int] = {}
    for index, stored in (metadata_doc.storage_data or {}).items():
        where.setdefault(index.fqn, set()).add(stored["file"])
        pieces[index.fqn] = pieces.get(index.fqn, 0) + 1

    def tree_path(fqn: str) -> str:
        trail = tuple(paths.get(fqn, (fqn,)))
        return tree.tensor_name(("objects", *trail) if payload else trail)

    def located(fqn: str) -> dict[str, Any]:
        names = sorted(where.get(fqn, ()))
        holders = sorted({int(m.group(2)) for name in names if (m := RANK_FILE.match(name))})
        return {"fqn": fqn, "pieces": pieces.get(fqn, 0), "ranks": holders, "files": names}

    tensors: list[dict[str, Any]] = []
    for fqn, info in metadata_doc.state_dict_metadata.items():
        if is_tensor_entry(info):
            numel = info.size.numel()
            nbytes = numel * torch.empty(0, dtype=info.properties.dtype).element_size()
            tensors.append(
                {
                    "path": tree_path(fqn),
                    "shape": list(info.size),
                    "dtype": str(info.properties.dtype).removeprefix("torch."),
                    "numel": numel,
                    "bytes": nbytes,
                    "part": "sharded",
                    **located(fqn),
                }
            )
    values: list[dict[str, Any]] = []
    try:
        for fqn, value in read_values(folder).items():
            values.append(
                {"path": tree_path(fqn), "value": jsonable(value), "repr": short_repr(value), "part": "sharded"}
                | located(fqn)
            )
    except CheckpointError as err:  # a missing or damaged rank file: still show what the metadata says
        metadata["complete"] = False
        metadata["problem"] = f"{metadata.get('problem', '')}; {err}".lstrip("; ")
    if (folder / STATE_FILE).is_file():
        structure = read_structure(folder / STATE_FILE)
        if is_payload(structure.obj):
            step = structure.obj["step"]
            metadata.setdefault("step", step if isinstance(step, int) else jsonable(step))
        for path, leaf in flatten(structure.obj):
            if path in ("objects", "world_size"):  # the sharded objects are above; world_size is in metadata
                continue
            if isinstance(leaf, torch.Tensor):
                tensors.append(
                    {
                        "path": path,
                        "shape": list(leaf.shape),
                        "dtype": str(leaf.dtype).removeprefix("torch."),
                        "numel": leaf.numel(),
                        "bytes": leaf.numel() * leaf.element_size(),
                        "part": "replicated",
                        "files": [STATE_FILE],
                    }
                )
            else:
                values.append({"path": path, "value": jsonable(leaf), "repr": short_repr(leaf), "part": "replicated"})
    metadata["rng"] = [f["name"] for f in files if f["name"].startswith("rng-")]

    entries: dict[str, dict[str, Any]] = {}
    total = {"tensors": 0, "params": 0, "bytes": 0}
    for tensor in tensors:
        group = entries.setdefault(_group(tensor["path"], payload), {"tensors": 0, "params": 0, "bytes": 0})
        for counts in (group, total):
            counts["tensors"] += 1
            counts["params"] += tensor["numel"]
            counts["bytes"] += tensor["bytes"]
    return {
        "path": str(folder),
        "file": str(folder / SHARDS_FILE),
        "kind": SHARDED_KIND if payload else DCP_KIND,
        "bytes": sum(f["bytes"] for f in files),
        "metadata": metadata,
        "tensors": tensors,
        "values": values,
        "files": files,
        "entries": [{"name": name, **counts} for name, counts in entries.items()],
        "total": total,
    }


def describe(
    path: str | os.PathLike[str], *, trusted: bool = False, storage_options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Describe any checkpoint path without reading tensor data: a file, a step folder, or a run directory's newest.

    Args:
        path: A ferry, safetensors or ``torch.save`` file; a checkpoint (step) folder, plain or sharded; a folder
            ``dcp.save`` wrote with ferry's storage; or a Checkpointer run directory (its newest complete checkpoint).
        trusted: Unpickle a ``torch.save`` file in full (runs its code) instead of through torch's restricted
            unpickler.
        storage_options: For a URL of object storage (``s3://bucket/run``): its fsspec file system's options.

    Returns:
        The JSON ``ferry ckpt inspect --json`` prints: ``{"path", "file", "kind", "bytes", "metadata", "tensors",
        "values", "entries", "total"}`` (``tensors``: one row per tensor with its path, shape, dtype, numel and
        bytes; ``entries``: per top-level entry, tensor and parameter counts and bytes); a sharded folder adds
        ``"files"`` and gives each tensor's global shape and the rank files holding its pieces.

    Raises:
        CheckpointError: nothing at ``path``, a folder holding no checkpoint, or as :func:`ferry.load`
            (TorchScript, corrupt header).
        UnsafeCheckpointError: a pickle that would run code without ``trusted``, or a folder written by DCP's own
            ``FileSystemWriter``.
    """
    return describe_target(resolve(path, storage_options=storage_options), trusted=trusted)
