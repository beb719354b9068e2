"""The training-run Checkpointer: numbered, atomic, self-verifying checkpoint folders with retention.

Layout of ``directory``::

    step-000000100/             one committed checkpoint
        state.safetensors       a ferry file: the state_dicts, plain values, RNG states and the step
        manifest.json           written last: step, time, names, the size of every file in the folder
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
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import torch

from ferry.checkpoint.atomic import TMP_MARKER, atomic_file, fsync_directory, replace_durably, temporary_name
from ferry.checkpoint.format import load, save
from ferry.checkpoint.rng import capture_rng_state, restore_rng_state
from ferry.errors import CheckpointError, CorruptCheckpointError

__all__ = ["Checkpointer"]

STATE_FILE = "state.safetensors"
MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "ferry.checkpoint"
MANIFEST_VERSION = 1
_STEP_DIGITS = 9
_STEP_RE = re.compile(r"^step-(\d+)$")
_TMP_RE = re.compile(re.escape(TMP_MARKER) + r"(\d+)-[0-9a-f]+$")


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

    def _committed(self) -> list[tuple[int, Path]]:
        """Committed step folders (name ``step-<n>``), oldest first, by numeric step."""
        found = []
        for entry in self.directory.iterdir():
            match = _STEP_RE.match(entry.name)
            if match and entry.is_dir():
                found.append((int(match.group(1)), entry))
        return sorted(found)

    def _complete(self, folder: Path) -> bool:
        """Whether ``folder`` has a readable manifest and every file it lists, at the recorded size."""
        try:
            manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
            files: dict[str, Any] = manifest["files"]
            return manifest.get("format") == MANIFEST_FORMAT and all(
                (folder / name).stat().st_size == info["bytes"] for name, info in files.items()
            )
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def steps(self) -> list[int]:
        """The steps of all complete checkpoints, oldest first."""
        return [step for step, folder in self._committed() if self._complete(folder)]

    def latest(self) -> Path | None:
        """The folder of the newest complete checkpoint, or ``None`` when there is none."""
        for _, folder in reversed(self._committed()):
            if self._complete(folder):
                return folder
        return None

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
        objects = {name: obj.state_dict() for name, obj in state.items() if _is_stateful(obj)}
        values = {name: obj for name, obj in state.items() if not _is_stateful(obj)}
        payload = {"step": step, "objects": objects, "values": values, "rng": capture_rng_state()}

        final = self.path_for(step)
        tmp = temporary_name(final)
        try:
            tmp.mkdir()
            save(payload, tmp / STATE_FILE)
            manifest = {
                "format": MANIFEST_FORMAT,
                "version": MANIFEST_VERSION,
                "step": step,
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
        complete = [folder for _, folder in self._committed() if self._complete(folder)]
        for folder in complete[: max(0, len(complete) - self.keep_last)]:
            if folder != keep:
                shutil.rmtree(folder, ignore_errors=True)
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
        """Load the newest complete checkpoint (or that of ``step``) into the live objects of ``state``.

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
            CheckpointError: ``step`` has no complete checkpoint, or a name in ``state`` is not in the checkpoint
                (the message lists what it holds).
            CorruptCheckpointError: the checkpoint's file fails verification.
        """
        if step is None:
            folder = self.latest()
            if folder is None:
                return None
        else:
            folder = self.path_for(step)
            if not self._complete(folder):
                raise CheckpointError(
                    f"no complete checkpoint for step {step} in {str(self.directory)!r}; complete steps: "
                    f"{self.steps() or 'none'}. Pass one of those, or step=None for the newest.",
                    path=folder,
                )
        payload = load(folder / STATE_FILE)
        if not isinstance(payload, dict) or not {"step", "objects", "values"} <= payload.keys():
            raise CorruptCheckpointError(
                f"{str(folder / STATE_FILE)!r} is a ferry file but not a Checkpointer checkpoint (no step/objects/"
                "values). Load it with ferry.load() instead.",
                path=folder / STATE_FILE,
            )
        objects: dict[str, Any] = payload["objects"]
        values: dict[str, Any] = payload["values"]
        absent = [name for name in state if name not in objects and name not in values]
        if absent:
            raise CheckpointError(
                f"checkpoint {str(folder)!r} has no {', '.join(map(repr, absent))}; it holds "
                f"{', '.join(map(repr, sorted([*objects, *values])))}. Remove those names from the state you "
                "restore, or restore a checkpoint that saved them.",
                path=folder,
            )
        for name, live in state.items():
            if name in objects and _is_stateful(live):
                self._load_object(live, objects[name])
            elif name in values:
                state[name] = _follow_device(values[name], live)
            else:
                raise CheckpointError(
                    f"checkpoint {str(folder)!r} saved {name!r} as a state_dict but the live {name!r} is a "
                    f"{type(live).__name__} without load_state_dict(). Pass the object it was saved from.",
                    path=folder,
                )
        if "rng" in payload:
            restore_rng_state(payload["rng"], where=str(folder))
        return int(payload["step"])

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
