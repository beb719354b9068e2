import json
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

import ferry
import ferry.distributed
from _support import WORKERS, one_launch_at_a_time
from ferry._dist import Launch as _Launch
from ferry._dist import launch as _launch
from ferry.distributed import _check_backend, _init
from ferry.errors import ArgumentError, DistributedError

WORKER = WORKERS / "distributed_worker.py"
LAUNCH = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}

# (environment, what _launch reads from it)
LAUNCHES = [
    ({}, None),
    ({"LOCAL_RANK": "0"}, None),  # pick_device's business, not a process group
    ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", **LAUNCH}, _Launch(1, 2, 1)),
    ({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", **LAUNCH}, _Launch(3, 4, 1)),
]

# (environment, words the message must hold)
BAD_LAUNCHES = [
    ({"RANK": "0"}, "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT not set"),
    ({"WORLD_SIZE": "2", "LOCAL_RANK": "0", **LAUNCH}, "RANK not set"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "MASTER_ADDR, MASTER_PORT not set"),
    ({"RANK": "x", "WORLD_SIZE": "2", "LOCAL_RANK": "0", **LAUNCH}, "RANK='x' is not a non-negative integer"),
    ({"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0", **LAUNCH}, "RANK=2, LOCAL_RANK=0 and WORLD_SIZE=2"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "1", **LAUNCH}, "0 <= LOCAL_RANK <= RANK < WORLD_SIZE"),
]

BAD_BACKENDS = ["nccl-ish", "", 3, "cpu:gloo,cuda:bogus"]


@pytest.fixture
def single_process(monkeypatch):
    """A plain process, even when pytest itself runs under a launcher."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "FERRY_DEVICE"):
        monkeypatch.delenv(name, raising=False)


# --- a single process --------------------------------------------------------------------------------------------


def test_init_in_a_single_process_starts_nothing_and_returns_pick_device(single_process):
    assert ferry.pick_device() == ferry.distributed.init()
    assert ferry.pick_device() == ferry.distributed.init()  # twice is harmless
    assert not torch.distributed.is_initialized()


def test_wrap_in_a_single_process_returns_the_placed_model_unwrapped(single_process):
    for strategy in ("ddp", "fsdp"):
        model = nn.Linear(2, 2)
        assert model is ferry.distributed.wrap(model, strategy=strategy)
        assert ferry.pick_device() == ferry.module_device(model)


def test_rank_helpers_in_a_single_process(single_process):
    assert (0, 1, True) == (ferry.distributed.rank(), ferry.distributed.world_size(), ferry.distributed.is_main())
    assert ferry.distributed.barrier() is None


def test_rank_helpers_read_torchrun_before_init(monkeypatch):
    for name, value in {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", **LAUNCH}.items():
        monkeypatch.setenv(name, value)
    assert (1, 2, False) == (ferry.distributed.rank(), ferry.distributed.world_size(), ferry.distributed.is_main())
    with pytest.raises(DistributedError, match=r"Call ferry\.distributed\.init\(\) first"):
        ferry.distributed.barrier()


# --- the environment ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("environ", "expected"), LAUNCHES)
def test_launch_reads_torchrun(environ, expected):
    assert expected == _launch(environ)


@pytest.mark.parametrize(("environ", "words"), BAD_LAUNCHES)
def test_an_inconsistent_torchrun_environment_says_how_to_fix_it(environ, words):
    with pytest.raises(DistributedError, match="torchrun") as caught:
        _init(None, environ=environ)
    assert words in str(caught.value)
    assert environ == caught.value.variables


@pytest.mark.parametrize("backend", BAD_BACKENDS)
def test_a_bad_backend_is_an_argument_error_listing_the_good_ones(backend):
    with pytest.raises(ArgumentError, match=r"it has gloo.*backend=None"):
        _init(backend, environ={})


def test_good_backends_pass():
    assert "gloo" == _check_backend("gloo")
    assert "cpu:gloo" == _check_backend("cpu:gloo")


@pytest.mark.parametrize("strategy", ["DDP", "fsdp1", None])
def test_a_bad_strategy_is_an_argument_error(strategy, single_process):
    with pytest.raises(ArgumentError, match='strategy="ddp"'):
        ferry.distributed.wrap(nn.Linear(2, 2), strategy=strategy)


def test_wrap_refuses_a_tensor_and_a_wrapped_model(single_process):
    with pytest.raises(ArgumentError, match=r"needs an nn\.Module"):
        ferry.distributed.wrap(torch.zeros(2))
    from torch.distributed.fsdp import FSDPModule

    model = nn.Linear(2, 2)
    model.__class__ = type("FSDPLinear", (FSDPModule, nn.Linear), {})  # what fully_shard does to a module
    with pytest.raises(ArgumentError, match="already wrapped"):
        ferry.distributed.wrap(model)


def test_import_ferry_does_not_import_fsdp_or_dcp():
    code = (
        "import sys, ferry; print(ferry.distributed.__name__, 'torch.distributed.fsdp' in sys.modules, "
        "'torch.distributed.checkpoint' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "ferry.distributed False False" == out.strip()


# --- two ranks on gloo -------------------------------------------------------------------------------------------


def torchrun(scenario, tmp_path):
    """Run the worker's ``scenario`` on 2 CPU ranks (a free port chosen by --standalone); each rank's JSON."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "FERRY_DEVICE")}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    with one_launch_at_a_time():
        done = subprocess.run(
            [*command, str(WORKER), scenario, str(tmp_path)], capture_output=True, text=True, timeout=60, env=env
        )
    assert 0 == done.returncode, done.stdout + done.stderr
    return [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]


@pytest.mark.launches
@pytest.mark.slow
def test_init_and_ddp_on_two_ranks(tmp_path):
    ranks = torchrun("basics", tmp_path)
    assert [0, 1] == [r["rank"] for r in ranks]
    assert [2, 2] == [r["world_size"] for r in ranks]
    assert [True, False] == [r["is_main"] for r in ranks]
    for r in ranks:
        assert ("cpu", "cpu", "gloo", "DistributedDataParallel") == (r["device"], r["again"], r["backend"], r["type"])
    assert ranks[0]["loss"] != ranks[1]["loss"]  # different batches...
    assert ranks[0]["params"] == ranks[1]["params"]  # ...and the replicas stay equal
    assert ranks[0]["initial"] != ranks[0]["params"]  # after a real step


@pytest.mark.launches
@pytest.mark.slow
def test_fsdp2_on_two_ranks(tmp_path):
    ranks = torchrun("fsdp", tmp_path)
    for r in ranks:
        assert r["root"]
        assert [True, False, True] == r["children"]  # the ReLU holds no parameters
        assert [16, 4, 8, 1] == r["local_numels"]  # 32/2, 8/2, 16/2, ceil(2/2): sharded over 2 ranks
    assert ranks[0]["params"] == ranks[1]["params"]
    assert ranks[0]["loss"] != ranks[1]["loss"]


@pytest.mark.launches
@pytest.mark.slow
def test_sampler_splits_and_resumes_on_two_ranks(tmp_path):
    ranks = torchrun("sampler", tmp_path)
    assert [6, 6] == [r["len"] for r in ranks]  # ceil(11 / 2)
    for epoch in ("epoch0", "epoch1"):
        first, second = ranks[0][epoch], ranks[1][epoch]
        assert list(range(11)) == sorted(set(first) | set(second))  # covers the dataset
        assert 1 == len(first + second) - len(set(first + second))  # one index repeated as padding, as upstream
    for r in ranks:
        assert r["epoch0"] == r["resumed"]  # resumed mid-epoch exactly
        assert r["epoch1"] == r["next_epoch"]


@pytest.mark.launches
@pytest.mark.slow
def test_a_script_without_teardown_code_exits_cleanly(tmp_path):
    """init() owns the group it created: at exit a barrier, then destroy_process_group (gloo aborted otherwise)."""
    ranks = torchrun("no_teardown", tmp_path)
    assert [0, 1] == [r["rank"] for r in ranks]
    exits = [json.loads((tmp_path / f"exit{rank}.json").read_text()) for rank in range(2)]
    assert [{"initialized": False}, {"initialized": False}] == exits
    assert ferry.Checkpointer(tmp_path / "run", read_only=True).steps() == [1]


def test_teardown_leaves_a_group_the_script_destroyed_or_replaced_alone():
    import torch.distributed as dist

    from ferry import distributed

    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        distributed._own_teardown(object())  # a group that is no longer the one up
        distributed._teardown(timeout=1)
        assert dist.is_initialized()
        distributed._own_teardown(dist.group.WORLD)
        distributed._teardown(timeout=1)
        assert not dist.is_initialized()
        distributed._teardown(timeout=1)  # twice: nothing to do
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _workers_state_of(mode, *, want):
    """Start gloo_gil_holder.py in ``mode``; poll /proc until its gloo workers' busy state is ``want`` (20 s max)."""
    import time

    from ferry._dist import gloo_workers_busy

    child = subprocess.Popen([sys.executable, str(WORKERS / "gloo_gil_holder.py"), mode])
    try:
        deadline, seen = time.monotonic() + 60, []
        while time.monotonic() < deadline and child.poll() is None:
            state = gloo_workers_busy(str(child.pid))
            seen.append(state)
            if state is want and seen.count(want) >= 20:  # held for 20 polls, not a passing moment
                return seen
            time.sleep(0.05)
        return seen
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads gloo's worker threads from /proc")
def test_exit_sees_a_gloo_worker_waiting_for_the_gil_as_busy_and_an_idle_one_as_idle():
    # What let_gloo_workers_settle waits for at exit (the rank aborted when finalization began before it)
    held = _workers_state_of("hold", want=True)
    assert held.count(True) >= 20, held[-40:]
    released = _workers_state_of("release", want=False)
    assert released.count(False) >= 20, released[-40:]


def test_the_exit_settle_returns_at_once_without_gloo_workers_and_within_its_limit_with_busy_ones(monkeypatch):
    from ferry import _dist

    assert _dist.let_gloo_workers_settle(timeout=5) < 1  # none in this process, or idle ones
    monkeypatch.setattr(_dist, "gloo_workers_busy", lambda process="self": True)
    assert 0.2 <= _dist.let_gloo_workers_settle(timeout=0.2) < 2


def test_a_process_group_ferry_sees_registers_the_settle_at_exit_whoever_started_it(monkeypatch):
    # a script's own init_process_group, then a Checkpointer or sampler asking for the rank: the exit is covered
    import atexit

    import torch.distributed as dist

    from ferry import _dist

    registered = []
    monkeypatch.setattr(_dist, "_SETTLING", [])
    monkeypatch.setattr(atexit, "register", registered.append)
    assert _dist.process_group() is None
    assert [] == registered
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        assert (0, 1) == _dist.process_group()
        assert (0, 1) == _dist.process_group()
    finally:
        dist.destroy_process_group()
    assert [_dist.let_gloo_workers_settle] == registered
