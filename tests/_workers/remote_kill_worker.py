"""Kill -9 trials of a Checkpointer that saves to object storage (tests/checkpoint/run/test_remote.py).

``python remote_kill_worker.py URL OPTIONS_JSON TRIALS SEED`` runs TRIALS trials in a row. In each, a forked writer
takes the run over from the writer killed before it (its lease is stale: a dead pid of this host), then saves steps
in a loop (a tensor of 1.5 upload parts and a small one, both filled with the step, so each save is a multipart
upload), reporting each step once ``save`` has returned (committed). This process kills it with SIGKILL at a random
moment of a later save, then restores the run as a reader would and checks that the newest committed checkpoint
came back whole: the step it reports at least the last one the writer reported, and every tensor holds that step.
Prints one JSON line: ``{"trials", "restored": [step per trial], "reported": [last reported step per trial]}``.

Forking (torch imported once, one thread) keeps a trial to about a second; fsspec starts its event loop and its
file-system instances anew in a forked child.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time

import torch

import ferry
from ferry import _remote as ferry_remote

torch.set_num_threads(1)
ferry_remote.PART_BYTES = 5 << 20  # the smallest part S3 takes: saves stay multipart and quick
BIG = ferry_remote.PART_BYTES * 3 // 2 // 4  # float32 elements: a file of two upload parts


def _writer(url: str, options: dict[str, object], report: int) -> None:
    with ferry.Checkpointer(url, keep_last=2, storage_options=options) as ckpt:
        step = max(ckpt.steps(), default=0)
        while True:
            step += 1
            state = {"big": torch.full((BIG,), float(step)), "small": torch.full((3, 3), float(step)), "n": step}
            ckpt.save(step, state)
            os.write(report, f"{step}\n".encode())


def main() -> None:
    url, options, trials, seed = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    restored_steps: list[int] = []
    reported_steps: list[int] = []
    for trial in range(trials):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the writer
            os.close(read)
            try:
                _writer(url, options, write)
            finally:
                os._exit(1)
        os.close(write)
        reader = os.fdopen(read, "r")
        first = reader.readline()
        if not first.strip().isdigit():
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise SystemExit(f"trial {trial}: the writer failed before its first save")
        time.sleep(rng.uniform(0.0, 0.8))  # a save takes a fraction of a second: kill at any moment of one
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        reported = int(first)
        for line in reader.read().split():  # what it reported before it died
            reported = int(line)
        reader.close()
        state: dict[str, object] = {"big": torch.zeros(0), "small": torch.zeros(0), "n": None}
        with ferry.Checkpointer(url, read_only=True, storage_options=options) as ckpt:
            step = ckpt.restore(state)
        assert step is not None, trial
        assert step >= reported, (trial, step, reported)
        assert state["n"] == step, (trial, state["n"], step)
        for name in ("big", "small"):
            tensor = state[name]
            assert isinstance(tensor, torch.Tensor), (trial, name)
            assert bool((tensor == float(step)).all()), (trial, name, step)
        restored_steps.append(step)
        reported_steps.append(reported)
    print(json.dumps({"trials": trials, "restored": restored_steps, "reported": reported_steps}), flush=True)


if __name__ == "__main__":
    main()
