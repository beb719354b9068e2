"""``ferry ckpt convert IN OUT``: prints what :func:`ferry.checkpoint.tools.convert` did."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ferry.checkpoint.tools import convert
from ferry.cli.ckpt_common import human_bytes, meter, storage_options


def convert_main(args: argparse.Namespace) -> int:
    """``ferry ckpt convert``: 0 when written and verified."""
    out = Path(args.out)
    options = storage_options(args, args.input)
    report = convert(args.input, out, trusted=args.trusted, force=args.force, progress=meter, storage_options=options)
    if args.json:
        print(json.dumps(report))
        return 0
    from rich.console import Console
    from rich.text import Text

    for note in report.get("notes", []):
        print(f"note: {note} (load it with model.load_state_dict(ferry.load(path))).", file=sys.stderr)
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
