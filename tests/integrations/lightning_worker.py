"""A tiny Lightning training run that checkpoints with FerryCheckpointIO, for the kill-and-resume tests.

    python lightning_worker.py trainer DIR [--every K] [--kill-at-step S] [--resume] [--plugin ferry|async|torch]
    python lightning_worker.py fabric DIR [--every K] [--kill-at-step S] [--resume]

``trainer``: a ``lightning.pytorch.Trainer`` on the CPU fits a two-layer regression model (Adam, a StepLR stepped
each epoch) for EPOCHS epochs of BATCHES batches; ``ModelCheckpoint(every_n_train_steps=K, save_last=True,
save_top_k=-1)`` writes ``DIR/ckpt/*.ckpt``. ``fabric``: a manual loop under ``lightning.fabric.Fabric`` with a
``ferry.ResumableSampler`` (shuffling) in its state, saving ``DIR/ckpt/step-<n>.ckpt`` and ``DIR/ckpt/last.ckpt``
with ``fabric.save`` every K steps. ``--kill-at-step S`` sends SIGKILL to the process itself when the next batch
starts at global step S (after the checkpoint of step S, since ModelCheckpoint saves on the batch's end);
``--resume`` continues from ``last.ckpt`` (``fit(ckpt_path="last")``, ``fabric.load``). At the end the model's
weights go to ``DIR/final.safetensors`` and the step training started from to ``DIR/start.json``. ``--then-straight
DIR2`` then runs the same training again from the start, uninterrupted, in DIR2, in the same process (the baseline,
without paying for a third interpreter and Lightning import).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ferry

EPOCHS = 4
BATCHES = 4  # per epoch
BATCH_SIZE = 4


def dataset() -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(BATCHES * BATCH_SIZE, 8, generator=generator)
    return TensorDataset(x, x.sum(dim=1, keepdim=True).sin())


def network() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def run_trainer(folder: Path, every: int, kill_at: int | None, resume: bool, plugin: str) -> None:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.plugins.io import AsyncCheckpointIO

    from ferry.integrations.lightning import FerryCheckpointIO

    class Regression(pl.LightningModule):
        def __init__(self, lr: float = 0.05) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.net = network()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
            return {"optimizer": optimizer, "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.7)}

    class Probe(pl.Callback):
        def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
            (folder / "start.json").write_text(json.dumps({"step": trainer.global_step}))

        def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
            if kill_at is not None and trainer.global_step == kill_at:
                kill_self()

    io: Any = {"ferry": FerryCheckpointIO(), "async": AsyncCheckpointIO(FerryCheckpointIO()), "torch": None}[plugin]
    pl.seed_everything(0, verbose=False)
    model = Regression()
    checkpoints = ModelCheckpoint(folder / "ckpt", every_n_train_steps=every, save_last=True, save_top_k=-1)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=EPOCHS,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[Probe(), checkpoints],
        plugins=[io] if io is not None else None,
        default_root_dir=folder,
    )
    loader = DataLoader(dataset(), batch_size=BATCH_SIZE, shuffle=False)
    trainer.fit(model, loader, ckpt_path="last" if resume else None)
    ferry.save(model.net.state_dict(), folder / "final.safetensors")


def run_fabric(folder: Path, every: int, kill_at: int | None, resume: bool) -> None:
    from lightning.fabric import Fabric

    from ferry.integrations.lightning import FerryCheckpointIO

    fabric = Fabric(accelerator="cpu", devices=1, plugins=[FerryCheckpointIO()])
    fabric.seed_everything(0)
    net = network()
    optimizer = torch.optim.Adam(net.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, BATCHES, 0.7)
    model, optimizer = fabric.setup(net, optimizer)
    sampler = ferry.ResumableSampler(dataset(), seed=0)
    loader = DataLoader(dataset(), batch_size=BATCH_SIZE, sampler=sampler)
    state: dict[str, Any] = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "sampler": sampler}
    state["step"] = 0
    ckpt = folder / "ckpt"
    if resume:
        fabric.load(ckpt / "last.ckpt", state)
    (folder / "start.json").write_text(json.dumps({"step": state["step"]}))
    total = EPOCHS * BATCHES
    while state["step"] < total:
        for x, y in loader:  # continues the sampler's epoch from where the checkpoint left it
            if state["step"] == kill_at:
                kill_self()
            optimizer.zero_grad()
            fabric.backward(nn.functional.mse_loss(model(x), y))
            optimizer.step()
            scheduler.step()
            state["step"] += 1
            if state["step"] % every == 0:
                fabric.save(ckpt / f"step-{state['step']}.ckpt", state)
                fabric.save(ckpt / "last.ckpt", state)
            if state["step"] == total:
                break
    ferry.save(net.state_dict(), folder / "final.safetensors")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("trainer", "fabric"))
    parser.add_argument("dir", type=Path)
    parser.add_argument("--every", type=int, default=BATCHES)
    parser.add_argument("--kill-at-step", type=int, default=None)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--plugin", choices=("ferry", "async", "torch"), default="ferry")
    parser.add_argument("--then-straight", type=Path, default=None, metavar="DIR2")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    warnings.simplefilter("ignore")  # Lightning's advice (num_workers, logging) is noise here
    runs = [(args.dir, args.kill_at_step, args.resume)]
    if args.then_straight is not None:
        runs.append((args.then_straight, None, False))
    for folder, kill_at, resume in runs:
        folder.mkdir(parents=True, exist_ok=True)
        if args.mode == "trainer":
            run_trainer(folder, args.every, kill_at, resume, args.plugin)
        else:
            run_fabric(folder, args.every, kill_at, resume)


if __name__ == "__main__":
    main()
