import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from _support import one_launch_at_a_time
from ferry.cli import main
from ferry.cli.demo import _rank_device_type
from ferry.errors import ArgumentError

pytest.importorskip("sklearn")

# --nproc N > 1: (--device, environment, torch.cuda.device_count(), N, the ranks' device type)
NPROC_DEVICES = [
    (None, {}, 0, 2, "cpu"),
    (None, {}, 2, 2, "cuda"),
    (None, {}, 8, 2, "cuda"),
    ("cpu", {}, 2, 2, "cpu"),
    ("cuda", {}, 2, 2, "cuda"),
    (None, {"FERRY_DEVICE": "cpu"}, 2, 4, "cpu"),
    (None, {"FERRY_DEVICE": "auto"}, 2, 2, "cuda"),
    ("cpu", {"FERRY_DEVICE": "cuda:0"}, 2, 2, "cpu"),  # --device wins, as in pick_device
]

# (--device, environment, torch.cuda.device_count(), N, words the message must hold)
BAD_NPROC_DEVICES = [
    (None, {}, 1, 2, "--nproc 2 needs 2 CUDA GPUs (one per rank, for nccl) but this machine has 1. Pass --nproc 1"),
    ("cuda", {}, 0, 2, "torch sees no CUDA GPU here. Pass --device cpu"),
    ("cuda:1", {}, 2, 2, "--device 'cuda:1' does not fit --nproc 2: every rank takes its own device"),
    ("meta", {}, 0, 2, "--device 'meta' does not fit"),
    (None, {"FERRY_DEVICE": "cuda:0"}, 2, 2, "FERRY_DEVICE 'cuda:0' does not fit --nproc 2"),
]


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
    # 100 steps straight vs a run stopped at step 60 (--stop-at), then resumed to 100: the same final weights
    import ferry

    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["demo", "--steps", "100", "--every", "30", "--dir", str(a)]) == 0
    assert main(["demo", "--steps", "100", "--every", "30", "--dir", str(b), "--stop-at", "60"]) == 0
    assert "interrupted: saved step 60" in capsys.readouterr().out
    assert main(["demo", "--steps", "100", "--every", "30", "--dir", str(b)]) == 0
    assert "resumed from" in capsys.readouterr().out
    wa, wb = ferry.load(a / "model.safetensors"), ferry.load(b / "model.safetensors")
    assert wa.keys() == wb.keys()
    for key in wa:
        assert (wa[key] == wb[key]).all(), key


