"""``ferry ckpt inspect|verify|convert`` on sharded checkpoints and on folders written by plain DCP.

A sharded checkpoint is made in this process: a 1-rank gloo process group, then ``ferry.Checkpointer.save``.
"""

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
from ferry.checkpoint.sharded.consolidate import load_sharded_folder, read_values
from ferry.checkpoint.sharded.ranks import metadata_digest
from ferry.cli.ckpt import main
from ferry.errors import CheckpointError, UnsafeCheckpointError

STEP = 7
SHARD = "shard-00000.safetensors"

# (how the folder is damaged, what the verify problem must say)
DAMAGE = [
    ("flip a byte of the shard file", f"{SHARD}' is corrupt"),
    ("edit shards.json", "shards.json' has SHA-256"),
    ("delete the shard file", f"incomplete: {SHARD} is missing"),
    ("flip a byte of state.safetensors", "state.safetensors' is corrupt"),
]

# the commands that refuse a plain-DCP folder, and their exit codes: verify reports a finding, the others refuse
PLAIN_DCP_REFUSALS = [("inspect", 2), ("verify", 1), ("convert", 2)]


@pytest.fixture(autouse=True)
def _wide_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rich folds long cells at 80 columns when not on a terminal


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def _train_one_step(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    model(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    optimizer.zero_grad()


@pytest.fixture
def trained() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = _model()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.99))
    _train_one_step(model, optimizer)
    return model, optimizer


@pytest.fixture
def sharded(tmp_path: Path, trained) -> Path:
    """A run directory with one sharded checkpoint (step 7: model, optimizer, epoch=3), saved by a 1-rank group."""
    model, optimizer = trained
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        ferry.Checkpointer(tmp_path / "run").save(STEP, {"model": model, "optimizer": optimizer, "epoch": 3})
    finally:
        dist.destroy_process_group()
    return tmp_path / "run"


@pytest.fixture
def plain_dcp(tmp_path: Path, trained) -> Path:
    """A folder written by DCP's own FileSystemWriter (a pickled .metadata)."""
    model, _ = trained
    folder = tmp_path / "plain"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DCP's notice that it runs without a process group
        tdc.save(
            {"model": model.state_dict(), "epoch": 3},
            storage_writer=tdc.FileSystemWriter(str(folder)),
            no_dist=True,
        )
    return folder


def _step(run: Path) -> Path:
    return run / f"step-{STEP:09d}"


