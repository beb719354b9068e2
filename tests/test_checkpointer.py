import json
import os
import random

import numpy as np
import pytest
import torch
from torch import nn

import ferry
from ferry.checkpoint.checkpointer import STATE_FILE


def make_run(seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    return model, optimizer, scheduler


def train_step(model, optimizer, scheduler):
    x = torch.randn(16, 4)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss.item()


def test_save_commits_a_zero_padded_step_folder(tmp_path):
    model, optimizer, _ = make_run()
    ckpt = ferry.Checkpointer(tmp_path / "run")
    folder = ckpt.save(42, {"model": model, "optimizer": optimizer, "epoch": 3})
    assert folder == tmp_path / "run" / "step-000000042"
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", STATE_FILE]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["step"] == 42
    assert manifest["objects"] == ["model", "optimizer"]
    assert manifest["values"] == ["epoch"]
    assert ckpt.latest() == folder
    assert ckpt.steps() == [42]


def test_restore_with_nothing_saved_returns_none(tmp_path):
    model, _, _ = make_run()
    assert ferry.Checkpointer(tmp_path).restore({"model": model}) is None
    assert ferry.Checkpointer(tmp_path).latest() is None


def test_restore_loads_objects_in_place_and_writes_back_values(tmp_path):
    model, optimizer, scheduler = make_run(0)
    for _ in range(3):
        train_step(model, optimizer, scheduler)
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(3, {"model": model, "optimizer": optimizer, "scheduler": scheduler, "best": float("inf"), "tag": "a"})

    model2, optimizer2, scheduler2 = make_run(1)
    state = {"model": model2, "optimizer": optimizer2, "scheduler": scheduler2, "best": 0.0, "tag": None}
    assert ckpt.restore(state) == 3
    assert state["model"] is model2
    assert state["best"] == float("inf")
    assert state["tag"] == "a"
    for a, b in zip(model.state_dict().values(), model2.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert scheduler2.state_dict() == scheduler.state_dict()
    assert optimizer2.state_dict()["param_groups"] == optimizer.state_dict()["param_groups"]


def test_exact_resume_matches_uninterrupted_run(tmp_path):
    # Uninterrupted: 6 steps. Interrupted: 3 steps, save, a fresh process state, restore, 3 more steps.
    model, optimizer, scheduler = make_run(0)
    straight = [train_step(model, optimizer, scheduler) for _ in range(6)]

    model, optimizer, scheduler = make_run(0)
    first = [train_step(model, optimizer, scheduler) for _ in range(3)]
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(3, {"model": model, "optimizer": optimizer, "scheduler": scheduler})
    random.random()
    np.random.rand()
    torch.rand(5)  # disturb every generator: restore must undo this
    model, optimizer, scheduler = make_run(123)
    assert ckpt.restore({"model": model, "optimizer": optimizer, "scheduler": scheduler}) == 3
    rest = [train_step(model, optimizer, scheduler) for _ in range(3)]
    assert straight == first + rest


def test_rng_states_of_python_numpy_and_torch_are_restored(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    ckpt.save(0, {})
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    ckpt.restore({})
    assert expected == (random.random(), np.random.rand(), torch.rand(1).item())


def test_keep_last_deletes_oldest_by_numeric_step(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path, keep_last=2)
    for step in (9, 10, 100, 1000):  # lexical order of unpadded names would get this wrong
        ckpt.save(step, {"x": step})
    assert ckpt.steps() == [100, 1000]


def test_saving_the_same_step_again_replaces_it(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(5, {"x": 1})
    ckpt.save(5, {"x": 2})
    state = {"x": 0}
    assert ckpt.restore(state) == 5
    assert state["x"] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["step-000000005"]


def test_restore_specific_step_and_missing_step(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"x": 1})
    ckpt.save(2, {"x": 2})
    state = {"x": 0}
    assert ckpt.restore(state, step=1) == 1
    assert state["x"] == 1
    with pytest.raises(ferry.CheckpointError, match=r"no complete checkpoint for step 7.*\[1, 2\]"):
        ckpt.restore(state, step=7)


def test_name_absent_from_checkpoint_raises(tmp_path):
    model, optimizer, _ = make_run()
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"model": model})
    with pytest.raises(ferry.CheckpointError, match=r"has no 'optimizer'; it holds 'model'"):
        ckpt.restore({"model": model, "optimizer": optimizer})


def test_names_saved_but_not_asked_for_are_left_alone(tmp_path):
    model, optimizer, _ = make_run()
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"model": model, "optimizer": optimizer, "epoch": 4})
    assert ckpt.restore({"model": make_run(5)[0]}) == 1


@pytest.mark.parametrize("keep_last", [0, -1, 1.5, True])
def test_bad_keep_last(tmp_path, keep_last):
    with pytest.raises(ferry.CheckpointError, match="keep_last"):
        ferry.Checkpointer(tmp_path, keep_last=keep_last)


@pytest.mark.parametrize("step", [-1, 1.0, "3", None])
def test_bad_step(tmp_path, step):
    with pytest.raises(ferry.CheckpointError, match="step"):
        ferry.Checkpointer(tmp_path).save(step, {})


def test_unsaveable_value_leaves_no_folder(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"x": 1})
    with pytest.raises(ferry.CheckpointError):
        ckpt.save(2, {"x": object()})
    assert [p.name for p in tmp_path.iterdir()] == ["step-000000001"]


def test_incomplete_and_temporary_folders_are_never_listed(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    good = ckpt.save(1, {"x": 1})
    # a crashed save: temporary name of a dead process, and a step folder whose manifest is missing
    (tmp_path / "step-000000002.ferry-tmp-999999999-abcd").mkdir()
    broken = tmp_path / "step-000000003"
    broken.mkdir()
    (broken / STATE_FILE).write_bytes(b"partial")
    assert ckpt.latest() == good
    assert ckpt.steps() == [1]
    state = {"x": 0}
    assert ckpt.restore(state) == 1
    ferry.Checkpointer(tmp_path)  # a new start removes leftovers of dead processes
    assert not (tmp_path / "step-000000002.ferry-tmp-999999999-abcd").exists()


def test_truncated_state_file_is_not_latest(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"x": 1})
    second = ckpt.save(2, {"x": 2})
    with open(second / STATE_FILE, "r+b") as handle:
        handle.truncate(100)
    assert ckpt.latest() == tmp_path / "step-000000001"


def test_bit_flip_is_caught_on_restore(tmp_path):
    model, _, _ = make_run()
    ckpt = ferry.Checkpointer(tmp_path)
    folder = ckpt.save(1, {"model": model})
    data = bytearray((folder / STATE_FILE).read_bytes())
    data[-10] ^= 0xFF
    (folder / STATE_FILE).write_bytes(bytes(data))
    with pytest.raises(ferry.CorruptCheckpointError):
        ckpt.restore({"model": model})


def test_failed_rename_keeps_previous_checkpoint(tmp_path, monkeypatch):
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"x": 1})

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(ferry.CheckpointError, match=r"previous checkpoints are untouched.*No space left on device"):
        ckpt.save(2, {"x": 2})
    monkeypatch.undo()
    assert ckpt.steps() == [1]
    assert [p.name for p in tmp_path.iterdir()] == ["step-000000001"]


def test_tensor_value_goes_to_device_of_live_tensor(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"t": torch.ones(2)})
    state = {"t": torch.zeros(2, device="meta")}
    ckpt.restore(state)
    assert state["t"].device.type == "meta"