def sigterm_after_first_checkpoint(command, env, checkpoints):
    """Start ``command``, send it SIGTERM once a step folder exists in ``checkpoints``; its output and process."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 300  # generous: a loaded 2-core machine starts torch slowly
    while not (checkpoints.is_dir() and any(p.name.startswith("step-") for p in checkpoints.iterdir())):
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=300)
    return out, proc


@pytest.mark.slow
def test_demo_survives_sigterm_and_resumes(tmp_path):
    command = [sys.executable, "-m", "ferry", "demo", "--steps", "300", "--every", "50", "--dir", str(tmp_path)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out, proc = sigterm_after_first_checkpoint(command, env, tmp_path / "checkpoints")
    assert proc.returncode == 128 + signal.SIGTERM, out  # saved, and "interrupted" to a scheduler
    assert "interrupted: saved step" in out
    assert "Run the same command again to resume" in out
    interrupted_at = int(re.search(r"saved step (\d+)", out).group(1))
    assert 0 < interrupted_at < 300

    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    resumed_at = int(re.search(r"at step (\d+)", second.stdout).group(1))
    assert resumed_at == interrupted_at > 0
    accuracy = float(re.search(r"test accuracy: (\d\.\d+)", second.stdout).group(1))
    assert accuracy >= 0.90

    # the interrupted and resumed run ends with exactly the parameters of an uninterrupted one
    import ferry

    straight = tmp_path / "straight"
    assert main(["demo", "--steps", "300", "--every", "50", "--dir", str(straight)]) == 0
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
        (["--dir", "FILE"], "cannot train in --dir"),
    ],
)
def test_demo_errors_are_messages_not_tracebacks(tmp_path, capsys, args, expected):
    (tmp_path / "file").write_text("not a folder")
    args = [str(tmp_path / "file" / "sub") if a == "FILE" else a for a in args]
    assert main(["demo", "--steps", "10", *args]) == 2
    assert expected in capsys.readouterr().err


# --- --nproc ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("device", "environ", "gpus", "nproc", "expected"), NPROC_DEVICES)
def test_nproc_chooses_one_device_type_for_every_rank(device, environ, gpus, nproc, expected):
    assert expected == _rank_device_type(device, environ, gpus, nproc)


@pytest.mark.parametrize(("device", "environ", "gpus", "nproc", "words"), BAD_NPROC_DEVICES)
def test_nproc_refuses_devices_it_cannot_split(device, environ, gpus, nproc, words):
    with pytest.raises(ArgumentError) as caught:
        _rank_device_type(device, environ, gpus, nproc)
    assert words in str(caught.value)


def test_demo_rejects_bad_nproc(capsys):
    assert main(["demo", "--nproc", "0"]) == 2
    assert "--nproc (0) must be >= 1" in capsys.readouterr().err
    assert main(["demo", "--dir", ""]) == 2
    assert "--dir is empty" in capsys.readouterr().err
    assert main(["demo", "--nproc", "2", "--device", "meta"]) == 2  # refused before anything is launched
    err = capsys.readouterr().err
    assert "--device 'meta' does not fit --nproc 2" in err
    assert "Traceback" not in err


def _weights(directory):
    import ferry

    return ferry.load(directory / "model.safetensors")


@pytest.mark.launches
@pytest.mark.slow
def test_demo_on_two_ranks_survives_sigterm_to_the_launcher_and_resumes_exactly(tmp_path, capfd):
    # 2 ranks for 100 steps straight (in this process) vs 2 ranks whose launcher gets SIGTERM after the first
    # checkpoint (mid-epoch), then resumed: the same weights
    with one_launch_at_a_time():  # 2 ranks, three launches
        a, b = tmp_path / "a", tmp_path / "b"
        assert main(["demo", "--nproc", "2", "--steps", "100", "--every", "50", "--dir", str(a)]) == 0
        out = capfd.readouterr().out
        assert 1 == out.count("ferry demo: training on 2 ranks (cpu, gloo)")  # only rank 0 prints
        assert "outputs match the trained model" in out
        assert ["step-000000050", "step-000000100"] == sorted(p.name for p in (a / "checkpoints").iterdir())
        assert {"rng-00000.safetensors", "rng-00001.safetensors"} <= {p.name for p in (a / "checkpoints").glob("*/*")}

        command = [sys.executable, "-m", "ferry", "demo", "--nproc", "2", "--steps", "100", "--every", "10"]
        command += ["--dir", str(b)]
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "FERRY_DEVICE")}
        env["PYTHONUNBUFFERED"] = "1"
        checkpoints = b / "checkpoints"
        out, proc = sigterm_after_first_checkpoint(command, env, checkpoints)
        assert proc.returncode == 128 + signal.SIGTERM, out
        assert "Traceback" not in out
        interrupted_at = int(re.search(r"interrupted: saved step (\d+)", out).group(1))
        assert 10 <= interrupted_at < 100
        assert [f"step-{interrupted_at:09d}"] == [p.name for p in checkpoints.glob(f"step-*{interrupted_at}")]
        assert f"ferry demo --dir {b} --steps 100 --every 10 --seed 0 --nproc 2" in " ".join(out.split())  # rich wraps

        second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        assert second.returncode == 0, second.stdout + second.stderr
        assert interrupted_at == int(re.search(r"at step (\d+)", second.stdout).group(1))

        wa, wb = _weights(a), _weights(b)
        assert wa.keys() == wb.keys() == build_keys()
        for key in wa:
            assert torch.equal(wa[key], wb[key]), key


def build_keys():
    from ferry.cli.demo import build_model

    return build_model().state_dict().keys()
