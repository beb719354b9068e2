"""``ferry demo``: train an MLP on scikit-learn's bundled digits, checkpoint it, survive interruption, resume.

The run is deterministic given ``--seed``: batches come from a :class:`ferry.ResumableSampler`, and the Checkpointer
(with ``handle_signals=True``) restores the model, the optimizer, the sampler's position inside its epoch and every
RNG state, so an interrupted and resumed run ends with exactly the parameters of an uninterrupted one.

``--nproc N`` (N > 1) runs the same training as N processes: this process launches
``python -m torch.distributed.run --standalone --nproc-per-node N -m ferry.cli.demo ...`` and forwards Ctrl-C or
SIGTERM to it once (torchrun forwards it to the ranks). Each rank calls :func:`ferry.distributed.init` (nccl and one
GPU per rank on a CUDA machine, else gloo on the CPU), wraps the model in ``DistributedDataParallel``, takes its
share of every epoch from the ``ResumableSampler`` and calls the Checkpointer's ``save``/``restore`` with the
others; only rank 0 prints. Rank 0 writes its exit code to the file named by ``FERRY_DEMO_STATUS`` and the ranks exit
0, so the launching process reports the demo's own exit code, and torchrun reports only real crashes.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from torch import nn

__all__ = ["main"]


def _seed_numpy(seed: int) -> None:
    """Seed NumPy's global RNG when NumPy is installed (PyTorch does not require it; the demo does not either)."""
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(seed)


BATCH_SIZE = 64
LEARNING_RATE = 1e-3
ACCURACY_TARGET = 0.90
#: The file, named by the launching process, where rank 0 writes the demo's exit code.
_STATUS_VARIABLE = "FERRY_DEMO_STATUS"
#: ``python -m torch.distributed.run``, except that the signal this process forwards ends it with 128 + the signal's
#: number instead of a traceback, and the launcher's warnings about forwarding it stay quiet (rank 0 reports).
_TORCHRUN = """
import logging, sys
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.run import main
for name in list(logging.root.manager.loggerDict):  # elastic sets each logger's own level
    if name.startswith("torch.distributed.elastic"):
        logging.getLogger(name).setLevel(logging.ERROR)
try:
    main(sys.argv[1:])
except SignalException as err:
    sys.exit(128 + int(err.sigval))
"""


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
    parser.add_argument(
        "--nproc",
        type=int,
        default=1,
        help="train as N data-parallel processes launched with torchrun: one GPU each on a CUDA machine (nccl), "
        "else on the CPU (gloo) (default: 1, a single process)",
    )
    # tests: stop as if interrupted once this step is saved, to compare a resumed run with an uninterrupted one
    parser.add_argument("--stop-at", type=int, default=None, help=argparse.SUPPRESS)
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
    if args.nproc < 1:
        print(f"ferry demo: --nproc ({args.nproc}) must be >= 1: the number of training processes.", file=sys.stderr)
        return 2
    if not str(args.dir).strip():
        print(
            "ferry demo: --dir is empty. Pass the folder for the run's files, e.g. --dir ./ferry-demo.", file=sys.stderr
        )
        return 2
    if _under_torchrun(os.environ):
        return _rank_main(args)

    from rich.console import Console

    import ferry

    try:
        if args.nproc > 1:
            return _launch(args, os.environ, torch.cuda.device_count())
        return _train(args, Console(highlight=False))
    except ferry.FerryError as err:
        errors = Console(stderr=True, highlight=False, soft_wrap=True)
        errors.print(f"ferry demo: {err.for_cli()}", style="red", markup=False)
        return 2


# -- several processes --------------------------------------------------------------------------------------------


def _under_torchrun(environ: Mapping[str, str]) -> bool:
    """Whether this process is a rank torchrun started (``RANK`` or ``WORLD_SIZE`` set, as init() reads them)."""
    return "RANK" in environ or "WORLD_SIZE" in environ


