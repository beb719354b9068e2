"""What FerryCallback and FerryTrainer share.

The setups they refuse, the manifest's retention policy and metric, tidying ``output_dir`` when a Trainer is built,
the error for a damaged folder, and the rewrite of a stock folder. Imported by :mod:`ferry.integrations.transformers`
only, after it has checked that transformers is installed.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from transformers.utils.import_utils import is_torch_xla_available

from ferry._fs import temporary_name
from ferry.checkpoint.folder import MANIFEST_FILE
from ferry.checkpoint.run.commit import save_failed
from ferry.checkpoint.run.folders import RetentionPolicy
from ferry.errors import CheckpointError, CheckpointWarning, CorruptCheckpointError
from ferry.integrations import _trainer_folder as layout

if TYPE_CHECKING:
    from transformers import TrainerState, TrainingArguments

__all__ = [
    "args_json",
    "best_metric",
    "check_supported",
    "convert",
    "damaged_error",
    "metric_key",
    "output_dir_of",
    "retention_policy",
    "tidy",
]


def check_supported(args: TrainingArguments, who: str, *, deepspeed: bool = False, fsdp: bool = False) -> None:
    """Refuse the setups whose checkpoints the Trainer writes in formats of their own (pickles, sharded files)."""
    uses = []
    if args.world_size > 1:
        uses.append(f"{args.world_size} processes")
    if args.deepspeed or deepspeed:
        uses.append("DeepSpeed")
    if args.fsdp or fsdp:
        uses.append("FSDP")
    if is_torch_xla_available():
        uses.append("a TPU (torch_xla)")
    if getattr(args, "save_safetensors", True) is False:
        uses.append("save_safetensors=False (pickled pytorch_model.bin)")
    if uses:
        raise CheckpointError(
            f"{who} handles the checkpoints of one training process whose weights are safetensors, but this run uses "
            f"{' and '.join(uses)}, whose checkpoints the Trainer writes in formats of its own. Remove {who} (the "
            "Trainer then saves as usual), or train in one process without them.",
            path=args.output_dir,
        )


def retention_policy(args: TrainingArguments) -> RetentionPolicy:
    """``save_total_limit`` and ``metric_for_best_model`` as a retention policy, for ``ferry ckpt ls`` and ``gc``."""
    limit = args.save_total_limit
    best = None
    if args.metric_for_best_model:
        best = (metric_key(args), "max" if args.greater_is_better else "min")
    if limit is not None and limit > 0:
        return RetentionPolicy(keep_last=limit, keep_best=best)
    return RetentionPolicy(keep_last=1, keep_every=1, keep_best=best)  # no limit: every step is kept


def output_dir_of(args: TrainingArguments) -> Path:
    """``args.output_dir`` as a Path (the folder of the ``checkpoint-<step>`` folders)."""
    return Path(args.output_dir or "trainer_output")  # the Trainer's default when None


def args_json(args: TrainingArguments) -> str:
    """The training arguments as the JSON ``TrainingArguments.to_json_string`` writes (no pickle)."""
    return str(args.to_json_string())  # type: ignore[no-untyped-call]


def metric_key(args: TrainingArguments) -> str:
    """The log key of ``metric_for_best_model``, as the Trainer looks it up: ``eval_`` prefixed when it is not."""
    metric = str(args.metric_for_best_model)
    return metric if metric.startswith("eval_") else f"eval_{metric}"


def best_metric(args: TrainingArguments, state: TrainerState) -> dict[str, float]:
    """The best-model metric evaluated at this step, if any (the manifest's ``metrics``)."""
    if not args.metric_for_best_model:
        return {}
    key = metric_key(args)
    for entry in reversed(state.log_history):
        if entry.get("step") == state.global_step and isinstance(entry.get(key), (int, float)):
            return {key: float(entry[key])}
    return {}


def tidy(args: TrainingArguments, who: str) -> None:
    """Clean what crashed saves left in ``output_dir``; set aside cut-off stock saves, with a warning for each."""
    if not args.should_save or not args.output_dir:
        return
    run_dir = output_dir_of(args)
    layout.park_leftovers(run_dir)
    for old, new in layout.set_aside_unfinished(run_dir):
        warnings.warn(
            f"{str(old)!r} holds a checkpoint whose save did not finish (no {MANIFEST_FILE}, no "
            f"{layout.TRAINER_STATE_FILE}: the process stopped while the Trainer wrote it). {who} renamed it to "
            f"{new.name!r} so that resume_from_checkpoint=True does not pick it; delete it once you have looked.",
            CheckpointWarning,
            stacklevel=3,
        )


def damaged_error(folder: Path, problem: str) -> CorruptCheckpointError:
    """The error for resuming from ``folder``, which fails verification: names the newest older one that verifies."""
    older, _ = layout.newest_resumable(folder.parent)
    fallback = (
        f"resume from {older.name}, the newest that verifies: resume_from_checkpoint={str(older)!r}"
        if older is not None and older != folder
        else "no other checkpoint in that folder verifies; train from the start"
    )
    return CorruptCheckpointError(
        f"checkpoint {str(folder)!r} fails verification: {problem}. Resuming from it would load damaged state; "
        f"{fallback}. FerryTrainer's train(resume_from_checkpoint=True) skips such a folder by itself.",
        path=folder,
    )


def convert(
    folder: Path,
    args: TrainingArguments,
    state: TrainerState,
    states: layout.States,
    finish: Callable[[Path, set[str]], None],
) -> None:
    """Build ferry's version of the stock ``folder`` under a temporary name, then swap it in (FerryCallback.on_save).

    ``finish(tmp, ferry_files)`` writes the manifest once every file is in place.

    Raises:
        CheckpointError: a state ferry cannot store, or a disk failure; the stock folder is then left as it was.
    """
    tmp = temporary_name(folder)
    try:
        tmp.mkdir()
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder)
            if path.is_dir():
                (tmp / relative).mkdir()
            elif relative.as_posix() not in (*layout.PICKLES, MANIFEST_FILE):
                link_or_copy(path, tmp / relative)
        ferry_files = layout.write_states(tmp, states)
        if (folder / "training_args.bin").exists():
            (tmp / layout.ARGS_FILE).write_text(args_json(args), encoding="utf-8")
        finish(tmp, ferry_files)
        not_durable = layout.commit_folder(tmp, folder, state.global_step)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise save_failed(err, f"rewriting {str(folder)!r} as ferry's checkpoint", folder) from err
    if not_durable is not None:
        raise not_durable


def link_or_copy(source: Path, target: Path) -> None:
    """Hard-link ``source`` to ``target`` (no bytes copied); copy it where the file system has no hard links."""
    try:
        os.link(source, target)
    except OSError:  # a file system without hard links
        shutil.copy2(source, target)
