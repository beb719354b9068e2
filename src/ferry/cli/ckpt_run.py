"""``ferry ckpt ls DIR`` and ``ferry ckpt gc DIR``: a run directory's checkpoints; removing what its policy lets go."""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from ferry._fs import fsync_directory
from ferry.checkpoint.run.folders import CheckpointEntry, RetentionPolicy, remove_checkpoint, scan, stale_temporaries
from ferry.checkpoint.run.lock import LOCK_FILE, DirectoryLock
from ferry.cli.ckpt_common import human_bytes, run_directory
from ferry.errors import CheckpointError

__all__ = ["collect", "gc_main", "listing", "ls_main", "recorded_policy"]


def recorded_policy(entries: list[CheckpointEntry]) -> tuple[RetentionPolicy, bool]:
    """The retention policy in the newest complete manifest, and whether one was recorded (else the default)."""
    complete = [entry for entry in entries if entry.complete]
    manifest = complete[-1].manifest if complete else None
    recorded = manifest is not None and isinstance(manifest.get("retention"), dict)
    return RetentionPolicy.from_json(manifest.get("retention") if manifest else None), recorded


def _writer(directory: Path) -> dict[str, Any] | None:
    """Who holds the directory's write lock (``{"pid", "host"}``), as its lock file says; None when unlocked."""
    try:
        holder = json.loads((directory / LOCK_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"pid": None, "host": None}
    if not isinstance(holder, dict):
        return {"pid": None, "host": None}
    return {"pid": holder.get("pid"), "host": holder.get("host")}


def _entry_json(entry: CheckpointEntry, kept_by: list[str] | None, newest: bool) -> dict[str, Any]:
    return {
        "step": entry.step,
        "folder": str(entry.folder),
        "complete": entry.complete,
        "problem": entry.problem,
        "sequence": entry.sequence,
        "created": entry.created,
        "bytes": entry.size,
        "metrics": entry.metrics,
        "kept_by": kept_by,
        "newest": newest,
    }


def listing(directory: Path) -> dict[str, Any]:
    """What ``ferry ckpt ls --json`` prints for ``directory``.

    Returns:
        ``{"directory", "policy", "policy_recorded", "newest", "checkpoints": [{"step", "folder", "complete",
        "problem", "sequence", "created", "bytes", "metrics", "kept_by", "newest"}], "stale_temporaries",
        "writer"}``: checkpoints in save order, incomplete ones last; ``kept_by`` is ``None`` for incomplete ones;
        ``writer`` is ``{"pid", "host"}`` from the lock file of a Checkpointer writing the directory, else ``None``.
    """
    entries = scan(run_directory(directory))
    policy, recorded = recorded_policy(entries)
    reasons = policy.reasons(entries)
    complete = [entry for entry in entries if entry.complete]
    newest = complete[-1].folder if complete else None
    return {
        "directory": str(directory),
        "policy": policy.to_json(),
        "policy_recorded": recorded,
        "newest": str(newest) if newest else None,
        "checkpoints": [_entry_json(e, reasons.get(e.folder), e.folder == newest) for e in entries],
        "stale_temporaries": [str(path) for path in stale_temporaries(directory)],
        "writer": _writer(directory),
    }


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
                str(row["step"]),
                (row["created"] or "?").replace("T", " ")[:16],
                human_bytes(row["bytes"]),
                status,
                kept,
                Text(", ".join(f"{k}={v:g}" for k, v in row["metrics"].items())),
            )
        console.print(table)
        console.print(Text("* newest; kept by '—': ferry ckpt gc would remove it", style="dim"))
    console.print(Text(f"retention: {_policy_text(report['policy'], report['policy_recorded'])}"))
    for path in report["stale_temporaries"]:
        console.print(Text(f"stale temporary: {path} (left by a crashed save; ferry ckpt gc removes it)", "yellow"))
    if report["writer"] is not None:
        writer = report["writer"]
        console.print(Text(f"written by pid {writer['pid']} on {writer['host']} (its lock file: {LOCK_FILE})", "dim"))


def ls_main(args: argparse.Namespace) -> int:
    """``ferry ckpt ls``: 0 when listed (incomplete checkpoints are shown, not an error)."""
    report = listing(Path(args.dir))
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


