"""The Checkpointer under torch.distributed: sharded layout, DCP storage, resharding, faults, exact resume.

Fast tests run in this process inside a 1-rank gloo process group (the same code path as N ranks, every collective
included); the ``slow`` ones launch 1, 2 and 4 ranks with torchrun (tests/_workers/checkpoint_worker.py).
"""

import json
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

import checkpoint_worker
import ferry
from _support import WORKERS, one_launch_at_a_time
from ferry.checkpoint.folder import is_plain_dcp
from ferry.checkpoint.sharded import storage as dcp
from ferry.errors import CheckpointError, CorruptCheckpointError

WORKER = WORKERS / "checkpoint_worker.py"
LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "FERRY_DEVICE")


@pytest.fixture
def plain_process(monkeypatch):
    for name in LAUNCH_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def group(plain_process):
    """A 1-rank gloo process group in this process: the Checkpointer takes its distributed path."""
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    yield
    dist.destroy_process_group()


def mlp(seed=0, hidden=8):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 2))


def trained(seed=0):
    model = mlp(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.9))
    for _ in range(2):
        model(torch.randn(3, 4)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    return model, optimizer


def same_state(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def flip_byte(path, offset_from_end=3):
    data = bytearray(path.read_bytes())
    data[-offset_from_end] ^= 0x40
    path.write_bytes(bytes(data))


# --- in one process, inside a process group ----------------------------------------------------------------------


def test_sharded_layout_and_manifest(group, tmp_path):
    model, optimizer = trained()
    with ferry.Checkpointer(tmp_path) as ckpt:
        folder = ckpt.save(
            5, {"model": model, "optimizer": optimizer, "sampler": ferry.ResumableSampler(range(4)), "lr": 0.1}
        )
    files = sorted(p.name for p in folder.iterdir())
    assert [
        "manifest.json",
        "rng-00000.safetensors",
        "shard-00000.safetensors",
        "shards.json",
        "state.safetensors",
    ] == files
    manifest = json.loads((folder / "manifest.json").read_text())
    assert ("sharded", 1, ["model", "optimizer"]) == (manifest["layout"], manifest["world_size"], manifest["sharded"])
    assert (["model", "optimizer", "sampler"], ["lr"]) == (manifest["objects"], manifest["values"])
    assert set(files) - {"manifest.json"} == set(manifest["files"])
    assert 64 == len(manifest["files"]["shards.json"]["sha256"])
    # no pickle anywhere: JSON files parse, every other file is a ferry file that verifies
    for path in folder.iterdir():
        if path.suffix == ".json":
            json.loads(path.read_text())
        else:
            ferry.verify(path)
            assert not path.read_bytes().startswith((b"\x80", b"PK"))


def test_round_trip_restores_modules_optimizers_objects_values_and_rng(group, tmp_path):
    model, optimizer = trained()
    sampler = ferry.ResumableSampler(range(10), seed=1)
    next(iter(sampler))
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(3, {"model": model, "optimizer": optimizer, "sampler": sampler, "epoch": 2, "t": torch.ones(2)})
        expected_draw = torch.rand(3)
        fresh, fresh_optimizer = mlp(seed=9), None
        fresh_optimizer = torch.optim.Adam(fresh.parameters(), lr=0.5)
        fresh_sampler = ferry.ResumableSampler(range(10), seed=1)
        state = {"model": fresh, "optimizer": fresh_optimizer, "sampler": fresh_sampler, "epoch": 0, "t": None}
        assert 3 == ckpt.restore(state)
    assert torch.equal(expected_draw, torch.rand(3))  # the RNG states came back
    assert same_state(model.state_dict(), fresh.state_dict())
    saved, restored = optimizer.state_dict(), fresh_optimizer.state_dict()
    assert saved["param_groups"] == restored["param_groups"]  # lr 0.01 and the betas tuple, from JSON
    for index, entry in saved["state"].items():
        assert same_state(entry, restored["state"][index])
    assert (sampler.state_dict(), 2) == (fresh_sampler.state_dict(), state["epoch"])
    assert torch.equal(torch.ones(2), state["t"])


def test_a_sharded_checkpoint_restores_in_a_plain_process(plain_process, tmp_path):
    model, optimizer = trained()
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        with ferry.Checkpointer(tmp_path) as ckpt:
            ckpt.save(1, {"model": model, "optimizer": optimizer})
    finally:
        dist.destroy_process_group()
    fresh = mlp(seed=4)
    fresh_optimizer = torch.optim.Adam(fresh.parameters())
    with ferry.Checkpointer(tmp_path) as ckpt:
        assert 1 == ckpt.restore({"model": fresh, "optimizer": fresh_optimizer})
        assert tmp_path / "step-000000001" == ckpt.latest()
    assert same_state(model.state_dict(), fresh.state_dict())
    assert 2 == fresh_optimizer.state_dict()["state"][0]["step"].item()


def test_a_damaged_piece_is_skipped_for_the_previous_checkpoint(group, tmp_path):
    model, optimizer = trained()
    state = {"model": model, "optimizer": optimizer}
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, state)
        first = {k: v.clone() for k, v in model.state_dict().items()}
        with torch.no_grad():
            model[0].weight.add_(1.0)
        ckpt.save(2, state)
        flip_byte(tmp_path / "step-000000002" / "shard-00000.safetensors")
        with pytest.warns(ferry.CheckpointWarning, match=r"step-000000002.* does not verify and is skipped"):
            assert 1 == ckpt.restore(state)
        assert same_state(first, model.state_dict())
        with pytest.raises(CorruptCheckpointError, match="checksum"):
            ckpt.restore(state, step=2)
        with pytest.warns(ferry.CheckpointWarning, match="does not verify"):
            assert tmp_path / "step-000000001" == ckpt.latest()


def test_a_changed_metadata_file_fails_its_checksum(group, tmp_path):
    model, optimizer = trained()
    with ferry.Checkpointer(tmp_path) as ckpt:
        folder = ckpt.save(1, {"model": model, "optimizer": optimizer})
        text = (folder / "shards.json").read_text()
        (folder / "shards.json").write_text(text.replace('"lr"', '"LR"', 1)[:-1] + " ")  # same size, other bytes
        with pytest.raises(CorruptCheckpointError, match=r"shards\.json.*SHA-256.*changed after it was saved"):
            ckpt.restore({"model": model}, step=1)


def test_a_missing_rank_file_makes_the_checkpoint_incomplete(group, tmp_path):
    model, optimizer = trained()
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {"model": model, "optimizer": optimizer})
        ckpt.save(2, {"model": model, "optimizer": optimizer})
        (tmp_path / "step-000000002" / "shard-00000.safetensors").unlink()
        with pytest.warns(ferry.CheckpointWarning, match=r"incomplete.*shard-00000\.safetensors is missing"):
            assert 1 == ckpt.restore({"model": model, "optimizer": optimizer})


