"""Run by tests/integrations/test_accelerate.py: a real ``Accelerator(cpu=True)`` loop that checkpoints with ferry.

Usage: python accelerate_worker.py PROJECT_DIR PARAMS_FILE [--resume] [--stall-at STEP]

Trains 3 epochs of 8 batches (24 steps): a model with dropout, a shuffled DataLoader with its own seeded generator
and Accelerate's seedable sampler, Python's and NumPy's RNGs in the loss, an AdamW optimizer and a StepLR schedule.
Saves with ``save_state(accelerator)`` every 5 steps (automatic naming, ``total_limit=2``). With ``--resume`` it first
calls ``load_state(accelerator)`` and skips the batches the interrupted epoch had consumed with
``accelerator.skip_first_batches``, as Accelerate documents. With ``--stall-at S`` it stops after step S and waits to
be killed. Prints one JSON object per line: ``loaded``, ``step`` (with the loss), ``saved``, ``stalled``, ``done``;
when done, writes the final parameters to PARAMS_FILE with ``ferry.save``.
"""

import argparse
import json
import random
import sys
import time
import warnings

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, ProjectConfiguration, set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ferry
from ferry.errors import CheckpointWarning
from ferry.integrations.accelerate import load_state, save_state

EPOCHS = 3
BATCH = 4
BATCHES = 8  # per epoch
SAVE_EVERY = 5


class Progress:
    """What the loop needs to resume: registered with ``accelerator.register_for_checkpointing``."""

    def __init__(self) -> None:
        self.step = 0
        self.losses: list[float] = []

    def state_dict(self) -> dict[str, object]:
        return {"step": self.step, "losses": torch.tensor(self.losses, dtype=torch.float64)}

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.step = int(state["step"])
        self.losses = state["losses"].tolist()


def emit(**event: object) -> None:
    print(json.dumps(event), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("project_dir")
    parser.add_argument("params_file")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--stall-at", type=int, default=None)
    args = parser.parse_args()
    warnings.simplefilter("error", CheckpointWarning)  # a resume that would not be exact fails the run

    set_seed(0)
    accelerator = Accelerator(
        cpu=True,
        project_config=ProjectConfiguration(
            project_dir=args.project_dir, automatic_checkpoint_naming=True, total_limit=2
        ),
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True),
    )
    data = torch.Generator().manual_seed(123)
    inputs = torch.randn(BATCH * BATCHES, 6, generator=data)
    targets = inputs.sum(dim=1, keepdim=True).sin()
    loader = DataLoader(
        TensorDataset(inputs, targets), batch_size=BATCH, shuffle=True, generator=torch.Generator().manual_seed(7)
    )
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Dropout(0.25), nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.9)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    progress = Progress()
    accelerator.register_for_checkpointing(progress)

    if args.resume:
        folder = load_state(accelerator)
        emit(event="loaded", folder=str(folder), step=progress.step, save_iteration=accelerator.save_iteration)
    start_epoch, skip = divmod(progress.step, BATCHES)
    for epoch in range(start_epoch, EPOCHS):
        loader.set_epoch(epoch)
        batches = accelerator.skip_first_batches(loader, skip) if epoch == start_epoch and skip else loader
        for x, y in batches:
            noise = torch.from_numpy(np.random.standard_normal(x.shape)).float()  # NumPy's RNG
            weight = 1.0 + 0.1 * random.random()  # Python's RNG
            loss = weight * nn.functional.mse_loss(model(x + 0.01 * noise), y)  # dropout: torch's RNG
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            progress.step += 1
            progress.losses.append(loss.item())
            emit(event="step", step=progress.step, loss=loss.item())
            if progress.step % SAVE_EVERY == 0:
                emit(event="saved", step=progress.step, folder=str(save_state(accelerator)))
            if progress.step == args.stall_at:
                emit(event="stalled", step=progress.step)
                time.sleep(300)  # the test kills this process now
                return 3
    ferry.save(dict(accelerator.unwrap_model(model).state_dict()), args.params_file)
    emit(event="done", step=progress.step, history=progress.losses)
    return 0


if __name__ == "__main__":
    sys.exit(main())
