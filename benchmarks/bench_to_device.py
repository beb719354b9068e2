"""Per-call time of ferry.to_device on a realistic nested batch, against accelerate and lightning, in one run.

The batch is one dict holding the three container kinds a data loader yields: a dict of 64 tensors, a namedtuple
and a list of 16 tensors (85 tensors, mixed shapes and dtypes). Cases:

  cpu->cpu              target == current device: pure traversal overhead (the walkers' own cost)
  cuda->cuda            the same on the GPU (--device cuda)
  cpu->cuda             a real host-to-device copy, non_blocking=False (--device cuda)
  cpu->cuda pinned nb   pinned host memory, non_blocking=True (--device cuda)

Every call of every walker is timed to completion (a CUDA synchronize is inside the timed loop). Walkers are timed
round-robin, so a slow drift of the machine hits all of them alike. Figures are medians over --repeat rounds of
per-call microseconds. cpu->meta is left out: the peers do not treat meta alike, so the figures would not compare.

    python benchmarks/bench_to_device.py                  # cuda when a GPU is present, else cpu
    python benchmarks/bench_to_device.py --device cpu --repeat 30 --json to_device.json
    python benchmarks/bench_to_device.py --quick          # a few calls, for the tests
"""

from __future__ import annotations

import argparse
import datetime
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import _machine
import torch

WALKERS = ("ferry", "accelerate", "lightning")
PEERS = ("accelerate", "lightning")


class Sample(NamedTuple):
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor
    pixel_values: torch.Tensor
    weights: torch.Tensor


# (shape, dtype) cycled over the 64 entries of the feature dict: what a tokenised/tabular batch of 32 looks like.
FEATURE_SPECS: tuple[tuple[tuple[int, ...], torch.dtype], ...] = (
    ((32, 128), torch.float32),
    ((32,), torch.int64),
    ((32, 128), torch.int64),
    ((32, 16), torch.float16),
    ((32, 128), torch.bfloat16),
    ((32,), torch.bool),
    ((32, 8, 8), torch.float32),
    ((), torch.float32),
)