def collect(directory: Path, policy: RetentionPolicy | None = None, *, dry_run: bool = False) -> dict[str, Any]:
    """Remove the complete checkpoints ``policy`` does not keep, and stale temporary folders.

    ``dry_run`` removes nothing. The newest complete checkpoint and the best (by ``keep_best``) are never removed;
    nor are incomplete checkpoints (they are listed, to inspect and delete by hand).

    Args:
        directory: The run directory.
        policy: The retention policy; ``None``: the one recorded in the newest manifest (or the default).
        dry_run: Only say what would go.

    Returns:
        ``{"directory", "policy", "dry_run", "removed": [{"step", "folder", "bytes"}], "kept": [{"step", "folder",
        "kept_by"}], "incomplete": [{"step", "folder", "problem"}], "stale_temporaries": [path], "errors": [text]}``.
    """
    lock = DirectoryLock(run_directory(directory))
    if not dry_run:  # taken before scanning, so no save or prune of a Checkpointer can interleave
        try:
            lock.acquire()
        except CheckpointError as err:
            raise CheckpointError(
                f"ferry ckpt gc removes checkpoints only while no Checkpointer writes the directory. {err}",
                path=directory,
            ) from None
    try:
        entries = scan(directory)
        policy = policy or recorded_policy(entries)[0]
        reasons = policy.reasons(entries)
        complete = [entry for entry in entries if entry.complete]
        protected = {complete[-1].folder} if complete else set()
        best = policy.best(complete)
        if best is not None:
            protected.add(best.folder)
        doomed = [entry for entry in complete if not reasons[entry.folder] and entry.folder not in protected]
        stale = stale_temporaries(directory)
        removed, errors = _remove(doomed, stale, dry_run=dry_run)
        if not dry_run and (doomed or stale):
            fsync_directory(directory)
    finally:
        lock.release()
    going = {entry.folder for entry in doomed}
    return {
        "directory": str(directory),
        "policy": policy.to_json(),
        "dry_run": dry_run,
        "removed": removed,
        "kept": [
            {"step": e.step, "folder": str(e.folder), "kept_by": reasons[e.folder]}
            for e in complete
            if e.folder not in going
        ],
        "incomplete": [
            {"step": e.step, "folder": str(e.folder), "problem": e.problem} for e in entries if not e.complete
        ],
        "stale_temporaries": [str(path) for path in stale],
        "errors": errors,
    }


def _remove(
    doomed: list[CheckpointEntry], stale: list[Path], *, dry_run: bool
) -> tuple[list[dict[str, Any]], list[str]]:
    """Remove the checkpoints ``doomed`` and the temporaries ``stale``; return what went, and what failed."""
    removed: list[dict[str, Any]] = []
    errors: list[str] = []
    for entry in doomed:
        size = entry.size
        if not dry_run:
            try:
                remove_checkpoint(entry.folder)
            except OSError as err:
                errors.append(f"cannot remove {str(entry.folder)!r}: {err.strerror or err}")
                continue
        removed.append({"step": entry.step, "folder": str(entry.folder), "bytes": size})
    for path in stale if not dry_run else ():
        try:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue  # gone already: another process cleaned it
        except OSError as err:
            errors.append(f"cannot remove {str(path)!r}: {err.strerror or err}")
    return removed, errors


def _print_collection(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False)
    verb = "would remove" if report["dry_run"] else "removed"
    console.print(Text(f"retention: {_policy_text(report['policy'], True)}"))
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
    freed = sum(row["bytes"] for row in report["removed"])
    count = len(report["removed"]) + len(report["stale_temporaries"])
    console.print(Text(f"{verb} {count} folder(s), {human_bytes(freed)} of checkpoints.", style="bold"))


def gc_main(args: argparse.Namespace) -> int:
    """``ferry ckpt gc``: 0 when done (or nothing to do), 2 when a removal failed (each failure named on stderr)."""
    directory = Path(args.dir)
    policy, _ = recorded_policy(scan(run_directory(directory)))
    report = collect(directory, _override(policy, args), dry_run=args.dry_run)
    if args.json:
        print(json.dumps(report))
    else:
        _print_collection(report)
    if report["errors"]:
        raise CheckpointError(
            "; ".join(report["errors"]) + ". Check the folders' permissions, then run ferry ckpt gc again."
        )
    return 0
