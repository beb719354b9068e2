"""``ferry ckpt inspect PATH``: what a checkpoint holds, read from headers where the format allows, not the data."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from ferry.checkpoint.store import STATE_FILE
from ferry.cli.ckpt_common import (
    Target,
    flatten,
    human_bytes,
    is_payload,
    jsonable,
    read_structure,
    resolve,
    short_repr,
)
from ferry.errors import CheckpointError

__all__ = ["inspect", "inspect_main"]

#: Manifest entries shown as metadata, in this order.
_MANIFEST_KEYS = ("step", "created", "sequence", "torch", "host", "devices", "metrics", "retention")


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
        :func:`ferry.cli.ckpt.main` for the fields.

    Raises:
        CheckpointError: as :func:`ferry.load` (TorchScript, unsafe pickle, not a checkpoint, corrupt header).
    """
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

    if report["tensors"]:
        table = Table(title="Tensors", title_justify="left")
        table.add_column("path", overflow="fold")
        table.add_column("shape")
        table.add_column("dtype")
        table.add_column("params", justify="right")
        table.add_column("bytes", justify="right")
        for row in report["tensors"]:
            shape = "[" + ", ".join(map(str, row["shape"])) + "]"
            table.add_row(Text(row["path"]), shape, row["dtype"], f"{row['numel']:,}", human_bytes(row["bytes"]))
        console.print(table)
    if report["values"]:
        table = Table(title="Values", title_justify="left")
        table.add_column("path", overflow="fold")
        table.add_column("value", overflow="fold")
        for row in report["values"]:
            table.add_row(Text(row["path"]), Text(row["repr"]))
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
