"""Save one training state sharded over 2 ranks with ferry.Checkpointer, against 1 rank and plain DCP, in one run.

The state is a transformer-ish stack of Linear layers (4 blocks: LayerNorm, qkv and output projections, a 4x MLP)
and its Adam optimizer after one step: parameters plus Adam's two moments, float32, --size-gib in all (a third of it
parameters). Methods:

  ferry 2 ranks  the model wrapped with ferry.distributed.wrap(model, strategy="fsdp") (FSDP2) on 2 ranks under
                 torchrun; every rank calls Checkpointer(dir, keep_last=1).save(step, {"model": model,
                 "optimizer": optimizer}): each rank writes its shards (ferry's DCP storage: a safetensors file per
                 rank, xxh3 checksums, fsync'd), rank 0 commits the step folder once every rank wrote
  ferry 1 rank   the same model, unwrapped, in a single process (no process group), saved the same way: one
                 state.safetensors
  dcp 2 ranks    the 2-rank FSDP2 setup again, saved with plain torch.distributed.checkpoint:
                 dcp.save(get_state_dict(model, optimizer), storage_writer=FileSystemWriter(folder)) into a fresh
                 folder per save. FileSystemWriter's default sync_files=True fsyncs each rank's data file after
                 writing it and the pickled .metadata (written as .metadata.tmp, renamed); it fsyncs no folder and
                 writes no checksums, so it is close to, not quite, as durable as ferry's commit.

The two 2-rank methods run in one torchrun job (gloo on the CPU; 2 ranks share this machine's cores), which this
script starts itself (``python -m torch.distributed.run --standalone --nproc-per-node 2 bench_sharded.py
--worker ...``); the 1-rank method runs in this process first. Each save is timed from a barrier that all ranks
leave together to a barrier after every rank returned (for ferry: after the commit), the slowest rank's time
counting. Before each save os.sync() flushes what earlier saves left dirty. Each method runs --warmup uncounted
rounds, then --repeat timed ones (the 2-rank methods round-robin, order reversed every other round); medians count.
After the run each checkpoint is loaded into a fresh model and optimizer and compared with the saved state.

    python benchmarks/bench_sharded.py                       # 1 GiB state, on the CPU
    python benchmarks/bench_sharded.py --repeat 5 --json sharded.json
    python benchmarks/bench_sharded.py --quick               # ~9 MiB, for the tests
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _machine
import torch
from bench_save_load import filesystem, in_turn
from torch import nn

METHODS = ("ferry 2 ranks", "ferry 1 rank", "dcp 2 ranks")
RANKS = 2
LAYERS = 4
LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class Block(nn.Module):
    """A transformer block's parameters (12 d^2 + 13 d) with a cheap forward that uses them all."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        x = x + self.proj(v * torch.sigmoid(q * k))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


def width(size_bytes: int) -> int:
    # parameters + Adam's exp_avg and exp_avg_sq: 3 * LAYERS * 12 d^2 float32 elements
    return max(64, round(math.sqrt(size_bytes / 4 / (3 * 12 * LAYERS)) / 64) * 64)


def make_model(d: int, seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(*(Block(d) for _ in range(LAYERS)))


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, d: int, device: torch.device) -> None:
    """One Adam step on a small random batch: creates the optimizer state (step, exp_avg, exp_avg_sq)."""
    model(torch.randn(4, d, device=device)).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of ``t`` (a DTensor's local shard), else ``t``."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for key in sorted(obj, key=str) for t in tensors(obj[key])]
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in tensors(item)]
    return []


def training_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The model's and optimizer's state_dicts keyed by parameter name, as DCP saves them (local shards)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    return {"model": model_sd, "optimizer": optim_sd}


def same_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
    ta, tb = tensors(a), tensors(b)
    return len(ta) == len(tb) and all(torch.equal(local(x).cpu(), local(y).cpu()) for x, y in zip(ta, tb, strict=True))


