"""Save a 1 GiB training state with ferry.Checkpointer, synchronously and asynchronously, against its peers, in one run.

The state is the 1 GiB float32 state_dict of bench_save_load.py (35 tensors of a 4-layer transformer), on --device,
saved as ``Checkpointer.save(step, {"model": state_dict, "marker": tensor})``. Methods, timed round-robin:

  raw          the tensors' bytes with os.write, then fsync (the disk's ceiling for a durable save)
  torch.save   torch.save(state, file): NOT fsync'd, the data may still be in the page cache
  ferry.save   ferry.save(state, file): atomic, fsync'd, checksummed
  ckpt sync    Checkpointer(dir, keep_last=1).save(step, state): a committed step folder (state file, manifest,
               fsync'd, older step pruned) by the time it returns
  ckpt async   Checkpointer(dir, keep_last=1, async_save=True).save(step, state): returns once the state is copied
               (on CUDA into pinned host buffers, on the CPU into CPU buffers; both reused from the previous save);
               a background thread writes it. Two figures: "block", the time save() blocks the training loop, and
               "commit", until wait() returns (block + the background write).

Right after each async save returns, the benchmark changes the marker tensor in place, as a training step would;
the checkpoint must still hold the old value (checked after the run, with every tensor compared). Before each save
os.sync() flushes what earlier steps left dirty. Each method runs --warmup uncounted rounds (the first async save
allocates its buffers), then --repeat timed ones, round-robin in reverse order every other round; medians count.

Targets: the async save blocks for at most 10 % of the synchronous Checkpointer save; the synchronous saves reach at
least 80 % of raw's throughput and take at most half of torch.save's time.

    python benchmarks/bench_checkpointer.py                        # 1 GiB, state on cuda when a GPU is present
    python benchmarks/bench_checkpointer.py --device cpu --repeat 5 --json checkpointer.json
    python benchmarks/bench_checkpointer.py --quick                # ~8 MiB, for the tests
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _machine
import torch
from bench_save_load import filesystem, in_turn, make_state_dict, nbytes

METHODS = ("raw", "torch.save", "ferry.save", "ckpt sync", "ckpt async")
DURABLE = {"raw": True, "torch.save": False, "ferry.save": True, "ckpt sync": True, "ckpt async": True}


def raw_save(state: dict[str, Any], path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for t in [*state["model"].values(), state["marker"]]:
            view = memoryview(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
            while view:
                view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def same_values(loaded: Any, state: dict[str, Any], marker: float) -> bool:
    model = loaded["model"]
    if model.keys() != state["model"].keys():
        return False
    if not all(torch.equal(model[k].cpu(), v.cpu()) for k, v in state["model"].items()):
        return False
    return bool((loaded["marker"].cpu() == marker).all())


def run(
    state: dict[str, Any], folder: Path, repeat: int, warmup: int
) -> tuple[dict[str, list[float]], list[float], dict[str, bool], dict[str, str]]:
    import ferry

    (folder / "ckpt-sync").mkdir()
    (folder / "ckpt-async").mkdir()
    sync = ferry.Checkpointer(folder / "ckpt-sync", keep_last=1)
    asyn = ferry.Checkpointer(folder / "ckpt-async", keep_last=1, async_save=True)
    marker: torch.Tensor = state["marker"]
    times: dict[str, list[float]] = {m: [] for m in METHODS}
    commits: list[float] = []
    errors: dict[str, str] = {}
    checked: dict[str, bool] = {}
    sync_marker: list[float] = []

    def file_save(method: str, save: Callable[[dict[str, Any], Path], None]) -> Callable[[int], float]:
        def go(step: int) -> float:
            path = folder / f"{method.replace(' ', '-')}.bin"
            path.unlink(missing_ok=True)
            gc.collect()
            os.sync()
            start = time.perf_counter()
            save(state, path)
            return time.perf_counter() - start

        return go

    def ckpt_sync(step: int) -> float:
        gc.collect()
        os.sync()
        sync_marker[:] = [float(marker.flatten()[0])]
        start = time.perf_counter()
        sync.save(step, state)
        return time.perf_counter() - start

    def ckpt_async(step: int) -> float:
        gc.collect()
        os.sync()
        before = float(marker.flatten()[0])
        start = time.perf_counter()
        asyn.save(step, state)
        block = time.perf_counter() - start
        marker.fill_(before + 1)  # training goes on: the checkpoint must keep the value at save time
        asyn.wait()
        commits.append(time.perf_counter() - start)
        if "ckpt async" not in checked:  # once: loading takes as long as saving
            loaded = ferry.load(asyn.path_for(step) / "state.safetensors")["values"]
            checked["ckpt async"] = same_values(loaded, state, before)
        return block

    runners: dict[str, Callable[[int], float]] = {
        "raw": file_save("raw", raw_save),
        "torch.save": file_save("torch.save", torch.save),
        "ferry.save": file_save("ferry.save", ferry.save),
        "ckpt sync": ckpt_sync,
        "ckpt async": ckpt_async,
    }
    try:
        for round_ in range(warmup + repeat):
            for method in in_turn(times, round_):
                try:
                    elapsed = runners[method](round_)
                except Exception as err:
                    errors[method] = f"{type(err).__name__}: {err}"[:300]
                    del times[method]
                    continue
                if round_ >= warmup:
                    times[method].append(elapsed)
                elif method == "ckpt async":
                    commits.clear()
        if "ckpt sync" in times:
            loaded = ferry.load(sync.path_for(warmup + repeat - 1) / "state.safetensors")["values"]
            checked["ckpt sync"] = same_values(loaded, state, sync_marker[0])
    finally:
        sync.close()
        asyn.close()
    return times, commits, checked, errors


def summarize(
    times: dict[str, list[float]], commits: list[float], checked: dict[str, bool], size: int
) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = {}
    for method, ts in times.items():
        med = statistics.median(ts)
        out[method] = {
            "median_s": med,
            "min_s": min(ts),
            "max_s": max(ts),
            "samples_s": ts,
            "gb_per_s": size / med / 1e9,
            "durable": DURABLE[method],
            "values_equal": checked.get(method),
        }
    if commits and "ckpt async" in out:
        out["ckpt async"]["commit_median_s"] = statistics.median(commits)
        out["ckpt async"]["commit_samples_s"] = commits

    def ratio(a: str, b: str) -> float | None:
        return out[a]["median_s"] / out[b]["median_s"] if a in out and b in out else None

    ratios = {
        "async_block_vs_sync": ratio("ckpt async", "ckpt sync"),
        "ckpt_sync_time_vs_raw": ratio("ckpt sync", "raw"),
        "ferry_save_time_vs_raw": ratio("ferry.save", "raw"),
        "ckpt_sync_time_vs_torch_save": ratio("ckpt sync", "torch.save"),
        "ferry_save_time_vs_torch_save": ratio("ferry.save", "torch.save"),
    }

    def at_most(value: float | None, bound: float) -> bool | None:
        return None if value is None else value <= bound

    targets = {
        "async_block_at_most_10pct_of_sync": at_most(ratios["async_block_vs_sync"], 0.10),
        # throughput >= 80 % of raw  <=>  time <= raw time / 0.8
        "ckpt_sync_at_least_80pct_of_raw_throughput": at_most(ratios["ckpt_sync_time_vs_raw"], 1 / 0.8),
        "ferry_save_at_least_80pct_of_raw_throughput": at_most(ratios["ferry_save_time_vs_raw"], 1 / 0.8),
        "ckpt_sync_at_least_2x_torch_save": at_most(ratios["ckpt_sync_time_vs_torch_save"], 0.5),
        "ferry_save_at_least_2x_torch_save": at_most(ratios["ferry_save_time_vs_torch_save"], 0.5),
    }
    return {"methods": out, "ratios": ratios, "targets": targets}


def print_markdown(report: dict[str, Any]) -> None:
    r = report["results"]
    print(
        f"### Checkpointer: {report['bytes'] / 2**30:.3f} GiB state ({report['tensors']} tensors) on "
        f"{report['device']}, median of {report['repeat']}"
    )
    print()
    print(f"Folder: {report['machine']['filesystem']}.")
    print()
    print("| save | durable | seconds | GB/s | values equal |")
    print("|---|---|---:|---:|---|")
    for method, s in r["methods"].items():
        label = "ckpt async (blocks)" if method == "ckpt async" else method
        equal = "" if s["values_equal"] is None else str(s["values_equal"])
        print(f"| {label} | {'yes' if s['durable'] else 'no'} | {s['median_s']:.3f} | {s['gb_per_s']:.2f} | {equal} |")
        if "commit_median_s" in s:
            print(
                f"| ckpt async (until committed) | yes | {s['commit_median_s']:.3f} | "
                f"{report['bytes'] / s['commit_median_s'] / 1e9:.2f} | |"
            )
    print()

    def fmt(x: float | None) -> str:
        return f"{x:.2f}" if x is not None else "n/a"

    def met(x: bool | None) -> str:
        return {True: "met", False: "**not met**", None: "n/a"}[x]

    q, t = r["ratios"], r["targets"]
    print(
        f"Targets: async block / sync save = {fmt(q['async_block_vs_sync'])} (<= 0.10: "
        f"{met(t['async_block_at_most_10pct_of_sync'])}); ckpt sync throughput / raw = "
        f"{fmt(1 / q['ckpt_sync_time_vs_raw'] if q['ckpt_sync_time_vs_raw'] else None)} (>= 0.80: "
        f"{met(t['ckpt_sync_at_least_80pct_of_raw_throughput'])}); ferry.save throughput / raw = "
        f"{fmt(1 / q['ferry_save_time_vs_raw'] if q['ferry_save_time_vs_raw'] else None)} (>= 0.80: "
        f"{met(t['ferry_save_at_least_80pct_of_raw_throughput'])}); ckpt sync time / torch.save = "
        f"{fmt(q['ckpt_sync_time_vs_torch_save'])} (<= 0.50: {met(t['ckpt_sync_at_least_2x_torch_save'])}); "
        f"ferry.save time / torch.save = {fmt(q['ferry_save_time_vs_torch_save'])} (<= 0.50: "
        f"{met(t['ferry_save_at_least_2x_torch_save'])})."
    )
    _machine.print_errors(report["errors"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    _machine.add_size_arguments(parser, what="state")
    _machine.add_common_arguments(parser, device_use="where the state lives: cpu or cuda")
    args = parser.parse_args(argv)

    device = _machine.chosen_device(parser, args)

    size_bytes = int((8 / 1024 if args.quick else args.size_gib) * 2**30)
    model = {name: t.to(device) for name, t in make_state_dict(size_bytes).items()}
    state = {"model": model, "marker": torch.zeros(1024, device=device)}
    size = nbytes(model) + nbytes({"marker": state["marker"]})
    with _machine.run_folder(args.dir, prefix="bench-checkpointer-", needed=8 * size) as folder:
        times, commits, checked, errors = run(state, folder, args.repeat, args.warmup)
        report = {
            "benchmark": "checkpointer",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {**_machine.machine(), "filesystem": filesystem(folder)},
            "versions": _machine.versions("safetensors", "numpy", "xxhash"),
            "quick": args.quick,
            "device": str(device),
            "repeat": args.repeat,
            "warmup": args.warmup,
            "bytes": size,
            "tensors": len(model) + 1,
            "results": summarize(times, commits, checked, size),
            "errors": errors,
        }
    print_markdown(report)
    _machine.write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
