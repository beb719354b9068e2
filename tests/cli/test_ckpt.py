from __future__ import annotations

import io
import json
import math
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from rich.console import Console
from torch import nn

import ferry
from ferry.checkpoint.tools import flatten, max_abs_diff
from ferry.cli import main as ferry_main
from ferry.cli.ckpt import main
from ferry.cli.ckpt_common import human_bytes, meter

# Shared cases (../shared/cases/checkpoints): file -> what `ferry ckpt inspect --json` calls it.
LOADABLE_CASES = [
    ("facenet_pnet.pt", "torch.save file (legacy pickle)"),
    ("facenet_rnet.pt", "torch.save file (legacy pickle)"),
    ("lpips_v0.1_alex.pth", "torch.save file (legacy pickle)"),
    ("silero_vad_16k.safetensors", "safetensors file"),
]
TORCHSCRIPT_CASE = "silero_vad.jit"
SUBCOMMANDS = ["ls", "inspect", "verify", "diff", "convert", "gc"]

# (a, b, max |a - b|): equal non-finite values count as equal; a nan on one side only is nan
MAX_ABS_DIFF = [
    ([1.0, 2.0], [1.0, 2.5], 0.5),
    ([math.inf, 1.0], [math.inf, 1.0], 0.0),
    ([math.nan, 1.0], [math.nan, 1.0], 0.0),
    ([math.nan, 1.0], [0.0, 1.0], math.nan),
    ([math.inf], [0.0], math.inf),
    ([], [], 0.0),
]

# (size in bytes, as people see it)
SIZES = [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (3 * 1024**3, "3.0 GiB")]

# (gc arguments, the exit code, what stderr must say)
GC_USAGE = [
    (["--keep-best", "val_loss"], "METRIC:min or METRIC:max"),
    (["--keep-best", "val_loss:median"], "METRIC:min or METRIC:max"),
    (["--keep-every", "often"], "not a whole number"),
    (["--keep-last", "0"], "keep_last=0 is not allowed"),
]

DEAD_PID = 4_194_999  # above the largest pid Linux hands out (pid_max <= 2**22)


@dataclass
class Note:
    """Not a tensor or plain value: torch's restricted unpickler refuses it, ferry.save cannot store it."""

    text: str


@pytest.fixture(autouse=True)
def _wide_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rich folds long cells at 80 columns when not on a terminal


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


def _step(directory: Path, step: int) -> Path:
    return directory / f"step-{step:09d}"