def state_size(state: dict[str, Any]) -> tuple[int, int]:
    """This rank's bytes and tensor count of ``state``."""
    ts = [local(t) for t in tensors(state)]
    return sum(t.numel() * t.element_size() for t in ts), len(ts)


def disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def figures(samples: list[float], size: int) -> dict[str, Any]:
    med = statistics.median(samples)
    return {
        "median_s": med,
        "min_s": min(samples),
        "max_s": max(samples),
        "samples_s": samples,
        "gb_per_s": size / med / 1e9,
    }


# -- 1 rank: this process -----------------------------------------------------------------------------------------


def run_single(d: int, device: torch.device, folder: Path, repeat: int, warmup: int) -> dict[str, Any]:
    import ferry

    model = make_model(d, seed=0).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train_step(model, optimizer, d, device)
    saved = training_state(model, optimizer)
    size, count = state_size(saved)
    samples: list[float] = []
    with ferry.Checkpointer(folder, keep_last=1) as ckpt:
        for round_ in range(warmup + repeat):
            gc.collect()
            os.sync()
            start = time.perf_counter()
            ckpt.save(round_, {"model": model, "optimizer": optimizer})
            elapsed = time.perf_counter() - start
            if round_ >= warmup:
                samples.append(elapsed)
        ckpt.wait()
        on_disk = disk_bytes(ckpt.path_for(warmup + repeat - 1))
        fresh = make_model(d, seed=1).to(device)
        fresh_optimizer = torch.optim.Adam(fresh.parameters(), lr=1e-3)
        train_step(fresh, fresh_optimizer, d, device)
        ckpt.restore({"model": fresh, "optimizer": fresh_optimizer})
    return {
        **figures(samples, size),
        "ranks": 1,
        "threads": torch.get_num_threads(),
        "disk_bytes": on_disk,
        "values_equal": same_state(training_state(fresh, fresh_optimizer), saved),
        "bytes": size,
        "tensors": count,
    }


