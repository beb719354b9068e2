"""The benchmark scripts and scripts/gpu-check run end to end (quick sizes, CPU) and write the figures they promise."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from _support import REPO, one_launch_at_a_time

BENCHMARKS = REPO / "benchmarks"
GPU_CHECK = REPO / "scripts" / "gpu-check"

# peer name in the JSON -> module that must import for it to have figures
TO_DEVICE_PEERS = [("accelerate", "accelerate"), ("lightning", "lightning")]
SAVE_METHODS = ["raw", "ferry", "torch", "torch+fsync", "safetensors", "safetensors+fsync"]
LOAD_METHODS = ["raw", "ferry", "ferry-noverify", "torch", "safetensors", "safetensors+clone"]
CHECKPOINTER_METHODS = ["raw", "torch.save", "ferry.save", "ckpt sync", "ckpt async"]
SHARDED_METHODS = ["ferry 2 ranks", "ferry 1 rank", "dcp 2 ranks"]
GPU_CHECK_FILES = [
    "bench.json",
    "bench.log",
    "ddp-check.json",
    "ddp-check.log",
    "gpu-tests.txt",
    "machine.txt",
    "summary.md",
]
GPU_CHECK_MAX_FILES = 8  # what the device machine brings back from $OUT

pytestmark = pytest.mark.slow


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def run_script(
    args: list[str], *, timeout: float = 90, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env, check=False)


def leftovers(*prefixes: str) -> set[str]:
    """Run folders the benchmarks made under the repo's build/ (their default ``--dir``) that are still there."""
    build = REPO / "build"
    return {p.name for p in build.iterdir() if p.name.startswith(prefixes)} if build.is_dir() else set()


def check_to_device(report: dict[str, Any]) -> None:
    """benchmarks/bench_to_device.py --quick on the CPU: ferry and each installed peer timed, the ratio reported."""
    assert ["cpu->cpu"] == [case["case"] for case in report["cases"]]
    case = report["cases"][0]
    assert "ok" == case["results"]["ferry"]["status"]
    assert case["results"]["ferry"]["median_us"] > 0
    for name, module in TO_DEVICE_PEERS:
        if not installed(module):
            assert "not installed" == case["results"][name]["status"]
            continue
        assert "ok" == case["results"][name]["status"]
        assert case["results"][name]["median_us"] > 0
    if any(installed(module) for _, module in TO_DEVICE_PEERS):
        assert case["ratio_ferry_vs_fastest_peer"] > 0
        assert isinstance(case["target_met"], bool)
    assert 85 == report["batch"]["tensors"]
    assert report["quick"]


def check_save_load(report: dict[str, Any]) -> None:
    """benchmarks/bench_save_load.py --quick: every method saved and loaded ~8 MiB, the loads gave the values back."""
    results = report["results"]
    expected_saves = [m for m in SAVE_METHODS if installed("safetensors") or not m.startswith("safetensors")]
    expected_loads = [m for m in LOAD_METHODS if installed("safetensors") or not m.startswith("safetensors")]
    assert {} == results["errors"]
    assert expected_saves == list(results["save"])
    assert expected_loads == list(results["load"])
    for figures in [*results["save"].values(), *results["load"].values()]:
        assert figures["median_s"] > 0
        assert figures["gb_per_s"] > 0
    assert all(figures["values_equal"] for figures in results["load"].values())
    assert [True, True, False, True] == [
        results["save"][m]["durable"] for m in ["raw", "ferry", "torch", "torch+fsync"]
    ]
    assert results["ratios"]["ferry_save_vs_torch_save"] > 0
    assert results["ratios"]["ferry_save_vs_torch_save_fsync"] > 0
    assert results["ratios"]["ferry_load_vs_noverify"] > 0
    assert all(isinstance(met, bool) for met in results["targets"].values())
    assert 8 * 2**20 <= report["bytes"] < 12 * 2**20
    assert report["quick"]


