"""``ferry demo``: train an MLP on scikit-learn's bundled digits, checkpoint it, survive interruption, resume.

The run is deterministic given ``--seed``: batches come from a :class:`ferry.ResumableSampler`, and the Checkpointer
(with ``handle_signals=True``) restores the model, the optimizer, the sampler's position inside its epoch and every
RNG state, so an interrupted and resumed run ends with exactly the parameters of an uninterrupted one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["main"]

BATCH_SIZE = 64
LEARNING_RATE = 1e-3
ACCURACY_TARGET = 0.90


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ferry demo",
        description="Train an MLP 64-256-10 on the handwritten digits bundled with scikit-learn, checkpointing every "
        "--every steps. Ctrl-C or SIGTERM saves and exits; running the same command again resumes.",
    )
    parser.add_argument("--steps", type=int, default=600, help="total training steps (default: 600)")
    parser.add_argument("--every", type=int, default=100, help="checkpoint every N steps (default: 100)")
    parser.add_argument("--device", default=None, help="device to train on (default: ferry.pick_device())")
    parser.add_argument("--dir", default="./ferry-demo", help="folder for checkpoints (default: ./ferry-demo)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    return parser


def _load_digits(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Digits as float32 [N, 64] features in [0, 1] and int64 [N] labels, split 80/20 by ``seed``; on the CPU."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise SystemExit(
            "ferry demo needs scikit-learn for its bundled digits data, and it is not installed. "
            "Install it with: pip install 'ferry[demo]'"
        ) from None
    digits = load_digits()
    features = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    cut = int(0.8 * len(labels))
    train, test = order[:cut], order[cut:]
    return features[train], labels[train], features[test], labels[test]


def build_model() -> nn.Sequential:
    """The demo's MLP: 64 -> 256 (ReLU) -> 10 logits."""
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ferry demo``; return 0 on success (or a clean interruption), 1 if accuracy misses the target."""
    args = _parser().parse_args(argv)
    if args.steps < 1 or args.every < 1:
        print(f"ferry demo: --steps ({args.steps}) and --every ({args.every}) must be >= 1.", file=sys.stderr)
        return 2

    from rich.console import Console

    import ferry

    console = Console(highlight=False)
    try:
        return _train(args, console)
    except ferry.FerryError as err:
        errors = Console(stderr=True, highlight=False, soft_wrap=True)
        errors.print(f"ferry demo: {err}", style="red", markup=False)
        return 2


def _train(args: argparse.Namespace, console: Any) -> int:

    import ferry

    device = ferry.pick_device(args.device)
    if device.type == "meta":
        raise ferry.DeviceError(
            "ferry demo cannot train on meta: meta tensors have shapes but no data, so there is no loss to "
            "compute. Pass --device cpu or an accelerator, or leave --device out to choose automatically.",
            requested=args.device,
        )
    torch.manual_seed(args.seed)
    x_train, y_train, x_test, y_test = _load_digits(args.seed)
    dataset = torch.utils.data.TensorDataset(x_train, y_train)
    sampler = ferry.ResumableSampler(dataset, shuffle=True, seed=args.seed)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=BATCH_SIZE,
        sampler=sampler,
        drop_last=True,
        generator=torch.Generator().manual_seed(args.seed),
    )

    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    ferry.place(model, device, optimizer=optimizer)
    directory = Path(args.dir)
    with ferry.Checkpointer(
        directory / "checkpoints", keep_last=3, every_steps=args.every, handle_signals=True
    ) as checkpointer:
        state: dict[str, Any] = {"model": model, "optimizer": optimizer, "sampler": sampler, "seed": args.seed}
        probe = {"seed": args.seed}
        if checkpointer.restore(probe) is not None and probe["seed"] != args.seed:
            raise ferry.CheckpointError(
                f"the run in {str(directory)!r} was started with --seed {probe['seed']}, not --seed {args.seed}: "
                "the seed chooses the train/test split, so resuming with another would test on training digits. "
                f"Run again with --seed {probe['seed']}, or use a new --dir for a new seed.",
                path=directory,
            )
        restored = checkpointer.restore(state)
        start = 0 if restored is None else restored
        console.print(f"ferry demo: training on [bold]{device}[/], {len(y_train)} train / {len(y_test)} test digits")
        if restored is not None:
            console.print(f"resumed from {checkpointer.path_for(restored)} at step {restored}")
        if start >= args.steps:
            console.print(
                f"this run already finished at step {start} (asked for {args.steps} steps): nothing to train."
            )
            return _finish(model, device, directory, x_test, y_test, console)
        step = _train_loop(args, model, optimizer, loader, checkpointer, state, start, device, console)
        if checkpointer.preempted:
            console.print(
                f"interrupted: saved step {step} to {checkpointer.path_for(step)}. "
                f"Run the same command again to resume: ferry demo --dir {args.dir} --steps {args.steps}"
            )
            return 0
    return _finish(model, device, directory, x_test, y_test, console)


def _train_loop(
    args: argparse.Namespace,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: torch.utils.data.DataLoader[Any],
    checkpointer: Any,
    state: dict[str, Any],
    step: int,
    device: torch.device,
    console: Any,
) -> int:
    """Train from ``step`` until ``--steps`` or a preemption signal; every exit point is saved. Returns the step."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    import ferry

    columns = (TextColumn("step"), MofNCompleteColumn(), BarColumn(), TextColumn("loss {task.fields[loss]:.4f}"))
    with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task("train", total=args.steps, completed=step, loss=float("nan"))
        saved = step
        while step < args.steps and not checkpointer.preempted:
            for features, labels in loader:
                features, labels = ferry.to_device((features, labels), device)
                loss = nn.functional.cross_entropy(model(features), labels)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()  # type: ignore[no-untyped-call]
                optimizer.step()
                step += 1
                if checkpointer.save_if_due(step, state):
                    saved = step
                if saved == step or step % 10 == 0:
                    progress.update(task, completed=step, loss=loss.item())
                if step >= args.steps or checkpointer.preempted:
                    break
        if saved != step:  # the last step, or the one a signal stopped at
            checkpointer.save(step, state)
        progress.update(task, completed=step)
    return step


def _finish(
    model: nn.Module, device: torch.device, directory: Path, x_test: torch.Tensor, y_test: torch.Tensor, console: Any
) -> int:
    """Save the final weights, reload them on the CPU, check they predict identically, and report accuracy."""
    import ferry

    model.eval()
    final = directory / "model.safetensors"
    ferry.save(model.state_dict(), final)
    reloaded = build_model()
    ferry.load_state_dict(reloaded, final)
    reloaded.eval()
    with torch.no_grad():
        trained_out = model(x_test.to(device)).cpu()
        reloaded_out = reloaded(x_test)
    same = (
        torch.equal(trained_out, reloaded_out)
        if device.type == "cpu"
        else torch.allclose(trained_out, reloaded_out, rtol=1e-4, atol=1e-5)
    )
    if not same:
        console.print(f"the model reloaded from {final} predicts differently from the trained one", style="red")
        return 1
    accuracy = (reloaded_out.argmax(dim=1) == y_test).float().mean().item()
    console.print(f"reloaded {final} on cpu: outputs match the trained model on {len(y_test)} test digits")
    console.print(f"test accuracy: [bold]{accuracy:.4f}[/]")
    console.print("written:")
    for path in [*sorted((directory / "checkpoints").glob("step-*")), final]:
        console.print(f"  {path}")
    if accuracy < ACCURACY_TARGET:
        console.print(f"accuracy {accuracy:.4f} is below the target {ACCURACY_TARGET}; train longer with --steps")
        return 1
    return 0
