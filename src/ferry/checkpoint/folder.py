"""The layout of one checkpoint folder (``step-<n>``): the names of its files, its manifest, and what kind it is.

The one definition of each name, shared by the training run (which writes folders), sharded checkpoints (which
write the rank files) and ``ferry ckpt`` (which reads any of them)::

    step-000000420/
        manifest.json               the commit record: format, step, every file with its size (and shards.json's
                                    SHA-256); a folder without it is not a checkpoint
        state.safetensors           a ferry file: the state of one process, or rank 0's values of a sharded run
        shards.json                 sharded only: DCP's metadata as JSON (ferry.checkpoint.sharded.metadata)
        shard-00000.safetensors     sharded only: rank 0's pieces of modules and optimizers
        rng-00000.safetensors       sharded only: rank 0's RNG states

A folder written by DCP's own ``FileSystemWriter`` holds a pickled ``.metadata`` instead of ``shards.json``.

A Hugging Face ``Trainer`` names its folders ``checkpoint-<n>``; :mod:`ferry.integrations.transformers` writes them
with a manifest too (``"layout": "transformers"``), whose entries for files that are not ferry files (the model's
safetensors, JSON) also carry the ``xxh3_64`` of the whole file (:func:`file_checksum`). ``ferry ckpt`` lists and
verifies both kinds of folder (:func:`folder_step`); the Checkpointer only ever reads its own ``step-<n>``.
Nothing here imports torch.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import xxhash

from ferry._remote_path import RemotePath
from ferry.errors import UnsafeCheckpointError

__all__ = [
    "FILE_CHECKSUM",
    "MANIFEST_FILE",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "PLAIN_DCP_METADATA",
    "RANK_FILE",
    "SHARDS_FILE",
    "STATE_FILE",
    "STEP_DIGITS",
    "TRAINER_LAYOUT",
    "file_checksum",
    "folder_step",
    "has_shards",
    "is_plain_dcp",
    "is_sharded",
    "is_step_folder",
    "plain_dcp_error",
    "read_manifest",
    "rng_file",
    "shard_file",
    "step_name",
    "step_of",
    "trainer_step_of",
]

STATE_FILE = "state.safetensors"
#: DCP's metadata of a sharded checkpoint, as JSON (:mod:`ferry.checkpoint.sharded.metadata`).
SHARDS_FILE = "shards.json"
#: What DCP's own ``FileSystemWriter`` names its (pickled) metadata file.
PLAIN_DCP_METADATA = ".metadata"
MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "ferry.checkpoint"
MANIFEST_VERSION = 1
STEP_DIGITS = 9
#: A rank's file of a sharded folder: its pieces (``shard-``) or its RNG states (``rng-``), and the rank.
RANK_FILE = re.compile(r"^(shard|rng)-(\d+)\.safetensors$")
#: A step folder: ``step-<n>``, or on object storage ``step-<n>.<hex token>``: there every save goes to a folder name
#: of its own, never used before (:mod:`ferry.checkpoint.run.remote`).
_STEP_NAME = re.compile(r"^step-(\d+)(?:\.[0-9a-f]+)?$")
#: A Hugging Face Trainer's checkpoint folder: ``transformers.trainer_utils.PREFIX_CHECKPOINT_DIR`` + ``-<step>``.
_TRAINER_NAME = re.compile(r"^checkpoint-(\d+)$")
#: ``manifest.json``'s ``layout`` in a Trainer checkpoint folder written by ``ferry.integrations.transformers``.
TRAINER_LAYOUT = "transformers"
#: The key of a manifest file entry that holds the ``xxh3_64`` of the whole file (files that carry no checksums).
FILE_CHECKSUM = "xxh3_64"


def step_name(step: int) -> str:
    """The folder name of ``step``: ``step-<step zero-padded to 9 digits>`` (sorts by step up to 10**9).

    >>> step_name(420)
    'step-000000420'
    """
    return f"step-{step:0{STEP_DIGITS}d}"


def step_of(name: str) -> int | None:
    """The step a folder name stands for (``step-<digits>``, any number of digits), else ``None``.

    On object storage every save has a folder of its own, ``step-<digits>.<hex token>``.

    >>> step_of("step-000000420"), step_of("step-7"), step_of("step-000000420.5e1f07a2"), step_of("best")
    (420, 7, 420, None)
    """
    match = _STEP_NAME.match(name)
    return int(match.group(1)) if match else None


def trainer_step_of(name: str) -> int | None:
    """The step a Hugging Face Trainer's folder name stands for (``checkpoint-<digits>``), else ``None``.

    >>> trainer_step_of("checkpoint-500"), trainer_step_of("checkpoint-500.ferry-tmp-7-ab12cd34")
    (500, None)
    """
    match = _TRAINER_NAME.match(name)
    return int(match.group(1)) if match else None


def folder_step(name: str) -> int | None:
    """The step of a checkpoint folder of either kind (``step-<n>``, ``checkpoint-<n>``), else ``None``.

    >>> folder_step("step-000000420"), folder_step("checkpoint-30"), folder_step("best")
    (420, 30, None)
    """
    step = step_of(name)
    return step if step is not None else trainer_step_of(name)


def file_checksum(path: str | os.PathLike[str] | RemotePath) -> str:
    """The ``xxh3_64`` of a whole file's bytes (seed 0), as 16 hex digits; read in 8 MiB pieces.

    Raises:
        OSError: the file cannot be read.
    """
    digest = xxhash.xxh3_64()
    opened = path.fs.open(path.fs_path, "rb") if isinstance(path, RemotePath) else open(path, "rb", buffering=0)  # noqa: SIM115
    with opened as handle:
        buffer = bytearray(8 << 20)
        view = memoryview(buffer)
        while count := handle.readinto(buffer):
            digest.update(view[:count])
    return digest.hexdigest()


def shard_file(rank: int) -> str:
    """The file of the pieces ``rank`` wrote: ``shard-<rank zero-padded to 5>.safetensors``."""
    return f"shard-{rank:05d}.safetensors"


def rng_file(rank: int) -> str:
    """The file of ``rank``'s RNG states: ``rng-<rank zero-padded to 5>.safetensors``."""
    return f"rng-{rank:05d}.safetensors"


