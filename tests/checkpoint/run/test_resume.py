"""Exact resume: a run killed mid-epoch and resumed in a new process trains exactly as the uninterrupted run.

Bitwise, on the CPU: every step's loss and the final parameters, optimizer, LR scheduler and GradScaler state. The
training loop uses every source of randomness a real one does: a shuffling ``DataLoader`` (``ResumableSampler`` and
its own ``generator``), dropout (the global torch RNG), and Python's ``random``, NumPy's legacy ``np.random`` and a
``np.random.default_rng()`` generator in the loss.
"""

from __future__ import annotations

import shutil

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import ferry
from _resume import STEPS, TRAIN, assert_bitwise_equal, finish, start
from ferry.sampler import ResumableSampler


@pytest.mark.slow
def test_killed_and_resumed_runs_match_the_uninterrupted_run_bitwise(tmp_path):
    """Train 27 steps straight; and train, die after step K, resume in a new process, train to 27.

    K = 13 stops in the middle of the second epoch (10 steps an epoch), K = 20 after its last batch but before the
    iterator ran out. The runs go in parallel: three processes, then the two resumes and a control: a resume that
    does not restore the DataLoader, whose losses do diverge (so the comparison can fail).
    """
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    ckpt = {name: tmp_path / f"ckpt-{name}" for name in ("straight", "13", "20", "control")}
    runs = {
        "straight": start(script, ckpt["straight"], tmp_path / "straight"),
        "first-13": start(script, ckpt["13"], tmp_path / "first-13", "--stop-after", "13"),
        "first-20": start(script, ckpt["20"], tmp_path / "first-20", "--stop-after", "20"),
    }
    out = finish(runs, tmp_path)
    for k in ("13", "20"):
        assert (ckpt[k] / ".ferry-lock").exists(), "os._exit left the lock file of a dead process behind"
    shutil.copytree(ckpt["13"], ckpt["control"])
    runs = {
        "then-13": start(script, ckpt["13"], tmp_path / "then-13"),
        "then-20": start(script, ckpt["20"], tmp_path / "then-20"),
        "control": start(script, ckpt["control"], tmp_path / "control", "--forget-loader"),
    }
    out |= finish(runs, tmp_path)
    straight, control = out["straight"], out["control"]

    assert list(range(1, STEPS + 1)) == straight["steps"]
    assert [] == straight["warnings"]
    final = ferry.load(tmp_path / "straight.safetensors")
    for k in ("13", "20"):
        before, after = out[f"first-{k}"], out[f"then-{k}"]
        assert list(range(1, int(k) + 1)) == before["steps"]
        assert int(k) == after["start"]
        assert [] == after["warnings"]
        assert straight["losses"] == before["losses"] + after["losses"], f"stopped after {k}"
        assert_bitwise_equal(final, ferry.load(tmp_path / f"then-{k}.safetensors"), f"stopped after {k}")
    assert (2, 28) == (final["sampler"]["epoch"], final["sampler"]["position"])  # the runs end mid-epoch too

    assert 13 == control["start"]
    assert [] == control["warnings"]
    assert straight["losses"][13:] != control["losses"]


def test_a_dataloader_without_generator_resumes_where_the_loop_was(tmp_path):
    dataset = TensorDataset(torch.arange(12.0))
    sampler = ResumableSampler(dataset, seed=3)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler)
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.restore({"loader": loader, "sampler": sampler})
        batches = iter(loader)
        seen = next(batches)[0].tolist()
        ckpt.save(1, {"loader": loader, "sampler": sampler})

    sampler = ResumableSampler(dataset, seed=3)
    resumed = DataLoader(dataset, batch_size=4, sampler=sampler)
    assert 1 == ferry.Checkpointer(tmp_path).restore({"loader": resumed, "sampler": sampler})
    assert (0, 0) == (sampler.epoch, sampler.position)  # the start of the interrupted pass: it is replayed
    rest = [value for (batch,) in resumed for value in batch.tolist()]
    assert sorted(seen + rest) == list(range(12))
    assert 8 == len(rest)
