"""``ferry.verify`` takes what ``ferry ckpt verify`` takes: a file, a step folder (plain or sharded), a run dir."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as tdc
from torch import nn

import ferry
from ferry.checkpoint.tools import verify_path
from ferry.errors import ArgumentError, CheckpointError, CorruptCheckpointError, UnsafeCheckpointError


def _state() -> dict:
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    return {"model": model, "optimizer": torch.optim.Adam(model.parameters())}


def _flip(file: Path, at: int = -3) -> None:
    data = bytearray(file.read_bytes())
    data[at] ^= 0xFF
    file.write_bytes(bytes(data))


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A run directory with checkpoints at steps 1 and 2 (one process)."""
    state = _state()
    with ferry.Checkpointer(tmp_path / "run") as ckpt:
        ckpt.save(1, state)
        ckpt.save(2, state)
    return tmp_path / "run"


@pytest.fixture
def sharded(tmp_path: Path) -> Path:
    """One sharded step folder, saved by a 1-rank gloo group."""
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        ferry.Checkpointer(tmp_path / "sharded").save(5, _state())
    finally:
        dist.destroy_process_group()
    (folder,) = (tmp_path / "sharded").glob("step-*")
    return folder


def test_latest_step_folder_verifies(run: Path) -> None:
    folder = ferry.Checkpointer(run).latest()
    assert folder is not None
    assert folder.is_dir()
    assert ferry.verify(folder) is None
    assert ferry.verify(str(folder)) is None


def test_run_directory_verifies_every_checkpoint(run: Path) -> None:
    ferry.verify(run)
    _flip(run / "step-000000001" / "state.safetensors")
    with pytest.raises(
        CorruptCheckpointError, match=r"(?s)1 of 2 checkpoints in .*fail verification:\n  step-000000001: "
    ) as caught:
        ferry.verify(run)
    assert caught.value.path == run / "step-000000001"


def test_damaged_step_folder_raises_naming_the_file(run: Path) -> None:
    folder = run / "step-000000002"
    _flip(folder / "state.safetensors")
    with pytest.raises(CorruptCheckpointError, match=r"state\.safetensors.*corrupt.*Restore from another checkpoint"):
        ferry.verify(folder)


def test_incomplete_step_folder_raises(run: Path) -> None:
    folder = run / "step-000000002"
    (folder / "manifest.json").unlink()
    with pytest.raises(CorruptCheckpointError, match=r"incomplete: no manifest\.json"):
        ferry.verify(folder)


def test_folder_whose_manifest_names_another_step_raises(run: Path) -> None:
    (run / "step-000000002").rename(run / "step-000000009")
    with pytest.raises(CorruptCheckpointError, match=r"named step-000000009 but its manifest\.json says step 2"):
        ferry.verify(run / "step-000000009")


def test_sharded_step_folder(sharded: Path) -> None:
    ferry.verify(sharded)
    _flip(sharded / "shard-00000.safetensors")
    with pytest.raises(CorruptCheckpointError, match=r"shard-00000\.safetensors"):
        ferry.verify(sharded)


def test_edited_shards_json_is_caught(sharded: Path) -> None:
    text = (sharded / "shards.json").read_text()
    (sharded / "shards.json").write_text(text.replace("{", "{ ", 1))
    with pytest.raises(CorruptCheckpointError, match=r"shards\.json"):
        ferry.verify(sharded)


