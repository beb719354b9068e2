"""The exact-resume training script and its helpers, shared by the local and the object-storage resume tests."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

#: The training script, run as ``python train.py STEPS CKPT_DIR OUT [--stop-after K] [--no-generator]``.
#:
#: It resumes from CKPT_DIR if that holds a checkpoint, trains up to STEPS steps (40 samples, batch 4: 10 steps an
#: epoch), and writes OUT.json (the step and loss of each step it trained, the warnings of its restore) and
#: OUT.safetensors (the final model, optimizer, scheduler and scaler state). With ``--stop-after K`` it saves a
#: checkpoint after step K and leaves through ``os._exit(0)``: no close(), no cleanup, like a killed job.
#: ``--forget-loader`` leaves the DataLoader out of what is restored (the control: its resume must diverge).
TRAIN = textwrap.dedent(
    """
    import argparse, json, os, random, warnings

    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    import ferry
    from ferry.sampler import ResumableSampler

    warnings.simplefilter("error")
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)

    parser = argparse.ArgumentParser()
    parser.add_argument("steps", type=int)
    parser.add_argument("ckpt")
    parser.add_argument("out")
    parser.add_argument("--stop-after", type=int)
    parser.add_argument("--forget-loader", action="store_true")
    parser.add_argument("--storage-options")  # JSON, for a CKPT_DIR on object storage
    args = parser.parse_args()

    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    data = torch.randn(40, 8, generator=torch.Generator().manual_seed(1))
    dataset = TensorDataset(data, data.sum(dim=1, keepdim=True).tanh())
    sampler = ResumableSampler(dataset, shuffle=True, seed=0)
    generator = torch.Generator().manual_seed(2)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=0, generator=generator)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.7)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=3)
    # Python's random and NumPy's legacy generator are global: every save records them, no entry needed
    state = {
        "model": model, "optimizer": optimizer, "scheduler": scheduler, "scaler": scaler,
        "loader": loader, "rng": rng,
    }

    if args.forget_loader:
        del state["loader"]
    options = json.loads(args.storage_options) if args.storage_options else None
    ckpt = ferry.Checkpointer(args.ckpt, storage_options=options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ferry.CheckpointWarning)
        step = ckpt.restore(state) or 0
    log = {"start": step, "steps": [], "losses": [], "warnings": [str(w.message) for w in caught]}

    epoch = sampler.epoch
    while step < args.steps:
        sampler.set_epoch(epoch)
        for inputs, targets in loader:
            noise = torch.from_numpy(rng.standard_normal(inputs.shape).astype(np.float32)) * 0.05
            weight = 1.0 + 0.1 * random.random() + 0.1 * float(np.random.rand())
            loss = weight * (model(inputs + noise) - targets).pow(2).mean()
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            step += 1
            log["steps"].append(step)
            log["losses"].append(loss.item())
            if step == args.stop_after:
                ckpt.save(step, state)
                with open(args.out + ".json", "w") as handle:
                    json.dump(log, handle)
                os._exit(0)  # like a kill: no close(), the lock file stays behind
            if step == args.steps:
                break
        epoch += 1

    ckpt.save(step, state)
    ckpt.close()
    with open(args.out + ".json", "w") as handle:
        json.dump(log, handle)
    final = {
        "model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict(), "sampler": sampler.state_dict(),
    }
    ferry.save(final, args.out + ".safetensors")
    """
)
STEPS = 27


def start(script: Path, ckpt: Path | str, out: Path, *options: str) -> subprocess.Popen[str]:
    """Start a training run of STEPS steps with checkpoints in ``ckpt``, writing ``out.json``/``out.safetensors``."""
    args = [sys.executable, str(script), str(STEPS), str(ckpt), str(out), *options]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(runs: dict[str, subprocess.Popen[str]], tmp_path: Path) -> dict[str, dict[str, object]]:
    """Wait for the runs; each must succeed. Returns what each wrote to ``tmp_path/<name>.json``."""
    try:
        for run in runs.values():
            output, _ = run.communicate(timeout=120)
            assert 0 == run.returncode, output
    finally:  # after a failure, stop the others
        for run in runs.values():
            if run.poll() is None:
                run.kill()
                run.communicate()
    return {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in runs}


def assert_bitwise_equal(expected: object, actual: object, where: str = "") -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), where
        assert expected.dtype == actual.dtype, where
        assert torch.equal(expected, actual), where
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), where
        assert expected.keys() == actual.keys(), where
        for key in expected:
            assert_bitwise_equal(expected[key], actual[key], f"{where}/{key}")
    elif isinstance(expected, (list, tuple)):
        assert type(expected) is type(actual), where
        assert len(expected) == len(actual), where
        for index, (a, b) in enumerate(zip(expected, actual, strict=True)):
            assert_bitwise_equal(a, b, f"{where}/{index}")
    else:
        assert expected == actual, where
