"""Run a 2-rank torchrun training script with no teardown code N times; count the runs that did not exit cleanly.

Usage::

    python scripts/soak_torchrun.py [--runs 30] [--busy] [--strategy fsdp|ddp] [--json out.json]

The script trains a small model under ``ferry.distributed.init()``/``wrap()`` on gloo (CPU), saves with
``ferry.Checkpointer`` every 5 steps and ends without ``barrier()`` or ``destroy_process_group()``: ferry's teardown at
exit must end the process group cleanly. A run counts as an abort when torchrun exits non-zero or any rank printed
"terminate called" (gloo's SIGABRT at exit). ``--busy`` keeps one CPU-bound process running beside the runs, as a
busy machine has. Target (issue 12): 0 aborts in 30 runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = """
import sys, torch
from torch import nn
import ferry, ferry.distributed

device = ferry.distributed.init()
torch.manual_seed(0)
model = ferry.distributed.wrap(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)), strategy=sys.argv[2])
optimizer = torch.optim.Adam(model.parameters())
state = {"model": model, "optimizer": optimizer}
ckpt = ferry.Checkpointer(sys.argv[1], every_steps=5)
step = ckpt.restore(state) or 0
for step in range(step + 1, 21):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ckpt.save_if_due(step, state)
# no ckpt.close(), no barrier(), no destroy_process_group(): ferry ends the group at exit
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--busy", action="store_true", help="keep one CPU-bound process running beside the runs")
    parser.add_argument("--strategy", choices=("fsdp", "ddp"), default="fsdp")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "FERRY_DEVICE")}
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="ferry-soak-") as folder:
            script = Path(folder) / "train.py"
            script.write_text(SCRIPT)
            for run in range(args.runs):
                command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
                start = time.perf_counter()
                done = subprocess.run(
                    [*command, str(script), str(Path(folder) / f"run{run}"), args.strategy],
                    capture_output=True, text=True, env=env, timeout=300, check=False,
                )  # fmt: skip
                aborted = done.returncode != 0 or "terminate called" in done.stdout + done.stderr
                results.append({"run": run, "returncode": done.returncode, "aborted": aborted,
                                "seconds": time.perf_counter() - start})  # fmt: skip
                if aborted:
                    print(f"run {run}: exit {done.returncode}\n{done.stderr[-2000:]}", file=sys.stderr)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    aborts = sum(r["aborted"] for r in results)
    print(f"{args.runs} runs ({args.strategy}, busy={args.busy}): {aborts} aborted")
    if args.json:
        args.json.write_text(json.dumps({"runs": args.runs, "busy": args.busy, "strategy": args.strategy,
                                         "aborts": aborts, "results": results}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
