"""The training-run Checkpointer: numbered, atomic, self-verifying checkpoint folders with retention.

Layout of ``directory``::

    step-000000100/             one committed checkpoint
        state.safetensors       a ferry file: the state_dicts, plain values, RNG states and the step
        manifest.json           written last: step, save sequence number, time, names, every file's size
    step-000000200/
    step-000000300.ferry-tmp-<pid>-<hex>/   a save in progress (or a crash's leftover): never listed

A checkpoint is written under a temporary folder name, its files fsynced, then committed by one atomic rename of the
folder and an fsync of ``directory``. So a folder named ``step-<n>`` is complete by construction; ``latest()`` also
checks the manifest and file sizes, and ``restore()`` verifies every checksum while loading.
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
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any, NamedTuple

import torch

from ferry.checkpoint.atomic import TMP_MARKER, atomic_file, fsync_directory, replace_durably, temporary_name
from ferry.checkpoint.format import load, save
from ferry.checkpoint.rng import capture_rng_state, restore_rng_state
from ferry.errors import CheckpointError, CheckpointWarning, CorruptCheckpointError, FerryError

__all__ = ["Checkpointer"]

STATE_FILE = "state.safetensors"
MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "ferry.checkpoint"
MANIFEST_VERSION = 1
_STEP_DIGITS = 9
_STEP_RE = re.compile(r"^step-(\d+)$")
_TMP_RE = re.compile(re.escape(TMP_MARKER) + r"(\d+)-[0-9a-f]+$")


class _Saved(NamedTuple):
    """A complete checkpoint: its save sequence number (1, 2, ...), step and folder; sorts in save order."""

    sequence: int
    step: int
    folder: Path


def _is_stateful(obj: object) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's live process
        return True
    return True


class Checkpointer:
    """Save and restore a training run as numbered checkpoint folders ``step-<zero-padded step>/``.

    ``state`` maps names to objects with ``state_dict()``/``load_state_dict()`` (modules, optimizers, LR schedulers,
    ``torch.amp.GradScaler``, your own objects) or to plain values (int, float, bool, str, None, tensors and
    nestings of them). Each save also records the RNG states of Python, NumPy, torch CPU and every initialised
    accelerator, so a resumed run continues the same random streams.

    Example:
        >>> import tempfile, torch, ferry
        >>> model = torch.nn.Linear(2, 2)
        >>> ckpt = ferry.Checkpointer(tempfile.mkdtemp(), keep_last=2)
        >>> ckpt.save(10, {"model": model, "epoch": 1}).name
        'step-000000010'
        >>> state = {"model": torch.nn.Linear(2, 2), "epoch": 0}
        >>> ckpt.restore(state), state["epoch"]
        (10, 1)

    Args:
        directory: Folder holding the checkpoints; created (with parents) if missing.
        keep_last: How many of the newest checkpoints to keep (>= 1); older ones are deleted after each save commits.

    Raises:
        CheckpointError: ``keep_last`` < 1, or ``directory`` cannot be created.
    """

    def __init__(self, directory: str | os.PathLike[str], *, keep_last: int = 3) -> None:
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
            raise CheckpointError(
                f"keep_last={keep_last!r} is not allowed: at least one checkpoint must be kept. "
                "Pass keep_last=1 or more.",
                path=directory,
            )
        self.directory = Path(directory)
        self.keep_last = keep_last
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise CheckpointError(
                f"cannot create checkpoint directory {str(self.directory)!r}: {err.strerror}. "
                "Choose a writable folder.",
                path=self.directory,
            ) from err
        self._clean_leftovers()

    def __repr__(self) -> str:
        return f"Checkpointer({str(self.directory)!r}, keep_last={self.keep_last})"

    # -- listing -------------------------------------------------------------------------------------------------

    def path_for(self, step: int) -> Path:
        """The folder that holds (or will hold) the checkpoint of ``step``."""
        return self.directory / f"step-{step:0{_STEP_DIGITS}d}"

    def _read_manifest(self, folder: Path) -> dict[str, Any] | None:
        """``folder``'s manifest if the folder is complete (manifest readable, every listed file at its size)."""
        try:
            manifest: dict[str, Any] = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
            files: dict[str, Any] = manifest["files"]
            complete = manifest.get("format") == MANIFEST_FORMAT and all(
                (folder / name).stat().st_size == info["bytes"] for name, info in files.items()
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return manifest if complete else None

    def _checkpoints(self) -> list[_Saved]:
        """Every complete checkpoint, in the order they were saved (oldest first).

        The order is the save sequence number in each manifest, not the step: after a rollback (restore step 20,
        train on, save 21) the new saves are newer than an abandoned step 30.
        """
        found = []
        for entry in self.directory.iterdir():
            match = _STEP_RE.match(entry.name)
            if not match or not entry.is_dir():
                continue
            manifest = self._read_manifest(entry)
            if manifest is not None:
                sequence = manifest.get("sequence")
                found.append(_Saved(sequence if isinstance(sequence, int) else 0, int(match.group(1)), entry))
        return sorted(found)

    def steps(self) -> list[int]:
        """The steps of all complete checkpoints, in the order they were saved (oldest first)."""
        return [saved.step for saved in self._checkpoints()]

    def latest(self) -> Path | None:
        """The folder of the most recently saved complete checkpoint, or ``None`` when there is none."""
        checkpoints = self._checkpoints()
        return checkpoints[-1].folder if checkpoints else None

    # -- saving --------------------------------------------------------------------------------------------------

    def save(self, step: int, state: Mapping[str, Any]) -> Path:
        """Write a checkpoint of ``state`` at ``step`` and commit it atomically; return its folder.

        Objects with ``state_dict()`` are saved through it; other values are saved as they are. Tensors may live on
        any device (they are copied to the CPU for writing). A checkpoint that already exists for ``step`` is
        replaced only after the new one is complete. Older checkpoints beyond ``keep_last`` are deleted only after
        the new one has committed.

        Args:
            step: The training step (an int >= 0); the folder is ``step-<step zero-padded to 9 digits>``.
            state: Names mapped to stateful objects or plain values.

        Returns:
            The committed folder, e.g. ``directory/step-000000420``.

        Raises:
            CheckpointError: ``step`` is not a non-negative int, a value cannot be saved (the message names it),
                or the file system refused a step; the previous checkpoints are untouched.
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise CheckpointError(
                f"step={step!r} is not a valid step: it must be an int >= 0. Pass the training step counter.",
                path=self.directory,
            )
        if not isinstance(state, Mapping):
            raise CheckpointError(
                f"state must map names to objects, got a {type(state).__name__}. Pass a dict, e.g. "
                '{"model": model, "optimizer": optimizer}.',
                path=self.directory,
            )
        objects = {name: obj.state_dict() for name, obj in state.items() if _is_stateful(obj)}
        values = {name: obj for name, obj in state.items() if not _is_stateful(obj)}
        payload = {"step": step, "objects": objects, "values": values, "rng": capture_rng_state()}

        final = self.path_for(step)
        previous = self._checkpoints()
        sequence = previous[-1].sequence + 1 if previous else 1
        tmp = temporary_name(final)
        try:
            tmp.mkdir()
            save(payload, tmp / STATE_FILE)
            manifest = {
                "format": MANIFEST_FORMAT,
                "version": MANIFEST_VERSION,
                "step": step,
                "sequence": sequence,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "host": socket.gethostname(),
                "torch": torch.__version__,
                "objects": sorted(objects),
                "values": sorted(values),
                "files": {STATE_FILE: {"bytes": (tmp / STATE_FILE).stat().st_size}},
            }
            with atomic_file(tmp / MANIFEST_FILE) as handle:
                handle.write(json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8"))
            fsync_directory(tmp)
            self._commit(tmp, final)
        except BaseException as err:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(err, OSError):
                raise CheckpointError(
                    f"saving step {step} to {str(final)!r} failed: {err}. The previous checkpoints are untouched; "
                    "free disk space or fix permissions and save again.",
                    path=final,
                ) from err
            if isinstance(err, CheckpointError):
                raise type(err)(
                    f"saving step {step} to {str(final)!r} failed; the previous checkpoints are untouched. {err}",
                    path=final,
                ) from err
            raise
        self._prune(keep=final)
        return final

    def _commit(self, tmp: Path, final: Path) -> None:
        if not final.exists():
            replace_durably(tmp, final)
            return
        # Replacing a checkpoint of the same step: park the old one under a temporary name first, so at no moment is
        # there neither; a crash in between leaves the parked copy, which _clean_leftovers() renames back.
        parked = final.with_name(final.name + ".ferry-old")
        shutil.rmtree(parked, ignore_errors=True)
        os.replace(final, parked)
        replace_durably(tmp, final)
        shutil.rmtree(parked, ignore_errors=True)

    def _prune(self, *, keep: Path) -> None:
        """Delete all but the ``keep_last`` most recently saved checkpoints (never ``keep``, the one just saved).

        Each folder is first renamed to a temporary name (atomic), then deleted: a crash mid-delete leaves a
        temporary folder that the next start removes, never a half-deleted ``step-<n>`` folder.
        """
        checkpoints = self._checkpoints()
        for saved in checkpoints[: max(0, len(checkpoints) - self.keep_last)]:
            if saved.folder != keep:
                doomed = temporary_name(saved.folder)
                try:
                    os.replace(saved.folder, doomed)
                except OSError:
                    continue
                shutil.rmtree(doomed, ignore_errors=True)
        fsync_directory(self.directory)

    def _clean_leftovers(self) -> None:
        """Remove temporary folders of crashed saves (of processes no longer alive); restore parked checkpoints."""
        for entry in self.directory.iterdir():
            match = _TMP_RE.search(entry.name)
            if match and not _pid_alive(int(match.group(1))):
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
            elif entry.name.endswith(".ferry-old"):
                original = entry.with_name(entry.name.removesuffix(".ferry-old"))
                if original.exists():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.replace(entry, original)

    # -- restoring -----------------------------------------------------------------------------------------------

    def restore(self, state: MutableMapping[str, Any], *, step: int | None = None) -> int | None:
        """Load the most recently saved checkpoint (or that of ``step``) into the live objects of ``state``.

        Without ``step``, a newest checkpoint that fails verification (a flipped bit, a truncated file) is skipped
        with a :class:`ferry.CheckpointWarning` naming it, and the next older one is restored.

        Stateful objects are loaded in place with their ``load_state_dict``; modules through
        :func:`ferry.load_state_dict`, so each tensor lands on the device of the parameter it is loaded into (a run
        saved on a GPU restores on a CPU-only machine). Optimizer state follows its parameters' devices (mirrors
        ``Optimizer.load_state_dict``). Saved plain values are written back into ``state``; a tensor value goes to the
        device of the tensor it replaces. Names saved but not in ``state`` are left alone. The RNG states are
        restored last.

        Args:
            state: Names mapped to live objects (loaded in place) or placeholders for plain values.
            step: Restore this step instead of the newest.

        Returns:
            The restored step, or ``None`` when the directory holds no complete checkpoint (and ``step`` is None).

        Raises:
            CheckpointError: ``step`` has no complete checkpoint, a name in ``state`` is not in the checkpoint (the
                message lists what it holds) or was saved as another kind (object vs plain value), or an object's
                ``load_state_dict`` failed (the message says which objects were restored before it; modules are
                restored first and are checked completely before any is changed).
            StateDictMismatchError: a module's saved keys or shapes do not fit the live module; it and every
                non-module object are left untouched.
            CorruptCheckpointError: the checkpoint of ``step`` fails verification, or every checkpoint does.
        """
        if step is None:
            found = self._load_newest()
            if found is None:
                return None
            folder, payload = found
        else:
            folder = self.path_for(step)
            if self._read_manifest(folder) is None:
                raise CheckpointError(
                    f"no complete checkpoint for step {step} in {str(self.directory)!r}; complete steps: "
                    f"{sorted(self.steps()) or 'none'}. Pass one of those, or step=None for the newest.",
                    path=folder,
                )
            payload = self._load_payload(folder)
        objects: dict[str, Any] = payload["objects"]
        values: dict[str, Any] = payload["values"]
        self._check_names(folder, state, objects, values)
        # Modules first: ferry.load_state_dict checks every key before it changes anything, so a mismatch there
        # leaves every object untouched. Then the other objects, then plain values, then the RNG states.
        names = sorted(objects.keys() & state.keys(), key=lambda name: not isinstance(state[name], torch.nn.Module))
        for done, name in enumerate(names):
            try:
                self._load_object(state[name], objects[name])
            except FerryError:
                raise
            except Exception as err:
                raise CheckpointError(
                    f"restoring {name!r} from {str(folder)!r} failed: {type(err).__name__}: {err}. "
                    f"Restored before it: {names[:done] or 'nothing'}. Pass the {name!r} object the checkpoint was "
                    "saved from (same class and parameter groups).",
                    path=folder,
                ) from err
        for name in values.keys() & state.keys():
            state[name] = _follow_device(values[name], state[name])
        if "rng" in payload:
            restore_rng_state(payload["rng"], where=str(folder))
        return int(payload["step"])

    def _load_newest(self) -> tuple[Path, dict[str, Any]] | None:
        """The newest checkpoint that loads and verifies, warning about each newer one that does not."""
        first_error: CorruptCheckpointError | None = None
        for saved in reversed(self._checkpoints()):
            try:
                payload = self._load_payload(saved.folder)
            except CorruptCheckpointError as err:
                first_error = first_error or err
                warnings.warn(
                    f"checkpoint {str(saved.folder)!r} does not verify and is skipped: {err} Restoring the newest "
                    "older checkpoint instead; delete the bad folder once you no longer need it.",
                    CheckpointWarning,
                    stacklevel=3,
                )
                continue
            return saved.folder, payload
        if first_error is not None:
            raise first_error
        return None

    @staticmethod
    def _load_payload(folder: Path) -> dict[str, Any]:
        payload = load(folder / STATE_FILE)
        if not isinstance(payload, dict) or not {"step", "objects", "values"} <= payload.keys():
            raise CorruptCheckpointError(
                f"{str(folder / STATE_FILE)!r} is a ferry file but not a Checkpointer checkpoint (no step/objects/"
                "values). Load it with ferry.load() instead.",
                path=folder / STATE_FILE,
            )
        return payload

    @staticmethod
    def _check_names(
        folder: Path, state: Mapping[str, Any], objects: Mapping[str, Any], values: Mapping[str, Any]
    ) -> None:
        """Every name asked for is in the checkpoint, saved the same way (object vs plain value) as it is now."""
        absent = [name for name in state if name not in objects and name not in values]
        if absent:
            raise CheckpointError(
                f"checkpoint {str(folder)!r} has no {', '.join(map(repr, absent))}; it holds "
                f"{', '.join(map(repr, sorted([*objects, *values])))}. Remove those names from the state you "
                "restore, or restore a checkpoint that saved them.",
                path=folder,
            )
        for name, live in state.items():
            if name in objects and not _is_stateful(live):
                raise CheckpointError(
                    f"checkpoint {str(folder)!r} saved {name!r} as a state_dict but the live {name!r} is a "
                    f"{type(live).__name__} without load_state_dict(). Pass the object it was saved from.",
                    path=folder,
                )
            if name in values and _is_stateful(live):
                raise CheckpointError(
                    f"checkpoint {str(folder)!r} saved {name!r} as a plain value ({type(values[name]).__name__}) "
                    f"but the live {name!r} is a {type(live).__name__} with load_state_dict(); restoring would "
                    "replace the object. Restore into a placeholder under that name, or a checkpoint that saved "
                    "the object.",
                    path=folder,
                )

    @staticmethod
    def _load_object(live: Any, saved: Any) -> None:
        if isinstance(live, torch.nn.Module):
            from ferry.checkpoint.state_dict import load_state_dict

            load_state_dict(live, saved, strict=True)
        else:
            live.load_state_dict(saved)


def _follow_device(value: Any, live: Any) -> Any:
    """A restored tensor value goes to the device of the live tensor it replaces; everything else as loaded."""
    if isinstance(value, torch.Tensor) and isinstance(live, torch.Tensor):
        return value.to(live.device)
    return value
