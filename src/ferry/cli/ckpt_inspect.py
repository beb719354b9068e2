"""``ferry ckpt inspect PATH``: what a checkpoint holds, read from headers where the format allows, not the data.

A sharded checkpoint (saved under ``torch.distributed``) is described from its ``shards.json``, the headers of its
files, and the few bytes of its non-tensor values (an optimizer's ``lr``): its tensors' global shapes and which rank
files hold their pieces, and the replicated part in ``state.safetensors``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import torch

from ferry.checkpoint.file import tree
from ferry.checkpoint.run.folders import MANIFEST_FILE, STATE_FILE
from ferry.checkpoint.sharded import storage as dcp
from ferry.checkpoint.sharded.consolidate import read_values
from ferry.cli.ckpt_common import (
    Target,
    flatten,
    human_bytes,
    is_payload,
    is_sharded,
    jsonable,
    read_structure,
    resolve,
    short_repr,
)
from ferry.errors import CheckpointError

__all__ = ["inspect", "inspect_main"]

#: Manifest entries shown as metadata, in this order.
_MANIFEST_KEYS = ("step", "created", "sequence", "torch", "host", "devices", "metrics", "retention")
#: What ``inspect`` calls a sharded Checkpointer checkpoint, and a folder ``dcp.save`` wrote with ferry's storage.
SHARDED_KIND = "Checkpointer checkpoint (sharded)"
DCP_KIND = "DCP folder (ferry storage)"
_RANK_FILE = re.compile(r"^(shard|rng)-(\d+)\.safetensors$")


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


def inspect(target: Target, *, trusted: bool = False) -> dict[str, Any]:
    """Describe the checkpoint ``target`` names, as the JSON ``ferry ckpt inspect --json`` prints.

    Returns:
        ``{"path", "file", "kind", "bytes", "metadata", "tensors", "values", "entries", "total"}``; see
        :func:`ferry.cli.ckpt.main` for the fields. A sharded checkpoint's report is :func:`inspect_sharded`'s.

    Raises:
        CheckpointError: as :func:`ferry.load` (TorchScript, unsafe pickle, not a checkpoint, corrupt header).
    """
    if is_sharded(target.folder):
        assert target.folder is not None
        return inspect_sharded(target.folder, target.manifest, target.problem)
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


def _raw_manifest(folder: Path) -> dict[str, Any]:
    """The manifest as written, even when the folder is incomplete (``{}`` when it cannot be read)."""
    try:
        raw = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _file_role(name: str) -> str:
    """What a file of a sharded checkpoint folder holds, for people."""
    match = _RANK_FILE.match(name)
    if match:
        rank = int(match.group(2))
        return f"rank {rank}'s pieces" if match.group(1) == "shard" else f"rank {rank}'s RNG states"
    roles = {
        MANIFEST_FILE: "manifest: files, sizes, step",
        dcp.METADATA_FILE: "DCP metadata: every tensor's chunks, where each piece is",
        STATE_FILE: "replicated state: step, other objects, values",
    }
    return roles.get(name, "")


def inspect_sharded(folder: Path, manifest: dict[str, Any] | None, problem: str | None = None) -> dict[str, Any]:
    """Describe a checkpoint folder saved through DCP with ferry's storage, as ``inspect --json`` prints it.

    Reads ``shards.json``, the header of ``state.safetensors`` and the non-tensor values' pieces; no tensor data.

    Args:
        folder: A sharded Checkpointer step folder, or a folder ``dcp.save`` wrote with ferry's storage.
        manifest: Its manifest when complete (``None`` when incomplete or absent).
        problem: Why the folder is incomplete, if it is.

    Returns:
        :func:`inspect`'s fields, and ``"files"``. ``metadata`` adds ``layout`` (``"sharded"``) and ``world_size``.
        Each of ``tensors`` has ``"part"``: ``"sharded"`` (with ``"fqn"``, DCP's name, ``"pieces"``, the number of
        stored pieces, ``"ranks"`` and ``"files"``, the rank files holding them; ``shape`` is the global shape) or
        ``"replicated"`` (from ``state.safetensors``). ``values`` likewise. Paths are those of the file
        ``ferry ckpt convert`` makes of the folder. ``files`` is ``[{"name", "bytes", "holds"}]``.

    Raises:
        CheckpointError: ``shards.json`` is missing, damaged or from a newer ferry.
    """
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata_doc = dcp.read_metadata(folder, complete=False)  # describe a damaged folder too
    written = manifest or _raw_manifest(folder)
    payload = (folder / MANIFEST_FILE).exists() or (folder / STATE_FILE).is_file()
    files: list[dict[str, Any]] = [
        {"name": path.name, "bytes": path.stat().st_size, "holds": _file_role(path.name)}
        for path in sorted(folder.iterdir())
        if path.is_file()
    ]
    ranks = {int(m.group(2)) for f in files if (m := _RANK_FILE.match(f["name"]))}
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
        holders = sorted({int(m.group(2)) for name in names if (m := _RANK_FILE.match(name))})
        return {"fqn": fqn, "pieces": pieces.get(fqn, 0), "ranks": holders, "files": names}

    tensors: list[dict[str, Any]] = []
    for fqn, info in metadata_doc.state_dict_metadata.items():
        if isinstance(info, TensorStorageMetadata):
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
        "file": str(folder / dcp.METADATA_FILE),
        "kind": SHARDED_KIND if payload else DCP_KIND,
        "bytes": sum(f["bytes"] for f in files),
        "metadata": metadata,
        "tensors": tensors,
        "values": values,
        "files": files,
        "entries": [{"name": name, **counts} for name, counts in entries.items()],
        "total": total,
    }


def _metadata_text(key: str, value: Any) -> str:
    if key == "metrics" and isinstance(value, dict):
        return ", ".join(f"{name}={number}" for name, number in value.items()) or "none"
    if key == "rng":
        return ", ".join(value) or "none"
    if key == "retention" and isinstance(value, dict):
        return ", ".join(f"{name}={setting}" for name, setting in value.items())
    if key == "devices" and isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value)


def _stored_in(row: dict[str, Any]) -> str:
    """Where a row of a sharded report lies: ``rank 0, 1 (shard-00000.safetensors, ...)`` or ``state.safetensors``."""
    if row.get("part") != "sharded":
        return STATE_FILE
    ranks = ", ".join(map(str, row["ranks"]))
    return f"rank{'s' if len(row['ranks']) != 1 else ''} {ranks} ({', '.join(row['files'])})"


def _print(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    console.print(Text(f"{report['path']}", style="bold"), Text(f"({report['kind']}, {human_bytes(report['bytes'])})"))
    about = Table(show_header=False, box=None, padding=(0, 1))
    about.add_column(style="bold")
    about.add_column(overflow="fold")
    if report["file"] != report["path"]:
        about.add_row("file", Text(report["file"]))
    for key, value in report["metadata"].items():
        about.add_row(key, Text(_metadata_text(key, value)))
    if "devices" not in report["metadata"] and report["kind"] == "Checkpointer checkpoint":
        about.add_row("devices", "not recorded")
    console.print(about)

    sharded = "files" in report  # inspect_sharded's report: where each tensor and value is stored
    if report["tensors"]:
        table = Table(title="Tensors", title_justify="left")
        table.add_column("path", overflow="fold")
        table.add_column("shape")
        table.add_column("dtype")
        table.add_column("params", justify="right")
        table.add_column("bytes", justify="right")
        if sharded:
            table.add_column("pieces", justify="right")
            table.add_column("stored in", overflow="fold")
        for row in report["tensors"]:
            shape = "[" + ", ".join(map(str, row["shape"])) + "]"
            cells = [Text(row["path"]), shape, row["dtype"], f"{row['numel']:,}", human_bytes(row["bytes"])]
            if sharded:
                cells += [str(row.get("pieces", 1)), Text(_stored_in(row))]
            table.add_row(*cells)
        console.print(table)
    if report["values"]:
        table = Table(title="Values", title_justify="left")
        table.add_column("path", overflow="fold")
        table.add_column("value", overflow="fold")
        if sharded:
            table.add_column("stored in", overflow="fold")
        for row in report["values"]:
            table.add_row(Text(row["path"]), Text(row["repr"]), *([Text(_stored_in(row))] if sharded else []))
        console.print(table)
    if sharded:
        table = Table(title="Files", title_justify="left")
        table.add_column("file", overflow="fold")
        table.add_column("bytes", justify="right")
        table.add_column("holds", overflow="fold")
        for row in report["files"]:
            table.add_row(Text(row["name"]), human_bytes(row["bytes"]), Text(row["holds"]))
        console.print(table)
    table = Table(title="Entries", title_justify="left", show_footer=True)
    total = report["total"]
    table.add_column("entry", footer="total", overflow="fold")
    table.add_column("tensors", footer=f"{total['tensors']:,}", justify="right")
    table.add_column("params", footer=f"{total['params']:,}", justify="right")
    table.add_column("bytes", footer=human_bytes(total["bytes"]), justify="right")
    for entry in report["entries"]:
        table.add_row(Text(entry["name"]), f"{entry['tensors']:,}", f"{entry['params']:,}", human_bytes(entry["bytes"]))
    console.print(table)


def inspect_main(args: argparse.Namespace) -> int:
    """``ferry ckpt inspect``: print :func:`inspect`'s report as tables or JSON; 0 when read."""
    report = inspect(resolve(Path(args.path)), trusted=args.trusted)
    if args.json:
        print(json.dumps(report))
    else:
        _print(report)
    return 0
