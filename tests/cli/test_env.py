from __future__ import annotations

import json
import platform

import pytest
import torch

import ferry
from ferry.cli.env import _gib, main

JSON_KEYS = ["cuda", "default_device", "default_device_error", "devices", "ferry", "hip", "python", "torch"]
DEVICE_KEYS = ["free_memory", "index", "name", "total_memory", "type"]

# (size in bytes, as the table shows it)
GIB = [
    (None, "unknown"),
    (0, "0.0 GiB"),
    (3 * 1024**3, "3.0 GiB"),
    (int(79.6 * 1024**3), "79.6 GiB"),
    (1536 * 1024**3, "1,536.0 GiB"),
]

# (arguments, exit code, what stdout or stderr must contain)
USAGE = [
    (["--help"], 0, "usage: ferry env [-h] [--json]"),
    (["--bogus"], 2, "unrecognized arguments: --bogus"),
    (["list"], 2, "unrecognized arguments: list"),
]


@pytest.fixture(autouse=True)
def _outside_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERRY_DEVICE", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)


def test_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    expected_keys = JSON_KEYS
    assert expected_keys == sorted(env)
    expected_versions = (ferry.__version__, platform.python_version(), str(torch.__version__), torch.version.cuda)
    assert expected_versions == (env["ferry"], env["python"], env["torch"], env["cuda"])
    assert torch.version.hip == env["hip"]
    assert (str(ferry.pick_device()), None) == (env["default_device"], env["default_device_error"])
    expected_device_keys = DEVICE_KEYS
    for device in env["devices"]:
        assert expected_device_keys == sorted(device)
    cpu = env["devices"][-1]
    expected_cpu = ("cpu", None)
    assert expected_cpu == (cpu["type"], cpu["index"])
    assert cpu["name"]


def test_json_memory_is_in_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--json"])
    cpu = json.loads(capsys.readouterr().out)["devices"][-1]
    if cpu["total_memory"] is not None:
        assert isinstance(cpu["total_memory"], int)
        assert cpu["total_memory"] > 2**20  # no machine running torch has under a MiB of RAM


def test_json_reports_a_bad_ferry_device(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_DEVICE", "cuda:99")
    assert main(["--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["default_device"] is None
    assert 'FERRY_DEVICE="cuda:99"' in env["default_device_error"]


def test_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    for expected in ["Devices", "Total", "Free", "GiB", "cpu", "ferry", "torch", "CUDA", "Python", "pick_device()"]:
        assert expected in out
    assert torch.__version__ in out
    assert str(ferry.pick_device()) in out


def test_table_reports_a_bad_ferry_device(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_DEVICE", "cdua")
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "error:" in out
    assert "FERRY_DEVICE" in out


@pytest.mark.parametrize(("argv", "code", "message"), USAGE)
def test_usage(argv: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert code == main(argv)
    captured = capsys.readouterr()
    assert message in captured.out + captured.err


@pytest.mark.parametrize(("size", "expected"), GIB)
def test_gib(size: int | None, expected: str) -> None:
    assert expected == _gib(size)
