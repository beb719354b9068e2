"""ferry's checkpoints for the Hugging Face ``Trainer``: pickle-free, checksummed, crash-safe ``checkpoint-<step>``.

Two pieces, because the Trainer's callbacks run only after it has written a checkpoint folder:

- :class:`FerryCallback`, added with ``Trainer(..., callbacks=[FerryCallback()])``, keeps the stock Trainer: after
  each save (``on_save``) it rewrites the folder pickle-free (optimizer, scheduler, scaler and RNG states as ferry
  files, the training arguments as JSON), checksummed and fsynced, and swaps it in with one rename; on a resume it
  loads those files (``on_train_begin``) and the RNG states at the moment the Trainer itself would
  (``on_epoch_begin``/``on_step_begin``); when the Trainer is built (``on_init_end``) it sets aside a folder whose
  stock save was cut off, so that ``resume_from_checkpoint=True`` does not pick it.
- :class:`FerryTrainer`, used in place of ``Trainer``, writes each folder under a temporary name and renames it into
  place once complete (``_save_checkpoint``): no pickle is written, and a kill at any moment leaves
  ``checkpoint-<step>`` complete or absent. It reads the ferry files back (``_load_optimizer_and_scheduler``,
  ``_load_scaler``, ``_load_rng_state``), verifies a folder before loading it (``_load_from_checkpoint``,
  ``_load_best_model``), and ``train(resume_from_checkpoint=True)`` skips a newer folder that fails verification.

Both keep ``model.safetensors`` (and the config, tokenizer files) exactly as ``save_pretrained`` writes them, so
``from_pretrained(checkpoint_folder)`` works; ``save_total_limit`` and ``load_best_model_at_end`` work as with the
stock Trainer; ``ferry ckpt ls OUTPUT_DIR`` and ``ferry ckpt verify`` read the folders. One training process only:
DeepSpeed, FSDP, TPU and multi-process runs write their own checkpoint formats and are refused.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path
from typing import Any

from ferry.integrations import require

require("transformers", "transformers", "ferry.integrations.transformers")  # names the extra when it is missing

import transformers  # noqa: E402 - after require(), which words a missing package
from torch import nn  # noqa: E402
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments  # noqa: E402
from transformers.trainer_callback import ExportableState  # noqa: E402

from ferry._fs import temporary_name  # noqa: E402
from ferry.checkpoint.folder import MANIFEST_FILE  # noqa: E402
from ferry.checkpoint.run.commit import save_failed  # noqa: E402
from ferry.errors import CheckpointError, CheckpointWarning  # noqa: E402
from ferry.integrations import _trainer_folder as layout  # noqa: E402
from ferry.integrations import _trainer_shared as shared  # noqa: E402

__all__ = ["FerryCallback", "FerryTrainer"]


class FerryCallback(TrainerCallback):
    """Make the stock ``Trainer``'s checkpoints pickle-free, checksummed and durable; resume from them exactly.

    Add it with ``Trainer(..., callbacks=[FerryCallback()])``. What each event does:

    - ``on_init_end`` (the Trainer is built): refuses DeepSpeed, FSDP, TPU and multi-process runs; removes the
      temporary folders of crashed saves; renames a ``checkpoint-<step>`` whose stock save was cut off (no
      ``trainer_state.json``) to ``checkpoint-<step>.ferry-unfinished-<hex>``, with a :class:`ferry.CheckpointWarning`,
      so that ``resume_from_checkpoint=True`` (``get_last_checkpoint``: the highest step) does not pick it.
    - ``on_save`` (the Trainer has written ``checkpoint-<step>``): builds the folder anew under a temporary name
      (the model, config and JSON files hard-linked, not copied), with ``optimizer.safetensors``,
      ``scheduler.safetensors``, ``scaler.safetensors`` and ``rng_state.safetensors`` from the live objects in place
      of ``optimizer.pt``, ``scheduler.pt``, ``scaler.pt`` and ``rng_state.pth``, ``training_args.json`` in place of
      ``training_args.bin``, every file fsynced and a ``manifest.json`` of sizes and checksums; then swaps it in for
      the stock folder with renames. A crash leaves the stock folder or ferry's, never neither.
    - ``on_train_begin`` (after ``train(resume_from_checkpoint=...)`` has loaded the weights and
      ``trainer_state.json``): verifies ``output_dir/checkpoint-<step>`` and loads its optimizer, scheduler and
      scaler states, which the stock Trainer does not read. ``on_epoch_begin``/``on_step_begin`` restore the RNG
      states where the stock ``_load_rng_state`` would (the epoch's start, or after the skipped batches of a
      resumed epoch), so the resumed run draws the same dropout masks as an uninterrupted one.

    What the callback cannot do (the Trainer gives it no earlier hook): the stock Trainer writes the folder under
    its final name, pickles included, before ``on_save``; a kill during that write leaves a half folder until the
    next Trainer with this callback sets it aside. A resume from a folder outside ``output_dir`` is not seen (a
    :class:`ferry.CheckpointWarning` says so when the optimizer state stays empty).
    :class:`FerryTrainer` does both (it writes ferry's folder directly, under a temporary name).

    Raises:
        CheckpointError: at ``on_init_end``, a setup whose checkpoints the Trainer writes in its own formats
            (DeepSpeed, FSDP, TPU, more than one process).
        CorruptCheckpointError: at ``on_train_begin``, the checkpoint being resumed fails verification (a damaged
            file); the message names the newest older checkpoint that verifies.
    """

    def __init__(self) -> None:
        self._loaded_by_trainer = False  # FerryTrainer reads the ferry files itself
        self._rng_folder: Path | None = None
        self._rng_at: str | None = None  # "epoch" or "step": when the stock Trainer would restore the RNG states

    def on_init_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Check the setup; tidy ``output_dir`` (temporaries of crashed saves, cut-off stock saves set aside)."""
        shared.check_supported(args, type(self).__name__)
        shared.tidy(args, type(self).__name__)

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Rewrite the ``checkpoint-<step>`` folder the Trainer has just written as ferry's, and swap it in."""
        if not args.should_save:
            return
        folder = shared.output_dir_of(args) / layout.checkpoint_name(state.global_step)
        if (folder / MANIFEST_FILE).exists() and not any((folder / name).exists() for name in layout.PICKLES):
            return  # FerryTrainer wrote it (the stock save always writes training_args.bin)
        if not folder.is_dir():
            warnings.warn(
                f"FerryCallback found no {folder.name} in output_dir {args.output_dir!r} after the Trainer saved step "
                f"{state.global_step} (a hyperparameter-search trial saves into a folder of its own), so that save "
                "keeps the stock Trainer's pickles. Use FerryTrainer, which saves every folder itself.",
                CheckpointWarning,
                stacklevel=2,
            )
            return
        optimizer = kwargs.get("optimizer")
        states = layout.States(
            optimizer=optimizer if (folder / "optimizer.pt").exists() else None,
            scheduler=kwargs.get("lr_scheduler") if (folder / "scheduler.pt").exists() else None,
            scaler=getattr(optimizer, "scaler", None) if (folder / "scaler.pt").exists() else None,
            rng=(folder / "rng_state.pth").exists(),
        )
        shared.convert(folder, args, state, states, lambda tmp, ferry_files: _finish(tmp, args, state, ferry_files))

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """On a resume from a ferry folder in ``output_dir``: verify it, load the optimizer, scheduler and scaler."""
        self._rng_folder = self._rng_at = None
        if self._loaded_by_trainer or state.global_step == 0:
            return
        folder = shared.output_dir_of(args) / layout.checkpoint_name(state.global_step)
        optimizer = kwargs.get("optimizer")
        if not folder.is_dir() and optimizer is not None and not optimizer.state:
            warnings.warn(
                f"training resumes at step {state.global_step} with an empty optimizer state: FerryCallback reads a "
                f"resumed checkpoint's ferry files from output_dir ({str(folder)!r}, which does not exist), and the "
                "stock Trainer reads only optimizer.pt. Resume from a folder inside output_dir, or use FerryTrainer, "
                "which reads the folder it is given; otherwise the run is not resumed exactly.",
                CheckpointWarning,
                stacklevel=2,
            )
        if not (folder / MANIFEST_FILE).exists():
            return  # a folder of the stock Trainer: it has read the pickles itself
        problem = layout.verify_folder(folder)
        if problem is not None:
            raise shared.damaged_error(folder, problem)
        has_optimizer = (folder / layout.OPTIMIZER_FILE).exists() and (folder / layout.SCHEDULER_FILE).exists()
        layout.load_states(
            folder,
            layout.States(
                optimizer=optimizer if has_optimizer else None,
                scheduler=kwargs.get("lr_scheduler") if has_optimizer else None,
                scaler=getattr(optimizer, "scaler", None),
            ),
        )
        self._rng_folder = folder
        # The stock _run_epoch restores the RNG states at the resumed epoch's start when no batch is skipped, else
        # after skipping the batches already seen (their iteration draws from the generators too).
        mid_epoch = not args.ignore_data_skip and not float(state.epoch or 0.0).is_integer()
        self._rng_at = "step" if mid_epoch else "epoch"

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Restore the RNG states of a resume at an epoch boundary (where the stock Trainer would)."""
        if self._rng_at == "epoch":
            self._restore_rng()

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Restore the RNG states of a mid-epoch resume, after the skipped batches (where the stock Trainer would)."""
        if self._rng_at == "step":
            self._restore_rng()

    def _restore_rng(self) -> None:
        if self._rng_folder is not None:
            layout.restore_rng(self._rng_folder)
        self._rng_folder = self._rng_at = None


def _finish(tmp: Path, args: TrainingArguments, state: TrainerState, ferry_files: set[str]) -> None:
    layout.finish(
        tmp,
        step=state.global_step,
        policy=shared.retention_policy(args),
        metrics=shared.best_metric(args, state),
        ferry_files=ferry_files,
        extra={"transformers": transformers.__version__},
    )


class FerryTrainer(Trainer):
    """A ``transformers.Trainer`` whose ``checkpoint-<step>`` folders are ferry's from the first byte.

    Use it in place of ``Trainer`` (same arguments). Over :class:`FerryCallback` it adds what needs the Trainer's
    own methods:

    - ``_save_checkpoint``: the folder is written under a temporary name in ``output_dir`` and renamed into place
      once complete (manifest last, every file and the directory fsynced): a kill at any moment leaves
      ``checkpoint-<step>`` complete or absent, and no pickle is ever written (so it is also faster than the stock
      save plus the callback's rewrite). The order of the stock save is kept: weights (``save_model``), the best
      checkpoint's bookkeeping, optimizer/scheduler/scaler/RNG (unless ``save_only_model``), the states of
      ``ExportableState`` callbacks and ``trainer_state.json``; then ``push_to_hub`` from the folder, then
      ``save_total_limit`` rotation, each old folder renamed away before it is deleted.
    - ``train(resume_from_checkpoint=True)``: the newest checkpoint by step (as ``get_last_checkpoint``) that is
      complete and verifies; a newer one that fails (a damaged file, a cut-off stock save) is skipped with a
      :class:`ferry.CheckpointWarning` naming it and why, like :meth:`ferry.Checkpointer.restore`.
    - ``_load_from_checkpoint``, ``_load_best_model``: verify a ferry folder (every checksum) before the weights
      are loaded; an explicitly named folder that fails raises.
    - ``_load_optimizer_and_scheduler``, ``_load_scaler``, ``_load_rng_state``: read the ferry files, at the moments
      the stock Trainer reads its pickles; folders the stock Trainer wrote are read as it reads them.

    Raises:
        CheckpointError: at construction, a setup whose checkpoints the Trainer writes in its own formats
            (DeepSpeed, FSDP, TPU, more than one process); from ``train(resume_from_checkpoint=True)``, no checkpoint
            in ``output_dir`` that verifies (the stock Trainer raises ``ValueError`` when there is none at all).
        CorruptCheckpointError: ``train(resume_from_checkpoint=path)`` with a folder that fails verification.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._ferry_verified: Path | None = None
        super().__init__(*args, **kwargs)
        who = type(self).__name__
        shared.check_supported(self.args, who, deepspeed=self.is_deepspeed_enabled, fsdp=self.is_fsdp_enabled)
        shared.tidy(self.args, who)

    def train(
        self,
        resume_from_checkpoint: str | bool | None = None,
        trial: Any = None,
        ignore_keys_for_eval: list[str] | None = None,
    ) -> Any:
        """Train as ``Trainer.train``; ``resume_from_checkpoint=True`` takes the newest checkpoint that verifies."""
        for callback in self.callback_handler.callbacks:
            if isinstance(callback, FerryCallback):
                callback._loaded_by_trainer = True
        if resume_from_checkpoint is True:
            folder, skipped = layout.newest_resumable(shared.output_dir_of(self.args))
            for bad, problem in skipped:
                warnings.warn(
                    f"checkpoint {str(bad)!r} is skipped: {problem}. "
                    + (f"Resuming from {folder.name} instead. " if folder is not None else "")
                    + "Delete the skipped folder once you have looked at it.",
                    CheckpointWarning,
                    stacklevel=2,
                )
            if folder is None:
                why = f" ({len(skipped)} checkpoint folder(s) skipped, above)" if skipped else ""
                raise CheckpointError(
                    f"no checkpoint to resume from in output_dir {self.args.output_dir!r}{why}. Train from the start "
                    "(resume_from_checkpoint=None), or pass the folder to resume from.",
                    path=self.args.output_dir,
                )
            self._ferry_verified = folder
            resume_from_checkpoint = str(folder)
        return super().train(
            resume_from_checkpoint=resume_from_checkpoint, trial=trial, ignore_keys_for_eval=ignore_keys_for_eval
        )

    # -- saving --------------------------------------------------------------------------------------------------

    def _save_checkpoint(self, model: nn.Module, trial: Any) -> None:
        """Write ``checkpoint-<step>`` under a temporary name, commit it with a rename, then rotate old ones."""
        step = self.state.global_step
        if self.hp_search_backend is None and trial is None:
            self.store_flos()
        run_dir = self._get_output_dir(trial=trial)
        final = Path(run_dir) / layout.checkpoint_name(step)
        if not self.args.should_save:
            return
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        tmp = temporary_name(final)
        try:
            tmp.mkdir()
            self.save_model(str(tmp), _internal_call=True)
            (tmp / "training_args.bin").unlink(missing_ok=True)
            (tmp / layout.ARGS_FILE).write_text(shared.args_json(self.args), encoding="utf-8")
            self._note_best_checkpoint(run_dir, step)
            ferry_files: set[str] = set()
            if not self.args.save_only_model:
                scaler = getattr(self.accelerator, "scaler", None)
                states = layout.States(optimizer=self.optimizer, scheduler=self.lr_scheduler, scaler=scaler, rng=True)
                ferry_files = layout.write_states(tmp, states)
            self._export_callback_states()
            self.state.save_to_json(str(tmp / layout.TRAINER_STATE_FILE))
            _finish(tmp, self.args, self.state, ferry_files)
            not_durable = layout.commit_folder(tmp, final, step)
        except BaseException as err:
            shutil.rmtree(tmp, ignore_errors=True)
            raise save_failed(err, f"saving {final.name} to {str(final)!r}", final) from err
        if self.args.push_to_hub:
            self._push_from_checkpoint(str(final))
        if not_durable is not None:
            raise not_durable  # committed, but not known durable: nothing older is deleted
        keep = {final} | ({Path(self.state.best_model_checkpoint)} if self.state.best_model_checkpoint else set())
        for folder, error in layout.rotate(Path(run_dir), self.args.save_total_limit, keep=keep):
            warnings.warn(
                f"save_total_limit={self.args.save_total_limit}: could not delete the old checkpoint {str(folder)!r} "
                f"({error.strerror or error}); delete it by hand.",
                CheckpointWarning,
                stacklevel=2,
            )

    def _note_best_checkpoint(self, run_dir: str, step: int) -> None:
        """Point ``state.best_model_checkpoint`` at the best step's folder, as the stock save does."""
        best = getattr(self.state, "best_global_step", None)
        if not best or self.args.save_strategy not in ("steps", "epoch", "best"):
            return
        folder = os.path.join(run_dir, layout.checkpoint_name(best))
        if best == step or os.path.exists(folder):  # the folder of this step is still under its temporary name
            self.state.best_model_checkpoint = folder

    def _export_callback_states(self) -> None:
        """Record the states of ``ExportableState`` callbacks (and the control) in ``state.stateful_callbacks``."""
        for callback in [*self.callback_handler.callbacks, self.control]:
            if not isinstance(callback, ExportableState):
                continue
            name = type(callback).__name__
            exported: dict[str, Any] = self.state.stateful_callbacks  # type: ignore[assignment] # a dict at run time
            if isinstance(exported.get(name), list):
                exported[name].append(callback.state())
            else:
                exported[name] = callback.state()

    # -- loading -------------------------------------------------------------------------------------------------

    def _verify(self, folder: Path) -> None:
        if not (folder / MANIFEST_FILE).exists() or folder == self._ferry_verified:
            return
        problem = layout.verify_folder(folder)
        if problem is not None:
            raise shared.damaged_error(folder, problem)
        self._ferry_verified = folder

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: nn.Module | None = None) -> None:
        """Verify a ferry folder (manifest, sizes, every checksum), then load the weights as the stock Trainer."""
        self._verify(Path(resume_from_checkpoint))
        super()._load_from_checkpoint(resume_from_checkpoint, model)

    def _load_best_model(self) -> None:
        """Verify the best checkpoint's folder, then load it as the stock Trainer (``load_best_model_at_end``)."""
        if self.state.best_model_checkpoint:
            self._verify(Path(self.state.best_model_checkpoint))
        super()._load_best_model()

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        """Load ``optimizer.safetensors`` and ``scheduler.safetensors``; a stock folder's pickles as the Trainer."""
        if checkpoint is None:
            return
        folder = Path(checkpoint)
        if not (folder / layout.OPTIMIZER_FILE).exists():
            super()._load_optimizer_and_scheduler(checkpoint)
            return
        if (folder / layout.SCHEDULER_FILE).exists():  # like the stock Trainer: both, or neither
            layout.load_states(folder, layout.States(optimizer=self.optimizer, scheduler=self.lr_scheduler))

    def _load_scaler(self, checkpoint: str | None) -> None:
        """Load ``scaler.safetensors`` into the accelerator's gradient scaler; a stock ``scaler.pt`` as the Trainer."""
        if checkpoint is None:
            return
        folder = Path(checkpoint)
        if not (folder / layout.SCALER_FILE).exists():
            super()._load_scaler(checkpoint)
            return
        layout.load_states(folder, layout.States(scaler=getattr(self.accelerator, "scaler", None)))

    def _load_rng_state(self, checkpoint: str | None) -> None:
        """Restore the RNG states of ``rng_state.safetensors``; a stock ``rng_state.pth`` as the Trainer."""
        if checkpoint is None:
            return
        if not layout.restore_rng(Path(checkpoint)):
            super()._load_rng_state(checkpoint)
