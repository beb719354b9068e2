import errno
import json
import os
import random
import shutil
import threading

import numpy as np
import pytest
import torch
from torch import nn

import ferry
from ferry.checkpoint.folder import STATE_FILE
from ferry.checkpoint.run import checkpointer, pruning


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
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("step-")] == ["step-000000005"]


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
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("step-")] == ["step-000000001"]


def test_incomplete_and_temporary_folders_are_never_listed(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    good = ckpt.save(1, {"x": 1})
    # a crashed save: temporary name of a dead process, and a step folder whose manifest is missing
    (tmp_path / "step-000000002.ferry-tmp-999999999-abcd").mkdir()
    broken = tmp_path / "step-000000003"
    broken.mkdir()
    (broken / STATE_FILE).write_bytes(b"partial")
    assert ckpt.steps() == [1]
    with pytest.warns(ferry.CheckpointWarning, match=r"step-000000003.*incomplete"):
        assert ckpt.latest() == good
    state = {"x": 0}
    with pytest.warns(ferry.CheckpointWarning, match=r"step-000000003.*incomplete"):
        assert ckpt.restore(state) == 1
    ckpt.close()
    ferry.Checkpointer(tmp_path).close()  # a new start removes leftovers of dead processes
    assert not (tmp_path / "step-000000002.ferry-tmp-999999999-abcd").exists()


def test_truncated_state_file_is_not_latest(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"x": 1})
    second = ckpt.save(2, {"x": 2})
    with open(second / STATE_FILE, "r+b") as handle:
        handle.truncate(100)
    with pytest.warns(ferry.CheckpointWarning, match=r"step-000000002.*incomplete"):
        assert ckpt.latest() == tmp_path / "step-000000001"


def test_bit_flip_is_caught_on_restore(tmp_path):
    model, _, _ = make_run()
    ckpt = ferry.Checkpointer(tmp_path)
    folder = ckpt.save(1, {"model": model})
    data = bytearray((folder / STATE_FILE).read_bytes())
    data[-10] ^= 0xFF
    (folder / STATE_FILE).write_bytes(bytes(data))
    with pytest.warns(ferry.CheckpointWarning, match="step-000000001"), pytest.raises(ferry.CorruptCheckpointError):
        ckpt.restore({"model": model})


def test_corrupt_newest_checkpoint_falls_back_to_the_previous_one_with_a_warning(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"x": torch.ones(4)})
    newest = ckpt.save(2, {"x": torch.full((4,), 2.0)})
    data = bytearray((newest / STATE_FILE).read_bytes())
    data[-3] ^= 0x01
    (newest / STATE_FILE).write_bytes(bytes(data))
    state = {"x": torch.zeros(4)}
    with pytest.warns(ferry.CheckpointWarning, match=r"step-000000002.*does not verify"):
        assert ckpt.restore(state) == 1
    assert torch.equal(state["x"], torch.ones(4))
    with pytest.raises(ferry.CorruptCheckpointError):
        ckpt.restore(state, step=2)  # asked for explicitly: no fallback


def test_after_a_rollback_the_new_saves_are_newest_and_kept(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path, keep_last=2)
    for step in (10, 20, 30):
        ckpt.save(step, {"s": step})
    state = {"s": 0}
    assert ckpt.restore(state, step=20) == 20
    for step in (21, 22, 23):
        ckpt.save(step, {"s": step})
    assert ckpt.steps() == [22, 23]
    assert ckpt.latest() == ckpt.path_for(23)
    assert ckpt.restore(state) == 23


def test_saving_a_lower_step_still_honours_keep_last(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path, keep_last=2)
    for step in (5, 10, 3):
        ckpt.save(step, {"s": step})
    assert ckpt.steps() == [10, 3]


def step_names(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("step-"))


