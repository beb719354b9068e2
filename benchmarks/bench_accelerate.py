"""Save one Accelerate checkpoint of ~250 MB with ferry.integrations.accelerate.save_state and with stock Accelerate.

The state: an MLP of five 2048x2048 Linear layers (21 M float32 parameters, 84 MB) and its Adam state after one step
(exp_avg and exp_avg_sq, 168 MB), prepared by a real ``accelerate.Accelerator(cpu=True)``, with a StepLR scheduler and
the RNG states. Methods, timed round-robin in one run:

  ferry save_state                  save_state(accelerator, folder): ferry files (checksummed, no pickle) in a
                                    temporary folder, each fsync'd, committed by a rename, fsync'd
  accelerator.save_state            accelerator.save_state(folder): model.safetensors, optimizer.bin (torch.save),
                                    scheduler.bin, random_states_0.pkl; NOT fsync'd, the data may be in the page cache
  accelerator.save_state + fsync    the same, then os.fsync of every file and of the folder: what it would take to
                                    make stock's checkpoint durable (it still is not atomic)

Before each save its folder is deleted and os.sync() flushes what earlier steps left dirty, so no save pays for
another's writes. Each method runs --warmup uncounted rounds, then --repeat timed ones, round-robin, in reverse order
every other round; medians count. The ratio ferry / stock is the headline.

    python benchmarks/bench_accelerate.py                      # ~250 MB
    python benchmarks/bench_accelerate.py --repeat 5 --json accelerate.json
    python benchmarks/bench_accelerate.py --quick              # ~0.8 MB, for the tests
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _machine
import torch
from bench_save_load import filesystem, in_turn

METHODS = ("ferry save_state", "accelerator.save_state", "accelerator.save_state + fsync")
DURABLE = {"ferry save_state": True, "accelerator.save_state": False, "accelerator.save_state + fsync": True}


def make_accelerator(width: int, layers: int) -> tuple[Any, Any]:
    """A prepared MLP and Adam after one step (so the Adam state exists), and a StepLR; returns (accelerator, model)."""
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    accelerator.backward(model(torch.randn(2, width)).square().mean())
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return accelerator, model


def state_bytes(accelerator: Any) -> int:
    """Bytes of tensor data in the models' and optimizers' state_dicts."""
    total = 0
    for model in accelerator._models:
        total += sum(t.numel() * t.element_size() for t in model.state_dict().values())
    for optimizer in accelerator._optimizers:
        for entry in optimizer.state_dict()["state"].values():
            total += sum(v.numel() * v.element_size() for v in entry.values() if isinstance(v, torch.Tensor))
    return total


def fsync_folder(folder: Path) -> None:
    for path in folder.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def run(accelerator: Any, folder: Path, repeat: int, warmup: int) -> tuple[dict[str, list[float]], dict[str, str]]:
    from ferry.integrations.accelerate import save_state

    def stock(target: Path) -> None:
        accelerator.save_state(str(target))

    def stock_fsync(target: Path) -> None:
        accelerator.save_state(str(target))
        fsync_folder(target)

    saves: dict[str, Callable[[Path], object]] = {
        "ferry save_state": lambda target: save_state(accelerator, target),
        "accelerator.save_state": stock,
        "accelerator.save_state + fsync": stock_fsync,
    }
    times: dict[str, list[float]] = {m: [] for m in METHODS}
    errors: dict[str, str] = {}
    for round_ in range(warmup + repeat):
        for method in in_turn(times, round_):
            target = folder / method.replace(" ", "-").replace("+", "plus")
            shutil.rmtree(target, ignore_errors=True)
            gc.collect()
            os.sync()
            try:
                start = time.perf_counter()
                saves[method](target)
                elapsed = time.perf_counter() - start
            except Exception as err:
                errors[method] = f"{type(err).__name__}: {err}"[:300]
                del times[method]
                continue
            finally:
                shutil.rmtree(target, ignore_errors=True)
            if round_ >= warmup:
                times[method].append(elapsed)
    return times, errors


def summarize(times: dict[str, list[float]], size: int) -> dict[str, Any]:
    methods, ratio = _machine.method_figures(times, size, DURABLE)

    return {
        "methods": methods,
        "ratio_ferry_vs_stock": ratio("ferry save_state", "accelerator.save_state"),
        "ratio_ferry_vs_stock_fsync": ratio("ferry save_state", "accelerator.save_state + fsync"),
    }


def print_markdown(report: dict[str, Any]) -> None:
    r = report["results"]
    print(
        f"### Accelerate checkpoint: {report['bytes'] / 1e6:.0f} MB of model + Adam state, median of {report['repeat']}"
    )
    print()
    machine = report["machine"]
    print(f"Machine: {machine['cpu']}, {machine['nproc']} cores. Folder: {machine['filesystem']}.")
    print()
    print("| save | durable | seconds | MB/s |")
    print("|---|---|---:|---:|")
    for method, s in r["methods"].items():
        print(f"| {method} | {'yes' if s['durable'] else 'no'} | {s['median_s']:.3f} | {s['mb_per_s']:.0f} |")
    print()

    def fmt(x: float | None) -> str:
        return f"{x:.2f}" if x is not None else "n/a"

    print(
        f"ferry / stock = {fmt(r['ratio_ferry_vs_stock'])}; "
        f"ferry / (stock + fsync) = {fmt(r['ratio_ferry_vs_stock_fsync'])}."
    )
    _machine.print_errors(report["errors"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="~0.8 MB of state, to check the script runs")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds per method; the median counts (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="uncounted rounds before the timed ones (default 1)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp folder under build/)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the figures here")
    args = parser.parse_args(argv)

    width, layers = (128, 5) if args.quick else (2048, 5)
    accelerator, _ = make_accelerator(width, layers)
    size = state_bytes(accelerator)
    with _machine.run_folder(args.dir, prefix="bench-accelerate-", needed=4 * size) as folder:
        times, errors = run(accelerator, folder, args.repeat, args.warmup)
        report = {
            "benchmark": "accelerate",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {**_machine.machine(), "filesystem": filesystem(folder)},
            "versions": _machine.versions("accelerate", "safetensors", "numpy", "xxhash"),
            "quick": args.quick,
            "repeat": args.repeat,
            "warmup": args.warmup,
            "bytes": size,
            "results": summarize(times, size),
            "errors": errors,
        }
    print_markdown(report)
    _machine.write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