def check_checkpointer(report: dict[str, Any]) -> None:
    """benchmarks/bench_checkpointer.py --quick: sync and async checkpoints timed, async kept the values at save."""
    results = report["results"]
    assert {} == report["errors"]
    assert CHECKPOINTER_METHODS == list(results["methods"])
    for figures in results["methods"].values():
        assert figures["median_s"] > 0
        assert len(figures["samples_s"]) == report["repeat"]
    # the async checkpoint holds the values at save time although the state changed right after save() returned
    assert results["methods"]["ckpt async"]["values_equal"] is True
    assert results["methods"]["ckpt sync"]["values_equal"] is True
    assert results["methods"]["ckpt async"]["commit_median_s"] >= results["methods"]["ckpt async"]["median_s"]
    assert results["ratios"]["async_block_vs_sync"] > 0
    assert all(isinstance(met, bool) for met in results["targets"].values())
    assert 8 * 2**20 <= report["bytes"] < 12 * 2**20
    assert report["quick"]


@pytest.mark.launches
def test_bench_sharded_quick(tmp_path: Path) -> None:
    folder = tmp_path / "bench"
    folder.mkdir()
    out = tmp_path / "sharded.json"
    script = str(BENCHMARKS / "bench_sharded.py")
    options = ["--quick", "--device", "cpu", "--repeat", "1", "--dir", str(folder), "--json", str(out)]
    with one_launch_at_a_time():  # it runs 2 ranks
        proc = run_script([sys.executable, script, *options], timeout=180)

    assert 0 == proc.returncode, proc.stderr
    report = json.loads(out.read_text())
    assert {} == report["errors"]
    assert SHARDED_METHODS == list(report["results"]["methods"])
    for figures in report["results"]["methods"].values():
        assert figures["median_s"] > 0
        assert 1 == len(figures["samples_s"])
        assert figures["values_equal"] is True
    assert [2, 1, 2] == [figures["ranks"] for figures in report["results"]["methods"].values()]
    assert all(ratio > 0 for ratio in report["results"]["ratios"].values())
    assert 4 * 2**20 <= report["bytes"] < 12 * 2**20
    assert [] == list(folder.iterdir())


def gpu_check_env() -> dict[str, str]:
    # PYTHON: the interpreter running these tests has torch; the machine's python3 may not.
    return {**os.environ, "PYTHON": sys.executable}


@pytest.mark.launches
def test_gpu_check_allow_cpu_writes_its_files_and_the_benchmarks_figures(tmp_path: Path) -> None:
    # The benchmarks' quick runs are checked here, inside the gpu-check run that makes them (each costs ~10 s of CPU)
    out = tmp_path / "gpu-results"
    scratch = ("bench-save-load-", "bench-checkpointer-")
    before = leftovers(*scratch)
    with one_launch_at_a_time():  # its DDP check runs 2 ranks
        proc = run_script(["bash", str(GPU_CHECK), "--allow-cpu", str(out)], timeout=480, env=gpu_check_env())

    ddp_log = out / "ddp-check.log"
    assert 0 == proc.returncode, proc.stdout + proc.stderr + (ddp_log.read_text()[-4000:] if ddp_log.exists() else "")
    assert GPU_CHECK_FILES == sorted(p.name for p in out.iterdir())
    assert len(GPU_CHECK_FILES) <= GPU_CHECK_MAX_FILES
    figures = json.loads((out / "bench.json").read_text())
    assert ["bench_to_device", "bench_save_load", "bench_checkpointer", "bench_deferred"] == list(figures)
    deferred = figures["bench_deferred"]
    assert "cpu" == deferred["device"]
    assert deferred["ferry"]["used_peak_bytes"] < deferred["plain"]["used_peak_bytes"]
    if not installed("accelerate"):
        assert deferred["accelerate"]["status"].startswith("not installed")
    check_to_device(figures["bench_to_device"])
    check_save_load(figures["bench_save_load"])
    check_checkpointer(figures["bench_checkpointer"])
    assert 2 == figures["bench_checkpointer"]["repeat"]
    assert before == leftovers(*scratch)  # each benchmark removed its run folder under build/
    summary = (out / "summary.md").read_text()
    assert "GPU tests: ok" in summary
    ddp = json.loads((out / "ddp-check.json").read_text())
    assert ddp["ok"], ddp
    assert all(ddp["checks"].values()), ddp
    assert "DDP check (2 rank(s), gloo): ok" in summary
    assert "### ferry.to_device" in summary
    assert "### save/load" in summary
    assert "### Checkpointer" in summary
    assert "mode: cpu --quick" in (out / "machine.txt").read_text()
    assert "gpu-check finished" in proc.stdout