def _rank_device_type(requested: str | None, environ: Mapping[str, str], cuda_count: int, nproc: int) -> str:
    """The device type every rank of ``--nproc`` processes trains on: ``"cuda"`` (one GPU each) or ``"cpu"``.

    Args:
        requested: ``--device``: ``None`` to choose, else ``"cpu"`` or ``"cuda"`` (no index: each rank takes its own).
        environ: The environment; ``FERRY_DEVICE=cpu`` there chooses the CPU as ``--device cpu`` does.
        cuda_count: ``torch.cuda.device_count()``.
        nproc: ``--nproc``.

    Raises:
        ArgumentError: ``requested`` is not ``cpu`` or ``cuda``, CUDA is asked for on a machine without it, or
            ``nproc`` is larger than the number of GPUs.
    """
    from ferry.errors import ArgumentError

    chosen = requested if requested is not None else environ.get("FERRY_DEVICE", "").strip() or None
    if chosen in (None, "auto"):
        chosen = "cuda" if cuda_count > 0 else "cpu"
    if chosen not in ("cpu", "cuda"):
        source = "--device" if requested is not None else "FERRY_DEVICE"
        raise ArgumentError(
            f"{source} {chosen!r} does not fit --nproc {nproc}: every rank takes its own device, so pass --device cpu "
            "(gloo) or --device cuda (nccl, one GPU per rank, cuda:0 to cuda:N-1), or leave --device out to choose."
        )
    if chosen == "cuda" and nproc > cuda_count:
        raise ArgumentError(
            f"--nproc {nproc} needs {nproc} CUDA GPUs (one per rank, for nccl) but this machine has {cuda_count}. "
            f"Pass --nproc {cuda_count} or less, or --device cpu to run {nproc} processes on the CPU (gloo)."
            if cuda_count
            else f"--device cuda with --nproc {nproc}, but torch sees no CUDA GPU here. Pass --device cpu, or leave "
            "--device out to choose."
        )
    return chosen


def _launch(args: argparse.Namespace, environ: Mapping[str, str], cuda_count: int) -> int:
    """Run the demo as ``--nproc`` ranks under ``torch.distributed.run``; return rank 0's exit code.

    The ranks get the same arguments (spelled out, without ``--nproc``). The first SIGINT or SIGTERM this process
    receives is forwarded to torchrun, which forwards it to every rank (they save and stop together); later ones
    are ignored while they save. torchrun runs in its own session, so a Ctrl-C in the terminal reaches it only
    through this process, once.
    """
    device_type = _rank_device_type(args.device, environ, cuda_count, args.nproc)
    launch_variables = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    env = {name: value for name, value in environ.items() if name not in (*launch_variables, "FERRY_DEVICE")}
    if device_type == "cpu":
        env["FERRY_DEVICE"] = "cpu"  # else each rank picks cuda:LOCAL_RANK
    env.setdefault("OMP_NUM_THREADS", "1")  # what torchrun sets, without its banner saying so
    command = [
        sys.executable,
        "-c",
        _TORCHRUN,
        "--standalone",
        "--nproc-per-node",
        str(args.nproc),
        "-m",
        "ferry.cli.demo",
        *_rank_arguments(args),
    ]
    with tempfile.TemporaryDirectory(prefix="ferry-demo-") as scratch:
        status = Path(scratch) / "status"
        env[_STATUS_VARIABLE] = str(status)
        proc = subprocess.Popen(command, env=env, start_new_session=True)
        forwarded: list[int] = []

        def forward(signum: int, frame: FrameType | None) -> None:
            if not forwarded:
                forwarded.append(signum)
                proc.send_signal(signum)

        main_thread = threading.current_thread() is threading.main_thread()  # only it may set handlers
        previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM) if main_thread}
        try:
            returncode = proc.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        try:
            return int(status.read_text())
        except (OSError, ValueError):
            # rank 0 never got to the end: torchrun's own report (on stderr) says why
            print(f"ferry demo: torchrun exited with {returncode} before rank 0 finished; see above.", file=sys.stderr)
            return 2 if returncode == 0 else returncode


