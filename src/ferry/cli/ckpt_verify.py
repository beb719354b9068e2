"""``ferry ckpt verify PATH``: prints :func:`ferry.checkpoint.tools.verify_path` as a table."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from ferry._remote import is_url
from ferry.checkpoint.tools import Check, verify_path
from ferry.cli.ckpt_common import human_bytes, meter, storage_options


def _print(checks: list[Check], notes: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    table = Table()
    table.add_column("path", overflow="fold")
    table.add_column("kind")
    table.add_column("size", justify="right")
    table.add_column("result", overflow="fold")
    for check in checks:
        result = Text("ok", style="green") if check.ok else Text(f"FAILED: {check.problem}", style="red")
        table.add_row(Text(check.path), check.kind, human_bytes(check.bytes), result)
    console.print(table)
    for note in notes:
        console.print(Text(f"note: {note}", style="yellow"))
    failed = sum(not check.ok for check in checks)
    if failed:
        console.print(Text(f"{failed} of {len(checks)} failed verification.", style="bold red"))
    else:
        checked = "; ".join(sorted({check.checked for check in checks}))
        console.print(Text(f"all {len(checks)} verified ({checked}).", style="bold green"))


def verify_main(args: argparse.Namespace) -> int:
    """``ferry ckpt verify``: 0 when everything verifies, 1 when anything does not (each problem named)."""
    options = storage_options(args, args.path)
    target = args.path if is_url(args.path) else Path(args.path)
    checks, notes = verify_path(target, meter, storage_options=options)
    ok = all(check.ok for check in checks)
    if args.json:
        print(json.dumps({"path": args.path, "ok": ok, "checked": [asdict(check) for check in checks], "notes": notes}))
    else:
        _print(checks, notes)
    return 0 if ok else 1
