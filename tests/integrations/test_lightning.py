"""FerryCheckpointIO with a real Lightning Trainer and Fabric on the CPU: what a checkpoint holds comes back equal,
a run killed with SIGKILL resumes to the same weights as a run left alone, a value only pickle could store is
refused before anything is written, AsyncCheckpointIO, map_location, damaged files, load_from_checkpoint."""

from __future__ import annotations

import copy
import json
import math
import os
import signal
import subprocess
import sys
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ferry
from _support import REPO
from ferry.checkpoint.file.kinds import sniff
from ferry.errors import ArgumentError, CheckpointError, CorruptCheckpointError, DeviceError, UnsafeCheckpointError

pl = pytest.importorskip("lightning.pytorch")
from lightning.fabric import Fabric  # noqa: E402
from lightning.fabric.plugins.io import TorchCheckpointIO  # noqa: E402
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint  # noqa: E402
from lightning.pytorch.plugins.io import AsyncCheckpointIO  # noqa: E402
from lightning.pytorch.plugins.precision import MixedPrecision  # noqa: E402
from lightning.pytorch.utilities.parsing import AttributeDict  # noqa: E402

from ferry.integrations.lightning import CheckpointNotFoundError, FerryCheckpointIO, load_from_checkpoint  # noqa: E402

WORKER = Path(__file__).with_name("lightning_worker.py")

# Lightning 2.6 asks torch 2.13's pytree in a way torch deprecates; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")

#: the top-level keys a Trainer writes for the model below (the precision plugin's state comes with a GradScaler)
TRAINER_KEYS = {
    "epoch",
    "global_step",
    "pytorch-lightning_version",
    "state_dict",
    "loops",
    "callbacks",
    "optimizer_states",
    "lr_schedulers",
    "hparams_name",
    "hyper_parameters",
}

#: map_location -> the device the tensors must come back on
MAP_LOCATIONS: list[tuple[str, Any, str]] = [
    ("None", None, "cpu"),
    ("str", "cpu", "cpu"),
    ("torch.device", torch.device("meta"), "meta"),
    ("dict", {"cpu": "meta"}, "meta"),
    ("dict without cpu", {"cuda:0": "cpu"}, "cpu"),
    ("identity function", lambda storage, location: storage, "cpu"),
    ("function returning None", lambda storage, location: None, "cpu"),
    ("function moving", lambda storage, location: torch.empty(0, device="meta").untyped_storage(), "meta"),
]

BAD_MAP_LOCATIONS: list[tuple[str, Any, type[Exception]]] = [
    ("float", 1.5, ArgumentError),
    ("dict to a non-device", {"cpu": 5.0}, ArgumentError),
    ("function returning a str", lambda storage, location: "cuda:0", ArgumentError),
    ("misspelt device", "cdua", DeviceError),
]


