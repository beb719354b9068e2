"""The folders of :mod:`ferry.integrations.accelerate` on disk: writing one, reading one, naming and rotating them.

A checkpoint folder (``checkpoint_<i>`` with automatic naming, else any ``output_dir``) holds the ferry files of
:mod:`ferry.integrations._accelerate_state` and a ``manifest.json`` (ferry's manifest, ``"layout": "accelerate"``,
every file with its size), so ``ferry.verify(folder)`` and ``ferry ckpt verify`` check it. It is written under a
temporary name beside its final one (``checkpoint_3.ferry-tmp-<pid>-<hex>``), the manifest last, and committed by one
rename; the parent folder is then fsynced. A folder without a manifest is never loaded; the temporaries of processes
that no longer run are deleted by the next save or load.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import time
import warnings
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar

import torch

from ferry._fs import temporary_name
from ferry.checkpoint.file import writer
from ferry.checkpoint.file.api import load as load_file
from ferry.checkpoint.folder import MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION, read_manifest
from ferry.checkpoint.run import commit
from ferry.checkpoint.run.folders import remove_checkpoint, stale_temporaries
from ferry.checkpoint.sharded import ranks
from ferry.errors import CheckpointError, CheckpointWarning, CorruptCheckpointError, UnsafeCheckpointError
from ferry.integrations import _accelerate_state as state

__all__ = [
    "CHECKPOINTS",
    "LAYOUT",
    "NAME",
    "check_replaceable",
    "missing",
    "numbered",
    "read",
    "read_newest",
    "recover_parked",
    "remove_leftovers",
    "rotate",
    "write",
]

#: The ``layout`` of the manifest of a folder written by ``save_state``.
LAYOUT = "accelerate"
#: Where automatic naming puts checkpoints, under ``project_dir``, and how it names them (Accelerate's names).
CHECKPOINTS = "checkpoints"
NAME = re.compile(r"^checkpoint_(\d+)$")
_T = TypeVar("_T")
_RNG = re.compile(r"^random_states_\d+\.safetensors$")


def _is_ours(folder: Path) -> bool:
    """Whether ``folder`` holds a manifest of this layout (complete or not)."""
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("layout") == LAYOUT


def check_replaceable(final: Path) -> None:
    """Raise unless ``final`` is absent, an empty folder or a checkpoint of this layout: what a commit may replace.

    Raises:
        CheckpointError: ``final`` is a file, or a folder holding other files (the message lists some).
    """
    if not final.exists() and not final.is_symlink():
        return
    if not final.is_dir() or final.is_symlink():
        raise CheckpointError(
            f"save_state cannot write to {str(final)!r}: it is a file, not a folder. Pass a folder name for "
            "output_dir.",
            path=final,
        )
    entries = sorted(entry.name for entry in final.iterdir())
    if not entries or _is_ours(final):
        return
    shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
    raise CheckpointError(
        f"save_state will not write to {str(final)!r}: the folder holds files that are not a checkpoint of "
        f"ferry.integrations.accelerate ({shown}). ferry replaces the whole folder in one atomic rename, which would "
        "delete them. Pass a new or empty folder, or one save_state wrote before.",
        path=final,
    )


def recover_parked(final: Path) -> None:
    """Put back a checkpoint parked by a replacing save that was killed between its two renames."""
    parked = final.with_name(final.name + ".ferry-old")
    if parked.is_dir() and not final.exists():
        with contextlib.suppress(OSError):
            os.replace(parked, final)


# -- writing ----------------------------------------------------------------------------------------------------------


def write(final: Path, encoded: list[tuple[state.Part, Any]], accelerator: Any, group: ranks.Group | None) -> None:
    """Write the files into a temporary folder beside ``final``, then commit it onto ``final`` durably.

    With more than one process (``group``), the main process creates the temporary folder, every process writes its
    own files into it (fsynced), and the main process writes the manifest and commits only after every process has
    reported its files written. A failure on any process makes every process raise, and the folder is deleted.
    """
    what = f"save_state to {str(final)!r}"
    main = group is None or group.rank == 0
    tmp = ranks.broadcast(group, temporary_name(final) if main else final)  # the main process names it

    def make() -> None:
        if main:
            tmp.mkdir()

    def write_mine() -> dict[str, dict[str, int]]:
        files: dict[str, dict[str, int]] = {}
        for part, enc in encoded:
            writer.write_file(tmp / part.name, enc.tree_json, enc.blobs)
            files[part.name] = {"bytes": (tmp / part.name).stat().st_size}
        return files

    def commit_all(every: list[dict[str, dict[str, int]]]) -> tuple[Path | None, CheckpointError | None]:
        if not main:
            return None, None
        files = {name: size for mine in every for name, size in mine.items()}
        commit.write_manifest(tmp, _manifest(accelerator, final, dict(sorted(files.items()))))
        parked = commit.commit(tmp, final)
        return parked, commit.sync_commit(final.parent, int(accelerator.step), final)

    try:
        _agree(group, make, what, final)
        every = ranks.gather(group, _agree(group, write_mine, what, final))
        parked, error = _agree(group, lambda: commit_all(every), what, final)
    except BaseException:
        if main:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    if parked is not None:
        shutil.rmtree(parked, ignore_errors=True)
    if error is not None:
        raise error


def _agree(group: ranks.Group | None, work: Callable[[], _T], what: str, final: Path) -> _T:
    """Run one stage of a save on every process; a failure on any makes every one raise (the message says why)."""

    def stage() -> _T:
        try:
            return work()
        except Exception as err:
            failure = commit.save_failed(err, what, final)
            if failure is err:
                raise
            raise failure from err

    return ranks.agree(group, stage, what=what, where=final)


def _manifest(accelerator: Any, final: Path, files: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The manifest of a folder: ferry's checkpoint manifest with the accelerate layout and the objects saved."""
    match = NAME.match(final.name)
    return {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "layout": LAYOUT,
        "iteration": int(match.group(1)) if match else None,
        "accelerator_step": int(accelerator.step),
        "objects": state.expected_files(accelerator),
        "processes": int(accelerator.num_processes),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "torch": torch.__version__,
        "accelerate": version("accelerate"),
        "files": files,
    }