def test_a_module_that_does_not_fit_is_refused_and_left_untouched(group, tmp_path):
    model, _ = trained()
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {"model": model})
        other = mlp(seed=3, hidden=5)
        before = {k: v.clone() for k, v in other.state_dict().items()}
        with pytest.raises(
            CheckpointError,
            match=r"module 'model' does not fit.*different shapes.*0\.weight: saved \[8, 4\], live \[5, 4\]",
        ):
            ckpt.restore({"model": other})
    assert same_state(before, other.state_dict())


def test_an_optimizer_without_its_module_is_refused_before_anything_is_written(group, tmp_path):
    _model, optimizer = trained()
    with ferry.Checkpointer(tmp_path) as ckpt:
        with pytest.raises(CheckpointError, match=r"optimizer 'optimizer' has parameters that belong to no module"):
            ckpt.save(1, {"optimizer": optimizer})
        assert [] == ckpt.steps()
    assert [] == [p.name for p in tmp_path.iterdir() if p.name.startswith("step-")]


def test_a_failed_save_leaves_no_folder_and_the_previous_checkpoint(group, tmp_path):
    model, optimizer = trained()
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {"model": model, "optimizer": optimizer})
        with pytest.raises(CheckpointError, match=r"saving step 2 .* failed; the previous checkpoints are untouched"):
            ckpt.save(2, {"model": model, "optimizer": optimizer, "bad": object()})
        assert [1] == ckpt.steps()
        assert ["step-000000001"] == sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
        assert 1 == ckpt.restore({"model": model, "optimizer": optimizer})


