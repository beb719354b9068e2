"""Every error is a FerryError: each public function called with wrong types and values, and each CLI command with
bad arguments and bad paths, raises a ``FerryError`` (``ArgumentError`` for bad arguments) or exits 2 with one line
on stderr that says what and the fix; never another exception, never a traceback."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import ferry
from ferry.cli import main

#: values a caller passes by mistake
BAD = {
    "None": None,
    "int": 5,
    "negative": -1,
    "empty str": "",
    "str": "not-a-thing",
    "object": object(),
    "tensor": torch.ones(2),
    "list": [1, "x"],
    "bool": True,
    "nan": float("nan"),
}

#: public function -> a call with the bad value in each argument position (other arguments valid)
CALLS: dict[str, Any] = {
    "pick_device": lambda bad: ferry.pick_device(bad),
    "module_device": lambda bad: ferry.module_device(bad),
    "place": lambda bad: ferry.place(bad, "cpu"),
    "place device": lambda bad: ferry.place(torch.nn.Linear(2, 2), bad),
    "to_device": lambda bad: ferry.to_device({"x": torch.ones(1)}, bad),
    "offload": lambda bad: ferry.offload(bad),
    "check_devices": lambda bad: ferry.check_devices(bad),
    "save path": lambda bad: ferry.save({"w": torch.ones(1)}, bad),
    "save obj": lambda bad: (
        ferry.save(bad, "x.safetensors") if not isinstance(bad, (int, str, bool, float, type(None), list)) else None
    ),
    "load": lambda bad: ferry.load(bad),
    "load device": lambda bad: ferry.load("missing.safetensors", device=bad),
    "verify": lambda bad: ferry.verify(bad),
    "load_state_dict module": lambda bad: ferry.load_state_dict(bad, {}),
    "load_state_dict source": lambda bad: ferry.load_state_dict(torch.nn.Linear(2, 2), bad),
    "Checkpointer directory": lambda bad: ferry.Checkpointer(bad),
    "Checkpointer keep_last": lambda bad: ferry.Checkpointer("run", keep_last=bad),
    "Checkpointer every_steps": lambda bad: ferry.Checkpointer("run", every_steps=bad),
    "ResumableSampler": lambda bad: ferry.ResumableSampler(bad),
    "ResumableSampler seed": lambda bad: ferry.ResumableSampler(range(4), seed=bad),
    "sanitize on_error": lambda bad: ferry.sanitize(on_error=bad),
    "sanitize pretend": lambda bad: ferry.sanitize(pretend=bad),
    "distributed.wrap": lambda bad: ferry.distributed.wrap(bad),
}


@pytest.mark.parametrize(
    ("call", "bad"), list(itertools.product(CALLS, BAD)), ids=[f"{c}-{b}" for c, b in itertools.product(CALLS, BAD)]
)
def test_public_functions_raise_only_ferry_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, bad: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = CALLS[call](BAD[bad])
        except ferry.FerryError:
            return
        if hasattr(result, "close"):
            result.close()


#: (arguments, what stderr must say)
CLI_CASES = [
    (["nope"], "unknown command"),
    (["ckpt"], "usage"),
    (["ckpt", "inspect"], "usage"),
    (["ckpt", "inspect", "missing.pt"], "no file or folder"),
    (["ckpt", "verify", "missing.pt"], "no file or folder"),
    (["ckpt", "ls", "missing"], "no file or folder"),
    (["ckpt", "gc", "missing"], "no file or folder"),
    (["ckpt", "diff", "a.pt"], "usage"),
    (["ckpt", "diff", "missing.pt", "other.pt"], "no file or folder"),
    (["ckpt", "convert", "missing.pt", "out.safetensors"], "no file or folder"),
    (["ckpt", "inspect", "--bogus", "x"], "unrecognized"),
    (["ckpt", "gc", ".", "--keep-best", "nonsense"], "METRIC:min"),
    (["env", "--bogus"], "unrecognized"),
    (["lint", "--select", "NOPE999", "."], "NOPE999"),
    (["lint", "--format", "xml", "."], "invalid choice"),
    (["run"], "usage"),
    (["run", "missing.py"], "missing.py"),
    (["run", "--device-count", "2", "x.py"], "needs --pretend cuda"),
    (["demo", "--steps", "0"], "--steps"),
    (["demo", "--nproc", "0"], "--nproc"),
]


@pytest.mark.parametrize(("args", "says"), CLI_CASES, ids=[" ".join(a) for a, _ in CLI_CASES])
def test_cli_bad_arguments_exit_2_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        code = main(args)
    except SystemExit as exit_:  # argparse inside a command
        code = exit_.code
    err = capsys.readouterr().err
    assert 2 == code, err
    assert says.lower() in err.lower(), err
    assert "Traceback" not in err
