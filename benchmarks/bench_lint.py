"""Time `ferry lint` against TorchFix on the same source trees, each pinned to one core.

Usage::

    python benchmarks/bench_lint.py TREE [TREE ...] [--torchfix PATH] [--repeat 3] [--json out.json]
    python benchmarks/bench_lint.py --small-file [--repeat 10]

For each tree (a folder of Python sources, e.g. the unpacked wheels of timm, torchvision and transformers) it counts
the lines of its ``.py`` files, then runs ``python -m ferry lint TREE`` and ``torchfix TREE`` as subprocesses, each
pinned to CPU 0 with ``sched_setaffinity`` (the target is per core), ``--repeat`` times in alternating order; the
median wall time counts. Both tools run their default rules and print their findings to a pipe that is read and
dropped. TorchFix is optional (``--torchfix``, default: ``torchfix`` on PATH); install it in a scratch virtual
environment (``pip install torchfix``), not in ferry's.

``--small-file`` times ``python -m ferry lint`` (and ``ferry lint``, the console script) on one small training script,
the case of a pre-commit hook or an editor: startup and imports dominate, so this is what a lazy ``import ferry``
buys (no torch).

Targets: ferry at least 10x faster than TorchFix on the same tree (issue 4; issue 11: on ``timm/layers`` too, with
startup included), a 100,000-line tree in under 10 s on one core, and one small file in at most 0.3 s wall.
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


#: A small training script with one device bug: what a pre-commit hook lints at a time.
SMALL_FILE = """\
import torch
import torch.nn as nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
optimizer = torch.optim.Adam(model.parameters())
for step in range(100):
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    x.to(device)
    loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def small_file(repeat: int) -> dict[str, Any]:
    """Wall seconds (median and all) of linting :data:`SMALL_FILE` with ``python -m ferry lint`` and ``ferry lint``.

    ferry's modules are byte-compiled first, as ``pip install`` leaves them (an editable install under
    ``PYTHONDONTWRITEBYTECODE=1`` would compile every module from source at each start, ~0.12 s more).
    """
    import ferry

    package = Path(ferry.__file__).parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, capture_output=True)
    with _machine.run_folder(None, prefix="ferry-bench-lint-", needed=1 << 20) as folder:
        target = folder / "train.py"
        target.write_text(SMALL_FILE)
        console = shutil.which("ferry", path=str(Path(sys.executable).parent))
        tools = {"python -m ferry lint": [sys.executable, "-m", "ferry", "lint"]}
        if console:
            tools["ferry lint"] = [console, "lint"]
        row: dict[str, Any] = {"file": "train.py", "lines": SMALL_FILE.count("\n")}
        for name, command in tools.items():
            samples = []
            for _ in range(repeat):
                seconds, code, _ = timed([*command, str(target)])
                if code != 1:
                    raise RuntimeError(f"{name} found nothing in the small file (exit {code})")
                samples.append(seconds)
            row[f"{name} s"] = statistics.median(samples)
            row[f"{name} samples"] = samples
    return {"machine": _machine.machine(), "versions": _machine.versions(), "repeat": repeat, "small_file": row}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", type=Path, help="folders of Python sources")
    parser.add_argument("--small-file", action="store_true", help="time one small file instead (startup included)")
    parser.add_argument("--torchfix", default=shutil.which("torchfix"), help="the torchfix executable (optional)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.small_file:
        report = small_file(args.repeat)
        row = report["small_file"]
        for key, value in row.items():
            if key.endswith(" s"):
                print(f"{key.removesuffix(' s')}: {value:.3f} s, median of {args.repeat}, {row['lines']}-line file")
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
        return
    if not args.trees:
        parser.error("name at least one TREE, or pass --small-file")
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