def _flip_last_byte(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[-1] ^= 0xFF
    file.write_bytes(bytes(data))


def _damage(folder: Path, how: str) -> None:
    if how == "flip a byte of the shard file":
        _flip_last_byte(folder / SHARD)
    elif how == "edit shards.json":
        path = folder / "shards.json"
        path.write_text(path.read_text().replace('"dcp_version": null', '"dcp_version": 1234'))  # same size
    elif how == "delete the shard file":
        (folder / SHARD).unlink()
    elif how == "flip a byte of state.safetensors":
        _flip_last_byte(folder / "state.safetensors")
    else:
        raise AssertionError(how)


# -- inspect --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["run directory", "step folder"])
def test_inspect_json(capsys, sharded, trained, which):
    path = sharded if which == "run directory" else _step(sharded)
    assert main(["inspect", str(path), "--json"]) == 0
    report = _json(capsys)
    assert ("Checkpointer checkpoint (sharded)", str(_step(sharded))) == (report["kind"], report["path"])
    metadata = report["metadata"]
    assert (True, "sharded", 1, STEP) == (
        metadata["complete"],
        metadata["layout"],
        metadata["world_size"],
        metadata["step"],
    )
    model, _ = trained
    tensors = {row["path"]: row for row in report["tensors"]}
    for name, param in model.state_dict().items():
        row = tensors[f"objects/model/{name}"]
        assert (f"model.{name}", list(param.shape), "float32", "sharded", 1, [0], [SHARD]) == (
            row["fqn"],
            row["shape"],
            row["dtype"],
            row["part"],
            row["pieces"],
            row["ranks"],
            row["files"],
        )
    assert [4, 3] == tensors["objects/optimizer/state/0.weight/exp_avg"]["shape"]
    values = {row["path"]: row["value"] for row in report["values"]}
    assert 0.01 == values["objects/optimizer/param_groups/0/lr"]
    assert (STEP, 3) == (values["step"], values["values/epoch"])
    files = {row["name"]: row for row in report["files"]}
    assert {"manifest.json", "shards.json", SHARD, "state.safetensors", "rng-00000.safetensors"} == files.keys()
    assert (_step(sharded) / SHARD).stat().st_size == files[SHARD]["bytes"]
    entries = {row["name"]: row["params"] for row in report["entries"]}
    assert sum(p.numel() for p in model.parameters()) == entries["objects/model"]


def test_inspect_text(capsys, sharded):
    assert main(["inspect", str(sharded)]) == 0
    out = capsys.readouterr().out
    for expected in ("Checkpointer checkpoint (sharded)", "world_size", "objects/model/0.weight", "rank 0", SHARD):
        assert expected in out
    assert "Files" in out


def test_inspect_shows_a_lost_rank_file_as_incomplete(capsys, sharded):
    (_step(sharded) / SHARD).unlink()
    assert main(["inspect", str(_step(sharded)), "--json"]) == 0
    metadata = _json(capsys)["metadata"]
    assert not metadata["complete"]
    assert SHARD in metadata["problem"]


# -- verify ---------------------------------------------------------------------------------------------------------


def test_verify_ok(capsys, sharded):
    assert main(["verify", str(sharded), "--json"]) == 0
    (check,) = _json(capsys)["checked"]
    assert ("Checkpointer checkpoint (sharded)", True) == (check["kind"], check["ok"])
    assert "the SHA-256 of shards.json" in check["checked"]
    assert main(["verify", str(_step(sharded))]) == 0
    assert "all 1 verified" in capsys.readouterr().out


@pytest.mark.parametrize(("how", "expected"), DAMAGE)
def test_verify_names_the_damage(capsys, sharded, how, expected):
    _damage(_step(sharded), how)
    assert main(["verify", str(_step(sharded)), "--json"]) == 1
    (check,) = _json(capsys)["checked"]
    assert not check["ok"]
    assert expected in check["problem"]
    assert main(["verify", str(sharded)]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_verify_names_a_piece_missing_from_its_file(capsys, sharded):
    folder = _step(sharded)
    doc = json.loads((folder / "shards.json").read_text())
    doc["storage"][0]["name"] = "model.nowhere"
    (folder / "shards.json").write_text(json.dumps(doc))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["shards.json"] = {
        "bytes": (folder / "shards.json").stat().st_size,
        "sha256": metadata_digest(folder),
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert main(["verify", str(folder), "--json"]) == 1
    (check,) = _json(capsys)["checked"]
    assert f"{SHARD} lacks the piece 'model.nowhere'" in check["problem"]


# -- convert --------------------------------------------------------------------------------------------------------


def test_convert_loads_into_a_plain_model(capsys, sharded, trained, tmp_path):
    model, _ = trained
    out = tmp_path / "model.safetensors"
    assert main(["convert", str(sharded), str(out), "--json"]) == 0
    report = _json(capsys)
    assert ("Checkpointer checkpoint (sharded)", str(_step(sharded))) == (report["input_kind"], report["input"])
    assert main(["verify", str(out)]) == 0
    loaded = ferry.load(out)
    assert (STEP, {"epoch": 3}, ["model", "optimizer"]) == (loaded["step"], loaded["values"], list(loaded["objects"]))
    state = loaded["objects"]["model"]
    assert sorted(model.state_dict()) == sorted(state)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, state[name])
    fresh = _model()
    fresh.load_state_dict(state)
    ferry.load_state_dict(_model(), state)
    x = torch.randn(2, 3)
    assert torch.equal(model(x), fresh(x))


def test_convert_optimizer_round_trip(capsys, sharded, trained, tmp_path):
    model, optimizer = trained
    out = tmp_path / "model.safetensors"
    assert main(["convert", str(_step(sharded)), str(out)]) == 0
    assert "verified" in capsys.readouterr().out
    loaded = ferry.load(out)["objects"]
    fresh = _model()
    fresh.load_state_dict(loaded["model"])
    fresh_optimizer = torch.optim.Adam(fresh.parameters(), lr=0.5)
    fresh_optimizer.load_state_dict(loaded["optimizer"])  # numbered like Optimizer.state_dict()
    expected, got = optimizer.state_dict(), fresh_optimizer.state_dict()
    assert expected["param_groups"] == got["param_groups"]
    for index, state in expected["state"].items():
        for key, value in state.items():
            assert torch.equal(value, got["state"][index][key])
    torch.manual_seed(1)
    _train_one_step(model, optimizer)
    torch.manual_seed(1)
    _train_one_step(fresh, fresh_optimizer)
    for a, b in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(a, b)


def test_convert_refuses_a_damaged_folder(capsys, sharded, tmp_path):
    _damage(_step(sharded), "flip a byte of the shard file")
    out = tmp_path / "model.safetensors"
    assert main(["convert", str(_step(sharded)), str(out)]) == 2
    assert "fails its checksum" in capsys.readouterr().err
    assert not out.exists()


def test_convert_refuses_to_overwrite_without_force(capsys, sharded, tmp_path):
    out = tmp_path / "model.safetensors"
    out.write_text("keep me")
    assert main(["convert", str(sharded), str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert "keep me" == out.read_text()
    assert main(["convert", str(sharded), str(out), "--force"]) == 0


def test_read_values(sharded):
    values = read_values(_step(sharded))
    assert (0.01, (0.8, 0.99)) == (
        values["optimizer.param_groups.0.lr"],
        values["optimizer.param_groups.0.betas"],
    )


# -- plain DCP ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "code"), PLAIN_DCP_REFUSALS)
def test_plain_dcp_is_refused(capsys, plain_dcp, tmp_path, command, code):
    extra = [str(tmp_path / "out.safetensors")] if command == "convert" else []
    if command == "verify":
        extra = ["--json"]  # verify's table folds its cells by the width of the path, which varies
    assert main([command, str(plain_dcp), *extra]) == code
    captured = capsys.readouterr()
    text = captured.err + captured.out
    for expected in ("FileSystemWriter", "pickle", "ferry ckpt convert --trusted"):
        assert expected in " ".join(text.split())  # rich folds long lines
    assert "Traceback" not in text
    assert not (tmp_path / "out.safetensors").exists()


def test_plain_dcp_converts_with_trusted(capsys, plain_dcp, trained, tmp_path):
    model, _ = trained
    out = tmp_path / "plain.safetensors"
    assert main(["convert", str(plain_dcp), str(out), "--trusted", "--json"]) == 0
    assert "DCP folder (torch FileSystemWriter)" == _json(capsys)["input_kind"]
    assert main(["verify", str(out)]) == 0
    loaded = ferry.load(out)
    assert 3 == loaded["epoch"]
    fresh = _model()
    fresh.load_state_dict(loaded["model"])
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, fresh.state_dict()[name])


def test_load_sharded_folder_errors(plain_dcp, tmp_path):
    with pytest.raises(UnsafeCheckpointError, match="--trusted"):
        load_sharded_folder(plain_dcp)
    with pytest.raises(CheckpointError, match="holds no sharded checkpoint"):
        load_sharded_folder(tmp_path)


def test_diff_compares_sharded_checkpoints(capsys, sharded, trained):
    model, optimizer = trained
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        with torch.no_grad():
            model[0].weight[0, 0] += 0.5
        ferry.Checkpointer(sharded).save(STEP + 1, {"model": model, "optimizer": optimizer, "epoch": 3})
    finally:
        dist.destroy_process_group()
    later = sharded / f"step-{STEP + 1:09d}"
    assert 0 == main(["diff", str(_step(sharded)), str(_step(sharded)), "--json"])
    assert [] == _json(capsys)["changed"]
    assert 1 == main(["diff", str(_step(sharded)), str(later), "--json"])
    report = _json(capsys)
    changed = {row["path"]: row for row in report["changed"]}
    assert ["objects/model/0.weight", "step"] == sorted(changed)
    assert 0.5 == pytest.approx(changed["objects/model/0.weight"]["max_abs_diff"])
