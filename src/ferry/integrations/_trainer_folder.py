"""A Hugging Face Trainer's ``checkpoint-<step>`` folder as ferry writes it: pickle-free, checksummed, committed whole.

::

    checkpoint-30/
        manifest.json           ferry's commit record ("layout": "transformers"): every file with its size in bytes,
                                and the xxh3_64 of each file that is not a ferry file; written last
        model.safetensors       the weights as ``save_pretrained`` writes them (metadata {"format": "pt"}); with
        config.json, ...        the config, generation config and tokenizer files: ``from_pretrained(folder)`` works
        optimizer.safetensors   ferry files, in place of the pickles optimizer.pt, scheduler.pt, scaler.pt and
        scheduler.safetensors   rng_state.pth (scaler: only with a gradient scaler, fp16 on a GPU)
        scaler.safetensors
        rng_state.safetensors   ferry.checkpoint.run.rng's capture: Python, NumPy, torch CPU and initialised GPUs
        trainer_state.json      as the Trainer writes it
        training_args.json      ``TrainingArguments.to_json_string()``, in place of the pickle training_args.bin

The folder is written under a temporary name beside its final one (``checkpoint-30.ferry-tmp-<pid>-<hex>``, which
neither ``get_last_checkpoint`` nor ``ferry ckpt`` takes for a checkpoint), every file fsynced, then renamed into
place and the run directory fsynced: ``checkpoint-<step>`` is complete or absent. Nothing here imports transformers.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ferry._fs import TMP_MARKER, fsync_directory, pid_alive
from ferry.checkpoint.file.api import load, save
from ferry.checkpoint.folder import FILE_CHECKSUM, MANIFEST_FILE, TRAINER_LAYOUT, file_checksum, trainer_step_of
from ferry.checkpoint.run import commit
from ferry.checkpoint.run.folders import RetentionPolicy, remove_checkpoint, scan
from ferry.checkpoint.run.rng import capture_rng_state, restore_rng_state
from ferry.checkpoint.tools import verify_path
from ferry.errors import CheckpointError

__all__ = [
    "ARGS_FILE",
    "OPTIMIZER_FILE",
    "PICKLES",
    "RNG_FILE",
    "SCALER_FILE",
    "SCHEDULER_FILE",
    "TRAINER_STATE_FILE",
    "States",
    "checkpoint_name",
    "commit_folder",
    "finish",
    "load_states",
    "newest_resumable",
    "park_leftovers",
    "restore_rng",
    "rotate",
    "set_aside_unfinished",
    "verify_folder",
    "write_states",
]

OPTIMIZER_FILE = "optimizer.safetensors"
SCHEDULER_FILE = "scheduler.safetensors"
SCALER_FILE = "scaler.safetensors"
RNG_FILE = "rng_state.safetensors"
ARGS_FILE = "training_args.json"
TRAINER_STATE_FILE = "trainer_state.json"
#: The pickles the stock Trainer writes into a checkpoint folder, and the file ferry writes instead of each.
PICKLES = {
    "optimizer.pt": OPTIMIZER_FILE,
    "scheduler.pt": SCHEDULER_FILE,
    "scaler.pt": SCALER_FILE,
    "rng_state.pth": RNG_FILE,
    "training_args.bin": ARGS_FILE,
}
#: What each ferry file of a checkpoint holds (the manifest's ``objects``, beside ``model``).
_COMPONENTS = {OPTIMIZER_FILE: "optimizer", SCHEDULER_FILE: "scheduler", SCALER_FILE: "scaler", RNG_FILE: "rng"}
#: The weight files of a folder the stock Trainer can load (``_load_from_checkpoint``'s list, adapters included).
_WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
)


def checkpoint_name(step: int) -> str:
    """The Trainer's folder name for ``step``: ``checkpoint-<step>`` (``PREFIX_CHECKPOINT_DIR``, no zero padding)."""
    return f"checkpoint-{step}"


@dataclass(frozen=True)
class States:
    """The live objects whose state a checkpoint holds beside the model (``None``: not saved).

    Attributes:
        optimizer: Has ``state_dict()``/``load_state_dict()`` (an ``AcceleratedOptimizer`` passes them through).
        scheduler: The learning-rate scheduler.
        scaler: The gradient scaler (``torch.amp.GradScaler``), when training in fp16 on a GPU.
        rng: Whether to capture the random number generators.
    """

    optimizer: Any = None
    scheduler: Any = None
    scaler: Any = None
    rng: bool = False


