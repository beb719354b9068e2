"""``ferry env``: the devices of this machine and the versions that matter, for people (a table) or scripts (JSON).

Describing the accelerators initialises CUDA (see :func:`ferry.describe_devices`); that is harmless in a
command-line process that exits right after.
"""

from __future__ import annotations

import argparse
import json
import platform
from collections.abc import Sequence
from typing import Any

import torch

from ferry.devices import DeviceRecord, describe_devices, pick_device
from ferry.errors import DeviceError

__all__ = ["main"]

_GIB = 1024**3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ferry env",
        description="Show this machine's devices (name, total and free memory), the device ferry.pick_device() "
        "would choose, and the ferry, torch, CUDA/ROCm and Python versions.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object (memory in bytes) instead")
    return parser


def _environment() -> dict[str, Any]:
    """Collect what ``ferry env`` reports; memory in bytes, versions as strings, ``None`` where absent."""
    from ferry._version import __version__

    try:
        default_device: str | None = str(pick_device())
        default_device_error: str | None = None
    except DeviceError as err:  # FERRY_DEVICE or LOCAL_RANK is wrong: report it, that is what this command is for
        default_device, default_device_error = None, str(err)
    return {
        "ferry": __version__,
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "default_device": default_device,
        "default_device_error": default_device_error,
        "devices": [_device_json(record) for record in describe_devices()],
    }


def _device_json(record: DeviceRecord) -> dict[str, Any]:
    return {
        "type": record.type,
        "index": record.index,
        "name": record.name,
        "total_memory": record.total_memory,
        "free_memory": record.free_memory,
    }


def _gib(size: int | None) -> str:
    return "unknown" if size is None else f"{size / _GIB:,.1f} GiB"


def _print_tables(env: dict[str, Any]) -> None:
    from rich.console import Console  # lazily: rich is only needed to print for people
    from rich.markup import escape
    from rich.table import Table

    devices = Table(title="Devices")
    devices.add_column("Device")
    devices.add_column("Name")
    devices.add_column("Total", justify="right")
    devices.add_column("Free", justify="right")
    for device in env["devices"]:
        label = device["type"] if device["index"] is None else f"{device['type']}:{device['index']}"
        devices.add_row(label, escape(device["name"]), _gib(device["total_memory"]), _gib(device["free_memory"]))

    versions = Table(show_header=False, box=None)
    versions.add_column(style="bold")
    versions.add_column()
    versions.add_row("ferry", env["ferry"])
    versions.add_row("torch", env["torch"])
    versions.add_row("CUDA", env["cuda"] or "none")
    if env["hip"]:
        versions.add_row("ROCm/HIP", env["hip"])
    versions.add_row("Python", env["python"])
    if env["default_device"] is not None:
        versions.add_row("pick_device()", env["default_device"])
    else:
        versions.add_row("pick_device()", f"[red]error:[/red] {escape(env['default_device_error'])}")

    console = Console()
    console.print(devices)
    console.print(versions)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ferry env [--json]``.

    Prints a table of this machine's devices (type and index, name, total and free memory in GiB) and the ferry,
    torch, CUDA, ROCm/HIP (when present) and Python versions, plus the device :func:`ferry.pick_device` would
    choose. With ``--json``, prints one JSON object instead::

        {"ferry": "0.1.0", "python": "3.11.7", "torch": "2.4.0", "cuda": "12.4" or null, "hip": null,
         "default_device": "cuda:0", "default_device_error": null,
         "devices": [{"type": "cuda", "index": 0, "name": "...", "total_memory": 85..., "free_memory": 84...},
                     {"type": "cpu", "index": null, ...}]}

    Memory is in bytes (``null`` when unknown). When ``pick_device()`` raises (``FERRY_DEVICE`` or ``LOCAL_RANK``
    names a device this machine lacks), ``default_device`` is ``null`` and ``default_device_error`` holds the
    message; the command still succeeds, since reporting that is its job.

    Args:
        argv: The arguments after ``ferry env``; ``None`` reads ``sys.argv[1:]``, as argparse does.

    Returns:
        The exit code: 0 on success, 2 for a usage error (argparse's message goes to stderr).
    """
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a usage error (2): return the code instead of exiting
        return exit_.code if isinstance(exit_.code, int) else 2
    env = _environment()
    if args.json:
        print(json.dumps(env))
    else:
        _print_tables(env)
    return 0