def test_async_save_warns_once_and_saves_synchronously(group, tmp_path):
    model, _ = trained()
    with ferry.Checkpointer(tmp_path, async_save=True) as ckpt:
        with pytest.warns(ferry.CheckpointWarning, match="async_save=True has no effect under torch.distributed") as w:
            ckpt.save(1, {"model": model})
        assert __file__ == w[0].filename  # the warning points at the caller's line, not into ferry
        ckpt.save(2, {"model": model})  # no second warning (filterwarnings = error)
        assert [1, 2] == ckpt.steps()


def test_save_if_due_saves_on_schedule_in_a_group(group, tmp_path):
    model, _ = trained()
    with ferry.Checkpointer(tmp_path, every_steps=2) as ckpt:
        assert [False, True, False, True] == [ckpt.save_if_due(step, {"model": model}) for step in (1, 2, 3, 4)]
        assert [2, 4] == ckpt.steps()


# --- ferry's DCP storage used directly ---------------------------------------------------------------------------


def test_dcp_storage_refuses_pickled_values(plain_process, tmp_path):
    state = {"lr": 0.1, "w": torch.ones(2)}
    with (
        pytest.warns(UserWarning, match="torch.distributed is disabled"),  # DCP's notice for one process
        pytest.raises(CheckpointException, match="FerrySavePlanner"),
    ):
        dcp_save(state, storage_writer=dcp.FerryStorageWriter(tmp_path), planner=DefaultSavePlanner(), no_dist=True)


def test_read_metadata_refuses_plain_dcp_folders(plain_process, tmp_path):
    from torch.distributed.checkpoint.filesystem import FileSystemWriter

    with pytest.warns(UserWarning, match="torch.distributed is disabled"):
        dcp_save({"w": torch.ones(2)}, storage_writer=FileSystemWriter(tmp_path), no_dist=True)
    assert is_plain_dcp(tmp_path)
    with pytest.raises(CheckpointError, match=r"pickle.*ferry ckpt convert --trusted"):
        dcp.read_metadata(tmp_path)


# --- several ranks under torchrun --------------------------------------------------------------------------------