def _rank_arguments(args: argparse.Namespace) -> list[str]:
    """The ranks' arguments, spelled out in full as ``--name=value``.

    torchrun parses the whole command line before it hands the rest to the script, so an argument it could take for
    one of its own options (``--nproc`` abbreviates ``--nproc-per-node``), or a value that starts with ``-``, would
    be misread. The ranks need no ``--nproc``: they read the world size from torchrun.
    """
    arguments = [f"--steps={args.steps}", f"--every={args.every}", f"--dir={args.dir}", f"--seed={args.seed}"]
    if args.device is not None:
        arguments.append(f"--device={args.device}")
    if args.stop_at is not None:
        arguments.append(f"--stop-at={args.stop_at}")
    return arguments


def _rank_main(args: argparse.Namespace) -> int:
    """``ferry demo`` as a rank torchrun started: train under the process group; rank 0 reports, writes the status."""
    from rich.console import Console

    import ferry

    code = 2
    try:
        if args.device is not None:
            _rank_device_type(args.device, {}, torch.cuda.device_count(), ferry.distributed.world_size())
            if args.device == "cpu":
                os.environ["FERRY_DEVICE"] = "cpu"  # read by init(), in this process only
        ferry.distributed.init()
        main_rank = ferry.distributed.is_main()
        code = _train(args, Console(highlight=False, quiet=not main_rank))
    except ferry.FerryError as err:
        if ferry.distributed.is_main():
            errors = Console(stderr=True, highlight=False, soft_wrap=True)
            errors.print(f"ferry demo: {err.for_cli()}", style="red", markup=False)
    finally:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    status = os.environ.get(_STATUS_VARIABLE)
    if not status:  # launched by hand: torchrun --nproc-per-node N -m ferry.cli.demo ...
        return code
    if ferry.distributed.is_main():
        Path(status).write_text(f"{code}\n")
    return 0  # the launching process reports the code; torchrun would add a failure report of its own


