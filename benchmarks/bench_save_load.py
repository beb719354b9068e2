"""Save and load a 1 GiB state_dict with ferry, torch and safetensors, against a raw-bytes baseline, in one run.

The state_dict is a 4-layer transformer in float32 (embedding [16d, d]; per layer a fused qkv [3d, d], out [d, d],
fc1 [4d, d], fc2 [d, 4d] and two LayerNorms; a final LayerNorm): 35 tensors, d picked so the total is --size-gib
(d=2048 for 1 GiB). Methods:

  raw               the same bytes with os.write, fsync'd; read back with a plain read (the disk's ceiling)
  ferry             ferry.save (atomic, fsync'd, checksummed) / ferry.load (verifies the checksums)
  ferry-noverify    (load only) ferry's reader on the same file with checksum verification switched off: what the
                    checksums cost is ferry / ferry-noverify - 1
  torch             torch.save / torch.load(weights_only=True): NOT fsync'd, the data may still be in the page cache
  torch+fsync       torch.save into an open file, then flush + os.fsync: the apples-to-apples durable save
  safetensors       safetensors.torch.save_file / load_file: NOT fsync'd. On the CPU load_file maps the file
                    (copy-on-write), so its tensors alias the page cache: nothing is copied, but a later in-place
                    change to the file shows through them (a truncation makes reading them crash with SIGBUS)
  safetensors+fsync save_file, then os.fsync of the file
  safetensors+clone (load only) load_file, then clone() of every tensor: tensors independent of the file, as
                    ferry.load and torch.load return them

Before each timed save, os.sync() flushes what earlier steps left dirty, so no save pays for another's writes.
Before each timed load the file to load is evicted from the page cache (--cache cold, the default:
posix_fadvise(DONTNEED) on the synced file, which needs no root and leaves torch's own libraries cached), so loads
read from the disk. --cache drop drops the whole page cache instead (echo 3 > /proc/sys/vm/drop_caches, root only;
the next load then also re-reads the shared libraries it runs), --cache warm evicts nothing. Whether the eviction
took is checked with mincore(2) and reported: where it did not (some sandboxes ignore it), loads are warm-cache and
the report says WARM. A load is timed until every byte is in memory on --device: mmap-backed results (safetensors on
the CPU) have every page touched inside the timed window, so a lazy loader is not credited for reads it has not done
yet. Each method runs --warmup uncounted rounds (default 1), then --repeat timed ones (default 3), round-robin, in
reverse order every other round (a method inherits the page cache and freed memory its predecessor left); the median
counts.

Targets: ferry's durable save reaches at least 80 % of raw's throughput and takes at most half of torch.save's time;
ferry.load takes no longer than safetensors' load_file (cold and warm cache); verifying the checksums adds at most
5 % to ferry.load.

    python benchmarks/bench_save_load.py                       # 1 GiB, loads onto cuda when a GPU is present
    python benchmarks/bench_save_load.py --size-gib 4 --dir /data/tmp --json save_load.json
    python benchmarks/bench_save_load.py --quick               # ~8 MiB, for the tests
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import gc
import math
import mmap
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _machine
import torch

SAVE_METHODS = ("raw", "ferry", "torch", "torch+fsync", "safetensors", "safetensors+fsync")
LOAD_METHODS = ("raw", "ferry", "ferry-noverify", "torch", "safetensors", "safetensors+clone")
#: Load methods that read the file another method saved.
READS_FILE_OF = {"ferry-noverify": "ferry", "safetensors+clone": "safetensors"}
LAYERS = 4
CACHE_WORDS = {
    "cold": "cold (file evicted with posix_fadvise DONTNEED before each load)",
    "drop": "cold (whole page cache dropped before each load)",
    "warm": "warm (nothing evicted)",
}


def make_state_dict(size_bytes: int, seed: int = 0) -> dict[str, torch.Tensor]:
    # 16d^2 (embedding) + LAYERS * 12d^2 (attention + MLP) float32 elements, plus small LayerNorm vectors.
    d = max(64, round(math.sqrt(size_bytes / 4 / (16 + 12 * LAYERS)) / 64) * 64)
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen)

    sd = {"embed.weight": randn(16 * d, d)}
    for i in range(LAYERS):
        p = f"layers.{i}."
        sd |= {
            p + "attn.qkv.weight": randn(3 * d, d),
            p + "attn.out.weight": randn(d, d),
            p + "ln1.weight": torch.ones(d),
            p + "ln1.bias": torch.zeros(d),
            p + "mlp.fc1.weight": randn(4 * d, d),
            p + "mlp.fc2.weight": randn(d, 4 * d),
            p + "ln2.weight": torch.ones(d),
            p + "ln2.bias": torch.zeros(d),
        }
    sd |= {"norm.weight": torch.ones(d), "norm.bias": torch.zeros(d)}
    return sd


def nbytes(sd: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in sd.values())


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---- the methods: save(sd, path) and load(path, device) -> something holding every byte on device -------------


def raw_save(sd: dict[str, torch.Tensor], path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for t in sd.values():
            view = memoryview(t.numpy()).cast("B")
            while view:
                view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def raw_load(path: Path, device: torch.device) -> Any:
    # torch.empty, not bytearray: a bytearray is zero-filled first, which costs as much as a warm read.
    data = torch.empty(path.stat().st_size, dtype=torch.uint8)
    view = memoryview(data.numpy())
    with open(path, "rb", buffering=0) as f:
        while view:
            view = view[f.readinto(view) :]
    return data if device.type == "cpu" else data.to(device)


def ferry_load_noverify(path: Path, device: torch.device) -> Any:
    """ferry's reader with checksum verification switched off (internal API: for measuring what it costs)."""
    import dataclasses

    from ferry.checkpoint.file import reader

    with open(path, "rb") as f:
        header = reader.read_header(f, path, os.fstat(f.fileno()).st_size)
        tensors = reader.read_tensors(f, dataclasses.replace(header, checksums=None, algorithm=None))
    return {name: t.to(device) for name, t in tensors.items()} if device.type != "cpu" else tensors