def torchrun(nproc, scenario, out, *args, check=True):
    """Run the worker's ``scenario`` on ``nproc`` CPU ranks; each rank's JSON (None if the run failed)."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
    with one_launch_at_a_time():
        done = subprocess.run(
            [*command, str(WORKER), scenario, str(out), *map(str, args)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    if not check:
        return done
    assert 0 == done.returncode, done.stdout + done.stderr
    return [json.loads((out / f"{scenario}-rank{rank}.json").read_text()) for rank in range(nproc)]


@pytest.mark.launches
@pytest.mark.slow
def test_two_rank_ddp_run_resumes_exactly(tmp_path):
    # one launch: an uninterrupted 7-step run, and a run stopped after the checkpoint of step 3
    first = torchrun(2, "exact", tmp_path, tmp_path, 7, 3, 3)
    # a new launch resumes the stopped run from step 3
    resumed = torchrun(2, "resume", tmp_path, tmp_path, 7, 3)
    for rank in range(2):
        whole, cut, rest = first[rank]["whole"], first[rank]["cut"], resumed[rank]
        assert (3, 7) == (cut["done"], rest["done"])
        assert whole["losses"] == cut["losses"] + rest["losses"]  # same batches, dropout masks and noise per rank
        assert whole["params"] == rest["params"]  # bit for bit
        assert whole["rand"] == rest["rand"]  # and the RNG ends where it would have
    assert first[0]["whole"]["losses"] != first[1]["whole"]["losses"]  # the ranks saw different data
    folder = tmp_path / "cut" / "step-000000006"
    # DDP's replicated state is written once, by rank 0; each rank wrote its RNG states
    assert ["rng-00000.safetensors", "rng-00001.safetensors", "shard-00000.safetensors"] == sorted(
        p.name for p in folder.glob("*.safetensors") if p.name != "state.safetensors"
    )


@pytest.mark.launches
@pytest.mark.slow
def test_fsdp2_checkpoints_reshard_across_world_sizes(tmp_path):
    one, two, plain = tmp_path / "one-rank", tmp_path / "two-ranks", tmp_path / "plain"
    saved_by_plain = checkpoint_worker.save_fsdp(plain)  # this process, no process group: the plain layout
    saved_by_one = torchrun(1, "save_fsdp", tmp_path, one)[0]
    ranks = torchrun(2, "save_and_restore_fsdp", tmp_path, two, one, plain)
    saved_by_two = ranks[0]["saved"]
    for rank in ranks:
        assert rank["saved"] == saved_by_two
        # 2 -> 2, 1 -> 2, plain process -> 2
        for restored, expected in (
            (rank["same"], saved_by_two),
            (rank["other"], saved_by_one),
            (rank["plain"], saved_by_plain),
        ):
            assert (2, 7, 0.01) == (restored["step"], restored["epoch"], restored["lr"])
            assert expected["params"] == restored["params"]
            assert expected["optimizer"] == restored["optimizer"]
    # a plain process's checkpoint under 2 ranks: rank 0 takes its RNG states, rank 1 keeps its own, and rank 0 warns
    assert ranks[0]["plain"]["rand"] != ranks[1]["plain"]["rand"]
    assert ["saved by 1 rank and is restored by 2 ranks"] == [
        w[w.index("saved by") : w.index(":", w.index("saved by"))] for w in ranks[0]["plain"]["warned"]
    ]
    assert [] == ranks[1]["plain"]["warned"]
    assert [[32, 8, 48, 3, 6, 1], [32, 8, 48, 3, 0, 0]] == [rank["same"]["local"] for rank in ranks]
    # tied weights shard together; BatchNorm statistics that differ between ranks are reported once, by rank 0
    warned, quiet = ranks[0]["buffers_warning"], ranks[1]["buffers_warning"]
    assert ([], 1) == (quiet, len(warned))
    assert "the buffers ['model.1.running_mean', 'model.1.running_var'] differ between ranks" in warned[0]
    assert 2 == len(list((two / "step-000000002").glob("shard-*.safetensors")))  # each rank wrote its shards
    four = tmp_path / "four-ranks"
    for rank in torchrun(4, "restore_and_save_fsdp", tmp_path, two, four):  # 2 -> 4, then saved by 4 ranks
        assert saved_by_two["params"] == rank["params"]
        assert saved_by_two["optimizer"] == rank["optimizer"]
    assert 4 == len(list((four / "step-000000003").glob("shard-*.safetensors")))
    assert 4 == len(list((four / "step-000000003").glob("rng-*.safetensors")))
    # 2 -> 1: into a plain model and optimizer in this process
    model = mlp_like_worker()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.5)
    with (
        ferry.Checkpointer(two) as ckpt,
        pytest.warns(ferry.CheckpointWarning, match="saved by 2 ranks and is restored by 1 rank"),
    ):
        assert 2 == ckpt.restore({"model": model, "optimizer": optimizer})
    assert saved_by_two["params"] == [p.detach().flatten().tolist() for p in model.parameters()]
    assert 0.01 == optimizer.param_groups[0]["lr"]
    model = mlp_like_worker()  # 4 -> 1
    with (
        ferry.Checkpointer(four) as ckpt,
        pytest.warns(ferry.CheckpointWarning, match="saved by 4 ranks and is restored by 1 rank"),
    ):
        assert 3 == ckpt.restore({"model": model, "epoch": None})
    assert saved_by_two["params"] == [p.detach().flatten().tolist() for p in model.parameters()]


def mlp_like_worker():
    return nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.0), nn.ReLU(), nn.Linear(16, 6), nn.Linear(6, 1))


@pytest.mark.launches
@pytest.mark.slow
def test_a_rank_dying_mid_save_leaves_the_previous_checkpoint(tmp_path):
    directory = tmp_path / "run"
    done = torchrun(2, "die", tmp_path, directory, check=False)
    assert 0 != done.returncode
    assert "exitcode  : 17" in done.stderr  # rank 1 died in the middle of writing step 2
    refusals = [json.loads((directory / f"refusals-rank{rank}.json").read_text()) for rank in range(2)]
    assert refusals[0] == refusals[1]  # a failure on rank 1 alone: both ranks raised, neither hung
    assert all(not line.endswith("no error") for line in refusals[0]), refusals
    for rank in range(2):  # before that, the ranks passed different steps to one save: both refused
        message = (directory / f"mismatch-rank{rank}.txt").read_text()
        assert "the ranks passed different step (rank 0: 5; rank 1: 6)" in message
        message = (directory / f"due-rank{rank}.txt").read_text()
        assert "save_if_due: the ranks passed different steps (from 10 to 11)" in message
    with ferry.Checkpointer(directory) as ckpt:  # also removes what the dead save left
        assert [1, 3] == ckpt.steps()  # step 3 was saved for the failing-restore check; step 2 never committed
        assert not [p for p in directory.iterdir() if ".ferry-tmp-" in p.name]
        model = mlp_like_worker()
        with pytest.warns(ferry.CheckpointWarning, match="saved by 2 ranks"):
            assert 1 == ckpt.restore({"model": model}, step=1)
    saved = json.loads((directory / "saved-rank0.json").read_text())
    assert saved == [p.detach().flatten().tolist() for p in model.parameters()]


def test_read_pieces_reads_any_subset_of_a_file(tmp_path):
    # big tensors get memory of their own, small neighbours share; a subset leaves gaps between what is read
    sizes = {"a": 300_000, "b": 10, "c": 700_000, "d": 20, "e": 30, "f": 1_200_000}
    tensors = {name: torch.arange(n, dtype=torch.float32) * (i + 1) for i, (name, n) in enumerate(sizes.items())}
    path = tmp_path / "pieces.safetensors"
    ferry.save(tensors, path)
    for mask in range(1, 1 << len(tensors)):
        names = {name for bit, name in enumerate(tensors) if mask >> bit & 1}
        read = dcp.read_pieces(path, names)
        assert names == read.keys()
        for name in names:
            assert torch.equal(tensors[name], read[name]), (sorted(names), name)


def test_save_if_due_shares_a_preemption_in_a_group(group, tmp_path):
    model, _ = trained()
    with ferry.Checkpointer(tmp_path, every_seconds=3600) as ckpt:
        assert not ckpt.save_if_due(1, {"model": model})
        ckpt._on_signal(15, None)  # as the SIGTERM handler does
        assert ckpt.save_if_due(2, {"model": model})
        assert ckpt.preempted
        assert [2] == ckpt.steps()


def test_fsdp2_wrap_shards_tied_weights_together_and_saves_them(group, tmp_path):
    torch.manual_seed(0)
    embedding, head = nn.Embedding(10, 4), nn.Linear(4, 10, bias=False)
    head.weight = embedding.weight
    model = ferry.distributed.wrap(nn.Sequential(embedding, nn.ReLU(), head), strategy="fsdp")
    assert model[0].weight is model[2].weight
    model(torch.arange(3)).sum().backward()  # sharded one by one, this forward would raise
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {"model": model})
        fresh_embedding, fresh_head = nn.Embedding(10, 4), nn.Linear(4, 10, bias=False)
        fresh_head.weight = fresh_embedding.weight
        fresh = nn.Sequential(fresh_embedding, nn.ReLU(), fresh_head)
        assert 1 == ckpt.restore({"model": fresh})
    assert torch.equal(model[0].weight.full_tensor(), fresh[0].weight)
    assert fresh[0].weight is fresh[2].weight


@pytest.mark.parametrize("path", [[], ["model", 10**12], ["model", -1], ["model", True], ["model", 1.5]])
def test_metadata_with_an_unreasonable_path_is_refused(plain_process, tmp_path, path):
    with pytest.warns(UserWarning, match="torch.distributed is disabled"):
        dcp_save(
            {"model": {"w": torch.ones(2)}},
            storage_writer=dcp.FerryStorageWriter(tmp_path),
            planner=dcp.FerrySavePlanner(),
            no_dist=True,
        )
    document = json.loads((tmp_path / "shards.json").read_text())
    document["paths"]["model.w"] = path
    (tmp_path / "shards.json").write_text(json.dumps(document))
    with pytest.raises(CorruptCheckpointError, match=r"shards\.json.* is malformed"):
        dcp.read_metadata(tmp_path)


def edit_first_tensor(document, change):
    name = next(fqn for fqn, info in document["tensors"].items() if info.get("size"))
    change(document["tensors"][name], document)


CRAFTED_METADATA = [
    # (what is changed, what the error says)
    (
        lambda t, d: (t.update(size=[1 << 42]), t["chunks"][0].update(sizes=[1 << 42])),
        r"describes [\d,]+ bytes of tensors but its shard files hold",
    ),
    (lambda t, d: t.update(size=[-1]), r"is not a list of non-negative integers"),
    (lambda t, d: t["chunks"][0].update(offsets=[1]), r"reaches past its size"),
    (lambda t, d: t["chunks"].append(dict(t["chunks"][0])), r"overlap"),
    (lambda t, d: t.update(size=[t["size"][0] * 2]), r"hold \d+ of its \d+ elements"),
    (lambda t, d: d["storage"][0].update(file="../elsewhere.safetensors"), r"outside the checkpoint folder"),
]


@pytest.mark.parametrize(("change", "words"), CRAFTED_METADATA)
def test_crafted_metadata_is_refused_before_anything_is_allocated(plain_process, tmp_path, change, words):
    with pytest.warns(UserWarning, match="torch.distributed is disabled"):
        dcp_save(
            {"w": torch.ones(4), "b": torch.zeros(2)},
            storage_writer=dcp.FerryStorageWriter(tmp_path),
            planner=dcp.FerrySavePlanner(),
            no_dist=True,
        )
    document = json.loads((tmp_path / "shards.json").read_text())
    edit_first_tensor(document, change)
    (tmp_path / "shards.json").write_text(json.dumps(document))
    with pytest.raises(CorruptCheckpointError, match=words):
        dcp.read_metadata(tmp_path)


def test_a_failed_restore_hands_a_fresh_optimizer_back_fresh(group, tmp_path):
    model, optimizer = trained()
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {"model": model, "optimizer": optimizer})
        flip_byte(tmp_path / "step-000000001" / "shard-00000.safetensors")
        fresh = mlp(seed=2)
        fresh_optimizer = torch.optim.Adam(fresh.parameters())
        with pytest.raises(CorruptCheckpointError), pytest.warns(ferry.CheckpointWarning, match="does not verify"):
            ckpt.restore({"model": fresh, "optimizer": fresh_optimizer})
    assert {} == dict(fresh_optimizer.state)  # DCP's zero-lr step to build a state to read into was undone
    assert all(p.grad is None for p in fresh.parameters())


@pytest.mark.launches
def test_a_deferred_model_sharded_on_meta_materialises_each_ranks_shards_and_restores(tmp_path):
    ranks = torchrun(2, "deferred_fsdp", tmp_path, tmp_path / "run")
    for rank in ranks:
        assert rank["on_meta"]
        assert rank["made"] == rank["reference"]  # each rank's shards of the normal build, RoPE buffers included
        assert rank["shards"]["embed.weight"] == [10, 8]  # half of the 20 rows: its own shard only
        assert rank["restored_step"] == 3
        assert rank["restored"] == rank["made"]
        assert rank["tied"]
        assert rank["from_file"] == rank["plain"]  # load_state_dict(device=) reads each rank's shards from the file
