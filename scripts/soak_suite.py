"""Run the whole test suite N times back to back beside a busy process; count the runs that did not pass.

Usage::

    python scripts/soak_suite.py [--runs 3] [--json out.json] [-- extra pytest arguments]

One CPU-bound process (``while True: pass``) runs beside the suite for the whole soak, as another job on a shared
machine does. Each run is ``python -m pytest -q -p no:randomly`` (the README's test command, with pytest's own
options), in a fresh interpreter. Target (issue 12): 0 failed runs of 3.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    results = []
    try:
        for run in range(1, args.runs + 1):
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *args.pytest_args],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            )
            seconds = time.monotonic() - started
            summary = (done.stdout.strip().splitlines() or [""])[-1]
            failed = re.findall(r"^(?:FAILED|ERROR) \S+", done.stdout, re.MULTILINE)
            results.append(
                {"run": run, "exit": done.returncode, "seconds": round(seconds), "summary": summary, "failed": failed}
            )
            print(f"run {run}: exit {done.returncode} in {seconds:.0f} s: {summary}", flush=True)
            for line in failed:
                print(f"  {line}", flush=True)
    finally:
        busy.kill()
        busy.wait()
    bad = sum(r["exit"] != 0 for r in results)
    print(f"{args.runs} runs beside a busy process (cores: {os.cpu_count()}): {bad} failed")
    if args.json:
        args.json.write_text(json.dumps({"runs": results, "cores": os.cpu_count(), "failed_runs": bad}, indent=2))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