def numbered(directory: Path) -> dict[int, Path]:
    """The ``checkpoint_<n>`` folders of ``directory`` by number (any content: Accelerate's own count too)."""
    found = {}
    with contextlib.suppress(FileNotFoundError):
        for child in directory.iterdir():
            match = NAME.match(child.name)
            if match and child.is_dir():
                found[int(match.group(1))] = child
    return found


def remove_leftovers(directory: Path) -> None:
    """Delete what killed saves and rotations left in ``directory``: temporaries of processes no longer running."""
    for leftover in stale_temporaries(directory):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                leftover.unlink()


#: Checkpoint folders that :func:`read_newest` skipped as damaged in this process (resolved paths): rotation
#: neither counts nor deletes them.
SKIPPED_AS_DAMAGED: set[Path] = set()


def rotate(directory: Path, total_limit: int | None) -> None:
    """Delete the oldest checkpoints of ``save_state`` beyond the newest ``total_limit`` (the newest always stays)."""
    if total_limit is None:
        return
    # only this layout's checkpoints count and go: an empty or foreign `checkpoint_<n>` (a stock save killed early)
    # neither pushes a good checkpoint out nor is deleted
    # nor does one that load_state skipped as damaged in this process: it stays for inspection, and the good one
    # loaded instead is not pushed out by it
    found = {
        number: folder
        for number, folder in numbered(directory).items()
        if _is_ours(folder) and folder.resolve() not in SKIPPED_AS_DAMAGED
    }
    keep = max(1, int(total_limit))
    for number in sorted(found)[:-keep]:
        with contextlib.suppress(OSError):  # best effort, as Accelerate's: the new checkpoint is committed
            remove_checkpoint(found[number])


# -- reading ----------------------------------------------------------------------------------------------------------


