"""``ferry ckpt convert IN OUT``: any checkpoint ferry loads (``torch.save`` files above all) to a ferry file.

A sharded checkpoint folder (saved under ``torch.distributed``, or by ``torch.distributed.checkpoint`` itself with
``--trusted``) becomes one file: every tensor whole, loaded in this process (see
:mod:`ferry.checkpoint.sharded.consolidate`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ferry.checkpoint.file.api import load, save, verify
from ferry.checkpoint.run.folders import MANIFEST_FILE, STATE_FILE
from ferry.checkpoint.sharded import storage as dcp
from ferry.checkpoint.sharded.consolidate import load_sharded_folder
from ferry.cli.ckpt_common import KIND_NAMES, flatten, human_bytes, is_sharded, meter, resolve, sniff
from ferry.errors import CheckpointError

__all__ = ["convert", "convert_main"]


def _sharded_source(source: Path) -> tuple[Path, str] | None:
    """The folder to load with :func:`load_sharded_folder` and what it is, when ``source`` names one; else None."""
    if source.is_dir() and dcp.is_plain_dcp(source) and not is_sharded(source):
        return source, "DCP folder (torch FileSystemWriter)"
    folder = resolve(source).folder
    if not is_sharded(folder):
        return None
    assert folder is not None
    checkpointer = (folder / MANIFEST_FILE).exists() or (folder / STATE_FILE).exists()
    return folder, "Checkpointer checkpoint (sharded)" if checkpointer else "DCP folder (ferry storage)"


def _check_out(out: Path, force: bool) -> None:
    """Refuse an ``out`` that is a folder, or that exists without ``force``."""
    if out.is_dir():
        raise CheckpointError(f"{str(out)!r} is a folder. Pass the name of the file to write, e.g. model.safetensors.")
    if out.exists() and not force:
        raise CheckpointError(
            f"{str(out)!r} already exists and was left as it is. Pass --force to replace it (atomically: it keeps "
            "its old content until the new file is complete), or choose another name.",
            path=out,
        )


def convert(source: Path, out: Path, *, trusted: bool = False, force: bool = False) -> dict[str, Any]:
    """Load ``source`` (through torch's restricted unpickler unless ``trusted``) and save it to ``out`` as a ferry file.

    ``out`` is written atomically, then verified (every checksum, read back from disk). A sharded checkpoint folder
    (or a run directory whose newest checkpoint is one) is loaded whole by
    :func:`ferry.checkpoint.sharded.consolidate.load_sharded_folder`: a Checkpointer's becomes
    ``{"step", "objects", "values"}`` with each module's full ``state_dict`` among the objects; a folder written by
    DCP's own ``FileSystemWriter`` needs ``trusted`` (its metadata is a pickle).

    Returns:
        ``{"input", "output", "input_kind", "tensors", "bytes"}`` (``bytes``: the size of ``out``).

    Raises:
        UnsafeCheckpointError: a pickle that needs code, or a folder of DCP's ``FileSystemWriter``, without
            ``trusted``.
        CheckpointError: ``out`` exists and not ``force``, or is a folder; ``source`` cannot be loaded (as
            :func:`ferry.load`: TorchScript, unsafe pickle, corrupt); or what it holds cannot be saved (the message
            names the value and the conversion to make).
    """
    sharded = _sharded_source(source)
    if sharded is not None:
        _check_out(out, force)
        folder, kind = sharded
        size = sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
        obj = _rewrite(folder.name, size, lambda: load_sharded_folder(folder, trusted=trusted), out)
        tensors = sum(isinstance(leaf, torch.Tensor) for _, leaf in flatten(obj))
        return {"input": str(folder), "output": str(out), "input_kind": kind, "tensors": tensors,
                "bytes": out.stat().st_size}  # fmt: skip
    file = resolve(source).file
    _check_out(out, force)
    kind, size = sniff(file)
    obj = _rewrite(file.name, size, lambda: load(file, trusted=trusted), out)
    tensors = sum(isinstance(leaf, torch.Tensor) for _, leaf in flatten(obj))
    return {
        "input": str(file),
        "output": str(out),
        "input_kind": KIND_NAMES[kind],
        "tensors": tensors,
        "bytes": out.stat().st_size,
    }


def _rewrite(name: str, size: int, read: Callable[[], Any], out: Path) -> Any:
    """``read()`` the input (``size`` bytes, called ``name``), save it to ``out`` and verify it, with a progress bar."""
    with meter(2 * size, f"loading {name}") as progress:
        obj = read()
        progress.advance(size)
        progress.describe(f"writing {out.name}")
        save(obj, out)
        verify(out)
        progress.advance(size)
    return obj


def convert_main(args: argparse.Namespace) -> int:
    """``ferry ckpt convert``: 0 when written and verified."""
    out = Path(args.out)
    report = convert(Path(args.input), out, trusted=args.trusted, force=args.force)
    if args.json:
        print(json.dumps(report))
        return 0
    from rich.console import Console
    from rich.text import Text

    if out.suffix != ".safetensors":
        print(
            f"note: {str(out)!r} is a safetensors file; name it *.safetensors so tools recognise it.", file=sys.stderr
        )
    Console(highlight=False).print(
        Text(
            f"converted {report['input']} ({report['input_kind']}) -> {report['output']} (ferry file, "
            f"{report['tensors']} tensors, {human_bytes(report['bytes'])}); verified."
        )
    )
    return 0
