"""What the checkpoint tools share: the checkpoint a path names, JSON-ready values, progress reports.

Also JSON-ready values, and :class:`Meter`, through which long work reports its progress (``ferry ckpt`` draws
it as a progress bar; by default it does nothing).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import torch

from ferry._remote import is_url
from ferry._remote_path import Folder, RemotePath
from ferry.checkpoint.folder import (
    MANIFEST_FILE,
    STATE_FILE,
    folder_step,
    is_plain_dcp,
    is_step_folder,
    plain_dcp_error,
    read_manifest,
    step_of,
)
from ferry.checkpoint.run.folders import scan
from ferry.errors import ArgumentError, CheckpointError

__all__ = [
    "Meter",
    "Progress",
    "Target",
    "is_payload",
    "jsonable",
    "location",
    "missing",
    "no_progress",
    "resolve",
    "run_directory",
    "short_repr",
    "step_alias",
]


@dataclass(frozen=True)
class Target:
    """The checkpoint file a command-line path names, and the Checkpointer folder it lies in, if any.

    Attributes:
        file: The file to read.
        folder: The ``step-<n>`` folder when the path was one, or a run directory (then its newest checkpoint).
        manifest: That folder's manifest, when it is complete.
        problem: Why that folder is not complete (``None`` when it is, or when there is no folder).
    """

    file: Folder
    folder: Folder | None = None
    manifest: dict[str, Any] | None = None
    problem: str | None = None


class Meter:
    """Reports progress of long work: ``advance(nbytes)`` and ``describe(text)``; a bare ``Meter()`` does nothing."""

    def __init__(self, advance: Callable[[int], object] | None = None, describe: Callable[[str], object] | None = None):
        self._advance = advance
        self._describe = describe

    def describe(self, text: str) -> None:
        """Show ``text`` (e.g. the file being read) beside the progress."""
        if self._describe is not None:
            self._describe(text)

    def advance(self, nbytes: int) -> None:
        """Count ``nbytes`` more as done."""
        if self._advance is not None:
            self._advance(nbytes)


#: ``progress(total_bytes, description)`` -> a context manager giving a :class:`Meter` (``ferry.cli``'s progress bar)
Progress = Callable[[int, str], AbstractContextManager[Meter]]


@contextlib.contextmanager
def no_progress(total: int, description: str) -> Iterator[Meter]:
    """The default :data:`Progress`: reports nothing."""
    yield Meter()


def location(path: str | os.PathLike[str] | RemotePath, storage_options: Mapping[str, Any] | None = None) -> Folder:
    """``path`` as a local ``Path``, or a :class:`~ferry._remote_path.RemotePath` for a URL of object storage.

    Raises:
        ArgumentError: ``storage_options`` with a local path.
    """
    if isinstance(path, RemotePath):
        return path
    if is_url(path):
        return RemotePath(str(path), storage_options)
    if storage_options is not None:
        raise ArgumentError(
            f"storage_options are for URLs of object storage (s3://bucket/run), but {str(path)!r} is a local path. "
            "Drop storage_options, or pass the URL."
        )
    return Path(path)


def step_alias(path: Folder) -> Folder:
    """``path``, or the newest committed folder of step ``n`` for ``run/step-<n>`` on object storage.

    There each save has a folder of its own (``step-<n>.<token>``), so the plain name holds nothing itself and names
    the step's newest checkpoint.
    """
    if not isinstance(path, RemotePath) or step_of(path.name) is None or "." in path.name or path.files():
        return path
    step = step_of(path.name)
    newest = [entry.folder for entry in scan(path.parent) if entry.complete and entry.step == step]
    return newest[-1] if newest else path


def missing(path: Folder) -> CheckpointError:
    """The error for a path where there is nothing: it names the path and the working directory."""
    if isinstance(path, RemotePath):
        step = folder_step(path.name)
        if step is not None:  # on object storage a step lives in step-<n>.<token>/
            newest = [e for e in scan(path.parent) if e.complete and e.step == step]
            if newest:
                return CheckpointError(
                    f"nothing is stored at {str(path)!r}: the checkpoint of step {step} is {str(newest[-1].folder)!r} "
                    "(on object storage each save has a folder of its own; `ferry ckpt ls` lists them). Pass that URL.",
                    path=path,
                )
        bucket = path.url.split("://", 1)[1].split("/", 1)[0]
        exists = True
        with contextlib.suppress(Exception):  # cannot tell: the plain message
            exists = path.fs.exists(bucket)
        if not exists:
            return CheckpointError(
                f"nothing is stored at {str(path)!r}: the bucket {bucket!r} does not exist. Check the bucket name in "
                "the URL and the endpoint in the storage options.",
                path=path,
            )
        return CheckpointError(
            f"nothing is stored at {str(path)!r}. Check the URL (`ferry ckpt ls` of its parent lists the runs and "
            "folders there).",
            path=path,
        )
    return CheckpointError(
        f"no file or folder at {str(path)!r} (working directory {os.getcwd()!r}). Check the path.", path=path
    )


def resolve(path: str | os.PathLike[str] | RemotePath, *, storage_options: Mapping[str, Any] | None = None) -> Target:
    """The checkpoint ``path`` names: a file; a ``step-<n>`` folder (its state file); a run directory (its newest).

    A sharded step folder is a ``step-<n>`` folder too; so is a folder written by
    ``dcp.save`` with ferry's storage (``shards.json``, no manifest).

    Raises:
        UnsafeCheckpointError: a folder written by DCP's own ``FileSystemWriter`` (a pickled ``.metadata``); the
            message gives the ``ferry ckpt convert --trusted`` command that converts it.
        CheckpointError: nothing at ``path``; a folder that is neither a checkpoint nor a run directory; a run
            directory without a complete checkpoint (the message lists what is wrong with each).
    """
    path = step_alias(location(path, storage_options))
    if path.is_file():
        return Target(path)
    if not path.is_dir() or (isinstance(path, RemotePath) and not path.files()):
        raise missing(path)
    if is_plain_dcp(path):
        raise plain_dcp_error(path)
    if is_step_folder(path):
        manifest, problem = read_manifest(path)
        return Target(path / STATE_FILE, path, manifest, problem)
    entries = scan(path, trainer_folders=True)
    complete = [entry for entry in entries if entry.complete]
    if complete:
        newest = complete[-1]
        return Target(newest.folder / STATE_FILE, newest.folder, newest.manifest, None)
    if entries:
        problems = "; ".join(f"{entry.folder.name}: {entry.problem}" for entry in entries)
        raise CheckpointError(
            f"run directory {str(path)!r} holds no complete checkpoint ({problems}). Restore the folders from a "
            "copy, or pass one step folder to read what it holds.",
            path=path,
        )
    raise CheckpointError(
        f"{str(path)!r} is a folder but neither a checkpoint folder (no {MANIFEST_FILE} or {STATE_FILE}) nor a run "
        "directory (no step-<n> folders). Pass a checkpoint file, a step-<n> folder or a Checkpointer directory.",
        path=path,
    )


@overload
def run_directory(path: Path) -> Path: ...
@overload
def run_directory(path: RemotePath) -> RemotePath: ...
@overload
def run_directory(path: Folder) -> Folder: ...
def run_directory(path: Folder) -> Folder:
    """``path`` if it is a Checkpointer run directory (a folder not itself a ``step-<n>`` folder).

    Raises:
        CheckpointError: nothing at ``path``, a file, or one checkpoint folder (the message names its parent).
    """
    if not path.exists():
        raise missing(path)
    if not path.is_dir():
        raise CheckpointError(
            f"{str(path)!r} is a file; this command takes a Checkpointer run directory (the folder holding the "
            "step-<n> folders). Pass that folder.",
            path=path,
        )
    if is_step_folder(path):
        raise CheckpointError(
            f"{str(path)!r} is one checkpoint folder; this command takes the run directory holding the step-<n> "
            f"folders. Pass its parent: {str(path.parent)!r}.",
            path=path,
        )
    children: list[Folder] = list(path.iterdir())
    if isinstance(path, RemotePath):
        runs_below = sorted(
            {
                f"{path.url}/{key.rsplit('/', 2)[0]}"
                for key in path.files()
                if key.endswith(f"/{MANIFEST_FILE}")
                and key.count("/") >= 2
                and folder_step(key.rsplit("/", 2)[1]) is not None
            }
        )
        if runs_below and not any(folder_step(child.name) is not None for child in children):
            shown = ", ".join(repr(run) for run in runs_below[:3]) + (" and more" if len(runs_below) > 3 else "")
            raise CheckpointError(
                f"{str(path)!r} holds no step-<n> folders, but {shown} do: those are runs. Pass one of them.",
                path=path,
            )
    elif not any(folder_step(child.name) is not None for child in children):
        runs = nested_runs(path)
        if runs:
            raise CheckpointError(
                f"{str(path)!r} holds no step-<n> folders, but {_listed_runs(runs)} does: that is the run directory "
                f"(ferry demo keeps its checkpoints in --dir/checkpoints). Pass {str(runs[0])!r}.",
                path=path,
            )
    return path


def nested_runs(path: Path, depth: int = 2) -> list[Path]:
    """Run directories below ``path`` (folders holding ``step-<n>`` folders), ``depth`` levels down at most."""
    found: list[Path] = []
    try:
        children = sorted(child for child in path.iterdir() if child.is_dir() and folder_step(child.name) is None)
    except OSError:
        return found
    for child in children:
        try:
            if any(folder_step(grandchild.name) is not None for grandchild in child.iterdir()):
                found.append(child)
            elif depth > 1:
                found.extend(nested_runs(child, depth - 1))
        except OSError:
            continue
    return found


def _listed_runs(runs: list[Path]) -> str:
    shown = ", ".join(repr(str(run)) for run in runs[:3])
    return shown + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")


def is_payload(obj: object) -> bool:
    """Whether ``obj`` is what a :class:`ferry.Checkpointer` saves (``step``, ``objects``, ``values``, ...)."""
    return isinstance(obj, dict) and {"step", "objects", "values"} <= obj.keys()


def jsonable(value: object) -> Any:
    """A plain value as strict JSON.

    Non-finite floats become ``"inf"``/``"-inf"``/``"nan"``, dtypes and devices strings, ``torch.Size`` a list,
    anything else its (shortened) repr.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, torch.Size):
        return list(value)
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, (dict, list, tuple)) and not value:
        return [] if isinstance(value, (list, tuple)) else {}
    return short_repr(value, 200)


def short_repr(value: object, width: int = 60) -> str:
    """``repr(value)``, cut to ``width`` characters with an ellipsis."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"
