"""``ferry demo``: train an MLP on scikit-learn's bundled digits, checkpoint it, survive interruption, resume.

The run is deterministic given ``--seed``: the order of the training examples at step ``s`` depends only on the seed
and ``s``, and the Checkpointer restores the model, the optimizer and every RNG state, so an interrupted and resumed
run trains on exactly the batches the uninterrupted one would have.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
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


def _batch_indices(step: int, n: int, seed: int) -> torch.Tensor:
    """Indices of the batch at ``step``: epoch ``e`` is a permutation seeded by ``(seed, e)``; drop the last partial."""
    per_epoch = n // BATCH_SIZE
    epoch, position = divmod(step, per_epoch)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
    return order[position * BATCH_SIZE : (position + 1) * BATCH_SIZE]


class _StopFlag:
    """Set by SIGINT/SIGTERM; the loop finishes its step, saves and exits. Restores the old handlers on exit."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signal = signum

    def __enter__(self) -> _StopFlag:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
    x_train, y_train = ferry.to_device((x_train, y_train), device)

    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    ferry.place(model, device, optimizer=optimizer)
    directory = Path(args.dir)
    checkpointer = ferry.Checkpointer(directory / "checkpoints", keep_last=3)
    state: dict[str, Any] = {"model": model, "optimizer": optimizer, "seed": args.seed}
    restored = checkpointer.restore(state)
    if state["seed"] != args.seed:
        raise ferry.CheckpointError(
            f"the run in {str(directory)!r} was started with --seed {state['seed']}, not --seed {args.seed}: the "
            "seed chooses the train/test split, so resuming with another would test on training digits. Run again "
            f"with --seed {state['seed']}, or use a new --dir for a new seed.",
            path=directory,
        )
    start = 0 if restored is None else restored
    console.print(f"ferry demo: training on [bold]{device}[/], {len(y_train)} train / {len(y_test)} test digits")
    if restored is not None:
        console.print(f"resumed from {checkpointer.path_for(restored)} at step {restored}")
    if start >= args.steps:
        console.print(f"this run already finished at step {start} (asked for {args.steps} steps): nothing to train.")
        return _finish(model, device, directory, x_test, y_test, console)

    loss_value = float("nan")
    interrupted: int | None = None
    step = start
    with (
        _StopFlag() as stop,
        Progress(
            TextColumn("step"),
            MofNCompleteColumn(),
            BarColumn(),
            TextColumn("loss {task.fields[loss]:.4f}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as progress,
    ):
        task = progress.add_task("train", total=args.steps, completed=start, loss=loss_value)
        while step < args.steps:
            index = _batch_indices(step, len(y_train), args.seed).to(device)
            loss = nn.functional.cross_entropy(model(x_train[index]), y_train[index])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            step += 1
            if step % args.every == 0 or step == args.steps or stop.signal is not None:
                loss_value = loss.item()
                checkpointer.save(step, state)
                progress.update(task, completed=step, loss=loss_value)
            if stop.signal is not None:
                interrupted = stop.signal
                break
    if interrupted is not None:
        name = signal.Signals(interrupted).name
        console.print(
            f"{name} received: saved step {step} to {checkpointer.path_for(step)}. "
            f"Run the same command again to resume: ferry demo --dir {args.dir} --steps {args.steps}"
        )
        return 0
    return _finish(model, device, directory, x_test, y_test, console)


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
