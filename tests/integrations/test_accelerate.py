"""ferry.integrations.accelerate: save_state/load_state with a real ``Accelerator(cpu=True)``.

The end-to-end test kills a training worker (accelerate_worker.py) with SIGKILL twice and resumes it with load_state
in new processes; its losses and final parameters must equal an uninterrupted run's. The others run in-process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, ProjectConfiguration, set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ferry
from _support import REPO, one_launch_at_a_time
from ferry._fs import TMP_MARKER
from ferry.checkpoint.file.kinds import sniff
from ferry.errors import (
    ArgumentError,
    CheckpointError,
    CheckpointWarning,
    CorruptCheckpointError,
    UnsafeCheckpointError,
)
from ferry.integrations.accelerate import load_state, save_state

WORKER = Path(__file__).with_name("accelerate_worker.py")
DDP_WORKER = Path(__file__).with_name("accelerate_ddp_worker.py")
#: The files of a checkpoint of the runs below (one model, optimizer, scheduler, dataloader, registered object).
FILES = [
    "custom_checkpoint_0.safetensors",
    "dataloader.safetensors",
    "manifest.json",
    "model.safetensors",
    "optimizer.safetensors",
    "random_states_0.safetensors",
    "scheduler.safetensors",
]


class Counter:
    """A registered object whose state holds what a ferry file stores: tensors, ints, tuples, int keys, inf, None."""

    def __init__(self) -> None:
        self.count = 0
        self.table: dict[int, torch.Tensor] = {0: torch.zeros(3)}
        self.meta: dict[str, Any] = {"name": "counter", "best": float("inf"), "shape": (2, 3), "note": None}

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count, "table": self.table, "meta": self.meta}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count, self.table, self.meta = state["count"], state["table"], state["meta"]


class SetHolder:
    """A registered object whose state only pickle could store: a set."""

    def state_dict(self) -> dict[str, Any]:
        return {"ok": 1, "seen": {3, 1, 2}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


@dataclass
class Run:
    accelerator: Any
    model: Any
    optimizer: Any
    scheduler: Any
    loader: Any
    counter: Counter


def make_run(
    project_dir: Path | None, *, total_limit: int | None = 2, seedable: bool = True, generator: bool = True
) -> Run:
    """A prepared model with dropout, AdamW, StepLR and a shuffled DataLoader, and a registered Counter."""
    set_seed(0)
    accelerator = Accelerator(
        cpu=True,
        project_config=ProjectConfiguration(
            project_dir=None if project_dir is None else str(project_dir),
            automatic_checkpoint_naming=project_dir is not None,
            total_limit=total_limit,
        ),
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=seedable),
    )
    inputs = torch.randn(16, 4, generator=torch.Generator().manual_seed(5))
    loader = DataLoader(
        TensorDataset(inputs, inputs.sum(1, keepdim=True)),
        batch_size=4,
        shuffle=True,
        generator=torch.Generator().manual_seed(9) if generator else None,
    )
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.2), nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2)
    prepared = accelerator.prepare(model, optimizer, loader, scheduler)
    counter = Counter()
    accelerator.register_for_checkpointing(counter)
    return Run(accelerator, prepared[0], prepared[1], prepared[3], prepared[2], counter)


def train(run: Run, epochs: int = 1) -> None:
    for _ in range(epochs):
        for x, y in run.loader:
            run.accelerator.backward(nn.functional.mse_loss(run.model(x), y))
            run.optimizer.step()
            run.scheduler.step()
            run.optimizer.zero_grad()
        run.counter.count += 1


def params(run: Run) -> list[torch.Tensor]:
    return [p.detach().clone() for p in run.model.parameters()]


def names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


# -- what is saved -----------------------------------------------------------------------------------------------------


def test_a_checkpoint_is_ferry_files_and_a_manifest_no_pickle(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    train(run)

    folder = save_state(run.accelerator)

    assert tmp_path / "checkpoints" / "checkpoint_0" == folder
    assert FILES == names(folder)
    assert ["ferry"] * (len(FILES) - 1) == [sniff(folder / name)[0] for name in FILES if name != "manifest.json"]
    ferry.verify(folder)  # the manifest's sizes and every checksum of every file
    manifest = json.loads((folder / "manifest.json").read_text())
    assert ("accelerate", 0) == (manifest["layout"], manifest["iteration"])
    assert [] == [path.name for path in tmp_path.rglob("*") if TMP_MARKER in path.name]


def test_state_round_trips_into_a_new_accelerator(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    train(run, epochs=2)
    run.counter.table[7] = torch.arange(4.0)
    run.accelerator.step = 5
    folder = save_state(run.accelerator)
    expected_params, expected_rng = params(run), torch.rand(4)
    expected_optimizer = run.optimizer.state_dict()

    other = make_run(tmp_path)  # another Accelerator, as in a new process
    assert folder == load_state(other.accelerator)

    assert all(torch.equal(a, b) for a, b in zip(expected_params, params(other), strict=True))
    assert torch.equal(expected_rng, torch.rand(4))  # torch's RNG is back where it was at the save
    restored = other.optimizer.state_dict()
    assert torch.equal(expected_optimizer["state"][0]["exp_avg"], restored["state"][0]["exp_avg"])
    assert expected_optimizer["param_groups"] == restored["param_groups"]
    assert run.scheduler.state_dict() == other.scheduler.state_dict()
    assert (2, 5) == (other.loader.iteration, other.accelerator.step)
    assert 2 == other.counter.count
    assert [0, 7] == sorted(other.counter.table)
    assert torch.equal(torch.arange(4.0), other.counter.table[7])
    assert {"name": "counter", "best": float("inf"), "shape": (2, 3), "note": None} == other.counter.meta


def test_an_epoch_boundary_resume_of_a_plain_shuffled_loader_sees_the_next_epochs_order(tmp_path: Path) -> None:
    # No seedable sampler: the order comes from the loader's generator, which stock Accelerate does not save.
    straight = make_run(tmp_path / "a", seedable=False)
    orders = [[x.tolist() for x, _ in straight.loader] for _ in range(2)]
    assert orders[0] != orders[1]

    run = make_run(tmp_path / "b", seedable=False)
    assert orders[0] == [x.tolist() for x, _ in run.loader]
    save_state(run.accelerator)
    resumed = make_run(tmp_path / "b", seedable=False)
    load_state(resumed.accelerator)
    assert 1 == resumed.loader.iteration  # the epoch counter too

    assert orders[1] == [x.tolist() for x, _ in resumed.loader]


def test_the_gradient_scaler_round_trips(tmp_path: Path) -> None:
    # Accelerate makes no GradScaler on the CPU; this is a real one where Accelerate keeps it on a GPU.
    run = make_run(tmp_path)
    run.accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=7)
    folder = save_state(run.accelerator)
    assert "scaler.safetensors" in names(folder)

    other = make_run(tmp_path)
    other.accelerator.scaler = torch.amp.GradScaler("cpu")
    load_state(other.accelerator)

    assert (1024.0, 7) == (other.accelerator.scaler.get_scale(), other.accelerator.scaler.get_growth_interval())


def test_an_unstorable_registered_object_raises_before_anything_is_written(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    run.accelerator.register_for_checkpointing(SetHolder())

    with pytest.raises(UnsafeCheckpointError) as caught:
        save_state(run.accelerator)

    message = str(caught.value)
    assert f"registered object 1 ({SetHolder.__module__}.SetHolder)" in message
    assert "state_dict()['seen'] is a set ({1, 2, 3})" in message
    assert "custom_checkpoint_1.pkl" in message
    assert "Nothing was written" in message
    assert not (tmp_path / "checkpoints").exists()
    assert 0 == run.accelerator.save_iteration


def test_several_processes_without_a_process_group_are_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make_run(tmp_path)
    monkeypatch.setattr(Accelerator, "num_processes", property(lambda self: 2))

    for call in (save_state, load_state):
        with pytest.raises(CheckpointError, match=r"cannot coordinate the 2 processes .*: no process group is up"):
            call(run.accelerator)
    assert not (tmp_path / "checkpoints").exists()


def test_an_explicit_output_dir_is_replaced_whole_but_a_folder_of_other_files_is_refused(tmp_path: Path) -> None:
    run = make_run(None)
    target = tmp_path / "ckpt"
    assert target == save_state(run.accelerator, target)
    run.counter.count = 42
    save_state(run.accelerator, target)
    other = make_run(None)
    load_state(other.accelerator, target)
    assert 42 == other.counter.count

    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    with pytest.raises(CheckpointError, match=r"holds files that are not a checkpoint .* \(todo.txt\)"):
        save_state(run.accelerator, tmp_path / "notes")
    assert ["todo.txt"] == names(tmp_path / "notes")
    with pytest.raises(ArgumentError, match="needs output_dir"):
        save_state(run.accelerator)


# -- automatic naming -------------------------------------------------------------------------------------------------


def test_naming_continues_after_the_loaded_checkpoint_and_total_limit_deletes_the_oldest(tmp_path: Path) -> None:
    first = make_run(tmp_path)
    saved = [save_state(first.accelerator).name for _ in range(3)]
    assert ["checkpoint_0", "checkpoint_1", "checkpoint_2"] == saved
    assert ["checkpoint_1", "checkpoint_2"] == names(tmp_path / "checkpoints")

    resumed = make_run(tmp_path)  # a new process: its save_iteration starts at 0
    assert 0 == resumed.accelerator.save_iteration
    assert "checkpoint_2" == load_state(resumed.accelerator).name
    assert 3 == resumed.accelerator.save_iteration
    assert "checkpoint_3" == save_state(resumed.accelerator).name
    assert ["checkpoint_2", "checkpoint_3"] == names(tmp_path / "checkpoints")

    fresh = make_run(tmp_path)  # no load_state: still never overwrites nor reuses a name
    assert "checkpoint_4" == save_state(fresh.accelerator).name
    assert ["checkpoint_3", "checkpoint_4"] == names(tmp_path / "checkpoints")


def test_an_empty_checkpoint_folder_is_skipped_and_never_pushes_a_good_one_out(tmp_path: Path) -> None:
    # what a stock accelerator.save_state killed at its start leaves: an empty checkpoint_<n> (it writes in place)
    run = make_run(tmp_path, total_limit=2)
    save_state(run.accelerator)
    run.counter.count = 1
    save_state(run.accelerator)
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "checkpoint_2").mkdir()

    other = make_run(tmp_path, total_limit=2)
    with pytest.warns(ferry.CheckpointWarning, match=r"checkpoint_2.*not a complete checkpoint"):
        assert "checkpoint_1" == load_state(other.accelerator).name
    assert 1 == other.counter.count
    assert "checkpoint_3" == save_state(other.accelerator).name
    # the limit counts checkpoints of save_state: the good checkpoint_1 stays, the empty folder is left alone
    assert ["checkpoint_1", "checkpoint_2", "checkpoint_3"] == names(checkpoints)


def test_a_half_written_folder_is_never_loaded_and_a_dead_writers_one_is_removed(tmp_path: Path) -> None:
    run = make_run(tmp_path, total_limit=None)
    save_state(run.accelerator)
    run.counter.count = 1
    save_state(run.accelerator)
    # What a save killed mid-way leaves: its temporary folder, named with the writer's pid, without a manifest.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    checkpoints = tmp_path / "checkpoints"
    leftover = checkpoints / f"checkpoint_2{TMP_MARKER}{int(dead.stdout)}-0123abcd"
    live = checkpoints / f"checkpoint_3{TMP_MARKER}{os.getpid()}-4567cdef"  # a save under way in a live process
    for folder in (leftover, live):
        shutil.copytree(checkpoints / "checkpoint_1", folder)
        (folder / "manifest.json").unlink()

    other = make_run(tmp_path)
    assert "checkpoint_1" == load_state(other.accelerator).name

    assert 1 == other.counter.count
    assert ["checkpoint_0", "checkpoint_1", live.name] == names(checkpoints)
    assert "checkpoint_2" == save_state(other.accelerator).name


def test_a_damaged_file_names_itself_or_is_skipped_for_the_previous_checkpoint(tmp_path: Path) -> None:
    run = make_run(tmp_path, total_limit=None)
    for count in range(3):
        run.counter.count = count
        save_state(run.accelerator)
    damaged = tmp_path / "checkpoints" / "checkpoint_2" / "optimizer.safetensors"
    data = bytearray(damaged.read_bytes())
    data[-3] ^= 0xFF  # one bit-flipped byte in the tensor data: the size is right, a checksum is not
    damaged.write_bytes(bytes(data))

    other = make_run(tmp_path)
    before = params(other)
    with pytest.raises(CorruptCheckpointError, match=r"optimizer\.safetensors"):
        load_state(other.accelerator, damaged.parent)
    assert all(torch.equal(a, b) for a, b in zip(before, params(other), strict=True))  # nothing was changed
    assert 0 == other.counter.count

    with pytest.warns(CheckpointWarning, match=r"skipped a damaged checkpoint and loads checkpoint_1 .*optimizer"):
        assert "checkpoint_1" == load_state(other.accelerator).name
    assert 1 == other.counter.count
    assert "checkpoint_3" == save_state(other.accelerator).name  # the damaged one's name is not reused


# -- errors -----------------------------------------------------------------------------------------------------------


def test_after_skipping_a_damaged_checkpoint_the_limit_keeps_the_good_one(tmp_path: Path) -> None:
    # found by a new user: total_limit=2 after a fallback kept the damaged newest and deleted the good one loaded
    run = make_run(tmp_path, total_limit=2)
    for count in range(2):
        run.counter.count = count
        save_state(run.accelerator)
    damaged = tmp_path / "checkpoints" / "checkpoint_1" / "model.safetensors"
    data = bytearray(damaged.read_bytes())
    data[-3] ^= 0xFF
    damaged.write_bytes(bytes(data))

    other = make_run(tmp_path, total_limit=2)
    with pytest.warns(CheckpointWarning, match="skipped a damaged checkpoint"):
        assert "checkpoint_0" == load_state(other.accelerator).name
    assert "checkpoint_2" == save_state(other.accelerator).name
    # the damaged checkpoint_1 is left for inspection and does not count: the good checkpoint_0 stays
    assert ["checkpoint_0", "checkpoint_1", "checkpoint_2"] == names(tmp_path / "checkpoints")
    assert "checkpoint_3" == save_state(other.accelerator).name
    assert ["checkpoint_1", "checkpoint_2", "checkpoint_3"] == names(tmp_path / "checkpoints")


def test_a_missing_input_dir_says_where_the_checkpoints_are(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    save_state(run.accelerator)
    save_state(run.accelerator)
    missing = tmp_path / "checkpoints" / "checkpoint_9"

    with pytest.raises(CheckpointError) as caught:
        load_state(run.accelerator, missing)

    assert str(missing) in str(caught.value)
    assert "does not exist" in str(caught.value)
    assert "checkpoint_0, checkpoint_1; or pass input_dir=None for the newest" in str(caught.value)
    assert missing == caught.value.path


def test_load_state_without_a_folder_to_read(tmp_path: Path) -> None:
    with pytest.raises(ArgumentError, match=r"needs input_dir: .*automatic_checkpoint_naming=False"):
        load_state(make_run(None).accelerator)
    with pytest.raises(CheckpointError, match=r"no checkpoint to resume from in .*the folder does not exist"):
        load_state(make_run(tmp_path).accelerator)


def test_a_folder_of_stock_accelerate_is_refused_as_unsafe(tmp_path: Path) -> None:
    run = make_run(None)
    run.accelerator.save_state(str(tmp_path / "stock"))

    with pytest.raises(UnsafeCheckpointError, match=r"written by accelerator\.save_state: .* pickles"):
        load_state(run.accelerator, tmp_path / "stock")


def test_a_checkpoint_of_other_objects_is_refused(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    save_state(run.accelerator)
    other = make_run(tmp_path)
    other.accelerator.register_for_checkpointing(Counter())

    with pytest.raises(CheckpointError, match="custom_objects: 1 saved, 2 now"):
        load_state(other.accelerator)


def test_save_hooks_are_not_called_and_a_warning_says_so(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    called = []
    run.accelerator.register_save_state_pre_hook(lambda models, weights, folder: called.append(folder))

    with pytest.warns(CheckpointWarning, match="does not call the 1 hook"):
        save_state(run.accelerator)
    assert [] == called


def test_a_mid_epoch_save_that_cannot_resume_exactly_warns(tmp_path: Path) -> None:
    run = make_run(tmp_path, seedable=False, generator=False)
    batches = iter(run.loader)
    next(batches)

    with pytest.warns(CheckpointWarning) as caught:
        save_state(run.accelerator)
    assert 2 == len(caught)
    assert "use_seedable_sampler=True" in str(caught[0].message)
    assert "generator=torch.Generator().manual_seed(seed)" in str(caught[1].message)
    list(batches)  # finish the pass: a full pass is exact
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        save_state(run.accelerator)


# -- a real kill ------------------------------------------------------------------------------------------------------


def worker(project_dir: Path, params_file: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(project_dir), str(params_file), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def events(proc: subprocess.Popen[str], *, kill_when_stalled: bool = False) -> list[dict[str, Any]]:
    """The worker's events; with ``kill_when_stalled``, SIGKILL it as soon as it reports it stalled."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(json.loads(line))
        if kill_when_stalled and "stalled" == seen[-1]["event"]:
            proc.send_signal(signal.SIGKILL)
            break
    _, stderr = proc.communicate(timeout=120)
    expected = -signal.SIGKILL if kill_when_stalled else 0
    assert expected == proc.returncode, stderr
    return seen


