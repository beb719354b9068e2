"""Verifying the sharded part of a checkpoint folder: ``shards.json``, every rank file, every piece where it says.

Only headers are read to find the pieces; :func:`ferry.checkpoint.file.verify` checks every file's checksums.
"""

from __future__ import annotations

from typing import Any

from torch.distributed.checkpoint.metadata import TensorStorageMetadata

from ferry._remote_path import Folder
from ferry.checkpoint.file import verify
from ferry.checkpoint.file.structure import flatten, read_structure
from ferry.checkpoint.folder import MANIFEST_FILE, RANK_FILE, SHARDS_FILE
from ferry.checkpoint.sharded.metadata import read_metadata
from ferry.checkpoint.sharded.ranks import verify_folder
from ferry.errors import CorruptCheckpointError, UnsafeCheckpointError

__all__ = ["pieces_problem", "sharded_problem"]


def pieces_problem(folder: Folder, listed: set[str] | None) -> str | None:
    """What is wrong with where ``shards.json`` places the pieces: a file not in the manifest, a piece not there.

    Only headers are read (the checksums are :func:`ferry.checkpoint.sharded.ranks.verify_folder`'s job).
    """
    metadata = read_metadata(folder)
    by_file: dict[str, list[tuple[Any, dict[str, str]]]] = {}
    for index, where in (metadata.storage_data or {}).items():
        by_file.setdefault(where["file"], []).append((index, where))
    for file, pieces in sorted(by_file.items()):
        if listed is not None and file not in listed:
            return f"{SHARDS_FILE} places pieces in {file}, which {MANIFEST_FILE} does not list"
        if not (folder / file).is_file():
            return f"{file} is missing: {SHARDS_FILE} places {len(pieces)} pieces there (a rank's file was lost)"
        stored = dict(flatten(read_structure(folder / file).obj))
        for index, where in pieces:
            if where["name"] not in stored:
                return f"{file} lacks the piece {where['name']!r} of {index.fqn!r} that {SHARDS_FILE} places there"
            info = metadata.state_dict_metadata.get(index.fqn)
            if isinstance(info, TensorStorageMetadata) and index.offset is not None:
                sizes = next((c.sizes for c in info.chunks if tuple(c.offsets) == tuple(index.offset)), None)
                got = tuple(stored[where["name"]].shape)
                if sizes is None or tuple(sizes) != got:
                    return (
                        f"{file}: the piece {where['name']!r} of {index.fqn!r} has shape {list(got)}, "
                        f"{SHARDS_FILE} says {None if sizes is None else list(sizes)}"
                    )
    return None


def sharded_problem(folder: Folder, manifest: dict[str, Any] | None) -> str | None:
    """What is wrong with the DCP part of ``folder`` (``None`` when it verifies); ``manifest`` is complete or None."""
    try:
        if manifest is not None:
            verify_folder(folder, manifest)
        else:  # a folder dcp.save wrote with ferry's storage: no manifest, so no SHA-256 to check
            read_metadata(folder)
            shards: list[Folder] = [child for child in folder.iterdir() if RANK_FILE.match(child.name)]
            for file in sorted(shards, key=str):
                if file.name.startswith("shard-"):
                    verify(file)
        return pieces_problem(folder, None if manifest is None else set(manifest["files"]))
    except (CorruptCheckpointError, UnsafeCheckpointError) as err:
        return str(err)