# -- 2 ranks: the torchrun job ------------------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> int:
    """Run by each rank under torchrun: time the 2-rank methods; rank 0 writes the figures to ``args.out``."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    import ferry
    import ferry.distributed

    device = ferry.distributed.init()
    rank = dist.get_rank()
    d = args.width

    def gather(value: Any) -> list[Any]:
        values: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(values, value)
        return values

    def fsdp_state(seed: int) -> tuple[nn.Module, torch.optim.Optimizer]:
        model = ferry.distributed.wrap(make_model(d, seed), strategy="fsdp")
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        torch.manual_seed(100 + rank)  # each rank its own batch, as data parallelism has
        train_step(model, optimizer, d, device)
        return model, optimizer

    model, optimizer = fsdp_state(seed=0)
    saved = training_state(model, optimizer)
    sizes = gather(state_size(saved))  # every rank holds the same tensors, each its shard of them
    size, count = sum(b for b, _ in sizes), sizes[0][1]
    ckpt = ferry.Checkpointer(args.dir / "ferry-2", keep_last=1)
    dcp_root = args.dir / "dcp-2"

    def ferry_save(step: int) -> None:
        ckpt.save(step, {"model": model, "optimizer": optimizer})

    def dcp_save(step: int) -> None:
        state = training_state(model, optimizer)
        dcp.save(state, storage_writer=dcp.FileSystemWriter(dcp_root / f"step-{step}"))

    def timed(save: Callable[[int], None], step: int) -> float:
        gc.collect()
        os.sync()
        dist.barrier()
        start = time.perf_counter()
        save(step)
        dist.barrier()
        return max(gather(time.perf_counter() - start))

    runners = {"ferry 2 ranks": ferry_save, "dcp 2 ranks": dcp_save}
    times: dict[str, list[float]] = {m: [] for m in runners}
    errors: dict[str, str] = {}
    last = args.warmup + args.repeat - 1
    for round_ in range(args.warmup + args.repeat):
        for method in in_turn(times, round_):
            if rank == 0 and method == "dcp 2 ranks" and round_ > 0:
                shutil.rmtree(dcp_root / f"step-{round_ - 1}", ignore_errors=True)
            try:
                elapsed = timed(runners[method], round_)
            except Exception as err:  # a failing save raises on every rank (ferry: by design; DCP: it gathers)
                errors[method] = f"{type(err).__name__}: {err}"[:300]
                del times[method]
                continue
            if round_ >= args.warmup:
                times[method].append(elapsed)
    ckpt.wait()

    results: dict[str, Any] = {}
    for method, samples in times.items():
        folder = ckpt.path_for(last) if method == "ferry 2 ranks" else dcp_root / f"step-{last}"
        fresh, fresh_optimizer = fsdp_state(seed=1)
        try:  # a failing load raises on every rank (ferry: by design; DCP: it gathers), so all go on together
            if method == "ferry 2 ranks":
                ckpt.restore({"model": fresh, "optimizer": fresh_optimizer})
                loaded = training_state(fresh, fresh_optimizer)
            else:
                loaded = training_state(fresh, fresh_optimizer)
                dcp.load(loaded, checkpoint_id=folder)
            equal = all(gather(same_state(loaded, saved)))
        except Exception as err:
            errors[f"{method}: loading back"] = f"{type(err).__name__}: {err}"[:500]
            equal = False
        results[method] = {
            **figures(samples, size),
            "ranks": dist.get_world_size(),
            "threads": torch.get_num_threads(),
            "disk_bytes": disk_bytes(folder) if rank == 0 else None,
            "values_equal": equal,
        }
    ckpt.close()
    if rank == 0:
        report = {"bytes": size, "tensors": count, "backend": dist.get_backend(), "results": results, "errors": errors}
        args.out.write_text(json.dumps(report))
    dist.barrier()  # without it one rank may tear gloo down while the other still uses it (abort at exit)
    dist.destroy_process_group()
    return 0


def run_ranks(args: argparse.Namespace, d: int, device: torch.device, folder: Path) -> dict[str, Any]:
    """Start the torchrun job (2 ranks) and return rank 0's figures; raises RuntimeError with its output if it fails."""
    out = folder / "ranks.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(RANKS)]
    command += [__file__, "--worker", "--width", str(d), "--dir", str(folder), "--out", str(out)]
    command += ["--repeat", str(args.repeat), "--warmup", str(args.warmup)]
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}
    env["FERRY_DEVICE"] = device.type  # cpu: every rank on the CPU, gloo; cuda: cuda:LOCAL_RANK, nccl
    timeout = 300 + 120 * (args.warmup + args.repeat) * (0 if args.quick else args.size_gib)
    # its own session, so that a hang can be ended with the workers torchrun started
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        raise RuntimeError(
            f"the {RANKS}-rank job hung: killed after {timeout:.0f} s. Its output:\n{output[-3000:]}"
        ) from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"the {RANKS}-rank job failed (exit {proc.returncode}). Its output:\n{output[-3000:]}")
    report: dict[str, Any] = json.loads(out.read_text())
    return report


# -- the report ---------------------------------------------------------------------------------------------------