def slow_rmtree(monkeypatch):
    """Make the deletion of pruned checkpoints wait until the returned event is set; the other is set once it ran."""
    release, done = threading.Event(), threading.Event()
    real_rmtree = shutil.rmtree

    def rmtree(path, *args, **kwargs):
        assert release.wait(10), "the test never released the deletion"
        real_rmtree(path, *args, **kwargs)
        done.set()

    monkeypatch.setattr(pruning.shutil, "rmtree", rmtree)
    return release, done


def test_pruning_renames_at_once_and_deletes_off_the_save_path(tmp_path, monkeypatch):
    ckpt = ferry.Checkpointer(tmp_path, keep_last=1)
    ckpt.save(1, {"s": 1})
    release, done = slow_rmtree(monkeypatch)
    assert ckpt.path_for(2) == ckpt.save(2, {"s": 2})  # returns while the deletion of step 1 waits
    assert not done.is_set()
    assert [2] == ckpt.steps()
    renamed, kept = step_names(tmp_path)
    assert renamed.startswith("step-000000001.ferry-tmp-")  # renamed away at once: never a half-deleted step folder
    assert "step-000000002" == kept
    closing = threading.Thread(target=ckpt.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive(), "close() waits for the deletion"
    release.set()
    closing.join(10)
    assert done.is_set()
    assert ["step-000000002"] == step_names(tmp_path)


def test_the_next_prune_waits_for_the_previous_deletion(tmp_path, monkeypatch):
    ckpt = ferry.Checkpointer(tmp_path, keep_last=1)
    ckpt.save(1, {"s": 1})
    release, done = slow_rmtree(monkeypatch)
    ckpt.save(2, {"s": 2})
    saving = threading.Thread(target=ckpt.save, args=(3, {"s": 3}))
    saving.start()
    saving.join(0.2)
    assert saving.is_alive(), "the save of step 3 waits for step 1's deletion before pruning step 2"
    assert ckpt.path_for(3).is_dir()  # committed already: only its pruning waits
    release.set()
    saving.join(10)
    assert done.is_set()
    ckpt.wait()
    assert ["step-000000003"] == step_names(tmp_path)
    ckpt.close()


@pytest.mark.parametrize("surfaces_on", ["wait", "close"])
def test_a_pruned_checkpoint_that_cannot_be_deleted_is_reported_by_a_warning(tmp_path, monkeypatch, surfaces_on):
    ckpt = ferry.Checkpointer(tmp_path, keep_last=1)
    ckpt.save(1, {"s": 1})

    release = threading.Event()

    def refuse(path, *args, **kwargs):
        assert release.wait(10), "the test never released the deletion"
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    monkeypatch.setattr(pruning.shutil, "rmtree", refuse)
    old = str(ckpt.path_for(1))
    ckpt.save(2, {"s": 2})
    release.set()
    with pytest.warns(ferry.CheckpointWarning) as caught:
        getattr(ckpt, surfaces_on)()
    monkeypatch.undo()
    (warning,) = caught
    (renamed,) = [name for name in step_names(tmp_path) if name.startswith("step-000000001.ferry-tmp-")]
    assert (
        f"pruning could not delete the old checkpoint {old!r}: {os.strerror(errno.EACCES)}. It no longer counts as a "
        f"checkpoint (it was renamed to {renamed!r}), but what is left of it takes disk space; delete "
        f"{str(tmp_path / renamed)!r}, or run `ferry ckpt gc {tmp_path}` once this process ends."
    ) == str(warning.message)
    assert [2] == ferry.Checkpointer(tmp_path, read_only=True).steps()
    ckpt.close()  # reported once
    shutil.rmtree(tmp_path / renamed)


def test_a_save_short_of_space_waits_for_pruned_checkpoints_to_be_deleted(tmp_path, monkeypatch):
    ckpt = ferry.Checkpointer(tmp_path, keep_last=1)
    ckpt.save(1, {"t": torch.ones(1000)})
    release, done = slow_rmtree(monkeypatch)
    ckpt.save(2, {"t": torch.ones(1000)})
    usage = shutil.disk_usage(tmp_path)

    def disk_usage(path):
        if done.is_set():
            return usage
        release.set()  # the space of step 1 comes back once its deletion finishes
        return usage._replace(free=0)

    monkeypatch.setattr(checkpointer.shutil, "disk_usage", disk_usage)
    ckpt.save(3, {"t": torch.ones(1000)})  # not "not enough disk space"
    ckpt.close()
    assert ["step-000000003"] == step_names(tmp_path)


def test_a_value_saved_where_an_object_is_now_is_refused(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"epoch": 3})
    model = nn.Linear(2, 2)
    with pytest.raises(ferry.CheckpointError, match="saved 'epoch' as a plain value"):
        ckpt.restore({"epoch": model})