def torch_save_fsync(sd: dict[str, torch.Tensor], path: Path) -> None:
    with open(path, "wb") as f:
        torch.save(sd, f)
        f.flush()
        os.fsync(f.fileno())


def methods() -> tuple[dict[str, Callable[..., Any] | str], dict[str, Callable[..., Any] | str]]:
    """(save methods, load methods); a method that cannot run is a string saying why."""
    saves: dict[str, Callable[..., Any] | str] = {"raw": raw_save}
    loads: dict[str, Callable[..., Any] | str] = {"raw": raw_load}
    try:
        import ferry

        saves["ferry"] = ferry.save
        loads["ferry"] = lambda path, device: ferry.load(path, device=str(device))
        loads["ferry-noverify"] = ferry_load_noverify
    except ImportError as err:
        saves["ferry"] = loads["ferry"] = loads["ferry-noverify"] = f"not installed ({err})"
    saves["torch"] = torch.save
    saves["torch+fsync"] = torch_save_fsync
    loads["torch"] = lambda path, device: torch.load(path, map_location=device, weights_only=True)
    try:
        from safetensors.torch import load_file, save_file

        def st_save_fsync(sd: dict[str, torch.Tensor], path: Path) -> None:
            save_file(sd, path)
            fsync_path(path)

        def st_load_clone(path: Path, device: torch.device) -> dict[str, torch.Tensor]:
            return {name: t.clone() for name, t in load_file(path, device=str(device)).items()}

        saves["safetensors"] = save_file
        saves["safetensors+fsync"] = st_save_fsync
        loads["safetensors"] = lambda path, device: load_file(path, device=str(device))
        loads["safetensors+clone"] = st_load_clone
    except ImportError:
        saves["safetensors"] = saves["safetensors+fsync"] = "not installed"
        loads["safetensors"] = loads["safetensors+clone"] = "not installed"
    return saves, loads


# ---- timing -------------------------------------------------------------------------------------------------