def print_markdown(report: dict[str, Any]) -> None:
    r = report["results"]
    print(
        f"### Sharded save: {report['bytes'] / 2**30:.3f} GiB training state ({report['tensors']} tensors: "
        f"parameters + Adam state) on {report['device']}, median of {report['repeat']}"
    )
    print()
    print(
        f"Folder: {report['machine']['filesystem']}. {RANKS} ranks ({report.get('backend', '?')}) on "
        f"{report['machine']['nproc']} cores."
    )
    print()
    print("| save | ranks | torch threads per rank | seconds | GB/s | on disk (MiB) | values equal |")
    print("|---|---:|---:|---:|---:|---:|---|")
    labels = {
        "ferry 2 ranks": "(a) ferry Checkpointer.save, FSDP2",
        "ferry 1 rank": "(b) ferry Checkpointer.save, plain model",
        "dcp 2 ranks": "(c) DCP FileSystemWriter, FSDP2",
    }
    for method, s in r["methods"].items():
        disk = "" if s["disk_bytes"] is None else f"{s['disk_bytes'] / 2**20:.1f}"
        print(
            f"| {labels[method]} | {s['ranks']} | {s['threads']} | {s['median_s']:.3f} | {s['gb_per_s']:.2f} | "
            f"{disk} | {s['values_equal']} |"
        )
    print()

    def fmt(x: float | None) -> str:
        return f"{x:.2f}" if x is not None else "n/a"

    q = r["ratios"]
    print(
        f"Time ratios: (a) / (b), 2 ranks / 1 rank = {fmt(q['ferry_2_ranks_vs_1_rank'])}; (a) / (c), ferry / "
        f"DCP FileSystemWriter = {fmt(q['ferry_2_ranks_vs_dcp'])}. Below 1: (a) is faster."
    )
    _machine.print_errors(report["errors"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    _machine.add_size_arguments(parser, what="training state")
    _machine.add_common_arguments(parser, device_use="where the state lives: cpu, or cuda with 2 GPUs")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # a rank of the torchrun job
    parser.add_argument("--width", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)

    if args.device == "cuda" and torch.cuda.device_count() < RANKS:
        parser.exit(2, f"--device cuda: {RANKS} ranks need {RANKS} GPUs, torch sees {torch.cuda.device_count()}.\n")
    on_gpus = args.device == "cuda" or (args.device is None and torch.cuda.device_count() >= RANKS)
    device = torch.device("cuda", 0) if on_gpus else torch.device("cpu")

    size_bytes = int((8 / 1024 if args.quick else args.size_gib) * 2**30)
    d = width(size_bytes)
    with _machine.run_folder(args.dir, prefix="bench-sharded-", needed=6 * size_bytes) as folder:
        errors: dict[str, str] = {}
        methods: dict[str, Any] = {}
        ranks: dict[str, Any] = {}
        try:
            single = run_single(d, device, folder / "ferry-1", args.repeat, args.warmup)
        except Exception as err:
            errors["ferry 1 rank"] = f"{type(err).__name__}: {err}"[:300]
            single = None
        shutil.rmtree(folder / "ferry-1", ignore_errors=True)
        gc.collect()
        try:
            ranks = run_ranks(args, d, device, folder)
            errors.update(ranks["errors"])
        except RuntimeError as err:
            errors["2 ranks"] = str(err)
        for method in METHODS:
            if method == "ferry 1 rank" and single is not None:
                methods[method] = {k: v for k, v in single.items() if k not in ("bytes", "tensors")}
            elif method in ranks.get("results", {}):
                methods[method] = ranks["results"][method]
        size = ranks.get("bytes") or (single or {}).get("bytes", 0)

        def ratio(a: str, b: str) -> float | None:
            return methods[a]["median_s"] / methods[b]["median_s"] if a in methods and b in methods else None

        report = {
            "benchmark": "sharded",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {**_machine.machine(), "filesystem": filesystem(folder)},
            "versions": _machine.versions("safetensors", "xxhash"),
            "quick": args.quick,
            "device": str(device),
            "repeat": args.repeat,
            "warmup": args.warmup,
            "bytes": size,
            "tensors": ranks.get("tensors") or (single or {}).get("tensors", 0),
            "width": d,
            "layers": LAYERS,
            "backend": ranks.get("backend"),
            "results": {
                "methods": methods,
                "ratios": {
                    "ferry_2_ranks_vs_1_rank": ratio("ferry 2 ranks", "ferry 1 rank"),
                    "ferry_2_ranks_vs_dcp": ratio("ferry 2 ranks", "dcp 2 ranks"),
                },
            },
            "errors": errors,
        }
    print_markdown(report)
    _machine.write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
