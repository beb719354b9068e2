"""Run by tests/integrations/test_accelerate.py under torchrun with 2 processes: ferry's save_state/load_state in DDP.

Usage: python -m torch.distributed.run --nproc_per_node 2 accelerate_ddp_worker.py PROJECT_DIR PARAMS_FILE [--resume]

Trains 3 epochs of 4 batches per process with ``Accelerator(cpu=True)`` (DistributedType.MULTI_CPU, gloo): a model with
dropout, a shuffled DataLoader with Accelerate's seedable sampler, Python's and NumPy's RNGs in the loss. The RNGs are
seeded differently on each process after ``prepare`` (``set_seed(1, device_specific=True)``), so a process that
restored another's RNG states would train differently.

Without ``--resume``: after epoch 0, a save whose registered object cannot be stored on process 0 only (every process
must raise, nothing be written); after epoch 1, ``save_state(accelerator)`` (automatic naming); then epoch 2. With
``--resume``: ``load_state(accelerator)``, then the epochs after the checkpoint's. Prints one JSON object per line,
each with the process index: ``refused``, ``saved``, ``loaded``, ``done``; when done, process 0 writes the final
parameters to PARAMS_FILE with ``ferry.save``.
"""

import argparse
import json
import random
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, ProjectConfiguration, set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ferry
from ferry.errors import CheckpointError, CheckpointWarning
from ferry.integrations.accelerate import load_state, save_state

EPOCHS = 3
BATCH = 4
BATCHES = 8  # per epoch, over both processes


class Progress:
    """The steps done and, when ``poisoned``, a set in its state (which a ferry file cannot hold)."""

    def __init__(self) -> None:
        self.step = 0
        self.poisoned = False

    def state_dict(self) -> dict[str, object]:
        return {"step": self.step, "seen": {1, 2}} if self.poisoned else {"step": self.step}

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.step = int(state["step"])  # type: ignore[call-overload]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("project_dir")
    parser.add_argument("params_file")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("error", CheckpointWarning)

    accelerator = Accelerator(
        cpu=True,
        project_config=ProjectConfiguration(project_dir=args.project_dir, automatic_checkpoint_naming=True),
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True),
    )
    set_seed(0)  # the same on every process, so that the seedable samplers shuffle the same way
    rank = accelerator.process_index

    def emit(**event: object) -> None:
        sys.stdout.write(json.dumps({"rank": rank, **event}) + "\n")  # one write: the processes share the pipe
        sys.stdout.flush()

    data = torch.Generator().manual_seed(123)
    inputs = torch.randn(BATCH * BATCHES, 6, generator=data)
    targets = inputs.sum(dim=1, keepdim=True).sin()
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=BATCH, shuffle=True)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.25), nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.9)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    set_seed(1, device_specific=True)  # from here each process draws its own random numbers
    progress = Progress()
    accelerator.register_for_checkpointing(progress)

    if args.resume:
        folder = load_state(accelerator)
        emit(event="loaded", folder=str(folder), step=progress.step, save_iteration=accelerator.save_iteration)
    start_epoch = progress.step // len(loader)
    for epoch in range(start_epoch, EPOCHS):
        loader.set_epoch(epoch)
        for x, y in loader:
            noise = torch.from_numpy(np.random.standard_normal(x.shape)).float()  # NumPy's RNG
            weight = 1.0 + 0.1 * random.random()  # Python's RNG
            loss = weight * nn.functional.mse_loss(model(x + 0.01 * noise), y)  # dropout: torch's RNG
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            progress.step += 1
        if epoch == 0 and not args.resume:
            progress.poisoned = rank == 0
            try:
                save_state(accelerator)
            except CheckpointError as err:
                accelerator.wait_for_everyone()
                left = sorted(p.name for p in Path(args.project_dir).rglob("*"))
                emit(event="refused", error=type(err).__name__, message=str(err), left=left)
            progress.poisoned = False
        if epoch == 1 and not args.resume:
            emit(event="saved", step=progress.step, folder=str(save_state(accelerator)))
    if rank == 0:
        ferry.save(dict(accelerator.unwrap_model(model).state_dict()), args.params_file)
    emit(event="done", step=progress.step)
    accelerator.end_training()
    return 0


if __name__ == "__main__":
    sys.exit(main())