def test_plain_dcp_folder_is_unsafe(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DCP's notice that it runs without a process group
        tdc.save({"w": torch.ones(2)}, storage_writer=tdc.FileSystemWriter(str(tmp_path / "plain")), no_dist=True)
    with pytest.raises(UnsafeCheckpointError, match="ferry ckpt convert --trusted"):
        ferry.verify(tmp_path / "plain")


def test_files_keep_their_contract(tmp_path: Path) -> None:
    file = tmp_path / "model.safetensors"
    ferry.save({"w": torch.arange(6.0)}, file)
    ferry.verify(file)
    _flip(file)
    with pytest.raises(CorruptCheckpointError, match=r"model\.safetensors"):
        ferry.verify(file)


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda p: p / "nothing", CheckpointError, "no file or folder at"),
        (lambda p: p, CheckpointError, "holds no checkpoint to verify"),
        (lambda p: open(__file__, "rb"), ArgumentError, r"ferry\.verify"),  # noqa: SIM115 (closed below)
    ],
    ids=["missing path", "empty folder", "file object"],
)
def test_bad_paths(tmp_path: Path, make, error: type[Exception], message: str) -> None:
    target = make(tmp_path)
    try:
        with pytest.raises(error, match=message):
            ferry.verify(target)
    finally:
        if hasattr(target, "close"):
            target.close()


def test_verify_path_reports_each_folder(run: Path) -> None:
    _flip(run / "step-000000002" / "state.safetensors")
    checks, notes = verify_path(run)
    assert [(Path(c.path).name, c.ok) for c in checks] == [("step-000000001", True), ("step-000000002", False)]
    assert notes == []


def test_the_latest_of_an_empty_run_is_none_and_verify_says_why(tmp_path: Path) -> None:
    with pytest.raises(ArgumentError, match=r"latest\(\) returns None while a run has no checkpoint yet"):
        ferry.verify(ferry.Checkpointer(tmp_path / "run").latest())


def test_tools_take_str_paths(run: Path) -> None:
    from ferry.checkpoint.tools import resolve

    checks, _ = verify_path(str(run))
    assert 2 == len(checks)
    assert resolve(str(run)).folder == run / "step-000000002"


def _trainer_folder(parent: Path, step: int) -> Path:
    """A Hugging Face Trainer's checkpoint-<step> as ferry.integrations.transformers writes it (by hand, no Trainer)."""
    from ferry.checkpoint.folder import MANIFEST_FILE, file_checksum

    folder = parent / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    ferry.save({"state": {}, "param_groups": [{"lr": 0.1, "params": [0]}]}, folder / "optimizer.safetensors")
    files = {
        "trainer_state.json": {"bytes": 0, "xxh3_64": file_checksum(folder / "trainer_state.json")},
        "optimizer.safetensors": {"bytes": (folder / "optimizer.safetensors").stat().st_size},
    }
    files["trainer_state.json"]["bytes"] = (folder / "trainer_state.json").stat().st_size
    manifest = {"format": "ferry.checkpoint", "version": 1, "step": step, "layout": "transformers", "files": files}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))
    return folder


def test_trainer_folders_verify_by_their_whole_file_checksums(tmp_path: Path) -> None:
    folder = _trainer_folder(tmp_path / "out", 30)
    _trainer_folder(tmp_path / "out", 20)
    assert ferry.verify(folder) is None
    assert ferry.verify(tmp_path / "out") is None
    checks, _ = verify_path(tmp_path / "out")
    assert [str(tmp_path / "out" / f"checkpoint-{s}") for s in (20, 30)] == [check.path for check in checks]
    assert {"transformers Trainer checkpoint"} == {check.kind for check in checks}
    state = folder / "trainer_state.json"
    state.write_text(state.read_text().replace("30", "31"))  # same size, other bytes
    with pytest.raises(CorruptCheckpointError, match=r"trainer_state.json is damaged: its xxh3_64 is [0-9a-f]{16} but"):
        ferry.verify(folder)


def test_a_trainer_folder_without_manifest_is_listed_as_not_ferrys(tmp_path: Path) -> None:
    stock = tmp_path / "out" / "checkpoint-10"
    stock.mkdir(parents=True)
    (stock / "trainer_state.json").write_text("{}")
    (checked,), _ = verify_path(tmp_path / "out")
    assert not checked.ok
    assert "transformers Trainer checkpoint" == checked.kind
    assert "saved by the Trainer without ferry" in str(checked.problem)
