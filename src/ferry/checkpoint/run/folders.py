"""A run directory on disk: its checkpoint folders, their manifests, and which ones the retention policy keeps.

Shared by the :class:`ferry.Checkpointer` (which writes) and ``ferry ckpt`` (which lists, verifies and collects).
The layout of one folder is :mod:`ferry.checkpoint.folder`'s.
Nothing here writes except :func:`retire_checkpoint` and :func:`remove_checkpoint`.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ferry._fs import TMP_MARKER, pid_alive, temporary_name
from ferry._remote_path import RemotePath
from ferry.checkpoint.folder import MANIFEST_FILE, folder_step, read_manifest, step_name, step_of
from ferry.errors import CheckpointError

__all__ = [
    "CheckpointEntry",
    "RetentionPolicy",
    "remove_checkpoint",
    "retire_checkpoint",
    "scan",
    "stale_temporaries",
    "step_folder",
]

_TMP_RE = re.compile(re.escape(TMP_MARKER) + r"(\d+)-[0-9a-f]+$")


def step_folder(directory: Path, step: int) -> Path:
    """The folder of ``step`` in ``directory``: ``directory / step_name(step)``."""
    return directory / step_name(step)


@dataclass(frozen=True)
class CheckpointEntry:
    """One ``step-<n>`` folder of a run directory.

    Attributes:
        step: The training step in the folder's name.
        folder: The folder.
        manifest: Its manifest when the checkpoint is complete, else ``None``.
        problem: Why it is not complete (``None`` when it is).
    """

    step: int
    folder: Path | RemotePath
    manifest: dict[str, Any] | None = field(repr=False)
    problem: str | None
    #: Whether the folder has a manifest at all (``None``: not asked; local folders). A folder on object storage
    #: without one was never committed: debris of a save, or of a deletion, cut short.
    has_manifest: bool | None = field(default=None, repr=False)

    @property
    def complete(self) -> bool:
        """Whether the folder holds a complete checkpoint (manifest and every file at its recorded size)."""
        return self.manifest is not None

    @property
    def sequence(self) -> int:
        """The save sequence number (1 for a directory's first save); 0 when unknown."""
        value = (self.manifest or {}).get("sequence")
        return value if isinstance(value, int) else 0

    @property
    def created(self) -> str | None:
        """When the checkpoint was saved (ISO 8601, local time with offset), if recorded."""
        value = (self.manifest or {}).get("created")
        return value if isinstance(value, str) else None

    @property
    def size(self) -> int:
        """Bytes on disk of the files in the folder."""
        if isinstance(self.folder, RemotePath):
            return sum(self.folder.files().values())
        total = 0
        for path in self.folder.iterdir():
            try:
                total += path.stat().st_size
            except OSError:
                continue
        return total

    @property
    def metrics(self) -> dict[str, float]:
        """The metrics passed to ``save`` (e.g. ``{"val_loss": 0.31}``)."""
        value = (self.manifest or {}).get("metrics")
        return {k: v for k, v in value.items() if isinstance(v, (int, float))} if isinstance(value, dict) else {}


#: The problem of a committed folder of a step that a later save of the same step replaced (object storage, where a
#: replacement is a second folder of that step, until the older one is deleted).
SUPERSEDED = "superseded by a newer save of the same step"


def scan(directory: Path | RemotePath, *, trainer_folders: bool = False) -> list[CheckpointEntry]:
    """Every ``step-<n>`` folder of ``directory``: complete ones in save order, then incomplete ones by step.

    Of two complete folders of one step (object storage, between a replacement's commit and the deletion of the
    folder it replaces), the older save is listed as incomplete (:data:`SUPERSEDED`).

    Args:
        directory: The run directory (a local folder, or a :class:`~ferry._remote_path.RemotePath`).
        trainer_folders: Also the ``checkpoint-<n>`` folders of a Hugging Face Trainer (``ferry ckpt`` lists them;
            the Checkpointer never touches them). Those without a manifest are listed as incomplete.
    """
    if isinstance(directory, RemotePath):
        entries = _scan_remote(directory, trainer_folders)
    else:
        entries = _scan_local(directory, trainer_folders)
    entries.sort(key=lambda e: (not e.complete, e.sequence, e.step))
    newest: dict[int, CheckpointEntry] = {}
    for entry in entries:
        if entry.complete:
            newest[entry.step] = entry  # save order: the last one of a step is its newest save
    if len(newest) < sum(entry.complete for entry in entries):
        entries = [
            entry
            if not entry.complete or newest[entry.step] is entry
            else CheckpointEntry(entry.step, entry.folder, None, SUPERSEDED, True)
            for entry in entries
        ]
        entries.sort(key=lambda e: (not e.complete, e.sequence, e.step))
    return entries


def _scan_remote(directory: RemotePath, trainer_folders: bool) -> list[CheckpointEntry]:
    """:func:`scan` on object storage: one listing of every object under the run, then one read per manifest."""
    members: dict[str, dict[str, int]] = {}
    for relative, size in directory.files().items():
        folder, _, name = relative.partition("/")
        if name and "/" not in name:
            members.setdefault(folder, {})[name] = size
    entries = []
    for name, sizes in members.items():
        step = folder_step(name) if trainer_folders else step_of(name)
        if step is not None:
            manifest, problem = read_manifest(directory / name, sizes)  # a manifest the listing lacks is read too
            has_manifest = manifest is not None or not (problem or "").startswith(f"no {MANIFEST_FILE}")
            entries.append(CheckpointEntry(step, directory / name, manifest, problem, has_manifest))
    return entries


def _scan_local(directory: Path, trainer_folders: bool) -> list[CheckpointEntry]:
    entries = []
    try:
        children = list(directory.iterdir())
    except FileNotFoundError:
        return []
    for child in children:
        step = folder_step(child.name) if trainer_folders else step_of(child.name)
        if step is not None and child.is_dir():
            manifest, problem = read_manifest(child)
            entries.append(CheckpointEntry(step, child, manifest, problem))
    return entries


def stale_temporaries(directory: Path) -> list[Path]:
    """Temporary files and folders in ``directory`` left by processes that no longer run (crashed saves)."""
    stale = []
    for child in directory.iterdir():
        match = _TMP_RE.search(child.name)
        if match and not pid_alive(int(match.group(1))):
            stale.append(child)
    return sorted(stale)


def retire_checkpoint(folder: Path) -> Path:
    """Rename a checkpoint folder to a temporary name (atomic): it stops being a checkpoint. Returns the new name.

    The renamed folder is what is left to delete; a crash before that leaves a temporary folder, which the next
    start removes, never a half-deleted ``step-<n>``.

    Raises:
        OSError: the rename failed; ``folder`` is unchanged.
    """
    doomed = temporary_name(folder)
    os.replace(folder, doomed)
    return doomed


def remove_checkpoint(folder: Path) -> None:
    """Delete a checkpoint folder: :func:`retire_checkpoint`, then delete the renamed folder.

    Raises:
        OSError: the rename failed; ``folder`` is unchanged.
    """
    shutil.rmtree(retire_checkpoint(folder), ignore_errors=True)


@dataclass(frozen=True)
class RetentionPolicy:
    """Which complete checkpoints to keep.

    Kept: the ``keep_last`` most recently saved; every step divisible by ``keep_every``; the best by
    ``keep_best = (metric, "min" | "max")`` among checkpoints saved with that metric. The most recently saved
    checkpoint is always kept (``keep_last >= 1``).

    Raises:
        CheckpointError: an invalid setting (the message says which and what is allowed).
    """

    keep_last: int = 3
    keep_every: int | None = None
    keep_best: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.keep_last, bool) or not isinstance(self.keep_last, int) or self.keep_last < 1:
            raise CheckpointError(
                f"keep_last={self.keep_last!r} is not allowed: at least one checkpoint must be kept. "
                "Pass keep_last=1 or more."
            )
        if self.keep_every is not None and (
            isinstance(self.keep_every, bool) or not isinstance(self.keep_every, int) or self.keep_every < 1
        ):
            raise CheckpointError(
                f"keep_every={self.keep_every!r} is not allowed: it keeps steps divisible by it, so it must be an "
                "int >= 1. Pass e.g. keep_every=1000, or None."
            )
        if self.keep_best is not None:
            best = self.keep_best
            if not (
                isinstance(best, (tuple, list))
                and len(best) == 2
                and isinstance(best[0], str)
                and best[1] in ("min", "max")
            ):
                raise CheckpointError(
                    f"keep_best={best!r} is not allowed: it is (metric name, 'min' or 'max'). "
                    'Pass e.g. keep_best=("val_loss", "min"), and the metric to save(..., metrics={"val_loss": x}).'
                )
            object.__setattr__(self, "keep_best", (best[0], best[1]))

    def to_json(self) -> dict[str, Any]:
        """The policy as JSON-ready values (recorded in each manifest, read back by ``ferry ckpt gc``)."""
        return {"keep_last": self.keep_last, "keep_every": self.keep_every, "keep_best": self.keep_best}

    @classmethod
    def from_json(cls, data: Any) -> RetentionPolicy:
        """The policy recorded in a manifest; the defaults where none is recorded."""
        if not isinstance(data, dict):
            return cls()
        best = data.get("keep_best")
        return cls(
            keep_last=data.get("keep_last", 3),
            keep_every=data.get("keep_every"),
            keep_best=tuple(best) if isinstance(best, list) else best,
        )

    def best(self, entries: list[CheckpointEntry]) -> CheckpointEntry | None:
        """The best complete checkpoint by ``keep_best`` (ties: the most recently saved), or None."""
        if self.keep_best is None:
            return None
        metric, mode = self.keep_best
        scored = [
            (e.metrics[metric], e)
            for e in entries
            if e.complete and metric in e.metrics and not math.isnan(e.metrics[metric])
        ]
        if not scored:
            return None
        sign = 1 if mode == "min" else -1
        return min(reversed(scored), key=lambda pair: sign * pair[0])[1]

    def reasons(self, entries: list[CheckpointEntry]) -> dict[Path | RemotePath, list[str]]:
        """For each complete checkpoint (in save order, as :func:`scan` gives them), why it is kept.

        An empty list means the policy lets it be deleted.
        """
        complete = [e for e in entries if e.complete]
        why: dict[Path | RemotePath, list[str]] = {e.folder: [] for e in complete}
        for entry in complete[-self.keep_last :]:
            why[entry.folder].append("last")
        if self.keep_every is not None:
            for entry in complete:
                if entry.step % self.keep_every == 0:
                    why[entry.folder].append("every")
        best = self.best(complete)
        if best is not None:
            why[best.folder].append("best")
        return why
