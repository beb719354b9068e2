"""ferry.integrations.transformers on a real Trainer: a tiny BERT built from a config, 256 synthetic examples, CPU.

16 steps per epoch, 40 steps in all, a checkpoint every 10 (or 8) steps. Both pieces are tested the same way:
``trainer`` is FerryTrainer, ``callback`` the stock Trainer with FerryCallback.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("transformers")

from safetensors import safe_open
from transformers import BertForSequenceClassification, Trainer, TrainerCallback
from transformers.trainer_utils import get_last_checkpoint

import ferry
from _support import REPO
from ferry.cli.ckpt import main as ckpt
from ferry.errors import CheckpointWarning, CorruptCheckpointError
from ferry.integrations.transformers import FerryCallback, FerryTrainer
from integrations import transformers_worker as worker

MODES = ["trainer", "callback"]
WORKER = Path(worker.__file__)
#: what each checkpoint folder holds: the model as save_pretrained writes it, ferry files and JSON, no pickle
FILES = {
    "config.json",
    "model.safetensors",
    "optimizer.safetensors",
    "scheduler.safetensors",
    "rng_state.safetensors",
    "trainer_state.json",
    "training_args.json",
    "manifest.json",
}


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Runs compared bitwise use the same thread count; one thread is also the fastest on a busy 2-core VM."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class Stop(TrainerCallback):
    """Stops training after ``step``, as a preempted job would (its last checkpoint is that step's)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == self.step:
            control.should_training_stop = True


def build(mode: str, out: Path, *, callbacks: tuple[TrainerCallback, ...] = (), **changes: Any) -> Trainer:
    """A FerryTrainer (``trainer``) or a Trainer with FerryCallback (``callback``) on the worker's model and data."""
    kwargs: dict[str, Any] = {"model": worker.model(), "train_dataset": worker.Examples()}
    if "compute_metrics" in changes:
        kwargs["compute_metrics"] = changes.pop("compute_metrics")
    if "eval_strategy" in changes:
        kwargs["eval_dataset"] = worker.Examples(64)
    kwargs["args"] = worker.arguments(out, **changes)
    if mode == "trainer":
        return FerryTrainer(**kwargs, callbacks=list(callbacks))
    return Trainer(**kwargs, callbacks=[*callbacks, FerryCallback()])


def losses(run: Trainer) -> dict[int, float]:
    return {entry["step"]: entry["loss"] for entry in run.state.log_history if "loss" in entry}


def assert_same_run(reference: Trainer, resumed: Trainer) -> None:
    assert worker.MAX_STEPS == resumed.state.global_step
    assert losses(reference) == losses(resumed)
    for (name, expected), actual in zip(reference.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(expected, actual), name


def flip(file: Path, at: int = -3) -> None:
    data = bytearray(file.read_bytes())
    data[at] ^= 0xFF
    file.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Trainer:
    """The uninterrupted run, saving nothing (the stock Trainer)."""
    run = Trainer(
        model=worker.model(),
        args=worker.arguments(tmp_path_factory.mktemp("reference"), save_strategy="no"),
        train_dataset=worker.Examples(),
    )
    run.train()
    return run


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Trainer]]:
    """For each mode, a run stopped after step 20 (mid-epoch 2): checkpoint-10 and checkpoint-20 in its folder."""
    runs = {}
    for mode in MODES:
        out = tmp_path_factory.mktemp(mode) / "out"
        run = build(mode, out, callbacks=(Stop(20),))
        run.train()
        runs[mode] = (out, run)
    return runs