def write_states(folder: Path, states: States) -> set[str]:
    """Write the ferry files of ``states`` into ``folder``; return their names.

    Raises:
        CheckpointError: a state holds a value ferry cannot store (the message names it) or the disk failed.
    """
    written = set()
    for name, owner in ((OPTIMIZER_FILE, states.optimizer), (SCHEDULER_FILE, states.scheduler)):
        if owner is not None:
            save(owner.state_dict(), folder / name)
            written.add(name)
    if states.scaler is not None:
        save(states.scaler.state_dict(), folder / SCALER_FILE)
        written.add(SCALER_FILE)
    if states.rng:
        save(capture_rng_state(), folder / RNG_FILE)
        written.add(RNG_FILE)
    return written


def finish(
    folder: Path,
    *,
    step: int,
    policy: RetentionPolicy,
    metrics: dict[str, float],
    ferry_files: set[str],
    extra: dict[str, Any],
) -> None:
    """Make ``folder`` ready to commit: fsync every file, record sizes and checksums in ``manifest.json`` (last).

    Ferry files (``ferry_files``, already fsynced by :func:`ferry.save`) carry their own checksums; every other file
    gets the ``xxh3_64`` of its bytes in the manifest. The manifest's sequence number follows the newest complete
    checkpoint beside ``folder``.

    Raises:
        OSError: a file could not be read or synced.
    """
    files: dict[str, dict[str, Any]] = {}
    folders = [folder]
    for path in sorted(folder.rglob("*")):
        if path.is_dir():
            folders.append(path)
            continue
        name = path.relative_to(folder).as_posix()
        if name == MANIFEST_FILE:
            continue  # one left by an earlier save of this step: replaced below
        files[name] = {"bytes": path.stat().st_size}
        if name not in ferry_files:
            _fsync_file(path)
            files[name][FILE_CHECKSUM] = file_checksum(path)
    for child in folders[1:]:
        fsync_directory(child)
    previous = scan(folder.parent, trainer_folders=True)
    sequence = max((entry.sequence for entry in previous if entry.complete), default=0) + 1
    objects = ["model"] + [what for name, what in _COMPONENTS.items() if name in ferry_files]
    values = [name.removesuffix(".json") for name in (TRAINER_STATE_FILE, ARGS_FILE) if name in files]
    manifest = commit.manifest_fields(policy, step, sequence, sorted(objects), sorted(values), metrics)
    commit.write_manifest(folder, {**manifest, **extra, "layout": TRAINER_LAYOUT, "files": files})


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit_folder(tmp: Path, final: Path, step: int) -> CheckpointError | None:
    """Rename the finished ``tmp`` onto ``final`` and fsync the run directory; a folder it replaces is deleted.

    Returns:
        None, or the error that says the folder is committed but its durability not confirmed (see
        :func:`ferry.checkpoint.run.commit.sync_commit`).

    Raises:
        OSError: the rename failed; ``final`` holds what it held before.
    """
    parked = commit.commit(tmp, final)
    not_durable = commit.sync_commit(final.parent, step, final)
    if parked is not None:
        shutil.rmtree(parked, ignore_errors=True)
    return not_durable


def verify_folder(folder: Path) -> str | None:
    """What is wrong with a ferry-written checkpoint folder (manifest, sizes, every checksum, the step), or None."""
    checks, _ = verify_path(folder)
    failed = [check for check in checks if not check.ok]
    return str(failed[0].problem).rstrip(".") if failed else None


