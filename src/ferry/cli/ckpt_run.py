"""``ferry ckpt ls DIR`` and ``gc DIR``: print :func:`~ferry.checkpoint.tools.list_run` and ``collect``."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import Any

from ferry.checkpoint.run.folders import RetentionPolicy, scan
from ferry.checkpoint.run.lock import LOCK_FILE
from ferry.checkpoint.tools import collect, list_run, location, recorded_policy, run_directory
from ferry.cli.ckpt_common import human_bytes, storage_options
from ferry.errors import CheckpointError


def _policy_text(policy: dict[str, Any], recorded: bool) -> str:
    parts = [f"keep_last={policy['keep_last']}"]
    if policy["keep_every"] is not None:
        parts.append(f"keep_every={policy['keep_every']}")
    if policy["keep_best"] is not None:
        parts.append(f"keep_best={policy['keep_best'][0]}:{policy['keep_best'][1]}")
    return ", ".join(parts) + ("" if recorded else " (none recorded: the default)")


def _print_listing(report: dict[str, Any]) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    rows = report["checkpoints"]
    if not rows:
        console.print(Text(f"no checkpoints in {report['directory']}"))
    else:
        table = Table(
            title=Text(f"{report['directory']}: {len(rows)} checkpoint(s)"),
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            collapse_padding=True,
        )
        table.add_column("", no_wrap=True)
        table.add_column("step", justify="right", no_wrap=True)
        table.add_column("saved", no_wrap=True)
        table.add_column("size", justify="right", no_wrap=True)
        table.add_column("status", min_width=8)
        table.add_column("kept by")
        table.add_column("metrics", overflow="fold")
        for row in rows:
            status = Text("complete", style="green") if row["complete"] else Text(row["problem"], style="red")
            kept = "" if row["kept_by"] is None else ", ".join(row["kept_by"]) or "—"
            table.add_row(
                Text("*", style="bold") if row["newest"] else "",
                _step_text(row),
                (row["created"] or "?").replace("T", " ")[:16],
                human_bytes(row["bytes"]),
                status,
                kept,
                Text(", ".join(f"{k}={v:g}" for k, v in row["metrics"].items())),
            )
        console.print(table)
        notes = ["* newest"]
        if any(row["kept_by"] == [] for row in rows):  # explain the dash only where a row shows one
            notes.append("kept by '—': ferry ckpt gc would remove it")
        console.print(Text("; ".join(notes), style="dim"))
    console.print(Text(f"retention: {_policy_text(report['policy'], report['policy_recorded'])}"))
    for path in report["stale_temporaries"]:
        writer = report["writer"]
        why = "left by a crashed save"
        if writer is not None and writer.get("alive") is not False:
            why = "a save or a deletion in progress, or left by a crashed one"  # the writer's lease is held
        console.print(Text(f"stale temporary: {path} ({why}; ferry ckpt gc removes it)", "yellow"))
    if report["writer"] is not None:
        writer = report["writer"]
        stale = (
            " (that process is no longer running: the next writer takes the lock over)"
            if writer.get("alive") is False
            else ""
        )
        console.print(
            Text(f"written by pid {writer['pid']} on {writer['host']}{stale} (its lock file: {LOCK_FILE})", "dim")
        )


def _step_text(row: dict[str, Any]) -> str:
    """The step (on object storage each save's folder is ``step-<n>.<token>``; ``run/step-<n>`` names the newest)."""
    return str(row["step"])


def ls_main(args: argparse.Namespace) -> int:
    """``ferry ckpt ls``: 0 when listed (incomplete checkpoints are shown, not an error)."""
    report = list_run(args.dir, storage_options=storage_options(args, args.dir))
    if args.json:
        print(json.dumps(report))
    else:
        _print_listing(report)
    return 0


def _override(policy: RetentionPolicy, args: argparse.Namespace) -> RetentionPolicy:
    changes: dict[str, Any] = {}
    if args.keep_last is not None:
        changes["keep_last"] = args.keep_last
    if args.keep_every is not None:
        changes["keep_every"] = None if args.keep_every.lower() == "none" else _int(args.keep_every, "--keep-every")
    if args.keep_best is not None:
        changes["keep_best"] = None if args.keep_best.lower() == "none" else _best(args.keep_best)
    return replace(policy, **changes)  # RetentionPolicy checks the values


def _int(text: str, flag: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CheckpointError(f"{flag} {text!r} is not a whole number. Pass e.g. {flag} 1000, or none.") from None


def _best(text: str) -> tuple[str, str]:
    metric, _, mode = text.rpartition(":")
    if not metric or mode not in ("min", "max"):
        raise CheckpointError(
            f"--keep-best {text!r} is not METRIC:min or METRIC:max. Pass e.g. --keep-best val_loss:min, or none."
        )
    return metric, mode


def _print_collection(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False)
    verb = "would remove" if report["dry_run"] else "removed"
    console.print(Text(f"retention: {_policy_text(report['policy'], True)}"))
    if report.get("broken_lock"):
        holder = report["broken_lock"]
        deleted = "would delete" if report["dry_run"] else "deleted"
        console.print(Text(f"{deleted} the write lock of pid {holder['pid']} on {holder['host']}", style="yellow"))
    for row in report["removed"]:
        console.print(Text(f"{verb} {row['folder']} (step {row['step']}, {human_bytes(row['bytes'])})"))
    for path in report["stale_temporaries"]:
        console.print(Text(f"{verb} stale temporary {path}"))
    for row in report["kept"]:
        console.print(Text(f"kept {row['folder']} ({', '.join(row['kept_by'])})", style="dim"))
    for row in report["incomplete"]:
        console.print(
            Text(f"left alone: {row['folder']} is incomplete ({row['problem']}); inspect it, then delete it by hand")
        )
    aborted = "would abort" if report["dry_run"] else "aborted"
    for key in report.get("uploads", []):
        console.print(Text(f"{aborted} the incomplete multipart upload of {key}"))
    freed = sum(row["bytes"] for row in report["removed"])
    count = len(report["removed"]) + len(report["stale_temporaries"])
    leftovers = f" and {human_bytes(report['stale_bytes'])} of leftovers" if report["stale_temporaries"] else ""
    console.print(Text(f"{verb} {count} folder(s), {human_bytes(freed)} of checkpoints{leftovers}.", style="bold"))


def gc_main(args: argparse.Namespace) -> int:
    """``ferry ckpt gc``: 0 when done (or nothing to do), 2 when a removal failed (each failure named on stderr)."""
    options = storage_options(args, args.dir)
    directory = location(args.dir, options)
    policy, _ = recorded_policy(scan(run_directory(directory), trainer_folders=True))
    report = collect(
        directory, _override(policy, args), dry_run=args.dry_run, break_lock=args.break_lock, storage_options=options
    )
    if args.json:
        print(json.dumps(report))
    else:
        _print_collection(report)
    if report["errors"]:
        raise CheckpointError(
            "; ".join(report["errors"]) + ". Check the folders' permissions, then run ferry ckpt gc again."
        )
    return 0