def _train(args: argparse.Namespace, console: Any) -> int:
    """Train (in a single process, or as one rank under a process group), checkpoint, resume; report on rank 0."""
    import ferry

    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    device = ferry.distributed.init() if distributed else ferry.pick_device(args.device)
    if device.type == "meta":
        raise ferry.DeviceError(
            "ferry demo cannot train on meta: meta tensors have shapes but no data, so there is no loss to "
            "compute. Pass --device cpu or an accelerator, or leave --device out to choose automatically.",
            requested=args.device,
        )
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    _seed_numpy(args.seed)
    x_train, y_train, x_test, y_test = _load_digits(args.seed)
    dataset = torch.utils.data.TensorDataset(x_train, y_train)
    sampler = ferry.ResumableSampler(dataset, shuffle=True, seed=args.seed)  # this rank's share under a group
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=BATCH_SIZE,
        sampler=sampler,
        drop_last=True,
        generator=torch.Generator().manual_seed(args.seed),
    )

    net = build_model()
    model = ferry.distributed.wrap(net, strategy="ddp") if distributed else net
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    if not distributed:
        ferry.place(model, device, optimizer=optimizer)
    directory = Path(args.dir)
    world = ferry.distributed.world_size()
    try:
        opened = ferry.Checkpointer(directory / "checkpoints", keep_last=3, every_steps=args.every, handle_signals=True)
    except ferry.CheckpointError as err:  # not writable, or another demo trains there: say it in --dir's words
        what = str(err).split(". ")[0]
        raise ferry.CheckpointError(
            str(err),
            path=err.path,
            cli_message=f"cannot train in --dir {args.dir}: {what}. Pass another --dir (a folder this user can write "
            "and no other running demo uses).",
        ) from None
    with opened as checkpointer:
        state: dict[str, Any] = {"model": model, "optimizer": optimizer, "sampler": sampler, "seed": args.seed}
        probe = {"seed": args.seed}
        with warnings.catch_warnings():  # the real restore below warns about what matters, once
            warnings.simplefilter("ignore", ferry.CheckpointWarning)
            probed = checkpointer.restore(probe)
        if probed is not None and probe["seed"] != args.seed:
            raise ferry.CheckpointError(
                f"the run in {str(directory)!r} was started with --seed {probe['seed']}, not --seed {args.seed}: "
                "the seed chooses the train/test split, so resuming with another would test on training digits. "
                f"Run again with --seed {probe['seed']}, or use a new --dir for a new seed.",
                path=directory,
            )
        restored = checkpointer.restore(state)
        start = 0 if restored is None else restored
        where = f"{world} ranks ({device.type}, {torch.distributed.get_backend()})" if distributed else str(device)
        console.print(f"ferry demo: training on [bold]{where}[/], {len(y_train)} train / {len(y_test)} test digits")
        if restored is not None:
            console.print(f"resumed from {checkpointer.path_for(restored)} at step {restored}")
        if start >= args.steps:
            console.print(
                f"this run already finished at step {start} (asked for {args.steps} steps): nothing to train."
            )
        else:
            step, interrupted = _train_loop(args, model, optimizer, loader, checkpointer, state, start, device, console)
            if interrupted:
                again = shlex.join(
                    ["ferry", "demo", "--dir", str(args.dir), "--steps", str(args.steps), "--every", str(args.every)]
                    + ["--seed", str(args.seed)]
                    + (["--device", str(args.device)] if args.device else [])
                    + (["--nproc", str(world)] if distributed else [])
                )
                console.print(
                    f"interrupted: saved step {step} to {checkpointer.path_for(step)}. "
                    f"Run the same command again to resume: {again}",
                    soft_wrap=True,  # one line even when piped, so the command can be copied
                )
                signum = checkpointer.preempted_by  # None for --stop-at
                return 0 if signum is None else 128 + signum  # 130 (Ctrl-C), 143 (SIGTERM): the run is not done
    if distributed and not ferry.distributed.is_main():
        return 0
    return _finish(net, device, directory, x_test, y_test, console)


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
) -> tuple[int, bool]:
    """Train from ``step`` until ``--steps``, a preemption signal or ``--stop-at``; every exit point is saved.

    Under a process group every rank stops at the same step: a signal makes ``save_if_due`` save on every rank, and
    then the ranks agree whether any of them was signalled. Returns the step and whether the run was interrupted.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    import ferry

    columns = (TextColumn("step"), MofNCompleteColumn(), BarColumn(), TextColumn("loss {task.fields[loss]:.4f}"))
    with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task("train", total=args.steps, completed=step, loss=float("nan"))
        saved = step
        interrupted = False
        while step < args.steps and not interrupted:
            for features, labels in loader:
                features, labels = ferry.to_device((features, labels), device)
                loss = nn.functional.cross_entropy(model(features), labels)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()  # type: ignore[no-untyped-call]
                optimizer.step()
                step += 1
                if checkpointer.save_if_due(step, state):
                    saved = step
                    interrupted = _any_rank(checkpointer.preempted, device)
                interrupted = interrupted or step == args.stop_at
                if saved == step or step % 10 == 0:
                    progress.update(task, completed=step, loss=loss.item())
                if step >= args.steps or interrupted:
                    break
        if saved != step:  # the last step, or the --stop-at one
            checkpointer.save(step, state)
        progress.update(task, completed=step)
    return step, interrupted


def _any_rank(flag: bool, device: torch.device) -> bool:
    """Whether ``flag`` is true on any rank (on this one without a process group); every rank must call it."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return flag
    votes = torch.tensor([int(flag)], device=device)
    torch.distributed.all_reduce(votes, op=torch.distributed.ReduceOp.MAX)
    return bool(votes.item())


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


if __name__ == "__main__":  # the ranks of --nproc N: python -m torch.distributed.run ... -m ferry.cli.demo
    sys.exit(main())
