"""Save one Hugging Face Trainer checkpoint with ferry's plug-in and with the stock Trainer, in one run.

The model is a BERT built from a config (no download), sized so that its float32 weights plus AdamW's two moments
come to --size-mb (default 250 MB); one training step on random tokens fills the optimizer state. One FerryTrainer
then saves ``checkpoint-<n>`` three ways, timed round-robin (reversed every other round), medians counted:

  stock           Trainer._save_checkpoint: model.safetensors, config.json, optimizer.pt, scheduler.pt,
                  rng_state.pth, trainer_state.json, training_args.bin; written in place, NOT fsync'd (the data may
                  still be in the page cache when it returns)
  stock+sync      the stock save, then os.sync(): what making it durable costs on this disk
  ferry           FerryTrainer._save_checkpoint: the same folder pickle-free (ferry files and JSON), every file
                  fsync'd, checksummed, committed with a rename and a directory fsync
  stock+callback  the stock save, then FerryCallback.on_save rewriting the folder as ferry's (what the callback
                  alone costs)

Before each save os.sync() flushes what earlier saves left dirty, and the folder is deleted after it.

    python benchmarks/bench_transformers.py                          # ~250 MB of state
    python benchmarks/bench_transformers.py --repeat 5 --json transformers.json
    python benchmarks/bench_transformers.py --quick                  # ~8 MB, for the tests
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
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from ferry.integrations.transformers import FerryCallback, FerryTrainer

METHODS = ("stock", "stock+sync", "ferry", "stock+callback")
DURABLE = {"stock": False, "stock+sync": True, "ferry": True, "stock+callback": True}


def config_for(size_bytes: int) -> BertConfig:
    """A BERT config whose weights + AdamW state (3 float32 copies) come closest to ``size_bytes``."""
    hidden, layers = (384, 6) if size_bytes >= 50e6 else (64, 2)
    per_layer = 12 * hidden * hidden + 13 * hidden  # attention 4h^2, feed-forward 8h^2 (intermediate 4h), biases
    fixed = layers * per_layer + (512 + 2 + 2) * hidden + hidden * hidden + 2 * hidden  # positions, pooler, head
    vocab = max(1000, int((size_bytes / 12 - fixed) / hidden))
    return BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        intermediate_size=4 * hidden,
        vocab_size=vocab,
    )


class Tokens(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    def __init__(self, vocab: int, count: int = 8) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (count, 32), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.ids[index, 0] % 2}


def trained(folder: Path, config: BertConfig) -> FerryTrainer:
    """A FerryTrainer after one AdamW step (so the optimizer holds its two moments per parameter)."""
    torch.manual_seed(0)
    args = TrainingArguments(
        output_dir=str(folder),
        use_cpu=True,
        report_to=[],
        disable_tqdm=True,
        per_device_train_batch_size=2,
        max_steps=1,
        save_strategy="no",
        logging_strategy="no",
    )
    trainer = FerryTrainer(model=BertForSequenceClassification(config), args=args, train_dataset=Tokens(1000))
    trainer.train()
    return trainer


def state_bytes(trainer: Trainer) -> tuple[int, int]:
    weights = sum(t.numel() * t.element_size() for t in trainer.model.state_dict().values())
    optimizer = sum(
        t.numel() * t.element_size()
        for state in trainer.optimizer.state.values()
        for t in state.values()
        if isinstance(t, torch.Tensor)
    )
    return weights, optimizer


def run(trainer: FerryTrainer, folder: Path, repeat: int, warmup: int) -> tuple[dict[str, list[float]], dict[str, str]]:
    times: dict[str, list[float]] = {m: [] for m in METHODS}
    errors: dict[str, str] = {}
    callback = FerryCallback()
    step = [0]

    def timed(save: Callable[[], None]) -> float:
        step[0] += 1
        trainer.state.global_step = step[0]  # a folder of its own: checkpoint-<n>
        gc.collect()
        os.sync()
        start = time.perf_counter()
        save()
        elapsed = time.perf_counter() - start
        shutil.rmtree(folder / f"checkpoint-{step[0]}")
        return elapsed

    def stock_then_sync() -> None:
        Trainer._save_checkpoint(trainer, trainer.model, None)
        os.sync()

    def stock_then_callback() -> None:
        Trainer._save_checkpoint(trainer, trainer.model, None)
        callback.on_save(
            trainer.args,
            trainer.state,
            trainer.control,
            optimizer=trainer.optimizer,
            lr_scheduler=trainer.lr_scheduler,
        )

    runners: dict[str, Callable[[], None]] = {
        "stock": lambda: Trainer._save_checkpoint(trainer, trainer.model, None),
        "stock+sync": stock_then_sync,
        "ferry": lambda: trainer._save_checkpoint(trainer.model, None),
        "stock+callback": stock_then_callback,
    }
    for round_ in range(warmup + repeat):
        for method in in_turn(times, round_):
            try:
                elapsed = timed(runners[method])
            except Exception as err:
                errors[method] = f"{type(err).__name__}: {err}"[:300]
                del times[method]
                continue
            if round_ >= warmup:
                times[method].append(elapsed)
    return times, errors


def summarize(times: dict[str, list[float]], size: int) -> dict[str, Any]:
    methods, ratio = _machine.method_figures(times, size, DURABLE)

    return {
        "methods": methods,
        "ratio_ferry_vs_stock": ratio("ferry", "stock"),
        "ratio_ferry_vs_stock_sync": ratio("ferry", "stock+sync"),
        "ratio_callback_vs_stock": ratio("stock+callback", "stock"),
    }


def print_markdown(report: dict[str, Any]) -> None:
    r = report["results"]
    print(
        f"### Hugging Face Trainer checkpoint: {report['bytes'] / 1e6:.0f} MB of state (weights "
        f"{report['weights_bytes'] / 1e6:.0f} MB + AdamW {report['optimizer_bytes'] / 1e6:.0f} MB, "
        f"{report['parameters'] / 1e6:.1f}M parameters) on the CPU, median of {report['repeat']}"
    )
    print()
    print(f"Folder: {report['machine']['filesystem']}; transformers {report['versions']['transformers']}.")
    print()
    print("| save | durable | seconds | MB/s |")
    print("|---|---|---:|---:|")
    for method, s in r["methods"].items():
        print(f"| {method} | {'yes' if s['durable'] else 'no'} | {s['median_s']:.3f} | {s['mb_per_s']:.0f} |")
    for label, key in (
        ("ferry / stock", "ratio_ferry_vs_stock"),
        ("ferry / stock+sync", "ratio_ferry_vs_stock_sync"),
        ("stock+callback / stock", "ratio_callback_vs_stock"),
    ):
        if r[key] is not None:
            print(f"| {label} | | {r[key]:.2f} | |")
    print()
    _machine.print_errors(report["errors"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size-mb", type=float, default=250.0, help="weights + AdamW state in MB (default 250)")
    parser.add_argument("--quick", action="store_true", help="~8 MB of state, to check the script runs")
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds per method; the median counts (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="uncounted rounds before the timed ones (default 1)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp folder under build/)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the figures here")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))

    config = config_for(int((8 if args.quick else args.size_mb) * 1e6))
    with _machine.run_folder(args.dir, prefix="bench-transformers-", needed=int(4 * args.size_mb * 1e6)) as folder:
        trainer = trained(folder, config)
        weights, optimizer = state_bytes(trainer)
        times, errors = run(trainer, folder, args.repeat, args.warmup)
        report = {
            "benchmark": "transformers",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {**_machine.machine(), "filesystem": filesystem(folder)},
            "versions": _machine.versions("transformers", "accelerate", "safetensors", "xxhash"),
            "quick": args.quick,
            "repeat": args.repeat,
            "warmup": args.warmup,
            "parameters": sum(p.numel() for p in trainer.model.parameters()),
            "weights_bytes": weights,
            "optimizer_bytes": optimizer,
            "bytes": weights + optimizer,
            "results": summarize(times, weights + optimizer),
            "errors": errors,
        }
    print_markdown(report)
    _machine.write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