def read(folder: Path, accelerator: Any) -> dict[str, Any]:
    """Every file of a checkpoint folder, read and verified, by name.

    Raises:
        UnsafeCheckpointError: a folder of stock ``accelerator.save_state``.
        CheckpointError: not a checkpoint of :func:`save_state`, or of other objects.
        CorruptCheckpointError: incomplete, or a file fails verification (named).
    """
    manifest, problem = read_manifest(folder)
    if manifest is None:
        if not (folder / MANIFEST_FILE).exists() and _looks_stock(folder):
            raise UnsafeCheckpointError(
                f"{str(folder)!r} was written by accelerator.save_state: its optimizer, scheduler, RNG states and "
                "registered objects are pickles, which can run any code when loaded, so ferry does not read them. "
                "If you trust the folder, load it once with accelerator.load_state(...) and save it again with "
                "ferry.integrations.accelerate.save_state(accelerator, ...).",
                path=folder,
            )
        if not (folder / MANIFEST_FILE).exists() and not any(folder.iterdir()):
            raise CheckpointError(f"{str(folder)!r} is an empty folder, not a checkpoint. {_WHERE}", path=folder)
        raise CorruptCheckpointError(
            f"checkpoint {str(folder)!r} is incomplete: {problem}. Load another checkpoint; save_state only ever "
            "renames complete folders into place, so this one was changed after it was saved.",
            path=folder,
        )
    if manifest.get("layout") != LAYOUT:
        raise CheckpointError(
            f"{str(folder)!r} is a ferry.Checkpointer checkpoint, not one of ferry.integrations.accelerate. "
            "Restore it with ferry.Checkpointer(directory).restore(state).",
            path=folder,
        )
    state.check_counts(accelerator, manifest.get("objects"), folder)
    needed = state.rng_file(int(accelerator.process_index))
    if needed not in manifest["files"]:
        raise CheckpointError(
            f"checkpoint {str(folder)!r} holds no RNG states for process {accelerator.process_index} ({needed}). "
            "Resume with as many processes as saved it.",
            path=folder,
        )
    mine = [name for name in sorted(manifest["files"]) if name == needed or not _RNG.match(name)]
    return {name: load_file(folder / name) for name in mine}  # not the RNG states of the other processes


def _looks_stock(folder: Path) -> bool:
    """Whether ``folder`` holds the pickle files of stock ``accelerator.save_state``."""
    return any(child.suffix in (".pkl", ".bin", ".pt") for child in folder.iterdir())


_WHERE = "Pass the folder that save_state returned (e.g. '<project_dir>/checkpoints/checkpoint_3')."


def missing(folder: Path, accelerator: Any) -> CheckpointError:
    """The error for an ``input_dir`` that does not exist, listing the checkpoints of the project, if any."""
    hint = _WHERE
    project_dir = accelerator.project_dir
    if project_dir is not None:
        directory = Path(os.path.expanduser(os.fspath(project_dir))) / CHECKPOINTS
        names = [path.name for _, path in sorted(numbered(directory).items())]
        if names:
            hint = f"Checkpoints in {str(directory)!r}: {', '.join(names)}; or pass input_dir=None for the newest."
    return CheckpointError(
        f"load_state found no checkpoint at {str(folder)!r}: the folder does not exist (working directory "
        f"{os.getcwd()!r}). {hint}",
        path=folder,
    )


def read_newest(directory: Path, accelerator: Any) -> tuple[Path, dict[str, Any]]:
    """The newest checkpoint of ``directory`` that reads back intact, skipping damaged ones with a warning."""
    found = numbered(directory)
    damaged: list[CorruptCheckpointError] = []
    for number in sorted(found, reverse=True):
        folder = found[number]
        if not (folder / MANIFEST_FILE).exists() and not _looks_stock(folder):
            # empty, or a few stray files: a save killed before it wrote anything (stock Accelerate writes in place)
            damaged.append(
                CorruptCheckpointError(
                    f"{str(folder)!r} is not a complete checkpoint (no {MANIFEST_FILE}; a save killed early?)",
                    path=folder,
                )
            )
            continue
        try:
            files = read(folder, accelerator)
        except CorruptCheckpointError as err:
            damaged.append(err)
            SKIPPED_AS_DAMAGED.add(folder.resolve())
            continue
        for skipped in damaged:
            warnings.warn(
                f"load_state skipped a damaged checkpoint and loads {folder.name} instead: {skipped}",
                CheckpointWarning,
                stacklevel=3,
            )
        return folder, files
    if damaged:
        listed = "\n  ".join(str(err) for err in damaged)
        raise CorruptCheckpointError(
            f"every checkpoint in {str(directory)!r} is damaged, nothing was loaded:\n  {listed}\nRestore a copy of "
            "one of them, or move the folder aside to start the run afresh.",
            path=directory,
        )
    raise CheckpointError(
        f"load_state found no checkpoint to resume from in {str(directory)!r} "
        f"({'it holds no checkpoint_<n> folder' if directory.is_dir() else 'the folder does not exist'}). Call "
        "load_state only when resuming, e.g. after checking that the folder holds a checkpoint_<n>, or pass input_dir.",
        path=directory,
    )
