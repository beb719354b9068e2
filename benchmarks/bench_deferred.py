"""Peak host memory and time to get a model ready from a checkpoint: plain PyTorch, Accelerate and ferry.

The model is a stack of Linear layers with a tied embedding and a RoPE table (a non-persistent buffer computed in
``__init__``), about ``--size-mib`` of float32 weights, saved once as a ferry file (safetensors layout, with
checksums) and once as a plain safetensors file with the same bytes (``format: pt`` metadata, which Accelerate
requires), which the peers read. Each method runs in a fresh process; "peak" is the process's peak resident memory
(VmHWM, reset through /proc/self/clear_refs once the libraries are imported) minus its resident size then, so it
counts every copy the method makes:

  plain       build the model normally (random init, on the device), read the file (safetensors.torch.load_file)
              and model.load_state_dict(...): the usual way
  accelerate  accelerate.init_empty_weights() to build (parameters on meta; buffers such as the RoPE table are
              built normally, its default include_buffers=False), then
              accelerate.load_checkpoint_and_dispatch(model, file, device_map={"": device}) in its two steps,
              load_checkpoint_in_model and dispatch_model, with model.tie_weights() between them (it leaves a
              tied head on meta otherwise)
  ferry       ferry.deferred_init() to build, then ferry.load_state_dict(model, file, device=device)

Targets (issue 16), on the CPU: ferry's peak at most 1.1x the model's bytes and below both peers. On a GPU (run by
scripts/gpu-check) the host peak should be at most 0.1x the model's bytes.

    python benchmarks/bench_deferred.py                        # 2 GiB on the CPU
    python benchmarks/bench_deferred.py --size-mib 64 --repeat 1 --json deferred.json
"""

from __future__ import annotations

import argparse
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
METHODS = ("plain", "accelerate", "ferry")
WIDTH = 2048  # one Linear layer is WIDTH x WIDTH float32 = 16 MiB


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak() -> bool:
    """Start the process's peak resident size (VmHWM) afresh, so earlier peaks (imports) do not count."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


def _peak_bytes() -> int:
    """The process's peak resident size since :func:`_reset_peak` (else since it started)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _model_class(layers: int) -> Any:
    import torch
    from torch import nn

    class Rope(nn.Module):
        def __init__(self, dim: int = 128, length: int = 4096) -> None:
            super().__init__()
            inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2).float() / dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)
            table = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq)
            self.register_buffer("cos_cached", torch.cat((table, table), -1).cos(), persistent=False)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(4096, WIDTH)
            self.rope = Rope()
            self.layers = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(layers))
            self.head = nn.Linear(WIDTH, 4096, bias=False)
            self.tie_weights()

        def tie_weights(self) -> None:  # what Accelerate calls to tie again after loading
            self.head.weight = self.embed.weight

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            hidden = self.embed(ids)
            for layer in self.layers:
                hidden = torch.relu(layer(hidden))
            return self.head(hidden)

    return Net


