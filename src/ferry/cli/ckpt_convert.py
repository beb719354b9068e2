"""``ferry ckpt convert IN OUT``: any checkpoint ferry loads (``torch.save`` files above all) to a ferry file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

from ferry.checkpoint.format import load, save, verify
from ferry.cli.ckpt_common import KIND_NAMES, flatten, human_bytes, meter, resolve, sniff
from ferry.errors import CheckpointError

__all__ = ["convert", "convert_main"]


def convert(source: Path, out: Path, *, trusted: bool = False, force: bool = False) -> dict[str, Any]:
    """Load ``source`` (through torch's restricted unpickler unless ``trusted``) and save it to ``out`` as a ferry file.

    ``out`` is written atomically, then verified (every checksum, read back from disk).

    Returns:
        ``{"input", "output", "input_kind", "tensors", "bytes"}`` (``bytes``: the size of ``out``).

    Raises:
        CheckpointError: ``out`` exists and not ``force``, or is a folder; ``source`` cannot be loaded (as
            :func:`ferry.load`: TorchScript, unsafe pickle, corrupt); or what it holds cannot be saved (the message
            names the value and the conversion to make).
    """
    file = resolve(source).file
    if out.is_dir():
        raise CheckpointError(f"{str(out)!r} is a folder. Pass the name of the file to write, e.g. model.safetensors.")
    if out.exists() and not force:
        raise CheckpointError(
            f"{str(out)!r} already exists and was left as it is. Pass --force to replace it (atomically: it keeps "
            "its old content until the new file is complete), or choose another name.",
            path=out,
        )
    kind, size = sniff(file)
    with meter(2 * size, f"loading {file.name}") as progress:
        obj = load(file, trusted=trusted)
        progress.advance(size)
        progress.describe(f"writing {out.name}")
        save(obj, out)
        verify(out)
        progress.advance(size)
    tensors = sum(isinstance(leaf, torch.Tensor) for _, leaf in flatten(obj))
    return {
        "input": str(file),
        "output": str(out),
        "input_kind": KIND_NAMES[kind],
        "tensors": tensors,
        "bytes": out.stat().st_size,
    }


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