def copy_of(stopped: dict[str, tuple[Path, Trainer]], mode: str, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(stopped[mode][0], out)
    return out


# -- resuming exactly ------------------------------------------------------------------------------------------------

#: (mode, save_steps, the step the first run stops at): mid-epoch (4 batches into epoch 2) and at an epoch's end
RESUMES = [(mode, 10, 20) for mode in MODES] + [(mode, 8, 16) for mode in MODES]


@pytest.mark.parametrize(("mode", "save_steps", "stop"), RESUMES)
def test_resume_matches_the_uninterrupted_run_bitwise(
    reference: Trainer, tmp_path: Path, mode: str, save_steps: int, stop: int
) -> None:
    out = tmp_path / "out"
    build(mode, out, callbacks=(Stop(stop),), save_steps=save_steps).train()
    assert f"checkpoint-{stop}" == Path(str(get_last_checkpoint(str(out)))).name
    resumed = build(mode, out, save_steps=save_steps)
    resumed.train(resume_from_checkpoint=True)
    assert_same_run(reference, resumed)


@pytest.mark.parametrize("mode", MODES)
def test_resume_from_an_older_folder_saves_the_newer_step_again(
    reference: Trainer, stopped: dict[str, tuple[Path, Trainer]], tmp_path: Path, capsys: Any, mode: str
) -> None:
    out = copy_of(stopped, mode, tmp_path)
    resumed = build(mode, out)
    resumed.train(resume_from_checkpoint=str(out / "checkpoint-10"))  # checkpoint-20 exists and is saved anew
    assert_same_run(reference, resumed)
    assert FILES == {path.name for path in (out / "checkpoint-20").iterdir()}
    capsys.readouterr()
    assert 0 == ckpt(["verify", str(out)])
    assert "all 4 verified" in capsys.readouterr().out


@pytest.mark.parametrize("mode", MODES)
def test_a_run_saved_by_the_stock_trainer_resumes_exactly(reference: Trainer, tmp_path: Path, mode: str) -> None:
    out = tmp_path / "out"
    stock = worker.arguments(out)
    Trainer(model=worker.model(), args=stock, train_dataset=worker.Examples(), callbacks=[Stop(20)]).train()
    assert "optimizer.pt" in {path.name for path in (out / "checkpoint-20").iterdir()}
    resumed = build(mode, out)
    resumed.train(resume_from_checkpoint=True)  # the pickles, read as the stock Trainer reads them
    assert_same_run(reference, resumed)
    assert "manifest.json" in {path.name for path in (out / "checkpoint-30").iterdir()}


def test_the_callback_warns_when_it_cannot_see_the_resumed_folder(
    stopped: dict[str, tuple[Path, Trainer]], tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(stopped["callback"][0] / "checkpoint-20", elsewhere)
    run = build("callback", tmp_path / "out", callbacks=(Stop(21),))
    with pytest.warns(CheckpointWarning, match=r"resumes at step 20 with an empty optimizer state.*FerryTrainer"):
        run.train(resume_from_checkpoint=str(elsewhere))


# -- what a checkpoint folder holds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_checkpoint_folders_hold_no_pickle(stopped: dict[str, tuple[Path, Trainer]], mode: str) -> None:
    out, run = stopped[mode]
    assert ["checkpoint-10", "checkpoint-20"] == sorted(path.name for path in out.iterdir())
    for folder in out.iterdir():
        assert FILES == {path.name for path in folder.iterdir()}
        for path in folder.iterdir():
            head = path.read_bytes()[:2]
            assert head not in (b"PK", b"\x80\x02"), f"{path.name} is a torch.save zip or a pickle"
    folder = out / "checkpoint-20"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert ("transformers", 20) == (manifest["layout"], manifest["step"])
    assert FILES - {"manifest.json"} == set(manifest["files"])
    hashed = {name for name, entry in manifest["files"].items() if "xxh3_64" in entry}
    assert {"config.json", "model.safetensors", "trainer_state.json", "training_args.json"} == hashed
    with safe_open(str(folder / "model.safetensors"), "pt") as weights:
        assert {"format": "pt"} == weights.metadata()
    optimizer = ferry.load(folder / "optimizer.safetensors")
    assert run.optimizer.state_dict()["param_groups"] == optimizer["param_groups"]
    assert 20 == ferry.load(folder / "scheduler.safetensors")["last_epoch"]
    assert {"python", "numpy", "torch"} <= ferry.load(folder / "rng_state.safetensors").keys()
    assert str(out) == json.loads((folder / "training_args.json").read_text())["output_dir"]
    assert 20 == json.loads((folder / "trainer_state.json").read_text())["global_step"]


def test_a_gradient_scaler_round_trips_through_its_ferry_file(tmp_path: Path) -> None:
    # The Trainer has a scaler only for fp16 on a GPU; its state goes through the same two functions.
    from ferry.integrations import _trainer_folder as layout

    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=7)
    loss = torch.nn.Parameter(torch.ones(())) * 3
    scaler.scale(loss)  # creates the scale tensor, as the first training step does
    scaler.update(2.0**9)
    assert {layout.SCALER_FILE} == layout.write_states(tmp_path, layout.States(scaler=scaler))
    restored = torch.amp.GradScaler("cpu")
    layout.load_states(tmp_path, layout.States(scaler=restored))
    assert scaler.state_dict() == restored.state_dict()
    assert 2.0**9 == restored.get_scale()


@pytest.mark.parametrize("mode", MODES)
def test_from_pretrained_loads_a_checkpoint_folder(stopped: dict[str, tuple[Path, Trainer]], mode: str) -> None:
    out, run = stopped[mode]
    loaded = BertForSequenceClassification.from_pretrained(out / "checkpoint-20")
    for (name, expected), actual in zip(run.model.named_parameters(), loaded.parameters(), strict=True):
        assert torch.equal(expected, actual), name


# -- save_total_limit, the best checkpoint, ferry ckpt ----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_save_total_limit_keeps_the_newest_and_the_best(tmp_path: Path, capsys: Any, mode: str) -> None:
    scores = itertools.chain([5.0, 1.0, 2.0, 3.0], itertools.repeat(0.0))  # the best (max) is the first evaluation

    def score(prediction: Any) -> dict[str, float]:
        return {"score": next(scores)}

    out = tmp_path / "out"
    run = build(
        mode,
        out,
        eval_strategy="steps",
        eval_steps=10,
        save_total_limit=2,
        load_best_model_at_end=True,
        metric_for_best_model="score",
        greater_is_better=True,
        compute_metrics=score,
    )
    run.train()
    assert ["checkpoint-10", "checkpoint-40"] == sorted(path.name for path in out.iterdir())
    assert str(out / "checkpoint-10") == run.state.best_model_checkpoint

    capsys.readouterr()  # the training log
    assert 0 == ckpt(["ls", str(out), "--json"])
    listing = json.loads(capsys.readouterr().out)
    rows = {row["step"]: row for row in listing["checkpoints"]}
    assert [10, 40] == sorted(rows)
    assert all(row["complete"] for row in rows.values())
    assert "best" in rows[10]["kept_by"]
    assert {"eval_score": 5.0} == rows[10]["metrics"]
    assert rows[40]["newest"]
    assert {"keep_last": 2, "keep_every": None, "keep_best": ["eval_score", "max"]} == listing["policy"]

    assert 0 == ckpt(["verify", str(out / "checkpoint-40"), "--json"])
    (check,) = json.loads(capsys.readouterr().out)["checked"]
    assert ("transformers Trainer checkpoint", True) == (check["kind"], check["ok"])
    assert 0 == ckpt(["verify", str(out)])
    assert "all 2 verified" in capsys.readouterr().out


# -- damage, and saves cut off ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("damaged", ["model.safetensors", "optimizer.safetensors", "trainer_state.json"])
def test_a_damaged_file_fails_verification_and_an_explicit_resume(
    stopped: dict[str, tuple[Path, Trainer]], tmp_path: Path, capsys: Any, damaged: str
) -> None:
    out = copy_of(stopped, "trainer", tmp_path)
    flip(out / "checkpoint-20" / damaged, at=-3 if damaged != "trainer_state.json" else 40)
    assert 1 == ckpt(["verify", str(out), "--json"])
    checks = {Path(check["path"]).name: check for check in json.loads(capsys.readouterr().out)["checked"]}
    assert (True, False) == (checks["checkpoint-10"]["ok"], checks["checkpoint-20"]["ok"])
    assert damaged in checks["checkpoint-20"]["problem"]
    with pytest.raises(CorruptCheckpointError, match=r"checkpoint-20' fails verification: .*checkpoint-10"):
        build("trainer", out).train(resume_from_checkpoint=str(out / "checkpoint-20"))


def test_a_damaged_newest_checkpoint_is_skipped_by_ferry_trainer(
    reference: Trainer, stopped: dict[str, tuple[Path, Trainer]], tmp_path: Path
) -> None:
    out = copy_of(stopped, "trainer", tmp_path)
    flip(out / "checkpoint-20" / "model.safetensors")
    resumed = build("trainer", out)
    with pytest.warns(
        CheckpointWarning, match=r"checkpoint-20' is skipped: model.safetensors is damaged.*checkpoint-10"
    ):
        resumed.train(resume_from_checkpoint=True)
    assert_same_run(reference, resumed)  # resumed from step 10: still the same run


def test_a_damaged_newest_checkpoint_stops_the_stock_trainer_with_a_clear_error(
    stopped: dict[str, tuple[Path, Trainer]], tmp_path: Path
) -> None:
    out = copy_of(stopped, "callback", tmp_path)
    flip(out / "checkpoint-20" / "optimizer.safetensors")
    with pytest.raises(CorruptCheckpointError, match=r"checkpoint-20' fails verification: .*resume_from_checkpoint="):
        build("callback", out).train(resume_from_checkpoint=True)  # get_last_checkpoint picks checkpoint-20


def test_a_cut_off_stock_save_is_set_aside_when_the_trainer_is_built(
    stopped: dict[str, tuple[Path, Trainer]], tmp_path: Path
) -> None:
    out = copy_of(stopped, "callback", tmp_path)
    (out / "checkpoint-30").mkdir()  # what a kill leaves while the stock Trainer writes: config.json only
    shutil.copy(out / "checkpoint-20" / "config.json", out / "checkpoint-30")
    with pytest.warns(CheckpointWarning, match=r"checkpoint-30' holds a checkpoint whose save did not finish"):
        build("callback", out)
    assert "checkpoint-20" == Path(str(get_last_checkpoint(str(out)))).name
    (unfinished,) = out.glob("checkpoint-30.ferry-unfinished-*")
    assert ["config.json"] == [path.name for path in unfinished.iterdir()]


# -- a process killed in the middle of a save (subprocesses) -----------------------------------------------------------


def run_workers(runs: dict[str, list[str]], logs: Path) -> dict[str, tuple[int, str]]:
    """Run the worker once per entry, all at once; return each one's exit status and output."""
    processes = {}
    try:
        for key, args in runs.items():
            with open(logs / f"{key}.log", "w") as log:
                command = [sys.executable, str(WORKER), *args]
                processes[key] = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        codes = {key: process.wait(timeout=240) for key, process in processes.items()}
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    return {key: (code, (logs / f"{key}.log").read_text()) for key, code in codes.items()}


@pytest.mark.slow
def test_a_kill_during_a_save_leaves_no_folder_a_resume_would_pick(tmp_path: Path) -> None:
    killed = run_workers({mode: ["kill", str(tmp_path / mode), mode, "30"] for mode in MODES}, tmp_path)
    for returncode, output in killed.values():
        assert -9 == returncode, output[-2000:]
    trainer, callback = tmp_path / "trainer", tmp_path / "callback"
    # FerryTrainer: checkpoint-30 was still under its temporary name, holding the weights when the kill came
    assert ["checkpoint-10", "checkpoint-20"] == sorted(
        p.name for p in trainer.glob("checkpoint-*") if "." not in p.name
    )
    (tmp,) = trainer.glob("checkpoint-30.ferry-tmp-*")
    assert {"killed-here", "model.safetensors"} <= {path.name for path in tmp.iterdir()}
    # the stock Trainer with FerryCallback: the stock save writes checkpoint-30 in place (half a folder)
    assert {"killed-here", "model.safetensors"} <= {path.name for path in (callback / "checkpoint-30").iterdir()}
    assert not (callback / "checkpoint-30" / "trainer_state.json").exists()

    runs = {mode: ["resume", str(tmp_path / mode), mode, str(tmp_path / f"{mode}.safetensors")] for mode in MODES}
    resumed = run_workers(runs, tmp_path)
    for mode, (returncode, output) in resumed.items():
        assert 0 == returncode, output[-2000:]
        summary = json.loads((tmp_path / f"{mode}.json").read_text())
        assert 20 == summary["resumed_from"]
        assert summary["reference_losses"] == summary["resumed_losses"]
        parameters = ferry.load(tmp_path / f"{mode}.safetensors")
        for name, expected in parameters["reference"].items():
            assert torch.equal(expected, parameters["resumed"][name]), name
    assert not list(trainer.glob("*.ferry-tmp-*"))  # the dead writer's temporary folder is gone
    (warning,) = json.loads((tmp_path / "callback.json").read_text())["warnings"]
    assert "checkpoint-30' holds a checkpoint whose save did not finish" in warning
    assert ["checkpoint-30.ferry-unfinished"] == [p.name[:30] for p in callback.glob("checkpoint-30.*")]


# -- the benchmark ----------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_benchmark_quick(tmp_path: Path) -> None:
    out, work = tmp_path / "bench.json", tmp_path / "work"
    script = REPO / "benchmarks" / "bench_transformers.py"
    options = ["--quick", "--repeat", "1", "--dir", str(work), "--json", str(out)]
    proc = subprocess.run([sys.executable, str(script), *options], capture_output=True, text=True, timeout=300)
    assert 0 == proc.returncode, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["quick"]
    assert {"stock", "stock+sync", "ferry", "stock+callback"} == set(report["results"]["methods"])
    assert {} == report["errors"]
    assert report["results"]["ratio_ferry_vs_stock"] > 0
    assert "| ferry / stock |" in proc.stdout
    assert [] == list(work.iterdir())  # the run's folder is removed