def _layers(size_mib: int) -> int:
    return max(1, (size_mib - 32) // 16)  # the tied embedding is 32 MiB


def child(method: str, file: str, size_mib: int, device: str) -> dict[str, float]:
    """Get the model ready with ``method`` in this process: seconds, peak memory above the start, model bytes."""
    import torch

    import ferry

    net = _model_class(_layers(size_mib))
    # Each method's libraries are imported before the baseline: the figures are the model's memory, not code's.
    if method == "accelerate":
        import accelerate.big_modeling
        import accelerate.utils.modeling  # noqa: F401
    if method == "plain":
        import safetensors.torch  # noqa: F401
    if method == "ferry":
        import ferry.checkpoint.file.reader
        import ferry.checkpoint.state_dict
        import ferry.placement.deferred
    # torch imports its meta kernels (and sympy) on the first meta computation: once per process, code not data
    with torch.device("meta"):
        _model_class(1)()
    torch.manual_seed(0)
    _reset_peak()
    start_rss = _rss_bytes()
    started = time.perf_counter()
    if method == "plain":
        from safetensors.torch import load_file

        with torch.device(device):
            model = net()
        model.load_state_dict(load_file(_plain(file), device=device), strict=False)  # the tied head is stored once
    elif method == "accelerate":
        from accelerate import dispatch_model, init_empty_weights, load_checkpoint_in_model

        with init_empty_weights():
            model = net()
        # load_checkpoint_and_dispatch, with the tie made again in between (Accelerate leaves the head on meta)
        load_checkpoint_in_model(model, _plain(file), device_map={"": device})
        model.tie_weights()
        model = dispatch_model(model, device_map={"": device})
    else:
        with ferry.deferred_init():
            model = net()
        ferry.load_state_dict(model, file, device=device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    peak = _peak_bytes() - start_rss
    # First use: every weight read once (a memory-mapped one is only then read from the file and resident).
    with torch.no_grad():
        for tensor in (*model.parameters(), *model.buffers()):
            tensor.float().sum().item()
    used_seconds = time.perf_counter() - started
    used_peak = _peak_bytes() - start_rss
    tensors = {id(t): t for t in (*model.parameters(), *model.buffers())}
    assert not any(t.is_meta for t in tensors.values()), "a tensor was left on meta"
    model_bytes = sum(t.numel() * t.element_size() for t in tensors.values())
    reference = torch.load(file + ".check", weights_only=True)
    assert torch.equal(model.layers[-1].weight[:4, :4].cpu(), reference["last"]), "wrong values"
    assert torch.equal(model.rope.inv_freq.cpu(), reference["inv_freq"]), "RoPE buffer not made"
    return {
        "seconds": seconds,
        "peak_bytes": float(peak),
        "used_seconds": used_seconds,
        "used_peak_bytes": float(used_peak),
        "model_bytes": float(model_bytes),
    }


def _plain(file: str) -> str:
    """The same tensors as a plain safetensors file, with the ``format`` metadata Accelerate requires."""
    return file.replace(".safetensors", ".plain.safetensors")


def _prepare(folder: Path, size_mib: int) -> str:
    import torch

    import ferry

    torch.manual_seed(1)
    model = _model_class(_layers(size_mib))()
    file = str(folder / "model.safetensors")
    ferry.save(model.state_dict(), file)  # ferry stores the tied head once and keeps the tie
    state = {k: v for k, v in model.state_dict().items() if k != "head.weight"}  # safetensors refuses ties
    from safetensors.torch import save_file

    save_file(state, _plain(file), metadata={"format": "pt"})  # what the peers read: Accelerate needs "format"
    torch.save({"last": model.layers[-1].weight[:4, :4].clone(), "inv_freq": model.rope.inv_freq}, file + ".check")
    for written in (file, _plain(file)):  # both files in the page cache: every method reads from memory
        with open(written, "rb") as handle:
            while handle.read(64 << 20):
                pass
    return file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs=3, metavar=("METHOD", "FILE", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        method, file, size = args.child
        print(json.dumps(child(method, file, int(size), args.device)))
        return 0
    import importlib.util

    needs = {"plain": "safetensors", "accelerate": "accelerate", "ferry": "ferry"}
    methods = [method for method in METHODS if importlib.util.find_spec(needs[method]) is not None]
    results: dict[str, list[dict[str, float]]] = {method: [] for method in methods}
    with tempfile.TemporaryDirectory(prefix="ferry-bench-deferred-") as folder:
        file = _prepare(Path(folder), args.size_mib)
        for _ in range(args.repeat):
            for method in methods:
                command = [sys.executable, __file__, "--device", args.device, "--child", method, file]
                out = subprocess.run([*command, str(args.size_mib)], capture_output=True, text=True, check=False)
                if out.returncode:
                    print(out.stderr, file=sys.stderr)
                    raise SystemExit(f"{method} failed")
                results[method].append(json.loads(out.stdout.strip().splitlines()[-1]))
    summary: dict[str, Any] = {"device": args.device, "size_mib": args.size_mib, "repeat": args.repeat}
    for method in METHODS:
        if method not in methods:
            summary[method] = {"status": f"not installed ({needs[method]})"}
    model_bytes = results["ferry"][0]["model_bytes"]
    summary["model_bytes"] = model_bytes
    print(f"model: {model_bytes / 2**20:.0f} MiB on {args.device}; median of {args.repeat}")
    print("ready: the call returned; used: then every weight read once (sum)")
    print(f"{'method':<12}{'ready s':>9}{'peak MiB':>10}{'x model':>9}{'used s':>9}{'peak MiB':>10}{'x model':>9}")
    for method, runs in results.items():
        figures = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        figures["peak_x_model"] = figures["peak_bytes"] / model_bytes
        figures["used_peak_x_model"] = figures["used_peak_bytes"] / model_bytes
        summary[method] = figures
        print(
            f"{method:<12}{figures['seconds']:>9.2f}{figures['peak_bytes'] / 2**20:>10.0f}"
            f"{figures['peak_x_model']:>9.2f}{figures['used_seconds']:>9.2f}"
            f"{figures['used_peak_bytes'] / 2**20:>10.0f}{figures['used_peak_x_model']:>9.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