def _stock_problem(folder: Path) -> str | None:
    """Why a folder without a ferry manifest cannot be resumed from (None: it looks like a finished stock save)."""
    try:
        json.loads((folder / TRAINER_STATE_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return (
            f"no {MANIFEST_FILE} and no {TRAINER_STATE_FILE}: a save that did not finish (the Trainer writes "
            f"{TRAINER_STATE_FILE} last)"
        )
    except (OSError, ValueError) as err:
        return f"no {MANIFEST_FILE}, and its {TRAINER_STATE_FILE} is unreadable ({err}): a save that did not finish"
    if not any((folder / name).is_file() for name in _WEIGHTS):
        return f"no {MANIFEST_FILE} and no model weights ({', '.join(_WEIGHTS[:2])})"
    return None


def _by_step(run_dir: Path) -> list[tuple[int, Path]]:
    """The ``checkpoint-<step>`` folders of ``run_dir``, oldest step first."""
    try:
        children = list(run_dir.iterdir())
    except FileNotFoundError:
        return []
    found = [(trainer_step_of(child.name), child) for child in children if child.is_dir()]
    return sorted((step, child) for step, child in found if step is not None)


def newest_resumable(run_dir: Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The checkpoint to resume from: the highest step (as ``get_last_checkpoint``) that is complete and verifies.

    A folder with a ferry manifest must verify (:func:`verify_folder`); one without (the stock Trainer wrote it)
    must hold its ``trainer_state.json`` and weights, which the stock Trainer writes last and first.

    Returns:
        The folder (None when there is none) and the newer folders skipped, each with what is wrong with it.
    """
    skipped: list[tuple[Path, str]] = []
    for _, folder in reversed(_by_step(run_dir)):
        problem = verify_folder(folder) if (folder / MANIFEST_FILE).exists() else _stock_problem(folder)
        if problem is None:
            return folder, skipped
        skipped.append((folder, problem))
    return None, skipped


def set_aside_unfinished(run_dir: Path) -> list[tuple[Path, Path]]:
    """Rename the ``checkpoint-<step>`` folders whose stock save did not finish, so that no resume picks them.

    Those are folders without a ferry manifest and without a readable ``trainer_state.json``: what a process killed
    while the stock Trainer wrote the folder leaves (``get_last_checkpoint`` would pick it, and the resume would
    fail). Each goes to ``checkpoint-<step>.ferry-unfinished-<hex>``; nothing is deleted.

    Returns:
        ``(old name, new name)`` for each folder renamed.
    """
    moved = []
    for _, folder in _by_step(run_dir):
        if (folder / MANIFEST_FILE).exists() or (folder / TRAINER_STATE_FILE).is_file():
            continue
        target = folder.with_name(f"{folder.name}.ferry-unfinished-{secrets.token_hex(4)}")
        with contextlib.suppress(OSError):
            os.replace(folder, target)
            moved.append((folder, target))
    if moved:
        with contextlib.suppress(OSError):
            fsync_directory(run_dir)
    return moved


def park_leftovers(run_dir: Path) -> None:
    """Tidy what crashed saves left in ``run_dir``.

    Temporary checkpoint folders whose writer is no longer running are removed; a checkpoint parked
    (``checkpoint-<step>.ferry-old``) by a re-save of its step that was cut off is put back.
    """
    try:
        children = list(run_dir.iterdir())
    except FileNotFoundError:
        return
    for child in children:
        name = child.name
        if not name.startswith("checkpoint-"):
            continue
        if TMP_MARKER in name:
            pid = name.split(TMP_MARKER, 1)[1].split("-", 1)[0]
            if pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(child, ignore_errors=True)
        elif name.endswith(".ferry-old"):
            original = child.with_name(name.removesuffix(".ferry-old"))
            if original.exists():
                shutil.rmtree(child, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.replace(child, original)


def rotate(run_dir: Path, limit: int | None, *, keep: set[Path]) -> list[tuple[Path, OSError]]:
    """Delete the oldest checkpoints beyond ``limit`` (``save_total_limit``), never those in ``keep`` or the newest.

    Mirrors ``transformers.trainer_utils.rotate_checkpoints``: no deletion when ``limit`` is None or <= 0; the
    newest checkpoint and ``keep`` (the one just saved, the best) are protected, and the oldest others go until
    ``max(limit, protected)`` remain. Checkpoints are ordered by step, the order ``get_last_checkpoint`` resumes in.
    Each is renamed away first (``retire``), then deleted: a crash in between leaves no half-deleted checkpoint.

    Returns:
        The folders that could not be deleted, with the error.
    """
    if limit is None or limit <= 0:
        return []
    folders = [folder for _, folder in _by_step(run_dir)]
    if len(folders) <= limit:
        return []
    protected = {folders[-1].resolve(), *(path.resolve() for path in keep)}
    remaining = len(folders)
    failed = []
    for folder in folders:
        if remaining <= max(limit, len(protected)):
            break
        if folder.resolve() in protected:
            continue
        try:
            remove_checkpoint(folder)
        except OSError as err:
            failed.append((folder, err))
            continue
        remaining -= 1
    return failed


def load_states(folder: Path, states: States) -> None:
    """Load the ferry files of ``folder`` into the live objects of ``states`` (those not None), on the CPU.

    Like the stock Trainer, the optimizer's state is read onto the CPU; ``load_state_dict`` moves it to the
    parameters' devices.

    Raises:
        CorruptCheckpointError: a file fails its checksums.
        CheckpointError: a file is missing or unreadable.
    """
    for name, owner in ((OPTIMIZER_FILE, states.optimizer), (SCHEDULER_FILE, states.scheduler)):
        if owner is not None:
            owner.load_state_dict(load(folder / name))
    if states.scaler is not None and (folder / SCALER_FILE).is_file():
        states.scaler.load_state_dict(load(folder / SCALER_FILE))


def restore_rng(folder: Path) -> bool:
    """Set the random number generators to the states saved in ``folder``; False when it holds none."""
    if not (folder / RNG_FILE).is_file():
        return False
    restore_rng_state(load(folder / RNG_FILE, device=torch.device("cpu")), where=str(folder))
    return True
