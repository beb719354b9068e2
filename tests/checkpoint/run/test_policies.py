"""Checkpointer features beyond save/restore: retention, due saves, signals, async saves, disk space, the lock."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import ferry
from ferry.checkpoint.run.lock import LOCK_FILE, DirectoryLock


def steps_on_disk(directory):
    return sorted(int(p.name.split("-")[1]) for p in directory.glob("step-*"))


def test_keep_every_keeps_multiples_besides_the_last(tmp_path):
    with ferry.Checkpointer(tmp_path, keep_last=2, keep_every=100) as ckpt:
        for step in range(50, 501, 50):
            ckpt.save(step, {"s": step})
    assert steps_on_disk(tmp_path) == [100, 200, 300, 400, 450, 500]


@pytest.mark.parametrize(("mode", "best"), [("min", 20), ("max", 40)])
def test_keep_best_keeps_the_best_by_metric(tmp_path, mode, best):
    losses = {10: 0.9, 20: 0.1, 30: 0.5, 40: 1.5, 50: 0.7, 60: 0.8}
    with ferry.Checkpointer(tmp_path, keep_last=2, keep_best=("val_loss", mode)) as ckpt:
        for step, loss in losses.items():
            ckpt.save(step, {"s": step}, metrics={"val_loss": loss})
    assert steps_on_disk(tmp_path) == sorted({best, 50, 60})
    manifest = json.loads((tmp_path / "step-000000060" / "manifest.json").read_text())
    assert manifest["metrics"] == {"val_loss": 0.8}
    assert manifest["retention"] == {"keep_last": 2, "keep_every": None, "keep_best": ["val_loss", mode]}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"keep_every": 0},
        {"keep_best": ("loss", "lowest")},
        {"keep_best": "loss"},
        {"every_steps": 0},
        {"every_seconds": -1},
    ],
)
def test_bad_policy_settings(tmp_path, kwargs):
    with pytest.raises(ferry.CheckpointError, match="not allowed"):
        ferry.Checkpointer(tmp_path, **kwargs)


def test_metric_must_be_a_number(tmp_path):
    with ferry.Checkpointer(tmp_path) as ckpt, pytest.raises(ferry.CheckpointError, match="not a number"):
        ckpt.save(1, {}, metrics={"loss": "low"})


def test_tensor_metric_is_accepted(tmp_path):
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {}, metrics={"loss": torch.tensor(0.25)})
    assert json.loads((tmp_path / "step-000000001" / "manifest.json").read_text())["metrics"] == {"loss": 0.25}


def test_save_if_due_every_steps(tmp_path):
    with ferry.Checkpointer(tmp_path, every_steps=3, keep_last=10) as ckpt:
        saved = [step for step in range(1, 10) if ckpt.save_if_due(step, {"s": step})]
        assert saved == [3, 6, 9]
        assert not ckpt.save_if_due(9, {"s": 9})  # the same step is not saved twice


def test_save_if_due_every_seconds(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr("ferry.checkpoint.run.checkpointer.time.monotonic", lambda: clock[0])
    with ferry.Checkpointer(tmp_path, every_seconds=60, keep_last=10) as ckpt:
        assert not ckpt.save_if_due(1, {})
        clock[0] += 61
        assert ckpt.save_if_due(2, {})
        clock[0] += 30
        assert not ckpt.save_if_due(3, {})
        clock[0] += 31
        assert ckpt.save_if_due(4, {})
    assert steps_on_disk(tmp_path) == [2, 4]


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGUSR1"])
def test_signals_set_preempted_and_save_at_the_next_due_check(tmp_path, signame):
    before = signal.getsignal(getattr(signal, signame))
    with ferry.Checkpointer(tmp_path, every_steps=1000, handle_signals=True) as ckpt:
        assert not ckpt.preempted
        assert not ckpt.save_if_due(1, {"s": 1})
        os.kill(os.getpid(), getattr(signal, signame))
        assert ckpt.preempted
        assert ckpt.save_if_due(2, {"s": 2})
    assert signal.getsignal(getattr(signal, signame)) == before
    assert steps_on_disk(tmp_path) == [2]


def test_async_save_writes_the_values_of_the_moment_save_was_called(tmp_path):
    model = nn.Linear(256, 256)
    extra = torch.zeros(1000)
    with torch.no_grad():
        model.weight.fill_(1.0)
    with ferry.Checkpointer(tmp_path, async_save=True) as ckpt:
        folder = ckpt.save(1, {"model": model, "extra": extra})
        with torch.no_grad():  # training goes on right away, in place
            model.weight.fill_(2.0)
            extra.fill_(5.0)
        ckpt.wait()
        assert ckpt.latest() == folder
    fresh, state = nn.Linear(256, 256), {"model": None, "extra": None}
    state["model"] = fresh
    ferry.Checkpointer(tmp_path).restore(state)
    assert torch.all(fresh.weight == 1.0)
    assert torch.all(state["extra"] == 0.0)


def test_async_saves_keep_tied_tensors_shared(tmp_path):
    weight = torch.randn(4, 4)
    with ferry.Checkpointer(tmp_path, async_save=True) as ckpt:
        ckpt.save(1, {"a": weight, "b": weight})
    payload = ferry.load(tmp_path / "step-000000001" / "state.safetensors")
    assert payload["values"]["a"] is payload["values"]["b"]


def test_async_writer_error_surfaces_on_the_next_call(tmp_path, monkeypatch):
    ckpt = ferry.Checkpointer(tmp_path, async_save=True)
    ckpt.save(1, {"s": 1})
    ckpt.wait()

    def broken(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("ferry.checkpoint.run.checkpointer.save", broken)
    ckpt.save(2, {"s": 2})  # returns: the write happens in the background
    with pytest.raises(ferry.CheckpointError, match="Input/output error"):
        ckpt.wait()
    monkeypatch.undo()
    ckpt.save(3, {"s": 3})
    ckpt.close()
    assert steps_on_disk(tmp_path) == [1, 3]


def test_close_raises_a_pending_async_error(tmp_path, monkeypatch):
    ckpt = ferry.Checkpointer(tmp_path, async_save=True)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("ferry.checkpoint.run.checkpointer.save", broken)
    ckpt.save(1, {"s": 1})
    with pytest.raises(ferry.CheckpointError, match="No space left"):
        ckpt.close()
    assert not (tmp_path / LOCK_FILE).exists()


def test_not_enough_disk_space_raises_before_writing(tmp_path, monkeypatch):
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"t": torch.zeros(10)})
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(ferry.CheckpointError, match=r"not enough disk space.*older checkpoints are kept"):
        ckpt.save(2, {"t": torch.zeros(1 << 20)})
    assert steps_on_disk(tmp_path) == [1]
    assert [p.name for p in tmp_path.iterdir() if ".ferry-tmp-" in p.name] == []


def test_a_second_writer_in_this_process_takes_over_from_the_first(tmp_path):
    first = ferry.Checkpointer(tmp_path)
    first.save(1, {"s": 1})
    with pytest.warns(ferry.CheckpointWarning, match="another Checkpointer of this process was still open"):
        second = ferry.Checkpointer(tmp_path)
    with pytest.raises(ferry.CheckpointError, match="closed"):
        first.save(2, {"s": 2})
    second.save(2, {"s": 2})
    second.close()
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_held_lock_is_refused_naming_the_holder_and_readers_still_read(tmp_path):
    with ferry.Checkpointer(tmp_path) as first:
        first.save(1, {"s": 1})
    other = DirectoryLock(tmp_path)  # what another process holds: a live pid, a token of its own
    other.acquire()
    holder = rf"pid {os.getpid()} on host {socket.gethostname()}.*read_only=True"
    with pytest.raises(ferry.CheckpointError, match=holder):
        ferry.Checkpointer(tmp_path)
    reader = ferry.Checkpointer(tmp_path, read_only=True)
    assert reader.restore({"s": 0}) == 1  # reading takes no lock
    with pytest.raises(ferry.CheckpointError, match="read_only=True, so it does not save step 2"):
        reader.save(2, {"s": 2})
    other.release()
    with ferry.Checkpointer(tmp_path) as second:
        second.save(2, {"s": 2})
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_second_writer_in_another_process_is_refused_before_training(tmp_path):
    code = "import sys, time, ferry; c = ferry.Checkpointer(sys.argv[1]); print('ready', flush=True); time.sleep(60)"
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert "ready" == holder.stdout.readline().strip()
        with pytest.raises(ferry.CheckpointError, match=rf"pid {holder.pid} on host"):
            ferry.Checkpointer(tmp_path, every_steps=50)
        assert ferry.Checkpointer(tmp_path, read_only=True).restore({"s": 0}) is None
    finally:
        holder.kill()
        holder.communicate()
    with ferry.Checkpointer(tmp_path) as ckpt:  # the dead holder's lock is taken over
        ckpt.save(1, {"s": 1})


def test_a_reader_writes_nothing(tmp_path, monkeypatch):
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {"s": 1, "t": torch.ones(3)})
    (tmp_path / "step-000000002.ferry-tmp-999999999-abcd").mkdir()  # a dead save's leftover: a writer removes it
    before = sorted(str(p) for p in tmp_path.rglob("*"))

    def refuse(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    for name in ("mkdir", "rmdir", "unlink", "rename", "replace", "link", "symlink"):
        monkeypatch.setattr(os, name, refuse)
    monkeypatch.setattr(shutil, "rmtree", refuse)
    reader = ferry.Checkpointer(tmp_path, read_only=True)
    state = {"s": 0, "t": torch.zeros(3)}
    assert 1 == reader.restore(state)
    assert (1, [1]) == (state["s"], reader.steps())
    assert reader.latest() == tmp_path / "step-000000001"
    reader.close()
    monkeypatch.undo()
    assert before == sorted(str(p) for p in tmp_path.rglob("*"))


def test_a_writer_refuses_an_unwritable_directory_at_once(tmp_path, monkeypatch):
    real = Path.write_bytes

    def refuse(self, data):
        if ".ferry-write-check" in self.name:
            raise PermissionError(13, "Permission denied")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", refuse)
    with pytest.raises(ferry.CheckpointError, match=r"not writable \(Permission denied\).*read_only=True"):
        ferry.Checkpointer(tmp_path, every_steps=10)


@pytest.mark.parametrize("setting", [{"every_steps": 5}, {"async_save": True}, {"handle_signals": True}])
def test_a_reader_refuses_writer_settings(tmp_path, setting):
    with pytest.raises(ferry.CheckpointError, match="a read-only Checkpointer never saves"):
        ferry.Checkpointer(tmp_path, read_only=True, **setting)


def test_a_reader_of_a_missing_directory_says_so(tmp_path):
    with pytest.raises(ferry.CheckpointError, match="does not exist"):
        ferry.Checkpointer(tmp_path / "nowhere", read_only=True)
    assert not (tmp_path / "nowhere").exists()


def test_lock_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    (tmp_path / LOCK_FILE).write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "token": "x"}))
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {"s": 1})


def test_closed_checkpointer_refuses_to_save(tmp_path):
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.close()
    ckpt.close()  # harmless twice
    with pytest.raises(ferry.CheckpointError, match="closed"):
        ckpt.save(1, {})


def test_generators_are_restored_in_place(tmp_path):
    gen = torch.Generator().manual_seed(1)
    rng = np.random.default_rng(2)
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {"gen": gen, "rng": rng})
        expected = (torch.rand(3, generator=gen), rng.random(3))
        assert ckpt.restore({"gen": gen, "rng": rng}) == 1
    assert torch.equal(expected[0], torch.rand(3, generator=gen))
    assert np.array_equal(expected[1], rng.random(3))


def test_dataloader_generator_state_is_restored(tmp_path):
    gen = torch.Generator().manual_seed(0)
    loader = torch.utils.data.DataLoader(list(range(10)), batch_size=2, shuffle=True, generator=gen)
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.restore({"loader": loader})
        ckpt.save(1, {"loader": loader})
        first = [b.tolist() for b in loader]
        ckpt.restore({"loader": loader})
        assert first == [b.tolist() for b in loader]


def test_latest_skips_a_corrupt_newest_with_a_warning(tmp_path):
    with ferry.Checkpointer(tmp_path) as ckpt:
        good = ckpt.save(1, {"t": torch.ones(100)})
        bad = ckpt.save(2, {"t": torch.ones(100)})
        data = bytearray((bad / "state.safetensors").read_bytes())
        data[-5] ^= 0x10
        (bad / "state.safetensors").write_bytes(bytes(data))
        with pytest.warns(ferry.CheckpointWarning, match="step-000000002"):
            assert ckpt.latest() == good