class Regression(pl.LightningModule):  # type: ignore[misc]
    def __init__(
        self,
        hidden: int = 8,
        lr: float = 0.05,
        betas: tuple[float, float] = (0.9, 0.99),
        config: dict[str, Any] | None = None,
        activation: Any = "tanh",
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(4, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # type: ignore[no-any-return]

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr, betas=self.hparams.betas)
        return {"optimizer": optimizer, "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.5)}


class Recording(FerryCheckpointIO):
    """FerryCheckpointIO that also keeps a deep copy of each checkpoint it is given, to compare with the file."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: dict[str, dict[str, Any]] = {}

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        self.saved[os.fspath(path)] = copy.deepcopy(checkpoint)
        super().save_checkpoint(checkpoint, path, storage_options)


def loader() -> DataLoader[tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(16, 4, generator=generator)
    return DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=4)


def trainer(folder: Path, plugins: list[Any], callbacks: list[Any] | None = None, **options: Any) -> Any:
    options = {"max_epochs": 2, **options}
    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=folder,
        plugins=plugins,
        callbacks=callbacks or [],
        enable_checkpointing=callbacks is not None,
        **options,
    )


def assert_same(expected: Any, actual: Any, where: str = "checkpoint") -> None:
    """Equal values, and the same container and key types, except dict subclasses come back as dicts."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), where
        assert (expected.dtype, expected.shape) == (actual.dtype, actual.shape), where
        assert torch.equal(expected.cpu(), actual), where
        return
    if isinstance(expected, dict):
        assert (OrderedDict if isinstance(expected, OrderedDict) else dict) is type(actual), where
        assert [(type(k), k) for k in expected] == [(type(k), k) for k in actual], where
        for key, value in expected.items():
            assert_same(value, actual[key], f"{where}[{key!r}]")
        return
    assert type(expected) is type(actual), where
    if isinstance(expected, (list, tuple)):
        assert len(expected) == len(actual), where
        for index, (a, b) in enumerate(zip(expected, actual, strict=True)):
            assert_same(a, b, f"{where}[{index}]")
    elif isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(actual), where
    else:
        assert expected == actual, where


def is_ferry_file(path: Path) -> bool:
    ferry.verify(path)
    return "ferry" == sniff(path)[0] and not zipfile.is_zipfile(path)


# --- 1. round trip -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed with a GradScaler"])
def test_every_key_of_a_trainer_checkpoint_round_trips(tmp_path: Path, precision: str) -> None:
    io = Recording()
    plugins: list[Any] = [io]
    if precision == "bf16-mixed":
        options = {"precision": "bf16-mixed"}
        expected_keys = TRAINER_KEYS
    else:  # on the CPU, precision="16-mixed" falls back to bf16; a GradScaler given explicitly has a state
        plugins.append(MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu")))
        options = {}
        expected_keys = TRAINER_KEYS | {"MixedPrecision"}
    callbacks = [
        ModelCheckpoint(tmp_path / "ckpt", monitor="loss", save_top_k=2, save_last=True),
        EarlyStopping("loss", patience=5),
    ]
    model = Regression(config=AttributeDict(depth=2, names=["a", "b"]), betas=(0.8, 0.9))
    trainer(tmp_path, plugins, callbacks, **options).fit(model, loader())

    written = {p.name for p in (tmp_path / "ckpt").iterdir()}
    assert {"epoch=0-step=4.ckpt", "epoch=1-step=8.ckpt", "last.ckpt"} == written
    for name, checkpoint in io.saved.items():
        assert expected_keys == set(checkpoint)
        assert is_ferry_file(Path(name))
        loaded = FerryCheckpointIO().load_checkpoint(name)
        assert_same(checkpoint, loaded)
    loaded = FerryCheckpointIO().load_checkpoint(tmp_path / "ckpt" / "last.ckpt")
    assert 8 == loaded["global_step"]
    assert {"depth": 2, "names": ["a", "b"]} == loaded["hyper_parameters"]["config"]
    assert (0.8, 0.9) == loaded["hyper_parameters"]["betas"]
    states = loaded["callbacks"]
    assert any(key.startswith("ModelCheckpoint{") for key in states)
    assert any(key.startswith("EarlyStopping{") for key in states)
    assert 0 in loaded["optimizer_states"][0]["state"]  # int keys stay ints


def test_a_torch_save_checkpoint_from_before_the_switch_loads(tmp_path: Path) -> None:
    model = Regression()
    trainer(tmp_path, [TorchCheckpointIO()], [ModelCheckpoint(tmp_path / "ckpt")]).fit(model, loader())
    path = tmp_path / "ckpt" / "epoch=1-step=8.ckpt"

    expected = torch.load(path, weights_only=True)
    assert_same(expected, FerryCheckpointIO().load_checkpoint(path))


def test_fabric_save_and_load_round_trip(tmp_path: Path) -> None:
    fabric = Fabric(accelerator="cpu", devices=1, plugins=[FerryCheckpointIO()])
    net = nn.Linear(3, 2)
    model, optimizer = fabric.setup(net, torch.optim.AdamW(net.parameters()))
    fabric.backward(model(torch.ones(1, 3)).sum())
    optimizer.step()
    fabric.save(tmp_path / "a" / "state.ckpt", {"model": model, "optimizer": optimizer, "step": 7, "tag": ("x", 1)})

    fresh = nn.Linear(3, 2)
    fresh_optimizer = torch.optim.AdamW(fresh.parameters())
    state: dict[str, Any] = {"model": fresh, "optimizer": fresh_optimizer, "step": 0, "tag": None}
    assert {} == fabric.load(tmp_path / "a" / "state.ckpt", state)
    assert (7, ("x", 1)) == (state["step"], state["tag"])
    assert_same(model.state_dict(), fresh.state_dict())
    assert_same(optimizer.state_dict(), fresh_optimizer.state_dict())
    assert is_ferry_file(tmp_path / "a" / "state.ckpt")


# --- 2, 3. killed and resumed --------------------------------------------------------------------------------------


def run_worker(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, str(WORKER), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)


def final_weights(folder: Path) -> dict[str, torch.Tensor]:
    weights: dict[str, torch.Tensor] = ferry.load(folder / "final.safetensors")
    return weights


def kill_then_resume(mode: str, tmp_path: Path, every: int, kill_at: int) -> tuple[Path, Path]:
    """Run ``mode`` killed at ``kill_at``, then resumed in a new process, which then also trains uninterrupted."""
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    dead = run_worker(mode, str(killed), "--every", str(every), "--kill-at-step", str(kill_at))
    assert -signal.SIGKILL == dead.returncode, dead.stderr
    assert not (killed / "final.safetensors").exists()
    resumed = run_worker(mode, str(killed), "--every", str(every), "--resume", "--then-straight", str(straight))
    assert 0 == resumed.returncode, resumed.stderr
    assert {"step": kill_at} == json.loads((killed / "start.json").read_text())
    assert {"step": 0} == json.loads((straight / "start.json").read_text())
    return straight, killed


@pytest.mark.slow
def test_a_trainer_killed_at_an_epoch_end_resumes_to_the_same_weights(tmp_path: Path) -> None:
    # 4 batches an epoch, a checkpoint every 4 steps: SIGKILL when the step after the second one starts
    straight, killed = kill_then_resume("trainer", tmp_path, every=4, kill_at=8)

    assert_same(final_weights(straight), final_weights(killed))
    names = ["epoch=0-step=4.ckpt", "epoch=1-step=8.ckpt", "epoch=2-step=12.ckpt", "epoch=3-step=16.ckpt", "last.ckpt"]
    assert names == sorted(p.name for p in (killed / "ckpt").iterdir())
    assert all(is_ferry_file(p) for p in (killed / "ckpt").iterdir())
    assert 16 == ferry.load(killed / "ckpt" / "last.ckpt")["global_step"]


@pytest.mark.slow
def test_a_fabric_loop_killed_mid_epoch_resumes_to_the_same_weights(tmp_path: Path) -> None:
    # the loop's state holds a ferry.ResumableSampler, so Fabric resumes in the middle of the second epoch
    straight, killed = kill_then_resume("fabric", tmp_path, every=3, kill_at=6)

    assert_same(final_weights(straight), final_weights(killed))
    names = ["last.ckpt", "step-12.ckpt", "step-15.ckpt", "step-3.ckpt", "step-6.ckpt", "step-9.ckpt"]
    assert names == sorted(p.name for p in (killed / "ckpt").iterdir())
    assert all(is_ferry_file(p) for p in (killed / "ckpt").iterdir())
    assert {"epoch": 1, "position": 8} == {
        k: v for k, v in ferry.load(killed / "ckpt" / "step-6.ckpt")["sampler"].items() if k in ("epoch", "position")
    }


# --- 4. values only pickle could store ---------------------------------------------------------------------------


def test_a_function_in_hparams_is_refused_and_the_previous_file_kept(tmp_path: Path) -> None:
    path = tmp_path / "model.ckpt"
    good = trainer(tmp_path, [FerryCheckpointIO()], max_steps=2)
    good.fit(Regression(), loader())
    good.save_checkpoint(path)
    before = path.read_bytes()
    bad = trainer(tmp_path, [FerryCheckpointIO()], max_steps=2)
    bad.fit(Regression(activation=torch.tanh), loader())

    with pytest.raises(UnsafeCheckpointError, match=r'hyper_parameters\["activation"\] is a builtin_function') as err:
        bad.save_checkpoint(path)
    assert 'self.save_hyperparameters(ignore=["activation"])' in str(err.value)
    assert "store its name (a str)" in str(err.value)
    assert before == path.read_bytes()
    assert ["model.ckpt"] == [p.name for p in tmp_path.iterdir() if p.is_file()]


UNSAFE: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "module in hparams",
        {"pytorch-lightning_version": "2.6", "hyper_parameters": {"encoder": nn.Linear(1, 1)}},
        r'hyper_parameters\["encoder"\] is a torch.nn.modules.linear.Linear',
        'self.save_hyperparameters(ignore=["encoder"])',
    ),
    (
        "nested path in datamodule hparams",
        {"pytorch-lightning_version": "2.6", "datamodule_hyper_parameters": {"root": {"dir": Path("data")}}},
        r'datamodule_hyper_parameters\["root"\]\["dir"\] is a pathlib.PosixPath',
        "store str(value)",
    ),
    (
        "object in a callback state",
        {"pytorch-lightning_version": "2.6", "callbacks": {"Timer": {"clock": object()}}},
        r'callbacks\["Timer"\]\["clock"\] is a object',
        "The callback Timer's state_dict() returns it",
    ),
    (
        "tuple key",
        {"pytorch-lightning_version": "2.6", "loops": {(1, 2): 3}},
        r"loops has a key of type tuple \(\(1, 2\)\)",
        "on_save_checkpoint",
    ),
    (
        "Fabric state",
        {"model": {"w": torch.ones(1)}, "schedule": lambda step: step},
        r'state\["schedule"\] is a function',
        "Fabric.save stores modules",
    ),
]


@pytest.mark.parametrize(("checkpoint", "where", "fix"), [case[1:] for case in UNSAFE], ids=[c[0] for c in UNSAFE])
def test_an_unsafe_value_is_named_with_its_fix_and_nothing_written(
    tmp_path: Path, checkpoint: dict[str, Any], where: str, fix: str
) -> None:
    path = tmp_path / "new" / "x.ckpt"
    with pytest.raises(UnsafeCheckpointError, match=where) as err:
        FerryCheckpointIO().save_checkpoint(checkpoint, path)
    assert fix in str(err.value)
    assert err.value.path == path
    assert not (tmp_path / "new").exists()


def test_dict_subclasses_and_numpy_floats_are_stored_as_plain_values(tmp_path: Path) -> None:
    numpy = pytest.importorskip("numpy")
    checkpoint = {"hyper_parameters": AttributeDict(lr=numpy.float64(0.5), nested=AttributeDict(a=1))}
    FerryCheckpointIO().save_checkpoint(checkpoint, tmp_path / "x.ckpt")

    loaded = FerryCheckpointIO().load_checkpoint(tmp_path / "x.ckpt")
    assert {"hyper_parameters": {"lr": 0.5, "nested": {"a": 1}}} == loaded
    assert (dict, dict, float) == (
        type(loaded["hyper_parameters"]),
        type(loaded["hyper_parameters"]["nested"]),
        type(loaded["hyper_parameters"]["lr"]),
    )


@pytest.mark.parametrize("target", ["replace", "fsync"])
def test_a_save_failing_on_the_disk_keeps_the_previous_last_ckpt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    callbacks = [ModelCheckpoint(tmp_path / "ckpt", every_n_train_steps=2, save_last=True)]
    fit = trainer(tmp_path, [FerryCheckpointIO()], callbacks, max_steps=4)
    fit.fit(Regression(), loader())
    last = tmp_path / "ckpt" / "last.ckpt"
    before = last.read_bytes()

    def fail(*args: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, target, fail)
    with pytest.raises(CheckpointError, match="Input/output error"):
        fit.save_checkpoint(last)
    monkeypatch.undo()
    assert before == last.read_bytes()
    assert 4 == FerryCheckpointIO().load_checkpoint(last)["global_step"]
    assert ["epoch=0-step=4.ckpt", "last.ckpt"] == sorted(p.name for p in (tmp_path / "ckpt").iterdir())


# --- 5. async, remove, map_location, damaged files, errors --------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Checkpoint directory .* exists and is not empty")  # resuming into it, as users do
def test_async_checkpoint_io_wrapping_writes_the_same_files(tmp_path: Path) -> None:
    def callbacks(folder: str) -> list[Any]:
        return [ModelCheckpoint(tmp_path / folder, every_n_train_steps=2, save_top_k=-1, save_last=True)]

    model = Regression()
    trainer(tmp_path, [AsyncCheckpointIO(FerryCheckpointIO())], callbacks("ckpt")).fit(model, loader())

    files = sorted((tmp_path / "ckpt").iterdir())
    assert ["epoch=0-step=2.ckpt", "epoch=0-step=4.ckpt", "epoch=1-step=6.ckpt", "epoch=1-step=8.ckpt"] == [
        p.name for p in files[:-1]
    ]
    assert all(is_ferry_file(p) for p in files)
    assert_same(model.state_dict(), FerryCheckpointIO().load_checkpoint(tmp_path / "ckpt" / "last.ckpt")["state_dict"])

    resumed = Regression()
    trainer(tmp_path, [AsyncCheckpointIO(FerryCheckpointIO())], callbacks("ckpt")).fit(
        resumed, loader(), ckpt_path=tmp_path / "ckpt" / "last.ckpt"
    )
    assert_same(model.state_dict(), resumed.state_dict())  # nothing left to train: the weights as saved


def test_async_checkpoint_io_raises_an_unsafe_value(tmp_path: Path) -> None:
    model = Regression(activation=torch.tanh)
    callbacks = [ModelCheckpoint(tmp_path / "ckpt", every_n_train_steps=2)]
    with pytest.raises(UnsafeCheckpointError, match=r'hyper_parameters\["activation"\]'):
        trainer(tmp_path, [AsyncCheckpointIO(FerryCheckpointIO())], callbacks).fit(model, loader())
    assert not (tmp_path / "ckpt").exists()


def test_model_checkpoint_removes_old_files_through_the_plugin(tmp_path: Path) -> None:
    callbacks = [ModelCheckpoint(tmp_path / "ckpt", every_n_train_steps=2, save_top_k=1, monitor="step", mode="max")]
    trainer(tmp_path, [FerryCheckpointIO()], callbacks).fit(Regression(), loader())

    assert ["epoch=1-step=8.ckpt"] == [p.name for p in (tmp_path / "ckpt").iterdir()]


def test_remove_checkpoint_is_quiet_when_gone_and_takes_leftovers(tmp_path: Path) -> None:
    io = FerryCheckpointIO()
    path = tmp_path / "last.ckpt"
    io.save_checkpoint({"step": 1}, path)
    dead_writer = tmp_path / "last.ckpt.ferry-tmp-999999999-0a1b2c3d"  # no such pid
    dead_writer.write_bytes(b"half a checkpoint")
    other = tmp_path / "other.ckpt"
    io.save_checkpoint({"step": 2}, other)

    io.remove_checkpoint(path)
    io.remove_checkpoint(path)
    assert ["other.ckpt"] == [p.name for p in tmp_path.iterdir()]
    folder = tmp_path / "sharded.ckpt"
    (folder / "sub").mkdir(parents=True)
    io.remove_checkpoint(folder)
    assert not folder.exists()


@pytest.mark.parametrize(("map_location", "device"), [c[1:] for c in MAP_LOCATIONS], ids=[c[0] for c in MAP_LOCATIONS])
def test_map_location(tmp_path: Path, map_location: Any, device: str) -> None:
    io = FerryCheckpointIO()
    io.save_checkpoint({"state_dict": {"w": torch.ones(2)}, "where": torch.device("cpu")}, tmp_path / "x.ckpt")

    loaded = io.load_checkpoint(tmp_path / "x.ckpt", map_location=map_location)
    assert device == loaded["state_dict"]["w"].device.type
    assert torch.device("cpu") == loaded["where"]


@pytest.mark.parametrize(
    ("map_location", "error"), [c[1:] for c in BAD_MAP_LOCATIONS], ids=[c[0] for c in BAD_MAP_LOCATIONS]
)
def test_a_map_location_that_cannot_apply_is_an_error(
    tmp_path: Path, map_location: Any, error: type[Exception]
) -> None:
    FerryCheckpointIO().save_checkpoint({"w": torch.ones(2)}, tmp_path / "x.ckpt")
    with pytest.raises(error, match=r"map_location|cdua"):
        FerryCheckpointIO().load_checkpoint(tmp_path / "x.ckpt", map_location=map_location)


@pytest.mark.parametrize("weights_only", [None, True, False])
def test_weights_only_changes_nothing_for_a_ferry_file(tmp_path: Path, weights_only: bool | None) -> None:
    FerryCheckpointIO().save_checkpoint({"w": torch.arange(3)}, tmp_path / "x.ckpt")
    loaded = FerryCheckpointIO().load_checkpoint(tmp_path / "x.ckpt", weights_only=weights_only)
    assert_same({"w": torch.arange(3)}, loaded)


DAMAGE: list[tuple[str, Callable[[bytes], bytes]]] = [
    ("a flipped bit in a tensor", lambda data: data[:-3] + bytes([data[-3] ^ 1]) + data[-2:]),
    ("truncated", lambda data: data[: len(data) // 2]),
    ("empty", lambda data: b""),
]


@pytest.mark.parametrize("damage", [c[1] for c in DAMAGE], ids=[c[0] for c in DAMAGE])
def test_a_damaged_checkpoint_is_corrupt_for_the_plugin_and_the_trainer(
    tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    path = tmp_path / "last.ckpt"
    state = {"pytorch-lightning_version": "2.6", "state_dict": Regression().state_dict()}
    FerryCheckpointIO().save_checkpoint(state, path)
    path.write_bytes(damage(path.read_bytes()))

    with pytest.raises(CorruptCheckpointError):
        FerryCheckpointIO().load_checkpoint(path)
    with pytest.raises(CorruptCheckpointError):
        trainer(tmp_path, [FerryCheckpointIO()], max_steps=4).fit(Regression(), loader(), ckpt_path=path)


def test_a_missing_checkpoint_is_a_file_not_found_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointNotFoundError, match="no checkpoint at") as err:
        FerryCheckpointIO().load_checkpoint(tmp_path / "nope.ckpt")
    assert isinstance(err.value, FileNotFoundError)
    assert isinstance(err.value, CheckpointError)
    assert tmp_path / "nope.ckpt" == err.value.path


BAD_CALLS: list[tuple[str, Callable[[Path], object], str]] = [
    ("storage_options", lambda p: FerryCheckpointIO().save_checkpoint({}, p, storage_options={"a": 1}), "storage_"),
    ("URL", lambda p: FerryCheckpointIO().save_checkpoint({}, "s3://bucket/x.ckpt"), "a URL"),
    ("URL load", lambda p: FerryCheckpointIO().load_checkpoint("gs://bucket/x.ckpt"), "a URL"),
    ("not a dict", lambda p: FerryCheckpointIO().save_checkpoint([1], p), "needs a dict"),  # type: ignore[arg-type]
    ("not a path", lambda p: FerryCheckpointIO().save_checkpoint({}, 5), "needs a file path"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("call", "words"), [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_arguments_are_argument_errors_before_anything_is_written(
    tmp_path: Path, call: Callable[[Path], object], words: str
) -> None:
    with pytest.raises(ArgumentError, match=words):
        call(tmp_path / "sub" / "x.ckpt")
    assert [] == list(tmp_path.iterdir())


def test_storage_options_is_a_type_error_like_torch_checkpoint_io(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        TorchCheckpointIO().save_checkpoint({}, tmp_path / "t.ckpt", storage_options={})
    with pytest.raises(TypeError):
        FerryCheckpointIO().save_checkpoint({}, tmp_path / "f.ckpt", storage_options={})


# --- inference: load_from_checkpoint, ferry.verify, ferry ckpt ----------------------------------------------------


def test_load_from_checkpoint_mirrors_lightning(tmp_path: Path) -> None:
    model = Regression(hidden=6, lr=0.01)
    fit = trainer(tmp_path, [FerryCheckpointIO()], max_steps=3)
    fit.fit(model, loader())
    ferry_path, torch_path = tmp_path / "ferry.ckpt", tmp_path / "torch.ckpt"
    fit.save_checkpoint(ferry_path)
    TorchCheckpointIO().save_checkpoint(FerryCheckpointIO().load_checkpoint(ferry_path), torch_path)

    expected = Regression.load_from_checkpoint(torch_path, lr=0.5)
    loaded = load_from_checkpoint(Regression, ferry_path, lr=0.5)
    assert type(expected) is type(loaded)
    assert dict(expected.hparams) == dict(loaded.hparams)
    assert 0.5 == loaded.hparams.lr
    assert 6 == loaded.hparams.hidden
    assert expected.training == loaded.training
    assert_same(model.state_dict(), loaded.state_dict())


def test_lightning_own_load_from_checkpoint_cannot_open_a_ferry_file(tmp_path: Path) -> None:
    fit = trainer(tmp_path, [FerryCheckpointIO()], max_steps=1)
    fit.fit(Regression(), loader())
    fit.save_checkpoint(tmp_path / "x.ckpt")
    with pytest.raises(Exception):  # noqa: B017, PT011 - torch.load's error for a non-zip file varies by version
        Regression.load_from_checkpoint(tmp_path / "x.ckpt")


def test_load_from_checkpoint_refuses_a_non_module_class(tmp_path: Path) -> None:
    with pytest.raises(ArgumentError, match="LightningModule"):
        load_from_checkpoint(nn.Linear, tmp_path / "x.ckpt")  # type: ignore[type-var]


def test_the_checkpoint_is_a_ferry_file_for_ferry_and_its_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ferry.cli import main as ferry_main

    fit = trainer(tmp_path, [FerryCheckpointIO()], max_steps=1)
    fit.fit(Regression(), loader())
    fit.save_checkpoint(tmp_path / "x.ckpt")

    ferry.verify(tmp_path / "x.ckpt")
    assert 0 == ferry_main(["ckpt", "verify", str(tmp_path / "x.ckpt")])
    assert 0 == ferry_main(["ckpt", "inspect", str(tmp_path / "x.ckpt")])
    assert "state_dict" in capsys.readouterr().out


# --- the benchmark -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_bench_lightning_quick(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    folder = tmp_path / "bench"
    folder.mkdir()
    command = [sys.executable, str(REPO / "benchmarks" / "bench_lightning.py"), "--quick", "--repeat", "2"]
    proc = subprocess.run(
        [*command, "--dir", str(folder), "--json", str(out)], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert 0 == proc.returncode, proc.stderr
    report = json.loads(out.read_text())
    assert {} == report["errors"]
    assert ["ferry", "torch"] == list(report["results"]["methods"])
    for figures in report["results"]["methods"].values():
        assert figures["median_s"] > 0
        assert 2 == len(figures["samples_s"])
        assert figures["values_equal"] is True
    assert report["results"]["ratio_ferry_vs_torch"] > 0
    assert "| ferry |" in proc.stdout
    assert [] == list(folder.iterdir())