def test_state_must_be_a_mapping(tmp_path):
    with pytest.raises(ferry.CheckpointError, match="state must map names to objects"):
        ferry.Checkpointer(tmp_path).save(1, nn.Linear(2, 2))


def test_module_mismatch_leaves_other_objects_untouched(tmp_path):
    model, optimizer, _ = make_run()
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"epoch": 7, "optimizer": optimizer, "model": model})
    other_model = nn.Linear(3, 3)
    other_optimizer = torch.optim.SGD(other_model.parameters(), lr=0.5)
    state = {"epoch": 0, "optimizer": other_optimizer, "model": other_model}
    with pytest.raises(ferry.StateDictMismatchError):
        ckpt.restore(state)
    assert state["epoch"] == 0
    assert other_optimizer.param_groups[0]["lr"] == 0.5


def test_failing_user_object_is_wrapped_with_context(tmp_path):
    class Broken:
        def state_dict(self):
            return {"a": 1}

        def load_state_dict(self, sd):
            raise KeyError("b")

    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"thing": Broken()})
    with pytest.raises(ferry.CheckpointError, match=r"restoring 'thing' .* failed: KeyError"):
        ckpt.restore({"thing": Broken()})


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
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("step-")] == ["step-000000001"]


def test_tensor_value_goes_to_device_of_live_tensor(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"t": torch.ones(2)})
    state = {"t": torch.zeros(2, device="meta")}
    ckpt.restore(state)
    assert state["t"].device.type == "meta"


def test_a_restore_past_a_damaged_checkpoint_warns_at_the_callers_line_and_steps_agrees(tmp_path):
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {"x": 1})
        bad = ckpt.save(2, {"x": 2})
    data = bytearray((bad / STATE_FILE).read_bytes())
    data[-3] ^= 0xFF
    (bad / STATE_FILE).write_bytes(bytes(data))
    reader = ferry.Checkpointer(tmp_path, read_only=True)
    assert [1, 2] == reader.steps()  # complete by manifest and sizes: checksums not read yet
    with pytest.warns(ferry.CheckpointWarning, match="step-000000002") as caught:
        assert 1 == reader.restore({"x": 0})
    assert [__file__] == [w.filename for w in caught]  # the caller's line, not ferry's
    assert [1] == reader.steps()  # the damaged one is known now


def test_when_no_checkpoint_verifies_the_error_names_them_all(tmp_path):
    with ferry.Checkpointer(tmp_path) as ckpt:
        folders = [ckpt.save(step, {"x": step}) for step in (1, 2, 3)]
    for folder in folders:
        data = bytearray((folder / STATE_FILE).read_bytes())
        data[-3] ^= 0xFF
        (folder / STATE_FILE).write_bytes(bytes(data))
    with pytest.warns(ferry.CheckpointWarning), pytest.raises(ferry.CorruptCheckpointError) as caught:
        ferry.Checkpointer(tmp_path, read_only=True).restore({"x": 0})
    message = str(caught.value)
    assert "no checkpoint in" in message
    assert "3 tried (step-000000001, step-000000002, step-000000003)" in message