def of(seen: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [e for e in seen if e["event"] == event]


def losses_of(seen: list[dict[str, Any]]) -> dict[int, float]:
    return {e["step"]: e["loss"] for e in of(seen, "step")}


@pytest.mark.slow
def test_killed_twice_mid_epoch_and_resumed_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    """Dropout, a shuffled loader, Python's and NumPy's RNGs: kill at step 12, resume from checkpoint_1 (step 10).

    Then kill at step 17 (after a save inside the skip_first_batches pass), resume from checkpoint_2 (step 15).
    """
    straight_proc = worker(tmp_path / "straight", tmp_path / "straight.safetensors")
    killed_proc = worker(tmp_path / "run", tmp_path / "unused.safetensors", "--stall-at", "12")  # in parallel
    straight, killed = events(straight_proc), events(killed_proc, kill_when_stalled=True)
    resumed = events(
        worker(tmp_path / "run", tmp_path / "unused.safetensors", "--resume", "--stall-at", "17"),
        kill_when_stalled=True,
    )
    checkpoints = tmp_path / "run" / "checkpoints"
    assert ["checkpoint_1", "checkpoint_2"] == names(checkpoints)
    final = events(worker(tmp_path / "run", tmp_path / "run.safetensors", "--resume"))

    losses = losses_of(straight)
    assert list(range(1, 25)) == sorted(losses)
    for seen in (killed, resumed, final):  # every step any of them ran, the lost ones after a kill too
        got = losses_of(seen)
        assert {step: losses[step] for step in got} == got
    assert [11, 17] == [of(resumed, "step")[0]["step"], of(resumed, "step")[-1]["step"]]
    assert list(range(16, 25)) == [e["step"] for e in of(final, "step")]
    assert [losses[step] for step in range(1, 25)] == of(final, "done")[0]["history"]

    assert [str(checkpoints / "checkpoint_1"), 10, 2] == [
        of(resumed, "loaded")[0][k] for k in ("folder", "step", "save_iteration")
    ]
    assert [str(checkpoints / "checkpoint_2"), 15, 3] == [
        of(final, "loaded")[0][k] for k in ("folder", "step", "save_iteration")
    ]
    assert [(15, "checkpoint_2")] == [(e["step"], Path(e["folder"]).name) for e in of(resumed, "saved")]
    assert [(20, "checkpoint_3")] == [(e["step"], Path(e["folder"]).name) for e in of(final, "saved")]
    assert ["checkpoint_2", "checkpoint_3"] == names(checkpoints) == names(tmp_path / "straight" / "checkpoints")

    expected, got = ferry.load(tmp_path / "straight.safetensors"), ferry.load(tmp_path / "run.safetensors")
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[name], got[name]) for name in expected)