def resident_fraction(path: Path) -> float | None:
    """Share of ``path``'s pages in the page cache (mincore on a mapping of it); None where that cannot be asked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    except (OSError, AttributeError):
        return None
    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            return None
        try:
            pages = -(-size // mmap.PAGESIZE)
            vec = ctypes.create_string_buffer(pages)
            if libc.mincore(addr, size, vec) != 0:
                return None
            return sum(b & 1 for b in vec.raw) / pages
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def evict(path: Path, cache: str) -> float | None:
    """Evict ``path`` from the page cache as ``cache`` says; return the share of it still cached (None: unknown)."""
    if cache != "warm":
        os.sync()  # evicting works on clean pages only
    if cache == "drop":
        with contextlib.suppress(OSError), open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    elif cache == "cold":
        fd = os.open(path, os.O_RDONLY)
        try:
            with contextlib.suppress(OSError):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return resident_fraction(path)


def cache_words(cache: str, still_cached: list[float | None]) -> str:
    known = [f for f in still_cached if f is not None]
    if cache == "warm":
        return CACHE_WORDS[cache]
    if not known:
        return f"{CACHE_WORDS[cache]}; not confirmed (mincore unavailable)"
    if max(known) <= 0.05:
        return f"{CACHE_WORDS[cache]}; confirmed with mincore"
    return f"WARM: --cache {cache} left up to {max(known):.0%} of the file cached (mincore), loads read from memory"


def leaves(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in leaves(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in leaves(v)]
    return []


def touch(result: Any, device: torch.device) -> None:
    """Make every byte of a load's result resident: fault in each page of CPU tensors, wait for the GPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        return
    for t in leaves(result):
        flat = t.reshape(-1).view(torch.uint8) if t.numel() else t
        if flat.numel():
            flat[::4096].sum()  # one byte per 4 KiB page


def same_values(loaded: Any, sd: dict[str, torch.Tensor]) -> bool:
    if isinstance(loaded, torch.Tensor):  # raw: the concatenated bytes
        got = loaded.cpu()
        offset = 0
        for t in sd.values():
            n = t.numel() * t.element_size()
            if not torch.equal(got[offset : offset + n], t.reshape(-1).view(torch.uint8)):
                return False
            offset += n
        return offset == got.numel()
    return loaded.keys() == sd.keys() and all(torch.equal(loaded[k].cpu(), v) for k, v in sd.items())


def in_turn(methods: dict[str, Any], round_: int) -> list[str]:
    """The methods in the order of round ``round_``: as listed, reversed every other round."""
    names = list(methods)
    return names if round_ % 2 == 0 else names[::-1]


