"""ferry.save / load / verify on object storage: a real S3 server (SeaweedFS, tests/_s3.py) and fsspec's memory://."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import _s3
import ferry
from ferry._remote import PART_BYTES, is_url
from ferry.checkpoint.file import writer
from ferry.errors import ArgumentError, CheckpointError, CorruptCheckpointError

#: Float32 elements of a tensor that fills 1.5 upload parts: its file goes up as a multipart upload of two parts.
BIG = PART_BYTES * 3 // 2 // 4


def _state(version: int = 0) -> dict[str, object]:
    return {
        "model": {"w": torch.full((64, 32), float(version)), "b": torch.arange(7, dtype=torch.int64)},
        "optimizer": {"state": {0: {"step": torch.tensor(3.0)}}, "param_groups": [{"lr": 0.1, "params": [0]}]},
        "half": torch.ones(5, dtype=torch.bfloat16),
        "step": version,
        "name": "run-a",
    }


def _equal(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_urls_are_told_from_local_paths() -> None:
    for url in ("s3://bucket/key", "memory://x/y", "gs://b/k"):
        assert is_url(url)
    for local in ("file:///tmp/x", "/tmp/x", "runs/a", None):
        assert not is_url(local)


def test_memory_round_trip_and_verify() -> None:
    state = _state(1)
    ferry.save(state, "memory://ferry-tests/round-trip.safetensors")
    assert _equal(ferry.load("memory://ferry-tests/round-trip.safetensors"), state)
    ferry.verify("memory://ferry-tests/round-trip.safetensors")


def test_storage_options_with_a_local_path_are_refused(tmp_path) -> None:
    with pytest.raises(ArgumentError, match="storage options for a local path"):
        ferry.save(_state(), tmp_path / "a.safetensors", storage_options={"key": "k"})
    assert not (tmp_path / "a.safetensors").exists()


def test_s3_round_trip_of_a_training_state(s3_server: _s3.S3Server) -> None:
    bucket = s3_server.bucket("round-trip")
    url = f"s3://{bucket}/run/model.safetensors"
    state = _state(2)
    ferry.save(state, url, storage_options=s3_server.options())
    assert _equal(ferry.load(url, storage_options=s3_server.options()), state)
    ferry.verify(url, storage_options=s3_server.options())
    assert ferry.load(url, device="meta", storage_options=s3_server.options())["model"]["w"].device.type == "meta"


def test_s3_multipart_upload_round_trip_and_overwrite(s3_server: _s3.S3Server) -> None:
    bucket = s3_server.bucket("multipart")
    url = f"s3://{bucket}/big.safetensors"
    options = s3_server.options()
    big = {"w": torch.randn(BIG), "step": 1}
    ferry.save(big, url, storage_options=options)
    again = {"w": torch.randn(BIG), "step": 2}
    ferry.save(again, url, storage_options=options)
    assert _equal(ferry.load(url, storage_options=options), again)


def test_a_damaged_object_is_detected(s3_server: _s3.S3Server) -> None:
    import s3fs

    bucket = s3_server.bucket("damaged")
    url = f"s3://{bucket}/model.safetensors"
    ferry.save({"w": torch.arange(1000, dtype=torch.float32)}, url, storage_options=s3_server.options())
    fs = s3fs.S3FileSystem(**s3_server.options())
    data = bytearray(fs.cat_file(f"{bucket}/model.safetensors"))
    data[-100] ^= 0xFF  # one byte of the tensor data
    fs.pipe_file(f"{bucket}/model.safetensors", bytes(data))
    with pytest.raises(CorruptCheckpointError, match="checksum"):
        ferry.load(url, storage_options=s3_server.options())
    with pytest.raises(CorruptCheckpointError, match="checksum"):
        ferry.verify(url, storage_options=s3_server.options())
    fs.pipe_file(f"{bucket}/model.safetensors", bytes(data[: len(data) // 2]))
    with pytest.raises(CorruptCheckpointError, match="truncated"):
        ferry.load(url, storage_options=s3_server.options())


def test_wrong_credentials_and_a_missing_bucket_say_what_to_fix(s3_server: _s3.S3Server) -> None:
    bucket = s3_server.bucket("errors")
    url = f"s3://{bucket}/model.safetensors"
    ferry.save(_state(1), url, storage_options=s3_server.options())
    wrong = s3_server.options(secret="not-the-secret")
    with pytest.raises(CheckpointError, match="refused the credentials") as saved:
        ferry.save(_state(2), url, storage_options=wrong)
    assert "Nothing already stored under that name was changed" in str(saved.value)
    assert saved.value.url == url
    with pytest.raises(CheckpointError, match="refused the credentials"):
        ferry.load(url, storage_options=wrong)
    with pytest.raises(CheckpointError, match="bucket 'no-such-bucket' does not exist"):
        ferry.save(_state(), "s3://no-such-bucket/model.safetensors", storage_options=s3_server.options())
    with pytest.raises(CheckpointError, match="bucket 'no-such-bucket' does not exist"):
        ferry.load("s3://no-such-bucket/model.safetensors", storage_options=s3_server.options())
    with pytest.raises(CheckpointError, match="no object at that path"):
        ferry.load(f"s3://{bucket}/absent.safetensors", storage_options=s3_server.options())
    assert _equal(ferry.load(url, storage_options=s3_server.options()), _state(1))


def test_an_unreachable_server_is_reported(s3_server: _s3.S3Server) -> None:
    options = s3_server.options(client_kwargs={"endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1"})
    with pytest.raises(CheckpointError, match="cannot be reached"):
        ferry.save(_state(), "s3://any/model.safetensors", storage_options=options)


def test_a_failed_save_leaves_the_previous_object(s3_server: _s3.S3Server, monkeypatch) -> None:
    import s3fs

    bucket = s3_server.bucket("failed-save")
    url = f"s3://{bucket}/model.safetensors"
    ferry.save(_state(1), url, storage_options=s3_server.options())
    with pytest.raises(CheckpointError, match="bad"):  # refused before anything is sent
        ferry.save({"w": torch.ones(3), "bad": object()}, url, storage_options=s3_server.options())
    # a failure in the middle of a multipart upload, after several parts went up: the upload is aborted
    calls = {"n": 0}
    real = writer._host_bytes

    def failing(tensor):
        calls["n"] += 1
        if calls["n"] > 3:  # after both checksums and the first tensor, more than a part
            raise OSError("the disk holding the tensors went away")
        return real(tensor)

    monkeypatch.setattr(writer, "_host_bytes", failing)
    big = {"a": torch.randn(BIG), "b": torch.randn(1 << 20)}
    with pytest.raises(CheckpointError, match="went away"):
        ferry.save(big, url, storage_options=s3_server.options())
    monkeypatch.undo()
    assert _equal(ferry.load(url, storage_options=s3_server.options()), _state(1))
    fs = s3fs.S3FileSystem(**s3_server.options())
    assert fs.list_multipart_uploads(bucket) == [], "the aborted upload is gone"


_WRITER = textwrap.dedent(
    """
    import json, sys, torch, ferry
    url, options, size = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    version = 2
    while True:
        ferry.save({"w": torch.full((size,), float(version)), "version": version}, url, storage_options=options)
        print(version, flush=True)
        version += 1
    """
)


def test_kill_9_during_uploads_never_damages_the_object(s3_server: _s3.S3Server) -> None:
    """A writer killed at random moments of multipart uploads: the object is always one complete version."""
    bucket = s3_server.bucket("killed")
    url = f"s3://{bucket}/model.safetensors"
    options = s3_server.options()
    ferry.save({"w": torch.full((BIG,), 1.0), "version": 1}, url, storage_options=options)
    rng = random.Random(13)
    seen = set()
    for _ in range(6):
        command = [sys.executable, "-c", _WRITER, url, json.dumps(options), str(BIG)]
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as writer:
            assert writer.stdout is not None
            first = writer.stdout.readline()  # its first save has completed: later ones overwrite a real object
            assert first.strip().isdigit(), f"the writer failed before its first save: {first!r}"
            time.sleep(rng.uniform(0.0, 1.5))  # each save takes a fraction of a second: kill at any moment of one
            writer.send_signal(signal.SIGKILL)
            writer.wait(30)
        back = ferry.load(url, storage_options=options)
        version = back["version"]
        assert torch.equal(back["w"], torch.full((BIG,), float(version))), version
        seen.add(version)
    assert max(seen) > 1, f"the writer completed saves between the kills: versions seen {sorted(seen)}"


def test_ferry_ckpt_verify_checks_an_object_by_its_url(s3_server: _s3.S3Server, capsys) -> None:
    import s3fs

    from ferry.cli.ckpt import main

    bucket = s3_server.bucket("cli-verify")
    url = f"s3://{bucket}/model.safetensors"
    ferry.save(_state(3), url, storage_options=s3_server.options())
    options = json.dumps(s3_server.options())
    assert main(["verify", url, "--storage-options", options, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"]
    assert report["checked"][0]["path"] == url
    fs = s3fs.S3FileSystem(**s3_server.options())
    data = bytearray(fs.cat_file(f"{bucket}/model.safetensors"))
    data[-3] ^= 0x01
    fs.pipe_file(f"{bucket}/model.safetensors", bytes(data))
    assert main(["verify", url, "--storage-options", options]) == 1
    assert "checksum" in capsys.readouterr().out
    assert main(["verify", url, "--storage-options", "[1, 2]"]) == 2
    assert "must be a JSON object" in capsys.readouterr().err
    assert main(["verify", "runs/a", "--storage-options", options]) == 2
    assert "is for URLs of object storage" in capsys.readouterr().err