def ddp_events(project_dir: Path, params_file: Path, *extra: str) -> list[dict[str, Any]]:
    """Run accelerate_ddp_worker.py in 2 processes on the CPU (torchrun, gloo); every process's events."""
    with socket.socket() as sock:  # a free port for the rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    pythonpath = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    with one_launch_at_a_time():
        proc = _launch(port, pythonpath, project_dir, params_file, *extra)
    assert 0 == proc.returncode, proc.stderr[-4000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _launch(port: int, pythonpath: str, project_dir: Path, params_file: Path, *extra: str) -> Any:
    return subprocess.run(
        [
            *(sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"),
            *("--master_addr", "127.0.0.1", "--master_port", str(port)),
            *(str(DDP_WORKER), str(project_dir), str(params_file), *extra),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1"},
        check=False,
    )


def by_rank(seen: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return sorted(of(seen, event), key=lambda e: e["rank"])


@pytest.mark.launches
@pytest.mark.slow
def test_two_processes_save_once_with_an_rng_file_each_and_resume_like_an_uninterrupted_run(tmp_path: Path) -> None:
    """DDP on the CPU: one folder, the RNG states of each process; a bad state on process 0 stops both, unwritten."""
    first = ddp_events(tmp_path / "run", tmp_path / "straight.safetensors")

    refused = by_rank(first, "refused")
    assert [(0, "UnsafeCheckpointError"), (1, "CheckpointError")] == [(e["rank"], e["error"]) for e in refused]
    assert "registered object 0" in refused[0]["message"]
    assert "failed on rank 0 (of 2)" in refused[1]["message"]
    assert [[], []] == [e["left"] for e in refused]  # nothing written, not even the checkpoints folder

    folder = tmp_path / "run" / "checkpoints" / "checkpoint_0"
    assert [(0, str(folder)), (1, str(folder))] == [(e["rank"], e["folder"]) for e in by_rank(first, "saved")]
    assert sorted([*FILES, "random_states_1.safetensors"]) == names(folder)
    assert ["ferry"] * len(FILES) == [sniff(folder / name)[0] for name in names(folder) if name != "manifest.json"]
    ferry.verify(folder)
    assert 2 == json.loads((folder / "manifest.json").read_text())["processes"]
    assert [] == [path.name for path in tmp_path.rglob("*") if TMP_MARKER in path.name]

    resumed = ddp_events(tmp_path / "run", tmp_path / "resumed.safetensors", "--resume")
    loaded = [(e["rank"], e["folder"], e["step"], e["save_iteration"]) for e in by_rank(resumed, "loaded")]
    assert [(0, str(folder), 8, 1), (1, str(folder), 8, 1)] == loaded
    assert [12, 12] == [e["step"] for e in of(resumed, "done")]
    expected, got = ferry.load(tmp_path / "straight.safetensors"), ferry.load(tmp_path / "resumed.safetensors")
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[name], got[name]) for name in expected)


@pytest.mark.slow
def test_bench_accelerate_quick(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_accelerate.py"),
            "--quick",
            "--json",
            str(out),
            "--dir",
            str(tmp_path / "b"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
        check=False,
    )
    assert 0 == proc.returncode, proc.stderr
    report = json.loads(out.read_text())
    assert ["ferry save_state", "accelerator.save_state", "accelerator.save_state + fsync"] == list(
        report["results"]["methods"]
    )
    assert all(m["median_s"] > 0 for m in report["results"]["methods"].values())
    assert report["results"]["ratio_ferry_vs_stock"] > 0
    assert [] == list((tmp_path / "b").iterdir())
