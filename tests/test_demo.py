import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from ferry.cli import main

pytest.importorskip("sklearn")


def test_demo_trains_checkpoints_and_reports(tmp_path, capsys):
    assert main(["demo", "--steps", "300", "--every", "100", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    accuracy = float(re.search(r"test accuracy: (\d\.\d+)", out).group(1))
    assert accuracy >= 0.90
    assert "outputs match the trained model" in out
    assert (tmp_path / "model.safetensors").is_file()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "step-000000100",
        "step-000000200",
        "step-000000300",
    ]
    # a finished run says so and still reports
    assert main(["demo", "--steps", "300", "--every", "100", "--dir", str(tmp_path)]) == 0
    assert "already finished at step 300" in capsys.readouterr().out


def test_demo_rejects_bad_flags(capsys):
    assert main(["demo", "--steps", "0"]) == 2
    assert main(["demo", "--device", "cuda:7"]) == 2
    assert "cuda:7" in capsys.readouterr().err


def test_demo_resume_is_exact(tmp_path, capsys):
    # 200 steps straight vs 100 steps, then resumed to 200: the same final weights
    import ferry

    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["demo", "--steps", "200", "--every", "50", "--dir", str(a)]) == 0
    assert main(["demo", "--steps", "100", "--every", "50", "--dir", str(b)]) == 0
    assert main(["demo", "--steps", "200", "--every", "50", "--dir", str(b)]) == 0
    assert "resumed from" in capsys.readouterr().out
    wa, wb = ferry.load(a / "model.safetensors"), ferry.load(b / "model.safetensors")
    assert wa.keys() == wb.keys()
    for key in wa:
        assert (wa[key] == wb[key]).all(), key


@pytest.mark.slow
def test_demo_survives_sigterm_and_resumes(tmp_path):
    command = [sys.executable, "-m", "ferry", "demo", "--steps", "3000", "--every", "50", "--dir", str(tmp_path)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    checkpoints = tmp_path / "checkpoints"
    deadline = time.monotonic() + 120
    while not (checkpoints.is_dir() and any(p.name.startswith("step-") for p in checkpoints.iterdir())):
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "interrupted: saved step" in out
    assert "Run the same command again to resume" in out
    interrupted_at = int(re.search(r"saved step (\d+)", out).group(1))
    assert 0 < interrupted_at < 3000

    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    resumed_at = int(re.search(r"at step (\d+)", second.stdout).group(1))
    assert resumed_at == interrupted_at > 0
    accuracy = float(re.search(r"test accuracy: (\d\.\d+)", second.stdout).group(1))
    assert accuracy >= 0.90

    # the interrupted and resumed run ends with exactly the parameters of an uninterrupted one
    import ferry

    straight = tmp_path / "straight"
    assert main(["demo", "--steps", "3000", "--every", "50", "--dir", str(straight)]) == 0
    resumed, uninterrupted = ferry.load(tmp_path / "model.safetensors"), ferry.load(straight / "model.safetensors")
    assert resumed.keys() == uninterrupted.keys()
    for key in resumed:
        assert torch.equal(resumed[key], uninterrupted[key]), key


def test_demo_refuses_to_resume_with_another_seed(tmp_path, capsys):
    assert main(["demo", "--steps", "100", "--every", "50", "--dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["demo", "--steps", "200", "--every", "50", "--dir", str(tmp_path), "--seed", "5"]) == 2
    err = capsys.readouterr().err
    assert "started with --seed 0, not --seed 5" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--device", "meta"], "cannot train on meta"),
        (["--dir", "FILE"], "cannot create checkpoint directory"),
    ],
)
def test_demo_errors_are_messages_not_tracebacks(tmp_path, capsys, args, expected):
    (tmp_path / "file").write_text("not a folder")
    args = [str(tmp_path / "file" / "sub") if a == "FILE" else a for a in args]
    assert main(["demo", "--steps", "10", *args]) == 2
    assert expected in capsys.readouterr().err