@pytest.mark.skipif(torch.cuda.device_count() > 0, reason="checks the refusal on a machine without a GPU")
def test_gpu_check_refuses_without_gpu(tmp_path: Path) -> None:
    out = tmp_path / "gpu-results"
    proc = run_script(["bash", str(GPU_CHECK), str(out)], env=gpu_check_env())

    assert 2 == proc.returncode
    assert "--allow-cpu" in proc.stderr
    assert not out.exists()


def test_gpu_check_rejects_unknown_option() -> None:
    proc = run_script(["bash", str(GPU_CHECK), "--frobnicate"], env=gpu_check_env())

    assert 2 == proc.returncode
    assert "unknown option --frobnicate" in proc.stderr


def test_gpu_check_is_executable() -> None:
    assert os.access(GPU_CHECK, os.X_OK)


def test_bench_sanitize_quick() -> None:
    proc = run_script([sys.executable, str(BENCHMARKS / "bench_sanitize.py"), "--quick"])
    assert 0 == proc.returncode, proc.stderr
    assert "transformer" in proc.stdout
    assert "per operation" in proc.stdout


def test_bench_lint_times_ferry_on_a_tree(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "train.py").write_text("import torch\nx = torch.randn(2)\nx.to('cpu')\n")
    (tree / "clean.py").write_text("import torch\nprint(torch.ones(1))\n")
    out = tmp_path / "lint.json"
    proc = run_script(
        [sys.executable, str(BENCHMARKS / "bench_lint.py"), str(tree), "--torchfix", "", "--repeat", "1",
         "--json", str(out)]
    )  # fmt: skip
    assert 0 == proc.returncode, proc.stderr
    row = json.loads(out.read_text())["results"][0]
    assert (2, 5) == (row["files"], row["lines"])
    assert row["ferry_s"] > 0
    assert 1 <= row["ferry_output_lines"]
    assert "torchfix_s" not in row


def test_bench_lint_times_one_small_file(tmp_path: Path) -> None:
    out = tmp_path / "small.json"
    proc = run_script(
        [sys.executable, str(BENCHMARKS / "bench_lint.py"), "--small-file", "--repeat", "1", "--json", str(out)]
    )
    assert 0 == proc.returncode, proc.stderr
    row = json.loads(out.read_text())["small_file"]
    assert row["python -m ferry lint s"] > 0
    assert "python -m ferry lint" in proc.stdout


def test_bench_deferred_quick(tmp_path: Path) -> None:
    """benchmarks/bench_deferred.py on a small model: each method made the model ready, with the file's values."""
    out = tmp_path / "deferred.json"
    script = str(BENCHMARKS / "bench_deferred.py")
    proc = run_script([sys.executable, script, "--size-mib", "48", "--repeat", "1", "--json", str(out)], timeout=180)
    assert 0 == proc.returncode, proc.stderr
    report = json.loads(out.read_text())
    assert 40 * 2**20 < report["model_bytes"] < 60 * 2**20
    for method in ("plain", "accelerate", "ferry"):
        if method == "accelerate" and not installed("accelerate"):
            assert report[method]["status"].startswith("not installed")
            continue
        assert report[method]["seconds"] > 0
        assert report[method]["used_peak_bytes"] > 0
    # plain PyTorch holds a built model and the loaded state at once; ferry reads into the model's own memory
    assert report["plain"]["used_peak_bytes"] > report["ferry"]["used_peak_bytes"]
