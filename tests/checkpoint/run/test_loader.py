"""Exact resume with a plain DataLoader in ``state``, for any ``num_workers``: killed with SIGKILL, resumed, compared.

Each run trains a small model (with dropout) on a dataset whose ``__getitem__`` draws random noise from torch, NumPy
and Python's ``random`` (augmentation, as real pipelines do), checkpointing every few steps. A run killed with
SIGKILL after step K and resumed in a new process (with other seeds: a new process starts from other RNG states)
must log exactly the losses, bit for bit, of the uninterrupted run from the restored step on.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

import ferry
from ferry.checkpoint.run.loader import is_instrumented

TRAIN = textwrap.dedent(
    """
    import json, os, random, signal, sys, warnings
    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset
    import ferry

    warnings.simplefilter("error", ferry.CheckpointWarning)  # a resume ferry calls inexact fails the test
    torch.set_num_threads(1)
    config = json.loads(sys.argv[1])
    seed = config["seed"]
    random.seed(seed); np.random.seed(seed); torch.manual_seed(seed)

    class Noisy(Dataset):
        def __len__(self):
            return 100

        def __getitem__(self, i):
            noise = torch.randn(6) + float(np.random.rand()) + random.random()
            return torch.full((6,), i / 100.0) + 0.1 * noise, i % 3

    dataset = Noisy()
    sampler = ferry.ResumableSampler(dataset, seed=0) if config["sampler"] == "resumable" else None
    generator = torch.Generator().manual_seed(5) if config["sampler"] == "generator" else None
    workers = config["workers"]
    loader = DataLoader(
        dataset, batch_size=8, sampler=sampler, shuffle=sampler is None, generator=generator, num_workers=workers,
        persistent_workers=config.get("persistent", False), pin_memory=config.get("pin_memory", False),
        prefetch_factor=config.get("prefetch_factor") if workers else None,
    )
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.2), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(seed)
    state = {"model": model, "optimizer": optimizer, "loader": loader}
    if sampler is not None:
        state["sampler"] = sampler
    ckpt = ferry.Checkpointer(config["dir"], every_steps=config["every"])
    step = ckpt.restore(state) or 0
    log = {"start": step, "losses": {}}
    while step < config["steps"]:
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            log["losses"][step] = loss.item()
            ckpt.save_if_due(step, state)
            if step == config.get("kill_after"):
                ckpt.wait()
                with open(config["out"], "w") as handle:
                    json.dump(log, handle)
                os.kill(os.getpid(), signal.SIGKILL)
            if step == config["steps"]:
                break
    ckpt.close()
    with open(config["out"], "w") as handle:
        json.dump(log, handle)
    """
)

STEPS = 40  # 13 batches an epoch (100 samples, batch 8): the runs cross three epoch boundaries
#: (name, loader settings); "both_kills": killed mid-epoch and at an epoch boundary, else mid-epoch only (each kill
#: costs two more processes)
LOADERS = [
    ("0 workers", {"workers": 0, "sampler": "resumable"}),
    ("2 workers, prefetch 3", {"workers": 2, "sampler": "resumable", "prefetch_factor": 3}),
    (
        "4 workers, persistent, pinned",
        {"workers": 4, "sampler": "resumable", "persistent": True, "pin_memory": True, "both_kills": True},
    ),
    ("2 workers, shuffle=True, global RNG, persistent", {"workers": 2, "sampler": "global", "persistent": True}),
    ("2 workers, shuffle=True, own generator", {"workers": 2, "sampler": "generator"}),
]
#: (name, checkpoint every, killed after): restored mid-epoch (step 15 of 13-batch epochs) or at an epoch's end (26)
KILLS = [("mid-epoch", 5, 17), ("epoch boundary", 13, 29)]


def _start(script: Path, config: dict) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(script), json.dumps(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(proc: subprocess.Popen[str], *, killed: bool = False) -> None:
    _, err = proc.communicate(timeout=240)
    expected = -signal.SIGKILL if killed else 0
    assert expected == proc.returncode, err[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "loader"), LOADERS, ids=[name for name, _ in LOADERS])
def test_killed_run_resumes_bit_for_bit(tmp_path: Path, name: str, loader: dict) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    kills = KILLS if loader.get("both_kills") else KILLS[:1]
    straight = {**loader, "seed": 0, "dir": str(tmp_path / "straight"), "every": 7, "steps": STEPS}
    straight["out"] = str(tmp_path / "straight.json")
    first = [
        {**loader, "seed": 0, "dir": str(tmp_path / kill), "every": every, "steps": STEPS, "kill_after": after,
         "out": str(tmp_path / f"{kill}-first.json")}
        for kill, every, after in kills
    ]  # fmt: skip
    procs = [_start(script, straight), *(_start(script, config) for config in first)]
    _finish(procs[0])
    for proc in procs[1:]:
        _finish(proc, killed=True)
    then = [
        {**config, "seed": 7, "kill_after": None, "out": config["out"].replace("-first", "-then")} for config in first
    ]
    for proc in [_start(script, config) for config in then]:
        _finish(proc)
    full = json.loads(Path(straight["out"]).read_text())["losses"]
    for (kill, every, after), config in zip(kills, then, strict=True):
        resumed = json.loads(Path(config["out"]).read_text())
        restored = after // every * every
        assert restored == resumed["start"], kill
        assert {s: full[s] for s in resumed["losses"]} == resumed["losses"], f"{name}, {kill}"
        assert len(resumed["losses"]) == STEPS - restored


class Squares(Dataset):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> int:
        return i * i


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(10))


def test_the_checkpointer_prepares_loaders_at_restore_even_without_a_checkpoint(tmp_path: Path) -> None:
    loader = DataLoader(Squares(), batch_size=2)
    assert ferry.Checkpointer(tmp_path).restore({"loader": loader}) is None
    assert is_instrumented(loader)
    assert isinstance(loader, DataLoader)
    assert [[0, 1], [4, 9], [16, 25], [36, 49], [64, 81]] == [b.tolist() for b in loader]


def test_a_loader_first_seen_while_iterating_warns_at_save(tmp_path: Path) -> None:
    loader = DataLoader(Squares(), batch_size=2)
    batches = iter(loader)
    next(batches)
    with ferry.Checkpointer(tmp_path) as ckpt, pytest.warns(ferry.CheckpointWarning, match=r"restore\(state\) before"):
        ckpt.save(1, {"loader": loader})


def test_a_loader_first_seen_before_iterating_saves_quietly(tmp_path: Path) -> None:
    loader = DataLoader(Squares(), batch_size=2)
    with ferry.Checkpointer(tmp_path) as ckpt, warnings.catch_warnings():
        warnings.simplefilter("error")
        ckpt.save(1, {"loader": loader})


def test_an_iterable_dataset_warns_that_the_resume_is_not_exact(tmp_path: Path) -> None:
    loader = DataLoader(Stream(), batch_size=2)
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.restore({"loader": loader})
        with pytest.warns(ferry.CheckpointWarning, match="IterableDataset.*StatefulDataLoader"):
            ckpt.save(1, {"loader": loader})


def test_a_resumed_pass_skips_what_the_loop_had_and_then_goes_on(tmp_path: Path) -> None:
    def make() -> DataLoader:
        return DataLoader(Squares(), batch_size=3, shuffle=True, generator=torch.Generator().manual_seed(0))

    loader = make()
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.restore({"loader": loader})
        it = iter(loader)
        seen = [next(it).tolist(), next(it).tolist()]
        ckpt.save(2, {"loader": loader})
        rest = [b.tolist() for b in it]
        following = [b.tolist() for b in loader]
    resumed = make()
    assert 2 == ferry.Checkpointer(tmp_path).restore({"loader": resumed})
    assert rest == [b.tolist() for b in resumed]
    assert following == [b.tolist() for b in resumed]
    assert sorted(x for batch in seen + rest for x in batch) == [i * i for i in range(10)]


def test_a_state_of_another_kind_is_refused(tmp_path: Path) -> None:
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {"loader": torch.Generator()})
    with pytest.raises(ferry.CheckpointError, match="did not save a DataLoader under 'loader'"):
        ferry.Checkpointer(tmp_path).restore({"loader": DataLoader(Squares())})
