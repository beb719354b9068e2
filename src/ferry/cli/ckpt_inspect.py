"""``ferry ckpt inspect PATH``: prints :func:`ferry.checkpoint.tools.describe` as tables."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ferry.checkpoint.folder import STATE_FILE
from ferry.checkpoint.tools import describe
from ferry.cli.ckpt_common import human_bytes, storage_options


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
    report = describe(args.path, trusted=args.trusted, storage_options=storage_options(args, args.path))
    if args.json:
        print(json.dumps(report))
    else:
        _print(report)
    return 0