def _set_retention(directory: Path, step: int, retention: dict) -> None:
    manifest_path = _step(directory, step) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["retention"] = retention
    manifest_path.write_text(json.dumps(manifest))


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A run directory with steps 10, 20, 30, 40 (val_loss 0.5, 0.2, 0.4, 0.3), all kept; the newest manifest
    records keep_last=2 and keep_best=val_loss:min, as a Checkpointer with that policy writes it.
    """
    directory = tmp_path / "run"
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    with ferry.Checkpointer(directory, keep_last=10) as ckpt:
        for step, loss in [(10, 0.5), (20, 0.2), (30, 0.4), (40, 0.3)]:
            with torch.no_grad():
                model.weight.add_(0.25)
            ckpt.save(step, {"model": model, "epoch": step // 10}, metrics={"val_loss": loss})
    _set_retention(directory, 40, {"keep_last": 2, "keep_every": None, "keep_best": ["val_loss", "min"]})
    return directory


def _flip_last_byte(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[-1] ^= 0xFF
    file.write_bytes(bytes(data))


# -- the command and its usage --------------------------------------------------------------------------------------


def test_ferry_lists_and_dispatches_ckpt(capsys, run):
    assert ferry_main(["--help"]) == 0
    assert "ckpt" in capsys.readouterr().out
    assert ferry_main(["ckpt", "ls", str(run), "--json"]) == 0
    assert [10, 20, 30, 40] == [row["step"] for row in _json(capsys)["checkpoints"]]


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help_and_json(capsys, command):
    assert main([command, "--help"]) == 0
    assert "--json" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys):
    assert main([]) == 2
    assert main(["ls"]) == 2
    assert main(["frobnicate"]) == 2
    assert "invalid choice" in capsys.readouterr().err


# -- ls -------------------------------------------------------------------------------------------------------------


def test_ls_json(capsys, run):
    assert main(["ls", str(run), "--json"]) == 0
    report = _json(capsys)
    expected_policy = {"keep_last": 2, "keep_every": None, "keep_best": ["val_loss", "min"]}
    assert (expected_policy, True) == (report["policy"], report["policy_recorded"])
    rows = {row["step"]: row for row in report["checkpoints"]}
    expected_kept = {10: [], 20: ["best"], 30: ["last"], 40: ["last"]}
    assert expected_kept == {step: row["kept_by"] for step, row in rows.items()}
    assert [40] == [step for step, row in rows.items() if row["newest"]]
    assert str(_step(run, 40)) == report["newest"]
    assert {"val_loss": 0.2} == rows[20]["metrics"]
    assert all(row["complete"] and row["bytes"] > 0 and row["created"] for row in rows.values())
    assert [1, 2, 3, 4] == [row["sequence"] for row in report["checkpoints"]]
    assert ([], None) == (report["stale_temporaries"], report["writer"])


def test_ls_table(capsys, run):
    assert main(["ls", str(run)]) == 0
    out = capsys.readouterr().out
    for text in ("step", "complete", "best", "last", "—", "*", "keep_last=2", "keep_best=val_loss:min", "val_loss=0.2"):
        assert text in out
    assert "ferry ckpt gc would remove it" in out  # steps 10 and 20 are kept by nothing


def test_ls_table_explains_the_dash_only_when_one_shows(capsys, tmp_path):
    with ferry.Checkpointer(tmp_path / "run", keep_last=3) as ckpt:
        for step in (1, 2):
            ckpt.save(step, {"x": step})
    assert main(["ls", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "* newest" in out
    assert "gc would remove" not in out


def test_ls_shows_incomplete_checkpoints_and_stale_temporaries(capsys, run):
    (_step(run, 20) / "state.safetensors").unlink()
    stale = run / f"step-000000050.ferry-tmp-{DEAD_PID}-0badc0de"
    stale.mkdir()
    assert main(["ls", str(run), "--json"]) == 0
    report = _json(capsys)
    rows = {row["step"]: row for row in report["checkpoints"]}
    assert (False, None) == (rows[20]["complete"], rows[20]["kept_by"])
    assert "state.safetensors is missing" in rows[20]["problem"]
    assert [str(stale)] == report["stale_temporaries"]
    main(["ls", str(run)])
    out = capsys.readouterr().out
    assert "state.safetensors is missing" in out
    assert "stale temporary" in out


def test_ls_without_recorded_policy_uses_the_default(capsys, tmp_path):
    with ferry.Checkpointer(tmp_path / "run") as ckpt:
        ckpt.save(1, {"x": 1})
    manifest_path = _step(tmp_path / "run", 1) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["retention"], manifest["metrics"]  # a manifest from before retention was recorded
    manifest_path.write_text(json.dumps(manifest))
    assert main(["ls", str(tmp_path / "run"), "--json"]) == 0
    report = _json(capsys)
    assert (ferry.checkpoint.run.folders.RetentionPolicy().to_json(), False) == (
        report["policy"],
        report["policy_recorded"],
    )
    assert {} == report["checkpoints"][0]["metrics"]


def test_ls_empty_directory(capsys, tmp_path):
    assert main(["ls", str(tmp_path)]) == 0
    assert "no checkpoints" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("path", "message"),
    [("missing", "no file or folder"), ("run/step-000000010", "Pass its parent"), ("file.txt", "is a file")],
)
def test_ls_refuses_what_is_not_a_run_directory(capsys, run, path, message):
    (run.parent / "file.txt").write_text("x")
    assert main(["ls", str(run.parent / path)]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


# -- inspect --------------------------------------------------------------------------------------------------------


def test_inspect_run_directory_shows_the_newest(capsys, run):
    assert main(["inspect", str(run), "--json"]) == 0
    report = _json(capsys)
    assert (str(_step(run, 40)), "Checkpointer checkpoint") == (report["path"], report["kind"])
    metadata = report["metadata"]
    assert (40, 4, {"val_loss": 0.3}, torch.__version__) == (
        metadata["step"],
        metadata["sequence"],
        metadata["metrics"],
        metadata["torch"],
    )
    assert {"python", "torch", "numpy"} <= set(metadata["rng"])
    tensors = {row["path"]: row for row in report["tensors"]}
    expected = {"shape": [2, 4], "dtype": "float32", "numel": 8, "bytes": 32}
    assert expected == {key: tensors["objects/model/weight"][key] for key in expected}
    entries = {row["name"]: row for row in report["entries"]}
    assert {"tensors": 2, "params": 10, "bytes": 40} == {
        k: entries["objects/model"][k] for k in ("tensors", "params", "bytes")
    }
    assert 4 == {row["path"]: row["value"] for row in report["values"]}["values/epoch"]
    assert sum(row["params"] for row in report["entries"]) == report["total"]["params"]


def test_inspect_table(capsys, run):
    assert main(["inspect", str(_step(run, 20))]) == 0
    out = capsys.readouterr().out
    for text in ("Checkpointer checkpoint", "objects/model/weight", "[2, 4]", "float32", "Entries", "total", "rng"):
        assert text in out
    assert "devices" in out  # "not recorded" unless the manifest records them


def test_inspect_ferry_file_reads_only_the_header(capsys, tmp_path):
    path = tmp_path / "x.safetensors"
    tied = torch.arange(6.0)
    ferry.save({"a": tied, "b": tied, "nested": {"c": torch.zeros(2, 3, dtype=torch.int8)}, "lr": math.inf}, path)
    _flip_last_byte(path)  # data damage: inspect does not read the data; verify would fail
    assert main(["inspect", str(path), "--json"]) == 0
    report = _json(capsys)
    assert "ferry file" == report["kind"]
    assert "2" == report["metadata"]["ferry_format"]
    assert ["a", "b", "nested/c"] == [row["path"] for row in report["tensors"]]
    assert [{"path": "lr", "value": "inf", "repr": "inf"}] == report["values"]
    assert {"tensors": 3, "params": 12, "bytes": 30} == report["total"]  # the tied tensor counts once


@pytest.mark.parametrize(("name", "kind"), LOADABLE_CASES)
def test_inspect_shared_cases(capsys, shared_cases, name, kind):
    path = shared_cases / "checkpoints" / name
    assert main(["inspect", str(path), "--json"]) == 0
    report = _json(capsys)
    loaded = ferry.load(path)
    assert kind == report["kind"]
    assert list(loaded) == [row["path"] for row in report["tensors"]]
    assert sum(t.numel() for t in loaded.values()) == report["total"]["params"]
    assert [list(t.shape) for t in loaded.values()] == [row["shape"] for row in report["tensors"]]
    main(["inspect", str(path)])
    assert "params" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["inspect", "verify", "convert"])
def test_torchscript_is_refused_with_exit_2(capsys, shared_cases, tmp_path, command):
    path = shared_cases / "checkpoints" / TORCHSCRIPT_CASE
    extra = [str(tmp_path / "out.safetensors")] if command == "convert" else []
    assert main([command, str(path), *extra]) == 2
    err = capsys.readouterr().err
    assert "TorchScript" in err
    assert "torch.jit.load" in err
    assert "Traceback" not in err


def test_inspect_pickle_that_needs_code_needs_trusted(capsys, tmp_path):
    path = tmp_path / "note.pt"
    torch.save({"w": torch.ones(2), "note": Note("hello")}, path)
    assert main(["inspect", str(path)]) == 2
    assert "pass --trusted" in capsys.readouterr().err
    assert main(["inspect", str(path), "--trusted", "--json"]) == 0
    report = _json(capsys)
    assert ["w"] == [row["path"] for row in report["tensors"]]
    assert "Note(text='hello')" in report["values"][0]["value"]


def test_inspect_incomplete_folder_without_state(capsys, run):
    (_step(run, 30) / "state.safetensors").unlink()
    assert main(["inspect", str(_step(run, 30))]) == 2
    assert "is incomplete" in capsys.readouterr().err


def test_inspect_not_a_checkpoint(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("hello, this is text and not a checkpoint\n")
    assert main(["inspect", str(tmp_path / "notes.txt")]) == 2
    assert "not a checkpoint" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path)]) == 2
    assert "neither a checkpoint folder" in capsys.readouterr().err


# -- verify ---------------------------------------------------------------------------------------------------------


def test_verify_run_directory(capsys, run):
    assert main(["verify", str(run), "--json"]) == 0
    report = _json(capsys)
    assert report["ok"]
    assert [str(_step(run, s)) for s in (10, 20, 30, 40)] == [check["path"] for check in report["checked"]]
    main(["verify", str(run)])
    assert "all 4 verified" in capsys.readouterr().out


def test_verify_names_the_corrupt_checkpoint(capsys, run):
    _flip_last_byte(_step(run, 20) / "state.safetensors")
    assert main(["verify", str(run), "--json"]) == 1
    failed = [check for check in _json(capsys)["checked"] if not check["ok"]]
    assert [str(_step(run, 20))] == [check["path"] for check in failed]
    assert "fails its checksum" in failed[0]["problem"]
    assert main(["verify", str(_step(run, 20))]) == 1
    assert "FAILED" in capsys.readouterr().out
    assert main(["verify", str(_step(run, 20) / "state.safetensors")]) == 1
    assert main(["verify", str(_step(run, 30))]) == 0


def test_verify_incomplete_and_mislabelled_folders(capsys, run):
    (_step(run, 10) / "manifest.json").unlink()
    manifest_path = _step(run, 30) / "manifest.json"
    manifest_path.write_text(json.dumps({**json.loads(manifest_path.read_text()), "step": 31}))
    assert main(["verify", str(run), "--json"]) == 1
    problems = {Path(c["path"]).name: c["problem"] for c in _json(capsys)["checked"] if not c["ok"]}
    assert ["step-000000010", "step-000000030"] == sorted(problems)
    assert "incomplete: no manifest.json" in problems["step-000000010"]
    assert "says step 31" in problems["step-000000030"]


def test_verify_notes_stale_temporaries_without_failing(capsys, run):
    (run / f"step-000000050.ferry-tmp-{DEAD_PID}-0badc0de").mkdir()
    assert main(["verify", str(run), "--json"]) == 0
    assert ["stale temporary"] == [note[:15] for note in _json(capsys)["notes"]]


@pytest.mark.parametrize(("name", "kind"), LOADABLE_CASES)
def test_verify_shared_cases(capsys, shared_cases, name, kind):
    assert main(["verify", str(shared_cases / "checkpoints" / name), "--json"]) == 0
    (check,) = _json(capsys)["checked"]
    assert (kind, True) == (check["kind"], check["ok"])


def test_verify_ferry_file_names_its_checksums(capsys, tmp_path):
    path = tmp_path / "x.safetensors"
    ferry.save({"a": torch.ones(2)}, path)
    assert main(["verify", str(path), "--json"]) == 0
    (check,) = _json(capsys)["checked"]
    assert (
        "ferry file",
        True,
        "the CRC-32 of the header and the xxh3_64 of every tensor (crc32 in files of ferry before format 2)",
    ) == (check["kind"], check["ok"], check["checked"])


def test_verify_unsafe_pickle_is_a_finding(capsys, tmp_path):
    path = tmp_path / "note.pt"
    torch.save({"note": Note("x")}, path, _use_new_zipfile_serialization=False)
    assert main(["verify", str(path), "--json"]) == 1
    (check,) = _json(capsys)["checked"]
    assert "torch.save file (legacy pickle)" == check["kind"]
    assert f"{Note.__module__}.Note" in check["problem"]


def test_verify_missing_path(capsys, tmp_path):
    assert main(["verify", str(tmp_path / "nope.safetensors")]) == 2
    assert "no file or folder" in capsys.readouterr().err


# -- diff -----------------------------------------------------------------------------------------------------------


def test_diff(capsys, tmp_path):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    same = torch.arange(4.0)
    ferry.save(
        {"w": torch.ones(2, 2), "b": torch.zeros(3), "h": torch.ones(2), "gone": 1, "lr": 0.1, "n": {"x": same}}, a
    )
    ferry.save(
        {
            "w": torch.ones(2, 2) + 0.5,
            "b": torch.zeros(4),
            "h": torch.ones(2).half(),
            "new": "hi",
            "lr": 0.25,
            "n": {"x": same},
        },
        b,
    )
    assert main(["diff", str(a), str(b), "--json"]) == 1
    report = _json(capsys)
    assert [{"path": "new", "b": {"value": "hi"}}] == report["added"]
    assert [{"path": "gone", "a": {"value": 1}}] == report["removed"]
    changed = {row["path"]: (row["what"], row["max_abs_diff"]) for row in report["changed"]}
    expected = {"w": (["values"], 0.5), "b": (["shape"], None), "h": (["dtype"], 0.0), "lr": (["value"], 0.15)}
    assert expected.keys() == changed.keys()
    for path, (what, gap) in expected.items():
        assert what == changed[path][0]
        assert gap == pytest.approx(changed[path][1])
    assert 1 == report["unchanged"]
    main(["diff", str(a), str(b)])
    out = capsys.readouterr().out
    assert "1 added, 1 removed, 4 changed, 1 unchanged" in out


def test_diff_identical_and_within_tolerance(capsys, tmp_path):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    ferry.save({"w": torch.ones(3)}, a)
    ferry.save({"w": torch.ones(3) + 1e-4}, b)
    assert main(["diff", str(a), str(a)]) == 0
    assert main(["diff", str(a), str(b)]) == 1
    assert main(["diff", str(a), str(b), "--atol", "1e-3"]) == 0


def test_diff_checkpoint_folders(capsys, run):
    assert main(["diff", str(_step(run, 10)), str(run), "--json"]) == 1
    changed = {row["path"]: row for row in _json(capsys)["changed"]}
    assert {"step", "values/epoch", "objects/model/weight"} <= changed.keys()
    assert pytest.approx(0.75) == changed["objects/model/weight"]["max_abs_diff"]
    assert 30 == changed["step"]["max_abs_diff"]


def test_diff_torch_save_against_its_conversion(capsys, shared_cases, tmp_path):
    original = shared_cases / "checkpoints" / "facenet_pnet.pt"
    out = tmp_path / "pnet.safetensors"
    assert main(["convert", str(original), str(out)]) == 0
    assert "verified" in capsys.readouterr().out
    assert main(["diff", str(original), str(out), "--json"]) == 0
    assert 13 == _json(capsys)["unchanged"]


@pytest.mark.parametrize(("a", "b", "expected"), MAX_ABS_DIFF)
def test_max_abs_diff(a, b, expected):
    got = max_abs_diff(torch.tensor(a), torch.tensor(b))
    assert (math.isnan(expected) and math.isnan(got)) or expected == got


def test_max_abs_diff_across_dtypes():
    assert 0.0 == max_abs_diff(torch.tensor([True, False]), torch.tensor([1, 0], dtype=torch.int64))
    assert 1.0 == max_abs_diff(torch.tensor([1 + 1j]), torch.tensor([1 + 0j]))


# -- convert --------------------------------------------------------------------------------------------------------


def _assert_same(expected, actual):
    assert type(expected) is type(actual)
    assert list(expected) == list(actual)
    for key in expected:
        assert expected[key].dtype == actual[key].dtype
        assert torch.equal(expected[key], actual[key])


@pytest.mark.parametrize(("name", "kind"), LOADABLE_CASES)
def test_convert_shared_cases(capsys, shared_cases, tmp_path, name, kind):
    source = shared_cases / "checkpoints" / name
    out = tmp_path / "converted.safetensors"
    assert main(["convert", str(source), str(out), "--json"]) == 0
    report = _json(capsys)
    assert (kind, str(out)) == (report["input_kind"], report["output"])
    _assert_same(ferry.load(source), ferry.load(out))
    assert main(["inspect", str(out), "--json"]) == 0
    assert "ferry file" == _json(capsys)["kind"]
    assert main(["verify", str(out)]) == 0


def test_convert_refuses_to_overwrite_without_force(capsys, tmp_path):
    source, out = tmp_path / "a.pt", tmp_path / "a.safetensors"
    torch.save({"w": torch.ones(2)}, source)
    out.write_text("keep me")
    assert main(["convert", str(source), str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert "keep me" == out.read_text()
    assert main(["convert", str(source), str(out), "--force"]) == 0
    assert "converted" in capsys.readouterr().out
    _assert_same({"w": torch.ones(2)}, ferry.load(out))


def test_convert_trusted_pickle_names_what_cannot_be_saved(capsys, tmp_path):
    source = tmp_path / "note.pt"
    torch.save({"w": torch.ones(2), "note": Note("x")}, source)
    assert main(["convert", str(source), str(tmp_path / "a.safetensors")]) == 2
    assert "pass --trusted" in capsys.readouterr().err
    assert main(["convert", str(source), str(tmp_path / "a.safetensors"), "--trusted"]) == 2
    err = capsys.readouterr().err
    assert "obj['note']" in err
    assert not (tmp_path / "a.safetensors").exists()


def test_convert_checkpointer_folder_and_odd_name(capsys, run, tmp_path):
    out = tmp_path / "model.pt"
    assert main(["convert", str(_step(run, 20)), str(out)]) == 0
    assert "name it *.safetensors" in capsys.readouterr().err
    assert 20 == ferry.load(out)["step"]


# -- gc -------------------------------------------------------------------------------------------------------------


def test_gc_dry_run_then_collect(capsys, run):
    stale = run / f"step-000000050.ferry-tmp-{DEAD_PID}-0badc0de"
    stale.mkdir()
    assert main(["gc", str(run), "--dry-run", "--json"]) == 0
    report = _json(capsys)
    assert [10] == [row["step"] for row in report["removed"]]
    assert [str(stale)] == report["stale_temporaries"]
    assert {20: ["best"], 30: ["last"], 40: ["last"]} == {row["step"]: row["kept_by"] for row in report["kept"]}
    assert _step(run, 10).exists()
    assert stale.exists()

    assert main(["gc", str(run)]) == 0
    out = capsys.readouterr().out
    assert "removed" in out
    assert "step-000000010" in out
    assert not _step(run, 10).exists()
    assert not stale.exists()
    assert [20, 30, 40] == sorted(ferry.Checkpointer(run).steps())
    assert not (run / ".ferry-lock").exists()


def test_gc_flags_override_the_recorded_policy(capsys, run):
    assert main(["gc", str(run), "--keep-last", "1", "--keep-best", "none", "--dry-run", "--json"]) == 0
    assert [10, 20, 30] == [row["step"] for row in _json(capsys)["removed"]]
    assert (
        main(["gc", str(run), "--keep-last", "1", "--keep-best", "val_loss:max", "--keep-every", "20", "--json"]) == 0
    )
    report = _json(capsys)
    assert [30] == [row["step"] for row in report["removed"]]
    assert {10: ["best"], 20: ["every"], 40: ["last", "every"]} == {r["step"]: r["kept_by"] for r in report["kept"]}


def test_gc_leaves_incomplete_checkpoints_alone(capsys, run):
    (_step(run, 10) / "manifest.json").unlink()
    assert main(["gc", str(run), "--keep-last", "1", "--json"]) == 0
    report = _json(capsys)
    assert [30] == [row["step"] for row in report["removed"]]
    assert [10] == [row["step"] for row in report["incomplete"]]
    assert _step(run, 10).exists()


def test_gc_without_recorded_policy_keeps_the_default(capsys, tmp_path):
    with ferry.Checkpointer(tmp_path, keep_last=10) as ckpt:
        for step in range(5):
            ckpt.save(step, {"x": step})
    for step in range(5):
        manifest_path = _step(tmp_path, step) / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        del manifest["retention"]
        manifest_path.write_text(json.dumps(manifest))
    assert main(["gc", str(tmp_path), "--json"]) == 0
    assert [0, 1] == [row["step"] for row in _json(capsys)["removed"]]  # the default keeps the last 3


def test_gc_refuses_while_a_checkpointer_writes(capsys, run):
    with ferry.Checkpointer(run, keep_last=10) as ckpt:
        ckpt.save(50, {"x": 1})
        assert main(["gc", str(run), "--keep-last", "1"]) == 2
        assert "being written by another process" in capsys.readouterr().err
        assert main(["gc", str(run), "--keep-last", "1", "--dry-run"]) == 0
        assert "would remove" in capsys.readouterr().out
        assert main(["ls", str(run), "--json"]) == 0
        assert "pid" in _json(capsys)["writer"]
    assert [10, 20, 30, 40, 50] == sorted(ferry.Checkpointer(run).steps())


@pytest.mark.parametrize(("args", "message"), GC_USAGE)
def test_gc_bad_flags(capsys, run, args, message):
    assert main(["gc", str(run), *args]) == 2
    assert message in capsys.readouterr().err


# -- shared helpers -------------------------------------------------------------------------------------------------


def test_flatten_paths_match_ferry_names():
    obj = {"model": OrderedDict(w=torch.ones(1)), "0": [1, (2, torch.Size([3]))], 5: {}, "a/b": None}
    expected = ["model/w", "~s0/0", "~s0/1/0", "~s0/1/1", "5", "a~1b"]
    assert expected == [path for path, _ in flatten(obj)]
    assert [("~root", 3)] == flatten(3)


@pytest.mark.parametrize(("size", "text"), SIZES)
def test_human_bytes(size, text):
    assert text == human_bytes(size)


def test_progress_bar_only_for_big_work_on_a_terminal():
    terminal = io.StringIO()
    with meter(100, "verifying big.safetensors", Console(file=terminal, force_terminal=True), threshold=10) as bar:
        bar.describe("verifying big.safetensors")
        bar.advance(100)
    assert "verifying big.safetensors" in terminal.getvalue()
    for console, threshold in [
        (Console(file=io.StringIO(), force_terminal=True), 1000),
        (Console(file=io.StringIO()), 10),
    ]:
        with meter(100, "small", console, threshold=threshold) as bar:
            bar.advance(100)
        assert "" == console.file.getvalue()


def test_verify_and_inspect_torch_save_zip(capsys, tmp_path):
    path = tmp_path / "model.pt"
    torch.save(nn.Linear(3, 2).state_dict(), path)
    assert main(["verify", str(path), "--json"]) == 0
    (check,) = _json(capsys)["checked"]
    assert ("torch.save file (zip)", "the CRC-32 of every zip entry") == (check["kind"], check["checked"])
    assert main(["inspect", str(path), "--json"]) == 0
    report = _json(capsys)
    assert ("torch.save file (zip)", 8) == (report["kind"], report["total"]["params"])
    assert [
        {"name": "weight", "tensors": 1, "params": 6, "bytes": 24},
        {"name": "bias", "tensors": 1, "params": 2, "bytes": 8},
    ] == report["entries"]


def test_convert_a_pickled_whole_module_writes_its_state_dict(tmp_path, capsys):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    source = tmp_path / "whole.pt"
    torch.save(model, source)  # FRY004's bug: the commonest legacy file
    out = tmp_path / "model.safetensors"
    assert 0 == main(["convert", str(source), str(out), "--trusted"])
    assert "whole Sequential module: its state_dict was written" in capsys.readouterr().err
    fresh = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    fresh.load_state_dict(ferry.load(out))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values(), strict=True))


def test_an_unsafe_pickle_names_the_cli_flag_not_the_python_argument(tmp_path, capsys):
    path = tmp_path / "note.pt"
    torch.save({"w": torch.ones(2), "note": Note("hello")}, path)
    assert 2 == main(["inspect", str(path)])
    err = capsys.readouterr().err
    assert "pass --trusted" in err
    assert "trusted=True" not in err
    with pytest.raises(ferry.UnsafeCheckpointError, match=r"ferry\.load\(path, trusted=True\)"):
        ferry.load(path)
