"""A tiny BERT trained by the Hugging Face Trainer with ferry's checkpoints, for test_transformers.py.

    python transformers_worker.py kill   OUT MODE STEP   train, saving every 10 steps; SIGKILL itself in the middle
                                                         of the save of STEP, right after the weights are written
    python transformers_worker.py resume OUT MODE RESULT resume_from_checkpoint=True in OUT, then train the same
                                                         run uninterrupted in a fresh folder; write both to RESULT

MODE is ``trainer`` (FerryTrainer) or ``callback`` (the stock Trainer with FerryCallback). The kill goes through a
real code path: a subclass of the trainer whose ``save_model`` (called by ``_save_checkpoint`` to write the weights,
config and training arguments) kills the process after the stock method has returned. For FerryTrainer the folder
being written then is its temporary one; for the stock Trainer it is ``checkpoint-STEP`` itself.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments

import ferry
from ferry.integrations.transformers import FerryCallback, FerryTrainer

MAX_STEPS = 40
SAVE_STEPS = 10


class Examples(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    """256 random token sequences of 16, labelled by the parity of their first token."""

    def __init__(self, count: int = 256) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 100, (count, 16), generator=generator)
        self.labels = self.ids[:, 0] % 2

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.labels[index]}


def model() -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100
    )
    return BertForSequenceClassification(config)


def arguments(out: Path, **changes: Any) -> TrainingArguments:
    settings: dict[str, Any] = {
        "output_dir": str(out),
        "use_cpu": True,
        "report_to": [],
        "disable_tqdm": True,
        "per_device_train_batch_size": 16,  # 16 steps per epoch
        "max_steps": MAX_STEPS,
        "logging_steps": 1,
        "save_steps": SAVE_STEPS,
        "learning_rate": 1e-3,
        "seed": 0,
    }
    return TrainingArguments(**{**settings, **changes})


def killing(base: type[Trainer], step: int) -> type[Trainer]:
    class Killing(base):  # type: ignore[misc, valid-type]
        def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
            super().save_model(output_dir, _internal_call)
            if self.state.global_step == step:
                Path(output_dir or ".", "killed-here").write_text(str(step))  # where the kill happened
                os.kill(os.getpid(), signal.SIGKILL)

    return Killing


class Start(TrainerCallback):
    """Notes the step training starts from (the resumed checkpoint's)."""

    step = -1

    def on_train_begin(self, args: TrainingArguments, state: Any, control: Any, **kwargs: Any) -> None:
        self.step = state.global_step


def trainer(mode: str, out: Path, base: type[Trainer] | None = None) -> Trainer:
    if mode == "trainer":
        return (base or FerryTrainer)(model=model(), args=arguments(out), train_dataset=Examples(), callbacks=[Start()])
    callbacks = [Start(), FerryCallback()]
    return (base or Trainer)(model=model(), args=arguments(out), train_dataset=Examples(), callbacks=callbacks)


def outcome(run: Trainer) -> dict[str, Any]:
    return {
        "losses": {str(entry["step"]): entry["loss"] for entry in run.state.log_history if "loss" in entry},
        "parameters": {name: p.detach().clone() for name, p in run.model.named_parameters()},
    }


def main(argv: list[str]) -> int:
    torch.set_num_threads(1)  # the test compares runs of one process with each other: same threads, same sums
    command, out, mode, last = argv[0], Path(argv[1]), argv[2], argv[3]
    if command == "kill":
        base = FerryTrainer if mode == "trainer" else Trainer
        trainer(mode, out, killing(base, int(last))).train()
        return 3  # not reached: the process kills itself
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = trainer(mode, out)
        resumed.train(resume_from_checkpoint=True)
    reference = trainer(mode, out.with_name(out.name + "-reference"))
    reference.train()
    first, second = outcome(resumed), outcome(reference)
    ferry.save({"resumed": first["parameters"], "reference": second["parameters"]}, last)
    start = next(c for c in resumed.callback_handler.callbacks if isinstance(c, Start))
    summary = {
        "resumed_from": start.step,
        "resumed_losses": first["losses"],
        "reference_losses": second["losses"],
        "warnings": [f"{w.category.__name__}: {w.message}" for w in caught if "ferry" in w.category.__module__],
    }
    Path(last).with_suffix(".json").write_text(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