def _as_folder(folder: str | os.PathLike[str] | RemotePath) -> Path | RemotePath:
    return folder if isinstance(folder, RemotePath) else Path(folder)


def has_shards(folder: str | os.PathLike[str] | RemotePath) -> bool:
    """Whether ``folder`` holds state saved through DCP with ferry's storage (a ``shards.json``)."""
    return (_as_folder(folder) / SHARDS_FILE).is_file()


def is_plain_dcp(folder: str | os.PathLike[str] | RemotePath) -> bool:
    """Whether DCP's own ``FileSystemWriter`` wrote ``folder``: a pickled ``.metadata``, no ``shards.json``."""
    return (_as_folder(folder) / PLAIN_DCP_METADATA).is_file() and not has_shards(folder)


def is_sharded(folder: str | os.PathLike[str] | RemotePath) -> bool:
    """Whether ``folder`` holds state saved through DCP: ferry's ``shards.json``, or DCP's own pickled ``.metadata``."""
    return has_shards(folder) or is_plain_dcp(folder)


def is_step_folder(path: Path | RemotePath) -> bool:
    """Whether ``path`` is one checkpoint folder, not a run directory.

    That is: named ``step-<n>`` (or ``checkpoint-<n>``, a Hugging Face Trainer's), or holding a checkpoint's files
    (a manifest, a state file or ``shards.json``), complete or not.
    """
    return folder_step(path.name) is not None or any(
        (path / name).exists() for name in (MANIFEST_FILE, STATE_FILE, SHARDS_FILE)
    )


def read_manifest(
    folder: Path | RemotePath, sizes: Mapping[str, int] | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """``(manifest, None)`` when ``folder`` is complete, else ``(None, what is wrong)``.

    Complete means: ``manifest.json`` parses, names the ferry checkpoint format, and every file it lists exists with
    the recorded size in bytes. A Trainer's ``checkpoint-<n>`` without a manifest is said to be the stock Trainer's.
    Checksums are not read here (that is :func:`ferry.verify`). ``sizes`` (every file of the folder and its size,
    from one listing of object storage) saves asking for each file; a listing is only a hint (some stores list new
    objects late), so a file it lacks is asked for by name before it counts as missing.
    """
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        if trainer_step_of(folder.name) is not None:
            return None, (
                f"no {MANIFEST_FILE}: saved by the Trainer without ferry (pickles, no checksums), or a save that did "
                "not finish"
            )
        return None, f"no {MANIFEST_FILE} (the save did not finish, or the folder was partly deleted)"
    except (OSError, ValueError) as err:
        return None, f"{MANIFEST_FILE} is unreadable ({err})"
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        return None, f"{MANIFEST_FILE} is not a ferry checkpoint manifest"
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return None, f"{MANIFEST_FILE} lists no files"
    for name, info in files.items():
        try:
            size = sizes[name] if sizes is not None and name in sizes else (folder / name).stat().st_size
        except OSError:
            return None, f"{name} is missing"
        expected = info.get("bytes") if isinstance(info, dict) else None
        if size != expected:
            return None, f"{name} is {size} bytes, the manifest says {expected}"
    return manifest, None


def plain_dcp_error(folder: str | os.PathLike[str] | RemotePath) -> UnsafeCheckpointError:
    """The error for a folder written by DCP's ``FileSystemWriter`` that ferry was asked to read without trust.

    The message says what the folder is, why ferry does not read it (its ``.metadata`` is a pickle), and the command
    that converts it once its origin is trusted.
    """
    return UnsafeCheckpointError(
        f"{str(folder)!r} was written by torch.distributed.checkpoint's FileSystemWriter: its "
        f"{PLAIN_DCP_METADATA} (and any non-tensor value) is a pickle, which can run arbitrary code when loaded, "
        "so ferry does not read it. If you trust where it came from, convert it once to a ferry file and use that: "
        f"ferry ckpt convert --trusted {folder} OUT.safetensors",
        path=folder,
    )