def run(
    sd: dict[str, torch.Tensor], folder: Path, device: torch.device, repeat: int, warmup: int, cache: str
) -> dict[str, Any]:
    saves, loads = methods()
    size = nbytes(sd)
    save_times: dict[str, list[float]] = {m: [] for m in SAVE_METHODS if callable(saves[m])}
    load_times: dict[str, list[float]] = {m: [] for m in LOAD_METHODS if callable(loads[m])}
    errors: dict[str, str] = {}
    file_sizes: dict[str, int] = {}
    still_cached: list[float | None] = []

    def path_for(method: str) -> Path:
        return folder / f"{method.replace('+', '-')}.bin"

    # Round-robin: each round saves with every method, so drift hits all alike, in reverse order every other round
    # (a method inherits the page cache and freed memory its predecessor left); the first `warmup` rounds are not
    # counted (the first writes of a run pay for allocating blocks and warming caches).
    for round_ in range(warmup + repeat):
        for m in in_turn(save_times, round_):
            path = path_for(m)
            path.unlink(missing_ok=True)
            gc.collect()
            os.sync()
            start = time.perf_counter()
            try:
                saves[m](sd, path)  # type: ignore[operator]
            except Exception as err:
                errors[f"save {m}"] = f"{type(err).__name__}: {err}"[:300]
                del save_times[m]
                continue
            if round_ >= warmup:
                save_times[m].append(time.perf_counter() - start)
            file_sizes[m] = path.stat().st_size
    os.sync()

    # Each loader reads the file its own saver wrote (READS_FILE_OF: or another's); the +fsync variants wrote the
    # same bytes and are not reloaded.
    def saved_by(method: str) -> str:
        return READS_FILE_OF.get(method, method)

    for m in list(load_times):
        if saved_by(m) not in save_times:
            errors.setdefault(f"load {m}", "nothing to load: its save failed")
            del load_times[m]
    verified: dict[str, bool] = {}
    for round_ in range(warmup + repeat):
        for m in in_turn(load_times, round_):
            gc.collect()
            still_cached.append(evict(path_for(saved_by(m)), cache))
            start = time.perf_counter()
            try:
                result = loads[m](path_for(saved_by(m)), device)  # type: ignore[operator]
                touch(result, device)
            except Exception as err:
                errors[f"load {m}"] = f"{type(err).__name__}: {err}"[:300]
                del load_times[m]
                continue
            if round_ >= warmup:
                load_times[m].append(time.perf_counter() - start)
            if m not in verified:
                verified[m] = same_values(result, sd)
            del result

    def summarize(times: dict[str, list[float]], base: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for m, ts in times.items():
            med = statistics.median(ts)
            out[m] = {
                "median_s": med,
                "min_s": min(ts),
                "max_s": max(ts),
                "samples_s": ts,
                "gb_per_s": size / med / 1e9,
            }
        for m in out:
            out[m]["vs_torch"] = out[m]["median_s"] / out[base]["median_s"] if base in out else None
        return out

    save = summarize(save_times, "torch")
    load = summarize(load_times, "torch")
    for m, s in save.items():
        s["durable"] = m in ("raw", "ferry") or m.endswith("+fsync")
        s["file_bytes"] = file_sizes.get(m)
    for m, s in load.items():
        s["values_equal"] = verified.get(m)

    def ratio(a: str, b: str, table: dict[str, dict[str, Any]]) -> float | None:
        return table[a]["median_s"] / table[b]["median_s"] if a in table and b in table else None

    ratios = {
        "ferry_save_vs_torch_save": ratio("ferry", "torch", save),
        "ferry_save_vs_torch_save_fsync": ratio("ferry", "torch+fsync", save),
        "ferry_save_vs_raw": ratio("ferry", "raw", save),
        "ferry_load_vs_torch_load": ratio("ferry", "torch", load),
        "ferry_load_vs_safetensors_load": ratio("ferry", "safetensors", load),
        "ferry_load_vs_safetensors_clone": ratio("ferry", "safetensors+clone", load),
        "ferry_load_vs_noverify": ratio("ferry", "ferry-noverify", load),
    }

    def at_most(value: float | None, bound: float) -> bool | None:
        return None if value is None else value <= bound

    return {
        "save": save,
        "load": load,
        "ratios": ratios,
        "target": (
            "ferry's durable save: >= 80 % of raw's throughput and <= 0.5x torch.save's time; ferry.load no slower "
            "than safetensors load_file; checksum verification adds <= 5 % to ferry.load"
        ),
        "targets": {
            # throughput >= 80 % of raw  <=>  time <= raw's time / 0.8
            "save_at_least_80pct_of_raw_throughput": at_most(ratios["ferry_save_vs_raw"], 1 / 0.8),
            "save_at_least_2x_torch_save": at_most(ratios["ferry_save_vs_torch_save"], 0.5),
            "load_not_slower_than_safetensors": at_most(ratios["ferry_load_vs_safetensors_load"], 1.0),
            "checksums_add_at_most_5pct": at_most(ratios["ferry_load_vs_noverify"], 1.05),
        },
        "target_met_vs_torch_save": at_most(ratios["ferry_save_vs_torch_save"], 1.0),
        "target_met_vs_torch_save_fsync": at_most(ratios["ferry_save_vs_torch_save_fsync"], 1.0),
        "load_cache": cache_words(cache, still_cached),
        "cached_fraction_before_load_max": max((f for f in still_cached if f is not None), default=None),
        "errors": errors,
    }


# ---- report -------------------------------------------------------------------------------------------------


def filesystem(folder: Path) -> str:
    """The mount holding ``folder``: device and type, from /proc/mounts (longest matching mount point)."""
    best = ("?", "?", "")
    try:
        resolved = str(folder.resolve())
        for line in Path("/proc/mounts").read_text().splitlines():
            dev, mnt, fstype = line.split()[:3]
            if (resolved == mnt or resolved.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[2]):
                best = (dev, fstype, mnt)
    except (OSError, ValueError):
        pass
    return f"{best[0]} ({best[1]}) on {best[2]}"


def machine(folder: Path) -> dict[str, Any]:
    return {**_machine.machine(), "filesystem": filesystem(folder)}


def print_markdown(report: dict[str, Any]) -> None:
    r = report["results"]
    print(
        f"### save/load: {report['bytes'] / 2**30:.3f} GiB state_dict ({report['tensors']} float32 tensors), "
        f"median of {report['repeat']}, loads onto {report['device']}"
    )
    print()
    print(f"Folder: {report['machine']['filesystem']}. Loads: {r['load_cache']}.")
    print()
    print("| save | durable | seconds | GB/s | vs torch.save |")
    print("|---|---|---:|---:|---:|")
    for m, s in r["save"].items():
        vs = f"{s['vs_torch']:.2f}" if s["vs_torch"] is not None else "n/a"
        print(f"| {m} | {'yes' if s['durable'] else 'no'} | {s['median_s']:.3f} | {s['gb_per_s']:.2f} | {vs} |")
    print()
    print("| load | seconds | GB/s | vs torch.load | values equal |")
    print("|---|---:|---:|---:|---|")
    for m, s in r["load"].items():
        vs = f"{s['vs_torch']:.2f}" if s["vs_torch"] is not None else "n/a"
        print(f"| {m} | {s['median_s']:.3f} | {s['gb_per_s']:.2f} | {vs} | {s['values_equal']} |")
    print()
    ratios = r["ratios"]

    def fmt(x: float | None) -> str:
        return f"{x:.2f}" if x is not None else "n/a"

    def met(x: bool | None) -> str:
        return {True: "met", False: "**not met**", None: "n/a"}[x]

    targets = r["targets"]
    throughput = 1 / ratios["ferry_save_vs_raw"] if ratios["ferry_save_vs_raw"] else None
    overhead = ratios["ferry_load_vs_noverify"] - 1 if ratios["ferry_load_vs_noverify"] is not None else None
    print(
        f"Targets: ferry.save throughput / raw = {fmt(throughput)} (>= 0.80: "
        f"{met(targets['save_at_least_80pct_of_raw_throughput'])}); ferry.save / torch.save = "
        f"{fmt(ratios['ferry_save_vs_torch_save'])} (<= 0.50: {met(targets['save_at_least_2x_torch_save'])}); "
        f"ferry.load / safetensors load_file = {fmt(ratios['ferry_load_vs_safetensors_load'])} (<= 1: "
        f"{met(targets['load_not_slower_than_safetensors'])}); checksum verification adds "
        f"{'n/a' if overhead is None else f'{overhead:.1%}'} to ferry.load (<= 5 %: "
        f"{met(targets['checksums_add_at_most_5pct'])}). Also: ferry.save / (torch.save + fsync) = "
        f"{fmt(ratios['ferry_save_vs_torch_save_fsync'])}; ferry.load / torch.load = "
        f"{fmt(ratios['ferry_load_vs_torch_load'])}; ferry.load / (load_file + clone) = "
        f"{fmt(ratios['ferry_load_vs_safetensors_clone'])}."
    )
    for what, err in r["errors"].items():
        print(f"- {what}: {err}")
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    _machine.add_size_arguments(parser, what="state_dict")
    parser.add_argument(
        "--cache",
        choices=tuple(CACHE_WORDS),
        default="cold",
        help="before each load: cold evicts the file (default), drop drops the whole page cache (root), warm nothing",
    )
    _machine.add_common_arguments(parser, device_use="load target: cpu or cuda")
    args = parser.parse_args(argv)

    device = _machine.chosen_device(parser, args)

    if device.type == "cuda":
        torch.zeros(1, device=device)  # create the CUDA context now, not inside the first timed load
    size_bytes = int((8 / 1024 if args.quick else args.size_gib) * 2**30)
    sd = make_state_dict(size_bytes)
    with _machine.run_folder(args.dir, prefix="bench-save-load-", needed=3 * nbytes(sd)) as folder:
        results = run(sd, folder, device, args.repeat, args.warmup, cache=args.cache)
        report = {
            "benchmark": "save_load",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": machine(folder),
            "versions": _machine.versions("safetensors", "numpy", "xxhash"),
            "quick": args.quick,
            "device": str(device),
            "repeat": args.repeat,
            "warmup": args.warmup,
            "bytes": nbytes(sd),
            "tensors": len(sd),
            "results": results,
        }
    print_markdown(report)
    _machine.write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