def make_tensor(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    return torch.randint(0, 30_000, shape, generator=gen, dtype=dtype)


def make_batch(seed: int = 0) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(seed)
    features = {f"feature_{i:02d}": make_tensor(*FEATURE_SPECS[i % len(FEATURE_SPECS)], gen=gen) for i in range(64)}
    sample = Sample(
        input_ids=make_tensor((32, 128), torch.int64, gen),
        attention_mask=make_tensor((32, 128), torch.bool, gen),
        labels=make_tensor((32,), torch.int64, gen),
        pixel_values=make_tensor((32, 3, 32, 32), torch.float16, gen),
        weights=make_tensor((32,), torch.float32, gen),
    )
    extras = [make_tensor(*FEATURE_SPECS[i % len(FEATURE_SPECS)], gen=gen) for i in range(16)]
    return {"features": features, "sample": sample, "extras": extras}


def leaves(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in leaves(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in leaves(v)]
    return []


def pin(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.pin_memory()
    if isinstance(obj, dict):
        return {k: pin(v) for k, v in obj.items()}
    if isinstance(obj, Sample):
        return Sample(*(pin(v) for v in obj))
    if isinstance(obj, list):
        return [pin(v) for v in obj]
    raise TypeError(type(obj))


def check_output(name: str, out: Any, batch: Any, device: torch.device) -> None:
    """Fail loudly if a walker dropped a tensor, changed a container type or missed the device."""
    got, want = leaves(out), leaves(batch)
    if len(got) != len(want):
        raise AssertionError(f"{name}: {len(got)} tensors out, {len(want)} in")
    if type(out["sample"]) is not Sample or not isinstance(out["extras"], list):
        raise AssertionError(f"{name}: container types changed: {type(out['sample'])}, {type(out['extras'])}")
    for g, w in zip(got, want, strict=True):
        if g.device != device or g.dtype != w.dtype or g.shape != w.shape:
            raise AssertionError(f"{name}: tensor {tuple(w.shape)} {w.dtype} came back as {g.device} {g.dtype}")


def load_walkers(non_blocking: bool) -> dict[str, Callable[[Any, torch.device], Any] | str]:
    """Each walker as ``fn(batch, device)``, or a string saying why it cannot run."""
    walkers: dict[str, Callable[[Any, torch.device], Any] | str] = {}
    try:
        import ferry

        walkers["ferry"] = lambda b, d: ferry.to_device(b, d, non_blocking=non_blocking)
    except ImportError as err:
        walkers["ferry"] = f"not installed ({err})"
    try:
        from accelerate.utils import send_to_device

        walkers["accelerate"] = lambda b, d: send_to_device(b, d, non_blocking=non_blocking)
    except ImportError:
        walkers["accelerate"] = "not installed"
    try:
        try:
            from lightning.fabric.utilities.apply_func import move_data_to_device
        except ImportError:
            from lightning_fabric.utilities.apply_func import move_data_to_device
        # lightning has no non_blocking flag: it always passes non_blocking=True for cuda targets.
        walkers["lightning"] = move_data_to_device
    except ImportError:
        walkers["lightning"] = "not installed"
    return walkers


def bench_case(
    label: str,
    batch: Any,
    device: torch.device,
    non_blocking: bool,
    repeat: int,
    number: int,
    warmup: int,
) -> dict[str, Any]:
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    results: dict[str, dict[str, Any]] = {}
    runnable: dict[str, Callable[[Any, torch.device], Any]] = {}
    for name, fn in load_walkers(non_blocking).items():
        if isinstance(fn, str):
            results[name] = {"status": fn, "median_us": None}
            continue
        try:
            out = fn(batch, device)
            sync()
            check_output(name, out, batch, device)
            for _ in range(warmup):
                fn(batch, device)
            sync()
        except Exception as err:  # a walker that breaks is reported, not allowed to sink the other figures
            results[name] = {"status": f"error: {type(err).__name__}: {err}"[:300], "median_us": None}
            continue
        runnable[name] = fn
        results[name] = {"status": "ok", "samples_us": []}

    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: a collection in one walker's window would be charged to it
    try:
        for _ in range(repeat):
            for name, fn in runnable.items():
                start = time.perf_counter()
                for _ in range(number):
                    fn(batch, device)
                    sync()
                results[name]["samples_us"].append((time.perf_counter() - start) / number * 1e6)
    finally:
        if gc_was_enabled:
            gc.enable()

    for name in runnable:
        samples = results[name]["samples_us"]
        results[name]["median_us"] = statistics.median(samples)
        results[name]["min_us"] = min(samples)
        results[name]["max_us"] = max(samples)

    peer_medians = {p: results[p]["median_us"] for p in PEERS if results.get(p, {}).get("median_us") is not None}
    fastest = min(peer_medians, key=lambda p: peer_medians[p]) if peer_medians else None
    ferry_us = results["ferry"]["median_us"]
    ratio = ferry_us / peer_medians[fastest] if fastest is not None and ferry_us is not None else None
    return {
        "case": label,
        "device": str(device),
        "non_blocking": non_blocking,
        "pinned": label.endswith("pinned nb"),
        "results": results,
        "fastest_peer": fastest,
        "ratio_ferry_vs_fastest_peer": ratio,
        "target_met": None if ratio is None else ratio <= 1.0,
    }


def print_markdown(report: dict[str, Any]) -> None:
    b = report["batch"]
    print(f"### ferry.to_device: per-call time, median of {report['repeat']} rounds x {report['number']} calls")
    print()
    print(f"Batch: {b['tensors']} tensors, {b['bytes'] / 2**20:.2f} MiB ({b['structure']}).")
    print()
    print("| case | ferry (us) | accelerate (us) | lightning (us) | ferry / fastest peer | target met |")
    print("|---|---:|---:|---:|---:|---|")
    for case in report["cases"]:
        cells = []
        for name in WALKERS:
            r = case["results"][name]
            cells.append(f"{r['median_us']:.1f}" if r["median_us"] is not None else r["status"])
        ratio = case["ratio_ferry_vs_fastest_peer"]
        ratio_cell = f"{ratio:.2f} (vs {case['fastest_peer']})" if ratio is not None else "n/a"
        met = {True: "yes", False: "**no**", None: "n/a"}[case["target_met"]]
        print(f"| {case['case']} | {' | '.join(cells)} | {ratio_cell} | {met} |")
    print()
    if any(c["device"].startswith("cuda") for c in report["cases"]):
        print("lightning has no non_blocking flag and always copies to cuda with non_blocking=True.")
        print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=None, help="timed rounds per walker (default 25; quick 3)")
    parser.add_argument("--number", type=int, default=None, help="calls per round (default 100; quick 5)")
    parser.add_argument("--quick", action="store_true", help="a few calls only, to check the script runs")
    _machine.add_common_arguments(parser, device_use="cpu, or cuda to add the GPU cases")
    args = parser.parse_args(argv)

    device = _machine.chosen_device(parser, args)
    repeat = args.repeat or (3 if args.quick else 25)
    number = args.number or (5 if args.quick else 100)
    warmup = 3 if args.quick else 50

    torch.set_num_threads(1)  # the walkers are single-threaded Python; keep the machine quiet around them
    batch = make_batch()
    tensors = leaves(batch)
    cases: list[tuple[str, Any, torch.device, bool]] = [("cpu->cpu", batch, torch.device("cpu"), False)]
    if device.type == "cuda":
        cuda = device
        # The cuda->cuda batch is the cpu batch moved with plain .to() (no walker), so every walker starts equal.
        gpu_batch = {
            "features": {k: v.to(cuda) for k, v in batch["features"].items()},
            "sample": Sample(*(v.to(cuda) for v in batch["sample"])),
            "extras": [v.to(cuda) for v in batch["extras"]],
        }
        cases += [
            ("cuda->cuda", gpu_batch, cuda, False),
            ("cpu->cuda", batch, cuda, False),
            ("cpu->cuda pinned nb", pin(batch), cuda, True),
        ]

    report: dict[str, Any] = {
        "benchmark": "to_device",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": _machine.machine(),
        "versions": _machine.versions("accelerate", "lightning", "safetensors", "numpy"),
        "quick": args.quick,
        "repeat": repeat,
        "number": number,
        "warmup": warmup,
        "unit": "microseconds per call (median over rounds)",
        "batch": {
            "tensors": len(tensors),
            "bytes": sum(t.numel() * t.element_size() for t in tensors),
            "structure": "dict{features: dict of 64 tensors, sample: namedtuple of 5, extras: list of 16}",
        },
        "cases": [bench_case(label, b, d, nb, repeat, number, warmup) for label, b, d, nb in cases],
    }
    print_markdown(report)
    _machine.write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
