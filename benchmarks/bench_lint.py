"""Time `ferry lint` against TorchFix on the same source trees, each pinned to one core.

Usage::

    python benchmarks/bench_lint.py TREE [TREE ...] [--torchfix PATH] [--repeat 3] [--json out.json]

For each tree (a folder of Python sources, e.g. the unpacked wheels of timm, torchvision and transformers) it counts
the lines of its ``.py`` files, then runs ``python -m ferry lint TREE`` and ``torchfix TREE`` as subprocesses, each
pinned to CPU 0 with ``sched_setaffinity`` (the target is per core), ``--repeat`` times in alternating order; the
median wall time counts. Both tools run their default rules and print their findings to a pipe that is read and
dropped. TorchFix is optional (``--torchfix``, default: ``torchfix`` on PATH); install it in a scratch virtual
environment (``pip install torchfix``), not in ferry's.

Targets (issue 4): ferry at least 10x faster than TorchFix on the same tree, and a 100,000-line tree in under 10 s on
one core.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _machine


def count_lines(tree: Path) -> tuple[int, int]:
    files = [p for p in tree.rglob("*.py") if p.is_file()]
    lines = 0
    for path in files:
        with open(path, "rb") as handle:
            lines += sum(1 for _ in handle)
    return len(files), lines


def pin_to_cpu0() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})


def timed(command: list[str]) -> tuple[float, int, int]:
    """Seconds, exit code and the number of output lines of one run."""
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, preexec_fn=pin_to_cpu0, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{command[0]} failed with exit code {done.returncode}: {done.stderr[-2000:]}")
    return elapsed, done.returncode, len(done.stdout.splitlines())


def run(trees: list[Path], torchfix: str | None, repeat: int) -> dict[str, Any]:
    tools = {"ferry": [sys.executable, "-m", "ferry", "lint"]}
    if torchfix:
        tools["torchfix"] = [torchfix]
    results: list[dict[str, Any]] = []
    for tree in trees:
        files, lines = count_lines(tree)
        times: dict[str, list[float]] = {name: [] for name in tools}
        findings: dict[str, int] = {}
        for round_ in range(repeat):
            order = list(tools) if round_ % 2 == 0 else list(tools)[::-1]
            for name in order:
                seconds, _, out_lines = timed([*tools[name], str(tree)])
                times[name].append(seconds)
                findings[name] = out_lines
        row: dict[str, Any] = {"tree": str(tree), "files": files, "lines": lines}
        for name in tools:
            row[f"{name}_s"] = statistics.median(times[name])
            row[f"{name}_samples"] = times[name]
            row[f"{name}_output_lines"] = findings[name]
        row["ferry_lines_per_s"] = lines / row["ferry_s"]
        row["ferry_s_per_100k_lines"] = row["ferry_s"] * 100_000 / lines
        if torchfix:
            row["torchfix_time_over_ferry"] = row["torchfix_s"] / row["ferry_s"]
        results.append(row)
    return {"machine": _machine.machine(), "versions": _machine.versions(), "repeat": repeat, "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path, help="folders of Python sources")
    parser.add_argument("--torchfix", default=shutil.which("torchfix"), help="the torchfix executable (optional)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    report = run(args.trees, args.torchfix, args.repeat)
    for row in report["results"]:
        line = (
            f"{row['tree']}: {row['files']} files, {row['lines']} lines; ferry {row['ferry_s']:.2f} s "
            f"({row['ferry_s_per_100k_lines']:.2f} s per 100k lines)"
        )
        if "torchfix_s" in row:
            line += f"; torchfix {row['torchfix_s']:.2f} s; torchfix / ferry {row['torchfix_time_over_ferry']:.1f}x"
        print(line)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
