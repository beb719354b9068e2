"""What the benchmarks share: the machine and library record, the --device and --json options, the run folder."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch


def versions(*dists: str) -> dict[str, str]:
    out = {"python": platform.python_version(), "torch": torch.__version__, "cuda": str(torch.version.cuda)}
    for dist in ("ferry", *dists):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {"platform": platform.platform(), "cpu": cpu, "nproc": os.cpu_count()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def add_size_arguments(parser: argparse.ArgumentParser, *, what: str) -> None:
    """Add ``--size-gib``, ``--quick``, ``--repeat``, ``--warmup`` and ``--dir`` (``what``: the state's name)."""
    parser.add_argument("--size-gib", type=float, default=1.0, help=f"{what} size in GiB (default 1.0)")
    parser.add_argument("--quick", action="store_true", help=f"~8 MiB {what}, to check the script runs")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds per method; the median counts (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="uncounted rounds before the timed ones (default 1)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp folder under build/)")


def add_common_arguments(parser: argparse.ArgumentParser, *, device_use: str) -> None:
    """Add ``--device`` (``device_use``: its help, what the device is for) and ``--json PATH``."""
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default=None,
        help=f"{device_use} (default: cuda when a GPU is present, else cpu)",
    )
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the figures here")


def chosen_device(parser: argparse.ArgumentParser, args: argparse.Namespace) -> torch.device:
    """The device ``--device`` names (cuda: the current one); without it, cuda when torch sees a GPU, else cpu.

    Exits with status 2 and a message when ``--device cuda`` is asked for on a machine without a GPU.
    """
    if (args.device or ("cuda" if torch.cuda.is_available() else "cpu")) == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        parser.exit(2, "--device cuda: torch sees no CUDA GPU on this machine. Run with --device cpu.\n")
    return torch.device("cuda", torch.cuda.current_device())


def write_json(report: dict[str, Any], path: Path | None) -> None:
    """Write ``report`` to ``path`` (the ``--json`` option) as indented JSON; nothing when ``path`` is None."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2) + "\n")


def print_errors(errors: dict[str, str]) -> None:
    """End a benchmark's markdown: one line per method that failed, then a blank line."""
    for what, err in errors.items():
        print(f"- {what}: {err}")
    print()


REPO = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def run_folder(directory: Path | None, *, prefix: str, needed: int) -> Iterator[Path]:
    """A fresh folder for one run's files, under ``directory`` (default: the repo's git-ignored build/), removed after.

    Exits with status 2 when ``directory``'s disk has less than ``needed`` bytes free. SIGTERM (what ``timeout``
    sends) becomes SystemExit, so the folder is removed then too; build/ itself is removed if the run left it empty.
    """
    parent = directory if directory is not None else REPO / "build"
    parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(parent).free
    if free < needed:
        print(f"{parent}: {free / 2**30:.1f} GiB free, the run needs ~{needed / 2**30:.1f}.", file=sys.stderr)
        raise SystemExit(2)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if directory is None:
            with contextlib.suppress(OSError):
                parent.rmdir()  # only if empty: build/ may hold other things


def method_figures(
    times: dict[str, list[float]], size: int, durable: dict[str, bool]
) -> tuple[dict[str, dict[str, Any]], Any]:
    """Per method: median/min/max seconds, the samples, MB/s of ``size`` bytes, durability; and ``ratio(a, b)``, the
    ratio of two methods' medians (None if either is missing)."""
    methods = {
        method: {
            "median_s": statistics.median(ts),
            "min_s": min(ts),
            "max_s": max(ts),
            "samples_s": ts,
            "mb_per_s": size / statistics.median(ts) / 1e6,
            "durable": durable[method],
        }
        for method, ts in times.items()
    }

    def ratio(a: str, b: str) -> float | None:
        return methods[a]["median_s"] / methods[b]["median_s"] if a in methods and b in methods else None

    return methods, ratio
