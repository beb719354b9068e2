"""``ferry ckpt diff A B``: prints :func:`ferry.checkpoint.tools.diff` as a table."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ferry.checkpoint.tools import diff
from ferry.checkpoint.tools._paths import short_repr
from ferry.cli.ckpt_common import storage_options


def _side(description: dict[str, Any]) -> str:
    if "shape" in description:
        return f"{description['dtype']} [{', '.join(map(str, description['shape']))}]"
    return short_repr(description["value"], 40)


def _print(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    console.print(Text(f"A: {report['a']}\nB: {report['b']}"))
    rows = (
        [("removed", row["path"], _side(row["a"]), "", "") for row in report["removed"]]
        + [("added", row["path"], "", _side(row["b"]), "") for row in report["added"]]
        + [
            (
                ", ".join(row["what"]),
                row["path"],
                _side(row["a"]),
                _side(row["b"]),
                ""
                if row["max_abs_diff"] is None
                else f"{row['max_abs_diff']:.6g}"
                if isinstance(row["max_abs_diff"], float)
                else str(row["max_abs_diff"]),
            )
            for row in report["changed"]
        ]
    )
    if rows:
        table = Table()
        table.add_column("change")
        table.add_column("path", overflow="fold")
        table.add_column("A", overflow="fold")
        table.add_column("B", overflow="fold")
        table.add_column("max |A-B|", justify="right")
        styles = {"removed": "red", "added": "green"}
        for change, path, old, new, gap in rows:
            table.add_row(Text(change, style=styles.get(change, "yellow")), Text(path), old, new, gap)
        console.print(table)
    console.print(
        f"{len(report['added'])} added, {len(report['removed'])} removed, {len(report['changed'])} changed, "
        f"{report['unchanged']} unchanged."
    )


def diff_main(args: argparse.Namespace) -> int:
    """``ferry ckpt diff``: 0 when A and B hold the same entries and values (within ``--atol``), 1 when they differ."""
    options = storage_options(args, args.a, args.b)
    report = diff(args.a, args.b, atol=args.atol, trusted=args.trusted, storage_options=options)
    if args.json:
        print(json.dumps(report))
    else:
        _print(report)
    return 1 if report["added"] or report["removed"] or report["changed"] else 0
