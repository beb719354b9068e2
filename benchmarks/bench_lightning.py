"""Save a Lightning Trainer's checkpoint (~250 MB) through FerryCheckpointIO and Lightning's TorchCheckpointIO.

A real ``lightning.pytorch.Trainer`` on the CPU fits one step of a LightningModule made of four square
``nn.Linear`` layers (width picked so the weights plus Adam's two moments come to --size-mb; 2304 for 250 MB), so
its checkpoint holds everything Lightning writes: ``state_dict``, ``optimizer_states`` with the Adam moments,
``lr_schedulers``, ``loops``, ``callbacks``, ``hyper_parameters``. Then ``trainer.save_checkpoint(path)`` is timed
with each plugin as ``trainer.strategy.checkpoint_io`` (the time includes Lightning building the checkpoint dict,
the same for both):

  ferry   FerryCheckpointIO: one ferry file, atomic, fsync'd, checksummed, no pickle
  torch   TorchCheckpointIO (Lightning's default): torch.save into memory, then written out; NOT fsync'd, the data
          may still be in the page cache when it returns

Each file is then loaded back through its plugin's ``load_checkpoint`` (warm page cache: the file was just
written; ferry verifies every checksum) and compared with the trainer's state. Before each save, os.sync() flushes
what earlier steps left dirty. Each method runs --warmup uncounted rounds, then --repeat timed ones, round-robin,
in reverse order every other round; medians count. The ratio is ferry's median over torch's.

    python benchmarks/bench_lightning.py                           # ~250 MB
    python benchmarks/bench_lightning.py --repeat 5 --json lightning.json
    python benchmarks/bench_lightning.py --quick                   # ~8 MB, for the tests
"""

from __future__ import annotations

import argparse
import datetime
import gc
import logging
import math
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import _machine
import torch
from bench_save_load import filesystem, in_turn

METHODS = ("ferry", "torch")
DURABLE = {"ferry": True, "torch": False}
LAYERS = 4


def width_for(size_bytes: int) -> int:
    """The layer width whose weights, biases and two Adam moments (float32) come closest to ``size_bytes``."""
    per_unit = LAYERS * 3 * 4  # weights + exp_avg + exp_avg_sq, 4 bytes each, per width**2
    return max(64, round(math.sqrt(size_bytes / per_unit) / 64) * 64)


def fitted_trainer(width: int, folder: Path) -> Any:
    """A Trainer after one optimizer step of the model, so the checkpoint holds Adam's state."""
    import lightning.pytorch as pl
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):  # INFO lines would interleave with the table
        logging.getLogger(name).setLevel(logging.ERROR)

    class Wide(pl.LightningModule):
        def __init__(self, width: int, lr: float = 1e-3) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.layers = nn.Sequential(*[nn.Linear(width, width) for _ in range(LAYERS)])

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self.layers(batch[0]).square().mean()  # type: ignore[no-any-return]

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
            return {"optimizer": optimizer, "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 10)}

    torch.manual_seed(0)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        default_root_dir=folder,
    )
    trainer.fit(Wide(width), DataLoader(TensorDataset(torch.randn(8, width)), batch_size=8))
    return trainer


def state_bytes(checkpoint: dict[str, Any]) -> int:
    total = 0

    def walk(value: Any) -> None:
        nonlocal total
        if isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(checkpoint)
    return total


def same_values(expected: Any, actual: Any) -> bool:
    if isinstance(expected, torch.Tensor):
        return isinstance(actual, torch.Tensor) and torch.equal(expected, actual.to(expected.device))
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and list(expected) == list(actual)
            and all(same_values(v, actual[k]) for k, v in expected.items())
        )
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(expected) == len(actual)
            and all(same_values(a, b) for a, b in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def run(width: int, folder: Path, repeat: int, warmup: int) -> dict[str, Any]:
    from lightning.fabric.plugins.io import TorchCheckpointIO

    from ferry.integrations.lightning import FerryCheckpointIO

    trainer = fitted_trainer(width, folder)
    plugins = {"ferry": FerryCheckpointIO(), "torch": TorchCheckpointIO()}
    expected = trainer._checkpoint_connector.dump_checkpoint(weights_only=False)  # what save_checkpoint writes
    size = state_bytes(expected)
    saves: dict[str, list[float]] = {m: [] for m in METHODS}
    loads: dict[str, list[float]] = {m: [] for m in METHODS}
    equal: dict[str, bool] = {}
    on_disk: dict[str, int] = {}
    errors: dict[str, str] = {}
    for round_ in range(warmup + repeat):
        for method in in_turn(saves, round_):
            path = folder / method / "last.ckpt"
            trainer.strategy.checkpoint_io = plugins[method]
            try:
                if path.exists():
                    path.unlink()
                gc.collect()
                os.sync()
                start = time.perf_counter()
                trainer.save_checkpoint(path)
                saved = time.perf_counter() - start
                start = time.perf_counter()
                loaded = plugins[method].load_checkpoint(path)
                read = time.perf_counter() - start
            except Exception as err:
                errors[method] = f"{type(err).__name__}: {err}"[:300]
                del saves[method], loads[method]
                continue
            if method not in equal:  # once: comparing takes as long as loading
                equal[method] = same_values(expected, loaded)
                on_disk[method] = path.stat().st_size
            del loaded
            if round_ >= warmup:
                saves[method].append(saved)
                loads[method].append(read)
    methods = {
        method: {
            "median_s": statistics.median(times),
            "min_s": min(times),
            "max_s": max(times),
            "samples_s": times,
            "mb_per_s": size / statistics.median(times) / 1e6,
            "load_median_s": statistics.median(loads[method]),
            "load_samples_s": loads[method],
            "durable": DURABLE[method],
            "values_equal": equal.get(method),
            "file_bytes": on_disk.get(method),
        }
        for method, times in saves.items()
    }

    def ratio(key: str) -> float | None:
        if "ferry" in methods and "torch" in methods:
            return float(methods["ferry"][key] / methods["torch"][key])
        return None

    return {
        "bytes": size,
        "width": width,
        "results": {
            "methods": methods,
            "ratio_ferry_vs_torch": ratio("median_s"),
            "load_ratio_ferry_vs_torch": ratio("load_median_s"),
        },
        "errors": errors,
    }


def print_markdown(report: dict[str, Any]) -> None:
    r = report["results"]
    print(
        f"### Lightning checkpoint: {report['bytes'] / 1e6:.0f} MB of tensors ({LAYERS} x Linear({report['width']}, "
        f"{report['width']}) + Adam) through trainer.save_checkpoint, CPU, median of {report['repeat']}"
    )
    print()
    print(f"Folder: {report['machine']['filesystem']}.")
    print()
    print("ferry: FerryCheckpointIO; torch: TorchCheckpointIO, Lightning's default.")
    print()
    print("| plugin | durable | save s | MB/s | load s (warm) | file MB | values equal |")
    print("|---|---|---:|---:|---:|---:|---|")
    for method, s in r["methods"].items():
        size = "" if s["file_bytes"] is None else f"{s['file_bytes'] / 1e6:.1f}"
        print(
            f"| {method} | {'yes' if s['durable'] else 'no'} | {s['median_s']:.3f} | {s['mb_per_s']:.0f} | "
            f"{s['load_median_s']:.3f} | {size} | {s['values_equal']} |"
        )
    print()

    def fmt(x: float | None) -> str:
        return f"{x:.2f}" if x is not None else "n/a"

    print(
        f"ferry / torch: save {fmt(r['ratio_ferry_vs_torch'])} (ferry fsyncs, torch does not), load "
        f"{fmt(r['load_ratio_ferry_vs_torch'])} (ferry verifies every checksum)."
    )
    _machine.print_errors(report["errors"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size-mb", type=float, default=250.0, help="checkpoint tensors in MB (default 250)")
    parser.add_argument("--quick", action="store_true", help="~8 MB, to check the script runs")
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds per plugin; the median counts (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="uncounted rounds before the timed ones (default 1)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp folder under build/)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the figures here")
    args = parser.parse_args(argv)

    warnings.simplefilter("ignore")  # Lightning's advice (workers, logging) is noise here
    width = width_for(int((8 if args.quick else args.size_mb) * 1e6))
    needed = 4 * LAYERS * 3 * 4 * width * width
    with _machine.run_folder(args.dir, prefix="bench-lightning-", needed=needed) as folder:
        for method in METHODS:
            (folder / method).mkdir()
        figures = run(width, folder, args.repeat, args.warmup)
        report = {
            "benchmark": "lightning",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {**_machine.machine(), "filesystem": filesystem(folder)},
            "versions": _machine.versions("lightning", "safetensors", "xxhash"),
            "quick": args.quick,
            "repeat": args.repeat,
            "warmup": args.warmup,
            **figures,
        }
    print_markdown(report)
    _machine.write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
